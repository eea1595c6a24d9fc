/* ring.c: records, offsets, eviction, lazy growth and cursors, checked
 * against a plain model of every byte ever appended (its channel included)
 * over many random appends and reads. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "ring.h"

static void basic_records_and_channels(void **state)
{
	agent_ring *r = NULL;
	agent_ring_cursor c = { 0 };
	sbx_err err = { 0 };
	char buf[64];
	int ch = -1;
	size_t n;

	assert_int_equal(agent_ring_new(AGENT_RING_MIN, &r, &err), 0);
	assert_int_equal(agent_ring_start(r), 0);
	assert_int_equal(agent_ring_end(r), 0);
	assert_int_equal(agent_ring_read(r, &c, 0, &ch, buf, sizeof(buf)), 0);
	assert_int_equal(agent_ring_append(r, 0, "hello ", 6), 0);
	assert_int_equal(agent_ring_append(r, 0, "world", 5), 0); /* merged with the first */
	assert_int_equal(agent_ring_append(r, 1, "oops", 4), 0);
	assert_int_equal(agent_ring_end(r), 15);

	n = agent_ring_read(r, &c, 0, &ch, buf, sizeof(buf));
	assert_int_equal(n, 11); /* one record: stdout only */
	assert_int_equal(ch, 0);
	assert_memory_equal(buf, "hello world", 11);
	n = agent_ring_read(r, &c, 11, &ch, buf, sizeof(buf));
	assert_int_equal(n, 4);
	assert_int_equal(ch, 1);
	assert_memory_equal(buf, "oops", 4);
	assert_int_equal(agent_ring_read(r, &c, 15, &ch, buf, sizeof(buf)), 0);
	/* From the middle of a record, and bounded by max. */
	n = agent_ring_read(r, &c, 3, &ch, buf, 4);
	assert_int_equal(n, 4);
	assert_memory_equal(buf, "lo w", 4);
	agent_ring_free(r);
}

static void bad_sizes_are_refused(void **state)
{
	agent_ring *r = NULL;
	sbx_err err = { 0 };

	assert_int_equal(agent_ring_new(AGENT_RING_MIN - 1, &r, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "output buffer must be"));
	assert_int_equal(agent_ring_new((size_t)AGENT_RING_MAX + 1, &r, &err), -EINVAL);
}

static void eviction_moves_start(void **state)
{
	agent_ring *r = NULL;
	agent_ring_cursor c = { 0 };
	sbx_err err = { 0 };
	char chunk[1000], buf[1000];
	int ch;

	assert_int_equal(agent_ring_new(AGENT_RING_MIN, &r, &err), 0);
	assert_int_equal(agent_ring_max_append(r), AGENT_RING_MIN / 4);
	for (int i = 0; i < 20; i++) {
		memset(chunk, 'a' + i, sizeof(chunk));
		/* alternate channels: one record each */
		assert_int_equal(agent_ring_append(r, i % 2, chunk, sizeof(chunk)), 0);
	}
	assert_int_equal(agent_ring_end(r), 20000);
	/* 4096 bytes hold four records of 4 + 1000 bytes. */
	assert_int_equal(agent_ring_start(r), 16000);
	/* What was evicted cannot be read; what is kept is exact. */
	assert_int_equal(agent_ring_read(r, &c, 15999, &ch, buf, sizeof(buf)), 0);
	assert_int_equal(agent_ring_read(r, &c, 16000, &ch, buf, sizeof(buf)), 1000);
	assert_int_equal(ch, 0);
	assert_int_equal(buf[0], 'a' + 16);
	assert_int_equal(agent_ring_read(r, &c, 19500, &ch, buf, sizeof(buf)), 500);
	assert_int_equal(ch, 1);
	assert_int_equal(buf[0], 'a' + 19);
	agent_ring_free(r);
}

/* The model: every byte ever appended and its channel. */
typedef struct model {
	uint8_t *bytes, *chans;
	size_t len;
} model;

static uint32_t rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static void check_against(const agent_ring *r, const model *m, uint32_t *seed)
{
	uint64_t start = agent_ring_start(r), end = agent_ring_end(r), off;
	agent_ring_cursor c = { 0 };
	uint8_t buf[4096];

	assert_int_equal(end, m->len);
	assert_true(start <= end);
	/* Never more than fits, never much less than it could keep (records
	 * are at most max_append long, so one eviction drops little). */
	assert_true(end - start <= agent_ring_cap(r));
	if (end > agent_ring_cap(r))
		assert_true(end - start >= agent_ring_cap(r) / 4);
	/* Sequential with one cursor: the exact bytes, channel by channel. */
	for (off = start; off < end;) {
		int ch = -1;
		size_t n = agent_ring_read(r, &c, off, &ch, buf, 1 + rnd(seed) % sizeof(buf));

		assert_true(n > 0);
		assert_memory_equal(buf, m->bytes + off, n);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(ch, m->chans[off + i]);
		off += n;
	}
	/* Random offsets with a fresh cursor each. */
	for (int i = 0; i < 8 && end > start; i++) {
		agent_ring_cursor fresh = { 0 };
		int ch = -1;
		size_t n;

		off = start + rnd(seed) % (end - start);
		n = agent_ring_read(r, &fresh, off, &ch, buf, sizeof(buf));
		assert_true(n > 0);
		assert_memory_equal(buf, m->bytes + off, n);
		assert_int_equal(ch, m->chans[off]);
	}
}

static void random_appends_match_the_model(void **state)
{
	const size_t caps[] = { AGENT_RING_MIN, 5000, 65536, 100003 };
	uint32_t seed = 0x5eed1234u;

	for (size_t k = 0; k < sizeof(caps) / sizeof(caps[0]); k++) {
		agent_ring *r = NULL;
		sbx_err err = { 0 };
		model m = { 0 };
		size_t total = caps[k] * 6;

		m.bytes = malloc(total + 65536);
		m.chans = malloc(total + 65536);
		assert_non_null(m.bytes);
		assert_non_null(m.chans);
		assert_int_equal(agent_ring_new(caps[k], &r, &err), 0);
		while (m.len < total) {
			size_t n = 1 + rnd(&seed) % agent_ring_max_append(r);
			int ch = rnd(&seed) % 3 == 0; /* runs of stdout, some stderr */

			for (size_t i = 0; i < n; i++) {
				m.bytes[m.len + i] = (uint8_t)rnd(&seed);
				m.chans[m.len + i] = (uint8_t)ch;
			}
			assert_int_equal(agent_ring_append(r, ch, m.bytes + m.len, n), 0);
			m.len += n;
			if (rnd(&seed) % 16 == 0)
				check_against(r, &m, &seed);
		}
		check_against(r, &m, &seed);
		agent_ring_free(r);
		free(m.bytes);
		free(m.chans);
	}
}

static void merged_records_stay_small(void **state)
{
	agent_ring *r = NULL;
	sbx_err err = { 0 };
	char chunk[100];

	/* Output of one channel in many small pieces, then one of the other:
	 * the eviction of one merged record must not drop the whole buffer. */
	assert_int_equal(agent_ring_new(AGENT_RING_MIN, &r, &err), 0);
	memset(chunk, 'o', sizeof(chunk));
	for (int i = 0; i < 40; i++)
		assert_int_equal(agent_ring_append(r, 0, chunk, sizeof(chunk)), 0);
	assert_int_equal(agent_ring_append(r, 1, chunk, sizeof(chunk)), 0);
	assert_true(agent_ring_end(r) - agent_ring_start(r) >= AGENT_RING_MIN / 2);
	agent_ring_free(r);
}

static void cursor_survives_eviction(void **state)
{
	agent_ring *r = NULL;
	agent_ring_cursor c = { 0 };
	sbx_err err = { 0 };
	char chunk[1000], buf[1000];
	int ch;

	/* A reader's cursor points at a record that is then evicted: the
	 * next read must not trust it. */
	assert_int_equal(agent_ring_new(AGENT_RING_MIN, &r, &err), 0);
	memset(chunk, 'x', sizeof(chunk));
	assert_int_equal(agent_ring_append(r, 0, chunk, sizeof(chunk)), 0);
	assert_int_equal(agent_ring_read(r, &c, 10, &ch, buf, 10), 10);
	for (int i = 0; i < 10; i++) {
		memset(chunk, '0' + i, sizeof(chunk));
		assert_int_equal(agent_ring_append(r, 1, chunk, sizeof(chunk)), 0);
		assert_int_equal(agent_ring_append(r, 0, chunk, 1), 0);
	}
	assert_true(agent_ring_start(r) > 1000);
	assert_int_equal(agent_ring_read(r, &c, agent_ring_start(r), &ch, buf, sizeof(buf)) > 0, 1);
	agent_ring_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(basic_records_and_channels),
		cmocka_unit_test(bad_sizes_are_refused),
		cmocka_unit_test(eviction_moves_start),
		cmocka_unit_test(random_appends_match_the_model),
		cmocka_unit_test(merged_records_stay_small),
		cmocka_unit_test(cursor_survives_eviction),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
