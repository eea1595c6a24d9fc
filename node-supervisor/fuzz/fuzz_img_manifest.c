/* An image's JSON documents (sup_img_manifest) under libFuzzer: they come
 * from an archive a client uploads or a registry a pull reaches. Input: a
 * byte choosing the document (index.json, an index of platforms, a
 * manifest, a config, docker save's manifest.json), then its bytes.
 * Checks, besides the sanitizers: a refusal has a message; what is
 * accepted stays within the bounds of sup_img_plan and sup_img_config,
 * names blobs by 64 lowercase hex digits or by a relative path without
 * "..", keeps only refs the store takes, Env entries of KEY=VALUE and an
 * absolute WorkingDir. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sup_img_manifest.h"

#define CHECK(x) \
	do { \
		if (!(x)) \
			abort(); \
	} while (0)

#define PLANS 4

/* min_size: -1 (not given), or -2 for a manifest that is a nested index. */
static void check_desc(const sup_img_desc *d, int64_t min_size)
{
	size_t hl = strnlen(d->hex, sizeof(d->hex)), pl = strnlen(d->path, sizeof(d->path));
	CHECK(hl < sizeof(d->hex) && pl < sizeof(d->path));
	CHECK(hl == 0 || (hl == SUP_IMG_HEX_LEN && strspn(d->hex, "0123456789abcdef") == hl));
	CHECK(d->path[0] != '/' && !strstr(d->path, ".."));
	CHECK(d->size >= min_size);
}

static void check_plan(const sup_img_plan *p)
{
	check_desc(&p->manifest, -2);
	check_desc(&p->config, -1);
	CHECK(p->nlayers <= SUP_IMG_MAX_LAYERS && p->nrefs <= SUP_IMG_MAX_REFS);
	for (size_t i = 0; i < p->nlayers; i++)
		check_desc(&p->layers[i], -1);
	for (size_t i = 0; i < p->nrefs; i++)
		CHECK(sup_img_ref_ok(p->refs[i]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > SUP_IMG_DOC_MAX)
		return 0;
	const char *json = (const char *)data + 1;
	size_t len = size - 1, n = 0;
	static sup_img_plan plans[PLANS];
	sup_img_config cfg;
	sbx_err e = { 0 };
	int rc;
	memset(plans, 0, sizeof(plans));
	switch (data[0] % 5) {
	case 0: rc = sup_img_parse_index(json, len, plans, PLANS, &n, &e); break;
	case 1: rc = sup_img_parse_platforms(json, len, &plans[0], &e), n = 1; break;
	case 2: rc = sup_img_parse_manifest(json, len, &plans[0], &e), n = 1; break;
	case 3: rc = sup_img_parse_docker(json, len, plans, PLANS, &n, &e); break;
	default:
		rc = sup_img_parse_config(json, len, &cfg, &e);
		if (rc < 0)
			break;
		CHECK(cfg.ndiff <= SUP_IMG_MAX_LAYERS && cfg.nenv <= SUP_IMG_MAX_ENV);
		for (size_t i = 0; i < cfg.ndiff; i++)
			CHECK(strlen(cfg.diff_ids[i]) == SUP_IMG_HEX_LEN);
		for (size_t i = 0; i < cfg.nenv; i++)
			CHECK(cfg.env[i][0] != '=' && strchr(cfg.env[i], '='));
		CHECK(!cfg.workdir || cfg.workdir[0] == '/');
		sup_img_config_release(&cfg);
		return 0;
	}
	if (rc < 0) {
		CHECK(e.msg[0]);
		return 0;
	}
	CHECK(n <= PLANS);
	for (size_t i = 0; i < n; i++)
		check_plan(&plans[i]);
	return 0;
}
