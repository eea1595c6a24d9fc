/* The node's TLS (--tls-cert, --tls-key, --tls-ca): the OpenSSL contexts
 * made from those files, for the listeners (a server context: the node's
 * certificate chain and key, TLS 1.2 and 1.3, HTTP/1.1 by ALPN, and with a
 * CA a client certificate asked for and judged, never required) and for
 * the relay's connections to peers (a client context: the peer's
 * certificate must chain to the CA; the node's own is presented). Reloaded
 * as a whole (SIGHUP): new contexts for new connections, while every
 * connection keeps the context it was made with (an SSL holds a reference
 * to its SSL_CTX) until it ends; files that do not load leave the old
 * contexts in force. It owns the contexts and the verdict on a peer's
 * certificate; it must not do I/O on a connection, nor know HTTP. */
#ifndef SUP_TLS_H
#define SUP_TLS_H

#include <openssl/ssl.h>
#include <stddef.h>

#include "sbx/err.h"

typedef struct sup_tls sup_tls;

typedef struct sup_tls_files {
	const char *cert; /* PEM: the node's certificate, then its chain */
	const char *key;  /* PEM: its private key */
	const char *ca;   /* PEM: the cluster's CA (peers, client certificates); NULL: none */
} sup_tls_files;

/* Load the files (paths copied): NULL with err naming the file and the
 * reason. */
sup_tls *sup_tls_new(const sup_tls_files *files, sbx_err *err);
/* Load the same files again: 0 and the new contexts in force, or < 0 with
 * err and the old ones still in force. */
int sup_tls_reload(sup_tls *t, sbx_err *err);
/* Drops this module's references: connections keep theirs. */
void sup_tls_free(sup_tls *t);

/* The contexts in force (borrowed: SSL_new takes its own reference).
 * The client one is NULL without a CA: no peer can be verified. */
SSL_CTX *sup_tls_server_ctx(const sup_tls *t);
SSL_CTX *sup_tls_client_ctx(const sup_tls *t);
/* "CN=node-a, expires 2027-01-01 00:00:00 GMT": the certificate in force. */
const char *sup_tls_describe(const sup_tls *t);

/* What a connection's peer proved (a server's client, after its
 * handshake): none (no certificate, or no CA to judge one by), a
 * certificate the CA signed, or one it did not (why says why). */
typedef enum sup_tls_peer {
	SUP_TLS_PEER_NONE = 0,
	SUP_TLS_PEER_OK,
	SUP_TLS_PEER_BAD,
} sup_tls_peer;
sup_tls_peer sup_tls_peer_of(const SSL *ssl, char *why, size_t cap);

/* Why a handshake as a client failed (for the relay's 502): the peer's
 * certificate not verifying against the CA, else OpenSSL's reason (ossl:
 * the first error of the connection's queue, 0: none). */
void sup_tls_dial_error(const SSL *ssl, unsigned long ossl, char *why, size_t cap);

#endif
