/* corpus: see corpus.h. */
#include "corpus.h"

#include <errno.h>
#include <event2/http.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"

#define MAX_FIELDS 8
#define MAX_REPEAT 100000

__attribute__((format(printf, 4, 5))) static int corpus_error(char *msg, size_t cap, int line,
							const char *fmt, ...)
{
	char text[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	snprintf(msg, cap, "corpus line %d: %s", line, text);
	return -1;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int put(corpus_bytes *b, size_t *cap, const char *p, size_t n)
{
	if (b->len + n + 1 > *cap) {
		size_t nc = (*cap ? *cap : 64);
		while (nc < b->len + n + 1)
			nc *= 2;
		char *np = realloc(b->p, nc);
		if (!np)
			return -1;
		b->p = np;
		*cap = nc;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

/* Apply \\ \t \n \r \xHH and \*N{text}. */
static int unescape_into(const char *s, corpus_bytes *out, char *msg, size_t cap, int line)
{
	size_t bcap = 0;
	out->p = NULL;
	out->len = 0;
	if (put(out, &bcap, "", 0) < 0)
		return corpus_error(msg, cap, line, "out of memory");
	for (const char *c = s; *c;) {
		if (*c != '\\') {
			if (put(out, &bcap, c++, 1) < 0)
				return corpus_error(msg, cap, line, "out of memory");
			continue;
		}
		char one;
		switch (c[1]) {
		case '\\': one = '\\'; break;
		case 't': one = '\t'; break;
		case 'n': one = '\n'; break;
		case 'r': one = '\r'; break;
		case 'x': {
			int hi = hexval(c[2]), lo = hi < 0 ? -1 : hexval(c[3]);
			if (lo < 0)
				return corpus_error(msg, cap, line, "bad \\x escape");
			one = (char)(hi * 16 + lo);
			if (put(out, &bcap, &one, 1) < 0)
				return corpus_error(msg, cap, line, "out of memory");
			c += 4;
			continue;
		}
		case '*': {
			char *end;
			unsigned long n = strtoul(c + 2, &end, 10);
			const char *close = *end == '{' ? strchr(end, '}') : NULL;
			if (end == c + 2 || !close || n > MAX_REPEAT)
				return corpus_error(msg, cap, line, "bad \\*N{text}");
			for (unsigned long i = 0; i < n; i++)
				if (put(out, &bcap, end + 1, (size_t)(close - end - 1)) < 0)
					return corpus_error(msg, cap, line, "out of memory");
			c = close + 1;
			continue;
		}
		default:
			return corpus_error(msg, cap, line, "unknown escape \\%c", c[1] ? c[1] : '0');
		}
		if (put(out, &bcap, &one, 1) < 0)
			return corpus_error(msg, cap, line, "out of memory");
		c += 2;
	}
	return 0;
}

static int unescape(const char *s, corpus_bytes *out, char *msg, size_t cap, int line)
{
	int r = unescape_into(s, out, msg, cap, line);
	if (r < 0) {
		free(out->p);
		out->p = NULL;
	}
	return r;
}

static int parse_expect(const char *s, corpus_expect *e, char *msg, size_t cap, int line)
{
	e->content = NULL;
	if (strcmp(s, "fail") == 0) {
		e->ok = false;
		return 0;
	}
	if (strcmp(s, "ok") == 0) {
		e->ok = true;
		return 0;
	}
	if (strncmp(s, "ok:", 3) == 0) {
		e->ok = true;
		corpus_bytes b;
		if (unescape(s + 3, &b, msg, cap, line) < 0)
			return -1;
		e->content = b.p;
		return 0;
	}
	return corpus_error(msg, cap, line, "want ok, ok:CONTENT or fail, got %s", s);
}

static int parse_case(char **f, size_t nf, corpus_case *k, char *msg, size_t cap, int line)
{
	if (nf != 7)
		return corpus_error(msg, cap, line, "case wants 6 fields, has %zu", nf - 1);
	k->line = line;
	k->name = strdup(f[1]);
	if (!k->name)
		return corpus_error(msg, cap, line, "out of memory");
	if (strcmp(f[2], "raw") != 0 && strcmp(f[2], "url") != 0)
		return corpus_error(msg, cap, line, "encoding %s: want raw or url", f[2]);
	k->url = strcmp(f[2], "url") == 0;
	if (unescape(f[3], &k->raw, msg, cap, line) < 0)
		return -1;
	if (k->url) {
		/* Exactly what the HTTP layer does with a query value. */
		size_t n = 0;
		char *d = evhttp_uridecode(k->raw.p, 1, &n);
		if (!d)
			return corpus_error(msg, cap, line, "evhttp_uridecode failed");
		k->path.p = d;
		k->path.len = n;
	} else {
		k->path.p = malloc(k->raw.len + 1);
		if (!k->path.p)
			return corpus_error(msg, cap, line, "out of memory");
		memcpy(k->path.p, k->raw.p, k->raw.len + 1);
		k->path.len = k->raw.len;
	}
	if (strncmp(f[4], "allow:", 6) == 0) {
		k->policy = CORPUS_ALLOW;
		if (unescape(f[4] + 6, &k->normalised, msg, cap, line) < 0)
			return -1;
	} else if (strcmp(f[4], "deny") == 0) {
		k->policy = CORPUS_DENY;
	} else if (strcmp(f[4], "bad") == 0) {
		k->policy = CORPUS_BAD;
	} else if (strcmp(f[4], "long") == 0) {
		k->policy = CORPUS_LONG;
	} else {
		return corpus_error(msg, cap, line, "policy %s: want allow:PATH, deny, bad or long", f[4]);
	}
	if (parse_expect(f[5], &k->read, msg, cap, line) < 0 ||
	    parse_expect(f[6], &k->write, msg, cap, line) < 0)
		return -1;
	return 0;
}

static int parse_tree(char **f, size_t nf, corpus_tree *t, char *msg, size_t cap, int line)
{
	static const struct {
		const char *name;
		corpus_tree_type type;
		size_t fields;
	} types[] = {
		{ "dir", CORPUS_DIR, 3 },         { "file", CORPUS_FILE, 4 },
		{ "symlink", CORPUS_SYMLINK, 4 }, { "hardlink", CORPUS_HARDLINK, 4 },
		{ "fifo", CORPUS_FIFO, 3 },       { "procfs", CORPUS_PROCFS, 3 },
	};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (nf < 2 || strcmp(f[1], types[i].name) != 0)
			continue;
		if (nf != types[i].fields)
			return corpus_error(msg, cap, line, "tree %s wants %zu fields", f[1],
				    types[i].fields - 1);
		t->type = types[i].type;
		corpus_bytes p, a = { 0 };
		if (unescape(f[2], &p, msg, cap, line) < 0)
			return -1;
		t->path = p.p;
		if (unescape(nf > 3 ? f[3] : "", &a, msg, cap, line) < 0)
			return -1;
		t->arg = a.p;
		return 0;
	}
	return corpus_error(msg, cap, line, "unknown tree type %s", nf > 1 ? f[1] : "");
}

static void *grow(void *p, size_t n, size_t size)
{
	return realloc(p, (n + 1) * size);
}

int corpus_load(const char *file, corpus *c, char *msg, size_t cap)
{
	memset(c, 0, sizeof(*c));
	SBX_AUTO_FCLOSE FILE *f = fopen(file, "re");
	if (!f) {
		snprintf(msg, cap, "corpus %s: %s", file, strerror(errno));
		return -1;
	}
	SBX_AUTO_FREE char *buf = NULL;
	size_t bcap = 0;
	ssize_t n;
	int line = 0;
	while ((n = getline(&buf, &bcap, f)) >= 0) {
		line++;
		if (n > 0 && buf[n - 1] == '\n')
			buf[--n] = '\0';
		if (n == 0 || buf[0] == '#')
			continue;
		char *fields[MAX_FIELDS + 1] = { NULL };
		size_t nf = 0;
		char *rest = buf;
		while (rest && nf <= MAX_FIELDS)
			fields[nf++] = strsep(&rest, "\t");
		if (rest || nf > MAX_FIELDS)
			return corpus_error(msg, cap, line, "too many fields");
		int r;
		if (strcmp(fields[0], "tree") == 0) {
			corpus_tree *t = grow(c->tree, c->ntree, sizeof(*t));
			if (!t)
				return corpus_error(msg, cap, line, "out of memory");
			c->tree = t;
			memset(&t[c->ntree], 0, sizeof(*t));
			r = parse_tree(fields, nf, &t[c->ntree++], msg, cap, line);
		} else if (strcmp(fields[0], "case") == 0) {
			corpus_case *k = grow(c->cases, c->ncases, sizeof(*k));
			if (!k)
				return corpus_error(msg, cap, line, "out of memory");
			c->cases = k;
			memset(&k[c->ncases], 0, sizeof(*k));
			r = parse_case(fields, nf, &k[c->ncases++], msg, cap, line);
		} else if (strcmp(fields[0], "name") == 0 && nf == 2) {
			corpus_bytes *b = grow(c->names, c->nnames, sizeof(*b));
			if (!b)
				return corpus_error(msg, cap, line, "out of memory");
			c->names = b;
			memset(&b[c->nnames], 0, sizeof(*b));
			r = unescape(fields[1], &b[c->nnames++], msg, cap, line);
		} else {
			r = corpus_error(msg, cap, line, "unknown record %s", fields[0]);
		}
		if (r < 0)
			return r;
	}
	return 0;
}

void corpus_free(corpus *c)
{
	for (size_t i = 0; i < c->ntree; i++) {
		free(c->tree[i].path);
		free(c->tree[i].arg);
	}
	for (size_t i = 0; i < c->ncases; i++) {
		corpus_case *k = &c->cases[i];
		free(k->name);
		free(k->raw.p);
		free(k->path.p);
		free(k->normalised.p);
		free(k->read.content);
		free(k->write.content);
	}
	for (size_t i = 0; i < c->nnames; i++)
		free(c->names[i].p);
	free(c->tree);
	free(c->cases);
	free(c->names);
	memset(c, 0, sizeof(*c));
}

corpus_bytes corpus_agent_rel(const corpus_case *c)
{
	static const char ws[] = "/workspace";
	const size_t n = sizeof(ws) - 1;
	corpus_bytes b = c->path;
	if (b.len >= n && memcmp(b.p, ws, n) == 0) {
		if (b.len == n)
			return (corpus_bytes){ b.p + n, 0 };
		if (b.p[n] == '/')
			return (corpus_bytes){ b.p + n + 1, b.len - n - 1 };
	}
	return b;
}
