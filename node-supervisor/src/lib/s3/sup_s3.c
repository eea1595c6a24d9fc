/* sup_s3: the store's settings, and the object calls that are one request
 * each (head, delete, get) or a page at a time (list). Puts are in
 * sup_s3_put.c, the request itself in sup_s3_req.c. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_s3_int.h"
#include "sup_s3_xml.h"

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

/* curl_global_init is not safe to race; the first open does it. */
static void global_init(void) { global_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

int sup_s3_uri_encode(char *out, size_t cap, const char *in, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
		bool plain = isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~' ||
			     (keep_slash && *p == '/');
		if (o + (plain ? 1 : 3) >= cap)
			return -ENAMETOOLONG;
		if (plain) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	if (o >= cap)
		return -ENAMETOOLONG;
	out[o] = '\0';
	return 0;
}

static bool has_ctl(const char *p)
{
	for (; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return true;
	return false;
}

/* S3's rules: 3..63 of [a-z0-9.-], a letter or digit at both ends. */
static bool bucket_ok(const char *b, size_t n)
{
	if (n < 3 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)b[i]) || isdigit((unsigned char)b[i]) || b[i] == '.' || b[i] == '-'))
			return false;
	return isalnum((unsigned char)b[0]) && isalnum((unsigned char)b[n - 1]);
}

int sup_s3_parse_url(const char *url, char *bucket, size_t bcap, char *prefix, size_t pcap,
		     sbx_err *err)
{
	if (!url || strncmp(url, "s3://", 5) != 0)
		return sbx_err_set(err, -EINVAL, "store %s: not s3://bucket[/prefix]", url ? url : "(none)");
	const char *b = url + 5;
	size_t bn = strcspn(b, "/");
	if (!bucket_ok(b, bn) || bn >= bcap)
		return sbx_err_set(err, -EINVAL, "store %s: bucket name must be 3-63 of a-z, 0-9, '.', '-'", url);
	memcpy(bucket, b, bn);
	bucket[bn] = '\0';
	const char *p = b + bn;
	while (*p == '/')
		p++;
	size_t pn = strlen(p);
	while (pn > 0 && p[pn - 1] == '/')
		pn--;
	if (has_ctl(p))
		return sbx_err_set(err, -EINVAL, "store %s: control character in the prefix", url);
	if (pn + 2 > pcap || pn + 2 > SUP_S3_KEY_MAX / 2)
		return sbx_err_set(err, -ENAMETOOLONG, "store %s: prefix too long", url);
	memcpy(prefix, p, pn);
	if (pn)
		prefix[pn++] = '/';
	prefix[pn] = '\0';
	return 0;
}

int sup_s3_check_key(const sup_s3 *s, const char *key, sbx_err *err)
{
	if (!key || !key[0])
		return sbx_err_set(err, -EINVAL, "empty object key");
	if (has_ctl(key))
		return sbx_err_set(err, -EINVAL, "object key has a control character");
	if (strlen(s->prefix) + strlen(key) > SUP_S3_KEY_MAX)
		return sbx_err_set(err, -ENAMETOOLONG, "object key %.64s...: longer than %d bytes with the prefix",
				   key, SUP_S3_KEY_MAX);
	return 0;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && v[0] ? v : NULL;
}

static int set_endpoint(sup_s3 *s, const char *ep, sbx_err *err)
{
	int n;
	if (ep) {
		if ((strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0) || has_ctl(ep) ||
		    strchr(ep, '?') || strchr(ep, '#'))
			return sbx_err_set(err, -EINVAL, "S3 endpoint %s: not an http:// or https:// URL", ep);
		size_t len = strlen(ep);
		while (len > 0 && ep[len - 1] == '/')
			len--;
		n = snprintf(s->base, sizeof(s->base), "%.*s/%s", (int)len, ep, s->bucket);
	} else if (strchr(s->bucket, '.')) {
		/* A dotted name would not match the wildcard certificate. */
		n = snprintf(s->base, sizeof(s->base), "https://s3.%s.amazonaws.com/%s", s->region, s->bucket);
	} else {
		n = snprintf(s->base, sizeof(s->base), "https://%s.s3.%s.amazonaws.com", s->bucket, s->region);
	}
	if (n < 0 || (size_t)n >= sizeof(s->base))
		return sbx_err_set(err, -ENAMETOOLONG, "S3 endpoint too long");
	return 0;
}

static int add_hdr(sup_s3 *s, const char *name, const char *v, sbx_err *err)
{
	SBX_AUTO_FREE char *line = NULL;
	if (asprintf(&line, "%s: %s", name, v) < 0 || !sup_s3_hdr_add(&s->hdrs, line))
		return sbx_err_set(err, -ENOMEM, "S3 headers");
	return 0;
}

static int setup(sup_s3 *s, const char *url, const sup_s3_opts *opts, sbx_err *err)
{
	int rc = sup_s3_parse_url(url, s->bucket, sizeof(s->bucket), s->prefix, sizeof(s->prefix), err);
	if (rc < 0)
		return rc;
	if (opts)
		s->o = *opts;
	if (!s->o.part_size)
		s->o.part_size = SUP_S3_PART_DEFAULT;
	if (s->o.part_size < SUP_S3_PART_MIN || s->o.part_size > SUP_S3_PART_MAX)
		return sbx_err_set(err, -EINVAL, "S3 part size %" PRIu64 ": not within %llu..%llu bytes",
				   s->o.part_size, SUP_S3_PART_MIN, SUP_S3_PART_MAX);
	if (!s->o.connect_timeout_ms)
		s->o.connect_timeout_ms = 5000;
	if (!s->o.low_speed_s)
		s->o.low_speed_s = 15;
	if (!s->o.retries)
		s->o.retries = 3;
	if (!s->o.list_page || s->o.list_page > 1000)
		s->o.list_page = 1000;

	const char *region = s->o.region ? s->o.region : env("AWS_REGION");
	if (!region)
		region = env("AWS_DEFAULT_REGION");
	if (!region)
		region = "us-east-1";
	size_t rn = strlen(region);
	if (rn == 0 || rn >= 32 || strspn(region, "abcdefghijklmnopqrstuvwxyz0123456789-") != rn)
		return sbx_err_set(err, -EINVAL, "S3 region %s: not a region name", region);
	snprintf(s->region, sizeof(s->region), "%s", region);
	snprintf(s->sigv4, sizeof(s->sigv4), "aws:amz:%s:s3", s->region);

	const char *ep = s->o.endpoint ? s->o.endpoint : env("AWS_ENDPOINT_URL_S3");
	if (!ep)
		ep = env("AWS_ENDPOINT_URL");
	rc = set_endpoint(s, ep, err);
	if (rc < 0)
		return rc;
	s->o.endpoint = NULL; /* the caller's string is not ours to keep */
	s->o.region = NULL;

	const char *id = env("AWS_ACCESS_KEY_ID"), *secret = env("AWS_SECRET_ACCESS_KEY");
	const char *token = env("AWS_SESSION_TOKEN");
	if (!id || !secret)
		return sbx_err_set(err, -EINVAL, "S3 store %s: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set", url);
	if (has_ctl(id) || has_ctl(secret) || (token && has_ctl(token)))
		return sbx_err_set(err, -EINVAL, "S3 credentials: control character");
	s->key_id = strdup(id);
	s->secret = strdup(secret);
	s->token = token ? strdup(token) : NULL;
	if (!s->key_id || !s->secret || (token && !s->token))
		return sbx_err_set(err, -ENOMEM, "S3 credentials");
	/* The payload is not hashed into the signature: a part is streamed
	 * once (hashing it first would read it twice); TLS guards it on the
	 * way. libcurl signs the header's value as the payload hash. */
	rc = add_hdr(s, "x-amz-content-sha256", "UNSIGNED-PAYLOAD", err);
	if (rc == 0 && s->token)
		rc = add_hdr(s, "x-amz-security-token", s->token, err);
	if (rc < 0)
		return rc;

	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK)
		return sbx_err_set(err, -EIO, "curl_global_init: %s", curl_easy_strerror(global_rc));
	s->curl = curl_easy_init();
	if (!s->curl)
		return sbx_err_set(err, -ENOMEM, "curl_easy_init");
	return 0;
}

int sup_s3_open(const char *url, const sup_s3_opts *opts, sup_s3 **out, sbx_err *err)
{
	sup_s3 *s = calloc(1, sizeof(*s));
	if (!s)
		return sbx_err_set(err, -ENOMEM, "S3 store");
	int rc = setup(s, url, opts, err);
	if (rc < 0) {
		sup_s3_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void sup_s3_close(sup_s3 *s)
{
	if (!s)
		return;
	if (s->curl)
		curl_easy_cleanup(s->curl);
	curl_slist_free_all(s->hdrs);
	free(s->key_id);
	if (s->secret) {
		explicit_bzero(s->secret, strlen(s->secret));
		free(s->secret);
	}
	free(s->token);
	free(s);
}

int sup_s3_check(sup_s3 *s, sbx_err *err)
{
	/* A listing of one key under the prefix, not a HEAD of the bucket: a
	 * HEAD's refusal has no body, so no S3 code to tell a missing bucket
	 * (NoSuchBucket) from a wrong secret (SignatureDoesNotMatch) or a
	 * policy (AccessDenied); and listing is what the store needs anyway. */
	char enc[3 * SUP_S3_KEY_MAX + 1];
	char query[sizeof(enc) + 64];
	if (sup_s3_uri_encode(enc, sizeof(enc), s->prefix, false) < 0)
		return sbx_err_set(err, -ENAMETOOLONG, "check: prefix too long");
	snprintf(query, sizeof(query), "list-type=2&max-keys=1&prefix=%s", enc);
	sup_s3_req r = {.method = "GET", .what = "check bucket", .query = query, .idempotent = true};
	int rc = sup_s3_req_run(s, &r, err);
	if (rc < 0)
		return sbx_err_wrap(err, "S3 store s3://%s", s->bucket);
	return 0;
}

int sup_s3_head(sup_s3 *s, const char *key, uint64_t *size, sbx_err *err)
{
	int rc = sup_s3_check_key(s, key, err);
	if (rc < 0)
		return rc;
	sup_s3_req r = {.method = "HEAD", .what = "head", .key = key, .idempotent = true};
	rc = sup_s3_req_run(s, &r, err);
	if (rc < 0)
		return rc;
	if (size)
		*size = r.length;
	return 0;
}

int sup_s3_delete(sup_s3 *s, const char *key, sbx_err *err)
{
	int rc = sup_s3_check_key(s, key, err);
	if (rc < 0)
		return rc;
	sup_s3_req r = {.method = "DELETE", .what = "delete", .key = key, .idempotent = true};
	return sup_s3_req_run(s, &r, err);
}

typedef struct get_sink {
	int fd;
	uint64_t done;
} get_sink;

static int get_write(void *ud, const char *p, size_t n, sbx_err *err)
{
	get_sink *g = ud;
	while (n > 0) {
		ssize_t w = write(g->fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return sbx_err_sys(err, -errno, "write at %" PRIu64, g->done);
		p += w;
		n -= (size_t)w;
		g->done += (uint64_t)w;
	}
	return 0;
}

int sup_s3_get_fd(sup_s3 *s, const char *key, int fd, sbx_err *err)
{
	int rc = sup_s3_check_key(s, key, err);
	if (rc < 0)
		return rc;
	get_sink g = {.fd = fd};
	sup_s3_req r = {.method = "GET", .what = "get", .key = key, .idempotent = true,
			.sink = get_write, .sink_ud = &g, .resume_at = &g.done};
	return sup_s3_req_run(s, &r, err);
}

typedef struct buf_sink {
	char *buf;
	size_t cap, len;
} buf_sink;

static int buf_write(void *ud, const char *p, size_t n, sbx_err *err)
{
	buf_sink *b = ud;
	if (n > b->cap - b->len)
		return sbx_err_set(err, -E2BIG, "over %zu bytes", b->cap);
	memcpy(b->buf + b->len, p, n);
	b->len += n;
	return 0;
}

int sup_s3_get_buf(sup_s3 *s, const char *key, char *buf, size_t cap, size_t *len, sbx_err *err)
{
	int rc = sup_s3_check_key(s, key, err);
	if (rc < 0)
		return rc;
	buf_sink b = {.buf = buf, .cap = cap};
	/* retried only until a body arrives (no resume: small objects) */
	sup_s3_req r = {.method = "GET", .what = "get", .key = key, .idempotent = true,
			.sink = buf_write, .sink_ud = &b};
	rc = sup_s3_req_run(s, &r, err);
	*len = b.len;
	return rc;
}

/* One ListObjectsV2 listing, page by page (sup_s3_pages). */
typedef struct list_page {
	sup_s3 *s;
	sup_s3_list_fn fn;
	void *ud;
	int user_rc;          /* the caller's callback stopped the listing */
	const char *enc_prefix;
	char key[SUP_S3_KEY_MAX + 1];
	bool have_key;
	uint64_t size;
	int64_t mtime;
	bool truncated;
	char token[SUP_S3_XML_TEXT_MAX + 1];
} list_page;

int64_t sup_s3_iso_time(const char *text)
{
	struct tm tm = {0};
	const char *end = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end)
		return -1;
	if (*end == '.')
		end += 1 + strspn(end + 1, "0123456789");
	if (strcmp(end, "Z") != 0)
		return -1;
	time_t t = timegm(&tm);
	return t == (time_t)-1 ? -1 : (int64_t)t;
}

static int list_el(void *ud, const char *path, const char *text, size_t len)
{
	list_page *lp = ud;
	if (strcmp(path, "ListBucketResult/Contents/Key") == 0) {
		if (len > SUP_S3_KEY_MAX)
			return -ENAMETOOLONG;
		memcpy(lp->key, text, len + 1);
		lp->have_key = true;
	} else if (strcmp(path, "ListBucketResult/Contents/Size") == 0) {
		char *end = NULL;
		errno = 0;
		lp->size = strtoull(text, &end, 10);
		if (errno || end == text || *end)
			return -EPROTO;
	} else if (strcmp(path, "ListBucketResult/Contents/LastModified") == 0) {
		lp->mtime = sup_s3_iso_time(text);
	} else if (strcmp(path, "ListBucketResult/Contents") == 0) {
		const char *rel = sup_s3_unprefixed(lp->s, lp->have_key ? lp->key : NULL);
		if (rel) {
			int rc = lp->fn(lp->ud, rel, lp->size, lp->mtime);
			if (rc != 0) {
				lp->user_rc = rc;
				return -ECANCELED;
			}
		}
		lp->have_key = false;
		lp->size = 0;
		lp->mtime = -1;
	} else if (strcmp(path, "ListBucketResult/IsTruncated") == 0) {
		lp->truncated = len == 4 && strcmp(text, "true") == 0;
	} else if (strcmp(path, "ListBucketResult/NextContinuationToken") == 0) {
		memcpy(lp->token, text, len + 1);
	}
	return 0;
}

const char *sup_s3_unprefixed(const sup_s3 *s, const char *key)
{
	size_t pn = strlen(s->prefix);
	/* Keys outside the prefix cannot be asked for; skip, not trust. */
	if (!key || strncmp(key, s->prefix, pn) != 0 || !key[pn])
		return NULL;
	return key + pn;
}

static int list_query(void *ud, char **q)
{
	list_page *lp = ud;
	char enc_token[3 * SUP_S3_XML_TEXT_MAX + 1];
	enc_token[0] = '\0';
	if (lp->token[0] && sup_s3_uri_encode(enc_token, sizeof(enc_token), lp->token, false) < 0)
		return -EPROTO;
	lp->truncated = false;
	lp->token[0] = '\0';
	/* Parameters in SigV4's canonical order: libcurl signs the query as written. */
	if (asprintf(q, "%s%s%slist-type=2&max-keys=%u&prefix=%s", enc_token[0] ? "continuation-token=" : "",
		     enc_token, enc_token[0] ? "&" : "", lp->s->o.list_page, lp->enc_prefix) < 0)
		return -ENOMEM;
	return 0;
}

static int list_more(void *ud, unsigned page, sbx_err *err)
{
	list_page *lp = ud;
	if (!lp->truncated)
		return 0;
	if (!lp->token[0])
		return sbx_err_set(err, -EPROTO, "list: page %u truncated without a continuation token",
				   page);
	return 1;
}

static int page_sink(void *ud, const char *p, size_t n, sbx_err *err)
{
	return sup_s3_xml_feed(ud, p, n, false, err);
}

int sup_s3_pages(sup_s3 *s, const sup_s3_pager *p, sbx_err *err)
{
	for (unsigned page = 1;; page++) {
		SBX_AUTO_FREE char *query = NULL;
		int rc = p->query(p->ud, &query);
		if (rc < 0)
			return sbx_err_set(err, rc, "%s %s: page %u's query", p->step, p->where, page);
		char what[48];
		snprintf(what, sizeof(what), "%s page %u", p->step, page);
		sup_s3_xml *x = NULL;
		rc = sup_s3_xml_new(p->el, p->ud, &x, err);
		if (rc < 0)
			return rc;
		sup_s3_req r = {.method = "GET", .what = what, .key = NULL, .query = query,
				.idempotent = true, .sink = page_sink, .sink_ud = x};
		rc = sup_s3_req_run(s, &r, err);
		if (rc == 0)
			rc = sup_s3_xml_feed(x, "", 0, true, err);
		sup_s3_xml_free(x);
		if (*p->stopped) {
			if (*p->stopped > 0)
				sbx_err_clear(err);
			else
				sbx_err_set(err, *p->stopped, "%s %s: stopped by its caller", p->step, p->where);
			return *p->stopped;
		}
		if (rc < 0)
			return sbx_err_wrap(err, "s3://%s/%s%s", s->bucket, s->prefix, p->where);
		rc = p->more(p->ud, page, err);
		if (rc <= 0)
			return rc;
	}
}

int sup_s3_list(sup_s3 *s, const char *prefix, sup_s3_list_fn fn, void *ud, sbx_err *err)
{
	char enc_prefix[3 * SUP_S3_KEY_MAX + 1];
	SBX_AUTO_FREE list_page *lp = calloc(1, sizeof(*lp));
	if (!lp)
		return sbx_err_set(err, -ENOMEM, "list");
	prefix = prefix ? prefix : "";
	if (sup_s3_prefix_query(s, prefix, enc_prefix, sizeof(enc_prefix), err) < 0)
		return sbx_err_wrap(err, "list");
	lp->s = s;
	lp->fn = fn;
	lp->ud = ud;
	lp->mtime = -1;
	lp->enc_prefix = enc_prefix;
	sup_s3_pager p = {.step = "list", .where = prefix, .query = list_query, .el = list_el,
			  .more = list_more, .stopped = &lp->user_rc, .ud = lp};
	return sup_s3_pages(s, &p, err);
}

int sup_s3_prefix_query(const sup_s3 *s, const char *prefix, char *enc, size_t cap, sbx_err *err)
{
	char whole[SUP_S3_KEY_MAX + 1];
	prefix = prefix ? prefix : "";
	if (has_ctl(prefix))
		return sbx_err_set(err, -EINVAL, "prefix %s: control character", prefix);
	int n = snprintf(whole, sizeof(whole), "%s%s", s->prefix, prefix);
	if (n < 0 || (size_t)n >= sizeof(whole) || sup_s3_uri_encode(enc, cap, whole, false) < 0)
		return sbx_err_set(err, -ENAMETOOLONG, "prefix %s: too long", prefix);
	return 0;
}
