/* GET /v1/sandboxes?scope=cluster (sup_relay.h): this node's list, and
 * every other live node's asked at once with the caller's own token (each
 * node lists what that tenant may see), each due within
 * SUP_RELAY_LIST_MS; a node that does not answer in time, or answers
 * otherwise than with a list, is named in the answer, never failing it.
 * One connection per node and request, its answer bounded. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_relay_int.h"

/* A node's whole list (a supervisor holds at most --max-sandboxes, each
 * about 1 KiB rendered). */
#define LIST_ANSWER_MAX (16u << 20)
/* Nodes asked at once. */
#define LIST_NODES_MAX 4096

typedef struct fan fan;

typedef struct leg {
	fan *f;
	char name[SUP_NODE_NAME_MAX + 1];
	char url[256];
	struct bufferevent *bev;
	bool done;
} leg;

struct fan {
	sup_relay *x;
	sup_http_req *r;
	json_t *sandboxes, *answered, *unanswered;
	leg *legs;
	size_t nlegs, cap, pending;
	struct event *deadline;
	bool over;
};

static void leg_over(leg *g, const char *why)
{
	fan *f = g->f;
	if (g->done)
		return;
	g->done = true;
	if (g->bev)
		bufferevent_free(g->bev);
	g->bev = NULL;
	if (why)
		json_array_append_new(f->unanswered,
				      json_pack("{s:s,s:s}", "name", g->name, "error", why));
	else
		json_array_append_new(f->answered, json_string(g->name));
	f->pending--;
}

static void fan_answer(fan *f)
{
	if (f->over || f->pending)
		return;
	f->over = true;
	if (f->deadline)
		event_del(f->deadline);
	json_t *body = json_pack("{s:O,s:{s:O,s:O}}", "sandboxes", f->sandboxes, "nodes",
				 "answered", f->answered, "unanswered", f->unanswered);
	if (!body) {
		sbx_err e;
		sbx_err_set(&e, -ENOMEM, "out of memory");
		sup_http_fail(f->r, &e);
		return;
	}
	sup_http_json(f->r, 200, body);
}

/* The node's whole answer: its list joins ours. */
static void leg_answer(leg *g, struct evbuffer *in)
{
	int status;
	json_t *j = NULL;
	char why[160];
	if (sup_relay_answer(in, &status, &j) < 0) {
		leg_over(g, "its answer could not be read");
		return;
	}
	json_t *list = json_object_get(j, "sandboxes");
	if (status != 200 || !json_is_array(list)) {
		json_t *e = json_object_get(j, "error");
		snprintf(why, sizeof(why), "HTTP %d%s%.120s", status, e ? ": " : "",
			 e ? json_string_value(json_object_get(e, "message")) ?: "" : "");
		json_decref(j);
		leg_over(g, why);
		return;
	}
	json_array_extend(g->f->sandboxes, list);
	json_decref(j);
	leg_over(g, NULL);
}

static void leg_read(struct bufferevent *bev, void *ud)
{
	leg *g = ud;
	if (evbuffer_get_length(bufferevent_get_input(bev)) > LIST_ANSWER_MAX) {
		leg_over(g, "its answer is over 16 MiB");
		fan_answer(g->f);
	}
}

static void leg_event(struct bufferevent *bev, short what, void *ud)
{
	leg *g = ud;
	fan *f = g->f;
	if (what & BEV_EVENT_CONNECTED) {
		sup_relay_connected(bev);
		bufferevent_enable(bev, EV_READ);
		return;
	}
	if (what & BEV_EVENT_EOF)
		leg_answer(g, bufferevent_get_input(bev));
	else if (what & BEV_EVENT_TIMEOUT)
		leg_over(g, "not reached in time");
	else {
		char why[200];
		sup_relay_dial_error(bev, why, sizeof(why));
		leg_over(g, why);
	}
	fan_answer(f);
}

static void on_deadline(evutil_socket_t fd, short what, void *ud)
{
	fan *f = ud;
	char why[64];
	snprintf(why, sizeof(why), "no answer within %u ms", SUP_RELAY_LIST_MS);
	for (size_t i = 0; i < f->nlegs; i++)
		leg_over(&f->legs[i], why);
	fan_answer(f);
}

static void add_leg(void *ud, const char *name, const char *url)
{
	fan *f = ud;
	if (f->nlegs == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 8;
		leg *v = cap <= LIST_NODES_MAX ? realloc(f->legs, cap * sizeof(*v)) : NULL;
		if (!v)
			return;
		f->legs = v;
		f->cap = cap;
	}
	leg *g = &f->legs[f->nlegs++];
	memset(g, 0, sizeof(*g));
	snprintf(g->name, sizeof(g->name), "%s", name);
	snprintf(g->url, sizeof(g->url), "%s", url);
}

/* The request a node is sent: the caller's token, our credentials. */
static int leg_start(fan *f, leg *g, const sup_http_in *in)
{
	sbx_err e;
	g->f = f;
	f->pending++;
	g->bev = sup_relay_connect(f->x->base, f->x->dns, f->x->tls, g->url, SUP_RELAY_LIST_MS, leg_read, NULL,
				   leg_event, g, &e);
	if (!g->bev) {
		leg_over(g, e.msg);
		return 0;
	}
	struct evbuffer *out = bufferevent_get_output(g->bev);
	const char *auth = sup_http_in_header(in, "Authorization");
	const char *key = sup_http_in_header(in, "OPEN-SANDBOX-API-KEY");
	int rc = evbuffer_add_printf(out, "GET /v1/sandboxes HTTP/1.1\r\nHost: %s\r\n"
					  "Connection: close\r\n%s: 1\r\n%s: %s\r\n",
				     g->name, SUP_HTTP_RELAY_HOPS, SUP_HTTP_RELAY_FROM, f->x->node);
	if (rc >= 0 && auth)
		rc = evbuffer_add_printf(out, "Authorization: %s\r\n", auth);
	else if (rc >= 0 && key)
		rc = evbuffer_add_printf(out, "OPEN-SANDBOX-API-KEY: %s\r\n", key);
	if (rc >= 0 && f->x->key)
		rc = evbuffer_add_printf(out, "%s: %s\r\n", SUP_HTTP_CLUSTER_KEY, f->x->key);
	if (rc >= 0 && f->x->node_token)
		rc = evbuffer_add_printf(out, "%s: %s\r\n", SUP_HTTP_NODE_TOKEN, f->x->node_token);
	if (rc >= 0)
		rc = evbuffer_add(out, "\r\n", 2);
	if (rc < 0)
		leg_over(g, "out of memory");
	return 0;
}

int sup_relay_list_elsewhere(void *ud, sup_http_req *r, json_t *mine, void **handle,
			     sbx_err *err)
{
	sup_relay *x = ud;
	*handle = NULL;
	fan *f = calloc(1, sizeof(*f));
	if (!f) {
		json_decref(mine);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	f->x = x;
	f->r = r;
	f->sandboxes = mine;
	f->answered = json_array();
	f->unanswered = json_array();
	*handle = f;
	if (!f->answered || !f->unanswered || !json_is_array(mine) ||
	    json_array_append_new(f->answered, json_string(x->node)) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	/* A peer's request, or no credential to send: this node's alone. */
	if (x->dir.ops && x->dir.ops->each && (x->key || x->node_token) &&
	    !sup_http_in_header(sup_http_input(r), SUP_HTTP_RELAY_HOPS))
		x->dir.ops->each(x->dir.ud, add_leg, f);
	f->deadline = evtimer_new(x->base, on_deadline, f);
	struct timeval tv = { SUP_RELAY_LIST_MS / 1000, (SUP_RELAY_LIST_MS % 1000) * 1000 };
	if (!f->deadline || evtimer_add(f->deadline, &tv) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < f->nlegs; i++)
		leg_start(f, &f->legs[i], sup_http_input(r));
	fan_answer(f);
	return 1;
}

void sup_relay_list_free(void *handle)
{
	fan *f = handle;
	if (!f)
		return;
	for (size_t i = 0; i < f->nlegs; i++)
		if (f->legs[i].bev)
			bufferevent_free(f->legs[i].bev);
	if (f->deadline)
		event_free(f->deadline);
	json_decref(f->sandboxes);
	json_decref(f->answered);
	json_decref(f->unanswered);
	free(f->legs);
	free(f);
}
