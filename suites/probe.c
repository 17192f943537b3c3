#include "probe.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

static void capture(void *ctx, uint64_t id, int32_t index, const float *logits, int32_t vocab)
{
    struct assay_probe *c = ctx;
    if (id == 1 && index >= 0 && index < ASSAY_PROBE_TOKENS && vocab == ASSAY_PROBE_VOCAB) {
        memcpy(c->logits[index], logits, sizeof c->logits[index]);
        c->seen[index] = true;
    }
}

void assay_probe_run(const struct assay_engine_params *params, bool crowd, struct assay_probe *c)
{
    int32_t prompt[40], other[90];
    for (int i = 0; i < 40; i++) {
        prompt[i] = (i * 13 + 1) % 256;
    }
    for (int i = 0; i < 90; i++) {
        other[i] = (i * 7 + 3) % 256;
    }
    memset(c, 0, sizeof *c);
    struct assay_engine_params p = *params;
    p.max_seq_len = 256;
    struct assay_engine *e;
    assert_int_equal(assay_engine_init(&e, &p, NULL), ASSAY_OK);
    assay_engine_set_logits_sink(e, capture, c);
    struct assay_request r = {1, prompt, 40, ASSAY_PROBE_TOKENS, -1, assay_sampling_greedy()};
    assert_int_equal(assay_engine_add_request(e, &r), ASSAY_OK);
    for (uint64_t k = 0; crowd && k < 12; k++) {
        struct assay_request o = {100 + k, other, 10 + (int32_t)k * 6, 30, -1,
                                  assay_sampling_greedy()};
        assert_int_equal(assay_engine_add_request(e, &o), ASSAY_OK);
    }
    while (assay_engine_has_work(e)) {
        const struct assay_event *ev;
        size_t n;
        assert_int_equal(assay_engine_step(e, &ev, &n), ASSAY_OK);
        for (size_t i = 0; i < n; i++) {
            if (ev[i].kind == ASSAY_EVENT_TOKEN && ev[i].request_id == 1 && ev[i].index >= 0 &&
                ev[i].index < ASSAY_PROBE_TOKENS) {
                c->tokens[ev[i].index] = ev[i].token;
            }
        }
    }
    assay_engine_free(e);
    for (int t = 0; t < ASSAY_PROBE_TOKENS; t++) {
        assert_true(c->seen[t]);
    }
}

double assay_probe_max_diff(const struct assay_probe *a, const struct assay_probe *b,
                            bool *tokens_differ)
{
    double md = 0.0;
    bool td = false;
    for (int t = 0; t < ASSAY_PROBE_TOKENS; t++) {
        td = td || a->tokens[t] != b->tokens[t];
        for (int v = 0; v < ASSAY_PROBE_VOCAB; v++) {
            double d = fabs((double)a->logits[t][v] - b->logits[t][v]);
            md = d > md || d != d ? d : md;
        }
    }
    if (tokens_differ != NULL) {
        *tokens_differ = td;
    }
    return md;
}

bool assay_probe_same_bits(const struct assay_probe *a, const struct assay_probe *b)
{
    return memcmp(a->logits, b->logits, sizeof a->logits) == 0;
}

uint64_t assay_probe_hash(const struct assay_probe *p)
{
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *bytes = (const unsigned char *)p->logits;
    for (size_t i = 0; i < sizeof p->logits; i++) {
        h = (h ^ bytes[i]) * 1099511628211ULL;
    }
    return h;
}

int64_t assay_probe_unequal_twins(const struct assay_probe *p)
{
    int64_t n = 0;
    for (int t = 0; t < ASSAY_PROBE_TOKENS; t++) {
        for (int v = 0; v + 1 < ASSAY_PROBE_VOCAB; v += 2) {
            n += memcmp(&p->logits[t][v], &p->logits[t][v + 1], sizeof(float)) != 0;
        }
    }
    return n;
}
