/* Lexical handling of request paths, before the policy looks at them.
 *
 * A request names a file inside a sandbox by an absolute path (after one
 * URL decoding by the HTTP edge's sup_query, or as a JSON string). This
 * module turns that into a canonical path with string operations only: `.`
 * and empty components dropped, `..` taking away the component before it
 * (never above "/"), no trailing slash. It owns those string rules and the
 * quoting of paths for messages and logs.
 *
 * It must not touch the file system: the supervisor cannot see inside a
 * sandbox, and symlinks there are resolved by the agent (agent_fsconf.h),
 * which does not trust this normalisation. Relative paths are refused rather
 * than read as relative to /workspace: a sandbox has no single current folder
 * a client could mean, and a guess in front of a security check is one more
 * rule for the two sides to disagree on. */
#ifndef SUP_PATH_H
#define SUP_PATH_H

#include <stdbool.h>
#include <stddef.h>

#include "sbx/err.h"

/* Normalise in[0..len) into out (cap >= PATH_MAX; the result is never longer
 * than the input). len is explicit because a decoded %00 is a byte of the
 * request, not its end. Returns the length of out, or
 *   -EINVAL        empty, a NUL byte, or relative;
 *   -ENAMETOOLONG  len >= PATH_MAX or a component over NAME_MAX,
 * with err naming the path. *dir (may be NULL) is set when the request ended
 * in "/", "/." or "/..", i.e. can only name a folder. */
int sup_path_normalize(const char *in, size_t len, char *out, size_t cap, bool *dir,
		       sbx_err *err);

/* True when path is root or below it, component by component
 * (/workspace2 is not below /workspace). Both must be normalised. */
bool sup_path_is_under(const char *path, size_t path_len, const char *root, size_t root_len);

/* True when rel[0..len) is a relative path in normal form: not empty, no
 * leading or trailing '/', no empty, "." or ".." component, no NUL. What a
 * normalised path below a root is, and what an agent must name below a
 * folder it lists. */
bool sup_path_rel_ok(const char *rel, size_t len);

/* Quote p[0..len) for a message or a log line: printable ASCII as is,
 * '"' and '\\' escaped, every other byte as \xNN, cut with "..." so the
 * result fits cap (NUL included). Returns out. */
char *sup_path_quote(const char *p, size_t len, char *out, size_t cap);

/* Size for sup_path_quote that keeps messages well inside an sbx_err. */
#define SUP_PATH_QUOTE_MAX 200

#endif
