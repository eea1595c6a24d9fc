/* Plain data types shared by the route families, the core and the agent
 * client: environment lists, a sandbox to create and its view, an exec
 * request and its outcome. No behaviour beyond freeing; each module
 * validates what it receives. */
#ifndef SUP_TYPES_H
#define SUP_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "sbx/proto_exec.h"
#include "sup_isolation.h"
#include "sup_netpol.h"
#include "sup_resources.h"
#include "sup_volspec.h"

typedef sbx_proto_kv sup_kv;
typedef sbx_proto_env sup_env;

void sup_env_free(sup_env *e);
/* Deep copy. Returns 0 or -ENOMEM. */
int sup_env_copy(const sup_env *src, sup_env *dst);
/* Put base's entries under e's: those e lacks join it, first. -ENOMEM
 * leaves e as it was. */
int sup_env_under(sup_env *e, const sup_env *base);
/* True if key is set in e. */
bool sup_env_has(const sup_env *e, const char *key);

/* A tenant's secret given to a sandbox as an environment variable: the
 * names only (the value is opened where the sandbox gets it,
 * sup_core_secrets.h). */
#define SUP_SECRET_BINDS_MAX 64
/* where a sandbox finds its secrets given as files (runc sandboxes) */
#define SUP_SECRET_FILES_DIR "/run/secrets"
#define SUP_SECRET_FILE_MAX 64 /* a file's name: [A-Za-z0-9._-], not . or .. */
#define SUP_SECRET_ENV_MAX 127 /* [A-Za-z_][A-Za-z0-9_]* */
typedef struct sup_secret_bind {
	char name[72];                      /* the secret's (sup_secret.h's rules) */
	char env[SUP_SECRET_ENV_MAX + 1];   /* the variable's, or a file's path
					     * (SUP_SECRET_FILES_DIR/NAME) */
} sup_secret_bind;

typedef struct sup_secret_binds {
	sup_secret_bind *v;
	size_t n;
} sup_secret_binds;

void sup_secret_binds_free(sup_secret_binds *b);

/* One warm pool: sandboxes of image run with isolation, size kept ready
 * (0: every create of that pair is cold). */
typedef struct sup_pool_spec {
	const char *image; /* "host", the absolute path of a rootfs, or a store name */
	sup_isolation isolation;
	unsigned size;
	/* Its sandboxes' limits; NULL: the pools' defaults. A backend's
	 * template's (fixed: a pod's limits cannot change). */
	const sup_resources *res;
} sup_pool_spec;

/* What to run: the agent's exec arguments (strings owned here), plus what
 * the supervisor keeps to itself. */
typedef struct sup_exec_spec {
	sbx_proto_exec_args x;
	uint8_t *stdin_data;  /* bytes for stdin, then EOF (x.stdin_pipe set) */
	size_t stdin_len;
	size_t max_output;    /* captured bytes per stream, if max_output_set */
	bool max_output_set;
} sup_exec_spec;

void sup_exec_spec_free(sup_exec_spec *s);

/* An MCP server of a sandbox, in the mcpServers shape MCP clients'
 * configuration files use ("command" and "args" make argv). */
typedef struct sup_mcp_server {
	char *name;
	char **argv;  /* NULL-terminated */
	size_t argc;
	sup_env env;
	char *cwd;    /* NULL: the agent's default */
	uint64_t max_line; /* the longest line it may write; 0: the protocol's default */
} sup_mcp_server;

typedef struct sup_mcp_servers {
	sup_mcp_server *v;
	size_t n;
} sup_mcp_servers;

void sup_mcp_server_free(sup_mcp_server *s);
void sup_mcp_servers_free(sup_mcp_servers *s);

/* Room for a sandbox id ([a-z0-9-], 1..40 bytes) and its NUL. */
#define SUP_ID_MAX 48

/* A sandbox to hand out. */
/* A volume a restore or a fork makes for its new sandbox (sup_snaps.h):
 * a new volume of the tenant, size bytes, filled from archive and mounted
 * at m.path in m's mode; m.name is the source's volume's (the new one's
 * name is made from it). */
typedef struct sup_vol_seed {
	sup_vol_mount m;
	uint64_t size;
	char archive[PATH_MAX];
} sup_vol_seed;

typedef struct sup_create_req {
	char *image;          /* NULL: "host" */
	sup_isolation isolation; /* "isolation": runc (default) or gvisor */
	unsigned timeout_s;
	sup_env env;
	sup_secret_binds secrets; /* "secrets": the tenant's secrets as env variables */
	sup_resources resources; /* every figure set: the request's over the defaults */
	sup_netpol *network;  /* egress policy; NULL: loopback only */
	unsigned given;       /* what the request named: SUP_RES_* bits of resources,
			       * and SUP_CREATE_GIVEN_* (the rest is the tenant's to fill) */
	sup_mcp_servers mcp;  /* "mcp": {"servers": {...}} */
	sup_vol_mounts volumes; /* "volumes": bound into the sandbox as it is handed out */
	char *snapshot;       /* "snapshot": its files start as this snapshot's */
	/* Set by the core for a restore or a fork: the writable layer's seed
	 * (sup_runc.h) and the image acquired (a store digest; image is what
	 * the tenant's rights are checked against). NULL: none. */
	struct sup_runc_seed *seed;
	char *acquire;
	/* Set by the core: the snapshot's archive is local now (fetched from
	 * the object store, sup_snaps_fetch). */
	bool snapshot_fetched;
	/* Set by the core for a restore or fork with volumes: the volumes to
	 * make (nvol_seeds, owned); vols_seeded once they are made and in
	 * volumes. */
	sup_vol_seed *vol_seeds;
	size_t nvol_seeds;
	bool vols_seeded;
} sup_create_req;
enum { SUP_CREATE_GIVEN_ISOLATION = 1u << 8, SUP_CREATE_GIVEN_TIMEOUT = 1u << 9 };

void sup_create_req_free(sup_create_req *r);

/* A sandbox as the API shows it. */
typedef struct sup_sandbox_view {
	const char *id;
	const char *state;
	const char *image;
	sup_isolation isolation;
	time_t created_at;
	time_t expires_at;
	const char *reason;      /* state "failed": why; NULL otherwise */
	unsigned agent_streams;  /* calls open on the agent connection */
	unsigned agent_waiting;  /* requests waiting on the agent */
	size_t agent_queued;     /* bytes queued towards the agent */
	unsigned agent_timeouts; /* calls the agent let pass their deadline */
	sup_resources resources; /* in force */
	bool has_usage;          /* usage read (GET of one sandbox; lists leave it out) */
	sup_usage usage;
	const sup_netpol *network; /* its egress policy, NULL: loopback only */
	char addr4[16], addr6[48]; /* with a policy: its addresses */
	sup_vol_mount volumes[SUP_VOL_MAX_MOUNTS]; /* the volumes it mounts */
	size_t nvolumes;
	const sup_secret_binds *secrets; /* the secrets it was given (names), NULL: none */
} sup_sandbox_view;

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
