/* sup_s3_xml: S3's XML through expat, element by element (sup_s3_xml.h). */
#include <errno.h>
#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_s3_xml.h"

struct sup_s3_xml {
	XML_Parser p;
	sup_s3_xml_fn fn;
	void *ud;
	int rc;                 /* first failure: sticky */
	char why[128];          /* what our handlers refused */
	char path[SUP_S3_XML_PATH_MAX];
	size_t path_len;
	char text[SUP_S3_XML_TEXT_MAX + 1];
	size_t text_len;
};

static void stop(sup_s3_xml *x, int rc, const char *why)
{
	if (x->rc == 0) {
		x->rc = rc;
		snprintf(x->why, sizeof(x->why), "%s", why);
	}
	XML_StopParser(x->p, XML_FALSE);
}

/* Namespaces are not split (S3's one default namespace): the name is the
 * element's local name as written. */
static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	(void)attrs;
	sup_s3_xml *x = ud;
	size_t n = strlen(name);
	size_t need = x->path_len + (x->path_len ? 1 : 0) + n;
	if (need >= sizeof(x->path)) {
		stop(x, -E2BIG, "element path too long");
		return;
	}
	if (x->path_len)
		x->path[x->path_len++] = '/';
	memcpy(x->path + x->path_len, name, n + 1);
	x->path_len += n;
	x->text_len = 0;
	x->text[0] = '\0';
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
	sup_s3_xml *x = ud;
	x->text[x->text_len] = '\0';
	int rc = x->fn(x->ud, x->path, x->text, x->text_len);
	if (rc < 0) {
		stop(x, rc, "refused by its reader");
		return;
	}
	size_t n = strlen(name);
	x->path_len = x->path_len > n ? x->path_len - n - 1 : 0;
	x->path[x->path_len] = '\0';
	x->text_len = 0;
	x->text[0] = '\0';
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
	sup_s3_xml *x = ud;
	if (len <= 0)
		return;
	if ((size_t)len > SUP_S3_XML_TEXT_MAX - x->text_len) {
		stop(x, -E2BIG, "element text too long");
		return;
	}
	memcpy(x->text + x->text_len, s, (size_t)len);
	x->text_len += (size_t)len;
}

/* A DOCTYPE is how entities (and their expansion) get in: S3 never sends
 * one, so a document with one is not S3's. */
static void XMLCALL on_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
			       const XML_Char *pubid, int has_internal)
{
	(void)name, (void)sysid, (void)pubid, (void)has_internal;
	stop(ud, -EPROTO, "DOCTYPE refused");
}

int sup_s3_xml_new(sup_s3_xml_fn fn, void *ud, sup_s3_xml **out, sbx_err *err)
{
	sup_s3_xml *x = calloc(1, sizeof(*x));
	if (!x)
		return sbx_err_set(err, -ENOMEM, "xml parser");
	x->p = XML_ParserCreate("UTF-8");
	if (!x->p) {
		free(x);
		return sbx_err_set(err, -ENOMEM, "xml parser");
	}
	x->fn = fn;
	x->ud = ud;
	XML_SetUserData(x->p, x);
	XML_SetElementHandler(x->p, on_start, on_end);
	XML_SetCharacterDataHandler(x->p, on_text);
	XML_SetStartDoctypeDeclHandler(x->p, on_doctype);
	*out = x;
	return 0;
}

void sup_s3_xml_free(sup_s3_xml *x)
{
	if (!x)
		return;
	XML_ParserFree(x->p);
	free(x);
}

int sup_s3_xml_feed(sup_s3_xml *x, const char *data, size_t len, bool last, sbx_err *err)
{
	while (x->rc == 0) {
		int n = len > (1u << 30) ? (1 << 30) : (int)len;
		bool end = last && (size_t)n == len;
		if (XML_Parse(x->p, data, n, end) == XML_STATUS_ERROR && x->rc == 0) {
			x->rc = -EPROTO;
			snprintf(x->why, sizeof(x->why), "%s at line %lu",
				 XML_ErrorString(XML_GetErrorCode(x->p)),
				 (unsigned long)XML_GetCurrentLineNumber(x->p));
		}
		data += n;
		len -= (size_t)n;
		if (len == 0)
			break;
	}
	if (x->rc)
		return sbx_err_set(err, x->rc, "xml: %s", x->why);
	return 0;
}
