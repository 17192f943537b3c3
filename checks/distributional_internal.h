/*
 * distributional_internal.h - what the files of the distributional family
 * share (checks/distributional.h is the interface): drawing samples from
 * an adapter (dist_sample.c), the prompts, and the pieces of a verdict
 * every check writes alike. Not part of the interface: include
 * distributional.h.
 *
 *   dist_sample.c       parameters, prompts, drawing samples, verdict helpers
 *   distributional.c    exact first-token distributions, goodness of fit,
 *                       two-sample homogeneity, Holm across the family
 *   dist_pit.c          the randomised PIT over whole sequences
 *   dist_acceptance.c   speculative decoding's acceptance against its theory
 */
#ifndef ASSAY_DISTRIBUTIONAL_INTERNAL_H
#define ASSAY_DISTRIBUTIONAL_INTERNAL_H

#include <gsl/gsl_rng.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../oracles/oracle.h"
#include "distributional.h"
#include "stats.h"
#include "tolerance.h"

/* The purpose of the draws that make prompt tokens (assay_rng_u01). */
#define PROMPT_PURPOSE 0x70726f6du
/* The purposes of the PIT's and the acceptance test's V ~ U(0, 1). */
#define PIT_V_PURPOSE 0x7069742du
#define ACCEPT_V_PURPOSE 0x61636376u

struct round_rec {
    int64_t req;
    int32_t index;    /* output position of the first drafted token */
    int32_t drafted;
    int32_t accepted;
};

struct sample_set {
    int64_t n;
    int32_t out_len;
    int32_t *tokens;  /* (n, out_len); -1 where nothing came */
    struct round_rec *rounds;
    int64_t n_rounds, cap_rounds;
    int64_t n_bad;    /* requests delivered other than exactly out_len tokens once */
    char bad[300];    /* the one of the lowest request id */
    int64_t bad_key;  /* that id (INT64_MAX: none) */
    bool engine_fault; /* after a failed draw: the engine under test failed (a step, its
                        * progress), not the suite */
};

struct request_source {
    const int32_t *prompts; /* (n_prompts, prompt_len) */
    int32_t n_prompts;
    int32_t prompt_len;
    struct assay_sampling sampling;
    uint64_t seed0;         /* request i gets seed seed0 + i */
};

/* ASSAY_ERR_INVALID with why set unless p is usable. */
enum assay_status assay_dist_check_params(const struct assay_dist_params *p, char *why, size_t size);

/* An ERROR verdict: why, and the status in words. */
void assay_dist_set_error(struct assay_check_result *res, enum assay_status st, const char *why);

/* The prompts' seed (p->prompt_seed, or derived from p->seed). */
uint64_t assay_dist_prompt_seed_of(const struct assay_dist_params *p);

/* Candidate prompt `candidate` of the prompt seed: len byte tokens. */
void assay_dist_make_prompt(uint64_t seed, int32_t candidate, int32_t len, int32_t *out);

/* The check's p->n_prompts prompts, (n_prompts, prompt_len) in a new array
 * (assay_free it). ASSAY_ERR_NOMEM. */
enum assay_status assay_dist_make_prompts(const struct assay_dist_params *p, int32_t **out);

/* Send n requests (at most `window` in flight) and record every token (and,
 * with keep_rounds, every SPEC_ROUND); under MPI this rank's requests, then
 * every rank's brought together. Returns ASSAY_OK with *out filled, or the
 * adapter's failure with why set (out is then freed; out->engine_fault says
 * whether the engine under test failed rather than the suite). */
enum assay_status assay_dist_draw_samples(const struct assay_adapter *a,
                                          const struct request_source *src, int64_t n,
                                          int32_t out_len, int32_t window, bool keep_rounds,
                                          struct sample_set *out, char *why, size_t size);
void assay_dist_sample_set_free(struct sample_set *s);

/* What the engine's speculative rounds (a sample set drawn with
 * keep_rounds) came to: proposals drafted and accepted, and with want_bonus
 * which cells (request * len + position) hold a token drawn after every
 * proposal of its round was accepted. Rounds that do not fit the requests
 * are left out (dist.spec.acceptance judges them). ASSAY_ERR_NOMEM. */
struct assay_spec_tally {
    int64_t drafted, accepted, n_bonus;
    uint8_t *bonus; /* (n * len), or NULL without want_bonus; assay_free it */
};
enum assay_status assay_dist_spec_tally(const struct sample_set *ss, int64_t n, int32_t len,
                                        bool want_bonus, struct assay_spec_tally *t);

/* Append more to the text in buf (size bytes), cut to fit. */
void assay_dist_append(char *buf, size_t size, const char *more);

/* "; proposals accepted A of D (R%)" for a summary, or "" without rounds. */
void assay_dist_spec_rate(const struct assay_spec_tally *t, char *buf, size_t size);

/* A failed draw's verdict: FAIL when the engine under test failed, ERROR
 * when the suite could not run. */
void assay_dist_draw_failed(struct assay_check_result *res, const struct sample_set *ss,
                            enum assay_status st, const char *why);

/* Requests delivered wrongly FAIL the check, whatever the statistic says. */
void assay_dist_judge_delivery(struct assay_check_result *res, const struct sample_set *ss,
                               const char *what);

/* The figures of a chi-squared test into res. */
void assay_dist_fill_from_test(struct assay_check_result *res, const struct assay_test_result *tr,
                               double alpha);

/* "the statistic alone: p ..., passes/fails too", for a FAIL by a rule. */
void assay_dist_statistic_alone(char *buf, size_t size, bool testable, double p_value,
                                double alpha);

/* Whether the kept set of `row`'s processed distribution (info inf) is
 * safe from the tolerances (p->tol_logit, p->tol_top_p); with p->tie, a
 * cut that is an exact tie is the tie rule's, safe when every other logit
 * is tol_logit away (enum assay_dist_tie). scratch: v. */
enum assay_status assay_dist_boundary_safe(const double *row, int32_t v,
                                           const struct assay_dist_params *p,
                                           const struct assay_oracle_dist_info *inf,
                                           double *scratch, bool *safe);

/* A tolerance test's figures into res (checks/tolerance.h; `distance`
 * names the distance): alpha, n, p, power, min_tv = budget + min_excess,
 * statistic = the estimate, and res->tol with the budget's parts. */
void assay_dist_fill_tolerance(struct assay_check_result *res,
                               const struct assay_tolerance_result *tr,
                               const struct assay_dist_budget *b, const char *distance);

/* A seeded GSL mt19937 (NULL when out of memory); gsl_rng_free it. */
gsl_rng *assay_dist_make_rng(uint64_t seed);

#endif
