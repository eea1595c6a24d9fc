/* sbx error convention, shared by every component.
 *
 * A function that can fail returns 0 (or a non-negative count) on success and
 * a negative errno on failure, and fills a caller-owned sbx_err with a
 * human-readable message. A caller that passes the failure up adds its own
 * context with sbx_err_wrap(), so the final message reads outermost first:
 *   "create sandbox sb-1: mount overlay: No such file or directory".
 * This module owns only the error object; it must not log or allocate. */
#ifndef SBX_ERR_H
#define SBX_ERR_H

#include <stddef.h>

#define SBX_ERR_MSG_MAX 512

typedef struct sbx_err {
	int code;                  /* negative errno, 0 when no error */
	char msg[SBX_ERR_MSG_MAX]; /* context, outermost first */
} sbx_err;

/* Reset to "no error". */
void sbx_err_clear(sbx_err *err);

/* Set code and message; returns code so callers can `return sbx_err_set(...)`.
 * code must be negative; a non-negative code is stored as -EIO. err may be NULL. */
int sbx_err_set(sbx_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Like sbx_err_set, appending ": strerror(-code)". */
int sbx_err_sys(sbx_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefix the existing message with context ("ctx: old"); returns err->code. */
int sbx_err_wrap(sbx_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
