/* The agent's component walk (agent_fsconf_walk, what resolves paths where
 * openat2 is missing: gVisor) against the kernel's openat2 under libFuzzer,
 * on a real tree whose symlinks the input makes: the tree is the guest's
 * to shape, the path a client's. Input: a byte choosing the open flags
 * and resolve flags (the combinations agent_fsconf uses), then NUL-
 * separated fields: the targets of up to four symlinks (at the root, in
 * d, d/s, d/s/t; empty: none) and the path. Checks, besides the
 * sanitizers: both fail with the same errno, or both open the same inode
 * (test_fsconf's test_walk_matches_openat2, on whatever trees and paths
 * the fuzzer finds). Where openat2 is missing (ENOSYS) nothing is compared.
 * Needs a kernel with openat2 to compare anything (5.6). */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent_fsconf_walk.h"
#include "fsconf_combos.h"

#define CHECK(x) \
	do { \
		if (!(x)) \
			abort(); \
	} while (0)

static const char *const link_at[] = { "l0", "d/l1", "d/s/l2", "d/s/t/l3" };

static int root = -1;
static bool have_openat2 = true;
static char top[64];

static const char *const dirs[] = { "root", "root/d", "root/d/s", "root/d/s/t", "root/e", "out" };
static const char *const files[] = { "root/d/f", "out/secret" };

static void cleanup(void)
{
	char p[256];
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", top, files[i]);
		unlink(p);
	}
	for (size_t i = sizeof(dirs) / sizeof(dirs[0]); i-- > 0;) {
		snprintf(p, sizeof(p), "%s/%s", top, dirs[i]);
		rmdir(p);
	}
	rmdir(top);
}

/* In the current folder (run_fuzz.cmake's scratch one, which keeps it
 * beside the reproducers when a run fails): top/root holding d/s/t, d/f
 * and e (empty), and top/out holding secret, beside the root. */
static void setup(void)
{
	char p[256];
	snprintf(top, sizeof(top), "sbx-fuzz-walk-XXXXXX");
	CHECK(mkdtemp(top));
	atexit(cleanup);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", top, dirs[i]);
		CHECK(mkdir(p, 0755) == 0);
	}
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", top, files[i]);
		int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		CHECK(fd >= 0);
		close(fd);
	}
	snprintf(p, sizeof(p), "%s/root", top);
	root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(root >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (root < 0)
		setup();
	if (size < 1 || size > 8192 || !have_openat2)
		return 0;
	size_t c = data[0] % (sizeof(fsconf_combos) / sizeof(fsconf_combos[0]));
	/* fields: four link targets and the path, NUL-terminated copies */
	char *buf = malloc(size);
	CHECK(buf);
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';
	char *field[5] = { 0 };
	char *p = buf;
	for (int i = 0; i < 5; i++) {
		field[i] = p;
		size_t n = strlen(p);
		p += n < (size_t)(buf + size - 1 - p) ? n + 1 : n;
	}
	bool made[4] = { false };
	for (int i = 0; i < 4; i++)
		if (field[i][0] && strlen(field[i]) < 512)
			made[i] = symlinkat(field[i], root, link_at[i]) == 0;
	const char *path = field[4];

	/* The kernel answers -EAGAIN when any rename on the system raced a
	 * ".." under RESOLVE_BENEATH (the machine is busy); agent_fsconf
	 * tries again, and so does this (the walk's own -EAGAIN alike). */
	struct open_how how = { .flags = fsconf_combos[c].flags | O_CLOEXEC,
				.resolve = fsconf_combos[c].resolve };
	int kr = -EAGAIN, wr = -EAGAIN;
	for (int i = 0; i < 32 && kr == -EAGAIN; i++) {
		long k = syscall(SYS_openat2, root, path, &how, sizeof(how));
		kr = k >= 0 ? (int)k : -errno;
	}
	if (kr == -ENOSYS) {
		have_openat2 = false;
	} else {
		for (int i = 0; i < 32 && wr == -EAGAIN; i++)
			wr = agent_fsconf_walk(root, path, fsconf_combos[c].flags, 0,
					       fsconf_combos[c].resolve);
		struct stat ks, ws;
		bool same = (kr >= 0) == (wr >= 0) && (kr >= 0 || kr == wr);
		if (same && kr >= 0)
			same = fstat(kr, &ks) == 0 && fstat(wr, &ws) == 0 && ks.st_dev == ws.st_dev &&
			       ks.st_ino == ws.st_ino;
		if (!same)
			fprintf(stderr, "path \"%s\" flags %#llx resolve %#llx: openat2 %d, walk %d\n",
				path, (unsigned long long)fsconf_combos[c].flags,
				(unsigned long long)fsconf_combos[c].resolve, kr, wr);
		CHECK(same);
		if (wr >= 0)
			close(wr);
	}
	if (kr >= 0)
		close(kr);
	for (int i = 0; i < 4; i++)
		if (made[i])
			CHECK(unlinkat(root, link_at[i], 0) == 0);
	free(buf);
	return 0;
}
