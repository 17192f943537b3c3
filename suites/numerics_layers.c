/*
 * numerics_layers.c - llama.cpp and the bundled engine's reference, layer
 * by layer (by hand; docs/numerics.md, "Where the server and the reference
 * part").
 *
 *   numerics_layers MODEL.gguf DUMP.bin TOKENS [--fa on|off] [--kv f16|f32]
 *                   [--act ggml|exact] [--against DUMP2.bin]
 *
 * DUMP.bin is what llama_tensors (built by `scripts/build-llama-server.sh
 * --tensors`) wrote for the same file and TOKENS (comma-separated ids).
 * The tool scores TOKENS with the bundled engine in llama.cpp's numerics
 * (act=ggml, an F16 KV cache, flash attention on unless told otherwise:
 * the audit's reference) with a probe at each of llama.cpp's checkpoints
 * (engine/forward.h), and prints for each layer and checkpoint how far
 * llama.cpp's values lie from the reference's: the largest |difference|
 * over the largest |value|, the root mean square of the differences over
 * that of the values, and for the input of a product the share of
 * elements that round to another value in the product's format (Q8_K,
 * Q8_0, F16 ...) from llama.cpp's than from the reference's: where the two
 * part for good. Last, the largest |difference| of the log-softmax of the
 * logits, the figure the audit's logprob check compares. With --against,
 * the second dump takes the reference's place (llama.cpp against itself:
 * the same tokens decoded in calls of another size), the formats still the
 * reference's. Exit 0, or 2 with a message.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/mutant.h"
#include "../core/status.h"
#include "../engine/model.h"
#include "../engine/numerics.h"
#include "../engine/score.h"

#define MAX_TOKENS 1024

static const char *const stages[] = {"attn_norm", "Qcur",        "Kcur",         "Vcur",
                                     "kqv_out",   "ffn_inp",     "ffn_norm",     "ffn_swiglu",
                                     "l_out",     "result_norm", "result_output"};
enum { N_STAGES = sizeof stages / sizeof stages[0], STAGE_RESULT = 9 };

/* One checkpoint of one layer: the reference's rows and llama.cpp's. */
struct slot {
    int32_t cols;
    enum assay_act_format fmt;
    float *ref; /* (n_tok, cols) */
    float *srv; /* (n_tok, cols) */
    char *have; /* (n_tok) 1: llama.cpp's row seen; 2: the --against dump's */
};

struct run {
    int32_t n_layer, n_tok;
    char need; /* the bits of slot.have a row needs to be compared: 1, or 3 with --against */
    struct slot *slots; /* (n_layer + 1, N_STAGES): results at layer n_layer */
    int failed;
};

static int stage_of(const char *name)
{
    for (int s = 0; s < N_STAGES; s++) {
        if (strcmp(name, stages[s]) == 0) {
            return s;
        }
    }
    return -1;
}

static struct slot *slot_at(struct run *r, int32_t layer, int stage)
{
    int32_t l = layer < 0 ? r->n_layer : layer;
    return &r->slots[(size_t)l * N_STAGES + (size_t)stage];
}

/* Size a slot for cols columns on first sight; 0, or -1 on a mismatch or
 * no memory. */
static int slot_ready(struct run *r, struct slot *s, int32_t cols)
{
    if (s->ref == NULL) {
        size_t n = (size_t)r->n_tok * (size_t)cols;
        s->cols = cols;
        s->ref = calloc(n, sizeof(float));
        s->srv = calloc(n, sizeof(float));
        s->have = calloc((size_t)r->n_tok, 1);
        if (s->ref == NULL || s->srv == NULL || s->have == NULL) {
            return -1;
        }
    }
    return s->cols == cols ? 0 : -1;
}

static void on_probe(void *user, const char *name, int32_t layer, enum assay_act_format fmt,
                     const float *x, int32_t rows, int32_t cols, int64_t stride)
{
    struct run *r = user;
    int st = stage_of(name);
    if (st < 0 || rows != r->n_tok) {
        return;
    }
    struct slot *s = slot_at(r, layer, st);
    if (slot_ready(r, s, cols) != 0) {
        r->failed = 1;
        return;
    }
    s->fmt = fmt;
    for (int32_t i = 0; i < rows; i++) {
        memcpy(s->ref + (size_t)i * (size_t)cols, x + (int64_t)i * stride,
               sizeof(float) * (size_t)cols);
    }
}

/* Read llama_tensors' records into the slots' llama.cpp rows, or into the
 * reference's when as_ref (--against); 0, or -1 with a message. */
static int read_dump(struct run *r, const char *path, bool as_ref)
{
    FILE *in = fopen(path, "rb");
    if (in == NULL) {
        fprintf(stderr, "numerics_layers: cannot read %s\n", path);
        return -1;
    }
    int rc = 0;
    uint32_t len;
    while (rc == 0 && fread(&len, sizeof len, 1, in) == 1) {
        char name[128];
        int32_t head[3];
        if (len >= sizeof name || fread(name, 1, len, in) != len ||
            fread(head, sizeof head, 1, in) != 1 || head[1] < 1 || head[2] < 1) {
            rc = -1;
            break;
        }
        name[len] = '\0';
        size_t n = (size_t)head[1] * (size_t)head[2];
        float *vals = malloc(sizeof(float) * n);
        if (vals == NULL || fread(vals, sizeof(float), n, in) != n) {
            free(vals);
            rc = -1;
            break;
        }
        int32_t layer = -1;
        char *dash = strrchr(name, '-');
        if (dash != NULL) {
            layer = atoi(dash + 1);
            *dash = '\0';
        }
        int st = stage_of(name);
        if (st >= 0 && layer < r->n_layer && head[0] >= 0 && head[0] + head[1] <= r->n_tok) {
            struct slot *s = slot_at(r, layer, st);
            if (slot_ready(r, s, head[2]) == 0) {
                for (int32_t i = 0; i < head[1]; i++) {
                    memcpy((as_ref ? s->ref : s->srv) + (size_t)(head[0] + i) * (size_t)head[2],
                           vals + (size_t)i * (size_t)head[2], sizeof(float) * (size_t)head[2]);
                    s->have[head[0] + i] |= as_ref ? 2 : 1;
                }
            } else {
                fprintf(stderr, "numerics_layers: %s: %s has %d columns, the engine's %d\n", path,
                        name, (int)head[2], (int)s->cols);
                rc = -1;
            }
        }
        free(vals);
    }
    if (rc != 0 || ferror(in)) {
        fprintf(stderr, "numerics_layers: %s: a damaged or short record\n", path);
        rc = -1;
    }
    fclose(in);
    return rc;
}

/* How many of a row's n elements round to another step of fmt from a than
 * from b: |round(a) - round(b)| more than half the step there (a block's
 * largest |a| over 127 for Q8_0 and Q8_K, |a| times the format's relative
 * step for F16 and BF16), so that a block scale moved by the inputs' float
 * error, which moves every element by as little, is not counted. */
static int64_t rounded_apart(enum assay_act_format fmt, const float *a, const float *b, int32_t n,
                             float *ta, float *tb)
{
    memcpy(ta, a, sizeof(float) * (size_t)n);
    memcpy(tb, b, sizeof(float) * (size_t)n);
    (void)assay_numerics_round_row(fmt, ta, n, ASSAY_MUTANT_NONE);
    (void)assay_numerics_round_row(fmt, tb, n, ASSAY_MUTANT_NONE);
    int32_t block = assay_numerics_format_block(fmt);
    double rel = fmt == ASSAY_ACT_FORMAT_BF16 ? 0x1p-8 : 0x1p-11;
    int64_t k = 0;
    for (int32_t b0 = 0; b0 < n; b0 += block) {
        double amax = 0;
        for (int32_t i = b0; i < b0 + block && i < n; i++) {
            amax = fmax(amax, fabs(a[i]));
        }
        for (int32_t i = b0; i < b0 + block && i < n; i++) {
            double step = block > 1 ? amax / 127.0 : fabs(a[i]) * rel * 2.0;
            k += fabs((double)ta[i] - tb[i]) > 0.5 * step;
        }
    }
    return k;
}

static void print_slot(const struct slot *s, int32_t n_tok, char need)
{
    double max_d = 0, max_x = 0, ss_d = 0, ss_x = 0;
    int64_t apart = 0, n_round = 0, n_rows = 0;
    float *ta = malloc(sizeof(float) * (size_t)s->cols);
    float *tb = malloc(sizeof(float) * (size_t)s->cols);
    bool rounds = s->fmt != ASSAY_ACT_FORMAT_F32 && ta != NULL && tb != NULL;
    for (int32_t i = 0; i < n_tok; i++) {
        if ((s->have[i] & need) != need) {
            continue;
        }
        n_rows++;
        const float *a = s->ref + (size_t)i * (size_t)s->cols;
        const float *b = s->srv + (size_t)i * (size_t)s->cols;
        for (int32_t j = 0; j < s->cols; j++) {
            double d = fabs((double)a[j] - b[j]);
            max_d = fmax(max_d, d);
            max_x = fmax(max_x, fabs(a[j]));
            ss_d += d * d;
            ss_x += (double)a[j] * a[j];
        }
        if (rounds) {
            apart += rounded_apart(s->fmt, a, b, s->cols, ta, tb);
            n_round += s->cols;
        }
    }
    free(ta);
    free(tb);
    if (n_rows == 0) {
        printf(" (no row written by %s)\n", need == 1 ? "llama.cpp" : "both dumps");
        return;
    }
    printf(" %10.3g %10.3g", max_x > 0 ? max_d / max_x : max_d,
           ss_x > 0 ? sqrt(ss_d / ss_x) : sqrt(ss_d));
    if (rounds) {
        printf("   %9.4f%% of %lld (%s)", 100.0 * (double)apart / (double)n_round,
               (long long)n_round, assay_numerics_format_name(s->fmt));
    }
    printf("\n");
}

/* The largest |difference| of two rows' log-softmaxes over n tokens. */
static double row_distance(const float *a, const float *b, int32_t n)
{
    const float *rows[2] = {a, b};
    double lse[2];
    for (int k = 0; k < 2; k++) {
        double mx = -INFINITY, sum = 0;
        for (int32_t j = 0; j < n; j++) {
            mx = fmax(mx, rows[k][j]);
        }
        for (int32_t j = 0; j < n; j++) {
            sum += exp(rows[k][j] - mx);
        }
        lse[k] = mx + log(sum);
    }
    double worst = 0;
    for (int32_t j = 0; j < n; j++) {
        worst = fmax(worst, fabs((rows[0][j] - lse[0]) - (rows[1][j] - lse[1])));
    }
    return worst;
}

/* The largest |difference| of the log-softmaxes of two sets of logits, the
 * slot's llama.cpp rows against the rows of other (the slot's reference
 * rows when NULL), over every token and every row whose have bits hold
 * need. */
static double logprob_distance(const struct slot *s, const float *other, int32_t n_tok, char need)
{
    double worst = 0;
    for (int32_t i = 0; i < n_tok; i++) {
        if ((s->have[i] & need) == need) {
            size_t at = (size_t)i * (size_t)s->cols;
            worst = fmax(worst, row_distance(s->srv + at, (other ? other : s->ref) + at, s->cols));
        }
    }
    return worst;
}

/* The largest |log-softmax difference| between the reference's logits and
 * the bundled engine's exact arithmetic (fp32, F32 KV cache: within about
 * 1e-5 of the oracle's fp64) over the same tokens, and llama.cpp's from
 * exact into *srv_exact; -1 when the exact pass fails. */
static double exact_distance(const struct assay_model *m, const struct slot *logits,
                             const int32_t *tok, int32_t n_tok, double *srv_exact)
{
    struct assay_score_params sp = assay_score_default_params(m, n_tok);
    struct assay_diag diag;
    struct assay_score *sc = NULL;
    const float *rows;
    if (assay_score_init(&sc, &sp, &diag) != ASSAY_OK ||
        assay_score_rows(sc, tok, 1, tok + 1, n_tok, &rows) != ASSAY_OK) {
        assay_score_free(sc);
        return -1;
    }
    double worst = 0;
    for (int32_t i = 0; i < n_tok; i++) {
        size_t at = (size_t)i * (size_t)logits->cols;
        worst = fmax(worst, row_distance(logits->ref + at, rows + at, logits->cols));
    }
    *srv_exact = logprob_distance(logits, rows, n_tok, 1);
    assay_score_free(sc);
    return worst;
}

static int parse_tokens(const char *s, int32_t *tok, int32_t *n)
{
    *n = 0;
    while (*s != '\0') {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX || *n == MAX_TOKENS ||
            (*end != ',' && *end != '\0')) {
            return -1;
        }
        tok[(*n)++] = (int32_t)v;
        s = *end == ',' ? end + 1 : end;
    }
    return *n > 1 ? 0 : -1;
}

int main(int argc, char **argv)
{
    static int32_t tok[MAX_TOKENS + 1];
    int32_t n_tok = 0;
    bool fa = true, kv16 = true, ggml = true;
    const char *against = NULL;
    if (argc < 4 || parse_tokens(argv[3], tok, &n_tok) != 0) {
        fprintf(stderr,
                "usage: %s MODEL.gguf DUMP.bin TOKENS [--fa on|off] [--kv f16|f32]\n"
                "       [--act ggml|exact] [--against DUMP2.bin]\n"
                "  TOKENS: 2 to %d comma-separated token ids, as given to llama_tensors\n",
                argv[0], MAX_TOKENS);
        return 2;
    }
    for (int i = 4; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(argv[i], "--fa") == 0 && (strcmp(v, "on") == 0 || strcmp(v, "off") == 0)) {
            fa = strcmp(v, "on") == 0;
        } else if (strcmp(argv[i], "--kv") == 0 &&
                   (strcmp(v, "f16") == 0 || strcmp(v, "f32") == 0)) {
            kv16 = strcmp(v, "f16") == 0;
        } else if (strcmp(argv[i], "--act") == 0 &&
                   (strcmp(v, "ggml") == 0 || strcmp(v, "exact") == 0)) {
            ggml = strcmp(v, "ggml") == 0;
        } else if (strcmp(argv[i], "--against") == 0 && *v != '\0') {
            against = v;
        } else {
            fprintf(stderr, "numerics_layers: bad option '%s %s'\n", argv[i], v);
            return 2;
        }
    }
    struct assay_diag diag;
    assay_diag_clear(&diag);
    struct assay_model *m = NULL;
    enum assay_status st = assay_model_load_gguf(&m, argv[1], &diag);
    if (st != ASSAY_OK) {
        char msg[1024];
        fprintf(stderr, "numerics_layers: %s (%s)\n", assay_diag_format(&diag, msg, sizeof msg),
                assay_status_str(st));
        return 2;
    }
    for (int32_t i = 0; i < n_tok; i++) {
        if (tok[i] >= m->cfg.vocab) {
            fprintf(stderr, "numerics_layers: token %d is outside the vocabulary (%d)\n",
                    (int)tok[i], (int)m->cfg.vocab);
            return 2;
        }
    }
    struct run r = {.n_layer = m->cfg.n_layer, .n_tok = n_tok, .need = against ? 3 : 1};
    r.slots = calloc((size_t)(r.n_layer + 1) * N_STAGES, sizeof *r.slots);
    struct assay_score_params sp = assay_score_default_params(m, n_tok);
    sp.act = ggml ? ASSAY_ACT_MODE_GGML : ASSAY_ACT_MODE_EXACT;
    sp.kv_type = kv16 ? ASSAY_KV_TYPE_F16 : ASSAY_KV_TYPE_F32;
    sp.flash_attn = fa && kv16;
    struct assay_score *sc = NULL;
    if (r.slots == NULL || (st = assay_score_init(&sc, &sp, &diag)) != ASSAY_OK) {
        char msg[1024];
        fprintf(stderr, "numerics_layers: no scorer: %s (%s)\n",
                assay_diag_format(&diag, msg, sizeof msg), assay_status_str(st));
        return 2;
    }
    /* Every token's row: the prompt is the first token, the continuation
     * the rest and one more that is never read. */
    assay_score_set_probe(sc, on_probe, &r);
    const float *rows;
    tok[n_tok] = 0;
    st = assay_score_rows(sc, tok, 1, tok + 1, n_tok, &rows);
    if (st != ASSAY_OK || r.failed || read_dump(&r, argv[2], false) != 0 ||
        (against != NULL && read_dump(&r, against, true) != 0)) {
        fprintf(stderr, "numerics_layers: %s\n",
                st != ASSAY_OK ? assay_status_str(st) : "the comparison could not be made");
        return 2;
    }
    if (against != NULL) {
        printf("%s, %d tokens: llama.cpp A (%s) against llama.cpp B (%s), formats of act=%s\n",
               argv[1], (int)n_tok, argv[2], against, ggml ? "ggml" : "exact");
    } else {
        printf("%s, %d tokens: llama.cpp against the reference (act=%s, kv_type=%s, fa=%s)\n",
               argv[1], (int)n_tok, ggml ? "ggml" : "exact", kv16 ? "f16" : "f32",
               fa && kv16 ? "on" : "off");
    }
    printf("%-6s %-13s %10s %10s   %s\n", "layer", "checkpoint", "max|d|/max", "rms ratio",
           "input rounded apart");
    for (int32_t l = 0; l <= r.n_layer; l++) {
        for (int s = 0; s < N_STAGES; s++) {
            struct slot *sl = &r.slots[(size_t)l * N_STAGES + (size_t)s];
            if (sl->ref == NULL || (l < r.n_layer) != (s < STAGE_RESULT)) {
                continue;
            }
            char label[16];
            snprintf(label, sizeof label, "%d", (int)l);
            printf("%-6s %-13s", l < r.n_layer ? label : "out", stages[s]);
            print_slot(sl, n_tok, r.need);
        }
    }
    struct slot *logits = slot_at(&r, -1, STAGE_RESULT + 1);
    if (logits->ref != NULL) {
        double srv_exact = 0;
        double ref_exact = against ? -1 : exact_distance(m, logits, tok, n_tok, &srv_exact);
        printf("numerics_layers: |log-softmax %s| max %.4g",
               against ? "A - B" : "llama.cpp - reference",
               logprob_distance(logits, NULL, n_tok, r.need));
        if (ref_exact >= 0) {
            printf("; |reference - exact| %.4g, |llama.cpp - exact| %.4g", ref_exact, srv_exact);
        }
        printf(" (%d rows)\n", (int)n_tok);
    }
    assay_score_free(sc);
    assay_model_free(m);
    return 0;
}
