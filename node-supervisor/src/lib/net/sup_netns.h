/* Network namespaces by name and fd: make one under /run/netns (where
 * iproute2 keeps them, so `ip netns exec NAME` reaches it), remove one,
 * open one, and step the calling thread into one and back.
 *
 * setns(2) moves the calling thread only. A socket belongs to the namespace
 * its thread was in when it was made, so code that needs sockets elsewhere
 * enters, opens them and leaves. A thread that could not return would open
 * every later socket in the wrong namespace: leaving aborts the process
 * rather than go on. It must not configure links or rules (sup_rtnl,
 * sup_nft do). */
#ifndef SUP_NETNS_H
#define SUP_NETNS_H

#include <stdbool.h>

#include "sbx/err.h"

#define SUP_NETNS_DIR "/run/netns"

/* A new namespace bound at /run/netns/<name> (-EEXIST if that exists);
 * *fd: an O_RDONLY fd of it. The calling thread stays where it was. */
int sup_netns_create(const char *name, int *fd, sbx_err *err);
/* Unbind /run/netns/<name> and remove the file; absent: 0. The namespace
 * goes once nothing else holds it. */
int sup_netns_remove(const char *name, sbx_err *err);
/* An fd of "NAME" (under /run/netns), an absolute path, or a pid's
 * ("/proc/<pid>/ns/net"). */
int sup_netns_open(const char *spec, int *fd, sbx_err *err);
int sup_netns_open_pid(int pid, int *fd, sbx_err *err);

/* Enter the namespace of fd; *saved gets the thread's own (give it to
 * sup_netns_leave). */
int sup_netns_enter(int fd, int *saved, sbx_err *err);
/* Back to *saved (closed); aborts the process when that fails. */
void sup_netns_leave(int *saved);

/* Write a sysctl under /proc/sys/net/ ("ipv4/ip_forward") of the calling
 * thread's current namespace. */
int sup_netns_sysctl(const char *path, const char *value, sbx_err *err);

#endif
