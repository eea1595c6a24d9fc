/* sup_netpol: see sup_netpol.h. */
#include "sup_netpol.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A name rule's rank among those matching one name: exact above every
 * wildcard (a name has at most 127 labels), else the wildcard's labels. */
#define RANK_EXACT 255
#define RANK_DEFAULT (-1)

void sup_netpol_init(sup_netpol *p, sup_netpol_action default_action)
{
	memset(p, 0, sizeof(*p));
	p->default_action = default_action;
}

void sup_netpol_rule_free(sup_netpol_rule *r)
{
	free(r->name);
	r->name = NULL;
}

void sup_netpol_free(sup_netpol *p)
{
	for (size_t i = 0; i < p->n; i++)
		sup_netpol_rule_free(&p->rules[i]);
	free(p->rules);
	p->rules = NULL;
	p->n = 0;
}

int sup_netpol_copy(const sup_netpol *src, sup_netpol *dst)
{
	sup_netpol_init(dst, src->default_action);
	if (src->n == 0)
		return 0;
	dst->rules = calloc(src->n, sizeof(*dst->rules));
	if (!dst->rules)
		return -ENOMEM;
	for (size_t i = 0; i < src->n; i++) {
		dst->rules[i] = src->rules[i];
		dst->rules[i].name = NULL;
		dst->n = i + 1;
		if (src->rules[i].name && !(dst->rules[i].name = strdup(src->rules[i].name))) {
			sup_netpol_free(dst);
			return -ENOMEM;
		}
	}
	return 0;
}

/* ---- names ---- */

int sup_netpol_norm_name(const char *in, char *out, size_t cap)
{
	size_t n = strlen(in);
	if (n > 0 && in[n - 1] == '.')
		n--;
	if (n == 0 || n > SUP_NETPOL_NAME_MAX || n >= cap)
		return -EINVAL;
	int labels = 0;
	size_t label_len = 0;
	bool label_digits = true;
	for (size_t i = 0; i <= n; i++) {
		char c = i < n ? in[i] : '.';
		if (c == '.') {
			if (label_len == 0 || label_len > 63)
				return -EINVAL;
			labels++;
			out[i] = '.';
			if (i == n)
				break;
			label_len = 0;
			label_digits = true;
			continue;
		}
		unsigned char u = (unsigned char)c;
		if (!(isalnum(u) || c == '-' || c == '_') || u >= 0x80)
			return -EINVAL;
		out[i] = (char)tolower(u);
		label_len++;
		if (!isdigit(u))
			label_digits = false;
	}
	/* a last label of digits only is no host name (RFC 3696): "1.2.3" is a
	 * mistyped address, not a name */
	if (label_digits)
		return -EINVAL;
	out[n] = '\0';
	return labels;
}

/* name matches rule r (HOST or WILDCARD)? */
static bool name_matches(const sup_netpol_rule *r, const char *name, size_t len)
{
	if (r->kind == SUP_NETPOL_HOST)
		return strcmp(r->name, name) == 0;
	size_t sl = strlen(r->name);
	return len > sl + 1 && name[len - sl - 1] == '.' && memcmp(name + len - sl, r->name, sl) == 0;
}

static int name_rank(const sup_netpol_rule *r)
{
	return r->kind == SUP_NETPOL_HOST ? RANK_EXACT : r->labels;
}

/* ---- targets ---- */

static int parse_uint(const char *s, size_t len, unsigned max, unsigned *out)
{
	if (len == 0 || len > 5 || (len > 1 && s[0] == '0'))
		return -EINVAL;
	unsigned v = 0;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_port(const char *s, size_t len, const char *target, uint16_t *port, sbx_err *err)
{
	unsigned v;
	if (parse_uint(s, len, 65535, &v) < 0 || v == 0)
		return sbx_err_set(err, -EINVAL, "target \"%s\": port \"%.*s\": want 1..65535", target,
				   (int)len, s);
	*port = (uint16_t)v;
	return 0;
}

/* "addr" or "addr/len" of family af into r. */
static int parse_net(const char *s, size_t len, int af, const char *target, sup_netpol_rule *r,
		     sbx_err *err)
{
	char buf[64];
	const char *slash = memchr(s, '/', len);
	size_t alen = slash ? (size_t)(slash - s) : len;
	unsigned bits = af == AF_INET ? 32 : 128;
	if (alen == 0 || alen >= sizeof(buf))
		return sbx_err_set(err, -EINVAL, "target \"%s\": not an address", target);
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	uint8_t a[16] = {0};
	if (inet_pton(af, buf, a) != 1)
		return sbx_err_set(err, -EINVAL, "target \"%s\": \"%s\" is not an IPv%d address",
				   target, buf, af == AF_INET ? 4 : 6);
	unsigned prefix = bits;
	if (slash && parse_uint(slash + 1, len - alen - 1, bits, &prefix) < 0)
		return sbx_err_set(err, -EINVAL, "target \"%s\": prefix length: want 0..%u", target,
				   bits);
	if (af == AF_INET6 && IN6_IS_ADDR_V4MAPPED((struct in6_addr *)a))
		return sbx_err_set(err, -EINVAL,
				   "target \"%s\": an IPv4-mapped address; write the IPv4 form", target);
	unsigned nbytes = bits / 8;
	for (unsigned i = 0; i < nbytes; i++) {
		unsigned keep = prefix >= (i + 1) * 8 ? 8 : prefix > i * 8 ? prefix - i * 8 : 0;
		uint8_t mask = keep ? (uint8_t)(0xff << (8 - keep)) : 0;
		if (a[i] & ~mask)
			return sbx_err_set(err, -EINVAL,
					   "target \"%s\": address bits set beyond the prefix /%u", target,
					   prefix);
	}
	r->kind = af == AF_INET ? SUP_NETPOL_NET4 : SUP_NETPOL_NET6;
	r->prefix = (uint8_t)prefix;
	memcpy(r->addr, a, nbytes);
	return 0;
}

static int parse_name(const char *s, size_t len, const char *target, sup_netpol_rule *r,
		      sbx_err *err)
{
	bool wild = len >= 2 && s[0] == '*' && s[1] == '.';
	if (wild) {
		s += 2;
		len -= 2;
	}
	char in[SUP_NETPOL_NAME_MAX + 2], out[SUP_NETPOL_NAME_MAX + 2];
	if (len == 0 || len >= sizeof(in) || memchr(s, '*', len))
		goto bad;
	memcpy(in, s, len);
	in[len] = '\0';
	int labels = sup_netpol_norm_name(in, out, sizeof(out));
	if (labels < 0)
		goto bad;
	r->kind = wild ? SUP_NETPOL_WILDCARD : SUP_NETPOL_HOST;
	r->labels = (uint8_t)labels;
	r->name = strdup(out);
	if (!r->name)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return 0;
bad:
	return sbx_err_set(err, -EINVAL,
			   "target \"%s\": not an address, a network or a host name (labels of "
			   "1..63 letters, digits, '-' or '_', at most 253 bytes; a wildcard is "
			   "\"*.\" before a name)",
			   target);
}

int sup_netpol_parse_target(const char *target, sup_netpol_rule *r, sbx_err *err)
{
	memset(r, 0, sizeof(*r));
	size_t len = strlen(target);
	if (len == 0)
		return sbx_err_set(err, -EINVAL, "target: must not be empty");
	if (len > SUP_NETPOL_TARGET_MAX)
		return sbx_err_set(err, -EINVAL, "target \"%.64s...\": longer than %d bytes", target,
				   SUP_NETPOL_TARGET_MAX);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)target[i] <= ' ' || (unsigned char)target[i] >= 0x7f)
			return sbx_err_set(err, -EINVAL,
					   "target \"%.64s\": spaces, control or non-ASCII bytes", target);
	int rc;
	if (target[0] == '[') {
		/* [v6], [v6]:port, [v6/len]:port */
		const char *close = strchr(target, ']');
		if (!close || (close[1] != '\0' && close[1] != ':'))
			return sbx_err_set(err, -EINVAL, "target \"%s\": want [IPv6] or [IPv6]:port",
					   target);
		rc = parse_net(target + 1, (size_t)(close - target - 1), AF_INET6, target, r, err);
		if (rc == 0 && close[1] == ':')
			rc = parse_port(close + 2, strlen(close + 2), target, &r->port, err);
		return rc;
	}
	const char *colon = strchr(target, ':');
	if (colon && strchr(colon + 1, ':')) /* IPv6 without brackets: no port */
		return parse_net(target, len, AF_INET6, target, r, err);
	size_t hlen = colon ? (size_t)(colon - target) : len;
	if (colon && (rc = parse_port(colon + 1, len - hlen - 1, target, &r->port, err)) < 0)
		return rc;
	/* an IPv4 address starts with a digit and holds only digits, dots and
	 * a prefix; a name's last label is never all digits */
	bool v4 = hlen > 0;
	for (size_t i = 0; i < hlen; i++)
		if (!isdigit((unsigned char)target[i]) && target[i] != '.' && target[i] != '/')
			v4 = false;
	if (v4)
		return parse_net(target, hlen, AF_INET, target, r, err);
	return parse_name(target, hlen, target, r, err);
}

int sup_netpol_format_target(const sup_netpol_rule *r, char *buf, size_t cap)
{
	char a[INET6_ADDRSTRLEN + 8], port[8] = "";
	int n;
	if (r->port)
		snprintf(port, sizeof(port), ":%u", (unsigned)r->port);
	switch (r->kind) {
	case SUP_NETPOL_HOST:
		n = snprintf(buf, cap, "%s%s", r->name, port);
		break;
	case SUP_NETPOL_WILDCARD:
		n = snprintf(buf, cap, "*.%s%s", r->name, port);
		break;
	case SUP_NETPOL_NET4:
	case SUP_NETPOL_NET6: {
		bool v6 = r->kind == SUP_NETPOL_NET6;
		inet_ntop(v6 ? AF_INET6 : AF_INET, r->addr, a, sizeof(a));
		size_t l = strlen(a);
		if (r->prefix != (v6 ? 128 : 32))
			snprintf(a + l, sizeof(a) - l, "/%u", (unsigned)r->prefix);
		if (v6 && r->port)
			n = snprintf(buf, cap, "[%s]%s", a, port);
		else
			n = snprintf(buf, cap, "%s%s", a, port);
		break;
	}
	default:
		n = -1;
	}
	return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}

static bool same_target(const sup_netpol_rule *a, const sup_netpol_rule *b)
{
	if (a->kind != b->kind || a->port != b->port)
		return false;
	if (a->kind == SUP_NETPOL_HOST || a->kind == SUP_NETPOL_WILDCARD)
		return a->name && b->name && strcmp(a->name, b->name) == 0;
	return a->prefix == b->prefix &&
	       memcmp(a->addr, b->addr, a->kind == SUP_NETPOL_NET4 ? 4 : 16) == 0;
}

int sup_netpol_add(sup_netpol *p, sup_netpol_action action, const char *target, sbx_err *err)
{
	if (p->n >= SUP_NETPOL_MAX_RULES)
		return sbx_err_set(err, -EINVAL, "more than %d egress rules", SUP_NETPOL_MAX_RULES);
	sup_netpol_rule r;
	int rc = sup_netpol_parse_target(target, &r, err);
	if (rc < 0)
		return rc;
	r.action = action;
	for (size_t i = 0; i < p->n; i++) {
		if (same_target(&p->rules[i], &r)) {
			char canon[SUP_NETPOL_TARGET_MAX + 8];
			sup_netpol_format_target(&r, canon, sizeof(canon));
			sup_netpol_rule_free(&r);
			return sbx_err_set(err, -EINVAL,
					   "target \"%s\" is given twice (as %s): one rule per target",
					   target, canon);
		}
	}
	sup_netpol_rule *nr = realloc(p->rules, (p->n + 1) * sizeof(*nr));
	if (!nr) {
		sup_netpol_rule_free(&r);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	p->rules = nr;
	p->rules[p->n++] = r;
	return 0;
}

/* ---- what the rules decide ---- */

void sup_netpol_name(const sup_netpol *p, const char *name, sup_netpol_name_verdict *v)
{
	v->answer = false;
	v->allow_all = false;
	v->n_allow = v->n_deny = 0;
	size_t len = strlen(name);
	/* the most specific portless rule, or the default */
	const sup_netpol_rule *w0 = NULL;
	for (size_t i = 0; i < p->n; i++) {
		const sup_netpol_rule *r = &p->rules[i];
		if ((r->kind == SUP_NETPOL_HOST || r->kind == SUP_NETPOL_WILDCARD) && !r->port &&
		    name_matches(r, name, len) && (!w0 || name_rank(r) > name_rank(w0)))
			w0 = r;
	}
	int floor = w0 ? name_rank(w0) : RANK_DEFAULT;
	sup_netpol_action base = w0 ? w0->action : p->default_action;
	/* per port, the most specific rule with that port at least as specific
	 * as w0 (a rule with a port beats the portless one of equal rank) */
	for (size_t i = 0; i < p->n; i++) {
		const sup_netpol_rule *r = &p->rules[i];
		if ((r->kind != SUP_NETPOL_HOST && r->kind != SUP_NETPOL_WILDCARD) || !r->port ||
		    name_rank(r) < floor || !name_matches(r, name, len))
			continue;
		bool beaten = false;
		for (size_t j = 0; j < p->n && !beaten; j++) {
			const sup_netpol_rule *o = &p->rules[j];
			beaten = j != i && (o->kind == SUP_NETPOL_HOST || o->kind == SUP_NETPOL_WILDCARD) &&
				 o->port == r->port && name_rank(o) > name_rank(r) &&
				 name_matches(o, name, len);
		}
		if (beaten)
			continue;
		if (r->action == SUP_NETPOL_ALLOW && !(w0 && base == SUP_NETPOL_ALLOW))
			v->allow[v->n_allow++] = r->port;
		else if (r->action == SUP_NETPOL_DENY && base == SUP_NETPOL_ALLOW)
			v->deny[v->n_deny++] = r->port;
	}
	v->allow_all = w0 && base == SUP_NETPOL_ALLOW;
	v->answer = base == SUP_NETPOL_ALLOW || v->n_allow > 0;
}

static int entry_cmp(const void *a, const void *b)
{
	const sup_netpol_entry *x = a, *y = b;
	if (x->family != y->family)
		return x->family < y->family ? -1 : 1;
	if (x->prefix != y->prefix)
		return x->prefix > y->prefix ? -1 : 1;
	if (x->has_port != y->has_port)
		return x->has_port ? -1 : 1;
	if (x->action != y->action)
		return x->action == SUP_NETPOL_DENY ? -1 : 1;
	/* same decision: keep the order given, the sets after the rules */
	if ((x->set == SUP_NETPOL_SET_NONE) != (y->set == SUP_NETPOL_SET_NONE))
		return x->set == SUP_NETPOL_SET_NONE ? -1 : 1;
	if (x->rule && y->rule && x->rule != y->rule)
		return x->rule < y->rule ? -1 : 1;
	return 0;
}

size_t sup_netpol_compile(const sup_netpol *p, sup_netpol_entry *out)
{
	size_t n = 0;
	for (size_t i = 0; i < p->n; i++) {
		const sup_netpol_rule *r = &p->rules[i];
		if (r->kind != SUP_NETPOL_NET4 && r->kind != SUP_NETPOL_NET6)
			continue;
		out[n++] = (sup_netpol_entry){
			.family = r->kind == SUP_NETPOL_NET4 ? 4 : 6,
			.prefix = r->prefix,
			.has_port = r->port != 0,
			.action = r->action,
			.set = SUP_NETPOL_SET_NONE,
			.rule = r,
		};
	}
	for (int f = 4; f <= 6; f += 2) {
		uint8_t full = f == 4 ? 32 : 128;
		out[n++] = (sup_netpol_entry){ .family = (uint8_t)f, .prefix = full, .has_port = true,
					       .action = SUP_NETPOL_DENY, .set = SUP_NETPOL_SET_DENY_PORT };
		out[n++] = (sup_netpol_entry){ .family = (uint8_t)f, .prefix = full, .has_port = true,
					       .action = SUP_NETPOL_ALLOW, .set = SUP_NETPOL_SET_ALLOW_PORT };
		out[n++] = (sup_netpol_entry){ .family = (uint8_t)f, .prefix = full, .has_port = false,
					       .action = SUP_NETPOL_ALLOW, .set = SUP_NETPOL_SET_ALLOW };
	}
	qsort(out, n, sizeof(*out), entry_cmp);
	return n;
}

static bool prefix_matches(const uint8_t *net, unsigned prefix, const uint8_t *addr)
{
	unsigned full = prefix / 8, rest = prefix % 8;
	if (memcmp(net, addr, full) != 0)
		return false;
	if (!rest)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (net[full] & mask) == (addr[full] & mask);
}

static bool in_ports(const uint16_t *ports, size_t n, uint16_t port)
{
	for (size_t i = 0; i < n; i++)
		if (ports[i] == port)
			return true;
	return false;
}

sup_netpol_action sup_netpol_decide(const sup_netpol *p, int family, const uint8_t *addr,
				    uint16_t port, const char *name)
{
	sup_netpol_name_verdict *v = NULL;
	char norm[SUP_NETPOL_NAME_MAX + 2];
	if (name && sup_netpol_norm_name(name, norm, sizeof(norm)) > 0 && (v = malloc(sizeof(*v)))) {
		sup_netpol_name(p, norm, v);
		if (!v->answer) {
			free(v);
			v = NULL;
		}
	}
	sup_netpol_entry *e = malloc((p->n + 2 * SUP_NETPOL_SETS_PER_FAMILY) * sizeof(*e));
	sup_netpol_action result = p->default_action;
	if (!e) {
		free(v);
		return SUP_NETPOL_DENY;
	}
	size_t n = sup_netpol_compile(p, e);
	for (size_t i = 0; i < n; i++) {
		if (e[i].family != family || (e[i].has_port && !port))
			continue;
		bool hit;
		switch (e[i].set) {
		case SUP_NETPOL_SET_NONE:
			hit = prefix_matches(e[i].rule->addr, e[i].prefix, addr) &&
			      (!e[i].rule->port || e[i].rule->port == port);
			break;
		case SUP_NETPOL_SET_ALLOW:
			hit = v && v->allow_all;
			break;
		case SUP_NETPOL_SET_ALLOW_PORT:
			hit = v && in_ports(v->allow, v->n_allow, port);
			break;
		case SUP_NETPOL_SET_DENY_PORT:
			hit = v && in_ports(v->deny, v->n_deny, port);
			break;
		default:
			hit = false;
		}
		if (hit) {
			result = e[i].action;
			break;
		}
	}
	free(e);
	free(v);
	return result;
}
