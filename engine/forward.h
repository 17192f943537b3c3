/*
 * forward.h - one batched forward pass of a TinyGPT model over the rows of
 * a step, with a block-addressed KV store.
 *
 * All rows of a step (every scheduled sequence's new tokens) are stacked
 * into one matrix, so each linear layer is one cblas_sgemm. Attention is per
 * sequence: a row at position p attends to positions 0..p of its own
 * sequence, read through the sequence's block table. A contiguous KV buffer
 * per request is the special case of one block of max_seq_len positions.
 *
 * Batch invariance. OpenBLAS picks its kernel by CPU (or OPENBLAS_CORETYPE)
 * and, within a kernel, its blocking and small-matrix paths by shape, so a
 * row's product may change in its last bits with the rows around it, the
 * thread count or the machine. With batch_invariant set, every product is
 * the engine's own (gemm.h): each element one chain of multiply-adds in a
 * fixed order, whatever the batch, the split between threads or the BLAS
 * kernel; norms, softmax, attention and SwiGLU are the engine's own loops,
 * whose order depends on the row's own data and the model's shapes alone.
 * A row's logits are then bit-identical alone and in any batch, with one
 * thread or two, on every kernel family (suites/test_engine.c and the
 * portability label test it under each). What still changes the bits is
 * the instruction set (isa.h), chosen once per engine. Without it, a
 * product takes the engine's own path below blas_rows rows and OpenBLAS
 * from there on (blas_rows 0: never): which path a row takes, and so its
 * last bits, may then depend on its batch.
 *
 * All memory is allocated by assay_forward_init; assay_forward_run
 * allocates nothing.
 */
#ifndef ASSAY_FORWARD_H
#define ASSAY_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/status.h"
#include "isa.h"
#include "model.h"
#include "numerics.h"
#include "worker.h"

struct assay_forward;

struct assay_forward_params {
    const struct assay_model *model; /* borrowed; outlives the forward */
    int32_t n_blocks;                /* KV store size in blocks */
    int32_t block_size;              /* positions per block */
    int32_t max_rows;                /* rows (tokens) per pass */
    int32_t max_out;                 /* rows whose logits are wanted per pass */
    int32_t max_seq_len;             /* longest sequence (RoPE table size) */
    bool batch_invariant;            /* every product the engine's own (gemm.h) */
    int32_t blas_rows;               /* else: products of this many rows or more go to
                                        OpenBLAS, fewer to gemm.h; 0: none to OpenBLAS */
    enum assay_isa isa;              /* the engine's own loops; AUTO: the CPU's best */
    enum assay_act_mode act;         /* EXACT: the floats as computed; GGML: each product's
                                        input rows rounded to the activation format of its
                                        weights' ggml type first (numerics.h) */
    enum assay_kv_type kv_type;      /* F16: keys and values rounded to fp16 when stored */
    bool flash_attn;                 /* with kv_type F16: ggml's CPU flash attention (see
                                        below); without: ggml's mul_mat attention */
    bool f16_acc;                    /* fp16 accumulation as ggml built for AVX512-FP16
                                        computes it (see below) */
    int mutant;
    bool integer_weights;        /* keep a resident model's matrices stored in integer
                                    formats in that format too, for products of few rows
                                    (engine/gemmq.h: the same bits from a third of the
                                    bytes) */
    struct assay_worker *worker; /* borrowed, may be NULL: a share of the
                                    columns of each product, attention rows (or a
                                    single row's heads) and SwiGLU rows go
                                    to it; OpenBLAS then runs on one thread
                                    during a pass */
};

/* One sequence's rows in a pass: rows row0..row0+n_rows-1 hold its tokens
 * at positions pos0..pos0+n_rows-1; `blocks` is its block table (borrowed
 * for the call) and must cover every position up to pos0+n_rows-1. */
struct assay_forward_seq {
    const int32_t *blocks;
    int32_t pos0;
    int32_t n_rows;
    int32_t row0;
    int32_t rope_offset; /* 0, except where a planted bug says otherwise */
};

struct assay_forward_batch {
    int32_t n_rows;
    const int32_t *tokens;  /* (n_rows) */
    int32_t n_seqs;
    const struct assay_forward_seq *seqs; /* (n_seqs), rows in order */
    int32_t n_out;
    const int32_t *out_rows; /* (n_out) rows whose logits are wanted */
};

/*
 * ggml's numerics. With act GGML, the input rows of each product are
 * rounded (numerics.h) to the format ggml's CPU backend converts them to
 * for the product's weights: the normalised rows before the QKV and
 * gate/up products, the attention output before Wo, the SwiGLU output
 * before the down projection, the final normalised rows before the LM
 * head. A fused product (QKV; gate and up) has one input, so its parts'
 * weights must round to the same format; a model whose parts differ is
 * refused at init (ASSAY_ERR_UNSUPPORTED; assay_forward_check_numerics
 * names the tensors). Rounding is per row, so batch invariance holds.
 *
 * With kv_type F16 (either act), keys and values are stored rounded to
 * fp16 (as floats: the same values, not half the memory), and attention
 * follows ggml's F16-cache paths, each in a scalar loop of its own:
 *  - flash_attn: ggml_compute_forward_flash_attn_ext_f16_one_chunk, the
 *    path of every decode row: the query rounded to fp16, each score an
 *    fp32 dot of fp16 values times the scale, then an online softmax over
 *    the keys in order whose weighted sum of values is kept in fp16,
 *    rounded after every step (scaled by e^(old max - new max) on a new
 *    maximum, then value * e^(score - max) added); the sum of weights in
 *    fp32; the result that sum divides. Not emulated: ggml's tiled path
 *    for prefill batches (fp32 query and accumulator: a subset of these
 *    roundings, so the budget errs large) and its split-KV decode path
 *    for caches of 512 positions or more (per-thread chunks of the cache,
 *    each with its own fp16 accumulator, merged in fp32: the same values
 *    while a sequence fits in the first chunk).
 *  - without: ggml's mul_mat(k, q) and mul_mat(v, softmax): the query
 *    rounded to fp16 for the scores, the softmax's probabilities rounded
 *    to fp16 before the sum of values.
 * With kv_type F32 attention is the engine's own, as in EXACT.
 *
 * With f16_acc, the fp16 helpers of ggml's AVX512-FP16 builds
 * (numerics.h) replace their fp32-lane forms wherever a single decode row
 * would meet them, and every row takes them: with act GGML, each product
 * with F16 weights is ggml_vec_dot_f16 per element (128 fp16
 * accumulators); with an F16 KV store (either act), each score is that dot of the fp16 query and key, flash
 * attention's value accumulation and rescaling are ggml_vec_mad_f16 and
 * ggml_vec_scale_f16 (fp16 arithmetic on the first head_dim - head_dim mod
 * 128 elements), and without flash attention each element of the sum of
 * values is that dot over the keys (ggml reads the transposed value cache
 * padded with zero probabilities, so every key falls in a lane). These
 * products are plain loops over the model's [out][in] weights, slower than
 * the engine's own. assay_forward_set_f16_acc switches it between passes.
 */

/* Allocate and fill everything a pass uses (free with assay_forward_free).
 * ASSAY_ERR_INVALID for bad sizes or an instruction set this CPU lacks,
 * ASSAY_ERR_UNSUPPORTED when act is GGML and assay_forward_check_numerics
 * refuses the model, ASSAY_ERR_NOMEM, ASSAY_ERR_PARSE when a mapped
 * model's LM head no longer decodes; *out is then NULL. A mapped model
 * (engine/model.h) keeps its matrices in the file: every pass decodes each
 * layer into the room of one (the same floats, so the same logits as the
 * resident load's), which suits a pass over many rows (engine/score.h),
 * not a step per token; assay_forward_run then also returns
 * ASSAY_ERR_PARSE when the file no longer decodes. */
enum assay_status assay_forward_init(struct assay_forward **out,
                                     const struct assay_forward_params *params);
void assay_forward_free(struct assay_forward *fwd);

/* Whether the forward can emulate ggml's activation roundings for model:
 * ASSAY_OK; ASSAY_ERR_UNSUPPORTED when a weight's type has no emulated
 * activation format, when the parts of a fused product (wq, wk, wv; w_gate,
 * w_up) round to different formats, or when a product's input length is
 * not a whole number of its format's blocks (diag names the tensors and
 * the formats). diag may be NULL. */
enum assay_status assay_forward_check_numerics(const struct assay_model *model,
                                               struct assay_diag *diag);

/* Run the pass: write every row's key and value into the store, then
 * compute the wanted logits. Returns ASSAY_ERR_INVALID (and changes
 * nothing) if the batch exceeds the sizes given at init. */
enum assay_status assay_forward_run(struct assay_forward *fwd, const struct assay_forward_batch *b);

/* The logits of the last pass, (n_out, vocab) in the order of out_rows;
 * borrowed until the next run. */
const float *assay_forward_logits(const struct assay_forward *fwd);

/* What computes the pass: the products' path and the instruction set of
 * the engine's own loops. */
struct assay_forward_numerics {
    bool batch_invariant; /* every product through gemm.h */
    int32_t blas_rows;    /* products of this many rows or more go to OpenBLAS; 0: none */
    enum assay_isa isa;   /* resolved */
    enum assay_act_mode act;
    enum assay_kv_type kv_type;
    bool flash_attn;
    /* Of the matrices of the products (four a layer and the LM head), how
     * many products of few rows read in their file's integer format
     * (engine/gemmq.h: the same bits from 10 to 12 bits a weight). */
    int32_t matrices, quantized;
    /* Bytes of weights a one-row pass reads: the integer layouts where
     * kept, the packed floats elsewhere (0 when products go to OpenBLAS). */
    int64_t one_row_bytes;
};
void assay_forward_get_numerics(const struct assay_forward *fwd, struct assay_forward_numerics *out);

/* Whether f16_acc changes anything for model with act GGML, this KV type
 * and attention path: a product with F16 weights, or an F16 store with
 * heads of 128 or more or without flash attention (the store's part holds
 * with act EXACT too). */
bool assay_forward_f16_acc_applies(const struct assay_model *model, enum assay_kv_type kv_type,
                                   bool flash_attn);

/* Switch f16_acc (above) for the passes that follow. */
void assay_forward_set_f16_acc(struct assay_forward *fwd, bool on);

/* A probe sees a pass's values at llama.cpp's checkpoints, named as its
 * graph names them (suites/llama_tensors.c): "attn_norm", "Qcur", "Kcur",
 * "Vcur" (after bias and RoPE), "kqv_out" (attention output), "ffn_inp"
 * (the residual after attention), "ffn_norm", "ffn_swiglu", "l_out" (the
 * residual after the layer), each with its layer, then "result_norm" and
 * "result_output" (layer -1, the output rows alone). The rows are the
 * pass's rows in order, `stride` floats apart; a product's input is seen
 * before it is rounded, with the format it is rounded to (fmt; F32 when
 * none). For comparing the engine with llama.cpp layer by layer
 * (suites/numerics_layers.c); NULL (the default) calls nothing. */
typedef void (*assay_forward_probe_fn)(void *user, const char *name, int32_t layer,
                                       enum assay_act_format fmt, const float *x, int32_t rows,
                                       int32_t cols, int64_t stride);
void assay_forward_set_probe(struct assay_forward *fwd, assay_forward_probe_fn fn, void *user);

/* Bytes held by the forward (weights copy, KV store, scratch). */
int64_t assay_forward_bytes(const struct assay_forward *fwd);

#endif
