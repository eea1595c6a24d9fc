/* POST /v1/images and the GC after a DELETE, on the images' worker thread.
 * An upload: the body is written into a pipe on the loop, as fast as the
 * worker's import reads it (the pipe full: the loop waits for room and
 * stops reading the client), so what is held is the edge's body bound
 * and the pipe. A pull: skopeo (an explicit argv, a deadline) copies the
 * source into an OCI layout under store/tmp, imported from there. A
 * request that ends early (client gone, body cut, timed out) marks its job
 * cancelled and closes the pipe; the import sees the end and fails, so a
 * cut upload is never taken for a whole one. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/clock.h"
#include "sup_fsutil.h"
#include "sup_images_int.h"
#include "sup_log.h"
#include "sup_runc_cmd.h"

#define UP_STEP (256 * 1024)
#define PIPE_BYTES (1024 * 1024)

/* ---- on the worker ---- */

static ssize_t pipe_read(void *ud, void *buf, size_t cap, sbx_err *err)
{
	sup_im_job *j = ud;
	ssize_t n;
	do
		n = read(j->rfd, buf, cap);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return sbx_err_sys(err, -errno, "read the upload");
	/* the loop closed the pipe: at the body's end, or because the request
	 * ended first (then the archive is not whole, whatever it looks like) */
	if (n == 0 && atomic_load(&j->cancelled))
		return sbx_err_set(err, -ECANCELED, "the upload ended before its body");
	return n;
}

/* An import's failure, as the client should read it: what the archive
 * holds is a bad image (400), bigger than a limit is 413; the store's own
 * troubles keep their errno. */
static void classify(sup_im_job *j)
{
	switch (j->rc) {
	case -ENOMEM: case -ENOSPC: case -EIO: case -ECANCELED: case -EDQUOT:
		return;
	case -EFBIG: case -E2BIG:
		j->err.code = j->rc = -E2BIG;
		return;
	default:
		j->err.code = j->rc = -EBADMSG;
	}
}

/* A local source must resolve below --image-pull-dir; skopeo then gets the
 * resolved path, so a symlink swapped in afterwards leads nowhere else. */
static int local_source(sup_im_job *j, sbx_err *err)
{
	char real[PATH_MAX];
	if (!realpath(j->local, real))
		return sbx_err_sys(err, -errno, "%.200s", j->local);
	const char *dir = j->x->pull_dir;
	size_t n = strlen(dir);
	if (strncmp(real, dir, n) != 0 || (real[n] != '/' && real[n] != '\0'))
		return sbx_err_set(err, -EPERM, "%.200s is not below --image-pull-dir", j->local);
	const char *transport = strncmp(j->src, "oci-archive:", 12) == 0 ? "oci-archive" : "oci";
	int k = snprintf(j->src, sizeof(j->src), "%s:%s%s%s", transport, real, j->tag[0] ? ":" : "",
			 j->tag);
	if (k < 0 || (size_t)k >= sizeof(j->src))
		return sbx_err_set(err, -ENAMETOOLONG, "%.200s: path too long", j->local);
	return 0;
}

static int pull(sup_im_job *j, const char *layout, sbx_err *err)
{
	if (j->local[0]) {
		int r = local_source(j, err);
		if (r == -EPERM || r == -ENAMETOOLONG)
			return r;
		if (r < 0) {
			sbx_err why = *err;
			return sbx_err_set(err, -EREMOTEIO, "pull of %.255s failed: %.700s", j->ref, why.msg);
		}
	}
	char dst[PATH_MAX + 8];
	snprintf(dst, sizeof(dst), "oci:%s", layout);
	const char *argv[] = { j->x->skopeo, "copy", "--quiet", j->src, dst, NULL };
	char why[1024];
	SBX_AUTO_CLOSE int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	sup_runc_cmd c = { .argv = argv, .stdout_fd = devnull, .stderr_fd = -1, .errout = why,
			   .errout_cap = sizeof(why), .timeout_ms = j->x->pull_timeout_ms,
			   .cancel = &j->cancelled };
	int r = sup_runc_cmd_run(&c, err);
	if (r == -ETIMEDOUT)
		return sbx_err_set(err, -ETIMEDOUT, "pull of %.255s: skopeo gave no image within %u ms "
				   "(--image-pull-timeout), killed", j->ref, j->x->pull_timeout_ms);
	if (r < 0)
		return sbx_err_wrap(err, "pull of %.255s", j->ref);
	if (r > 0)
		return sbx_err_set(err, -EREMOTEIO, "pull of %.255s failed: skopeo exited %d: %.700s",
				   j->ref, r, why[0] ? why : "(nothing on stderr)");
	r = sup_img_import_path(j->x->store, layout, j->name[0] ? j->name : NULL, &j->out, err);
	if (r < 0) {
		sbx_err why_import = *err;
		return sbx_err_set(err, -EREMOTEIO, "pull of %.255s: the image it gave is refused: %.700s",
				   j->ref, why_import.msg);
	}
	return 0;
}

/* tar's end came before the body's (a writer's padding): the rest is read
 * here, so the answer follows the whole body (bounded by the loop's limit). */
static void drain(int fd)
{
	char sink[16384];
	ssize_t n;
	while ((n = read(fd, sink, sizeof(sink))) > 0 || (n < 0 && errno == EINTR))
		;
}

static void job_run(sup_job *job)
{
	sup_im_job *j = (sup_im_job *)job;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sbx_err_clear(&j->err);
	sup_img_store *store = j->x->store;
	switch (j->kind) {
	case SUP_IM_UPLOAD:
		j->rc = sup_img_import_stream(store, pipe_read, j, j->name[0] ? j->name : NULL, &j->out,
					      &j->err);
		if (j->rc < 0) {
			classify(j);
			break;
		}
		drain(j->rfd);
		break;
	case SUP_IM_PULL: {
		char layout[PATH_MAX];
		int n = snprintf(layout, sizeof(layout), "%s/tmp/pull-XXXXXX", sup_img_store_root(store));
		if (n < 0 || (size_t)n >= sizeof(layout) || !mkdtemp(layout)) {
			j->rc = sbx_err_sys(&j->err, -errno, "pull: store/tmp");
			break;
		}
		j->rc = pull(j, layout, &j->err);
		sbx_err ignored;
		sup_fs_rm_tree(layout, &ignored);
		break;
	}
	case SUP_IM_GC:
		j->rc = sup_img_store_gc(store, &j->freed, &j->layers, &j->err);
		break;
	}
	if (j->rfd >= 0) {
		close(j->rfd); /* the loop's writes now fail with EPIPE */
		j->rfd = -1;
	}
	j->ms = sbx_ms_since(&t0);
}

/* The pipe's write end and its event go together (wev set: both are). */
static void close_pipe(sup_imq *q)
{
	if (!q->wev)
		return;
	event_free(q->wev);
	q->wev = NULL;
	close(q->wfd);
	q->wfd = -1;
}

static void job_done(sup_job *job)
{
	sup_im_job *j = (sup_im_job *)job;
	if (j->kind == SUP_IM_GC && j->rc == 0 && j->layers)
		sup_info("image GC: %u layer(s) no image uses removed (%" PRIu64 " bytes) in %ld ms",
			 j->layers, j->freed, j->ms);
	else if (j->rc < 0)
		sup_warn("image %s of %s: %s", j->kind == SUP_IM_GC ? "GC" : "import",
			 j->ref[0] ? j->ref : "an upload", j->err.msg);
	for (size_t i = 0; j->rc == 0 && i < j->out.n; i++)
		sup_info("image %s imported from %s (%u layer(s) unpacked, %u shared) in %ld ms",
			 j->out.digests[i], j->kind == SUP_IM_PULL ? j->ref : "an upload",
			 j->out.layers_new, j->out.layers_shared, j->ms);
	sup_imq *q = j->q;
	if (q) {
		if (j->kind != SUP_IM_GC)
			j->x->busy--;
		q->job = NULL;
		close_pipe(q); /* an import that failed early: no more writes, no more events */
		sup_images_answer(q, j);
	}
	free(j);
}

static sup_im_job *job_new(sup_imq *q, sup_im_kind kind)
{
	sup_im_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->job.run = job_run;
	j->job.done = job_done;
	j->q = q;
	j->x = q->x;
	j->kind = kind;
	j->rfd = -1;
	atomic_init(&j->cancelled, false);
	snprintf(j->name, sizeof(j->name), "%s", q->named ? q->name : "");
	return j;
}

static void submit(sup_imq *q, sup_im_job *j)
{
	if (j->kind != SUP_IM_GC)
		q->x->busy++;
	q->job = j;
	sup_workers_submit(q->x->worker, &j->job, false);
}

int sup_images_start_gc(sup_imq *q, sbx_err *err)
{
	sup_im_job *j = job_new(q, SUP_IM_GC);
	if (!j)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	snprintf(j->ref, sizeof(j->ref), "%s", q->name);
	submit(q, j);
	return 0;
}

/* ---- an upload: the body into the pipe ---- */

/* The request is over, or its body failed: the job is on its own. */
static void abandon(sup_imq *q)
{
	if (q->job) {
		/* no one waits for it any more: the next import may queue
		 * behind it (it ends at its next read, or its skopeo is killed) */
		if (q->job->kind != SUP_IM_GC)
			q->x->busy--;
		atomic_store(&q->job->cancelled, true);
		q->job->q = NULL;
		q->job = NULL;
	}
	close_pipe(q);
}

void sup_images_load_release(sup_imq *q)
{
	abandon(q);
	if (q->body) {
		evbuffer_free(q->body);
		q->body = NULL;
	}
}

static void upload_fail(sup_imq *q, const sbx_err *e)
{
	abandon(q);
	sup_http_fail(q->r, e);
}

static void pump(void *ud);

static void on_writable(evutil_socket_t fd, short what, void *ud)
{
	(void)fd;
	(void)what;
	pump(ud);
}

static void pump(void *ud)
{
	sup_imq *q = ud;
	while (q->wev) {
		struct evbuffer *buf = NULL;
		sbx_err e;
		sbx_err_clear(&e);
		int n = sup_http_body(q->r, UP_STEP, &buf, &e);
		if (n == -EAGAIN)
			return;
		if (n == -ENODATA)
			sup_http_note(q->r, "client went away after %" PRIu64 " bytes", q->got);
		if (n < 0) {
			upload_fail(q, &e);
			return;
		}
		if (n == 0) { /* the body is whole: EOF for the import */
			q->body_done = true;
			close_pipe(q);
			return;
		}
		if ((uint64_t)n > q->x->max_import - q->got) {
			sbx_err_set(&e, -E2BIG, "image upload over the limit of %" PRIu64
				    " bytes (--image-max-import)", q->x->max_import);
			upload_fail(q, &e);
			return;
		}
		int k = evbuffer_write_atmost(buf, q->wfd, n);
		if (k < 0 && errno == EAGAIN) {
			event_add(q->wev, NULL);
			return;
		}
		if (k < 0) {
			/* EPIPE: the import stopped reading (it failed); its end
			 * answers, and the rest of the body is not read */
			close_pipe(q);
			return;
		}
		sup_http_body_took(q->r, (size_t)k);
		q->got += (uint64_t)k;
	}
}

static int start_upload(sup_imq *q, sbx_err *err)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return sbx_err_sys(err, -errno, "pipe");
	/* a larger pipe: fewer wake-ups per MiB; the default works too */
	(void)fcntl(p[1], F_SETPIPE_SZ, PIPE_BYTES);
	int fl = fcntl(p[1], F_GETFL);
	sup_im_job *j = fl >= 0 && fcntl(p[1], F_SETFL, fl | O_NONBLOCK) == 0 ? job_new(q, SUP_IM_UPLOAD)
									       : NULL;
	q->wev = j ? event_new(sup_http_base(q->r), p[1], EV_WRITE, on_writable, q) : NULL;
	if (!q->wev) {
		free(j);
		close(p[0]);
		close(p[1]);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	q->wfd = p[1];
	j->rfd = p[0];
	submit(q, j);
	sup_http_body_start(q->r, pump, q);
	return 0;
}

/* ---- a pull: {"ref", "name"} ---- */

/* ref: a registry's ("docker.io/library/python:3.11-slim", or with
 * docker://), or with --image-pull-dir oci:PATH[:TAG] or
 * oci-archive:PATH[:TAG]. */
static int pull_source(sup_imq *q, sup_im_job *j, const char *ref, sbx_err *err)
{
	if (strlen(ref) > SUP_IMG_REF_MAX + 32 || !ref[0])
		return sbx_err_set(err, -EINVAL, "field \"ref\": want 1-%d bytes", SUP_IMG_REF_MAX + 32);
	snprintf(j->ref, sizeof(j->ref), "%.255s", ref);
	const char *path = NULL;
	if (strncmp(ref, "oci:", 4) == 0)
		path = ref + 4;
	else if (strncmp(ref, "oci-archive:", 12) == 0)
		path = ref + 12;
	if (path) {
		if (!q->x->pull_dir)
			return sbx_err_set(err, -EPERM, "ref \"%.255s\": pulls from local paths are off on "
					   "this node (--image-pull-dir)", ref);
		size_t n = strcspn(path, ":");
		if (path[0] != '/' || n >= sizeof(j->local))
			return sbx_err_set(err, -EINVAL, "ref \"%.255s\": want an absolute path", ref);
		memcpy(j->local, path, n);
		j->local[n] = '\0';
		if (path[n] && !sup_img_ref_ok(path + n + 1))
			return sbx_err_set(err, -EINVAL, "ref \"%.255s\": a bad reference after the path", ref);
		snprintf(j->tag, sizeof(j->tag), "%s", path[n] ? path + n + 1 : "");
		snprintf(j->src, sizeof(j->src), "%s", ref); /* its transport; the path is resolved later */
		if (!j->name[0] && j->tag[0])
			snprintf(j->name, sizeof(j->name), "%s", j->tag);
		return 0;
	}
	const char *name = strncmp(ref, "docker://", 9) == 0 ? ref + 9 : ref;
	if (!sup_img_ref_ok(name))
		return sbx_err_set(err, -EINVAL, "ref \"%.255s\": not an image reference (want "
				   "[docker://]REGISTRY/NAME[:TAG], or oci:PATH / oci-archive:PATH)", ref);
	snprintf(j->src, sizeof(j->src), "docker://%s", name);
	if (!j->name[0])
		snprintf(j->name, sizeof(j->name), "%s", name);
	return 0;
}

static int start_pull(sup_imq *q, sbx_err *err)
{
	static const char *const keys[] = { "ref", "name", NULL };
	size_t len = evbuffer_get_length(q->body);
	const char *text = (const char *)evbuffer_pullup(q->body, -1);
	json_error_t je;
	json_t *j = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES, &je);
	SBX_AUTO_JSON json_t *body = j;
	if (!j || !json_is_object(j))
		return sbx_err_set(err, -EINVAL, "body must be a JSON object%s%s", j ? "" : ": ",
				   j ? "" : je.text);
	const char *key;
	json_t *v;
	json_object_foreach(j, key, v) {
		bool ok = false;
		for (size_t i = 0; keys[i]; i++)
			ok |= strcmp(keys[i], key) == 0;
		if (!ok)
			return sbx_err_set(err, -EINVAL, "unknown field \"%.64s\"", key);
	}
	const char *ref = json_string_value(json_object_get(j, "ref"));
	json_t *nm = json_object_get(j, "name");
	if (!ref)
		return sbx_err_set(err, -EINVAL, "field \"ref\": required, a string");
	if (nm && (!json_is_string(nm) || !sup_img_ref_ok(json_string_value(nm))))
		return sbx_err_set(err, -EINVAL, "field \"name\": want 1-255 of [A-Za-z0-9._/:@+-], "
				   "not host or sha256:");
	if (nm) {
		snprintf(q->name, sizeof(q->name), "%s", json_string_value(nm));
		q->named = true;
	}
	sup_im_job *job = job_new(q, SUP_IM_PULL);
	if (!job)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	int r = pull_source(q, job, ref, err);
	if (r < 0) {
		free(job);
		return r;
	}
	sup_http_log_tag(q->r, " ref %.200s", job->ref);
	submit(q, job);
	return 0;
}

static void read_pull_body(void *ud)
{
	sup_imq *q = ud;
	for (;;) {
		struct evbuffer *buf = NULL;
		sbx_err e;
		sbx_err_clear(&e);
		int n = sup_http_body(q->r, 16384, &buf, &e);
		if (n == -EAGAIN)
			return;
		if (n == 0) {
			if (start_pull(q, &e) < 0)
				sup_http_fail(q->r, &e);
			return;
		}
		if (n > 0 && evbuffer_get_length(q->body) + (size_t)n > SUP_IMAGES_PULL_BODY_MAX)
			n = sbx_err_set(&e, -E2BIG, "a pull's body is at most %d bytes",
					SUP_IMAGES_PULL_BODY_MAX);
		if (n > 0 && evbuffer_remove_buffer(buf, q->body, (size_t)n) != n)
			n = sbx_err_set(&e, -ENOMEM, "out of memory");
		if (n < 0) {
			sup_http_fail(q->r, &e);
			return;
		}
		sup_http_body_took(q->r, (size_t)n);
	}
}

int sup_images_act_post(sup_http_req *r, void *state, sbx_err *err)
{
	sup_imq *q = state;
	q->r = r;
	if (q->x->busy > 0)
		return sbx_err_set(err, -EAGAIN, "another image import or pull is running; try again "
				   "when it is done");
	if (q->kind == SUP_IM_UPLOAD)
		return start_upload(q, err);
	q->body = evbuffer_new();
	if (!q->body)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	sup_http_body_start(r, read_pull_body, q);
	return 0;
}
