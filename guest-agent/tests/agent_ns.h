/* Test harness: the real sandbox-agent as PID 1 of fresh PID, mount,
 * network and IPC namespaces, listening on a unix socket in a temporary folder.
 *
 * The agent dies with the test process (PR_SET_PDEATHSIG) and
 * agent_ns_stop() kills it, which as the namespace's init takes every
 * process of the namespace with it, then removes the folder. A test killed
 * with SIGKILL leaves its folder (named with its owner's pid and start time):
 * the next agent_ns_start removes those whose owner is gone. Test code only. */
#ifndef AGENT_NS_H
#define AGENT_NS_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct agent_ns {
	pid_t pid;        /* the agent, as seen from here; 0 when not running */
	char dir[64];
	char sock[128];
} agent_ns;

/* The agent binary under test: $AGENT_BINARY. */
const char *agent_ns_binary(void);
/* Start the agent (grace_ms for its shutdown) and wait until it accepts. */
int agent_ns_start(agent_ns *ns, unsigned grace_ms);
/* With only the capabilities a sandbox's container gets (Docker's default
 * set and CAP_NET_ADMIN, see node-supervisor/src/lib/runtime/sup_bundle.c). */
#define AGENT_NS_CONTAINER_CAPS 1u
int agent_ns_start_ex(agent_ns *ns, unsigned grace_ms, unsigned flags);
/* Wait up to ms for the agent to exit; its wait status in *status. */
int agent_ns_wait_exit(agent_ns *ns, unsigned ms, int *status);
/* Kill the namespace (if still running) and remove the folder. Idempotent. */
void agent_ns_stop(agent_ns *ns);

/* Processes of the agent's tree (the agent and everything below it, the
 * per-command PID namespaces included) and how many of them are zombies,
 * from this (the host's) /proc. */
int agent_ns_procs(const agent_ns *ns, int *total, int *zombies);
/* The same, counting only processes whose command line (arguments joined
 * by spaces) is exactly cmdline; zombies may be NULL. */
int agent_ns_scan(const agent_ns *ns, const char *cmdline, int *total, int *zombies);
/* The agent's direct children right now (one read of its children list:
 * fast enough to see a process that is about to go), or -errno. */
int agent_ns_children(const agent_ns *ns);
/* Open fds of the agent, or a negative errno. */
int agent_ns_fds(const agent_ns *ns);
/* The soft open-file limit the agent is started with. */
#define AGENT_NS_NOFILE 1024
/* The agent's current soft open-file limit, or -1. */
long agent_ns_nofile(const agent_ns *ns);
/* Resident memory of the agent in KiB, or -1. */
long agent_ns_rss_kb(const agent_ns *ns);

#endif
