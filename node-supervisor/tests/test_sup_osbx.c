/* The OpenSandbox layer's pure half: their quantities, times, create body
 * (into sbx's own create, through sup_api's parser), Sandbox shape, list
 * filter and command body; and its parsers called through the family's
 * rows as the edge calls them (a request in, state out, or a negative
 * errno with a message). */
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
#include "sup_osbx_int.h"
#include "sup_policy.h"
#include "sup_tenants.h"

static const sup_api_limits lim = {
	.default_timeout_s = 3600,
	.max_timeout_s = 86400,
	.res_default = { .cpu_milli = 1000, .memory = 1ull << 30, .pids = 1024, .disk = 1ull << 30 },
	.res_max = { .cpu_milli = 4000, .memory = 8ull << 30, .pids = 4096, .disk = 8ull << 30 },
};

static void test_quantities(void **unused)
{
	uint64_t v;
	assert_int_equal(sup_osbx_cpu_milli("500m", &v), 0);
	assert_int_equal(v, 500);
	assert_int_equal(sup_osbx_cpu_milli("2", &v), 0);
	assert_int_equal(v, 2000);
	assert_int_equal(sup_osbx_cpu_milli("0.25", &v), 0);
	assert_int_equal(v, 250);
	assert_int_equal(sup_osbx_bytes("512Mi", &v), 0);
	assert_int_equal(v, 512ull << 20);
	assert_int_equal(sup_osbx_bytes("2Gi", &v), 0);
	assert_int_equal(v, 2ull << 30);
	assert_int_equal(sup_osbx_bytes("1G", &v), 0);
	assert_int_equal(v, 1000000000ull);
	assert_int_equal(sup_osbx_bytes("1.5Gi", &v), 0);
	assert_int_equal(v, 3ull << 29);
	assert_int_equal(sup_osbx_bytes("4096", &v), 0);
	assert_int_equal(v, 4096);
	const char *bad[] = { "", "m", "1x", "-1", "1..2", "Mi", "99999999999999999999", NULL };
	for (int i = 0; bad[i]; i++) {
		assert_int_equal(sup_osbx_bytes(bad[i], &v), -EINVAL);
		assert_int_equal(sup_osbx_cpu_milli(bad[i], &v), -EINVAL);
	}
}

static void test_time(void **unused)
{
	time_t t;
	assert_int_equal(sup_osbx_parse_time("2026-12-01T22:00:00Z", &t), 0);
	assert_int_equal(t, 1796162400);
	assert_int_equal(sup_osbx_parse_time("2026-12-01T22:00:00.000Z", &t), 0);
	assert_int_equal(t, 1796162400);
	/* a fraction rounds up: the sandbox lives at least that long */
	assert_int_equal(sup_osbx_parse_time("2026-12-01T22:00:00.250Z", &t), 0);
	assert_int_equal(t, 1796162401);
	assert_int_equal(sup_osbx_parse_time("2026-12-01T23:00:00+01:00", &t), 0);
	assert_int_equal(t, 1796162400);
	const char *bad[] = { "", "2026-12-01", "2026-12-01T22:00:00", "2026-12-01T22:00:00Zx",
			      "2026-12-01T22:00:00.Z", "2026-12-01T22:00:00+1:00", NULL };
	for (int i = 0; bad[i]; i++)
		assert_int_equal(sup_osbx_parse_time(bad[i], &t), -EINVAL);
	char b[40];
	sup_osbx_time_ms(1796162400123ull, b, sizeof(b));
	assert_string_equal(b, "2026-12-01T22:00:00.123Z");
}

static int create(const char *body, sup_create_req *out, json_t **kept, sbx_err *e)
{
	memset(out, 0, sizeof(*out));
	sbx_err_clear(e);
	return sup_osbx_parse_create(body, strlen(body), &lim, out, kept, e);
}

static void test_create(void **unused)
{
	sup_create_req r;
	json_t *kept;
	sbx_err e;
	/* what their SDK sends */
	assert_int_equal(create("{\"image\":{\"uri\":\"host\"},\"entrypoint\":[\"tail\",\"-f\",\"/dev/null\"],"
				"\"resourceLimits\":{\"cpu\":\"500m\",\"memory\":\"512Mi\"},\"secureAccess\":false,"
				"\"env\":{\"K\":\"V\"},\"metadata\":{\"a\":\"b\"},\"extensions\":{},\"timeout\":600}",
				&r, &kept, &e),
			 0);
	assert_string_equal(r.image, "host");
	assert_int_equal(r.timeout_s, 600);
	assert_int_equal(r.resources.cpu_milli, 500);
	assert_int_equal(r.resources.memory, 512ull << 20);
	assert_int_equal(r.env.n, 1);
	assert_true(sup_osbx_entry_is_default(json_object_get(kept, "entrypoint")));
	assert_string_equal(json_string_value(json_object_get(json_object_get(kept, "metadata"), "a")), "b");
	sup_create_req_free(&r);
	json_decref(kept);

	/* their policy is sbx's with one key spelled otherwise; no --uplink in
	 * sup_api's eyes here is not its business: it parses */
	assert_int_equal(create("{\"image\":{\"uri\":\"host\"},\"networkPolicy\":{\"defaultAction\":\"deny\","
				"\"egress\":[{\"action\":\"allow\",\"target\":\"pypi.org\"}]}}",
				&r, &kept, &e),
			 0);
	assert_non_null(r.network);
	sup_create_req_free(&r);
	json_decref(kept);

	/* a restore: sbx's "snapshot", the id kept to show as theirs */
	assert_int_equal(create("{\"snapshotId\":\"sn-0123456789ab\",\"entrypoint\":[\"tail\",\"-f\",\"/dev/null\"]}",
				&r, &kept, &e),
			 0);
	assert_string_equal(r.snapshot, "sn-0123456789ab");
	assert_null(r.image);
	assert_string_equal(json_string_value(json_object_get(kept, "snapshotId")), "sn-0123456789ab");
	sup_create_req_free(&r);
	json_decref(kept);

	struct {
		const char *body;
		int rc;
		const char *msg;
	} bad[] = {
		{ "{}", -EINVAL, "image" },
		{ "[]", -EINVAL, "object" },
		{ "{\"image\":{\"uri\":\"host\"},\"resourceLimits\":{\"gpu\":\"1\"}}", -EINVAL, "gpu" },
		{ "{\"image\":{\"uri\":\"host\"},\"resourceLimits\":{\"cpu\":\"9\"}}", -EINVAL, "ceiling" },
		{ "{\"image\":{\"uri\":\"host\"},\"resourceLimits\":{\"memory\":\"lots\"}}", -EINVAL, "memory" },
		{ "{\"image\":{\"uri\":\"host\"},\"timeout\":999999999}", -EINVAL, "timeout" },
		{ "{\"image\":{\"uri\":\"host\"},\"env\":{\"K\":1}}", -EINVAL, "env.K" },
		{ "{\"image\":{\"uri\":\"host\"},\"snapshotId\":\"sn-1\"}", -EINVAL, "one of" },
		{ "{\"snapshotId\":7}", -EINVAL, "snapshotId" },
		{ "{\"image\":{\"uri\":\"host\"},\"secureAccess\":true}", -EINVAL, "secureAccess" },
		{ "{\"image\":{\"uri\":\"host\",\"auth\":{\"username\":\"u\"}}}", -EINVAL, "credentials" },
		{ "{\"image\":{\"uri\":\"host\"},\"platform\":{\"os\":\"windows\",\"arch\":\"amd64\"}}", -EINVAL,
		  "platform" },
		{ "{\"image\":{\"uri\":\"host\"},\"entrypoint\":[]}", -EINVAL, "entrypoint" },
		{ "{\"image\":{\"uri\":\"host\"},\"bogus\":1}", -EINVAL, "bogus" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = create(bad[i].body, &r, &kept, &e);
		if (rc != bad[i].rc || !strstr(e.msg, bad[i].msg))
			fail_msg("%s: %d %s", bad[i].body, rc, e.msg);
		sup_create_req_free(&r);
		json_decref(kept);
	}
}

static void test_sandbox_json(void **unused)
{
	sup_sandbox_view v = { .id = "sb-1", .state = "running", .image = "host",
			       .created_at = 1796162400, .expires_at = 1796166000 };
	json_t *kept = json_pack("{s:{s:s}, s:[s]}", "metadata", "a", "b", "entrypoint", "sleep");
	json_t *o = sup_osbx_sandbox_json(&v, kept);
	char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(s, "{\"createdAt\":\"2026-12-01T22:00:00Z\",\"entrypoint\":[\"sleep\"],"
			       "\"expiresAt\":\"2026-12-01T23:00:00Z\",\"id\":\"sb-1\",\"image\":{\"uri\":\"host\"},"
			       "\"metadata\":{\"a\":\"b\"},\"status\":{\"message\":\"\",\"reason\":\"Running\","
			       "\"state\":\"Running\"}}");
	free(s);
	json_decref(o);
	json_decref(kept);
	v.state = "failed";
	v.reason = "agent gone";
	o = sup_osbx_sandbox_json(&v, NULL);
	assert_string_equal(json_string_value(json_object_get(json_object_get(o, "status"), "state")), "Error");
	assert_int_equal(json_array_size(json_object_get(o, "entrypoint")), 3);
	json_decref(o);
	assert_string_equal(sup_osbx_state("destroying"), "Deleting");
}

static void test_meta_match(void **unused)
{
	json_t *m = json_pack("{s:s, s:s}", "project", "Apollo", "note", "Demo Test");
	assert_int_equal(sup_osbx_meta_match("project=Apollo", m), 1);
	assert_int_equal(sup_osbx_meta_match("project=Apollo&note=Demo%20Test", m), 1);
	assert_int_equal(sup_osbx_meta_match("project=Zeus", m), 0);
	assert_int_equal(sup_osbx_meta_match("other=x", m), 0);
	assert_int_equal(sup_osbx_meta_match("project=Apollo", NULL), 0);
	assert_int_equal(sup_osbx_meta_match("=x", m), -EINVAL);
	assert_int_equal(sup_osbx_meta_match("novalue", m), -EINVAL);
	assert_int_equal(sup_osbx_meta_match("a=%4", m), -EINVAL);
	json_decref(m);
}

static void test_command(void **unused)
{
	sup_exec_spec s = { 0 };
	bool bg;
	sbx_err e;
	const char *b = "{\"command\":\"echo hi\",\"cwd\":\"/tmp\",\"background\":true,\"timeout\":1500,"
			"\"envs\":{\"A\":\"1\"},\"uid\":1000}";
	assert_int_equal(sup_osbx_parse_command(b, strlen(b), &s, &bg, &e), 0);
	assert_true(bg);
	assert_string_equal(s.x.cmd, "echo hi");
	assert_string_equal(s.x.cwd, "/tmp");
	assert_int_equal(s.x.timeout_ms, 1500);
	assert_string_equal(s.x.user, "1000");
	sup_exec_spec_free(&s);
	const char *bad[] = { "{}", "{\"command\":\"\"}", "{\"command\":\"x\",\"gid\":1}",
			      "{\"command\":\"x\",\"timeout\":0}", "{\"command\":\"x\",\"what\":1}",
			      "{\"command\":\"x\",\"background\":\"yes\"}", "nope", NULL };
	for (int i = 0; bad[i]; i++) {
		memset(&s, 0, sizeof(s));
		sbx_err_clear(&e);
		assert_int_equal(sup_osbx_parse_command(bad[i], strlen(bad[i]), &s, &bg, &e), -EINVAL);
		assert_true(e.msg[0]);
		sup_exec_spec_free(&s);
	}
}

/* ---- the rows' parsers ---- */

static sup_osbx_ctx ctx = { .limits = { .default_timeout_s = 3600, .max_timeout_s = 86400,
					.res_max = { .cpu_milli = 4000, .memory = 8ull << 30,
						     .pids = 4096, .disk = 8ull << 30 } } };

static sup_tenant tenant = { .name = "default" };
static const sup_http_hdr *hdrs;
static size_t nhdrs;

static int parse(const char *name, const char *pid, const char *query, const char *body,
		 sup_oq **out, sbx_err *e)
{
	char path[256];
	sup_http_in in = { .id = "sb-1", .pid = pid, .query = query, .body = body ? body : "",
			   .body_len = body ? strlen(body) : 0, .who = &tenant, .path = path,
			   .hdrs = hdrs, .nhdrs = nhdrs };
	for (size_t i = 0; i < sup_osbx_family.nroutes; i++) {
		const sup_http_route *r = &sup_osbx_family.routes[i];
		if (strcmp(r->name, name) != 0)
			continue;
		const char *at = strstr(r->pattern, "{id}");
		snprintf(path, sizeof(path), "%.*ssb-1%s", (int)(at ? at - r->pattern : 0), r->pattern,
			 at ? at + 4 : r->pattern);
		in.method = r->method;
		*out = calloc(1, sup_osbx_family.state_size);
		sbx_err_clear(e);
		return r->parse ? r->parse(&in, &ctx, *out, e) : 0;
	}
	fail_msg("no route %s", name);
	return 0;
}

static void done(sup_oq *q)
{
	sup_osbx_family.release(q);
	free(q);
}

static void test_rows(void **unused)
{
	sup_oq *q;
	sbx_err e;
	assert_int_equal(parse("POST osbx renew", NULL, NULL, "{\"expiresAt\":\"2999-01-01T00:00:00Z\"}", &q, &e),
			 -EINVAL); /* too far ahead */
	done(q);
	assert_int_equal(parse("POST osbx renew", NULL, NULL, "{\"expiresAt\":\"2000-01-01T00:00:00Z\"}", &q, &e),
			 -EINVAL);
	assert_non_null(strstr(e.msg, "future"));
	done(q);
	char body[96];
	time_t soon = time(NULL) + 600;
	struct tm tm;
	gmtime_r(&soon, &tm);
	strftime(body, sizeof(body), "{\"expiresAt\":\"%Y-%m-%dT%H:%M:%S.500Z\"}", &tm);
	assert_int_equal(parse("POST osbx renew", NULL, NULL, body, &q, &e), 0);
	assert_in_range(q->timeout_s, 599, 601);
	done(q);

	assert_int_equal(parse("GET osbx endpoint", "44772", "use_server_proxy=false", NULL, &q, &e), 0);
	assert_string_equal(q->port, "44772");
	done(q);
	assert_int_equal(parse("GET osbx endpoint", "0", NULL, NULL, &q, &e), -EINVAL);
	done(q);
	/* signed: Unix seconds after now, at most 7 days ahead, not execd's */
	char qs[80];
	long long now = (long long)time(NULL);
	snprintf(qs, sizeof(qs), "expires=%lld", now + 60);
	assert_int_equal(parse("GET osbx endpoint", "80", qs, NULL, &q, &e), 0);
	assert_int_equal(q->sign_exp, (uint64_t)(now + 60));
	done(q);
	assert_int_equal(parse("GET osbx endpoint", "80", NULL, NULL, &q, &e), 0);
	assert_int_equal(q->sign_exp, 0);
	done(q);
	assert_int_equal(parse("GET osbx endpoint", "44772", qs, NULL, &q, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "execd"));
	done(q);
	assert_int_equal(parse("GET osbx endpoint", "18080", qs, NULL, &q, &e), -EINVAL);
	done(q);
	snprintf(qs, sizeof(qs), "use_server_proxy=true&expires=%lld", now + 60);
	assert_int_equal(parse("GET osbx endpoint", "80", qs, NULL, &q, &e), -EINVAL);
	done(q);
	snprintf(qs, sizeof(qs), "use_server_proxy=false&expires=%lld", now + 60);
	assert_int_equal(parse("GET osbx endpoint", "80", qs, NULL, &q, &e), 0);
	done(q);
	snprintf(qs, sizeof(qs), "expires=%lld", now + 8 * 86400);
	assert_int_equal(parse("GET osbx endpoint", "80", qs, NULL, &q, &e), -EINVAL);
	done(q);
	static const char *const bad[] = { "expires=", "expires=5", "expires=-1", "expires=1e9",
					   "expires=99999999999999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse("GET osbx endpoint", "80", bad[i], NULL, &q, &e), -EINVAL);
		done(q);
	}
	assert_int_equal(parse("GET osbx endpoint", "80", "other=1", NULL, &q, &e), -EINVAL);
	done(q);

	assert_int_equal(parse("POST osbx command", NULL, NULL, "{\"command\":\"ls\"}", &q, &e), 0);
	assert_false(q->background);
	done(q);
	assert_int_equal(parse("GET osbx command status", "42", NULL, NULL, &q, &e), 0);
	assert_int_equal(q->pid, 42);
	done(q);
	assert_int_equal(parse("GET osbx command status", "fg-1", NULL, NULL, &q, &e), -ENOENT);
	done(q);
	assert_int_equal(parse("GET osbx command logs", "42", "cursor=14", NULL, &q, &e), 0);
	assert_int_equal(q->cursor, 14);
	done(q);
	assert_int_equal(parse("GET osbx command logs", "42", "cursor=x", NULL, &q, &e), -EINVAL);
	done(q);
	assert_int_equal(parse("DELETE osbx command", NULL, "id=fg-3", NULL, &q, &e), 0);
	assert_string_equal(q->target, "fg-3");
	done(q);
	assert_int_equal(parse("DELETE osbx command", NULL, "id=77", NULL, &q, &e), 0);
	assert_int_equal(q->pid, 77);
	done(q);
	assert_int_equal(parse("DELETE osbx command", NULL, NULL, NULL, &q, &e), -EINVAL);
	done(q);
	assert_int_equal(parse("POST osbx sandboxes", NULL, NULL, "{\"image\":{\"uri\":\"host\"}}", &q, &e), 0);
	assert_string_equal(q->create.image, "host");
	done(q);
}

static void test_files(void **unused)
{
	sup_oq *q;
	sbx_err e;
	uint64_t off, len, mode;
	assert_int_equal(sup_osbx_range("bytes=6-10", &off, &len), 0);
	assert_true(off == 6 && len == 5);
	assert_int_equal(sup_osbx_range("bytes=6-", &off, &len), 0);
	assert_true(off == 6 && len == UINT64_MAX);
	const char *bad_ranges[] = { "bytes=-5", "bytes=5-1", "bytes=1-2,4-5", "items=1-2", "bytes=", NULL };
	for (int i = 0; bad_ranges[i]; i++)
		assert_int_equal(sup_osbx_range(bad_ranges[i], &off, &len), -EINVAL);
	assert_int_equal(sup_osbx_mode(644, &mode), 0);
	assert_int_equal(mode, 0644);
	assert_int_equal(sup_osbx_mode(1777, &mode), 0);
	assert_int_equal(mode, 01777);
	assert_int_equal(sup_osbx_mode(0, &mode), 0);
	assert_int_equal(mode, 0);
	assert_int_equal(sup_osbx_mode(648, &mode), -EINVAL);
	assert_int_equal(sup_osbx_mode(-1, &mode), -EINVAL);
	assert_int_equal(sup_osbx_mode(17777, &mode), -EINVAL);

	assert_int_equal(sup_policy_new_default(&tenant.policy, &e), 0);
	struct {
		const char *row, *query, *body;
		int rc;
	} cases[] = {
		{ "GET osbx files info", "path=/workspace/a&path=%2Ftmp%2Fb", NULL, 0 },
		{ "GET osbx files info", "path=/etc/passwd", NULL, -EPERM },
		{ "GET osbx files info", NULL, NULL, -EINVAL },
		{ "GET osbx files info", "path=/workspace/a&depth=2", NULL, -EINVAL },
		{ "DELETE osbx files", "path=/workspace/a", NULL, 0 },
		{ "DELETE osbx files", "path=/workspace", NULL, -EPERM }, /* a policy root */
		{ "GET osbx directories list", "path=/workspace&depth=3", NULL, 0 },
		{ "GET osbx directories list", "path=/workspace&depth=33", NULL, -EINVAL },
		{ "GET osbx directories list", "path=/workspace&path=/tmp", NULL, -EINVAL },
		{ "GET osbx files search", "path=/workspace&pattern=*.py", NULL, 0 },
		{ "POST osbx directories", NULL, "{\"/workspace/d\":{\"mode\":755}}", 0 },
		{ "POST osbx directories", NULL, "{\"/workspace/d\":{\"mode\":758}}", -EINVAL },
		{ "POST osbx directories", NULL, "{\"/workspace/d\":{\"mode\":755,\"owner\":\"root\"}}", -EPERM },
		{ "POST osbx directories", NULL, "{}", -EINVAL },
		{ "POST osbx files permissions", NULL, "{\"/workspace/f\":{\"owner\":\"sandbox\"}}", -EINVAL },
		{ "POST osbx files permissions", NULL, "{\"/workspace/f\":{\"mode\":600}}", 0 },
		{ "POST osbx files mv", NULL, "[{\"src\":\"/workspace/a\",\"dest\":\"/tmp/a\"}]", 0 },
		{ "POST osbx files mv", NULL, "[{\"src\":\"/workspace/a\",\"dest\":\"/etc/a\"}]", -EPERM },
		{ "POST osbx files mv", NULL, "{\"src\":\"/workspace/a\"}", -EINVAL },
		{ "GET osbx files download", "path=/workspace/a", NULL, 0 },
		{ "GET osbx files download", "path=/root/a", NULL, -EPERM },
		{ "POST osbx files upload", NULL, NULL, -EINVAL }, /* no multipart Content-Type */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = parse(cases[i].row, NULL, cases[i].query, cases[i].body, &q, &e);
		if (rc != cases[i].rc)
			fail_msg("%s ?%s %s: %d (%s)", cases[i].row, cases[i].query ? cases[i].query : "",
				 cases[i].body ? cases[i].body : "", rc, e.msg);
		done(q);
	}
	static const sup_http_hdr range[] = { { "Range", "bytes=2-" } };
	hdrs = range;
	nhdrs = 1;
	assert_int_equal(parse("GET osbx files download", NULL, "path=/workspace/a", NULL, &q, &e), 0);
	done(q);
	static const sup_http_hdr mp[] = { { "Content-Type", "multipart/form-data; boundary=xyz" } };
	hdrs = mp;
	assert_int_equal(parse("POST osbx files upload", NULL, NULL, NULL, &q, &e), 0);
	done(q);
	static const sup_http_hdr json[] = { { "Content-Type", "application/json" } };
	hdrs = json;
	assert_int_equal(parse("POST osbx files upload", NULL, NULL, NULL, &q, &e), -EINVAL);
	done(q);
	hdrs = NULL;
	nhdrs = 0;
	sup_policy_free(tenant.policy);
	tenant.policy = NULL;
}

/* {"entries": [{"path": rel, "name", stat keys...}]} as an agent answers
 * fs.list. */
static json_t *entries_of(const char *base, const char *rel, sbx_err *e)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1);
	sbx_proto_pack_str(&pk, "entries");
	msgpack_pack_array(&pk, 1);
	msgpack_pack_map(&pk, 10);
	sbx_proto_pack_str(&pk, "path");
	sbx_proto_pack_str(&pk, rel);
	const char *slash = strrchr(rel, '/');
	sbx_proto_pack_str(&pk, "name");
	sbx_proto_pack_str(&pk, slash && slash[1] ? slash + 1 : "x");
	sbx_proto_pack_str(&pk, "type");
	sbx_proto_pack_str(&pk, "file");
	static const char *const keys[] = { "size", "mode", "mtime_ns", "uid", "gid", "nlink", "ino" };
	static const uint64_t vals[] = { 5, 0644, 1700000000000000000ull, 1000, 0, 1, 42 };
	for (int i = 0; i < 7; i++) {
		sbx_proto_pack_str(&pk, keys[i]);
		msgpack_pack_uint64(&pk, vals[i]);
	}
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	assert_int_equal(msgpack_unpack_next(&u, sb.data, sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
	sbx_err_clear(e);
	json_t *a = sup_osbx_entries_json(base, &u.data, e);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
	return a;
}

/* A listing's entries name paths below the folder asked for, as sbx's own
 * routes check them: an agent's "..", "." or empty part, or an absolute
 * path, is the agent's protocol error, never a path outside. */
static void test_entries_checked(void **unused)
{
	sbx_err e;
	json_t *a = entries_of("/workspace", "d/f.txt", &e);
	assert_non_null(a);
	json_t *o = json_array_get(a, 0);
	assert_string_equal(json_string_value(json_object_get(o, "path")), "/workspace/d/f.txt");
	assert_int_equal(json_integer_value(json_object_get(o, "mode")), 644);
	assert_string_equal(json_string_value(json_object_get(o, "owner")), "sandbox");
	json_decref(a);
	a = entries_of("/", "etc", &e);
	assert_string_equal(json_string_value(json_object_get(json_array_get(a, 0), "path")), "/etc");
	json_decref(a);
	static const char *const bad[] = { "../etc/shadow", "a/../../etc", "..", "./a", "a/.",
					   "a//b",          "a/",          "/etc", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_null(entries_of("/workspace", bad[i], &e));
		assert_int_equal(e.code, -EPROTO);
		assert_string_equal(e.msg, "agent: a listing entry without a valid path or name");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_quantities), cmocka_unit_test(test_time),
		cmocka_unit_test(test_create),     cmocka_unit_test(test_sandbox_json),
		cmocka_unit_test(test_meta_match), cmocka_unit_test(test_command),
		cmocka_unit_test(test_rows),       cmocka_unit_test(test_files),
		cmocka_unit_test(test_entries_checked),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
