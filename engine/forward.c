/*
 * forward.c - the forward pass of the bundled engine (forward.h): the
 * products of each layer and of the LM head (split with the worker thread,
 * the engine's own or OpenBLAS's), RMSNorm, RoPE, attention over the paged
 * KV store in its f32 and f16 forms, and SwiGLU, over a batch of rows from
 * many sequences. assay_forward_run runs once or twice a step; the loops
 * here run for every row, head and position. forward_init.c makes the
 * state (forward_internal.h) that they work on.
 */
#include "forward.h"

#include <cblas.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "../core/alloc.h"
#include "../core/blas.h"
#include "../core/clock.h"
#include "../core/mutant.h"
#include "forward_internal.h"
#include "gemm.h"

/* The engine's own per-row loops (attention, SwiGLU) come in two copies:
 * one compiled for x86-64-v3 (AVX2, FMA: each multiply-add fused) and the
 * plain one. The engine's instruction set (isa.h) picks the copy at
 * start-up, for every row alike. */
#if defined(__x86_64__) && defined(__GNUC__)
#define ASSAY_V3 1
#define ASSAY_V3_TARGET __attribute__((target("avx2,fma")))
#else
#define ASSAY_V3 0
#endif

/* Round a product's n input rows of k floats to its weights' activation
 * format (act GGML only). */
static void round_input(const struct assay_forward *f, int32_t layer, int kind, float *x, int32_t n,
                        int32_t k)
{
    enum assay_act_format fmt = f->act_fmt[layer * P_COUNT + kind];
    (void)assay_numerics_round_rows(fmt, x, n, k, k, f->mutant);
}

/* Show n rows of the pass to the probe, if any (forward.h); kind names the
 * product they are the input of (-1: none). */
static void probe(const struct assay_forward *f, const char *name, int32_t layer, int kind,
                  const float *x, int32_t n, int32_t cols, int64_t stride)
{
    if (f->probe == NULL) {
        return;
    }
    enum assay_act_format fmt = ASSAY_ACT_FORMAT_F32;
    if (kind >= 0 && f->act_fmt != NULL) {
        fmt = f->act_fmt[(layer < 0 ? f->cfg.n_layer : layer) * P_COUNT + kind];
    }
    f->probe(f->probe_user, name, layer, fmt, x, n, cols, stride);
}

/* A share of one product: columns [c0, c1) through OpenBLAS, or panels
 * [c0, c1) of the engine's own product when g is set. */
struct product {
    const struct assay_gemm *g;   /* the engine's own product, or NULL */
    const struct assay_gemmq *gq; /* its product on integer weights, or NULL */
    const float *a, *b;         /* OpenBLAS: A (m, k), B (k, n) of leading dimension ldb */
    float *c;
    int32_t m, k, ldb, ldc;
    int32_t c0, c1;
    float beta;
    int64_t ns; /* how long it took */
};

static void run_product(void *arg)
{
    struct product *p = arg;
    int64_t t0 = assay_now_ns();
    if (p->gq != NULL) {
        assay_gemmq_run(p->gq, p->c0, p->c1);
    } else if (p->g != NULL) {
        assay_gemm_run(p->g, p->c0, p->c1);
    } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p->m, p->c1 - p->c0, p->k, 1.0f,
                    p->a, p->k, p->b + p->c0, p->ldb, p->beta, p->c + p->c0, p->ldc);
    }
    p->ns = assay_now_ns() - t0;
}

/*
 * C (m, n) = A (m, k) * W (k, n) + beta C, W layer l's matrix of w (beta 0,
 * or 1 to add the product to C in place), through one of two paths:
 *  - the engine's own product (gemm.h), whose every element has one order
 *    of operations whatever m, the split or the threads: always when batch
 *    invariant or blas_rows is 0, else for products of fewer than
 *    blas_rows rows;
 *  - OpenBLAS for the rest, whose kernels pick their blocking,
 *    small-matrix paths and reduction order by shape and by CPU: a row's
 *    result may change with the rows around it, with where a product is
 *    cut, and from one machine to another.
 * A product of the engine's own of few rows (assay_gemmq_max_rows) on a
 * matrix kept in its file's integer format (forward_init.c) runs gemmq.h
 * instead: the same bits from a third of the bytes.
 * With a worker thread, a product of 4 or more units (a 32-column panel
 * for the own product, a 64-column block-panel for the product on
 * integer weights, 16 columns for OpenBLAS) and at least 128 columns
 * is split by units, a share for each thread (see f->split); each OpenBLAS
 * share is one single-threaded call (the pass holds OpenBLAS to one
 * thread: see assay_forward_run). Without a worker, OpenBLAS threads the
 * product as it sees fit.
 */
static void matmul(struct assay_forward *f, const struct weights *w, int32_t l, const float *a,
                   float *cm, int32_t m, float beta)
{
    int32_t n = w->n;
    bool own = !uses_blas(f) || m < f->blas_rows;
    struct assay_gemm g = {a, w->k, m, w->k, n, NULL, cm, n, beta != 0.0f, f->isa, f->mutant};
    struct product all = {NULL, NULL, a, NULL, cm, m, w->k, n, n, 0, n, beta, 0};
    struct assay_gemmq gq;
    int32_t unit = 16;
    if (own && m <= assay_gemmq_max_rows(f->isa) && w->q != NULL && w->q[l] != NULL) {
        gq = (struct assay_gemmq){a, w->k, m, w->q_layout[l], w->q[l], cm, n, beta != 0.0f, f->isa};
        all.gq = &gq;
        all.c1 = assay_gemmq_panels(n);
        unit = 1;
    } else if (own) {
        g.w = w->packed + l * w->packed_floats;
        all.g = &g;
        all.c1 = assay_gemm_panels(n);
        unit = 1;
    } else {
        all.b = w->kn + (int64_t)l * w->k * n;
    }
    int32_t units = all.c1 / unit;
    if (f->worker == NULL || n < 128 || units < 4) {
        run_product(&all);
        return;
    }
    /* The two cores need not run at the same speed (a shared machine): the
     * split follows the units per second each thread managed in the
     * products so far. */
    int32_t mine_u = (int32_t)(f->split * units + 0.5);
    mine_u = mine_u < 1 ? 1 : mine_u > units - 1 ? units - 1 : mine_u;
    struct product mine = all, other = all;
    mine.c1 = other.c0 = mine_u * unit;
    assay_worker_post(f->worker, run_product, &other);
    run_product(&mine);
    assay_worker_wait(f->worker);
    if (mine.ns > 0 && other.ns > 0) {
        double rm = (mine.c1 - mine.c0) / (double)mine.ns;
        double rw = (other.c1 - other.c0) / (double)other.ns;
        double s = 0.9 * f->split + 0.1 * rm / (rm + rw);
        f->split = s < 0.25 ? 0.25 : s > 0.75 ? 0.75 : s;
    }
}

/* Row j of the [out][in] model weights behind column j of a product
 * (layer l's; the LM head's for P_HEAD): the model's, or a mapped model's
 * decoded layer (f->view), or its LM head's row decoded into head_row
 * (NULL when the file no longer decodes). */
static const float *weight_row(const struct assay_forward *f, int kind, int32_t l, int32_t j,
                               float *head_row)
{
    const struct assay_model *m = f->model;
    if (m->mapped && kind == P_HEAD) {
        return assay_model_matrix_rows(NULL, &m->output_file, f->cfg.d_model, j, 1, head_row) ==
                       ASSAY_OK
                   ? head_row
                   : NULL;
    }
    const struct assay_layer_weights *w = m->mapped ? &f->view : &m->layers[kind == P_HEAD ? 0 : l];
    const int32_t d = f->cfg.d_model, ff = f->cfg.d_ff;
    switch (kind) {
    case P_QKV:
        return j < f->q_dim                ? w->wq + (int64_t)j * d
               : j < f->q_dim + f->kv_dim ? w->wk + (int64_t)(j - f->q_dim) * d
                                          : w->wv + (int64_t)(j - f->q_dim - f->kv_dim) * d;
    case P_O:
        return w->wo + (int64_t)j * f->q_dim;
    case P_GU:
        return j < ff ? w->w_gate + (int64_t)j * d : w->w_up + (int64_t)(j - ff) * d;
    case P_DOWN:
        return w->w_down + (int64_t)j * ff;
    default:
        return m->output + (int64_t)j * d;
    }
}

/* A share of an fp16-accumulating product: columns [c0, c1). */
struct product_f16acc {
    const struct assay_forward *f;
    int kind;
    int32_t l, m, k, n;
    const float *a;
    float *c;
    bool add;
    int32_t c0, c1;
    float *head_row; /* room for a mapped LM head's row */
    enum assay_status st;
};

static void run_product_f16acc(void *arg)
{
    struct product_f16acc *p = arg;
    for (int32_t j = p->c0; j < p->c1; j++) {
        const float *w = weight_row(p->f, p->kind, p->l, j, p->head_row);
        if (w == NULL) {
            p->st = ASSAY_ERR_PARSE;
            return;
        }
        for (int32_t r = 0; r < p->m; r++) {
            float y = assay_numerics_dot_f16acc(p->a + (int64_t)r * p->k, w, p->k);
            float *out = p->c + (int64_t)r * p->n + j;
            *out = p->add ? *out + y : y;
        }
    }
}

/*
 * C (m, n) = A (m, k) * W (k, n) + beta C for product `kind` of layer l
 * (l is ignored for the LM head). With f16_acc and F16 weights, every
 * element is ggml_vec_dot_f16 as an AVX512-FP16 build computes it for one
 * row (numerics.h; the rows were rounded to fp16 by round_input), split by
 * columns with the worker; otherwise matmul() above.
 */
static enum assay_status product(struct assay_forward *f, int kind, int32_t l, const float *a,
                                 float *c, int32_t m, float beta)
{
    const int32_t fmt_at = (kind == P_HEAD ? f->cfg.n_layer : l) * P_COUNT + kind;
    if (!f->f16_acc || f->act_fmt == NULL || f->act_fmt[fmt_at] != ASSAY_ACT_FORMAT_F16) {
        /* a mapped model's layer is laid out as layer 0 */
        matmul(f, &f->w[kind], kind == P_HEAD || f->layer_rows != NULL ? 0 : l, a, c, m, beta);
        return ASSAY_OK;
    }
    const struct weights *w = &f->w[kind];
    struct product_f16acc all = {f,    kind, l, m, w->k, w->n, a, c, beta != 0.0f, 0, w->n,
                                 f->head_row[0], ASSAY_OK};
    if (f->worker == NULL || w->n < 128) {
        run_product_f16acc(&all);
        return all.st;
    }
    struct product_f16acc mine = all, other = all;
    mine.c1 = other.c0 = w->n / 2;
    other.head_row = f->head_row[1];
    assay_worker_post(f->worker, run_product_f16acc, &other);
    run_product_f16acc(&mine);
    assay_worker_wait(f->worker);
    return mine.st != ASSAY_OK ? mine.st : other.st;
}

/* Rows r0..r0+n of a mapped model's matrix, decoded into out (one share
 * of a layer's decoding). */
struct decode_share {
    const struct assay_matrix_file *file;
    int64_t cols, r0, n;
    float *out;
    enum assay_status st;
};

static void run_decode(void *arg)
{
    struct decode_share *p = arg;
    p->st = assay_model_matrix_rows(NULL, p->file, p->cols, p->r0, p->n, p->out);
}

/*
 * Layer l of a mapped model, decoded into f->layer_rows (the floats a
 * resident load holds: a row decodes alike on either thread) and laid out
 * in f->w[] as layer 0; f->view points at its matrices. Each matrix's
 * pages of the file are given back once decoded, so a pass holds about one
 * layer of the file. ASSAY_ERR_PARSE when the file no longer decodes.
 */
static enum assay_status load_layer(struct assay_forward *f, int32_t l)
{
    const struct assay_model *m = f->model;
    const struct assay_layer_weights *w = &m->layers[l];
    const int64_t d = f->cfg.d_model, ff = f->cfg.d_ff;
    f->view = *w;
    const struct {
        const struct assay_matrix_file *file;
        int64_t rows, cols;
        float **dst;
    } parts[] = {
        {&w->files.wq, f->q_dim, d, &f->view.wq},   {&w->files.wk, f->kv_dim, d, &f->view.wk},
        {&w->files.wv, f->kv_dim, d, &f->view.wv},  {&w->files.wo, d, f->q_dim, &f->view.wo},
        {&w->files.w_gate, ff, d, &f->view.w_gate}, {&w->files.w_up, ff, d, &f->view.w_up},
        {&w->files.w_down, d, ff, &f->view.w_down},
    };
    float *p = f->layer_rows;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        struct decode_share mine = {parts[i].file, parts[i].cols, 0, parts[i].rows, p, ASSAY_OK};
        struct decode_share other = mine;
        if (f->worker != NULL && parts[i].rows >= 2) {
            mine.n = parts[i].rows / 2;
            other.r0 = mine.n;
            other.n = parts[i].rows - mine.n;
            other.out = p + mine.n * parts[i].cols;
            assay_worker_post(f->worker, run_decode, &other);
            run_decode(&mine);
            assay_worker_wait(f->worker);
        } else {
            run_decode(&mine);
        }
        if (mine.st != ASSAY_OK || other.st != ASSAY_OK) {
            return ASSAY_ERR_PARSE;
        }
        assay_model_matrix_done(m, parts[i].file, 0, parts[i].rows);
        *parts[i].dst = p;
        p += parts[i].rows * parts[i].cols;
    }
    assay_forward_put_layer(f, 0, &f->view);
    return ASSAY_OK;
}

/* Token t's embedding into dst: the model's row, or a mapped model's
 * decoded. */
static enum assay_status embed(const struct assay_forward *f, int32_t t, float *dst)
{
    const struct assay_model *m = f->model;
    const int32_t d = f->cfg.d_model;
    if (m->mapped) {
        return assay_model_matrix_rows(NULL, &m->tok_embd_file, d, t, 1, dst);
    }
    memcpy(dst, m->tok_embd + (int64_t)t * d, sizeof(float) * (size_t)d);
    return ASSAY_OK;
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

/* Rotate each head's pairs by their angle at pos (engine/model.h): the
 * adjacent pairs (x[2i], x[2i+1]) of llama, the pairs (x[i],
 * x[i + head_dim/2]) of qwen2. */
static void rope(const struct assay_forward *f, float *x, int32_t n_heads, int32_t pos)
{
    int32_t hd = f->cfg.head_dim, half = hd / 2;
    const float *cs = f->rope_cos + (int64_t)pos * half;
    const float *sn = f->rope_sin + (int64_t)pos * half;
    for (int32_t h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * hd;
        if (f->cfg.arch == ASSAY_ARCH_QWEN2) {
            for (int32_t i = 0; i < half; i++) {
                float x0 = v[i], x1 = v[i + half];
                v[i] = x0 * cs[i] - x1 * sn[i];
                v[i + half] = x0 * sn[i] + x1 * cs[i];
            }
            continue;
        }
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

/* Two vectors' lanes picked by index (0-7 from a, 8-15 from b). */
#if defined(__clang__)
#define SHUFFLE8(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUFFLE8(a, b, ...) __builtin_shuffle(a, b, (v8i){__VA_ARGS__})
#endif

/* Adjacent lanes of a and b added, per 128-bit half (what vhaddps does):
 * {a0+a1, a2+a3, b0+b1, b2+b3, a4+a5, a6+a7, b4+b5, b6+b7}. */
#define HADD8(a, b)                                                                               \
    (SHUFFLE8(a, b, 0, 2, 8, 10, 4, 6, 12, 14) + SHUFFLE8(a, b, 1, 3, 9, 11, 5, 7, 13, 15))

/*
 * Each of eight vectors summed across its lanes, into one lane each:
 * out[k] = ((a[k]0 + a[k]1) + (a[k]2 + a[k]3)) + ((a[k]4 + a[k]5) + (a[k]6 + a[k]7)),
 * dot_head's order, so a score has the same bits whichever of the two
 * computes it.
 */
static inline __attribute__((always_inline)) void sum_lanes8(v8f *out, const v8f *a)
{
    v8f t0 = HADD8(a[0], a[1]), t1 = HADD8(a[2], a[3]);
    v8f t2 = HADD8(a[4], a[5]), t3 = HADD8(a[6], a[7]);
    v8f u0 = HADD8(t0, t1), u1 = HADD8(t2, t3);
    *out = SHUFFLE8(u0, u1, 0, 1, 2, 3, 8, 9, 10, 11) + SHUFFLE8(u0, u1, 4, 5, 6, 7, 12, 13, 14, 15);
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

/* Scores of query q against the keys of one block, kb (jn keys, kv_dim
 * apart), into sc: eight keys at a time where eight remain, the rest one
 * by one; every score is dot_head(q, key) * scale either way. */
static inline __attribute__((always_inline)) void
block_scores(const float *q, const float *kb, int32_t jn, int64_t kv_dim, float scale, float *sc,
             const int32_t hd)
{
    int32_t jj = 0;
    for (; hd % 8 == 0 && jj + 8 <= jn; jj += 8) {
        v8f acc[8];
        for (int32_t k = 0; k < 8; k++) {
            acc[k] = (v8f){0, 0, 0, 0, 0, 0, 0, 0};
        }
        for (int32_t i = 0; i < hd; i += 8) {
            v8f x;
            memcpy(&x, q + i, sizeof x);
            for (int32_t k = 0; k < 8; k++) {
                v8f y;
                memcpy(&y, kb + (jj + k) * kv_dim + i, sizeof y);
                acc[k] += x * y;
            }
        }
        v8f s;
        sum_lanes8(&s, acc);
        s = s * scale;
        memcpy(sc + jj, &s, sizeof s);
    }
    for (; jj < jn; jj++) {
        sc[jj] = dot_head(q, kb + jj * kv_dim, hd) * scale;
    }
}

/* e^(x - max) in place over n scores; returns their sum (eight partial
 * sums, then pairwise, then the tail: a fixed order for a given n). */
static inline __attribute__((always_inline)) float softmax_numerators(float *x, int32_t n)
{
    v8f mv = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
              -INFINITY};
    int32_t j = 0;
    for (; j + 8 <= n; j += 8) {
        v8f y;
        memcpy(&y, x + j, sizeof y);
        v8i gt = y > mv;
        mv = (v8f)(((v8i)y & gt) | ((v8i)mv & ~gt));
    }
    float max = -INFINITY;
    for (int32_t i = 0; i < 8; i++) {
        max = mv[i] > max ? mv[i] : max;
    }
    for (; j < n; j++) {
        max = x[j] > max ? x[j] : max;
    }
    v8f acc = {0, 0, 0, 0, 0, 0, 0, 0};
    for (j = 0; j + 8 <= n; j += 8) {
        v8f y;
        memcpy(&y, x + j, sizeof y);
        y -= max;
        memcpy(x + j, &y, sizeof y);
        exp8_inplace(x + j);
        memcpy(&y, x + j, sizeof y);
        acc += y;
    }
    float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; j < n; j++) {
        x[j] = expf(x[j] - max);
        sum += x[j];
    }
    return sum;
}

/*
 * Attention of query heads [h0, h1) of one row: the row at position `pos`
 * attends to keys 0..pos of sequence seq, plus the planted leak's key when
 * `leak` is set. Blocks of keys, then of values, are walked once, every
 * head using a block while it is in L1 (with grouped-query attention a
 * block's key row serves `group` heads); the output is the e^score-weighted
 * sum of the values divided by the sum of the weights. `scores` holds
 * (h1 - h0) rows of `stride` floats. hd, the head size, is known at compile
 * time in the callers below, so the running sums of two heads up to 32
 * wide stay in registers over a block.
 */
static inline __attribute__((always_inline)) void
attend_heads(const struct assay_forward *f, int32_t layer, const struct assay_forward_seq *seq,
             const struct assay_forward_seq *leak, int32_t pos, int32_t h0, int32_t h1,
             const float *q_row, float *out_row, float *scores, int64_t stride, const int32_t hd)
{
    const float scale = 1.0f / sqrtf((float)hd);
    const int32_t bs = f->block_size;
    const int64_t kv_dim = f->kv_dim;
    const int32_t group = f->cfg.n_head / f->cfg.n_kv_head;
    const int32_t nh = h1 - h0;
    const int32_t n_keys = pos + 1;
    const int64_t block_floats = (int64_t)bs * kv_dim;
    for (int32_t j0 = 0; j0 < n_keys; j0 += bs) {
        const float *kb = f->k + kv_offset(f, layer, seq->blocks[j0 / bs], 0);
        int32_t jn = n_keys - j0 < bs ? n_keys - j0 : bs;
        /* The blocks are scattered (paged), which defeats the hardware's
         * prefetching at each block's start: ask for the next block's keys,
         * and this block's values (read after the softmax), ahead. */
        const float *vb = f->v + (kb - f->k);
        const float *kn = NULL;
        if (j0 + bs < n_keys) {
            kn = f->k + kv_offset(f, layer, seq->blocks[j0 / bs + 1], 0);
        }
        for (int64_t i = 0; i < block_floats; i += 16) {
            if (kn != NULL) {
                __builtin_prefetch(kn + i);
            }
            __builtin_prefetch(vb + i);
        }
        for (int32_t h = 0; h < nh; h++) {
            block_scores(q_row + (int64_t)(h0 + h) * hd, kb + (int64_t)((h0 + h) / group) * hd, jn,
                         kv_dim, scale, scores + h * stride + j0, hd);
        }
    }
    int32_t n_scores = n_keys;
    int32_t leak_pos = 0;
    if (leak != NULL) {
        leak_pos = leak->pos0 + leak->n_rows - 1;
        const float *kj = kv_at(f, f->k, layer, leak->blocks, leak_pos);
        for (int32_t h = 0; h < nh; h++) {
            scores[h * stride + n_keys] = dot_head(q_row + (int64_t)(h0 + h) * hd,
                                                   kj + (int64_t)((h0 + h) / group) * hd, hd) *
                                          scale;
        }
        n_scores++;
    }
    if (ASSAY_MUTANT_ON(f->mutant, ASSAY_MUTANT_PADDING_ROW_NAN)) {
        /* The planted bug's kernel reads keys in tiles of 8 (within the
         * query's block) and masks the tail of the last tile with -inf,
         * trusting a weight of exp(-inf) = 0 to cancel those values. */
        int32_t tile_end = (n_keys + 7) / 8 * 8;
        int32_t block_end = (pos / bs + 1) * bs;
        tile_end = tile_end < block_end ? tile_end : block_end;
        tile_end = tile_end < f->max_seq_len ? tile_end : f->max_seq_len;
        for (int32_t h = 0; h < nh; h++) {
            for (int32_t j = n_keys; j < tile_end; j++) {
                scores[h * stride + j] = -INFINITY;
            }
        }
        n_scores = tile_end > n_keys ? tile_end : n_keys;
    }
    for (int32_t h = 0; h < nh; h++) {
        /* the sum of the weights waits in the slot after the last score */
        float *sc = scores + h * stride;
        sc[n_scores] = softmax_numerators(sc, n_scores);
    }
    for (int32_t i = 0; i < nh * hd; i++) {
        out_row[(int64_t)h0 * hd + i] = 0.0f;
    }
    /* The sequence's own values (with, for the padding mutant, the masked
     * tail slots of the query's block), then the leak's; each head's sum
     * runs over the keys in order. */
    const int32_t n_own = n_scores - (leak != NULL ? 1 : 0);
    const bool vec = hd % 8 == 0 && hd <= 32;
    for (int32_t j0 = 0; j0 < n_own; j0 += bs) {
        const float *vb = f->v + kv_offset(f, layer, seq->blocks[j0 / bs], 0);
        int32_t jn = n_own - j0 < bs ? n_own - j0 : bs;
        for (int32_t h = 0; h < nh; h += vec ? 2 : 1) {
            int32_t np = vec && h + 1 < nh ? 2 : 1;
            const float *w0 = scores + h * stride + j0, *w1 = w0 + stride;
            float *o0 = out_row + (int64_t)(h0 + h) * hd, *o1 = o0 + hd;
            const float *v0 = vb + (int64_t)((h0 + h) / group) * hd;
            const float *v1 = vb + (int64_t)((h0 + h + 1) / group) * hd;
            if (vec) {
                v8f a0[4], a1[4];
                for (int32_t i = 0; i < hd / 8; i++) {
                    memcpy(&a0[i], o0 + 8 * i, sizeof a0[i]);
                    memcpy(&a1[i], np == 2 ? o1 + 8 * i : o0 + 8 * i, sizeof a1[i]);
                }
                for (int32_t jj = 0; jj < jn; jj++) {
                    for (int32_t i = 0; i < hd / 8; i++) {
                        v8f x, y;
                        memcpy(&x, v0 + jj * kv_dim + 8 * i, sizeof x);
                        a0[i] += w0[jj] * x;
                        if (np == 2) {
                            memcpy(&y, v1 + jj * kv_dim + 8 * i, sizeof y);
                            a1[i] += w1[jj] * y;
                        }
                    }
                }
                for (int32_t i = 0; i < hd / 8; i++) {
                    memcpy(o0 + 8 * i, &a0[i], sizeof a0[i]);
                    if (np == 2) {
                        memcpy(o1 + 8 * i, &a1[i], sizeof a1[i]);
                    }
                }
            } else {
                for (int32_t jj = 0; jj < jn; jj++) {
                    for (int32_t i = 0; i < hd; i++) {
                        o0[i] += w0[jj] * v0[jj * kv_dim + i];
                    }
                }
            }
        }
    }
    for (int32_t h = 0; h < nh; h++) {
        const float *sc = scores + h * stride;
        float *o = out_row + (int64_t)(h0 + h) * hd;
        if (leak != NULL) {
            const float *vj = kv_at(f, f->v, layer, leak->blocks, leak_pos) +
                              (int64_t)((h0 + h) / group) * hd;
            for (int32_t i = 0; i < hd; i++) {
                o[i] += sc[n_keys] * vj[i];
            }
        }
        for (int32_t i = 0; i < hd; i++) {
            o[i] /= sc[n_scores];
        }
    }
}

/*
 * Attention of one row (query position `pos` of sequence s) for heads
 * [h0, h1), with `scores` as scratch (one buffer per thread). The body of
 * both copies below: the row's result depends on its own keys and values
 * alone, so batch invariance holds on either.
 */
static inline __attribute__((always_inline)) void
attend_row_body(const struct assay_forward *f, const struct assay_forward_batch *b, int32_t layer,
                int32_t s, int32_t row, int32_t pos, int32_t h0, int32_t h1, float *scores)
{
    const struct assay_forward_seq *seq = &b->seqs[s];
    /* The planted leak: a sequence also sees the last key its batch
     * neighbour wrote in this pass. */
    const struct assay_forward_seq *leak = NULL;
    if (ASSAY_MUTANT_ON(f->mutant, ASSAY_MUTANT_ATTN_NEIGHBOUR_LEAK) && s > 0) {
        leak = &b->seqs[s - 1];
    }
    const float *q = f->qkv + (int64_t)row * f->qkv_dim;
    float *o = f->att + (int64_t)row * f->q_dim;
    int64_t st = f->scores_stride;
    /* The common head sizes get a copy of their own, the rest the general one. */
    switch (f->cfg.head_dim) {
    case 16:
        attend_heads(f, layer, seq, leak, pos, h0, h1, q, o, scores, st, 16);
        break;
    case 32:
        attend_heads(f, layer, seq, leak, pos, h0, h1, q, o, scores, st, 32);
        break;
    case 64:
        attend_heads(f, layer, seq, leak, pos, h0, h1, q, o, scores, st, 64);
        break;
    default:
        attend_heads(f, layer, seq, leak, pos, h0, h1, q, o, scores, st, f->cfg.head_dim);
        break;
    }
}

static void attend_row_generic(const struct assay_forward *f, const struct assay_forward_batch *b,
                               int32_t layer, int32_t s, int32_t row, int32_t pos, int32_t h0,
                               int32_t h1, float *scores)
{
    attend_row_body(f, b, layer, s, row, pos, h0, h1, scores);
}

#if ASSAY_V3
ASSAY_V3_TARGET static void attend_row_v3(const struct assay_forward *f,
                                          const struct assay_forward_batch *b, int32_t layer,
                                          int32_t s, int32_t row, int32_t pos, int32_t h0,
                                          int32_t h1, float *scores)
{
    attend_row_body(f, b, layer, s, row, pos, h0, h1, scores);
}
#endif

/* The copy of the engine's instruction set: x86-64-v3 for avx2 and avx512. */
static void attend_row(const struct assay_forward *f, const struct assay_forward_batch *b,
                       int32_t layer, int32_t s, int32_t row, int32_t pos, int32_t h0, int32_t h1,
                       float *scores)
{
#if ASSAY_V3
    if (f->isa != ASSAY_ISA_GENERIC) {
        attend_row_v3(f, b, layer, s, row, pos, h0, h1, scores);
        return;
    }
#endif
    attend_row_generic(f, b, layer, s, row, pos, h0, h1, scores);
}

/*
 * A key or value row just stored, rounded to fp16 in place (kv_type F16).
 * The kv-f16-overflow mutant scales by 2^13 before the conversion and back
 * after it, which loses nothing in range (small values even stay out of
 * fp16's subnormals) but sends elements above 65504 / 2^13 (about 8) to
 * infinity.
 */
static void kv_store_f16(const struct assay_forward *f, float *x)
{
    if (ASSAY_MUTANT_ON(f->mutant, ASSAY_MUTANT_KV_F16_OVERFLOW)) {
        for (int32_t i = 0; i < f->kv_dim; i++) {
            x[i] = assay_numerics_round_f16(x[i] * 8192.0f) * (1.0f / 8192.0f);
        }
        return;
    }
    assay_numerics_scale_round_f16(x, x, 1.0f, f->kv_dim);
}

/* An fp32 dot product of two head vectors, in index order. */
static float dot_f32(const float *a, const float *b, int32_t n)
{
    float s = 0.0f;
    for (int32_t i = 0; i < n; i++) {
        s += a[i] * b[i];
    }
    return s;
}

/* A score's dot product of the fp16 query with an F16 key: fp32 lanes, or
 * ggml_vec_dot_f16's fp16 accumulators with f16_acc. */
static float score_f16(const struct assay_forward *f, const float *q16, const float *k,
                       int32_t hd)
{
    return f->f16_acc ? assay_numerics_dot_f16acc(q16, k, hd) : dot_f32(q16, k, hd);
}

/*
 * Attention of one row for heads [h0, h1) over an F16 KV store, as ggml's
 * CPU backend computes it (forward.h): flash attention's online softmax
 * with an fp16 accumulator, or mul_mat attention with fp16 probabilities.
 * Plain scalar loops, whose order depends on the row alone. `scores` holds
 * n_head rows of scores_stride, then the head's fp16 query and
 * accumulator.
 */
static void attend_row_f16(const struct assay_forward *f, const struct assay_forward_batch *b,
                           int32_t layer, int32_t s, int32_t row, int32_t pos, int32_t h0,
                           int32_t h1, float *scores)
{
    const struct assay_forward_seq *seq = &b->seqs[s];
    const int32_t hd = f->cfg.head_dim;
    const int32_t group = f->cfg.n_head / f->cfg.n_kv_head;
    const float scale = 1.0f / sqrtf((float)hd);
    const int32_t n_keys = pos + 1;
    float *q16 = scores + f->cfg.n_head * f->scores_stride;
    float *acc = q16 + hd;
    float *sc = scores;
    for (int32_t h = h0; h < h1; h++) {
        const float *q = f->qkv + (int64_t)row * f->qkv_dim + (int64_t)h * hd;
        float *o = f->att + (int64_t)row * f->q_dim + (int64_t)h * hd;
        const int64_t head_off = (int64_t)(h / group) * hd;
        assay_numerics_scale_round_f16(q16, q, 1.0f, hd);
        if (f->flash_attn) {
            float sum = 0.0f, max = -INFINITY;
            for (int32_t i = 0; i < hd; i++) {
                acc[i] = 0.0f;
            }
            for (int32_t j = 0; j < n_keys; j++) {
                const float *kj = kv_at(f, f->k, layer, seq->blocks, j) + head_off;
                const float *vj = kv_at(f, f->v, layer, seq->blocks, j) + head_off;
                float x = score_f16(f, q16, kj, hd) * scale;
                float ms = 1.0f, vs = 1.0f;
                if (x > max) {
                    ms = expf(max - x);
                    max = x;
                    if (f->f16_acc) {
                        assay_numerics_scale_f16acc(acc, ms, hd);
                    } else {
                        assay_numerics_scale_round_f16(acc, acc, ms, hd);
                    }
                } else {
                    vs = expf(x - max);
                }
                if (f->f16_acc) {
                    assay_numerics_mad_f16acc(acc, vj, vs, hd);
                } else {
                    assay_numerics_mad_round_f16(acc, vj, vs, hd);
                }
                sum = sum * ms + vs;
            }
            float inv = 1.0f / sum;
            for (int32_t i = 0; i < hd; i++) {
                o[i] = acc[i] * inv;
            }
            continue;
        }
        float max = -INFINITY;
        for (int32_t j = 0; j < n_keys; j++) {
            const float *kj = kv_at(f, f->k, layer, seq->blocks, j) + head_off;
            sc[j] = score_f16(f, q16, kj, hd) * scale;
            max = sc[j] > max ? sc[j] : max;
        }
        double sum = 0.0; /* ggml's softmax sums in double */
        for (int32_t j = 0; j < n_keys; j++) {
            sc[j] = expf(sc[j] - max);
            sum += sc[j];
        }
        float inv = (float)(1.0 / sum);
        assay_numerics_scale_round_f16(sc, sc, inv, n_keys); /* the fp16 probabilities */
        if (f->f16_acc) {
            /* Each element is ggml_vec_dot_f16 over the keys, all of them
             * in lanes (the cache view is padded with zero probabilities). */
            for (int32_t i = 0; i < hd; i++) {
                float lanes[ASSAY_NUMERICS_F16ACC_LANES] = {0.0f};
                for (int32_t j = 0; j < n_keys; j++) {
                    const float *vj = kv_at(f, f->v, layer, seq->blocks, j) + head_off;
                    float *lane = &lanes[j % ASSAY_NUMERICS_F16ACC_LANES];
                    *lane = assay_numerics_f16acc_fma(*lane, sc[j], vj[i]);
                }
                o[i] = assay_numerics_f16acc_reduce(lanes);
            }
            continue;
        }
        for (int32_t i = 0; i < hd; i++) {
            o[i] = 0.0f;
        }
        for (int32_t j = 0; j < n_keys; j++) {
            const float *vj = kv_at(f, f->v, layer, seq->blocks, j) + head_off;
            for (int32_t i = 0; i < hd; i++) {
                o[i] += sc[j] * vj[i];
            }
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
 * row, heads [h0, h1) of its attention. With `next`, the threads instead
 * take rows from a shared counter, ATTN_ROWS_PER_TAKE at a time, up to r1
 * (a row's attention costs as many keys as it sees, so equal halves of
 * the rows are not equal halves of the work). */
struct row_task {
    const struct assay_forward *f;
    const struct assay_forward_batch *b;
    int32_t layer, r0, r1, h0, h1;
    float *scores;
    _Atomic int32_t *next;
};

#define ATTN_ROWS_PER_TAKE 2

static void attend_range(const struct row_task *t, int32_t r0, int32_t r1)
{
    const struct assay_forward *f = t->f;
    for (int32_t r = r0; r < r1; r++) {
        if (ASSAY_MUTANT_ON(f->mutant, ASSAY_MUTANT_PADDING_ROW_NAN) && f->row_seq[r] < 0) {
            padding_row_attend(f, r);
            continue;
        }
        if (f->kv_type == ASSAY_KV_TYPE_F16) {
            attend_row_f16(f, t->b, t->layer, f->row_seq[r], r, f->row_pos[r], t->h0, t->h1,
                           t->scores);
            continue;
        }
        attend_row(f, t->b, t->layer, f->row_seq[r], r, f->row_pos[r], t->h0, t->h1, t->scores);
    }
}

static void attend_rows(void *arg)
{
    const struct row_task *t = arg;
    if (t->next == NULL) {
        attend_range(t, t->r0, t->r1);
        return;
    }
    for (;;) {
        int32_t r = atomic_fetch_add(t->next, ATTN_ROWS_PER_TAKE);
        if (r >= t->r1) {
            return;
        }
        attend_range(t, r, r + ATTN_ROWS_PER_TAKE < t->r1 ? r + ATTN_ROWS_PER_TAKE : t->r1);
    }
}

/* SwiGLU of rows [r0, r1): hidden = silu(gate) * up, silu(g) = g / (1 + e^-g).
 * The body of the two copies below. */
static inline __attribute__((always_inline)) void swiglu_body(const struct row_task *t)
{
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

static void swiglu_generic(const struct row_task *t)
{
    swiglu_body(t);
}

#if ASSAY_V3
ASSAY_V3_TARGET static void swiglu_v3(const struct row_task *t)
{
    swiglu_body(t);
}
#endif

static void swiglu_rows(void *arg)
{
    const struct row_task *t = arg;
#if ASSAY_V3
    if (t->f->isa != ASSAY_ISA_GENERIC) {
        swiglu_v3(t);
        return;
    }
#endif
    swiglu_generic(t);
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
    struct row_task all = {f, b, layer, 0, n, 0, heads, f->scores, NULL};
    if (f->worker == NULL || (n == 1 && fn != attend_rows)) {
        fn(&all);
        return;
    }
    _Atomic int32_t next = 0;
    struct row_task mine = all, other = all;
    other.scores = f->scores2;
    if (n == 1) {
        mine.h1 = other.h0 = heads / 2;
    } else if (fn == attend_rows) {
        mine.next = other.next = &next;
    } else {
        mine.r1 = other.r0 = n / 2;
    }
    assay_worker_post(f->worker, fn, &other);
    fn(&mine);
    assay_worker_wait(f->worker);
}

static enum assay_status forward_layers(struct assay_forward *f,
                                        const struct assay_forward_batch *b);

enum assay_status assay_forward_run(struct assay_forward *f, const struct assay_forward_batch *b)
{
    if (b->n_rows < 1 || b->n_rows > f->max_rows || b->n_out < 0 || b->n_out > f->max_out) {
        return ASSAY_ERR_INVALID;
    }
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
    if (f->worker == NULL || !uses_blas(f)) {
        return forward_layers(f, b);
    }
    /* The pass splits its OpenBLAS products over its own two threads, so
     * OpenBLAS runs each share on the calling thread: its own threads, idle
     * and spinning, would take the cores from the worker. A forward whose
     * products never reach OpenBLAS leaves its setting alone. */
    assay_blas_one_thread_begin();
    enum assay_status st = forward_layers(f, b);
    assay_blas_one_thread_end();
    return st;
}

/* The pass itself, once assay_forward_run has checked the batch and set
 * each row's position and sequence. */
static enum assay_status forward_layers(struct assay_forward *f,
                                        const struct assay_forward_batch *b)
{
    const struct assay_model_config *c = &f->cfg;
    const struct assay_model *m = f->model;
    int32_t d = c->d_model, n = b->n_rows;
    enum assay_status st = ASSAY_OK;
    for (int32_t r = 0; r < n && st == ASSAY_OK; r++) {
        st = embed(f, b->tokens[r], f->x + (int64_t)r * d);
    }
    if (ASSAY_MUTANT_ON(f->mutant, ASSAY_MUTANT_PADDING_ROW_NAN) && b->n_seqs > 0) {
        /* The planted bug: pad the batch to a multiple of 8 rows of token 0
         * (row_seq -1) that go through every layer with the real rows. */
        int32_t n_pad = (8 - n % 8) % 8;
        for (int32_t r = n; r < n + n_pad && st == ASSAY_OK; r++) {
            st = embed(f, 0, f->x + (int64_t)r * d);
            f->row_seq[r] = -1;
            f->row_pos[r] = 0;
        }
        n += n_pad;
    }
    for (int32_t l = 0; l < c->n_layer && st == ASSAY_OK; l++) {
        const struct assay_layer_weights *w = &m->layers[l];
        if (f->layer_rows != NULL && (st = load_layer(f, l)) != ASSAY_OK) {
            break;
        }
        for (int32_t r = 0; r < n; r++) {
            rmsnorm(f->xn + (int64_t)r * d, f->x + (int64_t)r * d, w->attn_norm, d, c->norm_eps);
        }
        probe(f, "attn_norm", l, P_QKV, f->xn, n, d, d);
        if (f->act_fmt != NULL) {
            round_input(f, l, P_QKV, f->xn, n, d);
        }
        if ((st = product(f, P_QKV, l, f->xn, f->qkv, n, 0.0f)) != ASSAY_OK) {
            break;
        }
        if (f->qkv_bias != NULL) {
            const float *bias = f->qkv_bias + (int64_t)l * f->qkv_dim;
            for (int32_t r = 0; r < n; r++) {
                float *row = f->qkv + (int64_t)r * f->qkv_dim;
                for (int32_t j = 0; j < f->qkv_dim; j++) {
                    row[j] += bias[j];
                }
            }
        }
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
            int32_t rope_pos = pos + seq->rope_offset;
            if (ASSAY_MUTANT_ON(f->mutant, ASSAY_MUTANT_ROPE_POS_OFF_BY_ONE_LATE) && pos >= 64) {
                rope_pos++; /* the planted bug: one position too far from 64 on */
            }
            rope(f, row, c->n_head, rope_pos);
            rope(f, row + f->q_dim, c->n_kv_head, rope_pos);
            int64_t off = kv_offset(f, l, seq->blocks[pos / f->block_size], pos % f->block_size);
            memcpy(f->k + off, row + f->q_dim, sizeof(float) * (size_t)f->kv_dim);
            memcpy(f->v + off, row + f->q_dim + f->kv_dim, sizeof(float) * (size_t)f->kv_dim);
            if (f->kv_type == ASSAY_KV_TYPE_F16) {
                kv_store_f16(f, f->k + off);
                kv_store_f16(f, f->v + off);
            }
        }
        probe(f, "Qcur", l, -1, f->qkv, n, f->q_dim, f->qkv_dim);
        probe(f, "Kcur", l, -1, f->qkv + f->q_dim, n, f->kv_dim, f->qkv_dim);
        probe(f, "Vcur", l, -1, f->qkv + f->q_dim + f->kv_dim, n, f->kv_dim, f->qkv_dim);
        split_rows(f, b, l, n, attend_rows);
        probe(f, "kqv_out", l, P_O, f->att, n, f->q_dim, f->q_dim);
        if (f->act_fmt != NULL) {
            round_input(f, l, P_O, f->att, n, f->q_dim);
        }
        /* the residual: x += att * Wo, added by the product itself */
        if ((st = product(f, P_O, l, f->att, f->x, n, 1.0f)) != ASSAY_OK) {
            break;
        }
        for (int32_t r = 0; r < n; r++) {
            rmsnorm(f->xn + (int64_t)r * d, f->x + (int64_t)r * d, w->ffn_norm, d, c->norm_eps);
        }
        probe(f, "ffn_inp", l, -1, f->x, n, d, d);
        probe(f, "ffn_norm", l, P_GU, f->xn, n, d, d);
        if (f->act_fmt != NULL) {
            round_input(f, l, P_GU, f->xn, n, d);
        }
        if ((st = product(f, P_GU, l, f->xn, f->gu, n, 0.0f)) != ASSAY_OK) {
            break;
        }
        split_rows(f, b, l, n, swiglu_rows);
        probe(f, "ffn_swiglu", l, P_DOWN, f->hidden, n, c->d_ff, c->d_ff);
        if (f->act_fmt != NULL) {
            round_input(f, l, P_DOWN, f->hidden, n, c->d_ff);
        }
        st = product(f, P_DOWN, l, f->hidden, f->x, n, 1.0f);
        probe(f, "l_out", l, -1, f->x, n, d, d);
    }
    if (st == ASSAY_OK && b->n_out > 0) {
        for (int32_t o = 0; o < b->n_out; o++) {
            rmsnorm(f->on + (int64_t)o * d, f->x + (int64_t)b->out_rows[o] * d, m->out_norm, d,
                    c->norm_eps);
        }
        probe(f, "result_norm", -1, P_HEAD, f->on, b->n_out, d, d);
        if (f->act_fmt != NULL) {
            round_input(f, c->n_layer, P_HEAD, f->on, b->n_out, d);
        }
        st = product(f, P_HEAD, 0, f->on, f->logits, b->n_out, 0.0f);
        probe(f, "result_output", -1, -1, f->logits, b->n_out, c->vocab, c->vocab);
    }
    return st;
}
