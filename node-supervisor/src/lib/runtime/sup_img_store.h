/* The image store: OCI images kept under <state>/store as sandbox
 * templates.
 *   store/layers/<diff_id hex>/root   one unpacked layer, shared by every
 *                                     image that has it (an overlay lower)
 *   store/layers/<diff_id hex>/size   its file data in bytes
 *   store/images/<config hex>.json    an image's record: refs, digest,
 *                                     layers, Env, WorkingDir, User, service, size
 *   store/tmp/                        imports and layers being made
 * An image is named by its config digest ("sha256:<hex>", Docker's image
 * id) or by a ref ("busybox:latest"; a ref names one image at a time: an
 * import takes it from the image that had it).
 *
 * Imports (sup_img_import.h) write here; creates read layer paths from
 * worker threads and the loop reads records, so every call is thread-safe
 * (one mutex over the in-memory index; no file I/O under it but the
 * records' small writes). Images in use are pinned by their users (pools,
 * sandboxes) and cannot be deleted; layers no record names are removed by
 * the GC, never while an import runs. Owns store/; it must not touch
 * sandboxes/ or know pools. */
#ifndef SUP_IMG_STORE_H
#define SUP_IMG_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sbx/err.h"
#include "sup_img_digest.h"
#include "sup_img_layer.h"
#include "sup_img_manifest.h"

/* Most images one store holds: an import past it is refused (-ENOSPC). */
#define SUP_IMG_STORE_MAX 4096

typedef struct sup_img_store sup_img_store;

typedef struct sup_img_store_cfg {
	const char *state_dir;     /* resolved, checked by the runc backend */
	sup_img_limits limits;     /* per layer */
	uint64_t max_import_bytes; /* bytes of one streamed import */
} sup_img_store_cfg;

/* An image as the store keeps it (a copy: release it). */
typedef struct sup_image {
	char digest[SUP_IMG_DIGEST_LEN + 1];  /* "sha256:<config hex>" */
	char refs[SUP_IMG_MAX_REFS][SUP_IMG_REF_MAX + 1];
	size_t nrefs;
	char layers[SUP_IMG_MAX_LAYERS][SUP_IMG_HEX_LEN + 1]; /* diff_ids, bottom first */
	size_t nlayers;
	char **env;          /* "KEY=VALUE" */
	size_t nenv;
	char *workdir;       /* NULL: none */
	char *user;          /* NULL: none */
	bool agent_bundled;  /* Entrypoint is /.sbx/sandbox-agent and the image has it */
	char *service;       /* its label dev.sbx.service (sup_img_manifest.h), NULL: none */
	uint64_t size;       /* file data of its layers */
	time_t imported_at;
	unsigned pins;       /* users now (pools, sandboxes) */
} sup_image;

void sup_image_release(sup_image *im);

/* Open (make) store/ below cfg->state_dir, load the records, remove what
 * an interrupted import left in tmp/. */
int sup_img_store_open(const sup_img_store_cfg *cfg, sup_img_store **out, sbx_err *err);
void sup_img_store_free(sup_img_store *s);
const sup_img_store_cfg *sup_img_store_cfg_of(const sup_img_store *s);
/* <state>/store */
const char *sup_img_store_root(const sup_img_store *s);

/* Is name a ref or digest form (not "host", not a path)? Says nothing of
 * whether the store has it. */
bool sup_img_store_is_name(const char *name);
/* Copy the image name names into out: -ENOENT when none. */
int sup_img_store_get(sup_img_store *s, const char *name, sup_image *out, sbx_err *err);
/* How many images; the i-th (in digest order) into out. */
size_t sup_img_store_count(sup_img_store *s);
int sup_img_store_at(sup_img_store *s, size_t i, sup_image *out);
/* Bytes of file data in every layer kept. */
uint64_t sup_img_store_usage(sup_img_store *s);
/* How many layers are kept, and their file data in *bytes (a folder read
 * and a small file per layer: cheap enough for the loop at a few hundred). */
unsigned sup_img_store_layers(sup_img_store *s, uint64_t *bytes);

/* The overlay lower folder of a layer (hex: diff_id). */
int sup_img_store_layer_path(const sup_img_store *s, const char *hex, char *buf, size_t cap,
			     sbx_err *err);

/* Pin (+1) or unpin (-1) the image of digest: a pinned image cannot be
 * deleted. -ENOENT when it is gone (a pin of a deleted image). */
int sup_img_store_pin(sup_img_store *s, const char *digest, int delta);

/* Delete the image name names (by a ref: only that ref goes while the
 * image keeps others; by digest: the image and all its refs). -EBUSY while
 * pinned, -ENOENT unknown. Layers stay until the GC. */
int sup_img_store_delete(sup_img_store *s, const char *name, sbx_err *err);
/* Remove every layer no record names; *freed: their bytes. -EBUSY while
 * an import runs. */
int sup_img_store_gc(sup_img_store *s, uint64_t *freed, unsigned *layers, sbx_err *err);
/* What every GC of this process freed (for /metrics). */
void sup_img_store_gc_totals(sup_img_store *s, uint64_t *bytes, uint64_t *layers);

/* For sup_img_import: the folders, the import count, and committing a
 * finished import's record (refs moved from other images). */
int sup_img_store_dirfd(const sup_img_store *s, const char *sub);
void sup_img_store_import_begin(sup_img_store *s);
void sup_img_store_import_end(sup_img_store *s);
int sup_img_store_commit(sup_img_store *s, const sup_image *im, sbx_err *err);

#endif
