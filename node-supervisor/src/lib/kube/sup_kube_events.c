/* sup_kube_events: Events about pods, coalesced (sup_kube_events.h). */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "sup_kube_events.h"
#include "sup_text.h"

#define COMBINED "(combined from similar events): "

static sup_kube_ev_slot *slot_for(sup_kube_evs *e, const sup_kube_pod_ev *ev, long long now_ms, bool *fresh)
{
	size_t oldest = 0;
	for (size_t i = 0; i < e->n; i++) {
		sup_kube_ev_slot *s = &e->v[i];
		if (strcmp(s->reason, ev->reason) == 0 && strcmp(s->tmpl, ev->tmpl) == 0) {
			*fresh = now_ms - s->first_ms >= SUP_KUBE_EV_WINDOW_MS;
			return s;
		}
		if (s->first_ms < e->v[oldest].first_ms)
			oldest = i;
	}
	*fresh = true;
	return e->n < SUP_KUBE_EV_SLOTS ? &e->v[e->n++] : &e->v[oldest];
}

char *sup_kube_evs_note(sup_kube_evs *e, const sup_kube_pod_ev *ev, long long now_ms,
			const struct timespec *wall, uint32_t rnd, char *name, size_t cap)
{
	bool fresh;
	sup_kube_ev_slot *s = slot_for(e, ev, now_ms, &fresh);
	char now[32];
	sup_rfc3339(wall->tv_sec, now, sizeof(now));
	if (fresh) {
		memset(s, 0, sizeof(*s));
		snprintf(s->reason, sizeof(s->reason), "%s", ev->reason);
		snprintf(s->tmpl, sizeof(s->tmpl), "%s", ev->tmpl);
		snprintf(s->pod, sizeof(s->pod), "%s", ev->pod);
		snprintf(s->uid, sizeof(s->uid), "%s", ev->uid);
		snprintf(s->first, sizeof(s->first), "%s", now);
		/* unique, as client-go names them: the object, then the time */
		snprintf(s->name, sizeof(s->name), "%.128s.%" PRIx64 "%08" PRIx32, ev->pod,
			 (uint64_t)wall->tv_sec * 1000000000u + (uint64_t)wall->tv_nsec, rnd);
		s->first_ms = now_ms;
	} else {
		e->coalesced++;
	}
	s->count++;
	char msg[SUP_KUBE_EV_MSG_MAX];
	snprintf(msg, sizeof(msg), "%s%s", s->count > 1 ? COMBINED : "", ev->message);
	char inst[129]; /* reportingInstance holds 128 bytes, a node name 253 */
	snprintf(inst, sizeof(inst), "%.128s", ev->node);
	json_t *o = json_pack(
		"{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s,s:s},s:s,s:s,s:s,s:{s:s,s:s},s:s,s:s,s:s,s:s,s:i}",
		"apiVersion", "v1", "kind", "Event", "metadata", "name", s->name, "namespace", ev->ns,
		"involvedObject", "apiVersion", "v1", "kind", "Pod", "namespace", ev->ns, "name", s->pod,
		"uid", s->uid, "reason", s->reason, "message", msg, "type",
		ev->warning ? "Warning" : "Normal", "source", "component", "sandbox-supervisor", "host",
		ev->node, "reportingComponent", "sandbox-supervisor", "reportingInstance", inst,
		"firstTimestamp", s->first, "lastTimestamp", now, "count", (json_int_t)s->count);
	char *body = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	snprintf(name, cap, "%s", s->name);
	return body;
}
