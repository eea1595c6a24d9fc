/* sup_s3_uploads: the multipart uploads a store holds unfinished
 * (ListMultipartUploads, page by page) and their abort
 * (AbortMultipartUpload): what a sweep needs to remove the parts of an
 * upload whose writer died (sup_s3.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sup_s3_int.h"

#define UPLOAD_ID_MAX 1024 /* bytes of an upload id we accept */

typedef struct uploads_page {
	sup_s3 *s;
	sup_s3_upload_fn fn;
	void *ud;
	int user_rc;
	const char *enc_prefix;
	/* the upload being read */
	char key[SUP_S3_KEY_MAX + 1];
	char id[UPLOAD_ID_MAX];
	int64_t initiated;
	bool have_key, have_id;
	/* where the next page starts */
	bool truncated;
	char next_key[SUP_S3_KEY_MAX + 1];
	char next_id[UPLOAD_ID_MAX];
} uploads_page;

#define EL "ListMultipartUploadsResult/"

static int uploads_el(void *ud, const char *path, const char *text, size_t len)
{
	uploads_page *up = ud;
	if (strncmp(path, EL, strlen(EL)) != 0)
		return 0;
	const char *el = path + strlen(EL);
	if (strcmp(el, "Upload/Key") == 0) {
		if (len > SUP_S3_KEY_MAX)
			return -ENAMETOOLONG;
		memcpy(up->key, text, len + 1);
		up->have_key = true;
	} else if (strcmp(el, "Upload/UploadId") == 0) {
		if (len >= sizeof(up->id))
			return -E2BIG;
		memcpy(up->id, text, len + 1);
		up->have_id = len > 0;
	} else if (strcmp(el, "Upload/Initiated") == 0) {
		up->initiated = sup_s3_iso_time(text);
	} else if (strcmp(el, "Upload") == 0) {
		const char *rel = sup_s3_unprefixed(up->s, up->have_key ? up->key : NULL);
		if (rel && up->have_id) {
			int rc = up->fn(up->ud, rel, up->id, up->initiated);
			if (rc != 0) {
				up->user_rc = rc;
				return -ECANCELED;
			}
		}
		up->have_key = up->have_id = false;
		up->initiated = -1;
	} else if (strcmp(el, "IsTruncated") == 0) {
		up->truncated = len == 4 && strcmp(text, "true") == 0;
	} else if (strcmp(el, "NextKeyMarker") == 0) {
		if (len > SUP_S3_KEY_MAX)
			return -ENAMETOOLONG;
		memcpy(up->next_key, text, len + 1);
	} else if (strcmp(el, "NextUploadIdMarker") == 0) {
		if (len >= sizeof(up->next_id))
			return -E2BIG;
		memcpy(up->next_id, text, len + 1);
	}
	return 0;
}

static int uploads_query(void *ud, char **q)
{
	uploads_page *up = ud;
	char enc_key[3 * SUP_S3_KEY_MAX + 1], enc_id[3 * UPLOAD_ID_MAX + 1];
	enc_key[0] = enc_id[0] = '\0';
	if ((up->next_key[0] && sup_s3_uri_encode(enc_key, sizeof(enc_key), up->next_key, false) < 0) ||
	    (up->next_id[0] && sup_s3_uri_encode(enc_id, sizeof(enc_id), up->next_id, false) < 0))
		return -EPROTO;
	up->truncated = false;
	up->next_key[0] = up->next_id[0] = '\0';
	/* SigV4's canonical order (libcurl signs the query as written):
	 * key-marker, max-uploads, prefix, upload-id-marker, uploads */
	if (asprintf(q, "%s%s%smax-uploads=%u&prefix=%s%s%s&uploads=",
		     enc_key[0] ? "key-marker=" : "", enc_key, enc_key[0] ? "&" : "",
		     up->s->o.list_page, up->enc_prefix, enc_id[0] ? "&upload-id-marker=" : "",
		     enc_id) < 0)
		return -ENOMEM;
	return 0;
}

static int uploads_more(void *ud, unsigned page, sbx_err *err)
{
	uploads_page *up = ud;
	if (!up->truncated)
		return 0;
	if (!up->next_key[0])
		return sbx_err_set(err, -EPROTO, "list uploads: page %u truncated without a key marker",
				   page);
	return 1;
}

int sup_s3_list_uploads(sup_s3 *s, const char *prefix, sup_s3_upload_fn fn, void *ud, sbx_err *err)
{
	char enc_prefix[3 * SUP_S3_KEY_MAX + 1];
	SBX_AUTO_FREE uploads_page *up = calloc(1, sizeof(*up));
	if (!up)
		return sbx_err_set(err, -ENOMEM, "list uploads");
	prefix = prefix ? prefix : "";
	if (sup_s3_prefix_query(s, prefix, enc_prefix, sizeof(enc_prefix), err) < 0)
		return sbx_err_wrap(err, "list uploads");
	up->s = s;
	up->fn = fn;
	up->ud = ud;
	up->initiated = -1;
	up->enc_prefix = enc_prefix;
	sup_s3_pager p = {.step = "list uploads", .where = prefix, .query = uploads_query,
			  .el = uploads_el, .more = uploads_more, .stopped = &up->user_rc, .ud = up};
	return sup_s3_pages(s, &p, err);
}

int sup_s3_abort_upload(sup_s3 *s, const char *key, const char *upload_id, sbx_err *err)
{
	int rc = sup_s3_check_key(s, key, err);
	if (rc < 0)
		return rc;
	char enc[3 * UPLOAD_ID_MAX + 1];
	if (!upload_id[0] || sup_s3_uri_encode(enc, sizeof(enc), upload_id, false) < 0)
		return sbx_err_set(err, -EINVAL, "abort upload of %s: not an upload id", key);
	SBX_AUTO_FREE char *query = NULL;
	if (asprintf(&query, "uploadId=%s", enc) < 0)
		return sbx_err_set(err, -ENOMEM, "abort upload of %s", key);
	sup_s3_req r = {.method = "DELETE", .what = "abort upload of", .key = key, .query = query,
			.idempotent = true};
	rc = sup_s3_req_run(s, &r, err);
	/* NoSuchUpload: aborted or completed meanwhile, nothing left of it */
	return rc == -ENOENT ? 0 : rc;
}
