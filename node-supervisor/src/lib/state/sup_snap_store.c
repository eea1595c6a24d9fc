/* sup_snap_store: see sup_snap_store.h. */
#include "sup_snap_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_fsutil.h"
#include "sup_snap_store_s3.h"

#define ID_PREFIX "sn-"
#define ID_HEX 12
#define SUFFIX ".tar.zst"

int sup_snap_store_check_id(const char *id, sbx_err *err)
{
	size_t n = strlen(id);
	bool ok = n == strlen(ID_PREFIX) + ID_HEX && strncmp(id, ID_PREFIX, strlen(ID_PREFIX)) == 0;
	for (size_t i = strlen(ID_PREFIX); ok && i < n; i++)
		ok = (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f');
	if (!ok)
		return sbx_err_set(err, -EINVAL, "'%.64s' is not a snapshot id (sn- and %d hex digits)",
				   id, ID_HEX);
	return 0;
}

bool sup_snap_store_name_id(const char *name, const char *dir, bool manifest, char id[48])
{
	size_t dn = strlen(dir);
	if (strncmp(name, dir, dn) != 0)
		return false;
	const char *p = name + dn;
	size_t n = strcspn(p, ".");
	if (n == 0 || n >= 48)
		return false;
	memcpy(id, p, n);
	id[n] = '\0';
	sbx_err ignored;
	if (sup_snap_store_check_id(id, &ignored) < 0)
		return false;
	const char *rest = p + n;
	if (manifest)
		return strcmp(rest, ".json") == 0;
	/* ".v<k>.tar.zst": a volume's, k of one or two digits */
	if (strncmp(rest, ".v", 2) == 0) {
		size_t d = strspn(rest + 2, "0123456789");
		return d && d <= 2 && strcmp(rest + 2 + d, SUFFIX) == 0;
	}
	return strcmp(rest, SUFFIX) == 0;
}

/* <dir>/<id>.tar.zst, or (k >= 0) the k-th volume's <dir>/<id>.v<k>.tar.zst */
static int file_of(const char *dir, const char *id, int k, char *out, sbx_err *err)
{
	int r = sup_snap_store_check_id(id, err);
	if (r < 0)
		return r;
	if (k >= SUP_VOL_MAX_MOUNTS)
		return sbx_err_set(err, -EINVAL, "snapshot %s: volume %d of at most %d", id, k,
				   SUP_VOL_MAX_MOUNTS);
	int n = k < 0 ? snprintf(out, PATH_MAX, "%s/%s" SUFFIX, dir, id)
		      : snprintf(out, PATH_MAX, "%s/%s.v%d" SUFFIX, dir, id, k);
	if (n >= PATH_MAX)
		return sbx_err_set(err, -ENAMETOOLONG, "snapshot store: path too long");
	return 0;
}

static int path_of(const char *dir, const char *id, char *out, sbx_err *err)
{
	return file_of(dir, id, -1, out, err);
}

int sup_snap_store_vol_stage(const sup_snap_store *s, const char *id, unsigned k, char *out,
			     sbx_err *err)
{
	return file_of(s->stage, id, (int)k, out, err);
}

int sup_snap_store_vol_path(const sup_snap_store *s, const char *id, unsigned k, char *out,
			    sbx_err *err)
{
	return file_of(s->dir, id, (int)k, out, err);
}

/* The staged archives of row's volumes: removed. */
static void unstage_vols(const sup_snap_store *s, const sup_catalog_snap *row)
{
	char p[PATH_MAX];
	sbx_err ignored;
	for (unsigned k = 0; k < row->nvols; k++)
		if (sup_snap_store_vol_stage(s, row->id, k, p, &ignored) == 0)
			unlink(p);
}

/* Synced, renamed from staged to dest; its size. */
static int keep_file(const char *staged, const char *dest, const char *id, uint64_t *size,
		     sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = open(staged, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st = {0};
	if (fd < 0 || fsync(fd) < 0 || fstat(fd, &st) < 0)
		return sbx_err_sys(err, -errno, "snapshot %s: sync", id);
	if (rename(staged, dest) < 0)
		return sbx_err_sys(err, -errno, "snapshot %s: into the store", id);
	*size = (uint64_t)st.st_size;
	return 0;
}

int sup_snap_store_open(const char *state_dir, const char *s3_url, const char *s3_endpoint,
			sup_snap_store *s, sbx_err *err)
{
	memset(s, 0, sizeof(*s));
	if (snprintf(s->dir, sizeof(s->dir), "%s/snapshots", state_dir) >= (int)sizeof(s->dir) ||
	    snprintf(s->stage, sizeof(s->stage), "%s/snapshots/tmp", state_dir) >= (int)sizeof(s->stage) ||
	    snprintf(s->layers, sizeof(s->layers), "%s/layers", state_dir) >= (int)sizeof(s->layers))
		return sbx_err_set(err, -ENAMETOOLONG, "snapshot store: state folder path too long");
	sbx_err ignored;
	/* staged archives of a run that died are halves */
	sup_fs_rm_tree(s->stage, &ignored);
	int r = sup_fs_mkdir(AT_FDCWD, s->dir, 0700, 0, 0, 1, err);
	r = r ?: sup_fs_mkdir(AT_FDCWD, s->stage, 0700, 0, 0, 1, err);
	r = r ?: sup_fs_mkdir(AT_FDCWD, s->layers, 0700, 0, 0, 1, err);
	if (r == 0 && s3_url)
		r = sup_snap_s3_open(s, s3_url, s3_endpoint, err);
	return r < 0 ? sbx_err_wrap(err, "snapshot store") : 0;
}

void sup_snap_store_close(sup_snap_store *s)
{
	sup_snap_s3_close(s);
}

bool sup_snap_store_remote(const sup_snap_store *s)
{
	return s->remote != NULL;
}

int sup_snap_store_stage(const sup_snap_store *s, const char *id, char *out, sbx_err *err)
{
	return path_of(s->stage, id, out, err);
}

int sup_snap_store_commit(const sup_snap_store *s, sup_catalog_snap *row, const char *staged,
			  sbx_err *err)
{
	if (s->remote)
		return sup_snap_s3_commit(s, row, staged, err);
	char dest[PATH_MAX], from[PATH_MAX];
	const char *id = row->id;
	/* the volumes' first: the layer's archive in place is the snapshot */
	int r = 0;
	unsigned k = 0;
	for (; r == 0 && k < row->nvols; k++) {
		r = sup_snap_store_vol_stage(s, id, k, from, err);
		r = r ?: sup_snap_store_vol_path(s, id, k, dest, err);
		r = r ?: keep_file(from, dest, id, &row->vols[k].size, err);
	}
	r = r ?: path_of(s->dir, id, dest, err);
	r = r ?: keep_file(staged, dest, id, &row->size, err);
	if (r < 0) {
		unlink(staged);
		unstage_vols(s, row);
		for (unsigned i = 0; i < k; i++)
			if (sup_snap_store_vol_path(s, id, i, dest, err) == 0)
				unlink(dest);
		return r;
	}
	row->location[0] = '\0';
	return 0;
}

int sup_snap_store_fetch(const sup_snap_store *s, const sup_catalog_snap *row, char *out,
			 bool *temp, sbx_err *err)
{
	*temp = false;
	if (row->location[0])
		return sup_snap_s3_fetch(s, row, out, temp, err);
	int r = path_of(s->dir, row->id, out, err);
	if (r < 0)
		return r;
	if (access(out, R_OK) < 0)
		return sbx_err_sys(err, -errno, "snapshot %s: its archive", row->id);
	return 0;
}

int sup_snap_store_remove(const sup_snap_store *s, const sup_catalog_snap *row, sbx_err *err)
{
	if (row->location[0])
		return sup_snap_s3_remove(s, row, err);
	char path[PATH_MAX];
	int r = path_of(s->dir, row->id, path, err);
	if (r == 0 && unlink(path) < 0 && errno != ENOENT)
		r = sbx_err_sys(err, -errno, "snapshot %s: remove its archive", row->id);
	for (unsigned k = 0; r == 0 && k < row->nvols; k++) {
		r = sup_snap_store_vol_path(s, row->id, k, path, err);
		if (r == 0 && unlink(path) < 0 && errno != ENOENT)
			r = sbx_err_sys(err, -errno, "snapshot %s: remove its volume's archive", row->id);
	}
	return r;
}

static int known_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

int sup_snap_store_sweep_local(const sup_snap_store *s, const char (*known)[48], size_t nknown,
			       unsigned *removed, sbx_err *err)
{
	*removed = 0;
	SBX_AUTO_CLOSEDIR DIR *d = opendir(s->dir);
	if (!d)
		return sbx_err_sys(err, -errno, "snapshot store %s", s->dir);
	int dfd = dirfd(d);
	int r = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		char id[48];
		/* tmp/ and names that are not archives: not this sweep's */
		if (!sup_snap_store_name_id(de->d_name, "", false, id))
			continue;
		if (nknown && bsearch(id, known, nknown, sizeof(*known), known_cmp))
			continue;
		struct stat st;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (unlinkat(dfd, de->d_name, 0) < 0 && errno != ENOENT) {
			r = sbx_err_sys(err, -errno, "snapshot store: remove %s", de->d_name);
			break;
		}
		(*removed)++;
	}
	return r;
}
