/*
 * forward_internal.h - what the two files of the forward pass share (not
 * an interface: include forward.h): its state. forward_init.c checks a
 * model's numerics, lays out the weights and allocates everything;
 * forward.c runs the passes.
 */
#ifndef ASSAY_FORWARD_INTERNAL_H
#define ASSAY_FORWARD_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "forward.h"
#include "gemmq.h"

/* The four products of a layer, and the LM head's. */
enum product_kind { P_QKV, P_O, P_GU, P_DOWN, P_HEAD, P_COUNT };

/*
 * One weight matrix per layer (the LM head: one in all), (k, n), in the
 * layouts the paths read: packed in panels for the engine's own product
 * (gemm.h), [in][out] row-major for OpenBLAS (NoTrans). Each is NULL when
 * the forward never takes its path.
 */
struct weights {
    float *packed;
    float *kn;
    int64_t packed_floats; /* of one layer's matrix */
    int32_t k, n;
    /* A resident model's matrices kept in their file's integer format for
     * products of few rows (gemmq.h: the same bits as packed, a third of the
     * bytes), per layer; q[l] NULL where not (another format, parts the
     * layout cannot hold, or a weight that decodes to other bits than the
     * model's: forward_init.c checks each). q itself NULL when none. */
    uint8_t **q;
    struct assay_gemmq_layout *q_layout;
};

struct assay_forward {
    struct assay_model_config cfg;
    const struct assay_model *model;
    int32_t q_dim, kv_dim, qkv_dim;
    int32_t n_blocks, block_size, max_rows, max_out, max_seq_len;
    bool batch_invariant; /* every product is the engine's own (gemm.h) */
    int32_t blas_rows;    /* else: products of this many rows or more go to OpenBLAS (0: none) */
    enum assay_isa isa;   /* resolved */
    enum assay_act_mode act;
    enum assay_kv_type kv_type;
    bool flash_attn;
    bool f16_acc; /* fp16 accumulation as AVX512-FP16 builds of ggml (forward.h) */
    bool integer_weights; /* forward.h */
    /* With act GGML: the format each product's input rows are rounded to,
     * (n_layer + 1, P_COUNT): layer l's at l * P_COUNT + kind, the LM
     * head's at n_layer * P_COUNT + P_HEAD. NULL in EXACT mode. */
    enum assay_act_format *act_fmt;
    int mutant;
    assay_forward_probe_fn probe; /* forward.h; NULL: none */
    void *probe_user;
    struct assay_worker *worker; /* borrowed; may be NULL */
    /* Weights, (k, n) each: QKV (layer, d_model, q_dim + 2 kv_dim), output
     * (layer, q_dim, d_model), gate/up (layer, d_model, 2 d_ff: gate columns
     * then up columns), down (layer, d_ff, d_model), LM head (d_model,
     * vocab). */
    struct weights w[P_COUNT];
    /* A mapped model (engine/model.h): each layer's matrices are decoded
     * when a pass reaches the layer, into layer_rows ([out][in], the seven
     * matrices in turn, view's pointers on them), and laid out in w[] as
     * its layer 0; the LM head is laid out once, at init. layer_rows is
     * NULL for a resident model. head_row: a decoded row of a mapped LM
     * head for each thread's share of an fp16-accumulating product. */
    float *layer_rows;
    struct assay_layer_weights view;
    float *head_row[2];
    /* KV store */
    float *k; /* (layer, block, pos_in_block, kv_dim) */
    float *v; /* (layer, block, pos_in_block, kv_dim) */
    /* RoPE tables */
    float *qkv_bias; /* (n_layer, qkv_dim): q, k and v biases, or NULL */
    float *rope_cos; /* (max_seq_len + 1, head_dim / 2) */
    float *rope_sin;
    /* scratch, each with room for the padding-row-nan mutant's rows */
    float *x;      /* (rows, d_model) residual stream */
    float *xn;     /* (rows, d_model) normalised */
    float *qkv;    /* (rows, qkv_dim) */
    float *att;    /* (rows, q_dim) */
    float *gu;     /* (rows, 2 d_ff) */
    float *hidden; /* (rows, d_ff) */
    float *on;     /* (out rows, d_model) normalised rows for the LM head */
    float *logits; /* (out rows, vocab) */
    float *scores;  /* (n_head, scores_stride) then (2, head_dim) for the F16 attention's
                       query and accumulator: the caller's thread */
    float *scores2; /* the same for the worker's share of the rows */
    int64_t scores_stride; /* max_seq_len + 3 (a leaked key, the sum), rounded up to 8 */
    int32_t *row_pos; /* (rows) position of each row */
    int32_t *row_seq; /* (rows) sequence of each row */
    double split;     /* the caller's share of a split product's columns */
    int64_t bytes;
};

/* Lay out layer l's seven matrices (w: [out][in] fp32) in every layout of
 * f's weights, as layer `slot` (forward_init.c). */
void assay_forward_put_layer(struct assay_forward *f, int32_t slot,
                             const struct assay_layer_weights *w);

/* Whether the forward's products ever go to OpenBLAS. */
static inline bool uses_blas(const struct assay_forward *f)
{
    return !f->batch_invariant && f->blas_rows > 0;
}

#endif
