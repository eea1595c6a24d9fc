/* Scope-bound cleanup helpers (__attribute__((cleanup))), the one cleanup
 * style used across sbx. Each helper is safe on a NULL / -1 value, so a
 * variable can be declared at the top of a function and released on every
 * path. To hand ownership out of scope, use sbx_steal_ptr / sbx_steal_fd. */
#ifndef SBX_CLEANUP_H
#define SBX_CLEANUP_H

#include <stdlib.h>
#include <stdio.h>
#include <unistd.h>
#include <errno.h>
#include <dirent.h>

static inline void sbx_cleanup_free(void *p) { free(*(void **)p); }
static inline void sbx_cleanup_close(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}
static inline void sbx_cleanup_fclose(FILE **f)
{
	if (*f)
		fclose(*f);
}
static inline void sbx_cleanup_closedir(DIR **d)
{
	if (*d)
		closedir(*d);
}

#define SBX_AUTO_FREE __attribute__((cleanup(sbx_cleanup_free)))
#define SBX_AUTO_CLOSE __attribute__((cleanup(sbx_cleanup_close)))
#define SBX_AUTO_FCLOSE __attribute__((cleanup(sbx_cleanup_fclose)))
#define SBX_AUTO_CLOSEDIR __attribute__((cleanup(sbx_cleanup_closedir)))

static inline void *sbx_steal_ptr_impl(void **p)
{
	void *v = *p;
	*p = NULL;
	return v;
}
#define sbx_steal_ptr(pp) sbx_steal_ptr_impl((void **)(pp))

static inline int sbx_steal_fd(int *fd)
{
	int v = *fd;
	*fd = -1;
	return v;
}

#endif
