/*
 * bundled.c - the bundled engine behind the adapter vtable (bundled.h): each
 * slot forwards to engine/engine.h (requests, steps, aborts, block statistics
 * and audits, the logits sink, the invariant check). assay_bundled_open
 * builds the engine and its adapter, assay_bundled_own_models hands the
 * models over, and assay_bundled_engine reaches the engine. Opened through
 * engine specs (spec.c).
 */
#include "bundled.h"

#include "../core/alloc.h"

struct bundled {
    struct assay_engine *engine;
    struct assay_model *own_model;
    struct assay_model *own_draft;
    assay_logits_sink sink;
    void *sink_ctx;
};

static enum assay_status b_add(void *self, const struct assay_request *req)
{
    return assay_engine_add_request(((struct bundled *)self)->engine, req);
}

static bool b_has_work(void *self)
{
    return assay_engine_has_work(((struct bundled *)self)->engine);
}

static enum assay_status b_step(void *self, const struct assay_event **events, size_t *n)
{
    return assay_engine_step(((struct bundled *)self)->engine, events, n);
}

static enum assay_status b_abort(void *self, uint64_t id)
{
    return assay_engine_abort(((struct bundled *)self)->engine, id);
}

static void b_free(void *self)
{
    struct bundled *b = self;
    assay_engine_free(b->engine);
    assay_model_free(b->own_model);
    assay_model_free(b->own_draft);
    assay_free(b);
}

static enum assay_status b_info(void *self, struct assay_adapter_info *out)
{
    struct bundled *b = self;
    const struct assay_engine_params *p = assay_engine_params(b->engine);
    out->name = "bundled";
    out->spec = assay_engine_spec(b->engine);
    out->model_name = p->model->cfg.name;
    out->weights_sha256 = p->model->sha256;
    out->n_params = p->model->n_floats; /* a tied model counts its embedding once */
    out->vocab = p->model->cfg.vocab;
    out->n_ctx = p->max_seq_len;
    out->batch_invariant = p->batch_invariant;
    out->deterministic_seeds = true;
    out->sampling_order = p->sampling_order;
    return ASSAY_OK;
}

static enum assay_status b_block_stats(void *self, struct assay_block_stats *out)
{
    return assay_engine_block_stats(((struct bundled *)self)->engine, out);
}

static enum assay_status b_block_audit(void *self, struct assay_block_audit *out)
{
    return assay_engine_block_audit(((struct bundled *)self)->engine, out);
}

static enum assay_status b_set_sink(void *self, assay_logits_sink sink, void *ctx)
{
    assay_engine_set_logits_sink(((struct bundled *)self)->engine, sink, ctx);
    return ASSAY_OK;
}

static enum assay_status b_check(void *self, char *msg, size_t size)
{
    return assay_engine_check_invariants(((struct bundled *)self)->engine, msg, size);
}

static const char *b_last_error(void *self)
{
    return assay_engine_last_error(((struct bundled *)self)->engine);
}

static const struct assay_adapter_vtable k_bundled_vt = {
    .abi_version = ASSAY_ADAPTER_ABI_VERSION,
    .name = "bundled",
    .add_request = b_add,
    .has_work = b_has_work,
    .step = b_step,
    .abort = b_abort,
    .free = b_free,
    .info = b_info,
    .block_stats = b_block_stats,
    .block_audit = b_block_audit,
    .set_logits_sink = b_set_sink,
    .check_invariants = b_check,
    .last_error = b_last_error,
};

enum assay_status assay_bundled_open(const struct assay_engine_params *params,
                                     struct assay_adapter *out, struct assay_diag *diag)
{
    out->vt = NULL;
    out->self = NULL;
    struct bundled *b = assay_calloc(1, sizeof *b);
    if (b == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    enum assay_status st = assay_engine_init(&b->engine, params, diag);
    if (st != ASSAY_OK) {
        assay_free(b);
        return st;
    }
    out->vt = &k_bundled_vt;
    out->self = b;
    return ASSAY_OK;
}

void assay_bundled_own_models(struct assay_adapter *adapter, struct assay_model *model,
                              struct assay_model *draft)
{
    struct bundled *b = adapter->self;
    b->own_model = model;
    b->own_draft = draft;
}

struct assay_engine *assay_bundled_engine(const struct assay_adapter *adapter)
{
    if (adapter == NULL || adapter->vt != &k_bundled_vt) {
        return NULL;
    }
    return ((struct bundled *)adapter->self)->engine;
}
