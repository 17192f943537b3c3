/*
 * shrink.c - minimal reproducers (shrink.h): assay_shrink drops requests,
 * collapses arrivals, drops aborts, bisects the pool and cuts prompts and
 * max_tokens while the same plan item, rerun through assay_run_plan_item,
 * still fails, within a run and time budget; then writes the shrunk workload
 * and the command that reruns it. cli/ and pairwise.c call it for a failing
 * check; assay_shrink_format_sizes describes the result.
 */
#include "shrink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../adapters/bundled.h"
#include "../adapters/spec.h"
#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/workload.h"

struct shrinker {
    struct assay_verify_ctx *ctx;
    const struct assay_plan_item *item;
    char spec[512];              /* the current full engine spec */
    struct assay_workload *w;    /* the current failing workload */
    int32_t blocks, block_size;  /* the current pool; blocks 0: not paged */
    char try_path[1200];
    int32_t n_runs, max_runs;
    int64_t deadline_ns;
    bool budget_reached;
    struct assay_check_result last; /* the latest failing result */
};

static bool budget_left(struct shrinker *s)
{
    if (s->n_runs >= s->max_runs || assay_now_ns() >= s->deadline_ns) {
        s->budget_reached = true;
        return false;
    }
    return true;
}

/* Run the check on a candidate. *fails: it gave FAIL; then the candidate's
 * result is kept. */
static enum assay_status try_case(struct shrinker *s, const struct assay_workload *w,
                                  const char *spec, const char *path, bool *fails)
{
    *fails = false;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_workload_save(w, path, &diag);
    if (st != ASSAY_OK) {
        return st;
    }
    struct assay_check_result r;
    st = assay_run_plan_item(s->ctx, s->item, spec, path, &r);
    s->n_runs++;
    if (st != ASSAY_OK) {
        return st;
    }
    *fails = r.verdict == ASSAY_VERDICT_FAIL;
    if (*fails) {
        s->last = r;
    }
    return ASSAY_OK;
}

/* Keep cand (it fails) as the current case, or free it. */
static enum assay_status try_workload(struct shrinker *s, struct assay_workload *cand, bool *kept)
{
    bool fails = false;
    enum assay_status st = try_case(s, cand, s->spec, s->try_path, &fails);
    *kept = st == ASSAY_OK && fails;
    if (*kept) {
        assay_workload_free(s->w);
        s->w = cand;
    } else {
        assay_workload_free(cand);
    }
    return st;
}

static int32_t blocks_needed(const struct assay_workload *w, int32_t block_size)
{
    int32_t need = 1;
    for (int32_t i = 0; i < w->n; i++) {
        int64_t len = (int64_t)w->reqs[i].prompt_len + w->reqs[i].max_tokens;
        int32_t b = (int32_t)((len + block_size - 1) / block_size);
        need = b > need ? b : need;
    }
    return need;
}

static void size_of(const struct assay_workload *w, int32_t blocks, struct assay_shrink_size *z)
{
    memset(z, 0, sizeof *z);
    z->n_requests = w->n;
    for (int32_t i = 0; i < w->n; i++) {
        z->prompt_tokens += w->reqs[i].prompt_len;
        z->max_tokens += w->reqs[i].max_tokens;
    }
    z->blocks = blocks;
}

/* Drop requests, delta-debugging style: remove each of `parts` chunks in
 * turn; on success keep the smaller case, else refine the chunks. */
static enum assay_status drop_requests(struct shrinker *s, bool *changed)
{
    int32_t parts = 2;
    while (s->w->n > 1 && budget_left(s)) {
        int32_t n = s->w->n;
        parts = parts < n ? parts : n;
        int32_t chunk = (n + parts - 1) / parts;
        bool progress = false;
        uint8_t *keep = assay_malloc((size_t)n);
        if (keep == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        for (int32_t start = 0; start < n && !progress && budget_left(s); start += chunk) {
            for (int32_t i = 0; i < n; i++) {
                keep[i] = i < start || i >= start + chunk;
            }
            if (start == 0 && chunk >= n) {
                continue;
            }
            struct assay_workload *cand = NULL;
            enum assay_status st = assay_workload_subset(s->w, keep, &cand);
            if (st == ASSAY_OK) {
                st = try_workload(s, cand, &progress);
            }
            if (st != ASSAY_OK) {
                assay_free(keep);
                return st;
            }
        }
        assay_free(keep);
        if (progress) {
            *changed = true;
            parts = parts > 2 ? parts - 1 : 2;
        } else if (parts >= n) {
            break;
        } else {
            parts = 2 * parts < n ? 2 * parts : n;
        }
    }
    return ASSAY_OK;
}

/* One edit of every request at once (arrivals to 0, aborts off). */
enum whole_edit { EDIT_ARRIVALS, EDIT_ABORTS };

static enum assay_status edit_all(struct shrinker *s, enum whole_edit what, bool *changed)
{
    bool needed = false;
    for (int32_t i = 0; i < s->w->n; i++) {
        const struct assay_workload_request *r = &s->w->reqs[i];
        needed |= what == EDIT_ARRIVALS ? (r->arrival_step != 0 || r->arrival_s != 0.0)
                                        : assay_workload_request_aborts(r);
    }
    if (!needed || !budget_left(s)) {
        return ASSAY_OK;
    }
    struct assay_workload *cand = NULL;
    enum assay_status st = assay_workload_subset(s->w, NULL, &cand);
    if (st != ASSAY_OK) {
        return st;
    }
    for (int32_t i = 0; i < cand->n; i++) {
        if (what == EDIT_ARRIVALS) {
            cand->reqs[i].arrival_step = 0;
            cand->reqs[i].arrival_s = 0.0;
        } else {
            cand->reqs[i].abort_after = -1;
            cand->reqs[i].abort_step = -1;
        }
    }
    bool kept = false;
    st = try_workload(s, cand, &kept);
    *changed |= kept;
    return st;
}

/* The smallest value in [lo, cur] for which field i still fails, by
 * bisection (lo tried first: often it is enough). */
enum field { FIELD_PROMPT, FIELD_MAX_TOKENS };

static enum assay_status try_field(struct shrinker *s, int32_t i, enum field f, int32_t v,
                                   bool *kept)
{
    struct assay_workload *cand = NULL;
    enum assay_status st = assay_workload_subset(s->w, NULL, &cand);
    if (st != ASSAY_OK) {
        return st;
    }
    if (f == FIELD_PROMPT) {
        cand->reqs[i].prompt_len = v; /* its shortest prefix */
    } else {
        cand->reqs[i].max_tokens = v;
    }
    return try_workload(s, cand, kept);
}

static enum assay_status shrink_field(struct shrinker *s, enum field f, bool *changed)
{
    for (int32_t i = 0; i < s->w->n && budget_left(s); i++) {
        int32_t cur = f == FIELD_PROMPT ? s->w->reqs[i].prompt_len : s->w->reqs[i].max_tokens;
        int32_t lo = 1;
        if (cur <= lo) {
            continue;
        }
        bool kept = false;
        enum assay_status st = try_field(s, i, f, lo, &kept);
        if (st != ASSAY_OK) {
            return st;
        }
        if (kept) {
            *changed = true;
            continue;
        }
        /* lo passes, cur fails: bisect between them */
        while (cur - lo > 1 && budget_left(s)) {
            int32_t mid = lo + (cur - lo) / 2;
            st = try_field(s, i, f, mid, &kept);
            if (st != ASSAY_OK) {
                return st;
            }
            if (kept) {
                cur = mid;
                *changed = true;
            } else {
                lo = mid;
            }
        }
    }
    return ASSAY_OK;
}

static void spec_with_blocks(const struct shrinker *s, int32_t blocks, char *buf, size_t size)
{
    char v[32];
    snprintf(v, sizeof v, "%d", (int)blocks);
    assay_spec_with(s->spec, "blocks", v, buf, size);
}

/* Whether the item lets the base spec set the pool: the spec it would run
 * on states the candidate's blocks. */
static bool pool_follows_base(const struct shrinker *s, int32_t blocks)
{
    char base[512], eff[1024], want[40];
    spec_with_blocks(s, blocks, base, sizeof base);
    assay_plan_engine_spec(s->item, base, eff, sizeof eff);
    snprintf(want, sizeof want, "blocks=%d", (int)blocks);
    for (const char *p = strstr(eff, want); p != NULL; p = strstr(p + 1, want)) {
        char before = p == eff ? ',' : p[-1];
        char after = p[strlen(want)];
        if ((before == ',' || before == ':') && (after == ',' || after == '\0')) {
            return true;
        }
    }
    return false;
}

static enum assay_status shrink_pool(struct shrinker *s, bool *changed)
{
    if (s->blocks <= 0) {
        return ASSAY_OK;
    }
    /* cur fails; lo does not (or the engine would reject the workload) */
    int32_t lo = blocks_needed(s->w, s->block_size) - 1, cur = s->blocks;
    bool first = true;
    while (cur - lo > 1 && budget_left(s)) {
        /* the smallest possible pool first (often enough), then bisection */
        int32_t mid = first ? lo + 1 : lo + (cur - lo) / 2;
        first = false;
        char cand[512];
        spec_with_blocks(s, mid, cand, sizeof cand);
        bool fails = false;
        enum assay_status st = try_case(s, s->w, cand, s->try_path, &fails);
        if (st != ASSAY_OK) {
            return st;
        }
        if (fails) {
            snprintf(s->spec, sizeof s->spec, "%s", cand);
            s->blocks = cur = mid;
            *changed = true;
        } else {
            lo = mid;
        }
    }
    return ASSAY_OK;
}

/* The pool the spec gives: blocks and block size of the engine it opens. */
static enum assay_status read_engine(const char *spec, struct assay_workload_limits *lim,
                                     int32_t *blocks, int32_t *block_size, char *why, size_t size)
{
    struct assay_adapter a;
    struct assay_diag diag;
    assay_diag_clear(&diag);
    enum assay_status st = assay_adapter_open_spec(spec, &a, &diag);
    if (st != ASSAY_OK) {
        char d[700];
        snprintf(why, size, "engine: %s: %s", assay_status_str(st),
                 assay_diag_format(&diag, d, sizeof d));
        return st;
    }
    struct assay_adapter_info info;
    assay_adapter_get_info(&a, &info);
    lim->vocab = info.vocab;
    lim->max_seq_len = info.n_ctx;
    lim->max_requests = 0;
    *blocks = 0;
    *block_size = 1;
    struct assay_engine *e = assay_bundled_engine(&a);
    if (e != NULL) {
        const struct assay_engine_params *p = assay_engine_params(e);
        lim->max_requests = p->max_requests;
        if (p->paged) {
            *blocks = p->n_blocks;
            *block_size = p->block_size;
        }
    } else if (a.vt->block_stats != NULL) {
        struct assay_block_stats bs;
        if (a.vt->block_stats(a.self, &bs) == ASSAY_OK) {
            *blocks = bs.total;
            *block_size = bs.block_size;
        }
    }
    assay_adapter_close(&a);
    return ASSAY_OK;
}

char *assay_shrink_format_sizes(const struct assay_shrink_result *r, char *buf, size_t size)
{
    snprintf(buf, size,
             "requests %d -> %d, prompt tokens %lld -> %lld, max_tokens %lld -> %lld, blocks %d "
             "-> %d%s",
             (int)r->before.n_requests, (int)r->after.n_requests, (long long)r->before.prompt_tokens,
             (long long)r->after.prompt_tokens, (long long)r->before.max_tokens,
             (long long)r->after.max_tokens, (int)r->before.blocks, (int)r->after.blocks,
             r->pool_fixed ? " (the check fixes its pool)" : "");
    return buf;
}

enum assay_status assay_shrink(struct assay_verify_ctx *ctx, const struct assay_plan_item *item,
                               const char *base_spec, const char *workload_override,
                               const struct assay_shrink_opts *opts,
                               struct assay_shrink_result *out)
{
    memset(out, 0, sizeof *out);
    if (opts == NULL || opts->out_dir == NULL || item == NULL || base_spec == NULL) {
        return ASSAY_ERR_INVALID;
    }
    int64_t t0 = assay_now_ns();
    struct shrinker s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    s.item = item;
    s.max_runs = opts->max_runs > 0 ? opts->max_runs : ASSAY_SHRINK_MAX_RUNS;
    double max_s = opts->max_seconds > 0 ? opts->max_seconds : ASSAY_SHRINK_MAX_SECONDS;
    s.deadline_ns = t0 + (int64_t)(max_s * 1e9);
    char stem[256], final_path[1000];
    snprintf(stem, sizeof stem, "%s", opts->stem != NULL ? opts->stem : "");
    if (stem[0] == '\0') {
        snprintf(stem, sizeof stem, "repro-%s", item->name);
    }
    snprintf(s.try_path, sizeof s.try_path, "%.700s/%.200s.try.json", opts->out_dir, stem);
    snprintf(final_path, sizeof final_path, "%.700s/%.200s.json", opts->out_dir, stem);

    /* The original case, as the plan runs it. */
    struct assay_check_result r0;
    enum assay_status st = assay_run_plan_item(ctx, item, base_spec, workload_override, &r0);
    s.n_runs = 1;
    if (st != ASSAY_OK) {
        return st;
    }
    snprintf(out->engine, sizeof out->engine, "%s", r0.engine);
    snprintf(out->command, sizeof out->command, "%s", r0.repro);
    snprintf(out->failure, sizeof out->failure, "%s", r0.failure);
    out->reproduced = r0.verdict == ASSAY_VERDICT_FAIL;
    out->n_runs = 1;
    if (!out->reproduced || (item->workload == NULL && workload_override == NULL)) {
        out->seconds = (double)(assay_now_ns() - t0) / 1e9;
        return ASSAY_OK;
    }
    out->shrinkable = true;
    snprintf(s.spec, sizeof s.spec, "%s", r0.engine);
    s.last = r0;

    struct assay_workload_limits lim;
    char why[800] = "";
    st = read_engine(s.spec, &lim, &s.blocks, &s.block_size, why, sizeof why);
    if (st == ASSAY_OK) {
        char path[1400];
        if (workload_override != NULL) {
            snprintf(path, sizeof path, "%s", workload_override);
        } else {
            snprintf(path, sizeof path, "%s/%s", assay_verify_fixtures(ctx), item->workload);
        }
        struct assay_diag diag;
        assay_diag_clear(&diag);
        st = assay_workload_load(path, &lim, &s.w, &diag);
        if (st != ASSAY_OK) {
            char d[700];
            snprintf(why, sizeof why, "workload: %s", assay_diag_format(&diag, d, sizeof d));
        }
    }
    if (st != ASSAY_OK) {
        out->shrinkable = false;
        snprintf(out->failure, sizeof out->failure, "cannot shrink: %.600s", why);
        return assay_status_keep_nomem(st);
    }
    size_of(s.w, s.blocks, &out->before);
    if (s.blocks > 0 && !pool_follows_base(&s, s.blocks > 1 ? s.blocks - 1 : 1)) {
        out->pool_fixed = true;
        s.blocks = -s.blocks; /* leave the pool alone */
    }

    bool changed = true;
    for (int round = 0; changed && st == ASSAY_OK && budget_left(&s); round++) {
        changed = false;
        st = drop_requests(&s, &changed);
        if (st == ASSAY_OK && round == 0) {
            st = edit_all(&s, EDIT_ARRIVALS, &changed);
        }
        if (st == ASSAY_OK && round == 0) {
            st = edit_all(&s, EDIT_ABORTS, &changed);
        }
        if (st == ASSAY_OK) {
            st = shrink_pool(&s, &changed);
        }
        if (st == ASSAY_OK) {
            st = shrink_field(&s, FIELD_PROMPT, &changed);
        }
        if (st == ASSAY_OK) {
            st = shrink_field(&s, FIELD_MAX_TOKENS, &changed);
        }
    }
    if (s.blocks < 0) {
        s.blocks = -s.blocks;
    }
    remove(s.try_path);
    if (st != ASSAY_OK) {
        assay_workload_free(s.w);
        return st;
    }
    out->budget_reached = s.budget_reached;
    size_of(s.w, s.blocks, &out->after);

    /* Write the reproducer and rerun it from its file, as the command will. */
    snprintf(s.w->description, sizeof s.w->description,
             "Shrunk reproducer of a failure of %.60s on %.150s", item->name, s.spec);
    struct assay_diag diag;
    assay_diag_clear(&diag);
    st = assay_workload_save(s.w, final_path, &diag);
    assay_workload_free(s.w);
    if (st != ASSAY_OK) {
        char d[700];
        snprintf(out->failure, sizeof out->failure, "cannot write the reproducer: %s",
                 assay_diag_format(&diag, d, sizeof d));
        return st;
    }
    snprintf(out->workload, sizeof out->workload, "%s", final_path);
    struct assay_check_result rf;
    st = assay_run_plan_item(ctx, item, s.spec, final_path, &rf);
    s.n_runs++;
    if (st != ASSAY_OK) {
        return st;
    }
    out->confirmed = rf.verdict == ASSAY_VERDICT_FAIL;
    snprintf(out->engine, sizeof out->engine, "%s", rf.engine);
    snprintf(out->command, sizeof out->command, "%s", rf.repro);
    snprintf(out->failure, sizeof out->failure, "%s",
             out->confirmed ? rf.failure : s.last.failure);
    out->n_runs = s.n_runs;
    out->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return ASSAY_OK;
}
