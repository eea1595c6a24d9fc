#include "sup_volspec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sup_path.h"

void sup_vol_mounts_free(sup_vol_mounts *m)
{
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

bool sup_volspec_name_ok(const char *s, size_t len)
{
	if (len == 0 || len > SUP_VOL_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
		if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
			return false;
	}
	return true;
}

int sup_volspec_size_ok(uint64_t size, sbx_err *err)
{
	if (size < SUP_VOL_MIN_SIZE || size > SUP_VOL_MAX_SIZE)
		return sbx_err_set(err, -EINVAL, "field \"size\": want %lluM..%lluG",
				   (unsigned long long)(SUP_VOL_MIN_SIZE >> 20),
				   (unsigned long long)(SUP_VOL_MAX_SIZE >> 30));
	return 0;
}

/* Where no volume may go: the kernel's file systems and the agent's own. */
static const char *const reserved[] = { "/proc", "/sys", "/dev", "/run/sandbox", "/.sbx" };

int sup_volspec_mount_path_ok(const char *p, size_t len, sbx_err *err)
{
	char q[SUP_PATH_QUOTE_MAX];
	char norm[PATH_MAX];
	if (len > SUP_VOL_MOUNT_MAX)
		return sbx_err_set(err, -EINVAL, "mount path %s: longer than %d bytes",
				   sup_path_quote(p, len, q, sizeof(q)), SUP_VOL_MOUNT_MAX);
	int n = sup_path_normalize(p, len, norm, sizeof(norm), NULL, err);
	if (n < 0)
		return sbx_err_set(err, -EINVAL, "mount path: %.300s", err->msg);
	if ((size_t)n != len || memcmp(norm, p, len) != 0)
		return sbx_err_set(err, -EINVAL, "mount path %s: not normalised (say %s)",
				   sup_path_quote(p, len, q, sizeof(q)), norm);
	if (len == 1)
		return sbx_err_set(err, -EINVAL, "mount path \"/\": a volume cannot be the root");
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
		if (sup_path_is_under(p, len, reserved[i], strlen(reserved[i])))
			return sbx_err_set(err, -EINVAL, "mount path %s: %s and below are not for volumes",
					   sup_path_quote(p, len, q, sizeof(q)), reserved[i]);
	return 0;
}

int sup_volspec_mounts_ok(const sup_vol_mounts *m, sbx_err *err)
{
	if (m->n > SUP_VOL_MAX_MOUNTS)
		return sbx_err_set(err, -EINVAL, "field \"volumes\": more than %d", SUP_VOL_MAX_MOUNTS);
	for (size_t i = 0; i < m->n; i++)
		for (size_t j = 0; j < m->n; j++) {
			const sup_vol_mount *a = &m->v[i], *b = &m->v[j];
			if (i == j)
				continue;
			if (i < j && strcmp(a->name, b->name) == 0)
				return sbx_err_set(err, -EINVAL, "field \"volumes\": volume %s named twice",
						   a->name);
			if (sup_path_is_under(b->path, strlen(b->path), a->path, strlen(a->path)))
				return sbx_err_set(err, -EINVAL,
						   "field \"volumes\": mount path %.300s is %s %.300s",
						   b->path, strcmp(a->path, b->path) == 0 ? "named twice:" : "below",
						   a->path);
		}
	return 0;
}
