/* sup_netpol_json: see sup_netpol_json.h. */
#include "sup_netpol_json.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int parse_action(json_t *v, const char *field, sup_netpol_action *out, sbx_err *err)
{
	const char *s = json_is_string(v) ? json_string_value(v) : NULL;
	if (s && strcmp(s, "allow") == 0)
		*out = SUP_NETPOL_ALLOW;
	else if (s && strcmp(s, "deny") == 0)
		*out = SUP_NETPOL_DENY;
	else
		return sbx_err_set(err, -EINVAL, "field \"%s\": want \"allow\" or \"deny\"", field);
	return 0;
}

static int parse_rule(json_t *v, size_t i, sup_netpol *p, sbx_err *err)
{
	char field[64];
	snprintf(field, sizeof(field), "network.egress[%zu]", i);
	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL, "field \"%s\": want an object {\"action\", \"target\"}",
				   field);
	json_t *action = NULL, *target = NULL;
	const char *key;
	size_t klen;
	json_t *val;
	json_object_keylen_foreach(v, key, klen, val)
	{
		if (strlen(key) == klen && strcmp(key, "action") == 0)
			action = val;
		else if (strlen(key) == klen && strcmp(key, "target") == 0)
			target = val;
		else
			return sbx_err_set(err, -EINVAL, "field \"%s\": unknown field \"%.64s\"", field,
					   key);
	}
	if (!action || !target)
		return sbx_err_set(err, -EINVAL, "field \"%s\": needs \"action\" and \"target\"", field);
	char sub[80];
	snprintf(sub, sizeof(sub), "%s.action", field);
	sup_netpol_action a = SUP_NETPOL_DENY; /* gcc -O3 cannot see parse_action set it */
	int rc = parse_action(action, sub, &a, err);
	if (rc < 0)
		return rc;
	if (!json_is_string(target) || strlen(json_string_value(target)) != json_string_length(target))
		return sbx_err_set(err, -EINVAL, "field \"%s.target\": want a string", field);
	rc = sup_netpol_add(p, a, json_string_value(target), err);
	if (rc < 0)
		return sbx_err_wrap(err, "field \"%s\"", field);
	return 0;
}

static int from_json(json_t *v, sup_netpol *out, sbx_err *err)
{
	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL,
				   "field \"network\": want an object {\"default_action\", \"egress\"}");
	json_t *def = json_object_get(v, "default_action");
	if (def && parse_action(def, "network.default_action", &out->default_action, err) < 0)
		return err->code;
	const char *key;
	size_t klen;
	json_t *val;
	json_object_keylen_foreach(v, key, klen, val)
	{
		if (strlen(key) != klen ||
		    (strcmp(key, "default_action") != 0 && strcmp(key, "egress") != 0))
			return sbx_err_set(err, -EINVAL, "field \"network\": unknown field \"%.64s\"",
					   key);
	}
	json_t *eg = json_object_get(v, "egress");
	if (!eg)
		return 0;
	if (!json_is_array(eg))
		return sbx_err_set(err, -EINVAL, "field \"network.egress\": want an array of rules");
	if (json_array_size(eg) > SUP_NETPOL_MAX_RULES)
		return sbx_err_set(err, -EINVAL, "field \"network.egress\": more than %d rules",
				   SUP_NETPOL_MAX_RULES);
	for (size_t i = 0; i < json_array_size(eg); i++) {
		int rc = parse_rule(json_array_get(eg, i), i, out, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int sup_netpol_from_json(json_t *v, sup_netpol *out, sbx_err *err)
{
	/* without a default, deny: a policy lists what it lets out */
	sup_netpol_init(out, SUP_NETPOL_DENY);
	int rc = from_json(v, out, err);
	if (rc < 0)
		sup_netpol_free(out);
	return rc;
}

int sup_netpol_parse(const char *body, size_t len, sup_netpol *out, sbx_err *err)
{
	json_error_t je;
	json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return sbx_err_set(err, -EINVAL, "malformed JSON at line %d column %d: %s", je.line,
				   je.column, je.text);
	int rc = sup_netpol_from_json(j, out, err);
	json_decref(j);
	return rc;
}

json_t *sup_netpol_to_json(const sup_netpol *p)
{
	json_t *eg = json_array();
	if (!eg)
		return NULL;
	for (size_t i = 0; i < p->n; i++) {
		char t[SUP_NETPOL_TARGET_MAX + 8];
		if (sup_netpol_format_target(&p->rules[i], t, sizeof(t)) < 0 ||
		    json_array_append_new(eg, json_pack("{s:s, s:s}", "action",
							p->rules[i].action == SUP_NETPOL_ALLOW ? "allow" : "deny",
							"target", t)) < 0) {
			json_decref(eg);
			return NULL;
		}
	}
	return json_pack("{s:s, s:o}", "default_action",
			 p->default_action == SUP_NETPOL_ALLOW ? "allow" : "deny", "egress", eg);
}

char *sup_netpol_to_text(const sup_netpol *p)
{
	json_t *j = sup_netpol_to_json(p);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return s;
}

int sup_netpol_from_text(const char *text, sup_netpol *out, sbx_err *err)
{
	return sup_netpol_parse(text, strlen(text), out, err);
}
