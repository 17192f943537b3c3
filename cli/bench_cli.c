/*
 * bench_cli.c - what `assay run` and `assay bench` share (bench_cli.h):
 * opening an engine and loading workloads and SLO files with errors a user
 * can act on, the output folder, a progress ticker on a terminal, and
 * printing a benchmark's, the seed table's and a rate sweep's figures. The
 * cmd_*.c files call it; library code never prints, this does.
 */
#include "bench_cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "adapters/spec.h"
#include "cli.h"
#include "core/clock.h"
#include "reports/text.h"

bool assay_cli_open_engine(const char *cmd, const char *spec, struct assay_adapter *out)
{
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (assay_adapter_open_spec(spec, out, &diag) != ASSAY_OK) {
        char why[900];
        fprintf(stderr, "assay %s: engine '%s': %s\n", cmd, spec,
                assay_diag_format(&diag, why, sizeof why));
        return false;
    }
    return true;
}

bool assay_cli_parse_arrival(const char *cmd, const char *text, enum assay_arrival_kind *out)
{
    static const struct {
        const char *name;
        enum assay_arrival_kind kind;
    } kinds[] = {{"poisson", ASSAY_ARRIVAL_POISSON},
                 {"gamma", ASSAY_ARRIVAL_GAMMA},
                 {"constant", ASSAY_ARRIVAL_CONSTANT},
                 {"trace", ASSAY_ARRIVAL_TRACE}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        if (strcmp(text, kinds[i].name) == 0) {
            *out = kinds[i].kind;
            return true;
        }
    }
    fprintf(stderr, "assay %s: --arrival expects " ASSAY_CLI_ARRIVAL_KINDS ", got '%s'\n", cmd,
            text);
    return false;
}

bool assay_cli_check_open_arrival(const char *cmd, bool arrival_set, enum assay_arrival_kind kind,
                                  double rate)
{
    if (!arrival_set) {
        return true;
    }
    if (kind == ASSAY_ARRIVAL_TRACE && rate > 0) {
        fprintf(stderr, "assay %s: --arrival trace replays the workload's own arrival times and "
                        "takes no --rate\n", cmd);
        return false;
    }
    if (kind != ASSAY_ARRIVAL_TRACE && !(rate > 0)) {
        fprintf(stderr, "assay %s: --arrival %s draws its arrivals at --rate, which is missing\n",
                cmd, assay_arrival_kind_str(kind));
        return false;
    }
    return true;
}

/* path as given when it exists, else under the fixtures folder. */
static const char *resolve(const char *path, char *buf, size_t size)
{
    if (access(path, F_OK) == 0 || path[0] == '/') {
        return path;
    }
    snprintf(buf, size, "%s/%s", assay_cli_fixtures(), path);
    return access(buf, F_OK) == 0 ? buf : path;
}

bool assay_cli_load_workload(const char *cmd, const char *path, const struct assay_adapter *a,
                             struct assay_workload **out)
{
    struct assay_adapter_info info;
    assay_adapter_get_info(a, &info);
    struct assay_workload_limits lim = {
        .vocab = info.vocab > 0 ? info.vocab : 1 << 30,
        .max_seq_len = info.n_ctx > 0 ? info.n_ctx : 1 << 30,
        .max_requests = 0,
    };
    char buf[PATH_MAX];
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (assay_workload_load(resolve(path, buf, sizeof buf), &lim, out, &diag) != ASSAY_OK) {
        char why[900];
        fprintf(stderr, "assay %s: workload: %s\n", cmd, assay_diag_format(&diag, why, sizeof why));
        return false;
    }
    return true;
}

bool assay_cli_load_slo(const char *cmd, const char *path, struct assay_slo *out)
{
    char buf[PATH_MAX];
    struct assay_diag diag;
    assay_diag_clear(&diag);
    if (assay_slo_load(resolve(path, buf, sizeof buf), out, &diag) != ASSAY_OK) {
        char why[900];
        fprintf(stderr, "assay %s: SLO: %s\n", cmd, assay_diag_format(&diag, why, sizeof why));
        return false;
    }
    return true;
}

/*
 * The folders assay_cli_prepare_out_dir made, outermost first, so that a
 * command that ends without writing into them (an input error found after
 * the check, a part that failed, Ctrl-C) leaves no empty folder behind. At
 * exit and on SIGINT, SIGTERM or SIGHUP each is removed, innermost first,
 * with rmdir, which removes only an empty folder (async-signal-safe) - and
 * only by the process that made them: the children a check runs in exit
 * through the same handlers. Process-wide state by nature: a signal
 * handler can reach nothing else.
 */
#define OUT_DIRS_MAX 16
static char g_made[OUT_DIRS_MAX][PATH_MAX];
static volatile sig_atomic_t g_n_made;
static pid_t g_maker;
static struct sigaction g_old_actions[3];
static const int g_signals[3] = {SIGINT, SIGTERM, SIGHUP};
static const char *const g_signal_names[3] = {"SIGINT", "SIGTERM", "SIGHUP"};
/* "assay CMD" and what is left, for the line the command prints when a
 * signal stops it. */
static char g_interrupted_cmd[64];
static const char *g_interrupted_left;
/* Whether stderr is a terminal: the line then starts on a new line, after
 * the "^C" the terminal echoed beside the progress. */
static bool g_stderr_tty;

static void remove_made(void)
{
    if (getpid() != g_maker) {
        return;
    }
    for (int i = (int)g_n_made - 1; i >= 0; i--) {
        (void)rmdir(g_made[i]);
    }
}

static void write_str(const char *s)
{
    (void)!write(STDERR_FILENO, s, strlen(s));
}

static void on_signal(int sig)
{
    int which = 0;
    for (int i = 0; i < 3; i++) {
        if (g_signals[i] == sig) {
            which = i;
        }
    }
    /* Only the command's own process says so: a check's child ends
     * silently, its parent reports what the signal stopped. */
    if (getpid() == g_maker) {
        write_str(g_stderr_tty ? "\n" : "");
        write_str(g_interrupted_cmd);
        write_str(": interrupted by ");
        write_str(g_signal_names[which]);
        write_str(" before it finished: ");
        write_str(g_interrupted_left);
        write_str("\n");
    }
    remove_made();
    (void)sigaction(sig, &g_old_actions[which], NULL);
    (void)raise(sig);
}

void assay_cli_catch_interrupts(const char *cmd, const char *left)
{
    if (g_maker != 0) {
        return;
    }
    g_maker = getpid();
    snprintf(g_interrupted_cmd, sizeof g_interrupted_cmd, "assay %s", cmd);
    g_interrupted_left = left != NULL ? left : "no verdict and no report from this run";
    g_stderr_tty = isatty(STDERR_FILENO) != 0;
    atexit(remove_made);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++) {
        /* A signal ignored when the command started (a background job of
         * a shell, nohup) stays ignored. */
        if (sigaction(g_signals[i], NULL, &g_old_actions[i]) == 0 &&
            g_old_actions[i].sa_handler != SIG_IGN) {
            (void)sigaction(g_signals[i], &sa, NULL);
        }
    }
}

static void remember_made(const char *cmd, const char *path)
{
    assay_cli_catch_interrupts(cmd, NULL); /* main did, unless another program calls this */
    if (g_n_made < OUT_DIRS_MAX) {
        snprintf(g_made[g_n_made], sizeof g_made[0], "%s", path);
        g_n_made = g_n_made + 1; /* after the name is complete */
    }
}

static bool make_dir(const char *cmd, const char *path)
{
    if (mkdir(path, 0755) == 0) {
        remember_made(cmd, path);
        return true;
    }
    if (errno == EEXIST) {
        return true;
    }
    fprintf(stderr, "assay %s: cannot create directory %s: %s\n", cmd, path, strerror(errno));
    return false;
}

bool assay_cli_prepare_out_dir(const char *cmd, const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
        fprintf(stderr, "assay %s: --out: path too long\n", cmd);
        return false;
    }
    /* mkdir -p */
    for (char *p = path + 1; *p != '\0'; p++) {
        if (*p == '/') {
            *p = '\0';
            bool made = make_dir(cmd, path);
            *p = '/';
            if (!made) {
                return false;
            }
        }
    }
    if (!make_dir(cmd, path)) {
        return false;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "assay %s: --out %s is not a directory\n", cmd, dir);
        return false;
    }
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/.assay-probe.XXXXXX", path);
    int fd = mkstemp(probe);
    if (fd < 0) {
        fprintf(stderr, "assay %s: cannot write into %s: %s\n", cmd, dir, strerror(errno));
        return false;
    }
    close(fd);
    unlink(probe);
    return true;
}

/* ---- ticker ------------------------------------------------------------- */

struct assay_cli_ticker {
    pthread_t thread;
    pthread_mutex_t mu; /* guards label and every write to stderr while it runs */
    pthread_cond_t cv;
    bool stop;
    bool running;
    bool tty;
    int64_t t0_ns;
    char cmd[32];
    char base[160]; /* the label it started with */
    char label[320];
};

/* Everything goes out with write(2): the ticker's thread never holds
 * stdio's lock, which a check's child process (forked while it runs)
 * might otherwise inherit taken. */
static void put(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t k = write(STDERR_FILENO, s, n);
        if (k <= 0) {
            if (k < 0 && errno == EINTR) {
                continue;
            }
            return;
        }
        s += k;
        n -= (size_t)k;
    }
}

static void draw(struct assay_cli_ticker *t)
{
    char line[400];
    double s = (double)(assay_now_ns() - t->t0_ns) / 1e9;
    int n = snprintf(line, sizeof line, "\r\033[K[%6.1fs] %s", s, t->label);
    put(line, n > 0 && (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

static void *ticker_main(void *arg)
{
    struct assay_cli_ticker *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        draw(t);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 500000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        while (!t->stop && pthread_cond_timedwait(&t->cv, &t->mu, &until) == 0) {
        }
    }
    put("\r\033[K", 4);
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

struct assay_cli_ticker *assay_cli_ticker_start(const char *cmd, const char *label)
{
    struct assay_cli_ticker *t = calloc(1, sizeof *t);
    if (t == NULL) {
        return NULL;
    }
    snprintf(t->cmd, sizeof t->cmd, "%s", cmd);
    snprintf(t->base, sizeof t->base, "%s", label);
    snprintf(t->label, sizeof t->label, "%s", label);
    t->t0_ns = assay_now_ns();
    t->tty = isatty(STDERR_FILENO) != 0;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    if (t->tty) {
        t->running = pthread_create(&t->thread, NULL, ticker_main, t) == 0;
    }
    return t;
}

void assay_cli_ticker_line(struct assay_cli_ticker *t, const char *line)
{
    char buf[600];
    int n = snprintf(buf, sizeof buf, "%sassay %s: %s\n", t != NULL && t->running ? "\r\033[K" : "",
                     t != NULL ? t->cmd : "?", line);
    size_t len = n > 0 && (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1;
    if (t == NULL) {
        put(buf, len);
        return;
    }
    pthread_mutex_lock(&t->mu);
    put(buf, len);
    if (t->running) {
        draw(t); /* the ticker's line again, under the new one */
    }
    pthread_mutex_unlock(&t->mu);
}

void assay_cli_ticker_progress(void *arg, const char *line)
{
    struct assay_cli_ticker *t = arg;
    char said[400];
    snprintf(said, sizeof said, "%s: %s", t != NULL ? t->base : "", line);
    if (t != NULL) {
        pthread_mutex_lock(&t->mu);
        snprintf(t->label, sizeof t->label, "%s (last: %s)", t->base, line);
        pthread_mutex_unlock(&t->mu);
    }
    assay_cli_ticker_line(t, said);
}

void assay_cli_ticker_stop(struct assay_cli_ticker *t)
{
    if (t == NULL) {
        return;
    }
    if (t->running) {
        pthread_mutex_lock(&t->mu);
        t->stop = true;
        pthread_cond_signal(&t->cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->thread, NULL);
    }
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

/* ---- printing ---------------------------------------------------------- */

static const char *sec(char *buf, double v)
{
    return assay_text_seconds(buf, 32, v);
}

void assay_cli_print_bench(FILE *out, const struct assay_bench_result *r,
                           const struct assay_workload *w)
{
    if (r->n_runs < 1) {
        fprintf(out, "benchmark: no run completed (%s)\n", assay_status_str(r->status));
        return;
    }
    const struct assay_bench_summary *s0 = &r->runs[0];
    const struct assay_bench_spread *sp = &r->spread;
    char a[32], b[32], c[32], d[32], e[32], f[32], g[32];
    if (r->params.kind == ASSAY_LOADGEN_OPEN) {
        fprintf(out, "Benchmark: open loop, %s arrivals", assay_arrival_kind_str(r->params.arrival));
        if (r->params.arrival != ASSAY_ARRIVAL_TRACE) {
            fprintf(out, " at %.4g req/s offered (seed %llu + run)", r->params.rate,
                    (unsigned long long)r->params.seed);
        }
    } else {
        fprintf(out, "Benchmark: closed loop, %d workers (no offered rate)", (int)r->params.n_workers);
    }
    fprintf(out, ", %d run(s) with %d warm-up requests discarded each\n", (int)r->n_runs,
            (int)s0->n_warmup);
    if (w != NULL) {
        fprintf(out, "Workload %s: %d requests; %s\n", w->name, (int)w->n, w->lengths);
    }
    if (r->has_slo) {
        fprintf(out, "SLO: TTFT <= %s, TPOT <= %s\n", sec(a, r->slo.ttft_s), sec(b, r->slo.tpot_s));
    }
    fprintf(out, "%-9s %10s %10s %10s %10s %10s   %s\n", "", "p50", "p90", "p95", "p99", "max",
            "p99 over runs (min-max)");
    const struct {
        const char *name;
        const struct assay_spread *s;
    } rows[] = {{"TTFT", sp->ttft}, {"TPOT", sp->tpot}, {"ITL", sp->itl}, {"E2E", sp->e2e},
                {"lateness", sp->lateness}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (i == 4 && r->params.kind != ASSAY_LOADGEN_OPEN) {
            continue;
        }
        const struct assay_spread *x = rows[i].s;
        fprintf(out, "%-9s %10s %10s %10s %10s %10s   %s - %s\n", rows[i].name,
                sec(a, x[ASSAY_PCTL_P50].median), sec(b, x[ASSAY_PCTL_P90].median),
                sec(c, x[ASSAY_PCTL_P95].median), sec(d, x[ASSAY_PCTL_P99].median),
                sec(e, x[ASSAY_PCTL_MAX].median), sec(f, x[ASSAY_PCTL_P99].min),
                sec(g, x[ASSAY_PCTL_P99].max));
    }
    if (s0->has_offered_rate) {
        fprintf(out, "offered %.4g req/s, ", s0->offered_rate);
    } else {
        fprintf(out, "no offered rate (closed loop), ");
    }
    fprintf(out, "achieved %.4g req/s (%.4g-%.4g), %.4g output tokens/s", sp->achieved_rate.median,
            sp->achieved_rate.min, sp->achieved_rate.max, sp->tokens_per_s.median);
    if (r->has_slo) {
        fprintf(out, ", goodput %.1f%% (%.4g req/s)", 100 * sp->goodput_fraction.median,
                sp->goodput_rate.median);
    }
    fprintf(out, "\n");
    const struct assay_latency_summary *t = &s0->ttft;
    fprintf(out, "sufficiency (per run, %lld TTFT samples): p50 %s, p90 %s, p95 %s, p99 %s\n",
            (long long)t->n, t->suff[ASSAY_PCTL_P50].sufficient ? "bounded" : "NOT bounded",
            t->suff[ASSAY_PCTL_P90].sufficient ? "bounded" : "NOT bounded",
            t->suff[ASSAY_PCTL_P95].sufficient ? "bounded" : "NOT bounded",
            t->suff[ASSAY_PCTL_P99].sufficient ? "bounded" : "NOT bounded");
    int32_t bad = 0;
    for (int32_t i = 0; i < r->n_runs; i++) {
        bad += r->runs[i].n_requests - r->runs[i].n_ok;
    }
    if (bad > 0) {
        fprintf(out, "WARNING: %d measured request(s) did not finish normally (see the report's runs)\n",
                (int)bad);
    }
}

void assay_cli_print_seedtable(FILE *out, const struct assay_seedtable *t, const char *explanation)
{
    char a[32], b[32], c[32], d[32];
    fprintf(out, "%-12s %-22s %10s %10s %10s %14s %15s %8s %10s\n", "Generator", "Setting",
            "TTFT p50", "TTFT p95", "TTFT p99", "Offered req/s", "Achieved req/s", "Goodput",
            "E2E p99");
    for (int32_t i = 0; i < t->n_rows; i++) {
        const struct assay_seedtable_row *row = &t->rows[i];
        char setting[64], offered[32];
        assay_seedtable_setting(row, setting, sizeof setting);
        if (row->has_offered_rate) {
            snprintf(offered, sizeof offered, "%.3f", row->offered_rate);
        } else {
            snprintf(offered, sizeof offered, "none");
        }
        fprintf(out, "%-12s %-22s %10s %10s %10s %14s %15.3f %7.1f%% %10s\n",
                row->kind == ASSAY_LOADGEN_OPEN ? "Open loop" : "Closed loop", setting,
                sec(a, row->ttft_p50), sec(b, row->ttft_p95), sec(c, row->ttft_p99), offered,
                row->achieved_rate, 100 * row->result.spread.goodput_fraction.median,
                sec(d, row->result.spread.e2e[ASSAY_PCTL_P99].median));
    }
    if (explanation != NULL && explanation[0] != '\0') {
        fputc('\n', out);
        assay_cli_print_paragraph(out, explanation);
    }
}

void assay_cli_print_paragraph(FILE *out, const char *text)
{
    size_t col = 0;
    const char *p = text;
    while (*p != '\0') {
        size_t n = strcspn(p, " ");
        if (col > 0 && col + 1 + n > 100) {
            fputc('\n', out);
            col = 0;
        } else if (col > 0) {
            fputc(' ', out);
            col++;
        }
        fwrite(p, 1, n, out);
        col += n;
        p += n;
        while (*p == ' ') {
            p++;
        }
    }
    fputc('\n', out);
}

void assay_cli_print_sweep(FILE *out, const struct assay_sweep_result *s,
                           const struct assay_sweep_params *p)
{
    fprintf(out, "Rate sweep (goodput >= %.0f%% under the SLO; %s, seed %llu at every rate):",
            100 * p->target, assay_arrival_kind_str(p->arrival), (unsigned long long)p->seed);
    for (int32_t i = 0; i < s->n_probes; i++) {
        fprintf(out, "%s %.4g req/s -> %.1f%% %s", i > 0 ? ";" : "", s->probes[i].rate,
                100 * s->probes[i].goodput_fraction, s->probes[i].pass ? "pass" : "fail");
    }
    if (s->best_rate > 0) {
        fprintf(out, "\n  highest passing rate %.4g req/s", s->best_rate);
    } else {
        fprintf(out, "\n  no probed rate passed");
    }
    if (isfinite(s->fail_rate)) {
        fprintf(out, "; lowest failing %.4g req/s", s->fail_rate);
    }
    fprintf(out, "; %s\n", s->bracketed ? "bracketed" : "not bracketed within the budget");
}
