/* Importing images into the store (sup_img_store.h): from an OCI image
 * layout folder, or from a stream holding an OCI layout tarball
 * (`oci-archive`) or a `docker save` tarball (either maybe compressed).
 *
 * A stream is read once, through libarchive, by a read callback (the
 * upload route hands its request body over the same way): the members an
 * import uses (index.json, oci-layout, manifest.json, blobs/sha256/<hex>,
 * <hex>.json, <hex>/layer.tar) are staged below store/tmp, bounded by
 * max_import_bytes, the rest skipped. Then every document and blob is
 * checked against its digest (manifests, configs, OCI layer blobs; every
 * layer's tar against the config's diff_id), each layer the store lacks is
 * unpacked (sup_img_layer.h) into store/tmp and renamed into store/layers
 * when whole, and the image's record is committed. Blocking: run it on a
 * worker thread, never on the loop. Owns the import flow; it must not
 * parse JSON itself or write outside store/. */
#ifndef SUP_IMG_IMPORT_H
#define SUP_IMG_IMPORT_H

#include <stddef.h>
#include <sys/types.h>

#include "sbx/err.h"
#include "sup_img_store.h"

#define SUP_IMG_IMPORT_MAX 8 /* images in one archive or layout */

/* Next bytes of the stream into buf (at most cap): their count, 0 at the
 * end, or a negative errno (err may say why). */
typedef ssize_t (*sup_img_read_fn)(void *ud, void *buf, size_t cap, sbx_err *err);

typedef struct sup_img_imported {
	char digests[SUP_IMG_IMPORT_MAX][SUP_IMG_DIGEST_LEN + 1];
	size_t n;
	unsigned layers_new;    /* unpacked by this import */
	unsigned layers_shared; /* the store had them already */
} sup_img_imported;

/* ref (NULL: the refs the archive names): the one name to give an archive
 * of one image. */
int sup_img_import_stream(sup_img_store *s, sup_img_read_fn read, void *ud, const char *ref,
			  sup_img_imported *out, sbx_err *err);
/* A folder is read as an OCI layout in place; a file as a stream. */
int sup_img_import_path(sup_img_store *s, const char *path, const char *ref,
			sup_img_imported *out, sbx_err *err);

#endif
