/* sup_kube: this node's Lease, its Events and the node directory, on two
 * threads of their own (sup_kube.h). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "sbx/clock.h"
#include "sup_kube.h"
#include "sup_kube_http.h"
#include "sup_kube_retry.h"
#include "sup_log.h"

#define LEASES_API "/apis/coordination.k8s.io/v1/namespaces/"
/* a printf format: %% is one % of the query */
#define SELECTOR "labelSelector=" SUP_KUBE_LABEL "%%3D" SUP_KUBE_LABEL_VALUE
#define WATCH_S 60          /* the server ends a watch after this (timeoutSeconds) */
#define CAP_CHANGE_MS 1000  /* a capacity change waits at most this for its write */
#define EVENT_MSG_MAX 1024

struct sup_kube {
	char ns[SUP_KUBE_NS_MAX];
	char node[SUP_KUBE_NODE_MAX];
	char lease[SUP_KUBE_NODE_MAX + 16]; /* sbx-node-<node> */
	char short_lease[SUP_NODEID_TAG_MAX + 16]; /* sbx-node-<tag>: Event names start so */
	char url[SUP_KUBE_URL_MAX];
	unsigned lease_s;
	atomic_bool stop;
	sup_kube_http *wh, *rh;  /* the writer's and the watcher's connections */
	pthread_t writer, watcher;
	bool writer_started, watcher_started;

	/* the writer's state, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	sup_kube_queue q;
	sup_kube_capacity cap;
	bool cap_dirty;
	bool lease_exists;       /* PATCH it; else POST first */
	uint64_t renewed, sent, refused;

	/* the directory, under dmu (the watcher writes, the loop reads) */
	pthread_mutex_t dmu;
	sup_kube_dir dir;
	uint64_t resumes, relists;
	/* since when the watcher cannot reach the API server (0: it can): the
	 * directory's clock stands still meanwhile, nobody's lease lapses */
	time_t blind_since;
	atomic_bool connected;
};

static uint32_t rnd32(void)
{
	uint32_t r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)sbx_now_ms() * 2654435761u;
	return r;
}

/* Wait on cond until ms from now or a signal (mu held). */
static void wait_for(sup_kube *k, uint64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&k->cond, &k->mu, &ts);
}

static bool transient(long status)
{
	return status == 429 || status >= 500;
}

/* ---- the Lease ---- */

static char *lease_body(sup_kube *k, const sup_kube_capacity *cap, bool create)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	char now[40];
	sup_kube_micro_time(&ts, now, sizeof(now));
	json_t *capj = sup_kube_capacity_json(cap);
	char *capt = capj ? json_dumps(capj, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(capj);
	if (!capt)
		return NULL;
	json_t *o = json_pack("{s:{s:s},s:{s:s,s:s,s:s},s:{s:s,s:i,s:s}}", "labels", SUP_KUBE_LABEL,
			      SUP_KUBE_LABEL_VALUE, "annotations", SUP_KUBE_ANN_NODE, k->node,
			      SUP_KUBE_ANN_URL, k->url, SUP_KUBE_ANN_CAPACITY, capt, "spec",
			      "holderIdentity", k->node, "leaseDurationSeconds", (int)k->lease_s,
			      "renewTime", now);
	free(capt);
	if (!o)
		return NULL;
	/* a merge patch of its metadata; a create names it whole */
	json_t *meta = json_pack("{s:o,s:o}", "labels", json_incref(json_object_get(o, "labels")),
				 "annotations", json_incref(json_object_get(o, "annotations")));
	json_t *body = NULL;
	if (meta && create) {
		json_object_set_new(meta, "name", json_string(k->lease));
		json_object_set_new(meta, "namespace", json_string(k->ns));
		json_t *spec = json_object_get(o, "spec");
		json_object_set_new(spec, "acquireTime", json_string(now));
		body = json_pack("{s:s,s:s,s:o,s:O}", "apiVersion", "coordination.k8s.io/v1", "kind",
				 "Lease", "metadata", meta, "spec", spec);
	} else if (meta) {
		body = json_pack("{s:o,s:O}", "metadata", meta, "spec", json_object_get(o, "spec"));
	}
	json_decref(o);
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	return text;
}

/* One write of the Lease: 0 done, -EAGAIN try again later (why in err). */
static int renew(sup_kube *k, const sup_kube_capacity *cap, bool *exists, sbx_err *err)
{
	char path[SUP_KUBE_PATH_MAX];
	for (int step = 0; step < 2; step++) {
		bool create = !*exists;
		if (create)
			snprintf(path, sizeof(path), LEASES_API "%s/leases", k->ns);
		else
			snprintf(path, sizeof(path), LEASES_API "%s/leases/%s", k->ns, k->lease);
		char *body = lease_body(k, cap, create);
		if (!body)
			return sbx_err_set(err, -EAGAIN, "out of memory");
		sup_kube_resp r;
		int rc = sup_kube_http_do(k->wh, create ? "POST" : "PATCH", path, body, &r, err);
		free(body);
		if (rc < 0)
			return err->code = -EAGAIN;
		long st = r.status;
		char why[400];
		sup_kube_resp_why(&r, why, sizeof(why));
		sup_kube_resp_release(&r);
		if (st >= 200 && st < 300) {
			*exists = true;
			return 0;
		}
		if ((create && st == 409) || (!create && st == 404)) {
			*exists = !*exists; /* made meanwhile, or deleted: the other way */
			continue;
		}
		return sbx_err_set(err, -EAGAIN, "lease %s/%s: %s", k->ns, k->lease, why);
	}
	return sbx_err_set(err, -EAGAIN, "lease %s/%s: made and deleted under us", k->ns, k->lease);
}

/* ---- Events ---- */

void sup_kube_event(sup_kube *k, sup_kube_ev_type type, const char *reason, const char *fmt, ...)
{
	if (!k)
		return;
	char msg[EVENT_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	char when[40];
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	/* unique, as client-go names them: the object, then the time */
	char name[SUP_KUBE_KEY_MAX];
	snprintf(name, sizeof(name), "%s.%" PRIx64 "%08" PRIx32,
		 strlen(k->lease) + 26 <= SUP_KUBE_NODE_MAX - 1 ? k->lease : k->short_lease,
		 (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec, rnd32());
	json_t *ev = json_pack(
		"{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s},s:s,s:s,s:s,s:{s:s,s:s},s:s,s:s,s:i}",
		"apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace", k->ns,
		"involvedObject", "apiVersion", "coordination.k8s.io/v1", "kind", "Lease", "namespace",
		k->ns, "name", k->lease, "reason", reason, "message", msg, "type",
		type == SUP_KUBE_WARNING ? "Warning" : "Normal", "source", "component",
		"sandbox-supervisor", "host", k->node, "firstTimestamp", when, "lastTimestamp", when,
		"count", 1);
	char *body = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
	json_decref(ev);
	if (!body) {
		sup_warn("kube: event %s: out of memory, not sent", reason);
		return;
	}
	char path[SUP_KUBE_PATH_MAX];
	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", k->ns);
	char dropped[SUP_KUBE_KEY_MAX];
	pthread_mutex_lock(&k->mu);
	sup_kube_push p = sup_kube_queue_push(&k->q, name, "POST", path, body, dropped);
	uint64_t ndropped = k->q.dropped;
	pthread_cond_signal(&k->cond);
	pthread_mutex_unlock(&k->mu);
	if (p == SUP_KUBE_PUSH_DROPPED)
		sup_warn("kube: event queue full (%zu): oldest event %s dropped (%" PRIu64 " so far)",
			 k->q.cap, dropped, ndropped);
	else if (p == SUP_KUBE_PUSH_NOMEM)
		sup_warn("kube: event %s: out of memory, not sent", reason);
}

/* One queued Event: 0 delivered (or refused for good: counted), -EAGAIN. */
static int deliver(sup_kube *k, const sup_kube_write *w, sbx_err *err)
{
	sup_kube_resp r;
	if (sup_kube_http_do(k->wh, w->method, w->path, w->body, &r, err) < 0)
		return err->code = -EAGAIN;
	long st = r.status;
	char why[400];
	sup_kube_resp_why(&r, why, sizeof(why));
	sup_kube_resp_release(&r);
	/* 409: a retry of one the server took before the connection broke */
	if ((st >= 200 && st < 300) || st == 409) {
		k->sent++;
		return 0;
	}
	if (transient(st) || st == 401)
		return sbx_err_set(err, -EAGAIN, "event %s: %s", w->key, why);
	k->refused++;
	sup_warn("kube: event %s refused, dropped: %s", w->key, why);
	return 0;
}

static void *writer_main(void *ud)
{
	sup_kube *k = ud;
	uint64_t renew_ms = (uint64_t)k->lease_s * 1000 / 4;
	unsigned cap = renew_ms < 1000 ? 1000 : renew_ms > 8000 ? 8000 : (unsigned)renew_ms;
	sup_kube_backoff bo = { .base_ms = 250, .cap_ms = cap };
	uint64_t next_renew = 0, last_renew = 0, away_since = 0;
	pthread_mutex_lock(&k->mu);
	while (!atomic_load(&k->stop)) {
		uint64_t now = sbx_now_ms();
		bool lease_due = now >= next_renew || (k->cap_dirty && now >= last_renew + CAP_CHANGE_MS);
		sup_kube_write w = { 0 };
		bool have = !lease_due && sup_kube_queue_peek(&k->q, &w) == 0;
		if (!lease_due && !have) {
			uint64_t until = next_renew;
			if (k->cap_dirty && last_renew + CAP_CHANGE_MS < until)
				until = last_renew + CAP_CHANGE_MS;
			wait_for(k, until > now ? until - now : 1);
			continue;
		}
		sup_kube_capacity capacity = k->cap;
		bool exists = k->lease_exists;
		k->cap_dirty = lease_due ? false : k->cap_dirty;
		pthread_mutex_unlock(&k->mu);

		sbx_err err;
		sbx_err_clear(&err);
		int rc = lease_due ? renew(k, &capacity, &exists, &err) : deliver(k, &w, &err);

		pthread_mutex_lock(&k->mu);
		if (lease_due) {
			k->lease_exists = exists;
			if (rc == 0) {
				k->renewed++;
				last_renew = sbx_now_ms();
				next_renew = last_renew + renew_ms;
			} else {
				k->cap_dirty = true; /* still to be written */
			}
		} else if (rc == 0) {
			sup_kube_queue_done(&k->q, w.key, w.gen);
		}
		free(w.body);
		if (rc == 0) {
			if (away_since) {
				sup_info("kube: API server answers again after %.1f s: lease renewed, %zu event(s) to deliver",
					 (double)(sbx_now_ms() - away_since) / 1000, k->q.n);
				away_since = 0;
			}
			atomic_store(&k->connected, true);
			sup_kube_backoff_reset(&bo);
			continue;
		}
		if (!away_since) {
			away_since = sbx_now_ms();
			sup_warn("kube: %s; retrying with backoff (%zu event(s) queued)", err.msg, k->q.n);
		}
		atomic_store(&k->connected, false);
		if (lease_due)
			next_renew = sbx_now_ms(); /* the lease first when the server is back */
		unsigned ms = sup_kube_backoff_next(&bo, rnd32());
		sup_debug("kube: writer: %s; next try in %u ms", err.msg, ms);
		wait_for(k, ms);
		next_renew = lease_due ? sbx_now_ms() : next_renew;
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

void sup_kube_set_capacity(sup_kube *k, const sup_kube_capacity *c)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->mu);
	if (!sup_kube_capacity_equal(&k->cap, c)) {
		k->cap = *c;
		k->cap_dirty = true;
		pthread_cond_signal(&k->cond);
	}
	pthread_mutex_unlock(&k->mu);
}

/* ---- the directory ---- */

/* The watcher reached the API server (ok) or did not. Sight come back
 * after a loss: every lease counts as renewed now, as a kubelet's node
 * gets a grace after the control plane's own outage. */
static void watcher_saw(sup_kube *k, bool ok)
{
	pthread_mutex_lock(&k->dmu);
	time_t now = time(NULL), was = k->blind_since;
	if (!ok && !was)
		k->blind_since = now;
	if (ok && was) {
		k->blind_since = 0;
		k->dir.sight_back = now;
	}
	pthread_mutex_unlock(&k->dmu);
	if (ok && was)
		sup_info("kube: node leases readable again after %ld s: each node's lease runs from now",
			 (long)(now - was));
}

/* The directory's clock (k->dmu held). */
static time_t dir_now(const sup_kube *k)
{
	return k->blind_since ? k->blind_since : time(NULL);
}

typedef struct watch_ctx {
	sup_kube *k;
	char rv[64];
	bool gone; /* 410: list again */
} watch_ctx;

/* One Lease event into d (the caller holds dmu, or d is not shared yet). */
static void dir_apply(sup_kube_dir *d, const char *type, json_t *obj)
{
	sup_kube_node n;
	sbx_err err;
	if (sup_kube_node_from_lease(obj, &n, &err) < 0) {
		sup_debug("kube: %s", err.msg);
		return;
	}
	if (strcmp(type, "DELETED") == 0) {
		sup_kube_dir_remove(d, n.name);
		return;
	}
	/* said once, when the node appears: lookups of the tag are refused */
	const char *clash = sup_kube_dir_clash(d, &n);
	bool known = false;
	for (size_t i = 0; i < d->n && !known; i++)
		known = strcmp(d->v[i].name, n.name) == 0;
	if (clash && !known)
		sup_warn("kube: nodes %s and %s have one id tag (%s): requests for their sandboxes "
			 "are refused until one is renamed", n.name, clash, n.tag);
	if (sup_kube_dir_put(d, &n) < 0)
		sup_warn("kube: node directory full (%u nodes): %s left out", SUP_KUBE_DIR_MAX, n.name);
}

static void keep_rv(watch_ctx *w, json_t *obj)
{
	const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"),
							   "resourceVersion"));
	if (rv && strlen(rv) < sizeof(w->rv))
		snprintf(w->rv, sizeof(w->rv), "%s", rv);
}

static int on_watch_event(void *ud, const char *type, json_t *obj)
{
	watch_ctx *w = ud;
	if (strcmp(type, "ERROR") == 0) {
		json_int_t code = json_integer_value(json_object_get(obj, "code"));
		if (code == 410) {
			w->gone = true;
			return -ESTALE;
		}
		return -EPROTO;
	}
	watcher_saw(w->k, true);
	if (strcmp(type, "BOOKMARK") != 0) {
		pthread_mutex_lock(&w->k->dmu);
		dir_apply(&w->k->dir, type, obj);
		pthread_mutex_unlock(&w->k->dmu);
	}
	keep_rv(w, obj);
	return 0;
}

/* The whole directory again: 0 with w->rv the list's resourceVersion. */
static int relist(sup_kube *k, watch_ctx *w, sbx_err *err)
{
	char path[SUP_KUBE_PATH_MAX];
	snprintf(path, sizeof(path), LEASES_API "%s/leases?" SELECTOR, k->ns);
	sup_kube_resp r;
	if (sup_kube_http_do(k->rh, "GET", path, NULL, &r, err) < 0)
		return err->code;
	if (r.status != 200) {
		char why[400];
		sup_kube_resp_why(&r, why, sizeof(why));
		sup_kube_resp_release(&r);
		return sbx_err_set(err, -EPROTO, "list leases: %s", why);
	}
	/* built aside, then swapped: readers never see it half made */
	sup_kube_dir fresh;
	sup_kube_dir_init(&fresh, k->node);
	json_t *items = json_object_get(r.body, "items");
	size_t i;
	json_t *it;
	json_array_foreach(items, i, it) {
		dir_apply(&fresh, "ADDED", it);
	}
	w->rv[0] = '\0';
	keep_rv(w, r.body);
	sup_kube_resp_release(&r);
	pthread_mutex_lock(&k->dmu);
	sup_kube_dir old = k->dir;
	fresh.sight_back = old.sight_back;
	k->dir = fresh;
	k->relists++;
	size_t n = k->dir.n;
	pthread_mutex_unlock(&k->dmu);
	sup_kube_dir_release(&old);
	sup_info("kube: node directory listed: %zu node(s) (resourceVersion %s)", n, w->rv);
	return 0;
}

static void sleep_ms(sup_kube *k, unsigned ms)
{
	pthread_mutex_lock(&k->mu);
	if (!atomic_load(&k->stop))
		wait_for(k, ms);
	pthread_mutex_unlock(&k->mu);
}

static void *watcher_main(void *ud)
{
	sup_kube *k = ud;
	watch_ctx w = { .k = k };
	sup_kube_backoff bo = { .base_ms = 250, .cap_ms = 5000 };
	bool listed = false;
	while (!atomic_load(&k->stop)) {
		sbx_err err;
		sbx_err_clear(&err);
		int rc = 0;
		if (!listed) {
			rc = relist(k, &w, &err);
			listed = rc == 0;
		}
		if (rc == 0) {
			char path[SUP_KUBE_PATH_MAX];
			snprintf(path, sizeof(path),
				 LEASES_API "%s/leases?" SELECTOR
					    "&watch=1&allowWatchBookmarks=true&timeoutSeconds=%d&resourceVersion=%s",
				 k->ns, WATCH_S, w.rv);
			long status;
			w.gone = false;
			rc = sup_kube_http_watch(k->rh, path, WATCH_S + 15, on_watch_event, &w, &status,
						 &err);
			if (w.gone || status == 410) {
				sup_info("kube: resourceVersion %s is gone (410): listing again", w.rv);
				listed = false;
				rc = 0;
			} else if (rc == 0) {
				pthread_mutex_lock(&k->dmu);
				k->resumes++;
				pthread_mutex_unlock(&k->dmu);
			}
		}
		if (atomic_load(&k->stop))
			break;
		watcher_saw(k, rc == 0);
		if (rc == 0) {
			sup_kube_backoff_reset(&bo);
			continue;
		}
		unsigned ms = sup_kube_backoff_next(&bo, rnd32());
		if (bo.attempt == 1)
			sup_warn("kube: watch of the node leases: %s; resuming from %s with backoff",
				 err.msg, listed ? w.rv : "a new list");
		sup_debug("kube: watch: %s; next try in %u ms", err.msg, ms);
		sleep_ms(k, ms);
		if (listed) {
			pthread_mutex_lock(&k->dmu);
			k->resumes++;
			pthread_mutex_unlock(&k->dmu);
		}
	}
	return NULL;
}

int sup_kube_nodes_find(void *ud, const char *tag, char *name, size_t name_cap, char *url,
			size_t url_cap)
{
	sup_kube *k = ud;
	pthread_mutex_lock(&k->dmu);
	int rc = sup_kube_dir_find(&k->dir, tag, dir_now(k), name, name_cap, url, url_cap);
	pthread_mutex_unlock(&k->dmu);
	return rc;
}

int sup_kube_nodes_pick(void *ud, const char *image, char *node, size_t cap)
{
	sup_kube *k = ud;
	pthread_mutex_lock(&k->dmu);
	int rc = sup_kube_dir_pick(&k->dir, image, dir_now(k), node, cap);
	pthread_mutex_unlock(&k->dmu);
	return rc;
}

void sup_kube_nodes_each(void *ud, void (*fn)(void *fn_ud, const char *name, const char *url),
			 void *fn_ud)
{
	sup_kube *k = ud;
	pthread_mutex_lock(&k->dmu);
	sup_kube_dir_each(&k->dir, dir_now(k), fn, fn_ud);
	pthread_mutex_unlock(&k->dmu);
}

const sup_directory_ops sup_kube_directory_ops = { sup_kube_nodes_find, sup_kube_nodes_pick,
						   sup_kube_nodes_each };

int sup_kube_nodes_list(sup_kube *k, sup_kube_node **out, size_t *n)
{
	pthread_mutex_lock(&k->dmu);
	*n = k->dir.n;
	*out = malloc((k->dir.n ? k->dir.n : 1) * sizeof(**out));
	if (*out && k->dir.n)
		memcpy(*out, k->dir.v, k->dir.n * sizeof(**out));
	for (size_t i = 0; *out && i < k->dir.n; i++)
		(*out)[i].live = sup_kube_dir_live(&k->dir, &(*out)[i], dir_now(k));
	pthread_mutex_unlock(&k->dmu);
	return *out ? 0 : -ENOMEM;
}

const char *sup_kube_self(const sup_kube *k)
{
	return k->node;
}

void sup_kube_get_stats(sup_kube *k, sup_kube_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&k->mu);
	out->leases_renewed = k->renewed;
	out->events_sent = k->sent;
	out->events_dropped = k->q.dropped + k->refused;
	out->events_queued = k->q.n;
	pthread_mutex_unlock(&k->mu);
	pthread_mutex_lock(&k->dmu);
	out->watch_resumes = k->resumes;
	out->relists = k->relists;
	pthread_mutex_unlock(&k->dmu);
	out->connected = atomic_load(&k->connected);
}

/* ---- start, stop ---- */

/* A DNS-1123 subdomain: what a Lease's and an Event's name must be. */
static bool dns_name(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (!n || n > max || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		      s[i] == '.'))
			return false;
	return true;
}

/* One GET of our Lease: refused credentials or rights fail the start. */
static int probe(sup_kube *k, sbx_err *err)
{
	char path[SUP_KUBE_PATH_MAX];
	snprintf(path, sizeof(path), LEASES_API "%s/leases/%s", k->ns, k->lease);
	sup_kube_resp r;
	if (sup_kube_http_do(k->wh, "GET", path, NULL, &r, err) < 0) {
		sup_warn("kube: API server does not answer (%s): the lease and the directory wait for it, retrying with backoff",
			 err->msg);
		return 0;
	}
	long st = r.status;
	char why[400];
	sup_kube_resp_why(&r, why, sizeof(why));
	sup_kube_resp_release(&r);
	k->lease_exists = st == 200;
	if (st == 401)
		return sbx_err_set(err, -EACCES, "the API server refuses these credentials: %s", why);
	if (st == 403)
		return sbx_err_set(err, -EACCES, "not allowed to read lease %s/%s (RBAC: daemonset/rbac.yaml): %s",
				   k->ns, k->lease, why);
	if (st != 200 && st != 404)
		sup_warn("kube: GET lease %s/%s: %s", k->ns, k->lease, why);
	else
		atomic_store(&k->connected, true);
	return 0;
}

sup_kube *sup_kube_start(const sup_kube_opts *o, sbx_err *err)
{
	if (!dns_name(o->node, SUP_KUBE_NODE_MAX - 1) || !dns_name(o->ns, SUP_KUBE_NS_MAX - 1)) {
		sbx_err_set(err, -EINVAL, "node name '%.80s' or namespace '%.80s' is not a lowercase DNS name",
			    o->node, o->ns);
		return NULL;
	}
	if (strlen(o->url) >= SUP_KUBE_URL_MAX) {
		sbx_err_set(err, -EINVAL, "advertised URL too long");
		return NULL;
	}
	sup_kube *k = calloc(1, sizeof(*k));
	if (!k) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	snprintf(k->ns, sizeof(k->ns), "%s", o->ns);
	snprintf(k->node, sizeof(k->node), "%s", o->node);
	/* A Lease's name is a DNS subdomain too: a node name too long for the
	 * prefix names its Lease by its tag (the annotation keeps the name). */
	char tag[SUP_NODEID_TAG_MAX + 1];
	sup_nodeid_tag(o->node, tag);
	snprintf(k->lease, sizeof(k->lease), "sbx-node-%s",
		 strlen(o->node) + 9 <= SUP_KUBE_NODE_MAX - 1 ? o->node : tag);
	snprintf(k->short_lease, sizeof(k->short_lease), "sbx-node-%s", tag);
	snprintf(k->url, sizeof(k->url), "%s", o->url);
	k->lease_s = o->lease_s ? o->lease_s : 40;
	pthread_mutex_init(&k->mu, NULL);
	pthread_mutex_init(&k->dmu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->cond, &ca);
	pthread_condattr_destroy(&ca);
	sup_kube_dir_init(&k->dir, o->node);
	if (sup_kube_queue_init(&k->q, o->queue_max ? o->queue_max : 256) < 0) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		goto fail;
	}
	k->wh = sup_kube_http_new(o->cfg, &k->stop, o->timeout_ms, err);
	k->rh = k->wh ? sup_kube_http_new(o->cfg, &k->stop, o->timeout_ms, err) : NULL;
	if (!k->rh || probe(k, err) < 0)
		goto fail;
	int e = pthread_create(&k->writer, NULL, writer_main, k);
	k->writer_started = e == 0;
	if (e == 0) {
		e = pthread_create(&k->watcher, NULL, watcher_main, k);
		k->watcher_started = e == 0;
	}
	if (e) {
		sbx_err_set(err, -e, "kube threads: %s", strerror(e));
		goto fail;
	}
	sup_info("kube: node %s, lease %s/%s (%u s, renewed every %u ms), advertising %s, via %s",
		 k->node, k->ns, k->lease, k->lease_s, k->lease_s * 1000 / 4, k->url, o->cfg->server);
	return k;
fail:
	sup_kube_free(k);
	return NULL;
}

void sup_kube_free(sup_kube *k)
{
	if (!k)
		return;
	atomic_store(&k->stop, true);
	pthread_mutex_lock(&k->mu);
	pthread_cond_broadcast(&k->cond);
	pthread_mutex_unlock(&k->mu);
	if (k->writer_started)
		pthread_join(k->writer, NULL);
	if (k->watcher_started)
		pthread_join(k->watcher, NULL);
	if (k->q.n)
		sup_warn("kube: %zu event(s) not delivered at exit", k->q.n);
	sup_kube_http_free(k->wh);
	sup_kube_http_free(k->rh);
	sup_kube_queue_release(&k->q);
	sup_kube_dir_release(&k->dir);
	pthread_cond_destroy(&k->cond);
	pthread_mutex_destroy(&k->mu);
	pthread_mutex_destroy(&k->dmu);
	free(k);
}
