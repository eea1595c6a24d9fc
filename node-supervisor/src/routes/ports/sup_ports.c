/* The port family's rows, the {port} segment and target of a proxied
 * request, and GET /ports (the agent's port.list, checked). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_log.h"
#include "sup_query.h"
#include "sup_ports_int.h"

#define PORTS "/v1/sandboxes/{id}/ports"

/* Most entries GET /ports shows (the agent's own bound). */
#define PORTS_LIST_MAX 1024

static void pp_release(void *state)
{
	sup_pp *pp = state;
	if (pp->op)
		sup_op_cancel(pp->op);
	if (pp->answer_due)
		event_free(pp->answer_due);
	if (pp->up)
		evbuffer_free(pp->up);
	if (pp->down)
		evbuffer_free(pp->down);
	if (pp->chunk)
		evbuffer_free(pp->chunk);
	if (pp->json)
		evbuffer_free(pp->json);
	free((char *)pp->target);
	free(pp->prefix);
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

/* The query without the signed URL's proof (the server inside never sees
 * it, in any of its copies): a new string, "" for none. */
static char *strip_proof(const char *q)
{
	size_t n = q ? strlen(q) : 0;
	char *out = malloc(n + 1);
	size_t o = 0;
	if (!out)
		return NULL;
	for (const char *p = q; p && *p;) {
		size_t l = strcspn(p, "&");
		bool e = strncmp(p, SUP_PORTS_Q_EXP "=", sizeof(SUP_PORTS_Q_EXP)) == 0;
		bool g = strncmp(p, SUP_PORTS_Q_SIG "=", sizeof(SUP_PORTS_Q_SIG)) == 0;
		if (!e && !g && l > 0) {
			if (o)
				out[o++] = '&';
			memcpy(out + o, p, l);
			o += l;
		}
		p += l + (p[l] == '&');
	}
	out[o] = '\0';
	return out;
}

static int parse_url(sup_pp *pp, const sup_http_in *in, sbx_err *err)
{
	static const char *const keys[] = { "expires", NULL };
	SUP_AUTO_QUERY sup_query q = { 0 };
	if (!in->who)
		return sbx_err_set(err, -EPERM, "a signed URL is made with the tenant's token");
	pp->mode = SUP_PP_URL;
	int rc = sup_query_parse(in->query, keys, &q, err);
	if (rc == 0)
		rc = sup_query_uint(&q, "expires", 1, SUP_URLSIGN_MAX_S, SUP_PORTS_URL_DEFAULT_S,
				    &pp->expires, err);
	return rc;
}

static int parse_proxy(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_pp *pp = state;
	char hid[48];
	uint16_t hport;
	pp->ctx = ctx;
	pp->id = in->id;
	if (!in->id || !in->pid)
		return sbx_err_set(err, -EINVAL, "no port in the path");
	int rc = port_of(in->pid, &pp->port, err);
	if (rc < 0)
		return rc;
	pp->by_host = sup_ports_host(pp->ctx, sup_http_in_header(in, "Host"), hid, &hport);
	/* The path below /v1/sandboxes/{id}/ports/{port}, as sent. */
	size_t skip = strlen("/v1/sandboxes/") + strlen(in->id) + strlen("/ports/") + strlen(in->pid);
	const char *rest = strlen(in->path) >= skip ? in->path + skip : "";
	const char *up = sup_http_in_header(in, "Upgrade");
	const char *conn = sup_http_in_header(in, "Connection");
	bool upgrade = up && conn && sup_httpin_has_token(conn, strlen(conn), "upgrade");
	if (!pp->by_host && strcmp(rest, "/url") == 0 && strcmp(in->method, "GET") == 0)
		return parse_url(pp, in, err);
	if (upgrade && strcmp(rest, "/tcp") == 0 && sup_httpin_has_token(up, strlen(up), "tcp")) {
		if (strcmp(in->method, "GET") != 0)
			return sbx_err_set(err, -EINVAL, "a TCP tunnel is GET with Upgrade: tcp");
		pp->mode = SUP_PP_TUNNEL;
	}
	if (upgrade && in->body_expect > 0)
		return sbx_err_set(err, -EINVAL, "an upgrade request has no body");
	pp->upgrade = upgrade;
	if (pp->port == SUP_PORTS_CDP && pp->mode == SUP_PP_HTTP) {
		/* the path the client came by: the one sent, less the port's own */
		const char *sent = in->sent_path ? in->sent_path : in->path;
		size_t sl = strlen(sent), rl = strlen(rest);
		pp->cdp = true;
		pp->cdp_json = !upgrade && sup_ports_cdp_discovery(rest);
		pp->prefix = strndup(sent, sl >= rl && strcmp(sent + sl - rl, rest) == 0 ? sl - rl : sl);
		if (!pp->prefix)
			return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	SBX_AUTO_FREE char *query = strip_proof(in->query);
	if (!query)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	/* the cookie keeps the query's proof, checked again here: the gate
	 * may have vouched by another, and minting from an unchecked expiry
	 * would outlive the URL given */
	pp->set_cookie = !in->who &&
			 sup_ports_query_proof(pp->ctx, in->query, pp->id, pp->port, &pp->expires);
	size_t rl = strlen(rest), ql = strlen(query);
	char *t = malloc(rl + ql + 3);
	if (!t)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	snprintf(t, rl + ql + 3, "%s%s%s%s", rl ? "" : "/", rest, ql ? "?" : "", query);
	pp->target = t;
	return 0;
}

/* GET /v1/sandboxes/{id}/browser[?expires=S]: the DevTools port's
 * /json/version, asked through the proxy, answered as the endpoint. */
static int parse_browser(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "expires", NULL };
	SUP_AUTO_QUERY sup_query q = { 0 };
	sup_pp *pp = state;
	pp->ctx = ctx;
	pp->id = in->id;
	pp->port = SUP_PORTS_CDP;
	pp->mode = SUP_PP_BROWSER;
	pp->cdp = pp->cdp_json = true;
	int rc = sup_query_parse(in->query, keys, &q, err);
	if (rc == 0)
		rc = sup_query_uint(&q, "expires", 1, SUP_URLSIGN_MAX_S, SUP_PORTS_URL_DEFAULT_S,
				    &pp->expires, err);
	if (rc < 0)
		return rc;
	char *prefix = NULL;
	if (asprintf(&prefix, "/v1/sandboxes/%s/ports/%u", in->id, (unsigned)SUP_PORTS_CDP) < 0 ||
	    !(pp->target = strdup("/json/version"))) {
		free(prefix);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	pp->prefix = prefix;
	return 0;
}

/* ---- GET /ports ---- */

/* An address as the agent's /proc/net/tcp{,6} reading gives it: hex
 * digits, dots and colons, every one of its n bytes (a str from the agent
 * ends where its length says, with no NUL after it). */
static bool addr_chars_ok(const char *a, size_t n)
{
	static const char ok[] = "0123456789abcdefABCDEF.:";
	for (size_t i = 0; i < n; i++)
		if (!a[i] || !memchr(ok, a[i], sizeof(ok) - 1))
			return false;
	return true;
}

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
		    al > 45 || !addr_chars_ok(a, al)) {
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
	{ "GET", "/v1/sandboxes/{id}/browser", "GET browser", SUP_BODY_NONE, 0, parse_browser,
	  sup_ports_act_proxy },
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
