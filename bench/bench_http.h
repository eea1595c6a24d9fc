/* A keep-alive HTTP client (libcurl) for the benchmark harness: one handle,
 * reused, so a sample measures a request, not a TCP handshake. */
#ifndef BENCH_HTTP_H
#define BENCH_HTTP_H

#include <stddef.h>

typedef struct bench_http bench_http;

bench_http *bench_http_new(const char *base_url, const char *token);
void bench_http_free(bench_http *h);
/* Returns the HTTP status (or -1 on transport failure); the body is kept
 * until the next call (bench_http_body). body may be NULL. */
long bench_http_do(bench_http *h, const char *method, const char *path, const char *body);
const char *bench_http_body(const bench_http *h);
/* POST body to path asking for an SSE answer and read it to the end without
 * keeping it: *bytes gets the body length, tail (size >= 2) its last bytes
 * as a string. Returns the HTTP status or -1. */
long bench_http_stream(bench_http *h, const char *path, const char *body, size_t *bytes,
		       char *tail, size_t tail_size);
/* PUT bytes zero bytes to path (a streamed upload); the answer is kept
 * (bench_http_body). Returns the HTTP status or -1. */
long bench_http_upload(bench_http *h, const char *path, size_t bytes);
/* GET path, counting the body (*bytes) without keeping it. */
long bench_http_download(bench_http *h, const char *path, size_t *bytes);

#endif
