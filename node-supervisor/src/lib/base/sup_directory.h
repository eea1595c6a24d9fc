/* The node directory's interface: which node an id's tag names and where
 * its supervisor answers, and which node has ready sandboxes of an image.
 * The relay asks it through a struct of ops and its ud, chosen at start: a
 * static one from --peer NAME=URL (the relay's sup_dir_static.h), or one
 * read back from the cluster's Leases (lib/kube's sup_kube_directory_ops).
 * Only the interface lives here, below both: it knows neither. A node is found by the tag of
 * its name (sup_nodeid_tag), derived, never stored: two nodes of one tag
 * are refused (at start for --peer, on each lookup for the Leases). Ops
 * run on the loop thread and must not block: what they answer is what
 * they know now. */
#ifndef SUP_DIRECTORY_H
#define SUP_DIRECTORY_H

#include <stddef.h>

typedef struct sup_directory_ops {
	/* The node whose tag is tag: its name and "http://host:port";
	 * -ENOENT none (or gone), -ENOTUNIQ more than one (names clash). */
	int (*find)(void *ud, const char *tag, char *name, size_t name_cap, char *url,
		    size_t url_cap);
	/* a node other than this one with ready capacity for IMAGE, -ENOENT none */
	int (*pick)(void *ud, const char *image, char *node, size_t cap);
	/* every node other than this one it holds live, in turn: fn(fn_ud,
	 * name, url) (fn must not call the directory) */
	void (*each)(void *ud, void (*fn)(void *fn_ud, const char *name, const char *url),
		     void *fn_ud);
} sup_directory_ops;

typedef struct sup_directory {
	const sup_directory_ops *ops; /* NULL: no directory (a node alone) */
	void *ud;
} sup_directory;

#endif
