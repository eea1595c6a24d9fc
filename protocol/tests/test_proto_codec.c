/* Frame codec: every kind round-trips, and malformed or oversized input gets
 * the right error code instead of a crash or an allocation. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sbx/proto.h"
#include "test_msgpack.h"

/* Decode exactly one frame from w, which must hold exactly it. */
static void decode_one(const sbx_proto_writer *w, sbx_proto_frame *f)
{
	size_t used = 0;
	sbx_proto_code pc = 99;
	sbx_err err;
	sbx_err_clear(&err);
	int rc = sbx_proto_frame_decode((const uint8_t *)w->buf.data, w->buf.size, 0, f, &used, &pc,
					&err);
	if (rc != 1)
		fail_msg("decode: rc %d: %s", rc, err.msg);
	assert_int_equal(used, w->buf.size);
	assert_int_equal(pc, 0);
	assert_int_equal(f->body_len, w->buf.size - SBX_PROTO_HEADER_LEN);
}

/* Decoding then re-encoding gives the same bytes. */
static void assert_reencodes(const sbx_proto_writer *w, const sbx_proto_frame *f)
{
	sbx_proto_writer w2;
	sbx_proto_writer_init(&w2);
	assert_int_equal(sbx_proto_encode_frame(&w2, f, 0, NULL), 0);
	assert_int_equal(w2.buf.size, w->buf.size);
	assert_memory_equal(w2.buf.data, w->buf.data, w->buf.size);
	sbx_proto_writer_destroy(&w2);
}

static void pack_map1(msgpack_sbuffer *sb, const char *k, uint64_t v)
{
	msgpack_packer pk;
	tm_init(sb, &pk);
	msgpack_pack_map(&pk, 1);
	sbx_proto_pack_str(&pk, k);
	msgpack_pack_uint64(&pk, v);
}

static void test_hello(void **state)
{
	sbx_proto_writer w;
	sbx_proto_frame f;
	const char *caps[] = { "exec", "exec.stdin" };
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_hello(&w, 65536, 16, 4096, caps, 2, "agent/1", NULL), 0);
	decode_one(&w, &f);
	assert_int_equal(f.kind, SBX_PROTO_HELLO);
	assert_int_equal(f.version, SBX_PROTO_VERSION);
	assert_int_equal(f.max_frame, 65536);
	assert_int_equal(f.max_streams, 16);
	assert_int_equal(f.window, 4096);
	assert_int_equal(f.caps.type, MSGPACK_OBJECT_ARRAY);
	assert_int_equal(f.caps.via.array.size, 2);
	char *cap1 = sbx_proto_strdup(&f.caps.via.array.ptr[1]);
	assert_string_equal(cap1, "exec.stdin");
	free(cap1);
	assert_int_equal(f.agent_len, 7);
	assert_memory_equal(f.agent, "agent/1", 7);
	assert_reencodes(&w, &f);
	sbx_proto_frame_release(&f);
	sbx_proto_writer_destroy(&w);
}

static void test_req(void **state)
{
	sbx_proto_writer w;
	sbx_proto_frame f;
	msgpack_sbuffer args;
	pack_map1(&args, "timeout_ms", 1500);
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_req(&w, 7, "exec", args.data, args.size, 0, NULL), 0);
	decode_one(&w, &f);
	assert_int_equal(f.kind, SBX_PROTO_REQ);
	assert_int_equal(f.id, 7);
	assert_int_equal(f.op_len, 4);
	assert_memory_equal(f.op, "exec", 4);
	uint64_t t = 0;
	assert_true(sbx_proto_get_uint(&f.args, "timeout_ms", &t));
	assert_int_equal(t, 1500);
	assert_reencodes(&w, &f);
	sbx_proto_frame_release(&f);

	/* no args: "a" omitted, decoded as nil */
	sbx_proto_writer_reset(&w);
	assert_int_equal(sbx_proto_encode_req(&w, 9, "ping", NULL, 0, 0, NULL), 0);
	decode_one(&w, &f);
	assert_int_equal(f.args.type, MSGPACK_OBJECT_NIL);
	assert_reencodes(&w, &f);
	sbx_proto_frame_release(&f);

	/* args that are not one map are refused and leave nothing behind */
	sbx_proto_writer_reset(&w);
	assert_int_equal(sbx_proto_encode_req(&w, 11, "exec", "\x91\x01", 2, 0, NULL), -EINVAL);
	assert_int_equal(sbx_proto_encode_req(&w, 11, "exec", args.data, args.size - 1, 0, NULL),
			 -EINVAL);
	assert_int_equal(w.buf.size, 0);
	msgpack_sbuffer_destroy(&args);
	sbx_proto_writer_destroy(&w);
}

static void test_data(void **state)
{
	sbx_proto_writer w;
	sbx_proto_frame f;
	uint8_t bytes[300];
	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)i;
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_data(&w, 3, SBX_CH_STDOUT, bytes, sizeof(bytes), false,
					       0, NULL), 0);
	decode_one(&w, &f);
	assert_int_equal(f.kind, SBX_PROTO_DATA);
	assert_int_equal(f.ch_len, 6);
	assert_memory_equal(f.ch, "stdout", 6);
	assert_int_equal(f.data_len, sizeof(bytes));
	assert_memory_equal(f.data, bytes, sizeof(bytes));
	assert_false(f.eof);
	assert_reencodes(&w, &f);
	sbx_proto_frame_release(&f);

	sbx_proto_writer_reset(&w);
	assert_int_equal(sbx_proto_encode_data(&w, 3, SBX_CH_STDIN, "", 0, true, 0, NULL), 0);
	decode_one(&w, &f);
	assert_true(f.eof);
	assert_int_equal(f.data_len, 0);
	assert_reencodes(&w, &f);
	sbx_proto_frame_release(&f);

	/* a payload of max_frame - DATA_OVERHEAD always fits, with the longest id and channel */
	sbx_proto_writer_reset(&w);
	size_t max = SBX_PROTO_MIN_MAX_FRAME;
	uint8_t *big = calloc(1, max);
	char ch[SBX_PROTO_MAX_CH_LEN + 2];
	memset(ch, 'c', sizeof(ch));
	ch[SBX_PROTO_MAX_CH_LEN] = '\0';
	assert_int_equal(sbx_proto_encode_data(&w, UINT64_MAX, ch, big, max - SBX_PROTO_DATA_OVERHEAD,
					       true, max, NULL), 0);
	ch[SBX_PROTO_MAX_CH_LEN] = 'c';
	ch[SBX_PROTO_MAX_CH_LEN + 1] = '\0';
	assert_int_equal(sbx_proto_encode_data(&w, 1, ch, big, 1, false, max, NULL), -EINVAL);
	/* one payload byte over max_frame is refused, the earlier frame stays */
	size_t before = w.buf.size;
	sbx_err err;
	assert_int_equal(sbx_proto_encode_data(&w, 1, "x", big, max, false, max, &err), -EMSGSIZE);
	assert_int_equal(err.code, -EMSGSIZE);
	assert_int_equal(w.buf.size, before);
	free(big);
	sbx_proto_writer_destroy(&w);
}

/* In place: the same frame, its payload and channel pointing into the
 * bytes decoded instead of a copy; a bad frame fails alike. */
static void test_data_in_place(void **state)
{
	sbx_proto_writer w;
	sbx_proto_frame f;
	uint8_t bytes[5000];
	size_t used = 0;
	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)(i * 3);
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_data(&w, 5, SBX_CH_TCP, bytes, sizeof(bytes), true, 0,
					       NULL), 0);
	const uint8_t *buf = (const uint8_t *)w.buf.data;
	assert_int_equal(sbx_proto_frame_decode_in_place(buf, w.buf.size, 0, &f, &used, NULL, NULL), 1);
	assert_int_equal(used, w.buf.size);
	assert_int_equal(f.kind, SBX_PROTO_DATA);
	assert_int_equal(f.id, 5);
	assert_true(f.eof);
	assert_int_equal(f.data_len, sizeof(bytes));
	assert_memory_equal(f.data, bytes, sizeof(bytes));
	assert_true(f.data > buf && f.data + f.data_len <= buf + w.buf.size);
	assert_true((const uint8_t *)f.ch > buf && (const uint8_t *)f.ch < f.data);
	assert_int_equal(f.body_len, w.buf.size - SBX_PROTO_HEADER_LEN);
	assert_reencodes(&w, &f);
	sbx_proto_frame_release(&f);
	/* a byte short: more is needed; a body that is no map: refused */
	assert_int_equal(sbx_proto_frame_decode_in_place(buf, w.buf.size - 1, 0, &f, &used, NULL,
							 NULL), 0);
	uint8_t notmap[] = { 0, 0, 0, 1, 0x01 };
	sbx_proto_code pc = 0;
	sbx_err err;
	assert_int_equal(sbx_proto_frame_decode_in_place(notmap, sizeof(notmap), 0, &f, &used, &pc,
							 &err), -EBADMSG);
	assert_int_equal(pc, SBX_PROTO_E_BAD_FRAME);
	sbx_proto_writer_destroy(&w);
}

static void test_map_kinds(void **state)
{
	const sbx_proto_kind kinds[] = { SBX_PROTO_EVENT, SBX_PROTO_CTL, SBX_PROTO_END };
	msgpack_sbuffer m;
	pack_map1(&m, "signal", 15);
	for (size_t i = 0; i < 3; i++) {
		sbx_proto_writer w;
		sbx_proto_frame f;
		sbx_proto_writer_init(&w);
		int rc = kinds[i] == SBX_PROTO_EVENT ? sbx_proto_encode_event(&w, 5, m.data, m.size, 0, NULL)
			 : kinds[i] == SBX_PROTO_CTL ? sbx_proto_encode_ctl(&w, 5, m.data, m.size, 0, NULL)
						      : sbx_proto_encode_end(&w, 5, m.data, m.size, 0, NULL);
		assert_int_equal(rc, 0);
		decode_one(&w, &f);
		assert_int_equal(f.kind, kinds[i]);
		assert_int_equal(f.id, 5);
		uint64_t sig = 0;
		assert_true(sbx_proto_get_uint(&f.args, "signal", &sig));
		assert_int_equal(sig, 15);
		assert_reencodes(&w, &f);
		sbx_proto_frame_release(&f);

		/* no map: {} */
		sbx_proto_writer_reset(&w);
		rc = kinds[i] == SBX_PROTO_END ? sbx_proto_encode_end(&w, 5, NULL, 0, 0, NULL)
					       : sbx_proto_encode_event(&w, 5, NULL, 0, 0, NULL);
		assert_int_equal(rc, 0);
		decode_one(&w, &f);
		assert_int_equal(f.args.type, MSGPACK_OBJECT_MAP);
		assert_int_equal(f.args.via.map.size, 0);
		sbx_proto_frame_release(&f);
		sbx_proto_writer_destroy(&w);
	}
	msgpack_sbuffer_destroy(&m);
}

static void test_small_kinds(void **state)
{
	sbx_proto_writer w;
	sbx_proto_frame f;
	sbx_proto_writer_init(&w);
	/* several frames back to back in one writer */
	assert_int_equal(sbx_proto_encode_credit(&w, 4, 131072, NULL), 0);
	size_t credit_end = w.buf.size;
	assert_int_equal(sbx_proto_encode_cancel(&w, 6, NULL), 0);
	size_t cancel_end = w.buf.size;
	assert_int_equal(sbx_proto_encode_err(&w, 8, SBX_PROTO_E_NOT_FOUND, "no such file", 0, NULL), 0);
	assert_int_equal(sbx_proto_encode_err(&w, 0, SBX_PROTO_E_PROTOCOL, NULL, 0, NULL), 0);

	const uint8_t *p = (const uint8_t *)w.buf.data;
	size_t used;
	assert_int_equal(sbx_proto_frame_decode(p, w.buf.size, 0, &f, &used, NULL, NULL), 1);
	assert_int_equal(used, credit_end);
	assert_int_equal(f.kind, SBX_PROTO_CREDIT);
	assert_int_equal(f.credit, 131072);
	sbx_proto_frame_release(&f);
	p += used;
	assert_int_equal(sbx_proto_frame_decode(p, w.buf.size - credit_end, 0, &f, &used, NULL, NULL), 1);
	assert_int_equal(f.kind, SBX_PROTO_CANCEL);
	assert_int_equal(f.id, 6);
	sbx_proto_frame_release(&f);
	p += used;
	assert_int_equal(sbx_proto_frame_decode(p, w.buf.size - cancel_end, 0, &f, &used, NULL, NULL), 1);
	assert_int_equal(f.kind, SBX_PROTO_ERR);
	assert_int_equal(f.code, SBX_PROTO_E_NOT_FOUND);
	assert_int_equal(f.msg_len, 12);
	assert_memory_equal(f.msg, "no such file", 12);
	sbx_proto_frame_release(&f);
	p += used;
	assert_int_equal(sbx_proto_frame_decode(p, (size_t)((const uint8_t *)w.buf.data + w.buf.size - p),
						0, &f, &used, NULL, NULL), 1);
	assert_int_equal(f.id, 0);
	assert_int_equal(f.code, SBX_PROTO_E_PROTOCOL);
	assert_null(f.msg);
	sbx_proto_frame_release(&f);
	sbx_proto_writer_destroy(&w);
}

/* A hand-written body (msgpack bytes) behind a correct length header;
 * keep (if not NULL) receives the decoded frame. */
static int decode_body_keep(const void *body, size_t len, sbx_proto_code *pc, sbx_proto_frame *keep)
{
	uint8_t *buf = malloc(len + 4);
	buf[0] = (uint8_t)(len >> 24);
	buf[1] = (uint8_t)(len >> 16);
	buf[2] = (uint8_t)(len >> 8);
	buf[3] = (uint8_t)len;
	memcpy(buf + 4, body, len);
	sbx_proto_frame f;
	size_t used;
	sbx_err err;
	sbx_err_clear(&err);
	int rc = sbx_proto_frame_decode(buf, len + 4, 0, &f, &used, pc, &err);
	if (rc < 0) {
		assert_int_equal(err.code, rc);
		assert_true(err.msg[0] != '\0');
	}
	if (rc == 1 && keep)
		*keep = f;
	else if (rc == 1)
		sbx_proto_frame_release(&f);
	free(buf);
	return rc;
}

static int decode_body(const void *body, size_t len, sbx_proto_code *pc)
{
	return decode_body_keep(body, len, pc, NULL);
}

#define BODY(s) s, sizeof(s) - 1

static void test_limits(void **state)
{
	sbx_proto_code pc;
	sbx_proto_frame f;
	size_t used;
	/* a length header over max_frame fails on the 4 header bytes alone */
	const uint8_t huge[] = { 0x7f, 0xff, 0xff, 0xff };
	assert_int_equal(sbx_proto_frame_decode(huge, 4, 0, &f, &used, &pc, NULL), -EMSGSIZE);
	assert_int_equal(pc, SBX_PROTO_E_TOO_LARGE);
	const uint8_t just_over[] = { 0x00, 0x00, 0x10, 0x01 }; /* 4097 */
	assert_int_equal(sbx_proto_frame_decode(just_over, 4, 4096, &f, &used, &pc, NULL), -EMSGSIZE);
	/* max_frame is capped at the hard limit */
	const uint8_t over_hard[] = { 0x01, 0x00, 0x00, 0x01 };
	assert_int_equal(sbx_proto_frame_decode(over_hard, 4, UINT32_MAX, &f, &used, &pc, NULL), -EMSGSIZE);

	/* empty body, non-map bodies, hostile counts, reserved byte, trailing bytes */
	assert_int_equal(decode_body("", 0, &pc), -EBADMSG);
	assert_int_equal(pc, SBX_PROTO_E_BAD_FRAME);
	assert_int_equal(decode_body(BODY("\x91\x01"), &pc), -EBADMSG);
	assert_int_equal(decode_body(BODY("\xa1t"), &pc), -EBADMSG);
	assert_int_equal(decode_body(BODY("\xc0"), &pc), -EBADMSG);
	assert_int_equal(decode_body(BODY("\xdf\xff\xff\xff\xff"), &pc), -EBADMSG);
	assert_int_equal(decode_body(BODY("\xdd\xff\xff\xff\xff"), &pc), -EBADMSG);
	assert_int_equal(decode_body(BODY("\x81\xa1t\xc1"), &pc), -EBADMSG);
	assert_int_equal(decode_body(BODY("\x82\xa1t\xa6" "cancel\xa2id\x01\x00"), &pc), -EBADMSG);
	assert_int_equal(decode_body(BODY("\x82\xa1t\xa6" "cancel\xa2id\xdb\xff\xff\xff\xff"), &pc), -EBADMSG);
	/* nesting: 32 maps deep is what msgpack-c allows, 33 is refused */
	static const char head2[] = "\x82\xa1t\xa6" "cancel\xa2id";
	uint8_t deep[200];
	size_t n = sizeof(head2) - 1;
	memcpy(deep, head2, n); /* the id's value is the nest */
	for (int i = 0; i < 32; i++) {
		memcpy(deep + n, "\x81\xa1k", 3);
		n += 3;
	}
	deep[n++] = 0x01;
	assert_int_equal(decode_body(deep, n, &pc), -EBADMSG); /* 33 levels with the top map */
	assert_int_equal(pc, SBX_PROTO_E_BAD_FRAME);

	/* 32 levels with the top map: an unknown key holding a deep nest is fine */
	static const char head3[] = "\x83\xa1t\xa6" "cancel\xa2id\x01\xa1x";
	n = sizeof(head3) - 1;
	memcpy(deep, head3, n);
	for (int i = 0; i < 31; i++) {
		memcpy(deep + n, "\x81\xa1k", 3);
		n += 3;
	}
	deep[n++] = 0x01;
	assert_int_equal(decode_body(deep, n, &pc), 1);
}

static void test_fields(void **state)
{
	sbx_proto_code pc;
	/* missing and unknown "t" */
	assert_int_equal(decode_body(BODY("\x81\xa2id\x01"), &pc), -EBADMSG);
	assert_int_equal(pc, SBX_PROTO_E_BAD_FRAME);
	assert_int_equal(decode_body(BODY("\x82\xa1t\xa4nope\xa2id\x01"), &pc), -EOPNOTSUPP);
	assert_int_equal(pc, SBX_PROTO_E_UNSUPPORTED);
	assert_int_equal(decode_body(BODY("\x82\xa1t\x01\xa2id\x01"), &pc), -EBADMSG);
	/* wrong types */
	assert_int_equal(decode_body(BODY("\x82\xa1t\xa6" "cancel\xa2id\xff"), &pc), -EBADMSG);
	assert_int_equal(decode_body(BODY("\x82\xa1t\xa6" "cancel\xa2id\xa1" "1"), &pc), -EBADMSG);
	assert_int_equal(decode_body(BODY("\x84\xa1t\xa4" "data\xa2id\x01\xa2" "ch\xa1o\xa1" "d\xa2hi"), &pc),
			 -EBADMSG); /* str where bin is due */
	assert_int_equal(decode_body(BODY("\x83\xa1t\xa5" "event\xa2id\x01\xa1" "a\xc0"), &pc), -EBADMSG);
	assert_int_equal(decode_body(BODY("\x83\xa1t\xa3req\xa2id\x01\xa2op\xa0"), &pc), -EBADMSG);
	assert_int_equal(decode_body(BODY("\x83\xa1t\xa6" "credit\xa2id\x01\xa1n\xc3"), &pc), -EBADMSG);
	/* a non-bool eof (found by fuzzing: was read as a bool before the type check) */
	assert_int_equal(decode_body(BODY("\x85\xa1t\xa4" "data\xa2id\x01\xa2" "ch\xa1o\xa1" "d\xc4\x00\xa3" "eof\x05"), &pc),
			 -EBADMSG);
	/* missing required fields */
	assert_int_equal(decode_body(BODY("\x81\xa1t\xa6" "cancel"), &pc), -EBADMSG);
	assert_int_equal(decode_body(BODY("\x82\xa1t\xa6" "credit\xa2id\x01"), &pc), -EBADMSG);
	assert_int_equal(decode_body(BODY("\x82\xa1t\xa3" "err\xa2id\x01"), &pc), -EBADMSG);
	/* duplicate keys are ambiguous */
	assert_int_equal(decode_body(BODY("\x83\xa1t\xa6" "cancel\xa2id\x01\xa2id\x03"), &pc), -EBADMSG);
	/* unknown keys, non-str keys and known keys of other kinds are ignored */
	assert_int_equal(decode_body(BODY("\x85\xa1t\xa6" "cancel\xa2id\x01\xa3new\x92\x01\x02\x07\x08\xa1n\xc3"),
				     &pc), 1);
	/* a req may carry nil args; an err with a code we do not know decodes as 0 */
	assert_int_equal(decode_body(BODY("\x84\xa1t\xa3req\xa2id\x01\xa2op\xa4ping\xa1" "a\xc0"), &pc), 1);
	sbx_proto_frame f = { 0 };
	assert_int_equal(decode_body_keep(BODY("\x83\xa1t\xa3" "err\xa2id\x00\xa4" "code\xa3" "new"), &pc, &f), 1);
	assert_int_equal(f.code, 0);
	assert_int_equal(f.code_name_len, 3);
	sbx_proto_frame_release(&f);
}

static void test_truncated(void **state)
{
	sbx_proto_writer w;
	msgpack_sbuffer args;
	pack_map1(&args, "k", 1);
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_req(&w, 1, "exec", args.data, args.size, 0, NULL), 0);
	/* every prefix wants more bytes */
	for (size_t len = 0; len < w.buf.size; len++) {
		sbx_proto_frame f;
		size_t used = 99;
		assert_int_equal(sbx_proto_frame_decode((const uint8_t *)w.buf.data, len, 0, &f, &used,
							NULL, NULL), 0);
		assert_int_equal(used, 0);
	}
	/* a header that is too short for its map is a bad frame */
	for (size_t cut = 1; cut < w.buf.size - 4; cut++) {
		uint8_t *b = malloc(w.buf.size);
		memcpy(b, w.buf.data, w.buf.size);
		size_t body = w.buf.size - 4 - cut;
		b[3] = (uint8_t)body;
		sbx_proto_frame f;
		size_t used;
		sbx_proto_code pc;
		assert_int_equal(sbx_proto_frame_decode(b, 4 + body, 0, &f, &used, &pc, NULL), -EBADMSG);
		assert_int_equal(pc, SBX_PROTO_E_BAD_FRAME);
		free(b);
	}
	msgpack_sbuffer_destroy(&args);
	sbx_proto_writer_destroy(&w);
}

static void test_accessors(void **state)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	tm_init(&sb, &pk);
	msgpack_pack_map(&pk, 5);
	sbx_proto_pack_str(&pk, "s");
	sbx_proto_pack_strn(&pk, "a\0b", 3);
	sbx_proto_pack_str(&pk, "neg");
	msgpack_pack_int64(&pk, -5);
	sbx_proto_pack_str(&pk, "big");
	msgpack_pack_uint64(&pk, UINT64_MAX);
	sbx_proto_pack_str(&pk, "b");
	msgpack_pack_true(&pk);
	sbx_proto_pack_str(&pk, "bin");
	msgpack_pack_bin(&pk, 2);
	msgpack_pack_bin_body(&pk, "xy", 2);
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	assert_int_equal(msgpack_unpack_next(&u, sb.data, sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
	const msgpack_object *m = &u.data;
	const char *s;
	size_t len;
	int64_t i;
	uint64_t v;
	bool b;
	const uint8_t *p;
	assert_true(sbx_proto_get_str(m, "s", &s, &len));
	assert_int_equal(len, 3);
	assert_null(sbx_proto_strdup(sbx_proto_map_get(m, "s"))); /* embedded NUL */
	assert_true(sbx_proto_get_int(m, "neg", &i));
	assert_int_equal(i, -5);
	assert_false(sbx_proto_get_uint(m, "neg", &v));
	assert_false(sbx_proto_get_int(m, "big", &i));
	assert_true(sbx_proto_get_uint(m, "big", &v));
	assert_true(sbx_proto_get_bool(m, "b", &b));
	assert_true(b);
	assert_false(sbx_proto_get_bool(m, "neg", &b));
	assert_true(sbx_proto_get_bin(m, "bin", &p, &len));
	assert_int_equal(len, 2);
	assert_false(sbx_proto_get_str(m, "bin", &s, &len));
	assert_null(sbx_proto_map_get(m, "absent"));
	assert_null(sbx_proto_map_get(sbx_proto_map_get(m, "b"), "x"));
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
}

static void test_names(void **state)
{
	for (int k = SBX_PROTO_HELLO; k <= SBX_PROTO_ERR; k++) {
		const char *n = sbx_proto_kind_name(k);
		assert_int_equal(sbx_proto_kind_from_name(n, strlen(n)), k);
	}
	for (int c = SBX_PROTO_E_BAD_FRAME; c <= SBX_PROTO_E_CRASHED; c++) {
		const char *n = sbx_proto_code_name(c);
		assert_int_equal(sbx_proto_code_from_name(n, strlen(n)), c);
	}
	assert_string_equal(sbx_proto_code_name(SBX_PROTO_E_TOO_MANY_STREAMS), "too_many_streams");
	assert_string_equal(sbx_proto_code_name(SBX_PROTO_E_PERMISSION), "permission_denied");
	assert_int_equal(sbx_proto_code_from_name("nope", 4), 0);
	assert_int_equal(sbx_proto_code_from_errno(-ENOENT), SBX_PROTO_E_NOT_FOUND);
	assert_int_equal(sbx_proto_code_from_errno(-EACCES), SBX_PROTO_E_PERMISSION);
	assert_int_equal(sbx_proto_code_from_errno(-ENOSPC), SBX_PROTO_E_NO_SPACE);
	assert_int_equal(sbx_proto_code_from_errno(-EIO), SBX_PROTO_E_INTERNAL);
}

static void test_err(void **state)
{
	sbx_err e;
	sbx_err_clear(&e);
	assert_int_equal(sbx_err_set(&e, -ENOENT, "open %s", "x"), -ENOENT);
	assert_int_equal(sbx_err_wrap(&e, "load %d", 2), -ENOENT);
	assert_string_equal(e.msg, "load 2: open x");
	assert_int_equal(sbx_err_sys(&e, -ENOENT, "stat"), -ENOENT);
	assert_string_equal(e.msg, "stat: No such file or directory");
	assert_int_equal(sbx_err_set(&e, 5, "positive"), -EIO);
	assert_int_equal(sbx_err_set(NULL, -EINVAL, "no object"), -EINVAL);
	/* wrapping never overflows the message */
	char longer[SBX_ERR_MSG_MAX * 2];
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	for (int i = 0; i < 3; i++)
		sbx_err_wrap(&e, "%s", longer);
	assert_int_equal(strlen(e.msg), SBX_ERR_MSG_MAX - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hello),    cmocka_unit_test(test_req),
		cmocka_unit_test(test_data),     cmocka_unit_test(test_map_kinds),
		cmocka_unit_test(test_data_in_place),
		cmocka_unit_test(test_small_kinds), cmocka_unit_test(test_limits),
		cmocka_unit_test(test_fields),   cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_accessors), cmocka_unit_test(test_names),
		cmocka_unit_test(test_err),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
