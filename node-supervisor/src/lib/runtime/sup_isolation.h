/* How a sandbox is isolated: which OCI runtime runs it. runc: namespaces,
 * cgroups and seccomp on the host's kernel; gvisor: runsc, whose user-space
 * kernel serves the sandbox's system calls (they never reach the host's).
 * The names the API and the flags use; nothing else. */
#ifndef SUP_ISOLATION_H
#define SUP_ISOLATION_H

#include <stddef.h>

typedef enum sup_isolation { SUP_ISO_RUNC, SUP_ISO_GVISOR, SUP_ISO_N } sup_isolation;
extern const char *const sup_isolation_names[SUP_ISO_N]; /* "runc", "gvisor" */
/* The isolation called s (its len bytes): 0, or -EINVAL for another name. */
int sup_isolation_parse(const char *s, size_t len, sup_isolation *out);

#endif
