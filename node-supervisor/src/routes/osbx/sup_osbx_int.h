/* Internal to sup_osbx*.c: one request's state, the pure translations
 * between OpenSandbox's JSON and sbx's (sup_osbx_json.c, unit-tested), and
 * the execd routes' entry points. Not for other modules. */
#ifndef SUP_OSBX_INT_H
#define SUP_OSBX_INT_H

#include <event2/buffer.h>
#include <jansson.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sbx/proto_args.h"
#include "sup_osbx.h"
#include "sup_stream.h"

/* A line of output longer than this goes out in pieces of it. */
#define SUP_OSBX_LINE_MAX (64 * 1024)
/* Largest body of a lifecycle request (a create with its metadata). */
#define SUP_OSBX_MAX_BODY (256 * 1024)

struct sup_oq {
	sup_http_req *r;
	sup_osbx_ctx *x;
	const char *id;
	sup_op *op;
	/* lifecycle */
	sup_create_req create;
	json_t *kept;          /* create: what OpenSandbox keeps beside sbx's view */
	unsigned timeout_s;    /* renew */
	char port[8];          /* endpoints: the port as asked */
	uint64_t sign_exp;     /* endpoints: a signed one's expiry (0: unsigned) */
	char sid[SUP_ID_MAX];  /* create: the sandbox made */
	sbx_err entry_err;     /* create: why its entrypoint did not start */
	/* execd */
	sup_exec_spec spec;
	bool background;
	sbx_proto_args args;   /* a proc.* call */
	const sup_core_call_cbs *cbs;
	sup_stream *s;
	struct evbuffer *line[2]; /* stdout, stderr: the part line of each */
	uint64_t started_ms;
	long pid;
	uint64_t cursor;       /* logs: where to start */
	struct evbuffer *logs; /* logs: what was read */
	int kind;              /* which proc.* answer (sup_osbx_cmd.c) */
	char cmd_id[24];       /* a foreground command's "fg-<seq>" */
	struct sup_oq *fg_next, **fg_prev; /* in x->fg while it streams */
	char target[48];       /* interrupt: the id asked for */
	struct osbx_files *fx; /* a files or directories request (sup_osbx_files.c) */
	struct osbx_replace *rx; /* a files replace (sup_osbx_replace.c) */
	sup_snaps_op *snap_op; /* a snapshot being taken (sup_osbx_snap.c) */
	char snap_name[SUP_SNAPS_NAME_MAX + 1];
	/* bash sessions (sup_osbx_sess.c) */
	struct osbx_sess *sess; /* create: the one starting; run: the one it streams */
	char *command;         /* run: the command as given */
	char *cwd;             /* create, run: the folder asked for, or NULL */
	uint64_t timeout_ms;   /* run: its bound */
	/* metrics/watch (sup_osbx_watch.c): the next sample */
	struct event *tick;
};
typedef struct sup_oq sup_oq;

/* ---- sup_osbx_json.c: pure ---- */

/* Kubernetes quantities as OpenSandbox's resourceLimits give them: cpu
 * ("500m", "2", "0.5") in thousandths of a CPU, memory ("512Mi", "1G",
 * "1073741824") in bytes. 0, or -EINVAL. */
int sup_osbx_cpu_milli(const char *s, uint64_t *out);
int sup_osbx_bytes(const char *s, uint64_t *out);
/* An RFC 3339 time ("2026-12-01T22:00:00.123Z", "+01:00"), rounded up to
 * the second: 0, or -EINVAL. */
int sup_osbx_parse_time(const char *s, time_t *out);
/* Their CreateSandboxRequest into sbx's create (through sup_api's own
 * parser, so sbx's checks hold) and *kept, what sbx does not keep
 * (metadata, entrypoint, extensions; the caller decrefs it, also on
 * failure). What sbx cannot do is -EINVAL naming it. A snapshotId is
 * sbx's restore ("snapshot"), kept to be shown back. */
int sup_osbx_parse_create(const char *body, size_t len, const sup_api_limits *lim,
			  sup_create_req *out, json_t **kept, sbx_err *err);
/* Whether argv is their keep-alive default (tail -f /dev/null): an sbx
 * sandbox stays up without it. */
bool sup_osbx_entry_is_default(const json_t *entrypoint);
/* Their Sandbox object for v and what was kept of it (NULL: nothing). */
json_t *sup_osbx_sandbox_json(const sup_sandbox_view *v, const json_t *kept);
/* Their state name for sbx's ("running" -> "Running"). */
const char *sup_osbx_state(const char *sbx_state);
/* Whether "k=v&k2=v2" (the list's metadata filter, decoded) all hold in
 * metadata: 1, 0, or -EINVAL for a bad filter. */
int sup_osbx_meta_match(const char *filter, const json_t *metadata);
/* Their command body ({"command", "cwd", "background", "timeout" ms,
 * "envs", "uid", "gid"}) into an exec spec (sh -c command). */
int sup_osbx_parse_command(const char *body, size_t len, sup_exec_spec *out, bool *background,
			   sbx_err *err);
/* Their Snapshot for sbx's (state Ready: sbx answers once it is stored). */
json_t *sup_osbx_snapshot_json(const sup_snap_view *v);

/* ---- sup_osbx_render.c: pure, the agent's file answers as theirs ---- */
/* An ISO time with milliseconds ("2026-12-01T22:00:00.123Z"). */
void sup_osbx_time_ms(uint64_t ms, char *buf, size_t size);
/* The agent's stat keys as their FileInfo at path; NULL with err
 * (-EPROTO naming what) when a key is missing or out of range. */
json_t *sup_osbx_info_json(const char *path, const msgpack_object *m, sbx_err *err);
/* An fs.list or fs.search answer as an array of FileInfo below base (the
 * folder asked for, absolute): every entry's path relative and in normal
 * form (no "", ".", ".." part: an agent's "../x" would name a path
 * outside the folder), else NULL with err (-EPROTO). */
json_t *sup_osbx_entries_json(const char *base, const msgpack_object *res, sbx_err *err);

/* ---- sup_osbx.c: what both lists share ---- */
typedef struct sup_osbx_listq {
	char *states[16]; /* their state names asked for (OR); none: any */
	size_t nstates;
	char *meta;       /* sandboxes: k=v&... (AND); NULL: any */
	char *sandbox;    /* snapshots: of this sandbox only */
	char *name;       /* snapshots: of this name only */
	uint64_t page, size;
} sup_osbx_listq;
int sup_osbx_listq_parse(const char *query, bool snapshots, sup_osbx_listq *lq, sbx_err *err);
void sup_osbx_listq_free(sup_osbx_listq *lq);
/* Whether state is one asked for (any, when none was). */
bool sup_osbx_listq_state(const sup_osbx_listq *lq, const char *state);
/* The page lq asks for of all (taken) as {"items", "pagination"}, 200. */
int sup_osbx_page(sup_http_req *r, json_t *all, const sup_osbx_listq *lq, sbx_err *err);

/* ---- sup_osbx_cmd.c: the execd command routes ---- */
int sup_osbx_parse_cmd(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_osbx_act_cmd(sup_http_req *r, void *state, sbx_err *err);
int sup_osbx_parse_interrupt(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_osbx_parse_status(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_osbx_parse_logs(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_osbx_act_call(sup_http_req *r, void *state, sbx_err *err);
void sup_osbx_cmd_release(sup_oq *q);
/* A reply's credit (sup_http_on_credit): cost back to the agent's call. */
void sup_osbx_credit(size_t cost, void *ud);

/* Every whole line of b (or a piece of SUP_OSBX_LINE_MAX of a longer
 * one), and with flush the rest too, drained to fn in order; last is set
 * on the final one. Whether any went. */
bool sup_osbx_lines(struct evbuffer *b, bool flush,
		    void (*fn)(void *ud, const char *p, size_t n, bool last), void *ud);
/* An execd stream event of type with its timestamp (NULL without memory). */
json_t *sup_osbx_event(const char *type);
/* One line of output as a "stdout" (ch 0) or "stderr" event (bytes that
 * are not UTF-8 repaired, the exact ones in text_b64). */
json_t *sup_osbx_text_event(int ch, const char *p, size_t n);
/* Their error event: {"type":"error","error":{"ename","evalue","traceback"}}. */
json_t *sup_osbx_error_event(const char *name, const char *value);
/* The ping their server sends while a command is quiet, and how often. */
#define SUP_OSBX_PING_S 5
#define SUP_OSBX_PING "{\"type\":\"ping\",\"text\":\"pong\"}"
uint64_t sup_osbx_now_ms(void);

/* ---- sup_osbx_sess.c: bash sessions, a long-lived shell each ---- */
int sup_osbx_parse_sess_create(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_osbx_act_sess_create(sup_http_req *r, void *state, sbx_err *err);
int sup_osbx_parse_sess_run(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_osbx_act_sess_run(sup_http_req *r, void *state, sbx_err *err);
int sup_osbx_parse_sess_delete(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_osbx_act_sess_delete(sup_http_req *r, void *state, sbx_err *err);
/* DELETE /command?id=<a session's id>: its run interrupted (SIGINT):
 * 0 answered, -ENOENT when no session of sandbox id has that id. */
int sup_osbx_sess_interrupt(sup_oq *q, sbx_err *err);
void sup_osbx_sess_release(sup_oq *q);
/* Every session ends (the supervisor stops). */
void sup_osbx_sess_free_all(sup_osbx_ctx *x);

/* ---- sup_osbx.c and sup_osbx_watch.c: metrics ---- */
/* Their Metrics of sandbox id as who sees it, from sbx's figures (NULL
 * with err). */
json_t *sup_osbx_metrics_json(sup_osbx_ctx *x, const struct sup_tenant *who, const char *id,
			      sbx_err *err);
int sup_osbx_act_watch(sup_http_req *r, void *state, sbx_err *err);
void sup_osbx_watch_release(sup_oq *q);

/* ---- sup_osbx_files.c: files and directories ---- */
int sup_osbx_parse_fs(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_osbx_act_fs(sup_http_req *r, void *state, sbx_err *err);
int sup_osbx_parse_download(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_osbx_act_download(sup_http_req *r, void *state, sbx_err *err);
int sup_osbx_parse_upload(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_osbx_act_upload(sup_http_req *r, void *state, sbx_err *err);
void sup_osbx_files_release(sup_oq *q);

/* ---- sup_osbx_replace.c: files/replace on stat, read and write ---- */
int sup_osbx_parse_replace(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_osbx_act_replace(sup_http_req *r, void *state, sbx_err *err);
void sup_osbx_replace_release(sup_oq *q);

/* ---- sup_osbx_snap.c: their snapshot calls, onto sbx's snapshots ---- */
int sup_osbx_parse_snap(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_osbx_act_snap_take(sup_http_req *r, void *state, sbx_err *err);
int sup_osbx_act_snap_list(sup_http_req *r, void *state, sbx_err *err);
int sup_osbx_act_snap_get(sup_http_req *r, void *state, sbx_err *err);
int sup_osbx_act_snap_delete(sup_http_req *r, void *state, sbx_err *err);
/* "Range: bytes=a-b" / "bytes=a-": 0 with *off and *len (UINT64_MAX: to
 * the end), or -EINVAL (a suffix or several ranges are not served). */
int sup_osbx_range(const char *h, uint64_t *off, uint64_t *len);
/* Their mode, octal digits written as a decimal number (644), into bits. */
int sup_osbx_mode(json_int_t v, uint64_t *out);

#endif
