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
    int mutant;
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

/* Allocate and fill everything a pass uses (free with assay_forward_free).
 * ASSAY_ERR_INVALID for bad sizes or an instruction set this CPU lacks,
 * ASSAY_ERR_NOMEM; *out is then NULL. */
enum assay_status assay_forward_init(struct assay_forward **out,
                                     const struct assay_forward_params *params);
void assay_forward_free(struct assay_forward *fwd);

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
};
void assay_forward_get_numerics(const struct assay_forward *fwd, struct assay_forward_numerics *out);

/* Bytes held by the forward (weights copy, KV store, scratch). */
int64_t assay_forward_bytes(const struct assay_forward *fwd);

#endif
