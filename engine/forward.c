#include "forward.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/mutant.h"

/* OpenBLAS 0.3.21 sends products with M*N*K at or below this to its
 * small-matrix kernel on AVX-512 cores. */
#define SMALL_KERNEL_MNK 1000000.0

/* Head sizes up to this accumulate their attention output in registers. */
#define ATTN_FAST_HD 128

/* The hot loops, also compiled for x86-64-v3 (AVX2, FMA) and picked at load time
 * (GCC's function multi-versioning; plain code elsewhere). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#define ASSAY_HOT_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define ASSAY_HOT_CLONES
#endif

struct assay_forward {
    struct assay_model_config cfg;
    const struct assay_model *model;
    int32_t q_dim, kv_dim, qkv_dim;
    int32_t n_blocks, block_size, max_rows, max_out, max_seq_len, pad_rows;
    bool batch_invariant;
    int mutant;
    struct assay_worker *worker; /* borrowed; may be NULL */
    /* weights in the [in][out] layout the products use (K x N, NoTrans) */
    float *wqkv;  /* (layer, d_model, q_dim + 2 kv_dim) */
    float *wo;    /* (layer, q_dim, d_model) */
    float *wgu;   /* (layer, d_model, 2 d_ff): gate columns then up columns */
    float *wdown; /* (layer, d_ff, d_model) */
    float *wout;  /* (d_model, vocab) */
    /* KV store */
    float *k; /* (layer, block, pos_in_block, kv_dim) */
    float *v; /* (layer, block, pos_in_block, kv_dim) */
    /* RoPE tables */
    float *rope_cos; /* (max_seq_len + 1, head_dim / 2) */
    float *rope_sin;
    /* scratch, each with pad_rows extra rows */
    float *x;      /* (rows, d_model) residual stream */
    float *xn;     /* (rows, d_model) normalised */
    float *qkv;    /* (rows, qkv_dim) */
    float *att;    /* (rows, q_dim) */
    float *proj;   /* (rows, d_model) */
    float *gu;     /* (rows, 2 d_ff) */
    float *hidden; /* (rows, d_ff) */
    float *on;     /* (out rows, d_model) normalised rows for the LM head */
    float *logits; /* (out rows, vocab) */
    float *scores; /* (max_seq_len + 2): the caller's thread */
    float *scores2; /* the same for the worker's share of the rows */
    bool small_step; /* this pass's products all fit the small-matrix kernel */
    int32_t *row_pos; /* (rows) position of each row */
    int32_t *row_seq; /* (rows) sequence of each row */
    int64_t bytes;
};

static float *alloc_floats(struct assay_forward *f, int64_t n)
{
    f->bytes += n * (int64_t)sizeof(float);
    return assay_calloc((size_t)n, sizeof(float));
}

/* Rows to add so that a product with n columns and k inner size never
 * takes the small-matrix kernel. */
static int32_t pad_for(int64_t n, int64_t k)
{
    return (int32_t)(SMALL_KERNEL_MNK / (double)(n * k)) + 1;
}

static void transpose_into(float *dst, const float *src, int32_t rows, int32_t cols,
                           int32_t dst_stride, int32_t dst_col0)
{
    /* src is (rows, cols) = [out][in]; dst gets [in][out] at column dst_col0. */
    for (int32_t r = 0; r < rows; r++) {
        for (int32_t c = 0; c < cols; c++) {
            dst[(int64_t)c * dst_stride + dst_col0 + r] = src[(int64_t)r * cols + c];
        }
    }
}

enum assay_status assay_forward_init(struct assay_forward **out,
                                     const struct assay_forward_params *p)
{
    *out = NULL;
    if (p->model == NULL || p->n_blocks < 1 || p->block_size < 1 || p->max_rows < 1 ||
        p->max_out < 1 || p->max_seq_len < 1) {
        return ASSAY_ERR_INVALID;
    }
    struct assay_forward *f = assay_calloc(1, sizeof *f);
    if (f == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    const struct assay_model_config *c = &p->model->cfg;
    f->cfg = *c;
    f->model = p->model;
    f->q_dim = c->n_head * c->head_dim;
    f->kv_dim = c->n_kv_head * c->head_dim;
    f->qkv_dim = f->q_dim + 2 * f->kv_dim;
    f->n_blocks = p->n_blocks;
    f->block_size = p->block_size;
    f->max_rows = p->max_rows;
    f->max_out = p->max_out;
    f->max_seq_len = p->max_seq_len;
    f->batch_invariant = p->batch_invariant;
    f->mutant = p->mutant;
    f->worker = p->batch_invariant ? NULL : p->worker;
    int64_t d = c->d_model, ff = c->d_ff, L = c->n_layer;
    int32_t pad = 0;
    if (p->batch_invariant) {
        int64_t shapes[][2] = {{f->qkv_dim, d}, {d, f->q_dim}, {2 * ff, d}, {d, ff}, {c->vocab, d}};
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
            int32_t need = pad_for(shapes[i][0], shapes[i][1]);
            pad = need > pad ? need : pad;
        }
    }
    f->pad_rows = pad;
    if (ASSAY_MUTANT_ON(p->mutant, ASSAY_MUTANT_PADDING_ROW_NAN)) {
        pad += 8; /* room for the planted bug's padding rows */
    }
    int64_t rows = (int64_t)p->max_rows + pad;
    int64_t outs = (int64_t)p->max_out + pad;
    int64_t kv_floats = L * p->n_blocks * (int64_t)p->block_size * f->kv_dim;
    f->wqkv = alloc_floats(f, L * d * f->qkv_dim);
    f->wo = alloc_floats(f, L * f->q_dim * d);
    f->wgu = alloc_floats(f, L * d * 2 * ff);
    f->wdown = alloc_floats(f, L * ff * d);
    f->wout = alloc_floats(f, d * c->vocab);
    f->k = alloc_floats(f, kv_floats);
    f->v = alloc_floats(f, kv_floats);
    f->rope_cos = alloc_floats(f, ((int64_t)p->max_seq_len + 1) * (c->head_dim / 2));
    f->rope_sin = alloc_floats(f, ((int64_t)p->max_seq_len + 1) * (c->head_dim / 2));
    f->x = alloc_floats(f, rows * d);
    f->xn = alloc_floats(f, rows * d);
    f->qkv = alloc_floats(f, rows * f->qkv_dim);
    f->att = alloc_floats(f, rows * f->q_dim);
    f->proj = alloc_floats(f, rows * d);
    f->gu = alloc_floats(f, rows * 2 * ff);
    f->hidden = alloc_floats(f, rows * ff);
    f->on = alloc_floats(f, outs * d);
    f->logits = alloc_floats(f, outs * c->vocab);
    f->scores = alloc_floats(f, (int64_t)p->max_seq_len + 2);
    f->scores2 = alloc_floats(f, (int64_t)p->max_seq_len + 2);
    f->row_pos = assay_calloc((size_t)rows, sizeof(int32_t));
    f->row_seq = assay_calloc((size_t)rows, sizeof(int32_t));
    if (f->wqkv == NULL || f->wo == NULL || f->wgu == NULL || f->wdown == NULL ||
        f->wout == NULL || f->k == NULL || f->v == NULL || f->rope_cos == NULL ||
        f->rope_sin == NULL || f->x == NULL || f->xn == NULL || f->qkv == NULL ||
        f->att == NULL || f->proj == NULL || f->gu == NULL || f->hidden == NULL ||
        f->on == NULL || f->logits == NULL || f->scores == NULL || f->scores2 == NULL ||
        f->row_pos == NULL || f->row_seq == NULL) {
        assay_forward_free(f);
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t l = 0; l < c->n_layer; l++) {
        const struct assay_layer_weights *w = &p->model->layers[l];
        float *qkv = f->wqkv + (int64_t)l * d * f->qkv_dim;
        transpose_into(qkv, w->wq, f->q_dim, (int32_t)d, f->qkv_dim, 0);
        transpose_into(qkv, w->wk, f->kv_dim, (int32_t)d, f->qkv_dim, f->q_dim);
        transpose_into(qkv, w->wv, f->kv_dim, (int32_t)d, f->qkv_dim, f->q_dim + f->kv_dim);
        transpose_into(f->wo + (int64_t)l * f->q_dim * d, w->wo, (int32_t)d, f->q_dim, (int32_t)d, 0);
        float *gu = f->wgu + (int64_t)l * d * 2 * ff;
        transpose_into(gu, w->w_gate, (int32_t)ff, (int32_t)d, (int32_t)(2 * ff), 0);
        transpose_into(gu, w->w_up, (int32_t)ff, (int32_t)d, (int32_t)(2 * ff), (int32_t)ff);
        transpose_into(f->wdown + (int64_t)l * ff * d, w->w_down, (int32_t)d, (int32_t)ff,
                       (int32_t)d, 0);
    }
    transpose_into(f->wout, p->model->output, c->vocab, (int32_t)d, c->vocab, 0);
    int32_t half = c->head_dim / 2;
    for (int32_t pos = 0; pos <= p->max_seq_len; pos++) {
        for (int32_t i = 0; i < half; i++) {
            double theta = pos * pow((double)c->rope_theta, -2.0 * i / c->head_dim);
            f->rope_cos[(int64_t)pos * half + i] = (float)cos(theta);
            f->rope_sin[(int64_t)pos * half + i] = (float)sin(theta);
        }
    }
    *out = f;
    return ASSAY_OK;
}

void assay_forward_free(struct assay_forward *f)
{
    if (f == NULL) {
        return;
    }
    float *bufs[] = {f->wqkv, f->wo, f->wgu, f->wdown, f->wout, f->k, f->v, f->rope_cos,
                     f->rope_sin, f->x, f->xn, f->qkv, f->att, f->proj, f->gu, f->hidden,
                     f->on, f->logits, f->scores, f->scores2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        assay_free(bufs[i]);
    }
    assay_free(f->row_pos);
    assay_free(f->row_seq);
    assay_free(f);
}

const float *assay_forward_logits(const struct assay_forward *f)
{
    return f->logits;
}

int64_t assay_forward_bytes(const struct assay_forward *f)
{
    return f->bytes;
}

/* One product: C (m, n) = A (m, k) * B (k, n), leading dimensions ldb, ldc. */
struct product {
    const float *a, *b;
    float *c;
    int32_t m, k, n, ldb, ldc;
};

static void run_product(void *arg)
{
    const struct product *p = arg;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p->m, p->n, p->k, 1.0f, p->a, p->k,
                p->b, p->ldb, 0.0f, p->c, p->ldc);
}

/*
 * C (m, n) = A (m, k) * B (k, n), padded for batch invariance when asked.
 * In a small step (every product fits OpenBLAS's single-threaded
 * small-matrix kernel: one- or two-row decode) products are split by
 * columns across the worker thread when there is one, so both cores work;
 * larger products use OpenBLAS's own threads.
 */
static void matmul(struct assay_forward *f, const float *a, const float *b, float *cm, int32_t m,
                   int32_t k, int32_t n)
{
    int32_t rows = m;
    if (f->batch_invariant && (double)m * n * k <= SMALL_KERNEL_MNK) {
        rows = pad_for(n, k);
    }
    if (f->worker != NULL && f->small_step && n >= 128) {
        int32_t half = (n / 2 + 15) / 16 * 16;
        struct product mine = {a, b, cm, m, k, half, n, n};
        struct product other = {a, b + half, cm + half, m, k, n - half, n, n};
        assay_worker_post(f->worker, run_product, &other, true);
        run_product(&mine);
        assay_worker_wait(f->worker);
        return;
    }
    struct product all = {a, b, cm, rows, k, n, n, n};
    run_product(&all);
}

static void rmsnorm(float *out, const float *x, const float *w, int32_t d, float eps)
{
    float ss = 0.0f;
    for (int32_t i = 0; i < d; i++) {
        ss += x[i] * x[i];
    }
    float scale = 1.0f / sqrtf(ss / (float)d + eps);
    for (int32_t i = 0; i < d; i++) {
        out[i] = x[i] * scale * w[i];
    }
}

/* Rotate adjacent pairs (x[2i], x[2i+1]) of each head by pos * theta_i. */
static void rope(const struct assay_forward *f, float *x, int32_t n_heads, int32_t pos)
{
    int32_t hd = f->cfg.head_dim, half = hd / 2;
    const float *cs = f->rope_cos + (int64_t)pos * half;
    const float *sn = f->rope_sin + (int64_t)pos * half;
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * hd;
        for (int32_t i = 0; i < half; i++) {
            float x0 = v[2 * i], x1 = v[2 * i + 1];
            v[2 * i] = x0 * cs[i] - x1 * sn[i];
            v[2 * i + 1] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

/* Eight floats in one vector (GCC and clang vector extensions): 256-bit
 * registers where the clone targets AVX2, two 128-bit ones otherwise.
 * Loaded and stored with memcpy (no alignment assumed); never passed by
 * value, whose ABI differs between the two. */
typedef float v8f __attribute__((vector_size(32)));

typedef int32_t v8i __attribute__((vector_size(32)));

/*
 * e^x of eight floats in place: x = n ln2 + r with n rounded to nearest and
 * |r| <= ln2 / 2, e^r by Cephes's degree-7 polynomial, 2^n through the
 * exponent bits. Within 2 ulp of libm's expf over the normal range; e^x is
 * 0 below -87.3 (and for -inf), e^88.4 above 88.4, NaN for NaN. Each lane
 * depends on its own input alone.
 */
static inline __attribute__((always_inline)) void exp8_inplace(float *p)
{
    const v8f hi = {88.3762626647949f, 88.3762626647949f, 88.3762626647949f, 88.3762626647949f,
                    88.3762626647949f, 88.3762626647949f, 88.3762626647949f, 88.3762626647949f};
    const v8f lo = {-87.3365447505531f, -87.3365447505531f, -87.3365447505531f,
                    -87.3365447505531f, -87.3365447505531f, -87.3365447505531f,
                    -87.3365447505531f, -87.3365447505531f};
    v8f x;
    memcpy(&x, p, sizeof x);
    v8i under = x < lo;
    v8i over = x > hi;
    v8i nan = x != x;
    x = (v8f)(((v8i)x & ~over) | ((v8i)hi & over));
    x = (v8f)(((v8i)x & ~under) | ((v8i)lo & under));
    v8f t = x * 1.44269504088896341f;
    v8f nf = (t + 12582912.0f) - 12582912.0f; /* round to nearest: 1.5 * 2^23 */
    nf = (v8f)((v8i)nf & ~nan);               /* NaN lanes: n = 0, so no cast of NaN */
    v8f r = x - nf * 0.693359375f;
    r = r - nf * -2.12194440e-4f;
    v8f y = 1.9875691500e-4f * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * (r * r) + r + 1.0f;
    v8i bits = (__builtin_convertvector(nf, v8i) + 127) << 23;
    v8f scale;
    memcpy(&scale, &bits, sizeof scale);
    y = y * scale;
    y = (v8f)((v8i)y & ~under);
    memcpy(p, &y, sizeof y);
}

/* e^x in place for n floats: eight at a time, the tail by expf. */
static inline __attribute__((always_inline)) void exp_inplace(float *x, int32_t n)
{
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        exp8_inplace(x + i);
    }
    for (; i < n; i++) {
        x[i] = expf(x[i]);
    }
}

/*
 * Dot product of two head vectors. Eight partial sums in a fixed order (one
 * vector lane each, then pairwise): the result depends on the two vectors
 * alone, never on the batch, so batch invariance holds.
 */
static inline __attribute__((always_inline)) float dot_head(const float *a, const float *b,
                                                            int32_t n)
{
    v8f acc = {0, 0, 0, 0, 0, 0, 0, 0};
    int32_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f x, y;
        memcpy(&x, a + i, sizeof x);
        memcpy(&y, b + i, sizeof y);
        acc += x * y;
    }
    float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) {
        sum += a[i] * b[i];
    }
    return sum;
}

static int64_t kv_offset(const struct assay_forward *f, int32_t layer, int32_t block, int32_t slot)
{
    return (((int64_t)layer * f->n_blocks + block) * f->block_size + slot) * f->kv_dim;
}

static const float *kv_at(const struct assay_forward *f, const float *base, int32_t layer,
                          const int32_t *blocks, int32_t pos)
{
    return base + kv_offset(f, layer, blocks[pos / f->block_size], pos % f->block_size);
}

/*
 * One head's attention for one query (n_keys keys of sequence seq, plus the
 * planted leak's key when `leak` is set); head_dim hd. Keys and values are
 * walked block by block (no division per key), and the weighted sum of the
 * values is kept in `acc` (hd floats) so that, with hd known at compile time
 * (the callers below), it stays in registers.
 */
static inline __attribute__((always_inline)) void
attend_head(const struct assay_forward *f, int32_t layer, const struct assay_forward_seq *seq,
            const struct assay_forward_seq *leak, int32_t pos, int32_t g, const float *q, float *o,
            float *scores, float *acc, const int32_t hd)
{
    const float scale = 1.0f / sqrtf((float)hd);
    const int32_t bs = f->block_size;
    const int64_t kv_dim = f->kv_dim;
    int32_t n_keys = pos + 1;
    float max = -INFINITY;
    for (int32_t j0 = 0; j0 < n_keys; j0 += bs) {
        const float *kb = f->k + kv_offset(f, layer, seq->blocks[j0 / bs], 0) + (int64_t)g * hd;
        int32_t jn = n_keys - j0 < bs ? n_keys - j0 : bs;
        for (int32_t jj = 0; jj < jn; jj++) {
            float sc = dot_head(q, kb + jj * kv_dim, hd) * scale;
            scores[j0 + jj] = sc;
            max = sc > max ? sc : max;
        }
    }
    int32_t leak_pos = 0;
    if (leak != NULL) {
        leak_pos = leak->pos0 + leak->n_rows - 1;
        const float *kj = kv_at(f, f->k, layer, leak->blocks, leak_pos) + (int64_t)g * hd;
        scores[n_keys] = dot_head(q, kj, hd) * scale;
        max = scores[n_keys] > max ? scores[n_keys] : max;
    }
    int32_t n_scores = n_keys + (leak != NULL ? 1 : 0);
    if (ASSAY_MUTANT_ON(f->mutant, ASSAY_MUTANT_PADDING_ROW_NAN)) {
        /* The planted bug's kernel reads keys in tiles of 8 (within the
         * query's block) and masks the tail of the last tile with -inf,
         * trusting a weight of exp(-inf) = 0 to cancel those values. */
        int32_t tile_end = (n_keys + 7) / 8 * 8;
        int32_t block_end = (pos / bs + 1) * bs;
        tile_end = tile_end < block_end ? tile_end : block_end;
        tile_end = tile_end < f->max_seq_len ? tile_end : f->max_seq_len;
        for (int32_t j = n_keys; j < tile_end; j++) {
            scores[j] = -INFINITY;
        }
        n_scores = tile_end > n_keys ? tile_end : n_keys;
    }
    for (int32_t j = 0; j < n_scores; j++) {
        scores[j] -= max;
    }
    exp_inplace(scores, n_scores);
    float sum = 0.0f;
    for (int32_t j = 0; j < n_scores; j++) {
        sum += scores[j];
    }
    for (int32_t i = 0; i < hd; i++) {
        acc[i] = 0.0f;
    }
    /* Values of the sequence's own keys, then the leak's, then (the
     * padding mutant) the masked tail slots of the query's block. With hd
     * a multiple of 8 (and known here) the sum is held in vectors; each
     * lane does what the scalar loop does, so the result is the same. */
    int32_t n_own = n_scores - (leak != NULL ? 1 : 0);
    v8f accv[ATTN_FAST_HD / 8];
    const bool vec = hd % 8 == 0 && hd <= ATTN_FAST_HD;
    for (int32_t i = 0; vec && i < hd / 8; i++) {
        accv[i] = (v8f){0, 0, 0, 0, 0, 0, 0, 0};
    }
    for (int32_t j0 = 0; j0 < n_own; j0 += bs) {
        const float *vb = f->v + kv_offset(f, layer, seq->blocks[j0 / bs], 0) + (int64_t)g * hd;
        int32_t jn = n_own - j0 < bs ? n_own - j0 : bs;
        for (int32_t jj = 0; jj < jn; jj++) {
            float w = scores[j0 + jj] / sum;
            const float *vj = vb + jj * kv_dim;
            if (vec) {
                for (int32_t i = 0; i < hd / 8; i++) {
                    v8f x;
                    memcpy(&x, vj + 8 * i, sizeof x);
                    accv[i] += w * x;
                }
            } else {
                for (int32_t i = 0; i < hd; i++) {
                    acc[i] += w * vj[i];
                }
            }
        }
    }
    for (int32_t i = 0; vec && i < hd / 8; i++) {
        memcpy(acc + 8 * i, &accv[i], sizeof accv[i]);
    }
    if (leak != NULL) {
        float w = scores[n_keys] / sum;
        const float *vj = kv_at(f, f->v, layer, leak->blocks, leak_pos) + (int64_t)g * hd;
        for (int32_t i = 0; i < hd; i++) {
            acc[i] += w * vj[i];
        }
    }
    for (int32_t i = 0; i < hd; i++) {
        o[i] = acc[i];
    }
}

/*
 * Attention of one row (query position `pos` of sequence s) for heads
 * [h0, h1), with `scores` as scratch (one buffer per thread). Compiled for
 * x86-64-v3 (AVX2, FMA) as well as the baseline where the compiler can,
 * chosen at load time by the CPU: the row's result depends on its own keys
 * and values alone, so batch invariance holds on either.
 */
ASSAY_HOT_CLONES
static void attend_row(const struct assay_forward *f, const struct assay_forward_batch *b,
                       int32_t layer, int32_t s, int32_t row, int32_t pos, int32_t h0, int32_t h1,
                       float *scores)
{
    const struct assay_model_config *c = &f->cfg;
    int32_t hd = c->head_dim, group = c->n_head / c->n_kv_head;
    const struct assay_forward_seq *seq = &b->seqs[s];
    /* The planted leak: a sequence also sees the last key its batch
     * neighbour wrote in this pass. */
    const struct assay_forward_seq *leak = NULL;
    if (ASSAY_MUTANT_ON(f->mutant, ASSAY_MUTANT_ATTN_NEIGHBOUR_LEAK) && s > 0) {
        leak = &b->seqs[s - 1];
    }
    const float *q_row = f->qkv + (int64_t)row * f->qkv_dim;
    float *out_row = f->att + (int64_t)row * f->q_dim;
    float acc[ATTN_FAST_HD];
    for (int32_t h = h0; h < h1; h++) {
        const float *q = q_row + (int64_t)h * hd;
        float *o = out_row + (int64_t)h * hd;
        int32_t g = h / group;
        /* The common head sizes get a copy of their own, the rest the
         * general one (accumulating in place when wider than acc). */
        switch (hd) {
        case 32:
            attend_head(f, layer, seq, leak, pos, g, q, o, scores, acc, 32);
            break;
        case 64:
            attend_head(f, layer, seq, leak, pos, g, q, o, scores, acc, 64);
            break;
        case 128:
            attend_head(f, layer, seq, leak, pos, g, q, o, scores, acc, 128);
            break;
        default:
            attend_head(f, layer, seq, leak, pos, g, q, o, scores, hd <= ATTN_FAST_HD ? acc : o,
                        hd);
            break;
        }
    }
}

/*
 * The padding-row-nan mutant: a padding row takes the slot after the last
 * row of the batch's last sequence (when that slot is in the same block), so
 * that sequence's masked tail keys hold the padding row's key and value.
 */
static void padding_row_kv(struct assay_forward *f, const struct assay_forward_batch *b,
                           int32_t layer, int32_t row)
{
    const struct assay_forward_seq *last = &b->seqs[b->n_seqs - 1];
    int32_t pos = last->pos0 + last->n_rows;
    float *qkv = f->qkv + (int64_t)row * f->qkv_dim;
    rope(f, qkv, f->cfg.n_head, pos);
    rope(f, qkv + f->q_dim, f->cfg.n_kv_head, pos);
    if (pos % f->block_size == 0 || pos >= f->max_seq_len) {
        return; /* the slot would be in a block the sequence does not have */
    }
    int64_t off = kv_offset(f, layer, last->blocks[pos / f->block_size], pos % f->block_size);
    memcpy(f->k + off, qkv + f->q_dim, sizeof(float) * (size_t)f->kv_dim);
    memcpy(f->v + off, qkv + f->q_dim + f->kv_dim, sizeof(float) * (size_t)f->kv_dim);
}

/* A padding row belongs to no sequence (its length is 0), so every score of
 * its tile is masked: the softmax's maximum is -inf and exp(-inf - -inf) is
 * NaN, which is what the row's attention output becomes. */
static void padding_row_attend(const struct assay_forward *f, int32_t row)
{
    float *out_row = f->att + (int64_t)row * f->q_dim;
    for (int32_t h = 0; h < f->cfg.n_head; h++) {
        float max = -INFINITY; /* over no unmasked key */
        float w = expf(-INFINITY - max);
        float sum = 8.0f * w;
        for (int32_t i = 0; i < f->cfg.head_dim; i++) {
            out_row[(int64_t)h * f->cfg.head_dim + i] = w / sum;
        }
    }
}

/* A share of one layer's per-row work: rows [r0, r1), or, for a single
 * row, heads [h0, h1) of its attention. */
struct row_task {
    const struct assay_forward *f;
    const struct assay_forward_batch *b;
    int32_t layer, r0, r1, h0, h1;
    float *scores;
};

static void attend_rows(void *arg)
{
    const struct row_task *t = arg;
    const struct assay_forward *f = t->f;
    for (int32_t r = t->r0; r < t->r1; r++) {
        if (ASSAY_MUTANT_ON(f->mutant, ASSAY_MUTANT_PADDING_ROW_NAN) && f->row_seq[r] < 0) {
            padding_row_attend(f, r);
            continue;
        }
        attend_row(f, t->b, t->layer, f->row_seq[r], r, f->row_pos[r], t->h0, t->h1, t->scores);
    }
}

/* SwiGLU of rows [r0, r1): hidden = silu(gate) * up, silu(g) = g / (1 + e^-g). */
ASSAY_HOT_CLONES
static void swiglu_rows(void *arg)
{
    const struct row_task *t = arg;
    const struct assay_forward *f = t->f;
    int32_t ff = f->cfg.d_ff;
    for (int32_t r = t->r0; r < t->r1; r++) {
        const float *g = f->gu + (int64_t)r * 2 * ff;
        const float *u = g + ff;
        float *h = f->hidden + (int64_t)r * ff;
        for (int32_t i = 0; i < ff; i++) {
            h[i] = -g[i];
        }
        exp_inplace(h, ff);
        for (int32_t i = 0; i < ff; i++) {
            h[i] = g[i] / (1.0f + h[i]) * u[i];
        }
    }
}

/*
 * Run fn over the pass's n rows, half on the worker when there is one: the
 * rows split in two, or a single row's heads (only attention splits by
 * head; SwiGLU of one row is too short to hand off). Every row's result is
 * computed the same way whichever thread computes it.
 */
static void split_rows(struct assay_forward *f, const struct assay_forward_batch *b,
                       int32_t layer, int32_t n, void (*fn)(void *))
{
    int32_t heads = f->cfg.n_head;
    struct row_task all = {f, b, layer, 0, n, 0, heads, f->scores};
    if (f->worker == NULL || (n == 1 && fn != attend_rows)) {
        fn(&all);
        return;
    }
    struct row_task mine = all, other = all;
    other.scores = f->scores2;
    if (n == 1) {
        mine.h1 = other.h0 = heads / 2;
    } else {
        mine.r1 = other.r0 = n / 2;
    }
    assay_worker_post(f->worker, fn, &other, f->small_step);
    fn(&mine);
    assay_worker_wait(f->worker);
}

enum assay_status assay_forward_run(struct assay_forward *f, const struct assay_forward_batch *b)
{
    const struct assay_model_config *c = &f->cfg;
    if (b->n_rows < 1 || b->n_rows > f->max_rows || b->n_out < 0 || b->n_out > f->max_out) {
        return ASSAY_ERR_INVALID;
    }
    const struct assay_model *m = f->model;
    int32_t d = c->d_model, ff = c->d_ff, n = b->n_rows;
    /* The largest product of the pass, per row: k * n of each weight. */
    double per_row[] = {(double)d * f->qkv_dim, (double)f->q_dim * d, (double)d * 2 * ff,
                        (double)ff * d, (double)d * c->vocab};
    double largest = 0.0;
    for (size_t i = 0; i < sizeof per_row / sizeof per_row[0]; i++) {
        largest = per_row[i] > largest ? per_row[i] : largest;
    }
    f->small_step = n * largest <= SMALL_KERNEL_MNK;
    for (int32_t s = 0; s < b->n_seqs; s++) {
        const struct assay_forward_seq *seq = &b->seqs[s];
        if (seq->pos0 < 0 || seq->pos0 + seq->n_rows > f->max_seq_len) {
            return ASSAY_ERR_INVALID;
        }
        for (int32_t r = 0; r < seq->n_rows; r++) {
            f->row_pos[seq->row0 + r] = seq->pos0 + r;
            f->row_seq[seq->row0 + r] = s;
        }
    }
    for (int32_t r = 0; r < n; r++) {
        memcpy(f->x + (int64_t)r * d, m->tok_embd + (int64_t)b->tokens[r] * d,
               sizeof(float) * (size_t)d);
    }
    if (ASSAY_MUTANT_ON(f->mutant, ASSAY_MUTANT_PADDING_ROW_NAN) && b->n_seqs > 0) {
        /* The planted bug: pad the batch to a multiple of 8 rows of token 0
         * (row_seq -1) that go through every layer with the real rows. */
        int32_t n_pad = (8 - n % 8) % 8;
        for (int32_t r = n; r < n + n_pad; r++) {
            memcpy(f->x + (int64_t)r * d, m->tok_embd, sizeof(float) * (size_t)d);
            f->row_seq[r] = -1;
            f->row_pos[r] = 0;
        }
        n += n_pad;
    }
    for (int32_t l = 0; l < c->n_layer; l++) {
        const struct assay_layer_weights *w = &m->layers[l];
        for (int32_t r = 0; r < n; r++) {
            rmsnorm(f->xn + (int64_t)r * d, f->x + (int64_t)r * d, w->attn_norm, d, c->norm_eps);
        }
        matmul(f, f->xn, f->wqkv + (int64_t)l * d * f->qkv_dim, f->qkv, n, d, f->qkv_dim);
        /* Rotate queries and keys, then store every row's key and value
         * before any row attends, so a row sees the rows before it. */
        for (int32_t r = 0; r < n; r++) {
            if (ASSAY_MUTANT_ON(f->mutant, ASSAY_MUTANT_PADDING_ROW_NAN) && f->row_seq[r] < 0) {
                padding_row_kv(f, b, l, r);
                continue;
            }
            const struct assay_forward_seq *seq = &b->seqs[f->row_seq[r]];
            int32_t pos = f->row_pos[r];
            float *row = f->qkv + (int64_t)r * f->qkv_dim;
            rope(f, row, c->n_head, pos + seq->rope_offset);
            rope(f, row + f->q_dim, c->n_kv_head, pos + seq->rope_offset);
            int64_t off = kv_offset(f, l, seq->blocks[pos / f->block_size], pos % f->block_size);
            memcpy(f->k + off, row + f->q_dim, sizeof(float) * (size_t)f->kv_dim);
            memcpy(f->v + off, row + f->q_dim + f->kv_dim, sizeof(float) * (size_t)f->kv_dim);
        }
        split_rows(f, b, l, n, attend_rows);
        matmul(f, f->att, f->wo + (int64_t)l * f->q_dim * d, f->proj, n, f->q_dim, d);
        for (int64_t i = 0; i < (int64_t)n * d; i++) {
            f->x[i] += f->proj[i];
        }
        for (int32_t r = 0; r < n; r++) {
            rmsnorm(f->xn + (int64_t)r * d, f->x + (int64_t)r * d, w->ffn_norm, d, c->norm_eps);
        }
        matmul(f, f->xn, f->wgu + (int64_t)l * d * 2 * ff, f->gu, n, d, 2 * ff);
        split_rows(f, b, l, n, swiglu_rows);
        matmul(f, f->hidden, f->wdown + (int64_t)l * ff * d, f->proj, n, ff, d);
        for (int64_t i = 0; i < (int64_t)n * d; i++) {
            f->x[i] += f->proj[i];
        }
    }
    if (b->n_out > 0) {
        for (int32_t o = 0; o < b->n_out; o++) {
            rmsnorm(f->on + (int64_t)o * d, f->x + (int64_t)b->out_rows[o] * d, m->out_norm, d,
                    c->norm_eps);
        }
        matmul(f, f->on, f->wout, f->logits, b->n_out, d, c->vocab);
    }
    return ASSAY_OK;
}
