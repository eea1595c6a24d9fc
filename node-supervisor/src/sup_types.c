#include "sup_types.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const sup_isolation_names[SUP_ISO_N] = { "runc", "gvisor" };

int sup_isolation_parse(const char *s, size_t len, sup_isolation *out)
{
	for (int i = 0; i < SUP_ISO_N; i++) {
		if (strlen(sup_isolation_names[i]) == len && memcmp(s, sup_isolation_names[i], len) == 0) {
			*out = (sup_isolation)i;
			return 0;
		}
	}
	return -EINVAL;
}

void sup_env_free(sup_env *e)
{
	for (size_t i = 0; i < e->n; i++) {
		free(e->v[i].key);
		free(e->v[i].val);
	}
	free(e->v);
	e->v = NULL;
	e->n = 0;
}

int sup_env_copy(const sup_env *src, sup_env *dst)
{
	dst->v = NULL;
	dst->n = 0;
	if (src->n == 0)
		return 0;
	dst->v = calloc(src->n, sizeof(*dst->v));
	if (!dst->v)
		return -ENOMEM;
	for (size_t i = 0; i < src->n; i++) {
		dst->v[i].key = strdup(src->v[i].key);
		dst->v[i].val = strdup(src->v[i].val);
		dst->n = i + 1;
		if (!dst->v[i].key || !dst->v[i].val) {
			sup_env_free(dst);
			return -ENOMEM;
		}
	}
	return 0;
}

bool sup_env_has(const sup_env *e, const char *key)
{
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->v[i].key, key) == 0)
			return true;
	return false;
}

const char *const sup_rlimit_names[SUP_RLIMIT_N] = { "nofile", "nproc", "fsize", "cpu" };

void sup_exec_spec_free(sup_exec_spec *s)
{
	if (s->argv) {
		for (size_t i = 0; i < s->argc; i++)
			free(s->argv[i]);
		free(s->argv);
	}
	free(s->cmd);
	free(s->cwd);
	free(s->stdin_data);
	free(s->user);
	sup_env_free(&s->env);
	memset(s, 0, sizeof(*s));
}
