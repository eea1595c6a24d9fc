/* The agent's process descriptions (proc.start, .get, .list, .kill and
 * the end of proc.output) checked once (sup_api_proc_read: every family's
 * view of a process, the OpenSandbox one's too) and rendered as sbx's API
 * shows them.
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

static int read_exit(const msgpack_object *m, sup_api_proc *p, sbx_err *err)
{
	int rc = sup_api_mp_uint(m, "ended_ms", UINT64_MAX / 2, &p->ended_ms, err);
	if (rc == 0)
		rc = sup_api_mp_uint(m, "duration_us", UINT64_MAX / 2, &p->duration_us, err);
	if (rc == 0)
		rc = mp_bool(m, "timed_out", &p->timed_out, err);
	/* optional: an agent without memory cgroup figures may leave it out */
	bool oom = false;
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
	p->has_code = has_code;
	p->code = has_code ? (int)code->via.u64 : -1;
	p->signal = has_sig ? (int)sig->via.u64 : 0;
	/* the kernel's kill for memory, as the exit shows it */
	p->oom_killed = oom && (has_sig ? p->signal == 9 : p->code == 137);
	return 0;
}

static int read_full(const msgpack_object *m, sup_api_proc *p, sbx_err *err)
{
	int rc = mp_bool(m, "pty", &p->pty, err);
	if (rc == 0)
		rc = mp_bool(m, "stdin", &p->stdin_open, err);
	if (rc < 0)
		return rc;
	const msgpack_object *out = sbx_proto_map_get(m, "output");
	if (!out || out->type != MSGPACK_OBJECT_MAP)
		return sbx_err_set(err, -EPROTO, "process: \"output\" missing");
	rc = sup_api_mp_uint(out, "start", UINT64_MAX / 2, &p->out_start, err);
	if (rc == 0)
		rc = sup_api_mp_uint(out, "end", UINT64_MAX / 2, &p->out_end, err);
	if (rc == 0)
		rc = sup_api_mp_uint(out, "buffer", UINT32_MAX, &p->out_buffer, err);
	if (rc < 0)
		return rc;
	if (p->out_start > p->out_end)
		return sbx_err_set(err, -EPROTO, "process: output start after its end");
	const msgpack_object *argv = sbx_proto_map_get(m, "argv");
	if (!argv || argv->type != MSGPACK_OBJECT_ARRAY || argv->via.array.size > SUP_API_MAX_ARGV)
		return sbx_err_set(err, -EPROTO, "process: \"argv\" missing or too long");
	for (uint32_t i = 0; i < argv->via.array.size; i++)
		if (argv->via.array.ptr[i].type != MSGPACK_OBJECT_STR)
			return sbx_err_set(err, -EPROTO, "process: argv[%u] is not a string", i);
	p->argv = argv;
	p->full = true;
	return 0;
}

int sup_api_proc_read(const msgpack_object *m, bool full, long want_pid, sup_api_proc *p,
		      sbx_err *err)
{
	memset(p, 0, sizeof(*p));
	if (!m || m->type != MSGPACK_OBJECT_MAP)
		return sbx_err_set(err, -EPROTO, "process: not a map");
	if (sup_api_mp_uint(m, "pid", INT_MAX, &p->pid, err) < 0 ||
	    sup_api_mp_uint(m, "started_ms", UINT64_MAX / 2, &p->started_ms, err) < 0)
		return err->code;
	if (p->pid == 0 || (want_pid > 0 && p->pid != (uint64_t)want_pid))
		return sbx_err_set(err, -EPROTO, "process: pid %llu is not the one asked for",
				   (unsigned long long)p->pid);
	const msgpack_object *st = sbx_proto_map_get(m, "state");
	if (st && st->type == MSGPACK_OBJECT_STR && st->via.str.size == 7 &&
	    memcmp(st->via.str.ptr, "running", 7) == 0)
		p->exited = false;
	else if (st && st->type == MSGPACK_OBJECT_STR && st->via.str.size == 6 &&
		 memcmp(st->via.str.ptr, "exited", 6) == 0)
		p->exited = true;
	else
		return sbx_err_set(err, -EPROTO, "process: \"state\" is neither running nor exited");
	const msgpack_object *tag = sbx_proto_map_get(m, "tag");
	if (!mp_nil(tag) && (tag->type != MSGPACK_OBJECT_STR || tag->via.str.size > SUP_API_MAX_TAG))
		return sbx_err_set(err, -EPROTO, "process: \"tag\" is not a string of at most %d bytes",
				   SUP_API_MAX_TAG);
	if (!mp_nil(tag)) {
		p->tag = tag->via.str.ptr;
		p->tag_len = tag->via.str.size;
	}
	if (p->exited && read_exit(m, p, err) < 0)
		return err->code;
	if (full && read_full(m, p, err) < 0)
		return err->code;
	return 0;
}

static int render_exit(const sup_api_proc *p, json_t *o, sbx_err *err)
{
	char name[32];
	if (!p->has_code)
		sup_signal_name(p->signal, name, sizeof(name));
	if (json_object_set_new(o, "exit_code", p->has_code ? json_integer(p->code) : json_null()) < 0 ||
	    json_object_set_new(o, "signal", p->has_code ? json_null() : json_string(name)) < 0 ||
	    json_object_set_new(o, "ended_ms", json_integer((json_int_t)p->ended_ms)) < 0 ||
	    json_object_set_new(o, "duration_ms", json_real((double)p->duration_us / 1000.0)) < 0 ||
	    json_object_set_new(o, "timed_out", json_boolean(p->timed_out)) < 0 ||
	    json_object_set_new(o, "oom_killed", json_boolean(p->oom_killed)) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

static int render_full(const sup_api_proc *p, json_t *o, sbx_err *err)
{
	json_t *a = json_array();
	if (!a || json_object_set_new(o, "argv", a) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < p->argv->via.array.size; i++) {
		const msgpack_object *s = &p->argv->via.array.ptr[i];
		size_t tl;
		SBX_AUTO_FREE char *t = sup_utf8_repair((const uint8_t *)s->via.str.ptr,
							s->via.str.size, &tl);
		if (!t || json_array_append_new(a, json_stringn(t, tl)) < 0)
			return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	if (json_object_set_new(o, "pty", json_boolean(p->pty)) < 0 ||
	    json_object_set_new(o, "stdin", json_boolean(p->stdin_open)) < 0 ||
	    json_object_set_new(o, "output",
				json_pack("{s:I,s:I,s:I}", "start", (json_int_t)p->out_start, "end",
					  (json_int_t)p->out_end, "buffer", (json_int_t)p->out_buffer)) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

json_t *sup_api_proc_json(const msgpack_object *m, bool full, long want_pid, sbx_err *err)
{
	sup_api_proc p;
	if (sup_api_proc_read(m, full, want_pid, &p, err) < 0)
		return NULL;
	json_t *o = json_pack("{s:I,s:s,s:I}", "pid", (json_int_t)p.pid, "state",
			      p.exited ? "exited" : "running", "started_ms", (json_int_t)p.started_ms);
	int rc = o ? 0 : -1;
	if (rc == 0)
		rc = !p.tag ? json_object_set_new(o, "tag", json_null()) : set_text(o, "tag", p.tag, p.tag_len);
	if (rc < 0) {
		json_decref(o);
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	if ((p.exited && render_exit(&p, o, err) < 0) || (full && render_full(&p, o, err) < 0)) {
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

int sup_api_gap_read(const msgpack_object *event, uint64_t off, uint64_t *to, sbx_err *err)
{
	const msgpack_object *g = sbx_proto_map_get(event, "gap");
	uint64_t from = 0;
	if (!g)
		return 0;
	if (sup_api_mp_uint(g, "from", UINT64_MAX / 2, &from, err) < 0 ||
	    sup_api_mp_uint(g, "to", UINT64_MAX / 2, to, err) < 0 || from != off || *to <= from)
		return sbx_err_set(err, -EPROTO, "proc.output: a gap that does not follow the data");
	return 1;
}
