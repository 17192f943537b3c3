/*
 * plugin.h - engines as shared libraries: a C or C++ engine team plugs its
 * own engine into assay without writing HTTP.
 *
 * A plugin is a shared library (.so) that exports one function,
 *
 *     enum assay_status assay_plugin_open(const char *options,
 *                                         struct assay_adapter *out,
 *                                         char *err, size_t err_size);
 *
 * (ASSAY_PLUGIN_ENTRY, type assay_plugin_open_fn), which builds one engine
 * from `options` (the text after the path in the engine spec, "" when there
 * is none; the plugin defines its syntax) and fills *out with the adapter:
 * a vtable (adapters/adapter.h) whose abi_version is the
 * ASSAY_ADAPTER_ABI_VERSION the plugin was compiled with, and the engine
 * as `self`. On failure it returns an error status (ASSAY_ERR_INVALID for
 * bad options, ASSAY_ERR_NOMEM, ...), writes one line saying why into err
 * (err_size >= 1; always NUL-terminate) and leaves nothing allocated. The
 * function may be called several times in one process (assay compare opens
 * a baseline and a candidate from the same file with different options),
 * so a plugin keeps no global state. Nothing else is needed from assay to
 * be loaded by the assay command: this header, adapter.h and the two core
 * headers they include are the whole contract, and a plugin that links no
 * assay library at all is complete.
 *
 * assay loads a plugin named in an engine spec,
 *
 *     plugin:PATH[:OPTIONS]
 *
 * with dlopen (RTLD_NOW | RTLD_LOCAL: every undefined symbol must resolve
 * at load time, and the plugin's symbols stay its own). PATH ends at the
 * first ':' after "plugin:" (so it cannot contain one); OPTIONS is the rest,
 * verbatim. A PATH with a '/' is that file; a bare name goes through the
 * dynamic linker's search (LD_LIBRARY_PATH, the cache). The adapter that
 * assay_plugin_open_spec returns forwards every slot to the plugin's
 * vtable (a slot the plugin leaves NULL stays NULL, so checks that need it
 * report SKIP), states the full spec in its info, and when freed calls the
 * plugin's free and then dlclose.
 */
#ifndef ASSAY_PLUGIN_H
#define ASSAY_PLUGIN_H

#include <stddef.h>

#ifdef __cplusplus
/* A C++ plugin includes this header as is: the entry point (and the types
 * of the headers below) get C linkage. */
extern "C" {
#endif

#include "../core/status.h"
#include "adapter.h"

/* The name of the one function a plugin exports. */
#define ASSAY_PLUGIN_ENTRY "assay_plugin_open"

/* Its type (see the header comment). */
typedef enum assay_status (*assay_plugin_open_fn)(const char *options, struct assay_adapter *out,
                                                  char *err, size_t err_size);

/* The entry point, as each plugin defines it (assay itself defines none):
 * declared here so that a definition with another signature, or without C
 * linkage, does not compile. */
enum assay_status assay_plugin_open(const char *options, struct assay_adapter *out, char *err,
                                    size_t err_size);

/*
 * Load the plugin named by args (the spec after "plugin:", i.e.
 * "PATH[:OPTIONS]") and open its engine. On success *out is an adapter
 * that owns the library handle (assay_adapter_close frees the engine, then
 * unloads the library). On failure *out is cleared, nothing stays loaded
 * (but after an ABI mismatch: the engine the plugin built cannot be freed
 * through a vtable of another layout, so it is leaked and the library
 * stays mapped), and diag names the file and says what went wrong:
 *   ASSAY_ERR_INVALID      an empty path;
 *   ASSAY_ERR_NOT_FOUND    no such file, or a library without
 *                          assay_plugin_open;
 *   ASSAY_ERR_IO           the file exists but dlopen refused it (not a
 *                          shared library, a missing dependency or
 *                          symbol: dlerror's words);
 *   ASSAY_ERR_UNSUPPORTED  the plugin was built for another adapter ABI
 *                          version, or its vtable lacks a required slot;
 *   ASSAY_ERR_NOMEM;
 *   or the status the plugin's entry point returned, with its message.
 */
enum assay_status assay_plugin_open_spec(const char *args, struct assay_adapter *out,
                                         struct assay_diag *diag);

/*
 * Check that args names a loadable plugin: the library loads and exports
 * assay_plugin_open. The entry point is not called, so the options are not
 * checked. Returns as assay_plugin_open_spec; nothing stays loaded.
 */
enum assay_status assay_plugin_check_spec(const char *args, struct assay_diag *diag);

#ifdef __cplusplus
}
#endif

#endif
