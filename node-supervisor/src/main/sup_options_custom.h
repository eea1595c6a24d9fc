/* The options whose values the engine's types do not cover: a host:port,
 * the pools' lists, the reset's folders, a limits spec, the node's name.
 * Each is a parse (and show, reset, init where needed) that one row of
 * sup_options.c names; they know their fields, not the rows around them. */
#ifndef SUP_OPTIONS_CUSTOM_H
#define SUP_OPTIONS_CUSTOM_H

#include "sup_opt.h"

/* HOST:PORT into the row's char array (off) and uint16_t port (off2). */
int sup_optc_listen_parse(sup_config *c, const sup_opt *o, const char *label, const char *v,
			  sbx_err *err);
void sup_optc_listen_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud);

/* --pool-images NAME[=N],... */
int sup_optc_images_parse(sup_config *c, const sup_opt *o, const char *label, const char *v,
			  sbx_err *err);
void sup_optc_images_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud);

/* --pool ISOLATION:IMAGE=N, repeatable */
int sup_optc_pool_parse(sup_config *c, const sup_opt *o, const char *label, const char *v,
			sbx_err *err);
void sup_optc_pool_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud);
void sup_optc_pool_reset(sup_config *c);

/* --reuse-paths /a,/b */
int sup_optc_reuse_parse(sup_config *c, const sup_opt *o, const char *label, const char *v,
			 sbx_err *err);
void sup_optc_reuse_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud);

/* cpus=C,memory=SIZE,pids=N,disk=SIZE over the row's sup_resources */
int sup_optc_res_parse(sup_config *c, const sup_opt *o, const char *label, const char *v,
		       sbx_err *err);
void sup_optc_res_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud);
void sup_optc_res_max_init(sup_config *c); /* the machine's CPUs and memory */

/* --node-name: a DNS-1123 subdomain into the row's char array */
int sup_optc_node_parse(sup_config *c, const sup_opt *o, const char *label, const char *v,
			sbx_err *err);
void sup_optc_node_show(const sup_config *c, const sup_opt *o, sup_opt_emit emit, void *ud);
void sup_optc_node_init(sup_config *c); /* the host's name */

#endif
