/* Small msgpack builders shared by the protocol tests (test code only). */
#ifndef SBX_TEST_MSGPACK_H
#define SBX_TEST_MSGPACK_H

#include "sbx/proto.h"

static inline void tm_init(msgpack_sbuffer *sb, msgpack_packer *pk)
{
	msgpack_sbuffer_init(sb);
	msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
}

/* The exec result map of PROTOCOL.md: exited with exit_code. */
static inline void tm_exec_result(msgpack_sbuffer *sb, int exit_code, uint64_t duration_us)
{
	msgpack_packer pk;
	tm_init(sb, &pk);
	msgpack_pack_map(&pk, 4);
	sbx_proto_pack_str(&pk, "exit_code");
	msgpack_pack_int(&pk, exit_code);
	sbx_proto_pack_str(&pk, "signal");
	msgpack_pack_nil(&pk);
	sbx_proto_pack_str(&pk, "timed_out");
	msgpack_pack_false(&pk);
	sbx_proto_pack_str(&pk, "duration_us");
	msgpack_pack_uint64(&pk, duration_us);
}

#endif
