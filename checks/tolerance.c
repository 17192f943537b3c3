/*
 * tolerance.c - tests of "within the budget" nulls; see tolerance.h for
 * each construction and its derivation. Each test is a few passes over its
 * counts or values: called once per check, never in a loop.
 */
#include "checks/tolerance.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

/* ln(2^m - 2), the number of events of m bins that are neither empty nor
 * everything (m >= 2); for m = 1 there is none (the TV is 0). */
static double log_events(int32_t m)
{
    return (double)m * M_LN2 + log1p(-ldexp(1.0, 1 - m));
}

static bool levels_ok(double alpha, double power)
{
    return alpha > 0.0 && alpha < power && power < 1.0; /* false for NaN */
}

/* The deviation e with exp(log_count - 2 n e^2) = level. */
static double deviation(double log_count, double level, double n)
{
    return sqrt((log_count - log(level)) / (2.0 * n));
}

/* The result of a test whose union has exp(log_count) events, each bounded
 * by Hoeffding's exp(-2 n e^2), for the estimate t against budget. */
static void fill(struct assay_tolerance_result *out, double t, double budget, double log_count,
                 double n_eff, double alpha, double power)
{
    double e_alpha = deviation(log_count, alpha, n_eff);
    double e_ci = deviation(log_count, ASSAY_TOLERANCE_CI_ALPHA, n_eff);
    out->budget = budget;
    out->distance = t;
    out->ci_lo = t - e_ci > 0.0 ? t - e_ci : 0.0;
    out->ci_hi = t + e_ci < 1.0 ? t + e_ci : 1.0;
    out->threshold = budget + e_alpha;
    double x = t - budget;
    double lp = log_count - 2.0 * n_eff * x * x;
    out->p_value = x <= 0.0 || lp >= 0.0 ? 1.0 : exp(lp);
    out->min_excess = e_alpha + sqrt(-log1p(-power) / (2.0 * n_eff));
    out->alpha = alpha;
    out->power = power;
    out->n_eff = n_eff;
}

struct ranked {
    double p;
    int64_t i;
};

static int by_prob_desc(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->p != y->p) {
        return x->p > y->p ? -1 : 1;
    }
    return (x->i > y->i) - (x->i < y->i);
}

enum assay_status assay_tv_bins(const double *prob, int64_t k, int32_t max_bins, int64_t *order,
                                int32_t *bin_of, double *bin_prob, int32_t *n_bins)
{
    if (prob == NULL || k < 1 || max_bins < 2 || max_bins > 62 || order == NULL ||
        bin_of == NULL || bin_prob == NULL || n_bins == NULL) {
        return ASSAY_ERR_INVALID;
    }
    double sum = 0.0;
    int64_t n_pos = 0;
    for (int64_t c = 0; c < k; c++) {
        if (!(prob[c] >= 0.0) || !isfinite(prob[c])) {
            return ASSAY_ERR_INVALID;
        }
        sum += prob[c];
        n_pos += prob[c] > 0.0;
    }
    if (!(fabs(sum - 1.0) <= 1e-9) || n_pos == 0) {
        return ASSAY_ERR_INVALID;
    }
    /* Sorted once per check: k is a vocabulary, or one squared for pairs. */
    struct ranked *r = assay_malloc(sizeof *r * (size_t)n_pos);
    if (r == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    int64_t j = 0;
    for (int64_t c = 0; c < k; c++) {
        if (prob[c] > 0.0) {
            r[j].p = prob[c];
            r[j++].i = c;
        }
    }
    qsort(r, (size_t)n_pos, sizeof *r, by_prob_desc);
    const double target = 1.0 / max_bins;
    int32_t b = 0;
    double mass = 0.0;
    for (j = 0; j < n_pos; j++) {
        order[j] = r[j].i;
        bin_of[r[j].i] = b;
        mass += r[j].p;
        if (mass >= target && j + 1 < n_pos && b + 1 < max_bins) {
            bin_prob[b++] = mass;
            mass = 0.0;
        }
    }
    assay_free(r);
    if (mass > 0.0) {
        if (b > 0 && mass < 0.5 * target) {
            /* the light last run joins the one before */
            for (j = n_pos - 1; j >= 0 && bin_of[order[j]] == b; j--) {
                bin_of[order[j]] = b - 1;
            }
            bin_prob[b - 1] += mass;
        } else {
            bin_prob[b++] = mass;
        }
    }
    if (n_pos < k) {
        for (int64_t c = 0; c < k; c++) {
            if (prob[c] == 0.0) {
                bin_of[c] = b;
            }
        }
        bin_prob[b++] = 0.0;
    }
    *n_bins = b;
    return ASSAY_OK;
}

enum assay_status assay_tv_tolerance_one(const int64_t *counts, const double *bin_prob,
                                         int32_t n_bins, double budget, double alpha,
                                         double power, struct assay_tolerance_result *out)
{
    if (counts == NULL || bin_prob == NULL || out == NULL || n_bins < 1 || n_bins > 62 ||
        !levels_ok(alpha, power) || !(budget >= 0.0 && budget <= 1.0)) {
        return ASSAY_ERR_INVALID;
    }
    int64_t n = 0;
    for (int32_t b = 0; b < n_bins; b++) {
        if (counts[b] < 0 || !(bin_prob[b] >= 0.0)) {
            return ASSAY_ERR_INVALID;
        }
        n += counts[b];
    }
    if (n <= 0) {
        return ASSAY_ERR_INVALID;
    }
    double t = 0.0;
    for (int32_t b = 0; b < n_bins; b++) {
        t += fabs((double)counts[b] / (double)n - bin_prob[b]);
    }
    memset(out, 0, sizeof *out);
    out->n = n;
    out->n_bins = n_bins;
    if (n_bins < 2) {
        /* one bin: no event can show a distance; the test never rejects */
        fill(out, 0.0, budget, 0.0, (double)n, alpha, power);
        out->p_value = 1.0;
        return ASSAY_OK;
    }
    fill(out, 0.5 * t, budget, log_events(n_bins), (double)n, alpha, power);
    return ASSAY_OK;
}

enum assay_status assay_tv_tolerance_two(const int64_t *a, const int64_t *b, int32_t n_bins,
                                         double budget, double alpha, double power,
                                         struct assay_tolerance_result *out)
{
    if (a == NULL || b == NULL || out == NULL || n_bins < 1 || n_bins > 62 ||
        !levels_ok(alpha, power) || !(budget >= 0.0 && budget <= 1.0)) {
        return ASSAY_ERR_INVALID;
    }
    int64_t n1 = 0, n2 = 0;
    for (int32_t k = 0; k < n_bins; k++) {
        if (a[k] < 0 || b[k] < 0) {
            return ASSAY_ERR_INVALID;
        }
        n1 += a[k];
        n2 += b[k];
    }
    if (n1 <= 0 || n2 <= 0) {
        return ASSAY_ERR_INVALID;
    }
    double t = 0.0;
    for (int32_t k = 0; k < n_bins; k++) {
        t += fabs((double)a[k] / (double)n1 - (double)b[k] / (double)n2);
    }
    memset(out, 0, sizeof *out);
    out->n = n1 + n2;
    out->n_bins = n_bins;
    double n_eff = (double)n1 * (double)n2 / (double)(n1 + n2);
    if (n_bins < 2) {
        fill(out, 0.0, budget, 0.0, n_eff, alpha, power);
        out->p_value = 1.0;
        return ASSAY_OK;
    }
    fill(out, 0.5 * t, budget, log_events(n_bins), n_eff, alpha, power);
    return ASSAY_OK;
}

/* The largest excess max_j (|F_n(s_j) - s_j| - budget[j - 1]) over the
 * grid s_j = j / grid, j = 1 .. grid-1, for the values of u whose group is
 * g (g < 0: all); *d and *b the distance and the budget at that point, *m
 * their count. counts: grid. */
static double grid_excess(const double *u, const int8_t *group, int64_t n, int32_t g,
                          int32_t grid, const double *budget, int64_t *counts, int64_t *m,
                          double *d, double *b)
{
    memset(counts, 0, sizeof *counts * (size_t)grid);
    int64_t cnt = 0;
    for (int64_t i = 0; i < n; i++) {
        if (g >= 0 && group[i] != g) {
            continue;
        }
        /* u in [j/grid, (j+1)/grid) counts toward F(s) for s > u */
        int32_t j = (int32_t)(u[i] * grid);
        counts[j < grid ? j : grid - 1]++;
        cnt++;
    }
    *m = cnt;
    double best = -INFINITY;
    *d = 0.0;
    *b = budget[0];
    int64_t below = 0;
    for (int32_t j = 1; j < grid && cnt > 0; j++) {
        below += counts[j - 1];
        double x = fabs((double)below / (double)cnt - (double)j / grid);
        if (x - budget[j - 1] > best) {
            best = x - budget[j - 1];
            *d = x;
            *b = budget[j - 1];
        }
    }
    return best;
}

static bool values_ok(const double *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (!(u[i] >= 0.0 && u[i] <= 1.0)) {
            return false;
        }
    }
    return true;
}

static bool budgets_ok(const double *budget, int64_t n)
{
    for (int64_t j = 0; j < n; j++) {
        if (!(budget[j] >= 0.0 && budget[j] <= 1.0)) {
            return false;
        }
    }
    return true;
}

enum assay_status assay_cdf_tolerance(const double *u, int64_t n, int32_t grid,
                                      const double *budget, double alpha, double power,
                                      struct assay_tolerance_result *out)
{
    if (u == NULL || budget == NULL || out == NULL || n < 1 || grid < 2 || grid > 1000 ||
        !levels_ok(alpha, power) || !budgets_ok(budget, grid - 1) || !values_ok(u, n)) {
        return ASSAY_ERR_INVALID;
    }
    int64_t *counts = assay_malloc(sizeof *counts * (size_t)grid);
    if (counts == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    int64_t m = 0;
    double d = 0.0, b = 0.0;
    grid_excess(u, NULL, n, -1, grid, budget, counts, &m, &d, &b);
    assay_free(counts);
    memset(out, 0, sizeof *out);
    out->n = n;
    out->n_bins = grid;
    fill(out, d, b, log(2.0 * (grid - 1)), (double)n, alpha, power);
    return ASSAY_OK;
}

enum assay_status assay_cdf_tolerance_groups(const double *u, const int8_t *group, int64_t n,
                                             int32_t n_groups, const double *budget,
                                             double n_star, int32_t grid, double alpha,
                                             double power, struct assay_tolerance_result *out,
                                             int32_t *worst_group)
{
    if (u == NULL || group == NULL || budget == NULL || out == NULL || n < 1 || n_groups < 1 ||
        n_groups > 16 || grid < 2 || grid > 1000 || !(n_star > 0.0) || !isfinite(n_star) ||
        !levels_ok(alpha, power) || !values_ok(u, n)) {
        return ASSAY_ERR_INVALID;
    }
    if (!budgets_ok(budget, (int64_t)n_groups * (grid - 1))) {
        return ASSAY_ERR_INVALID;
    }
    int64_t *counts = assay_malloc(sizeof *counts * (size_t)grid);
    if (counts == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    /* K events: groups x grid points x signs. For a group of N values at
     * CDF distance d: the excess count S = N (d - delta_g) is rejected at
     * level a when S >= sqrt(ln(K/a) n_star / 8) (1 + N / n_star), i.e.
     * p = K exp(-8 S^2 / (n_star (1 + N / n_star)^2)). */
    const double log_k = log(2.0 * (grid - 1) * n_groups);
    double best_lp = INFINITY;
    int32_t best = -1;
    double best_d = 0.0, best_b = 0.0;
    int64_t best_m = 0;
    for (int32_t g = 0; g < n_groups; g++) {
        int64_t m = 0;
        double d = 0.0, b = 0.0;
        double excess = grid_excess(u, group, n, g, grid, budget + (int64_t)g * (grid - 1),
                                    counts, &m, &d, &b);
        if (m == 0) {
            continue;
        }
        double s = (double)m * excess;
        double r = 1.0 + (double)m / n_star;
        double lp = s <= 0.0 ? 0.0 : log_k - 8.0 * s * s / (n_star * r * r);
        if (best < 0 || lp < best_lp) {
            best_lp = lp;
            best = g;
            best_d = d;
            best_b = b;
            best_m = m;
        }
    }
    assay_free(counts);
    memset(out, 0, sizeof *out);
    out->n_bins = grid;
    if (best < 0) {
        fill(out, 0.0, 0.0, log_k, n_star, alpha, power);
        out->p_value = 1.0;
        if (worst_group != NULL) {
            *worst_group = -1;
        }
        return ASSAY_OK;
    }
    /* Figures at the planned size, where the stitched bound is Hoeffding's;
     * the p-value is the stitched one at the group's actual size. */
    fill(out, best_d, best_b, log_k, n_star, alpha, power);
    out->p_value = best_lp >= 0.0 ? 1.0 : exp(best_lp);
    out->n = best_m;
    if (worst_group != NULL) {
        *worst_group = best;
    }
    return ASSAY_OK;
}
