/* The supervisor's HTTP/1.1 edge: one connection layer over libevent
 * bufferevents (an evconnlistener, one socket bufferevent per connection)
 * with sup_httpin_parse as its only parser, and the one request framework
 * every route runs on.
 *
 * Owns connections and requests: keep-alive and pipelining (answers in
 * order, one request at a time per connection), request bodies (buffered up
 * to a bound, or streamed to the handler with backpressure, Content-Length
 * or chunked, Expect: 100-continue), replies (JSON, Content-Length, chunked
 * or, for HTTP/1.0, close-delimited; HEAD), the limits (head size and
 * count, body size, head/body/idle timeouts, --max-connections), bearer
 * authentication, routing, the errno -> status table (sup_http_status.c),
 * the one log line per request, connection upgrade, graceful stop.
 *
 * A route is a row: method, pattern, body mode, a pure parser (request ->
 * the route's plain state struct, or a negative errno with an sbx_err; it
 * never replies) and an act (starts the work; it replies exactly once, now
 * or from a callback, or returns an error the framework answers). The
 * framework allocates the state, calls the family's release when the
 * request ends (answered, or the client gone) and frees it: a handler never
 * frees a request. It must not know sandboxes, agents or the core.
 * Loop thread only. */
#ifndef SUP_HTTP_H
#define SUP_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sbx/json_auto.h"

struct event_base;
struct evbuffer;
struct sup_tenant; /* the caller, as the auth hook says: never looked into here */
struct sup_tls;    /* the node's TLS contexts (sup_tls.h) */
typedef struct sup_http sup_http;
typedef struct sup_http_req sup_http_req;

typedef enum sup_http_body_mode {
	SUP_BODY_NONE = 0, /* a body is read and dropped (bounded like BUFFERED) */
	SUP_BODY_BUFFERED, /* read whole (up to the row's max_body) before parse */
	SUP_BODY_STREAMED, /* the act takes it: sup_http_body_start and _body */
	SUP_BODY_UPGRADE,  /* no body; the act may take the connection over */
} sup_http_body_mode;

/* Bytes (with the NUL) of a path's {id} segment and of its other one
 * ({pid}, {ref}: an image ref percent-encoded, 255 bytes of 3 each). */
#define SUP_HTTP_ID_MAX 48
#define SUP_HTTP_SEG_MAX 800

/* Headers between the nodes of a cluster (the relay's, DESIGN.md "Relay"):
 * the node-to-node credential, the hops a request has made, the node it
 * came from. Nothing passes them on to a sandbox. */
#define SUP_HTTP_CLUSTER_KEY "Sbx-Cluster-Key"
#define SUP_HTTP_RELAY_HOPS "Sbx-Relay-Hops"
#define SUP_HTTP_RELAY_FROM "Sbx-Relay-From"
/* The relaying node's service-account token, for a TokenReview (cluster) */
#define SUP_HTTP_NODE_TOKEN "Sbx-Node-Token"

/* A request as a parser sees it: plain data, valid while the request is. */
typedef struct sup_http_hdr {
	const char *name;
	const char *value;
} sup_http_hdr;

typedef struct sup_http_in {
	const char *method;
	const char *path;     /* as sent (not decoded), without the query */
	const char *sent_path; /* the same, when the gate routes by another path
				* (by Host, a signed path form); else NULL */
	const char *query;    /* after '?', NULL when none */
	const char *id;       /* the {id} segment, or NULL */
	const char *pid;      /* the {pid} (or {ref}) segment as sent, or NULL */
	const sup_http_hdr *hdrs;
	size_t nhdrs;
	const char *body;     /* a buffered body, NUL-terminated ("" when none) */
	size_t body_len;
	uint64_t body_expect; /* a streamed body: its Content-Length, UINT64_MAX chunked */
	const struct sup_tenant *who; /* the bearer token's (held for the request);
				       * NULL: none given, or a listener without auth */
} sup_http_in;

/* The first value of header name (case-insensitive), or NULL. */
const char *sup_http_in_header(const sup_http_in *in, const char *name);
/* The buffered body as a JSON object (*out, also on failure: decref it)
 * with only the keys listed (NULL-terminated; NULL: any): 0, or -EINVAL. */
int sup_http_in_json(const sup_http_in *in, const char *const *keys, json_t **out, sbx_err *err);

typedef struct sup_http_route {
	const char *method;     /* HEAD runs a GET row */
	const char *pattern;    /* segments; "{id}" a sandbox id, "{pid}" any */
	const char *name;       /* for the log: "GET files" */
	sup_http_body_mode body;
	size_t max_body;        /* BUFFERED/NONE: bytes; 0: the server's max_body */
	/* May be NULL (nothing to parse). ctx is the family's. */
	int (*parse)(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
	int (*act)(sup_http_req *r, void *state, sbx_err *err);
} sup_http_route;

/* Routes that share a state type and a release. */
typedef struct sup_http_family {
	const char *name;        /* "files": the status table's per-family column */
	const sup_http_route *routes;
	size_t nroutes;
	size_t state_size;
	/* Cancel what the state has in flight and free what it owns; no
	 * callback of it may run afterwards. NULL: nothing to do. */
	void (*release)(void *state);
	/* The "path" an error is about, for the error body (NULL: none); may
	 * log (a policy denial). NULL: no family hook. */
	const char *(*subject)(void *state, const sbx_err *err, size_t *len);
} sup_http_family;

typedef struct sup_http_mount {
	const sup_http_family *family;
	void *ctx;
} sup_http_mount;

typedef struct sup_http_error_shape {
	const char *prefix;
	/* A new body (NULL without memory: sbx's is sent). */
	json_t *(*body)(int status, const char *path, json_t *sbx_error);
} sup_http_error_shape;
/* The OpenSandbox layer's shape: sbx's error object flat, {"code","message"}. */
json_t *sup_http_error_flat(int status, const char *path, json_t *sbx_error);

typedef struct sup_http_cfg {
	const char *host;
	uint16_t port;            /* 0: any free port; see sup_http_port */
	/* HTTPS: every connection a TLS one, made with the server context in
	 * force when it is accepted (reloaded in place: connections keep
	 * theirs); its handshake due within head_timeout_s; a client that
	 * speaks plain HTTP to it is answered 400 in clear and closed. NULL:
	 * plain HTTP (a warning at start unless on loopback). */
	struct sup_tls *tls;
	/* Who a bearer token is, held until the request ends (then release);
	 * NULL for a wrong one. Required under /v1 (401 without), optional
	 * elsewhere (a route may ask sup_http_in.who). NULL hook: a listener
	 * without authentication, whose mounts may have no /v1 route. */
	const struct sup_tenant *(*auth)(void *ud, const char *token, size_t len);
	void (*release)(const struct sup_tenant *who);
	void *auth_ud;
	/* Whether who may name the sandbox of a route's {id}: 0, or an error
	 * answered (as sup_http_status says) before the route's parser runs:
	 * one place for every route, so no family can forget it. NULL: any. */
	int (*check_id)(void *ud, const struct sup_tenant *who, const char *id, sbx_err *err);
	void *check_ud;
	/* Before authentication (NULL: none; the port proxy's and E2B's): it
	 * may route by Host or headers (setting *path, malloc'd, freed by the
	 * edge, to the path to route by) and vouch for a request that proves
	 * itself for the sandbox its path names (a signed URL): no bearer
	 * token is asked then, who stays NULL and check_id is skipped. Or it
	 * may say who the caller is from a credential of its own (*who, held:
	 * released as an auth hook's is; check_id still runs). Returns 0 (as
	 * usual), 1 (vouched for), or an error answered as sup_http_status
	 * says. */
	int (*gate)(void *ud, const sup_http_in *in, char **path, const struct sup_tenant **who,
		    sbx_err *err);
	void *gate_ud;
	/* After the gate and before authentication (NULL: none; the relay's):
	 * given each request and the sandbox id its route names (NULL when
	 * none, or no route matched), it returns 0 (served here, as usual),
	 * 1 (taken over by relay_mount's one route: no token is asked here,
	 * the node that holds the sandbox asks it), 2 (held, having called
	 * sup_http_hold: a peer's credential is being checked elsewhere), or
	 * an error answered as sup_http_status says (a relayed request
	 * without the cluster's key). */
	int (*relay)(void *ud, sup_http_req *r, const char *id, sbx_err *err);
	void *relay_ud;
	const sup_http_mount *relay_mount;
	/* Every answered request: its route's name ("unmatched" when no route
	 * took it) and status (metrics). NULL: none. */
	void (*on_answered)(void *ud, const char *route, int status);
	void *answered_ud;
	/* Errors of requests under a prefix in the shape their clients read
	 * (the compatibility layers'): the first row whose prefix starts the
	 * path renders the body from sbx's own {"error":{...}} (borrowed) and
	 * the status. None matching: sbx's shape. */
	const struct sup_http_error_shape *error_shapes;
	size_t nerror_shapes;
	size_t max_body;          /* default body bound of a row */
	/* The most cost a producer charging a reply (sup_http_charge) may
	 * still bring once it is given none back: the window of the agent's
	 * stream that feeds it (bytes already on their way in sockets and
	 * buffers). Cost goes back only while the backlog plus this fit in
	 * SUP_HTTP_HWM, so the window is part of a connection's budget, not
	 * on top of it. 0: cost goes back while the backlog is under it. */
	size_t credit_window;
	unsigned max_conns;       /* connections held at once */
	/* Requests one caller (an authenticated `who`) may have in flight at
	 * once, streams and WebSockets included; past it 429 quota_exceeded.
	 * 0: no bound but max_conns. */
	unsigned max_per_who;
	unsigned head_timeout_s;  /* from a head's first byte to its end */
	unsigned body_timeout_s;  /* a buffered body whole, a streamed one per byte */
	unsigned idle_timeout_s;  /* keep-alive between requests; a stalled writer */
	const sup_http_mount *mounts;
	size_t nmounts;
} sup_http_cfg;

sup_http *sup_http_new(struct event_base *base, const sup_http_cfg *cfg, sbx_err *err);
uint16_t sup_http_port(const sup_http *h);
/* Graceful stop: close the listener and idle connections at once, let the
 * requests in flight run up to drain_s, then call done (requests still
 * running then are left to the caller's shutdown, which fails them). */
void sup_http_stop(sup_http *h, unsigned drain_s, void (*done)(void *ud), void *ud);
/* Close every connection (their requests are released) and free h. */
void sup_http_free(sup_http *h);

/* Route matching (for tests): the row of method/path or NULL, with -ENOENT
 * (no pattern matches) or -EPERM (the path matches for other methods,
 * listed in allow). */
const sup_http_route *sup_http_match(const sup_http *h, const char *method, const char *path,
				     const sup_http_mount **mount, char *allow, size_t allow_size,
				     int *why);

/* ---- for acts ---- */

/* Whether r came over TLS (an URL made for its client says https://). */
bool sup_http_tls(const sup_http_req *r);
/* What r's client proved with a certificate (TLS with a --tls-ca): 1 one
 * the CA signed, 0 none (or in clear, or no CA), -1 one it did not; why
 * says it in words. */
int sup_http_tls_peer(const sup_http_req *r, char *why, size_t cap);

struct event_base *sup_http_base(const sup_http_req *r);
/* The family's ctx (as mounted). */
void *sup_http_ctx(const sup_http_req *r);
const sup_http_in *sup_http_input(const sup_http_req *r);
/* Words after the sandbox id in the log line (" pid 42"). */
void sup_http_log_tag(sup_http_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A note before the status in the log line ("client went away after 3 bytes"). */
void sup_http_note(sup_http_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* How every JSON body is dumped: compact, reals with 12 significant digits
 * ("cpus":0.1, "cpu_seconds":1.234567, not jansson's 0.10000000000000001). */
#define SUP_HTTP_JSON_DUMP (JSON_COMPACT | JSON_REAL_PRECISION(12))
/* The JSON reply (reference taken; NULL: no body) that ends the request. */
void sup_http_json(sup_http_req *r, int status, json_t *body);
/* An error reply {"error":{"code","message"[,"path"]}} for err, its status
 * from the table (sup_http_status). */
void sup_http_fail(sup_http_req *r, const sbx_err *err);
/* Status and code of a negative errno for a family (NULL: the shared
 * table): one table, a family's overrides in front. */
int sup_http_status(const char *family, int neg_errno, const char **code);
/* {"error":{"code","message"}}; message bytes are made valid UTF-8. */
json_t *sup_http_error_json(const char *code, const char *message);
/* Raw bytes p[0..n) at key as text, plus key_b64 when they are not UTF-8. */
int sup_http_set_bytes(json_t *o, const char *key, const char *p, size_t n);

/* A response header for the reply still to start ("Name", "value"). */
void sup_http_header(sup_http_req *r, const char *name, const char *value);
#define SUP_HTTP_CHUNKED UINT64_MAX
/* A status without a body (204, 304): no Content-Length written. */
#define SUP_HTTP_NO_BODY (UINT64_MAX - 1)
/* The head of a reply whose body follows (length, SUP_HTTP_CHUNKED or
 * SUP_HTTP_NO_BODY). */
void sup_http_start(sup_http_req *r, int status, uint64_t length);
/* Body bytes (moved from data); chunk framing added as needed. */
void sup_http_write(sup_http_req *r, struct evbuffer *data);
/* Bytes waiting for the client. */
size_t sup_http_backlog(const sup_http_req *r);
/* cb(ud) whenever the connection's output has drained. */
void sup_http_on_drained(sup_http_req *r, void (*cb)(void *ud), void *ud);
/* Hold cost until the client has read what was written, then give it
 * back through cb (at once when it has): while the backlog plus the
 * producer's window (sup_http_cfg.credit_window) fit in SUP_HTTP_HWM, or
 * once the backlog is empty when they never do. What a connection holds
 * of a producer's bytes, those on their way to it included, stays within
 * SUP_HTTP_HWM (or the window, if that is larger). */
#define SUP_HTTP_HWM (1u << 20)
void sup_http_charge(sup_http_req *r, size_t cost);
void sup_http_on_credit(sup_http_req *r, void (*cb)(size_t cost, void *ud), void *ud);
/* End the reply (the last chunk); the request is over. */
void sup_http_end(sup_http_req *r);
/* End it by closing the connection, so the client sees a body cut short. */
void sup_http_cut(sup_http_req *r, const char *why);

/* ---- a streamed body (SUP_BODY_STREAMED) ---- */

/* Take the body: "100 Continue" goes out if the client waits for it, and
 * on_ready(ud) runs (from the loop) whenever bytes or the end may be there. */
void sup_http_body_start(sup_http_req *r, void (*on_ready)(void *ud), void *ud);
/* > 0: that many body bytes (<= max) at the front of *buf, for the caller
 * to move out and report with _took; 0 the body is complete; -EAGAIN wait
 * for on_ready; -EINVAL bad chunked framing; -ENODATA the client's end
 * came first; -ENOLINK it sent nothing for body_timeout_s (408). */
int sup_http_body(sup_http_req *r, size_t max, struct evbuffer **buf, sbx_err *err);
void sup_http_body_took(sup_http_req *r, size_t n);

/* ---- connection upgrade (SUP_BODY_UPGRADE) ---- */

/* "101 Switching Protocols" with Upgrade: proto and headers (pairs, NULL
 * ended); from here bytes are raw both ways: on_read(ud) when input came
 * (sup_http_raw_input), sup_http_write/backlog/on_drained/charge for
 * output, sup_http_end to close. The client's end releases the request. */
void sup_http_upgrade(sup_http_req *r, const char *proto, const char *const *headers,
		      void (*on_read)(void *ud), void *ud);
struct evbuffer *sup_http_raw_input(sup_http_req *r);
/* Stop (true) or resume reading the client: inbound backpressure. */
void sup_http_raw_pause(sup_http_req *r, bool paused);
/* For byte pipes whose far side has half-close (a TCP tunnel): the
 * client's end of input (its shutdown of writing) no longer closes the
 * connection; on_read runs, sup_http_raw_ended says so once the input
 * left is read, and the answer goes on until sup_http_end. Call right
 * after sup_http_upgrade. A client that is gone for good is still seen
 * when a write to it fails. */
void sup_http_raw_half_close(sup_http_req *r);
bool sup_http_raw_ended(sup_http_req *r);

/* ---- held (a relay's check of a peer) ---- */

/* r waits between its head and its checks (nothing is read; the client's
 * end is still seen): cancel(ud) runs if r ends meanwhile (the client
 * gone, the server stopped), and must forget r. */
void sup_http_hold(sup_http_req *r, void (*cancel)(void *ud), void *ud);
/* The wait is over (loop thread): rc 0 goes on with the tenant's token,
 * the route and its body as for any request; rc < 0 is answered as
 * sup_http_status says, with err's message. */
void sup_http_resume(sup_http_req *r, int rc, const sbx_err *err);

/* ---- takeover (a relay) ---- */

/* The connection becomes the act's, as after an upgrade but with no head
 * written: the reply is the bytes it writes (sup_http_write, verbatim),
 * the client's bytes after the request head are sup_http_raw_input's
 * (reading paused until sup_http_raw_pause(r, false)), half-close as
 * sup_http_raw_half_close says, and the connection closes after the
 * reply (sup_http_end; sup_http_takeover_end keeps it for the next
 * request). Until sup_http_raw_status the act may still answer with
 * sup_http_json/_fail (its own error, before any byte of the reply). */
void sup_http_takeover(sup_http_req *r, void (*on_read)(void *ud), void *ud);
/* The reply written from here on carries status (the log's). */
void sup_http_raw_status(sup_http_req *r, int status);
/* The act read exactly this request's bytes (its head's framing) and wrote
 * a whole answer: the request ends and the connection goes on to the next
 * one, unless the client asked to close it (sup_http_end closes it). */
void sup_http_takeover_end(sup_http_req *r);

#endif
