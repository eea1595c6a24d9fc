#include "sup_httpin_parse.h"

#include <errno.h>
#include <string.h>
#include <stddef.h>
#include <strings.h>

/* ---- the end of a head ---- */

/* Bytes a head may hold besides CR/LF: HT, visible ASCII, space, obs-text. */
static bool head_byte_ok(uint8_t c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

int sup_httpin_headscan_feed(sup_httpin_headscan *s, const uint8_t *p, size_t n, size_t *end)
{
	for (size_t i = 0; i < n; i++) {
		uint8_t c = p[i];
		if (++s->total > SUP_HTTPIN_HEAD_MAX)
			return -E2BIG;
		if (s->cr) {
			if (c != '\n')
				return -EINVAL; /* a CR alone */
			s->cr = false;
			if (s->line == 0) {
				*end = i + 1;
				return 1;
			}
			s->line = 0;
			continue;
		}
		if (c == '\r') {
			s->cr = true;
			continue;
		}
		if (c == '\n' || !head_byte_ok(c))
			return -EINVAL; /* a bare LF (some read a line end there) or a control byte */
		/* A folded line continues the previous header for some readers:
		 * it could carry a framing header past us (RFC 9112 5.2). */
		if (s->line == 0 && s->total > 1 && (c == ' ' || c == '\t'))
			return -EINVAL;
		s->line++;
	}
	return 0;
}

/* ---- the head ---- */

static bool tchar(uint8_t c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* The next line of buf[*off..len) without its CRLF; false at the empty line
 * or the end. */
static bool next_line(const char *buf, size_t len, size_t *off, const char **l, size_t *ll)
{
	const char *s = buf + *off;
	const char *e = memchr(s, '\r', len - *off);
	if (!e || e == s)
		return false;
	*l = s;
	*ll = (size_t)(e - s);
	*off += *ll + 2;
	return true;
}

static int parse_request_line(const char *l, size_t n, sup_httpin_head *h)
{
	size_t i = 0;
	while (i < n && tchar((uint8_t)l[i]))
		i++;
	if (i == 0 || i >= n || l[i] != ' ')
		return -EINVAL;
	h->method = l;
	h->method_len = i;
	size_t t = ++i;
	while (i < n && (uint8_t)l[i] > 0x20 && l[i] != 0x7f)
		i++;
	if (i == t || i >= n || l[i] != ' ')
		return -EINVAL;
	h->target = l + t;
	h->target_len = i - t;
	i++;
	if (n - i != 8 || memcmp(l + i, "HTTP/1.", 7) != 0 || (l[i + 7] != '0' && l[i + 7] != '1'))
		return -EINVAL;
	h->minor = l[i + 7] - '0';
	return 0;
}

/* name: value with OWS trimmed; -EINVAL when not a header line. */
static int split_header(const char *l, size_t n, size_t *nl, const char **v, size_t *vl)
{
	size_t i = 0;
	while (i < n && tchar((uint8_t)l[i]))
		i++;
	if (i == 0 || i >= n || l[i] != ':')
		return -EINVAL;
	*nl = i;
	i++;
	while (i < n && (l[i] == ' ' || l[i] == '\t'))
		i++;
	size_t e = n;
	while (e > i && (l[e - 1] == ' ' || l[e - 1] == '\t'))
		e--;
	*v = l + i;
	*vl = e - i;
	return 0;
}

static bool name_is(const char *l, size_t nl, const char *name)
{
	return strlen(name) == nl && strncasecmp(l, name, nl) == 0;
}

static bool value_is(const char *v, size_t vl, const char *want)
{
	return strlen(want) == vl && strncasecmp(v, want, vl) == 0;
}

static void set_bad(sup_httpin_head *h, const char *why)
{
	if (!h->bad)
		h->bad = why;
}

static void content_length(sup_httpin_head *h, const char *v, size_t vl)
{
	if (h->has_cl) {
		set_bad(h, "two Content-Length headers");
		return;
	}
	h->has_cl = true;
	if (vl == 0 || vl > 18) {
		set_bad(h, "Content-Length is not a number below 10^18");
		return;
	}
	uint64_t x = 0;
	for (size_t i = 0; i < vl; i++) {
		if (v[i] < '0' || v[i] > '9') {
			set_bad(h, "Content-Length is not a number below 10^18");
			return;
		}
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	h->cl = x;
}

bool sup_httpin_has_token(const char *v, size_t vl, const char *token)
{
	size_t i = 0;
	while (i < vl) {
		while (i < vl && (v[i] == ',' || v[i] == ' ' || v[i] == '\t'))
			i++;
		size_t s = i;
		while (i < vl && v[i] != ',' && v[i] != ' ' && v[i] != '\t')
			i++;
		if (value_is(v + s, i - s, token))
			return true;
	}
	return false;
}

/* The comma-separated tokens of a Connection header. */
static void connection_tokens(sup_httpin_head *h, const char *v, size_t vl)
{
	h->conn_close |= sup_httpin_has_token(v, vl, "close");
	h->conn_keepalive |= sup_httpin_has_token(v, vl, "keep-alive");
	h->conn_upgrade |= sup_httpin_has_token(v, vl, "upgrade");
}

static void framing_header(sup_httpin_head *h, const char *l, size_t nl, const char *v, size_t vl)
{
	if (name_is(l, nl, "Content-Length")) {
		content_length(h, v, vl);
	} else if (name_is(l, nl, "Transfer-Encoding")) {
		if (h->has_te)
			set_bad(h, "two Transfer-Encoding headers");
		h->has_te = true;
		h->te_chunked = value_is(v, vl, "chunked");
	} else if (name_is(l, nl, "Expect")) {
		if (value_is(v, vl, "100-continue"))
			h->expect_continue = true;
		else
			set_bad(h, "an Expect other than 100-continue");
	} else if (name_is(l, nl, "Connection")) {
		connection_tokens(h, v, vl);
	} else if (name_is(l, nl, "Host")) {
		if (++h->hosts > 1)
			set_bad(h, "two Host headers");
	}
}

/* "HTTP/1.x NNN reason" (the reason may be empty). */
static int parse_status_line(const char *l, size_t n, sup_httpin_head *h)
{
	if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ' ||
	    (n > 12 && l[12] != ' '))
		return -EINVAL;
	h->minor = l[7] - '0';
	h->status = 0;
	for (size_t i = 9; i < 12; i++) {
		if (l[i] < '0' || l[i] > '9')
			return -EINVAL;
		h->status = h->status * 10 + (l[i] - '0');
	}
	return h->status >= 100 ? 0 : -EINVAL;
}

static int parse_head(const char *buf, size_t len, sup_httpin_head *h, bool response)
{
	memset(h, 0, offsetof(sup_httpin_head, hdrs));
	h->nhdrs = 0;
	if (len < 4 || memcmp(buf + len - 4, "\r\n\r\n", 4) != 0)
		return -EINVAL;
	size_t off = 0;
	const char *l;
	size_t ll;
	if (!next_line(buf, len, &off, &l, &ll) ||
	    (response ? parse_status_line(l, ll, h) : parse_request_line(l, ll, h)) < 0)
		return -EINVAL;
	while (next_line(buf, len, &off, &l, &ll)) {
		size_t nl, vl;
		const char *v;
		if (split_header(l, ll, &nl, &v, &vl) < 0)
			return -EINVAL;
		if (h->nhdrs == SUP_HTTPIN_MAX_HEADERS)
			return -E2BIG;
		h->hdrs[h->nhdrs++] = (sup_httpin_hdr){ l, nl, v, vl };
		framing_header(h, l, nl, v, vl);
	}
	if (off != len - 2)
		return -EINVAL; /* an empty line before the end: cannot happen after headscan */
	if (h->has_cl && h->has_te)
		set_bad(h, "both Content-Length and Transfer-Encoding");
	if (h->has_te && !h->te_chunked)
		set_bad(h, "a Transfer-Encoding other than chunked");
	if (h->has_te && h->minor == 0)
		set_bad(h, "Transfer-Encoding in an HTTP/1.0 request");
	return 0;
}

int sup_httpin_parse_head(const char *buf, size_t len, sup_httpin_head *h)
{
	return parse_head(buf, len, h, false);
}

int sup_httpin_parse_response(const char *buf, size_t len, sup_httpin_head *h)
{
	return parse_head(buf, len, h, true);
}

/* ---- chunked bodies ---- */

enum { CH_SIZE, CH_EXT, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_TRAILER_LF,
       CH_END };

void sup_httpin_chunked_init(sup_httpin_chunked *d)
{
	memset(d, 0, sizeof(*d));
	d->st = CH_SIZE;
}

int sup_httpin_hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int chunk_byte(sup_httpin_chunked *d, uint8_t c, const char **why)
{
	switch (d->st) {
	case CH_SIZE:
	case CH_EXT:
		if (++d->line > SUP_HTTPIN_CHUNK_LINE_MAX) {
			*why = "chunk-size line too long";
			return -EBADMSG;
		}
		if (c == '\r' && d->line > 1) {
			d->st = CH_SIZE_LF;
			return 0;
		}
		if (d->st == CH_SIZE && sup_httpin_hexval(c) >= 0) {
			if (d->digits || c != '0')
				d->digits++;
			if (d->digits > 15) {
				*why = "chunk size over 2^60";
				return -EBADMSG;
			}
			d->left = d->left * 16 + (uint64_t)sup_httpin_hexval(c);
			return 0;
		}
		if (d->line == 1) {
			*why = "chunk size is not hex";
			return -EBADMSG;
		}
		/* After the digits only blanks, then extensions: ";name=value". */
		if (!d->ext && c != ';' && c != ' ' && c != '\t') {
			*why = "chunk size is not hex";
			return -EBADMSG;
		}
		d->ext |= c == ';';
		if (c == '\n' || (c < 0x20 && c != '\t') || c == 0x7f) {
			*why = "control byte in a chunk-size line";
			return -EBADMSG;
		}
		d->st = CH_EXT;
		return 0;
	case CH_SIZE_LF:
		if (c != '\n') {
			*why = "chunk-size line without CRLF";
			return -EBADMSG;
		}
		d->line = 0;
		d->st = d->left ? CH_DATA : CH_TRAILER;
		return 0;
	case CH_DATA_CR:
		if (c != '\r') {
			*why = "chunk data longer than its size";
			return -EBADMSG;
		}
		d->st = CH_DATA_LF;
		return 0;
	case CH_DATA_LF:
		if (c != '\n') {
			*why = "chunk data without CRLF after it";
			return -EBADMSG;
		}
		sup_httpin_chunked_init(d);
		return 0;
	case CH_TRAILER:
		if (c == '\r') {
			d->st = CH_TRAILER_LF;
			return 0;
		}
		if (++d->trailer > SUP_HTTPIN_TRAILER_MAX) {
			*why = "trailer section too long";
			return -EBADMSG;
		}
		if (c == '\n' || (c < 0x20 && c != '\t') || c == 0x7f) {
			*why = "control byte or bare LF in the trailer section";
			return -EBADMSG;
		}
		d->line++;
		return 0;
	case CH_TRAILER_LF:
		if (c != '\n') {
			*why = "trailer line without CRLF";
			return -EBADMSG;
		}
		d->st = d->line ? CH_TRAILER : CH_END;
		d->line = 0;
		return 0;
	default:
		*why = "chunked decoder state";
		return -EBADMSG;
	}
}

int sup_httpin_chunked_frame(sup_httpin_chunked *d, const uint8_t *p, size_t n, size_t *used,
			     const char **why)
{
	size_t i = 0;
	int rc = SUP_HTTPIN_MORE;
	while (rc == SUP_HTTPIN_MORE) {
		if (d->st == CH_DATA) {
			rc = SUP_HTTPIN_DATA;
			break;
		}
		if (d->st == CH_END) {
			rc = SUP_HTTPIN_END;
			break;
		}
		if (i == n)
			break;
		if (chunk_byte(d, p[i], why) < 0) {
			*used = i;
			return -EBADMSG;
		}
		i++;
	}
	*used = i;
	return rc;
}

void sup_httpin_chunked_took(sup_httpin_chunked *d, uint64_t k)
{
	d->left -= k;
	if (d->left == 0)
		d->st = CH_DATA_CR;
}
