/*
 * divergence.c - the per-position figures of top logprobs against the oracle
 * (see divergence.h for the definitions and their edge cases).
 */
#include "divergence.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bench/metrics.h"
#include "../core/alloc.h"

/* A growing array of doubles. */
struct values {
    double *v;
    int64_t n, cap;
};

struct assay_divergence {
    struct values kld;      /* (positions with a top list) */
    struct values abs_diff; /* (values compared) */
    int64_t n_positions, n_top1;
};

enum assay_status assay_divergence_init(struct assay_divergence **out)
{
    *out = assay_calloc(1, sizeof **out);
    return *out != NULL ? ASSAY_OK : ASSAY_ERR_NOMEM;
}

void assay_divergence_free(struct assay_divergence *acc)
{
    if (acc == NULL) {
        return;
    }
    assay_free(acc->kld.v);
    assay_free(acc->abs_diff.v);
    assay_free(acc);
}

/* Room for `more` values past n, without adding any. */
static enum assay_status values_reserve(struct values *a, int64_t more)
{
    if (a->n + more <= a->cap) {
        return ASSAY_OK;
    }
    int64_t cap = a->cap > 0 ? a->cap : 1024;
    while (cap < a->n + more) {
        cap *= 2;
    }
    double *v = assay_realloc(a->v, sizeof(double) * (size_t)cap);
    if (v == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    a->v = v;
    a->cap = cap;
    return ASSAY_OK;
}

static enum assay_status check_top(int32_t vocab, const struct assay_divergence_top *top,
                                   int32_t n_top)
{
    if (vocab < 1 || n_top < 0 || (n_top > 0 && top == NULL)) {
        return ASSAY_ERR_INVALID;
    }
    for (int32_t j = 0; j < n_top; j++) {
        if (top[j].token < 0 || top[j].token >= vocab || isnan(top[j].logprob) ||
            top[j].logprob == INFINITY) {
            return ASSAY_ERR_INVALID;
        }
    }
    return ASSAY_OK;
}

/* Whether top[j]'s token appeared earlier in the list. */
static bool seen_before(const struct assay_divergence_top *top, int32_t j)
{
    for (int32_t i = 0; i < j; i++) {
        if (top[i].token == top[j].token) {
            return true;
        }
    }
    return false;
}

enum assay_status assay_divergence_kld(const double *lsm, int32_t vocab,
                                     const struct assay_divergence_top *top, int32_t n_top,
                                     double *kld)
{
    enum assay_status st = check_top(vocab, top, n_top);
    if (st != ASSAY_OK) {
        return st;
    }
    double sum = 0.0, mass_o = 0.0, mass_s = 0.0;
    int32_t n_distinct = 0;
    for (int32_t j = 0; j < n_top; j++) {
        if (seen_before(top, j)) {
            continue;
        }
        n_distinct++;
        double o = lsm[top[j].token], s = top[j].logprob;
        double p = exp(o);
        mass_o += p;
        mass_s += exp(s);
        if (p > 0.0) {
            sum += p * (o - s);
        }
    }
    double rest_o = fmax(0.0, 1.0 - mass_o);
    double rest_s = fmax(1.0 - mass_s, (double)n_distinct * FLT_EPSILON);
    if (rest_o > 0.0) {
        sum += rest_o * log(rest_o / rest_s);
    }
    *kld = sum > 0.0 ? sum : 0.0; /* also 0 for n_top == 0 */
    return ASSAY_OK;
}

enum assay_status assay_divergence_add(struct assay_divergence *acc, const double *lsm, int32_t vocab,
                                     const struct assay_divergence_top *top, int32_t n_top,
                                     bool top1_agrees)
{
    double kld = 0.0;
    enum assay_status st = assay_divergence_kld(lsm, vocab, top, n_top, &kld);
    if (st == ASSAY_OK) {
        st = values_reserve(&acc->kld, 1);
    }
    if (st == ASSAY_OK) {
        st = values_reserve(&acc->abs_diff, n_top);
    }
    if (st != ASSAY_OK) {
        return st;
    }
    acc->n_positions++;
    acc->n_top1 += top1_agrees;
    if (n_top == 0) {
        return ASSAY_OK;
    }
    acc->kld.v[acc->kld.n++] = kld;
    for (int32_t j = 0; j < n_top; j++) {
        acc->abs_diff.v[acc->abs_diff.n++] = fabs(top[j].logprob - lsm[top[j].token]);
    }
    return ASSAY_OK;
}

static int cmp_asc(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b ? 1 : 0;
}

static void summarise_values(struct values *a, struct assay_divergence_stats *s)
{
    s->n = a->n;
    if (a->n == 0) {
        s->mean = s->median = s->p99 = s->max = NAN;
        for (int k = 0; k < ASSAY_DIVERGENCE_CDF_POINTS; k++) {
            s->cdf[k] = NAN;
        }
        return;
    }
    qsort(a->v, (size_t)a->n, sizeof(double), cmp_asc);
    double sum = 0.0;
    for (int64_t i = 0; i < a->n; i++) {
        sum += a->v[i];
    }
    s->mean = sum / (double)a->n;
    s->median = assay_percentile_nearest_rank(a->v, a->n, 5000);
    s->p99 = assay_percentile_nearest_rank(a->v, a->n, 9900);
    s->max = a->v[a->n - 1];
    s->cdf[0] = a->v[0];
    for (int k = 1; k < ASSAY_DIVERGENCE_CDF_POINTS; k++) {
        s->cdf[k] = assay_percentile_nearest_rank(a->v, a->n, 100 * k);
    }
}

void assay_divergence_summarise(struct assay_divergence *acc, const char *name,
                              struct assay_divergence_summary *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name != NULL ? name : "");
    out->n_positions = acc->n_positions;
    out->n_values = acc->abs_diff.n;
    summarise_values(&acc->kld, &out->kld);
    summarise_values(&acc->abs_diff, &out->abs_diff);
    out->top1_agreement =
        acc->n_positions > 0 ? (double)acc->n_top1 / (double)acc->n_positions : NAN;
}
