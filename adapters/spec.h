/*
 * spec.h - engine specs: one string names an engine, the same way in every
 * command, test and reproducer.
 *
 *   bundled[:key=value,...]   the bundled engine (keys in README "Engine specs":
 *                             model, seed, kv, block, blocks, prefix, chunk,
 *                             batch, spec, draft, draft_seed, invariant, order,
 *                             requests, max_seq_len, step_tokens, rng_seed, mutant)
 *   openai:URL[,key=value,...]  an OpenAI-compatible server (adapters/openai.h:
 *                             model, api=completion|v1, timeout_ms, stall_ms,
 *                             logprobs, vocab, ctx, eos, cache_prompt, requests;
 *                             the API key only from ASSAY_API_KEY(_FILE))
 *   plugin:PATH[:OPTIONS]     a shared library exporting assay_plugin_open
 *                             (adapters/plugin.h); OPTIONS go to the plugin
 *
 * Defaults follow assay_engine_default_params, except that prefix caching
 * and chunked prefill default to off where kv makes them impossible.
 */
#ifndef ASSAY_SPEC_H
#define ASSAY_SPEC_H

#include "../engine/engine.h"
#include "adapter.h"

/* Open the engine named by spec. On failure *out is cleared and diag names
 * the key and what was expected (ASSAY_ERR_INVALID), or the file that could
 * not be loaded. */
enum assay_status assay_adapter_open_spec(const char *spec, struct assay_adapter *out,
                                          struct assay_diag *diag);

/* Models built for specs, kept so that the many engines of one run share a
 * single copy of each (model, seed): building TinyGPT's weights and their
 * hash costs more than most checks. The cache must outlive every adapter
 * opened with it. Lifetime: assay_model_cache_init / assay_model_cache_free. */
struct assay_model_cache;
enum assay_status assay_model_cache_init(struct assay_model_cache **out);
void assay_model_cache_free(struct assay_model_cache *cache);

/* Lend cache a model already loaded from the file at path (resident, as a
 * bundled spec's model= loads it), so that engines whose spec names that
 * path use it instead of loading the file again. The cache does not free
 * it: the model must outlive the cache. ASSAY_OK, or ASSAY_ERR_NOMEM;
 * ASSAY_ERR_INVALID for a NULL argument or a mapped model. */
enum assay_status assay_model_cache_lend(struct assay_model_cache *cache, const char *path,
                                         const struct assay_model *model);

/* assay_adapter_open_spec, with models taken from (and added to) cache; a
 * NULL cache behaves like assay_adapter_open_spec. */
enum assay_status assay_adapter_open_spec_cached(const char *spec, struct assay_model_cache *cache,
                                                 struct assay_adapter *out,
                                                 struct assay_diag *diag);

/* Load the models a bundled spec names into cache, without opening an
 * engine, so that engines opened later (in child processes too) find them
 * there; *model_out is the target model (borrowed from cache), NULL for
 * other specs and a NULL cache, which do nothing. Returns ASSAY_OK, or why
 * a model could not be loaded (diag says which). */
enum assay_status assay_model_cache_warm(struct assay_model_cache *cache, const char *spec,
                                         const struct assay_model **model_out,
                                         struct assay_diag *diag);

/* Load into cache the files a bundled spec names, its model= and draft=
 * (whether or not the spec speculates), so that a file that cannot be read
 * is known before any engine opens; built-in models and derived drafts
 * are left to the engines that use them. ASSAY_OK for other specs and a
 * NULL cache; else why, diag saying which file and what was expected. */
enum assay_status assay_model_cache_load_files(struct assay_model_cache *cache, const char *spec,
                                               struct assay_diag *diag);

/* Check a spec's syntax and values without opening anything (no model is
 * loaded, no connection made). diag says what is wrong. */
enum assay_status assay_spec_check(const char *spec, struct assay_diag *diag);

/* A spec with one key set or replaced: "bundled:kv=off" + ("chunk", "8")
 * gives "bundled:kv=off,chunk=8". Writes into buf (truncated to size). */
char *assay_spec_with(const char *spec, const char *key, const char *value, char *buf,
                      size_t size);

#endif
