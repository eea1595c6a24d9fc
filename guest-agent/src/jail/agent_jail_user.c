/* agent_jail_user_lookup: /etc/passwd and /etc/group, parsed with bounds. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "agent_jail_user.h"

/* Longer lines are skipped: no valid entry of ours is that long. */
#define DB_LINE_MAX 4096
#define DB_FIELDS_MAX 8

/* Called per entry with its fields; returns 1 to stop, 0 to go on, or a
 * negative errno (with err set). */
typedef int (*db_entry_fn)(char **fields, void *ud);

/* A decimal id that setres[ug]id can take: (uid_t)-1 means "unchanged"
 * there, so it is refused. */
static int parse_id(const char *s, uint32_t *out)
{
	uint64_t v = 0;

	if (!*s || strlen(s) > 10)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v >= UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int db_open(const char *path, FILE **out, sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;

	if (fd < 0)
		return sbx_err_sys(err, -errno, "%s", path);
	if (fstat(fd, &st) < 0)
		return sbx_err_sys(err, -errno, "%s", path);
	if (!S_ISREG(st.st_mode))
		return sbx_err_set(err, -EINVAL, "%s: not a regular file", path);
	*out = fdopen(fd, "r");
	if (!*out)
		return sbx_err_sys(err, -errno, "%s", path);
	sbx_steal_fd(&fd);
	return 0;
}

/* Each well-formed entry of a colon-separated database with nfields fields.
 * Comments, blank lines, NIS +/- lines, overlong and malformed lines are
 * skipped, as glibc's files backend does. */
static int db_scan(const char *path, size_t nfields, db_entry_fn fn, void *ud, sbx_err *err)
{
	SBX_AUTO_FCLOSE FILE *f = NULL;
	char line[DB_LINE_MAX];
	size_t total = 0;
	bool overlong = false;
	int rc = db_open(path, &f, err);

	if (rc < 0)
		return rc;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line), k = 0;
		char *fields[DB_FIELDS_MAX], *p = line;

		total += n;
		if (total > AGENT_JAIL_MAX_DB_BYTES)
			return sbx_err_set(err, -EFBIG, "%s: larger than %u bytes", path, AGENT_JAIL_MAX_DB_BYTES);
		if (n > 0 && line[n - 1] == '\n') {
			line[--n] = '\0';
			if (overlong) {
				overlong = false;
				continue;
			}
		} else if (!feof(f)) {
			overlong = true;
			continue;
		} else if (overlong) {
			continue;
		}
		if (line[0] == '\0' || line[0] == '#' || line[0] == '+' || line[0] == '-')
			continue;
		for (;;) {
			char *colon = strchr(p, ':');

			if (k == DB_FIELDS_MAX)
				break;
			fields[k++] = p;
			if (!colon)
				break;
			*colon = '\0';
			p = colon + 1;
		}
		if (k != nfields)
			continue;
		rc = fn(fields, ud);
		if (rc != 0)
			return rc < 0 ? rc : 0;
	}
	if (ferror(f))
		return sbx_err_sys(err, -EIO, "%s: read", path);
	return 0;
}

typedef struct pw_query {
	const char *path;
	const char *name; /* by name, or */
	uint32_t uid;     /* by uid when name is NULL */
	bool found;
	agent_jail_user *out;
	sbx_err *err;
} pw_query;

static int copy_field(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		return -ENAMETOOLONG;
	memcpy(dst, src, n + 1);
	return 0;
}

/* name:password:uid:gid:gecos:home:shell */
static int pw_entry(char **f, void *ud)
{
	pw_query *q = ud;
	uint32_t uid, gid;

	if (q->name && strcmp(f[0], q->name) != 0)
		return 0;
	if (!q->name && (parse_id(f[2], &uid) < 0 || uid != q->uid))
		return 0;
	if (parse_id(f[2], &uid) < 0 || parse_id(f[3], &gid) < 0)
		return sbx_err_set(q->err, -EINVAL, "%s: user %s: bad uid \"%s\" or gid \"%s\"", q->path, f[0],
				   f[2], f[3]);
	if (copy_field(q->out->name, sizeof(q->out->name), f[0]) < 0)
		return sbx_err_set(q->err, -EINVAL, "%s: user name %.40s... longer than %d", q->path, f[0],
				   AGENT_JAIL_NAME_MAX);
	if (copy_field(q->out->home, sizeof(q->out->home), f[5][0] ? f[5] : "/") < 0)
		return sbx_err_set(q->err, -EINVAL, "%s: user %s: home longer than %d", q->path, f[0],
				   AGENT_JAIL_HOME_MAX);
	q->out->uid = uid;
	q->out->gid = gid;
	q->found = true;
	return 1;
}

typedef struct gr_query {
	const char *path;
	agent_jail_user *u;
	sbx_err *err;
} gr_query;

static bool has_group(const agent_jail_user *u, gid_t g)
{
	for (size_t i = 0; i < u->ngroups; i++)
		if (u->groups[i] == g)
			return true;
	return false;
}

/* name:password:gid:member,member,... */
static int gr_entry(char **f, void *ud)
{
	gr_query *q = ud;
	uint32_t gid;
	char *m = f[3];

	if (parse_id(f[2], &gid) < 0 || has_group(q->u, gid))
		return 0;
	while (*m) {
		size_t len = strcspn(m, ",");

		if (len == strlen(q->u->name) && strncmp(m, q->u->name, len) == 0) {
			if (q->u->ngroups == AGENT_JAIL_MAX_GROUPS)
				return sbx_err_set(q->err, -E2BIG, "%s: user %s is in more than %d groups", q->path,
						   q->u->name, AGENT_JAIL_MAX_GROUPS);
			q->u->groups[q->u->ngroups++] = gid;
			return 0;
		}
		m += len;
		if (*m == ',')
			m++;
	}
	return 0;
}

static bool valid_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > AGENT_JAIL_NAME_MAX || s[0] == '-')
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '_' || *s == '-' || *s == '.'))
			return false;
	return true;
}

/* The last lookup that succeeded, reused while neither file changed: a
 * command's exec then pays two stat calls instead of reading and parsing
 * both files. A file changed in place within the same clock tick could
 * keep its times (they come from a clock that moves in ticks of a few ms),
 * so one changed in the last CACHE_SETTLE_NS is not trusted. */
#define CACHE_PATH_MAX 256
#define CACHE_SETTLE_NS 50000000LL

typedef struct file_id {
	bool exists;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtim, ctim;
} file_id;

static struct {
	bool valid;
	char user[AGENT_JAIL_NAME_MAX + 1];
	char passwd_path[CACHE_PATH_MAX], group_path[CACHE_PATH_MAX];
	file_id passwd, group;
	agent_jail_user result;
} cache;

/* false: not one to cache (not a regular file, or changed just now). */
static bool identify(const char *path, file_id *id)
{
	struct timespec now;
	struct stat st;

	memset(id, 0, sizeof(*id));
	if (stat(path, &st) < 0)
		return errno == ENOENT;
	if (!S_ISREG(st.st_mode) || clock_gettime(CLOCK_REALTIME, &now) < 0 ||
	    (now.tv_sec - st.st_ctim.tv_sec) * 1000000000LL + (now.tv_nsec - st.st_ctim.tv_nsec) < CACHE_SETTLE_NS)
		return false;
	id->exists = true;
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	id->size = st.st_size;
	id->mtim = st.st_mtim;
	id->ctim = st.st_ctim;
	return true;
}

static bool same_id(const file_id *a, const file_id *b)
{
	return a->exists == b->exists && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtim.tv_sec == b->mtim.tv_sec && a->mtim.tv_nsec == b->mtim.tv_nsec &&
	       a->ctim.tv_sec == b->ctim.tv_sec && a->ctim.tv_nsec == b->ctim.tv_nsec;
}

static int lookup_files(const char *user, const char *passwd_path, const char *group_path,
			agent_jail_user *out, sbx_err *err);

int agent_jail_user_lookup(const char *user, const char *passwd_path, const char *group_path,
			   agent_jail_user *out, sbx_err *err)
{
	file_id pw, gr;
	bool cacheable;
	int rc;

	if (!user)
		user = AGENT_JAIL_DEFAULT_USER;
	if (!passwd_path)
		passwd_path = AGENT_JAIL_PASSWD;
	if (!group_path)
		group_path = AGENT_JAIL_GROUP;
	cacheable = strlen(user) <= AGENT_JAIL_NAME_MAX && strlen(passwd_path) < CACHE_PATH_MAX &&
		    strlen(group_path) < CACHE_PATH_MAX && identify(passwd_path, &pw) && identify(group_path, &gr);
	if (cacheable && cache.valid && strcmp(cache.user, user) == 0 && strcmp(cache.passwd_path, passwd_path) == 0 &&
	    strcmp(cache.group_path, group_path) == 0 && same_id(&cache.passwd, &pw) && same_id(&cache.group, &gr)) {
		*out = cache.result;
		return 0;
	}
	rc = lookup_files(user, passwd_path, group_path, out, err);
	cache.valid = rc == 0 && cacheable;
	if (cache.valid) {
		snprintf(cache.user, sizeof(cache.user), "%s", user);
		snprintf(cache.passwd_path, sizeof(cache.passwd_path), "%s", passwd_path);
		snprintf(cache.group_path, sizeof(cache.group_path), "%s", group_path);
		cache.passwd = pw;
		cache.group = gr;
		cache.result = *out;
	}
	return rc;
}

static int lookup_files(const char *user, const char *passwd_path, const char *group_path,
			agent_jail_user *out, sbx_err *err)
{
	pw_query q = { 0 };
	gr_query g;
	uint32_t num = 0;
	bool numeric;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!valid_name(user))
		return sbx_err_set(err, -EINVAL, "user \"%.64s\": not a user name or uid", user);
	numeric = strspn(user, "0123456789") == strlen(user);
	if (numeric && parse_id(user, &num) < 0)
		return sbx_err_set(err, -EINVAL, "user %s: uid out of range", user);

	q = (pw_query){ .path = passwd_path, .name = numeric ? NULL : user, .uid = num, .out = out, .err = err };
	rc = db_scan(passwd_path, 7, pw_entry, &q, err);
	if (rc < 0 && rc != -ENOENT)
		return sbx_err_wrap(err, "user %s", user);
	if (!q.found) {
		if (numeric) {
			out->uid = out->gid = num;
			snprintf(out->name, sizeof(out->name), "%s", user);
			snprintf(out->home, sizeof(out->home), "/");
		} else if (strcmp(user, AGENT_JAIL_DEFAULT_USER) == 0) {
			out->uid = AGENT_JAIL_DEFAULT_UID;
			out->gid = AGENT_JAIL_DEFAULT_GID;
			snprintf(out->name, sizeof(out->name), "%s", user);
			snprintf(out->home, sizeof(out->home), "%s", AGENT_JAIL_DEFAULT_HOME);
		} else if (strcmp(user, "root") == 0) {
			snprintf(out->name, sizeof(out->name), "root");
			snprintf(out->home, sizeof(out->home), "/root");
		} else {
			return sbx_err_set(err, -ENOENT, "user %s: not in %s", user, passwd_path);
		}
	}
	sbx_err_clear(err);

	out->groups[0] = out->gid;
	out->ngroups = 1;
	g = (gr_query){ .path = group_path, .u = out, .err = err };
	rc = db_scan(group_path, 4, gr_entry, &g, err);
	if (rc == -ENOENT) {
		sbx_err_clear(err);
		rc = 0;
	}
	if (rc < 0)
		return sbx_err_wrap(err, "user %s", user);
	return 0;
}
