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

/* Positions per block of the KV store: a batch's sequences take whole
 * blocks of it in turn. A key's place does not change its bits: the
 * attention reads every key by its position (engine/forward.h). */
#define SCORE_BLOCK 16

struct assay_score {
    struct assay_forward *fwd;
    struct assay_worker *worker; /* NULL unless two_threads */
    int32_t max_len, max_rows, vocab, n_blocks;
    int32_t *tokens;   /* (max_rows) */
    int32_t *out_rows; /* (max_rows) */
    int32_t *blocks;   /* (n_blocks) 0, 1, 2, ...: the sequences' block tables */
    struct assay_forward_seq seqs[ASSAY_SCORE_MAX_SEQS];
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
    if (p->max_rows != 0 && (p->max_rows < p->max_len || p->max_rows > (1 << 20))) {
        assay_diag_set(diag, NULL, "max_rows", "0, or max_len..2^20", "%d", (int)p->max_rows);
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
    sc->max_rows = p->max_rows > 0 ? p->max_rows : p->max_len;
    sc->vocab = p->model->cfg.vocab;
    /* each sequence wastes less than a block */
    sc->n_blocks = (sc->max_rows + SCORE_BLOCK - 1) / SCORE_BLOCK + ASSAY_SCORE_MAX_SEQS;
    sc->tokens = assay_calloc((size_t)sc->max_rows, sizeof(int32_t));
    sc->out_rows = assay_calloc((size_t)sc->max_rows, sizeof(int32_t));
    sc->blocks = assay_calloc((size_t)sc->n_blocks, sizeof(int32_t));
    for (int32_t i = 0; sc->blocks != NULL && i < sc->n_blocks; i++) {
        sc->blocks[i] = i;
    }
    if (p->two_threads) {
        st = assay_worker_init(&sc->worker);
        if (st != ASSAY_OK) {
            assay_score_free(sc);
            return st;
        }
    }
    /* Every product the engine's own, so the rows are those of any
     * batching. */
    struct assay_forward_params fp = {
        .model = p->model,
        .n_blocks = sc->n_blocks,
        .block_size = SCORE_BLOCK,
        .max_rows = sc->max_rows,
        .max_out = sc->max_rows,
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
    st = sc->tokens == NULL || sc->out_rows == NULL || sc->blocks == NULL ? ASSAY_ERR_NOMEM
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

void assay_score_set_probe(struct assay_score *sc, assay_forward_probe_fn fn, void *user)
{
    assay_forward_set_probe(sc->fwd, fn, user);
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
    assay_free(sc->blocks);
    assay_free(sc);
}

enum assay_status assay_score_rows(struct assay_score *sc, const int32_t *prompt,
                                   int32_t prompt_len, const int32_t *cont, int32_t n_cont,
                                   const float **rows)
{
    struct assay_score_seq one = {prompt, prompt_len, cont, n_cont};
    *rows = NULL;
    if (prompt_len < 1 || n_cont < 1 || (int64_t)prompt_len + n_cont - 1 > sc->max_len) {
        return ASSAY_ERR_INVALID;
    }
    return assay_score_rows_batch(sc, &one, 1, rows);
}

int32_t assay_score_max_rows(const struct assay_score *sc)
{
    return sc->max_rows;
}

enum assay_status assay_score_rows_batch(struct assay_score *sc, const struct assay_score_seq *seqs,
                                         int32_t n, const float **rows)
{
    *rows = NULL;
    if (n < 1 || n > ASSAY_SCORE_MAX_SEQS) {
        return ASSAY_ERR_INVALID;
    }
    int32_t row = 0, out = 0, block = 0;
    for (int32_t s = 0; s < n; s++) {
        const struct assay_score_seq *q = &seqs[s];
        if (q->prompt_len < 1 || q->n_cont < 1 ||
            (int64_t)q->prompt_len + q->n_cont - 1 > sc->max_len ||
            (int64_t)row + q->prompt_len + q->n_cont - 1 > sc->max_rows) {
            return ASSAY_ERR_INVALID;
        }
        int32_t len = q->prompt_len + q->n_cont - 1;
        for (int32_t i = 0; i < len; i++) {
            int32_t t = i < q->prompt_len ? q->prompt[i] : q->cont[i - q->prompt_len];
            if (t < 0 || t >= sc->vocab) {
                return ASSAY_ERR_INVALID;
            }
            sc->tokens[row + i] = t;
        }
        for (int32_t i = 0; i < q->n_cont; i++) {
            sc->out_rows[out++] = row + q->prompt_len - 1 + i;
        }
        sc->seqs[s] = (struct assay_forward_seq){sc->blocks + block, 0, len, row, 0};
        row += len;
        block += (len + SCORE_BLOCK - 1) / SCORE_BLOCK;
    }
    struct assay_forward_batch b = {row, sc->tokens, n, sc->seqs, out, sc->out_rows};
    enum assay_status st = assay_forward_run(sc->fwd, &b);
    if (st != ASSAY_OK) {
        return st;
    }
    *rows = assay_forward_logits(sc->fwd);
    return ASSAY_OK;
}
