/* A sandbox's secrets as environment variables or as files: checked at a create,
 * opened into its env when it is handed out, and kept out of everything
 * that outlives or copies it. The catalog keeps the names (a restart opens
 * them again); a fork, a snapshot and a view get the env without them (a
 * view the names only); a sandbox reset for another owner has lost them
 * with its env. Values live in the sandbox's env only, wiped when freed
 * (sup_env_free). A file binding's "variable" is its path in the sandbox
 * (SUP_SECRET_FILES_DIR/NAME): its value goes onto a tmpfs of its own bound
 * read-only there (runc sandboxes), which no path of the host leads to and
 * which goes with the container; such a sandbox is never reused.
 *
 * Owns the binding's text in the catalog ("name=VAR" lines). It must not
 * log a value, or hand one to anything but the sandbox's own commands. */
#ifndef SUP_CORE_SECRETS_H
#define SUP_CORE_SECRETS_H

#include "sbx/err.h"
#include "sup_sandbox.h"
#include "sup_types.h"

struct sup_secrets;

/* A create's bindings (b) for tenant: every secret exists, no variable is
 * named twice or also in the request's env. -EINVAL naming the binding;
 * bindings without a store (no --secrets-key) too. */
int sup_core_secrets_check(struct sup_secrets *store, const char *tenant,
			   const sup_secret_binds *b, const sup_env *env, sbx_err *err);
/* Whether b binds a file. */
bool sup_core_secrets_files(const sup_secret_binds *b);
/* Handed out: b's values into sb's env and files (b moved into sb->secrets).
 * -EINVAL when a secret is gone meanwhile, -EBADMSG when it does not open. */
int sup_core_secrets_give(struct sup_secrets *store, sup_sandbox *sb, sup_secret_binds *b,
			  sbx_err *err);
/* A copy of sb's env without the secrets' variables (what a record or a
 * fork keeps). -ENOMEM. */
int sup_core_secrets_plain_env(const sup_sandbox *sb, sup_env *out);
/* The names as the catalog keeps them (malloc'd; NULL with none or out of
 * memory: *oom tells). */
char *sup_core_secrets_text(const sup_secret_binds *b, bool *oom);
/* A restart: the names of text opened into sb's env again; a secret gone
 * or not opening is left out (logged, names only). */
void sup_core_secrets_restore(struct sup_secrets *store, sup_sandbox *sb, const char *text);
/* Free sb's env (the secrets' values in it wiped, sup_env_free) and
 * forget which variables were secrets'. */
void sup_core_secrets_env_free(sup_sandbox *sb);

#endif
