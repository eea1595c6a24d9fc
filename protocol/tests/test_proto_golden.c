/* Golden frames (protocol/testdata/<name>.bin): the C encoder builds each
 * one byte for byte, and decoding then re-encoding each gives the same bytes.
 * test_proto_golden.py checks the same files with python3-msgpack.
 *
 * To regenerate after a deliberate wire change: SBX_GOLDEN_WRITE=1
 * test_proto_golden <testdata dir>, then review the diff. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sbx/proto.h"
#include "sbx/proto_mcp.h"
#include "sbx/proto_reset.h"
#include "test_msgpack.h"

static const char *golden_dir;

static int g_hello(sbx_proto_writer *w)
{
	const char *caps[] = { "exec", "exec.stdin", "exec.signal" };
	return sbx_proto_encode_hello(w, SBX_PROTO_DEFAULT_MAX_FRAME, SBX_PROTO_DEFAULT_MAX_STREAMS,
				      SBX_PROTO_DEFAULT_WINDOW, caps, 3, "sandbox-agent/0.1.0", NULL);
}

static int g_req_exec(sbx_proto_writer *w)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	tm_init(&sb, &pk);
	msgpack_pack_map(&pk, 5);
	sbx_proto_pack_str(&pk, "argv");
	msgpack_pack_array(&pk, 3);
	sbx_proto_pack_str(&pk, "sh");
	sbx_proto_pack_str(&pk, "-c");
	sbx_proto_pack_str(&pk, "echo \"$GREETING\" from $(pwd) && exit 3");
	sbx_proto_pack_str(&pk, "env");
	msgpack_pack_map(&pk, 2);
	sbx_proto_pack_str(&pk, "GREETING");
	sbx_proto_pack_str(&pk, "h\xc3\xa9llo"); /* UTF-8 */
	sbx_proto_pack_str(&pk, "LANG");
	sbx_proto_pack_str(&pk, "C.UTF-8");
	sbx_proto_pack_str(&pk, "cwd");
	sbx_proto_pack_str(&pk, "/workspace");
	sbx_proto_pack_str(&pk, "timeout_ms");
	msgpack_pack_uint64(&pk, 30000);
	sbx_proto_pack_str(&pk, "stdin");
	msgpack_pack_true(&pk);
	int rc = sbx_proto_encode_req(w, 1, SBX_OP_EXEC, sb.data, sb.size, 0, NULL);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

static int g_req_ping(sbx_proto_writer *w)
{
	return sbx_proto_encode_req(w, 3, SBX_OP_PING, NULL, 0, 0, NULL);
}

static int g_data_stdout(sbx_proto_writer *w)
{
	uint8_t bytes[300]; /* bin16, every byte value */
	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)(i * 7);
	return sbx_proto_encode_data(w, 1, SBX_CH_STDOUT, bytes, sizeof(bytes), false, 0, NULL);
}

static int g_data_stdin_eof(sbx_proto_writer *w)
{
	return sbx_proto_encode_data(w, 1, SBX_CH_STDIN, "last line\n", 10, true, 0, NULL);
}

static int g_credit(sbx_proto_writer *w)
{
	return sbx_proto_encode_credit(w, 1, 131072, NULL);
}

static int g_ctl_signal(sbx_proto_writer *w)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	tm_init(&sb, &pk);
	msgpack_pack_map(&pk, 1);
	sbx_proto_pack_str(&pk, "signal");
	msgpack_pack_int(&pk, 15);
	int rc = sbx_proto_encode_ctl(w, 1, sb.data, sb.size, 0, NULL);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

static int g_cancel(sbx_proto_writer *w)
{
	return sbx_proto_encode_cancel(w, 1, NULL);
}

static int g_end_exec(sbx_proto_writer *w)
{
	msgpack_sbuffer sb;
	tm_exec_result(&sb, 3, 1843);
	int rc = sbx_proto_encode_end(w, 1, sb.data, sb.size, 0, NULL);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

static int g_err(sbx_proto_writer *w)
{
	return sbx_proto_encode_err(w, 5, SBX_PROTO_E_NOT_FOUND,
				    "exec: /usr/bin/nope: No such file or directory", 0, NULL);
}

static int g_err_conn(sbx_proto_writer *w)
{
	return sbx_proto_encode_err(w, 0, SBX_PROTO_E_FLOW_CONTROL,
				    "data of 70000 bytes on stream 7, credit 65536", 0, NULL);
}

static int g_event(sbx_proto_writer *w)
{
	/* integers of every width and sign, a float64, nesting */
	msgpack_sbuffer sb;
	msgpack_packer pk;
	tm_init(&sb, &pk);
	msgpack_pack_map(&pk, 6);
	sbx_proto_pack_str(&pk, "type");
	sbx_proto_pack_str(&pk, "modify");
	sbx_proto_pack_str(&pk, "path");
	sbx_proto_pack_str(&pk, "/workspace/src/main.py");
	sbx_proto_pack_str(&pk, "ints");
	msgpack_pack_array(&pk, 8);
	msgpack_pack_int64(&pk, -1);
	msgpack_pack_int64(&pk, -100);
	msgpack_pack_int64(&pk, -30000);
	msgpack_pack_int64(&pk, -2000000000);
	msgpack_pack_int64(&pk, -5000000000LL);
	msgpack_pack_uint64(&pk, 200);
	msgpack_pack_uint64(&pk, 70000);
	msgpack_pack_uint64(&pk, 1ull << 40);
	sbx_proto_pack_str(&pk, "mtime");
	msgpack_pack_double(&pk, 1718000000.25);
	sbx_proto_pack_str(&pk, "size");
	msgpack_pack_uint64(&pk, 4096);
	sbx_proto_pack_str(&pk, "attrs");
	msgpack_pack_map(&pk, 1);
	sbx_proto_pack_str(&pk, "mode");
	msgpack_pack_uint64(&pk, 0644);
	int rc = sbx_proto_encode_event(w, 9, sb.data, sb.size, 0, NULL);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

static int g_req_mcp_configure(sbx_proto_writer *w)
{
	const char *argv[] = { "npx", "-y", "@modelcontextprotocol/server-filesystem", "/workspace", NULL };
	const char *env[] = { "NODE_OPTIONS=--max-old-space-size=256", NULL };
	sbx_proto_mcp_config c = { .name = "files", .argv = argv, .env = env, .cwd = "/workspace" };
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int rc;

	tm_init(&sb, &pk);
	rc = sbx_proto_mcp_pack_config(&pk, &c, NULL);
	if (rc == 0)
		rc = sbx_proto_encode_req(w, 7, SBX_OP_MCP_CONFIGURE, sb.data, sb.size, 0, NULL);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

static int g_end_mcp_list(sbx_proto_writer *w)
{
	sbx_proto_mcp_status st[2] = {
		{ .name = "files", .state = SBX_MCP_READY, .max_line = SBX_MCP_DEFAULT_MAX_LINE, .spare_pid = 4242,
		  .sessions = 2, .opened = 9, .started = 10, .msgs_in = 70000, .msgs_out = 70001 },
		{ .name = "lint", .state = SBX_MCP_CRASHED, .max_line = 1024, .started = 3, .crashes = 3,
		  .bad_output = 1, .has_exit = true, .exit_code = 1, .exit_signal = 0,
		  .stderr_tail = "Error: Cannot find module 'x'\n    at node:internal" },
	};
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int rc;

	tm_init(&sb, &pk);
	sbx_proto_mcp_pack_list(&pk, st, 2);
	rc = sbx_proto_encode_end(w, 9, sb.data, sb.size, 0, NULL);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

static int g_err_mcp_crashed(sbx_proto_writer *w)
{
	return sbx_proto_encode_err(w, 11, SBX_PROTO_E_CRASHED,
				    "the MCP server exited with status 1; its last stderr lines:\nboom", 0, NULL);
}

static int g_req_reset(sbx_proto_writer *w)
{
	sbx_proto_reset_args a = { .paths = { "/workspace", "/tmp", "/home/sandbox", "/dev/shm" }, .npaths = 4,
				   .timeout_ms = 3000 };
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int rc;

	tm_init(&sb, &pk);
	rc = sbx_proto_reset_pack_args(&pk, &a, NULL);
	if (rc == 0)
		rc = sbx_proto_encode_req(w, 13, SBX_OP_RESET, sb.data, sb.size, 0, NULL);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

static int g_end_reset(sbx_proto_writer *w)
{
	sbx_proto_reset_result r = { .killed = 7, .removed = 70000, .ipc_removed = 1, .duration_us = 4321 };
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int rc;

	tm_init(&sb, &pk);
	sbx_proto_reset_pack_result(&pk, &r);
	rc = sbx_proto_encode_end(w, 13, sb.data, sb.size, 0, NULL);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

static const struct golden {
	const char *name;
	int (*build)(sbx_proto_writer *w);
	sbx_proto_kind kind;
} goldens[] = {
	{ "hello", g_hello, SBX_PROTO_HELLO },
	{ "req_exec", g_req_exec, SBX_PROTO_REQ },
	{ "req_ping", g_req_ping, SBX_PROTO_REQ },
	{ "data_stdout", g_data_stdout, SBX_PROTO_DATA },
	{ "data_stdin_eof", g_data_stdin_eof, SBX_PROTO_DATA },
	{ "credit", g_credit, SBX_PROTO_CREDIT },
	{ "ctl_signal", g_ctl_signal, SBX_PROTO_CTL },
	{ "cancel", g_cancel, SBX_PROTO_CANCEL },
	{ "end_exec", g_end_exec, SBX_PROTO_END },
	{ "err", g_err, SBX_PROTO_ERR },
	{ "err_conn", g_err_conn, SBX_PROTO_ERR },
	{ "event", g_event, SBX_PROTO_EVENT },
	{ "req_mcp_configure", g_req_mcp_configure, SBX_PROTO_REQ },
	{ "end_mcp_list", g_end_mcp_list, SBX_PROTO_END },
	{ "err_mcp_crashed", g_err_mcp_crashed, SBX_PROTO_ERR },
	{ "req_reset", g_req_reset, SBX_PROTO_REQ },
	{ "end_reset", g_end_reset, SBX_PROTO_END },
};

static char *path_of(const char *name)
{
	char *p;
	assert_true(asprintf(&p, "%s/%s.bin", golden_dir, name) > 0);
	return p;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fail_msg("open %s: %s", path, strerror(errno));
		*len = 0;
		return NULL;
	}
	static uint8_t buf[65536];
	*len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	uint8_t *copy = malloc(*len);
	memcpy(copy, buf, *len);
	return copy;
}

static void check_one(const struct golden *g)
{
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	assert_int_equal(g->build(&w), 0);
	char *path = path_of(g->name);
	if (getenv("SBX_GOLDEN_WRITE")) {
		FILE *f = fopen(path, "wb");
		assert_non_null(f);
		assert_int_equal(fwrite(w.buf.data, 1, w.buf.size, f), w.buf.size);
		fclose(f);
	}
	size_t len;
	uint8_t *want = slurp(path, &len);
	/* (a) the encoder's bytes are the golden bytes */
	if (len != w.buf.size || memcmp(want, w.buf.data, len) != 0)
		fail_msg("%s: encoder output differs from the golden file", g->name);

	/* (b) decode + canonical re-encode gives them back */
	sbx_proto_frame f;
	size_t used;
	sbx_err err;
	assert_int_equal(sbx_proto_frame_decode(want, len, 0, &f, &used, NULL, &err), 1);
	assert_int_equal(used, len);
	assert_int_equal(f.kind, g->kind);
	sbx_proto_writer_reset(&w);
	assert_int_equal(sbx_proto_encode_frame(&w, &f, 0, &err), 0);
	if (len != w.buf.size || memcmp(want, w.buf.data, len) != 0)
		fail_msg("%s: decode + re-encode differs from the golden file", g->name);
	sbx_proto_frame_release(&f);
	free(want);
	free(path);
	sbx_proto_writer_destroy(&w);
}

static void test_goldens(void **state)
{
	for (size_t i = 0; i < sizeof(goldens) / sizeof(goldens[0]); i++)
		check_one(&goldens[i]);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s <testdata dir>\n", argv[0]);
		return 2;
	}
	golden_dir = argv[1];
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_goldens) };
	return cmocka_run_group_tests(tests, NULL, NULL);
}
