/* The config file (--config FILE): YAML read with libyaml's document
 * loader into the rows of the table, and written back (--print-config)
 * with its emitter. A file is a mapping of option names to scalars, a
 * list for a repeatable option, true/false for a switch; anything else is
 * an error naming the file, the line and the key. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "sbx/cleanup.h"
#include "sup_opt.h"

/* A config file is a few kilobytes; a bound keeps a wrong path (a log, a
 * device) from being read whole. */
#define CONFIG_MAX_BYTES (1u << 20)

typedef struct file_ctx {
	sup_config *c;
	const char *path;
	yaml_document_t *doc;
	bool *set;
	sbx_err *err;
} file_ctx;

static int read_bounded(const char *path, char **out, size_t *len, sbx_err *err)
{
	SBX_AUTO_FCLOSE FILE *f = fopen(path, "re");
	if (!f)
		return sbx_err_sys(err, -errno, "--config %s", path);
	char *buf = malloc(CONFIG_MAX_BYTES + 1);
	if (!buf)
		return sbx_err_sys(err, -ENOMEM, "--config %s", path);
	size_t n = fread(buf, 1, CONFIG_MAX_BYTES + 1, f);
	if (ferror(f) || n > CONFIG_MAX_BYTES) {
		free(buf);
		return n > CONFIG_MAX_BYTES
			       ? sbx_err_set(err, -EINVAL, "--config %s: larger than %u bytes", path,
					     CONFIG_MAX_BYTES)
			       : sbx_err_sys(err, -EIO, "--config %s", path);
	}
	*out = buf;
	*len = n;
	return 0;
}

static size_t line_of(const yaml_node_t *n)
{
	return n->start_mark.line + 1;
}

/* A scalar's text, kept by the config (values outlive the document). */
static const char *scalar(file_ctx *fx, const yaml_node_t *n, const char *key)
{
	const char *s = (const char *)n->data.scalar.value;
	size_t len = n->data.scalar.length;
	if (memchr(s, '\0', len)) {
		sbx_err_set(fx->err, -EINVAL, "%s:%zu: %s: a NUL byte in the value", fx->path, line_of(n),
			    key);
		return NULL;
	}
	if (len == 0 && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		sbx_err_set(fx->err, -EINVAL, "%s:%zu: %s: no value", fx->path, line_of(n), key);
		return NULL;
	}
	const char *kept = sup_config_keep(fx->c, s, len);
	if (!kept)
		sbx_err_set(fx->err, -ENOMEM, "%s: out of memory", fx->path);
	return kept;
}

static int set_one(file_ctx *fx, const sup_opt *o, const yaml_node_t *v)
{
	char label[PATH_MAX + 96];
	snprintf(label, sizeof(label), "%s:%zu: %s", fx->path, line_of(v), o->name);
	if (v->type != YAML_SCALAR_NODE)
		return sbx_err_set(fx->err, -EINVAL, "%s: want %s, not a %s", label,
				   o->type == SUP_OPT_FLAG ? "true or false" : "one value",
				   v->type == YAML_SEQUENCE_NODE ? "list" : "mapping");
	const char *s = scalar(fx, v, o->name);
	if (!s)
		return fx->err->code;
	return sup_opt_set(fx->c, o, label, s, fx->err);
}

static int set_key(file_ctx *fx, const yaml_node_t *k, const yaml_node_t *v)
{
	if (k->type != YAML_SCALAR_NODE)
		return sbx_err_set(fx->err, -EINVAL, "%s:%zu: a key is not a name", fx->path, line_of(k));
	const char *key = (const char *)k->data.scalar.value;
	const sup_opt *o = sup_opt_find(key);
	if (!o || !sup_opt_is_key(o))
		return sbx_err_set(fx->err, -EINVAL, "%s:%zu: %.64s: %s", fx->path, line_of(k), key,
				   o ? "the command line's only, not a key of the file"
				     : "not an option (sandbox-supervisor --help lists them)");
	size_t row = (size_t)(o - sup_options);
	if (fx->set[row])
		return sbx_err_set(fx->err, -EINVAL, "%s:%zu: %s: given twice", fx->path, line_of(k), key);
	fx->set[row] = true;
	if (!(o->flags & SUP_OPT_REPEAT))
		return set_one(fx, o, v);
	if (v->type != YAML_SEQUENCE_NODE)
		return sbx_err_set(fx->err, -EINVAL, "%s:%zu: %s: want a list (- VALUE per line)",
				   fx->path, line_of(v), key);
	for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
	     it++) {
		const yaml_node_t *item = yaml_document_get_node(fx->doc, *it);
		if (item && set_one(fx, o, item) < 0)
			return fx->err->code;
	}
	return 0;
}

static int apply_doc(file_ctx *fx)
{
	const yaml_node_t *root = yaml_document_get_root_node(fx->doc);
	if (!root) /* empty, or comments only */
		return 0;
	if (root->type != YAML_MAPPING_NODE)
		return sbx_err_set(fx->err, -EINVAL, "%s:%zu: want a mapping of option: value", fx->path,
				   line_of(root));
	for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
	     p++) {
		const yaml_node_t *k = yaml_document_get_node(fx->doc, p->key);
		const yaml_node_t *v = yaml_document_get_node(fx->doc, p->value);
		if (!k || !v)
			return sbx_err_set(fx->err, -EINVAL, "%s: a broken document", fx->path);
		if (set_key(fx, k, v) < 0)
			return fx->err->code;
	}
	return 0;
}

int sup_config_load_file(sup_config *c, const char *path, bool *set, sbx_err *err)
{
	SBX_AUTO_FREE char *text = NULL;
	size_t len = 0;
	if (read_bounded(path, &text, &len, err) < 0)
		return err->code;
	yaml_parser_t ps;
	yaml_document_t doc;
	if (!yaml_parser_initialize(&ps))
		return sbx_err_set(err, -ENOMEM, "--config %s: out of memory", path);
	yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
	if (!yaml_parser_load(&ps, &doc)) {
		int rc = sbx_err_set(err, -EINVAL, "%s:%zu: %s", path, ps.problem_mark.line + 1,
				     ps.problem ? ps.problem : "not YAML");
		yaml_parser_delete(&ps);
		return rc;
	}
	file_ctx fx = { c, path, &doc, set, err };
	int rc = apply_doc(&fx);
	yaml_document_delete(&doc);
	/* one document: a second one is a mistake, not more options */
	if (rc == 0 && yaml_parser_load(&ps, &doc)) {
		if (yaml_document_get_root_node(&doc))
			rc = sbx_err_set(err, -EINVAL, "%s: one YAML document, not several", path);
		yaml_document_delete(&doc);
	}
	yaml_parser_delete(&ps);
	return rc;
}

/* --print-config: libyaml's emitter quotes what needs quoting. */
typedef struct emit_ctx {
	yaml_emitter_t *em;
	bool ok;
} emit_ctx;

/* The emitter owns an event it is given, even when it fails. */
static void emit_event(emit_ctx *e, int ok_init, yaml_event_t *ev)
{
	if (!ok_init)
		e->ok = false;
	else if (!e->ok)
		yaml_event_delete(ev);
	else if (!yaml_emitter_emit(e->em, ev))
		e->ok = false;
}

static void emit_scalar(void *ud, const char *value)
{
	emit_ctx *e = ud;
	yaml_event_t ev;
	if (!e->ok)
		return;
	emit_event(e, yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)value,
						   (int)strlen(value), 1, 1, YAML_ANY_SCALAR_STYLE),
		   &ev);
}

/* A repeatable option's values counted first: none, none written. */
static void count_one(void *ud, const char *value)
{
	(*(size_t *)ud)++;
}

static void write_row(emit_ctx *e, const sup_config *c, const sup_opt *o)
{
	yaml_event_t ev;
	size_t n = 0;
	sup_opt_show(c, o, count_one, &n);
	if (n == 0)
		return;
	emit_scalar(e, o->name);
	if (!(o->flags & SUP_OPT_REPEAT)) {
		sup_opt_show(c, o, emit_scalar, e);
		return;
	}
	emit_event(e, yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE), &ev);
	sup_opt_show(c, o, emit_scalar, e);
	emit_event(e, yaml_sequence_end_event_initialize(&ev), &ev);
}

int sup_config_write(const sup_config *c, FILE *out, bool secrets, sbx_err *err)
{
	yaml_emitter_t em;
	yaml_event_t ev;
	if (!yaml_emitter_initialize(&em))
		return sbx_err_set(err, -ENOMEM, "config: out of memory");
	yaml_emitter_set_output_file(&em, out);
	yaml_emitter_set_unicode(&em, 1);
	emit_ctx e = { &em, true };
	emit_event(&e, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING), &ev);
	emit_event(&e, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1), &ev);
	emit_event(&e, yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE),
		   &ev);
	for (size_t i = 0; i < sup_noptions; i++) {
		const sup_opt *o = &sup_options[i];
		if (sup_opt_is_key(o) && (secrets || !(o->flags & SUP_OPT_SECRET)))
			write_row(&e, c, o);
	}
	emit_event(&e, yaml_mapping_end_event_initialize(&ev), &ev);
	emit_event(&e, yaml_document_end_event_initialize(&ev, 1), &ev);
	emit_event(&e, yaml_stream_end_event_initialize(&ev), &ev);
	if (e.ok && !yaml_emitter_flush(&em))
		e.ok = false;
	yaml_emitter_delete(&em);
	fflush(out);
	return e.ok ? 0 : sbx_err_set(err, -EIO, "config: cannot write it");
}
