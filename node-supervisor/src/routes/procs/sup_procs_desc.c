#include "sup_procs_int.h"

#include <errno.h>

#include "sbx/proto.h"
#include "sup_api.h"

json_t *sup_procs_gap_json(const msgpack_object *event, sup_pq *q, sbx_err *err)
{
	const msgpack_object *g = sbx_proto_map_get(event, "gap");
	uint64_t from = 0, to = 0;
	if (!g)
		return NULL;
	if (sup_api_mp_uint(g, "from", UINT64_MAX / 2, &from, err) < 0 ||
	    sup_api_mp_uint(g, "to", UINT64_MAX / 2, &to, err) < 0 || from != q->off || to <= from) {
		sbx_err_set(err, -EPROTO, "proc.output: a gap that does not follow the data");
		return NULL;
	}
	q->off = to;
	return json_pack("{s:I,s:I}", "from", (json_int_t)from, "to", (json_int_t)to);
}
