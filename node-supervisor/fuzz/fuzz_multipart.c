/* The streaming multipart/form-data parser (edge/api/sup_multipart.h)
 * under libFuzzer, as the uploads feed it a client's body. Input: a flags
 * byte, then the request's Content-Type up to the first '\n', then the
 * body. The body is parsed whole, then again in pieces (their sizes from
 * the flags, varying), pausing on the flags' events. Checks, besides the
 * sanitizers: the two parses agree (every event, every byte, the result),
 * whatever the pieces and pauses; a refusal carries a message and is
 * given again by every later call; a pause consumes no more than was fed
 * and on_data never gets more than the piece plus the 75 bytes the header
 * promises; no more parts than max_parts; a part's strings hold no NUL,
 * CR or LF; what a part yields is no longer than the body. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sup_multipart.h"

#define CHECK(x) \
	do { \
		if (!(x)) \
			abort(); \
	} while (0)

#define MAX_PARTS 8

struct buf {
	uint8_t *b;
	size_t len, cap;
};

/* What a parse gave: its events (each with the count of data bytes before
 * it) and its data bytes, so pieces of a run cut differently compare
 * equal. */
struct log {
	struct buf ev, data;
	int pause_part, pause_end;
	size_t piece;
	unsigned parts;
};

static void put(struct buf *l, const void *p, size_t n)
{
	if (l->len + n > l->cap) {
		l->cap = (l->len + n) * 2 + 64;
		l->b = realloc(l->b, l->cap);
		CHECK(l->b);
	}
	memcpy(l->b + l->len, p, n);
	l->len += n;
}

static void put_str(struct buf *l, const char *s)
{
	if (!s) {
		put(l, "\1", 1);
		return;
	}
	size_t n = strlen(s);
	for (size_t i = 0; i < n; i++)
		CHECK(s[i] != '\r' && s[i] != '\n');
	put(l, s, n + 1);
}

static void event(struct log *l, char t)
{
	put(&l->ev, &t, 1);
	put(&l->ev, &l->data.len, sizeof(l->data.len));
}

static int on_part(const sup_multipart_part *p, void *ud, sbx_err *err)
{
	struct log *l = ud;
	(void)err;
	CHECK(p->index == l->parts);
	l->parts++;
	CHECK(l->parts <= MAX_PARTS);
	event(l, 'P');
	put_str(&l->ev, p->name);
	put_str(&l->ev, p->filename);
	put_str(&l->ev, p->content_type);
	return l->pause_part ? SUP_MULTIPART_PAUSE : 0;
}

static int on_data(const uint8_t *p, size_t n, void *ud, sbx_err *err)
{
	struct log *l = ud;
	(void)err;
	CHECK(n > 0);
	if (l->piece)
		CHECK(n <= l->piece + 75);
	put(&l->data, p, n);
	return 0;
}

static int on_end(void *ud, sbx_err *err)
{
	struct log *l = ud;
	(void)err;
	event(l, 'E');
	return l->pause_end ? SUP_MULTIPART_PAUSE : 0;
}

static const sup_multipart_cbs cbs = { .on_part = on_part, .on_data = on_data, .on_part_end = on_end };

/* The body parsed whole (l->piece 0) or in pieces of varying sizes. */
static int parse(const char *ct, const uint8_t *body, size_t n, struct log *l, sbx_err *err,
		 uint8_t flags)
{
	sup_multipart *m = sup_multipart_new(ct, MAX_PARTS, &cbs, l, err);
	if (!m) {
		CHECK(err->code < 0 && err->msg[0]);
		return err->code;
	}
	bool pieces = l->piece != 0;
	size_t at = 0, step = 1 + (flags >> 3);
	int rc = 0;
	while (at < n) {
		size_t len = pieces && n - at > step ? step : n - at;
		if (pieces)
			l->piece = len;
		ssize_t k = sup_multipart_feed(m, body + at, len, err);
		if (k < 0) {
			CHECK(err->msg[0]);
			rc = (int)k;
			sbx_err e2;
			CHECK(sup_multipart_feed(m, (const uint8_t *)"x", 1, &e2) == k);
			CHECK(sup_multipart_finish(m, &e2) == k);
			break;
		}
		CHECK((size_t)k <= len);
		if ((size_t)k < len)
			CHECK(l->pause_part || l->pause_end);
		at += (size_t)k;
		if (pieces)
			step = step * 7 % 251 + 1;
	}
	if (rc == 0) {
		rc = sup_multipart_finish(m, err);
		CHECK(rc == 0 ? sup_multipart_done(m) : err->msg[0] != '\0');
	}
	CHECK(sup_multipart_count(m) <= MAX_PARTS);
	sup_multipart_free(m);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	uint8_t flags = data[0];
	const uint8_t *nl = memchr(data + 1, '\n', size - 1);
	size_t ctl = nl ? (size_t)(nl - data - 1) : size - 1;
	char *ct = malloc(ctl + 1);
	CHECK(ct);
	memcpy(ct, data + 1, ctl);
	ct[ctl] = '\0';
	const uint8_t *body = nl ? nl + 1 : data + size;
	size_t n = (size_t)(data + size - body);

	struct log whole = { 0 }, cut = { .pause_part = flags & 1, .pause_end = flags & 2, .piece = 1 };
	sbx_err e1, e2;
	sbx_err_clear(&e1);
	sbx_err_clear(&e2);
	int r1 = parse(ct, body, n, &whole, &e1, flags);
	int r2 = parse(ct, body, n, &cut, &e2, flags);
	CHECK(r1 == r2);
	CHECK(whole.data.len <= n && cut.data.len <= n);
	if (r1 == 0) {
		CHECK(whole.ev.len == cut.ev.len &&
		      (whole.ev.len == 0 || memcmp(whole.ev.b, cut.ev.b, whole.ev.len) == 0));
		CHECK(whole.data.len == cut.data.len &&
		      (whole.data.len == 0 || memcmp(whole.data.b, cut.data.b, whole.data.len) == 0));
		CHECK(whole.parts == cut.parts);
	}
	free(whole.ev.b);
	free(whole.data.b);
	free(cut.ev.b);
	free(cut.data.b);
	free(ct);
	return 0;
}
