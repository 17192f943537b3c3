/*
 * alloc.c - the allocation hook (alloc.h): assay_malloc, assay_calloc,
 * assay_realloc, assay_free and assay_strdup call the process-wide hooks,
 * which default to the C library's. assay_alloc_set_hooks replaces them (a
 * test failing the k-th allocation) and routes cJSON through them too.
 * Zero-byte requests ask for one byte, so NULL always means failure.
 * assay_wipe clears memory in a way the compiler may not elide.
 */
#include "alloc.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

static void *default_malloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

static void *default_realloc(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    return realloc(ptr, size);
}

static void default_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

static struct assay_alloc_hooks g_hooks = {default_malloc, default_realloc, default_free, NULL};

static void *cjson_malloc(size_t size)
{
    return assay_malloc(size);
}

void assay_alloc_set_hooks(const struct assay_alloc_hooks *hooks)
{
    if (hooks == NULL) {
        g_hooks = (struct assay_alloc_hooks){default_malloc, default_realloc, default_free, NULL};
    } else {
        g_hooks = *hooks;
    }
    cJSON_Hooks cj = {cjson_malloc, assay_free};
    cJSON_InitHooks(&cj);
}

void *assay_malloc(size_t size)
{
    return g_hooks.malloc_fn(g_hooks.ctx, size == 0 ? 1 : size);
}

void *assay_calloc(size_t n, size_t size)
{
    if (size != 0 && n > ((size_t)-1) / size) {
        return NULL;
    }
    size_t total = n * size;
    if (g_hooks.malloc_fn == default_malloc) {
        /* The C library's own: a large block comes zeroed from the
         * kernel, and its pages are not touched until they are used. */
        return calloc(1, total == 0 ? 1 : total);
    }
    void *p = assay_malloc(total);
    if (p != NULL) {
        memset(p, 0, total == 0 ? 1 : total);
    }
    return p;
}

void *assay_realloc(void *ptr, size_t size)
{
    return g_hooks.realloc_fn(g_hooks.ctx, ptr, size == 0 ? 1 : size);
}

void assay_free(void *ptr)
{
    if (ptr != NULL) {
        g_hooks.free_fn(g_hooks.ctx, ptr);
    }
}

char *assay_strdup(const char *s)
{
    if (s == NULL) {
        return NULL;
    }
    size_t n = strlen(s) + 1;
    char *d = assay_malloc(n);
    if (d != NULL) {
        memcpy(d, s, n);
    }
    return d;
}

void assay_wipe(void *p, size_t n)
{
    volatile unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        c[i] = 0;
    }
}
