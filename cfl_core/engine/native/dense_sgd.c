/* Local SGD of a dense ReLU stack under cross-entropy, for many clients at once.

   The batched torch path runs a chunk of clients as one tensor program: every step streams the whole chunk's
   weights and momentum through the caches, several times. Here each client's local steps run with its weights,
   momentum and activations held in the CPU's caches, in one of two ways, chosen by the model's size
   (see abreast):

   - Eight clients abreast (a small model): every float of the arithmetic sits in one lane of an eight-float
     vector, lane k being client k of a group, so each vector operation does one client's scalar operation for
     eight clients. No layer width has to fit the vector width (a 10-class output or a batch of 10 wastes nothing)
     and no sum folds across lanes. The group's weights are eight models' worth, so this is for models whose
     group stays near the caches.
   - One client at a time (a larger model): the products run along a layer's width, eight floats at a time.

   The maths is the torch path's (cross-entropy averaged over the step's valid samples, softmax minus one-hot,
   ReLU passing gradient where its output is positive, PyTorch's SGD: g += decay * w; buf = momentum * buf + g;
   w -= lr * buf); only the order of the float additions differs, fixed by this source, so a client's result does
   not depend on the thread or the group that trains it, nor on how the clients are split.

   Layer l has weight rows [out][in] at params + w_off[l] and bias [out] at params + b_off[l] (the flat layout of
   cfl_core.engine.spec). */
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

/* Eight floats, in registers (GCC's and clang's vector extension; without AVX the compiler uses two halves).
   `uvec` is the same at any float's address, for loads and stores; `mask` is a comparison's result. */
typedef float vec __attribute__((vector_size(32)));
typedef float uvec __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t mask __attribute__((vector_size(32)));
#define LANES 8

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

/* ---- One client at a time ------------------------------------------------------------------------------------

   The first layer is kept transposed ([in][out]) while training: its forward and its weight gradient are then
   both row updates along `out`, and its input gradient is never needed. Other layers keep rows [out][in]: the
   forward is one dot product per output, and the backward and weight gradient are row updates along `in`. */

static inline vec load(const float *p) { return *(const uvec *)p; }
static inline void store(float *p, vec v) { *(uvec *)p = v; }

/* sum_j a[j] * b[j]: eight partial sums, then added lane 0 to 7, then the tail */
static float dot(const float *restrict a, const float *restrict b, int64_t n) {
    vec acc = {0};
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES) acc += load(a + j) * load(b + j);
    float s = 0.0f;
    for (int k = 0; k < LANES; ++k) s += acc[k];
    for (; j < n; ++j) s += a[j] * b[j];
    return s;
}

/* dot(w, a[r]) for r < 4 at once: four independent sums share the loads of w (each summed as `dot` does) */
static void dot4(float *out, const float *restrict w, const float *restrict a, int64_t astep, int64_t n) {
    vec s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    const float *a0 = a, *a1 = a + astep, *a2 = a + 2 * astep, *a3 = a + 3 * astep;
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES) {
        vec wj = load(w + j);
        s0 += wj * load(a0 + j), s1 += wj * load(a1 + j), s2 += wj * load(a2 + j), s3 += wj * load(a3 + j);
    }
    vec *sums[4] = {&s0, &s1, &s2, &s3};
    const float *rows[4] = {a0, a1, a2, a3};
    for (int r = 0; r < 4; ++r) {
        float s = 0.0f;
        for (int k = 0; k < LANES; ++k) s += (*sums[r])[k];
        for (int64_t t = j; t < n; ++t) s += w[t] * rows[r][t];
        out[r] = s;
    }
}

/* Ask the caches for part `part` of `parts` of the bytes [from, from + bytes) (a hint; nothing is read). The
   next client's parameters and samples are fetched this way, a slice at each local step of the current
   one, so its first step does not wait for memory. */
static void prefetch_part(const void *from, int64_t bytes, int64_t part, int64_t parts) {
    const char *base = from;
    int64_t lines = (bytes + 63) / 64, per = (lines + parts - 1) / parts;
    for (int64_t l = part * per; l < (part + 1) * per && l < lines; ++l) __builtin_prefetch(base + 64 * l, 1, 3);
}

#if defined(__AVX__)
/* An 8 x 8 tile in registers, transposed in place: row i becomes column i (the usual unpack / shuffle / permute
   sequence). */
static inline void transpose_tile(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* One 8 x 8 tile: to[c][r] = from[r][c]. */
static void transpose8(float *restrict to, int64_t tstep, const float *restrict from, int64_t fstep) {
    __m256 r[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(from + i * fstep);
    transpose_tile(r);
    for (int i = 0; i < 8; ++i) _mm256_storeu_ps(to + i * tstep, r[i]);
}
#endif

/* The layer 0 weights [out][in] <-> their transpose [in][out], in 8 x 8 tiles (a pure copy: every value
   lands unchanged, whichever way the tiles are moved) */
static void transpose(float *restrict to, const float *restrict from, int64_t rows, int64_t cols) {
    for (int64_t r0 = 0; r0 < rows; r0 += 8)
        for (int64_t c0 = 0; c0 < cols; c0 += 8) {
#if defined(__AVX__)
            if (r0 + 8 <= rows && c0 + 8 <= cols) {
                transpose8(to + c0 * rows + r0, rows, from + r0 * cols + c0, cols);
                continue;
            }
#endif
            for (int64_t r = r0; r < r0 + 8 && r < rows; ++r)
                for (int64_t c = c0; c < c0 + 8 && c < cols; ++c) to[c * rows + r] = from[r * cols + c];
        }
}

/* out[j] = init[j] (0 when init is NULL) + sum_k coef[k * cstep] * rows[k * rstep + j], for j < n.
   Every product-sum of the kernel has this form. A block of the result stays in registers while the
   terms are added in order k = 0, 1, ..., so the rounding is the same in every block and in the tail. */
static void combine(float *restrict out, const float *restrict init, const float *restrict coef, int64_t cstep,
                    const float *restrict rows, int64_t rstep, int64_t count, int64_t n) {
    const vec zero = {0};
    int64_t j = 0;
    /* eight vectors at a time: eight independent chains of fused multiply-adds keep both of a core's
       FMA units busy (four chains wait on the FMA's latency half the time) */
    for (; j + 8 * LANES <= n; j += 8 * LANES) {
        vec a[8];
        for (int v = 0; v < 8; ++v) a[v] = init ? load(init + j + v * LANES) : zero;
        for (int64_t k = 0; k < count; ++k) {
            const float *r = rows + k * rstep + j;
            const vec c = zero + coef[k * cstep];
            for (int v = 0; v < 8; ++v) a[v] += c * load(r + v * LANES);
        }
        for (int v = 0; v < 8; ++v) store(out + j + v * LANES, a[v]);
    }
    for (; j + LANES <= n; j += LANES) {
        vec a0 = init ? load(init + j) : zero;
        for (int64_t k = 0; k < count; ++k) a0 += (zero + coef[k * cstep]) * load(rows + k * rstep + j);
        store(out + j, a0);
    }
    for (; j < n; ++j) {
        float acc = init ? init[j] : 0.0f;
        for (int64_t k = 0; k < count; ++k) acc += coef[k * cstep] * rows[k * rstep + j];
        out[j] = acc;
    }
}

/* PyTorch's SGD on one row: g += decay * w; buf = momentum * buf + g; w -= lr * buf */
static void sgd_row(float *restrict w, float *restrict buf, float *restrict g, int64_t n,
                    float lr, float momentum, float decay) {
    if (decay != 0.0f)
        for (int64_t j = 0; j < n; ++j) g[j] += decay * w[j];
    if (momentum == 0.0f) { /* PyTorch keeps no buffer then: w -= lr * g */
        for (int64_t j = 0; j < n; ++j) w[j] -= lr * g[j];
        return;
    }
    for (int64_t j = 0; j < n; ++j) {
        buf[j] = momentum * buf[j] + g[j];
        w[j] -= lr * buf[j];
    }
}

/* One weight row's gradient and its SGD step at once: g = sum_k coef[k * cstep] * rows[k * rstep + j] (summed as
   `combine` does), then PyTorch's SGD on it (as `sgd_row`). A block of the gradient goes from the registers
   straight into the update: the row is never stored and read back (the layer 0 gradient is 64 such rows a step). */
static void combine_step(float *restrict w, float *restrict buf, const float *restrict coef, int64_t cstep,
                         const float *restrict rows, int64_t rstep, int64_t count, int64_t n,
                         float lr, float momentum, float decay) {
    const vec zero = {0}, vlr = zero + lr, vm = zero + momentum, vd = zero + decay;
    int64_t j = 0;
    for (; j + 8 * LANES <= n; j += 8 * LANES) {
        vec a[8];
        for (int v = 0; v < 8; ++v) a[v] = zero;
        for (int64_t k = 0; k < count; ++k) {
            const float *r = rows + k * rstep + j;
            const vec c = zero + coef[k * cstep];
            for (int v = 0; v < 8; ++v) a[v] += c * load(r + v * LANES);
        }
        for (int v = 0; v < 8; ++v) {
            float *wv = w + j + v * LANES, *bv = buf + j + v * LANES;
            vec g = a[v], wj = load(wv);
            if (decay != 0.0f) g += vd * wj;
            if (momentum != 0.0f) {
                g = vm * load(bv) + g;
                store(bv, g);
            }
            store(wv, wj - vlr * g);
        }
    }
    if (j < n) { /* the tail: through the row buffer, as before */
        float tail[8 * LANES];
        combine(tail, NULL, coef, cstep, rows + j, rstep, count, n - j);
        sgd_row(w + j, buf + j, tail, n - j, lr, momentum, decay);
    }
}

typedef struct {
    int32_t layers;
    const int64_t *width; /* width[0] inputs ... width[layers] classes */
    float **w;            /* per layer: the weights while training (layer 0 transposed) */
    float **wbuf, **bbuf; /* momentum of weights (same layout as w) and of biases */
    float **act;          /* act[l]: [batch][width[l]]; act[layers]: logits, then their gradient */
    float *delta;         /* [batch][max width]: the gradient arriving at a layer's input */
    float *grad;          /* [max width]: one row of a weight gradient */
    float *ones;          /* [batch] of 1: the bias gradient's coefficients */
} OneWork;

static int64_t max_width(const OneWork *k) {
    int64_t m = 0;
    for (int32_t l = 0; l <= k->layers; ++l)
        if (k->width[l] > m) m = k->width[l];
    return m;
}

static void one_forward(const OneWork *k, float *params, const int64_t *b_off, int64_t nb) {
    for (int32_t l = 0; l < k->layers; ++l) {
        int64_t in = k->width[l], out = k->width[l + 1];
        const float *a = k->act[l], *bias = params + b_off[l], *w = k->w[l];
        float *z = k->act[l + 1];
        if (l == 0) { /* z[b] = bias + sum_i a[b][i] * (row i of the transposed weights) */
            for (int64_t b = 0; b < nb; ++b) combine(z + b * out, bias, a + b * in, 1, w, out, in, out);
        } else {
            float four[4];
            for (int64_t o = 0; o < out; ++o) {
                int64_t b = 0;
                for (; b + 4 <= nb; b += 4) {
                    dot4(four, w + o * in, a + b * in, in, in);
                    for (int r = 0; r < 4; ++r) z[(b + r) * out + o] = bias[o] + four[r];
                }
                for (; b < nb; ++b) z[b * out + o] = bias[o] + dot(w + o * in, a + b * in, in);
            }
        }
        if (l + 1 < k->layers)
            for (int64_t j = 0; j < nb * out; ++j) z[j] = z[j] < 0.0f ? 0.0f : z[j]; /* NaN stays, as in torch */
    }
}

/* Logits -> their gradient (in place), returning the step's mean loss. */
static float one_softmax_grad(const OneWork *k, const int64_t *label, int64_t nb) {
    int64_t c = k->width[k->layers];
    float *z = k->act[k->layers];
    float weight = 1.0f / (float)nb, loss = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
        float *row = z + b * c, top = row[0], total = 0.0f;
        for (int64_t j = 1; j < c; ++j) top = row[j] > top ? row[j] : top;
        float picked = row[label[b]] - top;
        for (int64_t j = 0; j < c; ++j) total += (row[j] = expf(row[j] - top)); /* one exp per logit */
        loss += (picked - logf(total)) * weight;
        float scale = weight / total;
        for (int64_t j = 0; j < c; ++j) row[j] *= scale;
        row[label[b]] -= weight;
    }
    return -loss;
}

static void one_backward_and_step(const OneWork *k, float *params, const int64_t *b_off, int64_t nb,
                              float lr, float momentum, float decay) {
    float *d = k->act[k->layers]; /* gradient at the current layer's output, [nb][out] */
    for (int32_t l = k->layers - 1; l >= 0; --l) {
        int64_t in = k->width[l], out = k->width[l + 1];
        const float *a = k->act[l];
        float *w = k->w[l], *wbuf = k->wbuf[l], *g = k->grad;
        combine(g, NULL, k->ones, 0, d, out, nb, out); /* the bias gradient: sum_b d[b] */
        sgd_row(params + b_off[l], k->bbuf[l], g, out, lr, momentum, decay);
        if (l == 0) { /* transposed: row i of the gradient is sum_b a[b][i] * d[b] */
            for (int64_t i = 0; i < in; ++i)
                combine_step(w + i * out, wbuf + i * out, a + i, in, d, out, nb, out, lr, momentum, decay);
            break;
        }
        /* the input gradient first (with this step's weights), through the ReLU that made `a` */
        float *e = k->delta;
        for (int64_t b = 0; b < nb; ++b) combine(e + b * in, NULL, d + b * out, 1, w, in, out, in);
        for (int64_t j = 0; j < nb * in; ++j) e[j] = a[j] > 0.0f ? e[j] : 0.0f;
        for (int64_t o = 0; o < out; ++o) /* row o of the gradient is sum_b d[b][o] * a[b] */
            combine_step(w + o * in, wbuf + o * in, d + o, out, a, in, nb, in, lr, momentum, decay);
        /* the next layer down reads its output gradient from act[l] */
        memcpy(k->act[l], e, (size_t)(nb * in) * sizeof(float));
        d = k->act[l];
    }
}


/* One thread's working memory, carved out of one allocation (NULL when there is none to be had). */
static float *one_workspace(const Job *j, OneWork *k, int64_t **label) {
    int64_t widest = max_width(k), floats = 0;
    for (int32_t l = 0; l < j->layers; ++l) floats += 2 * j->width[l] * j->width[l + 1] + j->width[l + 1];
    for (int32_t l = 0; l <= j->layers; ++l) floats += j->batch * j->width[l];
    floats += j->batch * widest + widest + j->batch;
    float *pool = malloc((size_t)floats * sizeof(float));
    *label = malloc((size_t)(j->batch > 0 ? j->batch : 1) * sizeof(int64_t));
    if (!pool || !*label) {
        free(pool);
        free(*label);
        return NULL;
    }
    float *next = pool;
    for (int32_t l = 0; l < j->layers; ++l) {
        int64_t n = j->width[l] * j->width[l + 1];
        k->w[l] = next, next += n;
        k->wbuf[l] = next, next += n;
        k->bbuf[l] = next, next += j->width[l + 1];
    }
    for (int32_t l = 0; l <= j->layers; ++l) k->act[l] = next, next += j->batch * j->width[l];
    k->delta = next, next += j->batch * widest;
    k->grad = next, next += widest;
    k->ones = next;
    for (int64_t b = 0; b < j->batch; ++b) k->ones[b] = 1.0f;
    return pool;
}

/* All local steps of row c (client clients[c]); `next_row` (or -1) is fetched into the caches meanwhile. */
static int one_train_row(const Job *j, OneWork *k, int64_t *label, int64_t c, int64_t next_row) {
    const int64_t *width = j->width;
    float *p = j->params + c * j->dim;
    const float *q = j->src + c * j->src_step;
    int64_t in0 = width[0], out0 = width[1];
    transpose(k->w[0], q + j->w_off[0], out0, in0); /* layer 0 transposed into its work copy */
    if (q != p) { /* the rest of the row starts as the source's and trains in place in the result */
        int64_t w0 = j->w_off[0], end0 = w0 + in0 * out0;
        memcpy(p, q, (size_t)w0 * sizeof(float));
        memcpy(p + end0, q + end0, (size_t)(j->dim - end0) * sizeof(float));
    }
    for (int32_t l = 0; l < j->layers; ++l) {
        if (l > 0) k->w[l] = p + j->w_off[l]; /* trained in place */
        memset(k->wbuf[l], 0, (size_t)(width[l] * width[l + 1]) * sizeof(float));
        memset(k->bbuf[l], 0, (size_t)width[l + 1] * sizeof(float));
    }
    const float *xs = j->x + j->clients[c] * j->n_max * in0;
    const int64_t *ys = j->y + j->clients[c] * j->n_max;
    float loss_sum = 0.0f;
    int64_t taken = 0;
    for (int64_t s = 0; s < j->steps; ++s) {
        const int64_t *ix = j->idx + (s * j->rows + c) * j->batch;
        const uint8_t *ok = j->valid + (s * j->rows + c) * j->batch;
        int64_t nb = 0;
        for (int64_t b = 0; b < j->batch; ++b) {
            if (!ok[b]) continue;
            if (ix[b] < 0 || ix[b] >= j->n_max || ys[ix[b]] < 0 || ys[ix[b]] >= width[j->layers]) return -2;
            memcpy(k->act[0] + nb * in0, xs + ix[b] * in0, (size_t)in0 * sizeof(float));
            label[nb++] = ys[ix[b]];
        }
        if (next_row >= 0) {
            prefetch_part(j->src + next_row * j->src_step, j->dim * (int64_t)sizeof(float), s, j->steps);
            if (j->src != j->params) /* the row it will write */
                prefetch_part(j->params + next_row * j->dim, j->dim * (int64_t)sizeof(float), s, j->steps);
            prefetch_part(j->x + j->clients[next_row] * j->n_max * in0, j->n_max * in0 * (int64_t)sizeof(float),
                          s, j->steps);
        }
        if (nb == 0) continue; /* this client sits the step out: nothing moves */
        one_forward(k, p, j->b_off, nb);
        loss_sum += one_softmax_grad(k, label, nb);
        one_backward_and_step(k, p, j->b_off, nb, j->lr, j->momentum, j->decay);
        ++taken;
    }
    j->loss_out[c] = loss_sum / (float)(taken > 0 ? taken : 1);
    transpose(p + j->w_off[0], k->w[0], in0, out0);
    return 0;
}

/* Rows [lo, hi) with this thread's working memory, in order; the first error ends them. */
static int one_train_block(const Job *j, OneWork *k, int64_t *label, int64_t lo, int64_t hi) {
    int status = 0;
    for (int64_t c = lo; c < hi && status == 0; ++c) status = one_train_row(j, k, label, c, c + 1 < hi ? c + 1 : -1);
    return status;
}


/* ---- Eight clients abreast -----------------------------------------------------------------------------------

   While a group trains, each layer's weights are held as [out][in] vectors (lane k: client k's weight), with `in`
   rounded up to a multiple of DW_IN and `out` to a multiple of FW_OUT; the added rows and columns are zero and stay
   zero (they meet only zero inputs and zero gradients), so they change no result. A step's samples sit as
   [row][in] vectors, the rows rounded up to a multiple of FW_ROWS; the added rows, and a client's rows beyond its
   own samples, carry a zero gradient. */

/* Register tiles of the three products (lane_forward, input_gradient, weight_step): each keeps 8-10 sums in
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
    for (; j + 8 <= n; j += 8) { /* one 8 x 8 tile in registers */
        __m256 r[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(rows[i] + j);
        transpose_tile(r);
        for (int i = 0; i < 8; ++i) to[j + i] = (vec)r[i];
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
            __m256 r[8];
            for (int i = 0; i < 8; ++i) r[i] = (__m256)from[j + i];
            transpose_tile(r);
            for (int i = 0; i < 8; ++i) _mm256_storeu_ps(rows[i] + j, r[i]);
        }
#endif
    for (; j < n; ++j)
        for (int k = 0; k < count; ++k) rows[k][j] = from[j][k];
}

/* One register tile of a product: s[r][c] += sum_k left[r * ls + k] * right[c * rc + k * rk] (k in order, k < n),
   FW_ROWS rows by FW_OUT columns. The forward walks a weight row (rc: the row stride, rk: 1); the input gradient
   walks weight columns (rc: 1, rk: the row stride). */
static inline __attribute__((always_inline)) void tile(vec s[FW_ROWS][FW_OUT], const vec *restrict left, int64_t ls,
                                                       const vec *restrict right, int64_t rc, int64_t rk, int64_t n) {
    for (int64_t k = 0; k < n; ++k) {
        vec wc[FW_OUT];
        for (int c = 0; c < FW_OUT; ++c) wc[c] = held(right[c * rc + k * rk]);
        for (int r = 0; r < FW_ROWS; ++r) {
            const vec t = held(left[r * ls + k]);
            for (int c = 0; c < FW_OUT; ++c) s[r][c] += t * wc[c];
        }
    }
}

/* z[b][o] = bias[o] + sum_i a[b][i] * w[o][i] (i in order), through a ReLU unless it is the last layer. */
static void lane_forward(vec *restrict z, int64_t zs, const vec *restrict a, int64_t as, const vec *restrict w,
                         int64_t ws, const vec *restrict bias, int64_t rows, int64_t in, int64_t out, int relu) {
    for (int64_t b = 0; b < rows; b += FW_ROWS) /* a tile's samples stay in L1 while the weights stream by */
        for (int64_t o = 0; o < out; o += FW_OUT) {
            vec s[FW_ROWS][FW_OUT];
            for (int r = 0; r < FW_ROWS; ++r)
                for (int c = 0; c < FW_OUT; ++c) s[r][c] = bias[o + c];
            tile(s, a + b * as, as, w + o * ws, ws, 1, in);
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
            tile(s, d + b * ds, ds, w + i, 1, ws, out);
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

static inline void lane_sgd(vec *restrict w, vec *restrict buf, vec g, const Sgd s) {
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
                    lane_sgd(w + at, wbuf + at, s[r][c], s_);
                }
        }
}

/* The bias gradient sum_b d[b][o] (b in order) and its SGD step. */
static void bias_step(vec *restrict bias, vec *restrict bbuf, const vec *restrict d, int64_t ds, int64_t rows,
                      int64_t out, const Sgd *sgd_args) {
    for (int64_t o = 0; o < out; ++o) {
        vec g = (vec){0};
        for (int64_t b = 0; b < rows; ++b) g += d[b * ds + o];
        lane_sgd(bias + o, bbuf + o, g, *sgd_args);
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
} LaneWork;

/* Logits -> their gradient (in place), each lane's step loss (the mean over its valid rows) added to `loss`. */
static void lane_softmax_grad(const LaneWork *k, int64_t rows, vec weight, vec *loss) {
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

static void lane_backward_and_step(const LaneWork *k, int64_t rows, const Sgd *s) {
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


/* One thread's working memory, carved out of one allocation (NULL when there is none to be had). */
static void *lane_workspace(const Job *j, LaneWork *k) {
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
static int lane_train_group(const Job *j, LaneWork *k, int64_t c0, int count) {
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
            lane_forward(k->act[l + 1], k->stride[l + 1], k->act[l], k->stride[l], k->w[l], k->stride[l], k->b[l], rows,
                    k->pad[l], k->pad[l + 1], l + 1 < L);
        lane_softmax_grad(k, rows, weight, &loss);
        lane_backward_and_step(k, rows, &s);
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
static int lane_train_block(const Job *j, LaneWork *k, int64_t lo, int64_t hi) {
    int status = 0;
    if (j->src != j->params && !layers_fill_row(j)) /* whatever is not a layer's starts as the source's */
        for (int64_t c = lo; c < hi; ++c)
            memcpy(j->params + c * j->dim, j->src + c * j->src_step, (size_t)j->dim * sizeof(float));
    for (int64_t c = lo; c < hi && status == 0; c += LANES)
        status = lane_train_group(j, k, c, hi - c < LANES ? (int)(hi - c) : LANES);
    return status;
}



/* ---- Which way, and the entry points ------------------------------------------------------------------------ */

/* Eight abreast holds eight models (and their momentum) per group. Measured on a 2-core AMD EPYC (512 kB of L2 per
   core, 32 MB of L3), 1,000 clients, batch 20, momentum 0.9, against one client at a time: 64-128-10 (a group's
   weights and momentum 0.6 MB) 0.74 of the time, 64-512-10 (2.5 MB) 0.68, 196-128-10 (1.7 MB) 0.71, 256-256-10
   (4.4 MB) 1.0-1.5, 784-128-10 (6.5 MB) 1.4-1.9: past a few MB the group's weights stream from L3 at every
   step. */
#define ABREAST_BYTES (3 << 20)

static int abreast(int32_t layers, const int64_t *width, float momentum) {
    int64_t vecs = 0;
    for (int32_t l = 0; l < layers; ++l) {
        int64_t in = round_up(width[l], DW_IN) + 1;
        int64_t out = l + 1 == layers ? round_up(width[l + 1], FW_OUT) : round_up(width[l + 1], DW_IN);
        vecs += in * out + out;
    }
    return vecs * (int64_t)sizeof(vec) * (momentum != 0.0f ? 2 : 1) <= ABREAST_BYTES;
}

/* 1 when this model with this momentum trains eight clients abreast, 0 when one client at a time. */
int cfl_dense_sgd_abreast(int32_t layers, const int64_t *width, float momentum) {
    return layers >= 1 && layers <= 16 && abreast(layers, width, momentum);
}

/* One thread's working memory for the chosen way (pool NULL when there is none to be had). */
typedef struct {
    int lanes;
    void *pool;
    LaneWork lane;
    OneWork one;
    float *w[16], *wbuf[16], *bbuf[16], *act[17];
    int64_t *label;
} Worker;

static int worker_open(const Job *j, Worker *k) {
    k->lanes = abreast(j->layers, j->width, j->momentum);
    k->label = NULL;
    if (k->lanes) {
        k->pool = lane_workspace(j, &k->lane);
        return k->pool ? 0 : -1;
    }
    k->one = (OneWork){j->layers, j->width, k->w, k->wbuf, k->bbuf, k->act, NULL, NULL, NULL};
    k->pool = one_workspace(j, &k->one, &k->label);
    return k->pool ? 0 : -1;
}

static int worker_train(const Job *j, Worker *k, int64_t lo, int64_t hi) {
    return k->lanes ? lane_train_block(j, &k->lane, lo, hi) : one_train_block(j, &k->one, k->label, lo, hi);
}

static void worker_close(Worker *k) {
    free(k->pool);
    free(k->label);
}

/* Rows handed to a thread at a time (two groups of eight). The two cores of a shared machine do not run at the
   same speed: with half of the rows fixed to each thread, the faster one waited for the other at every chunk's
   end. Each row's result does not depend on the thread that trains it. */
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
            Worker k;
            int mine = worker_open(&j, &k);
#pragma omp for schedule(dynamic, 1)
            for (int64_t b = lo; b < hi; b += ROW_BLOCK)
                if (mine == 0) mine = worker_train(&j, &k, b, b + ROW_BLOCK < hi ? b + ROW_BLOCK : hi);
            worker_close(&k);
            status = mine;
        }
        return status;
    }
#else
    (void)threads;
#endif
    Worker k;
    status = worker_open(&j, &k);
    if (status == 0) status = worker_train(&j, &k, lo, hi);
    worker_close(&k);
    return status;
}
