/* Internal to sup_ports*.c: one request's state (sup_ports.c parses and
 * lists, sup_ports_proxy.c moves the bytes, sup_ports_head.c rewrites the
 * heads both ways). Not for other modules. */
#ifndef SUP_PORTS_INT_H
#define SUP_PORTS_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "sup_httpin_parse.h"
#include "sup_ports.h"
#include "sup_urlsign.h"

struct evbuffer;
struct event;

typedef enum sup_pp_mode {
	SUP_PP_HTTP = 0, /* a request forwarded, its answer parsed back */
	SUP_PP_TUNNEL,   /* Upgrade: tcp: raw bytes once the port answered */
	SUP_PP_URL,      /* GET .../url: a signed URL for the port */
	SUP_PP_BROWSER,  /* GET .../browser: /json/version of SUP_PORTS_CDP, answered as ours */
} sup_pp_mode;

/* The DevTools port: Chromium's --remote-debugging-port as sbx/browser
 * runs it (images/browser/sbx-browser; OpenSandbox's Chrome sandboxes use
 * it too). Requests to it carry Host 127.0.0.1:9222 (Chromium refuses
 * another than an IP or localhost; the client's goes in X-Forwarded-Host)
 * and its discovery answers are rewritten (sup_ports_cdp.c). */
#define SUP_PORTS_CDP 9222
#define SUP_PORTS_CDP_HOST "127.0.0.1:9222"
/* Most bytes of a discovery answer rewritten (a larger one is 502). */
#define SUP_PORTS_CDP_JSON_MAX (1024u * 1024)

/* How a client reached a port: its Host, the path the port's own paths
 * follow ("" by Host, /v1/sandboxes/{id}/ports/{port}, a signed path
 * form's), over TLS or not. */
typedef struct sup_ports_where {
	const char *host;
	const char *prefix;
	bool tls;
} sup_ports_where;

/* Whether a path below the port is a discovery one (/json, /json/...). */
bool sup_ports_cdp_discovery(const char *rest);
/* A discovery answer body[0..len) (an object, or an array of them) with
 * each webSocketDebuggerUrl on base ("ws://HOST" + prefix; its path kept,
 * query appended when not NULL) and devtoolsFrontendUrl's ws= the same;
 * NULL: not JSON of that shape. */
json_t *sup_ports_cdp_rewrite(const char *body, size_t len, const char *base, const char *query);
/* GET .../browser's answer from /json/version's body: the endpoint by w,
 * and by signed_prefix (the path form, good until exp). NULL: an answer
 * without webSocketDebuggerUrl. */
json_t *sup_ports_browser_answer(const char *version, size_t len, const sup_ports_where *w,
				 const char *signed_prefix, uint64_t exp);

/* Where a request carries a signature (sup_urlsign.h), besides the path. */
#define SUP_PORTS_Q_EXP "sbx_exp"
#define SUP_PORTS_Q_SIG "sbx_sig"
#define SUP_PORTS_COOKIE "sbx_port"
/* A signed URL's default life (10 min). */
#define SUP_PORTS_URL_DEFAULT_S 600
/* Host "{port}-{id}.{domain}[:N]": its id and port. */
bool sup_ports_host(const sup_ports_ctx *pc, const char *host, char id[48], uint16_t *port);
/* Whether query carries a proof (its first sbx_exp and sbx_sig, as the
 * gate reads them) that checks for id and port now; *exp its expiry. The
 * cookie is kept from this alone: the gate may have vouched by another
 * proof (the path form's, a cookie), and a query may name sbx_exp twice. */
bool sup_ports_query_proof(const sup_ports_ctx *pc, const char *query, const char *id,
			   uint16_t port, uint64_t *exp);

typedef enum sup_pp_resp {
	SUP_PP_HEAD = 0, /* looking for the answer's head */
	SUP_PP_LENGTH,   /* Content-Length bytes */
	SUP_PP_CHUNKED,  /* chunked, decoded and chunked again towards the client */
	SUP_PP_CLOSE,    /* until the server closes */
	SUP_PP_RAW,      /* after a 101, or a tunnel: bytes both ways */
	SUP_PP_DONE,
} sup_pp_resp;

typedef struct sup_pp {
	sup_ports_ctx *ctx;
	sup_http_req *r;
	const char *id;
	uint16_t port;
	sup_pp_mode mode;
	const char *target;  /* the path below the port, with its query (malloc'd) */
	sup_op *op;
	struct event *answer_due; /* the answer's head (or a tunnel's connect) is due */
	/* towards the server: the head, the body (chunked again if the
	 * client's was), raw bytes; at most SUP_PP_UP_MAX wait here */
	struct evbuffer *up;
	bool in_chunked, in_body, in_done, upgrade;
	bool up_eof;            /* a tunnel's client shut its writing: passed on */
	bool by_host;           /* routed by Host (--ports-domain) */
	bool set_cookie;        /* the query carried a good proof: keep it as a cookie */
	uint64_t expires;       /* SUP_PP_URL, _BROWSER: seconds; a cookie's: its time */
	bool cdp;               /* the DevTools port: Host rewritten */
	bool cdp_json;          /* ... a discovery path: its answer rewritten */
	bool collect;           /* the answer's body is gathered in json, then rewritten */
	char *prefix;           /* the path the client reached the port by (malloc'd) */
	struct evbuffer *json;  /* collect: the body so far */
	/* from the server */
	sup_pp_resp resp;
	struct evbuffer *down;  /* the answer's head while it comes */
	sup_httpin_headscan scan;
	sup_httpin_chunked dec;
	uint64_t left;          /* SUP_PP_LENGTH: bytes still due */
	bool head_only;         /* HEAD, 204, 304: no body follows */
	struct evbuffer *chunk; /* bytes on their way to the client */
	uint64_t got;           /* body bytes passed on */
} sup_pp;

#define SUP_PP_UP_MAX (256u * 1024)

/* The request head for the server: method, target, the client's headers
 * less hop-by-hop ones (RFC 9110 7.6.1: Connection and what it names,
 * Keep-Alive, TE, Trailer, Transfer-Encoding, Upgrade, Proxy-*), less
 * Authorization and OPEN-SANDBOX-API-KEY (the supervisor's token never
 * goes inside, in either header the edge reads it from) and Expect (the
 * edge answers it); then the body's framing and Connection: close (one
 * request per stream), or the upgrade asked for. Host is the client's,
 * or host_as when not NULL. -ENOMEM. */
int sup_pp_request_head(const sup_http_in *in, const char *target, bool upgrade,
			const char *host_as, struct evbuffer *out);
/* Whether a response header goes on to the client: not hop-by-hop, not
 * one the edge writes itself (Date, Content-Length), not named by the
 * answer's Connection header. */
bool sup_pp_pass_response_header(const sup_httpin_head *h, const sup_httpin_hdr *hd);

int sup_ports_act_proxy(sup_http_req *r, void *state, sbx_err *err);

#endif
