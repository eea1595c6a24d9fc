#include "pid1.h"

#include <errno.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "children.h"
#include "log.h"

#define SHUTDOWN_POLL_MS 5

static struct {
	struct event_base *base;
	agent_pid1_hooks hooks;
	void *ud;
	unsigned grace_ms;
	bool is_init;
	bool shutting_down;
	struct event *sigchld, *sigterm, *sigint;
	struct event *poll, *grace, *final;
} P;

bool agent_pid1_is_init(void)
{
	return P.is_init;
}

bool agent_pid1_shutting_down(void)
{
	return P.shutting_down;
}

void agent_pid1_reap(void)
{
	for (;;) {
		struct rusage ru;
		int status;
		pid_t pid = wait4(-1, &status, WNOHANG | __WALL, &ru);

		if (pid == 0)
			return;
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			if (errno != ECHILD)
				agent_log_warn("wait4: %s", strerror(errno));
			return;
		}
		if (!agent_children_dispatch(pid, status, &ru))
			agent_log_debug("reaped orphan %d (status 0x%x)", (int)pid, status);
	}
}

static void sigchld_cb(evutil_socket_t sig, short what, void *ud)
{
	agent_pid1_reap();
}

static void add_ms(struct event *ev, unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(ev, &tv);
}

static void finish(void)
{
	event_del(P.poll);
	event_del(P.grace);
	event_del(P.final);
	P.hooks.done(P.ud);
}

static void poll_cb(evutil_socket_t fd, short what, void *ud)
{
	if (P.hooks.idle(P.ud))
		finish();
}

static void final_cb(evutil_socket_t fd, short what, void *ud)
{
	agent_log_warn("shutdown: answers still pending after %u ms, exiting anyway", AGENT_PID1_FINAL_MS);
	finish();
}

static void grace_cb(evutil_socket_t fd, short what, void *ud)
{
	agent_log_info("shutdown: grace of %u ms over, killing what still runs", P.grace_ms);
	P.hooks.kill_all(P.ud);
	/* As init, also what escaped the commands' process groups (setsid
	 * daemons, orphans); kill(-1) spares init itself. Never outside PID 1:
	 * there it would hit every process of the user. */
	if (P.is_init && kill(-1, SIGKILL) < 0 && errno != ESRCH)
		agent_log_warn("shutdown: kill(-1): %s", strerror(errno));
	add_ms(P.final, AGENT_PID1_FINAL_MS);
}

void agent_pid1_shutdown(int sig)
{
	if (sig)
		P.hooks.forward(sig, P.ud);
	if (P.shutting_down)
		return;
	P.shutting_down = true;
	agent_log_info("shutdown (signal %d): waiting up to %u ms for running commands", sig, P.grace_ms);
	P.hooks.stop_accepting(P.ud);
	add_ms(P.grace, P.grace_ms);
	/* Polling "idle" every few ms while shutting down is cheaper than
	 * wiring "became idle" notifications through every module. */
	add_ms(P.poll, SHUTDOWN_POLL_MS);
	poll_cb(-1, 0, NULL);
}

static void sigterm_cb(evutil_socket_t sig, short what, void *ud)
{
	agent_pid1_shutdown((int)sig);
}

int agent_pid1_setup(struct event_base *base, const agent_pid1_opts *opts,
		     const agent_pid1_hooks *hooks, void *ud, sbx_err *err)
{
	memset(&P, 0, sizeof(P));
	P.base = base;
	P.hooks = *hooks;
	P.ud = ud;
	P.grace_ms = opts && opts->grace_ms ? opts->grace_ms : AGENT_PID1_DEFAULT_GRACE_MS;
	P.is_init = getpid() == 1;

	if (!P.is_init && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		return sbx_err_sys(err, -errno, "register as child subreaper");
	/* A client that goes away mid-write must cost an EPIPE, not the agent. */
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		return sbx_err_sys(err, -errno, "ignore SIGPIPE");

	P.sigchld = evsignal_new(base, SIGCHLD, sigchld_cb, NULL);
	P.sigterm = evsignal_new(base, SIGTERM, sigterm_cb, NULL);
	P.sigint = evsignal_new(base, SIGINT, sigterm_cb, NULL);
	P.poll = event_new(base, -1, EV_PERSIST, poll_cb, NULL);
	P.grace = evtimer_new(base, grace_cb, NULL);
	P.final = evtimer_new(base, final_cb, NULL);
	if (!P.sigchld || !P.sigterm || !P.sigint || !P.poll || !P.grace || !P.final) {
		agent_pid1_teardown();
		return sbx_err_set(err, -ENOMEM, "signal events");
	}
	if (evsignal_add(P.sigchld, NULL) < 0 || evsignal_add(P.sigterm, NULL) < 0 ||
	    evsignal_add(P.sigint, NULL) < 0) {
		agent_pid1_teardown();
		return sbx_err_set(err, -EIO, "install signal handlers");
	}
	/* Children may have exited before the handler was in place. */
	agent_pid1_reap();
	return 0;
}

void agent_pid1_teardown(void)
{
	struct event **evs[] = { &P.sigchld, &P.sigterm, &P.sigint, &P.poll, &P.grace, &P.final };

	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
		if (*evs[i]) {
			event_free(*evs[i]);
			*evs[i] = NULL;
		}
	}
}
