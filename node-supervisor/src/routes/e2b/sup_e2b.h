/* The E2B compatibility layer: E2B's control plane under /e2b (so that
 * E2B_API_URL=http://host:port/e2b works) and the sandbox daemon's API
 * (envd: the Connect services process.Process and filesystem.Filesystem,
 * /files, /health) per sandbox under /e2b/sandboxes/{id}/envd and their
 * code interpreter's (/execute, /contexts on sbx's code contexts) under
 * /e2b/sandboxes/{id}/code, which the gate reaches from E2B's own
 * addressing (E2B_SANDBOX_URL=.../e2b/envd with the E2b-Sandbox-Id and
 * E2b-Sandbox-Port headers: 49983 envd, 49999 the code interpreter). Their shapes, their
 * error bodies and their codes, mapped onto sbx's own operations through
 * the core, with sbx's rules kept (limits, the sandbox's user, the path
 * policy, tenants). A sandbox's envd is reached with the tenant's key or
 * with its envdAccessToken: a signature of the sandbox and its tenant by a
 * key of this node, kept in the state folder, so it outlives a restart.
 * It must not touch sandboxes or agents except through the core. Loop
 * thread only. */
#ifndef SUP_E2B_H
#define SUP_E2B_H

#include <jansson.h>
#include <stdint.h>

#include "sup_api.h"
#include "sup_core.h"
#include "sup_http.h"
#include "sup_kept.h"

struct sup_tenants;

/* The envd version the create answers with: the SDKs switch features on
 * by it (0.5.2: closeStdin; below 0.5.7: uploads are multipart). */
#define SUP_E2B_ENVD_VERSION "0.5.2"
/* Their SDK's ports: envd's, the code interpreter's. */
#define SUP_E2B_PORT_ENVD 49983
#define SUP_E2B_PORT_CODE 49999

typedef struct sup_e2b_ctx {
	sup_core *core;
	struct sup_ctx_engine *contexts; /* the code interpreter's: sbx's code contexts */
	sup_api_limits limits;          /* as POST /v1/sandboxes takes them */
	const char *node;               /* this node's name: their clientID */
	/* Their template names onto sbx's images, "name=image" each (a name
	 * not listed is an image's own name; "base" alone is sbx's default
	 * image unless listed). */
	const char *const *aliases;
	size_t naliases;
	/* The tenants in force (swapped on SIGHUP): the gate finds an access
	 * token's tenant there. */
	struct sup_tenants *const *tenants;
	/* What E2B keeps of a sandbox that sbx does not ({"tenant",
	 * "metadata", "templateID"}), kind "e2b" of the catalog's kept
	 * records. */
	sup_kept kept;
	unsigned char access_key[32];   /* signs envdAccessTokens */
} sup_e2b_ctx;

/* After the fields above are set: what was kept before a restart (catalog
 * NULL: nothing kept across restarts). */
int sup_e2b_ctx_open(sup_e2b_ctx *x, struct sup_catalog *catalog, sbx_err *err);
void sup_e2b_ctx_release(sup_e2b_ctx *x);

/* The edge's gate for E2B's addressing (ud: the ctx): a request under
 * /e2b/envd with E2b-Sandbox-Id (and E2b-Sandbox-Port 49983, the
 * default, or 49999) is routed to /e2b/sandboxes/{id}/envd/... (or
 * .../code/...); a request there with a valid X-Access-Token (or
 * E2B-Traffic-Access-Token, which the code interpreter's SDK sends) is
 * its tenant's. 0
 * (nothing vouched for: the sandbox is still checked as the tenant's), or
 * an error. */
int sup_e2b_gate(void *ud, const sup_http_in *in, char **path, const struct sup_tenant **who,
		 sbx_err *err);

/* Their error bodies (sup_http_error_shape, for paths under /e2b/): the
 * control plane's and envd's plain routes' {"code": <status>, "message"},
 * envd's Connect calls' {"code": "not_found", "message"}. */
json_t *sup_e2b_error(int status, const char *path, json_t *sbx_error);

/* The control plane (/e2b/...) and envd (/e2b/sandboxes/{id}/envd/...). */
extern const sup_http_family sup_e2b_family;
extern const sup_http_family sup_e2b_envd_family;

#endif
