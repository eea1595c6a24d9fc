/* Test fixture for the real agent binary (agent_ns.h) driven by the test
 * client (agent_client.h): one agent per test, up to four connections and a
 * blocking client, and the checks the agent tests share (run a command,
 * wait for output, count the agent's processes from the host). Test code
 * only; the helpers fail the current cmocka test on error. */
#ifndef AGENT_FIXTURE_H
#define AGENT_FIXTURE_H

#include <stdbool.h>

#include "sbx/proto_client.h"
#include "agent_client.h"
#include "agent_ns.h"

#define FX_GRACE_MS 1500u
#define FX_WAIT_MS 10000u

typedef struct fixture {
	agent_ns ns;
	struct event_base *base;
	tc_client clients[4];
	sbx_proto_client *blocking;
} fixture;

/* cmocka setup/teardown: start an agent (with the test's capabilities, or
 * with only those of a sandbox's container), and kill it and everything
 * below it. */
int fx_setup(void **state);
int fx_setup_container_caps(void **state);
int fx_teardown(void **state);

tc_client *fx_client(fixture *fx, size_t i);
sbx_proto_client *fx_blocking(fixture *fx);
const char *fx_str(const char *s);

/* Run to the end on connection 0; fails the test on ERR or a hang. */
tc_stream *fx_run(fixture *fx, const tc_exec_opts *o);
tc_stream *fx_run_cmd(fixture *fx, const char *cmd);
/* Run the loop of c until s's stdout contains needle. */
void fx_wait_output(tc_client *c, tc_stream *s, const char *needle);
/* Wait until the agent's tree is want_total processes without zombies. */
void fx_wait_no_zombies(fixture *fx, int want_total);
/* Wait until exactly want processes of the tree have this command line. */
void fx_wait_procs(fixture *fx, const char *cmdline, int want);

#endif
