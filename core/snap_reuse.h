/*
 * A re-base naming the unchanged parts of the image before it (snap_reuse.c;
 * docs/DESIGN.md "Re-base cost", docs/CHECKPOINTS.md "Parts a re-base
 * names again").
 */
#ifndef WS_CORE_SNAP_REUSE_H
#define WS_CORE_SNAP_REUSE_H

#include "core_internal.h"

/* The snapshot parts of the REBASE base of the chain a watermark names:
 * the image a re-base on top of that watermark may name parts of. */
struct ws_snap_prev {
	bool have;
	struct ws_chain_stop base;  /* the base manifest, named exactly */
	uint32_t count;
	struct ws_fmt_objref *refs; /* its snapshot refs, tiling pages 1..n in order */
};

/* The part size a re-base cuts a larger database into. */
#define WS_SNAP_GRID_BYTES 65536u

/* How many manifests back from the watermark's the base is looked for. */
#define WS_SNAP_PREV_WALK_MAX 4096u

/*
 * Load the base image of the chain wm names (out->have false, 0 returned,
 * when there is none to reuse: no watermark manifest, a carried head, a
 * chain cut by retention or longer than WS_SNAP_PREV_WALK_MAX, a base
 * without parts). Errors other than a missing or unreadable manifest
 * (which only mean "nothing to reuse") are returned.
 */
int ws_snap_prev_load(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm,
		      struct ws_snap_prev *out) WS_MUST_CHECK;
void ws_snap_prev_free(struct ws_snap_prev *p);

/* The base's part covering exactly pages first..first+count-1, or NULL. */
const struct ws_fmt_objref *ws_snap_prev_find(const struct ws_snap_prev *p, uint64_t first, uint64_t count);

/*
 * After the watermark that names a re-base reusing p's parts is written:
 * 0 when p's base manifest is still stored (no retention run has begun
 * deleting its parts, and any that does reads that watermark first: the
 * re-base's parts are kept), 1 when it is gone, or a read error.
 */
int ws_snap_prev_still(struct ws_store *s, const struct ws_snap_prev *p) WS_MUST_CHECK;

/* The part grid of a re-base of a database of pages pages of ps bytes,
 * slot_pages the most one part may hold (docs/FORMAT.md "Snapshot part"). */
uint32_t ws_snap_grid_pages(uint64_t pages, uint32_t ps, uint32_t slot_pages, uint32_t parts_max);

#endif
