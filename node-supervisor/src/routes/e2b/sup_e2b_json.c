/* Pure translations between E2B's control-plane JSON and sbx's: their
 * create into sbx's create body (parsed by sup_api, so sbx's checks hold),
 * sbx's view into their Sandbox, and their list's query. */
#include "sup_e2b_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sup_query.h"
#include "sup_text.h"

const char *sup_e2b_state(const char *sbx_state)
{
	return sbx_state && strcmp(sbx_state, "paused") == 0 ? "paused" : "running";
}

int sup_e2b_template_image(const sup_e2b_ctx *x, const char *tmpl, char **out, sbx_err *err)
{
	size_t tl = strlen(tmpl);
	*out = NULL;
	for (size_t i = 0; i < x->naliases; i++) {
		const char *a = x->aliases[i], *eq = strchr(a, '=');
		if (eq && (size_t)(eq - a) == tl && strncmp(a, tmpl, tl) == 0) {
			if (eq[1] && !(*out = strdup(eq + 1)))
				return sbx_err_set(err, -ENOMEM, "out of memory");
			return 0;
		}
	}
	if (strcmp(tmpl, "base") == 0)
		return 0;
	if (!(*out = strdup(tmpl)))
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

/* An object whose values are all strings (their metadata, envVars). */
static int string_map(json_t *v, const char *field, sbx_err *err)
{
	const char *k;
	json_t *s;
	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL, "field \"%s\": want an object of strings", field);
	json_object_foreach(v, k, s)
		if (!json_is_string(s))
			return sbx_err_set(err, -EINVAL, "field \"%s\": \"%.64s\": want a string", field, k);
	return 0;
}

/* A field sbx has no place for: refused unless empty (null, false, {}, []). */
static int unserved(json_t *v, const char *field, const char *why, sbx_err *err)
{
	if (json_is_null(v) || json_is_false(v) || (json_is_object(v) && json_object_size(v) == 0) ||
	    (json_is_array(v) && json_array_size(v) == 0))
		return 0;
	return sbx_err_set(err, -EINVAL, "field \"%s\" is not served by sbx: %s", field, why);
}

static int create_field(const sup_e2b_ctx *x, const char *k, json_t *v, json_t *sbx, json_t *kept,
			sbx_err *err)
{
	if (strcmp(k, "templateID") == 0) {
		if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 255)
			return sbx_err_set(err, -EINVAL, "field \"templateID\": want a template's name");
		SBX_AUTO_FREE char *image = NULL;
		if (sup_e2b_template_image(x, json_string_value(v), &image, err) < 0)
			return err->code;
		json_object_set(kept, "templateID", v);
		return image ? json_object_set_new(sbx, "image", json_string(image)) : 0;
	}
	if (strcmp(k, "timeout") == 0) {
		if (!json_is_integer(v) || json_integer_value(v) < 1)
			return sbx_err_set(err, -EINVAL, "field \"timeout\": want seconds (at least 1)");
		return json_object_set(sbx, "timeout", v);
	}
	if (strcmp(k, "metadata") == 0) {
		if (json_is_null(v))
			return 0;
		if (string_map(v, k, err) < 0)
			return err->code;
		return json_object_set(kept, "metadata", v);
	}
	if (strcmp(k, "envVars") == 0) {
		if (json_is_null(v))
			return 0;
		if (string_map(v, k, err) < 0)
			return err->code;
		return json_object_set(sbx, "env", v);
	}
	if (strcmp(k, "allow_internet_access") == 0) {
		if (!json_is_boolean(v) && !json_is_null(v))
			return sbx_err_set(err, -EINVAL, "field \"allow_internet_access\": want a boolean");
		/* sbx's default is no network at all; asking for the internet is
		 * an egress policy that allows everything (needs --uplink) */
		return json_is_true(v) ? json_object_set_new(sbx, "network",
							      json_pack("{s:s}", "default_action", "allow"))
				       : 0;
	}
	if (strcmp(k, "secure") == 0 || strcmp(k, "autoPauseMemory") == 0)
		return json_is_boolean(v) || json_is_null(v)
			       ? 0
			       : sbx_err_set(err, -EINVAL, "field \"%s\": want a boolean", k);
	if (strcmp(k, "autoPause") == 0)
		return unserved(v, k, "a sandbox is deleted at its timeout; pause it before (pause())", err);
	if (strcmp(k, "autoResume") == 0) {
		json_t *en = json_object_get(v, "enabled");
		return json_is_true(en) ? unserved(en, k, "connect() resumes a paused sandbox", err) : 0;
	}
	if (strcmp(k, "network") == 0)
		return unserved(v, k, "give allow_internet_access, or use sbx's own API for a policy", err);
	if (strcmp(k, "mcp") == 0)
		return unserved(v, k, "use sbx's MCP hosting (PUT /v1/sandboxes/{id}/mcp/{name})", err);
	if (strcmp(k, "volumeMounts") == 0)
		return unserved(v, k, "use sbx's volumes (POST /v1/sandboxes \"volumes\")", err);
	if (strcmp(k, "iam") == 0)
		return unserved(v, k, "sbx has no IAM roles", err);
	return sbx_err_set(err, -EINVAL, "unknown field \"%.64s\"", k);
}

int sup_e2b_parse_create(const char *body, size_t len, const sup_e2b_ctx *x, sup_create_req *out,
			 json_t **kept, sbx_err *err)
{
	json_error_t je;
	memset(out, 0, sizeof(*out));
	*kept = NULL;
	SBX_AUTO_JSON json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(j))
		return sbx_err_set(err, -EINVAL, "the body is not a JSON object: %s", je.text);
	SBX_AUTO_JSON json_t *sbx = json_object();
	*kept = json_pack("{s:s}", "templateID", "base");
	if (!sbx || !*kept)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v)
		if (create_field(x, k, v, sbx, *kept, err) < 0)
			return err->code < 0 ? err->code : sbx_err_set(err, -ENOMEM, "out of memory");
	/* E2B's base template when none is named */
	if (!json_object_get(j, "templateID")) {
		SBX_AUTO_FREE char *image = NULL;
		if (sup_e2b_template_image(x, "base", &image, err) < 0)
			return err->code;
		if (image)
			json_object_set_new(sbx, "image", json_string(image));
	}
	SBX_AUTO_FREE char *text = json_dumps(sbx, JSON_COMPACT);
	if (!text)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return sup_api_parse_create(text, strlen(text), &x->limits, out, err);
}

int sup_e2b_parse_timeout(const char *body, size_t len, bool optional, unsigned *out, sbx_err *err)
{
	json_error_t je;
	*out = 0;
	if (len == 0 && optional)
		return 0;
	SBX_AUTO_JSON json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(j))
		return sbx_err_set(err, -EINVAL, "the body is not a JSON object: %s", je.text);
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v) {
		if (strcmp(k, "timeout") == 0) {
			if (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    json_integer_value(v) > 366 * 86400)
				return sbx_err_set(err, -EINVAL, "field \"timeout\": want seconds");
			*out = (unsigned)json_integer_value(v);
		} else if (strcmp(k, "memory") != 0 || !json_is_boolean(v)) {
			/* connect's "memory": false (a reboot on resume) is all
			 * the same here: sbx's pause keeps memory */
			return sbx_err_set(err, -EINVAL, "unknown field \"%.64s\"", k);
		}
	}
	if (!*out && !optional)
		return sbx_err_set(err, -EINVAL, "field \"timeout\": want seconds (at least 1)");
	return 0;
}

json_t *sup_e2b_sandbox_json(const sup_e2b_ctx *x, const sup_sandbox_view *v, const json_t *kept,
			     const char *token)
{
	json_t *tmpl = json_object_get(kept, "templateID");
	const char *t = json_is_string(tmpl) ? json_string_value(tmpl) : "base";
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:n}", "sandboxID", v->id, "templateID", t,
			      "alias", t, "clientID", x->node ? x->node : "sbx", "envdVersion",
			      SUP_E2B_ENVD_VERSION, "domain");
	if (!o)
		return NULL;
	if (token) {
		json_object_set_new(o, "envdAccessToken", json_string(token));
		/* their code interpreter's SDK sends only this one to /contexts */
		json_object_set_new(o, "trafficAccessToken", json_string(token));
		return o;
	}
	char started[32], end[32];
	sup_rfc3339(v->created_at, started, sizeof(started));
	sup_rfc3339(v->expires_at, end, sizeof(end));
	json_t *meta = json_object_get(kept, "metadata");
	int rc = json_object_set_new(o, "startedAt", json_string(started));
	rc |= json_object_set_new(o, "endAt", json_string(end));
	rc |= json_object_set_new(o, "state", json_string(sup_e2b_state(v->state)));
	rc |= json_object_set_new(o, "cpuCount",
				  json_integer((json_int_t)((v->resources.cpu_milli + 999) / 1000)));
	rc |= json_object_set_new(o, "memoryMB", json_integer((json_int_t)(v->resources.memory >> 20)));
	rc |= json_object_set_new(o, "diskSizeMB", json_integer((json_int_t)(v->resources.disk >> 20)));
	rc |= json_object_set_new(o, "metadata", meta ? json_incref(meta) : json_object());
	rc |= json_object_set_new(o, "allowInternetAccess", json_boolean(v->network != NULL));
	rc |= json_object_set_new(o, "lifecycle", json_pack("{s:s, s:b}", "onTimeout", "kill",
							     "autoResume", 0));
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* s[0..n) percent-decoded twice (their metadata values are encoded before
 * the query is, and the form once more): malloc'd, NULL on failure. */
static char *decode2(const char *s, size_t n)
{
	size_t l1, l2;
	SBX_AUTO_FREE char *once = sup_query_decode(s, n, &l1);
	char *twice = once ? sup_query_decode(once, l1, &l2) : NULL;
	if (twice && strlen(twice) != l2) {
		free(twice);
		return NULL;
	}
	return twice;
}

static int parse_meta(const char *f, sup_e2b_listq *lq, sbx_err *err)
{
	if (!(lq->meta = json_object()))
		return sbx_err_set(err, -ENOMEM, "out of memory");
	while (*f) {
		size_t n = strcspn(f, "&");
		const char *eq = memchr(f, '=', n);
		if (!eq || eq == f)
			return sbx_err_set(err, -EINVAL, "query parameter \"metadata\": want key=value&...");
		SBX_AUTO_FREE char *k = decode2(f, (size_t)(eq - f));
		SBX_AUTO_FREE char *v = decode2(eq + 1, (size_t)(f + n - eq - 1));
		if (!k || !v || json_object_set_new(lq->meta, k, json_string(v)) < 0)
			return sbx_err_set(err, -EINVAL, "query parameter \"metadata\": a key or value is not text");
		f += n + (f[n] == '&');
	}
	return 0;
}

static int parse_states(const char *s, sup_e2b_listq *lq, sbx_err *err)
{
	while (*s) {
		size_t n = strcspn(s, ",");
		if (n == 7 && strncmp(s, "running", 7) == 0)
			lq->running = true;
		else if (n == 6 && strncmp(s, "paused", 6) == 0)
			lq->paused = true;
		else
			return sbx_err_set(err, -EINVAL, "query parameter \"state\": want running, paused");
		s += n + (s[n] == ',');
	}
	return 0;
}

int sup_e2b_listq_parse(const char *query, sup_e2b_listq *lq, sbx_err *err)
{
	static const char *const keys[] = { "metadata", "state",	 "limit", "nextToken",
					     "order",    "startedAfter", "template", NULL };
	SUP_AUTO_QUERY sup_query qs = { 0 };
	size_t n;
	memset(lq, 0, sizeof(*lq));
	int rc = sup_query_parse(query, keys, &qs, err);
	if (rc == 0)
		rc = sup_query_uint(&qs, "limit", 1, SUP_E2B_PAGE_MAX, SUP_E2B_PAGE, &lq->limit, err);
	if (rc < 0)
		return rc;
	const char *m = sup_query_get(&qs, "metadata", &n);
	if (m && parse_meta(m, lq, err) < 0)
		return err->code;
	const char *s = sup_query_get(&qs, "state", &n);
	if (s && parse_states(s, lq, err) < 0)
		return err->code;
	const char *t = sup_query_get(&qs, "nextToken", &n);
	if (t && (n == 0 || n >= sizeof(lq->next)))
		return sbx_err_set(err, -EINVAL, "query parameter \"nextToken\": not one this list gave");
	if (t)
		memcpy(lq->next, t, n + 1);
	const char *o = sup_query_get(&qs, "order", &n);
	if (o && strcmp(o, "asc") != 0)
		return sbx_err_set(err, -EINVAL, "query parameter \"order\": sbx lists oldest first (asc)");
	if (sup_query_get(&qs, "startedAfter", &n) || sup_query_get(&qs, "template", &n))
		return sbx_err_set(err, -EINVAL, "query parameters \"startedAfter\" and \"template\" are not served");
	return 0;
}

void sup_e2b_listq_free(sup_e2b_listq *lq)
{
	json_decref(lq->meta);
	lq->meta = NULL;
}

bool sup_e2b_listq_match(const sup_e2b_listq *lq, const char *sbx_state, const json_t *kept)
{
	bool paused = strcmp(sup_e2b_state(sbx_state), "paused") == 0;
	if ((lq->running || lq->paused) && !(paused ? lq->paused : lq->running))
		return false;
	const char *k;
	json_t *v;
	json_t *meta = json_object_get(kept, "metadata");
	json_object_foreach(lq->meta, k, v) {
		const char *have = json_string_value(json_object_get(meta, k));
		if (!have || strcmp(have, json_string_value(v)) != 0)
			return false;
	}
	return true;
}
