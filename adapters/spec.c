/*
 * spec.c - engine specs (spec.h): parsing "bundled:...", "openai:..." and
 * "plugin:..." and opening the adapter each names (assay_adapter_open_spec,
 * _open_spec_cached), checking a spec without opening it (assay_spec_check),
 * and setting one key (assay_spec_with). The model cache
 * (assay_model_cache_*) keeps the weights a bundled spec loads so several
 * checks share them. Every command, check and reproducer names engines here.
 */
#include "spec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/mutant.h"
#include "bundled.h"
#include "openai.h"
#include "plugin.h"
#include "spec_value.h"

struct bundled_spec {
    char model[256];
    char draft[256];
    long long seed, draft_seed;
    struct assay_engine_params p;
    bool prefix_set, chunk_set, blocks_set;
};

static enum assay_status set_key(struct bundled_spec *b, const char *key, const char *v,
                                 struct assay_diag *diag)
{
    long long x = 0;
    enum assay_status st = ASSAY_OK;
    struct assay_engine_params *p = &b->p;
    if (strcmp(key, "model") == 0) {
        snprintf(b->model, sizeof b->model, "%s", v);
    } else if (strcmp(key, "draft") == 0) {
        snprintf(b->draft, sizeof b->draft, "%s", v);
    } else if (strcmp(key, "seed") == 0) {
        st = assay_spec_int(diag, key, v, 1, (1LL << 53), &b->seed);
    } else if (strcmp(key, "draft_seed") == 0) {
        st = assay_spec_int(diag, key, v, 1, (1LL << 53), &b->draft_seed);
    } else if (strcmp(key, "rng_seed") == 0) {
        st = assay_spec_int(diag, key, v, 0, (1LL << 53), &x);
        p->seed = (uint64_t)x;
    } else if (strcmp(key, "kv") == 0) {
        if (strcmp(v, "paged") == 0 || strcmp(v, "on") == 0) {
            p->kv_cache = true;
            p->paged = true;
        } else if (strcmp(v, "contiguous") == 0) {
            p->kv_cache = true;
            p->paged = false;
        } else if (strcmp(v, "off") == 0) {
            p->kv_cache = false;
        } else {
            st = assay_spec_bad(diag, key, "paged, contiguous or off", v);
        }
    } else if (strcmp(key, "block") == 0) {
        st = assay_spec_int(diag, key, v, 1, 1024, &x);
        p->block_size = (int32_t)x;
    } else if (strcmp(key, "blocks") == 0) {
        st = assay_spec_int(diag, key, v, 1, 1 << 26, &x);
        p->n_blocks = (int32_t)x;
        b->blocks_set = true;
    } else if (strcmp(key, "prefix") == 0) {
        st = assay_spec_onoff(diag, key, v, &p->prefix_cache);
        b->prefix_set = true;
    } else if (strcmp(key, "chunk") == 0) {
        st = assay_spec_int(diag, key, v, 0, 1 << 16, &x);
        p->chunk = (int32_t)x;
        b->chunk_set = true;
    } else if (strcmp(key, "batch") == 0) {
        st = assay_spec_int(diag, key, v, 1, 4096, &x);
        p->batching = x > 1;
        p->max_batch = (int32_t)x;
    } else if (strcmp(key, "spec") == 0) {
        st = assay_spec_int(diag, key, v, 0, 32, &x);
        p->spec_k = (int32_t)x;
    } else if (strcmp(key, "invariant") == 0) {
        st = assay_spec_onoff(diag, key, v, &p->batch_invariant);
    } else if (strcmp(key, "threads") == 0) {
        st = assay_spec_int(diag, key, v, 1, 2, &x);
        p->threads = (int32_t)x;
    } else if (strcmp(key, "blas_rows") == 0) {
        st = assay_spec_int(diag, key, v, 0, 1 << 16, &x);
        p->blas_rows = (int32_t)x;
    } else if (strcmp(key, "isa") == 0) {
        if (assay_isa_by_name(v, &p->isa) != ASSAY_OK) {
            st = assay_spec_bad(diag, key, "auto, generic, avx2 or avx512", v);
        } else if (!assay_isa_supported(p->isa)) {
            st = assay_spec_bad(diag, key, "an instruction set this CPU runs (auto picks one)", v);
        }
    } else if (strcmp(key, "act") == 0) {
        if (strcmp(v, "exact") == 0) {
            p->act = ASSAY_ACT_MODE_EXACT;
        } else if (strcmp(v, "ggml") == 0) {
            p->act = ASSAY_ACT_MODE_GGML;
        } else {
            st = assay_spec_bad(diag, key, "exact or ggml", v);
        }
    } else if (strcmp(key, "kv_type") == 0) {
        if (strcmp(v, "f32") == 0) {
            p->kv_type = ASSAY_KV_TYPE_F32;
        } else if (strcmp(v, "f16") == 0) {
            p->kv_type = ASSAY_KV_TYPE_F16;
        } else {
            st = assay_spec_bad(diag, key, "f32 or f16", v);
        }
    } else if (strcmp(key, "fa") == 0) {
        st = assay_spec_onoff(diag, key, v, &p->flash_attn);
    } else if (strcmp(key, "order") == 0) {
        if (strcmp(v, "joint") == 0) {
            p->sampling_order = ASSAY_SAMPLING_JOINT;
        } else if (strcmp(v, "sequential") == 0) {
            p->sampling_order = ASSAY_SAMPLING_SEQUENTIAL;
        } else {
            st = assay_spec_bad(diag, key, "joint or sequential", v);
        }
    } else if (strcmp(key, "requests") == 0) {
        st = assay_spec_int(diag, key, v, 1, 1 << 20, &x);
        p->max_requests = (int32_t)x;
    } else if (strcmp(key, "max_seq_len") == 0) {
        st = assay_spec_int(diag, key, v, 2, 1 << 20, &x);
        p->max_seq_len = (int32_t)x;
    } else if (strcmp(key, "step_tokens") == 0) {
        st = assay_spec_int(diag, key, v, 1, 1 << 16, &x);
        p->max_step_tokens = (int32_t)x;
    } else if (strcmp(key, "mutant") == 0) {
        enum assay_mutant m = ASSAY_MUTANT_NONE;
        if (assay_mutant_by_name(v, &m) != ASSAY_OK) {
            st = assay_spec_bad(diag, key, "a mutant of the catalog (assay mutants)", v);
        } else if (m != ASSAY_MUTANT_NONE && !assay_mutants_compiled()) {
            /* Said here, where the name is known, rather than by the
             * engine, which only sees the catalog's number. */
            st = assay_spec_bad(diag, key,
                                "no planted bug in this assay (they exist only in the test "
                                "build's assay-mutants, next to assay in build/test)",
                                v);
        }
        p->mutant = (int)m;
    } else {
        st = assay_spec_bad(
            diag, key,
            "one of model, seed, kv, block, blocks, prefix, chunk, batch, spec, draft, "
            "draft_seed, invariant, blas_rows, isa, act, kv_type, fa, threads, order, requests, "
            "max_seq_len, step_tokens, rng_seed, mutant",
            key);
    }
    return st;
}

static bool is_path(const char *v)
{
    size_t n = strlen(v);
    return strchr(v, '/') != NULL || (n > 5 && strcmp(v + n - 5, ".gguf") == 0);
}

static enum assay_status load_model(const char *what, long long seed, struct assay_model **out,
                                    struct assay_diag *diag)
{
    if (is_path(what)) {
        return assay_model_load_gguf(out, what, diag);
    }
    struct assay_model_config cfg;
    if (assay_model_config_by_name(what, &cfg) != ASSAY_OK) {
        char names[200], expected[240];
        assay_model_config_names(names, sizeof names);
        snprintf(expected, sizeof expected, "%s or a .gguf path", names);
        return assay_spec_bad(diag, "model", expected, what);
    }
    return assay_model_init_random(out, &cfg, (uint64_t)seed);
}

static enum assay_status parse_bundled(const char *args, struct bundled_spec *b,
                                       struct assay_diag *diag)
{
    memset(b, 0, sizeof *b);
    snprintf(b->model, sizeof b->model, "tinygpt");
    b->seed = 1;
    b->draft_seed = 2;
    b->p = assay_engine_default_params(NULL);
    b->p.max_seq_len = 0;
    char buf[1024];
    if (strlen(args) >= sizeof buf) {
        return assay_spec_bad(diag, "", "a spec shorter than 1024 characters", "a longer one");
    }
    snprintf(buf, sizeof buf, "%s", args);
    enum assay_status st = ASSAY_OK;
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv != NULL && st == ASSAY_OK;
         kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (eq == NULL || eq == kv || eq[1] == '\0') {
            return assay_spec_bad(diag, kv, "key=value", kv);
        }
        *eq = '\0';
        st = set_key(b, kv, eq + 1, diag);
    }
    if (st != ASSAY_OK) {
        return st;
    }
    if (!b->prefix_set && (!b->p.paged || !b->p.kv_cache)) {
        b->p.prefix_cache = false;
    }
    if (!b->chunk_set && !b->p.kv_cache) {
        b->p.chunk = 0;
    }
    if (!b->blocks_set && b->p.block_size != 16) {
        b->p.n_blocks = b->p.max_batch * 512 / b->p.block_size + 1;
    }
    return ASSAY_OK;
}

struct cache_entry {
    char key[600]; /* what#seed, or a derived draft's near:NOISE@what#seed#draft_seed */
    struct assay_model *model;
    bool lent; /* assay_model_cache_lend's: not the cache's to free */
};

struct assay_model_cache {
    struct cache_entry *entries;
    int32_t n, cap;
};

enum assay_status assay_model_cache_init(struct assay_model_cache **out)
{
    *out = assay_calloc(1, sizeof **out);
    return *out != NULL ? ASSAY_OK : ASSAY_ERR_NOMEM;
}

void assay_model_cache_free(struct assay_model_cache *c)
{
    if (c == NULL) {
        return;
    }
    for (int32_t i = 0; i < c->n; i++) {
        if (!c->entries[i].lent) {
            assay_model_free(c->entries[i].model);
        }
    }
    assay_free(c->entries);
    assay_free(c);
}

/* The cached model under key, or NULL. */
static struct assay_model *cache_find(const struct assay_model_cache *c, const char *key)
{
    for (int32_t i = 0; i < c->n; i++) {
        if (strcmp(c->entries[i].key, key) == 0) {
            return c->entries[i].model;
        }
    }
    return NULL;
}

/* Room for one more entry: ASSAY_OK or ASSAY_ERR_NOMEM. */
static enum assay_status cache_reserve(struct assay_model_cache *c)
{
    if (c->n == c->cap) {
        int32_t cap = c->cap > 0 ? 2 * c->cap : 8;
        struct cache_entry *grown = assay_realloc(c->entries, sizeof *grown * (size_t)cap);
        if (grown == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        c->entries = grown;
        c->cap = cap;
    }
    return ASSAY_OK;
}

/* Keep model under key; lent: the caller's, never freed by the cache.
 * Otherwise the cache owns it from now on, also on failure. */
static enum assay_status cache_put(struct assay_model_cache *c, const char *key,
                                   struct assay_model *model, bool lent)
{
    if (cache_reserve(c) != ASSAY_OK) {
        if (!lent) {
            assay_model_free(model);
        }
        return ASSAY_ERR_NOMEM;
    }
    snprintf(c->entries[c->n].key, sizeof c->entries[c->n].key, "%s", key);
    c->entries[c->n].model = model;
    c->entries[c->n].lent = lent;
    c->n++;
    return ASSAY_OK;
}

/* A model from the cache (borrowed) or, without a cache, a new one (owned
 * by the caller). */
static enum assay_status get_model(struct assay_model_cache *c, const char *what, long long seed,
                                   struct assay_model **out, struct assay_diag *diag)
{
    if (c == NULL) {
        return load_model(what, seed, out, diag);
    }
    char key[300];
    snprintf(key, sizeof key, "%s#%lld", what, is_path(what) ? 0LL : seed);
    *out = cache_find(c, key);
    if (*out != NULL) {
        return ASSAY_OK;
    }
    enum assay_status st = load_model(what, seed, out, diag);
    if (st == ASSAY_OK) {
        st = cache_put(c, key, *out, false);
        *out = st == ASSAY_OK ? *out : NULL;
    }
    return st;
}

enum assay_status assay_model_cache_lend(struct assay_model_cache *cache, const char *path,
                                         const struct assay_model *model)
{
    if (cache == NULL || path == NULL || model == NULL || model->mapped || !is_path(path)) {
        return ASSAY_ERR_INVALID;
    }
    char key[300];
    snprintf(key, sizeof key, "%s#0", path);
    if (cache_find(cache, key) != NULL) {
        return ASSAY_OK;
    }
    /* The engines take their model const; the cast only lets the entry
     * share the cache's type, and a lent entry is never freed. */
    return cache_put(cache, key, (struct assay_model *)model, true);
}

/* draft=near:NOISE: the target's own weights perturbed
 * (assay_model_derive_draft), from the cache or new as get_model's. */
static enum assay_status derive_draft(struct assay_model_cache *c, const struct bundled_spec *b,
                                      const struct assay_model *model, struct assay_model **out,
                                      struct assay_diag *diag)
{
    const char *v = b->draft + 5;
    char *end = NULL;
    errno = 0;
    double noise = strtod(v, &end);
    if (end == v || *end != '\0' || errno != 0 || !(noise >= 0.0 && noise <= 10.0)) {
        return assay_spec_bad(diag, "draft", "near:NOISE with NOISE in [0, 10]", b->draft);
    }
    if (c == NULL) {
        return assay_model_derive_draft(model, noise, (uint64_t)b->draft_seed, out);
    }
    char key[600];
    snprintf(key, sizeof key, "%s@%s#%lld#%lld", b->draft, b->model,
             is_path(b->model) ? 0LL : b->seed, b->draft_seed);
    *out = cache_find(c, key);
    if (*out != NULL) {
        return ASSAY_OK;
    }
    enum assay_status st = assay_model_derive_draft(model, noise, (uint64_t)b->draft_seed, out);
    if (st == ASSAY_OK) {
        st = cache_put(c, key, *out, false);
        *out = st == ASSAY_OK ? *out : NULL;
    }
    return st;
}

/* The model and draft of a parsed bundled spec, from (or into) cache. On
 * failure with a NULL cache, nothing is left to free. */
static enum assay_status bundled_models(const struct bundled_spec *b,
                                        struct assay_model_cache *cache, struct assay_model **model,
                                        struct assay_model **draft, struct assay_diag *diag)
{
    *model = NULL;
    *draft = NULL;
    enum assay_status st = get_model(cache, b->model, b->seed, model, diag);
    if (st == ASSAY_OK && b->p.spec_k > 0) {
        /* Without draft=: a built-in model's own draft, and a model file
         * drafts for itself (no built-in draft shares its vocabulary). */
        bool mini = strncmp(b->model, "mini", 4) == 0 && strcmp(b->model, "mini-draft") != 0;
        const char *dname = b->draft[0] != '\0' ? b->draft
                            : is_path(b->model) ? b->model
                            : mini              ? "mini-draft"
                                                : "draft";
        st = strncmp(dname, "near:", 5) == 0
                 ? derive_draft(cache, b, *model, draft, diag)
                 : get_model(cache, dname, b->draft_seed, draft, diag);
    }
    if (st != ASSAY_OK && cache == NULL) {
        assay_model_free(*model);
        *model = NULL;
    }
    return st;
}

enum assay_status assay_model_cache_warm(struct assay_model_cache *cache, const char *spec,
                                         const struct assay_model **model_out,
                                         struct assay_diag *diag)
{
    *model_out = NULL;
    const char *args = spec != NULL && strcmp(spec, "bundled") == 0         ? ""
                       : spec != NULL && strncmp(spec, "bundled:", 8) == 0 ? spec + 8
                                                                             : NULL;
    if (cache == NULL || args == NULL) {
        return ASSAY_OK;
    }
    struct bundled_spec b;
    enum assay_status st = parse_bundled(args, &b, diag);
    struct assay_model *model = NULL, *draft = NULL;
    if (st == ASSAY_OK) {
        st = bundled_models(&b, cache, &model, &draft, diag);
        *model_out = st == ASSAY_OK ? model : NULL;
    }
    return st;
}

enum assay_status assay_model_cache_load_files(struct assay_model_cache *cache, const char *spec,
                                               struct assay_diag *diag)
{
    const char *args = spec != NULL && strncmp(spec, "bundled:", 8) == 0 ? spec + 8 : NULL;
    if (cache == NULL || args == NULL) {
        return ASSAY_OK;
    }
    struct bundled_spec b;
    struct assay_model *m = NULL;
    enum assay_status st = parse_bundled(args, &b, diag);
    if (st == ASSAY_OK && is_path(b.model)) {
        st = get_model(cache, b.model, b.seed, &m, diag);
    }
    if (st == ASSAY_OK && is_path(b.draft)) {
        st = get_model(cache, b.draft, b.draft_seed, &m, diag);
    }
    return st;
}

static enum assay_status open_bundled(const char *args, struct assay_model_cache *cache,
                                      struct assay_adapter *out, struct assay_diag *diag)
{
    struct bundled_spec b;
    enum assay_status st = parse_bundled(args, &b, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    struct assay_model *model = NULL, *draft = NULL;
    st = bundled_models(&b, cache, &model, &draft, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    b.p.model = model;
    b.p.draft = draft;
    if (b.p.max_seq_len == 0) {
        b.p.max_seq_len = model->cfg.n_ctx;
    }
    st = assay_bundled_open(&b.p, out, diag);
    if (cache == NULL) {
        if (st != ASSAY_OK) {
            assay_model_free(model);
            assay_model_free(draft);
            return st;
        }
        assay_bundled_own_models(out, model, draft);
    }
    return st;
}

enum assay_status assay_adapter_open_spec(const char *spec, struct assay_adapter *out,
                                          struct assay_diag *diag)
{
    return assay_adapter_open_spec_cached(spec, NULL, out, diag);
}

enum assay_status assay_adapter_open_spec_cached(const char *spec, struct assay_model_cache *cache,
                                                 struct assay_adapter *out,
                                                 struct assay_diag *diag)
{
    out->vt = NULL;
    out->self = NULL;
    if (spec == NULL) {
        return assay_spec_bad(diag, "", "an engine spec", "nothing");
    }
    if (strcmp(spec, "bundled") == 0) {
        return open_bundled("", cache, out, diag);
    }
    if (strncmp(spec, "bundled:", 8) == 0) {
        return open_bundled(spec + 8, cache, out, diag);
    }
    if (strncmp(spec, "openai:", 7) == 0) {
        return assay_openai_open_spec(spec + 7, out, diag);
    }
    if (strncmp(spec, "plugin:", 7) == 0) {
        return assay_plugin_open_spec(spec + 7, out, diag);
    }
    return assay_spec_bad(diag, "",
               "an engine spec such as bundled:kv=paged,block=16, openai:URL or plugin:PATH", spec);
}

enum assay_status assay_spec_check(const char *spec, struct assay_diag *diag)
{
    if (spec == NULL) {
        return assay_spec_bad(diag, "", "an engine spec", "nothing");
    }
    struct bundled_spec b;
    if (strcmp(spec, "bundled") == 0) {
        return ASSAY_OK;
    }
    if (strncmp(spec, "bundled:", 8) == 0) {
        return parse_bundled(spec + 8, &b, diag);
    }
    if (strncmp(spec, "openai:", 7) == 0) {
        /* Opening sends nothing; it checks the spec, URL and API key. */
        struct assay_adapter a;
        enum assay_status st = assay_openai_open_spec(spec + 7, &a, diag);
        assay_adapter_close(&a);
        return st;
    }
    if (strncmp(spec, "plugin:", 7) == 0) {
        /* Loads the library and finds its entry point; the options are
         * the plugin's to check when it opens. */
        return assay_plugin_check_spec(spec + 7, diag);
    }
    return assay_spec_bad(diag, "",
               "an engine spec such as bundled:kv=paged,block=16, openai:URL or plugin:PATH", spec);
}

char *assay_spec_with(const char *spec, const char *key, const char *value, char *buf,
                      size_t size)
{
    /* Copy spec, dropping any existing key=..., then append key=value. */
    size_t klen = strlen(key);
    const char *colon = strchr(spec, ':');
    size_t n = 0;
    if (colon == NULL) {
        n = (size_t)snprintf(buf, size, "%s:", spec);
    } else {
        n = (size_t)snprintf(buf, size, "%.*s:", (int)(colon - spec), spec);
        const char *p = colon + 1;
        while (*p != '\0' && n < size) {
            const char *comma = strchr(p, ',');
            size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
            if (!(len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=')) {
                n += (size_t)snprintf(buf + n, size - n, "%.*s,", (int)len, p);
            }
            p += len + (comma != NULL ? 1 : 0);
        }
    }
    if (n < size) {
        snprintf(buf + n, size - n, "%s=%s", key, value);
    }
    return buf;
}
