#include "sup_api.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/json_auto.h"
#include "sbx/proto_mcp.h"
#include "sup_netpol_json.h"
#include "sup_text.h"

static int load_object(const char *body, size_t len, json_t **out, sbx_err *err)
{
	json_error_t je;
	json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return sbx_err_set(err, -EINVAL, "malformed JSON at line %d column %d: %s", je.line,
				   je.column, je.text);
	if (!json_is_object(j)) {
		json_decref(j);
		return sbx_err_set(err, -EINVAL, "body must be a JSON object");
	}
	*out = j;
	return 0;
}

/* A JSON string without NUL bytes, copied. */
static int get_cstr(json_t *v, const char *field, bool allow_empty, size_t max, char **out,
		    sbx_err *err)
{
	if (!json_is_string(v))
		return sbx_err_set(err, -EINVAL, "field \"%s\": want a string", field);
	const char *s = json_string_value(v);
	size_t len = json_string_length(v);
	if (strlen(s) != len)
		return sbx_err_set(err, -EINVAL, "field \"%s\": contains a NUL byte", field);
	if (!allow_empty && len == 0)
		return sbx_err_set(err, -EINVAL, "field \"%s\": must not be empty", field);
	if (len > max)
		return sbx_err_set(err, -EINVAL, "field \"%s\": longer than %zu bytes", field, max);
	*out = strdup(s);
	if (!*out)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

static int parse_env(json_t *v, sup_env *out, sbx_err *err)
{
	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL, "field \"env\": want an object of strings");
	size_t n = json_object_size(v);
	if (n > SUP_API_MAX_ENV)
		return sbx_err_set(err, -EINVAL, "field \"env\": more than %d variables", SUP_API_MAX_ENV);
	if (n == 0)
		return 0;
	out->v = calloc(n, sizeof(*out->v));
	if (!out->v)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	const char *key;
	size_t klen;
	json_t *val;
	json_object_keylen_foreach(v, key, klen, val)
	{
		if (klen == 0 || strlen(key) != klen || strchr(key, '=') || klen > 1024)
			return sbx_err_set(err, -EINVAL,
					   "field \"env\": name \"%.64s\" must be 1..1024 bytes without '=' or NUL",
					   key);
		if (!json_is_string(val))
			return sbx_err_set(err, -EINVAL, "field \"env\": value of %.64s: want a string",
					   key);
		if (strlen(json_string_value(val)) != json_string_length(val))
			return sbx_err_set(err, -EINVAL, "field \"env\": value of %.64s contains a NUL byte",
					   key);
		sup_kv *kv = &out->v[out->n];
		kv->key = strdup(key);
		kv->val = strdup(json_string_value(val));
		out->n++;
		if (!kv->key || !kv->val)
			return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	return 0;
}

static bool is_json_int(json_t *v)
{
	return json_is_integer(v);
}

static int parse_mcp(json_t *v, sup_mcp_servers *out, sbx_err *err);

/* A sandbox's "timeout": whole seconds, 1..the node's most. */
static int parse_lifetime(json_t *v, const sup_api_limits *lim, unsigned *out, sbx_err *err)
{
	if (!is_json_int(v))
		return sbx_err_set(err, -EINVAL, "field \"timeout\": want an integer number of seconds");
	json_int_t t = json_integer_value(v);
	if (t < 1 || t > (json_int_t)lim->max_timeout_s)
		return sbx_err_set(err, -EINVAL, "field \"timeout\": want 1..%u seconds",
				   lim->max_timeout_s);
	*out = (unsigned)t;
	return 0;
}

int sup_api_parse_timeout(const char *body, size_t len, const sup_api_limits *lim, unsigned *out,
			  sbx_err *err)
{
	SBX_AUTO_JSON json_t *j = NULL;
	int rc = load_object(body, len, &j, err);
	if (rc < 0)
		return rc;
	json_t *v = json_object_get(j, "timeout");
	if (!v)
		return sbx_err_set(err, -EINVAL, "field \"timeout\" is required");
	if (json_object_size(j) != 1)
		return sbx_err_set(err, -EINVAL, "only field \"timeout\" is allowed");
	return parse_lifetime(v, lim, out, err);
}

int sup_api_parse_create(const char *body, size_t len, const sup_api_limits *lim,
			 sup_create_req *out, sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	out->timeout_s = lim->default_timeout_s;
	out->resources = lim->res_default;
	if (len == 0)
		return 0;
	SBX_AUTO_JSON json_t *j = NULL;
	int rc = load_object(body, len, &j, err);
	if (rc < 0)
		return rc;
	const char *key;
	size_t klen;
	json_t *v;
	json_object_keylen_foreach(j, key, klen, v)
	{
		if (strlen(key) != klen) {
			rc = sbx_err_set(err, -EINVAL, "a field name contains a NUL byte");
		} else if (strcmp(key, "image") == 0) {
			rc = get_cstr(v, "image", false, SUP_API_MAX_PATH, &out->image, err);
		} else if (strcmp(key, "isolation") == 0) {
			out->given |= SUP_CREATE_GIVEN_ISOLATION;
			if (!json_is_string(v) || sup_isolation_parse(json_string_value(v),
								      json_string_length(v),
								      &out->isolation) < 0)
				rc = sbx_err_set(err, -EINVAL,
						 "field \"isolation\": want \"runc\" or \"gvisor\"");
		} else if (strcmp(key, "timeout") == 0) {
			rc = parse_lifetime(v, lim, &out->timeout_s, err);
			out->given |= SUP_CREATE_GIVEN_TIMEOUT;
		} else if (strcmp(key, "env") == 0) {
			rc = parse_env(v, &out->env, err);
		} else if (strcmp(key, "secrets") == 0) {
			rc = sup_api_parse_secret_binds(v, &out->secrets, err);
		} else if (strcmp(key, "secret_files") == 0) {
			rc = sup_api_parse_secret_files(v, &out->secrets, err);
		} else if (strcmp(key, "resources") == 0) {
			unsigned res_given = 0;
			rc = sup_resources_from_json(v, &lim->res_default, &lim->res_max,
						     &out->resources, &res_given, err);
			out->given |= res_given;
		} else if (strcmp(key, "network") == 0) {
			out->network = malloc(sizeof(*out->network));
			rc = out->network ? sup_netpol_from_json(v, out->network, err)
					  : sbx_err_set(err, -ENOMEM, "out of memory");
			if (rc < 0) {
				free(out->network);
				out->network = NULL;
			}
		} else if (strcmp(key, "mcp") == 0) {
			rc = parse_mcp(v, &out->mcp, err);
		} else if (strcmp(key, "volumes") == 0) {
			rc = sup_api_parse_volume_mounts(v, &out->volumes, err);
		} else if (strcmp(key, "snapshot") == 0) {
			rc = get_cstr(v, "snapshot", false, SUP_API_MAX_SNAPSHOT_ID, &out->snapshot, err);
		} else {
			rc = sbx_err_set(err, -EINVAL, "unknown field \"%.64s\"", key);
		}
		if (rc < 0) {
			sup_create_req_free(out);
			return rc;
		}
	}
	return 0;
}

/* An array of at most SUP_API_MAX_ARGV strings after lead empty slots
 * (filled by the caller), NULL-terminated; *count counts the slots. */
static int parse_strings(json_t *v, const char *field, size_t lead, bool allow_none, char ***out,
			 size_t *count, sbx_err *err)
{
	if (!json_is_array(v))
		return sbx_err_set(err, -EINVAL, "field \"%s\": want an array of strings", field);
	size_t n = json_array_size(v);
	if (n == 0 && !allow_none)
		return sbx_err_set(err, -EINVAL, "field \"%s\": must not be empty", field);
	if (n > SUP_API_MAX_ARGV)
		return sbx_err_set(err, -EINVAL, "field \"%s\": more than %d elements", field, SUP_API_MAX_ARGV);
	*out = calloc(lead + n + 1, sizeof(char *));
	if (!*out)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	*count = lead;
	for (size_t i = 0; i < n; i++) {
		char name[48];
		snprintf(name, sizeof(name), "%.24s[%zu]", field, i);
		int rc = get_cstr(json_array_get(v, i), name, lead + i > 0, SIZE_MAX, &(*out)[lead + i], err);
		if (rc < 0)
			return rc;
		*count = lead + i + 1;
	}
	return 0;
}

static int parse_argv(json_t *v, sup_exec_spec *out, sbx_err *err)
{
	return parse_strings(v, "argv", 0, false, &out->x.argv, &out->x.argc, err);
}

/* One server of "mcp.servers": {"command", "args", "env", "cwd"}. */
int sup_api_parse_mcp_server(const char *name, json_t *v, sup_mcp_server *out, sbx_err *err)
{
	json_t *cmd = json_object_get(v, "command"), *args = json_object_get(v, "args");
	const char *key;
	json_t *val;
	int rc = 0;

	if (!sbx_proto_mcp_name_ok(name, strlen(name)))
		return sbx_err_set(err, -EINVAL,
				   "field \"mcp.servers\": name \"%.64s\" must be 1..%u of A-Z a-z 0-9 . _ - "
				   "(not starting with '.')", name, SBX_MCP_NAME_MAX);
	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL, "mcp server %s: want an object", name);
	json_object_foreach(v, key, val)
		if (strcmp(key, "command") != 0 && strcmp(key, "args") != 0 && strcmp(key, "env") != 0 &&
		    strcmp(key, "cwd") != 0)
			return sbx_err_set(err, -EINVAL, "mcp server %s: unknown field \"%.64s\" (command, args, env, cwd)",
					   name, key);
	out->name = strdup(name);
	if (!out->name)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	if (!cmd)
		return sbx_err_set(err, -EINVAL, "mcp server %s: field \"command\" is required", name);
	json_t *none = args ? NULL : json_array();
	rc = parse_strings(args ? args : none, "args", 1, true, &out->argv, &out->argc, err);
	json_decref(none);
	if (rc == 0)
		rc = get_cstr(cmd, "command", false, SUP_API_MAX_PATH, &out->argv[0], err);
	if (rc == 0 && json_object_get(v, "env"))
		rc = parse_env(json_object_get(v, "env"), &out->env, err);
	if (rc == 0 && json_object_get(v, "cwd"))
		rc = get_cstr(json_object_get(v, "cwd"), "cwd", false, SUP_API_MAX_PATH, &out->cwd, err);
	if (rc < 0)
		sbx_err_wrap(err, "mcp server %s", name);
	return rc;
}

static int parse_mcp(json_t *v, sup_mcp_servers *out, sbx_err *err)
{
	json_t *servers = json_object_get(v, "servers"), *val;
	const char *key;

	if (!json_is_object(v) || json_object_size(v) != 1 || !json_is_object(servers))
		return sbx_err_set(err, -EINVAL, "field \"mcp\": want {\"servers\": {NAME: {\"command\", \"args\", "
						 "\"env\", \"cwd\"}}}");
	if (json_object_size(servers) > SBX_MCP_MAX_SERVERS)
		return sbx_err_set(err, -EINVAL, "field \"mcp.servers\": more than %u servers", SBX_MCP_MAX_SERVERS);
	out->v = calloc(json_object_size(servers) + 1, sizeof(*out->v));
	if (!out->v)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	json_object_foreach(servers, key, val)
	{
		int rc = sup_api_parse_mcp_server(key, val, &out->v[out->n], err);
		out->n++;
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int parse_exec_timeout(json_t *v, uint64_t *ms, sbx_err *err)
{
	if (!json_is_number(v))
		return sbx_err_set(err, -EINVAL, "field \"timeout\": want a number of seconds");
	double t = json_number_value(v);
	if (!(t > 0) || t > SUP_API_MAX_EXEC_TIMEOUT_S)
		return sbx_err_set(err, -EINVAL, "field \"timeout\": want more than 0 and at most %.0f seconds",
				   SUP_API_MAX_EXEC_TIMEOUT_S);
	double m = ceil(t * 1000.0);
	*ms = m < 1 ? 1 : (uint64_t)m;
	return 0;
}

int sup_api_parse_bytes(json_t *v, const char *field, bool b64, uint8_t **data, size_t *len, sbx_err *err)
{
	if (!json_is_string(v))
		return sbx_err_set(err, -EINVAL, "field \"%s%s\": want a string", field, b64 ? "_b64" : "");
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	if (b64) {
		size_t bad;
		*data = sup_base64_decode(s, n, len, &bad);
		if (!*data && bad == SIZE_MAX)
			return sbx_err_set(err, -ENOMEM, "out of memory");
		if (!*data && bad == n)
			return sbx_err_set(err, -EINVAL,
					   "field \"%s_b64\": invalid base64 (length %zu is not a multiple of 4)",
					   field, n);
		if (!*data)
			return sbx_err_set(err, -EINVAL,
					   "field \"%s_b64\": invalid base64 at offset %zu (standard alphabet, padded)",
					   field, bad);
		return 0;
	}
	*data = malloc(n ? n : 1);
	if (!*data)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	memcpy(*data, s, n);
	*len = n;
	return 0;
}

static int parse_stdin(json_t *v, bool b64, sup_exec_spec *out, sbx_err *err)
{
	if (out->x.stdin_pipe)
		return sbx_err_set(err, -EINVAL, "give at most one of \"stdin\" and \"stdin_b64\"");
	int rc = sup_api_parse_bytes(v, "stdin", b64, &out->stdin_data, &out->stdin_len, err);
	if (rc == 0)
		out->x.stdin_pipe = true;
	return rc;
}

/* "0644", "644": octal, no setuid, setgid or sticky bit. */
int sup_api_parse_mode(const char *s, uint64_t *mode)
{
	size_t n = strlen(s);
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++)
		v = s[i] >= '0' && s[i] <= '7' ? v * 8 + (uint64_t)(s[i] - '0') : 01000;
	if (n == 0 || n > 4 || v > 0777)
		return -EINVAL;
	*mode = v;
	return 0;
}

static int parse_rlimits(json_t *v, sup_exec_spec *out, sbx_err *err)
{
	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL,
				   "field \"rlimits\": want an object of nofile, nproc, fsize, cpu");
	const char *key;
	json_t *val;
	json_object_foreach(v, key, val)
	{
		int id = -1;
		for (int i = 0; i < SBX_RLIMITS; i++)
			if (strcmp(key, sbx_proto_rlimit_names[i]) == 0)
				id = i;
		if (id < 0)
			return sbx_err_set(err, -EINVAL,
					   "field \"rlimits\": unknown limit \"%.32s\" (nofile, nproc, fsize, cpu)",
					   key);
		sbx_proto_rlimit *r = &out->x.rlimits[id];
		if (json_is_string(val) && strcmp(json_string_value(val), "unlimited") == 0) {
			r->unlimited = true;
		} else if (json_is_integer(val) && json_integer_value(val) >= 0) {
			r->value = (uint64_t)json_integer_value(val);
		} else {
			return sbx_err_set(err, -EINVAL,
					   "field \"rlimits\": %s: want a non-negative integer or \"unlimited\"",
					   key);
		}
		r->set = true;
	}
	return 0;
}

static int parse_pty(json_t *v, sup_exec_spec *out, sbx_err *err)
{
	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL, "field \"pty\": want {\"cols\":80,\"rows\":24}");
	out->x.cols = 80;
	out->x.rows = 24;
	const char *key;
	json_t *val;
	json_object_foreach(v, key, val)
	{
		uint16_t *dst = strcmp(key, "cols") == 0 ? &out->x.cols
				: strcmp(key, "rows") == 0 ? &out->x.rows
							   : NULL;
		if (!dst)
			return sbx_err_set(err, -EINVAL, "field \"pty\": unknown field \"%.32s\" (cols, rows)",
					   key);
		if (!json_is_integer(val) || json_integer_value(val) < 1 ||
		    json_integer_value(val) > 65535)
			return sbx_err_set(err, -EINVAL, "field \"pty\": %s: want 1..65535", key);
		*dst = (uint16_t)json_integer_value(val);
	}
	out->x.pty = true;
	return 0;
}

static int parse_max_output(json_t *v, sup_exec_spec *out, sbx_err *err)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (unsigned long long)json_integer_value(v) > SUP_API_MAX_OUTPUT)
		return sbx_err_set(err, -EINVAL, "field \"max_output\": want 0..%llu bytes",
				   (unsigned long long)SUP_API_MAX_OUTPUT);
	out->max_output = (size_t)json_integer_value(v);
	out->max_output_set = true;
	return 0;
}

static bool skipped(const char *key, const char *const *skip)
{
	for (size_t i = 0; skip && skip[i]; i++)
		if (strcmp(skip[i], key) == 0)
			return true;
	return false;
}

int sup_api_parse_exec_obj(json_t *j, const char *const *skip, sup_exec_spec *out, sbx_err *err)
{
	const char *key;
	size_t klen;
	json_t *v;
	int rc = 0;
	memset(out, 0, sizeof(*out));
	json_object_keylen_foreach(j, key, klen, v)
	{
		if (strlen(key) != klen)
			rc = sbx_err_set(err, -EINVAL, "a field name contains a NUL byte");
		else if (skipped(key, skip))
			continue;
		else if (strcmp(key, "argv") == 0)
			rc = parse_argv(v, out, err);
		else if (strcmp(key, "cmd") == 0)
			rc = get_cstr(v, "cmd", false, SIZE_MAX, &out->x.cmd, err);
		else if (strcmp(key, "env") == 0)
			rc = parse_env(v, &out->x.env, err);
		else if (strcmp(key, "cwd") == 0) {
			rc = get_cstr(v, "cwd", false, SUP_API_MAX_PATH, &out->x.cwd, err);
			if (rc == 0 && out->x.cwd[0] != '/')
				rc = sbx_err_set(err, -EINVAL, "field \"cwd\": want an absolute path");
		} else if (strcmp(key, "timeout") == 0)
			rc = parse_exec_timeout(v, &out->x.timeout_ms, err);
		else if (strcmp(key, "stdin") == 0 || strcmp(key, "stdin_b64") == 0)
			rc = parse_stdin(v, key[5] == '_', out, err);
		else if (strcmp(key, "user") == 0)
			rc = get_cstr(v, "user", false, SUP_API_MAX_USER, &out->x.user, err);
		else if (strcmp(key, "rlimits") == 0)
			rc = parse_rlimits(v, out, err);
		else if (strcmp(key, "max_output") == 0)
			rc = parse_max_output(v, out, err);
		else if (strcmp(key, "pty") == 0)
			rc = parse_pty(v, out, err);
		else
			rc = sbx_err_set(err, -EINVAL, "unknown field \"%.64s\"", key);
		if (rc < 0)
			goto fail;
	}
	if (!out->x.argv == !out->x.cmd) {
		rc = sbx_err_set(err, -EINVAL, "exactly one of \"argv\" and \"cmd\" is required");
		goto fail;
	}
	return 0;
fail:
	sup_exec_spec_free(out);
	return rc;
}

/* POST .../processes: exec's body and its own fields. */
int sup_api_parse_process_start(json_t *j, sup_exec_spec *spec, sbx_proto_args *args, sbx_err *err)
{
	static const char *const extras[] = { "tag", "buffer", "stdin", NULL };
	if (!json_is_object(j))
		return sbx_err_set(err, -EINVAL, "want a JSON object");
	json_t *tag = json_object_get(j, "tag");
	json_t *buf = json_object_get(j, "buffer");
	json_t *sin = json_object_get(j, "stdin");
	if (json_object_get(j, "max_output") || json_object_get(j, "stdin_b64"))
		return sbx_err_set(err, -EINVAL,
				   "max_output and stdin_b64 do not apply to background processes (see buffer; stdin: true and POST .../stdin)");
	if (sin && !json_is_boolean(sin))
		return sbx_err_set(err, -EINVAL,
				   "field \"stdin\": want true (then write with POST .../stdin) or false");
	if (tag && !json_is_null(tag) && (!json_is_string(tag) || json_string_length(tag) > SUP_API_MAX_TAG))
		return sbx_err_set(err, -EINVAL, "field \"tag\": want a string of at most 256 bytes");
	if (buf && (!json_is_integer(buf) || json_integer_value(buf) < 4096 ||
		    json_integer_value(buf) > 67108864))
		return sbx_err_set(err, -EINVAL, "field \"buffer\": want 4096..67108864 (bytes)");
	int rc = sup_api_parse_exec_obj(j, extras, spec, err);
	if (rc < 0)
		return rc;
	spec->x.stdin_pipe = sin && json_is_true(sin);
	if (json_is_string(tag))
		sbx_proto_args_str(args, "tag", json_string_value(tag), json_string_length(tag));
	if (buf)
		sbx_proto_args_uint(args, "buffer", (uint64_t)json_integer_value(buf));
	return 0;
}

int sup_api_parse_exec(const char *body, size_t len, sup_exec_spec *out, sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	if (len == 0)
		return sbx_err_set(err, -EINVAL, "body must be a JSON object with \"argv\" or \"cmd\"");
	SBX_AUTO_JSON json_t *j = NULL;
	int rc = load_object(body, len, &j, err);
	return rc < 0 ? rc : sup_api_parse_exec_obj(j, NULL, out, err);
}

json_t *sup_api_render_sandbox(const sup_sandbox_view *v)
{
	char created[32], expires[32];
	sup_rfc3339(v->created_at, created, sizeof(created));
	sup_rfc3339(v->expires_at, expires, sizeof(expires));
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I}, s:o}", "id",
			      v->id, "state", v->state, "image", v->image, "isolation",
			      sup_isolation_names[v->isolation], "created_at", created,
			      "expires_at", expires, "agent", "streams", (json_int_t)v->agent_streams,
			      "waiting", (json_int_t)v->agent_waiting, "queued_bytes",
			      (json_int_t)v->agent_queued, "timeouts", (json_int_t)v->agent_timeouts,
			      "resources", sup_resources_to_json(&v->resources));
	if (o && v->network) {
		/* a NULL value (out of memory) is refused, and a refused value freed */
		if (json_object_set_new_nocheck(o, "network", sup_netpol_to_json(v->network)) < 0 ||
		    json_object_set_new_nocheck(o, "addresses", json_pack("[s, s]", v->addr4, v->addr6)) < 0) {
			json_decref(o);
			o = NULL;
		}
	}
	if (o && v->reason) {
		/* the reason may quote what the guest sent */
		size_t n;
		char *t = sup_utf8_repair((const uint8_t *)v->reason, strlen(v->reason), &n);
		if (!t || json_object_set_new_nocheck(o, "reason", json_stringn_nocheck(t, n)) < 0) {
			json_decref(o);
			o = NULL;
		}
		free(t);
	}
	if (o && v->has_usage && json_object_set_new(o, "usage", sup_usage_to_json(&v->usage)) < 0) {
		json_decref(o);
		o = NULL;
	}
	if (o && v->nvolumes &&
	    json_object_set_new(o, "volumes", sup_api_render_volume_mounts(v->volumes, v->nvolumes)) < 0) {
		json_decref(o);
		o = NULL;
	}
	if (o && v->secrets &&
	    json_object_set_new(o, "secrets", sup_api_render_secret_binds(v->secrets)) < 0) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

/* exit_code / signal, duration_ms, timed_out, oom_killed. */
static int add_status(json_t *o, const sup_exec_status *st)
{
	char sig[32];
	int rc = 0;
	if (st->exited) {
		rc |= json_object_set_new_nocheck(o, "exit_code", json_integer(st->exit_code));
		rc |= json_object_set_new_nocheck(o, "signal", json_null());
	} else {
		sup_signal_name(st->signal, sig, sizeof(sig));
		rc |= json_object_set_new_nocheck(o, "exit_code", json_null());
		rc |= json_object_set_new_nocheck(o, "signal", json_string(sig));
	}
	rc |= json_object_set_new_nocheck(
		o, "duration_ms", json_integer((json_int_t)((st->duration_us + 500) / 1000)));
	rc |= json_object_set_new_nocheck(o, "timed_out", json_boolean(st->timed_out));
	rc |= json_object_set_new_nocheck(o, "oom_killed", json_boolean(st->oom_killed));
	if (st->has_rusage)
		rc |= json_object_set_new_nocheck(
			o, "rusage",
			json_pack("{s:I, s:I, s:I}", "max_rss_kb", (json_int_t)st->max_rss_kb, "user_ms",
				  (json_int_t)st->user_ms, "sys_ms", (json_int_t)st->sys_ms));
	return rc;
}

json_t *sup_api_render_exec(const sup_exec_result *r)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	int rc = add_status(o, &r->st);
	rc |= sup_api_set_bytes(o, "stdout", (const char *)r->out, r->out_len);
	rc |= sup_api_set_bytes(o, "stderr", (const char *)r->err, r->err_len);
	rc |= json_object_set_new_nocheck(o, "truncated",
					  json_boolean(r->out_truncated || r->err_truncated));
	if (r->st.kill_unconfirmed)
		rc |= json_object_set_new_nocheck(o, "kill_confirmed", json_false());
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *sup_api_render_exit(const sup_exec_status *st, uint64_t out_bytes, uint64_t err_bytes)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	int rc = add_status(o, st);
	rc |= json_object_set_new_nocheck(o, "stdout_bytes", json_integer((json_int_t)out_bytes));
	rc |= json_object_set_new_nocheck(o, "stderr_bytes", json_integer((json_int_t)err_bytes));
	if (rc) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *sup_api_render_pool(const sup_pool_stats *s)
{
	return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:{s:I, s:I, s:s}}", "image", s->image,
			 "isolation", sup_isolation_names[s->isolation], "size", (json_int_t)s->size,
			 "target", (json_int_t)s->target, "ready", (json_int_t)s->ready, "creating",
			 (json_int_t)s->creating, "waiting", (json_int_t)s->waiting, "sizing", "max",
			 (json_int_t)s->max, "peak", (json_int_t)s->peak, "why",
			 s->why ? s->why : "size");
}

json_t *sup_api_render_snapshot(const sup_snap_view *v)
{
	/* the volumes it carries: where the source mounted each, how, and the
	 * size of the volume a restore makes */
	json_t *vols = json_array();
	for (unsigned i = 0; vols && i < v->nvols; i++)
		json_array_append_new(vols, json_pack("{s:s, s:s, s:b, s:I, s:I}", "name",
						      v->vols[i].m.name, "mount", v->vols[i].m.path,
						      "read_only", v->vols[i].m.read_only, "size",
						      (json_int_t)v->vols[i].vol_size, "archive_size",
						      (json_int_t)v->vols[i].size));
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:o*}", "id", v->id, "name",
			 v->name, "tenant", v->tenant, "sandbox", v->source, "image", v->image,
			 "digest", v->digest, "isolation", sup_isolation_names[v->isolation], "size",
			 (json_int_t)v->size, "created_at", (json_int_t)v->created_at, "volumes", vols);
}

int sup_api_parse_include_volumes(const json_t *v, bool *out, sbx_err *err)
{
	if (v && !json_is_boolean(v))
		return sbx_err_set(err, -EINVAL, "field \"include_volumes\": want true or false");
	*out = v && json_is_true(v);
	return 0;
}

int sup_api_parse_snapshot_name(const json_t *name, char out[SUP_SNAPS_NAME_MAX + 1], sbx_err *err)
{
	if (name && (!json_is_string(name) || json_string_length(name) > SUP_SNAPS_NAME_MAX ||
		     strlen(json_string_value(name)) != json_string_length(name)))
		return sbx_err_set(err, -EINVAL, "field \"name\": want a string of at most %d bytes",
				   SUP_SNAPS_NAME_MAX);
	snprintf(out, SUP_SNAPS_NAME_MAX + 1, "%s", name ? json_string_value(name) : "");
	return 0;
}
