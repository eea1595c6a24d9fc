/* What a start does besides wiring the parts together (sup_main.c): the
 * state folder made, the agent found, the images imported and removed at
 * start, the snapshot store checked, gVisor offered, the fd limit fitted,
 * and the hash-token command. Each is called once, before the event loop
 * runs (blocking is fine here, never after). */
#include "sup_start.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sup_img_import.h"
#include "sup_log.h"
#include "sup_runc.h"
#include "sup_s3.h"
#include "sup_token.h"

/* --import-image [NAME=]PATH and --remove-image NAME at start, then the GC
 * of layers no image uses (the routes import and delete at run time). */
int sup_start_images(sup_img_store *store, const sup_config *cfg, sbx_err *err)
{
	for (size_t i = 0; i < cfg->nimports; i++) {
		const char *arg = cfg->imports[i], *eq = strchr(arg, '=');
		char name[SUP_IMG_REF_MAX + 1] = "";
		const char *path = arg;
		if (eq && !memchr(arg, '/', (size_t)(eq - arg))) {
			snprintf(name, sizeof(name), "%.*s", (int)(eq - arg), arg);
			path = eq + 1;
		}
		sup_img_imported out;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (sup_img_import_path(store, path, name[0] ? name : NULL, &out, err) < 0)
			return sbx_err_wrap(err, "--import-image");
		clock_gettime(CLOCK_MONOTONIC, &t1);
		for (size_t k = 0; k < out.n; k++)
			sup_info("image %s imported from %s (%u layer(s) unpacked, %u shared) in %ld ms",
				 out.digests[k], path, out.layers_new, out.layers_shared,
				 (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
	}
	for (size_t i = 0; i < cfg->nremoves; i++) {
		if (sup_img_store_delete(store, cfg->removes[i], err) < 0)
			return sbx_err_wrap(err, "--remove-image");
		sup_info("image %s removed", cfg->removes[i]);
	}
	uint64_t freed;
	unsigned layers;
	if (sup_img_store_gc(store, &freed, &layers, err) < 0)
		return sbx_err_wrap(err, "image GC");
	if (layers)
		sup_info("image GC: %u layer(s) no image uses removed (%llu bytes)", layers,
			 (unsigned long long)freed);
	sup_info("image store: %zu image(s), %llu bytes of layers", sup_img_store_count(store),
		 (unsigned long long)sup_img_store_usage(store));
	return 0;
}

int sup_start_mkdir_p(const char *path, mode_t mode, sbx_err *err)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return sbx_err_set(err, -ENAMETOOLONG, "%s", path);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return sbx_err_sys(err, -errno, "mkdir %s", buf);
			*p = c;
			if (c == '\0')
				break;
		}
	}
	return 0;
}

/* Default agent: beside this binary (installed), or in the build tree. */
int sup_start_find_agent(char *out, size_t size, sbx_err *err)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return sbx_err_sys(err, -errno, "readlink /proc/self/exe");
	exe[n] = '\0';
	const char *dir = dirname(exe);
	const char *cands[] = { "/sandbox-agent", "/../guest-agent/sandbox-agent" };
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		char p[PATH_MAX + 64];
		snprintf(p, sizeof(p), "%s%s", dir, cands[i]);
		char real[PATH_MAX];
		if (realpath(p, real) && access(real, X_OK) == 0) {
			snprintf(out, size, "%s", real);
			return 0;
		}
	}
	return sbx_err_set(err, -ENOENT,
			   "no sandbox-agent beside %s or in ../guest-agent: pass --agent PATH", dir);
}

/* The snapshot store answers and these credentials may use its bucket: a
 * wrong bucket, endpoint or key fails the start, not the first snapshot.
 * Blocking (a listing of one key, one retry), before the loop runs. */
int sup_start_check_snapshot_store(const sup_config *cfg, sbx_err *err)
{
	if (!cfg->snapshot_store)
		return 0;
	sup_s3_opts o = { .endpoint = cfg->s3_endpoint, .connect_timeout_ms = 3000, .retries = 1 };
	sup_s3 *s = NULL;
	int rc = sup_s3_open(cfg->snapshot_store, &o, &s, err);
	if (rc == 0)
		rc = sup_s3_check(s, err);
	sup_s3_close(s);
	if (rc < 0)
		return sbx_err_wrap(err, "--snapshot-store %s", cfg->snapshot_store);
	sup_info("snapshot store %s: the bucket answers", cfg->snapshot_store);
	return 0;
}

/* gVisor's runtime: offered when runsc answers; required (its failure is
 * the supervisor's) when --runsc was given or a --pool asks for it. */
int sup_start_offer_gvisor(const sup_config *cfg, char *root, size_t cap, sup_runtime *out,
			   sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	if (snprintf(root, cap, "%s/runsc", cfg->state_dir) >= (int)cap)
		return sbx_err_set(err, -ENAMETOOLONG, "runsc root: state folder too long");
	sup_runtime rt = {
		.binary = cfg->runsc,
		.root = cfg->runsc_root ? cfg->runsc_root : root,
		.platform = cfg->runsc_platform,
		/* loopback only, as runc's empty network namespace; gVisor's
		 * netstack ("sandbox") wants a network namespace made for it,
		 * which is the networking issue's */
		.network = "none",
	};
	bool required = cfg->runsc_given || sup_config_pools_use(cfg, SUP_ISO_GVISOR);
	sbx_err why;
	if (sup_runc_runtime_check(&rt, &why) < 0) {
		if (required) {
			*err = why;
			return sbx_err_wrap(err, "gvisor isolation");
		}
		sup_info("gvisor isolation not offered: %s", why.msg);
		return 0;
	}
	*out = rt;
	return 0;
}

/* Every connection can hold an fd: the soft limit goes up to the hard one,
 * and --max-connections down to what fits beside the sandboxes' fds. */
void sup_start_fit_fd_limit(sup_config *cfg)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	rlim_t room = rl.rlim_cur > 1024 ? rl.rlim_cur - 512 : rl.rlim_cur / 2;
	if (cfg->max_conns > room) {
		sup_warn("--max-connections %u is over what the fd limit %llu leaves; using %llu",
			 cfg->max_conns, (unsigned long long)rl.rlim_cur, (unsigned long long)room);
		cfg->max_conns = (unsigned)room;
	}
}

/* sandbox-supervisor hash-token [TOKEN]: the form a tenants file keeps a
 * token in. Without an argument the token is read from stdin (so it stays
 * out of the shell's history and the process list). */
int sup_start_hash_token(int argc, char **argv)
{
	char line[1024];
	const char *t = argc > 2 ? argv[2] : NULL;
	if (argc > 3) {
		fprintf(stderr, "usage: sandbox-supervisor hash-token [TOKEN] (or the token on stdin)\n");
		return 2;
	}
	if (!t) {
		if (!fgets(line, sizeof(line), stdin)) {
			fprintf(stderr, "sandbox-supervisor hash-token: no token on stdin\n");
			return 2;
		}
		line[strcspn(line, "\r\n")] = '\0';
		t = line;
	}
	char out[SUP_TOKEN_HASH_TEXT_LEN + 1];
	sbx_err err;
	if (!t[0] || sup_token_hash_text(t, strlen(t), out, &err) < 0) {
		fprintf(stderr, "sandbox-supervisor hash-token: %s\n", t[0] ? err.msg : "empty token");
		return 2;
	}
	printf("%s\n", out);
	return 0;
}

