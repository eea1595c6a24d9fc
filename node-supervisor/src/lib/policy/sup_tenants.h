/* Tenants: who may call the API and what each may have.
 *
 * Owns the tenants file (--tenants FILE, JSON, API.md "Tenants"), its
 * strict parsing (an unknown key, a wrong type or a figure out of range is
 * an error naming the field), the lookup of a bearer token (its SHA-256
 * against every stored hash, compared in constant time), and the one
 * tenant a supervisor without a file has (its token, the supervisor's
 * settings, admin). A field a tenant leaves out takes the supervisor's
 * setting (sup_tenants_node), so a file says only what differs.
 *
 * A loaded set is immutable and counted: whoever keeps a tenant past the
 * current turn of the loop holds it (sup_tenant_hold), so a reload (SIGHUP)
 * swaps the set without pulling a tenant from under a request. It must
 * not know sandboxes, HTTP or what a tenant holds now: the core adds up a
 * tenant's sandboxes against the quota here. Loop thread only for hold and
 * release; a set may be read from any thread. */
#ifndef SUP_TENANTS_H
#define SUP_TENANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sup_policy.h"
#include "sup_resources.h"
#include "sup_token.h"

#define SUP_TENANT_NAME_MAX SUP_POLICY_TENANT_MAX
#define SUP_TENANTS_MAX 256      /* tenants in a file */
#define SUP_TENANT_MAX_TOKENS 16 /* tokens of one tenant */
#define SUP_TENANT_MAX_IMAGES 64
#define SUP_TENANT_MAX_ISOLATIONS 8
/* The tenant a supervisor without --tenants has; "admin" in a file is the
 * admin. */
#define SUP_TENANT_SINGLE "default"
#define SUP_TENANT_ADMIN "admin"

/* What a tenant may hold at once, all its sandboxes together. */
enum {
	SUP_QUOTA_SANDBOXES = 1u << 0,
	SUP_QUOTA_CPUS = 1u << 1,
	SUP_QUOTA_MEMORY = 1u << 2,
	SUP_QUOTA_DISK = 1u << 3,
};
typedef struct sup_quota {
	uint64_t sandboxes;
	uint64_t cpu_milli; /* the sum of its sandboxes' cpus, in thousandths */
	uint64_t memory;
	uint64_t disk;
	unsigned set;       /* SUP_QUOTA_* bits: the figures that bound; others do not */
} sup_quota;

typedef struct sup_tenants sup_tenants;

typedef struct sup_tenant {
	char name[SUP_TENANT_NAME_MAX + 1];
	bool admin;               /* sees and may delete every sandbox, reads /metrics */
	uint8_t hashes[SUP_TENANT_MAX_TOKENS][SUP_TOKEN_HASH_LEN];
	size_t nhashes;
	sup_quota quota;
	char **images;            /* the images it may ask for; NULL: any the node serves */
	size_t nimages;
	unsigned isolations;      /* bit i: sup_tenants_node.isolations[i] allowed */
	unsigned default_isolation; /* index of the one a create that names none gets */
	sup_policy *policy;       /* its own "paths", or NULL: the node's */
	bool allow_root;
	unsigned max_timeout_s;
	sup_resources res_default; /* a create's limits where it names none */
	sup_tenants *set;         /* the set it belongs to (hold/release) */
} sup_tenant;

/* The supervisor's settings: what a tenant leaves out, and what bounds what
 * a tenant may name. Copied where needed; policy must outlive every set. */
typedef struct sup_tenants_node {
	const sup_policy *policy;       /* --policy, or the built-in one */
	bool allow_root;                /* --allow-root */
	unsigned max_timeout_s;         /* --max-timeout */
	sup_resources res_default;      /* --default-resources */
	sup_resources res_max;          /* --max-resources */
	const char *const *isolations;  /* names, index = the core's isolation enum */
	size_t nisolations;
} sup_tenants_node;

/* Parse a tenants file / JSON text (origin names it in errors). */
int sup_tenants_load_file(const char *file, const sup_tenants_node *node, sup_tenants **out,
			  sbx_err *err);
int sup_tenants_load_json(const char *text, size_t len, const char *origin,
			  const sup_tenants_node *node, sup_tenants **out, sbx_err *err);
/* Without a file: one tenant, SUP_TENANT_SINGLE, holding token, admin, with
 * every setting the node's. */
int sup_tenants_single(const char *token, const sup_tenants_node *node, sup_tenants **out,
		       sbx_err *err);
/* SIGHUP: load file again; on success *cur is the new set (the old one
 * goes once nobody holds it: sandboxes and requests of a removed tenant go
 * on), on error *cur stays and the error is logged. */
int sup_tenants_reload(const char *file, const sup_tenants_node *node, sup_tenants **cur);
/* Drop the loader's reference (a set is freed when nobody holds it). */
void sup_tenants_unref(sup_tenants *ts);

size_t sup_tenants_count(const sup_tenants *ts);
const sup_tenant *sup_tenants_at(const sup_tenants *ts, size_t i);
const sup_tenant *sup_tenants_find(const sup_tenants *ts, const char *name);

/* The tenant whose token is token[0..len), or NULL. Hashes it once, then
 * compares with every stored hash of every tenant (no early exit), so the
 * time taken does not say which tenant or how much of a hash matched. */
const sup_tenant *sup_tenants_auth(const sup_tenants *ts, const char *token, size_t len);

/* The HTTP edge's auth hook: ud is a sup_tenants *const * (the set in
 * force, swapped on reload); the tenant of token, held (release with
 * sup_tenant_release), or NULL. */
const sup_tenant *sup_tenants_hook_auth(void *ud, const char *token, size_t len);

/* Keep t (and its set) alive past a reload; release when done. */
const sup_tenant *sup_tenant_hold(const sup_tenant *t);
void sup_tenant_release(const sup_tenant *t);

/* The file access policy its requests go through (check under t->name:
 * its own policy applies to any name, the node's falls back to "default"). */
const sup_policy *sup_tenant_policy(const sup_tenant *t);
bool sup_tenant_may_image(const sup_tenant *t, const char *image);
bool sup_tenant_may_isolation(const sup_tenant *t, unsigned isolation);

/* Quotas, counted: held's figures (its set bits unused) plus one sandbox
 * of want's limits. */
void sup_quota_add(sup_quota *held, const sup_resources *r);
/* Whether t may have one more sandbox of want's limits while it holds
 * held: 0, or -EDQUOT with a message naming the figure that is over and by
 * how much ("tenant a is over its quota of memory: it holds 3G, asks 2G
 * more, 1G over its 4G"), and *figure its name (sandboxes, cpus, memory,
 * disk). */
int sup_quota_check(const sup_tenant *t, const sup_quota *held, const sup_resources *want,
		    const char **figure, sbx_err *err);

#endif
