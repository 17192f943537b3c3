/*
 * engine_internal.h - what the two files of the bundled engine share (not
 * an interface: include engine.h): its state. engine_init.c checks the
 * parameters, allocates everything and frees it; engine.c takes requests,
 * schedules them and runs each step.
 */
#ifndef ASSAY_ENGINE_INTERNAL_H
#define ASSAY_ENGINE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "block.h"
#include "engine.h"
#include "forward.h"
#include "sampler.h"
#include "worker.h"

enum seq_state { SEQ_FREE = 0, SEQ_WAITING, SEQ_RUNNING, SEQ_ABORTED };

struct seq {
    uint64_t id;
    uint64_t order;         /* arrival order; lower is older */
    enum seq_state state;
    int32_t *tokens;        /* (max_seq_len) prompt, generated, then drafts */
    int32_t n_prompt;
    int32_t n_tokens;       /* prompt + generated */
    int32_t max_tokens;
    int32_t stop_token;
    int32_t n_delivered;    /* generated tokens delivered; kept across preemption */
    int32_t n_computed;     /* tokens whose KV the target holds */
    int32_t *blocks;        /* (max_blocks_per_seq) block table */
    int32_t n_blocks;
    int32_t n_hashed;       /* leading blocks offered to the prefix cache */
    uint64_t last_hash;     /* chained hash of block n_hashed - 1 */
    int32_t run_slot;       /* while running: draft KV slot, contiguous block */
    int32_t draft_computed; /* tokens whose KV the draft holds */
    int32_t n_chunks;       /* prefill chunks since admission */
    int32_t draw_skew;      /* 0; added to the output index of every draw by
                               the planted bugs seed-restart-after-preempt and
                               partial-prefill-advances-seed */
    struct assay_sampling sampling;
    uint64_t seed;
    enum assay_finish_reason finish;
};

struct plan {
    int32_t seq;
    int32_t n_new;   /* target rows */
    int32_t k_eff;   /* drafted tokens this round */
    bool decode;     /* ends by sampling */
    int32_t row0;    /* first target row */
    int32_t out0;    /* first logits row */
    int32_t d_rows;  /* draft catch-up rows in pass 1 */
    int32_t d_out;   /* draft logits row of pass 1, or -1 */
};

struct assay_engine {
    struct assay_engine_params p;
    struct assay_model_config cfg;
    struct assay_forward *fwd;
    struct assay_forward *dfwd;
    struct assay_worker *worker; /* NULL unless threads = 2 */
    struct assay_block_manager *bm;
    struct assay_sampler *sampler;
    int32_t block_size;
    int32_t max_blocks_per_seq;
    int32_t max_rows;
    int32_t max_out;
    int32_t max_running;
    int32_t spec_rows_left; /* this step: draft rows speculating sequences may still take */

    struct seq *seqs;       /* (max_requests) */
    int32_t *free_seqs;     /* stack */
    int32_t n_free_seqs;
    int32_t *waiting;       /* ring of seq indices, oldest at head */
    int32_t wait_head;
    int32_t n_waiting;
    int32_t *running;       /* seq indices by arrival order */
    int32_t n_running;
    int32_t *free_slots;    /* run slots, stack */
    int32_t n_free_slots;
    uint64_t *map_key;      /* request id -> seq, open addressing */
    int32_t *map_val;
    int32_t map_size;
    int32_t *pending;       /* aborted seqs whose FINISH is due */
    int32_t n_pending;

    struct assay_event *events;
    size_t n_events;
    size_t cap_events;

    struct plan *plans;
    int32_t n_plans;
    int32_t *rows;          /* target tokens of the pass */
    struct assay_forward_seq *fseqs;
    int32_t *out_rows;
    int32_t *d_rows;        /* draft tokens of a pass */
    struct assay_forward_seq *d_fseqs;
    int32_t *d_out_rows;
    int32_t *d_out_plan;    /* plan of each draft logits row */
    int32_t *slot_table;    /* (max_batch) slot s -> block s, for the draft */
    double *p_dist;         /* (max_out, vocab) target distributions */
    double *q_dist;         /* (max_batch * spec_k, vocab) draft distributions */
    double *residual;       /* (vocab) */
    uint64_t *audit_ids;    /* (max_batch) block audit of the running */
    int32_t *audit_nb;      /* (4, max_batch) blocks, prompt, tokens, computed */
    const int32_t **audit_tables; /* (2, max_batch) block tables, then tokens */

    void (*sink)(void *ctx, uint64_t id, int32_t index, const float *logits, int32_t vocab);
    void *sink_ctx;
    uint64_t n_arrivals;
    uint64_t n_steps;
    bool shared_stream;     /* mutant builds: this step draws from one stream */
    uint64_t shared_draws;  /* mutant builds: draws taken from that stream */
    int64_t bytes;
    char last_error[256];
    char spec[320];
};

#endif
