/* sup_req: the per-family errno -> status tables, the agent argument maps,
 * and real replies over loopback HTTP (status, reason phrase, the one error
 * shape, the owner released exactly once). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <cmocka.h>

#include "sbx/proto.h"
#include "sup_req.h"

typedef struct owner {
	sup_req r;
	int released;
	long n;
} owner;

static void release(void *o)
{
	((owner *)o)->released++;
}

static void tag(const void *o, char *buf, size_t size)
{
	snprintf(buf, size, " n %ld", ((const owner *)o)->n);
}

static const sup_req_errmap extra[] = {
	{ -ENAMETOOLONG, 400, "bad_request" },
	{ -ENOENT, 410, "gone" },
	{ 0, 0, NULL },
};
static const sup_req_kind kind_a = { .errmap = extra, .reasons = true, .release = release };
static const sup_req_kind kind_b = { .reasons = false, .log_tag = tag, .release = release };

static void test_status(void **state)
{
	(void)state;
	owner a = { 0 }, b = { 0 };
	a.r.kind = &kind_a;
	b.r.kind = &kind_b;
	const char *code = NULL;
	/* The family's own entries first. */
	assert_int_equal(sup_req_status(&a.r, -ENAMETOOLONG, &code), 400);
	assert_string_equal(code, "bad_request");
	assert_int_equal(sup_req_status(&a.r, -ENOENT, &code), 410);
	assert_string_equal(code, "gone");
	/* The shared table. */
	assert_int_equal(sup_req_status(&b.r, -ENOENT, &code), 404);
	assert_string_equal(code, "not_found");
	assert_int_equal(sup_req_status(&b.r, -EACCES, &code), 403);
	assert_string_equal(code, "permission_denied");
	assert_int_equal(sup_req_status(&a.r, -ENOSPC, &code), 507);
	assert_string_equal(code, "no_space");
	assert_int_equal(sup_req_status(&b.r, -EEXIST, &code), 409);
	assert_string_equal(code, "exists");
	/* Then sup_api_status. */
	assert_int_equal(sup_req_status(&b.r, -ENAMETOOLONG, &code), 500);
	assert_string_equal(code, "internal");
	assert_int_equal(sup_req_status(&b.r, -EPROTO, &code), 502);
	assert_string_equal(code, "agent_error");
	assert_int_equal(sup_req_status(&a.r, -E2BIG, &code), 413);
	assert_string_equal(code, "too_large");
}

static void test_args(void **state)
{
	(void)state;
	sup_req_args a;
	sup_req_args_begin(&a, 3);
	sup_req_args_uint(&a, "pid", 42);
	sup_req_args_bool(&a, "eof", true);
	sup_req_args_str(&a, "tag", "a\0b", 3);
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	size_t off = 0;
	assert_int_equal(msgpack_unpack_next(&u, a.sb.data, a.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
	assert_int_equal(off, a.sb.size);
	assert_int_equal(u.data.type, MSGPACK_OBJECT_MAP);
	assert_int_equal(u.data.via.map.size, 3);
	uint64_t v = 0;
	bool eof = false;
	const char *s;
	size_t sl;
	assert_true(sbx_proto_get_uint(&u.data, "pid", &v));
	assert_int_equal(v, 42);
	assert_true(sbx_proto_get_bool(&u.data, "eof", &eof));
	assert_true(eof);
	assert_true(sbx_proto_get_str(&u.data, "tag", &s, &sl));
	assert_int_equal(sl, 3);
	assert_memory_equal(s, "a\0b", 3);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&a.sb);
}

static void test_set_bytes(void **state)
{
	(void)state;
	json_t *o = json_object();
	assert_int_equal(sup_req_set_bytes(o, "path", "/a", 2), 0);
	assert_string_equal(json_string_value(json_object_get(o, "path")), "/a");
	assert_null(json_object_get(o, "path_b64"));
	assert_int_equal(sup_req_set_bytes(o, "name", "\xff", 1), 0);
	assert_string_equal(json_string_value(json_object_get(o, "name_b64")), "/w==");
	json_decref(o);
}

/* ---- real replies over loopback ---- */

typedef struct reply {
	int status;
	char reason[64];
	char type[64];
	char body[512];
} reply;

typedef struct server {
	struct event_base *base;
	owner o;
	const sup_req_kind *kind;
	int mode; /* 0: error with a path, 1: 204 without a body, 2: fail with an errno */
	reply got;
} server;

static void handler(struct evhttp_request *req, void *ud)
{
	server *s = ud;
	memset(&s->o, 0, sizeof(s->o));
	s->o.n = 7;
	sup_req_init(&s->o.r, s->kind, &s->o, NULL, NULL, req, "GET test", "sb-1");
	if (s->mode == 0) {
		sup_req_error_at(&s->o.r, 413, "too_large", "no \xff here", "/w/\xfe", 4);
	} else if (s->mode == 1) {
		sup_req_reply(&s->o.r, 204, NULL);
	} else {
		sbx_err e;
		sbx_err_set(&e, -ENOSPC, "disk full");
		sup_req_fail(&s->o.r, &e, NULL);
	}
}

static void on_reply(struct evhttp_request *req, void *ud)
{
	server *s = ud;
	if (req) {
		s->got.status = evhttp_request_get_response_code(req);
		const char *r = evhttp_request_get_response_code_line(req);
		snprintf(s->got.reason, sizeof(s->got.reason), "%s", r ? r : "");
		const char *t = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
		snprintf(s->got.type, sizeof(s->got.type), "%s", t ? t : "");
		struct evbuffer *b = evhttp_request_get_input_buffer(req);
		size_t n = evbuffer_get_length(b);
		if (n >= sizeof(s->got.body))
			n = sizeof(s->got.body) - 1;
		evbuffer_remove(b, s->got.body, n);
		s->got.body[n] = '\0';
	}
	event_base_loopexit(s->base, NULL);
}

static void roundtrip(server *s)
{
	s->base = event_base_new();
	assert_non_null(s->base);
	struct evhttp *http = evhttp_new(s->base);
	assert_non_null(http);
	struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(http, "127.0.0.1", 0);
	assert_non_null(bs);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	assert_int_equal(getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &sl), 0);
	int port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	evhttp_set_gencb(http, handler, s);
	struct evhttp_connection *c = evhttp_connection_base_new(s->base, NULL, "127.0.0.1",
								  (unsigned short)port);
	assert_non_null(c);
	struct evhttp_request *req = evhttp_request_new(on_reply, s);
	assert_non_null(req);
	assert_int_equal(evhttp_make_request(c, req, EVHTTP_REQ_GET, "/t"), 0);
	struct timeval tv = { 10, 0 };
	event_base_loopexit(s->base, &tv);
	event_base_dispatch(s->base);
	evhttp_connection_free(c);
	evhttp_free(http);
	event_base_free(s->base);
}

static void test_reply_error(void **state)
{
	(void)state;
	server s = { .kind = &kind_a, .mode = 0 };
	roundtrip(&s);
	/* Our phrase, not evhttp's "Request Entity Too Large". */
	assert_int_equal(s.got.status, 413);
	assert_string_equal(s.got.reason, "Payload Too Large");
	assert_string_equal(s.got.type, "application/json");
	json_error_t je;
	json_t *j = json_loads(s.got.body, 0, &je);
	assert_non_null(j);
	json_t *e = json_object_get(j, "error");
	assert_string_equal(json_string_value(json_object_get(e, "code")), "too_large");
	assert_string_equal(json_string_value(json_object_get(e, "message")), "no \xef\xbf\xbd here");
	assert_string_equal(json_string_value(json_object_get(e, "path_b64")), "L3cv/g==");
	assert_int_equal(json_object_size(j), 1);
	json_decref(j);
	assert_int_equal(s.o.released, 1);
}

static void test_reply_empty(void **state)
{
	(void)state;
	server s = { .kind = &kind_b, .mode = 1 };
	roundtrip(&s);
	assert_int_equal(s.got.status, 204);
	assert_string_equal(s.got.body, "");
	assert_string_equal(s.got.type, "");
	assert_int_equal(s.o.released, 1);
}

static void test_reply_fail(void **state)
{
	(void)state;
	server s = { .kind = &kind_b, .mode = 2 };
	roundtrip(&s);
	assert_int_equal(s.got.status, 507);
	assert_string_equal(s.got.reason, "Server Error"); /* evhttp's own phrase */
	assert_string_equal(s.got.body,
			    "{\"error\":{\"code\":\"no_space\",\"message\":\"disk full\"}}\n");
	assert_int_equal(s.o.released, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status),        cmocka_unit_test(test_args),
		cmocka_unit_test(test_set_bytes),     cmocka_unit_test(test_reply_error),
		cmocka_unit_test(test_reply_empty),   cmocka_unit_test(test_reply_fail),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
