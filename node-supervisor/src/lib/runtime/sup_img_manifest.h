/* The JSON documents of an image, parsed with jansson into plain structs:
 * an OCI image layout's index.json, an OCI (or Docker v2 schema 2) image
 * manifest, an image config, and a `docker save` manifest.json.
 * Pure: no I/O; the caller reads each document (bounded) and checks its
 * digest. Strict about what the import relies on (digests, media types,
 * one diff_id per layer), lenient about keys it does not use. */
#ifndef SUP_IMG_MANIFEST_H
#define SUP_IMG_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sup_img_digest.h"

#define SUP_IMG_MAX_LAYERS 64
#define SUP_IMG_MAX_REFS 16
#define SUP_IMG_REF_MAX 255
#define SUP_IMG_DOC_MAX (4u << 20) /* bytes of one JSON document */
#define SUP_IMG_MAX_ENV 1024

/* A blob named by digest (OCI) or by a path in the archive (docker save). */
typedef struct sup_img_desc {
	char hex[SUP_IMG_HEX_LEN + 1]; /* empty: not known before reading */
	char path[128];                /* where it lies in the layout */
	int64_t size;                  /* -1: not given */
} sup_img_desc;

/* One image to import. */
typedef struct sup_img_plan {
	sup_img_desc manifest;         /* OCI: the manifest blob; docker: unused */
	sup_img_desc config;
	sup_img_desc layers[SUP_IMG_MAX_LAYERS];
	size_t nlayers;
	char refs[SUP_IMG_MAX_REFS][SUP_IMG_REF_MAX + 1];
	size_t nrefs;
} sup_img_plan;

typedef struct sup_img_config {
	char diff_ids[SUP_IMG_MAX_LAYERS][SUP_IMG_HEX_LEN + 1];
	size_t ndiff;
	char **env;                    /* "KEY=VALUE", ndenv of them */
	size_t nenv;
	char *workdir;                 /* NULL: none */
	char *user;                    /* NULL: none */
	char *entry0;                  /* Entrypoint[0], NULL: none */
	char *service;                 /* Labels[SUP_IMG_SERVICE_LABEL]: an absolute
					* path, NULL: none */
} sup_img_config;

/* The label naming an image's service: a program (an absolute path in the
 * image) the supervisor starts in each of its sandboxes as it comes up,
 * before it is pooled (images/build's SERVICE: sbx/browser's Chromium). */
#define SUP_IMG_SERVICE_LABEL "dev.sbx.service"
#define SUP_IMG_SERVICE_MAX 255

void sup_img_config_release(sup_img_config *c);

/* Is ref a name the store takes (1-255 of [A-Za-z0-9._/:@+-], starting
 * with a letter or digit, not "host")? */
bool sup_img_ref_ok(const char *ref);

/* index.json: the image manifests it lists (nested indexes are not
 * followed: want_hex names the one index blob to read next when the only
 * entry is an index, e.g. of several platforms). plans[i].manifest and
 * refs (org.opencontainers.image.ref.name) are filled. */
int sup_img_parse_index(const char *json, size_t len, sup_img_plan *plans, size_t cap,
			size_t *n, sbx_err *err);
/* An image index of platforms: the manifest for linux and this machine's
 * architecture into plan->manifest. */
int sup_img_parse_platforms(const char *json, size_t len, sup_img_plan *plan, sbx_err *err);
/* An image manifest: config and layers into plan. */
int sup_img_parse_manifest(const char *json, size_t len, sup_img_plan *plan, sbx_err *err);
int sup_img_parse_config(const char *json, size_t len, sup_img_config *out, sbx_err *err);
/* docker save's manifest.json: each entry's config and layer paths, refs
 * from RepoTags. */
int sup_img_parse_docker(const char *json, size_t len, sup_img_plan *plans, size_t cap,
			 size_t *n, sbx_err *err);

#endif
