/* The context driver's lines as the engine reads them (sup_ctx_msg.c):
 * pure, no I/O. The driver runs in the guest, so each line is checked for
 * its shape and sizes before anything of it is used or rendered. */
#ifndef SUP_CTX_INT_H
#define SUP_CTX_INT_H

#include <jansson.h>
#include <stdint.h>

#include "sbx/err.h"

/* A display's MIME types at most, and a traceback's lines. */
#define SUP_CTX_MIME_MAX 32
#define SUP_CTX_TRACE_MAX 4096
#define SUP_CTX_REASON_MAX 1024

typedef enum sup_ctx_msg_kind {
	SUP_CTX_MSG_IGNORED = 0, /* a notification the engine does not know */
	SUP_CTX_MSG_ANSWER,      /* the answer to request id: result or failed */
	SUP_CTX_MSG_STDOUT,      /* event: {"text"} */
	SUP_CTX_MSG_STDERR,
	SUP_CTX_MSG_RESULT,      /* event: {"main","data"} */
	SUP_CTX_MSG_ERROR,       /* event: {"name","value","traceback"} */
	SUP_CTX_MSG_DIED,        /* reason, oom */
} sup_ctx_msg_kind;

typedef struct sup_ctx_msg {
	sup_ctx_msg_kind kind;
	uint64_t id;       /* ANSWER: the request's id */
	json_t *result;    /* ANSWER: its result object (NULL: it failed) */
	char failed[SUP_CTX_REASON_MAX]; /* ANSWER without result: the driver's message */
	json_t *event;     /* STDOUT .. ERROR: the event as the API renders it */
	char reason[SUP_CTX_REASON_MAX]; /* DIED */
	int oom;           /* DIED: 1 killed for the memory limit */
} sup_ctx_msg;

/* One line (without its newline): 0 with *out filled (free it), or
 * -EPROTO with err saying what is wrong with it. */
int sup_ctx_msg_parse(const char *line, size_t len, sup_ctx_msg *out, sbx_err *err);
void sup_ctx_msg_free(sup_ctx_msg *m);

#endif
