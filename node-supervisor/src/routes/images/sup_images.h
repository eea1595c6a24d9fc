/* The images routes: POST /v1/images (a streamed oci-archive or docker
 * save upload, or {"ref"} pulled with skopeo), GET /v1/images,
 * GET/DELETE /v1/images/{ref} (the ref one path segment, percent-encoded:
 * '/' as %2F) and PUT /v1/pools/{image}.
 *
 * Images are the node's: any tenant lists and reads those it may use
 * (its "images"); only the admin tenant imports, pulls, deletes and sizes
 * pools. Imports, pulls and the GC that follows a delete run on a worker
 * thread of their own (one at a time), never on the loop nor on the
 * runtime's workers; an upload reaches it through a pipe, so the tarball is
 * never whole in memory. It reads and writes the image store
 * (sup_img_store, thread-safe) directly; pools only through the core. */
#ifndef SUP_IMAGES_H
#define SUP_IMAGES_H

#include <stdint.h>

#include "sup_core.h"
#include "sup_http.h"
#include "sup_img_store.h"
#include "sup_workers.h"

typedef struct sup_images_ctx {
	sup_core *core;
	sup_img_store *store;
	sup_workers *worker;       /* one thread: imports, pulls, GC */
	uint64_t max_import;       /* bytes of one upload (--image-max-import) */
	const char *skopeo;        /* skopeo's binary */
	const char *pull_dir;      /* resolved; oci:/oci-archive: pulls below it; NULL: none */
	unsigned pull_timeout_ms;  /* skopeo's deadline */
	unsigned busy;             /* imports and pulls a request waits for (loop only) */
} sup_images_ctx;

extern const sup_http_family sup_images_family;

#endif
