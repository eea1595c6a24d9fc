/* sup_kube_pods: sandboxes as pods of this node (sup_kube_pods.h). */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/clock.h"
#include "sup_kube_agents.h"
#include "sup_kube_events.h"
#include "sup_kube_http.h"
#include "sup_kube_pods.h"
#include "sup_kube_retry.h"
#include "sup_log.h"
#include "sup_nodeid.h"
#include "sup_runc_clean.h"
#include "sup_text.h"

#define PODS_API "/api/v1/namespaces/"
#define HTTP_IDLE_MAX 8      /* connections kept for the workers */
#define STATUS_EVERY_MS 2000 /* a pod's phase looked at while its agent is awaited */
#define CONNECT_MIN_MS 2000  /* a socket bound but not listening yet */

struct sup_kube_pods {
	const sup_kube_cfg *cfg;
	char ns[SUP_KUBE_NS_MAX];
	char node[256];
	char agent_dir[4096];
	const sup_kube_tmpl *tmpls;
	size_t ntmpls;
	unsigned ready_ms, timeout_ms;
	const sup_cgroup_host *cgroup;
	sup_kube_agents *agents;
	atomic_bool stop;        /* every request ends (freeing) */
	atomic_bool stop_makes;  /* the pools stop: no pod is waited for */

	pthread_mutex_t hmu; /* the idle connections */
	sup_kube_http *idle[HTTP_IDLE_MAX];
	size_t nidle;

	pthread_mutex_t mu;  /* the patches and Events */
	pthread_cond_t cond;
	sup_kube_queue q;
	sup_kube_evs evs;
	pthread_t writer;
	bool writer_started;
	sup_kube_http *wh;
};

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

static const sup_kube_tmpl *tmpl_of(const sup_kube_pods *p, const char *name)
{
	for (size_t i = 0; i < p->ntmpls; i++)
		if (strcmp(p->tmpls[i].name, name) == 0)
			return &p->tmpls[i];
	return NULL;
}

static const char *str_at(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* ---- connections ---- */

static sup_kube_http *http_get(sup_kube_pods *p, sbx_err *err)
{
	sup_kube_http *h = NULL;
	pthread_mutex_lock(&p->hmu);
	if (p->nidle)
		h = p->idle[--p->nidle];
	pthread_mutex_unlock(&p->hmu);
	return h ? h : sup_kube_http_new(p->cfg, &p->stop, p->timeout_ms, err);
}

static void http_put(sup_kube_pods *p, sup_kube_http *h)
{
	pthread_mutex_lock(&p->hmu);
	if (h && p->nidle < HTTP_IDLE_MAX) {
		p->idle[p->nidle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&p->hmu);
	sup_kube_http_free(h);
}

/* One request; a status outside 2xx is -EPROTO with the server's words,
 * but the answer is kept in r for the caller to read. */
static int request(sup_kube_http *h, const char *method, const char *path, const char *body,
		   sup_kube_resp *r, sbx_err *err)
{
	int rc = sup_kube_http_do(h, method, path, body, r, err);
	if (rc < 0)
		return rc;
	if (r->status >= 200 && r->status < 300)
		return 0;
	char why[400];
	sup_kube_resp_why(r, why, sizeof(why));
	int code = r->status == 404 ? -ENOENT : r->status == 409 ? -EEXIST
		 : r->status == 401 || r->status == 403 ? -EACCES
		 : r->status == 400 || r->status == 422 ? -EINVAL : -EAGAIN;
	return sbx_err_set(err, code, "%s %s: %s", method, path, why);
}

/* DELETE the pod name if it is still the one of uid (a precondition: a
 * pod of that name made by someone else since is left alone). */
static int delete_pod(sup_kube_pods *p, sup_kube_http *h, const char *name, const char *uid, sbx_err *err)
{
	char path[SUP_KUBE_PATH_MAX], body[200];
	snprintf(path, sizeof(path), PODS_API "%s/pods/%s", p->ns, name);
	snprintf(body, sizeof(body),
		 "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\",\"preconditions\":{\"uid\":\"%s\"}}", uid);
	sup_kube_resp r;
	int rc = request(h, "DELETE", path, uid[0] ? body : NULL, &r, err);
	sup_kube_resp_release(&r);
	/* gone already, or another pod by now: nothing of ours to delete */
	if (rc == -ENOENT || rc == -EEXIST)
		return 0;
	return rc;
}

/* ---- Events ---- */

static uint32_t rnd32(void);

/* A Warning Event about pod (uid) of template tmpl, coalesced
 * (sup_kube_events) and queued for the writer: the mutex only, never the
 * network. */
static void pod_event(sup_kube_pods *p, const char *tmpl, const char *pod, const char *uid, const char *reason,
		      const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static void pod_event(sup_kube_pods *p, const char *tmpl, const char *pod, const char *uid, const char *reason,
		      const char *fmt, ...)
{
	char msg[SUP_KUBE_EV_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	struct timespec wall;
	clock_gettime(CLOCK_REALTIME, &wall);
	sup_kube_pod_ev ev = { .ns = p->ns, .node = p->node, .pod = pod, .uid = uid, .tmpl = tmpl,
			       .reason = reason, .message = msg, .warning = true };
	char name[SUP_KUBE_EV_NAME_MAX], key[SUP_KUBE_KEY_MAX], path[SUP_KUBE_PATH_MAX], dropped[SUP_KUBE_KEY_MAX];
	snprintf(path, sizeof(path), PODS_API "%s/events", p->ns);
	uint32_t r = rnd32();
	pthread_mutex_lock(&p->mu);
	char *body = sup_kube_evs_note(&p->evs, &ev, (long long)sbx_now_ms(), &wall, r, name, sizeof(name));
	snprintf(key, sizeof(key), SUP_KUBE_EV_KEY_PREFIX "%s", name);
	/* a repeat not sent yet replaces its write in place: one per Event */
	sup_kube_push pr = body ? sup_kube_queue_push(&p->q, key, "POST", path, body, dropped) : SUP_KUBE_PUSH_NOMEM;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->mu);
	if (pr == SUP_KUBE_PUSH_NOMEM)
		sup_warn("pod %s/%s: out of memory, Event %s not sent", p->ns, pod, reason);
	else if (pr == SUP_KUBE_PUSH_DROPPED)
		sup_warn("pods: write queue full: %s dropped", dropped);
}

void sup_kube_pods_doubt(sup_kube_pods *p, const char *tmpl, const sup_runc_box *box, const char *reason,
			 const char *why)
{
	const char *s = strrchr(box->dir, '/');
	pod_event(p, tmpl, box->container_id, s ? s + 1 : "", reason, "pod %s deleted by node %s's supervisor: %s",
		  box->container_id, p->node, why);
}

/* ---- make ---- */

/* The pod as the API server has it now is the one we made: that UID, this
 * node, our namespace and labels, not being deleted. */
static int verify(const sup_kube_pods *p, json_t *pod, const char *name, const char *uid, sbx_err *err)
{
	json_t *meta = json_object_get(pod, "metadata");
	json_t *labels = json_object_get(meta, "labels");
	const char *got_uid = str_at(meta, "uid"), *ns = str_at(meta, "namespace");
	const char *node = str_at(json_object_get(pod, "spec"), "nodeName");
	const char *app = str_at(labels, SUP_KUBE_L_APP), *lnode = str_at(labels, SUP_KUBE_L_NODE);
	if (!got_uid || strcmp(got_uid, uid) != 0)
		return sbx_err_set(err, -EPERM, "pod %s has UID %.64s, not %s", name, got_uid ? got_uid : "(none)", uid);
	if (!ns || strcmp(ns, p->ns) != 0 || !node || strcmp(node, p->node) != 0)
		return sbx_err_set(err, -EPERM, "pod %s is not in %s on node %s", name, p->ns, p->node);
	char tag[SUP_NODEID_TAG_MAX + 1];
	sup_nodeid_tag(p->node, tag);
	if (!app || strcmp(app, SUP_KUBE_L_APP_VALUE) != 0 || !lnode || strcmp(lnode, tag) != 0)
		return sbx_err_set(err, -EPERM, "pod %s does not carry this node's sandbox labels", name);
	if (json_object_get(meta, "deletionTimestamp"))
		return sbx_err_set(err, -EPERM, "pod %s is being deleted", name);
	return 0;
}

static int get_pod(sup_kube_pods *p, sup_kube_http *h, const char *name, sup_kube_resp *r, sbx_err *err)
{
	char path[SUP_KUBE_PATH_MAX];
	snprintf(path, sizeof(path), PODS_API "%s/pods/%s", p->ns, name);
	return request(h, "GET", path, NULL, r, err);
}

/* Its agent's socket, bounded by the ready timeout; the pod looked at
 * meanwhile, so that one that failed or went is not waited for. */
static int wait_agent(sup_kube_pods *p, sup_kube_http *h, const char *name, const char *uid, long long deadline,
		      sbx_err *err)
{
	long long next_look = (long long)sbx_now_ms() + STATUS_EVERY_MS;
	for (;;) {
		long long left = deadline - (long long)sbx_now_ms();
		unsigned slice = left <= 0 ? 0 : left > 1000 ? 1000 : (unsigned)left;
		int rc = sup_kube_agents_wait(p->agents, uid, slice, err);
		if (rc != -ETIMEDOUT)
			return rc;
		if (atomic_load(&p->stop_makes))
			return sbx_err_set(err, -ECANCELED, "the supervisor is stopping");
		if ((long long)sbx_now_ms() >= deadline)
			return sbx_err_set(err, -ETIMEDOUT, "pod %s: its agent did not listen within %u ms", name,
					   p->ready_ms);
		if ((long long)sbx_now_ms() < next_look)
			continue;
		next_look = (long long)sbx_now_ms() + STATUS_EVERY_MS;
		sup_kube_resp r;
		rc = get_pod(p, h, name, &r, err);
		const char *phase = str_at(json_object_get(r.body, "status"), "phase");
		if (rc == 0 && phase && (strcmp(phase, "Failed") == 0 || strcmp(phase, "Succeeded") == 0))
			rc = sbx_err_set(err, -EIO, "pod %s ended (%s) before its agent listened", name, phase);
		if (rc == 0)
			rc = verify(p, r.body, name, uid, err);
		sup_kube_resp_release(&r);
		if (rc == -ENOENT || rc == -EIO || rc == -EPERM)
			return rc;
		/* the server away is no reason to stop waiting for the node's agent */
	}
}

/* The listener of the socket (pid) sees the pod's folder (dir) at the
 * template's agent-socket mount: it is that pod's agent, not a process
 * that got hold of the folder. */
static int same_folder(pid_t pid, const char *mount, const char *dir, sbx_err *err)
{
	char root_path[64];
	snprintf(root_path, sizeof(root_path), "/proc/%d/root", (int)pid);
	SBX_AUTO_CLOSE int root = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return sbx_err_sys(err, -errno, "open %s", root_path);
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	long in = syscall(SYS_openat2, root, mount + 1, &how, sizeof(how));
	if (in < 0)
		return sbx_err_set(err, -EPERM, "the socket's listener (pid %d) has no folder %s (%s): not the pod's agent",
				   (int)pid, mount, strerror(errno));
	SBX_AUTO_CLOSE int infd = (int)in;
	SBX_AUTO_CLOSE int host = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (host < 0)
		return sbx_err_sys(err, -errno, "open %s", dir);
	struct stat a, b;
	if (fstat(infd, &a) < 0 || fstat(host, &b) < 0)
		return sbx_err_sys(err, -errno, "stat %s", dir);
	if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return sbx_err_set(err, -EPERM, "the socket's listener (pid %d) does not have %s at %s: not the pod's agent",
				   (int)pid, dir, mount);
	return 0;
}

/* Connect (no link followed: sup_runc_connect_agent) and take the agent's
 * pid from the socket. */
static int dial(const sup_kube_tmpl *t, sup_runc_box *box, long long deadline, int *out, sbx_err *err)
{
	int fd;
	for (;;) {
		fd = sup_runc_connect_agent(box, SOCK_NONBLOCK, err);
		if (fd >= 0 || (fd != -ECONNREFUSED && fd != -EAGAIN) || (long long)sbx_now_ms() >= deadline)
			break;
		sleep_ms(20); /* bound, not listening yet */
	}
	if (fd < 0)
		return fd;
	SBX_AUTO_CLOSE int s = fd;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return sbx_err_sys(err, -errno, "SO_PEERCRED of %s", box->socket_path);
	if (cred.pid <= 0)
		return sbx_err_set(err, -EPERM, "%s: its listener is in no pid namespace this supervisor sees "
				   "(the supervisor needs the host's: hostPID)", box->socket_path);
	int rc = same_folder(cred.pid, t->agent_mount, box->dir, err);
	if (rc < 0)
		return rc;
	box->init_pid = cred.pid;
	*out = sbx_steal_fd(&s);
	return 0;
}

/* box's names and paths for pod id of UID uid. */
static int box_of(const sup_kube_pods *p, const char *id, const char *uid, sup_runc_box *box, sbx_err *err)
{
	snprintf(box->id, sizeof(box->id), "%s", id);
	snprintf(box->container_id, sizeof(box->container_id), "%s", id);
	box->isolation = SUP_ISO_RUNC;
	if (snprintf(box->dir, sizeof(box->dir), "%s/%s", p->agent_dir, uid) >= (int)sizeof(box->dir) ||
	    snprintf(box->socket_path, sizeof(box->socket_path), "%s/%s/" SUP_KUBE_AGENT_SOCK, p->agent_dir,
		     uid) >= (int)sizeof(box->socket_path))
		return sbx_err_set(err, -ENAMETOOLONG, "the agent's socket path is too long (--agent-dir)");
	return 0;
}

static int make_pod(sup_kube_pods *p, sup_kube_http *h, const sup_kube_tmpl *t, const char *id, sup_runc_box *box,
		    int *fd, char *uid, sbx_err *err)
{
	long long deadline = (long long)sbx_now_ms() + p->ready_ms;
	SBX_AUTO_FREE char *body = sup_kube_tmpl_pod(t, id, p->ns, p->node);
	if (!body)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	char path[SUP_KUBE_PATH_MAX];
	snprintf(path, sizeof(path), PODS_API "%s/pods", p->ns);
	sup_kube_resp r;
	int rc = request(h, "POST", path, body, &r, err);
	const char *u = str_at(json_object_get(r.body, "metadata"), "uid");
	if (rc == 0 && (!u || strlen(u) >= SUP_KUBE_UID_MAX || strspn(u, "0123456789abcdef-") != strlen(u)))
		rc = sbx_err_set(err, -EPROTO, "pod %s: the server's answer has no UID", id);
	if (rc == 0)
		snprintf(uid, SUP_KUBE_UID_MAX, "%s", u);
	sup_kube_resp_release(&r);
	if (rc < 0)
		return rc;
	sup_debug("pod %s/%s: created (UID %s), waiting for its agent", p->ns, id, uid);
	if ((rc = wait_agent(p, h, id, uid, deadline, err)) < 0)
		return rc;
	rc = get_pod(p, h, id, &r, err);
	rc = rc ?: verify(p, r.body, id, uid, err);
	sup_kube_resp_release(&r);
	if (rc < 0)
		return sbx_err_wrap(err, "identity");
	if ((rc = box_of(p, id, uid, box, err)) < 0)
		return rc;
	long long soonest = (long long)sbx_now_ms() + CONNECT_MIN_MS;
	long long cdl = deadline > soonest ? deadline : soonest;
	return dial(t, box, cdl, fd, err);
}

int sup_kube_pods_adopt(sup_kube_pods *p, const char *id, const char *name, sup_runc_box *box, int *fd,
			sbx_err *err)
{
	*fd = -1;
	memset(box, 0, sizeof(*box));
	if (strcmp(id, name) != 0)
		return sbx_err_set(err, -EINVAL, "pod %s is not sandbox %s's", name, id);
	sup_kube_http *h = http_get(p, err);
	if (!h)
		return err->code;
	sup_kube_resp r;
	int rc = get_pod(p, h, name, &r, err);
	json_t *meta = json_object_get(r.body, "metadata");
	const char *uid = str_at(meta, "uid");
	const char *tname = str_at(json_object_get(meta, "labels"), SUP_KUBE_L_TEMPLATE);
	const sup_kube_tmpl *t = tname ? tmpl_of(p, tname) : NULL;
	char u[SUP_KUBE_UID_MAX] = "";
	if (rc == 0 && (!uid || strlen(uid) >= sizeof(u)))
		rc = sbx_err_set(err, -EPROTO, "pod %s has no UID", name);
	if (rc == 0) {
		snprintf(u, sizeof(u), "%s", uid);
		rc = verify(p, r.body, name, u, err);
	}
	if (rc == 0 && !t)
		rc = sbx_err_set(err, -ENOENT, "pod %s: template %.64s is not served any more", name,
				 tname ? tname : "(none)");
	sup_kube_resp_release(&r);
	http_put(p, h);
	if (rc == 0)
		rc = box_of(p, id, u, box, err);
	if (rc == 0) {
		sup_kube_agents_claim(p->agents, u);
		rc = dial(t, box, (long long)sbx_now_ms(), fd, err);
		if (rc < 0)
			sup_kube_agents_forget(p->agents, u);
	}
	if (rc < 0)
		return sbx_err_wrap(err, "pod %s/%s", p->ns, name);
	sup_info("pod %s/%s: taken back (agent pid %d)", p->ns, name, (int)box->init_pid);
	return 0;
}

int sup_kube_pods_make(sup_kube_pods *p, const char *id, const char *tmpl, sup_runc_box *box, int *fd,
		       sbx_err *err)
{
	*fd = -1;
	memset(box, 0, sizeof(*box));
	const sup_kube_tmpl *t = tmpl_of(p, tmpl);
	if (!t)
		return sbx_err_set(err, -EINVAL, "no pod template %.100s", tmpl);
	if (atomic_load(&p->stop_makes))
		return sbx_err_set(err, -ECANCELED, "the supervisor is stopping");
	sup_kube_http *h = http_get(p, err);
	if (!h)
		return err->code;
	char uid[SUP_KUBE_UID_MAX] = "";
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = make_pod(p, h, t, id, box, fd, uid, err);
	if (rc < 0 && uid[0]) {
		/* made, and in doubt: it goes */
		sbx_err e;
		if (delete_pod(p, h, id, uid, &e) < 0)
			sup_warn("pod %s/%s: not deleted (%s): the next start's sweep deletes it", p->ns, id, e.msg);
		sup_kube_agents_forget(p->agents, uid);
		/* who listens or what the pod is was not what we made: a doubt;
		 * else it did not start */
		if (rc != -ECANCELED)
			pod_event(p, t->name, id, uid, rc == -EPERM ? "IdentityMismatch" : "FailedStart",
				  "pod %s deleted by node %s's supervisor: %s", id, p->node, err->msg);
	}
	http_put(p, h);
	if (rc == -ECANCELED)
		return rc; /* not the pod's failure */
	if (rc < 0)
		return sbx_err_wrap(err, "pod %s/%s", p->ns, id);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	sup_info("pod %s/%s: agent (pid %d) verified and connected in %ld ms", p->ns, id, (int)box->init_pid,
		 (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
	return 0;
}

void sup_kube_pods_stop_makes(sup_kube_pods *p)
{
	atomic_store(&p->stop_makes, true);
}

/* ---- unmake, check ---- */

/* The pod's UID: the name of its folder in the agents' folder. */
static const char *uid_of(const sup_runc_box *box)
{
	const char *s = strrchr(box->dir, '/');
	return s ? s + 1 : "";
}

int sup_kube_pods_unmake(sup_kube_pods *p, const sup_runc_box *box, sbx_err *err)
{
	sup_kube_http *h = http_get(p, err);
	if (!h)
		return err->code;
	int rc = delete_pod(p, h, box->container_id, uid_of(box), err);
	http_put(p, h);
	sup_kube_agents_forget(p->agents, uid_of(box));
	return rc < 0 ? sbx_err_wrap(err, "delete pod %s/%s", p->ns, box->container_id) : 0;
}

int sup_kube_pods_check(sup_kube_pods *p, const char *tmpl, const sup_runc_box *box, sbx_err *err)
{
	const sup_kube_tmpl *t = tmpl_of(p, tmpl);
	if (!t)
		return sbx_err_set(err, -EINVAL, "no pod template %.100s", tmpl);
	int rc = sup_runc_check_pod(p->cgroup, box->init_pid, (const char *const *)t->paths, t->npaths, err);
	/* still the pod's agent (its pid not reused by now) */
	return rc ?: same_folder(box->init_pid, t->agent_mount, box->dir, err);
}

size_t sup_kube_pods_reset_paths(sup_kube_pods *p, const char *tmpl, const char *const **paths)
{
	const sup_kube_tmpl *t = tmpl_of(p, tmpl);
	*paths = t ? (const char *const *)t->paths : NULL;
	return t ? t->npaths : 0;
}

/* ---- marks ---- */

char *sup_kube_pods_mark_patch(const sup_kube_mark *m)
{
	char expires[32] = "";
	if (m->expires_at)
		sup_rfc3339(m->expires_at, expires, sizeof(expires));
	const char *tenant = m->tenant && m->tenant[0] ? m->tenant : NULL;
	/* a tenant name that is no label value is only an annotation */
	const char *tlabel = tenant && sup_kube_label_ok(tenant) ? tenant : NULL;
	json_t *o = json_pack("{s:{s:{s:s,s:s?},s:{s:s?,s:s?,s:s?}}}", "metadata", "labels", SUP_KUBE_L_STATE,
			      m->state, SUP_KUBE_L_TENANT, tlabel, "annotations", SUP_KUBE_A_SANDBOX,
			      m->sandbox && m->sandbox[0] ? m->sandbox : NULL, SUP_KUBE_A_EXPIRES,
			      expires[0] ? expires : NULL, SUP_KUBE_A_TENANT, tenant);
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	return text;
}

void sup_kube_pods_mark(sup_kube_pods *p, const char *pod, const sup_kube_mark *m)
{
	char *body = sup_kube_pods_mark_patch(m);
	if (!body) {
		sup_warn("pod %s: out of memory, its labels not written", pod);
		return;
	}
	char path[SUP_KUBE_PATH_MAX], dropped[SUP_KUBE_KEY_MAX];
	snprintf(path, sizeof(path), PODS_API "%s/pods/%s", p->ns, pod);
	pthread_mutex_lock(&p->mu);
	sup_kube_push r = sup_kube_queue_push(&p->q, pod, "PATCH", path, body, dropped);
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->mu);
	if (r == SUP_KUBE_PUSH_DROPPED)
		sup_warn("pods: patch queue full: the labels of pod %s dropped", dropped);
}

static uint32_t rnd32(void)
{
	uint32_t r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (uint32_t)sbx_now_ms() * 2654435761u;
	return r;
}

static void wait_for(sup_kube_pods *p, unsigned ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000;
	ts.tv_sec += ts.tv_nsec / 1000000000;
	ts.tv_nsec %= 1000000000;
	pthread_cond_timedwait(&p->cond, &p->mu, &ts);
}

/* One queued write. An Event is POSTed, and patched with the same body
 * when it exists (a coalesced repeat, or a retry the server took). */
static int send_write(sup_kube_pods *p, const sup_kube_write *w, bool event, sbx_err *err)
{
	sup_kube_resp r;
	int rc = request(p->wh, w->method, w->path, w->body, &r, err);
	sup_kube_resp_release(&r);
	if (!event || rc != -EEXIST)
		return rc;
	char path[SUP_KUBE_PATH_MAX + SUP_KUBE_KEY_MAX];
	if (snprintf(path, sizeof(path), "%s/%s", w->path, w->key + strlen(SUP_KUBE_EV_KEY_PREFIX)) >=
	    (int)sizeof(path))
		return sbx_err_set(err, -EINVAL, "Event %s: its path is too long", w->key);
	rc = request(p->wh, "PATCH", path, w->body, &r, err);
	sup_kube_resp_release(&r);
	return rc;
}

static void *writer_main(void *ud)
{
	sup_kube_pods *p = ud;
	sup_kube_backoff bo = { .base_ms = 250, .cap_ms = 8000 };
	bool away = false;
	pthread_mutex_lock(&p->mu);
	while (!atomic_load(&p->stop)) {
		sup_kube_write w = { 0 };
		if (sup_kube_queue_peek(&p->q, &w) < 0) {
			wait_for(p, 1000);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		sbx_err err;
		bool event = strncmp(w.key, SUP_KUBE_EV_KEY_PREFIX, strlen(SUP_KUBE_EV_KEY_PREFIX)) == 0;
		int rc = send_write(p, &w, event, &err);
		/* gone (its pod was deleted), or refused for good: dropped */
		bool done = rc == 0 || rc == -ENOENT || rc == -EINVAL || rc == -EEXIST ||
			    (event && rc == -EACCES); /* an Event must not hold the labels up */
		if (rc < 0 && done && rc != -ENOENT)
			sup_warn("pods: %s %s refused, dropped: %s", event ? "Event" : "the labels of pod", w.key,
				 err.msg);
		pthread_mutex_lock(&p->mu);
		if (done) {
			sup_kube_queue_done(&p->q, w.key, w.gen);
			if (away)
				sup_info("pods: API server answers again: %zu label patch(es) to send", p->q.n);
			away = false;
			sup_kube_backoff_reset(&bo);
		} else {
			if (!away)
				sup_warn("pods: %s; label patches retried with backoff (%zu queued)", err.msg, p->q.n);
			away = true;
			wait_for(p, sup_kube_backoff_next(&bo, rnd32()));
		}
		free(w.body);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* ---- sweep ---- */

int sup_kube_pods_sweep(sup_kube_pods *p, const char *const *keep, size_t nkeep, unsigned *n, sbx_err *err)
{
	*n = 0;
	sup_kube_http *h = http_get(p, err);
	if (!h)
		return err->code;
	char path[SUP_KUBE_PATH_MAX];
	sup_kube_resp r = { 0 };
	int rc = 0;
	char tag[SUP_NODEID_TAG_MAX + 1];
	sup_nodeid_tag(p->node, tag);
	if (snprintf(path, sizeof(path),
		     PODS_API "%s/pods?labelSelector=" "app.kubernetes.io%%2Fname%%3D" SUP_KUBE_L_APP_VALUE
			      "%%2Csbx.dev%%2Fnode%%3D%s",
		     p->ns, tag) >= (int)sizeof(path))
		rc = sbx_err_set(err, -ENAMETOOLONG, "node name too long for a label selector");
	else
		rc = request(h, "GET", path, NULL, &r, err);
	size_t i;
	json_t *it;
	json_array_foreach(rc == 0 ? json_object_get(r.body, "items") : NULL, i, it) {
		json_t *meta = json_object_get(it, "metadata");
		const char *name = str_at(meta, "name"), *uid = str_at(meta, "uid");
		bool kept = false;
		for (size_t k = 0; name && k < nkeep && !kept; k++)
			kept = strcmp(keep[k], name) == 0;
		if (!name || !uid || kept)
			continue;
		sbx_err e;
		if (delete_pod(p, h, name, uid, &e) < 0) {
			sup_warn("pod %s/%s: left by an earlier run, not deleted: %s", p->ns, name, e.msg);
			continue;
		}
		sup_info("pod %s/%s: left by an earlier run: deleted", p->ns, name);
		(*n)++;
	}
	sup_kube_resp_release(&r);
	http_put(p, h);
	return rc < 0 ? sbx_err_wrap(err, "this node's sandbox pods") : 0;
}

/* ---- start, stop ---- */

sup_kube_pods *sup_kube_pods_start(const sup_kube_pods_opts *o, sbx_err *err)
{
	sup_kube_pods *p = calloc(1, sizeof(*p));
	if (!p) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	p->cfg = o->cfg;
	snprintf(p->ns, sizeof(p->ns), "%s", o->ns);
	snprintf(p->node, sizeof(p->node), "%s", o->node);
	snprintf(p->agent_dir, sizeof(p->agent_dir), "%s", o->agent_dir);
	p->tmpls = o->tmpls;
	p->ntmpls = o->ntmpls;
	p->ready_ms = o->ready_timeout_ms ? o->ready_timeout_ms : 60000;
	p->timeout_ms = o->timeout_ms ? o->timeout_ms : 10000;
	p->cgroup = o->cgroup;
	pthread_mutex_init(&p->hmu, NULL);
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (sup_kube_queue_init(&p->q, o->queue_max ? o->queue_max : 1024) < 0) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		goto fail;
	}
	p->wh = sup_kube_http_new(p->cfg, &p->stop, p->timeout_ms, err);
	if (!p->wh)
		goto fail;
	p->agents = sup_kube_agents_start(o->agent_dir, err);
	if (!p->agents)
		goto fail;
	int e = pthread_create(&p->writer, NULL, writer_main, p);
	if (e) {
		sbx_err_set(err, -e, "pods thread: %s", strerror(e));
		goto fail;
	}
	p->writer_started = true;
	sup_info("pods: namespace %s, node %s, agents' folder %s, %zu template(s), ready within %u ms", p->ns,
		 p->node, p->agent_dir, p->ntmpls, p->ready_ms);
	return p;
fail:
	sup_kube_pods_free(p);
	return NULL;
}

void sup_kube_pods_free(sup_kube_pods *p)
{
	if (!p)
		return;
	atomic_store(&p->stop, true);
	pthread_mutex_lock(&p->mu);
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->mu);
	if (p->writer_started)
		pthread_join(p->writer, NULL);
	if (p->q.n)
		sup_warn("pods: %zu label patch(es) not sent at exit", p->q.n);
	sup_kube_agents_free(p->agents);
	sup_kube_http_free(p->wh);
	for (size_t i = 0; i < p->nidle; i++)
		sup_kube_http_free(p->idle[i]);
	sup_kube_queue_release(&p->q);
	pthread_cond_destroy(&p->cond);
	pthread_mutex_destroy(&p->mu);
	pthread_mutex_destroy(&p->hmu);
	free(p);
}
