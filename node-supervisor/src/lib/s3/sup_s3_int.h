/* sup_s3's inside, shared by its files: the store's settings, one request
 * with its retries and errors (sup_s3_req.c), and the names it builds.
 * Not for other modules: they use sup_s3.h. */
#ifndef SUP_S3_INT_H
#define SUP_S3_INT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sup_s3.h"
#include "sup_s3_xml.h"

#define SUP_S3_URL_MAX 4096
#define SUP_S3_ERRBODY_MAX (64u << 10) /* error bodies read past this are dropped */

struct sup_s3 {
	CURL *curl;
	char bucket[64];   /* S3: 3..63 */
	char prefix[SUP_S3_KEY_MAX]; /* "" or "p/q/" (ends in '/') */
	char base[1024];   /* "http://h:p/bucket" or "https://bucket.s3.R.amazonaws.com" */
	char region[64];
	char sigv4[128];   /* "aws:amz:REGION:s3" */
	char *key_id, *secret, *token;
	struct curl_slist *hdrs; /* the headers every request carries */
	sup_s3_opts o;     /* defaults applied */
};

/* What one request sends and does with its answer. */
typedef struct sup_s3_req {
	const char *method;  /* GET PUT POST DELETE HEAD */
	const char *what;    /* the step, for errors: "upload part 3 of 5" */
	const char *key;     /* the object's key relative to the prefix, or NULL: the bucket */
	const char *query;   /* canonical (sorted, encoded) query or NULL */
	bool idempotent;     /* may be sent again after a 5xx or a cut connection */
	const char *body;    /* PUT/POST body (NULL: none) */
	size_t body_len;
	/* A 2xx answer's body, chunk by chunk (NULL: dropped); a negative
	 * return fails the request with it. */
	int (*sink)(void *ud, const char *p, size_t n, sbx_err *err);
	void *sink_ud;
	/* A retried GET resumes at this offset (the sink advances it). */
	uint64_t *resume_at;
	/* out */
	long status;
	uint64_t length;     /* Content-Length of the answer (HEAD) */
	char etag[128];
} sup_s3_req;

/* Send r, with retries; 0 for a 2xx, else a negative errno with err naming
 * the step, the key, the status and S3's error code and message:
 * 404 -ENOENT, 403 -EACCES, 400 -EINVAL, timeouts -ETIMEDOUT, a store that
 * cannot be reached -ECONNREFUSED, everything else -EIO. */
int sup_s3_req_run(sup_s3 *s, sup_s3_req *r, sbx_err *err);

/* Append a header line to a curl list; false when out of memory (the list
 * is left as it was). */
bool sup_s3_hdr_add(struct curl_slist **list, const char *line);

/* S3's URI encoding (unreserved A-Za-z0-9-._~ kept, the rest %XX), '/'
 * kept when keep_slash (object paths) and encoded otherwise (query values).
 * -ENAMETOOLONG if out is too small. */
int sup_s3_uri_encode(char *out, size_t cap, const char *in, bool keep_slash);

/* Split "s3://bucket[/prefix]" into bucket and the prefix ("" or ending
 * in '/'), checking S3's bucket naming rules. */
int sup_s3_parse_url(const char *url, char *bucket, size_t bcap, char *prefix, size_t pcap,
		     sbx_err *err);

/* A caller's key: non-empty, no control bytes, and the whole key (prefix
 * included) within SUP_S3_KEY_MAX. */
int sup_s3_check_key(const sup_s3 *s, const char *key, sbx_err *err);

/* A listing read page by page (ListObjectsV2, ListMultipartUploads): each
 * page's query is query()'s (malloc'd, in SigV4's canonical order, with the
 * markers the last page left in ud), its XML goes to el as it arrives, and
 * more() tells after it whether another page follows (1), the listing is
 * done (0) or failed (< 0). A non-zero *stopped (set by el: the caller's
 * callback said stop) ends the listing with that value. */
typedef struct sup_s3_pager {
	const char *step;  /* "list", "list uploads": errors name it */
	const char *where; /* the listed prefix below the store's */
	int (*query)(void *ud, char **out);
	sup_s3_xml_fn el;
	int (*more)(void *ud, unsigned page, sbx_err *err);
	const int *stopped;
	void *ud;
} sup_s3_pager;
int sup_s3_pages(sup_s3 *s, const sup_s3_pager *p, sbx_err *err);

/* The store's prefix and prefix as a query value (URI-encoded) into enc. */
int sup_s3_prefix_query(const sup_s3 *s, const char *prefix, char *enc, size_t cap, sbx_err *err);

/* key relative to the store's prefix, or NULL: a key outside it (skipped,
 * not trusted) or none. */
const char *sup_s3_unprefixed(const sup_s3 *s, const char *key);

/* S3's times ("2026-12-02T05:20:00.000Z", ISO 8601 in UTC) in seconds
 * since the epoch; -1 for anything else. */
int64_t sup_s3_iso_time(const char *text);

#endif
