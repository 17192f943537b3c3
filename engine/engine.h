/*
 * engine.h - the bundled CPU engine: TinyGPT served with continuous
 * batching, a paged KV cache with a block manager, prefix caching, chunked
 * prefill and speculative decoding, each switchable on its own.
 *
 * The engine is the default system under test. It is driven like any
 * engine (add_request, has_work, step, abort) and adapters/bundled.c wraps
 * it in the adapter vtable. Every optimisation can be turned off so that
 * each one, and each combination, can be checked against the oracle:
 *
 *   kv_cache = false   recompute every token of every sequence each step
 *   batching = false   one request at a time
 *   paged = false      one contiguous KV buffer per running request
 *   prefix_cache       reuse full blocks of earlier requests (needs paged)
 *   chunk > 0          chunked prefill: at most `chunk` tokens per step
 *   spec_k > 0         speculative decoding with the draft model
 *
 * When the block pool runs out, the newest running request is preempted by
 * recompute: its blocks are freed and it goes back to the front of the
 * queue with the tokens it has delivered kept; it is not delivered twice.
 *
 * All memory is allocated by assay_engine_init; add_request and step
 * allocate nothing. Lifetime: assay_engine_init / assay_engine_free.
 */
#ifndef ASSAY_ENGINE_H
#define ASSAY_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/request.h"
#include "../core/status.h"
#include "isa.h"
#include "model.h"
#include "numerics.h"

struct assay_engine;

/* Default of blas_rows, the fewest rows of a product that OpenBLAS takes
 * when the engine is not batch invariant: none. The engine's own product
 * was measured faster than OpenBLAS at every TinyGPT shape, decode and
 * prefill, under every OpenBLAS kernel family of an AVX-512 machine
 * (README, "Speed"); blas_rows=N hands products of N rows or more to
 * OpenBLAS, which a CPU without AVX2 may want for long prefills. */
#define ASSAY_ENGINE_BLAS_ROWS 0

struct assay_engine_params {
    const struct assay_model *model; /* borrowed; must outlive the engine */
    const struct assay_model *draft; /* borrowed; required when spec_k > 0 */
    bool kv_cache;
    bool batching;
    bool paged;
    bool prefix_cache;
    int32_t block_size;     /* positions per block (paged) */
    int32_t n_blocks;       /* blocks in the pool (paged) */
    int32_t chunk;          /* chunked prefill budget per step; 0 = off */
    int32_t spec_k;         /* draft length; 0 = off */
    int32_t max_batch;      /* running requests at once */
    int32_t max_requests;   /* live requests (waiting + running) */
    int32_t max_seq_len;    /* longest prompt + max_tokens; <= model n_ctx */
    int32_t max_step_tokens; /* rows per step without chunked prefill */
    bool batch_invariant;   /* the engine's own fixed-order products (engine/gemm.h): a
                               row's logits never depend on its batch, the threads or
                               the BLAS kernel; else OpenBLAS */
    int32_t blas_rows;      /* not batch invariant: products of this many rows or more go to
                               OpenBLAS, fewer to the engine's own product; 0: never
                               OpenBLAS, 1: always [ASSAY_ENGINE_BLAS_ROWS: 0] */
    enum assay_isa isa;     /* the engine's own loops (engine/isa.h); AUTO: the CPU's best */
    enum assay_act_mode act;    /* EXACT [default]; GGML: each product's inputs rounded as
                                   llama.cpp's CPU backend rounds them for the weights' ggml
                                   types (engine/forward.h, numerics.h) */
    enum assay_kv_type kv_type; /* F32 [default]; F16: keys and values rounded to fp16 */
    bool flash_attn;            /* with kv_type F16: ggml's flash-attention numerics, else its
                                   mul_mat attention's [off] */
    int32_t threads;        /* 2: a helper thread takes a share of each product (OpenBLAS
                               held to one thread during a step), of attention and of
                               SwiGLU; 1: the caller's thread (OpenBLAS threads as it
                               sees fit) */
    enum assay_sampling_order sampling_order;
    uint64_t seed;          /* seeds for requests that bring none */
    int mutant;             /* enum assay_mutant; mutant builds only */
};

/* Defaults: every optimisation on but speculation (kv cache, batching,
 * paged KV of 16-position blocks, prefix caching, chunked prefill of 256),
 * max_batch 64, max_requests 1024, max_seq_len = the model's context,
 * n_blocks enough for max_batch sequences of 512 positions. */
struct assay_engine_params assay_engine_default_params(const struct assay_model *model);

/*
 * Validate the parameters (diag names the parameter and what was expected)
 * and allocate everything the engine will ever use. Returns
 * ASSAY_ERR_INVALID for inconsistent parameters (for example prefix caching
 * without paging, a draft whose vocabulary differs, a mutant in a build
 * without mutants: ASSAY_ERR_UNSUPPORTED; act GGML with a model whose
 * weight types it cannot emulate: ASSAY_ERR_UNSUPPORTED, diag naming the
 * tensors; a mapped model, engine/model.h: ASSAY_ERR_UNSUPPORTED),
 * ASSAY_ERR_NOMEM. On failure *out is NULL.
 */
enum assay_status assay_engine_init(struct assay_engine **out, const struct assay_engine_params *p,
                                    struct assay_diag *diag);
void assay_engine_free(struct assay_engine *engine);

/* Queue a request. Statuses as in adapters/adapter.h; on error the engine
 * is unchanged and assay_engine_last_error says why. */
enum assay_status assay_engine_add_request(struct assay_engine *engine,
                                           const struct assay_request *req);

bool assay_engine_has_work(const struct assay_engine *engine);

/* One scheduling iteration and one batched forward pass (plus the draft's
 * passes when speculating). Events are borrowed until the next call. */
enum assay_status assay_engine_step(struct assay_engine *engine, const struct assay_event **events,
                                    size_t *n_events);

/* Abort a live request: its blocks return at once; its FINISH (ABORT)
 * event comes with the next step. */
enum assay_status assay_engine_abort(struct assay_engine *engine, uint64_t request_id);

/* Why the last call failed, or "" (borrowed for the engine's lifetime). */
const char *assay_engine_last_error(const struct assay_engine *engine);

/* The parameters in the engine-spec syntax ("bundled:kv=paged,block=16,...")
 * (borrowed for the engine's lifetime). */
const char *assay_engine_spec(const struct assay_engine *engine);

/* Total bytes allocated at init. */
int64_t assay_engine_bytes(const struct assay_engine *engine);

/* Capabilities (see adapters/adapter.h). block_stats and block_audit return
 * ASSAY_ERR_UNSUPPORTED when the KV cache is not paged. */
enum assay_status assay_engine_block_stats(struct assay_engine *engine,
                                           struct assay_block_stats *out);
enum assay_status assay_engine_block_audit(struct assay_engine *engine,
                                           struct assay_block_audit *out);
void assay_engine_set_logits_sink(struct assay_engine *engine,
                                  void (*sink)(void *ctx, uint64_t request_id, int32_t index,
                                               const float *logits, int32_t vocab),
                                  void *ctx);
enum assay_status assay_engine_check_invariants(struct assay_engine *engine, char *msg,
                                                size_t size);

/*
 * What computes the engine's numbers, for stamps. Products of blas_rows
 * rows or more go to OpenBLAS (whose kernel core/blas.h names), the rest
 * to the engine's own fixed-order product (engine/gemm.h); blas_rows is 0
 * when no product reaches OpenBLAS (batch_invariant, or blas_rows=0 in
 * the parameters). `isa` is the instruction set of the engine's own loops,
 * resolved ("generic", "avx2", "avx512"); `attention` the copy of
 * attention and SwiGLU it selects ("x86-64-v3": AVX2 with fused
 * multiply-add; "generic"). Static strings.
 */
struct assay_engine_numerics {
    bool batch_invariant;
    int32_t blas_rows;
    const char *isa;
    const char *attention;
    const char *act;     /* "exact" or "ggml" */
    const char *kv_type; /* "f32" or "f16" */
    bool flash_attn;
    int32_t matrices;  /* of the products: four a layer and the LM head */
    int32_t quantized; /* of them, read by products of few rows in their file's integer format */
    int64_t one_row_bytes; /* weights a decode step of one stream reads */
};
void assay_engine_get_numerics(const struct assay_engine *engine, struct assay_engine_numerics *out);

/* The parameters the engine runs with (after defaults were resolved). */
const struct assay_engine_params *assay_engine_params(const struct assay_engine *engine);

#endif
