#include "sup_opt.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "sup_text.h"

const sup_opt *sup_opt_find(const char *name)
{
	for (size_t i = 0; i < sup_noptions; i++)
		if (sup_options[i].name && strcmp(sup_options[i].name, name) == 0)
			return &sup_options[i];
	return NULL;
}

/* An integer field of 1, 2, 4 or 8 bytes (bool, uint16_t, unsigned,
 * size_t, uint64_t): the table gives each row its field's size. */
static void put_uint(void *p, size_t size, uint64_t v)
{
	switch (size) {
	case 1: *(uint8_t *)p = (uint8_t)v; break;
	case 2: *(uint16_t *)p = (uint16_t)v; break;
	case 4: *(uint32_t *)p = (uint32_t)v; break;
	default: *(uint64_t *)p = v; break;
	}
}

static uint64_t get_uint(const void *p, size_t size)
{
	switch (size) {
	case 1: return *(const uint8_t *)p;
	case 2: return *(const uint16_t *)p;
	case 4: return *(const uint32_t *)p;
	default: return *(const uint64_t *)p;
	}
}

static int choice_of(const sup_opt *o, const char *label, const char *v, sbx_err *err)
{
	for (int i = 0; o->choices[i]; i++)
		if (strcmp(o->choices[i], v) == 0)
			return i;
	char want[160] = "";
	for (int i = 0; o->choices[i]; i++)
		snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s",
			 i == 0 ? "" : o->choices[i + 1] ? ", " : " or ", o->choices[i]);
	return sbx_err_set(err, -EINVAL, "%s %.200s: %s", label, v, want);
}

static int set_number(sup_config *c, const sup_opt *o, const char *label, const char *v,
		      sbx_err *err)
{
	uint64_t n = 0;
	if (o->type == SUP_OPT_SECS) {
		unsigned ms;
		if (sup_config_parse_secs(v, (unsigned)o->lo, (unsigned)o->hi, &ms, err) < 0)
			return sbx_err_wrap(err, "%s", label);
		n = ms;
	} else {
		if (sup_parse_size(v, o->hi, &n, err) < 0)
			return sbx_err_wrap(err, "%s", label);
		if (n < o->lo)
			return sbx_err_set(err, -EINVAL, "%s %s: at least %llu", label, v,
					   (unsigned long long)o->lo);
		n *= o->scale ? o->scale : 1;
	}
	put_uint(sup_opt_at(c, o->off), o->size, n);
	return 0;
}

static int set_strs(sup_config *c, const sup_opt *o, const char *label, const char *v,
		    sbx_err *err)
{
	size_t *n = sup_opt_at(c, o->off2);
	if (*n >= o->cap)
		return sbx_err_set(err, -EINVAL, "%s: at most %u", label, o->cap);
	if (o->check && o->check(label, v, err) < 0)
		return err->code;
	((const char **)sup_opt_at(c, o->off))[(*n)++] = v;
	return 0;
}

int sup_opt_set(sup_config *c, const sup_opt *o, const char *label, const char *value,
		sbx_err *err)
{
	int rc = 0;
	switch (o->type) {
	case SUP_OPT_FLAG:
		if (value && strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
			return sbx_err_set(err, -EINVAL, "%s %.200s: want true or false", label, value);
		put_uint(sup_opt_at(c, o->off), o->size, !value || strcmp(value, "true") == 0);
		break;
	case SUP_OPT_STR:
		if (o->choices && (rc = choice_of(o, label, value, err)) < 0)
			return rc;
		if (o->check && o->check(label, value, err) < 0)
			return err->code;
		*(const char **)sup_opt_at(c, o->off) = value;
		break;
	case SUP_OPT_STRS:
		rc = set_strs(c, o, label, value, err);
		break;
	case SUP_OPT_UINT:
	case SUP_OPT_SIZE:
	case SUP_OPT_SECS:
		rc = set_number(c, o, label, value, err);
		break;
	case SUP_OPT_ENUM:
		if ((rc = choice_of(o, label, value, err)) < 0)
			return rc;
		put_uint(sup_opt_at(c, o->off), o->size, (uint64_t)rc);
		rc = 0;
		break;
	case SUP_OPT_CUSTOM:
		rc = o->parse(c, o, label, value, err);
		break;
	default:
		return sbx_err_set(err, -EINVAL, "%s: not an option", label);
	}
	if (rc == 0 && o->given)
		*(bool *)sup_opt_at(c, o->given - 1) = true;
	return rc;
}

void sup_opt_reset(sup_config *c, const sup_opt *o)
{
	if (o->type == SUP_OPT_STRS)
		*(size_t *)sup_opt_at(c, o->off2) = 0;
	else if (o->reset)
		o->reset(c);
}

/* ms as seconds: "2", "0.25", "0.001" */
static void secs_text(uint64_t ms, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%llu.%03llu", (unsigned long long)(ms / 1000),
			 (unsigned long long)(ms % 1000));
	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = '\0';
}

void sup_opt_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud)
{
	char buf[64];
	const void *p = sup_opt_cat(c, o->off);
	switch (o->type) {
	case SUP_OPT_FLAG:
		emit(ud, get_uint(p, o->size) ? "true" : "false");
		return;
	case SUP_OPT_STR:
		if (*(const char *const *)p)
			emit(ud, *(const char *const *)p);
		return;
	case SUP_OPT_STRS: {
		size_t n = *(const size_t *)sup_opt_cat(c, o->off2);
		for (size_t i = 0; i < n; i++)
			emit(ud, ((const char *const *)p)[i]);
		return;
	}
	case SUP_OPT_UINT:
		snprintf(buf, sizeof(buf), "%llu",
			 (unsigned long long)(get_uint(p, o->size) / (o->scale ? o->scale : 1)));
		break;
	case SUP_OPT_SIZE:
		sup_resources_format_size(get_uint(p, o->size), buf, sizeof(buf));
		break;
	case SUP_OPT_SECS:
		secs_text(get_uint(p, o->size), buf, sizeof(buf));
		break;
	case SUP_OPT_ENUM:
		emit(ud, o->choices[get_uint(p, o->size)]);
		return;
	case SUP_OPT_CUSTOM:
		o->show(c, o, emit, ud);
		return;
	default:
		return;
	}
	emit(ud, buf);
}
