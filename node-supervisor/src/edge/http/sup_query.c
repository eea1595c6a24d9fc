#include "sup_query.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sup_httpin_parse.h"

char *sup_query_decode(const char *s, size_t n, size_t *len)
{
	char *out = malloc(n + 1);
	size_t o = 0;
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		int hi = i + 2 < n ? sup_httpin_hexval((uint8_t)s[i + 1]) : -1;
		int lo = i + 2 < n ? sup_httpin_hexval((uint8_t)s[i + 2]) : -1;
		if (s[i] == '%' && hi >= 0 && lo >= 0) {
			out[o++] = (char)(hi * 16 + lo);
			i += 2;
		} else {
			out[o++] = s[i] == '+' ? ' ' : s[i];
		}
	}
	out[o] = '\0';
	*len = o;
	return out;
}

void sup_query_free(sup_query *q)
{
	for (size_t i = 0; i < q->n; i++)
		free(q->p[i].val);
	q->n = 0;
}

static bool key_in(const char *k, size_t kl, const char *const *allowed)
{
	for (size_t i = 0; allowed && allowed[i]; i++)
		if (strlen(allowed[i]) == kl && memcmp(allowed[i], k, kl) == 0)
			return true;
	return false;
}

int sup_query_parse(const char *qs, const char *const *allowed, sup_query *q, sbx_err *err)
{
	q->n = 0;
	while (qs && *qs) {
		size_t seg = strcspn(qs, "&"), kl = strcspn(qs, "=&");
		const char *why = NULL;
		if (seg == 0) {
			qs++;
			continue;
		}
		if (!key_in(qs, kl, allowed))
			why = "unknown";
		else if (kl == seg)
			why = "without a value";
		for (size_t i = 0; !why && i < q->n; i++)
			if (q->p[i].key_len == kl && memcmp(q->p[i].key, qs, kl) == 0)
				why = "given twice";
		if (!why && q->n == SUP_QUERY_MAX)
			why = "one too many";
		if (why) {
			sup_query_free(q);
			return sbx_err_set(err, -EINVAL, "query parameter \"%.*s\" is %s",
					   (int)(kl > 40 ? 40 : kl), qs, why);
		}
		q->p[q->n].key = qs;
		q->p[q->n].key_len = kl;
		q->p[q->n].val = sup_query_decode(qs + kl + 1, seg - kl - 1, &q->p[q->n].val_len);
		if (!q->p[q->n].val) {
			sup_query_free(q);
			return sbx_err_set(err, -ENOMEM, "out of memory");
		}
		q->n++;
		qs += seg;
		if (*qs == '&')
			qs++;
	}
	return 0;
}

const char *sup_query_get(const sup_query *q, const char *key, size_t *len)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i < q->n; i++) {
		if (q->p[i].key_len == kl && memcmp(q->p[i].key, key, kl) == 0) {
			if (len)
				*len = q->p[i].val_len;
			return q->p[i].val;
		}
	}
	return NULL;
}

int sup_query_flag(const sup_query *q, const char *key, bool def, sbx_err *err)
{
	const char *v = sup_query_get(q, key, NULL);
	if (!v)
		return def;
	if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0)
		return 1;
	if (strcmp(v, "0") == 0 || strcmp(v, "false") == 0)
		return 0;
	return sbx_err_set(err, -EINVAL, "query parameter \"%s\": want 0 or 1", key);
}

int sup_query_uint(const sup_query *q, const char *key, uint64_t lo, uint64_t hi, uint64_t def,
		   uint64_t *out, sbx_err *err)
{
	size_t len;
	const char *v = sup_query_get(q, key, &len);
	uint64_t x = 0;
	*out = def;
	if (!v)
		return 0;
	bool ok = len > 0 && len <= 19;
	for (size_t i = 0; ok && i < len; i++) {
		ok = v[i] >= '0' && v[i] <= '9';
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	if (!ok || x < lo || x > hi)
		return sbx_err_set(err, -EINVAL, "query parameter \"%s\": want an integer %llu..%llu",
				   key, (unsigned long long)lo, (unsigned long long)hi);
	*out = x;
	return 0;
}
