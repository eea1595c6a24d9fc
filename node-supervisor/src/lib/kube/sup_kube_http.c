/* sup_kube_http: requests and watches against the API server over one
 * libcurl easy handle (sup_kube_http.h). */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_kube_http.h"
#include "sup_kube_retry.h" /* SUP_KUBE_PATH_MAX */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;
/* curl_global_init is not safe to race; the first client does it. */
static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

struct sup_kube_http {
	CURL *curl;
	sup_kube_cfg tok; /* token and token_file only: ours to read again */
	const atomic_bool *stop;
	unsigned timeout_ms;
	char server[SUP_KUBE_SERVER_MAX];
	char errbuf[CURL_ERROR_SIZE];
};

/* What one transfer collects. */
typedef struct xfer {
	char *buf;
	size_t len, cap, max;
	bool too_big;
	/* watch */
	sup_kube_watch_fn fn;
	void *ud;
	int fn_rc;
	long status;
	CURL *curl;
} xfer;

static int set_blob(CURL *c, CURLoption opt, const sup_kube_blob *b)
{
	struct curl_blob blob = { .data = b->p, .len = b->len, .flags = CURL_BLOB_COPY };
	return curl_easy_setopt(c, opt, &blob) == CURLE_OK ? 0 : -1;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	sup_kube_http *h = ud;
	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	return h->stop && atomic_load(h->stop) ? 1 : 0;
}

sup_kube_http *sup_kube_http_new(const sup_kube_cfg *cfg, const atomic_bool *stop,
				 unsigned timeout_ms, sbx_err *err)
{
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK) {
		sbx_err_set(err, -EIO, "curl_global_init: %s", curl_easy_strerror(global_rc));
		return NULL;
	}
	sup_kube_http *h = calloc(1, sizeof(*h));
	if (!h) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	h->stop = stop;
	h->timeout_ms = timeout_ms ? timeout_ms : 10000;
	memcpy(h->server, cfg->server, sizeof(h->server));
	memcpy(h->tok.token_file, cfg->token_file, sizeof(h->tok.token_file));
	if (cfg->token.p) {
		h->tok.token.p = strdup(cfg->token.p);
		h->tok.token.len = cfg->token.len;
	}
	h->curl = curl_easy_init();
	if (!h->curl || (cfg->token.p && !h->tok.token.p)) {
		sbx_err_set(err, -ENOMEM, "curl_easy_init");
		sup_kube_http_free(h);
		return NULL;
	}
	CURL *c = h->curl;
	int bad = 0;
	bad |= curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->errbuf) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 3000L) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 15L) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 5L) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https,http") != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress) != CURLE_OK;
	bad |= curl_easy_setopt(c, CURLOPT_XFERINFODATA, h) != CURLE_OK;
	if (cfg->ca.p)
		bad |= set_blob(c, CURLOPT_CAINFO_BLOB, &cfg->ca);
	if (cfg->cert.p) {
		bad |= set_blob(c, CURLOPT_SSLCERT_BLOB, &cfg->cert);
		bad |= set_blob(c, CURLOPT_SSLKEY_BLOB, &cfg->key);
		bad |= curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM") != CURLE_OK;
	}
	if (cfg->insecure) {
		bad |= curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L) != CURLE_OK;
		bad |= curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L) != CURLE_OK;
	}
	/* the paths we pass are below the server's URL */
	if (bad) {
		sbx_err_set(err, -EIO, "curl options refused (libcurl too old?)");
		sup_kube_http_free(h);
		return NULL;
	}
	return h;
}

void sup_kube_http_free(sup_kube_http *h)
{
	if (!h)
		return;
	if (h->curl)
		curl_easy_cleanup(h->curl);
	sup_kube_cfg_release(&h->tok);
	free(h);
}

void sup_kube_resp_release(sup_kube_resp *r)
{
	json_decref(r->body);
	r->body = NULL;
}

static bool append(xfer *x, const char *p, size_t n)
{
	if (x->len + n + 1 > x->max) {
		x->too_big = true;
		return false;
	}
	if (x->len + n + 1 > x->cap) {
		size_t cap = x->cap ? x->cap : 4096;
		while (cap < x->len + n + 1)
			cap *= 2;
		if (cap > x->max)
			cap = x->max;
		char *b = realloc(x->buf, cap);
		if (!b)
			return false;
		x->buf = b;
		x->cap = cap;
	}
	memcpy(x->buf + x->len, p, n);
	x->len += n;
	x->buf[x->len] = '\0';
	return true;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	xfer *x = ud;
	return append(x, p, size * n) ? size * n : 0;
}

/* Every whole line of the watch stream is one event. */
static size_t on_watch(char *p, size_t size, size_t n, void *ud)
{
	xfer *x = ud;
	size_t len = size * n;
	if (!x->status)
		curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &x->status);
	if (!append(x, p, len))
		return 0;
	if (x->status != 200)
		return len; /* the error's Status object, read whole after */
	char *start = x->buf, *nl;
	while ((nl = memchr(start, '\n', (size_t)(x->buf + x->len - start))) != NULL) {
		size_t ll = (size_t)(nl - start);
		if (ll) {
			json_t *ev = json_loadb(start, ll, 0, NULL);
			const char *type = json_string_value(json_object_get(ev, "type"));
			json_t *obj = json_object_get(ev, "object");
			int rc = type && json_is_object(obj) ? x->fn(x->ud, type, obj) : -EPROTO;
			json_decref(ev);
			if (rc) {
				x->fn_rc = rc;
				return 0;
			}
		}
		start = nl + 1;
	}
	size_t rest = (size_t)(x->buf + x->len - start);
	memmove(x->buf, start, rest);
	x->len = rest;
	if (x->buf)
		x->buf[x->len] = '\0';
	return len;
}

static int curl_failed(sup_kube_http *h, CURLcode cc, sbx_err *err)
{
	int code = -EIO;
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
		code = -ECONNREFUSED;
		break;
	case CURLE_OPERATION_TIMEDOUT:
		code = -ETIMEDOUT;
		break;
	case CURLE_ABORTED_BY_CALLBACK:
		code = -ECANCELED;
		break;
	case CURLE_COULDNT_RESOLVE_HOST:
		code = -EHOSTUNREACH;
		break;
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_CERTPROBLEM:
		code = -EPROTO;
		break;
	default:
		break;
	}
	return sbx_err_set(err, code, "%s", h->errbuf[0] ? h->errbuf : curl_easy_strerror(cc));
}

/* One transfer with the headers of this request; 0 when an answer came. */
static int perform(sup_kube_http *h, const char *method, const char *path, const char *body,
		   bool watch, unsigned timeout_ms, xfer *x, sbx_err *err)
{
	CURL *c = h->curl;
	char url[SUP_KUBE_SERVER_MAX + SUP_KUBE_PATH_MAX];
	if (snprintf(url, sizeof(url), "%s%s", h->server, path) >= (int)sizeof(url))
		return sbx_err_set(err, -ENAMETOOLONG, "URL too long");
	struct curl_slist *hd = NULL, *t;
	char auth[64 + 8192];
	bool ok = true;
	if (h->tok.token.p) {
		if (h->tok.token.len > 8192)
			return sbx_err_set(err, -EINVAL, "bearer token too long");
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", h->tok.token.p);
		ok = ok && (t = curl_slist_append(hd, auth)) != NULL && (hd = t);
	}
	ok = ok && (t = curl_slist_append(hd, "Accept: application/json")) != NULL && (hd = t);
	if (body) {
		const char *ct = strcmp(method, "PATCH") == 0 ? "Content-Type: application/merge-patch+json"
							     : "Content-Type: application/json";
		ok = ok && (t = curl_slist_append(hd, ct)) != NULL && (hd = t);
	}
	explicit_bzero(auth, sizeof(auth));
	if (!ok) {
		curl_slist_free_all(hd);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	h->errbuf[0] = '\0';
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	}
	curl_easy_setopt(c, CURLOPT_NOBODY, strcmp(method, "HEAD") == 0 ? 1L : 0L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, watch ? on_watch : on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	x->curl = c;
	x->status = 0;
	CURLcode cc = curl_easy_setopt(c, CURLOPT_URL, url);
	if (cc == CURLE_OK)
		cc = curl_easy_perform(c);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(hd);
	if (cc != CURLE_OK) {
		if (x->too_big)
			return sbx_err_set(err, -EFBIG, "answer over %zu bytes", x->max);
		if (x->fn_rc)
			return x->fn_rc;
		return curl_failed(h, cc, err);
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &x->status);
	return 0;
}

int sup_kube_http_do(sup_kube_http *h, const char *method, const char *path, const char *body,
		     sup_kube_resp *r, sbx_err *err)
{
	memset(r, 0, sizeof(*r));
	for (int attempt = 0;; attempt++) {
		xfer x = { .max = SUP_KUBE_BODY_MAX };
		int rc = perform(h, method, path, body, false, h->timeout_ms, &x, err);
		if (rc < 0) {
			free(x.buf);
			return rc;
		}
		r->status = x.status;
		r->body = x.len ? json_loadb(x.buf, x.len, 0, NULL) : NULL;
		free(x.buf);
		/* a rotated token: read the file again, once */
		if (r->status == 401 && attempt == 0 && h->tok.token_file[0]) {
			sbx_err e;
			if (sup_kube_cfg_reload_token(&h->tok, &e) == 0) {
				sup_kube_resp_release(r);
				continue;
			}
		}
		return 0;
	}
}

void sup_kube_resp_why(const sup_kube_resp *r, char *buf, size_t cap)
{
	const char *reason = json_string_value(json_object_get(r->body, "reason"));
	const char *msg = json_string_value(json_object_get(r->body, "message"));
	snprintf(buf, cap, "HTTP %ld%s%s%s%.300s", r->status, reason ? " " : "", reason ? reason : "",
		 msg ? ": " : "", msg ? msg : "");
}

int sup_kube_http_watch(sup_kube_http *h, const char *path, unsigned timeout_s,
			sup_kube_watch_fn fn, void *ud, long *status, sbx_err *err)
{
	xfer x = { .max = SUP_KUBE_LINE_MAX, .fn = fn, .ud = ud };
	*status = 0;
	int rc = perform(h, "GET", path, NULL, true, timeout_s * 1000u, &x, err);
	*status = x.status;
	if (rc == 0 && x.status != 200) {
		sup_kube_resp r = { .status = x.status,
				    .body = x.len ? json_loadb(x.buf, x.len, 0, NULL) : NULL };
		char why[400];
		sup_kube_resp_why(&r, why, sizeof(why));
		sup_kube_resp_release(&r);
		rc = sbx_err_set(err, -EPROTO, "watch: %s", why);
	} else if (rc == -EPROTO && x.fn_rc == -EPROTO) {
		rc = sbx_err_set(err, -EPROTO, "watch: a line that is not an event");
	}
	free(x.buf);
	return rc;
}
