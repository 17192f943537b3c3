/*
 * sampler.c - the engine's sampler (sampler.h): assay_sampler_distribution
 * computes the processed next-token distribution (temperature, top-k, top-p
 * in the documented order), assay_sampler_draw picks a token from it by the
 * inverse CDF with a given uniform, and assay_sampling_valid vets the
 * parameters. The engine (engine.c) holds one sampler and calls it for every
 * sampled token, including the p and q of speculative decoding.
 */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>

#include "../core/alloc.h"
#include "../core/mutant.h"

struct rank {
    double z;
    int32_t id;
};

struct assay_sampler {
    int32_t vocab;
    int mutant;
    double *z;      /* (vocab) tempered logits */
    double *e;      /* (vocab) exp(z - max) */
    int32_t *order; /* (vocab) ids by descending z, lower id first on ties */
    struct rank *rank; /* (vocab) a heap of the ids not yet in order */
    int32_t heap_n;    /* ids in the heap */
    int32_t n_ranked;  /* ids in order[] so far */
};

enum assay_status assay_sampler_init(struct assay_sampler **out, int32_t vocab, int mutant)
{
    *out = NULL;
    if (vocab < 1) {
        return ASSAY_ERR_INVALID;
    }
    struct assay_sampler *s = assay_calloc(1, sizeof *s);
    if (s == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    s->vocab = vocab;
    s->mutant = mutant;
    s->z = assay_calloc((size_t)vocab, sizeof *s->z);
    s->e = assay_calloc((size_t)vocab, sizeof *s->e);
    s->order = assay_calloc((size_t)vocab, sizeof *s->order);
    s->rank = assay_calloc((size_t)vocab, sizeof *s->rank);
    if (s->z == NULL || s->e == NULL || s->order == NULL || s->rank == NULL) {
        assay_sampler_free(s);
        return ASSAY_ERR_NOMEM;
    }
    *out = s;
    return ASSAY_OK;
}

void assay_sampler_free(struct assay_sampler *s)
{
    if (s == NULL) {
        return;
    }
    assay_free(s->z);
    assay_free(s->e);
    assay_free(s->order);
    assay_free(s->rank);
    assay_free(s);
}

bool assay_sampling_valid(const struct assay_sampling *s)
{
    return isfinite(s->temperature) && s->temperature >= 0.0f && s->top_k >= 0 &&
           s->top_p > 0.0f && s->top_p <= 1.0f;
}

int32_t assay_sampler_argmax(const float *logits, int32_t vocab)
{
    int32_t best = 0;
    for (int32_t i = 1; i < vocab; i++) {
        if (logits[i] > logits[best]) {
            best = i;
        }
    }
    return best;
}

/* True when a ranks before b: a higher tempered logit, or the same and a
 * lower id (the documented tie rule). */
static bool ranks_before(const struct rank *a, const struct rank *b)
{
    return a->z > b->z || (a->z == b->z && a->id < b->id);
}

static void sift_down(struct rank *h, int32_t n, int32_t i)
{
    for (;;) {
        int32_t best = i, l = 2 * i + 1, r = 2 * i + 2;
        if (l < n && ranks_before(&h[l], &h[best])) {
            best = l;
        }
        if (r < n && ranks_before(&h[r], &h[best])) {
            best = r;
        }
        if (best == i) {
            return;
        }
        struct rank t = h[i];
        h[i] = h[best];
        h[best] = t;
        i = best;
    }
}

/* Ids by descending tempered logit, lower id first on ties, produced
 * lazily: rank_start builds a heap of every id (O(v)) and rank_id pops ids
 * into order[] until rank r is there (O(log v) each). Top-k and top-p look
 * only at the first ranks, so a token costs far less than a full sort (an
 * insertion sort here cost O(v^2) per sampled token, most of the step of a
 * small model). The order is total, so the ranks are those of any sort. */
static void rank_start(struct assay_sampler *s)
{
    for (int32_t i = 0; i < s->vocab; i++) {
        s->rank[i].z = s->z[i];
        s->rank[i].id = i;
    }
    s->heap_n = s->vocab;
    for (int32_t i = s->vocab / 2 - 1; i >= 0; i--) {
        sift_down(s->rank, s->heap_n, i);
    }
    s->n_ranked = 0;
}

/* The id of rank r (0 = most likely), 0 <= r < vocab. */
static int32_t rank_id(struct assay_sampler *s, int32_t r)
{
    while (s->n_ranked <= r) {
        s->order[s->n_ranked++] = s->rank[0].id;
        s->rank[0] = s->rank[--s->heap_n];
        sift_down(s->rank, s->heap_n, 0);
    }
    return s->order[r];
}

/* The weight top-p measures token id by: its tempered weight e, or, with
 * the planted bug topp-untempered, its weight at temperature 1 (lmax the
 * largest logit), as where the temperature is applied after the filters. */
static double topp_weight(const struct assay_sampler *s, const float *logits, double lmax,
                          int32_t id)
{
    if (ASSAY_MUTANT_ON(s->mutant, ASSAY_MUTANT_TOPP_UNTEMPERED)) {
        return exp((double)logits[id] - lmax);
    }
    return s->e[id];
}

#ifdef ASSAY_MUTANTS
/* The planted bug temp-by-sharpness: the kept distribution p (v) re-drawn
 * at another temperature chosen by its own top probability, hotter
 * (p^(1/1.15), temperature 1.15 t) where it is sharp, colder (p^1.15)
 * where it is flat. The kept set does not change, so no token of oracle
 * probability 0 appears: only a statistic can catch it. The level 0.085
 * splits dist.pit.plain's contexts on the mini model so that the two
 * biases cancel in the pooled PIT values (marginal p 1 at seed 1). */
static void mutant_temp_by_sharpness(double *p, int32_t v)
{
    double top = 0.0, total = 0.0;
    for (int32_t i = 0; i < v; i++) {
        top = p[i] > top ? p[i] : top;
    }
    double power = top > 0.085 ? 1.0 / 1.15 : 1.15;
    for (int32_t i = 0; i < v; i++) {
        p[i] = p[i] > 0.0 ? pow(p[i], power) : 0.0;
        total += p[i];
    }
    for (int32_t i = 0; i < v; i++) {
        p[i] /= total;
    }
}
#endif

void assay_sampler_distribution(struct assay_sampler *s, const float *logits,
                                const struct assay_sampling *sp, enum assay_sampling_order order,
                                double *p)
{
    const int32_t v = s->vocab;
    for (int32_t i = 0; i < v; i++) {
        p[i] = 0.0;
    }
    if (sp->temperature <= 0.0f) {
        p[assay_sampler_argmax(logits, v)] = 1.0;
        return;
    }
    if (ASSAY_MUTANT_ON(s->mutant, ASSAY_MUTANT_SOFTMAX_TWICE)) {
        /* The planted bug: softmax(logits) handed on as if it were logits. */
        double lmax = -INFINITY, lsum = 0.0;
        for (int32_t i = 0; i < v; i++) {
            lmax = (double)logits[i] > lmax ? (double)logits[i] : lmax;
        }
        for (int32_t i = 0; i < v; i++) {
            s->e[i] = exp((double)logits[i] - lmax);
            lsum += s->e[i];
        }
        for (int32_t i = 0; i < v; i++) {
            s->z[i] = s->e[i] / lsum;
        }
    }
    double max = -INFINITY;
    for (int32_t i = 0; i < v; i++) {
        double l = ASSAY_MUTANT_ON(s->mutant, ASSAY_MUTANT_SOFTMAX_TWICE) ? s->z[i]
                                                                          : (double)logits[i];
        s->z[i] = l / (double)sp->temperature;
        if (s->z[i] > max) {
            max = s->z[i];
        }
    }
    double total = 0.0;
    for (int32_t i = 0; i < v; i++) {
        s->e[i] = exp(s->z[i] - max);
        if (ASSAY_MUTANT_ON(s->mutant, ASSAY_MUTANT_SOFTMAX_UNSHIFTED)) {
            s->e[i] = (double)expf((float)s->z[i]); /* the planted bug: no shift, in float */
        }
        total += s->e[i];
    }
    int32_t top_k = (sp->top_k > 0 && sp->top_k < v) ? sp->top_k : v;
    if (ASSAY_MUTANT_ON(s->mutant, ASSAY_MUTANT_TOPK_ZERO_KEEPS_ONE) && sp->top_k <= 0) {
        top_k = 1; /* the planted bug: "off" raised to the minimum kept, one token */
    }
    bool use_top_p = sp->top_p < 1.0f;
    if (top_k == v && !use_top_p) {
        for (int32_t i = 0; i < v; i++) {
            p[i] = s->e[i] / total;
        }
#ifdef ASSAY_MUTANTS
        if (ASSAY_MUTANT_ON(s->mutant, ASSAY_MUTANT_TEMP_BY_SHARPNESS)) {
            mutant_temp_by_sharpness(p, v);
        }
#endif
        return;
    }
    rank_start(s);
    if (ASSAY_MUTANT_ON(s->mutant, ASSAY_MUTANT_TOPK_KEEPS_TIES)) {
        /* The planted bug: a threshold at the k-th logit, which keeps
         * every token tied with the k-th instead of the lower id alone. */
        while (top_k < v && s->z[rank_id(s, top_k)] == s->z[rank_id(s, top_k - 1)]) {
            top_k++;
        }
    }
    int32_t kept = top_k;
    if (use_top_p) {
        /* JOINT measures top-p on the full tempered distribution;
         * SEQUENTIAL on the top-k set renormalised. */
        const double lmax = (double)logits[rank_id(s, 0)];
        double mass = total;
        int32_t scan = v;
        if (ASSAY_MUTANT_ON(s->mutant, ASSAY_MUTANT_TOPP_UNTEMPERED)) {
            mass = 0.0;
            for (int32_t i = 0; i < v; i++) {
                mass += topp_weight(s, logits, lmax, i);
            }
        }
        if (order == ASSAY_SAMPLING_SEQUENTIAL ||
            ASSAY_MUTANT_ON(s->mutant, ASSAY_MUTANT_TOPK_RENORM_THEN_TOPP)) {
            mass = 0.0;
            for (int32_t r = 0; r < top_k; r++) {
                mass += topp_weight(s, logits, lmax, rank_id(s, r));
            }
            scan = top_k;
        }
        double cum = 0.0;
        int32_t n_p = scan;
        /* Ranks at or past top_k are cut whatever top-p says. */
        for (int32_t r = 0; r < scan && r < kept; r++) {
            cum += topp_weight(s, logits, lmax, rank_id(s, r)) / mass;
            if (ASSAY_MUTANT_ON(s->mutant, ASSAY_MUTANT_TOPP_DROPS_CROSSING)) {
                /* The planted bug: stop before the token that takes the
                 * sum past p (keeping at least one), the largest set of
                 * mass <= p instead of the smallest of mass >= p. */
                if (cum > (double)sp->top_p) {
                    n_p = r > 0 ? r : 1;
                    break;
                }
                continue;
            }
            if (cum >= (double)sp->top_p) {
                n_p = r + 1;
                break;
            }
        }
        if (ASSAY_MUTANT_ON(s->mutant, ASSAY_MUTANT_TOPP_KEEPS_TIES)) {
            /* The planted bug: every token tied with the one crossing p
             * is kept, not the lower id alone. */
            while (n_p < scan && s->z[rank_id(s, n_p)] == s->z[rank_id(s, n_p - 1)]) {
                n_p++;
            }
        }
        if (n_p < kept) {
            kept = n_p;
        }
    }
    double kept_mass = 0.0;
    for (int32_t r = 0; r < kept; r++) {
        kept_mass += s->e[rank_id(s, r)];
    }
    for (int32_t r = 0; r < kept; r++) {
        int32_t id = s->order[r];
        p[id] = s->e[id] / kept_mass;
    }
#ifdef ASSAY_MUTANTS
    if (ASSAY_MUTANT_ON(s->mutant, ASSAY_MUTANT_TEMP_BY_SHARPNESS)) {
        mutant_temp_by_sharpness(p, v);
    }
#endif
}

int32_t assay_sampler_draw(const double *p, int32_t vocab, double u)
{
    double cum = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < vocab; i++) {
        if (p[i] <= 0.0) {
            continue;
        }
        last = i;
        cum += p[i];
        if (u < cum) {
            return i;
        }
    }
    /* u beyond the rounded total: the last token with mass. */
    return last >= 0 ? last : 0;
}
