/* Room for one more element at the end of a growing array, the one way
 * arrays grow in sbx (both sides): capacity doubles from a first size and
 * stops at a bound every caller names, so no array grows without one.
 * It owns no memory of its own and must not free: on failure the array
 * and *cap are unchanged and still the caller's. */
#ifndef SBX_GROW_H
#define SBX_GROW_H

#include <stddef.h>

/* arrp: the address of the array's pointer (T **, NULL for none yet);
 * n: elements in use; elem: sizeof(T); first: the first capacity; max:
 * the most elements allowed. 0 when element n may be written, -ENOSPC
 * when n has reached max, -ENOMEM (an overflow too). */
int sbx_grow(void *arrp, size_t *cap, size_t n, size_t elem, size_t first, size_t max);

#endif
