/* The supervisor's checks of what an agent answers, under libFuzzer: the
 * input's bytes are the result map of an END frame, decoded as frames from
 * the agent are (sbx_proto_frame_decode), then handed to the decoder the
 * first byte picks: exec's result, a stat, a listing (fs.list, fs.search),
 * a process description (proc.get, .list, the end of proc.output),
 * mcp.open's event, mcp.list, reset's result. Checks, besides the
 * sanitizers: a refusal is an error with a message; what is
 * accepted is in range (exit code, signal, stat mode) and renders as JSON;
 * a listing's every entry names a path below the folder listed, which
 * normalises to itself (a client may send it back). */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "sbx/proto_mcp.h"
#include "sbx/proto_reset.h"
#include "sup_agent.h"
#include "sup_api.h"
#include "sup_path.h"

#define CHECK(x) \
	do { \
		if (!(x)) \
			abort(); \
	} while (0)

static void refused(int rc, const sbx_err *e)
{
	CHECK(rc < 0 && e->msg[0]);
}

static void rendered(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);
	CHECK(s);
	free(s);
	json_decref(o);
}

static void exec_result(const msgpack_object *r)
{
	sup_exec_status st;
	sbx_err e = { 0 };
	int rc = sup_agent_parse_exec_result(r, &st, &e);
	if (rc < 0)
		return refused(rc, &e);
	CHECK(st.exited ? st.exit_code >= 0 && st.exit_code <= 255 : st.signal >= 1 && st.signal <= 64);
	CHECK(!st.oom_killed || (st.exited ? st.exit_code == 137 : st.signal == 9));
}

static void stat_json(const msgpack_object *r)
{
	sbx_err e = { 0 };
	json_t *o = json_object();
	int rc = sup_api_stat_json(r, o, &e);
	if (rc < 0) {
		json_decref(o);
		return refused(rc, &e);
	}
	CHECK(json_integer_value(json_object_get(o, "mode")) <= 07777);
	rendered(o);
}

static void listing(const msgpack_object *r, const char *base)
{
	sbx_err e = { 0 };
	json_t *o = sup_api_render_listing(base, r, &e);
	if (!o)
		return refused(e.code, &e);
	size_t i, bl = strlen(base);
	json_t *ent;
	json_array_foreach(json_object_get(o, "entries"), i, ent) {
		/* a path with bytes that are not UTF-8 has them in path_b64: skip */
		if (json_object_get(ent, "path_b64"))
			continue;
		const char *p = json_string_value(json_object_get(ent, "path"));
		CHECK(p);
		size_t pl = strlen(p);
		char norm[PATH_MAX];
		CHECK(sup_path_is_under(p, pl, base, bl) && pl > bl);
		int n = sup_path_normalize(p, pl, norm, sizeof(norm), NULL, &e);
		CHECK(n == (int)pl && strcmp(norm, p) == 0);
	}
	rendered(o);
}

static void proc(const msgpack_object *r, uint8_t sel)
{
	sbx_err e = { 0 };
	json_t *o = sel & 16 ? sup_api_proc_end_json(r, 42, 1000, &e)
			     : sup_api_proc_json(r, sel & 32, sel & 64 ? 42 : 0, &e);
	if (!o)
		return refused(e.code, &e);
	json_int_t pid = json_integer_value(json_object_get(o, "pid"));
	CHECK(pid > 0 && pid <= INT_MAX);
	if (sel & (16 | 64))
		CHECK(pid == 42);
	rendered(o);
}

static void mcp(const msgpack_object *r, uint8_t sel)
{
	sbx_err e = { 0 };
	if (sel & 16) {
		int64_t pid;
		bool spare;
		int rc = sbx_proto_mcp_parse_opened(r, &pid, &spare, &e);
		if (rc < 0)
			return refused(rc, &e);
		return;
	}
	sbx_proto_mcp_status *sts = NULL;
	size_t n = 0;
	int rc = sbx_proto_mcp_parse_list(r, &sts, &n, &e);
	if (rc < 0) {
		CHECK(!sts);
		return refused(rc, &e);
	}
	CHECK(n <= SBX_MCP_MAX_SERVERS);
	for (size_t i = 0; i < n; i++)
		CHECK(memchr(sts[i].name, '\0', sizeof(sts[i].name)) &&
		      memchr(sts[i].stderr_tail, '\0', sizeof(sts[i].stderr_tail)));
	free(sts);
}

static void reset(const msgpack_object *r)
{
	sbx_proto_reset_result res;
	sbx_err e = { 0 };
	int rc = sbx_proto_reset_parse_result(r, &res, &e);
	if (rc < 0)
		refused(rc, &e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 65536)
		return 0;
	uint8_t sel = data[0];
	/* {"t": "end", "id": 1, "r": <the input>} as the agent would frame it */
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_sbuffer_write(&sb, "\0\0\0\0", 4);
	msgpack_pack_map(&pk, 3);
	sbx_proto_pack_str(&pk, "t");
	sbx_proto_pack_str(&pk, "end");
	sbx_proto_pack_str(&pk, "id");
	msgpack_pack_uint64(&pk, 1);
	sbx_proto_pack_str(&pk, "r");
	msgpack_sbuffer_write(&sb, (const char *)data + 1, size - 1);
	uint32_t body = (uint32_t)(sb.size - 4);
	for (int i = 0; i < 4; i++)
		sb.data[i] = (char)(body >> (24 - 8 * i));
	sbx_proto_frame f;
	size_t used;
	sbx_err e = { 0 };
	int rc = sbx_proto_frame_decode((const uint8_t *)sb.data, sb.size, 1u << 20, &f, &used, NULL, &e);
	msgpack_sbuffer_destroy(&sb);
	if (rc != 1)
		return 0;
	const msgpack_object *r = &f.args;
	switch (sel % 8) {
	case 0: exec_result(r); break;
	case 1: stat_json(r); break;
	case 2: listing(r, "/workspace"); break;
	case 3: listing(r, "/"); break;
	case 4: proc(r, sel); break;
	case 5: mcp(r, sel); break;
	default: reset(r); break;
	}
	sbx_proto_frame_release(&f);
	return 0;
}
