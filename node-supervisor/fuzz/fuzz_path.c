/* A request's file path under libFuzzer: the edge's decoding (sup_query),
 * the lexical normaliser (sup_path), the file policy (sup_policy) and the
 * quoting of paths for messages and logs. Input: a flags byte (decode as a
 * query value first; write or read; the tenant; the quote's room), then the
 * path's bytes. Checks, besides the sanitizers:
 * - a normalised path is absolute, has no empty, "." or ".." component and
 *   no trailing slash, is no longer than the input, and normalises to itself;
 * - an allowed path lies under the root that matched, that root is the
 *   longest of the tenant's roots holding it, a write is under a rw root,
 *   and what goes to the agent (rel) is the path below the root: relative,
 *   without "." or ".." components;
 * - a quote and a denial line are NUL-terminated within their room and
 *   printable. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sup_log.h"
#include "sup_path.h"
#include "sup_policy.h"
#include "sup_query.h"

#define CHECK(x) \
	do { \
		if (!(x)) \
			abort(); \
	} while (0)

enum { F_DECODE = 1, F_WRITE = 2, F_TENANT = 4 };

/* Roots nested and side by side, read-only inside read-write and back. */
static const char policy_json[] =
	"{\"tenants\": {"
	"\"default\": {\"paths\": [{\"root\": \"/workspace\", \"mode\": \"rw\"},"
	"  {\"root\": \"/workspace/ref\", \"mode\": \"ro\"},"
	"  {\"root\": \"/workspace/ref/scratch\", \"mode\": \"rw\"},"
	"  {\"root\": \"/tmp\", \"mode\": \"rw\"}]},"
	"\"ops\": {\"paths\": [{\"root\": \"/\", \"mode\": \"ro\"},"
	"  {\"root\": \"/var/log\", \"mode\": \"rw\"}]}}}";
static const char *const roots_default[] = { "/workspace", "/workspace/ref",
					     "/workspace/ref/scratch", "/tmp", NULL };
static const char *const roots_ops[] = { "/", "/var/log", NULL };

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

/* No empty, "." or ".." component in p[0..n) (components split on '/'). */
static bool clean_components(const char *p, size_t n)
{
	size_t i = 0;
	while (i <= n) {
		size_t s = i;
		while (i < n && p[i] != '/')
			i++;
		size_t l = i - s;
		if (l == 0 || (l == 1 && p[s] == '.') || (l == 2 && p[s] == '.' && p[s + 1] == '.'))
			return false;
		i++;
	}
	return true;
}

static void check_normal(const char *in, size_t len)
{
	char out[PATH_MAX], again[PATH_MAX];
	bool dir;
	sbx_err e = { 0 };
	int n = sup_path_normalize(in, len, out, sizeof(out), &dir, &e);
	if (n < 0) {
		CHECK((n == -EINVAL || n == -ENAMETOOLONG) && e.msg[0]);
		return;
	}
	CHECK((size_t)n <= len && strlen(out) == (size_t)n && out[0] == '/');
	if (n > 1)
		CHECK(out[n - 1] != '/' && clean_components(out + 1, (size_t)n - 1));
	int m = sup_path_normalize(out, (size_t)n, again, sizeof(again), NULL, &e);
	CHECK(m == n && memcmp(out, again, (size_t)n + 1) == 0);
}

static void check_policy(const sup_policy *p, uint8_t flags, const char *in, size_t len)
{
	static sup_policy_match m;
	bool ops = flags & F_TENANT, write = flags & F_WRITE;
	sbx_err e = { 0 };
	int rc = sup_policy_check(p, ops ? "ops" : "alice", in, len,
				  write ? SUP_POLICY_WRITE : SUP_POLICY_READ, &m, &e);
	char line[512];
	sup_policy_denial_line(line, sizeof(line), "alice", "sbx-1", "read", in, len, &e);
	CHECK(strlen(line) < sizeof(line) && printable(line));
	if (rc < 0) {
		CHECK(rc == -EINVAL || rc == -ENAMETOOLONG || rc == -EPERM);
		return;
	}
	size_t pl = strlen(m.path), rl = strlen(m.root), ll = strlen(m.rel);
	CHECK(sup_path_is_under(m.path, pl, m.root, rl));
	const char *const *roots = ops ? roots_ops : roots_default;
	for (size_t i = 0; roots[i]; i++)
		if (sup_path_is_under(m.path, pl, roots[i], strlen(roots[i])))
			CHECK(strlen(roots[i]) <= rl);
	if (write)
		CHECK(m.mode == SUP_POLICY_RW);
	CHECK(m.is_root == (pl == rl));
	CHECK(m.is_root ? ll == 0 : ll > 0);
	if (ll) {
		CHECK(m.rel[0] != '/' && clean_components(m.rel, ll) && sup_path_rel_ok(m.rel, ll));
		CHECK(memcmp(m.path + pl - ll, m.rel, ll + 1) == 0);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static sup_policy *pol;
	if (!pol) {
		sbx_err e;
		sup_log_set_level(SUP_LOG_ERROR);
		CHECK(sup_policy_load_json(policy_json, sizeof(policy_json) - 1, "fuzz", &pol, &e) == 0);
	}
	if (size < 1 || size > 2 * PATH_MAX)
		return 0;
	uint8_t flags = data[0];
	const char *in = (const char *)data + 1;
	size_t len = size - 1;
	char *decoded = NULL;
	if (flags & F_DECODE) {
		decoded = sup_query_decode(in, len, &len);
		CHECK(decoded && len <= size - 1);
		in = decoded;
	}
	check_normal(in, len);
	check_policy(pol, flags, in, len);
	char q[SUP_PATH_QUOTE_MAX];
	size_t cap = (size_t)(flags >> 3) * 7 % sizeof(q);
	sup_path_quote(in, len, q, cap);
	if (cap)
		CHECK(strlen(q) < cap && printable(q));
	free(decoded);
	return 0;
}
