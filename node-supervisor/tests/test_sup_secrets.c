/* Secrets (lib/secret and the PUT body's parser of routes/secrets): the
 * names allowed, sealing with AES-256-GCM and every way an opening must
 * fail (another key, tenant or name, a changed byte, a newer form), the
 * key file (made 0600, read back, refused when others may read it), the
 * store over a real catalog in a fresh folder (created and updated, the
 * dates, the bounds, a delete, a reopen with another key) with the
 * catalog's file searched for the value, and the body's parser, whose
 * errors never quote what was sent. */
#include <errno.h>
#include <fcntl.h>
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

#include "sup_catalog.h"
#include "sup_secret.h"
#include "sup_secrets.h"
#include "sup_secroutes.h"

static void test_names(void **state)
{
	(void)state;
	static const char *const good[] = { "openai", "a", "GH_TOKEN", "k.v-2", "9lives" };
	static const char *const bad[] = { "", "-x", "_x", ".x", "a/b", "a b", "a\n", "x%2fy",
					   "é" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(sup_secret_name_ok(good[i], strlen(good[i])));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(sup_secret_name_ok(bad[i], strlen(bad[i])));
	char longest[SUP_SECRET_NAME_MAX + 2];
	memset(longest, 'a', sizeof(longest));
	assert_true(sup_secret_name_ok(longest, SUP_SECRET_NAME_MAX));
	assert_false(sup_secret_name_ok(longest, SUP_SECRET_NAME_MAX + 1));
}

static const uint8_t key1[SUP_SECRET_KEY_LEN] = { 1, 2, 3 };
static const uint8_t key2[SUP_SECRET_KEY_LEN] = { 1, 2, 4 };

static void test_seal_open(void **state)
{
	(void)state;
	sbx_err err;
	const char *v = "sk-live-0123456789";
	uint8_t *s, *s2;
	size_t n, n2;
	assert_int_equal(sup_secret_seal(key1, "t1", "openai", (const uint8_t *)v, strlen(v), &s, &n,
					 &err), 0);
	assert_int_equal(n, strlen(v) + SUP_SECRET_SEAL_OVERHEAD);
	assert_null(memmem(s, n, v, strlen(v)));
	/* a fresh nonce each time: the same value seals differently */
	assert_int_equal(sup_secret_seal(key1, "t1", "openai", (const uint8_t *)v, strlen(v), &s2,
					 &n2, &err), 0);
	assert_int_equal(n, n2);
	assert_memory_not_equal(s, s2, n);
	free(s2);
	sup_secret_buf b;
	assert_int_equal(sup_secret_open(key1, "t1", "openai", s, n, &b, &err), 0);
	assert_int_equal(b.len, strlen(v));
	assert_memory_equal(b.p, v, b.len);
	assert_int_equal(b.p[b.len], 0);
	sup_secret_buf_free(&b);
	assert_null(b.p);
	/* bound to its key, tenant and name */
	assert_int_equal(sup_secret_open(key2, "t1", "openai", s, n, &b, &err), -EBADMSG);
	assert_null(strstr(err.msg, v));
	assert_int_equal(sup_secret_open(key1, "t2", "openai", s, n, &b, &err), -EBADMSG);
	assert_int_equal(sup_secret_open(key1, "t1", "openai2", s, n, &b, &err), -EBADMSG);
	/* tenant "t1" name "x" is not tenant "t1x" name "" nor "t" "1x" */
	uint8_t *s3;
	size_t n3;
	assert_int_equal(sup_secret_seal(key1, "t1", "x", (const uint8_t *)"v", 1, &s3, &n3, &err), 0);
	assert_int_equal(sup_secret_open(key1, "t", "1x", s3, n3, &b, &err), -EBADMSG);
	free(s3);
	/* any byte changed */
	for (size_t i = 1; i < n; i++) {
		s[i] ^= 0x20;
		assert_int_equal(sup_secret_open(key1, "t1", "openai", s, n, &b, &err), -EBADMSG);
		s[i] ^= 0x20;
	}
	assert_int_equal(sup_secret_open(key1, "t1", "openai", s, n - 1, &b, &err), -EBADMSG);
	assert_int_equal(sup_secret_open(key1, "t1", "openai", s, 5, &b, &err), -EBADMSG);
	s[0] = 2;
	assert_int_equal(sup_secret_open(key1, "t1", "openai", s, n, &b, &err), -EPROTO);
	free(s);
	/* the bound */
	static uint8_t big[SUP_SECRET_VALUE_MAX + 1];
	assert_int_equal(sup_secret_seal(key1, "t1", "big", big, sizeof(big), &s, &n, &err), -E2BIG);
	assert_int_equal(sup_secret_seal(key1, "t1", "big", big, sizeof(big) - 1, &s, &n, &err), 0);
	assert_int_equal(sup_secret_open(key1, "t1", "big", s, n, &b, &err), 0);
	assert_int_equal(b.len, SUP_SECRET_VALUE_MAX);
	sup_secret_buf_free(&b);
	free(s);
}

typedef struct fixture {
	char dir[64];
	char key[96];
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/sbx-secrets-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->key, sizeof(f->key), "%s/secrets.key", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	static const char *const names[] = { "secrets.key", "other.key", SUP_CATALOG_FILE,
					     SUP_CATALOG_FILE "-wal", SUP_CATALOG_FILE "-shm" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char p[160];
		snprintf(p, sizeof(p), "%s/%s", f->dir, names[i]);
		unlink(p);
	}
	assert_int_equal(rmdir(f->dir), 0);
	free(f);
	return 0;
}

static void test_key_file(void **state)
{
	fixture *f = *state;
	sbx_err err;
	uint8_t k[SUP_SECRET_KEY_LEN], again[SUP_SECRET_KEY_LEN];
	bool made;
	assert_int_equal(sup_secret_key_load(f->key, k, &made, &err), 0);
	assert_true(made);
	struct stat st;
	assert_int_equal(stat(f->key, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_size, 2 * SUP_SECRET_KEY_LEN + 1);
	assert_int_equal(sup_secret_key_load(f->key, again, &made, &err), 0);
	assert_false(made);
	assert_memory_equal(k, again, sizeof(k));
	assert_int_equal(chmod(f->key, 0640), 0);
	assert_int_equal(sup_secret_key_load(f->key, again, &made, &err), -EPERM);
	assert_non_null(strstr(err.msg, "secrets key"));
	assert_int_equal(chmod(f->key, 0600), 0);
	int fd = open(f->key, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "short\n", 6), 6);
	close(fd);
	assert_int_equal(sup_secret_key_load(f->key, again, &made, &err), -EINVAL);
}

typedef struct names_seen {
	char text[512];
} names_seen;

static void add_name(const sup_secret_info *i, void *ud)
{
	names_seen *s = ud;
	size_t at = strlen(s->text);
	snprintf(s->text + at, sizeof(s->text) - at, "%s/%s:%llu;", i->tenant, i->name,
		 (unsigned long long)i->size);
}

/* Whether the catalog's files hold needle anywhere. */
static bool catalog_holds(const fixture *f, const char *needle)
{
	static const char *const tails[] = { "", "-wal" };
	for (size_t t = 0; t < 2; t++) {
		char p[160];
		snprintf(p, sizeof(p), "%s/" SUP_CATALOG_FILE "%s", f->dir, tails[t]);
		FILE *fp = fopen(p, "rb");
		if (!fp)
			continue;
		static char buf[4 << 20];
		size_t n = fread(buf, 1, sizeof(buf), fp);
		fclose(fp);
		if (memmem(buf, n, needle, strlen(needle)))
			return true;
	}
	return false;
}

static void test_store(void **state)
{
	fixture *f = *state;
	sbx_err err;
	sup_catalog *cat;
	sup_secrets *s;
	assert_int_equal(sup_catalog_open(f->dir, &cat, &err), 0);
	assert_int_equal(sup_secrets_open(f->key, cat, &s, &err), 0);
	const char *v1 = "ghp_FIRSTVALUEabcdef", *v2 = "ghp_SECONDVALUE";
	sup_secret_info i;
	bool created;
	assert_int_equal(sup_secrets_put(s, "t1", "gh", (const uint8_t *)v1, strlen(v1), &i, &created,
					 &err), 0);
	assert_true(created);
	assert_string_equal(i.name, "gh");
	assert_int_equal(i.size, strlen(v1));
	assert_true(i.created_at > 0 && i.updated_at == i.created_at);
	int64_t made_at = i.created_at;
	sleep(1);
	assert_int_equal(sup_secrets_put(s, "t1", "gh", (const uint8_t *)v2, strlen(v2), &i, &created,
					 &err), 0);
	assert_false(created);
	assert_int_equal(i.created_at, made_at);
	assert_true(i.updated_at > made_at);
	assert_int_equal(sup_secrets_put(s, "t2", "gh", (const uint8_t *)v1, strlen(v1), &i, &created,
					 &err), 0);
	assert_int_equal(sup_secrets_put(s, "t1", "bad name", (const uint8_t *)v1, 3, &i, &created,
					 &err), -EINVAL);
	static uint8_t big[SUP_SECRET_VALUE_MAX + 1];
	assert_int_equal(sup_secrets_put(s, "t1", "big", big, sizeof(big), &i, &created, &err), -E2BIG);
	names_seen seen = { "" };
	assert_int_equal(sup_secrets_list(s, "t1", add_name, &seen, &err), 0);
	assert_string_equal(seen.text, "t1/gh:15;");
	seen.text[0] = 0;
	assert_int_equal(sup_secrets_list(s, NULL, add_name, &seen, &err), 0);
	assert_string_equal(seen.text, "t1/gh:15;t2/gh:20;");
	sup_secret_buf b;
	assert_int_equal(sup_secrets_reveal(s, "t1", "gh", &b, &err), 0);
	assert_string_equal((const char *)b.p, v2);
	sup_secret_buf_free(&b);
	assert_int_equal(sup_secrets_check(s, "t1", "gh", &err), 0);
	assert_int_equal(sup_secrets_check(s, "t1", "nope", &err), -ENOENT);
	assert_int_equal(sup_secrets_reveal(s, "t3", "gh", &b, &err), -ENOENT);
	/* the file holds ciphertext only */
	assert_false(catalog_holds(f, v1));
	assert_false(catalog_holds(f, v2));
	assert_true(catalog_holds(f, "gh"));
	/* deleted: gone for the next use */
	assert_int_equal(sup_secrets_delete(s, "t2", "gh", &err), 0);
	assert_int_equal(sup_secrets_delete(s, "t2", "gh", &err), -ENOENT);
	assert_int_equal(sup_secrets_reveal(s, "t2", "gh", &b, &err), -ENOENT);
	/* a tenant's count */
	char name[16];
	for (int k = 1; k < SUP_SECRETS_PER_TENANT; k++) {
		snprintf(name, sizeof(name), "n%d", k);
		assert_int_equal(sup_secrets_put(s, "t1", name, (const uint8_t *)"x", 1, &i, &created,
						 &err), 0);
	}
	assert_int_equal(sup_secrets_put(s, "t1", "onemore", (const uint8_t *)"x", 1, &i, &created,
					 &err), -EDQUOT);
	/* one there may still change */
	assert_int_equal(sup_secrets_put(s, "t1", "n1", (const uint8_t *)"y", 1, &i, &created, &err), 0);
	sup_secrets_free(s);
	sup_catalog_close(cat);
	/* reopened: kept; with another key: refused at its use, naming why */
	assert_int_equal(sup_catalog_open(f->dir, &cat, &err), 0);
	assert_int_equal(sup_secrets_open(f->key, cat, &s, &err), 0);
	assert_int_equal(sup_secrets_reveal(s, "t1", "gh", &b, &err), 0);
	assert_string_equal((const char *)b.p, v2);
	sup_secret_buf_free(&b);
	sup_secrets_free(s);
	char other[128];
	snprintf(other, sizeof(other), "%s/other.key", f->dir);
	assert_int_equal(sup_secrets_open(other, cat, &s, &err), 0);
	assert_int_equal(sup_secrets_reveal(s, "t1", "gh", &b, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, "--secrets-key"));
	sup_secrets_free(s);
	sup_catalog_close(cat);
}

static void test_put_body(void **state)
{
	(void)state;
	sbx_err err;
	sup_secret_buf b;
	const char *ok = "{\"value\":\"sk-\\u00e9\\n1\"}";
	assert_int_equal(sup_secroutes_parse_value(ok, strlen(ok), &b, &err), 0);
	assert_string_equal((const char *)b.p, "sk-\xc3\xa9\n1");
	sup_secret_buf_free(&b);
	static const struct {
		const char *body;
		int rc;
	} bad[] = {
		{ "{\"value\":\"sk-HIDDEN", -EINVAL },
		{ "{\"value\":sk-HIDDEN}", -EINVAL },
		{ "[\"sk-HIDDEN\"]", -EINVAL },
		{ "{\"value\":\"sk-HIDDEN\",\"x\":1}", -EINVAL },
		{ "{\"value\":\"sk-HIDDEN\",\"value\":\"sk-HIDDEN\"}", -EINVAL },
		{ "{\"value\":7}", -EINVAL },
		{ "{\"value\":\"\"}", -EINVAL },
		{ "{\"value\":\"sk-HIDDEN\\u0000\"}", -EINVAL },
		{ "{}", -EINVAL },
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		assert_int_equal(sup_secroutes_parse_value(bad[k].body, strlen(bad[k].body), &b, &err),
				 bad[k].rc);
		assert_null(b.p);
		assert_null(strstr(err.msg, "HIDDEN"));
	}
	static char big[SUP_SECRET_VALUE_MAX + 64];
	int n = snprintf(big, sizeof(big), "{\"value\":\"");
	memset(big + n, 'a', SUP_SECRET_VALUE_MAX + 1);
	memcpy(big + n + SUP_SECRET_VALUE_MAX + 1, "\"}", 3);
	assert_int_equal(sup_secroutes_parse_value(big, strlen(big), &b, &err), -E2BIG);
	memcpy(big + n + SUP_SECRET_VALUE_MAX, "\"}", 3);
	assert_int_equal(sup_secroutes_parse_value(big, strlen(big), &b, &err), 0);
	assert_int_equal(b.len, SUP_SECRET_VALUE_MAX);
	sup_secret_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_seal_open),
		cmocka_unit_test_setup_teardown(test_key_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store, setup, teardown),
		cmocka_unit_test(test_put_body),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
