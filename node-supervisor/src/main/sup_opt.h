/* The supervisor's options as one table (sup_options.c): each row is an
 * option of the command line (--NAME) and the key NAME of the config file,
 * with the sup_config field it sets, its bounds, its default and its help.
 * This module is the engine over the rows: it reads a value into a row's
 * field, writes a field back as text, and prints --help and the README's
 * table from the rows. It knows no option by name: what an option means
 * lives in its row, and a type that needs more than the engine's (a list, a
 * host:port) brings its own parse and show. No I/O beyond the FILE it is
 * given. */
#ifndef SUP_OPT_H
#define SUP_OPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sup_config.h"

typedef enum sup_opt_type {
	SUP_OPT_GROUP,  /* not an option: the heading of the rows below it */
	SUP_OPT_FLAG,   /* bool: no argument on the command line, true/false in a file */
	SUP_OPT_STR,    /* const char *: .check may refuse it, .choices restrict it */
	SUP_OPT_STRS,   /* const char *[.cap] counted by the size_t at .off2: repeatable */
	SUP_OPT_UINT,   /* unsigned: a count (K/M/G allowed), lo..hi, stored times .scale */
	SUP_OPT_SIZE,   /* bytes ("16M") in a size_t or a uint64_t, lo..hi */
	SUP_OPT_SECS,   /* seconds with fractions ("0.5") stored as unsigned ms, lo..hi ms */
	SUP_OPT_ENUM,   /* one of .choices, its index stored in a bool or an int */
	SUP_OPT_CUSTOM, /* .parse and .show: a host:port, a list, a spec */
} sup_opt_type;

enum {
	SUP_OPT_REPEAT = 1u << 0, /* given again adds a value; a list in the file */
	SUP_OPT_CLI = 1u << 1,    /* the command line's only: not a key of the file */
	SUP_OPT_SECRET = 1u << 2, /* left out of --print-config */
};

/* What the command line does with an option besides setting a field. */
typedef enum sup_opt_action {
	SUP_ACT_NONE = 0,
	SUP_ACT_CONFIG,        /* --config FILE: read before the other options */
	SUP_ACT_HELP,          /* print and exit 0 */
	SUP_ACT_HELP_MARKDOWN,
	SUP_ACT_VERSION,
} sup_opt_action;

/* A value written back: called once for a scalar, once per item of a
 * repeatable option, never for an option without a value. */
typedef void (*sup_opt_emit)(void *ud, const char *value);

typedef struct sup_opt sup_opt;
struct sup_opt {
	const char *name;    /* "max-body": --max-body, and the file's key max-body */
	sup_opt_type type;
	const char *arg;     /* what --help calls the value ("SIZE"); NULL: the type's */
	size_t off, size;    /* the field in sup_config */
	size_t off2;         /* STRS: its count; CUSTOM: a second field of its own */
	size_t given;        /* 1 + the offset of a bool set when the option is given; 0: none */
	uint64_t lo, hi;     /* UINT and SIZE: the value's bounds; SECS: in ms */
	unsigned scale;      /* UINT: the field holds value * scale (0: 1) */
	unsigned cap;        /* STRS: the most values */
	const char *const *choices; /* ENUM and STR: the values taken, NULL-terminated */
	const char *def;     /* the default, read as a given value is; NULL: zero */
	const char *def_doc; /* the default in words, where it is not a value */
	const char *help;
	unsigned flags;      /* SUP_OPT_REPEAT, SUP_OPT_CLI */
	sup_opt_action action;
	/* STR and STRS: 0, or -EINVAL naming label ("--state-dir", or
	 * "FILE:LINE: state-dir") */
	int (*check)(const char *label, const char *value, sbx_err *err);
	/* CUSTOM: the value into c; errors name label as check's do */
	int (*parse)(sup_config *c, const sup_opt *o, const char *label, const char *value,
		     sbx_err *err);
	void (*show)(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud);
	void (*reset)(sup_config *c); /* CUSTOM repeatable: forget every value */
	void (*init)(sup_config *c);  /* a default found at start (the host's name) */
	const char *example; /* tests: a value it takes other than its default */
};

#define SUP_OPT_FIELD(f) .off = offsetof(sup_config, f), .size = sizeof(((sup_config *)0)->f)
#define SUP_OPT_GIVEN(f) .given = offsetof(sup_config, f) + 1

/* The table (sup_options.c), in --help's order. */
extern const sup_opt sup_options[];
extern const size_t sup_noptions;

/* The row of an option; NULL for none (group rows have no name). */
const sup_opt *sup_opt_find(const char *name);
/* Is it an option (not a heading)? Is it a key of the config file? */
static inline int sup_opt_is_option(const sup_opt *o) { return o->type != SUP_OPT_GROUP; }
static inline int sup_opt_is_key(const sup_opt *o)
{
	return o->type != SUP_OPT_GROUP && !(o->flags & SUP_OPT_CLI);
}

/* value into o's field of c (a FLAG: NULL or "true" sets it, "false"
 * clears it). The string is kept, not copied: it must outlive c (argv, or
 * sup_config_keep's). 0, or -EINVAL naming label. */
int sup_opt_set(sup_config *c, const sup_opt *o, const char *label, const char *value,
		sbx_err *err);
/* A repeatable option forgets its values (the file's, when the command
 * line gives its own). */
void sup_opt_reset(sup_config *c, const sup_opt *o);
/* o's value in c as text a file or flag takes back. */
void sup_opt_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud);

/* --help, and the README's table of options (markdown), from the rows. */
void sup_opt_usage(FILE *out, const char *prog);
void sup_opt_markdown(FILE *out);

/* Pointers into c at a row's offsets. */
static inline void *sup_opt_at(sup_config *c, size_t off) { return (char *)c + off; }
static inline const void *sup_opt_cat(const sup_config *c, size_t off)
{
	return (const char *)c + off;
}

#endif
