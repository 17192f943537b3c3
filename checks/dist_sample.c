/*
 * dist_sample.c - the distributional family's parameters, its prompts and
 * the drawing of samples from an engine through any adapter (only
 * add_request, has_work and step), shared by every check of the family
 * (distributional_internal.h). A check draws once: n requests, at most `window` in
 * flight, each token recorded at its request and position, and under MPI
 * each rank draws its share and the records are brought together.
 */
#include "distributional.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/rng.h"
#include "../oracles/oracle.h"
#include "distributional_internal.h"
#include "evidence.h"
#include "shard.h"
#include "stats.h"

/* Steps without a single event before a run is declared stuck. */
#define MAX_IDLE_STEPS 100000

struct assay_dist_params assay_dist_default_params(void)
{
    struct assay_dist_params p;
    memset(&p, 0, sizeof p);
    p.n = 70000;
    p.positions = 1;
    p.out_len = 1;
    p.prompt_len = 6;
    p.n_prompts = 16;
    p.sampling.temperature = 0.7f;
    p.sampling.top_k = 40;
    p.sampling.top_p = 0.9f;
    p.sampling.seeded = true;
    p.order = ASSAY_SAMPLING_JOINT;
    p.alpha = ASSAY_DIST_ALPHA;
    p.power = ASSAY_DIST_POWER;
    p.pit_bins = 20;
    p.window = 512;
    p.tol_top_p = ASSAY_DIST_TOL_TOP_P;
    p.tol_logit = ASSAY_DIST_TOL_LOGIT;
    p.prompt_tries = 64;
    p.seed = 1;
    return p;
}

/* ---- parameters ---------------------------------------------------------- */

static bool parse_double(const char *v, double lo, double hi, bool open_lo, double *out)
{
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || *end != '\0' || !isfinite(x) || x > hi || x < lo || (open_lo && x == lo)) {
        return false;
    }
    *out = x;
    return true;
}

static bool parse_long(const char *v, long long lo, long long hi, long long *out)
{
    char *end = NULL;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end != '\0' || x < lo || x > hi) {
        return false;
    }
    *out = x;
    return true;
}

enum assay_status assay_dist_parse_params(const char *s, struct assay_dist_params *p, char *why,
                                          size_t size)
{
    if (s == NULL || s[0] == '\0') {
        return ASSAY_OK;
    }
    char buf[512];
    if (strlen(s) >= sizeof buf) {
        snprintf(why, size, "check parameters longer than %zu characters", sizeof buf - 1);
        return ASSAY_ERR_INVALID;
    }
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
        char *v = strchr(kv, '=');
        if (v == NULL) {
            snprintf(why, size, "check parameter '%s': expected key=value", kv);
            return ASSAY_ERR_INVALID;
        }
        *v++ = '\0';
        long long i = 0;
        double d = 0;
        bool ok = true;
        if (strcmp(kv, "n") == 0) {
            ok = parse_long(v, 1, 100000000LL, &i);
            p->n = i;
        } else if (strcmp(kv, "pos") == 0) {
            ok = parse_long(v, 1, 2, &i);
            p->positions = (int32_t)i;
        } else if (strcmp(kv, "len") == 0) {
            ok = parse_long(v, 1, 4096, &i);
            p->out_len = (int32_t)i;
        } else if (strcmp(kv, "prompt") == 0) {
            ok = parse_long(v, 1, 4096, &i);
            p->prompt_len = (int32_t)i;
        } else if (strcmp(kv, "prompts") == 0) {
            ok = parse_long(v, 1, 1000000, &i);
            p->n_prompts = (int32_t)i;
        } else if (strcmp(kv, "t") == 0) {
            ok = parse_double(v, 0.0, 100.0, true, &d);
            p->sampling.temperature = (float)d;
        } else if (strcmp(kv, "top_k") == 0) {
            ok = parse_long(v, 0, 1000000, &i);
            p->sampling.top_k = (int32_t)i;
        } else if (strcmp(kv, "top_p") == 0) {
            ok = parse_double(v, 0.0, 1.0, true, &d);
            p->sampling.top_p = (float)d;
        } else if (strcmp(kv, "order") == 0) {
            ok = strcmp(v, "joint") == 0 || strcmp(v, "sequential") == 0;
            p->order = strcmp(v, "sequential") == 0 ? ASSAY_SAMPLING_SEQUENTIAL
                                                    : ASSAY_SAMPLING_JOINT;
        } else if (strcmp(kv, "alpha") == 0) {
            ok = parse_double(v, 0.0, 0.5, true, &d);
            p->alpha = d;
        } else if (strcmp(kv, "power") == 0) {
            ok = parse_double(v, 0.0, 0.999999, true, &d);
            p->power = d;
        } else if (strcmp(kv, "bins") == 0) {
            ok = parse_long(v, 2, 1000, &i);
            p->pit_bins = (int32_t)i;
        } else if (strcmp(kv, "window") == 0) {
            ok = parse_long(v, 1, 1000000, &i);
            p->window = (int32_t)i;
        } else if (strcmp(kv, "tries") == 0) {
            ok = parse_long(v, 1, 10000, &i);
            p->prompt_tries = (int32_t)i;
        } else if (strcmp(kv, "only") == 0) {
            ok = strcmp(v, "bonus") == 0;
            p->bonus_only = ok;
        } else if (strcmp(kv, "tie") == 0) {
            ok = strcmp(v, "k") == 0 || strcmp(v, "p") == 0 || strcmp(v, "any") == 0 ||
                 strcmp(v, "none") == 0;
            p->tie = strcmp(v, "k") == 0     ? ASSAY_DIST_TIE_TOP_K
                     : strcmp(v, "p") == 0   ? ASSAY_DIST_TIE_TOP_P
                     : strcmp(v, "any") == 0 ? ASSAY_DIST_TIE_ANY
                                             : ASSAY_DIST_TIE_NONE;
        } else if (strcmp(kv, "vs") != 0) {
            snprintf(why, size,
                     "unknown check parameter '%s' (expected n, pos, len, prompt, prompts, t, "
                     "top_k, top_p, order, alpha, power, bins, window, tries, only, tie, vs)",
                     kv);
            return ASSAY_ERR_INVALID;
        }
        if (!ok) {
            snprintf(why, size, "check parameter %s=%s is out of range", kv, v);
            return ASSAY_ERR_INVALID;
        }
    }
    return ASSAY_OK;
}

enum assay_status assay_dist_spec_tally(const struct sample_set *ss, int64_t n, int32_t len,
                                        bool want_bonus, struct assay_spec_tally *t)
{
    memset(t, 0, sizeof *t);
    if (want_bonus) {
        t->bonus = assay_calloc((size_t)(n * len), 1);
        if (t->bonus == NULL) {
            return ASSAY_ERR_NOMEM;
        }
    }
    for (int64_t r = 0; r < ss->n_rounds; r++) {
        const struct round_rec *rr = &ss->rounds[r];
        if (rr->req < 0 || rr->req >= n || rr->drafted < 1 || rr->accepted < 0 ||
            rr->accepted > rr->drafted) {
            continue; /* dist.spec.acceptance judges inconsistent rounds */
        }
        t->drafted += rr->drafted;
        t->accepted += rr->accepted;
        int32_t j = rr->index + rr->drafted;
        if (t->bonus != NULL && rr->accepted == rr->drafted && rr->index >= 0 && j < len &&
            !t->bonus[rr->req * len + j]) {
            t->bonus[rr->req * len + j] = 1;
            t->n_bonus++;
        }
    }
    return ASSAY_OK;
}

void assay_dist_append(char *buf, size_t size, const char *more)
{
    size_t used = strnlen(buf, size);
    if (used + 1 < size) {
        snprintf(buf + used, size - used, "%s", more);
    }
}

void assay_dist_spec_rate(const struct assay_spec_tally *t, char *buf, size_t size)
{
    buf[0] = '\0';
    if (t->drafted > 0) {
        snprintf(buf, size, "; proposals accepted %lld of %lld (%.1f%%)", (long long)t->accepted,
                 (long long)t->drafted, 100.0 * (double)t->accepted / (double)t->drafted);
    }
}

enum assay_status assay_dist_check_params(const struct assay_dist_params *p, char *why, size_t size)
{
    if (p->n < 1 || p->positions < 1 || p->positions > 2 || p->out_len < p->positions ||
        p->prompt_len < 1 || p->n_prompts < 1 || p->window < 1 || p->pit_bins < 2 ||
        !(p->alpha > 0.0 && p->alpha < p->power && p->power < 1.0) ||
        !(p->sampling.temperature > 0.0f) || !(p->tol_top_p >= 0.0) || !(p->tol_logit >= 0.0)) {
        snprintf(why, size,
                 "bad parameters: need n >= 1, pos 1 or 2, len >= pos, temperature > 0, "
                 "0 < alpha < power < 1");
        return ASSAY_ERR_INVALID;
    }
    if (p->tie != ASSAY_DIST_TIE_NONE && (p->budget.on || p->positions != 1)) {
        snprintf(why, size,
                 "bad parameters: tie= is for exact arithmetic (no numerics budget) and single "
                 "tokens (pos 1)");
        return ASSAY_ERR_INVALID;
    }
    return ASSAY_OK;
}

void assay_dist_set_error(struct assay_check_result *res, enum assay_status st, const char *why)
{
    assay_check_error(res, "%s (%s)", why, assay_status_str(st));
}

uint64_t assay_dist_prompt_seed_of(const struct assay_dist_params *p)
{
    return p->prompt_seed != 0 ? p->prompt_seed : assay_seed_derive(p->seed, "prompt");
}

void assay_dist_make_prompt(uint64_t seed, int32_t candidate, int32_t len, int32_t *out)
{
    for (int32_t i = 0; i < len; i++) {
        double u = assay_rng_u01(seed, (uint64_t)candidate * 65536u + (uint64_t)i, PROMPT_PURPOSE);
        out[i] = (int32_t)(u * 256.0);
    }
}
/* ---- drawing samples from an adapter ---------------------------------- */



void assay_dist_sample_set_free(struct sample_set *s)
{
    assay_free(s->tokens);
    assay_free(s->rounds);
    memset(s, 0, sizeof *s);
}

/* Counts a wrong delivery; the text kept is that of the lowest request id
 * (not the first in time), so that it is the same however the requests
 * were shared among ranks and batched. */
static void mark_bad(struct sample_set *s, const char *fmt, long long id, long long x)
{
    s->n_bad++;
    if (id < s->bad_key) {
        s->bad_key = id;
        snprintf(s->bad, sizeof s->bad, fmt, id, x);
    }
}

/* The same with the text made by the caller. */
static void mark_bad_text(struct sample_set *s, long long id, const char *text)
{
    s->n_bad++;
    if (id < s->bad_key) {
        s->bad_key = id;
        snprintf(s->bad, sizeof s->bad, "%s", text);
    }
}

/*
 * The ranks' samples brought together (checks/shard.h): every rank's rows
 * at their request ids, the wrong deliveries counted and the lowest one's
 * text, the rounds concatenated (the caller orders them).
 */
static enum assay_status merge_samples(struct sample_set *s)
{
    if (assay_shard_size() == 1) {
        return ASSAY_OK;
    }
    int64_t cells = s->n * s->out_len;
    int64_t *sum = assay_malloc(sizeof(int64_t) * (size_t)(cells > 0 ? cells : 1));
    int64_t nb = s->n_bad;
    enum assay_status st = sum == NULL ? ASSAY_ERR_NOMEM : ASSAY_OK;
    if (st == ASSAY_OK) {
        for (int64_t c = 0; c < cells; c++) {
            /* A token t of this rank's request as t + 1, 0 elsewhere: the
             * sum is exact and a missing token (-1) stays missing. */
            sum[c] = assay_shard_mine(c / s->out_len) ? (int64_t)s->tokens[c] + 1 : 0;
        }
        st = assay_shard_allreduce(sum, cells, ASSAY_SHARD_I64, ASSAY_SHARD_SUM);
    }
    if (st == ASSAY_OK) {
        for (int64_t c = 0; c < cells; c++) {
            s->tokens[c] = (int32_t)(sum[c] - 1);
        }
        st = assay_shard_allreduce(&nb, 1, ASSAY_SHARD_I64, ASSAY_SHARD_SUM);
    }
    if (st == ASSAY_OK) {
        s->n_bad = nb;
        st = assay_shard_first_text(s->bad_key, s->bad, sizeof s->bad);
    }
    void *all = NULL;
    int64_t total = 0;
    if (st == ASSAY_OK) {
        st = assay_shard_allgatherv(s->rounds, (int64_t)sizeof *s->rounds * s->n_rounds, &all,
                                    &total);
    }
    if (st == ASSAY_OK) {
        assay_free(s->rounds);
        s->rounds = all;
        s->n_rounds = s->cap_rounds = total / (int64_t)sizeof *s->rounds;
    }
    assay_free(sum);
    return st;
}

/* What assay_dist_draw_samples carries from one phase to the next: the
 * adapter and the requests, the samples, what each request delivered, and
 * this rank's share of the requests (ids r0, r0 + stride, ...; next and
 * done count those sent and finished). */
struct draw {
    const struct assay_adapter *a;
    const struct request_source *src;
    int64_t n;
    int32_t out_len;
    bool keep_rounds;
    struct sample_set *out;
    uint8_t *finished; /* (n) the request has finished */
    int32_t *got;      /* (n) the tokens it delivered */
    int64_t r0, stride, n_mine;
    int64_t next, done;
    char *why;
    size_t size;
};

/* Send this rank's next requests until `window` are in flight or the
 * adapter is full. ASSAY_OK, or the adapter's refusal with why set. */
static enum assay_status send_requests(struct draw *d, int32_t window)
{
    while (d->next < d->n_mine && d->next - d->done < window) {
        const int64_t id = d->r0 + d->next * d->stride;
        struct assay_request r;
        memset(&r, 0, sizeof r);
        r.id = (uint64_t)id;
        r.prompt = d->src->prompts + (int64_t)(id % d->src->n_prompts) * d->src->prompt_len;
        r.prompt_len = d->src->prompt_len;
        r.max_tokens = d->out_len;
        r.stop_token = -1;
        r.sampling = d->src->sampling;
        r.sampling.seeded = true;
        r.sampling.seed = d->src->seed0 + (uint64_t)id;
        enum assay_status ast = d->a->vt->add_request(d->a->self, &r);
        if (ast == ASSAY_ERR_FULL) {
            break;
        }
        if (ast != ASSAY_OK) {
            const char *le =
                d->a->vt->last_error != NULL ? d->a->vt->last_error(d->a->self) : "";
            snprintf(d->why, d->size, "request %lld was refused: %s%s%s", (long long)id,
                     assay_status_str(ast), le[0] != '\0' ? ": " : "", le);
            return ast;
        }
        d->next++;
    }
    return ASSAY_OK;
}

/* A speculative round of request i kept in d->out->rounds. ASSAY_OK, or
 * ASSAY_ERR_NOMEM with why set. */
static enum assay_status keep_round(struct draw *d, int64_t i, const struct assay_event *x)
{
    struct sample_set *out = d->out;
    if (out->n_rounds == out->cap_rounds) {
        int64_t cap = out->cap_rounds > 0 ? 2 * out->cap_rounds : 4096;
        struct round_rec *r = assay_realloc(out->rounds, sizeof *r * (size_t)cap);
        if (r == NULL) {
            snprintf(d->why, d->size, "out of memory for speculative rounds");
            return ASSAY_ERR_NOMEM;
        }
        out->rounds = r;
        out->cap_rounds = cap;
    }
    struct round_rec *r = &out->rounds[out->n_rounds++];
    r->req = i;
    r->index = x->index;
    r->drafted = x->n_drafted;
    r->accepted = x->n_accepted;
    return ASSAY_OK;
}

/* One event of a step recorded: a token at its request and position, a
 * finish, or (with keep_rounds) a speculative round; a wrong delivery is
 * counted (mark_bad). ASSAY_OK, or ASSAY_ERR_NOMEM with why set where a
 * round could not be kept. */
static enum assay_status take_event(struct draw *d, const struct assay_event *x)
{
    struct sample_set *out = d->out;
    const int32_t out_len = d->out_len;
    if (x->request_id >= (uint64_t)d->n || !assay_shard_mine((int64_t)x->request_id) ||
        ((int64_t)x->request_id - d->r0) / d->stride >= d->next) {
        mark_bad(out, "an event for request %lld, which was never sent (kind %lld)",
                 (long long)x->request_id, (long long)x->kind);
        return ASSAY_OK;
    }
    int64_t i = (int64_t)x->request_id;
    if (x->kind == ASSAY_EVENT_TOKEN) {
        if (x->index < 0 || x->index >= out_len || d->finished[i] ||
            out->tokens[i * out_len + x->index] >= 0) {
            mark_bad(out, "request %lld: a token at output position %lld delivered twice, "
                          "after its end or out of range",
                     (long long)i, (long long)x->index);
            return ASSAY_OK;
        }
        out->tokens[i * out_len + x->index] = x->token;
        d->got[i]++;
    } else if (x->kind == ASSAY_EVENT_FINISH) {
        if (d->finished[i]) {
            mark_bad(out, "request %lld finished twice (reason %lld)", (long long)i,
                     (long long)x->reason);
            return ASSAY_OK;
        }
        d->finished[i] = 1;
        d->done++;
        if (x->reason != ASSAY_FINISH_LENGTH || d->got[i] != out_len) {
            /* the reason in words and, for an error, what the
             * engine or server said */
            char text[sizeof out->bad];
            snprintf(text, sizeof text,
                     "request %lld finished (%s) after %d of %d tokens%s%.180s", (long long)i,
                     assay_finish_reason_str(x->reason), (int)d->got[i], (int)out_len,
                     x->reason == ASSAY_FINISH_ERROR && x->message != NULL ? ": " : "",
                     x->reason == ASSAY_FINISH_ERROR && x->message != NULL ? x->message : "");
            mark_bad_text(out, (long long)i, text);
        }
    } else if (x->kind == ASSAY_EVENT_SPEC_ROUND && d->keep_rounds) {
        return keep_round(d, i, x);
    }
    return ASSAY_OK;
}

/* After a failed draw, leave the adapter clean for whoever uses it next:
 * this rank's unfinished requests aborted, and steps until no work is
 * left. */
static void abandon_requests(const struct draw *d)
{
    const struct assay_adapter *a = d->a;
    for (int64_t k = 0; k < d->next; k++) {
        if (!d->finished[d->r0 + k * d->stride]) {
            a->vt->abort(a->self, (uint64_t)(d->r0 + k * d->stride));
        }
    }
    for (int32_t k = 0; k < 1000000 && a->vt->has_work(a->self); k++) {
        const struct assay_event *ev = NULL;
        size_t n_ev = 0;
        if (a->vt->step(a->self, &ev, &n_ev) != ASSAY_OK) {
            break;
        }
    }
}

/* Send n requests (at most `window` in flight) and record every token (and,
 * with keep_rounds, every SPEC_ROUND). Returns ASSAY_OK with *out filled, or
 * the adapter's failure with why set (out is then freed). */
enum assay_status assay_dist_draw_samples(const struct assay_adapter *a,
                                      const struct request_source *src, int64_t n,
                                      int32_t out_len, int32_t window, bool keep_rounds,
                                      struct sample_set *out, char *why, size_t size)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    out->out_len = out_len;
    out->bad_key = INT64_MAX;
    out->tokens = assay_malloc(sizeof(int32_t) * (size_t)n * (size_t)out_len);
    uint8_t *finished = assay_calloc((size_t)n, 1);
    int32_t *got = assay_calloc((size_t)n, sizeof(int32_t));
    if (out->tokens == NULL || finished == NULL || got == NULL) {
        assay_free(finished);
        assay_free(got);
        assay_dist_sample_set_free(out);
        snprintf(why, size, "out of memory for %lld samples", (long long)n);
        return ASSAY_ERR_NOMEM;
    }
    for (int64_t i = 0; i < n * out_len; i++) {
        out->tokens[i] = -1;
    }
    /* This rank's requests (all of them in one process): ids rank,
     * rank + ranks, ...; next and done count them. */
    const int64_t r0 = assay_shard_rank(), stride = assay_shard_size();
    const int64_t n_mine = n > r0 ? (n - r0 + stride - 1) / stride : 0;
    struct draw d = {.a = a, .src = src, .n = n, .out_len = out_len, .keep_rounds = keep_rounds,
                     .out = out, .finished = finished, .got = got, .r0 = r0, .stride = stride,
                     .n_mine = n_mine, .why = why, .size = size};
    enum assay_status st = ASSAY_OK;
    bool fault = false;
    int64_t idle = 0;
    while (d.done < n_mine && st == ASSAY_OK) {
        st = send_requests(&d, window);
        if (st != ASSAY_OK) {
            break;
        }
        const struct assay_event *ev = NULL;
        size_t n_ev = 0;
        enum assay_status sst = a->vt->step(a->self, &ev, &n_ev);
        if (sst != ASSAY_OK) {
            const char *le = a->vt->last_error != NULL ? a->vt->last_error(a->self) : "";
            snprintf(why, size, "a step failed: %s%s%s", assay_status_str(sst),
                     le[0] != '\0' ? ": " : "", le);
            st = sst;
            fault = sst != ASSAY_ERR_NOMEM;
            break;
        }
        idle = n_ev == 0 ? idle + 1 : 0;
        if (idle > MAX_IDLE_STEPS) {
            snprintf(why, size, "%lld steps without an event with %lld requests unfinished",
                     (long long)idle, (long long)(d.next - d.done));
            st = ASSAY_ERR_TIMEOUT;
            fault = true;
            break;
        }
        for (size_t e = 0; e < n_ev && st == ASSAY_OK; e++) {
            st = take_event(&d, &ev[e]);
        }
        if (st == ASSAY_OK && n_ev == 0 && d.next >= n_mine && d.done < n_mine &&
            !a->vt->has_work(a->self)) {
            snprintf(why, size, "the engine has no work left but %lld requests never finished",
                     (long long)(n_mine - d.done));
            st = ASSAY_ERR_INTERNAL;
            fault = true;
        }
    }
    if (st != ASSAY_OK) {
        abandon_requests(&d);
        assay_dist_sample_set_free(out);
        out->engine_fault = fault;
    } else {
        st = merge_samples(out);
        if (st != ASSAY_OK) {
            snprintf(why, size, "%s",
                     st == ASSAY_ERR_IO ? "another rank's share of the check ended before the "
                                          "samples could be brought together"
                                        : "the ranks could not bring their samples together");
            assay_dist_sample_set_free(out);
        }
    }
    assay_free(finished);
    assay_free(got);
    return st;
}

/*
 * A failed draw's verdict: FAIL when the engine under test failed (a step
 * returned an error, e.g. on NaN or infinite logits; it stopped making
 * progress), ERROR when the suite could not run (out of memory, a refused
 * request the engine may legitimately not serve).
 */
void assay_dist_draw_failed(struct assay_check_result *res, const struct sample_set *ss,
                        enum assay_status st, const char *why)
{
    if (ss->engine_fault) {
        assay_check_fail(res, "the engine failed while sampling: %s", why);
    } else {
        assay_dist_set_error(res, st, why);
    }
}

/* Requests delivered wrongly are the engine's fault whatever the statistic
 * can still say: the FAIL is stated before any later ERROR (too few
 * samples left to test) could be. */
void assay_dist_judge_delivery(struct assay_check_result *res, const struct sample_set *ss,
                           const char *what)
{
    if (ss->n_bad > 0) {
        assay_check_fail(res, "%lld %s delivered wrongly; first: %s", (long long)ss->n_bad, what,
                         ss->bad);
    }
}

void assay_dist_fill_tolerance(struct assay_check_result *res,
                               const struct assay_tolerance_result *tr,
                               const struct assay_dist_budget *b, const char *distance)
{
    res->alpha = tr->alpha;
    res->n = tr->n;
    res->statistic = tr->distance;
    res->df = tr->n_bins - 1;
    res->p_value = tr->p_value;
    res->power = tr->power;
    res->min_tv = tr->budget + tr->min_excess;
    res->tol.tested = true;
    snprintf(res->tol.distance, sizeof res->tol.distance, "%s", distance);
    res->tol.budget = tr->budget;
    res->tol.reference = b->reference;
    res->tol.boundary = b->boundary;
    res->tol.estimate = tr->distance;
    res->tol.ci_lo = tr->ci_lo;
    res->tol.ci_hi = tr->ci_hi;
    res->tol.min_excess = tr->min_excess;
}

void assay_dist_candidate_prompt(const struct assay_dist_params *p, int32_t candidate,
                                 int32_t *out)
{
    assay_dist_make_prompt(assay_dist_prompt_seed_of(p), candidate, p->prompt_len, out);
}

enum assay_status assay_dist_make_prompts(const struct assay_dist_params *p, int32_t **out)
{
    *out = assay_malloc(sizeof(int32_t) * (size_t)p->n_prompts * (size_t)p->prompt_len);
    if (*out == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    uint64_t seed = assay_dist_prompt_seed_of(p);
    for (int32_t c = 0; c < p->n_prompts; c++) {
        assay_dist_make_prompt(seed, c, p->prompt_len, *out + (int64_t)c * p->prompt_len);
    }
    return ASSAY_OK;
}

gsl_rng *assay_dist_make_rng(uint64_t seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (r != NULL) {
        unsigned long s = (unsigned long)(seed & 0xffffffffu);
        gsl_rng_set(r, s == 0 ? 1 : s); /* seed 0 is mt19937's default 4357 */
    }
    return r;
}
