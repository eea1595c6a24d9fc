/* Tests of the runc backend (sup_runc) with real runc containers and the real
 * static sandbox-agent: isolation seen from the host, both image kinds,
 * limits (cgroup files, the disk layer and its loop device), failures that
 * clean up after themselves, leftovers, concurrency, removal of hostile
 * trees, and cold-create times.
 *
 * Cleanup: each test's fixture destroys what it made, also when an assertion
 * fails; and the tests run in a child process, so that even a crash leaves
 * the parent to remove every container, mount and folder of the test's state
 * folders (it then fails the run if the tests themselves left anything). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sbx/cleanup.h"
#include "sup_disk.h"
#include "sup_fsutil.h"
#include "sup_overlay.h"
#include "sup_runc.h"
#include "sup_runc_cmd.h"

#define MAX_BOXES 16

static char g_state[64];   /* the main state folder */
static char g_state_b[64]; /* a second supervisor's state folder */
static char g_scratch[64]; /* holds each test's scratch folder */
static char g_agent[PATH_MAX];
static sup_runc_cfg g_cfg, g_cfg_b;
static sup_cgroup_host g_cgroup;
/* What every test sandbox is made with: small. */
static const sup_resources g_res = {
	.cpu_milli = 1000, .memory = 256u << 20, .pids = 256, .disk = 64u << 20 };

typedef struct fixture {
	const sup_runc_cfg *cfg[MAX_BOXES];
	sup_runc_box box[MAX_BOXES];
	int n;
	char tmp[96]; /* scratch folder (images, trees), removed in teardown */
} fixture;

/* ---- helpers ------------------------------------------------------------ */

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->tmp, sizeof(f->tmp), "%s/XXXXXX", g_scratch);
	assert_non_null(mkdtemp(f->tmp));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	int failed = 0;
	for (int i = 0; i < f->n; i++) {
		if (!f->box[i].id[0])
			continue;
		sbx_err err = {0};
		if (sup_runc_destroy(f->cfg[i], &f->box[i], &err) < 0) {
			fprintf(stderr, "teardown: %s\n", err.msg);
			failed = 1;
		}
	}
	/* a test may leave a mount in its scratch folder when it fails */
	sbx_err err = {0};
	if (sup_overlay_umount_under(f->tmp, &err) < 0 || sup_fs_rm_tree(f->tmp, &err) < 0) {
		fprintf(stderr, "teardown: %s\n", err.msg);
		failed = 1;
	}
	free(f);
	return failed ? -1 : 0;
}

/* Create through the fixture, so teardown destroys it whatever happens. A
 * slot is free again once its box is destroyed (id emptied). */
static int fx_create_iso(fixture *f, const sup_runc_cfg *cfg, const char *id, const char *image,
			 sup_isolation iso, sbx_err *err)
{
	int i = 0;
	while (i < f->n && f->box[i].id[0])
		i++;
	assert_true(i < MAX_BOXES);
	if (i == f->n)
		f->n++;
	f->cfg[i] = cfg;
	return sup_runc_create(cfg, id, image, iso, &f->box[i], err);
}

static int fx_create(fixture *f, const sup_runc_cfg *cfg, const char *id, const char *image,
		     sbx_err *err)
{
	return fx_create_iso(f, cfg, id, image, SUP_ISO_RUNC, err);
}

static sup_runc_box *fx_box(fixture *f, const char *id)
{
	for (int i = 0; i < f->n; i++)
		if (strcmp(f->box[i].id, id) == 0)
			return &f->box[i];
	fail_msg("no box %s", id);
	return NULL;
}

static void fx_destroy(fixture *f, const char *id)
{
	sup_runc_box *b = fx_box(f, id);
	sbx_err err = {0};
	int r = sup_runc_destroy(f->cfg[b - f->box], b, &err);
	if (r < 0)
		fail_msg("destroy %s: %s", id, err.msg);
	/* destroyed: teardown has nothing left to do for it */
	b->id[0] = '\0';
}

/* Run argv (a real process), capture stdout; returns the exit status. */
static int run(char *out, size_t cap, const char *const *argv)
{
	char errout[512];
	sup_runc_cmd c = {.argv = argv, .stdout_fd = -1, .stderr_fd = -1, .out = out,
			  .out_cap = cap, .errout = errout, .errout_cap = sizeof(errout),
			  .timeout_ms = 20000};
	sbx_err err = {0};
	int r = sup_runc_cmd_run(&c, &err);
	if (r < 0)
		fail_msg("run %s %s: %s", argv[0], argv[1], err.msg);
	return r;
}

/* `runc exec <cid> sh -c script` */
static int exec_sh(const sup_runc_box *b, const char *script, char *out, size_t cap)
{
	const char *argv[] = {"runc", "exec", b->container_id, "/bin/sh", "-c", script, NULL};
	return run(out, cap, argv);
}

/* Does the runtime of iso list the container? */
static bool runtime_lists(sup_isolation iso, const char *cid)
{
	static char out[1 << 16];
	static const char *const args[] = {"list", "--quiet", NULL};
	const char *argv[SUP_RUNTIME_ARGV_MAX];
	assert_int_equal(sup_runtime_argv(&g_cfg.runtimes[iso], NULL, args, argv), 0);
	assert_int_equal(run(out, sizeof(out), argv), 0);
	size_t n = strlen(cid);
	for (char *l = out; *l;) {
		char *e = strchrnul(l, '\n');
		if ((size_t)(e - l) == n && memcmp(l, cid, n) == 0)
			return true;
		l = *e ? e + 1 : e;
	}
	return false;
}

static bool mounted_under(const char *prefix)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	assert_non_null(f);
	char line[4096];
	bool found = false;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, prefix))
			found = true;
	fclose(f);
	return found;
}

static bool runc_lists(const char *cid)
{
	return runtime_lists(SUP_ISO_RUNC, cid);
}

/* Nothing of the sandbox is left: no container (in the runtime of iso),
 * mount, folder or cgroup. */
static void assert_gone_iso(sup_isolation iso, const char *cid, const char *dir)
{
	struct stat st;
	if (runtime_lists(iso, cid))
		fail_msg("container %s still listed", cid);
	if (mounted_under(dir))
		fail_msg("a mount under %s is left", dir);
	if (lstat(dir, &st) == 0 || errno != ENOENT)
		fail_msg("folder %s is left", dir);
	/* cgroup v1 (a controller) or v2 */
	const char *roots[] = {"/sys/fs/cgroup/pids", "/sys/fs/cgroup"};
	for (int i = 0; i < 2; i++) {
		char cg[256];
		snprintf(cg, sizeof(cg), "%s/sbx/%s", roots[i], cid);
		if (lstat(cg, &st) == 0)
			fail_msg("cgroup %s is left", cg);
	}
}

static void assert_gone(const char *cid, const char *dir)
{
	assert_gone_iso(SUP_ISO_RUNC, cid, dir);
}

static void assert_accepts(const sup_runc_box *b)
{
	sbx_err err = {0};
	int fd = sup_runc_connect_agent(b, 0, &err);
	if (fd < 0)
		fail_msg("connect to %s: %s", b->socket_path, err.msg);
	close(fd);
}

static void ns_link(pid_t pid, const char *ns, char *buf, size_t cap)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, ns);
	ssize_t n = readlink(path, buf, cap - 1);
	if (n < 0)
		fail_msg("readlink %s: %s", path, strerror(errno));
	buf[n] = '\0';
}

static void assert_own_ns(pid_t pid, const char *ns)
{
	char mine[64], theirs[64];
	ns_link(getpid(), ns, mine, sizeof(mine));
	ns_link(pid, ns, theirs, sizeof(theirs));
	if (strcmp(mine, theirs) == 0)
		fail_msg("the sandbox shares the host's %s namespace (%s)", ns, mine);
}

static double ms_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* ---- tests -------------------------------------------------------------- */

static void test_host_image(void **state)
{
	fixture *f = *state;
	sbx_err err = {0};
	if (fx_create(f, &g_cfg, "t-host", "host", &err) < 0)
		fail_msg("%s", err.msg);
	sup_runc_box *b = fx_box(f, "t-host");
	assert_true(b->init_pid > 1);
	assert_non_null(strstr(b->container_id, "t-host"));
	assert_accepts(b);

	assert_own_ns(b->init_pid, "net");
	assert_own_ns(b->init_pid, "pid");
	assert_own_ns(b->init_pid, "mnt");
	assert_own_ns(b->init_pid, "uts");
	assert_own_ns(b->init_pid, "ipc");

	char out[4096];
	/* the image's host binds are read-only, the writable layer is not */
	assert_int_not_equal(exec_sh(b, "touch /usr/sbx-test 2>/dev/null", out, sizeof(out)), 0);
	assert_int_not_equal(exec_sh(b, "touch /bin/sbx-test 2>/dev/null", out, sizeof(out)), 0);
	assert_int_equal(exec_sh(b, "echo hi > /workspace/x && echo t > /tmp/t", out, sizeof(out)), 0);
	char host_copy[PATH_MAX + 32];
	snprintf(host_copy, sizeof(host_copy), "%s/" SUP_DISK_UPPER "/workspace/x", b->dir);
	char buf[16];
	assert_int_equal(sup_fs_read_small(AT_FDCWD, host_copy, buf, sizeof(buf), &err), 3);
	assert_string_equal(buf, "hi\n");

	/* what the sandbox's programs see */
	assert_int_equal(exec_sh(b,
				 "hostname; id -u sandbox; stat -c %u:%a /workspace /home/sandbox /tmp; "
				 "cat /sys/class/net/lo/flags; "
				 "ls /sys/class/net | tr '\\n' ' '; echo; "
				 "python3 -c 'print(6*7)'; node -e 'console.log(43)'; "
				 "test -S /run/sandbox/agent.sock && echo sock; "
				 "grep CapBnd /proc/self/status",
				 out, sizeof(out)),
			 0);
	/* uid 1000 exists and owns its folders; loopback is the only link and
	 * is up (0x9: IFF_UP | IFF_LOOPBACK); python3 and node run */
	const char *want = "t-host\n1000\n1000:755\n1000:755\n0:1777\n0x9\nlo \n42\n43\nsock\n";
	if (strncmp(out, want, strlen(want)) != 0)
		fail_msg("unexpected: %s", out);
	/* Docker's capability set plus CAP_NET_ADMIN; no CAP_SYS_ADMIN (21) */
	assert_non_null(strstr(out, "CapBnd:\t00000000a80435fb"));

#if defined(__x86_64__)
	/* the container-level filter refuses what no capability guards */
	assert_int_equal(exec_sh(b,
				 "python3 -c 'import ctypes,os; l=ctypes.CDLL(None,use_errno=True);"
				 " r=l.syscall(250,0,0,0,0,0); print(r, ctypes.get_errno())'",
				 out, sizeof(out)),
			 0); /* 250: keyctl on x86_64 */
	assert_string_equal(out, "-1 1\n");
#endif

	char cid[64], dir[PATH_MAX];
	snprintf(cid, sizeof(cid), "%s", b->container_id);
	snprintf(dir, sizeof(dir), "%s", b->dir);
	fx_destroy(f, "t-host");
	assert_gone(cid, dir);
	/* idempotent */
	sup_runc_box again = {0};
	snprintf(again.id, sizeof(again.id), "t-host");
	assert_int_equal(sup_runc_destroy(&g_cfg, &again, &err), 0);
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	char buf[1 << 16];
	SBX_AUTO_CLOSE int in = open(from, O_RDONLY | O_CLOEXEC);
	SBX_AUTO_CLOSE int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (in < 0 || out < 0)
		fail_msg("copy %s to %s: %s", from, to, strerror(errno));
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	assert_int_equal(n, 0);
}

static void test_folder_image(void **state)
{
	fixture *f = *state;
	/* a small rootfs: Debian's static busybox and nothing else */
	char img[128], path[256];
	snprintf(img, sizeof(img), "%s/img", f->tmp);
	assert_int_equal(mkdir(img, 0755), 0);
	snprintf(path, sizeof(path), "%s/bin", img);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/etc", img);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/bin/busybox", img);
	copy_file("/bin/busybox", path, 0755);
	snprintf(path, sizeof(path), "%s/bin/sh", img);
	assert_int_equal(symlink("busybox", path), 0);

	sbx_err err = {0};
	if (fx_create(f, &g_cfg, "t-folder", img, &err) < 0)
		fail_msg("%s", err.msg);
	sup_runc_box *b = fx_box(f, "t-folder");
	assert_accepts(b);
	assert_own_ns(b->init_pid, "net");
	char out[1024];
	assert_int_equal(exec_sh(b, "/bin/busybox cat /etc/hostname; echo x > /w && /bin/busybox cat /w; "
				    "/bin/busybox stat -c %u:%a /workspace /tmp",
				 out, sizeof(out)),
			 0);
	/* /workspace and /tmp are there although the image has neither */
	assert_string_equal(out, "t-folder\nx\n1000:755\n0:1777\n");
	/* the image itself is never written */
	snprintf(path, sizeof(path), "%s/w", img);
	struct stat st;
	assert_int_equal(lstat(path, &st), -1);

	char cid[64], dir[PATH_MAX];
	snprintf(cid, sizeof(cid), "%s", b->container_id);
	snprintf(dir, sizeof(dir), "%s", b->dir);
	fx_destroy(f, "t-folder");
	assert_gone(cid, dir);
	snprintf(path, sizeof(path), "%s/bin/busybox", img);
	assert_int_equal(stat(path, &st), 0);
}

static void expect_create_fails(fixture *f, const sup_runc_cfg *cfg, const char *id,
				const char *image, int code, const char *msg_part)
{
	sbx_err err = {0};
	int r = fx_create(f, cfg, id, image, &err);
	if (r >= 0)
		fail_msg("create %s from '%s' succeeded", id, image);
	if (code && r != code)
		fail_msg("create %s from '%s': %d (%s), want %d", id, image, r, err.msg, code);
	assert_int_equal(err.code, r);
	if (!strstr(err.msg, msg_part))
		fail_msg("create %s from '%s': message '%s' lacks '%s'", id, image, err.msg, msg_part);
}

static void test_bad_input(void **state)
{
	fixture *f = *state;
	char long_id[64];
	memset(long_id, 'a', 41);
	long_id[41] = '\0';
	expect_create_fails(f, &g_cfg, "", "host", -EINVAL, "sandbox id");
	expect_create_fails(f, &g_cfg, "UPPER", "host", -EINVAL, "sandbox id");
	expect_create_fails(f, &g_cfg, "../x", "host", -EINVAL, "sandbox id");
	expect_create_fails(f, &g_cfg, long_id, "host", -EINVAL, "sandbox id");
	expect_create_fails(f, &g_cfg, "t-bad", "relative/path", -EINVAL, "not an absolute path");
	expect_create_fails(f, &g_cfg, "t-bad", "/usr/../etc", -EINVAL, "'..'");
	expect_create_fails(f, &g_cfg, "t-bad", "/nonexistent-image", -ENOENT, "nonexistent-image");
	expect_create_fails(f, &g_cfg, "t-bad", "/etc/passwd", -ENOTDIR, "not a folder");
	expect_create_fails(f, &g_cfg, "t-bad", "/", -EINVAL, "");
	expect_create_fails(f, &g_cfg, "t-bad", "/tmp/a,upperdir=/x", -EINVAL, "overlayfs");
	expect_create_fails(f, &g_cfg, "t-bad", g_state, -EINVAL, "state folder");

	/* an id in use: the second create fails and leaves the first whole */
	sbx_err err = {0};
	if (fx_create(f, &g_cfg, "t-dup", "host", &err) < 0)
		fail_msg("%s", err.msg);
	expect_create_fails(f, &g_cfg, "t-dup", "host", -EEXIST, "exists");
	assert_accepts(fx_box(f, "t-dup"));

	/* nothing of the failed ones is left */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/sandboxes/t-bad", g_state);
	struct stat st;
	assert_int_equal(lstat(dir, &st), -1);
}

static void test_agent_exits(void **state)
{
	fixture *f = *state;
	/* /bin/false runs (the host image has its libraries) and exits at once */
	sup_runc_cfg cfg = g_cfg;
	cfg.agent_path = "/bin/false";
	double t0 = ms_now();
	expect_create_fails(f, &cfg, "t-agent-exits", "host", -ECHILD, "agent exited");
	assert_true(ms_now() - t0 < 3000); /* seen at once, not at the timeout */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/sandboxes/t-agent-exits", g_state);
	struct stat st;
	assert_int_equal(lstat(dir, &st), -1);
	assert_false(mounted_under(dir));
}

static void test_runtime_fails(void **state)
{
	fixture *f = *state;
	sup_runc_cfg cfg = g_cfg;
	cfg.runtimes[SUP_ISO_RUNC].binary = "/nonexistent/runc";
	expect_create_fails(f, &cfg, "t-no-runtime", "host", -ENOENT, "/nonexistent/runc");
	/* a runtime that refuses the bundle: its message is quoted */
	cfg = g_cfg;
	cfg.agent_path = "/nonexistent-agent";
	expect_create_fails(f, &cfg, "t-rt-refuses", "host", -EIO, "runc run: exit 1");
	char dir[PATH_MAX];
	struct stat st;
	snprintf(dir, sizeof(dir), "%s/sandboxes/t-no-runtime", g_state);
	assert_int_equal(lstat(dir, &st), -1);
	snprintf(dir, sizeof(dir), "%s/sandboxes/t-rt-refuses", g_state);
	assert_int_equal(lstat(dir, &st), -1);
	assert_false(mounted_under(g_state));
}

/* Loop devices attached to images below dir. */
static int loops_under(const char *dir)
{
	char real[PATH_MAX];
	if (!realpath(dir, real))
		return 0;
	size_t n = strlen(real);
	SBX_AUTO_CLOSEDIR DIR *d = opendir("/sys/block");
	assert_non_null(d);
	int count = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		char p[300], backing[PATH_MAX];
		snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", de->d_name);
		sbx_err ignored;
		if (strncmp(de->d_name, "loop", 4) == 0 &&
		    sup_fs_read_small(AT_FDCWD, p, backing, sizeof(backing), &ignored) > 0 &&
		    strncmp(backing, real, n) == 0 && backing[n] == '/')
			count++;
	}
	return count;
}

/* A cgroup v1 or v2 file of the box's cgroup, as the kernel shows it. */
static void cgroup_file(const sup_runc_box *b, const char *ctrl, const char *file, char *buf,
			size_t cap)
{
	char p[PATH_MAX];
	if (g_cgroup.mode == SUP_CGROUP_V1)
		snprintf(p, sizeof(p), "/sys/fs/cgroup/%s%s/%s", ctrl, b->cgroup, file);
	else
		snprintf(p, sizeof(p), "/sys/fs/cgroup%s/%s", b->cgroup, file);
	sbx_err err = {0};
	if (sup_fs_read_small(AT_FDCWD, p, buf, cap, &err) < 0)
		fail_msg("%s", err.msg);
	buf[strcspn(buf, "\n")] = '\0';
}

static void test_limits(void **state)
{
	fixture *f = *state;
	sbx_err err = {0};
	if (fx_create(f, &g_cfg, "t-limits", "host", &err) < 0)
		fail_msg("%s", err.msg);
	sup_runc_box *b = fx_box(f, "t-limits");
	char buf[128], out[4096];
	bool v1 = g_cgroup.mode == SUP_CGROUP_V1;
	/* made with cfg->res through config.json */
	cgroup_file(b, "memory", v1 ? "memory.limit_in_bytes" : "memory.max", buf, sizeof(buf));
	assert_string_equal(buf, "268435456");
	cgroup_file(b, "pids", "pids.max", buf, sizeof(buf));
	assert_string_equal(buf, "256");
	assert_int_equal(loops_under(g_state), 1);

	/* acquire's change: the cgroup files and the disk reserve */
	sup_resources to = { .cpu_milli = 500, .memory = 128u << 20, .pids = 64, .disk = 96u << 20 };
	if (sup_runc_set_limits(&g_cfg, b, &g_res, &to, &err) < 0)
		fail_msg("%s", err.msg);
	cgroup_file(b, "memory", v1 ? "memory.limit_in_bytes" : "memory.max", buf, sizeof(buf));
	assert_string_equal(buf, "134217728");
	cgroup_file(b, "pids", "pids.max", buf, sizeof(buf));
	assert_string_equal(buf, "64");
	cgroup_file(b, "cpu", v1 ? "cpu.cfs_quota_us" : "cpu.max", buf, sizeof(buf));
	assert_string_equal(buf, v1 ? "50000" : "50000 100000");
	/* the sandbox sees 96 MiB free where /tmp and /workspace live */
	assert_int_equal(exec_sh(b, "df -B1 --output=avail /workspace /tmp | tail -n 2", out,
				 sizeof(out)), 0);
	unsigned long long avail1 = 0, avail2 = 0;
	assert_int_equal(sscanf(out, "%llu %llu", &avail1, &avail2), 2);
	assert_true(avail1 > (94ull << 20) && avail1 <= (96ull << 20));
	assert_int_equal(avail1, avail2);
	/* and no more than that fits, for root too */
	assert_int_not_equal(exec_sh(b, "head -c 200M /dev/zero > /tmp/fill", out, sizeof(out)), 0);
	sup_usage u = { 0 };
	if (sup_runc_usage(&g_cfg, b, &u, &err) < 0)
		fail_msg("%s", err.msg);
	assert_true(u.known & SUP_USAGE_DISK);
	/* what it wrote, and ext4's own root and lost+found */
	assert_true(u.disk > (94ull << 20) && u.disk <= (97ull << 20));
	assert_true(u.known & SUP_USAGE_MEMORY);
	assert_true(u.known & SUP_USAGE_PIDS);
	/* a figure under what it holds leaves no room until it deletes */
	sup_resources tiny = to;
	tiny.disk = 40u << 20;
	if (sup_runc_set_limits(&g_cfg, b, &to, &tiny, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(exec_sh(b, "df -B1 --output=avail /tmp | tail -n 1", out, sizeof(out)), 0);
	assert_int_equal(strtoull(out, NULL, 10), 0);
	assert_int_not_equal(exec_sh(b, "echo x > /tmp/more", out, sizeof(out)), 0);
	assert_int_equal(exec_sh(b, "rm /tmp/fill && head -c 30M /dev/zero > /tmp/fill && "
				    "df -B1 --output=avail /tmp | tail -n 1", out, sizeof(out)), 0);
	assert_true(strtoull(out, NULL, 10) < (10ull << 20));
	/* more than the image holds (its ceiling, 1 GiB here) */
	sup_resources huge = tiny;
	huge.disk = 4ull << 30;
	assert_int_equal(sup_runc_set_limits(&g_cfg, b, &tiny, &huge, &err), -ENOSPC);
	huge.disk = 1ull << 30;
	if (sup_runc_set_limits(&g_cfg, b, &tiny, &huge, &err) < 0)
		fail_msg("%s", err.msg);
	/* the agent is out of the OOM killer's choice where we may say so */
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/oom_score_adj", (int)b->init_pid);
	assert_true(sup_fs_read_small(AT_FDCWD, p, buf, sizeof(buf), &err) > 0);
	assert_int_equal(atoi(buf), g_cfg.protect_agent ? -1000 : 0);

	fx_destroy(f, "t-limits");
	assert_int_equal(loops_under(g_state), 0);
}

static void test_leftovers(void **state)
{
	fixture *f = *state;
	sbx_err err = {0};
	/* an earlier run "crashed": two sandboxes never destroyed, one of them
	 * with its container already gone (mount and folder left) */
	const sup_runc_cfg *cfgs[] = {&g_cfg, &g_cfg, &g_cfg_b};
	const char *ids[] = {"t-left-1", "t-left-2", "t-other"};
	for (int i = 0; i < 3; i++)
		if (fx_create(f, cfgs[i], ids[i], "host", &err) < 0)
			fail_msg("%s", err.msg);
	char cid[3][64], dir[3][PATH_MAX];
	for (int i = 0; i < 3; i++) {
		sup_runc_box *b = fx_box(f, ids[i]);
		snprintf(cid[i], sizeof(cid[i]), "%s", b->container_id);
		snprintf(dir[i], sizeof(dir[i]), "%s", b->dir);
	}
	const char *del[] = {"runc", "delete", "--force", cid[1], NULL};
	char out[256];
	assert_int_equal(run(out, sizeof(out), del), 0);
	/* the other supervisor's container must survive */
	assert_string_not_equal(cid[0], cid[2]);

	/* one loop device per made sandbox; one of those still mounted */
	assert_int_equal(loops_under(g_state), 2);
	int n = sup_runc_remove_leftovers(&g_cfg, NULL, 0, &err);
	if (n < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(n, 2);
	assert_int_equal(loops_under(g_state), 0);
	assert_int_equal(loops_under(g_state_b), 1);
	assert_gone(cid[0], dir[0]);
	assert_gone(cid[1], dir[1]);
	fx_box(f, "t-left-1")->id[0] = '\0';
	fx_box(f, "t-left-2")->id[0] = '\0';
	assert_true(runc_lists(cid[2]));
	assert_accepts(fx_box(f, "t-other"));
	/* nothing more to find */
	assert_int_equal(sup_runc_remove_leftovers(&g_cfg, NULL, 0, &err), 0);
}

typedef struct worker_arg {
	int idx;
	int rounds;
	int failures;
	char msg[SBX_ERR_MSG_MAX];
} worker_arg;

static void *worker(void *p)
{
	worker_arg *a = p;
	for (int i = 0; i < a->rounds; i++) {
		char id[32];
		snprintf(id, sizeof(id), "t-conc-%d-%d", a->idx, i);
		sup_runc_box b;
		sbx_err err = {0};
		if (sup_runc_create(&g_cfg, id, "host", SUP_ISO_RUNC, &b, &err) < 0) {
			a->failures++;
			snprintf(a->msg, sizeof(a->msg), "%s", err.msg);
			continue;
		}
		int fd = sup_runc_connect_agent(&b, SOCK_NONBLOCK, &err);
		if (fd < 0) {
			a->failures++;
			snprintf(a->msg, sizeof(a->msg), "%s", err.msg);
		} else {
			close(fd);
		}
		if (sup_runc_destroy(&g_cfg, &b, &err) < 0) {
			a->failures++;
			snprintf(a->msg, sizeof(a->msg), "%s", err.msg);
		}
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	(void)state;
	enum { THREADS = 4 };
	pthread_t t[THREADS];
	worker_arg a[THREADS];
	for (int i = 0; i < THREADS; i++) {
		a[i] = (worker_arg){.idx = i, .rounds = 3};
		assert_int_equal(pthread_create(&t[i], NULL, worker, &a[i]), 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < THREADS; i++)
		if (a[i].failures)
			fail_msg("worker %d: %d failures, last: %s", i, a[i].failures, a[i].msg);
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/sandboxes", g_state);
	assert_false(mounted_under(dir));
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* n cold creates of isolation, each until the agent accepts, their times
 * printed: each create must succeed; how long they take is sbx-bench's row
 * "cold create until the agent answers", which a test beside other work
 * cannot measure. */
static void time_creates(fixture *f, sup_isolation iso, int n)
{
	double ms[20] = {0};
	assert_true(n <= 20);
	for (int i = 0; i < n; i++) {
		char id[32];
		snprintf(id, sizeof(id), "t-time-%s-%d", sup_isolation_names[iso], i);
		sbx_err err = {0};
		double t0 = ms_now();
		if (fx_create_iso(f, &g_cfg, id, "host", iso, &err) < 0)
			fail_msg("%s", err.msg);
		ms[i] = ms_now() - t0;
		fx_destroy(f, id);
	}
	qsort(ms, (size_t)n, sizeof(ms[0]), cmp_double);
	printf("%s cold create until the agent accepts, %d runs: p50 %.1f ms, p90 %.1f ms, "
	       "max %.1f ms\n", sup_isolation_names[iso], n, ms[n / 2], ms[n * 9 / 10], ms[n - 1]);
}

static void test_create_time(void **state)
{
	time_creates(*state, SUP_ISO_RUNC, 20);
}

/* ---- gVisor ------------------------------------------------------------- */

static bool have_gvisor(void)
{
	if (g_cfg.runtimes[SUP_ISO_GVISOR].binary)
		return true;
	print_message("runsc does not answer: skipped\n");
	return false;
}

/* `runsc exec <cid> sh -c script` with the backend's flags */
static int exec_sh_gvisor(const sup_runc_box *b, const char *script, char *out, size_t cap)
{
	const char *args[] = {"exec", b->container_id, "/bin/sh", "-c", script, NULL};
	const char *argv[SUP_RUNTIME_ARGV_MAX];
	assert_int_equal(sup_runtime_argv(&g_cfg.runtimes[SUP_ISO_GVISOR], NULL, args, argv), 0);
	return run(out, cap, argv);
}

/* A gvisor sandbox: made by runsc, its agent reached through the socket
 * the gofer made on the host, its system calls served by gVisor's kernel
 * (another kernel release than the host's, no host process runs the
 * agent), and nothing left once destroyed. */
static void test_gvisor_image(void **state)
{
	fixture *f = *state;
	if (!have_gvisor())
		skip();
	sbx_err err = {0};
	if (fx_create_iso(f, &g_cfg, "t-gvisor", "host", SUP_ISO_GVISOR, &err) < 0)
		fail_msg("%s", err.msg);
	sup_runc_box *b = fx_box(f, "t-gvisor");
	assert_int_equal(b->isolation, SUP_ISO_GVISOR);
	assert_true(b->init_pid > 1);
	assert_accepts(b);
	assert_true(runtime_lists(SUP_ISO_GVISOR, b->container_id));
	assert_false(runc_lists(b->container_id));

	char exe[PATH_MAX], host[128], out[4096];
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)b->init_pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	assert_true(n > 0);
	exe[n] = '\0';
	if (strcmp(exe, g_agent) == 0)
		fail_msg("the agent runs as a host process (%s)", exe);
	FILE *v = fopen("/proc/sys/kernel/osrelease", "re");
	assert_non_null(v);
	assert_non_null(fgets(host, sizeof(host), v));
	fclose(v);
	int rc = exec_sh_gvisor(b, "uname -r; hostname", out, sizeof(out));
	if (rc != 0)
		fail_msg("runsc exec: exit %d: %s", rc, out);
	if (strncmp(out, host, strlen(host)) == 0)
		fail_msg("the sandbox sees the host's kernel release %s", host);
	assert_non_null(strstr(out, "\nt-gvisor\n"));

	char cid[64], dir[PATH_MAX];
	snprintf(cid, sizeof(cid), "%s", b->container_id);
	snprintf(dir, sizeof(dir), "%s", b->dir);
	fx_destroy(f, "t-gvisor");
	assert_gone_iso(SUP_ISO_GVISOR, cid, dir);
	sup_runc_box again = {.isolation = SUP_ISO_GVISOR};
	snprintf(again.id, sizeof(again.id), "t-gvisor");
	assert_int_equal(sup_runc_destroy(&g_cfg, &again, &err), 0);

	/* left behind by a crashed supervisor: found in runsc's list */
	if (fx_create_iso(f, &g_cfg, "t-gv-left", "host", SUP_ISO_GVISOR, &err) < 0)
		fail_msg("%s", err.msg);
	b = fx_box(f, "t-gv-left");
	snprintf(cid, sizeof(cid), "%s", b->container_id);
	snprintf(dir, sizeof(dir), "%s", b->dir);
	assert_int_equal(sup_runc_remove_leftovers(&g_cfg, NULL, 0, &err), 1);
	assert_gone_iso(SUP_ISO_GVISOR, cid, dir);
	b->id[0] = '\0';

	/* not offered: refused before anything is made */
	sup_runc_cfg runc_only = g_cfg;
	runc_only.runtimes[SUP_ISO_GVISOR].binary = NULL;
	sup_runc_box none;
	assert_int_equal(sup_runc_create(&runc_only, "t-gv-none", "host", SUP_ISO_GVISOR, &none,
					 &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not offered"));
}

static void test_gvisor_create_time(void **state)
{
	if (!have_gvisor())
		skip();
	time_creates(*state, SUP_ISO_GVISOR, 10);
}

/* The removal that runs on guest-written trees: deep, with symlinks out, and
 * with a mount inside that must never be emptied through. */
static void test_rm_tree(void **state)
{
	fixture *f = *state;
	char canary[128], tree[128], path[256];
	snprintf(canary, sizeof(canary), "%s/canary", f->tmp);
	snprintf(tree, sizeof(tree), "%s/tree", f->tmp);
	assert_int_equal(mkdir(canary, 0755), 0);
	snprintf(path, sizeof(path), "%s/keep", canary);
	copy_file("/etc/hostname", path, 0644);
	assert_int_equal(mkdir(tree, 0755), 0);

	/* deeper than PATH_MAX */
	SBX_AUTO_CLOSE int fd = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	for (int i = 0; i < 1200; i++) {
		assert_int_equal(mkdirat(fd, "dddd", 0755), 0);
		int next = openat(fd, "dddd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(next >= 0);
		if (i % 100 == 0) {
			assert_int_equal(symlinkat(canary, next, "out"), 0);
			assert_int_equal(symlinkat("../../../../../../../../..", next, "up"), 0);
			SBX_AUTO_CLOSE int file = openat(next, "f", O_WRONLY | O_CREAT | O_CLOEXEC, 0);
			assert_true(file >= 0);
		}
		close(fd);
		fd = next;
	}
	sbx_err err = {0};
	assert_int_equal(sup_fs_rm_tree(tree, &err), 0);
	struct stat st;
	assert_int_equal(lstat(tree, &st), -1);
	assert_int_equal(stat(path, &st), 0);

	/* a bind mount inside: refused, its content untouched */
	assert_int_equal(mkdir(tree, 0755), 0);
	char mnt[160];
	snprintf(mnt, sizeof(mnt), "%s/mnt", tree);
	assert_int_equal(mkdir(mnt, 0755), 0);
	assert_int_equal(mount(canary, mnt, NULL, MS_BIND, NULL), 0);
	int r = sup_fs_rm_tree(tree, &err);
	umount2(mnt, MNT_DETACH);
	assert_int_equal(r, -EBUSY);
	assert_non_null(strstr(err.msg, "mount point"));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(sup_fs_rm_tree(tree, &err), 0);
	/* missing is fine */
	assert_int_equal(sup_fs_rm_tree(tree, &err), 0);
}

static void test_init_checks(void **state)
{
	(void)state;
	sbx_err err = {0};
	sup_runc_cfg cfg = g_cfg;
	char longdir[128];
	snprintf(longdir, sizeof(longdir), "%s/a-state-folder-name-too-long-for-socket-paths", g_state);
	cfg.state_dir = longdir;
	assert_int_equal(sup_runc_init(&cfg, &err), -ENAMETOOLONG);
	assert_non_null(strstr(err.msg, "too long"));
	rmdir(longdir);
	cfg = g_cfg;
	cfg.runtimes[SUP_ISO_RUNC].binary = "/nonexistent/runc";
	assert_true(sup_runc_init(&cfg, &err) < 0);
	assert_non_null(strstr(err.msg, "does not answer"));
	cfg = g_cfg;
	cfg.agent_path = "relative-agent";
	assert_int_equal(sup_runc_init(&cfg, &err), -EINVAL);
	/* another process cannot take the same state folder */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		sbx_err cerr = {0};
		int r = sup_runc_init(&g_cfg, &cerr);
		_exit(r == -EBUSY && strstr(cerr.msg, "in use by another supervisor") ? 0 : 1);
	}
	int status = 0;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* a second init keeps the host skeleton as it is */
	char skel[128];
	struct stat before, after;
	snprintf(skel, sizeof(skel), "%s/images/host/rootfs", g_state);
	assert_int_equal(stat(skel, &before), 0);
	assert_int_equal(sup_runc_init(&g_cfg, &err), 0);
	assert_int_equal(stat(skel, &after), 0);
	assert_int_equal(before.st_ino, after.st_ino);
}

/* ---- main: tests in a child, the parent cleans up whatever happens ------- */

static int run_all(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_checks),
		cmocka_unit_test_setup_teardown(test_rm_tree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_host_image, setup, teardown),
		cmocka_unit_test_setup_teardown(test_folder_image, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_agent_exits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_runtime_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_leftovers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_time, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gvisor_image, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gvisor_create_time, setup, teardown),
	};
	return cmocka_run_group_tests_name("sup_runc", tests, NULL, NULL);
}

static int cleanup_state(const sup_runc_cfg *cfg)
{
	sbx_err err = {0};
	int n = sup_runc_remove_leftovers(cfg, NULL, 0, &err);
	if (n < 0)
		fprintf(stderr, "cleanup %s: %s\n", cfg->state_dir, err.msg);
	else if (n > 0)
		fprintf(stderr, "cleanup %s: the tests left %d sandbox(es)\n", cfg->state_dir, n);
	if (sup_fs_rm_tree(cfg->state_dir, &err) < 0) {
		fprintf(stderr, "cleanup: %s\n", err.msg);
		return -1;
	}
	return n;
}

int main(void)
{
	const char *agent = getenv("SBX_AGENT");
#ifdef SBX_AGENT_PATH
	if (!agent)
		agent = SBX_AGENT_PATH;
#endif
	if (!agent || !realpath(agent, g_agent)) {
		fprintf(stderr, "test_sup_runc: no agent binary (set SBX_AGENT)\n");
		return 1;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "test_sup_runc: needs root (mounts, runc)\n");
		return 1;
	}
	snprintf(g_state, sizeof(g_state), "/tmp/sbxrt-XXXXXX");
	snprintf(g_state_b, sizeof(g_state_b), "/tmp/sbxrt-XXXXXX");
	snprintf(g_scratch, sizeof(g_scratch), "/tmp/sbxrt-scratch-XXXXXX");
	if (!mkdtemp(g_state) || !mkdtemp(g_state_b) || !mkdtemp(g_scratch)) {
		perror("mkdtemp");
		return 1;
	}
	sbx_err derr = {0};
	if (sup_cgroup_detect("/sys/fs/cgroup", &g_cgroup, &derr) < 0) {
		fprintf(stderr, "test_sup_runc: %s\n", derr.msg);
		return 1;
	}
	g_cfg = (sup_runc_cfg){.runtimes = {[SUP_ISO_RUNC] = {.binary = "runc"}},
			       .state_dir = g_state, .agent_path = g_agent, .ready_timeout_ms = 10000,
			       .cgroup = &g_cgroup, .res = &g_res, .disk_ceiling = 1ull << 30,
			       .protect_agent = sup_runc_can_protect_agent()};
	/* gVisor where runsc answers (its tests are skipped otherwise), with
	 * its state below the test's state folder */
	static char runsc_root[96];
	snprintf(runsc_root, sizeof(runsc_root), "%s/runsc", g_state);
	sup_runtime gv = {.binary = "runsc", .root = runsc_root, .platform = "ptrace",
			  .network = "none"};
	sbx_err gerr = {0};
	if (sup_runc_runtime_check(&gv, &gerr) == 0)
		g_cfg.runtimes[SUP_ISO_GVISOR] = gv;
	else
		fprintf(stderr, "test_sup_runc: no gVisor: %s\n", gerr.msg);
	g_cfg_b = g_cfg;
	g_cfg_b.state_dir = g_state_b;
	sbx_err err = {0};
	int rc = 1;
	fflush(NULL);
	/* the child initialises (and so holds the state folders' locks); the
	 * parent only removes, which needs no lock once the child is gone */
	pid_t pid = fork();
	if (pid == 0) {
		/* killed with us, so a killed test run does not go on alone */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (sup_runc_init(&g_cfg, &err) < 0 || sup_runc_init(&g_cfg_b, &err) < 0) {
			fprintf(stderr, "init: %s\n", err.msg);
			_exit(1);
		}
		_exit(run_all() == 0 ? 0 : 1);
	}
	int status = 0;
	if (pid > 0 && waitpid(pid, &status, 0) == pid)
		rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	if (WIFSIGNALED(status))
		fprintf(stderr, "tests died of signal %d\n", WTERMSIG(status));
	int a = cleanup_state(&g_cfg);
	int b = cleanup_state(&g_cfg_b);
	if (a != 0 || b != 0)
		rc = 1;
	/* scratch: a mount a crashed test left, then the folder */
	if (sup_overlay_umount_under(g_scratch, &err) < 0 || sup_fs_rm_tree(g_scratch, &err) < 0) {
		fprintf(stderr, "cleanup: %s\n", err.msg);
		rc = 1;
	}
	return rc;
}
