/* Volumes as requests name them: a volume's name and size, and where a
 * sandbox mounts it. Pure string and number rules, shared by the API's
 * parsing, the core's registry and the unit tests.
 *
 * It owns those rules and the plain types below; it must not touch the
 * file system or know the registry, HTTP or JSON. */
#ifndef SUP_VOLSPEC_H
#define SUP_VOLSPEC_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"

#define SUP_VOL_NAME_MAX 63              /* [a-z0-9][a-z0-9._-]* */
#define SUP_VOL_MAX_MOUNTS 16            /* volumes of one sandbox */
#define SUP_VOL_MOUNT_MAX 1024           /* bytes of a mount path */
#define SUP_VOL_MIN_SIZE (32ull << 20)   /* what ext4 needs around its files */
#define SUP_VOL_MAX_SIZE (1ull << 40)    /* a sparse image: only written blocks cost */

/* One volume of a create's "volumes". */
typedef struct sup_vol_mount {
	char name[SUP_VOL_NAME_MAX + 1];
	char path[SUP_VOL_MOUNT_MAX + 1]; /* normalised, absolute */
	bool read_only;
} sup_vol_mount;

typedef struct sup_vol_mounts {
	sup_vol_mount *v;
	size_t n;
} sup_vol_mounts;

void sup_vol_mounts_free(sup_vol_mounts *m);

/* 1..SUP_VOL_NAME_MAX of [a-z0-9._-], starting with a letter or digit: it
 * is a folder name under the state folder, so no '/', no "." or "..". */
bool sup_volspec_name_ok(const char *s, size_t len);

/* SUP_VOL_MIN_SIZE..SUP_VOL_MAX_SIZE bytes: 0, or -EINVAL saying so. */
int sup_volspec_size_ok(uint64_t size, sbx_err *err);

/* A mount path as given, p[0..len): absolute and already normalised (no
 * ".", "..", "//" or trailing '/': the path a client names is the path it
 * gets), not "/", not /proc, /sys, /dev or below them, not the agent's
 * folders (/run/sandbox, /.sbx), at most SUP_VOL_MOUNT_MAX bytes.
 * 0, or -EINVAL naming the path and the rule. */
int sup_volspec_mount_path_ok(const char *p, size_t len, sbx_err *err);

/* A sandbox's whole list: at most SUP_VOL_MAX_MOUNTS, no volume twice, no
 * path twice nor one below another (the order of mounts would then
 * decide what is seen). 0, or -EINVAL naming the pair. */
int sup_volspec_mounts_ok(const sup_vol_mounts *m, sbx_err *err);

#endif
