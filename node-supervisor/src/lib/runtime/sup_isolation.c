#include "sup_isolation.h"

#include <errno.h>
#include <string.h>

const char *const sup_isolation_names[SUP_ISO_N] = { "runc", "gvisor" };

int sup_isolation_parse(const char *s, size_t len, sup_isolation *out)
{
	for (int i = 0; i < SUP_ISO_N; i++) {
		if (strlen(sup_isolation_names[i]) == len && memcmp(s, sup_isolation_names[i], len) == 0) {
			*out = (sup_isolation)i;
			return 0;
		}
	}
	return -EINVAL;
}
