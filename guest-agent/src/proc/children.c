#include "children.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* Chained hash: a few hundred concurrent children at most, so a fixed
 * bucket count keeps lookups O(1) without resizing. */
#define CHILDREN_BUCKETS 256u

typedef struct child {
	struct child *next;
	pid_t pid;
	agent_children_exit_fn fn;
	void *ud;
} child;

static child *buckets[CHILDREN_BUCKETS];
static size_t nchildren;

static child **bucket_of(pid_t pid)
{
	return &buckets[(uint32_t)pid % CHILDREN_BUCKETS];
}

static child **find(pid_t pid)
{
	child **pp = bucket_of(pid);

	while (*pp && (*pp)->pid != pid)
		pp = &(*pp)->next;
	return pp;
}

int agent_children_add(pid_t pid, agent_children_exit_fn fn, void *ud, sbx_err *err)
{
	child **pp = find(pid);
	child *c;

	if (*pp)
		return sbx_err_set(err, -EEXIST, "child %d already registered", (int)pid);
	c = calloc(1, sizeof(*c));
	if (!c)
		return sbx_err_sys(err, -ENOMEM, "register child %d", (int)pid);
	c->pid = pid;
	c->fn = fn;
	c->ud = ud;
	c->next = *bucket_of(pid);
	*bucket_of(pid) = c;
	nchildren++;
	return 0;
}

static child *unlink_child(pid_t pid)
{
	child **pp = find(pid);
	child *c = *pp;

	if (c) {
		*pp = c->next;
		nchildren--;
	}
	return c;
}

void agent_children_forget(pid_t pid)
{
	free(unlink_child(pid));
}

bool agent_children_dispatch(pid_t pid, int status, const struct rusage *ru)
{
	child *c = unlink_child(pid);
	agent_children_exit_fn fn;
	void *ud;

	if (!c)
		return false;
	fn = c->fn;
	ud = c->ud;
	free(c);
	fn(pid, status, ru, ud);
	return true;
}

size_t agent_children_count(void)
{
	return nchildren;
}
