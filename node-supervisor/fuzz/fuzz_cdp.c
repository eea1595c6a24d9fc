/* The DevTools port's discovery answers (sup_ports_cdp.c) under
 * libFuzzer: the body a server on a sandbox's port 9222 sends (the
 * tenant's program, trusted no more than any guest), rewritten for a
 * client and made into GET .../browser's answer. Input: the body.
 * Checks, besides the sanitizers: a rewrite is NULL or JSON of the shape
 * taken (an object, or an array of objects) whose every
 * webSocketDebuggerUrl is on the base given, followed by a path, with the
 * query given after it; the browser answer is NULL or names the
 * endpoints on the way in given and the signed prefix, its ws_url on
 * them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sup_ports_int.h"

#define CHECK(x) \
	do { \
		if (!(x)) \
			abort(); \
	} while (0)

#define BASE "ws://h:7070/v1/sandboxes/sb-1/ports/9222"
#define QUERY "sbx_exp=9&sbx_sig=ab"
#define SIGNED "/v1/signed/sb-1/9222/9/ab"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_url(json_t *o)
{
	CHECK(json_is_object(o));
	json_t *ws = json_object_get(o, "webSocketDebuggerUrl");
	if (!ws)
		return;
	const char *s = json_string_value(ws);
	CHECK(s && strncmp(s, BASE "/", strlen(BASE) + 1) == 0);
	size_t n = strlen(s), q = strlen(QUERY);
	CHECK(n > q && strcmp(s + n - q, QUERY) == 0 && (s[n - q - 1] == '?' || s[n - q - 1] == '&'));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > SUP_PORTS_CDP_JSON_MAX)
		return 0;
	const char *body = (const char *)data;
	json_t *j = sup_ports_cdp_rewrite(body, size, BASE, QUERY);
	if (j) {
		CHECK(json_is_object(j) || json_is_array(j));
		if (json_is_array(j)) {
			size_t i;
			json_t *v;
			json_array_foreach(j, i, v) check_url(v);
		} else {
			check_url(j);
		}
		json_decref(j);
	}
	sup_ports_where w = { "h:7070", "/v1/sandboxes/sb-1/ports/9222", false };
	json_t *a = sup_ports_browser_answer(body, size, &w, SIGNED, 9);
	if (a) {
		const char *ws = json_string_value(json_object_get(a, "ws_url"));
		json_t *sg = json_object_get(a, "signed");
		const char *sws = json_string_value(json_object_get(sg, "ws_url"));
		CHECK(ws && strncmp(ws, BASE "/", strlen(BASE) + 1) == 0);
		CHECK(sws && strncmp(sws, "ws://h:7070" SIGNED "/", strlen("ws://h:7070" SIGNED) + 1) == 0);
		CHECK(strcmp(json_string_value(json_object_get(a, "cdp_url")),
			     "http://h:7070/v1/sandboxes/sb-1/ports/9222") == 0);
		CHECK(json_integer_value(json_object_get(sg, "expires_at")) == 9);
		json_decref(a);
	}
	return 0;
}
