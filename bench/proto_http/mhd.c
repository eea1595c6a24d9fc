/* The libmicrohttpd side of BENCHMARKS.md's prototype comparison (issue
 * 10), not part of the build: libmicrohttpd answering GET
 * /v1/sandboxes/{id} with the JSON the edge answers, one thread on epoll.
 *   apt-get install libmicrohttpd-dev
 *   gcc -O2 -o mhd mhd.c $(pkg-config --cflags --libs libmicrohttpd)
 *   ./mhd 18081 & wrk -t2 -c64 -d6s --latency -H 'Authorization: Bearer x' \
 *     http://127.0.0.1:18081/v1/sandboxes/sb-0123456789ab */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char body[] = "{\"id\":\"sb-0123456789ab\",\"state\":\"running\",\"image\":\"host\","
			   "\"created_at\":\"2026-12-01T13:00:00Z\",\"expires_at\":\"2026-12-01T14:00:00Z\"}\n";

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload, size_t *upload_size, void **ptr)
{
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	struct MHD_Response *r = MHD_create_response_from_buffer(sizeof(body) - 1, (void *)body,
								 MHD_RESPMEM_PERSISTENT);
	MHD_add_response_header(r, "Content-Type", "application/json");
	enum MHD_Result ret = MHD_queue_response(c, auth ? 200 : 401, r);
	MHD_destroy_response(r);
	return ret;
}

int main(int argc, char **argv)
{
	struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL,
						(uint16_t)atoi(argv[1]), NULL, NULL, handler, NULL,
						MHD_OPTION_CONNECTION_LIMIT, 20000u, MHD_OPTION_END);
	if (!d)
		return 1;
	pause();
	return 0;
}
