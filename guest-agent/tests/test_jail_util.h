/* Helpers for the jail's tests: run a program in a prepared jail (fork,
 * agent_jail_enter, chdir, execve) with its output captured and a deadline,
 * and temporary folders the sandbox uid owns. Test code only. */
#ifndef AGENT_TEST_JAIL_UTIL_H
#define AGENT_TEST_JAIL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "agent_jail.h"

#define JAIL_TEST_UID 1000
#define JAIL_TEST_GID 1000
#define JAIL_OUT_MAX (1u << 20)

typedef struct jail_result {
	int status;     /* as waitpid reports it */
	bool timed_out; /* killed at the deadline */
	size_t len;
	char out[JAIL_OUT_MAX + 1]; /* stdout and stderr, NUL-terminated, cut at JAIL_OUT_MAX */
} jail_result;

/* Run argv (argv[0] a path) in j with envp, in cwd, stdin /dev/null. The
 * child's whole process group is killed at the deadline and after it exits.
 * Returns 0 or -errno when the run itself could not be set up. */
int jail_run(const agent_jail *j, const char *cwd, char *const argv[], char *const envp[], int timeout_ms,
	     jail_result *r);

/* A new folder under /tmp owned by JAIL_TEST_UID:JAIL_TEST_GID, mode 0755;
 * caller frees. NULL on failure. */
char *jail_tmpdir(void);
/* rm -rf, without following symlinks. */
void jail_rm_rf(const char *path);
/* Write a file; owned by the sandbox uid when sandbox_owned. */
int jail_write_file(const char *path, const char *content, bool sandbox_owned);
/* Value of "<key> " line in out, e.g. jail_field(out, "keyctl") -> "1";
 * copies up to cap-1 chars. false when absent. */
bool jail_field(const char *out, const char *key, char *val, size_t cap);

#endif
