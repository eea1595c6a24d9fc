/* System helpers for the benchmark harness: the unix-socket ceiling the
 * streaming figure is read against, CPU time of a process, and removal of
 * the harness's own temp folders. Owns no state. */
#ifndef BENCH_SYS_H
#define BENCH_SYS_H

#include <stddef.h>
#include <sys/types.h>

/* MB/s of moving total bytes through a plain AF_UNIX socketpair from a
 * forked writer (chunk-byte writes) to this process; also the CPU seconds
 * both sides spent (*cpu_s). Returns a negative value on error. */
double bench_socketpair_mbs(size_t total, size_t chunk, double *cpu_s);
/* User + system CPU seconds pid has used so far (/proc), -1 on error. */
double bench_cpu_of(pid_t pid);
/* User + system CPU seconds of this process so far. */
double bench_cpu_self(void);
/* rm -r path without crossing mount points or following symlinks;
 * returns 0 or -1 (something stayed). */
int bench_rm_tree(const char *path);

#endif
