/* sup_kube_dir: the node directory and the Lease's annotations
 * (sup_kube_dir.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_kube_dir.h"

bool sup_kube_capacity_equal(const sup_kube_capacity *a, const sup_kube_capacity *b)
{
	if (a->nimages != b->nimages || a->leased != b->leased)
		return false;
	for (size_t i = 0; i < a->nimages; i++)
		if (a->images[i].ready != b->images[i].ready ||
		    strcmp(a->images[i].image, b->images[i].image) != 0)
			return false;
	return true;
}

json_t *sup_kube_capacity_json(const sup_kube_capacity *c)
{
	json_t *ready = json_object();
	for (size_t i = 0; ready && i < c->nimages; i++)
		json_object_set_new(ready, c->images[i].image, json_integer(c->images[i].ready));
	return json_pack("{s:o?,s:I}", "ready", ready, "leased", (json_int_t)c->leased);
}

static unsigned count_of(json_t *v)
{
	json_int_t n = json_integer_value(v);
	return n < 0 ? 0 : n > 1000000 ? 1000000u : (unsigned)n;
}

int sup_kube_capacity_parse(const char *text, sup_kube_capacity *out, sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	json_t *j = json_loads(text, 0, NULL);
	json_t *ready = json_object_get(j, "ready");
	if (!json_is_object(ready) || !json_is_integer(json_object_get(j, "leased"))) {
		json_decref(j);
		return sbx_err_set(err, -EINVAL, "capacity: not {\"ready\":{...},\"leased\":N}");
	}
	out->leased = count_of(json_object_get(j, "leased"));
	const char *k;
	json_t *v;
	json_object_foreach(ready, k, v) {
		if (out->nimages == SUP_KUBE_CAP_IMAGES)
			break;
		if (!json_is_integer(v) || strlen(k) >= SUP_KUBE_IMAGE_MAX)
			continue;
		snprintf(out->images[out->nimages].image, SUP_KUBE_IMAGE_MAX, "%s", k);
		out->images[out->nimages++].ready = count_of(v);
	}
	json_decref(j);
	return 0;
}

void sup_kube_micro_time(const struct timespec *ts, char *buf, size_t cap)
{
	struct tm tm;
	gmtime_r(&ts->tv_sec, &tm);
	char day[32];
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, cap, "%s.%06ldZ", day, ts->tv_nsec / 1000);
}

int sup_kube_parse_time(const char *s, time_t *out)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	const char *rest = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	if (!rest)
		return -EINVAL;
	if (*rest == '.')
		for (rest++; *rest >= '0' && *rest <= '9'; rest++)
			;
	if (strcmp(rest, "Z") != 0)
		return -EINVAL;
	*out = timegm(&tm);
	return 0;
}

int sup_kube_node_from_lease(json_t *lease, sup_kube_node *out, sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	json_t *meta = json_object_get(lease, "metadata");
	json_t *ann = json_object_get(meta, "annotations");
	json_t *spec = json_object_get(lease, "spec");
	const char *lname = json_string_value(json_object_get(meta, "name"));
	const char *node = json_string_value(json_object_get(ann, SUP_KUBE_ANN_NODE));
	const char *url = json_string_value(json_object_get(ann, SUP_KUBE_ANN_URL));
	const char *cap = json_string_value(json_object_get(ann, SUP_KUBE_ANN_CAPACITY));
	const char *renew = json_string_value(json_object_get(spec, "renewTime"));
	json_int_t dur = json_integer_value(json_object_get(spec, "leaseDurationSeconds"));
	if (!node || !url || !renew)
		return sbx_err_set(err, -EINVAL, "lease %s: no node, URL or renewTime",
				   lname ? lname : "?");
	if (strlen(node) >= sizeof(out->name) || strlen(url) >= sizeof(out->url) || dur <= 0 ||
	    dur > 86400 || sup_kube_parse_time(renew, &out->renewed) < 0)
		return sbx_err_set(err, -EINVAL, "lease %s: malformed node, URL or times", lname ? lname : "?");
	if (sup_nodeid_name_check(node, err) < 0)
		return sbx_err_wrap(err, "lease %s", lname ? lname : "?");
	snprintf(out->name, sizeof(out->name), "%s", node);
	sup_nodeid_tag(out->name, out->tag);
	snprintf(out->url, sizeof(out->url), "%s", url);
	out->duration_s = (unsigned)dur;
	/* a capacity we cannot read offers nothing, but the node still answers */
	if (cap && sup_kube_capacity_parse(cap, &out->cap, err) < 0)
		memset(&out->cap, 0, sizeof(out->cap));
	return 0;
}

void sup_kube_dir_init(sup_kube_dir *d, const char *self)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->self, sizeof(d->self), "%s", self ? self : "");
}

void sup_kube_dir_release(sup_kube_dir *d)
{
	free(d->v);
	memset(d, 0, sizeof(*d));
}

static sup_kube_node *find(const sup_kube_dir *d, const char *name)
{
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->v[i].name, name) == 0)
			return &d->v[i];
	return NULL;
}

int sup_kube_dir_put(sup_kube_dir *d, const sup_kube_node *n)
{
	sup_kube_node *e = find(d, n->name);
	if (e) {
		*e = *n;
		return 0;
	}
	if (d->n == SUP_KUBE_DIR_MAX)
		return -ENOSPC;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 8;
		sup_kube_node *v = realloc(d->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		d->v = v;
		d->cap = cap;
	}
	d->v[d->n++] = *n;
	return 0;
}

void sup_kube_dir_remove(sup_kube_dir *d, const char *name)
{
	sup_kube_node *e = find(d, name);
	if (!e)
		return;
	size_t i = (size_t)(e - d->v);
	memmove(d->v + i, d->v + i + 1, (d->n - i - 1) * sizeof(*d->v));
	d->n--;
}

bool sup_kube_dir_live(const sup_kube_dir *d, const sup_kube_node *n, time_t now)
{
	time_t renewed = n->renewed > d->sight_back ? n->renewed : d->sight_back;
	return renewed + (time_t)n->duration_s > now;
}

const char *sup_kube_dir_clash(const sup_kube_dir *d, const sup_kube_node *n)
{
	char self_tag[SUP_NODEID_TAG_MAX + 1];
	sup_nodeid_tag(d->self, self_tag);
	if (d->self[0] && strcmp(n->name, d->self) != 0 && strcmp(n->tag, self_tag) == 0)
		return d->self;
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->v[i].tag, n->tag) == 0 && strcmp(d->v[i].name, n->name) != 0)
			return d->v[i].name;
	return NULL;
}

int sup_kube_dir_find(const sup_kube_dir *d, const char *tag, time_t now, char *name,
		      size_t name_cap, char *url, size_t url_cap)
{
	const sup_kube_node *hit = NULL;
	for (size_t i = 0; i < d->n; i++) {
		if (strcmp(d->v[i].tag, tag) != 0 || !sup_kube_dir_live(d, &d->v[i], now))
			continue;
		if (hit)
			return -ENOTUNIQ;
		hit = &d->v[i];
	}
	if (!hit)
		return -ENOENT;
	if ((size_t)snprintf(name, name_cap, "%s", hit->name) >= name_cap ||
	    (size_t)snprintf(url, url_cap, "%s", hit->url) >= url_cap)
		return -ENAMETOOLONG;
	return 0;
}

void sup_kube_dir_each(const sup_kube_dir *d, time_t now,
		       void (*fn)(void *fn_ud, const char *name, const char *url), void *fn_ud)
{
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->v[i].name, d->self) != 0 && sup_kube_dir_live(d, &d->v[i], now))
			fn(fn_ud, d->v[i].name, d->v[i].url);
}

int sup_kube_dir_pick(sup_kube_dir *d, const char *image, time_t now, char *node, size_t cap)
{
	sup_kube_node *best = NULL;
	unsigned *best_ready = NULL;
	for (size_t i = 0; i < d->n; i++) {
		sup_kube_node *e = &d->v[i];
		if (strcmp(e->name, d->self) == 0 || !sup_kube_dir_live(d, e, now))
			continue;
		for (size_t k = 0; k < e->cap.nimages; k++) {
			unsigned *r = &e->cap.images[k].ready;
			if (strcmp(e->cap.images[k].image, image) == 0 && *r &&
			    (!best_ready || *r > *best_ready)) {
				best = e;
				best_ready = r;
			}
		}
	}
	if (!best)
		return -ENOENT;
	if (snprintf(node, cap, "%s", best->name) >= (int)cap)
		return -ENAMETOOLONG;
	(*best_ready)--;
	return 0;
}
