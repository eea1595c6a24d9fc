#include "netif.h"

#include <errno.h>
#include <net/if.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "sbx/cleanup.h"

int agent_netif_loopback_up(sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;

	if (fd < 0)
		return sbx_err_sys(err, -errno, "loopback up: socket");
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
		return sbx_err_sys(err, -errno, "loopback up: get flags of lo");
	if (ifr.ifr_flags & IFF_UP)
		return 0;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
		return sbx_err_sys(err, -errno, "loopback up: set flags of lo");
	return 0;
}
