#include "distributional.h"

#include <gsl/gsl_cdf.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../adapters/spec.h"
#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/rng.h"
#include "../oracles/oracle.h"
#include "evidence.h"
#include "shard.h"
#include "stats.h"

/* The purpose of the draws that make prompt tokens (assay_rng_u01). */
#define PROMPT_PURPOSE 0x70726f6du
/* The purposes of the PIT's and the acceptance test's V ~ U(0, 1). */
#define PIT_V_PURPOSE 0x7069742du
#define ACCEPT_V_PURPOSE 0x61636376u
/* A PIT record: a boundary decision, a token of oracle probability 0. */
#define REC_BOUNDARY 10
#define REC_IMPOSSIBLE 11
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
        } else if (strcmp(kv, "vs") != 0) {
            snprintf(why, size,
                     "unknown check parameter '%s' (expected n, pos, len, prompt, prompts, t, "
                     "top_k, top_p, order, alpha, power, bins, window, tries, vs)",
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

static enum assay_status check_params(const struct assay_dist_params *p, char *why, size_t size)
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
    return ASSAY_OK;
}

static void set_error(struct assay_check_result *res, enum assay_status st, const char *why)
{
    assay_check_error(res, "%s (%s)", why, assay_status_str(st));
}

static uint64_t prompt_seed_of(const struct assay_dist_params *p)
{
    return p->prompt_seed != 0 ? p->prompt_seed : assay_seed_derive(p->seed, "prompt");
}

static void make_prompt(uint64_t seed, int32_t candidate, int32_t len, int32_t *out)
{
    for (int32_t i = 0; i < len; i++) {
        double u = assay_rng_u01(seed, (uint64_t)candidate * 65536u + (uint64_t)i, PROMPT_PURPOSE);
        out[i] = (int32_t)(u * 256.0);
    }
}

/* ---- drawing samples from an adapter ---------------------------------- */

struct round_rec {
    int64_t req;
    int32_t index;    /* output position of the first drafted token */
    int32_t drafted;
    int32_t accepted;
};

struct sample_set {
    int64_t n;
    int32_t out_len;
    int32_t *tokens;  /* (n, out_len); -1 where nothing came */
    struct round_rec *rounds;
    int64_t n_rounds, cap_rounds;
    int64_t n_bad;    /* requests delivered other than exactly out_len tokens once */
    char bad[300];    /* the one of the lowest request id */
    int64_t bad_key;  /* that id (INT64_MAX: none) */
    bool engine_fault; /* after a failed draw: the engine under test failed (a step, its
                        * progress), not the suite */
};

struct request_source {
    const int32_t *prompts; /* (n_prompts, prompt_len) */
    int32_t n_prompts;
    int32_t prompt_len;
    struct assay_sampling sampling;
    uint64_t seed0;         /* request i gets seed seed0 + i */
};

static void sample_set_free(struct sample_set *s)
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

/* Send n requests (at most `window` in flight) and record every token (and,
 * with keep_rounds, every SPEC_ROUND). Returns ASSAY_OK with *out filled, or
 * the adapter's failure with why set (out is then freed). */
static enum assay_status draw_samples(const struct assay_adapter *a,
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
        sample_set_free(out);
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
    enum assay_status st = ASSAY_OK;
    bool fault = false;
    int64_t next = 0, done = 0, idle = 0;
    while (done < n_mine && st == ASSAY_OK) {
        while (next < n_mine && next - done < window) {
            const int64_t id = r0 + next * stride;
            struct assay_request r;
            memset(&r, 0, sizeof r);
            r.id = (uint64_t)id;
            r.prompt = src->prompts + (int64_t)(id % src->n_prompts) * src->prompt_len;
            r.prompt_len = src->prompt_len;
            r.max_tokens = out_len;
            r.stop_token = -1;
            r.sampling = src->sampling;
            r.sampling.seeded = true;
            r.sampling.seed = src->seed0 + (uint64_t)id;
            enum assay_status ast = a->vt->add_request(a->self, &r);
            if (ast == ASSAY_ERR_FULL) {
                break;
            }
            if (ast != ASSAY_OK) {
                const char *le = a->vt->last_error != NULL ? a->vt->last_error(a->self) : "";
                snprintf(why, size, "request %lld was refused: %s%s%s", (long long)id,
                         assay_status_str(ast), le[0] != '\0' ? ": " : "", le);
                st = ast;
                break;
            }
            next++;
        }
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
                     (long long)idle, (long long)(next - done));
            st = ASSAY_ERR_TIMEOUT;
            fault = true;
            break;
        }
        for (size_t e = 0; e < n_ev; e++) {
            const struct assay_event *x = &ev[e];
            if (x->request_id >= (uint64_t)n || !assay_shard_mine((int64_t)x->request_id) ||
                ((int64_t)x->request_id - r0) / stride >= next) {
                mark_bad(out, "an event for request %lld, which was never sent (kind %lld)",
                         (long long)x->request_id, (long long)x->kind);
                continue;
            }
            int64_t i = (int64_t)x->request_id;
            if (x->kind == ASSAY_EVENT_TOKEN) {
                if (x->index < 0 || x->index >= out_len || finished[i] ||
                    out->tokens[i * out_len + x->index] >= 0) {
                    mark_bad(out, "request %lld: a token at output position %lld delivered twice, "
                                  "after its end or out of range",
                             (long long)i, (long long)x->index);
                    continue;
                }
                out->tokens[i * out_len + x->index] = x->token;
                got[i]++;
            } else if (x->kind == ASSAY_EVENT_FINISH) {
                if (finished[i]) {
                    mark_bad(out, "request %lld finished twice (reason %lld)", (long long)i,
                             (long long)x->reason);
                    continue;
                }
                finished[i] = 1;
                done++;
                if (x->reason != ASSAY_FINISH_LENGTH || got[i] != out_len) {
                    mark_bad(out, "request %lld finished with reason %lld", (long long)i,
                             (long long)x->reason);
                    if (out->n_bad == 1) {
                        size_t l = strlen(out->bad);
                        snprintf(out->bad + l, sizeof out->bad - l, " after %d of %d tokens",
                                 (int)got[i], (int)out_len);
                    }
                }
            } else if (x->kind == ASSAY_EVENT_SPEC_ROUND && keep_rounds) {
                if (out->n_rounds == out->cap_rounds) {
                    int64_t cap = out->cap_rounds > 0 ? 2 * out->cap_rounds : 4096;
                    struct round_rec *r =
                        assay_realloc(out->rounds, sizeof *r * (size_t)cap);
                    if (r == NULL) {
                        snprintf(why, size, "out of memory for speculative rounds");
                        st = ASSAY_ERR_NOMEM;
                        break;
                    }
                    out->rounds = r;
                    out->cap_rounds = cap;
                }
                struct round_rec *r = &out->rounds[out->n_rounds++];
                r->req = i;
                r->index = x->index;
                r->drafted = x->n_drafted;
                r->accepted = x->n_accepted;
            }
        }
        if (st == ASSAY_OK && n_ev == 0 && next >= n_mine && done < n_mine &&
            !a->vt->has_work(a->self)) {
            snprintf(why, size, "the engine has no work left but %lld requests never finished",
                     (long long)(n_mine - done));
            st = ASSAY_ERR_INTERNAL;
            fault = true;
        }
    }
    if (st != ASSAY_OK) {
        /* Leave the adapter clean for whoever uses it next. */
        for (int64_t k = 0; k < next; k++) {
            if (!finished[r0 + k * stride]) {
                a->vt->abort(a->self, (uint64_t)(r0 + k * stride));
            }
        }
        for (int32_t k = 0; k < 1000000 && a->vt->has_work(a->self); k++) {
            const struct assay_event *ev = NULL;
            size_t n_ev = 0;
            if (a->vt->step(a->self, &ev, &n_ev) != ASSAY_OK) {
                break;
            }
        }
        sample_set_free(out);
        out->engine_fault = fault;
    } else {
        st = merge_samples(out);
        if (st != ASSAY_OK) {
            snprintf(why, size, "%s",
                     st == ASSAY_ERR_IO ? "another rank's share of the check ended before the "
                                          "samples could be brought together"
                                        : "the ranks could not bring their samples together");
            sample_set_free(out);
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
static void draw_failed(struct assay_check_result *res, const struct sample_set *ss,
                        enum assay_status st, const char *why)
{
    if (ss->engine_fault) {
        assay_check_fail(res, "the engine failed while sampling: %s", why);
    } else {
        set_error(res, st, why);
    }
}

/* Requests delivered wrongly are the engine's fault whatever the statistic
 * can still say: the FAIL is stated before any later ERROR (too few
 * samples left to test) could be. */
static void judge_delivery(struct assay_check_result *res, const struct sample_set *ss,
                           const char *what)
{
    if (ss->n_bad > 0) {
        assay_check_fail(res, "%lld %s delivered wrongly; first: %s", (long long)ss->n_bad, what,
                         ss->bad);
    }
}

/* ---- exact distributions from the oracle -------------------------------- */

/*
 * Whether the kept set of the distribution of `row` (whose info is inf) is
 * safe from fp32 rounding: a binding top-k cut (n_kept == top_k) needs a
 * logit gap of at least tol_logit; a top-p cut must keep the same number of
 * tokens when top_p moves by tol_top_p either way (a logit error shifts the
 * cumulative masses by about as much). A cut that does not bind is safe.
 */
static enum assay_status boundary_safe(const double *row, int32_t v,
                                       const struct assay_dist_params *p,
                                       const struct assay_oracle_dist_info *inf, double *scratch,
                                       bool *safe)
{
    *safe = true;
    const struct assay_sampling *s = &p->sampling;
    if (s->top_k > 0 && s->top_k < v && inf->n_kept == s->top_k &&
        !(inf->top_k_gap >= p->tol_logit)) {
        *safe = false;
        return ASSAY_OK;
    }
    if (s->top_p < 1.0f) {
        for (int side = -1; side <= 1; side += 2) {
            struct assay_sampling moved = *s;
            double tp = (double)s->top_p + side * p->tol_top_p;
            moved.top_p = (float)(tp > 1.0 ? 1.0 : tp < 1e-6 ? 1e-6 : tp);
            struct assay_oracle_dist_info mi;
            enum assay_status st = assay_oracle_distribution(row, v, &moved, p->order, scratch, &mi);
            if (st != ASSAY_OK) {
                return st;
            }
            if (mi.n_kept != inf->n_kept) {
                *safe = false;
            }
        }
    }
    return ASSAY_OK;
}

struct margins {
    double top_p;  /* smallest margin of a binding top-p cut (mass); inf: none */
    double top_k;  /* smallest logit gap of a binding top-k cut; inf: none */
};

/* Keep the smallest margin of the cuts that bind (for the report): top-k
 * when it keeps exactly top_k tokens, top-p when it keeps fewer. */
static void margins_add(struct margins *m, const struct assay_dist_params *p, int32_t v,
                        const struct assay_oracle_dist_info *inf)
{
    bool k_on = p->sampling.top_k > 0 && p->sampling.top_k < v;
    if (p->sampling.top_p < 1.0f && (!k_on || inf->n_kept < p->sampling.top_k)) {
        m->top_p = inf->top_p_margin < m->top_p ? inf->top_p_margin : m->top_p;
    }
    if (k_on && inf->n_kept == p->sampling.top_k) {
        m->top_k = inf->top_k_gap < m->top_k ? inf->top_k_gap : m->top_k;
    }
}

/*
 * The exact distribution of the first `positions` output tokens after
 * prompt, into prob (vocab^positions; pairs as x0 * vocab + x1). *ok is false
 * when a boundary tested on the way is closer than the tolerances.
 */
static enum assay_status exact_first_tokens(struct assay_oracle *o, const int32_t *prompt,
                                            const struct assay_dist_params *p, int32_t v,
                                            double *prob, bool *ok, struct margins *mg)
{
    int32_t plen = p->prompt_len;
    int32_t *seq = assay_malloc(sizeof(int32_t) * (size_t)(plen + 1));
    double *rows = assay_malloc(sizeof(double) * (size_t)(plen + 1) * (size_t)v);
    double *p0 = assay_malloc(sizeof(double) * (size_t)v);
    double *scratch = assay_malloc(sizeof(double) * (size_t)v);
    enum assay_status st = ASSAY_OK;
    if (seq == NULL || rows == NULL || p0 == NULL || scratch == NULL) {
        st = ASSAY_ERR_NOMEM;
        goto out;
    }
    *ok = true;
    mg->top_p = INFINITY;
    mg->top_k = INFINITY;
    memcpy(seq, prompt, sizeof(int32_t) * (size_t)plen);
    st = assay_oracle_logits(o, seq, plen, rows);
    struct assay_oracle_dist_info inf;
    if (st == ASSAY_OK) {
        st = assay_oracle_distribution(rows + (int64_t)(plen - 1) * v, v, &p->sampling, p->order,
                                       p0, &inf);
    }
    if (st != ASSAY_OK) {
        goto out;
    }
    margins_add(mg, p, v, &inf);
    st = boundary_safe(rows + (int64_t)(plen - 1) * v, v, p, &inf, scratch, ok);
    if (st != ASSAY_OK || p->positions == 1) {
        memcpy(prob, p0, sizeof(double) * (size_t)v);
        goto out;
    }
    for (int64_t c = 0; c < (int64_t)v * v; c++) {
        prob[c] = 0.0;
    }
    /* One pass per possible x0, this rank's x0 only; the rows, the
     * margins and the verdict on the boundaries are brought together. */
    for (int32_t x0 = 0; x0 < v && st == ASSAY_OK && *ok; x0++) {
        if (p0[x0] <= 0.0 || !assay_shard_mine(x0)) {
            continue;
        }
        seq[plen] = x0;
        st = assay_oracle_logits(o, seq, plen + 1, rows);
        if (st == ASSAY_OK) {
            st = assay_oracle_distribution(rows + (int64_t)plen * v, v, &p->sampling, p->order,
                                           prob + (int64_t)x0 * v, &inf);
        }
        if (st == ASSAY_OK) {
            margins_add(mg, p, v, &inf);
            st = boundary_safe(rows + (int64_t)plen * v, v, p, &inf, scratch, ok);
        }
        if (st == ASSAY_OK) {
            for (int32_t x1 = 0; x1 < v; x1++) {
                prob[(int64_t)x0 * v + x1] *= p0[x0];
            }
        }
    }
    if (st == ASSAY_OK) {
        st = assay_shard_allreduce(prob, (int64_t)v * v, ASSAY_SHARD_F64, ASSAY_SHARD_SUM);
    }
    double least[3] = {*ok ? 1.0 : 0.0, mg->top_p, mg->top_k};
    if (st == ASSAY_OK) {
        st = assay_shard_allreduce(least, 3, ASSAY_SHARD_F64, ASSAY_SHARD_MIN);
    }
    *ok = least[0] > 0.0;
    mg->top_p = least[1];
    mg->top_k = least[2];
out:
    assay_free(seq);
    assay_free(rows);
    assay_free(p0);
    assay_free(scratch);
    return st;
}

/* A prompt whose tested boundaries all have comfortable margins, chosen
 * from the oracle alone before any sample is drawn: the first of the
 * candidates of the prompt seed that qualifies. */
static enum assay_status select_prompt(struct assay_oracle *o, const struct assay_dist_params *p,
                                       int32_t v, int32_t *prompt, double *prob,
                                       struct margins *mg)
{
    uint64_t seed = prompt_seed_of(p);
    bool ok = false;
    enum assay_status st = ASSAY_OK;
    for (int32_t cand = 0; cand < p->prompt_tries && !ok && st == ASSAY_OK; cand++) {
        make_prompt(seed, cand, p->prompt_len, prompt);
        st = exact_first_tokens(o, prompt, p, v, prob, &ok, mg);
    }
    return st != ASSAY_OK ? st : ok ? ASSAY_OK : ASSAY_ERR_INVALID;
}

enum assay_status assay_dist_choose_prompt(const struct assay_model *model,
                                           const struct assay_dist_params *p, int32_t *prompt,
                                           double *prob)
{
    char why[200];
    enum assay_status st = check_params(p, why, sizeof why);
    struct assay_oracle *o = NULL;
    if (st == ASSAY_OK) {
        st = assay_oracle_init(&o, model, p->prompt_len + 1);
    }
    if (st == ASSAY_OK) {
        struct margins mg;
        st = select_prompt(o, p, model->cfg.vocab, prompt, prob, &mg);
    }
    assay_oracle_free(o);
    return st;
}

/* The TV a gof test over prob detects at n (NAN: no test possible). */
static enum assay_status gof_min_tv_at(const double *prob, int64_t k, double alpha, double power,
                                       int64_t n, double *min_tv)
{
    struct assay_gof_bins *bins = NULL;
    enum assay_status st = assay_gof_bins_make(prob, (int32_t)k, (double)n, 5.0, &bins);
    *min_tv = NAN;
    if (st == ASSAY_OK && bins->n_bins >= 2) {
        st = assay_min_detectable_tv(alpha, bins->n_bins - 1, power, (double)n, min_tv);
    }
    assay_gof_bins_free(bins);
    return st;
}

enum assay_status assay_dist_gof_n_for_floor(const double *prob, int64_t k, double alpha,
                                             double power, int64_t n_max, int64_t n_min,
                                             double tv_floor, int64_t *n_out, double *min_tv)
{
    *n_out = n_max;
    enum assay_status st = gof_min_tv_at(prob, k, alpha, power, n_max, min_tv);
    if (st != ASSAY_OK || !(tv_floor > 0) || !(*min_tv < tv_floor)) {
        return st;
    }
    /* The TV detected shrinks about as 1/sqrt(n) (the bins change a
     * little with n): step down by that rule, then by tenths until it
     * holds. */
    int64_t n = n_max;
    for (int32_t it = 0; it < 64 && n > n_min && *min_tv < tv_floor; it++) {
        double r = *min_tv / tv_floor;
        int64_t next = it < 4 ? (int64_t)((double)n * r * r) : n - (n + 9) / 10;
        next = next >= n ? n - 1 : next;
        n = next > n_min ? next : n_min;
        st = gof_min_tv_at(prob, k, alpha, power, n, min_tv);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    *n_out = n;
    return *min_tv >= tv_floor ? ASSAY_OK : ASSAY_ERR_INVALID;
}

static void describe_category(int64_t c, int32_t positions, int32_t v, char *buf, size_t size)
{
    if (positions == 1) {
        snprintf(buf, size, "token %lld", (long long)c);
    } else {
        snprintf(buf, size, "tokens (%lld, %lld)", (long long)(c / v), (long long)(c % v));
    }
}

static void fill_from_test(struct assay_check_result *res, const struct assay_test_result *tr,
                           double alpha)
{
    res->alpha = alpha;
    res->statistic = tr->statistic;
    res->p_value = tr->p_value;
    res->min_tv = tr->min_tv;
    res->power = tr->power;
    res->n = tr->n;
    res->df = tr->df;
}

/* What the statistic says by itself when a hard rule has already failed
 * the check, so that a reader sees whether the bias was large enough to be
 * caught without the rule. */
static void statistic_alone(char *buf, size_t size, bool testable, double p_value, double alpha)
{
    if (!testable) {
        snprintf(buf, size, "the statistic alone: no test possible");
    } else {
        snprintf(buf, size, "the statistic alone: p %.3g, %s", p_value,
                 p_value <= alpha ? "fails too" : "passes");
    }
}

/* ---- goodness of fit --------------------------------------------------- */

enum assay_status assay_dist_gof(const struct assay_adapter *a, const struct assay_model *model,
                                 const struct assay_dist_params *p,
                                 struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    char why[400];
    enum assay_status st = check_params(p, why, sizeof why);
    if (st != ASSAY_OK) {
        set_error(res, st, why);
        return st;
    }
    assay_stats_init();
    const int32_t v = model->cfg.vocab;
    const int64_t k = p->positions == 1 ? v : (int64_t)v * v;
    int32_t *prompt = assay_malloc(sizeof(int32_t) * (size_t)p->prompt_len);
    double *prob = assay_malloc(sizeof(double) * (size_t)k);
    int64_t *counts = assay_calloc((size_t)k, sizeof(int64_t));
    struct assay_oracle *o = NULL;
    struct assay_gof_bins *bins = NULL;
    struct sample_set ss;
    memset(&ss, 0, sizeof ss);
    if (prompt == NULL || prob == NULL || counts == NULL) {
        st = ASSAY_ERR_NOMEM;
        set_error(res, st, "out of memory");
        goto out;
    }
    st = assay_oracle_init(&o, model, p->prompt_len + 1);
    if (st != ASSAY_OK) {
        set_error(res, st, "the oracle could not start");
        goto out;
    }
    struct margins mg = {INFINITY, INFINITY};
    st = select_prompt(o, p, v, prompt, prob, &mg);
    if (st != ASSAY_OK) {
        snprintf(why, sizeof why,
                 "no prompt among %d candidates keeps every top-k/top-p boundary beyond the "
                 "tolerances (top-p %.2g, top-k %.2g logits)",
                 (int)p->prompt_tries, p->tol_top_p, p->tol_logit);
        if (st == ASSAY_ERR_INVALID && p->no_prompt_skip != NULL) {
            assay_check_skip(res, "%s: %s", why, p->no_prompt_skip);
            st = ASSAY_OK;
        } else {
            set_error(res, st, why);
        }
        goto out;
    }
    st = assay_gof_bins_make(prob, (int32_t)k, (double)p->n, 5.0, &bins);
    if (st != ASSAY_OK) {
        set_error(res, st, "could not make the bins");
        goto out;
    }
    struct request_source src = {prompt, 1, p->prompt_len, p->sampling,
                                 assay_seed_derive(p->seed, "requests")};
    st = draw_samples(a, &src, p->n, p->out_len, p->window, false, &ss, why, sizeof why);
    if (st != ASSAY_OK) {
        draw_failed(res, &ss, st, why);
        goto out;
    }
    judge_delivery(res, &ss, "requests");
    int64_t first_bad = -1, first_req = -1;
    for (int64_t i = 0; i < p->n; i++) {
        const int32_t *t = ss.tokens + i * p->out_len;
        if (t[0] < 0 || t[0] >= v || (p->positions == 2 && (t[1] < 0 || t[1] >= v))) {
            continue; /* counted among the bad deliveries */
        }
        int64_t c = p->positions == 1 ? t[0] : (int64_t)t[0] * v + t[1];
        counts[c]++;
        if (bins->bin_of[c] < 0 && first_bad < 0) {
            first_bad = c;
            first_req = i;
        }
    }
    struct assay_test_result tr;
    st = assay_gof_test(bins, counts, p->alpha, p->power, &tr);
    if (st != ASSAY_OK) {
        set_error(res, st, "the chi-squared test failed");
        goto out;
    }
    fill_from_test(res, &tr, p->alpha);
    assay_evidence_gof(&res->evidence, bins, counts, tr.n - tr.n_impossible,
                       p->positions == 2 ? v : 0);
    res->n_impossible = tr.n_impossible;
    res->n_requests = p->n;
    res->n_tokens = p->n * p->out_len;
    char cat[64], alone[96];
    res->statistic_fired = !tr.degenerate && tr.p_value <= p->alpha;
    res->rule_fired = ss.n_bad > 0 || tr.n_impossible > 0;
    statistic_alone(alone, sizeof alone, !tr.degenerate, tr.p_value, p->alpha);
    if (ss.n_bad > 0) {
        assay_check_fail(res, "%lld requests delivered wrongly; first: %s; %s",
                         (long long)ss.n_bad, ss.bad, alone);
    } else if (tr.n_impossible > 0) {
        describe_category(first_bad, p->positions, v, cat, sizeof cat);
        assay_check_fail(
            res,
            "zero-probability rule: %lld samples of categories with oracle probability 0 "
            "(first: request %lld, seed %llu, gave %s; every binding top-k/top-p cut of this "
            "prompt is at least %.1e (mass) / %.1e (logit) from deciding otherwise, beyond the "
            "fp32 tolerance); %s",
            (long long)tr.n_impossible, (long long)first_req,
            (unsigned long long)(src.seed0 + (uint64_t)first_req), cat, mg.top_p, mg.top_k,
            alone);
    } else if (tr.degenerate) {
        assay_check_error(
            res,
            "no chi-squared test possible (%d bins): the sampling parameters leave too few "
            "likely categories",
            (int)tr.n_bins);
        st = ASSAY_ERR_INVALID;
    } else if (tr.p_value <= p->alpha) {
        /* The bin furthest from its expectation, for the reader. */
        double worst = 0.0;
        int64_t wc = -1;
        for (int64_t c = 0; c < k; c++) {
            if (bins->bin_of[c] >= 0 && bins->bin_of[c] < bins->n_own) {
                double e = bins->prob[bins->bin_of[c]] * (double)tr.n;
                double z = (double)counts[c] - e;
                if (fabs(z) / sqrt(e) > worst) {
                    worst = fabs(z) / sqrt(e);
                    wc = c;
                }
            }
        }
        if (wc >= 0) {
            describe_category(wc, p->positions, v, cat, sizeof cat);
            assay_check_fail(
                res,
                "chi-squared %.1f on %d df, p %.3g <= alpha %.0e; largest deviation: %s "
                "observed %lld times, expected %.1f (oracle probability %.5f)",
                tr.statistic, (int)tr.df, tr.p_value, p->alpha, cat, (long long)counts[wc],
                prob[wc] * (double)tr.n, prob[wc]);
        } else {
            assay_check_fail(res, "chi-squared %.1f on %d df, p %.3g <= alpha %.0e", tr.statistic,
                             (int)tr.df, tr.p_value, p->alpha);
        }
    }
    snprintf(res->summary, sizeof res->summary,
             "alpha %.0e n %lld p %.3g min-TV %.4f | chi2 %.1f df %d; %s %d, T %.2g top-k %d "
             "top-p %.2g; %d bins (%d pooled), cut margins p %.1e k %.1e",
             p->alpha, (long long)tr.n, tr.p_value, tr.min_tv, tr.statistic, (int)tr.df,
             p->positions == 1 ? "first token" : "first pair", (int)p->prompt_len,
             (double)p->sampling.temperature, (int)p->sampling.top_k,
             (double)p->sampling.top_p, (int)tr.n_bins, (int)bins->n_pooled, mg.top_p, mg.top_k);
out:
    assay_gof_bins_free(bins);
    sample_set_free(&ss);
    assay_oracle_free(o);
    assay_free(prompt);
    assay_free(prob);
    assay_free(counts);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return st;
}

/* ---- the randomised PIT over sequences ---------------------------------- */

/* F(x-) of p in the order of descending probability, lower id first on
 * ties. */
static double cdf_before(const double *p, int32_t v, int32_t x)
{
    double f = 0.0;
    for (int32_t y = 0; y < v; y++) {
        if (p[y] > p[x] || (p[y] == p[x] && y < x)) {
            f += p[y];
        }
    }
    return f;
}

/* The rank of x among the logits (0 = largest; lower id first on ties). */
static int32_t logit_rank(const double *row, int32_t v, int32_t x)
{
    int32_t r = 0;
    for (int32_t y = 0; y < v; y++) {
        if (row[y] > row[x] || (row[y] == row[x] && y < x)) {
            r++;
        }
    }
    return r;
}

/*
 * Whether a token of oracle probability 0 at this position lies past a
 * top-k/top-p cut that the tolerances could move (boundary_safe) and within
 * the reach of that move: the first token past the cut, or any token the
 * cuts keep once loosened by the tolerances - top-k to every token whose
 * logit is within tol_logit of the k-th, top-p raised by tol_top_p. With
 * fp32 rounding's tolerances that is the first token past the cut; with a
 * numerics budget (the audit's) a cut can move by several tokens. A cut
 * that the tolerances cannot move keeps its hard rule.
 */
static bool at_boundary(const struct assay_dist_params *p, const struct assay_oracle_dist_info *inf,
                        const double *row, int32_t v, int32_t x, double *scratch)
{
    bool safe = true;
    if (boundary_safe(row, v, p, inf, scratch, &safe) != ASSAY_OK || safe) {
        return false;
    }
    int32_t rank = logit_rank(row, v, x);
    if (rank == inf->n_kept) {
        return true;
    }
    struct assay_sampling loose = p->sampling;
    struct assay_oracle_dist_info mi;
    if (loose.top_k > 0 && loose.top_k < v) {
        loose.top_p = 1.0f;
        if (assay_oracle_distribution(row, v, &loose, p->order, scratch, &mi) != ASSAY_OK) {
            return false;
        }
        double kth = INFINITY;
        for (int32_t y = 0; y < v; y++) {
            kth = scratch[y] > 0.0 && row[y] < kth ? row[y] : kth;
        }
        int32_t k = 0;
        for (int32_t y = 0; y < v; y++) {
            k += row[y] >= kth - p->tol_logit;
        }
        loose.top_k = k;
    }
    double tp = (double)p->sampling.top_p + p->tol_top_p;
    loose.top_p = (float)(tp > 1.0 ? 1.0 : tp);
    if (assay_oracle_distribution(row, v, &loose, p->order, scratch, &mi) != ASSAY_OK) {
        return false;
    }
    return rank < mi.n_kept;
}

/* Chi-squared of u[0..n) against Uniform(0,1) on `bins_n` equal bins
 * (pooled where an expected count falls below 5), at level alpha. */
static enum assay_status binned_uniformity(const double *u, int64_t n, int32_t bins_n,
                                           double alpha, double power,
                                           struct assay_test_result *chi)
{
    enum assay_status st = ASSAY_OK;
    double *prob = assay_malloc(sizeof(double) * (size_t)bins_n);
    int64_t *counts = assay_calloc((size_t)bins_n, sizeof(int64_t));
    struct assay_gof_bins *bins = NULL;
    if (prob == NULL || counts == NULL) {
        st = ASSAY_ERR_NOMEM;
    }
    if (st == ASSAY_OK) {
        for (int32_t b = 0; b < bins_n; b++) {
            prob[b] = 1.0 / bins_n;
        }
        for (int64_t i = 0; i < n; i++) {
            int32_t b = (int32_t)(u[i] * bins_n);
            counts[b < bins_n ? b : bins_n - 1]++;
        }
        st = assay_gof_bins_make(prob, bins_n, (double)n, 5.0, &bins);
    }
    if (st == ASSAY_OK) {
        st = assay_gof_test(bins, counts, alpha, power, chi);
    }
    assay_gof_bins_free(bins);
    assay_free(prob);
    assay_free(counts);
    return st;
}

static enum assay_status make_prompts(const struct assay_dist_params *p, int32_t **out)
{
    *out = assay_malloc(sizeof(int32_t) * (size_t)p->n_prompts * (size_t)p->prompt_len);
    if (*out == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    uint64_t seed = prompt_seed_of(p);
    for (int32_t c = 0; c < p->n_prompts; c++) {
        make_prompt(seed, c, p->prompt_len, *out + (int64_t)c * p->prompt_len);
    }
    return ASSAY_OK;
}

static gsl_rng *make_rng(uint64_t seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (r != NULL) {
        unsigned long s = (unsigned long)(seed & 0xffffffffu);
        gsl_rng_set(r, s == 0 ? 1 : s); /* seed 0 is mt19937's default 4357 */
    }
    return r;
}

/* Shannon entropy (nats) of a distribution over v tokens. */
static double entropy_of(const double *pd, int32_t v)
{
    double h = 0.0;
    for (int32_t x = 0; x < v; x++) {
        h -= pd[x] > 0.0 ? pd[x] * log(pd[x]) : 0.0;
    }
    return h;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sequences of the pilot that fixes the entropy groups: one per 64 of the
 * check's, at most one per prompt, at least one. */
static int32_t pilot_sequences(const struct assay_dist_params *p)
{
    int64_t m = p->n / 64;
    m = m < p->n_prompts ? m : p->n_prompts;
    return m < 1 ? 1 : (int32_t)m;
}

/*
 * The edges of the conditional test's entropy groups, fixed before any of
 * the engine's tokens is seen: the oracle samples pilot_sequences(p)
 * sequences of its own from the check's prompts (a seeded mt19937 of its
 * own), and the edges are the 1/G, ..., (G-1)/G quantiles of its processed
 * distributions' entropies along them. seq (prompt + len) and rows
 * ((prompt + len) x v), pd (v) and h (pilot x len) are scratch.
 */
static enum assay_status entropy_edges(struct assay_oracle *o, const struct assay_dist_params *p,
                                       const int32_t *prompts, int32_t v, int32_t *seq,
                                       double *rows, double *pd, double *h, double *edges)
{
    const int32_t plen = p->prompt_len, len = p->out_len, m = pilot_sequences(p);
    gsl_rng *rng = make_rng(assay_seed_derive(p->seed, "pit-groups"));
    if (rng == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    enum assay_status st = ASSAY_OK;
    int64_t n_h = 0;
    for (int32_t s = 0; s < m && st == ASSAY_OK; s++) {
        memcpy(seq, prompts + (int64_t)(s % p->n_prompts) * plen, sizeof(int32_t) * (size_t)plen);
        for (int32_t j = 0; j < len && st == ASSAY_OK; j++) {
            st = assay_oracle_logits(o, seq, plen + j, rows);
            if (st == ASSAY_OK) {
                st = assay_oracle_distribution(rows + (int64_t)(plen + j - 1) * v, v, &p->sampling,
                                               p->order, pd, NULL);
            }
            if (st != ASSAY_OK) {
                break;
            }
            h[n_h++] = entropy_of(pd, v);
            double r = gsl_rng_uniform(rng), cum = 0.0;
            int32_t x = -1;
            for (int32_t y = 0; y < v; y++) {
                if (pd[y] > 0.0) {
                    x = y; /* the last possible token takes rounding's remainder */
                    cum += pd[y];
                    if (r < cum) {
                        break;
                    }
                }
            }
            seq[plen + j] = x;
        }
    }
    gsl_rng_free(rng);
    if (st != ASSAY_OK) {
        return st;
    }
    qsort(h, (size_t)n_h, sizeof(double), by_value);
    for (int32_t g = 1; g < ASSAY_DIST_PIT_GROUPS; g++) {
        edges[g - 1] = h[(n_h * g) / ASSAY_DIST_PIT_GROUPS];
    }
    return ASSAY_OK;
}

/*
 * The conditional test: the PIT values u[0..n) split by group[i] into
 * ASSAY_DIST_PIT_GROUPS groups, each tested for uniformity by chi-squared
 * on ASSAY_DIST_PIT_GROUP_BINS equal bins (pooled to expected counts of at
 * least 5; a group of fewer than 10 values adds nothing), and the sum of
 * the groups' X^2 referred to chi-squared on the summed df. Given the
 * group sizes, each group's u are i.i.d. U(0,1) under a correct engine
 * (a group is a function of the position's context, not of its token), so
 * the sum is chi-squared. min_tv: the TV of one group's PIT distribution
 * detected with `power` at level alpha, for the smallest tested group.
 * scratch holds n values. out->degenerate when no group could be tested.
 */
static enum assay_status conditional_uniformity(const double *u, const int8_t *group, int64_t n,
                                                double alpha, double power, double *scratch,
                                                struct assay_test_result *out,
                                                int64_t n_group[ASSAY_DIST_PIT_GROUPS])
{
    memset(out, 0, sizeof *out);
    out->alpha = alpha;
    out->power = power;
    out->statistic = 0.0;
    int64_t smallest = 0;
    enum assay_status st = ASSAY_OK;
    for (int32_t g = 0; g < ASSAY_DIST_PIT_GROUPS && st == ASSAY_OK; g++) {
        int64_t m = 0;
        for (int64_t i = 0; i < n; i++) {
            if (group[i] == g) {
                scratch[m++] = u[i];
            }
        }
        n_group[g] = m;
        if (m < 10) {
            continue;
        }
        struct assay_test_result chi;
        st = binned_uniformity(scratch, m, ASSAY_DIST_PIT_GROUP_BINS, alpha, power, &chi);
        if (st == ASSAY_OK && !chi.degenerate) {
            out->statistic += chi.statistic;
            out->df += chi.df;
            out->n_bins += chi.n_bins;
            out->n += m;
            smallest = smallest == 0 || m < smallest ? m : smallest;
        }
    }
    if (st != ASSAY_OK) {
        return st;
    }
    out->degenerate = out->df == 0;
    out->p_value = NAN;
    out->min_tv = NAN;
    if (!out->degenerate) {
        out->p_value = gsl_cdf_chisq_Q(out->statistic, out->df);
        out->n_eff = (double)smallest;
        st = assay_min_detectable_tv(alpha, out->df, power, (double)smallest, &out->min_tv);
    }
    return st;
}

enum assay_status assay_dist_pit(const struct assay_adapter *a, const struct assay_model *model,
                                 const struct assay_dist_params *p, struct assay_check_result *res,
                                 struct assay_dist_parts *parts)
{
    int64_t t0 = assay_now_ns();
    char why[400];
    enum assay_status st = check_params(p, why, sizeof why);
    if (st != ASSAY_OK) {
        set_error(res, st, why);
        return st;
    }
    assay_stats_init();
    const int32_t v = model->cfg.vocab, plen = p->prompt_len, len = p->out_len;
    int32_t *prompts = NULL;
    int32_t *seq = assay_malloc(sizeof(int32_t) * (size_t)(plen + len));
    double *rows = assay_malloc(sizeof(double) * (size_t)(plen + len) * (size_t)v);
    double *pd = assay_malloc(sizeof(double) * (size_t)v);
    double *u_scratch = assay_malloc(sizeof(double) * (size_t)v);
    double *u = assay_malloc(sizeof(double) * (size_t)p->n * (size_t)len);
    double *u_group = assay_malloc(sizeof(double) * (size_t)p->n * (size_t)len);
    int8_t *group = assay_malloc(sizeof(int8_t) * (size_t)p->n * (size_t)len);
    double *h = assay_malloc(sizeof(double) * (size_t)pilot_sequences(p) * (size_t)len);
    /* V of output j of sequence i: counter i * len + j, so each value is
     * the same whichever rank draws it. */
    const uint64_t v_seed = assay_seed_derive(p->seed, "pit-v");
    const int64_t cells = p->n * len;
    int64_t *rec = assay_calloc((size_t)cells, sizeof(int64_t));
    double *rec_u = assay_calloc((size_t)cells, sizeof(double));
    struct assay_oracle *o = NULL;
    struct sample_set ss;
    memset(&ss, 0, sizeof ss);
    if (seq == NULL || rows == NULL || pd == NULL || u == NULL || u_scratch == NULL ||
        rec == NULL || rec_u == NULL ||
        u_group == NULL || group == NULL || h == NULL || make_prompts(p, &prompts) != ASSAY_OK) {
        st = ASSAY_ERR_NOMEM;
        set_error(res, st, "out of memory");
        goto out;
    }
    st = assay_oracle_init(&o, model, plen + len);
    if (st != ASSAY_OK) {
        set_error(res, st, "the oracle could not start (prompt + len beyond the context?)");
        goto out;
    }
    double edges[ASSAY_DIST_PIT_GROUPS - 1];
    st = entropy_edges(o, p, prompts, v, seq, rows, pd, h, edges);
    if (st != ASSAY_OK) {
        set_error(res, st, "the oracle's pilot for the entropy groups failed");
        goto out;
    }
    struct request_source src = {prompts, p->n_prompts, plen, p->sampling,
                                 assay_seed_derive(p->seed, "requests")};
    st = draw_samples(a, &src, p->n, len, p->window, false, &ss, why, sizeof why);
    if (st != ASSAY_OK) {
        draw_failed(res, &ss, st, why);
        goto out;
    }
    judge_delivery(res, &ss, "sequences");
    /* The oracle's passes, this rank's sequences only; each position's
     * outcome is recorded at its index (rec: 0 none, 1 + g a PIT value of
     * entropy group g, REC_BOUNDARY, REC_IMPOSSIBLE) and the ranks'
     * records are added together. */
    int64_t n_u = 0, n_boundary = 0, n_impossible = 0, first_key = INT64_MAX;
    char first[300] = "";
    for (int64_t i = 0; i < p->n && st == ASSAY_OK; i++) {
        const int32_t *t = ss.tokens + i * len;
        bool complete = true;
        for (int32_t j = 0; j < len; j++) {
            complete = complete && t[j] >= 0 && t[j] < v;
        }
        if (!complete || !assay_shard_mine(i)) {
            continue; /* incomplete: counted among the bad deliveries */
        }
        memcpy(seq, prompts + (i % p->n_prompts) * plen, sizeof(int32_t) * (size_t)plen);
        memcpy(seq + plen, t, sizeof(int32_t) * (size_t)len);
        /* Row plen-1+j predicts output j; the last token is never fed. */
        st = assay_oracle_logits(o, seq, plen + len - 1, rows);
        for (int32_t j = 0; j < len && st == ASSAY_OK; j++) {
            const double *row = rows + (int64_t)(plen - 1 + j) * v;
            struct assay_oracle_dist_info inf;
            st = assay_oracle_distribution(row, v, &p->sampling, p->order, pd, &inf);
            if (st != ASSAY_OK) {
                break;
            }
            int32_t x = t[j];
            int64_t c = i * len + j;
            if (pd[x] > 0.0) {
                double vv = assay_rng_u01(v_seed, (uint64_t)c, PIT_V_PURPOSE);
                double w = cdf_before(pd, v, x) + vv * pd[x];
                double hx = entropy_of(pd, v);
                int8_t g = 0;
                while (g < ASSAY_DIST_PIT_GROUPS - 1 && hx > edges[g]) {
                    g++;
                }
                rec[c] = 1 + g;
                rec_u[c] = w < 0.0 ? 0.0 : (w > 1.0 ? 1.0 : w);
            } else if (at_boundary(p, &inf, row, v, x, u_scratch)) {
                rec[c] = REC_BOUNDARY;
            } else {
                rec[c] = REC_IMPOSSIBLE;
                if (first_key == INT64_MAX) {
                    first_key = c;
                    snprintf(first, sizeof first,
                             "sequence %lld (seed %llu), output position %d: token %d has oracle "
                             "probability 0 (logit rank %d, %d kept; top-p margin %.2g, top-k "
                             "gap %.2g)",
                             (long long)i, (unsigned long long)(src.seed0 + (uint64_t)i), (int)j,
                             (int)x, (int)logit_rank(row, v, x), (int)inf.n_kept,
                             inf.top_p_margin, inf.top_k_gap);
                }
            }
        }
    }
    if (st != ASSAY_OK) {
        set_error(res, st, "the oracle failed");
        goto out;
    }
    st = assay_shard_allreduce(rec, cells, ASSAY_SHARD_I64, ASSAY_SHARD_SUM);
    if (st == ASSAY_OK) {
        st = assay_shard_allreduce(rec_u, cells, ASSAY_SHARD_F64, ASSAY_SHARD_SUM);
    }
    if (st == ASSAY_OK) {
        st = assay_shard_first_text(first_key, first, sizeof first);
    }
    if (st != ASSAY_OK) {
        set_error(res, st, "the ranks could not bring the PIT values together");
        goto out;
    }
    for (int64_t c = 0; c < cells; c++) {
        if (rec[c] >= 1 && rec[c] <= ASSAY_DIST_PIT_GROUPS) {
            group[n_u] = (int8_t)(rec[c] - 1);
            u[n_u++] = rec_u[c];
        } else if (rec[c] == REC_BOUNDARY) {
            n_boundary++;
        } else if (rec[c] == REC_IMPOSSIBLE) {
            n_impossible++;
        }
    }
    if (n_u < 2 * p->pit_bins * 5) {
        st = ASSAY_ERR_INVALID;
        set_error(res, st, "too few PIT values for the test (raise n or len)");
        goto out;
    }
    /* Three p-values, each U(0,1) under a correct engine, combined by
     * Bonferroni: the marginal KS and binned chi-squared, and the
     * conditional chi-squared within the entropy groups. */
    double d_ks = NAN, p_ks = NAN;
    struct assay_test_result chi, cond;
    int64_t n_group[ASSAY_DIST_PIT_GROUPS];
    st = assay_ks_uniform(u, (size_t)n_u, &d_ks, &p_ks);
    if (st == ASSAY_OK) {
        st = binned_uniformity(u, n_u, p->pit_bins, p->alpha / 3, p->power, &chi);
    }
    if (st == ASSAY_OK) {
        st = conditional_uniformity(u, group, n_u, p->alpha / 3, p->power, u_group, &cond,
                                    n_group);
    }
    if (st != ASSAY_OK) {
        set_error(res, st, "the uniformity tests failed");
        goto out;
    }
    double p_chi = chi.degenerate ? 1.0 : chi.p_value;
    double p_cond = cond.degenerate ? 1.0 : cond.p_value;
    double m_marg = p_ks < p_chi ? p_ks : p_chi;
    double p_marg = 3 * m_marg < 1.0 ? 3 * m_marg : 1.0;  /* the marginal test's own p */
    double p_ctx = 3 * p_cond < 1.0 ? 3 * p_cond : 1.0;   /* the conditional test's own p */
    double p_comb = p_marg < p_ctx ? p_marg : p_ctx;
    fill_from_test(res, &chi, p->alpha);
    assay_evidence_pit(&res->evidence, u, n_u, d_ks);
    res->p_value = p_comb;
    if (parts != NULL) {
        parts->n = 3;
        parts->p[0] = p_ks;
        parts->name[0] = "KS";
        parts->p[1] = p_chi;
        parts->name[1] = "chi2";
        parts->p[2] = p_cond;
        parts->name[2] = "chi2 within entropy groups";
    }
    res->n = n_u;
    res->n_impossible = n_impossible;
    res->n_requests = p->n;
    res->n_tokens = p->n * len;
    char alone[96], groups[160];
    res->statistic_fired = p_comb <= p->alpha;
    res->rule_fired = ss.n_bad > 0 || n_impossible > 0;
    statistic_alone(alone, sizeof alone, true, p_comb, p->alpha);
    snprintf(groups, sizeof groups,
             "within %d entropy groups (edges %.3g, %.3g nats; %lld, %lld, %lld values): X2 %.1f "
             "on %d df, p %.3g",
             ASSAY_DIST_PIT_GROUPS, edges[0], edges[1], (long long)n_group[0],
             (long long)n_group[1], (long long)n_group[2], cond.statistic, (int)cond.df, p_cond);
    bool marg_fired = p_marg <= p->alpha, ctx_fired = p_ctx <= p->alpha;
    if (ss.n_bad > 0) {
        assay_check_fail(res, "%lld sequences delivered wrongly; first: %s; %s",
                         (long long)ss.n_bad, ss.bad, alone);
    } else if (n_impossible > 0) {
        assay_check_fail(res,
                         "zero-probability rule: %lld tokens of oracle probability 0 (first: %s); "
                         "%s",
                         (long long)n_impossible, first, alone);
    } else if (marg_fired) {
        assay_check_fail(
            res,
            "the PIT values are not uniform: KS D %.4f (p %.3g), chi-squared %.1f on %d df "
            "(p %.3g); marginal p %.3g <= alpha %.0e; the conditional test %s: %s",
            d_ks, p_ks, chi.statistic, (int)chi.df, p_chi, p_marg, p->alpha,
            ctx_fired ? "fails too" : "passes", groups);
    } else if (ctx_fired) {
        assay_check_fail(
            res,
            "the PIT values are not uniform within the oracle's entropy groups: %s; conditional "
            "p %.3g <= alpha %.0e; the marginal test alone passes (KS p %.3g, chi-squared p "
            "%.3g, marginal p %.3g): a bias whose sign depends on the context",
            groups, p_ctx, p->alpha, p_ks, p_chi, p_marg);
    }
    snprintf(res->summary, sizeof res->summary,
             "alpha %.0e n %lld p %.3g min-TV %.4f | PIT of %lld x %d: marginal p %.3g (KS D "
             "%.4f p %.3g, chi2 %.1f df %d p %.3g); by entropy p %.3g (X2 %.1f df %d, min-TV %.3f "
             "per group); T %.2g top-k %d top-p %.2g; %lld at a boundary",
             p->alpha, (long long)n_u, p_comb, chi.min_tv, (long long)p->n, (int)len, p_marg,
             d_ks, p_ks, chi.statistic, (int)chi.df, p_chi, p_ctx, cond.statistic, (int)cond.df,
             cond.min_tv, (double)p->sampling.temperature, (int)p->sampling.top_k,
             (double)p->sampling.top_p, (long long)n_boundary);
out:
    sample_set_free(&ss);
    assay_oracle_free(o);
    assay_free(rec);
    assay_free(rec_u);
    assay_free(prompts);
    assay_free(seq);
    assay_free(rows);
    assay_free(pd);
    assay_free(u);
    assay_free(u_group);
    assay_free(group);
    assay_free(h);
    assay_free(u_scratch);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return st;
}

/* ---- speculative acceptance --------------------------------------------- */

static int by_request(const void *a, const void *b)
{
    const struct round_rec *x = a, *y = b;
    if (x->req != y->req) {
        return x->req < y->req ? -1 : 1;
    }
    return (x->index > y->index) - (x->index < y->index);
}

#define MAX_STAGES 64

/* The last draft position of a round whose proposal was tested: every
 * accepted one and the first rejected, or all when none was rejected. */
static int32_t last_tested(const struct round_rec *rr)
{
    return rr->accepted < rr->drafted ? rr->accepted : rr->drafted - 1;
}

struct stage {
    int64_t n;      /* proposals tested at this draft position */
    double accepted;
    double beta;    /* sum of theoretical acceptance probabilities */
    double var;     /* sum of beta (1 - beta) */
};

enum assay_status assay_dist_acceptance(const struct assay_adapter *a,
                                        const struct assay_model *model,
                                        const struct assay_model *draft,
                                        const struct assay_dist_params *p,
                                        struct assay_check_result *res,
                                        struct assay_dist_parts *parts)
{
    int64_t t0 = assay_now_ns();
    char why[400];
    enum assay_status st = check_params(p, why, sizeof why);
    if (st != ASSAY_OK) {
        set_error(res, st, why);
        return st;
    }
    if (draft == NULL || draft->cfg.vocab != model->cfg.vocab) {
        set_error(res, ASSAY_ERR_INVALID, "needs the draft's weights, with the target's vocabulary");
        return ASSAY_ERR_INVALID;
    }
    assay_stats_init();
    const int32_t v = model->cfg.vocab, plen = p->prompt_len, len = p->out_len;
    int32_t *prompts = NULL;
    int32_t *seq = assay_malloc(sizeof(int32_t) * (size_t)(plen + len));
    double *rows_t = assay_malloc(sizeof(double) * (size_t)(plen + len) * (size_t)v);
    double *rows_d = assay_malloc(sizeof(double) * (size_t)(plen + len) * (size_t)v);
    double *pd = assay_malloc(sizeof(double) * (size_t)v);
    double *qd = assay_malloc(sizeof(double) * (size_t)v);
    const uint64_t v_seed = assay_seed_derive(p->seed, "acceptance-v");
    double *rec_beta = NULL;
    uint8_t *valid = NULL;
    struct assay_oracle *ot = NULL, *od = NULL;
    double *u = NULL;
    struct sample_set ss;
    memset(&ss, 0, sizeof ss);
    struct stage stages[MAX_STAGES];
    memset(stages, 0, sizeof stages);
    if (seq == NULL || rows_t == NULL || rows_d == NULL || pd == NULL || qd == NULL ||
        make_prompts(p, &prompts) != ASSAY_OK) {
        st = ASSAY_ERR_NOMEM;
        set_error(res, st, "out of memory");
        goto out;
    }
    st = assay_oracle_init(&ot, model, plen + len);
    if (st == ASSAY_OK) {
        st = assay_oracle_init(&od, draft, plen + len);
    }
    if (st != ASSAY_OK) {
        set_error(res, st, "the oracle could not start (prompt + len beyond the context?)");
        goto out;
    }
    struct request_source src = {prompts, p->n_prompts, plen, p->sampling,
                                 assay_seed_derive(p->seed, "requests")};
    st = draw_samples(a, &src, p->n, len, p->window, true, &ss, why, sizeof why);
    if (st != ASSAY_OK) {
        draw_failed(res, &ss, st, why);
        goto out;
    }
    judge_delivery(res, &ss, "sequences");
    if (ss.n_rounds == 0) {
        assay_check_skip(
            res, "the engine reported no speculative round (SPEC_ROUND events): nothing to test");
        goto out;
    }
    qsort(ss.rounds, (size_t)ss.n_rounds, sizeof *ss.rounds, by_request);
    u = assay_malloc(sizeof(double) * (size_t)ss.n_rounds * (size_t)(MAX_STAGES + 1));
    valid = assay_calloc((size_t)ss.n_rounds, 1);
    if (u == NULL || valid == NULL) {
        st = ASSAY_ERR_NOMEM;
        set_error(res, st, "out of memory");
        goto out;
    }
    /* Which rounds can be tested (every rank, every round: no oracle). */
    int64_t n_u = 0, n_bad_rounds = 0, loaded = -1;
    int32_t max_drafted = 0;
    char bad_round[200] = "";
    for (int64_t r = 0; r < ss.n_rounds; r++) {
        const struct round_rec *rr = &ss.rounds[r];
        const int32_t *t = ss.tokens + rr->req * len;
        bool complete = rr->req >= 0 && rr->req < p->n;
        for (int32_t j = 0; j < len && complete; j++) {
            complete = t[j] >= 0 && t[j] < v;
        }
        if (!complete) {
            continue; /* counted among the bad deliveries */
        }
        int32_t last = last_tested(rr);
        if (rr->drafted < 1 || rr->drafted > MAX_STAGES || rr->accepted < 0 ||
            rr->accepted > rr->drafted || rr->index < 0 || rr->index + last >= len) {
            if (n_bad_rounds++ == 0) {
                snprintf(bad_round, sizeof bad_round,
                         "request %lld: a round at output position %d with %d drafted and %d "
                         "accepted",
                         (long long)rr->req, (int)rr->index, (int)rr->drafted, (int)rr->accepted);
            }
            continue;
        }
        valid[r] = 1;
        max_drafted = rr->drafted > max_drafted ? rr->drafted : max_drafted;
    }
    /* The oracle's beta of each tested proposal, this rank's requests
     * only, at (round, draft position); the ranks' records added. */
    const int64_t cells = ss.n_rounds * (int64_t)(max_drafted > 0 ? max_drafted : 1);
    rec_beta = assay_calloc((size_t)cells, sizeof(double));
    if (rec_beta == NULL) {
        st = ASSAY_ERR_NOMEM;
        set_error(res, st, "out of memory");
        goto out;
    }
    for (int64_t r = 0; r < ss.n_rounds && st == ASSAY_OK; r++) {
        const struct round_rec *rr = &ss.rounds[r];
        if (!valid[r] || !assay_shard_mine(rr->req)) {
            continue;
        }
        const int32_t *t = ss.tokens + rr->req * len;
        int32_t last = last_tested(rr);
        if (loaded != rr->req) {
            memcpy(seq, prompts + (rr->req % p->n_prompts) * plen, sizeof(int32_t) * (size_t)plen);
            memcpy(seq + plen, t, sizeof(int32_t) * (size_t)len);
            st = assay_oracle_logits(ot, seq, plen + len - 1, rows_t);
            if (st == ASSAY_OK) {
                st = assay_oracle_logits(od, seq, plen + len - 1, rows_d);
            }
            loaded = rr->req;
        }
        /* Proposal j was tested iff proposals 0..j-1 were accepted; its
         * context is then the engine's output up to index + j. */
        for (int32_t j = 0; j <= last && st == ASSAY_OK; j++) {
            int64_t row = (int64_t)(plen - 1 + rr->index + j) * v;
            st = assay_oracle_distribution(rows_t + row, v, &p->sampling, p->order, pd, NULL);
            if (st == ASSAY_OK) {
                st = assay_oracle_distribution(rows_d + row, v, &p->sampling, p->order, qd, NULL);
            }
            if (st != ASSAY_OK) {
                break;
            }
            double beta = 0.0;
            for (int32_t x = 0; x < v; x++) {
                beta += pd[x] < qd[x] ? pd[x] : qd[x];
            }
            rec_beta[r * max_drafted + j] = beta > 1.0 ? 1.0 : beta;
        }
    }
    if (st != ASSAY_OK) {
        set_error(res, st, "the oracle failed");
        goto out;
    }
    st = assay_shard_allreduce(rec_beta, cells, ASSAY_SHARD_F64, ASSAY_SHARD_SUM);
    if (st != ASSAY_OK) {
        set_error(res, st, "the ranks could not bring the acceptance probabilities together");
        goto out;
    }
    /* Every rank, in the one process's order: the sums and the PIT. */
    for (int64_t r = 0; r < ss.n_rounds; r++) {
        const struct round_rec *rr = &ss.rounds[r];
        if (!valid[r]) {
            continue;
        }
        int32_t last = last_tested(rr);
        for (int32_t j = 0; j <= last; j++) {
            double beta = rec_beta[r * max_drafted + j];
            bool acc = j < rr->accepted;
            struct stage *sg = &stages[j];
            sg->n++;
            sg->accepted += acc ? 1.0 : 0.0;
            sg->beta += beta;
            sg->var += beta * (1.0 - beta);
            double vv = assay_rng_u01(v_seed, (uint64_t)(rr->req * len + rr->index + j),
                                      ACCEPT_V_PURPOSE);
            u[n_u++] = acc ? vv * beta : beta + vv * (1.0 - beta);
        }
    }
    /* Group draft positions from the last down until each group's variance
     * reaches 5, so the normal approximation of every term holds. */
    double x2 = 0.0, tot_acc = 0.0, tot_beta = 0.0;
    int64_t n_tests = 0;
    int32_t df = 0;
    struct stage grp = {0, 0, 0, 0}, closed = {0, 0, 0, 0};
    bool have_closed = false;
    for (int32_t j = max_drafted - 1; j >= 0; j--) {
        grp.n += stages[j].n;
        grp.accepted += stages[j].accepted;
        grp.beta += stages[j].beta;
        grp.var += stages[j].var;
        n_tests += stages[j].n;
        tot_acc += stages[j].accepted;
        tot_beta += stages[j].beta;
        if (grp.var >= 5.0) {
            if (have_closed) {
                x2 += (closed.accepted - closed.beta) * (closed.accepted - closed.beta) / closed.var;
                df++;
            }
            closed = grp;
            have_closed = true;
            memset(&grp, 0, sizeof grp);
        }
    }
    if (have_closed) {
        closed.accepted += grp.accepted; /* a small remainder joins the last group */
        closed.beta += grp.beta;
        closed.var += grp.var;
        x2 += (closed.accepted - closed.beta) * (closed.accepted - closed.beta) / closed.var;
        df++;
    }
    res->n_requests = p->n;
    res->n_tokens = p->n * len;
    if (df == 0 || n_u < 2) {
        st = ASSAY_ERR_INVALID;
        set_error(res, st, "too few tested proposals for the acceptance tests (raise n or len)");
        goto out;
    }
    double p_rate = NAN, d_ks = NAN, p_ks = NAN, min_tv = NAN;
    p_rate = gsl_cdf_chisq_Q(x2, (double)df);
    st = assay_ks_uniform(u, (size_t)n_u, &d_ks, &p_ks);
    if (st == ASSAY_OK) {
        assay_evidence_pit(&res->evidence, u, n_u, d_ks);
        st = assay_min_detectable_tv(p->alpha / 2, df, p->power, (double)n_tests, &min_tv);
    }
    if (st != ASSAY_OK) {
        set_error(res, st, "the acceptance tests failed");
        goto out;
    }
    double m = p_rate < p_ks ? p_rate : p_ks;
    double p_comb = 2 * m < 1.0 ? 2 * m : 1.0;
    if (parts != NULL) {
        parts->n = 2;
        parts->p[0] = p_rate;
        parts->name[0] = "X2";
        parts->p[1] = p_ks;
        parts->name[1] = "KS";
    }
    res->alpha = p->alpha;
    res->power = p->power;
    res->statistic = x2;
    res->df = df;
    res->p_value = p_comb;
    res->min_tv = min_tv;
    res->n = n_tests;
    char hist[160] = "";
    size_t hl = 0;
    for (int32_t j = 0; j < max_drafted && hl < sizeof hist - 1; j++) {
        hl += (size_t)snprintf(hist + hl, sizeof hist - hl, "%s%.0f/%.1f", j > 0 ? " " : "",
                               stages[j].accepted, stages[j].beta);
    }
    res->statistic_fired = p_comb <= p->alpha;
    res->rule_fired = ss.n_bad > 0 || n_bad_rounds > 0;
    if (ss.n_bad > 0) {
        assay_check_fail(res, "%lld sequences delivered wrongly; first: %s", (long long)ss.n_bad,
                         ss.bad);
    } else if (n_bad_rounds > 0) {
        assay_check_fail(res, "%lld speculative rounds are inconsistent with the tokens; first: %s",
                         (long long)n_bad_rounds, bad_round);
    } else if (p_comb <= p->alpha) {
        assay_check_fail(
            res,
            "acceptance departs from beta = sum min(p, q): accepted/expected by draft "
            "position %s; X2 %.1f on %d df (p %.3g), KS of the indicator PIT D %.4f (p %.3g)",
            hist, x2, (int)df, p_rate, d_ks, p_ks);
    }
    snprintf(res->summary, sizeof res->summary,
             "alpha %.0e n %lld p %.3g min-TV %.4f | accepted %.0f of %lld tested, theory %.1f; "
             "by draft position %s; X2 %.1f df %d p %.3g; KS p %.3g",
             p->alpha, (long long)n_tests, p_comb, min_tv, tot_acc, (long long)n_tests, tot_beta,
             hist, x2, (int)df, p_rate, p_ks);
out:
    sample_set_free(&ss);
    assay_oracle_free(ot);
    assay_oracle_free(od);
    assay_free(rec_beta);
    assay_free(valid);
    assay_free(prompts);
    assay_free(seq);
    assay_free(rows_t);
    assay_free(rows_d);
    assay_free(pd);
    assay_free(qd);
    assay_free(u);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return st;
}

/* ---- two engines ---------------------------------------------------------- */

static enum assay_status count_first_tokens(const struct assay_adapter *a,
                                            const struct assay_dist_params *p,
                                            const int32_t *prompt, uint64_t seed0, int32_t v,
                                            int64_t *counts, int64_t *n_bad, char *bad,
                                            size_t bad_size, bool *engine_fault, char *why,
                                            size_t size)
{
    struct request_source src = {prompt, 1, p->prompt_len, p->sampling, seed0};
    struct sample_set ss;
    enum assay_status st =
        draw_samples(a, &src, p->n, p->out_len, p->window, false, &ss, why, size);
    *engine_fault = ss.engine_fault;
    if (st != ASSAY_OK) {
        return st;
    }
    for (int64_t i = 0; i < p->n; i++) {
        const int32_t *t = ss.tokens + i * p->out_len;
        if (t[0] < 0 || t[0] >= v || (p->positions == 2 && (t[1] < 0 || t[1] >= v))) {
            continue;
        }
        counts[p->positions == 1 ? t[0] : (int64_t)t[0] * v + t[1]]++;
    }
    *n_bad = ss.n_bad;
    snprintf(bad, bad_size, "%s", ss.bad);
    sample_set_free(&ss);
    return ASSAY_OK;
}

enum assay_status assay_dist_homogeneity(const struct assay_adapter *a,
                                         const struct assay_adapter *b,
                                         const struct assay_dist_params *p,
                                         struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    char why[400];
    enum assay_status st = check_params(p, why, sizeof why);
    if (st != ASSAY_OK) {
        set_error(res, st, why);
        return st;
    }
    assay_stats_init();
    struct assay_adapter_info ia, ib;
    assay_adapter_get_info(a, &ia);
    assay_adapter_get_info(b, &ib);
    if (ia.vocab <= 0 || ia.vocab != ib.vocab) {
        set_error(res, ASSAY_ERR_INVALID, "the two engines must state one and the same vocabulary");
        return ASSAY_ERR_INVALID;
    }
    const int32_t v = ia.vocab;
    const int64_t k = p->positions == 1 ? v : (int64_t)v * v;
    int32_t *prompt = assay_malloc(sizeof(int32_t) * (size_t)p->prompt_len);
    int64_t *ca = assay_calloc((size_t)k, sizeof(int64_t));
    int64_t *cb = assay_calloc((size_t)k, sizeof(int64_t));
    if (prompt == NULL || ca == NULL || cb == NULL) {
        st = ASSAY_ERR_NOMEM;
        set_error(res, st, "out of memory");
        goto out;
    }
    make_prompt(prompt_seed_of(p), 0, p->prompt_len, prompt);
    int64_t bad_a = 0, bad_b = 0;
    char msg_a[300], msg_b[300];
    /* Disjoint seeds: the two samples must be independent. */
    bool fault = false;
    const char *failing = "A";
    st = count_first_tokens(a, p, prompt, assay_seed_derive(p->seed, "requests-a"), v, ca, &bad_a,
                            msg_a, sizeof msg_a, &fault, why, sizeof why);
    if (st == ASSAY_OK) {
        failing = "B";
        st = count_first_tokens(b, p, prompt, assay_seed_derive(p->seed, "requests-b"), v, cb,
                                &bad_b, msg_b, sizeof msg_b, &fault, why, sizeof why);
    }
    if (st != ASSAY_OK && fault) {
        assay_check_fail(res, "engine %s failed while sampling: %s (%s)", failing, why,
                         assay_status_str(st));
        goto out;
    }
    if (st != ASSAY_OK) {
        set_error(res, st, why);
        goto out;
    }
    if (bad_a > 0 || bad_b > 0) {
        assay_check_fail(res, "engine %s delivered %lld requests wrongly: %s",
                         bad_a > 0 ? "A" : "B", (long long)(bad_a > 0 ? bad_a : bad_b),
                         bad_a > 0 ? msg_a : msg_b);
    }
    struct assay_test_result tr;
    st = assay_homogeneity_test(ca, cb, (int32_t)k, p->alpha, p->power, 5.0, &tr);
    if (st != ASSAY_OK) {
        set_error(res, st, "the homogeneity test failed");
        goto out;
    }
    fill_from_test(res, &tr, p->alpha);
    assay_evidence_homogeneity(&res->evidence, ca, cb, (int32_t)k, 5.0, p->positions == 2 ? v : 0);
    res->min_tv = tr.min_tv;
    res->n_requests = 2 * p->n;
    res->n_tokens = 2 * p->n * p->out_len;
    res->statistic_fired = !tr.degenerate && tr.p_value <= p->alpha;
    res->rule_fired = bad_a > 0 || bad_b > 0;
    if (bad_a > 0 || bad_b > 0) {
        /* the FAIL is stated above */
    } else if (tr.degenerate) {
        assay_check_error(res, "no homogeneity test possible (%d bins)", (int)tr.n_bins);
        st = ASSAY_ERR_INVALID;
    } else if (tr.p_value <= p->alpha) {
        assay_check_fail(
            res, "the engines' samples differ: chi-squared %.1f on %d df, p %.3g <= alpha %.0e",
            tr.statistic, (int)tr.df, tr.p_value, p->alpha);
    }
    snprintf(res->summary, sizeof res->summary,
             "alpha %.0e n %lld+%lld p %.3g min-TV %.4f | 2 x %d chi2 %.1f df %d; %s; T %.2g "
             "top-k %d top-p %.2g",
             p->alpha, (long long)p->n, (long long)p->n, tr.p_value, tr.min_tv, (int)tr.n_bins,
             tr.statistic, (int)tr.df, p->positions == 1 ? "first token" : "first pair",
             (double)p->sampling.temperature, (int)p->sampling.top_k, (double)p->sampling.top_p);
out:
    assay_free(prompt);
    assay_free(ca);
    assay_free(cb);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return st;
}

/* ---- Holm across the family ---------------------------------------------- */

double assay_dist_finalize(struct assay_check_result *results, size_t n)
{
    size_t m = 0;
    double alpha = INFINITY;
    for (size_t i = 0; i < n; i++) {
        const struct assay_check_result *r = &results[i];
        if (r->family == ASSAY_FAMILY_DISTRIBUTIONAL &&
            (r->verdict == ASSAY_VERDICT_PASS || r->verdict == ASSAY_VERDICT_FAIL) &&
            r->p_value >= 0.0 && r->p_value <= 1.0 && r->alpha > 0.0 && r->alpha < 1.0) {
            m++;
            alpha = r->alpha < alpha ? r->alpha : alpha;
        }
    }
    if (m == 0) {
        return 0.0;
    }
    double *pv = assay_malloc(sizeof(double) * m);
    double *adj = assay_malloc(sizeof(double) * m);
    size_t *idx = assay_malloc(sizeof(size_t) * m);
    if (pv == NULL || adj == NULL || idx == NULL) {
        assay_free(pv);
        assay_free(adj);
        assay_free(idx);
        return -1.0;
    }
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        const struct assay_check_result *r = &results[i];
        if (r->family == ASSAY_FAMILY_DISTRIBUTIONAL &&
            (r->verdict == ASSAY_VERDICT_PASS || r->verdict == ASSAY_VERDICT_FAIL) &&
            r->p_value >= 0.0 && r->p_value <= 1.0 && r->alpha > 0.0 && r->alpha < 1.0) {
            pv[j] = r->p_value;
            idx[j++] = i;
        }
    }
    double family = alpha * (double)m;
    family = family < 0.5 ? family : 0.5;
    if (assay_holm_adjusted(pv, m, adj) != ASSAY_OK) {
        family = -1.0;
    } else {
        for (j = 0; j < m; j++) {
            struct assay_check_result *r = &results[idx[j]];
            r->p_adjusted = adj[j];
            r->statistic_fired = r->p_value <= r->alpha || adj[j] <= family;
            size_t l = strlen(r->summary);
            snprintf(r->summary + l, sizeof r->summary - l, " | Holm p %.3g (family %.0e, m %zu)",
                     adj[j], family, m);
            if (adj[j] <= family && r->verdict == ASSAY_VERDICT_PASS) {
                assay_check_fail(
                    r,
                    "Holm's procedure over the %zu distributional checks rejects it: p %.3g, "
                    "adjusted %.3g <= family-wise level %.0e",
                    m, r->p_value, adj[j], family);
            }
        }
    }
    assay_free(pv);
    assay_free(adj);
    assay_free(idx);
    return family;
}
