/*
 * equivalence.c - the equivalence family (equivalence.h): the oracle memo
 * (assay_oracle_memo_*, teacher-forced oracle logits kept by sequence, so a
 * sequence judged again is not computed again), the delivery rules
 * (assay_check_delivery), the tie rule (assay_tie) and
 * assay_check_equivalence, which runs a workload through the harness and
 * compares every greedy token with the oracle's argmax. Plan runners, the
 * fuzzer and the pairwise checks call it.
 */
#include "equivalence.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/clock.h"
#include "../core/rng.h"
#include "../oracles/oracle.h"
#include "shard.h"

struct memo_entry {
    uint64_t hash;
    int32_t *seq;   /* prompt then output */
    int32_t prompt_len;
    int32_t n_out;
    double *rows;   /* (n_out, vocab) */
};

struct assay_oracle_memo {
    struct assay_oracle *oracle;
    int32_t vocab;
    int32_t max_len;
    double *scratch; /* (max_len, vocab) */
    struct memo_entry *entries;
    int32_t n, cap;
};

enum assay_status assay_oracle_memo_init(struct assay_oracle_memo **out,
                                         const struct assay_model *model, int32_t max_len)
{
    *out = NULL;
    struct assay_oracle_memo *m = assay_calloc(1, sizeof *m);
    if (m == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    enum assay_status st = assay_oracle_init(&m->oracle, model, max_len);
    if (st != ASSAY_OK) {
        assay_free(m);
        return st;
    }
    m->vocab = model->cfg.vocab;
    m->max_len = max_len;
    m->scratch = assay_calloc((size_t)max_len * (size_t)m->vocab, sizeof(double));
    if (m->scratch == NULL) {
        assay_oracle_memo_free(m);
        return ASSAY_ERR_NOMEM;
    }
    *out = m;
    return ASSAY_OK;
}

enum assay_status assay_oracle_memo_set_threads(struct assay_oracle_memo *memo, int32_t n_threads)
{
    return assay_oracle_set_threads(memo->oracle, n_threads);
}

void assay_oracle_memo_free(struct assay_oracle_memo *m)
{
    if (m == NULL) {
        return;
    }
    for (int32_t i = 0; i < m->n; i++) {
        assay_free(m->entries[i].seq);
        assay_free(m->entries[i].rows);
    }
    assay_free(m->entries);
    assay_free(m->scratch);
    assay_oracle_free(m->oracle);
    assay_free(m);
}

/* Room for one more entry; false when memory ran out. */
static bool room_for_one(struct assay_oracle_memo *m)
{
    if (m->n < m->cap) {
        return true;
    }
    int32_t cap = m->cap > 0 ? 2 * m->cap : 64;
    struct memo_entry *grown = assay_realloc(m->entries, sizeof *grown * (size_t)cap);
    if (grown == NULL) {
        return false;
    }
    m->entries = grown;
    m->cap = cap;
    return true;
}

static uint64_t hash_seq(const int32_t *a, int32_t na, const int32_t *b, int32_t nb)
{
    uint64_t h = assay_mix64((uint64_t)na * 0x9e3779b97f4a7c15ULL + (uint64_t)nb);
    for (int32_t i = 0; i < na; i++) {
        h = assay_mix64(h ^ (uint32_t)a[i]);
    }
    for (int32_t i = 0; i < nb; i++) {
        h = assay_mix64(h ^ (uint32_t)b[i]);
    }
    return h;
}

/* The entry of prompt + out[0..n_out), or NULL. */
static struct memo_entry *find_entry(struct assay_oracle_memo *m, uint64_t h, const int32_t *prompt,
                                     int32_t prompt_len, const int32_t *out, int32_t n_out)
{
    for (int32_t i = 0; i < m->n; i++) {
        struct memo_entry *e = &m->entries[i];
        if (e->hash == h && e->prompt_len == prompt_len && e->n_out == n_out &&
            memcmp(e->seq, prompt, sizeof(int32_t) * (size_t)prompt_len) == 0 &&
            memcmp(e->seq + prompt_len, out, sizeof(int32_t) * (size_t)n_out) == 0) {
            return e;
        }
    }
    return NULL;
}

enum assay_status assay_oracle_memo_rows(struct assay_oracle_memo *m, const int32_t *prompt,
                                         int32_t prompt_len, const int32_t *out, int32_t n_out,
                                         const double **rows)
{
    *rows = NULL;
    if (prompt_len < 1 || n_out < 1 || prompt_len + n_out - 1 > m->max_len) {
        return ASSAY_ERR_INVALID;
    }
    uint64_t h = hash_seq(prompt, prompt_len, out, n_out);
    const struct memo_entry *found = find_entry(m, h, prompt, prompt_len, out, n_out);
    if (found != NULL) {
        *rows = found->rows;
        return ASSAY_OK;
    }
    if (!room_for_one(m)) {
        return ASSAY_ERR_NOMEM;
    }
    struct memo_entry e = {h, NULL, prompt_len, n_out, NULL};
    int32_t len = prompt_len + n_out;
    e.seq = assay_malloc(sizeof(int32_t) * (size_t)len);
    e.rows = assay_malloc(sizeof(double) * (size_t)n_out * (size_t)m->vocab);
    if (e.seq == NULL || e.rows == NULL) {
        assay_free(e.seq);
        assay_free(e.rows);
        return ASSAY_ERR_NOMEM;
    }
    memcpy(e.seq, prompt, sizeof(int32_t) * (size_t)prompt_len);
    memcpy(e.seq + prompt_len, out, sizeof(int32_t) * (size_t)n_out);
    /* The last output token is predicted by the row before it; it never
     * needs to be fed. Only the rows from the prompt's last on are wanted. */
    const int32_t *seq = e.seq;
    int32_t fed = len - 1, from = prompt_len - 1;
    enum assay_status st =
        assay_oracle_logits_batch_from(m->oracle, 1, &seq, &fed, &from, e.rows);
    if (st != ASSAY_OK) {
        assay_free(e.seq);
        assay_free(e.rows);
        return st;
    }
    m->entries[m->n++] = e;
    *rows = e.rows;
    return ASSAY_OK;
}

enum assay_status assay_oracle_memo_prefetch(struct assay_oracle_memo *m, int32_t n,
                                             const int32_t *const *prompts,
                                             const int32_t *prompt_lens,
                                             const int32_t *const *outs, const int32_t *n_outs)
{
    enum { BATCH = 64 };
    const int32_t *seqs[BATCH];
    int32_t lens[BATCH], from[BATCH];
    struct memo_entry pending[BATCH];
    int32_t n_pending = 0, total = 0;
    enum assay_status st = ASSAY_OK;
    for (int32_t i = 0; i <= n && st == ASSAY_OK; i++) {
        struct memo_entry e = {0, NULL, 0, 0, NULL};
        bool wanted = false;
        if (i < n && prompt_lens[i] >= 1 && n_outs[i] >= 1 &&
            prompt_lens[i] + n_outs[i] - 1 <= m->max_len) {
            e.hash = hash_seq(prompts[i], prompt_lens[i], outs[i], n_outs[i]);
            wanted = find_entry(m, e.hash, prompts[i], prompt_lens[i], outs[i], n_outs[i]) == NULL;
            for (int32_t k = 0; wanted && k < n_pending; k++) {
                wanted = !(pending[k].hash == e.hash && pending[k].prompt_len == prompt_lens[i] &&
                           pending[k].n_out == n_outs[i] &&
                           memcmp(pending[k].seq, prompts[i],
                                  sizeof(int32_t) * (size_t)prompt_lens[i]) == 0 &&
                           memcmp(pending[k].seq + prompt_lens[i], outs[i],
                                  sizeof(int32_t) * (size_t)n_outs[i]) == 0);
            }
        }
        int32_t len = wanted ? prompt_lens[i] + n_outs[i] - 1 : 0;
        /* Run what is pending when this one does not fit, or at the end. */
        if (n_pending > 0 && (i == n || n_pending == BATCH || total + len > m->max_len)) {
            for (int32_t k = 0; k < n_pending; k++) {
                from[k] = pending[k].prompt_len - 1;
            }
            st = assay_oracle_logits_batch_from(m->oracle, n_pending, seqs, lens, from, m->scratch);
            for (int32_t k = 0, at = 0; k < n_pending; at += pending[k].n_out, k++) {
                struct memo_entry *p = &pending[k];
                if (st == ASSAY_OK && room_for_one(m)) {
                    memcpy(p->rows, m->scratch + (int64_t)at * m->vocab,
                           sizeof(double) * (size_t)p->n_out * (size_t)m->vocab);
                    m->entries[m->n++] = *p;
                } else {
                    st = st != ASSAY_OK ? st : ASSAY_ERR_NOMEM;
                    assay_free(p->seq);
                    assay_free(p->rows);
                }
            }
            n_pending = 0;
            total = 0;
        }
        if (!wanted || st != ASSAY_OK) {
            continue;
        }
        e.prompt_len = prompt_lens[i];
        e.n_out = n_outs[i];
        e.seq = assay_malloc(sizeof(int32_t) * (size_t)(prompt_lens[i] + n_outs[i]));
        e.rows = assay_malloc(sizeof(double) * (size_t)n_outs[i] * (size_t)m->vocab);
        if (e.seq == NULL || e.rows == NULL) {
            assay_free(e.seq);
            assay_free(e.rows);
            st = ASSAY_ERR_NOMEM;
            continue;
        }
        memcpy(e.seq, prompts[i], sizeof(int32_t) * (size_t)prompt_lens[i]);
        memcpy(e.seq + prompt_lens[i], outs[i], sizeof(int32_t) * (size_t)n_outs[i]);
        seqs[n_pending] = e.seq;
        lens[n_pending] = len;
        pending[n_pending++] = e;
        total += len;
    }
    /* What an error left pending is never computed. */
    for (int32_t k = 0; k < n_pending; k++) {
        assay_free(pending[k].seq);
        assay_free(pending[k].rows);
    }
    return st;
}

enum assay_status assay_oracle_memo_greedy(struct assay_oracle_memo *memo, const int32_t *prompt,
                                           int32_t prompt_len, int32_t vocab, int32_t n,
                                           int32_t *out)
{
    for (int32_t t = 0; t < n; t++) {
        const double *rows = NULL;
        out[t] = 0;
        enum assay_status st = assay_oracle_memo_rows(memo, prompt, prompt_len, out, t + 1, &rows);
        if (st != ASSAY_OK) {
            return st;
        }
        const double *row = rows + (int64_t)t * vocab;
        int32_t best = 0;
        for (int32_t x = 1; x < vocab; x++) {
            best = row[x] > row[best] ? x : best;
        }
        out[t] = best;
    }
    return ASSAY_OK;
}

static int32_t argmax_d(const double *x, int32_t n)
{
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++) {
        if (x[i] > x[best]) {
            best = i;
        }
    }
    return best;
}

/* The argmax of each of the k pending sequences' rows in m->scratch (as
 * one batched pass left them) into their argmax arrays. */
static void scratch_argmax(const struct assay_oracle_memo *m, int32_t k, const int32_t *n_outs,
                           int32_t *const *dst)
{
    int64_t at = 0;
    for (int32_t j = 0; j < k; j++) {
        for (int32_t r = 0; r < n_outs[j]; r++, at++) {
            dst[j][r] = argmax_d(m->scratch + at * m->vocab, m->vocab);
        }
    }
}

enum assay_status assay_oracle_memo_argmax(struct assay_oracle_memo *m, int32_t n,
                                           const int32_t *const *prompts,
                                           const int32_t *prompt_lens,
                                           const int32_t *const *outs, const int32_t *n_outs,
                                           int32_t *const *argmax)
{
    enum { BATCH = 64 };
    const int32_t *seqs[BATCH];
    int32_t *joined[BATCH], *dst[BATCH];
    int32_t lens[BATCH], from[BATCH], outs_k[BATCH];
    int32_t k = 0, total = 0;
    enum assay_status st = ASSAY_OK;
    for (int32_t i = 0; i <= n && st == ASSAY_OK; i++) {
        int32_t len = 0;
        if (i < n) {
            if (prompt_lens[i] < 1 || n_outs[i] < 1 ||
                prompt_lens[i] + n_outs[i] - 1 > m->max_len) {
                st = ASSAY_ERR_INVALID;
                break;
            }
            const struct memo_entry *held =
                find_entry(m, hash_seq(prompts[i], prompt_lens[i], outs[i], n_outs[i]), prompts[i],
                           prompt_lens[i], outs[i], n_outs[i]);
            if (held != NULL) {
                for (int32_t r = 0; r < n_outs[i]; r++) {
                    argmax[i][r] = argmax_d(held->rows + (int64_t)r * m->vocab, m->vocab);
                }
                continue;
            }
            len = prompt_lens[i] + n_outs[i] - 1;
        }
        /* Run what is pending when this one does not fit, or at the end. */
        if (k > 0 && (i == n || k == BATCH || total + len > m->max_len)) {
            st = assay_oracle_logits_batch_from(m->oracle, k, seqs, lens, from, m->scratch);
            if (st == ASSAY_OK) {
                scratch_argmax(m, k, outs_k, dst);
            }
            for (int32_t j = 0; j < k; j++) {
                assay_free(joined[j]);
            }
            k = 0;
            total = 0;
        }
        if (i == n || st != ASSAY_OK) {
            continue;
        }
        joined[k] = assay_malloc(sizeof(int32_t) * (size_t)(prompt_lens[i] + n_outs[i]));
        if (joined[k] == NULL) {
            st = ASSAY_ERR_NOMEM;
            continue;
        }
        memcpy(joined[k], prompts[i], sizeof(int32_t) * (size_t)prompt_lens[i]);
        memcpy(joined[k] + prompt_lens[i], outs[i], sizeof(int32_t) * (size_t)n_outs[i]);
        seqs[k] = joined[k];
        lens[k] = len;
        from[k] = prompt_lens[i] - 1;
        outs_k[k] = n_outs[i];
        dst[k++] = argmax[i];
        total += len;
    }
    for (int32_t j = 0; j < k; j++) { /* what an error left pending */
        assay_free(joined[j]);
    }
    return st;
}

int32_t assay_oracle_memo_count(const struct assay_oracle_memo *m)
{
    return m->n;
}

/* One entry as assay_oracle_memo_read reads it. */
static bool write_entry(FILE *f, const struct memo_entry *e, int32_t vocab)
{
    size_t len = (size_t)(e->prompt_len + e->n_out);
    size_t n_rows = (size_t)e->n_out * (size_t)vocab;
    return fwrite(&e->hash, sizeof e->hash, 1, f) == 1 &&
           fwrite(&e->prompt_len, sizeof e->prompt_len, 1, f) == 1 &&
           fwrite(&e->n_out, sizeof e->n_out, 1, f) == 1 &&
           fwrite(e->seq, sizeof(int32_t), len, f) == len &&
           fwrite(e->rows, sizeof(double), n_rows, f) == n_rows;
}

enum assay_status assay_oracle_memo_write(const struct assay_oracle_memo *m, int32_t from, FILE *f)
{
    int32_t n = from >= 0 && from < m->n ? m->n - from : 0;
    bool ok = fwrite(&m->vocab, sizeof m->vocab, 1, f) == 1 && fwrite(&n, sizeof n, 1, f) == 1;
    for (int32_t i = m->n - n; ok && i < m->n; i++) {
        ok = write_entry(f, &m->entries[i], m->vocab);
    }
    return ok ? ASSAY_OK : ASSAY_ERR_IO;
}

enum assay_status assay_oracle_memo_read(struct assay_oracle_memo *m, FILE *f)
{
    int32_t vocab = 0, n = 0;
    if (fread(&vocab, sizeof vocab, 1, f) != 1 || fread(&n, sizeof n, 1, f) != 1 ||
        vocab != m->vocab || n < 0) {
        return ASSAY_ERR_IO;
    }
    for (int32_t i = 0; i < n; i++) {
        struct memo_entry e = {0, NULL, 0, 0, NULL};
        if (fread(&e.hash, sizeof e.hash, 1, f) != 1 ||
            fread(&e.prompt_len, sizeof e.prompt_len, 1, f) != 1 ||
            fread(&e.n_out, sizeof e.n_out, 1, f) != 1 || e.prompt_len < 1 || e.n_out < 1 ||
            e.prompt_len + e.n_out - 1 > m->max_len) {
            return ASSAY_ERR_IO;
        }
        if (!room_for_one(m)) {
            return ASSAY_ERR_NOMEM;
        }
        size_t len = (size_t)(e.prompt_len + e.n_out);
        size_t n_rows = (size_t)e.n_out * (size_t)m->vocab;
        e.seq = assay_malloc(sizeof(int32_t) * len);
        e.rows = assay_malloc(sizeof(double) * n_rows);
        enum assay_status st = e.seq != NULL && e.rows != NULL ? ASSAY_OK : ASSAY_ERR_NOMEM;
        if (st == ASSAY_OK && (fread(e.seq, sizeof(int32_t), len, f) != len ||
                               fread(e.rows, sizeof(double), n_rows, f) != n_rows)) {
            st = ASSAY_ERR_IO;
        }
        if (st != ASSAY_OK) {
            assay_free(e.seq);
            assay_free(e.rows);
            return st;
        }
        m->entries[m->n++] = e;
    }
    return ASSAY_OK;
}

/* ---- the oracle's passes shared among the ranks (checks/shard.h) -------- */

/* The rows one exchange carries at most (with the sequence list it is
 * cut from, the same on every rank): a bound on a collective's payload
 * and on what a rank holds of the others' rows at once. */
#define SHARED_ROWS_BYTES ((int64_t)256 << 20)
/* The most one rank sends in one exchange (a sequence longer than the
 * bound above goes alone); beyond it rank 0 computes the rows itself, so
 * that no exchange nears a collective's 2 GB. */
#define SHARED_SEND_MAX ((int64_t)1 << 30)

/* Rank 0's sequences as every rank reads them: m, then per sequence its
 * prompt length, its output count and its tokens. */
struct shared_list {
    int32_t m;
    const int32_t **prompts, **outs;
    int32_t *prompt_lens, *n_outs;
};

static void shared_list_free(struct shared_list *l)
{
    assay_free(l->prompts);
    assay_free(l->outs);
    assay_free(l->prompt_lens);
    assay_free(l->n_outs);
    memset(l, 0, sizeof *l);
}

/* Rank 0: the sequences its memo lacks, each once, laid out for the
 * others into *buf (assay_malloc'd) of *bytes. */
static enum assay_status shared_pack(struct assay_oracle_memo *m, int32_t n,
                                     const int32_t *const *prompts, const int32_t *prompt_lens,
                                     const int32_t *const *outs, const int32_t *n_outs,
                                     int32_t **buf, int64_t *bytes)
{
    int64_t words = 1;
    for (int32_t i = 0; i < n; i++) {
        words += 2 + (int64_t)prompt_lens[i] + n_outs[i];
    }
    int32_t *b = assay_malloc(sizeof(int32_t) * (size_t)words);
    if (b == NULL) {
        return ASSAY_ERR_NOMEM;
    }
    int64_t at = 1;
    int32_t m_kept = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t pl = prompt_lens[i], no = n_outs[i];
        if (pl < 1 || no < 1 || pl + no - 1 > m->max_len) {
            continue; /* its lookup says why */
        }
        uint64_t h = hash_seq(prompts[i], pl, outs[i], no);
        bool wanted = find_entry(m, h, prompts[i], pl, outs[i], no) == NULL;
        for (int32_t k = 0; wanted && k < i; k++) {
            wanted = !(prompt_lens[k] == pl && n_outs[k] == no &&
                       memcmp(prompts[k], prompts[i], sizeof(int32_t) * (size_t)pl) == 0 &&
                       memcmp(outs[k], outs[i], sizeof(int32_t) * (size_t)no) == 0);
        }
        if (!wanted) {
            continue;
        }
        b[at++] = pl;
        b[at++] = no;
        memcpy(b + at, prompts[i], sizeof(int32_t) * (size_t)pl);
        at += pl;
        memcpy(b + at, outs[i], sizeof(int32_t) * (size_t)no);
        at += no;
        m_kept++;
    }
    b[0] = m_kept;
    *buf = b;
    *bytes = (int64_t)sizeof(int32_t) * at;
    return ASSAY_OK;
}

/* Every rank: the list rank 0 packed (pointers into buf). ASSAY_ERR_IO
 * when it does not read as one. */
static enum assay_status shared_unpack(const struct assay_oracle_memo *m, const int32_t *buf,
                                       int64_t bytes, struct shared_list *l)
{
    memset(l, 0, sizeof *l);
    int64_t words = bytes / (int64_t)sizeof(int32_t);
    if (words < 1 || buf[0] < 0 || buf[0] > words) {
        return ASSAY_ERR_IO;
    }
    size_t n = (size_t)buf[0] + 1;
    l->prompts = assay_calloc(n, sizeof *l->prompts);
    l->outs = assay_calloc(n, sizeof *l->outs);
    l->prompt_lens = assay_calloc(n, sizeof *l->prompt_lens);
    l->n_outs = assay_calloc(n, sizeof *l->n_outs);
    if (l->prompts == NULL || l->outs == NULL || l->prompt_lens == NULL || l->n_outs == NULL) {
        shared_list_free(l);
        return ASSAY_ERR_NOMEM;
    }
    int64_t at = 1;
    for (int32_t i = 0; i < buf[0]; i++) {
        int32_t pl = at + 2 <= words ? buf[at] : 0, no = at + 2 <= words ? buf[at + 1] : 0;
        if (pl < 1 || no < 1 || pl + no - 1 > m->max_len || at + 2 + pl + no > words) {
            shared_list_free(l);
            return ASSAY_ERR_IO;
        }
        l->prompt_lens[i] = pl;
        l->n_outs[i] = no;
        l->prompts[i] = buf + at + 2;
        l->outs[i] = buf + at + 2 + pl;
        at += 2 + pl + no;
    }
    l->m = buf[0];
    return ASSAY_OK;
}

/* One exchange: this rank's share of l's sequences [lo, hi) computed
 * (moved to the front of the range: l's order there is lost), and the rows
 * of the others' shares read into rank 0's memo. Only a
 * collective's failure is returned: a row this rank could not compute is
 * left out, and rank 0 computes it at its lookup. */
static enum assay_status shared_round(struct assay_oracle_memo *m, struct shared_list *l,
                                      int32_t lo, int32_t hi)
{
    const int32_t rank = assay_shard_rank(), size = assay_shard_size();
    int32_t k = 0;
    for (int32_t i = lo; i < hi; i++) {
        if (assay_shard_mine(i)) {
            l->prompts[lo + k] = l->prompts[i];
            l->outs[lo + k] = l->outs[i];
            l->prompt_lens[lo + k] = l->prompt_lens[i];
            l->n_outs[lo + k] = l->n_outs[i];
            k++;
        }
    }
    (void)assay_oracle_memo_prefetch(m, k, l->prompts + lo, l->prompt_lens + lo, l->outs + lo,
                                     l->n_outs + lo);
    char *mine = NULL;
    int64_t mine_len = 0;
    if (rank != 0) {
        /* Each found by lookup: a sequence an earlier check left in this
         * rank's memo was not computed again, and is sent all the same. */
        const struct memo_entry **es = assay_calloc((size_t)k + 1, sizeof *es);
        int32_t found = 0;
        int64_t len = (int64_t)(sizeof m->vocab + sizeof found);
        for (int32_t j = 0; es != NULL && j < k; j++) {
            const int32_t *p = l->prompts[lo + j], *o = l->outs[lo + j];
            int32_t pl = l->prompt_lens[lo + j], no = l->n_outs[lo + j];
            const struct memo_entry *e = find_entry(m, hash_seq(p, pl, o, no), p, pl, o, no);
            if (e != NULL) {
                es[found++] = e;
                len += (int64_t)(sizeof e->hash + 2 * sizeof(int32_t)) +
                       (int64_t)sizeof(int32_t) * (pl + no) +
                       (int64_t)sizeof(double) * no * m->vocab;
            }
        }
        /* Written as assay_oracle_memo_write writes, into a buffer of the
         * exact size (one byte more for fmemopen's closing NUL). */
        mine = es != NULL && len <= SHARED_SEND_MAX ? assay_malloc((size_t)len + 1) : NULL;
        FILE *f = mine != NULL ? fmemopen(mine, (size_t)len + 1, "w") : NULL;
        bool ok = f != NULL && fwrite(&m->vocab, sizeof m->vocab, 1, f) == 1 &&
                  fwrite(&found, sizeof found, 1, f) == 1;
        for (int32_t j = 0; ok && j < found; j++) {
            ok = write_entry(f, es[j], m->vocab);
        }
        ok = f != NULL && fclose(f) == 0 && ok;
        mine_len = ok ? len : 0; /* else rank 0 computes this share itself */
        assay_free(es);
    }
    void *all = NULL;
    int64_t total = 0;
    enum assay_status st = assay_shard_allgatherv(mine, mine_len, &all, &total);
    assay_free(mine);
    if (st == ASSAY_OK && rank == 0 && total > 0) {
        FILE *f = fmemopen(all, (size_t)total, "rb");
        for (int32_t r = 1; f != NULL && r < size && ftell(f) < total; r++) {
            if (assay_oracle_memo_read(m, f) != ASSAY_OK) {
                break; /* what was read stays; the rest is computed at its lookup */
            }
        }
        if (f != NULL) {
            fclose(f);
        }
    }
    assay_free(all);
    return st;
}

enum assay_status assay_oracle_memo_prefetch_shared(struct assay_oracle_memo *m, int32_t n,
                                                    const int32_t *const *prompts,
                                                    const int32_t *prompt_lens,
                                                    const int32_t *const *outs,
                                                    const int32_t *n_outs)
{
    if (assay_shard_size() == 1) {
        (void)assay_oracle_memo_prefetch(m, n, prompts, prompt_lens, outs, n_outs);
        return ASSAY_OK;
    }
    int32_t *packed = NULL;
    int64_t bytes = 0;
    if (assay_shard_rank() == 0 &&
        shared_pack(m, n, prompts, prompt_lens, outs, n_outs, &packed, &bytes) != ASSAY_OK) {
        bytes = 0; /* the others learn of nothing; rank 0 computes at its lookups */
    }
    void *all = NULL;
    int64_t total = 0;
    enum assay_status st = assay_shard_allgatherv(packed, bytes, &all, &total);
    assay_free(packed);
    struct shared_list l = {0, NULL, NULL, NULL, NULL};
    if (st == ASSAY_OK && total > 0) {
        st = shared_unpack(m, all, total, &l);
        if (st == ASSAY_ERR_IO) {
            st = ASSAY_OK; /* every rank read the same bytes: every rank goes on alike */
        }
    }
    /* The same cuts on every rank: each exchange's rows within the bound. */
    const int64_t row_bytes = (int64_t)sizeof(double) * m->vocab;
    for (int32_t lo = 0; st == ASSAY_OK && lo < l.m;) {
        int32_t hi = lo + 1;
        int64_t held = row_bytes * l.n_outs[lo];
        while (hi < l.m && held + row_bytes * l.n_outs[hi] <= SHARED_ROWS_BYTES) {
            held += row_bytes * l.n_outs[hi++];
        }
        st = shared_round(m, &l, lo, hi);
        lo = hi;
    }
    shared_list_free(&l);
    assay_free(all);
    return st;
}

int32_t assay_check_delivery(const struct assay_workload *w, const struct assay_transcript *t,
                             char *msg, size_t size)
{
    for (int32_t i = 0; i < w->n; i++) {
        const struct assay_workload_request *wr = &w->reqs[i];
        const struct assay_transcript_req *q = &t->reqs[i];
        unsigned long long id = (unsigned long long)wr->id;
        if (q->submit_status != ASSAY_OK) {
            snprintf(msg, size, "request %llu was rejected: %s", id,
                     assay_status_str((enum assay_status)q->submit_status));
            return i;
        }
        if (q->n_finish != 1) {
            snprintf(msg, size, "request %llu finished %d times (expected once)", id,
                     (int)q->n_finish);
            return i;
        }
        if (q->reason == ASSAY_FINISH_ERROR) {
            snprintf(msg, size, "request %llu finished with an error (%s%s%s)", id,
                     assay_status_str((enum assay_status)q->error), q->message[0] != '\0' ? ": " : "",
                     q->message);
            return i;
        }
        int32_t n = q->n_events < q->cap ? q->n_events : q->cap;
        for (int32_t j = 0; j < n; j++) {
            if (q->index[j] != j) {
                bool again = q->index[j] < j;
                snprintf(msg, size,
                         "request %llu: event %d carries output position %d%s (expected %d)", id,
                         (int)j, (int)q->index[j], again ? ", delivered before" : "", (int)j);
                return i;
            }
        }
        if (q->finish_index != q->n_events) {
            snprintf(msg, size, "request %llu: FINISH reports %d tokens, %d were delivered", id,
                     (int)q->finish_index, (int)q->n_events);
            return i;
        }
        if (q->aborted) {
            if (q->n_events > wr->max_tokens) {
                snprintf(msg, size, "request %llu: %d tokens delivered, max_tokens is %d", id,
                         (int)q->n_events, (int)wr->max_tokens);
                return i;
            }
            continue;
        }
        if (q->reason == ASSAY_FINISH_ABORT) {
            snprintf(msg, size, "request %llu finished as aborted; nobody aborted it", id);
            return i;
        }
        bool stopped = q->reason == ASSAY_FINISH_STOP;
        if (stopped && (n == 0 || q->tokens[n - 1] != wr->stop_token || n > wr->max_tokens)) {
            snprintf(msg, size, "request %llu: finished on a stop token it did not deliver", id);
            return i;
        }
        if (!stopped && q->n_events != wr->max_tokens) {
            snprintf(msg, size, "request %llu: %d tokens delivered, expected max_tokens = %d", id,
                     (int)q->n_events, (int)wr->max_tokens);
            return i;
        }
        if (stopped) {
            for (int32_t j = 0; j + 1 < n; j++) {
                if (q->tokens[j] == wr->stop_token) {
                    snprintf(msg, size, "request %llu: went on after its stop token at %d", id,
                             (int)j);
                    return i;
                }
            }
        }
    }
    return -1;
}

bool assay_tie(const double *row, int32_t vocab, int32_t a, int32_t b, double tol, double *gap)
{
    double g = NAN;
    bool tie = false;
    if (a >= 0 && a < vocab && b >= 0 && b < vocab) {
        double best = row[0];
        for (int32_t v = 1; v < vocab; v++) {
            best = row[v] > best ? row[v] : best;
        }
        double ga = best - row[a], gb = best - row[b];
        g = ga > gb ? ga : gb;
        tie = a == b || g <= tol; /* false for a NaN gap */
    }
    if (gap != NULL) {
        *gap = g;
    }
    return tie;
}

/* The greedy requests' tokens as the loop below reads them: at most
 * max_tokens and what was captured; 0 for a sampled request. */
static int32_t greedy_tokens(const struct assay_workload_request *wr,
                             const struct assay_transcript_req *q)
{
    int32_t n = q->n_events;
    n = n > wr->max_tokens ? wr->max_tokens : n;
    n = n > q->cap ? q->cap : n;
    return wr->sampling.temperature > 0.0f ? 0 : n;
}

/* The oracle's rows of every greedy request of the transcript (t NULL:
 * none, on a rank other than 0), computed in batched passes, shared among
 * the ranks of a shared check, before the requests are judged one by one
 * (each lookup then finds its rows; one that cannot be prefetched is
 * computed, or fails, at its lookup as before). Returns ASSAY_OK or a
 * collective's failure (assay_oracle_memo_prefetch_shared). */
static enum assay_status prefetch_greedy(struct assay_oracle_memo *memo,
                                         const struct assay_workload *w,
                                         const struct assay_transcript *t)
{
    const int32_t **prompts = assay_calloc((size_t)w->n + 1, sizeof *prompts);
    const int32_t **outs = assay_calloc((size_t)w->n + 1, sizeof *outs);
    int32_t *prompt_lens = assay_calloc((size_t)w->n + 1, sizeof *prompt_lens);
    int32_t *n_outs = assay_calloc((size_t)w->n + 1, sizeof *n_outs);
    int32_t n = 0;
    for (int32_t i = 0; prompts != NULL && outs != NULL && prompt_lens != NULL && n_outs != NULL &&
                        t != NULL && i < w->n;
         i++) {
        int32_t k = greedy_tokens(&w->reqs[i], &t->reqs[i]);
        if (k > 0) {
            prompts[n] = w->reqs[i].prompt;
            prompt_lens[n] = w->reqs[i].prompt_len;
            outs[n] = t->reqs[i].tokens;
            n_outs[n++] = k;
        }
    }
    enum assay_status st =
        assay_oracle_memo_prefetch_shared(memo, n, prompts, prompt_lens, outs, n_outs);
    assay_free(prompts);
    assay_free(outs);
    assay_free(prompt_lens);
    assay_free(n_outs);
    return st;
}

enum assay_status assay_check_equivalence(const struct assay_adapter *a,
                                          const struct assay_workload *w,
                                          struct assay_oracle_memo *memo,
                                          const struct assay_equiv_opts *opts,
                                          struct assay_check_result *res)
{
    int64_t t0 = assay_now_ns();
    double tol = opts != NULL && opts->tie_tol > 0 ? opts->tie_tol : ASSAY_EQUIV_TIE_TOL;
    res->tie_tol = tol;
    res->max_tie_gap = 0.0;
    struct assay_harness_opts ho;
    memset(&ho, 0, sizeof ho);
    ho.capture_logits = true;
    if (opts != NULL) {
        ho.hook = opts->hook;
        ho.hook_ctx = opts->hook_ctx;
        ho.max_steps = opts->max_steps;
    }
    struct assay_transcript *t = NULL;
    if (assay_shard_rank() != 0) {
        /* A shared check under MPI: rank 0 runs the engine and judges; this
         * rank computes its share of the oracle's passes over rank 0's
         * transcript. Its result is a PASS only when every exchange took
         * place (rank 0's then stands, checks/shard.h). */
        enum assay_status st = prefetch_greedy(memo, w, NULL);
        if (st != ASSAY_OK) {
            assay_check_error(res, "could not share the oracle's passes: %s",
                              assay_status_str(st));
        }
        snprintf(res->summary, sizeof res->summary,
                 "rank %d of %d: its share of the oracle's passes", (int)assay_shard_rank(),
                 (int)assay_shard_size());
        res->seconds = (double)(assay_now_ns() - t0) / 1e9;
        return st;
    }
    enum assay_status st = assay_harness_run(a, w, &ho, &t);
    if (st != ASSAY_OK) {
        assay_check_error(res, "could not run the workload: %s", assay_status_str(st));
        return st;
    }
    res->n_requests = w->n;
    if (t->status != ASSAY_OK) {
        assay_check_fail(res, "%s", t->error);
    }
    char msg[512];
    if (res->verdict == ASSAY_VERDICT_PASS && assay_check_delivery(w, t, msg, sizeof msg) >= 0) {
        assay_check_fail(res, "%s", msg);
    }
    double max_diff = t->logits_captured ? 0.0 : NAN;
    int32_t vocab = memo->vocab;
    int32_t n_bad = 0;
    st = prefetch_greedy(memo, w, t);
    if (st != ASSAY_OK) {
        assay_check_error(res, "could not share the oracle's passes: %s", assay_status_str(st));
        assay_transcript_free(t);
        res->seconds = (double)(assay_now_ns() - t0) / 1e9;
        return st;
    }
    for (int32_t i = 0; i < w->n && st == ASSAY_OK; i++) {
        const struct assay_workload_request *wr = &w->reqs[i];
        const struct assay_transcript_req *q = &t->reqs[i];
        int32_t n = greedy_tokens(wr, q);
        if (n == 0) {
            continue; /* a sampled request is not the argmax: the distributional family's */
        }
        const double *rows;
        st = assay_oracle_memo_rows(memo, wr->prompt, wr->prompt_len, q->tokens, n, &rows);
        if (st != ASSAY_OK) {
            break;
        }
        for (int32_t j = 0; j < n; j++) {
            const double *row = rows + (int64_t)j * vocab;
            int32_t mine = q->tokens[j];
            int32_t best = argmax_d(row, vocab);
            if (t->logits_captured && q->has_logits[j]) {
                const float *el = q->logits + (int64_t)j * vocab;
                for (int32_t v = 0; v < vocab; v++) {
                    double d = fabs((double)el[v] - row[v]);
                    max_diff = d > max_diff || isnan(d) ? d : max_diff;
                }
            }
            res->n_tokens++;
            if (mine == best) {
                continue;
            }
            double gap;
            if (assay_tie(row, vocab, mine, best, tol, &gap)) {
                res->n_ties++;
                res->max_tie_gap = gap > res->max_tie_gap ? gap : res->max_tie_gap;
                continue;
            }
            if (n_bad++ == 0 && res->verdict == ASSAY_VERDICT_PASS) {
                assay_check_fail(
                    res,
                    "request %llu, output position %d: engine token %d (oracle logit %.6f), "
                    "oracle token %d (logit %.6f); gap %.6f > tie tolerance %g",
                    (unsigned long long)wr->id, (int)j, (int)mine, row[mine], (int)best, row[best],
                    gap, tol);
            }
            break; /* teacher forcing past a real divergence means nothing */
        }
    }
    res->max_logit_diff = max_diff;
    if (st != ASSAY_OK) {
        assay_check_error(res, "the oracle could not run: %s", assay_status_str(st));
    }
    snprintf(res->summary, sizeof res->summary,
             "%lld requests, %lld tokens compared with the oracle; %d ties within %g (largest "
             "gap %.2g); largest |engine - oracle| logit %.3g%s",
             (long long)res->n_requests, (long long)res->n_tokens, (int)res->n_ties, tol,
             res->max_tie_gap, max_diff, n_bad > 1 ? "; more requests diverge" : "");
    assay_transcript_free(t);
    res->seconds = (double)(assay_now_ns() - t0) / 1e9;
    return st;
}
