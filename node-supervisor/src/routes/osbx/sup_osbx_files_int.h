/* What sup_osbx_files.c and sup_osbx_xfer.c share: a files request's
 * state and the path checks both make. Nothing else includes this. */
#ifndef SUP_OSBX_FILES_INT_H
#define SUP_OSBX_FILES_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "sup_osbx_int.h"
#include "sup_policy.h"

#define MAX_PATHS 64
#define STEP (256 * 1024)          /* most handed to the agent at once, and held */
#define MP_META_MAX (64 * 1024)    /* the metadata part */

enum { F_INFO = 1, F_RMFILE, F_RMDIR, F_MKDIR, F_CHMOD, F_MOVE, F_LIST, F_SEARCH };
enum { MP_META = 1, MP_FILE };

typedef struct job {
	char *path, *root, *rel;    /* as shown, and for the agent */
	char *root2, *rel2;         /* a move's target */
	uint64_t mode;
} job;

struct osbx_files {
	int kind;
	job jobs[MAX_PATHS];
	size_t njobs, next;
	unsigned depth;
	char *pattern;
	json_t *acc;                /* the answer being built */
	/* download */
	uint64_t off, len;
	bool ranged, started;
	/* upload */
	struct sup_multipart *parser;
	struct evbuffer *meta, *out; /* the metadata part; the file's bytes for the agent */
	int part;                   /* MP_META, MP_FILE: the part being parsed */
	bool meta_done, file_ended, body_done, eof_sent;
	bool dropping;              /* answered: the rest of the body is read and dropped */
	uint64_t got;
	job up;
};


/* q's files state, made (NULL: err). */
struct osbx_files *sup_osbx_fx_of(sup_oq *q, const sup_http_in *in, void *ctx, sbx_err *err);
/* p[0..n) through who's policy into j (the shown path, root and rel). */
int sup_osbx_check_path(const sup_http_in *in, const char *p, size_t n, sup_policy_access need,
			job *j, bool is_target, sbx_err *err);
/* Every "path" of the query (repeated), each checked. */
int sup_osbx_query_paths(const sup_http_in *in, struct osbx_files *f, sup_policy_access need,
			 sbx_err *err);

#endif
