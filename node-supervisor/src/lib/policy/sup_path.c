/* sup_path: see sup_path.h. */
#include "sup_path.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

/* How p's byte c is shown: as is, or escaped. Returns the length. */
static size_t quote_byte(unsigned char c, char piece[4])
{
	static const char hex[] = "0123456789abcdef";
	if (c == '"' || c == '\\') {
		piece[0] = '\\';
		piece[1] = (char)c;
		return 2;
	}
	if (c >= 0x20 && c < 0x7f) {
		piece[0] = (char)c;
		return 1;
	}
	piece[0] = '\\';
	piece[1] = 'x';
	piece[2] = hex[c >> 4];
	piece[3] = hex[c & 15];
	return 4;
}

char *sup_path_quote(const char *p, size_t len, char *out, size_t cap)
{
	static const char cut_mark[] = "...\"";
	char piece[4];
	if (cap < sizeof(cut_mark) + 1) {
		if (cap)
			out[0] = '\0';
		return out;
	}
	size_t total = 0;
	for (size_t i = 0; i < len; i++)
		total += quote_byte((unsigned char)p[i], piece);
	/* Room for the text: all of it between quotes, or a part and the mark. */
	bool cut = total + 3 > cap;
	size_t limit = cut ? cap - sizeof(cut_mark) : cap - 2;
	size_t o = 0;
	out[o++] = '"';
	for (size_t i = 0; i < len; i++) {
		size_t n = quote_byte((unsigned char)p[i], piece);
		if (o + n > limit)
			break;
		memcpy(out + o, piece, n);
		o += n;
	}
	if (cut) {
		memcpy(out + o, cut_mark, sizeof(cut_mark));
	} else {
		out[o++] = '"';
		out[o] = '\0';
	}
	return out;
}

int sup_path_normalize(const char *in, size_t len, char *out, size_t cap, bool *dir,
		       sbx_err *err)
{
	char q[SUP_PATH_QUOTE_MAX];
	if (dir)
		*dir = false;
	if (len == 0)
		return sbx_err_set(err, -EINVAL, "empty path");
	if (memchr(in, '\0', len))
		return sbx_err_set(err, -EINVAL, "path %s: contains a NUL byte",
				   sup_path_quote(in, len, q, sizeof(q)));
	if (len >= PATH_MAX)
		return sbx_err_set(err, -ENAMETOOLONG, "path %s: %zu bytes, the limit is %d",
				   sup_path_quote(in, len, q, sizeof(q)), len, PATH_MAX - 1);
	if (in[0] != '/')
		return sbx_err_set(err, -EINVAL,
				   "path %s: relative; paths are absolute, e.g. /workspace/file",
				   sup_path_quote(in, len, q, sizeof(q)));
	if (cap <= len)
		return sbx_err_set(err, -ENAMETOOLONG, "path %s: no room to normalise it",
				   sup_path_quote(in, len, q, sizeof(q)));

	/* out[0..o) is the path so far without a trailing slash; "" stands for "/". */
	size_t o = 0;
	bool dirish = false;
	size_t i = 0;
	while (i < len) {
		while (i < len && in[i] == '/')
			i++;
		if (i == len) {
			dirish = true;
			break;
		}
		size_t s = i;
		while (i < len && in[i] != '/')
			i++;
		size_t n = i - s;
		if (n > NAME_MAX)
			return sbx_err_set(err, -ENAMETOOLONG,
					   "path %s: a component of %zu bytes, the limit is %d",
					   sup_path_quote(in, len, q, sizeof(q)), n, NAME_MAX);
		if (n == 1 && in[s] == '.') {
			dirish = true;
			continue;
		}
		if (n == 2 && in[s] == '.' && in[s + 1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			dirish = true;
			continue;
		}
		out[o++] = '/';
		memcpy(out + o, in + s, n);
		o += n;
		dirish = false;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	if (dir)
		*dir = dirish;
	return (int)o;
}

bool sup_path_is_under(const char *path, size_t path_len, const char *root, size_t root_len)
{
	if (root_len == 1 && root[0] == '/')
		return path_len >= 1 && path[0] == '/';
	if (path_len < root_len || memcmp(path, root, root_len) != 0)
		return false;
	return path_len == root_len || path[root_len] == '/';
}

bool sup_path_rel_ok(const char *rel, size_t len)
{
	if (len == 0 || memchr(rel, '\0', len))
		return false;
	for (size_t i = 0; i <= len; i++) {
		size_t s = i;
		while (i < len && rel[i] != '/')
			i++;
		size_t n = i - s;
		if (n == 0 || (n == 1 && rel[s] == '.') || (n == 2 && rel[s] == '.' && rel[s + 1] == '.'))
			return false;
	}
	return true;
}
