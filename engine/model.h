/*
 * model.h - TinyGPT: the configuration and weights of a llama-style decoder.
 *
 * A model is plain data shared read-only by the engine and the oracle (the
 * oracle may include this header and nothing else of engine/). Weights are
 * fp32, row-major with the shape [out][in] of GGUF and of most checkpoints;
 * the engine keeps its own transposed copy for its products. A mapped model
 * (assay_model_load_gguf_mapped) leaves its matrices in the file and has
 * them decoded row by row when read (assay_model_matrix_rows).
 *
 * Lifetime: assay_model_init_random / assay_model_load_gguf allocate, and
 * assay_model_free releases.
 */
#ifndef ASSAY_MODEL_H
#define ASSAY_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"

/* Token ids of the 260-token vocabulary: ids 0..255 are the bytes. */
enum {
    ASSAY_TOKEN_BOS = 256,
    ASSAY_TOKEN_EOS = 257,
    ASSAY_TOKEN_PAD = 258,
    ASSAY_TOKEN_UNK = 259,
    ASSAY_VOCAB_TINYGPT = 260,
};

/* The architectures assay loads, as GGUF's general.architecture names
 * them. They differ in the metadata prefix and the RoPE layout: llama
 * rotates adjacent pairs (x[2i], x[2i+1]) of a head, qwen2 (llama.cpp's
 * NEOX layout) the pairs (x[i], x[i + head_dim/2]). */
enum assay_arch {
    ASSAY_ARCH_LLAMA = 0,
    ASSAY_ARCH_QWEN2 = 1,
};

/* "llama" or "qwen2"; NULL for any other value. */
const char *assay_arch_name(enum assay_arch arch);

struct assay_model_config {
    char name[32];       /* "tinygpt", "draft", "mini", ... */
    enum assay_arch arch; /* 0 (llama) for every built-in config */
    int32_t n_layer;
    int32_t d_model;
    int32_t n_head;      /* query heads */
    int32_t n_kv_head;   /* key/value heads (grouped-query attention) */
    int32_t head_dim;
    int32_t d_ff;        /* SwiGLU hidden size */
    int32_t vocab;
    int32_t n_ctx;
    float norm_eps;      /* RMSNorm epsilon */
    float rope_theta;    /* RoPE base */
    float rope_scale;    /* linear RoPE scaling (GGUF rope.scaling.factor):
                          * positions are divided by it; 0 means none */
    bool rope_freqs;     /* the model has per-pair RoPE frequency divisors
                          * (rope_freqs.weight, llama 3.1's scaling); llama
                          * only, as in llama.cpp */
    bool qkv_bias;       /* the query, key and value projections have
                          * biases (qwen2's attn_q/k/v.bias) */
    bool output_twins;   /* the random initialisation copies output row 2i
                          * into row 2i + 1 (mini-twins): each token's
                          * logit equals its twin's exactly, in any
                          * context. Weights loaded from a file keep
                          * whatever rows they have; false there */
    float output_scale;  /* the random initialisation multiplies the output
                          * rows by it after drawing them (mini-sharp,
                          * mini-flat: logits output_scale times as
                          * large); 0 or 1: as drawn. A file's
                          * weights carry theirs; 0 there */
};

/* RoPE: at position pos, pair i of a head (0 <= i < head_dim/2) turns by
 *   pos / scale * theta^(-2i / head_dim) / freqs[i]   radians,
 * with scale 1 when rope_scale is 0 and freqs[i] 1 without rope_freqs: what
 * llama.cpp's ggml_rope_ext computes without YaRN (ext_factor 0,
 * attn_factor 1). The oracle and the engine each compute it in their own
 * code. */

/* TinyGPT: 6 layers, d 256, 8 q heads / 2 kv heads of 32, SwiGLU 1024,
 * vocab 260, ctx 2048: 5,838,080 parameters. */
struct assay_model_config assay_model_config_tinygpt(void);

/* The draft for speculative decoding with TinyGPT: 2 layers, d 128,
 * 4 q heads / 2 kv heads of 32, SwiGLU 512, same vocabulary and context. */
struct assay_model_config assay_model_config_draft(void);

/* A small config for the distributional runs (many thousands of samples):
 * 2 layers, d 64, 4 q heads / 2 kv heads of 16, SwiGLU 256, vocab 260,
 * ctx 256. The sampling logic under test is the same. */
struct assay_model_config assay_model_config_mini(void);

/* The draft for mini: 1 layer, d 32, 2 q heads / 1 kv head of 16,
 * SwiGLU 128, vocab 260, ctx 256. */
struct assay_model_config assay_model_config_mini_draft(void);

/* The tie model: mini with output_twins, so that tokens 2i and 2i + 1 have
 * the same logit everywhere and every pair of them ranks side by side
 * (lower id first): a top-k of odd k always cuts between the two of a
 * pair, and a top-p cut does where its crossing token is the lower id of
 * its pair. Every weight but output row 2i + 1 is mini's (same seed). The
 * distributional checks of ties at filter boundaries use it. */
struct assay_model_config assay_model_config_mini_twins(void);

/* Adversarial models: mini with its output rows scaled. mini-sharp (by 40):
 * logits 40 times mini's, spanning about -180 to 190 (4 prompts of 40), so
 * that most next-token distributions at temperature 1 are near-deterministic
 * and the largest logits are past what exp can take in float (88.7)
 * unless the maximum is subtracted first. mini-flat (by 0.05): logits
 * within about 0.4 of each other, near-uniform, so that a top-p crossing
 * falls among many tokens of almost equal weight. Every other weight is
 * mini's (same seed). */
struct assay_model_config assay_model_config_mini_sharp(void);
struct assay_model_config assay_model_config_mini_flat(void);

/* Look a config up by name (assay_model_config_names lists them).
 * Returns ASSAY_ERR_NOT_FOUND for any other name. */
enum assay_status assay_model_config_by_name(const char *name, struct assay_model_config *out);

/* The names assay_model_config_by_name knows, as "tinygpt, draft, mini,
 * ...", into buf (size > 0; cut short if it does not fit): the one list
 * error messages and usage texts print. */
void assay_model_config_names(char *buf, size_t size);

/* Number of parameters a config has. */
int64_t assay_model_config_n_params(const struct assay_model_config *cfg);

/* Check a config for consistency (positive sizes, heads dividing, even head
 * dimension, limits that keep every tensor within int32). Fills diag (field names
 * as GGUF metadata names them under the config's architecture:
 * "qwen2.block_count") and returns ASSAY_ERR_INVALID when it is not. */
enum assay_status assay_model_config_validate(const struct assay_model_config *cfg,
                                              struct assay_diag *diag);

/* The ggml types (enum assay_ggml_type, engine/gguf.h) a layer's matrices
 * were stored in: what llama.cpp's CPU backend would multiply with, and so
 * the format it rounds their inputs to (engine/numerics.h). 0 (F32) for a
 * random model. */
struct assay_layer_types {
    uint32_t wq, wk, wv, wo, w_gate, w_up, w_down;
};

/* A weight matrix as its file stores it: rows of row_bytes bytes of ggml
 * type `type`, inside the mapping the model owns (a mapped model, and a
 * resident model loaded from a file: the engine keeps integer formats as
 * stored, engine/gemmq.h). bytes is NULL in a model without its file
 * (random, cloned, derived, loaded from a buffer). */
struct assay_matrix_file {
    const uint8_t *bytes;
    size_t row_bytes;
    uint32_t type;
};

/* The matrices of a layer in its file (bytes NULL without one). */
struct assay_layer_files {
    struct assay_matrix_file wq, wk, wv, wo, w_gate, w_up, w_down;
};

struct assay_layer_weights {
    float *attn_norm; /* (d_model) */
    float *wq;        /* (n_head * head_dim, d_model) */
    float *wk;        /* (n_kv_head * head_dim, d_model) */
    float *wv;        /* (n_kv_head * head_dim, d_model) */
    float *wo;        /* (d_model, n_head * head_dim) */
    float *ffn_norm;  /* (d_model) */
    float *w_gate;    /* (d_ff, d_model) */
    float *w_up;      /* (d_ff, d_model) */
    float *w_down;    /* (d_model, d_ff) */
    float *bq;        /* (n_head * head_dim), or NULL without qkv_bias */
    float *bk;        /* (n_kv_head * head_dim), or NULL */
    float *bv;        /* (n_kv_head * head_dim), or NULL */
    struct assay_layer_types types;
    struct assay_layer_files files; /* the matrices in the file (a mapped
                                     * model's pointers above are NULL) */
};

struct assay_gguf;

struct assay_model {
    struct assay_model_config cfg;
    float *tok_embd;  /* (vocab, d_model) */
    float *out_norm;  /* (d_model) */
    float *output;    /* (vocab, d_model); the same pointer as tok_embd when tied */
    struct assay_layer_weights *layers; /* n_layer entries */
    float *rope_freqs;                  /* (head_dim / 2) divisors of the RoPE frequencies,
                                         * or NULL without cfg.rope_freqs */
    float *data;      /* every tensor, contiguous, in GGUF tensor order; a
                       * mapped model's vectors only (norms, biases, RoPE
                       * divisors) */
    int64_t n_floats; /* the parameter count, which is vocab * d_model less
                       * than the config's when tied: the floats in data
                       * unless the model is mapped */
    bool mapped;      /* the matrices stay in the file (tok_embd, output
                       * and every layer's wq..w_down are NULL; their
                       * *_file fields and layers[].files say where):
                       * assay_model_load_gguf_mapped */
    struct assay_matrix_file tok_embd_file, output_file; /* in the file, as files */
    struct assay_gguf *file; /* the mapped file, owned: a mapped model's, or a
                              * resident model's loaded from a file (its pages
                              * given back after the load); else NULL */
    bool tied;        /* the output projection is the token embedding: a
                       * GGUF file without output.weight (llama.cpp's rule) */
    int32_t eos_token;     /* the file's tokenizer.ggml.eos_token_id; when it has
                            * none, llama.cpp's default for its tokenizer (2
                            * for "llama"), else -1; ASSAY_TOKEN_EOS for a
                            * random model whose vocabulary holds it */
    uint32_t tok_embd_type; /* ggml type of token_embd.weight in the file (0, F32, for a
                             * random model) */
    uint32_t output_type;   /* of output.weight; tok_embd_type when tied */
    char tensor_types[48]; /* the ggml types the weights were stored in,
                            * '+'-joined in order of first appearance
                            * ("F32", "Q8_0+F32"); "F32" for a random model */
    char sha256[65];  /* hex SHA-256 of data as little-endian fp32 */
};

/*
 * The documented random initialisation, a pure function of (config, seed):
 * every weight is a Gaussian drawn with assay_rng_u01(seed, element, tensor)
 * through Box-Muller, with standard deviations
 *   tok_embd 1;  wq, wk ASSAY_INIT_QK_GAIN / sqrt(d_model);
 *   wv 1 / sqrt(d_model);  wo 1 / sqrt(n_head * head_dim);
 *   w_gate, w_up 1 / sqrt(d_model);  w_down 1 / sqrt(d_ff);
 *   output ASSAY_INIT_OUT_GAIN / sqrt(d_model);  norms are 1;
 *   q, k and v biases (with qkv_bias) ASSAY_INIT_BIAS_SD, drawn after every
 *   other tensor so the rest equals the model without them;
 *   with output_twins, output row 2i + 1 then overwritten by row 2i;
 *   rope_freqs (with cfg.rope_freqs) llama 3.1's divisors for a context of
 *   8192 extended 8 times.
 * The query/key gain makes attention sharp enough that output depends on the
 * whole context, not just the last token (see README "Why this scale").
 * On success *out owns a model to release with assay_model_free; on failure
 * *out is NULL.
 */
#define ASSAY_INIT_QK_GAIN 2.0f
#define ASSAY_INIT_OUT_GAIN 1.0f
#define ASSAY_INIT_BIAS_SD 0.5f
enum assay_status assay_model_init_random(struct assay_model **out,
                                          const struct assay_model_config *cfg, uint64_t seed);

/*
 * The gains of the random initialisation. The output gain alone sets how
 * peaked the next-token distribution is: the final RMSNorm gives the hidden
 * state a norm of sqrt(d_model) whatever the embedding scale, so each logit
 * is close to a Gaussian of standard deviation out_gain, independent across
 * the vocabulary. Its entropy falls from log(vocab) as out_gain grows
 * (about log(vocab) - out_gain^2 / 2 while that is large).
 */
struct assay_model_init_params {
    float qk_gain;  /* wq, wk: standard deviation qk_gain / sqrt(d_model) */
    float out_gain; /* output: standard deviation out_gain / sqrt(d_model) */
    bool tied;      /* tied embeddings: one tensor, drawn as output is, serves
                     * as token_embd and output (the other tensors are drawn
                     * as in the untied model) */
};

/* ASSAY_INIT_QK_GAIN and ASSAY_INIT_OUT_GAIN: assay_model_init_random's. */
struct assay_model_init_params assay_model_init_default_params(void);

/* assay_model_init_random with other gains; with the default params it
 * gives the same weights bit for bit. ASSAY_ERR_INVALID for a gain that is
 * not finite and positive. On failure *out is NULL. */
enum assay_status assay_model_init_random_params(struct assay_model **out,
                                                 const struct assay_model_config *cfg,
                                                 struct assay_model_init_params params,
                                                 uint64_t seed);

/*
 * Load a model from a GGUF file (version 2 or 3, llama architecture,
 * tensors with llama.cpp's names). Tensors may be stored in any type
 * assay_dequant_supported accepts (F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q5_K,
 * Q6_K); each is dequantized at load, row by row, into the model's fp32
 * data exactly as ggml dequantizes it, so the model holds one fp32 copy of
 * the weights and nothing of the file. A file without output.weight has
 * tied embeddings: the model is loaded with tied set and output pointing at
 * tok_embd (one copy, not two).
 *
 * Every inconsistency is reported in diag with the byte offset, key or
 * tensor: bad magic or version, truncation, unknown or missing tensors
 * (a tied file with any other extra tensor is still rejected), shapes that
 * differ, dimensions that overflow (ASSAY_ERR_PARSE); a tensor type that is
 * not decoded (ASSAY_ERR_UNSUPPORTED, naming the tensor, its type and the
 * types that are); an infinite or NaN block scale (ASSAY_ERR_PARSE, naming
 * the tensor, row and block); NaN or infinite weights after decoding
 * (ASSAY_ERR_PARSE). On failure *out is NULL and nothing is leaked.
 */
enum assay_status assay_model_load_gguf(struct assay_model **out, const char *path,
                                        struct assay_diag *diag);

/*
 * The same checks and the same numbers, but the weight matrices (token
 * embedding, output, every layer's q, k, v, output, gate, up and down) stay
 * in the file as it stores them, mapped, and are decoded when read
 * (assay_model_matrix_rows): the model holds the vectors alone, so its
 * memory is the file's pages in use rather than 4 bytes a parameter (32 GB
 * for an 8B model). Every row is decoded once at load to check it and to
 * compute sha256, which is the resident load's. The oracle and the
 * engine's teacher-forced scorer (engine/score.h) read such a model a layer
 * at a time; the bundled engine refuses it (ASSAY_ERR_UNSUPPORTED: its
 * steps would decode every layer again for each token). A mapped model
 * cannot be cloned, derived or rehashed. Returns as assay_model_load_gguf.
 */
enum assay_status assay_model_load_gguf_mapped(struct assay_model **out, const char *path,
                                               struct assay_diag *diag);

/*
 * Rows r0..r0+n of a weight matrix of cols columns, as fp32, exactly as
 * ggml dequantizes them (so the same floats the resident load holds):
 * copied from `resident` when it is not NULL (a resident model's pointer),
 * else decoded from `file` (a mapped model's). ASSAY_ERR_PARSE when the
 * file's bytes no longer decode (changed on disk since the load),
 * ASSAY_ERR_INVALID when both are absent.
 */
enum assay_status assay_model_matrix_rows(const float *resident,
                                          const struct assay_matrix_file *file, int64_t cols,
                                          int64_t r0, int64_t n, float *out);

/* Tell a mapped model that rows r0..r0+n of a matrix will not be read
 * soon: their whole pages of the file are given back to the kernel (read
 * again from the file if touched), so a reader that goes through the
 * matrices in turn holds about one of them. No-op for a model without
 * its file. */
void assay_model_matrix_done(const struct assay_model *model, const struct assay_matrix_file *file,
                             int64_t r0, int64_t n);

/* The configuration a GGUF file describes (architecture, shapes, context,
 * vocabulary), read and validated as assay_model_load_gguf reads it but
 * without loading a weight: for checking a file against what a command
 * needs before the long load. Returns as assay_model_load_gguf; *out is
 * set on ASSAY_OK only. */
enum assay_status assay_model_config_from_gguf(const char *path, struct assay_model_config *out,
                                               struct assay_diag *diag);

/* The same from a GGUF file held in memory (buf borrowed for the call);
 * name (may be NULL) stands for the file in diagnostics. */
enum assay_status assay_model_load_gguf_buffer(struct assay_model **out, const uint8_t *buf,
                                               size_t size, const char *name,
                                               struct assay_diag *diag);

/*
 * Save a model as GGUF version 3 that llama.cpp loads: llama architecture
 * metadata, a "llama" tokenizer block for the 260-token vocabulary (byte
 * tokens typed NORMAL, no BOS or EOS added), and f32 tensors with
 * llama.cpp's names (a tied model without output.weight). Writes to a
 * temporary name and renames, so a failed save leaves no partial file at
 * path. ASSAY_ERR_UNSUPPORTED for a mapped model.
 */
enum assay_status assay_model_save_gguf(const struct assay_model *model, const char *path,
                                        struct assay_diag *diag);

/*
 * The file assay_model_save_gguf writes of the model
 * assay_model_init_random_params(cfg, params, seed) would build, written
 * without building it: tensor by tensor, a chunk at a time, so a model far
 * larger than memory (an 8B shape is 32 GB in fp32) can be written. The
 * matrices are stored as `type`, F32 (the very bytes of the save) or F16
 * (each weight rounded to nearest even, half the disk); the norms, biases
 * and RoPE divisors stay F32, as llama.cpp's converters keep them. sha256
 * (65 bytes, may be NULL) gets the model's hash (of the fp32 weights, what
 * assay_model_init_random_params's model has as sha256). Returns as
 * assay_model_save_gguf; ASSAY_ERR_INVALID for another type or a gain that
 * is not finite and positive.
 */
enum assay_status assay_model_write_random_gguf(const struct assay_model_config *cfg,
                                                struct assay_model_init_params params,
                                                uint64_t seed, uint32_t type, const char *path,
                                                char sha256[65], struct assay_diag *diag);

/* A deep copy of a model (weights, config, tying and tensor types; a tied
 * copy's output points into its own data). On failure *out is NULL;
 * ASSAY_ERR_UNSUPPORTED for a mapped model. */
enum assay_status assay_model_clone(const struct assay_model *model, struct assay_model **out);

/*
 * A draft derived from a model's own weights, as self-speculative drafts
 * are: a deep copy whose every weight w becomes w (1 + noise g), g a
 * standard Gaussian drawn with assay_rng_u01(seed, element, purpose) through
 * Box-Muller, and whose config is named "near:NOISE". The target's
 * distribution q departs from p smoothly as noise grows (0 gives the model
 * itself, every proposal accepted), so the acceptance rate is set by one
 * number: on the mini model at T 0.7-1, noise 0.3 accepts about 70% of
 * proposals (the figure each speculative check reports). ASSAY_ERR_INVALID
 * for a noise that is not finite and in [0, 10], ASSAY_ERR_UNSUPPORTED for
 * a mapped model; on failure *out is NULL.
 */
enum assay_status assay_model_derive_draft(const struct assay_model *model, double noise,
                                           uint64_t seed, struct assay_model **out);

/* Recompute model->sha256 from model->data (after changing weights); a
 * mapped model's weights do not change, and its hash is left as loaded. */
void assay_model_rehash(struct assay_model *model);

/* Release a model; NULL is a no-op. */
void assay_model_free(struct assay_model *model);

#endif
