/* The snapshot store's object-store half (sup_snap_store.h says what is
 * kept where); only sup_snap_store.c calls these. */
#ifndef SUP_SNAP_STORE_S3_H
#define SUP_SNAP_STORE_S3_H

#include <stdbool.h>

#include "sup_snap_store.h"

int sup_snap_s3_open(sup_snap_store *s, const char *url, const char *endpoint, sbx_err *err);
void sup_snap_s3_close(sup_snap_store *s);
int sup_snap_s3_commit(const sup_snap_store *s, sup_catalog_snap *row, const char *staged,
		       sbx_err *err);
int sup_snap_s3_fetch(const sup_snap_store *s, const sup_catalog_snap *row, char *out, bool *temp,
		      sbx_err *err);
int sup_snap_s3_remove(const sup_snap_store *s, const sup_catalog_snap *row, sbx_err *err);

#endif
