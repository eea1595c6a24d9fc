/* GET /opensandbox/execd/{id}/metrics/watch: their execd's stream of
 * metrics snapshots, each their Metrics object (the one GET .../metrics
 * answers, from the same figures) as one bare JSON object and a blank
 * line: the first at once, then one a second. A sample that cannot be
 * read (a paused sandbox) goes as {"error": "..."}, as their server
 * writes it, and the stream goes on; once the sandbox is gone the error
 * is the last word. A client that does not read gets no new sample until
 * it caught up (at most WATCH_BACKLOG bytes wait for it); the stream ends
 * when the client goes. */
#include "sup_osbx_int.h"

#include <errno.h>
#include <event2/event.h>

#define WATCH_PERIOD_MS 1000
#define WATCH_BACKLOG (16u * 1024u)

void sup_osbx_watch_release(sup_oq *q)
{
	if (q->tick)
		event_free(q->tick);
	q->tick = NULL;
}

static void sample(evutil_socket_t fd, short what, void *ud)
{
	sup_oq *q = ud;
	const sup_http_in *in = sup_http_input(q->r);
	sbx_err e;
	(void)fd;
	(void)what;
	if (sup_stream_backlog(q->s) > WATCH_BACKLOG)
		return;
	sbx_err_clear(&e);
	json_t *o = sup_osbx_metrics_json(q->x, in->who, in->id, &e);
	if (!o) {
		sup_stream_json(q->s, "", json_pack("{s:s}", "error", e.msg));
		if (e.code == -ENOENT) {
			sup_stream_end(q->s);
			q->s = NULL;
			event_free(q->tick);
			q->tick = NULL;
		}
		return;
	}
	sup_stream_json(q->s, "", o); /* taken */
}

int sup_osbx_act_watch(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	const sup_http_in *in = sup_http_input(r);
	sup_sandbox_view v;
	q->r = r;
	q->x = sup_http_ctx(r);
	q->id = in->id;
	/* an unknown sandbox is a plain error, before the stream */
	if (sup_core_get(q->x->core, in->who, in->id, &v, err) < 0)
		return err->code;
	q->tick = event_new(sup_http_base(r), -1, EV_PERSIST, sample, q);
	if (!q->tick || !(q->s = sup_stream_start(r, SUP_STREAM_BARE, NULL, NULL)))
		return sbx_err_set(err, -ENOMEM, "out of memory starting the stream");
	struct timeval tv = { WATCH_PERIOD_MS / 1000, (WATCH_PERIOD_MS % 1000) * 1000 };
	event_add(q->tick, &tv);
	sample(-1, 0, q);
	return 0;
}
