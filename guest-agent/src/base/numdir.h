/* The all-digit entries of a folder (/proc, /proc/<pid>/task,
 * /proc/self/fd), read with getdents64 into a stack buffer: no allocation,
 * no stdio, so forked holders and vforked children may call it.
 * It must not keep state or follow anything but the folder it is given. */
#ifndef AGENT_NUMDIR_H
#define AGENT_NUMDIR_H

/* Call fn(n, arg) for every entry of path whose name is a decimal number.
 * A folder that cannot be opened calls nothing. */
void agent_numdir_each(const char *path, void (*fn)(unsigned n, void *arg), void *arg);

#endif
