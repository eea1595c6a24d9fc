/* Every parser of the process routes, called through the family's route
 * rows as the edge calls them: a request in, the agent's operation and
 * arguments out, or a negative errno with a message (never an answer). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sbx/proto.h"
#include "sup_procs_int.h"

static sup_procs_ctx ctx;
static sup_pq *q;
static msgpack_unpacked args;

static void done(void)
{
	if (q) {
		sup_procs_family.release(q);
		free(q);
		q = NULL;
	}
	msgpack_unpacked_destroy(&args);
	msgpack_unpacked_init(&args);
}

static int parse(const char *name, const char *pid, const char *query, const char *body,
		 const sup_http_hdr *hdrs, size_t nhdrs, sbx_err *e)
{
	done();
	sup_http_in in = { .id = "sb-1", .pid = pid, .query = query, .body = body ? body : "",
			   .body_len = body ? strlen(body) : 0, .hdrs = hdrs, .nhdrs = nhdrs };
	q = calloc(1, sup_procs_family.state_size);
	for (size_t i = 0; i < sup_procs_family.nroutes; i++) {
		const sup_http_route *r = &sup_procs_family.routes[i];
		if (strcmp(r->name, name) != 0)
			continue;
		sbx_err_clear(e);
		int rc = r->parse(&in, &ctx, q, e);
		size_t len;
		const char *enc = rc == 0 ? sbx_proto_args_done(&q->args, &len) : NULL;
		if (enc)
			assert_int_equal(msgpack_unpack_next(&args, enc, len, NULL), MSGPACK_UNPACK_SUCCESS);
		return rc;
	}
	fail_msg("no route %s", name);
	return 0;
}

static uint64_t arg_uint(const char *key)
{
	uint64_t v = UINT64_MAX;
	sbx_proto_get_uint(&args.data, key, &v);
	return v;
}

static void test_start_and_list(void **state)
{
	sbx_err e;
	assert_int_equal(parse("POST processes", NULL, NULL,
			       "{\"cmd\":\"sleep 9\",\"tag\":\"t1\",\"buffer\":8192,\"stdin\":true,\"pty\":{}}",
			       NULL, 0, &e), 0);
	assert_string_equal(q->aop, SBX_OP_PROC_START);
	assert_string_equal(q->spec.x.cmd, "sleep 9");
	assert_true(q->spec.x.stdin_pipe && q->spec.x.pty);
	assert_int_equal(arg_uint("buffer"), 8192);
	const char *t;
	size_t tl;
	assert_true(sbx_proto_get_str(&args.data, "tag", &t, &tl) && tl == 2);
	assert_int_equal(parse("POST processes", NULL, NULL, "{\"cmd\":\"x\",\"stdin\":\"text\"}", NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("POST processes", NULL, NULL, "{\"cmd\":\"x\",\"max_output\":1}", NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("POST processes", NULL, NULL, "{\"cmd\":\"x\",\"buffer\":100}", NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("POST processes", NULL, NULL, "{\"cmd\":\"x\",\"tag\":7}", NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("POST processes", NULL, NULL, "{\"tag\":\"a\"}", NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("POST processes", NULL, NULL, "nope", NULL, 0, &e), -EINVAL);

	assert_int_equal(parse("GET processes", NULL, "tag=a%20b", NULL, NULL, 0, &e), 0);
	assert_true(sbx_proto_get_str(&args.data, "tag", &t, &tl) && tl == 3 && memcmp(t, "a b", 3) == 0);
	assert_int_equal(parse("GET processes", NULL, "tog=1", NULL, NULL, 0, &e), -EINVAL);
	done();
}

static void test_pid_routes(void **state)
{
	sbx_err e;
	assert_int_equal(parse("GET process", "42", NULL, NULL, NULL, 0, &e), 0);
	assert_int_equal(arg_uint("pid"), 42);
	assert_true(q->full);
	assert_int_equal(parse("GET process", "abc", NULL, NULL, NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("GET process", "0", NULL, NULL, NULL, 0, &e), -ENOENT);
	assert_int_equal(parse("GET process", "4294967296", NULL, NULL, NULL, 0, &e), -ENOENT);
	assert_int_equal(parse("GET process", "12345678901", NULL, NULL, NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("DELETE process", "7", NULL, NULL, NULL, 0, &e), 0);
	assert_true(q->kill);

	assert_int_equal(parse("POST process signal", "7", NULL, "{\"signal\":\"SIGTERM\"}", NULL, 0, &e), 0);
	assert_int_equal(arg_uint("signal"), 15);
	assert_int_equal(parse("POST process signal", "7", NULL, "{\"signal\":\"rtmin+2\"}", NULL, 0, &e), 0);
	assert_int_equal(arg_uint("signal"), 36);
	assert_int_equal(parse("POST process signal", "7", NULL, "{\"signal\":9}", NULL, 0, &e), 0);
	assert_int_equal(arg_uint("signal"), 9);
	assert_int_equal(parse("POST process signal", "7", NULL, "{\"signal\":32}", NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("POST process signal", "7", NULL, "{\"signal\":\"HUPP\"}", NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("POST process signal", "7", NULL, "{\"sig\":1}", NULL, 0, &e), -EINVAL);

	assert_int_equal(parse("POST process resize", "7", NULL, "{\"cols\":100,\"rows\":30}", NULL, 0, &e), 0);
	assert_int_equal(arg_uint("cols"), 100);
	assert_int_equal(parse("POST process resize", "7", NULL, "{\"cols\":0,\"rows\":30}", NULL, 0, &e), -EINVAL);

	assert_int_equal(parse("POST process stdin", "7", "eof=1", "abc", NULL, 0, &e), 0);
	assert_int_equal(q->in_len, 3);
	bool eof;
	assert_true(sbx_proto_get_bool(&args.data, "eof", &eof) && eof);
	assert_int_equal(parse("POST process stdin", "7", "eof=yes", "", NULL, 0, &e), -EINVAL);

	assert_int_equal(parse("GET process output", "7", "offset=100&follow=true", NULL, NULL, 0, &e), 0);
	assert_int_equal(q->off, 100);
	assert_true(q->follow);
	assert_string_equal(q->aop, SBX_OP_PROC_GET);
	assert_int_equal(parse("GET process output", "7", "offset=-1", NULL, NULL, 0, &e), -EINVAL);
	done();
}

static void test_terminal(void **state)
{
	sbx_err e;
	sup_http_hdr h[] = { { "Connection", "Upgrade" }, { "Upgrade", "websocket" },
			     { "Sec-WebSocket-Version", "13" },
			     { "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==" } };
	assert_int_equal(parse("GET process ws", "7", "offset=3", NULL, h, 4, &e), 0);
	assert_string_equal(q->accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	assert_int_equal(q->off, 3);
	assert_int_equal(parse("GET process ws", "7", NULL, NULL, h, 2, &e), -EINVAL);
	assert_int_equal(parse("GET process ws", "x", NULL, NULL, h, 4, &e), -EINVAL);
	done();
}

int main(void)
{
	msgpack_unpacked_init(&args);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_start_and_list),
		cmocka_unit_test(test_pid_routes),
		cmocka_unit_test(test_terminal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
