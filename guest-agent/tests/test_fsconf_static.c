/* agent_fsconf as the static agent links it: openat2 works and a root opens
 * and resolves. Exits non-zero with the message otherwise. */
#include <stdio.h>
#include <sys/stat.h>

#include "agent_fsconf.h"
#include "agent_fsconf_ops.h"

int main(void)
{
	sbx_err err;
	agent_fsconf_root root = { .fd = -1 };
	struct stat st;
	if (agent_fsconf_probe(&err) < 0 || agent_fsconf_root_open(&root, "/", &err) < 0 ||
	    agent_fsconf_stat(&root, "proc", false, &st, &err) < 0) {
		fprintf(stderr, "agent_fsconf_static: %s\n", err.msg);
		return 1;
	}
	agent_fsconf_root_close(&root);
	return S_ISDIR(st.st_mode) ? 0 : 1;
}
