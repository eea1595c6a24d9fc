/* A request target's query string, decoded once: "%XX" is the byte XX (a
 * '%' not followed by two hex digits stays itself), '+' is a space. Keys are
 * compared as sent. Strict: only the keys a route allows, each at most once,
 * so a typo is a 400 rather than a silently ignored parameter. Values keep
 * their length: a decoded %00 is a byte of the request, not its end.
 * Pure functions; it must not know routes or sandboxes. */
#ifndef SUP_QUERY_H
#define SUP_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"

#define SUP_QUERY_MAX 16

typedef struct sup_query {
	struct {
		const char *key; /* points into the query string */
		size_t key_len;
		char *val;       /* decoded, NUL-terminated, malloc'd */
		size_t val_len;
	} p[SUP_QUERY_MAX];
	size_t n;
} sup_query;

/* s[0..n) decoded into a new NUL-terminated string (*len its length);
 * NULL without memory. */
char *sup_query_decode(const char *s, size_t n, size_t *len);

/* Parse qs (NULL or "": none). -EINVAL with err naming the parameter when
 * a key is not in allowed (NULL-terminated), comes twice or has no '=';
 * -ENOMEM. q is empty on failure. */
int sup_query_parse(const char *qs, const char *const *allowed, sup_query *q, sbx_err *err);
void sup_query_free(sup_query *q);
static inline void sup_query_freep(sup_query *q)
{
	sup_query_free(q);
}
#define SUP_AUTO_QUERY __attribute__((cleanup(sup_query_freep)))
/* The value of key (NULL: absent). */
const char *sup_query_get(const sup_query *q, const char *key, size_t *len);
/* 1/true or 0/false; def when absent; -EINVAL with err otherwise. */
int sup_query_flag(const sup_query *q, const char *key, bool def, sbx_err *err);
/* A decimal integer in lo..hi into *out (def when absent); -EINVAL. */
int sup_query_uint(const sup_query *q, const char *key, uint64_t lo, uint64_t hi, uint64_t def,
		   uint64_t *out, sbx_err *err);

#endif
