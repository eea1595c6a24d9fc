/* S3-compatible object storage: the client the snapshot store writes
 * through. Objects are named by keys below the store's prefix
 * (s3://bucket/prefix); bytes come from and go to file descriptors.
 *
 * Blocking: every call makes network round trips (each bounded by the
 * connect and low-speed timeouts below, retried with backoff where the step
 * is idempotent), so callers run it on a worker thread, never on the event
 * loop. One sup_s3 is used by one thread at a time (it owns one curl handle
 * and its connection); open one per worker.
 *
 * Owns its curl handle, the credentials read at open, and at most one
 * part-sized buffer during a put (memory stays bounded by the part size,
 * whatever the object's size). Signing is libcurl's own AWS SigV4
 * (CURLOPT_AWS_SIGV4), payloads sent UNSIGNED-PAYLOAD. It must not know
 * snapshots, archives or the catalog (keys and bytes only), and must not
 * log: every failure comes back as an sbx_err naming the step, the key and
 * the HTTP status with S3's error code. */
#ifndef SUP_S3_H
#define SUP_S3_H

#include <stdint.h>

#include "sbx/err.h"

/* S3's limits for multipart uploads: every part but the last at least
 * 5 MiB; we cap a part at 512 MiB (it is held in memory once). */
#define SUP_S3_PART_MIN (5ull << 20)
#define SUP_S3_PART_MAX (512ull << 20)
#define SUP_S3_PART_DEFAULT (8ull << 20)
#define SUP_S3_KEY_MAX 1024 /* bytes of a whole key, prefix included (S3's bound) */

typedef struct sup_s3 sup_s3;

/* Every field may be 0/NULL: its default (in parentheses) applies. */
typedef struct sup_s3_opts {
	/* "http://127.0.0.1:4568": the store's base URL, addressed path-style
	 * (http://host/bucket/key). NULL: $AWS_ENDPOINT_URL_S3, then
	 * $AWS_ENDPOINT_URL (path-style too), else AWS itself
	 * (https://bucket.s3.REGION.amazonaws.com, virtual-hosted). */
	const char *endpoint;
	/* NULL: $AWS_REGION, then $AWS_DEFAULT_REGION (us-east-1). */
	const char *region;
	/* Bytes per part of a multipart upload, and the size below which a put
	 * is one PUT (SUP_S3_PART_DEFAULT; SUP_S3_PART_MIN..SUP_S3_PART_MAX). */
	uint64_t part_size;
	unsigned connect_timeout_ms; /* TCP (and TLS) connect (5000) */
	/* A transfer moving under 1 KiB/s for this long fails (15); curl
	 * averages over its last 5 s, so a stall right after a burst ends
	 * up to ~6 s later than this. */
	unsigned low_speed_s;
	/* Further attempts of an idempotent step after a 5xx, a 429 or a
	 * connection error, backing off 250 ms, doubling (3). */
	unsigned retries;
	unsigned list_page; /* keys per ListObjectsV2 page (1000) */
} sup_s3_opts;

/* Open the store at url ("s3://bucket" or "s3://bucket/prefix"). Credentials
 * are $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY (both required), and
 * $AWS_SESSION_TOKEN if set. Makes no request (sup_s3_check does). */
int sup_s3_open(const char *url, const sup_s3_opts *opts, sup_s3 **out, sbx_err *err);
void sup_s3_close(sup_s3 *s);

/* The store answers and these credentials may list the bucket under the
 * prefix (a ListObjectsV2 of one key, whose refusal carries S3's code).
 * 404 (NoSuchBucket) -> -ENOENT, 403 -> -EACCES. */
int sup_s3_check(sup_s3 *s, sbx_err *err);

/* Store what fd holds from its current offset to its end under key (a file
 * or a pipe): one PUT if it is under the part size, else a multipart upload
 * reading one part at a time. On any failure a started multipart upload is
 * aborted, so no object appears under key; an object already there stays. */
int sup_s3_put_fd(sup_s3 *s, const char *key, int fd, sbx_err *err);

/* Write the object's bytes to fd (a file or a pipe). 404 -> -ENOENT. A
 * transfer cut part way is resumed with a Range request where it stopped. */
int sup_s3_get_fd(sup_s3 *s, const char *key, int fd, sbx_err *err);

/* A small object (at most one part) from memory, in one PUT. */
int sup_s3_put_buf(sup_s3 *s, const char *key, const void *buf, size_t len, sbx_err *err);

/* A small object into buf: *len its bytes; one over cap bytes -> -E2BIG,
 * 404 -> -ENOENT. */
int sup_s3_get_buf(sup_s3 *s, const char *key, char *buf, size_t cap, size_t *len, sbx_err *err);

/* The object's size in *size (may be NULL). 404 -> -ENOENT. */
int sup_s3_head(sup_s3 *s, const char *key, uint64_t *size, sbx_err *err);

/* Remove the object; a missing one is not an error (S3 answers 204). */
int sup_s3_delete(sup_s3 *s, const char *key, sbx_err *err);

/* Called per object, keys relative to the store's prefix, in S3's order,
 * with its size and LastModified (seconds since the epoch by the store's
 * clock; -1 when it gave none or none that reads as a time). A non-zero
 * return stops the listing and becomes sup_s3_list's. */
typedef int (*sup_s3_list_fn)(void *ud, const char *key, uint64_t size, int64_t mtime);

/* Every object whose key starts with prefix ("" or NULL: all), page by page
 * (ListObjectsV2 with continuation tokens). */
int sup_s3_list(sup_s3 *s, const char *prefix, sup_s3_list_fn fn, void *ud, sbx_err *err);

/* Called per unfinished multipart upload: its key relative to the store's
 * prefix, its upload id and when it was initiated (seconds since the epoch
 * by the store's clock, -1 when it gave none). A non-zero return stops the
 * listing and becomes sup_s3_list_uploads'. */
typedef int (*sup_s3_upload_fn)(void *ud, const char *key, const char *upload_id,
				int64_t initiated);

/* Every multipart upload started and neither completed nor aborted whose
 * key starts with prefix (ListMultipartUploads, page by page). A store
 * that does not offer the call (501 NotImplemented) -> -EOPNOTSUPP. */
int sup_s3_list_uploads(sup_s3 *s, const char *prefix, sup_s3_upload_fn fn, void *ud,
			sbx_err *err);

/* Abort that upload: its parts are freed and it never becomes an object
 * (AbortMultipartUpload). One gone already (404 NoSuchUpload) is not an
 * error. */
int sup_s3_abort_upload(sup_s3 *s, const char *key, const char *upload_id, sbx_err *err);

#endif
