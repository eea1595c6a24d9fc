/* The file access policy (sup_policy) and the lexical path rules under it
 * (sup_path): normalisation, component-wise roots, the policy file and its
 * errors, the hostile corpus shared with the agent's test, and the denial
 * log line. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>


#include "corpus.h"
#include "sbx/cleanup.h"
#include "sup_path.h"
#include "sup_policy.h"
#include "sup_query.h"

#define S(s) (s), sizeof(s) - 1

/* A temporary folder per test, removed by the teardown even when the test
 * failed. */
static int make_tmp(void **state)
{
	char *dir = strdup("/tmp/sbx-policy-XXXXXX");
	if (!dir || !mkdtemp(dir)) {
		free(dir);
		return -1;
	}
	*state = dir;
	return 0;
}

static int remove_tmp(void **state)
{
	char *dir = *state;
	char cmd[PATH_MAX + 32];
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
	int r = system(cmd);
	free(dir);
	return r == 0 ? 0 : -1;
}

static bool printable_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

/* ---- sup_path ---- */

static void test_normalize_table(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out;
		bool dir;
	} ok[] = {
		{ "/", "/", true },
		{ "//", "/", true },
		{ "/a/b", "/a/b", false },
		{ "/a/b/", "/a/b", true },
		{ "/a/./b", "/a/b", false },
		{ "/a/../b", "/b", false },
		{ "/..", "/", true },
		{ "/../../a", "/a", false },
		{ "/a/b/..", "/a", true },
		{ "/a/b/.", "/a/b", true },
		{ "/a//b///c", "/a/b/c", false },
		{ "/...", "/...", false },
		{ "/a/..b/c..", "/a/..b/c..", false },
		{ "/.a/.", "/.a", true },
		{ "/a/b/../../../..", "/", true },
		{ "/workspace/a/../../workspace2", "/workspace2", false },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		char out[PATH_MAX];
		bool dir = !ok[i].dir;
		sbx_err e;
		int n = sup_path_normalize(ok[i].in, strlen(ok[i].in), out, sizeof(out), &dir, &e);
		if (n < 0 || strcmp(out, ok[i].out) != 0 || dir != ok[i].dir)
			fail_msg("%s: got %d %s dir=%d, want %s dir=%d", ok[i].in, n,
				 n < 0 ? e.msg : out, dir, ok[i].out, ok[i].dir);
		assert_int_equal(n, strlen(ok[i].out));
	}
}

static void test_normalize_errors(void **state)
{
	(void)state;
	char out[PATH_MAX];
	sbx_err e;
	assert_int_equal(sup_path_normalize(S(""), out, sizeof(out), NULL, &e), -EINVAL);
	assert_string_equal(e.msg, "empty path");
	assert_int_equal(sup_path_normalize(S("workspace/a"), out, sizeof(out), NULL, &e),
			 -EINVAL);
	assert_non_null(strstr(e.msg, "\"workspace/a\": relative"));
	assert_int_equal(sup_path_normalize(S("./a"), out, sizeof(out), NULL, &e), -EINVAL);
	assert_int_equal(sup_path_normalize(S("/work\0space"), out, sizeof(out), NULL, &e),
			 -EINVAL);
	assert_non_null(strstr(e.msg, "\"/work\\x00space\": contains a NUL byte"));

	/* PATH_MAX counts the NUL: 4095 bytes pass, 4096 do not. */
	char big[PATH_MAX + 1];
	memset(big, 'a', sizeof(big));
	for (size_t i = 0; i < sizeof(big); i += 200)
		big[i] = '/';
	assert_true(sup_path_normalize(big, PATH_MAX - 1, out, sizeof(out), NULL, &e) > 0);
	assert_int_equal(sup_path_normalize(big, PATH_MAX, out, sizeof(out), NULL, &e),
			 -ENAMETOOLONG);
	assert_true(strlen(e.msg) < 400 && printable_ascii(e.msg));

	/* NAME_MAX per component. */
	char name[NAME_MAX + 3];
	name[0] = '/';
	memset(name + 1, 'n', NAME_MAX + 1);
	assert_true(sup_path_normalize(name, NAME_MAX + 1, out, sizeof(out), NULL, &e) > 0);
	assert_int_equal(sup_path_normalize(name, NAME_MAX + 2, out, sizeof(out), NULL, &e),
			 -ENAMETOOLONG);
}

static void test_is_under(void **state)
{
	(void)state;
	static const struct {
		const char *path, *root;
		bool under;
	} t[] = {
		{ "/workspace", "/workspace", true },
		{ "/workspace/a", "/workspace", true },
		{ "/workspace2", "/workspace", false },
		{ "/workspace2/a", "/workspace", false },
		{ "/work", "/workspace", false },
		{ "/", "/workspace", false },
		{ "/home/sandbox/x", "/home/sandbox", true },
		{ "/home/sandboxer", "/home/sandbox", false },
		{ "/anything", "/", true },
		{ "/", "/", true },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (sup_path_is_under(t[i].path, strlen(t[i].path), t[i].root,
				      strlen(t[i].root)) != t[i].under)
			fail_msg("%s under %s: want %d", t[i].path, t[i].root, t[i].under);
}

static void test_quote(void **state)
{
	(void)state;
	char q[64];
	assert_string_equal(sup_path_quote(S("/a b"), q, sizeof(q)), "\"/a b\"");
	assert_string_equal(sup_path_quote(S("a\n\"\\\xff"), q, sizeof(q)),
			    "\"a\\x0a\\\"\\\\\\xff\"");
	assert_string_equal(sup_path_quote(S(""), q, sizeof(q)), "\"\"");
	/* Cut to fit, and says so. */
	char small[12];
	assert_string_equal(sup_path_quote(S("/workspace/long"), small, sizeof(small)),
			    "\"/works...\"");
	/* Exactly fitting is not cut; an escape is never cut in half. */
	assert_string_equal(sup_path_quote(S("/abcdefgh"), small, sizeof(small)),
			    "\"/abcdefgh\"");
	assert_string_equal(sup_path_quote(S("/abcd\n\n"), small, sizeof(small)),
			    "\"/abcd...\"");
}

/* Random inputs: whatever the bytes, an accepted path is canonical, and
 * normalising it again changes nothing. */
static void test_normalize_random(void **state)
{
	(void)state;
	static const char alphabet[] = { '/', '/', '/', '.', '.', '.', 'a', 'b', '\0', '\n',
					 (char)0xff };
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (int iter = 0; iter < 200000; iter++) {
		char in[64], out[PATH_MAX], again[PATH_MAX];
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		size_t len = (size_t)(x % sizeof(in));
		for (size_t i = 0; i < len; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			in[i] = alphabet[x % sizeof(alphabet)];
		}
		if (len && (x & 1))
			in[0] = '/';
		sbx_err e;
		int n = sup_path_normalize(in, len, out, sizeof(out), NULL, &e);
		if (n < 0) {
			assert_true(n == -EINVAL);
			assert_true(len == 0 || in[0] != '/' || memchr(in, '\0', len));
			assert_true(printable_ascii(e.msg));
			continue;
		}
		assert_true((size_t)n <= len && out[0] == '/' && strlen(out) == (size_t)n);
		assert_true(n == 1 || out[n - 1] != '/');
		assert_null(strstr(out, "//"));
		assert_null(strstr(out, "/./"));
		assert_null(strstr(out, "/../"));
		assert_false(n >= 2 && strcmp(out + n - 2, "/.") == 0);
		assert_false(n >= 3 && strcmp(out + n - 3, "/..") == 0);
		assert_int_equal(sup_path_normalize(out, (size_t)n, again, sizeof(again), NULL, &e),
				 n);
		assert_string_equal(again, out);
	}
}

/* ---- sup_policy ---- */

static int check(const sup_policy *p, const char *tenant, const char *path,
		 sup_policy_access need, sup_policy_match *m, sbx_err *e)
{
	sbx_err_clear(e);
	return sup_policy_check(p, tenant, path, strlen(path), need, m, e);
}

static void test_default_policy(void **state)
{
	(void)state;
	SUP_AUTO_POLICY sup_policy *p = NULL;
	sbx_err e;
	assert_int_equal(sup_policy_new_default(&p, &e), 0);
	assert_int_equal(sup_policy_root_count(p, "anyone"), 3);
	sup_policy_match m;
	static const char *const allowed[] = { "/workspace/a", "/tmp/x/y", "/home/sandbox/.bashrc",
					       "/workspace", "/tmp" };
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		assert_int_equal(check(p, "default", allowed[i], SUP_POLICY_READ, &m, &e), 0);
		assert_int_equal(check(p, NULL, allowed[i], SUP_POLICY_WRITE, &m, &e), 0);
		assert_int_equal(m.mode, SUP_POLICY_RW);
	}
	assert_int_equal(check(p, "t", "/workspace/dir/f", SUP_POLICY_WRITE, &m, &e), 0);
	assert_string_equal(m.root, "/workspace");
	assert_string_equal(m.rel, "dir/f");
	assert_string_equal(m.path, "/workspace/dir/f");
	assert_false(m.is_root);
	assert_int_equal(check(p, "t", "/workspace/", SUP_POLICY_READ, &m, &e), 0);
	assert_true(m.is_root && m.dir);
	assert_string_equal(m.rel, "");

	static const char *const denied[] = { "/", "/etc/passwd", "/home", "/home/other",
					      "/workspace2", "/tmpfoo", "/run/sandbox/agent.sock",
					      "/proc/1/root" };
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		assert_int_equal(check(p, "default", denied[i], SUP_POLICY_READ, &m, &e), -EPERM);
		assert_non_null(strstr(e.msg, "outside the allowed roots: /workspace (rw), /tmp "
					      "(rw), /home/sandbox (rw)"));
	}
}

static void test_policy_file(void **state)
{
	const char *dir = *state;
	char file[PATH_MAX];
	snprintf(file, sizeof(file), "%s/policy.json", dir);
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fputs("{\"tenants\": {\n"
	      " \"default\": {\"paths\": [{\"root\": \"/workspace\", \"mode\": \"ro\"}]},\n"
	      " \"acme\": {\"paths\": [{\"root\": \"/workspace\", \"mode\": \"rw\"},\n"
	      "   {\"root\": \"/workspace/ref\", \"mode\": \"ro\"},\n"
	      "   {\"root\": \"/data\", \"mode\": \"ro\"}]},\n"
	      " \"all.ro\": {\"paths\": [{\"root\": \"/\", \"mode\": \"ro\"}]},\n"
	      " \"none\": {\"paths\": []}\n"
	      "}}\n",
	      f);
	assert_int_equal(fclose(f), 0);

	SUP_AUTO_POLICY sup_policy *p = NULL;
	sbx_err e;
	assert_int_equal(sup_policy_load_file(file, &p, &e), 0);
	sup_policy_match m;

	/* The longest root decides; component-wise, "reference" is not "ref". */
	assert_int_equal(check(p, "acme", "/workspace/a", SUP_POLICY_WRITE, &m, &e), 0);
	assert_int_equal(check(p, "acme", "/workspace/ref/x", SUP_POLICY_WRITE, &m, &e), -EPERM);
	assert_non_null(strstr(e.msg, "under read-only root /workspace/ref"));
	assert_int_equal(check(p, "acme", "/workspace/ref/x", SUP_POLICY_READ, &m, &e), 0);
	assert_string_equal(m.root, "/workspace/ref");
	assert_string_equal(m.rel, "x");
	assert_int_equal(m.mode, SUP_POLICY_RO);
	assert_int_equal(check(p, "acme", "/workspace/ref", SUP_POLICY_READ, &m, &e), 0);
	assert_true(m.is_root);
	assert_int_equal(check(p, "acme", "/workspace/reference/x", SUP_POLICY_WRITE, &m, &e), 0);
	assert_string_equal(m.root, "/workspace");
	assert_string_equal(m.rel, "reference/x");
	assert_int_equal(check(p, "acme", "/workspace/ref/../a", SUP_POLICY_WRITE, &m, &e), 0);
	assert_string_equal(m.root, "/workspace");
	assert_int_equal(check(p, "acme", "/data/x", SUP_POLICY_WRITE, &m, &e), -EPERM);
	assert_int_equal(check(p, "acme", "/tmp/x", SUP_POLICY_READ, &m, &e), -EPERM);

	/* A tenant the file does not name gets "default" (ro here). */
	assert_int_equal(check(p, "zeta", "/workspace/a", SUP_POLICY_READ, &m, &e), 0);
	assert_int_equal(check(p, "zeta", "/workspace/a", SUP_POLICY_WRITE, &m, &e), -EPERM);
	assert_int_equal(check(p, NULL, "/workspace/a", SUP_POLICY_WRITE, &m, &e), -EPERM);

	/* Root "/": everything below it, rel without the slash. */
	assert_int_equal(check(p, "all.ro", "/etc/passwd", SUP_POLICY_READ, &m, &e), 0);
	assert_string_equal(m.root, "/");
	assert_string_equal(m.rel, "etc/passwd");
	assert_int_equal(check(p, "all.ro", "/..", SUP_POLICY_READ, &m, &e), 0);
	assert_true(m.is_root);
	assert_string_equal(m.rel, "");
	assert_int_equal(check(p, "all.ro", "/etc/passwd", SUP_POLICY_WRITE, &m, &e), -EPERM);

	/* No roots at all. */
	assert_int_equal(sup_policy_root_count(p, "none"), 0);
	assert_int_equal(check(p, "none", "/workspace/a", SUP_POLICY_READ, &m, &e), -EPERM);
	assert_non_null(strstr(e.msg, "outside the allowed roots: none"));

	/* A file without "default" leaves unnamed tenants without access. */
	sup_policy_free(p);
	p = NULL;
	static const char only[] = "{\"tenants\": {\"acme\": {\"paths\": "
				   "[{\"root\": \"/workspace\", \"mode\": \"rw\"}]}}}";
	assert_int_equal(sup_policy_load_json(S(only), "only.json", &p, &e), 0);
	assert_int_equal(check(p, "acme", "/workspace/a", SUP_POLICY_WRITE, &m, &e), 0);
	assert_int_equal(check(p, "other", "/workspace/a", SUP_POLICY_READ, &m, &e), -EPERM);
	assert_non_null(strstr(e.msg, "tenant other has no file access"));
	assert_int_equal(sup_policy_root_count(p, "other"), 0);
}

static void test_policy_invalid(void **state)
{
	(void)state;
	static const struct {
		const char *json, *msg;
	} bad[] = {
		{ "not json", "policy t.json: line 1 column" },
		{ "[]", "want an object {\"tenants\"" },
		{ "{\"tenant\": {}}", "top level: unknown key \"tenant\"" },
		{ "{\"tenants\": {}}", "tenants: empty" },
		{ "{\"tenants\": []}", "tenants: want an object" },
		{ "{\"tenants\": {\"a b\": {\"paths\": []}}}", "name \"a b\": want 1 to 64" },
		{ "{\"tenants\": {\"\": {\"paths\": []}}}", "name \"\": want" },
		{ "{\"tenants\": {\"x\": []}}", "tenants.x: want an object" },
		{ "{\"tenants\": {\"x\": {}}}", "tenants.x.paths: want an array" },
		{ "{\"tenants\": {\"x\": {\"paths\": [], \"extra\": 1}}}", "unknown key \"extra\"" },
		{ "{\"tenants\": {\"x\": {\"paths\": [\"/workspace\"]}}}", "paths[0]: want an object" },
		{ "{\"tenants\": {\"x\": {\"paths\": [{\"mode\": \"rw\"}]}}}",
		  "paths[0].root: want a string" },
		{ "{\"tenants\": {\"x\": {\"paths\": [{\"root\": 5, \"mode\": \"rw\"}]}}}",
		  "paths[0].root: want a string" },
		{ "{\"tenants\": {\"x\": {\"paths\": [{\"root\": \"workspace\", \"mode\": \"rw\"}]}}}",
		  "relative" },
		{ "{\"tenants\": {\"x\": {\"paths\": [{\"root\": \"\", \"mode\": \"rw\"}]}}}",
		  "empty path" },
		{ "{\"tenants\": {\"x\": {\"paths\": [{\"root\": \"/workspace/\", \"mode\": \"rw\"}]}}}",
		  "not normalised, write \"/workspace\"" },
		{ "{\"tenants\": {\"x\": {\"paths\": [{\"root\": \"/workspace/../etc\", \"mode\": "
		  "\"rw\"}]}}}",
		  "not normalised, write \"/etc\"" },
		{ "{\"tenants\": {\"x\": {\"paths\": [{\"root\": \"//w\", \"mode\": \"rw\"}]}}}",
		  "not normalised, write \"/w\"" },
		{ "{\"tenants\": {\"x\": {\"paths\": [{\"root\": \"/a/./b\", \"mode\": \"rw\"}]}}}",
		  "not normalised, write \"/a/b\"" },
		{ "{\"tenants\": {\"x\": {\"paths\": [{\"root\": \"/w\", \"mode\": \"rx\"}]}}}",
		  "paths[0].mode: want \"ro\" or \"rw\"" },
		{ "{\"tenants\": {\"x\": {\"paths\": [{\"root\": \"/w\"}]}}}",
		  "paths[0].mode: want \"ro\" or \"rw\"" },
		{ "{\"tenants\": {\"x\": {\"paths\": [{\"root\": \"/w\", \"mode\": \"rw\", "
		  "\"mdoe\": \"ro\"}]}}}",
		  "paths[0]: unknown key \"mdoe\"" },
		{ "{\"tenants\": {\"x\": {\"paths\": [{\"root\": \"/w\", \"mode\": \"rw\"}, "
		  "{\"root\": \"/w\", \"mode\": \"ro\"}]}}}",
		  "paths[1].root: /w is already paths[0]" },
		{ "{\"tenants\": {\"x\": {\"paths\": []}, \"x\": {\"paths\": []}}}", "duplicate" },
		{ "{\"tenants\": {\"x\": {\"paths\": [{\"root\": \"/a\\u0000b\", \"mode\": \"rw\"}]}}}",
		  "line 1" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sup_policy *p = NULL;
		sbx_err e;
		sbx_err_clear(&e);
		int r = sup_policy_load_json(bad[i].json, strlen(bad[i].json), "t.json", &p, &e);
		if (r != -EINVAL || p || !strstr(e.msg, bad[i].msg) ||
		    strncmp(e.msg, "policy t.json", 13) != 0)
			fail_msg("%s: got %d \"%s\", want \"%s\"", bad[i].json, r, e.msg, bad[i].msg);
	}

	/* Too many roots. */
	char many[8192];
	size_t o = (size_t)snprintf(many, sizeof(many), "{\"tenants\": {\"x\": {\"paths\": [");
	for (int i = 0; i <= SUP_POLICY_MAX_ROOTS; i++)
		o += (size_t)snprintf(many + o, sizeof(many) - o,
				      "%s{\"root\": \"/r%d\", \"mode\": \"ro\"}", i ? "," : "", i);
	snprintf(many + o, sizeof(many) - o, "]}}}");
	sup_policy *p = NULL;
	sbx_err e;
	assert_int_equal(sup_policy_load_json(many, strlen(many), "m.json", &p, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "65 roots, at most 64"));
}

static void test_policy_file_errors(void **state)
{
	const char *dir = *state;
	sup_policy *p = NULL;
	sbx_err e;
	char file[PATH_MAX];
	snprintf(file, sizeof(file), "%s/missing.json", dir);
	assert_int_equal(sup_policy_load_file(file, &p, &e), -ENOENT);
	assert_non_null(strstr(e.msg, "missing.json"));
	assert_int_equal(sup_policy_load_file(dir, &p, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "not a regular file"));

	/* Over the bound: refused before it is parsed. */
	snprintf(file, sizeof(file), "%s/big.json", dir);
	SBX_AUTO_CLOSE int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, SUP_POLICY_FILE_MAX + 1), 0);
	assert_int_equal(sup_policy_load_file(file, &p, &e), -EFBIG);
	assert_null(p);

	/* A broken file names itself and the line. */
	snprintf(file, sizeof(file), "%s/broken.json", dir);
	FILE *f = fopen(file, "w");
	assert_non_null(f);
	fputs("{\"tenants\": {\"default\": {\"paths\": [\n{\"root\": \"/w\", \"mode\": \"rw\"},\n]}}}",
	      f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(sup_policy_load_file(file, &p, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "broken.json: line 3"));
}

/* ---- the hostile corpus ---- */

static void load_corpus(corpus *c)
{
	char msg[256];
	if (corpus_load(SBX_CORPUS_FILE, c, msg, sizeof(msg)) < 0) {
		corpus_free(c);
		fail_msg("%s", msg);
	}
}

static bool has_dot_component(const char *p)
{
	for (const char *c = p; (c = strchr(c, '/')); c++) {
		size_t n = strcspn(c + 1, "/");
		if ((n == 1 && c[1] == '.') || (n == 2 && c[1] == '.' && c[2] == '.'))
			return true;
	}
	return false;
}

static void test_corpus(void **state)
{
	(void)state;
	corpus c;
	load_corpus(&c);
	assert_true(c.ncases >= 40);
	SUP_AUTO_POLICY sup_policy *p = NULL;
	sbx_err e;
	assert_int_equal(sup_policy_new_default(&p, &e), 0);
	int failures = 0;
	for (size_t i = 0; i < c.ncases; i++) {
		const corpus_case *k = &c.cases[i];
		for (int need = SUP_POLICY_READ; need <= SUP_POLICY_WRITE; need++) {
			sup_policy_match m;
			sbx_err_clear(&e);
			int r = sup_policy_check(p, "default", k->path.p, k->path.len,
						 (sup_policy_access)need, &m, &e);
			int want = k->policy == CORPUS_ALLOW  ? 0
				   : k->policy == CORPUS_DENY ? -EPERM
				   : k->policy == CORPUS_BAD  ? -EINVAL
							      : -ENAMETOOLONG;
			bool good = r == want;
			if (good && r == 0) {
				/* What goes to the agent: canonical, under the root, and exactly
				 * the corpus's answer. */
				size_t n = strlen(m.path);
				good = n == k->normalised.len &&
				       memcmp(m.path, k->normalised.p, n) == 0 &&
				       sup_path_is_under(m.path, n, m.root, strlen(m.root)) &&
				       !has_dot_component(m.path) && !strstr(m.path, "//") &&
				       m.rel[0] != '/' && strlen(m.rel) < n;
			} else if (good) {
				good = e.msg[0] && printable_ascii(e.msg) && strlen(e.msg) < 400;
			}
			if (!good) {
				char q[SUP_PATH_QUOTE_MAX];
				print_error("line %d %s: %s -> %d (%s) path=%s\n", k->line, k->name,
					    sup_path_quote(k->path.p, k->path.len, q, sizeof(q)), r,
					    r ? e.msg : m.path, r ? "" : m.rel);
				failures++;
			}
		}
	}
	corpus_free(&c);
	assert_int_equal(failures, 0);
}

/* Double encoding is harmless because the edge decodes once (sup_query):
 * %252e stays the three bytes "%2e", a name, not a dot. */
static void test_double_encoding(void **state)
{
	(void)state;
	size_t n;
	SBX_AUTO_FREE char *once = sup_query_decode("/workspace/%252e%252e/etc", 25, &n);
	assert_string_equal(once, "/workspace/%2e%2e/etc");
	SBX_AUTO_FREE char *twice = sup_query_decode(once, strlen(once), &n);
	assert_string_equal(twice, "/workspace/../etc"); /* what a second decoding would do */
	SUP_AUTO_POLICY sup_policy *p = NULL;
	sbx_err e;
	assert_int_equal(sup_policy_new_default(&p, &e), 0);
	sup_policy_match m;
	assert_int_equal(check(p, "t", once, SUP_POLICY_READ, &m, &e), 0);
	assert_string_equal(m.rel, "%2e%2e/etc");
	assert_int_equal(check(p, "t", twice, SUP_POLICY_READ, &m, &e), -EPERM);

	/* A decoded %00 is a byte of the path: with its length it is refused;
	 * as a C string it would silently cut the path short. */
	SBX_AUTO_FREE char *nul = sup_query_decode("/workspace/a%00/../../etc", 25, &n);
	assert_int_equal(n, strlen("/workspace/a") + 1 + strlen("/../../etc"));
	assert_int_equal(sup_policy_check(p, "t", nul, n, SUP_POLICY_READ, &m, &e), -EINVAL);
}

static void test_names_round_trip(void **state)
{
	(void)state;
	corpus c;
	load_corpus(&c);
	assert_true(c.nnames >= 10);
	SUP_AUTO_POLICY sup_policy *p = NULL;
	sbx_err e;
	assert_int_equal(sup_policy_new_default(&p, &e), 0);
	for (size_t i = 0; i < c.nnames; i++) {
		char path[PATH_MAX];
		int n = snprintf(path, sizeof(path), "/workspace/%s", c.names[i].p);
		assert_true(n > 0 && (size_t)n == strlen("/workspace/") + c.names[i].len);
		sup_policy_match m;
		assert_int_equal(sup_policy_check(p, "t", path, (size_t)n, SUP_POLICY_WRITE, &m, &e),
				 0);
		assert_memory_equal(m.path, path, (size_t)n + 1);
		assert_memory_equal(m.rel, c.names[i].p, c.names[i].len + 1);
	}
	corpus_free(&c);
}

/* ---- the denial log line ---- */

static void test_denial_line(void **state)
{
	(void)state;
	SUP_AUTO_POLICY sup_policy *p = NULL;
	sbx_err e;
	assert_int_equal(sup_policy_new_default(&p, &e), 0);
	static const char path[] = "/etc/x\n2026-01-01 error forged line\x1b[0m";
	sup_policy_match m;
	assert_int_equal(sup_policy_check(p, "acme", S(path), SUP_POLICY_WRITE, &m, &e), -EPERM);
	char line[1024];
	sup_policy_denial_line(line, sizeof(line), "acme", "sb-1\n", "write", S(path), &e);
	assert_true(printable_ascii(line));
	assert_non_null(strstr(line, "file access denied: tenant=\"acme\" sandbox=\"sb-1\\x0a\" "
				     "op=\"write\" path=\"/etc/x\\x0a2026-01-01 error forged "
				     "line\\x1b[0m\": path \"/etc/x\\x0a"));
	assert_non_null(strstr(line, "outside the allowed roots"));

	/* Through sup_log: exactly one line on stderr. */
	int pipefd[2];
	assert_int_equal(pipe2(pipefd, O_CLOEXEC | O_NONBLOCK), 0);
	int saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(pipefd[1], STDERR_FILENO) >= 0);
	sup_policy_log_denial("acme", "sb-1", "read", S(path), &e);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	char out[2048];
	ssize_t n = read(pipefd[0], out, sizeof(out) - 1);
	close(pipefd[0]);
	close(pipefd[1]);
	assert_true(n > 0);
	out[n] = '\0';
	assert_non_null(strchr(out, '\n'));
	assert_int_equal(strchr(out, '\n') - out, n - 1);
	assert_non_null(strstr(out, " warn  file access denied: tenant=\"acme\" sandbox=\"sb-1\" "
				    "op=\"read\" path=\"/etc/x\\x0a"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_normalize_table),
		cmocka_unit_test(test_normalize_errors),
		cmocka_unit_test(test_is_under),
		cmocka_unit_test(test_quote),
		cmocka_unit_test(test_normalize_random),
		cmocka_unit_test(test_default_policy),
		cmocka_unit_test_setup_teardown(test_policy_file, make_tmp, remove_tmp),
		cmocka_unit_test(test_policy_invalid),
		cmocka_unit_test_setup_teardown(test_policy_file_errors, make_tmp, remove_tmp),
		cmocka_unit_test(test_corpus),
		cmocka_unit_test(test_double_encoding),
		cmocka_unit_test(test_names_round_trip),
		cmocka_unit_test(test_denial_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
