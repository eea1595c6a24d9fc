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

#endif
