/*
 * stats.c - the statistics under the distributional check family; see
 * stats.h for each contract and its reference.
 */
#include "checks/stats.h"

#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_sf_gamma.h>

#include "core/alloc.h"

/* ---- Common ------------------------------------------------------------ */

static atomic_bool g_gsl_handler_off;

enum assay_status assay_stats_init(void)
{
    if (!atomic_exchange(&g_gsl_handler_off, true)) {
        gsl_set_error_handler_off();
    }
    return ASSAY_OK;
}

static bool is_level(double x)
{
    return x > 0.0 && x < 1.0; /* false for NaN */
}

/* A GSL probability that must lie in [0, 1]; anything else is a failure. */
static bool is_probability(double x)
{
    return x >= 0.0 && x <= 1.0;
}

/* ---- Kolmogorov distribution ------------------------------------------ */

/* Largest k = floor(n d) + 1 the exact method accepts (m = 2k - 1 <= 999). */
#define KS_EXACT_MAX_K 500
/* Largest n for the exact method and the one-sided Smirnov sum. */
#define KS_MAX_N 10000000
/* Work budget, in multiply-adds, under which assay_ks_pvalue uses the exact method. */
#define KS_EXACT_BUDGET 4e8
/* Largest n for which assay_ks_pvalue uses the Smirnov sum for the far tail. */
#define KS_TAIL_MAX_N 1000000
/* At or below this, 2 P(D+ >= d) is the two-sided p-value to a relative
 * 1e-9 or better (measured against the exact method for n = 5 .. 1000). */
#define KS_TAIL_P 1e-3

/* Rescaling of the matrix power: 2^-464 ~ 1e-140, as in MTW, but exact. */
#define KS_SCALE_BITS 464
#define KS_SCALE_BIG 0x1p464

/* c = a b for m x m row-major matrices; c must not alias a or b. */
static void ks_matmul(const double *a, const double *b, double *c, int m)
{
    for (int i = 0; i < m; i++) {
        double *ci = c + (size_t)i * (size_t)m;
        for (int j = 0; j < m; j++) {
            ci[j] = 0.0;
        }
        for (int l = 0; l < m; l++) {
            double ail = a[(size_t)i * (size_t)m + (size_t)l];
            if (ail == 0.0) {
                continue;
            }
            const double *bl = b + (size_t)l * (size_t)m;
            for (int j = 0; j < m; j++) {
                ci[j] += ail * bl[j];
            }
        }
    }
}

/* Scales v by 2^-KS_SCALE_BITS (exactly) while its largest entry is huge,
 * adding the bits to *e. */
static void ks_rescale(double *v, int m, int64_t *e)
{
    size_t mm = (size_t)m * (size_t)m;
    double big = 0.0;
    for (size_t i = 0; i < mm; i++) {
        if (fabs(v[i]) > big) {
            big = fabs(v[i]);
        }
    }
    /* As often as it takes: a squared matrix can exceed the scale by far
     * more than one step of it (n = 41,606, d = 0.003 grew by 1e140 a
     * squaring, and one step a squaring overflowed to inf, then NaN). */
    int steps = 0;
    while (big > KS_SCALE_BIG) {
        big = ldexp(big, -KS_SCALE_BITS);
        steps++;
    }
    if (steps > 0) {
        for (size_t i = 0; i < mm; i++) {
            v[i] = ldexp(v[i], -KS_SCALE_BITS * steps);
        }
        *e += (int64_t)KS_SCALE_BITS * steps;
    }
}

/* Matrix products needed for H^n by left-to-right binary powering. */
static int ks_products(int64_t n)
{
    int bits = 0, ones = 0;
    for (int64_t t = n; t > 0; t >>= 1) {
        bits++;
        ones += (int)(t & 1);
    }
    return (bits - 1) + (ones - 1);
}

/* The exact CDF K(n, d) = P(D_n < d) for 1/(2n) < d < 1, k <= KS_EXACT_MAX_K. */
static enum assay_status ks_exact_cdf(int64_t n, double d, double *cdf)
{
    double nd = (double)n * d;
    int k = (int)floor(nd) + 1;
    int m = 2 * k - 1;
    double h = (double)k - nd; /* in (0, 1] */
    size_t mm = (size_t)m * (size_t)m;
    double *hm = assay_malloc(mm * sizeof *hm); // (m, m) the matrix H
    double *v = assay_malloc(mm * sizeof *v);   // (m, m) the running power
    double *w = assay_malloc((mm + 1) * sizeof *w); // (m, m) scratch, + 1 for 1/g!
    if (hm == NULL || v == NULL || w == NULL) {
        assay_free(hm);
        assay_free(v);
        assay_free(w);
        return ASSAY_ERR_NOMEM;
    }

    /* H: ones on and below the first superdiagonal; the first column and the
     * last row lose powers of h; the corner gains (2h - 1)^m when positive;
     * then entry (i, j) is divided by (i - j + 1)!. (MTW 2003, section 2.) */
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < m; j++) {
            hm[(size_t)i * (size_t)m + (size_t)j] = (i - j + 1 >= 0) ? 1.0 : 0.0;
        }
    }
    for (int i = 0; i < m; i++) {
        hm[(size_t)i * (size_t)m] -= pow(h, i + 1);
        hm[(size_t)(m - 1) * (size_t)m + (size_t)i] -= pow(h, m - i);
    }
    if (2.0 * h - 1.0 > 0.0) {
        hm[(size_t)(m - 1) * (size_t)m] += pow(2.0 * h - 1.0, m);
    }
    double *inv_fact = w; /* 1/g! for g = 0 .. m, in the scratch (m^2 + 1 >= m + 1) */
    inv_fact[0] = 1.0;
    for (int g = 1; g <= m; g++) {
        inv_fact[g] = inv_fact[g - 1] / g; /* underflows gracefully to 0 */
    }
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < m; j++) {
            int g = i - j + 1;
            if (g > 0) {
                hm[(size_t)i * (size_t)m + (size_t)j] *= inv_fact[g];
            }
        }
    }

    /* H^n, left to right over the bits of n; v = H^e * 2^ev. */
    int top = 62;
    while (((n >> top) & 1) == 0) {
        top--;
    }
    memcpy(v, hm, mm * sizeof *v);
    int64_t ev = 0;
    for (int bit = top - 1; bit >= 0; bit--) {
        ks_matmul(v, v, w, m);
        ev *= 2;
        ks_rescale(w, m, &ev);
        double *t = v;
        v = w;
        w = t;
        if ((n >> bit) & 1) {
            ks_matmul(v, hm, w, m);
            ks_rescale(w, m, &ev);
            t = v;
            v = w;
            w = t;
        }
    }

    /* K = n!/n^n (H^n)_{k-1,k-1}, the factor applied step by step so that
     * nothing under- or overflows. */
    double s = v[(size_t)(k - 1) * (size_t)m + (size_t)(k - 1)];
    for (int64_t i = 1; i <= n; i++) {
        s = s * (double)i / (double)n;
        if (s < 1.0 / KS_SCALE_BIG) {
            s = ldexp(s, KS_SCALE_BITS);
            ev -= KS_SCALE_BITS;
        }
    }
    assay_free(hm);
    assay_free(v);
    assay_free(w);
    if (ev > INT_MAX || ev < INT_MIN) {
        *cdf = ev > 0 ? INFINITY : 0.0;
    } else {
        *cdf = ldexp(s, (int)ev);
    }
    return isfinite(*cdf) ? ASSAY_OK : ASSAY_ERR_NUMERIC;
}

/* The exact limits shared by the KS functions: returns true and sets *p
 * when d needs no computation. */
static bool ks_trivial(int64_t n, double d, double *p)
{
    if (d <= 0.5 / (double)n) {
        *p = 1.0;
        return true;
    }
    if (d >= 1.0) {
        *p = 0.0;
        return true;
    }
    return false;
}

enum assay_status assay_ks_pvalue_exact(int64_t n, double d, double *p)
{
    if (n < 1 || isnan(d) || p == NULL) {
        return ASSAY_ERR_INVALID;
    }
    if (ks_trivial(n, d, p)) {
        return ASSAY_OK;
    }
    if (n > KS_MAX_N || floor((double)n * d) + 1 > KS_EXACT_MAX_K) {
        return ASSAY_ERR_UNSUPPORTED;
    }
    double cdf;
    enum assay_status st = ks_exact_cdf(n, d, &cdf);
    if (st != ASSAY_OK) {
        return st;
    }
    *p = fmin(1.0, fmax(0.0, 1.0 - cdf));
    return ASSAY_OK;
}

enum assay_status assay_ks_pvalue_asymptotic(int64_t n, double d, double *p)
{
    if (n < 1 || isnan(d) || p == NULL) {
        return ASSAY_ERR_INVALID;
    }
    if (d <= 0.0) {
        *p = 1.0;
        return ASSAY_OK;
    }
    double rn = sqrt((double)n);
    double lambda = (rn + 0.12 + 0.11 / rn) * d;
    double q;
    if (lambda < 1.0) {
        /* The theta form of the limiting CDF, fast for small lambda. */
        double sum = 0.0;
        double c = M_PI * M_PI / (8.0 * lambda * lambda);
        for (int j = 1; j < 1000; j++) {
            double t = exp(-(double)((2 * j - 1) * (2 * j - 1)) * c);
            sum += t;
            if (t <= 1e-17 * sum) {
                break;
            }
        }
        q = 1.0 - sqrt(2.0 * M_PI) / lambda * sum;
    } else {
        double sum = 0.0;
        for (int j = 1; j < 1000; j++) {
            double t = exp(-2.0 * (double)j * (double)j * lambda * lambda);
            sum += (j % 2 == 1) ? t : -t;
            if (t <= 1e-17 * sum) {
                break;
            }
        }
        q = 2.0 * sum;
    }
    *p = fmin(1.0, fmax(0.0, q));
    return ASSAY_OK;
}

enum assay_status assay_ks_pvalue_one_sided(int64_t n, double d, double *p)
{
    if (n < 1 || isnan(d) || p == NULL) {
        return ASSAY_ERR_INVALID;
    }
    if (d <= 0.0) {
        *p = 1.0;
        return ASSAY_OK;
    }
    if (d >= 1.0) {
        *p = 0.0;
        return ASSAY_OK;
    }
    if (n > KS_MAX_N) {
        return ASSAY_ERR_UNSUPPORTED;
    }
    double dn = (double)n;
    int64_t jmax = (int64_t)floor(dn * (1.0 - d));
    double sum = 0.0;
    for (int64_t j = 0; j <= jmax; j++) {
        double dj = (double)j;
        double a = 1.0 - d - dj / dn;
        if (a <= 0.0) {
            continue; /* the term is 0 (n - j > 0 here) */
        }
        gsl_sf_result lc;
        if (gsl_sf_lnchoose_e((unsigned)n, (unsigned)j, &lc) != GSL_SUCCESS) {
            return ASSAY_ERR_NUMERIC;
        }
        sum += exp(lc.val + (dn - dj) * log(a) + (dj - 1.0) * log(d + dj / dn));
    }
    *p = fmin(1.0, fmax(0.0, d * sum));
    return ASSAY_OK;
}

enum assay_status assay_ks_pvalue(int64_t n, double d, double *p)
{
    if (n < 1 || isnan(d) || p == NULL) {
        return ASSAY_ERR_INVALID;
    }
    if (ks_trivial(n, d, p)) {
        return ASSAY_OK;
    }
    enum assay_status st;
    /* The tail: 2 P(D+ >= d), worth its O(n) cost only when the
     * asymptotic estimate says the p-value is small. */
    double approx;
    st = assay_ks_pvalue_asymptotic(n, d, &approx);
    if (st != ASSAY_OK) {
        return st;
    }
    if (n <= KS_TAIL_MAX_N && approx < 10.0 * KS_TAIL_P) {
        double one;
        st = assay_ks_pvalue_one_sided(n, d, &one);
        if (st != ASSAY_OK) {
            return st;
        }
        if (2.0 * one <= KS_TAIL_P) {
            *p = 2.0 * one;
            return ASSAY_OK;
        }
    }
    double k = floor((double)n * d) + 1.0;
    double m = 2.0 * k - 1.0;
    if (n <= KS_MAX_N && k <= KS_EXACT_MAX_K &&
        m * m * m * (double)ks_products(n) <= KS_EXACT_BUDGET) {
        return assay_ks_pvalue_exact(n, d, p);
    }
    *p = approx;
    return ASSAY_OK;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum assay_status assay_ks_uniform(const double *u, size_t n, double *d, double *p)
{
    if (u == NULL || n == 0 || n > (size_t)INT64_MAX) {
        return ASSAY_ERR_INVALID;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(u[i] >= 0.0 && u[i] <= 1.0)) {
            return ASSAY_ERR_INVALID;
        }
    }
    double *s = assay_malloc(n * sizeof *s);
    if (s == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    memcpy(s, u, n * sizeof *s);
    qsort(s, n, sizeof *s, compare_double);
    double dn = (double)n, dmax = 0.0;
    for (size_t i = 0; i < n; i++) {
        double plus = (double)(i + 1) / dn - s[i];
        double minus = s[i] - (double)i / dn;
        dmax = fmax(dmax, fmax(plus, minus));
    }
    assay_free(s);
    double pv = NAN;
    if (p != NULL) {
        enum assay_status st = assay_ks_pvalue((int64_t)n, dmax, &pv);
        if (st != ASSAY_OK) {
            return st;
        }
        *p = pv;
    }
    if (d != NULL) {
        *d = dmax;
    }
    return ASSAY_OK;
}

/* ---- Noncentral chi-squared and power --------------------------------- */

/* Stop each side of the Poisson sum once its remaining mass is below this. */
#define NCCHISQ_SIDE_MASS 5e-15
/* The sum takes ~16 sqrt(lambda/2) terms; beyond this it is too slow. */
#define NCCHISQ_MAX_LAMBDA 1e8

/* One term's central tail, checked. */
static enum assay_status chisq_Q_checked(double x, double df, double *q)
{
    double v = gsl_cdf_chisq_Q(x, df);
    if (!is_probability(v)) {
        return ASSAY_ERR_NUMERIC;
    }
    *q = v;
    return ASSAY_OK;
}

enum assay_status assay_ncchisq_Q(double x, double df, double lambda, double *q)
{
    if (isnan(x) || !isfinite(df) || df <= 0.0 || !isfinite(lambda) || lambda < 0.0 ||
        q == NULL) {
        return ASSAY_ERR_INVALID;
    }
    if (lambda > NCCHISQ_MAX_LAMBDA) {
        return ASSAY_ERR_UNSUPPORTED;
    }
    if (x <= 0.0) {
        *q = 1.0;
        return ASSAY_OK;
    }
    if (isinf(x)) {
        *q = 0.0;
        return ASSAY_OK;
    }
    enum assay_status st;
    double mu = lambda / 2.0;
    if (mu == 0.0) {
        return chisq_Q_checked(x, df, q);
    }
    double j0 = floor(mu);
    gsl_sf_result lf;
    if (gsl_sf_lngamma_e(j0 + 1.0, &lf) != GSL_SUCCESS) {
        return ASSAY_ERR_NUMERIC;
    }
    double w0 = exp(j0 * log(mu) - mu - lf.val);
    double qj;
    st = chisq_Q_checked(x, df + 2.0 * j0, &qj);
    if (st != ASSAY_OK) {
        return st;
    }
    /* The weights are known up to the common factor w0, whose logarithm
     * loses ~1e-16 |j0 log mu| when mu is large; dividing by the summed
     * weights (>= 1 - 1e-14 of the mass) removes that error. */
    double sum = w0 * qj, mass = w0;

    /* Upward: the ratio of successive weights mu/(j+1) is below 1 and falls,
     * so the mass beyond j is at most w r / (1 - r). */
    double w = w0;
    for (double j = j0 + 1.0;; j += 1.0) {
        w *= mu / j;
        st = chisq_Q_checked(x, df + 2.0 * j, &qj);
        if (st != ASSAY_OK) {
            return st;
        }
        sum += w * qj;
        mass += w;
        double r = mu / (j + 1.0);
        if (w * r / (1.0 - r) < NCCHISQ_SIDE_MASS) {
            break;
        }
    }
    /* Downward: the ratio j/mu of the next weight down is at most 1 and falls. */
    w = w0;
    for (double j = j0; j > 0.0; j -= 1.0) {
        w *= j / mu;
        st = chisq_Q_checked(x, df + 2.0 * (j - 1.0), &qj);
        if (st != ASSAY_OK) {
            return st;
        }
        sum += w * qj;
        mass += w;
        double r = (j - 1.0) / mu;
        if (r < 1.0 && w * r / (1.0 - r) < NCCHISQ_SIDE_MASS) {
            break;
        }
    }
    if (!isfinite(sum) || !(mass > 0.0) || !isfinite(mass)) {
        return ASSAY_ERR_NUMERIC;
    }
    *q = fmin(1.0, fmax(0.0, sum / mass));
    return ASSAY_OK;
}

static bool power_args_ok(double alpha, int32_t df, double power)
{
    return is_level(alpha) && is_level(power) && power > alpha && df >= 1;
}

enum assay_status assay_chisq_lambda_for_power(double alpha, int32_t df, double power,
                                               double *lambda)
{
    if (!power_args_ok(alpha, df, power) || lambda == NULL) {
        return ASSAY_ERR_INVALID;
    }
    double crit = gsl_cdf_chisq_Qinv(alpha, (double)df);
    if (!isfinite(crit) || crit <= 0.0) {
        return ASSAY_ERR_NUMERIC;
    }
    enum assay_status st;
    /* f(l) = power(l) - power rises with l; f(0) = alpha - power < 0. */
    double a = 0.0, fa = alpha - power;
    double b = 16.0, fb;
    for (;;) {
        double q;
        st = assay_ncchisq_Q(crit, (double)df, b, &q);
        if (st != ASSAY_OK) {
            return st;
        }
        fb = q - power;
        if (fb >= 0.0) {
            break;
        }
        a = b;
        fa = fb;
        b *= 2.0;
        if (b > 1e8) {
            return ASSAY_ERR_NUMERIC;
        }
    }
    /* Illinois: regula falsi that halves the stale end's value when the same
     * end is kept twice, so both ends close in; bisect if a step misbehaves. */
    int side = 0;
    for (int iter = 0; iter < 200; iter++) {
        if (b - a <= 1e-9 * b) {
            *lambda = 0.5 * (a + b);
            return ASSAY_OK;
        }
        double c = (fb - fa) != 0.0 ? b - fb * (b - a) / (fb - fa) : 0.5 * (a + b);
        if (!(c > a && c < b)) {
            c = 0.5 * (a + b);
        }
        double q;
        st = assay_ncchisq_Q(crit, (double)df, c, &q);
        if (st != ASSAY_OK) {
            return st;
        }
        double fc = q - power;
        if (fc == 0.0) {
            *lambda = c;
            return ASSAY_OK;
        }
        if (fc < 0.0) {
            a = c;
            fa = fc;
            if (side == -1) {
                fb *= 0.5;
            }
            side = -1;
        } else {
            b = c;
            fb = fc;
            if (side == 1) {
                fa *= 0.5;
            }
            side = 1;
        }
    }
    return ASSAY_ERR_NUMERIC;
}

enum assay_status assay_min_detectable_tv(double alpha, int32_t df, double power, double n,
                                          double *tv)
{
    if (!power_args_ok(alpha, df, power) || !isfinite(n) || n <= 0.0 || tv == NULL) {
        return ASSAY_ERR_INVALID;
    }
    double lambda;
    enum assay_status st = assay_chisq_lambda_for_power(alpha, df, power, &lambda);
    if (st != ASSAY_OK) {
        return st;
    }
    *tv = 0.5 * sqrt(lambda / n);
    return ASSAY_OK;
}

/* ---- Chi-squared goodness of fit and homogeneity ---------------------- */

struct ranked {
    double key; /* probability or combined count */
    int32_t index;
};

/* Descending key, ties by ascending index: a total order, so qsort is
 * deterministic. */
static int compare_ranked(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->key != y->key) {
        return x->key > y->key ? -1 : 1;
    }
    return (x->index > y->index) - (x->index < y->index);
}

void assay_gof_bins_free(struct assay_gof_bins *bins)
{
    if (bins == NULL) {
        return;
    }
    assay_free(bins->bin_of);
    assay_free(bins->prob);
    assay_free(bins);
}

/*
 * The pooling rule shared by both tests. rank[0..n_possible) holds the
 * possible categories in order and own_ok(rank[i]) says whether one may be
 * its own bin; since the order is by descending expected count, those form
 * a prefix. Fills bin_of for the ranked categories and returns the number of
 * bins, the own bins and the tail bin (-1 when none).
 */
struct pooling {
    int32_t n_bins, n_own, tail_bin, n_pooled;
};

static struct pooling pool_ranked(const struct ranked *rank, int32_t n_possible, int32_t n_own,
                                  bool tail_big_enough, int32_t *bin_of)
{
    struct pooling pl = {0, n_own, -1, n_possible - n_own};
    for (int32_t i = 0; i < n_own; i++) {
        bin_of[rank[i].index] = i;
    }
    if (pl.n_pooled == 0) {
        pl.n_bins = n_own;
        return pl;
    }
    if (tail_big_enough || n_own == 0) {
        pl.tail_bin = n_own;
        pl.n_bins = n_own + 1;
    } else {
        pl.tail_bin = n_own - 1; /* joins the smallest own bin */
        pl.n_bins = n_own;
    }
    for (int32_t i = n_own; i < n_possible; i++) {
        bin_of[rank[i].index] = pl.tail_bin;
    }
    return pl;
}

enum assay_status assay_gof_bins_make(const double *prob, int32_t k, double n,
                                      double min_expected, struct assay_gof_bins **out)
{
    if (out == NULL) {
        return ASSAY_ERR_INVALID;
    }
    *out = NULL;
    if (prob == NULL || k < 1 || !isfinite(n) || n <= 0.0 || !isfinite(min_expected) ||
        min_expected < 0.0) {
        return ASSAY_ERR_INVALID;
    }
    double total = 0.0;
    for (int32_t i = 0; i < k; i++) {
        if (!isfinite(prob[i]) || prob[i] < 0.0) {
            return ASSAY_ERR_INVALID;
        }
        total += prob[i];
    }
    if (!(fabs(total - 1.0) <= 1e-9)) {
        return ASSAY_ERR_INVALID;
    }

    struct assay_gof_bins *bins = assay_calloc(1, sizeof *bins);
    struct ranked *rank = assay_malloc((size_t)k * sizeof *rank);
    if (bins == NULL || rank == NULL) {
        assay_free(bins);
        assay_free(rank);
        return ASSAY_ERR_NOMEM;
    }
    bins->bin_of = assay_malloc((size_t)k * sizeof *bins->bin_of);
    if (bins->bin_of == NULL) {
        assay_free(rank);
        assay_gof_bins_free(bins);
        return ASSAY_ERR_NOMEM;
    }
    bins->k = k;
    bins->n = n;
    bins->min_expected = min_expected;

    int32_t n_possible = 0;
    for (int32_t i = 0; i < k; i++) {
        bins->bin_of[i] = -1;
        if (prob[i] > 0.0) {
            rank[n_possible].key = prob[i];
            rank[n_possible].index = i;
            n_possible++;
        }
    }
    bins->n_impossible_categories = k - n_possible;
    qsort(rank, (size_t)n_possible, sizeof *rank, compare_ranked);
    bins->top = n_possible > 0 ? rank[0].index : -1;
    bins->top_prob = n_possible > 0 ? rank[0].key : 0.0;

    int32_t n_own = 0;
    while (n_own < n_possible && n * rank[n_own].key >= min_expected) {
        n_own++;
    }
    double tail = 0.0;
    for (int32_t i = n_possible - 1; i >= n_own; i--) { /* smallest first */
        tail += rank[i].key;
    }
    struct pooling pl =
        pool_ranked(rank, n_possible, n_own, n * tail >= min_expected, bins->bin_of);
    bins->n_bins = pl.n_bins;
    bins->n_own = pl.n_own;
    bins->tail_bin = pl.tail_bin;
    bins->n_pooled = pl.n_pooled;

    bins->prob = assay_calloc(pl.n_bins > 0 ? (size_t)pl.n_bins : 1, sizeof *bins->prob);
    if (bins->prob == NULL) {
        assay_free(rank);
        assay_gof_bins_free(bins);
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t i = n_possible - 1; i >= 0; i--) { /* smallest first */
        bins->prob[bins->bin_of[rank[i].index]] += rank[i].key;
    }
    assay_free(rank);
    *out = bins;
    return ASSAY_OK;
}

/* Fills the fields common to both tests once X^2 and df are known. */
static enum assay_status finish_result(double alpha, double power, double x2, int32_t n_bins,
                                       double n_eff, struct assay_test_result *r)
{
    r->alpha = alpha;
    r->power = power;
    r->n_bins = n_bins;
    r->df = n_bins > 0 ? n_bins - 1 : 0;
    r->n_eff = n_eff;
    r->degenerate = n_bins < 2 || !(n_eff > 0.0);
    if (r->degenerate) {
        r->statistic = NAN;
        r->p_value = NAN;
        r->min_tv = NAN;
        return ASSAY_OK;
    }
    if (!isfinite(x2)) {
        return ASSAY_ERR_NUMERIC;
    }
    r->statistic = x2;
    double pv = gsl_cdf_chisq_Q(x2, (double)r->df);
    if (!is_probability(pv)) {
        return ASSAY_ERR_NUMERIC;
    }
    r->p_value = pv;
    return assay_min_detectable_tv(alpha, r->df, power, n_eff, &r->min_tv);
}

/* P(X >= x) for X ~ Binomial(n, q). */
static double binomial_at_least(int64_t x, double q, int64_t n)
{
    if (x <= 0) {
        return 1.0;
    }
    if (x > n) {
        return 0.0;
    }
    return gsl_cdf_binomial_Q((unsigned)(x - 1), q, (unsigned)n);
}

/* The exact binomial test of assay_gof_test's one-bin case into r: x of n
 * samples off the top category, q its complement's probability. */
static enum assay_status binomial_test(int64_t x, int64_t n, double q, double alpha, double power,
                                       struct assay_test_result *r)
{
    if (n > (int64_t)UINT_MAX) {
        return ASSAY_ERR_INVALID;
    }
    q = q < 0.0 ? 0.0 : q > 1.0 ? 1.0 : q;
    double hi = binomial_at_least(x, q, n);
    double lo = x >= n ? 1.0 : 1.0 - binomial_at_least(x + 1, q, n);
    double pv = 2.0 * (hi < lo ? hi : lo);
    pv = pv > 1.0 ? 1.0 : pv;
    if (!is_probability(pv)) {
        return ASSAY_ERR_NUMERIC;
    }
    /* The upper critical count: the least c with P(X >= c) <= alpha / 2. */
    int64_t c_lo = 0, c_hi = n + 1;
    while (c_lo < c_hi) {
        int64_t mid = c_lo + (c_hi - c_lo) / 2;
        if (binomial_at_least(mid, q, n) <= alpha / 2.0) {
            c_hi = mid;
        } else {
            c_lo = mid + 1;
        }
    }
    double d_lo = 0.0, d_hi = 1.0 - q, min_tv = NAN;
    if (c_lo <= n && binomial_at_least(c_lo, q + d_hi, n) >= power) {
        for (int i = 0; i < 60; i++) {
            double mid = 0.5 * (d_lo + d_hi);
            if (binomial_at_least(c_lo, q + mid, n) >= power) {
                d_hi = mid;
            } else {
                d_lo = mid;
            }
        }
        min_tv = d_hi;
    }
    r->alpha = alpha;
    r->power = power;
    r->statistic = (double)x;
    r->p_value = pv;
    r->min_tv = min_tv;
    r->n_eff = (double)n;
    r->df = 1;
    r->n_bins = 1;
    r->degenerate = !(n > 0);
    r->one_bin = true;
    return ASSAY_OK;
}

enum assay_status assay_gof_test(const struct assay_gof_bins *bins, const int64_t *counts,
                                 double alpha, double power, struct assay_test_result *out)
{
    return assay_gof_test_missing(bins, counts, 0, alpha, power, out);
}

enum assay_status assay_gof_test_missing(const struct assay_gof_bins *bins,
                                         const int64_t *counts, int64_t n_missing, double alpha,
                                         double power, struct assay_test_result *out)
{
    if (bins == NULL || counts == NULL || out == NULL || !power_args_ok(alpha, 1, power) ||
        n_missing < 0) {
        return ASSAY_ERR_INVALID;
    }
    int64_t n = 0, n_impossible = 0;
    for (int32_t i = 0; i < bins->k; i++) {
        if (counts[i] < 0 || counts[i] > INT64_MAX - n) {
            return ASSAY_ERR_INVALID;
        }
        n += counts[i];
        if (bins->bin_of[i] < 0) {
            n_impossible += counts[i];
        }
    }
    if (n_missing > INT64_MAX - n) {
        return ASSAY_ERR_INVALID;
    }
    n += n_missing;
    double *observed = assay_calloc(bins->n_bins > 0 ? (size_t)bins->n_bins : 1, sizeof *observed);
    if (observed == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t i = 0; i < bins->k; i++) {
        if (bins->bin_of[i] >= 0) {
            observed[bins->bin_of[i]] += (double)counts[i];
        }
    }
    /* The missing samples are in n_possible and in no bin. */
    double n_possible = (double)(n - n_impossible);
    double x2 = 0.0;
    for (int32_t b = 0; b < bins->n_bins; b++) {
        double e = n_possible * bins->prob[b];
        double diff = observed[b] - e;
        x2 += diff * diff / e;
    }
    assay_free(observed);

    struct assay_test_result r;
    memset(&r, 0, sizeof r);
    r.n = n;
    r.n_impossible = n_impossible;
    r.n_missing = n_missing;
    enum assay_status st = finish_result(alpha, power, x2, bins->n_bins, n_possible, &r);
    if (st != ASSAY_OK) {
        return st;
    }
    *out = r;
    return ASSAY_OK;
}

enum assay_status assay_gof_test_one_bin(const struct assay_gof_bins *bins,
                                         const int64_t *counts, int64_t n_missing, double alpha,
                                         double power, struct assay_test_result *out)
{
    struct assay_test_result r;
    enum assay_status st = assay_gof_test_missing(bins, counts, n_missing, alpha, power, &r);
    if (st != ASSAY_OK) {
        return st;
    }
    if (bins->n_bins != 1 || bins->top < 0) {
        return ASSAY_ERR_INVALID;
    }
    int64_t n_possible = r.n - r.n_impossible;
    st = binomial_test(n_possible - counts[bins->top], n_possible, 1.0 - bins->top_prob, alpha,
                       power, &r);
    if (st == ASSAY_OK) {
        *out = r;
    }
    return st;
}

/*
 * The homogeneity test's bins for a and b (k categories, totals n1 and n2,
 * both > 0): bin_of[0..k) for every category (-1: no sample in either),
 * the pooling into *pl. ASSAY_ERR_NOMEM (bin_of then unspecified).
 */
static enum assay_status homogeneity_pool(const int64_t *a, const int64_t *b, int32_t k,
                                          int64_t n1, int64_t n2, double min_expected,
                                          int32_t *bin_of, struct pooling *pl)
{
    struct ranked *rank = assay_malloc((size_t)k * sizeof *rank);
    if (rank == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    int32_t n_present = 0;
    for (int32_t i = 0; i < k; i++) {
        bin_of[i] = -1;
        if (a[i] + b[i] > 0) {
            rank[n_present].key = (double)(a[i] + b[i]);
            rank[n_present].index = i;
            n_present++;
        }
    }
    qsort(rank, (size_t)n_present, sizeof *rank, compare_ranked);

    double dn1 = (double)n1, dn2 = (double)n2, dn = dn1 + dn2;
    double small = fmin(dn1, dn2) / dn; /* the smaller expected cell per unit of c */
    int32_t n_own = 0;
    while (n_own < n_present && small * rank[n_own].key >= min_expected) {
        n_own++;
    }
    double tail = 0.0;
    for (int32_t i = n_own; i < n_present; i++) {
        tail += rank[i].key;
    }
    *pl = pool_ranked(rank, n_present, n_own, small * tail >= min_expected, bin_of);
    assay_free(rank);
    return ASSAY_OK;
}

/* The totals of a and b, checked as assay_homogeneity_test states. */
static bool homogeneity_totals(const int64_t *a, const int64_t *b, int32_t k, double min_expected,
                               int64_t *n1, int64_t *n2)
{
    if (a == NULL || b == NULL || k < 1 || !isfinite(min_expected) || min_expected < 0.0) {
        return false;
    }
    *n1 = 0;
    *n2 = 0;
    for (int32_t i = 0; i < k; i++) {
        if (a[i] < 0 || b[i] < 0 || a[i] > INT64_MAX / 2 - *n1 || b[i] > INT64_MAX / 2 - *n2) {
            return false;
        }
        *n1 += a[i];
        *n2 += b[i];
    }
    return *n1 > 0 && *n2 > 0;
}

enum assay_status assay_homogeneity_test(const int64_t *a, const int64_t *b, int32_t k,
                                         double alpha, double power, double min_expected,
                                         struct assay_test_result *out)
{
    int64_t n1 = 0, n2 = 0;
    if (out == NULL || !power_args_ok(alpha, 1, power) ||
        !homogeneity_totals(a, b, k, min_expected, &n1, &n2)) {
        return ASSAY_ERR_INVALID;
    }

    int32_t *bin_of = assay_malloc((size_t)k * sizeof *bin_of);
    double *oa = assay_calloc((size_t)k, sizeof *oa); /* observed per bin, sample a */
    double *ob = assay_calloc((size_t)k, sizeof *ob); /* observed per bin, sample b */
    struct pooling pl;
    enum assay_status st = bin_of == NULL || oa == NULL || ob == NULL
                               ? ASSAY_ERR_NOMEM
                               : homogeneity_pool(a, b, k, n1, n2, min_expected, bin_of, &pl);
    if (st != ASSAY_OK) {
        assay_free(bin_of);
        assay_free(oa);
        assay_free(ob);
        return st;
    }
    double dn1 = (double)n1, dn2 = (double)n2, dn = dn1 + dn2;
    for (int32_t i = 0; i < k; i++) {
        if (bin_of[i] >= 0) {
            oa[bin_of[i]] += (double)a[i];
            ob[bin_of[i]] += (double)b[i];
        }
    }
    double x2 = 0.0;
    for (int32_t j = 0; j < pl.n_bins; j++) {
        double c = oa[j] + ob[j];
        double ea = dn1 * c / dn, eb = dn2 * c / dn;
        x2 += (oa[j] - ea) * (oa[j] - ea) / ea + (ob[j] - eb) * (ob[j] - eb) / eb;
    }
    assay_free(bin_of);
    assay_free(oa);
    assay_free(ob);

    struct assay_test_result r;
    memset(&r, 0, sizeof r);
    r.n = n1 + n2;
    st = finish_result(alpha, power, x2, pl.n_bins, dn1 * dn2 / dn, &r);
    if (st != ASSAY_OK) {
        return st;
    }
    *out = r;
    return ASSAY_OK;
}

enum assay_status assay_homogeneity_test_one_bin(const int64_t *a, const int64_t *b, int32_t k,
                                                 double alpha, double power,
                                                 struct assay_test_result *out)
{
    int64_t n1 = 0, n2 = 0;
    if (out == NULL || !power_args_ok(alpha, 1, power) ||
        !homogeneity_totals(a, b, k, 0.0, &n1, &n2) || n1 + n2 > (int64_t)UINT_MAX) {
        return ASSAY_ERR_INVALID;
    }
    int32_t top = 0;
    for (int32_t i = 1; i < k; i++) {
        top = a[i] + b[i] > a[top] + b[top] ? i : top;
    }
    int64_t x1 = n1 - a[top], x2 = n2 - b[top], t = x1 + x2;
    /* X, sample a's share of the t samples off the top, is hypergeometric
     * given the margins: t draws from n1 of a and n2 of b. */
    double le = gsl_cdf_hypergeometric_P((unsigned)x1, (unsigned)n1, (unsigned)n2, (unsigned)t);
    double ge = x1 == 0 ? 1.0
                        : gsl_cdf_hypergeometric_Q((unsigned)(x1 - 1), (unsigned)n1, (unsigned)n2,
                                                   (unsigned)t);
    double pv = 2.0 * (le < ge ? le : ge);
    pv = pv > 1.0 ? 1.0 : pv;
    if (!is_probability(pv)) {
        return ASSAY_ERR_NUMERIC;
    }
    double dn1 = (double)n1, dn2 = (double)n2;
    double q = (double)t / (dn1 + dn2);
    q = q > 1.0 / (dn1 + dn2) ? q : 1.0 / (dn1 + dn2);
    double z = gsl_cdf_ugaussian_Pinv(1.0 - alpha / 2.0) + gsl_cdf_ugaussian_Pinv(power);
    struct assay_test_result r;
    memset(&r, 0, sizeof r);
    r.alpha = alpha;
    r.power = power;
    r.statistic = (double)x1;
    r.p_value = pv;
    r.min_tv = z * sqrt(q * (1.0 - q) * (1.0 / dn1 + 1.0 / dn2));
    r.n_eff = dn1 * dn2 / (dn1 + dn2);
    r.n = n1 + n2;
    r.df = 1;
    r.n_bins = 1;
    r.one_bin = true;
    *out = r;
    return ASSAY_OK;
}

enum assay_status assay_homogeneity_bins_make(const int64_t *a, const int64_t *b, int32_t k,
                                              double min_expected, struct assay_gof_bins **out)
{
    int64_t n1 = 0, n2 = 0;
    if (out == NULL) {
        return ASSAY_ERR_INVALID;
    }
    *out = NULL;
    if (!homogeneity_totals(a, b, k, min_expected, &n1, &n2)) {
        return ASSAY_ERR_INVALID;
    }
    struct assay_gof_bins *bins = assay_calloc(1, sizeof *bins);
    if (bins == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    bins->bin_of = assay_malloc((size_t)k * sizeof *bins->bin_of);
    struct pooling pl;
    enum assay_status st = bins->bin_of == NULL
                               ? ASSAY_ERR_NOMEM
                               : homogeneity_pool(a, b, k, n1, n2, min_expected, bins->bin_of, &pl);
    if (st == ASSAY_OK) {
        bins->prob = assay_calloc(pl.n_bins > 0 ? (size_t)pl.n_bins : 1, sizeof *bins->prob);
        st = bins->prob == NULL ? ASSAY_ERR_NOMEM : ASSAY_OK;
    }
    if (st != ASSAY_OK) {
        assay_gof_bins_free(bins);
        return st;
    }
    double dn = (double)(n1 + n2);
    int32_t n_present = 0;
    for (int32_t i = 0; i < k; i++) {
        if (bins->bin_of[i] >= 0) {
            bins->prob[bins->bin_of[i]] += (double)(a[i] + b[i]) / dn;
            n_present++;
        }
    }
    bins->k = k;
    bins->n_bins = pl.n_bins;
    bins->n_own = pl.n_own;
    bins->tail_bin = pl.tail_bin;
    bins->n_pooled = pl.n_pooled;
    bins->n_impossible_categories = k - n_present;
    bins->n = dn;
    bins->min_expected = min_expected;
    *out = bins;
    return ASSAY_OK;
}

/* ---- Multiple testing and binomial bounds ----------------------------- */

/* Indices of p sorted ascending, ties by index; NULL when out of memory. */
static size_t *sorted_order(const double *p, size_t m)
{
    struct ranked *rank = assay_malloc(m * sizeof *rank);
    size_t *order = assay_malloc(m * sizeof *order);
    if (rank == NULL || order == NULL) {
        assay_free(rank);
        assay_free(order);
        return NULL;
    }
    for (size_t i = 0; i < m; i++) {
        rank[i].key = -p[i]; /* compare_ranked sorts descending */
        rank[i].index = (int32_t)i;
    }
    qsort(rank, m, sizeof *rank, compare_ranked);
    for (size_t i = 0; i < m; i++) {
        order[i] = (size_t)rank[i].index;
    }
    assay_free(rank);
    return order;
}

static bool holm_args_ok(const double *p, size_t m)
{
    if (m > 0 && p == NULL) {
        return false;
    }
    if (m > (size_t)INT32_MAX) {
        return false;
    }
    for (size_t i = 0; i < m; i++) {
        if (!is_probability(p[i])) {
            return false;
        }
    }
    return true;
}

enum assay_status assay_holm(const double *p, size_t m, double alpha, bool *reject)
{
    if (!holm_args_ok(p, m) || !is_level(alpha) || (m > 0 && reject == NULL)) {
        return ASSAY_ERR_INVALID;
    }
    if (m == 0) {
        return ASSAY_OK;
    }
    size_t *order = sorted_order(p, m);
    if (order == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    bool going = true;
    for (size_t i = 0; i < m; i++) {
        size_t h = order[i];
        going = going && p[h] <= alpha / (double)(m - i);
        reject[h] = going;
    }
    assay_free(order);
    return ASSAY_OK;
}

enum assay_status assay_holm_adjusted(const double *p, size_t m, double *p_adj)
{
    if (!holm_args_ok(p, m) || (m > 0 && (p_adj == NULL || p_adj == p))) {
        return ASSAY_ERR_INVALID;
    }
    if (m == 0) {
        return ASSAY_OK;
    }
    size_t *order = sorted_order(p, m);
    if (order == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    double running = 0.0;
    for (size_t i = 0; i < m; i++) {
        size_t h = order[i];
        running = fmax(running, fmin(1.0, (double)(m - i) * p[h]));
        p_adj[h] = running;
    }
    assay_free(order);
    return ASSAY_OK;
}

enum assay_status assay_binomial_two_sided_bound(int64_t n, double p, double alpha,
                                                 int64_t *lo, int64_t *hi)
{
    if (n < 0 || n > (int64_t)UINT_MAX || !is_probability(p) || !is_level(alpha) ||
        lo == NULL || hi == NULL) {
        return ASSAY_ERR_INVALID;
    }
    unsigned un = (unsigned)n;
    double half = alpha / 2.0;
    /* lo: the smallest c with P(X <= c) > alpha/2; P(X <= n) = 1 > alpha/2. */
    int64_t l = 0, h = n;
    while (l < h) {
        int64_t c = l + (h - l) / 2;
        double cdf = gsl_cdf_binomial_P((unsigned)c, p, un);
        if (!is_probability(cdf)) {
            return ASSAY_ERR_NUMERIC;
        }
        if (cdf > half) {
            h = c;
        } else {
            l = c + 1;
        }
    }
    int64_t lo_v = l;
    /* hi: the smallest c with P(X > c) <= alpha/2; P(X > n) = 0. */
    l = 0;
    h = n;
    while (l < h) {
        int64_t c = l + (h - l) / 2;
        double sf = gsl_cdf_binomial_Q((unsigned)c, p, un);
        if (!is_probability(sf)) {
            return ASSAY_ERR_NUMERIC;
        }
        if (sf <= half) {
            h = c;
        } else {
            l = c + 1;
        }
    }
    *lo = lo_v;
    *hi = l;
    return ASSAY_OK;
}
