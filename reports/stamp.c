/*
 * stamp.c - the stamp every result carries (stamp.h): assay_stamp_create
 * gathers the build (version, git state, source hash: assay_build_facts_get),
 * the engine and its numerics (assay_stamp_engine), the hardware from
 * /proc/cpuinfo, the libraries, the number of MPI ranks and the time, and
 * assay_stamp_validate checks a stamp when a report is read. The commands
 * that write a report (run, bench, audit, compare) stamp it here.
 */
#include "../checks/shard.h"
#include "stamp.h"

#include <cblas.h>
#include <gnu/libc-version.h>
#include <gsl/gsl_version.h>
#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "../adapters/bundled.h"
#include "../core/blas.h"
#include "../core/clock.h"
#include "../engine/engine.h"
#include "../engine/model.h"
#include "assay_build_config.h"
#include "assay_git_info.h"
#include "assay_source_hash.h"
#include "schema.h"

#if ASSAY_CURL_LINKED
#include <curl/curl.h>
#include "../core/json_out.h"
#endif

extern char **environ;

void assay_build_facts_get(struct assay_build_facts *out)
{
    out->version = ASSAY_VERSION_STRING;
    out->git_commit = ASSAY_GIT_COMMIT;
    out->git_dirty = ASSAY_GIT_DIRTY;
    out->git_changed_paths = ASSAY_GIT_CHANGED_PATHS;
    out->source_sha256 = ASSAY_SOURCE_SHA256;
    out->source_files = ASSAY_SOURCE_FILES;
    out->build_type = ASSAY_BUILD_TYPE;
    out->compiler_id = ASSAY_COMPILER_ID;
    out->compiler_version = ASSAY_COMPILER_VERSION;
    out->compiler_path = ASSAY_COMPILER_PATH;
    out->compile_flags = ASSAY_COMPILE_FLAGS;
    out->cmocka_version = ASSAY_CMOCKA_BUILD_VERSION;
    out->curl_linked = ASSAY_CURL_LINKED;
}

/* ---- small builders: each returns false when memory ran out ------------ */

/* -1 unknown (null), 0 false, 1 true. */
static bool add_tristate(cJSON *o, const char *key, int v)
{
    if (v < 0) {
        return cJSON_AddNullToObject(o, key) != NULL;
    }
    return assay_json_add_bool(o, key, v != 0);
}

static cJSON *add_obj(cJSON *o, const char *key)
{
    return cJSON_AddObjectToObject(o, key);
}

/* A uint64 as a JSON number when doubles hold it exactly, else a string. */
static bool add_u64(cJSON *o, const char *key, uint64_t v)
{
    if (v <= ((uint64_t)1 << 53)) {
        return assay_json_add_num(o, key, (double)v);
    }
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return assay_json_add_str(o, key, buf);
}

/* ---- the machine ----------------------------------------------------- */

struct cpuinfo {
    char model[160];
    char flags_line[8192];
    bool have_flags;
};

static void trim_value(const char *line, char *out, size_t size)
{
    const char *colon = strchr(line, ':');
    const char *v = colon != NULL ? colon + 1 : "";
    while (*v == ' ' || *v == '\t') {
        v++;
    }
    snprintf(out, size, "%s", v);
    out[strcspn(out, "\n")] = '\0';
}

static void read_cpuinfo(struct cpuinfo *ci)
{
    snprintf(ci->model, sizeof ci->model, "unknown");
    ci->flags_line[0] = '\0';
    ci->have_flags = false;
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f == NULL) {
        return;
    }
    bool have_model = false;
    char line[8192];
    while (fgets(line, sizeof line, f) != NULL) {
        /* x86: "model name"; arm64: "Hardware" or "Model" or "CPU part". */
        if (!have_model && (strncmp(line, "model name", 10) == 0 || strncmp(line, "Hardware", 8) == 0 ||
                            strncmp(line, "Model\t", 6) == 0)) {
            trim_value(line, ci->model, sizeof ci->model);
            have_model = true;
        }
        if (!ci->have_flags && (strncmp(line, "flags", 5) == 0 || strncmp(line, "Features", 8) == 0)) {
            trim_value(line, ci->flags_line, sizeof ci->flags_line);
            ci->have_flags = true;
        }
        if (have_model && ci->have_flags) {
            break;
        }
    }
    fclose(f);
}

static bool has_word(const char *line, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = line; (p = strstr(p, word)) != NULL; p += n) {
        bool start = p == line || p[-1] == ' ' || p[-1] == '\t';
        bool end = p[n] == '\0' || p[n] == ' ' || p[n] == '\t';
        if (start && end) {
            return true;
        }
    }
    return false;
}

static bool add_hardware(cJSON *root)
{
    /* The flags that decide which kernels run (x86 SIMD, AMX; arm NEON/SVE). */
    static const char *const interesting[] = {
        "sse4_2",      "avx",        "avx2",        "fma",         "f16c",       "avx512f",
        "avx512cd",    "avx512bw",   "avx512dq",    "avx512vl",    "avx512_vnni", "avx512_bf16",
        "avx512_fp16", "avx_vnni",   "amx_tile",    "amx_bf16",    "amx_int8",   "asimd",
        "asimdhp",     "asimddp",    "sve",         "sve2",        "bf16",       "i8mm",
    };
    struct cpuinfo ci;
    read_cpuinfo(&ci);
    cJSON *hw = add_obj(root, "hardware");
    if (hw == NULL || !assay_json_add_str(hw, "cpu_model", ci.model)) {
        return false;
    }
    struct utsname un;
    bool have_uname = uname(&un) == 0;
    char kernel[400];
    snprintf(kernel, sizeof kernel, "%s %s", have_uname ? un.sysname : "unknown",
             have_uname ? un.release : "");
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    CPU_ZERO(&set);
    long available = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : online;
    if (!assay_json_add_str(hw, "arch", have_uname ? un.machine : "unknown") ||
        !assay_json_add_num(hw, "cores_online", (double)online) ||
        !assay_json_add_num(hw, "cores_available", (double)available) || !assay_json_add_str(hw, "kernel", kernel)) {
        return false;
    }
    cJSON *flags = cJSON_AddArrayToObject(hw, "flags");
    if (flags == NULL) {
        return false;
    }
    for (size_t i = 0; i < sizeof interesting / sizeof interesting[0]; i++) {
        if (has_word(ci.flags_line, interesting[i])) {
            cJSON *s = cJSON_CreateString(interesting[i]);
            if (s == NULL || !cJSON_AddItemToArray(flags, s)) {
                cJSON_Delete(s);
                return false;
            }
        }
    }
    return true;
}

/* ---- libraries -------------------------------------------------------- */

static bool add_libraries(cJSON *root, const struct assay_build_facts *bf)
{
    cJSON *lib = add_obj(root, "libraries");
    if (lib == NULL) {
        return false;
    }
    cJSON *gsl = add_obj(lib, "gsl");
    if (gsl == NULL || !assay_json_add_str(gsl, "version", gsl_version) ||
        !assay_json_add_str(gsl, "build_version", GSL_VERSION)) {
        return false;
    }
    struct assay_blas_info bi;
    assay_blas_get_info(&bi);
    char note[256];
    if (bi.overridden) {
        snprintf(note, sizeof note,
                 "assay set OPENBLAS_CORETYPE=%s: OpenBLAS had chosen the generic %s kernel for "
                 "this CPU",
                 bi.core, bi.detected);
    } else if (bi.user_set) {
        snprintf(note, sizeof note, "OPENBLAS_CORETYPE was set by the user");
    } else {
        snprintf(note, sizeof note, "OpenBLAS's own choice of kernel");
    }
    if (!bi.sgemm_is_openblas) {
        size_t used = strlen(note);
        snprintf(note + used, sizeof note - used,
                 "; WARNING: cblas_sgemm is not served by OpenBLAS");
    }
    cJSON *ob = add_obj(lib, "openblas");
    if (ob == NULL || !assay_json_add_str(ob, "config", bi.config) || !assay_json_add_str(ob, "core", bi.core) ||
        !assay_json_add_str(ob, "detected", bi.overridden ? bi.detected : bi.core) ||
        !assay_json_add_num(ob, "threads", bi.threads) || !assay_json_add_bool(ob, "overridden", bi.overridden) ||
        !assay_json_add_bool(ob, "user_set", bi.user_set) || !assay_json_add_str(ob, "note", note) ||
        !assay_json_add_str(ob, "sgemm_library", bi.sgemm_library) ||
        !assay_json_add_bool(ob, "sgemm_is_openblas", bi.sgemm_is_openblas)) {
        return false;
    }
    /* Every OPENBLAS_* variable in force: a kernel forced by
     * OPENBLAS_CORETYPE, a cache size told by OPENBLAS_L2_SIZE, a thread
     * count: two reports can be told apart by what computed them. */
    cJSON *env = add_obj(ob, "env");
    if (env == NULL) {
        return false;
    }
    for (char **e = environ; e != NULL && *e != NULL; e++) {
        const char *eq = strchr(*e, '=');
        if (strncmp(*e, "OPENBLAS_", 9) != 0 || eq == NULL) {
            continue;
        }
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        if (!assay_json_add_str(env, name, eq + 1)) {
            return false;
        }
    }
    char cmocka[128];
    snprintf(cmocka, sizeof cmocka, "%s (build time; a test library, not linked into assay)",
             bf->cmocka_version);
#if ASSAY_CURL_LINKED
    const char *curl = curl_version();
#else
    const char *curl = "not linked";
#endif
    char libc[64];
    snprintf(libc, sizeof libc, "glibc %s", gnu_get_libc_version());
    return assay_json_add_str(lib, "cjson", cJSON_Version()) && assay_json_add_str(lib, "cmocka", cmocka) &&
           assay_json_add_str(lib, "curl", curl) && assay_json_add_str(lib, "libc", libc);
}

/* ---- the engine -------------------------------------------------------- */

/* "bundled:model=tinygpt,kv=paged" -> {"model": "tinygpt", "kv": "paged"};
 * "openai:http://h:1/x,model=m" -> {"url": "http://h:1/x", "model": "m"}. */
static bool add_spec_options(cJSON *o, const char *spec)
{
    cJSON *opts = add_obj(o, "options");
    if (opts == NULL) {
        return false;
    }
    const char *colon = strchr(spec, ':');
    if (colon == NULL) {
        return true;
    }
    bool is_url = strncmp(spec, "openai:", 7) == 0;
    const char *p = colon + 1;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        char item[512];
        snprintf(item, sizeof item, "%.*s", (int)(n < sizeof item ? n : sizeof item - 1), p);
        char *eq = strchr(item, '=');
        bool ok;
        if (is_url && p == colon + 1) {
            ok = assay_json_add_str(opts, "url", item);
        } else if (eq != NULL) {
            *eq = '\0';
            ok = cJSON_GetObjectItemCaseSensitive(opts, item) != NULL || assay_json_add_str(opts, item, eq + 1);
        } else {
            ok = assay_json_add_str(opts, item, "");
        }
        if (!ok) {
            return false;
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    return true;
}

static bool add_model_config(cJSON *o, const char *key, const struct assay_model *m)
{
    if (m == NULL) {
        return cJSON_AddNullToObject(o, key) != NULL;
    }
    const struct assay_model_config *c = &m->cfg;
    cJSON *mc = add_obj(o, key);
    return mc != NULL && assay_json_add_str(mc, "name", c->name) &&
           assay_json_add_str(mc, "arch", assay_arch_name(c->arch)) &&
           assay_json_add_num(mc, "n_layer", c->n_layer) &&
           assay_json_add_num(mc, "d_model", c->d_model) &&
           assay_json_add_num(mc, "n_head", c->n_head) &&
           assay_json_add_num(mc, "n_kv_head", c->n_kv_head) &&
           assay_json_add_num(mc, "head_dim", c->head_dim) &&
           assay_json_add_num(mc, "d_ff", c->d_ff) && assay_json_add_num(mc, "vocab", c->vocab) &&
           assay_json_add_num(mc, "n_ctx", c->n_ctx) &&
           assay_json_add_num(mc, "norm_eps", (double)c->norm_eps) &&
           assay_json_add_num(mc, "rope_theta", (double)c->rope_theta) &&
           assay_json_add_num(mc, "rope_scale", (double)c->rope_scale) &&
           assay_json_add_bool(mc, "rope_freqs", c->rope_freqs) &&
           assay_json_add_bool(mc, "qkv_bias", c->qkv_bias) &&
           assay_json_add_bool(mc, "tied", m->tied) &&
           assay_json_add_str(mc, "tensor_types", m->tensor_types) &&
           assay_json_add_num(mc, "n_params", (double)m->n_floats) &&
           assay_json_add_str(mc, "weights_sha256", m->sha256);
}

static bool add_engine_params(cJSON *o, const struct assay_engine_params *p)
{
    cJSON *ep = add_obj(o, "params");
    return ep != NULL && assay_json_add_bool(ep, "kv_cache", p->kv_cache) &&
           assay_json_add_bool(ep, "batching", p->batching) && assay_json_add_bool(ep, "paged", p->paged) &&
           assay_json_add_bool(ep, "prefix_cache", p->prefix_cache) &&
           assay_json_add_num(ep, "block_size", p->block_size) && assay_json_add_num(ep, "n_blocks", p->n_blocks) &&
           assay_json_add_num(ep, "chunk", p->chunk) && assay_json_add_num(ep, "spec_k", p->spec_k) &&
           assay_json_add_num(ep, "max_batch", p->max_batch) && assay_json_add_num(ep, "max_requests", p->max_requests) &&
           assay_json_add_num(ep, "max_seq_len", p->max_seq_len) &&
           assay_json_add_num(ep, "max_step_tokens", p->max_step_tokens) &&
           assay_json_add_bool(ep, "batch_invariant", p->batch_invariant) &&
           assay_json_add_num(ep, "blas_rows", p->blas_rows) &&
           assay_json_add_str(ep, "isa", assay_isa_name(p->isa)) &&
           assay_json_add_str(ep, "act", assay_numerics_mode_name(p->act)) &&
           assay_json_add_str(ep, "kv_type", assay_numerics_kv_name(p->kv_type)) &&
           assay_json_add_bool(ep, "flash_attn", p->flash_attn) &&
           assay_json_add_num(ep, "threads", p->threads) &&
           assay_json_add_str(ep, "sampling_order",
                   p->sampling_order == ASSAY_SAMPLING_JOINT ? "joint" : "sequential") &&
           add_u64(ep, "seed", p->seed) && assay_json_add_num(ep, "mutant", p->mutant);
}

/*
 * What computes the bundled engine's numbers: which path each product
 * takes (the engine's own fixed-order product and its instruction set, or
 * OpenBLAS and its kernel), and the copy of attention and SwiGLU.
 */
static bool add_numerics(cJSON *o, const struct assay_engine *engine)
{
    struct assay_engine_numerics n;
    assay_engine_get_numerics(engine, &n);
    struct assay_blas_info bi;
    assay_blas_get_info(&bi);
    char own[96], products[320];
    snprintf(own, sizeof own, "assay-gemm %s (%s)", n.isa,
             strcmp(n.isa, "generic") == 0 ? "4-wide, multiply then add"
                                          : "fused multiply-add, one chain per element");
    /* n.blas_rows is 0 when no product reaches OpenBLAS (batch invariant too) */
    if (n.blas_rows == 0) {
        snprintf(products, sizeof products, "%s for every product", own);
    } else if (n.blas_rows == 1) {
        snprintf(products, sizeof products, "OpenBLAS %s for every product", bi.core);
    } else {
        snprintf(products, sizeof products, "%s below %d rows, OpenBLAS %s from %d rows", own,
                 (int)n.blas_rows, bi.core, (int)n.blas_rows);
    }
    bool any_blas = n.blas_rows > 0;
    bool any_own = n.blas_rows != 1;
    cJSON *nu = add_obj(o, "numerics");
    return nu != NULL && assay_json_add_bool(nu, "batch_invariant", n.batch_invariant) &&
           assay_json_add_str(nu, "products", products) &&
           (any_own ? assay_json_add_str(nu, "own_products", n.isa)
                    : cJSON_AddNullToObject(nu, "own_products") != NULL) &&
           (any_blas ? assay_json_add_num(nu, "blas_rows", n.blas_rows)
                     : cJSON_AddNullToObject(nu, "blas_rows") != NULL) &&
           (any_blas ? assay_json_add_str(nu, "openblas_core", bi.core)
                     : cJSON_AddNullToObject(nu, "openblas_core") != NULL) &&
           assay_json_add_str(nu, "isa", n.isa) &&
           assay_json_add_str(nu, "attention", n.attention) &&
           assay_json_add_str(nu, "act", n.act) && assay_json_add_str(nu, "kv_type", n.kv_type) &&
           assay_json_add_bool(nu, "flash_attn", n.flash_attn) &&
           assay_json_add_num(nu, "matrices", n.matrices) &&
           assay_json_add_num(nu, "quantized_matrices", n.quantized);
}

enum assay_status assay_stamp_engine(const struct assay_adapter *adapter, cJSON **out)
{
    *out = NULL;
    struct assay_adapter_info info;
    assay_adapter_get_info(adapter, &info);
    cJSON *e = cJSON_CreateObject();
    bool ok = e != NULL && assay_json_add_str(e, "name", info.name) && assay_json_add_str(e, "spec", info.spec) &&
              add_spec_options(e, info.spec != NULL ? info.spec : "");
    const struct assay_engine *engine = assay_bundled_engine(adapter);
    const struct assay_engine_params *p = engine != NULL ? assay_engine_params(engine) : NULL;
    if (ok && p != NULL) {
        ok = add_engine_params(e, p) && add_numerics(e, engine);
    } else if (ok) {
        ok = cJSON_AddNullToObject(e, "params") != NULL &&
             cJSON_AddNullToObject(e, "numerics") != NULL;
    }
    cJSON *model = ok ? add_obj(e, "model") : NULL;
    ok = model != NULL && assay_json_add_str(model, "name", info.model_name) &&
         assay_json_add_num(model, "n_params", info.n_params > 0 ? (double)info.n_params : NAN) &&
         assay_json_add_str(model, "weights_sha256", info.weights_sha256) &&
         add_model_config(model, "config", p != NULL ? p->model : NULL) &&
         add_model_config(model, "draft", p != NULL && p->spec_k > 0 ? p->draft : NULL);
    if (!ok) {
        cJSON_Delete(e);
        return ASSAY_ERR_NOMEM;
    }
    *out = e;
    return ASSAY_OK;
}

enum assay_status assay_stamp_create(const struct assay_adapter *adapter,
                                     const struct assay_stamp_seed *seeds, size_t n_seeds,
                                     cJSON **out)
{
    *out = NULL;
    struct assay_build_facts bf;
    assay_build_facts_get(&bf);
    cJSON *root = cJSON_CreateObject();
    cJSON *a = NULL, *comp = NULL, *sd = NULL;
    bool ok = root != NULL && assay_json_add_str(root, "format", "assay-stamp") &&
              assay_json_add_num(root, "version", ASSAY_STAMP_VERSION) && (a = add_obj(root, "assay")) != NULL &&
              assay_json_add_str(a, "version", bf.version) && assay_json_add_str(a, "git_commit", bf.git_commit) &&
              add_tristate(a, "git_dirty", bf.git_dirty) &&
              assay_json_add_num(a, "git_changed_paths", bf.git_changed_paths >= 0 ? bf.git_changed_paths : NAN) &&
              assay_json_add_str(a, "source_sha256", bf.source_sha256) &&
              assay_json_add_num(a, "source_files", bf.source_files) && assay_json_add_str(a, "build_type", bf.build_type);
    if (ok && adapter != NULL && adapter->vt != NULL) {
        cJSON *e = NULL;
        ok = assay_stamp_engine(adapter, &e) == ASSAY_OK;
        if (ok && !cJSON_AddItemToObject(root, "engine", e)) {
            cJSON_Delete(e);
            ok = false;
        }
    } else if (ok) {
        ok = cJSON_AddNullToObject(root, "engine") != NULL;
    }
    ok = ok && add_hardware(root) && add_libraries(root, &bf) &&
         (comp = add_obj(root, "compiler")) != NULL && assay_json_add_str(comp, "id", bf.compiler_id) &&
         assay_json_add_str(comp, "version", bf.compiler_version) && assay_json_add_str(comp, "path", bf.compiler_path) &&
         assay_json_add_str(comp, "flags", bf.compile_flags) && (sd = add_obj(root, "seeds")) != NULL;
    for (size_t i = 0; ok && i < n_seeds; i++) {
        ok = add_u64(sd, seeds[i].name, seeds[i].value);
    }
    /* How many MPI ranks shared the checks (checks/shard.h); the hardware
     * above is rank 0's. */
    ok = ok && cJSON_AddNumberToObject(root, "ranks", (double)assay_shard_world_size()) != NULL;
    char when[40];
    ok = ok && assay_json_add_str(root, "time_utc", assay_utc_iso8601(when, sizeof when));
    if (!ok) {
        cJSON_Delete(root);
        return ASSAY_ERR_NOMEM;
    }
    *out = root;
    return ASSAY_OK;
}

enum assay_status assay_stamp_validate(const cJSON *stamp, const char *prefix,
                                       struct assay_diag *diag)
{
    enum { S = ASSAY_JSON_STRING, N = ASSAY_JSON_NUMBER, B = ASSAY_JSON_BOOL,
           O = ASSAY_JSON_OBJECT, A = ASSAY_JSON_ARRAY, Z = ASSAY_JSON_NULL };
    static const struct assay_json_field fields[] = {
        {"format", S},
        {"version", N},
        {"assay", O},
        {"assay.version", S},
        {"assay.git_commit", S},
        {"assay.git_dirty", B | Z},
        {"assay.git_changed_paths", N | Z},
        {"assay.source_sha256", S},
        {"assay.source_files", N},
        {"assay.build_type", S},
        {"engine", O | Z},
        {"hardware", O},
        {"hardware.cpu_model", S},
        {"hardware.arch", S},
        {"hardware.cores_online", N},
        {"hardware.cores_available", N},
        {"hardware.flags", A},
        {"hardware.kernel", S},
        {"libraries", O},
        {"libraries.gsl.version", S},
        {"libraries.gsl.build_version", S},
        {"libraries.openblas.config", S},
        {"libraries.openblas.core", S},
        {"libraries.openblas.detected", S},
        {"libraries.openblas.threads", N},
        {"libraries.openblas.overridden", B},
        {"libraries.openblas.user_set", B},
        {"libraries.openblas.note", S},
        {"libraries.openblas.sgemm_library", S},
        {"libraries.openblas.sgemm_is_openblas", B},
        {"libraries.cjson", S},
        {"libraries.cmocka", S},
        {"libraries.curl", S},
        {"libraries.libc", S},
        {"compiler", O},
        {"compiler.id", S},
        {"compiler.version", S},
        {"compiler.path", S},
        {"compiler.flags", S},
        {"seeds", O},
        {"time_utc", S},
    };
    static const struct assay_json_field engine_fields[] = {
        {"name", S},
        {"spec", S},
        {"options", O},
        {"params", O | Z},
        {"model", O},
        {"model.name", S},
        {"model.n_params", N | Z},
        {"model.weights_sha256", S},
        {"model.config", O | Z},
        {"model.draft", O | Z},
    };
    enum assay_status st =
        assay_json_require(stamp, prefix, fields, sizeof fields / sizeof fields[0], diag);
    if (st != ASSAY_OK) {
        return st;
    }
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(stamp, "format");
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(stamp, "version");
    char where[160];
    if (strcmp(format->valuestring, "assay-stamp") != 0) {
        snprintf(where, sizeof where, "%s%sformat", prefix != NULL ? prefix : "",
                 prefix != NULL && prefix[0] != '\0' ? "." : "");
        assay_diag_set(diag, NULL, where, "\"assay-stamp\"", "\"%.200s\"", format->valuestring);
        return ASSAY_ERR_PARSE;
    }
    if (version->valuedouble != ASSAY_STAMP_VERSION) {
        snprintf(where, sizeof where, "%s%sversion", prefix != NULL ? prefix : "",
                 prefix != NULL && prefix[0] != '\0' ? "." : "");
        assay_diag_set(diag, NULL, where, "1", "%g", version->valuedouble);
        return ASSAY_ERR_PARSE;
    }
    /* Fields added within version 1: absent from older reports, typed when
     * present. */
    const cJSON *ob = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(stamp, "libraries"), "openblas");
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(ob, "env");
    if (env != NULL && !cJSON_IsObject(env)) {
        snprintf(where, sizeof where, "%s%slibraries.openblas.env", prefix != NULL ? prefix : "",
                 prefix != NULL && prefix[0] != '\0' ? "." : "");
        assay_diag_set(diag, NULL, where, "an object", "another JSON type");
        return ASSAY_ERR_PARSE;
    }
    const cJSON *engine = cJSON_GetObjectItemCaseSensitive(stamp, "engine");
    if (cJSON_IsObject(engine)) {
        snprintf(where, sizeof where, "%s%sengine", prefix != NULL ? prefix : "",
                 prefix != NULL && prefix[0] != '\0' ? "." : "");
        st = assay_json_require(engine, where, engine_fields,
                                sizeof engine_fields / sizeof engine_fields[0], diag);
        const cJSON *nu = cJSON_GetObjectItemCaseSensitive(engine, "numerics");
        if (st == ASSAY_OK && nu != NULL && !cJSON_IsObject(nu) && !cJSON_IsNull(nu)) {
            snprintf(where, sizeof where, "%s%sengine.numerics", prefix != NULL ? prefix : "",
                     prefix != NULL && prefix[0] != '\0' ? "." : "");
            assay_diag_set(diag, NULL, where, "an object or null", "another JSON type");
            return ASSAY_ERR_PARSE;
        }
    }
    return st;
}
