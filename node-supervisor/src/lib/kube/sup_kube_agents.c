/* sup_kube_agents: the agents' folder watched with libinotifytools
 * (sup_kube_agents.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inotifytools/inotify.h>
#include <inotifytools/inotifytools.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbx/clock.h"
#include "sup_kube_agents.h"
#include "sup_log.h"

#define TOP_EVENTS (IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR)
#define UID_EVENTS (IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW)

typedef struct entry {
	char uid[SUP_KUBE_UID_MAX];
	int wd;            /* its folder's watch, 0: none (claimed before it appeared) */
	bool present;      /* its folder exists */
	bool sock;         /* its socket is there */
	bool claimed;      /* ours to dial */
	bool judged;       /* logged as foreign */
	bool forgotten;    /* its pod goes: the watching thread drops it */
	long long sock_ms; /* when its socket was seen */
} entry;

struct sup_kube_agents {
	char dir[4096];
	int top_wd;
	pthread_t thread;
	bool started;
	atomic_bool stop;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	entry *v;
	size_t n, cap;
	bool full_logged;
	unsigned long foreign;
};

/* A UID folder's name: what a pod UID can be (hex and '-'), so that no
 * name of the folder leads a path anywhere else. */
static bool uid_ok(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n < SUP_KUBE_UID_MAX && strspn(s, "0123456789abcdef-") == n;
}

/* mu held */
static entry *find(sup_kube_agents *a, const char *uid)
{
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i].uid, uid) == 0)
			return &a->v[i];
	return NULL;
}

/* mu held; NULL when the table is full */
static entry *get(sup_kube_agents *a, const char *uid)
{
	entry *e = find(a, uid);
	if (e)
		return e;
	if (a->n == SUP_KUBE_AGENTS_MAX) {
		if (!a->full_logged)
			sup_warn("agents: more than %d pod folders in %s: the rest are not watched", SUP_KUBE_AGENTS_MAX,
				 a->dir);
		a->full_logged = true;
		return NULL;
	}
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 32;
		entry *v = realloc(a->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		a->v = v;
		a->cap = cap;
	}
	e = &a->v[a->n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->uid, sizeof(e->uid), "%s", uid);
	return e;
}

/* mu held; the watching thread's alone when e->wd > 0 (libinotifytools
 * is not for two threads at once) */
static void drop(sup_kube_agents *a, entry *e)
{
	/* a folder gone already took its watch with it (the library would
	 * only print that it cannot remove it) */
	char path[4096 + SUP_KUBE_UID_MAX + 2];
	snprintf(path, sizeof(path), "%s/%s", a->dir, e->uid);
	struct stat st;
	if (e->wd > 0 && lstat(path, &st) == 0)
		inotifytools_remove_watch_by_wd(e->wd);
	*e = a->v[--a->n];
}

/* Is <dir>/<uid>/agent.sock a socket (not followed)? */
static bool sock_there(const sup_kube_agents *a, const char *uid)
{
	char path[4096 + SUP_KUBE_UID_MAX + 16];
	snprintf(path, sizeof(path), "%s/%s/" SUP_KUBE_AGENT_SOCK, a->dir, uid);
	struct stat st;
	return lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* mu held: the socket of e is there now. */
static void sock_seen(sup_kube_agents *a, entry *e)
{
	if (e->sock)
		return;
	e->sock = true;
	e->sock_ms = (long long)sbx_now_ms();
	pthread_cond_broadcast(&a->cond);
}

/* A UID folder appeared (or was there at start): watched, then looked
 * into, so that a socket made before the watch is not missed. Thread. */
static void folder_added(sup_kube_agents *a, const char *uid)
{
	if (!uid_ok(uid))
		return;
	/* libinotifytools keeps a folder's name with a '/' at its end */
	char path[4096 + SUP_KUBE_UID_MAX + 3];
	snprintf(path, sizeof(path), "%s/%s/", a->dir, uid);
	int wd = inotifytools_watch_file(path, UID_EVENTS) ? inotifytools_wd_from_filename(path) : -1;
	pthread_mutex_lock(&a->mu);
	entry *e = get(a, uid);
	if (e) {
		e->present = true;
		if (wd > 0)
			e->wd = wd;
		if (sock_there(a, uid))
			sock_seen(a, e);
	} else if (wd > 0) {
		inotifytools_remove_watch_by_wd(wd);
	}
	pthread_mutex_unlock(&a->mu);
}

/* The kernel dropped the folder's watch with it: the library's record of
 * it stays (it has no call to forget a watch the kernel ended), so our
 * own pods' watches are removed before their folders go (forget). */
static void folder_removed(sup_kube_agents *a, const char *uid)
{
	pthread_mutex_lock(&a->mu);
	entry *e = find(a, uid);
	if (e) {
		e->wd = 0;
		e->present = e->sock = false;
		if (!e->claimed)
			drop(a, e);
	}
	pthread_mutex_unlock(&a->mu);
}

/* Every UID folder as it is now (at start, and after the kernel's queue
 * overflowed). Thread. */
static void rescan(sup_kube_agents *a)
{
	DIR *d = opendir(a->dir);
	if (!d) {
		sup_warn("agents: %s: %s", a->dir, strerror(errno));
		return;
	}
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			folder_added(a, de->d_name);
	closedir(d);
}

/* Sockets nobody claimed within the grace: logged once each; forgotten
 * UIDs dropped. mu held, the watching thread. */
static void judge(sup_kube_agents *a)
{
	long long now = (long long)sbx_now_ms();
	for (size_t i = 0; i < a->n;) {
		entry *e = &a->v[i];
		if (e->forgotten) {
			drop(a, e); /* the last one moves into i */
			continue;
		}
		i++;
		if (!e->sock || e->claimed || e->judged || now - e->sock_ms < SUP_KUBE_FOREIGN_GRACE_MS)
			continue;
		e->judged = true;
		a->foreign++;
		sup_warn("agents: %s/%s/" SUP_KUBE_AGENT_SOCK ": no pod this supervisor made or took back has UID %s: ignored, never dialled",
			 a->dir, e->uid, e->uid);
	}
}

static void on_event(sup_kube_agents *a, struct inotify_event *ev)
{
	if (ev->mask & IN_Q_OVERFLOW) {
		sup_warn("agents: inotify queue overflowed: %s looked at again", a->dir);
		rescan(a);
		return;
	}
	if (!ev->len)
		return;
	if (ev->wd == a->top_wd) {
		if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && (ev->mask & IN_ISDIR))
			folder_added(a, ev->name);
		else if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
			folder_removed(a, ev->name);
		return;
	}
	if (strcmp(ev->name, SUP_KUBE_AGENT_SOCK) != 0)
		return;
	pthread_mutex_lock(&a->mu);
	for (size_t i = 0; i < a->n; i++) {
		entry *e = &a->v[i];
		if (e->wd == ev->wd) {
			if (sock_there(a, e->uid))
				sock_seen(a, e);
			break;
		}
	}
	pthread_mutex_unlock(&a->mu);
}

static void *watch_main(void *ud)
{
	sup_kube_agents *a = ud;
	rescan(a);
	while (!atomic_load(&a->stop)) {
		/* at most a second, so that a stop and the judging are prompt */
		struct inotify_event *ev = inotifytools_next_event(1);
		if (ev)
			on_event(a, ev);
		else if (inotifytools_error() && inotifytools_error() != EINTR)
			sup_warn("agents: inotify: %s", strerror(inotifytools_error()));
		pthread_mutex_lock(&a->mu);
		judge(a);
		pthread_mutex_unlock(&a->mu);
	}
	return NULL;
}

sup_kube_agents *sup_kube_agents_start(const char *dir, sbx_err *err)
{
	sup_kube_agents *a = calloc(1, sizeof(*a));
	if (!a) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	if (snprintf(a->dir, sizeof(a->dir), "%s", dir) >= (int)sizeof(a->dir)) {
		free(a);
		sbx_err_set(err, -ENAMETOOLONG, "--agent-dir too long");
		return NULL;
	}
	pthread_mutex_init(&a->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (!inotifytools_initialize()) {
		sbx_err_sys(err, -(inotifytools_error() ? inotifytools_error() : EIO), "inotify");
		sup_kube_agents_free(a);
		return NULL;
	}
	char top[sizeof(a->dir) + 1];
	snprintf(top, sizeof(top), "%s/", a->dir);
	if (!inotifytools_watch_file(top, TOP_EVENTS) || (a->top_wd = inotifytools_wd_from_filename(top)) <= 0) {
		int e = inotifytools_error() ? inotifytools_error() : EIO;
		inotifytools_cleanup();
		sbx_err_sys(err, -e, "--agent-dir %s", a->dir);
		sup_kube_agents_free(a);
		return NULL;
	}
	int e = pthread_create(&a->thread, NULL, watch_main, a);
	if (e) {
		inotifytools_cleanup();
		sbx_err_set(err, -e, "agents thread: %s", strerror(e));
		sup_kube_agents_free(a);
		return NULL;
	}
	a->started = true;
	return a;
}

void sup_kube_agents_free(sup_kube_agents *a)
{
	if (!a)
		return;
	atomic_store(&a->stop, true);
	pthread_mutex_lock(&a->mu);
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->mu);
	if (a->started) {
		pthread_join(a->thread, NULL);
		inotifytools_cleanup();
	}
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->mu);
	free(a->v);
	free(a);
}

int sup_kube_agents_wait(sup_kube_agents *a, const char *uid, unsigned timeout_ms, sbx_err *err)
{
	if (!uid_ok(uid))
		return sbx_err_set(err, -EINVAL, "pod UID \"%.64s\" is not one", uid);
	long long deadline = (long long)sbx_now_ms() + timeout_ms;
	int rc = 0;
	pthread_mutex_lock(&a->mu);
	entry *e = get(a, uid);
	if (!e) {
		pthread_mutex_unlock(&a->mu);
		return sbx_err_set(err, -ENOSPC, "more than %d pod folders", SUP_KUBE_AGENTS_MAX);
	}
	e->claimed = true;
	for (;;) {
		/* looked at directly too: a wake-up the watch missed costs at
		 * most one slice */
		e = find(a, uid);
		if (e && (e->sock || sock_there(a, uid))) {
			if (!e->sock)
				sock_seen(a, e);
			break;
		}
		if (atomic_load(&a->stop)) {
			rc = sbx_err_set(err, -ECANCELED, "the supervisor is stopping");
			break;
		}
		long long left = deadline - (long long)sbx_now_ms();
		if (left <= 0) {
			rc = sbx_err_set(err, -ETIMEDOUT, "no agent socket in %s/%s within %u ms", a->dir, uid,
					 timeout_ms);
			break;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		long long slice = left < 250 ? left : 250;
		ts.tv_nsec += (long)(slice * 1000000);
		ts.tv_sec += ts.tv_nsec / 1000000000;
		ts.tv_nsec %= 1000000000;
		pthread_cond_timedwait(&a->cond, &a->mu, &ts);
	}
	pthread_mutex_unlock(&a->mu);
	return rc;
}

void sup_kube_agents_claim(sup_kube_agents *a, const char *uid)
{
	if (!uid_ok(uid))
		return;
	pthread_mutex_lock(&a->mu);
	entry *e = get(a, uid);
	if (e)
		e->claimed = true;
	pthread_mutex_unlock(&a->mu);
}

void sup_kube_agents_forget(sup_kube_agents *a, const char *uid)
{
	pthread_mutex_lock(&a->mu);
	entry *e = find(a, uid);
	if (e && e->wd <= 0) {
		drop(a, e);
	} else if (e) {
		/* its watch is the watching thread's to remove */
		e->claimed = false;
		e->forgotten = true;
	}
	pthread_mutex_unlock(&a->mu);
}

unsigned long sup_kube_agents_foreign(sup_kube_agents *a)
{
	pthread_mutex_lock(&a->mu);
	unsigned long n = a->foreign;
	pthread_mutex_unlock(&a->mu);
	return n;
}
