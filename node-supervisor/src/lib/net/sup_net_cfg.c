/* The egress settings read and checked: the uplink's form (a network
 * namespace or an interface), the resolver the sandboxes' DNS asks (--dns,
 * or the uplink's resolv.conf), the refused ranges (--deny-cidrs) and the
 * node's own addresses as set elements. Reads files and interfaces only;
 * makes no plumbing. */
#include "sup_net.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_net_int.h"
#include "sup_netns.h"

/* ---- settings ---- */

bool sup_net_is_netns_spec(const char *u)
{
	return strncmp(u, "netns:", 6) == 0 || u[0] == '/';
}

static int parse_host_port(const char *s, struct sockaddr_storage *ss, socklen_t *len, sbx_err *err)
{
	char host[INET6_ADDRSTRLEN + 1];
	unsigned port = 53;
	const char *h = s, *p = NULL;
	size_t hl;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || (close[1] && close[1] != ':'))
			return sbx_err_set(err, -EINVAL, "resolver '%s': want ADDR, ADDR:PORT or [V6]:PORT", s);
		h = s + 1;
		hl = (size_t)(close - h);
		p = close[1] ? close + 2 : NULL;
	} else {
		const char *c = strchr(s, ':');
		bool v6 = c && strchr(c + 1, ':');
		hl = v6 || !c ? strlen(s) : (size_t)(c - s);
		p = v6 || !c ? NULL : c + 1;
	}
	if (hl == 0 || hl >= sizeof(host))
		return sbx_err_set(err, -EINVAL, "resolver '%s': bad address", s);
	memcpy(host, h, hl);
	host[hl] = '\0';
	if (p) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);
		if (!*p || *end || v == 0 || v > 65535)
			return sbx_err_set(err, -EINVAL, "resolver '%s': bad port", s);
		port = (unsigned)v;
	}
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		*len = sizeof(*s4);
		if ((ntohl(s4->sin_addr.s_addr) >> 24) == 127)
			goto loopback;
	} else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*s6);
		if (IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr))
			goto loopback;
	} else {
		return sbx_err_set(err, -EINVAL, "resolver '%s': not an IP address", s);
	}
	return 0;
loopback:
	return sbx_err_set(err, -EINVAL,
			   "resolver %s is a loopback address, which the sandboxes' router cannot "
			   "reach through the uplink: give --uplink-dns ADDR",
			   host);
}

/* The first nameserver of a resolv.conf. */
static int resolv_conf(const char *path, char *out, size_t cap, sbx_err *err)
{
	out[0] = '\0';
	SBX_AUTO_FCLOSE FILE *f = fopen(path, "re");
	if (!f)
		return sbx_err_sys(err, -errno, "%s", path);
	char line[512];
	while (fgets(line, sizeof(line), f)) {
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncmp(p, "nameserver", 10) != 0 || (p[10] != ' ' && p[10] != '\t'))
			continue;
		p += 10;
		while (*p == ' ' || *p == '\t')
			p++;
		size_t l = strcspn(p, " \t\r\n#;%");
		if (l == 0 || l >= cap)
			continue;
		memcpy(out, p, l);
		out[l] = '\0';
		return 0;
	}
	return sbx_err_set(err, -ENOENT, "%s names no nameserver: give --uplink-dns", path);
}

int sup_net_upstream_of(const sup_net_cfg *cfg, struct sockaddr_storage *ss, socklen_t *len,
		       sbx_err *err)
{
	if (cfg->dns)
		return parse_host_port(cfg->dns, ss, len, err);
	char path[PATH_MAX] = "/etc/resolv.conf", ns[INET6_ADDRSTRLEN + 1];
	if (strncmp(cfg->uplink, "netns:", 6) == 0) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "/etc/netns/%s/resolv.conf", cfg->uplink + 6);
		if (access(p, R_OK) == 0)
			snprintf(path, sizeof(path), "%s", p);
	}
	int rc = resolv_conf(path, ns, sizeof(ns), err);
	if (rc == 0)
		rc = parse_host_port(ns, ss, len, err);
	return rc < 0 ? sbx_err_wrap(err, "the uplink's resolver (from %s)", path) : 0;
}

/* Append the --deny-cidrs of one family to a refused set's text. */
int sup_net_add_deny_cidrs(const char *list, int family, char *out, size_t cap, sbx_err *err)
{
	if (!list || !*list)
		return 0;
	SBX_AUTO_FREE char *copy = strdup(list);
	if (!copy)
		return sbx_err_set(err, -ENOMEM, "--deny-cidrs");
	char *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		while (*t == ' ')
			t++;
		sup_netpol_rule r;
		int rc = sup_netpol_parse_target(t, &r, err);
		if (rc == 0 && (r.port || (r.kind != SUP_NETPOL_NET4 && r.kind != SUP_NETPOL_NET6))) {
			sup_netpol_rule_free(&r);
			rc = sbx_err_set(err, -EINVAL, "'%s': want an address or network, no port", t);
		}
		if (rc < 0)
			return sbx_err_wrap(err, "--deny-cidrs");
		if ((r.kind == SUP_NETPOL_NET4) != (family == 4))
			continue;
		char c[SUP_NETPOL_TARGET_MAX + 8];
		sup_netpol_format_target(&r, c, sizeof(c));
		size_t l = strlen(out);
		if (snprintf(out + l, cap - l, ", %s", c) >= (int)(cap - l))
			return sbx_err_set(err, -E2BIG, "--deny-cidrs: too many");
	}
	return 0;
}

int sup_net_check_cfg(const sup_net_cfg *cfg, sbx_err *err)
{
	const char *u = cfg->uplink;
	if (!u || !*u)
		return sbx_err_set(err, -EINVAL, "--uplink: empty");
	if (strncmp(u, "netns:", 6) == 0) {
		if (!u[6] || strchr(u + 6, '/'))
			return sbx_err_set(err, -EINVAL, "--uplink %s: want netns:NAME (under " SUP_NETNS_DIR ")", u);
	} else if (u[0] != '/') {
		if (strlen(u) >= IFNAMSIZ || strchr(u, '/') || strchr(u, ':'))
			return sbx_err_set(err, -EINVAL,
					   "--uplink %s: want an interface name, netns:NAME or the path of a "
					   "network namespace", u);
	}
	char a[REFUSED_MAX] = "";
	int rc = sup_net_add_deny_cidrs(cfg->deny_cidrs, 4, a, sizeof(a), err);
	rc = rc ?: sup_net_add_deny_cidrs(cfg->deny_cidrs, 6, a, sizeof(a), err);
	if (rc == 0 && cfg->dns) {
		struct sockaddr_storage ss;
		socklen_t len;
		rc = parse_host_port(cfg->dns, &ss, &len, err);
		if (rc < 0)
			sbx_err_wrap(err, "--uplink-dns");
	}
	return rc;
}

/* The node's own addresses (the API's among them), as set elements. */
int sup_net_node_addresses(int family, char *out, size_t cap, sbx_err *err)
{
	struct ifaddrs *ifa;
	if (getifaddrs(&ifa) < 0)
		return sbx_err_sys(err, -errno, "the node's addresses");
	for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != (family == 4 ? AF_INET : AF_INET6))
			continue;
		char a[INET6_ADDRSTRLEN];
		const void *src = family == 4 ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
					      : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
		inet_ntop(family == 4 ? AF_INET : AF_INET6, src, a, sizeof(a));
		size_t l = strlen(out);
		if (snprintf(out + l, cap - l, ", %s", a) >= (int)(cap - l)) {
			freeifaddrs(ifa);
			return sbx_err_set(err, -E2BIG, "the node has too many addresses");
		}
	}
	freeifaddrs(ifa);
	return 0;
}
