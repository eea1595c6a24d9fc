/* The port family's rows, the {port} segment and target of a proxied
 * request, and GET /ports (the agent's port.list, checked). */
#include <errno.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "sup_log.h"
#include "sup_ports_int.h"

#define PORTS "/v1/sandboxes/{id}/ports"

/* Most entries GET /ports shows (the agent's own bound). */
#define PORTS_LIST_MAX 1024

static void pp_release(void *state)
{
	sup_pp *pp = state;
	if (pp->op)
		sup_op_cancel(pp->op);
	if (pp->up)
		evbuffer_free(pp->up);
	if (pp->down)
		evbuffer_free(pp->down);
	if (pp->chunk)
		evbuffer_free(pp->chunk);
	free((char *)pp->target);
}

/* "1".."65535", digits only. */
static int port_of(const char *s, uint16_t *port, sbx_err *err)
{
	unsigned long v = 0;
	size_t n = strspn(s, "0123456789");
	if (n == 0 || n > 5 || s[n] != '\0' || (v = strtoul(s, NULL, 10)) < 1 || v > 65535)
		return sbx_err_set(err, -EINVAL, "port \"%.32s\": want an integer 1..65535", s);
	*port = (uint16_t)v;
	return 0;
}

static int parse_proxy(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_pp *pp = state;
	pp->ctx = ctx;
	pp->id = in->id;
	if (!in->id || !in->pid)
		return sbx_err_set(err, -EINVAL, "no port in the path");
	int rc = port_of(in->pid, &pp->port, err);
	if (rc < 0)
		return rc;
	/* The path below /v1/sandboxes/{id}/ports/{port}, as sent. */
	size_t skip = strlen("/v1/sandboxes/") + strlen(in->id) + strlen("/ports/") + strlen(in->pid);
	const char *rest = strlen(in->path) >= skip ? in->path + skip : "";
	const char *up = sup_http_in_header(in, "Upgrade");
	const char *conn = sup_http_in_header(in, "Connection");
	bool upgrade = up && conn && sup_pp_has_token(conn, strlen(conn), "upgrade");
	if (upgrade && strcmp(rest, "/tcp") == 0 && sup_pp_has_token(up, strlen(up), "tcp")) {
		if (strcmp(in->method, "GET") != 0)
			return sbx_err_set(err, -EINVAL, "a TCP tunnel is GET with Upgrade: tcp");
		pp->mode = SUP_PP_TUNNEL;
	}
	if (upgrade && in->body_expect > 0)
		return sbx_err_set(err, -EINVAL, "an upgrade request has no body");
	pp->upgrade = upgrade;
	size_t rl = strlen(rest), ql = in->query ? strlen(in->query) + 1 : 0;
	char *t = malloc(rl + ql + 2);
	if (!t)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	snprintf(t, rl + ql + 2, "%s%s%s%s", rl ? "" : "/", rest, ql ? "?" : "",
		 ql ? in->query : "");
	pp->target = t;
	return 0;
}

/* ---- GET /ports ---- */

static void list_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pp *pp = ud;
	sbx_err e;
	sbx_err_clear(&e);
	pp->op = NULL;
	if (rc < 0) {
		sup_http_fail(pp->r, err);
		return;
	}
	const msgpack_object *ports = sbx_proto_map_get(result, "ports");
	json_t *arr = json_array();
	if (!arr) {
		sbx_err_set(&e, -ENOMEM, "out of memory");
		sup_http_fail(pp->r, &e);
		return;
	}
	uint32_t n = 0;
	if (!ports || ports->type != MSGPACK_OBJECT_ARRAY || ports->via.array.size > PORTS_LIST_MAX)
		rc = sbx_err_set(&e, -EPROTO, "agent: port.list without a bounded \"ports\" array");
	else
		n = ports->via.array.size;
	for (uint32_t i = 0; i < n; i++) {
		const msgpack_object *o = &ports->via.array.ptr[i];
		uint64_t port = 0;
		const char *a = NULL;
		size_t al = 0;
		if (o->type != MSGPACK_OBJECT_MAP || !sbx_proto_get_uint(o, "port", &port) ||
		    port < 1 || port > 65535 || !sbx_proto_get_str(o, "addr", &a, &al) || al == 0 ||
		    al > 45 || strspn(a, "0123456789abcdefABCDEF.:") < al) {
			rc = sbx_err_set(&e, -EPROTO, "agent: port.list entry %u is not {port, addr}", i);
			break;
		}
		json_array_append_new(arr, json_pack("{s:I, s:s%}", "port", (json_int_t)port,
						     "address", a, al));
	}
	if (rc < 0) {
		json_decref(arr);
		sup_core_blame(pp->ctx->core, pp->id, &e);
		sup_http_fail(pp->r, &e);
		return;
	}
	sup_http_json(pp->r, 200, json_pack("{s:o}", "ports", arr));
}

static const sup_core_call_cbs list_cbs = { .on_done = list_done };

static int parse_list(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_pp *pp = state;
	pp->ctx = ctx;
	pp->id = in->id;
	return 0;
}

static int act_list(sup_http_req *r, void *state, sbx_err *err)
{
	sup_pp *pp = state;
	sbx_proto_args args;
	pp->r = r;
	sbx_proto_args_init(&args);
	return sup_core_call(pp->ctx->core, pp->id, SBX_OP_PORT_LIST, &args, &list_cbs, pp, &pp->op,
			     err);
}

#define PROXY(m) \
	{ m, PORTS "/{pid}{*}", m " port", SUP_BODY_STREAMED, 0, parse_proxy, sup_ports_act_proxy }

static const sup_http_route routes[] = {
	{ "GET", PORTS, "GET ports", SUP_BODY_NONE, 0, parse_list, act_list },
	PROXY("GET"),
	PROXY("POST"),
	PROXY("PUT"),
	PROXY("PATCH"),
	PROXY("DELETE"),
	PROXY("OPTIONS"),
};

const sup_http_family sup_ports_family = {
	.name = "ports",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(sup_pp),
	.release = pp_release,
};
