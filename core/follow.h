/*
 * Following one tenant from the sink alone (follow.c): the reading side of
 * a replica on another host. It starts from a rebuild (the newest
 * checkpoint's artifact and the chain after its cut, or the whole chain:
 * restore's own code), then polls the tenant's watermark with a
 * conditional read (ws_store_get_changed: no LIST, no body while nothing
 * changed) and hands every committed transaction of each new manifest, in
 * order, to its caller. docs/EVENTS.md "Following from the sink"
 * describes it.
 *
 * The callbacks have the shape of the replica applier's calls
 * (ws_replica_image, ws_replica_apply), so a caller passes them through.
 * tx_id is docs/EVENTS.md's: (chain << 32) | commit frame, the chain
 * counted by the follower (1 at its first rebuild, one more at each later
 * rebuild and each WAL generation it follows), so it grows for the
 * follower's life as the engine's does for the engine's; the frame part is
 * the engine's own.
 */
#ifndef WS_CORE_FOLLOW_H
#define WS_CORE_FOLLOW_H

#include "walship.h"

#define WS_FOLLOW_POLL_MS_DEFAULT 100u
#define WS_FOLLOW_DENSE_MS_DEFAULT 10u
#define WS_FOLLOW_IMAGE_BYTES_MAX_DEFAULT ((uint64_t)1 << 30)

struct ws_follow_ops {
	/* A rebuild: the tenant's whole committed state at tx_id, pages of
	 * page_size bytes (a WAL-mode database when the source's is). Whatever
	 * the replica held before is replaced. */
	int (*image)(void *arg, uint64_t tx_id, const uint8_t *img, uint64_t pages, uint32_t page_size);
	/* One committed transaction after the state last handed: the n pages
	 * it wrote, in WAL order (a page may come twice: the later wins), and
	 * the database's size in pages after it (the replica truncates to it).
	 * Every byte was verified before the call. */
	int (*apply)(void *arg, uint64_t tx_id, const uint32_t *pgno, const uint8_t *pages, uint32_t n,
		     uint32_t page_size, uint32_t db_pages);
};

struct ws_follow_config {
	const char *tenant;
	uint32_t poll_ms;              /* between watermark reads that found nothing new; 0: the default */
	/* ... and this often around the watermark's next write expected
	 * (ws_follow_cadence_wait); 0: the default; poll_ms or more: never denser */
	uint32_t dense_ms;
	uint64_t image_bytes_max;      /* a rebuild's image, and one transaction's pages; 0: the default */
};

struct ws_follow_stats {
	uint64_t polls;                /* watermark reads */
	uint64_t unchanged;            /* of which: answered unchanged (no body) */
	uint64_t dense;                /* of which: made dense_ms after the one before (a write expected) */
	uint64_t rebuilds;             /* images handed */
	uint64_t manifests;            /* manifests applied in the steady state */
	uint64_t txns;                 /* transactions handed */
};

struct ws_follow;

/*
 * The watermark's cadence, as the follower sees it: a source writes a
 * tenant's watermark at most once per key_write_interval_ms, and while it
 * commits steadily, about that often, so its next write is expected about
 * one gap after the last one. ws_follow_run reads the watermark every
 * dense_ms in a window around that time and every poll_ms elsewhere: a
 * commit is then seen within about dense_ms of its watermark write instead
 * of up to poll_ms, for a few reads more per write. The window runs from
 * the earliest the last write can have been (the read before the one that
 * saw it) plus the shortest of the last WS_FOLLOW_GAPS gaps, less dense_ms,
 * to the read that saw it plus the longest gap, plus dense_ms; at most 2 x
 * poll_ms long. Gaps under 4 x poll_ms (a source that writes often) leave
 * every read at poll_ms. Pure: the caller passes the times (mono ms).
 */
#define WS_FOLLOW_GAPS 8
struct ws_follow_cadence {
	uint64_t read_ms;               /* the last read began (0: none yet) */
	uint64_t last_ms;               /* the last read that found the watermark changed began (0: none) */
	uint64_t last_unc_ms;           /* ... and the read before it this long before: the write came between */
	uint32_t gaps[WS_FOLLOW_GAPS];  /* between the last changes seen */
	unsigned ngaps, next;
};
/* A read that began at at_ms found the watermark changed, or not. */
void ws_follow_cadence_seen(struct ws_follow_cadence *c, uint64_t at_ms, bool changed);
/* How long to wait, at now_ms, before the next read. *dense: dense_ms in the window. */
uint32_t ws_follow_cadence_wait(const struct ws_follow_cadence *c, uint64_t now_ms, uint32_t poll_ms,
				uint32_t dense_ms, bool *dense);

/*
 * A follower of cfg->tenant in sink (the sink must outlive it). Nothing is
 * read yet. Errors: -EINVAL (a bad tenant name, no callbacks), -ENOMEM.
 */
int ws_follow_open(struct ws_sink *sink, const struct ws_follow_config *cfg, const struct ws_follow_ops *ops,
		   void *arg, struct ws_follow **out) WS_MUST_CHECK;
void ws_follow_close(struct ws_follow *f);

/*
 * One look at the watermark: the first one rebuilds, later ones apply what
 * is new (*handed: images and transactions handed, may be NULL). A
 * follower that cannot go on from what it applied (retention removed what
 * it needs, or a re-base it cannot prove continues it) rebuilds by itself.
 * Errors name the object: WS_ENOTFOUND (the tenant has no watermark),
 * WS_ECORRUPT / WS_EFORMAT (an object that does not verify: nothing of it
 * is handed), WS_EINCOMPLETE (what a rebuild needs is missing), I/O
 * errors, a callback's error. After an error the follower still holds a
 * committed state and the next poll starts over from it.
 */
int ws_follow_poll(struct ws_follow *f, unsigned *handed) WS_MUST_CHECK;

/* Poll until *stop is set (by a signal handler) or a poll fails, waiting after each that found
 * nothing new poll_ms, or dense_ms when a watermark write is expected (ws_follow_cadence_wait).
 * Returns 0 when stopped, else the poll's error. */
int ws_follow_run(struct ws_follow *f, const volatile int *stop) WS_MUST_CHECK;

/* The source time of the transaction (or image) being handed, for a
 * callback: the time of the tail that shipped it (its manifest's, or the
 * merged tail's), in ms since the epoch. */
int64_t ws_follow_source_ms(const struct ws_follow *f);
void ws_follow_stats(const struct ws_follow *f, struct ws_follow_stats *out);

#endif
