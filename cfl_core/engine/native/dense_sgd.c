/* Local SGD of a dense ReLU stack under cross-entropy, eight clients abreast.

   The batched torch path runs a chunk of clients as one tensor program: every step streams the whole chunk's
   weights through the caches, several times. Here a group of eight clients runs all its local steps with its
   weights and activations held in the CPU's caches, and every float of the arithmetic sits in one lane of an
   eight-float vector: lane k is client k of the group. So each vector operation does one client's scalar
   operation for eight clients at once: no layer width has to fit the vector width (a 10-class output or a batch
   of 10 wastes nothing), no sum is folded across lanes, and a client's result does not depend on which clients
   share its group. The maths is the torch path's (cross-entropy averaged over the step's valid samples, softmax
   minus one-hot, ReLU passing gradient where its output is positive, PyTorch's SGD: g += decay * w;
   buf = momentum * buf + g; w -= lr * buf); only the order of the float additions differs, fixed by this
   source (so results do not depend on how clients are split over threads or groups).

   Layer l has weight rows [out][in] at params + w_off[l] and bias [out] at params + b_off[l] (the flat layout of
   cfl_core.engine.spec). While a group trains, each layer's weights are held as [out][in] vectors (lane k:
   client k's weight), with `in` rounded up to a multiple of DW_IN and `out` to a multiple of FW_OUT; the added
   rows and columns are zero and stay zero (they meet only zero inputs and zero gradients), so they change no
   result. A step's samples sit as [row][in] vectors, the rows rounded up to a multiple of FW_ROWS; the added rows,
   and a client's rows beyond its own samples, carry a zero gradient. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__AVX__)
#include <immintrin.h>
#endif

/* Eight floats, in registers (GCC's and clang's vector extension; without AVX the compiler uses two halves). */
typedef float vec __attribute__((vector_size(32)));
typedef int32_t mask __attribute__((vector_size(32)));
#define LANES 8

/* Register tiles of the three products (see forward, input_gradient, weight_step): each keeps 8-10 sums in
   registers and loads 6-7 vectors for them per term, so both of a core's FMA units stay busy. */
#define FW_ROWS 5 /* samples per tile of the forward and the input gradient */
#define FW_OUT 2  /* outputs per tile of the forward; inputs per tile of the input gradient */
#define DW_IN 4   /* inputs per tile of the weight gradient (its outputs: FW_OUT) */
_Static_assert(DW_IN % FW_OUT == 0, "a hidden width rounded up to DW_IN must also be a multiple of FW_OUT");

static inline int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
static inline vec splat(float v) { return (vec){0} + v; }
static inline vec pick(mask m, vec yes, vec no) { return (vec)((m & (mask)yes) | (~m & (mask)no)); }
/* v, held in a register: GCC otherwise folds a vector used by several multiply-adds into each of them as a
   memory operand, loading it once per use, and the loads, not the multiply-adds, then set the pace. */
static inline vec held(vec v) {
#if defined(__AVX__)
    __asm__("" : "+x"(v));
#endif
    return v;
}

/* to[j] = the j-th floats of the eight rows, lane k from rows[k], for j < n (`same`: the rows are one). */
static void gather(vec *restrict to, const float *const rows[LANES], int64_t n, int same) {
    int64_t j = 0;
    if (same) { /* every client starts from one model (FedAvg's): each float to every lane */
        for (; j < n; ++j) to[j] = splat(rows[0][j]);
        return;
    }
#if defined(__AVX__)
    for (; j + 8 <= n; j += 8) { /* one 8 x 8 tile in registers (the usual unpack / shuffle / permute sequence) */
        __m256 r[8], t[8], u[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(rows[i] + j);
        for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
        for (int i = 0; i < 8; i += 4) {
            u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
            u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
            u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
            u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
        }
        for (int i = 0; i < 4; ++i) {
            to[j + i] = (vec)_mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
            to[j + i + 4] = (vec)_mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
        }
    }
#endif
    for (; j < n; ++j)
        for (int k = 0; k < LANES; ++k) to[j][k] = rows[k][j];
}

/* rows[k][j] = from[j] lane k, for j < n and the first `count` lanes (rows of other lanes are not touched). */
static void scatter(float *const rows[LANES], int count, const vec *restrict from, int64_t n) {
    int64_t j = 0;
#if defined(__AVX__)
    if (count == LANES)
        for (; j + 8 <= n; j += 8) { /* the transpose of gather's tile */
            __m256 r[8], t[8], u[8];
            for (int i = 0; i < 8; ++i) r[i] = (__m256)from[j + i];
            for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
            for (int i = 0; i < 8; i += 4) {
                u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
                u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
                u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
                u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
            }
            for (int i = 0; i < 4; ++i) {
                _mm256_storeu_ps(rows[i] + j, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
                _mm256_storeu_ps(rows[i + 4] + j, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
            }
        }
#endif
    for (; j < n; ++j)
        for (int k = 0; k < count; ++k) rows[k][j] = from[j][k];
}

/* z[b][o] = bias[o] + sum_i a[b][i] * w[o][i] (i in order), through a ReLU unless it is the last layer. */
static void forward(vec *restrict z, int64_t zs, const vec *restrict a, int64_t as, const vec *restrict w,
                    int64_t ws, const vec *restrict bias, int64_t rows, int64_t in, int64_t out, int relu) {
    for (int64_t b = 0; b < rows; b += FW_ROWS) /* a tile's samples stay in L1 while the weights stream by */
        for (int64_t o = 0; o < out; o += FW_OUT) {
            vec s[FW_ROWS][FW_OUT];
            for (int r = 0; r < FW_ROWS; ++r)
                for (int c = 0; c < FW_OUT; ++c) s[r][c] = bias[o + c];
            const vec *ab = a + b * as, *wo = w + o * ws;
            for (int64_t i = 0; i < in; ++i) {
                vec wc[FW_OUT];
                for (int c = 0; c < FW_OUT; ++c) wc[c] = held(wo[c * ws + i]);
                for (int r = 0; r < FW_ROWS; ++r) {
                    const vec t = held(ab[r * as + i]);
                    for (int c = 0; c < FW_OUT; ++c) s[r][c] += t * wc[c];
                }
            }
            for (int r = 0; r < FW_ROWS; ++r)
                for (int c = 0; c < FW_OUT; ++c) {
                    vec v = s[r][c];
                    z[(b + r) * zs + o + c] = relu ? pick(v < 0.0f, (vec){0}, v) : v; /* NaN stays, as in torch */
                }
        }
}

/* e[b][i] = sum_o d[b][o] * w[o][i] (o in order) where a[b][i] > 0, else 0: the gradient at a layer's input,
   through the ReLU that made its input a. */
static void input_gradient(vec *restrict e, const vec *restrict d, int64_t ds, const vec *restrict w, int64_t ws,
                           const vec *restrict a, int64_t as, int64_t rows, int64_t in, int64_t out) {
    for (int64_t b = 0; b < rows; b += FW_ROWS)
        for (int64_t i = 0; i < in; i += FW_OUT) {
            vec s[FW_ROWS][FW_OUT];
            for (int r = 0; r < FW_ROWS; ++r)
                for (int c = 0; c < FW_OUT; ++c) s[r][c] = (vec){0};
            const vec *db = d + b * ds, *wi = w + i;
            for (int64_t o = 0; o < out; ++o) {
                vec wc[FW_OUT];
                for (int c = 0; c < FW_OUT; ++c) wc[c] = held(wi[o * ws + c]);
                for (int r = 0; r < FW_ROWS; ++r) {
                    const vec t = held(db[r * ds + o]);
                    for (int c = 0; c < FW_OUT; ++c) s[r][c] += t * wc[c];
                }
            }
            for (int r = 0; r < FW_ROWS; ++r)
                for (int c = 0; c < FW_OUT; ++c) {
                    int64_t at = (b + r) * as + i + c; /* e has a's row stride */
                    e[at] = pick(a[at] > 0.0f, s[r][c], (vec){0});
                }
        }
}

/* PyTorch's SGD on the lanes of one vector that took part in the step (`moving`: all of them when NULL). */
typedef struct {
    vec lr, momentum, decay;
    int has_momentum, has_decay;
    const mask *moving;
} Sgd;

static inline void sgd(vec *restrict w, vec *restrict buf, vec g, const Sgd s) {
    const vec old = *w;
    if (s.has_decay) g += s.decay * old;
    if (s.has_momentum) {
        g = s.momentum * *buf + g;
        *buf = s.moving ? pick(*s.moving, g, *buf) : g;
    }
    const vec next = old - s.lr * g;
    *w = s.moving ? pick(*s.moving, next, old) : next;
}

/* The weight gradient g[o][i] = sum_b d[b][o] * a[b][i] (b in order), each tile of it straight into the SGD
   step of w (and its momentum wbuf): the gradient is never stored. */
static void weight_step(vec *restrict w, vec *restrict wbuf, int64_t ws, const vec *restrict d, int64_t ds,
                        const vec *restrict a, int64_t as, int64_t rows, int64_t in, int64_t out,
                        const Sgd *sgd_args) {
    const Sgd s_ = *sgd_args; /* a copy: the weights' stores cannot change it, so it stays in registers */
    /* inputs outer: a tile's inputs (DW_IN of every sample) stay in L1 for all outputs; with outputs outer,
       every sample's whole input row was read again from L2 for each pair of outputs (1.18x slower at a batch
       of 20) */
    for (int64_t i = 0; i < in; i += DW_IN)
        for (int64_t o = 0; o < out; o += FW_OUT) {
            vec s[FW_OUT][DW_IN];
            for (int r = 0; r < FW_OUT; ++r)
                for (int c = 0; c < DW_IN; ++c) s[r][c] = (vec){0};
            for (int64_t b = 0; b < rows; ++b) {
                vec t[FW_OUT];
                for (int r = 0; r < FW_OUT; ++r) t[r] = held(d[b * ds + o + r]);
                for (int c = 0; c < DW_IN; ++c) {
                    const vec x = held(a[b * as + i + c]);
                    for (int r = 0; r < FW_OUT; ++r) s[r][c] += t[r] * x;
                }
            }
            for (int r = 0; r < FW_OUT; ++r)
                for (int c = 0; c < DW_IN; ++c) {
                    int64_t at = (o + r) * ws + i + c;
                    sgd(w + at, wbuf + at, s[r][c], s_);
                }
        }
}

/* The bias gradient sum_b d[b][o] (b in order) and its SGD step. */
static void bias_step(vec *restrict bias, vec *restrict bbuf, const vec *restrict d, int64_t ds, int64_t rows,
                      int64_t out, const Sgd *sgd_args) {
    for (int64_t o = 0; o < out; ++o) {
        vec g = (vec){0};
        for (int64_t b = 0; b < rows; ++b) g += d[b * ds + o];
        sgd(bias + o, bbuf + o, g, *sgd_args);
    }
}

typedef struct {
    int32_t layers;
    const int64_t *width; /* width[0] inputs ... width[layers] classes */
    int64_t pad[17];      /* the widths as held: inputs to a multiple of DW_IN, outputs of FW_OUT */
    int64_t stride[17];   /* vectors from one row to the next of act[l] (and of layer l's weights): pad[l] + 1, so
                             that rows 4 kB apart do not all land in one set of the 8-way L1 cache */
    int64_t rows;         /* the batch, rounded up to a multiple of FW_ROWS */
    vec *w[16], *wbuf[16], *b[16], *bbuf[16];
    vec *act[17];         /* act[l]: [rows][pad[l]]; act[layers]: logits, then their gradient */
    vec *delta;           /* [rows][widest + 1]: the gradient arriving at a layer's input */
    int64_t *label;       /* [rows][LANES] */
    mask *valid;          /* [rows]: the lanes whose sample this row is */
    const float **xrow;   /* [rows][LANES]: each lane's sample of the row */
    float *zeros;         /* width[0] zero floats: the input of a row a lane has no sample for */
} Work;

/* Logits -> their gradient (in place), each lane's step loss (the mean over its valid rows) added to `loss`. */
static void softmax_grad(const Work *k, int64_t rows, vec weight, vec *loss) {
    int64_t c = k->width[k->layers], cp = k->pad[k->layers];
    vec *z = k->act[k->layers], step = (vec){0};
    for (int64_t b = 0; b < rows; ++b) {
        vec *row = z + b * k->stride[k->layers], top = row[0], total = (vec){0}, picked;
        const int64_t *label = k->label + b * LANES;
        for (int64_t j = 1; j < c; ++j) top = pick(row[j] > top, row[j], top);
        for (int l = 0; l < LANES; ++l) picked[l] = row[label[l]][l] - top[l];
        for (int64_t j = 0; j < c; ++j) { /* one exp per logit */
            vec t = row[j] - top, e;
            for (int l = 0; l < LANES; ++l) e[l] = expf(t[l]);
            row[j] = e;
            total += e;
        }
        vec logs;
        for (int l = 0; l < LANES; ++l) logs[l] = logf(total[l]);
        step += pick(k->valid[b], (picked - logs) * weight, (vec){0});
        vec scale = weight / total;
        for (int64_t j = 0; j < c; ++j) row[j] *= scale;
        for (int l = 0; l < LANES; ++l) row[label[l]][l] -= weight[l];
        for (int64_t j = 0; j < cp; ++j) row[j] = j < c ? pick(k->valid[b], row[j], (vec){0}) : (vec){0};
    }
    *loss -= step;
}

static void backward_and_step(const Work *k, int64_t rows, const Sgd *s) {
    vec *d = k->act[k->layers]; /* gradient at the current layer's output, [rows][pad out] */
    for (int32_t l = k->layers - 1; l >= 0; --l) {
        int64_t in = k->pad[l], out = k->pad[l + 1], as = k->stride[l], ds = k->stride[l + 1];
        bias_step(k->b[l], k->bbuf[l], d, ds, rows, out, s);
        if (l > 0) /* the input gradient first (with this step's weights) */
            input_gradient(k->delta, d, ds, k->w[l], as, k->act[l], as, rows, in, out);
        weight_step(k->w[l], k->wbuf[l], as, d, ds, k->act[l], as, rows, in, out, s);
        if (l > 0) { /* the next layer down reads its output gradient from act[l] */
            memcpy(k->act[l], k->delta, (size_t)(rows * as) * sizeof(vec));
            d = k->act[l];
        }
    }
}

/* The arguments every client's training reads (see cfl_dense_sgd). */
typedef struct {
    int32_t layers;
    const int64_t *width, *w_off, *b_off;
    float *params;
    const float *src; /* the starting rows (== params: trained in place) */
    int64_t src_step; /* floats from one starting row to the next (0: every row starts from the same one) */
    int64_t dim;
    const float *x;
    const int64_t *y;
    int64_t n_max;
    const int64_t *clients, *idx;
    const uint8_t *valid;
    int64_t steps, rows, batch;
    float lr, momentum, decay;
    float *loss_out;
} Job;

/* One thread's working memory, carved out of one allocation (NULL when there is none to be had). */
static void *workspace(const Job *j, Work *k) {
    k->layers = j->layers;
    k->width = j->width;
    for (int32_t l = 0; l <= j->layers; ++l) {
        k->pad[l] = l == j->layers ? round_up(j->width[l], FW_OUT) : round_up(j->width[l], DW_IN);
        k->stride[l] = k->pad[l] + 1;
    }
    k->rows = round_up(j->batch > 0 ? j->batch : 1, FW_ROWS);
    int64_t widest = 0, vecs = 0;
    for (int32_t l = 0; l <= j->layers; ++l) widest = k->stride[l] > widest ? k->stride[l] : widest;
    for (int32_t l = 0; l < j->layers; ++l) vecs += 2 * k->stride[l] * k->pad[l + 1] + 2 * k->pad[l + 1];
    for (int32_t l = 0; l <= j->layers; ++l) vecs += k->rows * k->stride[l];
    vecs += k->rows * widest + k->rows; /* delta, valid */
    size_t bytes = (size_t)vecs * sizeof(vec) + (size_t)(k->rows * LANES) * (sizeof(int64_t) + sizeof(float *)) +
                   (size_t)j->width[0] * sizeof(float);
    char *pool = aligned_alloc(sizeof(vec), round_up((int64_t)bytes, sizeof(vec)));
    if (!pool) return NULL;
    vec *next = (vec *)pool;
    for (int32_t l = 0; l < j->layers; ++l) {
        int64_t n = k->stride[l] * k->pad[l + 1];
        k->w[l] = next, next += n;
        k->wbuf[l] = next, next += n;
        k->b[l] = next, next += k->pad[l + 1];
        k->bbuf[l] = next, next += k->pad[l + 1];
    }
    for (int32_t l = 0; l <= j->layers; ++l) k->act[l] = next, next += k->rows * k->stride[l];
    k->delta = next, next += k->rows * widest;
    k->valid = (mask *)next, next += k->rows;
    k->label = (int64_t *)next;
    k->xrow = (const float **)(k->label + k->rows * LANES);
    k->zeros = (float *)(k->xrow + k->rows * LANES);
    memset(k->zeros, 0, (size_t)j->width[0] * sizeof(float));
    return pool;
}

/* Rows c0 .. c0 + count - 1 (count <= LANES) as one group: every local step of all of them, then their results
   written. Lanes past `count` repeat row c0's work; their results are dropped. */
static int train_group(const Job *j, Work *k, int64_t c0, int count) {
    const int32_t L = j->layers;
    const int64_t *width = j->width;
    int64_t row[LANES];
    const float *from[LANES];
    for (int l = 0; l < LANES; ++l) row[l] = c0 + (l < count ? l : 0);
    /* the starting weights, gathered into the lanes; the padding zero; momentum zero */
    for (int32_t l = 0; l < L; ++l) {
        int64_t in = width[l], out = width[l + 1], ip = k->stride[l], op = k->pad[l + 1];
        memset(k->w[l], 0, (size_t)(ip * op) * sizeof(vec));
        memset(k->b[l], 0, (size_t)op * sizeof(vec));
        for (int64_t o = 0; o < out; ++o) {
            for (int t = 0; t < LANES; ++t) from[t] = j->src + row[t] * j->src_step + j->w_off[l] + o * in;
            gather(k->w[l] + o * ip, from, in, j->src_step == 0);
        }
        for (int t = 0; t < LANES; ++t) from[t] = j->src + row[t] * j->src_step + j->b_off[l];
        gather(k->b[l], from, out, j->src_step == 0);
        if (j->momentum != 0.0f) {
            memset(k->wbuf[l], 0, (size_t)(ip * op) * sizeof(vec));
            memset(k->bbuf[l], 0, (size_t)op * sizeof(vec));
        }
    }
    const int64_t in0 = width[0], ip0 = k->stride[0], classes = width[L];
    const float *xs[LANES];
    const int64_t *ys[LANES];
    for (int t = 0; t < LANES; ++t) {
        xs[t] = j->x + j->clients[row[t]] * j->n_max * in0;
        ys[t] = j->y + j->clients[row[t]] * j->n_max;
    }
    Sgd s = {splat(j->lr), splat(j->momentum), splat(j->decay), j->momentum != 0.0f, j->decay != 0.0f, NULL};
    vec loss = (vec){0}, taken = (vec){0};
    mask moving;
    for (int64_t step = 0; step < j->steps; ++step) {
        int64_t nb[LANES], most = 0;
        for (int t = 0; t < LANES; ++t) {
            const int64_t *ix = j->idx + (step * j->rows + row[t]) * j->batch;
            const uint8_t *ok = j->valid + (step * j->rows + row[t]) * j->batch;
            nb[t] = 0;
            for (int64_t b = 0; b < j->batch; ++b) {
                if (!ok[b]) continue;
                if (ix[b] < 0 || ix[b] >= j->n_max || ys[t][ix[b]] < 0 || ys[t][ix[b]] >= classes) return -2;
                k->xrow[nb[t] * LANES + t] = xs[t] + ix[b] * in0;
                k->label[nb[t] * LANES + t] = ys[t][ix[b]];
                ++nb[t];
            }
            most = nb[t] > most ? nb[t] : most;
        }
        if (most == 0) continue; /* the whole group sits the step out: nothing moves */
        int64_t rows = round_up(most, FW_ROWS);
        vec weight;
        int all = 1;
        for (int t = 0; t < LANES; ++t) {
            for (int64_t b = nb[t]; b < rows; ++b) k->xrow[b * LANES + t] = k->zeros, k->label[b * LANES + t] = 0;
            weight[t] = nb[t] > 0 ? 1.0f / (float)nb[t] : 0.0f;
            moving[t] = nb[t] > 0 ? -1 : 0;
            taken[t] += nb[t] > 0 ? 1.0f : 0.0f;
            all &= nb[t] > 0;
        }
        s.moving = all ? NULL : &moving; /* a lane without samples this step sits it out: nothing of it moves */
        for (int64_t b = 0; b < rows; ++b) {
            for (int t = 0; t < LANES; ++t) k->valid[b][t] = b < nb[t] ? -1 : 0;
            vec *a = k->act[0] + b * ip0;
            gather(a, k->xrow + b * LANES, in0, 0);
            for (int64_t i = in0; i < ip0; ++i) a[i] = (vec){0};
        }
        for (int32_t l = 0; l < L; ++l)
            forward(k->act[l + 1], k->stride[l + 1], k->act[l], k->stride[l], k->w[l], k->stride[l], k->b[l], rows,
                    k->pad[l], k->pad[l + 1], l + 1 < L);
        softmax_grad(k, rows, weight, &loss);
        backward_and_step(k, rows, &s);
    }
    /* the results into the rows of the group's clients */
    float *to[LANES];
    for (int32_t l = 0; l < L; ++l) {
        int64_t in = width[l], out = width[l + 1];
        for (int64_t o = 0; o < out; ++o) {
            for (int t = 0; t < LANES; ++t) to[t] = j->params + row[t] * j->dim + j->w_off[l] + o * in;
            scatter(to, count, k->w[l] + o * k->stride[l], in);
        }
        for (int t = 0; t < LANES; ++t) to[t] = j->params + row[t] * j->dim + j->b_off[l];
        scatter(to, count, k->b[l], out);
    }
    for (int t = 0; t < count; ++t) j->loss_out[c0 + t] = loss[t] / (taken[t] > 0.0f ? taken[t] : 1.0f);
    return 0;
}

/* Whether the layers' weights and biases are the whole row (then nothing else of it needs copying). */
static int layers_fill_row(const Job *j) {
    int64_t n = 0;
    for (int32_t l = 0; l < j->layers; ++l) n += j->width[l] * j->width[l + 1] + j->width[l + 1];
    return n == j->dim;
}

/* Rows [lo, hi) with this thread's working memory, eight at a time; the first error ends them. */
static int train_block(const Job *j, Work *k, int64_t lo, int64_t hi) {
    int status = 0;
    if (j->src != j->params && !layers_fill_row(j)) /* whatever is not a layer's starts as the source's */
        for (int64_t c = lo; c < hi; ++c)
            memcpy(j->params + c * j->dim, j->src + c * j->src_step, (size_t)j->dim * sizeof(float));
    for (int64_t c = lo; c < hi && status == 0; c += LANES)
        status = train_group(j, k, c, hi - c < LANES ? (int)(hi - c) : LANES);
    return status;
}

/* Rows handed to a thread at a time (two groups). The two cores of a shared machine do not run at the same
   speed: with half of the rows fixed to each thread, the faster one waited for the other at every chunk's end.
   Each row's result does not depend on the thread, or the group, that trains it. */
#define ROW_BLOCK 16

/* 1 when built with OpenMP: cfl_dense_sgd then spreads the rows over `threads` threads itself. */
int cfl_dense_sgd_threads(void) {
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

/* Train rows [lo, hi) of a chunk. params: [rows][dim], the result; src: the rows it starts from, row c at
   src + c * src_step (params itself or NULL: trained in place; another array: read, never written, so the caller
   need not copy it into params first; src_step 0: every row starts from the same one, e.g. FedAvg's model).
   x: [*, width[0]] samples, y: their labels; row c trains on client clients[c], whose sample s is row
   clients[c] * n_max + s.
   idx, valid: [steps][rows][batch] (the minibatch schedule). loss_out[c]: the mean over the steps row c
   took of its step loss. With OpenMP, `threads` threads (the process's OpenMP threads: PyTorch's own when
   it loaded libgomp first) take blocks of ROW_BLOCK rows as they come free; each row's result is the same
   whichever thread trains it. Returns 0; -1 when memory could not be had; -2 for a sample index or
   label out of range (nothing is read outside the tensors). */
int cfl_dense_sgd(int64_t lo, int64_t hi, int32_t layers, const int64_t *width, const int64_t *w_off,
                  const int64_t *b_off, float *params, const float *src, int64_t src_step, int64_t dim,
                  const float *x, const int64_t *y, int64_t n_max, const int64_t *clients, const int64_t *idx,
                  const uint8_t *valid, int64_t steps, int64_t rows, int64_t batch, float lr, float momentum,
                  float decay, float *loss_out, int32_t threads) {
    if (layers < 1 || layers > 16 || hi <= lo) return layers < 1 || layers > 16 ? -1 : 0;
    if (!src) src = params, src_step = dim;
    Job j = {layers, width, w_off, b_off, params, src, src_step, dim, x, y, n_max, clients, idx, valid,
             steps, rows, batch, lr, momentum, decay, loss_out};
    int status = 0;
#ifdef _OPENMP
    int64_t blocks = (hi - lo + ROW_BLOCK - 1) / ROW_BLOCK;
    if (threads > blocks) threads = (int32_t)blocks;
    if (threads > 1) {
#pragma omp parallel num_threads(threads) reduction(min : status)
        {
            Work k;
            void *pool = workspace(&j, &k);
            int mine = pool ? 0 : -1;
#pragma omp for schedule(dynamic, 1)
            for (int64_t b = lo; b < hi; b += ROW_BLOCK)
                if (mine == 0) mine = train_block(&j, &k, b, b + ROW_BLOCK < hi ? b + ROW_BLOCK : hi);
            free(pool);
            status = mine;
        }
        return status;
    }
#else
    (void)threads;
#endif
    Work k;
    void *pool = workspace(&j, &k);
    status = pool ? train_block(&j, &k, lo, hi) : -1;
    free(pool);
    return status;
}
