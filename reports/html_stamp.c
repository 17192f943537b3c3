/*
 * html_stamp.c - the "Stamp" section of the HTML report (html_parts.h):
 * what produced the figures. One row a part (the code, the engine, the
 * model, the numerics, the machine, the libraries, the compiler, the
 * seeds, the verification run), then every field of the stamp in a
 * <details> closed by default, each (name, value) once: the stamp holds
 * some facts twice (the model's parameter count and weights' hash under
 * engine.model and engine.model.config; an option and the parameter it
 * sets), and a reader needs each once.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "html_parts.h"
#include "schema.h"
#include "text.h"

/* The (leaf name, value) pairs already shown in the full table. */
#define STAMP_SEEN_MAX 512
struct seen {
    char key[64];
    char value[200];
};
struct seen_set {
    struct seen *items; /* (STAMP_SEEN_MAX) */
    int n;
    int n_left_out;
};

/* A scalar or an array of scalars as text, for comparing and showing. */
static void value_text(const cJSON *item, char *buf, size_t size)
{
    buf[0] = '\0';
    if (cJSON_IsString(item)) {
        snprintf(buf, size, "%s", item->valuestring);
    } else if (cJSON_IsNumber(item)) {
        snprintf(buf, size, "%.17g", item->valuedouble);
    } else if (cJSON_IsBool(item)) {
        snprintf(buf, size, "%s", cJSON_IsTrue(item) ? "true" : "false");
    } else if (cJSON_IsNull(item)) {
        snprintf(buf, size, "null");
    } else if (cJSON_IsArray(item)) {
        size_t n = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, item)
        {
            char one[128];
            value_text(e, one, sizeof one);
            n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s%s", n > 0 ? ", " : "", one);
            if (n >= size) {
                break;
            }
        }
    }
}

/* Whether (key, value) was shown already; remembers it when not. */
static bool seen_before(struct seen_set *s, const char *key, const char *value)
{
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->items[i].key, key) == 0 &&
            strncmp(s->items[i].value, value, sizeof s->items[i].value - 1) == 0) {
            return true;
        }
    }
    if (s->n < STAMP_SEEN_MAX) {
        snprintf(s->items[s->n].key, sizeof s->items[0].key, "%s", key);
        snprintf(s->items[s->n].value, sizeof s->items[0].value, "%.*s",
                 (int)sizeof s->items[0].value - 1, value);
        s->n++;
    }
    return false;
}

static void flat_rows(struct assay_text *t, const cJSON *o, const char *prefix, struct seen_set *s)
{
    const cJSON *item;
    cJSON_ArrayForEach(item, o)
    {
        char key[256];
        snprintf(key, sizeof key, "%s%s%s", prefix, prefix[0] != '\0' ? "." : "",
                 item->string != NULL ? item->string : "");
        if (cJSON_IsObject(item)) {
            flat_rows(t, item, key, s);
            continue;
        }
        char value[1024];
        value_text(item, value, sizeof value);
        if (seen_before(s, item->string != NULL ? item->string : "", value)) {
            s->n_left_out++;
            continue;
        }
        assay_text_puts(t, "<tr><td><code>");
        assay_html_esc(t, key);
        assay_text_puts(t, "</code></td><td>");
        if (cJSON_IsNull(item)) {
            assay_text_puts(t, "<span class=\"muted\">null</span>");
        } else {
            assay_html_esc(t, value);
        }
        assay_text_puts(t, "</td></tr>\n");
    }
}

/* One row of the summary: a header and what follows, written by the
 * caller between row_open and row_close. */
static void row_open(struct assay_text *t, const char *name)
{
    assay_text_printf(t, "<tr><th>%s</th><td>", name);
}

static void row_close(struct assay_text *t)
{
    assay_text_puts(t, "</td></tr>\n");
}

/* ", LABEL VALUE" for a member that exists. */
static void part(struct assay_text *t, const cJSON *o, const char *path, const char *before,
                 const char *after)
{
    const cJSON *v = assay_json_path(o, path);
    if (v == NULL || cJSON_IsNull(v)) {
        return;
    }
    char text[1024];
    value_text(v, text, sizeof text);
    assay_text_puts(t, before);
    assay_html_esc(t, text);
    assay_text_puts(t, after);
}

static void code(struct assay_text *t, const char *s)
{
    assay_text_puts(t, "<code>");
    assay_html_esc(t, s);
    assay_text_puts(t, "</code>");
}

static void summary(struct assay_text *t, const cJSON *r, const cJSON *stamp)
{
    assay_text_puts(t, "<table class=\"stamp-summary\">\n");
    row_open(t, "Code");
    part(t, stamp, "assay.version", "assay ", "");
    assay_text_puts(t, ", commit ");
    code(t, assay_json_str(stamp, "assay.git_commit", "unknown"));
    int dirty = assay_json_bool(stamp, "assay.git_dirty");
    double changed = assay_json_num(stamp, "assay.git_changed_paths");
    if (dirty == 1) {
        assay_text_printf(t, " (dirty tree%s", isfinite(changed) && changed >= 0 ? ", " : ")");
        if (isfinite(changed) && changed >= 0) {
            assay_text_printf(t, "%g paths changed)", changed);
        }
    } else if (dirty == 0) {
        assay_text_puts(t, " (clean)");
    }
    part(t, stamp, "assay.build_type", ", ", " build");
    assay_text_puts(t, "; sources ");
    code(t, assay_json_str(stamp, "assay.source_sha256", "?"));
    part(t, stamp, "assay.source_files", " (", " files)");
    row_close(t);
    if (cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(stamp, "engine"))) {
        row_open(t, "Engine");
        code(t, assay_json_str(stamp, "engine.spec", "?"));
        part(t, stamp, "engine.name", " (", ")");
        row_close(t);
        const cJSON *m = assay_json_path(stamp, "engine.model");
        if (cJSON_IsObject(m)) {
            row_open(t, "Model");
            part(t, m, "name", "", "");
            part(t, m, "n_params", ", ", " parameters");
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "config");
            if (cJSON_IsObject(c)) {
                part(t, c, "arch", " (", "");
                part(t, c, "n_layer", ", ", " layers");
                part(t, c, "d_model", ", d_model ", "");
                part(t, c, "n_head", ", ", " heads");
                part(t, c, "n_kv_head", " (", " KV)");
                part(t, c, "vocab", ", vocabulary ", "");
                part(t, c, "n_ctx", ", context ", "");
                part(t, c, "tensor_types", ", ", "");
                assay_text_puts(t, ")");
            }
            assay_text_puts(t, "; weights sha256 ");
            code(t, assay_json_str(m, "weights_sha256", "?"));
            row_close(t);
        }
        const cJSON *nu = assay_json_path(stamp, "engine.numerics");
        if (cJSON_IsObject(nu)) {
            row_open(t, "Numerics");
            part(t, nu, "products", "products: ", "");
            part(t, nu, "attention", "; attention and SwiGLU: ", "");
            assay_text_puts(t, assay_json_bool(nu, "batch_invariant") == 1 ? "; batch invariant"
                                                                            : "; not batch invariant");
            row_close(t);
        }
    }
    row_open(t, "Machine");
    part(t, stamp, "hardware.cpu_model", "", "");
    part(t, stamp, "hardware.cores_available", ", ", " cores available");
    part(t, stamp, "hardware.cores_online", " (", " online)");
    part(t, stamp, "hardware.arch", ", ", "");
    part(t, stamp, "hardware.kernel", ", ", "");
    part(t, stamp, "hardware.flags", "; flags ", "");
    row_close(t);
    row_open(t, "Libraries");
    part(t, stamp, "libraries.gsl.version", "GSL ", "");
    part(t, stamp, "libraries.openblas.config", "; ", "");
    part(t, stamp, "libraries.openblas.core", ", core ", "");
    part(t, stamp, "libraries.openblas.threads", ", ", " threads");
    part(t, stamp, "libraries.openblas.note", " (", ")");
    part(t, stamp, "libraries.cjson", "; cJSON ", "");
    part(t, stamp, "libraries.curl", "; ", "");
    part(t, stamp, "libraries.libc", "; ", "");
    row_close(t);
    row_open(t, "Compiler");
    part(t, stamp, "compiler.id", "", "");
    part(t, stamp, "compiler.version", " ", "");
    assay_text_puts(t, ", ");
    code(t, assay_json_str(stamp, "compiler.flags", ""));
    row_close(t);
    row_open(t, "Seeds");
    const cJSON *seed;
    int k = 0;
    cJSON_ArrayForEach(seed, cJSON_GetObjectItemCaseSensitive(stamp, "seeds"))
    {
        char v[64];
        value_text(seed, v, sizeof v);
        assay_text_puts(t, k++ > 0 ? ", " : "");
        assay_html_esc(t, seed->string != NULL ? seed->string : "");
        assay_text_puts(t, " ");
        assay_html_esc(t, v);
    }
    assay_text_puts(t, k == 0 ? "none" : "");
    row_close(t);
    const cJSON *verify = cJSON_GetObjectItemCaseSensitive(r, "verify");
    if (cJSON_IsObject(verify)) {
        row_open(t, "Checks run on");
        code(t, assay_json_str(verify, "base_spec", ""));
        part(t, verify, "master_seed", ", master seed ", "");
        part(t, verify, "checks_run", ", ", "");
        part(t, verify, "plan_size", " of the plan's ", " checks");
        row_close(t);
    }
    row_open(t, "Stamped");
    assay_html_esc(t, assay_json_str(stamp, "time_utc", ""));
    row_close(t);
    assay_text_puts(t, "</table>\n");
}

void assay_html_stamp(struct assay_text *t, const cJSON *r)
{
    const cJSON *stamp = cJSON_GetObjectItemCaseSensitive(r, "stamp");
    assay_text_puts(t, "<section id=\"stamp\"><h2>Stamp</h2>\n<p class=\"para\">What produced "
                       "these figures: the code (its git commit and a content hash of every "
                       "source that built the binary), the engine and every option, the model and "
                       "its weights, the machine, the libraries, the compiler, the seeds and the "
                       "time. A change to any source changes the hash and invalidates the "
                       "figures.</p>\n");
    summary(t, r, stamp);
    struct seen_set s = {assay_calloc(STAMP_SEEN_MAX, sizeof(struct seen)), 0, 0};
    if (s.items == NULL) {
        t->status = ASSAY_ERR_NOMEM; /* sticky, as a failed append's */
        return;
    }
    /* The rows first, to count them for the summary line. */
    struct assay_text rows;
    assay_text_init(&rows);
    flat_rows(&rows, stamp, "", &s);
    const cJSON *verify = cJSON_GetObjectItemCaseSensitive(r, "verify");
    if (cJSON_IsObject(verify)) {
        flat_rows(&rows, verify, "verify", &s);
    }
    assay_text_printf(t,
                      "<details class=\"stamp-all\"><summary>Every field of the stamp (%d, each "
                      "once: %d repeated elsewhere in it left out)</summary>\n<table>\n",
                      s.n, s.n_left_out);
    assay_text_puts(t, rows.data != NULL ? rows.data : "");
    if (rows.status != ASSAY_OK) {
        t->status = rows.status;
    }
    assay_text_release(&rows);
    assay_text_puts(t, "</table></details>\n</section>\n");
    assay_free(s.items);
}
