/* op_watch_queue.c: where fs.watch's losses show among its events. The
 * kernel's overflow (or a watch limit) is an "overflow" event at its point
 * and what follows it is kept (an agent used to drop the events after the
 * kernel's marker in the same read); a full queue drops what comes until
 * it has drained and sent its own "overflow"; every loss is followed by
 * one; credit (-EAGAIN) stops a flush where it is. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "op_watch_queue.h"

#define OVF "overflow"

/* What a flush sent, as words ("e12", "overflow"), until budget sends. */
typedef struct sink {
	char sent[2 * AGENT_WATCH_QUEUE_MAX][16];
	size_t n;
	size_t budget;
} sink;

static int sink_send(void *ud, const char *p, size_t n)
{
	sink *s = ud;
	if (s->budget == 0)
		return -EAGAIN;
	s->budget--;
	assert_true(s->n < 2 * AGENT_WATCH_QUEUE_MAX);
	if (n == agent_watch_overflow_len && memcmp(p, agent_watch_overflow, n) == 0)
		snprintf(s->sent[s->n++], 16, OVF);
	else
		snprintf(s->sent[s->n++], 16, "%.*s", (int)n, p);
	return 0;
}

static bool push(agent_watch_queue *q, const char *word)
{
	msgpack_sbuffer b;
	msgpack_sbuffer_init(&b);
	assert_int_equal(msgpack_sbuffer_write(&b, word, strlen(word)), 0);
	bool kept = agent_watch_queue_push(q, &b);
	assert_null(b.data); /* taken either way */
	return kept;
}

static bool push_n(agent_watch_queue *q, unsigned i)
{
	char w[16];
	snprintf(w, sizeof(w), "e%u", i);
	return push(q, w);
}

static void expect_sent(const sink *s, const char *const *words, size_t n)
{
	assert_int_equal(s->n, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(s->sent[i], words[i]);
}

static void kernel_overflow_keeps_what_follows(void **state)
{
	(void)state;
	static agent_watch_queue q;
	static sink s;
	agent_watch_queue_init(&q);
	memset(&s, 0, sizeof(s));
	s.budget = SIZE_MAX;
	assert_true(push(&q, "before"));
	assert_true(agent_watch_queue_lost_here(&q));
	assert_true(agent_watch_queue_lost_here(&q)); /* a run of losses: one event */
	assert_true(push(&q, "after"));
	assert_true(push(&q, "more"));
	assert_true(agent_watch_queue_flush(&q, sink_send, &s));
	static const char *const want[] = { "before", OVF, "after", "more" };
	expect_sent(&s, want, 4);
	/* a loss at the very start (a watch limit at the start: after ready) */
	assert_true(agent_watch_queue_lost_here(&q));
	assert_true(push(&q, "next"));
	assert_true(agent_watch_queue_flush(&q, sink_send, &s));
	assert_string_equal(s.sent[4], OVF);
	assert_string_equal(s.sent[5], "next");
	agent_watch_queue_free(&q);
}

static void full_queue_drops_until_its_overflow_is_out(void **state)
{
	(void)state;
	static agent_watch_queue q;
	static sink s;
	agent_watch_queue_init(&q);
	memset(&s, 0, sizeof(s));
	for (unsigned i = 0; i < AGENT_WATCH_QUEUE_MAX; i++)
		assert_true(push_n(&q, i));
	assert_false(push(&q, "lost1"));
	assert_false(agent_watch_queue_lost_here(&q)); /* owed already */
	assert_false(push(&q, "lost2"));
	/* credit for 10: still dropping, no reading */
	s.budget = 10;
	assert_false(agent_watch_queue_flush(&q, sink_send, &s));
	assert_int_equal(s.n, 10);
	assert_false(push(&q, "lost3"));
	/* all of it: the events in order, then the one overflow, then reading */
	s.budget = SIZE_MAX;
	assert_true(agent_watch_queue_flush(&q, sink_send, &s));
	assert_int_equal(s.n, AGENT_WATCH_QUEUE_MAX + 1);
	for (unsigned i = 0; i < AGENT_WATCH_QUEUE_MAX; i++) {
		char w[16];
		snprintf(w, sizeof(w), "e%u", i);
		assert_string_equal(s.sent[i], w);
	}
	assert_string_equal(s.sent[AGENT_WATCH_QUEUE_MAX], OVF);
	assert_true(push(&q, "back"));
	assert_true(agent_watch_queue_flush(&q, sink_send, &s));
	assert_string_equal(s.sent[AGENT_WATCH_QUEUE_MAX + 1], "back");
	agent_watch_queue_free(&q);
}

static void overflow_owed_waits_for_credit(void **state)
{
	(void)state;
	static agent_watch_queue q;
	static sink s;
	agent_watch_queue_init(&q);
	memset(&s, 0, sizeof(s));
	for (unsigned i = 0; i <= AGENT_WATCH_QUEUE_MAX; i++)
		push_n(&q, i);
	/* exactly the events, no credit left for the overflow */
	s.budget = AGENT_WATCH_QUEUE_MAX;
	assert_false(agent_watch_queue_flush(&q, sink_send, &s));
	assert_int_equal(q.count, 0);
	assert_false(push(&q, "still-lost"));
	s.budget = 1;
	assert_true(agent_watch_queue_flush(&q, sink_send, &s));
	assert_string_equal(s.sent[s.n - 1], OVF);
}

static void reading_again_at_half(void **state)
{
	(void)state;
	static agent_watch_queue q;
	static sink s;
	agent_watch_queue_init(&q);
	memset(&s, 0, sizeof(s));
	for (unsigned i = 0; i < AGENT_WATCH_QUEUE_MAX / 2 + 1; i++)
		assert_true(push_n(&q, i));
	assert_false(agent_watch_queue_flush(&q, sink_send, &s)); /* no credit, over half */
	s.budget = 1;
	assert_true(agent_watch_queue_flush(&q, sink_send, &s)); /* half now */
	assert_int_equal(q.count, AGENT_WATCH_QUEUE_MAX / 2);
	agent_watch_queue_free(&q); /* what waits is freed (ASan: no leak) */
	assert_int_equal(q.count, 0);
}

/* The room a read is sized by: what push still keeps, none while a full
 * queue drains. */
static void room_is_what_push_keeps(void **state)
{
	(void)state;
	static agent_watch_queue q;
	static sink s;
	agent_watch_queue_init(&q);
	memset(&s, 0, sizeof(s));
	assert_int_equal(agent_watch_queue_room(&q), AGENT_WATCH_QUEUE_MAX);
	for (unsigned i = 0; i < AGENT_WATCH_QUEUE_MAX - 1; i++)
		assert_true(push_n(&q, i));
	assert_int_equal(agent_watch_queue_room(&q), 1);
	assert_true(push_n(&q, 0));
	assert_int_equal(agent_watch_queue_room(&q), 0);
	assert_false(push_n(&q, 0)); /* full: dropping */
	s.budget = 1;
	agent_watch_queue_flush(&q, sink_send, &s);
	assert_int_equal(agent_watch_queue_room(&q), 0); /* drains before taking more */
	agent_watch_queue_free(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kernel_overflow_keeps_what_follows),
		cmocka_unit_test(full_queue_drops_until_its_overflow_is_out),
		cmocka_unit_test(overflow_owed_waits_for_credit),
		cmocka_unit_test(reading_again_at_half),
		cmocka_unit_test(room_is_what_push_keeps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
