/*
 * mpi_shard.c - the ranks' communicator of an MPI run (checks/shard.h), and
 * its start and end around a command.
 *
 * Built with -DASSAY_MPI=ON. A process started by an MPI launcher (mpirun,
 * mpiexec, srun with PMIx or PMI) joins MPI_COMM_WORLD; a process started
 * otherwise does not initialise MPI at all and runs as one process.
 *
 * Every collective is non-blocking and waited for with a deadline: a rank
 * that does not answer within it (hung, stopped, its host gone) ends the
 * whole run with MPI_Abort and a message on stderr, so no rank hangs and
 * no report is written from part of the data. The deadline is the longest
 * one rank may legitimately keep the others waiting: a check's time limit
 * (verify --timeout) plus a margin, or ASSAY_RANK_TIMEOUT seconds. A rank
 * whose process dies is the launcher's to see: Open MPI's mpirun ends the
 * job and exits non-zero.
 */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checks/isolate.h"
#include "checks/shard.h"
#include "core/alloc.h"

/* Launched by an MPI launcher: the variables each sets in its processes.
 * *size is the run's rank count (0: not said), *rank this process's (-1:
 * not said). */
static bool launched_by_mpi(int32_t *size, int32_t *rank)
{
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"};
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    *size = 0;
    *rank = -1;
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0] && *rank < 0; i++) {
        const char *v = getenv(ranks[i]);
        *rank = v != NULL ? (int32_t)atoi(v) : -1;
    }
    if (*rank < 0) {
        return false; /* SLURM_NTASKS alone: srun without MPI, one process each */
    }
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0] && *size <= 0; i++) {
        const char *v = getenv(sizes[i]);
        *size = v != NULL && atoi(v) > 0 ? (int32_t)atoi(v) : 0;
    }
    return true;
}

#ifdef ASSAY_MPI

#include <mpi.h>

static double g_deadline_s = ASSAY_ISOLATION_TIMEOUT_S + 300.0;
static struct assay_shard_backend g_be;
static bool g_started;

static void sleep_us(long us)
{
    struct timespec ts = {0, us * 1000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Wait for req, or end the run when the deadline passes first. */
static enum assay_status wait_or_abort(MPI_Request *req, const char *what)
{
    double t0 = MPI_Wtime();
    long nap = 20;
    for (;;) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
            return ASSAY_ERR_IO;
        }
        if (done) {
            return ASSAY_OK;
        }
        if (MPI_Wtime() - t0 > g_deadline_s) {
            fprintf(stderr,
                    "assay: rank %d of %d: another rank did not reach the %s within %g s (hung, "
                    "stopped or gone): ending the run with no verdict (ASSAY_RANK_TIMEOUT sets "
                    "the limit)\n",
                    (int)g_be.rank, (int)g_be.size, what, g_deadline_s);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, ASSAY_EXIT_USAGE);
            return ASSAY_ERR_TIMEOUT;
        }
        sleep_us(nap);
        nap = nap < 1000 ? 2 * nap : 1000;
    }
}

static enum assay_status mpi_allreduce(void *self, void *buf, int64_t count,
                                       enum assay_shard_type type, enum assay_shard_op op)
{
    (void)self;
    if (count > (int64_t)1 << 30) {
        return ASSAY_ERR_INVALID;
    }
    MPI_Datatype dt = type == ASSAY_SHARD_F64 ? MPI_DOUBLE : MPI_INT64_T;
    MPI_Op o = op == ASSAY_SHARD_MIN ? MPI_MIN : op == ASSAY_SHARD_MAX ? MPI_MAX : MPI_SUM;
    MPI_Request req;
    if (MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, dt, o, MPI_COMM_WORLD, &req) !=
        MPI_SUCCESS) {
        return ASSAY_ERR_IO;
    }
    return wait_or_abort(&req, "check's next collective");
}

static enum assay_status mpi_allgatherv(void *self, const void *mine, int64_t bytes, void **all,
                                        int64_t *total)
{
    (void)self;
    *all = NULL;
    *total = 0;
    if (bytes > INT32_MAX) {
        return ASSAY_ERR_INVALID;
    }
    int n = g_be.size;
    int *counts = assay_calloc((size_t)n, sizeof(int));
    int *displs = assay_calloc((size_t)n, sizeof(int));
    if (counts == NULL || displs == NULL) {
        /* The others are about to exchange with this rank: it cannot
         * leave the collective alone, so the run ends. */
        fprintf(stderr, "assay: rank %d of %d: out of memory in a collective\n", (int)g_be.rank,
                (int)g_be.size);
        MPI_Abort(MPI_COMM_WORLD, ASSAY_EXIT_USAGE);
        return ASSAY_ERR_NOMEM;
    }
    enum assay_status st = ASSAY_OK;
    int mine_n = (int)bytes;
    MPI_Request req;
    if (MPI_Iallgather(&mine_n, 1, MPI_INT, counts, 1, MPI_INT, MPI_COMM_WORLD, &req) !=
            MPI_SUCCESS ||
        wait_or_abort(&req, "check's next collective") != ASSAY_OK) {
        st = ASSAY_ERR_IO;
    }
    int64_t sum = 0;
    for (int r = 0; st == ASSAY_OK && r < n; r++) {
        displs[r] = (int)sum;
        sum += counts[r];
    }
    if (st == ASSAY_OK && sum > INT32_MAX) {
        st = ASSAY_ERR_INVALID;
    }
    char *buf = st == ASSAY_OK ? assay_malloc(sum > 0 ? (size_t)sum : 1) : NULL;
    if (st == ASSAY_OK && buf == NULL) {
        fprintf(stderr, "assay: rank %d of %d: out of memory in a collective\n", (int)g_be.rank,
                (int)g_be.size);
        MPI_Abort(MPI_COMM_WORLD, ASSAY_EXIT_USAGE);
        st = ASSAY_ERR_NOMEM;
    }
    if (st == ASSAY_OK) {
        if (MPI_Iallgatherv(mine, mine_n, MPI_BYTE, buf, counts, displs, MPI_BYTE,
                            MPI_COMM_WORLD, &req) != MPI_SUCCESS ||
            wait_or_abort(&req, "check's next collective") != ASSAY_OK) {
            st = ASSAY_ERR_IO;
        }
    }
    assay_free(counts);
    assay_free(displs);
    if (st != ASSAY_OK) {
        assay_free(buf);
        return st;
    }
    *all = buf;
    *total = sum;
    return ASSAY_OK;
}

static enum assay_status mpi_gather(void *self, const void *mine, int64_t bytes, void *all)
{
    (void)self;
    if (bytes > INT32_MAX) {
        return ASSAY_ERR_INVALID;
    }
    MPI_Request req;
    if (MPI_Igather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD,
                    &req) != MPI_SUCCESS) {
        return ASSAY_ERR_IO;
    }
    return wait_or_abort(&req, "end of the check");
}

static enum assay_status mpi_barrier(void *self)
{
    (void)self;
    MPI_Request req;
    if (MPI_Ibarrier(MPI_COMM_WORLD, &req) != MPI_SUCCESS) {
        return ASSAY_ERR_IO;
    }
    return wait_or_abort(&req, "start of the next check");
}

bool assay_cli_mpi_start(int *argc, char ***argv)
{
    int32_t said_size = 0, said_rank = -1;
    if (!launched_by_mpi(&said_size, &said_rank)) {
        return true;
    }
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "assay: MPI_Init failed\n");
        return false;
    }
    g_started = true;
    int rank = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    const char *t = getenv("ASSAY_RANK_TIMEOUT");
    if (t != NULL) {
        char *end = NULL;
        double v = strtod(t, &end);
        if (end == t || *end != '\0' || !(v > 0)) {
            if (rank == 0) {
                fprintf(stderr, "assay: ASSAY_RANK_TIMEOUT: expected seconds > 0, got '%s'\n", t);
            }
            return false;
        }
        g_deadline_s = v;
    }
    /* The ranks that share this one's memory (the audit divides what is
     * available among them before it chooses how to hold the weights). */
    int local_n = 0;
    MPI_Comm local;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local) ==
        MPI_SUCCESS) {
        MPI_Comm_size(local, &local_n);
        MPI_Comm_free(&local);
    }
    g_be = (struct assay_shard_backend){rank,           n,          NULL,        mpi_allreduce,
                                        mpi_allgatherv, mpi_gather, mpi_barrier, local_n};
    assay_shard_set_backend(&g_be);
    return true;
}

void assay_cli_mpi_set_check_timeout(double timeout_s)
{
    if (getenv("ASSAY_RANK_TIMEOUT") == NULL && timeout_s > 0) {
        g_deadline_s = timeout_s + 300.0;
    }
    if (getenv("ASSAY_RANK_TIMEOUT") == NULL && timeout_s <= 0) {
        g_deadline_s = 1e12; /* no limit on a check: none on waiting for one */
    }
}

bool assay_cli_mpi_ready(bool ok)
{
    if (!g_started) {
        return ok;
    }
    int v = ok ? 1 : 0;
    MPI_Request req;
    if (MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &req) !=
            MPI_SUCCESS ||
        wait_or_abort(&req, "start of the checks") != ASSAY_OK) {
        return false;
    }
    if (ok && v == 0 && g_be.rank != 0) {
        fprintf(stderr, "assay: rank %d of %d: rank 0 could not start the run (its message "
                        "says why)\n", (int)g_be.rank, (int)g_be.size);
    }
    return v != 0;
}

void assay_cli_mpi_end(void)
{
    if (g_started) {
        assay_shard_set_backend(NULL);
        MPI_Finalize();
        g_started = false;
    }
}

#else /* without MPI */

bool assay_cli_mpi_start(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    int32_t size = 0, rank = -1;
    /* More than one process, as far as the launcher says (a rank above 0
     * says so too): each would run the whole plan and write the report. */
    if (launched_by_mpi(&size, &rank) && (size > 1 || rank > 0)) {
        fprintf(stderr,
                "assay: started by an MPI launcher, but this assay was built without MPI: every "
                "rank would run the whole plan alone. Build with -DASSAY_MPI=ON (README, "
                "\"Across machines with MPI\"), or run it without mpirun.\n");
        return false;
    }
    return true;
}

void assay_cli_mpi_set_check_timeout(double timeout_s)
{
    (void)timeout_s;
}

bool assay_cli_mpi_ready(bool ok)
{
    return ok;
}

void assay_cli_mpi_end(void)
{
}

#endif
