/* --help and the README's table of options, written from the rows. */
#include <string.h>

#include "sup_opt.h"

#define HELP_COL 25
#define HELP_WIDTH 79

static const char *arg_of(const sup_opt *o)
{
	if (o->type == SUP_OPT_FLAG)
		return NULL;
	if (o->arg)
		return o->arg;
	switch (o->type) {
	case SUP_OPT_UINT: return "N";
	case SUP_OPT_SIZE: return "SIZE";
	case SUP_OPT_SECS: return "SEC";
	default: return "VALUE";
	}
}

/* What follows the help: the default, repeatable, the command line's. */
static void tail_of(const sup_opt *o, bool with_default, char *buf, size_t size)
{
	buf[0] = '\0';
	if (with_default && o->def_doc)
		snprintf(buf, size, " (default: %s)", o->def_doc);
	else if (with_default && o->def)
		snprintf(buf, size, " (default %s)", o->def);
	if (o->flags & SUP_OPT_REPEAT)
		snprintf(buf + strlen(buf), size - strlen(buf), " (repeatable; a list in the file)");
	if (o->flags & SUP_OPT_CLI)
		snprintf(buf + strlen(buf), size - strlen(buf), " (command line only)");
}

/* text from column col to HELP_WIDTH, continued lines at HELP_COL */
static void wrap(FILE *out, const char *text, int col)
{
	const char *p = text;
	while (*p) {
		while (*p == ' ')
			p++;
		size_t word = strcspn(p, " ");
		if (col > HELP_COL && col + 1 + (int)word > HELP_WIDTH) {
			fprintf(out, "\n%*s", HELP_COL, "");
			col = HELP_COL;
		} else if (col > HELP_COL) {
			fputc(' ', out);
			col++;
		}
		fwrite(p, 1, word, out);
		col += (int)word;
		p += word;
	}
	fputc('\n', out);
}

void sup_opt_usage(FILE *out, const char *prog)
{
	fprintf(out,
		"Usage: %s [--config FILE] [options]\n"
		"       %s hash-token [TOKEN]   the SHA-256 form a --tenants file keeps a token in\n"
		"                         (the token as the argument, or one line on stdin)\n"
		"Every option is also a key of the --config file (YAML: name: value, a list\n"
		"for a repeatable one, true/false for a switch); the command line overrides it.\n",
		prog, prog);
	for (size_t i = 0; i < sup_noptions; i++) {
		const sup_opt *o = &sup_options[i];
		if (o->type == SUP_OPT_GROUP) {
			fprintf(out, "\n%s:\n", o->help);
			continue;
		}
		char lhs[128], tail[256], text[1024];
		const char *arg = arg_of(o);
		int col = snprintf(lhs, sizeof(lhs), "  --%s%s%s", o->name, arg ? " " : "", arg ? arg : "");
		fputs(lhs, out);
		if (col >= HELP_COL)
			fprintf(out, "\n%*s", HELP_COL, "");
		else
			fprintf(out, "%*s", HELP_COL - col, "");
		tail_of(o, true, tail, sizeof(tail));
		snprintf(text, sizeof(text), "%s%s", o->help, tail);
		wrap(out, text, HELP_COL);
	}
}

/* A table cell: '|' would end it and '<' open an HTML tag. */
static void cell(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputs("\\|", out);
		else if (*s == '<')
			fputs("&lt;", out);
		else if (*s == '>')
			fputs("&gt;", out);
		else
			fputc(*s, out);
	}
}

/* In a code span only '|' needs its escape (GitHub's tables). */
static void code_cell(FILE *out, const char *s)
{
	fputc('`', out);
	for (; *s; s++)
		if (*s == '|')
			fputs("\\|", out);
		else
			fputc(*s, out);
	fputc('`', out);
}

void sup_opt_markdown(FILE *out)
{
	bool first = true;
	for (size_t i = 0; i < sup_noptions; i++) {
		const sup_opt *o = &sup_options[i];
		if (o->type == SUP_OPT_GROUP) {
			fprintf(out, "%s**%s**\n\n| option (and key) | default | what it does |\n|---|---|---|\n", first ? "" : "\n",
				o->help);
			first = false;
			continue;
		}
		char name[128], tail[256];
		const char *arg = arg_of(o);
		snprintf(name, sizeof(name), "--%s%s%s", o->name, arg ? " " : "", arg ? arg : "");
		fputs("| ", out);
		code_cell(out, name);
		fputs(" | ", out);
		if (o->def_doc)
			cell(out, o->def_doc);
		else if (o->def)
			code_cell(out, o->def);
		fputs(" | ", out);
		cell(out, o->help);
		tail_of(o, false, tail, sizeof(tail));
		cell(out, tail);
		fputs(" |\n", out);
	}
}
