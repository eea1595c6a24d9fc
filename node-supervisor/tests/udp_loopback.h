/* A UDP socket bound to a free port of 127.0.0.1, non-blocking: the
 * resolver's test and its fuzz target play sandbox and upstream with it. */
#ifndef UDP_LOOPBACK_H
#define UDP_LOOPBACK_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The fd with its address in *sa, or -1. */
static inline int udp_loopback(struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	socklen_t l = sizeof(*sa);
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && (bind(fd, (struct sockaddr *)sa, sizeof(*sa)) < 0 ||
			getsockname(fd, (struct sockaddr *)sa, &l) < 0)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

#endif
