/*
 * isolate.c - one check in a child process (isolate.h): assay_isolate_run
 * forks, lets the child write its result into shared memory, and turns a
 * crash, an abort or a run past the time limit (SIGKILL) into that check's
 * FAIL with the signal and the last step; assay_isolation_default gives the
 * settings. context.c runs every plan item through it; under MPI the child
 * reaches the rank's collectives over a socket (shard.c).
 */
#include "isolate.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/mman.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../core/clock.h"
#include "harness.h"
#include "shard.h"

struct assay_isolation assay_isolation_default(void)
{
    return (struct assay_isolation){true, ASSAY_ISOLATION_TIMEOUT_S};
}

/* What parent and child share: the result, the breadcrumbs, and whether
 * (and how) fn returned. */
struct shared {
    struct assay_check_result res;
    struct assay_crumb crumb;
    int32_t done;
    int32_t status;
    int32_t carried; /* the child wrote its findings to the carry file */
};

static const char *ordinal_suffix(int32_t n)
{
    if (n % 100 >= 11 && n % 100 <= 13) {
        return "th";
    }
    switch (n % 10) {
    case 1: return "st";
    case 2: return "nd";
    case 3: return "rd";
    default: return "th";
    }
}

/* Where the harness was, from the breadcrumbs, into buf. */
static void where(const volatile struct assay_crumb *c, char *buf, size_t size)
{
    if (c->runs == 0) {
        snprintf(buf, size, "before the check ran its first workload");
        return;
    }
    snprintf(buf, size,
             "%s step %lld of the check's %d%s run of a workload (%d of its %d requests "
             "submitted, %d finished)",
             c->in_engine ? "inside the engine, at" : "outside the engine (in the check), after",
             (long long)c->step, c->runs, ordinal_suffix(c->runs), c->submitted, c->n_requests,
             c->finished);
}

/* res becomes FAIL (or ERROR) with how the child ended; what the child had
 * found before is kept after it. */
static void ended_badly(struct assay_check_result *res, enum assay_verdict v, const char *how,
                        const char *summary, const char *at)
{
    char before[sizeof res->failure];
    snprintf(before, sizeof before, "%s", res->verdict != ASSAY_VERDICT_PASS ? res->failure : "");
    res->verdict = v;
    snprintf(res->failure, sizeof res->failure, "%.200s, %.250s%s%.160s", how, at,
             before[0] != '\0' ? "; before that: " : "", before);
    snprintf(res->summary, sizeof res->summary, "%s", summary);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* The check's process: run the work into the shared record, carry its
 * findings back through carry (NULL: none), say it ended, and exit. */
static _Noreturn void run_child(struct shared *sh, const struct assay_isolated_work *work,
                                void *arg, FILE *carry, const int link[2], pid_t parent)
{
    /* Die of the signal itself, whatever handler the host program has
     * (a test framework's turns a crash into an exit), so the verdict
     * can name it. */
    static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++) {
        signal(crash_signals[i], SIG_DFL);
    }
    /* A parent killed meanwhile takes its check with it: no hanging
     * engine is left behind. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
        _exit(1);
    }
    if (link[0] >= 0) {
        close(link[0]);
        assay_shard_attach_child(link[1]);
    }
    assay_harness_set_crumb(&sh->crumb);
    sh->status = work->run(arg, &sh->res);
    if (carry != NULL && work->send(arg, carry) == ASSAY_OK && fflush(carry) == 0) {
        sh->carried = 1;
    }
    __atomic_store_n(&sh->done, 1, __ATOMIC_SEQ_CST);
    if (assay_shard_world_size() > 1) {
        /* The rank's MPI library set up exit handlers of its own, which
         * are not the child's to run. */
        _exit(0);
    }
    /* exit, not _exit: a sanitizer's leak check runs at exit and says so
     * in the status. */
    exit(0);
}

/* Wait for the check's process pid to end (its status into *wstatus),
 * serving its collectives on *fd meanwhile (-1: none; closed and set to
 * -1 when the child is gone), and kill it once timeout_s (0: none) have
 * passed since t0. Returns whether it was killed for that. */
static bool wait_child(pid_t pid, int *fd, int64_t t0, double timeout_s, int *wstatus)
{
    bool timed_out = false;
    long nap = 1;
    for (;;) {
        pid_t r = waitpid(pid, wstatus, WNOHANG);
        if (r == pid) {
            break;
        }
        if (r < 0 && errno != EINTR) {
            kill(pid, SIGKILL);
            (void)waitpid(pid, wstatus, 0);
            break;
        }
        double s = (double)(assay_now_ns() - t0) / 1e9;
        if (!timed_out && timeout_s > 0 && s > timeout_s) {
            timed_out = true;
            kill(pid, SIGKILL);
        }
        if (*fd >= 0) {
            /* Wait for the child's next collective as long as we would
             * have slept; a failed one means the child is gone. */
            struct pollfd pfd = {*fd, POLLIN, 0};
            int pr = poll(&pfd, 1, (int)nap);
            if (pr > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
                assay_shard_serve(*fd) != ASSAY_OK) {
                close(*fd);
                *fd = -1;
            }
        } else {
            sleep_ms(nap);
        }
        nap = nap < 20 ? 2 * nap : 20;
    }
    return timed_out;
}

enum assay_status assay_isolate_run(const struct assay_isolation *iso,
                                    const struct assay_isolated_work *work, void *arg,
                                    struct assay_check_result *res)
{
    if (iso == NULL || !iso->fork) {
        return work->run(arg, res);
    }
    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                             -1, 0);
    if (sh == MAP_FAILED) {
        assay_check_error(res, "could not map memory to share with the check's process: %s",
                          strerror(errno));
        return ASSAY_ERR_IO;
    }
    /* The child's findings for later checks: an unlinked file whose offset
     * parent and child share. Without one they are not carried back. */
    FILE *carry = work->send != NULL && work->receive != NULL ? tmpfile() : NULL;
    memcpy(&sh->res, res, sizeof *res);
    memset((void *)&sh->crumb, 0, sizeof sh->crumb);
    sh->done = 0;
    sh->status = ASSAY_OK;
    sh->carried = 0;
    /* A sharded check's collectives (checks/shard.h) go through this
     * process: the child must not call MPI itself. */
    int link[2] = {-1, -1};
    if (assay_shard_proxied() && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, link) != 0) {
        int e = errno;
        munmap(sh, sizeof *sh);
        if (carry != NULL) {
            fclose(carry);
        }
        assay_check_error(res, "could not make the socket for the check's collectives: %s",
                          strerror(e));
        return ASSAY_ERR_IO;
    }
    /* Buffered output would otherwise be written twice, once by each. */
    fflush(stdout);
    fflush(stderr);
    int64_t t0 = assay_now_ns();
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        munmap(sh, sizeof *sh);
        if (link[0] >= 0) {
            close(link[0]);
            close(link[1]);
        }
        if (carry != NULL) {
            fclose(carry);
        }
        assay_check_error(res, "could not start the check's process: %s", strerror(e));
        return ASSAY_ERR_IO;
    }
    if (pid == 0) {
        run_child(sh, work, arg, carry, link, parent);
    }
    int fd = link[0];
    if (link[1] >= 0) {
        close(link[1]);
    }
    int wstatus = 0;
    bool timed_out = wait_child(pid, &fd, t0, iso->timeout_s, &wstatus);
    if (fd >= 0) {
        close(fd);
    }
    memcpy(res, &sh->res, sizeof *res);
    bool done = __atomic_load_n(&sh->done, __ATOMIC_SEQ_CST) != 0;
    enum assay_status st = (enum assay_status)sh->status;
    char at[300], how[300], summary[200];
    where(&sh->crumb, at, sizeof at);
    double seconds = (double)(assay_now_ns() - t0) / 1e9;
    if (res->seconds <= 0 || timed_out || WIFSIGNALED(wstatus) || !done) {
        res->seconds = seconds; /* the check's own figure when it gave one */
    }
    if (timed_out) {
        res->timed_out = true;
        res->died_signal = SIGKILL;
        snprintf(how, sizeof how,
                 "the check did not end within its time limit of %g s and was killed (the engine "
                 "or the check loops or waits forever)",
                 iso->timeout_s);
        snprintf(summary, sizeof summary, "killed after %g s: no end", iso->timeout_s);
        ended_badly(res, ASSAY_VERDICT_FAIL, how, summary, at);
        st = ASSAY_OK;
    } else if (WIFSIGNALED(wstatus)) {
        int sig = WTERMSIG(wstatus);
        res->died_signal = sig;
        snprintf(how, sizeof how, "the check's process died of signal %d (%s)", sig,
                 strsignal(sig));
        snprintf(summary, sizeof summary, "died of signal %d (%s)", sig, strsignal(sig));
        ended_badly(res, ASSAY_VERDICT_FAIL, how, summary, at);
        st = ASSAY_OK;
    } else if (!done) {
        snprintf(how, sizeof how,
                 "the check's process exited with status %d before the check ended (a "
                 "sanitizer's report on stderr, or exit called in the engine)",
                 WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
        snprintf(summary, sizeof summary, "exited with status %d before the end",
                 WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
        ended_badly(res, ASSAY_VERDICT_FAIL, how, summary, at);
        st = ASSAY_OK;
    } else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) {
        assay_check_error(res,
                          "the check ended but its process then exited with status %d (a "
                          "sanitizer's report at exit, such as a leak, on stderr)",
                          WEXITSTATUS(wstatus));
    }
    if (carry != NULL && done && sh->carried && WIFEXITED(wstatus) &&
        WEXITSTATUS(wstatus) == 0 && fseek(carry, 0, SEEK_SET) == 0) {
        enum assay_status rst = work->receive(arg, carry);
        st = rst == ASSAY_ERR_NOMEM ? rst : st;
    }
    if (carry != NULL) {
        fclose(carry);
    }
    munmap(sh, sizeof *sh);
    return st;
}
