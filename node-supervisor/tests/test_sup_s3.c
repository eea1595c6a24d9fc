/* sup_s3's parts that need no store: the URL and key rules, S3's URI
 * encoding, and the XML reader fed the way curl feeds it (in pieces),
 * including what it must refuse. The requests themselves are tested against
 * a real S3 server (tests/integration/test_s3_store.py). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sup_s3_int.h"
#include "sup_s3_xml.h"

static void url_parse(void **st)
{
	(void)st;
	char b[64], p[SUP_S3_KEY_MAX];
	sbx_err err;
	assert_int_equal(sup_s3_parse_url("s3://snaps", b, sizeof(b), p, sizeof(p), &err), 0);
	assert_string_equal(b, "snaps");
	assert_string_equal(p, "");
	assert_int_equal(sup_s3_parse_url("s3://my-bucket.x/node/a//", b, sizeof(b), p, sizeof(p), &err), 0);
	assert_string_equal(b, "my-bucket.x");
	assert_string_equal(p, "node/a/");
	const char *bad[] = {"http://b/p", "s3://", "s3://ab", "s3://Upper", "s3://-lead", "s3://b_c/x",
			     "s3://bucket/a\nb", NULL};
	for (int i = 0; bad[i]; i++) {
		assert_int_equal(sup_s3_parse_url(bad[i], b, sizeof(b), p, sizeof(p), &err), -EINVAL);
		assert_non_null(strstr(err.msg, "store"));
	}
}

static void encode(void **st)
{
	(void)st;
	char out[64];
	assert_int_equal(sup_s3_uri_encode(out, sizeof(out), "a b/c~d+e=", true), 0);
	assert_string_equal(out, "a%20b/c~d%2Be%3D");
	assert_int_equal(sup_s3_uri_encode(out, sizeof(out), "p/q", false), 0);
	assert_string_equal(out, "p%2Fq");
	assert_int_equal(sup_s3_uri_encode(out, sizeof(out), "\xc3\xa9", false), 0);
	assert_string_equal(out, "%C3%A9");
	assert_int_equal(sup_s3_uri_encode(out, 4, "abcd", false), -ENAMETOOLONG);
	assert_int_equal(sup_s3_uri_encode(out, 4, "ab/", false), -ENAMETOOLONG);
}

static void open_needs_credentials(void **st)
{
	(void)st;
	sbx_err err;
	sup_s3 *s = NULL;
	unsetenv("AWS_ACCESS_KEY_ID");
	setenv("AWS_SECRET_ACCESS_KEY", "x", 1);
	assert_int_equal(sup_s3_open("s3://bucket", NULL, &s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "AWS_ACCESS_KEY_ID"));
	setenv("AWS_ACCESS_KEY_ID", "id", 1);
	sup_s3_opts o = {.part_size = 1 << 20};
	assert_int_equal(sup_s3_open("s3://bucket", &o, &s, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "part size"));
	o = (sup_s3_opts){.endpoint = "ftp://h"};
	assert_int_equal(sup_s3_open("s3://bucket", &o, &s, &err), -EINVAL);
	o = (sup_s3_opts){.endpoint = "http://127.0.0.1:9/", .region = "eu-west-1"};
	assert_int_equal(sup_s3_open("s3://bucket/pre", &o, &s, &err), 0);
	assert_string_equal(s->base, "http://127.0.0.1:9/bucket");
	assert_string_equal(s->sigv4, "aws:amz:eu-west-1:s3");
	assert_int_equal(sup_s3_check_key(s, "", &err), -EINVAL);
	assert_int_equal(sup_s3_check_key(s, "a\tb", &err), -EINVAL);
	char big[SUP_S3_KEY_MAX];
	memset(big, 'k', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(sup_s3_check_key(s, big, &err), -ENAMETOOLONG);
	/* Nothing listens on port 9: a clear error, quickly. */
	assert_int_equal(sup_s3_delete(s, "k", &err), -ECONNREFUSED);
	assert_non_null(strstr(err.msg, "delete k"));
	sup_s3_close(s);
	o = (sup_s3_opts){.region = "us-west-2"};
	unsetenv("AWS_ENDPOINT_URL");
	unsetenv("AWS_ENDPOINT_URL_S3");
	assert_int_equal(sup_s3_open("s3://bucket", &o, &s, &err), 0);
	assert_string_equal(s->base, "https://bucket.s3.us-west-2.amazonaws.com");
	sup_s3_close(s);
	assert_int_equal(sup_s3_open("s3://dotted.bucket", &o, &s, &err), 0);
	assert_string_equal(s->base, "https://s3.us-west-2.amazonaws.com/dotted.bucket");
	sup_s3_close(s);
}

typedef struct seen {
	char log[2048];
	size_t len;
} seen;

static int record(void *ud, const char *path, const char *text, size_t len)
{
	seen *s = ud;
	s->len += (size_t)snprintf(s->log + s->len, sizeof(s->log) - s->len, "%s=%.*s;", path, (int)len,
				   strchr(text, '<') ? "" : text);
	return 0;
}

static const char list_doc[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	"<IsTruncated>true</IsTruncated><Contents><Key>a&amp;b</Key><Size>12</Size></Contents>"
	"<NextContinuationToken>tok+/=</NextContinuationToken></ListBucketResult>";

/* Fed in every split, the reader sees the same elements. */
static void xml_in_pieces(void **st)
{
	(void)st;
	const size_t n = sizeof(list_doc) - 1;
	char want[2048] = "";
	for (size_t cut = 0; cut <= n; cut++) {
		seen s = {0};
		sup_s3_xml *x = NULL;
		sbx_err err;
		assert_int_equal(sup_s3_xml_new(record, &s, &x, &err), 0);
		assert_int_equal(sup_s3_xml_feed(x, list_doc, cut, false, &err), 0);
		assert_int_equal(sup_s3_xml_feed(x, list_doc + cut, n - cut, true, &err), 0);
		sup_s3_xml_free(x);
		if (cut == 0)
			memcpy(want, s.log, sizeof(want));
		assert_string_equal(s.log, want);
	}
	assert_non_null(strstr(want, "ListBucketResult/Contents/Key=a&b;"));
	assert_non_null(strstr(want, "ListBucketResult/NextContinuationToken=tok+/=;"));
}

static int parse(const char *doc, sbx_err *err)
{
	seen s = {0};
	sup_s3_xml *x = NULL;
	assert_int_equal(sup_s3_xml_new(record, &s, &x, err), 0);
	int rc = sup_s3_xml_feed(x, doc, strlen(doc), true, err);
	sup_s3_xml_free(x);
	return rc;
}

static void xml_refuses(void **st)
{
	(void)st;
	sbx_err err;
	/* Entities through a DOCTYPE (the billion laughs' way in). */
	assert_int_equal(parse("<!DOCTYPE r [<!ENTITY a \"aaaa\">]><r>&a;</r>", &err), -EPROTO);
	assert_non_null(strstr(err.msg, "DOCTYPE"));
	assert_int_equal(parse("<Error><Code>x</Error>", &err), -EPROTO);
	/* Text past its bound, and a path past its bound. */
	size_t big = SUP_S3_XML_TEXT_MAX + 10;
	char *doc = malloc(big + 16);
	assert_non_null(doc);
	strcpy(doc, "<K>");
	memset(doc + 3, 'x', big);
	strcpy(doc + 3 + big, "</K>");
	assert_int_equal(parse(doc, &err), -E2BIG);
	doc[0] = '\0';
	for (int i = 0; i < 60; i++)
		strcat(doc, "<abcde>");
	assert_int_equal(parse(doc, &err), -E2BIG);
	assert_non_null(strstr(err.msg, "path"));
	free(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(url_parse),
		cmocka_unit_test(encode),
		cmocka_unit_test(open_needs_credentials),
		cmocka_unit_test(xml_in_pieces),
		cmocka_unit_test(xml_refuses),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
