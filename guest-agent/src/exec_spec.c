#include "exec_spec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "env.h"
#include "pty.h"

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
		if (a->ptr[i].via.str.size >= AGENT_EXEC_MAX_ARG_LEN) {
			free_strv(argv);
			return sbx_err_set(err, -EINVAL, "exec: argv[%u] is %u bytes, at most %u allowed", i,
					   a->ptr[i].via.str.size, AGENT_EXEC_MAX_ARG_LEN - 1);
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
	if (o->via.str.size >= AGENT_EXEC_MAX_ARG_LEN)
		return sbx_err_set(err, -EINVAL, "exec: cmd is %u bytes, at most %u allowed", o->via.str.size,
				   AGENT_EXEC_MAX_ARG_LEN - 1);
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
		if (kl + vl + 1 >= AGENT_EXEC_MAX_ARG_LEN) {
			free_strv(env);
			return sbx_err_set(err, -EINVAL, "exec: env %.*s is %zu bytes, at most %u allowed",
					   (int)(kl > 64 ? 64 : kl), k->via.str.ptr, kl + vl + 1,
					   AGENT_EXEC_MAX_ARG_LEN - 1);
		}
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

static int parse_user(const msgpack_object *o, char **out, sbx_err *err)
{
	if (!is_str(o) || o->via.str.size == 0 || o->via.str.size > AGENT_EXEC_MAX_USER)
		return sbx_err_set(err, -EINVAL, "exec: user must be a user name or uid of 1..%u characters",
				   AGENT_EXEC_MAX_USER);
	return dup_str(o, "user", out, err);
}

/* {"nofile": 1024, "cpu": 10, ...}: soft and hard limit alike; "unlimited"
 * for none. Whether a hard limit above the sandbox's may be set is the
 * jail's check. */
static int parse_rlimits(const msgpack_object *o, agent_jail_rlimit *out, sbx_err *err)
{
	const msgpack_object_map *m = &o->via.map;

	if (o->type != MSGPACK_OBJECT_MAP)
		return sbx_err_set(err, -EINVAL, "exec: rlimits must be a map of limit names to integers");
	for (uint32_t i = 0; i < m->size; i++) {
		const msgpack_object *k = &m->ptr[i].key, *v = &m->ptr[i].val;
		char name[16];
		int id = -1;

		if (is_str(k) && k->via.str.size < sizeof(name)) {
			memcpy(name, k->via.str.ptr, k->via.str.size);
			name[k->via.str.size] = '\0';
			id = agent_jail_rlimit_by_name(name);
		}
		if (id < 0)
			return sbx_err_set(err, -EINVAL, "exec: unknown rlimit \"%.*s\" (nofile, nproc, fsize, cpu)",
					   is_str(k) ? (int)(k->via.str.size > 32 ? 32 : k->via.str.size) : 1,
					   is_str(k) ? k->via.str.ptr : "?");
		if (out[id].set)
			return sbx_err_set(err, -EINVAL, "exec: rlimit %s given twice", name);
		if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 < (uint64_t)RLIM_INFINITY) {
			out[id].soft = out[id].hard = (rlim_t)v->via.u64;
		} else if (is_str(v) && v->via.str.size == 9 && memcmp(v->via.str.ptr, "unlimited", 9) == 0) {
			out[id].soft = out[id].hard = RLIM_INFINITY;
		} else {
			return sbx_err_set(err, -EINVAL, "exec: rlimit %s must be a non-negative integer or \"unlimited\"",
					   name);
		}
		out[id].set = true;
	}
	return 0;
}

static int parse_dim(const msgpack_object *pty, const char *key, uint16_t def, uint16_t *out, sbx_err *err)
{
	const msgpack_object *v = arg(pty, key);

	if (!v) {
		*out = def;
		return 0;
	}
	if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 < 1 || v->via.u64 > UINT16_MAX)
		return sbx_err_set(err, -EINVAL, "exec: pty %s must be an integer 1..%u", key, UINT16_MAX);
	*out = (uint16_t)v->via.u64;
	return 0;
}

int agent_exec_spec_parse_size(const msgpack_object *o, uint16_t *cols, uint16_t *rows, sbx_err *err)
{
	int ret;

	if (o->type != MSGPACK_OBJECT_MAP)
		return sbx_err_set(err, -EINVAL, "exec: pty must be a map {\"cols\", \"rows\"}");
	ret = parse_dim(o, "cols", *cols, cols, err);
	if (ret < 0)
		return ret;
	return parse_dim(o, "rows", *rows, rows, err);
}

static int parse(const msgpack_object *args, char *const *base_env, agent_exec_spec *s, sbx_err *err)
{
	const msgpack_object *argv = arg(args, "argv"), *cmd = arg(args, "cmd");
	const msgpack_object *env = arg(args, "env"), *cwd = arg(args, "cwd");
	const msgpack_object *timeout = arg(args, "timeout_ms"), *in = arg(args, "stdin");
	const msgpack_object *user = arg(args, "user"), *allow_root = arg(args, "allow_root");
	const msgpack_object *rlimits = arg(args, "rlimits"), *pty = arg(args, "pty");
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
	if (user) {
		ret = parse_user(user, &s->user, err);
		if (ret < 0)
			return ret;
	}
	if (allow_root) {
		if (allow_root->type != MSGPACK_OBJECT_BOOLEAN)
			return sbx_err_set(err, -EINVAL, "exec: allow_root must be a boolean");
		s->allow_root = allow_root->via.boolean;
	}
	if (rlimits) {
		ret = parse_rlimits(rlimits, s->rlimits, err);
		if (ret < 0)
			return ret;
	}
	if (pty) {
		s->cols = AGENT_PTY_DEFAULT_COLS;
		s->rows = AGENT_PTY_DEFAULT_ROWS;
		ret = agent_exec_spec_parse_size(pty, &s->cols, &s->rows, err);
		if (ret < 0)
			return ret;
		s->pty = true;
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
	free(s->user);
	memset(s, 0, sizeof(*s));
}
