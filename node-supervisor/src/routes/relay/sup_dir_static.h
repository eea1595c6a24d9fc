/* The static node directory: --peer NAME=URL, each peer's capacity polled
 * at its relay door. A sup_directory_ops (sup_directory.h) for a cluster
 * without Kubernetes; it must not block the loop. */
#ifndef SUP_DIR_STATIC_H
#define SUP_DIR_STATIC_H

#include <stddef.h>

#include "sbx/err.h"
#include "sup_directory.h"

struct event_base;
struct sup_tls;

/* Each peer's capacity is asked every SUP_DIR_POLL_MS at its relay door
 * (GET /relay/v1/capacity with the cluster key); pick answers from the last
 * answers, the most ready first, and counts its picks against them until
 * the next. */
#define SUP_DIR_POLL_MS 1000

typedef struct sup_dir_static sup_dir_static;
extern const sup_directory_ops sup_dir_static_ops;

/* peers: "NAME=http://HOST:PORT" (HOST numeric or a name), none of them
 * self, no two of one tag (nor of self's); https:// each with a tls that
 * has a CA (sup_tls_client_ctx), http:// each without; key: the cluster
 * key the polls carry. NULL with err. */
sup_dir_static *sup_dir_static_new(struct event_base *base, const char *self,
				   const char *const *peers, size_t npeers, const char *key,
				   struct sup_tls *tls, sbx_err *err);
void sup_dir_static_free(sup_dir_static *d);

#endif
