/* The agent's process descriptions (proc.start, .get, .list, .kill and
 * the end of proc.output) checked and rendered as the API shows them.
 * Pure: nothing but the maps given (a start's body is sup_api.c's). */
#include "sup_api.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_text.h"

/* ---- the agent's process description, checked ---- */

static bool mp_nil(const msgpack_object *o)
{
	return !o || o->type == MSGPACK_OBJECT_NIL;
}

/* An unsigned integer at key (at most max): 0, or -EPROTO. */
int sup_api_mp_uint(const msgpack_object *map, const char *key, uint64_t max, uint64_t *out,
		   sbx_err *err)
{
	const msgpack_object *o = sbx_proto_map_get(map, key);
	if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > max)
		return sbx_err_set(err, -EPROTO, "process: \"%s\" missing or out of range", key);
	*out = o->via.u64;
	return 0;
}

static int mp_bool(const msgpack_object *map, const char *key, bool *out, sbx_err *err)
{
	if (!sbx_proto_get_bool(map, key, out))
		return sbx_err_set(err, -EPROTO, "process: \"%s\" missing or not a bool", key);
	return 0;
}

static int set_text(json_t *o, const char *key, const char *p, size_t n)
{
	size_t tl;
	SBX_AUTO_FREE char *t = sup_utf8_repair((const uint8_t *)p, n, &tl);
	if (!t)
		return -1;
	return json_object_set_new(o, key, json_stringn(t, tl));
}

static int desc_exit(const msgpack_object *m, json_t *o, sbx_err *err)
{
	uint64_t ended = 0, dur = 0;
	bool to = false, oom = false;
	int rc = sup_api_mp_uint(m, "ended_ms", UINT64_MAX / 2, &ended, err);
	if (rc == 0)
		rc = sup_api_mp_uint(m, "duration_us", UINT64_MAX / 2, &dur, err);
	if (rc == 0)
		rc = mp_bool(m, "timed_out", &to, err);
	/* optional: an agent without memory cgroup figures may leave it out */
	if (rc == 0 && !mp_nil(sbx_proto_map_get(m, "oom_killed")))
		rc = mp_bool(m, "oom_killed", &oom, err);
	if (rc < 0)
		return rc;
	const msgpack_object *code = sbx_proto_map_get(m, "exit_code");
	const msgpack_object *sig = sbx_proto_map_get(m, "signal");
	bool has_code = !mp_nil(code), has_sig = !mp_nil(sig);
	if (has_code == has_sig ||
	    (has_code && (code->type != MSGPACK_OBJECT_POSITIVE_INTEGER || code->via.u64 > 255)) ||
	    (has_sig && (sig->type != MSGPACK_OBJECT_POSITIVE_INTEGER || sig->via.u64 < 1 ||
			 sig->via.u64 > 64)))
		return sbx_err_set(err, -EPROTO, "process: want exactly one of exit_code (0..255) and signal (1..64)");
	char name[32];
	if (has_sig)
		sup_signal_name((int)sig->via.u64, name, sizeof(name));
	if (json_object_set_new(o, "exit_code",
				has_code ? json_integer((json_int_t)code->via.u64) : json_null()) < 0 ||
	    json_object_set_new(o, "signal", has_sig ? json_string(name) : json_null()) < 0 ||
	    json_object_set_new(o, "ended_ms", json_integer((json_int_t)ended)) < 0 ||
	    json_object_set_new(o, "duration_ms", json_real((double)dur / 1000.0)) < 0 ||
	    json_object_set_new(o, "timed_out", json_boolean(to)) < 0 ||
	    json_object_set_new(o, "oom_killed",
				json_boolean(oom && (has_sig ? sig->via.u64 == 9 : code->via.u64 == 137))) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

static int desc_full(const msgpack_object *m, json_t *o, sbx_err *err)
{
	bool pty = false, in = false;
	int rc = mp_bool(m, "pty", &pty, err);
	if (rc == 0)
		rc = mp_bool(m, "stdin", &in, err);
	if (rc < 0)
		return rc;
	const msgpack_object *out = sbx_proto_map_get(m, "output");
	uint64_t start = 0, end = 0, buffer = 0;
	if (!out || out->type != MSGPACK_OBJECT_MAP)
		return sbx_err_set(err, -EPROTO, "process: \"output\" missing");
	rc = sup_api_mp_uint(out, "start", UINT64_MAX / 2, &start, err);
	if (rc == 0)
		rc = sup_api_mp_uint(out, "end", UINT64_MAX / 2, &end, err);
	if (rc == 0)
		rc = sup_api_mp_uint(out, "buffer", UINT32_MAX, &buffer, err);
	if (rc < 0)
		return rc;
	if (start > end)
		return sbx_err_set(err, -EPROTO, "process: output start after its end");
	const msgpack_object *argv = sbx_proto_map_get(m, "argv");
	if (!argv || argv->type != MSGPACK_OBJECT_ARRAY || argv->via.array.size > SUP_API_MAX_ARGV)
		return sbx_err_set(err, -EPROTO, "process: \"argv\" missing or too long");
	json_t *a = json_array();
	if (!a || json_object_set_new(o, "argv", a) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < argv->via.array.size; i++) {
		const msgpack_object *s = &argv->via.array.ptr[i];
		if (s->type != MSGPACK_OBJECT_STR)
			return sbx_err_set(err, -EPROTO, "process: argv[%u] is not a string", i);
		size_t tl;
		SBX_AUTO_FREE char *t = sup_utf8_repair((const uint8_t *)s->via.str.ptr,
							s->via.str.size, &tl);
		if (!t || json_array_append_new(a, json_stringn(t, tl)) < 0)
			return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	if (json_object_set_new(o, "pty", json_boolean(pty)) < 0 ||
	    json_object_set_new(o, "stdin", json_boolean(in)) < 0 ||
	    json_object_set_new(o, "output",
				json_pack("{s:I,s:I,s:I}", "start", (json_int_t)start, "end",
					  (json_int_t)end, "buffer", (json_int_t)buffer)) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

/* A process description from the agent as JSON; full adds what proc.get
 * tells. NULL with err when it breaks the protocol. want_pid > 0: the
 * description must be of that process. */
json_t *sup_api_proc_json(const msgpack_object *m, bool full, long want_pid, sbx_err *err)
{
	if (!m || m->type != MSGPACK_OBJECT_MAP) {
		sbx_err_set(err, -EPROTO, "process: not a map");
		return NULL;
	}
	uint64_t pid = 0, started = 0;
	if (sup_api_mp_uint(m, "pid", INT_MAX, &pid, err) < 0 ||
	    sup_api_mp_uint(m, "started_ms", UINT64_MAX / 2, &started, err) < 0)
		return NULL;
	if (pid == 0 || (want_pid > 0 && pid != (uint64_t)want_pid)) {
		sbx_err_set(err, -EPROTO, "process: pid %llu is not the one asked for",
			    (unsigned long long)pid);
		return NULL;
	}
	const msgpack_object *st = sbx_proto_map_get(m, "state");
	bool exited;
	if (st && st->type == MSGPACK_OBJECT_STR && st->via.str.size == 7 &&
	    memcmp(st->via.str.ptr, "running", 7) == 0)
		exited = false;
	else if (st && st->type == MSGPACK_OBJECT_STR && st->via.str.size == 6 &&
		 memcmp(st->via.str.ptr, "exited", 6) == 0)
		exited = true;
	else {
		sbx_err_set(err, -EPROTO, "process: \"state\" is neither running nor exited");
		return NULL;
	}
	const msgpack_object *tag = sbx_proto_map_get(m, "tag");
	if (!mp_nil(tag) && (tag->type != MSGPACK_OBJECT_STR || tag->via.str.size > SUP_API_MAX_TAG)) {
		sbx_err_set(err, -EPROTO, "process: \"tag\" is not a string of at most %d bytes",
			    SUP_API_MAX_TAG);
		return NULL;
	}
	json_t *o = json_pack("{s:I,s:s,s:I}", "pid", (json_int_t)pid, "state",
			      exited ? "exited" : "running", "started_ms", (json_int_t)started);
	int rc = o ? 0 : -1;
	if (rc == 0)
		rc = mp_nil(tag) ? json_object_set_new(o, "tag", json_null())
				 : set_text(o, "tag", tag->via.str.ptr, tag->via.str.size);
	if (rc < 0) {
		json_decref(o);
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	if ((exited && desc_exit(m, o, err) < 0) || (full && desc_full(m, o, err) < 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}


json_t *sup_api_proc_end_json(const msgpack_object *result, long pid, uint64_t off, sbx_err *err)
{
	uint64_t next = 0;
	if (sup_api_mp_uint(result, "next_offset", UINT64_MAX / 2, &next, err) < 0)
		return NULL;
	if (next != off) {
		sbx_err_set(err, -EPROTO, "proc.output: next_offset %llu but the data ended at %llu",
			    (unsigned long long)next, (unsigned long long)off);
		return NULL;
	}
	json_t *o = sup_api_proc_json(result, false, pid, err);
	if (o)
		json_object_set_new(o, "next_offset", json_integer((json_int_t)next));
	return o;
}
