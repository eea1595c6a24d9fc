/* sup_metrics: see sup_metrics.h. */
#include "sup_metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const double sup_hist_bounds[SUP_HIST_NB] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
					      0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
					      1,      2.5,     5,      10,    60,     300 };

void sup_hist_observe(sup_hist *h, double v)
{
	size_t i = 0;
	while (i < SUP_HIST_NB && v > sup_hist_bounds[i])
		i++;
	h->counts[i]++;
	h->count++;
	h->sum += v;
}

/* ---- exposition text ---- */

void sup_prom_init(sup_prom *w)
{
	memset(w, 0, sizeof(*w));
}

void sup_prom_release(sup_prom *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

const char *sup_prom_text(const sup_prom *w, size_t *len)
{
	*len = w->len;
	return w->failed ? NULL : w->buf ? w->buf : "";
}

static bool reserve(sup_prom *w, size_t more)
{
	if (w->failed)
		return false;
	if (w->len + more + 1 <= w->cap)
		return true;
	if (w->len + more + 1 > SUP_PROM_MAX) {
		w->failed = true;
		return false;
	}
	size_t cap = w->cap ? w->cap : 16384;
	while (cap < w->len + more + 1)
		cap *= 2;
	if (cap > SUP_PROM_MAX)
		cap = SUP_PROM_MAX;
	char *b = realloc(w->buf, cap);
	if (!b) {
		w->failed = true;
		return false;
	}
	w->buf = b;
	w->cap = cap;
	return true;
}

static void put(sup_prom *w, const char *s, size_t n)
{
	if (!reserve(w, n))
		return;
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

static void putf(sup_prom *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(sup_prom *w, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		w->failed = true;
		return;
	}
	put(w, tmp, (size_t)n);
}

/* A label value or help text, escaped as the format wants (help text keeps
 * its quotes). */
static void put_escaped(sup_prom *w, const char *s, bool quotes)
{
	for (; *s; s++) {
		if (*s == '\\')
			put(w, "\\\\", 2);
		else if (*s == '\n')
			put(w, "\\n", 2);
		else if (*s == '"' && quotes)
			put(w, "\\\"", 2);
		else
			put(w, s, 1);
	}
}

static void put_value(sup_prom *w, double v)
{
	if (isinf(v))
		put(w, v > 0 ? "+Inf" : "-Inf", 4);
	else if (isnan(v))
		put(w, "NaN", 3);
	else if (v == floor(v) && fabs(v) < 1e15)
		putf(w, "%.0f", v);
	else
		putf(w, "%.9g", v);
}

void sup_prom_family(sup_prom *w, const char *name, const char *type, const char *help)
{
	putf(w, "# HELP %s ", name);
	put_escaped(w, help, false);
	putf(w, "\n# TYPE %s %s\n", name, type);
}

/* name{labels[,extra_k="extra_v"]} */
static void put_series(sup_prom *w, const char *name, const char *suffix,
		       const char *const *labels, const char *extra_k, const char *extra_v)
{
	putf(w, "%s%s", name, suffix);
	bool any = (labels && labels[0]) || extra_k;
	if (any)
		put(w, "{", 1);
	size_t i = 0;
	for (; labels && labels[i]; i += 2) {
		putf(w, "%s%s=\"", i ? "," : "", labels[i]);
		put_escaped(w, labels[i + 1] ? labels[i + 1] : "", true);
		put(w, "\"", 1);
	}
	if (extra_k)
		putf(w, "%s%s=\"%s\"", i ? "," : "", extra_k, extra_v);
	if (any)
		put(w, "}", 1);
	put(w, " ", 1);
}

void sup_prom_sample(sup_prom *w, const char *name, const char *const *labels, double v)
{
	put_series(w, name, "", labels, NULL, NULL);
	put_value(w, v);
	put(w, "\n", 1);
}

void sup_prom_hist(sup_prom *w, const char *name, const char *const *labels, const sup_hist *h)
{
	uint64_t cum = 0;
	for (size_t i = 0; i <= SUP_HIST_NB; i++) {
		char le[32];
		if (i < SUP_HIST_NB)
			snprintf(le, sizeof(le), "%g", sup_hist_bounds[i]);
		else
			snprintf(le, sizeof(le), "+Inf");
		cum += h->counts[i];
		put_series(w, name, "_bucket", labels, "le", le);
		put_value(w, (double)cum);
		put(w, "\n", 1);
	}
	put_series(w, name, "_sum", labels, NULL, NULL);
	put_value(w, h->sum);
	put(w, "\n", 1);
	put_series(w, name, "_count", labels, NULL, NULL);
	put_value(w, (double)h->count);
	put(w, "\n", 1);
}

/* ---- labelled counters ---- */

typedef struct ctab_row {
	char **values;
	uint64_t v;
} ctab_row;

struct sup_ctab {
	size_t nlabels;
	const char *const *names;
	size_t max;
	ctab_row *rows;
	size_t n;
	ctab_row other; /* combinations past max */
};

sup_ctab *sup_ctab_new(size_t nlabels, const char *const *label_names, size_t max)
{
	if (nlabels == 0 || nlabels > SUP_CTAB_MAX_LABELS)
		return NULL;
	sup_ctab *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->nlabels = nlabels;
	t->names = label_names;
	t->max = max;
	t->rows = calloc(max ? max : 1, sizeof(*t->rows));
	if (!t->rows) {
		free(t);
		return NULL;
	}
	return t;
}

static void row_free(ctab_row *r, size_t nlabels)
{
	for (size_t k = 0; r->values && k < nlabels; k++)
		free(r->values[k]);
	free(r->values);
}

void sup_ctab_free(sup_ctab *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		row_free(&t->rows[i], t->nlabels);
	free(t->rows);
	free(t);
}

static ctab_row *find(const sup_ctab *t, const char *const *values)
{
	for (size_t i = 0; i < t->n; i++) {
		size_t k = 0;
		while (k < t->nlabels && strcmp(t->rows[i].values[k], values[k]) == 0)
			k++;
		if (k == t->nlabels)
			return &t->rows[i];
	}
	return NULL;
}

void sup_ctab_add(sup_ctab *t, const char *const *values, uint64_t n)
{
	ctab_row *r = find(t, values);
	if (!r && t->n < t->max) {
		r = &t->rows[t->n];
		r->values = calloc(t->nlabels, sizeof(char *));
		bool ok = r->values != NULL;
		for (size_t k = 0; ok && k < t->nlabels; k++)
			ok = (r->values[k] = strdup(values[k])) != NULL;
		if (ok) {
			t->n++;
		} else {
			row_free(r, t->nlabels);
			r->values = NULL;
			r = NULL;
		}
	}
	if (!r)
		r = &t->other;
	r->v += n;
}

uint64_t sup_ctab_get(const sup_ctab *t, const char *const *values)
{
	const ctab_row *r = find(t, values);
	return r ? r->v : 0;
}

/* The label pairs of a row ("other" for each value of the overflow row). */
static void render_row(const sup_ctab *t, const ctab_row *r, sup_prom *w, const char *name)
{
	const char *pairs[2 * SUP_CTAB_MAX_LABELS + 1];
	size_t n = t->nlabels;
	for (size_t k = 0; k < n; k++) {
		pairs[2 * k] = t->names[k];
		pairs[2 * k + 1] = r->values ? r->values[k] : "other";
	}
	pairs[2 * n] = NULL;
	sup_prom_sample(w, name, pairs, (double)r->v);
}

void sup_ctab_render(const sup_ctab *t, sup_prom *w, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		render_row(t, &t->rows[i], w, name);
	if (t->other.v)
		render_row(t, &t->other, w, name);
}
