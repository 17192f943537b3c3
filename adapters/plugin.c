/*
 * plugin.c - engines from shared libraries (plugin.h): assay_plugin_open_spec
 * dlopens PATH, calls its assay_plugin_open with OPTIONS and wraps the
 * adapter it returns, refusing a vtable of another ABI version or without a
 * required slot, so that closing the adapter also closes the library.
 * assay_plugin_check_spec only loads and resolves. Reached through
 * "plugin:PATH[:OPTIONS]" engine specs (spec.c).
 */
#include "plugin.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../core/alloc.h"

/* The adapter handed out: every slot forwards to the plugin's adapter. */
struct plugin {
    struct assay_adapter inner;
    void *dl;
    struct assay_adapter_vtable vt; /* ours: the plugin's slots, wrapped */
    char spec[1024];
};

static enum assay_status p_add(void *self, const struct assay_request *req)
{
    struct plugin *p = self;
    return p->inner.vt->add_request(p->inner.self, req);
}

static bool p_has_work(void *self)
{
    struct plugin *p = self;
    return p->inner.vt->has_work(p->inner.self);
}

static enum assay_status p_step(void *self, const struct assay_event **events, size_t *n)
{
    struct plugin *p = self;
    return p->inner.vt->step(p->inner.self, events, n);
}

static enum assay_status p_abort(void *self, uint64_t id)
{
    struct plugin *p = self;
    return p->inner.vt->abort(p->inner.self, id);
}

/* The plugin's free runs while its code is still mapped; then it goes. */
static void p_free(void *self)
{
    struct plugin *p = self;
    p->inner.vt->free(p->inner.self);
    dlclose(p->dl);
    assay_free(p);
}

static enum assay_status p_info(void *self, struct assay_adapter_info *out)
{
    struct plugin *p = self;
    memset(out, 0, sizeof *out);
    enum assay_status st = ASSAY_OK;
    if (p->inner.vt->info != NULL) {
        st = p->inner.vt->info(p->inner.self, out);
    }
    if (out->name == NULL || out->name[0] == '\0') {
        out->name = p->inner.vt->name != NULL ? p->inner.vt->name : "plugin";
    }
    /* Only assay knows the path the plugin was loaded from. */
    out->spec = p->spec;
    return st;
}

static enum assay_status p_block_stats(void *self, struct assay_block_stats *out)
{
    struct plugin *p = self;
    return p->inner.vt->block_stats(p->inner.self, out);
}

static enum assay_status p_block_audit(void *self, struct assay_block_audit *out)
{
    struct plugin *p = self;
    return p->inner.vt->block_audit(p->inner.self, out);
}

static enum assay_status p_set_sink(void *self, assay_logits_sink sink, void *ctx)
{
    struct plugin *p = self;
    return p->inner.vt->set_logits_sink(p->inner.self, sink, ctx);
}

static enum assay_status p_check(void *self, char *msg, size_t size)
{
    struct plugin *p = self;
    return p->inner.vt->check_invariants(p->inner.self, msg, size);
}

static const char *p_last_error(void *self)
{
    struct plugin *p = self;
    return p->inner.vt->last_error(p->inner.self);
}

static enum assay_status fail(struct assay_diag *diag, const char *file, enum assay_status st,
                              const char *expected, const char *got)
{
    assay_diag_set(diag, file, "plugin", expected, "%s", got);
    return st;
}

/* Split "PATH[:OPTIONS]"; false when the path is empty or too long. */
static bool split(const char *args, char *path, size_t size, const char **options)
{
    const char *colon = strchr(args, ':');
    size_t n = colon != NULL ? (size_t)(colon - args) : strlen(args);
    if (n == 0 || n >= size) {
        return false;
    }
    memcpy(path, args, n);
    path[n] = '\0';
    *options = colon != NULL ? colon + 1 : "";
    return true;
}

/* dlopen the library and find the entry point; on failure nothing stays
 * loaded. */
static enum assay_status load(const char *path, void **dl, assay_plugin_open_fn *entry,
                              struct assay_diag *diag)
{
    *dl = NULL;
    struct stat sb;
    if (strchr(path, '/') != NULL && stat(path, &sb) != 0) {
        return fail(diag, path, ASSAY_ERR_NOT_FOUND, "an existing shared library",
                    strerror(errno));
    }
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *why = dlerror();
        bool missing = strchr(path, '/') == NULL && why != NULL &&
                       strstr(why, "No such file") != NULL;
        return fail(diag, path, missing ? ASSAY_ERR_NOT_FOUND : ASSAY_ERR_IO,
                    "a shared library that loads (dlopen)", why != NULL ? why : "dlopen failed");
    }
    dlerror();
    void *sym = dlsym(h, ASSAY_PLUGIN_ENTRY);
    if (sym == NULL) {
        char got[300];
        const char *why = dlerror();
        snprintf(got, sizeof got, "no such symbol (%.240s)", why != NULL ? why : "dlsym");
        dlclose(h);
        return fail(diag, path, ASSAY_ERR_NOT_FOUND,
                    "a library exporting " ASSAY_PLUGIN_ENTRY " (adapters/plugin.h)", got);
    }
    memcpy(entry, &sym, sizeof *entry);
    *dl = h;
    return ASSAY_OK;
}

enum assay_status assay_plugin_check_spec(const char *args, struct assay_diag *diag)
{
    char path[1024];
    const char *options = NULL;
    if (args == NULL || !split(args, path, sizeof path, &options)) {
        return fail(diag, "", ASSAY_ERR_INVALID, "plugin:PATH[:OPTIONS] with a path",
                    args != NULL ? args : "nothing");
    }
    void *dl = NULL;
    assay_plugin_open_fn entry = NULL;
    enum assay_status st = load(path, &dl, &entry, diag);
    if (st == ASSAY_OK) {
        dlclose(dl);
    }
    return st;
}

enum assay_status assay_plugin_open_spec(const char *args, struct assay_adapter *out,
                                         struct assay_diag *diag)
{
    out->vt = NULL;
    out->self = NULL;
    char path[1024];
    const char *options = NULL;
    if (args == NULL || !split(args, path, sizeof path, &options)) {
        return fail(diag, "", ASSAY_ERR_INVALID, "plugin:PATH[:OPTIONS] with a path",
                    args != NULL ? args : "nothing");
    }
    struct plugin *p = assay_calloc(1, sizeof *p);
    if (p == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    snprintf(p->spec, sizeof p->spec, "plugin:%s", args);
    assay_plugin_open_fn entry = NULL;
    enum assay_status st = load(path, &p->dl, &entry, diag);
    if (st != ASSAY_OK) {
        assay_free(p);
        return st;
    }
    char err[512] = "";
    st = entry(options, &p->inner, err, sizeof err);
    err[sizeof err - 1] = '\0';
    if (st != ASSAY_OK) {
        char got[700];
        snprintf(got, sizeof got, "%s: %s", assay_status_str(st),
                 err[0] != '\0' ? err : "(the plugin said nothing more)");
        assay_diag_set(diag, path, "plugin options", "options the plugin accepts", "%s", got);
        dlclose(p->dl);
        assay_free(p);
        return st;
    }
    const struct assay_adapter_vtable *vt = p->inner.vt;
    const char *missing = NULL;
    if (vt == NULL) {
        missing = "the vtable";
    } else if (vt->abi_version != ASSAY_ADAPTER_ABI_VERSION) {
        char got[96], expected[128];
        snprintf(got, sizeof got, "a plugin built for adapter ABI version %u",
                 (unsigned)vt->abi_version);
        snprintf(expected, sizeof expected,
                 "adapter ABI version %d (rebuild the plugin against this assay's headers)",
                 ASSAY_ADAPTER_ABI_VERSION);
        /* Its vtable is not laid out as ours: calling its free could jump
         * anywhere. Leak the engine and keep the library mapped (a thread
         * of the plugin may still run in it) rather than guess. */
        assay_free(p);
        return fail(diag, path, ASSAY_ERR_UNSUPPORTED, expected, got);
    } else if (vt->add_request == NULL) {
        missing = "add_request";
    } else if (vt->has_work == NULL) {
        missing = "has_work";
    } else if (vt->step == NULL) {
        missing = "step";
    } else if (vt->abort == NULL) {
        missing = "abort";
    } else if (vt->free == NULL) {
        missing = "free";
    }
    if (missing != NULL) {
        char got[96];
        snprintf(got, sizeof got, "a vtable without %s", missing);
        if (vt != NULL && vt->free != NULL) {
            vt->free(p->inner.self);
        }
        dlclose(p->dl);
        assay_free(p);
        return fail(diag, path, ASSAY_ERR_UNSUPPORTED,
                    "every required slot (add_request, has_work, step, abort, free)", got);
    }
    p->vt = (struct assay_adapter_vtable){
        .abi_version = ASSAY_ADAPTER_ABI_VERSION,
        .name = vt->name != NULL ? vt->name : "plugin",
        .add_request = p_add,
        .has_work = p_has_work,
        .step = p_step,
        .abort = p_abort,
        .free = p_free,
        .info = p_info,
        .block_stats = vt->block_stats != NULL ? p_block_stats : NULL,
        .block_audit = vt->block_audit != NULL ? p_block_audit : NULL,
        .set_logits_sink = vt->set_logits_sink != NULL ? p_set_sink : NULL,
        .check_invariants = vt->check_invariants != NULL ? p_check : NULL,
        .last_error = vt->last_error != NULL ? p_last_error : NULL,
    };
    out->vt = &p->vt;
    out->self = p;
    return ASSAY_OK;
}
