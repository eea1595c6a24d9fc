/* sbx_dir_next (sbx/dir.h). */
#include "sbx/dir.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

int sbx_dir_next(DIR *d, struct dirent **de, bool *is_dir)
{
	for (;;) {
		errno = 0;
		struct dirent *e = readdir(d);
		*de = e;
		if (!e)
			return errno ? -errno : 0;
		const char *n = e->d_name;
		if (n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0')))
			continue;
		if (e->d_type != DT_UNKNOWN) {
			*is_dir = e->d_type == DT_DIR;
			return 1;
		}
		struct stat st;
		if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				return -errno;
			*is_dir = false;
			return 1;
		}
		*is_dir = S_ISDIR(st.st_mode);
		return 1;
	}
}
