/* The table of options (sup_options.c) against its readers: every option
 * gives the same sup_config from a flag and from the config file; bounds
 * and bad values are refused naming the flag, or the file, line and key;
 * the command line overrides the file; --help lists every row; README.md's
 * table is what the table prints. Rows are walked, not listed here: an
 * option added to the table is tested without a line of this file. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "sup_opt.h"

static char *dump(const sup_config *c)
{
	char *s = NULL;
	size_t n = 0;
	sbx_err e;
	FILE *f = open_memstream(&s, &n);
	assert_non_null(f);
	assert_int_equal(sup_config_write(c, f, true, &e), 0);
	fclose(f);
	return s;
}

/* A config file of text, in a fresh temporary file: its path. */
static char *file_of(const char *text)
{
	char *path = strdup("/tmp/sbx-options-XXXXXX.yaml");
	assert_non_null(path);
	int fd = mkstemps(path, 5);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static int from_args(sup_config *c, sbx_err *e, int argc, const char **argv)
{
	sbx_err_clear(e);
	assert_int_equal(sup_config_defaults(c, e), 0);
	return sup_config_args(c, argc, (char **)argv, e);
}

/* The file of text, then the command line's extra options. */
static int from_file(sup_config *c, sbx_err *e, const char *text, int argc, const char **extra)
{
	char *path = file_of(text);
	const char *argv[16] = { "sup", "--config", path };
	assert_true(argc < 13);
	for (int i = 0; i < argc; i++)
		argv[3 + i] = extra[i];
	int rc = from_args(c, e, 3 + argc, argv);
	unlink(path);
	free(path);
	return rc;
}

/* A number as the row writes it: seconds for SECS (v in ms), else as is. */
static const char *number_text(const sup_opt *o, uint64_t v, char *buf, size_t size)
{
	if (o->type == SUP_OPT_SECS)
		snprintf(buf, size, "%llu.%03llu", (unsigned long long)(v / 1000),
			 (unsigned long long)(v % 1000));
	else
		snprintf(buf, size, "%llu", (unsigned long long)v);
	return buf;
}

/* A value a row takes other than its default: its example, else one its
 * type and bounds give. */
static const char *example_of(const sup_opt *o, char *buf, size_t size)
{
	if (o->example)
		return o->example;
	switch (o->type) {
	case SUP_OPT_FLAG:
		return "true";
	case SUP_OPT_UINT:
	case SUP_OPT_SIZE:
	case SUP_OPT_SECS:
		return number_text(o, o->hi, buf, size);
	case SUP_OPT_ENUM: {
		int n = 0;
		while (o->choices[n + 1])
			n++;
		return o->choices[n];
	}
	default:
		return NULL;
	}
}

/* "key: 'value'" (a list for a repeatable option), YAML's single quotes. */
static void yaml_of(const sup_opt *o, const char *v, char *buf, size_t size)
{
	char q[600];
	size_t n = 0;
	for (const char *p = v; *p && n + 3 < sizeof(q); p++) {
		if (*p == '\'')
			q[n++] = '\'';
		q[n++] = *p;
	}
	q[n] = '\0';
	if (o->type == SUP_OPT_FLAG)
		snprintf(buf, size, "%s: %s\n", o->name, v);
	else if (o->flags & SUP_OPT_REPEAT)
		snprintf(buf, size, "%s:\n  - '%s'\n", o->name, q);
	else
		snprintf(buf, size, "%s: '%s'\n", o->name, q);
}

static void test_every_option_flag_and_file(void **state)
{
	sup_config def, a, b;
	sbx_err e;
	const char *none[] = { "sup", NULL };
	assert_int_equal(from_args(&def, &e, 1, none), 0);
	char *def_text = dump(&def);
	size_t tested = 0;
	for (size_t i = 0; i < sup_noptions; i++) {
		const sup_opt *o = &sup_options[i];
		if (!sup_opt_is_key(o))
			continue;
		char buf[64], flag[96], yaml[1024];
		const char *v = example_of(o, buf, sizeof(buf));
		if (!v)
			fail_msg("--%s: its row needs an example", o->name);
		snprintf(flag, sizeof(flag), "--%s", o->name);
		const char *argv[] = { "sup", flag, v, NULL };
		if (from_args(&a, &e, o->type == SUP_OPT_FLAG ? 2 : 3, argv) != 0)
			fail_msg("%s %s: %s", flag, v, e.msg);
		yaml_of(o, v, yaml, sizeof(yaml));
		if (from_file(&b, &e, yaml, 0, NULL) != 0)
			fail_msg("file %s: %s", yaml, e.msg);
		char *ta = dump(&a), *tb = dump(&b);
		if (strcmp(ta, tb) != 0)
			fail_msg("%s %s and the file differ:\n%s\n---\n%s", flag, v, ta, tb);
		if (strcmp(ta, def_text) == 0)
			fail_msg("%s %s: changes nothing (an example equal to the default?)", flag, v);
		free(ta);
		free(tb);
		sup_config_release(&a);
		sup_config_release(&b);
		tested++;
	}
	assert_true(tested > 80);
	free(def_text);
	sup_config_release(&def);
}

/* Out of bounds, each way in, each naming where it came from. */
static void refused_both(const sup_opt *o, const char *v, const char *want)
{
	sup_config c;
	sbx_err e;
	char flag[96], yaml[1024], where[160];
	snprintf(flag, sizeof(flag), "--%s", o->name);
	const char *argv[] = { "sup", flag, v, NULL };
	if (from_args(&c, &e, o->type == SUP_OPT_FLAG ? 2 : 3, argv) != -EINVAL)
		fail_msg("%s %s: accepted", flag, v);
	if (!strstr(e.msg, flag) || (want && !strstr(e.msg, want)))
		fail_msg("%s %s: the message %s", flag, v, e.msg);
	sup_config_release(&c);
	yaml_of(o, v, yaml, sizeof(yaml));
	snprintf(where, sizeof(where), ".yaml:%d: %s", (o->flags & SUP_OPT_REPEAT) ? 2 : 1, o->name);
	if (from_file(&c, &e, yaml, 0, NULL) != -EINVAL)
		fail_msg("file %s: accepted", yaml);
	if (!strstr(e.msg, where) || (want && !strstr(e.msg, want)))
		fail_msg("file %s: the message %s (want %s)", yaml, e.msg, where);
	sup_config_release(&c);
}

static void test_bounds(void **state)
{
	size_t tested = 0;
	for (size_t i = 0; i < sup_noptions; i++) {
		const sup_opt *o = &sup_options[i];
		char v[64];
		if (!sup_opt_is_key(o))
			continue;
		bool secs = o->type == SUP_OPT_SECS;
		switch (o->type) {
		case SUP_OPT_UINT:
		case SUP_OPT_SIZE:
		case SUP_OPT_SECS:
			refused_both(o, number_text(o, o->hi + 1, v, sizeof(v)),
				     secs ? "seconds" : "larger than");
			if (o->lo)
				refused_both(o, number_text(o, o->lo - 1, v, sizeof(v)),
					     secs ? "seconds" : "at least");
			refused_both(o, secs ? "1s" : "twelve", secs ? "seconds" : "not a number");
			tested++;
			break;
		case SUP_OPT_ENUM:
			refused_both(o, "bogus", o->choices[0]);
			tested++;
			break;
		default:
			break;
		}
	}
	assert_true(tested > 30);
}

/* Values of the string options' checks, through the file too. */
static void test_bad_values_in_file(void **state)
{
	static const char *const bad[][2] = {
		{ "state-dir", "relative" },        { "listen", "127.0.0.1" },
		{ "pool-images", "../rootfs" },     { "token", "short" },
		{ "runsc-platform", "kvm2" },       { "reuse-paths", "/tmp/../etc" },
		{ "snapshot-store", "/var/snaps" }, { "s3-endpoint", "ftp://h" },
		{ "node-name", "N1" },              { "kube-namespace", "Not_A_Label" },
		{ "advertise-url", "ftp://x" },     { "node-account", "admin" },
		{ "agent-dir", "relative" },        { "ports-domain", "UPPER.example" },
		{ "default-resources", "cpus=1,swap=0" }, { "import-image", "nopath" },
		{ "remove-image", "host" },         { "peer", "n2" },
		{ "pool", "kata:host=1" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		refused_both(sup_opt_find(bad[i][0]), bad[i][1], NULL);
}

/* The file's own mistakes: each names the file's line. */
static void test_file_errors(void **state)
{
	static const char *const cases[][2] = {
		{ "max-bodyy: 1M\n", ":1: max-bodyy: not an option" },
		{ "# a comment\nlisten: 127.0.0.1:0\nmax-body: 10\n", ":3: max-body 10: at least 1024" },
		{ "max-body: [1M]\n", ":1: max-body: want one value, not a list" },
		{ "max-body:\n  size: 1M\n", ":2: max-body: want one value, not a mapping" },
		{ "peer: n2=http://h:1\n", ":1: peer: want a list" },
		{ "- max-body\n", ":1: want a mapping of option: value" },
		{ "max-execs: 5\nmax-execs: 6\n", ":2: max-execs: given twice" },
		{ "config: /etc/sbx.yaml\n", ":1: config: the command line's only" },
		{ "help: true\n", ":1: help: the command line's only" },
		{ "max-execs: 5\nlisten: [a\n", ":3: " },
		{ "token:\n", ":1: token: no value" },
		{ "max-execs: 5\n---\nmax-execs: 6\n", "one YAML document" },
		{ "pool-reuse: maybe\n", ":1: pool-reuse maybe: want true or false" },
		{ "? [a, b]\n: 1\n", ":1: a key is not a name" },
		{ "peer:\n  - n2=http://h:1\n  - [x]\n", ":3: peer: want one value, not a list" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		sup_config c;
		sbx_err e;
		if (from_file(&c, &e, cases[i][0], 0, NULL) != -EINVAL)
			fail_msg("%s: accepted", cases[i][0]);
		if (!strstr(e.msg, cases[i][1]) || !strstr(e.msg, "/tmp/sbx-options-"))
			fail_msg("%s: %s (want %s)", cases[i][0], e.msg, cases[i][1]);
		sup_config_release(&c);
	}
	sup_config c;
	sbx_err e;
	const char *missing[] = { "sup", "--config", "/nonexistent/sbx.yaml", NULL };
	assert_int_equal(from_args(&c, &e, 3, missing), -ENOENT);
	assert_non_null(strstr(e.msg, "--config /nonexistent/sbx.yaml"));
	sup_config_release(&c);
	const char *twice[] = { "sup", "--config", "/a", "--config", "/b", NULL };
	assert_int_equal(from_args(&c, &e, 5, twice), -EINVAL);
	sup_config_release(&c);
	/* empty, or comments only: the defaults */
	sup_config def;
	const char *none[] = { "sup", NULL };
	assert_int_equal(from_args(&def, &e, 1, none), 0);
	assert_int_equal(from_file(&c, &e, "# nothing\n", 0, NULL), 0);
	char *ta = dump(&def), *tb = dump(&c);
	assert_string_equal(ta, tb);
	free(ta);
	free(tb);
	sup_config_release(&c);
	sup_config_release(&def);
}

/* The command line over the file: a scalar replaced, a list replaced
 * whole, a limits spec merged key by key (as given twice on the line). */
static void test_command_line_overrides(void **state)
{
	sup_config c;
	sbx_err e;
	const char *text = "max-execs: 5\n"
			   "pool-reuse: true\n"
			   "peer:\n  - n2=http://h:1\n  - n3=http://h:2\n"
			   "import-image:\n  - /srv/a\n"
			   "default-resources: cpus=2\n"
			   "pool:\n  - gvisor:host=1\n";
	const char *extra[] = { "--max-execs", "7", "--peer", "n4=http://h:3", "--default-resources",
				"memory=2G", "--pool", "gvisor:host=2" };
	assert_int_equal(from_file(&c, &e, text, 8, extra), 0);
	assert_int_equal(c.max_execs, 7);
	assert_true(c.pool_reuse);
	assert_int_equal(c.npeers, 1);
	assert_string_equal(c.peers[0], "n4=http://h:3");
	assert_int_equal(c.nimports, 1); /* the file's, not given on the line */
	assert_int_equal(c.res_default.cpu_milli, 2000);
	assert_int_equal(c.res_default.memory, 2ull << 30);
	assert_int_equal(c.npools, 1);
	assert_int_equal(c.pools[0].size, 2);
	/* the file's strings outlive its reading */
	assert_string_equal(c.imports[0], "/srv/a");
	sup_config_release(&c);
	/* and the checks across options see both */
	char *path = file_of("uplink-dns: 10.0.0.53\n");
	const char *argv[] = { "sup", "--config", path, NULL };
	assert_int_equal(sup_config_defaults(&c, &e), 0);
	assert_int_equal(sup_config_parse(&c, 3, (char **)argv, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "need --uplink"));
	sup_config_release(&c);
	const char *fixed[] = { "sup", "--config", path, "--uplink", "eth0", "--check-config", NULL };
	assert_int_equal(sup_config_defaults(&c, &e), 0);
	assert_int_equal(sup_config_parse(&c, 6, (char **)fixed, &e), 1);
	sup_config_release(&c);
	unlink(path);
	free(path);
}

/* What --print-config writes is a file that gives the same config back. */
static void test_written_file_reads_back(void **state)
{
	sup_config a, b;
	sbx_err e;
	const char *argv[] = { "sup", "--listen", "[::1]:0", "--pool-images", "host,/srv/a=2",
			       "--pool", "gvisor:/srv/b=1", "--peer", "n2=http://h:1", "--token",
			       "0123456789abcdef0123", "--agent-grace", "0.25", "--max-body", "65537",
			       "--uplink", "netns:x y", "--log-level", "debug", "--allow-root", NULL };
	assert_int_equal(sup_config_defaults(&a, &e), 0);
	assert_int_equal(sup_config_parse(&a, (int)(sizeof(argv) / sizeof(argv[0])) - 1, (char **)argv,
					  &e), 0);
	char *ta = dump(&a);
	assert_int_equal(from_file(&b, &e, ta, 0, NULL), 0);
	char *tb = dump(&b);
	assert_string_equal(ta, tb);
	/* the token is a secret: --print-config leaves it out */
	assert_non_null(strstr(ta, "0123456789abcdef0123"));
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);
	assert_int_equal(sup_config_write(&a, f, false, &e), 0);
	fclose(f);
	assert_null(strstr(s, "0123456789abcdef0123"));
	assert_null(strstr(s, "token"));
	free(s);
	free(ta);
	free(tb);
	sup_config_release(&a);
	sup_config_release(&b);
}

/* Every default of the table is what the config holds, written back the
 * way it was written in the row. */
static void test_defaults_are_the_table(void **state)
{
	sup_config c;
	sbx_err e;
	assert_int_equal(sup_config_defaults(&c, &e), 0);
	char *body = dump(&c), *t = NULL;
	assert_true(asprintf(&t, "\n%s", body) > 0);
	free(body);
	for (size_t i = 0; i < sup_noptions; i++) {
		const sup_opt *o = &sup_options[i];
		char want[256];
		if (!sup_opt_is_key(o) || !o->def)
			continue;
		snprintf(want, sizeof(want), "\n%s: %s\n", o->name, o->def);
		if (!strstr(t, want))
			fail_msg("--%s: default %s, the config holds:\n%s", o->name, o->def, t);
	}
	free(t);
	sup_config_release(&c);
}

static void test_help_lists_every_row(void **state)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);
	sup_config_usage(f, "sandbox-supervisor");
	fclose(f);
	size_t rows = 0, listed = 0;
	for (size_t i = 0; i < sup_noptions; i++) {
		const sup_opt *o = &sup_options[i];
		char want[96];
		if (!sup_opt_is_option(o))
			continue;
		rows++;
		snprintf(want, sizeof(want), "\n  --%s%s", o->name, o->type == SUP_OPT_FLAG ? "" : " ");
		if (!strstr(s, want))
			fail_msg("--help lacks --%s:\n%s", o->name, s);
	}
	for (const char *p = s; (p = strstr(p, "\n  --")); p++)
		listed++;
	assert_int_equal(listed, rows);
	free(s);
}

/* README.md's table is the binary's (scripts/readme-options writes it). */
static void test_readme_table(void **state)
{
	FILE *f = fopen(README_FILE, "r");
	assert_non_null(f);
	static char readme[1 << 20];
	size_t n = fread(readme, 1, sizeof(readme) - 1, f);
	fclose(f);
	readme[n] = '\0';
	const char *begin_mark = "<!-- options:begin -->\n", *end_mark = "<!-- options:end -->";
	char *begin = strstr(readme, begin_mark), *end = begin ? strstr(begin, end_mark) : NULL;
	if (!begin || !end)
		fail_msg("README.md: no %s ... %s block", begin_mark, end_mark);
	begin += strlen(begin_mark);
	*end = '\0';
	char *s = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&s, &len);
	sup_config_markdown(m);
	fclose(m);
	if (strcmp(begin, s) != 0)
		fail_msg("README.md's table of options is not the table's: run "
			 "scripts/readme-options BUILD/node-supervisor/sandbox-supervisor");
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_option_flag_and_file),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_bad_values_in_file),
		cmocka_unit_test(test_file_errors),
		cmocka_unit_test(test_command_line_overrides),
		cmocka_unit_test(test_written_file_reads_back),
		cmocka_unit_test(test_defaults_are_the_table),
		cmocka_unit_test(test_help_lists_every_row),
		cmocka_unit_test(test_readme_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
