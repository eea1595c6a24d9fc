/* The node's TLS contexts (sup_tls): certificates made here by the openssl
 * command (a CA, a node signed by it, one by an intermediate with its
 * chain, one by another CA, a key of another certificate, a file that is
 * no PEM), loaded, refused with the file and the reason named, reloaded
 * (the old context stays while an SSL made from it lives), and real
 * handshakes between them over BIO pairs: what the server makes of a
 * client's certificate (sup_tls_peer_of) and what a client (the relay)
 * says of a server the CA did not sign (sup_tls_dial_error). */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "sup_tls.h"

static char dir[64];

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	char full[2200];
	snprintf(full, sizeof(full), "cd %s && (%s) >/dev/null 2>&1", dir, cmd);
	if (system(full) != 0) {
		fprintf(stderr, "failed: %s\n", cmd);
		abort();
	}
}

static const char *at(const char *name)
{
	static char paths[8][128];
	static int next;
	char *p = paths[next++ % 8];
	snprintf(p, 128, "%s/%s", dir, name);
	return p;
}

/* A key and a certificate NAME signed by SIGNER (a CA's files), ext the
 * extensions' section. */
static void issue(const char *name, const char *signer, const char *ext)
{
	sh("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s.key -out "
	   "%s.csr -subj /CN=%s && openssl x509 -req -in %s.csr -CA %s.crt -CAkey %s.key "
	   "-CAcreateserial -days 30 -out %s.crt -extfile ext.cnf -extensions %s",
	   name, name, name, name, signer, signer, name, ext);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/sbx-tls-XXXXXX");
	assert_non_null(mkdtemp(dir));
	FILE *f = fopen(at("ext.cnf"), "w");
	assert_non_null(f);
	fputs("[node]\nbasicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
	      "extendedKeyUsage=serverAuth,clientAuth\n"
	      "[inter]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=keyCertSign,cRLSign\n",
	      f);
	fclose(f);
	for (int i = 0; i < 2; i++)
		sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "
		   "%s.key -out %s.crt -days 30 -subj /CN=%s", i ? "other" : "ca", i ? "other" : "ca",
		   i ? "other-ca" : "cluster-ca");
	issue("node", "ca", "node");
	issue("peer", "ca", "node");
	issue("stranger", "other", "node");
	issue("inter", "ca", "inter");
	issue("leaf", "inter", "node");
	sh("cat leaf.crt inter.crt > chain.crt && echo not a certificate > junk.pem");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static sup_tls *load(const char *cert, const char *key, const char *ca, sbx_err *e)
{
	sbx_err_clear(e);
	return sup_tls_new(&(sup_tls_files){ cert ? at(cert) : NULL, key ? at(key) : NULL,
					     ca ? at(ca) : NULL },
			   e);
}

/* ---- a handshake over a BIO pair ---- */

typedef struct pair {
	SSL *client, *server;
	int client_rc, server_rc;
} pair;

static void handshake(pair *p, SSL_CTX *client_ctx, SSL_CTX *server_ctx)
{
	BIO *cb = NULL, *sb = NULL;
	p->client = SSL_new(client_ctx);
	p->server = SSL_new(server_ctx);
	assert_non_null(p->client);
	assert_non_null(p->server);
	assert_int_equal(BIO_new_bio_pair(&cb, 0, &sb, 0), 1);
	SSL_set_bio(p->client, cb, cb);
	SSL_set_bio(p->server, sb, sb);
	SSL_set_connect_state(p->client);
	SSL_set_accept_state(p->server);
	p->client_rc = p->server_rc = 0;
	for (int i = 0; i < 20 && (p->client_rc != 1 || p->server_rc != 1); i++) {
		if (p->client_rc != 1)
			p->client_rc = SSL_do_handshake(p->client);
		if (p->server_rc != 1)
			p->server_rc = SSL_do_handshake(p->server);
		if ((p->client_rc <= 0 &&
		     SSL_get_error(p->client, p->client_rc) != SSL_ERROR_WANT_READ) ||
		    (p->server_rc <= 0 &&
		     SSL_get_error(p->server, p->server_rc) != SSL_ERROR_WANT_READ))
			break;
	}
	/* TLS 1.3: the server reads the client's certificate with its Finished */
	if (p->client_rc == 1 && p->server_rc != 1)
		p->server_rc = SSL_do_handshake(p->server);
}

static void pair_free(pair *p)
{
	SSL_free(p->client);
	SSL_free(p->server);
	ERR_clear_error();
}

/* A bare client: trusts ca (NULL: nothing), presents cert/key (NULL: none). */
static SSL_CTX *client_ctx(const char *ca, const char *cert)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	assert_non_null(ctx);
	if (ca) {
		assert_int_equal(SSL_CTX_load_verify_locations(ctx, at(ca), NULL), 1);
		SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	}
	if (cert) {
		char crt[64], key[64];
		snprintf(crt, sizeof(crt), "%s.crt", cert);
		snprintf(key, sizeof(key), "%s.key", cert);
		assert_int_equal(SSL_CTX_use_certificate_chain_file(ctx, at(crt)), 1);
		assert_int_equal(SSL_CTX_use_PrivateKey_file(ctx, at(key), SSL_FILETYPE_PEM), 1);
	}
	return ctx;
}

/* ---- tests ---- */

static void test_load(void **state)
{
	(void)state;
	sbx_err e;
	sup_tls *t = load("node.crt", "node.key", "ca.crt", &e);
	assert_non_null(t);
	assert_non_null(sup_tls_server_ctx(t));
	assert_non_null(sup_tls_client_ctx(t));
	assert_non_null(strstr(sup_tls_describe(t), "CN=node"));
	assert_non_null(strstr(sup_tls_describe(t), "expires"));
	sup_tls_free(t);
	/* alone: no CA, no peer can be verified */
	t = load("node.crt", "node.key", NULL, &e);
	assert_non_null(t);
	assert_null(sup_tls_client_ctx(t));
	sup_tls_free(t);
	/* a chain: the leaf, then its intermediate */
	t = load("chain.crt", "leaf.key", "ca.crt", &e);
	assert_non_null(t);
	assert_non_null(strstr(sup_tls_describe(t), "CN=leaf"));
	sup_tls_free(t);
}

static void test_bad_files(void **state)
{
	(void)state;
	sbx_err e;
	struct {
		const char *cert, *key, *ca;
		int code;
		const char *says;
	} bad[] = {
		{ "nowhere.crt", "node.key", NULL, -ENOENT, "--tls-cert" },
		{ "node.crt", "nowhere.key", NULL, -ENOENT, "--tls-key" },
		{ "node.crt", "node.key", "nowhere.crt", -ENOENT, "--tls-ca" },
		{ "junk.pem", "node.key", NULL, -EINVAL, "not a PEM certificate" },
		{ "node.crt", "junk.pem", NULL, -EINVAL, "not a PEM private key" },
		{ "node.crt", "peer.key", NULL, -EINVAL, "is not the key of --tls-cert" },
		{ "node.crt", "node.key", "junk.pem", -EINVAL, "--tls-ca" },
		{ "node.crt", NULL, NULL, -EINVAL, "both" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sup_tls *t = load(bad[i].cert, bad[i].key, bad[i].ca, &e);
		assert_null(t);
		assert_int_equal(e.code, bad[i].code);
		if (!strstr(e.msg, bad[i].says))
			fail_msg("case %zu: %s", i, e.msg);
	}
	/* the file named in the message */
	assert_null(load("junk.pem", "node.key", NULL, &e));
	assert_non_null(strstr(e.msg, "junk.pem"));
	assert_int_equal(ERR_peek_error(), 0); /* OpenSSL's queue left empty */
}

static void test_reload(void **state)
{
	(void)state;
	sbx_err e;
	sh("cp node.crt live.crt && cp node.key live.key");
	sup_tls *t = load("live.crt", "live.key", "ca.crt", &e);
	assert_non_null(t);
	SSL_CTX *before = sup_tls_server_ctx(t);
	/* a connection made before the reload */
	SSL_CTX *cli = client_ctx("ca.crt", NULL);
	pair old;
	handshake(&old, cli, before);
	assert_int_equal(old.client_rc, 1);
	/* broken files: refused, the old context in force */
	sh("cp junk.pem live.crt");
	assert_int_equal(sup_tls_reload(t, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "live.crt"));
	assert_ptr_equal(sup_tls_server_ctx(t), before);
	assert_non_null(strstr(sup_tls_describe(t), "CN=node"));
	/* new ones: new contexts, the connection before still works */
	sh("cp peer.crt live.crt && cp peer.key live.key");
	assert_int_equal(sup_tls_reload(t, &e), 0);
	assert_ptr_not_equal(sup_tls_server_ctx(t), before);
	assert_non_null(strstr(sup_tls_describe(t), "CN=peer"));
	char buf[8];
	assert_int_equal(SSL_write(old.client, "ping", 4), 4);
	assert_int_equal(SSL_read(old.server, buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "ping", 4);
	/* and a new connection sees the new certificate */
	pair fresh;
	handshake(&fresh, cli, sup_tls_server_ctx(t));
	assert_int_equal(fresh.client_rc, 1);
	X509 *seen = SSL_get1_peer_certificate(fresh.client);
	char cn[64];
	X509_NAME_get_text_by_NID(X509_get_subject_name(seen), NID_commonName, cn, sizeof(cn));
	assert_string_equal(cn, "peer");
	X509_free(seen);
	pair_free(&fresh);
	sup_tls_free(t); /* the old connection holds its context still */
	assert_int_equal(SSL_write(old.server, "pong", 4), 4);
	assert_int_equal(SSL_read(old.client, buf, sizeof(buf)), 4);
	pair_free(&old);
	SSL_CTX_free(cli);
}

/* What the server makes of its client's certificate. */
static void test_client_verdict(void **state)
{
	(void)state;
	sbx_err e;
	char why[200];
	sup_tls *t = load("node.crt", "node.key", "ca.crt", &e);
	assert_non_null(t);
	struct {
		const char *cert;
		sup_tls_peer want;
		const char *says;
	} cases[] = {
		{ "peer", SUP_TLS_PEER_OK, "verifies" },
		{ NULL, SUP_TLS_PEER_NONE, "no certificate" },
		{ "stranger", SUP_TLS_PEER_BAD, "does not verify against the cluster CA" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		SSL_CTX *cli = client_ctx("ca.crt", cases[i].cert);
		pair p;
		handshake(&p, cli, sup_tls_server_ctx(t));
		/* judged, never refused in the handshake */
		assert_int_equal(p.client_rc, 1);
		assert_int_equal(p.server_rc, 1);
		assert_int_equal(sup_tls_peer_of(p.server, why, sizeof(why)), cases[i].want);
		if (!strstr(why, cases[i].says))
			fail_msg("case %zu: %s", i, why);
		pair_free(&p);
		SSL_CTX_free(cli);
	}
	/* without a CA no certificate is asked for or judged */
	sup_tls *alone = load("node.crt", "node.key", NULL, &e);
	SSL_CTX *cli = client_ctx("ca.crt", "peer");
	pair p;
	handshake(&p, cli, sup_tls_server_ctx(alone));
	assert_int_equal(p.server_rc, 1);
	assert_int_equal(sup_tls_peer_of(p.server, why, sizeof(why)), SUP_TLS_PEER_NONE);
	pair_free(&p);
	SSL_CTX_free(cli);
	sup_tls_free(alone);
	sup_tls_free(t);
}

/* The relay's side: a peer with a certificate the CA signed is reached
 * (by chain, whatever its name), one the CA did not sign is not, and the
 * reason says so. */
static void test_peer_verified(void **state)
{
	(void)state;
	sbx_err e;
	char why[200];
	sup_tls *self = load("node.crt", "node.key", "ca.crt", &e);
	sup_tls *good = load("chain.crt", "leaf.key", "ca.crt", &e);
	sup_tls *bad = load("stranger.crt", "stranger.key", "ca.crt", &e);
	assert_non_null(self);
	assert_non_null(good);
	assert_non_null(bad);
	pair p;
	handshake(&p, sup_tls_client_ctx(self), sup_tls_server_ctx(good));
	assert_int_equal(p.client_rc, 1);
	assert_int_equal(p.server_rc, 1);
	/* both ways: the server judges the relaying node's certificate */
	assert_int_equal(sup_tls_peer_of(p.server, why, sizeof(why)), SUP_TLS_PEER_OK);
	const unsigned char *proto = NULL;
	unsigned len = 0;
	SSL_get0_alpn_selected(p.client, &proto, &len);
	assert_int_equal(len, 8);
	assert_memory_equal(proto, "http/1.1", 8);
	pair_free(&p);
	handshake(&p, sup_tls_client_ctx(self), sup_tls_server_ctx(bad));
	assert_int_not_equal(p.client_rc, 1);
	sup_tls_dial_error(p.client, ERR_peek_error(), why, sizeof(why));
	if (!strstr(why, "does not verify against the cluster CA"))
		fail_msg("%s", why);
	pair_free(&p);
	/* TLS 1.2 at least */
	SSL_CTX *old = client_ctx("ca.crt", NULL);
	SSL_CTX_set_max_proto_version(old, TLS1_1_VERSION);
	handshake(&p, old, sup_tls_server_ctx(self));
	assert_int_not_equal(p.client_rc, 1);
	pair_free(&p);
	SSL_CTX_free(old);
	sup_tls_free(self);
	sup_tls_free(good);
	sup_tls_free(bad);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_load),
		cmocka_unit_test(test_bad_files),
		cmocka_unit_test(test_reload),
		cmocka_unit_test(test_client_verdict),
		cmocka_unit_test(test_peer_verified),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
