/*
 * engine_init.c - making and freeing the bundled engine (engine.h): the
 * default parameters, their check with a diagnostic for each bad one, the
 * spec string that names the configuration, and every allocation the
 * engine will ever make, sized from the parameters (engine_internal.h).
 * Each runs once per engine; the step loop (engine.c) allocates nothing.
 */
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/mutant.h"
#include "engine.h"
#include "engine_internal.h"

struct assay_engine_params assay_engine_default_params(const struct assay_model *model)
{
    struct assay_engine_params p;
    memset(&p, 0, sizeof p);
    p.model = model;
    p.kv_cache = true;
    p.batching = true;
    p.paged = true;
    p.prefix_cache = true;
    p.block_size = 16;
    p.max_batch = 64;
    p.n_blocks = p.max_batch * 512 / p.block_size;
    p.chunk = 256;
    p.spec_k = 0;
    p.max_requests = 1024;
    p.max_seq_len = model != NULL ? model->cfg.n_ctx : 2048;
    p.max_step_tokens = 2048;
    p.sampling_order = ASSAY_SAMPLING_JOINT;
    p.seed = 0x5eed;
    p.threads = 2;
    p.blas_rows = ASSAY_ENGINE_BLAS_ROWS;
    return p;
}

static enum assay_status bad_param(struct assay_diag *diag, const char *name, const char *expected,
                                   long long got)
{
    assay_diag_set(diag, NULL, name, expected, "%lld", got);
    return ASSAY_ERR_INVALID;
}

static enum assay_status validate_params(const struct assay_engine_params *p,
                                         struct assay_diag *diag)
{
    if (p->model == NULL) {
        assay_diag_set(diag, NULL, "model", "a model", "none");
        return ASSAY_ERR_INVALID;
    }
    if (p->model->mapped) {
        /* every step would decode every layer of the file again */
        assay_diag_set(diag, NULL, "model", "a resident model (assay_model_load_gguf)",
                       "a mapped model");
        return ASSAY_ERR_UNSUPPORTED;
    }
    const struct assay_model_config *c = &p->model->cfg;
    if (p->max_batch < 1 || p->max_batch > 4096) {
        return bad_param(diag, "batch", "1..4096 running requests", p->max_batch);
    }
    if (p->max_requests < p->max_batch || p->max_requests > (1 << 20)) {
        return bad_param(diag, "max_requests", "at least batch and at most 2^20", p->max_requests);
    }
    if (p->max_seq_len < 2 || p->max_seq_len > c->n_ctx) {
        char expected[64];
        snprintf(expected, sizeof expected, "2..%d (the model's context)", (int)c->n_ctx);
        return bad_param(diag, "max_seq_len", expected, p->max_seq_len);
    }
    if (p->max_step_tokens < 1 || p->max_step_tokens > (1 << 16)) {
        return bad_param(diag, "max_step_tokens", "1..65536", p->max_step_tokens);
    }
    if (p->paged) {
        if (p->block_size < 1 || p->block_size > 1024) {
            return bad_param(diag, "block", "a block size in 1..1024", p->block_size);
        }
        if (p->n_blocks < 1 || (int64_t)p->n_blocks * p->block_size > (1LL << 26)) {
            return bad_param(diag, "blocks", "a pool of 1..2^26 positions", p->n_blocks);
        }
    }
    if (p->prefix_cache && !p->paged) {
        assay_diag_set(diag, NULL, "prefix", "prefix=off when kv is not paged",
                       "prefix=on with kv=contiguous");
        return ASSAY_ERR_INVALID;
    }
    if (!p->kv_cache && (p->prefix_cache || p->chunk > 0)) {
        assay_diag_set(diag, NULL, "kv", "kv=on (or prefix=off and chunk=0) ",
                       "kv=off with %s", p->prefix_cache ? "prefix=on" : "chunked prefill");
        return ASSAY_ERR_INVALID;
    }
    if (p->chunk < 0 || p->chunk > (1 << 16)) {
        return bad_param(diag, "chunk", "0 (off) or a budget in 1..65536", p->chunk);
    }
    if (p->threads < 1 || p->threads > 2) {
        return bad_param(diag, "threads", "1 or 2", p->threads);
    }
    if (p->blas_rows < 0 || p->blas_rows > (1 << 16)) {
        return bad_param(diag, "blas_rows", "0 (never OpenBLAS) or 1..65536 rows", p->blas_rows);
    }
    if ((int)p->isa < 0 || p->isa >= ASSAY_ISA_COUNT) {
        return bad_param(diag, "isa", "auto, generic, avx2 or avx512", (long long)p->isa);
    }
    if (!assay_isa_supported(p->isa)) {
        assay_diag_set(diag, NULL, "isa", "an instruction set this CPU runs (auto picks one)",
                       "%s", assay_isa_name(p->isa));
        return ASSAY_ERR_UNSUPPORTED;
    }
    if (p->act != ASSAY_ACT_MODE_EXACT && p->act != ASSAY_ACT_MODE_GGML) {
        return bad_param(diag, "act", "exact or ggml", (long long)p->act);
    }
    if (p->kv_type != ASSAY_KV_TYPE_F32 && p->kv_type != ASSAY_KV_TYPE_F16) {
        return bad_param(diag, "kv_type", "f32 or f16", (long long)p->kv_type);
    }
    if (p->act == ASSAY_ACT_MODE_GGML) {
        enum assay_status st = assay_forward_check_numerics(p->model, diag);
        if (st == ASSAY_OK && p->spec_k > 0 && p->draft != NULL) {
            st = assay_forward_check_numerics(p->draft, diag);
        }
        if (st != ASSAY_OK) {
            return st;
        }
    }
    if (p->spec_k < 0 || p->spec_k > 32) {
        return bad_param(diag, "spec", "a draft length in 0..32", p->spec_k);
    }
    if (p->spec_k > 0) {
        if (p->draft == NULL) {
            assay_diag_set(diag, NULL, "draft", "a draft model when spec > 0", "none");
            return ASSAY_ERR_INVALID;
        }
        if (p->draft->cfg.vocab != c->vocab || p->draft->cfg.n_ctx < p->max_seq_len) {
            assay_diag_set(diag, NULL, "draft", "the target's vocabulary and context",
                           "vocab %d, context %d", (int)p->draft->cfg.vocab,
                           (int)p->draft->cfg.n_ctx);
            return ASSAY_ERR_INVALID;
        }
    }
    if (p->sampling_order != ASSAY_SAMPLING_JOINT &&
        p->sampling_order != ASSAY_SAMPLING_SEQUENTIAL) {
        return bad_param(diag, "order", "joint or sequential", (long long)p->sampling_order);
    }
    if (p->mutant != ASSAY_MUTANT_NONE) {
        if (!assay_mutants_compiled()) {
            const struct assay_mutant_info *m = assay_mutant_info((enum assay_mutant)p->mutant);
            assay_diag_set(diag, NULL, "mutant",
                           "no planted bug (they exist only in the test build's assay-mutants)",
                           "%s", m != NULL ? m->name : "an unknown one");
            return ASSAY_ERR_UNSUPPORTED;
        }
        if (assay_mutant_info((enum assay_mutant)p->mutant) == NULL) {
            return bad_param(diag, "mutant", "a mutant of the catalog", p->mutant);
        }
    }
    return ASSAY_OK;
}

static void *eng_calloc(struct assay_engine *e, size_t n, size_t size)
{
    e->bytes += (int64_t)(n * size);
    return assay_calloc(n, size);
}

static void make_spec(struct assay_engine *e)
{
    const struct assay_engine_params *p = &e->p;
    int n = snprintf(e->spec, sizeof e->spec, "bundled:model=%s,kv=%s", p->model->cfg.name,
                     !p->kv_cache ? "off" : p->paged ? "paged" : "contiguous");
    if (p->paged) {
        n += snprintf(e->spec + n, sizeof e->spec - (size_t)n, ",block=%d,blocks=%d",
                      (int)p->block_size, (int)p->n_blocks);
    }
    n += snprintf(e->spec + n, sizeof e->spec - (size_t)n,
                  ",prefix=%s,chunk=%d,batch=%d,spec=%d,invariant=%s,order=%s,threads=%d",
                  p->prefix_cache ? "on" : "off", (int)p->chunk,
                  p->batching ? (int)p->max_batch : 1, (int)p->spec_k,
                  p->batch_invariant ? "on" : "off",
                  p->sampling_order == ASSAY_SAMPLING_JOINT ? "joint" : "sequential",
                  (int)p->threads);
    if (!p->batch_invariant && p->blas_rows != ASSAY_ENGINE_BLAS_ROWS) {
        n += snprintf(e->spec + n, sizeof e->spec - (size_t)n, ",blas_rows=%d", (int)p->blas_rows);
    }
    if (p->isa != ASSAY_ISA_AUTO) {
        n += snprintf(e->spec + n, sizeof e->spec - (size_t)n, ",isa=%s", assay_isa_name(p->isa));
    }
    if (p->act != ASSAY_ACT_MODE_EXACT) {
        n += snprintf(e->spec + n, sizeof e->spec - (size_t)n, ",act=%s",
                      assay_numerics_mode_name(p->act));
    }
    if (p->kv_type != ASSAY_KV_TYPE_F32) {
        n += snprintf(e->spec + n, sizeof e->spec - (size_t)n, ",kv_type=%s",
                      assay_numerics_kv_name(p->kv_type));
    }
    if (p->flash_attn) {
        n += snprintf(e->spec + n, sizeof e->spec - (size_t)n, ",fa=on");
    }
    if (p->spec_k > 0) {
        n += snprintf(e->spec + n, sizeof e->spec - (size_t)n, ",draft=%s", p->draft->cfg.name);
    }
    if (p->mutant != ASSAY_MUTANT_NONE) {
        snprintf(e->spec + n, sizeof e->spec - (size_t)n, ",mutant=%s",
                 assay_mutant_info((enum assay_mutant)p->mutant)->name);
    }
}

enum assay_status assay_engine_init(struct assay_engine **out, const struct assay_engine_params *p,
                                    struct assay_diag *diag)
{
    *out = NULL;
    enum assay_status st = validate_params(p, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    struct assay_engine *e = assay_calloc(1, sizeof *e);
    if (e == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    e->p = *p;
    e->cfg = p->model->cfg;
    e->max_running = p->batching ? p->max_batch : 1;
    int32_t k = p->spec_k;
    int32_t seq_len = p->max_seq_len;
    int32_t n_blocks = p->paged ? p->n_blocks : e->max_running;
    e->block_size = p->paged ? p->block_size : seq_len;
    e->max_blocks_per_seq = (seq_len + e->block_size - 1) / e->block_size;
    int32_t budget = p->chunk > 0 ? p->chunk : p->max_step_tokens;
    e->max_rows = (budget > seq_len ? budget : seq_len) + e->max_running * (k + 1);
    e->max_out = e->max_running * (k + 1);
    make_spec(e);

    if (p->threads > 1) {
        /* No helper thread is no error: the products then run unsplit. */
        if (assay_worker_init(&e->worker) == ASSAY_ERR_NOMEM) {
            assay_engine_free(e);
            return ASSAY_ERR_NOMEM;
        }
    }
    struct assay_forward_params fp = {
        .model = p->model,
        .n_blocks = n_blocks,
        .block_size = e->block_size,
        .max_rows = e->max_rows,
        .max_out = e->max_out,
        .max_seq_len = seq_len,
        .batch_invariant = p->batch_invariant,
        .blas_rows = p->blas_rows,
        .isa = p->isa,
        .act = p->act,
        .kv_type = p->kv_type,
        .flash_attn = p->flash_attn,
        .mutant = p->mutant,
        /* decode steps of a few streams read a third of the bytes */
        .integer_weights = true,
        .worker = e->worker,
    };
    st = assay_forward_init(&e->fwd, &fp);
    if (st == ASSAY_OK && k > 0) {
        struct assay_forward_params dp = fp;
        dp.model = p->draft;
        dp.n_blocks = e->max_running;
        dp.block_size = seq_len;
        /* The draft's rows of a step: catch-up of non-speculating sequences
         * (at most max_rows) and the speculating ones' (spec_rows_left). */
        dp.max_rows = 2 * e->max_rows + e->max_running * (k + 1);
        dp.max_out = e->max_running;
        dp.worker = NULL; /* the draft's products are too small to split */
        st = assay_forward_init(&e->dfwd, &dp);
    }
    if (st == ASSAY_OK) {
        st = assay_block_manager_init(&e->bm, n_blocks, e->block_size, p->prefix_cache, p->mutant);
    }
    if (st == ASSAY_OK) {
        st = assay_sampler_init(&e->sampler, e->cfg.vocab, p->mutant);
    }
    if (st != ASSAY_OK) {
        assay_engine_free(e);
        return st;
    }
    e->bytes += assay_forward_bytes(e->fwd) + (e->dfwd != NULL ? assay_forward_bytes(e->dfwd) : 0);

    size_t nr = (size_t)p->max_requests, nb = (size_t)e->max_running, v = (size_t)e->cfg.vocab;
    e->map_size = 1;
    while (e->map_size < 2 * p->max_requests) {
        e->map_size *= 2;
    }
    e->cap_events = nr + nb * (size_t)(k + 3);
    if (assay_mutants_compiled()) {
        e->cap_events += nb * (size_t)seq_len; /* room for a planted redelivery */
    }
    e->seqs = eng_calloc(e, nr, sizeof *e->seqs);
    int32_t *token_store = eng_calloc(e, nr * (size_t)seq_len, sizeof(int32_t));
    int32_t *block_store = eng_calloc(e, nr * (size_t)e->max_blocks_per_seq, sizeof(int32_t));
    e->free_seqs = eng_calloc(e, nr, sizeof(int32_t));
    e->waiting = eng_calloc(e, nr, sizeof(int32_t));
    e->running = eng_calloc(e, nb, sizeof(int32_t));
    e->free_slots = eng_calloc(e, nb, sizeof(int32_t));
    e->map_key = eng_calloc(e, (size_t)e->map_size, sizeof(uint64_t));
    e->map_val = eng_calloc(e, (size_t)e->map_size, sizeof(int32_t));
    e->pending = eng_calloc(e, nr, sizeof(int32_t));
    e->events = eng_calloc(e, e->cap_events, sizeof *e->events);
    e->plans = eng_calloc(e, nb, sizeof *e->plans);
    e->rows = eng_calloc(e, (size_t)e->max_rows, sizeof(int32_t));
    e->fseqs = eng_calloc(e, nb, sizeof *e->fseqs);
    e->out_rows = eng_calloc(e, (size_t)e->max_out, sizeof(int32_t));
    e->d_rows = eng_calloc(e, (size_t)(2 * e->max_rows + e->max_running * (k + 1)), sizeof(int32_t));
    e->d_fseqs = eng_calloc(e, nb, sizeof *e->d_fseqs);
    e->d_out_rows = eng_calloc(e, nb, sizeof(int32_t));
    e->d_out_plan = eng_calloc(e, nb, sizeof(int32_t));
    e->slot_table = eng_calloc(e, nb, sizeof(int32_t));
    e->p_dist = eng_calloc(e, (size_t)e->max_out * v, sizeof(double));
    e->q_dist = eng_calloc(e, nb * (size_t)(k > 0 ? k : 1) * v, sizeof(double));
    e->residual = eng_calloc(e, v, sizeof(double));
    e->audit_ids = eng_calloc(e, nb, sizeof(uint64_t));
    e->audit_nb = eng_calloc(e, 4 * nb, sizeof(int32_t));
    e->audit_tables = eng_calloc(e, 2 * nb, sizeof(int32_t *));
    /* The token and block stores belong to seqs[0]; free() finds them there. */
    if (e->seqs != NULL) {
        e->seqs[0].tokens = token_store;
        e->seqs[0].blocks = block_store;
    }
    if (e->seqs == NULL || token_store == NULL || block_store == NULL || e->free_seqs == NULL ||
        e->waiting == NULL || e->running == NULL || e->free_slots == NULL ||
        e->map_key == NULL || e->map_val == NULL || e->pending == NULL || e->events == NULL ||
        e->plans == NULL || e->rows == NULL || e->fseqs == NULL || e->out_rows == NULL ||
        e->d_rows == NULL || e->d_fseqs == NULL || e->d_out_rows == NULL ||
        e->d_out_plan == NULL || e->slot_table == NULL || e->p_dist == NULL ||
        e->q_dist == NULL || e->residual == NULL || e->audit_ids == NULL ||
        e->audit_nb == NULL || e->audit_tables == NULL) {
        if (e->seqs == NULL) {
            assay_free(token_store);
            assay_free(block_store);
        }
        assay_engine_free(e);
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t i = 0; i < p->max_requests; i++) {
        e->seqs[i].tokens = token_store + (int64_t)i * seq_len;
        e->seqs[i].blocks = block_store + (int64_t)i * e->max_blocks_per_seq;
        e->free_seqs[i] = p->max_requests - 1 - i;
    }
    e->n_free_seqs = p->max_requests;
    for (int32_t s = 0; s < e->max_running; s++) {
        e->free_slots[s] = e->max_running - 1 - s;
        e->slot_table[s] = s;
    }
    e->n_free_slots = e->max_running;
    for (int32_t i = 0; i < e->map_size; i++) {
        e->map_val[i] = -1;
    }
    *out = e;
    return ASSAY_OK;
}

void assay_engine_free(struct assay_engine *e)
{
    if (e == NULL) {
        return;
    }
    assay_forward_free(e->fwd);
    assay_forward_free(e->dfwd);
    assay_worker_free(e->worker);
    assay_block_manager_free(e->bm);
    assay_sampler_free(e->sampler);
    if (e->seqs != NULL) {
        assay_free(e->seqs[0].tokens);
        assay_free(e->seqs[0].blocks);
    }
    void *bufs[] = {e->seqs,   e->free_seqs, e->waiting,   e->running,    e->free_slots,
                    e->map_key, e->map_val,  e->pending,   e->events,     e->plans,
                    e->rows,   e->fseqs,     e->out_rows,  e->d_rows,     e->d_fseqs,
                    e->d_out_rows, e->d_out_plan, e->slot_table, e->p_dist, e->q_dist,
                    e->residual, e->audit_ids, e->audit_nb, (void *)e->audit_tables};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        assay_free(bufs[i]);
    }
    assay_free(e);
}
