/* agent_fsconf as the static agent links it: the probe picks a resolver
 * (openat2 here, the walk under gVisor) and a root opens and resolves with
 * it. Exits non-zero with the message otherwise. */
#include <stdio.h>
#include <sys/stat.h>

#include "agent_fsconf.h"
#include "agent_fsconf_ops.h"

int main(void)
{
	sbx_err err;
	agent_fsconf_root root = { .fd = -1 };
	struct stat st;
	char note[256];
	if (agent_fsconf_probe(note, sizeof(note), &err) < 0 || agent_fsconf_root_open(&root, "/", &err) < 0 ||
	    agent_fsconf_stat(&root, "proc", false, &st, &err) < 0) {
		fprintf(stderr, "agent_fsconf_static: %s\n", err.msg);
		return 1;
	}
	agent_fsconf_root_close(&root);
	return S_ISDIR(st.st_mode) ? 0 : 1;
}
