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

#include "fuzz_agent_frame.h"
#include "sbx/proto.h"
#include "sbx/proto_mcp.h"
#include "sbx/proto_reset.h"
#include "sup_agent.h"
#include "sup_api.h"
#include "sup_path.h"

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
	size_t i;
	json_t *ent;
	json_array_foreach(json_object_get(o, "entries"), i, ent) {
		/* a path with bytes that are not UTF-8 has them in path_b64: skip */
		if (json_object_get(ent, "path_b64"))
			continue;
		const char *p = json_string_value(json_object_get(ent, "path"));
		CHECK(p);
		fuzz_check_below(p, base);
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

static void check(const msgpack_object *r, uint8_t sel)
{
	switch (sel % 8) {
	case 0: exec_result(r); break;
	case 1: stat_json(r); break;
	case 2: listing(r, "/workspace"); break;
	case 3: listing(r, "/"); break;
	case 4: proc(r, sel); break;
	case 5: mcp(r, sel); break;
	default: reset(r); break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_agent_answer(data, size, check);
}
