/*
 * Decode speed of the bundled engine next to the machine's own sgemm,
 * measured in the same run (the machine is shared and noisy: only figures
 * measured side by side are compared).
 *
 * For batch B in {1, 8, 32, 64}: B requests with 16-token prompts decode
 * together; after a warm-up the engine's decode tokens/s is timed, and the
 * implied GFLOP/s uses TinyGPT's matmul cost per token. Right after, the
 * same products (the shapes one decode step of batch B multiplies, each
 * with a weight matrix of its own) are timed with cblas_sgemm alone. The
 * ratio says how much of the BLAS rate the engine keeps. Each measurement
 * is repeated (5 rounds, engine and sgemm interleaved) and the median is
 * reported with the spread; the ratio's median is over the rounds' own
 * ratios. Also printed: sgemm at 1024^3 (the
 * practical peak), the OpenBLAS core, and the peak resident memory.
 *
 * A benchmark prints; it asserts only that the engine produced tokens.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/blas.h"
#include "core/clock.h"
#include "engine/engine.h"
#include "support.h"

#define ROUNDS 5

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
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

/* Decode tokens/s of batch b (engine option threads), measured over ~seconds after warm-up. */
static double engine_rate(const struct assay_model *m, int b, int threads, double seconds,
                          long *tokens_out)
{
    struct assay_engine_params p = assay_engine_default_params(m);
    p.threads = threads;
    p.max_seq_len = 1024;
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
    while (t1 - t0 < (int64_t)(seconds * 1e9)) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        flops += 2.0 * n * n * (double)n;
        t1 = assay_now_ns();
    }
    free(a);
    free(b);
    free(c);
    return flops / ((t1 - t0) / 1e9) / 1e9;
}

int main(int argc, char **argv)
{
    assay_test_init(argc, argv);
    struct assay_blas_info bi;
    assay_blas_get_info(&bi);
    struct assay_model_config cfg = assay_model_config_tinygpt();
    struct assay_model *m;
    if (assay_model_init_random(&m, &cfg, 1) != ASSAY_OK) {
        return 1;
    }
    double fpt = flops_per_token(&cfg);
    printf("bundled engine decode speed (TinyGPT, %lld parameters, %.2f MFLOP of products per token)\n",
           (long long)assay_model_config_n_params(&cfg), fpt / 1e6);
    printf("OpenBLAS core %s%s%s%s, %d threads, cblas_sgemm from %s\n", bi.core,
           bi.overridden ? " (OpenBLAS chose " : "", bi.overridden ? bi.detected : "",
           bi.overridden ? " on its own)" : "", bi.threads, bi.sgemm_library);
    printf("%d rounds, engine then sgemm interleaved; medians with [min, max]\n\n", ROUNDS);
    printf("%6s %8s %22s %10s %24s %18s\n", "batch", "threads", "engine tokens/s", "GFLOP/s",
           "sgemm GFLOP/s", "ratio");
    /* Batch 1 twice: threads=1 (OpenBLAS's one-thread small-matrix kernel
     * alone) and the default threads=2 (each product split across the
     * engine's helper thread), so the split's gain is measured side by side. */
    const int batches[] = {1, 1, 8, 32, 64};
    const int threads[] = {1, 2, 2, 2, 2};
    long tokens = 0;
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
        double rate[ROUNDS], sg[ROUNDS], ratio[ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
            rate[r] = engine_rate(m, batches[i], threads[i], 1.0, &tokens);
            sg[r] = sgemm_rate(&cfg, batches[i], 0.5);
            ratio[r] = rate[r] * fpt / 1e9 / sg[r];
        }
        qsort(rate, ROUNDS, sizeof(double), cmp_double);
        qsort(sg, ROUNDS, sizeof(double), cmp_double);
        qsort(ratio, ROUNDS, sizeof(double), cmp_double);
        int mid = ROUNDS / 2;
        printf("%6d %8d %8.0f [%5.0f, %5.0f] %10.1f %8.1f [%5.1f, %5.1f] %4.0f%% [%3.0f%%, %3.0f%%]\n",
               batches[i], threads[i], rate[mid], rate[0], rate[ROUNDS - 1], rate[mid] * fpt / 1e9,
               sg[mid], sg[0], sg[ROUNDS - 1], 100 * ratio[mid], 100 * ratio[0],
               100 * ratio[ROUNDS - 1]);
    }
    printf("\ncblas_sgemm 1024 x 1024 x 1024: %.1f GFLOP/s (the practical peak)\n", sgemm_square(1024, 1.0));
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("peak resident memory: %.1f MiB\n", ru.ru_maxrss / 1024.0);
    assay_model_free(m);
    return tokens > 0 ? 0 : 1;
}
