/*
 * A live, readable SQLite replica written as SQLite's own WAL writer writes
 * (replica.c): the database's pages arrive from outside (the event
 * channel's Hydrated and Changed, or later the sink), and every SQLite
 * reader of the replica, in any process, sees only states the source
 * committed. Independent of the event channel: it takes pages.
 *
 * The replica is a database in WAL mode. The applier holds, for as long as
 * it is open, open-file-description locks (F_OFD_SETLK: they conflict with
 * SQLite's POSIX locks even in this process, and no other close drops
 * them) on
 *   - the -shm's WAL write lock (byte 120): no other writer can start, and
 *     one that holds it when the replica opens makes the open fail;
 *   - the -shm's dead-man switch (byte 128, shared): no new connection
 *     takes the wal-index for stale and truncates it;
 *   - the database's SHARED range (shared): a reader closing its last
 *     connection cannot take EXCLUSIVE and delete the WAL under us.
 * Each transaction is appended to the replica's WAL as frames chained by
 * SQLite's checksum (io/ws_wal.h), entered in the wal-index hash tables,
 * and published by the two copies of the wal-index header, second copy
 * first, as walIndexWriteHdr does: a reader that starts before the header
 * sees the old state, one after it the new one. A fully checkpointed WAL
 * is restarted (new salts) when no reader uses it (the READ locks 1..4),
 * and every ws_replica_ckpt_frames frames a PASSIVE checkpoint runs on the
 * applier's own SQLite connection, so the WAL does not grow without bound.
 *
 * Readers cache the schema keyed on page 1's schema cookie (offset 40). A
 * rebuild from another database can bring a page 1 with the same cookie
 * and other root pages, and an open reader would then use its stale schema
 * ("database disk image is malformed"). So the replica keeps a cookie of
 * its own: it goes up by one on every rebuild, on every change of the
 * source's cookie, and on the first page 1 written after open, and is
 * written into every page 1 that reaches the replica.
 *
 * Readers: set a busy timeout (sqlite3_busy_timeout, `.timeout` in the
 * shell): SQLite answers SQLITE_BUSY for a moment while the applier
 * publishes a header or restarts the WAL, and a retry reads a committed
 * state. Writes by others fail with SQLITE_BUSY: the applier holds the
 * write lock.
 */
#ifndef WS_CORE_REPLICA_H
#define WS_CORE_REPLICA_H

#include <stdint.h>

#include "ws_err.h"

struct ws_replica;

/*
 * Open the replica at path, creating it (an empty WAL database, page size
 * 4096) if missing or empty. NULL and *err on failure, the detail naming
 * the file: WS_ECONFIG (NULL path), WS_EFORMAT (not a SQLite database: its
 * header), -EBUSY (another writer holds its WAL write lock, or it cannot be
 * put in WAL mode), an open error (-errno), a SQLite error (-EIO).
 */
struct ws_replica *ws_replica_open(const char *path, int *err);

/*
 * A rebuild: the replica becomes the image (pages 1..pages of page_size
 * bytes, a database's committed state at tx_id) in one transaction. The
 * same page size: appended to the WAL as any transaction, readers stay. A
 * new page size: the file is rewritten through SQLite's backup, which
 * needs the replica without other connections (-EBUSY otherwise, named).
 * Errors: WS_ECONFIG (NULL), WS_EFORMAT (not a database image, a page size
 * SQLite cannot have, or one that disagrees with the image's header), I/O.
 */
int ws_replica_image(struct ws_replica *r, uint64_t tx_id, const uint8_t *img, uint64_t pages,
		     uint32_t page_size) WS_MUST_CHECK;

/*
 * One committed transaction of the source, atomic for every reader: n
 * pages (pgno[i], pages + i * page_size) in WAL order (a page written twice
 * counts last), the database db_pages pages after it (pages past it are
 * dropped). Errors: WS_ECONFIG (NULL, n or db_pages 0, page 0, a tx_id at
 * or before the last one applied, a page size other than the replica's:
 * rebuild first), WS_EFORMAT (nothing within db_pages, a page 1 that is
 * not a database header), WS_ECORRUPT (the wal-index is not as the applier
 * left it), I/O.
 */
int ws_replica_apply(struct ws_replica *r, uint64_t tx_id, const uint32_t *pgno, const uint8_t *pages, uint32_t n,
		     uint32_t page_size, uint32_t db_pages) WS_MUST_CHECK;

/* The tx_id of the last image or transaction applied (0: none since open). */
uint64_t ws_replica_tx(const struct ws_replica *r);

/* WAL frames after which a PASSIVE checkpoint runs (default 1000; 0 keeps it). */
void ws_replica_ckpt_frames(struct ws_replica *r, uint32_t frames);

/* Checkpoint what it can, close, drop the locks. NULL is fine. */
void ws_replica_close(struct ws_replica *r);

/*
 * A replica fed by one query's events (replica_feed.c, docs/EVENTS.md): a
 * Hydrated is a rebuild (whatever was buffered is dropped), Changed slices
 * are buffered (at most pending_bytes_max of pages, 0 = 1 GiB) until the
 * Progressed of their transaction applies them as one, a Progressed with
 * nothing buffered (at or before the Hydrated) is nothing to do.
 */
struct ws_event;
struct ws_replica_feed;
struct ws_replica_feed *ws_replica_feed_new(struct ws_replica *r, uint64_t pending_bytes_max, int *err);
/*
 * One event. 0: taken (buffered or applied); 1: a Faulted: what was
 * buffered is dropped, and the query must be subscribed again for a fresh
 * Hydrated. Errors: ws_replica_image's and ws_replica_apply's, WS_EFORMAT
 * (a Changed before any Hydrated, of another page size, or at or before
 * the last transaction applied), WS_ETOOBIG (a transaction past
 * pending_bytes_max); after an error the host subscribes again too.
 */
int ws_replica_feed(struct ws_replica_feed *f, const struct ws_event *e) WS_MUST_CHECK;
/* Transactions applied, rebuilds, Faulted seen (for logs and tests); the
 * pages and database size of the last transaction applied. */
struct ws_replica_feed_stats {
	uint64_t applied, images, faults;
	uint32_t last_pages, last_db_pages;
};
void ws_replica_feed_stats(const struct ws_replica_feed *f, struct ws_replica_feed_stats *out);
void ws_replica_feed_free(struct ws_replica_feed *f);

#endif
