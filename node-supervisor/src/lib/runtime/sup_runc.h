/* Local sandbox backend: OCI bundles run by runc (or a compatible runtime),
 * or by gVisor's runsc for sandboxes of gvisor isolation.
 *
 * Owns everything on the host that makes one sandbox: the bundle folder and
 * config.json, the overlay rootfs (image lower, per-sandbox upper), the
 * host-side run folder holding the agent socket, the runtime container, and
 * their removal. Calls are blocking (they run the runtime binary): call them
 * from pool worker threads, never from the event loop. It must not speak the
 * agent protocol beyond noticing that the agent's socket accepts.
 *
 * What it needs from the rest of the process: root; children it spawns (the
 * runtime) must be left for it to reap (no waitpid(-1), SIGCHLD not
 * SIG_IGN). The agent is not a child: once the runtime has started it, the
 * host's init (or a subreaper, if the supervisor makes itself one and then
 * reaps) is its parent. All functions are thread-safe; they keep no state
 * beyond the files under state_dir. */
#ifndef SUP_RUNC_H
#define SUP_RUNC_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "sbx/err.h"
#include "sup_cgroup.h"
#include "sup_isolation.h"
#include "sup_resources.h"
#include "sup_runc_cmd.h"

typedef struct sup_runc_cfg {
	/* How each isolation's runtime is called: [SUP_ISO_RUNC] runc (crun
	 * may stand in), required; [SUP_ISO_GVISOR] runsc, binary NULL when
	 * gVisor is not offered. */
	sup_runtime runtimes[SUP_ISO_N];
	const char *state_dir;  /* supervisor state folder, e.g. /var/lib/sbx */
	const char *agent_path; /* host path of the static sandbox-agent binary */
	unsigned ready_timeout_ms; /* how long create waits for the agent socket; 0: 10 s */
	const sup_cgroup_host *cgroup; /* the host's cgroups (sup_cgroup_detect) */
	const sup_resources *res; /* limits every new sandbox is made with */
	uint64_t disk_ceiling;  /* the most disk a sandbox may ever be given: its
				 * image's size (sup_disk.h) */
	bool protect_agent;     /* exempt each agent from the OOM killer (needs
				 * CAP_SYS_RESOURCE: sup_runc_can_protect_agent) */
	const char *resolv_conf;   /* /etc/resolv.conf of every sandbox (NULL: the image's) */
	struct sup_img_store *store; /* images by ref or digest; NULL: none */
} sup_runc_cfg;

typedef struct sup_runc_box {
	char id[64];                    /* sandbox id (hostname, folder name) */
	char container_id[64];          /* runtime container id: "sbx-<tag>-<id>", the tag
					 * derived from the state folder so that
					 * leftovers are told from other supervisors' */
	char dir[PATH_MAX];             /* <state_dir>/sandboxes/<id> */
	sup_isolation isolation;        /* which runtime runs it */
	char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* agent socket, host side */
	char cgroup[96];                /* cgroupsPath: "/sbx/<container_id>" */
	pid_t init_pid;                 /* host pid of the agent (PID 1 inside) */
} sup_runc_box;

/* Prepare the state folder (sandboxes/, images/, the "host" image), check
 * every offered runtime answers (and make its --root folder) and that agent
 * socket paths will fit in a sockaddr_un
 * (state folder at most 41 characters after symlinks are resolved), and lock
 * the folder for this process (-EBUSY naming the holder's pid when another
 * process has it), and make the disk layers' template (sup_disk.h). Call
 * once, before any other function, from one thread. */
int sup_runc_init(const sup_runc_cfg *cfg, sbx_err *err);

/* Does rt answer `--version`? 0, or an error quoting it. */
int sup_runc_runtime_check(const sup_runtime *rt, sbx_err *err);

/* Whether this process may exempt agents from the OOM killer: lowering a
 * score below 0 takes CAP_SYS_RESOURCE. Without it the agent keeps score 0
 * and only its commands' +1000 (the agent sets that) keeps it from being
 * chosen while a command lives. */
bool sup_runc_can_protect_agent(void);
/* The tag of the state folder in container ids ("sbx-<tag>-<id>"), 8 hex
 * characters: other state of this supervisor that must be told from other
 * supervisors' (network namespaces, links) carries it too. */
int sup_runc_state_tag(const sup_runc_cfg *cfg, char out[9], sbx_err *err);

/* Make a new sandbox from image ("host", also for NULL, the absolute path
 * of a rootfs folder, which must not contain the state folder, or a ref or
 * digest of cfg->store: its layers as the overlay's lower layers) with the
 * limits cfg->res (cgroup through the runtime, its disk layer: sup_disk.h;
 * the agent exempt from the OOM killer with cfg->protect_agent), run by the
 * runtime of isolation (-EINVAL when it is not offered), and return
 * once its agent accepts connections on box->socket_path. On failure
 * everything made so far is removed, and err quotes the runtime's or the
 * agent's last words. id: [a-z0-9-], at most 40 chars; an id in use: -EEXIST.
 * Image paths come from the operator, not from API users: any folder the
 * supervisor can read can be an image. */
int sup_runc_create(const sup_runc_cfg *cfg, const char *id, const char *image,
		    sup_isolation isolation, sup_runc_box *box, sbx_err *err);

/* What a new sandbox's writable layer starts from beyond its image. */
typedef struct sup_runc_seed {
	/* A read-only folder stacked over the image's layers, under the new
	 * upper (a fork's frozen copy of its source's layer); "": none. The
	 * caller keeps it until the sandbox is destroyed. */
	char layer[PATH_MAX];
	/* A snapshot archive (sup_layer_tar.h) unpacked into the new upper
	 * folder before the container starts; "": none. Refused archives are
	 * -EILSEQ, a layer over the sandbox's disk -ENOSPC. */
	char archive[PATH_MAX];
	/* The figure its disk is made with (the archive is unpacked against
	 * it); 0: cfg->res->disk. */
	uint64_t disk;
} sup_runc_seed;

/* Below a sandbox's folder: the fork slot, an empty folder every
 * sandbox's overlay stacks right under its upper layer, filled at most
 * once by sup_runc_fill. */
#define SUP_RUNC_FORK_SLOT "fork"

/* A sandbox made and not handed out yet (nothing but its agent has run)
 * gets layer's files (a fork's frozen copy of its source's upper folder,
 * on the state folder's file system) in its fork slot as hard links, and
 * every path of layer is then checked through its mounted tree (the
 * overlay keeps what it looked up before the fill: sup_runc_fill.c).
 * -ESTALE: the tree does not show the layer (the sandbox must not be
 * used as a fork), -EBUSY: filled already. Blocking (a cp process and a
 * walk): a worker's. */
int sup_runc_fill(const sup_runc_box *box, const char *layer, sbx_err *err);

/* sup_runc_create, whose writable layer starts from seed (NULL: empty). */
int sup_runc_create_seeded(const sup_runc_cfg *cfg, const char *id, const char *image,
			   sup_isolation isolation, const sup_runc_seed *seed, sup_runc_box *box,
			   sbx_err *err);

/* Connect to the agent's socket of a sandbox made by sup_runc_create.
 * The socket file lives in a folder the guest can write, so it is opened
 * without following symlinks, checked to be a socket and connected through
 * /proc/self/fd: a guest cannot point the supervisor at a host socket.
 * sock_flags: SOCK_NONBLOCK or 0 (SOCK_CLOEXEC is always set). Returns the
 * connected fd. Does not block on a non-blocking socket; with 0 it blocks
 * only while the agent's listen backlog is full. Thread-safe. */
int sup_runc_connect_agent(const sup_runc_box *box, int sock_flags, sbx_err *err);

/* Change a made sandbox's limits from `from` (in force) to `to`: cgroup
 * files written directly (sup_cgroup_apply) and its disk's figure
 * (sup_disk_set): a few small file writes, no process started.
 * On failure the sandbox should be destroyed. */
int sup_runc_set_limits(const sup_runc_cfg *cfg, const sup_runc_box *box,
			const sup_resources *from, const sup_resources *to, sbx_err *err);

/* What a sandbox uses now: its cgroup's figures and its disk's (a few
 * small files and a statfs). */
int sup_runc_usage(const sup_runc_cfg *cfg, const sup_runc_box *box, sup_usage *u, sbx_err *err);

/* Freeze (frozen) or thaw every process of a made sandbox: its cgroup's
 * freezer written directly (sup_cgroup_freeze) instead of a `runc pause`/
 * `resume` process (a `runc resume` took 120-240 ms here, loaded; the
 * write 0.1-0.3 ms: BENCHMARKS.md). On a hybrid host it is v2's freezer,
 * which runc (its v1 manager) does not read: `runc state` says "running"
 * meanwhile, and adopt takes either. A frozen sandbox's processes use no CPU
 * and answer nothing (its agent neither) until thawed; destroy thaws what
 * it killed. A freeze that does not finish in time is undone (-EBUSY).
 * Idempotent; a few file writes, no process: the loop may call it. */
int sup_runc_freeze(const sup_runc_cfg *cfg, const sup_runc_box *box, bool frozen, sbx_err *err);

/* Kill and delete the container, unmount, remove the folder. Idempotent:
 * parts already gone are not an error. Only box->id and box->isolation are
 * read: every path is derived from the id again, none is taken from box. */
int sup_runc_destroy(const sup_runc_cfg *cfg, const sup_runc_box *box, sbx_err *err);

/* Kill every runtime call an earlier run of this state folder left
 * running (a `run` still making a container, a `delete`...): any process
 * with a container id of this folder among its arguments, with its process
 * group (a call leads its own session), waited for; not a process inside
 * a container's cgroup (gVisor's runsc-sandbox and runsc-gofer name their
 * container for as long as it lives). Afterwards no call of
 * the dead supervisor can finish behind the next sweep. Returns how many
 * it killed. Call before sup_runc_adopt and sup_runc_remove_leftovers. */
int sup_runc_kill_calls(const sup_runc_cfg *cfg, sbx_err *err);

/* Thaw every sandbox of this state folder that an earlier run left frozen
 * (paused): runsc answers `list`, `state` and `delete` through the
 * sandbox's own Sentry, which cannot answer frozen, so each of those calls
 * would hang. Call before sup_runc_adopt and sup_runc_remove_leftovers; a
 * re-adopted paused sandbox is frozen again once its agent has answered.
 * Returns how many cgroups it thawed. */
int sup_runc_thaw_all(const sup_runc_cfg *cfg, sbx_err *err);

/* What the runtimes say of their containers, read once for a start's
 * adoptions: one `list --format json` per offered runtime (its state root)
 * instead of a `state` process per sandbox. A runtime whose list failed
 * (err names the first, the others are still read) is left out: its
 * adoptions ask `state` one by one. Call after sup_runc_thaw_all (runsc
 * answers through a frozen sandbox's Sentry otherwise). */
typedef struct sup_runc_states sup_runc_states;
int sup_runc_states_read(const sup_runc_cfg *cfg, sup_runc_states **out, sbx_err *err);
void sup_runc_states_free(sup_runc_states *st);

/* Take back a sandbox an earlier run made: its init is alive in its own
 * cgroup and the runtime says it runs (running or paused, that pid; a
 * paused one stays frozen), by states (NULL, or a runtime it lacks: a
 * `state` call). box is filled as sup_runc_create fills it. -ESRCH (err
 * says why) when it is not live; the next sup_runc_remove_leftovers then
 * removes it. */
int sup_runc_adopt(const sup_runc_cfg *cfg, const sup_runc_states *states, const char *id,
		   sup_isolation isolation, sup_runc_box *box, sbx_err *err);

/* Remove every container, mount, loop device and folder an earlier run of
 * a supervisor with this state folder left behind, in every offered
 * runtime (containers are recognised by the tag in their id, so other
 * supervisors' are left alone), but those of the nkeep sandbox ids in keep
 * (adopted). Returns how many sandboxes it removed. Call before creating
 * any. */
int sup_runc_remove_leftovers(const sup_runc_cfg *cfg, const char *const *keep, size_t nkeep,
			      sbx_err *err);

#endif
