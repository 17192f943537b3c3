/*
 * test_bad_inputs - the bad-input corpus (fixtures/bad/) through the real
 * assay command.
 *
 *   test_bad_inputs ASSAY_BINARY              run every case of the manifest
 *   test_bad_inputs --write-fuzz-seeds DIR    write the GGUF fuzz seeds
 *
 * fixtures/bad/manifest.tsv lists one case a line: a name, the exit status
 * the command must end with, the command line (after "assay"), and the
 * message it must print (on stdout or stderr): which file, which field or
 * byte offset, what was expected. The inputs are the files under
 * fixtures/bad/ ({bad}) and files this program generates before the run
 * ({gen}): GGUF files made from a valid exported model (the "mini" config,
 * seed 1, written by assay's own writer) by truncating it or rewriting a few
 * bytes (also from a llama 3.1-style and a biased qwen2 export of the same
 * shape, or with a metadata pair added), and a few inputs that are better
 * made than committed (a NUL byte, an oversized file). Byte offsets in expected messages may be
 * written as placeholders that the generator fills from the valid file's layout:
 * {@kv:KEY} (where a metadata pair starts), {@kvtype:KEY}, {@kvval:KEY},
 * {@kvcount:KEY} (an array's element count), {@t:NAME} (where a tensor's
 * info starts), {@tdims:NAME}, {@tdim:NAME:D}, {@ttype:NAME},
 * {@toff:NAME}, {@size} and {@size-N} (the valid file's length, less N).
 * {out} is a fresh directory for the case's report.
 *
 * For each case: the command ends with the stated status and no signal
 * (and within 120 s), it prints the expected message, and when the case
 * names {out} and fails, nothing is left there (no report, no temporary
 * file: a failed run leaves no partial report passed off as complete), nor
 * the folder itself, which the run made and wrote nothing into.
 * Cases with status 0 are controls built from the same inputs made valid:
 * they must pass and write their report, so a case cannot pass by failing
 * for a reason other than the one it is about.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "engine/gguf.h"
#include "engine/model.h"
#include "support.h"

static const char *g_assay = "assay";
static char g_bad[1024];  /* fixtures/bad */
static char g_gen[1100];  /* generated inputs */
static char g_work[1024]; /* the commands' working directory */

/* ------------------------------------------------------------------ */
/* Bytes and files                                                     */
/* ------------------------------------------------------------------ */

struct bytes {
    uint8_t *p;
    size_t n;
};

static struct bytes read_file(const char *path)
{
    struct bytes b = {NULL, 0};
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    b.p = malloc((size_t)n + 1);
    assert_non_null(b.p);
    b.n = fread(b.p, 1, (size_t)n, f);
    assert_int_equal(b.n, (size_t)n);
    fclose(f);
    return b;
}

static void write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        fail_msg("cannot write %s: %s", path, strerror(errno));
    }
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0) {
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (d != NULL) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
                    continue;
                }
                char child[2048];
                snprintf(child, sizeof child, "%s/%s", path, e->d_name);
                remove_tree(child);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

/* ------------------------------------------------------------------ */
/* The layout of the valid GGUF file (a reader of this test's own, so   */
/* that the placeholders do not trust the reader under test)            */
/* ------------------------------------------------------------------ */

enum { MAX_KV = 64, MAX_T = 64 };

struct layout_kv {
    char key[128];
    size_t pos, type_pos, val_pos;
    uint32_t type;
};

struct layout_tensor {
    char name[80];
    size_t pos, dims_pos, dim_pos[4], type_pos, off_pos;
    uint32_t n_dims, type;
    uint64_t ne[4], offset;
};

struct layout {
    size_t size, data_offset, infos_end; /* infos_end: where the tensor infos end */
    int n_kv, n_t;
    struct layout_kv kv[MAX_KV];
    struct layout_tensor t[MAX_T];
};

static size_t skip_value(const uint8_t *b, size_t pos, uint32_t type)
{
    static const size_t sizes[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    assert_true(type < 13);
    if (type == ASSAY_GGUF_TYPE_STRING) {
        return pos + 8 + get_le(b + pos, 8);
    }
    if (type == ASSAY_GGUF_TYPE_ARRAY) {
        uint32_t elem = (uint32_t)get_le(b + pos, 4);
        uint64_t n = get_le(b + pos + 4, 8);
        pos += 12;
        for (uint64_t i = 0; i < n; i++) {
            pos = skip_value(b, pos, elem);
        }
        return pos;
    }
    return pos + sizes[type];
}

static void read_layout(const struct bytes *f, struct layout *l)
{
    memset(l, 0, sizeof *l);
    const uint8_t *b = f->p;
    l->size = f->n;
    assert_memory_equal(b, "GGUF", 4);
    uint64_t n_t = get_le(b + 8, 8), n_kv = get_le(b + 16, 8);
    assert_true(n_t <= MAX_T && n_kv <= MAX_KV);
    size_t pos = 24;
    uint32_t alignment = 32;
    for (uint64_t i = 0; i < n_kv; i++) {
        struct layout_kv *kv = &l->kv[l->n_kv++];
        kv->pos = pos;
        uint64_t len = get_le(b + pos, 8);
        assert_true(len < sizeof kv->key);
        memcpy(kv->key, b + pos + 8, (size_t)len);
        pos += 8 + (size_t)len;
        kv->type_pos = pos;
        kv->type = (uint32_t)get_le(b + pos, 4);
        kv->val_pos = pos + 4;
        if (strcmp(kv->key, "general.alignment") == 0) {
            alignment = (uint32_t)get_le(b + kv->val_pos, 4);
        }
        pos = skip_value(b, kv->val_pos, kv->type);
    }
    for (uint64_t i = 0; i < n_t; i++) {
        struct layout_tensor *t = &l->t[l->n_t++];
        t->pos = pos;
        uint64_t len = get_le(b + pos, 8);
        assert_true(len < sizeof t->name);
        memcpy(t->name, b + pos + 8, (size_t)len);
        pos += 8 + (size_t)len;
        t->dims_pos = pos;
        t->n_dims = (uint32_t)get_le(b + pos, 4);
        pos += 4;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            t->dim_pos[d] = pos;
            t->ne[d] = get_le(b + pos, 8);
            pos += 8;
        }
        t->type_pos = pos;
        t->type = (uint32_t)get_le(b + pos, 4);
        t->off_pos = pos + 4;
        t->offset = get_le(b + pos + 4, 8);
        pos += 12;
    }
    l->infos_end = pos;
    l->data_offset = (pos + alignment - 1) / alignment * alignment;
}

static const struct layout_kv *find_kv(const struct layout *l, const char *key)
{
    for (int i = 0; i < l->n_kv; i++) {
        if (strcmp(l->kv[i].key, key) == 0) {
            return &l->kv[i];
        }
    }
    fail_msg("the valid GGUF file has no key %s", key);
    return NULL;
}

static const struct layout_tensor *find_tensor(const struct layout *l, const char *name)
{
    for (int i = 0; i < l->n_t; i++) {
        if (strcmp(l->t[i].name, name) == 0) {
            return &l->t[i];
        }
    }
    fail_msg("the valid GGUF file has no tensor %s", name);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Generated inputs                                                    */
/* ------------------------------------------------------------------ */

static struct layout g_layout;

/* A copy of the valid file to edit. */
static struct bytes copy_of(const struct bytes *valid)
{
    struct bytes c = {malloc(valid->n + 1), valid->n};
    assert_non_null(c.p);
    memcpy(c.p, valid->p, valid->n);
    return c;
}

static void save(const char *name, struct bytes *c)
{
    write_file(g_gen, name, c->p, c->n);
    free(c->p);
    c->p = NULL;
}

/* Replace len bytes at the first occurrence of `from` (a key or tensor
 * name inside the file) with `to` of the same length. */
static void rename_in(struct bytes *c, const char *from, const char *to)
{
    size_t n = strlen(from);
    assert_int_equal(strlen(to), n);
    for (size_t i = 0; i + n <= c->n; i++) {
        if (memcmp(c->p + i, from, n) == 0) {
            memcpy(c->p + i, to, n);
            return;
        }
    }
    fail_msg("no '%s' in the valid file", from);
}

static void set_f32(uint8_t *p, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    put_le(p, u, 4);
}

static void make_gguf_cases(const struct bytes *valid)
{
    const struct layout *l = &g_layout;
    struct bytes c;

    write_file(g_gen, "empty.gguf", "", 0);
    c = copy_of(valid);
    memcpy(c.p, "GGML", 4);
    save("magic.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + 4, 1, 4);
    save("version-1.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + 4, 4, 4);
    save("version-4.gguf", &c);
    /* Truncations: inside the header, a metadata pair, the tensor infos,
     * and the tensor data. */
    c = copy_of(valid);
    c.n = 3;
    save("truncated-3.gguf", &c);
    c = copy_of(valid);
    c.n = 12;
    save("truncated-12.gguf", &c);
    c = copy_of(valid);
    c.n = find_kv(l, "llama.block_count")->val_pos + 2;
    save("truncated-kv.gguf", &c);
    c = copy_of(valid);
    c.n = find_tensor(l, "blk.0.attn_q.weight")->dims_pos + 6;
    save("truncated-tensor-info.gguf", &c);
    c = copy_of(valid);
    c.n = valid->n - 1000;
    save("truncated-data.gguf", &c);
    /* Counts and lengths that cannot fit. */
    c = copy_of(valid);
    put_le(c.p + 8, (uint64_t)1 << 62, 8);
    save("tensor-count-huge.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + 16, UINT64_MAX, 8);
    save("kv-count-huge.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + l->kv[0].pos, (uint64_t)1 << 40, 8);
    save("key-length-huge.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + l->kv[0].pos, 0, 8);
    save("key-length-zero.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + find_kv(l, "tokenizer.ggml.tokens")->val_pos + 4, (uint64_t)1 << 61, 8);
    save("array-count-huge.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + find_kv(l, "llama.block_count")->type_pos, 99, 4);
    save("value-type-99.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + find_kv(l, "tokenizer.ggml.tokens")->val_pos, 13, 4);
    save("array-elem-type-13.gguf", &c);
    c = copy_of(valid);
    c.p[find_kv(l, "tokenizer.ggml.add_bos_token")->val_pos] = 2;
    save("bool-2.gguf", &c);
    c = copy_of(valid);
    rename_in(&c, "tokenizer.ggml.eos_token_id", "tokenizer.ggml.bos_token_id");
    save("duplicate-key.gguf", &c);
    c = copy_of(valid);
    rename_in(&c, "blk.0.attn_k.weight", "blk.0.attn_q.weight");
    save("duplicate-tensor.gguf", &c);
    /* Tensor infos: dimensions, types, offsets. */
    const struct layout_tensor *embd = find_tensor(l, "token_embd.weight");
    const struct layout_tensor *q = find_tensor(l, "blk.0.attn_q.weight");
    const struct layout_tensor *k = find_tensor(l, "blk.0.attn_k.weight");
    c = copy_of(valid);
    put_le(c.p + q->dims_pos, 5, 4);
    save("n-dims-5.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + embd->dim_pos[0], (uint64_t)1 << 62, 8);
    save("dims-overflow.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + embd->dim_pos[1], ((uint64_t)1 << 63) + 1, 8);
    save("dim-above-int64.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + q->type_pos, 99, 4);
    save("ggml-type-99.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + q->type_pos, 4, 4); /* Q4_2, removed from ggml */
    save("ggml-type-unknown.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + q->type_pos, 3, 4); /* Q4_1: sized, not decoded */
    save("type-q4-1.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + q->type_pos, ASSAY_GGML_TYPE_Q8_0, 4); /* blocks of 32, ne[0] 64 */
    put_le(c.p + l->data_offset + q->offset, 0x7e00, 2); /* the first block's scale */
    save("q8-0-nan-scale.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + find_tensor(l, "blk.0.ffn_norm.weight")->type_pos, ASSAY_GGML_TYPE_Q4_K, 4);
    save("q4-k-partial-block.gguf", &c);
    /* No output.weight (tied embeddings) and a tensor nobody knows. */
    c = copy_of(valid);
    memcpy(c.p + find_tensor(l, "output.weight")->pos + 8, "output.weighx", 13);
    save("tied-stray-tensor.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + q->off_pos, q->offset + 4, 8);
    save("offset-misaligned.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + q->off_pos, (uint64_t)1 << 40, 8);
    save("offset-past-end.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + k->off_pos, q->offset, 8);
    save("offset-overlap.gguf", &c);
    /* A valid GGUF file that is not this model. */
    c = copy_of(valid);
    rename_in(&c, "llama", "mamba");
    save("not-llama.gguf", &c);
    c = copy_of(valid);
    rename_in(&c, "output.weight", "outpux.weight");
    save("missing-tensor.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + find_kv(l, "llama.block_count")->val_pos, 1, 4);
    save("extra-tensors.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + q->dim_pos[1], q->ne[1] / 2, 8);
    save("wrong-shape.gguf", &c);
    c = copy_of(valid);
    set_f32(c.p + l->data_offset + find_tensor(l, "blk.1.ffn_up.weight")->offset + 4 * 5, NAN);
    save("nan-weight.gguf", &c);
    c = copy_of(valid);
    set_f32(c.p + l->data_offset + find_tensor(l, "output.weight")->offset, -INFINITY);
    save("inf-weight.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + find_kv(l, "llama.block_count")->type_pos, ASSAY_GGUF_TYPE_I32, 4);
    save("metadata-wrong-type.gguf", &c);
    c = copy_of(valid);
    rename_in(&c, "llama.feed_forward_length", "llama.feed_forward_lengtx");
    save("missing-key.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + find_kv(l, "llama.attention.head_count")->val_pos, 0, 4);
    save("head-count-0.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + find_kv(l, "llama.embedding_length")->val_pos, UINT32_MAX, 4);
    save("dim-huge.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + find_kv(l, "llama.attention.head_count_kv")->val_pos, 3, 4);
    save("heads-not-dividing.gguf", &c);
    c = copy_of(valid);
    set_f32(c.p + find_kv(l, "llama.attention.layer_norm_rms_epsilon")->val_pos, NAN);
    save("eps-nan.gguf", &c);
    c = copy_of(valid);
    put_le(c.p + find_kv(l, "llama.vocab_size")->val_pos, 300, 4);
    save("vocab-mismatch.gguf", &c);
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/directory.gguf", g_gen);
    assert_true(mkdir(dir, 0755) == 0 || errno == EEXIST);
}

/* Save the random model of cfg (seed 1) as dir/name and read it back. */
static void export_model(const struct assay_model_config *cfg, const char *dir, const char *name,
                         struct bytes *out)
{
    struct assay_model *m = NULL;
    assert_int_equal(assay_model_init_random(&m, cfg, 1), ASSAY_OK);
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct assay_diag diag;
    assay_diag_clear(&diag);
    assert_int_equal(assay_model_save_gguf(m, path, &diag), ASSAY_OK);
    assay_model_free(m);
    *out = read_file(path);
}

/* f with one more metadata pair, key = the string value, after the
 * others; the tensor data moves to stay aligned (offsets are relative to
 * it). */
static struct bytes with_string_kv(const struct bytes *f, const char *key, const char *value)
{
    struct layout l;
    read_layout(f, &l);
    assert_true(l.n_t > 0);
    size_t at = l.t[0].pos; /* the metadata ends where the first tensor info starts */
    size_t rec = 8 + strlen(key) + 4 + 8 + strlen(value);
    size_t data_to = (l.infos_end + rec + 31) / 32 * 32;
    size_t n = data_to + (f->n - l.data_offset);
    struct bytes c = {calloc(1, n), n};
    assert_non_null(c.p);
    memcpy(c.p, f->p, at);
    put_le(c.p + 16, (uint64_t)l.n_kv + 1, 8);
    uint8_t *p = c.p + at;
    put_le(p, strlen(key), 8);
    memcpy(p + 8, key, strlen(key));
    p += 8 + strlen(key);
    put_le(p, ASSAY_GGUF_TYPE_STRING, 4);
    put_le(p + 4, strlen(value), 8);
    memcpy(p + 12, value, strlen(value));
    memcpy(c.p + at + rec, f->p + at, l.infos_end - at);
    memcpy(c.p + data_to, f->p + l.data_offset, f->n - l.data_offset);
    return c;
}

/* The llama 3.1 and qwen2 additions: a RoPE scaling that is not decoded,
 * a zero RoPE frequency divisor, a q bias without its k bias; and the
 * valid files they are made from, for the controls. */
static void make_arch_cases(const struct bytes *valid)
{
    struct bytes c = with_string_kv(valid, "llama.rope.scaling.type", "yarn");
    save("rope-scaling-yarn.gguf", &c);

    struct assay_model_config cfg;
    assert_int_equal(assay_model_config_by_name("mini", &cfg), ASSAY_OK);
    cfg.rope_freqs = true;
    cfg.rope_scale = 2.0f;
    struct bytes freqs;
    export_model(&cfg, g_gen, "valid-rope-freqs.gguf", &freqs);
    struct layout l;
    read_layout(&freqs, &l);
    c = copy_of(&freqs);
    set_f32(c.p + l.data_offset + find_tensor(&l, "rope_freqs.weight")->offset + 4 * 3, 0.0f);
    save("rope-freqs-zero.gguf", &c);
    free(freqs.p);

    assert_int_equal(assay_model_config_by_name("mini", &cfg), ASSAY_OK);
    cfg.arch = ASSAY_ARCH_QWEN2;
    cfg.qkv_bias = true;
    struct bytes qwen2;
    export_model(&cfg, g_gen, "valid-qwen2-bias.gguf", &qwen2);
    c = copy_of(&qwen2);
    rename_in(&c, "blk.0.attn_k.bias", "blk.0.attn_k.biax");
    save("missing-k-bias.gguf", &c);
    free(qwen2.p);
}

/* JSON inputs better made than committed. */
static void make_json_cases(void)
{
    static const char nul_trace[] = "{\"format\": \"assay-workload\", \"version\": 1, \"requests\": "
                                    "[{\"id\": 1, \"prompt\": [1, 2], \"max_tokens\": 4}]}\n";
    char buf[sizeof nul_trace];
    memcpy(buf, nul_trace, sizeof nul_trace);
    buf[60] = '\0'; /* inside "requests" */
    write_file(g_gen, "workload-nul.json", buf, sizeof nul_trace - 1);
    /* API key files: empty, and one line of a key with a space in it. */
    write_file(g_gen, "empty-key.txt", "", 0);
    write_file(g_gen, "spaced-key.txt", "sk-abc def\n", 11);
    /* An SLO file over its 1 MiB bound (white space before valid JSON). */
    size_t big = (1u << 20) + 100;
    char *slo = malloc(big);
    assert_non_null(slo);
    memset(slo, ' ', big);
    static const char tail[] = "{\"format\": \"assay-slo\", \"version\": 1, \"ttft_s\": 1, \"tpot_s\": 1}";
    memcpy(slo + big - sizeof tail + 1, tail, sizeof tail - 1);
    write_file(g_gen, "slo-huge.json", slo, big);
    free(slo);
    /* A trace with more requests than the 1,000,000 a workload may hold:
     * refused before anything is built. */
    FILE *f = NULL;
    char path[2048];
    snprintf(path, sizeof path, "%s/workload-too-many.json", g_gen);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"format\": \"assay-workload\", \"version\": 1, \"requests\": [", f);
    for (int i = 0; i < 1000001; i++) {
        fputs(i == 0 ? "{}" : ",{}", f);
    }
    fputs("]}\n", f);
    assert_int_equal(fclose(f), 0);
    /* A million requests, the most a file may hold, the last reusing the
     * first one's id: found at once (comparing every pair took hours). */
    snprintf(path, sizeof path, "%s/workload-million-duplicate.json", g_gen);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"format\":\"assay-workload\",\"version\":1,\"requests\":[", f);
    for (int i = 0; i < 1000000; i++) {
        fprintf(f, "%s{\"id\":%d,\"prompt\":[%d],\"max_tokens\":1}", i == 0 ? "" : ",",
                i == 999999 ? 1 : i + 1, i % 256);
    }
    fputs("]}\n", f);
    assert_int_equal(fclose(f), 0);
}

/* ------------------------------------------------------------------ */
/* Running a command                                                   */
/* ------------------------------------------------------------------ */

struct outcome {
    bool exited;
    int status;   /* exit status, or the signal */
    bool timed_out;
    char output[16384];
};

static void run_command(const char *cmd, double timeout_s, struct outcome *o)
{
    memset(o, 0, sizeof *o);
    char log[2048];
    snprintf(log, sizeof log, "%s/output.txt", g_work);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || chdir(g_work) != 0) {
            _exit(127);
        }
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        int null_fd = open("/dev/null", O_RDONLY);
        if (null_fd >= 0) {
            dup2(null_fd, 0);
            close(null_fd);
        }
        setpgid(0, 0);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int wst = 0;
    for (;;) {
        pid_t r = waitpid(pid, &wst, WNOHANG);
        if (r == pid) {
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        double s = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
        if (s > timeout_s) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &wst, 0);
            o->timed_out = true;
            break;
        }
        usleep(2000);
    }
    o->exited = WIFEXITED(wst);
    o->status = o->exited ? WEXITSTATUS(wst) : WIFSIGNALED(wst) ? WTERMSIG(wst) : -1;
    FILE *f = fopen(log, "r");
    if (f != NULL) {
        size_t n = fread(o->output, 1, sizeof o->output - 1, f);
        o->output[n] = '\0';
        fclose(f);
    }
}

/* ------------------------------------------------------------------ */
/* The manifest                                                        */
/* ------------------------------------------------------------------ */

/* Replace {bad}, {gen}, {out}, {fixtures} and the layout placeholders in
 * `in`; false (and why) when a placeholder is unknown. */
static bool expand(const char *in, const char *out_dir, char *buf, size_t size, char *why,
                   size_t why_size)
{
    size_t n = 0;
    char fixtures[1024];
    assay_test_fixture("", fixtures, sizeof fixtures);
    size_t fl = strlen(fixtures);
    if (fl > 0 && fixtures[fl - 1] == '/') {
        fixtures[fl - 1] = '\0';
    }
    while (*in != '\0') {
        if (*in != '{') {
            if (n + 1 < size) {
                buf[n++] = *in;
            }
            in++;
            continue;
        }
        /* A placeholder is a word in braces; braces around anything with
         * a space or a quote (JSON in a message) are text. */
        const char *close = strchr(in, '}');
        size_t word = strcspn(in + 1, "} \"");
        if (close == NULL || in + 1 + word != close) {
            if (n + 1 < size) {
                buf[n++] = *in;
            }
            in++;
            continue;
        }
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(close - in - 1), in + 1);
        char value[1100];
        value[0] = '\0';
        if (strcmp(name, "bad") == 0) {
            snprintf(value, sizeof value, "%s", g_bad);
        } else if (strcmp(name, "gen") == 0) {
            snprintf(value, sizeof value, "%s", g_gen);
        } else if (strcmp(name, "out") == 0) {
            snprintf(value, sizeof value, "%s", out_dir);
        } else if (strcmp(name, "fixtures") == 0) {
            snprintf(value, sizeof value, "%s", fixtures);
        } else if (strcmp(name, "@size") == 0) {
            snprintf(value, sizeof value, "%zu", g_layout.size);
        } else if (strncmp(name, "@size-", 6) == 0) {
            snprintf(value, sizeof value, "%zu", g_layout.size - (size_t)atol(name + 6));
        } else if (name[0] == '@') {
            char kind[32], arg[200];
            int d = 0;
            const char *colon = strchr(name, ':');
            if (colon == NULL) {
                snprintf(why, why_size, "placeholder {%.200s} has no argument", name);
                return false;
            }
            snprintf(kind, sizeof kind, "%.*s", (int)(colon - name - 1), name + 1);
            snprintf(arg, sizeof arg, "%s", colon + 1);
            char *second = strchr(arg, ':');
            if (second != NULL) {
                *second = '\0';
                d = atoi(second + 1);
            }
            size_t pos;
            if (strcmp(kind, "kv") == 0) {
                pos = find_kv(&g_layout, arg)->pos;
            } else if (strcmp(kind, "kvtype") == 0) {
                pos = find_kv(&g_layout, arg)->type_pos;
            } else if (strcmp(kind, "kvval") == 0) {
                pos = find_kv(&g_layout, arg)->val_pos;
            } else if (strcmp(kind, "kvcount") == 0) {
                pos = find_kv(&g_layout, arg)->val_pos + 4; /* an array's count */
            } else if (strcmp(kind, "t") == 0) {
                pos = find_tensor(&g_layout, arg)->pos;
            } else if (strcmp(kind, "tdims") == 0) {
                pos = find_tensor(&g_layout, arg)->dims_pos;
            } else if (strcmp(kind, "tdim") == 0 && d >= 0 && d < 4) {
                pos = find_tensor(&g_layout, arg)->dim_pos[d];
            } else if (strcmp(kind, "ttype") == 0) {
                pos = find_tensor(&g_layout, arg)->type_pos;
            } else if (strcmp(kind, "toff") == 0) {
                pos = find_tensor(&g_layout, arg)->off_pos;
            } else {
                snprintf(why, why_size, "unknown placeholder {%.200s}", name);
                return false;
            }
            snprintf(value, sizeof value, "%zu", pos);
        } else {
            snprintf(why, why_size, "unknown placeholder {%.200s}", name);
            return false;
        }
        for (const char *v = value; *v != '\0'; v++) {
            if (n + 1 < size) {
                buf[n++] = *v;
            }
        }
        in = close + 1;
    }
    buf[n] = '\0';
    return true;
}

/* The files left in dir, as a list for a message ("" when none or when
 * dir does not exist). */
static void files_in(const char *dir, char *buf, size_t size)
{
    buf[0] = '\0';
    DIR *d = opendir(dir);
    if (d == NULL) {
        return;
    }
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s%s", n > 0 ? ", " : "",
                              e->d_name);
        if (n >= size) {
            break;
        }
    }
    closedir(d);
}

struct tally {
    int n_cases, n_bad, n_controls, n_failed;
    int by_status[256];
};

/* One case; returns false (and prints why) when it did not behave. */
static bool run_case(const char *name, int want_status, const char *command, const char *expect,
                     struct tally *t)
{
    char out_dir[2048], cmd[8192], want[4096], why[256];
    snprintf(out_dir, sizeof out_dir, "%s/out-%s", g_work, name);
    remove_tree(out_dir);
    char expanded[6000];
    if (!expand(command, out_dir, expanded, sizeof expanded, why, sizeof why) ||
        !expand(expect, out_dir, want, sizeof want, why, sizeof why)) {
        printf("not ok %s: the manifest line is malformed: %s\n", name, why);
        t->n_failed++;
        t->n_cases++;
        return false;
    }
    /* Leading NAME=VALUE words set the command's environment. */
    const char *rest = expanded;
    size_t env_len = 0;
    for (;;) {
        size_t name_len = strspn(rest + env_len, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_");
        if (name_len == 0 || rest[env_len + name_len] != '=') {
            break;
        }
        const char *space = strchr(rest + env_len, ' ');
        if (space == NULL) {
            break;
        }
        env_len = (size_t)(space - rest) + 1;
    }
    snprintf(cmd, sizeof cmd, "%.*sexec '%s' %s", (int)env_len, rest, g_assay, rest + env_len);
    struct outcome o;
    run_command(cmd, 120.0, &o);
    bool ok = true;
    if (o.timed_out) {
        printf("not ok %s: still running after 120 s (a hang)\n", name);
        ok = false;
    } else if (!o.exited) {
        printf("not ok %s: killed by signal %d (%s)\n", name, o.status, strsignal(o.status));
        ok = false;
    } else if (o.status != want_status) {
        printf("not ok %s: exit status %d, expected %d\n", name, o.status, want_status);
        ok = false;
    }
    if (ok && strstr(o.output, want) == NULL) {
        printf("not ok %s: the output does not say\n    %s\n", name, want);
        ok = false;
    }
    bool names_out = strstr(command, "{out}") != NULL;
    char left[1024];
    files_in(out_dir, left, sizeof left);
    if (ok && names_out && want_status != 0 && left[0] != '\0') {
        printf("not ok %s: the failed run left files in --out: %s\n", name, left);
        ok = false;
    }
    struct stat out_st;
    if (ok && names_out && want_status != 0 && stat(out_dir, &out_st) == 0) {
        printf("not ok %s: the failed run left its --out folder behind, empty\n", name);
        ok = false;
    }
    if (ok && names_out && want_status == 0 && left[0] == '\0') {
        printf("not ok %s: the control wrote no report in --out\n", name);
        ok = false;
    }
    if (!ok) {
        printf("    command: %s\n    output:\n", cmd);
        for (const char *line = o.output; *line != '\0';) {
            const char *nl = strchr(line, '\n');
            int len = nl != NULL ? (int)(nl - line) : (int)strlen(line);
            printf("      | %.*s\n", len, line);
            line += len + (nl != NULL ? 1 : 0);
        }
        t->n_failed++;
    } else {
        printf("ok %s\n", name);
    }
    t->n_cases++;
    if (want_status == 0) {
        t->n_controls++;
    } else {
        t->n_bad++;
    }
    t->by_status[want_status & 255]++;
    remove_tree(out_dir);
    return ok;
}

static void test_corpus(void **state)
{
    (void)state;
    char manifest[1100];
    snprintf(manifest, sizeof manifest, "%s/manifest.tsv", g_bad);
    FILE *f = fopen(manifest, "r");
    if (f == NULL) {
        fail_msg("cannot read %s: %s", manifest, strerror(errno));
    }
    struct tally t;
    memset(&t, 0, sizeof t);
    char line[8192];
    int line_no = 0, n_malformed = 0;
    char seen[512][64];
    int n_seen = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        line_no++;
        size_t len = strlen(line);
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
            line[--len] = '\0';
        }
        if (len == 0 || line[0] == '#') {
            continue;
        }
        char *fields[4];
        int n = 0;
        char *p = line;
        while (n < 4) {
            fields[n++] = p;
            char *tab = strchr(p, '\t');
            if (tab == NULL) {
                break;
            }
            *tab = '\0';
            p = tab + 1;
        }
        char *end = NULL;
        long status = n == 4 ? strtol(fields[1], &end, 10) : -1;
        if (n != 4 || end == fields[1] || *end != '\0' || status < 0 || status > 255 ||
            fields[3][0] == '\0' || strlen(fields[0]) >= sizeof seen[0]) {
            printf("not ok manifest line %d: expected NAME<TAB>STATUS<TAB>COMMAND<TAB>MESSAGE\n",
                   line_no);
            n_malformed++;
            continue;
        }
        for (int i = 0; i < n_seen; i++) {
            if (strcmp(seen[i], fields[0]) == 0) {
                printf("not ok manifest line %d: the name %s is used twice\n", line_no, fields[0]);
                n_malformed++;
            }
        }
        if (n_seen < 512) {
            snprintf(seen[n_seen++], sizeof seen[0], "%s", fields[0]);
        }
        run_case(fields[0], (int)status, fields[2], fields[3], &t);
        fflush(stdout);
    }
    fclose(f);
    printf("# %d cases: %d bad inputs (exit 2: %d), %d controls; %d did not behave, %d malformed "
           "lines\n",
           t.n_cases, t.n_bad, t.by_status[2], t.n_controls, t.n_failed, n_malformed);
    if (t.n_failed > 0 || n_malformed > 0) {
        fail_msg("%d of %d cases did not behave (see above)", t.n_failed + n_malformed,
                 t.n_cases);
    }
    assert_true(t.n_bad >= 100);
    assert_true(t.n_controls >= 3);
}

/* Every input file of the corpus is used by some case (so that a file
 * added without a manifest line is noticed). */
static void test_every_file_used(void **state)
{
    (void)state;
    char manifest[1100];
    snprintf(manifest, sizeof manifest, "%s/manifest.tsv", g_bad);
    struct bytes m = read_file(manifest);
    m.p[m.n] = '\0';
    static const char *const dirs[] = {"workload", "slo", "report"};
    int n_unused = 0, n_files = 0;
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char dir[1200];
        snprintf(dir, sizeof dir, "%s/%s", g_bad, dirs[i]);
        DIR *d = opendir(dir);
        assert_non_null(d);
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') {
                continue;
            }
            char ref[600];
            snprintf(ref, sizeof ref, "{bad}/%s/%s", dirs[i], e->d_name);
            n_files++;
            if (strstr((const char *)m.p, ref) == NULL) {
                printf("not used by any case: %s\n", ref);
                n_unused++;
            }
        }
        closedir(d);
    }
    free(m.p);
    printf("# %d committed input files, all used\n", n_files - n_unused);
    assert_int_equal(n_unused, 0);
}

/* ------------------------------------------------------------------ */
/* Set-up                                                              */
/* ------------------------------------------------------------------ */

static void export_valid_model(const char *dir, struct bytes *out)
{
    struct assay_model_config cfg;
    assert_int_equal(assay_model_config_by_name("mini", &cfg), ASSAY_OK);
    export_model(&cfg, dir, "valid-mini.gguf", out);
}

static int setup(void **state)
{
    (void)state;
    assay_test_fixture("bad", g_bad, sizeof g_bad);
    assay_test_scratch("bad-inputs", g_work, sizeof g_work);
    remove_tree(g_work);
    if (mkdir(g_work, 0755) != 0) {
        return -1;
    }
    snprintf(g_gen, sizeof g_gen, "%s/gen", g_work);
    if (mkdir(g_gen, 0755) != 0) {
        return -1;
    }
    struct bytes valid;
    export_valid_model(g_gen, &valid);
    read_layout(&valid, &g_layout);
    make_gguf_cases(&valid);
    make_arch_cases(&valid);
    free(valid.p);
    make_json_cases();
    return 0;
}

/* The GGUF fuzz seeds (fixtures/fuzz/gguf/): small llama models written by
 * assay's writer (the hand-made ones beside them are described in that
 * folder's README). */
static int write_fuzz_seeds(const char *dir)
{
    struct assay_model_config cfg = {
        .name = "seed", .n_layer = 1, .d_model = 8, .n_head = 2, .n_kv_head = 1,
        .head_dim = 4, .d_ff = 16, .vocab = 8, .n_ctx = 32, .norm_eps = 1e-5f,
        .rope_theta = 10000.0f,
    };
    static const struct {
        const char *name;
        int32_t n_layer, n_head, n_kv_head, head_dim, vocab;
    } shapes[] = {
        {"tiny-1layer.gguf", 1, 2, 1, 4, 8},
        {"tiny-2layers-mha.gguf", 2, 2, 2, 4, 4},
        {"tiny-gqa.gguf", 1, 4, 2, 2, 6},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        cfg.n_layer = shapes[i].n_layer;
        cfg.n_head = shapes[i].n_head;
        cfg.n_kv_head = shapes[i].n_kv_head;
        cfg.head_dim = shapes[i].head_dim;
        cfg.vocab = shapes[i].vocab;
        struct assay_model *m = NULL;
        struct assay_diag diag;
        assay_diag_clear(&diag);
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, shapes[i].name);
        if (assay_model_init_random(&m, &cfg, 7) != ASSAY_OK ||
            assay_model_save_gguf(m, path, &diag) != ASSAY_OK) {
            fprintf(stderr, "cannot write %s\n", path);
            assay_model_free(m);
            return 1;
        }
        assay_model_free(m);
        printf("wrote %s\n", path);
    }
    return 0;
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    if (argc == 3 && strcmp(argv[1], "--write-fuzz-seeds") == 0) {
        return write_fuzz_seeds(argv[2]);
    }
    if (argc != 2) {
        fprintf(stderr, "usage: test_bad_inputs ASSAY_BINARY | --write-fuzz-seeds DIR\n");
        return 2;
    }
    /* The commands run in a scratch directory: the binary's path must not
     * depend on where this program was started. */
    static char assay_path[4096];
    if (realpath(argv[1], assay_path) == NULL) {
        fprintf(stderr, "test_bad_inputs: %s: %s\n", argv[1], strerror(errno));
        return 2;
    }
    g_assay = assay_path;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_file_used),
        cmocka_unit_test(test_corpus),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
