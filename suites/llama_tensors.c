/*
 * llama_tensors.c - runs llama.cpp itself (libllama, the build of
 * scripts/build-llama-server.sh) on a token sequence and writes the
 * intermediate tensors its graph computes, for numerics_layers to compare
 * with the bundled engine's layer by layer (docs/numerics.md, "Where the
 * server and the reference part"). Not part of assay's build: the script
 * `build-llama-server.sh --tensors` compiles it against llama.cpp's
 * libraries at test time.
 *
 *   llama_tensors MODEL.gguf OUT.bin TOKENS [--ubatch U] [--threads T]
 *                 [--fa on|off] [--kv f16|f32]
 *
 * TOKENS is a comma-separated list of token ids, decoded in order in calls
 * of U tokens (default: all in one call, the path of a prompt; 1: each
 * token alone, the path of a decoded token), every row's logits kept. The
 * KV cache is F16 and flash attention on unless told otherwise (the
 * server's defaults on a CPU). OUT.bin holds, for every F32 or F16 tensor
 * of the graph whose name is one of llama.cpp's per-layer checkpoints
 * (attn_norm-L, Qcur-L, Kcur-L, Vcur-L, kqv_out-L, ffn_inp-L, ffn_norm-L,
 * ffn_swiglu-L, l_out-L, result_norm, result_output), one record:
 *
 *   u32 name length, the name (no NUL), i32 first position, i32 rows,
 *   i32 columns, rows x columns floats (little-endian)
 *
 * where rows are the call's tokens and columns the rest of the tensor (a
 * tensor of [head_dim, heads, tokens] has head_dim x heads columns). A name
 * computed twice in one call (Qcur before and after RoPE) is written each
 * time; the last is the final value. Exit 0, or 1 with a message.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"

#define MAX_TOKENS 4096

struct dump {
    FILE *out;
    int32_t pos0;   /* the position of the current call's first row */
    int32_t n_rows; /* the current call's tokens */
    int32_t n_rec;  /* records written */
    int failed;
};

static int wanted(const char *name)
{
    static const char *const prefixes[] = {"attn_norm-", "Qcur-",       "Kcur-",
                                           "Vcur-",      "kqv_out-",    "ffn_inp-",
                                           "ffn_norm-",  "ffn_swiglu-", "l_out-"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) {
            return 1;
        }
    }
    return strcmp(name, "result_norm") == 0 || strcmp(name, "result_output") == 0;
}

static bool on_tensor(struct ggml_tensor *t, bool ask, void *user)
{
    struct dump *d = user;
    int want = wanted(t->name) && (t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_F16) &&
               ggml_is_contiguous(t);
    if (ask || !want || d->failed) {
        return true; /* ask for every tensor: the graph runs to its end */
    }
    int64_t n = ggml_nelements(t);
    int64_t rows = d->n_rows, cols = n / rows; /* every checkpoint has a row per token */
    if (n % rows != 0) {
        return true;
    }
    /* an F32 tensor is read straight into vals; an F16 one through raw */
    float *vals = malloc(sizeof(float) * (size_t)n);
    void *raw = t->type == GGML_TYPE_F16 ? malloc(ggml_nbytes(t)) : vals;
    if (vals == NULL || raw == NULL) {
        if (raw != vals) {
            free(raw);
        }
        free(vals);
        d->failed = 1;
        return true;
    }
    ggml_backend_tensor_get(t, raw, 0, ggml_nbytes(t));
    if (raw != vals) {
        ggml_fp16_to_fp32_row(raw, vals, n);
        free(raw);
    }
    uint32_t len = (uint32_t)strlen(t->name);
    int32_t head[3] = {d->pos0, (int32_t)rows, (int32_t)cols};
    if (fwrite(&len, sizeof len, 1, d->out) != 1 || fwrite(t->name, 1, len, d->out) != len ||
        fwrite(head, sizeof head, 1, d->out) != 1 ||
        fwrite(vals, sizeof(float), (size_t)n, d->out) != (size_t)n) {
        d->failed = 1;
    }
    d->n_rec++;
    free(vals);
    return true;
}

static int parse_tokens(const char *s, llama_token *tok, int32_t *n)
{
    *n = 0;
    while (*s != '\0') {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno != 0 || v < 0 || v > INT32_MAX || *n == MAX_TOKENS ||
            (*end != ',' && *end != '\0')) {
            return -1;
        }
        tok[(*n)++] = (llama_token)v;
        s = *end == ',' ? end + 1 : end;
    }
    return *n > 0 ? 0 : -1;
}

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}

int main(int argc, char **argv)
{
    static llama_token tok[MAX_TOKENS];
    int32_t n_tok = 0, ubatch = 0, threads = 1, fa = 1, kv16 = 1;
    if (argc < 4 || parse_tokens(argv[3], tok, &n_tok) != 0) {
        fprintf(stderr,
                "usage: %s MODEL.gguf OUT.bin TOKENS [--ubatch U] [--threads T]\n"
                "       [--fa on|off] [--kv f16|f32]\n"
                "  TOKENS: comma-separated token ids (at most %d)\n",
                argv[0], MAX_TOKENS);
        return 1;
    }
    for (int i = 4; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v != NULL && strcmp(argv[i], "--ubatch") == 0 && atoi(v) > 0) {
            ubatch = atoi(v);
        } else if (v != NULL && strcmp(argv[i], "--threads") == 0 && atoi(v) > 0) {
            threads = atoi(v);
        } else if (v != NULL && strcmp(argv[i], "--fa") == 0 &&
                   (strcmp(v, "on") == 0 || strcmp(v, "off") == 0)) {
            fa = strcmp(v, "on") == 0;
        } else if (v != NULL && strcmp(argv[i], "--kv") == 0 &&
                   (strcmp(v, "f16") == 0 || strcmp(v, "f32") == 0)) {
            kv16 = strcmp(v, "f16") == 0;
        } else {
            fprintf(stderr, "%s: bad option '%s'%s%s\n", argv[0], argv[i], v ? " " : "",
                    v ? v : "");
            return 1;
        }
    }
    if (ubatch == 0 || ubatch > n_tok) {
        ubatch = n_tok;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (model == NULL) {
        fprintf(stderr, "%s: llama.cpp could not load %s\n", argv[0], argv[1]);
        return 1;
    }
    int32_t vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    for (int32_t i = 0; i < n_tok; i++) {
        if (tok[i] >= vocab) {
            fprintf(stderr, "%s: token %d is outside the vocabulary (%d)\n", argv[0], (int)tok[i],
                    (int)vocab);
            return 1;
        }
    }
    struct dump d = {.out = fopen(argv[2], "wb")};
    if (d.out == NULL) {
        fprintf(stderr, "%s: cannot write %s: %s\n", argv[0], argv[2], strerror(errno));
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_tok < 256 ? 256 : n_tok);
    cp.n_batch = (uint32_t)ubatch;
    cp.n_ubatch = (uint32_t)ubatch;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.flash_attn_type = fa ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = kv16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    cp.type_v = kv16 ? GGML_TYPE_F16 : GGML_TYPE_F32;
    cp.cb_eval = on_tensor;
    cp.cb_eval_user_data = &d;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (ctx == NULL) {
        fprintf(stderr, "%s: llama.cpp could not make a context\n", argv[0]);
        return 1;
    }
    struct llama_batch b = llama_batch_init(ubatch, 0, 1);
    for (int32_t p = 0; p < n_tok && !d.failed; p += ubatch) {
        int32_t n = n_tok - p < ubatch ? n_tok - p : ubatch;
        b.n_tokens = n;
        for (int32_t i = 0; i < n; i++) {
            b.token[i] = tok[p + i];
            b.pos[i] = p + i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = 1;
        }
        d.pos0 = p;
        d.n_rows = n;
        if (llama_decode(ctx, b) != 0) {
            fprintf(stderr, "%s: llama_decode failed at position %d\n", argv[0], (int)p);
            return 1;
        }
    }
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    if (fclose(d.out) != 0 || d.failed) {
        fprintf(stderr, "%s: writing %s failed\n", argv[0], argv[2]);
        return 1;
    }
    fprintf(stderr, "%s: %d tensors of %d tokens in calls of %d to %s\n", argv[0], (int)d.n_rec,
            (int)n_tok, (int)ubatch, argv[2]);
    return 0;
}
