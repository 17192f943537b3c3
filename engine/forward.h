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
 * Batch invariance: OpenBLAS 0.3.21 takes a separate "small matrix" kernel
 * when M*N*K <= 10^6 on AVX-512 cores, whose results differ in the last bits
 * from the blocked kernel. With batch_invariant set, every product is padded
 * to more rows than that threshold so each row's result depends on that row
 * alone, whatever else is in the batch (tested in suites/test_engine.c).
 *
 * All memory is allocated by assay_forward_init; assay_forward_run
 * allocates nothing.
 */
#ifndef ASSAY_FORWARD_H
#define ASSAY_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/status.h"
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
    bool batch_invariant;
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

/* Bytes held by the forward (weights copy, KV store, scratch). */
int64_t assay_forward_bytes(const struct assay_forward *fwd);

#endif
