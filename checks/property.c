/*
 * property.c - the property family (property.h): block conservation after
 * every step against oracles/block_model (assay_check_blocks), trace
 * consistency of a run (assay_check_trace), no cross-sequence attention by
 * logits or by tokens alone (assay_check_isolation, _isolation_blackbox) and
 * the long randomised run (assay_check_soak). The plan's runners, the
 * pairwise checks and the fuzzer call them with assay_property_opts.
 */
#include "property.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/rng.h"
#include "../oracles/block_model.h"
#include "equivalence.h"
#include "harness.h"
#include "trace.h"

struct assay_property_opts assay_property_default_opts(void)
{
    struct assay_property_opts o;
    memset(&o, 0, sizeof o);
    o.slack_blocks = 0;
    o.engine_self_check = true;
    o.n_probes = 3;
    o.logit_tol = ASSAY_ISOLATION_LOGIT_TOL;
    o.tie_tol = ASSAY_EQUIV_TIE_TOL;
    return o;
}

static struct assay_property_opts resolve(const struct assay_property_opts *o)
{
    return o != NULL ? *o : assay_property_default_opts();
}

/* Record the first FAIL (or a SKIP/ERROR) with its reason; a later call
 * never overwrites an earlier FAIL. */
static double seconds_since(int64_t t0)
{
    return (double)(assay_now_ns() - t0) / 1e9;
}

/* ---- requests by id ---------------------------------------------------- */

struct id_index {
    const struct assay_workload *w;
    int32_t *slot; /* open addressing: request index, -1 empty */
    int32_t size;
};

static enum assay_status id_index_init(struct id_index *x, const struct assay_workload *w)
{
    x->w = w;
    x->size = 1;
    while (x->size < 2 * w->n + 2) {
        x->size *= 2;
    }
    x->slot = assay_malloc(sizeof(int32_t) * (size_t)x->size);
    if (x->slot == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t i = 0; i < x->size; i++) {
        x->slot[i] = -1;
    }
    int32_t mask = x->size - 1;
    for (int32_t i = 0; i < w->n; i++) {
        int32_t k = (int32_t)(assay_mix64(w->reqs[i].id) & (uint64_t)mask);
        while (x->slot[k] >= 0) {
            k = (k + 1) & mask;
        }
        x->slot[k] = i;
    }
    return ASSAY_OK;
}

static int32_t id_index_find(const struct id_index *x, uint64_t id)
{
    int32_t mask = x->size - 1;
    for (int32_t k = (int32_t)(assay_mix64(id) & (uint64_t)mask); x->slot[k] >= 0;
         k = (k + 1) & mask) {
        if (x->w->reqs[x->slot[k]].id == id) {
            return x->slot[k];
        }
    }
    return -1;
}

static void id_index_free(struct id_index *x)
{
    assay_free(x->slot);
    x->slot = NULL;
}

/* ---- block conservation: a step hook around the block model ------------ */

struct block_watch {
    struct assay_block_model *model;
    struct assay_block_model_opts mo;
    struct id_index ids;
    bool self_check;
    int64_t n_audits;
    int32_t peak_in_use;
    int64_t exhausted;            /* snapshots with nothing free or evictable */
    struct assay_block_stats last;
    int64_t *seen_at;             /* (requests) the snapshot a request last held blocks in */
    int64_t preemptions;          /* requests seen leaving the running set and coming back */
};

static enum assay_status watch_init(struct block_watch *bw, const struct assay_workload *w,
                                    const struct assay_property_opts *o)
{
    memset(bw, 0, sizeof *bw);
    bw->mo = assay_block_model_default_opts();
    bw->mo.slack_blocks = o->slack_blocks;
    bw->self_check = o->engine_self_check;
    if (assay_block_model_init(&bw->model) != ASSAY_OK) {
        return ASSAY_ERR_NOMEM;
    }
    bw->seen_at = assay_malloc(sizeof(int64_t) * (size_t)(w->n > 0 ? w->n : 1));
    if (bw->seen_at == NULL || id_index_init(&bw->ids, w) != ASSAY_OK) {
        assay_block_model_free(bw->model);
        assay_free(bw->seen_at);
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t i = 0; i < w->n; i++) {
        bw->seen_at[i] = -2;
    }
    return ASSAY_OK;
}

/* A new run of the same requests: forget where they were seen. */
static void watch_new_run(struct block_watch *bw)
{
    for (int32_t i = 0; i < bw->ids.w->n; i++) {
        bw->seen_at[i] = -2;
    }
}

static void watch_free(struct block_watch *bw)
{
    assay_block_model_free(bw->model);
    id_index_free(&bw->ids);
    assay_free(bw->seen_at);
}

/* Count the requests that hold blocks again after a snapshot without them:
 * in an engine that only releases a running request's blocks when it
 * finishes, is aborted or is preempted, that is a preemption (a lower bound:
 * one undone within a step is not seen). */
static void count_preemptions(struct block_watch *bw, const struct assay_block_audit *au)
{
    for (int32_t i = 0; i < au->n_seqs; i++) {
        int32_t k = id_index_find(&bw->ids, au->seq_id[i]);
        if (k < 0) {
            continue;
        }
        if (bw->seen_at[k] >= 0 && bw->seen_at[k] != bw->n_audits - 1) {
            bw->preemptions++;
        }
        bw->seen_at[k] = bw->n_audits;
    }
}

/* R12: what the engine holds for a sequence agrees with its request. */
static bool check_boundaries(const struct block_watch *bw, const struct assay_block_audit *au,
                             char *msg, size_t size)
{
    for (int32_t i = 0; i < au->n_seqs; i++) {
        int32_t k = id_index_find(&bw->ids, au->seq_id[i]);
        unsigned long long id = (unsigned long long)au->seq_id[i];
        if (k < 0) {
            snprintf(msg, size, "R12 boundary: sequence %llu holds blocks but no request of the "
                                "workload has that id", id);
            return false;
        }
        const struct assay_workload_request *r = &bw->ids.w->reqs[k];
        if (au->seq_n_prompt != NULL && au->seq_n_prompt[i] != r->prompt_len) {
            snprintf(msg, size,
                     "R12 boundary: request %llu has a prompt of %d tokens, the engine puts its "
                     "prompt/output boundary at %d%s",
                     id, (int)r->prompt_len, (int)au->seq_n_prompt[i],
                     au->seq_n_prompt[i] > r->prompt_len ? " (generated tokens taken for prompt)"
                                                         : "");
            return false;
        }
        if (au->seq_n_tokens != NULL &&
            (int64_t)au->seq_n_tokens[i] > (int64_t)r->prompt_len + r->max_tokens) {
            snprintf(msg, size,
                     "R12 boundary: request %llu holds %d tokens, more than its prompt %d + "
                     "max_tokens %d",
                     id, (int)au->seq_n_tokens[i], (int)r->prompt_len, (int)r->max_tokens);
            return false;
        }
    }
    return true;
}

/* One snapshot through every rule. ASSAY_ERR_INTERNAL (msg: the rule) when
 * one is broken; other errors when the snapshot could not be taken. */
static enum assay_status watch_audit(struct block_watch *bw, const struct assay_adapter *a,
                                     bool drained, char *msg, size_t size)
{
    struct assay_block_audit au;
    memset(&au, 0, sizeof au);
    enum assay_status st = a->vt->block_audit(a->self, &au);
    if (st != ASSAY_OK) {
        snprintf(msg, size, "block_audit: %s", assay_status_str(st));
        return st;
    }
    bw->n_audits++;
    bw->mo.drained = drained;
    int32_t n = assay_block_model_check(bw->model, &au, &bw->mo, msg, size);
    if (n < 0) {
        return ASSAY_ERR_NOMEM;
    }
    if (n > 0) {
        if (n > 1) {
            size_t len = strlen(msg);
            snprintf(msg + len, size - len, " [%d violations in this snapshot]", (int)n);
        }
        return ASSAY_ERR_INTERNAL;
    }
    if (!check_boundaries(bw, &au, msg, size)) {
        return ASSAY_ERR_INTERNAL;
    }
    count_preemptions(bw, &au);
    bw->last = au.stats;
    bw->peak_in_use = au.stats.in_use > bw->peak_in_use ? au.stats.in_use : bw->peak_in_use;
    if (au.stats.free == 0 && au.stats.cached == 0) {
        bw->exhausted++;
    }
    if (bw->self_check && a->vt->check_invariants != NULL) {
        char why[256] = "";
        if (a->vt->check_invariants(a->self, why, sizeof why) != ASSAY_OK) {
            snprintf(msg, size, "R13 self-check: the engine's own check fails: %s", why);
            return ASSAY_ERR_INTERNAL;
        }
    }
    return ASSAY_OK;
}

static enum assay_status watch_hook(void *ctx, const struct assay_adapter *a, int64_t step,
                                    char *msg, size_t size)
{
    (void)step;
    return watch_audit(ctx, a, false, msg, size);
}

/* ---- running workloads ------------------------------------------------- */

static enum assay_status run(const struct assay_adapter *a, const struct assay_workload *w,
                             bool logits, struct block_watch *bw, struct assay_transcript **t)
{
    struct assay_harness_opts ho;
    memset(&ho, 0, sizeof ho);
    ho.capture_logits = logits;
    if (bw != NULL) {
        ho.hook = watch_hook;
        ho.hook_ctx = bw;
    }
    return assay_harness_run(a, w, &ho, t);
}

static int32_t count_aborting(const struct assay_workload *w)
{
    int32_t n = 0;
    for (int32_t i = 0; i < w->n; i++) {
        n += assay_workload_request_aborts(&w->reqs[i]);
    }
    return n;
}

static int64_t count_delivered(const struct assay_transcript *t)
{
    int64_t n = 0;
    for (int32_t i = 0; i < t->n; i++) {
        n += t->reqs[i].n_events;
    }
    return n;
}

/* Judge a run watched by bw: the hook's verdict, then the drain rule. */
static void judge_watched_run(struct block_watch *bw, const struct assay_adapter *a,
                              const struct assay_transcript *t, const char *what,
                              struct assay_check_result *res)
{
    if (t->status == ASSAY_ERR_INTERNAL) {
        assay_check_fail(res, "%s%s", what, t->error);
        return;
    }
    if (t->status != ASSAY_OK) {
        assay_check_fail(res, "%sthe run did not complete: %s", what, t->error);
        return;
    }
    char msg[512];
    enum assay_status st = watch_audit(bw, a, true, msg, sizeof msg);
    if (st != ASSAY_OK) {
        assay_check_fail(res,
                         "%safter the run drained (all %d requests finished "
                         "or aborted): %s",
                         what, (int)t->n, msg);
    }
}

static void info_of(const struct assay_adapter *a, struct assay_adapter_info *info)
{
    assay_adapter_get_info(a, info);
}

/* ---- block conservation ------------------------------------------------ */

enum assay_status assay_check_blocks(const struct assay_adapter *a, const struct assay_workload *w,
                                     const struct assay_property_opts *opts,
                                     struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    struct assay_property_opts o = resolve(opts);
    res->n_requests = w->n;
    if (a->vt->block_audit == NULL) {
        assay_check_skip(res, "needs the block_audit capability (a snapshot of "
                              "the engine's block accounting); this adapter has none");
        res->seconds = seconds_since(t0);
        return ASSAY_OK;
    }
    struct block_watch bw;
    if (watch_init(&bw, w, &o) != ASSAY_OK) {
        assay_check_error(res, "out of memory");
        return ASSAY_ERR_NOMEM;
    }
    char msg[512];
    enum assay_status st = watch_audit(&bw, a, !a->vt->has_work(a->self), msg, sizeof msg);
    struct assay_transcript *t = NULL;
    if (st == ASSAY_ERR_UNSUPPORTED) {
        assay_check_skip(res,
                         "the engine has no block accounting to audit (%s: "
                         "it keeps no paged KV cache)",
                         msg);
        st = ASSAY_OK;
    } else if (st == ASSAY_ERR_INTERNAL) {
        assay_check_fail(res, "before the run: %s", msg);
        st = ASSAY_OK;
    } else if (st == ASSAY_OK) {
        st = run(a, w, false, &bw, &t);
        if (st == ASSAY_OK) {
            judge_watched_run(&bw, a, t, "", res);
            res->n_steps = t->n_steps;
        }
    }
    res->n_checks = bw.n_audits;
    if (st != ASSAY_OK && st != ASSAY_ERR_INTERNAL) {
        assay_check_error(res, "could not run: %s", assay_status_str(st));
    }
    snprintf(res->summary, sizeof res->summary,
             "%d requests (%d aborted), %lld steps; %lld block snapshots judged by the block "
             "model; peak %d of %d blocks in use, pool exhausted at %lld steps, %lld "
             "preemptions seen; drained to %d free + %d cached",
             (int)w->n, (int)count_aborting(w), (long long)res->n_steps, (long long)bw.n_audits,
             (int)bw.peak_in_use, (int)bw.last.total, (long long)bw.exhausted,
             (long long)bw.preemptions, (int)bw.last.free, (int)bw.last.cached);
    assay_transcript_free(t);
    watch_free(&bw);
    res->seconds = seconds_since(t0);
    return assay_status_keep_nomem(st);
}

/* ---- trace consistency ------------------------------------------------- */

/* Trace in: the workload itself. Returns false (verdict set) when it is
 * inconsistent or memory ran out. */
static bool trace_in(const struct assay_workload *w, const struct assay_adapter_info *info,
                     struct assay_check_result *res, enum assay_status *st)
{
    char msg[512];
    int32_t bad;
    *st = assay_trace_check_workload(w, info->vocab, info->n_ctx, &bad, msg, sizeof msg);
    if (*st != ASSAY_OK) {
        assay_check_error(res, "out of memory");
        return false;
    }
    if (bad >= 0) {
        assay_check_fail(res, "%s", msg);
        return false;
    }
    return true;
}

enum assay_status assay_check_trace(const struct assay_adapter *a, const struct assay_workload *w,
                                    const struct assay_property_opts *opts,
                                    struct assay_check_result *res)
{
    (void)opts;
    int64_t t0 = assay_now_ns();
    struct assay_adapter_info info;
    info_of(a, &info);
    res->n_requests = w->n;
    enum assay_status st = ASSAY_OK;
    struct assay_transcript *t = NULL;
    int32_t by_reason[5] = {0, 0, 0, 0, 0};
    if (trace_in(w, &info, res, &st)) {
        st = run(a, w, false, NULL, &t);
        if (st == ASSAY_OK) {
            char msg[640];
            if (!assay_trace_check_transcript(w, t, info.vocab, msg, sizeof msg)) {
                assay_check_fail(res, "%s", msg);
            }
            res->n_steps = t->n_steps;
            res->n_tokens = count_delivered(t);
            for (int32_t i = 0; i < t->n; i++) {
                if ((int)t->reqs[i].reason >= 0 && (int)t->reqs[i].reason < 5) {
                    by_reason[t->reqs[i].reason]++;
                }
            }
        } else {
            assay_check_error(res, "could not run: %s", assay_status_str(st));
        }
    }
    snprintf(res->summary, sizeof res->summary,
             "%d requests in, %lld tokens out over %lld steps; finished: %d length, %d stop, %d "
             "abort, %d error",
             (int)w->n, (long long)res->n_tokens, (long long)res->n_steps, (int)by_reason[1],
             (int)by_reason[2], (int)by_reason[3], (int)by_reason[4]);
    assay_transcript_free(t);
    res->seconds = seconds_since(t0);
    return assay_status_keep_nomem(st);
}

/* ---- isolation ---------------------------------------------------------- */

/* Whether a request's tokens are the engine's to vary: unseeded sampling. */
static bool comparable(const struct assay_workload_request *r)
{
    return r->sampling.temperature <= 0.0f || r->sampling.seeded;
}

/* Stable sort of the requests by arrival step (the workloads here are
 * small; insertion sort keeps equal arrivals in order). */
static void sort_by_arrival(struct assay_workload *w)
{
    for (int32_t i = 1; i < w->n; i++) {
        struct assay_workload_request r = w->reqs[i];
        int32_t j = i;
        while (j > 0 && w->reqs[j - 1].arrival_step > r.arrival_step) {
            w->reqs[j] = w->reqs[j - 1];
            j--;
        }
        w->reqs[j] = r;
    }
    for (int32_t i = 1; i < w->n; i++) {
        if (w->reqs[i].arrival_s < w->reqs[i - 1].arrival_s) {
            w->reqs[i].arrival_s = w->reqs[i - 1].arrival_s;
        }
    }
}

static int32_t find_request(const struct assay_workload *w, uint64_t id)
{
    for (int32_t i = 0; i < w->n; i++) {
        if (w->reqs[i].id == id) {
            return i;
        }
    }
    return -1;
}

/* The neighbourhoods a probe is run in. */
enum variant {
    VARIANT_GIVEN = 0,   /* the workload as it is */
    VARIANT_PROMPTS,     /* every neighbour's prompt tokens replaced */
    VARIANT_LENGTHS,     /* neighbours' prompt and output lengths changed */
    VARIANT_ARRIVALS,    /* neighbours arriving at other steps */
    VARIANT_COUNT
};

static const char *variant_name(int v)
{
    static const char *const names[VARIANT_COUNT] = {
        "among the workload's neighbours", "with the neighbours' prompts replaced",
        "with the neighbours' lengths changed", "with the neighbours' arrivals moved"};
    return names[v];
}

static enum assay_status make_variant(const struct assay_workload *w, const bool *is_probe, int v,
                                      const struct assay_adapter_info *info,
                                      struct assay_workload **out)
{
    enum assay_status st = assay_workload_subset(w, NULL, out);
    if (st != ASSAY_OK) {
        return st;
    }
    struct assay_workload *c = *out;
    int32_t vocab = info->vocab > 8 ? info->vocab : 256;
    for (int32_t i = 0; i < c->n; i++) {
        if (is_probe[i]) {
            continue;
        }
        struct assay_workload_request *r = &c->reqs[i];
        if (v == VARIANT_PROMPTS) {
            for (int32_t k = 0; k < r->prompt_len; k++) {
                r->prompt[k] = (r->prompt[k] + 1 + (k + i) % 5) % vocab;
            }
        } else if (v == VARIANT_LENGTHS) {
            if (i % 2 == 0) {
                r->prompt_len = (r->prompt_len + 1) / 2;
                r->max_tokens = r->max_tokens > 1 ? r->max_tokens / 2 : 1;
            } else {
                int32_t room = info->n_ctx > 0 ? info->n_ctx - r->prompt_len : r->max_tokens;
                int32_t m = 2 * r->max_tokens;
                r->max_tokens = m < room ? m : (room > r->max_tokens ? room : r->max_tokens);
            }
        } else if (v == VARIANT_ARRIVALS) {
            r->arrival_step += 1 + 2 * (i % 3);
        }
    }
    if (v == VARIANT_ARRIVALS) {
        sort_by_arrival(c);
    }
    return ASSAY_OK;
}

struct iso_stats {
    int64_t n_tokens;   /* positions compared */
    int32_t n_ties;
    double max_diff;    /* largest |logit difference| */
    int64_t n_logits;   /* positions whose logits were compared */
    double *row;        /* (vocab) scratch: a reference row for the tie rule */
};

/* The first non-finite logit of a run, if any. */
static bool logits_finite(const struct assay_workload *w, const struct assay_transcript *t,
                          const char *run_name, char *msg, size_t size)
{
    if (!t->logits_captured) {
        return true;
    }
    for (int32_t i = 0; i < w->n; i++) {
        const struct assay_transcript_req *q = &t->reqs[i];
        for (int32_t j = 0; j < w->reqs[i].max_tokens; j++) {
            if (!q->has_logits[j]) {
                continue;
            }
            const float *row = q->logits + (int64_t)j * t->vocab;
            for (int32_t v = 0; v < t->vocab; v++) {
                if (!isfinite(row[v])) {
                    snprintf(msg, size, "request %llu, output position %d: logit %d is %g %s",
                             (unsigned long long)w->reqs[i].id, (int)j, (int)v, (double)row[v],
                             run_name);
                    return false;
                }
            }
        }
    }
    return true;
}

/* A probe alone (ref) against the same probe in a variant (got). */
static bool compare_probe(const struct assay_transcript *tr, const struct assay_transcript_req *ref,
                          const struct assay_transcript *tg, const struct assay_transcript_req *got,
                          uint64_t id, bool invariant, const struct assay_property_opts *o,
                          const char *where, struct iso_stats *s, char *msg, size_t size)
{
    int32_t n = ref->n_events < got->n_events ? ref->n_events : got->n_events;
    n = n < ref->cap ? n : ref->cap;
    n = n < got->cap ? n : got->cap;
    int32_t vocab = tr->vocab;
    for (int32_t t = 0; t < n; t++) {
        bool have_ref = tr->logits_captured && ref->has_logits[t];
        bool have_got = tg->logits_captured && got->has_logits[t];
        const float *lr = have_ref ? ref->logits + (int64_t)t * vocab : NULL;
        const float *lg = have_got ? got->logits + (int64_t)t * vocab : NULL;
        int32_t a = ref->tokens[t], b = got->tokens[t];
        if (a != b) {
            /* The tie rule (assay_tie) on the engine's own logits alone:
             * no oracle runs here. An invariant engine has no ties. */
            if (!invariant && lr != NULL) {
                for (int32_t v = 0; v < vocab; v++) {
                    s->row[v] = (double)lr[v];
                }
                if (assay_tie(s->row, vocab, a, b, o->tie_tol, NULL)) {
                    s->n_ties++;
                    return true; /* past a tie the two runs legitimately differ */
                }
            }
            snprintf(msg, size,
                     "request %llu, output position %d: token %d alone, %d %s%s", (unsigned long long)id,
                     (int)t, (int)a, (int)b, where,
                     lr != NULL && a >= 0 && a < vocab && b >= 0 && b < vocab ? "" : " (tokens only)");
            if (lr != NULL && a >= 0 && a < vocab && b >= 0 && b < vocab) {
                size_t len = strlen(msg);
                snprintf(msg + len, size - len, "; alone their logits are %.6f and %.6f",
                         (double)lr[a], (double)lr[b]);
            }
            return false;
        }
        s->n_tokens++;
        if (lr == NULL || lg == NULL) {
            continue;
        }
        s->n_logits++;
        for (int32_t v = 0; v < vocab; v++) {
            double d = fabs((double)lr[v] - (double)lg[v]);
            s->max_diff = d > s->max_diff ? d : s->max_diff;
            bool differs = invariant ? memcmp(&lr[v], &lg[v], sizeof(float)) != 0 : !(d <= o->logit_tol);
            if (differs) {
                snprintf(msg, size,
                         "request %llu, output position %d: logit %d is %.9g alone, %.9g %s "
                         "(difference %.3g; %s)",
                         (unsigned long long)id, (int)t, (int)v, (double)lr[v], (double)lg[v], where, d,
                         invariant ? "the engine claims batch invariance: bit for bit"
                                   : "tolerance stated above");
                return false;
            }
        }
    }
    if (ref->n_events != got->n_events) {
        snprintf(msg, size, "request %llu: %d tokens alone, %d %s", (unsigned long long)id,
                 (int)ref->n_events, (int)got->n_events, where);
        return false;
    }
    return true;
}

/* The run must have completed and the probe finished once. */
static bool run_ok(const struct assay_transcript *t, int32_t i, const char *where, char *msg,
                   size_t size)
{
    if (t->status != ASSAY_OK) {
        snprintf(msg, size, "the run %s did not complete: %s", where, t->error);
        return false;
    }
    const struct assay_transcript_req *q = &t->reqs[i];
    if (q->submit_status != ASSAY_OK || q->n_finish != 1 || q->reason == ASSAY_FINISH_ERROR) {
        snprintf(msg, size, "request %llu %s: submitted with %s, finished %d times (%s)",
                 (unsigned long long)q->id, where,
                 assay_status_str((enum assay_status)q->submit_status), (int)q->n_finish,
                 assay_finish_reason_str(q->reason));
        return false;
    }
    return true;
}

/*
 * A probe differed among neighbours from its run alone. Which variable
 * made the difference? The probe runs alone once more, now that the
 * neighbours' run has finished: nothing is in flight beside it, but the
 * engine keeps whatever state that run left (its prefix cache, its pools).
 * Differing again, the cause is that state or nondeterminism, not a
 * neighbour in flight; matching, the difference needs neighbours in
 * flight. Only then is cross-sequence interference named.
 */
static enum assay_status isolate_cause(const struct assay_adapter *a,
                                       const struct assay_workload *aw,
                                       const struct assay_transcript *alone, uint64_t id,
                                       bool invariant, const struct assay_property_opts *o,
                                       const struct iso_stats *s, char *cause, size_t size)
{
    struct assay_transcript *again = NULL;
    enum assay_status st = run(a, aw, true, NULL, &again);
    if (st != ASSAY_OK) {
        snprintf(cause, size, "the cause was not isolated (the probe's second run alone could "
                              "not run: %s)", assay_status_str(st));
        return st;
    }
    struct iso_stats s2 = *s;
    char msg[600];
    const char *where = "alone again, after the neighbours' run had finished";
    if (!run_ok(again, 0, where, msg, sizeof msg)) {
        snprintf(cause, size, "the cause was not isolated: %.300s", msg);
    } else if (!compare_probe(alone, &alone->reqs[0], again, &again->reqs[0], id, invariant, o,
                              where, &s2, msg, sizeof msg)) {
        snprintf(cause, size,
                 "it differs alone too, with no neighbour in flight (%.200s): the cause is state "
                 "the engine keeps between runs (its cache warmth) or nondeterminism, not "
                 "attention to a neighbour",
                 msg);
    } else {
        snprintf(cause, size,
                 "alone again after the neighbours' run it matches its first run alone, so the "
                 "difference needs neighbours in flight: cross-sequence interference");
    }
    assay_transcript_free(again);
    return ASSAY_OK;
}

/* Up to n probes, spread over the workload: requests that are not aborted
 * and whose tokens the engine may not vary. */
static int32_t choose_probes(const struct assay_workload *w, int32_t n, int32_t *probe)
{
    int32_t n_ok = 0;
    for (int32_t i = 0; i < w->n; i++) {
        n_ok += !assay_workload_request_aborts(&w->reqs[i]) && comparable(&w->reqs[i]);
    }
    int32_t want = n < n_ok ? n : n_ok, got = 0, seen = 0;
    for (int32_t i = 0; i < w->n && got < want; i++) {
        if (assay_workload_request_aborts(&w->reqs[i]) || !comparable(&w->reqs[i])) {
            continue;
        }
        /* take the (k + 1/2) n_ok / want -th eligible request */
        if ((int64_t)(2 * seen + 1) * want >= (int64_t)(2 * got + 1) * n_ok) {
            probe[got++] = i;
        }
        seen++;
    }
    return got;
}

enum assay_status assay_check_isolation(const struct assay_adapter *a,
                                        const struct assay_workload *w,
                                        const struct assay_property_opts *opts,
                                        struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    struct assay_property_opts o = resolve(opts);
    struct assay_adapter_info info;
    info_of(a, &info);
    res->tie_tol = o.tie_tol;
    if (a->vt->set_logits_sink == NULL || info.vocab <= 0) {
        assay_check_skip(res, "needs the logits capability (set_logits_sink and "
                              "the vocabulary); the black-box form (tokens only) runs without it");
        res->seconds = seconds_since(t0);
        return ASSAY_OK;
    }
    int32_t probe[16];
    int32_t max_probes = o.n_probes < 16 ? o.n_probes : 16;
    int32_t n_probes = choose_probes(w, max_probes, probe);
    res->n_requests = n_probes;
    if (n_probes == 0) {
        assay_check_skip(res, "the workload has no request to probe (every one "
                              "is aborted or sampled without a seed)");
        res->seconds = seconds_since(t0);
        return ASSAY_OK;
    }
    bool *is_probe = assay_calloc((size_t)w->n, sizeof(bool));
    struct assay_transcript *alone[16] = {NULL};
    struct assay_workload *aw[16] = {NULL};
    if (is_probe == NULL) {
        assay_check_error(res, "out of memory");
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t k = 0; k < n_probes; k++) {
        is_probe[probe[k]] = true;
    }
    enum assay_status st = ASSAY_OK;
    struct iso_stats s = {0, 0, 0.0, 0, assay_calloc((size_t)info.vocab, sizeof(double))};
    if (s.row == NULL) {
        assay_free(is_probe);
        assay_check_error(res, "out of memory");
        return ASSAY_ERR_NOMEM;
    }
    char msg[600];
    /* Each probe alone: no neighbour at all. */
    for (int32_t k = 0; k < n_probes && st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS; k++) {
        uint8_t *keep = assay_calloc((size_t)w->n, 1);
        if (keep == NULL) {
            st = ASSAY_ERR_NOMEM;
            break;
        }
        keep[probe[k]] = 1;
        st = assay_workload_subset(w, keep, &aw[k]);
        assay_free(keep);
        if (st != ASSAY_OK) {
            break;
        }
        aw[k]->reqs[0].arrival_step = 0;
        aw[k]->reqs[0].arrival_s = 0.0;
        st = run(a, aw[k], true, NULL, &alone[k]);
        if (st != ASSAY_OK) {
            break;
        }
        res->n_steps += alone[k]->n_steps;
        if (!run_ok(alone[k], 0, "alone", msg, sizeof msg) ||
            !logits_finite(aw[k], alone[k], "in the run alone", msg, sizeof msg)) {
            assay_check_fail(res, "%s", msg);
        }
    }
    /* Then in every neighbourhood. */
    for (int v = 0; v < VARIANT_COUNT && st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS; v++) {
        struct assay_workload *vw = NULL;
        struct assay_transcript *tv = NULL;
        st = make_variant(w, is_probe, v, &info, &vw);
        if (st == ASSAY_OK) {
            st = run(a, vw, true, NULL, &tv);
        }
        if (st == ASSAY_OK) {
            res->n_steps += tv->n_steps;
            if (!logits_finite(vw, tv, variant_name(v), msg, sizeof msg)) {
                assay_check_fail(res, "%s", msg);
            }
            for (int32_t k = 0; k < n_probes && res->verdict == ASSAY_VERDICT_PASS; k++) {
                uint64_t id = w->reqs[probe[k]].id;
                int32_t j = find_request(vw, id);
                res->n_checks++;
                if (!run_ok(tv, j, variant_name(v), msg, sizeof msg)) {
                    assay_check_fail(res, "%s", msg);
                } else if (!compare_probe(alone[k], &alone[k]->reqs[0], tv, &tv->reqs[j], id,
                                          info.batch_invariant, &o, variant_name(v), &s, msg,
                                          sizeof msg)) {
                    char cause[520];
                    st = isolate_cause(a, aw[k], alone[k], id, info.batch_invariant, &o, &s,
                                       cause, sizeof cause);
                    assay_check_fail(res, "%.300s; %s", msg, cause);
                }
            }
        }
        assay_transcript_free(tv);
        assay_workload_free(vw);
    }
    for (int32_t k = 0; k < n_probes; k++) {
        assay_transcript_free(alone[k]);
        assay_workload_free(aw[k]);
    }
    assay_free(is_probe);
    assay_free(s.row);
    res->n_tokens = s.n_tokens;
    res->n_ties = s.n_ties;
    res->max_logit_diff = s.max_diff;
    if (st != ASSAY_OK) {
        assay_check_error(res, "could not run: %s", assay_status_str(st));
    }
    if (info.batch_invariant) {
        snprintf(res->summary, sizeof res->summary,
                 "%d probes alone and in %d neighbourhoods: %lld tokens and %lld logit rows "
                 "compared; the engine claims batch invariance: logits must match bit for bit "
                 "(largest difference %.3g)",
                 (int)n_probes, VARIANT_COUNT, (long long)s.n_tokens, (long long)s.n_logits,
                 s.max_diff);
    } else {
        snprintf(res->summary, sizeof res->summary,
                 "%d probes alone and in %d neighbourhoods: %lld tokens and %lld logit rows "
                 "compared; largest logit difference %.3g (tolerance %g, not batch invariant); "
                 "%d ties within %g",
                 (int)n_probes, VARIANT_COUNT, (long long)s.n_tokens, (long long)s.n_logits,
                 s.max_diff, o.logit_tol, (int)s.n_ties, o.tie_tol);
    }
    res->seconds = seconds_since(t0);
    return assay_status_keep_nomem(st);
}

/* ---- isolation, tokens only -------------------------------------------- */

enum arrangement {
    ARRANGE_SERIAL = 0, /* each request alone, one after the other */
    ARRANGE_BURST,      /* all at once */
    ARRANGE_STAGGERED,  /* one more every step */
    ARRANGE_GIVEN,      /* as the workload says */
    ARRANGE_COUNT
};

static const char *arrangement_name(int k)
{
    static const char *const names[ARRANGE_COUNT] = {
        "at concurrency 1 (each request alone)", "with every request arriving at once",
        "with one request arriving every step", "with the workload's arrivals"};
    return names[k];
}

static enum assay_status arrange(const struct assay_workload *w, int k, struct assay_workload **out)
{
    enum assay_status st = assay_workload_subset(w, NULL, out);
    if (st != ASSAY_OK || k == ARRANGE_GIVEN) {
        return st;
    }
    int64_t step = 0;
    for (int32_t i = 0; i < (*out)->n; i++) {
        struct assay_workload_request *r = &(*out)->reqs[i];
        if (k == ARRANGE_SERIAL) {
            /* Far enough apart that each request is done before the next:
             * a request alone needs at most prompt + max_tokens steps. */
            r->arrival_step = step < (1 << 30) ? (int32_t)step : (1 << 30);
            step += (int64_t)r->prompt_len + r->max_tokens + 2;
        } else {
            r->arrival_step = k == ARRANGE_BURST ? 0 : i;
        }
    }
    return ASSAY_OK;
}

/* Tokens of request i in run b against the reference run a (same
 * workload order). */
static bool compare_tokens(const struct assay_workload *w, const struct assay_transcript *ta,
                           const struct assay_transcript *tb, int32_t i, const char *where,
                           int64_t *n_tokens, char *msg, size_t size)
{
    const struct assay_transcript_req *qa = &ta->reqs[i], *qb = &tb->reqs[i];
    unsigned long long id = (unsigned long long)w->reqs[i].id;
    if (!comparable(&w->reqs[i])) {
        return true;
    }
    int32_t n = qa->n_events < qb->n_events ? qa->n_events : qb->n_events;
    n = n < qa->cap ? n : qa->cap;
    n = n < qb->cap ? n : qb->cap;
    for (int32_t t = 0; t < n; t++) {
        if (qa->tokens[t] != qb->tokens[t]) {
            snprintf(msg, size,
                     "request %llu, output position %d: token %d at concurrency 1, %d %s "
                     "(tokens only: a floating-point tie cannot be told from a leak)",
                     id, (int)t, (int)qa->tokens[t], (int)qb->tokens[t], where);
            return false;
        }
    }
    *n_tokens += n;
    if (!qa->aborted && !qb->aborted && qa->n_events != qb->n_events) {
        snprintf(msg, size, "request %llu: %d tokens at concurrency 1, %d %s", id,
                 (int)qa->n_events, (int)qb->n_events, where);
        return false;
    }
    return true;
}

/* Request i finished once, accepted, in every run. */
static bool finished_once(const struct assay_workload *w, const struct assay_transcript *t,
                          const char *where, char *msg, size_t size)
{
    if (t->status != ASSAY_OK) {
        snprintf(msg, size, "the run %s did not complete: %s", where, t->error);
        return false;
    }
    for (int32_t i = 0; i < w->n; i++) {
        if (!run_ok(t, i, where, msg, size)) {
            return false;
        }
    }
    return true;
}

enum assay_status assay_check_isolation_blackbox(const struct assay_adapter *a,
                                                 const struct assay_workload *w,
                                                 const struct assay_property_opts *opts,
                                                 struct assay_check_result *res)
{
    (void)opts;
    int64_t t0 = assay_now_ns();
    res->n_requests = w->n;
    struct assay_transcript *t[ARRANGE_COUNT] = {NULL};
    enum assay_status st = ASSAY_OK;
    char msg[600];
    for (int k = 0; k < ARRANGE_COUNT && st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS; k++) {
        struct assay_workload *wk = NULL;
        st = arrange(w, k, &wk);
        if (st == ASSAY_OK) {
            st = run(a, wk, false, NULL, &t[k]);
        }
        assay_workload_free(wk);
        if (st != ASSAY_OK) {
            break;
        }
        res->n_steps += t[k]->n_steps;
        if (!finished_once(w, t[k], arrangement_name(k), msg, sizeof msg)) {
            assay_check_fail(res, "%s", msg);
            break;
        }
        for (int32_t i = 0; k > 0 && i < w->n; i++) {
            res->n_checks++;
            if (!compare_tokens(w, t[0], t[k], i, arrangement_name(k), &res->n_tokens, msg,
                                sizeof msg)) {
                assay_check_fail(res, "%s", msg);
                break;
            }
        }
    }
    for (int k = 0; k < ARRANGE_COUNT; k++) {
        assay_transcript_free(t[k]);
    }
    if (st != ASSAY_OK) {
        assay_check_error(res, "could not run: %s", assay_status_str(st));
    }
    snprintf(res->summary, sizeof res->summary,
             "%d requests at concurrency 1, all at once, one per step and as given: %lld tokens "
             "compared with concurrency 1 (tokens only)",
             (int)w->n, (long long)res->n_tokens);
    res->seconds = seconds_since(t0);
    return assay_status_keep_nomem(st);
}

/* ---- the long randomised run ------------------------------------------- */

enum assay_status assay_check_soak(const struct assay_adapter *a, const struct assay_workload *w,
                                   const struct assay_property_opts *opts,
                                   struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    struct assay_property_opts o = resolve(opts);
    struct assay_adapter_info info;
    info_of(a, &info);
    res->n_requests = w->n;
    enum assay_status st = ASSAY_OK;
    bool watching = a->vt->block_audit != NULL;
    struct block_watch bw;
    memset(&bw, 0, sizeof bw);
    if (watching && watch_init(&bw, w, &o) != ASSAY_OK) {
        assay_check_error(res, "out of memory");
        return ASSAY_ERR_NOMEM;
    }
    char msg[640];
    const char *why_unwatched = "needs the block_audit capability (a snapshot of the engine's "
                                "block accounting); this adapter has none";
    if (watching) {
        st = watch_audit(&bw, a, !a->vt->has_work(a->self), msg, sizeof msg);
        if (st == ASSAY_ERR_UNSUPPORTED) {
            watching = false;
            why_unwatched = "the engine has no block accounting to audit (it keeps no paged KV "
                            "cache)";
            st = ASSAY_OK;
        } else if (st == ASSAY_ERR_INTERNAL) {
            assay_check_fail(res, "before the run: %s", msg);
            st = ASSAY_OK;
        }
    }
    struct assay_transcript *t[2] = {NULL, NULL};
    static const int order[2] = {ARRANGE_GIVEN, ARRANGE_SERIAL};
    if (st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS) {
        trace_in(w, &info, res, &st);
    }
    for (int k = 0; k < 2 && st == ASSAY_OK && res->verdict == ASSAY_VERDICT_PASS; k++) {
        struct assay_workload *wk = NULL;
        st = arrange(w, order[k], &wk);
        if (st == ASSAY_OK) {
            if (watching) {
                watch_new_run(&bw);
            }
            st = run(a, wk, false, watching ? &bw : NULL, &t[k]);
        }
        if (st != ASSAY_OK) {
            assay_workload_free(wk);
            break;
        }
        res->n_steps += t[k]->n_steps;
        char where[96];
        snprintf(where, sizeof where, "%s: ", arrangement_name(order[k]));
        if (watching) {
            judge_watched_run(&bw, a, t[k], where, res);
        }
        if (res->verdict == ASSAY_VERDICT_PASS &&
            !assay_trace_check_transcript(wk, t[k], info.vocab, msg, sizeof msg)) {
            assay_check_fail(res, "%s%s", where, msg);
        }
        assay_workload_free(wk);
    }
    for (int32_t i = 0; i < w->n && res->verdict == ASSAY_VERDICT_PASS && t[1] != NULL; i++) {
        res->n_checks++;
        if (!compare_tokens(w, t[1], t[0], i, arrangement_name(ARRANGE_GIVEN), &res->n_tokens,
                            msg, sizeof msg)) {
            assay_check_fail(res, "%s", msg);
        }
    }
    if (st != ASSAY_OK) {
        assay_check_error(res, "could not run: %s", assay_status_str(st));
    } else if (!watching && res->verdict == ASSAY_VERDICT_PASS) {
        assay_check_skip(res,
                         "block conservation %s (trace consistency and "
                         "isolation passed)",
                         why_unwatched);
    }
    res->n_checks += bw.n_audits;
    snprintf(res->summary, sizeof res->summary,
             "%d requests (%d aborted), as given and at concurrency 1: %lld block snapshots "
             "judged, one per engine step (peak %d of %d in use, exhausted at %lld, %lld "
             "preemptions seen); %lld tokens equal in both runs",
             (int)w->n, (int)count_aborting(w), (long long)bw.n_audits, (int)bw.peak_in_use,
             (int)bw.last.total, (long long)bw.exhausted, (long long)bw.preemptions,
             (long long)res->n_tokens);
    assay_transcript_free(t[0]);
    assay_transcript_free(t[1]);
    if (bw.model != NULL) {
        watch_free(&bw);
    }
    res->seconds = seconds_since(t0);
    return assay_status_keep_nomem(st);
}

/* ---- plan runners ------------------------------------------------------- */

/* Read item->params into o. Returns false (res: ERROR) on a bad one. */
bool assay_property_parse_params(const char *params, struct assay_property_opts *o,
                                 struct assay_check_result *res)
{
    *o = assay_property_default_opts();
    if (params == NULL) {
        return true;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", params);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (eq == NULL) {
            assay_check_error(res, "parameter '%s': expected key=value", kv);
            return false;
        }
        *eq = '\0';
        const char *v = eq + 1;
        char *end = NULL;
        bool ok = false;
        if (strcmp(kv, "probes") == 0) {
            long x = strtol(v, &end, 10);
            o->n_probes = (int32_t)x;
            ok = *end == '\0' && x >= 1 && x <= 16;
        } else if (strcmp(kv, "slack") == 0) {
            long x = strtol(v, &end, 10);
            o->slack_blocks = (int32_t)x;
            ok = *end == '\0' && x >= -1 && x <= (1L << 20);
        } else if (strcmp(kv, "tol") == 0 || strcmp(kv, "tie") == 0) {
            double x = strtod(v, &end);
            *(strcmp(kv, "tol") == 0 ? &o->logit_tol : &o->tie_tol) = x;
            ok = *end == '\0' && x >= 0.0;
        } else if (strcmp(kv, "self_check") == 0) {
            o->engine_self_check = strcmp(v, "on") == 0;
            ok = strcmp(v, "on") == 0 || strcmp(v, "off") == 0;
        }
        if (!ok) {
            assay_check_error(res,
                              "parameter %s=%s: expected probes=1..16, "
                              "slack=-1.., tol=x, tie=x or self_check=on|off",
                              kv, v);
            return false;
        }
    }
    return true;
}
