#include "sup_options_custom.h"

#include "sbx/proto_reset.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sup_img_store.h"
#include "sup_text.h"

/* A list's items joined by ',' for one emit (no bound on the paths). */
static void emit_joined(const char *const *items, size_t n, const unsigned *sizes,
			sup_opt_emit emit, void *ud)
{
	char *s = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&s, &len);
	if (!f)
		return;
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s%s", i ? "," : "", items[i]);
		if (sizes && sizes[i] != SUP_POOL_SIZE_UNSET)
			fprintf(f, "=%u", sizes[i]);
	}
	if (fclose(f) == 0 && s)
		emit(ud, s);
	free(s);
}

int sup_optc_listen_parse(sup_config *c, const sup_opt *o, const char *label, const char *v,
			  sbx_err *err)
{
	if (sup_config_parse_listen(v, sup_opt_at(c, o->off), o->size, sup_opt_at(c, o->off2), err) < 0)
		return sbx_err_wrap(err, "%s", label);
	return 0;
}

void sup_optc_listen_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud)
{
	if (o->given && !*(const bool *)sup_opt_cat(c, o->given - 1))
		return;
	const char *host = sup_opt_cat(c, o->off);
	char buf[300];
	bool v6 = strchr(host, ':') != NULL;
	snprintf(buf, sizeof(buf), "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "",
		 (unsigned)*(const uint16_t *)sup_opt_cat(c, o->off2));
	emit(ud, buf);
}

/* A pool's size: 0 to 256 ready sandboxes. */
static int pool_size(const char *label, const char *s, unsigned *out, sbx_err *err)
{
	uint64_t v;
	if (sup_parse_size(s, 256, &v, err) < 0)
		return sbx_err_wrap(err, "%s", label);
	*out = (unsigned)v;
	return 0;
}

int sup_optc_images_parse(sup_config *c, const sup_opt *o, const char *label, const char *list,
			  sbx_err *err)
{
	char *buf = sup_config_keep(c, list, strlen(list));
	if (!buf)
		return sbx_err_sys(err, -ENOMEM, "%s", label);
	c->nimages = 0;
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		/* NAME=N: its own pool size (a ref holds no '=') */
		unsigned size = SUP_POOL_SIZE_UNSET;
		char *eq = strrchr(tok, '=');
		if (eq) {
			*eq = '\0';
			if (pool_size(label, eq + 1, &size, err) < 0)
				return err->code;
		}
		if (strcmp(tok, "host") != 0 && tok[0] != '/' && !sup_img_store_is_name(tok))
			return sbx_err_set(err, -EINVAL,
					   "%s: %.200s is neither host, an absolute path nor an image name",
					   label, tok);
		for (size_t i = 0; i < c->nimages; i++)
			if (strcmp(c->images[i], tok) == 0)
				return sbx_err_set(err, -EINVAL, "%s: %s twice", label, tok);
		if (c->nimages == SUP_MAX_IMAGES)
			return sbx_err_set(err, -EINVAL, "%s: more than %d images", label, SUP_MAX_IMAGES);
		c->image_sizes[c->nimages] = size;
		c->images[c->nimages++] = tok;
	}
	if (c->nimages == 0)
		return sbx_err_set(err, -EINVAL, "%s: empty", label);
	return 0;
}

void sup_optc_images_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud)
{
	emit_joined(c->images, c->nimages, c->image_sizes, emit, ud);
}

int sup_optc_pool_parse(sup_config *c, const sup_opt *o, const char *label, const char *arg,
			sbx_err *err)
{
	const char *colon = strchr(arg, ':');
	const char *eq = strrchr(arg, '=');
	sup_pool_spec sp = { 0 };
	if (!colon || !eq || eq < colon)
		return sbx_err_set(err, -EINVAL, "%s %s: want ISOLATION:IMAGE=N, e.g. gvisor:host=2",
				   label, arg);
	if (sup_isolation_parse(arg, (size_t)(colon - arg), &sp.isolation) < 0)
		return sbx_err_set(err, -EINVAL, "%s %s: isolation %.*s: want runc or gvisor", label,
				   arg, (int)(colon - arg), arg);
	size_t ilen = (size_t)(eq - colon - 1);
	char name[SUP_IMG_REF_MAX + 1];
	snprintf(name, sizeof(name), "%.*s", (int)(ilen < sizeof(name) ? ilen : sizeof(name) - 1),
		 colon + 1);
	if (strcmp(name, "host") != 0 && colon[1] != '/' &&
	    (ilen >= sizeof(name) || !sup_img_store_is_name(name)))
		return sbx_err_set(err, -EINVAL, "%s %s: the image is neither host, an absolute "
				   "path nor an image name", label, arg);
	if (pool_size(label, eq + 1, &sp.size, err) < 0)
		return err->code;
	for (size_t i = 0; i < c->npools; i++)
		if (c->pools[i].isolation == sp.isolation && strlen(c->pools[i].image) == ilen &&
		    strncmp(c->pools[i].image, colon + 1, ilen) == 0)
			return sbx_err_set(err, -EINVAL, "%s %s: that pool is given twice", label, arg);
	if (c->npools == SUP_MAX_POOLS)
		return sbx_err_set(err, -EINVAL, "%s: more than %d pools", label, SUP_MAX_POOLS);
	sp.image = sup_config_keep(c, colon + 1, ilen);
	if (!sp.image)
		return sbx_err_sys(err, -ENOMEM, "%s", label);
	c->pools[c->npools++] = sp;
	return 0;
}

void sup_optc_pool_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud)
{
	for (size_t i = 0; i < c->npools; i++) {
		char *s = NULL;
		if (asprintf(&s, "%s:%s=%u", sup_isolation_names[c->pools[i].isolation],
			     c->pools[i].image, c->pools[i].size) < 0)
			return;
		emit(ud, s);
		free(s);
	}
}

void sup_optc_pool_reset(sup_config *c)
{
	c->npools = 0;
}

/* --reuse-paths /a,/b: reset's folders (sbx_proto_reset_path_ok) */
int sup_optc_reuse_parse(sup_config *c, const sup_opt *o, const char *label, const char *arg,
			 sbx_err *err)
{
	char *buf = sup_config_keep(c, arg, strlen(arg));
	if (!buf)
		return sbx_err_sys(err, -ENOMEM, "%s", label);
	c->nreuse_paths = 0;
	const size_t cap = sizeof(c->reuse_paths) / sizeof(c->reuse_paths[0]);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!sbx_proto_reset_path_ok(tok, strlen(tok)))
			return sbx_err_set(err, -EINVAL,
					   "%s: %.200s is not an absolute, normalised folder other than /",
					   label, tok);
		if (c->nreuse_paths == cap)
			return sbx_err_set(err, -EINVAL, "%s: more than %zu folders", label, cap);
		c->reuse_paths[c->nreuse_paths++] = tok;
	}
	if (c->nreuse_paths == 0)
		return sbx_err_set(err, -EINVAL, "%s: empty", label);
	return 0;
}

void sup_optc_reuse_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud)
{
	emit_joined(c->reuse_paths, c->nreuse_paths, NULL, emit, ud);
}

int sup_optc_res_parse(sup_config *c, const sup_opt *o, const char *label, const char *v,
		       sbx_err *err)
{
	return sup_resources_parse_spec(label, v, sup_opt_at(c, o->off), err);
}

void sup_optc_res_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud)
{
	const sup_resources *r = sup_opt_cat(c, o->off);
	char cpus[32], mem[32], disk[32], buf[160];
	sup_resources_format_cpus(r->cpu_milli, cpus, sizeof(cpus));
	sup_resources_format_size(r->memory, mem, sizeof(mem));
	sup_resources_format_size(r->disk, disk, sizeof(disk));
	snprintf(buf, sizeof(buf), "cpus=%s,memory=%s,pids=%u,disk=%s", cpus, mem, (unsigned)r->pids,
		 disk);
	emit(ud, buf);
}

/* The ceiling: the machine's CPUs and memory; the disk images are sparse
 * files of this size (see sup_disk.h). */
void sup_optc_res_max_init(sup_config *c)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	c->res_max.cpu_milli = (uint32_t)(cpus > 0 && cpus < 4096 ? cpus : 1) * 1000u;
	c->res_max.memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 1ull << 30;
	c->res_max.pids = 32768;
	c->res_max.disk = 50ull << 30;
}

int sup_optc_node_parse(sup_config *c, const sup_opt *o, const char *label, const char *v,
			sbx_err *err)
{
	if (sup_nodeid_name_check(v, err) < 0)
		return sbx_err_wrap(err, "%s", label);
	snprintf(sup_opt_at(c, o->off), o->size, "%s", v);
	return 0;
}

void sup_optc_node_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud)
{
	emit(ud, sup_opt_cat(c, o->off));
}

void sup_optc_node_init(sup_config *c)
{
	sup_nodeid_default(c->node_name);
}
