/* The clock durations and deadlines are measured on: CLOCK_MONOTONIC, in
 * milliseconds, for both binaries. Not for dates (a record's time is the
 * wall clock's, taken where it is written). It keeps no state. */
#ifndef SBX_CLOCK_H
#define SBX_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Now, in ms since an arbitrary start (the machine's boot). */
uint64_t sbx_now_ms(void);

/* Whole ms from t0 (a CLOCK_MONOTONIC reading) to now; 0 when t0 is later. */
uint64_t sbx_ms_since(const struct timespec *t0);

/* Nanoseconds from t0 to now; 0 when t0 is later. For budgets spent in
 * many short pieces, where whole ms would round each piece away. */
uint64_t sbx_ns_since(const struct timespec *t0);

/* The same with its fraction, for figures reported to a tenth of a ms. */
double sbx_ms_since_f(const struct timespec *t0);

#endif
