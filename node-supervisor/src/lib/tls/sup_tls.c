/* sup_tls: the node's TLS contexts from its files (sup_tls.h). */
#include "sup_tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sup_log.h"

struct sup_tls {
	char *cert, *key, *ca;
	SSL_CTX *server;
	SSL_CTX *client;
	char desc[320];
};

/* ALPN's wire form: HTTP/1.1 is all the edge speaks. */
static const unsigned char h11[] = "\x08http/1.1";

/* OpenSSL's reason for what just failed ("PEM routines::no start line"),
 * the queue emptied. */
static const char *ossl_reason(char *buf, size_t cap)
{
	unsigned long e, first = 0;
	while ((e = ERR_get_error()))
		if (!first)
			first = e;
	if (!first)
		snprintf(buf, cap, "no reason given");
	else
		ERR_error_string_n(first, buf, cap);
	return buf;
}

/* A file OpenSSL is about to read: its own errno first (clearer). */
static int readable(const char *flag, const char *path, sbx_err *err)
{
	if (access(path, R_OK) < 0)
		return sbx_err_sys(err, -errno, "%s %s", flag, path);
	return 0;
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	unsigned char *o = NULL;
	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto(&o, outlen, h11, sizeof(h11) - 1, in, inlen) !=
	    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = o;
	return SSL_TLSEXT_ERR_OK;
}

/* A client's certificate is asked for and judged, never required: an
 * ordinary client has none, and the relay says why it refuses a peer
 * (sup_tls_peer_of) instead of the handshake failing without a word. */
static int keep_verdict(int ok, X509_STORE_CTX *x)
{
	(void)ok;
	(void)x;
	return 1;
}

/* Both roles: TLS 1.2 at least, no renegotiation; a peer's end of TCP
 * without close_notify is its end, as in clear (HTTP's framing says
 * whether an answer was whole; a client may half-close). */
static SSL_CTX *ctx_new(const SSL_METHOD *m, const sup_tls_files *f, sbx_err *err)
{
	char why[256];
	SSL_CTX *ctx = SSL_CTX_new(m);
	if (!ctx) {
		sbx_err_set(err, -ENOMEM, "TLS context: %s", ossl_reason(why, sizeof(why)));
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION |
					 SSL_OP_CIPHER_SERVER_PREFERENCE);
	if (SSL_CTX_use_certificate_chain_file(ctx, f->cert) != 1) {
		sbx_err_set(err, -EINVAL, "--tls-cert %s: not a PEM certificate chain (%s)", f->cert,
			    ossl_reason(why, sizeof(why)));
		goto fail;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, f->key, SSL_FILETYPE_PEM) != 1) {
		if (ERR_GET_REASON(ERR_peek_error()) == X509_R_KEY_VALUES_MISMATCH)
			sbx_err_set(err, -EINVAL, "--tls-key %s is not the key of --tls-cert %s (%s)",
				    f->key, f->cert, ossl_reason(why, sizeof(why)));
		else
			sbx_err_set(err, -EINVAL, "--tls-key %s: not a PEM private key (%s)", f->key,
				    ossl_reason(why, sizeof(why)));
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		sbx_err_set(err, -EINVAL, "--tls-key %s is not the key of --tls-cert %s (%s)", f->key,
			    f->cert, ossl_reason(why, sizeof(why)));
		goto fail;
	}
	if (f->ca && SSL_CTX_load_verify_locations(ctx, f->ca, NULL) != 1) {
		sbx_err_set(err, -EINVAL, "--tls-ca %s: no PEM certificate in it (%s)", f->ca,
			    ossl_reason(why, sizeof(why)));
		goto fail;
	}
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

static SSL_CTX *server_new(const sup_tls_files *f, sbx_err *err)
{
	static const unsigned char sid[] = "sbx";
	SSL_CTX *ctx = ctx_new(TLS_server_method(), f, err);
	if (!ctx)
		return NULL;
	SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
	/* a resumed session keeps its client's verdict */
	SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
	if (f->ca) {
		char why[256];
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(f->ca);
		if (!names) {
			sbx_err_set(err, -EINVAL, "--tls-ca %s: no CA name in it (%s)", f->ca,
				    ossl_reason(why, sizeof(why)));
			SSL_CTX_free(ctx);
			return NULL;
		}
		SSL_CTX_set_client_CA_list(ctx, names);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, keep_verdict);
	}
	return ctx;
}

/* The relay's: a peer proves itself with a certificate the CA signed
 * (its chain, not its name: a node's URL is an address the directory
 * gives, and the cluster's CA signs nothing but its nodes), and this node
 * presents its own. */
static SSL_CTX *client_new(const sup_tls_files *f, sbx_err *err)
{
	SSL_CTX *ctx = ctx_new(TLS_client_method(), f, err);
	if (!ctx)
		return NULL;
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (SSL_CTX_set_alpn_protos(ctx, h11, sizeof(h11) - 1) != 0) {
		SSL_CTX_free(ctx);
		sbx_err_set(err, -ENOMEM, "TLS context: ALPN");
		return NULL;
	}
	return ctx;
}

/* The certificate in force, in a line; warnings for what will fail. */
static void describe(SSL_CTX *srv, const sup_tls_files *f, char *out, size_t cap)
{
	X509 *leaf = SSL_CTX_get0_certificate(srv);
	char subject[160] = "?", until[64] = "?";
	if (!leaf) {
		snprintf(out, cap, "no certificate");
		return;
	}
	X509_NAME_oneline(X509_get_subject_name(leaf), subject, sizeof(subject));
	BIO *b = BIO_new(BIO_s_mem());
	if (b && ASN1_TIME_print(b, X509_get0_notAfter(leaf)) == 1) {
		int n = BIO_read(b, until, (int)sizeof(until) - 1);
		until[n > 0 ? n : 0] = '\0';
	}
	BIO_free(b);
	snprintf(out, cap, "%s, expires %s", subject, until);
	if (X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0)
		sup_warn("tls: --tls-cert %s expired (%s): clients refuse it", f->cert, until);
	else if (X509_cmp_current_time(X509_get0_notBefore(leaf)) > 0)
		sup_warn("tls: --tls-cert %s is not valid yet: clients refuse it", f->cert);
	if (!f->ca)
		return;
	/* Peers judge this node by the same CA: say so now if they will
	 * refuse it (it may still serve clients that trust another CA). */
	X509_STORE_CTX *x = X509_STORE_CTX_new();
	STACK_OF(X509) *chain = NULL;
	SSL_CTX_get0_chain_certs(srv, &chain);
	if (x && X509_STORE_CTX_init(x, SSL_CTX_get_cert_store(srv), leaf, chain) == 1 &&
	    X509_verify_cert(x) != 1)
		sup_warn("tls: --tls-cert %s does not verify against --tls-ca %s (%s): peers "
			 "refuse this node", f->cert, f->ca,
			 X509_verify_cert_error_string(X509_STORE_CTX_get_error(x)));
	X509_STORE_CTX_free(x);
	ERR_clear_error();
}

static int build(const sup_tls *t, SSL_CTX **srv, SSL_CTX **cli, char *desc, size_t cap,
		 sbx_err *err)
{
	const sup_tls_files f = { t->cert, t->key, t->ca };
	*srv = *cli = NULL;
	if (readable("--tls-cert", f.cert, err) < 0 || readable("--tls-key", f.key, err) < 0 ||
	    (f.ca && readable("--tls-ca", f.ca, err) < 0))
		return err->code;
	*srv = server_new(&f, err);
	if (!*srv)
		return err->code;
	if (f.ca && !(*cli = client_new(&f, err))) {
		SSL_CTX_free(*srv);
		*srv = NULL;
		return err->code;
	}
	describe(*srv, &f, desc, cap);
	return 0;
}

sup_tls *sup_tls_new(const sup_tls_files *files, sbx_err *err)
{
	if (!files->cert || !files->key) {
		sbx_err_set(err, -EINVAL, "TLS needs both --tls-cert and --tls-key");
		return NULL;
	}
	sup_tls *t = calloc(1, sizeof(*t));
	if (!t || !(t->cert = strdup(files->cert)) || !(t->key = strdup(files->key)) ||
	    (files->ca && !(t->ca = strdup(files->ca)))) {
		sbx_err_set(err, -ENOMEM, "tls");
		sup_tls_free(t);
		return NULL;
	}
	if (build(t, &t->server, &t->client, t->desc, sizeof(t->desc), err) < 0) {
		sup_tls_free(t);
		return NULL;
	}
	return t;
}

int sup_tls_reload(sup_tls *t, sbx_err *err)
{
	SSL_CTX *srv, *cli;
	char desc[sizeof(t->desc)];
	if (build(t, &srv, &cli, desc, sizeof(desc), err) < 0)
		return err->code;
	SSL_CTX_free(t->server);
	SSL_CTX_free(t->client);
	t->server = srv;
	t->client = cli;
	memcpy(t->desc, desc, sizeof(desc));
	return 0;
}

void sup_tls_free(sup_tls *t)
{
	if (!t)
		return;
	SSL_CTX_free(t->server);
	SSL_CTX_free(t->client);
	free(t->cert);
	free(t->key);
	free(t->ca);
	free(t);
}

SSL_CTX *sup_tls_server_ctx(const sup_tls *t)
{
	return t->server;
}

SSL_CTX *sup_tls_client_ctx(const sup_tls *t)
{
	return t->client;
}

const char *sup_tls_describe(const sup_tls *t)
{
	return t->desc;
}

sup_tls_peer sup_tls_peer_of(const SSL *ssl, char *why, size_t cap)
{
	if (!ssl || !(SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER)) {
		snprintf(why, cap, "this node has no --tls-ca to judge a certificate by");
		return SUP_TLS_PEER_NONE;
	}
	if (!SSL_get0_peer_certificate(ssl)) {
		snprintf(why, cap, "it presented no certificate");
		return SUP_TLS_PEER_NONE;
	}
	long v = SSL_get_verify_result(ssl);
	if (v != X509_V_OK) {
		snprintf(why, cap, "its certificate does not verify against the cluster CA (%s)",
			 X509_verify_cert_error_string(v));
		return SUP_TLS_PEER_BAD;
	}
	snprintf(why, cap, "its certificate verifies against the cluster CA");
	return SUP_TLS_PEER_OK;
}

void sup_tls_dial_error(const SSL *ssl, unsigned long ossl, char *why, size_t cap)
{
	long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
	if (v != X509_V_OK) {
		snprintf(why, cap, "TLS: its certificate does not verify against the cluster CA (%s)",
			 X509_verify_cert_error_string(v));
		return;
	}
	char r[200];
	if (ossl)
		ERR_error_string_n(ossl, r, sizeof(r));
	snprintf(why, cap, "TLS handshake failed (%s)", ossl ? r : "the connection ended");
}
