/* sup_s3_put: an fd's bytes into one object: a single PUT under the part
 * size, else a multipart upload, one part in memory at a time, aborted on
 * any failure (sup_s3.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/grow.h"
#include "sup_s3_int.h"
#include "sup_s3_xml.h"

#define PARTS_MAX 10000 /* S3's bound on one upload's parts */
#define ETAG_MAX 128

/* Fill buf from fd: fewer than cap bytes only at its end. */
static ssize_t read_full(int fd, char *buf, size_t cap)
{
	size_t got = 0;
	while (got < cap) {
		ssize_t n = read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* What the multipart calls answer: an upload id, or (CompleteMultipartUpload
 * answers 200 and may still fail) an <Error>. */
typedef struct mp_answer {
	sup_s3_xml *x;
	char upload_id[1024];
	char code[64];
	char msg[200];
	bool error;
} mp_answer;

static int mp_el(void *ud, const char *path, const char *text, size_t len)
{
	mp_answer *m = ud;
	if (strcmp(path, "InitiateMultipartUploadResult/UploadId") == 0) {
		if (len >= sizeof(m->upload_id))
			return -E2BIG;
		memcpy(m->upload_id, text, len + 1);
	} else if (strcmp(path, "Error") == 0) {
		m->error = true;
	} else if (strcmp(path, "Error/Code") == 0) {
		snprintf(m->code, sizeof(m->code), "%s", text);
	} else if (strcmp(path, "Error/Message") == 0) {
		snprintf(m->msg, sizeof(m->msg), "%s", text);
	}
	return 0;
}

static int mp_sink(void *ud, const char *p, size_t n, sbx_err *err)
{
	mp_answer *m = ud;
	return sup_s3_xml_feed(m->x, p, n, false, err);
}

/* A POST of the multipart family, its XML answer read into *m. */
static int mp_post(sup_s3 *s, const char *key, const char *what, const char *query, const char *body,
		   size_t body_len, mp_answer *m, sbx_err *err)
{
	int rc = sup_s3_xml_new(mp_el, m, &m->x, err);
	if (rc < 0)
		return rc;
	sup_s3_req r = {.method = "POST", .what = what, .key = key, .query = query,
			.body = body, .body_len = body_len, .sink = mp_sink, .sink_ud = m};
	rc = sup_s3_req_run(s, &r, err);
	if (rc == 0)
		rc = sup_s3_xml_feed(m->x, "", 0, true, err);
	if (rc < 0 && r.status >= 200 && r.status < 300)
		sbx_err_wrap(err, "%s %s: answer", what, key);
	sup_s3_xml_free(m->x);
	m->x = NULL;
	if (rc == 0 && m->error)
		rc = sbx_err_set(err, -EIO, "%s %s: HTTP %ld %s: %s", what, key, r.status, m->code, m->msg);
	return rc;
}

typedef struct upload {
	sup_s3 *s;
	const char *key;
	const char *id;           /* the upload's, as the store gave it */
	char id_enc[3 * 1024 + 1];
	char (*etags)[ETAG_MAX]; /* grown as parts go, to PARTS_MAX */
	size_t nparts, cap;
} upload;

static int upload_part(upload *u, const char *buf, size_t len, sbx_err *err)
{
	int rc = sbx_grow(&u->etags, &u->cap, u->nparts, ETAG_MAX, 64, PARTS_MAX);
	if (rc == -ENOSPC)
		return sbx_err_set(err, -EFBIG, "put %s: more than %d parts of %" PRIu64 " bytes", u->key,
				   PARTS_MAX, u->s->o.part_size);
	if (rc < 0)
		return sbx_err_set(err, rc, "put %s: part list", u->key);
	unsigned no = (unsigned)u->nparts + 1;
	SBX_AUTO_FREE char *query = NULL;
	if (asprintf(&query, "partNumber=%u&uploadId=%s", no, u->id_enc) < 0)
		return sbx_err_set(err, -ENOMEM, "put %s", u->key);
	char what[48];
	snprintf(what, sizeof(what), "upload part %u of", no);
	/* A part is sent whole again after a cut: S3 keeps the last one. */
	sup_s3_req r = {.method = "PUT", .what = what, .key = u->key, .query = query,
			.idempotent = true, .body = buf, .body_len = len};
	rc = sup_s3_req_run(u->s, &r, err);
	if (rc < 0)
		return rc;
	/* The ETag goes back into the completion's XML: S3's is hex in quotes. */
	size_t el = strlen(r.etag);
	if (el == 0 || strspn(r.etag, "\"0123456789abcdefABCDEF-") != el)
		return sbx_err_set(err, -EPROTO, "%s %s: ETag %s is not S3's", what, u->key,
				   el ? r.etag : "(none)");
	memcpy(u->etags[u->nparts++], r.etag, el + 1);
	return 0;
}

static int complete(upload *u, sbx_err *err)
{
	/* Each part's element is < 100 + ETAG_MAX bytes. */
	size_t cap = 128 + (size_t)u->nparts * (100 + ETAG_MAX);
	SBX_AUTO_FREE char *body = malloc(cap);
	if (!body)
		return sbx_err_set(err, -ENOMEM, "put %s: completion", u->key);
	size_t len = (size_t)snprintf(body, cap, "<CompleteMultipartUpload>");
	for (size_t i = 0; i < u->nparts; i++)
		len += (size_t)snprintf(body + len, cap - len,
					"<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>", i + 1, u->etags[i]);
	len += (size_t)snprintf(body + len, cap - len, "</CompleteMultipartUpload>");
	SBX_AUTO_FREE char *query = NULL;
	if (asprintf(&query, "uploadId=%s", u->id_enc) < 0)
		return sbx_err_set(err, -ENOMEM, "put %s", u->key);
	mp_answer m = {0};
	return mp_post(u->s, u->key, "complete upload of", query, body, len, &m, err);
}

/* Nothing half-written stays: the parts go with the upload. The first
 * failure is what the caller hears; the abort's own is added to it. */
static void abort_upload(upload *u, sbx_err *err)
{
	sbx_err aerr;
	sbx_err_clear(&aerr);
	if (sup_s3_abort_upload(u->s, u->key, u->id, &aerr) < 0 && err) {
		size_t n = strlen(err->msg);
		snprintf(err->msg + n, sizeof(err->msg) - n, " (and %s)", aerr.msg);
	}
}

static int put_multipart(sup_s3 *s, const char *key, int fd, char *buf, size_t first, sbx_err *err)
{
	mp_answer m = {0};
	int rc = mp_post(s, key, "start upload of", "uploads=", NULL, 0, &m, err);
	if (rc < 0)
		return rc;
	if (!m.upload_id[0])
		return sbx_err_set(err, -EPROTO, "start upload of %s: no UploadId in the answer", key);
	upload u = {.s = s, .key = key, .id = m.upload_id};
	if (sup_s3_uri_encode(u.id_enc, sizeof(u.id_enc), m.upload_id, false) < 0)
		return sbx_err_set(err, -EPROTO, "start upload of %s: UploadId too long", key);
	size_t len = first;
	for (;;) {
		rc = upload_part(&u, buf, len, err);
		if (rc < 0)
			break;
		ssize_t n = read_full(fd, buf, s->o.part_size);
		if (n < 0) {
			rc = sbx_err_sys(err, (int)n, "put %s: read part %zu", key, u.nparts + 1);
			break;
		}
		if (n == 0)
			break;
		len = (size_t)n;
	}
	if (rc == 0)
		rc = complete(&u, err);
	if (rc < 0)
		abort_upload(&u, err);
	free(u.etags);
	return rc;
}

int sup_s3_put_fd(sup_s3 *s, const char *key, int fd, sbx_err *err)
{
	int rc = sup_s3_check_key(s, key, err);
	if (rc < 0)
		return rc;
	SBX_AUTO_FREE char *buf = malloc(s->o.part_size);
	if (!buf)
		return sbx_err_set(err, -ENOMEM, "put %s: a part's buffer", key);
	ssize_t n = read_full(fd, buf, s->o.part_size);
	if (n < 0)
		return sbx_err_sys(err, (int)n, "put %s: read", key);
	if ((uint64_t)n < s->o.part_size) {
		sup_s3_req r = {.method = "PUT", .what = "put", .key = key, .idempotent = true,
				.body = buf, .body_len = (size_t)n};
		return sup_s3_req_run(s, &r, err);
	}
	return put_multipart(s, key, fd, buf, (size_t)n, err);
}

int sup_s3_put_buf(sup_s3 *s, const char *key, const void *buf, size_t len, sbx_err *err)
{
	int rc = sup_s3_check_key(s, key, err);
	if (rc < 0)
		return rc;
	if (len > s->o.part_size)
		return sbx_err_set(err, -E2BIG, "put %s: %zu bytes, over one part", key, len);
	sup_s3_req r = {.method = "PUT", .what = "put", .key = key, .idempotent = true,
			.body = buf, .body_len = len};
	return sup_s3_req_run(s, &r, err);
}
