/* sup_rtnl: see sup_rtnl.h. */
#include "sup_rtnl.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

struct sup_rtnl {
	struct mnl_socket *sock;
	unsigned portid;
	unsigned seq;
};

sup_rtnl *sup_rtnl_open(sbx_err *err)
{
	sup_rtnl *nl = calloc(1, sizeof(*nl));
	if (!nl) {
		sbx_err_set(err, -ENOMEM, "rtnetlink");
		return NULL;
	}
	nl->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (!nl->sock || mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
		sbx_err_sys(err, -errno, "rtnetlink socket");
		sup_rtnl_close(nl);
		return NULL;
	}
	nl->portid = mnl_socket_get_portid(nl->sock);
	nl->seq = (unsigned)time(NULL);
	return nl;
}

void sup_rtnl_close(sup_rtnl *nl)
{
	if (!nl)
		return;
	if (nl->sock)
		mnl_socket_close(nl->sock);
	free(nl);
}

typedef struct reply {
	int ifindex; /* RTM_NEWLINK answers: the link's index */
} reply;

static int on_msg(const struct nlmsghdr *nlh, void *data)
{
	reply *r = data;
	if (nlh->nlmsg_type == RTM_NEWLINK &&
	    mnl_nlmsg_get_payload_len(nlh) >= sizeof(struct ifinfomsg)) {
		const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
		r->ifindex = ifi->ifi_index;
	}
	return MNL_CB_OK;
}

/* Send one request and read until its ack (or its answer, for a GET). */
static int transact(sup_rtnl *nl, struct nlmsghdr *nlh, reply *r, const char *what, sbx_err *err)
{
	nlh->nlmsg_seq = ++nl->seq;
	nlh->nlmsg_pid = 0;
	if (mnl_socket_sendto(nl->sock, nlh, nlh->nlmsg_len) < 0)
		return sbx_err_sys(err, -errno, "%s: send", what);
	char buf[MNL_SOCKET_BUFFER_SIZE];
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl->sock, buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return sbx_err_sys(err, -errno, "%s: receive", what);
		}
		int rc = mnl_cb_run(buf, (size_t)n, nl->seq, nl->portid, on_msg, r);
		if (rc == MNL_CB_STOP)
			return 0;
		if (rc < 0)
			return sbx_err_sys(err, -errno, "%s", what);
	}
}

static struct nlmsghdr *put_link(char *buf, uint16_t type, uint16_t flags, int ifindex)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = ifindex;
	return nlh;
}

int sup_rtnl_veth(sup_rtnl *nl, const char *name, const char *peer, int peer_ns_fd, sbx_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = put_link(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	struct nlattr *p = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	/* the peer's attributes follow an ifinfomsg of its own */
	struct ifinfomsg *pifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*pifi));
	pifi->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
	if (peer_ns_fd >= 0)
		mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)peer_ns_fd);
	mnl_attr_nest_end(nlh, p);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, info);
	reply r = {0};
	int rc = transact(nl, nlh, &r, "create veth", err);
	if (rc < 0)
		return sbx_err_wrap(err, "%s / %s", name, peer);
	return 0;
}

int sup_rtnl_ifindex(sup_rtnl *nl, const char *name, sbx_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = put_link(buf, RTM_GETLINK, 0, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	reply r = {0};
	int rc = transact(nl, nlh, &r, "link", err);
	if (rc < 0)
		return rc == -ENODEV ? rc : sbx_err_wrap(err, "%s", name);
	if (r.ifindex <= 0)
		return sbx_err_set(err, -ENODEV, "link %s: no index in the answer", name);
	return r.ifindex;
}

int sup_rtnl_link_up(sup_rtnl *nl, int ifindex, sbx_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = put_link(buf, RTM_NEWLINK, 0, ifindex);
	struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	ifi->ifi_flags = IFF_UP;
	ifi->ifi_change = IFF_UP;
	reply r = {0};
	return transact(nl, nlh, &r, "link up", err);
}

int sup_rtnl_link_nolinklocal(sup_rtnl *nl, int ifindex, sbx_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = put_link(buf, RTM_NEWLINK, 0, ifindex);
	struct nlattr *spec = mnl_attr_nest_start(nlh, IFLA_AF_SPEC);
	struct nlattr *in6 = mnl_attr_nest_start(nlh, AF_INET6);
	mnl_attr_put_u8(nlh, IFLA_INET6_ADDR_GEN_MODE, IN6_ADDR_GEN_MODE_NONE);
	mnl_attr_nest_end(nlh, in6);
	mnl_attr_nest_end(nlh, spec);
	reply r = {0};
	return transact(nl, nlh, &r, "link addr_gen_mode", err);
}

int sup_rtnl_link_del(sup_rtnl *nl, const char *name, sbx_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = put_link(buf, RTM_DELLINK, 0, 0);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	reply r = {0};
	sbx_err e;
	int rc = transact(nl, nlh, &r, "delete link", &e);
	if (rc == -ENODEV)
		return 0;
	if (rc < 0) {
		*err = e;
		return sbx_err_wrap(err, "%s", name);
	}
	return 0;
}

int sup_rtnl_addr_add(sup_rtnl *nl, int ifindex, int family, const uint8_t *addr, unsigned prefix,
		      sbx_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWADDR;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = family == 4 ? AF_INET : AF_INET6;
	ifa->ifa_prefixlen = (uint8_t)prefix;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned)ifindex;
	size_t len = family == 4 ? 4 : 16;
	if (family == 4)
		mnl_attr_put(nlh, IFA_LOCAL, len, addr);
	else
		mnl_attr_put_u32(nlh, IFA_FLAGS, IFA_F_NODAD);
	mnl_attr_put(nlh, IFA_ADDRESS, len, addr);
	reply r = {0};
	return transact(nl, nlh, &r, "add address", err);
}

int sup_rtnl_route_add(sup_rtnl *nl, int ifindex, int family, const uint8_t *dst, unsigned prefix,
		       const uint8_t *gw, bool onlink, sbx_err *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = RTM_NEWROUTE;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = family == 4 ? AF_INET : AF_INET6;
	rtm->rtm_dst_len = (uint8_t)prefix;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_scope = gw ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK;
	rtm->rtm_type = RTN_UNICAST;
	rtm->rtm_flags = onlink ? RTNH_F_ONLINK : 0;
	size_t len = family == 4 ? 4 : 16;
	if (prefix > 0)
		mnl_attr_put(nlh, RTA_DST, len, dst);
	if (gw)
		mnl_attr_put(nlh, RTA_GATEWAY, len, gw);
	mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)ifindex);
	reply r = {0};
	return transact(nl, nlh, &r, "add route", err);
}
