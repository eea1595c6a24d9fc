/* The agent's reset (PROTOCOL.md "reset"), typed on top of an agent call
 * (sup_agent.h) as sup_agent_exec.c types exec: the folders to empty go
 * out, the figures come back checked by the protocol library (a guest's
 * answer of the wrong shape blames the agent). The call's deadline is the
 * agent's own kill timeout plus the connection's grace. It must not know
 * about pools or what the host checks after it. */
#ifndef SUP_AGENT_RESET_H
#define SUP_AGENT_RESET_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sbx/proto_reset.h"
#include "sup_agent.h"

/* rc 0 with r, or rc < 0 with err as for any call (the agent's timeout,
 * a folder it could not empty, -EPROTO a broken answer). */
typedef void (*sup_agent_reset_cb)(int rc, const sbx_proto_reset_result *r, const sbx_err *err, void *ud);

typedef struct sup_agent_reset_call sup_agent_reset_call;

/* paths: absolute, normalised (sbx_proto_reset_path_ok), 1..16. *out is
 * valid until cb ran or sup_agent_reset_cancel. */
int sup_agent_reset(sup_agent *a, const char *const *paths, size_t npaths, uint64_t timeout_ms,
		    sup_agent_reset_cb cb, void *ud, sup_agent_reset_call **out, sbx_err *err);
/* Abandon it: cb does not run (the agent's reset goes on). */
void sup_agent_reset_cancel(sup_agent_reset_call *x);

#endif
