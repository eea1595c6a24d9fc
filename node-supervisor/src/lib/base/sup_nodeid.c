#include "sup_nodeid.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sup_token.h"

static const char tag_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789-";
#define LABEL_MAX 63

static bool alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

int sup_nodeid_name_check(const char *name, sbx_err *err)
{
	size_t n = strlen(name);
	bool ok = n > 0 && n <= SUP_NODE_NAME_MAX;
	/* labels of 1-63 of [a-z0-9-], each starting and ending with [a-z0-9] */
	for (const char *l = name; ok && *l; ) {
		size_t k = strspn(l, tag_chars);
		ok = k > 0 && k <= LABEL_MAX && alnum(l[0]) && alnum(l[k - 1]) &&
		     (l[k] == '\0' || (l[k] == '.' && l[k + 1] != '\0'));
		l += k + (l[k] == '.');
	}
	if (!ok)
		return sbx_err_set(err, -EINVAL,
				   "node name '%.64s%s': want a DNS-1123 subdomain (1-%d bytes, "
				   "labels of 1-%d of [a-z0-9-] joined by '.', each starting and "
				   "ending with a letter or digit)",
				   name, n > 64 ? "..." : "", SUP_NODE_NAME_MAX, LABEL_MAX);
	return 0;
}

void sup_nodeid_default(char *out)
{
	char host[256] = "";
	size_t n = 0;
	if (gethostname(host, sizeof(host) - 1) < 0)
		host[0] = '\0';
	for (const char *p = host; *p && *p != '.' && n < SUP_NODEID_TAG_MAX; p++) {
		char ch = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
		out[n++] = strchr(tag_chars, ch) && ch ? ch : '-';
	}
	while (n > 0 && out[n - 1] == '-')
		n--;
	out[n] = '\0';
	size_t lead = strspn(out, "-");
	memmove(out, out + lead, n - lead + 1);
	if (!out[0])
		snprintf(out, SUP_NODEID_TAG_MAX + 1, "node");
}

void sup_nodeid_tag(const char *name, char *out)
{
	size_t n = strlen(name);
	if (n <= SUP_NODEID_TAG_MAX && strspn(name, tag_chars) == n) {
		memcpy(out, name, n + 1);
		return;
	}
	/* the first label's start, for the eye; the hash tells names apart */
	size_t k = strcspn(name, ".");
	if (k > SUP_NODEID_TAG_PREFIX)
		k = SUP_NODEID_TAG_PREFIX;
	while (k > 0 && name[k - 1] == '-')
		k--;
	uint8_t h[SUP_TOKEN_HASH_LEN] = { 0 };
	sbx_err e;
	if (sup_token_hash(name, n, h, &e) < 0)
		memset(h, 0, sizeof(h)); /* libcrypto out of memory: still a tag */
	static const char b32[] = "abcdefghijklmnopqrstuvwxyz234567";
	memcpy(out, name, k);
	out[k++] = '-';
	/* 8 characters of 5 bits: the first 40 bits of the hash */
	uint64_t bits = 0;
	for (int i = 0; i < 5; i++)
		bits = bits << 8 | h[i];
	for (int i = SUP_NODEID_TAG_HASH - 1; i >= 0; i--, bits >>= 5)
		out[k + (size_t)i] = b32[bits & 31];
	out[k + SUP_NODEID_TAG_HASH] = '\0';
}

int sup_nodeid_make(const char *tag, char *out, size_t cap, sbx_err *err)
{
	char hex[SUP_NODEID_HEX + 1];
	int r = sup_random_hex(hex, SUP_NODEID_HEX / 2, err);
	if (r < 0)
		return r;
	if ((size_t)snprintf(out, cap, "sb-%s-%s", tag, hex) >= cap)
		return sbx_err_set(err, -ENAMETOOLONG, "sandbox id of node tag %s", tag);
	return 0;
}

bool sup_nodeid_tag_of(const char *id, char *tag, size_t cap)
{
	const char *last = strrchr(id, '-');
	if (strncmp(id, "sb-", 3) != 0 || !last || last < id + 4)
		return false;
	size_t n = (size_t)(last - (id + 3));
	if (strlen(last + 1) != SUP_NODEID_HEX ||
	    strspn(last + 1, "0123456789abcdef") != SUP_NODEID_HEX || n >= cap ||
	    n > SUP_NODEID_TAG_MAX || strspn(id + 3, tag_chars) < n)
		return false;
	memcpy(tag, id + 3, n);
	tag[n] = '\0';
	return true;
}
