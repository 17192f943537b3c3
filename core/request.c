/*
 * request.c - the two operations on the plain request data (request.h):
 * assay_sampling_greedy, the sampling parameters of greedy decoding, and
 * assay_finish_reason_str, a finish reason's name for reports and JSON.
 */
#include "request.h"

struct assay_sampling assay_sampling_greedy(void)
{
    struct assay_sampling s = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .seeded = false,
                               .seed = 0};
    return s;
}

const char *assay_finish_reason_str(enum assay_finish_reason reason)
{
    switch (reason) {
    case ASSAY_FINISH_NONE: return "none";
    case ASSAY_FINISH_LENGTH: return "length";
    case ASSAY_FINISH_STOP: return "stop";
    case ASSAY_FINISH_ABORT: return "abort";
    case ASSAY_FINISH_ERROR: return "error";
    }
    return "unknown";
}
