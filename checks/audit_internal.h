/*
 * audit_internal.h - what the two files of the audit share: its state
 * (audit.c opens it, reads the server's idle state and runs a check;
 * audit_checks.c holds the checks on a server) and three helpers of
 * audit.c. Not part of the interface: include audit.h.
 */
#ifndef ASSAY_AUDIT_INTERNAL_H
#define ASSAY_AUDIT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "../engine/score.h"
#include "audit.h"
#include "equivalence.h"

#define MAX_FINDINGS 24
#define MAX_GAUGES 16
#define MEMO_LEN ASSAY_AUDIT_MIN_CONTEXT
#define MAX_STEPS 20000000LL
#define METRICS_MAX_BYTES (4u << 20)
#define IDLE_WAIT_NS (15LL * 1000000000LL)

struct assay_audit {
    struct assay_audit_params p;
    char url[1024];
    char model_path[1024];
    char served[256];
    char fixtures[1024];
    char program[512];
    char bundled_spec[1400];
    bool bundled_default; /* bundled_spec is the audit's own */
    bool eos_given;       /* the caller named the EOS token (not the file) */
    char srv_spec[1400];
    struct assay_model *model; /* the oracle's copy */
    bool mapped;               /* its matrices left in the file (assay_audit_weights) */
    bool engine_off;           /* no bundled engine: mapped, or too little memory for it */
    char engine_off_why[500];  /* then why, for the report and the skips */
    struct assay_oracle_memo *memo;
    struct assay_adapter srv;    /* streamed, no logprobs (v1: one) */
    struct assay_adapter srv_lp; /* streamed, n_probs top logprobs */
    struct assay_adapter srv_ns; /* non-streamed */
    struct assay_adapter srv_det; /* streamed, "cache_prompt": false (the seeded checks) */
    struct assay_adapter bundled;
    struct assay_model_cache *models;
    char findings[MAX_FINDINGS][640];
    size_t n_findings;
    struct assay_audit_gauge gauges[MAX_GAUGES];
    size_t n_gauges;
    bool metrics_read;  /* the baseline was read */
    bool baseline_busy; /* requests were running at the baseline */
    char metrics_status[400];
    struct assay_audit_budget budget; /* measured by assay_audit_need_budget */
    bool budget_tried;                /* measured, or failed (budget.why) */
    struct assay_score *scorer;       /* the reference (engine/score.h), or NULL */
    int32_t scorer_len;               /* its longest sequence */
    struct assay_audit_ref_rows *ref_rows; /* rows scored ahead of their lookups, or NULL */
};

/* Add a sentence to the audit's findings (said once, at most MAX_FINDINGS). */
void assay_audit_note(struct assay_audit *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The budgets in force: measured on first use; where the reference could
 * not be measured, the fixed tolerances (said once in the findings). */
const struct assay_audit_budget *assay_audit_budget_in_force(struct assay_audit *a);

/* The tie budget and the logprob budget in force (audit.h). */
static inline double assay_audit_tie_budget(struct assay_audit *a)
{
    return assay_audit_budget_in_force(a)->gap;
}

static inline double assay_audit_logprob_budget(struct assay_audit *a)
{
    return assay_audit_budget_in_force(a)->logprob;
}

/*
 * The generated workload of an audit check: its fixture file (item->workload
 * under the fixtures folder, a "generate" shape; README "Workload files")
 * drawn with a seed derived from the audit's seed and the check's name, and
 * with --quick with the request count of the item's "quick=N" parameter. On
 * failure res is ERROR with the reason.
 */
enum assay_status assay_audit_check_workload(const struct assay_audit *a,
                                             const struct assay_plan_item *item,
                                             struct assay_check_result *res,
                                             struct assay_workload **out);

/* A workload through an adapter by the harness, up to MAX_STEPS steps. */
enum assay_status assay_audit_run(const struct assay_adapter *ad, const struct assay_workload *w,
                                  struct assay_transcript **t);

/* The logprobs check (audit_logprobs.c), its runner in audit_checks.c. */
enum assay_status assay_audit_check_logprobs(struct assay_audit *a,
                                             const struct assay_plan_item *item,
                                             struct assay_check_result *res);

/* assay_seed_explain_fn (checks/seeded.h) for a server that does not claim
 * batch invariance (ctx: the audit). Two runs of one seed drew each output
 * with the same uniform (one per token, by inverse CDF over the kept tokens
 * in descending probability: llama.cpp's dist sampler after its top-k
 * sort), so from their parting on, at every position, one uniform must
 * draw both runs' tokens, each under its own run's context, up to what
 * the numerics can move there: the mass of twice the reference's TV from
 * the oracle at that context, and the tokens whose logits lie within
 * twice the spread of the reference's errors there; and every token must
 * be one a cut the budget allows keeps. A seed ignored, restarted or
 * taken by another request draws with other uniforms, and fails this. */
/* assay_seed_chance_fn (checks/seeded.h) for the server: the oracle's
 * rows, the logits' spread the budget in force allows. */
enum assay_status assay_audit_seed_chance(void *ctx, const int32_t *prompt, int32_t len,
                                          const struct assay_sampling *s, const int32_t *tokens,
                                          int32_t n, double *chance);
bool assay_audit_seed_explain(void *ctx, const int32_t *prompt, int32_t len,
                              const struct assay_sampling *s, const int32_t *ta,
                              const int32_t *tb, int32_t n, int32_t k, char *why, size_t size);

/* Measure the numerics budget (audit.h) unless it was: ASSAY_OK with
 * a->budget filled, else the status, with a->budget.why saying why (the
 * budgets are then the fixed tolerances, and the caller's check is ERROR). */
enum assay_status assay_audit_need_budget(struct assay_audit *a);

/* The reference's log-softmax (double, vocab each) at every position of a
 * prompt + continuation: row i follows prompt and cont[0..i). Scratch out
 * holds n_cont rows. `variant` 0 is ggml's fp32 lanes, 1 its fp16
 * accumulation (a->budget.n_variants says whether that one differs).
 * ASSAY_ERR_INVALID when the sequence is longer than the reference takes. */
/* Score n sequences (prompts[i] then conts[i], as assay_audit_reference_lsm
 * takes them) with the reference's variant in batched passes (for a mapped
 * model, the file decoded once a batch rather than once a sequence) and
 * keep their rows, in place of the ones kept before, for the lookups of
 * assay_audit_reference_lsm that follow: the same values. Sequences it
 * could not score (too long, out of memory, an error) are left to the
 * lookups, which say what they would have said. */
void assay_audit_reference_prefetch(struct assay_audit *a, int32_t variant, int32_t n,
                                    const int32_t *const *prompts, const int32_t *prompt_lens,
                                    const int32_t *const *conts, const int32_t *n_conts);

/* The oracle's rows of every request of w, computed in batched passes
 * ahead of the lookups (assay_oracle_memo_prefetch: the same rows; a lookup
 * computes, or fails on, whatever this could not): without a transcript,
 * of each prompt as the budget and the logprob check's EOS probe read it
 * (its first token, then the rest as the continuation); with one, of each
 * prompt and the server's continuation in t. With variant >= 0, the
 * reference's rows of that variant instead (assay_audit_reference_prefetch). */
void assay_audit_prefetch(struct assay_audit *a, const struct assay_workload *w,
                          const struct assay_transcript *t, int32_t variant);

/* Let go of the rows the prefetch kept. */
void assay_audit_reference_forget(struct assay_audit *a);

enum assay_status assay_audit_reference_lsm(struct assay_audit *a, int32_t variant,
                                            const int32_t *prompt, int32_t prompt_len,
                                            const int32_t *cont, int32_t n_cont, double *out);

/* One position of the budget's measure: over the oracle's top n_top tokens
 * (of oracle_lsm; ties to the lower id), the reference's largest
 * |logprob - the oracle's| (*max_abs) and the largest change of a
 * difference between two of them (*gap_change). top is scratch of n_top. */
void assay_audit_reference_position(const double *oracle_lsm, const double *ref_lsm, int32_t v,
                                    int32_t n_top, int32_t *top, double *max_abs,
                                    double *gap_change);

/* The reference measured on the logprobs check's own positions (the
 * server's continuations, teacher-forced): the logprob budget becomes the
 * factor times the larger of its largest |difference| there and on the
 * budget's prompts (audit.h). No effect unless the budget was measured. */
void assay_audit_budget_at_check(struct assay_audit *a, int32_t variant, double ref_max_abs,
                                 int64_t n_positions);

/* The log-softmax of a row of logits (out may not alias row). */
void assay_audit_log_softmax(const double *row, int32_t v, double *out);

/* Read the server's /metrics gauges: the idle state (baseline) or after
 * the run. False with metrics_status set when the page cannot be read. */
bool assay_audit_read_metrics(struct assay_audit *a, bool baseline);

/* Whether gauge g is back to its idle level. */
bool assay_audit_gauge_back(const struct assay_audit_gauge *g);

#endif
