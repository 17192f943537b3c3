/*
 * shard.h - one check's work shared among the ranks of an MPI run, with
 * the verdict of the one-process run.
 *
 * Under `mpirun -n N assay verify|audit|compare`, every rank runs the same
 * plan. A check whose work is sharded runs on every rank: in the
 * distributional family (the engine's samples and the oracle's passes)
 * each rank takes the items (requests, sequences, first tokens) whose index
 * i has i mod N == rank, and the check merges what the ranks found with the
 * collectives below before it computes its statistics; in the equivalence
 * checks that say so (assay_plan_item.shared) rank 0 runs the engine alone
 * and the ranks share the oracle's passes over its transcript
 * (assay_oracle_memo_prefetch_shared). Every other check runs on rank 0
 * alone, and only rank 0 writes the report.
 *
 * The same verdict at any N: a sharded item's result depends on the item
 * alone (its request's seed, its sequence, counter-based random numbers
 * indexed by the item), and the merge puts every item's record back at its
 * index, so each rank holds exactly the arrays the one-process run computes
 * and sums them in the same order. A collective adds a record to zeros
 * (exact in floating point); partial sums are never added across ranks.
 *
 * The collectives go through a backend the program registers (the CLI's
 * MPI one, cli/mpi_shard.c); without one, or outside a sharded check, a
 * collective is the identity and assay_shard_mine is always true, so the
 * checks read the same with and without MPI. Inside a check's process
 * (checks/isolate.h: a fork of the rank's process, which must not call
 * MPI) a collective is sent over a socket to the rank's process, which
 * performs it and answers (assay_shard_serve).
 *
 * Faults: every collective of a sharded check is announced by a header
 * that all ranks exchange first. A rank whose part of the check ended
 * (finished, failed, died or was killed for its time limit) announces its
 * end instead; when the headers disagree, every rank's check stops at that
 * collective (the collective returns ASSAY_ERR_IO) and rank 0 reports the
 * result of the rank where the check ended, never a verdict computed from
 * part of the data. A rank that never answers (hung, or its process gone)
 * is the backend's to detect: the MPI backend ends the whole run with an
 * error after its deadline.
 *
 * The state is per process (a run has one communicator); nothing here
 * prints or exits.
 */
#ifndef ASSAY_SHARD_H
#define ASSAY_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"
#include "result.h"

enum assay_shard_type {
    ASSAY_SHARD_I64 = 0,
    ASSAY_SHARD_F64 = 1,
};

enum assay_shard_op {
    ASSAY_SHARD_SUM = 0,
    ASSAY_SHARD_MIN = 1,
    ASSAY_SHARD_MAX = 2,
};

/*
 * The ranks' communicator. Every slot is required. Each call is collective
 * (every rank makes it, in the same order) and returns ASSAY_OK, or an
 * error when the communication failed (a backend may instead end the
 * process, as MPI's does when a rank does not answer in time).
 *  - allreduce: buf (count values of type) becomes op over all ranks' buf.
 *  - allgatherv: *all (assay_malloc'd, the caller frees it with
 *    assay_free) becomes every rank's `bytes` bytes, rank 0's first;
 *    *total their sum.
 *  - gather: rank 0's `all` (size * bytes) receives every rank's `bytes`
 *    bytes in rank order; other ranks' `all` is not touched (may be NULL).
 *  - barrier: returns when every rank has called it.
 */
struct assay_shard_backend {
    int32_t rank;
    int32_t size;
    void *self;
    enum assay_status (*allreduce)(void *self, void *buf, int64_t count,
                                   enum assay_shard_type type, enum assay_shard_op op);
    enum assay_status (*allgatherv)(void *self, const void *mine, int64_t bytes, void **all,
                                    int64_t *total);
    enum assay_status (*gather)(void *self, const void *mine, int64_t bytes, void *all);
    enum assay_status (*barrier)(void *self);
    int32_t local_size; /* the ranks on this rank's machine (sharing its memory); 0: unknown */
};

/* Registers the ranks' communicator (borrowed: it must outlive every later
 * call), or NULL for one process. */
void assay_shard_set_backend(const struct assay_shard_backend *be);

/* This process's rank and the number of ranks in the run (0 and 1 without
 * a backend). */
int32_t assay_shard_world_rank(void);
int32_t assay_shard_world_size(void);

/* The ranks on this process's machine, this one included (1 without a
 * backend, or when the backend does not know). */
int32_t assay_shard_local_size(void);

/* *v becomes the least of every rank's *v: a choice made before the checks
 * (outside any check, in the rank's own process) that every rank must make
 * alike. Collective: every rank calls it at the same point. ASSAY_OK
 * (without a backend, *v is left as it is) or the backend's error. */
enum assay_status assay_shard_world_min(int64_t *v);

/* The rank and rank count of the running check's work: the world's inside
 * a sharded check, 0 and 1 elsewhere. */
int32_t assay_shard_rank(void);
int32_t assay_shard_size(void);

/* Whether item i (a request, a sequence, a category) is this rank's. */
bool assay_shard_mine(int64_t i);

/* The backend's allreduce for the running check (the identity outside a
 * sharded check). ASSAY_ERR_IO when another rank's part of the check has
 * ended (then every later collective of the check fails the same way). */
enum assay_status assay_shard_allreduce(void *buf, int64_t count, enum assay_shard_type type,
                                        enum assay_shard_op op);

/* The backend's allgatherv for the running check (outside one: *all is a
 * copy of mine). Errors as assay_shard_allreduce; *all is then NULL. */
enum assay_status assay_shard_allgatherv(const void *mine, int64_t bytes, void **all,
                                         int64_t *total);

/*
 * The text of the lowest key among the ranks: each rank passes the key of
 * the first finding of its items (INT64_MAX for none) and its text in buf;
 * buf becomes the text whose key is lowest (unchanged when every key is
 * INT64_MAX), so "the first" means the lowest index, as in one process.
 * Errors as assay_shard_allreduce.
 */
enum assay_status assay_shard_first_text(int64_t key, char *buf, size_t size);

/*
 * Around each check of a plan, on every rank, in the plan's order.
 * assay_shard_check_begin waits for every rank to reach the check (name,
 * of family) and returns whether this rank runs it: every rank when the
 * check shares its work (`shared`: assay_plan_item_shared), rank 0 alone
 * otherwise; a rank that does not run it gets res initialised for the
 * check. assay_shard_check_end, called by every rank after the
 * check (whether or not it ran it), ends the check's collectives and, for
 * a sharded check, brings every rank's result to rank 0: res becomes the
 * result of the rank where the check's part ended first when another
 * rank's was cut short by it (its failure says which rank), else the worst
 * verdict among the ranks (rank 0's on a tie: the same statistics). The
 * check's communication volume is kept for assay_shard_volume. Returns
 * ASSAY_ERR_IO when the communication failed.
 */
bool assay_shard_check_begin(const char *name, enum assay_family family, bool shared,
                             struct assay_check_result *res);
enum assay_status assay_shard_check_end(struct assay_check_result *res);

/* Whether the last check that ended was shared among more than one rank. */
bool assay_shard_last_shared(void);

/* The collectives of the last check that ended, the payload bytes this
 * rank sent in them, and those it received from the others' allgatherv. */
void assay_shard_volume(int64_t *n_collectives, int64_t *bytes, int64_t *bytes_in);

/*
 * A check's own process (checks/isolate.c). assay_shard_proxied says
 * whether the running check's collectives need the rank's process (a
 * sharded check in a run of more than one rank). In the check's process,
 * after fork, assay_shard_attach_child(fd) sends every collective over fd;
 * in the rank's process, assay_shard_serve(fd) performs one collective the
 * child asked for and answers it (ASSAY_ERR_IO when the child is gone: the
 * socket closed mid-message). When the child has ended, the rank's
 * process calls assay_shard_check_end as without a child.
 */
bool assay_shard_proxied(void);
void assay_shard_attach_child(int fd);
enum assay_status assay_shard_serve(int fd);

#endif
