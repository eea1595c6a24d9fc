/* ping and info: answered at once, nothing kept. */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx/proto.h"
#include "agent.h"
#include "log.h"
#include "ops.h"
#include "session.h"

static void answer(agent_session *s, uint64_t id, const msgpack_sbuffer *map)
{
	sbx_err err = { 0 };

	if (sbx_proto_conn_end(agent_session_conn(s), id, map->data, map->size, &err) < 0)
		agent_log_debug("answer stream %llu: %s", (unsigned long long)id, err.msg);
}

void agent_op_ping(agent_session *s, uint64_t id, const msgpack_object *args)
{
	msgpack_sbuffer buf;
	msgpack_packer pk;

	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 0);
	answer(s, id, &buf);
	msgpack_sbuffer_destroy(&buf);
}

static uint64_t uptime_ms(const agent_ctx *ctx)
{
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return (now - ctx->start_ns) / 1000000u;
}

void agent_op_info(agent_session *s, uint64_t id, const msgpack_object *args)
{
	char host[256] = "";
	size_t ncaps;
	const char *const *caps = agent_session_caps(&ncaps);
	msgpack_sbuffer buf;
	msgpack_packer pk;

	if (gethostname(host, sizeof(host) - 1) < 0)
		agent_log_debug("gethostname: %s", strerror(errno));
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 6);
	sbx_proto_pack_str(&pk, "agent");
	sbx_proto_pack_str(&pk, AGENT_NAME);
	sbx_proto_pack_str(&pk, "version");
	msgpack_pack_uint64(&pk, SBX_PROTO_VERSION);
	sbx_proto_pack_str(&pk, "pid");
	msgpack_pack_int64(&pk, (int64_t)getpid());
	sbx_proto_pack_str(&pk, "uptime_ms");
	msgpack_pack_uint64(&pk, uptime_ms(agent_session_ctx(s)));
	sbx_proto_pack_str(&pk, "hostname");
	sbx_proto_pack_str(&pk, host);
	sbx_proto_pack_str(&pk, "caps");
	msgpack_pack_array(&pk, ncaps);
	for (size_t i = 0; i < ncaps; i++)
		sbx_proto_pack_str(&pk, caps[i]);
	answer(s, id, &buf);
	msgpack_sbuffer_destroy(&buf);
}
