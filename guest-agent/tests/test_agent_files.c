/* The file operations of the real sandbox-agent (PID 1 of new namespaces),
 * driven over its socket: a large round trip with the agent's memory
 * bounded (and throughput beside cat), reads side by side (interleaved,
 * a range, a /proc file, a cancel), a read of a shrinking file, ranges
 * past 2 and 4 GiB of a sparse file, cut,
 * cancelled and over-quota uploads leaving the old file, awkward names, the
 * fs.* operations and their errors, and the hostile path corpus against
 * every operation.
 * Every test starts its own agent and its own folder under /tmp and removes
 * both in teardown, also when it fails. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "sbx/cleanup.h"
#include "sbx/proto_client.h"
#include "agent_ns.h"
#include "corpus.h"
#include "fs_client.h"
#include "test_util.h"

#define GRACE_MS 500u
#define SECRET "OUTSIDE-SECRET"

typedef struct fixture {
	agent_ns ns;
	corpus corpus; /* hostile_corpus: freed in teardown, also on failure */
	fc c;
	char top[64];
	char root[96]; /* the allowed root handed to the agent */
	char out[96];  /* next to it, must stay unreachable */
	char mnt[128]; /* a small tmpfs mounted by a test, "" when none */
} fixture;

static void put(const char *path, const char *data)
{
	FILE *f = fopen(path, "we");

	assert_non_null(f);
	fputs(data, f);
	assert_int_equal(fclose(f), 0);
}

static char *get(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	size_t n;

	if (!f)
		return NULL;
	buf = calloc(1, 1 << 16);
	n = fread(buf, 1, (1 << 16) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int setup(void **state)
{
	fixture *fx = calloc(1, sizeof(*fx));
	char p[160];

	if (!fx)
		return -1;
	*state = fx;
	fx->c.fd = -1;
	/* A sanitized agent keeps freed memory in quarantine (256 MiB by
	 * default), which would hide whether it streams: keep it small. */
	setenv("ASAN_OPTIONS", "quarantine_size_mb=4:detect_leaks=1", 1);
	snprintf(fx->top, sizeof(fx->top), "/tmp/sbx-files-XXXXXX");
	if (!mkdtemp(fx->top))
		return -1;
	chmod(fx->top, 0755);
	snprintf(fx->root, sizeof(fx->root), "%s/root", fx->top);
	snprintf(fx->out, sizeof(fx->out), "%s/outside", fx->top);
	if (mkdir(fx->root, 0755) < 0 || mkdir(fx->out, 0755) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/secret", fx->out);
	put(p, SECRET);
	if (agent_ns_start(&fx->ns, GRACE_MS) < 0) {
		fprintf(stderr, "start %s failed\n", agent_ns_binary());
		return -1;
	}
	if (fc_connect(&fx->c, fx->ns.sock) < 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	fixture *fx = *state;

	if (!fx)
		return 0;
	fc_close(&fx->c);
	corpus_free(&fx->corpus);
	agent_ns_stop(&fx->ns);
	if (fx->mnt[0])
		umount2(fx->mnt, MNT_DETACH);
	if (fx->top[0])
		test_rm_rf(fx->top);
	free(fx);
	return 0;
}

static void pathf(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void pathf(char *out, size_t cap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	assert_true((size_t)vsnprintf(out, cap, fmt, ap) < cap);
	va_end(ap);
}

/* ---- calls ---- */

/* One-shot op with root, path and extra pairs packed by fn. */
typedef void (*pack_fn)(msgpack_packer *pk, void *ud);

/* Args root, path and what fn packs (extra pairs); r initialised. */
static void args_for(fixture *fx, msgpack_sbuffer *b, const char *path, size_t path_len,
		     size_t extra, pack_fn fn, void *ud, fc_result *r)
{
	msgpack_packer pk;

	fc_result_init(r);
	fc_args_begin(b, &pk, 2 + extra, fx->root, path, path_len);
	if (fn)
		fn(&pk, ud);
}

static void call(fixture *fx, const char *op, const char *path, size_t path_len, size_t extra,
		 pack_fn fn, void *ud, fc_result *r)
{
	msgpack_sbuffer b;

	args_for(fx, &b, path, path_len, extra, fn, ud, r);
	assert_int_equal(fc_call(&fx->c, op, &b, r), 0);
	msgpack_sbuffer_destroy(&b);
}

static void kv_bool(msgpack_packer *pk, const char *k, bool v)
{
	sbx_proto_pack_str(pk, k);
	if (v)
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
}

static void kv_uint(msgpack_packer *pk, const char *k, uint64_t v)
{
	sbx_proto_pack_str(pk, k);
	msgpack_pack_uint64(pk, v);
}

static void kv_str(msgpack_packer *pk, const char *k, const char *v)
{
	sbx_proto_pack_str(pk, k);
	sbx_proto_pack_str(pk, v);
}

/* Expect ERR code (NULL: END), say why when not. */
static void expect(const fc_result *r, const char *code, const char *what)
{
	if (!code && r->failed)
		fail_msg("%s: %s %s", what, r->code, r->msg);
	if (code && !r->failed)
		fail_msg("%s: succeeded, want %s", what, code);
	if (code && strcmp(r->code, code) != 0)
		fail_msg("%s: %s (%s), want %s", what, r->code, r->msg, code);
}

static void simple(fixture *fx, const char *op, const char *path, const char *code, pack_fn fn,
		   void *ud, size_t extra)
{
	fc_result r;

	call(fx, op, path, strlen(path), extra, fn, ud, &r);
	expect(&r, code, op);
	if (code && !strstr(r.msg, fx->root)) /* every error names the path */
		fail_msg("%s %s: message without the path: %s", op, path, r.msg);
	fc_result_free(&r);
}

/* Upload data (len bytes) to path with extra args. */
typedef struct mem_src {
	const char *p;
	size_t len, pos;
} mem_src;

static size_t mem_next(void *buf, size_t cap, void *ud)
{
	mem_src *m = ud;
	size_t n = m->len - m->pos < cap ? m->len - m->pos : cap;

	memcpy(buf, m->p + m->pos, n);
	m->pos += n;
	return n;
}

static int upload(fixture *fx, const char *path, size_t path_len, const void *data, size_t len,
		  size_t extra, pack_fn fn, void *ud, fc_result *r)
{
	msgpack_sbuffer b;
	mem_src m = { data, len, 0 };
	uint64_t id;
	int ret;

	args_for(fx, &b, path, path_len, extra, fn, ud, r);
	assert_int_equal(fc_request(&fx->c, SBX_OP_FILE_WRITE, &b, &id), 0);
	msgpack_sbuffer_destroy(&b);
	ret = fc_upload(&fx->c, id, mem_next, &m, 0, r);
	return ret;
}

typedef struct sink {
	char *p;
	size_t len, cap;
} sink;

static int sink_data(const uint8_t *p, size_t len, void *ud)
{
	sink *s = ud;

	if (s->len + len + 1 > s->cap)
		return -1;
	memcpy(s->p + s->len, p, len);
	s->len += len;
	s->p[s->len] = '\0';
	return 0;
}

static void download(fixture *fx, const char *path, size_t path_len, sink *s, fc_result *r)
{
	msgpack_sbuffer b;
	msgpack_packer pk;
	uint64_t id;

	fc_result_init(r);
	fc_args_begin(&b, &pk, 2, fx->root, path, path_len);
	assert_int_equal(fc_request(&fx->c, SBX_OP_FILE_READ, &b, &id), 0);
	msgpack_sbuffer_destroy(&b);
	assert_int_equal(fc_finish(&fx->c, id, sink_data, s, r), 0);
}

/* ---- large round trip, memory, throughput ---- */

/* A reproducible byte stream (xorshift), so both ends can check every byte
 * without holding the file. */
typedef struct gen {
	uint64_t state, pos, size;
	uint64_t word;
	unsigned left;
	agent_ns *ns;
	long max_rss_kb;
	uint64_t next_sample;
	uint64_t mismatch_at; /* UINT64_MAX: none */
} gen;

static void gen_init(gen *g, uint64_t size, agent_ns *ns)
{
	memset(g, 0, sizeof(*g));
	g->state = 0x9e3779b97f4a7c15ull;
	g->size = size;
	g->ns = ns;
	g->mismatch_at = UINT64_MAX;
}

static uint8_t gen_byte(gen *g)
{
	if (g->left == 0) {
		g->state ^= g->state << 13;
		g->state ^= g->state >> 7;
		g->state ^= g->state << 17;
		g->word = g->state;
		g->left = 8;
	}
	g->left--;
	return (uint8_t)(g->word >> (8 * g->left));
}

static void gen_sample(gen *g)
{
	if (g->ns && g->pos >= g->next_sample) {
		long kb = agent_ns_rss_kb(g->ns);
		if (kb > g->max_rss_kb)
			g->max_rss_kb = kb;
		g->next_sample = g->pos + (4u << 20);
	}
}

static size_t gen_next(void *buf, size_t cap, void *ud)
{
	gen *g = ud;
	uint8_t *p = buf;
	size_t n = g->size - g->pos < cap ? (size_t)(g->size - g->pos) : cap;

	gen_sample(g);
	for (size_t i = 0; i < n; i++)
		p[i] = gen_byte(g);
	g->pos += n;
	return n;
}

static int gen_check(const uint8_t *p, size_t len, void *ud)
{
	gen *g = ud;

	gen_sample(g);
	for (size_t i = 0; i < len; i++)
		if (gen_byte(g) != p[i] && g->mismatch_at == UINT64_MAX)
			g->mismatch_at = g->pos + i;
	g->pos += len;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t big_size(void)
{
	const char *e = getenv("SBX_FILES_BIG_MB");

	return (e ? strtoull(e, NULL, 10) : 64) << 20;
}

static void pack_big(msgpack_packer *pk, void *ud)
{
	kv_uint(pk, "mode", 0640);
}

static void large_round_trip(void **state)
{
	fixture *fx = *state;
	uint64_t size = big_size();
	char p[160];
	gen g;
	fc_result r;
	msgpack_sbuffer b;
	msgpack_packer pk;
	uint64_t id, v;
	long base_kb = agent_ns_rss_kb(&fx->ns);
	double t0, up_s, down_s, cat_s;
	struct stat st;

	assert_true(base_kb > 0);
	/* Up: streamed from the generator, checked on disk byte by byte. */
	gen_init(&g, size, &fx->ns);
	fc_result_init(&r);
	fc_args_begin(&b, &pk, 3, fx->root, "big.bin", 7);
	pack_big(&pk, NULL);
	assert_int_equal(fc_request(&fx->c, SBX_OP_FILE_WRITE, &b, &id), 0);
	msgpack_sbuffer_destroy(&b);
	t0 = now_s();
	assert_int_equal(fc_upload(&fx->c, id, gen_next, &g, 0, &r), 0);
	up_s = now_s() - t0;
	expect(&r, NULL, "upload");
	assert_true(fc_get_uint(&r.result, "size", &v));
	assert_int_equal(v, size);
	fc_result_free(&r);
	pathf(p, sizeof(p), "%s/big.bin", fx->root);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_size, size);
	assert_int_equal(st.st_mode & 07777, 0640);
	if (geteuid() == 0)
		assert_int_equal(st.st_uid, 1000);
	{
		gen chk;
		SBX_AUTO_CLOSE int fd = open(p, O_RDONLY | O_CLOEXEC);
		SBX_AUTO_FREE uint8_t *buf = malloc(1 << 20);
		ssize_t n;

		assert_true(fd >= 0 && buf);
		gen_init(&chk, size, NULL);
		while ((n = read(fd, buf, 1 << 20)) > 0)
			gen_check(buf, (size_t)n, &chk);
		assert_int_equal(chk.pos, size);
		assert_true(chk.mismatch_at == UINT64_MAX);
	}

	/* Down: stat first, then the bytes, checked as they come. */
	gen_init(&g, size, &fx->ns);
	fc_result_init(&r);
	fc_args_begin(&b, &pk, 2, fx->root, "big.bin", 7);
	assert_int_equal(fc_request(&fx->c, SBX_OP_FILE_READ, &b, &id), 0);
	msgpack_sbuffer_destroy(&b);
	t0 = now_s();
	assert_int_equal(fc_finish(&fx->c, id, gen_check, &g, &r), 0);
	down_s = now_s() - t0;
	expect(&r, NULL, "download");
	assert_int_equal(r.nevents, 1);
	assert_true(fc_get_uint(&r.event, "size", &v));
	assert_int_equal(v, size);
	assert_true(fc_get_uint(&r.event, "mtime_ns", &v));
	assert_true(fc_get_uint(&r.result, "bytes", &v));
	assert_int_equal(v, size);
	assert_true(r.data_eof);
	assert_int_equal(g.pos, size);
	assert_true(g.mismatch_at == UINT64_MAX);
	fc_result_free(&r);

	/* The peer: cat of the same (cached) file. */
	{
		char cmd[256];
		pathf(cmd, sizeof(cmd), "cat '%s' > /dev/null", p);
		t0 = now_s();
		assert_int_equal(system(cmd), 0);
		cat_s = now_s() - t0;
	}
	print_message("  %s: %llu MiB up %.0f MB/s, down %.0f MB/s, cat %.0f MB/s; "
		      "agent RSS %ld KiB before, at most %ld KiB during\n",
		      agent_ns_binary(), (unsigned long long)(size >> 20), size / up_s / 1e6,
		      size / down_s / 1e6, size / cat_s / 1e6, base_kb, g.max_rss_kb);
	/* Streaming, not buffering: far less than the file. */
	assert_true(g.max_rss_kb - base_kb < 24 * 1024);
}

/* ---- reads side by side ---- */

/* path holds the generator's first size bytes. */
static void gen_file(const char *path, uint64_t size)
{
	SBX_AUTO_FREE uint8_t *buf = malloc(1 << 20);
	FILE *f = fopen(path, "we");
	size_t k;
	gen g;

	assert_non_null(buf);
	assert_non_null(f);
	gen_init(&g, size, NULL);
	while ((k = gen_next(buf, 1 << 20, &g)) > 0)
		assert_int_equal(fwrite(buf, 1, k, f), k);
	assert_int_equal(fclose(f), 0);
}

/* One of several reads on a connection: its bytes checked as they come,
 * against the generator (from an offset) or a copy read here. */
typedef struct side_read {
	gen g;
	const uint8_t *want; /* instead of g when set */
	size_t want_len;
	uint64_t got;
	bool mismatch;
	int index;
	int *last;          /* the stream whose frame came last */
	unsigned *switches; /* frames that came right after another stream's */
	fc *cancel_c;       /* cancel id once cancel_at bytes came */
	uint64_t id, cancel_at;
} side_read;

static int side_data(const uint8_t *p, size_t len, void *ud)
{
	side_read *sr = ud;

	if (*sr->last != sr->index) {
		(*sr->switches)++;
		*sr->last = sr->index;
	}
	if (!sr->want)
		gen_check(p, len, &sr->g);
	else if (sr->got + len > sr->want_len || memcmp(sr->want + sr->got, p, len) != 0)
		sr->mismatch = true;
	sr->got += len;
	if (sr->cancel_c && sr->got >= sr->cancel_at) {
		if (fc_cancel(sr->cancel_c, sr->id) < 0)
			return -1;
		sr->cancel_c = NULL;
	}
	return 0;
}

/* The whole of a file here, or NULL. */
static uint8_t *slurp(const char *path, size_t *len)
{
	SBX_AUTO_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint8_t *buf = NULL;
	size_t cap = 0;
	ssize_t n;

	*len = 0;
	if (fd < 0)
		return NULL;
	do {
		if (*len == cap) {
			uint8_t *nb = realloc(buf, cap += 1 << 16);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
		}
		n = read(fd, buf + *len, cap - *len);
		if (n > 0)
			*len += (size_t)n;
	} while (n > 0);
	return buf;
}

/* Whether the kernel splices from path (procfs files without read_iter do
 * not: the agent reads those). */
static bool splices(const char *path)
{
	SBX_AUTO_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC);
	int pfd[2];
	loff_t off = 0;
	ssize_t n;

	if (fd < 0 || pipe2(pfd, O_CLOEXEC) < 0)
		return false;
	n = splice(fd, &off, pfd[1], NULL, 4096, SPLICE_F_NONBLOCK);
	close(pfd[0]);
	close(pfd[1]);
	return n >= 0;
}

/* Several reads at once on one connection with a small window, so their
 * frames interleave and the agent's output often holds other frames when
 * a spliced one goes: every byte of each checked, a range read at its own
 * offset beside a whole read of the same file, one read cancelled half-way,
 * and a /proc file that cannot be spliced (read instead) among them; the
 * agent keeps no fd (file or pipe) of any. */
static void reads_side_by_side(void **state)
{
	fixture *fx = *state;
	const uint64_t size = (6u << 20) + 7, off = (1u << 20) + 3, len = 3u << 20;
	const char *proc_file = "config.gz";
	SBX_AUTO_FREE uint8_t *proc_want = NULL;
	size_t proc_len = 0, n_reads = 3;
	char p[160];
	fc c;
	side_read sr[4];
	void *ud[4];
	uint64_t ids[4], v;
	fc_result r[4];
	int last = -1, fds0, fds = -1;
	unsigned switches = 0;

	pathf(p, sizeof(p), "%s/side.bin", fx->root);
	gen_file(p, size);
	pathf(p, sizeof(p), "/proc/%s", proc_file);
	proc_want = slurp(p, &proc_len);
	if (proc_want && proc_len > 0 && !splices(p))
		n_reads = 4;
	else
		print_message("  %s: missing or spliceable here: the read fallback is not run\n", p);

	assert_int_equal(fc_connect_window(&c, fx->ns.sock, 64 * 1024), 0);
	fds0 = agent_ns_fds(&fx->ns);
	assert_true(fds0 > 0);
	memset(sr, 0, sizeof(sr));
	for (size_t i = 0; i < n_reads; i++) {
		msgpack_sbuffer b;
		msgpack_packer pk;

		sr[i].index = (int)i;
		sr[i].last = &last;
		sr[i].switches = &switches;
		gen_init(&sr[i].g, size, NULL);
		fc_result_init(&r[i]);
		ud[i] = &sr[i];
		if (i == 3) {
			sr[i].want = proc_want;
			sr[i].want_len = proc_len;
			fc_args_begin(&b, &pk, 2, "/proc", proc_file, strlen(proc_file));
		} else if (i == 1) {
			/* 1 MiB + 3 in, 3 MiB: the generator skips what comes before. */
			for (uint64_t k = 0; k < off; k++)
				gen_byte(&sr[i].g);
			fc_args_begin(&b, &pk, 4, fx->root, "side.bin", 8);
			kv_uint(&pk, "offset", off);
			kv_uint(&pk, "length", len);
		} else {
			fc_args_begin(&b, &pk, 2, fx->root, "side.bin", 8);
		}
		assert_int_equal(fc_request(&c, SBX_OP_FILE_READ, &b, &ids[i]), 0);
		msgpack_sbuffer_destroy(&b);
		sr[i].id = ids[i];
		if (i == 2) {
			sr[i].cancel_c = &c;
			sr[i].cancel_at = 512 * 1024;
		}
	}
	assert_int_equal(fc_finish_all(&c, n_reads, ids, side_data, ud, r), 0);

	/* Each stream's stat came before its bytes, as queued: a spliced frame
	 * did not overtake what waited in the agent's output. */
	for (size_t i = 0; i < n_reads; i++)
		if (r[i].data_first || r[i].nevents != 1)
			fail_msg("read %zu: %zu events, data first: %d", i, r[i].nevents,
				 r[i].data_first);
	expect(&r[0], NULL, "whole read");
	assert_true(fc_get_uint(&r[0].result, "bytes", &v));
	assert_int_equal(v, size);
	assert_int_equal(sr[0].got, size);
	assert_true(r[0].data_eof);
	assert_true(sr[0].g.mismatch_at == UINT64_MAX);

	expect(&r[1], NULL, "range read");
	assert_true(fc_get_uint(&r[1].event, "offset", &v));
	assert_int_equal(v, off);
	assert_true(fc_get_uint(&r[1].event, "length", &v));
	assert_int_equal(v, len);
	assert_true(fc_get_uint(&r[1].result, "bytes", &v));
	assert_int_equal(v, len);
	assert_int_equal(sr[1].got, len);
	assert_true(sr[1].g.mismatch_at == UINT64_MAX);

	expect(&r[2], "cancelled", "cancelled read");
	assert_true(sr[2].got >= 512 * 1024 && sr[2].got < size);
	assert_true(sr[2].g.mismatch_at == UINT64_MAX);

	if (n_reads == 4) {
		expect(&r[3], NULL, "/proc read");
		assert_int_equal(sr[3].got, proc_len);
		assert_false(sr[3].mismatch);
	}
	/* The frames did interleave (a few hundred 64 KiB turns). */
	assert_true(switches >= 16);
	/* Each op closes its file and pipe as it ends, before or after its
	 * last frame left: a second at most. */
	for (int i = 0; i < 100 && (fds = agent_ns_fds(&fx->ns)) != fds0; i++)
		usleep(10 * 1000);
	assert_int_equal(fds, fds0);
	print_message("  %zu reads side by side: %u turns between streams, cancelled after %llu "
		      "bytes\n", n_reads, switches, (unsigned long long)sr[2].got);
	for (size_t i = 0; i < n_reads; i++)
		fc_result_free(&r[i]);
	fc_close(&c);
}

/* The file is cut to cut bytes once the first frame came: what arrives
 * below cut must be the file's. */
typedef struct shrink_read {
	gen g;
	const char *path;
	uint64_t cut;
	bool done;
} shrink_read;

static int shrink_data(const uint8_t *p, size_t len, void *ud)
{
	shrink_read *sr = ud;

	if (!sr->done && truncate(sr->path, (off_t)sr->cut) < 0)
		return -1;
	sr->done = true;
	for (size_t i = 0; i < len; i++)
		if (gen_byte(&sr->g) != p[i] && sr->g.pos + i < sr->cut &&
		    sr->g.mismatch_at == UINT64_MAX)
			sr->g.mismatch_at = sr->g.pos + i;
	sr->g.pos += len;
	return 0;
}

/* A file that shrinks while read ends early with what was sent (PROTOCOL.md,
 * file.read): an END, not an error, its bytes what came, short of the size
 * announced; the bytes already under way (a window at most) may be more
 * than the new size. */
static void read_of_a_shrinking_file(void **state)
{
	fixture *fx = *state;
	const uint64_t size = 4u << 20, cut = 1u << 20;
	char p[160];
	fc c;
	shrink_read sr = { .cut = cut };
	fc_result r;
	msgpack_sbuffer b;
	msgpack_packer pk;
	uint64_t id, v;

	pathf(p, sizeof(p), "%s/shrinks.bin", fx->root);
	gen_file(p, size);
	sr.path = p;
	gen_init(&sr.g, size, NULL);
	assert_int_equal(fc_connect_window(&c, fx->ns.sock, 64 * 1024), 0);
	fc_result_init(&r);
	fc_args_begin(&b, &pk, 2, fx->root, "shrinks.bin", 11);
	assert_int_equal(fc_request(&c, SBX_OP_FILE_READ, &b, &id), 0);
	msgpack_sbuffer_destroy(&b);
	assert_int_equal(fc_finish(&c, id, shrink_data, &sr, &r), 0);
	expect(&r, NULL, "read of a shrinking file");
	assert_true(fc_get_uint(&r.event, "size", &v));
	assert_int_equal(v, size);
	assert_true(fc_get_uint(&r.result, "bytes", &v));
	assert_int_equal(v, sr.g.pos);
	assert_true(r.data_eof);
	assert_true(sr.g.pos >= cut && sr.g.pos < size);
	assert_true(sr.g.mismatch_at == UINT64_MAX);
	print_message("  %llu of %llu bytes sent for a file cut to %llu\n",
		      (unsigned long long)sr.g.pos, (unsigned long long)size,
		      (unsigned long long)cut);
	fc_result_free(&r);
	fc_close(&c);
}

/* Ranges of a sparse 6 GiB file across 2 GiB and 4 GiB, and at its end:
 * the offset goes to splice(2) as a 64-bit loff_t, never cut to 32 bits
 * (a cut one would read the zeros near the start). */
static void reads_at_far_offsets(void **state)
{
	fixture *fx = *state;
	static const struct {
		uint64_t off;
		const char *bytes;
	} marks[] = { { (1ull << 31) - 4, "abcdefgh" }, { (1ull << 32) - 4, "ABCDEFGH" },
		      { (5ull << 30) + 1, "12345678" } };
	const uint64_t size = 6ull << 30;
	char p[160], got[64];
	uint64_t v;
	int fd;

	pathf(p, sizeof(p), "%s/sparse.bin", fx->root);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++)
		assert_int_equal(pwrite(fd, marks[i].bytes, 8, (off_t)marks[i].off), 8);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	close(fd);
	for (size_t i = 0; i <= sizeof(marks) / sizeof(marks[0]); i++) {
		bool end = i == sizeof(marks) / sizeof(marks[0]);
		uint64_t off = end ? size - 3 : marks[i].off, id;
		sink s = { got, 0, sizeof(got) };
		msgpack_sbuffer b;
		msgpack_packer pk;
		fc_result r;

		fc_result_init(&r);
		fc_args_begin(&b, &pk, 4, fx->root, "sparse.bin", 10);
		kv_uint(&pk, "offset", off);
		kv_uint(&pk, "length", end ? 100 : 8);
		assert_int_equal(fc_request(&fx->c, SBX_OP_FILE_READ, &b, &id), 0);
		msgpack_sbuffer_destroy(&b);
		assert_int_equal(fc_finish(&fx->c, id, sink_data, &s, &r), 0);
		expect(&r, NULL, "read at a far offset");
		assert_true(fc_get_uint(&r.event, "offset", &v));
		assert_int_equal(v, off);
		assert_true(fc_get_uint(&r.event, "length", &v));
		assert_int_equal(v, end ? 3 : 8);
		if (end)
			assert_memory_equal(got, "\0\0\0", 3);
		else
			assert_memory_equal(got, marks[i].bytes, 8);
		assert_int_equal(s.len, end ? 3 : 8);
		fc_result_free(&r);
	}
}

/* ---- uploads that do not complete ---- */

static bool tmp_left(const char *dir)
{
	SBX_AUTO_CLOSEDIR DIR *d = opendir(dir);
	struct dirent *de;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (strncmp(de->d_name, ".sbx-tmp-", 9) == 0)
			return true;
	return false;
}

static void pack_max(msgpack_packer *pk, void *ud)
{
	kv_uint(pk, "max_bytes", *(uint64_t *)ud);
}

static void unfinished_uploads_keep_old_file(void **state)
{
	fixture *fx = *state;
	char p[160];
	SBX_AUTO_FREE char *got = NULL;
	gen g;
	fc_result r;
	msgpack_sbuffer b;
	msgpack_packer pk;
	uint64_t id, max = 1000;

	pathf(p, sizeof(p), "%s/keep.txt", fx->root);
	put(p, "old content");

	/* Cut: the connection drops after about 1 MiB of 8. */
	gen_init(&g, 8u << 20, NULL);
	fc_result_init(&r);
	fc_args_begin(&b, &pk, 2, fx->root, "keep.txt", 8);
	assert_int_equal(fc_request(&fx->c, SBX_OP_FILE_WRITE, &b, &id), 0);
	msgpack_sbuffer_destroy(&b);
	assert_int_equal(fc_upload(&fx->c, id, gen_next, &g, 1u << 20, &r), 1);
	fc_result_free(&r);
	fc_close(&fx->c);
	for (int i = 0; i < 200 && tmp_left(fx->root); i++)
		usleep(10000);
	assert_false(tmp_left(fx->root));
	got = get(p);
	assert_string_equal(got, "old content");
	assert_int_equal(fc_connect(&fx->c, fx->ns.sock), 0);

	/* Over max_bytes: too_large, nothing replaced. */
	{
		SBX_AUTO_FREE char *big = malloc(4096);
		memset(big, 'x', 4096);
		assert_int_equal(upload(fx, "keep.txt", 8, big, 4096, 1, pack_max, &max, &r), 0);
		expect(&r, "too_large", "max_bytes");
		assert_non_null(strstr(r.msg, "keep.txt"));
		fc_result_free(&r);
	}
	free(got);
	got = get(p);
	assert_string_equal(got, "old content");
	assert_false(tmp_left(fx->root));

	/* Cancelled after some data: cancelled, nothing replaced. */
	{
		sbx_proto_writer w;
		sbx_err err = { 0 };

		fc_result_init(&r);
		fc_args_begin(&b, &pk, 2, fx->root, "keep.txt", 8);
		assert_int_equal(fc_request(&fx->c, SBX_OP_FILE_WRITE, &b, &id), 0);
		msgpack_sbuffer_destroy(&b);
		sbx_proto_writer_init(&w);
		assert_int_equal(sbx_proto_encode_data(&w, id, SBX_CH_FILE, "new", 3, false, 0, &err), 0);
		assert_int_equal(sbx_proto_encode_cancel(&w, id, &err), 0);
		assert_int_equal(write(fx->c.fd, w.buf.data, w.buf.size), (ssize_t)w.buf.size);
		sbx_proto_writer_destroy(&w);
		assert_int_equal(fc_finish(&fx->c, id, NULL, NULL, &r), 0);
		expect(&r, "cancelled", "cancel");
		fc_result_free(&r);
	}
	free(got);
	got = get(p);
	assert_string_equal(got, "old content");
	assert_false(tmp_left(fx->root));

	/* Completed: replaced. */
	assert_int_equal(upload(fx, "keep.txt", 8, "new content", 11, 0, NULL, NULL, &r), 0);
	expect(&r, NULL, "upload");
	fc_result_free(&r);
	free(got);
	got = get(p);
	assert_string_equal(got, "new content");
}

/* A full file system: no_space, the old file kept, no temporary file left.
 * The tmpfs is mounted before a second agent starts, so its mount namespace
 * has it. */
static void full_disk_is_no_space(void **state)
{
	fixture *fx = *state;
	agent_ns small = { 0 };
	fc c = { .fd = -1 };
	char p[200];
	SBX_AUTO_FREE char *big = malloc(1 << 20);
	SBX_AUTO_FREE char *got = NULL;
	msgpack_sbuffer b;
	msgpack_packer pk;
	mem_src m = { big, 1 << 20, 0 };
	fc_result r;
	uint64_t id;
	int ret;

	assert_non_null(big);
	memset(big, 'z', 1 << 20);
	pathf(fx->mnt, sizeof(fx->mnt), "%s/small", fx->top);
	assert_int_equal(mkdir(fx->mnt, 0755), 0);
	if (mount("tmpfs", fx->mnt, "tmpfs", MS_NOSUID | MS_NODEV, "size=256k,mode=0755") < 0) {
		fx->mnt[0] = '\0';
		fail_msg("mount tmpfs: %s", strerror(errno));
	}
	pathf(p, sizeof(p), "%s/keep", fx->mnt);
	put(p, "old");
	if (agent_ns_start(&small, GRACE_MS) < 0 || fc_connect(&c, small.sock) < 0) {
		fc_close(&c);
		agent_ns_stop(&small);
		fail_msg("second agent did not start");
	}
	fc_result_init(&r);
	fc_args_begin(&b, &pk, 2, fx->mnt, "keep", 4);
	ret = fc_request(&c, SBX_OP_FILE_WRITE, &b, &id);
	msgpack_sbuffer_destroy(&b);
	if (ret == 0)
		ret = fc_upload(&c, id, mem_next, &m, 0, &r);
	fc_close(&c);
	agent_ns_stop(&small);
	assert_int_equal(ret, 0);
	expect(&r, "no_space", "write to a full disk");
	assert_non_null(strstr(r.msg, "keep"));
	fc_result_free(&r);
	got = get(p);
	assert_string_equal(got, "old");
	assert_false(tmp_left(fx->mnt));
}

/* ---- names ---- */

static void awkward_names_round_trip(void **state)
{
	fixture *fx = *state;
	char every[300];
	size_t n = 0;
	const char *names[] = { "with space", "new\nline", "tab\there", "Ünïcødé ✓ 日本",
				"-dash", " lead", "trail ", "\\back", "*?[glob]", every };
	fc_result r;

	/* Every byte but NUL and '/' (and not "." or ".."). */
	for (int c = 1; c < 256; c++)
		if (c != '/')
			every[n++] = (char)c;
	every[n] = '\0';
	every[200] = '\0'; /* NAME_MAX is 255 bytes */
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		sink s = { calloc(1, 1024), 0, 1024 };
		char want[300];

		pathf(want, sizeof(want), "content of %zu", i);
		assert_int_equal(upload(fx, names[i], strlen(names[i]), want, strlen(want), 0, NULL,
					NULL, &r), 0);
		expect(&r, NULL, names[i]);
		fc_result_free(&r);
		download(fx, names[i], strlen(names[i]), &s, &r);
		expect(&r, NULL, names[i]);
		assert_string_equal(s.p, want);
		fc_result_free(&r);
		free(s.p);
	}
	/* Listed with the same bytes. */
	call(fx, SBX_OP_FS_LIST, "", 0, 0, NULL, NULL, &r);
	expect(&r, NULL, "list");
	{
		msgpack_unpacked u;
		const msgpack_object *e;
		size_t found = 0;

		msgpack_unpacked_init(&u);
		assert_int_equal(msgpack_unpack_next(&u, r.result.data, r.result.size, NULL),
				 MSGPACK_UNPACK_SUCCESS);
		e = sbx_proto_map_get(&u.data, "entries");
		assert_non_null(e);
		assert_int_equal(e->via.array.size, sizeof(names) / sizeof(names[0]));
		for (uint32_t i = 0; i < e->via.array.size; i++) {
			const msgpack_object *nm = sbx_proto_map_get(&e->via.array.ptr[i], "name");
			for (size_t j = 0; j < sizeof(names) / sizeof(names[0]); j++)
				if (nm->via.str.size == strlen(names[j]) &&
				    memcmp(nm->via.str.ptr, names[j], nm->via.str.size) == 0)
					found++;
		}
		assert_int_equal(found, sizeof(names) / sizeof(names[0]));
		msgpack_unpacked_destroy(&u);
	}
	fc_result_free(&r);
}

/* ---- fs.* ---- */

static void p_parents(msgpack_packer *pk, void *ud) { kv_bool(pk, "parents", true); }
static void p_recursive(msgpack_packer *pk, void *ud) { kv_bool(pk, "recursive", true); }
static void p_mode(msgpack_packer *pk, void *ud) { kv_uint(pk, "mode", *(unsigned *)ud); }
static void p_depth(msgpack_packer *pk, void *ud) { kv_uint(pk, "depth", *(unsigned *)ud); }
static void p_to(msgpack_packer *pk, void *ud) { kv_str(pk, "to", ud); }
static void p_to_over(msgpack_packer *pk, void *ud)
{
	kv_str(pk, "to", ud);
	kv_bool(pk, "overwrite", true);
}
static void p_glob(msgpack_packer *pk, void *ud) { kv_str(pk, "glob", ud); }
static void p_glob_max(msgpack_packer *pk, void *ud)
{
	kv_str(pk, "glob", ud);
	kv_uint(pk, "max", 2);
}

/* Entry count and truncated of a list/search result. */
static uint64_t entries(fixture *fx, const char *op, const char *path, pack_fn fn, void *ud,
			size_t extra, bool *truncated, const char *want_name)
{
	fc_result r;
	uint64_t n = 0;
	bool found = false;

	call(fx, op, path, strlen(path), extra, fn, ud, &r);
	expect(&r, NULL, op);
	assert_true(fc_get_uint(&r.result, "count", &n));
	assert_true(fc_get_bool(&r.result, "truncated", truncated));
	if (want_name)
		found = memmem(r.result.data, r.result.size, want_name, strlen(want_name)) != NULL;
	fc_result_free(&r);
	if (want_name && !found)
		fail_msg("%s %s: no %s", op, path, want_name);
	return n;
}

static void fs_operations(void **state)
{
	fixture *fx = *state;
	char p[200], q[200];
	fc_result r;
	unsigned mode, depth;
	bool trunc;
	uint64_t v;
	struct stat st;
	char target[64];

	/* mkdir: missing parent, then parents, then exists. */
	mode = 0750;
	simple(fx, SBX_OP_FS_MKDIR, "a/b/c", "not_found", NULL, NULL, 0);
	simple(fx, SBX_OP_FS_MKDIR, "a/b/c", NULL, p_parents, NULL, 1);
	simple(fx, SBX_OP_FS_MKDIR, "a/b/c", NULL, p_parents, NULL, 1);
	simple(fx, SBX_OP_FS_MKDIR, "a/b/c", "exists", NULL, NULL, 0);
	simple(fx, SBX_OP_FS_MKDIR, "a/m", NULL, p_mode, &mode, 1);
	pathf(p, sizeof(p), "%s/a/m", fx->root);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0750);
	if (geteuid() == 0)
		assert_int_equal(st.st_uid, 1000);

	/* A tree: files, a symlink inside, one pointing out. */
	pathf(p, sizeof(p), "%s/a/one.txt", fx->root);
	put(p, "1");
	pathf(p, sizeof(p), "%s/a/b/two.txt", fx->root);
	put(p, "22");
	pathf(p, sizeof(p), "%s/a/b/c/three.md", fx->root);
	put(p, "333");
	pathf(p, sizeof(p), "%s/a/link", fx->root);
	assert_int_equal(symlink("one.txt", p), 0);
	pathf(p, sizeof(p), "%s/a/out", fx->root);
	assert_int_equal(symlink("../../outside", p), 0);

	/* stat */
	call(fx, SBX_OP_FS_STAT, "a/b/two.txt", 11, 0, NULL, NULL, &r);
	expect(&r, NULL, "stat");
	assert_true(fc_get_uint(&r.result, "size", &v));
	assert_int_equal(v, 2);
	assert_true(fc_get_str(&r.result, "type", target, sizeof(target)));
	assert_string_equal(target, "file");
	fc_result_free(&r);
	call(fx, SBX_OP_FS_STAT, "a/link", 6, 0, NULL, NULL, &r);
	expect(&r, NULL, "stat link");
	assert_true(fc_get_str(&r.result, "type", target, sizeof(target)));
	assert_string_equal(target, "symlink");
	assert_true(fc_get_str(&r.result, "target", target, sizeof(target)));
	assert_string_equal(target, "one.txt");
	fc_result_free(&r);
	simple(fx, SBX_OP_FS_STAT, "nope", "not_found", NULL, NULL, 0);
	simple(fx, SBX_OP_FILE_READ, "a/out/secret", "permission_denied", NULL, NULL, 0);
	simple(fx, SBX_OP_FILE_READ, "a", "bad_request", NULL, NULL, 0);

	/* list: depth 1 and 3; max. */
	assert_int_equal(entries(fx, SBX_OP_FS_LIST, "a", NULL, NULL, 0, &trunc, "one.txt"), 5);
	assert_false(trunc);
	depth = 3;
	assert_int_equal(entries(fx, SBX_OP_FS_LIST, "a", p_depth, &depth, 1, &trunc, "three.md"), 8);
	assert_false(trunc);
	depth = 32;
	assert_int_equal(entries(fx, SBX_OP_FS_LIST, "", p_depth, &depth, 1, &trunc, NULL), 9);
	{
		msgpack_sbuffer b;
		msgpack_packer pk;

		fc_result_init(&r);
		fc_args_begin(&b, &pk, 3, fx->root, "a", 1);
		kv_uint(&pk, "max", 2);
		assert_int_equal(fc_call(&fx->c, SBX_OP_FS_LIST, &b, &r), 0);
		msgpack_sbuffer_destroy(&b);
		expect(&r, NULL, "list max");
		assert_true(fc_get_uint(&r.result, "count", &v));
		assert_int_equal(v, 2);
		assert_true(fc_get_bool(&r.result, "truncated", &trunc));
		assert_true(trunc);
		fc_result_free(&r);
	}
	simple(fx, SBX_OP_FS_LIST, "a/one.txt", "bad_request", NULL, NULL, 0);
	simple(fx, SBX_OP_FS_LIST, "a/one.txt/x", "not_found", NULL, NULL, 0);
	simple(fx, SBX_OP_FS_LIST, "a/out", "permission_denied", NULL, NULL, 0);

	/* search: by name at any depth, by path, bounded, never through "out". */
	assert_int_equal(entries(fx, SBX_OP_FS_SEARCH, "", p_glob, "*.txt", 1, &trunc, "b/two.txt"), 2);
	assert_false(trunc);
	assert_int_equal(entries(fx, SBX_OP_FS_SEARCH, "", p_glob, "a/b/*/*.md", 1, &trunc, "three"), 1);
	assert_int_equal(entries(fx, SBX_OP_FS_SEARCH, "", p_glob, "secret", 1, &trunc, NULL), 0);
	assert_int_equal(entries(fx, SBX_OP_FS_SEARCH, "", p_glob_max, "*", 2, &trunc, NULL), 2);
	assert_true(trunc);
	simple(fx, SBX_OP_FS_SEARCH, "", "bad_request", NULL, NULL, 0);

	/* chmod */
	mode = 0600;
	simple(fx, SBX_OP_FS_CHMOD, "a/one.txt", NULL, p_mode, &mode, 1);
	pathf(p, sizeof(p), "%s/a/one.txt", fx->root);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	mode = 04755;
	simple(fx, SBX_OP_FS_CHMOD, "a/one.txt", "permission_denied", p_mode, &mode, 1);
	simple(fx, SBX_OP_FS_CHMOD, "a/one.txt", "bad_request", NULL, NULL, 0);
	mode = 0777;
	simple(fx, SBX_OP_FS_CHMOD, "a/out/secret", "permission_denied", p_mode, &mode, 1);

	/* move: exists without overwrite, then with; missing source. */
	simple(fx, SBX_OP_FS_MOVE, "a/one.txt", "exists", p_to, "a/b/two.txt", 1);
	simple(fx, SBX_OP_FS_MOVE, "a/one.txt", NULL, p_to, "a/b/moved.txt", 1);
	simple(fx, SBX_OP_FS_MOVE, "a/b/moved.txt", NULL, p_to_over, "a/b/two.txt", 2);
	pathf(q, sizeof(q), "%s/a/b/two.txt", fx->root);
	{
		SBX_AUTO_FREE char *got = get(q);
		assert_string_equal(got, "1");
	}
	simple(fx, SBX_OP_FS_MOVE, "a/none", "not_found", p_to, "a/x", 1);
	simple(fx, SBX_OP_FS_MOVE, "a/b/two.txt", "permission_denied", p_to, "a/out/x", 1);

	/* remove: non-empty needs recursive; missing; the root itself refused. */
	simple(fx, SBX_OP_FS_REMOVE, "a/b", "exists", NULL, NULL, 0);
	simple(fx, SBX_OP_FS_REMOVE, "a/b", NULL, p_recursive, NULL, 1);
	simple(fx, SBX_OP_FS_REMOVE, "a/b", "not_found", NULL, NULL, 0);
	simple(fx, SBX_OP_FS_REMOVE, "", "permission_denied", p_recursive, NULL, 1);
	simple(fx, SBX_OP_FS_REMOVE, "a/out", NULL, NULL, NULL, 0); /* the link, not its target */
	pathf(p, sizeof(p), "%s/secret", fx->out);
	{
		SBX_AUTO_FREE char *got = get(p);
		assert_string_equal(got, SECRET);
	}
}

/* Malformed arguments: bad_request naming what is wrong, never a crash. */
static void bad_arguments(void **state)
{
	fixture *fx = *state;
	static const char *const ops[] = { SBX_OP_FILE_READ, SBX_OP_FILE_WRITE, SBX_OP_FS_STAT,
					   SBX_OP_FS_LIST, SBX_OP_FS_MKDIR, SBX_OP_FS_MOVE,
					   SBX_OP_FS_REMOVE, SBX_OP_FS_CHMOD, SBX_OP_FS_SEARCH,
					   SBX_OP_FS_WATCH };
	fc_result r;

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		msgpack_sbuffer b;
		msgpack_packer pk;

		/* no args at all */
		fc_result_init(&r);
		assert_int_equal(fc_call(&fx->c, ops[i], NULL, &r), 0);
		expect(&r, "bad_request", ops[i]);
		fc_result_free(&r);
		/* path not a string */
		fc_result_init(&r);
		msgpack_sbuffer_init(&b);
		msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 2);
		kv_str(&pk, "root", fx->root);
		kv_uint(&pk, "path", 7);
		assert_int_equal(fc_call(&fx->c, ops[i], &b, &r), 0);
		msgpack_sbuffer_destroy(&b);
		expect(&r, "bad_request", ops[i]);
		fc_result_free(&r);
		/* absolute path, NUL in the path, a root that is not normalised */
		call(fx, ops[i], "/etc/passwd", 11, 0, NULL, NULL, &r);
		expect(&r, "bad_request", ops[i]);
		fc_result_free(&r);
		call(fx, ops[i], "a\0b", 3, 0, NULL, NULL, &r);
		expect(&r, "bad_request", ops[i]);
		fc_result_free(&r);
		fc_result_init(&r);
		msgpack_sbuffer_init(&b);
		msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 2);
		kv_str(&pk, "root", "/tmp/../etc");
		kv_str(&pk, "path", "passwd");
		assert_int_equal(fc_call(&fx->c, ops[i], &b, &r), 0);
		msgpack_sbuffer_destroy(&b);
		assert_true(r.failed);
		assert_null(strstr(r.msg, "root:x:"));
		fc_result_free(&r);
	}
	/* The connection is still fine. */
	simple(fx, SBX_OP_FS_STAT, "", NULL, NULL, NULL, 0);
	/* And the agent says it has these operations. */
	{
		sbx_proto_client *pc = NULL;
		sbx_err err = { 0 };
		bool file, fs, watch;

		assert_int_equal(sbx_proto_client_connect(fx->ns.sock, 5000, &pc, &err), 0);
		file = sbx_proto_client_peer_has_cap(pc, "file");
		fs = sbx_proto_client_peer_has_cap(pc, "fs");
		watch = sbx_proto_client_peer_has_cap(pc, "fs.watch");
		sbx_proto_client_free(pc);
		assert_true(file && fs && watch);
	}
}

/* ---- the hostile corpus through the protocol ---- */

#define OUT_SNAPSHOT_CMD "cd '%s' && find . -printf '%%p %%y %%m %%s\\n' | sort && cat secret"

static char *outside_state(fixture *fx)
{
	char cmd[300];
	SBX_AUTO_FCLOSE FILE *f = NULL;
	char *buf = calloc(1, 8192);

	pathf(cmd, sizeof(cmd), OUT_SNAPSHOT_CMD, fx->out);
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(buf);
	buf[fread(buf, 1, 8191, f)] = '\0';
	pclose(f);
	f = NULL;
	return buf;
}

static void build_tree(fixture *fx, const corpus *c)
{
	char p[PATH_MAX], arg[PATH_MAX];

	test_rm_rf(fx->root);
	assert_int_equal(mkdir(fx->root, 0755), 0);
	for (size_t i = 0; i < c->ntree; i++) {
		const corpus_tree *t = &c->tree[i];
		int rc = 0;

		pathf(p, sizeof(p), "%s/%s", fx->root, t->path);
		if (strncmp(t->arg, "@ROOT@", 6) == 0)
			pathf(arg, sizeof(arg), "%s%s", fx->root, t->arg + 6);
		else if (strncmp(t->arg, "@OUT@", 5) == 0)
			pathf(arg, sizeof(arg), "%s%s", fx->out, t->arg + 5);
		else
			pathf(arg, sizeof(arg), "%s", t->arg);
		switch (t->type) {
		case CORPUS_DIR: rc = mkdir(p, 0755); break;
		case CORPUS_FILE: put(p, arg); break;
		case CORPUS_SYMLINK: rc = symlink(arg, p); break;
		case CORPUS_HARDLINK: rc = link(arg, p); break;
		case CORPUS_FIFO: rc = mkfifo(p, 0644); break;
		case CORPUS_PROCFS: rc = mkdir(p, 0555); break; /* an empty folder here */
		}
		if (rc < 0)
			fail_msg("tree %s: %s", t->path, strerror(errno));
	}
}

static void corpus_outside(fixture *fx)
{
	char p[200];

	/* What the corpus's trees point at: secret, passwd, shared, sub/deeper. */
	pathf(p, sizeof(p), "%s/passwd", fx->out);
	put(p, SECRET "-passwd");
	pathf(p, sizeof(p), "%s/shared", fx->out);
	put(p, "outside-shared");
	pathf(p, sizeof(p), "%s/sub", fx->out);
	mkdir(p, 0755);
	pathf(p, sizeof(p), "%s/sub/deeper", fx->out);
	put(p, SECRET "-deeper");
}

static void hostile_corpus(void **state)
{
	fixture *fx = *state;
	corpus *cp = &fx->corpus;
	char msg[256];
	static const char *const ops[] = { SBX_OP_FILE_READ, SBX_OP_FILE_WRITE, SBX_OP_FS_STAT,
					   SBX_OP_FS_LIST, SBX_OP_FS_MKDIR, SBX_OP_FS_CHMOD,
					   SBX_OP_FS_SEARCH, SBX_OP_FS_MOVE, "move-to",
					   SBX_OP_FS_REMOVE, SBX_OP_FS_WATCH };
	SBX_AUTO_FREE char *before = NULL;
	unsigned runs = 0, refused = 0;

	if (corpus_load(SBX_CORPUS_FILE, cp, msg, sizeof(msg)) < 0)
		fail_msg("corpus: %s", msg);
	corpus_outside(fx);
	before = outside_state(fx);
	for (size_t i = 0; i < cp->ncases; i++) {
		const corpus_case *k = &cp->cases[i];
		corpus_bytes rel = corpus_agent_rel(k);

		for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
			const char *op = ops[o];
			bool is_read = strcmp(op, SBX_OP_FILE_READ) == 0;
			bool is_write = strcmp(op, SBX_OP_FILE_WRITE) == 0;
			msgpack_sbuffer b;
			msgpack_packer pk;
			uint64_t id;
			fc_result r;
			sink s = { calloc(1, 1 << 16), 0, 1 << 16 };
			SBX_AUTO_FREE char *after = NULL;
			const char *secret = SECRET;

			build_tree(fx, cp);
			fc_result_init(&r);
			if (strcmp(op, "move-to") == 0) {
				/* A file from inside moved onto the hostile path. */
				char p[200];
				pathf(p, sizeof(p), "%s/mover", fx->root);
				put(p, "mover");
				msgpack_sbuffer_init(&b);
				msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
				msgpack_pack_map(&pk, 4);
				kv_str(&pk, "root", fx->root);
				kv_str(&pk, "path", "mover");
				sbx_proto_pack_str(&pk, "to");
				sbx_proto_pack_strn(&pk, rel.p, rel.len);
				kv_bool(&pk, "overwrite", true);
				op = SBX_OP_FS_MOVE;
			} else {
				fc_args_begin(&b, &pk, 5, fx->root, rel.p, rel.len);
				kv_uint(&pk, "mode", 0777);
				kv_bool(&pk, strcmp(op, SBX_OP_FS_MOVE) == 0 ? "overwrite" : "recursive",
					true);
				if (strcmp(op, SBX_OP_FS_SEARCH) == 0)
					kv_str(&pk, "glob", "*");
				else if (strcmp(op, SBX_OP_FS_MOVE) == 0)
					kv_str(&pk, "to", "moved-here");
				else /* parents for mkdir only: a write must not make folders */
					kv_bool(&pk, "parents", strcmp(op, SBX_OP_FS_MKDIR) == 0);
			}
			assert_int_equal(fc_request(&fx->c, op, &b, &id), 0);
			msgpack_sbuffer_destroy(&b);
			if (is_write) {
				mem_src m = { "written by the corpus test", 26, 0 };
				assert_int_equal(fc_upload(&fx->c, id, mem_next, &m, 0, &r), 0);
			} else if (strcmp(op, SBX_OP_FS_WATCH) == 0) {
				/* Refused at once, or ready (its event kept in the result
				 * for the checks below) and then cancelled. */
				int ret = fc_next_event(&fx->c, id, 5000, &r.result, &r);
				assert_true(ret == 1 || ret == 2);
				if (ret == 1) {
					fc_result fin;
					fc_result_init(&fin);
					assert_int_equal(fc_cancel(&fx->c, id), 0);
					assert_int_equal(fc_finish(&fx->c, id, NULL, NULL, &fin), 0);
					fc_result_free(&fin);
				}
			} else {
				assert_int_equal(fc_finish(&fx->c, id, sink_data, &s, &r), 0);
			}
			runs++;
			refused += r.failed;
			/* Nothing from outside in anything that came back. */
			if (memmem(s.p, s.len, secret, strlen(secret)) ||
			    (r.result.size &&
			     memmem(r.result.data, r.result.size, secret, strlen(secret))) ||
			    strstr(r.msg, secret))
				fail_msg("case %s (line %d) %s: outside bytes returned", k->name, k->line,
					 ops[o]);
			if (r.result.size && memmem(r.result.data, r.result.size, "deeper", 6))
				fail_msg("case %s (line %d) %s: an outside name listed", k->name,
					 k->line, ops[o]);
			if (is_read && r.failed == k->read.ok)
				fail_msg("case %s (line %d) read: %s %s, corpus says %s", k->name,
					 k->line, r.failed ? r.code : "ok", r.msg,
					 k->read.ok ? "ok" : "fail");
			if (is_read && !r.failed && k->read.content &&
			    strcmp(s.p, k->read.content) != 0)
				fail_msg("case %s read: got \"%s\"", k->name, s.p);
			if (is_write && r.failed == k->write.ok)
				fail_msg("case %s (line %d) write: %s %s, corpus says %s", k->name,
					 k->line, r.failed ? r.code : "ok", r.msg,
					 k->write.ok ? "ok" : "fail");
			if (r.failed && (!r.msg[0] || strcmp(r.code, "internal") == 0))
				fail_msg("case %s %s: %s without a clear message: %s", k->name, ops[o],
					 r.code, r.msg);
			after = outside_state(fx);
			if (strcmp(before, after) != 0)
				fail_msg("case %s (line %d) %s: outside changed:\n%s\n---\n%s", k->name,
					 k->line, ops[o], before, after);
			fc_result_free(&r);
			free(s.p);
		}
	}
	print_message("  corpus: %zu cases x %zu operations: %u requests, %u refused\n",
		      cp->ncases, sizeof(ops) / sizeof(ops[0]), runs, refused);
}


static void p_parents_mode(msgpack_packer *pk, void *ud)
{
	kv_bool(pk, "parents", true);
	kv_uint(pk, "mode", *(unsigned *)ud);
}

/* Mode and owner of root/rel, or a failure. */
static void expect_dir(fixture *fx, const char *rel, unsigned mode, uid_t uid)
{
	char p[200];
	struct stat st;

	pathf(p, sizeof(p), "%s/%s", fx->root, rel);
	assert_int_equal(stat(p, &st), 0);
	if ((st.st_mode & 07777) != mode || st.st_uid != uid || st.st_gid != (gid_t)uid)
		fail_msg("%s: mode %o uid %u gid %u, want %o %u", rel, st.st_mode & 07777,
			 (unsigned)st.st_uid, (unsigned)st.st_gid, mode, (unsigned)uid);
}

/* What file.write and fs.mkdir make with parents belongs to the sandbox
 * user (the agent runs as root): the folders above open (0755), only the
 * folder asked for with its mode; an existing folder is left alone. */
static void parents_owned_by_the_sandbox_user(void **state)
{
	fixture *fx = *state;
	fc_result r;
	unsigned mode = 0750;
	char p[200];

	pathf(p, sizeof(p), "%s/old", fx->root);
	assert_int_equal(mkdir(p, 0700), 0);
	simple(fx, SBX_OP_FS_MKDIR, "old/a/b/c", NULL, p_parents_mode, &mode, 2);
	expect_dir(fx, "old", 0700, 0);
	expect_dir(fx, "old/a", 0755, 1000);
	expect_dir(fx, "old/a/b", 0755, 1000);
	expect_dir(fx, "old/a/b/c", 0750, 1000);
	simple(fx, SBX_OP_FS_MKDIR, "single", NULL, p_mode, &mode, 1);
	expect_dir(fx, "single", 0750, 1000);

	assert_int_equal(upload(fx, "w/x/f.txt", 9, "hi", 2, 1, p_parents, NULL, &r), 0);
	expect(&r, NULL, "file.write parents");
	fc_result_free(&r);
	expect_dir(fx, "w", 0755, 1000);
	expect_dir(fx, "w/x", 0755, 1000);
	struct stat st;
	pathf(p, sizeof(p), "%s/w/x/f.txt", fx->root);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_uid, 1000);
	assert_int_equal(st.st_gid, 1000);
	assert_int_equal(st.st_mode & 07777, 0644);
}

/* ---- fs.watch ---- */

static uint64_t watch_start(fixture *fx, fc *c, const char *path, bool recursive)
{
	msgpack_sbuffer b;
	msgpack_packer pk;
	uint64_t id;

	fc_args_begin(&b, &pk, 3, fx->root, path, strlen(path));
	kv_bool(&pk, "recursive", recursive);
	assert_int_equal(fc_request(c, SBX_OP_FS_WATCH, &b, &id), 0);
	msgpack_sbuffer_destroy(&b);
	return id;
}

/* Read events until one of type at path (from, when given) arrives; false
 * after ms or at the stream's end. Every event seen goes into log. */
static bool wait_event(fc *c, uint64_t id, const char *type, const char *path, const char *from,
		       int ms, char *log, size_t cap)
{
	uint64_t end = test_now_ms() + (uint64_t)ms;

	while (test_now_ms() < end) {
		msgpack_sbuffer ev;
		fc_result r;
		char t[32] = "", p[256] = "", f[256] = "";
		int ret;

		msgpack_sbuffer_init(&ev);
		fc_result_init(&r);
		ret = fc_next_event(c, id, (int)(end - test_now_ms()) + 1, &ev, &r);
		if (ret == 1) {
			fc_get_str(&ev, "type", t, sizeof(t));
			fc_get_str(&ev, "path", p, sizeof(p));
			fc_get_str(&ev, "from", f, sizeof(f));
			size_t used = strlen(log);
			snprintf(log + used, cap - used, "%s %s%s%s; ", t, p, f[0] ? " from " : "", f);
		} else if (ret == 2) {
			size_t used = strlen(log);
			snprintf(log + used, cap - used, "END %s %s; ", r.code, r.msg);
		}
		msgpack_sbuffer_destroy(&ev);
		fc_result_free(&r);
		if (ret != 1)
			return false;
		if (strcmp(t, type) == 0 && strcmp(p, path) == 0 && (!from || strcmp(f, from) == 0))
			return true;
	}
	return false;
}

#define EXPECT_EVENT(c, id, type, path, from)                                          \
	do {                                                                            \
		log[0] = '\0';                                                          \
		if (!wait_event(c, id, type, path, from, 5000, log, sizeof(log)))       \
			fail_msg("no %s %s event; saw: %s", type, path, log);           \
	} while (0)

static void root_path(fixture *fx, char *out, const char *rel)
{
	pathf(out, PATH_MAX, "%s/%s", fx->root, rel);
}

static void watch_sees_changes(void **state)
{
	fixture *fx = *state;
	char p[PATH_MAX], q[PATH_MAX], log[4096];
	uint64_t id = watch_start(fx, &fx->c, "", true);

	root_path(fx, p, "old");
	assert_int_equal(mkdir(p, 0755), 0); /* before the watch: watched too */
	EXPECT_EVENT(&fx->c, id, "ready", "", NULL);

	root_path(fx, p, "f.txt");
	put(p, "one");
	EXPECT_EVENT(&fx->c, id, "create", "f.txt", NULL);
	EXPECT_EVENT(&fx->c, id, "modify", "f.txt", NULL);
	root_path(fx, q, "g.txt");
	assert_int_equal(rename(p, q), 0);
	EXPECT_EVENT(&fx->c, id, "move", "g.txt", "f.txt");
	assert_int_equal(unlink(q), 0);
	EXPECT_EVENT(&fx->c, id, "delete", "g.txt", NULL);

	root_path(fx, p, "old/in-old");
	put(p, "x");
	EXPECT_EVENT(&fx->c, id, "create", "old/in-old", NULL);

	/* A folder made later is watched: what lands in it after its create. */
	root_path(fx, p, "new");
	assert_int_equal(mkdir(p, 0755), 0);
	EXPECT_EVENT(&fx->c, id, "create", "new", NULL);
	root_path(fx, p, "new/deeper");
	assert_int_equal(mkdir(p, 0755), 0);
	EXPECT_EVENT(&fx->c, id, "create", "new/deeper", NULL);
	root_path(fx, p, "new/deeper/leaf");
	put(p, "leaf");
	EXPECT_EVENT(&fx->c, id, "create", "new/deeper/leaf", NULL);

	/* A folder moved inside the tree keeps being watched under its name. */
	root_path(fx, p, "new");
	root_path(fx, q, "renamed");
	assert_int_equal(rename(p, q), 0);
	EXPECT_EVENT(&fx->c, id, "move", "renamed", "new");
	root_path(fx, p, "renamed/deeper/after");
	put(p, "after");
	EXPECT_EVENT(&fx->c, id, "create", "renamed/deeper/after", NULL);

	/* Moved out of the tree: a move with no "to", then silence from it. */
	pathf(q, sizeof(q), "%s/gone", fx->out);
	assert_int_equal(rename(p, q), 0);
	EXPECT_EVENT(&fx->c, id, "move", "renamed/deeper/after", "renamed/deeper/after");

	/* Cancel ends it. */
	assert_int_equal(fc_cancel(&fx->c, id), 0);
	{
		fc_result r;
		fc_result_init(&r);
		assert_int_equal(fc_finish(&fx->c, id, NULL, NULL, &r), 0);
		expect(&r, "cancelled", "cancel watch");
		fc_result_free(&r);
	}
	/* And a watched folder that is deleted ends the stream. */
	root_path(fx, p, "old");
	id = watch_start(fx, &fx->c, "old", false);
	EXPECT_EVENT(&fx->c, id, "ready", "", NULL);
	root_path(fx, q, "old/in-old");
	assert_int_equal(unlink(q), 0);
	assert_int_equal(rmdir(p), 0);
	EXPECT_EVENT(&fx->c, id, "delete", "in-old", NULL);
	{
		msgpack_sbuffer ev;
		fc_result r;
		char reason[32] = "";
		msgpack_sbuffer_init(&ev);
		fc_result_init(&r);
		assert_int_equal(fc_next_event(&fx->c, id, 5000, &ev, &r), 2);
		expect(&r, NULL, "watched folder deleted");
		assert_true(fc_get_str(&r.result, "reason", reason, sizeof(reason)));
		assert_string_equal(reason, "deleted");
		msgpack_sbuffer_destroy(&ev);
		fc_result_free(&r);
	}
	/* Errors: missing, a file, outside. */
	simple(fx, SBX_OP_FS_WATCH, "nope", "not_found", NULL, NULL, 0);
	root_path(fx, p, "file");
	put(p, "f");
	simple(fx, SBX_OP_FS_WATCH, "file", "bad_request", NULL, NULL, 0);
	simple(fx, SBX_OP_FS_WATCH, "file/below", "not_found", NULL, NULL, 0);
	root_path(fx, p, "out");
	assert_int_equal(symlink("../outside", p), 0);
	simple(fx, SBX_OP_FS_WATCH, "out", "permission_denied", NULL, NULL, 0);
}

/* A reader that does not keep up gets an overflow event, and the agent's
 * memory stays bounded. */
static void watch_overflow_reported(void **state)
{
	fixture *fx = *state;
	SBX_AUTO_FREE char *log = calloc(1, 1 << 16);
	char p[PATH_MAX];
	fc slow = { .fd = -1 };
	uint64_t id;
	long before, after;
	bool seen = false;

	assert_non_null(log);
	assert_int_equal(fc_connect_window(&slow, fx->ns.sock, SBX_PROTO_MIN_WINDOW), 0);
	id = watch_start(fx, &slow, "", true);
	if (!wait_event(&slow, id, "ready", "", NULL, 5000, log, 1 << 16)) {
		fc_close(&slow);
		fail_msg("no ready: %s", log);
	}
	before = agent_ns_rss_kb(&fx->ns);
	for (int i = 0; i < 20000; i++) {
		pathf(p, sizeof(p), "%s/f%05d", fx->root, i);
		SBX_AUTO_CLOSE int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
	}
	after = agent_ns_rss_kb(&fx->ns);
	log[0] = '\0';
	for (int i = 0; i < 40000 && !seen; i++) {
		msgpack_sbuffer ev;
		fc_result r;
		char t[32] = "";
		int ret;

		msgpack_sbuffer_init(&ev);
		fc_result_init(&r);
		ret = fc_next_event(&slow, id, 5000, &ev, &r);
		if (ret == 1 && fc_get_str(&ev, "type", t, sizeof(t)) && strcmp(t, "overflow") == 0)
			seen = true;
		msgpack_sbuffer_destroy(&ev);
		fc_result_free(&r);
		if (ret != 1)
			break;
	}
	fc_close(&slow);
	assert_true(seen);
	print_message("  watch: 20000 creates for a 1 KiB window: overflow reported; agent RSS "
		      "%ld -> %ld KiB\n", before, after);
	assert_true(after - before < 16 * 1024);
}

/* argv[1]: run only the tests matching this pattern, argv[2]: skip those
 * matching this one (cmocka's filters). */
int main(int argc, char **argv)
{
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	if (argc > 2)
		cmocka_set_skip_filter(argv[2]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(large_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(reads_side_by_side, setup, teardown),
		cmocka_unit_test_setup_teardown(read_of_a_shrinking_file, setup, teardown),
		cmocka_unit_test_setup_teardown(reads_at_far_offsets, setup, teardown),
		cmocka_unit_test_setup_teardown(unfinished_uploads_keep_old_file, setup, teardown),
		cmocka_unit_test_setup_teardown(full_disk_is_no_space, setup, teardown),
		cmocka_unit_test_setup_teardown(awkward_names_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(fs_operations, setup, teardown),
		cmocka_unit_test_setup_teardown(bad_arguments, setup, teardown),
		cmocka_unit_test_setup_teardown(hostile_corpus, setup, teardown),
		cmocka_unit_test_setup_teardown(parents_owned_by_the_sandbox_user, setup, teardown),
		cmocka_unit_test_setup_teardown(watch_sees_changes, setup, teardown),
		cmocka_unit_test_setup_teardown(watch_overflow_reported, setup, teardown),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "needs root (namespaces): skipped\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
