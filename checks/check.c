/*
 * check.c - what every check shares, whatever command runs it (check.h):
 * assay_plan_param reads one key of a plan item's "k=v,..." parameters,
 * assay_needs_str names a set of needs, and assay_target_meets compares a
 * check's needs with its target's capabilities, making the result SKIP with
 * the reason when they fall short. Called by the executor (context.c), the
 * plan's runners and the audit before a check runs.
 */
#include "check.h"

#include <stdio.h>
#include <string.h>

static const struct {
    unsigned need;
    const char *word;
    const char *who_has_it; /* what provides it, for the reason of a SKIP */
} k_needs[ASSAY_NEED_COUNT] = {
    {ASSAY_NEED_WEIGHTS, "weights",
     "the weights for the oracle: the bundled engine has them; for a server serving a GGUF "
     "file, assay audit --url URL --model FILE.gguf; for compare, --model FILE.gguf"},
    {ASSAY_NEED_LOGITS, "logits", "the engine's logits (an adapter with set_logits_sink)"},
    {ASSAY_NEED_BLOCKS, "blocks", "block snapshots (an adapter with block_audit)"},
    {ASSAY_NEED_METRICS, "metrics", "the server's /metrics gauges"},
    {ASSAY_NEED_SEEDS, "seeds", "per-request seeds that reproduce a sample"},
    {ASSAY_NEED_BASELINE, "baseline", "a baseline engine to compare with (assay compare)"},
    {ASSAY_NEED_BUNDLED, "bundled",
     "the bundled engine itself, to run other configurations of it (a draft model, a "
     "second configuration)"},
    {ASSAY_NEED_SERVER, "server", "an OpenAI-compatible server (assay audit --url URL)"},
};

char *assay_plan_param(const char *params, const char *key, char *buf, size_t size)
{
    buf[0] = '\0';
    size_t kl = strlen(key);
    for (const char *s = params; s != NULL && *s != '\0';) {
        const char *comma = strchr(s, ',');
        size_t len = comma != NULL ? (size_t)(comma - s) : strlen(s);
        if (len > kl && strncmp(s, key, kl) == 0 && s[kl] == '=') {
            size_t vl = len - kl - 1;
            snprintf(buf, size, "%.*s", (int)(vl < size ? vl : size - 1), s + kl + 1);
            return buf;
        }
        s = comma != NULL ? comma + 1 : NULL;
    }
    return buf;
}

char *assay_needs_str(unsigned needs, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < ASSAY_NEED_COUNT && len < size; i++) {
        if ((needs & k_needs[i].need) != 0) {
            len += (size_t)snprintf(buf + len, size - len, "%s%s", len > 0 ? ", " : "",
                                    k_needs[i].word);
        }
    }
    if (buf[0] == '\0') {
        snprintf(buf, size, "nothing");
    }
    return buf;
}

bool assay_plan_item_shared(const struct assay_plan_item *item)
{
    return item->family == ASSAY_FAMILY_DISTRIBUTIONAL || item->shared;
}

bool assay_target_meets(const struct assay_target *t, const struct assay_plan_item *item,
                        struct assay_check_result *res)
{
    unsigned lacks = item->needs & ~t->can;
    if (lacks == 0) {
        return true;
    }
    for (int i = 0; i < ASSAY_NEED_COUNT; i++) {
        if ((lacks & k_needs[i].need) != 0) {
            char words[160];
            assay_check_skip(res, "needs %s, which this target lacks: %s",
                             assay_needs_str(lacks, words, sizeof words), k_needs[i].who_has_it);
            break;
        }
    }
    res->repro[0] = '\0';
    return false;
}
