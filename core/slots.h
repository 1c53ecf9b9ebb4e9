/*
 * Finding a tenant's head (slots.c): the watermark for versions 1..3, and
 * for a tenant with manifest slots (watermark version 4, docs/FORMAT.md
 * "Watermark", "Close record"; docs/SLOTS.md) the last slot reached from
 * the watermark's hint by probing forward, across close records.
 */
#ifndef WS_CORE_SLOTS_H
#define WS_CORE_SLOTS_H

#include "core_internal.h"

/* Also look for a hole after the head: a slot at head + 2 while head + 1 is
 * absent proves the store lost an acknowledged write (one more GET). For
 * the readers of the latest state (restore-latest, verify). */
#define WS_HEAD_HOLES 1u

/* A slot object at most (a manifest is read whole). */
#define WS_SLOT_BYTES_MAX (256u << 20)

/* Restarts from a watermark whose hint passed the head a probe found. */
#define WS_HEAD_RESTARTS_MAX 8u

struct ws_head {
	/* The watermark as read (any version 1..4), its etag and its bytes:
	 * wm.carried (version 3) points into raw, which lives as long as h. */
	struct ws_fmt_watermark wm;
	struct ws_etag etag;
	struct ws_buf raw;
	char wm_key[WS_KEY_MAX];
	/* The head: wm itself for versions 1..3; for version 4 a watermark
	 * synthesized to name the head slot (version 2's fields: its key,
	 * SHA-256, length, sequence, generation, last frame and checksum, its
	 * writer's epoch and pointer generation, time_ms its durable_ms), or
	 * the hint itself when nothing follows it. seq 0: a lane opened, no
	 * slot written (nothing shipped). */
	struct ws_fmt_watermark head;
	/* Version 4: the lane slot head.seq + 1 would go in (its token and
	 * id), and whether it was closed by removal (forget). 0: versions 1..3. */
	uint64_t lane, lane_epoch, lane_pg;
	bool closed;
	/* Slot reads made (probes and hole checks), restarts taken. */
	unsigned probes, restarts;
};

/*
 * Read tenant's watermark and find its head (see struct ws_head). Version
 * 4: from the hint, GET <lane>/m<seq+1> one at a time: a manifest bound to
 * its key (ws_slot_manifest_bound) and linked to the head found so far (its
 * previous key, SHA-256 and length) becomes the head; a close record that
 * closes this lane at this sequence after the head moves the probe to its
 * closer's lane, same sequence; a 404 ends the probe, after which the
 * watermark is read again (conditional GET) and the probe starts again
 * when its hint is now past the head found (a retention run may have
 * deleted slots behind a newer hint meanwhile: docs/SLOTS.md item 2b).
 * Errors: WS_ENOTFOUND (no watermark), the watermark's errors as
 * ws_wm_load_keep's (but a version 4 one is read, not refused), an error
 * naming the slot for one that does not read, decode, bind or link,
 * WS_EINCOMPLETE naming both keys for a hole (flags WS_HEAD_HOLES), -EAGAIN
 * naming the tenant after WS_HEAD_RESTARTS_MAX restarts. h is set up even
 * on error: free it with ws_head_free.
 */
int ws_head_load(struct ws_store *s, const char *tenant, unsigned flags, struct ws_head *h) WS_MUST_CHECK;
void ws_head_free(struct ws_head *h);

/* Whether the head is a tenant's with manifest slots (watermark version 4). */
static inline bool ws_head_slots(const struct ws_head *h)
{
	return h->wm.version >= 4;
}

/*
 * With manifest slots, a head behind the cut of the latest committed
 * checkpoint (base) lost acknowledged writes (docs/SLOTS.md item 3d): then
 * WS_EINCOMPLETE naming both, else 0 (always for versions 1..3, whose
 * went-back check stands for this).
 */
/*
 * One slot for the writer (core/stream_slots.c): slot seq of lane (epoch,
 * pg, lane) of tenant read into b (reset first), its key in key. 0 with
 * *kind what it holds (a manifest or a close record, by its magic alone),
 * WS_ENOTFOUND when absent, or the error naming the key.
 */
int ws_slot_get(struct ws_store *s, const char *tenant, uint64_t epoch, uint64_t pg, uint64_t lane, uint64_t seq,
		struct ws_buf *b, enum ws_fmt_slot_kind *kind, char key[WS_KEY_MAX]) WS_MUST_CHECK;

int ws_head_behind_cut(const char *tenant, const struct ws_head *h, const struct ws_restore_base *base) WS_MUST_CHECK;

#endif
