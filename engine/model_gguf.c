/*
 * model_gguf.c - the model as a GGUF file llama.cpp loads: llama or qwen2
 * architecture metadata, a "llama" tokenizer block for the byte vocabulary,
 * and tensors with llama.cpp's names (declared in model.h). Loading
 * dequantizes every tensor into fp32 (engine/dequant.h); saving writes
 * fp32.
 */
#include "model.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/sha256.h"
#include "dequant.h"
#include "gguf.h"
#include "model_internal.h"

/* llama.cpp's token types (llama_token_type). */
enum {
    TOKEN_TYPE_NORMAL = 1,
    TOKEN_TYPE_UNKNOWN = 2,
    TOKEN_TYPE_CONTROL = 3,
};

/* The tensors of a layer, in the order bind_tensors lays them out; the
 * three biases only in a model with qkv_bias. */
enum layer_part {
    PART_ATTN_NORM,
    PART_Q,
    PART_Q_BIAS,
    PART_K,
    PART_K_BIAS,
    PART_V,
    PART_V_BIAS,
    PART_O,
    PART_FFN_NORM,
    PART_GATE,
    PART_UP,
    PART_DOWN,
    PART_COUNT
};

static const char *const k_part_names[PART_COUNT] = {
    "attn_norm.weight", "attn_q.weight",   "attn_q.bias",   "attn_k.weight",
    "attn_k.bias",      "attn_v.weight",   "attn_v.bias",   "attn_output.weight",
    "ffn_norm.weight",  "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
};

static const enum assay_weight_kind k_part_kinds[PART_COUNT] = {
    ASSAY_WEIGHT_ATTN_NORM, ASSAY_WEIGHT_Q,    ASSAY_WEIGHT_Q_BIAS, ASSAY_WEIGHT_K,
    ASSAY_WEIGHT_K_BIAS,    ASSAY_WEIGHT_V,    ASSAY_WEIGHT_V_BIAS, ASSAY_WEIGHT_O,
    ASSAY_WEIGHT_FFN_NORM,  ASSAY_WEIGHT_GATE, ASSAY_WEIGHT_UP,     ASSAY_WEIGHT_DOWN,
};

static bool is_bias(enum layer_part part)
{
    return part == PART_Q_BIAS || part == PART_K_BIAS || part == PART_V_BIAS;
}

/* The parts a layer of cfg's model has, in order; returns how many. */
static size_t layer_parts(const struct assay_model_config *c, enum layer_part parts[PART_COUNT])
{
    size_t n = 0;
    for (int p = 0; p < PART_COUNT; p++) {
        if (c->qkv_bias || !is_bias((enum layer_part)p)) {
            parts[n++] = (enum layer_part)p;
        }
    }
    return n;
}

/* One tensor of the layout: name, dimensions in ggml ne order (fastest
 * first, the reverse of our row-major [out][in]) and its floats in the
 * model. */
struct tensor_spec {
    char name[ASSAY_GGUF_MAX_NAME + 1];
    uint32_t n_dims;
    int64_t ne[2];
    float *data;                  /* NULL for a mapped model's matrix */
    struct assay_matrix_file *file; /* a matrix's place in a mapped model;
                                     * NULL for a vector */
    uint32_t *type;               /* where a matrix's ggml type is kept;
                                   * NULL for a vector */
    enum assay_weight_kind kind;  /* which weight it is */
    int32_t layer;                /* of a layer's tensor; else 0 */
};

/* The tensors a model has: a tied one has no output.weight, one with
 * rope_freqs has rope_freqs.weight last. */
static size_t n_tensor_specs(const struct assay_model *m)
{
    enum layer_part parts[PART_COUNT];
    return (m->tied ? 2 : 3) + (m->cfg.rope_freqs ? 1 : 0) +
           layer_parts(&m->cfg, parts) * (size_t)m->cfg.n_layer;
}

/* The k-th tensor (0 <= k < n_tensor_specs) in model->data order. */
static void tensor_spec(struct assay_model *m, size_t k, struct tensor_spec *out)
{
    out->file = NULL;
    out->type = NULL;
    out->layer = 0;
    const struct assay_model_config *c = &m->cfg;
    int64_t d = c->d_model, q = (int64_t)c->n_head * c->head_dim;
    int64_t kv = (int64_t)c->n_kv_head * c->head_dim, ff = c->d_ff, vocab = c->vocab;
    enum layer_part parts[PART_COUNT];
    size_t per_layer = layer_parts(c, parts);
    size_t layers_end = 1 + per_layer * (size_t)c->n_layer;
    size_t rope_freqs_at = layers_end + (m->tied ? 1 : 2);
    int64_t ne0 = d, ne1 = 0; /* ne1 == 0: a vector */
    if (k == 0) {
        snprintf(out->name, sizeof out->name, "token_embd.weight");
        out->kind = ASSAY_WEIGHT_TOK_EMBD;
        ne1 = vocab;
        out->data = m->tok_embd;
        out->file = &m->tok_embd_file;
        out->type = &m->tok_embd_type;
    } else if (k == layers_end) {
        snprintf(out->name, sizeof out->name, "output_norm.weight");
        out->kind = ASSAY_WEIGHT_OUT_NORM;
        out->data = m->out_norm;
    } else if (k == rope_freqs_at) {
        snprintf(out->name, sizeof out->name, "rope_freqs.weight");
        out->kind = ASSAY_WEIGHT_ROPE_FREQS;
        ne0 = c->head_dim / 2;
        out->data = m->rope_freqs;
    } else if (k == layers_end + 1) {
        snprintf(out->name, sizeof out->name, "output.weight");
        out->kind = ASSAY_WEIGHT_OUTPUT;
        ne1 = vocab;
        out->data = m->output;
        out->file = &m->output_file;
        out->type = &m->output_type;
    } else {
        size_t layer = (k - 1) / per_layer;
        enum layer_part part = parts[(k - 1) % per_layer];
        struct assay_layer_weights *w = &m->layers[layer];
        snprintf(out->name, sizeof out->name, "blk.%zu.%s", layer, k_part_names[part]);
        out->kind = k_part_kinds[part];
        out->layer = (int32_t)layer;
        switch (part) {
        case PART_ATTN_NORM:
            out->data = w->attn_norm;
            break;
        case PART_Q:
            ne1 = q;
            out->data = w->wq;
            out->file = &w->files.wq;
            out->type = &w->types.wq;
            break;
        case PART_Q_BIAS:
            ne0 = q;
            out->data = w->bq;
            break;
        case PART_K:
            ne1 = kv;
            out->data = w->wk;
            out->file = &w->files.wk;
            out->type = &w->types.wk;
            break;
        case PART_K_BIAS:
            ne0 = kv;
            out->data = w->bk;
            break;
        case PART_V:
            ne1 = kv;
            out->data = w->wv;
            out->file = &w->files.wv;
            out->type = &w->types.wv;
            break;
        case PART_V_BIAS:
            ne0 = kv;
            out->data = w->bv;
            break;
        case PART_O:
            ne0 = q;
            ne1 = d;
            out->data = w->wo;
            out->file = &w->files.wo;
            out->type = &w->types.wo;
            break;
        case PART_FFN_NORM:
            out->data = w->ffn_norm;
            break;
        case PART_GATE:
            ne1 = ff;
            out->data = w->w_gate;
            out->file = &w->files.w_gate;
            out->type = &w->types.w_gate;
            break;
        case PART_UP:
            ne1 = ff;
            out->data = w->w_up;
            out->file = &w->files.w_up;
            out->type = &w->types.w_up;
            break;
        default:
            ne0 = ff;
            ne1 = d;
            out->data = w->w_down;
            out->file = &w->files.w_down;
            out->type = &w->types.w_down;
            break;
        }
    }
    out->ne[0] = ne0;
    out->ne[1] = ne1 > 0 ? ne1 : 1;
    out->n_dims = ne1 > 0 ? 2 : 1;
}

/* Whether name is one of the tensors of a model with cfg's layers and
 * parts (a tied model's absent output.weight is caught by the count). */
static bool is_known_tensor(const struct assay_model_config *c, const char *name)
{
    if (strcmp(name, "token_embd.weight") == 0 || strcmp(name, "output_norm.weight") == 0 ||
        strcmp(name, "output.weight") == 0) {
        return true;
    }
    if (strcmp(name, "rope_freqs.weight") == 0) {
        return c->rope_freqs;
    }
    if (strncmp(name, "blk.", 4) != 0) {
        return false;
    }
    const char *p = name + 4;
    if (p[0] < '0' || p[0] > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) {
        return false; /* no digits, or a leading zero llama.cpp would not write */
    }
    long layer = 0;
    while (*p >= '0' && *p <= '9' && layer <= c->n_layer) {
        layer = layer * 10 + (*p - '0');
        p++;
    }
    if (layer >= c->n_layer || *p != '.') {
        return false;
    }
    p++;
    enum layer_part parts[PART_COUNT];
    size_t n = layer_parts(c, parts);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(p, k_part_names[parts[i]]) == 0) {
            return true;
        }
    }
    return false;
}

/* A u32 dimension that must fit in int32. */
static enum assay_status get_dim(const struct assay_gguf *g, const char *path, const char *key,
                                 int32_t *out, struct assay_diag *diag)
{
    uint32_t v;
    enum assay_status st = assay_gguf_get_u32(g, key, &v, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    if (v > INT32_MAX) {
        assay_diag_set(diag, path, key, "an integer in 0..2147483647", "%" PRIu32, v);
        return ASSAY_ERR_INVALID;
    }
    *out = (int32_t)v;
    return ASSAY_OK;
}

/* "<arch>.<suffix>": the key of a per-architecture value. */
static const char *arch_key(char *buf, size_t size, const struct assay_model_config *cfg,
                            const char *suffix)
{
    snprintf(buf, size, "%s.%s", assay_arch_name(cfg->arch), suffix);
    return buf;
}

/* RoPE scaling: rope.scaling.type (llama.cpp's default "linear" when
 * absent; "none"; anything else - YaRN, LongRoPE - is not this model),
 * rope.scaling.factor or its old name rope.scale_linear, and an
 * attn_factor that must be 1 when present. */
static enum assay_status read_rope_scaling(const struct assay_gguf *g, const char *path,
                                           struct assay_model_config *cfg, struct assay_diag *diag)
{
    char key[96];
    bool none = false;
    arch_key(key, sizeof key, cfg, "rope.scaling.type");
    if (assay_gguf_find_key(g, key) >= 0) {
        const char *type;
        enum assay_status st = assay_gguf_get_string(g, key, &type, NULL, diag);
        if (st != ASSAY_OK) {
            return st;
        }
        none = strcmp(type, "none") == 0;
        if (!none && strcmp(type, "linear") != 0) {
            assay_diag_set(diag, path, key,
                           "\"none\" or \"linear\" (YaRN and LongRoPE are not decoded)", "\"%s\"",
                           type);
            return ASSAY_ERR_UNSUPPORTED;
        }
    }
    const char *factor_keys[] = {"rope.scaling.factor", "rope.scale_linear"};
    for (size_t i = 0; i < 2; i++) {
        arch_key(key, sizeof key, cfg, factor_keys[i]);
        if (assay_gguf_find_key(g, key) >= 0) {
            float factor;
            enum assay_status st = assay_gguf_get_f32(g, key, &factor, diag);
            if (st != ASSAY_OK) {
                return st;
            }
            if (!(factor == 0.0f || (factor > 0.0f && isfinite(factor)))) {
                assay_diag_set(diag, path, key, "0 (none) or a finite number > 0", "%g",
                               (double)factor);
                return ASSAY_ERR_INVALID;
            }
            cfg->rope_scale = none ? 0.0f : factor;
            break;
        }
    }
    arch_key(key, sizeof key, cfg, "rope.scaling.attn_factor");
    if (assay_gguf_find_key(g, key) >= 0) {
        float attn_factor;
        enum assay_status st = assay_gguf_get_f32(g, key, &attn_factor, diag);
        if (st != ASSAY_OK) {
            return st;
        }
        if (attn_factor != 1.0f) {
            assay_diag_set(diag, path, key, "1 (no attention scaling)", "%g", (double)attn_factor);
            return ASSAY_ERR_UNSUPPORTED;
        }
    }
    return ASSAY_OK;
}

/* Read the configuration from the metadata. Long because it reads the
 * architecture's keys one after the other, each with its check and its
 * message, in the order the GGUF specification lists them. */
static enum assay_status read_config(const struct assay_gguf *g, const char *path,
                                     struct assay_model_config *cfg, struct assay_diag *diag)
{
    memset(cfg, 0, sizeof *cfg);
    const char *arch;
    size_t arch_len;
    enum assay_status st = assay_gguf_get_string(g, "general.architecture", &arch, &arch_len, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    if (strlen(arch) == arch_len && strcmp(arch, "llama") == 0) {
        cfg->arch = ASSAY_ARCH_LLAMA;
    } else if (strlen(arch) == arch_len && strcmp(arch, "qwen2") == 0) {
        cfg->arch = ASSAY_ARCH_QWEN2;
    } else {
        assay_diag_set(diag, path, "general.architecture", "\"llama\" or \"qwen2\"", "\"%s\"",
                       arch);
        return ASSAY_ERR_UNSUPPORTED;
    }
    if (assay_gguf_find_key(g, "general.name") >= 0) {
        const char *name;
        st = assay_gguf_get_string(g, "general.name", &name, NULL, diag);
        if (st != ASSAY_OK) {
            return st;
        }
        snprintf(cfg->name, sizeof cfg->name, "%s", name);
    } else {
        snprintf(cfg->name, sizeof cfg->name, "gguf");
    }
    char key[96];
    const struct {
        const char *suffix;
        int32_t *out;
    } dims[] = {
        {"block_count", &cfg->n_layer},         {"embedding_length", &cfg->d_model},
        {"attention.head_count", &cfg->n_head}, {"feed_forward_length", &cfg->d_ff},
        {"context_length", &cfg->n_ctx},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        st = get_dim(g, path, arch_key(key, sizeof key, cfg, dims[i].suffix), dims[i].out, diag);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    /* A head is embedding_length / head_count wide unless key_length says
     * otherwise, and RoPE turns all of it unless rope.dimension_count says
     * otherwise (llama.cpp's defaults). */
    if (cfg->n_head > 0) {
        cfg->head_dim = cfg->d_model / cfg->n_head;
    }
    arch_key(key, sizeof key, cfg, "attention.key_length");
    if (assay_gguf_find_key(g, key) >= 0) {
        st = get_dim(g, path, key, &cfg->head_dim, diag);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    /* A value head is embedding_length / head_count wide unless
     * value_length says otherwise, whatever key_length says (llama.cpp's
     * default); the rotation is the key head unless rope.dimension_count
     * says otherwise. Values narrower or wider than keys, or a partial
     * rotation, are not this model. */
    const struct {
        const char *suffix;
        int32_t fallback;
    } lengths[] = {
        {"attention.value_length", cfg->n_head > 0 ? cfg->d_model / cfg->n_head : 0},
        {"rope.dimension_count", cfg->head_dim},
    };
    for (size_t i = 0; i < 2; i++) {
        arch_key(key, sizeof key, cfg, lengths[i].suffix);
        bool present = assay_gguf_find_key(g, key) >= 0;
        int32_t len = lengths[i].fallback;
        if (present) {
            st = get_dim(g, path, key, &len, diag);
            if (st != ASSAY_OK) {
                return st;
            }
        }
        if (len != cfg->head_dim && cfg->head_dim > 0) { /* 0: validation names the cause */
            if (present) {
                assay_diag_set(diag, path, key, "the head size (a rotation of the whole head)",
                               "%d (head size %d)", (int)len, (int)cfg->head_dim);
            } else {
                assay_diag_set(diag, path, key, "the head size (values as wide as keys)",
                               "no such key: embedding_length / head_count = %d (head size %d)",
                               (int)len, (int)cfg->head_dim);
            }
            return ASSAY_ERR_UNSUPPORTED;
        }
    }
    /* Without head_count_kv there is no grouping (GGUF spec). */
    cfg->n_kv_head = cfg->n_head;
    arch_key(key, sizeof key, cfg, "attention.head_count_kv");
    if (assay_gguf_find_key(g, key) >= 0) {
        st = get_dim(g, path, key, &cfg->n_kv_head, diag);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    arch_key(key, sizeof key, cfg, "attention.layer_norm_rms_epsilon");
    st = assay_gguf_get_f32(g, key, &cfg->norm_eps, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    /* llama.cpp's default when the key is absent. */
    cfg->rope_theta = 10000.0f;
    arch_key(key, sizeof key, cfg, "rope.freq_base");
    if (assay_gguf_find_key(g, key) >= 0) {
        st = assay_gguf_get_f32(g, key, &cfg->rope_theta, diag);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    st = read_rope_scaling(g, path, cfg, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    char vocab_key[32];
    arch_key(vocab_key, sizeof vocab_key, cfg, "vocab_size");
    bool has_vocab = assay_gguf_find_key(g, vocab_key) >= 0;
    bool has_tokens = assay_gguf_find_key(g, "tokenizer.ggml.tokens") >= 0;
    if (has_vocab) {
        st = get_dim(g, path, vocab_key, &cfg->vocab, diag);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    if (has_tokens) {
        uint64_t n;
        st = assay_gguf_get_array(g, "tokenizer.ggml.tokens", ASSAY_GGUF_TYPE_STRING, &n, diag);
        if (st != ASSAY_OK) {
            return st;
        }
        if (has_vocab && n != (uint64_t)cfg->vocab) {
            char expected[128];
            snprintf(expected, sizeof expected, "%d tokens (%s)", (int)cfg->vocab, vocab_key);
            assay_diag_set(diag, path, "tokenizer.ggml.tokens", expected, "%" PRIu64, n);
            return ASSAY_ERR_PARSE;
        }
        if (!has_vocab) {
            if (n > INT32_MAX) {
                assay_diag_set(diag, path, "tokenizer.ggml.tokens", "at most 2147483647 tokens",
                               "%" PRIu64, n);
                return ASSAY_ERR_INVALID;
            }
            cfg->vocab = (int32_t)n;
        }
    }
    if (!has_vocab && !has_tokens) {
        char expected[128];
        snprintf(expected, sizeof expected, "%s or tokenizer.ggml.tokens", vocab_key);
        assay_diag_set(diag, path, vocab_key, expected, "neither key");
        return ASSAY_ERR_NOT_FOUND;
    }
    return ASSAY_OK;
}

static void format_dims(char *buf, size_t size, uint32_t n_dims, const int64_t *ne)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (uint32_t d = 0; d < n_dims && n < size; d++) {
        n += (size_t)snprintf(buf + n, size - n, "%s%" PRId64, d > 0 ? ", " : "", ne[d]);
    }
    if (n < size) {
        snprintf(buf + n, size - n, "]");
    }
}

/* Add a tensor's type to m->tensor_types unless it is there already. */
static void note_type(struct assay_model *m, uint32_t type)
{
    const char *name = assay_ggml_type_name(type);
    char have[sizeof m->tensor_types + 2], want[32];
    snprintf(have, sizeof have, "+%s+", m->tensor_types);
    snprintf(want, sizeof want, "+%s+", name);
    if (strstr(have, want) != NULL) {
        return;
    }
    size_t used = strlen(m->tensor_types);
    snprintf(m->tensor_types + used, sizeof m->tensor_types - used, "%s%s", used > 0 ? "+" : "",
             name);
}

/* Check decoded weights x[0..n), elements first.. of tensor `name`: every
 * one finite, and a RoPE divisor positive. */
static enum assay_status check_values(const float *x, int64_t n, int64_t first, bool divisors,
                                      const char *name, const char *path,
                                      struct assay_diag *diag)
{
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) {
            assay_diag_set(diag, path, name, "finite weights", "%s at element %" PRId64,
                           isnan(x[i]) ? "NaN" : (x[i] > 0 ? "+Inf" : "-Inf"), first + i);
            return ASSAY_ERR_PARSE;
        }
        if (divisors && !(x[i] > 0.0f)) {
            assay_diag_set(diag, path, name, "positive frequency divisors",
                           "%g at element %" PRId64, (double)x[i], first + i);
            return ASSAY_ERR_PARSE;
        }
    }
    return ASSAY_OK;
}

/* Decode tensor t, of the shape of e, row by row (ne[0] elements a row,
 * each row whole blocks of t's type) and check each row's values: into
 * e->data, or, for a mapped model's matrix (row_buf not NULL), each row
 * into row_buf, where it is hashed into sha and dropped. A bad block scale
 * is reported with the tensor and row added to what assay_dequant_row
 * says. */
static enum assay_status decode_tensor(const struct assay_gguf_tensor *t,
                                       const struct tensor_spec *e, bool divisors, float *row_buf,
                                       struct assay_sha256 *sha, const char *path,
                                       struct assay_diag *diag)
{
    uint32_t block_elems, block_bytes;
    if (!assay_ggml_type_size(t->type, &block_elems, &block_bytes)) {
        return ASSAY_ERR_INTERNAL; /* the reader refuses types of unknown size */
    }
    int64_t row = e->ne[0], n_rows = e->ne[1];
    size_t row_bytes = (size_t)(row / block_elems) * block_bytes;
    if ((uint64_t)n_rows * row_bytes != t->n_bytes) {
        return ASSAY_ERR_INTERNAL; /* the reader sized the tensor from these dimensions */
    }
    const uint8_t *src = t->data;
    for (int64_t r = 0; r < n_rows; r++) {
        struct assay_diag inner;
        assay_diag_clear(&inner);
        float *dst = row_buf != NULL ? row_buf : e->data + r * row;
        enum assay_status st =
            assay_dequant_row(t->type, src + (size_t)r * row_bytes, row_bytes, dst, row, &inner);
        if (st != ASSAY_OK) {
            char where[sizeof e->name + sizeof inner.where + 32];
            snprintf(where, sizeof where, "%s row %" PRId64 ": %s", e->name, r, inner.where);
            assay_diag_set(diag, path, where, inner.expected, "%s", inner.got);
            return st;
        }
        st = check_values(dst, row, r * row, divisors, e->name, path, diag);
        if (st != ASSAY_OK) {
            return st;
        }
        if (sha != NULL) {
            /* fp32 little-endian, as assay_model_rehash hashes data */
            assay_sha256_update(sha, dst, (size_t)row * sizeof(float));
        }
    }
    return ASSAY_OK;
}

/* Decode and check tensor t into its place in m (engine/numerics.h reads
 * the matrices' types): a resident model's data, or, for a mapped model's
 * matrix, only its place in the file once each row has been checked. With
 * sha (a mapped model) every tensor is hashed in data order. */
static enum assay_status load_tensor(const struct assay_gguf *g, const struct assay_gguf_tensor *t,
                                     struct assay_model *m, const struct tensor_spec *e,
                                     struct assay_sha256 *sha, const char *path,
                                     struct assay_diag *diag)
{
    bool divisors = e->data != NULL && e->data == m->rope_freqs;
    float *row_buf = NULL;
    if (m->mapped && e->file != NULL) {
        row_buf = assay_malloc(sizeof(float) * (size_t)e->ne[0]);
        if (row_buf == NULL) {
            return ASSAY_ERR_NOMEM;
        }
    }
    enum assay_status st = decode_tensor(t, e, divisors, row_buf, row_buf != NULL ? sha : NULL,
                                         path, diag);
    assay_free(row_buf);
    assay_gguf_done_with(g, t);
    if (st != ASSAY_OK) {
        return st;
    }
    if (sha != NULL && row_buf == NULL) {
        assay_sha256_update(sha, e->data, (size_t)t->n_elements * sizeof(float));
    }
    if (e->file != NULL) {
        uint32_t block_elems, block_bytes;
        (void)assay_ggml_type_size(t->type, &block_elems, &block_bytes);
        *e->file = (struct assay_matrix_file){t->data, (size_t)(e->ne[0] / block_elems) * block_bytes,
                                              t->type};
    }
    /* Norms, biases and RoPE divisors are no product's weights: only the
     * matrices' types are recorded. */
    if (e->type != NULL) {
        *e->type = t->type;
        if (m->tied && e->type == &m->tok_embd_type) {
            m->output_type = t->type;
            m->output_file = m->tok_embd_file;
        }
    }
    note_type(m, t->type);
    return ASSAY_OK;
}

/* Check every tensor's name, type and shape and, when copy is set, decode
 * it into m and check its values (load_tensor; sha for a mapped model);
 * then reject tensors the model does not have. Without copy, m needs only
 * its config, tied and a layers array (the data pointers may be NULL): the
 * shapes are checked before the weights are allocated, so a small file
 * cannot make the loader allocate for a model it does not hold. */
static enum assay_status read_tensors(const struct assay_gguf *g, const char *path,
                                      struct assay_model *m, bool copy, struct assay_sha256 *sha,
                                      struct assay_diag *diag)
{
    size_t n = n_tensor_specs(m);
    if (copy) {
        m->tensor_types[0] = '\0';
    }
    for (size_t k = 0; k < n; k++) {
        struct tensor_spec e;
        char want[64], got[64], expected[160];
        tensor_spec(m, k, &e);
        format_dims(want, sizeof want, e.n_dims, e.ne);
        const struct assay_gguf_tensor *t = assay_gguf_find_tensor(g, e.name);
        if (t == NULL) {
            snprintf(expected, sizeof expected, "a tensor of ne %s", want);
            assay_diag_set(diag, path, e.name, expected, "no such tensor");
            return ASSAY_ERR_NOT_FOUND;
        }
        if (!assay_dequant_supported(t->type)) {
            assay_diag_set(diag, path, e.name,
                           "a tensor type assay decodes (F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q5_K "
                           "or Q6_K)",
                           "%s (type %" PRIu32 ")", assay_ggml_type_name(t->type), t->type);
            return ASSAY_ERR_UNSUPPORTED;
        }
        bool same = t->n_dims == e.n_dims;
        for (uint32_t d = 0; same && d < e.n_dims; d++) {
            same = t->ne[d] == e.ne[d];
        }
        if (!same) {
            format_dims(got, sizeof got, t->n_dims, t->ne);
            snprintf(expected, sizeof expected, "ne %s (fastest first)", want);
            assay_diag_set(diag, path, e.name, expected, "ne %s", got);
            return ASSAY_ERR_PARSE;
        }
        /* The reader refuses partial blocks already; a row of whole blocks
         * is what decoding row by row relies on, so it is checked here
         * too. */
        uint32_t block_elems, block_bytes;
        if (!assay_ggml_type_size(t->type, &block_elems, &block_bytes)) {
            return ASSAY_ERR_INTERNAL;
        }
        if (e.ne[0] % block_elems != 0) {
            snprintf(expected, sizeof expected,
                     "rows of whole %s blocks (ne[0] a multiple of %" PRIu32 ")",
                     assay_ggml_type_name(t->type), block_elems);
            assay_diag_set(diag, path, e.name, expected, "ne[0] = %" PRId64, e.ne[0]);
            return ASSAY_ERR_PARSE;
        }
        if (!copy) {
            continue;
        }
        enum assay_status st = load_tensor(g, t, m, &e, sha, path, diag);
        if (st != ASSAY_OK) {
            return st;
        }
    }
    /* Every expected name was found and names are unique, so any more
     * tensors are unknown ones. */
    if (assay_gguf_n_tensors(g) > n) {
        for (size_t i = 0; i < assay_gguf_n_tensors(g); i++) {
            const struct assay_gguf_tensor *t = assay_gguf_tensor_at(g, i);
            if (!is_known_tensor(&m->cfg, t->name)) {
                char expected[128];
                snprintf(expected, sizeof expected,
                         "only the %zu tensors of a %d-layer %s%s%s model", n, (int)m->cfg.n_layer,
                         m->tied ? "tied " : "", m->cfg.qkv_bias ? "biased " : "",
                         assay_arch_name(m->cfg.arch));
                assay_diag_set(diag, path, t->name, expected, "unknown tensor %s", t->name);
                return ASSAY_ERR_PARSE;
            }
        }
        return ASSAY_ERR_INTERNAL;
    }
    return ASSAY_OK;
}

/* The end-of-generation token, when the tokenizer block names one within
 * the vocabulary. A file that names none gets llama.cpp's default for its
 * tokenizer: 2 for "llama" (SentencePiece; llama-vocab.cpp sets BOS 1, EOS
 * 2 before reading the ids), which a server built on it then bans under
 * ignore_eos and stops at; -1 for any other tokenizer. */
static enum assay_status read_eos(const struct assay_gguf *g, const char *path,
                                  struct assay_model *m, struct assay_diag *diag)
{
    m->eos_token = -1;
    if (assay_gguf_find_key(g, "tokenizer.ggml.eos_token_id") < 0) {
        const char *tok = NULL;
        size_t len = 0;
        struct assay_diag quiet;
        assay_diag_clear(&quiet);
        if (assay_gguf_find_key(g, "tokenizer.ggml.model") >= 0 &&
            assay_gguf_get_string(g, "tokenizer.ggml.model", &tok, &len, &quiet) == ASSAY_OK &&
            len == 5 && strncmp(tok, "llama", 5) == 0 && m->cfg.vocab > 2) {
            m->eos_token = 2;
        }
        return ASSAY_OK;
    }
    uint32_t id;
    enum assay_status st = assay_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &id, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    if (id >= (uint32_t)m->cfg.vocab) {
        char expected[64];
        snprintf(expected, sizeof expected, "a token id below the vocabulary size %d",
                 (int)m->cfg.vocab);
        assay_diag_set(diag, path, "tokenizer.ggml.eos_token_id", expected, "%" PRIu32, id);
        return ASSAY_ERR_PARSE;
    }
    m->eos_token = (int32_t)id;
    return ASSAY_OK;
}

/* The configuration of a parsed file, validated. */
static enum assay_status config_of(const struct assay_gguf *g, const char *path,
                                   struct assay_model_config *cfg, struct assay_diag *diag)
{
    enum assay_status st = read_config(g, path, cfg, diag);
    /* Biases and RoPE frequency divisors are optional tensors (llama.cpp
     * loads them when present): layer 0's q bias decides for every bias
     * of every layer. llama.cpp's qwen2 has no divisors, so there
     * rope_freqs.weight is an unknown tensor. */
    cfg->qkv_bias = assay_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL;
    cfg->rope_freqs = st == ASSAY_OK && cfg->arch == ASSAY_ARCH_LLAMA &&
                      assay_gguf_find_tensor(g, "rope_freqs.weight") != NULL;
    if (st == ASSAY_OK) {
        st = assay_model_config_validate(cfg, diag);
        if (st != ASSAY_OK && diag != NULL) {
            snprintf(diag->file, sizeof diag->file, "%s", path);
        }
    }
    return st;
}

/* A model from a parsed file: its config, the tensors' shapes, then the
 * weights, decoded into the model or (mapped) checked and left in g, which
 * the model then needs alive. On failure *out is untouched and nothing is
 * left allocated. */
static enum assay_status load_parsed(const struct assay_gguf *g, const char *path, bool mapped,
                                     struct assay_model **out, struct assay_diag *diag)
{
    struct assay_model_config cfg;
    /* llama.cpp's rule: without output.weight the output projection is the
     * token embedding. */
    bool tied = assay_gguf_find_tensor(g, "output.weight") == NULL;
    enum assay_status st = config_of(g, path, &cfg, diag);
    if (st == ASSAY_OK) {
        struct assay_model shapes;
        memset(&shapes, 0, sizeof shapes);
        shapes.cfg = cfg;
        shapes.tied = tied;
        shapes.layers = assay_calloc((size_t)cfg.n_layer, sizeof *shapes.layers);
        st = shapes.layers != NULL ? read_tensors(g, path, &shapes, false, NULL, diag) : ASSAY_ERR_NOMEM;
        assay_free(shapes.layers);
    }
    struct assay_model *m = NULL;
    if (st == ASSAY_OK) {
        st = assay_model_alloc_as(&m, &cfg, tied, mapped);
    }
    struct assay_sha256 sha;
    assay_sha256_init(&sha);
    if (st == ASSAY_OK) {
        st = read_tensors(g, path, m, true, mapped ? &sha : NULL, diag);
    }
    if (st == ASSAY_OK) {
        st = read_eos(g, path, m, diag);
    }
    if (st != ASSAY_OK) {
        assay_model_free(m);
        return st;
    }
    if (mapped) {
        uint8_t digest[32];
        assay_sha256_final(&sha, digest);
        assay_sha256_hex(digest, m->sha256);
    } else {
        assay_model_rehash(m);
    }
    *out = m;
    return ASSAY_OK;
}

/* A model from the file at path, resident or mapped (the model then owns
 * the parsed file). */
static enum assay_status load_file(struct assay_model **out, const char *path, bool mapped,
                                   struct assay_diag *diag)
{
    if (out == NULL) {
        return ASSAY_ERR_INVALID;
    }
    *out = NULL;
    if (path == NULL) {
        return ASSAY_ERR_INVALID;
    }
    struct assay_gguf *g;
    enum assay_status st = assay_gguf_read_file(path, &g, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    st = load_parsed(g, path, mapped, out, diag);
    if (st == ASSAY_OK) {
        /* a resident model keeps the file too, its pages given back: the
         * engine keeps integer formats as they are stored (engine/gemmq.h) */
        (*out)->file = g;
    } else {
        assay_gguf_free(g);
    }
    return st;
}

enum assay_status assay_model_load_gguf(struct assay_model **out, const char *path,
                                        struct assay_diag *diag)
{
    return load_file(out, path, false, diag);
}

enum assay_status assay_model_load_gguf_mapped(struct assay_model **out, const char *path,
                                               struct assay_diag *diag)
{
    return load_file(out, path, true, diag);
}

enum assay_status assay_model_matrix_rows(const float *resident,
                                          const struct assay_matrix_file *file, int64_t cols,
                                          int64_t r0, int64_t n, float *out)
{
    if (resident != NULL) {
        memcpy(out, resident + r0 * cols, sizeof(float) * (size_t)(n * cols));
        return ASSAY_OK;
    }
    if (file == NULL || file->bytes == NULL) {
        return ASSAY_ERR_INVALID;
    }
    for (int64_t r = 0; r < n; r++) {
        enum assay_status st =
            assay_dequant_row(file->type, file->bytes + (size_t)(r0 + r) * file->row_bytes,
                              file->row_bytes, out + r * cols, cols, NULL);
        if (st != ASSAY_OK) {
            return ASSAY_ERR_PARSE;
        }
    }
    return ASSAY_OK;
}

void assay_model_matrix_done(const struct assay_model *model, const struct assay_matrix_file *file,
                             int64_t r0, int64_t n)
{
    if (model->file != NULL && file != NULL && file->bytes != NULL) {
        assay_gguf_done_with_bytes(model->file, file->bytes + (size_t)r0 * file->row_bytes,
                                   (size_t)n * file->row_bytes);
    }
}

enum assay_status assay_model_config_from_gguf(const char *path, struct assay_model_config *out,
                                               struct assay_diag *diag)
{
    if (out == NULL || path == NULL) {
        return ASSAY_ERR_INVALID;
    }
    struct assay_gguf *g;
    enum assay_status st = assay_gguf_read_file(path, &g, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    struct assay_model_config cfg;
    st = config_of(g, path, &cfg, diag);
    assay_gguf_free(g);
    if (st == ASSAY_OK) {
        *out = cfg;
    }
    return st;
}

enum assay_status assay_model_load_gguf_buffer(struct assay_model **out, const uint8_t *buf,
                                               size_t size, const char *name,
                                               struct assay_diag *diag)
{
    if (out == NULL) {
        return ASSAY_ERR_INVALID;
    }
    *out = NULL;
    const char *file = name != NULL ? name : "<memory>";
    struct assay_gguf *g;
    enum assay_status st = assay_gguf_parse(buf, size, file, &g, diag);
    if (st != ASSAY_OK) {
        return st;
    }
    st = load_parsed(g, file, false, out, diag);
    if (st == ASSAY_OK) {
        /* the caller's buffer is not the model's to keep */
        struct assay_model *m = *out;
        for (int32_t l = 0; l < m->cfg.n_layer; l++) {
            memset(&m->layers[l].files, 0, sizeof m->layers[l].files);
        }
        memset(&m->tok_embd_file, 0, sizeof m->tok_embd_file);
        memset(&m->output_file, 0, sizeof m->output_file);
    }
    assay_gguf_free(g);
    return st;
}

/* The tokenizer block: byte tokens, then the four specials, then
 * "<extra_N>" fillers up to the vocabulary size. Specials are written only
 * for ids the vocabulary has. */
static enum assay_status add_tokenizer(struct assay_gguf_writer *w, int32_t vocab)
{
    enum { TOKEN_CHARS = 32 }; /* "<extra_N>" for any size_t N */
    size_t n = (size_t)vocab;
    char *text = assay_malloc(n * TOKEN_CHARS);
    const char **tokens = assay_calloc(n, sizeof *tokens);
    float *scores = assay_calloc(n, sizeof *scores);
    int32_t *types = assay_calloc(n, sizeof *types);
    enum assay_status st = ASSAY_ERR_NOMEM;
    if (text != NULL && tokens != NULL && scores != NULL && types != NULL) {
        static const char *const specials[4] = {"<s>", "</s>", "<pad>", "<unk>"};
        for (size_t i = 0; i < n; i++) {
            char *t = text + i * TOKEN_CHARS;
            types[i] = TOKEN_TYPE_NORMAL;
            if (i < 256) {
                snprintf(t, TOKEN_CHARS, "<0x%02X>", (unsigned)i);
            } else if (i < 260) {
                snprintf(t, TOKEN_CHARS, "%s", specials[i - 256]);
                types[i] = i == ASSAY_TOKEN_UNK ? TOKEN_TYPE_UNKNOWN : TOKEN_TYPE_CONTROL;
            } else {
                snprintf(t, TOKEN_CHARS, "<extra_%zu>", i);
            }
            tokens[i] = t;
        }
        st = assay_gguf_writer_add_string(w, "tokenizer.ggml.model", "llama");
        if (st == ASSAY_OK) {
            st = assay_gguf_writer_add_string_array(w, "tokenizer.ggml.tokens", tokens, n);
        }
        if (st == ASSAY_OK) {
            st = assay_gguf_writer_add_f32_array(w, "tokenizer.ggml.scores", scores, n);
        }
        if (st == ASSAY_OK) {
            st = assay_gguf_writer_add_i32_array(w, "tokenizer.ggml.token_type", types, n);
        }
    }
    assay_free(text);
    assay_free(tokens);
    assay_free(scores);
    assay_free(types);
    const struct {
        const char *key;
        uint32_t id;
    } ids[] = {
        {"tokenizer.ggml.bos_token_id", ASSAY_TOKEN_BOS},
        {"tokenizer.ggml.eos_token_id", ASSAY_TOKEN_EOS},
        {"tokenizer.ggml.padding_token_id", ASSAY_TOKEN_PAD},
        {"tokenizer.ggml.unknown_token_id", ASSAY_TOKEN_UNK},
    };
    for (size_t i = 0; i < sizeof ids / sizeof ids[0] && st == ASSAY_OK; i++) {
        if (ids[i].id < (uint32_t)vocab) {
            st = assay_gguf_writer_add_u32(w, ids[i].key, ids[i].id);
        }
    }
    if (st == ASSAY_OK) {
        st = assay_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", false);
    }
    if (st == ASSAY_OK) {
        st = assay_gguf_writer_add_bool(w, "tokenizer.ggml.add_eos_token", false);
    }
    return st;
}

static enum assay_status add_metadata(struct assay_gguf_writer *w, const struct assay_model_config *c)
{
    char key[96];
    enum assay_status st =
        assay_gguf_writer_add_string(w, "general.architecture", assay_arch_name(c->arch));
    if (st == ASSAY_OK) {
        st = assay_gguf_writer_add_string(w, "general.name", c->name);
    }
    if (st == ASSAY_OK) {
        st = assay_gguf_writer_add_u32(w, "general.file_type", 0); /* ALL_F32 */
    }
    const struct {
        const char *suffix;
        int32_t value;
    } dims[] = {
        {"context_length", c->n_ctx},        {"embedding_length", c->d_model},
        {"block_count", c->n_layer},         {"feed_forward_length", c->d_ff},
        {"attention.head_count", c->n_head}, {"attention.head_count_kv", c->n_kv_head},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0] && st == ASSAY_OK; i++) {
        st = assay_gguf_writer_add_u32(w, arch_key(key, sizeof key, c, dims[i].suffix),
                                       (uint32_t)dims[i].value);
    }
    if (st == ASSAY_OK) {
        st = assay_gguf_writer_add_f32(
            w, arch_key(key, sizeof key, c, "attention.layer_norm_rms_epsilon"), c->norm_eps);
    }
    /* llama.cpp takes a head to be d_model / n_head wide unless told. */
    if (st == ASSAY_OK && (int64_t)c->n_head * c->head_dim != c->d_model) {
        st = assay_gguf_writer_add_u32(w, arch_key(key, sizeof key, c, "attention.key_length"),
                                       (uint32_t)c->head_dim);
        if (st == ASSAY_OK) {
            st = assay_gguf_writer_add_u32(
                w, arch_key(key, sizeof key, c, "attention.value_length"), (uint32_t)c->head_dim);
        }
    }
    if (st == ASSAY_OK) {
        st = assay_gguf_writer_add_u32(w, arch_key(key, sizeof key, c, "rope.dimension_count"),
                                       (uint32_t)c->head_dim);
    }
    if (st == ASSAY_OK) {
        st = assay_gguf_writer_add_f32(w, arch_key(key, sizeof key, c, "rope.freq_base"),
                                       c->rope_theta);
    }
    if (st == ASSAY_OK && c->rope_scale != 0.0f) {
        st = assay_gguf_writer_add_string(w, arch_key(key, sizeof key, c, "rope.scaling.type"),
                                          "linear");
        if (st == ASSAY_OK) {
            st = assay_gguf_writer_add_f32(w, arch_key(key, sizeof key, c, "rope.scaling.factor"),
                                           c->rope_scale);
        }
    }
    if (st == ASSAY_OK) {
        st = assay_gguf_writer_add_u32(w, arch_key(key, sizeof key, c, "vocab_size"),
                                       (uint32_t)c->vocab);
    }
    if (st == ASSAY_OK) {
        st = add_tokenizer(w, c->vocab);
    }
    return st;
}

enum assay_status assay_model_save_gguf(const struct assay_model *model, const char *path,
                                        struct assay_diag *diag)
{
    if (model == NULL || path == NULL) {
        return ASSAY_ERR_INVALID;
    }
    if (model->mapped) {
        assay_diag_set(diag, path, "model", "a resident model (weights in memory)",
                       "a mapped model, whose file is already the GGUF");
        return ASSAY_ERR_UNSUPPORTED;
    }
    enum assay_status st = assay_model_config_validate(&model->cfg, diag);
    if (st != ASSAY_OK) {
        if (diag != NULL) {
            snprintf(diag->file, sizeof diag->file, "%s", path);
        }
        return st;
    }
    struct assay_gguf_writer *w;
    st = assay_gguf_writer_init(&w);
    if (st != ASSAY_OK) {
        return st;
    }
    st = add_metadata(w, &model->cfg);
    size_t n = n_tensor_specs(model);
    for (size_t k = 0; k < n && st == ASSAY_OK; k++) {
        struct tensor_spec e;
        /* tensor_spec names the places a load fills; here they are only read */
        tensor_spec((struct assay_model *)model, k, &e);
        st = assay_gguf_writer_add_tensor_f32(w, e.name, e.n_dims, e.ne, e.data);
    }
    if (st == ASSAY_OK) {
        st = assay_gguf_writer_write(w, path, diag);
    } else {
        assay_diag_set(diag, path, "building the GGUF contents", "success", "%s",
                       assay_status_str(st));
    }
    assay_gguf_writer_free(w);
    return st;
}

/* One tensor of a random model being written: its values come from
 * assay_model_random_values a chunk at a time, hashed as they go. */
struct random_tensor {
    const struct assay_model_config *cfg;
    struct assay_model_init_params params;
    uint64_t seed;
    enum assay_weight_kind kind;
    int32_t layer;
    struct assay_sha256 *sha;
};

static enum assay_status fill_random(void *ctx, int64_t first, int64_t n, float *out)
{
    const struct random_tensor *t = ctx;
    assay_model_random_values(t->cfg, t->params, t->seed, t->kind, t->layer, first, n, out);
    /* fp32 little-endian, in data order: assay_model_rehash's bytes */
    assay_sha256_update(t->sha, out, (size_t)n * sizeof(float));
    return ASSAY_OK;
}

enum assay_status assay_model_write_random_gguf(const struct assay_model_config *cfg,
                                                struct assay_model_init_params params,
                                                uint64_t seed, uint32_t type, const char *path,
                                                char sha256[65], struct assay_diag *diag)
{
    if (cfg == NULL || path == NULL ||
        (type != ASSAY_GGML_TYPE_F32 && type != ASSAY_GGML_TYPE_F16) ||
        !(params.qk_gain > 0.0f && isfinite(params.qk_gain) && params.out_gain > 0.0f &&
          isfinite(params.out_gain))) {
        return ASSAY_ERR_INVALID;
    }
    enum assay_status st = assay_model_config_validate(cfg, diag);
    if (st != ASSAY_OK) {
        if (diag != NULL) {
            snprintf(diag->file, sizeof diag->file, "%s", path);
        }
        return st;
    }
    /* tensor_spec needs the shape only: no weights are allocated */
    struct assay_model shape;
    memset(&shape, 0, sizeof shape);
    shape.cfg = *cfg;
    shape.tied = params.tied;
    shape.mapped = true;
    size_t n = n_tensor_specs(&shape);
    shape.layers = assay_calloc((size_t)cfg->n_layer, sizeof *shape.layers);
    struct random_tensor *tensors = assay_calloc(n, sizeof *tensors);
    struct assay_gguf_writer *w = NULL;
    st = shape.layers == NULL || tensors == NULL ? ASSAY_ERR_NOMEM : assay_gguf_writer_init(&w);
    if (st == ASSAY_OK) {
        st = add_metadata(w, cfg);
    }
    struct assay_sha256 sha;
    assay_sha256_init(&sha);
    for (size_t k = 0; k < n && st == ASSAY_OK; k++) {
        struct tensor_spec e;
        tensor_spec(&shape, k, &e);
        tensors[k] = (struct random_tensor){cfg, params, seed, e.kind, e.layer, &sha};
        /* vectors stay F32, as llama.cpp's converters and quantizers keep them */
        st = assay_gguf_writer_add_tensor_fill(w, e.name, e.n_dims, e.ne,
                                               e.n_dims == 2 ? type : ASSAY_GGML_TYPE_F32,
                                               fill_random, &tensors[k]);
    }
    if (st == ASSAY_OK) {
        st = assay_gguf_writer_write(w, path, diag);
    } else {
        assay_diag_set(diag, path, "building the GGUF contents", "success", "%s",
                       assay_status_str(st));
    }
    if (st == ASSAY_OK && sha256 != NULL) {
        uint8_t digest[32];
        assay_sha256_final(&sha, digest);
        assay_sha256_hex(digest, sha256);
    }
    assay_gguf_writer_free(w);
    assay_free(tensors);
    assay_free(shape.layers);
    return st;
}
