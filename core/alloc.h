/*
 * alloc.h - the one replaceable allocation hook.
 *
 * All of assay's allocations go through assay_malloc / assay_calloc /
 * assay_realloc / assay_free, so a test can replace the allocator (for
 * example to fail the k-th allocation and check every error path). The hooks
 * are process-wide: set them before starting any work and not while another
 * thread allocates. cJSON is routed through the same hooks by
 * assay_alloc_set_hooks.
 */
#ifndef ASSAY_ALLOC_H
#define ASSAY_ALLOC_H

#include <stddef.h>

struct assay_alloc_hooks {
    void *(*malloc_fn)(void *ctx, size_t size);
    void *(*realloc_fn)(void *ctx, void *ptr, size_t size);
    void (*free_fn)(void *ctx, void *ptr);
    void *ctx;
};

/* Install hooks (copied); NULL restores the C library's allocator. */
void assay_alloc_set_hooks(const struct assay_alloc_hooks *hooks);

/* Like malloc; a size of 0 allocates 1 byte. Returns NULL on failure. */
void *assay_malloc(size_t size);

/* Like calloc, with overflow of n * size reported as failure (NULL). */
void *assay_calloc(size_t n, size_t size);

/* Like realloc; on failure returns NULL and leaves ptr allocated. */
void *assay_realloc(void *ptr, size_t size);

/* Like free; NULL is a no-op. */
void assay_free(void *ptr);

/* Zero n bytes at p in a way the compiler keeps even when p is freed next
 * (an API key, a header that held one). */
void assay_wipe(void *p, size_t n);

/* A NUL-terminated copy of s (NULL in, NULL out); free with assay_free. */
char *assay_strdup(const char *s);

#endif
