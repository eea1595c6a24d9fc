/* multipart/form-data, streamed (sup_multipart.h). The delimiter is
 * "\r\n--" + boundary, and the boundary's characters (RFC 2046's bchars)
 * hold no CR: so when a partial match fails, the bytes it held are data
 * and only the failing byte itself may begin the next match. A match that
 * crosses the end of a piece is kept as its length alone (the bytes are
 * the delimiter's own), which is what lets a part stream with no copy of
 * its data held here. The first delimiter may open the body: the parse
 * starts as if a CRLF had come before it. */
#include "sup_multipart.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DELIM_MAX (4 + SUP_MULTIPART_BOUNDARY_MAX)
#define PARAMS_MAX 16

enum { ST_PREAMBLE, ST_PAD, ST_CR, ST_HEAD, ST_DATA, ST_END };

struct sup_multipart {
	sup_multipart_cbs cbs;
	void *ud;
	unsigned max_parts, count;
	int st;
	char delim[DELIM_MAX + 2]; /* and a '-' after it (scan) */
	size_t dlen, k; /* the delimiter, and how much of it matches now */
	size_t pre, pad; /* preamble bytes, blanks after a delimiter */
	bool failed;
	sbx_err err;
	size_t hlen;
	char head[SUP_MULTIPART_HEAD_MAX];
	char scratch[SUP_MULTIPART_HEAD_MAX + 16]; /* the decoded values */
};

/* ---- header values: type *( ";" name=value ) ---- */

struct param {
	const char *name;
	size_t nl;
	const char *val; /* in the scratch, NUL-terminated */
	size_t vl;
};

struct scratch {
	char *buf;
	size_t used, size;
};

static bool tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static const char *ows(const char *p, const char *e)
{
	while (p < e && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

static bool name_is(const struct param *p, const char *name)
{
	return p->nl == strlen(name) && strncasecmp(p->name, name, p->nl) == 0;
}

/* One parameter's value at *pp (a quoted-string, its escapes undone, or a
 * run of anything but blanks, ';' and '"') into the scratch. */
static int param_value(const char **pp, const char *e, struct scratch *sc, struct param *out,
		       sbx_err *err)
{
	const char *p = *pp;
	if (sc->size - sc->used < (size_t)(e - p) + 1)
		return sbx_err_set(err, -EINVAL, "multipart: a header's values are too long");
	char *dst = sc->buf + sc->used;
	size_t vl = 0;
	if (p < e && *p == '"') {
		for (p++;; p++) {
			if (p == e)
				return sbx_err_set(err, -EINVAL, "multipart: a quoted string without its end");
			if (*p == '"')
				break;
			if (*p == '\\' && ++p == e)
				return sbx_err_set(err, -EINVAL, "multipart: a quoted string without its end");
			dst[vl++] = *p;
		}
		p++;
	} else {
		for (; p < e && !strchr(" \t;\"", *p); p++)
			dst[vl++] = *p;
		if (vl == 0)
			return sbx_err_set(err, -EINVAL, "multipart: a parameter without a value");
	}
	dst[vl] = '\0';
	sc->used += vl + 1;
	out->val = dst;
	out->vl = vl;
	*pp = p;
	return 0;
}

/* s[0..n): its type (*type, *tl: a run of token characters and '/') and
 * its parameters (ps, at most PARAMS_MAX, each name once). */
static int parse_value(const char *s, size_t n, struct scratch *sc, const char **type, size_t *tl,
		       struct param *ps, size_t *np, sbx_err *err)
{
	const char *p = ows(s, s + n), *e = s + n;
	*type = p;
	while (p < e && (tchar((unsigned char)*p) || *p == '/'))
		p++;
	*tl = (size_t)(p - *type);
	if (*tl == 0)
		return sbx_err_set(err, -EINVAL, "multipart: a header value without its type");
	*np = 0;
	for (;;) {
		p = ows(p, e);
		if (p == e)
			return 0;
		if (*p != ';')
			return sbx_err_set(err, -EINVAL, "multipart: want ';' between a header's parameters");
		p = ows(p + 1, e);
		if (p == e)
			return 0; /* a trailing ';' */
		struct param cur = { .name = p };
		while (p < e && tchar((unsigned char)*p))
			p++;
		cur.nl = (size_t)(p - cur.name);
		if (cur.nl == 0 || p == e || *p != '=')
			return sbx_err_set(err, -EINVAL, "multipart: a parameter that is not name=value");
		p++;
		int rc = param_value(&p, e, sc, &cur, err);
		if (rc < 0)
			return rc;
		for (size_t i = 0; i < *np; i++)
			if (ps[i].nl == cur.nl && strncasecmp(ps[i].name, cur.name, cur.nl) == 0)
				return sbx_err_set(err, -EINVAL, "multipart: the parameter %.*s given twice",
						   (int)cur.nl, cur.name);
		if (*np == PARAMS_MAX)
			return sbx_err_set(err, -EINVAL, "multipart: over %d parameters in a header",
					   PARAMS_MAX);
		ps[(*np)++] = cur;
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* RFC 5987's ext-value (charset'lang'pct-encoded), UTF-8 or US-ASCII,
 * decoded where it is (it only shrinks). */
static int ext_value(struct param *p, sbx_err *err)
{
	char *v = (char *)p->val;
	char *q1 = memchr(v, '\'', p->vl);
	char *q2 = q1 ? memchr(q1 + 1, '\'', p->vl - (size_t)(q1 + 1 - v)) : NULL;
	if (!q2)
		return sbx_err_set(err, -EINVAL, "multipart: filename* without charset'language'");
	size_t cl = (size_t)(q1 - v);
	if (!((cl == 5 && strncasecmp(v, "utf-8", 5) == 0) ||
	      (cl == 8 && strncasecmp(v, "us-ascii", 8) == 0)))
		return sbx_err_set(err, -EINVAL, "multipart: filename*'s charset is not UTF-8");
	size_t o = 0;
	for (const char *s = q2 + 1; s < v + p->vl; s++) {
		if (*s == '%') {
			int hi = s + 2 < v + p->vl ? hexval(s[1]) : -1;
			int lo = hi >= 0 ? hexval(s[2]) : -1;
			if (lo < 0)
				return sbx_err_set(err, -EINVAL, "multipart: filename* with a bad %%XX");
			v[o++] = (char)(hi * 16 + lo);
			s += 2;
		} else {
			v[o++] = *s;
		}
	}
	v[o] = '\0';
	if (memchr(v, '\0', o) || memchr(v, '\r', o) || memchr(v, '\n', o))
		return sbx_err_set(err, -EINVAL, "multipart: filename* with NUL, CR or LF");
	p->vl = o;
	return 0;
}

static int disposition(const char *v, size_t n, struct scratch *sc, sup_multipart_part *part,
		       sbx_err *err)
{
	const char *type;
	size_t tl, np;
	struct param ps[PARAMS_MAX];
	int rc = parse_value(v, n, sc, &type, &tl, ps, &np, err);
	if (rc < 0)
		return rc;
	if (tl != 9 || strncasecmp(type, "form-data", 9) != 0)
		return sbx_err_set(err, -EINVAL, "multipart: Content-Disposition is not form-data");
	for (size_t i = 0; i < np; i++) {
		if (name_is(&ps[i], "name")) {
			part->name = ps[i].val;
		} else if (name_is(&ps[i], "filename*")) {
			rc = ext_value(&ps[i], err);
			if (rc < 0)
				return rc;
			part->filename = ps[i].val;
		} else if (name_is(&ps[i], "filename") && !part->filename) {
			/* filename* wins, whichever comes first (RFC 6266) */
			part->filename = ps[i].val;
		}
	}
	return 0;
}

/* The header block head[0..hlen) (ending CRLF CRLF, or a lone CRLF: no
 * headers) into part, its strings in the scratch. */
static int parse_head(sup_multipart *m, sup_multipart_part *part, sbx_err *err)
{
	struct scratch sc = { .buf = m->scratch, .size = sizeof(m->scratch) };
	bool seen_cd = false, seen_ct = false;
	memset(part, 0, sizeof(*part));
	part->index = m->count;
	for (size_t i = 0; i < m->hlen; i++) {
		unsigned char c = (unsigned char)m->head[i];
		if ((c < 0x20 && c != '\t' && c != '\r' && c != '\n') || c == 0x7f ||
		    (c == '\r' && (i + 1 == m->hlen || m->head[i + 1] != '\n')) ||
		    (c == '\n' && (i == 0 || m->head[i - 1] != '\r')))
			return sbx_err_set(err, -EINVAL, "multipart: a control byte, bare CR or bare LF in a part's head");
	}
	const char *p = m->head, *end = m->head + m->hlen;
	for (;;) {
		const char *eol = memchr(p, '\r', (size_t)(end - p)); /* always found: the block ends CRLF */
		if (!eol || eol == p)
			break;
		if (*p == ' ' || *p == '\t')
			return sbx_err_set(err, -EINVAL, "multipart: a folded header line in a part's head");
		const char *colon = memchr(p, ':', (size_t)(eol - p));
		const char *n = p;
		while (n < eol && tchar((unsigned char)*n))
			n++;
		if (!colon || n != colon || colon == p)
			return sbx_err_set(err, -EINVAL, "multipart: a header line without a name and ':'");
		size_t nl = (size_t)(colon - p);
		const char *v = ows(colon + 1, eol), *ve = eol;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		if (nl == 19 && strncasecmp(p, "Content-Disposition", 19) == 0) {
			if (seen_cd)
				return sbx_err_set(err, -EINVAL, "multipart: Content-Disposition twice in a part");
			seen_cd = true;
			int rc = disposition(v, (size_t)(ve - v), &sc, part, err);
			if (rc < 0)
				return rc;
		} else if (nl == 12 && strncasecmp(p, "Content-Type", 12) == 0) {
			if (seen_ct)
				return sbx_err_set(err, -EINVAL, "multipart: Content-Type twice in a part");
			seen_ct = true;
			size_t vl = (size_t)(ve - v);
			if (sc.size - sc.used < vl + 1)
				return sbx_err_set(err, -EINVAL, "multipart: a header's values are too long");
			memcpy(sc.buf + sc.used, v, vl);
			sc.buf[sc.used + vl] = '\0';
			part->content_type = sc.buf + sc.used;
			sc.used += vl + 1;
		}
		p = eol + 2;
	}
	if (!seen_cd)
		return sbx_err_set(err, -EINVAL, "multipart: part %u has no Content-Disposition", m->count);
	return 0;
}

/* ---- the request's Content-Type ---- */

/* RFC 2046's bcharsnospace, and space but not last. */
static bool bchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("'()+_,-./:=? ", c));
}

int sup_multipart_boundary(const char *ct, char *out, size_t size, sbx_err *err)
{
	if (!ct)
		return sbx_err_set(err, -EINVAL, "want Content-Type: multipart/form-data; boundary=...");
	size_t n = strlen(ct);
	if (n > SUP_MULTIPART_CTYPE_MAX)
		return sbx_err_set(err, -EINVAL, "multipart: Content-Type over %d bytes",
				   SUP_MULTIPART_CTYPE_MAX);
	char buf[SUP_MULTIPART_CTYPE_MAX + 1];
	struct scratch sc = { .buf = buf, .size = sizeof(buf) };
	const char *type;
	size_t tl, np;
	struct param ps[PARAMS_MAX];
	int rc = parse_value(ct, n, &sc, &type, &tl, ps, &np, err);
	if (rc < 0)
		return rc;
	if (tl != 19 || strncasecmp(type, "multipart/form-data", 19) != 0)
		return sbx_err_set(err, -EINVAL, "want Content-Type: multipart/form-data; boundary=...");
	const struct param *b = NULL;
	for (size_t i = 0; i < np; i++)
		if (name_is(&ps[i], "boundary"))
			b = &ps[i];
	if (!b)
		return sbx_err_set(err, -EINVAL, "multipart: Content-Type without a boundary");
	if (b->vl == 0 || b->vl > SUP_MULTIPART_BOUNDARY_MAX || b->val[b->vl - 1] == ' ')
		return sbx_err_set(err, -EINVAL, "multipart: the boundary is 1..%d characters, not ending in a space",
				   SUP_MULTIPART_BOUNDARY_MAX);
	for (size_t i = 0; i < b->vl; i++)
		if (!bchar((unsigned char)b->val[i]))
			return sbx_err_set(err, -EINVAL, "multipart: a boundary character outside RFC 2046's");
	if (size <= b->vl)
		return sbx_err_set(err, -EINVAL, "multipart: no room for the boundary");
	memcpy(out, b->val, b->vl + 1);
	return (int)b->vl;
}

sup_multipart *sup_multipart_new(const char *content_type, unsigned max_parts,
				 const sup_multipart_cbs *cbs, void *ud, sbx_err *err)
{
	char b[SUP_MULTIPART_BOUNDARY_MAX + 1];
	int bl = sup_multipart_boundary(content_type, b, sizeof(b), err);
	if (bl < 0)
		return NULL;
	if (max_parts == 0 || max_parts > SUP_MULTIPART_PARTS_MAX) {
		sbx_err_set(err, -EINVAL, "multipart: max_parts 1..%d", SUP_MULTIPART_PARTS_MAX);
		return NULL;
	}
	sup_multipart *m = calloc(1, sizeof(*m));
	if (!m) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	m->cbs = *cbs;
	m->ud = ud;
	m->max_parts = max_parts;
	/* "\r\n--" boundary, and the '-' a closing one goes on with */
	snprintf(m->delim, sizeof(m->delim), "\r\n--%s-", b);
	m->dlen = 4 + (size_t)bl;
	m->st = ST_PREAMBLE;
	m->k = 2; /* as if a CRLF came first: the body may open with the delimiter */
	return m;
}

void sup_multipart_free(sup_multipart *m)
{
	free(m);
}

bool sup_multipart_done(const sup_multipart *m)
{
	return m->st == ST_END;
}

unsigned sup_multipart_count(const sup_multipart *m)
{
	return m->count;
}

/* ---- the parse ---- */

/* A callback's failure, with a message even if it set none. */
static int cb_failed(int rc, sbx_err *err)
{
	if (err->code >= 0)
		sbx_err_set(err, rc, "multipart: the part was refused");
	return err->code;
}

/* Bytes before the next delimiter: a part's data, or the preamble's. */
static int emit(sup_multipart *m, const char *p, size_t n, sbx_err *err)
{
	if (n == 0)
		return 0;
	if (m->st == ST_PREAMBLE) {
		/* + 2: the CRLF the parse began as if read, counted when it is
		 * found not to be a delimiter's */
		m->pre += n;
		return m->pre > SUP_MULTIPART_PREAMBLE_MAX + 2
			       ? sbx_err_set(err, -EINVAL, "multipart: no delimiter in the first %d bytes",
					     SUP_MULTIPART_PREAMBLE_MAX)
			       : 0;
	}
	int rc = m->cbs.on_data ? m->cbs.on_data((const uint8_t *)p, n, m->ud, err) : 0;
	return rc < 0 ? cb_failed(rc, err) : 0;
}

/* A delimiter ended at p[next) (close: the closing one): the data before
 * it, p[run..end), handed out; then on_part_end when it ended a part. 1,
 * SUP_MULTIPART_PAUSE + 1 when on_part_end paused, or < 0. */
static int found(sup_multipart *m, const uint8_t *p, size_t run, size_t end, bool close,
		 size_t next, size_t *ip, sbx_err *err)
{
	int rc = emit(m, (const char *)p + run, end - run, err);
	if (rc < 0)
		return rc;
	bool ended_part = m->st == ST_DATA;
	m->k = 0;
	m->pad = 0;
	m->st = close ? ST_END : ST_PAD;
	*ip = next;
	if (!ended_part || !m->cbs.on_part_end)
		return 1;
	rc = m->cbs.on_part_end(m->ud, err);
	if (rc < 0)
		return cb_failed(rc, err);
	return rc > 0 ? SUP_MULTIPART_PAUSE + 1 : 1;
}

/* The matcher over p[*ip..n) (preamble or data): 0 the piece is used up
 * (a match may be in progress), else what found() returns. As Go's reader
 * (which E2B's envd uses) does, "\r\n--boundary" is a delimiter only when
 * followed by "--", a blank, CR or LF: "--boundaryX" inside a part is
 * data. So a match may hold the delimiter and one '-' past it (m->k up to
 * dlen + 1; m->delim ends with that '-'). */
static int scan(sup_multipart *m, const uint8_t *p, size_t n, size_t *ip, sbx_err *err)
{
	size_t i = *ip, run = i, mstart = i;
	size_t carry = m->k; /* matched in earlier pieces: not in p */
	int rc;
	for (; i < n; i++) {
		char c = (char)p[i];
		if ((m->k < m->dlen && c == m->delim[m->k]) || (m->k == m->dlen && c == '-')) {
			if (m->k++ == 0)
				mstart = i;
			continue;
		}
		size_t end = carry ? run : mstart;
		if (m->k == m->dlen && (c == ' ' || c == '\t' || c == '\r' || c == '\n'))
			return found(m, p, run, end, false, i, ip, err);
		if (m->k == m->dlen + 1 && c == '-')
			return found(m, p, run, end, true, i + 1, ip, err);
		if (m->k > 0 && carry) {
			/* a match from an earlier piece failed: its bytes were data,
			 * before p[run..i) */
			rc = emit(m, m->delim, carry, err);
			if (rc < 0)
				return rc;
			carry = 0;
		}
		m->k = 0;
		if (c == m->delim[0]) {
			m->k = 1;
			mstart = i;
		}
	}
	rc = emit(m, (const char *)p + run, (m->k ? (carry ? run : mstart) : n) - run, err);
	*ip = n;
	return rc < 0 ? rc : 0;
}

/* One byte between a delimiter and the part's head: blanks, CRLF. */
static int after(sup_multipart *m, char c, sbx_err *err)
{
	if (m->st == ST_PAD) {
		if (c == ' ' || c == '\t')
			return ++m->pad > SUP_MULTIPART_PAD_MAX
				       ? sbx_err_set(err, -EINVAL, "multipart: over %d blanks after a delimiter",
						     SUP_MULTIPART_PAD_MAX)
				       : 0;
		if (c != '\r')
			return sbx_err_set(err, -EINVAL, "multipart: a delimiter not followed by CRLF or \"--\"");
		m->st = ST_CR;
		return 0;
	}
	if (c != '\n')
		return sbx_err_set(err, -EINVAL, "multipart: a delimiter not followed by CRLF or \"--\"");
	if (m->count == m->max_parts)
		return sbx_err_set(err, -EINVAL, "multipart: over %u parts", m->max_parts);
	m->st = ST_HEAD;
	m->hlen = 0;
	return 0;
}

/* One byte of a part's head: 1 when it completed the head (on_part ran;
 * SUP_MULTIPART_PAUSE + 1 when it paused), else 0 or < 0. */
static int head_byte(sup_multipart *m, char c, sbx_err *err)
{
	if (m->hlen == sizeof(m->head))
		return sbx_err_set(err, -EINVAL, "multipart: a part's head over %d bytes",
				   SUP_MULTIPART_HEAD_MAX);
	m->head[m->hlen++] = c;
	bool empty = m->hlen == 2 && memcmp(m->head, "\r\n", 2) == 0;
	if (!empty && (m->hlen < 4 || memcmp(m->head + m->hlen - 4, "\r\n\r\n", 4) != 0))
		return 0;
	sup_multipart_part part;
	int rc = parse_head(m, &part, err);
	if (rc < 0)
		return rc;
	m->count++;
	m->st = ST_DATA;
	m->k = 0;
	rc = m->cbs.on_part ? m->cbs.on_part(&part, m->ud, err) : 0;
	if (rc < 0)
		return cb_failed(rc, err);
	return rc > 0 ? SUP_MULTIPART_PAUSE + 1 : 1;
}

static ssize_t fail(sup_multipart *m, sbx_err *err)
{
	m->failed = true;
	m->err = *err;
	return err->code;
}

ssize_t sup_multipart_feed(sup_multipart *m, const uint8_t *p, size_t n, sbx_err *err)
{
	if (m->failed) {
		*err = m->err;
		return err->code;
	}
	size_t i = 0;
	while (i < n) {
		int rc;
		switch (m->st) {
		case ST_PREAMBLE:
		case ST_DATA:
			rc = scan(m, p, n, &i, err);
			break;
		case ST_HEAD:
			rc = head_byte(m, (char)p[i++], err);
			break;
		case ST_END:
			return (ssize_t)n;
		default:
			rc = after(m, (char)p[i++], err);
			break;
		}
		if (rc < 0)
			return fail(m, err);
		if (rc == SUP_MULTIPART_PAUSE + 1)
			return (ssize_t)i;
	}
	return (ssize_t)n;
}

int sup_multipart_finish(sup_multipart *m, sbx_err *err)
{
	if (m->failed) {
		*err = m->err;
		return err->code;
	}
	switch (m->st) {
	case ST_END:
		return 0;
	case ST_PREAMBLE:
		return sbx_err_set(err, -EINVAL, "multipart: the body ended before its first delimiter");
	case ST_DATA:
		return sbx_err_set(err, -EINVAL, "multipart: the body ended inside part %u (no closing delimiter)",
				   m->count - 1);
	default:
		return sbx_err_set(err, -EINVAL, "multipart: the body ended in a part's head or delimiter");
	}
}
