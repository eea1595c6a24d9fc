/* sup_resources: see sup_resources.h. */
#include "sup_resources.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "sup_text.h"

#define SPEC_MAX 256

enum field { F_CPUS, F_MEMORY, F_PIDS, F_DISK, F_N };
static const char *const field_names[F_N] = { "cpus", "memory", "pids", "disk" };

void sup_resources_default(sup_resources *r)
{
	r->cpu_milli = 1000;
	r->memory = 1ull << 30;
	r->pids = 1024;
	r->disk = 10ull << 30;
}

void sup_resources_format_cpus(uint32_t milli, char *buf, size_t size)
{
	if (milli % 1000 == 0)
		snprintf(buf, size, "%" PRIu32, milli / 1000);
	else if (milli % 100 == 0)
		snprintf(buf, size, "%" PRIu32 ".%" PRIu32, milli / 1000, milli % 1000 / 100);
	else if (milli % 10 == 0)
		snprintf(buf, size, "%" PRIu32 ".%02" PRIu32, milli / 1000, milli % 1000 / 10);
	else
		snprintf(buf, size, "%" PRIu32 ".%03" PRIu32, milli / 1000, milli % 1000);
}

void sup_resources_format_size(uint64_t bytes, char *buf, size_t size)
{
	static const char units[] = "GMK";
	for (int i = 0; i < 3; i++) {
		unsigned shift = (unsigned)(30 - 10 * i);
		if (bytes && bytes % (1ull << shift) == 0) {
			snprintf(buf, size, "%" PRIu64 "%c", bytes >> shift, units[i]);
			return;
		}
	}
	snprintf(buf, size, "%" PRIu64, bytes);
}

/* The figure of field f as text, for messages. */
static void format_field(const sup_resources *r, enum field f, char *buf, size_t size)
{
	switch (f) {
	case F_CPUS:
		sup_resources_format_cpus(r->cpu_milli, buf, size);
		return;
	case F_MEMORY:
		sup_resources_format_size(r->memory, buf, size);
		return;
	case F_PIDS:
		snprintf(buf, size, "%" PRIu32, r->pids);
		return;
	default:
		sup_resources_format_size(r->disk, buf, size);
		return;
	}
}

static uint64_t field_value(const sup_resources *r, enum field f)
{
	switch (f) {
	case F_CPUS:
		return r->cpu_milli;
	case F_MEMORY:
		return r->memory;
	case F_PIDS:
		return r->pids;
	default:
		return r->disk;
	}
}

static uint64_t field_min(enum field f)
{
	static const uint64_t mins[F_N] = { SUP_RES_MIN_CPU_MILLI, SUP_RES_MIN_MEMORY,
					    SUP_RES_MIN_PIDS, SUP_RES_MIN_DISK };
	return mins[f];
}

static uint64_t field_max(enum field f)
{
	static const uint64_t maxs[F_N] = { SUP_RES_MAX_CPU_MILLI, SUP_RES_MAX_BYTES,
					    SUP_RES_MAX_PIDS, SUP_RES_MAX_BYTES };
	return maxs[f];
}

static void set_field(sup_resources *r, enum field f, uint64_t v)
{
	switch (f) {
	case F_CPUS:
		r->cpu_milli = (uint32_t)v;
		return;
	case F_MEMORY:
		r->memory = v;
		return;
	case F_PIDS:
		r->pids = (uint32_t)v;
		return;
	default:
		r->disk = v;
		return;
	}
}

/* The floor and the absolute bound of field f. */
/* Fields are named in messages as <what><name><end>: "--max-resources
 * memory", "field \"resources.memory\"". given: the figure as the caller
 * wrote it (a value past the bounds is stored saturated). */
static int check_bounds(const char *what, const char *end, const char *given,
			const sup_resources *r, enum field f, sbx_err *err)
{
	uint64_t v = field_value(r, f);
	bool low = v < field_min(f);
	if (!low && v <= field_max(f))
		return 0;
	sup_resources b = *r;
	set_field(&b, f, low ? field_min(f) : field_max(f));
	char have[32], bound[32];
	if (given)
		snprintf(have, sizeof(have), "%.24s", given);
	else
		format_field(r, f, have, sizeof(have));
	format_field(&b, f, bound, sizeof(bound));
	return sbx_err_set(err, -EINVAL, "%s%s%s: %s is %s %s", what, field_names[f], end, have,
			   low ? "under the floor of" : "over the most of", bound);
}

static int check_max(const char *what, const char *end, const sup_resources *r,
		     const sup_resources *max, sbx_err *err)
{
	for (int f = 0; f < F_N; f++) {
		if (field_value(r, (enum field)f) <= field_value(max, (enum field)f))
			continue;
		char have[32], most[32];
		format_field(r, (enum field)f, have, sizeof(have));
		format_field(max, (enum field)f, most, sizeof(most));
		return sbx_err_set(err, -EINVAL, "%s%s%s: %s is over this supervisor's ceiling of %s",
				   what, field_names[f], end, have, most);
	}
	return 0;
}

int sup_resources_check_max(const char *what, const sup_resources *r, const sup_resources *max,
			    sbx_err *err)
{
	return check_max(what, "", r, max, err);
}

/* "1", "0.5", "2.125": at most three decimals. */
static int parse_cpus_text(const char *s, uint32_t *milli)
{
	uint64_t whole = 0, frac = 0;
	unsigned digits = 0, fdigits = 0;
	const char *p = s;
	/* too many is reported by check_bounds: saturate just above it */
	for (; *p >= '0' && *p <= '9'; p++, digits++)
		if (whole <= SUP_RES_MAX_CPU_MILLI / 1000)
			whole = whole * 10 + (uint64_t)(*p - '0');
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++, fdigits++) {
			if (fdigits == 3)
				return -EINVAL;
			frac = frac * 10 + (uint64_t)(*p - '0');
		}
		if (fdigits == 0)
			return -EINVAL;
	}
	if (*p || digits == 0)
		return -EINVAL;
	for (unsigned i = fdigits; i < 3; i++)
		frac *= 10;
	uint64_t v = whole * 1000 + frac;
	*milli = (uint32_t)(v > SUP_RES_MAX_CPU_MILLI ? SUP_RES_MAX_CPU_MILLI + 1 : v);
	return 0;
}

static int set_from_text(const char *what, enum field f, const char *val, sup_resources *r,
			 sbx_err *err)
{
	uint64_t v = 0;
	switch (f) {
	case F_CPUS:
		if (parse_cpus_text(val, &r->cpu_milli) < 0)
			return sbx_err_set(err, -EINVAL,
					   "%scpus: '%.32s' is not a number of CPUs (like 0.5 or 2, at most three decimals)",
					   what, val);
		break;
	case F_PIDS:
		if (val[0] < '0' || val[0] > '9' || strspn(val, "0123456789") != strlen(val) ||
		    strlen(val) > 9)
			return sbx_err_set(err, -EINVAL, "%spids: '%.32s' is not a whole number", what,
					   val);
		sscanf(val, "%" SCNu64, &v);
		if (v > SUP_RES_MAX_PIDS)
			v = (uint64_t)SUP_RES_MAX_PIDS + 1; /* reported by check_bounds */
		r->pids = (uint32_t)v;
		break;
	default:
		if (sup_parse_size(val, SUP_RES_MAX_BYTES, &v, err) < 0)
			return sbx_err_wrap(err, "%s%s", what, field_names[f]);
		set_field(r, f, v);
		break;
	}
	return check_bounds(what, "", val, r, f, err);
}

static int field_of(const char *name, size_t len)
{
	for (int f = 0; f < F_N; f++)
		if (strlen(field_names[f]) == len && memcmp(field_names[f], name, len) == 0)
			return f;
	return -1;
}

int sup_resources_parse_spec(const char *flag, const char *spec, sup_resources *r, sbx_err *err)
{
	char buf[SPEC_MAX], what[64];
	snprintf(what, sizeof(what), "%s ", flag);
	if (strlen(spec) >= sizeof(buf))
		return sbx_err_set(err, -EINVAL, "%s: longer than %d characters", flag, SPEC_MAX - 1);
	if (!spec[0])
		return sbx_err_set(err, -EINVAL, "%s: empty (want cpus=1,memory=1G,pids=1024,disk=10G)",
				   flag);
	memcpy(buf, spec, strlen(spec) + 1);
	sup_resources out = *r;
	unsigned seen = 0;
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		int f = eq ? field_of(tok, (size_t)(eq - tok)) : -1;
		if (f < 0)
			return sbx_err_set(err, -EINVAL,
					   "%s: '%.32s' is not key=value with a key of cpus, memory, pids, disk",
					   flag, tok);
		if (seen & (1u << f))
			return sbx_err_set(err, -EINVAL, "%s: %s given twice", flag, field_names[f]);
		seen |= 1u << f;
		int rc = set_from_text(what, (enum field)f, eq + 1, &out, err);
		if (rc < 0)
			return rc;
	}
	if (!seen)
		return sbx_err_set(err, -EINVAL, "%s: empty (want cpus=1,memory=1G,pids=1024,disk=10G)",
				   flag);
	*r = out;
	return 0;
}

/* Field f's figure from a JSON value, unbounded but saturated past the
 * absolute bound; name is how messages call it ("field \"resources.cpus\""). */
static int figure_from_json(enum field f, const json_t *v, const char *name, uint64_t *out,
			    sbx_err *err)
{
	switch (f) {
	case F_CPUS: {
		if (!json_is_number(v))
			return sbx_err_set(err, -EINVAL, "%s: want a number of CPUs, like 0.5", name);
		double x = json_number_value(v) * 1000.0;
		if (!(x >= 0))
			x = 0;
		else if (x > (double)SUP_RES_MAX_BYTES)
			x = (double)SUP_RES_MAX_BYTES;
		*out = (uint64_t)llround(x);
		return 0;
	}
	case F_PIDS: {
		if (!json_is_integer(v))
			return sbx_err_set(err, -EINVAL, "%s: want a whole number", name);
		json_int_t n = json_integer_value(v);
		*out = n < 0 ? 0 : (uint64_t)n > SUP_RES_MAX_BYTES ? SUP_RES_MAX_BYTES + 1 : (uint64_t)n;
		return 0;
	}
	default:
		if (json_is_integer(v)) {
			json_int_t n = json_integer_value(v);
			*out = n < 0 ? 0 : (uint64_t)n > SUP_RES_MAX_BYTES ? SUP_RES_MAX_BYTES + 1 : (uint64_t)n;
			return 0;
		}
		if (json_is_string(v)) {
			const char *s = json_string_value(v);
			sbx_err e;
			if (strlen(s) != json_string_length(v) || json_string_length(v) > 32 ||
			    sup_parse_size(s, SUP_RES_MAX_BYTES, out, &e) < 0)
				return sbx_err_set(err, -EINVAL,
						   "%s: '%.32s' is not a size (bytes, or with K, M, G: 512M)",
						   name, s);
			return 0;
		}
		return sbx_err_set(err, -EINVAL,
				   "%s: want a size, a string like \"512M\" or a number of bytes", name);
	}
}

static int set_from_json(enum field f, const json_t *v, sup_resources *r, sbx_err *err)
{
	char name[48], given[40];
	snprintf(name, sizeof(name), "field \"resources.%s\"", field_names[f]);
	if (json_is_string(v))
		snprintf(given, sizeof(given), "%.32s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(given, sizeof(given), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else
		snprintf(given, sizeof(given), "%g", json_number_value(v));
	uint64_t x = 0;
	int rc = figure_from_json(f, v, name, &x, err);
	if (rc < 0)
		return rc;
	/* out of range is reported by check_bounds */
	if (x > field_max(f))
		x = field_max(f) + 1;
	set_field(r, f, x);
	return check_bounds("field \"resources.", "\"", given, r, f, err);
}

int sup_resources_total_from_json(const char *key, const json_t *v, const char *name,
				  uint64_t *out, sbx_err *err)
{
	int f = field_of(key, strlen(key));
	if (f < 0)
		return sbx_err_set(err, -EINVAL, "%s: no such figure", name);
	int rc = figure_from_json((enum field)f, v, name, out, err);
	if (rc < 0)
		return rc;
	if (*out > SUP_RES_MAX_BYTES)
		return sbx_err_set(err, -EINVAL, "%s: over the most of %llu", name,
				   (unsigned long long)SUP_RES_MAX_BYTES);
	return 0;
}

int sup_resources_from_json(const json_t *v, const sup_resources *def, const sup_resources *max,
			    sup_resources *out, unsigned *given, sbx_err *err)
{
	unsigned seen = 0;
	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL,
				   "field \"resources\": want an object of cpus, memory, pids, disk");
	sup_resources r = *def;
	const char *key;
	size_t klen;
	json_t *val;
	json_object_keylen_foreach((json_t *)v, key, klen, val)
	{
		int f = strlen(key) == klen ? field_of(key, klen) : -1;
		if (f < 0)
			return sbx_err_set(err, -EINVAL,
					   "field \"resources\": unknown key \"%.32s\" (cpus, memory, pids, disk)",
					   key);
		int rc = set_from_json((enum field)f, val, &r, err);
		if (rc < 0)
			return rc;
		seen |= 1u << f;
	}
	int rc = check_max("field \"resources.", "\"", &r, max, err);
	if (rc < 0)
		return rc;
	*out = r;
	if (given)
		*given = seen;
	return 0;
}

void sup_resources_take(sup_resources *dst, const sup_resources *src, unsigned which)
{
	for (int f = 0; f < F_N; f++)
		if (which & (1u << f))
			set_field(dst, (enum field)f, field_value(src, (enum field)f));
}

json_t *sup_resources_to_json(const sup_resources *r)
{
	return json_pack("{s:f, s:I, s:I, s:I}", "cpus", (double)r->cpu_milli / 1000.0, "memory",
			 (json_int_t)r->memory, "pids", (json_int_t)r->pids, "disk",
			 (json_int_t)r->disk);
}

static json_t *known_int(const sup_usage *u, unsigned bit, uint64_t v)
{
	return (u->known & bit) ? json_integer((json_int_t)(v > INT64_MAX ? INT64_MAX : v)) : json_null();
}

json_t *sup_usage_to_json(const sup_usage *u)
{
	json_t *cpu = (u->known & SUP_USAGE_CPU) ? json_real((double)u->cpu_ns / 1e9) : json_null();
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "memory_bytes",
			 known_int(u, SUP_USAGE_MEMORY, u->memory), "memory_peak_bytes",
			 known_int(u, SUP_USAGE_MEMORY_PEAK, u->memory_peak), "cpu_seconds", cpu,
			 "pids", known_int(u, SUP_USAGE_PIDS, u->pids), "disk_bytes",
			 known_int(u, SUP_USAGE_DISK, u->disk), "oom_kills",
			 known_int(u, SUP_USAGE_OOM_KILLS, u->oom_kills));
}
