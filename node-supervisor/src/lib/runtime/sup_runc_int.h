/* What sup_runc's files share (sup_runc.c, sup_runc_create.c,
 * sup_runc_states.c): a sandbox's paths on the host, the bounds of the
 * runtime's calls, and the steps one file calls in another. Nothing outside
 * these files includes this; the interface is sup_runc.h. */
#ifndef SUP_RUNC_INT_H
#define SUP_RUNC_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "sup_runc.h"

#define ID_MAX 40
#define DEFAULT_READY_MS 10000u
#define RUN_TIMEOUT_MS 30000u
#define LIST_OUT_MAX (1u << 20)
#define LIST_TRIES 4
#define LIST_RETRY_NS 50000000L
#define SOCK_SUFFIX "/run/agent.sock"
#define NOFILE_WANT 65536ul
#define KILL_WAIT_MS 5000
#define SEED_MAX_ENTRIES (1u << 20)

typedef struct box_paths {
	char state[PATH_MAX]; /* the state folder, resolved */
	char dir[PATH_MAX];
	char bundle[PATH_MAX];
	char rootfs[PATH_MAX];
	char upper[PATH_MAX];
	char work[PATH_MAX];
	char run[PATH_MAX];
	char log[PATH_MAX];
	char rtlog[PATH_MAX];
	char pidfile[PATH_MAX];
	char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char cid[64];
	char cgroup[96];
} box_paths;

/* ---- sup_runc.c ---- */

__attribute__((format(printf, 3, 4))) int sup_runc_fmt(char *buf, size_t cap, const char *f, ...);
/* 1: id is a sandbox id (lower case, digits, '-'; 1..ID_MAX). */
int sup_runc_valid_id(const char *id);
/* The state folder, resolved (out: PATH_MAX). */
int sup_runc_resolve_state(const char *state_dir, char out[PATH_MAX], sbx_err *err);
/* "sbx-<tag>-": the start of every container name of this state folder. */
int sup_runc_container_prefix(const char *state_real, char *buf, size_t cap);
/* Sandbox id's paths under cfg's state folder. */
int sup_runc_make_paths(const sup_runc_cfg *cfg, const char *id, box_paths *p, sbx_err *err);
/* The runtime run with args (its output into out and errout, bounded). */
int sup_runc_runtime_run(const sup_runtime *rt, const char *const *args, char *out,
			 size_t out_cap, char *errout, size_t errout_cap, sbx_err *err);
/* `<runtime> list --quiet` into out (LIST_OUT_MAX bytes): one id a line. */
int sup_runc_runtime_list(const sup_runtime *rt, char *out, sbx_err *err);
int sup_runc_read_pid(const char *pidfile, pid_t *pid, sbx_err *err);
/* pid is still the container's init (its cgroup names the container). */
bool sup_runc_is_container_pid(pid_t pid, const char *cgroup);
/* What a sandbox left on the host, container first; best_effort: the host
 * side even when the runtime cannot delete the container. */
int sup_runc_destroy_paths(const sup_runc_cfg *cfg, const sup_runtime *rt, const box_paths *p,
			   bool best_effort, sbx_err *err);
/* id is one of keep. */
bool sup_runc_kept(const char *const *keep, size_t nkeep, const char *id);

/* ---- sup_runc_create.c ---- */

/* What the pools keep of a made sandbox. */
void sup_runc_fill_box(sup_runc_box *box, const box_paths *p, const char *id,
		       sup_isolation isolation, pid_t pid);
/* The runtime of isolation (its binary NULL: not offered). */
const sup_runtime *sup_runc_runtime_of(const sup_runc_cfg *cfg, sup_isolation isolation);

#endif
