/*
 * oracle_speed - how fast the oracle computes a GGUF model, and how much
 * memory it takes, for the README's figures and by hand:
 *
 *   oracle_speed MODEL.gguf [--len N] [--reps R] [--seed S] [--threads T]
 *                [--kernel auto|generic|avx2|avx512] [--mapped]
 *
 * Loads the file (dequantized to fp32 as every assay load is; with
 * --mapped its matrices stay in the file and the oracle decodes a layer at
 * a time, engine/model.h assay_model_load_gguf_mapped), makes an
 * oracle for N tokens (default 128) on T threads (default 1), and runs R
 * (default 3) teacher-forced passes (assay_oracle_logits) over random
 * prompts of N tokens drawn from S (default 1), with the dot-product kernel
 * asked for (default auto: the fastest this CPU runs). Prints the load time, each
 * pass's tokens per second and their median, also per second of the
 * process's CPU time (all threads), which a busy machine disturbs less; the
 * oracle's scratch and the caller's logits buffer; the resident set after
 * the load and the peak resident set (getrusage); the floating-point
 * operations a pass does (the products' multiply-adds and attention's) per
 * second, against the machine's double-precision peak (its cores x its
 * clock x two fused multiply-add pipes x the vector width in doubles x 2);
 * and a SHA-256 of every logit computed: two builds, or a resident and a
 * mapped load, that print the same digest for the same file, N, R and S
 * computed the same doubles bit for bit.
 *
 * The time is wall-clock on CLOCK_MONOTONIC, so on a busy machine compare
 * builds side by side rather than with figures taken at another time. Exit
 * status 0, or 2 with the reason on stderr (bad arguments, a file that
 * does not load, no memory).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/rng.h"
#include "core/sha256.h"
#include "engine/model.h"
#include "oracles/oracle.h"

#define SPEED_PROMPT_PURPOSE 0x73706564u /* "sped": the prompts' draws */
#define SPEED_MAX_REPS 1000

struct speed_args {
    const char *path;
    int32_t len;
    int32_t reps;
    uint64_t seed;
    int32_t threads;
    enum assay_oracle_kernel kernel;
    bool mapped;
};

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s MODEL.gguf [--len N] [--reps R] [--seed S] [--threads T] "
            "[--kernel auto|generic|avx2|avx512] [--mapped]\n",
            argv0);
}

/* A decimal integer in lo..hi; 0, or -1 with the reason on stderr. */
static int parse_int(const char *what, const char *s, long long lo, long long hi, long long *out)
{
    char *end = NULL;
    errno = 0;
    long long v = s != NULL ? strtoll(s, &end, 10) : 0;
    if (s == NULL || end == s || *end != '\0' || errno != 0 || v < lo || v > hi) {
        fprintf(stderr, "oracle_speed: %s: expected an integer in %lld..%lld, got \"%s\"\n", what,
                lo, hi, s != NULL ? s : "(nothing)");
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_args(int argc, char **argv, struct speed_args *a)
{
    *a = (struct speed_args){NULL, 128, 3, 1, 1, ASSAY_ORACLE_KERNEL_AUTO, false};
    for (int i = 1; i < argc; i++) {
        long long v;
        if (strcmp(argv[i], "--len") == 0) {
            if (parse_int("--len", i + 1 < argc ? argv[++i] : NULL, 1, INT32_MAX, &v) != 0) {
                return -1;
            }
            a->len = (int32_t)v;
        } else if (strcmp(argv[i], "--reps") == 0) {
            if (parse_int("--reps", i + 1 < argc ? argv[++i] : NULL, 1, SPEED_MAX_REPS, &v) != 0) {
                return -1;
            }
            a->reps = (int32_t)v;
        } else if (strcmp(argv[i], "--seed") == 0) {
            if (parse_int("--seed", i + 1 < argc ? argv[++i] : NULL, 0, INT64_MAX, &v) != 0) {
                return -1;
            }
            a->seed = (uint64_t)v;
        } else if (strcmp(argv[i], "--threads") == 0) {
            if (parse_int("--threads", i + 1 < argc ? argv[++i] : NULL, 1, ASSAY_ORACLE_MAX_THREADS,
                          &v) != 0) {
                return -1;
            }
            a->threads = (int32_t)v;
        } else if (strcmp(argv[i], "--kernel") == 0) {
            const char *name = i + 1 < argc ? argv[++i] : "(nothing)";
            enum assay_oracle_kernel k = ASSAY_ORACLE_KERNEL_AUTO;
            while (k <= ASSAY_ORACLE_KERNEL_AVX512 && strcmp(assay_oracle_kernel_name(k), name) != 0) {
                k++;
            }
            if (k > ASSAY_ORACLE_KERNEL_AVX512) {
                fprintf(stderr, "oracle_speed: --kernel: expected auto, generic, avx2 or avx512, got \"%s\"\n",
                        name);
                return -1;
            }
            a->kernel = k;
        } else if (strcmp(argv[i], "--mapped") == 0) {
            a->mapped = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "oracle_speed: unknown option \"%s\"\n", argv[i]);
            return -1;
        } else if (a->path == NULL) {
            a->path = argv[i];
        } else {
            fprintf(stderr, "oracle_speed: one model file, got \"%s\" and \"%s\"\n", a->path,
                    argv[i]);
            return -1;
        }
    }
    if (a->path == NULL) {
        fprintf(stderr, "oracle_speed: MODEL.gguf is required\n");
        return -1;
    }
    return 0;
}

static double mib(double bytes)
{
    return bytes / (1024.0 * 1024.0);
}

/* The peak resident set so far (Linux reports ru_maxrss in KiB). */
static double peak_rss_bytes(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss * 1024.0 : 0.0;
}

/* The resident set now, from /proc/self/statm; 0 where that is absent. */
static double rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, resident = 0;
    if (f == NULL) {
        return 0.0;
    }
    int got = fscanf(f, "%lld %lld", &size, &resident);
    fclose(f);
    return got == 2 ? (double)resident * (double)sysconf(_SC_PAGESIZE) : 0.0;
}

/* CPU seconds this process has used (every thread's). */
static double cpu_seconds(void)
{
    struct timespec ts;
    return clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0 ? (double)ts.tv_sec + ts.tv_nsec * 1e-9
                                                             : 0.0;
}

/* The floating-point operations of one teacher-forced pass over len
 * tokens: a multiply and an add per weight per position in every product
 * (the layers' seven matrices and the output), and per layer, head and
 * pair of positions (t attends to 0..t) the score's and the weighted sum's
 * multiply-adds. Norms, RoPE and softmax are left out (a few percent). */
static double pass_flops(const struct assay_model_config *c, int32_t len)
{
    double d = c->d_model, qd = (double)c->n_head * c->head_dim;
    double kvd = (double)c->n_kv_head * c->head_dim, ff = c->d_ff;
    double per_pos = 2.0 * (c->n_layer * d * (2 * qd + 2 * kvd + 3 * ff) + (double)c->vocab * d);
    double pairs = (double)len * (len + 1) / 2.0;
    return per_pos * len + 4.0 * qd * c->n_layer * pairs;
}

/* The machine's double-precision peak in GFLOP/s: cores x clock (GHz, the
 * first "cpu MHz" of /proc/cpuinfo) x 2 fused multiply-add pipes x the
 * widest vector in doubles this CPU runs x 2 flops. *ghz, *width and
 * *cores say what went in; 0 when the clock is unknown. */
static double machine_peak_gflops(double *ghz, int *width, long *cores)
{
    *cores = sysconf(_SC_NPROCESSORS_ONLN);
    *ghz = 0.0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        double mhz;
        if (sscanf(line, "cpu MHz : %lf", &mhz) == 1) {
            *ghz = mhz / 1000.0;
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    *width = 2;
#if defined(__x86_64__) || defined(__i386__)
    if (__builtin_cpu_supports("avx512f")) {
        *width = 8;
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *width = 4;
    }
#endif
    return (double)*cores * *ghz * 2.0 * *width * 2.0;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    struct speed_args a;
    if (parse_args(argc, argv, &a) != 0) {
        usage(argv[0]);
        return 2;
    }
    struct assay_diag diag;
    assay_diag_clear(&diag);
    struct assay_model *m = NULL;
    int64_t t0 = assay_now_ns();
    enum assay_status st = a.mapped ? assay_model_load_gguf_mapped(&m, a.path, &diag)
                                    : assay_model_load_gguf(&m, a.path, &diag);
    double load_s = (double)(assay_now_ns() - t0) * 1e-9;
    if (st != ASSAY_OK) {
        char msg[1024];
        fprintf(stderr, "oracle_speed: %s (%s)\n", assay_diag_format(&diag, msg, sizeof msg),
                assay_status_str(st));
        return 2;
    }
    const struct assay_model_config *c = &m->cfg;
    double load_peak = peak_rss_bytes(), loaded_rss = rss_bytes();
    printf("%s: %s, %s, %lld parameters, %d layers, d_model %d, vocab %d\n", a.path,
           assay_arch_name(c->arch), m->tensor_types, (long long)m->n_floats, (int)c->n_layer,
           (int)c->d_model, (int)c->vocab);
    printf("load %.2f s (%s); fp32 weights %.0f MiB; resident after load %.0f MiB, peak %.0f "
           "MiB\n",
           load_s, m->mapped ? "mapped: matrices left in the file" : "resident",
           mib((double)m->n_floats * sizeof(float)), mib(loaded_rss), mib(load_peak));
    if (a.len > c->n_ctx) {
        fprintf(stderr, "oracle_speed: --len %d is more than the model's context %d\n", (int)a.len,
                (int)c->n_ctx);
        assay_model_free(m);
        return 2;
    }

    size_t n_logits = (size_t)a.len * (size_t)c->vocab;
    struct assay_oracle *o = NULL;
    int32_t *tokens = malloc((size_t)a.len * sizeof *tokens);
    double *logits = malloc(n_logits * sizeof *logits);
    double *rate = malloc((size_t)a.reps * sizeof *rate);
    double *cpu_rate = malloc((size_t)a.reps * sizeof *cpu_rate);
    st = tokens == NULL || logits == NULL || rate == NULL || cpu_rate == NULL
             ? ASSAY_ERR_NOMEM
             : assay_oracle_init(&o, m, a.len);
    if (st == ASSAY_OK) {
        st = assay_oracle_set_threads(o, a.threads);
    }
    if (st == ASSAY_OK) {
        st = assay_oracle_set_kernel(o, a.kernel);
    }
    if (st != ASSAY_OK) {
        fprintf(stderr, "oracle_speed: no oracle for %d tokens with kernel %s: %s\n", (int)a.len,
                assay_oracle_kernel_name(a.kernel), assay_status_str(st));
        assay_oracle_free(o);
        free(tokens);
        free(logits);
        free(rate);
        free(cpu_rate);
        assay_model_free(m);
        return 2;
    }
    printf("%d thread%s, kernel %s; oracle scratch %.1f MiB; logits buffer (len x vocab doubles) "
           "%.1f MiB\n",
           (int)a.threads, a.threads == 1 ? "" : "s",
           assay_oracle_kernel_name(assay_oracle_get_kernel(o)), mib((double)assay_oracle_scratch_bytes(o)),
           mib((double)(n_logits * sizeof *logits)));
    fflush(stdout);

    struct assay_sha256 digest;
    assay_sha256_init(&digest);
    int rc = 0;
    for (int32_t r = 0; r < a.reps && rc == 0; r++) {
        for (int32_t t = 0; t < a.len; t++) {
            double u = assay_rng_u01(a.seed, (uint64_t)r * (uint64_t)a.len + (uint64_t)t,
                                     SPEED_PROMPT_PURPOSE);
            tokens[t] = (int32_t)(u * c->vocab);
        }
        t0 = assay_now_ns();
        double cpu0 = cpu_seconds();
        st = assay_oracle_logits(o, tokens, a.len, logits);
        double s = (double)(assay_now_ns() - t0) * 1e-9, cpu = cpu_seconds() - cpu0;
        if (st != ASSAY_OK) {
            fprintf(stderr, "oracle_speed: the oracle failed: %s\n", assay_status_str(st));
            rc = 2;
            break;
        }
        rate[r] = a.len / s;
        cpu_rate[r] = a.len / cpu;
        assay_sha256_update(&digest, logits, n_logits * sizeof *logits);
        printf("pass %d: %d tokens in %.2f s (%.2f s of CPU), %.1f tokens/s\n", (int)r + 1,
               (int)a.len, s, cpu, rate[r]);
        fflush(stdout);
    }
    if (rc == 0) {
        uint8_t d[32];
        char hex[65];
        assay_sha256_final(&digest, d);
        assay_sha256_hex(d, hex);
        qsort(rate, (size_t)a.reps, sizeof *rate, compare_double);
        qsort(cpu_rate, (size_t)a.reps, sizeof *cpu_rate, compare_double);
        printf("len %d: median %.1f tokens/s (min %.1f, max %.1f over %d passes), "
               "%.1f per CPU-second; peak resident %.0f MiB\n",
               (int)a.len, rate[a.reps / 2], rate[0], rate[a.reps - 1], (int)a.reps,
               cpu_rate[a.reps / 2], mib(peak_rss_bytes()));
        double ghz, flops = pass_flops(c, a.len);
        int width;
        long cores;
        double peak = machine_peak_gflops(&ghz, &width, &cores);
        double gflops = flops * rate[a.reps / 2] / a.len * 1e-9;
        printf("%.2f GFLOP a pass; median %.2f GFLOP/s", flops * 1e-9, gflops);
        if (peak > 0.0) {
            printf(" = %.1f%% of the machine's double-precision peak %.0f GFLOP/s (%ld cores x "
                   "%.2f GHz x 2 FMA pipes x %d doubles x 2), %.1f%% of the peak of the %d "
                   "core%s used",
                   100.0 * gflops / peak, peak, cores, ghz, width,
                   100.0 * gflops / peak * cores / (a.threads < cores ? a.threads : cores),
                   (int)(a.threads < cores ? a.threads : cores), a.threads == 1 ? "" : "s");
        }
        printf("\nlogits sha256 %s\n", hex);
    }
    assay_oracle_free(o);
    free(tokens);
    free(logits);
    free(rate);
    free(cpu_rate);
    assay_model_free(m);
    return rc;
}
