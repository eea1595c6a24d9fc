/* A snapshot's manifest in an object store: its catalog row as a small
 * JSON object, written by the node that took it and read by any node
 * sharing the store. Version 1 is a snapshot of the layer alone; version
 * 2 adds "volumes" (the volumes it carries: name, mount, read_only,
 * vol_size, size, sha256 of each archive), written only when it has
 * some, so a node that reads version 1 alone still reads the others. Owns the format only (render, parse with every field
 * checked: the object store is shared, its bytes are not trusted); it must
 * not touch the network, the catalog or files. */
#ifndef SUP_SNAP_MANIFEST_H
#define SUP_SNAP_MANIFEST_H

#include <stddef.h>

#include "sbx/err.h"
#include "sup_catalog.h"

#define SUP_SNAP_MANIFEST_MAX (64u << 10) /* bytes a manifest may have */
#define SUP_SNAP_MANIFEST_VERSION 2 /* the newest read and written */

/* row as JSON (*out: malloc'd, *len bytes, no NUL counted). */
int sup_snap_manifest_render(const sup_catalog_snap *row, char **out, size_t *len, sbx_err *err);

/* The manifest in buf (len bytes) as a row; it must name id. location is
 * left "". -EBADE for anything that is not such a manifest. */
int sup_snap_manifest_parse(const char *buf, size_t len, const char *id, sup_catalog_snap *out,
			    sbx_err *err);

#endif
