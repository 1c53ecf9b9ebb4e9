/*
 * The stream's SQLite read transaction: held at all times, handed over
 * between two connections (stream_internal.h); the write lock and walship's own WAL
 * checkpoint under it.
 */
#include "stream_internal.h"

/* ---- SQLite read transaction ------------------------------------------ */

/* Device and inode now at the database's path; -ENOENT when it is gone. */
static int ident_at_path(const struct ws_stream *st, dev_t *dev, ino_t *ino)
{
	struct stat sb;
	if (stat(st->db_path, &sb) != 0)
		return errno == ENOENT ? -ENOENT : -errno;
	*dev = sb.st_dev;
	*ino = sb.st_ino;
	return 0;
}

/* Is the file at the path still the one our connections have open? */
bool ident_same(const struct ws_stream *st)
{
	dev_t dev = 0;
	ino_t ino = 0;
	return !st->txn.have_ident || (ident_at_path(st, &dev, &ino) == 0 && dev == st->txn.db_dev && ino == st->txn.db_ino);
}

static int conn_open(struct ws_stream *st, sqlite3 **out)
{
	sqlite3 *db = NULL;
	dev_t dev0 = 0, dev1 = 0;
	ino_t ino0 = 0, ino1 = 0;
	int rc = ident_at_path(st, &dev0, &ino0);
	if (rc)
		return ws_fail(rc, "tenant %s: database %s: %s", st->tenant, st->db_path,
			       rc == -ENOENT ? "vanished" : strerror(-rc));
	rc = sqlite3_open_v2(st->db_path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		rc = ws_fail(rc == SQLITE_CANTOPEN ? -ENOENT : -EIO, "tenant %s: cannot open database %s: %s",
			     st->tenant, st->db_path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		sqlite3_close(db);
		return rc;
	}
	/* Our connection must never checkpoint or delete the WAL on close: the
	 * application owns those decisions, we only pin read marks. */
	sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
	sqlite3_busy_timeout(db, 5000);
	/* SQLite opened the file between the two looks at the path: when both
	 * saw the same file, that is the file it has open. */
	rc = ident_at_path(st, &dev1, &ino1);
	if (rc || dev0 != dev1 || ino0 != ino1 ||
	    (st->txn.have_ident && (dev1 != st->txn.db_dev || ino1 != st->txn.db_ino))) {
		sqlite3_close(db);
		return ws_fail(WS_EREPLACED, "tenant %s: database %s was replaced at its path", st->tenant,
			       st->db_path);
	}
	if (!st->txn.have_ident) {
		st->txn.have_ident = true;
		st->txn.db_dev = dev1;
		st->txn.db_ino = ino1;
	}
	*out = db;
	return 0;
}

static int conn_begin_read(struct ws_stream *st, int i)
{
	char *msg = NULL;
	int rc;
	WS_ASSERT(i == 0 || i == 1);
	if (!st->txn.conn[i] && (rc = conn_open(st, &st->txn.conn[i])) != 0)
		return rc;
	/* A deferred transaction takes its read mark at the first read and keeps
	 * it until COMMIT. */
	rc = sqlite3_exec(st->txn.conn[i], "BEGIN; PRAGMA schema_version;", NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		rc = ws_fail(-EIO, "tenant %s: cannot begin read transaction on %s: %s", st->tenant,
			     st->db_path, msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		sqlite3_exec(st->txn.conn[i], "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	/* The read mark is fixed now: a test may pause here and write, or
	 * make the begin fail as SQLITE_BUSY would. */
	if ((rc = WS_FAULT("stream.after_begin_read")) != 0) {
		sqlite3_exec(st->txn.conn[i], "ROLLBACK", NULL, NULL, NULL);
		return ws_fail(rc, "tenant %s: injected fault taking a read transaction", st->tenant);
	}
	return 0;
}

void conn_end_read(struct ws_stream *st, int i)
{
	WS_ASSERT(i == 0 || i == 1);
	if (st->txn.conn[i])
		sqlite3_exec(st->txn.conn[i], "COMMIT", NULL, NULL, NULL);
}

/*
 * The journal mode page 1 of the database file names (bytes 18-19), read
 * through connection i's own open file (SQLite opens it with the
 * connection; no lock is needed to read it): DB_WAL, DB_NO_HEADER (empty,
 * shorter than a header, or no SQLite file: SQLite decides), DB_ROLLBACK.
 */
enum db_mode conn_db_mode(struct ws_stream *st, int i)
{
	sqlite3_file *f = NULL;
	sqlite3_int64 size = 0;
	uint8_t h[WS_DB_HDR_MODE_END];
	if (!st->txn.conn[i] || sqlite3_file_control(st->txn.conn[i], "main", SQLITE_FCNTL_FILE_POINTER, &f) != SQLITE_OK ||
	    !f || !f->pMethods || f->pMethods->xFileSize(f, &size) != SQLITE_OK || size < WS_DB_HDR_SIZE ||
	    f->pMethods->xRead(f, h, sizeof(h), 0) != SQLITE_OK || !ws_db_hdr_is_sqlite(h, sizeof(h)))
		return DB_NO_HEADER;
	return ws_db_hdr_wal_mode(h) ? DB_WAL : DB_ROLLBACK;
}

static int not_wal(struct ws_stream *st)
{
	return ws_fail(WS_ECONFIG, "tenant %s: %s is not in WAL mode (PRAGMA journal_mode=WAL); no lock is held on it "
		       "meanwhile", st->tenant, st->db_path);
}

/*
 * Make sure a read transaction is held; taking a fresh one breaks
 * continuity. Never on a database in rollback-journal mode: there a read
 * transaction is a SHARED lock on the database file, which would keep the
 * application from ever writing (or switching it to WAL mode) while held.
 */
int hold_read(struct ws_stream *st)
{
	int rc;
	if (st->txn.held >= 0)
		return 0;
	if (!st->txn.conn[0] && (rc = conn_open(st, &st->txn.conn[0])) != 0)
		return rc;
	if (conn_db_mode(st, 0) == DB_ROLLBACK)
		return not_wal(st);
	rc = conn_begin_read(st, 0);
	if (rc)
		return rc;
	/* Switched between the look and the lock. */
	if (conn_db_mode(st, 0) == DB_ROLLBACK) {
		conn_end_read(st, 0);
		return not_wal(st);
	}
	st->txn.held = 0;
	st->txn.continuous = false;
	return 0;
}

/* Take the other connection's read transaction, then release the old one. */
void handover_read(struct ws_stream *st)
{
	int next = st->txn.held < 0 ? 0 : 1 - st->txn.held;
	if (conn_begin_read(st, next) != 0) {
		/* Keep the old one: still gap-free, just an older mark. */
		ws_warn("%s", ws_errmsg());
		return;
	}
	if (st->txn.held >= 0)
		conn_end_read(st, st->txn.held);
	st->txn.held = next;
}

/*
 * Let the WAL restart once everything in it is shipped. Our read mark would
 * otherwise keep every writer's checkpoint from ever completing, and the WAL
 * would grow without bound while we run (Litestream has the same shape).
 *
 * When the WAL has grown past wal_checkpoint_bytes, tail_frames first takes
 * the database's write lock on the spare connection (briefly waiting for the
 * application's writer), so nothing can commit while it ships the rest of
 * the WAL. Then, with everything shipped, wal_checkpoint_locked drops the old
 * read mark, runs a PASSIVE checkpoint and takes a fresh read mark (read mark
 * 0 when fully backfilled, which does not block a restart) before letting
 * writers go. The spare connection's own read mark covers the whole
 * sequence, so there is no gap: a restart can only come after a frame that
 * is already durable at the sink.
 */
/* Poll every millisecond: SQLite's default handler backs off to 100 ms
 * sleeps and keeps missing a busy writer's short gaps between commits. */
static int busy_poll_1ms(void *arg, int count)
{
	(void)arg;
	if (count >= WRITE_LOCK_WAIT_MS)
		return 0;
	ws_sleep_ms(1);
	return 1;
}

bool write_lock_try(struct ws_stream *st)
{
	int spare = st->txn.held < 0 ? 1 : 1 - st->txn.held;
	int rc;
	if (!st->txn.conn[spare] && conn_open(st, &st->txn.conn[spare]) != 0)
		return false;
	sqlite3_busy_handler(st->txn.conn[spare], busy_poll_1ms, NULL);
	rc = sqlite3_exec(st->txn.conn[spare], "BEGIN IMMEDIATE", NULL, NULL, NULL);
	sqlite3_busy_timeout(st->txn.conn[spare], 5000);
	if (rc != SQLITE_OK) {
		ws_debug("tenant %s: write lock busy; WAL checkpoint deferred", st->tenant);
		return false;
	}
	st->txn.locker = spare;
	return true;
}

void write_lock_release(struct ws_stream *st)
{
	if (st->txn.locker >= 0 && st->txn.conn[st->txn.locker] && st->txn.locker != st->txn.held)
		sqlite3_exec(st->txn.conn[st->txn.locker], "ROLLBACK", NULL, NULL, NULL);
	st->txn.locker = -1;
}

void wal_checkpoint_locked(struct ws_stream *st)
{
	int log_frames = 0, ckpt_frames = 0;
	/* Our read mark on one connection, the write lock on the other. */
	WS_ASSERT(st->txn.held >= 0 && st->txn.locker == 1 - st->txn.held);
	conn_end_read(st, st->txn.held);
	sqlite3_wal_checkpoint_v2(st->txn.conn[st->txn.held], NULL, SQLITE_CHECKPOINT_PASSIVE, &log_frames,
				  &ckpt_frames);
	if (conn_begin_read(st, st->txn.held) != 0) {
		/* Fall back to a read transaction on the spare. Its write
		 * transaction must end first, so for a moment no connection of
		 * ours holds a read mark: a writer may restart the WAL, commit
		 * and checkpoint it away in that moment, and a next generation
		 * would no longer be proven to follow what we shipped. The next
		 * call re-bases (invariant 10). */
		int spare = 1 - st->txn.held;
		ws_warn("%s", ws_errmsg());
		sqlite3_exec(st->txn.conn[spare], "ROLLBACK", NULL, NULL, NULL);
		st->txn.locker = -1;
		(void)WS_FAULT("stream.wal_checkpoint_gap");
		if (sqlite3_exec(st->txn.conn[spare], "BEGIN; PRAGMA schema_version;", NULL, NULL, NULL) == SQLITE_OK) {
			st->txn.held = spare;
		} else {
			sqlite3_exec(st->txn.conn[spare], "ROLLBACK", NULL, NULL, NULL);
			st->txn.held = -1; /* the next call takes a fresh one */
		}
		st->txn.continuous = false;
		return;
	}
	st->wal_checkpoints++;
	ws_debug("tenant %s: WAL checkpoint: %d of %d frames backfilled", st->tenant, ckpt_frames, log_frames);
}

