/* The mcp.* operations' arguments, events and results (proto_mcp.h). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "sbx/proto_mcp.h"

#define K_NAME "name"
#define K_ARGV "argv"
#define K_ENV "env"
#define K_CWD "cwd"
#define K_MAX_LINE "max_line"
#define K_IDLE_MS "idle_ms"
#define K_PID "pid"
#define K_SPARE "spare"
#define K_STATE "state"
#define K_SPARE_PID "spare_pid"
#define K_EXIT "last_exit"
#define K_EXIT_CODE "exit_code"
#define K_SIGNAL "signal"
#define K_STDERR "stderr"
#define K_SERVERS "servers"

/* The counters of a status, packed in this order under these keys. */
static const struct {
	const char *key;
	size_t off;
} counters[] = {
	{ K_MAX_LINE, offsetof(sbx_proto_mcp_status, max_line) },
	{ "sessions", offsetof(sbx_proto_mcp_status, sessions) },
	{ "opened", offsetof(sbx_proto_mcp_status, opened) },
	{ "started", offsetof(sbx_proto_mcp_status, started) },
	{ "crashes", offsetof(sbx_proto_mcp_status, crashes) },
	{ "bad_output", offsetof(sbx_proto_mcp_status, bad_output) },
	{ "msgs_in", offsetof(sbx_proto_mcp_status, msgs_in) },
	{ "msgs_out", offsetof(sbx_proto_mcp_status, msgs_out) },
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const char *const state_names[] = {
	[SBX_MCP_STARTING] = "starting",
	[SBX_MCP_READY] = "ready",
	[SBX_MCP_CRASHED] = "crashed",
	[SBX_MCP_WARMING] = "warming",
};

const char *sbx_proto_mcp_state_name(sbx_proto_mcp_state s)
{
	return (size_t)s < NELEM(state_names) ? state_names[s] : "unknown";
}

bool sbx_proto_mcp_name_ok(const char *s, size_t len)
{
	if (len == 0 || len > SBX_MCP_NAME_MAX || s[0] == '.')
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

static int check_name(const char *op, const msgpack_object *a, const char **name, size_t *len, sbx_err *err)
{
	if (!sbx_proto_get_str(a, K_NAME, name, len))
		return sbx_err_set(err, -EINVAL, "%s: name must be a string", op);
	if (!sbx_proto_mcp_name_ok(*name, *len))
		return sbx_err_set(err, -EINVAL,
				   "%s: name must be 1..%u of A-Z a-z 0-9 . _ - (not starting with '.')", op,
				   SBX_MCP_NAME_MAX);
	return 0;
}

static size_t strv_len(const char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

int sbx_proto_mcp_pack_config(msgpack_packer *pk, const sbx_proto_mcp_config *c, sbx_err *err)
{
	size_t nargv = strv_len(c->argv), nenv = strv_len(c->env);

	if (!c->name || !sbx_proto_mcp_name_ok(c->name, strlen(c->name)))
		return sbx_err_set(err, -EINVAL, "mcp server: bad name");
	if (nargv == 0)
		return sbx_err_set(err, -EINVAL, "mcp server %s: no command", c->name);
	if (c->max_line && (c->max_line < SBX_MCP_MIN_MAX_LINE || c->max_line > SBX_MCP_MAX_MAX_LINE))
		return sbx_err_set(err, -EINVAL, "mcp server %s: max_line must be %u..%u", c->name,
				   SBX_MCP_MIN_MAX_LINE, SBX_MCP_MAX_MAX_LINE);
	for (size_t i = 0; i < nenv; i++)
		if (!strchr(c->env[i], '='))
			return sbx_err_set(err, -EINVAL, "mcp server %s: env entry without '='", c->name);
	msgpack_pack_map(pk, 2 + (nenv > 0) + (c->cwd != NULL) + (c->max_line != 0));
	sbx_proto_pack_str(pk, K_NAME);
	sbx_proto_pack_str(pk, c->name);
	sbx_proto_pack_str(pk, K_ARGV);
	msgpack_pack_array(pk, nargv);
	for (size_t i = 0; i < nargv; i++)
		sbx_proto_pack_str(pk, c->argv[i]);
	if (nenv) {
		sbx_proto_pack_str(pk, K_ENV);
		msgpack_pack_map(pk, nenv);
		for (size_t i = 0; i < nenv; i++) {
			const char *eq = strchr(c->env[i], '=');
			sbx_proto_pack_strn(pk, c->env[i], (size_t)(eq - c->env[i]));
			sbx_proto_pack_str(pk, eq + 1);
		}
	}
	if (c->cwd) {
		sbx_proto_pack_str(pk, K_CWD);
		sbx_proto_pack_str(pk, c->cwd);
	}
	if (c->max_line) {
		sbx_proto_pack_str(pk, K_MAX_LINE);
		msgpack_pack_uint64(pk, c->max_line);
	}
	return 0;
}

int sbx_proto_mcp_parse_config(const msgpack_object *a, const char **name, size_t *name_len,
			       uint64_t *max_line, sbx_err *err)
{
	static const char *const known[] = { K_NAME, K_ARGV, K_ENV, K_CWD, K_MAX_LINE };
	const msgpack_object *ml;
	int ret;

	if (a->type != MSGPACK_OBJECT_MAP)
		return sbx_err_set(err, -EINVAL, "mcp.configure: arguments must be a map");
	for (uint32_t i = 0; i < a->via.map.size; i++) {
		const msgpack_object *k = &a->via.map.ptr[i].key;
		bool ok = false;

		for (size_t j = 0; j < NELEM(known) && k->type == MSGPACK_OBJECT_STR; j++)
			ok |= k->via.str.size == strlen(known[j]) && memcmp(k->via.str.ptr, known[j], k->via.str.size) == 0;
		if (!ok)
			return sbx_err_set(err, -EINVAL,
					   "mcp.configure: unknown argument %.*s (a server takes name, argv, env, cwd, "
					   "max_line; it runs as the sandbox user)",
					   k->type == MSGPACK_OBJECT_STR ? (int)(k->via.str.size > 32 ? 32 : k->via.str.size) : 1,
					   k->type == MSGPACK_OBJECT_STR ? k->via.str.ptr : "?");
	}
	ret = check_name("mcp.configure", a, name, name_len, err);
	if (ret < 0)
		return ret;
	*max_line = SBX_MCP_DEFAULT_MAX_LINE;
	ml = sbx_proto_map_get(a, K_MAX_LINE);
	if (ml) {
		if (ml->type != MSGPACK_OBJECT_POSITIVE_INTEGER || ml->via.u64 < SBX_MCP_MIN_MAX_LINE ||
		    ml->via.u64 > SBX_MCP_MAX_MAX_LINE)
			return sbx_err_set(err, -EINVAL, "mcp.configure: max_line must be an integer %u..%u",
					   SBX_MCP_MIN_MAX_LINE, SBX_MCP_MAX_MAX_LINE);
		*max_line = ml->via.u64;
	}
	return 0;
}

void sbx_proto_mcp_pack_open(msgpack_packer *pk, const char *name, uint64_t idle_ms)
{
	msgpack_pack_map(pk, 2);
	sbx_proto_pack_str(pk, K_NAME);
	sbx_proto_pack_str(pk, name);
	sbx_proto_pack_str(pk, K_IDLE_MS);
	msgpack_pack_uint64(pk, idle_ms);
}

int sbx_proto_mcp_parse_open(const msgpack_object *a, const char **name, size_t *name_len,
			     uint64_t *idle_ms, sbx_err *err)
{
	const msgpack_object *idle = sbx_proto_map_get(a, K_IDLE_MS);
	int ret = check_name("mcp.open", a, name, name_len, err);

	if (ret < 0)
		return ret;
	*idle_ms = SBX_MCP_DEFAULT_IDLE_MS;
	if (idle) {
		if (idle->type != MSGPACK_OBJECT_POSITIVE_INTEGER || idle->via.u64 > SBX_MCP_MAX_IDLE_MS)
			return sbx_err_set(err, -EINVAL, "mcp.open: idle_ms must be an integer 0..%u",
					   SBX_MCP_MAX_IDLE_MS);
		*idle_ms = idle->via.u64;
	}
	return 0;
}

void sbx_proto_mcp_pack_name(msgpack_packer *pk, const char *name)
{
	msgpack_pack_map(pk, 1);
	sbx_proto_pack_str(pk, K_NAME);
	sbx_proto_pack_str(pk, name);
}

int sbx_proto_mcp_parse_name(const msgpack_object *a, const char **name, size_t *name_len, sbx_err *err)
{
	return check_name("mcp", a, name, name_len, err);
}

void sbx_proto_mcp_pack_opened(msgpack_packer *pk, int64_t pid, bool spare)
{
	msgpack_pack_map(pk, 2);
	sbx_proto_pack_str(pk, K_PID);
	msgpack_pack_int64(pk, pid);
	sbx_proto_pack_str(pk, K_SPARE);
	if (spare)
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
}

int sbx_proto_mcp_parse_opened(const msgpack_object *ev, int64_t *pid, bool *spare, sbx_err *err)
{
	if (!sbx_proto_get_int(ev, K_PID, pid) || *pid <= 0 || *pid > INT32_MAX ||
	    !sbx_proto_get_bool(ev, K_SPARE, spare))
		return sbx_err_set(err, -EPROTO, "mcp.open: the agent's event lacks a pid or spare");
	return 0;
}

void sbx_proto_mcp_pack_status(msgpack_packer *pk, const sbx_proto_mcp_status *st)
{
	const char *tail = st->stderr_tail;
	size_t nlines = 0;

	for (const char *p = tail; *p; p++)
		nlines += *p == '\n' || p[1] == '\0';
	msgpack_pack_map(pk, 4 + NELEM(counters) + st->has_exit);
	sbx_proto_pack_str(pk, K_NAME);
	sbx_proto_pack_str(pk, st->name);
	sbx_proto_pack_str(pk, K_STATE);
	sbx_proto_pack_str(pk, sbx_proto_mcp_state_name(st->state));
	sbx_proto_pack_str(pk, K_SPARE_PID);
	msgpack_pack_int64(pk, st->spare_pid);
	for (size_t i = 0; i < NELEM(counters); i++) {
		sbx_proto_pack_str(pk, counters[i].key);
		msgpack_pack_uint64(pk, *(const uint64_t *)((const char *)st + counters[i].off));
	}
	if (st->has_exit) {
		sbx_proto_pack_str(pk, K_EXIT);
		msgpack_pack_map(pk, 2);
		sbx_proto_pack_str(pk, K_EXIT_CODE);
		msgpack_pack_int64(pk, st->exit_code);
		sbx_proto_pack_str(pk, K_SIGNAL);
		msgpack_pack_int64(pk, st->exit_signal);
	}
	/* The tail as its lines, the way a reader wants them. */
	sbx_proto_pack_str(pk, K_STDERR);
	msgpack_pack_array(pk, nlines);
	while (*tail) {
		size_t n = strcspn(tail, "\n");
		sbx_proto_pack_strn(pk, tail, n);
		tail += n + (tail[n] == '\n');
	}
}

int sbx_proto_mcp_parse_status(const msgpack_object *m, sbx_proto_mcp_status *st, sbx_err *err)
{
	const msgpack_object *ex = sbx_proto_map_get(m, K_EXIT), *lines = sbx_proto_map_get(m, K_STDERR);
	const char *s;
	size_t len, used = 0;

	memset(st, 0, sizeof(*st));
	if (!sbx_proto_get_str(m, K_NAME, &s, &len) || !sbx_proto_mcp_name_ok(s, len))
		return sbx_err_set(err, -EPROTO, "mcp status: bad name");
	memcpy(st->name, s, len);
	if (!sbx_proto_get_str(m, K_STATE, &s, &len))
		return sbx_err_set(err, -EPROTO, "mcp status %s: no state", st->name);
	st->state = (sbx_proto_mcp_state)NELEM(state_names);
	for (size_t i = 0; i < NELEM(state_names); i++)
		if (strlen(state_names[i]) == len && memcmp(state_names[i], s, len) == 0)
			st->state = (sbx_proto_mcp_state)i;
	if (st->state == (sbx_proto_mcp_state)NELEM(state_names))
		return sbx_err_set(err, -EPROTO, "mcp status %s: unknown state", st->name);
	if (!sbx_proto_get_int(m, K_SPARE_PID, &st->spare_pid) || st->spare_pid < 0 || st->spare_pid > INT32_MAX)
		return sbx_err_set(err, -EPROTO, "mcp status %s: bad spare_pid", st->name);
	for (size_t i = 0; i < NELEM(counters); i++)
		if (!sbx_proto_get_uint(m, counters[i].key, (uint64_t *)((char *)st + counters[i].off)))
			return sbx_err_set(err, -EPROTO, "mcp status %s: %s missing", st->name, counters[i].key);
	if (ex) {
		if (!sbx_proto_get_int(ex, K_EXIT_CODE, &st->exit_code) ||
		    !sbx_proto_get_int(ex, K_SIGNAL, &st->exit_signal) || st->exit_code < -1 || st->exit_code > 255 ||
		    st->exit_signal < 0 || st->exit_signal > 64)
			return sbx_err_set(err, -EPROTO, "mcp status %s: bad last_exit", st->name);
		st->has_exit = true;
	}
	if (!lines || lines->type != MSGPACK_OBJECT_ARRAY)
		return sbx_err_set(err, -EPROTO, "mcp status %s: stderr must be an array", st->name);
	for (uint32_t i = 0; i < lines->via.array.size; i++) {
		const msgpack_object *l = &lines->via.array.ptr[i];
		if (l->type != MSGPACK_OBJECT_STR || memchr(l->via.str.ptr, '\n', l->via.str.size) ||
		    memchr(l->via.str.ptr, '\0', l->via.str.size) || used + l->via.str.size + 1 > SBX_MCP_STDERR_TAIL)
			return sbx_err_set(err, -EPROTO, "mcp status %s: bad stderr lines", st->name);
		memcpy(st->stderr_tail + used, l->via.str.ptr, l->via.str.size);
		used += l->via.str.size;
		st->stderr_tail[used++] = '\n';
	}
	if (used)
		st->stderr_tail[used - 1] = '\0';
	return 0;
}

void sbx_proto_mcp_pack_list(msgpack_packer *pk, const sbx_proto_mcp_status *sts, size_t n)
{
	msgpack_pack_map(pk, 1);
	sbx_proto_pack_str(pk, K_SERVERS);
	msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n; i++)
		sbx_proto_mcp_pack_status(pk, &sts[i]);
}

int sbx_proto_mcp_parse_list(const msgpack_object *r, sbx_proto_mcp_status **out, size_t *n, sbx_err *err)
{
	const msgpack_object *a = sbx_proto_map_get(r, K_SERVERS);
	sbx_proto_mcp_status *sts;

	*out = NULL;
	*n = 0;
	if (!a || a->type != MSGPACK_OBJECT_ARRAY || a->via.array.size > SBX_MCP_MAX_SERVERS)
		return sbx_err_set(err, -EPROTO, "mcp.list: servers must be an array of at most %u",
				   SBX_MCP_MAX_SERVERS);
	sts = calloc(a->via.array.size ? a->via.array.size : 1, sizeof(*sts));
	if (!sts)
		return sbx_err_set(err, -ENOMEM, "mcp.list: out of memory");
	for (uint32_t i = 0; i < a->via.array.size; i++) {
		int ret = sbx_proto_mcp_parse_status(&a->via.array.ptr[i], &sts[i], err);
		if (ret < 0) {
			free(sts);
			return ret;
		}
	}
	*out = sts;
	*n = a->via.array.size;
	return 0;
}
