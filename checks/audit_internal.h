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

#include "audit.h"
#include "equivalence.h"

#define MAX_FINDINGS 24
#define MAX_GAUGES 16
#define MEMO_LEN 512
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
    struct assay_oracle_memo *memo;
    struct assay_adapter srv;    /* streamed, no logprobs (v1: one) */
    struct assay_adapter srv_lp; /* streamed, n_probs top logprobs */
    struct assay_adapter srv_ns; /* non-streamed */
    struct assay_adapter bundled;
    struct assay_model_cache *models;
    char findings[MAX_FINDINGS][640];
    size_t n_findings;
    struct assay_audit_gauge gauges[MAX_GAUGES];
    size_t n_gauges;
    bool metrics_read;  /* the baseline was read */
    bool baseline_busy; /* requests were running at the baseline */
    char metrics_status[400];
};

/* Add a sentence to the audit's findings (said once, at most MAX_FINDINGS). */
void assay_audit_note(struct assay_audit *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Read the server's /metrics gauges: the idle state (baseline) or after
 * the run. False with metrics_status set when the page cannot be read. */
bool assay_audit_read_metrics(struct assay_audit *a, bool baseline);

/* Whether gauge g is back to its idle level. */
bool assay_audit_gauge_back(const struct assay_audit_gauge *g);

#endif
