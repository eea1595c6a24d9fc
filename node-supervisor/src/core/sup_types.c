#include "sup_types.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void sup_env_free(sup_env *e)
{
	for (size_t i = 0; i < e->n; i++) {
		free(e->v[i].key);
		/* a value may be a secret's (sup_core_secrets.h): none stays in freed memory */
		if (e->v[i].val)
			explicit_bzero(e->v[i].val, strlen(e->v[i].val));
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

int sup_env_under(sup_env *e, const sup_env *base)
{
	if (base->n == 0)
		return 0;
	sup_kv *v = calloc(e->n + base->n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	size_t n = 0;
	for (size_t i = 0; i < base->n; i++) {
		if (sup_env_has(e, base->v[i].key))
			continue;
		v[n].key = strdup(base->v[i].key);
		v[n].val = strdup(base->v[i].val);
		if (!v[n].key || !v[n].val) {
			sup_env tmp = { v, n + 1 };
			sup_env_free(&tmp);
			return -ENOMEM;
		}
		n++;
	}
	if (e->n)
		memcpy(v + n, e->v, e->n * sizeof(*v));
	free(e->v);
	e->v = v;
	e->n += n;
	return 0;
}

bool sup_env_has(const sup_env *e, const char *key)
{
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->v[i].key, key) == 0)
			return true;
	return false;
}

void sup_secret_binds_free(sup_secret_binds *b)
{
	free(b->v);
	b->v = NULL;
	b->n = 0;
}

void sup_create_req_free(sup_create_req *r)
{
	free(r->image);
	sup_env_free(&r->env);
	if (r->network) {
		sup_netpol_free(r->network);
		free(r->network);
	}
	sup_mcp_servers_free(&r->mcp);
	sup_vol_mounts_free(&r->volumes);
	sup_secret_binds_free(&r->secrets);
	free(r->snapshot);
	free(r->seed);
	free(r->acquire);
	free(r->vol_seeds);
	memset(r, 0, sizeof(*r));
}

void sup_exec_spec_free(sup_exec_spec *s)
{
	if (s->x.argv) {
		for (size_t i = 0; i < s->x.argc; i++)
			free(s->x.argv[i]);
		free(s->x.argv);
	}
	free(s->x.cmd);
	free(s->x.cwd);
	free(s->stdin_data);
	free(s->x.user);
	sup_env_free(&s->x.env);
	memset(s, 0, sizeof(*s));
}

void sup_mcp_server_free(sup_mcp_server *s)
{
	free(s->name);
	for (size_t i = 0; i < s->argc; i++)
		free(s->argv[i]);
	free(s->argv);
	sup_env_free(&s->env);
	free(s->cwd);
	memset(s, 0, sizeof(*s));
}

void sup_mcp_servers_free(sup_mcp_servers *s)
{
	for (size_t i = 0; i < s->n; i++)
		sup_mcp_server_free(&s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}
