/* sup-s3-tool: sup_s3 from the command line, what
 * tests/integration/test_s3_store.py drives against a real s3rver:
 *   sup-s3-tool [--endpoint URL] [--part-size BYTES] [--list-page N]
 *               [--low-speed S] [--retries N] s3://bucket[/prefix] CMD ...
 *   CMD: check | put KEY FILE|- | get KEY FILE|- | head KEY | delete KEY |
 *        list [PREFIX] | uploads [PREFIX] | abort KEY UPLOAD_ID
 * A failure prints "error <negative errno>: <message>" on stderr and exits
 * 2 for -ENOENT, 1 otherwise. At the end it prints "peak_rss_kib N" on
 * stderr: this process's own peak (VmHWM, which, unlike wait4's ru_maxrss,
 * leaves out the parent's image before exec). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_s3.h"

static int print_one(void *ud, const char *key, uint64_t size, int64_t mtime)
{
	(void)ud;
	printf("%s %" PRIu64 " %" PRId64 "\n", key, size, mtime);
	return 0;
}

static int print_upload(void *ud, const char *key, const char *upload_id, int64_t initiated)
{
	(void)ud;
	printf("%s %s %" PRId64 "\n", key, upload_id, initiated);
	return 0;
}

static int usage(void)
{
	fprintf(stderr, "usage: sup-s3-tool [--endpoint URL] [--part-size B] [--list-page N] "
			"[--low-speed S] [--retries N] s3://bucket[/prefix] "
			"check|put KEY FILE|get KEY FILE|head KEY|delete KEY|list [PREFIX]|"
			"uploads [PREFIX]|abort KEY UPLOAD_ID\n");
	return 1;
}

static int run(sup_s3 *s, int argc, char **argv, sbx_err *err)
{
	const char *cmd = argv[0];
	if (strcmp(cmd, "check") == 0)
		return sup_s3_check(s, err);
	if (strcmp(cmd, "list") == 0)
		return sup_s3_list(s, argc > 1 ? argv[1] : "", print_one, NULL, err);
	if (strcmp(cmd, "uploads") == 0)
		return sup_s3_list_uploads(s, argc > 1 ? argv[1] : "", print_upload, NULL, err);
	if (argc < 2)
		return sbx_err_set(err, -EINVAL, "%s: needs a key", cmd);
	const char *key = argv[1];
	if (strcmp(cmd, "head") == 0) {
		uint64_t size = 0;
		int rc = sup_s3_head(s, key, &size, err);
		if (rc == 0)
			printf("%" PRIu64 "\n", size);
		return rc;
	}
	if (strcmp(cmd, "delete") == 0)
		return sup_s3_delete(s, key, err);
	if (strcmp(cmd, "abort") == 0)
		return argc < 3 ? sbx_err_set(err, -EINVAL, "abort: needs a key and an upload id")
				: sup_s3_abort_upload(s, key, argv[2], err);
	if (argc < 3 || (strcmp(cmd, "put") != 0 && strcmp(cmd, "get") != 0))
		return sbx_err_set(err, -EINVAL, "%s: unknown or missing its file", cmd);
	bool put = strcmp(cmd, "put") == 0;
	bool std = strcmp(argv[2], "-") == 0;
	SBX_AUTO_CLOSE int fd = std ? -1 : open(argv[2], put ? O_RDONLY | O_CLOEXEC
							  : O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!std && fd < 0)
		return sbx_err_sys(err, -errno, "open %s", argv[2]);
	int use = std ? (put ? 0 : 1) : fd;
	return put ? sup_s3_put_fd(s, key, use, err) : sup_s3_get_fd(s, key, use, err);
}

static void print_peak(void)
{
	SBX_AUTO_FCLOSE FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "VmHWM:", 6) == 0)
			fprintf(stderr, "peak_rss_kib %lu\n", strtoul(line + 6, NULL, 10));
}

int main(int argc, char **argv)
{
	sup_s3_opts o = {0};
	int i = 1;
	for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
		const char *v = argv[i + 1];
		if (strcmp(argv[i], "--endpoint") == 0)
			o.endpoint = v;
		else if (strcmp(argv[i], "--part-size") == 0)
			o.part_size = strtoull(v, NULL, 10);
		else if (strcmp(argv[i], "--list-page") == 0)
			o.list_page = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(argv[i], "--low-speed") == 0)
			o.low_speed_s = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(argv[i], "--retries") == 0)
			o.retries = (unsigned)strtoul(v, NULL, 10);
		else
			return usage();
	}
	if (argc - i < 2)
		return usage();
	sbx_err err;
	sbx_err_clear(&err);
	sup_s3 *s = NULL;
	int rc = sup_s3_open(argv[i], &o, &s, &err);
	if (rc == 0)
		rc = run(s, argc - i - 1, argv + i + 1, &err);
	sup_s3_close(s);
	if (fflush(stdout) != 0 && rc == 0)
		rc = sbx_err_sys(&err, -errno, "stdout");
	print_peak();
	if (rc < 0) {
		fprintf(stderr, "error %d: %s\n", rc, err.msg);
		return rc == -ENOENT ? 2 : 1;
	}
	return 0;
}
