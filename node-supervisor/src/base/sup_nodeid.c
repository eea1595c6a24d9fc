#include "sup_nodeid.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sup_token.h"

static const char name_chars[] = "abcdefghijklmnopqrstuvwxyz0123456789-";

int sup_nodeid_name_check(const char *name, sbx_err *err)
{
	size_t n = strspn(name, name_chars);
	if (n == 0 || n > SUP_NODE_NAME_MAX || name[n] != '\0' || name[0] == '-' ||
	    name[n - 1] == '-')
		return sbx_err_set(err, -EINVAL,
				   "node name '%.64s': want 1-%d of [a-z0-9-], no '-' at either end",
				   name, SUP_NODE_NAME_MAX);
	return 0;
}

void sup_nodeid_default(char *out)
{
	char host[256] = "";
	size_t n = 0;
	if (gethostname(host, sizeof(host) - 1) < 0)
		host[0] = '\0';
	for (const char *p = host; *p && *p != '.' && n < SUP_NODE_NAME_MAX; p++) {
		char ch = *p >= 'A' && *p <= 'Z' ? (char)(*p - 'A' + 'a') : *p;
		out[n++] = strchr(name_chars, ch) && ch ? ch : '-';
	}
	while (n > 0 && out[n - 1] == '-')
		n--;
	out[n] = '\0';
	size_t lead = strspn(out, "-");
	memmove(out, out + lead, n - lead + 1);
	if (!out[0])
		snprintf(out, SUP_NODE_NAME_MAX + 1, "node");
}

int sup_nodeid_make(const char *node, char *out, size_t cap, sbx_err *err)
{
	char hex[SUP_NODEID_HEX + 1];
	int r = sup_random_hex(hex, SUP_NODEID_HEX / 2, err);
	if (r < 0)
		return r;
	if ((size_t)snprintf(out, cap, "sb-%s-%s", node, hex) >= cap)
		return sbx_err_set(err, -ENAMETOOLONG, "sandbox id of node %s", node);
	return 0;
}

bool sup_nodeid_node(const char *id, char *node, size_t cap)
{
	const char *last = strrchr(id, '-');
	if (strncmp(id, "sb-", 3) != 0 || !last || last < id + 4)
		return false;
	size_t n = (size_t)(last - (id + 3));
	if (strlen(last + 1) != SUP_NODEID_HEX ||
	    strspn(last + 1, "0123456789abcdef") != SUP_NODEID_HEX || n >= cap ||
	    n > SUP_NODE_NAME_MAX || strspn(id + 3, name_chars) < n)
		return false;
	memcpy(node, id + 3, n);
	node[n] = '\0';
	return true;
}
