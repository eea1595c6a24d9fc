/* The agents' folder (--agent-dir, the sandbox pods' hostPath): one
 * subfolder per pod UID, each holding that pod's agent.sock. A thread of
 * its own watches it with inotify (libinotifytools: the folder, and each
 * UID folder as it appears) and wakes whoever waits for a UID's socket.
 *
 * It only knows which UIDs are claimed (pods this supervisor made or took
 * back): a socket of any other UID is never handed to anyone, and is
 * logged once, after a grace that lets a pod just made be claimed (its UID
 * comes back in the create's answer, its socket may come first). It must
 * not connect to a socket, nor ask the API server (sup_kube_pods does
 * both). libinotifytools keeps one inotify instance per process: one
 * sup_kube_agents per process. */
#ifndef SUP_KUBE_AGENTS_H
#define SUP_KUBE_AGENTS_H

#include "sbx/err.h"

#define SUP_KUBE_UID_MAX 64         /* a UID: 36 bytes */
#define SUP_KUBE_AGENTS_MAX 4096    /* UID folders tracked at once */
#define SUP_KUBE_AGENT_SOCK "agent.sock"
#define SUP_KUBE_FOREIGN_GRACE_MS 3000

typedef struct sup_kube_agents sup_kube_agents;

/* Watch dir (which must exist), and start the thread. */
sup_kube_agents *sup_kube_agents_start(const char *dir, sbx_err *err);
/* Stop the thread (within about a second) and free. */
void sup_kube_agents_free(sup_kube_agents *a);

/* Claim uid (its socket is ours to dial) and wait until its socket is
 * there, at most timeout_ms: 0, -ETIMEDOUT, -ECANCELED (stopping).
 * Blocking: a worker's. */
int sup_kube_agents_wait(sup_kube_agents *a, const char *uid, unsigned timeout_ms, sbx_err *err);
/* Claim uid without waiting (a pod taken back at start). */
void sup_kube_agents_claim(sup_kube_agents *a, const char *uid);
/* The pod of uid is gone (or being deleted): not ours any more. */
void sup_kube_agents_forget(sup_kube_agents *a, const char *uid);

/* Sockets of UIDs nobody claimed, logged so far (for tests and metrics). */
unsigned long sup_kube_agents_foreign(sup_kube_agents *a);

#endif
