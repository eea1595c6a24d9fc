/* The supervisor's start besides its wiring (sup_main.c): blocking steps
 * taken once, before the event loop runs, each failing the start with a
 * message naming the option it comes from. Nothing here runs after. */
#ifndef SUP_START_H
#define SUP_START_H

#include <stddef.h>
#include <sys/types.h>

#include "sbx/err.h"
#include "sup_config.h"
#include "sup_img_store.h"
#include "sup_runc.h"

/* mkdir -p path, each new folder with mode. */
int sup_start_mkdir_p(const char *path, mode_t mode, sbx_err *err);
/* The default agent: beside this binary (installed), or in the build tree. */
int sup_start_find_agent(char *out, size_t size, sbx_err *err);
/* --import-image and --remove-image, then the GC of layers no image uses. */
int sup_start_images(sup_img_store *store, const sup_config *cfg, sbx_err *err);
/* --snapshot-store: the bucket answers to these credentials. */
int sup_start_check_snapshot_store(const sup_config *cfg, sbx_err *err);
/* gVisor's runtime into *out when runsc answers (root: its default state
 * folder, cap bytes); an error only when it is required. */
int sup_start_offer_gvisor(const sup_config *cfg, char *root, size_t cap, sup_runtime *out,
			   sbx_err *err);
/* The fd limit raised to its hard one; --max-connections lowered to fit. */
void sup_start_fit_fd_limit(sup_config *cfg);
/* sandbox-supervisor hash-token [TOKEN]: its exit status. */
int sup_start_hash_token(int argc, char **argv);

#endif
