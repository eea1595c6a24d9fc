/* The streaming multipart/form-data parser (edge/api/sup_multipart.h):
 * the boundary from a Content-Type; bodies as the E2B and OpenSandbox SDKs
 * send them, fed whole, split at every byte position, in three pieces at
 * every pair of positions and a byte at a time, each giving the same
 * parts; CRLF and delimiter-like bytes inside a part; pauses; a 64 MiB
 * part streamed in pieces with bounded hand-outs; and bad input refused
 * with a message (and refused again after). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sup_multipart.h"

/* ---- a recorder of the events, as one string ---- */

struct rec {
	char *log;
	size_t len, cap;
	int pause_part, pause_end; /* return SUP_MULTIPART_PAUSE from these */
	int fail_data;             /* on_data fails with this code */
	size_t max_data;           /* the largest on_data */
	unsigned pauses;
};

static void put(struct rec *r, const void *p, size_t n)
{
	if (r->len + n + 1 > r->cap) {
		r->cap = (r->len + n + 1) * 2;
		r->log = realloc(r->log, r->cap);
		assert_non_null(r->log);
	}
	memcpy(r->log + r->len, p, n);
	r->len += n;
	r->log[r->len] = '\0';
}

static void puts_(struct rec *r, const char *s)
{
	put(r, s, strlen(s));
}

static int on_part(const sup_multipart_part *p, void *ud, sbx_err *err)
{
	struct rec *r = ud;
	char b[64];
	snprintf(b, sizeof(b), "<P%u", p->index);
	puts_(r, b);
	puts_(r, " name=");
	puts_(r, p->name ? p->name : "-");
	puts_(r, " filename=");
	puts_(r, p->filename ? p->filename : "-");
	puts_(r, " ct=");
	puts_(r, p->content_type ? p->content_type : "-");
	puts_(r, ">");
	(void)err;
	if (r->pause_part) {
		r->pauses++;
		return SUP_MULTIPART_PAUSE;
	}
	return 0;
}

static int on_data(const uint8_t *p, size_t n, void *ud, sbx_err *err)
{
	struct rec *r = ud;
	assert_true(n > 0);
	if (n > r->max_data)
		r->max_data = n;
	if (r->fail_data)
		return sbx_err_set(err, r->fail_data, "the data was refused");
	put(r, p, n);
	return 0;
}

static int on_end(void *ud, sbx_err *err)
{
	struct rec *r = ud;
	(void)err;
	puts_(r, "<E>");
	if (r->pause_end) {
		r->pauses++;
		return SUP_MULTIPART_PAUSE;
	}
	return 0;
}

static const sup_multipart_cbs cbs = { .on_part = on_part, .on_data = on_data, .on_part_end = on_end };

#define CT "multipart/form-data; boundary=XyZ"

/* Feed body in the pieces that cuts[0..ncuts) (ascending) make; a pause
 * is resumed at once with the bytes not consumed. The result of finish
 * (or the first error), the log in r. */
static int run_cuts(const char *ct, const char *body, size_t len, const size_t *cuts, size_t ncuts,
		    struct rec *r, sbx_err *err)
{
	sbx_err_clear(err);
	sup_multipart *m = sup_multipart_new(ct, 16, &cbs, r, err);
	if (!m)
		return err->code;
	size_t at = 0;
	int rc = 0;
	for (size_t c = 0; c <= ncuts && rc == 0; c++) {
		size_t to = c < ncuts ? cuts[c] : len;
		while (at < to) {
			ssize_t n = sup_multipart_feed(m, (const uint8_t *)body + at, to - at, err);
			if (n < 0) {
				rc = (int)n;
				break;
			}
			assert_true((size_t)n <= to - at);
			if ((size_t)n < to - at)
				assert_true(r->pause_part || r->pause_end);
			at += (size_t)n;
		}
	}
	if (rc == 0)
		rc = sup_multipart_finish(m, err);
	sup_multipart_free(m);
	return rc;
}

static int run_whole(const char *ct, const char *body, size_t len, struct rec *r, sbx_err *err)
{
	return run_cuts(ct, body, len, NULL, 0, r, err);
}

static void rec_reset(struct rec *r)
{
	free(r->log);
	memset(r, 0, sizeof(*r));
}

/* body gives expect (a log) or fails with a message, fed whole, split at
 * every position, in three pieces at every pair (short bodies) and a byte
 * at a time; also with every pause. */
static void check_all(const char *ct, const char *body, size_t len, const char *expect, int want_rc)
{
	struct rec r = { 0 };
	sbx_err e;
	int rc = run_whole(ct, body, len, &r, &e);
	if (rc != want_rc)
		fail_msg("whole: rc %d (%s), want %d", rc, e.msg, want_rc);
	if (rc < 0)
		assert_true(e.msg[0] != '\0');
	if (expect)
		assert_string_equal(r.log ? r.log : "", expect);
	char *whole = r.log ? r.log : strdup("");
	r.log = NULL;
	rec_reset(&r);
	for (size_t s = 0; s <= len; s++) {
		size_t cut[1] = { s };
		rc = run_cuts(ct, body, len, cut, 1, &r, &e);
		if (rc != want_rc || strcmp(r.log ? r.log : "", whole) != 0)
			fail_msg("split at %zu: rc %d (%s), log differs", s, rc, e.msg);
		rec_reset(&r);
	}
	if (len <= 160)
		for (size_t a = 0; a <= len; a++)
			for (size_t b = a; b <= len; b++) {
				size_t cut[2] = { a, b };
				rc = run_cuts(ct, body, len, cut, 2, &r, &e);
				if (rc != want_rc || strcmp(r.log ? r.log : "", whole) != 0)
					fail_msg("split at %zu,%zu: rc %d (%s)", a, b, rc, e.msg);
				rec_reset(&r);
			}
	size_t *cuts = calloc(len + 1, sizeof(*cuts));
	for (size_t i = 0; i < len; i++)
		cuts[i] = i;
	rc = run_cuts(ct, body, len, cuts, len, &r, &e);
	if (rc != want_rc || strcmp(r.log ? r.log : "", whole) != 0)
		fail_msg("a byte at a time: rc %d (%s)", rc, e.msg);
	rec_reset(&r);
	for (int pm = 1; pm < 4; pm++) {
		r.pause_part = pm & 1;
		r.pause_end = pm & 2;
		rc = run_cuts(ct, body, len, cuts, len / 2, &r, &e);
		if (rc != want_rc || strcmp(r.log ? r.log : "", whole) != 0)
			fail_msg("pausing (%d): rc %d (%s)", pm, rc, e.msg);
		rec_reset(&r);
	}
	free(cuts);
	free(whole);
}

#define CHECK(body, expect) check_all(CT, body, sizeof(body) - 1, expect, 0)
#define REFUSE(body) check_all(CT, body, sizeof(body) - 1, NULL, -EINVAL)

/* ---- the boundary ---- */

static void boundary_is(const char *ct, const char *want)
{
	char b[SUP_MULTIPART_BOUNDARY_MAX + 1];
	sbx_err e;
	sbx_err_clear(&e);
	int n = sup_multipart_boundary(ct, b, sizeof(b), &e);
	const char *shown = ct ? ct : "(no Content-Type)";
	if (!want) {
		if (n != -EINVAL)
			fail_msg("%s: got %d, want -EINVAL", shown, n);
		assert_true(e.msg[0] != '\0');
		return;
	}
	if (n < 0)
		fail_msg("%s: %s", shown, e.msg);
	assert_int_equal(n, strlen(want));
	assert_string_equal(b, want);
}

static void test_boundary(void **unused)
{
	(void)unused;
	boundary_is("multipart/form-data; boundary=----formdata-undici-027929226137", "----formdata-undici-027929226137");
	boundary_is("multipart/form-data;boundary=\"a b:c\"", "a b:c");
	boundary_is("Multipart/Form-Data; charset=utf-8; BOUNDARY=x=y/z?", "x=y/z?");
	boundary_is("multipart/form-data; boundary=abc;", "abc");
	boundary_is("multipart/form-data ; boundary = x", NULL); /* blanks around '=' */
	boundary_is("multipart/form-data ;\tboundary=x", "x");
	boundary_is("multipart/form-data; boundary=\"esc\\\"aped\"", NULL); /* '"' is no bchar */
	char big[200];
	snprintf(big, sizeof(big), "multipart/form-data; boundary=%070d", 7);
	boundary_is(big, big + 30);
	snprintf(big, sizeof(big), "multipart/form-data; boundary=%071d", 7);
	boundary_is(big, NULL);
	boundary_is(NULL, NULL);
	boundary_is("", NULL);
	boundary_is("application/octet-stream", NULL);
	boundary_is("multipart/mixed; boundary=x", NULL);
	boundary_is("multipart/form-data", NULL);
	boundary_is("multipart/form-data; boundary=", NULL);
	boundary_is("multipart/form-data; boundary=\"\"", NULL);
	boundary_is("multipart/form-data; boundary=\"a \"", NULL);
	boundary_is("multipart/form-data; boundary=\"a\rb\"", NULL);
	boundary_is("multipart/form-data; boundary=a\x80", NULL);
	boundary_is("multipart/form-data; boundary=a; boundary=b", NULL);
	boundary_is("multipart/form-data; boundary=\"unterminated", NULL);
	boundary_is("multipart/form-data; =x", NULL);
	boundary_is("multipart/form-data junk", NULL);
	char huge[SUP_MULTIPART_CTYPE_MAX + 40];
	memset(huge, 'a', sizeof(huge) - 1);
	huge[sizeof(huge) - 1] = '\0';
	memcpy(huge, "multipart/form-data; boundary=", 30);
	boundary_is(huge, NULL);
	/* the parser refuses what the boundary refuses, and a bad max_parts */
	sbx_err e;
	struct rec r = { 0 };
	assert_null(sup_multipart_new("text/plain", 4, &cbs, &r, &e));
	assert_int_equal(e.code, -EINVAL);
	assert_null(sup_multipart_new(CT, 0, &cbs, &r, &e));
	assert_null(sup_multipart_new(CT, SUP_MULTIPART_PARTS_MAX + 1, &cbs, &r, &e));
}

/* ---- bodies that parse ---- */

/* What undici's FormData sends for the E2B SDK's files.write([...]). */
static const char e2b_two[] =
	"--XyZ\r\n"
	"Content-Disposition: form-data; name=\"file\"; filename=\"/home/user/a.txt\"\r\n"
	"Content-Type: application/octet-stream\r\n"
	"\r\n"
	"hello\r\n"
	"--XyZ\r\n"
	"Content-Disposition: form-data; name=\"file\"; filename=\"/tmp/dir/b.bin\"\r\n"
	"Content-Type: application/octet-stream\r\n"
	"\r\n"
	"\x00\x01\r\n\xff\r\n"
	"--XyZ--\r\n";

static void test_two_files(void **unused)
{
	(void)unused;
	check_all(CT, e2b_two, sizeof(e2b_two) - 1,
		  "<P0 name=file filename=/home/user/a.txt ct=application/octet-stream>hello<E>"
		  "<P1 name=file filename=/tmp/dir/b.bin ct=application/octet-stream>"
		  "\x00\x01\r\n\xff<E>",
		  0);
}

static void test_osbx_shape(void **unused)
{
	(void)unused;
	CHECK("--XyZ\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n"
	      "{\"path\":\"/workspace/x\"}\r\n"
	      "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\n"
	      "bytes\r\n--XyZ--",
	      "<P0 name=metadata filename=- ct=->{\"path\":\"/workspace/x\"}<E>"
	      "<P1 name=file filename=x ct=->bytes<E>");
}

static void test_crlf_edges(void **unused)
{
	(void)unused;
	/* empty data, data of CRs and LFs, a CR right before the delimiter */
	CHECK("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n\r\n--XyZ--",
	      "<P0 name=a filename=- ct=-><E>");
	CHECK("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n\r\n\r\n--XyZ--",
	      "<P0 name=a filename=- ct=->\r\n<E>");
	CHECK("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n\r\r\n--XyZ--",
	      "<P0 name=a filename=- ct=->\r<E>");
	CHECK("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n\r\r\r\n\n\r\n--XyZ--",
	      "<P0 name=a filename=- ct=->\r\r\r\n\n<E>");
	/* delimiter-like bytes inside a part: prefixes, the boundary without
	 * its CRLF, the boundary followed by other bytes (data, as in Go's
	 * reader), "--XyZ-" not followed by '-' */
	CHECK("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n"
	      "\r\n-x\r\n--x\r\n--Xy\r\n--XyZa\r\n--XyZ-a\r\n--XyZ-\r\n--XyZ--",
	      "<P0 name=a filename=- ct=->\r\n-x\r\n--x\r\n--Xy\r\n--XyZa\r\n--XyZ-a\r\n--XyZ-<E>");
	CHECK("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n"
	      "--XyZ\n--XyZ\r--XyZ\r\n--XyZa\r\n--XyZ-a\r\n--XyZ-\r\r\n--XyZ--",
	      "<P0 name=a filename=- ct=->--XyZ\n--XyZ\r--XyZ\r\n--XyZa\r\n--XyZ-a\r\n--XyZ-\r<E>");
	/* blanks after a delimiter (transport padding), preamble, epilogue */
	CHECK("preamble\r\nmore\r\n--XyZ \t\r\nContent-Disposition: form-data; name=a\r\n\r\nd\r\n--XyZ--\r\n"
	      "epilogue \r\n--XyZ\r\n junk",
	      "<P0 name=a filename=- ct=->d<E>");
	/* a closing delimiter with no part before it */
	CHECK("--XyZ--", "");
	/* header lines: any case, blanks, unknown headers kept out */
	CHECK("--XyZ\r\ncontent-disposition:form-data;name=\"a\";filename=\"f\"  \r\n"
	      "X-Other: 1\r\nCONTENT-TYPE:  text/plain; charset=utf-8 \r\n\r\nd\r\n--XyZ--",
	      "<P0 name=a filename=f ct=text/plain; charset=utf-8>d<E>");
}

static void test_filenames(void **unused)
{
	(void)unused;
	CHECK("--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/a \\\"q\\\" \\\\.txt\"\r\n"
	      "\r\nd\r\n--XyZ--",
	      "<P0 name=file filename=/tmp/a \"q\" \\.txt ct=->d<E>");
	CHECK("--XyZ\r\nContent-Disposition: form-data; name=file; filename*=UTF-8''%E2%82%AC%20x.txt; "
	      "filename=\"fallback\"\r\n\r\nd\r\n--XyZ--",
	      "<P0 name=file filename=\xe2\x82\xac x.txt ct=->d<E>");
	CHECK("--XyZ\r\nContent-Disposition: form-data; name=file; filename=\"fallback\"; "
	      "filename*=utf-8'en'%2Fa\r\n\r\nd\r\n--XyZ--",
	      "<P0 name=file filename=/a ct=->d<E>");
	/* raw UTF-8 in a quoted filename, as undici sends it */
	CHECK("--XyZ\r\nContent-Disposition: form-data; name=file; filename=\"/tmp/\xc3\xa9t\xc3\xa9\"\r\n\r\nd\r\n--XyZ--",
	      "<P0 name=file filename=/tmp/\xc3\xa9t\xc3\xa9 ct=->d<E>");
	/* an unquoted path (not a token, accepted) */
	CHECK("--XyZ\r\nContent-Disposition: form-data; name=file; filename=/tmp/x.txt\r\n\r\nd\r\n--XyZ--",
	      "<P0 name=file filename=/tmp/x.txt ct=->d<E>");
}

/* ---- bad input ---- */

static void test_bad(void **unused)
{
	(void)unused;
	REFUSE("");                                                       /* no delimiter */
	REFUSE("--XyZ");                                                  /* ends at it */
	REFUSE("--XyZ\r\n");                                              /* ends in the head */
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\ndata"); /* no closing delimiter */
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\ndata\r\n--XyZ");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\ndata\r\n--XyZ-");
	REFUSE("--XyZ\r\n\r\ndata\r\n--XyZ--");                               /* no headers */
	REFUSE("--XyZ\r\nContent-Type: text/plain\r\n\r\nd\r\n--XyZ--");      /* no Content-Disposition */
	REFUSE("--XyZ\r\nContent-Disposition: attachment; name=a\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name=a\r\n folded\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name=a\n\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name=a\r\nX\rY: 1\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name=\"a\x01\"\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name=a; name=b\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name=a\r\nContent-Disposition: form-data\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name=a\r\nContent-Type: a\r\nContent-Type: b\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name=\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data name=a\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nNo colon here\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\n: no name\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; filename*=UTF-8''%zz\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; filename*=UTF-8''%0a\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; filename*=UTF-8''a%00\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; filename*=latin1''a\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; filename*=a\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\nContent-Disposition: form-data; filename*=UTF-8''%4\r\n\r\nd\r\n--XyZ--");
	/* after a delimiter: junk, a lone LF, blanks then junk */
	REFUSE("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nd\r\n--XyZ x\r\n--XyZ--");
	REFUSE("--XyZ\nContent-Disposition: form-data; name=a\r\n\r\nd\r\n--XyZ--");
	REFUSE("--XyZ\r\rContent-Disposition: form-data; name=a\r\n\r\nd\r\n--XyZ--");
}

static void test_bounds(void **unused)
{
	(void)unused;
	struct rec r = { 0 };
	sbx_err e;
	/* a head of SUP_MULTIPART_HEAD_MAX bytes passes, one more is refused */
	for (int extra = 0; extra < 2; extra++) {
		const char *pre = "--XyZ\r\nContent-Disposition: form-data; name=a\r\nX-Pad: ";
		const char *post = "\r\n\r\nd\r\n--XyZ--";
		size_t headlen = SUP_MULTIPART_HEAD_MAX + (size_t)extra;
		size_t fixed = strlen(pre) - 7 + 4; /* the head starts after "--XyZ\r\n" */
		size_t pad = headlen - fixed;
		char *body = malloc(strlen(pre) + pad + strlen(post) + 1);
		strcpy(body, pre);
		memset(body + strlen(pre), 'p', pad);
		strcpy(body + strlen(pre) + pad, post);
		int rc = run_whole(CT, body, strlen(body), &r, &e);
		assert_int_equal(rc, extra ? -EINVAL : 0);
		if (extra)
			assert_non_null(strstr(e.msg, "head"));
		rec_reset(&r);
		free(body);
	}
	/* the preamble's bound */
	for (int extra = 0; extra < 2; extra++) {
		size_t n = SUP_MULTIPART_PREAMBLE_MAX + (size_t)extra;
		const char *rest = "\r\n--XyZ--";
		char *body = malloc(n + strlen(rest) + 1);
		memset(body, 'x', n);
		strcpy(body + n, rest);
		int rc = run_whole(CT, body, strlen(body), &r, &e);
		assert_int_equal(rc, extra ? -EINVAL : 0);
		rec_reset(&r);
		free(body);
	}
	/* blanks after a delimiter */
	char body[256];
	snprintf(body, sizeof(body), "--XyZ%*s\r\nContent-Disposition: form-data; name=a\r\n\r\nd\r\n--XyZ--",
		 SUP_MULTIPART_PAD_MAX, "");
	assert_int_equal(run_whole(CT, body, strlen(body), &r, &e), 0);
	rec_reset(&r);
	snprintf(body, sizeof(body), "--XyZ%*s\r\nContent-Disposition: form-data; name=a\r\n\r\nd\r\n--XyZ--",
		 SUP_MULTIPART_PAD_MAX + 1, "");
	assert_int_equal(run_whole(CT, body, strlen(body), &r, &e), -EINVAL);
	rec_reset(&r);
	/* max_parts: 16 in run_cuts */
	char *many = malloc(17 * 64 + 16);
	size_t len = 0;
	for (int i = 0; i < 17; i++) {
		len += (size_t)sprintf(many + len, "--XyZ\r\nContent-Disposition: form-data; name=p%d\r\n\r\n\r\n", i);
		if (i == 15) {
			strcpy(many + len, "--XyZ--");
			assert_int_equal(run_whole(CT, many, len + 7, &r, &e), 0);
			assert_non_null(strstr(r.log, "<P15 "));
			rec_reset(&r);
		}
	}
	strcpy(many + len, "--XyZ--");
	assert_int_equal(run_whole(CT, many, len + 7, &r, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "over 16 parts"));
	rec_reset(&r);
	free(many);
}

/* A callback's error comes back, and again on every later call. */
static void test_callback_error(void **unused)
{
	(void)unused;
	struct rec r = { .fail_data = -EFBIG };
	sbx_err e;
	sup_multipart *m = sup_multipart_new(CT, 4, &cbs, &r, &e);
	assert_non_null(m);
	ssize_t n = sup_multipart_feed(m, (const uint8_t *)e2b_two, sizeof(e2b_two) - 1, &e);
	assert_int_equal(n, -EFBIG);
	assert_string_equal(e.msg, "the data was refused");
	sbx_err_clear(&e);
	assert_int_equal(sup_multipart_feed(m, (const uint8_t *)"x", 1, &e), -EFBIG);
	assert_int_equal(sup_multipart_finish(m, &e), -EFBIG);
	assert_false(sup_multipart_done(m));
	sup_multipart_free(m);
	rec_reset(&r);
	/* bad input: the same */
	m = sup_multipart_new(CT, 4, &cbs, &r, &e);
	assert_int_equal(sup_multipart_feed(m, (const uint8_t *)"--XyZ?", 6, &e), 6); /* "--XyZ?" is preamble */
	assert_int_equal(sup_multipart_feed(m, (const uint8_t *)"\r\n--XyZ\r\r", 9, &e), -EINVAL);
	assert_int_equal(sup_multipart_feed(m, (const uint8_t *)"\n", 1, &e), -EINVAL);
	sup_multipart_free(m);
	rec_reset(&r);
}

/* Pauses stop right after their event: the count consumed says where. */
static void test_pause_points(void **unused)
{
	(void)unused;
	struct rec r = { .pause_part = 1, .pause_end = 1 };
	sbx_err e;
	sup_multipart *m = sup_multipart_new(CT, 4, &cbs, &r, &e);
	const uint8_t *b = (const uint8_t *)e2b_two;
	size_t len = sizeof(e2b_two) - 1;
	const char *head_end = strstr(e2b_two, "\r\n\r\n") + 4;
	ssize_t n = sup_multipart_feed(m, b, len, &e);
	assert_int_equal(n, head_end - e2b_two);
	assert_int_equal(sup_multipart_count(m), 1);
	size_t at = (size_t)n;
	n = sup_multipart_feed(m, b + at, len - at, &e);
	/* past "hello\r\n--XyZ": the CRLF after the delimiter is not yet read */
	assert_int_equal(at + (size_t)n, strstr(e2b_two, "hello") + 5 + 7 - e2b_two);
	assert_string_equal(r.log, "<P0 name=file filename=/home/user/a.txt ct=application/octet-stream>hello<E>");
	at += (size_t)n;
	while (at < len) {
		n = sup_multipart_feed(m, b + at, len - at, &e);
		assert_true(n > 0);
		at += (size_t)n;
	}
	assert_int_equal(r.pauses, 4);
	assert_true(sup_multipart_done(m));
	assert_int_equal(sup_multipart_finish(m, &e), 0);
	/* the epilogue is taken whole */
	assert_int_equal(sup_multipart_feed(m, (const uint8_t *)"\r\n--XyZ\r\nzz", 11, &e), 11);
	sup_multipart_free(m);
	rec_reset(&r);
}

/* ---- a big part, streamed ---- */

struct big {
	uint64_t got, sum;
	size_t max_data;
	unsigned parts, ends;
};

static int big_part(const sup_multipart_part *p, void *ud, sbx_err *err)
{
	struct big *b = ud;
	(void)err;
	assert_string_equal(p->filename, "/home/user/big.bin");
	b->parts++;
	return 0;
}

static int big_data(const uint8_t *p, size_t n, void *ud, sbx_err *err)
{
	struct big *b = ud;
	(void)err;
	for (size_t i = 0; i < n; i++)
		b->sum = b->sum * 31 + p[i];
	b->got += n;
	if (n > b->max_data)
		b->max_data = n;
	return 0;
}

static int big_end(void *ud, sbx_err *err)
{
	(void)err;
	((struct big *)ud)->ends++;
	return 0;
}

/* The data: bytes that often begin the delimiter (CR, LF, '-' and the
 * boundary's letters), made again from the same seed. */
static uint8_t gen(uint64_t *s)
{
	static const uint8_t alpha[] = "\r\n-XyZ\r\n--XyZ-ab";
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return alpha[(*s >> 33) % (sizeof(alpha) - 1)];
}

static void test_big_part(void **unused)
{
	(void)unused;
	const sup_multipart_cbs bc = { .on_part = big_part, .on_data = big_data, .on_part_end = big_end };
	struct big b = { 0 };
	sbx_err e;
	sup_multipart *m = sup_multipart_new(CT, 1, &bc, &b, &e);
	assert_non_null(m);
	const char *head = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/home/user/big.bin\"\r\n"
			   "Content-Type: application/octet-stream\r\n\r\n";
	assert_int_equal(sup_multipart_feed(m, (const uint8_t *)head, strlen(head), &e), (ssize_t)strlen(head));
	const uint64_t total = 64ull << 20;
	uint8_t piece[65521]; /* a prime: the pieces' ends wander */
	uint64_t seed = 42, sum = 0, sent = 0;
	while (sent < total) {
		size_t n = total - sent < sizeof(piece) ? (size_t)(total - sent) : sizeof(piece);
		for (size_t i = 0; i < n; i++)
			piece[i] = gen(&seed);
		/* break any "\r\n--XyZ" followed by a delimiter's end byte */
		for (size_t i = 0; i + 7 < n; i++)
			if (memcmp(piece + i, "\r\n--XyZ", 7) == 0)
				piece[i + 7] = 'a';
		/* across the pieces' ends: keep the last 8 bytes free of '\r' */
		for (size_t i = n > 8 ? n - 8 : 0; i < n; i++)
			if (piece[i] == '\r')
				piece[i] = 'b';
		for (size_t i = 0; i < n; i++)
			sum = sum * 31 + piece[i];
		b.max_data = 0;
		assert_int_equal(sup_multipart_feed(m, piece, n, &e), (ssize_t)n);
		assert_true(b.max_data <= n + 75);
		sent += n;
	}
	const char *tail = "\r\n--XyZ--\r\n";
	assert_int_equal(sup_multipart_feed(m, (const uint8_t *)tail, strlen(tail), &e), (ssize_t)strlen(tail));
	assert_int_equal(sup_multipart_finish(m, &e), 0);
	assert_int_equal(b.parts, 1);
	assert_int_equal(b.ends, 1);
	assert_int_equal(b.got, total);
	assert_true(b.sum == sum);
	sup_multipart_free(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_boundary),     cmocka_unit_test(test_two_files),
		cmocka_unit_test(test_osbx_shape),   cmocka_unit_test(test_crlf_edges),
		cmocka_unit_test(test_filenames),    cmocka_unit_test(test_bad),
		cmocka_unit_test(test_bounds),       cmocka_unit_test(test_callback_error),
		cmocka_unit_test(test_pause_points), cmocka_unit_test(test_big_part),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
