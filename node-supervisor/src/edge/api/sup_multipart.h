/* A streaming multipart/form-data parser (RFC 7578 over RFC 2046), what
 * the families' uploads share (OpenSandbox's "metadata" + "file" parts,
 * E2B's POST /files with a part per file). Fed a body in pieces of any
 * size, it calls back with each part's headers, with each run of a part's
 * bytes as they come, and at each part's end. It holds one part's header
 * block and nothing of a part's data: bytes that may still begin a
 * delimiter are kept as a count of the delimiter's bytes they equal, so a
 * part of any size streams through bounded memory. Every bound is one of
 * the constants below or the caller's max_parts; bad input is -EINVAL with
 * a message naming what was wrong, never more memory.
 * Pure: bytes in, callbacks out; no I/O, no event loop, no part names of
 * any family (the callers decide what a part means). */
#ifndef SUP_MULTIPART_H
#define SUP_MULTIPART_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sbx/err.h"

#define SUP_MULTIPART_BOUNDARY_MAX 70   /* RFC 2046's bound on a boundary */
#define SUP_MULTIPART_HEAD_MAX 8192     /* a part's header block, its CRLF CRLF included */
#define SUP_MULTIPART_PREAMBLE_MAX 8192 /* bytes before the first delimiter */
#define SUP_MULTIPART_PAD_MAX 64        /* blanks after a delimiter, before its CRLF */
#define SUP_MULTIPART_CTYPE_MAX 1024    /* the request's Content-Type */
#define SUP_MULTIPART_PARTS_MAX 4096    /* the most max_parts may be */

/* What on_part and on_part_end return to stop the parse right after their
 * event: sup_multipart_feed then returns the bytes consumed so far (the
 * event's bytes included), and the caller feeds the rest when it is ready. */
#define SUP_MULTIPART_PAUSE 1

/* One part's headers, valid during on_part only. Each string is decoded
 * (a quoted-string's escapes, filename*'s UTF-8 percent-encoding),
 * NUL-terminated and holds no NUL, CR or LF; NULL when the part has none. */
typedef struct sup_multipart_part {
	unsigned index;           /* 0 for the first part */
	const char *name;         /* Content-Disposition: form-data; name= */
	const char *filename;     /* its filename= (filename* when both are given) */
	const char *content_type; /* the part's Content-Type, as written */
} sup_multipart_part;

/* Each returns 0 to go on or < 0 with err set to fail the parse (the
 * error comes back from sup_multipart_feed); on_part and on_part_end may
 * also return SUP_MULTIPART_PAUSE. on_data's bytes are the caller's to
 * copy: they are valid during the call only. None of them may call the
 * parser. */
typedef struct sup_multipart_cbs {
	int (*on_part)(const sup_multipart_part *part, void *ud, sbx_err *err);
	int (*on_data)(const uint8_t *p, size_t n, void *ud, sbx_err *err);
	int (*on_part_end)(void *ud, sbx_err *err);
} sup_multipart_cbs;

typedef struct sup_multipart sup_multipart;

/* The boundary of a request's Content-Type ("multipart/form-data;
 * boundary=..." or boundary="...", any case, other parameters allowed) into
 * out (NUL-terminated; size > SUP_MULTIPART_BOUNDARY_MAX): its length, or
 * -EINVAL when the type is another, the boundary is missing, empty, over
 * SUP_MULTIPART_BOUNDARY_MAX or not of RFC 2046's characters. */
int sup_multipart_boundary(const char *content_type, char *out, size_t size, sbx_err *err);
/* A parser for a body of that Content-Type, with at most max_parts parts
 * (1..SUP_MULTIPART_PARTS_MAX): NULL with err (-EINVAL, -ENOMEM). */
sup_multipart *sup_multipart_new(const char *content_type, unsigned max_parts,
				 const sup_multipart_cbs *cbs, void *ud, sbx_err *err);
void sup_multipart_free(sup_multipart *m);
/* The next n bytes of the body: how many were consumed (n, or fewer when a
 * callback paused), or < 0 with err: -EINVAL for bad input, or what a
 * callback returned. Each call hands on_data at most n + 75 bytes (n and
 * what it held of a possible delimiter). After an error every call returns
 * it again. Bytes after the closing delimiter (the epilogue) are consumed
 * and ignored. */
ssize_t sup_multipart_feed(sup_multipart *m, const uint8_t *p, size_t n, sbx_err *err);
/* The body ended: 0 when its closing delimiter was seen, else -EINVAL
 * saying where it stopped (or the error the parse had). */
int sup_multipart_finish(sup_multipart *m, sbx_err *err);
/* The closing delimiter was seen. */
bool sup_multipart_done(const sup_multipart *m);
/* Parts begun so far. */
unsigned sup_multipart_count(const sup_multipart *m);

#endif
