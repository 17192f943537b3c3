/*
 * oracle.c - the naive reference forward pass of TinyGPT (oracle.h): one
 * sequence at a time from the fp32 weights, in double precision, with no KV
 * cache. assay_oracle_init / _free hold the scratch; assay_oracle_logits
 * and _next_logits compute logits, assay_oracle_distribution turns logits
 * into the sampling distribution, and the kernel and thread settings change
 * only the speed. Every check that compares with the truth calls it.
 */
#include "oracle.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ORACLE_HAVE_AVX2 1
#endif

#include "../core/alloc.h"

/* Positions taken through each product together: every weight row is dotted
 * with the ORACLE_BLOCK positions of a block while it is in cache, instead
 * of being read from memory again for each position. The blocks' scratch
 * (a block's activations of width d_ff) stays within the L2 cache at the
 * test models' shapes. */
#define ORACLE_BLOCK 32

/* Rows of a mapped model's output matrix decoded at a time (its token
 * embedding is read one row per token). */
#define ORACLE_OUT_ROWS 1024

/* Positions dotted with one weight row at once by the AVX2 kernel: four
 * independent chains of additions, where one position alone has one. */
#define ORACLE_GROUP 4

/* The AVX-512 kernel's tiles: four weight rows by four positions. */
#define ORACLE_TILE 4

struct assay_oracle {
    const struct assay_model *model;
    int32_t max_len;
    int32_t n_threads; /* 1..ASSAY_ORACLE_MAX_THREADS */
    enum assay_oracle_kernel kernel; /* resolved: never AUTO */
    double *x;         /* (max_len, d_model) residual stream */
    double *q;      /* (max_len, n_head * head_dim) */
    double *k;      /* (max_len, n_kv_head * head_dim) */
    double *v;      /* (max_len, n_kv_head * head_dim) */
    double *att;    /* (max_len, n_head * head_dim) */
    double *scores; /* (max_len) */
    double *xn;     /* (ORACLE_BLOCK, d_model) a block's normalised x */
    double *gate;   /* (ORACLE_BLOCK, d_ff) */
    double *up;     /* (ORACLE_BLOCK, d_ff) */
    double *tmp;    /* (ORACLE_BLOCK, d_model) */
    /* a mapped model's (engine/model.h) weights as read: NULL otherwise */
    float *layer;   /* one layer's seven matrices, decoded */
    float *rows;    /* (ORACLE_OUT_ROWS, d_model) rows of the output
                     * matrix or of the token embedding */
    int32_t *toks;  /* (max_len) the sequences of a batch end to end */
    int32_t *pos;   /* (max_len) each position's place in its sequence */
    size_t scratch_bytes; /* every buffer above */
};

/* The floats of one layer's seven matrices. */
static size_t layer_floats(const struct assay_model_config *c)
{
    size_t d = (size_t)c->d_model, qd = (size_t)c->n_head * c->head_dim;
    size_t kvd = (size_t)c->n_kv_head * c->head_dim;
    return d * (2 * qd + 2 * kvd + 3 * (size_t)c->d_ff);
}

enum assay_status assay_oracle_init(struct assay_oracle **out, const struct assay_model *model,
                                    int32_t max_len)
{
    *out = NULL;
    if (model == NULL || max_len < 1 || max_len > model->cfg.n_ctx) {
        return ASSAY_ERR_INVALID;
    }
    const struct assay_model_config *c = &model->cfg;
    struct assay_oracle *o = assay_calloc(1, sizeof *o);
    if (o == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    size_t n = (size_t)max_len, b = ORACLE_BLOCK, d = (size_t)c->d_model;
    size_t qd = (size_t)c->n_head * c->head_dim, kvd = (size_t)c->n_kv_head * c->head_dim;
    o->model = model;
    o->max_len = max_len;
    o->n_threads = 1;
    o->kernel = ASSAY_ORACLE_KERNEL_GENERIC;
    (void)assay_oracle_set_kernel(o, ASSAY_ORACLE_KERNEL_AUTO);
    o->x = assay_calloc(n * d, sizeof(double));
    o->q = assay_calloc(n * qd, sizeof(double));
    o->k = assay_calloc(n * kvd, sizeof(double));
    o->v = assay_calloc(n * kvd, sizeof(double));
    o->att = assay_calloc(n * qd, sizeof(double));
    o->scores = assay_calloc(n, sizeof(double));
    o->xn = assay_calloc(b * d, sizeof(double));
    o->gate = assay_calloc(b * (size_t)c->d_ff, sizeof(double));
    o->up = assay_calloc(b * (size_t)c->d_ff, sizeof(double));
    o->tmp = assay_calloc(b * d, sizeof(double));
    o->toks = assay_calloc(n, sizeof(int32_t));
    o->pos = assay_calloc(n, sizeof(int32_t));
    if (model->mapped) {
        o->layer = assay_malloc(layer_floats(c) * sizeof(float));
        o->rows = assay_malloc((size_t)ORACLE_OUT_ROWS * d * sizeof(float));
    }
    if (o->x == NULL || o->q == NULL || o->k == NULL || o->v == NULL || o->att == NULL ||
        o->scores == NULL || o->xn == NULL || o->gate == NULL || o->up == NULL || o->tmp == NULL ||
        o->toks == NULL || o->pos == NULL ||
        (model->mapped && (o->layer == NULL || o->rows == NULL))) {
        assay_oracle_free(o);
        return ASSAY_ERR_NOMEM;
    }
    o->scratch_bytes =
        sizeof(double) * (n * (d + 2 * qd + 2 * kvd + 1) + b * (2 * d + 2 * (size_t)c->d_ff)) +
        2 * n * sizeof(int32_t) +
        (model->mapped ? sizeof(float) * (layer_floats(c) + (size_t)ORACLE_OUT_ROWS * d) : 0);
    *out = o;
    return ASSAY_OK;
}

enum assay_status assay_oracle_set_threads(struct assay_oracle *o, int32_t n_threads)
{
    if (n_threads < 1 || n_threads > ASSAY_ORACLE_MAX_THREADS) {
        return ASSAY_ERR_INVALID;
    }
    o->n_threads = n_threads;
    return ASSAY_OK;
}

bool assay_oracle_kernel_supported(enum assay_oracle_kernel kernel)
{
    switch (kernel) {
    case ASSAY_ORACLE_KERNEL_AUTO:
    case ASSAY_ORACLE_KERNEL_GENERIC:
        return true;
    case ASSAY_ORACLE_KERNEL_AVX2:
#ifdef ORACLE_HAVE_AVX2
        return __builtin_cpu_supports("avx2") != 0;
#else
        return false;
#endif
    case ASSAY_ORACLE_KERNEL_AVX512:
#ifdef ORACLE_HAVE_AVX2
        return __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx2") != 0;
#else
        return false;
#endif
    }
    return false;
}

const char *assay_oracle_kernel_name(enum assay_oracle_kernel kernel)
{
    switch (kernel) {
    case ASSAY_ORACLE_KERNEL_AUTO:
        return "auto";
    case ASSAY_ORACLE_KERNEL_GENERIC:
        return "generic";
    case ASSAY_ORACLE_KERNEL_AVX2:
        return "avx2";
    case ASSAY_ORACLE_KERNEL_AVX512:
        return "avx512";
    }
    return "?";
}

enum assay_status assay_oracle_set_kernel(struct assay_oracle *o, enum assay_oracle_kernel kernel)
{
    if (kernel == ASSAY_ORACLE_KERNEL_AUTO) {
        kernel = assay_oracle_kernel_supported(ASSAY_ORACLE_KERNEL_AVX512) ? ASSAY_ORACLE_KERNEL_AVX512
                 : assay_oracle_kernel_supported(ASSAY_ORACLE_KERNEL_AVX2)
                     ? ASSAY_ORACLE_KERNEL_AVX2
                     : ASSAY_ORACLE_KERNEL_GENERIC;
    }
    if (kernel != ASSAY_ORACLE_KERNEL_GENERIC && kernel != ASSAY_ORACLE_KERNEL_AVX2 &&
        kernel != ASSAY_ORACLE_KERNEL_AVX512) {
        return ASSAY_ERR_INVALID;
    }
    if (!assay_oracle_kernel_supported(kernel)) {
        return ASSAY_ERR_UNSUPPORTED;
    }
    o->kernel = kernel;
    return ASSAY_OK;
}

enum assay_oracle_kernel assay_oracle_get_kernel(const struct assay_oracle *o)
{
    return o->kernel;
}

size_t assay_oracle_scratch_bytes(const struct assay_oracle *o)
{
    return o->scratch_bytes;
}

void assay_oracle_free(struct assay_oracle *o)
{
    if (o == NULL) {
        return;
    }
    double *bufs[] = {o->x, o->q, o->k, o->v, o->att, o->scores, o->xn, o->gate, o->up, o->tmp};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        assay_free(bufs[i]);
    }
    assay_free(o->layer);
    assay_free(o->rows);
    assay_free(o->toks);
    assay_free(o->pos);
    assay_free(o);
}

/*
 * The dot product of an fp32 weight row with a double vector, in double.
 * Eight partial sums instead of one: the result is still a double-precision
 * sum of the same products (only the association differs, far below fp32
 * resolution), and eight independent chains let the additions overlap,
 * which makes the whole oracle about four times faster.
 */
static double dot(const float *w, const double *x, int32_t n)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int32_t k = 0; k < 8; k++) {
            acc[k] += (double)w[i + k] * x[i + k];
        }
    }
    double sum = 0.0;
    for (int32_t k = 0; k < 8; k++) {
        sum += acc[k];
    }
    for (; i < n; i++) {
        sum += (double)w[i] * x[i];
    }
    return sum;
}

#ifdef ORACLE_HAVE_AVX2
/*
 * dot() of ORACLE_TILE weight rows (w, rows wstride apart) with
 * ORACLE_TILE positions (x, stride apart) at once: out[r][p] is the double
 * dot() computes for row r and position p. Each of the sixteen results has
 * its own 8-wide accumulator whose lane k is dot()'s acc[k] (the same
 * widening, multiply and add, each rounded; no fused multiply-add), summed
 * as dot() sums acc[]. A tile loads each widened weight vector once for
 * four positions and each position's vector once for four rows, where a
 * position at a time loads both for every multiply: the products are
 * then bound by arithmetic, not by loads.
 */
__attribute__((target("avx512f"))) static void dot_tile_avx512(const float *w, int64_t wstride,
                                                             const double *x, int64_t stride,
                                                             int32_t n,
                                                             double out[ORACLE_TILE][ORACLE_TILE])
{
    __m512d acc[ORACLE_TILE][ORACLE_TILE];
    for (int32_t r = 0; r < ORACLE_TILE; r++) {
        for (int32_t p = 0; p < ORACLE_TILE; p++) {
            acc[r][p] = _mm512_setzero_pd();
        }
    }
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m512d xv[ORACLE_TILE];
        for (int32_t p = 0; p < ORACLE_TILE; p++) {
            xv[p] = _mm512_loadu_pd(x + p * stride + i);
        }
        for (int32_t r = 0; r < ORACLE_TILE; r++) {
            const __m512d wv = _mm512_cvtps_pd(_mm256_loadu_ps(w + r * wstride + i));
            for (int32_t p = 0; p < ORACLE_TILE; p++) {
                acc[r][p] = _mm512_add_pd(acc[r][p], _mm512_mul_pd(wv, xv[p]));
            }
        }
    }
    for (int32_t r = 0; r < ORACLE_TILE; r++) {
        for (int32_t p = 0; p < ORACLE_TILE; p++) {
            double lanes[8];
            _mm512_storeu_pd(lanes, acc[r][p]);
            double sum = 0.0;
            for (int32_t k = 0; k < 8; k++) {
                sum += lanes[k];
            }
            for (int32_t j = i; j < n; j++) {
                sum += (double)w[r * wstride + j] * x[p * stride + j];
            }
            out[r][p] = sum;
        }
    }
}

/*
 * dot() of one weight row with ORACLE_GROUP positions at once (x holds them
 * stride apart), each result the same double as dot() computes: lane k of a
 * position's two 4-wide accumulators is dot()'s acc[k], fed the same
 * products in the same order (an exact widening of w, then a multiply and
 * an add, each rounded; no fused multiply-add), and the lanes are summed as
 * dot() sums acc[]. What is faster is only that four positions' chains of
 * additions run side by side and share each widening of w.
 */
__attribute__((target("avx2"))) static void dot_group_avx2(const float *w, const double *x,
                                                          int64_t stride, int32_t n,
                                                          double out[ORACLE_GROUP])
{
    __m256d lo[ORACLE_GROUP], hi[ORACLE_GROUP];
    for (int32_t p = 0; p < ORACLE_GROUP; p++) {
        lo[p] = _mm256_setzero_pd();
        hi[p] = _mm256_setzero_pd();
    }
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256d wl = _mm256_cvtps_pd(_mm_loadu_ps(w + i));
        const __m256d wh = _mm256_cvtps_pd(_mm_loadu_ps(w + i + 4));
        for (int32_t p = 0; p < ORACLE_GROUP; p++) {
            const double *xp = x + p * stride + i;
            lo[p] = _mm256_add_pd(lo[p], _mm256_mul_pd(wl, _mm256_loadu_pd(xp)));
            hi[p] = _mm256_add_pd(hi[p], _mm256_mul_pd(wh, _mm256_loadu_pd(xp + 4)));
        }
    }
    for (int32_t p = 0; p < ORACLE_GROUP; p++) {
        double acc[8];
        _mm256_storeu_pd(acc, lo[p]);
        _mm256_storeu_pd(acc + 4, hi[p]);
        double sum = 0.0;
        for (int32_t k = 0; k < 8; k++) {
            sum += acc[k];
        }
        for (int32_t j = i; j < n; j++) {
            sum += (double)w[j] * x[p * stride + j];
        }
        out[p] = sum;
    }
}
#endif

/*
 * Rows r0..r1 of Y (n, rows) = X (n, cols) W^T, for W stored [out][in] in
 * fp32: row t of Y is the matrix-vector product of W with row t of X. Each
 * element is one dot(), exactly as the product of one position alone
 * computes it (with the AVX2 kernel, dot_group_avx2() computing the same
 * doubles four positions at a time); the loops run over W's rows outside
 * and the positions inside only so that a weight row is read from memory
 * once for all n positions.
 */
struct matmul_part {
    double *y;
    const float *w;
    const double *x;
    int32_t n, rows, cols;
    int64_t ldy; /* the stride of y's rows: rows, or more for a part of y */
    int32_t r0, r1;
    enum assay_oracle_kernel kernel;
};

static void *matmul_rows(void *arg)
{
    const struct matmul_part *p = arg;
    int32_t r = p->r0;
#ifdef ORACLE_HAVE_AVX2
    /* AVX-512: tiles of four rows by four positions, then each of those
     * rows' last positions alone; the rows left over (fewer than four) go
     * as AVX2's below. The same doubles in every case. */
    for (; p->kernel == ASSAY_ORACLE_KERNEL_AVX512 && r + ORACLE_TILE <= p->r1; r += ORACLE_TILE) {
        const float *wr = p->w + (int64_t)r * p->cols;
        int32_t t = 0;
        for (; t + ORACLE_TILE <= p->n; t += ORACLE_TILE) {
            double out[ORACLE_TILE][ORACLE_TILE];
            dot_tile_avx512(wr, p->cols, p->x + (int64_t)t * p->cols, p->cols, p->cols, out);
            for (int32_t i = 0; i < ORACLE_TILE; i++) {
                for (int32_t k = 0; k < ORACLE_TILE; k++) {
                    p->y[(int64_t)(t + k) * p->ldy + r + i] = out[i][k];
                }
            }
        }
        for (; t < p->n; t++) {
            for (int32_t i = 0; i < ORACLE_TILE; i++) {
                p->y[(int64_t)t * p->ldy + r + i] =
                    dot(wr + (int64_t)i * p->cols, p->x + (int64_t)t * p->cols, p->cols);
            }
        }
    }
#endif
    for (; r < p->r1; r++) {
        const float *wr = p->w + (int64_t)r * p->cols;
        int32_t t = 0;
#ifdef ORACLE_HAVE_AVX2
        for (; p->kernel != ASSAY_ORACLE_KERNEL_GENERIC && t + ORACLE_GROUP <= p->n;
             t += ORACLE_GROUP) {
            double out[ORACLE_GROUP];
            dot_group_avx2(wr, p->x + (int64_t)t * p->cols, p->cols, p->cols, out);
            for (int32_t k = 0; k < ORACLE_GROUP; k++) {
                p->y[(int64_t)(t + k) * p->ldy + r] = out[k];
            }
        }
#endif
        for (; t < p->n; t++) {
            p->y[(int64_t)t * p->ldy + r] = dot(wr, p->x + (int64_t)t * p->cols, p->cols);
        }
    }
    return NULL;
}

/*
 * Y = X W^T as above, W's rows split into one contiguous range per thread,
 * row t of Y at y + t * ldy. Every element is computed by the same dot()
 * whichever thread runs it, so the result does not depend on the number
 * of threads. A thread that cannot be started leaves its range to this
 * one.
 */
static void matmul_ld(const struct assay_oracle *o, double *y, int64_t ldy, const float *w,
                      const double *x, int32_t n, int32_t rows, int32_t cols)
{
    struct matmul_part part[ASSAY_ORACLE_MAX_THREADS];
    pthread_t thread[ASSAY_ORACLE_MAX_THREADS];
    bool started[ASSAY_ORACLE_MAX_THREADS] = {false};
    const int32_t n_parts = o->n_threads < rows ? o->n_threads : rows;
    for (int32_t i = 0; i < n_parts; i++) {
        part[i] = (struct matmul_part){y,
                                       w,
                                       x,
                                       n,
                                       rows,
                                       cols,
                                       ldy,
                                       (int32_t)((int64_t)rows * i / n_parts),
                                       (int32_t)((int64_t)rows * (i + 1) / n_parts),
                                       o->kernel};
    }
    for (int32_t i = 1; i < n_parts; i++) {
        started[i] = pthread_create(&thread[i], NULL, matmul_rows, &part[i]) == 0;
    }
    matmul_rows(&part[0]);
    for (int32_t i = 1; i < n_parts; i++) {
        if (started[i]) {
            pthread_join(thread[i], NULL);
        } else {
            matmul_rows(&part[i]);
        }
    }
}

/* Y = X W^T with Y's rows packed (ldy = rows). */
static void matmul(const struct assay_oracle *o, double *y, const float *w, const double *x,
                   int32_t n, int32_t rows, int32_t cols)
{
    matmul_ld(o, y, rows, w, x, n, rows, cols);
}

static void rmsnorm(double *y, const double *x, const float *w, int32_t d, double eps)
{
    double ss = 0.0;
    for (int32_t i = 0; i < d; i++) {
        ss += x[i] * x[i];
    }
    double scale = 1.0 / sqrt(ss / d + eps);
    for (int32_t i = 0; i < d; i++) {
        y[i] = x[i] * scale * (double)w[i];
    }
}

/* RoPE as engine/model.h defines it: pair i of each head turns by
 * pos / scale * theta^(-2i / head_dim) / freqs[i]. The pair is (2i, 2i+1)
 * in llama's layout and (i, i + head_dim/2) in qwen2's (llama.cpp's NEOX). */
static void rope(double *x, int32_t n_heads, int32_t pos, const struct assay_model *m)
{
    const struct assay_model_config *c = &m->cfg;
    const int32_t head_dim = c->head_dim, half = head_dim / 2;
    const double scale = c->rope_scale != 0.0f ? c->rope_scale : 1.0;
    const bool neox = c->arch == ASSAY_ARCH_QWEN2;
    for (int32_t h = 0; h < n_heads; h++) {
        double *v = x + (int64_t)h * head_dim;
        for (int32_t i = 0; i < half; i++) {
            double angle = pos / scale * pow(c->rope_theta, -2.0 * i / head_dim);
            if (m->rope_freqs != NULL) {
                angle /= m->rope_freqs[i];
            }
            double co = cos(angle), si = sin(angle);
            int32_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            double x0 = v[a], x1 = v[b];
            v[a] = x0 * co - x1 * si;
            v[b] = x0 * si + x1 * co;
        }
    }
}

/* y += b, for a bias b that may be absent. */
static void add_bias(double *y, const float *b, int32_t n)
{
    for (int32_t i = 0; b != NULL && i < n; i++) {
        y[i] += b[i];
    }
}

/* The number of positions in the block that starts at t0. */
static int32_t block_len(int32_t t0, int32_t n)
{
    return n - t0 < ORACLE_BLOCK ? n - t0 : ORACLE_BLOCK;
}

/* Rows r0..r0+n of a mapped model's matrix, decoded into out. */
struct decode_part {
    const struct assay_matrix_file *file;
    int64_t cols, r0, n;
    float *out;
    enum assay_status st;
};

static void *decode_rows(void *arg)
{
    struct decode_part *p = arg;
    p->st = assay_model_matrix_rows(NULL, p->file, p->cols, p->r0, p->n, p->out);
    return NULL;
}

/* Rows r0..r0+n of a mapped model's matrix into out, split into one range
 * of rows per thread as matmul() splits its products (each row decodes to
 * the same floats whichever thread decodes it). */
static enum assay_status decode(const struct assay_oracle *o, const struct assay_matrix_file *file,
                                int64_t cols, int64_t r0, int64_t n, float *out)
{
    struct decode_part part[ASSAY_ORACLE_MAX_THREADS];
    pthread_t thread[ASSAY_ORACLE_MAX_THREADS];
    bool started[ASSAY_ORACLE_MAX_THREADS] = {false};
    const int32_t n_parts = o->n_threads < n ? o->n_threads : (int32_t)n;
    for (int32_t i = 0; i < n_parts; i++) {
        int64_t a = n * i / n_parts, b = n * (i + 1) / n_parts;
        part[i] = (struct decode_part){file, cols, r0 + a, b - a, out + a * cols, ASSAY_OK};
    }
    for (int32_t i = 1; i < n_parts; i++) {
        started[i] = pthread_create(&thread[i], NULL, decode_rows, &part[i]) == 0;
    }
    decode_rows(&part[0]);
    enum assay_status st = part[0].st;
    for (int32_t i = 1; i < n_parts; i++) {
        if (started[i]) {
            pthread_join(thread[i], NULL);
        } else {
            decode_rows(&part[i]);
        }
        st = st != ASSAY_OK ? st : part[i].st;
    }
    return st;
}

/* A layer's seven matrices in fp32, [out][in]. */
struct layer_mats {
    const float *wq, *wk, *wv, *wo, *w_gate, *w_up, *w_down;
};

/* Layer l's matrices: the model's own, or a mapped model's decoded into
 * o->layer (the same floats a resident load holds), each matrix's pages of
 * the file given back once decoded. */
static enum assay_status layer_matrices(struct assay_oracle *o, int32_t l, struct layer_mats *out)
{
    const struct assay_model *m = o->model;
    const struct assay_layer_weights *w = &m->layers[l];
    if (!m->mapped) {
        *out = (struct layer_mats){w->wq, w->wk, w->wv, w->wo, w->w_gate, w->w_up, w->w_down};
        return ASSAY_OK;
    }
    const struct assay_model_config *c = &m->cfg;
    const int64_t d = c->d_model, qd = (int64_t)c->n_head * c->head_dim;
    const int64_t kvd = (int64_t)c->n_kv_head * c->head_dim, ff = c->d_ff;
    const struct {
        const struct assay_matrix_file *file;
        int64_t rows, cols;
        const float **dst;
    } parts[] = {
        {&w->files.wq, qd, d, &out->wq},         {&w->files.wk, kvd, d, &out->wk},
        {&w->files.wv, kvd, d, &out->wv},        {&w->files.wo, d, qd, &out->wo},
        {&w->files.w_gate, ff, d, &out->w_gate}, {&w->files.w_up, ff, d, &out->w_up},
        {&w->files.w_down, d, ff, &out->w_down},
    };
    float *p = o->layer;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        enum assay_status st = decode(o, parts[i].file, parts[i].cols, 0, parts[i].rows, p);
        if (st != ASSAY_OK) {
            return st;
        }
        assay_model_matrix_done(m, parts[i].file, 0, parts[i].rows);
        *parts[i].dst = p;
        p += parts[i].rows * parts[i].cols;
    }
    return ASSAY_OK;
}

/* The token embeddings of tokens[0..n) into o->x. */
static enum assay_status embed(struct assay_oracle *o, const int32_t *tokens, int32_t n)
{
    const struct assay_model *m = o->model;
    const int32_t d = m->cfg.d_model;
    for (int32_t t = 0; t < n; t++) {
        const float *row = o->rows;
        if (!m->mapped) {
            row = m->tok_embd + (int64_t)tokens[t] * d;
        } else {
            enum assay_status st =
                assay_model_matrix_rows(NULL, &m->tok_embd_file, d, tokens[t], 1, o->rows);
            if (st != ASSAY_OK) {
                return st;
            }
        }
        for (int32_t i = 0; i < d; i++) {
            o->x[(int64_t)t * d + i] = row[i];
        }
    }
    return ASSAY_OK;
}

/*
 * Every layer over tokens[0..n), leaving the residual stream after the last
 * layer in o->x. tokens may be several sequences end to end: position t is
 * at place pos[t] of its sequence, which began at t - pos[t]. Positions go
 * through the products a block at a time (a position's numbers never
 * depend on the others in its block, of its sequence or not); attention
 * waits for the keys and values of every position and reads only those of
 * the position's own sequence, in the same order as the sequence alone. A
 * mapped model's layer is decoded once for all the blocks.
 */
static enum assay_status forward(struct assay_oracle *o, const int32_t *tokens, int32_t n,
                                 const int32_t *pos)
{
    const struct assay_model *m = o->model;
    const struct assay_model_config *c = &m->cfg;
    const int32_t d = c->d_model, hd = c->head_dim;
    const int32_t qd = c->n_head * hd, kvd = c->n_kv_head * hd;
    const int32_t group = c->n_head / c->n_kv_head;
    const double eps = c->norm_eps;

    enum assay_status st = embed(o, tokens, n);
    for (int32_t l = 0; l < c->n_layer && st == ASSAY_OK; l++) {
        const struct assay_layer_weights *w = &m->layers[l];
        struct layer_mats mats;
        st = layer_matrices(o, l, &mats);
        if (st != ASSAY_OK) {
            break;
        }
        /* attention */
        for (int32_t t0 = 0; t0 < n; t0 += ORACLE_BLOCK) {
            const int32_t nb = block_len(t0, n);
            for (int32_t b = 0; b < nb; b++) {
                rmsnorm(o->xn + (int64_t)b * d, o->x + (int64_t)(t0 + b) * d, w->attn_norm, d, eps);
            }
            matmul(o, o->q + (int64_t)t0 * qd, mats.wq, o->xn, nb, qd, d);
            matmul(o, o->k + (int64_t)t0 * kvd, mats.wk, o->xn, nb, kvd, d);
            matmul(o, o->v + (int64_t)t0 * kvd, mats.wv, o->xn, nb, kvd, d);
            for (int32_t t = t0; t < t0 + nb; t++) {
                add_bias(o->q + (int64_t)t * qd, w->bq, qd);
                add_bias(o->k + (int64_t)t * kvd, w->bk, kvd);
                add_bias(o->v + (int64_t)t * kvd, w->bv, kvd);
                rope(o->q + (int64_t)t * qd, c->n_head, pos[t], m);
                rope(o->k + (int64_t)t * kvd, c->n_kv_head, pos[t], m);
            }
        }
        for (int32_t t = 0; t < n; t++) {
            const int32_t start = t - pos[t];
            for (int32_t h = 0; h < c->n_head; h++) {
                const double *q = o->q + (int64_t)t * qd + (int64_t)h * hd;
                int32_t g = h / group;
                double max = -INFINITY;
                for (int32_t j = start; j <= t; j++) {
                    const double *k = o->k + (int64_t)j * kvd + (int64_t)g * hd;
                    double dot = 0.0;
                    for (int32_t i = 0; i < hd; i++) {
                        dot += q[i] * k[i];
                    }
                    o->scores[j] = dot / sqrt((double)hd);
                    max = o->scores[j] > max ? o->scores[j] : max;
                }
                double sum = 0.0;
                for (int32_t j = start; j <= t; j++) {
                    o->scores[j] = exp(o->scores[j] - max);
                    sum += o->scores[j];
                }
                double *out = o->att + (int64_t)t * qd + (int64_t)h * hd;
                for (int32_t i = 0; i < hd; i++) {
                    out[i] = 0.0;
                }
                for (int32_t j = start; j <= t; j++) {
                    const double *vj = o->v + (int64_t)j * kvd + (int64_t)g * hd;
                    double weight = o->scores[j] / sum;
                    for (int32_t i = 0; i < hd; i++) {
                        out[i] += weight * vj[i];
                    }
                }
            }
        }
        /* the attention's output projection, then the SwiGLU MLP */
        for (int32_t t0 = 0; t0 < n; t0 += ORACLE_BLOCK) {
            const int32_t nb = block_len(t0, n);
            double *x = o->x + (int64_t)t0 * d;
            matmul(o, o->tmp, mats.wo, o->att + (int64_t)t0 * qd, nb, d, qd);
            for (int64_t i = 0; i < (int64_t)nb * d; i++) {
                x[i] += o->tmp[i];
            }
            for (int32_t b = 0; b < nb; b++) {
                rmsnorm(o->xn + (int64_t)b * d, x + (int64_t)b * d, w->ffn_norm, d, eps);
            }
            matmul(o, o->gate, mats.w_gate, o->xn, nb, c->d_ff, d);
            matmul(o, o->up, mats.w_up, o->xn, nb, c->d_ff, d);
            for (int64_t i = 0; i < (int64_t)nb * c->d_ff; i++) {
                double g = o->gate[i];
                o->gate[i] = g / (1.0 + exp(-g)) * o->up[i];
            }
            matmul(o, o->tmp, mats.w_down, o->gate, nb, d, c->d_ff);
            for (int64_t i = 0; i < (int64_t)nb * d; i++) {
                x[i] += o->tmp[i];
            }
        }
    }
    return st;
}

/* The logits (nb, vocab) of positions t0..t0+nb (nb <= ORACLE_BLOCK) from
 * the residual stream forward() left. */
static void output(struct assay_oracle *o, int32_t t0, int32_t nb, double *logits)
{
    const struct assay_model *m = o->model;
    const int32_t d = m->cfg.d_model;
    for (int32_t b = 0; b < nb; b++) {
        rmsnorm(o->xn + (int64_t)b * d, o->x + (int64_t)(t0 + b) * d, m->out_norm, d,
                m->cfg.norm_eps);
    }
    matmul(o, logits, m->output, o->xn, nb, m->cfg.vocab, d);
}

/*
 * The logits (n, vocab) of positions t0..t0+n for a mapped model, the same
 * doubles output() computes: the positions' final norms in place in o->x
 * (forward() runs again before the next use), then the output matrix
 * ORACLE_OUT_ROWS rows at a time, each chunk decoded once and dotted with
 * every position a block at a time.
 */
static enum assay_status output_mapped(struct assay_oracle *o, int32_t t0, int32_t n,
                                       double *logits)
{
    const struct assay_model *m = o->model;
    const int32_t d = m->cfg.d_model, vocab = m->cfg.vocab;
    for (int32_t t = t0; t < t0 + n; t++) {
        rmsnorm(o->x + (int64_t)t * d, o->x + (int64_t)t * d, m->out_norm, d, m->cfg.norm_eps);
    }
    for (int32_t r0 = 0; r0 < vocab; r0 += ORACLE_OUT_ROWS) {
        const int32_t nr = vocab - r0 < ORACLE_OUT_ROWS ? vocab - r0 : ORACLE_OUT_ROWS;
        enum assay_status st = decode(o, &m->output_file, d, r0, nr, o->rows);
        if (st != ASSAY_OK) {
            return st;
        }
        for (int32_t b0 = 0; b0 < n; b0 += ORACLE_BLOCK) {
            matmul_ld(o, logits + (int64_t)b0 * vocab + r0, vocab, o->rows,
                      o->x + (int64_t)(t0 + b0) * d, block_len(b0, n), nr, d);
        }
        assay_model_matrix_done(m, &m->output_file, r0, nr);
    }
    return ASSAY_OK;
}

static bool valid_input(const struct assay_oracle *o, const int32_t *tokens, int32_t n,
                        const double *logits)
{
    if (tokens == NULL || logits == NULL || n < 1 || n > o->max_len) {
        return false;
    }
    for (int32_t t = 0; t < n; t++) {
        if (tokens[t] < 0 || tokens[t] >= o->model->cfg.vocab) {
            return false;
        }
    }
    return true;
}

/* The logits (n, vocab) of the first n rows of the residual stream
 * forward() left (each row's logits depend on that row alone). */
static enum assay_status output_rows(struct assay_oracle *o, int32_t n, double *logits)
{
    if (o->model->mapped) {
        return output_mapped(o, 0, n, logits);
    }
    for (int32_t t0 = 0; t0 < n; t0 += ORACLE_BLOCK) {
        output(o, t0, block_len(t0, n), logits + (int64_t)t0 * o->model->cfg.vocab);
    }
    return ASSAY_OK;
}

/* The logits (n, vocab) of every position of tokens, whose places o->pos
 * holds (forward()). */
static enum assay_status logits_of(struct assay_oracle *o, const int32_t *tokens, int32_t n,
                                   double *logits)
{
    enum assay_status st = forward(o, tokens, n, o->pos);
    return st != ASSAY_OK ? st : output_rows(o, n, logits);
}

enum assay_status assay_oracle_logits(struct assay_oracle *o, const int32_t *tokens, int32_t n,
                                      double *logits)
{
    if (!valid_input(o, tokens, n, logits)) {
        return ASSAY_ERR_INVALID;
    }
    for (int32_t t = 0; t < n; t++) {
        o->pos[t] = t;
    }
    return logits_of(o, tokens, n, logits);
}

/* The sequences of a batch laid end to end in o->toks, their places in
 * o->pos; their total length, or -1 when the batch is invalid (see
 * assay_oracle_logits_batch). */
static int32_t lay_out(struct assay_oracle *o, int32_t n_seqs, const int32_t *const *tokens,
                       const int32_t *lens, const double *logits)
{
    if (n_seqs < 1 || tokens == NULL || lens == NULL || logits == NULL) {
        return -1;
    }
    int32_t n = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        if (lens[s] < 1 || lens[s] > o->max_len - n || !valid_input(o, tokens[s], lens[s], logits)) {
            return -1;
        }
        for (int32_t t = 0; t < lens[s]; t++) {
            o->toks[n + t] = tokens[s][t];
            o->pos[n + t] = t;
        }
        n += lens[s];
    }
    return n;
}

enum assay_status assay_oracle_logits_batch(struct assay_oracle *o, int32_t n_seqs,
                                            const int32_t *const *tokens, const int32_t *lens,
                                            double *logits)
{
    int32_t n = lay_out(o, n_seqs, tokens, lens, logits);
    return n < 0 ? ASSAY_ERR_INVALID : logits_of(o, o->toks, n, logits);
}

enum assay_status assay_oracle_logits_batch_from(struct assay_oracle *o, int32_t n_seqs,
                                                 const int32_t *const *tokens,
                                                 const int32_t *lens, const int32_t *from,
                                                 double *logits)
{
    int32_t n = lay_out(o, n_seqs, tokens, lens, logits);
    for (int32_t s = 0; n >= 0 && from != NULL && s < n_seqs; s++) {
        n = from[s] >= 0 && from[s] < lens[s] ? n : -1;
    }
    if (n < 0 || from == NULL) {
        return ASSAY_ERR_INVALID;
    }
    enum assay_status st = forward(o, o->toks, n, o->pos);
    if (st != ASSAY_OK) {
        return st;
    }
    /* The wanted rows of the residual stream moved to its front, in order
     * (a row never moves back past one still to be read). */
    const int32_t d = o->model->cfg.d_model;
    int32_t kept = 0;
    for (int32_t s = 0, at = 0; s < n_seqs; at += lens[s], s++) {
        for (int32_t t = at + from[s]; t < at + lens[s]; t++, kept++) {
            if (t != kept) {
                memcpy(o->x + (int64_t)kept * d, o->x + (int64_t)t * d, sizeof(double) * (size_t)d);
            }
        }
    }
    return output_rows(o, kept, logits);
}

/* The last row of assay_oracle_logits, bit for bit: the same forward pass,
 * and the final norm and output projection of the last position only. */
enum assay_status assay_oracle_next_logits(struct assay_oracle *o, const int32_t *tokens,
                                           int32_t n, double *logits)
{
    int32_t from = n - 1;
    return assay_oracle_logits_batch_from(o, 1, &tokens, &n, &from, logits);
}

/* ---- the exact processed distribution ---------------------------------- */

struct ranked {
    double logit;
    int32_t id;
};

/* Descending logit, then ascending id: the documented tie rule. */
static int by_rank(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->logit != y->logit) {
        return x->logit > y->logit ? -1 : 1;
    }
    return (x->id > y->id) - (x->id < y->id);
}

enum assay_status assay_oracle_distribution(const double *logits, int32_t vocab,
                                            const struct assay_sampling *s,
                                            enum assay_sampling_order order, double *p,
                                            struct assay_oracle_dist_info *info)
{
    if (vocab < 1 || !(s->temperature >= 0.0f) || !isfinite(s->temperature) || s->top_k < 0 ||
        !(s->top_p > 0.0f && s->top_p <= 1.0f)) {
        return ASSAY_ERR_INVALID;
    }
    struct ranked *r = assay_calloc((size_t)vocab, sizeof *r);
    if (r == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t i = 0; i < vocab; i++) {
        r[i].logit = logits[i];
        r[i].id = i;
        p[i] = 0.0;
    }
    qsort(r, (size_t)vocab, sizeof *r, by_rank);
    struct assay_oracle_dist_info inf = {0, INFINITY, INFINITY, INFINITY};
    if (vocab > 1) {
        inf.greedy_gap = r[0].logit - r[1].logit;
    }
    if (s->temperature == 0.0f) {
        p[r[0].id] = 1.0;
        inf.n_kept = 1;
        if (info != NULL) {
            *info = inf;
        }
        assay_free(r);
        return ASSAY_OK;
    }
    /* Softmax of logits / temperature, in rank order. */
    double *prob = assay_calloc((size_t)vocab, sizeof *prob);
    if (prob == NULL) {
        assay_free(r);
        return ASSAY_ERR_NOMEM;
    }
    double total = 0.0;
    for (int32_t i = 0; i < vocab; i++) {
        prob[i] = exp((r[i].logit - r[0].logit) / s->temperature);
        total += prob[i];
    }
    for (int32_t i = 0; i < vocab; i++) {
        prob[i] /= total;
    }
    int32_t keep = vocab;
    if (s->top_k > 0 && s->top_k < vocab) {
        keep = s->top_k;
        inf.top_k_gap = r[keep - 1].logit - r[keep].logit;
    }
    if (s->top_p < 1.0f) {
        /* The nucleus is measured on the whole tempered distribution
         * (JOINT) or on the top-k set renormalised (SEQUENTIAL). */
        double mass = 1.0;
        int32_t scan = vocab;
        if (order == ASSAY_SAMPLING_SEQUENTIAL) {
            mass = 0.0;
            for (int32_t i = 0; i < keep; i++) {
                mass += prob[i];
            }
            scan = keep;
        }
        double cum = 0.0, before = 0.0;
        int32_t nucleus = scan;
        for (int32_t i = 0; i < scan; i++) {
            before = cum;
            cum += prob[i] / mass;
            if (cum >= s->top_p) {
                nucleus = i + 1;
                break;
            }
        }
        if (nucleus < scan || cum >= s->top_p) {
            double above = cum - s->top_p, below = s->top_p - before;
            inf.top_p_margin = above < below ? above : below;
        }
        keep = nucleus < keep ? nucleus : keep;
    }
    double kept = 0.0;
    for (int32_t i = 0; i < keep; i++) {
        kept += prob[i];
    }
    for (int32_t i = 0; i < keep; i++) {
        p[r[i].id] = prob[i] / kept;
    }
    inf.n_kept = keep;
    if (info != NULL) {
        *info = inf;
    }
    assay_free(prob);
    assay_free(r);
    return ASSAY_OK;
}
