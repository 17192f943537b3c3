/*
 * score.h - teacher-forced logits of the bundled engine under a chosen
 * arithmetic, for comparing a served model's log-probabilities with the
 * oracle's.
 *
 * Given a prompt of P tokens and a continuation of G tokens, the scorer
 * returns G rows of logits: row i is the engine's next-token logits after
 * the prompt and continuation[0..i), the rows assay_oracle_memo_rows
 * (checks/equivalence.h) gives for the oracle. It runs one forward pass of
 * the P + G - 1 tokens over a contiguous KV buffer with every product the
 * engine's own fixed-order one (batch invariant), so a row does not depend
 * on how the tokens would have been batched. The model may be mapped
 * (assay_model_load_gguf_mapped): each call then decodes the file's layers
 * one at a time into the room of one, and the rows are the same bits as
 * the resident load's; memory is the LM head and two copies of a layer in
 * fp32 besides the file's pages, time one decoding of the weights per call.
 *
 *   struct assay_score_params sp = assay_score_default_params(model, 512);
 *   sp.act = ASSAY_ACT_MODE_GGML;
 *   sp.kv_type = ASSAY_KV_TYPE_F16;
 *   sp.flash_attn = true;            // llama.cpp's CPU defaults
 *   struct assay_score *sc;
 *   if (assay_score_init(&sc, &sp, &diag) == ASSAY_OK) {
 *       const float *rows;
 *       assay_score_rows(sc, prompt, P, cont, G, &rows);   // (G, vocab)
 *       assay_score_free(sc);
 *   }
 *
 * Lifetime: assay_score_init allocates everything (free with
 * assay_score_free); assay_score_rows allocates nothing. Not thread-safe.
 */
#ifndef ASSAY_SCORE_H
#define ASSAY_SCORE_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/status.h"
#include "forward.h"
#include "isa.h"
#include "model.h"
#include "numerics.h"

struct assay_score;

struct assay_score_params {
    const struct assay_model *model; /* borrowed; must outlive the scorer */
    int32_t max_len;                 /* most tokens of prompt + continuation; <= n_ctx */
    int32_t max_rows;                /* most tokens of one batch of sequences
                                        (assay_score_rows_batch); 0: max_len */
    enum assay_act_mode act;         /* as engine/forward.h */
    enum assay_kv_type kv_type;
    bool flash_attn;
    bool f16_acc; /* fp16 accumulation of AVX512-FP16 builds of ggml (engine/forward.h) */
    enum assay_isa isa;
    bool two_threads; /* a worker thread takes a share of each pass (engine/worker.h);
                         the rows are the same bits either way */
    int mutant; /* enum assay_mutant; mutant builds only */
};

/* EXACT arithmetic, an F32 KV buffer, the CPU's best instruction set, no
 * mutant. */
struct assay_score_params assay_score_default_params(const struct assay_model *model,
                                                     int32_t max_len);

/*
 * Allocate a scorer (free with assay_score_free). ASSAY_ERR_INVALID for a
 * bad max_len, act or kv_type (diag names it); ASSAY_ERR_UNSUPPORTED for
 * act GGML with a model whose types cannot be emulated
 * (assay_forward_check_numerics: diag names the tensors), an instruction
 * set this CPU lacks, or a mutant in a build without mutants;
 * ASSAY_ERR_NOMEM; ASSAY_ERR_INTERNAL when two_threads and the thread
 * could not start. On failure *out is NULL. diag may be NULL.
 */
enum assay_status assay_score_init(struct assay_score **out, const struct assay_score_params *p,
                                   struct assay_diag *diag);
void assay_score_free(struct assay_score *sc);

/* One sequence of a batch (assay_score_rows_batch). */
struct assay_score_seq {
    const int32_t *prompt;
    int32_t prompt_len;
    const int32_t *cont;
    int32_t n_cont;
};

/* The most sequences of one batch. */
#define ASSAY_SCORE_MAX_SEQS 16

/* Switch f16_acc for the calls that follow (the other arithmetic stays). */
void assay_score_set_f16_acc(struct assay_score *sc, bool on);

/* Show the calls that follow to a probe (engine/forward.h,
 * assay_forward_set_probe); NULL: none. */
void assay_score_set_probe(struct assay_score *sc, assay_forward_probe_fn fn, void *user);

/*
 * Teacher-forced logits: *rows points at (n_cont, vocab) floats, row i the
 * logits following prompt[0..prompt_len) and cont[0..i); borrowed until
 * the next call or the scorer's free. ASSAY_ERR_INVALID (and *rows NULL)
 * when prompt_len < 1, n_cont < 1, prompt_len + n_cont - 1 exceeds
 * max_len, or a token is outside the vocabulary; ASSAY_ERR_PARSE when a
 * mapped model's file no longer decodes.
 */
enum assay_status assay_score_rows(struct assay_score *sc, const int32_t *prompt,
                                   int32_t prompt_len, const int32_t *cont, int32_t n_cont,
                                   const float **rows);

/*
 * The rows of n sequences in one pass (each layer taken once for all of
 * them: for a mapped model, decoded once): *rows points at the rows of
 * seqs[0], then seqs[1]'s, ..., (sum of n_cont, vocab) floats, each
 * sequence's rows the bits assay_score_rows gives it alone. Borrowed as
 * assay_score_rows's. ASSAY_ERR_INVALID (and *rows NULL) when n is not in
 * 1..ASSAY_SCORE_MAX_SEQS, a sequence is invalid for assay_score_rows, or
 * their tokens (prompt_len + n_cont - 1 each) exceed max_rows;
 * ASSAY_ERR_PARSE as assay_score_rows.
 */
enum assay_status assay_score_rows_batch(struct assay_score *sc, const struct assay_score_seq *seqs,
                                         int32_t n, const float **rows);

/* The most tokens of one batch: max_rows as given, or max_len. */
int32_t assay_score_max_rows(const struct assay_score *sc);

#endif
