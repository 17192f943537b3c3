#define _POSIX_C_SOURCE 200809L

#include "llama_bench.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "support.h"

extern char **environ;

#define PATH_SIZE 4096
#define SCRIPT_OUTPUT_SIZE 8192
#define MAX_EXTRA_ARGS 64
#define MAX_SLOTS 1024
#define POLL_MS 1000

struct assay_llama_bench {
    char ctl[PATH_SIZE];       /* scripts/llama-server-ctl.sh */
    char state_dir[PATH_SIZE];
    char log_path[PATH_SIZE];
    char url[256];             /* http://127.0.0.1:PORT */
    int32_t slots;
    int32_t one_request;
    int32_t prompt_len;
    int32_t n_predict;
    double run_timeout_s;
    CURLM *multi;              /* kept across runs: its connections are reused */
    int curl_ready;
};

/* One request of a run. */
struct request {
    CURL *easy;
    char *body;       /* the answer, NUL-terminated */
    size_t len, cap;
    int done;
    CURLcode result;
    long http;
    int64_t t_done_ns;
    curl_off_t pretransfer_us; /* from the run's start until the request was being sent */
    long connects;             /* new connections the request needed (0: it reused one) */
};

static void set_err(char *err, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t size, const char *fmt, ...)
{
    if (err == NULL || size == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
}

/* dir + "/" + leaf into buf; -1 if it does not fit. */
static int join(char *buf, size_t size, const char *dir, const char *leaf)
{
    int n = snprintf(buf, size, "%s/%s", dir, leaf);
    return n >= 0 && (size_t)n < size ? 0 : -1;
}

/* The checkout: source_dir, else the folder holding $ASSAY_FIXTURES. */
static enum assay_status find_source_dir(const char *source_dir, char *buf, size_t size, char *err,
                                         size_t err_size)
{
    if (source_dir != NULL) {
        snprintf(buf, size, "%s", source_dir);
    } else {
        const char *fixtures = getenv("ASSAY_FIXTURES");
        if (fixtures == NULL || fixtures[0] == '\0') {
            set_err(err, err_size, "no source folder given and ASSAY_FIXTURES is not set");
            return ASSAY_ERR_INVALID;
        }
        snprintf(buf, size, "%s", fixtures);
        size_t n = strlen(buf);
        while (n > 1 && buf[n - 1] == '/') {
            buf[--n] = '\0';
        }
        char *slash = strrchr(buf, '/');
        if (slash == NULL) {
            snprintf(buf, size, ".");
        } else if (slash == buf) {
            buf[1] = '\0'; /* fixtures/ at the root: the checkout is / */
        } else {
            *slash = '\0';
        }
    }
    char probe[PATH_SIZE];
    if (join(probe, sizeof probe, buf, "scripts/llama-server-ctl.sh") != 0 ||
        access(probe, X_OK) != 0) {
        set_err(err, err_size, "no executable %s", probe);
        return ASSAY_ERR_INVALID;
    }
    return ASSAY_OK;
}

/*
 * Run argv[0] with argv and the environment plus `overrides` ("NAME=value",
 * NULL-terminated; each replaces a variable of that name), stdin from
 * /dev/null, stdout and stderr together into `output` (the last size - 1
 * bytes, NUL-terminated). *exit_code is the exit status, or 128 + signal.
 */
static enum assay_status run_script(char *const argv[], const char *const overrides[], char *output,
                                    size_t size, int *exit_code, char *err, size_t err_size)
{
    size_t n_env = 0, n_over = 0;
    while (environ[n_env] != NULL) {
        n_env++;
    }
    while (overrides != NULL && overrides[n_over] != NULL) {
        n_over++;
    }
    char **envp = malloc((n_env + n_over + 1) * sizeof *envp);
    if (envp == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++) {
        int replaced = 0;
        for (size_t j = 0; j < n_over; j++) {
            size_t name_len = strcspn(overrides[j], "=");
            if (strncmp(environ[i], overrides[j], name_len + 1) == 0) {
                replaced = 1;
            }
        }
        if (!replaced) {
            envp[k++] = environ[i];
        }
    }
    for (size_t j = 0; j < n_over; j++) {
        envp[k++] = (char *)overrides[j];
    }
    envp[k] = NULL;

    int fds[2];
    if (pipe(fds) != 0) {
        free(envp);
        set_err(err, err_size, "pipe: %s", strerror(errno));
        return ASSAY_ERR_IO;
    }
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        set_err(err, err_size, "could not run %s: %s", argv[0], strerror(rc));
        return ASSAY_ERR_IO;
    }
    /* Read to EOF, keeping the tail: when the buffer is full, its older half goes. */
    size_t len = 0;
    for (;;) {
        if (len == size - 1) {
            size_t keep = len / 2;
            memmove(output, output + (len - keep), keep);
            len = keep;
        }
        ssize_t got = read(fds[0], output + len, size - 1 - len);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got <= 0) {
            break;
        }
        len += (size_t)got;
    }
    output[len] = '\0';
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            set_err(err, err_size, "waitpid: %s", strerror(errno));
            return ASSAY_ERR_IO;
        }
    }
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return ASSAY_OK;
}

/* The last non-empty line of text into buf, without its newline. */
static void last_line(const char *text, char *buf, size_t size)
{
    size_t end = strlen(text);
    while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r')) {
        end--;
    }
    size_t start = end;
    while (start > 0 && text[start - 1] != '\n') {
        start--;
    }
    snprintf(buf, size, "%.*s", (int)(end - start), text + start);
}

struct assay_llama_bench_params assay_llama_bench_default_params(void)
{
    struct assay_llama_bench_params p = {
        .server_bin = NULL,
        .gguf = NULL,
        .source_dir = NULL,
        .state_dir = NULL,
        .slots = 1,
        .threads = 2,
        .prompt_len = 16,
        .n_predict = 800,
        .ctx_slack = 16,
        .extra_args = NULL,
        .run_timeout_s = 600.0,
        .one_request = 0,
    };
    return p;
}

enum assay_status assay_llama_bench_find_server(const char *source_dir, char *path,
                                                size_t path_size, char *err, size_t err_size)
{
    set_err(err, err_size, "%s", "");
    path[0] = '\0';
    const char *env = getenv("ASSAY_LLAMA_SERVER");
    if (env != NULL && env[0] != '\0') {
        if (access(env, X_OK) != 0) {
            set_err(err, err_size, "ASSAY_LLAMA_SERVER=%s is not an executable", env);
            return ASSAY_ERR_NOT_FOUND;
        }
        snprintf(path, path_size, "%s", env);
        return ASSAY_OK;
    }
    char src[PATH_SIZE], script[PATH_SIZE];
    enum assay_status st = find_source_dir(source_dir, src, sizeof src, err, err_size);
    if (st != ASSAY_OK) {
        return st;
    }
    if (join(script, sizeof script, src, "scripts/build-llama-server.sh") != 0) {
        set_err(err, err_size, "source folder path too long");
        return ASSAY_ERR_INVALID;
    }
    char *const argv[] = {script, "--if-built", NULL};
    char out[SCRIPT_OUTPUT_SIZE], line[PATH_SIZE];
    int code;
    st = run_script(argv, NULL, out, sizeof out, &code, err, err_size);
    if (st != ASSAY_OK) {
        return st;
    }
    last_line(out, line, sizeof line);
    if (code != 0) {
        set_err(err, err_size, "%s",
                line[0] != '\0' ? line : "build-llama-server.sh --if-built failed");
        return code == 1 ? ASSAY_ERR_NOT_FOUND : ASSAY_ERR_IO;
    }
    if (access(line, X_OK) != 0) {
        set_err(err, err_size, "build-llama-server.sh --if-built printed \"%s\", not an executable",
                line);
        return ASSAY_ERR_NOT_FOUND;
    }
    snprintf(path, path_size, "%s", line);
    return ASSAY_OK;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *user)
{
    struct request *r = user;
    size_t n = size * nmemb;
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap > 0 ? r->cap : 4096;
        while (cap < r->len + n + 1) {
            cap *= 2;
        }
        char *b = realloc(r->body, cap);
        if (b == NULL) {
            return 0; /* curl fails the transfer with CURLE_WRITE_ERROR */
        }
        r->body = b;
        r->cap = cap;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = '\0';
    return n;
}

/* A request to url: a POST of body (borrowed until the request is done), or a GET if
 * body is NULL. */
static enum assay_status request_init(struct request *r, const char *url, const char *body,
                                      struct curl_slist *headers)
{
    memset(r, 0, sizeof *r);
    r->easy = curl_easy_init();
    if (r->easy == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    CURLcode cc[12];
    int k = 0;
    cc[k++] = curl_easy_setopt(r->easy, CURLOPT_URL, url);
    if (body != NULL) {
        cc[k++] = curl_easy_setopt(r->easy, CURLOPT_POST, 1L);
        cc[k++] = curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, body);
        cc[k++] = curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
        cc[k++] = curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, headers);
    }
    cc[k++] = curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_write);
    cc[k++] = curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
    cc[k++] = curl_easy_setopt(r->easy, CURLOPT_PRIVATE, (char *)r);
    cc[k++] = curl_easy_setopt(r->easy, CURLOPT_PROXY, "");
    cc[k++] = curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
    cc[k++] = curl_easy_setopt(r->easy, CURLOPT_TCP_NODELAY, 1L);
    cc[k++] = curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    for (int i = 0; i < k; i++) {
        if (cc[i] != CURLE_OK) {
            return ASSAY_ERR_NOMEM;
        }
    }
    return ASSAY_OK;
}

static void requests_free(struct request *reqs, int32_t n)
{
    for (int32_t i = 0; reqs != NULL && i < n; i++) {
        curl_easy_cleanup(reqs[i].easy); /* NULL is a no-op */
        free(reqs[i].body);
    }
    free(reqs);
}

/*
 * Run n prepared requests together on lb's multi handle until all are done
 * or timeout_s passes; each request's answer, status and times are kept.
 * The handles are removed from the multi handle again in every case.
 */
static enum assay_status perform_all(struct assay_llama_bench *lb, struct request *reqs, int32_t n,
                                     double timeout_s, char *err, size_t err_size)
{
    enum assay_status st = ASSAY_OK;
    int32_t added = 0;
    for (; added < n; added++) {
        CURLMcode mc = curl_multi_add_handle(lb->multi, reqs[added].easy);
        if (mc != CURLM_OK) {
            set_err(err, err_size, "curl_multi_add_handle: %s", curl_multi_strerror(mc));
            st = ASSAY_ERR_NOMEM;
            break;
        }
    }
    int64_t deadline = assay_now_ns() + (int64_t)(timeout_s * 1e9);
    int running = st == ASSAY_OK;
    while (running > 0) {
        CURLMcode mc = curl_multi_perform(lb->multi, &running);
        int64_t now = assay_now_ns();
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(lb->multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE) {
                continue;
            }
            char *priv = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
            struct request *r = (struct request *)(void *)priv;
            r->done = 1;
            r->result = msg->data.result;
            r->t_done_ns = now;
            curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->http);
            curl_easy_getinfo(r->easy, CURLINFO_PRETRANSFER_TIME_T, &r->pretransfer_us);
            curl_easy_getinfo(r->easy, CURLINFO_NUM_CONNECTS, &r->connects);
        }
        if (mc != CURLM_OK) {
            set_err(err, err_size, "curl_multi_perform: %s", curl_multi_strerror(mc));
            st = ASSAY_ERR_NET;
            break;
        }
        if (running == 0) {
            break;
        }
        if (now > deadline) {
            int32_t n_done = 0;
            for (int32_t i = 0; i < n; i++) {
                n_done += reqs[i].done;
            }
            set_err(err, err_size, "%d of %d requests unanswered after %.0f s", n - n_done, n,
                    timeout_s);
            st = ASSAY_ERR_TIMEOUT;
            break;
        }
        mc = curl_multi_poll(lb->multi, NULL, 0, POLL_MS, NULL);
        if (mc != CURLM_OK) {
            set_err(err, err_size, "curl_multi_poll: %s", curl_multi_strerror(mc));
            st = ASSAY_ERR_NET;
            break;
        }
    }
    for (int32_t i = 0; i < added; i++) {
        curl_multi_remove_handle(lb->multi, reqs[i].easy);
    }
    return st;
}

/* GET url + path into r (blocking, one easy handle of its own). */
static CURLcode http_get(const char *url, const char *path, struct request *r)
{
    char full[512];
    snprintf(full, sizeof full, "%s%s", url, path);
    if (request_init(r, full, NULL, NULL) != ASSAY_OK) {
        curl_easy_cleanup(r->easy);
        r->easy = NULL;
        return CURLE_OUT_OF_MEMORY;
    }
    curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, 10000L);
    CURLcode cc = curl_easy_perform(r->easy);
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->http);
    curl_easy_cleanup(r->easy);
    r->easy = NULL;
    return cc;
}

/* llamacpp:n_decode_total from /metrics, or NAN. */
static double decode_calls(const char *url)
{
    struct request r;
    double v = NAN;
    if (http_get(url, "/metrics", &r) == CURLE_OK && r.http == 200 && r.body != NULL) {
        const char *key = "\nllamacpp:n_decode_total ";
        const char *at = strstr(r.body, key);
        if (at != NULL) {
            v = strtod(at + strlen(key), NULL);
        }
    }
    free(r.body);
    return v;
}

/* The first ~160 characters of an error answer: its error.message, else its body. */
static void describe_answer(const struct request *r, char *buf, size_t size)
{
    cJSON *root = r->body != NULL ? cJSON_ParseWithLength(r->body, r->len) : NULL;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "error");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
    if (cJSON_IsString(m)) {
        snprintf(buf, size, "%.160s", m->valuestring);
    } else {
        snprintf(buf, size, "%.160s", r->body != NULL ? r->body : "(empty)");
    }
    cJSON_Delete(root);
}

static double number(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* The /completion body: one prompt, or n_prompts copies of it (0: one, not in a list). */
static char *request_body(int32_t prompt_len, int32_t n_predict, int32_t n_prompts)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *prompt = cJSON_CreateArray();
    for (int32_t i = 0; prompt != NULL && i < prompt_len; i++) {
        cJSON_AddItemToArray(prompt, cJSON_CreateNumber((i * 7 + 3) % 256));
    }
    if (n_prompts > 0) {
        cJSON *list = cJSON_AddArrayToObject(root, "prompt");
        for (int32_t i = 0; list != NULL && prompt != NULL && i < n_prompts; i++) {
            cJSON_AddItemToArray(list, cJSON_Duplicate(prompt, 1));
        }
        cJSON_Delete(prompt);
    } else {
        cJSON_AddItemToObject(root, "prompt", prompt);
    }
    cJSON_AddNumberToObject(root, "n_predict", n_predict);
    cJSON_AddNumberToObject(root, "temperature", 0);
    cJSON_AddBoolToObject(root, "ignore_eos", 1);
    cJSON_AddBoolToObject(root, "cache_prompt", 0);
    cJSON_AddBoolToObject(root, "stream", 0);
    char *text = cJSON_PrintUnformatted(root); /* NULL if any allocation above failed */
    cJSON_Delete(root);
    return text;
}

/* One slot's decode window, from its answer's timings and the client's clock. */
struct window {
    double n, ms, rate, prompt_ms;
    int64_t end_ns;
};

/* A result's timings into *w; -1 with what was wrong in err when they are missing or short. */
static int read_window(const cJSON *result, int32_t n_predict, int64_t end_ns, struct window *w,
                       char *err, size_t err_size)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(result, "timings");
    w->n = number(t, "predicted_n");
    w->ms = number(t, "predicted_ms");
    w->rate = number(t, "predicted_per_second");
    w->prompt_ms = number(t, "prompt_ms");
    w->end_ns = end_ns;
    if (!isfinite(w->n) || !isfinite(w->ms) || !isfinite(w->rate) || w->ms <= 0.0) {
        set_err(err, err_size, "no timings (predicted_n, predicted_ms, predicted_per_second)");
        return -1;
    }
    if ((int32_t)w->n != n_predict) {
        set_err(err, err_size, "predicted_n %.0f, expected n_predict %d", w->n, n_predict);
        return -1;
    }
    return 0;
}

/* The rule of llama_bench.h over the batch windows. */
static void aggregate(const struct window *w, int32_t batch, struct assay_llama_bench_result *res)
{
    int64_t s_min = INT64_MAX, s_max = INT64_MIN, e_min = INT64_MAX, e_max = INT64_MIN;
    res->request_rate_min = INFINITY;
    res->request_rate_max = -INFINITY;
    for (int32_t i = 0; i < batch; i++) {
        int64_t e = w[i].end_ns, s = e - (int64_t)(w[i].ms * 1e6);
        s_min = s < s_min ? s : s_min;
        s_max = s > s_max ? s : s_max;
        e_min = e < e_min ? e : e_min;
        e_max = e > e_max ? e : e_max;
        res->decode_tokens += (int64_t)w[i].n - 1;
        res->sum_request_rates += w[i].rate;
        res->request_rate_min = fmin(res->request_rate_min, w[i].rate);
        res->request_rate_max = fmax(res->request_rate_max, w[i].rate);
        res->prompt_ms_max = fmax(res->prompt_ms_max, w[i].prompt_ms);
    }
    res->span_s = (e_max - s_min) / 1e9;
    res->overlap = (double)(e_min - s_max) / (double)(e_max - s_min);
    res->tokens_per_s = res->decode_tokens / res->span_s;
}

/*
 * One run: batch prompts of n_predict tokens, as batch concurrent requests
 * or as one request (lb->one_request); the rule of llama_bench.h into
 * *res. check_overlap: fail a run whose slots did not decode together.
 */
static enum assay_status run_requests(struct assay_llama_bench *lb, int32_t batch,
                                      int32_t n_predict, int check_overlap,
                                      struct assay_llama_bench_result *res, char *err,
                                      size_t err_size)
{
    memset(res, 0, sizeof *res);
    res->batch = batch;
    /* One request of batch prompts; of one prompt, it is a plain request
     * (a list of one prompt is answered by one object, not a list). */
    int one = lb->one_request && batch > 1;
    int32_t n_http = one ? 1 : batch;
    char *body = request_body(lb->prompt_len, n_predict, one ? batch : 0);
    struct request *reqs = calloc((size_t)n_http, sizeof *reqs);
    struct window *w = calloc((size_t)batch, sizeof *w);
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    struct curl_slist *h2 = headers != NULL ? curl_slist_append(headers, "Expect:") : NULL;
    cJSON *root = NULL;
    enum assay_status st = ASSAY_OK;
    char url[300], what[256] = "out of memory";
    if (body == NULL || reqs == NULL || w == NULL || h2 == NULL) {
        set_err(err, err_size, "out of memory");
        st = ASSAY_ERR_NOMEM;
        goto done;
    }
    headers = h2;

    /* Concurrent requests: first open a connection for each (GET /health,
     * answered by the server's HTTP threads), so that all requests go out
     * in one curl_multi_perform on open connections and none waits for a
     * connect while the first ones already keep the server's cores busy.
     * (This does not stop the server from starting the first arrivals a
     * step or more before the rest: llama_bench.h.) */
    if (!one) {
        snprintf(url, sizeof url, "%s/health", lb->url);
        for (int32_t i = 0; i < n_http && st == ASSAY_OK; i++) {
            st = request_init(&reqs[i], url, NULL, NULL);
        }
        if (st == ASSAY_OK) {
            st = perform_all(lb, reqs, n_http, 60.0, what, sizeof what);
        }
        for (int32_t i = 0; i < n_http && st == ASSAY_OK; i++) {
            if (reqs[i].result != CURLE_OK || reqs[i].http != 200) {
                snprintf(what, sizeof what, "GET /health: %s, HTTP %ld",
                         curl_easy_strerror(reqs[i].result), reqs[i].http);
                st = ASSAY_ERR_NET;
            }
        }
        requests_free(reqs, n_http);
        reqs = calloc((size_t)n_http, sizeof *reqs);
        if (st != ASSAY_OK || reqs == NULL) {
            set_err(err, err_size, "%s", reqs == NULL ? "out of memory" : what);
            st = reqs == NULL ? ASSAY_ERR_NOMEM : st;
            goto done;
        }
    }

    snprintf(url, sizeof url, "%s/completion", lb->url);
    for (int32_t i = 0; i < n_http && st == ASSAY_OK; i++) {
        st = request_init(&reqs[i], url, body, headers);
    }
    if (st != ASSAY_OK) {
        set_err(err, err_size, "out of memory");
        goto done;
    }
    double calls0 = decode_calls(lb->url);
    int64_t t_sent = assay_now_ns();
    st = perform_all(lb, reqs, n_http, lb->run_timeout_s, err, err_size);
    if (st != ASSAY_OK) {
        goto done;
    }
    double calls1 = decode_calls(lb->url);

    curl_off_t sent_min = INT64_MAX, sent_max = 0;
    int64_t end_max = t_sent;
    for (int32_t i = 0; i < n_http; i++) {
        struct request *r = &reqs[i];
        if (r->result != CURLE_OK) {
            set_err(err, err_size, "request %d of %d: %s", i + 1, n_http,
                    curl_easy_strerror(r->result));
            st = ASSAY_ERR_NET;
            goto done;
        }
        if (r->http != 200) {
            describe_answer(r, what, sizeof what);
            set_err(err, err_size, "request %d of %d: HTTP %ld: %s", i + 1, n_http, r->http, what);
            st = ASSAY_ERR_NET;
            goto done;
        }
        root = cJSON_ParseWithLength(r->body, r->len);
        int32_t n_results = one ? cJSON_GetArraySize(root) : 1;
        if (root == NULL || (one && (!cJSON_IsArray(root) || n_results != batch))) {
            describe_answer(r, what, sizeof what);
            set_err(err, err_size, "request %d of %d: expected %s, got: %s", i + 1, n_http,
                    one ? "a list of one result per prompt" : "a JSON object", what);
            st = ASSAY_ERR_NET;
            goto done;
        }
        for (int32_t j = 0; j < n_results; j++) {
            const cJSON *result = one ? cJSON_GetArrayItem(root, j) : root;
            int32_t k = one ? j : i;
            if (read_window(result, n_predict, r->t_done_ns, &w[k], what, sizeof what) != 0) {
                set_err(err, err_size, "request %d of %d, prompt %d: %s", i + 1, n_http, j + 1,
                        what);
                st = ASSAY_ERR_NET;
                goto done;
            }
        }
        cJSON_Delete(root);
        root = NULL;
        sent_min = r->pretransfer_us < sent_min ? r->pretransfer_us : sent_min;
        sent_max = r->pretransfer_us > sent_max ? r->pretransfer_us : sent_max;
        res->new_connections += (int32_t)r->connects;
        end_max = r->t_done_ns > end_max ? r->t_done_ns : end_max;
    }
    aggregate(w, batch, res);
    res->send_spread_s = (sent_max - sent_min) / 1e6;
    res->wall_s = (end_max - t_sent) / 1e9;
    res->tokens_per_decode = calls1 > calls0 ? res->decode_tokens / (calls1 - calls0) : NAN;
    if (check_overlap && res->overlap < ASSAY_LLAMA_BENCH_MIN_OVERLAP) {
        set_err(err, err_size,
                "the %d prompts did not decode together: their common window is %.0f%% of the "
                "span (at least %.0f%% needed), %.1f tokens per llama_decode()",
                batch, 100 * res->overlap, 100 * ASSAY_LLAMA_BENCH_MIN_OVERLAP,
                res->tokens_per_decode);
        st = ASSAY_ERR_UNSUPPORTED;
    }
done:
    cJSON_Delete(root);
    requests_free(reqs, n_http);
    free(w);
    curl_slist_free_all(headers);
    cJSON_free(body);
    return st;
}

/* llama-server-ctl.sh stop; quiet. */
static void stop_server(const struct assay_llama_bench *lb)
{
    char *const argv[] = {(char *)lb->ctl, "stop", (char *)lb->state_dir, NULL};
    char out[SCRIPT_OUTPUT_SIZE];
    int code;
    run_script(argv, NULL, out, sizeof out, &code, NULL, 0);
}

static enum assay_status check_params(const struct assay_llama_bench_params *p, char *err,
                                      size_t err_size)
{
    if (p->server_bin == NULL || access(p->server_bin, X_OK) != 0) {
        set_err(err, err_size, "server_bin: no executable at %s",
                p->server_bin != NULL ? p->server_bin : "(NULL)");
        return ASSAY_ERR_INVALID;
    }
    if (p->gguf == NULL || access(p->gguf, R_OK) != 0) {
        set_err(err, err_size, "gguf: no readable file at %s",
                p->gguf != NULL ? p->gguf : "(NULL)");
        return ASSAY_ERR_INVALID;
    }
    if (p->slots < 1 || p->slots > MAX_SLOTS || p->threads < 1 || p->prompt_len < 1 ||
        p->prompt_len > 4096 || p->n_predict < 2 || p->ctx_slack < 0 || !(p->run_timeout_s > 0)) {
        set_err(err, err_size,
                "params: expected 1 <= slots <= %d, threads >= 1, 1 <= prompt_len <= 4096, "
                "n_predict >= 2, ctx_slack >= 0, run_timeout_s > 0",
                MAX_SLOTS);
        return ASSAY_ERR_INVALID;
    }
    return ASSAY_OK;
}

enum assay_status assay_llama_bench_open(struct assay_llama_bench **out,
                                         const struct assay_llama_bench_params *p, char *err,
                                         size_t err_size)
{
    *out = NULL;
    set_err(err, err_size, "%s", "");
    enum assay_status st = check_params(p, err, err_size);
    if (st != ASSAY_OK) {
        return st;
    }
    struct assay_llama_bench *lb = calloc(1, sizeof *lb);
    char *extra = p->extra_args != NULL ? strdup(p->extra_args) : NULL;
    if (lb == NULL || (p->extra_args != NULL && extra == NULL)) {
        free(lb);
        free(extra);
        set_err(err, err_size, "out of memory");
        return ASSAY_ERR_NOMEM;
    }
    lb->slots = p->slots;
    lb->one_request = p->one_request != 0;
    lb->prompt_len = p->prompt_len;
    lb->n_predict = p->n_predict;
    lb->run_timeout_s = p->run_timeout_s;
    char src[PATH_SIZE];
    st = find_source_dir(p->source_dir, src, sizeof src, err, err_size);
    if (st != ASSAY_OK) {
        free(lb);
        free(extra);
        return st;
    }
    if (p->state_dir != NULL) {
        snprintf(lb->state_dir, sizeof lb->state_dir, "%s", p->state_dir);
    } else {
        char name[64];
        snprintf(name, sizeof name, "llama-bench-np%d", p->slots);
        assay_test_scratch(name, lb->state_dir, sizeof lb->state_dir);
    }
    if (join(lb->ctl, sizeof lb->ctl, src, "scripts/llama-server-ctl.sh") != 0 ||
        join(lb->log_path, sizeof lb->log_path, lb->state_dir, "log") != 0 ||
        strlen(lb->state_dir) + 16 >= sizeof lb->state_dir) {
        set_err(err, err_size, "source or state folder path too long");
        free(lb);
        free(extra);
        return ASSAY_ERR_INVALID;
    }

    /* ctl start STATE MODEL --cache-ram 0 [extra...] */
    char *argv[6 + MAX_EXTRA_ARGS + 1];
    int argc = 0;
    argv[argc++] = lb->ctl;
    argv[argc++] = "start";
    argv[argc++] = lb->state_dir;
    argv[argc++] = (char *)p->gguf;
    argv[argc++] = "--cache-ram";
    argv[argc++] = "0";
    char *save = NULL;
    for (char *tok = extra != NULL ? strtok_r(extra, " \t\n", &save) : NULL; tok != NULL;
         tok = strtok_r(NULL, " \t\n", &save)) {
        if (argc == 6 + MAX_EXTRA_ARGS) {
            set_err(err, err_size, "extra_args: more than %d arguments", MAX_EXTRA_ARGS);
            free(lb);
            free(extra);
            return ASSAY_ERR_INVALID;
        }
        argv[argc++] = tok;
    }
    argv[argc] = NULL;
    char env[5][PATH_SIZE + 32];
    snprintf(env[0], sizeof env[0], "ASSAY_LLAMA_SERVER=%s", p->server_bin);
    snprintf(env[1], sizeof env[1], "ASSAY_LLAMA_NP=%d", p->slots);
    snprintf(env[2], sizeof env[2], "ASSAY_LLAMA_THREADS=%d", p->threads);
    snprintf(env[3], sizeof env[3], "ASSAY_LLAMA_CTX_PER_SLOT=%d",
             p->prompt_len + p->n_predict + p->ctx_slack);
    snprintf(env[4], sizeof env[4], "ASSAY_OWNER_PID=%ld", (long)getpid());
    const char *const overrides[] = {env[0], env[1], env[2], env[3], env[4], NULL};
    char output[SCRIPT_OUTPUT_SIZE];
    int code = -1;
    st = run_script(argv, overrides, output, sizeof output, &code, err, err_size);
    free(extra);
    if (st == ASSAY_OK && code != 0) {
        /* The script's own message names the cause; the log's tail follows it. */
        const char *msg = strstr(output, "llama-server-ctl: ");
        char line[512], tail[512];
        snprintf(line, sizeof line, "%.500s",
                 msg != NULL ? msg + strlen("llama-server-ctl: ") : output);
        line[strcspn(line, "\n")] = '\0';
        char *cut = strstr(line, "; the end of ");
        if (cut != NULL) {
            *cut = '\0';
        }
        last_line(output, tail, sizeof tail);
        if (strncmp(tail, "llama-server-ctl: ", strlen("llama-server-ctl: ")) == 0) {
            tail[0] = '\0'; /* the log was empty */
        }
        set_err(err, err_size,
                "llama-server did not start (llama-server-ctl.sh exit %d): %s; "
                "its log %s ends \"%s\"",
                code, line, lb->log_path, tail);
        st = ASSAY_ERR_IO;
    }
    if (st == ASSAY_OK) {
        char url_path[PATH_SIZE];
        join(url_path, sizeof url_path, lb->state_dir, "url"); /* fits: checked above */
        FILE *f = fopen(url_path, "r");
        if (f == NULL || fgets(lb->url, sizeof lb->url, f) == NULL) {
            set_err(err, err_size, "llama-server-ctl.sh started a server but wrote no %s",
                    url_path);
            st = ASSAY_ERR_IO;
        }
        if (f != NULL) {
            fclose(f);
        }
        lb->url[strcspn(lb->url, "\r\n")] = '\0';
    }
    if (st == ASSAY_OK) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            set_err(err, err_size, "curl_global_init failed");
            st = ASSAY_ERR_NOMEM;
        } else {
            lb->curl_ready = 1;
            lb->multi = curl_multi_init();
            if (lb->multi == NULL) {
                set_err(err, err_size, "curl_multi_init failed");
                st = ASSAY_ERR_NOMEM;
            }
        }
    }
    if (st == ASSAY_OK) {
        struct assay_llama_bench_result r;
        char why[512];
        st = run_requests(lb, 1, 4, 0, &r, why, sizeof why);
        if (st != ASSAY_OK) {
            set_err(err, err_size,
                    "llama-server at %s started but /completion failed: %s (log: %s)",
                    lb->url, why, lb->log_path);
        }
    }
    if (st != ASSAY_OK) {
        assay_llama_bench_close(lb);
        return st;
    }
    *out = lb;
    return ASSAY_OK;
}

enum assay_status assay_llama_bench_run(struct assay_llama_bench *lb, int32_t batch,
                                        struct assay_llama_bench_result *res, char *err,
                                        size_t err_size)
{
    set_err(err, err_size, "%s", "");
    if (batch < 1 || batch > lb->slots) {
        memset(res, 0, sizeof *res);
        set_err(err, err_size, "batch %d: expected 1 to %d (the server's slots)", batch, lb->slots);
        return ASSAY_ERR_INVALID;
    }
    return run_requests(lb, batch, lb->n_predict, 1, res, err, err_size);
}

const char *assay_llama_bench_log_path(const struct assay_llama_bench *lb)
{
    return lb->log_path;
}

void assay_llama_bench_close(struct assay_llama_bench *lb)
{
    if (lb == NULL) {
        return;
    }
    stop_server(lb);
    if (lb->multi != NULL) {
        curl_multi_cleanup(lb->multi);
    }
    if (lb->curl_ready) {
        curl_global_cleanup();
    }
    free(lb);
}
