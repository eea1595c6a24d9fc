/* Process helpers for the benchmark harness: run a program and wait (the
 * posix_spawn floor and `runc exec`), start and stop a supervisor. */
#ifndef BENCH_PROC_H
#define BENCH_PROC_H

#include <sys/types.h>

/* posix_spawn argv (PATH lookup) with stdio on /dev/null, wait; returns the
 * wait status or -1. */
int bench_spawn_wait(char *const argv[]);
/* Start argv in the background with stdout/stderr appended to log_path. */
pid_t bench_spawn_bg(char *const argv[], const char *log_path);
/* SIGTERM, wait up to timeout_ms, then SIGKILL. */
void bench_stop(pid_t pid, int timeout_ms);
/* A free TCP port on 127.0.0.1 (bound and released). */
int bench_free_port(void);

#endif
