#include "env.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static char *const empty_env[] = { NULL };
static char **base_env;

size_t agent_env_name_len(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return eq ? (size_t)(eq - kv) : strlen(kv);
}

static bool same_name(const char *a, const char *b)
{
	size_t la = agent_env_name_len(a);

	return la == agent_env_name_len(b) && memcmp(a, b, la) == 0;
}

static bool has_name(char *const *env, const char *name)
{
	for (; env && *env; env++)
		if (same_name(*env, name))
			return true;
	return false;
}

int agent_env_init(char *const *env, sbx_err *err)
{
	size_t n = 0, i = 0;
	char **out;

	while (env && env[n])
		n++;
	out = calloc(n + 3, sizeof(*out)); /* + PATH + HOME + NULL */
	if (!out)
		return sbx_err_sys(err, -ENOMEM, "base environment");
	for (size_t k = 0; k < n; k++) {
		/* Entries without '=' are not variables; execve would pass them
		 * on, but no program can read them back. */
		if (!strchr(env[k], '='))
			continue;
		out[i] = strdup(env[k]);
		if (!out[i])
			goto oom;
		i++;
	}
	if (!has_name(out, "PATH=")) {
		out[i] = strdup(AGENT_ENV_DEFAULT_PATH);
		if (!out[i])
			goto oom;
		i++;
	}
	if (!has_name(out, "HOME=")) {
		out[i] = strdup(geteuid() == 0 ? "HOME=/root" : "HOME=/");
		if (!out[i])
			goto oom;
		i++;
	}
	agent_env_free();
	base_env = out;
	return 0;
oom:
	while (i > 0)
		free(out[--i]);
	free(out);
	return sbx_err_sys(err, -ENOMEM, "base environment");
}

char *const *agent_env_base(void)
{
	return base_env ? base_env : empty_env;
}

void agent_env_free(void)
{
	for (char **p = base_env; p && *p; p++)
		free(*p);
	free(base_env);
	base_env = NULL;
}

int agent_env_merge(char *const *base, char *const *over, char ***out, sbx_err *err)
{
	size_t nb = 0, no = 0, i = 0;
	char **env;

	while (base && base[nb])
		nb++;
	while (over && over[no])
		no++;
	env = calloc(nb + no + 1, sizeof(*env));
	if (!env)
		return sbx_err_sys(err, -ENOMEM, "merge environment");
	for (size_t k = 0; k < nb; k++)
		if (!has_name(over, base[k]))
			env[i++] = base[k];
	for (size_t k = 0; k < no; k++) {
		/* A later duplicate in over wins, as with repeated `export`. */
		bool later = false;
		for (size_t j = k + 1; j < no && !later; j++)
			later = same_name(over[k], over[j]);
		if (!later)
			env[i++] = over[k];
	}
	*out = env;
	return 0;
}
