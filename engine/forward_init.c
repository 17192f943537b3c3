/*
 * forward_init.c - making and freeing a forward pass (forward.h): the
 * check that llama.cpp's activation roundings can be emulated for a
 * model's weight types, the weights laid out for the engine's own product
 * (gemm.h) and for OpenBLAS, the KV store, the RoPE tables and every
 * scratch buffer of a pass (forward_internal.h). Runs once per engine (and
 * once more for a draft model); the passes (forward.c) allocate nothing.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "../core/alloc.h"
#include "../core/mutant.h"
#include "forward.h"
#include "forward_internal.h"
#include "dequant.h"
#include "gemm.h"
#include "gemmq.h"
#include "gguf.h"

static float *alloc_floats(struct assay_forward *f, int64_t n)
{
    f->bytes += n * (int64_t)sizeof(float);
    return assay_calloc((size_t)n, sizeof(float));
}

#define HUGE_PAGE ((size_t)2 << 20)

/*
 * n floats, zeroed, for the weights and the KV store. A pass reads tens of
 * megabytes of them (the KV store in blocks scattered over it), a TLB miss
 * per 4 KiB page; so a buffer of 2 MiB or more is aligned to 2 MiB and
 * marked for transparent huge pages before its first touch (measured at
 * batch 64: 4.5% more tokens/s). The allocation's start is kept just below
 * the returned pointer for free_huge.
 */
static float *alloc_huge(struct assay_forward *f, int64_t n)
{
    size_t bytes = (size_t)n * sizeof(float);
    size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
    f->bytes += (int64_t)bytes;
    /* zeroed: pages of a cache never reached are never touched */
    char *base = assay_calloc(1, bytes + align + sizeof(void *));
    if (base == NULL) {
        return NULL;
    }
    uintptr_t at = ((uintptr_t)base + sizeof(void *) + align - 1) & ~(uintptr_t)(align - 1);
    ((void **)at)[-1] = base;
#ifdef MADV_HUGEPAGE
    if (align == HUGE_PAGE) {
        /* advice only: without huge pages the buffer works the same */
        (void)madvise((void *)at, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE);
    }
#endif
    return (float *)at;
}

static void free_huge(float *p)
{
    if (p != NULL) {
        assay_free(((void **)p)[-1]);
    }
}

/* Whether the forward's products ever take the engine's own path
 * (OpenBLAS: uses_blas, forward_internal.h). */
static bool uses_own(const struct assay_forward *f)
{
    return f->batch_invariant || f->blas_rows != 1;
}

/* Room for the (k, n) weights of `layers` layers in the layouts of the
 * forward's paths; false when an allocation failed. */
static bool weights_alloc(struct assay_forward *f, struct weights *w, int32_t layers, int32_t k,
                          int32_t n)
{
    w->k = k;
    w->n = n;
    w->packed_floats = assay_gemm_packed_floats(k, n);
    if (uses_own(f)) {
        w->packed = alloc_huge(f, layers * w->packed_floats);
        if (w->packed == NULL) {
            return false;
        }
    }
    if (uses_blas(f)) {
        w->kn = alloc_huge(f, (int64_t)layers * k * n);
        if (w->kn == NULL) {
            return false;
        }
    }
    return true;
}

/*
 * Columns [col0, col0 + cols) of layer l's matrix from `rows`, the model's
 * [out][in] weights (cols rows of k floats), into each layout the forward
 * holds: packed for the engine's own product, transposed to [in][out] for
 * OpenBLAS.
 */
static void weights_put(struct weights *w, int32_t l, int32_t col0, int32_t cols,
                        const float *rows)
{
    if (w->packed != NULL) {
        assay_gemm_pack(w->packed + l * w->packed_floats, w->k, w->n, col0, cols, rows);
    }
    if (w->kn != NULL) {
        float *dst = w->kn + (int64_t)l * w->k * w->n;
        for (int32_t r = 0; r < cols; r++) {
            for (int32_t i = 0; i < w->k; i++) {
                dst[(int64_t)i * w->n + col0 + r] = rows[(int64_t)r * w->k + i];
            }
        }
    }
}

void assay_forward_put_layer(struct assay_forward *f, int32_t slot,
                             const struct assay_layer_weights *w)
{
    const int32_t d = f->cfg.d_model, ff = f->cfg.d_ff;
    weights_put(&f->w[P_QKV], slot, 0, f->q_dim, w->wq);
    weights_put(&f->w[P_QKV], slot, f->q_dim, f->kv_dim, w->wk);
    weights_put(&f->w[P_QKV], slot, f->q_dim + f->kv_dim, f->kv_dim, w->wv);
    weights_put(&f->w[P_O], slot, 0, d, w->wo);
    weights_put(&f->w[P_GU], slot, 0, ff, w->w_gate);
    weights_put(&f->w[P_GU], slot, ff, ff, w->w_up);
    weights_put(&f->w[P_DOWN], slot, 0, d, w->w_down);
}

/* A matrix of a product: its rows in the model and in the file. */
struct quant_source {
    const struct assay_matrix_file *file;
    const float *rows;
    int32_t n;
};

/*
 * Layer l's matrix of product w (its columns the rows of src[0..ns) in
 * turn) kept in the file's integer format for products of few rows, when
 * every source is in one (Q6_K's groups of 16 make the layout's groups
 * 16, Q4_K's and Q5_K's mins give it offsets) and every weight decodes to
 * the model's float bit for bit; else w->q[l] stays NULL and every
 * product reads the packed floats. scratch: room for a row's parts and
 * floats (k bytes and 2 k + k / 8 floats). The file's pages are given back
 * as each matrix is done.
 */
static void quant_put(struct assay_forward *f, struct weights *w, int32_t l,
                      const struct quant_source *src, int ns, void *scratch)
{
    const int32_t k = w->k;
    struct assay_gemmq_layout lay = {k, w->n, 32, false};
    for (int s = 0; s < ns; s++) {
        uint32_t type = src[s].file->type;
        if (src[s].file->bytes == NULL || src[s].rows == NULL || !assay_dequant_has_parts(type)) {
            return;
        }
        lay.group = type == ASSAY_GGML_TYPE_Q6_K ? 16 : lay.group;
        lay.offset = lay.offset || type == ASSAY_GGML_TYPE_Q4_K || type == ASSAY_GGML_TYPE_Q5_K;
    }
    if (k % lay.group != 0) {
        return;
    }
    int64_t bytes = assay_gemmq_bytes(&lay);
    uint8_t *q = (uint8_t *)alloc_huge(f, bytes / (int64_t)sizeof(float));
    float *row = scratch, *step = row + k, *offset = step + k / ASSAY_DEQUANT_GROUP;
    int8_t *parts = (int8_t *)(offset + k / ASSAY_DEQUANT_GROUP);
    bool ok = q != NULL;
    for (int32_t s = 0, col = 0; s < ns && ok; s++) {
        const struct assay_matrix_file *file = src[s].file;
        for (int32_t r = 0; r < src[s].n && ok; r++, col++) {
            ok = assay_dequant_row_parts(file->type, file->bytes + (size_t)r * file->row_bytes,
                                         file->row_bytes, k, parts, step, offset,
                                         NULL) == ASSAY_OK &&
                 assay_gemmq_pack(q, &lay, col, parts, step, offset);
            if (ok) {
                assay_gemmq_unpack(q, &lay, col, row);
                ok = memcmp(row, src[s].rows + (int64_t)r * k, sizeof(float) * (size_t)k) == 0;
            }
        }
        assay_model_matrix_done(f->model, file, 0, src[s].n);
    }
    if (!ok) {
        free_huge((float *)q);
        f->bytes -= bytes;
        return;
    }
    w->q[l] = q;
    w->q_layout[l] = lay;
}

/*
 * Every matrix of a resident model that keeps its file (engine/model.h)
 * in its integer format as well, for products of few rows, when asked
 * (integer_weights) and the forward takes its own product on an
 * instruction set with gemmq.h's kernel.
 * ASSAY_ERR_NOMEM when the tables could not be allocated (a matrix whose
 * layout could not be is left to the packed floats).
 */
static enum assay_status put_quantized(struct assay_forward *f)
{
    const struct assay_model *m = f->model;
    if (!f->integer_weights || m->mapped || m->file == NULL || !uses_own(f) ||
        !assay_gemmq_supported(f->isa)) {
        return ASSAY_OK;
    }
    const int32_t L = f->cfg.n_layer, d = f->cfg.d_model, ff = f->cfg.d_ff;
    int32_t kmax = d > ff ? d : ff;
    kmax = kmax > f->q_dim ? kmax : f->q_dim;
    void *scratch = assay_malloc(sizeof(float) * (size_t)(3 * kmax));
    if (scratch == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    for (int i = 0; i < P_COUNT; i++) {
        int32_t slots = i == P_HEAD ? 1 : L;
        f->w[i].q = assay_calloc((size_t)slots, sizeof *f->w[i].q);
        f->w[i].q_layout = assay_calloc((size_t)slots, sizeof *f->w[i].q_layout);
        if (f->w[i].q == NULL || f->w[i].q_layout == NULL) {
            assay_free(scratch);
            return ASSAY_ERR_NOMEM;
        }
    }
    for (int32_t l = 0; l < L; l++) {
        const struct assay_layer_weights *x = &m->layers[l];
        const struct quant_source qkv[] = {{&x->files.wq, x->wq, f->q_dim},
                                           {&x->files.wk, x->wk, f->kv_dim},
                                           {&x->files.wv, x->wv, f->kv_dim}};
        const struct quant_source o[] = {{&x->files.wo, x->wo, d}};
        const struct quant_source gu[] = {{&x->files.w_gate, x->w_gate, ff},
                                          {&x->files.w_up, x->w_up, ff}};
        const struct quant_source down[] = {{&x->files.w_down, x->w_down, d}};
        quant_put(f, &f->w[P_QKV], l, qkv, 3, scratch);
        quant_put(f, &f->w[P_O], l, o, 1, scratch);
        quant_put(f, &f->w[P_GU], l, gu, 2, scratch);
        quant_put(f, &f->w[P_DOWN], l, down, 1, scratch);
    }
    const struct quant_source head[] = {{&m->output_file, m->output, f->cfg.vocab}};
    quant_put(f, &f->w[P_HEAD], 0, head, 1, scratch);
    assay_free(scratch);
    return ASSAY_OK;
}

/* Rows of a mapped model's LM head decoded at a time when it is laid out. */
#define HEAD_CHUNK 1024

/* The LM head in every layout of f's weights: the model's rows, or a
 * mapped model's decoded HEAD_CHUNK rows at a time through f->layer_rows
 * (room for more: checked at init), each chunk's pages of the file given
 * back once laid out. ASSAY_ERR_PARSE when the file no longer decodes. */
static enum assay_status put_head(struct assay_forward *f)
{
    const struct assay_model *m = f->model;
    const int32_t d = f->cfg.d_model, v = f->cfg.vocab;
    if (!m->mapped) {
        weights_put(&f->w[P_HEAD], 0, 0, v, m->output);
        return ASSAY_OK;
    }
    for (int32_t r0 = 0; r0 < v; r0 += HEAD_CHUNK) {
        int32_t n = v - r0 < HEAD_CHUNK ? v - r0 : HEAD_CHUNK;
        enum assay_status st =
            assay_model_matrix_rows(NULL, &m->output_file, d, r0, n, f->layer_rows);
        if (st != ASSAY_OK) {
            return st;
        }
        weights_put(&f->w[P_HEAD], 0, r0, n, f->layer_rows);
        assay_model_matrix_done(m, &m->output_file, r0, n);
    }
    return ASSAY_OK;
}

/* The activation format of a weight's type; F32 for a type without one
 * (assay_forward_check_numerics refuses those first). */
static enum assay_act_format format_of(uint32_t type)
{
    enum assay_act_format fmt = ASSAY_ACT_FORMAT_F32;
    (void)assay_numerics_act_format(type, &fmt);
    return fmt;
}

/* The format of each product's input, laid out as assay_forward's act_fmt.
 * The fused products take their first part's (the parts agree: checked). */
static void fill_act_formats(const struct assay_model *m, enum assay_act_format *fmt)
{
    for (int32_t l = 0; l < m->cfg.n_layer; l++) {
        const struct assay_layer_types *t = &m->layers[l].types;
        fmt[l * P_COUNT + P_QKV] = format_of(t->wq);
        fmt[l * P_COUNT + P_O] = format_of(t->wo);
        fmt[l * P_COUNT + P_GU] = format_of(t->w_gate);
        fmt[l * P_COUNT + P_DOWN] = format_of(t->w_down);
    }
    fmt[m->cfg.n_layer * P_COUNT + P_HEAD] = format_of(m->output_type);
}

/* One matrix's type: its format, and whether its input length k is whole
 * blocks of it. */
static enum assay_status check_matrix(const char *name, int32_t layer, uint32_t type, int32_t k,
                                      enum assay_act_format *fmt, struct assay_diag *diag)
{
    char where[64];
    if (layer >= 0) {
        snprintf(where, sizeof where, "blk.%d.%s.weight", (int)layer, name);
    } else {
        snprintf(where, sizeof where, "%s.weight", name);
    }
    if (assay_numerics_act_format(type, fmt) != ASSAY_OK) {
        assay_diag_set(diag, NULL, where,
                       "a type whose activation format is emulated (F32, F16, BF16, Q4_0, Q5_0, "
                       "Q8_0, Q2_K..Q6_K)",
                       "ggml type %u", (unsigned)type);
        return ASSAY_ERR_UNSUPPORTED;
    }
    if (k % assay_numerics_format_block(*fmt) != 0) {
        assay_diag_set(diag, NULL, where, "an input length of whole activation blocks",
                       "%d inputs, %s blocks of %d", (int)k, assay_numerics_format_name(*fmt),
                       (int)assay_numerics_format_block(*fmt));
        return ASSAY_ERR_UNSUPPORTED;
    }
    return ASSAY_OK;
}

/* The parts of a fused product must round their one input alike. */
static enum assay_status check_same(int32_t layer, const char *a, enum assay_act_format fa,
                                    const char *b, enum assay_act_format fb,
                                    struct assay_diag *diag)
{
    if (fa == fb) {
        return ASSAY_OK;
    }
    char where[96];
    snprintf(where, sizeof where, "blk.%d.%s.weight and blk.%d.%s.weight", (int)layer, a,
             (int)layer, b);
    assay_diag_set(diag, NULL, where, "one activation format for the parts of a fused product",
                   "%s and %s", assay_numerics_format_name(fa), assay_numerics_format_name(fb));
    return ASSAY_ERR_UNSUPPORTED;
}

enum assay_status assay_forward_check_numerics(const struct assay_model *m, struct assay_diag *diag)
{
    const struct assay_model_config *c = &m->cfg;
    int32_t q_dim = c->n_head * c->head_dim;
    enum assay_act_format fq, fk, fv, fo, fg, fu, fd, fh;
    for (int32_t l = 0; l < c->n_layer; l++) {
        const struct assay_layer_types *t = &m->layers[l].types;
        enum assay_status st = check_matrix("attn_q", l, t->wq, c->d_model, &fq, diag);
        st = st == ASSAY_OK ? check_matrix("attn_k", l, t->wk, c->d_model, &fk, diag) : st;
        st = st == ASSAY_OK ? check_matrix("attn_v", l, t->wv, c->d_model, &fv, diag) : st;
        st = st == ASSAY_OK ? check_matrix("attn_output", l, t->wo, q_dim, &fo, diag) : st;
        st = st == ASSAY_OK ? check_matrix("ffn_gate", l, t->w_gate, c->d_model, &fg, diag) : st;
        st = st == ASSAY_OK ? check_matrix("ffn_up", l, t->w_up, c->d_model, &fu, diag) : st;
        st = st == ASSAY_OK ? check_matrix("ffn_down", l, t->w_down, c->d_ff, &fd, diag) : st;
        st = st == ASSAY_OK ? check_same(l, "attn_q", fq, "attn_k", fk, diag) : st;
        st = st == ASSAY_OK ? check_same(l, "attn_q", fq, "attn_v", fv, diag) : st;
        st = st == ASSAY_OK ? check_same(l, "ffn_gate", fg, "ffn_up", fu, diag) : st;
        if (st != ASSAY_OK) {
            return st;
        }
    }
    return check_matrix(m->tied ? "token_embd" : "output", -1, m->output_type, c->d_model, &fh,
                        diag);
}

enum assay_status assay_forward_init(struct assay_forward **out,
                                     const struct assay_forward_params *p)
{
    *out = NULL;
    if (p->model == NULL || p->n_blocks < 1 || p->block_size < 1 || p->max_rows < 1 ||
        p->max_out < 1 || p->max_seq_len < 1 || p->blas_rows < 0 ||
        !assay_isa_supported(p->isa)) {
        return ASSAY_ERR_INVALID;
    }
    if ((p->act != ASSAY_ACT_MODE_EXACT && p->act != ASSAY_ACT_MODE_GGML) ||
        (p->kv_type != ASSAY_KV_TYPE_F32 && p->kv_type != ASSAY_KV_TYPE_F16)) {
        return ASSAY_ERR_INVALID;
    }
    if (p->act == ASSAY_ACT_MODE_GGML && assay_forward_check_numerics(p->model, NULL) != ASSAY_OK) {
        return ASSAY_ERR_UNSUPPORTED;
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
    f->blas_rows = p->blas_rows;
    f->isa = assay_isa_resolve(p->isa);
    f->act = p->act;
    f->kv_type = p->kv_type;
    f->flash_attn = p->flash_attn;
    f->f16_acc = p->f16_acc;
    f->integer_weights = p->integer_weights;
    f->split = 0.5;
    f->mutant = p->mutant;
    f->worker = p->worker;
    int32_t d = c->d_model, ff = c->d_ff, L = c->n_layer;
    /* room for the planted bug's padding rows */
    int32_t pad = ASSAY_MUTANT_ON(p->mutant, ASSAY_MUTANT_PADDING_ROW_NAN) ? 8 : 0;
    int64_t rows = (int64_t)p->max_rows + pad;
    int64_t outs = (int64_t)p->max_out + pad;
    int64_t kv_floats = (int64_t)L * p->n_blocks * (int64_t)p->block_size * f->kv_dim;
    /* A mapped model's layers take turns in one layer's room. */
    const int32_t slots = p->model->mapped ? 1 : L;
    bool weights_ok = weights_alloc(f, &f->w[P_QKV], slots, d, f->qkv_dim) &&
                      weights_alloc(f, &f->w[P_O], slots, f->q_dim, d) &&
                      weights_alloc(f, &f->w[P_GU], slots, d, 2 * ff) &&
                      weights_alloc(f, &f->w[P_DOWN], slots, ff, d) &&
                      weights_alloc(f, &f->w[P_HEAD], 1, d, c->vocab);
    if (weights_ok && p->model->mapped) {
        /* the seven matrices of a layer, and a chunk of the LM head */
        int64_t layer = (int64_t)d * (f->qkv_dim + f->q_dim + 3 * (int64_t)ff);
        int64_t head = (int64_t)HEAD_CHUNK * d;
        f->layer_rows = alloc_huge(f, layer > head ? layer : head);
        f->head_row[0] = alloc_floats(f, d);
        f->head_row[1] = alloc_floats(f, d);
        weights_ok = f->layer_rows != NULL && f->head_row[0] != NULL && f->head_row[1] != NULL;
    }
    f->k = alloc_huge(f, kv_floats);
    f->v = alloc_huge(f, kv_floats);
    f->qkv_bias = c->qkv_bias ? alloc_floats(f, (int64_t)L * f->qkv_dim) : NULL;
    f->rope_cos = alloc_floats(f, ((int64_t)p->max_seq_len + 1) * (c->head_dim / 2));
    f->rope_sin = alloc_floats(f, ((int64_t)p->max_seq_len + 1) * (c->head_dim / 2));
    f->x = alloc_floats(f, rows * d);
    f->xn = alloc_floats(f, rows * d);
    f->qkv = alloc_floats(f, rows * f->qkv_dim);
    f->att = alloc_floats(f, rows * f->q_dim);
    f->gu = alloc_floats(f, rows * 2 * ff);
    f->hidden = alloc_floats(f, rows * ff);
    f->on = alloc_floats(f, outs * d);
    f->logits = alloc_floats(f, outs * c->vocab);
    f->scores_stride = ((int64_t)p->max_seq_len + 3 + 7) / 8 * 8;
    f->scores = alloc_floats(f, c->n_head * f->scores_stride + 2 * c->head_dim);
    f->scores2 = alloc_floats(f, c->n_head * f->scores_stride + 2 * c->head_dim);
    if (p->act == ASSAY_ACT_MODE_GGML) {
        f->act_fmt = assay_calloc((size_t)(L + 1) * P_COUNT, sizeof *f->act_fmt);
        if (f->act_fmt == NULL) {
            assay_forward_free(f);
            return ASSAY_ERR_NOMEM;
        }
        fill_act_formats(p->model, f->act_fmt);
    }
    f->row_pos = assay_calloc((size_t)rows, sizeof(int32_t));
    f->row_seq = assay_calloc((size_t)rows, sizeof(int32_t));
    if (!weights_ok || f->k == NULL || f->v == NULL || f->rope_cos == NULL ||
        (c->qkv_bias && f->qkv_bias == NULL) || f->rope_sin == NULL || f->x == NULL ||
        f->xn == NULL || f->qkv == NULL || f->att == NULL || f->gu == NULL || f->hidden == NULL ||
        f->on == NULL || f->logits == NULL || f->scores == NULL || f->scores2 == NULL ||
        f->row_pos == NULL || f->row_seq == NULL) {
        assay_forward_free(f);
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t l = 0; l < L && !p->model->mapped; l++) {
        assay_forward_put_layer(f, l, &p->model->layers[l]);
    }
    enum assay_status st = put_head(f);
    if (st == ASSAY_OK) {
        st = put_quantized(f);
    }
    if (st != ASSAY_OK) {
        assay_forward_free(f);
        return st;
    }
    if (c->qkv_bias) {
        for (int32_t l = 0; l < L; l++) {
            float *bias = f->qkv_bias + (int64_t)l * f->qkv_dim;
            const struct assay_layer_weights *w = &p->model->layers[l];
            memcpy(bias, w->bq, sizeof(float) * (size_t)f->q_dim);
            memcpy(bias + f->q_dim, w->bk, sizeof(float) * (size_t)f->kv_dim);
            memcpy(bias + f->q_dim + f->kv_dim, w->bv, sizeof(float) * (size_t)f->kv_dim);
        }
    }
    int32_t half = c->head_dim / 2;
    double rope_scale = c->rope_scale != 0.0f ? c->rope_scale : 1.0;
    for (int32_t pos = 0; pos <= p->max_seq_len; pos++) {
        for (int32_t i = 0; i < half; i++) {
            double theta = pos / rope_scale * pow((double)c->rope_theta, -2.0 * i / c->head_dim);
            if (p->model->rope_freqs != NULL) {
                theta /= p->model->rope_freqs[i];
            }
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
    for (int i = 0; i < P_COUNT; i++) {
        free_huge(f->w[i].packed);
        free_huge(f->w[i].kn);
        for (int32_t l = 0; f->w[i].q != NULL && l < (i == P_HEAD ? 1 : f->cfg.n_layer); l++) {
            free_huge((float *)f->w[i].q[l]);
        }
        assay_free(f->w[i].q);
        assay_free(f->w[i].q_layout);
    }
    free_huge(f->k);
    free_huge(f->v);
    free_huge(f->layer_rows);
    assay_free(f->head_row[0]);
    assay_free(f->head_row[1]);
    float *bufs[] = {f->qkv_bias, f->rope_cos, f->rope_sin, f->x,      f->xn,     f->qkv,    f->att,
                     f->gu,       f->hidden,   f->on,       f->logits, f->scores, f->scores2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        assay_free(bufs[i]);
    }
    assay_free(f->row_pos);
    assay_free(f->row_seq);
    assay_free(f->act_fmt);
    assay_free(f);
}

const float *assay_forward_logits(const struct assay_forward *f)
{
    return f->logits;
}

bool assay_forward_f16_acc_applies(const struct assay_model *m, enum assay_kv_type kv_type,
                                   bool flash_attn)
{
    if (kv_type == ASSAY_KV_TYPE_F16 &&
        (!flash_attn || m->cfg.head_dim >= ASSAY_NUMERICS_F16ACC_LANES)) {
        return true;
    }
    bool f16 = format_of(m->output_type) == ASSAY_ACT_FORMAT_F16;
    for (int32_t l = 0; l < m->cfg.n_layer && !f16; l++) {
        const struct assay_layer_types *t = &m->layers[l].types;
        f16 = format_of(t->wq) == ASSAY_ACT_FORMAT_F16 ||
              format_of(t->wo) == ASSAY_ACT_FORMAT_F16 ||
              format_of(t->w_gate) == ASSAY_ACT_FORMAT_F16 ||
              format_of(t->w_down) == ASSAY_ACT_FORMAT_F16;
    }
    return f16;
}

void assay_forward_set_f16_acc(struct assay_forward *f, bool on)
{
    f->f16_acc = on;
}

void assay_forward_set_probe(struct assay_forward *f, assay_forward_probe_fn fn, void *user)
{
    f->probe = fn;
    f->probe_user = user;
}

void assay_forward_get_numerics(const struct assay_forward *f, struct assay_forward_numerics *out)
{
    out->batch_invariant = f->batch_invariant;
    out->blas_rows = uses_blas(f) ? f->blas_rows : 0;
    out->isa = f->isa;
    out->act = f->act;
    out->kv_type = f->kv_type;
    out->flash_attn = f->flash_attn;
    out->matrices = 4 * f->cfg.n_layer + 1;
    out->quantized = 0;
    out->one_row_bytes = 0;
    for (int i = 0; i < P_COUNT && uses_own(f); i++) {
        for (int32_t l = 0; l < (i == P_HEAD ? 1 : f->cfg.n_layer); l++) {
            bool q = f->w[i].q != NULL && f->w[i].q[l] != NULL;
            out->quantized += q;
            out->one_row_bytes += q ? assay_gemmq_bytes(&f->w[i].q_layout[l])
                                    : f->w[i].packed_floats * (int64_t)sizeof(float);
        }
    }
}

int64_t assay_forward_bytes(const struct assay_forward *f)
{
    return f->bytes;
}
