/* Sessions (session.h) and their replay buffers (replay.h): ids, lookups,
 * the bound, idle expiry with holds, counters; replay after an id on its
 * own stream only, the bounds, refusing a resumption with a hole. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mcp_host/session.h"

static const mcp_session_opts opts = {
	.max_sessions = 3, .idle_ms = 1000, .replay_bytes = 100, .replay_events = 4,
};

static void ids_and_lookup(void **state)
{
	mcp_session_table *t;
	mcp_session *a, *b;
	char wrong[MCP_SESSION_ID_LEN + 1];

	assert_int_equal(mcp_session_table_new(&opts, &t, NULL), 0);
	assert_int_equal(mcp_session_open(t, "files", 0, &a, NULL), 0);
	assert_int_equal(mcp_session_open(t, "files", 0, &b, NULL), 0);
	assert_int_equal(strlen(mcp_session_id(a)), MCP_SESSION_ID_LEN);
	assert_string_not_equal(mcp_session_id(a), mcp_session_id(b));
	for (const char *p = mcp_session_id(a); *p; p++)
		assert_non_null(strchr("0123456789abcdef", *p));
	assert_ptr_equal(mcp_session_find(t, mcp_session_id(a), MCP_SESSION_ID_LEN), a);
	assert_ptr_equal(mcp_session_find(t, mcp_session_id(b), MCP_SESSION_ID_LEN), b);
	/* One digit off, a prefix, empty: nothing. */
	memcpy(wrong, mcp_session_id(a), sizeof(wrong));
	wrong[MCP_SESSION_ID_LEN - 1] = wrong[MCP_SESSION_ID_LEN - 1] == '0' ? '1' : '0';
	assert_null(mcp_session_find(t, wrong, MCP_SESSION_ID_LEN));
	assert_null(mcp_session_find(t, mcp_session_id(a), MCP_SESSION_ID_LEN - 1));
	assert_null(mcp_session_find(t, "", 0));
	assert_string_equal(mcp_session_server(a), "files");
	assert_string_equal(mcp_session_version(a), "");
	assert_int_equal(mcp_session_set_version(a, "2025-11-25"), 0);
	assert_string_equal(mcp_session_version(a), "2025-11-25");
	assert_int_equal(mcp_session_set_version(a, "a-version-string-far-too-long-to-be-real"), -EINVAL);
	mcp_session_close(t, a);
	assert_null(mcp_session_find(t, mcp_session_id(b), 5));
	assert_ptr_equal(mcp_session_find(t, mcp_session_id(b), MCP_SESSION_ID_LEN), b);
	mcp_session_table_free(t, NULL, NULL);
}

static int dropped;

static void count_drop(mcp_session *s, void *ud)
{
	dropped++;
	assert_ptr_equal(mcp_session_data(s), ud);
}

static void bound_and_stats(void **state)
{
	mcp_session_table *t;
	mcp_session *s[4];
	mcp_session_stats st;
	sbx_err err = { 0 };
	int tag;

	assert_int_equal(mcp_session_table_new(&opts, &t, NULL), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(mcp_session_open(t, "x", 0, &s[i], NULL), 0);
		mcp_session_set_data(s[i], &tag);
	}
	assert_int_equal(mcp_session_open(t, "x", 0, &s[3], &err), -EBUSY);
	assert_non_null(strstr(err.msg, "at most 3"));
	mcp_session_close(t, s[0]);
	mcp_session_stats_get(t, &st);
	assert_int_equal(st.open, 2);
	assert_int_equal(st.opened, 3);
	assert_int_equal(st.closed, 1);
	assert_int_equal(st.refused, 1);
	dropped = 0;
	mcp_session_table_free(t, count_drop, &tag);
	assert_int_equal(dropped, 2);
}

static int expired;

static void on_expire(mcp_session *s, void *ud)
{
	expired++;
}

static void idle_expiry_and_holds(void **state)
{
	mcp_session_table *t;
	mcp_session *a, *b, *c;
	mcp_session_stats st;

	assert_int_equal(mcp_session_table_new(&opts, &t, NULL), 0);
	assert_int_equal(mcp_session_open(t, "x", 100, &a, NULL), 0);
	assert_int_equal(mcp_session_open(t, "x", 100, &b, NULL), 0);
	assert_int_equal(mcp_session_open(t, "x", 100, &c, NULL), 0);
	mcp_session_count(b, true, 10, 600);   /* b used at 600 */
	mcp_session_hold(c, 200);              /* c busy */
	assert_int_equal(mcp_session_next_expiry(t), 1100);
	expired = 0;
	assert_int_equal(mcp_session_expire(t, 1099, on_expire, NULL), 0);
	assert_int_equal(mcp_session_expire(t, 1100, on_expire, NULL), 1); /* a */
	assert_int_equal(expired, 1);
	assert_int_equal(mcp_session_next_expiry(t), 1600);
	assert_int_equal(mcp_session_expire(t, 5000, on_expire, NULL), 1); /* b; c is held */
	assert_int_equal(mcp_session_next_expiry(t), 0);
	mcp_session_release(c, 5000);
	assert_int_equal(mcp_session_next_expiry(t), 6000);
	assert_int_equal(mcp_session_expire(t, 6000, on_expire, NULL), 1);
	mcp_session_stats_get(t, &st);
	assert_int_equal(st.expired, 3);
	assert_int_equal(st.open, 0);
	mcp_session_table_free(t, NULL, NULL);
}

/* A frozen owner's sessions are touched each tick: none expires while it
 * stands, and idle time counts again from the last touch. */
static void touch_all_restarts_idle(void **state)
{
	mcp_session_table *t;
	mcp_session *a, *b;

	assert_int_equal(mcp_session_table_new(&opts, &t, NULL), 0);
	assert_int_equal(mcp_session_open(t, "x", 100, &a, NULL), 0);
	assert_int_equal(mcp_session_open(t, "x", 300, &b, NULL), 0);
	mcp_session_touch_all(t, 5000);
	assert_int_equal(mcp_session_next_expiry(t), 6000);
	expired = 0;
	assert_int_equal(mcp_session_expire(t, 5999, on_expire, NULL), 0);
	assert_int_equal(mcp_session_expire(t, 6000, on_expire, NULL), 2);
	assert_int_equal(expired, 2);
	mcp_session_table_free(t, NULL, NULL);
}

static void counters(void **state)
{
	mcp_session_table *t;
	mcp_session *a;
	const mcp_session_counters *c;

	assert_int_equal(mcp_session_table_new(&opts, &t, NULL), 0);
	assert_int_equal(mcp_session_open(t, "x", 7, &a, NULL), 0);
	mcp_session_count(a, true, 10, 8);
	mcp_session_count(a, false, 25, 9);
	mcp_session_count(a, false, 5, 10);
	c = mcp_session_counters_get(a);
	assert_int_equal(c->msgs_in, 1);
	assert_int_equal(c->msgs_out, 2);
	assert_int_equal(c->bytes_in, 10);
	assert_int_equal(c->bytes_out, 30);
	assert_int_equal(c->created_ms, 7);
	assert_int_equal(c->active_ms, 10);
	assert_int_equal(mcp_session_new_stream(a), 1);
	assert_int_equal(mcp_session_new_stream(a), 2);
	mcp_session_table_free(t, NULL, NULL);
}

static void pending_requests(void **state)
{
	mcp_session_table *t;
	mcp_session *a;
	uint32_t stream = 0;
	char key[MCP_SESSION_KEY_MAX + 1];

	assert_int_equal(mcp_session_table_new(&opts, &t, NULL), 0);
	assert_int_equal(mcp_session_open(t, "x", 0, &a, NULL), 0);
	assert_int_equal(mcp_session_pending_add(a, "n:1", 1), 0);
	assert_int_equal(mcp_session_pending_add(a, "s:1", 2), 0);
	assert_int_equal(mcp_session_pending_add(a, "n:1", 3), -EEXIST);
	assert_int_equal(mcp_session_pending(a), 2);
	assert_int_equal(mcp_session_pending_take(a, "s:1", &stream), 0);
	assert_int_equal(stream, 2);
	assert_int_equal(mcp_session_pending_take(a, "s:1", &stream), -ENOENT);
	assert_int_equal(mcp_session_pending_take(a, "n:1", &stream), 0);
	assert_int_equal(stream, 1);
	assert_int_equal(mcp_session_pending(a), 0);
	/* The id may come again once answered. */
	assert_int_equal(mcp_session_pending_add(a, "n:1", 4), 0);
	assert_int_equal(mcp_session_pending_take(a, "n:1", &stream), 0);
	assert_int_equal(stream, 4);
	/* Bounded in number and in key length. */
	for (unsigned i = 0; i < MCP_SESSION_MAX_PENDING; i++) {
		snprintf(key, sizeof(key), "n:%u", i);
		assert_int_equal(mcp_session_pending_add(a, key, i), 0);
	}
	assert_int_equal(mcp_session_pending_add(a, "n:-1", 0), -ENOSPC);
	assert_int_equal(mcp_session_pending_take(a, "n:77", &stream), 0);
	assert_int_equal(stream, 77);
	assert_int_equal(mcp_session_pending_take(a, "n:255", &stream), 0);
	assert_int_equal(stream, 255);
	assert_int_equal(mcp_session_pending(a), MCP_SESSION_MAX_PENDING - 2);
	memset(key, 'k', MCP_SESSION_KEY_MAX);
	key[MCP_SESSION_KEY_MAX] = '\0';
	assert_int_equal(mcp_session_pending_add(a, key, 0), -ENAMETOOLONG);
	mcp_session_table_free(t, NULL, NULL);
}

typedef struct seen {
	char ids[256];
	char data[256];
} seen;

static int on_event(const char *id, const char *data, size_t len, void *ud)
{
	seen *s = ud;

	strcat(s->ids, id);
	strcat(s->ids, " ");
	strncat(s->data, data, len);
	return 0;
}

static void replay_per_stream(void **state)
{
	mcp_replay *r;
	char id[MCP_REPLAY_ID_MAX];
	uint32_t stream = 99;
	seen s = { "", "" };
	sbx_err err = { 0 };

	assert_int_equal(mcp_replay_new(100, 4, &r, NULL), 0);
	assert_int_equal(mcp_replay_push(r, 1, "a", 1, id, NULL), 0);
	assert_string_equal(id, "1-1");
	assert_int_equal(mcp_replay_push(r, 0, "b", 1, id, NULL), 0);
	assert_string_equal(id, "0-2");
	assert_int_equal(mcp_replay_push(r, 1, "c", 1, id, NULL), 0);
	assert_int_equal(mcp_replay_push(r, 1, "d", 1, id, NULL), 0);
	assert_string_equal(id, "1-4");
	/* After 1-1: the rest of stream 1, not stream 0's b. */
	assert_int_equal(mcp_replay_after(r, "1-1", &stream, on_event, &s, NULL), 0);
	assert_int_equal(stream, 1);
	assert_string_equal(s.ids, "1-3 1-4 ");
	assert_string_equal(s.data, "cd");
	/* After the newest: nothing. */
	memset(&s, 0, sizeof(s));
	assert_int_equal(mcp_replay_after(r, "1-4", &stream, on_event, &s, NULL), 0);
	assert_string_equal(s.ids, "");
	/* Not ours, from the future. */
	static const char *const bad[] = { "", "1", "1-", "-1", "a-1", "1-0", "01-2", "1-2x", "1 -2",
					   "4294967296-1", "1-99999999999999999999999" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (mcp_replay_after(r, bad[i], &stream, on_event, &s, &err) != -EINVAL)
			fail_msg("\"%s\" taken as an id", bad[i]);
	assert_int_equal(mcp_replay_after(r, "1-5", &stream, on_event, &s, &err), -ENOENT);
	/* A fifth event drops the first: resuming after 1-1 still works (1-1
	 * itself was sent), but not from before it. */
	assert_int_equal(mcp_replay_push(r, 1, "e", 1, id, NULL), 0);
	assert_int_equal(mcp_replay_events(r), 4);
	memset(&s, 0, sizeof(s));
	assert_int_equal(mcp_replay_after(r, "1-1", &stream, on_event, &s, NULL), 0);
	assert_string_equal(s.data, "cde");
	assert_int_equal(mcp_replay_push(r, 1, "f", 1, id, NULL), 0); /* drops 0-2 */
	assert_int_equal(mcp_replay_after(r, "1-1", &stream, on_event, &s, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "no longer kept"));
	mcp_replay_free(r);
}

/* The GET stream's backlog: what stream 0 got since a sequence number,
 * whatever the other streams got meanwhile. */
static void replay_since(void **state)
{
	mcp_replay *r;
	char id[MCP_REPLAY_ID_MAX];
	seen s = { "", "" };

	assert_int_equal(mcp_replay_new(100, 8, &r, NULL), 0);
	assert_int_equal(mcp_replay_push(r, 0, "a", 1, id, NULL), 0);
	assert_int_equal(mcp_replay_id_seq(id), 1);
	assert_int_equal(mcp_replay_push(r, 2, "b", 1, id, NULL), 0);
	assert_int_equal(mcp_replay_push(r, 0, "c", 1, id, NULL), 0);
	assert_int_equal(mcp_replay_id_seq(id), 3);
	assert_int_equal(mcp_replay_since(r, 0, 0, on_event, &s), 0);
	assert_string_equal(s.ids, "0-1 0-3 ");
	memset(&s, 0, sizeof(s));
	assert_int_equal(mcp_replay_since(r, 0, 1, on_event, &s), 0);
	assert_string_equal(s.data, "c");
	assert_int_equal(mcp_replay_id_seq("nonsense"), 0);
	assert_int_equal(mcp_replay_id_seq("0-0"), 0);
	mcp_replay_free(r);
}

/* A client's request in flight holds its session as a stream does: the
 * server is working for it. */
static void pending_holds(void **state)
{
	mcp_session_table *t;
	mcp_session *a;
	uint32_t st;

	assert_int_equal(mcp_session_table_new(&opts, &t, NULL), 0);
	assert_int_equal(mcp_session_open(t, "x", 100, &a, NULL), 0);
	assert_int_equal(mcp_session_pending_add(a, "n:1", 1), 0);
	assert_int_equal(mcp_session_next_expiry(t), 0);
	assert_int_equal(mcp_session_expire(t, 100000, NULL, NULL), 0);
	assert_int_equal(mcp_session_pending_take(a, "n:1", &st), 0);
	assert_int_equal(mcp_session_expire(t, 100000, NULL, NULL), 1);
	mcp_session_table_free(t, NULL, NULL);
}

static void replay_byte_bound(void **state)
{
	mcp_replay *r;
	char id[MCP_REPLAY_ID_MAX], big[150];
	uint32_t stream;
	seen s = { "", "" };

	memset(big, 'x', sizeof(big));
	assert_int_equal(mcp_replay_new(100, 50, &r, NULL), 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(mcp_replay_push(r, 0, big, 30, id, NULL), 0);
	assert_true(mcp_replay_bytes(r) <= 100);
	assert_int_equal(mcp_replay_events(r), 3);
	assert_int_equal(mcp_replay_after(r, "0-7", &stream, on_event, &s, NULL), 0);
	assert_string_equal(s.ids, "0-8 0-9 0-10 ");
	/* Bigger than the whole buffer: not kept, and nothing before it can
	 * be resumed past it. */
	assert_int_equal(mcp_replay_push(r, 0, big, sizeof(big), id, NULL), 0);
	assert_string_equal(id, "0-11");
	assert_int_equal(mcp_replay_events(r), 0);
	assert_int_equal(mcp_replay_after(r, "0-10", &stream, on_event, &s, NULL), -ENOENT);
	assert_int_equal(mcp_replay_after(r, "0-11", &stream, on_event, &s, NULL), 0);
	mcp_replay_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ids_and_lookup),
		cmocka_unit_test(bound_and_stats),
		cmocka_unit_test(idle_expiry_and_holds),
		cmocka_unit_test(touch_all_restarts_idle),
		cmocka_unit_test(counters),
		cmocka_unit_test(pending_requests),
		cmocka_unit_test(replay_per_stream),
		cmocka_unit_test(replay_byte_bound),
		cmocka_unit_test(replay_since),
		cmocka_unit_test(pending_holds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
