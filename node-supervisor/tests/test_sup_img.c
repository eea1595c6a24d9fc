/* Unit tests of the image documents' parsing (sup_img_manifest) and digests
 * (sup_img_digest): what an import relies on is refused when malformed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sup_img_digest.h"
#include "sup_img_manifest.h"
#include "sup_sha256.h"

#define HEX_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HEX_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"

static int index_of(const char *json, sup_img_plan *plans, size_t *n, sbx_err *e)
{
	return sup_img_parse_index(json, strlen(json), plans, 4, n, e);
}

static void test_digest(void **state)
{
	(void)state;
	char hex[SUP_IMG_HEX_LEN + 1];
	sbx_err e;
	assert_int_equal(sup_img_digest_parse("x", "sha256:" HEX_A, hex, &e), 0);
	assert_string_equal(hex, HEX_A);
	assert_int_equal(sup_img_digest_parse("x", "sha512:" HEX_A, hex, &e), -ENOTSUP);
	assert_int_equal(sup_img_digest_parse("x", "sha256:" HEX_A "a", hex, &e), -EINVAL);
	assert_int_equal(sup_img_digest_parse("x", "sha256:AAAA", hex, &e), -EINVAL);
	assert_int_equal(sup_img_digest_parse("x", HEX_A, hex, &e), -EINVAL);
	assert_int_equal(sup_img_digest_parse("x", NULL, hex, &e), -EINVAL);
	/* the hash as the layers use it: streamed in pieces, then as one */
	SUP_AUTO_SHA256 sup_sha256 s = {0};
	assert_int_equal(sup_sha256_init(&s, &e), 0);
	sup_sha256_update(&s, "a", 1);
	sup_sha256_update(&s, "", 0);
	sup_sha256_update(&s, "bc", 2);
	assert_int_equal(sup_sha256_final_hex(&s, hex, &e), 0);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	assert_null(s.ctx);
	assert_int_equal(sup_sha256_init(&s, &e), 0);
	assert_int_equal(sup_sha256_final_hex(&s, hex, &e), 0);
	assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	uint8_t d[SUP_SHA256_LEN];
	assert_int_equal(sup_sha256_digest("abc", 3, d, &e), 0);
	assert_int_equal(d[0], 0xba);
	assert_int_equal(d[31], 0xad);
}

static void test_refs(void **state)
{
	(void)state;
	assert_true(sup_img_ref_ok("busybox:latest"));
	assert_true(sup_img_ref_ok("docker.io/library/python:3.11-slim"));
	assert_true(sup_img_ref_ok("reg:5000/a/b@x"));
	assert_false(sup_img_ref_ok("host"));
	assert_false(sup_img_ref_ok(""));
	assert_false(sup_img_ref_ok("/srv/rootfs"));
	assert_false(sup_img_ref_ok("../x"));
	assert_false(sup_img_ref_ok("a b"));
	assert_false(sup_img_ref_ok("a=1"));
	assert_false(sup_img_ref_ok("sha256:" HEX_A));
}

static void test_index(void **state)
{
	(void)state;
	sup_img_plan plans[4];
	size_t n;
	sbx_err e;
	assert_int_equal(index_of("{\"manifests\":[{\"mediaType\":\"" MT_MANIFEST "\",\"digest\":\"sha256:" HEX_A
				  "\",\"size\":10,\"annotations\":{\"org.opencontainers.image.ref.name\":\"tiny\"}}]}",
				  plans, &n, &e),
			 0);
	assert_int_equal(n, 1);
	assert_string_equal(plans[0].manifest.hex, HEX_A);
	assert_string_equal(plans[0].manifest.path, "blobs/sha256/" HEX_A);
	assert_int_equal(plans[0].manifest.size, 10);
	assert_int_equal(plans[0].nrefs, 1);
	assert_string_equal(plans[0].refs[0], "tiny");
	/* a ref that is no name is dropped, not trusted */
	assert_int_equal(index_of("{\"manifests\":[{\"mediaType\":\"" MT_MANIFEST "\",\"digest\":\"sha256:" HEX_A
				  "\",\"annotations\":{\"org.opencontainers.image.ref.name\":\"../x\"}}]}",
				  plans, &n, &e),
			 0);
	assert_int_equal(plans[0].nrefs, 0);
	assert_int_equal(index_of("{\"manifests\":[]}", plans, &n, &e), -EINVAL);
	assert_int_equal(index_of("[", plans, &n, &e), -EINVAL);
	assert_int_equal(index_of("{\"manifests\":[{\"mediaType\":\"text/plain\",\"digest\":\"sha256:" HEX_A "\"}]}",
				  plans, &n, &e),
			 -ENOTSUP);
	assert_int_equal(index_of("{\"manifests\":[{\"mediaType\":\"" MT_MANIFEST "\",\"digest\":\"md5:00\"}]}",
				  plans, &n, &e),
			 -ENOTSUP);
	assert_int_equal(index_of("{\"manifests\":[{\"mediaType\":\"" MT_MANIFEST "\",\"digest\":\"sha256:" HEX_A
				  "\",\"size\":-1}]}",
				  plans, &n, &e),
			 -EINVAL);
}

static void test_manifest(void **state)
{
	(void)state;
	sup_img_plan p;
	sbx_err e;
	memset(&p, 0, sizeof(p));
	const char *ok = "{\"config\":{\"digest\":\"sha256:" HEX_A "\",\"size\":3},\"layers\":["
			 "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"sha256:" HEX_B "\"},"
			 "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"sha256:" HEX_A "\"}]}";
	assert_int_equal(sup_img_parse_manifest(ok, strlen(ok), &p, &e), 0);
	assert_int_equal(p.nlayers, 2);
	assert_string_equal(p.layers[0].hex, HEX_B);
	assert_string_equal(p.config.hex, HEX_A);
	const char *foreign = "{\"config\":{\"digest\":\"sha256:" HEX_A "\"},\"layers\":["
			      "{\"mediaType\":\"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip\","
			      "\"digest\":\"sha256:" HEX_B "\"}]}";
	assert_int_equal(sup_img_parse_manifest(foreign, strlen(foreign), &p, &e), -ENOTSUP);
	assert_non_null(strstr(e.msg, "nondistributable"));
	char big[16384];
	int n = snprintf(big, sizeof(big), "{\"config\":{\"digest\":\"sha256:" HEX_A "\"},\"layers\":[");
	for (int i = 0; i <= SUP_IMG_MAX_LAYERS; i++)
		n += snprintf(big + n, sizeof(big) - (size_t)n, "%s{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\","
			      "\"digest\":\"sha256:" HEX_B "\"}", i ? "," : "");
	snprintf(big + n, sizeof(big) - (size_t)n, "]}");
	assert_int_equal(sup_img_parse_manifest(big, strlen(big), &p, &e), -E2BIG);
}

static void test_config(void **state)
{
	(void)state;
	sup_img_config c;
	sbx_err e;
	const char *ok = "{\"rootfs\":{\"diff_ids\":[\"sha256:" HEX_A "\"]},\"config\":{\"Env\":[\"A=1\",\"PATH=/bin\"],"
			 "\"WorkingDir\":\"/srv\",\"User\":\"app:app\",\"Entrypoint\":[\"/.sbx/sandbox-agent\"]}}";
	assert_int_equal(sup_img_parse_config(ok, strlen(ok), &c, &e), 0);
	assert_int_equal(c.ndiff, 1);
	assert_int_equal(c.nenv, 2);
	assert_string_equal(c.env[1], "PATH=/bin");
	assert_string_equal(c.workdir, "/srv");
	assert_string_equal(c.user, "app:app");
	assert_string_equal(c.entry0, "/.sbx/sandbox-agent");
	assert_null(c.service);
	sup_img_config_release(&c);
	/* the image's service: its label, an absolute path; other labels
	 * are not ours to judge */
	const char *svc = "{\"rootfs\":{\"diff_ids\":[]},\"config\":{\"Labels\":{\"x\":7,"
			  "\"dev.sbx.service\":\"/usr/lib/sbx/sbx-browser\"}}}";
	assert_int_equal(sup_img_parse_config(svc, strlen(svc), &c, &e), 0);
	assert_string_equal(c.service, "/usr/lib/sbx/sbx-browser");
	sup_img_config_release(&c);
	static const char *const bad[] = {
		"{\"rootfs\":{\"diff_ids\":[]},\"config\":{\"Labels\":{\"dev.sbx.service\":\"rel/x\"}}}",
		"{\"rootfs\":{\"diff_ids\":[]},\"config\":{\"Labels\":{\"dev.sbx.service\":\"/a b\"}}}",
		"{\"rootfs\":{\"diff_ids\":[]},\"config\":{\"Labels\":{\"dev.sbx.service\":\"/a/../b\"}}}",
		"{\"rootfs\":{\"diff_ids\":[]},\"config\":{\"Labels\":{\"dev.sbx.service\":\"/\"}}}",
		"{\"rootfs\":{\"diff_ids\":[]},\"config\":{\"Labels\":{\"dev.sbx.service\":[\"/x\"]}}}",
		"{\"rootfs\":{}}",
		"{\"rootfs\":{\"diff_ids\":[\"sha256:12\"]}}",
		"{\"rootfs\":{\"diff_ids\":[]},\"config\":{\"Env\":[\"NOEQUALS\"]}}",
		"{\"rootfs\":{\"diff_ids\":[]},\"config\":{\"Env\":[\"=x\"]}}",
		"{\"rootfs\":{\"diff_ids\":[]},\"config\":{\"WorkingDir\":\"relative\"}}",
		"{\"rootfs\":{\"diff_ids\":[]},\"config\":{\"User\":7}}",
		"{\"rootfs\":{\"diff_ids\":[]},\"config\":[]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(sup_img_parse_config(bad[i], strlen(bad[i]), &c, &e), -EINVAL);
		assert_int_equal(c.nenv, 0); /* released on failure */
	}
}

static void test_docker(void **state)
{
	(void)state;
	sup_img_plan plans[4];
	size_t n;
	sbx_err e;
	const char *ok = "[{\"Config\":\"" HEX_A ".json\",\"RepoTags\":[\"multi:latest\"],"
			 "\"Layers\":[\"" HEX_B "/layer.tar\",\"blobs/sha256/" HEX_A "\"]}]";
	assert_int_equal(sup_img_parse_docker(ok, strlen(ok), plans, 4, &n, &e), 0);
	assert_int_equal(n, 1);
	assert_string_equal(plans[0].config.path, HEX_A ".json");
	assert_int_equal(plans[0].nlayers, 2);
	assert_string_equal(plans[0].layers[0].path, HEX_B "/layer.tar");
	assert_string_equal(plans[0].layers[0].hex, ""); /* known once read */
	assert_string_equal(plans[0].refs[0], "multi:latest");
	static const char *const bad[] = {
		"[{\"Config\":\"../x.json\",\"Layers\":[]}]",
		"[{\"Config\":\"/etc/passwd\",\"Layers\":[]}]",
		"[{\"Config\":\"a.json\",\"Layers\":[\"a/../../b\"]}]",
		"[{\"Config\":\"a b.json\",\"Layers\":[]}]",
		"[{\"Layers\":[]}]",
		"[]",
		"{}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sup_img_parse_docker(bad[i], strlen(bad[i]), plans, 4, &n, &e), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_digest),	 cmocka_unit_test(test_refs),
		cmocka_unit_test(test_index),	 cmocka_unit_test(test_manifest),
		cmocka_unit_test(test_config),	 cmocka_unit_test(test_docker),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
