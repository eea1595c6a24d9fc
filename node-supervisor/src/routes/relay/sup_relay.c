/* The relay's decisions: which requests go to another node (admit), the
 * door peers come in by (the cluster key, the node token reviewed, the
 * capacity they poll), and a create sent where sandboxes are ready. The
 * bytes are sup_relay_pipe.c's. */
#include "sup_relay.h"

#include <errno.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_log.h"
#include "sup_relay_int.h"
#include "sup_tls.h"
#include "sup_token.h"

#define SECRET_MIN 16
#define SECRET_MAX 8192

int sup_relay_secret_load(const char *what, const char *path, char **out, sbx_err *err)
{
	*out = NULL;
	SBX_AUTO_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "%s %s", what, path);
	char *buf = malloc(SECRET_MAX + 2);
	if (!buf)
		return sbx_err_set(err, -ENOMEM, "%s", what);
	size_t n = 0;
	for (;;) {
		ssize_t k = read(fd, buf + n, SECRET_MAX + 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			free(buf);
			return sbx_err_sys(err, -errno, "%s %s", what, path);
		}
		if (k == 0 || (n += (size_t)k) > SECRET_MAX)
			break;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	bool ok = n >= SECRET_MIN && n <= SECRET_MAX;
	for (size_t i = 0; ok && i < n; i++)
		ok = buf[i] > ' ' && buf[i] < 0x7f;
	if (!ok) {
		explicit_bzero(buf, n);
		free(buf);
		return sbx_err_set(err, -EINVAL,
				   "%s %s: want %d-%d visible ASCII bytes (a key: openssl rand -hex 32)",
				   what, path, SECRET_MIN, SECRET_MAX);
	}
	buf[n] = '\0';
	*out = buf;
	return 0;
}

int sup_relay_init(sup_relay *x, struct event_base *base, sup_core *core, const char *node,
		   char *key, sup_directory dir, sbx_err *err)
{
	memset(x, 0, sizeof(*x));
	x->base = base;
	x->core = core;
	x->dir = dir;
	x->key = key;
	x->connect_ms = SUP_RELAY_CONNECT_MS;
	TAILQ_INIT(&x->kept);
	snprintf(x->node, sizeof(x->node), "%s", node);
	sup_nodeid_tag(x->node, x->tag);
	if (dir.ops && !x->key)
		return sbx_err_set(err, -EINVAL, "--peer needs --cluster-key-file");
	/* Names (a Service's, a host's) resolved off the loop; /etc/hosts too. */
	x->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
					      EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (!x->dns)
		x->dns = evdns_base_new(base, 0);
	if (x->dns)
		evdns_base_load_hosts(x->dns, NULL);
	return 0;
}

static void secret_free(char **s)
{
	if (*s) {
		explicit_bzero(*s, strlen(*s));
		free(*s);
	}
	*s = NULL;
}

/* The kubelet writes a new token well before the old one expires. */
static void on_token_tick(evutil_socket_t fd, short what, void *ud)
{
	sup_relay *x = ud;
	char *fresh = NULL;
	sbx_err e;
	(void)fd;
	(void)what;
	if (sup_relay_secret_load("node token", x->node_token_file, &fresh, &e) < 0) {
		sup_warn("relay: %s; the last one read is still sent", e.msg);
		return;
	}
	secret_free(&x->node_token);
	x->node_token = fresh;
}

int sup_relay_node_auth(sup_relay *x, sup_relay_auth *auth, const char *token_file,
			const char *token, sbx_err *err)
{
	x->auth = auth;
	if (token_file) {
		if (!(x->node_token_file = strdup(token_file)))
			return sbx_err_set(err, -ENOMEM, "node token");
		if (sup_relay_secret_load("node token", token_file, &x->node_token, err) < 0)
			return err->code;
		x->token_tick = event_new(x->base, -1, EV_PERSIST, on_token_tick, x);
		struct timeval tv = { SUP_RELAY_TOKEN_RELOAD_MS / 1000, 0 };
		if (!x->token_tick || event_add(x->token_tick, &tv) < 0)
			return sbx_err_set(err, -ENOMEM, "node token timer");
	} else if (token && !(x->node_token = strdup(token))) {
		return sbx_err_set(err, -ENOMEM, "node token");
	}
	return 0;
}

void sup_relay_release(sup_relay *x)
{
	if (x->base)
		sup_relay_keep_clear(x);
	if (x->token_tick)
		event_free(x->token_tick);
	x->token_tick = NULL;
	secret_free(&x->node_token);
	free(x->node_token_file);
	x->node_token_file = NULL;
	sup_relay_auth_free(x->auth);
	x->auth = NULL;
	if (x->dns)
		evdns_base_free(x->dns, 0);
	x->dns = NULL;
	secret_free(&x->key);
}

/* ---- the door ---- */

/* A request that says it was relayed (or carries a node credential) is a
 * peer's. */
static bool from_peer(const sup_http_in *in)
{
	return sup_http_in_header(in, SUP_HTTP_RELAY_HOPS) ||
	       sup_http_in_header(in, SUP_HTTP_CLUSTER_KEY) ||
	       sup_http_in_header(in, SUP_HTTP_NODE_TOKEN);
}

/* This node sends a node credential: it may relay. */
static bool relays(const sup_relay *x)
{
	return x->dir.ops && (x->key || x->node_token);
}

int sup_relay_admit(void *ud, sup_http_req *r, const char *id, sbx_err *err)
{
	sup_relay *x = ud;
	const sup_http_in *in = sup_http_input(r);
	char tag[SUP_NODEID_TAG_MAX + 1];
	bool peer = from_peer(in);
	if (peer) {
		const char *key = sup_http_in_header(in, SUP_HTTP_CLUSTER_KEY);
		if (!x->key && !x->auth)
			return sbx_err_set(err, -EACCES, "relayed request refused: this node has no "
							 "cluster key and reviews no node token");
		if (x->key && (!key || !sup_token_equal(x->key, key, strlen(key))))
			return sbx_err_set(err, -EACCES, "relayed request refused: %s cluster key",
					   key ? "wrong" : "no");
		/* with the cluster's CA, a peer proves itself by its client
		 * certificate too: a key that leaked is not enough */
		char why[200];
		if (x->tls && sup_tls_client_ctx(x->tls) && sup_http_tls_peer(r, why, sizeof(why)) != 1)
			return sbx_err_set(err, -EACCES, "relayed request refused: the relaying node "
							 "did not prove itself: %s", why);
	}
	bool here = !id || !sup_nodeid_tag_of(id, tag, sizeof(tag)) || strcmp(tag, x->tag) == 0;
	if (peer && !here)
		return sbx_err_set(err, -ELOOP, "sandbox %s is on node %s, not here: a relayed "
						"request is not relayed again", id, tag);
	if (peer && x->auth) {
		const char *tok = sup_http_in_header(in, SUP_HTTP_NODE_TOKEN);
		if (!tok)
			return sbx_err_set(err, -ENOKEY, "relayed request refused: no node token (%s)",
					   SUP_HTTP_NODE_TOKEN);
		return sup_relay_auth_check(x->auth, r, tok, err);
	}
	if (here)
		return 0;
	if (!relays(x))
		return sbx_err_set(err, -ENOENT, "no sandbox %s: node %s is not known here", id, tag);
	return 1;
}

/* ---- the relay route: every request for another node's sandbox ---- */

static int act_relay(sup_http_req *r, void *state, sbx_err *err)
{
	sup_relay_pipe *p = state;
	char tag[SUP_NODEID_TAG_MAX + 1];
	const sup_http_in *in = sup_http_input(r);
	if (!in->id || !sup_nodeid_tag_of(in->id, tag, sizeof(tag)))
		return sbx_err_set(err, -ENOENT, "no sandbox");
	return sup_relay_pipe_start(p, sup_http_ctx(r), r, tag, false, err);
}

static void relay_release(void *state)
{
	sup_relay_pipe_release(state);
}

static const sup_http_route relay_routes[] = {
	{ "*", "{*}", "relay", SUP_BODY_STREAMED, 0, NULL, act_relay },
};

const sup_http_family sup_relay_family = {
	.name = "relay",
	.routes = relay_routes,
	.nroutes = 1,
	.state_size = sizeof(sup_relay_pipe),
	.release = relay_release,
};

/* ---- GET /relay/v1/capacity ---- */

static int act_capacity(sup_http_req *r, void *state, sbx_err *err)
{
	sup_relay *x = sup_http_ctx(r);
	/* The door is for peers: admit has checked the key of one that came
	 * with it; one that came without is no peer. */
	if (!from_peer(sup_http_input(r)))
		return sbx_err_set(err, -EACCES, "the relay door asks for the cluster key");
	json_t *pools = json_array();
	for (size_t i = 0; pools && i < sup_core_pool_count(x->core); i++) {
		sup_pool_stats st;
		sup_core_pool_stats(x->core, i, &st);
		json_array_append_new(pools, json_pack("{s:s, s:s, s:i, s:i}", "image", st.image,
						       "isolation",
						       sup_isolation_names[st.isolation], "size",
						       (int)st.size, "ready", (int)st.ready));
	}
	sup_http_json(r, 200, json_pack("{s:s, s:o*}", "node", x->node, "pools", pools));
	return 0;
}

static const sup_http_route door_routes[] = {
	{ "GET", "/relay/v1/capacity", "GET relay capacity", SUP_BODY_NONE, 0, NULL, act_capacity },
};

const sup_http_family sup_relay_door_family = {
	.name = "relay",
	.routes = door_routes,
	.nroutes = 1,
};

/* ---- a create sent where sandboxes are ready ---- */

static unsigned ready_here(sup_core *core, const sup_create_req *req)
{
	const char *image = req->image ? req->image : "host";
	unsigned ready = 0;
	for (size_t i = 0; i < sup_core_pool_count(core); i++) {
		sup_pool_stats st;
		sup_core_pool_stats(core, i, &st);
		if (strcmp(st.image, image) == 0 &&
		    (!(req->given & SUP_CREATE_GIVEN_ISOLATION) || st.isolation == req->isolation))
			ready += st.ready;
	}
	return ready;
}

int sup_relay_create_elsewhere(void *ud, sup_http_req *r, const sup_create_req *req,
			       void **handle, sbx_err *err)
{
	sup_relay *x = ud;
	char node[SUP_NODE_NAME_MAX + 1], tag[SUP_NODEID_TAG_MAX + 1];
	*handle = NULL;
	/* A snapshot's files and a volume are this node's; a relayed create
	 * is served where it was sent. */
	if (!relays(x) || from_peer(sup_http_input(r)) || req->snapshot ||
	    req->volumes.n || ready_here(x->core, req) > 0)
		return 0;
	const char *image = req->image ? req->image : "host";
	if (x->dir.ops->pick(x->dir.ud, image, node, sizeof(node)) < 0)
		return 0;
	sup_nodeid_tag(node, tag);
	if (strcmp(tag, x->tag) == 0)
		return 0;
	sup_relay_pipe *p = calloc(1, sizeof(*p));
	if (!p)
		return sbx_err_set(err, -ENOMEM, "relay: out of memory");
	if (sup_relay_pipe_start(p, x, r, tag, true, err) < 0) {
		sup_relay_handle_free(p);
		/* The pick is gone meanwhile: this node makes one itself. */
		sup_info("create: node %s picked but not reached (%s); made here", node, err->msg);
		sbx_err_clear(err);
		return 0;
	}
	*handle = p;
	return 1;
}

void sup_relay_handle_free(void *handle)
{
	if (!handle)
		return;
	sup_relay_pipe_release(handle);
	free(handle);
}
