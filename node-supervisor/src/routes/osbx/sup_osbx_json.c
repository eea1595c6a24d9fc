/* OpenSandbox's JSON and sbx's, both ways: pure (jansson only). A create
 * becomes sbx's own create body and goes through sup_api's parser, so every
 * check of POST /v1/sandboxes holds here too. */
#include "sup_osbx_int.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "sup_text.h"

static const char *const default_entry[] = { "tail", "-f", "/dev/null" };

/* A decimal number with an optional fraction: *num / 10^*scale. */
static int decimal(const char *s, size_t n, uint64_t *num, unsigned *scale)
{
	uint64_t v = 0;
	unsigned sc = 0;
	bool dot = false, any = false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '.' && !dot) {
			dot = true;
			continue;
		}
		if (s[i] < '0' || s[i] > '9' || v > UINT64_MAX / 100 || sc > 6)
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
		sc += dot;
		any = true;
	}
	if (!any)
		return -EINVAL;
	*num = v;
	*scale = sc;
	return 0;
}

static uint64_t pow10u(unsigned e)
{
	uint64_t p = 1;
	while (e--)
		p *= 10;
	return p;
}

int sup_osbx_cpu_milli(const char *s, uint64_t *out)
{
	size_t n = strlen(s);
	uint64_t v;
	unsigned sc;
	bool milli = n && s[n - 1] == 'm';
	if (decimal(s, n - milli, &v, &sc) < 0)
		return -EINVAL;
	uint64_t mul = milli ? 1 : 1000;
	if (v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul / pow10u(sc);
	return 0;
}

int sup_osbx_bytes(const char *s, uint64_t *out)
{
	static const struct {
		const char *suf;
		uint64_t mul;
	} sufs[] = { { "Ki", 1ull << 10 }, { "Mi", 1ull << 20 }, { "Gi", 1ull << 30 },
		     { "Ti", 1ull << 40 }, { "k", 1000ull }, { "K", 1000ull },
		     { "M", 1000000ull }, { "G", 1000000000ull }, { "T", 1000000000000ull } };
	size_t n = strlen(s);
	uint64_t mul = 1, v;
	unsigned sc;
	for (size_t i = 0; i < sizeof(sufs) / sizeof(sufs[0]); i++) {
		size_t l = strlen(sufs[i].suf);
		if (n > l && strcmp(s + n - l, sufs[i].suf) == 0) {
			mul = sufs[i].mul;
			n -= l;
			break;
		}
	}
	if (decimal(s, n, &v, &sc) < 0 || v > UINT64_MAX / mul)
		return -EINVAL;
	*out = v * mul / pow10u(sc);
	return 0;
}

int sup_osbx_parse_time(const char *s, time_t *out)
{
	struct tm tm = { 0 };
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return -EINVAL;
	bool frac = false;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		while (*p >= '0' && *p <= '9')
			frac |= *p++ != '0';
	}
	long off = 0;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int hh, mm, k = 0;
		if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &k) != 2 || k != 5 || hh > 23 || mm > 59)
			return -EINVAL;
		off = (hh * 3600L + mm * 60L) * (*p == '-' ? -1 : 1);
		p += 6;
	} else {
		return -EINVAL;
	}
	if (*p)
		return -EINVAL;
	time_t t = timegm(&tm);
	if (t == (time_t)-1)
		return -EINVAL;
	*out = t - off + frac;
	return 0;
}

bool sup_osbx_entry_is_default(const json_t *e)
{
	if (!json_is_array(e) || json_array_size(e) != 3)
		return false;
	for (size_t i = 0; i < 3; i++)
		if (!json_is_string(json_array_get(e, i)) ||
		    strcmp(json_string_value(json_array_get(e, i)), default_entry[i]) != 0)
			return false;
	return true;
}

/* An object of strings (env, metadata, extensions). */
static int string_map(json_t *v, const char *field, sbx_err *err)
{
	const char *k;
	json_t *e;
	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL, "field \"%s\": want an object of strings", field);
	json_object_foreach(v, k, e)
		if (!json_is_string(e))
			return sbx_err_set(err, -EINVAL, "field \"%s.%.64s\": want a string", field, k);
	return 0;
}

static int resources(json_t *v, json_t *sbx, sbx_err *err)
{
	const char *k;
	json_t *e;
	uint64_t n;
	json_t *res = json_object();
	if (!res || json_object_set_new(sbx, "resources", res) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL, "field \"resourceLimits\": want an object");
	json_object_foreach(v, k, e) {
		const char *s = json_string_value(e);
		if (!s)
			return sbx_err_set(err, -EINVAL, "field \"resourceLimits.%.64s\": want a string", k);
		if (strcmp(k, "cpu") == 0) {
			if (sup_osbx_cpu_milli(s, &n) < 0 || n == 0 || n > 1000000)
				return sbx_err_set(err, -EINVAL,
						   "field \"resourceLimits.cpu\": \"%.32s\" is not a CPU quantity (\"500m\", \"2\")",
						   s);
			json_object_set_new(res, "cpus", json_real((double)n / 1000.0));
		} else if (strcmp(k, "memory") == 0) {
			if (sup_osbx_bytes(s, &n) < 0 || n > (uint64_t)INT64_MAX)
				return sbx_err_set(err, -EINVAL,
						   "field \"resourceLimits.memory\": \"%.32s\" is not a size (\"512Mi\", \"2Gi\")",
						   s);
			json_object_set_new(res, "memory", json_integer((json_int_t)n));
		} else if (strcmp(k, "ephemeral-storage") == 0 || strcmp(k, "disk") == 0) {
			if (sup_osbx_bytes(s, &n) < 0 || n > (uint64_t)INT64_MAX)
				return sbx_err_set(err, -EINVAL, "field \"resourceLimits.%s\": \"%.32s\" is not a size",
						   k, s);
			json_object_set_new(res, "disk", json_integer((json_int_t)n));
		} else {
			return sbx_err_set(err, -EINVAL,
					   "field \"resourceLimits.%.64s\": this server limits cpu, memory and ephemeral-storage only",
					   k);
		}
	}
	return 0;
}

/* {"defaultAction", "egress": [{"action", "target"}]} is sbx's policy with
 * one key spelled otherwise; sup_api checks the rest. */
static int network(json_t *v, json_t *sbx, sbx_err *err)
{
	const char *k;
	json_t *e;
	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL, "field \"networkPolicy\": want an object");
	json_t *p = json_object();
	if (!p || json_object_set_new(sbx, "network", p) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	json_object_foreach(v, k, e) {
		if (strcmp(k, "defaultAction") == 0)
			json_object_set(p, "default_action", e);
		else if (strcmp(k, "egress") == 0)
			json_object_set(p, "egress", e);
		else
			return sbx_err_set(err, -EINVAL, "field \"networkPolicy.%.64s\": unknown", k);
	}
	return 0;
}

static int platform(json_t *v, sbx_err *err)
{
	struct utsname u;
	const char *os = json_string_value(json_object_get(v, "os"));
	const char *arch = json_string_value(json_object_get(v, "arch"));
	const char *here = uname(&u) == 0 && strcmp(u.machine, "aarch64") == 0 ? "arm64" : "amd64";
	if (!json_is_object(v) || !os || strcmp(os, "linux") != 0 || !arch || strcmp(arch, here) != 0)
		return sbx_err_set(err, -EINVAL, "field \"platform\": this node runs linux/%s only", here);
	return 0;
}

static bool empty(json_t *v)
{
	return !v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0) ||
	       (json_is_object(v) && json_object_size(v) == 0) || json_is_false(v);
}

int sup_osbx_parse_create(const char *body, size_t len, const sup_api_limits *lim,
			  sup_create_req *out, json_t **kept, sbx_err *err)
{
	json_error_t je;
	*kept = NULL;
	json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(j)) {
		json_decref(j);
		return sbx_err_set(err, -EINVAL, "the body is not a JSON object: %s", je.text);
	}
	json_t *sbx = json_object();
	*kept = json_object();
	int rc = sbx && *kept ? 0 : sbx_err_set(err, -ENOMEM, "out of memory");
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v) {
		if (rc < 0)
			break;
		if (strcmp(k, "image") == 0) {
			json_t *uri = json_object_get(v, "uri");
			if (!json_is_string(uri))
				rc = sbx_err_set(err, -EINVAL, "field \"image.uri\": want a string");
			else if (!empty(json_object_get(v, "auth")))
				rc = sbx_err_set(err, -EINVAL,
						 "field \"image.auth\": this server pulls without credentials (import the image with POST /v1/images)");
			else
				json_object_set(sbx, "image", uri);
		} else if (strcmp(k, "snapshotId") == 0) {
			/* sbx's restore: the snapshot's image, its files */
			if (json_is_string(v)) {
				json_object_set(sbx, "snapshot", v);
				json_object_set(*kept, "snapshotId", v);
			} else if (!json_is_null(v)) {
				rc = sbx_err_set(err, -EINVAL, "field \"snapshotId\": want a string");
			}
		} else if (strcmp(k, "entrypoint") == 0) {
			size_t i;
			json_t *a;
			if (!json_is_array(v) || json_array_size(v) == 0 || json_array_size(v) > SUP_API_MAX_ARGV)
				rc = sbx_err_set(err, -EINVAL, "field \"entrypoint\": want a non-empty array of strings");
			json_array_foreach(v, i, a)
				if (rc == 0 && !json_is_string(a))
					rc = sbx_err_set(err, -EINVAL, "field \"entrypoint[%zu]\": want a string", i);
			if (rc == 0)
				json_object_set(*kept, "entrypoint", v);
		} else if (strcmp(k, "timeout") == 0) {
			/* null: no expiry asked; sbx's sandboxes always have one (the default). */
			if (!json_is_null(v))
				json_object_set(sbx, "timeout", v);
		} else if (strcmp(k, "resourceLimits") == 0) {
			rc = resources(v, sbx, err);
		} else if (strcmp(k, "resourceRequests") == 0) {
			/* sbx reserves nothing ahead: a request under the limit asks nothing more */
			if (!json_is_null(v) && !json_is_object(v))
				rc = sbx_err_set(err, -EINVAL, "field \"resourceRequests\": want an object");
		} else if (strcmp(k, "env") == 0) {
			if (!json_is_null(v) && (rc = string_map(v, "env", err)) == 0)
				json_object_set(sbx, "env", v);
		} else if (strcmp(k, "metadata") == 0 || strcmp(k, "extensions") == 0) {
			if (!json_is_null(v) && (rc = string_map(v, k, err)) == 0)
				json_object_set(*kept, k, v);
		} else if (strcmp(k, "networkPolicy") == 0) {
			if (!json_is_null(v))
				rc = network(v, sbx, err);
		} else if (strcmp(k, "platform") == 0) {
			if (!json_is_null(v))
				rc = platform(v, err);
		} else if (strcmp(k, "secureAccess") == 0 || strcmp(k, "volumes") == 0 ||
			   strcmp(k, "credentialProxy") == 0) {
			if (!empty(v) && !(json_is_object(v) && json_is_false(json_object_get(v, "enabled"))))
				rc = sbx_err_set(err, -EINVAL, "field \"%s\": not supported by this server", k);
		} else {
			rc = sbx_err_set(err, -EINVAL, "unknown field \"%.64s\"", k);
		}
	}
	json_decref(j);
	if (rc == 0 && !json_object_get(sbx, "image") == !json_object_get(sbx, "snapshot"))
		rc = sbx_err_set(err, -EINVAL, "want one of \"image\" (with \"uri\") and \"snapshotId\"");
	char *s = rc == 0 ? json_dumps(sbx, JSON_COMPACT) : NULL;
	json_decref(sbx);
	if (rc == 0 && !s)
		rc = sbx_err_set(err, -ENOMEM, "out of memory");
	if (rc == 0)
		rc = sup_api_parse_create(s, strlen(s), lim, out, err);
	free(s);
	return rc;
}

const char *sup_osbx_state(const char *st)
{
	if (strcmp(st, "running") == 0)
		return "Running";
	if (strcmp(st, "creating") == 0 || strcmp(st, "ready") == 0)
		return "Creating";
	if (strcmp(st, "destroying") == 0)
		return "Deleting";
	if (strcmp(st, "paused") == 0)
		return "Paused";
	return "Error";
}

json_t *sup_osbx_sandbox_json(const sup_sandbox_view *v, const json_t *kept)
{
	char created[32], expires[32];
	sup_rfc3339(v->created_at, created, sizeof(created));
	sup_rfc3339(v->expires_at, expires, sizeof(expires));
	const char *state = sup_osbx_state(v->state);
	json_t *entry = kept ? json_object_get(kept, "entrypoint") : NULL;
	json_t *meta = kept ? json_object_get(kept, "metadata") : NULL;
	json_t *ext = kept ? json_object_get(kept, "extensions") : NULL;
	json_t *snap = kept ? json_object_get(kept, "snapshotId") : NULL;
	const char *why = v->reason ? v->reason : "";
	json_t *o = json_pack("{s:s, s:{s:s}, s:{s:s, s:s, s:s}, s:o, s:o, s:s, s:s}", "id", v->id,
			      "image", "uri", v->image, "status", "state", state, "reason",
			      strcmp(state, "Error") == 0 ? "SANDBOX_FAILED" : state, "message", why,
			      "entrypoint",
			      entry ? json_incref(entry) : json_pack("[s,s,s]", "tail", "-f", "/dev/null"),
			      "metadata", meta ? json_incref(meta) : json_object(), "createdAt", created,
			      "expiresAt", expires);
	if (o && ext)
		json_object_set(o, "extensions", ext);
	if (o && snap)
		json_object_set(o, "snapshotId", snap);
	return o;
}

json_t *sup_osbx_snapshot_json(const sup_snap_view *v)
{
	char created[32];
	sup_rfc3339((time_t)v->created_at, created, sizeof(created));
	json_t *o = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:s}", "id", v->id, "sandboxId", v->source,
			      "status", "state", "Ready", "reason", "snapshot_ready", "lastTransitionAt",
			      created, "createdAt", created);
	if (o && v->name[0])
		json_object_set_new(o, "name", json_string(v->name));
	return o;
}

static int unhex(char c)
{
	return c >= '0' && c <= '9' ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* Percent-decode p[0..n) into out (NUL-terminated; size > n). */
static int pct(const char *p, size_t n, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		if (p[i] != '%') {
			out[o++] = p[i] == '+' ? ' ' : p[i];
			continue;
		}
		if (i + 2 >= n || unhex(p[i + 1]) < 0 || unhex(p[i + 2]) < 0)
			return -EINVAL;
		out[o++] = (char)(unhex(p[i + 1]) * 16 + unhex(p[i + 2]));
		i += 2;
	}
	out[o] = '\0';
	return 0;
}

int sup_osbx_meta_match(const char *filter, const json_t *metadata)
{
	const char *p = filter;
	while (*p) {
		size_t n = strcspn(p, "&");
		const char *eq = memchr(p, '=', n);
		if (!eq || eq == p)
			return -EINVAL;
		char k[256], val[1024];
		size_t kl = (size_t)(eq - p), vl = n - kl - 1;
		if (kl >= sizeof(k) || vl >= sizeof(val) || pct(p, kl, k) < 0 || pct(eq + 1, vl, val) < 0)
			return -EINVAL;
		const char *have = json_string_value(json_object_get(metadata, k));
		if (!have || strcmp(have, val) != 0)
			return 0;
		p += n + (p[n] == '&');
	}
	return 1;
}

int sup_osbx_parse_command(const char *body, size_t len, sup_exec_spec *out, bool *background,
			   sbx_err *err)
{
	json_error_t je;
	json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(j)) {
		json_decref(j);
		return sbx_err_set(err, -EINVAL, "the body is not a JSON object: %s", je.text);
	}
	json_t *x = json_object();
	int rc = x ? 0 : sbx_err_set(err, -ENOMEM, "out of memory");
	const char *k;
	json_t *v;
	*background = false;
	json_object_foreach(j, k, v) {
		if (rc < 0)
			break;
		if (strcmp(k, "command") == 0) {
			if (!json_is_string(v) || json_string_length(v) == 0)
				rc = sbx_err_set(err, -EINVAL, "field \"command\": want a non-empty string");
			else
				json_object_set(x, "cmd", v);
		} else if (strcmp(k, "cwd") == 0) {
			if (!json_is_null(v))
				json_object_set(x, "cwd", v);
		} else if (strcmp(k, "background") == 0) {
			if (!json_is_boolean(v))
				rc = sbx_err_set(err, -EINVAL, "field \"background\": want true or false");
			*background = json_is_true(v);
		} else if (strcmp(k, "timeout") == 0) {
			if (!json_is_integer(v) || json_integer_value(v) < 1)
				rc = sbx_err_set(err, -EINVAL, "field \"timeout\": want milliseconds, at least 1");
			else
				json_object_set_new(x, "timeout", json_real((double)json_integer_value(v) / 1000.0));
		} else if (strcmp(k, "envs") == 0) {
			if (!json_is_null(v))
				json_object_set(x, "env", v);
		} else if (strcmp(k, "uid") == 0) {
			char u[24];
			if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0x7fffffff) {
				rc = sbx_err_set(err, -EINVAL, "field \"uid\": want a user id");
			} else {
				snprintf(u, sizeof(u), "%lld", (long long)json_integer_value(v));
				json_object_set_new(x, "user", json_string(u));
			}
		} else if (strcmp(k, "gid") == 0) {
			rc = sbx_err_set(err, -EINVAL, "field \"gid\": not supported (a command runs with its user's group)");
		} else {
			rc = sbx_err_set(err, -EINVAL, "unknown field \"%.64s\"", k);
		}
	}
	json_decref(j);
	if (rc == 0 && !json_object_get(x, "cmd"))
		rc = sbx_err_set(err, -EINVAL, "field \"command\": required");
	if (rc == 0)
		rc = sup_api_parse_exec_obj(x, NULL, out, err);
	json_decref(x);
	return rc;
}
