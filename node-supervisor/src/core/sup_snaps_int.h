/* What the snapshot operations' files share (sup_snaps.c,
 * sup_snaps_take.c, sup_snaps_fork.c): the owner's struct, an operation in
 * flight and the scaffold take and fork both use. Nothing outside these
 * files includes this; the interface is sup_snaps.h. */
#ifndef SUP_SNAPS_INT_H
#define SUP_SNAPS_INT_H

#include <limits.h>

#include "sup_catalog.h"
#include "sup_snaps.h"
#include "sup_snaps_store_int.h"

#define COPY_TIMEOUT_MS 120000u
#define SWEEP_EVERY_S 30
#define LAYER_PREFIX "fk-"

typedef enum { KIND_TAKE = 1, KIND_FORK } op_kind;

/* A volume of the source carried by a snapshot or fork: its files' host
 * folder (read while the source is frozen) and the archive made of it. */
typedef struct op_vol {
	char root[PATH_MAX];
	char staged[PATH_MAX];
} op_vol;

struct sup_snaps_op {
	sup_job job;
	sup_snaps *s;
	op_kind kind;
	bool cancelled;
	bool copying;      /* a fork's copy job is queued or running */
	void *ud;
	/* what the worker reads */
	sup_runc_box box;
	bool was_paused;   /* paused by its owner: frozen it stays */
	char id[48];       /* the snapshot's, or the fork layer's */
	char staged[PATH_MAX];
	char layer[PATH_MAX];
	op_vol *vols;      /* include_volumes: nvols of them (else NULL) */
	unsigned nvols;
	int rc;
	sbx_err err;
	/* take */
	sup_snaps_cb cb;
	sup_catalog_snap row;
	/* fork */
	sup_snaps_fork_cb fork_cb;
	const sup_tenant *who;
	sup_create_req tmpl;
	sup_tenant owner;  /* who's name alone: its forks' deletes after the request ended */
	unsigned count, answered, failed;
	unsigned filling;  /* fill jobs queued or running: the op outlives a cancel */
	unsigned filled;   /* forks made in a made sandbox (the others: seeded) */
	bool starting;     /* the creates are being asked for: not finished meanwhile */
	sbx_err first_err;
	sup_op **creates;
	char (*ids)[SUP_ID_MAX];
	double freeze_ms, copy_ms;
	struct sup_snaps_op *next_busy; /* s->busy: layers forks are being made on */
	struct sup_snaps_op *next_live; /* s->live: its worker job not done yet */
};

struct sup_snaps {
	struct event_base *base;
	sup_snaps_cfg cfg;
	sup_snaps_op *busy;  /* forks in flight: their layers are not swept */
	sup_snaps_op *live;  /* jobs queued or running: one per sandbox at a time,
			      * or one's thaw would cut into the other's freeze */
	bool sweeping;
	bool stopped;        /* no sweep is started any more */
	struct event *sweep_timer;
	struct event *orphan_timer; /* the object store's orphan sweep */
	sup_snaps_store st;  /* the object store's side (sup_snaps_store.c) */
};

/* ---- sup_snaps.c ---- */

/* A row as the API shows it. */
void sup_snaps_view_of(const sup_catalog_snap *r, sup_snap_view *v);

/* ---- sup_snaps_take.c: the scaffold of an op on a frozen sandbox ---- */

/* Freeze box, run fn, thaw: the thaw runs whatever fn did. */
int sup_snaps_while_frozen(sup_snaps_op *op, int (*fn)(sup_snaps_op *op), double *frozen_ms);
/* The sandbox's upper folder (out: PATH_MAX). */
int sup_snaps_upper_of(const sup_runc_box *box, char *out, sbx_err *err);
/* op's worker job is done: off s->live. */
void sup_snaps_live_remove(sup_snaps *s, sup_snaps_op *op);
/* The volumes op carries packed into their staged archives (worker). */
int sup_snaps_pack_vols(sup_snaps_op *op);
void sup_snaps_unstage_vols(sup_snaps_op *op);
/* op's job on the workers, op on s->live. */
void sup_snaps_submit(sup_snaps *s, sup_snaps_op *op);
/* An operation on sandbox id (who's, RUNNING, no other snapshot or fork of
 * it under way: *sb), its box copied for the worker. NULL with err set. */
sup_snaps_op *sup_snaps_new_op(sup_snaps *s, const sup_tenant *who, const char *id, op_kind kind,
			       void *ud, const sup_sandbox **sb, sbx_err *err);
/* A new id: prefix and random characters (cap bytes with its NUL). */
int sup_snaps_new_id(const char *prefix, char *out, size_t cap, sbx_err *err);
/* include_volumes: what the source mounts, into op->vols (each with its
 * archive's staged path: stage(op, k, out)) and row's volumes (when row). */
int sup_snaps_carry_vols(sup_snaps *s, sup_snaps_op *op, const sup_sandbox *sb,
			 int (*stage)(sup_snaps *s, sup_snaps_op *op, unsigned k, char *out, sbx_err *err),
			 sup_catalog_snap *row, sbx_err *err);

#endif
