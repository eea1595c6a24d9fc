/* sup_s3_req: one S3 request over the store's curl handle, signed by
 * libcurl (CURLOPT_AWS_SIGV4), retried with backoff where the step allows,
 * its failures told with S3's own error code (sup_s3_int.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sup_s3_int.h"
#include "sup_s3_xml.h"

/* One attempt's state, seen by curl's callbacks. */
typedef struct attempt {
	sup_s3_req *r;
	size_t body_off;
	long status;            /* the last status line's (a 100 is replaced) */
	sup_s3_xml *ex;         /* a non-2xx answer's <Error> */
	size_t err_bytes;
	char code[64];          /* <Error><Code> */
	char msg[200];          /* <Error><Message> */
	int sink_rc;            /* the sink refused: not retried */
	sbx_err sink_err;
	bool got_body;          /* the sink saw bytes (no resume: not retried) */
	bool resumed;           /* a Range request: only a 206 may go on */
} attempt;

static int on_error_el(void *ud, const char *path, const char *text, size_t len)
{
	attempt *a = ud;
	if (strcmp(path, "Error/Code") == 0)
		snprintf(a->code, sizeof(a->code), "%.*s", (int)len, text);
	else if (strcmp(path, "Error/Message") == 0)
		snprintf(a->msg, sizeof(a->msg), "%.*s", (int)len, text);
	return 0;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	attempt *a = ud;
	size_t len = size * n;
	if (len > 5 && strncmp(p, "HTTP/", 5) == 0) {
		const char *sp = memchr(p, ' ', len);
		a->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		a->r->etag[0] = '\0';
		a->r->length = 0;
		return len;
	}
	const char *colon = memchr(p, ':', len);
	if (!colon)
		return len;
	size_t name = (size_t)(colon - p);
	const char *v = colon + 1;
	const char *end = p + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	size_t vlen = (size_t)(end - v);
	if (name == 4 && strncasecmp(p, "ETag", 4) == 0 && vlen < sizeof(a->r->etag)) {
		memcpy(a->r->etag, v, vlen);
		a->r->etag[vlen] = '\0';
	} else if (name == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
		char num[24];
		if (vlen < sizeof(num)) {
			memcpy(num, v, vlen);
			num[vlen] = '\0';
			a->r->length = strtoull(num, NULL, 10);
		}
	}
	return len;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
	attempt *a = ud;
	size_t len = size * n;
	if (a->status >= 200 && a->status < 300) {
		if (!a->r->sink)
			return len;
		if (a->resumed && a->status != 206) {
			a->sink_rc = -EPROTO;
			sbx_err_set(&a->sink_err, -EPROTO, "store ignored the Range of a resumed GET (HTTP %ld)",
				    a->status);
			return 0;
		}
		a->got_body = true;
		int rc = a->r->sink(a->r->sink_ud, p, len, &a->sink_err);
		if (rc < 0) {
			a->sink_rc = rc;
			return 0; /* CURLE_WRITE_ERROR: the transfer stops */
		}
		return len;
	}
	/* An error body: read its <Code> and <Message>, up to a bound; one
	 * that is not S3's XML (a proxy's HTML) only loses its code. */
	if (a->ex && a->err_bytes < SUP_S3_ERRBODY_MAX) {
		size_t take = len < SUP_S3_ERRBODY_MAX - a->err_bytes ? len : SUP_S3_ERRBODY_MAX - a->err_bytes;
		a->err_bytes += take;
		if (sup_s3_xml_feed(a->ex, p, take, false, NULL) < 0) {
			sup_s3_xml_free(a->ex);
			a->ex = NULL;
		}
	}
	return len;
}

static size_t on_read(char *buf, size_t size, size_t n, void *ud)
{
	attempt *a = ud;
	size_t left = a->r->body_len - a->body_off;
	size_t take = size * n < left ? size * n : left;
	memcpy(buf, a->r->body + a->body_off, take);
	a->body_off += take;
	return take;
}

static int on_seek(void *ud, curl_off_t off, int origin)
{
	attempt *a = ud;
	if (origin != SEEK_SET || off < 0 || (uint64_t)off > a->r->body_len)
		return CURL_SEEKFUNC_FAIL;
	a->body_off = (size_t)off;
	return CURL_SEEKFUNC_OK;
}

static int status_errno(long status)
{
	switch (status) {
	case 404:
		return -ENOENT;
	case 403:
		return -EACCES;
	case 400:
		return -EINVAL;
	case 409:
		return -EEXIST;
	case 501: /* NotImplemented: a call this store does not offer */
		return -EOPNOTSUPP;
	default:
		return -EIO;
	}
}

static int curl_errno(CURLcode c)
{
	switch (c) {
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
		return -ECONNREFUSED;
	default:
		return -EIO;
	}
}

/* Cut connections and a store that is busy or failing are worth another
 * try; a refusal (4xx) is not. */
static bool retryable(CURLcode c, long status)
{
	switch (c) {
	case CURLE_OK: /* 501: a call the store does not offer, now or later */
		return (status >= 500 && status != 501) || status == 429;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
		return true;
	default:
		return false;
	}
}

bool sup_s3_hdr_add(struct curl_slist **list, const char *line)
{
	struct curl_slist *t = curl_slist_append(*list, line);
	if (!t)
		return false;
	*list = t;
	return true;
}

static int build_url(sup_s3 *s, const sup_s3_req *r, char *url, size_t cap, sbx_err *err)
{
	char whole[SUP_S3_KEY_MAX + 1];
	char enc[3 * SUP_S3_KEY_MAX + 1];
	int n = snprintf(whole, sizeof(whole), "%s%s", r->key ? s->prefix : "", r->key ? r->key : "");
	if (n < 0 || (size_t)n >= sizeof(whole))
		return sbx_err_set(err, -ENAMETOOLONG, "%s %s: key too long", r->what, r->key);
	if (sup_s3_uri_encode(enc, sizeof(enc), whole, true) < 0)
		return sbx_err_set(err, -ENAMETOOLONG, "%s %s: key too long", r->what, r->key);
	n = snprintf(url, cap, "%s/%s%s%s", s->base, enc, r->query ? "?" : "", r->query ? r->query : "");
	if (n < 0 || (size_t)n >= cap)
		return sbx_err_set(err, -ENAMETOOLONG, "%s %s: URL too long", r->what, r->key);
	return 0;
}

static int once(sup_s3 *s, sup_s3_req *r, const char *url, attempt *a, CURLcode *cc, sbx_err *err)
{
	CURL *c = s->curl;
	char errbuf[CURL_ERROR_SIZE] = "";
	char range[64];
	struct curl_slist *hdrs = NULL;
	int rc = 0;

	curl_easy_reset(c);
	bool ok = true;
	for (const struct curl_slist *h = s->hdrs; h && ok; h = h->next)
		ok = sup_s3_hdr_add(&hdrs, h->data);
	if (ok && r->resume_at && *r->resume_at > 0) {
		snprintf(range, sizeof(range), "Range: bytes=%" PRIu64 "-", *r->resume_at);
		a->resumed = true;
		ok = sup_s3_hdr_add(&hdrs, range);
	}
	if (ok && r->body && strcmp(r->method, "POST") == 0)
		ok = sup_s3_hdr_add(&hdrs, "Content-Type: application/xml");
	if (!ok) {
		rc = sbx_err_set(err, -ENOMEM, "%s: headers", r->what);
		goto out;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L); /* a key's "." and ".." are names */
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);   /* worker threads */
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)s->o.connect_timeout_ms);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)s->o.low_speed_s);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4);
	curl_easy_setopt(c, CURLOPT_USERNAME, s->key_id);
	curl_easy_setopt(c, CURLOPT_PASSWORD, s->secret);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, a);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
	if (strcmp(r->method, "HEAD") == 0) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (strcmp(r->method, "PUT") == 0) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, a);
		curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, on_seek);
		curl_easy_setopt(c, CURLOPT_SEEKDATA, a);
	} else if (strcmp(r->method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body ? r->body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
	} else if (strcmp(r->method, "GET") != 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
	}

	*cc = curl_easy_perform(c);
	long code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	r->status = code;
	const char *key = r->key ? r->key : "";
	const char *sp = r->key ? " " : "";
	if (a->sink_rc < 0) {
		rc = sbx_err_set(err, a->sink_rc, "%s%s%s: %s", r->what, sp, key, a->sink_err.msg);
	} else if (*cc != CURLE_OK) {
		rc = sbx_err_set(err, curl_errno(*cc), "%s%s%s: %s%s%s", r->what, sp, key,
				 curl_easy_strerror(*cc), errbuf[0] ? ": " : "", errbuf);
	} else if (code < 200 || code >= 300) {
		if (a->ex)
			sup_s3_xml_feed(a->ex, "", 0, true, NULL);
		rc = sbx_err_set(err, status_errno(code), "%s%s%s: HTTP %ld %s%s%s", r->what, sp, key, code,
				 a->code[0] ? a->code : "(no S3 error body)", a->msg[0] ? ": " : "", a->msg);
	}
out:
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(hdrs);
	return rc;
}

int sup_s3_req_run(sup_s3 *s, sup_s3_req *r, sbx_err *err)
{
	char url[SUP_S3_URL_MAX];
	int rc = build_url(s, r, url, sizeof(url), err);
	if (rc < 0)
		return rc;
	for (unsigned i = 0;; i++) {
		attempt a = {.r = r};
		CURLcode cc = CURLE_OK;
		rc = sup_s3_xml_new(on_error_el, &a, &a.ex, err);
		if (rc < 0)
			return rc;
		rc = once(s, r, url, &a, &cc, err);
		sup_s3_xml_free(a.ex);
		if (rc == 0)
			return 0;
		bool again = r->idempotent && a.sink_rc == 0 && retryable(cc, r->status) &&
			     (!a.got_body || r->resume_at);
		if (!again || i >= s->o.retries) {
			if (i > 0)
				sbx_err_wrap(err, "after %u attempts", i + 1);
			return rc;
		}
		/* 250 ms, doubling, at most 4 s between attempts. */
		unsigned ms = 250u << (i < 4 ? i : 4);
		struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
}
