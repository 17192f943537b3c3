/*
 * llama_bench_main - llama-server's decode speed by hand, through
 * suites/llama_bench.c (built, not registered as a test):
 *
 *   llama_bench_main --gguf M.gguf [--server BIN] [--source DIR] [--state DIR]
 *                    [--threads 2] [--prompt 16] [--predict 800]
 *                    [--batches 1,8,32,64] [--rounds 3] [--extra "ARGS"]
 *                    [--slots N | --per-batch] [--one-request]
 *
 * One server with as many slots as the largest batch (or N) serves every batch
 * (rounds go batch by batch, each round after one warm-up run), or with
 * --per-batch one server per batch with exactly that many slots. Prints
 * one line per run: the aggregate and what it rests on, and how long the
 * run took. --one-request sends each batch as one request of B prompts.
 * --server defaults to $ASSAY_LLAMA_SERVER, then a finished build
 * (scripts/build-llama-server.sh --if-built); --source to this checkout.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "llama_bench.h"

#define MAX_BATCHES 16

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s --gguf M.gguf [--server BIN] [--source DIR] [--state DIR] [--threads N]\n"
            "       [--prompt N] [--predict N] [--batches 1,8,32,64] [--rounds N] [--extra ARGS]\n"
            "       [--slots N | --per-batch] [--one-request]\n",
            argv0);
}

static void print_run(const char *label, const struct assay_llama_bench_result *r, double secs)
{
    printf("%-8s batch %3d  %8.1f tok/s  (sum of request rates %8.1f, each %6.1f..%6.1f)  "
           "span %6.2f s  overlap %5.3f  tokens/decode %5.2f  prompt_ms max %7.1f  "
           "sent within %6.3f s (%d new connections)  wall %6.2f s  run %6.2f s\n",
           label, r->batch, r->tokens_per_s, r->sum_request_rates, r->request_rate_min,
           r->request_rate_max, r->span_s, r->overlap, r->tokens_per_decode, r->prompt_ms_max,
           r->send_spread_s, r->new_connections, r->wall_s, secs);
    fflush(stdout);
}

/* Warm-up, then rounds runs of batch b on lb. Returns 0, or 1 after printing the error. */
static int measure(struct assay_llama_bench *lb, int b, int rounds)
{
    char err[1024];
    struct assay_llama_bench_result r;
    int64_t t0 = assay_now_ns();
    enum assay_status st = assay_llama_bench_run(lb, b, &r, err, sizeof err);
    if (st != ASSAY_OK && st != ASSAY_ERR_UNSUPPORTED) {
        fprintf(stderr, "batch %d warm-up: %s (%s)\n", b, err, assay_status_str(st));
        return 1;
    }
    print_run("warm-up", &r, (assay_now_ns() - t0) / 1e9);
    for (int k = 0; k < rounds; k++) {
        t0 = assay_now_ns();
        st = assay_llama_bench_run(lb, b, &r, err, sizeof err);
        if (st != ASSAY_OK && st != ASSAY_ERR_UNSUPPORTED) {
            fprintf(stderr, "batch %d round %d: %s (%s)\n", b, k + 1, err, assay_status_str(st));
            return 1;
        }
        char label[32];
        snprintf(label, sizeof label, "round %d", k + 1);
        print_run(label, &r, (assay_now_ns() - t0) / 1e9);
        if (st == ASSAY_ERR_UNSUPPORTED) {
            printf("         (rejected: %s)\n", err);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct assay_llama_bench_params p = assay_llama_bench_default_params();
    p.source_dir = ASSAY_SOURCE_DIR;
    int batches[MAX_BATCHES] = {1, 8, 32, 64}, n_batches = 4, rounds = 3, per_batch = 0, slots = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--per-batch") == 0) {
            per_batch = 1;
            continue;
        }
        if (strcmp(a, "--one-request") == 0) {
            p.one_request = 1;
            continue;
        }
        if (v == NULL) {
            usage(argv[0]);
            return 2;
        }
        i++;
        if (strcmp(a, "--gguf") == 0) {
            p.gguf = v;
        } else if (strcmp(a, "--server") == 0) {
            p.server_bin = v;
        } else if (strcmp(a, "--source") == 0) {
            p.source_dir = v;
        } else if (strcmp(a, "--state") == 0) {
            p.state_dir = v;
        } else if (strcmp(a, "--threads") == 0) {
            p.threads = atoi(v);
        } else if (strcmp(a, "--prompt") == 0) {
            p.prompt_len = atoi(v);
        } else if (strcmp(a, "--predict") == 0) {
            p.n_predict = atoi(v);
        } else if (strcmp(a, "--slots") == 0) {
            slots = atoi(v);
        } else if (strcmp(a, "--rounds") == 0) {
            rounds = atoi(v);
        } else if (strcmp(a, "--extra") == 0) {
            p.extra_args = v;
        } else if (strcmp(a, "--batches") == 0) {
            n_batches = 0;
            for (const char *s = v; *s != '\0' && n_batches < MAX_BATCHES;) {
                char *end;
                batches[n_batches++] = (int)strtol(s, &end, 10);
                s = *end == ',' ? end + 1 : end;
                if (end == s && *s != '\0') {
                    usage(argv[0]);
                    return 2;
                }
            }
        } else {
            usage(argv[0]);
            return 2;
        }
    }
    if (p.gguf == NULL || n_batches == 0) {
        usage(argv[0]);
        return 2;
    }
    char bin[4096], err[1024];
    if (p.server_bin == NULL) {
        enum assay_status st = assay_llama_bench_find_server(p.source_dir, bin, sizeof bin, err,
                                                             sizeof err);
        if (st != ASSAY_OK) {
            fprintf(stderr, "llama_bench_main: %s\n", err);
            return st == ASSAY_ERR_NOT_FOUND ? 77 : 1;
        }
        p.server_bin = bin;
    }
    int max_b = slots;
    for (int i = 0; i < n_batches; i++) {
        max_b = batches[i] > max_b ? batches[i] : max_b;
    }
    printf("llama-server %s\nmodel %s, %d threads, prompt %d, %d tokens, extra args \"%s\", "
           "%s, %s\n",
           p.server_bin, p.gguf, p.threads, p.prompt_len, p.n_predict,
           p.extra_args != NULL ? p.extra_args : "",
           per_batch ? "one server per batch" : "one server for all batches",
           p.one_request ? "one request of B prompts" : "B concurrent requests");
    int failed = 0;
    struct assay_llama_bench *lb = NULL;
    for (int i = 0; i < n_batches && !failed; i++) {
        if (lb == NULL) {
            p.slots = per_batch ? batches[i] : max_b;
            int64_t t0 = assay_now_ns();
            enum assay_status st = assay_llama_bench_open(&lb, &p, err, sizeof err);
            if (st != ASSAY_OK) {
                fprintf(stderr, "llama_bench_main: %s (%s)\n", err, assay_status_str(st));
                return 1;
            }
            printf("server with %d slots started in %.2f s (log %s)\n", p.slots,
                   (assay_now_ns() - t0) / 1e9, assay_llama_bench_log_path(lb));
        }
        failed = measure(lb, batches[i], rounds);
        if (per_batch || failed) {
            assay_llama_bench_close(lb);
            lb = NULL;
        }
    }
    assay_llama_bench_close(lb);
    return failed;
}
