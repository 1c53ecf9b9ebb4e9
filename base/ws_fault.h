/*
 * Fault and pause sites, compiled into test builds only (WS_FAULTS: the
 * default for Debug and RelWithDebInfo builds with tests, off for Release
 * and for what is installed, see CMakeLists.txt). Without it every site is
 * a constant 0 and the environment (WS_FAULT, WS_PAUSE_RANDOM) is never
 * read.
 *
 * A site is a named point such as "file.put.before_publish". Every site is
 * listed once in WS_FAULT_SITES below, with what it stands between: a test
 * iterates the list (ws_fault_site_count/ws_fault_site_name) to run every
 * failure path, and test_registry_matches_sources
 * (tests/unit/test_core_interleave.c) checks that every site the sources
 * name is listed and every listed site is named somewhere.
 *
 * A site is armed to fire on its nth hit (1-based) with one of four
 * actions (up to four sites at once, see ws_fault_add):
 *   fail   the site returns -EIO to its caller (the default);
 *   crash  the process is killed on the spot with SIGKILL: how crash tests
 *          stop a writer between two durable steps;
 *   pause  the thread that reached the site stops there until released:
 *          in-process, the test's callback runs on that thread (and may
 *          mutate the database under the paused tail); across processes
 *          (WS_FAULT=site:nth:pause), the process creates the file
 *          $WS_PAUSE_DIR/<site>.<pid> and waits until it is removed
 *          (at most 60 s), so a script can act at exactly that moment;
 *   stop   the process stops itself (SIGSTOP) and, once continued
 *          (SIGCONT), goes on as if nothing fired: a script that knows the
 *          process's pid runs another process at exactly that point.
 * Independently, WS_PAUSE_RANDOM="seed:permille:max_ms" makes every site
 * sleep 1..max_ms with the given probability, so a torture run explores
 * interleavings with the application's writers; WS_PAUSE_LOG=1 prints each
 * such pause to stderr.
 *
 * Environment: WS_FAULT="site[:nth[:fail|crash|pause|stop]]" arms a site when the
 * first site is reached; an unknown site name there is a fatal error (a
 * typo must never make a crash test pass vacuously). "nth+" fires on the
 * nth hit and on every hit after it (a script that pauses a follower after
 * each state it applies: "replica.applied:1+:pause").
 */
#ifndef WS_FAULT_H
#define WS_FAULT_H

/* Every site, with what it sits between. Keep sorted by layer. */
#define WS_FAULT_SITES(X)                                                                                  \
	X("reader.sqpoll_init", "reader: before setting up an SQPOLL ring")                                 \
	X("reader.uring_init", "reader: before setting up a plain ring")                                    \
	X("reader.register_buffers", "reader: before registering the buffer")                               \
	X("reader.register_files", "reader: before registering the file table")                             \
	X("reader.register_chunk", "reader: before a chunk of a large buffer is registered (first read)")   \
	X("reader.attach", "reader: before a file takes a fixed-file slot")                                 \
	X("reader.read", "reader: before each read is submitted (either thread)")                           \
	X("http.perform", "http: before a request is performed")                                            \
	X("http.request", "http: before one request of a concurrent set")                                  \
	X("file.put.after_write", "file store: object written to its temporary file")                       \
	X("file.put.before_publish", "file store: temporary file synced, not yet linked")                   \
	X("file.put.after_publish", "file store: linked at its key, directory not yet synced")              \
	X("file.put.exists_fsync", "file store: create-once met an existing key, before syncing its directory") \
	X("file.put.dir_entry_fsync", "file store: before syncing a key's directory's entry in its parent")  \
	X("file.open.root_entry_fsync", "file store: a writer's open, before syncing the root's entry in its parent") \
	X("file.etag.before_read", "file store: an object's size known, before its bytes are read for its etag") \
	X("file.del.before_lock", "file store: a delete's directory open, before it takes the key's lock") \
	X("s3.multipart.part", "s3 store: a multipart upload created, a window of its parts not yet sent") \
	X("s3.probe.after_create", "s3 store: the conditional-write probe at open created, not yet deleted") \
	X("ckpt.probe.after_create", "checkpoint store: a shared open's probe created, not yet deleted")    \
	X("ckpt.deployment.before_create", "checkpoint store: before the deployment record")                \
	X("ckpt.deployment.after_create", "checkpoint store: after the deployment record")                  \
	X("ckpt.alloc.before_cas", "checkpoint store: before the ID allocation CAS")                        \
	X("ckpt.alloc.after_cas", "checkpoint store: after the ID allocation CAS")                          \
	X("ckpt.create.before_put", "checkpoint store: before a candidate is written")                      \
	X("ckpt.create.after_put", "checkpoint store: after a candidate is written")                        \
	X("ckpt.seal.before_put", "checkpoint store: before an abort seal")                                 \
	X("ckpt.seal.after_put", "checkpoint store: after an abort seal")                                   \
	X("ckpt.delete.before_del", "checkpoint store: before a candidate is deleted")                      \
	X("ckpt.record.before_cas", "checkpoint store: before the decision CAS")                            \
	X("ckpt.record.after_cas", "checkpoint store: after the decision CAS")                              \
	X("ckpt.witness.before_open", "checkpoint store: before the witness is opened")                     \
	X("ckpt.witness.after_open", "checkpoint store: after the witness is opened")                       \
	X("ckpt.witness.before_close", "checkpoint store: before the witness is closed")                    \
	X("ckpt.witness.after_close", "checkpoint store: after the witness is closed")                      \
	X("ckpt.inventory.before_begin", "checkpoint store: before an inventory is begun")                  \
	X("ckpt.inventory.after_begin", "checkpoint store: after an inventory is begun")                    \
	X("ckpt.inventory.before_complete", "checkpoint store: before an inventory is completed")           \
	X("ckpt.inventory.after_complete", "checkpoint store: after an inventory is completed")             \
	X("ckpt.retention.before_begin", "checkpoint store: before a retention run is recorded")            \
	X("ckpt.retention.after_begin", "checkpoint store: after a retention run is recorded")              \
	X("ckpt.retention.before_advance", "checkpoint store: before a retention phase advances")           \
	X("ckpt.retention.after_advance", "checkpoint store: after a retention phase advances")             \
	X("ckpt.repair.before_put", "checkpoint store: a rebuilt deployment record or head derived, not "  \
	  "yet written")                                                                                  \
	X("checkpoint.before_carried_cut_put", "checkpoint: a tenant's watermark carries its head, not yet " \
	  "stored as the cut")                                                                            \
	X("checkpoint.before_uncarry_put", "checkpoint: the carried head is stored, the watermark naming " \
	  "it stored not yet written")                                                                    \
	X("checkpoint.artifact.before_put", "checkpoint: before an artifact upload")                        \
	X("checkpoint.artifact.after_put", "checkpoint: after an artifact upload")                          \
	X("checkpoint.abort.before_delete", "checkpoint: abort, before deleting the attempt's objects")     \
	X("retention.before_delete", "retention: before a delete batch")                                    \
	X("retention.after_delete", "retention: after a delete batch")                                      \
	X("retention.before_parts_delete", "retention: a manifest naming snapshot parts is deleted, the "  \
	  "watermark not yet read again before its parts")                                               \
	X("retention.before_unreachable_list", "retention: a tenant's watermark is at or past the cut, its " \
	  "keys not yet listed for manifests no walk reaches and uploads no manifest names")               \
	X("replay.prefetch", "restore, verify: the fetching thread chose a window of objects, not yet read")  \
	X("replay.prefetch_open", "restore, verify: the fetching thread read an object and is about to open it") \
	X("restore.after_choose", "restore: the target state is chosen, no object of it read yet")          \
	X("verify.after_chain_load", "verify: a tenant's chain is read, its objects not yet")               \
	X("chain.before_manifest_list", "restore, verify: the watermark is read (or found missing), the "   \
	  "tenant's manifests not yet listed")                                                            \
	X("chain.before_slot_probe", "restore, verify: a probe for the head is about to read the next slot " \
	  "(the watermark, and any slot before, read)")                                                   \
	X("chain.after_slot_probe", "restore, verify: a probe met the absent slot after the head, before " \
	  "the watermark is read again")                                                                  \
	X("stream.after_begin_read", "tail: a read transaction was just taken (its read mark fixed)")       \
	X("stream.before_wal_header", "tail: before the WAL header is read")                                \
	X("stream.after_wal_header", "tail: the WAL header was read, nothing else yet")                     \
	X("stream.before_fence", "tail: continuity decided, before the fencing read")                       \
	X("stream.fence_by_cas", "tail: continuity decided, the fencing read skipped (the watermark's CAS fences)") \
	X("stream.before_deferred_fence", "tail: before the skipped fencing read, made before an upload after all") \
	X("stream.unheld_empty", "tail of a parked stream: nothing new found with no read mark held, "     \
	  "before the WAL header is read again")                                                          \
	X("stream.before_wal_read", "tail: before a slot of WAL frames is read (either thread)")            \
	X("stream.after_wal_read", "tail: a slot of WAL frames was read and checked (either thread)")       \
	X("stream.ring_handover", "tail: a slot is published to the upload side")                           \
	X("stream.before_batch_put", "tail: before a batch is published")                                   \
	X("stream.tail_bound", "tail: the work bound was reached, the rest of the WAL left to the next tail") \
	X("stream.batch_limit", "tail: before each batch after a call's first; failed, as if the call had "  \
	  "named as many batches as a manifest holds (the rest left to the next call)")                   \
	X("stream.after_scan", "tail: the WAL scan is done, before the snapshot")                           \
	X("stream.before_snapshot_put", "tail: before a snapshot part is published")                        \
	X("stream.after_snapshot", "tail: the snapshot is read, before the WAL header is checked again")    \
	X("stream.reuse_loaded", "tail: a re-base read the earlier image whose parts it may name, before "  \
	  "the database file is read")                                                                    \
	X("stream.before_reuse_check", "tail: a re-base naming earlier parts wrote its watermark, before "  \
	  "the earlier image's manifest is read again")                                                   \
	X("stream.before_manifest_put", "tail: everything uploaded, before the manifest")                   \
	X("stream.before_watermark_put", "tail: manifest durable, before the watermark CAS")                \
	X("stream.key_wait", "tail: manifest durable, the shard's read lock let go, before a watermark "   \
	  "CAS that waits out key_write_interval_ms (every such write, waiting or not)")                  \
	X("stream.before_carrying_watermark_put", "tail: before the CAS of a watermark carrying its manifest") \
	X("stream.before_carried_store", "tail: before storing the manifest the watermark carried")        \
	X("stream.after_watermark_put", "tail: watermark written, before the read mark handover")          \
	X("stream.before_lane_close", "tail, slots: a lane is opened, the old lane's end found, before "     \
	  "its close record is created")                                                                    \
	X("stream.before_lane_open", "tail, slots: before the watermark's swap that opens our lane")        \
	X("stream.after_lane_open", "tail, slots: our lane is open (watermark swapped), nothing uploaded")  \
	X("stream.slot_fence_skipped", "tail, slots: the read of our lane's next slot skipped (the slot's " \
	  "create fences)")                                                                                 \
	X("stream.before_slot_read", "tail, slots: before our lane's next slot is read (the fencing read)") \
	X("stream.before_slot_put", "tail, slots: everything uploaded, before the slot's create")          \
	X("stream.slot_taken", "tail, slots: the slot's create was refused, before it is read back")       \
	X("stream.after_slot_put", "tail, slots: the slot was created (acknowledged), before the hint")    \
	X("stream.before_hint_put", "tail, slots: slot acknowledged, before the watermark's hint CAS")     \
	X("stream.before_checkpoint_lock", "tail: the live WAL is still the watermark's generation, past "  \
	  "wal_checkpoint_bytes: before the write lock for walship's WAL checkpoint")                    \
	X("stream.before_wal_checkpoint", "tail: under the write lock, before walship's WAL checkpoint") \
	X("stream.wal_checkpoint_gap", "tail: WAL checkpoint fallback, between the spare's two transactions") \
	X("engine.lane_store_wait", "engine: a tail in flight let the shard's read lock go to wait for the store") \
	X("engine.read_ahead", "shard: a tapped tenant's commits past its last settled tail, before they are read " \
	  "ahead of its next tail")                                                                      \
	X("events.derive", "events: a collected slot of a tapped tenant, before its frames become events") \
	X("replica.before_publish", "replica: a transaction's frames written to the replica's WAL and "     \
	  "wal-index hash tables, its wal-index header (the commit readers see) not yet written")         \
	X("replica.applied", "replica: an image or a transaction applied and published, before the call " \
	  "returns (a follower's --json line for it comes after)")

enum ws_fault_action { WS_FAULT_FAIL = 0, WS_FAULT_CRASH = 1, WS_FAULT_PAUSE = 2, WS_FAULT_STOP = 3 };

/* Returns 0 normally; a negative error (-EIO) when the armed site fires with
 * action fail. A name not in WS_FAULT_SITES aborts the process. */
int ws_fault_hit(const char *site);
#ifdef WS_FAULTS
#define WS_FAULT(site) ws_fault_hit(site)
#else
#define WS_FAULT(site) ((void)(site), 0)
#endif

/* The registry: every site, for tests to iterate. */
unsigned ws_fault_site_count(void);
const char *ws_fault_site_name(unsigned i);
const char *ws_fault_site_about(unsigned i);
/* Index of a site name, or -1. */
int ws_fault_site_index(const char *site);

/* Arm `site` to fire on its nth hit (1-based). crash: 0 fail, 1 crash (the
 * historical signature); ws_fault_arm_action for pause. Returns 0, or
 * -EINVAL for a name that is not a site (nothing armed then). */
int ws_fault_arm(const char *site, unsigned nth, int crash);
int ws_fault_arm_action(const char *site, unsigned nth, enum ws_fault_action action);

/* Arm a pause: on the nth hit of `site` the reaching thread calls fn(arg)
 * and goes on when it returns. Returns 0 or -EINVAL. */
typedef void (*ws_fault_pause_fn)(const char *site, void *arg);
int ws_fault_arm_pause(const char *site, unsigned nth, ws_fault_pause_fn fn, void *arg);

/* Arm one more site, keeping those armed (at most 4 in all): a failure at
 * one site and a pause at another, say. Returns 0 or -EINVAL. */
int ws_fault_add(const char *site, unsigned nth, enum ws_fault_action action, ws_fault_pause_fn fn, void *arg);
/* ws_fault_add firing on the nth hit and every hit after it ("nth+"). */
int ws_fault_add_every(const char *site, unsigned nth, enum ws_fault_action action, ws_fault_pause_fn fn, void *arg);

void ws_fault_disarm(void);

#endif
