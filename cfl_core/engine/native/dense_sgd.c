/* Local SGD of a dense ReLU stack under cross-entropy, one client at a time.

   The batched torch path runs a chunk of clients as one tensor program: every
   step streams the whole chunk's weights and momentum (megabytes) through the
   caches, several times. Here each client runs all its local steps with its own
   weights, momentum and activations held in the CPU's caches (a 64-128-10 MLP
   and its momentum are 77 kB), so the arithmetic runs at cache speed. The maths
   is the torch path's (cross-entropy averaged over the step's valid samples,
   softmax minus one-hot, ReLU passing gradient where its output is positive,
   PyTorch's SGD: g += decay * w; buf = momentum * buf + g; w -= lr * buf); only the
   order of the float additions differs, fixed by this source (so results do not
   depend on how clients are split over threads).

   Layer l has weight rows [out][in] at params + w_off[l] and bias [out] at
   params + b_off[l] (the flat layout of cfl_core.engine.spec). The first layer is
   kept transposed ([in][out]) while training: its forward and its weight gradient
   are then both row updates along `out`, and its input gradient is never needed.
   Other layers keep rows [out][in]: the forward is one dot product per output,
   and the backward and weight gradient are row updates along `in`. */
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

/* Eight floats, in registers (GCC's and clang's vector extension; without AVX the compiler uses two
   halves). `uvec` is the same at any float's address, for loads and stores. */
typedef float vec __attribute__((vector_size(32)));
typedef float uvec __attribute__((vector_size(32), aligned(4), may_alias));
#define LANES 8

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
/* One 8 x 8 tile: to[c][r] = from[r][c], in registers (the usual unpack / shuffle / permute sequence). */
static void transpose8(float *restrict to, int64_t tstep, const float *restrict from, int64_t fstep) {
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(from + i * fstep);
    for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(to + i * tstep, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(to + (i + 4) * tstep, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
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
} Work;

static int64_t max_width(const Work *k) {
    int64_t m = 0;
    for (int32_t l = 0; l <= k->layers; ++l)
        if (k->width[l] > m) m = k->width[l];
    return m;
}

static void forward(const Work *k, float *params, const int64_t *b_off, int64_t nb) {
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
static float softmax_grad(const Work *k, const int64_t *label, int64_t nb) {
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

static void backward_and_step(const Work *k, float *params, const int64_t *b_off, int64_t nb,
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
static float *workspace(const Job *j, Work *k, int64_t **label) {
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
static int train_row(const Job *j, Work *k, int64_t *label, int64_t c, int64_t next_row) {
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
        forward(k, p, j->b_off, nb);
        loss_sum += softmax_grad(k, label, nb);
        backward_and_step(k, p, j->b_off, nb, j->lr, j->momentum, j->decay);
        ++taken;
    }
    j->loss_out[c] = loss_sum / (float)(taken > 0 ? taken : 1);
    transpose(p + j->w_off[0], k->w[0], in0, out0);
    return 0;
}

/* Rows [lo, hi) with this thread's working memory, in order; the first error ends them. */
static int train_block(const Job *j, Work *k, int64_t *label, int64_t lo, int64_t hi) {
    int status = 0;
    for (int64_t c = lo; c < hi && status == 0; ++c) status = train_row(j, k, label, c, c + 1 < hi ? c + 1 : -1);
    return status;
}

/* Rows [lo, hi) on this thread (its working memory allocated here). */
static int train_rows(const Job *j, int64_t lo, int64_t hi) {
    float *w[16], *wbuf[16], *bbuf[16], *act[17];
    Work k = {j->layers, j->width, w, wbuf, bbuf, act, NULL, NULL, NULL};
    int64_t *label = NULL;
    float *pool = workspace(j, &k, &label);
    int status = pool ? train_block(j, &k, label, lo, hi) : -1;
    free(pool);
    free(label);
    return status;
}

/* Rows handed to a thread at a time. The two cores of a shared machine do not run at the same speed: with half
   of the rows fixed to each thread, the faster one waited for the other at every chunk's end (handing blocks
   out as threads come free took 8-12% off a 1,000-client call here). Each row's result does not depend on
   the thread that trains it. */
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
    if (threads > hi - lo) threads = (int32_t)(hi - lo);
    if (threads > 1) {
#pragma omp parallel num_threads(threads) reduction(min : status)
        {
            float *w[16], *wbuf[16], *bbuf[16], *act[17];
            Work k = {j.layers, j.width, w, wbuf, bbuf, act, NULL, NULL, NULL};
            int64_t *label = NULL;
            float *pool = workspace(&j, &k, &label);
            int mine = pool ? 0 : -1;
#pragma omp for schedule(dynamic, 1)
            for (int64_t b = lo; b < hi; b += ROW_BLOCK)
                if (mine == 0) mine = train_block(&j, &k, label, b, b + ROW_BLOCK < hi ? b + ROW_BLOCK : hi);
            free(pool);
            free(label);
            status = mine;
        }
        return status;
    }
#else
    (void)threads;
#endif
    status = train_rows(&j, lo, hi);
    return status;
}
