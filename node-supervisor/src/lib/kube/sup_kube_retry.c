/* sup_kube_retry: backoff with jitter and the bounded write queue
 * (sup_kube_retry.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sup_kube_retry.h"

unsigned sup_kube_backoff_next(sup_kube_backoff *b, uint32_t rnd)
{
	uint64_t ceil = b->base_ms ? b->base_ms : 1;
	for (unsigned i = 0; i < b->attempt && ceil < b->cap_ms; i++)
		ceil *= 2;
	if (ceil > b->cap_ms)
		ceil = b->cap_ms;
	if (b->attempt < 64)
		b->attempt++;
	uint64_t half = ceil / 2;
	return (unsigned)(ceil - half + (half ? rnd % (half + 1) : 0));
}

void sup_kube_backoff_reset(sup_kube_backoff *b)
{
	b->attempt = 0;
}

int sup_kube_queue_init(sup_kube_queue *q, size_t cap)
{
	memset(q, 0, sizeof(*q));
	q->cap = cap ? cap : 1;
	q->v = calloc(q->cap, sizeof(sup_kube_write *));
	return q->v ? 0 : -ENOMEM;
}

void sup_kube_queue_release(sup_kube_queue *q)
{
	for (size_t i = 0; i < q->n; i++) {
		free(q->v[i]->body);
		free(q->v[i]);
	}
	free(q->v);
	memset(q, 0, sizeof(*q));
}

static void set_fields(sup_kube_write *w, const char *method, const char *path, char *body,
		       uint64_t gen)
{
	strncpy(w->method, method, sizeof(w->method) - 1);
	w->method[sizeof(w->method) - 1] = '\0';
	strncpy(w->path, path, sizeof(w->path) - 1);
	w->path[sizeof(w->path) - 1] = '\0';
	free(w->body);
	w->body = body;
	w->gen = gen;
}

sup_kube_push sup_kube_queue_push(sup_kube_queue *q, const char *key, const char *method,
				  const char *path, char *body, char *dropped_key)
{
	for (size_t i = 0; i < q->n; i++) {
		if (strcmp(q->v[i]->key, key) == 0) {
			set_fields(q->v[i], method, path, body, ++q->next_gen);
			q->replaced++;
			return SUP_KUBE_PUSH_REPLACED;
		}
	}
	sup_kube_write *w = calloc(1, sizeof(*w));
	if (!w) {
		free(body);
		return SUP_KUBE_PUSH_NOMEM;
	}
	strncpy(w->key, key, sizeof(w->key) - 1);
	set_fields(w, method, path, body, ++q->next_gen);
	sup_kube_push rc = SUP_KUBE_PUSH_ADDED;
	if (q->n == q->cap) {
		sup_kube_write *old = q->v[0];
		if (dropped_key)
			memcpy(dropped_key, old->key, sizeof(old->key));
		free(old->body);
		free(old);
		memmove(q->v, q->v + 1, (q->n - 1) * sizeof(sup_kube_write *));
		q->n--;
		q->dropped++;
		rc = SUP_KUBE_PUSH_DROPPED;
	}
	q->v[q->n++] = w;
	return rc;
}

int sup_kube_queue_peek(const sup_kube_queue *q, sup_kube_write *out)
{
	if (!q->n)
		return -ENOENT;
	*out = *q->v[0];
	out->body = strdup(q->v[0]->body ? q->v[0]->body : "");
	return out->body ? 0 : -ENOMEM;
}

void sup_kube_queue_done(sup_kube_queue *q, const char *key, uint64_t gen)
{
	for (size_t i = 0; i < q->n; i++) {
		if (strcmp(q->v[i]->key, key) != 0)
			continue;
		if (q->v[i]->gen != gen)
			return;
		free(q->v[i]->body);
		free(q->v[i]);
		memmove(q->v + i, q->v + i + 1, (q->n - i - 1) * sizeof(sup_kube_write *));
		q->n--;
		return;
	}
}
