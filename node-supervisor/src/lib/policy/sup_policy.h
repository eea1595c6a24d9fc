/* File access policy: which paths of a sandbox a tenant's requests may name.
 *
 * A policy maps tenants to path roots, each read-only ("ro") or read-write
 * ("rw"). It comes from a JSON file,
 *   {"tenants": {"default": {"paths": [{"root": "/workspace", "mode": "rw"}, ...]}}}
 * or, without a file, from the built-in default (/workspace, /tmp and
 * /home/sandbox, all rw). The tenant "default" applies to every tenant the
 * file does not name; a file without it gives unnamed tenants nothing.
 *
 * A request path is normalised lexically (sup_path) and must then be a root
 * or below one, component by component; the longest matching root decides,
 * so {"/workspace": rw, "/workspace/ref": ro} makes ref read-only. What goes
 * on to the agent is the matched root and the part below it, never the raw
 * request.
 *
 * This module owns loading, validating and applying the policy, and the
 * denial log line. It must not do I/O other than reading the policy file,
 * and must not resolve symlinks: the agent enforces the same roots again
 * with openat2 (agent_fsconf.h) and trusts nothing decided here. A loaded
 * policy is immutable, so threads may share it without locks. */
#ifndef SUP_POLICY_H
#define SUP_POLICY_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "sbx/err.h"

struct json_t;

/* Bounds on a policy file, so a bad file is an error and not a big heap. */
#define SUP_POLICY_FILE_MAX (1 << 20)
#define SUP_POLICY_MAX_TENANTS 1024
#define SUP_POLICY_MAX_ROOTS 64
#define SUP_POLICY_TENANT_MAX 64 /* bytes of a tenant name: [A-Za-z0-9._-] */

typedef enum sup_policy_mode {
	SUP_POLICY_RO = 1,
	SUP_POLICY_RW = 2,
} sup_policy_mode;

/* What an operation does to the path it names. */
typedef enum sup_policy_access {
	SUP_POLICY_READ = 1,  /* GET files, stat, list, search, watch */
	SUP_POLICY_WRITE = 2, /* PUT, DELETE, mkdir, move (both sides), chmod */
} sup_policy_access;

typedef struct sup_policy sup_policy;

/* An allowed request. rel is what the agent resolves beneath root: "" for
 * the root itself, else the normalised path below it (no leading slash).
 * Self-contained, so it may outlive the policy (a reload) and be copied. */
typedef struct sup_policy_match {
	char path[PATH_MAX]; /* normalised request path */
	char root[PATH_MAX]; /* the root that matched */
	char rel[PATH_MAX];  /* path below root, "" for root itself */
	sup_policy_mode mode;
	bool is_root; /* path is the root: callers refuse to delete or move it */
	bool dir;     /* the request ended in "/", "/." or "/..": a folder */
} sup_policy_match;

/* The built-in policy (what runs when no file is given). */
int sup_policy_new_default(sup_policy **out, sbx_err *err);
/* Load and validate a policy file (at most SUP_POLICY_FILE_MAX bytes). */
int sup_policy_load_file(const char *file, sup_policy **out, sbx_err *err);
/* Load from JSON text; origin names it in messages (a file name). */
int sup_policy_load_json(const char *text, size_t len, const char *origin, sup_policy **out,
			 sbx_err *err);
/* A policy of one tenant, "default" (so it applies whatever the name),
 * from a JSON array of {"root","mode"} as a file's "paths"; where names the
 * array in errors ("tenants.alice.paths"). The tenants file's "paths". */
int sup_policy_from_paths(const struct json_t *paths, const char *where, sup_policy **out,
			  sbx_err *err);
void sup_policy_free(sup_policy *p);
static inline void sup_policy_freep(sup_policy **p)
{
	sup_policy_free(*p);
}
#define SUP_AUTO_POLICY __attribute__((cleanup(sup_policy_freep)))

/* Shared with the tenants file, which follows the same rules: */
/* Read a configuration file (a regular file of at most SUP_POLICY_FILE_MAX
 * bytes) into *out (malloc'd, NUL-terminated); what names it in errors. */
int sup_policy_read_file(const char *file, const char *what, char **out, size_t *len,
			 sbx_err *err);
/* JSON text (duplicate keys refused) into *doc, or -EINVAL naming what
 * and origin with the line and column. */
int sup_policy_json_load(const char *text, size_t len, const char *what, const char *origin,
			 struct json_t **doc, sbx_err *err);
/* A tenant name: 1..SUP_POLICY_TENANT_MAX of [A-Za-z0-9._-]. */
bool sup_policy_tenant_name_ok(const char *s);
/* Only the keys in allowed[0..n) may appear in obj: a typo is an error
 * naming where, not a silently ignored setting. */
int sup_policy_only_keys(const struct json_t *obj, const char *const *allowed, size_t n,
			 const char *where, sbx_err *err);

/* Check path[0..len) (decoded once, not NUL-terminated necessarily) for
 * tenant. Returns 0 with *m filled, or
 *   -EINVAL, -ENAMETOOLONG  malformed (HTTP 400), see sup_path_normalize;
 *   -EPERM                  outside every root, a write under a ro root, or
 *                           a tenant without a policy (HTTP 403);
 * with err naming the path. */
int sup_policy_check(const sup_policy *p, const char *tenant, const char *path, size_t len,
		     sup_policy_access need, sup_policy_match *m, sbx_err *err);

/* How many roots tenant has (after the "default" fallback); 0 when none. */
size_t sup_policy_root_count(const sup_policy *p, const char *tenant);

/* One line "file access denied: tenant=T sandbox=S op=O path="..." (why)"
 * into buf, bytes escaped (sup_path_quote) so a path cannot forge a log line
 * or break a terminal. Returns buf. */
char *sup_policy_denial_line(char *buf, size_t cap, const char *tenant, const char *sandbox,
			     const char *op, const char *path, size_t len, const sbx_err *why);
/* The same line at warn level through sup_log. */
void sup_policy_log_denial(const char *tenant, const char *sandbox, const char *op,
			   const char *path, size_t len, const sbx_err *why);

#endif
