/* sup_overlay: see sup_overlay.h. */
#include "sup_overlay.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "sbx/cleanup.h"

int sup_overlay_check_path(const char *what, const char *path, sbx_err *err)
{
	size_t len = strlen(path);
	if (len == 0 || path[0] != '/')
		return sbx_err_set(err, -EINVAL, "%s '%s': not an absolute path", what, path);
	if (len >= PATH_MAX)
		return sbx_err_set(err, -ENAMETOOLONG, "%s: path too long", what);
	for (const char *p = path; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20 || c == 0x7f || c == ',' || c == ':' || c == '\\')
			return sbx_err_set(err, -EINVAL,
					   "%s '%s': contains a character overlayfs cannot take", what, path);
	}
	for (const char *p = path; *p;) {
		const char *seg = p + 1;
		const char *end = strchrnul(seg, '/');
		size_t n = (size_t)(end - seg);
		if ((n == 0 && *end) || (n == 1 && seg[0] == '.') ||
		    (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return sbx_err_set(err, -EINVAL,
					   "%s '%s': empty, '.' or '..' component", what, path);
		p = end;
	}
	return 0;
}

int sup_overlay_mount(const char *lower, const char *upper, const char *work,
		      const char *target, sbx_err *err)
{
	/* lower: one folder, or several (top first) joined by ':' */
	int r = 0;
	for (const char *l = lower; r == 0 && *l;) {
		const char *end = strchrnul(l, ':');
		char one[PATH_MAX];
		snprintf(one, sizeof(one), "%.*s", (int)(end - l), l);
		r = sup_overlay_check_path("lower", one, err);
		l = *end ? end + 1 : end;
	}
	if (r == 0 && !lower[0])
		r = sbx_err_set(err, -EINVAL, "lower: empty");
	if (r == 0)
		r = sup_overlay_check_path("upper", upper, err);
	if (r == 0)
		r = sup_overlay_check_path("work", work, err);
	if (r < 0)
		return sbx_err_wrap(err, "mount overlay on %s", target);

	char opts[3 * PATH_MAX + 64];
	int n = snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s,volatile",
			 lower, upper, work);
	/* the kernel takes at most a page of options */
	if (n < 0 || (size_t)n >= sizeof(opts) || n >= 4096)
		return sbx_err_set(err, -ENAMETOOLONG, "mount overlay on %s: paths too long", target);
	if (mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, opts) == 0)
		return 0;
	if (errno == EINVAL) {
		/* kernels before 5.10 have no "volatile" */
		opts[n - strlen(",volatile")] = '\0';
		if (mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, opts) == 0)
			return 0;
	}
	return sbx_err_sys(err, -errno, "mount overlay on %s (lower %s)", target, lower);
}

int sup_overlay_umount(const char *target, sbx_err *err)
{
	if (umount2(target, UMOUNT_NOFOLLOW) == 0)
		return 0;
	if (errno == EINVAL || errno == ENOENT)
		return 0;
	if (errno == EBUSY && umount2(target, UMOUNT_NOFOLLOW | MNT_DETACH) == 0)
		return 0;
	return sbx_err_sys(err, -errno, "unmount %s", target);
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r;) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)(((r[1] - '0') << 6) | ((r[2] - '0') << 3) | (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
}

static int by_length_desc(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);
	return la < lb ? 1 : la > lb ? -1 : 0;
}

static void free_list(char ***list)
{
	if (!*list)
		return;
	for (char **p = *list; *p; p++)
		free(*p);
	free(*list);
}

int sup_overlay_umount_under(const char *prefix, sbx_err *err)
{
	size_t plen = strlen(prefix);
	while (plen > 1 && prefix[plen - 1] == '/')
		plen--;
	SBX_AUTO_FCLOSE FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return sbx_err_sys(err, -errno, "open /proc/self/mountinfo");

	__attribute__((cleanup(free_list))) char **found = NULL;
	size_t count = 0, cap = 0;
	SBX_AUTO_FREE char *line = NULL;
	size_t lcap = 0;
	while (getline(&line, &lcap, f) > 0) {
		/* id parent major:minor root mount-point ... */
		char *save = NULL, *mp = NULL;
		char *tok = strtok_r(line, " ", &save);
		for (int i = 0; tok && i < 4; i++)
			tok = strtok_r(NULL, " ", &save);
		mp = tok;
		if (!mp)
			continue;
		unescape(mp);
		if (strncmp(mp, prefix, plen) != 0 || mp[plen] != '/' || mp[plen + 1] == '\0')
			continue;
		if (count + 1 >= cap) {
			size_t ncap = cap ? cap * 2 : 16;
			char **n = realloc(found, ncap * sizeof(*n));
			if (!n)
				return sbx_err_set(err, -ENOMEM, "list mounts below %s", prefix);
			found = n;
			cap = ncap;
		}
		found[count] = strdup(mp);
		if (!found[count])
			return sbx_err_set(err, -ENOMEM, "list mounts below %s", prefix);
		found[++count] = NULL;
	}
	if (count == 0)
		return 0;
	qsort(found, count, sizeof(*found), by_length_desc);
	int removed = 0;
	for (size_t i = 0; i < count; i++) {
		/* a path mounted on twice shows up twice: the second umount of it
		 * reports "not mounted", which sup_overlay_umount accepts */
		int r = sup_overlay_umount(found[i], err);
		if (r < 0)
			return r;
		removed++;
	}
	return removed;
}
