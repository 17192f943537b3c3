/*
 * adapter.c - the two operations every adapter shares (adapter.h):
 * assay_adapter_close frees an adapter through its vtable and clears it (safe
 * twice), and assay_adapter_get_info fills an assay_adapter_info with empty
 * strings wherever the engine leaves a name NULL. Checks, reports and the
 * benchmarks call them on any adapter.
 */
#include "adapter.h"

#include <string.h>

void assay_adapter_close(struct assay_adapter *adapter)
{
    if (adapter == NULL) {
        return;
    }
    if (adapter->vt != NULL && adapter->vt->free != NULL && adapter->self != NULL) {
        adapter->vt->free(adapter->self);
    }
    adapter->vt = NULL;
    adapter->self = NULL;
}

void assay_adapter_get_info(const struct assay_adapter *adapter, struct assay_adapter_info *out)
{
    memset(out, 0, sizeof *out);
    out->name = "";
    out->spec = "";
    out->model_name = "";
    out->weights_sha256 = "";
    if (adapter == NULL || adapter->vt == NULL) {
        return;
    }
    out->name = adapter->vt->name != NULL ? adapter->vt->name : "";
    if (adapter->vt->info != NULL) {
        struct assay_adapter_info got;
        memset(&got, 0, sizeof got);
        if (adapter->vt->info(adapter->self, &got) == ASSAY_OK) {
            *out = got;
            out->name = got.name != NULL ? got.name : out->name;
            out->spec = got.spec != NULL ? got.spec : "";
            out->model_name = got.model_name != NULL ? got.model_name : "";
            out->weights_sha256 = got.weights_sha256 != NULL ? got.weights_sha256 : "";
        }
    }
}
