/* Inside the images family: the request state its parsers fill, and the
 * jobs run on the images' worker (sup_images_load.c). */
#ifndef SUP_IMAGES_INT_H
#define SUP_IMAGES_INT_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "sup_images.h"
#include "sup_img_import.h"

struct evbuffer;
struct event;

/* A pull's JSON body. */
#define SUP_IMAGES_PULL_BODY_MAX (64 * 1024)

typedef enum sup_im_kind {
	SUP_IM_UPLOAD = 1, /* an archive streamed in the body */
	SUP_IM_PULL,       /* {"ref"}: skopeo copies it into a layout, imported from there */
	SUP_IM_GC,         /* after a DELETE */
} sup_im_kind;

typedef struct sup_im_job sup_im_job;

typedef struct sup_imq {
	sup_http_req *r;
	sup_images_ctx *x;
	sup_im_kind kind;
	char name[SUP_IMG_REF_MAX + 1]; /* {ref} decoded, or ?name= */
	bool named;
	/* PUT /v1/pools/{image} */
	unsigned size;
	sup_isolation isolation;
	/* a pull's body, read whole (bounded) */
	struct evbuffer *body;
	/* an upload: the pipe's end we write, waiting for room */
	int wfd;
	struct event *wev;
	uint64_t got;
	bool body_done;
	sup_im_job *job; /* in flight on the worker */
	/* DELETE: what it removed */
	char deleted[SUP_IMG_DIGEST_LEN + 1];
} sup_imq;

struct sup_im_job {
	sup_job job;
	sup_imq *q;       /* NULL once the request is over: done() only frees */
	sup_images_ctx *x;
	sup_im_kind kind;
	int rfd;          /* an upload's pipe, read on the worker */
	atomic_bool cancelled;
	char src[PATH_MAX + 32]; /* a pull's source, skopeo's transport:name */
	char local[PATH_MAX];    /* an oci:/oci-archive: source's path ("": a registry) */
	char tag[SUP_IMG_REF_MAX + 1]; /* its ":reference" ("": none) */
	char ref[SUP_IMG_REF_MAX + 1]; /* what the request asked for (messages) */
	char name[SUP_IMG_REF_MAX + 1]; /* the name to give; "" none */
	int rc;
	sbx_err err;
	sup_img_imported out;
	uint64_t freed;
	unsigned layers;
	long ms;
};

/* POST /v1/images once parsed: start the upload's pump or read the pull's
 * body; the answer comes from the job's end. */
int sup_images_act_post(sup_http_req *r, void *state, sbx_err *err);
/* DELETE: the GC on the worker; the answer comes from its end. */
int sup_images_start_gc(sup_imq *q, sbx_err *err);
/* Cancel what q has in flight (the request is over). */
void sup_images_load_release(sup_imq *q);
/* The answer to a finished import or pull, GC (sup_images.c). */
void sup_images_answer(sup_imq *q, sup_im_job *j);

#endif
