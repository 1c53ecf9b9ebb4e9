/* The calls an engine makes on its streams (stream.c), besides walship.h's. */
#ifndef WS_CORE_WS_STREAM_H
#define WS_CORE_WS_STREAM_H

#include "core_internal.h"

int ws_tail_work_init(struct ws_tail_work *w) WS_MUST_CHECK;
void ws_tail_work_free(struct ws_tail_work *w);

struct ws_stream *ws_stream_open_shared(struct ws_sink *sink, const struct ws_stream_config *cfg,
					const struct ws_stream_shared *sh, int *err);

/* Release the stream's SQLite connections and WAL descriptor (an idle
 * tenant); the next tail reopens them and re-proves continuity. */
void ws_stream_park(struct ws_stream *st);
bool ws_stream_parked(const struct ws_stream *st);

/*
 * A bound on one tail's work, so the durable watermark advances while a
 * backlog drains: a tail that has scanned for tail_ms and whose last
 * watermark write went out at least key_ms (less the lead of
 * ws_stream_set_key_wait) before stops publishing batches there,
 * ships what it has up to the last commit in them (manifest, watermark)
 * and reports ended_early; the next tail goes on from that watermark.
 * tail_ms 0: no bound (the default; a flush and the final drain always
 * go to the end). Never while re-basing (the snapshot must be whole), and
 * a tail that met no commit yet goes on to the end.
 */
void ws_stream_set_tail_bound(struct ws_stream *st, uint32_t tail_ms, uint32_t key_ms);
/*
 * wait: the next calls' watermark write goes out no sooner than key_ms
 * (ws_stream_set_tail_bound) after the stream's last one went out; the call
 * waits for it with the lane's hold let go (ws_stream_lane), after its
 * manifest is durable. lead_ms: how long before that the engine started
 * the call (a bounded tail stops scanning that much before the interval
 * ends, so as to be ready then). wait false: the write goes at once.
 * stop (may be NULL): read (atomically) while waiting; once non-zero the
 * wait ends and the write goes (the engine is stopping: its drain is not
 * held to the interval either).
 */
void ws_stream_set_key_wait(struct ws_stream *st, bool wait, uint32_t lead_ms, const uint32_t *stop);
/* When the stream's last watermark write went out (mono ms; 0: none yet). */
uint64_t ws_stream_wm_sent_ms(const struct ws_stream *st);
/* Whether the stream writes manifest slots (docs/SLOTS.md): asked for and
 * the store's conditional writes fence. */
bool ws_stream_slots(const struct ws_stream *st);
/* drain: the next calls ship everything committed or fail, never shed, even
 * under the shed policy (a full ring is waited for, as under block, and an
 * upload that runs out of retries is an error): the final drain and a
 * tenant's removal, which promise everything committed is shipped. */
void ws_stream_set_drain(struct ws_stream *st, bool drain);
void ws_stream_last_call(const struct ws_stream *st, struct ws_stream_call *out);
uint64_t ws_stream_wm_last_frame(const struct ws_stream *st);
/* The watermark the stream knows (loaded or written): its time_ms; 0: none. */
int64_t ws_stream_wm_time_ms(const struct ws_stream *st);

/*
 * Where a call's fencing read, manifest and watermark go, and whose
 * per-call arrays it uses: one lane of the shard's tails in flight. A
 * lane's tail holds the shard's read lock (its WAL reads, the shared pipe,
 * reader and event rings) except while it waits for the store: there
 * hold(arg, false) lets it go, with nothing of the call left in the pipe,
 * and hold(arg, true) takes it back, so another tenant's tail reads and
 * ships meanwhile. hold NULL: the call keeps the thread (a stream alone,
 * a shard with one tail in flight).
 */
struct ws_stream_lane {
	struct ws_sink *sink;
	struct ws_tail_work *work;
	void (*hold)(void *arg, bool on);
	void *arg;
};
/* Between calls (the sink and work given at open until then). */
void ws_stream_set_lane(struct ws_stream *st, const struct ws_stream_lane *lane);

/* The event tap the next calls feed (events.h; NULL: none). */
struct ws_ev_tap;
void ws_stream_set_events(struct ws_stream *st, struct ws_ev_tap *tap);

/*
 * Between two tails of a tapped stream (a tail waiting for the store with
 * the shard's read lock let go, or none in flight), under that lock: read
 * the commits past the last tail's, up to the wal-index's last commit,
 * check them along SQLite's checksum chain and hand them to tap now; the
 * next tail ships them without reading them again (struct ws_stream_ahead
 * in stream_internal.h). Reads nothing unless the last tail armed it, the
 * stream holds its read mark, and tap stands where those frames begin.
 * Returns the frames read (0: none), or a negative errno from the read;
 * *under_way: the WAL runs past the wal-index's last commit (most often a
 * commit under way, which wakes nobody when it ends): call again soon.
 */
int ws_stream_read_ahead(struct ws_stream *st, struct ws_ev_tap *tap, bool *under_way);


#endif
