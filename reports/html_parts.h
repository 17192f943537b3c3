/*
 * html_parts.h - what the three files of the HTML rendering share (not an
 * interface: include html.h). html.c makes the page: its header and
 * verdict, the failures and the notes, and calls the sections of
 * html_evidence.c (what each distributional check saw), html_bench.c (the
 * benchmark, the seed's table, the rate sweep) and html_stamp.c (what
 * produced the figures). Each
 * section renders from the report's JSON alone and writes nothing when the
 * report has nothing for it.
 */
#ifndef ASSAY_HTML_PARTS_H
#define ASSAY_HTML_PARTS_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "text.h"

/* Cells and spans, with their text escaped. */
void assay_html_esc(struct assay_text *t, const char *s);
void assay_html_td_sec(struct assay_text *t, double v);
void assay_html_td_num(struct assay_text *t, double v, int sig);
void assay_html_td_rate(struct assay_text *t, double v);
void assay_html_td_pct(struct assay_text *t, double v);
void assay_html_td_text(struct assay_text *t, const char *s);
void assay_html_verdict_span(struct assay_text *t, const char *v);
/* A spread cell: the median, and min-max under it. */
void assay_html_td_spread_sec(struct assay_text *t, const cJSON *sp);
/* The size of an array; 0 for anything else. */
int assay_html_array_size(const cJSON *a);

/* html_stamp.c: the "Stamp" section: what produced the figures, in a
 * table of one row a part, and every field of the stamp (none twice) in a
 * <details> closed by default. */
void assay_html_stamp(struct assay_text *t, const cJSON *r);

/* html_evidence.c: the "Distributional evidence" section. */
void assay_html_evidence(struct assay_text *t, const cJSON *r);

/* html_bench.c: the benchmark, the seed's table and the rate sweep
 * sections, and whether the report has what each shows. */
bool assay_html_has_benchmark(const cJSON *r);
bool assay_html_has_seed_table(const cJSON *r);
bool assay_html_has_sweep(const cJSON *r);
void assay_html_benchmark(struct assay_text *t, const cJSON *r);
void assay_html_seed_table(struct assay_text *t, const cJSON *r);
void assay_html_sweep(struct assay_text *t, const cJSON *r);

#endif
