/* E2B's filesystem.EntryInfo in proto3-JSON (what envd's Stat, ListDir,
 * MakeDir, Move and WatchDir answer), made from the agent's answers as
 * edge/api checked them (sup_api_stat, sup_api_entry). Pure: nothing but
 * the views given; no agent call (the caller stats a symlink's target).
 *
 * The fields as envd fills them: name (the path's last component), type
 * (FILE_TYPE_FILE or FILE_TYPE_DIRECTORY; a symlink has its target's, a
 * dangling one, or one to neither, FILE_TYPE_UNSPECIFIED, which the SDK's
 * list() skips), path, size (int64: a JSON string), mode (the permission
 * bits, Go's FileMode.Perm()), permissions (Go's FileMode.String() of the
 * lstat mode: "-rw-r--r--", "drwxr-xr-x", "Lrwxrwxrwx"), owner and group,
 * modifiedTime (RFC 3339 UTC, 0, 3, 6 or 9 fractional digits as protojson
 * writes them) and symlinkTarget. Text that is not UTF-8 (a name, a
 * target) is shown with U+FFFD in place of what is not.
 *
 * Owner and group are names as E2B shows them: uid/gid 0 is "root" and
 * 1000, the sandbox user (sbx's "sandbox", E2B's "user"), is "user"; any
 * other id is its number as text (the agent gives ids, not names). */
#ifndef SUP_E2B_ENTRY_H
#define SUP_E2B_ENTRY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sup_api.h"

/* The file type's enum name for st (of the path; target: what a symlink
 * leads to when the caller could stat it, else NULL). */
const char *sup_e2b_entry_type(const sup_api_stat *st, const sup_api_stat *target);
/* Go's FileMode.String() of a stat (its type and mode) into buf (>= 16). */
void sup_e2b_entry_perms(const sup_api_stat *st, char *buf, size_t size);
/* The name E2B shows for a uid or gid, into buf (>= 24). */
const char *sup_e2b_entry_owner(uint64_t id, char *buf, size_t size);
/* A time in ns since the epoch as protojson writes a Timestamp, into buf
 * (>= 40). */
void sup_e2b_entry_time(uint64_t ns, char *buf, size_t size);
/* The EntryInfo of path (absolute, normalised) with lstat st and, for a
 * symlink, its target's stat (NULL: dangling or not known). NULL with err
 * (-ENOMEM). */
json_t *sup_e2b_entry_json(const char *path, const sup_api_stat *st, const sup_api_stat *target,
			   sbx_err *err);

#endif
