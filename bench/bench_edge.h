/* The HTTP edge under load, for the benchmark harness: requests/s of many
 * keep-alive clients (wrk, from Debian) on one URL, and many idle
 * keep-alive connections held open (each after one request). */
#ifndef BENCH_EDGE_H
#define BENCH_EDGE_H

#include <stdbool.h>
#include <sys/types.h>

/* wrk with conns connections for secs seconds on url (with the bearer
 * token): requests/s, *p50_ms its median latency; -1 on failure. */
double bench_wrk(const char *url, const char *token, int conns, int secs, double *p50_ms);

/* n connections to 127.0.0.1:port, each answered one GET /healthz and then
 * held; returns how many are held (close them with bench_idle_close). */
int bench_idle_open(int port, int n, int **fds);
void bench_idle_close(int *fds, int n);
/* VmRSS of pid in KiB, -1 on error. */
long bench_rss_kb(pid_t pid);

#endif
