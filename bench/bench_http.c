#include "bench_http.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bench_http {
	CURL *curl;
	struct curl_slist *headers;
	char base[256];
	char *body;
	size_t len, cap;
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	bench_http *h = ud;
	size_t add = size * n;
	if (h->len + add + 1 > h->cap) {
		size_t cap = (h->len + add + 1) * 2;
		char *b = realloc(h->body, cap);
		if (!b)
			return 0;
		h->body = b;
		h->cap = cap;
	}
	memcpy(h->body + h->len, p, add);
	h->len += add;
	h->body[h->len] = '\0';
	return add;
}

bench_http *bench_http_new(const char *base_url, const char *token)
{
	bench_http *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->curl = curl_easy_init();
	snprintf(h->base, sizeof(h->base), "%s", base_url);
	char auth[256];
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	h->headers = curl_slist_append(NULL, auth);
	h->headers = curl_slist_append(h->headers, "Content-Type: application/json");
	h->headers = curl_slist_append(h->headers, "Expect:");
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, h->headers);
	curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, h);
	curl_easy_setopt(h->curl, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h->curl, CURLOPT_TIMEOUT, 60L);
	return h;
}

void bench_http_free(bench_http *h)
{
	if (!h)
		return;
	curl_easy_cleanup(h->curl);
	curl_slist_free_all(h->headers);
	free(h->body);
	free(h);
}

long bench_http_do(bench_http *h, const char *method, const char *path, const char *body)
{
	char url[512];
	snprintf(url, sizeof(url), "%s%s", h->base, path);
	h->len = 0;
	if (h->body)
		h->body[0] = '\0';
	curl_easy_setopt(h->curl, CURLOPT_URL, url);
	if (body) {
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	} else {
		/* Back to a body-less request: HTTPGET clears the POST state a
		 * previous call left (else a DELETE announces a stale length). */
		curl_easy_setopt(h->curl, CURLOPT_HTTPGET, 1L);
	}
	curl_easy_setopt(h->curl, CURLOPT_CUSTOMREQUEST, method);
	if (curl_easy_perform(h->curl) != CURLE_OK)
		return -1;
	long status = 0;
	curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
	return status;
}

typedef struct stream_sink {
	size_t bytes;
	char *tail;
	size_t tail_size;
	size_t tail_len;
} stream_sink;

static size_t on_stream(char *p, size_t size, size_t n, void *ud)
{
	stream_sink *s = ud;
	size_t add = size * n, keep = s->tail_size - 1;
	s->bytes += add;
	if (add >= keep) {
		memcpy(s->tail, p + add - keep, keep);
		s->tail_len = keep;
	} else {
		size_t drop = s->tail_len + add > keep ? s->tail_len + add - keep : 0;
		memmove(s->tail, s->tail + drop, s->tail_len - drop);
		memcpy(s->tail + s->tail_len - drop, p, add);
		s->tail_len += add - drop;
	}
	s->tail[s->tail_len] = '\0';
	return add;
}

long bench_http_stream(bench_http *h, const char *path, const char *body, size_t *bytes,
		       char *tail, size_t tail_size)
{
	CURL *c = curl_easy_duphandle(h->curl);
	if (!c)
		return -1;
	struct curl_slist *hd = NULL;
	for (struct curl_slist *i = h->headers; i; i = i->next)
		hd = curl_slist_append(hd, i->data);
	hd = curl_slist_append(hd, "Accept: text/event-stream");
	char url[512];
	snprintf(url, sizeof(url), "%s%s", h->base, path);
	stream_sink s = { .tail = tail, .tail_size = tail_size };
	tail[0] = '\0';
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "POST");
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 600L);
	long status = -1;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	*bytes = s.bytes;
	curl_easy_cleanup(c);
	curl_slist_free_all(hd);
	return status;
}

typedef struct zero_source {
	size_t left;
} zero_source;

static size_t on_upload(char *p, size_t size, size_t n, void *ud)
{
	zero_source *z = ud;
	size_t k = size * n < z->left ? size * n : z->left;
	memset(p, 0, k);
	z->left -= k;
	return k;
}

/* A copy of h's handle for one big transfer (its own timeout). */
static CURL *transfer_handle(bench_http *h, const char *path)
{
	CURL *c = curl_easy_duphandle(h->curl);
	if (!c)
		return NULL;
	char url[512];
	snprintf(url, sizeof(url), "%s%s", h->base, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 600L);
	/* The copy keeps the method and body of h's last request. */
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, NULL);
	curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	return c;
}

long bench_http_upload(bench_http *h, const char *path, size_t bytes)
{
	CURL *c = transfer_handle(h, path);
	if (!c)
		return -1;
	zero_source z = { .left = bytes };
	h->len = 0;
	if (h->body)
		h->body[0] = '\0';
	curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)bytes);
	curl_easy_setopt(c, CURLOPT_READFUNCTION, on_upload);
	curl_easy_setopt(c, CURLOPT_READDATA, &z);
	curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 1L << 20);
	long status = -1;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	return status;
}

long bench_http_download(bench_http *h, const char *path, size_t *bytes)
{
	CURL *c = transfer_handle(h, path);
	if (!c)
		return -1;
	char tail[2];
	stream_sink s = { .tail = tail, .tail_size = sizeof(tail) };
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	long status = -1;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	*bytes = s.bytes;
	curl_easy_cleanup(c);
	return status;
}

const char *bench_http_body(const bench_http *h)
{
	return h->body ? h->body : "";
}
