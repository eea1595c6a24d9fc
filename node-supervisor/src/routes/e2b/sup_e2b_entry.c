/* EntryInfo from sbx's stat view (sup_e2b_entry.h). The letters of the
 * permissions string are Go's os.FileMode bits in their order
 * ("dalTLDpSugct?"), set as Go's stat sets them from st_mode: a folder d,
 * a symlink L, a device D (a character device also c), a FIFO p, a socket
 * S, setuid u, setgid g, sticky t; sbx's "other" type is Go's irregular ?. */
#include "sup_e2b_entry.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_text.h"

static bool is(const sup_api_stat *st, const char *type)
{
	return st && st->type && strcmp(st->type, type) == 0;
}

const char *sup_e2b_entry_type(const sup_api_stat *st, const sup_api_stat *target)
{
	if (is(st, "symlink"))
		st = target;
	if (is(st, "file"))
		return "FILE_TYPE_FILE";
	if (is(st, "dir"))
		return "FILE_TYPE_DIRECTORY";
	return "FILE_TYPE_UNSPECIFIED";
}

void sup_e2b_entry_perms(const sup_api_stat *st, char *buf, size_t size)
{
	/* Go's bits from the highest: d a l T L D p S u g c t ? */
	bool bits[13] = { 0 };
	static const char letters[] = "dalTLDpSugct?";
	bits[0] = is(st, "dir");
	bits[4] = is(st, "symlink");
	bits[5] = is(st, "block") || is(st, "char");
	bits[6] = is(st, "fifo");
	bits[7] = is(st, "socket");
	bits[8] = (st->mode & 04000) != 0;
	bits[9] = (st->mode & 02000) != 0;
	bits[10] = is(st, "char");
	bits[11] = (st->mode & 01000) != 0;
	bits[12] = is(st, "other");
	char out[32];
	size_t w = 0;
	for (size_t i = 0; i < 13; i++)
		if (bits[i])
			out[w++] = letters[i];
	if (w == 0)
		out[w++] = '-';
	static const char rwx[] = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		out[w++] = st->mode & (1u << (8 - i)) ? rwx[i] : '-';
	out[w] = '\0';
	snprintf(buf, size, "%s", out);
}

const char *sup_e2b_entry_owner(uint64_t id, char *buf, size_t size)
{
	if (id == 0)
		return "root";
	if (id == 1000)
		return "user";
	snprintf(buf, size, "%" PRIu64, id);
	return buf;
}

void sup_e2b_entry_time(uint64_t ns, char *buf, size_t size)
{
	char s[40];
	uint64_t frac = ns % 1000000000ull;
	sup_rfc3339((time_t)(ns / 1000000000ull), s, sizeof(s));
	size_t n = strlen(s);
	if (n && s[n - 1] == 'Z')
		s[--n] = '\0';
	if (frac == 0)
		snprintf(buf, size, "%sZ", s);
	else if (frac % 1000000 == 0)
		snprintf(buf, size, "%s.%03" PRIu64 "Z", s, frac / 1000000);
	else if (frac % 1000 == 0)
		snprintf(buf, size, "%s.%06" PRIu64 "Z", s, frac / 1000);
	else
		snprintf(buf, size, "%s.%09" PRIu64 "Z", s, frac);
}

/* p[0..n) at key as JSON text, U+FFFD where it is not UTF-8. */
static int set_text(json_t *o, const char *key, const char *p, size_t n)
{
	if (sup_utf8_valid((const uint8_t *)p, n))
		return json_object_set_new_nocheck(o, key, json_stringn_nocheck(p, n));
	size_t tl;
	char *t = sup_utf8_repair((const uint8_t *)p, n, &tl);
	int rc = t ? json_object_set_new_nocheck(o, key, json_stringn_nocheck(t, tl)) : -1;
	free(t);
	return rc;
}

json_t *sup_e2b_entry_json(const char *path, const sup_api_stat *st, const sup_api_stat *target,
			   sbx_err *err)
{
	/* the name: the last component, as Go's filepath.Base */
	size_t pl = strlen(path);
	while (pl > 1 && path[pl - 1] == '/')
		pl--;
	const char *name = path + pl;
	while (name > path && name[-1] != '/')
		name--;
	size_t nl = (size_t)(path + pl - name);
	if (nl == 0) {
		name = "/";
		nl = 1;
	}
	char perms[32], size[24], ts[48], u[24], g[24];
	sup_e2b_entry_perms(st, perms, sizeof(perms));
	snprintf(size, sizeof(size), "%" PRIu64, st->size);
	sup_e2b_entry_time(st->mtime_ns, ts, sizeof(ts));
	json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s}", "type",
			      sup_e2b_entry_type(st, target), "size", size, "mode",
			      (json_int_t)(st->mode & 0777), "permissions", perms, "owner",
			      sup_e2b_entry_owner(st->uid, u, sizeof(u)), "group",
			      sup_e2b_entry_owner(st->gid, g, sizeof(g)), "modifiedTime", ts);
	if (!o || set_text(o, "name", name, nl) < 0 || set_text(o, "path", path, strlen(path)) < 0 ||
	    (is(st, "symlink") && st->target && set_text(o, "symlinkTarget", st->target, st->target_len) < 0)) {
		json_decref(o);
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	return o;
}
