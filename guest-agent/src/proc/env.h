/* Environment of executed commands: the agent's base environment and the
 * merge of a request's variables over it.
 *
 * The base is the agent's own environment (as PID 1 that is the OCI config's
 * process env, so the supervisor decides it), with PATH and HOME filled in
 * when missing. This module owns those strings; it must not read requests
 * (exec_spec.c does) nor touch the process's environ after start-up. */
#ifndef AGENT_ENV_H
#define AGENT_ENV_H

#include <stddef.h>

#include "sbx/err.h"

#define AGENT_ENV_DEFAULT_PATH_VALUE "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define AGENT_ENV_DEFAULT_PATH "PATH=" AGENT_ENV_DEFAULT_PATH_VALUE

/* Build the base environment from env (usually environ). Call once. */
int agent_env_init(char *const *env, sbx_err *err);
/* The base environment (NULL-terminated); empty before agent_env_init. */
char *const *agent_env_base(void);
void agent_env_free(void);

/* Merge: every "K=V" of over replaces the base entry of the same K or is
 * appended. *out is a new NULL-terminated array of borrowed pointers (into
 * base and over): free only the array. */
int agent_env_merge(char *const *base, char *const *over, char ***out, sbx_err *err);

/* Length of the name part of "K=V" (up to '=' or the end). */
size_t agent_env_name_len(const char *kv);

#endif
