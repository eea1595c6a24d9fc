/* Process helpers for the benchmark harness: run a program and wait (the
 * posix_spawn floor and `runc exec`), start and stop a supervisor. */
#ifndef BENCH_PROC_H
#define BENCH_PROC_H

#include <sys/types.h>

/* posix_spawn argv (PATH lookup) with stdio on /dev/null, wait; returns the
 * wait status or -1. */
int bench_spawn_wait(char *const argv[]);
/* posix_spawn argv with feed zero bytes written to its stdin (feed > 0),
 * or its stdout read to the end and counted in *got (feed 0); the other
 * stdio on /dev/null. Returns the wait status or -1. The peer of the file
 * transfers: `runc exec` with the bytes through its stdio. */
int bench_spawn_io(char *const argv[], size_t feed, size_t *got);
/* Start argv in the background with stdout/stderr appended to log_path. */
pid_t bench_spawn_bg(char *const argv[], const char *log_path);
/* sig (SIGTERM for most; a supervisor's destroying stop is SIGINT), wait
 * up to timeout_ms, then SIGKILL. */
void bench_stop(pid_t pid, int sig, int timeout_ms);
/* A child holding a new, empty network namespace (/proc/<pid>/ns/net)
 * until bench_stop, or until the bench itself dies (it gets SIGKILL then):
 * nothing named is made, so nothing is left behind. -1 on error. */
pid_t bench_netns_holder(void);
/* A free TCP port on 127.0.0.1 (bound and released). */
int bench_free_port(void);

#endif
