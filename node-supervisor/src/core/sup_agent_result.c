/* sup_agent_result: the check of exec's END result from an untrusted agent
 * (see sup_agent.h), pure, so the unit tests and fuzz_agent_reply call it
 * without a connection. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "sbx/proto.h"
#include "sup_agent.h"

static bool obj_is_nil(const msgpack_object *o)
{
	return !o || o->type == MSGPACK_OBJECT_NIL;
}

static bool obj_int(const msgpack_object *o, int64_t *v)
{
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (o->via.u64 > INT64_MAX)
			return false;
		*v = (int64_t)o->via.u64;
		return true;
	}
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*v = o->via.i64;
		return true;
	}
	return false;
}

int sup_agent_parse_exec_result(const msgpack_object *r, sup_exec_status *st, sbx_err *err)
{
	memset(st, 0, sizeof(*st));
	if (!r || r->type != MSGPACK_OBJECT_MAP)
		return sbx_err_set(err, -EPROTO, "exec result is not a map");
	const msgpack_object *ec = sbx_proto_map_get(r, "exit_code");
	const msgpack_object *sg = sbx_proto_map_get(r, "signal");
	int64_t v;
	if (!obj_is_nil(ec) && obj_is_nil(sg)) {
		if (!obj_int(ec, &v) || v < 0 || v > 255)
			return sbx_err_set(err, -EPROTO, "exec result: exit_code not in 0..255");
		st->exited = true;
		st->exit_code = (int)v;
	} else if (obj_is_nil(ec) && !obj_is_nil(sg)) {
		if (!obj_int(sg, &v) || v < 1 || v > 64)
			return sbx_err_set(err, -EPROTO, "exec result: signal not in 1..64");
		st->signal = (int)v;
	} else {
		return sbx_err_set(err, -EPROTO, "exec result: want exactly one of exit_code and signal");
	}
	const msgpack_object *to = sbx_proto_map_get(r, "timed_out");
	if (!obj_is_nil(to)) {
		if (to->type != MSGPACK_OBJECT_BOOLEAN)
			return sbx_err_set(err, -EPROTO, "exec result: timed_out not a bool");
		st->timed_out = to->via.boolean;
	}
	const msgpack_object *oom = sbx_proto_map_get(r, "oom_killed");
	if (!obj_is_nil(oom)) {
		if (oom->type != MSGPACK_OBJECT_BOOLEAN)
			return sbx_err_set(err, -EPROTO, "exec result: oom_killed not a bool");
		/* only a SIGKILL (or a shell's 137 for one) can be one */
		st->oom_killed = oom->via.boolean && (st->exited ? st->exit_code == 128 + 9
								 : st->signal == 9);
	}
	const msgpack_object *du = sbx_proto_map_get(r, "duration_us");
	if (!obj_is_nil(du)) {
		if (du->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return sbx_err_set(err, -EPROTO, "exec result: duration_us not a uint");
		st->duration_us = du->via.u64;
	}
	const msgpack_object *ru = sbx_proto_map_get(r, "rusage");
	if (!obj_is_nil(ru)) {
		static const char *const keys[] = { "max_rss_kb", "user_ms", "sys_ms" };
		uint64_t *dst[] = { &st->max_rss_kb, &st->user_ms, &st->sys_ms };
		if (ru->type != MSGPACK_OBJECT_MAP)
			return sbx_err_set(err, -EPROTO, "exec result: rusage not a map");
		for (size_t i = 0; i < 3; i++) {
			const msgpack_object *x = sbx_proto_map_get(ru, keys[i]);
			if (!x || x->type != MSGPACK_OBJECT_POSITIVE_INTEGER || x->via.u64 > (1ull << 53))
				return sbx_err_set(err, -EPROTO, "exec result: rusage.%s not a uint", keys[i]);
			*dst[i] = x->via.u64;
		}
		st->has_rusage = true;
	}
	return 0;
}
