/* File transfer throughput of the real agent: file.write then file.read of
 * one file (in the page cache) over one connection (fs_client.h), the agent
 * as PID 1 of new namespaces (agent_ns.h), beside `cat file > /dev/null`.
 * A measuring tool, not a test: run it by hand (root) against the static
 * binary, e.g. AGENT_BINARY=build/guest-agent/sandbox-agent agent_files_bench 1024
 * [KiB of window granted to the agent: default the library's] (MiB; default 256).
 * Prints MB/s each way, beside cat (read) and cp (write) of the same file.
 * The file lives in $SBX_BENCH_DIR (default /tmp; /dev/shm keeps writes in
 * memory, so the disk's write-back is not what is measured). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent_ns.h"
#include "fs_client.h"
#include "test_util.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t src_next(void *buf, size_t cap, void *ud)
{
	ssize_t n = read(*(int *)ud, buf, cap);

	return n > 0 ? (size_t)n : 0;
}

static int drop(const uint8_t *p, size_t len, void *ud)
{
	*(uint64_t *)ud += len;
	return 0;
}

static int args(msgpack_sbuffer *b, const char *root, const char *path)
{
	msgpack_packer pk;

	fc_args_begin(b, &pk, 2, root, path, strlen(path));
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 256, size = mib << 20, got = 0;
	uint32_t window = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 10) << 10 : 0;
	const char *top = getenv("SBX_BENCH_DIR");
	char dir[128], src[160], cmd[512];
	char *chunk = malloc(1 << 20);
	agent_ns ns = { 0 };
	fc c = { .fd = -1 };
	fc_result r;
	msgpack_sbuffer b;
	uint64_t id;
	double t0, up, down, cat, cp;
	int fd, ret = 1;

	snprintf(dir, sizeof(dir), "%s/sbx-files-bench-XXXXXX", top ? top : "/tmp");
	if (!chunk || !mkdtemp(dir))
		return 1;
	snprintf(src, sizeof(src), "%s/src.bin", dir);
	fd = open(src, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	for (uint64_t i = 0; fd >= 0 && i < mib; i++) {
		memset(chunk, (int)(i * 7 + 1), 1 << 20);
		if (write(fd, chunk, 1 << 20) != 1 << 20)
			goto out;
	}
	if (fd < 0 || close(fd) < 0)
		goto out;
	if (agent_ns_start(&ns, 500) < 0 || fc_connect_window(&c, ns.sock, window) < 0) {
		fprintf(stderr, "start %s failed\n", agent_ns_binary());
		goto out;
	}
	/* Warm the cache, then time cat. */
	snprintf(cmd, sizeof(cmd), "cat '%s' > /dev/null", src);
	if (system(cmd) != 0)
		goto out;
	t0 = now_s();
	if (system(cmd) != 0)
		goto out;
	cat = now_s() - t0;
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s/cp.bin' && rm -f '%s/cp.bin'", src, dir, dir);
	t0 = now_s();
	if (system(cmd) != 0)
		goto out;
	cp = now_s() - t0;

	fd = open(src, O_RDONLY | O_CLOEXEC);
	fc_result_init(&r);
	args(&b, dir, "up.bin");
	t0 = now_s();
	if (fd < 0 || fc_request(&c, "file.write", &b, &id) < 0 ||
	    fc_upload(&c, id, src_next, &fd, 0, &r) != 0 || r.failed) {
		fprintf(stderr, "upload: %s %s\n", r.code, r.msg);
		goto out;
	}
	up = now_s() - t0;
	close(fd);
	msgpack_sbuffer_destroy(&b);
	fc_result_free(&r);

	fc_result_init(&r);
	args(&b, dir, "src.bin");
	t0 = now_s();
	if (fc_request(&c, "file.read", &b, &id) < 0 || fc_finish(&c, id, drop, &got, &r) != 0 ||
	    r.failed || got != size) {
		fprintf(stderr, "download: %s %s\n", r.code, r.msg);
		goto out;
	}
	down = now_s() - t0;
	msgpack_sbuffer_destroy(&b);
	fc_result_free(&r);
	printf("window %u KiB, %llu MiB: file.write %.0f MB/s (cp %.0f), file.read %.0f MB/s "
	       "(cat %.0f)\n",
	       (window ? window : SBX_PROTO_DEFAULT_WINDOW) >> 10, (unsigned long long)mib,
	       size / up / 1e6, size / cp / 1e6, size / down / 1e6, size / cat / 1e6);
	ret = 0;
out:
	fc_close(&c);
	agent_ns_stop(&ns);
	test_rm_rf(dir);
	free(chunk);
	return ret;
}
