#include "exec_spec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sbx/proto_exec.h"
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

	if (a->size == 0)
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
	if (o->via.str.size == 0 || o->via.str.size > AGENT_EXEC_MAX_USER)
		return sbx_err_set(err, -EINVAL, "exec: user must be a user name or uid of 1..%u characters",
				   AGENT_EXEC_MAX_USER);
	return dup_str(o, "user", out, err);
}

_Static_assert((int)SBX_RLIMITS == (int)AGENT_JAIL_RLIMIT_COUNT &&
		       (int)SBX_RLIMIT_NOFILE == (int)AGENT_JAIL_RLIMIT_NOFILE &&
		       (int)SBX_RLIMIT_NPROC == (int)AGENT_JAIL_RLIMIT_NPROC &&
		       (int)SBX_RLIMIT_FSIZE == (int)AGENT_JAIL_RLIMIT_FSIZE &&
		       (int)SBX_RLIMIT_CPU == (int)AGENT_JAIL_RLIMIT_CPU,
	       "the protocol's rlimits are the jail's, in the same order");

/* Soft and hard limit alike; whether a hard limit above the sandbox's may
 * be set is the jail's check. */
static int take_rlimits(const sbx_proto_rlimit *in, agent_jail_rlimit *out, sbx_err *err)
{
	for (int i = 0; i < SBX_RLIMITS; i++) {
		if (!in[i].set)
			continue;
		if (!in[i].unlimited && in[i].value >= (uint64_t)RLIM_INFINITY)
			return sbx_err_set(err, -EINVAL, "exec: rlimit %s must be a non-negative integer or \"unlimited\"",
					   sbx_proto_rlimit_names[i]);
		out[i].soft = out[i].hard = in[i].unlimited ? RLIM_INFINITY : (rlim_t)in[i].value;
		out[i].set = true;
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
	sbx_proto_exec_view v;
	int ret = sbx_proto_exec_decode(args, &v, err);

	if (ret < 0)
		return ret;
	if (!v.argv == !v.cmd)
		return sbx_err_set(err, -EINVAL, "exec: give exactly one of argv and cmd");
	ret = v.argv ? parse_argv(v.argv, &s->argv, err) : parse_cmd(v.cmd, &s->argv, err);
	if (ret < 0)
		return ret;
	s->shell = v.cmd != NULL;
	if (v.env && (ret = parse_env(v.env, &s->env_over, err)) < 0)
		return ret;
	if (v.cwd && v.cwd->via.str.size == 0)
		return sbx_err_set(err, -EINVAL, "exec: cwd must be a non-empty string");
	if (v.cwd && (ret = dup_str(v.cwd, "cwd", &s->cwd, err)) < 0)
		return ret;
	if (v.timeout_ms > AGENT_EXEC_MAX_TIMEOUT_MS)
		return sbx_err_set(err, -EINVAL, "exec: timeout_ms must be at most %llu",
				   (unsigned long long)AGENT_EXEC_MAX_TIMEOUT_MS);
	s->timeout_ms = v.timeout_ms;
	s->stdin_pipe = v.stdin_pipe;
	s->allow_root = v.allow_root;
	if (v.user && (ret = parse_user(v.user, &s->user, err)) < 0)
		return ret;
	if ((ret = take_rlimits(v.rlimits, s->rlimits, err)) < 0)
		return ret;
	if (v.pty) {
		s->cols = AGENT_PTY_DEFAULT_COLS;
		s->rows = AGENT_PTY_DEFAULT_ROWS;
		ret = agent_exec_spec_parse_size(v.pty, &s->cols, &s->rows, err);
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
