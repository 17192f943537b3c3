/*
 * model.c - TinyGPT configurations and weights (model.h): the named
 * configurations (tinygpt, draft, mini, mini-draft, mini-twins, mini-sharp,
 * mini-flat: k_configs) and their validation,
 * allocating a model and binding its tensors, random initialisation from a
 * seed, cloning, the weights' SHA-256 (assay_model_rehash) and
 * assay_model_free. Loading from GGUF is model_gguf.c's. Engine specs build
 * models here; the engine, the oracle and the checks read them.
 */
#include "model.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/rng.h"
#include "../core/sha256.h"
#include "gguf.h"
#include "model_internal.h"

static struct assay_model_config make_config(const char *name, int32_t n_layer, int32_t d_model,
                                             int32_t n_head, int32_t n_kv_head, int32_t head_dim,
                                             int32_t d_ff, int32_t n_ctx)
{
    struct assay_model_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.name, sizeof c.name, "%s", name);
    c.n_layer = n_layer;
    c.d_model = d_model;
    c.n_head = n_head;
    c.n_kv_head = n_kv_head;
    c.head_dim = head_dim;
    c.d_ff = d_ff;
    c.vocab = ASSAY_VOCAB_TINYGPT;
    c.n_ctx = n_ctx;
    c.norm_eps = 1e-5f;
    c.rope_theta = 10000.0f;
    return c;
}

struct assay_model_config assay_model_config_tinygpt(void)
{
    return make_config("tinygpt", 6, 256, 8, 2, 32, 1024, 2048);
}

struct assay_model_config assay_model_config_draft(void)
{
    return make_config("draft", 2, 128, 4, 2, 32, 512, 2048);
}

struct assay_model_config assay_model_config_mini(void)
{
    return make_config("mini", 2, 64, 4, 2, 16, 256, 256);
}

struct assay_model_config assay_model_config_mini_draft(void)
{
    return make_config("mini-draft", 1, 32, 2, 1, 16, 128, 256);
}

struct assay_model_config assay_model_config_mini_twins(void)
{
    struct assay_model_config c = make_config("mini-twins", 2, 64, 4, 2, 16, 256, 256);
    c.output_twins = true;
    return c;
}

struct assay_model_config assay_model_config_mini_sharp(void)
{
    struct assay_model_config c = make_config("mini-sharp", 2, 64, 4, 2, 16, 256, 256);
    c.output_scale = 40.0f;
    return c;
}

struct assay_model_config assay_model_config_mini_flat(void)
{
    struct assay_model_config c = make_config("mini-flat", 2, 64, 4, 2, 16, 256, 256);
    c.output_scale = 0.05f;
    return c;
}

/* The named configurations, in the order their names are listed. */
static const struct {
    const char *name;
    struct assay_model_config (*make)(void);
} k_configs[] = {
    {"tinygpt", assay_model_config_tinygpt},
    {"draft", assay_model_config_draft},
    {"mini", assay_model_config_mini},
    {"mini-draft", assay_model_config_mini_draft},
    {"mini-twins", assay_model_config_mini_twins},
    {"mini-sharp", assay_model_config_mini_sharp},
    {"mini-flat", assay_model_config_mini_flat},
};

enum assay_status assay_model_config_by_name(const char *name, struct assay_model_config *out)
{
    for (size_t i = 0; i < sizeof k_configs / sizeof k_configs[0]; i++) {
        if (name != NULL && strcmp(name, k_configs[i].name) == 0) {
            *out = k_configs[i].make();
            return ASSAY_OK;
        }
    }
    return ASSAY_ERR_NOT_FOUND;
}

void assay_model_config_names(char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof k_configs / sizeof k_configs[0] && len < size; i++) {
        int n = snprintf(buf + len, size - len, "%s%s", i > 0 ? ", " : "", k_configs[i].name);
        len += n > 0 ? (size_t)n : 0;
    }
}

const char *assay_arch_name(enum assay_arch arch)
{
    switch (arch) {
    case ASSAY_ARCH_LLAMA:
        return "llama";
    case ASSAY_ARCH_QWEN2:
        return "qwen2";
    }
    return NULL;
}

int64_t assay_model_config_n_params(const struct assay_model_config *c)
{
    int64_t d = c->d_model;
    int64_t q = (int64_t)c->n_head * c->head_dim;
    int64_t kv = (int64_t)c->n_kv_head * c->head_dim;
    int64_t per_layer = d + q * d + 2 * kv * d + d * q + d + 3 * (int64_t)c->d_ff * d;
    if (c->qkv_bias) {
        per_layer += q + 2 * kv;
    }
    return 2 * (int64_t)c->vocab * d + d + c->n_layer * per_layer +
           (c->rope_freqs ? c->head_dim / 2 : 0);
}

/* The GGUF key "<arch>.<suffix>" of c's architecture, into buf: the name
 * a diagnostic gives a value that came from (or goes to) a file. */
static const char *config_key(char *buf, size_t size, const struct assay_model_config *c,
                              const char *suffix)
{
    snprintf(buf, size, "%s.%s", assay_arch_name(c->arch), suffix);
    return buf;
}

enum assay_status assay_model_config_validate(const struct assay_model_config *c,
                                              struct assay_diag *diag)
{
    /* First, since every other key is named under the architecture. */
    if (assay_arch_name(c->arch) == NULL) {
        assay_diag_set(diag, NULL, "general.architecture", "llama or qwen2", "architecture %d",
                       (int)c->arch);
        return ASSAY_ERR_INVALID;
    }
    char key[64], other[64];
    /* Limits keep every tensor's element count and every scratch size well
     * inside int32 and size_t arithmetic, so later code need not re-check. */
    struct {
        const char *suffix;
        int32_t value;
        int32_t max;
    } dims[] = {
        {"block_count", c->n_layer, 256},
        {"embedding_length", c->d_model, 16384},
        {"attention.head_count", c->n_head, 256},
        {"attention.head_count_kv", c->n_kv_head, 256},
        {"rope.dimension_count", c->head_dim, 1024},
        {"feed_forward_length", c->d_ff, 65536},
        {"vocab_size", c->vocab, 1 << 20},
        {"context_length", c->n_ctx, 1 << 20},
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        if (dims[i].value < 1 || dims[i].value > dims[i].max) {
            char expected[64];
            snprintf(expected, sizeof expected, "an integer in 1..%d", (int)dims[i].max);
            assay_diag_set(diag, NULL, config_key(key, sizeof key, c, dims[i].suffix), expected,
                           "%d", (int)dims[i].value);
            return ASSAY_ERR_INVALID;
        }
    }
    if (c->n_head % c->n_kv_head != 0) {
        char expected[96];
        snprintf(expected, sizeof expected, "a divisor of %s",
                 config_key(other, sizeof other, c, "attention.head_count"));
        assay_diag_set(diag, NULL, config_key(key, sizeof key, c, "attention.head_count_kv"),
                       expected, "%d (head_count %d)", (int)c->n_kv_head, (int)c->n_head);
        return ASSAY_ERR_INVALID;
    }
    if (c->head_dim % 2 != 0) {
        assay_diag_set(diag, NULL, config_key(key, sizeof key, c, "rope.dimension_count"),
                       "an even number", "%d", (int)c->head_dim);
        return ASSAY_ERR_INVALID;
    }
    if ((int64_t)c->n_head * c->head_dim > 65536) {
        assay_diag_set(diag, NULL, config_key(key, sizeof key, c, "attention.head_count"),
                       "head_count * head_dim <= 65536", "%d * %d", (int)c->n_head,
                       (int)c->head_dim);
        return ASSAY_ERR_INVALID;
    }
    if (!(c->norm_eps > 0.0f && c->norm_eps < 1.0f)) {
        assay_diag_set(diag, NULL,
                       config_key(key, sizeof key, c, "attention.layer_norm_rms_epsilon"),
                       "a number in (0, 1)", "%g", (double)c->norm_eps);
        return ASSAY_ERR_INVALID;
    }
    if (!(c->rope_scale == 0.0f || (c->rope_scale > 0.0f && isfinite(c->rope_scale)))) {
        assay_diag_set(diag, NULL, config_key(key, sizeof key, c, "rope.scaling.factor"),
                       "0 (none) or a finite number > 0", "%g", (double)c->rope_scale);
        return ASSAY_ERR_INVALID;
    }
    if (c->rope_freqs && c->arch != ASSAY_ARCH_LLAMA) {
        assay_diag_set(diag, NULL, "rope_freqs.weight",
                       "RoPE frequency divisors only in a llama model (llama.cpp's qwen2 has none)",
                       "rope_freqs in a %s model", assay_arch_name(c->arch));
        return ASSAY_ERR_INVALID;
    }
    if (!(c->rope_theta > 1.0f && isfinite(c->rope_theta))) {
        assay_diag_set(diag, NULL, config_key(key, sizeof key, c, "rope.freq_base"),
                       "a finite number > 1", "%g", (double)c->rope_theta);
        return ASSAY_ERR_INVALID;
    }
    /* Every tensor's element count within int32 (the largest is the
     * embedding, a feed-forward or the attention's matrix); the whole
     * model may be larger (an 8B model is 2^33), its offsets are int64. */
    int64_t qd = (int64_t)c->n_head * c->head_dim;
    int64_t widest = c->vocab > c->d_ff ? c->vocab : c->d_ff;
    widest = widest > qd ? widest : qd;
    if (widest * c->d_model > ((int64_t)1 << 31)) {
        assay_diag_set(diag, NULL, "config", "at most 2^31 weights in a tensor", "%lld x %d",
                       (long long)widest, (int)c->d_model);
        return ASSAY_ERR_INVALID;
    }
    if (assay_model_config_n_params(c) > ((int64_t)1 << 40)) {
        assay_diag_set(diag, NULL, "config", "at most 2^40 parameters", "%lld",
                       (long long)assay_model_config_n_params(c));
        return ASSAY_ERR_INVALID;
    }
    return ASSAY_OK;
}

/* Point the tensor fields into model->data, in GGUF tensor order:
 * token_embd, then per layer attn_norm, q, (q bias), k, (k bias), v,
 * (v bias), output, ffn_norm, gate, up, down, then output_norm, output
 * (unless tied) and rope_freqs (when the model has it). */
static void bind_tensors(struct assay_model *m)
{
    const struct assay_model_config *c = &m->cfg;
    int64_t d = c->d_model, q = (int64_t)c->n_head * c->head_dim;
    int64_t kv = (int64_t)c->n_kv_head * c->head_dim, ff = c->d_ff;
    /* A mapped model's data holds the vectors alone: every matrix's place
     * is empty (each size times 0) and its pointer NULL. */
    const int64_t mat = m->mapped ? 0 : 1;
    float *p = m->data;
    m->tok_embd = p;
    p += (int64_t)c->vocab * d * mat;
    for (int32_t l = 0; l < c->n_layer; l++) {
        struct assay_layer_weights *w = &m->layers[l];
        w->attn_norm = p;
        p += d;
        w->wq = p;
        p += q * d * mat;
        if (c->qkv_bias) {
            w->bq = p;
            p += q;
        }
        w->wk = p;
        p += kv * d * mat;
        if (c->qkv_bias) {
            w->bk = p;
            p += kv;
        }
        w->wv = p;
        p += kv * d * mat;
        if (c->qkv_bias) {
            w->bv = p;
            p += kv;
        }
        w->wo = p;
        p += d * q * mat;
        w->ffn_norm = p;
        p += d;
        w->w_gate = p;
        p += ff * d * mat;
        w->w_up = p;
        p += ff * d * mat;
        w->w_down = p;
        p += d * ff * mat;
    }
    m->out_norm = p;
    p += d;
    m->output = m->tied ? m->tok_embd : p;
    if (!m->tied) {
        p += (int64_t)c->vocab * d * mat;
    }
    m->rope_freqs = c->rope_freqs ? p : NULL;
    if (m->mapped) {
        m->tok_embd = m->output = NULL;
        for (int32_t l = 0; l < c->n_layer; l++) {
            struct assay_layer_weights *w = &m->layers[l];
            w->wq = w->wk = w->wv = w->wo = w->w_gate = w->w_up = w->w_down = NULL;
        }
    }
}

/* The floats of a model's vectors: its norms, biases and RoPE divisors. */
static int64_t vector_floats(const struct assay_model_config *c)
{
    int64_t d = c->d_model, q = (int64_t)c->n_head * c->head_dim;
    int64_t kv = (int64_t)c->n_kv_head * c->head_dim;
    return c->n_layer * (2 * d + (c->qkv_bias ? q + 2 * kv : 0)) + d +
           (c->rope_freqs ? c->head_dim / 2 : 0);
}

/* Allocate an unbound-weights model for cfg (data zeroed). Exposed to the
 * GGUF loader through model_internal.h. */
enum assay_status assay_model_alloc(struct assay_model **out, const struct assay_model_config *cfg,
                                    bool tied)
{
    return assay_model_alloc_as(out, cfg, tied, false);
}

enum assay_status assay_model_alloc_as(struct assay_model **out,
                                       const struct assay_model_config *cfg, bool tied,
                                       bool mapped)
{
    *out = NULL;
    enum assay_status st = assay_model_config_validate(cfg, NULL);
    if (st != ASSAY_OK) {
        return st;
    }
    struct assay_model *m = assay_calloc(1, sizeof *m);
    if (m == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    m->cfg = *cfg;
    m->tied = tied;
    snprintf(m->tensor_types, sizeof m->tensor_types, "F32");
    m->eos_token = cfg->vocab > ASSAY_TOKEN_EOS ? ASSAY_TOKEN_EOS : -1;
    m->n_floats = assay_model_config_n_params(cfg) - (tied ? (int64_t)cfg->vocab * cfg->d_model : 0);
    m->mapped = mapped;
    m->layers = assay_calloc((size_t)cfg->n_layer, sizeof *m->layers);
    m->data = assay_calloc((size_t)(mapped ? vector_floats(cfg) : m->n_floats), sizeof(float));
    if (m->layers == NULL || m->data == NULL) {
        assay_model_free(m);
        return ASSAY_ERR_NOMEM;
    }
    bind_tensors(m);
    *out = m;
    return ASSAY_OK;
}

/* Elements first..first+n of a tensor of independent Gaussians of
 * standard deviation std drawn from stream `tensor`: elements 2j and 2j + 1
 * are the cosine and sine halves of one Box-Muller pair drawn with
 * assay_rng_u01(seed, 2j, tensor) and (seed, 2j + 1, tensor), so any range
 * of a tensor can be computed alone. */
static void fill_gaussian(float *x, int64_t first, int64_t n, float std, uint64_t seed,
                          uint32_t tensor)
{
    for (int64_t i = first & ~(int64_t)1; i < first + n; i += 2) {
        double u1 = assay_rng_u01(seed, (uint64_t)i, tensor);
        double u2 = assay_rng_u01(seed, (uint64_t)i + 1, tensor);
        double r = sqrt(-2.0 * log(1.0 - u1));
        if (i >= first) {
            x[i - first] = (float)(std * r * cos(2.0 * M_PI * u2));
        }
        if (i + 1 < first + n) {
            x[i + 1 - first] = (float)(std * r * sin(2.0 * M_PI * u2));
        }
    }
}

static void fill_const(float *x, int64_t n, float v)
{
    for (int64_t i = 0; i < n; i++) {
        x[i] = v;
    }
}

/* Llama 3.1's RoPE frequency divisor of pair i, for a context of 8192
 * extended by a factor of 8 (low-frequency factor 1, high-frequency factor
 * 4): pairs whose wavelength is shorter than 8192 / 4 keep their
 * frequency, those longer than 8192 / 1 turn 8 times slower, and those
 * between are blended smoothly. */
static float llama31_rope_divisor(const struct assay_model_config *c, int64_t i)
{
    const double factor = 8.0, low = 1.0, high = 4.0, original = 8192.0;
    double freq = pow((double)c->rope_theta, -2.0 * (double)i / c->head_dim);
    double wavelen = 2.0 * M_PI / freq;
    double divisor;
    if (wavelen < original / high) {
        divisor = 1.0;
    } else if (wavelen > original / low) {
        divisor = factor;
    } else {
        double smooth = (original / wavelen - low) / (high - low);
        divisor = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    return (float)divisor;
}

void assay_model_random_values(const struct assay_model_config *c,
                               struct assay_model_init_params params, uint64_t seed,
                               enum assay_weight_kind kind, int32_t layer, int64_t first,
                               int64_t n, float *out)
{
    const int64_t d = c->d_model, q = (int64_t)c->n_head * c->head_dim;
    const float sd = 1.0f / sqrtf((float)d);
    /* The draw streams: the token embedding 0, layer l's seven matrices
     * 1 + 7l.. in order, the output 1 + 7 n_layer, then (drawn after every
     * llama tensor, so a model with biases has the same other weights as
     * one without) layer l's three biases 2 + 7 n_layer + 3l.. */
    const uint32_t layer0 = 1 + 7 * (uint32_t)layer;
    const uint32_t output = 1 + 7 * (uint32_t)c->n_layer;
    const uint32_t bias0 = output + 1 + 3 * (uint32_t)layer;
    switch (kind) {
    case ASSAY_WEIGHT_ATTN_NORM:
    case ASSAY_WEIGHT_FFN_NORM:
    case ASSAY_WEIGHT_OUT_NORM:
        fill_const(out, n, 1.0f);
        return;
    case ASSAY_WEIGHT_ROPE_FREQS:
        for (int64_t i = 0; i < n; i++) {
            out[i] = llama31_rope_divisor(c, first + i);
        }
        return;
    case ASSAY_WEIGHT_Q:
        fill_gaussian(out, first, n, params.qk_gain * sd, seed, layer0);
        return;
    case ASSAY_WEIGHT_K:
        fill_gaussian(out, first, n, params.qk_gain * sd, seed, layer0 + 1);
        return;
    case ASSAY_WEIGHT_V:
        fill_gaussian(out, first, n, sd, seed, layer0 + 2);
        return;
    case ASSAY_WEIGHT_O:
        fill_gaussian(out, first, n, 1.0f / sqrtf((float)q), seed, layer0 + 3);
        return;
    case ASSAY_WEIGHT_GATE:
        fill_gaussian(out, first, n, sd, seed, layer0 + 4);
        return;
    case ASSAY_WEIGHT_UP:
        fill_gaussian(out, first, n, sd, seed, layer0 + 5);
        return;
    case ASSAY_WEIGHT_DOWN:
        fill_gaussian(out, first, n, 1.0f / sqrtf((float)c->d_ff), seed, layer0 + 6);
        return;
    case ASSAY_WEIGHT_Q_BIAS:
    case ASSAY_WEIGHT_K_BIAS:
    case ASSAY_WEIGHT_V_BIAS:
        fill_gaussian(out, first, n, ASSAY_INIT_BIAS_SD, seed,
                      bias0 + (uint32_t)(kind - ASSAY_WEIGHT_Q_BIAS));
        return;
    case ASSAY_WEIGHT_TOK_EMBD:
        if (!params.tied) {
            fill_gaussian(out, first, n, 1.0f, seed, 0);
            return;
        }
        break; /* one tensor, drawn as the output is */
    case ASSAY_WEIGHT_OUTPUT:
        break;
    }
    /* The output: with output_twins row 2i + 1 a copy of row 2i, then
     * every element times output_scale. Row by row, so that an odd row
     * draws its twin's elements. */
    for (int64_t i = first; i < first + n;) {
        int64_t row = i / d, col = i % d;
        int64_t len = d - col < first + n - i ? d - col : first + n - i;
        int64_t src = (c->output_twins && row % 2 == 1 ? row - 1 : row) * d + col;
        fill_gaussian(out + (i - first), src, len, params.out_gain * sd, seed, output);
        i += len;
    }
    for (int64_t i = 0; c->output_scale > 0.0f && c->output_scale != 1.0f && i < n; i++) {
        out[i] *= c->output_scale;
    }
}

struct assay_model_init_params assay_model_init_default_params(void)
{
    struct assay_model_init_params p = {ASSAY_INIT_QK_GAIN, ASSAY_INIT_OUT_GAIN, false};
    return p;
}

enum assay_status assay_model_init_random(struct assay_model **out,
                                          const struct assay_model_config *cfg, uint64_t seed)
{
    return assay_model_init_random_params(out, cfg, assay_model_init_default_params(), seed);
}

enum assay_status assay_model_init_random_params(struct assay_model **out,
                                                 const struct assay_model_config *cfg,
                                                 struct assay_model_init_params params,
                                                 uint64_t seed)
{
    if (!(params.qk_gain > 0.0f && isfinite(params.qk_gain) && params.out_gain > 0.0f &&
          isfinite(params.out_gain))) {
        *out = NULL;
        return ASSAY_ERR_INVALID;
    }
    struct assay_model *m;
    enum assay_status st = assay_model_alloc(&m, cfg, params.tied);
    if (st != ASSAY_OK) {
        *out = NULL;
        return st;
    }
    const struct assay_model_config *c = &m->cfg;
    int64_t d = c->d_model, q = (int64_t)c->n_head * c->head_dim;
    int64_t kv = (int64_t)c->n_kv_head * c->head_dim, ff = c->d_ff;
    const struct {
        enum assay_weight_kind kind;
        size_t offset; /* of the pointer in struct assay_layer_weights */
        int64_t n;
    } parts[] = {
        {ASSAY_WEIGHT_ATTN_NORM, offsetof(struct assay_layer_weights, attn_norm), d},
        {ASSAY_WEIGHT_Q, offsetof(struct assay_layer_weights, wq), q * d},
        {ASSAY_WEIGHT_K, offsetof(struct assay_layer_weights, wk), kv * d},
        {ASSAY_WEIGHT_V, offsetof(struct assay_layer_weights, wv), kv * d},
        {ASSAY_WEIGHT_O, offsetof(struct assay_layer_weights, wo), d * q},
        {ASSAY_WEIGHT_FFN_NORM, offsetof(struct assay_layer_weights, ffn_norm), d},
        {ASSAY_WEIGHT_GATE, offsetof(struct assay_layer_weights, w_gate), ff * d},
        {ASSAY_WEIGHT_UP, offsetof(struct assay_layer_weights, w_up), ff * d},
        {ASSAY_WEIGHT_DOWN, offsetof(struct assay_layer_weights, w_down), d * ff},
        {ASSAY_WEIGHT_Q_BIAS, offsetof(struct assay_layer_weights, bq), q},
        {ASSAY_WEIGHT_K_BIAS, offsetof(struct assay_layer_weights, bk), kv},
        {ASSAY_WEIGHT_V_BIAS, offsetof(struct assay_layer_weights, bv), kv},
    };
    assay_model_random_values(c, params, seed, ASSAY_WEIGHT_OUTPUT, 0, 0, (int64_t)c->vocab * d,
                              m->output);
    if (!params.tied) {
        assay_model_random_values(c, params, seed, ASSAY_WEIGHT_TOK_EMBD, 0, 0,
                                  (int64_t)c->vocab * d, m->tok_embd);
    }
    for (int32_t l = 0; l < c->n_layer; l++) {
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
            float *dst = *(float **)((char *)&m->layers[l] + parts[i].offset);
            if (dst != NULL) {
                assay_model_random_values(c, params, seed, parts[i].kind, l, 0, parts[i].n, dst);
            }
        }
    }
    assay_model_random_values(c, params, seed, ASSAY_WEIGHT_OUT_NORM, 0, 0, d, m->out_norm);
    if (c->rope_freqs) {
        assay_model_random_values(c, params, seed, ASSAY_WEIGHT_ROPE_FREQS, 0, 0, c->head_dim / 2,
                                  m->rope_freqs);
    }
    assay_model_rehash(m);
    *out = m;
    return ASSAY_OK;
}

enum assay_status assay_model_clone(const struct assay_model *model, struct assay_model **out)
{
    if (model->mapped) {
        *out = NULL;
        return ASSAY_ERR_UNSUPPORTED;
    }
    enum assay_status st = assay_model_alloc(out, &model->cfg, model->tied);
    if (st != ASSAY_OK) {
        return st;
    }
    memcpy((*out)->data, model->data, sizeof(float) * (size_t)model->n_floats);
    memcpy((*out)->tensor_types, model->tensor_types, sizeof model->tensor_types);
    (*out)->tok_embd_type = model->tok_embd_type;
    (*out)->output_type = model->output_type;
    for (int32_t l = 0; l < model->cfg.n_layer; l++) {
        (*out)->layers[l].types = model->layers[l].types;
    }
    (*out)->eos_token = model->eos_token;
    memcpy((*out)->sha256, model->sha256, sizeof model->sha256);
    return ASSAY_OK;
}

enum assay_status assay_model_derive_draft(const struct assay_model *model, double noise,
                                           uint64_t seed, struct assay_model **out)
{
    *out = NULL;
    if (!isfinite(noise) || noise < 0.0 || noise > 10.0) {
        return ASSAY_ERR_INVALID;
    }
    struct assay_model *d = NULL;
    enum assay_status st = assay_model_clone(model, &d);
    if (st != ASSAY_OK) {
        return st;
    }
    /* The purpose keeps these draws apart from the initialisation's
     * (whose tensors count from 0). */
    const uint32_t purpose = 0x6e656172u; /* "near" */
    for (int64_t i = 0; i < d->n_floats; i += 2) {
        double u1 = assay_rng_u01(seed, (uint64_t)i, purpose);
        double u2 = assay_rng_u01(seed, (uint64_t)i + 1, purpose);
        double r = sqrt(-2.0 * log(1.0 - u1));
        d->data[i] *= (float)(1.0 + noise * r * cos(2.0 * M_PI * u2));
        if (i + 1 < d->n_floats) {
            d->data[i + 1] *= (float)(1.0 + noise * r * sin(2.0 * M_PI * u2));
        }
    }
    snprintf(d->cfg.name, sizeof d->cfg.name, "near:%g", noise);
    assay_model_rehash(d);
    *out = d;
    return ASSAY_OK;
}

void assay_model_rehash(struct assay_model *m)
{
    if (m->mapped) {
        return;
    }
    struct assay_sha256 ctx;
    uint8_t digest[32];
    assay_sha256_init(&ctx);
    /* fp32 little-endian: the bytes as stored on every platform assay builds on. */
    assay_sha256_update(&ctx, m->data, (size_t)m->n_floats * sizeof(float));
    assay_sha256_final(&ctx, digest);
    assay_sha256_hex(digest, m->sha256);
}

void assay_model_free(struct assay_model *m)
{
    if (m == NULL) {
        return;
    }
    assay_gguf_free(m->file);
    assay_free(m->data);
    assay_free(m->layers);
    assay_free(m);
}
