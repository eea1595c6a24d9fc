/* Where the agent listens: "--listen" address parsing, socket set-up and the
 * accept loop.
 *
 *   unix:<path>   a unix stream socket; the parent folder is created when
 *                 missing, a stale socket is replaced, the socket is 0600
 *                 (the supervisor connects as root through a bind mount).
 *   vsock:<port>  AF_VSOCK on VMADDR_CID_ANY (the microVM backend).
 *
 * Parsing and socket creation are separate steps so each can be tested on its
 * own (there is no vsock loopback on a plain host). This module owns the
 * listening sockets only; accepted sockets go to the owner's callback and are
 * never read here. */
#ifndef AGENT_LISTEN_H
#define AGENT_LISTEN_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "sbx/err.h"

struct event_base;

typedef enum agent_listen_kind {
	AGENT_LISTEN_UNIX = 1,
	AGENT_LISTEN_VSOCK,
} agent_listen_kind;

typedef struct agent_listen_addr {
	agent_listen_kind kind;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* unix */
	uint32_t port;                                          /* vsock */
} agent_listen_addr;

/* Parse "unix:<path>" or "vsock:<port>". -EINVAL with a message naming the
 * bad part otherwise. */
int agent_listen_parse(const char *spec, agent_listen_addr *out, sbx_err *err);

/* Render an address back as a --listen spec (for logs). */
const char *agent_listen_format(const agent_listen_addr *a, char *buf, size_t len);

/* Fill the socket address for a (AF_UNIX path or AF_VSOCK any-cid:port). */
int agent_listen_sockaddr(const agent_listen_addr *a, struct sockaddr_storage *ss,
			  socklen_t *len, sbx_err *err);

/* A bound, listening, non-blocking, close-on-exec socket for a. */
int agent_listen_socket(const agent_listen_addr *a, sbx_err *err);

/* The accept loop on the event base. on_accept gets each connected socket
 * (non-blocking, close-on-exec) and owns it. */
typedef struct agent_listener agent_listener;
typedef void (*agent_listen_accept_fn)(int fd, void *ud);

int agent_listener_new(struct event_base *base, const agent_listen_addr *a,
		       agent_listen_accept_fn on_accept, void *ud,
		       agent_listener **out, sbx_err *err);
/* Stop accepting, close the socket and remove a unix socket's path. */
void agent_listener_free(agent_listener *l);

#endif
