/*
 * clock.h - time on CLOCK_MONOTONIC in nanoseconds, and UTC wall time for
 * stamps. Latencies are always differences of assay_now_ns() values.
 */
#ifndef ASSAY_CLOCK_H
#define ASSAY_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
int64_t assay_now_ns(void);

/* Sleep until the CLOCK_MONOTONIC time t_ns (returns at once if past). */
void assay_sleep_until_ns(int64_t t_ns);

/* The current UTC time as ISO 8601 ("2026-11-29T09:07:50Z") into buf. */
char *assay_utc_iso8601(char *buf, size_t size);

#endif
