/* sbx_proto_client_exec: the "exec" operation over the blocking client,
 * collecting output into bounded buffers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto_client.h"
#include "sbx/proto_exec.h"

#define DEFAULT_MAX_OUTPUT (1u << 20)

struct collect {
	sbx_proto_exec_result *res;
	size_t max;
};

static int append(char **buf, size_t *len, bool *truncated, size_t max, const uint8_t *p, size_t n)
{
	if (*len + n > max) {
		*truncated = true;
		n = max - *len;
	}
	if (!n)
		return 0;
	char *nb = realloc(*buf, *len + n + 1);
	if (!nb)
		return -ENOMEM;
	memcpy(nb + *len, p, n);
	*len += n;
	nb[*len] = '\0';
	*buf = nb;
	return 0;
}

static int on_output(const sbx_proto_frame *f, void *ud)
{
	struct collect *col = ud;
	sbx_proto_exec_result *r = col->res;
	if (f->kind != SBX_PROTO_DATA)
		return 0;
	if (f->ch_len == 6 && memcmp(f->ch, SBX_CH_STDOUT, 6) == 0)
		return append(&r->out, &r->out_len, &r->out_truncated, col->max, f->data, f->data_len);
	if (f->ch_len == 6 && memcmp(f->ch, SBX_CH_STDERR, 6) == 0)
		return append(&r->err, &r->err_len, &r->err_truncated, col->max, f->data, f->data_len);
	return 0;
}

static void read_result(const msgpack_object *r, sbx_proto_exec_result *res)
{
	res->exited = sbx_proto_get_int(r, "exit_code", &res->exit_code);
	res->signaled = sbx_proto_get_int(r, "signal", &res->signal);
	sbx_proto_get_bool(r, "timed_out", &res->timed_out);
	sbx_proto_get_uint(r, "duration_us", &res->duration_us);
}

int sbx_proto_client_exec(sbx_proto_client *c, const char *const *argv, const char *cmd,
			  uint32_t timeout_ms, size_t max_output, sbx_proto_exec_result *res,
			  sbx_err *err)
{
	memset(res, 0, sizeof(*res));
	if (!argv && !cmd)
		return sbx_err_set(err, -EINVAL, "exec: neither argv nor cmd");
	sbx_proto_exec_args x = { .argv = (char **)argv, .cmd = (char *)cmd, .timeout_ms = timeout_ms };
	while (argv && argv[x.argc])
		x.argc++;
	sbx_proto_args a;
	sbx_proto_args_init(&a);
	sbx_proto_exec_encode(&x, NULL, &a);
	size_t len = 0;
	const char *enc = sbx_proto_args_done(&a, &len);
	struct collect col = { res, max_output ? max_output : DEFAULT_MAX_OUTPUT };
	sbx_proto_frame fin;
	if (!enc) {
		sbx_proto_args_destroy(&a);
		return sbx_err_set(err, -ENOMEM, "exec: out of memory");
	}
	int rc = sbx_proto_client_call(c, SBX_OP_EXEC, enc, len, on_output, &col, &fin, err);
	sbx_proto_args_destroy(&a);
	if (rc < 0)
		return rc;
	if (fin.kind == SBX_PROTO_END) {
		read_result(&fin.args, res);
		if ((!res->out && !(res->out = strdup(""))) || (!res->err && !(res->err = strdup(""))))
			rc = sbx_err_set(err, -ENOMEM, "exec: out of memory");
	}
	else
		rc = sbx_err_set(err, -EREMOTEIO, "exec: %.*s: %.*s", (int)fin.code_name_len,
				 fin.code_name, (int)fin.msg_len, fin.msg ? fin.msg : "");
	sbx_proto_frame_release(&fin);
	return rc;
}

void sbx_proto_exec_result_free(sbx_proto_exec_result *r)
{
	if (!r)
		return;
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}
