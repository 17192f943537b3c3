/*
 * status.h - the one status type of assay, and where-and-what diagnostics.
 *
 * Every library function returns an enum assay_status (ASSAY_OK = 0, errors
 * negative) and writes results through pointers. Functions that read input
 * also fill a struct assay_diag saying which file, which field or byte
 * offset, what was expected and what was found, so the command line can print
 * an error a user can act on. Library code never prints; cli/ does.
 */
#ifndef ASSAY_STATUS_H
#define ASSAY_STATUS_H

#include <stddef.h>

enum assay_status {
    ASSAY_OK = 0,
    ASSAY_ERR_NOMEM = -1,       /* an allocation failed */
    ASSAY_ERR_INVALID = -2,     /* an argument or request is invalid */
    ASSAY_ERR_IO = -3,          /* a file could not be read or written */
    ASSAY_ERR_PARSE = -4,       /* an input file is malformed */
    ASSAY_ERR_FULL = -5,        /* a fixed capacity is exhausted */
    ASSAY_ERR_NOT_FOUND = -6,   /* no such request, key or tensor */
    ASSAY_ERR_DUPLICATE = -7,   /* an id that must be unique is not */
    ASSAY_ERR_UNSUPPORTED = -8, /* a capability or combination is missing */
    ASSAY_ERR_NUMERIC = -9,     /* a numeric routine failed (GSL, NaN) */
    ASSAY_ERR_NET = -10,        /* a network peer misbehaved */
    ASSAY_ERR_TIMEOUT = -11,    /* a deadline passed */
    ASSAY_ERR_INTERNAL = -12,   /* a broken internal invariant was detected */
};

/* A short, static, human-readable name for a status; never NULL. */
const char *assay_status_str(enum assay_status status);

/*
 * The status of a best-effort step whose only fatal failure is running out
 * of memory: ASSAY_ERR_NOMEM stays ASSAY_ERR_NOMEM, every other status
 * becomes ASSAY_OK. The caller has already recorded any other failure where
 * it belongs (a check's result, a shrink's reason), so the run goes on.
 */
static inline enum assay_status assay_status_keep_nomem(enum assay_status st)
{
    return st == ASSAY_ERR_NOMEM ? ASSAY_ERR_NOMEM : ASSAY_OK;
}

/*
 * Where and what for an error in user input. All fields are NUL-terminated
 * and may be empty. `where` is a field path ("requests[3].prompt[7]") or a
 * byte offset ("byte 1024"); `expected` and `got` are short phrases.
 */
struct assay_diag {
    char file[256];
    char where[160];
    char expected[256];
    char got[256];
};

/* Clear a diagnostic. A NULL diag is ignored by every function here. */
void assay_diag_clear(struct assay_diag *diag);

/*
 * Fill a diagnostic. `file` may be NULL (kept as it was); `where` and the
 * two printf-style phrases are copied, truncated to fit.
 */
void assay_diag_set(struct assay_diag *diag, const char *file, const char *where,
                    const char *expected, const char *got_fmt, ...)
    __attribute__((format(printf, 5, 6)));

/*
 * Where byte offset `off` of a text of len bytes is, for a diagnostic's
 * `where`: "byte N (line L, column C)", lines counted from 1 after each
 * '\n' and columns in bytes from 1 (an editor's column for ASCII text).
 * An offset past the end is the end. Into buf (always NUL-terminated);
 * returns buf.
 */
char *assay_diag_position(const char *text, size_t len, size_t off, char *buf, size_t size);

/*
 * The byte offset at which a JSON text of len bytes stopped parsing, from
 * the end pointer cJSON_ParseWithLengthOpts leaves on failure (NULL: 0).
 * cJSON points one byte past the culprit when an object's member name is
 * not a string (`{"a": 1,}`, a trailing comma: it points past the `}`);
 * this points at the culprit, as it does for every other error.
 */
size_t assay_json_error_offset(const char *text, size_t len, const char *end);

/*
 * Render "file: where: expected E, got G" into buf (always NUL-terminated).
 * Empty parts are left out. Returns buf.
 */
char *assay_diag_format(const struct assay_diag *diag, char *buf, size_t size);

#endif
