#include "sup_procs_int.h"

#include <errno.h>

#include "sbx/proto.h"
#include "sup_api.h"

json_t *sup_procs_gap_json(const msgpack_object *event, sup_pq *q, sbx_err *err)
{
	uint64_t from = q->off, to = 0;
	if (sup_api_gap_read(event, q->off, &to, err) <= 0)
		return NULL;
	q->off = to;
	return json_pack("{s:I,s:I}", "from", (json_int_t)from, "to", (json_int_t)to);
}
