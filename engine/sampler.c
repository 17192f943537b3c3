#include "sampler.h"

#include <math.h>
#include <stdlib.h>

#include "../core/alloc.h"
#include "../core/mutant.h"

struct assay_sampler {
    int32_t vocab;
    int mutant;
    double *z;      /* (vocab) tempered logits */
    double *e;      /* (vocab) exp(z - max) */
    int32_t *order; /* (vocab) ids by descending z, lower id first on ties */
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
    if (s->z == NULL || s->e == NULL || s->order == NULL) {
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

/* Sort ids by descending tempered logit, lower id first on ties: an
 * insertion sort, stable and fast enough for a few hundred tokens that
 * arrive in id order. */
static void sort_by_logit(struct assay_sampler *s)
{
    for (int32_t i = 0; i < s->vocab; i++) {
        int32_t id = s->order[i] = i;
        int32_t j = i;
        while (j > 0 && s->z[s->order[j - 1]] < s->z[id]) {
            s->order[j] = s->order[j - 1];
            j--;
        }
        s->order[j] = id;
    }
}

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
    double max = -INFINITY;
    for (int32_t i = 0; i < v; i++) {
        s->z[i] = (double)logits[i] / (double)sp->temperature;
        if (s->z[i] > max) {
            max = s->z[i];
        }
    }
    double total = 0.0;
    for (int32_t i = 0; i < v; i++) {
        s->e[i] = exp(s->z[i] - max);
        total += s->e[i];
    }
    int32_t top_k = (sp->top_k > 0 && sp->top_k < v) ? sp->top_k : v;
    bool use_top_p = sp->top_p < 1.0f;
    if (top_k == v && !use_top_p) {
        for (int32_t i = 0; i < v; i++) {
            p[i] = s->e[i] / total;
        }
        return;
    }
    sort_by_logit(s);
    int32_t kept = top_k;
    if (use_top_p) {
        /* JOINT measures top-p on the full tempered distribution;
         * SEQUENTIAL on the top-k set renormalised. */
        double mass = total;
        int32_t scan = v;
        if (order == ASSAY_SAMPLING_SEQUENTIAL) {
            mass = 0.0;
            for (int32_t r = 0; r < top_k; r++) {
                mass += s->e[s->order[r]];
            }
            scan = top_k;
        }
        double cum = 0.0;
        int32_t n_p = scan;
        for (int32_t r = 0; r < scan; r++) {
            cum += s->e[s->order[r]] / mass;
            if (cum >= (double)sp->top_p) {
                n_p = r + 1;
                break;
            }
        }
        if (n_p < kept) {
            kept = n_p;
        }
    }
    double kept_mass = 0.0;
    for (int32_t r = 0; r < kept; r++) {
        kept_mass += s->e[s->order[r]];
    }
    for (int32_t r = 0; r < kept; r++) {
        int32_t id = s->order[r];
        p[id] = s->e[id] / kept_mass;
    }
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
