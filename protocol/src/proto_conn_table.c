/* Stream table of a connection: a chained hash keyed by id that grows with
 * the number of open streams, and the list of streams waiting for room. */
#include <errno.h>
#include <stdlib.h>

#include "proto_conn_int.h"

#define INITIAL_BUCKETS 64u

static size_t bucket_of(const struct conn_table *t, uint64_t id)
{
	/* ids are sequential; a multiplicative hash spreads them */
	return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & (t->nbuckets - 1);
}

int conn_table_init(struct conn_table **out)
{
	struct conn_table *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->buckets = calloc(INITIAL_BUCKETS, sizeof(*t->buckets)); // NOLINT(bugprone-sizeof-expression): an array of pointers
	if (!t->buckets) {
		free(t);
		return -ENOMEM;
	}
	t->nbuckets = INITIAL_BUCKETS;
	*out = t;
	return 0;
}

static void free_chains(struct conn_table *t)
{
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct conn_stream *s = t->buckets[i];
		while (s) {
			struct conn_stream *next = s->hnext;
			free(s);
			s = next;
		}
		t->buckets[i] = NULL;
	}
	t->count = 0;
	t->blocked = NULL;
	t->nblocked = 0;
}

void conn_table_destroy(struct conn_table *t)
{
	if (!t)
		return;
	free_chains(t);
	free(t->buckets);
	free(t);
}

struct conn_stream *conn_find(const sbx_proto_conn *c, uint64_t id)
{
	const struct conn_table *t = c->t;
	for (struct conn_stream *s = t->buckets[bucket_of(t, id)]; s; s = s->hnext)
		if (s->id == id)
			return s;
	return NULL;
}

static void grow(struct conn_table *t)
{
	size_t nb = t->nbuckets * 2;
	struct conn_stream **b = calloc(nb, sizeof(*b)); // NOLINT(bugprone-sizeof-expression): an array of pointers
	if (!b)
		return; /* longer chains, still correct */
	struct conn_stream **old = t->buckets;
	size_t old_nb = t->nbuckets;
	t->buckets = b;
	t->nbuckets = nb;
	for (size_t i = 0; i < old_nb; i++) {
		struct conn_stream *s = old[i];
		while (s) {
			struct conn_stream *next = s->hnext;
			size_t k = bucket_of(t, s->id);
			s->hnext = b[k];
			b[k] = s;
			s = next;
		}
	}
	free(old);
}

struct conn_stream *conn_open_stream(sbx_proto_conn *c, uint64_t id, bool local)
{
	struct conn_table *t = c->t;
	struct conn_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->id = id;
	s->local = local;
	s->send_credit = c->ready ? c->peer_window : 0;
	s->recv_credit = c->window;
	if (t->count >= t->nbuckets)
		grow(t);
	size_t k = bucket_of(t, id);
	s->hnext = t->buckets[k];
	t->buckets[k] = s;
	t->count++;
	if (local)
		c->n_local++;
	else
		c->n_remote++;
	return s;
}

void conn_close_stream(sbx_proto_conn *c, struct conn_stream *s)
{
	struct conn_table *t = c->t;
	conn_unblock(c, s);
	for (struct conn_stream **pp = &t->buckets[bucket_of(t, s->id)]; *pp; pp = &(*pp)->hnext) {
		if (*pp == s) {
			*pp = s->hnext;
			break;
		}
	}
	t->count--;
	if (s->local)
		c->n_local--;
	else
		c->n_remote--;
	free(s);
}

void conn_close_all_streams(sbx_proto_conn *c)
{
	free_chains(c->t);
	c->n_local = c->n_remote = 0;
}

void conn_foreach(const sbx_proto_conn *c, void (*fn)(struct conn_stream *s, void *arg), void *arg)
{
	const struct conn_table *t = c->t;
	for (size_t i = 0; i < t->nbuckets; i++)
		for (struct conn_stream *s = t->buckets[i]; s; s = s->hnext)
			fn(s, arg);
}

void conn_block(const sbx_proto_conn *c, struct conn_stream *s)
{
	struct conn_table *t = c->t;
	if (s->blocked)
		return;
	s->blocked = true;
	s->bprev = NULL;
	s->bnext = t->blocked;
	if (t->blocked)
		t->blocked->bprev = s;
	t->blocked = s;
	t->nblocked++;
}

void conn_unblock(const sbx_proto_conn *c, struct conn_stream *s)
{
	struct conn_table *t = c->t;
	if (!s->blocked)
		return;
	if (s->bprev)
		s->bprev->bnext = s->bnext;
	else
		t->blocked = s->bnext;
	if (s->bnext)
		s->bnext->bprev = s->bprev;
	s->blocked = false;
	s->bprev = s->bnext = NULL;
	t->nblocked--;
}

void conn_notify_blocked(sbx_proto_conn *c)
{
	struct conn_table *t = c->t;
	if (!t->nblocked || !c->cbs.on_writable)
		return;
	/* Collect ids first: a callback may close streams or free the conn. */
	size_t n = t->nblocked;
	uint64_t *ids = malloc(n * sizeof(*ids));
	if (!ids)
		return;
	for (size_t i = 0; i < n; i++) {
		struct conn_stream *s = t->blocked;
		ids[i] = s->id;
		conn_unblock(c, s);
	}
	for (size_t i = 0; i < n && !c->freed && !c->closed; i++)
		if (conn_find(c, ids[i]))
			c->cbs.on_writable(c, ids[i], c->ud);
	free(ids);
}
