/* Plain data types shared by the HTTP layer, the core and the agent client:
 * environment lists, an exec request and an exec outcome. No behaviour
 * beyond freeing; each module validates what it receives. */
#ifndef SUP_TYPES_H
#define SUP_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sup_kv {
	char *key;
	char *val;
} sup_kv;

typedef struct sup_env {
	sup_kv *v;
	size_t n;
} sup_env;

void sup_env_free(sup_env *e);
/* Deep copy. Returns 0 or -ENOMEM. */
int sup_env_copy(const sup_env *src, sup_env *dst);
/* True if key is set in e. */
bool sup_env_has(const sup_env *e, const char *key);

/* How a sandbox is isolated: which OCI runtime runs it. runc: namespaces,
 * cgroups and seccomp on the host's kernel; gvisor: runsc, whose user-space
 * kernel serves the sandbox's system calls (they never reach the host's). */
typedef enum sup_isolation { SUP_ISO_RUNC, SUP_ISO_GVISOR, SUP_ISO_N } sup_isolation;
extern const char *const sup_isolation_names[SUP_ISO_N]; /* "runc", "gvisor" */
/* The isolation called s (its len bytes): 0, or -EINVAL for another name. */
int sup_isolation_parse(const char *s, size_t len, sup_isolation *out);

/* One warm pool: sandboxes of image run with isolation, size kept ready
 * (0: every create of that pair is cold). */
typedef struct sup_pool_spec {
	const char *image; /* "host" or the absolute path of a rootfs */
	sup_isolation isolation;
	unsigned size;
} sup_pool_spec;

/* Resource limits an exec may set (soft = hard). */
enum { SUP_RLIMIT_NOFILE, SUP_RLIMIT_NPROC, SUP_RLIMIT_FSIZE, SUP_RLIMIT_CPU, SUP_RLIMIT_N };
extern const char *const sup_rlimit_names[SUP_RLIMIT_N]; /* "nofile", ... */

typedef struct sup_rlimit {
	bool set;
	bool unlimited;
	uint64_t value;
} sup_rlimit;

/* What to run. Exactly one of argv / cmd is set. */
typedef struct sup_exec_spec {
	char **argv;          /* NULL-terminated */
	size_t argc;
	char *cmd;            /* run by the agent as /bin/sh -c cmd */
	sup_env env;          /* overrides the sandbox env, key by key */
	char *cwd;            /* NULL: the agent's default */
	uint64_t timeout_ms;  /* 0: none */
	uint8_t *stdin_data;  /* bytes for stdin, then EOF (NULL: /dev/null) */
	size_t stdin_len;
	bool has_stdin;
	char *user;           /* NULL: the sandbox user */
	bool allow_root;      /* set by the core from its policy, never by a client */
	sup_rlimit rlimits[SUP_RLIMIT_N];
	bool pty;             /* a terminal of cols x rows for stdin/stdout/stderr */
	uint16_t pty_cols;
	uint16_t pty_rows;
	size_t max_output;    /* captured bytes per stream, if max_output_set */
	bool max_output_set;
} sup_exec_spec;

void sup_exec_spec_free(sup_exec_spec *s);

/* An output stream of a command. */
typedef enum sup_chan {
	SUP_CH_STDOUT = 1,
	SUP_CH_STDERR = 2,
} sup_chan;

/* How a command ended, as the agent reported it (validated). */
typedef struct sup_exec_status {
	bool exited;          /* true: exit_code valid; false: signal valid */
	int exit_code;        /* 0..255 */
	int signal;           /* 1..64 */
	bool timed_out;
	bool kill_unconfirmed; /* the supervisor's deadline passed: the agent never
			        * confirmed the kill (the result is ours, not its) */
	bool oom_killed;      /* the kernel killed it for the sandbox's memory limit */
	uint64_t duration_us; /* command run time */
	bool has_rusage;      /* the agent reported the three below */
	uint64_t max_rss_kb;
	uint64_t user_ms;
	uint64_t sys_ms;
} sup_exec_status;

/* How far the supervisor trusts a sandbox's agent: deadlines (ms) and
 * what one agent may hold of ours (see sup_agent.h). */
typedef struct sup_agent_opts {
	unsigned grace_ms;        /* after a call's own timeout */
	unsigned idle_ms;         /* silence on a call that waits for an answer */
	unsigned ping_after_ms;   /* a connection this quiet is pinged */
	unsigned ping_timeout_ms; /* after a ping, nothing from the agent this long: lost */
	unsigned frame_ms;        /* a frame begun must be whole within */
	unsigned max_streams;     /* streams open at once (cancelled ones included) */
	unsigned max_waiting;     /* calls a caller waits on */
	size_t max_queued;        /* bytes queued towards the agent for a new call */
} sup_agent_opts;

/* An exec whose output was captured into bounded buffers. */
typedef struct sup_exec_result {
	sup_exec_status st;
	const uint8_t *out;
	size_t out_len;
	bool out_truncated;
	const uint8_t *err;
	size_t err_len;
	bool err_truncated;
} sup_exec_result;

#endif
