/*
 * fuzz.h - differential fuzzing against the oracle: random configurations
 * of the bundled engine and random workloads, drawn to reach the corners
 * hand-made fixtures miss, each judged as the equivalence family and the
 * long run judge a fixture.
 *
 * A case is drawn from (seed, index) and the model's weights alone, so
 * case 17 of seed S is the same case on every machine. What it draws:
 *   - the engine: KV cache paged (block size 1 to 32), contiguous or off;
 *     prefix cache on or off; chunked prefill off, at a block multiple or
 *     any size; batch 1 to 16; speculation k 0 to 4 (three in four with a
 *     mostly accepted draft, draft=near:0.05); a pool from barely
 *     enough for the largest request (preemption) to roomy;
 *   - the requests: prompt lengths at, one below and one above block
 *     multiples, or anywhere; prompts that repeat an earlier one whole
 *     (fully cached, ending on a block boundary when its length is a
 *     multiple) or share a prefix with it (partly cached); groups of
 *     prompts of one length arriving in one step; arrivals on every step
 *     or in bursts; aborts after a number of steps (queued, prefilling,
 *     mid-chunk, decoding, preempted) or of tokens; stop tokens (a greedy request's from the
 *     oracle's greedy continuation: half of them the last token its length
 *     limit allows, so that stop and limit meet; in a speculating case an
 *     eighth of them the draft's proposal that a round rejects); greedy,
 *     seeded (seeds 0, 1, 2^31-1, 2^32, 2^53, 2^63, 2^64-1 among random
 *     ones) and unseeded sampled requests.
 * How a case is judged (two runs and a rerun at concurrency 1):
 *   - every greedy request's tokens are the oracle's (the tie rule), and
 *     every request is delivered whole (assay_check_equivalence);
 *   - every step is audited by the block model, the trace rules hold, and
 *     every greedy or seeded request yields at concurrency 1 the tokens it
 *     yielded in the run (assay_check_soak).
 * A failing case names its engine options and is written as a workload
 * file, so that `assay verify --engine 'bundled:OPTIONS' --check
 * equiv.fuzz --workload FILE` reruns it and the shrinker can cut it down.
 */
#ifndef ASSAY_FUZZ_H
#define ASSAY_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"
#include "../core/workload.h"
#include "equivalence.h"
#include "result.h"

/* One case: the engine options set over a base spec, and its workload. */
struct assay_fuzz_case {
    uint64_t seed;     /* the run's seed */
    int32_t index;     /* the case's number under it */
    char options[320]; /* "kv=paged,block=3,blocks=17,prefix=on,chunk=6,batch=4,spec=2" */
    bool pressed;      /* paged, with a pool smaller than all requests need at once */
    struct assay_workload *w;
};

/* Draw case `index` of `seed` for a model with vocabulary vocab and
 * context n_ctx. Returns ASSAY_OK, ASSAY_ERR_NOMEM, or ASSAY_ERR_INVALID
 * for a context too small to draw in (< 32). Free with
 * assay_fuzz_case_free. */
enum assay_status assay_fuzz_case_draw(uint64_t seed, int32_t index, int32_t vocab, int32_t n_ctx,
                                       struct assay_fuzz_case *c);
void assay_fuzz_case_free(struct assay_fuzz_case *c);

/*
 * Judge workload w on the engine `spec` (a bundled spec) against the
 * oracle's rows in memo, as described above; res gets FAIL with what
 * failed, or stays PASS; its figures (requests, tokens, ties, steps)
 * accumulate over calls. Returns ASSAY_OK when a verdict was reached,
 * ASSAY_ERR_NOMEM, or another status with res ERROR when the engine could
 * not be opened.
 */
enum assay_status assay_fuzz_judge(const char *spec, const struct assay_workload *w,
                                   struct assay_oracle_memo *memo, struct assay_check_result *res);

/* What a run of many cases covered. */
struct assay_fuzz_tally {
    int32_t cases;
    int32_t paged, prefix, chunked, speculating, pressed; /* cases with each */
    int64_t requests, aborted_by_step, aborted_by_tokens, seeded, greedy;
};

/*
 * Draw and judge cases first..first+n-1 of seed on base_spec (a bundled
 * spec; each case's options are set over it), stopping at the first
 * failure or after max_seconds (0: no limit) once at least one case ran.
 * On a failure, *failed gets the failing case (its workload kept; the
 * caller frees it) and res says which case and what failed. progress, when
 * not NULL, is called after every case.
 */
enum assay_status assay_fuzz_run(const char *base_spec, int32_t vocab, int32_t n_ctx,
                                 struct assay_oracle_memo *memo, uint64_t seed, int32_t first,
                                 int32_t n, double max_seconds,
                                 void (*progress)(void *ctx, int32_t done, int32_t n),
                                 void *progress_ctx, struct assay_fuzz_tally *tally,
                                 struct assay_fuzz_case *failed, struct assay_check_result *res);

#endif
