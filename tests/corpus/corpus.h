/* Reader of the hostile path corpus (hostile_paths.txt, format described at
 * its top), shared by the supervisor's and the agent's path tests so both
 * sides are held to the same cases. Test code only: it exits nothing and
 * prints nothing; a malformed corpus is an error with its line number. */
#ifndef SBX_TEST_CORPUS_H
#define SBX_TEST_CORPUS_H

#include <stdbool.h>
#include <stddef.h>

/* Bytes that may hold NUL; p is also NUL-terminated after len. */
typedef struct corpus_bytes {
	char *p;
	size_t len;
} corpus_bytes;

typedef enum corpus_tree_type {
	CORPUS_DIR,
	CORPUS_FILE,
	CORPUS_SYMLINK,
	CORPUS_HARDLINK,
	CORPUS_FIFO,
	CORPUS_PROCFS,
} corpus_tree_type;

typedef struct corpus_tree {
	corpus_tree_type type;
	char *path; /* below the root */
	char *arg;  /* content or target, "" when none; @ROOT@/@OUT@ not substituted */
} corpus_tree;

typedef enum corpus_policy {
	CORPUS_ALLOW,
	CORPUS_DENY, /* -EPERM: the policy refuses */
	CORPUS_BAD,  /* -EINVAL */
	CORPUS_LONG, /* -ENAMETOOLONG */
} corpus_policy;

typedef struct corpus_expect {
	bool ok;
	char *content; /* ok with content to compare, else NULL */
} corpus_expect;

typedef struct corpus_case {
	int line;
	char *name;
	bool url;            /* path was URL-decoded once while loading */
	corpus_bytes raw;    /* as written in the file (escapes applied) */
	corpus_bytes path;   /* the request: raw, or raw decoded once */
	corpus_policy policy;
	corpus_bytes normalised; /* for CORPUS_ALLOW */
	corpus_expect read, write;
} corpus_case;

typedef struct corpus {
	corpus_tree *tree;
	size_t ntree;
	corpus_case *cases;
	size_t ncases;
	corpus_bytes *names;
	size_t nnames;
} corpus;

/* Load file into c. Returns 0, or -1 with a message in msg (c then holds
 * what was read before the error: corpus_free it either way). */
int corpus_load(const char *file, corpus *c, char *msg, size_t cap);
void corpus_free(corpus *c);

/* The path the agent gets when nothing normalised it first: below
 * /workspace when the request starts with "/workspace/" (or is it), else
 * the whole request. Points into c->path. */
corpus_bytes corpus_agent_rel(const corpus_case *c);

#endif
