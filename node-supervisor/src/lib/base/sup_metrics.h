/* Metrics: the value types owners keep their figures in (a histogram with
 * fixed buckets, a table of labelled counters) and the Prometheus text
 * exposition (format 0.0.4) they are rendered in when /metrics is read.
 *
 * Counters live with their owners (a pool its latencies, the core its
 * execs, the edge its requests); nothing here is global or registered, so
 * an owner's figures go when it does and tests make as many as they like.
 * Pure: no I/O, no clock. Loop thread only (what renders reads the owners'
 * figures in the same turn as they are kept). It must not know what the
 * figures mean: names, help and labels are the owners'. */
#ifndef SUP_METRICS_H
#define SUP_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Latency buckets (seconds), the same for every histogram so dashboards
 * can compare them: 100 us (a warm acquire, a short exec) to 5 min (a
 * long command). */
#define SUP_HIST_NB 18
extern const double sup_hist_bounds[SUP_HIST_NB];

typedef struct sup_hist {
	uint64_t counts[SUP_HIST_NB + 1]; /* per bucket, the last one past every bound */
	uint64_t count;
	double sum;
} sup_hist;

void sup_hist_observe(sup_hist *h, double v);

/* Exposition text being rendered; at most SUP_PROM_MAX bytes (past it the
 * rest is dropped and sup_prom_text fails). */
#define SUP_PROM_MAX (16u << 20)
typedef struct sup_prom {
	char *buf;
	size_t len;
	size_t cap;
	bool failed; /* out of memory or over SUP_PROM_MAX */
} sup_prom;

void sup_prom_init(sup_prom *w);
void sup_prom_release(sup_prom *w);
/* The text (NUL-terminated) and its length, or NULL when rendering failed. */
const char *sup_prom_text(const sup_prom *w, size_t *len);

/* "# HELP" and "# TYPE" (counter, gauge, histogram) of a family; its
 * samples must follow before the next family. */
void sup_prom_family(sup_prom *w, const char *name, const char *type, const char *help);
/* Labels are pairs of name and value, NULL-ended (NULL: none); values are
 * escaped (backslash, quote, newline), so any bytes may be a value. */
void sup_prom_sample(sup_prom *w, const char *name, const char *const *labels, double v);
/* name_bucket{...,le="..."} (cumulative, +Inf last), name_sum, name_count. */
void sup_prom_hist(sup_prom *w, const char *name, const char *const *labels, const sup_hist *h);

/* Counters whose label values are known only as they come (a route and a
 * status, a tenant and a figure), at most max of them: past it a new
 * combination is counted in one series whose labels all read "other".
 * NULL when out of memory or nlabels is 0 or over SUP_CTAB_MAX_LABELS. */
#define SUP_CTAB_MAX_LABELS 8
typedef struct sup_ctab sup_ctab;
sup_ctab *sup_ctab_new(size_t nlabels, const char *const *label_names, size_t max);
void sup_ctab_free(sup_ctab *t);
/* Add n to the series of values (nlabels strings). */
void sup_ctab_add(sup_ctab *t, const char *const *values, uint64_t n);
/* The series' value (0 when it was never added to). */
uint64_t sup_ctab_get(const sup_ctab *t, const char *const *values);
/* Every series as samples of name (the family line is the caller's). */
void sup_ctab_render(const sup_ctab *t, sup_prom *w, const char *name);

#endif
