/*
 * Unit tests of the property family's parts: the block model
 * (oracles/block_model.h) on hand-made snapshots, one broken rule at a time,
 * and against the bundled engine; the trace rules (checks/trace.h); the
 * checks themselves on adapters that lie (they must FAIL) or lack a
 * capability (they must SKIP, never PASS); and the shrinker
 * (checks/shrink.h) on a check whose smallest failing case is known.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>

#include "adapters/bundled.h"
#include "adapters/spec.h"
#include "checks/harness.h"
#include "checks/property.h"
#include "checks/shrink.h"
#include "checks/context.h"
#include "checks/equivalence.h"
#include "checks/plan.h"
#include "checks/trace.h"
#include "core/alloc.h"
#include "core/rng.h"
#include "core/workload.h"
#include "engine/engine.h"
#include "oracles/block_model.h"
#include "core/clock.h"
#include "support.h"

/* ---- a hand-made snapshot ------------------------------------------------
 *
 * 8 blocks of 2 positions. Sequence 10 holds 0 1 2, sequence 11 holds 0 3:
 * block 0 is a shared prefix block (registered); block 4 is cached
 * (registered, held by none); 5 6 7 are free. */
struct snap {
    struct assay_block_audit a;
    int32_t ref[8];
    int32_t free_list[8];
    int32_t evictable[8];
    int32_t cache[8];
    uint64_t ids[2];
    int32_t nb[2];
    int32_t t0[3], t1[2];
    const int32_t *tables[2];
    int32_t n_prompt[2], n_tokens[2], n_computed[2];
    int32_t tok0[6], tok1[4];
    const int32_t *toks[2];
    int32_t block_tokens[16];
    uint64_t key[8], parent[8];
};

static void snap_init(struct snap *s)
{
    memset(s, 0, sizeof *s);
    int32_t ref[8] = {2, 1, 1, 1, 0, 0, 0, 0};
    memcpy(s->ref, ref, sizeof ref);
    s->free_list[0] = 5;
    s->free_list[1] = 6;
    s->free_list[2] = 7;
    s->evictable[0] = 4;
    s->cache[0] = 0;
    s->cache[1] = 4;
    s->ids[0] = 10;
    s->ids[1] = 11;
    s->nb[0] = 3;
    s->nb[1] = 2;
    s->t0[0] = 0, s->t0[1] = 1, s->t0[2] = 2;
    s->t1[0] = 0, s->t1[1] = 3;
    s->tables[0] = s->t0;
    s->tables[1] = s->t1;
    int32_t tok0[6] = {7, 8, 1, 2, 3, 4}, tok1[4] = {7, 8, 5, 6};
    memcpy(s->tok0, tok0, sizeof tok0);
    memcpy(s->tok1, tok1, sizeof tok1);
    s->toks[0] = s->tok0;
    s->toks[1] = s->tok1;
    s->n_prompt[0] = 4, s->n_tokens[0] = 6, s->n_computed[0] = 5;
    s->n_prompt[1] = 3, s->n_tokens[1] = 4, s->n_computed[1] = 3;
    s->block_tokens[0] = 7, s->block_tokens[1] = 8;   /* block 0's key */
    s->block_tokens[8] = 9, s->block_tokens[9] = 9;   /* block 4's key */
    s->key[0] = 100, s->parent[0] = 0;                 /* both first blocks */
    s->key[4] = 400, s->parent[4] = 0;
    struct assay_block_audit *a = &s->a;
    a->stats = (struct assay_block_stats){2, 8, 3, 4, 1};
    a->ref_count = s->ref;
    a->free_list = s->free_list;
    a->n_free = 3;
    a->evictable = s->evictable;
    a->n_evictable = 1;
    a->cache_block = s->cache;
    a->n_cache = 2;
    a->n_seqs = 2;
    a->seq_id = s->ids;
    a->seq_n_blocks = s->nb;
    a->seq_blocks = s->tables;
    a->seq_n_prompt = s->n_prompt;
    a->seq_n_tokens = s->n_tokens;
    a->seq_n_computed = s->n_computed;
    a->seq_tokens = s->toks;
    a->block_tokens = s->block_tokens;
    a->block_key = s->key;
    a->block_parent = s->parent;
}

static int32_t check_snap(const struct snap *s, int32_t slack, bool drained, char *msg, size_t size)
{
    struct assay_block_model *m;
    assert_int_equal(assay_block_model_init(&m), ASSAY_OK);
    struct assay_block_model_opts o = assay_block_model_default_opts();
    o.slack_blocks = slack;
    o.drained = drained;
    int32_t n = assay_block_model_check(m, &s->a, &o, msg, size);
    assay_block_model_free(m);
    return n;
}

/* The snapshot breaks exactly the named rule (its message starts so). */
static void expect_rule(const struct snap *s, const char *rule)
{
    char msg[400];
    int32_t n = check_snap(s, 0, false, msg, sizeof msg);
    if (n == 0 || strncmp(msg, rule, strlen(rule)) != 0) {
        fail_msg("expected a violation of %s, got %d: %s", rule, (int)n, msg);
    }
}

static void test_model_consistent_snapshot(void **state)
{
    (void)state;
    struct snap s;
    snap_init(&s);
    char msg[400];
    assert_int_equal(check_snap(&s, 0, false, msg, sizeof msg), 0);
    assert_string_equal(msg, "");
    struct assay_block_model *m;
    assert_int_equal(assay_block_model_init(&m), ASSAY_OK);
    struct assay_block_derived d;
    assert_int_equal(assay_block_model_derive(m, &s.a, &d), ASSAY_OK);
    assert_int_equal(d.free, 3);
    assert_int_equal(d.in_use, 4);
    assert_int_equal(d.cached, 1);
    assert_int_equal(d.ref[0], 2);
    assert_int_equal(d.ref[4], 0);
    assert_int_equal(d.state[4], ASSAY_BLOCK_CACHED);
    assert_int_equal(d.state[0], ASSAY_BLOCK_IN_USE);
    assert_int_equal(d.state[7], ASSAY_BLOCK_FREE);
    /* a malformed snapshot is refused, not read */
    s.a.stats.total = 0;
    assert_int_equal(assay_block_model_derive(m, &s.a, &d), ASSAY_ERR_INVALID);
    assay_block_model_free(m);
}

static void test_model_each_rule(void **state)
{
    (void)state;
    struct snap s;
    snap_init(&s);
    s.a.n_free = -1;
    expect_rule(&s, "R1 shape");

    snap_init(&s);
    s.t0[2] = 8;
    expect_rule(&s, "R2 range");

    snap_init(&s);
    s.free_list[2] = 6; /* 6 twice, 7 on no list */
    expect_rule(&s, "R3 duplicate");

    snap_init(&s);
    s.ref[3] = 2; /* counted twice by the engine */
    expect_rule(&s, "R4 refcount");

    snap_init(&s);
    s.ref[2] = 0, s.nb[0] = 2, s.n_computed[0] = 4, s.free_list[3] = 2, s.a.n_free = 3;
    /* block 2 left sequence 10 but is on no list */
    expect_rule(&s, "R5 lists");

    snap_init(&s);
    s.free_list[2] = 4; /* a cached block on the free list and the evictable list */
    expect_rule(&s, "R5 lists");

    snap_init(&s);
    s.a.stats.free = 4; /* evictable blocks counted as free too */
    expect_rule(&s, "R6 conservation");

    snap_init(&s);
    s.a.stats.in_use = 3, s.a.stats.free = 4; /* adds up, but not what the lists say */
    expect_rule(&s, "R6 totals");

    snap_init(&s);
    s.t1[1] = 2, s.ref[2] = 2, s.ref[3] = 0, s.free_list[3] = 3, s.a.n_free = 4;
    s.a.stats.free = 4, s.a.stats.in_use = 3;
    expect_rule(&s, "R7 sharing"); /* block 2 in two tables, not a prefix block */

    snap_init(&s);
    s.t1[0] = 3, s.t1[1] = 0, s.tok1[2] = 7, s.tok1[3] = 8;
    expect_rule(&s, "R7 sharing"); /* block 0 at index 0 and at index 1 */

    snap_init(&s);
    s.tok1[1] = 99; /* sequence 11's first block is not the key's tokens */
    expect_rule(&s, "R8 content");

    snap_init(&s);
    s.parent[0] = 400; /* the same tokens, but keyed after another block */
    expect_rule(&s, "R8 content");
    char chained[400];
    assert_true(check_snap(&s, 0, false, chained, sizeof chained) > 0);
    assert_non_null(strstr(chained, "another history"));

    snap_init(&s);
    s.n_computed[0] = 7, s.n_tokens[0] = 7; /* 7 positions need 4 blocks of 2 */
    expect_rule(&s, "R9 coverage");

    snap_init(&s);
    s.n_computed[0] = 4; /* 3 blocks for 4 positions: one too many */
    expect_rule(&s, "R9 holding");
    char msg[400];
    assert_int_equal(check_snap(&s, 1, false, msg, sizeof msg), 0); /* allowed with slack 1 */

    snap_init(&s);
    s.n_prompt[1] = 5; /* a prompt longer than the sequence */
    expect_rule(&s, "R10 counts");

    snap_init(&s);
    assert_true(check_snap(&s, 0, true, msg, sizeof msg) > 0);
    assert_non_null(strstr(msg, "R11 drained"));
}

/* The model agrees with the bundled engine after every step of a run with
 * prefix hits, eviction, preemption and aborts; the totals it derives are
 * the engine's. */
static void test_model_agrees_with_engine(void **state)
{
    (void)state;
    struct assay_model_config cfg = assay_model_config_mini();
    struct assay_model *model;
    assert_int_equal(assay_model_init_random(&model, &cfg, 1), ASSAY_OK);
    struct assay_engine_params p = assay_engine_default_params(model);
    p.block_size = 4;
    p.n_blocks = 20;
    p.max_batch = 6;
    p.chunk = 8;
    struct assay_engine *e;
    assert_int_equal(assay_engine_init(&e, &p, NULL), ASSAY_OK);
    struct assay_block_model *m;
    assert_int_equal(assay_block_model_init(&m), ASSAY_OK);
    int32_t prompt[40];
    for (int i = 0; i < 40; i++) {
        prompt[i] = i < 12 ? 5 + i : (int32_t)(assay_mix64((uint64_t)i) % 256);
    }
    uint64_t next_id = 1;
    int64_t steps = 0, cached_seen = 0;
    for (; steps < 400; steps++) {
        if (steps % 3 == 0 && next_id <= 40) {
            struct assay_request r = {next_id, prompt, 13 + (int32_t)(next_id % 27),
                                      1 + (int32_t)(next_id % 19), -1, assay_sampling_greedy()};
            assert_int_equal(assay_engine_add_request(e, &r), ASSAY_OK);
            next_id++;
        }
        if (steps % 7 == 5) {
            (void)assay_engine_abort(e, next_id - 2); /* may be finished already */
        }
        if (!assay_engine_has_work(e) && next_id > 40) {
            break;
        }
        const struct assay_event *ev;
        size_t n;
        assert_int_equal(assay_engine_step(e, &ev, &n), ASSAY_OK);
        struct assay_block_audit a;
        assert_int_equal(assay_engine_block_audit(e, &a), ASSAY_OK);
        char msg[400];
        struct assay_block_model_opts o = assay_block_model_default_opts();
        o.drained = !assay_engine_has_work(e);
        if (assay_block_model_check(m, &a, &o, msg, sizeof msg) != 0) {
            fail_msg("step %lld: %s", (long long)steps, msg);
        }
        struct assay_block_derived d;
        assert_int_equal(assay_block_model_derive(m, &a, &d), ASSAY_OK);
        assert_int_equal(d.free, a.stats.free);
        assert_int_equal(d.in_use, a.stats.in_use);
        assert_int_equal(d.cached, a.stats.cached);
        cached_seen += d.cached > 0;
    }
    assert_true(cached_seen > 0); /* the prefix cache was exercised */
    assay_block_model_free(m);
    assay_engine_free(e);
    assay_model_free(model);
}

/* ---- trace rules -------------------------------------------------------- */

static struct assay_workload *parse(const char *json)
{
    struct assay_workload_limits lim = {260, 256, 0};
    struct assay_workload *w = NULL;
    struct assay_diag d;
    assay_diag_clear(&d);
    assert_int_equal(assay_workload_parse(json, strlen(json), "t", &lim, &w, &d), ASSAY_OK);
    return w;
}

static void test_trace_in(void **state)
{
    (void)state;
    struct assay_workload *w = parse(
        "{\"format\":\"assay-workload\",\"version\":1,\"requests\":["
        "{\"id\":1,\"arrival_step\":0,\"prompt\":[1,2,3],\"max_tokens\":4},"
        "{\"id\":2,\"arrival_step\":1,\"prompt\":[4,5],\"max_tokens\":4,\"stop_token\":9}]}");
    char msg[300];
    int32_t bad;
    assert_int_equal(assay_trace_check_workload(w, 260, 256, &bad, msg, sizeof msg), ASSAY_OK);
    assert_int_equal(bad, -1);
    w->reqs[1].prompt[1] = 260;
    assert_int_equal(assay_trace_check_workload(w, 260, 256, &bad, msg, sizeof msg), ASSAY_OK);
    assert_int_equal(bad, 1);
    assert_non_null(strstr(msg, "outside the vocabulary"));
    w->reqs[1].prompt[1] = 5;
    w->reqs[1].arrival_step = 0, w->reqs[0].arrival_step = 2;
    assert_int_equal(assay_trace_check_workload(w, 260, 256, &bad, msg, sizeof msg), ASSAY_OK);
    assert_non_null(strstr(msg, "not sorted"));
    w->reqs[0].arrival_step = 0;
    w->reqs[1].id = 1;
    assert_int_equal(assay_trace_check_workload(w, 260, 256, &bad, msg, sizeof msg), ASSAY_OK);
    assert_non_null(strstr(msg, "share the id"));
    w->reqs[1].id = 2;
    w->reqs[0].max_tokens = 254;
    assert_int_equal(assay_trace_check_workload(w, 260, 256, &bad, msg, sizeof msg), ASSAY_OK);
    assert_non_null(strstr(msg, "exceeds the context"));
    assay_workload_free(w);
    /* A file whose declared prompt_len is not its tokens does not load. */
    const char *lie = "{\"format\":\"assay-workload\",\"version\":1,\"requests\":["
                      "{\"id\":1,\"prompt\":[1,2,3],\"prompt_len\":4,\"max_tokens\":4}]}";
    struct assay_workload_limits lim = {260, 256, 0};
    struct assay_diag d;
    assay_diag_clear(&d);
    assert_int_equal(assay_workload_parse(lie, strlen(lie), "t", &lim, &w, &d), ASSAY_ERR_PARSE);
    assert_string_equal(d.where, "requests[0].prompt_len");
}

/* A transcript of one request of max_tokens 3, built by hand. */
struct fake_t {
    struct assay_transcript t;
    struct assay_transcript_req q;
    int32_t tokens[8], index[8];
    int64_t t_ns[8];
};

static void fake_init(struct fake_t *f)
{
    memset(f, 0, sizeof *f);
    f->t.reqs = &f->q;
    f->t.n = 1;
    f->t.status = ASSAY_OK;
    f->q.id = 1;
    f->q.submitted = true;
    f->q.cap = 8;
    f->q.tokens = f->tokens;
    f->q.index = f->index;
    f->q.t_ns = f->t_ns;
    f->q.n_events = 3;
    f->q.n_finish = 1;
    f->q.reason = ASSAY_FINISH_LENGTH;
    f->q.finish_index = 3;
    f->q.t_submit_ns = 100;
    for (int i = 0; i < 3; i++) {
        f->tokens[i] = 10 + i;
        f->index[i] = i;
        f->t_ns[i] = 200 + 10 * i;
    }
    f->q.t_finish_ns = 230;
}

static void expect_trace(struct assay_workload *w, const struct fake_t *f, const char *needle)
{
    char msg[400] = "";
    bool ok = assay_trace_check_transcript(w, &f->t, 260, msg, sizeof msg);
    if (needle == NULL) {
        if (!ok) {
            fail_msg("expected consistent, got: %s", msg);
        }
    } else if (ok || strstr(msg, needle) == NULL) {
        fail_msg("expected '%s', got %s: %s", needle, ok ? "consistent" : "inconsistent", msg);
    }
}

static void test_trace_out(void **state)
{
    (void)state;
    struct assay_workload *w = parse("{\"format\":\"assay-workload\",\"version\":1,\"requests\":["
                                     "{\"id\":1,\"prompt\":[1,2,3],\"max_tokens\":3,"
                                     "\"stop_token\":50}]}");
    struct fake_t f;
    fake_init(&f);
    expect_trace(w, &f, NULL);
    f.index[2] = 1; /* a position delivered twice */
    expect_trace(w, &f, "delivered before");
    fake_init(&f);
    f.q.n_finish = 2;
    expect_trace(w, &f, "finished 2 times");
    fake_init(&f);
    f.q.n_events = 2, f.q.finish_index = 2;
    expect_trace(w, &f, "expected max_tokens");
    fake_init(&f);
    f.tokens[1] = 300;
    expect_trace(w, &f, "outside the vocabulary");
    fake_init(&f);
    f.t_ns[1] = 150;
    expect_trace(w, &f, "stamped");
    fake_init(&f);
    f.q.t_finish_ns = 50;
    expect_trace(w, &f, "its FINISH is stamped");
    fake_init(&f);
    f.tokens[1] = 50; /* generated the stop token and went on */
    expect_trace(w, &f, "stop token");
    fake_init(&f);
    f.q.reason = ASSAY_FINISH_STOP; /* a stop that ended on no stop token */
    expect_trace(w, &f, "finished on a stop token it did not deliver");
    fake_init(&f);
    f.q.reason = ASSAY_FINISH_STOP; /* a stop at its end, and one before it */
    f.tokens[0] = 50;
    f.tokens[2] = 50;
    expect_trace(w, &f, "went on after its stop token at 0");
    fake_init(&f);
    f.q.reason = ASSAY_FINISH_STOP; /* the first stop token ends it: consistent */
    f.tokens[2] = 50;
    expect_trace(w, &f, NULL);
    fake_init(&f);
    f.t.n_unknown_events = 1;
    expect_trace(w, &f, "never submitted");
    fake_init(&f);
    f.t.status = ASSAY_ERR_TIMEOUT;
    expect_trace(w, &f, "did not complete");
    fake_init(&f);
    f.q.reason = ASSAY_FINISH_ABORT;
    expect_trace(w, &f, "nobody aborted");
    fake_init(&f);
    f.q.reason = ASSAY_FINISH_ABORT; /* aborted after all three arrived: consistent */
    f.q.aborted = true;
    f.q.n_at_abort = 3;
    expect_trace(w, &f, NULL);
    f.q.n_at_abort = 1; /* two came from steps after the abort */
    expect_trace(w, &f, "received 2 tokens after its abort was accepted (it had 1 then)");
    f.q.reason = ASSAY_FINISH_LENGTH; /* an abort that was not carried out */
    expect_trace(w, &f, "after its abort");
    assay_workload_free(w);
}

/* ---- checks on adapters that lie or lack capabilities --------------------- */

enum lie {
    LIE_NONE,
    LIE_NO_CAPABILITIES, /* no block_audit, no logits, no self-check */
    LIE_REPEAT_TOKEN,    /* every request's first token is delivered twice */
    LIE_REFCOUNT,        /* the audit reports block 0's reference count one too high */
    LIE_NEIGHBOUR,       /* a token depends on how many requests share the step */
    LIE_RUN_STATE,       /* a request's tokens change once the engine has served its id */
    LIE_SLOW,            /* a server: 40 empty 1 ms polls before every engine step */
    LIE_SILENT,          /* after 3 steps nothing ever comes, the work never ends */
};

struct liar {
    struct assay_adapter inner;
    enum lie lie;
    struct assay_event ev[4096];
    int32_t ref[4096];
    int32_t seen[4096]; /* LIE_RUN_STATE: how often each id (mod 4096) was added */
    int64_t polls;      /* LIE_SLOW, LIE_SILENT: steps asked for */
};

static struct liar *g_liar;

static enum assay_status l_add(void *self, const struct assay_request *r)
{
    struct liar *l = self;
    l->seen[r->id % 4096]++;
    return l->inner.vt->add_request(l->inner.self, r);
}
static bool l_has_work(void *self)
{
    struct liar *l = self;
    return l->inner.vt->has_work(l->inner.self);
}
static enum assay_status l_step(void *self, const struct assay_event **events, size_t *n)
{
    struct liar *l = self;
    if (l->lie == LIE_SLOW || l->lie == LIE_SILENT) {
        l->polls++;
        if ((l->lie == LIE_SLOW && l->polls % 41 != 0) || (l->lie == LIE_SILENT && l->polls > 3)) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
            *events = l->ev;
            *n = 0;
            return ASSAY_OK;
        }
    }
    enum assay_status st = l->inner.vt->step(l->inner.self, events, n);
    if (l->lie != LIE_REPEAT_TOKEN && l->lie != LIE_NEIGHBOUR && l->lie != LIE_RUN_STATE) {
        return st;
    }
    size_t m = 0, n_tok = 0;
    for (size_t i = 0; i < *n; i++) {
        n_tok += (*events)[i].kind == ASSAY_EVENT_TOKEN;
    }
    for (size_t i = 0; i < *n && m + 2 < 4096; i++) {
        l->ev[m] = (*events)[i];
        if (l->lie == LIE_NEIGHBOUR && l->ev[m].kind == ASSAY_EVENT_TOKEN && n_tok > 1) {
            l->ev[m].token = (l->ev[m].token + 1) % 256;
        }
        if (l->lie == LIE_RUN_STATE && l->ev[m].kind == ASSAY_EVENT_TOKEN &&
            l->seen[l->ev[m].request_id % 4096] > 1) {
            l->ev[m].token = (l->ev[m].token + 1) % 256;
        }
        m++;
        if (l->lie == LIE_REPEAT_TOKEN && (*events)[i].kind == ASSAY_EVENT_TOKEN &&
            (*events)[i].index == 0) {
            l->ev[m++] = (*events)[i];
        }
    }
    *events = l->ev;
    *n = m;
    return st;
}
static enum assay_status l_abort(void *self, uint64_t id)
{
    struct liar *l = self;
    return l->inner.vt->abort(l->inner.self, id);
}
static void l_free(void *self)
{
    (void)self;
}
static enum assay_status l_info(void *self, struct assay_adapter_info *out)
{
    struct liar *l = self;
    return l->inner.vt->info(l->inner.self, out);
}
static enum assay_status l_audit(void *self, struct assay_block_audit *out)
{
    struct liar *l = self;
    enum assay_status st = l->inner.vt->block_audit(l->inner.self, out);
    if (st == ASSAY_OK && l->lie == LIE_REFCOUNT && out->stats.total <= 4096) {
        memcpy(l->ref, out->ref_count, sizeof(int32_t) * (size_t)out->stats.total);
        l->ref[0]++;
        out->ref_count = l->ref;
    }
    return st;
}
static enum assay_status l_sink(void *self, assay_logits_sink sink, void *ctx)
{
    struct liar *l = self;
    return l->inner.vt->set_logits_sink(l->inner.self, sink, ctx);
}
static enum assay_status l_check(void *self, char *msg, size_t size)
{
    struct liar *l = self;
    return l->inner.vt->check_invariants(l->inner.self, msg, size);
}

static const struct assay_adapter_vtable k_full = {
    ASSAY_ADAPTER_ABI_VERSION, "liar", l_add, l_has_work, l_step, l_abort, l_free, l_info,
    NULL, l_audit, l_sink, l_check, NULL};
static const struct assay_adapter_vtable k_bare = {
    ASSAY_ADAPTER_ABI_VERSION, "bare", l_add, l_has_work, l_step, l_abort, l_free, l_info,
    NULL, NULL, NULL, NULL, NULL};

static struct assay_adapter liar_open(enum lie lie)
{
    if (g_liar == NULL) {
        g_liar = calloc(1, sizeof *g_liar);
        assert_non_null(g_liar);
        struct assay_diag d;
        assay_diag_clear(&d);
        assert_int_equal(assay_adapter_open_spec("bundled:model=mini,kv=paged,block=4,blocks=24,"
                                                 "prefix=on,chunk=8,batch=6",
                                                 &g_liar->inner, &d),
                         ASSAY_OK);
    }
    g_liar->lie = lie;
    g_liar->polls = 0;
    memset(g_liar->seen, 0, sizeof g_liar->seen);
    struct assay_adapter a = {lie == LIE_NO_CAPABILITIES ? &k_bare : &k_full, g_liar};
    return a;
}

static struct assay_workload *small_workload(void)
{
    return parse("{\"format\":\"assay-workload\",\"version\":1,\"generate\":{\"seed\":5,\"n\":8,"
                 "\"arrival\":{\"process\":\"burst\",\"step_every\":1},"
                 "\"prompt_len\":{\"dist\":\"uniform\",\"min\":3,\"max\":30},"
                 "\"output_len\":{\"dist\":\"uniform\",\"min\":4,\"max\":12},"
                 "\"shared_prefix\":{\"len\":8},"
                 "\"abort\":{\"fraction\":0.25,\"after\":{\"dist\":\"constant\",\"value\":2}}}}");
}

/* "abort_step" is drawn after everything else: the workload without it is
 * the same, and some requests get an abort after 1..6 steps. */
static void test_generate_abort_step(void **state)
{
    (void)state;
    static const char *const base =
        "{\"format\":\"assay-workload\",\"version\":1,\"generate\":{\"seed\":5,\"n\":40,"
        "\"prompt_len\":{\"dist\":\"uniform\",\"min\":3,\"max\":30},"
        "\"output_len\":{\"dist\":\"uniform\",\"min\":4,\"max\":12},"
        "\"abort\":{\"fraction\":0.25,\"after\":{\"dist\":\"constant\",\"value\":2}}%s}}";
    char with[1024], without[1024];
    snprintf(without, sizeof without, base, "");
    snprintf(with, sizeof with, base,
             ",\"abort_step\":{\"fraction\":0.5,\"after\":{\"dist\":\"uniform\",\"min\":1,"
             "\"max\":6}}");
    struct assay_workload *a = parse(without), *b = parse(with);
    int32_t n_step = 0;
    for (int32_t i = 0; i < a->n; i++) {
        assert_int_equal(a->reqs[i].prompt_len, b->reqs[i].prompt_len);
        assert_int_equal(a->reqs[i].max_tokens, b->reqs[i].max_tokens);
        assert_int_equal(a->reqs[i].abort_after, b->reqs[i].abort_after);
        assert_memory_equal(a->reqs[i].prompt, b->reqs[i].prompt,
                            (size_t)a->reqs[i].prompt_len * sizeof(int32_t));
        assert_int_equal(a->reqs[i].abort_step, -1);
        if (b->reqs[i].abort_step >= 0) {
            assert_in_range(b->reqs[i].abort_step, 1, 6);
            n_step++;
        }
    }
    assert_in_range(n_step, 8, 32);
    assay_workload_free(a);
    assay_workload_free(b);
}

static void test_checks_pass_on_the_engine(void **state)
{
    (void)state;
    struct assay_workload *w = small_workload();
    assert_true(w->reqs[0].abort_after >= 0 || w->reqs[1].abort_after >= 0 ||
                w->reqs[2].abort_after >= 0 || w->reqs[3].abort_after >= 0 ||
                w->reqs[4].abort_after >= 0 || w->reqs[5].abort_after >= 0 ||
                w->reqs[6].abort_after >= 0 || w->reqs[7].abort_after >= 0);
    struct assay_adapter a = liar_open(LIE_NONE);
    enum assay_status (*checks[])(const struct assay_adapter *, const struct assay_workload *,
                                  const struct assay_property_opts *,
                                  struct assay_check_result *) = {
        assay_check_blocks, assay_check_trace, assay_check_isolation,
        assay_check_isolation_blackbox, assay_check_soak};
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        struct assay_check_result r;
        assay_check_result_init(&r, "t", ASSAY_FAMILY_PROPERTY);
        assert_int_equal(checks[i](&a, w, NULL, &r), ASSAY_OK);
        if (r.verdict != ASSAY_VERDICT_PASS) {
            fail_msg("check %d: %s: %s", (int)i, assay_verdict_str(r.verdict), r.failure);
        }
    }
    assay_workload_free(w);
}

static void expect_verdict(enum lie lie,
                           enum assay_status (*check)(const struct assay_adapter *,
                                                      const struct assay_workload *,
                                                      const struct assay_property_opts *,
                                                      struct assay_check_result *),
                           enum assay_verdict want, const char *needle)
{
    struct assay_workload *w = small_workload();
    struct assay_adapter a = liar_open(lie);
    struct assay_check_result r;
    assay_check_result_init(&r, "t", ASSAY_FAMILY_PROPERTY);
    assert_int_equal(check(&a, w, NULL, &r), ASSAY_OK);
    if (r.verdict != want || strstr(r.failure, needle) == NULL) {
        fail_msg("expected %s with '%s', got %s: %s", assay_verdict_str(want), needle,
                 assay_verdict_str(r.verdict), r.failure);
    }
    assay_workload_free(w);
}

static void test_checks_fail_on_lies(void **state)
{
    (void)state;
    expect_verdict(LIE_REPEAT_TOKEN, assay_check_trace, ASSAY_VERDICT_FAIL, "delivered before");
    expect_verdict(LIE_REFCOUNT, assay_check_blocks, ASSAY_VERDICT_FAIL, "R4 refcount");
    expect_verdict(LIE_REFCOUNT, assay_check_soak, ASSAY_VERDICT_FAIL, "R4 refcount");
    /* The isolation check names a cause only when it isolated it: a
     * neighbour in flight, or state the engine keeps between runs. */
    expect_verdict(LIE_NEIGHBOUR, assay_check_isolation, ASSAY_VERDICT_FAIL,
                   "needs neighbours in flight: cross-sequence interference");
    expect_verdict(LIE_RUN_STATE, assay_check_isolation, ASSAY_VERDICT_FAIL,
                   "not attention to a neighbour");
    expect_verdict(LIE_NEIGHBOUR, assay_check_isolation_blackbox, ASSAY_VERDICT_FAIL,
                   "concurrency 1");
    expect_verdict(LIE_NEIGHBOUR, assay_check_soak, ASSAY_VERDICT_FAIL, "concurrency 1");
}

static void test_missing_capabilities_skip(void **state)
{
    (void)state;
    expect_verdict(LIE_NO_CAPABILITIES, assay_check_blocks, ASSAY_VERDICT_SKIP, "block_audit");
    expect_verdict(LIE_NO_CAPABILITIES, assay_check_isolation, ASSAY_VERDICT_SKIP, "logits");
    expect_verdict(LIE_NO_CAPABILITIES, assay_check_soak, ASSAY_VERDICT_SKIP, "block_audit");
    /* what needs no capability still judges */
    expect_verdict(LIE_NO_CAPABILITIES, assay_check_isolation_blackbox, ASSAY_VERDICT_PASS, "");
    expect_verdict(LIE_NO_CAPABILITIES, assay_check_trace, ASSAY_VERDICT_PASS, "");
}

/* ---- the shrinker -------------------------------------------------------- */

/* Fails when some request's prompt holds token 200, asks for at least 3
 * tokens, and the pool has at most 10 blocks: the smallest failing case is
 * one request, the prompt up to its first 200, max_tokens 3, and the
 * smallest pool that fits it. */
static enum assay_status needle_check(struct assay_verify_ctx *ctx,
                                      const struct assay_plan_item *item,
                                      const struct assay_target *t, const struct assay_workload *w,
                                      struct assay_check_result *res)
{
    (void)ctx;
    (void)item;
    const struct assay_adapter *a = t->adapter;
    struct assay_block_stats s;
    assert_int_equal(a->vt->block_stats(a->self, &s), ASSAY_OK);
    for (int32_t i = 0; w != NULL && i < w->n; i++) {
        for (int32_t k = 0; k < w->reqs[i].prompt_len; k++) {
            if (w->reqs[i].prompt[k] == 200 && w->reqs[i].max_tokens >= 3 && s.total <= 10) {
                assay_check_fail(res, "request %llu holds the needle",
                                 (unsigned long long)w->reqs[i].id);
            }
        }
    }
    return ASSAY_OK;
}

static const struct assay_plan_item k_needle = {
    .name = "unit.needle",
    .family = ASSAY_FAMILY_PROPERTY,
    .options = "model=mini,kv=paged,block=4,batch=4;blocks=10",
    .workload = "needle.json",
    .about = "a check with a known smallest failure",
    .run = needle_check,
    .command = ASSAY_COMMAND_VERIFY,
    .needs = ASSAY_NEED_BLOCKS};
static const struct assay_plan_item k_needle_fixed = {
    .name = "unit.needle-fixed",
    .family = ASSAY_FAMILY_PROPERTY,
    .options = "model=mini,kv=paged,block=4,batch=4,blocks=10",
    .workload = "needle.json",
    .about = "the same with a pool the check fixes",
    .run = needle_check,
    .command = ASSAY_COMMAND_VERIFY,
    .needs = ASSAY_NEED_BLOCKS};

static void write_needle(const char *dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/needle.json", dir);
    struct assay_workload *w = parse(
        "{\"format\":\"assay-workload\",\"version\":1,\"generate\":{\"seed\":9,\"n\":30,"
        "\"vocab\":150,\"arrival\":{\"process\":\"burst\",\"step_every\":2},"
        "\"prompt_len\":{\"dist\":\"uniform\",\"min\":10,\"max\":20},"
        "\"output_len\":{\"dist\":\"uniform\",\"min\":4,\"max\":9}}}");
    w->reqs[17].prompt[6] = 200;
    struct assay_diag d;
    assay_diag_clear(&d);
    assert_int_equal(assay_workload_save(w, path, &d), ASSAY_OK);
    assay_workload_free(w);
}

/* abort_step aborts a request in whatever phase it is after that many
 * steps (0: still queued); a seed beyond 2^53 is written as text and reads
 * back whole; a seed text that is not a 64-bit integer is refused. */
/* A slow server is not a stuck one. A server's step is a 1 ms poll, so
 * the step bound from the workload's size is a wall time a busy machine
 * can pass: a run past it that still receives events goes on to its end;
 * one that receives nothing for the silence ends as not making progress. */
static void test_slow_is_not_stuck(void **state)
{
    (void)state;
    struct assay_workload *w = small_workload();
    struct assay_adapter a = liar_open(LIE_SLOW);
    struct assay_harness_opts o = {0};
    o.max_steps = 100; /* far fewer than the 41 polls a step takes */
    o.silence_s = 2;
    struct assay_transcript *t = NULL;
    assert_int_equal(assay_harness_run(&a, w, &o, &t), ASSAY_OK);
    print_message("slow: %lld steps, status %s\n", (long long)t->n_steps,
                  assay_status_str(t->status));
    assert_true(t->n_steps > o.max_steps);
    assert_int_equal(t->status, ASSAY_OK);
    for (int32_t i = 0; i < w->n; i++) {
        assert_int_equal(t->reqs[i].n_finish, 1);
    }
    assay_transcript_free(t);
    /* the engine's state must not carry over to the next run */
    while (a.vt->has_work(a.self)) {
        const struct assay_event *ev;
        size_t n;
        g_liar->lie = LIE_NONE;
        assert_int_equal(a.vt->step(a.self, &ev, &n), ASSAY_OK);
    }
    a = liar_open(LIE_SILENT);
    int64_t t0 = assay_now_ns();
    assert_int_equal(assay_harness_run(&a, w, &o, &t), ASSAY_OK);
    double s = (double)(assay_now_ns() - t0) / 1e9;
    print_message("silent: %lld steps, %.1f s: %s\n", (long long)t->n_steps, s, t->error);
    assert_int_equal(t->status, ASSAY_ERR_TIMEOUT);
    assert_non_null(strstr(t->error, "not making progress"));
    assert_true(s >= 2.0);
    assay_transcript_free(t);
    g_liar->lie = LIE_NONE;
    for (uint64_t id = 0; id < 64; id++) {
        (void)a.vt->abort(a.self, id);
    }
    while (a.vt->has_work(a.self)) {
        const struct assay_event *ev;
        size_t n;
        assert_int_equal(a.vt->step(a.self, &ev, &n), ASSAY_OK);
    }
    assay_workload_free(w);
}

static void test_abort_step_and_big_seeds(void **state)
{
    (void)state;
    struct assay_workload *w = parse(
        "{\"format\":\"assay-workload\",\"version\":1,\"requests\":["
        "{\"id\":1,\"prompt\":[5,6,7,8,9,10,11,12,13,14,15,16],\"max_tokens\":8,"
        "\"abort_step\":0},"
        "{\"id\":2,\"prompt\":[5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22],"
        "\"max_tokens\":8,\"abort_step\":1},"
        "{\"id\":3,\"prompt\":[9,8,7],\"max_tokens\":8,\"abort_step\":4},"
        "{\"id\":4,\"prompt\":[9,8,7],\"max_tokens\":6,"
        "\"sampling\":{\"temperature\":0.9,\"seed\":\"18446744073709551615\"}}]}");
    assert_int_equal(w->reqs[0].abort_step, 0);
    assert_int_equal(w->reqs[3].abort_step, -1);
    assert_true(w->reqs[3].sampling.seeded);
    assert_true(w->reqs[3].sampling.seed == UINT64_MAX);
    char dir[1024], path[1100];
    assay_test_scratch("abort-step", dir, sizeof dir);
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/w.json", dir);
    struct assay_diag d;
    assay_diag_clear(&d);
    assert_int_equal(assay_workload_save(w, path, &d), ASSAY_OK);
    struct assay_workload_limits lim = {260, 256, 0};
    struct assay_workload *back = NULL;
    assert_int_equal(assay_workload_load(path, &lim, &back, &d), ASSAY_OK);
    assert_true(back->reqs[3].sampling.seed == UINT64_MAX);
    assert_int_equal(back->reqs[1].abort_step, 1);
    assay_workload_free(back);

    struct assay_adapter a;
    assert_int_equal(assay_adapter_open_spec("bundled:model=mini,kv=paged,block=4,blocks=40,"
                                             "prefix=on,chunk=4,batch=4",
                                             &a, &d),
                     ASSAY_OK);
    struct assay_transcript *t = NULL;
    assert_int_equal(assay_harness_run(&a, w, NULL, &t), ASSAY_OK);
    assert_int_equal(t->status, ASSAY_OK);
    /* queued: no token; mid-prefill (18 tokens in chunks of 4): no token;
     * decoding: some tokens, fewer than asked */
    assert_true(t->reqs[0].aborted && t->reqs[0].n_events == 0 && t->reqs[0].n_finish == 1);
    assert_true(t->reqs[1].aborted && t->reqs[1].n_events == 0 && t->reqs[1].n_finish == 1);
    assert_true(t->reqs[2].aborted && t->reqs[2].n_events > 0 && t->reqs[2].n_events < 8);
    assert_int_equal(t->reqs[3].n_events, 6);
    /* the count at each abort is the count at the end (nothing came after) */
    assert_int_equal(t->reqs[0].n_at_abort, 0);
    assert_int_equal(t->reqs[2].n_at_abort, t->reqs[2].n_events);
    assert_int_equal(t->reqs[3].n_at_abort, -1);
    char msg[512];
    assert_int_equal(assay_check_delivery(w, t, msg, sizeof msg), -1);
    assay_transcript_free(t);
    assay_adapter_close(&a);
    assay_workload_free(w);

    static const char *const bad[] = {"\"-1\"", "\"18446744073709551616\"", "\"12a\"", "\"\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char json[400];
        snprintf(json, sizeof json,
                 "{\"format\":\"assay-workload\",\"version\":1,\"requests\":[{\"id\":1,"
                 "\"prompt\":[1],\"max_tokens\":1,\"sampling\":{\"temperature\":1,"
                 "\"seed\":%s}}]}",
                 bad[i]);
        struct assay_workload *x = NULL;
        assert_int_equal(assay_workload_parse(json, strlen(json), "t", &lim, &x, &d),
                         ASSAY_ERR_PARSE);
        assert_non_null(strstr(d.expected, "decimal integer"));
    }
}

static void test_plan_spec_defaults(void **state)
{
    (void)state;
    char buf[512];
    assay_plan_engine_spec(&k_needle, "bundled", buf, sizeof buf);
    assert_non_null(strstr(buf, "blocks=10"));
    assay_plan_engine_spec(&k_needle, "bundled:blocks=3,block=8", buf, sizeof buf);
    assert_non_null(strstr(buf, "blocks=3"));    /* the base spec's pool wins over a default */
    assert_null(strstr(buf, "blocks=10"));
    assert_non_null(strstr(buf, "block=4"));     /* the check's own options win over the base */
    assert_null(strstr(buf, "block=8"));
    assay_plan_engine_spec(&k_needle_fixed, "bundled:blocks=3", buf, sizeof buf);
    assert_non_null(strstr(buf, "blocks=10"));
}

static void test_shrink_finds_the_smallest_case(void **state)
{
    (void)state;
    char dir[1024];
    assay_test_scratch("shrink", dir, sizeof dir);
    mkdir(dir, 0777);
    write_needle(dir);
    struct assay_verify_ctx *ctx;
    assert_int_equal(assay_verify_ctx_init(&ctx, dir, 1), ASSAY_OK);
    struct assay_shrink_opts o = {dir, "needle-repro", 0, 0};
    struct assay_shrink_result r;
    assert_int_equal(assay_shrink(ctx, &k_needle, "bundled", NULL, &o, &r), ASSAY_OK);
    char sizes[300];
    printf("needle: %s in %d runs; %s\n", assay_shrink_format_sizes(&r, sizes, sizeof sizes),
           (int)r.n_runs, r.command);
    assert_true(r.reproduced && r.shrinkable && r.confirmed && !r.budget_reached);
    assert_int_equal(r.before.n_requests, 30);
    assert_int_equal(r.before.blocks, 10);
    assert_int_equal(r.after.n_requests, 1);
    assert_int_equal(r.after.prompt_tokens, 7); /* up to and with the needle */
    assert_int_equal(r.after.max_tokens, 3);
    assert_int_equal(r.after.blocks, 3);        /* 7 + 3 positions in blocks of 4 */
    assert_non_null(strstr(r.command, "--check unit.needle"));
    assert_non_null(strstr(r.command, "blocks=3"));
    assert_non_null(strstr(r.command, "--seed 1"));
    assert_non_null(strstr(r.command, "needle-repro.json"));
    /* The file reloads to that case, and the check fails on it again. */
    struct assay_check_result res;
    assert_int_equal(assay_run_plan_item(ctx, &k_needle, r.engine, r.workload, &res), ASSAY_OK);
    assert_int_equal(res.verdict, ASSAY_VERDICT_FAIL);
    assert_string_equal(res.repro, r.command);

    /* A budget stops it early, and what it has is still a failing case. */
    struct assay_shrink_opts tight = {dir, "needle-tight", 4, 0};
    assert_int_equal(assay_shrink(ctx, &k_needle, "bundled", NULL, &tight, &r), ASSAY_OK);
    assert_true(r.budget_reached && r.confirmed);
    assert_true(r.n_runs <= 5);
    assert_true(r.after.n_requests <= 30);

    /* A pool the check fixes stays. */
    assert_int_equal(assay_shrink(ctx, &k_needle_fixed, "bundled", NULL, &o, &r), ASSAY_OK);
    assert_true(r.confirmed && r.pool_fixed);
    assert_int_equal(r.after.blocks, 10);
    assert_int_equal(r.after.n_requests, 1);

    /* A case that passes is reported as not reproduced. */
    assert_int_equal(assay_shrink(ctx, &k_needle, "bundled:blocks=11", NULL, &o, &r), ASSAY_OK);
    assert_false(r.reproduced);
    assay_verify_ctx_free(ctx);
}

static int teardown(void **state)
{
    (void)state;
    if (g_liar != NULL) {
        assay_adapter_close(&g_liar->inner);
        free(g_liar);
        g_liar = NULL;
    }
    return 0;
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_consistent_snapshot),
        cmocka_unit_test(test_model_each_rule),
        cmocka_unit_test(test_model_agrees_with_engine),
        cmocka_unit_test(test_trace_in),
        cmocka_unit_test(test_trace_out),
        cmocka_unit_test(test_generate_abort_step),
        cmocka_unit_test(test_checks_pass_on_the_engine),
        cmocka_unit_test(test_checks_fail_on_lies),
        cmocka_unit_test(test_missing_capabilities_skip),
        cmocka_unit_test(test_slow_is_not_stuck),
        cmocka_unit_test(test_abort_step_and_big_seeds),
        cmocka_unit_test(test_plan_spec_defaults),
        cmocka_unit_test(test_shrink_finds_the_smallest_case),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
