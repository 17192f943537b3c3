/*
 * oracle.h - the naive reference: what a TinyGPT model computes, written for
 * clarity and optimised only where no bit of a result can change.
 *
 * Each sequence computed whole in one pass from the token embeddings (no KV
 * cache, no paging; several sequences may share a pass, attention within
 * each, with the same result bits as alone), every product and reduction
 * accumulated in double precision straight from the fp32 weights in their
 * [out][in] layout. It shares only the weights and the config with
 * the engine (it includes engine/model.h and nothing else of engine/), so a
 * bug in the engine's cache, batching, paging, speculation or sampler
 * cannot hide in the oracle.
 *
 * The matrix products take each weight row through a block of positions
 * while it is in cache and may run on several threads
 * (assay_oracle_set_threads); every element is still the one dot product a
 * position alone would compute, so the logits are the same bit for bit
 * whatever the sequence length, block or number of threads. It holds no
 * weights of its own; its scratch is O(max_len x d_model) plus a block's
 * O(d_ff), nothing of size max_len x vocab (assay_oracle_scratch_bytes).
 * Given a mapped model (engine/model.h), it decodes one layer's matrices
 * at a time into fp32, the same floats a resident load holds, and the
 * output matrix 1024 rows at a time, giving each one's file pages back
 * after use: the logits are the resident model's bit for bit, and the
 * memory is one layer in fp32 (4 bytes x its parameters) plus 1024 rows
 * plus the scratch above, not the model.
 *
 * Lifetime: assay_oracle_init / assay_oracle_free. Not thread-safe; make one
 * per thread.
 */
#ifndef ASSAY_ORACLE_H
#define ASSAY_ORACLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/request.h"
#include "../core/status.h"
#include "../engine/model.h"

struct assay_oracle;

/* An oracle for sequences of up to max_len tokens (<= the model's context).
 * The model is borrowed and must outlive the oracle. */
enum assay_status assay_oracle_init(struct assay_oracle **out, const struct assay_model *model,
                                    int32_t max_len);
void assay_oracle_free(struct assay_oracle *oracle);

/* Compute the matrix products on n_threads threads (1, the default, runs
 * everything on the caller's thread); the results do not change.
 * ASSAY_ERR_INVALID for n_threads outside 1..ASSAY_ORACLE_MAX_THREADS (the
 * count is then unchanged). */
#define ASSAY_ORACLE_MAX_THREADS 64
enum assay_status assay_oracle_set_threads(struct assay_oracle *oracle, int32_t n_threads);

/*
 * Which code computes the products' dot products. Every kernel computes the
 * same doubles (each product rounded, then each of the eight partial sums
 * in one order, then the partial sums in one order), so the logits do not
 * depend on the kernel, the CPU or the instruction set: only the speed
 * does. AVX2 takes four positions through a weight row at once (the
 * chains of additions of one position bound the generic kernel), about
 * twice as fast; AVX-512 eight, each position's eight partial sums in one
 * vector. None uses fused multiply-adds, which round once where the
 * definition rounds twice: so the oracle reaches at most half of a
 * machine's quoted double-precision peak, which counts them.
 */
enum assay_oracle_kernel {
    ASSAY_ORACLE_KERNEL_AUTO = 0, /* the fastest the CPU runs */
    ASSAY_ORACLE_KERNEL_GENERIC,  /* plain C */
    ASSAY_ORACLE_KERNEL_AVX2,     /* 4-wide double vectors, no fused multiply-add */
    ASSAY_ORACLE_KERNEL_AVX512,   /* 8-wide double vectors, no fused multiply-add */
};

/* Whether this CPU and this build can run the kernel (AUTO and GENERIC:
 * always). */
bool assay_oracle_kernel_supported(enum assay_oracle_kernel kernel);

/* "auto", "generic", "avx2", "avx512"; "?" out of range. */
const char *assay_oracle_kernel_name(enum assay_oracle_kernel kernel);

/* Use the kernel (AUTO: the fastest supported, the default). Returns
 * ASSAY_ERR_UNSUPPORTED when the CPU cannot run it and ASSAY_ERR_INVALID
 * for a value out of range; the kernel is then unchanged. */
enum assay_status assay_oracle_set_kernel(struct assay_oracle *oracle,
                                          enum assay_oracle_kernel kernel);

/* The kernel in use (never AUTO). */
enum assay_oracle_kernel assay_oracle_get_kernel(const struct assay_oracle *oracle);

/* The bytes of working memory the oracle allocated at init, beside the
 * model it borrows and the logits its caller passes in. */
size_t assay_oracle_scratch_bytes(const struct assay_oracle *oracle);

/*
 * Teacher forcing: logits (n, vocab) where row t holds the logits of the
 * token that follows tokens[0..t]. ASSAY_ERR_INVALID for n outside
 * 1..max_len or a token outside the vocabulary (logits untouched);
 * ASSAY_ERR_PARSE when a mapped model's file no longer decodes (changed on
 * disk since the load; logits then undefined).
 */
enum assay_status assay_oracle_logits(struct assay_oracle *oracle, const int32_t *tokens,
                                      int32_t n, double *logits);

/*
 * Teacher forcing of n_seqs sequences in one pass: tokens[s][0..lens[s]),
 * whose lengths add up to at most max_len, laid end to end. Each layer's
 * products go over all their positions together (a mapped model's layer is
 * decoded once for all of them, and a weight row is read once for a block
 * of positions of any of the sequences), attention within each sequence.
 * logits (sum of lens, vocab): the rows of sequence s follow those of
 * sequence s - 1, each row the double assay_oracle_logits computes for its
 * sequence alone, bit for bit. ASSAY_ERR_INVALID for n_seqs < 1, a length
 * below 1, lengths adding up to more than max_len or a token outside the
 * vocabulary; ASSAY_ERR_PARSE as above.
 */
enum assay_status assay_oracle_logits_batch(struct assay_oracle *oracle, int32_t n_seqs,
                                            const int32_t *const *tokens, const int32_t *lens,
                                            double *logits);

/*
 * assay_oracle_logits_batch's rows from[s]..lens[s] of each sequence s
 * (0 <= from[s] < lens[s]) and no others, packed in the same order, bit
 * for bit the same doubles: the final norm and output projection run only
 * on those rows (teacher forcing wants the rows after a prompt; the prompt's
 * own rows would cost a vocabulary's products each). logits (sum of
 * lens[s] - from[s], vocab). ASSAY_ERR_INVALID as above or for a from[s]
 * outside its sequence.
 */
enum assay_status assay_oracle_logits_batch_from(struct assay_oracle *oracle, int32_t n_seqs,
                                                 const int32_t *const *tokens,
                                                 const int32_t *lens, const int32_t *from,
                                                 double *logits);

/* The logits of the token following tokens[0..n) (one row of the above). */
enum assay_status assay_oracle_next_logits(struct assay_oracle *oracle, const int32_t *tokens,
                                           int32_t n, double *logits);

/* How close a processed distribution came to a decision boundary, so that
 * a disagreement there can be told from a bug. */
struct assay_oracle_dist_info {
    int32_t n_kept;         /* tokens with probability > 0 */
    double top_p_margin;    /* distance of the top-p cut from top_p in mass; +inf if unused */
    double top_k_gap;       /* logit gap between the k-th and (k+1)-th token; +inf if unused */
    double greedy_gap;      /* temperature 0: logit gap between first and second */
};

/*
 * The exact processed next-token distribution of `logits` under s and the
 * documented order (core/request.h): p (vocab) sums to 1 with removed
 * tokens exactly 0. Tokens are ranked by descending logit, equal logits by
 * ascending id, and top-k and top-p cut that order, so an exact tie at a
 * cut keeps the lower id and removes the higher (the contract's tie rule;
 * top_k_gap is then 0). info may be NULL. ASSAY_ERR_INVALID for bad
 * sampling parameters.
 */
enum assay_status assay_oracle_distribution(const double *logits, int32_t vocab,
                                            const struct assay_sampling *s,
                                            enum assay_sampling_order order, double *p,
                                            struct assay_oracle_dist_info *info);

#endif
