/* The context driver's lines, checked (sup_ctx_int.h). The agent already
 * bounded each line and checked it is JSON; here its shape: what is used is
 * of the right type and size, and what is rendered is made of copies. */
#include "sup_ctx_int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "sbx/json_auto.h"

void sup_ctx_msg_free(sup_ctx_msg *m)
{
	json_decref(m->result);
	json_decref(m->event);
	m->result = m->event = NULL;
}

static bool is_text(const json_t *v)
{
	return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

/* "type/subtype" of [a-z0-9.+-] with a letter first, 100 bytes at most. */
static bool mime_ok(const char *k)
{
	const char *slash = strchr(k, '/');
	size_t n = strlen(k);

	if (!slash || slash == k || !slash[1] || n > 100 || !(k[0] >= 'a' && k[0] <= 'z'))
		return false;
	return strspn(k, "abcdefghijklmnopqrstuvwxyz0123456789.+-/") == n && !strchr(slash + 1, '/');
}

static void copy_reason(char *dst, const json_t *v, const char *fallback)
{
	const char *s = is_text(v) ? json_string_value(v) : fallback;

	snprintf(dst, SUP_CTX_REASON_MAX, "%s", s);
	/* The reason goes into logs and JSON: no control bytes. */
	for (char *p = dst; *p; p++)
		if ((unsigned char)*p < 0x20 && *p != '\n' && *p != '\t')
			*p = '?';
}

static int parse_answer(json_t *o, sup_ctx_msg *out, sbx_err *err)
{
	json_t *id = json_object_get(o, "id"), *res = json_object_get(o, "result");
	json_t *fail = json_object_get(o, "error");

	if (!json_is_integer(id) || json_integer_value(id) < 0)
		return sbx_err_set(err, -EPROTO, "an answer whose id is not ours");
	out->kind = SUP_CTX_MSG_ANSWER;
	out->id = (uint64_t)json_integer_value(id);
	if (json_is_object(res)) {
		out->result = json_incref(res);
		return 0;
	}
	if (!json_is_object(fail))
		return sbx_err_set(err, -EPROTO, "an answer with neither a result nor an error");
	copy_reason(out->failed, json_object_get(fail, "message"), "the driver refused");
	return 0;
}

static int parse_display(json_t *p, sup_ctx_msg *out, sbx_err *err)
{
	json_t *data = json_object_get(p, "data"), *main = json_object_get(p, "main"), *copy, *v;
	const char *k;

	if (!json_is_object(data) || json_object_size(data) > SUP_CTX_MIME_MAX || (main && !json_is_boolean(main)))
		return sbx_err_set(err, -EPROTO, "a display that is not {data: {mime: text}, main}");
	copy = json_object();
	if (!copy)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	json_object_foreach (data, k, v) {
		if (!mime_ok(k) || !is_text(v)) {
			json_decref(copy);
			return sbx_err_set(err, -EPROTO, "a display whose data is not {mime type: text}");
		}
		json_object_set_new(copy, k, json_stringn(json_string_value(v), json_string_length(v)));
	}
	out->kind = SUP_CTX_MSG_RESULT;
	out->event = json_pack("{s:b,s:o}", "main", json_is_true(main), "data", copy);
	return out->event ? 0 : sbx_err_set(err, -ENOMEM, "out of memory");
}

static int parse_error(json_t *p, sup_ctx_msg *out, sbx_err *err)
{
	json_t *name = json_object_get(p, "name"), *value = json_object_get(p, "value");
	json_t *tb = json_object_get(p, "traceback"), *lines, *v;
	size_t i;

	if (!is_text(name) || !is_text(value) || (tb && !json_is_array(tb)) ||
	    json_array_size(tb) > SUP_CTX_TRACE_MAX)
		return sbx_err_set(err, -EPROTO, "an error that is not {name, value, traceback}");
	lines = json_array();
	if (!lines)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	json_array_foreach (tb, i, v) {
		if (!is_text(v)) {
			json_decref(lines);
			return sbx_err_set(err, -EPROTO, "a traceback line that is not text");
		}
		json_array_append_new(lines, json_stringn(json_string_value(v), json_string_length(v)));
	}
	out->kind = SUP_CTX_MSG_ERROR;
	out->event = json_pack("{s:s%,s:s%,s:o}", "name", json_string_value(name), json_string_length(name),
			       "value", json_string_value(value), json_string_length(value), "traceback", lines);
	return out->event ? 0 : sbx_err_set(err, -ENOMEM, "out of memory");
}

int sup_ctx_msg_parse(const char *line, size_t len, sup_ctx_msg *out, sbx_err *err)
{
	SBX_AUTO_JSON json_t *o = NULL;
	json_error_t jerr;
	json_t *method, *p;
	const char *m;
	int rc;

	memset(out, 0, sizeof(*out));
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(o))
		return sbx_err_set(err, -EPROTO, "a line that is not a JSON object");
	method = json_object_get(o, "method");
	if (!method)
		return parse_answer(o, out, err);
	p = json_object_get(o, "params");
	if (!json_is_string(method) || (p && !json_is_object(p)))
		return sbx_err_set(err, -EPROTO, "a notification without a method's name or with params not an object");
	m = json_string_value(method);
	if (strcmp(m, "stream") == 0) {
		json_t *name = json_object_get(p, "name"), *text = json_object_get(p, "text");
		if (!json_is_string(name) || !is_text(text) ||
		    (strcmp(json_string_value(name), "stdout") != 0 && strcmp(json_string_value(name), "stderr") != 0))
			return sbx_err_set(err, -EPROTO, "a stream that is not {name: stdout|stderr, text}");
		out->kind = strcmp(json_string_value(name), "stdout") == 0 ? SUP_CTX_MSG_STDOUT : SUP_CTX_MSG_STDERR;
		out->event = json_pack("{s:s%}", "text", json_string_value(text), json_string_length(text));
		rc = out->event ? 0 : sbx_err_set(err, -ENOMEM, "out of memory");
	} else if (strcmp(m, "display") == 0) {
		rc = parse_display(p, out, err);
	} else if (strcmp(m, "error") == 0) {
		rc = parse_error(p, out, err);
	} else if (strcmp(m, "died") == 0) {
		json_t *oom = json_object_get(p, "oom");
		out->kind = SUP_CTX_MSG_DIED;
		copy_reason(out->reason, json_object_get(p, "reason"), "the interpreter ended");
		out->oom = json_is_true(oom);
		rc = 0;
	} else {
		out->kind = SUP_CTX_MSG_IGNORED;
		rc = 0;
	}
	if (rc < 0)
		sup_ctx_msg_free(out);
	return rc;
}
