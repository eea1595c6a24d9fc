/* agent_seccomp_compile: a Docker/moby-format JSON profile, through
 * libseccomp, to a classic BPF program held in memory (format in
 * agent_seccomp.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <jansson.h>
#include <seccomp.h>

#include "sbx/cleanup.h"
#include "sbx/json_auto.h"
#include "agent_seccomp.h"

struct agent_seccomp_filter {
	unsigned refs;
	struct sock_fprog prog; /* .filter points at insns */
	char origin[256];
	struct sock_filter insns[];
};

/* Moby matches includes/excludes "arches" against Go's GOARCH. */
#if defined(__x86_64__)
#define NATIVE_GOARCH "amd64"
#elif defined(__aarch64__)
#define NATIVE_GOARCH "arm64"
#elif defined(__i386__)
#define NATIVE_GOARCH "386"
#elif defined(__arm__)
#define NATIVE_GOARCH "arm"
#elif defined(__riscv) && __riscv_xlen == 64
#define NATIVE_GOARCH "riscv64"
#elif defined(__s390x__)
#define NATIVE_GOARCH "s390x"
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define NATIVE_GOARCH "ppc64le"
#else
#define NATIVE_GOARCH ""
#endif

static void ctx_cleanup(scmp_filter_ctx *c)
{
	if (*c)
		seccomp_release(*c);
}
#define AUTO_SCMP __attribute__((cleanup(ctx_cleanup)))

typedef struct compile_ctx {
	const char *origin;
	sbx_err *err;
	scmp_filter_ctx scmp;
	uint32_t def_action;
	unsigned kmajor, kminor; /* running kernel, for minKernel */
} compile_ctx;

static int bad(compile_ctx *c, const char *where, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(compile_ctx *c, const char *where, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return sbx_err_set(c->err, -EINVAL, "%s: %s: %s", c->origin, where, what);
}

static int check_keys(compile_ctx *c, json_t *obj, const char *where, const char *const *allowed)
{
	const char *key;
	json_t *v;

	if (!json_is_object(obj))
		return bad(c, where, "must be an object");
	json_object_foreach(obj, key, v) {
		const char *const *p = allowed;

		while (*p && strcmp(*p, key) != 0)
			p++;
		if (!*p)
			return bad(c, where, "unknown key \"%s\"", key);
	}
	return 0;
}

/* Optional non-negative integer of at most max. */
static int get_uint(compile_ctx *c, json_t *obj, const char *key, const char *where, uint64_t max,
		    bool *present, uint64_t *out)
{
	json_t *v = json_object_get(obj, key);

	*present = v != NULL;
	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || (uint64_t)json_integer_value(v) > max)
		return bad(c, where, "\"%s\" must be an integer from 0 to %llu", key, (unsigned long long)max);
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* action (+ errnoRet) -> libseccomp action. errnoRet goes with
 * SCMP_ACT_ERRNO only, as in runc. */
static int parse_action(compile_ctx *c, json_t *obj, const char *akey, const char *ekey, const char *where,
			uint32_t *out)
{
	static const struct {
		const char *name;
		uint32_t action;
	} plain[] = {
		{ "SCMP_ACT_ALLOW", SCMP_ACT_ALLOW },
		{ "SCMP_ACT_KILL", SCMP_ACT_KILL },
		{ "SCMP_ACT_KILL_THREAD", SCMP_ACT_KILL_THREAD },
		{ "SCMP_ACT_KILL_PROCESS", SCMP_ACT_KILL_PROCESS },
		{ "SCMP_ACT_TRAP", SCMP_ACT_TRAP },
		{ "SCMP_ACT_LOG", SCMP_ACT_LOG },
	};
	json_t *a = json_object_get(obj, akey);
	const char *name;
	bool has_errno;
	uint64_t e = EPERM;
	int rc;

	if (!json_is_string(a))
		return bad(c, where, "\"%s\" must be a string", akey);
	name = json_string_value(a);
	rc = get_uint(c, obj, ekey, where, 4095, &has_errno, &e);
	if (rc < 0)
		return rc;
	if (strcmp(name, "SCMP_ACT_ERRNO") == 0) {
		*out = SCMP_ACT_ERRNO((uint32_t)e);
		return 0;
	}
	if (has_errno)
		return bad(c, where, "\"%s\" goes with SCMP_ACT_ERRNO only, not %s", ekey, name);
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		if (strcmp(name, plain[i].name) != 0)
			continue;
		if ((plain[i].action == SCMP_ACT_KILL_PROCESS || plain[i].action == SCMP_ACT_LOG) &&
		    !agent_seccomp_kill_process_ok())
			return bad(c, where, "%s is not offered by this kernel (gVisor has no "
				   "SECCOMP_GET_ACTION_AVAIL, kills only the calling thread for "
				   "KILL_PROCESS and the process for LOG)", name);
		*out = plain[i].action;
		return 0;
	}
	if (strcmp(name, "SCMP_ACT_TRACE") == 0 || strcmp(name, "SCMP_ACT_NOTIFY") == 0)
		return bad(c, where, "%s is not supported: nothing in the sandbox traces or listens", name);
	return bad(c, where, "unknown action \"%s\"", name);
}

/* "SCMP_ARCH_X86_64" -> libseccomp token, 0 when unknown. */
static uint32_t arch_token(const char *name)
{
	static const char prefix[] = "SCMP_ARCH_";
	char low[32];
	size_t n;

	if (strncmp(name, prefix, sizeof(prefix) - 1) != 0)
		return 0;
	name += sizeof(prefix) - 1;
	n = strlen(name);
	if (n == 0 || n >= sizeof(low))
		return 0;
	for (size_t i = 0; i <= n; i++)
		low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] - 'A' + 'a' : name[i]);
	return seccomp_arch_resolve_name(low);
}

static int add_arch(compile_ctx *c, json_t *name, const char *where)
{
	uint32_t token;
	int rc;

	if (!json_is_string(name))
		return bad(c, where, "architecture must be a string");
	token = arch_token(json_string_value(name));
	if (token == 0)
		return bad(c, where, "unknown architecture \"%s\"", json_string_value(name));
	rc = seccomp_arch_add(c->scmp, token);
	if (rc < 0 && rc != -EEXIST)
		return sbx_err_sys(c->err, rc, "%s: %s: add architecture %s", c->origin, where,
				   json_string_value(name));
	return 0;
}

static int parse_arches(compile_ctx *c, json_t *root)
{
	json_t *list = json_object_get(root, "architectures");
	json_t *map = json_object_get(root, "archMap");
	json_t *v;
	size_t i;
	char where[64];
	int rc;

	if (list && !json_is_null(list) && !json_is_array(list))
		return bad(c, "architectures", "must be an array");
	json_array_foreach(list, i, v) {
		snprintf(where, sizeof(where), "architectures[%zu]", i);
		rc = add_arch(c, v, where);
		if (rc < 0)
			return rc;
	}
	if (map && !json_is_null(map) && !json_is_array(map))
		return bad(c, "archMap", "must be an array");
	json_array_foreach(map, i, v) {
		static const char *const keys[] = { "architecture", "subArchitectures", "comment", NULL };
		json_t *arch, *subs, *s;
		size_t j;

		snprintf(where, sizeof(where), "archMap[%zu]", i);
		rc = check_keys(c, v, where, keys);
		if (rc < 0)
			return rc;
		arch = json_object_get(v, "architecture");
		if (!json_is_string(arch) || arch_token(json_string_value(arch)) == 0)
			return bad(c, where, "\"architecture\" must name an architecture (SCMP_ARCH_...)");
		if (arch_token(json_string_value(arch)) != seccomp_arch_native())
			continue;
		subs = json_object_get(v, "subArchitectures");
		if (subs && !json_is_null(subs) && !json_is_array(subs))
			return bad(c, where, "\"subArchitectures\" must be an array");
		json_array_foreach(subs, j, s) {
			rc = add_arch(c, s, where);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

static int parse_version(const char *s, unsigned *major, unsigned *minor)
{
	int n = 0;

	if (sscanf(s, "%u.%u%n", major, minor, &n) != 2 || s[n] != '\0')
		return -EINVAL;
	return 0;
}

static bool str_in(json_t *arr, const char *s)
{
	size_t i;
	json_t *v;

	json_array_foreach(arr, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
			return true;
	return false;
}

/* What one includes/excludes object says. */
typedef struct cond {
	bool has_arches, native_listed; /* arches: non-empty, names this one */
	bool has_caps;
	bool has_kernel, kernel_ok; /* minKernel: set, running kernel >= it */
} cond;

static int parse_cond(compile_ctx *c, json_t *f, const char *where, cond *out)
{
	static const char *const keys[] = { "arches", "caps", "minKernel", "comment", NULL };
	json_t *arches, *caps, *mk, *v;
	size_t i;
	unsigned maj, min;
	int rc;

	*out = (cond){ 0 };
	if (!f || json_is_null(f))
		return 0;
	rc = check_keys(c, f, where, keys);
	if (rc < 0)
		return rc;
	arches = json_object_get(f, "arches");
	caps = json_object_get(f, "caps");
	mk = json_object_get(f, "minKernel");
	if (arches && !json_is_null(arches)) {
		if (!json_is_array(arches))
			return bad(c, where, "\"arches\" must be an array of strings");
		json_array_foreach(arches, i, v)
			if (!json_is_string(v))
				return bad(c, where, "\"arches\" must be an array of strings");
		out->has_arches = json_array_size(arches) > 0;
		out->native_listed = str_in(arches, NATIVE_GOARCH);
	}
	if (caps && !json_is_null(caps)) {
		if (!json_is_array(caps))
			return bad(c, where, "\"caps\" must be an array of strings");
		json_array_foreach(caps, i, v)
			if (!json_is_string(v) || strncmp(json_string_value(v), "CAP_", 4) != 0)
				return bad(c, where, "\"caps\" must be an array of CAP_... names");
		out->has_caps = json_array_size(caps) > 0;
	}
	if (mk && !json_is_null(mk)) {
		if (!json_is_string(mk) || parse_version(json_string_value(mk), &maj, &min) < 0)
			return bad(c, where, "\"minKernel\" must be a string \"major.minor\"");
		out->has_kernel = true;
		out->kernel_ok = c->kmajor > maj || (c->kmajor == maj && c->kminor >= min);
	}
	return 0;
}

/* Whether a syscalls entry applies here, as moby decides it, for a process
 * that holds no capability: includes must all hold, excludes must not. */
static int entry_applies(compile_ctx *c, json_t *entry, const char *where, bool *applies)
{
	char w[96];
	cond inc, exc;
	int rc;

	*applies = false;
	snprintf(w, sizeof(w), "%s.includes", where);
	rc = parse_cond(c, json_object_get(entry, "includes"), w, &inc);
	if (rc < 0)
		return rc;
	snprintf(w, sizeof(w), "%s.excludes", where);
	rc = parse_cond(c, json_object_get(entry, "excludes"), w, &exc);
	if (rc < 0)
		return rc;
	if ((inc.has_arches && !inc.native_listed) || inc.has_caps || (inc.has_kernel && !inc.kernel_ok))
		return 0;
	if (exc.native_listed || (exc.has_kernel && exc.kernel_ok))
		return 0;
	*applies = true;
	return 0;
}

static int parse_args(compile_ctx *c, json_t *args, const char *where, struct scmp_arg_cmp *out, unsigned *n)
{
	static const char *const keys[] = { "index", "value", "valueTwo", "op", "comment", NULL };
	static const struct {
		const char *name;
		enum scmp_compare op;
	} ops[] = {
		{ "SCMP_CMP_NE", SCMP_CMP_NE }, { "SCMP_CMP_LT", SCMP_CMP_LT },
		{ "SCMP_CMP_LE", SCMP_CMP_LE }, { "SCMP_CMP_EQ", SCMP_CMP_EQ },
		{ "SCMP_CMP_GE", SCMP_CMP_GE }, { "SCMP_CMP_GT", SCMP_CMP_GT },
		{ "SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ },
	};
	unsigned used = 0; /* bit per argument index */
	char w[112];
	json_t *a;
	size_t i;

	*n = 0;
	if (!args || json_is_null(args))
		return 0;
	if (!json_is_array(args) || json_array_size(args) > 6)
		return bad(c, where, "\"args\" must be an array of at most 6 comparisons");
	json_array_foreach(args, i, a) {
		uint64_t index = 0, value = 0, value2 = 0;
		bool has_index, has_value, has_value2;
		json_t *op = json_object_get(a, "op");
		size_t k;
		int rc;

		snprintf(w, sizeof(w), "%s.args[%zu]", where, i);
		rc = check_keys(c, a, w, keys);
		if (rc < 0)
			return rc;
		if ((rc = get_uint(c, a, "index", w, 5, &has_index, &index)) < 0 ||
		    (rc = get_uint(c, a, "value", w, INT64_MAX, &has_value, &value)) < 0 ||
		    (rc = get_uint(c, a, "valueTwo", w, INT64_MAX, &has_value2, &value2)) < 0)
			return rc;
		if (!has_index || !has_value)
			return bad(c, w, "\"index\" and \"value\" are required");
		if (!json_is_string(op))
			return bad(c, w, "\"op\" must be a string");
		for (k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
			if (strcmp(json_string_value(op), ops[k].name) == 0)
				break;
		if (k == sizeof(ops) / sizeof(ops[0]))
			return bad(c, w, "unknown operator \"%s\"", json_string_value(op));
		if (used & (1u << index))
			return bad(c, w, "argument %u is compared twice; libseccomp takes one comparison per argument",
				   (unsigned)index);
		used |= 1u << index;
		out[*n] = (struct scmp_arg_cmp){
			.arg = (unsigned)index, .op = ops[k].op, .datum_a = value, .datum_b = value2
		};
		(*n)++;
	}
	return 0;
}

/* Check the entry's names; when add, add the rule for each one libseccomp
 * knows. */
static int add_names(compile_ctx *c, json_t *entry, const char *where, bool add, uint32_t action,
		     const struct scmp_arg_cmp *args, unsigned nargs)
{
	json_t *names = json_object_get(entry, "names");
	json_t *name = json_object_get(entry, "name");
	size_t count;

	if ((names != NULL) == (name != NULL))
		return bad(c, where, "needs exactly one of \"names\" (array) and \"name\" (string)");
	if (names && !json_is_array(names))
		return bad(c, where, "\"names\" must be an array of strings");
	count = names ? json_array_size(names) : 1;
	for (size_t i = 0; i < count; i++) {
		json_t *v = names ? json_array_get(names, i) : name;
		const char *s;
		int nr, rc;

		if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 64)
			return bad(c, where, "a syscall name must be a string of 1 to 64 characters");
		s = json_string_value(v);
		if (!add)
			continue;
		nr = seccomp_syscall_resolve_name(s);
		if (nr == __NR_SCMP_ERROR)
			continue; /* unknown to this libseccomp: the default action covers it */
		rc = seccomp_rule_add_array(c->scmp, action, nr, nargs, nargs ? args : NULL);
		if (rc < 0)
			return sbx_err_sys(c->err, rc, "%s: %s: add rule for %s", c->origin, where, s);
	}
	return 0;
}

static int parse_syscalls(compile_ctx *c, json_t *root)
{
	static const char *const keys[] = { "names", "name",	 "action",   "errnoRet",
					    "args",  "includes", "excludes", "comment", NULL };
	json_t *list = json_object_get(root, "syscalls");
	json_t *entry;
	size_t i;

	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list))
		return bad(c, "syscalls", "must be an array");
	json_array_foreach(list, i, entry) {
		struct scmp_arg_cmp args[6];
		unsigned nargs = 0;
		uint32_t action = 0;
		bool applies = false;
		char where[64];
		int rc;

		snprintf(where, sizeof(where), "syscalls[%zu]", i);
		if ((rc = check_keys(c, entry, where, keys)) < 0 ||
		    (rc = parse_action(c, entry, "action", "errnoRet", where, &action)) < 0 ||
		    (rc = parse_args(c, json_object_get(entry, "args"), where, args, &nargs)) < 0 ||
		    (rc = entry_applies(c, entry, where, &applies)) < 0)
			return rc;
		/* Names are checked also when the rule is left out, so that a
		 * broken entry is reported on every machine. A rule with the
		 * default action only repeats the default (libseccomp refuses it). */
		rc = add_names(c, entry, where, applies && action != c->def_action, action, args, nargs);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The BPF program libseccomp generates, read back from a memfd:
 * libseccomp 2.5 exports to a file descriptor only. */
static int export_bpf(compile_ctx *c, agent_seccomp_filter **out)
{
	SBX_AUTO_CLOSE int fd = memfd_create("agent-seccomp", MFD_CLOEXEC);
	agent_seccomp_filter *f;
	struct stat st;
	size_t n, done = 0;
	int rc;

	if (fd < 0)
		return sbx_err_sys(c->err, -errno, "%s: memfd for the BPF program", c->origin);
	rc = seccomp_export_bpf(c->scmp, fd);
	if (rc < 0)
		return sbx_err_sys(c->err, rc, "%s: export BPF", c->origin);
	if (fstat(fd, &st) < 0)
		return sbx_err_sys(c->err, -errno, "%s: export BPF", c->origin);
	if (st.st_size <= 0 || (size_t)st.st_size % sizeof(struct sock_filter) != 0)
		return sbx_err_set(c->err, -EIO, "%s: libseccomp exported %lld bytes, not a BPF program",
				   c->origin, (long long)st.st_size);
	n = (size_t)st.st_size / sizeof(struct sock_filter);
	if (n > AGENT_SECCOMP_MAX_INSNS)
		return sbx_err_set(c->err, -E2BIG, "%s: compiles to %zu BPF instructions, more than the kernel's %u",
				   c->origin, n, AGENT_SECCOMP_MAX_INSNS);
	f = calloc(1, sizeof(*f) + n * sizeof(struct sock_filter));
	if (!f)
		return sbx_err_set(c->err, -ENOMEM, "%s: out of memory", c->origin);
	while (done < (size_t)st.st_size) {
		ssize_t r = pread(fd, (char *)f->insns + done, (size_t)st.st_size - done, (off_t)done);

		if (r <= 0) {
			rc = r < 0 ? -errno : -EIO;
			free(f);
			return sbx_err_sys(c->err, rc, "%s: read back BPF", c->origin);
		}
		done += (size_t)r;
	}
	f->refs = 1;
	f->prog.len = (unsigned short)n;
	f->prog.filter = f->insns;
	snprintf(f->origin, sizeof(f->origin), "%s", c->origin);
	*out = f;
	return 0;
}

bool agent_seccomp_kill_process_ok(void)
{
	return seccomp_api_get() >= 3;
}

int agent_seccomp_compile(const char *json, size_t len, const char *origin, agent_seccomp_filter **out,
			  sbx_err *err)
{
	static const char *const keys[] = { "defaultAction", "defaultErrnoRet", "architectures",
					    "archMap",	     "syscalls",	"comment",
					    NULL };
	SBX_AUTO_JSON json_t *root = NULL;
	AUTO_SCMP scmp_filter_ctx scmp = NULL;
	compile_ctx c = { .origin = origin, .err = err };
	json_error_t jerr;
	struct utsname u;
	int rc;

	*out = NULL;
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return sbx_err_set(err, -EINVAL, "%s: line %d column %d: %s", origin, jerr.line, jerr.column,
				   jerr.text);
	if ((rc = check_keys(&c, root, "profile", keys)) < 0 ||
	    (rc = parse_action(&c, root, "defaultAction", "defaultErrnoRet", "profile", &c.def_action)) < 0)
		return rc;
	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &c.kmajor, &c.kminor) != 2)
		return sbx_err_set(err, -EIO, "%s: cannot tell the kernel version for minKernel", origin);

	scmp = seccomp_init(c.def_action);
	if (!scmp)
		return sbx_err_set(err, -ENOMEM, "%s: seccomp_init failed", origin);
	c.scmp = scmp;
	/* A call from an architecture the filter does not cover (int 0x80 in
	 * a 64-bit process) ends the process, not only the calling thread;
	 * where the kernel offers no SECCOMP_RET_KILL_PROCESS (gVisor: it
	 * answers no SECCOMP_GET_ACTION_AVAIL and ends only the calling thread
	 * of a threaded process), the calling thread: the call never runs
	 * either way. */
	rc = seccomp_attr_set(scmp, SCMP_FLTATR_ACT_BADARCH,
			      agent_seccomp_kill_process_ok() ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_KILL_THREAD);
	if (rc < 0)
		return sbx_err_sys(err, rc, "%s: set the bad-architecture action", origin);
	/* A binary tree instead of a linear list of ~350 comparisons: every
	 * system call of every sandboxed command pays for the filter. */
	rc = seccomp_attr_set(scmp, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (rc < 0)
		return sbx_err_sys(err, rc, "%s: ask for the binary-tree filter", origin);
	if ((rc = parse_arches(&c, root)) < 0 || (rc = parse_syscalls(&c, root)) < 0)
		return rc;
	return export_bpf(&c, out);
}

agent_seccomp_filter *agent_seccomp_ref(agent_seccomp_filter *f)
{
	f->refs++;
	return f;
}

void agent_seccomp_unref(agent_seccomp_filter *f)
{
	if (f && --f->refs == 0)
		free(f);
}

const struct sock_fprog *agent_seccomp_prog(const agent_seccomp_filter *f)
{
	return &f->prog;
}

const char *agent_seccomp_origin(const agent_seccomp_filter *f)
{
	return f->origin;
}
