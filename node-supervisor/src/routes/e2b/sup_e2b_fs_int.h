/* Internal to sup_e2b_fs*.c and sup_e2b_files.c: envd's filesystem side
 * (the filesystem.Filesystem service and the plain /files routes) on the
 * agent's fs.* and file.* operations. A path is theirs: "~" and a relative
 * path are against the user's home; then it goes through the core's check
 * (sup_core_check_path: the sandbox's volumes, then the tenant's path
 * policy) as sbx's own files routes do. Not for other modules. */
#ifndef SUP_E2B_FS_INT_H
#define SUP_E2B_FS_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "sup_api.h"
#include "sup_e2b_int.h"
#include "sup_policy.h"

struct sup_multipart;

struct e2b_fs {
	int kind, step;
	const struct sup_tenant *who; /* the request's (held by the edge) */
	sup_policy_match m, m2;     /* the path; Move's destination */
	const char *home;           /* the user's home */
	unsigned depth;             /* ListDir */
	bool recursive;             /* WatchDir */
	/* Stat, MakeDir, Move: the entry's lstat, kept while its symlink's
	 * target is looked at */
	sup_api_stat st;
	char target[4097];
	/* ListDir: the entries so far; symlinks whose target is looked at
	 * (their index there, their path below m's root) */
	json_t *entries;
	size_t *links, nlinks, next;
	char **link_rel;
	/* GET /files */
	bool started;
	uint64_t len, got;
	/* POST /files */
	struct sup_multipart *parser;
	struct evbuffer *out;       /* a file's bytes waiting for the agent's credit */
	json_t *written;            /* [{"name","type","path"}] so far */
	bool octet, part_open, file_ended, body_done, eof_sent, dropping;
	uint64_t sent;
	char *qpath;                /* ?path= (decoded) */
	size_t qpath_len;
};

/* The home of user (NULL: the sandbox's own user, sbx's "sandbox"):
 * "/root" for root, else "/home/<user>". */
const char *sup_e2b_home(const char *user, char *buf, size_t size);
/* Their path p[0..n) (absolute, "~", "~/x" or relative to home) checked
 * for need into m: 0, or an error (-EINVAL, -EPERM: logged as a denial). */
int sup_e2b_fs_path(sup_eq *q, const char *p, size_t n, sup_policy_access need,
		    sup_policy_match *m, sbx_err *err);
/* The fs state of q, made (NULL: -ENOMEM in err). sup_e2b_fs_path reads
 * its who: set it first. */
struct e2b_fs *sup_e2b_fs_of(sup_eq *q, sbx_err *err);
void sup_e2b_fs_release(sup_eq *q);

/* filesystem.Filesystem (sup_e2b_fs.c, sup_e2b_fs_watch.c) */
int sup_e2b_parse_stat(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_e2b_parse_listdir(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_e2b_parse_mkdir(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_e2b_parse_move(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_e2b_parse_remove(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_e2b_act_fs(sup_http_req *r, void *state, sbx_err *err);
int sup_e2b_parse_watch(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_e2b_act_watch(sup_http_req *r, void *state, sbx_err *err);

/* GET and POST /files (sup_e2b_files.c) */
int sup_e2b_parse_files_get(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_e2b_act_files_get(sup_http_req *r, void *state, sbx_err *err);
int sup_e2b_parse_files_post(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_e2b_act_files_post(sup_http_req *r, void *state, sbx_err *err);

#endif
