/* Name lookups of the static sandbox-agent (linked into it alone, not into
 * agent_core or the sanitized binary): they stand in for glibc's, which
 * the agent never calls but whose static members take in NSS, the DNS
 * resolver, nscd's client, dlopen and IDNA (144 KiB of the binary;
 * README.md, "Build"). libevent's evutil.o names them for
 * evutil_getaddrinfo, which the agent does not use: it resolves no name.
 * A static link takes an archive member only for a symbol still
 * undefined, so with these defined first glibc's never come. Each fails
 * as a lookup that finds nothing does. The link fails on any linker
 * warning (CMakeLists.txt), so a call that would bring NSS back (getpwnam,
 * gethostbyname, ...) is seen at once; an op that must resolve names
 * drops this file and pays for glibc's. */
#include <errno.h>
#include <netdb.h>
#include <stddef.h>

int getaddrinfo(const char *restrict node, const char *restrict service,
		const struct addrinfo *restrict hints, struct addrinfo **restrict res)
{
	*res = NULL;
	errno = ENOSYS;
	return EAI_SYSTEM;
}

void freeaddrinfo(struct addrinfo *res)
{
	/* getaddrinfo above never gives one */
}

const char *gai_strerror(int code)
{
	return "sandbox-agent resolves no names";
}

struct servent *getservbyname(const char *name, const char *proto)
{
	return NULL;
}

struct protoent *getprotobynumber(int proto)
{
	return NULL;
}
