/*
 * workload.c - reading, generating and writing workloads (workload.h).
 * assay_workload_load / assay_workload_parse read an "assay-workload" JSON
 * file, either explicit "requests" or a "generate" shape drawn with GSL's
 * mt19937 from its seed, checking every field and reporting where and what;
 * assay_workload_save, _subset and _summarize write one, copy the requests
 * a mask keeps (the shrinker, the property checks) and describe one. Every
 * check, benchmark and the audit get their requests here.
 */
#include "workload.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "json_out.h"
#include "rng.h"

#define DEFAULT_MAX_REQUESTS 1000000
#define MAX_FILE_BYTES (256L * 1024 * 1024)
/* Prompt tokens a generated workload may hold (1 GiB of token ids). */
#define MAX_TOTAL_TOKENS ((int64_t)1 << 28)

/* ---- reading a file -------------------------------------------------- */

static enum assay_status parse_drawn(const char *json, size_t len, const char *file,
                                     const struct assay_workload_limits *lim,
                                     const struct assay_workload_draw *draw,
                                     struct assay_workload **out, struct assay_diag *diag);

static enum assay_status load_drawn(const char *path, const struct assay_workload_limits *lim,
                                    const struct assay_workload_draw *draw,
                                    struct assay_workload **out, struct assay_diag *diag)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        assay_diag_set(diag, path, "", "a readable workload file", "%s", strerror(errno));
        return ASSAY_ERR_IO;
    }
    char *buf = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) {
        size = ftell(f);
    }
    if (size < 0 || size > MAX_FILE_BYTES || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        assay_diag_set(diag, path, "", "a regular file of at most 256 MiB", "%ld bytes", size);
        return ASSAY_ERR_IO;
    }
    buf = assay_malloc((size_t)size + 1);
    if (buf == NULL) {
        fclose(f);
        return ASSAY_ERR_NOMEM;
    }
    size_t got = fread(buf, 1, (size_t)size, f);
    fclose(f);
    if (got != (size_t)size) {
        assay_free(buf);
        assay_diag_set(diag, path, "", "the whole file", "%zu of %ld bytes", got, size);
        return ASSAY_ERR_IO;
    }
    buf[size] = '\0';
    enum assay_status st = parse_drawn(buf, (size_t)size, path, lim, draw, out, diag);
    assay_free(buf);
    return st;
}

enum assay_status assay_workload_load(const char *path, const struct assay_workload_limits *lim,
                                      struct assay_workload **out, struct assay_diag *diag)
{
    return load_drawn(path, lim, NULL, out, diag);
}

enum assay_status assay_workload_load_drawn(const char *path,
                                            const struct assay_workload_limits *lim,
                                            const struct assay_workload_draw *draw,
                                            struct assay_workload **out, struct assay_diag *diag)
{
    return load_drawn(path, lim, draw, out, diag);
}

/* ---- parsing helpers --------------------------------------------------- */

struct parser {
    const char *file;
    struct assay_diag *diag;
    const struct assay_workload_limits *lim;
    const struct assay_workload_draw *draw; /* NULL: the file's own seed and n */
};

static enum assay_status fail(struct parser *ps, const char *where, const char *expected,
                              const char *got)
{
    assay_diag_set(ps->diag, ps->file, where, expected, "%s", got);
    return ASSAY_ERR_PARSE;
}

/* An integer field in [lo, hi]; absent fields take `dflt` unless required. */
static enum assay_status get_int(struct parser *ps, const cJSON *obj, const char *key,
                                 const char *path, bool required, int64_t dflt, int64_t lo,
                                 int64_t hi, int64_t *out)
{
    char where[160];
    snprintf(where, sizeof where, "%s%s%s", path, path[0] != '\0' ? "." : "", key);
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (j == NULL && !required) {
        *out = dflt;
        return ASSAY_OK;
    }
    char expected[96];
    snprintf(expected, sizeof expected, "an integer in %lld..%lld", (long long)lo, (long long)hi);
    if (!cJSON_IsNumber(j)) {
        return fail(ps, where, expected, assay_json_kind_of(j));
    }
    double v = j->valuedouble;
    if (!(v >= (double)lo && v <= (double)hi) || v != floor(v)) {
        char got[64];
        snprintf(got, sizeof got, "%.17g", v);
        return fail(ps, where, expected, got);
    }
    *out = (int64_t)v;
    return ASSAY_OK;
}

/* A seed written as decimal text: every 64-bit value, where a JSON number
 * holds integers exactly only up to 2^53. */
static enum assay_status get_seed_text(struct parser *ps, const cJSON *j, const char *path,
                                       uint64_t *out)
{
    char where[160];
    snprintf(where, sizeof where, "%s.seed", path);
    const char *s = j->valuestring;
    bool digits = s[0] != '\0' && strlen(s) <= 20;
    for (const char *c = s; digits && *c != '\0'; c++) {
        digits = *c >= '0' && *c <= '9';
    }
    errno = 0;
    unsigned long long v = digits ? strtoull(s, NULL, 10) : 0;
    if (!digits || errno == ERANGE) {
        char got[48];
        snprintf(got, sizeof got, "\"%.40s\"", s);
        return fail(ps, where, "a decimal integer in 0..18446744073709551615", got);
    }
    *out = (uint64_t)v;
    return ASSAY_OK;
}

static enum assay_status get_num(struct parser *ps, const cJSON *obj, const char *key,
                                 const char *path, bool required, double dflt, double lo,
                                 double hi, double *out)
{
    char where[160];
    snprintf(where, sizeof where, "%s%s%s", path, path[0] != '\0' ? "." : "", key);
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (j == NULL && !required) {
        *out = dflt;
        return ASSAY_OK;
    }
    char expected[96];
    snprintf(expected, sizeof expected, "a number in [%g, %g]", lo, hi);
    if (!cJSON_IsNumber(j)) {
        return fail(ps, where, expected, assay_json_kind_of(j));
    }
    double v = j->valuedouble;
    if (!(v >= lo && v <= hi)) {
        char got[64];
        snprintf(got, sizeof got, "%.17g", v);
        return fail(ps, where, expected, got);
    }
    *out = v;
    return ASSAY_OK;
}

static enum assay_status get_str(struct parser *ps, const cJSON *obj, const char *key,
                                 const char *path, bool required, char *out, size_t size)
{
    char where[160];
    snprintf(where, sizeof where, "%s%s%s", path, path[0] != '\0' ? "." : "", key);
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (j == NULL && !required) {
        out[0] = '\0';
        return ASSAY_OK;
    }
    if (!cJSON_IsString(j)) {
        return fail(ps, where, "a string", assay_json_kind_of(j));
    }
    snprintf(out, size, "%s", j->valuestring);
    return ASSAY_OK;
}

static enum assay_status check_keys(struct parser *ps, const cJSON *obj, const char *path,
                                    const char *const *allowed)
{
    for (const cJSON *c = obj->child; c != NULL; c = c->next) {
        bool ok = false;
        for (size_t i = 0; allowed[i] != NULL; i++) {
            if (c->string != NULL && strcmp(c->string, allowed[i]) == 0) {
                ok = true;
                break;
            }
        }
        if (!ok) {
            char where[160], expected[256];
            snprintf(where, sizeof where, "%s%s%s", path, path[0] != '\0' ? "." : "",
                     c->string != NULL ? c->string : "?");
            size_t n = (size_t)snprintf(expected, sizeof expected, "one of the keys");
            for (size_t i = 0; allowed[i] != NULL && n < sizeof expected; i++) {
                n += (size_t)snprintf(expected + n, sizeof expected - n, "%s %s",
                                      i == 0 ? "" : ",", allowed[i]);
            }
            return fail(ps, where, expected, "an unknown key");
        }
    }
    return ASSAY_OK;
}

static enum assay_status parse_sampling(struct parser *ps, const cJSON *j, const char *path,
                                        struct assay_sampling *s)
{
    *s = assay_sampling_greedy();
    if (j == NULL) {
        return ASSAY_OK;
    }
    if (!cJSON_IsObject(j)) {
        return fail(ps, path, "an object", assay_json_kind_of(j));
    }
    static const char *const keys[] = {"temperature", "top_k", "top_p", "seed", NULL};
    enum assay_status st = check_keys(ps, j, path, keys);
    double t = 0, tp = 1;
    int64_t tk = 0, seed = -1;
    if (st == ASSAY_OK) {
        st = get_num(ps, j, "temperature", path, false, 0.0, 0.0, 100.0, &t);
    }
    if (st == ASSAY_OK) {
        st = get_int(ps, j, "top_k", path, false, 0, 0, 1 << 20, &tk);
    }
    if (st == ASSAY_OK) {
        st = get_num(ps, j, "top_p", path, false, 1.0, 1e-9, 1.0, &tp);
    }
    uint64_t big = 0;
    bool as_text = cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "seed"));
    if (st == ASSAY_OK && as_text) {
        st = get_seed_text(ps, cJSON_GetObjectItemCaseSensitive(j, "seed"), path, &big);
    } else if (st == ASSAY_OK) {
        st = get_int(ps, j, "seed", path, false, -1, 0, (int64_t)1 << 53, &seed);
    }
    if (st != ASSAY_OK) {
        return st;
    }
    s->temperature = (float)t;
    s->top_k = (int32_t)tk;
    s->top_p = (float)tp;
    s->seeded = as_text || seed >= 0;
    s->seed = as_text ? big : seed >= 0 ? (uint64_t)seed : 0;
    return ASSAY_OK;
}

/* A seed as a number while a double holds it exactly, else as text. */
static bool add_seed(cJSON *o, uint64_t seed)
{
    if (seed <= (uint64_t)1 << 53) {
        return cJSON_AddNumberToObject(o, "seed", (double)seed) != NULL;
    }
    char text[24];
    snprintf(text, sizeof text, "%llu", (unsigned long long)seed);
    return cJSON_AddStringToObject(o, "seed", text) != NULL;
}

static struct assay_workload *workload_new(int32_t n, int64_t n_tokens)
{
    struct assay_workload *w = assay_calloc(1, sizeof *w);
    if (w == NULL) {
        return NULL;
    }
    w->reqs = assay_calloc(n > 0 ? (size_t)n : 1, sizeof *w->reqs);
    w->token_store = assay_calloc(n_tokens > 0 ? (size_t)n_tokens : 1, sizeof(int32_t));
    if (w->reqs == NULL || w->token_store == NULL) {
        assay_workload_free(w);
        return NULL;
    }
    w->n = n;
    w->n_tokens = n_tokens;
    return w;
}

void assay_workload_free(struct assay_workload *w)
{
    if (w == NULL) {
        return;
    }
    assay_free(w->reqs);
    assay_free(w->token_store);
    assay_free(w);
}

struct id_at {
    uint64_t id;
    int32_t i;
};

static int cmp_id_at(const void *a, const void *b)
{
    const struct id_at *x = a, *y = b;
    if (x->id != y->id) {
        return x->id < y->id ? -1 : 1;
    }
    return (x->i > y->i) - (x->i < y->i);
}

/* The first request whose id an earlier one already has (*dup, -1 when the
 * ids are unique) and the first holder of that id (*first). Sorting
 * (id, index) pairs keeps this O(n log n): comparing every pair took hours
 * for the million requests a file may hold. */
static enum assay_status first_duplicate(const struct assay_workload *w, int32_t *dup,
                                         int32_t *first)
{
    *dup = -1;
    *first = -1;
    if (w->n < 2) {
        return ASSAY_OK;
    }
    struct id_at *v = assay_calloc((size_t)w->n, sizeof *v);
    if (v == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    for (int32_t i = 0; i < w->n; i++) {
        v[i] = (struct id_at){w->reqs[i].id, i};
    }
    qsort(v, (size_t)w->n, sizeof *v, cmp_id_at);
    /* In a run of equal ids (sorted by index) the second has the first
     * earlier holder; the earliest such second is the answer. */
    for (int32_t k = 1; k < w->n; k++) {
        bool second = v[k].id == v[k - 1].id && (k == 1 || v[k - 2].id != v[k].id);
        if (second && (*dup < 0 || v[k].i < *dup)) {
            *dup = v[k].i;
            *first = v[k - 1].i;
        }
    }
    assay_free(v);
    return ASSAY_OK;
}

/* Trace checks shared by explicit and generated workloads. */
static enum assay_status validate(struct parser *ps, const struct assay_workload *w)
{
    int32_t dup, first;
    enum assay_status st = first_duplicate(w, &dup, &first);
    if (st != ASSAY_OK) {
        return st;
    }
    for (int32_t i = 0; i < w->n; i++) {
        const struct assay_workload_request *r = &w->reqs[i];
        char where[96];
        if (ps->lim->max_seq_len > 0 &&
            (int64_t)r->prompt_len + r->max_tokens > ps->lim->max_seq_len) {
            snprintf(where, sizeof where, "requests[%d]", (int)i);
            char expected[96], got[96];
            snprintf(expected, sizeof expected, "prompt_len + max_tokens <= %d (the context)",
                     (int)ps->lim->max_seq_len);
            snprintf(got, sizeof got, "%d + %d", (int)r->prompt_len, (int)r->max_tokens);
            return fail(ps, where, expected, got);
        }
        if (i > 0 && r->arrival_s < w->reqs[i - 1].arrival_s) {
            snprintf(where, sizeof where, "requests[%d].arrival_s", (int)i);
            char expected[96], got[64];
            snprintf(expected, sizeof expected, "arrivals sorted (>= %.9g, the previous request's)",
                     w->reqs[i - 1].arrival_s);
            snprintf(got, sizeof got, "%.9g", r->arrival_s);
            return fail(ps, where, expected, got);
        }
        if (i > 0 && r->arrival_step < w->reqs[i - 1].arrival_step) {
            snprintf(where, sizeof where, "requests[%d].arrival_step", (int)i);
            char got[64];
            snprintf(got, sizeof got, "%d after %d", (int)r->arrival_step,
                     (int)w->reqs[i - 1].arrival_step);
            return fail(ps, where, "arrival steps sorted", got);
        }
        if (i == dup) {
            snprintf(where, sizeof where, "requests[%d].id", (int)i);
            char got[96];
            snprintf(got, sizeof got, "%llu, already used by requests[%d]",
                     (unsigned long long)r->id, (int)first);
            return fail(ps, where, "a unique request id", got);
        }
    }
    return ASSAY_OK;
}

/* ---- explicit requests --------------------------------------------------- */

static enum assay_status parse_requests(struct parser *ps, const cJSON *arr,
                                        struct assay_workload **out)
{
    int32_t n = cJSON_GetArraySize(arr);
    int32_t max_n = ps->lim->max_requests > 0 ? ps->lim->max_requests : DEFAULT_MAX_REQUESTS;
    if (n < 1 || n > max_n) {
        char expected[64], got[64];
        snprintf(expected, sizeof expected, "1..%d requests", (int)max_n);
        snprintf(got, sizeof got, "%d", (int)n);
        return fail(ps, "requests", expected, got);
    }
    int64_t n_tokens = 0;
    int32_t i = 0;
    for (const cJSON *r = arr->child; r != NULL; r = r->next, i++) {
        char path[64];
        snprintf(path, sizeof path, "requests[%d]", (int)i);
        if (!cJSON_IsObject(r)) {
            return fail(ps, path, "an object", assay_json_kind_of(r));
        }
        const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(r, "prompt");
        if (!cJSON_IsArray(prompt)) {
            char where[96];
            snprintf(where, sizeof where, "%s.prompt", path);
            return fail(ps, where, "an array of token ids", assay_json_kind_of(prompt));
        }
        n_tokens += cJSON_GetArraySize(prompt);
    }
    struct assay_workload *w = workload_new(n, n_tokens);
    if (w == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    static const char *const keys[] = {"id", "arrival_s", "arrival_step", "prompt", "prompt_len",
                                       "max_tokens", "stop_token", "abort_after", "abort_step", "sampling",
                                       NULL};
    int32_t *tok = w->token_store;
    i = 0;
    enum assay_status st = ASSAY_OK;
    for (const cJSON *r = arr->child; r != NULL && st == ASSAY_OK; r = r->next, i++) {
        struct assay_workload_request *q = &w->reqs[i];
        char path[64];
        snprintf(path, sizeof path, "requests[%d]", (int)i);
        int64_t id, step, plen, max_tokens, stop, abort_after, abort_step;
        double arrival;
        st = check_keys(ps, r, path, keys);
        if (st == ASSAY_OK) {
            st = get_int(ps, r, "id", path, true, 0, 0, (int64_t)1 << 53, &id);
        }
        if (st == ASSAY_OK) {
            st = get_num(ps, r, "arrival_s", path, false, 0.0, 0.0, 1e7, &arrival);
        }
        if (st == ASSAY_OK) {
            st = get_int(ps, r, "arrival_step", path, false, 0, 0, 1 << 30, &step);
        }
        if (st == ASSAY_OK) {
            st = get_int(ps, r, "max_tokens", path, true, 0, 1, 1 << 24, &max_tokens);
        }
        if (st == ASSAY_OK) {
            st = get_int(ps, r, "stop_token", path, false, -1, -1, ps->lim->vocab - 1, &stop);
        }
        if (st == ASSAY_OK) {
            st = get_int(ps, r, "abort_after", path, false, -1, -1, 1 << 24, &abort_after);
        }
        if (st == ASSAY_OK) {
            st = get_int(ps, r, "abort_step", path, false, -1, -1, 1 << 24, &abort_step);
        }
        if (st == ASSAY_OK) {
            char where[96];
            snprintf(where, sizeof where, "%s.sampling", path);
            st = parse_sampling(ps, cJSON_GetObjectItemCaseSensitive(r, "sampling"), where,
                                &q->sampling);
        }
        const cJSON *prompt = cJSON_GetObjectItemCaseSensitive(r, "prompt");
        int32_t actual = cJSON_GetArraySize(prompt);
        if (st == ASSAY_OK) {
            st = get_int(ps, r, "prompt_len", path, false, actual, 0, 1 << 24, &plen);
        }
        if (st == ASSAY_OK && plen != actual) {
            char where[96], got[96];
            snprintf(where, sizeof where, "%s.prompt_len", path);
            snprintf(got, sizeof got, "prompt_len %lld with %d tokens", (long long)plen, (int)actual);
            st = fail(ps, where, "the number of tokens in prompt", got);
        }
        if (st == ASSAY_OK && actual < 1) {
            char where[96];
            snprintf(where, sizeof where, "%s.prompt", path);
            st = fail(ps, where, "at least one token", "an empty prompt");
        }
        int32_t t = 0;
        for (const cJSON *x = st == ASSAY_OK ? prompt->child : NULL; x != NULL; x = x->next, t++) {
            if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) ||
                x->valuedouble < 0 || x->valuedouble >= ps->lim->vocab) {
                char where[96], expected[64], got[64];
                snprintf(where, sizeof where, "%s.prompt[%d]", path, (int)t);
                snprintf(expected, sizeof expected, "a token id in 0..%d", (int)ps->lim->vocab - 1);
                if (cJSON_IsNumber(x)) {
                    snprintf(got, sizeof got, "%.17g", x->valuedouble);
                } else {
                    snprintf(got, sizeof got, "%s", assay_json_kind_of(x));
                }
                st = fail(ps, where, expected, got);
                break;
            }
            tok[t] = (int32_t)x->valuedouble;
        }
        if (st != ASSAY_OK) {
            break;
        }
        q->id = (uint64_t)id;
        q->arrival_s = arrival;
        q->arrival_step = (int32_t)step;
        q->prompt = tok;
        q->prompt_len = actual;
        q->max_tokens = (int32_t)max_tokens;
        q->stop_token = (int32_t)stop;
        q->abort_after = (int32_t)abort_after;
        q->abort_step = (int32_t)abort_step;
        tok += actual;
    }
    if (st == ASSAY_OK) {
        st = validate(ps, w);
    }
    if (st != ASSAY_OK) {
        assay_workload_free(w);
        return st;
    }
    *out = w;
    return ASSAY_OK;
}

/* ---- generated workloads ------------------------------------------------ */

struct length_dist {
    char kind[16]; /* constant, uniform, stratified, lognormal */
    double a, b;   /* value | min,max | median,sigma */
    int32_t lo, hi;
};

/* A length distribution at path; "stratified" (uniform, one draw in each
 * of n equal parts of the range) only where may_stratify: the prompts'
 * lengths, drawn once per request. */
static enum assay_status parse_length(struct parser *ps, const cJSON *j, const char *path,
                                      bool may_stratify, struct length_dist *d)
{
    if (!cJSON_IsObject(j)) {
        return fail(ps, path, "an object {\"dist\": ...}", assay_json_kind_of(j));
    }
    static const char *const keys[] = {"dist", "value", "min", "max", "median", "sigma", NULL};
    enum assay_status st = check_keys(ps, j, path, keys);
    if (st == ASSAY_OK) {
        st = get_str(ps, j, "dist", path, true, d->kind, sizeof d->kind);
    }
    if (st != ASSAY_OK) {
        return st;
    }
    int64_t v = 0, lo = 0, hi = 0;
    if (strcmp(d->kind, "constant") == 0) {
        st = get_int(ps, j, "value", path, true, 0, 1, 1 << 20, &v);
        d->lo = d->hi = (int32_t)v;
        d->a = (double)v;
    } else if (strcmp(d->kind, "uniform") == 0 || strcmp(d->kind, "lognormal") == 0 ||
               (may_stratify && strcmp(d->kind, "stratified") == 0)) {
        st = get_int(ps, j, "min", path, true, 0, 1, 1 << 20, &lo);
        if (st == ASSAY_OK) {
            st = get_int(ps, j, "max", path, true, 0, lo, 1 << 20, &hi);
        }
        if (st == ASSAY_OK && strcmp(d->kind, "lognormal") == 0) {
            st = get_num(ps, j, "median", path, true, 0, 1, 1 << 20, &d->a);
            if (st == ASSAY_OK) {
                st = get_num(ps, j, "sigma", path, true, 0, 0, 10, &d->b);
            }
        }
        d->lo = (int32_t)lo;
        d->hi = (int32_t)hi;
    } else {
        char where[160];
        snprintf(where, sizeof where, "%s.dist", path);
        return fail(ps, where,
                    may_stratify ? "\"constant\", \"uniform\", \"stratified\" or \"lognormal\""
                                 : "\"constant\", \"uniform\" or \"lognormal\"",
                    d->kind);
    }
    return st;
}

static int32_t draw_length(const struct length_dist *d, gsl_rng *rng)
{
    if (strcmp(d->kind, "constant") == 0) {
        return d->lo;
    }
    if (strcmp(d->kind, "uniform") == 0) {
        return d->lo + (int32_t)gsl_rng_uniform_int(rng, (unsigned long)(d->hi - d->lo + 1));
    }
    double x = d->a * exp(d->b * gsl_ran_ugaussian(rng));
    int32_t v = (int32_t)lround(x);
    return v < d->lo ? d->lo : v > d->hi ? d->hi : v;
}

static int describe_length(char *buf, size_t size, const struct length_dist *d)
{
    if (strcmp(d->kind, "constant") == 0) {
        return snprintf(buf, size, "constant %d", (int)d->lo);
    }
    if (strcmp(d->kind, "uniform") == 0) {
        return snprintf(buf, size, "uniform %d..%d", (int)d->lo, (int)d->hi);
    }
    if (strcmp(d->kind, "stratified") == 0) {
        return snprintf(buf, size, "stratified %d..%d (one in each of n equal parts)",
                        (int)d->lo, (int)d->hi);
    }
    return snprintf(buf, size, "lognormal median %g sigma %g in %d..%d", d->a, d->b, (int)d->lo,
                    (int)d->hi);
}

struct shape {
    int64_t seed, n, vocab;
    char process[16]; /* poisson, gamma, constant, burst */
    double rate, cv;
    int64_t step_every;
    struct length_dist prompt, output, long_prompt;
    double long_fraction;
    int64_t shared_len;
    double shared_fraction;
    int64_t groups, group_len, group_tail;
    struct assay_sampling sampling;
    bool vary_seed;
    double abort_fraction;        /* "abort": share of requests aborted */
    struct length_dist abort_after; /* after how many delivered tokens */
    double abort_step_fraction;   /* "abort_step": share aborted after some steps */
    struct length_dist abort_steps; /* after how many engine steps, in any phase */
};

/* generate.KEY, when present: {"fraction": share of requests, "after":
 * a length distribution} ("abort": tokens; "abort_step": engine steps). */
static enum assay_status parse_abort(struct parser *ps, const cJSON *g, const char *key,
                                     double *fraction, struct length_dist *after)
{
    const cJSON *ab = cJSON_GetObjectItemCaseSensitive(g, key);
    if (ab == NULL) {
        return ASSAY_OK;
    }
    char path[48], after_path[64];
    snprintf(path, sizeof path, "generate.%s", key);
    snprintf(after_path, sizeof after_path, "%s.after", path);
    if (!cJSON_IsObject(ab)) {
        return fail(ps, path, "an object", assay_json_kind_of(ab));
    }
    static const char *const keys[] = {"fraction", "after", NULL};
    enum assay_status st = check_keys(ps, ab, path, keys);
    if (st == ASSAY_OK) {
        st = get_num(ps, ab, "fraction", path, true, 0, 0, 1, fraction);
    }
    if (st == ASSAY_OK) {
        st = parse_length(ps, cJSON_GetObjectItemCaseSensitive(ab, "after"), after_path, false,
                          after);
    }
    return st;
}

static enum assay_status parse_shape(struct parser *ps, const cJSON *g, struct shape *sh)
{
    static const char *const keys[] = {"seed", "n", "vocab", "arrival", "prompt_len",
                                       "output_len", "long", "shared_prefix", "prefix_groups",
                                       "sampling", "abort", "abort_step", NULL};
    enum assay_status st = check_keys(ps, g, "generate", keys);
    int32_t max_n = ps->lim->max_requests > 0 ? ps->lim->max_requests : DEFAULT_MAX_REQUESTS;
    if (st == ASSAY_OK) {
        st = get_int(ps, g, "seed", "generate", true, 0, 1, (int64_t)1 << 53, &sh->seed);
    }
    if (st == ASSAY_OK) {
        st = get_int(ps, g, "n", "generate", true, 0, 1, max_n, &sh->n);
    }
    if (st == ASSAY_OK && ps->draw != NULL) {
        sh->seed = (int64_t)(ps->draw->seed & (((uint64_t)1 << 53) - 1));
        if (ps->draw->n > 0) {
            sh->n = ps->draw->n < max_n ? ps->draw->n : max_n;
        }
    }
    if (st == ASSAY_OK) {
        int64_t vmax = ps->lim->vocab < 256 ? ps->lim->vocab : 256;
        st = get_int(ps, g, "vocab", "generate", false, vmax, 1, ps->lim->vocab, &sh->vocab);
    }
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(g, "arrival");
    snprintf(sh->process, sizeof sh->process, "burst");
    if (st == ASSAY_OK && arr != NULL) {
        if (!cJSON_IsObject(arr)) {
            return fail(ps, "generate.arrival", "an object", assay_json_kind_of(arr));
        }
        static const char *const akeys[] = {"process", "rate", "cv", "step_every", NULL};
        st = check_keys(ps, arr, "generate.arrival", akeys);
        if (st == ASSAY_OK) {
            st = get_str(ps, arr, "process", "generate.arrival", true, sh->process,
                         sizeof sh->process);
        }
        if (st == ASSAY_OK && strcmp(sh->process, "poisson") != 0 &&
            strcmp(sh->process, "gamma") != 0 && strcmp(sh->process, "constant") != 0 &&
            strcmp(sh->process, "burst") != 0) {
            return fail(ps, "generate.arrival.process",
                        "\"poisson\", \"gamma\", \"constant\" or \"burst\"", sh->process);
        }
        bool timed = strcmp(sh->process, "burst") != 0;
        if (st == ASSAY_OK) {
            st = get_num(ps, arr, "rate", "generate.arrival", timed, 0.0, 1e-6, 1e9, &sh->rate);
        }
        if (st == ASSAY_OK) {
            st = get_num(ps, arr, "cv", "generate.arrival", strcmp(sh->process, "gamma") == 0, 1.0,
                         1e-3, 100.0, &sh->cv);
        }
        if (st == ASSAY_OK) {
            st = get_int(ps, arr, "step_every", "generate.arrival", false, 0, 0, 1 << 20,
                         &sh->step_every);
        }
    }
    if (st == ASSAY_OK) {
        st = parse_length(ps, cJSON_GetObjectItemCaseSensitive(g, "prompt_len"),
                          "generate.prompt_len", true, &sh->prompt);
    }
    if (st == ASSAY_OK) {
        st = parse_length(ps, cJSON_GetObjectItemCaseSensitive(g, "output_len"),
                          "generate.output_len", false, &sh->output);
    }
    const cJSON *lg = cJSON_GetObjectItemCaseSensitive(g, "long");
    if (st == ASSAY_OK && lg != NULL) {
        if (!cJSON_IsObject(lg)) {
            return fail(ps, "generate.long", "an object", assay_json_kind_of(lg));
        }
        static const char *const lkeys[] = {"fraction", "prompt_len", NULL};
        st = check_keys(ps, lg, "generate.long", lkeys);
        if (st == ASSAY_OK) {
            st = get_num(ps, lg, "fraction", "generate.long", true, 0, 0, 1, &sh->long_fraction);
        }
        if (st == ASSAY_OK) {
            st = parse_length(ps, cJSON_GetObjectItemCaseSensitive(lg, "prompt_len"),
                              "generate.long.prompt_len", false, &sh->long_prompt);
        }
    }
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(g, "shared_prefix");
    if (st == ASSAY_OK && sp != NULL) {
        if (!cJSON_IsObject(sp)) {
            return fail(ps, "generate.shared_prefix", "an object", assay_json_kind_of(sp));
        }
        static const char *const skeys[] = {"len", "fraction", NULL};
        st = check_keys(ps, sp, "generate.shared_prefix", skeys);
        if (st == ASSAY_OK) {
            st = get_int(ps, sp, "len", "generate.shared_prefix", true, 0, 1, 1 << 20, &sh->shared_len);
        }
        if (st == ASSAY_OK) {
            st = get_num(ps, sp, "fraction", "generate.shared_prefix", false, 1.0, 0, 1,
                         &sh->shared_fraction);
        }
    }
    const cJSON *pg = cJSON_GetObjectItemCaseSensitive(g, "prefix_groups");
    if (st == ASSAY_OK && pg != NULL) {
        if (!cJSON_IsObject(pg)) {
            return fail(ps, "generate.prefix_groups", "an object", assay_json_kind_of(pg));
        }
        static const char *const gkeys[] = {"count", "len", "common_tail", NULL};
        st = check_keys(ps, pg, "generate.prefix_groups", gkeys);
        if (st == ASSAY_OK) {
            st = get_int(ps, pg, "count", "generate.prefix_groups", true, 0, 1, 1024, &sh->groups);
        }
        if (st == ASSAY_OK) {
            st = get_int(ps, pg, "len", "generate.prefix_groups", true, 0, 1, 1 << 20, &sh->group_len);
        }
        if (st == ASSAY_OK) {
            st = get_int(ps, pg, "common_tail", "generate.prefix_groups", false, 0, 0,
                         sh->group_len, &sh->group_tail);
        }
    }
    if (st == ASSAY_OK) {
        st = parse_sampling(ps, cJSON_GetObjectItemCaseSensitive(g, "sampling"),
                            "generate.sampling", &sh->sampling);
    }
    if (st == ASSAY_OK) {
        st = parse_abort(ps, g, "abort", &sh->abort_fraction, &sh->abort_after);
    }
    if (st == ASSAY_OK) {
        st = parse_abort(ps, g, "abort_step", &sh->abort_step_fraction, &sh->abort_steps);
    }
    return st;
}

/* Requests from a shape. Request i has id i + 1; prompts are a shared
 * prefix or a group prefix (when stated) followed by random tokens. Long
 * because its draws read in one sequence: their order is the workload's
 * identity (a shape and its seed give the same requests in every
 * version), and a new draw goes after all the others. */
static enum assay_status generate(struct parser *ps, const struct shape *sh,
                                  struct assay_workload **out)
{
    /* Prefixes are built before any request: one longer than the context
     * fits no request, and all of them must fit in memory. */
    const struct {
        const char *where;
        int64_t len;
    } prefixes[] = {{"generate.shared_prefix.len", sh->shared_len},
                    {"generate.prefix_groups.len", sh->group_len}};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        if (ps->lim->max_seq_len > 0 && prefixes[i].len >= ps->lim->max_seq_len) {
            char expected[96], got[32];
            snprintf(expected, sizeof expected, "a prefix shorter than the context (%d tokens)",
                     (int)ps->lim->max_seq_len);
            snprintf(got, sizeof got, "%lld", (long long)prefixes[i].len);
            return fail(ps, prefixes[i].where, expected, got);
        }
    }
    if (sh->shared_len + sh->groups * sh->group_len > MAX_TOTAL_TOKENS) {
        char expected[96], got[64];
        snprintf(expected, sizeof expected, "at most %lld prefix tokens in all",
                 (long long)MAX_TOTAL_TOKENS);
        snprintf(got, sizeof got, "%lld", (long long)(sh->shared_len + sh->groups * sh->group_len));
        return fail(ps, "generate.prefix_groups", expected, got);
    }
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    if (rng == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    gsl_rng_set(rng, (unsigned long)sh->seed);
    int32_t n = (int32_t)sh->n;
    int32_t *plen = assay_calloc((size_t)n, sizeof(int32_t));
    int32_t *olen = assay_calloc((size_t)n, sizeof(int32_t));
    int32_t *prefix = assay_calloc((size_t)(sh->shared_len + sh->groups * sh->group_len + 1), sizeof(int32_t));
    if (plen == NULL || olen == NULL || prefix == NULL) {
        gsl_rng_free(rng);
        assay_free(plen);
        assay_free(olen);
        assay_free(prefix);
        return ASSAY_ERR_NOMEM;
    }
    /* Prefixes first, so that they do not depend on n. */
    for (int64_t i = 0; i < sh->shared_len; i++) {
        prefix[i] = (int32_t)gsl_rng_uniform_int(rng, (unsigned long)sh->vocab);
    }
    int32_t *groups = prefix + sh->shared_len;
    for (int64_t gi = 0; gi < sh->groups; gi++) {
        for (int64_t i = 0; i < sh->group_len; i++) {
            int64_t tail_start = sh->group_len - sh->group_tail;
            groups[gi * sh->group_len + i] =
                (gi > 0 && i >= tail_start) ? groups[i]
                                            : (int32_t)gsl_rng_uniform_int(rng, (unsigned long)sh->vocab);
        }
    }
    int64_t total = 0;
    bool *uses_shared = assay_calloc((size_t)n, sizeof(bool));
    if (uses_shared == NULL) {
        gsl_rng_free(rng);
        assay_free(plen);
        assay_free(olen);
        assay_free(prefix);
        return ASSAY_ERR_NOMEM;
    }
    /* Stratified prompt lengths: request i draws in part stratum[i] of n
     * equal parts of the range, the parts dealt in a random order. */
    const bool stratified = strcmp(sh->prompt.kind, "stratified") == 0;
    int32_t *stratum = stratified ? assay_calloc((size_t)n, sizeof(int32_t)) : NULL;
    if (stratified && stratum == NULL) {
        gsl_rng_free(rng);
        assay_free(plen);
        assay_free(olen);
        assay_free(prefix);
        assay_free(uses_shared);
        return ASSAY_ERR_NOMEM;
    }
    if (stratified) {
        for (int32_t i = 0; i < n; i++) {
            stratum[i] = i;
        }
        gsl_ran_shuffle(rng, stratum, (size_t)n, sizeof(int32_t));
    }
    for (int32_t i = 0; i < n; i++) {
        bool is_long = sh->long_fraction > 0 && gsl_rng_uniform(rng) < sh->long_fraction;
        if (stratified && !is_long) {
            const double width = (double)(sh->prompt.hi - sh->prompt.lo + 1) / (double)n;
            int32_t at = (int32_t)floor(((double)stratum[i] + gsl_rng_uniform(rng)) * width);
            plen[i] = sh->prompt.lo + at;
            plen[i] = plen[i] > sh->prompt.hi ? sh->prompt.hi : plen[i];
        } else {
            plen[i] = draw_length(is_long ? &sh->long_prompt : &sh->prompt, rng);
        }
        olen[i] = draw_length(&sh->output, rng);
        uses_shared[i] = sh->shared_len > 0 && gsl_rng_uniform(rng) < sh->shared_fraction;
        int32_t fixed = (uses_shared[i] ? (int32_t)sh->shared_len : 0) + (int32_t)sh->group_len;
        if (plen[i] < fixed + 1) {
            plen[i] = fixed + 1;
        }
        total += plen[i];
    }
    /* Refuse what cannot be valid before building it: a request beyond
     * the context (validate says the same of a built workload), or more
     * prompt tokens than fit in memory comfortably. */
    enum assay_status st = ASSAY_OK;
    for (int32_t i = 0; i < n && ps->lim->max_seq_len > 0 && st == ASSAY_OK; i++) {
        if ((int64_t)plen[i] + olen[i] > ps->lim->max_seq_len) {
            char where[64], expected[96], got[64];
            snprintf(where, sizeof where, "requests[%d]", (int)i);
            snprintf(expected, sizeof expected, "prompt_len + max_tokens <= %d (the context)",
                     (int)ps->lim->max_seq_len);
            snprintf(got, sizeof got, "%d + %d", (int)plen[i], (int)olen[i]);
            st = fail(ps, where, expected, got);
        }
    }
    if (st == ASSAY_OK && total > MAX_TOTAL_TOKENS) {
        char expected[96], got[64];
        snprintf(expected, sizeof expected, "at most %lld prompt tokens in all",
                 (long long)MAX_TOTAL_TOKENS);
        snprintf(got, sizeof got, "%lld", (long long)total);
        st = fail(ps, "generate", expected, got);
    }
    struct assay_workload *w = NULL;
    if (st == ASSAY_OK) {
        w = workload_new(n, total);
        st = w != NULL ? ASSAY_OK : ASSAY_ERR_NOMEM;
    }
    double t = 0.0;
    int32_t *tok = w != NULL ? w->token_store : NULL;
    for (int32_t i = 0; i < n && st == ASSAY_OK; i++) {
        struct assay_workload_request *q = &w->reqs[i];
        q->id = (uint64_t)i + 1;
        q->prompt = tok;
        q->prompt_len = plen[i];
        q->max_tokens = olen[i];
        q->stop_token = -1;
        q->abort_after = -1;
        q->abort_step = -1;
        q->sampling = sh->sampling;
        if (sh->sampling.seeded) {
            q->sampling.seed = sh->sampling.seed + (uint64_t)i;
        }
        int32_t k = 0;
        if (uses_shared[i]) {
            memcpy(tok, prefix, sizeof(int32_t) * (size_t)sh->shared_len);
            k = (int32_t)sh->shared_len;
        }
        if (sh->groups > 0) {
            memcpy(tok + k, groups + (i % sh->groups) * sh->group_len,
                   sizeof(int32_t) * (size_t)sh->group_len);
            k += (int32_t)sh->group_len;
        }
        for (; k < plen[i]; k++) {
            tok[k] = (int32_t)gsl_rng_uniform_int(rng, (unsigned long)sh->vocab);
        }
        tok += plen[i];
        if (strcmp(sh->process, "poisson") == 0) {
            t += i == 0 ? 0.0 : gsl_ran_exponential(rng, 1.0 / sh->rate);
        } else if (strcmp(sh->process, "gamma") == 0) {
            double shape = 1.0 / (sh->cv * sh->cv);
            t += i == 0 ? 0.0 : gsl_ran_gamma(rng, shape, 1.0 / (sh->rate * shape));
        } else if (strcmp(sh->process, "constant") == 0) {
            t = i / sh->rate;
        }
        q->arrival_s = t;
        q->arrival_step = (int32_t)(sh->step_every * i);
    }
    /* Aborts are drawn last, so that a shape without them generates what
     * it always did. */
    for (int32_t i = 0; i < n && st == ASSAY_OK && sh->abort_fraction > 0; i++) {
        if (gsl_rng_uniform(rng) < sh->abort_fraction) {
            w->reqs[i].abort_after = draw_length(&sh->abort_after, rng);
        }
    }
    /* Aborts by steps after those: they reach requests queued, between
     * prefill chunks and preempted, which an abort after a token never
     * does (a request that just received a token is running). */
    for (int32_t i = 0; i < n && st == ASSAY_OK && sh->abort_step_fraction > 0; i++) {
        if (gsl_rng_uniform(rng) < sh->abort_step_fraction) {
            w->reqs[i].abort_step = draw_length(&sh->abort_steps, rng);
        }
    }
    if (st == ASSAY_OK) {
        int n_chars = snprintf(w->lengths, sizeof w->lengths, "prompt ");
        n_chars += describe_length(w->lengths + n_chars, sizeof w->lengths - (size_t)n_chars, &sh->prompt);
        if (sh->long_fraction > 0) {
            n_chars += snprintf(w->lengths + n_chars, sizeof w->lengths - (size_t)n_chars,
                                " (%.0f%% long: ", 100 * sh->long_fraction);
            n_chars += describe_length(w->lengths + n_chars, sizeof w->lengths - (size_t)n_chars,
                                       &sh->long_prompt);
            n_chars += snprintf(w->lengths + n_chars, sizeof w->lengths - (size_t)n_chars, ")");
        }
        if (sh->shared_len > 0) {
            n_chars += snprintf(w->lengths + n_chars, sizeof w->lengths - (size_t)n_chars,
                                ", %.0f%% share a %lld-token prefix", 100 * sh->shared_fraction,
                                (long long)sh->shared_len);
        }
        n_chars += snprintf(w->lengths + n_chars, sizeof w->lengths - (size_t)n_chars, "; output ");
        n_chars += describe_length(w->lengths + n_chars, sizeof w->lengths - (size_t)n_chars, &sh->output);
        if (sh->abort_fraction > 0 && n_chars < (int)sizeof w->lengths) {
            n_chars += snprintf(w->lengths + n_chars, sizeof w->lengths - (size_t)n_chars,
                                "; %.0f%% aborted after ", 100 * sh->abort_fraction);
            if (n_chars < (int)sizeof w->lengths) {
                n_chars += describe_length(w->lengths + n_chars,
                                           sizeof w->lengths - (size_t)n_chars, &sh->abort_after);
            }
        }
        if (sh->abort_step_fraction > 0 && n_chars < (int)sizeof w->lengths) {
            n_chars += snprintf(w->lengths + n_chars, sizeof w->lengths - (size_t)n_chars,
                                "; %.0f%% aborted after steps ", 100 * sh->abort_step_fraction);
            if (n_chars < (int)sizeof w->lengths) {
                describe_length(w->lengths + n_chars, sizeof w->lengths - (size_t)n_chars,
                                &sh->abort_steps);
            }
        }
        if (strcmp(sh->process, "burst") == 0) {
            snprintf(w->arrivals, sizeof w->arrivals, "all at once%s",
                     sh->step_every > 0 ? " (joining every few steps)" : "");
        } else if (strcmp(sh->process, "gamma") == 0) {
            snprintf(w->arrivals, sizeof w->arrivals, "gamma, %g req/s, cv %g", sh->rate, sh->cv);
        } else {
            snprintf(w->arrivals, sizeof w->arrivals, "%s, %g req/s", sh->process, sh->rate);
        }
        st = validate(ps, w);
    }
    gsl_rng_free(rng);
    assay_free(plen);
    assay_free(olen);
    assay_free(prefix);
    assay_free(uses_shared);
    assay_free(stratum);
    if (st != ASSAY_OK) {
        assay_workload_free(w);
        return st;
    }
    *out = w;
    return ASSAY_OK;
}

enum assay_status assay_workload_parse(const char *json, size_t len, const char *file,
                                       const struct assay_workload_limits *lim,
                                       struct assay_workload **out, struct assay_diag *diag)
{
    return parse_drawn(json, len, file, lim, NULL, out, diag);
}

static enum assay_status parse_drawn(const char *json, size_t len, const char *file,
                                     const struct assay_workload_limits *lim,
                                     const struct assay_workload_draw *draw,
                                     struct assay_workload **out, struct assay_diag *diag)
{
    *out = NULL;
    struct parser ps = {file != NULL ? file : "<memory>", diag, lim, draw};
    if (lim == NULL || lim->vocab < 1) {
        return ASSAY_ERR_INVALID;
    }
    /* A NUL byte would end some strings early and not others; name it
     * rather than let the JSON parser stumble somewhere after it. */
    if (json == NULL && len > 0) {
        return ASSAY_ERR_INVALID;
    }
    const char *nul = len > 0 ? memchr(json, '\0', len) : NULL;
    if (nul != NULL) {
        char where[96];
        assay_diag_position(json, len, (size_t)(nul - json), where, sizeof where);
        return fail(&ps, where, "text without NUL bytes", "a NUL byte");
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (root == NULL) {
        size_t off = assay_json_error_offset(json, len, end);
        char where[96], got[64];
        assay_diag_position(json, len, off, where, sizeof where);
        /* The text need not be NUL-terminated: show at most what is left
         * of it, and name the end when only white space is. */
        size_t rest = off < len ? len - off : 0;
        size_t blank = 0;
        while (blank < rest && strchr(" \t\r\n", json[off + blank]) != NULL &&
               json[off + blank] != '\0') {
            blank++;
        }
        if (blank == rest) {
            snprintf(got, sizeof got, "the end of the file");
        } else {
            snprintf(got, sizeof got, "%.*s", (int)(rest < 24 ? rest : 24), json + off);
        }
        for (char *c = got; *c != '\0'; c++) {
            if (*c == '\n' || *c == '\r' || *c == '\t') {
                *c = ' ';
            }
        }
        return fail(&ps, where, "valid JSON", got);
    }
    enum assay_status st = ASSAY_OK;
    /* cJSON stops after the first value; anything but white space after
     * it means the file is not the one object it should be. */
    size_t after = end != NULL && end >= json && (size_t)(end - json) <= len ? (size_t)(end - json)
                                                                              : len;
    while (after < len && strchr(" \t\r\n", json[after]) != NULL && json[after] != '\0') {
        after++;
    }
    if (after < len) {
        char where[96], got[64];
        assay_diag_position(json, len, after, where, sizeof where);
        snprintf(got, sizeof got, "%.*s", (int)(len - after < 24 ? len - after : 24), json + after);
        for (char *c = got; *c != '\0'; c++) {
            if (*c == '\n' || *c == '\r' || *c == '\t') {
                *c = ' ';
            }
        }
        st = fail(&ps, where, "the end of the file after the workload object", got);
    }
    if (st == ASSAY_OK && !cJSON_IsObject(root)) {
        st = fail(&ps, "(top level)", "an object", assay_json_kind_of(root));
    }
    static const char *const keys[] = {"format", "version", "name", "description", "generate",
                                       "requests", NULL};
    char format[64] = "", name[64] = "", description[256] = "";
    int64_t version = 0;
    if (st == ASSAY_OK) {
        st = check_keys(&ps, root, "", keys);
    }
    if (st == ASSAY_OK) {
        st = get_str(&ps, root, "format", "", true, format, sizeof format);
    }
    if (st == ASSAY_OK && strcmp(format, "assay-workload") != 0) {
        st = fail(&ps, "format", "\"assay-workload\"", format);
    }
    if (st == ASSAY_OK) {
        st = get_int(&ps, root, "version", "", true, 0, 0, 1 << 20, &version);
    }
    if (st == ASSAY_OK && version != ASSAY_WORKLOAD_VERSION) {
        char got[96];
        snprintf(got, sizeof got, "%lld (regenerate the file for format version %d)",
                 (long long)version, ASSAY_WORKLOAD_VERSION);
        st = fail(&ps, "version", "1", got);
    }
    if (st == ASSAY_OK) {
        st = get_str(&ps, root, "name", "", false, name, sizeof name);
    }
    if (st == ASSAY_OK) {
        st = get_str(&ps, root, "description", "", false, description, sizeof description);
    }
    const cJSON *gen = cJSON_GetObjectItemCaseSensitive(root, "generate");
    const cJSON *reqs = cJSON_GetObjectItemCaseSensitive(root, "requests");
    if (st == ASSAY_OK && (gen == NULL) == (reqs == NULL)) {
        st = fail(&ps, "(top level)", "exactly one of \"generate\" and \"requests\"",
                  gen == NULL ? "neither" : "both");
    }
    struct assay_workload *w = NULL;
    if (st == ASSAY_OK && draw != NULL && gen == NULL) {
        st = fail(&ps, "generate", "a generated workload (drawn with another seed)",
                  "a trace of listed requests");
    }
    if (st == ASSAY_OK && reqs != NULL) {
        if (!cJSON_IsArray(reqs)) {
            st = fail(&ps, "requests", "an array", assay_json_kind_of(reqs));
        } else {
            st = parse_requests(&ps, reqs, &w);
        }
    }
    if (st == ASSAY_OK && gen != NULL) {
        struct shape sh;
        memset(&sh, 0, sizeof sh);
        if (!cJSON_IsObject(gen)) {
            st = fail(&ps, "generate", "an object", assay_json_kind_of(gen));
        } else {
            st = parse_shape(&ps, gen, &sh);
        }
        if (st == ASSAY_OK) {
            st = generate(&ps, &sh, &w);
        }
    }
    cJSON_Delete(root);
    if (st != ASSAY_OK) {
        return st;
    }
    snprintf(w->name, sizeof w->name, "%s", name);
    snprintf(w->description, sizeof w->description, "%s", description);
    if (reqs != NULL) {
        struct assay_workload_summary s;
        assay_workload_summarize(w, &s);
        snprintf(w->lengths, sizeof w->lengths,
                 "trace: prompt %d..%d (median %d), output %d..%d (median %d)", (int)s.prompt_min,
                 (int)s.prompt_max, (int)s.prompt_p50, (int)s.output_min, (int)s.output_max,
                 (int)s.output_p50);
        snprintf(w->arrivals, sizeof w->arrivals, "trace arrival times");
    }
    *out = w;
    return ASSAY_OK;
}

/* ---- writing, subsets, summaries ---------------------------------------- */

enum assay_status assay_workload_save(const struct assay_workload *w, const char *path,
                                      struct assay_diag *diag)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *reqs = cJSON_CreateArray();
    if (root == NULL || reqs == NULL) {
        cJSON_Delete(root);
        cJSON_Delete(reqs);
        return ASSAY_ERR_NOMEM;
    }
    cJSON_AddItemToObject(root, "requests", reqs);
    bool ok = cJSON_AddStringToObject(root, "format", "assay-workload") != NULL &&
              cJSON_AddNumberToObject(root, "version", ASSAY_WORKLOAD_VERSION) != NULL &&
              cJSON_AddStringToObject(root, "name", w->name) != NULL &&
              cJSON_AddStringToObject(root, "description", w->description) != NULL;
    for (int32_t i = 0; i < w->n && ok; i++) {
        const struct assay_workload_request *r = &w->reqs[i];
        cJSON *o = cJSON_CreateObject();
        cJSON *prompt = cJSON_CreateIntArray(r->prompt, r->prompt_len);
        if (o == NULL || prompt == NULL) {
            cJSON_Delete(o);
            cJSON_Delete(prompt);
            ok = false;
            break;
        }
        cJSON_AddItemToArray(reqs, o);
        cJSON_AddItemToObject(o, "prompt", prompt);
        ok = cJSON_AddNumberToObject(o, "id", (double)r->id) != NULL &&
             cJSON_AddNumberToObject(o, "arrival_s", r->arrival_s) != NULL &&
             cJSON_AddNumberToObject(o, "arrival_step", r->arrival_step) != NULL &&
             cJSON_AddNumberToObject(o, "prompt_len", r->prompt_len) != NULL &&
             cJSON_AddNumberToObject(o, "max_tokens", r->max_tokens) != NULL &&
             cJSON_AddNumberToObject(o, "stop_token", r->stop_token) != NULL &&
             cJSON_AddNumberToObject(o, "abort_after", r->abort_after) != NULL &&
             (r->abort_step < 0 || cJSON_AddNumberToObject(o, "abort_step", r->abort_step) != NULL);
        const struct assay_sampling *s = &r->sampling;
        if (ok && (s->temperature > 0 || s->top_k > 0 || s->top_p < 1 || s->seeded)) {
            cJSON *js = cJSON_AddObjectToObject(o, "sampling");
            ok = js != NULL && cJSON_AddNumberToObject(js, "temperature", s->temperature) != NULL &&
                 cJSON_AddNumberToObject(js, "top_k", s->top_k) != NULL &&
                 cJSON_AddNumberToObject(js, "top_p", s->top_p) != NULL &&
                 (!s->seeded || add_seed(js, s->seed));
        }
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (text == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    enum assay_status st = ASSAY_OK;
    if (f == NULL) {
        assay_diag_set(diag, path, "", "a writable location", "%s", strerror(errno));
        st = ASSAY_ERR_IO;
    } else {
        size_t n = strlen(text);
        bool wrote = fwrite(text, 1, n, f) == n && fputc('\n', f) != EOF;
        if (fclose(f) != 0 || !wrote || rename(tmp, path) != 0) {
            assay_diag_set(diag, path, "", "the file written in full", "%s", strerror(errno));
            remove(tmp);
            st = ASSAY_ERR_IO;
        }
    }
    assay_free(text);
    return st;
}

enum assay_status assay_workload_subset(const struct assay_workload *w, const uint8_t *keep,
                                        struct assay_workload **out)
{
    *out = NULL;
    int32_t n = 0;
    int64_t tokens = 0;
    for (int32_t i = 0; i < w->n; i++) {
        if (keep == NULL || keep[i]) {
            n++;
            tokens += w->reqs[i].prompt_len;
        }
    }
    struct assay_workload *c = workload_new(n, tokens);
    if (c == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    memcpy(c->name, w->name, sizeof c->name);
    memcpy(c->description, w->description, sizeof c->description);
    memcpy(c->lengths, w->lengths, sizeof c->lengths);
    memcpy(c->arrivals, w->arrivals, sizeof c->arrivals);
    int32_t *tok = c->token_store;
    int32_t j = 0;
    for (int32_t i = 0; i < w->n; i++) {
        if (keep != NULL && !keep[i]) {
            continue;
        }
        c->reqs[j] = w->reqs[i];
        c->reqs[j].prompt = tok;
        memcpy(tok, w->reqs[i].prompt, sizeof(int32_t) * (size_t)w->reqs[i].prompt_len);
        tok += w->reqs[i].prompt_len;
        j++;
    }
    *out = c;
    return ASSAY_OK;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

void assay_workload_summarize(const struct assay_workload *w, struct assay_workload_summary *s)
{
    memset(s, 0, sizeof *s);
    s->n = w->n;
    if (w->n == 0) {
        return;
    }
    int32_t *v = assay_calloc((size_t)w->n, sizeof(int32_t));
    if (v == NULL) {
        return;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t i = 0; i < w->n; i++) {
            v[i] = pass == 0 ? w->reqs[i].prompt_len : w->reqs[i].max_tokens;
        }
        qsort(v, (size_t)w->n, sizeof(int32_t), cmp_i32);
        int32_t p50 = v[(w->n - 1) / 2], p90 = v[(int32_t)ceil(0.9 * w->n) - 1];
        if (pass == 0) {
            s->prompt_min = v[0];
            s->prompt_p50 = p50;
            s->prompt_p90 = p90;
            s->prompt_max = v[w->n - 1];
        } else {
            s->output_min = v[0];
            s->output_p50 = p50;
            s->output_p90 = p90;
            s->output_max = v[w->n - 1];
        }
    }
    assay_free(v);
    s->duration_s = w->reqs[w->n - 1].arrival_s;
    s->offered_rate = s->duration_s > 0 ? (w->n - 1) / s->duration_s : 0.0;
}
