/* sbx_grow (sbx/grow.h). */
#include "sbx/grow.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int sbx_grow(void *arrp, size_t *cap, size_t n, size_t elem, size_t first, size_t max)
{
	void *v, *nv;
	size_t want;

	if (n >= max)
		return -ENOSPC;
	memcpy(&v, arrp, sizeof(v)); /* T ** through memcpy: no aliasing as void ** */
	if (v && n < *cap)
		return 0;
	want = v && *cap ? *cap * 2 : first;
	if (want <= n)
		want = n + 1;
	if (want > max)
		want = max;
	if (elem == 0 || want > SIZE_MAX / elem)
		return -ENOMEM;
	nv = realloc(v, want * elem);
	if (!nv)
		return -ENOMEM;
	memcpy(arrp, &nv, sizeof(nv));
	*cap = want;
	return 0;
}
