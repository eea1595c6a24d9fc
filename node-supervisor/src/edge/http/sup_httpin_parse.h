/* HTTP/1.1 request framing (RFC 9112): where a request head ends, what its
 * request line and headers say (framing, connection options, every header
 * up to a bound), and an incremental chunked-body decoder. Pure functions
 * on bytes, every length bounded. Strict by design: a bare LF or CR, a
 * control byte, a folded line, conflicting or malformed framing headers
 * are refused, so no request boundary can be read two ways (no request
 * smuggling). It must not know about connections, routes or sandboxes. */
#ifndef SUP_HTTPIN_PARSE_H
#define SUP_HTTPIN_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest request head (request line, headers, the empty line). */
#define SUP_HTTPIN_HEAD_MAX (64 * 1024)
/* Most header lines in one head. */
#define SUP_HTTPIN_MAX_HEADERS 100
/* Largest chunk-size line (with extensions) and trailer section. */
#define SUP_HTTPIN_CHUNK_LINE_MAX 4096
#define SUP_HTTPIN_TRAILER_MAX (16 * 1024)

/* Incremental search for the end of a head, fed as bytes arrive. */
typedef struct sup_httpin_headscan {
	size_t total;  /* bytes seen */
	size_t line;   /* bytes of the current line, CR excluded */
	bool cr;       /* the previous byte was CR */
} sup_httpin_headscan;

/* Feed p[0..n): > 0 the head ends after *end of these bytes, 0 more
 * needed, -EINVAL a bare LF or CR, a control byte or a folded line,
 * -E2BIG more than SUP_HTTPIN_HEAD_MAX bytes. */
int sup_httpin_headscan_feed(sup_httpin_headscan *s, const uint8_t *p, size_t n, size_t *end);

typedef struct sup_httpin_hdr {
	const char *name;
	size_t name_len;
	const char *value; /* optional whitespace trimmed */
	size_t value_len;
} sup_httpin_hdr;

typedef struct sup_httpin_head {
	const char *method;
	size_t method_len;
	const char *target;
	size_t target_len;
	int minor;            /* HTTP/1.<minor> */
	int status;           /* a response's status code (100..999) */
	bool has_cl;
	uint64_t cl;
	bool has_te;
	bool te_chunked;      /* exactly "chunked" */
	bool expect_continue; /* Expect: 100-continue */
	bool conn_close;      /* Connection: close */
	bool conn_keepalive;  /* Connection: keep-alive */
	bool conn_upgrade;    /* Connection: upgrade */
	unsigned hosts;       /* Host headers seen */
	const char *bad;      /* framing a request must not have, else NULL */
	sup_httpin_hdr hdrs[SUP_HTTPIN_MAX_HEADERS];
	size_t nhdrs;
} sup_httpin_head;

/* Whether a header value's comma-separated list holds token
 * (case-insensitive): Connection, Upgrade. */
bool sup_httpin_has_token(const char *v, size_t vl, const char *token);

/* Parse a complete head (buf[0..len) ending with the empty line): 0, or
 * -EINVAL when it is malformed, -E2BIG with more than
 * SUP_HTTPIN_MAX_HEADERS headers. Framing that parses but may not be
 * trusted sets h->bad: two Content-Length, Content-Length and
 * Transfer-Encoding, a Content-Length that is not a plain number, a
 * Transfer-Encoding other than chunked (or on HTTP/1.0), an Expect other
 * than 100-continue, more than one Host. */
int sup_httpin_parse_head(const char *buf, size_t len, sup_httpin_head *h);

/* The same for a response head ("HTTP/1.x NNN reason" and headers):
 * status set, method and target not; the framing headers and h->bad as for
 * a request (a response's framing, RFC 9112 6.3, is the caller's). */
int sup_httpin_parse_response(const char *buf, size_t len, sup_httpin_head *h);

/* Chunked transfer coding (RFC 9112 7.1), framing only: the caller takes
 * the data bytes itself while `left` > 0 and reports them with _took. */
typedef struct sup_httpin_chunked {
	int st;
	uint64_t left;   /* data bytes left in the current chunk */
	size_t line;     /* bytes of the current size or trailer line */
	size_t trailer;  /* trailer bytes so far */
	unsigned digits; /* significant hex digits of the size */
	bool ext;        /* a ';' was seen: chunk extensions follow */
} sup_httpin_chunked;

enum {
	SUP_HTTPIN_MORE = 0, /* p used up, framing incomplete */
	SUP_HTTPIN_DATA = 1, /* left > 0 data bytes follow */
	SUP_HTTPIN_END = 2,  /* last chunk and trailers read */
};

void sup_httpin_chunked_init(sup_httpin_chunked *d);
/* The value of a hex digit, or -1. */
int sup_httpin_hexval(uint8_t c);
/* Consume framing bytes of p[0..n) (*used says how many) until data
 * follows, the body ends, or p runs out; -EBADMSG with *why on bad framing
 * (a size that is not hex or over 2^60, a line without CRLF, a line or
 * trailer over its bound). */
int sup_httpin_chunked_frame(sup_httpin_chunked *d, const uint8_t *p, size_t n, size_t *used,
			     const char **why);
/* The caller took k <= left data bytes. */
void sup_httpin_chunked_took(sup_httpin_chunked *d, uint64_t k);

#endif
