/* File API over HTTP: GET/DELETE /files and /fs/{stat,list,mkdir,move,
 * chmod,search} of a sandbox. Each request path is decoded once with its
 * length kept, checked against the tenant's policy (sup_policy, read or
 * write), and only the matched root and the part below it go to the agent,
 * which confines them again with openat2. A denial is a 403, logged.
 * Downloads stream with backpressure: the agent's credit comes back only as
 * the HTTP connection drains.
 * Owns the requests it is handed (it answers and frees them). It must not
 * touch sandboxes or agents except through the core (sup_core_call), and
 * trusts nothing the agent sends. Loop thread only. */
#ifndef SUP_FILES_H
#define SUP_FILES_H

#include "sup_core.h"
#include "sup_policy.h"

struct evhttp_request;
typedef struct sup_files sup_files;

typedef enum sup_files_route {
	SUP_FILES_GET = 1, /* GET /files */
	SUP_FILES_DELETE,  /* DELETE /files */
	SUP_FILES_STAT,    /* GET /fs/stat */
	SUP_FILES_LIST,    /* GET /fs/list */
	SUP_FILES_MKDIR,   /* POST /fs/mkdir */
	SUP_FILES_MOVE,    /* POST /fs/move */
	SUP_FILES_CHMOD,   /* POST /fs/chmod */
	SUP_FILES_SEARCH,  /* POST /fs/search */
	SUP_FILES_PUT,     /* PUT /files (streamed upload) */
	SUP_FILES_WATCH,   /* GET /fs/watch (SSE) */
} sup_files_route;

/* policy is borrowed and must outlive the result. */
sup_files *sup_files_new(sup_core *core, const sup_policy *policy);
void sup_files_free(sup_files *f);
/* Uploads: at most max_upload bytes (0: no limit); a body evhttp read
 * whole itself at most max_body. */
void sup_files_set_limits(sup_files *f, uint64_t max_upload, size_t max_body);

/* Answer req (sandbox id) on route rt; req is ours from here. */
void sup_files_handle(sup_files *f, sup_files_route rt, struct evhttp_request *req,
		      const char *id);

#endif
