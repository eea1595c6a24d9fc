/* The port API: /v1/sandboxes/{id}/ports (what listens inside) and
 * /v1/sandboxes/{id}/ports/{port}/... (an HTTP reverse proxy to that port
 * on the sandbox's loopback, WebSocket upgrades passed through, and a raw
 * TCP tunnel at .../tcp with Upgrade: tcp). Every byte goes through the
 * agent's port.open stream, so a sandbox with no network is reached too,
 * and both directions keep to its credit: a stalled server inside holds no
 * more of our memory than one window, a slow client stalls the stream.
 * It must not touch sandboxes or agents except through the core
 * (sup_core_call), and trusts nothing the server inside sends: its
 * response head is parsed with the edge's strict parser and bounded.
 * Loop thread only. */
#ifndef SUP_PORTS_H
#define SUP_PORTS_H

#include "sup_core.h"
#include "sup_http.h"

struct sup_urlsign;

typedef struct sup_ports_ctx {
	sup_core *core;
	const char *domain;       /* --ports-domain, or NULL */
	unsigned answer_ms;       /* the server's answer head is due (0: no deadline) */
	const struct sup_urlsign *sign; /* signs and checks URLs (sup_urlsign.h) */
} sup_ports_ctx;

extern const sup_http_family sup_ports_family;

/* Fill pc; sign is the supervisor's one signer, held by the caller. */
void sup_ports_init(sup_ports_ctx *pc, sup_core *core, const char *domain,
		    const struct sup_urlsign *sign);
/* The edge's gate (sup_http_cfg.gate, ud pc): routing by Host and signed
 * URLs, see sup_ports_gate.c. */
int sup_ports_gate(void *ud, const sup_http_in *in, char **path, const struct sup_tenant **who,
		   sbx_err *err);

#endif
