/* Stale conditional-write probes left by killed processes (probes.c). */
#ifndef WS_CORE_PROBES_H
#define WS_CORE_PROBES_H

#include <stdbool.h>
#include <stdint.h>

#include "ws_store.h"

/*
 * A probe lives for the few requests of one open (create, create again, a
 * compare-and-swap, delete): seconds, at most those requests' retry
 * deadlines (30 s each by default). One older than this was left by a
 * process killed between its create and its delete.
 */
#define WS_PROBE_STALE_MS (60ull * 60ull * 1000ull)

/* Whether key is a probe walship writes: checkpoints/probe/<32 hex> or _walship/probe-<16 hex>. */
bool ws_probe_key(const char *key);

/*
 * Every probe under the sink (one LIST of each probe prefix, a HEAD of each
 * probe found) last modified stale_ms or more before now_ms (wall clock, ms
 * since the epoch): deleted, or with dry_run only reported. fn (may be
 * NULL) gets each such key; *removed counts them, *fresh the probes left
 * (a live process's). A probe gone meanwhile is neither. Errors: the
 * store's (the detail names the key).
 */
int ws_probes_sweep(struct ws_store *s, int64_t now_ms, uint64_t stale_ms, bool dry_run,
		    void (*fn)(const char *key, void *arg), void *arg, uint64_t *removed, uint64_t *fresh) WS_MUST_CHECK;

#endif
