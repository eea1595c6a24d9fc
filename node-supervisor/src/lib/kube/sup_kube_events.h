/* Kubernetes Events about sandbox pods (core/v1, in the pod's namespace),
 * coalesced as the kubelet's event correlator does: a repeat of one
 * reason for pods of one template within SUP_KUBE_EV_WINDOW_MS is the
 * same Event written again, its count raised and its lastTimestamp and
 * message the latest ("(combined from similar events): ..."), so a
 * template whose pods keep failing makes one Event per reason per window,
 * not one per pod. The involved object stays the first pod; the message
 * names the latest.
 *
 * Pure: no I/O, no lock, no clock of its own (times and randomness are
 * passed in), so its bounds are unit-tested. sup_kube_pods owns the table
 * (under its mutex) and sends what it answers on its writer thread. */
#ifndef SUP_KUBE_EVENTS_H
#define SUP_KUBE_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "sup_kube_agents.h"
#include "sup_kube_retry.h"
#include "sup_kube_tmpl.h"

#define SUP_KUBE_EV_SLOTS 32                    /* (reason, template) pairs remembered */
#define SUP_KUBE_EV_WINDOW_MS (10LL * 60 * 1000) /* the kubelet's: 10 minutes */
#define SUP_KUBE_EV_REASON_MAX 48
#define SUP_KUBE_EV_MSG_MAX 1024                /* the API server's limit is 1 KiB too */
#define SUP_KUBE_EV_KEY_PREFIX "event:"         /* its write's key in sup_kube_queue */
#define SUP_KUBE_EV_NAME_MAX (SUP_KUBE_KEY_MAX - sizeof(SUP_KUBE_EV_KEY_PREFIX) + 1)

typedef struct sup_kube_ev_slot {
	char reason[SUP_KUBE_EV_REASON_MAX];
	char tmpl[SUP_KUBE_TMPL_NAME_MAX];
	char name[SUP_KUBE_EV_NAME_MAX]; /* the Event's */
	char pod[SUP_KUBE_TMPL_NAME_MAX * 2];
	char uid[SUP_KUBE_UID_MAX];
	char first[32];        /* firstTimestamp */
	long long first_ms;    /* monotonic, for the window */
	unsigned count;
} sup_kube_ev_slot;

typedef struct sup_kube_evs {
	sup_kube_ev_slot v[SUP_KUBE_EV_SLOTS];
	size_t n;
	uint64_t coalesced;    /* occurrences written as a count, ever */
} sup_kube_evs;

typedef struct sup_kube_pod_ev {
	const char *ns, *node;  /* the pod's namespace; this node (source.host) */
	const char *pod, *uid;  /* the pod */
	const char *tmpl;       /* its template */
	const char *reason;     /* CamelCase, as Kubernetes' ("ResetFailed") */
	const char *message;
	bool warning;
} sup_kube_pod_ev;

/* One occurrence of ev at now_ms (monotonic) and wall (real time); rnd
 * names a new Event. Returns the Event as it stands now (JSON, malloc'd;
 * NULL out of memory) and its name in name (cap bytes:
 * SUP_KUBE_EV_NAME_MAX). The same name
 * again means the same Event: POST it, and on 409 patch it with the same
 * body. A full table gives up its oldest slot. */
char *sup_kube_evs_note(sup_kube_evs *e, const sup_kube_pod_ev *ev, long long now_ms,
			const struct timespec *wall, uint32_t rnd, char *name, size_t cap);

#endif
