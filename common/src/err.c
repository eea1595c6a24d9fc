/* sbx_err: the caller-owned error object (see sbx/err.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "sbx/err.h"

void sbx_err_clear(sbx_err *err)
{
	if (!err)
		return;
	err->code = 0;
	err->msg[0] = '\0';
}

static int vset(sbx_err *err, int code, bool with_errno, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));
static int vset(sbx_err *err, int code, bool with_errno, const char *fmt, va_list ap)
{
	if (code >= 0)
		code = -EIO;
	if (!err)
		return code;
	err->code = code;
	int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	if (with_errno && n >= 0 && (size_t)n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %s", strerror(-code));
	return code;
}

int sbx_err_set(sbx_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	code = vset(err, code, false, fmt, ap);
	va_end(ap);
	return code;
}

int sbx_err_sys(sbx_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	code = vset(err, code, true, fmt, ap);
	va_end(ap);
	return code;
}

int sbx_err_wrap(sbx_err *err, const char *fmt, ...)
{
	if (!err)
		return -EIO;
	char ctx[SBX_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);

	char old[SBX_ERR_MSG_MAX];
	memcpy(old, err->msg, sizeof(old));
	old[sizeof(old) - 1] = '\0';

	/* "ctx: old", cut at the end when too long */
	const size_t max = sizeof(err->msg) - 1;
	size_t n = strnlen(ctx, max);
	memcpy(err->msg, ctx, n);
	if (old[0] && n + 2 < max) {
		memcpy(err->msg + n, ": ", 2);
		n += 2;
		size_t k = strnlen(old, max - n);
		memcpy(err->msg + n, old, k);
		n += k;
	}
	err->msg[n] = '\0';
	if (err->code >= 0)
		err->code = -EIO;
	return err->code;
}
