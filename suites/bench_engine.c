/*
 * Decode speed of the bundled engine, its product paths side by side, next
 * to the machine's memory bound, OpenBLAS's sgemm and llama.cpp's
 * llama-server on the same model, all measured in the same run (the
 * machine is shared and noisy: only figures measured side by side are
 * compared).
 *
 * For batch B in {1, 8, 32, 64}: B requests with 16-token prompts decode
 * together; after a warm-up the engine's decode tokens/s is timed for
 * about a second (threads=2) with
 *   - its default products (the engine's own kernel, engine/gemm.h),
 *   - invariant=on (the same kernel, every product, the claim made),
 *   - blas_rows=1 (every product through OpenBLAS, whose kernel the
 *     machine or OPENBLAS_CORETYPE picks),
 * and at batch 1 also the default with threads=1. Then the same products
 * (the shapes of one decode step, each with a weight matrix of its own)
 * through cblas_sgemm alone, OpenBLAS threading as it likes: the engine's
 * GFLOP/s over that is the ratio printed. When llama-server is built
 * (scripts/build-llama-server.sh; never built here), the same GGUF
 * (TinyGPT seed 1) is served with B slots and 2 threads, with an F32 KV
 * cache and flash attention off, and with its defaults, and one request of
 * B prompts decodes after the same 16-token prompt (suites/llama_bench.h:
 * the server's own decode timings, aggregated over the slots' common
 * window): 800 tokens at batch 1, 200 from batch 8 (about the positions
 * the engine's second of decoding reaches there). The engine over the
 * faster of the two is the last column. Each measurement is repeated in
 * interleaved rounds (5; llama-server in the first 3, both servers started
 * before the batch's first round and idle in between) and the median is
 * reported with the range.
 *
 * The memory bound: a decode step of one stream reads every weight of the
 * products once; reading that many bytes with two threads, as fast as the
 * machine allows, bounds the tokens/s of one stream.
 *
 * With --gguf FILE the model is that file (a generated test model, in any
 * type the engine loads: F16, Q8_0, Q4_K_M ...; scripts/make-test-models.sh)
 * instead of TinyGPT, llama-server serves it, the second column is the
 * engine computing llama.cpp's numerics (act=ggml, F16 KV, flash
 * attention: the audit's reference) rather than invariant=on, and the
 * memory bound is given twice: for the engine's fp32 copy and for the
 * weights as the file stores them (what llama-server reads). A third
 * bound counts what the engine's decode step reads: the matrices it keeps
 * in their file's integer format (engine/gemmq.h) in that layout.
 *
 * A benchmark prints; it asserts only that the engine produced tokens.
 */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/blas.h"
#include "core/clock.h"
#include "engine/engine.h"
#include "engine/gguf.h"
#include "llama_bench.h"
#include "support.h"

#define ROUNDS 5
#define LLAMA_ROUNDS 3

extern char **environ;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and range of n values (sorted in place); NaNs (runs that did not
 * happen) are left out. */
struct spread {
    double med, lo, hi;
    int n;
};

static struct spread spread_of(double *v, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!isnan(v[i])) {
            v[k++] = v[i];
        }
    }
    struct spread s = {NAN, NAN, NAN, k};
    if (k == 0) {
        return s;
    }
    qsort(v, (size_t)k, sizeof(double), cmp_double);
    s.med = k % 2 ? v[k / 2] : 0.5 * (v[k / 2 - 1] + v[k / 2]);
    s.lo = v[0];
    s.hi = v[k - 1];
    return s;
}

/* The (k, n) of each of a layer's four products: QKV, output, gate/up, down. */
static void layer_shapes(const struct assay_model_config *c, int shapes[4][2])
{
    int d = c->d_model, q = c->n_head * c->head_dim, kv = c->n_kv_head * c->head_dim;
    const int s[4][2] = {{d, q + 2 * kv}, {q, d}, {d, 2 * c->d_ff}, {c->d_ff, d}};
    memcpy(shapes, s, sizeof s);
}

/* Matmul FLOPs per token of a config: every linear layer and the LM head. */
static double flops_per_token(const struct assay_model_config *c)
{
    int shapes[4][2];
    layer_shapes(c, shapes);
    double per_layer = 0.0;
    for (int s = 0; s < 4; s++) {
        per_layer += (double)shapes[s][0] * shapes[s][1];
    }
    return 2.0 * (c->n_layer * per_layer + (double)c->d_model * c->vocab);
}

/* One engine configuration of the benchmark. */
struct config {
    const char *label;
    bool invariant;
    int32_t blas_rows;
    int32_t threads;
    bool ggml; /* llama.cpp's numerics: act=ggml, F16 KV, flash attention */
};

/* Decode tokens/s of batch b with config c, measured over ~seconds after warm-up. */
static double engine_rate(const struct assay_model *m, int b, const struct config *c,
                          double seconds, long *tokens_out)
{
    struct assay_engine_params p = assay_engine_default_params(m);
    p.threads = c->threads;
    p.batch_invariant = c->invariant;
    p.blas_rows = c->blas_rows;
    if (c->ggml) {
        p.act = ASSAY_ACT_MODE_GGML;
        p.kv_type = ASSAY_KV_TYPE_F16;
        p.flash_attn = true;
    }
    p.max_seq_len = m->cfg.n_ctx < 1024 ? m->cfg.n_ctx : 1024;
    p.max_batch = b > 1 ? b : 1;
    p.n_blocks = b * 1024 / p.block_size + 16;
    struct assay_engine *e;
    if (assay_engine_init(&e, &p, NULL) != ASSAY_OK) {
        return NAN;
    }
    int32_t prompt[16];
    for (int i = 0; i < 16; i++) {
        prompt[i] = (i * 7 + 3) % 256;
    }
    for (int r = 0; r < b; r++) {
        struct assay_request q = {(uint64_t)r, prompt, 16, 1000, -1, assay_sampling_greedy()};
        if (assay_engine_add_request(e, &q) != ASSAY_OK) {
            assay_engine_free(e);
            return NAN;
        }
    }
    const struct assay_event *ev;
    size_t n;
    for (int s = 0; s < 4; s++) { /* prefill and warm-up */
        assay_engine_step(e, &ev, &n);
    }
    long tokens = 0;
    int64_t t0 = assay_now_ns(), t1 = t0;
    while (t1 - t0 < (int64_t)(seconds * 1e9) && assay_engine_has_work(e)) {
        assay_engine_step(e, &ev, &n);
        for (size_t i = 0; i < n; i++) {
            tokens += ev[i].kind == ASSAY_EVENT_TOKEN;
        }
        t1 = assay_now_ns();
    }
    assay_engine_free(e);
    *tokens_out += tokens;
    return tokens / ((t1 - t0) / 1e9);
}

/*
 * cblas_sgemm GFLOP/s on the products of one decode step of batch m: the
 * engine's shapes in the engine's order (layer by layer, then the LM
 * head), each product with a weight matrix of its own, as in the engine
 * (23 MB for TinyGPT: reusing one matrix for several products would let
 * the reference read weights from cache that the engine must stream).
 * OpenBLAS threads as it sees fit.
 */
static double sgemm_rate(const struct assay_model_config *c, int m, double seconds)
{
    int d = c->d_model, shapes[4][2];
    layer_shapes(c, shapes);
    size_t n_w = (size_t)(flops_per_token(c) / 2.0); /* every weight of the products */
    int widest = 2 * c->d_ff > c->vocab ? 2 * c->d_ff : c->vocab;
    float *a = calloc((size_t)m * c->d_ff, sizeof(float));
    float *w = calloc(n_w, sizeof(float));
    float *out = calloc((size_t)m * widest, sizeof(float));
    if (a == NULL || w == NULL || out == NULL) {
        free(a);
        free(w);
        free(out);
        return NAN;
    }
    for (size_t i = 0; i < (size_t)m * c->d_ff; i++) {
        a[i] = 0.01f * (float)(i % 13);
    }
    for (size_t i = 0; i < n_w; i++) {
        w[i] = 0.001f * (float)(i % 17);
    }
    double flops = 0.0;
    int64_t t0 = assay_now_ns(), t1 = t0;
    while (t1 - t0 < (int64_t)(seconds * 1e9)) {
        const float *wl = w;
        for (int l = 0; l <= c->n_layer; l++) {
            for (int s = 0; s < (l < c->n_layer ? 4 : 1); s++) {
                int k = l < c->n_layer ? shapes[s][0] : d;
                int n = l < c->n_layer ? shapes[s][1] : c->vocab;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, wl, n,
                            0.0f, out, n);
                wl += (size_t)k * n;
                flops += 2.0 * m * k * n;
            }
        }
        t1 = assay_now_ns();
    }
    free(a);
    free(w);
    free(out);
    return flops / ((t1 - t0) / 1e9) / 1e9;
}

static double sgemm_square(int n, double seconds)
{
    float *a = calloc((size_t)n * n, sizeof(float)), *b = calloc((size_t)n * n, sizeof(float));
    float *c = calloc((size_t)n * n, sizeof(float));
    double flops = 0.0;
    int64_t t0 = assay_now_ns(), t1 = t0;
    while (a != NULL && b != NULL && c != NULL && t1 - t0 < (int64_t)(seconds * 1e9)) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        flops += 2.0 * n * n * (double)n;
        t1 = assay_now_ns();
    }
    free(a);
    free(b);
    free(c);
    return t1 > t0 ? flops / ((t1 - t0) / 1e9) / 1e9 : NAN;
}

/* Where the readers' sums go, so that the compiler keeps the reads. */
static volatile uint64_t g_sink;

/* One thread's share of the bandwidth measurement: sum its words, `reps` times. */
struct reader {
    const uint64_t *p;
    size_t n;
    int reps;
    uint64_t sum;
};

static void *read_words(void *arg)
{
    struct reader *r = arg;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int k = 0; k < r->reps; k++) {
        for (size_t i = 0; i + 4 <= r->n; i += 4) {
            s0 += r->p[i];
            s1 += r->p[i + 1];
            s2 += r->p[i + 2];
            s3 += r->p[i + 3];
        }
    }
    r->sum = s0 + s1 + s2 + s3;
    return NULL;
}

/* GB/s of reading `bytes` (each of two threads its half, as the engine's
 * two threads split a product), repeated for about `seconds`; the best of
 * three tries. */
static double read_bandwidth(size_t bytes, double seconds)
{
    size_t words = bytes / 8 / 8 * 8;
    uint64_t *buf = aligned_alloc(64, words * 8);
    if (buf == NULL) {
        return NAN;
    }
    for (size_t i = 0; i < words; i++) {
        buf[i] = i;
    }
    double best = 0.0;
    int reps = 1;
    for (int t = 0; t < 4; t++) {
        struct reader r[2] = {{buf, words / 2, reps, 0}, {buf + words / 2, words / 2, reps, 0}};
        pthread_t th;
        int64_t t0 = assay_now_ns();
        if (pthread_create(&th, NULL, read_words, &r[1]) != 0) {
            free(buf);
            return NAN;
        }
        read_words(&r[0]);
        pthread_join(th, NULL);
        double s = (assay_now_ns() - t0) / 1e9;
        if (t == 0) { /* the first pass touches the pages; size the rest from it */
            reps = (int)(seconds / 3 / s) + 1;
            continue;
        }
        double gbs = (double)words * 8 * reps / s / 1e9;
        best = gbs > best ? gbs : best;
        g_sink += r[0].sum + r[1].sum;
    }
    free(buf);
    return best;
}

/* The bytes of the weights a decode step reads, as the GGUF file stores
 * them: every tensor but the token embedding (one row of it is read),
 * which counts when there is no output tensor (tied: it is the LM head).
 * NaN when the file cannot be read. */
static double stored_product_bytes(const char *path)
{
    struct assay_gguf *g = NULL;
    if (assay_gguf_read_file(path, &g, NULL) != ASSAY_OK) {
        return NAN;
    }
    bool tied = assay_gguf_find_tensor(g, "output.weight") == NULL;
    double bytes = 0.0;
    for (size_t i = 0; i < assay_gguf_n_tensors(g); i++) {
        const struct assay_gguf_tensor *t = assay_gguf_tensor_at(g, i);
        if (tied || strcmp(t->name, "token_embd.weight") != 0) {
            bytes += (double)t->n_bytes;
        }
    }
    assay_gguf_free(g);
    return bytes;
}

/* llama-server with a slot per request of one batch, in two configurations. */
struct llama_side {
    bool on;
    char bin[4096];
    char gguf[1024];
    char why[2048]; /* why it is not measured */
};

static const char *const k_llama_configs[2] = {"-ctk f32 -ctv f32 -fa off", ""};
static const char *const k_llama_names[2] = {"F32 KV, no FA", "defaults"};

/* Start llama-server for batch b in configuration cfg and warm it up;
 * NULL (after saying why) when it did not start. */
static struct assay_llama_bench *llama_open(const struct llama_side *ls, int b, int cfg)
{
    struct assay_llama_bench_params p = assay_llama_bench_default_params();
    p.server_bin = ls->bin;
    p.gguf = ls->gguf;
    p.slots = b;
    p.threads = 2;
    p.prompt_len = 16;
    p.n_predict = b == 1 ? 800 : 200;
    p.extra_args = k_llama_configs[cfg];
    p.one_request = 1; /* the B prompts in one request: every slot starts in the same step */
    char state[1024], name[64];
    snprintf(name, sizeof name, "bench-llama-%s-np%d", cfg == 0 ? "f32" : "defaults", b);
    p.state_dir = assay_test_scratch(name, state, sizeof state);
    char err[1024];
    struct assay_llama_bench *lb;
    if (assay_llama_bench_open(&lb, &p, err, sizeof err) != ASSAY_OK) {
        printf("  llama-server (%s) at batch %d did not start: %s\n", k_llama_names[cfg], b, err);
        return NULL;
    }
    struct assay_llama_bench_result res;
    if (assay_llama_bench_run(lb, b, &res, err, sizeof err) != ASSAY_OK) {
        printf("  llama-server (%s) batch %d warm-up: %s\n", k_llama_names[cfg], b, err);
    }
    return lb;
}

/* One measured run of lb at batch b: tokens/s, NaN (after saying why) on failure. */
static double llama_rate(struct assay_llama_bench *lb, int b, int cfg)
{
    if (lb == NULL) {
        return NAN;
    }
    char err[1024];
    struct assay_llama_bench_result res;
    if (assay_llama_bench_run(lb, b, &res, err, sizeof err) != ASSAY_OK) {
        printf("  llama-server (%s) batch %d: %s\n", k_llama_names[cfg], b, err);
        return NAN;
    }
    return res.tokens_per_s;
}

static void print_cell(const struct spread *s)
{
    if (s->n == 0) {
        printf(" %21s", "-");
    } else {
        printf(" %7.0f [%5.0f,%6.0f]", s->med, s->lo, s->hi);
    }
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    const char *gguf = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gguf") == 0 && i + 1 < argc) {
            gguf = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--gguf FILE]\n", argv[0]);
            return 2;
        }
    }
    struct assay_blas_info bi;
    assay_blas_get_info(&bi);
    struct assay_model *m;
    struct assay_model_config cfg = assay_model_config_tinygpt();
    double stored_bytes = NAN; /* the products' weights as the file stores them */
    if (gguf != NULL) {
        struct assay_diag diag;
        assay_diag_clear(&diag);
        if (assay_model_load_gguf(&m, gguf, &diag) != ASSAY_OK) {
            char msg[1024];
            fprintf(stderr, "bench_engine: %s\n", assay_diag_format(&diag, msg, sizeof msg));
            return 2;
        }
        cfg = m->cfg;
        stored_bytes = stored_product_bytes(gguf);
    } else if (assay_model_init_random(&m, &cfg, 1) != ASSAY_OK) {
        return 1;
    }
    double fpt = flops_per_token(&cfg);
    printf("bundled engine decode speed (%s, %lld parameters, %.2f MFLOP of products per "
           "token)\n",
           gguf != NULL ? gguf : "TinyGPT", (long long)assay_model_config_n_params(&cfg),
           fpt / 1e6);
    printf("OpenBLAS core %s (%s), %d threads, cblas_sgemm from %s; OPENBLAS_* in force:",
           bi.core, bi.overridden ? "set by assay: OpenBLAS chose a generic kernel"
                    : bi.user_set ? "OPENBLAS_CORETYPE set by the user"
                                  : "OpenBLAS's own choice",
           bi.threads, bi.sgemm_library);
    int n_env = 0;
    for (char **e = environ; *e != NULL; e++) {
        if (strncmp(*e, "OPENBLAS_", 9) == 0) {
            printf(" %s", *e);
            n_env++;
        }
    }
    printf("%s\n", n_env == 0 ? " none" : "");
    printf("the engine's own product: isa %s\n", assay_isa_name(assay_isa_resolve(ASSAY_ISA_AUTO)));

    /* The memory bound of one stream. */
    double weight_bytes = fpt / 2.0 * sizeof(float);
    double bw = read_bandwidth((size_t)weight_bytes, 1.5);
    printf("memory bound of one stream: each decode step reads %.1f MB of weights; two threads "
           "read that much at %.1f GB/s: at most %.0f tokens/s\n",
           weight_bytes / 1e6, bw, bw * 1e9 / weight_bytes);
    if (isfinite(stored_bytes)) {
        printf("memory bound of one stream with the weights as the file stores them (what "
               "llama-server reads): %.1f MB a step, at most %.0f tokens/s\n",
               stored_bytes / 1e6, bw * 1e9 / stored_bytes);
    }
    /* What the engine's decode step reads: the integer layouts of the
     * matrices kept in their file's format, packed floats for the rest. */
    struct assay_engine_params ep = assay_engine_default_params(m);
    struct assay_engine *probe_engine;
    if (assay_engine_init(&probe_engine, &ep, NULL) == ASSAY_OK) {
        struct assay_engine_numerics en;
        assay_engine_get_numerics(probe_engine, &en);
        double one = (double)en.one_row_bytes;
        printf("the engine's products of few rows keep %d of %d matrices in the file's integer "
               "format (engine/gemmq.h): %.1f MB a step, at most %.0f tokens/s of one stream\n",
               (int)en.quantized, (int)en.matrices, one / 1e6, bw * 1e9 / one);
        assay_engine_free(probe_engine);
    }

    /* llama-server, when built. */
    struct llama_side ls = {0};
    if (assay_llama_bench_find_server(NULL, ls.bin, sizeof ls.bin, ls.why, sizeof ls.why) ==
        ASSAY_OK) {
        struct assay_diag diag;
        assay_diag_clear(&diag);
        if (gguf != NULL) {
            snprintf(ls.gguf, sizeof ls.gguf, "%s", gguf);
            ls.on = true;
        } else if (assay_test_scratch("bench-tinygpt-s1.gguf", ls.gguf, sizeof ls.gguf) &&
                   assay_model_save_gguf(m, ls.gguf, &diag) == ASSAY_OK) {
            ls.on = true;
        } else {
            snprintf(ls.why, sizeof ls.why, "could not write %s", ls.gguf);
        }
    }
    if (ls.on) {
        printf("llama-server: %s, 2 threads, a slot per request; %s and %s; 800 tokens at batch "
               "1, 200 from batch 8, after the same 16-token prompt\n",
               ls.bin, k_llama_configs[0], k_llama_names[1]);
    } else {
        printf("llama-server: not measured (%s)\n", ls.why);
    }
    printf("%d rounds (llama-server %d), interleaved; medians [min, max], tokens/s\n\n", ROUNDS,
           LLAMA_ROUNDS);

    const struct config configs[] = {
        {"default", false, ASSAY_ENGINE_BLAS_ROWS, 2, false},
        gguf != NULL ? (struct config){"ggml numerics", false, ASSAY_ENGINE_BLAS_ROWS, 2, true}
                     : (struct config){"invariant=on", true, 0, 2, false},
        {"blas_rows=1 (OpenBLAS)", false, 1, 2, false},
        {"default, threads=1", false, ASSAY_ENGINE_BLAS_ROWS, 1, false},
    };
    printf("%5s %21s %21s %21s %21s %19s %21s %21s %8s\n", "batch", "default", configs[1].label,
           "OpenBLAS products", "default threads=1", "sgemm GFLOP/s", "llama F32 KV",
           "llama defaults", "vs llama");
    const int batches[] = {1, 8, 32, 64};
    long tokens = 0;
    double worst_ratio = INFINITY;
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
        int b = batches[i];
        double rate[4][ROUNDS], sg[ROUNDS], ratio[ROUNDS], llama[2][LLAMA_ROUNDS];
        /* Both servers wait, idle, while the engine runs (a server's
         * threads sleep between requests). */
        struct assay_llama_bench *lb[2] = {NULL, NULL};
        for (int c = 0; c < 2 && ls.on; c++) {
            lb[c] = llama_open(&ls, b, c);
        }
        for (int r = 0; r < ROUNDS; r++) {
            /* Each round starts with another configuration, so that what
             * the one before leaves behind (caches, another program's
             * threads still spinning down) falls on each in turn. */
            for (int k = 0; k < 4; k++) {
                int c = (k + r) % 4;
                rate[c][r] = (c < 3 || b == 1) ? engine_rate(m, b, &configs[c], 1.0, &tokens)
                                               : NAN;
            }
            sg[r] = sgemm_rate(&cfg, b, 0.5);
            ratio[r] = rate[0][r] * fpt / 1e9 / sg[r];
            for (int c = 0; c < 2 && r < LLAMA_ROUNDS; c++) {
                llama[c][r] = llama_rate(lb[c], b, c);
            }
        }
        for (int c = 0; c < 2; c++) {
            assay_llama_bench_close(lb[c]);
        }
        printf("%5d", b);
        struct spread s0 = spread_of(rate[0], ROUNDS);
        print_cell(&s0);
        for (int c = 1; c < 4; c++) {
            struct spread s = spread_of(rate[c], ROUNDS);
            print_cell(&s);
        }
        struct spread ss = spread_of(sg, ROUNDS), sr = spread_of(ratio, ROUNDS);
        printf(" %6.1f (%4.0f%%)     ", ss.med, 100 * sr.med);
        struct spread l0 = spread_of(llama[0], LLAMA_ROUNDS), l1 = spread_of(llama[1], LLAMA_ROUNDS);
        print_cell(&l0);
        print_cell(&l1);
        double best = l0.n == 0 ? l1.med : l1.n == 0 ? l0.med : fmax(l0.med, l1.med);
        if (l0.n > 0 || l1.n > 0) {
            printf(" %7.2fx\n", s0.med / best);
            worst_ratio = fmin(worst_ratio, s0.med / best);
        } else {
            printf(" %8s\n", "-");
        }
        fflush(stdout);
    }
    printf("\nsgemm GFLOP/s: cblas_sgemm alone on the products of one decode step (in brackets: "
           "the default engine's GFLOP/s over it); vs llama: the default engine over the faster "
           "llama-server configuration");
    if (isfinite(worst_ratio)) {
        printf("; lowest %.2fx\n", worst_ratio);
    } else {
        printf("\n");
    }
    printf("cblas_sgemm 1024 x 1024 x 1024: %.1f GFLOP/s (the practical peak)\n",
           sgemm_square(1024, 1.0));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak resident memory: %.1f MiB\n", ru.ru_maxrss / 1024.0);
    assay_model_free(m);
    return tokens > 0 ? 0 : 1;
}
