/* sup_http_share: the requests in flight of each caller (the auth hook's
 * `who`, a pointer the edge never looks into), bounded by
 * sup_http_cfg.max_per_who, so that one tenant's streams, WebSockets and
 * slow requests cannot take every connection the node holds while another
 * tenant waits. A connection serves one request at a time, so a caller's
 * requests in flight are the connections it keeps busy; an idle one goes
 * at the idle timeout. Loop thread only. */
#include <errno.h>
#include <stdlib.h>

#include "sup_http_int.h"

struct sup_http_share_ent {
	const void *who;
	unsigned n;
};

static struct sup_http_share_ent *find(sup_http *h, const void *who)
{
	for (size_t i = 0; i < h->nshares; i++)
		if (h->shares[i].who == who)
			return &h->shares[i];
	return NULL;
}

int sup_http_share_take(sup_http *h, const void *who)
{
	struct sup_http_share_ent *e = find(h, who);
	if (e && e->n >= h->cfg.max_per_who)
		return -EDQUOT;
	if (!e) {
		/* one entry per caller with a request in flight: at most one a
		 * connection, so bounded by max_conns */
		if (h->nshares == h->shares_cap) {
			size_t cap = h->shares_cap ? h->shares_cap * 2 : 8;
			struct sup_http_share_ent *v = realloc(h->shares, cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			h->shares = v;
			h->shares_cap = cap;
		}
		e = &h->shares[h->nshares++];
		e->who = who;
		e->n = 0;
	}
	e->n++;
	return 0;
}

void sup_http_share_give(sup_http *h, const void *who)
{
	struct sup_http_share_ent *e = find(h, who);
	if (!e)
		return;
	if (--e->n == 0)
		*e = h->shares[--h->nshares];
}

unsigned sup_http_share_held(const sup_http *h, const void *who)
{
	for (size_t i = 0; i < h->nshares; i++)
		if (h->shares[i].who == who)
			return h->shares[i].n;
	return 0;
}
