/*
 * result.h - the outcome of one check, whatever its family, as the report
 * shows it: a verdict, one line of summary, on failure where and how to
 * reproduce, and the figures of its family.
 */
#ifndef ASSAY_RESULT_H
#define ASSAY_RESULT_H

#include <stdbool.h>
#include <stdint.h>

#include "divergence.h"

enum assay_verdict {
    ASSAY_VERDICT_PASS = 0,
    ASSAY_VERDICT_FAIL = 1,
    ASSAY_VERDICT_SKIP = 2,  /* could not be checked; the reason says why */
    ASSAY_VERDICT_ERROR = 3, /* the check itself could not run (bad input, I/O) */
};

enum assay_family {
    ASSAY_FAMILY_EQUIVALENCE = 0,
    ASSAY_FAMILY_DISTRIBUTIONAL = 1,
    ASSAY_FAMILY_PROPERTY = 2,
    ASSAY_FAMILY_SEEDED = 3, /* seeded determinism: a seed is a stream of its own */
};

/*
 * What a distributional check saw, for the report to draw. It lives in the
 * result, which a forked check's process hands back by a shared-memory copy
 * (checks/isolate.c), so it is fixed-size plain data with no pointer.
 *
 *  - GOF: one bin per bin of the chi-squared test, in the test's order
 *    (descending expected count): observed (the engine's count) against
 *    expected (n P, n the samples on possible categories).
 *  - HOMOGENEITY: the 2 x k test's bins: observed is the first engine's
 *    count, observed_b the second's, expected the first's count were both
 *    samples from one distribution (n1 (a + b) / (n1 + n2)).
 * The bin that holds the categories pooled because their expected count is
 * small is marked `pooled` (it is its own bin, or the smallest own bin when
 * the pool alone was too small). A test with more bins than the result
 * holds keeps the largest ones and the pooled tail, and folds the rest into
 * one bin marked `folded` (n_folded says how many test bins it holds).
 *
 * pit_n > 0 when the check tested PIT values for uniformity: their
 * histogram on ASSAY_EVIDENCE_PIT_BINS equal bins of [0, 1] and the KS
 * distance D (the largest gap between their empirical CDF and U(0, 1)).
 */
#define ASSAY_EVIDENCE_MAX_BINS 64
#define ASSAY_EVIDENCE_PIT_BINS 20

enum assay_evidence_kind {
    ASSAY_EVIDENCE_NONE = 0,
    ASSAY_EVIDENCE_GOF = 1,
    ASSAY_EVIDENCE_HOMOGENEITY = 2,
};

struct assay_evidence_bin {
    char label[40];    /* "17", "(3, 17)", "pooled tail (12)", "others (337 bins)" */
    double observed;
    double expected;
    double observed_b; /* HOMOGENEITY: the second sample's count; else NaN */
    bool pooled;
    bool folded;
};

struct assay_evidence {
    enum assay_evidence_kind kind;
    int32_t n_bins;      /* bins held */
    int32_t n_test_bins; /* bins of the test (more than n_bins when folded) */
    int32_t n_folded;    /* test bins folded into the one marked folded */
    struct assay_evidence_bin bins[ASSAY_EVIDENCE_MAX_BINS];
    int64_t pit_n;       /* PIT values tested; 0: no PIT */
    int64_t pit[ASSAY_EVIDENCE_PIT_BINS];
    double pit_ks_d;
};

const char *assay_verdict_str(enum assay_verdict v);
const char *assay_family_str(enum assay_family f);

/* The family called name ("equivalence", "distributional", "property",
 * "seeded"): true with *out set, false for any other name. */
bool assay_family_by_name(const char *name, enum assay_family *out);

/* The families' names for a usage message: "equivalence, distributional,
 * property or seeded". */
#define ASSAY_FAMILY_NAMES "equivalence, distributional, property or seeded"

struct assay_check_result {
    char name[96];
    enum assay_family family;
    enum assay_verdict verdict;
    char engine[320];   /* engine spec it ran on */
    char workload[256]; /* workload file or description */
    char summary[480];  /* one line */
    char failure[640];  /* FAIL/SKIP/ERROR: what, where */
    char repro[768];    /* FAIL: a one-line command that reruns it */
    double seconds;
    /* how the check's process ended (checks/isolate.h): the signal that
     * killed it (0: none), and whether it was killed for its time limit */
    int32_t died_signal;
    bool timed_out;
    /* equivalence */
    int64_t n_requests;
    int64_t n_tokens;
    int32_t n_ties;
    double tie_tol;
    double max_tie_gap;     /* largest oracle logit gap accepted as a tie */
    double max_logit_diff;  /* largest |engine - oracle| logit (NaN: engine exposes none) */
    /* top logprobs against the oracle's log-softmax (NaN/0: not compared):
     * |server - oracle| over every value returned */
    int64_t n_logprobs;
    double logprob_diff_max;
    double logprob_diff_median;
    double logprob_diff_p99;
    double logprob_diff_mean;
    double top1_agreement; /* share of positions whose greedy token is the
                            * oracle's argmax */
    /* the same positions as named series (checks/divergence.h): numerics[0]
     * "server"; more (a reference on the same positions) may follow */
    int32_t n_numerics;
    struct assay_divergence_summary numerics[ASSAY_DIVERGENCE_MAX_SERIES];
    /* the mean-KLD rule (checks/audit.h; 0 positions and NaN: not
     * judged): the server's and the reference's mean KLD over the same
     * positions, their ratio with its jackknife standard error (requests
     * left out one at a time) and its lower confidence bound, and the
     * budget (the factor times the reference's mean) */
    int64_t kld_positions;
    double kld_server, kld_reference, kld_ratio, kld_ratio_se, kld_ratio_lower, kld_budget;
    /* distributional */
    double alpha;
    double statistic;
    double p_value;
    double p_adjusted;      /* after Holm across the family */
    double min_tv;          /* smallest TV detected with the stated power */
    double power;
    int64_t n;
    int32_t df;
    int64_t n_impossible;   /* samples of tokens the oracle gives probability 0 */
    /* Which ground of a distributional FAIL fired, each on its own: the hard
     * rule (samples of tokens of oracle probability 0, or requests delivered
     * wrongly) and the statistic alone (p_value <= alpha, or Holm's
     * procedure rejects it), computed on the possible samples whether or not
     * the rule fired. Both false on a PASS. */
    bool rule_fired;
    bool statistic_fired;
    /* Under a numerics budget the null is "within the budget", tested by a
     * tolerance test (checks/tolerance.h); tol.tested is false for a test
     * of the point null (exact arithmetic). min_tv is then budget +
     * min_excess: the smallest distance from the oracle detected with
     * `power`. */
    struct assay_tolerance_figures {
        bool tested;
        char distance[16];  /* "TV" (on bins) or "PIT CDF" (on a grid) */
        double budget;      /* the distance the null allows */
        double reference;   /* the reference's own distance it was made from */
        double boundary;    /* what top-k/top-p cuts the budget can move add */
        double estimate;    /* the distance estimated from the samples */
        double ci_lo, ci_hi; /* its 95% interval */
        double min_excess;  /* beyond the budget, detected with `power` */
    } tol;
    struct assay_evidence evidence;
    /* property */
    int64_t n_steps;
    int64_t n_checks;       /* invariant evaluations */
};

/* What fired in a distributional result, for a verdict line: "rule and
 * statistic", "rule only", "statistic", or "" when neither did. */
const char *assay_check_fired_str(bool rule_fired, bool statistic_fired);

/* A result initialised for `name` in `family`: verdict PASS, figures NaN or 0. */
void assay_check_result_init(struct assay_check_result *r, const char *name,
                             enum assay_family family);

/*
 * The one way a check states a verdict other than PASS, with its reason
 * (printf-style, into res->failure). One precedence rule for every check:
 * a verdict only ever rises, PASS < SKIP < ERROR < FAIL, and the first
 * reason given at the final level stands (later ones are usually its
 * consequences). A FAIL outranks an ERROR: a check that found the engine
 * wrong and then could not finish has still found the engine wrong.
 */
void assay_check_fail(struct assay_check_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void assay_check_skip(struct assay_check_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void assay_check_error(struct assay_check_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The same for a verdict held in a variable (FAIL, SKIP or ERROR; PASS is
 * ignored). */
void assay_check_set(struct assay_check_result *res, enum assay_verdict v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
