/*
 * evidence.c - what a distributional check saw, kept for the report
 * (evidence.h): assay_evidence_gof, _homogeneity, _tv and _pit copy a test's
 * bins or a PIT histogram into a result's fixed-size evidence, folding bins
 * beyond ASSAY_EVIDENCE_MAX_BINS into one. The distributional checks call
 * them after each test; the HTML report draws what they wrote.
 */
#include "evidence.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The evidence bin a test bin goes to: the largest test bins each keep
 * their own, the pooled tail keeps its own (last), and when there are more
 * test bins than room, those in between share the one before it. */
static int32_t slot_of(const struct assay_gof_bins *bins, int32_t b)
{
    if (bins->n_bins <= ASSAY_EVIDENCE_MAX_BINS) {
        return b;
    }
    int32_t last = ASSAY_EVIDENCE_MAX_BINS - 1;
    if (bins->tail_bin >= 0) {
        if (b == bins->tail_bin) {
            return last;
        }
        return b < last - 1 ? b : last - 1;
    }
    return b < last ? b : last;
}

static void label_category(char *buf, size_t size, int64_t c, int32_t pair_vocab)
{
    if (pair_vocab > 0) {
        snprintf(buf, size, "(%d, %d)", (int)(c / pair_vocab), (int)(c % pair_vocab));
    } else {
        snprintf(buf, size, "%d", (int)c);
    }
}

/* The bins' layout and labels; counts are left at 0. */
static void layout(struct assay_evidence *ev, const struct assay_gof_bins *bins,
                   int32_t pair_vocab)
{
    memset(ev->bins, 0, sizeof ev->bins);
    ev->n_test_bins = bins->n_bins;
    ev->n_bins = bins->n_bins < ASSAY_EVIDENCE_MAX_BINS ? bins->n_bins : ASSAY_EVIDENCE_MAX_BINS;
    ev->n_folded = 0;
    for (int32_t b = 0; b < bins->n_bins; b++) {
        struct assay_evidence_bin *e = &ev->bins[slot_of(bins, b)];
        e->observed_b = NAN;
        if (b == bins->tail_bin) {
            e->pooled = true;
        }
    }
    for (int32_t s = 0; s < ev->n_bins; s++) {
        int32_t held = 0;
        for (int32_t b = 0; b < bins->n_bins; b++) {
            held += slot_of(bins, b) == s;
        }
        if (held > 1) {
            ev->bins[s].folded = true;
            ev->n_folded = held;
            snprintf(ev->bins[s].label, sizeof ev->bins[s].label, "others (%d bins)", (int)held);
        } else if (ev->bins[s].pooled && bins->tail_bin >= bins->n_own) {
            snprintf(ev->bins[s].label, sizeof ev->bins[s].label, "pooled tail (%d)",
                     (int)bins->n_pooled);
        }
    }
    /* An own bin is named by its category; the smallest own bin that the
     * tail joined says so. */
    for (int64_t c = 0; c < bins->k; c++) {
        int32_t b = bins->bin_of[c];
        if (b < 0 || b >= bins->n_own) {
            continue;
        }
        struct assay_evidence_bin *e = &ev->bins[slot_of(bins, b)];
        if (e->folded || e->label[0] != '\0') {
            continue;
        }
        char cat[28];
        label_category(cat, sizeof cat, c, pair_vocab);
        bool joined = b == bins->tail_bin;
        snprintf(e->label, sizeof e->label, "%s%s", cat, joined ? " + tail" : "");
    }
}

void assay_evidence_gof(struct assay_evidence *ev, const struct assay_gof_bins *bins,
                        const int64_t *counts, int64_t n_possible, int32_t pair_vocab)
{
    ev->kind = ASSAY_EVIDENCE_GOF;
    layout(ev, bins, pair_vocab);
    for (int32_t b = 0; b < bins->n_bins; b++) {
        ev->bins[slot_of(bins, b)].expected += (double)n_possible * bins->prob[b];
    }
    for (int64_t c = 0; c < bins->k; c++) {
        if (bins->bin_of[c] >= 0) {
            ev->bins[slot_of(bins, bins->bin_of[c])].observed += (double)counts[c];
        }
    }
}

void assay_evidence_homogeneity(struct assay_evidence *ev, const int64_t *a, const int64_t *b,
                                int32_t k, double min_expected, int32_t pair_vocab)
{
    struct assay_gof_bins *bins = NULL;
    ev->kind = ASSAY_EVIDENCE_NONE;
    ev->n_bins = 0;
    if (assay_homogeneity_bins_make(a, b, k, min_expected, &bins) != ASSAY_OK) {
        return;
    }
    ev->kind = ASSAY_EVIDENCE_HOMOGENEITY;
    layout(ev, bins, pair_vocab);
    int64_t n1 = 0;
    for (int32_t c = 0; c < k; c++) {
        n1 += a[c];
    }
    for (int32_t s = 0; s < ev->n_bins; s++) {
        ev->bins[s].observed_b = 0.0;
    }
    for (int32_t c = 0; c < k; c++) {
        int32_t bin = bins->bin_of[c];
        if (bin >= 0) {
            struct assay_evidence_bin *e = &ev->bins[slot_of(bins, bin)];
            e->observed += (double)a[c];
            e->observed_b += (double)b[c];
            e->expected += (double)n1 * (double)(a[c] + b[c]) / bins->n;
        }
    }
    assay_gof_bins_free(bins);
}

void assay_evidence_tv(struct assay_evidence *ev, const int64_t *order, int64_t n_pos,
                       const int32_t *bin_of, const double *bin_prob, int32_t n_bins,
                       const int64_t *a, const int64_t *b, int32_t pair_vocab)
{
    memset(ev->bins, 0, sizeof ev->bins);
    ev->kind = b == NULL ? ASSAY_EVIDENCE_GOF : ASSAY_EVIDENCE_HOMOGENEITY;
    ev->n_bins = n_bins < ASSAY_EVIDENCE_MAX_BINS ? n_bins : ASSAY_EVIDENCE_MAX_BINS;
    ev->n_test_bins = ev->n_bins;
    ev->n_folded = 0;
    int64_t n1 = 0, n2 = 0;
    for (int32_t k = 0; k < ev->n_bins; k++) {
        n1 += a[k];
        n2 += b != NULL ? b[k] : 0;
    }
    /* each run's first category and size, in the bins' order */
    int64_t first[ASSAY_EVIDENCE_MAX_BINS], size[ASSAY_EVIDENCE_MAX_BINS];
    for (int32_t k = 0; k < ASSAY_EVIDENCE_MAX_BINS; k++) {
        first[k] = -1;
        size[k] = 0;
    }
    for (int64_t j = 0; j < n_pos; j++) {
        int32_t k = bin_of[order[j]];
        if (k >= 0 && k < ev->n_bins) {
            first[k] = first[k] < 0 ? order[j] : first[k];
            size[k]++;
        }
    }
    for (int32_t k = 0; k < ev->n_bins; k++) {
        struct assay_evidence_bin *e = &ev->bins[k];
        e->observed = (double)a[k];
        e->observed_b = b != NULL ? (double)b[k] : NAN;
        e->expected = b != NULL ? (double)n1 * (double)(a[k] + b[k]) / (double)(n1 + n2)
                                : (double)n1 * bin_prob[k];
        char cat[28];
        if (first[k] < 0) {
            snprintf(e->label, sizeof e->label, "p = 0");
            continue;
        }
        label_category(cat, sizeof cat, first[k], pair_vocab);
        if (size[k] == 1) {
            snprintf(e->label, sizeof e->label, "%s", cat);
        } else {
            /* cat is at most 27 bytes, the count below 10^7 for any vocabulary */
            int more = size[k] - 1 < 9999999 ? (int)(size[k] - 1) : 9999999;
            snprintf(e->label, sizeof e->label, "%.20s + %d more", cat, more);
            e->pooled = k == ev->n_bins - 1 || first[k + 1] < 0;
        }
    }
}

void assay_evidence_pit(struct assay_evidence *ev, const double *u, int64_t n, double d)
{
    memset(ev->pit, 0, sizeof ev->pit);
    for (int64_t i = 0; i < n; i++) {
        int32_t b = (int32_t)(u[i] * ASSAY_EVIDENCE_PIT_BINS);
        b = b < 0 ? 0 : b;
        ev->pit[b < ASSAY_EVIDENCE_PIT_BINS ? b : ASSAY_EVIDENCE_PIT_BINS - 1]++;
    }
    ev->pit_n = n;
    ev->pit_ks_d = d;
}
