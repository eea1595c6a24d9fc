/* sup_agent_dial: an agent's address and the connect below the protocol.
 * Owns the three transports and nothing above the connected socket:
 *   unix:PATH (or a bare PATH)  a unix stream socket (runc, runsc sandboxes)
 *   vsock:CID:PORT              AF_VSOCK to a VM's guest (Kata)
 *   hvsock:PATH:PORT            the hybrid vsock of Firecracker and Cloud
 *                               Hypervisor: a unix socket to the VMM, then
 *                               "CONNECT <PORT>\n" answered "OK <n>\n"
 * The result is a connected non-blocking stream socket whose next byte is
 * the agent's; sup_agent speaks the protocol on it as on any other. It must
 * not know the protocol, calls or pools. No deadline of its own: the caller
 * cancels a dial its own deadline ended (sup_agent's handshake deadline
 * covers dial and hello together). Loop thread only. */
#ifndef SUP_AGENT_DIAL_H
#define SUP_AGENT_DIAL_H

#include <stdint.h>
#include <sys/un.h>

#include "sbx/err.h"

struct event_base;

typedef enum sup_agent_transport {
	SUP_AGENT_UNIX,
	SUP_AGENT_VSOCK,
	SUP_AGENT_HVSOCK,
} sup_agent_transport;

typedef struct sup_agent_addr {
	sup_agent_transport kind;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* UNIX, HVSOCK */
	uint32_t cid;                                            /* VSOCK */
	uint32_t port;                                           /* VSOCK, HVSOCK */
} sup_agent_addr;

/* Strict: a CID of 1 (local) or from 3, a port from 1, both decimal and
 * below 2^32 - 1 (the kernel's "any"); -EINVAL naming what is wrong. */
int sup_agent_addr_parse(const char *s, sup_agent_addr *out, sbx_err *err);

/* Done: fd >= 0 connected (the callee owns it), or fd < 0 and err says why
 * (-ECONNREFUSED: the VMM found no listener on the port; -EPROTO: its
 * answer was not "OK <n>\n"). Called once, from the loop, never after
 * sup_agent_dial_cancel. */
typedef void (*sup_agent_dial_cb)(int fd, const sbx_err *err, void *ud);
typedef struct sup_agent_dial sup_agent_dial;

/* Returns 0 with *fd connected now (unix: a connect completes at once or
 * fails), 1 with *out under way (vsock's connect in progress, hybrid's
 * exchange), or a negative errno (socket, connect; the caller names the
 * address). A later failure's message names it itself. */
int sup_agent_dial_start(struct event_base *base, const sup_agent_addr *addr,
			 sup_agent_dial_cb cb, void *ud, int *fd, sup_agent_dial **out,
			 sbx_err *err);
/* The address a dial under way connects to, for messages. */
const char *sup_agent_dial_name(const sup_agent_dial *d);
/* Stops a dial under way and closes its socket; cb is not called. */
void sup_agent_dial_cancel(sup_agent_dial *d);

#endif
