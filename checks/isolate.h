/*
 * isolate.h - run one check in a child process, so that a crash, an abort or
 * a hang of the engine under test becomes that check's FAIL while every
 * other check still runs and the report is still written (as Check and
 * Criterion run each test in a fork).
 *
 * The child writes its result into memory shared with the parent and leaves
 * breadcrumbs there as the harness drives the engine (checks/harness.h:
 * which run of the workload, which step, whether it was inside the engine),
 * so a check whose process dies is reported with the signal, the last step
 * and the reproducer line its result already carried. A check that runs
 * past its time limit is killed (SIGKILL) and reported the same way.
 *
 * The child restores the default action of the crash signals (SIGSEGV,
 * SIGBUS, SIGFPE, SIGILL, SIGABRT), so that it dies of them even where the
 * host program installed handlers; a sanitizer that reports an invalid
 * access without a signal ends the child with an exit status instead.
 *
 * Without fork (--no-fork, for a debugger) the function runs in the calling
 * process and none of this applies.
 */
#ifndef ASSAY_ISOLATE_H
#define ASSAY_ISOLATE_H

#include <stdbool.h>
#include <stdio.h>

#include "../core/status.h"
#include "result.h"

struct assay_isolation {
    bool fork;        /* run in a child process (the default) */
    double timeout_s; /* with fork: kill the child after this long; 0: no limit */
};

/* Fork on, a limit of ASSAY_ISOLATION_TIMEOUT_S seconds. */
struct assay_isolation assay_isolation_default(void);

/* A check's time limit, seconds: the one place it is stated (the commands'
 * --help print it from ASSAY_ISOLATION_TIMEOUT_TEXT). */
#define ASSAY_ISOLATION_TIMEOUT_WHOLE 600
#define ASSAY_ISOLATION_TIMEOUT_S ((double)ASSAY_ISOLATION_TIMEOUT_WHOLE)
#define ASSAY_ISOLATION_STR_(x) #x
#define ASSAY_ISOLATION_STR(x) ASSAY_ISOLATION_STR_(x)
#define ASSAY_ISOLATION_TIMEOUT_TEXT ASSAY_ISOLATION_STR(ASSAY_ISOLATION_TIMEOUT_WHOLE)

/*
 * The work of one check. run fills res (already initialised by the caller
 * with the check's name, engine, workload and reproducer) and returns
 * ASSAY_OK or ASSAY_ERR_NOMEM. What the check's process learned that later
 * checks can use (the oracle's memo) goes back through a file: send (in
 * the child, after run; may be NULL) writes it, receive (in the parent,
 * only after a child that ended well; may be NULL) reads it. Without fork
 * neither is called.
 */
struct assay_isolated_work {
    enum assay_status (*run)(void *arg, struct assay_check_result *res);
    enum assay_status (*send)(void *arg, FILE *f);
    enum assay_status (*receive)(void *arg, FILE *f);
};

/*
 * Run work->run(arg, res) under iso. With fork, res is copied into shared
 * memory, run works on that copy in a child, and the copy comes back when
 * the child has finished. When the child dies of a signal, exits before
 * run returned, or outlives iso->timeout_s, res keeps what the child had
 * written and becomes FAIL with how it ended and where the harness was
 * (res->died_signal, res->timed_out); a child that finished run but then
 * exited with a non-zero status (a sanitizer's leak report at exit) makes
 * res ERROR. What send wrote but receive could not read is lost, not
 * wrong. Returns run's status, or ASSAY_ERR_IO when no child could be
 * started (res is then ERROR, with the reason).
 */
enum assay_status assay_isolate_run(const struct assay_isolation *iso,
                                    const struct assay_isolated_work *work, void *arg,
                                    struct assay_check_result *res);

#endif
