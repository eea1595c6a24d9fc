/* The OpenSandbox layer's renderings of the agent's file answers, under
 * libFuzzer: the input's bytes after a selector are the result map of an
 * END frame, decoded as frames from the agent are (sbx_proto_frame_decode),
 * then rendered as a stat's FileInfo or as a listing's (fs.list,
 * fs.search) below the folder the selector picks. Checks, besides the
 * sanitizers: a refusal carries a message; a FileInfo's mode is octal
 * digits of at most 0777; every entry of a listing names a path strictly
 * below its folder that normalises to itself (a client may send it back:
 * no "..", no "." part, no empty one). */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_agent_frame.h"
#include "sbx/proto.h"
#include "sup_osbx_int.h"
#include "sup_path.h"

static void mode_digits(const json_t *o)
{
	json_int_t m = json_integer_value(json_object_get(o, "mode"));
	CHECK(m >= 0 && m <= 777);
	for (; m; m /= 10)
		CHECK(m % 10 <= 7);
}

static void info(const msgpack_object *r)
{
	sbx_err e = { 0 };
	json_t *o = sup_osbx_info_json("/workspace/f", r, &e);
	if (!o) {
		CHECK(e.code < 0 && e.msg[0]);
		return;
	}
	mode_digits(o);
	CHECK(strcmp(json_string_value(json_object_get(o, "path")), "/workspace/f") == 0);
	json_decref(o);
}

static void listing(const msgpack_object *r, const char *base)
{
	sbx_err e = { 0 };
	json_t *a = sup_osbx_entries_json(base, r, &e);
	if (!a) {
		CHECK(e.code < 0 && e.msg[0]);
		return;
	}
	size_t i;
	json_t *ent;
	CHECK(json_is_array(a));
	json_array_foreach(a, i, ent) {
		mode_digits(ent);
		/* a path with bytes that are not UTF-8 has them in path_b64: skip */
		if (json_object_get(ent, "path_b64"))
			continue;
		const char *p = json_string_value(json_object_get(ent, "path"));
		CHECK(p);
		fuzz_check_below(p, base);
	}
	char *s = json_dumps(a, JSON_COMPACT);
	CHECK(s);
	free(s);
	json_decref(a);
}

static void check(const msgpack_object *r, uint8_t sel)
{
	switch (sel % 4) {
	case 0: info(r); break;
	case 1: listing(r, "/workspace"); break;
	case 2: listing(r, "/"); break;
	default: listing(r, "/home/sandbox/a b"); break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_agent_answer(data, size, check);
}
