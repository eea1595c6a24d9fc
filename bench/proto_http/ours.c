/* The edge's side of BENCHMARKS.md's prototype comparison (issue 10), not
 * part of the build: node-supervisor/src/edge/http with a one-row family answering
 * GET /v1/sandboxes/{id}, one loop. From the top of the tree:
 *   S=node-supervisor/src; gcc -O2 -D_GNU_SOURCE -I$S/edge/http -I$S/lib/base -Iprotocol/include -Icommon/include \
 *     -o ours bench/proto_http/ours.c $S/edge/http/sup_*.c $S/lib/base/sup_token.c $S/lib/base/sup_log.c \
 *     $S/lib/base/sup_text.c $S/lib/base/sup_b64.c common/src/err.c common/src/bev_fill.c \
 *     -levent_core -ljansson -lwslay -lcrypto
 *   ./ours 18082 & wrk -t2 -c64 -d6s --latency -H 'Authorization: Bearer tok-0123456789abcdef' \
 *     http://127.0.0.1:18082/v1/sandboxes/sb-0123456789ab */
#include <event2/event.h>
#include <stdlib.h>

#include "sup_http.h"
#include "sup_log.h"
#include "sup_token.h"

struct sup_tenant {
	int unused;
};
static const struct sup_tenant caller;

static const struct sup_tenant *auth(void *ud, const char *token, size_t len)
{
	return sup_token_equal("tok-0123456789abcdef", token, len) ? &caller : NULL;
}

static int act(sup_http_req *r, void *state, sbx_err *err)
{
	sup_http_json(r, 200, json_pack("{s:s,s:s,s:s,s:s,s:s}", "id", "sb-0123456789ab", "state", "running",
					"image", "host", "created_at", "2026-12-01T13:00:00Z", "expires_at",
					"2026-12-01T14:00:00Z"));
	return 0;
}

static const sup_http_route routes[] = {
	{ "GET", "/v1/sandboxes/{id}", "GET sandbox", SUP_BODY_NONE, 0, NULL, act },
};
static const sup_http_family fam = { "p", routes, 1, 8, NULL, NULL };

int main(int argc, char **argv)
{
	struct event_base *base = event_base_new();
	sup_http_mount m = { &fam, NULL };
	sup_http_cfg cfg = { .host = "127.0.0.1", .port = (uint16_t)atoi(argv[1]), .auth = auth,
			     .max_body = 1 << 20, .max_conns = 19000, .head_timeout_s = 10,
			     .body_timeout_s = 60, .idle_timeout_s = 60, .mounts = &m, .nmounts = 1 };
	sbx_err err;
	sup_log_set_level(SUP_LOG_WARN);
	if (!sup_http_new(base, &cfg, &err))
		return 1;
	event_base_dispatch(base);
	return 0;
}
