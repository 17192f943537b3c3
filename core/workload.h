/*
 * workload.h - workloads and traces: the requests a check or a benchmark
 * sends, read from JSON files in fixtures/ (format "assay-workload",
 * version 1) or generated from a stated shape.
 *
 * A workload file holds either explicit "requests" (a trace) or a
 * "generate" block stating length distributions and an arrival process, from
 * which the requests are generated deterministically (GSL's mt19937 with the
 * stated seed). Either way the loaded workload is a list of requests; the
 * file format is documented in README.md ("Workload files"). A "generate"
 * block may also state random aborts, "abort": {"fraction": F, "after":
 * LENGTH}: each request is aborted with probability F once the number of
 * tokens drawn from the LENGTH distribution has arrived (drawn after every
 * other draw, so a shape without "abort" generates what it always did).
 *
 * Every problem in a file is reported with the file, the field path
 * ("requests[3].prompt[7]"), what was expected and what was found; a trace
 * is checked on the way in (declared prompt_len equals the tokens, token ids
 * in range, arrivals sorted, ids unique, lengths within the context).
 *
 * Lifetime: assay_workload_load / assay_workload_parse /
 * assay_workload_generate allocate; assay_workload_free releases.
 */
#ifndef ASSAY_WORKLOAD_H
#define ASSAY_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "request.h"
#include "status.h"

#define ASSAY_WORKLOAD_VERSION 1

struct assay_workload_request {
    uint64_t id;
    double arrival_s;      /* scheduled arrival, seconds from the start */
    int32_t arrival_step;  /* for stepwise harnesses: join at this engine step */
    int32_t *prompt;       /* (prompt_len), owned by the workload */
    int32_t prompt_len;
    int32_t max_tokens;
    int32_t stop_token;    /* -1: none */
    int32_t abort_after;   /* -1: never; else abort once this many tokens arrived */
    int32_t abort_step;    /* -1: never; else abort once this many engine steps have run
                              since its submission (0: before its first step, queued);
                              stepwise harnesses only: the load generator has no steps */
    struct assay_sampling sampling;
};

/* Whether the workload aborts r (by tokens or by steps). */
static inline int assay_workload_request_aborts(const struct assay_workload_request *r)
{
    return r->abort_after >= 0 || r->abort_step >= 0;
}

struct assay_workload {
    char name[64];
    char description[256];
    char lengths[256];     /* the stated length distributions, as text */
    char arrivals[128];    /* the stated arrival process, as text */
    struct assay_workload_request *reqs;
    int32_t n;
    int32_t *token_store;  /* all prompts */
    int64_t n_tokens;
};

/* What a workload must respect to be valid for a given engine. */
struct assay_workload_limits {
    int32_t vocab;       /* token ids in 0..vocab-1 */
    int32_t max_seq_len; /* prompt_len + max_tokens <= this */
    int32_t max_requests; /* at most this many requests (0: 1,000,000) */
};

/* Read and parse a workload file (see the header comment). On failure *out
 * is NULL, diag says where and what, and the status is ASSAY_ERR_IO (cannot
 * read) or ASSAY_ERR_PARSE (malformed or invalid). */
enum assay_status assay_workload_load(const char *path, const struct assay_workload_limits *lim,
                                      struct assay_workload **out, struct assay_diag *diag);

/* Another draw of a generated workload (one with a "generate" shape): the
 * shape's seed replaced by seed, and its request count by n when n > 0. */
struct assay_workload_draw {
    uint64_t seed; /* its low 53 bits */
    int32_t n;
};

/* assay_workload_load of a generated workload drawn as draw says; a file
 * that lists its requests instead is ASSAY_ERR_PARSE. */
enum assay_status assay_workload_load_drawn(const char *path,
                                            const struct assay_workload_limits *lim,
                                            const struct assay_workload_draw *draw,
                                            struct assay_workload **out, struct assay_diag *diag);

/* Parse a workload from memory; `file` names it in diagnostics. json[0..len)
 * need not be NUL-terminated; a NUL byte in it, or anything but white space
 * after the top-level object, is a parse error. ASSAY_ERR_INVALID for a
 * NULL json with len > 0 or limits without a vocabulary. */
enum assay_status assay_workload_parse(const char *json, size_t len, const char *file,
                                       const struct assay_workload_limits *lim,
                                       struct assay_workload **out, struct assay_diag *diag);

/* Write a workload as an explicit trace (every request and prompt listed),
 * which loads back to the same requests. Written to a temporary name and
 * renamed into place. */
enum assay_status assay_workload_save(const struct assay_workload *w, const char *path,
                                      struct assay_diag *diag);

/* A deep copy holding only the requests whose index has keep[i] != 0 (keep
 * may be NULL: all). Prompts may then be edited in place by the caller. */
enum assay_status assay_workload_subset(const struct assay_workload *w, const uint8_t *keep,
                                        struct assay_workload **out);

/* Summary statistics of the lengths actually in the workload. */
struct assay_workload_summary {
    int32_t n;
    int32_t prompt_min, prompt_p50, prompt_p90, prompt_max;
    int32_t output_min, output_p50, output_p90, output_max;
    double duration_s;  /* last arrival */
    double offered_rate; /* n / duration, 0 when all arrive at once */
};
void assay_workload_summarize(const struct assay_workload *w, struct assay_workload_summary *out);

void assay_workload_free(struct assay_workload *w);

#endif
