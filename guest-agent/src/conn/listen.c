#include "listen.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "sbx/cleanup.h"
#include "log.h"

#define LISTEN_BACKLOG 128
/* After accept() fails for lack of resources (EMFILE...), pause this long
 * instead of spinning on a socket that stays readable. */
#define LISTEN_RETRY_MS 100

int agent_listen_parse(const char *spec, agent_listen_addr *out, sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	if (strncmp(spec, "unix:", 5) == 0) {
		const char *path = spec + 5;
		size_t len = strlen(path);

		if (len == 0)
			return sbx_err_set(err, -EINVAL, "listen address %s: empty unix socket path", spec);
		if (len >= sizeof(out->path))
			return sbx_err_set(err, -EINVAL, "listen address %s: unix socket path longer than %zu bytes",
					   spec, sizeof(out->path) - 1);
		out->kind = AGENT_LISTEN_UNIX;
		memcpy(out->path, path, len + 1);
		return 0;
	}
	if (strncmp(spec, "vsock:", 6) == 0) {
		const char *p = spec + 6;
		char *end = NULL;
		unsigned long long port;

		if (*p < '0' || *p > '9')
			return sbx_err_set(err, -EINVAL, "listen address %s: vsock port must be a number", spec);
		errno = 0;
		port = strtoull(p, &end, 10);
		if (errno || *end != '\0')
			return sbx_err_set(err, -EINVAL, "listen address %s: vsock port must be a number", spec);
		/* VMADDR_PORT_ANY (2^32-1) means "pick one": not a port to announce. */
		if (port == 0 || port >= VMADDR_PORT_ANY)
			return sbx_err_set(err, -EINVAL, "listen address %s: vsock port out of range 1..%u",
					   spec, VMADDR_PORT_ANY - 1);
		out->kind = AGENT_LISTEN_VSOCK;
		out->port = (uint32_t)port;
		return 0;
	}
	return sbx_err_set(err, -EINVAL, "listen address %s: expected unix:<path> or vsock:<port>", spec);
}

const char *agent_listen_format(const agent_listen_addr *a, char *buf, size_t len)
{
	if (a->kind == AGENT_LISTEN_UNIX)
		snprintf(buf, len, "unix:%s", a->path);
	else
		snprintf(buf, len, "vsock:%u", a->port);
	return buf;
}

int agent_listen_sockaddr(const agent_listen_addr *a, struct sockaddr_storage *ss,
			  socklen_t *len, sbx_err *err)
{
	memset(ss, 0, sizeof(*ss));
	switch (a->kind) {
	case AGENT_LISTEN_UNIX: {
		struct sockaddr_un *un = (struct sockaddr_un *)ss;

		un->sun_family = AF_UNIX;
		memcpy(un->sun_path, a->path, strlen(a->path) + 1);
		*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(a->path) + 1);
		return 0;
	}
	case AGENT_LISTEN_VSOCK: {
		struct sockaddr_vm *vm = (struct sockaddr_vm *)ss;

		vm->svm_family = AF_VSOCK;
		vm->svm_cid = VMADDR_CID_ANY;
		vm->svm_port = a->port;
		*len = sizeof(*vm);
		return 0;
	}
	}
	return sbx_err_set(err, -EINVAL, "listen address: unknown kind %d", (int)a->kind);
}

/* mkdir -p of path's parent folder. */
static int make_parent_dirs(const char *path, sbx_err *err)
{
	char dir[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(dir))
		return sbx_err_set(err, -ENAMETOOLONG, "create folder for %s: path too long", path);
	memcpy(dir, path, len + 1);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	for (char *p = dir + 1; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char saved = *p;
		*p = '\0';
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return sbx_err_sys(err, -errno, "create folder %s", dir);
		*p = saved;
		if (saved == '\0')
			break;
	}
	return 0;
}

/* Remove a socket left by an earlier run; refuse to remove anything else. */
static int remove_stale_socket(const char *path, sbx_err *err)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		return sbx_err_sys(err, -errno, "stat %s", path);
	}
	if (!S_ISSOCK(st.st_mode))
		return sbx_err_set(err, -EEXIST, "%s exists and is not a socket", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return sbx_err_sys(err, -errno, "remove stale socket %s", path);
	return 0;
}

int agent_listen_socket(const agent_listen_addr *a, sbx_err *err)
{
	struct sockaddr_storage ss;
	socklen_t sslen = 0;
	SBX_AUTO_CLOSE int fd = -1;
	char name[160];
	int ret;

	agent_listen_format(a, name, sizeof(name));
	ret = agent_listen_sockaddr(a, &ss, &sslen, err);
	if (ret < 0)
		return ret;
	if (a->kind == AGENT_LISTEN_UNIX) {
		ret = make_parent_dirs(a->path, err);
		if (ret == 0)
			ret = remove_stale_socket(a->path, err);
		if (ret < 0)
			return sbx_err_wrap(err, "listen on %s", name);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "listen on %s: socket", name);
	if (a->kind == AGENT_LISTEN_UNIX) {
		/* The umask makes the socket 0600 from its first moment, so no
		 * other user can connect between bind() and chmod(). */
		mode_t old = umask(0177);
		ret = bind(fd, (struct sockaddr *)&ss, sslen);
		int saved = errno;
		umask(old);
		if (ret < 0)
			return sbx_err_sys(err, -saved, "listen on %s: bind", name);
		/* chmod what the umask did not make 0600. Under gVisor
		 * (runsc --host-uds=create) the socket file is the host's,
		 * made by the gofer with the umask's 0600, and neither lstat
		 * nor chmod reach it from inside: then the umask is all. */
		struct stat st;
		bool seen = lstat(a->path, &st) == 0;
		if ((!seen || !S_ISSOCK(st.st_mode) || (st.st_mode & 0177)) &&
		    chmod(a->path, 0600) < 0 && (seen || errno != EPERM))
			return sbx_err_sys(err, -errno, "listen on %s: chmod", name);
	} else if (bind(fd, (struct sockaddr *)&ss, sslen) < 0) {
		return sbx_err_sys(err, -errno, "listen on %s: bind", name);
	}
	if (listen(fd, LISTEN_BACKLOG) < 0)
		return sbx_err_sys(err, -errno, "listen on %s: listen", name);
	return sbx_steal_fd(&fd);
}

struct agent_listener {
	struct evconnlistener *evl;
	struct event *retry;
	agent_listen_addr addr;
	agent_listen_accept_fn on_accept;
	void *ud;
};

static void listener_accept_cb(struct evconnlistener *evl, evutil_socket_t fd,
			       struct sockaddr *sa, int salen, void *ud)
{
	agent_listener *l = ud;

	l->on_accept(fd, l->ud);
}

static void listener_retry_cb(evutil_socket_t fd, short what, void *ud)
{
	agent_listener *l = ud;

	evconnlistener_enable(l->evl);
}

static void listener_error_cb(struct evconnlistener *evl, void *ud)
{
	agent_listener *l = ud;
	char name[160];
	struct timeval tv = { 0, LISTEN_RETRY_MS * 1000 };

	agent_log_warn("accept on %s: %s; pausing %d ms", agent_listen_format(&l->addr, name, sizeof(name)),
		       strerror(errno), LISTEN_RETRY_MS);
	evconnlistener_disable(evl);
	evtimer_add(l->retry, &tv);
}

int agent_listener_new(struct event_base *base, const agent_listen_addr *a,
		       agent_listen_accept_fn on_accept, void *ud,
		       agent_listener **out, sbx_err *err)
{
	agent_listener *l;
	char name[160];
	int fd, ret;

	agent_listen_format(a, name, sizeof(name));
	l = calloc(1, sizeof(*l));
	if (!l)
		return sbx_err_sys(err, -ENOMEM, "listen on %s", name);
	fd = agent_listen_socket(a, err);
	if (fd < 0) {
		free(l);
		return fd;
	}
	l->addr = *a;
	l->on_accept = on_accept;
	l->ud = ud;
	l->retry = evtimer_new(base, listener_retry_cb, l);
	/* backlog 0: listen() was already called. On success the
	 * evconnlistener owns fd. */
	l->evl = l->retry ? evconnlistener_new(base, listener_accept_cb, l,
					       LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd)
			  : NULL;
	if (!l->evl) {
		ret = sbx_err_set(err, -ENOMEM, "listen on %s: event listener", name);
		if (l->retry)
			event_free(l->retry);
		close(fd);
		free(l);
		return ret;
	}
	evconnlistener_set_error_cb(l->evl, listener_error_cb);
	*out = l;
	return 0;
}

void agent_listener_free(agent_listener *l)
{
	if (!l)
		return;
	evconnlistener_free(l->evl);
	event_free(l->retry);
	if (l->addr.kind == AGENT_LISTEN_UNIX && unlink(l->addr.path) < 0 && errno != ENOENT)
		agent_log_warn("remove socket %s: %s", l->addr.path, strerror(errno));
	free(l);
}
