/*
 * export_gguf - write one of assay's models, or a random model of any
 * llama shape, as a GGUF file that llama.cpp loads, for the audit fixtures,
 * the test models (scripts/make-test-models.sh) and by hand:
 *
 *   export_gguf OUT.gguf [MODEL [SEED]]           (defaults: tinygpt 1)
 *   export_gguf OUT.gguf (MODEL | --shape SHAPE) [--seed N] [--gain G]
 *               [--qk-gain G] [--measure P] [--scale-layer L:F]
 *
 * MODEL is a config name (assay_model_config_names: tinygpt, draft, mini, ...).
 * SHAPE is a comma-separated list of key=value:
 *   d_model, layers, heads, d_ff, vocab        required
 *   kv_heads (default heads), head_dim (default d_model / heads),
 *   ctx (2048), norm_eps (1e-5), rope_theta (10000), rope_scale (none),
 *   arch (llama or qwen2), bias (0 or 1: q/k/v biases), tied (0 or 1),
 *   rope_freqs (0 or 1: llama 3.1's RoPE frequency divisors; llama only),
 *   twins (0 or 1: output row 2i + 1 a copy of row 2i, so that tokens 2i
 *   and 2i + 1 have exactly the same logit in any format)
 * e.g. d_model=768,layers=12,heads=12,kv_heads=3,head_dim=64,d_ff=2048,vocab=32000
 *
 * The weights are the documented random initialisation (engine/model.h)
 * with SEED (default 1) and the gains: --gain is the output gain, which sets
 * how peaked the next-token distributions are; --qk-gain the query/key
 * gain. A config name keeps the library's gains (so its weights, and their
 * hash, are those of the fixtures); a shape takes --gain EXPORT_SHAPE_GAIN
 * and --qk-gain EXPORT_SHAPE_QK_GAIN by default. The output gain 5 gives
 * next-token entropies of a few nats, as trained models have (about 2.8
 * nats and a top-1 probability of 0.4 at vocab 32000). The query/key gain
 * 1 rather than the library's 2: with 12 layers the context matters fully
 * either way, and at 2 attention is so sharp that the model is chaotic -
 * llama.cpp's Q8_0 of the head_dim 64 test model moved its first top
 * logprobs by up to 0.4 nats at 2, by 0.06 at 1 (0.3 for the head_dim 128
 * one). That is still more than a trained model moves under Q8_0.
 *
 * --measure P runs the oracle (double precision) over P random prompts of
 * EXPORT_MEASURE_LEN tokens and prints the mean entropy of the next-token
 * distribution (nats) and the mean top-1 probability over every position,
 * and the same figures for other output gains (the logits scale with it),
 * and how far another random prefix before the same last token moves the
 * next-token distribution (total variation: 0 when the context is ignored).
 * Default 0 for a config name, 4 for a shape; keep it small on large
 * models, as the oracle is written for clarity, not speed.
 *
 * --type F32|F16 writes the file without building the model (a chunk at a
 * time: an 8B shape needs 32 GB in fp32, its F16 file 16 GB of disk and
 * little memory), the matrices stored as F32 (the same file as without
 * --type) or F16; the hash printed is still the fp32 model's. Neither
 * --measure nor --scale-layer, which need the model built, go with it.
 *
 * --scale-layer L:F multiplies every matrix of layer L (q, k, v, output,
 * gate, up, down) by F after the initialisation: a model that differs from
 * the unscaled one by little, for the audit's must-fail controls (a server
 * serving a slightly different file than the one it is audited against).
 *
 * Prints the file, the config, the seed and the weights hash on its first
 * line. Exit status 0, or 2 with the reason on stderr (bad arguments, or a
 * model that cannot be built, measured or written).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "oracles/oracle.h"

#define EXPORT_SHAPE_GAIN 5.0f
#define EXPORT_SHAPE_QK_GAIN 1.0f
#define EXPORT_MEASURE_LEN 16
#define EXPORT_PROMPT_PURPOSE 0x70726f6du /* "prom": the prompts' draws */
#define EXPORT_PREFIX_PURPOSE 0x70726566u /* "pref": the other prefixes */

struct export_args {
    const char *out;
    const char *model;  /* config name, or NULL with a shape */
    const char *shape;  /* or NULL */
    uint64_t seed;
    struct assay_model_init_params init;
    int gain_set;
    int qk_gain_set;
    int32_t measure;    /* prompts; -1 = the default */
    int32_t scale_layer; /* -1: none */
    float scale;         /* the factor of layer scale_layer's matrices */
    const char *type;    /* --type: written a chunk at a time; NULL: built
                          * in memory and saved as F32 */
};

static void usage(const char *argv0)
{
    char names[200];
    assay_model_config_names(names, sizeof names);
    fprintf(stderr,
            "usage: %s OUT.gguf [MODEL [SEED]]\n"
            "       %s OUT.gguf (MODEL | --shape K=V,...) [--seed N] [--gain G] [--qk-gain G]"
            " [--measure P] [--scale-layer L:F] [--type F32|F16]\n"
            "  MODEL: %s\n"
            "  SHAPE keys: d_model layers heads d_ff vocab (required), kv_heads head_dim ctx"
            " norm_eps rope_theta rope_scale rope_freqs arch bias tied twins\n",
            argv0, argv0, names);
}

static int parse_u64(const char *what, const char *s, uint64_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || s[0] == '-') {
        fprintf(stderr, "export_gguf: %s: expected a non-negative integer, got \"%s\"\n", what, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_i32(const char *what, const char *s, int32_t *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || errno != 0 || v < 0 || v > INT32_MAX) {
        fprintf(stderr, "export_gguf: %s: expected an integer in 0..%d, got \"%s\"\n", what,
                (int)INT32_MAX, s);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

static int parse_float(const char *what, const char *s, float *out)
{
    char *end = NULL;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || *end != '\0' || errno != 0 || !isfinite(v) || !(v > 0.0f)) {
        fprintf(stderr, "export_gguf: %s: expected a positive number, got \"%s\"\n", what, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* Fill cfg from "k=v,k=v"; 0, or -1 with the reason on stderr. */
static int parse_shape(const char *shape, struct assay_model_config *cfg, bool *tied)
{
    *tied = false;
    memset(cfg, 0, sizeof *cfg);
    cfg->n_kv_head = -1;
    cfg->head_dim = -1;
    cfg->n_ctx = 2048;
    cfg->norm_eps = 1e-5f;
    cfg->rope_theta = 10000.0f;
    int32_t *required[] = {&cfg->d_model, &cfg->n_layer, &cfg->n_head, &cfg->d_ff, &cfg->vocab};
    const char *required_names[] = {"d_model", "layers", "heads", "d_ff", "vocab"};
    for (size_t i = 0; i < 5; i++) {
        *required[i] = -1;
    }

    char buf[512];
    if (strlen(shape) >= sizeof buf) {
        fprintf(stderr, "export_gguf: --shape: longer than %zu characters\n", sizeof buf - 1);
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", shape);
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (eq == NULL) {
            fprintf(stderr, "export_gguf: --shape: expected key=value, got \"%s\"\n", item);
            return -1;
        }
        *eq = '\0';
        const char *key = item, *value = eq + 1;
        int32_t *field = NULL;
        if (strcmp(key, "d_model") == 0) {
            field = &cfg->d_model;
        } else if (strcmp(key, "layers") == 0) {
            field = &cfg->n_layer;
        } else if (strcmp(key, "heads") == 0) {
            field = &cfg->n_head;
        } else if (strcmp(key, "kv_heads") == 0) {
            field = &cfg->n_kv_head;
        } else if (strcmp(key, "head_dim") == 0) {
            field = &cfg->head_dim;
        } else if (strcmp(key, "d_ff") == 0) {
            field = &cfg->d_ff;
        } else if (strcmp(key, "vocab") == 0) {
            field = &cfg->vocab;
        } else if (strcmp(key, "ctx") == 0) {
            field = &cfg->n_ctx;
        }
        char what[64];
        snprintf(what, sizeof what, "--shape %s", key);
        if (field != NULL) {
            if (parse_i32(what, value, field) != 0) {
                return -1;
            }
        } else if (strcmp(key, "norm_eps") == 0) {
            if (parse_float(what, value, &cfg->norm_eps) != 0) {
                return -1;
            }
        } else if (strcmp(key, "rope_theta") == 0) {
            if (parse_float(what, value, &cfg->rope_theta) != 0) {
                return -1;
            }
        } else if (strcmp(key, "rope_scale") == 0) {
            if (parse_float(what, value, &cfg->rope_scale) != 0) {
                return -1;
            }
        } else if (strcmp(key, "arch") == 0) {
            if (strcmp(value, "llama") == 0) {
                cfg->arch = ASSAY_ARCH_LLAMA;
            } else if (strcmp(value, "qwen2") == 0) {
                cfg->arch = ASSAY_ARCH_QWEN2;
            } else {
                fprintf(stderr, "export_gguf: %s: expected llama or qwen2, got \"%s\"\n", what,
                        value);
                return -1;
            }
        } else if (strcmp(key, "bias") == 0 || strcmp(key, "tied") == 0 ||
                   strcmp(key, "rope_freqs") == 0 || strcmp(key, "twins") == 0) {
            bool *flag = strcmp(key, "bias") == 0    ? &cfg->qkv_bias
                         : strcmp(key, "tied") == 0  ? tied
                         : strcmp(key, "twins") == 0 ? &cfg->output_twins
                                                     : &cfg->rope_freqs;
            if (strcmp(value, "0") != 0 && strcmp(value, "1") != 0) {
                fprintf(stderr, "export_gguf: %s: expected 0 or 1, got \"%s\"\n", what, value);
                return -1;
            }
            *flag = value[0] == '1';
        } else {
            fprintf(stderr,
                    "export_gguf: --shape: unknown key \"%s\" (expected d_model, layers, heads,"
                    " kv_heads, head_dim, d_ff, vocab, ctx, norm_eps, rope_theta, rope_scale,"
                    " rope_freqs, arch, bias, tied or twins)\n",
                    key);
            return -1;
        }
    }
    for (size_t i = 0; i < 5; i++) {
        if (*required[i] < 0) {
            fprintf(stderr, "export_gguf: --shape: missing %s\n", required_names[i]);
            return -1;
        }
    }
    if (cfg->n_kv_head < 0) {
        cfg->n_kv_head = cfg->n_head;
    }
    if (cfg->head_dim < 0) {
        if (cfg->n_head == 0 || cfg->d_model % cfg->n_head != 0) {
            fprintf(stderr, "export_gguf: --shape: give head_dim (heads does not divide d_model)\n");
            return -1;
        }
        cfg->head_dim = cfg->d_model / cfg->n_head;
    }
    snprintf(cfg->name, sizeof cfg->name, "%s-d%d-l%d-h%d-kv%d-hd%d",
             cfg->arch == ASSAY_ARCH_QWEN2 ? "qwen2" : "random", (int)cfg->d_model,
             (int)cfg->n_layer, (int)cfg->n_head, (int)cfg->n_kv_head, (int)cfg->head_dim);
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (assay_model_config_validate(cfg, &diag) != ASSAY_OK) {
        char msg[1024];
        fprintf(stderr, "export_gguf: --shape: %s\n", assay_diag_format(&diag, msg, sizeof msg));
        return -1;
    }
    return 0;
}

static int parse_args(int argc, char **argv, struct export_args *a)
{
    memset(a, 0, sizeof *a);
    a->seed = 1;
    a->init = assay_model_init_default_params();
    a->measure = -1;
    a->scale_layer = -1;
    if (argc < 2 || argv[1][0] == '-') {
        return -1;
    }
    a->out = argv[1];
    int n_positional = 0;
    for (int i = 2; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-') {
            if (n_positional == 0 && a->shape == NULL) {
                a->model = arg;
            } else if (n_positional == 1 && a->model != NULL) {
                if (parse_u64("SEED", arg, &a->seed) != 0) {
                    return -1;
                }
            } else {
                fprintf(stderr, "export_gguf: unexpected argument \"%s\"\n", arg);
                return -1;
            }
            n_positional++;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "export_gguf: %s: expected a value\n", arg);
            return -1;
        }
        const char *value = argv[++i];
        if (strcmp(arg, "--shape") == 0 && a->model == NULL) {
            a->shape = value;
        } else if (strcmp(arg, "--shape") == 0) {
            fprintf(stderr, "export_gguf: give MODEL or --shape, not both\n");
            return -1;
        } else if (strcmp(arg, "--seed") == 0) {
            if (parse_u64("--seed", value, &a->seed) != 0) {
                return -1;
            }
        } else if (strcmp(arg, "--gain") == 0) {
            if (parse_float("--gain", value, &a->init.out_gain) != 0) {
                return -1;
            }
            a->gain_set = 1;
        } else if (strcmp(arg, "--qk-gain") == 0) {
            if (parse_float("--qk-gain", value, &a->init.qk_gain) != 0) {
                return -1;
            }
            a->qk_gain_set = 1;
        } else if (strcmp(arg, "--scale-layer") == 0) {
            char layer[32];
            const char *colon = strchr(value, ':');
            if (colon == NULL || (size_t)(colon - value) >= sizeof layer) {
                fprintf(stderr, "export_gguf: --scale-layer: expected L:F, got \"%s\"\n", value);
                return -1;
            }
            memcpy(layer, value, (size_t)(colon - value));
            layer[colon - value] = '\0';
            if (parse_i32("--scale-layer L", layer, &a->scale_layer) != 0 ||
                parse_float("--scale-layer F", colon + 1, &a->scale) != 0) {
                return -1;
            }
        } else if (strcmp(arg, "--measure") == 0) {
            if (parse_i32("--measure", value, &a->measure) != 0) {
                return -1;
            }
        } else if (strcmp(arg, "--type") == 0) {
            if (strcmp(value, "F32") != 0 && strcmp(value, "F16") != 0) {
                fprintf(stderr, "export_gguf: --type: expected F32 or F16, got \"%s\"\n", value);
                return -1;
            }
            a->type = value;
        } else {
            fprintf(stderr, "export_gguf: unknown option \"%s\"\n", arg);
            return -1;
        }
    }
    if (a->model != NULL && a->shape != NULL) {
        fprintf(stderr, "export_gguf: give MODEL or --shape, not both\n");
        return -1;
    }
    if (a->model == NULL && a->shape == NULL) {
        a->model = "tinygpt";
    }
    if (a->shape != NULL && !a->gain_set) {
        a->init.out_gain = EXPORT_SHAPE_GAIN;
    }
    if (a->shape != NULL && !a->qk_gain_set) {
        a->init.qk_gain = EXPORT_SHAPE_QK_GAIN;
    }
    if (a->type != NULL && (a->measure > 0 || a->scale_layer >= 0)) {
        fprintf(stderr, "export_gguf: --type writes the model without building it; --measure and "
                        "--scale-layer need it built (leave --type out)\n");
        return -1;
    }
    if (a->measure < 0) {
        a->measure = a->shape != NULL && a->type == NULL ? 4 : 0;
    }
    return 0;
}

/* Entropy (nats) and top-1 probability of softmax(scale * logits). */
static void softmax_stats(const double *logits, int32_t vocab, double scale, double *entropy,
                          double *top1)
{
    double max = -INFINITY;
    for (int32_t v = 0; v < vocab; v++) {
        max = fmax(max, scale * logits[v]);
    }
    double z = 0.0, zx = 0.0;
    for (int32_t v = 0; v < vocab; v++) {
        double x = scale * logits[v] - max;
        double e = exp(x);
        z += e;
        zx += e * x;
    }
    /* H = log Z - E[x] with x the shifted logits; the top token has x = 0. */
    *entropy = log(z) - zx / z;
    *top1 = 1.0 / z;
}

/* Turn logits into probabilities in place; returns the top token. */
static int32_t softmax_in_place(double *x, int32_t vocab)
{
    int32_t top = 0;
    for (int32_t v = 1; v < vocab; v++) {
        if (x[v] > x[top]) {
            top = v;
        }
    }
    double max = x[top], z = 0.0;
    for (int32_t v = 0; v < vocab; v++) {
        x[v] = exp(x[v] - max);
        z += x[v];
    }
    for (int32_t v = 0; v < vocab; v++) {
        x[v] /= z;
    }
    return top;
}

/*
 * Run the oracle over n_prompts random prompts and print the mean entropy
 * and top-1 probability at the model's output gain and at a few others
 * (the logits are proportional to the output gain, so one pass serves all).
 */
static int measure(const struct assay_model *m, float out_gain, int32_t n_prompts, uint64_t seed)
{
    const int32_t vocab = m->cfg.vocab;
    const int32_t len = m->cfg.n_ctx < EXPORT_MEASURE_LEN ? m->cfg.n_ctx : EXPORT_MEASURE_LEN;
    static const double gains[] = {1.0, 2.0, 3.0, 4.0, 4.5, 5.0, 5.5, 6.0, 8.0};
    enum { N_GAINS = sizeof gains / sizeof gains[0] };
    double sum_h[N_GAINS + 1] = {0}, sum_p[N_GAINS + 1] = {0};
    double min_h = INFINITY, max_h = 0.0;

    struct assay_oracle *oracle = NULL;
    int32_t *tokens = malloc((size_t)len * sizeof *tokens);
    double *logits = malloc((size_t)len * (size_t)vocab * sizeof *logits);
    if (tokens == NULL || logits == NULL ||
        assay_oracle_init(&oracle, m, len) != ASSAY_OK) {
        fprintf(stderr, "export_gguf: out of memory for the measurement\n");
        free(tokens);
        free(logits);
        return -1;
    }
    for (int32_t p = 0; p < n_prompts; p++) {
        for (int32_t t = 0; t < len; t++) {
            double u = assay_rng_u01(seed, (uint64_t)p * (uint64_t)len + (uint64_t)t,
                                     EXPORT_PROMPT_PURPOSE);
            tokens[t] = (int32_t)(u * vocab);
        }
        enum assay_status st = assay_oracle_logits(oracle, tokens, len, logits);
        if (st != ASSAY_OK) {
            fprintf(stderr, "export_gguf: the oracle failed: %s\n", assay_status_str(st));
            assay_oracle_free(oracle);
            free(tokens);
            free(logits);
            return -1;
        }
        for (int32_t t = 0; t < len; t++) {
            const double *row = logits + (size_t)t * (size_t)vocab;
            double h, top1;
            softmax_stats(row, vocab, 1.0, &h, &top1);
            sum_h[N_GAINS] += h;
            sum_p[N_GAINS] += top1;
            min_h = fmin(min_h, h);
            max_h = fmax(max_h, h);
            for (int g = 0; g < N_GAINS; g++) {
                softmax_stats(row, vocab, gains[g] / out_gain, &h, &top1);
                sum_h[g] += h;
                sum_p[g] += top1;
            }
        }
    }
    /* How much the context matters: the next-token distribution after each
     * prompt against that after another random prefix with the same last
     * token. A model that ignores its context gives the same distribution
     * (total variation 0). */
    double sum_tv = 0.0;
    int32_t same_top = 0;
    double *p_a = malloc((size_t)vocab * sizeof *p_a);
    double *p_b = malloc((size_t)vocab * sizeof *p_b);
    int32_t *other = malloc((size_t)len * sizeof *other);
    if (p_a == NULL || p_b == NULL || other == NULL) {
        fprintf(stderr, "export_gguf: out of memory for the measurement\n");
        free(p_a);
        free(p_b);
        free(other);
        assay_oracle_free(oracle);
        free(tokens);
        free(logits);
        return -1;
    }
    for (int32_t p = 0; p < n_prompts; p++) {
        for (int32_t t = 0; t < len; t++) {
            uint64_t counter = (uint64_t)p * (uint64_t)len + (uint64_t)t;
            tokens[t] = (int32_t)(assay_rng_u01(seed, counter, EXPORT_PROMPT_PURPOSE) * vocab);
            other[t] = (int32_t)(assay_rng_u01(seed, counter, EXPORT_PREFIX_PURPOSE) * vocab);
        }
        other[len - 1] = tokens[len - 1];
        if (assay_oracle_next_logits(oracle, tokens, len, p_a) != ASSAY_OK ||
            assay_oracle_next_logits(oracle, other, len, p_b) != ASSAY_OK) {
            fprintf(stderr, "export_gguf: the oracle failed\n");
            break;
        }
        int32_t top_a = softmax_in_place(p_a, vocab), top_b = softmax_in_place(p_b, vocab);
        double tv = 0.0;
        for (int32_t v = 0; v < vocab; v++) {
            tv += 0.5 * fabs(p_a[v] - p_b[v]);
        }
        sum_tv += tv;
        same_top += top_a == top_b;
    }
    free(p_a);
    free(p_b);
    free(other);

    double n = (double)n_prompts * len;
    printf("next-token entropy over %d random prompts x %d positions: mean %.3f nats"
           " (min %.3f, max %.3f; log(vocab) = %.3f), mean top-1 probability %.3f, output gain %g\n",
           (int)n_prompts, (int)len, sum_h[N_GAINS] / n, min_h, max_h, log((double)vocab),
           sum_p[N_GAINS] / n, (double)out_gain);
    printf("  at other output gains (same prompts):");
    for (int g = 0; g < N_GAINS; g++) {
        printf(" %g: %.2f nats / %.2f", gains[g], sum_h[g] / n, sum_p[g] / n);
        printf(g + 1 < N_GAINS ? "," : "\n");
    }
    printf("  context: another random prefix before the same last token moves the next-token"
           " distribution by a total variation of %.3f on average; same top token in %d of %d\n",
           sum_tv / n_prompts, (int)same_top, (int)n_prompts);
    assay_oracle_free(oracle);
    free(tokens);
    free(logits);
    return 0;
}

/* Multiply every matrix of layer l by f (the norms and biases stay). */
static void scale_layer(struct assay_model *m, int32_t l, float f)
{
    const struct assay_model_config *c = &m->cfg;
    int64_t q = (int64_t)c->n_head * c->head_dim, kv = (int64_t)c->n_kv_head * c->head_dim;
    struct assay_layer_weights *w = &m->layers[l];
    struct {
        float *p;
        int64_t n;
    } mats[] = {{w->wq, q * c->d_model},      {w->wk, kv * c->d_model},
                {w->wv, kv * c->d_model},     {w->wo, c->d_model * q},
                {w->w_gate, c->d_ff * c->d_model}, {w->w_up, c->d_ff * c->d_model},
                {w->w_down, c->d_model * c->d_ff}};
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) {
        for (int64_t j = 0; j < mats[i].n; j++) {
            mats[i].p[j] *= f;
        }
    }
    assay_model_rehash(m);
}

/* --type: the model written a chunk at a time, never built. */
static int write_streamed(const struct export_args *a, const struct assay_model_config *cfg)
{
    struct assay_diag diag;
    assay_diag_clear(&diag);
    char sha[65];
    uint32_t type = strcmp(a->type, "F16") == 0 ? ASSAY_GGML_TYPE_F16 : ASSAY_GGML_TYPE_F32;
    enum assay_status st =
        assay_model_write_random_gguf(cfg, a->init, a->seed, type, a->out, sha, &diag);
    if (st != ASSAY_OK) {
        char msg[1024];
        fprintf(stderr, "export_gguf: %s (%s)\n", assay_diag_format(&diag, msg, sizeof msg),
                assay_status_str(st));
        return 2;
    }
    printf("%s %s seed %llu sha256 %s\n", a->out, cfg->name, (unsigned long long)a->seed, sha);
    printf("%lld parameters, output gain %g, query/key gain %g, matrices stored as %s\n",
           (long long)(assay_model_config_n_params(cfg) -
                       (a->init.tied ? (int64_t)cfg->vocab * cfg->d_model : 0)),
           (double)a->init.out_gain, (double)a->init.qk_gain, a->type);
    return 0;
}

int main(int argc, char **argv)
{
    struct export_args a;
    if (parse_args(argc, argv, &a) != 0) {
        usage(argv[0]);
        return 2;
    }
    struct assay_model_config cfg;
    if (a.shape != NULL) {
        if (parse_shape(a.shape, &cfg, &a.init.tied) != 0) {
            return 2;
        }
    } else if (assay_model_config_by_name(a.model, &cfg) != ASSAY_OK) {
        char names[200];
        assay_model_config_names(names, sizeof names);
        fprintf(stderr, "export_gguf: MODEL: expected one of %s, got \"%s\"\n", names, a.model);
        return 2;
    }
    if (a.type != NULL) {
        return write_streamed(&a, &cfg);
    }
    struct assay_model *m = NULL;
    enum assay_status st = assay_model_init_random_params(&m, &cfg, a.init, a.seed);
    if (st != ASSAY_OK) {
        fprintf(stderr, "export_gguf: could not build %s: %s\n", cfg.name, assay_status_str(st));
        return 2;
    }
    if (a.scale_layer >= 0) {
        if (a.scale_layer >= cfg.n_layer || !isfinite(a.scale)) {
            fprintf(stderr, "export_gguf: --scale-layer: layer %d of %d, factor %g\n",
                    (int)a.scale_layer, (int)cfg.n_layer, (double)a.scale);
            assay_model_free(m);
            return 2;
        }
        scale_layer(m, a.scale_layer, a.scale);
    }
    struct assay_diag diag;
    assay_diag_clear(&diag);
    st = assay_model_save_gguf(m, a.out, &diag);
    if (st != ASSAY_OK) {
        char msg[1024];
        fprintf(stderr, "export_gguf: %s (%s)\n", assay_diag_format(&diag, msg, sizeof msg),
                assay_status_str(st));
        assay_model_free(m);
        return 2;
    }
    printf("%s %s seed %llu sha256 %s\n", a.out, cfg.name, (unsigned long long)a.seed, m->sha256);
    if (a.shape != NULL || a.gain_set || a.measure > 0) {
        printf("%lld parameters, output gain %g, query/key gain %g\n", (long long)m->n_floats,
               (double)a.init.out_gain, (double)a.init.qk_gain);
    }
    fflush(stdout);
    int rc = 0;
    if (a.measure > 0 && measure(m, a.init.out_gain, a.measure, a.seed) != 0) {
        rc = 2;
    }
    assay_model_free(m);
    return rc;
}
