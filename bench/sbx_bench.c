/* sbx-bench: the figures of BENCHMARKS.md, each beside its peer and floor,
 * measured on this machine in one run.
 *
 *   exec of `true`: posix_spawn on the host (floor), `runc exec` into the
 *   sandbox's container (peer), the agent socket directly, the HTTP API;
 *   acquire from a warm pool, without and with `resources`, and with a
 *   network policy; cold create until the agent answers, without and with
 *   egress plumbing; a neighbour's exec beside a busy loop and beside a
 *   fork bomb held by `pids`, and the bomb's DELETE;
 *   streaming throughput of `head -c N /dev/zero` through SSE, beside the
 *   ceiling of a plain unix socketpair, with the CPU each side spent;
 *   the HTTP edge: requests/s of 64 keep-alive clients (wrk) on GET
 *   /v1/sandboxes/{id}, and the supervisor's RSS and exec p50 with 10,000
 *   idle keep-alive connections; each also for --before SUPERVISOR (another
 *   build, e.g. main's) in the same run, as its peer.
 *   Where runsc answers, the same exec paths, streaming and cold create
 *   again with sandboxes of gvisor isolation (gVisor, ptrace platform),
 *   `runsc exec` as their peer.
 *
 * It starts its own supervisor (temp state folder, free loopback port) and
 * stops it, which removes every container it made (and its router's
 * namespace); then it removes the state folder and the supervisor's log.
 * Egress goes to an empty network namespace a child of the bench holds
 * (nothing leaves the machine, and nothing named is left behind). */
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_agent.h"
#include "bench_edge.h"
#include "bench_http.h"
#include "bench_proc.h"
#include "bench_results.h"
#include "bench_stats.h"
#include "bench_sys.h"

typedef struct bench_opts {
	const char *build_dir;
	const char *runtime;
	int iterations;
	int pool_rounds;
	int cold_rounds;
	int stream_mb;
	int stream_runs;
	const char *before;  /* another build's sandbox-supervisor, or NULL */
	int idle_conns;
} bench_opts;

typedef struct supervisor {
	pid_t pid;
	const char *isolation;  /* of the sandboxes it makes: "runc", "gvisor" */
	char rt[PATH_MAX + 32]; /* the runtime's command: "runc", "runsc --root <state>/runsc" */
	char rt_root[PATH_MAX + 8]; /* runsc's --root, "" for runc */
	char state_dir[PATH_MAX];
	char url[64];
	char token[65];
	bench_http *http;
} supervisor;

/* s as given for runc sandboxes, after prefix for gVisor's: in buf. */
static const char *for_isolation(const supervisor *sv, const char *prefix, const char *s, char *buf,
				 size_t size)
{
	if (strcmp(sv->isolation, "gvisor") != 0)
		return s;
	snprintf(buf, size, "%s%s", prefix, s);
	return buf;
}

/* A row's name: as given for runc sandboxes, "gvisor: ..." for gVisor's. */
static const char *row(const supervisor *sv, const char *what)
{
	static char buf[128];
	return for_isolation(sv, "gvisor: ", what, buf, sizeof(buf));
}

/* A row's key in the results: "gvisor.<key>" for gVisor's sandboxes. */
static const char *key_of(const supervisor *sv, const char *key)
{
	static char buf[96];
	return for_isolation(sv, "gvisor.", key, buf, sizeof(buf));
}

/* A latency row, printed and (when it has samples) written as a result. */
static void report(const char *key, const char *what, bench_samples *s, const char *note)
{
	double p50 = bench_samples_pct(s, 50), p99 = bench_samples_pct(s, 99);
	printf("| %-44s | %6zu | %8.3f | %8.3f | %s |\n", what, s->n, p50, p99, note);
	fflush(stdout);
	if (s->n)
		bench_result(key, what, note,
			     json_pack("{s:I,s:f,s:f}", "n", (json_int_t)s->n, "p50_ms", p50,
				       "p99_ms", p99));
}

/* A supervisor whose pool of isolation keeps pool_size ready (no other).
 * uplink: NULL (sandboxes loopback only), or the path of a network
 * namespace for --uplink; exe_path: its binary (NULL: the build's). */
static bool supervisor_start_exe(supervisor *sv, const bench_opts *o, const char *isolation,
				 int pool_size, const char *uplink, const char *exe_path)
{
	snprintf(sv->state_dir, sizeof(sv->state_dir), "/tmp/sbx-bench-XXXXXX");
	if (!mkdtemp(sv->state_dir))
		return false;
	bool gvisor = strcmp(isolation, "gvisor") == 0;
	sv->isolation = isolation;
	sv->rt_root[0] = '\0';
	if (gvisor)
		snprintf(sv->rt_root, sizeof(sv->rt_root), "%s/runsc", sv->state_dir);
	if (gvisor)
		snprintf(sv->rt, sizeof(sv->rt), "runsc --root %s", sv->rt_root);
	else
		snprintf(sv->rt, sizeof(sv->rt), "%s", o->runtime);
	int port = bench_free_port();
	snprintf(sv->url, sizeof(sv->url), "http://127.0.0.1:%d", port);
	FILE *r = fopen("/dev/urandom", "r");
	unsigned char raw[32];
	if (!r || fread(raw, 1, sizeof(raw), r) != sizeof(raw)) {
		if (r)
			fclose(r);
		return false;
	}
	fclose(r);
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(sv->token + 2 * i, 3, "%02x", raw[i]);

	char exe[PATH_MAX], agent[PATH_MAX], listen[64], pool[16], gpool[32], log[PATH_MAX + 16];
	snprintf(exe, sizeof(exe), "%s", exe_path ? exe_path : "");
	if (!exe_path)
		snprintf(exe, sizeof(exe), "%s/node-supervisor/sandbox-supervisor", o->build_dir);
	snprintf(agent, sizeof(agent), "%s/guest-agent/sandbox-agent", o->build_dir);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	snprintf(pool, sizeof(pool), "%d", gvisor ? 0 : pool_size);
	snprintf(gpool, sizeof(gpool), "gvisor:host=%d", pool_size);
	snprintf(log, sizeof(log), "%s.log", sv->state_dir);
	char *argv[24] = {exe, "--listen", listen, "--state-dir", sv->state_dir,
			  "--pool-size", pool, "--agent", agent, "--token", sv->token,
			  "--runtime", (char *)o->runtime};
	size_t n = 13;
	if (gvisor) {
		argv[n++] = "--pool";
		argv[n++] = gpool;
	}
	if (uplink) {
		/* the resolver is never asked: the policies name no test host */
		char *net[] = {"--uplink", (char *)uplink, "--uplink-dns", "192.0.2.53"};
		memcpy(argv + n, net, sizeof(net));
	}
	sv->pid = bench_spawn_bg(argv, log);
	if (sv->pid < 0)
		return false;
	sv->http = bench_http_new(sv->url, sv->token);
	for (int i = 0; i < 1000; i++) {
		if (bench_http_do(sv->http, "GET", "/healthz", NULL) == 200)
			return true;
		if (waitpid(sv->pid, NULL, WNOHANG) == sv->pid) {
			fprintf(stderr, "supervisor exited; see %s\n", log);
			sv->pid = -1;
			return false;
		}
		usleep(10000);
	}
	return false;
}

static bool supervisor_start(supervisor *sv, const bench_opts *o, const char *isolation,
			     int pool_size, const char *uplink)
{
	return supervisor_start_exe(sv, o, isolation, pool_size, uplink, NULL);
}

static void supervisor_stop(supervisor *sv)
{
	/* SIGINT: the stop that destroys its sandboxes (SIGTERM leaves them) */
	bench_stop(sv->pid, SIGINT, 30000);
	sv->pid = -1;
	bench_http_free(sv->http);
	sv->http = NULL;
	if (!sv->state_dir[0])
		return;
	char log[PATH_MAX + 16];
	snprintf(log, sizeof(log), "%s.log", sv->state_dir);
	if (bench_rm_tree(sv->state_dir) < 0)
		fprintf(stderr, "bench: %s not fully removed (log kept: %s)\n", sv->state_dir, log);
	else
		unlink(log);
	sv->state_dir[0] = '\0';
}

/* Ready sandboxes in the pool of image "host" and the supervisor's
 * isolation (GET /v1/pools), -1 on error. */
static int pool_ready(supervisor *sv)
{
	if (bench_http_do(sv->http, "GET", "/v1/pools", NULL) != 200)
		return -1;
	json_t *root = json_loads(bench_http_body(sv->http), 0, NULL);
	int ready = -1;
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(root, "pools"), i, p)
	{
		if (strcmp(json_string_value(json_object_get(p, "image")) ?: "", "host") == 0 &&
		    strcmp(json_string_value(json_object_get(p, "isolation")) ?: "", sv->isolation) == 0)
			ready = (int)json_integer_value(json_object_get(p, "ready"));
	}
	json_decref(root);
	return ready;
}

static bool wait_pool_full(supervisor *sv, int target)
{
	for (int i = 0; i < 3000; i++) {
		if (pool_ready(sv) >= target)
			return true;
		usleep(5000);
	}
	return false;
}

/* POST /v1/sandboxes with body; copies the new id; returns the status. */
static long create_sandbox_with(supervisor *sv, const char *body, char *id, size_t id_size)
{
	long st = bench_http_do(sv->http, "POST", "/v1/sandboxes", body);
	if (st != 201)
		return st;
	json_t *root = json_loads(bench_http_body(sv->http), 0, NULL);
	snprintf(id, id_size, "%s", json_string_value(json_object_get(root, "id")) ?: "");
	json_decref(root);
	return st;
}

static long create_sandbox(supervisor *sv, char *id, size_t id_size)
{
	char body[96];
	snprintf(body, sizeof(body), "{\"image\":\"host\",\"isolation\":\"%s\"}", sv->isolation);
	return create_sandbox_with(sv, body, id, id_size);
}

static void delete_sandbox(supervisor *sv, const char *id)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	bench_http_do(sv->http, "DELETE", path, NULL);
}

static void bench_spawn_floor(const bench_opts *o)
{
	bench_samples s = {0};
	char *argv[] = {"/bin/true", NULL};
	for (int i = 0; i < o->iterations; i++) {
		double t = bench_now_ms();
		if (bench_spawn_wait(argv) != 0)
			continue;
		bench_samples_add(&s, bench_now_ms() - t);
	}
	report("exec.spawn", "exec `true`: posix_spawn + wait on the host", &s, "floor");
	bench_samples_free(&s);
}

/* The container id of sandbox id: the runtime's container whose bundle lies
 * in the sandbox's folder. */
static bool container_of(const supervisor *sv, const char *id, char *cid, size_t cid_size)
{
	char cmd[PATH_MAX + 96];
	snprintf(cmd, sizeof(cmd), "%s list --format json", sv->rt);
	FILE *p = popen(cmd, "r");
	if (!p)
		return false;
	json_t *root = json_loadf(p, 0, NULL);
	pclose(p);
	char want[PATH_MAX + 128];
	snprintf(want, sizeof(want), "%s/sandboxes/%s/", sv->state_dir, id);
	bool found = false;
	size_t i;
	json_t *c;
	json_array_foreach(root, i, c)
	{
		const char *bundle = json_string_value(json_object_get(c, "bundle"));
		if (bundle && strncmp(bundle, want, strlen(want)) == 0) {
			snprintf(cid, cid_size, "%s", json_string_value(json_object_get(c, "id")));
			found = true;
		}
	}
	json_decref(root);
	return found;
}

/* Host pid of the sandbox's agent (the container's init), -1 if unknown.
 * Under gVisor: the sandbox's own process (the Sentry), which does the
 * agent's work and its system calls. */
static pid_t agent_pid_of(const supervisor *sv, const char *id)
{
	char cid[128], cmd[PATH_MAX + 224];
	if (!container_of(sv, id, cid, sizeof(cid)))
		return -1;
	snprintf(cmd, sizeof(cmd), "%s state '%s'", sv->rt, cid);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	json_t *root = json_loadf(p, 0, NULL);
	pclose(p);
	json_t *pid = json_object_get(root, "pid");
	pid_t v = json_is_integer(pid) ? (pid_t)json_integer_value(pid) : -1;
	json_decref(root);
	return v;
}

/* The ceiling for the streaming figure: the same bytes through a plain
 * unix socketpair in 256 KiB writes, no framing, no HTTP. */
static void bench_ceiling(const bench_opts *o)
{
	if (o->stream_mb <= 0)
		return;
	size_t total = (size_t)o->stream_mb << 20;
	double cpu = 0, mbs = bench_socketpair_mbs(total, 256u << 10, &cpu);
	if (mbs < 0) {
		fprintf(stderr, "socketpair ceiling failed\n");
		return;
	}
	double ms = (double)total / mbs / 1e3, cpu_gib = cpu / ((double)total / (1u << 30));
	const char *what = "unix socketpair, 256 KiB writes (ms per run)";
	printf("| %-44s | %6d | %8.1f | %8.1f | ceiling, %.0f MB/s, %.2f s CPU per GiB |\n", what, 1,
	       ms, ms, mbs, cpu_gib);
	fflush(stdout);
	bench_result("stream.ceiling", what, "ceiling",
		     json_pack("{s:i,s:f,s:f,s:f}", "n", 1, "ms", ms, "mbps", mbs, "cpu_s_per_gib",
			       cpu_gib));
}

static long exit_code_of(const char *body)
{
	json_t *root = json_loads(body, 0, NULL);
	json_t *code = json_object_get(root, "exit_code");
	long v = json_is_integer(code) ? (long)json_integer_value(code) : -1;
	json_decref(root);
	return v;
}

/* stream_runs streamed execs of stream_mb MiB each (the wire carries them
 * as base64 SSE), one after the other in one sandbox: one run swings with
 * whatever else the machine does, the median of several less. */
static void bench_stream(supervisor *sv, const bench_opts *o)
{
	char id[64];
	if (o->stream_mb <= 0 || create_sandbox(sv, id, sizeof(id)) != 201)
		return;
	char path[128], body[128], tail[512], want[64];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	snprintf(body, sizeof(body), "{\"cmd\":\"head -c %lld /dev/zero\"}",
		 (long long)o->stream_mb << 20);
	snprintf(want, sizeof(want), "\"stdout_bytes\":%lld", (long long)o->stream_mb << 20);
	double out = (double)((long long)o->stream_mb << 20), gib = out / (1u << 30);
	bench_samples ms = {0}, sup = {0}, ag = {0}, me = {0};
	size_t wire = 0;
	pid_t agent = agent_pid_of(sv, id);
	for (int r = 0; r < o->stream_runs; r++) {
		size_t bytes = 0;
		double sup0 = bench_cpu_of(sv->pid), ag0 = agent > 0 ? bench_cpu_of(agent) : -1;
		double me0 = bench_cpu_self();
		double t = bench_now_ms();
		long st = bench_http_stream(sv->http, path, body, &bytes, tail, sizeof(tail));
		double dt = bench_now_ms() - t;
		if (st != 200 || !strstr(tail, want) || !strstr(tail, "\"exit_code\":0")) {
			fprintf(stderr, "stream failed: %ld, tail %s\n", st, tail);
			break;
		}
		bench_samples_add(&ms, dt);
		bench_samples_add(&sup, (bench_cpu_of(sv->pid) - sup0) / gib);
		bench_samples_add(&me, (bench_cpu_self() - me0) / gib);
		bench_samples_add(&ag, ag0 >= 0 ? (bench_cpu_of(agent) - ag0) / gib : -1);
		wire = bytes;
	}
	if (ms.n) {
		double p50 = bench_samples_pct(&ms, 50), fast = bench_samples_pct(&ms, 0);
		double slow = bench_samples_pct(&ms, 100);
		const char *what = row(sv, "stream `head -c` through SSE (ms per run)");
		printf("| %-44s | %6zu | %8.1f | %8.1f | sbx, %.0f MB/s of output (%.0f MB/s on the wire; "
		       "runs %.0f..%.0f); CPU s per GiB: supervisor %.2f, %s %.2f, client %.2f |\n",
		       what, ms.n, p50, bench_samples_pct(&ms, 99),
		       out / (p50 / 1e3) / 1e6, (double)wire / (p50 / 1e3) / 1e6, out / (slow / 1e3) / 1e6,
		       out / (fast / 1e3) / 1e6, bench_samples_pct(&sup, 50),
		       sv->rt_root[0] ? "sandbox (Sentry, agent inside)" : "agent",
		       bench_samples_pct(&ag, 50), bench_samples_pct(&me, 50));
		fflush(stdout);
		bench_result(key_of(sv, "stream.sse"), what, "sbx",
			     json_pack("{s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "n", (json_int_t)ms.n,
				       "ms", p50, "mbps", out / (p50 / 1e3) / 1e6, "wire_mbps",
				       (double)wire / (p50 / 1e3) / 1e6, "supervisor_cpu_s_per_gib",
				       bench_samples_pct(&sup, 50), "agent_cpu_s_per_gib",
				       bench_samples_pct(&ag, 50), "client_cpu_s_per_gib",
				       bench_samples_pct(&me, 50)));
	}
	bench_samples_free(&ms);
	bench_samples_free(&sup);
	bench_samples_free(&ag);
	bench_samples_free(&me);
	delete_sandbox(sv, id);
}

/* One row of a file transfer: MB/s and CPU seconds per GiB of each side. */
static void report_transfer(const char *key, const char *what, double ms, size_t bytes,
			    double sup, double ag, double me)
{
	double gib = (double)bytes / (1u << 30), mbs = (double)bytes / (ms / 1e3) / 1e6;
	printf("| %-44s | %6d | %8.1f | %8.1f | sbx, %.0f MB/s; CPU s per GiB: supervisor %.2f, "
	       "agent %.2f, client %.2f |\n",
	       what, 1, ms, ms, mbs, sup / gib, ag / gib, me / gib);
	fflush(stdout);
	bench_result(key, what, "sbx",
		     json_pack("{s:i,s:f,s:f,s:f,s:f,s:f}", "n", 1, "ms", ms, "mbps", mbs,
			       "supervisor_cpu_s_per_gib", sup / gib, "agent_cpu_s_per_gib", ag / gib,
			       "client_cpu_s_per_gib", me / gib));
}

/* PUT then GET /files of stream_mb MiB (the file stays in the page cache). */
static void bench_files(supervisor *sv, const bench_opts *o)
{
	char id[64];
	if (o->stream_mb <= 0 || create_sandbox(sv, id, sizeof(id)) != 201)
		return;
	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=/workspace/bench.bin", id);
	size_t size = (size_t)o->stream_mb << 20, got = 0;
	pid_t agent = agent_pid_of(sv, id);
	for (int down = 0; down < 2; down++) {
		double sup0 = bench_cpu_of(sv->pid), ag0 = agent > 0 ? bench_cpu_of(agent) : 0;
		double me0 = bench_cpu_self(), t = bench_now_ms();
		long st = down ? bench_http_download(sv->http, path, &got)
			       : bench_http_upload(sv->http, path, size);
		double dt = bench_now_ms() - t;
		if (st != 200 || (down && got != size)) {
			fprintf(stderr, "%s failed: %ld %s\n", down ? "download" : "upload", st,
				down ? "" : bench_http_body(sv->http));
			break;
		}
		report_transfer(down ? "files.down" : "files.up",
				down ? "download GET /files, page cache (ms per run)"
				     : "upload PUT /files, streamed (ms per run)",
				dt, size, bench_cpu_of(sv->pid) - sup0,
				agent > 0 ? bench_cpu_of(agent) - ag0 : -1, bench_cpu_self() - me0);
	}
	/* The peer: the same bytes through `runc exec`'s stdio (cat into the
	 * same folder, and cat of the file the download read). */
	char cid[128];
	for (int down = 0; down < 2 && container_of(sv, id, cid, sizeof(cid)); down++) {
		char *up_argv[] = {(char *)o->runtime, "exec", cid, "sh", "-c",
				   "cat > /workspace/peer.bin", NULL};
		char *down_argv[] = {(char *)o->runtime, "exec", cid, "cat", "/workspace/bench.bin",
				     NULL};
		size_t moved = 0;
		double t = bench_now_ms();
		int st = bench_spawn_io(down ? down_argv : up_argv, down ? 0 : size, &moved);
		double dt = bench_now_ms() - t;
		if (st != 0 || moved != size) {
			fprintf(stderr, "runc exec cat (%s) failed: status %d, %zu bytes\n",
				down ? "down" : "up", st, moved);
			break;
		}
		const char *what = down ? "download: `runc exec cat` of the file"
					: "upload: `runc exec sh -c 'cat > f'`";
		double mbs = (double)size / (dt / 1e3) / 1e6;
		printf("| %-44s | %6d | %8.1f | %8.1f | peer, %.0f MB/s |\n", what, 1, dt, dt, mbs);
		fflush(stdout);
		bench_result(down ? "files.down.runc" : "files.up.runc", what, "peer",
			     json_pack("{s:i,s:f,s:f}", "n", 1, "ms", dt, "mbps", mbs));
	}
	delete_sandbox(sv, id);
}

static void bench_exec_paths(supervisor *sv, const bench_opts *o)
{
	char id[64];
	if (create_sandbox(sv, id, sizeof(id)) != 201) {
		fprintf(stderr, "create failed: %s\n", bench_http_body(sv->http));
		return;
	}
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);

	bench_samples api = {0}, direct = {0}, runc = {0};
	bool gvisor = sv->rt_root[0] != '\0';
	/* gVisor's ptrace platform: about 0.1 s of CPU an exec */
	int iterations = gvisor && o->iterations > 200 ? 200 : o->iterations;
	for (int i = 0; i < iterations; i++) {
		double t = bench_now_ms();
		long st = bench_http_do(sv->http, "POST", path, "{\"argv\":[\"true\"]}");
		double dt = bench_now_ms() - t;
		if (st == 200 && exit_code_of(bench_http_body(sv->http)) == 0)
			bench_samples_add(&api, dt);
	}

	char sock[PATH_MAX + 128];
	snprintf(sock, sizeof(sock), "%s/sandboxes/%s/run/agent.sock", sv->state_dir, id);
	bench_agent_exec_true(sock, iterations, &direct);

	char cid[128];
	if (container_of(sv, id, cid, sizeof(cid))) {
		char *runc_argv[] = {(char *)o->runtime, "exec", cid, "/bin/true", NULL};
		char *runsc_argv[] = {"runsc", "--root", sv->rt_root, "exec", cid, "/bin/true", NULL};
		int n = iterations < 200 ? iterations : 200;
		for (int i = 0; i < n; i++) {
			double t = bench_now_ms();
			if (bench_spawn_wait(gvisor ? runsc_argv : runc_argv) == 0)
				bench_samples_add(&runc, bench_now_ms() - t);
		}
	}
	report(gvisor ? "gvisor.exec.runsc" : "exec.runc",
	       gvisor ? "gvisor: exec `true`: `runsc exec` into the sandbox"
		      : "exec `true`: `runc exec` into the container", &runc, "peer");
	report(key_of(sv, "exec.agent"), row(sv, "exec `true`: agent socket directly"), &direct, "sbx");
	report(key_of(sv, "exec.api"), row(sv, "exec `true`: HTTP API (POST .../exec)"), &api,
	       gvisor ? "sbx, beside runc's above" : "sbx, target p50 <= 2 ms");
	bench_samples_free(&api);
	bench_samples_free(&direct);
	bench_samples_free(&runc);
	delete_sandbox(sv, id);
}

/* Plain, with every limit other than the pool's defaults (each written
 * into the sandbox's cgroup and disk as it is handed out) and with the
 * issue's example policy (its rules loaded into the sandbox's plumbing,
 * made at pool fill, and its link raised), in turns. */
static void bench_acquire(supervisor *sv, const bench_opts *o, int pool_size)
{
	static const char *const bodies[3] = {
		"{\"image\":\"host\"}",
		"{\"image\":\"host\",\"resources\":{\"cpus\":0.5,\"memory\":\"256M\","
		"\"pids\":256,\"disk\":\"512M\"}}",
		"{\"image\":\"host\",\"network\":{\"default_action\":\"deny\",\"egress\":["
		"{\"action\":\"allow\",\"target\":\"pkgs.example.com\"},"
		"{\"action\":\"allow\",\"target\":\"*.files.example.com\"},"
		"{\"action\":\"allow\",\"target\":\"10.20.0.0/16:443\"},"
		"{\"action\":\"deny\",\"target\":\"10.20.5.0/24\"}]}}",
	};
	bench_samples s[3] = {{0}, {0}, {0}};
	for (int i = 0; i < 3 * o->pool_rounds; i++) {
		if (!wait_pool_full(sv, pool_size))
			break;
		char id[64];
		double t = bench_now_ms();
		long st = create_sandbox_with(sv, bodies[i % 3], id, sizeof(id));
		double dt = bench_now_ms() - t;
		if (st == 201) {
			bench_samples_add(&s[i % 3], dt);
			delete_sandbox(sv, id);
		} else {
			fprintf(stderr, "acquire: %ld %s\n", st, bench_http_body(sv->http));
		}
	}
	report("acquire.plain", "acquire from a warm pool (POST /v1/sandboxes)", &s[0],
	       "sbx, target p50 <= 2 ms");
	report("acquire.resources", "acquire with resources (cpus, memory, pids, disk)", &s[1],
	       "sbx, target p50 <= 2 ms");
	report("acquire.policy", "acquire with a network policy (4 rules)", &s[2],
	       "sbx, target p50 <= 5 ms");
	for (int i = 0; i < 3; i++)
		bench_samples_free(&s[i]);
}

static long sandbox_pids(supervisor *sv, const char *id)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	if (bench_http_do(sv->http, "GET", path, NULL) != 200)
		return -1;
	json_t *root = json_loads(bench_http_body(sv->http), 0, NULL);
	json_t *v = json_object_get(json_object_get(root, "usage"), "pids");
	long n = json_is_integer(v) ? (long)json_integer_value(v) : -1;
	json_decref(root);
	return n;
}

static void exec_true_n(supervisor *sv, const char *id, int n, bench_samples *s)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	for (int i = 0; i < n; i++) {
		double t = bench_now_ms();
		long st = bench_http_do(sv->http, "POST", path, "{\"argv\":[\"true\"]}");
		double dt = bench_now_ms() - t;
		if (st == 200 && exit_code_of(bench_http_body(sv->http)) == 0)
			bench_samples_add(s, dt);
	}
}

/* A neighbour's exec p50, idle, beside a busy loop in a sandbox of the
 * default CPU (the control: what the CPU share the limit grants costs it),
 * and beside `:(){ :|:& };:` in a sandbox with pids 256 (the rest the
 * defaults), then the bomb's DELETE. The pids limit should make a fork bomb
 * no worse than the busy loop (it_limits judged that until it failed beside
 * other work: it prints these figures now). */
static void bench_fork_bomb(supervisor *sv, const bench_opts *o)
{
	char nb[64], bomb[64], spin[64], path[128];
	if (create_sandbox(sv, nb, sizeof(nb)) != 201 ||
	    create_sandbox_with(sv, "{\"resources\":{\"pids\":256}}", bomb, sizeof(bomb)) != 201 ||
	    create_sandbox(sv, spin, sizeof(spin)) != 201) {
		fprintf(stderr, "fork bomb: create failed: %s\n", bench_http_body(sv->http));
		return;
	}
	int n = o->iterations / 4 > 20 ? o->iterations / 4 : 20;
	bench_samples idle = {0}, spun = {0}, busy = {0}, gone = {0};
	exec_true_n(sv, nb, 20, &idle); /* warm */
	bench_samples_free(&idle);
	exec_true_n(sv, nb, n, &idle);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/processes", spin);
	bench_http_do(sv->http, "POST", path, "{\"argv\":[\"bash\",\"-c\",\"while :; do :; done\"]}");
	exec_true_n(sv, nb, 10, &spun); /* the loop under way */
	bench_samples_free(&spun);
	exec_true_n(sv, nb, n, &spun);
	delete_sandbox(sv, spin);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/processes", bomb);
	bench_http_do(sv->http, "POST", path, "{\"argv\":[\"bash\",\"-c\",\":(){ :|:& };:\"]}");
	long held = 0;
	for (int i = 0; i < 1000 && (held = sandbox_pids(sv, bomb)) < 200; i++)
		usleep(10000);
	exec_true_n(sv, nb, n, &busy);
	double t = bench_now_ms();
	delete_sandbox(sv, bomb);
	bench_samples_add(&gone, bench_now_ms() - t);
	char note[96];
	report("bomb.idle", "neighbour exec `true`, idle", &idle, "idle figure");
	report("bomb.spin", "neighbour exec `true` beside a busy loop (default cpus)", &spun, "control");
	snprintf(note, sizeof(note), "sbx, target p50 <= 2x idle or control (%ld processes held)",
		 held);
	report("bomb.busy", "neighbour exec `true` beside a fork bomb", &busy, note);
	report("bomb.delete", "the fork bomb's DELETE (pids 256)", &gone, "sbx, target <= 1000 ms");
	bench_samples_free(&idle);
	bench_samples_free(&spun);
	bench_samples_free(&busy);
	bench_samples_free(&gone);
	delete_sandbox(sv, nb);
}

static void bench_cold(supervisor *sv, const bench_opts *o, const char *key, const char *what)
{
	bench_samples s = {0};
	for (int i = 0; i < o->cold_rounds; i++) {
		char id[64];
		double t = bench_now_ms();
		long st = create_sandbox(sv, id, sizeof(id));
		double dt = bench_now_ms() - t;
		if (st == 201) {
			bench_samples_add(&s, dt);
			delete_sandbox(sv, id);
		}
	}
	report(key_of(sv, key), row(sv, what), &s,
	       sv->rt_root[0] ? "sbx, beside runc's above" : "sbx, target p50 <= 100 ms");
	bench_samples_free(&s);
}

/* The edge of sv (role: "sbx" or "peer, --before"): wrk on GET
 * /v1/sandboxes/{id}, then exec p50 and RSS beside idle connections. The
 * results' keys: "edge.*", "before.edge.*" for the --before build. */
static void bench_edge(supervisor *sv, const bench_opts *o, const char *role)
{
	char id[64], url[256], path[128], what[96], key[64];
	const char *pre = strcmp(role, "sbx") == 0 ? "" : "before.";
	if (create_sandbox(sv, id, sizeof(id)) != 201)
		return;
	snprintf(url, sizeof(url), "%s/v1/sandboxes/%s", sv->url, id);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	double p50, rps = bench_wrk(url, sv->token, 64, 10, &p50);
	const char *wrk_what = "GET /v1/sandboxes/{id}: 64 keep-alive clients (wrk, 10 s)";
	printf("| %-44s | %6s | %8.3f | %8s | %s, %.0f requests/s |\n", wrk_what, "-", p50, "-", role,
	       rps);
	snprintf(key, sizeof(key), "%sedge.wrk", pre);
	if (rps >= 0)
		bench_result(key, wrk_what, role, json_pack("{s:f,s:f}", "p50_ms", p50, "rps", rps));
	bench_samples idle = {0}, busy = {0};
	for (int pass = 0; pass < 2; pass++) {
		int *fds = NULL, held = 0;
		long rss0 = bench_rss_kb(sv->pid);
		if (pass)
			held = bench_idle_open(atoi(strrchr(sv->url, ':') + 1), o->idle_conns, &fds);
		long rss = bench_rss_kb(sv->pid);
		for (int i = 0; i < 200; i++) {
			double t = bench_now_ms();
			if (bench_http_do(sv->http, "POST", path, "{\"argv\":[\"true\"]}") == 200)
				bench_samples_add(pass ? &busy : &idle, bench_now_ms() - t);
		}
		if (pass) {
			snprintf(what, sizeof(what), "exec `true` beside %d idle keep-alive connections", held);
			snprintf(key, sizeof(key), "%sedge.exec_idle", pre);
			report(key, "exec `true`, no idle connections", &idle, role);
			snprintf(key, sizeof(key), "%sedge.exec_busy", pre);
			report(key, what, &busy, role);
			const char *rss_what = "supervisor RSS with idle keep-alive connections";
			double each = (double)(rss - rss0) / (held ? held : 1);
			printf("| %-44s | %6d | %8s | %8s | %s, RSS %ld -> %ld KiB (%.2f KiB each); idle exec p50 %.3f ms |\n",
			       rss_what, held, "-", "-", role, rss0, rss, each,
			       bench_samples_pct(&idle, 50));
			fflush(stdout);
			snprintf(key, sizeof(key), "%sedge.rss", pre);
			bench_result(key, rss_what, role,
				     json_pack("{s:i,s:I,s:I,s:f}", "n", held, "rss0_kib", (json_int_t)rss0,
					       "rss_kib", (json_int_t)rss, "kib_each", each));
			bench_idle_close(fds, held);
		}
	}
	bench_samples_free(&idle);
	bench_samples_free(&busy);
	delete_sandbox(sv, id);
}

/* The same exec paths, streaming and cold create with gvisor sandboxes,
 * where runsc answers (skipped, saying so, where it does not). */
static int bench_gvisor(bench_opts *o)
{
	char *version[] = {"runsc", "--version", NULL};
	if (bench_spawn_wait(version) != 0) {
		fprintf(stderr, "runsc does not answer: no gvisor figures\n");
		return 0;
	}
	supervisor sv = {0};
	if (!supervisor_start(&sv, o, "gvisor", 1, NULL)) {
		fprintf(stderr, "could not start the supervisor (gvisor)\n");
		supervisor_stop(&sv);
		return 1;
	}
	wait_pool_full(&sv, 1);
	bench_exec_paths(&sv, o);
	/* every pipe read and write of the stream is a trapped system call
	 * there (about 15-20 MB/s): 256 MiB make the figure */
	int mb = o->stream_mb;
	if (o->stream_mb > 256)
		o->stream_mb = 256;
	bench_stream(&sv, o);
	o->stream_mb = mb;
	supervisor_stop(&sv);
	if (!supervisor_start(&sv, o, "gvisor", 0, NULL)) {
		fprintf(stderr, "could not start the supervisor (gvisor, pool 0)\n");
		supervisor_stop(&sv);
		return 1;
	}
	int rounds = o->cold_rounds;
	if (o->cold_rounds > 10)
		o->cold_rounds = 10; /* about 0.6 s each */
	bench_cold(&sv, o, "cold.plain", "cold create until the agent answers (pool 0)");
	o->cold_rounds = rounds;
	supervisor_stop(&sv);
	return 0;
}

int main(int argc, char **argv)
{
	bench_opts o = {.build_dir = "build/release", .runtime = "runc",
			.iterations = 1000, .pool_rounds = 50, .cold_rounds = 30, .stream_mb = 1024,
			.stream_runs = 1, .idle_conns = 10000};
	static const struct option longopts[] = {
		{"build-dir", required_argument, NULL, 'b'},
		{"runtime", required_argument, NULL, 'r'},
		{"iterations", required_argument, NULL, 'n'},
		{"pool-rounds", required_argument, NULL, 'p'},
		{"cold-rounds", required_argument, NULL, 'c'},
		{"stream-mb", required_argument, NULL, 's'},
		{"stream-runs", required_argument, NULL, 'S'},
		{"before", required_argument, NULL, 'B'},
		{"idle-conns", required_argument, NULL, 'i'},
		{NULL, 0, NULL, 0},
	};
	int ch;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'b': o.build_dir = optarg; break;
		case 'r': o.runtime = optarg; break;
		case 'n': o.iterations = atoi(optarg); break;
		case 'p': o.pool_rounds = atoi(optarg); break;
		case 'c': o.cold_rounds = atoi(optarg); break;
		case 's': o.stream_mb = atoi(optarg); break;
		case 'S': o.stream_runs = atoi(optarg); break;
		case 'B': o.before = optarg; break;
		case 'i': o.idle_conns = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: sbx-bench [--build-dir D] [--runtime runc] "
					"[--iterations N] [--pool-rounds N] [--cold-rounds N] [--stream-mb N] "
					"[--stream-runs N] [--before SUPERVISOR] [--idle-conns N]\n");
			return 2;
		}
	}

	/* The supervisor wants absolute paths (it checks the agent's). */
	static char build_abs[PATH_MAX];
	if (!realpath(o.build_dir, build_abs)) {
		fprintf(stderr, "build dir %s: not found\n", o.build_dir);
		return 2;
	}
	o.build_dir = build_abs;

	printf("| what | n | p50 ms | p99 ms | role |\n|---|---|---|---|---|\n");
	bench_spawn_floor(&o);

	pid_t holder = bench_netns_holder();
	if (holder < 0) {
		fprintf(stderr, "could not make a network namespace for --uplink\n");
		return 1;
	}
	char uplink[64];
	snprintf(uplink, sizeof(uplink), "/proc/%d/ns/net", (int)holder);
	supervisor sv = {0};
	int pool_size = 4;
	if (!supervisor_start(&sv, &o, "runc", pool_size, uplink)) {
		fprintf(stderr, "could not start the supervisor\n");
		supervisor_stop(&sv);
		bench_stop(holder, SIGTERM, 0);
		return 1;
	}
	wait_pool_full(&sv, pool_size);
	bench_exec_paths(&sv, &o);
	bench_ceiling(&o);
	bench_stream(&sv, &o);
	bench_files(&sv, &o);
	bench_acquire(&sv, &o, pool_size);
	bench_fork_bomb(&sv, &o);
	bench_edge(&sv, &o, "sbx");
	supervisor_stop(&sv);
	if (o.before && supervisor_start_exe(&sv, &o, "runc", 1, NULL, o.before))
		bench_edge(&sv, &o, "peer: --before");
	supervisor_stop(&sv);

	int rc = 0;
	for (int with = 0; with < 2 && rc == 0; with++) {
		if (!supervisor_start(&sv, &o, "runc", 0, with ? uplink : NULL)) {
			fprintf(stderr, "could not start the supervisor (pool 0)\n");
			rc = 1;
		} else {
			bench_cold(&sv, &o, with ? "cold.uplink" : "cold.plain",
				   with ? "cold create with egress plumbing (--uplink)"
					: "cold create until the agent answers (pool 0)");
		}
		supervisor_stop(&sv);
	}
	bench_stop(holder, SIGTERM, 0);
	return rc ? rc : bench_gvisor(&o);
}
