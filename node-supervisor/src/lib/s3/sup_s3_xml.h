/* The XML S3 answers with (ListObjectsV2 pages, errors, multipart uploads),
 * read as it arrives: a push parser (expat) fed chunk by chunk, telling its
 * caller each element's path and text at the element's end.
 *
 * Owns the parser and two bounded buffers (the element path and one
 * element's text): a document of any length is read in bounded memory, and
 * one whose path or text is longer than these bounds, or that declares a
 * DOCTYPE (entities), is refused. It must not know what the elements mean
 * (sup_s3 does). */
#ifndef SUP_S3_XML_H
#define SUP_S3_XML_H

#include <stdbool.h>
#include <stddef.h>

#include "sbx/err.h"

#define SUP_S3_XML_PATH_MAX 256  /* "ListBucketResult/Contents/Key" */
#define SUP_S3_XML_TEXT_MAX 4096 /* one element's text (a key is <= 1024) */

typedef struct sup_s3_xml sup_s3_xml;

/* At each element's end: path from the root ("Error/Code"), its own text
 * (NUL-terminated, len bytes; whitespace between children for a parent).
 * A negative return stops the parse and becomes the feed's result. */
typedef int (*sup_s3_xml_fn)(void *ud, const char *path, const char *text, size_t len);

int sup_s3_xml_new(sup_s3_xml_fn fn, void *ud, sup_s3_xml **out, sbx_err *err);
void sup_s3_xml_free(sup_s3_xml *x);

/* Feed the next len bytes; last: the document ends here. Once a feed failed
 * every later one fails the same way. */
int sup_s3_xml_feed(sup_s3_xml *x, const char *data, size_t len, bool last, sbx_err *err);

#endif
