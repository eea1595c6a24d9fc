#include "exec_spec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "env.h"

static void free_strv(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

/* Absent and nil both mean "not given". */
static const msgpack_object *arg(const msgpack_object *args, const char *key)
{
	const msgpack_object *o;

	if (args->type != MSGPACK_OBJECT_MAP)
		return NULL;
	o = sbx_proto_map_get(args, key);
	return o && o->type != MSGPACK_OBJECT_NIL ? o : NULL;
}

static bool is_str(const msgpack_object *o)
{
	return o->type == MSGPACK_OBJECT_STR;
}

/* NUL-terminated copy of a str; -EINVAL when it holds a NUL byte. */
static int dup_str(const msgpack_object *o, const char *what, char **out, sbx_err *err)
{
	*out = sbx_proto_strdup(o);
	if (*out)
		return 0;
	if (memchr(o->via.str.ptr, '\0', o->via.str.size))
		return sbx_err_set(err, -EINVAL, "exec: %s contains a NUL byte", what);
	return sbx_err_sys(err, -ENOMEM, "exec: %s", what);
}

static int parse_argv(const msgpack_object *o, char ***out, sbx_err *err)
{
	const msgpack_object_array *a = &o->via.array;
	char **argv;
	int ret;

	if (o->type != MSGPACK_OBJECT_ARRAY || a->size == 0)
		return sbx_err_set(err, -EINVAL, "exec: argv must be a non-empty array of strings");
	if (a->size > AGENT_EXEC_MAX_ARGS)
		return sbx_err_set(err, -EINVAL, "exec: argv has %u entries, at most %u allowed",
				   a->size, AGENT_EXEC_MAX_ARGS);
	argv = calloc(a->size + 1, sizeof(*argv));
	if (!argv)
		return sbx_err_sys(err, -ENOMEM, "exec: argv");
	for (uint32_t i = 0; i < a->size; i++) {
		if (!is_str(&a->ptr[i])) {
			free_strv(argv);
			return sbx_err_set(err, -EINVAL, "exec: argv[%u] is not a string", i);
		}
		ret = dup_str(&a->ptr[i], "argv", &argv[i], err);
		if (ret < 0) {
			free_strv(argv);
			return ret;
		}
	}
	if (argv[0][0] == '\0') {
		free_strv(argv);
		return sbx_err_set(err, -EINVAL, "exec: argv[0] is empty");
	}
	*out = argv;
	return 0;
}

static int parse_cmd(const msgpack_object *o, char ***out, sbx_err *err)
{
	char **argv;
	int ret;

	if (!is_str(o))
		return sbx_err_set(err, -EINVAL, "exec: cmd must be a string");
	argv = calloc(4, sizeof(*argv));
	if (!argv)
		return sbx_err_sys(err, -ENOMEM, "exec: cmd");
	argv[0] = strdup(AGENT_EXEC_SHELL);
	argv[1] = strdup("-c");
	if (!argv[0] || !argv[1]) {
		free_strv(argv);
		return sbx_err_sys(err, -ENOMEM, "exec: cmd");
	}
	ret = dup_str(o, "cmd", &argv[2], err);
	if (ret < 0) {
		free_strv(argv);
		return ret;
	}
	*out = argv;
	return 0;
}

static int parse_env(const msgpack_object *o, char ***out, sbx_err *err)
{
	const msgpack_object_map *m = &o->via.map;
	char **env;

	if (o->type != MSGPACK_OBJECT_MAP)
		return sbx_err_set(err, -EINVAL, "exec: env must be a map of strings to strings");
	if (m->size > AGENT_EXEC_MAX_ENV)
		return sbx_err_set(err, -EINVAL, "exec: env has %u entries, at most %u allowed",
				   m->size, AGENT_EXEC_MAX_ENV);
	env = calloc(m->size + 1, sizeof(*env));
	if (!env)
		return sbx_err_sys(err, -ENOMEM, "exec: env");
	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
		size_t kl, vl;

		if (!is_str(k) || !is_str(v)) {
			free_strv(env);
			return sbx_err_set(err, -EINVAL, "exec: env must be a map of strings to strings");
		}
		kl = k->via.str.size;
		vl = v->via.str.size;
		if (kl == 0 || memchr(k->via.str.ptr, '=', kl) || memchr(k->via.str.ptr, '\0', kl) ||
		    memchr(v->via.str.ptr, '\0', vl)) {
			free_strv(env);
			return sbx_err_set(err, -EINVAL,
					   "exec: env name \"%.*s\" must be non-empty without '=' or NUL, its value without NUL",
					   (int)(kl > 64 ? 64 : kl), k->via.str.ptr);
		}
		env[i] = malloc(kl + vl + 2);
		if (!env[i]) {
			free_strv(env);
			return sbx_err_sys(err, -ENOMEM, "exec: env");
		}
		memcpy(env[i], k->via.str.ptr, kl);
		env[i][kl] = '=';
		memcpy(env[i] + kl + 1, v->via.str.ptr, vl);
		env[i][kl + vl + 1] = '\0';
	}
	*out = env;
	return 0;
}

static int parse(const msgpack_object *args, char *const *base_env, agent_exec_spec *s, sbx_err *err)
{
	const msgpack_object *argv = arg(args, "argv"), *cmd = arg(args, "cmd");
	const msgpack_object *env = arg(args, "env"), *cwd = arg(args, "cwd");
	const msgpack_object *timeout = arg(args, "timeout_ms"), *in = arg(args, "stdin");
	int ret;

	if (args->type != MSGPACK_OBJECT_MAP && args->type != MSGPACK_OBJECT_NIL)
		return sbx_err_set(err, -EINVAL, "exec: arguments must be a map");
	if (!argv == !cmd)
		return sbx_err_set(err, -EINVAL, "exec: give exactly one of argv and cmd");
	ret = argv ? parse_argv(argv, &s->argv, err) : parse_cmd(cmd, &s->argv, err);
	if (ret < 0)
		return ret;
	s->shell = cmd != NULL;
	if (env) {
		ret = parse_env(env, &s->env_over, err);
		if (ret < 0)
			return ret;
	}
	if (cwd) {
		if (!is_str(cwd) || cwd->via.str.size == 0)
			return sbx_err_set(err, -EINVAL, "exec: cwd must be a non-empty string");
		ret = dup_str(cwd, "cwd", &s->cwd, err);
		if (ret < 0)
			return ret;
	}
	if (timeout) {
		if (timeout->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return sbx_err_set(err, -EINVAL, "exec: timeout_ms must be a non-negative integer");
		if (timeout->via.u64 > AGENT_EXEC_MAX_TIMEOUT_MS)
			return sbx_err_set(err, -EINVAL, "exec: timeout_ms must be at most %llu",
					   (unsigned long long)AGENT_EXEC_MAX_TIMEOUT_MS);
		s->timeout_ms = timeout->via.u64;
	}
	if (in) {
		if (in->type != MSGPACK_OBJECT_BOOLEAN)
			return sbx_err_set(err, -EINVAL, "exec: stdin must be a boolean");
		s->stdin_pipe = in->via.boolean;
	}
	ret = agent_env_merge(base_env, s->env_over, &s->envp, err);
	if (ret < 0)
		return ret;
	for (char **e = s->envp; *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			s->path = *e + 5;
	return 0;
}

int agent_exec_spec_parse(const msgpack_object *args, char *const *base_env,
			  agent_exec_spec *out, sbx_err *err)
{
	int ret;

	memset(out, 0, sizeof(*out));
	ret = parse(args, base_env, out, err);
	if (ret < 0)
		agent_exec_spec_free(out);
	return ret;
}

void agent_exec_spec_free(agent_exec_spec *s)
{
	free_strv(s->argv);
	free_strv(s->env_over);
	free(s->envp);
	free(s->cwd);
	memset(s, 0, sizeof(*s));
}
