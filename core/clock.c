/*
 * clock.c - monotonic nanoseconds (assay_now_ns), sleeping to a monotonic
 * deadline (assay_sleep_until_ns, for open-loop arrivals in bench/) and the
 * UTC ISO 8601 time a stamp records (clock.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "clock.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

int64_t assay_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void assay_sleep_until_ns(int64_t t_ns)
{
    struct timespec ts = {.tv_sec = t_ns / 1000000000LL, .tv_nsec = t_ns % 1000000000LL};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

char *assay_utc_iso8601(char *buf, size_t size)
{
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}
