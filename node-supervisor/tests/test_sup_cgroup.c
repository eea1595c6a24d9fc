/* sup_cgroup: limits written into a sandbox's cgroup and usage read back.
 *
 * Both layouts against trees of plain files (what is written where, v2's
 * cpu.max format, the keyed files parsed), then the real kernel: on this
 * host's cgroup v1 hierarchies (memory/memsw in the order the kernel
 * accepts, pids, CPU quota, usage of a process moved in) and on a real
 * cgroup2 mount (/sys/fs/cgroup itself on a unified host, else
 * /sys/fs/cgroup/unified on a hybrid one: detection, and the figures it can
 * give without the controllers that v1 holds, and its freezer holding a
 * spinner still). The freezer on trees too. Root needed for the real
 * parts; every cgroup made is removed, also on failure. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <linux/magic.h>
#include <unistd.h>
#include <cmocka.h>

#include "sup_cgroup.h"

#define M (1ull << 20)
#define G (1ull << 30)

static char g_tree[64];

static void put(const char *dir, const char *name, const char *text)
{
	char p[2048];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void get(const char *dir, const char *name, char *buf, size_t cap)
{
	char p[2048];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "r");
	if (!f)
		fail_msg("open %s: %s", p, strerror(errno));
	size_t n = fread(buf, 1, cap - 1, f);
	buf[n] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
}

static void mkdirs(const char *path)
{
	char b[512];
	snprintf(b, sizeof(b), "%s", path);
	for (char *s = b + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(b, 0755);
			*s = '/';
		}
	mkdir(b, 0755);
}

static int tree_setup(void **state)
{
	(void)state;
	snprintf(g_tree, sizeof(g_tree), "/tmp/sup-cgroup-XXXXXX");
	return mkdtemp(g_tree) ? 0 : -1;
}

static int tree_teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tree);
	return system(cmd) == 0 ? 0 : -1;
}

static const sup_resources base = { .cpu_milli = 1000, .memory = G, .pids = 1024, .disk = 10 * G };

static void test_v2_tree(void **state)
{
	(void)state;
	char root[128], cg[192], buf[128];
	snprintf(root, sizeof(root), "%s/v2", g_tree);
	snprintf(cg, sizeof(cg), "%s/sbx/sbx-t-c1", root);
	mkdirs(cg);
	put(cg, "memory.max", "1073741824\n");
	put(cg, "pids.max", "1024\n");
	put(cg, "cpu.max", "100000 100000\n");
	sup_cgroup_host h;
	sbx_err e;
	assert_int_equal(sup_cgroup_host_init(&h, root, SUP_CGROUP_V2, true, &e), 0);

	sup_resources to = { .cpu_milli = 500, .memory = 256 * M, .pids = 256, .disk = 512 * M };
	assert_int_equal(sup_cgroup_apply(&h, "/sbx/sbx-t-c1", &base, &to, &e), 0);
	get(cg, "memory.max", buf, sizeof(buf));
	assert_string_equal(buf, "268435456");
	get(cg, "pids.max", buf, sizeof(buf));
	assert_string_equal(buf, "256");
	get(cg, "cpu.max", buf, sizeof(buf));
	assert_string_equal(buf, "50000 100000");

	/* only what differs is written */
	put(cg, "pids.max", "untouched");
	sup_resources to2 = to;
	to2.cpu_milli = 2250;
	assert_int_equal(sup_cgroup_apply(&h, "/sbx/sbx-t-c1", &to, &to2, &e), 0);
	get(cg, "pids.max", buf, sizeof(buf));
	assert_string_equal(buf, "untouched");
	get(cg, "cpu.max", buf, sizeof(buf));
	assert_string_equal(buf, "225000 100000");
	assert_int_equal(sup_cgroup_unthrottle(&h, "/sbx/sbx-t-c1", &e), 0);
	get(cg, "cpu.max", buf, sizeof(buf));
	assert_string_equal(buf, "max 100000");

	put(cg, "memory.current", "4096000\n");
	put(cg, "memory.peak", "9000000\n");
	put(cg, "pids.current", "3\n");
	put(cg, "memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n");
	put(cg, "cpu.stat", "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n");
	sup_usage u = { .disk = 77, .known = SUP_USAGE_DISK };
	assert_int_equal(sup_cgroup_read(&h, "/sbx/sbx-t-c1", &u, &e), 0);
	assert_int_equal(u.known, SUP_USAGE_DISK | SUP_USAGE_MEMORY | SUP_USAGE_MEMORY_PEAK |
					  SUP_USAGE_CPU | SUP_USAGE_PIDS | SUP_USAGE_OOM_KILLS);
	assert_int_equal(u.memory, 4096000);
	assert_int_equal(u.memory_peak, 9000000);
	assert_int_equal(u.pids, 3);
	assert_int_equal(u.oom_kills, 2);
	assert_int_equal(u.cpu_ns, 1500000000ull);
	assert_int_equal(u.disk, 77);

	/* no memory.peak (before Linux 5.19): the rest still comes */
	char p[256];
	snprintf(p, sizeof(p), "%s/memory.peak", cg);
	unlink(p);
	assert_int_equal(sup_cgroup_read(&h, "/sbx/sbx-t-c1", &u, &e), 0);
	assert_false(u.known & SUP_USAGE_MEMORY_PEAK);
	assert_true(u.known & SUP_USAGE_CPU);

	/* a cgroup that is gone: an error, nothing known */
	assert_true(sup_cgroup_read(&h, "/sbx/gone", &u, &e) < 0);
	assert_int_equal(u.known, SUP_USAGE_DISK);
	assert_int_equal(sup_cgroup_apply(&h, "/sbx/gone", &base, &to, &e), -ENOENT);
	assert_non_null(strstr(e.msg, "set limits of cgroup /sbx/gone"));
}

/* The freezer, against trees: which file is written on each layout, the
 * wait for the kernel's word, and the undo when it does not come. */
static void test_freeze_trees(void **state)
{
	(void)state;
	char root[128], cg[192], buf[128];
	sup_cgroup_host h;
	sbx_err e;
	/* v2: cgroup.freeze, then cgroup.events says frozen */
	snprintf(root, sizeof(root), "%s/fz2", g_tree);
	snprintf(cg, sizeof(cg), "%s/sbx/c", root);
	mkdirs(cg);
	put(cg, "cgroup.freeze", "0\n");
	put(cg, "cgroup.events", "populated 1\nfrozen 1\n");
	assert_int_equal(sup_cgroup_host_init(&h, root, SUP_CGROUP_V2, false, &e), 0);
	assert_int_equal(sup_cgroup_freeze(&h, "/sbx/c", true, &e), 0);
	get(cg, "cgroup.freeze", buf, sizeof(buf));
	assert_string_equal(buf, "1");
	assert_int_equal(sup_cgroup_freeze(&h, "/sbx/c", false, &e), 0);
	get(cg, "cgroup.freeze", buf, sizeof(buf));
	assert_string_equal(buf, "0");
	/* the kernel never says frozen: undone, -EBUSY */
	put(cg, "cgroup.events", "populated 1\nfrozen 0\n");
	assert_int_equal(sup_cgroup_freeze(&h, "/sbx/c", true, &e), -EBUSY);
	assert_non_null(strstr(e.msg, "thawed again"));
	get(cg, "cgroup.freeze", buf, sizeof(buf));
	assert_string_equal(buf, "0");
	/* gone */
	assert_int_equal(sup_cgroup_freeze(&h, "/sbx/gone", true, &e), -ENOENT);

	/* v1 without a unified mount holding it: freezer.state */
	snprintf(root, sizeof(root), "%s/fz1", g_tree);
	snprintf(cg, sizeof(cg), "%s/freezer/sbx/c", root);
	mkdirs(cg);
	put(cg, "freezer.state", "THAWED\n");
	assert_int_equal(sup_cgroup_host_init(&h, root, SUP_CGROUP_V1, false, &e), 0);
	/* a plain file reads back what was written: FROZEN at once */
	assert_int_equal(sup_cgroup_freeze(&h, "/sbx/c", true, &e), 0);
	get(cg, "freezer.state", buf, sizeof(buf));
	assert_string_equal(buf, "FROZEN");
	assert_int_equal(sup_cgroup_freeze(&h, "/sbx/c", false, &e), 0);
	get(cg, "freezer.state", buf, sizeof(buf));
	assert_string_equal(buf, "THAWED");

	/* hybrid: the unified mount's cgroup.freeze; a thaw also thaws what
	 * was frozen through v1 (runc pause), and only then writes there */
	char u[192];
	snprintf(u, sizeof(u), "%s/unified/sbx/c", root);
	mkdirs(u);
	put(u, "cgroup.freeze", "0\n");
	put(u, "cgroup.events", "frozen 1\n");
	put(cg, "freezer.state", "untouched");
	assert_int_equal(sup_cgroup_freeze(&h, "/sbx/c", true, &e), 0);
	get(u, "cgroup.freeze", buf, sizeof(buf));
	assert_string_equal(buf, "1");
	get(cg, "freezer.state", buf, sizeof(buf));
	assert_string_equal(buf, "untouched");
	put(cg, "freezer.state", "THAWED\n");
	assert_int_equal(sup_cgroup_freeze(&h, "/sbx/c", false, &e), 0);
	get(u, "cgroup.freeze", buf, sizeof(buf));
	assert_string_equal(buf, "0");
	put(cg, "freezer.state", "FROZEN\n");
	assert_int_equal(sup_cgroup_freeze(&h, "/sbx/c", false, &e), 0);
	get(cg, "freezer.state", buf, sizeof(buf));
	assert_string_equal(buf, "THAWED");
}

static void test_v1_tree(void **state)
{
	(void)state;
	char root[128], d[256], buf[128];
	snprintf(root, sizeof(root), "%s/v1", g_tree);
	static const char *const ctrls[] = { "memory", "pids", "cpu", "cpuacct" };
	for (int i = 0; i < 4; i++) {
		snprintf(d, sizeof(d), "%s/%s/sbx/c2", root, ctrls[i]);
		mkdirs(d);
	}
	sup_cgroup_host h;
	sbx_err e;
	assert_int_equal(sup_cgroup_host_init(&h, root, SUP_CGROUP_V1, true, &e), 0);
	sup_resources to = { .cpu_milli = 1500, .memory = 2 * G, .pids = 64, .disk = G };
	snprintf(d, sizeof(d), "%s/memory/sbx/c2", root);
	put(d, "memory.limit_in_bytes", "");
	put(d, "memory.memsw.limit_in_bytes", "");
	snprintf(d, sizeof(d), "%s/pids/sbx/c2", root);
	put(d, "pids.max", "1024\n");
	snprintf(d, sizeof(d), "%s/cpu/sbx/c2", root);
	put(d, "cpu.cfs_quota_us", "100000\n");
	snprintf(d, sizeof(d), "%s/memory/sbx/c2", root);
	assert_int_equal(sup_cgroup_apply(&h, "/sbx/c2", &base, &to, &e), 0);
	get(d, "memory.limit_in_bytes", buf, sizeof(buf));
	assert_string_equal(buf, "2147483648");
	get(d, "memory.memsw.limit_in_bytes", buf, sizeof(buf));
	assert_string_equal(buf, "2147483648");
	put(d, "memory.usage_in_bytes", "123\n");
	put(d, "memory.max_usage_in_bytes", "456\n");
	put(d, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 7\n");
	snprintf(d, sizeof(d), "%s/pids/sbx/c2", root);
	get(d, "pids.max", buf, sizeof(buf));
	assert_string_equal(buf, "64");
	put(d, "pids.current", "5\n");
	snprintf(d, sizeof(d), "%s/cpu/sbx/c2", root);
	get(d, "cpu.cfs_quota_us", buf, sizeof(buf));
	assert_string_equal(buf, "150000");
	assert_int_equal(sup_cgroup_unthrottle(&h, "/sbx/c2", &e), 0);
	get(d, "cpu.cfs_quota_us", buf, sizeof(buf));
	assert_string_equal(buf, "-1");
	snprintf(d, sizeof(d), "%s/cpuacct/sbx/c2", root);
	put(d, "cpuacct.usage", "987654321\n");
	sup_usage u = { 0 };
	assert_int_equal(sup_cgroup_read(&h, "/sbx/c2", &u, &e), 0);
	assert_int_equal(u.memory, 123);
	assert_int_equal(u.memory_peak, 456);
	assert_int_equal(u.oom_kills, 7);
	assert_int_equal(u.pids, 5);
	assert_int_equal(u.cpu_ns, 987654321);
	/* a file that does not hold a number */
	snprintf(d, sizeof(d), "%s/pids/sbx/c2", root);
	put(d, "pids.current", "many\n");
	assert_int_equal(sup_cgroup_read(&h, "/sbx/c2", &u, &e), 0);
	assert_false(u.known & SUP_USAGE_PIDS);
}

/* ---- the real kernel ---- */

static bool is_cgroup2(const char *p)
{
	struct statfs fs;
	return statfs(p, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

/* What a real test made, removed by its teardown whatever happened. */
static char g_made[4][256];
static pid_t g_child;

static int remove_made(void **state)
{
	(void)state;
	if (g_child > 0) {
		kill(g_child, SIGKILL);
		waitpid(g_child, NULL, 0);
		g_child = 0;
	}
	int rc = 0;
	for (int i = 3; i >= 0; i--)
		if (g_made[i][0]) {
			if (rmdir(g_made[i]) < 0 && errno != ENOENT) {
				fprintf(stderr, "rmdir %s: %s\n", g_made[i], strerror(errno));
				rc = -1;
			}
			g_made[i][0] = '\0';
		}
	return rc;
}

/* A child that spins until killed. */
static pid_t spinner(void)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (;;)
			__asm__ volatile("" ::: "memory");
	}
	return pid;
}

static void enter(const char *dir, pid_t pid)
{
	char v[32];
	snprintf(v, sizeof(v), "%d", (int)pid);
	put(dir, "cgroup.procs", v);
}

static void test_real_v1(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	sup_cgroup_host h;
	sbx_err e;
	if (is_cgroup2("/sys/fs/cgroup") || sup_cgroup_detect("/sys/fs/cgroup", &h, &e) < 0)
		skip(); /* not a v1 host */
	assert_int_equal(h.mode, SUP_CGROUP_V1);
	char path[64], buf[64];
	snprintf(path, sizeof(path), "/sbx-unit-%d", (int)getpid());
	static const char *const ctrls[] = { "memory", "pids", "cpu", "cpuacct" };
	for (int i = 0; i < 4; i++) {
		snprintf(g_made[i], sizeof(g_made[i]), "/sys/fs/cgroup/%s%s", ctrls[i], path);
		assert_int_equal(mkdir(g_made[i], 0755), 0);
	}
	g_child = spinner();
	for (int i = 0; i < 4; i++)
		enter(g_made[i], g_child);

	/* fresh cgroups: memory and memsw are "max"; shrink, shrink, grow: a
	 * wrong order is refused by the kernel (memory above memory+swap) */
	sup_resources big = base, mid = base, small = base;
	big.memory = 2 * G;
	mid.memory = G;
	small.memory = 256 * M;
	small.pids = 64;
	small.cpu_milli = 250;
	if (sup_cgroup_apply(&h, path, &big, &mid, &e) < 0 ||
	    sup_cgroup_apply(&h, path, &mid, &small, &e) < 0)
		fail_msg("%s", e.msg);
	get(g_made[0], "memory.limit_in_bytes", buf, sizeof(buf));
	assert_string_equal(buf, "268435456");
	if (h.swap) {
		get(g_made[0], "memory.memsw.limit_in_bytes", buf, sizeof(buf));
		assert_string_equal(buf, "268435456");
	}
	get(g_made[1], "pids.max", buf, sizeof(buf));
	assert_string_equal(buf, "64");
	get(g_made[2], "cpu.cfs_quota_us", buf, sizeof(buf));
	assert_string_equal(buf, "25000");
	/* lifted (a destroy's first step), then set again */
	if (sup_cgroup_unthrottle(&h, path, &e) < 0)
		fail_msg("%s", e.msg);
	get(g_made[2], "cpu.cfs_quota_us", buf, sizeof(buf));
	assert_string_equal(buf, "-1");
	if (sup_cgroup_apply(&h, path, &small, &big, &e) < 0)
		fail_msg("%s", e.msg);
	get(g_made[0], "memory.limit_in_bytes", buf, sizeof(buf));
	assert_string_equal(buf, "2147483648");
	get(g_made[2], "cpu.cfs_quota_us", buf, sizeof(buf));
	assert_string_equal(buf, "100000");
	usleep(200 * 1000);
	sup_usage u = { 0 };
	if (sup_cgroup_read(&h, path, &u, &e) < 0)
		fail_msg("%s", e.msg);
	assert_true(u.known & SUP_USAGE_MEMORY);
	assert_true(u.known & SUP_USAGE_MEMORY_PEAK);
	assert_true(u.known & SUP_USAGE_OOM_KILLS);
	assert_int_equal(u.pids, 1);
	assert_int_equal(u.oom_kills, 0);
	/* the spinner had 200 ms at a quarter CPU, then 2 CPUs */
	assert_true(u.cpu_ns > 10 * 1000 * 1000);
}

static void test_real_v2(void **state)
{
	(void)state;
	const char *root = is_cgroup2("/sys/fs/cgroup") ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified";
	if (geteuid() != 0 || !is_cgroup2(root))
		skip();
	sup_cgroup_host h;
	sbx_err e;
	int r = sup_cgroup_detect(root, &h, &e);
	/* On a hybrid host memory, pids and cpu belong to v1: detection says
	 * which controller is missing rather than limiting nothing. */
	if (r < 0) {
		assert_int_equal(r, -ENOTSUP);
		assert_non_null(strstr(e.msg, "controller is not available"));
		print_message("cgroup v2 at %s: %s\n", root, e.msg);
		assert_int_equal(sup_cgroup_host_init(&h, root, SUP_CGROUP_V2, false, &e), 0);
	}
	char path[64];
	snprintf(path, sizeof(path), "/sbx-unit-%d", (int)getpid());
	snprintf(g_made[0], sizeof(g_made[0]), "%s%s", root, path);
	assert_int_equal(mkdir(g_made[0], 0755), 0);
	g_child = spinner();
	enter(g_made[0], g_child);
	usleep(200 * 1000);
	sup_usage u = { 0 };
	if (sup_cgroup_read(&h, path, &u, &e) < 0)
		fail_msg("%s", e.msg);
	/* cpu.stat is kept for every v2 cgroup, controller or not */
	assert_true(u.known & SUP_USAGE_CPU);
	assert_true(u.cpu_ns > 50 * 1000 * 1000);
	print_message("cgroup v2 at %s: known figures 0x%x, cpu %.3f s\n", root, u.known,
		      (double)u.cpu_ns / 1e9);
	/* the freezer is v2's own (no controller): frozen, the spinner uses
	 * no CPU; thawed, it spins again */
	assert_int_equal(sup_cgroup_freeze(&h, path, true, &e), 0);
	sup_usage u1 = { 0 }, u2 = { 0 };
	assert_int_equal(sup_cgroup_read(&h, path, &u1, &e), 0);
	usleep(300 * 1000);
	assert_int_equal(sup_cgroup_read(&h, path, &u2, &e), 0);
	assert_true(u2.cpu_ns - u1.cpu_ns < 1000 * 1000);
	assert_int_equal(sup_cgroup_freeze(&h, path, false, &e), 0);
	usleep(300 * 1000);
	assert_int_equal(sup_cgroup_read(&h, path, &u1, &e), 0);
	assert_true(u1.cpu_ns > u2.cpu_ns);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_v2_tree),
		cmocka_unit_test(test_v1_tree),
		cmocka_unit_test(test_freeze_trees),
		cmocka_unit_test_teardown(test_real_v1, remove_made),
		cmocka_unit_test_teardown(test_real_v2, remove_made),
	};
	return cmocka_run_group_tests(tests, tree_setup, tree_teardown);
}
