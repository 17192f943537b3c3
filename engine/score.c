/*
 * score.c - teacher-forced logits of the bundled engine under a chosen
 * arithmetic (score.h): assay_score_init builds a forward pass over a
 * contiguous KV buffer (optionally with the helper thread), assay_score_rows
 * returns one row of logits per continuation token, and assay_score_free
 * releases it. The audit's numerics budget (checks/audit_budget.c) scores
 * a served model's sequences with it.
 */
#include "score.h"

#include "../core/alloc.h"
#include "../core/mutant.h"
#include "forward.h"
#include "worker.h"

struct assay_score {
    struct assay_forward *fwd;
    struct assay_worker *worker; /* NULL unless two_threads */
    int32_t max_len, vocab;
    int32_t *tokens;   /* (max_len) */
    int32_t *out_rows; /* (max_len) */
};

struct assay_score_params assay_score_default_params(const struct assay_model *model,
                                                     int32_t max_len)
{
    struct assay_score_params p = {0};
    p.model = model;
    p.max_len = max_len;
    p.act = ASSAY_ACT_MODE_EXACT;
    p.kv_type = ASSAY_KV_TYPE_F32;
    p.isa = ASSAY_ISA_AUTO;
    p.mutant = ASSAY_MUTANT_NONE;
    return p;
}

static enum assay_status check_params(const struct assay_score_params *p, struct assay_diag *diag)
{
    if (p->model == NULL) {
        assay_diag_set(diag, NULL, "model", "a model", "none");
        return ASSAY_ERR_INVALID;
    }
    if (p->max_len < 1 || p->max_len > p->model->cfg.n_ctx) {
        assay_diag_set(diag, NULL, "max_len", "1..the model's context", "%d", (int)p->max_len);
        return ASSAY_ERR_INVALID;
    }
    if (p->act != ASSAY_ACT_MODE_EXACT && p->act != ASSAY_ACT_MODE_GGML) {
        assay_diag_set(diag, NULL, "act", "exact or ggml", "%d", (int)p->act);
        return ASSAY_ERR_INVALID;
    }
    if (p->kv_type != ASSAY_KV_TYPE_F32 && p->kv_type != ASSAY_KV_TYPE_F16) {
        assay_diag_set(diag, NULL, "kv_type", "f32 or f16", "%d", (int)p->kv_type);
        return ASSAY_ERR_INVALID;
    }
    if (!assay_isa_supported(p->isa)) {
        assay_diag_set(diag, NULL, "isa", "an instruction set this CPU runs", "%s",
                       assay_isa_name(p->isa));
        return ASSAY_ERR_UNSUPPORTED;
    }
    if (p->mutant != ASSAY_MUTANT_NONE &&
        (!assay_mutants_compiled() || assay_mutant_info((enum assay_mutant)p->mutant) == NULL)) {
        assay_diag_set(diag, NULL, "mutant", "a mutant of the catalog, in a build with mutants",
                       "%d", p->mutant);
        return ASSAY_ERR_UNSUPPORTED;
    }
    if (p->act == ASSAY_ACT_MODE_GGML) {
        return assay_forward_check_numerics(p->model, diag);
    }
    return ASSAY_OK;
}

enum assay_status assay_score_init(struct assay_score **out, const struct assay_score_params *p,
                                   struct assay_diag *diag)
{
    *out = NULL;
    enum assay_status st = check_params(p, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    struct assay_score *sc = assay_calloc(1, sizeof *sc);
    if (sc == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    sc->max_len = p->max_len;
    sc->vocab = p->model->cfg.vocab;
    sc->tokens = assay_calloc((size_t)p->max_len, sizeof(int32_t));
    sc->out_rows = assay_calloc((size_t)p->max_len, sizeof(int32_t));
    if (p->two_threads) {
        st = assay_worker_init(&sc->worker);
        if (st != ASSAY_OK) {
            assay_score_free(sc);
            return st;
        }
    }
    /* One contiguous block of max_len positions; every product the
     * engine's own, so the rows are those of any batching. */
    struct assay_forward_params fp = {
        .model = p->model,
        .n_blocks = 1,
        .block_size = p->max_len,
        .max_rows = p->max_len,
        .max_out = p->max_len,
        .max_seq_len = p->max_len,
        .batch_invariant = true,
        .blas_rows = 0,
        .isa = p->isa,
        .act = p->act,
        .kv_type = p->kv_type,
        .flash_attn = p->flash_attn,
        .f16_acc = p->f16_acc,
        .mutant = p->mutant,
        .worker = sc->worker,
    };
    st = sc->tokens == NULL || sc->out_rows == NULL ? ASSAY_ERR_NOMEM
                                                    : assay_forward_init(&sc->fwd, &fp);
    if (st != ASSAY_OK) {
        assay_score_free(sc);
        return st;
    }
    *out = sc;
    return ASSAY_OK;
}

void assay_score_set_f16_acc(struct assay_score *sc, bool on)
{
    assay_forward_set_f16_acc(sc->fwd, on);
}

void assay_score_free(struct assay_score *sc)
{
    if (sc == NULL) {
        return;
    }
    assay_forward_free(sc->fwd);
    assay_worker_free(sc->worker);
    assay_free(sc->tokens);
    assay_free(sc->out_rows);
    assay_free(sc);
}

enum assay_status assay_score_rows(struct assay_score *sc, const int32_t *prompt,
                                   int32_t prompt_len, const int32_t *cont, int32_t n_cont,
                                   const float **rows)
{
    *rows = NULL;
    if (prompt_len < 1 || n_cont < 1 || (int64_t)prompt_len + n_cont - 1 > sc->max_len) {
        return ASSAY_ERR_INVALID;
    }
    int32_t n = prompt_len + n_cont - 1;
    for (int32_t i = 0; i < n; i++) {
        int32_t t = i < prompt_len ? prompt[i] : cont[i - prompt_len];
        if (t < 0 || t >= sc->vocab) {
            return ASSAY_ERR_INVALID;
        }
        sc->tokens[i] = t;
    }
    for (int32_t i = 0; i < n_cont; i++) {
        sc->out_rows[i] = prompt_len - 1 + i;
    }
    int32_t block = 0;
    struct assay_forward_seq seq = {&block, 0, n, 0, 0};
    struct assay_forward_batch b = {n, sc->tokens, 1, &seq, n_cont, sc->out_rows};
    enum assay_status st = assay_forward_run(sc->fwd, &b);
    if (st != ASSAY_OK) {
        return st;
    }
    *rows = assay_forward_logits(sc->fwd);
    return ASSAY_OK;
}
