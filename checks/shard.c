/*
 * shard.c - sharing a check's work among MPI ranks (shard.h): which items a
 * rank takes (assay_shard_mine), the collectives (assay_shard_allreduce,
 * _allgatherv) through the backend cli/mpi_shard.c registers, their relay
 * from a check's child process to its rank over a socket (assay_shard_serve),
 * and assay_shard_check_begin / _end around each check. Without a backend a
 * collective is the identity, so the checks read the same with and without MPI.
 */
#include "shard.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <sys/socket.h>
#include <unistd.h>

#include "../core/alloc.h"

/* What a rank says before each collective of a sharded check. */
enum header_kind {
    HEADER_ENDED = 0,   /* this rank's part of the check has ended */
    HEADER_COLLECTIVE = 1,
};

enum proxy_op {
    PROXY_ALLREDUCE = 1,
    PROXY_ALLGATHERV = 2,
};

struct proxy_request {
    int32_t op;
    int32_t type;
    int32_t redop;
    int32_t pad;
    int64_t count; /* values (allreduce) or bytes (allgatherv) */
};

struct proxy_reply {
    int32_t status;
    int32_t pad;
    int64_t bytes;
};

/* The run's communicator and the running check's state: one per process,
 * as the run has one communicator. */
static struct {
    const struct assay_shard_backend *be;
    bool sharded;  /* inside a sharded check of a run of more than one rank */
    bool last_sharded; /* the last check that ended was */
    bool aborted;  /* another rank's part of the check ended: no more collectives */
    int proxy_fd;  /* in a check's process: the socket to the rank's process; else -1 */
    int64_t n_coll, bytes, last_n_coll, last_bytes;
    int64_t bytes_in, last_bytes_in; /* received from the other ranks by allgatherv */
} g = {NULL, false, false, false, -1, 0, 0, 0, 0, 0, 0};

void assay_shard_set_backend(const struct assay_shard_backend *be)
{
    g.be = be != NULL && be->size > 1 ? be : NULL;
    g.sharded = false;
    g.aborted = false;
    g.proxy_fd = -1;
}

int32_t assay_shard_world_rank(void)
{
    return g.be != NULL ? g.be->rank : 0;
}

int32_t assay_shard_world_size(void)
{
    return g.be != NULL ? g.be->size : 1;
}

int32_t assay_shard_local_size(void)
{
    return g.be != NULL && g.be->local_size > 0 ? g.be->local_size : 1;
}

enum assay_status assay_shard_world_min(int64_t *v)
{
    if (g.be == NULL) {
        return ASSAY_OK;
    }
    return g.be->allreduce(g.be->self, v, 1, ASSAY_SHARD_I64, ASSAY_SHARD_MIN);
}

int32_t assay_shard_rank(void)
{
    return g.sharded ? g.be->rank : 0;
}

int32_t assay_shard_size(void)
{
    return g.sharded ? g.be->size : 1;
}

bool assay_shard_mine(int64_t i)
{
    return !g.sharded || i % g.be->size == g.be->rank;
}

/* ---- the rank's side: headers, then the collective ---------------------- */

/* Every rank says whether it is at a collective (of `count` values) or has
 * ended its part; true when all are at one of the same size. */
static enum assay_status header(int32_t kind, int64_t count, bool *all_at_collective)
{
    int64_t h[3] = {kind, count, -count};
    enum assay_status st = g.be->allreduce(g.be->self, h, 3, ASSAY_SHARD_I64, ASSAY_SHARD_MIN);
    if (st != ASSAY_OK) {
        return st;
    }
    g.n_coll++;
    *all_at_collective = h[0] == HEADER_COLLECTIVE;
    if (*all_at_collective && h[1] != -h[2] && kind == HEADER_COLLECTIVE) {
        /* The ranks disagree on the collective's size: a broken invariant
         * of the check (its items are not split the same way everywhere). */
        g.aborted = true;
        return ASSAY_ERR_INTERNAL;
    }
    return ASSAY_OK;
}

/* Both value types (int64_t, double) are eight bytes. */
#define VALUE_BYTES 8

/* Announce a collective of `count` values (0: sizes that differ by rank);
 * ASSAY_ERR_IO once another rank's part of the check has ended. */
static enum assay_status announce(int64_t count)
{
    if (g.aborted) {
        return ASSAY_ERR_IO;
    }
    bool go = false;
    enum assay_status st = header(HEADER_COLLECTIVE, count, &go);
    if (st == ASSAY_OK && !go) {
        g.aborted = true;
        st = ASSAY_ERR_IO;
    }
    return st;
}

static enum assay_status rank_allreduce(void *buf, int64_t count, enum assay_shard_type type,
                                        enum assay_shard_op op)
{
    enum assay_status st = announce(count);
    if (st != ASSAY_OK) {
        return st;
    }
    g.bytes += count * VALUE_BYTES;
    return g.be->allreduce(g.be->self, buf, count, type, op);
}

static enum assay_status rank_allgatherv(const void *mine, int64_t bytes, void **all,
                                         int64_t *total)
{
    *all = NULL;
    *total = 0;
    enum assay_status st = announce(0);
    if (st != ASSAY_OK) {
        return st;
    }
    g.bytes += bytes;
    st = g.be->allgatherv(g.be->self, mine, bytes, all, total);
    g.bytes_in += st == ASSAY_OK ? *total - bytes : 0;
    return st;
}

/* ---- the check's process: each collective through the rank's process ---- */

/* send, not write: a peer gone must be an error here, not a SIGPIPE that
 * kills the rank. */
static enum assay_status write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return ASSAY_ERR_IO;
        }
        p += w;
        n -= (size_t)w;
    }
    return ASSAY_OK;
}

static enum assay_status read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return ASSAY_ERR_IO;
        }
        p += r;
        n -= (size_t)r;
    }
    return ASSAY_OK;
}

/* One exchange with the rank's process. After any failure the socket may
 * be out of step, so every later collective of the check fails at once. */
static enum assay_status proxy_exchange(const struct proxy_request *rq, const void *payload,
                                        size_t payload_bytes, void *reply_buf, size_t reply_cap,
                                        void **reply_alloc, int64_t *reply_bytes)
{
    struct proxy_reply rp;
    enum assay_status st = write_all(g.proxy_fd, rq, sizeof *rq);
    if (st == ASSAY_OK) {
        st = write_all(g.proxy_fd, payload, payload_bytes);
    }
    if (st == ASSAY_OK) {
        st = read_all(g.proxy_fd, &rp, sizeof rp);
    }
    if (st != ASSAY_OK) {
        return st;
    }
    if (rp.status != ASSAY_OK) {
        return (enum assay_status)rp.status;
    }
    if (rp.bytes < 0 || (reply_alloc == NULL && (size_t)rp.bytes != reply_cap)) {
        return ASSAY_ERR_INTERNAL;
    }
    void *dst = reply_buf;
    if (reply_alloc != NULL) {
        dst = assay_malloc(rp.bytes > 0 ? (size_t)rp.bytes : 1);
        if (dst == NULL) {
            return ASSAY_ERR_NOMEM; /* the socket is out of step now: the check ends */
        }
        *reply_alloc = dst;
        *reply_bytes = rp.bytes;
    }
    return read_all(g.proxy_fd, dst, (size_t)rp.bytes);
}

static enum assay_status proxy_call(const struct proxy_request *rq, const void *payload,
                                    size_t payload_bytes, void *reply_buf, size_t reply_cap,
                                    void **reply_alloc, int64_t *reply_bytes)
{
    if (g.aborted) {
        return ASSAY_ERR_IO;
    }
    enum assay_status st = proxy_exchange(rq, payload, payload_bytes, reply_buf, reply_cap,
                                          reply_alloc, reply_bytes);
    g.aborted = st != ASSAY_OK;
    return st;
}

void assay_shard_attach_child(int fd)
{
    g.proxy_fd = fd;
}

bool assay_shard_proxied(void)
{
    return g.sharded;
}

enum assay_status assay_shard_serve(int fd)
{
    struct proxy_request rq;
    enum assay_status st = read_all(fd, &rq, sizeof rq);
    if (st != ASSAY_OK || rq.count < 0 || rq.count > ((int64_t)1 << 40)) {
        return ASSAY_ERR_IO;
    }
    size_t n = rq.op == PROXY_ALLREDUCE ? (size_t)rq.count * VALUE_BYTES : (size_t)rq.count;
    void *buf = assay_malloc(n > 0 ? n : 1);
    if (buf == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    st = read_all(fd, buf, n);
    if (st != ASSAY_OK) {
        assay_free(buf);
        return ASSAY_ERR_IO;
    }
    struct proxy_reply rp = {ASSAY_OK, 0, 0};
    void *all = NULL;
    if (rq.op == PROXY_ALLREDUCE) {
        rp.status = rank_allreduce(buf, rq.count, (enum assay_shard_type)rq.type,
                                   (enum assay_shard_op)rq.redop);
        rp.bytes = rp.status == ASSAY_OK ? (int64_t)n : 0;
    } else if (rq.op == PROXY_ALLGATHERV) {
        int64_t total = 0;
        rp.status = rank_allgatherv(buf, rq.count, &all, &total);
        rp.bytes = rp.status == ASSAY_OK ? total : 0;
    } else {
        rp.status = ASSAY_ERR_INTERNAL;
    }
    st = write_all(fd, &rp, sizeof rp);
    if (st == ASSAY_OK && rp.bytes > 0) {
        st = write_all(fd, rq.op == PROXY_ALLREDUCE ? buf : all, (size_t)rp.bytes);
    }
    assay_free(buf);
    assay_free(all);
    /* A child gone mid-answer is the child's end, seen by the caller. */
    return st == ASSAY_OK ? ASSAY_OK : ASSAY_ERR_IO;
}

/* ---- what the checks call ------------------------------------------------ */

enum assay_status assay_shard_allreduce(void *buf, int64_t count, enum assay_shard_type type,
                                        enum assay_shard_op op)
{
    if (!g.sharded) {
        return ASSAY_OK;
    }
    if (g.proxy_fd >= 0) {
        struct proxy_request rq = {PROXY_ALLREDUCE, (int32_t)type, (int32_t)op, 0, count};
        size_t n = (size_t)count * VALUE_BYTES;
        return proxy_call(&rq, buf, n, buf, n, NULL, NULL);
    }
    return rank_allreduce(buf, count, type, op);
}

enum assay_status assay_shard_allgatherv(const void *mine, int64_t bytes, void **all,
                                         int64_t *total)
{
    *all = NULL;
    *total = 0;
    if (!g.sharded) {
        void *c = assay_malloc(bytes > 0 ? (size_t)bytes : 1);
        if (c == NULL) {
            return ASSAY_ERR_NOMEM;
        }
        if (bytes > 0) {
            memcpy(c, mine, (size_t)bytes);
        }
        *all = c;
        *total = bytes;
        return ASSAY_OK;
    }
    if (g.proxy_fd >= 0) {
        struct proxy_request rq = {PROXY_ALLGATHERV, 0, 0, 0, bytes};
        return proxy_call(&rq, mine, (size_t)bytes, NULL, 0, all, total);
    }
    return rank_allgatherv(mine, bytes, all, total);
}

#define FIRST_TEXT_MAX 512

struct first_text {
    int64_t key;
    char text[FIRST_TEXT_MAX];
};

enum assay_status assay_shard_first_text(int64_t key, char *buf, size_t size)
{
    if (!g.sharded) {
        return ASSAY_OK;
    }
    struct first_text mine;
    memset(&mine, 0, sizeof mine);
    mine.key = key;
    snprintf(mine.text, sizeof mine.text, "%s", key == INT64_MAX ? "" : buf);
    void *all = NULL;
    int64_t total = 0;
    enum assay_status st = assay_shard_allgatherv(&mine, (int64_t)sizeof mine, &all, &total);
    if (st != ASSAY_OK) {
        return st;
    }
    const struct first_text *ft = all, *best = NULL;
    for (int64_t r = 0; r < total / (int64_t)sizeof mine; r++) {
        if (ft[r].key != INT64_MAX && (best == NULL || ft[r].key < best->key)) {
            best = &ft[r];
        }
    }
    if (best != NULL) {
        snprintf(buf, size, "%s", best->text);
    }
    assay_free(all);
    return ASSAY_OK;
}

/* ---- around each check --------------------------------------------------- */

bool assay_shard_check_begin(const char *name, enum assay_family family, bool shared,
                             struct assay_check_result *res)
{
    g.aborted = false;
    g.n_coll = 0;
    g.bytes = 0;
    g.bytes_in = 0;
    if (g.be == NULL) {
        g.sharded = false;
        return true;
    }
    /* A failed barrier is the backend's to report (MPI's ends the run). */
    (void)g.be->barrier(g.be->self);
    g.n_coll++;
    g.sharded = shared;
    if (g.sharded || g.be->rank == 0) {
        return true;
    }
    assay_check_result_init(res, name, family);
    return false;
}

/* What each rank sends rank 0 after a sharded check. */
struct rank_result {
    struct assay_check_result res;
    int32_t aborted; /* its part was cut short by another rank's end */
};

static int verdict_rank(enum assay_verdict v)
{
    switch (v) {
    case ASSAY_VERDICT_ERROR: return 3;
    case ASSAY_VERDICT_FAIL: return 2;
    case ASSAY_VERDICT_SKIP: return 1;
    default: return 0;
    }
}

enum assay_status assay_shard_check_end(struct assay_check_result *res)
{
    g.last_n_coll = g.n_coll;
    g.last_bytes = g.bytes;
    g.last_bytes_in = g.bytes_in;
    g.last_sharded = g.sharded;
    if (!g.sharded) {
        return ASSAY_OK;
    }
    enum assay_status st = ASSAY_OK;
    if (!g.aborted) {
        /* Say this rank's part ended; a rank still at a collective stops. */
        bool go = false;
        st = header(HEADER_ENDED, 0, &go);
    }
    struct rank_result *all = NULL;
    if (st == ASSAY_OK && g.be->rank == 0) {
        all = assay_calloc((size_t)g.be->size, sizeof *all);
        st = all == NULL ? ASSAY_ERR_NOMEM : ASSAY_OK;
    }
    /* Every rank takes part in the gather, even when rank 0 cannot hold it
     * (then rank 0 reports the error alone). */
    struct rank_result *mine = assay_calloc(1, sizeof *mine);
    if (mine == NULL) {
        st = ASSAY_ERR_NOMEM;
    } else {
        memcpy(&mine->res, res, sizeof *res);
        mine->aborted = g.aborted;
        struct rank_result scratch;
        enum assay_status gst = g.be->gather(g.be->self, mine, (int64_t)sizeof *mine,
                                             all != NULL ? (void *)all : (void *)&scratch);
        st = st == ASSAY_OK ? gst : st;
        g.bytes += (int64_t)sizeof *mine;
        g.n_coll++;
    }
    g.last_n_coll = g.n_coll;
    g.last_bytes = g.bytes;
    g.last_bytes_in = g.bytes_in;
    if (st == ASSAY_OK && all != NULL) {
        /* The rank where the check ended first (not cut short by another),
         * with the worst verdict; rank 0 on a tie. */
        int32_t pick = -1;
        double seconds = 0.0;
        for (int32_t r = 0; r < g.be->size; r++) {
            seconds = all[r].res.seconds > seconds ? all[r].res.seconds : seconds;
            if (all[r].aborted) {
                continue;
            }
            if (pick < 0 ||
                verdict_rank(all[r].res.verdict) > verdict_rank(all[pick].res.verdict)) {
                pick = r;
            }
        }
        if (pick > 0) {
            char failure[sizeof res->failure];
            memcpy(res, &all[pick].res, sizeof *res);
            snprintf(failure, sizeof failure, "on rank %d of %d: %.600s", (int)pick,
                     (int)g.be->size, res->failure);
            snprintf(res->failure, sizeof res->failure, "%s", failure);
        } else if (pick < 0) {
            assay_check_error(res, "every rank's part of the check was cut short by another's");
        }
        res->seconds = seconds;
    }
    assay_free(all);
    assay_free(mine);
    g.sharded = false;
    g.aborted = false;
    return st;
}

bool assay_shard_last_shared(void)
{
    return g.last_sharded;
}

void assay_shard_volume(int64_t *n_collectives, int64_t *bytes, int64_t *bytes_in)
{
    *n_collectives = g.last_n_coll;
    *bytes = g.last_bytes;
    *bytes_in = g.last_bytes_in;
}
