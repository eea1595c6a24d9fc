#include "bench_results.h"

#include <stdio.h>
#include <stdlib.h>

void bench_result(const char *key, const char *what, const char *role, json_t *figures)
{
	const char *path = getenv("SBX_BENCH_RESULTS");
	if (!figures)
		return;
	if (!path || !*path) {
		json_decref(figures);
		return;
	}
	json_object_set_new(figures, "key", json_string(key));
	json_object_set_new(figures, "what", json_string(what));
	json_object_set_new(figures, "role", json_string(role));
	FILE *f = fopen(path, "a");
	if (!f) {
		perror(path);
		json_decref(figures);
		return;
	}
	/* one line each: the report reads them line by line */
	if (json_dumpf(figures, f, JSON_COMPACT | JSON_SORT_KEYS) != 0 || fputc('\n', f) == EOF)
		fprintf(stderr, "%s: a result row was not written\n", path);
	if (fclose(f) != 0)
		perror(path);
	json_decref(figures);
}
