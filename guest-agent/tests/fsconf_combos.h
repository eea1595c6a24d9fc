/* The open and resolve flags agent_fsconf asks of a resolver: the walk is
 * compared with openat2 on each (test_fsconf's test_walk_matches_openat2,
 * guest-agent/fuzz/fuzz_fsconf_walk.c). */
#ifndef FSCONF_COMBOS_H
#define FSCONF_COMBOS_H

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>

static const struct {
	uint64_t flags, resolve;
} fsconf_combos[] = {
	{ O_PATH, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS },
	{ O_PATH | O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS },
	{ O_RDONLY, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS },
	{ O_RDONLY | O_DIRECTORY, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS },
	{ O_RDONLY | O_DIRECTORY | O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS },
	{ O_PATH, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS },
	{ O_PATH | O_NOFOLLOW, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV },
};

#endif
