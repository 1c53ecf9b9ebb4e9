/*
 * One tenant stream and tail_frames.
 *
 * WAL checkpoints (docs/DESIGN.md of this repo, "WAL checkpoints"): the
 * stream holds a SQLite read transaction on the tenant's database at all
 * times while it is open, handing it over between two connections so there
 * is never a moment without one (the new one is taken before the old one is
 * let go). While a reader holds a WAL read mark, no checkpoint can copy
 * frames past that mark into the database and no writer can restart the
 * WAL; a reader on read mark 0 only exists when every frame was already
 * backfilled, which the handover proves were all shipped. So while the
 * stream stays open, a WAL generation can end only at a frame that is
 * already durable at the sink, and the next generation's frames continue
 * the stream (manifest kind NEXT_GEN) with no gap.
 *
 * A watermark whose generation is still the live WAL's (same salts, and the
 * frame it stops at still carries the checksum it recorded) is continued
 * from, whoever wrote it. Otherwise, when continuity cannot be proven (first
 * contact, the process restarted, another owner's watermark, a watermark
 * without salts, no WAL on either side), the stream re-bases:
 * it uploads the raw database file read under the read transaction plus
 * every committed frame of the live WAL generation (kind REBASE). Pages a
 * checkpoint may be writing into the file during that read all come from
 * frames at or below our read mark, which the frames overlay, so the image
 * is exact at the last shipped commit.
 *
 * tail_frames, in steps (each a function below, "step_*"), each effect
 * durable before the next:
 *   1 read the live WAL generation;      2 decide continuity (or Fenced, Empty);
 *   3 fence: read the watermark before any upload (a stale owner writes
 *     nothing);                          4 scan and check the WAL, uploading
 *     batches;                           5 a re-base's snapshot;
 *   6 settle: all durable, the WAL and the file unmoved, what to name;
 *   7 write the manifest;                8 write the watermark by CAS, hand
 *     the read mark over;                9 report.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core_internal.h"
#include "pipe.h"
#include "ws_assert.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_hash.h"
#include "ws_logging.h"
#include "ws_reader.h"
#include "ws_wal.h"

#define BATCH_BYTES_DEFAULT ((size_t)4 << 20)
#define BATCH_BYTES_MIN ((size_t)WS_WAL_PAGE_MAX + WS_WAL_FRAME_HDR_SIZE)
/* Batches one call names at most (a longer backlog is read in larger
 * batches, scan_checked); a snapshot names as many parts as the database
 * needs, up to what one manifest holds. The per-call arrays start small
 * and grow to these. */
#define MAX_REFS 4096u
#define MAX_SNAPS (WS_MANIFEST_ITEMS_MAX - MAX_REFS)
#define MAX_PARTS WS_MANIFEST_ITEMS_MAX
#define WORK_INITIAL 64u
#define WAL_CKPT_DEFAULT ((uint64_t)4 << 20)
/* A tail whose frames fit one batch this small sends it inside its manifest. */
#define INLINE_DEFAULT ((uint64_t)1 << 20)
#define INLINE_MAX ((uint64_t)16 << 20)
#define OWN_SMALL_BYTES ((size_t)128 << 10) /* a stream opened alone: header/probe reads, >= one 64 KiB frame */
#define WRITE_LOCK_WAIT_MS 200

struct ws_stream {
	struct ws_sink *sink;
	char tenant[WS_TENANT_MAX];
	char *db_path;
	char *wal_path;
	uint64_t epoch, pg;
	enum ws_policy policy;
	size_t batch_bytes_max;

	/* Read-transaction handover (see top of file). */
	sqlite3 *conn[2];
	int held;             /* index of the connection holding a read txn, -1 none */
	bool continuous;      /* held without a gap since our own last watermark write */
	uint64_t own_seq;     /* that write's sequence (0: none yet) ... */
	uint8_t own_msha[WS_SHA256_LEN]; /* ... and the SHA-256 of the manifest it named */
	uint64_t pend_seq;    /* a watermark write whose outcome is not known (0: none) ... */
	uint8_t pend_msha[WS_SHA256_LEN];
	uint64_t pend_mono_ms;
	/* The database file both connections have open (invariant 9): set when
	 * the first of them opens, checked for every later one and at the
	 * start and end of every tail. A file replaced at its path is another
	 * database: its life starts with a re-base, never a continuation. */
	bool have_ident;
	dev_t db_dev;
	ino_t db_ino;
	int locker;           /* connection holding the write lock this call, -1 none */

	struct ws_reader *reader;
	int wal_fd, wal_slot;
	bool own_reader;       /* reader, pipe and work are this stream's own (no engine) */
	size_t small_off;      /* reader buffer offset for header and probe reads */
	size_t small_bytes;
	size_t ring_off;       /* reader buffer offset of the pipe's slots */
	struct ws_pipe *pipe;  /* where batches and snapshot parts go */
	struct ws_pipe own_pipe;
	struct ws_tail_work *work;
	struct ws_tail_work own_work;
	uint32_t batch_frames_max;
	uint64_t inline_max;         /* a tail's frames up to this many bytes go inside its manifest (0: never) */

	bool wm_loaded;       /* wm/wm_etag reflect the sink (have_wm says if one exists) */
	bool have_wm;
	struct ws_fmt_watermark wm;
	struct ws_etag wm_etag;
	int64_t opened_ms;
	int64_t call_wall_ms;        /* when this call began: wall clock ... */
	uint64_t call_mono_ms;       /* ... and monotonic */
	uint64_t own_mono_ms;        /* monotonic time of our last watermark's time_ms (0: none) */

	struct ws_fmt_objref *batches;
	struct ws_fmt_objref *snaps;
	struct ws_part *parts;
	uint32_t batch_count, snap_count, part_count;
	uint32_t part_base;          /* ring index of parts[0] in this call */
	uint64_t call_throttle;      /* throttle retries of this call's parts */
	char stamp_key[WS_KEY_MAX];  /* a manifest whose time_ms is known: stamp_ms (stamp_floor) */
	int64_t stamp_ms;
	char upload_why_key[WS_KEY_MAX]; /* this attempt's first failed upload with a detail kept (pipe.h why) */
	char upload_why[1024];
	uint64_t frames_shed;        /* this call */
	bool shed_stop;              /* shed: the ring was full, reading stopped */
	bool shed_nowait;            /* this call sheds at a full ring */
	bool drain;                  /* never shed (ws_stream_set_drain) */
	bool lock_call;              /* this call holds the database's write lock */
	bool last_ok;                /* the last call shipped what it read (the sink answers) */
	struct ws_stream_call call;
	uint64_t high_water;
	uint64_t throttle_at_start;   /* store's throttle_retries when this call began */
	uint64_t wal_checkpoint_bytes;
	uint64_t wal_checkpoints;
	/* The work bound (ws_stream_set_tail_bound). */
	uint32_t tail_ms, key_ms;
	uint64_t wm_put_mono_ms;     /* when our last watermark write finished (0: none) */
	uint64_t tail_stop_ms;       /* this call: stop publishing at this mono time (0: never) */
	bool early_stop;             /* this call stopped there */
	bool past_index;             /* this call left frames of its generation past the wal-index */
	/* This call's batch held in its ring slot for the manifest (inline),
	 * not sent on its own: the slot is not reserved again before the
	 * manifest is written (no reserve follows a scan but a snapshot's,
	 * and a re-base holds nothing). */
	bool inl_held;
	uint32_t inl_idx;
	/* The manifest the watermark wm carries (wm.carried_len; docs/FORMAT.md
	 * "Watermark"): its bytes, from this call's fencing read (none held
	 * between calls). carry_own: this stream wrote it and it is stored
	 * nowhere else, so the next tail may merge what it ships into it,
	 * replacing it; a carried manifest another writer left is stored
	 * before anything links to it. */
	enum ws_carry carry_mode;
	struct ws_buf carry;
	struct ws_buf carry_next;    /* this call's carried manifest, until its watermark lands */
	bool carry_own;
};

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
static bool ident_same(const struct ws_stream *st)
{
	dev_t dev = 0;
	ino_t ino = 0;
	return !st->have_ident || (ident_at_path(st, &dev, &ino) == 0 && dev == st->db_dev && ino == st->db_ino);
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
	    (st->have_ident && (dev1 != st->db_dev || ino1 != st->db_ino))) {
		sqlite3_close(db);
		return ws_fail(WS_EREPLACED, "tenant %s: database %s was replaced at its path", st->tenant,
			       st->db_path);
	}
	if (!st->have_ident) {
		st->have_ident = true;
		st->db_dev = dev1;
		st->db_ino = ino1;
	}
	*out = db;
	return 0;
}

static int conn_begin_read(struct ws_stream *st, int i)
{
	char *msg = NULL;
	int rc;
	if (!st->conn[i] && (rc = conn_open(st, &st->conn[i])) != 0)
		return rc;
	/* A deferred transaction takes its read mark at the first read and keeps
	 * it until COMMIT. */
	rc = sqlite3_exec(st->conn[i], "BEGIN; PRAGMA schema_version;", NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		rc = ws_fail(-EIO, "tenant %s: cannot begin read transaction on %s: %s", st->tenant,
			     st->db_path, msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		sqlite3_exec(st->conn[i], "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	/* The read mark is fixed now: a test may pause here and write, or
	 * make the begin fail as SQLITE_BUSY would. */
	if ((rc = WS_FAULT("stream.after_begin_read")) != 0) {
		sqlite3_exec(st->conn[i], "ROLLBACK", NULL, NULL, NULL);
		return ws_fail(rc, "tenant %s: injected fault taking a read transaction", st->tenant);
	}
	return 0;
}

static void conn_end_read(struct ws_stream *st, int i)
{
	if (st->conn[i])
		sqlite3_exec(st->conn[i], "COMMIT", NULL, NULL, NULL);
}

/*
 * The journal mode page 1 of the database file names (bytes 18-19), read
 * through connection i's own open file (SQLite opens it with the
 * connection; no lock is needed to read it): DB_WAL, DB_NO_HEADER (empty,
 * shorter than a header, or no SQLite file: SQLite decides), DB_ROLLBACK.
 */
enum db_mode { DB_NO_HEADER, DB_WAL, DB_ROLLBACK };
static enum db_mode conn_db_mode(struct ws_stream *st, int i)
{
	sqlite3_file *f = NULL;
	sqlite3_int64 size = 0;
	uint8_t h[20];
	if (!st->conn[i] || sqlite3_file_control(st->conn[i], "main", SQLITE_FCNTL_FILE_POINTER, &f) != SQLITE_OK ||
	    !f || !f->pMethods || f->pMethods->xFileSize(f, &size) != SQLITE_OK || size < 100 ||
	    f->pMethods->xRead(f, h, sizeof(h), 0) != SQLITE_OK || memcmp(h, "SQLite format 3", 16) != 0)
		return DB_NO_HEADER;
	return h[18] == 2 && h[19] == 2 ? DB_WAL : DB_ROLLBACK;
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
static int hold_read(struct ws_stream *st)
{
	int rc;
	if (st->held >= 0)
		return 0;
	if (!st->conn[0] && (rc = conn_open(st, &st->conn[0])) != 0)
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
	st->held = 0;
	st->continuous = false;
	return 0;
}

/* Take the other connection's read transaction, then release the old one. */
static void handover_read(struct ws_stream *st)
{
	int next = st->held < 0 ? 0 : 1 - st->held;
	if (conn_begin_read(st, next) != 0) {
		/* Keep the old one: still gap-free, just an older mark. */
		ws_warn("%s", ws_errmsg());
		return;
	}
	if (st->held >= 0)
		conn_end_read(st, st->held);
	st->held = next;
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

static bool write_lock_try(struct ws_stream *st)
{
	int spare = st->held < 0 ? 1 : 1 - st->held;
	int rc;
	if (!st->conn[spare] && conn_open(st, &st->conn[spare]) != 0)
		return false;
	sqlite3_busy_handler(st->conn[spare], busy_poll_1ms, NULL);
	rc = sqlite3_exec(st->conn[spare], "BEGIN IMMEDIATE", NULL, NULL, NULL);
	sqlite3_busy_timeout(st->conn[spare], 5000);
	if (rc != SQLITE_OK) {
		ws_debug("tenant %s: write lock busy; WAL checkpoint deferred", st->tenant);
		return false;
	}
	st->locker = spare;
	return true;
}

static void write_lock_release(struct ws_stream *st)
{
	if (st->locker >= 0 && st->conn[st->locker] && st->locker != st->held)
		sqlite3_exec(st->conn[st->locker], "ROLLBACK", NULL, NULL, NULL);
	st->locker = -1;
}

static void wal_checkpoint_locked(struct ws_stream *st)
{
	int log_frames = 0, ckpt_frames = 0;
	/* Our read mark on one connection, the write lock on the other. */
	WS_ASSERT(st->held >= 0 && st->locker == 1 - st->held);
	conn_end_read(st, st->held);
	sqlite3_wal_checkpoint_v2(st->conn[st->held], NULL, SQLITE_CHECKPOINT_PASSIVE, &log_frames,
				  &ckpt_frames);
	if (conn_begin_read(st, st->held) != 0) {
		/* Fall back to a read transaction on the spare. Its write
		 * transaction must end first, so for a moment no connection of
		 * ours holds a read mark: a writer may restart the WAL, commit
		 * and checkpoint it away in that moment, and a next generation
		 * would no longer be proven to follow what we shipped. The next
		 * call re-bases (invariant 10). */
		int spare = 1 - st->held;
		ws_warn("%s", ws_errmsg());
		sqlite3_exec(st->conn[spare], "ROLLBACK", NULL, NULL, NULL);
		st->locker = -1;
		(void)WS_FAULT("stream.wal_checkpoint_gap");
		if (sqlite3_exec(st->conn[spare], "BEGIN; PRAGMA schema_version;", NULL, NULL, NULL) == SQLITE_OK) {
			st->held = spare;
		} else {
			sqlite3_exec(st->conn[spare], "ROLLBACK", NULL, NULL, NULL);
			st->held = -1; /* the next call takes a fresh one */
		}
		st->continuous = false;
		return;
	}
	st->wal_checkpoints++;
	ws_debug("tenant %s: WAL checkpoint: %d of %d frames backfilled", st->tenant, ckpt_frames, log_frames);
}

/* ---- files ------------------------------------------------------------ */

static void file_close(struct ws_stream *st, int *fd, int *slot)
{
	if (*slot >= 0)
		ws_reader_detach(st->reader, *slot);
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	*slot = -1;
}

/* (Re)open path if it is not open or was replaced; -ENOENT leaves it closed. */
static int file_refresh(struct ws_stream *st, const char *path, int *fd, int *slot)
{
	struct stat a, b;
	int nfd;
	if (*fd >= 0 && stat(path, &a) == 0 && fstat(*fd, &b) == 0 && a.st_ino == b.st_ino &&
	    a.st_dev == b.st_dev)
		return 0;
	file_close(st, fd, slot);
	nfd = open(path, O_RDONLY | O_CLOEXEC);
	if (nfd < 0)
		return errno == ENOENT ? -ENOENT : ws_fail(-errno, "tenant %s: open %s", st->tenant, path);
	*fd = nfd;
	*slot = ws_reader_attach(st->reader, nfd);
	if (*slot < 0) {
		int rc = *slot;
		*slot = -1;
		file_close(st, fd, slot);
		return ws_fail(rc, "tenant %s: cannot register %s with the reader", st->tenant, path);
	}
	return 0;
}

static uint64_t file_size(int fd)
{
	struct stat sb;
	return fd >= 0 && fstat(fd, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

/*
 * The database file is read only through SQLite's own open file (its VFS),
 * never through a descriptor of ours: closing any descriptor of a file drops
 * every POSIX lock this process holds on it, SQLite's included, and a host
 * process that also writes the database would then lose its locks and, on
 * its next close, checkpoint and delete a WAL that is still in use. The WAL
 * file has no POSIX locks, so it is read with io_uring through our own fd.
 */
static sqlite3_file *db_file(struct ws_stream *st)
{
	sqlite3_file *f = NULL;
	if (st->held < 0 ||
	    sqlite3_file_control(st->conn[st->held], "main", SQLITE_FCNTL_FILE_POINTER, &f) != SQLITE_OK ||
	    !f || !f->pMethods)
		return NULL;
	return f;
}

static int db_size(struct ws_stream *st, uint64_t *size)
{
	sqlite3_file *f = db_file(st);
	sqlite3_int64 n = 0;
	if (!f || f->pMethods->xFileSize(f, &n) != SQLITE_OK || n < 0)
		return ws_fail(-EIO, "tenant %s: cannot size %s", st->tenant, st->db_path);
	*size = (uint64_t)n;
	return 0;
}

/* Read up to len bytes at off into dst; returns bytes read. */
static ssize_t db_read(struct ws_stream *st, uint64_t off, size_t len, uint8_t *dst)
{
	sqlite3_file *f = db_file(st);
	uint64_t size;
	int rc = db_size(st, &size);
	if (rc)
		return rc;
	if (off >= size)
		return 0;
	if (len > size - off)
		len = (size_t)(size - off);
	if (len > INT32_MAX)
		return -EINVAL;
	rc = f->pMethods->xRead(f, dst, (int)len, (sqlite3_int64)off);
	if (rc != SQLITE_OK)
		return ws_fail(-EIO, "tenant %s: read %s at %" PRIu64 ": SQLite I/O error %d", st->tenant,
			       st->db_path, off, rc);
	return (ssize_t)len;
}

/* ---- open / close ----------------------------------------------------- */

int ws_tail_work_init(struct ws_tail_work *w)
{
	memset(w, 0, sizeof(*w));
	ws_buf_init(&w->scratch, 64u << 20);
	w->batches = calloc(WORK_INITIAL, sizeof(*w->batches));
	w->snaps = calloc(WORK_INITIAL, sizeof(*w->snaps));
	w->parts = calloc(WORK_INITIAL, sizeof(*w->parts));
	if (!w->batches || !w->snaps || !w->parts) {
		ws_tail_work_free(w);
		return -ENOMEM;
	}
	w->batches_cap = w->snaps_cap = w->parts_cap = WORK_INITIAL;
	return 0;
}

/* Room for entry n of an array of *cap elements (doubled, up to max). */
static int grow_to(void **arr, uint32_t *cap, uint32_t n, uint32_t max, size_t elem)
{
	uint32_t ncap = *cap;
	void *p;
	if (n < *cap)
		return 0;
	while (ncap <= n && ncap < max)
		ncap = ncap * 2 < max ? ncap * 2 : max;
	if (n >= ncap)
		return WS_ETOOBIG;
	p = realloc(*arr, (size_t)ncap * elem);
	if (!p)
		return -ENOMEM;
	memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
	*arr = p;
	*cap = ncap;
	return 0;
}

void ws_tail_work_free(struct ws_tail_work *w)
{
	ws_buf_free(&w->scratch);
	free(w->batches);
	free(w->snaps);
	free(w->parts);
	memset(w, 0, sizeof(*w));
}

static void use_work(struct ws_stream *st, struct ws_tail_work *w)
{
	st->work = w;
	st->batches = w->batches;
	st->snaps = w->snaps;
	st->parts = w->parts;
}

/*
 * Room for batch, snapshot part or part entry n of this call. The arrays
 * are the shard's, shared by its streams one call at a time: a stream
 * takes their current addresses at the start of each call and after each
 * growth.
 */
static int room_batch(struct ws_stream *st, uint32_t n)
{
	int rc = grow_to((void **)&st->work->batches, &st->work->batches_cap, n, MAX_REFS, sizeof(*st->batches));
	use_work(st, st->work);
	return rc;
}

static int room_snap(struct ws_stream *st, uint32_t n)
{
	int rc = grow_to((void **)&st->work->snaps, &st->work->snaps_cap, n, MAX_SNAPS, sizeof(*st->snaps));
	use_work(st, st->work);
	return rc;
}

static int room_part(struct ws_stream *st, uint32_t n)
{
	int rc = grow_to((void **)&st->work->parts, &st->work->parts_cap, n, MAX_PARTS, sizeof(*st->parts));
	use_work(st, st->work);
	return rc;
}

/* Validate the config and make the stream; no reader, pipe or SQLite yet. */
static struct ws_stream *stream_new(struct ws_sink *sink, const struct ws_stream_config *cfg, int *err)
{
	struct ws_stream *st = NULL;
	int rc;

	if (!sink || !cfg || !cfg->db_path || !ws_tenant_name_valid(cfg->tenant)) {
		rc = ws_fail(WS_ECONFIG, "tenant name '%s' invalid: use 1..127 of [A-Za-z0-9._-], not "
			     "starting with '.' or '_', not \"checkpoints\"", cfg && cfg->tenant ? cfg->tenant : "");
		goto fail;
	}
	/* Owner tokens are 0..2^63-1, as the CLI takes them and JSON prints them. */
	if (cfg->epoch > INT64_MAX || cfg->pointer_generation > INT64_MAX) {
		rc = ws_fail(WS_ECONFIG, "tenant %s: epoch %" PRIu64 " / pointer generation %" PRIu64 ": owner "
			     "tokens are 0..9223372036854775807", cfg->tenant, cfg->epoch, cfg->pointer_generation);
		goto fail;
	}
	if (cfg->batch_bytes_max && cfg->batch_bytes_max < BATCH_BYTES_MIN) {
		rc = ws_fail(WS_ECONFIG, "tenant %s: batch_bytes_max %zu is below one 64 KiB frame (%zu)",
			     cfg->tenant, cfg->batch_bytes_max, BATCH_BYTES_MIN);
		goto fail;
	}
	if (cfg->policy != WS_POLICY_BLOCK && cfg->policy != WS_POLICY_THROTTLE && cfg->policy != WS_POLICY_SHED) {
		rc = ws_fail(WS_ECONFIG, "tenant %s: unknown backpressure policy %d", cfg->tenant, (int)cfg->policy);
		goto fail;
	}
	st = calloc(1, sizeof(*st));
	if (!st) {
		rc = -ENOMEM;
		goto fail;
	}
	st->sink = sink;
	snprintf(st->tenant, sizeof(st->tenant), "%s", cfg->tenant);
	st->epoch = cfg->epoch;
	st->pg = cfg->pointer_generation;
	st->policy = cfg->policy;
	st->batch_bytes_max = cfg->batch_bytes_max ? cfg->batch_bytes_max : BATCH_BYTES_DEFAULT;
	st->batch_frames_max = cfg->batch_frames_max;
	st->held = -1;
	st->locker = -1;
	st->wal_checkpoint_bytes = cfg->wal_checkpoint_bytes ? cfg->wal_checkpoint_bytes : WAL_CKPT_DEFAULT;
	st->inline_max = cfg->inline_batch_bytes_max == UINT64_MAX ? 0
			 : cfg->inline_batch_bytes_max ? cfg->inline_batch_bytes_max : INLINE_DEFAULT;
	/* A manifest is encoded whole in memory and read whole by every reader
	 * of the chain: what it carries stays small. */
	if (st->inline_max > INLINE_MAX)
		st->inline_max = INLINE_MAX;
	st->carry_mode = cfg->carry;
	if (st->carry_mode != WS_CARRY_PRESSED && st->carry_mode != WS_CARRY_ALWAYS &&
	    st->carry_mode != WS_CARRY_NEVER) {
		rc = ws_fail(WS_ECONFIG, "tenant %s: carry %d is not one of pressed, always, never", cfg->tenant,
			     (int)cfg->carry);
		goto fail;
	}
	ws_buf_init(&st->carry, WS_WM_BYTES_MAX);
	ws_buf_init(&st->carry_next, WS_WM_BYTES_MAX);
	st->wal_fd = st->wal_slot = -1;
	st->opened_ms = ws_wall_ms();
	if (asprintf(&st->db_path, "%s", cfg->db_path) < 0 ||
	    asprintf(&st->wal_path, "%s-wal", cfg->db_path) < 0) {
		st->db_path = st->wal_path = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	{
		struct stat sb;
		if (stat(st->db_path, &sb) != 0) {
			rc = ws_fail(-ENOENT, "tenant %s: database %s does not exist", st->tenant, st->db_path);
			goto fail;
		}
		/* A device (/dev/zero, a disk named by a typo) or a FIFO is no
		 * database: shipped as one it "succeeds" with nothing in it. */
		if (!S_ISREG(sb.st_mode)) {
			rc = ws_fail(WS_ECONFIG, "tenant %s: database %s is not a regular file", st->tenant,
				     st->db_path);
			goto fail;
		}
	}
	*err = 0;
	return st;
fail:
	ws_stream_close(st);
	*err = rc;
	return NULL;
}

struct ws_stream *ws_stream_open(struct ws_sink *sink, const struct ws_stream_config *cfg, int *err)
{
	struct ws_stream *st = stream_new(sink, cfg, err);
	int rc;
	if (!st)
		return NULL;
	st->own_reader = true;
	rc = ws_tail_work_init(&st->own_work);
	if (rc)
		goto fail;
	use_work(st, &st->own_work);
	st->reader = ws_reader_open(st->batch_bytes_max + OWN_SMALL_BYTES, 2, cfg->reader_flags, &rc);
	if (!st->reader)
		goto fail;
	/* One slot, uploaded on our thread at publish, and header reads after
	 * it: a batch held for its manifest (inline) outlives the reads that
	 * check the WAL again before the manifest is written. */
	st->small_off = st->batch_bytes_max;
	st->small_bytes = OWN_SMALL_BYTES;
	st->ring_off = 0;
	rc = ws_pipe_init(&st->own_pipe, ws_reader_buf(st->reader), st->batch_bytes_max, 1, sink->store, 1, false,
			  false);
	if (rc)
		goto fail;
	st->pipe = &st->own_pipe;
	*err = 0;
	return st;
fail:
	ws_stream_close(st);
	*err = rc;
	return NULL;
}

struct ws_stream *ws_stream_open_shared(struct ws_sink *sink, const struct ws_stream_config *cfg,
					const struct ws_stream_shared *sh, int *err)
{
	struct ws_stream *st = stream_new(sink, cfg, err);
	if (!st)
		return NULL;
	st->reader = sh->reader;
	st->small_off = sh->small_off;
	st->small_bytes = sh->small_bytes;
	st->ring_off = sh->ring_off;
	st->pipe = sh->pipe;
	st->batch_bytes_max = sh->pipe->ring.slot_bytes;
	use_work(st, sh->work);
	return st;
}

/* The carried manifest's bytes go; the next call's fencing read brings
 * them back with the watermark. */
static void carry_drop(struct ws_stream *st) { ws_buf_free(&st->carry); }

/* The manifest watermark w carries (or none), for this call: moved to the
 * front of the buffer w was read into (raw), which becomes carry. */
static void carry_take(struct ws_stream *st, struct ws_buf *raw, const struct ws_fmt_watermark *w)
{
	carry_drop(st);
	if (!w->carried) {
		ws_buf_free(raw);
		return;
	}
	memmove(raw->data, w->carried, (size_t)w->carried_len);
	raw->len = (size_t)w->carried_len;
	st->carry = *raw;
	ws_buf_init(raw, WS_WM_BYTES_MAX);
}

void ws_stream_park(struct ws_stream *st)
{
	for (int i = 0; i < 2; i++) {
		if (st->conn[i]) {
			conn_end_read(st, i);
			sqlite3_close(st->conn[i]);
			st->conn[i] = NULL;
		}
	}
	st->held = -1;
	st->continuous = false;
	st->have_ident = false;
	if (st->reader)
		file_close(st, &st->wal_fd, &st->wal_slot);
	carry_drop(st);
}

bool ws_stream_parked(const struct ws_stream *st) { return st->held < 0 && !st->conn[0] && !st->conn[1]; }

void ws_stream_close(struct ws_stream *st)
{
	if (!st)
		return;
	ws_stream_park(st);
	if (st->own_reader) {
		if (st->pipe)
			ws_pipe_destroy(st->pipe);
		ws_reader_close(st->reader);
		ws_tail_work_free(&st->own_work);
	}
	carry_drop(st);
	ws_buf_free(&st->carry_next);
	free(st->db_path);
	free(st->wal_path);
	free(st);
}

void ws_stream_last_call(const struct ws_stream *st, struct ws_stream_call *out) { *out = st->call; }
uint64_t ws_stream_wm_last_frame(const struct ws_stream *st) { return st->have_wm ? st->wm.last_frame : 0; }

/* The public flags are io's (io cannot see walship.h). */
_Static_assert(WS_READ_FORCE_PREAD == WS_READER_FORCE_PREAD && WS_READ_SQPOLL == WS_READER_SQPOLL,
	       "reader flags in walship.h and ws_reader.h differ");

/* ---- helpers ---------------------------------------------------------- */

static void fill_rpo(const struct ws_stream *st, struct ws_rpo_status *rpo)
{
	int64_t now = ws_wall_ms();
	int64_t since = st->have_wm ? st->wm.time_ms : st->opened_ms;
	rpo->has_watermark = st->have_wm;
	/* Our own watermark's age by the monotonic clock: a wall clock
	 * stepped back would read it as 0 for as long as the step. */
	if (st->have_wm && st->own_mono_ms && st->wm.seq == st->own_seq &&
	    memcmp(st->wm.manifest_sha, st->own_msha, WS_SHA256_LEN) == 0) {
		uint64_t mono = ws_mono_ms();
		rpo->watermark_age_ms = mono > st->own_mono_ms ? mono - st->own_mono_ms : 0;
		return;
	}
	rpo->watermark_age_ms = now > since ? (uint64_t)(now - since) : 0;
}

int64_t ws_stream_wm_time_ms(const struct ws_stream *st) { return st->have_wm ? st->wm.time_ms : 0; }

/* Throttle retries of this call: the sink's own requests (manifest,
 * watermark, reads) plus the parts, when an uploader's store sent them. */
static uint64_t call_throttle(const struct ws_stream *st)
{
	uint64_t own = __atomic_load_n(&st->sink->store->stats.throttle_retries, __ATOMIC_RELAXED) -
		       st->throttle_at_start;
	return own + (st->pipe->store == st->sink->store ? 0 : st->call_throttle);
}

static void fill_bp(const struct ws_stream *st, struct ws_backpressure_report *bp)
{
	memset(bp, 0, sizeof(*bp));
	bp->policy = st->policy;
	bp->spill_high_water = st->high_water;
	bp->throttle_retries = call_throttle(st);
	bp->frames_shed = st->frames_shed;
}

/*
 * Read the watermark. continuous (our read mark held since our own last
 * watermark write) stays only while the watermark is still that write: one
 * another writer put there (an owner with our very tokens, a restart that
 * overlapped us) is no continuation of what we shipped, and a new
 * generation must not be chained onto it. An unreadable watermark leaves
 * the cache as it was, marked for a re-read.
 */
static int refresh_wm(struct ws_stream *st)
{
	struct ws_fmt_watermark w;
	struct ws_etag etag;
	/* The watermark lands in carry_next: a manifest it carries is kept. */
	int rc = ws_wm_load_keep(st->sink->store, st->tenant, &w, &etag, &st->carry_next);
	/* Still ours to merge into only if it is the very watermark we wrote
	 * last (a fencing read finds it so); anything else read back is
	 * stored before it is linked to. */
	st->carry_own = st->carry_own && rc == 0 && w.carried_len && st->own_seq == w.seq &&
			memcmp(w.manifest_sha, st->own_msha, WS_SHA256_LEN) == 0;
	if (rc == 0)
		carry_take(st, &st->carry_next, &w);
	else
		ws_buf_free(&st->carry_next);
	w.carried = NULL;
	if (rc == WS_ENOTFOUND) {
		carry_drop(st);
		st->have_wm = false;
		memset(&st->wm_etag, 0, sizeof(st->wm_etag));
		st->wm_loaded = true;
		st->continuous = false;
		return 0;
	}
	if (rc) {
		/* Nothing learned: the next decision reads it again first. */
		st->wm_loaded = false;
		return rc;
	}
	/* A write of ours whose reply was lost (an ambiguous failure) that
	 * landed after all: it is our last write. */
	if (st->pend_seq && w.seq == st->pend_seq && memcmp(w.manifest_sha, st->pend_msha, WS_SHA256_LEN) == 0) {
		st->own_seq = st->pend_seq;
		memcpy(st->own_msha, st->pend_msha, WS_SHA256_LEN);
		st->own_mono_ms = st->pend_mono_ms;
	}
	st->pend_seq = 0;
	if (!st->own_seq || w.seq != st->own_seq || memcmp(w.manifest_sha, st->own_msha, WS_SHA256_LEN) != 0)
		st->continuous = false;
	st->wm = w;
	st->wm_etag = etag;
	st->have_wm = true;
	st->wm_loaded = true;
	return 0;
}

/* w is the watermark write nw (read back): the same sequence, owner and manifest. */
static bool wm_same_write(const struct ws_fmt_watermark *w, const struct ws_fmt_watermark *nw)
{
	return w->seq == nw->seq && w->epoch == nw->epoch && w->pointer_generation == nw->pointer_generation &&
	       w->last_frame == nw->last_frame && w->manifest_length == nw->manifest_length &&
	       strcmp(w->manifest_key, nw->manifest_key) == 0 &&
	       memcmp(w->manifest_sha, nw->manifest_sha, WS_SHA256_LEN) == 0;
}

static bool fenced_by(const struct ws_stream *st, const struct ws_fmt_watermark *w)
{
	return w->epoch > st->epoch || w->pointer_generation > st->pg;
}

static void fill_fenced(const struct ws_stream *st, struct ws_outcome *out)
{
	memset(out, 0, sizeof(*out));
	out->kind = WS_OUTCOME_FENCED;
	out->u.fenced.current_epoch = st->wm.epoch;
	out->u.fenced.our_epoch = st->epoch;
	out->u.fenced.current_pointer_generation = st->wm.pointer_generation;
	out->u.fenced.our_pointer_generation = st->pg;
}

/* Upload one immutable object under a key that embeds its hash: an existing
 * object with that key is this same content from an earlier attempt. */
static int put_immutable(struct ws_stream *st, const char *key, const struct iovec *iov, int iovcnt)
{
	int rc = ws_store_putv(st->sink->store, key, iov, iovcnt, WS_PUT_CREATE, NULL, NULL);
	if (rc == WS_EPRECOND)
		rc = ws_store_created_same(st->sink->store, key, iov, iovcnt);
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: upload %s", st->tenant, key);
	return 0;
}

/* The pipe's result for one of this call's parts (collected in order). */
static void part_done(void *arg, uint32_t idx, const struct ws_pipe_desc *d)
{
	struct ws_stream *st = arg;
	uint32_t i = idx - st->part_base;
	if (i >= st->part_count)
		return;
	st->parts[i].done = true;
	st->parts[i].rc = d->rc;
	st->call_throttle += d->throttle_retries;
	if (d->rc && d->why[0] && !st->upload_why[0]) {
		snprintf(st->upload_why_key, sizeof(st->upload_why_key), "%s", d->key);
		snprintf(st->upload_why, sizeof(st->upload_why), "%s", d->why);
	}
	if (d->checked) {
		struct ws_part *pt = &st->parts[i];
		struct ws_fmt_objref *ref = &st->batches[pt->ref];
		pt->chk = d->chk;
		ref->first = d->batch.first_frame;
		ref->count = d->chk.ship;
		ref->length = WS_BATCH_HDR_SIZE + d->payload_len;
		/* The real key, for the manifest, or for the message that names
		 * the upload that failed. */
		if (d->chk.ship && !d->chk.dropped)
			snprintf(ref->key, sizeof(ref->key), "%s", d->key);
		if (d->rc == 0 && d->chk.ship)
			ref->xxh = d->hdr_xxh;
		if (d->chk.dropped || !d->chk.ship)
			return; /* nothing was sent */
		if (d->hold && d->rc == 0) {
			/* Kept in its slot for the manifest, which carries it. */
			ref->key[0] = '\0';
			st->inl_held = true;
			st->inl_idx = idx;
			return;
		}
	}
	if (d->rc == 0) {
		st->call.puts++;
		st->call.bytes += d->hdr_len + d->payload_len;
	}
}

/*
 * A free ring slot for the next part. Under `shed` a full ring is the sink
 * not keeping up: no wait, -EAGAIN. Otherwise wait (block and throttle):
 * the uploader frees slots as the sink takes them, or as their bounded
 * retries run out.
 */
static int reserve_slot(struct ws_stream *st, uint32_t *idx)
{
	int rc = room_part(st, st->part_count);
	if (rc == WS_ETOOBIG)
		return ws_fail(rc, "tenant %s: more than %u objects in one call; raise batch_bytes_max", st->tenant,
			       MAX_PARTS);
	if (rc)
		return ws_fail(rc, "tenant %s: no memory for the call's %u objects", st->tenant, st->part_count + 1);
	return ws_pipe_reserve(st->pipe, st->shed_nowait ? 0 : -1, idx);
}

/*
 * Publish a batch or snapshot part whose payload is already in ring slot
 * idx: its header travels in the descriptor, the payload goes to the sink
 * straight from the slot. The object is named and referenced by its header
 * hash, which covers the payload hash: the payload is hashed once.
 */
static int publish_part(struct ws_stream *st, uint32_t idx, const struct ws_fmt_objref *ref, const uint8_t *hdr,
			size_t hdr_len, size_t payload_len, const struct ws_part *info, const char *fault_site,
			bool checked)
{
	struct ws_pipe_desc *d = ws_pipe_desc(st->pipe, idx);
	uint64_t used;
	int rc = WS_FAULT(fault_site);
	if (rc)
		return ws_fail(rc, "tenant %s: injected fault before uploading %s", st->tenant, ref->key);
	/* Under the application's write lock a struggling sink is not
	 * waited out (block): the call fails, the lock goes, the next call
	 * (unlocked) waits. */
	d->policy = st->lock_call && st->policy == WS_POLICY_BLOCK ? WS_POLICY_THROTTLE : st->policy;
	d->checked = checked;
	if (!checked) {
		/* Sent as it is; a checked batch's fields were set by the tail
		 * (and its results by whichever thread read it). */
		snprintf(d->key, sizeof(d->key), "%s", ref->key);
		if (hdr_len)
			memcpy(d->hdr, hdr, hdr_len);
		d->hdr_len = (uint32_t)hdr_len;
		d->payload_len = payload_len;
		d->delegated = false;
		d->hold = false;
	}
	d->chk.dropped = false;
	d->rc = 0;
	d->throttle_retries = 0;
	/* Parts and ring slots go in step: part i of this call is ring slot
	 * part_base + i, which is how part_done finds it. */
	WS_ASSERT(st->part_count < MAX_PARTS && idx == st->part_base + st->part_count);
	st->parts[st->part_count] = *info;
	st->parts[st->part_count].done = false;
	st->part_count++;
	used = st->pipe->outstanding + payload_len; /* a checked batch: what it may hold */
	if (used > st->high_water)
		st->high_water = used;
	if ((rc = WS_FAULT("stream.ring_handover")) != 0)
		return ws_fail(rc, "tenant %s: injected fault publishing %s", st->tenant, ref->key);
	ws_pipe_publish(st->pipe);
	return 0;
}

/* ---- the scan --------------------------------------------------------- */

struct scan {
	struct ws_fmt_gen gen;
	char prefix[WS_KEY_MAX];
	struct ws_wal_cursor cur;
	uint64_t first_frame;     /* first frame this call uploads */
	uint32_t seed[2];
	int64_t read_ms;
};

/*
 * Put the parts of a checked scan in chain order: starting from the cursor
 * the call began with, each slot that followed an unbroken chain extends
 * it by its valid frames and commits; the first slot that did not reach
 * its end (or failed) ends it, and every later slot (read ahead of knowing
 * that, never sent) is dropped with the slots that hold nothing to send.
 * Each kept part then carries the cursor's commit after it, as settle
 * expects.
 */
static int merge_checked(struct ws_stream *st, struct scan *sc, uint32_t first_part)
{
	uint32_t keep_parts = first_part, keep_refs = first_part < st->part_count ? st->parts[first_part].ref : 0;
	bool chain = true;
	int read_rc = 0;
	uint64_t read_at = 0;

	ws_pipe_drain(st->pipe);
	for (uint32_t i = first_part; i < st->part_count; i++) {
		struct ws_part pt = st->parts[i];
		const struct ws_wal_run *run = &pt.chk.run;
		const bool read = pt.done && pt.chk.filled;
		if (pt.chk.dropped)
			chain = false; /* the upload side saw the chain end before it */
		if (!chain)
			continue;
		/* The chain reached a slot the upload thread could not read:
		 * where the WAL's commits end is unknown, and the call must fail
		 * (ending the chain there would read as "nothing more", an Empty
		 * or a complete tail, and let walship's WAL checkpoint copy the
		 * unread commits away). */
		if (pt.done && !pt.chk.filled && pt.rc) {
			read_rc = pt.rc;
			read_at = st->batches[pt.ref].first;
			chain = false;
			continue;
		}
		/* A slot that is not the tail's first took its seed from the
		 * file, read at another moment than the slot before it: SQLite
		 * rewrites the frames of a transaction that spilled, with new
		 * checksums, when it commits. Only a seed equal to where the
		 * chain so far ended continues it (invariant 11); the slot
		 * and everything after it are another chain's, never shipped. */
		if (read && (run->seed[0] != sc->cur.cksum[0] || run->seed[1] != sc->cur.cksum[1])) {
			ws_debug("tenant %s: slot at frame %" PRIu64 " does not continue the checksum chain read "
				 "before it (rewritten meanwhile); the chain ends at frame %" PRIu64,
				 st->tenant, run->first_frame, sc->cur.next_frame - 1);
			chain = false;
			continue;
		}
		/* What the slot's reader found holds whether or not its upload
		 * then failed (settle decides about that). */
		if (read) {
			WS_ASSERT(run->first_frame == sc->cur.next_frame);
			if (run->valid > 0) {
				sc->cur.next_frame = run->first_frame + run->valid;
				sc->cur.cksum[0] = run->end_cksum[0];
				sc->cur.cksum[1] = run->end_cksum[1];
			}
			if (run->last_commit) {
				sc->cur.last_commit = run->last_commit;
				sc->cur.commit_cksum[0] = run->commit_cksum[0];
				sc->cur.commit_cksum[1] = run->commit_cksum[1];
				sc->cur.commit_db_size = run->commit_db_size;
			}
		}
		pt.last_commit = sc->cur.last_commit;
		pt.commit_cksum[0] = sc->cur.commit_cksum[0];
		pt.commit_cksum[1] = sc->cur.commit_cksum[1];
		pt.commit_db_size = sc->cur.commit_db_size;
		if (!read || !pt.chk.cont)
			chain = false;
		if (read && pt.chk.ship == 0)
			continue; /* nothing was sent for it */
		st->batches[keep_refs] = st->batches[pt.ref];
		pt.ref = keep_refs++;
		st->parts[keep_parts++] = pt;
	}
	st->part_count = keep_parts;
	st->batch_count = keep_refs;
	/* Every part so far is collected; the next slot published fills the
	 * next part (part_done maps ring index - part_base to a part). */
	st->part_base = st->pipe->ring.head - st->part_count;
	if (read_rc)
		return ws_fail(read_rc, "tenant %s: read %s from frame %" PRIu64 " (upload thread): %s (nothing "
			       "acknowledged)", st->tenant, st->wal_path, read_at, ws_strerror(read_rc));
	return 0;
}

/*
 * The scan when every slot is checked where it is read (pipe.h): the tail
 * reads and checks every other slot itself and hands the others to the
 * upload thread to read and check, assuming the chain goes on through
 * them; the in-order merge sorts out where it really ended. Stops at the
 * end of the file, at a slot of its own that ended the chain, or (shed)
 * at a full ring.
 */
/* How a call's scan meets the batch limit (scan_checked). */
enum at_limit {
	LIMIT_STOP,      /* ship the prefix read, up to its last commit */
	LIMIT_ONE_TXN,   /* the scan goes on past a stop that met no commit: one transaction too large */
	LIMIT_REBASE,    /* a re-base must reach its read mark in one manifest */
};

static int scan_checked(struct ws_stream *st, struct scan *sc, uint64_t wal_bytes, enum at_limit at_limit)
{
	const uint32_t fsz = ws_wal_frame_size(sc->gen.page_size);
	const size_t slot_frames = st->pipe->ring.slot_bytes / fsz;
	size_t per_chunk = slot_frames;
	const uint32_t first_part = st->part_count;
	uint64_t next = sc->cur.next_frame;

	if (st->batch_frames_max && st->batch_frames_max < per_chunk)
		per_chunk = st->batch_frames_max;
	const uint64_t start = ws_wal_frame_offset(sc->gen.page_size, next);
	const uint64_t frames_total = start < wal_bytes ? (wal_bytes - start) / fsz : 0;
	/* One call names at most MAX_REFS batches. A backlog larger than that
	 * many batches of batch_frames_max is read in larger ones (up to a
	 * slot): the setting bounds how long a frame waits in a batch, and a
	 * backlog has waited already. Otherwise a tail of many small batches
	 * would fail on every retry, and the tenant never ship again. */
	const uint64_t refs_left = MAX_REFS - st->batch_count;
	if (per_chunk < slot_frames && (uint64_t)per_chunk * refs_left < frames_total) {
		uint64_t need = (frames_total + refs_left - 1) / refs_left;
		per_chunk = need < slot_frames ? (size_t)need : slot_frames;
	}
	const bool multi = frames_total > per_chunk;
	/* A tail this small sends its one batch inside its manifest: two
	 * writes instead of three. Never in a re-base, whose snapshot parts
	 * reserve slots after the scan. */
	const bool hold = st->inline_max && !multi && at_limit != LIMIT_REBASE &&
			  frames_total * fsz + WS_BATCH_HDR_SIZE <= st->inline_max;
	for (uint32_t k = 0;; k++) {
		uint64_t off = ws_wal_frame_offset(sc->gen.page_size, next);
		struct ws_pipe_desc *d;
		struct ws_fmt_objref *ref;
		struct ws_part part;
		uint32_t idx;
		size_t want;
		bool own_cont = true;
		int rc;

		if (off + fsz > wal_bytes)
			break;
		want = per_chunk;
		if ((wal_bytes - off) / fsz < want)
			want = (size_t)((wal_bytes - off) / fsz);
		/* The work bound: what is published so far ships now; the rest
		 * is the next tail's (never the first slot: a tail makes progress). */
		if (k > 0 && st->tail_stop_ms && ws_mono_ms() >= st->tail_stop_ms) {
			rc = WS_FAULT("stream.tail_bound");
			if (rc)
				return ws_fail(rc, "tenant %s: injected fault at the tail's work bound", st->tenant);
			st->early_stop = true;
			break;
		}
		/* As many batches as one manifest names: a backlog beyond that
		 * (a long outage under small batches, walship's read mark holding
		 * the WAL) ships in prefixes, one per call, up to the last commit
		 * read, and the next call goes on; a flush or the final drain goes
		 * on to the end. A re-base must reach its read mark in one
		 * manifest (the image may hold pages of every frame below it),
		 * and a call must make progress. */
		int lim = st->batch_count >= MAX_REFS ? WS_ETOOBIG : k > 0 ? WS_FAULT("stream.batch_limit") : 0;
		if (lim) {
			if (at_limit == LIMIT_STOP && k > 0) {
				st->early_stop = true;
				break;
			}
			if (lim != WS_ETOOBIG)
				return ws_fail(lim, "tenant %s: injected fault at the call's batch limit", st->tenant);
			return ws_fail(WS_ETOOBIG, "tenant %s: the WAL holds more than %u batches of %zu frames "
				       "(batch_bytes_max)%s; raise batch_bytes_max", st->tenant, MAX_REFS, slot_frames,
				       at_limit == LIMIT_REBASE ? " to re-base from" : " in one transaction");
		}
		rc = reserve_slot(st, &idx);
		if (rc == -EAGAIN) {
			st->shed_stop = true;
			break;
		}
		if (rc)
			return rc;
		if ((rc = room_batch(st, st->batch_count)) != 0)
			return ws_fail(rc, "tenant %s: no room for batch %u of the call", st->tenant, st->batch_count + 1);
		d = ws_pipe_desc(st->pipe, idx);
		memset(&d->batch, 0, sizeof(d->batch));
		d->batch.gen = sc->gen;
		d->batch.first_frame = next;
		d->batch.seed_cksum[0] = sc->cur.cksum[0];
		d->batch.seed_cksum[1] = sc->cur.cksum[1];
		d->first_slot = k == 0;
		d->hold = hold && k == 0;
		d->wal_fd = st->wal_fd;
		d->wal_off = off;
		d->want = (uint32_t)want;
		d->per_chunk = (uint32_t)per_chunk;
		snprintf(d->key_prefix, sizeof(d->key_prefix), "%s", sc->prefix);
		/* The key carries the manifest's watermark sequence, as a snapshot
		 * part's does: a later chain that re-ships the same frames (a
		 * re-base of a WAL an older chain shipped) never names an object
		 * of that older chain, which retention may be deleting. */
		d->key_seq = (st->have_wm ? st->wm.seq : 0) + 1;
		/* The pipe decides which thread reads the slot. */
		d->delegated = !ws_pipe_reads_here(st->pipe, k, multi);
		memset(&d->chk, 0, sizeof(d->chk)); /* R fills it: nothing of a slot's last use */
		ref = &st->batches[st->batch_count];
		memset(ref, 0, sizeof(*ref));
		ref->first = next;
		/* Named for messages until the reader sets the real key. */
		if (snprintf(ref->key, sizeof(ref->key), "%s/b%016" PRIx64, sc->prefix, next) >= (int)sizeof(ref->key))
			return ws_fail(WS_ETOOBIG, "tenant %s: batch key too long", st->tenant);
		memset(&part, 0, sizeof(part));
		part.ref = st->batch_count;
		st->batch_count++;
		if (!d->delegated) {
			rc = ws_pipe_fill(st->pipe, st->reader, st->wal_slot, st->ring_off, idx, d);
			if (rc)
				return ws_fail(rc == WS_ETOOBIG ? rc : -EIO, "tenant %s: read %s at %" PRIu64 ": %s",
					       st->tenant, st->wal_path, off, ws_strerror(rc));
			own_cont = d->chk.cont;
		}
		rc = publish_part(st, idx, ref, NULL, 0, want * fsz, &part, "stream.before_batch_put", true);
		if (rc)
			return rc;
		if (!own_cont)
			break; /* the chain ended in a slot read here */
		next += want;
	}
	return merge_checked(st, sc, first_part);
}

/*
 * After a shed stop: walk the rest of the chain (reading into the small
 * area, uploading nothing) to learn the last committed frame this call
 * dropped, so the outcome names the range exactly.
 */
static int scan_rest(struct ws_stream *st, struct scan *sc, uint64_t wal_bytes)
{
	const uint32_t fsz = ws_wal_frame_size(sc->gen.page_size);
	const size_t per_chunk = st->small_bytes / fsz;
	uint8_t *buf = ws_reader_buf(st->reader) + st->small_off;

	for (;;) {
		uint64_t off = ws_wal_frame_offset(sc->gen.page_size, sc->cur.next_frame);
		size_t want = per_chunk, valid = 0;
		ssize_t got;
		if (off + fsz > wal_bytes)
			return 0;
		if ((wal_bytes - off) / fsz < want)
			want = (size_t)((wal_bytes - off) / fsz);
		got = ws_reader_read(st->reader, st->wal_slot, off, st->small_off, want * fsz);
		if (got < 0)
			return ws_fail(-EIO, "tenant %s: read %s at %" PRIu64 ": %s", st->tenant, st->wal_path,
				       off, ws_strerror((int)got));
		want = (size_t)got / fsz;
		while (valid < want && ws_wal_cursor_step(&sc->cur, buf + valid * fsz, NULL) == 1)
			valid++;
		if (valid < want || want < per_chunk)
			return 0;
	}
}

/* Upload the raw database file as snapshot parts (REBASE); db_pages at the cut. */
static int upload_snapshot(struct ws_stream *st, const struct scan *sc, uint32_t db_pages)
{
	const uint32_t ps = sc->gen.page_size;
	const size_t per_part = st->pipe->ring.slot_bytes / ps;
	uint64_t file_bytes, file_pages, pages;
	int rc0;
	/* The image is exact only under the read mark the scan was made under. */
	WS_ASSERT(st->held >= 0);
	rc0 = db_size(st, &file_bytes);
	if (rc0)
		return rc0;
	file_pages = file_bytes / ps;
	pages = file_pages < db_pages ? file_pages : db_pages;

	for (uint64_t p = 0; p < pages;) {
		size_t n = per_part;
		ssize_t got;
		struct ws_fmt_snap s;
		struct ws_fmt_objref *ref;
		struct ws_part part;
		uint8_t hdr[WS_SNAP_HDR_SIZE];
		uint8_t *buf;
		uint32_t idx;
		int rc;

		if (pages - p < n)
			n = (size_t)(pages - p);
		rc = reserve_slot(st, &idx);
		if (rc == -EAGAIN) {
			st->shed_stop = true;
			return 0;
		}
		if (rc)
			return rc;
		buf = ws_pipe_slot(st->pipe, idx);
		got = db_read(st, p * ps, n * ps, buf);
		if (got < 0)
			return ws_fail((int)got, "tenant %s: read %s", st->tenant, st->db_path);
		n = (size_t)got / ps;
		if (n == 0)
			break; /* the file shrank under us; frames carry the rest */
		rc = room_snap(st, st->snap_count);
		if (rc == WS_ETOOBIG)
			return ws_fail(rc, "tenant %s: the database needs more than %u snapshot parts of %zu pages "
				       "(batch_bytes_max); raise batch_bytes_max", st->tenant, MAX_SNAPS, per_part);
		if (rc)
			return ws_fail(rc, "tenant %s: no memory for snapshot part %u", st->tenant, st->snap_count + 1);
		s.page_size = ps;
		s.first_page = (uint32_t)(p + 1);
		s.page_count = (uint32_t)n;
		s.payload_xxh = ws_xxh64(buf, n * ps);
		ws_fmt_snap_encode_hdr(&s, hdr);
		ref = &st->snaps[st->snap_count];
		memset(ref, 0, sizeof(*ref));
		ref->first = p + 1;
		ref->count = n;
		ref->xxh = ws_get_le64(hdr + WS_SNAP_HDR_HASH_OFF);
		ref->length = sizeof(hdr) + n * ps;
		/* The key carries the manifest's watermark sequence: a later
		 * REBASE of the same bytes (a database without WAL between runs)
		 * never re-uses a part of an older chain, which retention may be
		 * deleting as that chain's history. */
		if (snprintf(ref->key, sizeof(ref->key), "%s/s%016" PRIx64 "-%016" PRIx64 "/%08" PRIx64 "-%016" PRIx64,
			     sc->prefix, sc->cur.last_commit, (st->have_wm ? st->wm.seq : 0) + 1, p + 1,
			     ref->xxh) >= (int)sizeof(ref->key))
			return ws_fail(WS_ETOOBIG, "tenant %s: snapshot key too long", st->tenant);
		memset(&part, 0, sizeof(part));
		part.snap = true;
		part.ref = st->snap_count;
		st->snap_count++;
		rc = publish_part(st, idx, ref, hdr, sizeof(hdr), n * ps, &part, "stream.before_snapshot_put", false);
		if (rc)
			return rc;
		p += n;
	}
	return 0;
}

/* Database geometry from the file header (used when the WAL has no frames). */
static int db_header(struct ws_stream *st, uint32_t *page_size, uint32_t *pages)
{
	uint8_t *buf = ws_reader_buf(st->reader) + st->small_off;
	ssize_t got = db_read(st, 0, 100, buf);
	uint32_t ps;
	if (got < 0)
		return ws_fail((int)got, "tenant %s: read %s", st->tenant, st->db_path);
	if (got == 0) {
		*page_size = 4096;
		*pages = 0;
		return 0;
	}
	if (got < 100 || memcmp(buf, "SQLite format 3", 16) != 0)
		return ws_fail(WS_EFORMAT, "tenant %s: %s is not a SQLite database", st->tenant, st->db_path);
	if (buf[18] != 2 || buf[19] != 2)
		return ws_fail(WS_ECONFIG, "tenant %s: %s is not in WAL mode (PRAGMA journal_mode=WAL)",
			       st->tenant, st->db_path);
	ps = (uint32_t)buf[16] << 8 | buf[17];
	if (ps == 1)
		ps = 65536;
	if (ps < 512 || (ps & (ps - 1)))
		return ws_fail(WS_EFORMAT, "tenant %s: %s has page size %u", st->tenant, st->db_path, ps);
	*page_size = ps;
	/* The in-header size is valid when the version-valid-for number matches
	 * the change counter (SQLite >= 3.7.0 always writes both). */
	if (ws_get_be32(buf + 92) == ws_get_be32(buf + 24) && ws_get_be32(buf + 28) != 0)
		*pages = ws_get_be32(buf + 28);
	else {
		uint64_t bytes;
		int rc = db_size(st, &bytes);
		if (rc)
			return rc;
		*pages = (uint32_t)(bytes / ps);
	}
	return 0;
}


/*
 * After the drain: what of this call is durable. Returns 0 to go on with
 * the manifest (*last and *db_pages possibly cut back to the persisted
 * prefix), 1 for Shed (nothing usable persisted; *last is the range
 * dropped), or an error.
 */
static int settle(struct ws_stream *st, struct scan *sc, uint32_t kind, uint64_t *last, uint32_t *db_pages)
{
	const struct ws_part *keep = NULL;
	const char *bad_key = NULL;
	bool broken = false, snap_bad = false;
	uint32_t prefix = 0;
	int first_err = 0;

	for (uint32_t i = 0; i < st->part_count; i++) {
		const struct ws_part *pt = &st->parts[i];
		int r = pt->done ? pt->rc : -EIO;
		if (r && !first_err) {
			first_err = r;
			bad_key = pt->snap ? st->snaps[pt->ref].key : st->batches[pt->ref].key;
		}
		if (pt->snap) {
			snap_bad |= r != 0;
			continue;
		}
		if (!broken && r == 0) {
			prefix = pt->ref + 1;
			keep = pt;
		} else {
			broken = true;
		}
	}
	if (first_err && (st->policy != WS_POLICY_SHED || st->drain || !ws_err_transient(first_err)))
		return ws_fail(first_err, "tenant %s: upload %s: %s (policy %s%s; nothing acknowledged)", st->tenant,
			       bad_key, strcmp(bad_key, st->upload_why_key) == 0 ? st->upload_why : ws_strerror(first_err),
			       ws_policy_name(st->policy),
			       st->lock_call ? ", not waited out under the database's write lock" : "");
	if (first_err || st->shed_stop) {
		uint64_t range_last = *last;
		uint64_t kept = keep ? keep->last_commit : 0;
		if (kind == WS_MANIFEST_REBASE || snap_bad || kept < sc->first_frame) {
			/* Nothing usable persisted: no manifest, no watermark. */
			st->frames_shed = range_last >= sc->first_frame ? range_last - sc->first_frame + 1 : 0;
			ws_info("tenant %s: shed frames %" PRIu64 "..%" PRIu64 " (%s)", st->tenant, sc->first_frame,
				range_last, first_err ? ws_strerror(first_err) : "spill ring full");
			return 1;
		}
		st->frames_shed = range_last - kept;
		st->batch_count = prefix;
		sc->cur.last_commit = kept;
		sc->cur.commit_cksum[0] = keep->commit_cksum[0];
		sc->cur.commit_cksum[1] = keep->commit_cksum[1];
		sc->cur.commit_db_size = keep->commit_db_size;
		*last = kept;
		*db_pages = keep->commit_db_size;
		ws_info("tenant %s: shipped frames %" PRIu64 "..%" PRIu64 ", shed %" PRIu64 " (%s)", st->tenant,
			sc->first_frame, kept, st->frames_shed, first_err ? ws_strerror(first_err) : "spill ring full");
	}
	/* Batches that extend past the last commit stay unnamed by the manifest;
	 * drop trailing batches that contain no committed frame at all. */
	while (st->batch_count > 0 && st->batches[st->batch_count - 1].first > *last)
		st->batch_count--;
	return 0;
}

/* ---- tail_frames ------------------------------------------------------ */

/* tail_inner: the call must start over (the WAL moved under a re-base). */
#define TAIL_RETRY 1
#define TAIL_ATTEMPTS 3

/*
 * The wal-index header (SQLite's walformat: two 48-byte copies at the start
 * of the -shm; isInit at byte 12, mxFrame at 16 and aFrameCksum at 24, both
 * native, aSalt at 32 as the WAL header's bytes 16..23, aCksum at 40 over
 * bytes 0..39 in native order), read through SQLite's own open file of the
 * database under our read transaction, as SQLite's readers read it: the
 * first copy, then the second (a writer writes them in the other order),
 * equal, initialised and the checksum right. A writer holds them in flux
 * for a few stores: try again a little. false: not mapped (no other
 * connection has built it), not initialised, or in flux on every try.
 */
static bool wal_index_hdr(struct ws_stream *st, uint8_t h[48])
{
	sqlite3_file *f = db_file(st);
	void volatile *p = NULL;
	uint8_t both[96];

	if (!f || f->pMethods->iVersion < 2 || !f->pMethods->xShmMap ||
	    f->pMethods->xShmMap(f, 0, 32768, 0, &p) != SQLITE_OK || !p)
		return false;
	for (int tries = 0; tries < 64; tries++) {
		uint32_t s[2] = { 0, 0 }, want[2];
		for (size_t i = 0; i < 48; i++)
			both[i] = ((const volatile uint8_t *)p)[i];
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		for (size_t i = 48; i < 96; i++)
			both[i] = ((const volatile uint8_t *)p)[i];
		if (both[12] != 1 && memcmp(both, both + 48, 48) == 0)
			return false;
		ws_wal_checksum(__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__, both, 40, s);
		memcpy(want, both + 40, sizeof(want));
		if (memcmp(both, both + 48, 48) == 0 && both[12] == 1 && s[0] == want[0] && s[1] == want[1]) {
			memcpy(h, both, 48);
			return true;
		}
		sched_yield();
	}
	return false;
}

/* mxFrame of a wal-index header. */
static uint32_t wal_index_mx(const uint8_t h[48])
{
	uint32_t mx;
	memcpy(&mx, h + 16, sizeof(mx));
	return mx;
}

/*
 * Whether the wal-index says the WAL holds no frame: its header read whole
 * and mxFrame 0. SQLite reads a WAL whose file header fails its checks as
 * empty only when it rebuilds the wal-index from the file; while the
 * wal-index is in use, its readers and writers go on with the frames it
 * names, whatever the file header says.
 */
static bool wal_index_empty(struct ws_stream *st)
{
	uint8_t h[48];
	return wal_index_hdr(st, h) && wal_index_mx(h) == 0;
}

/*
 * Where the committed frames of the generation end, as SQLite's readers
 * see them: frames past the wal-index's mxFrame are not committed, even a
 * whole chain ending in a valid commit frame (a writer whose sync failed,
 * or that was killed before it wrote the wal-index: the next writer writes
 * over them from mxFrame + 1). Bounds *wal_bytes at mxFrame when the
 * wal-index is in use and names this generation (the same salts); none (no
 * other connection: SQLite rebuilds it from the file, and every valid
 * commit counts) leaves it.
 *
 * A wal-index of other salts than the file's names no frame of the file's
 * generation (a restart resets mxFrame to 0). Either the restart is not in
 * the file yet (the wal-index's salt-1 is the file's plus one, as SQLite's
 * restart makes it): the file still holds the generation before, every
 * frame of which was committed and backfilled before the restart, and is
 * read as it stands. Or a writer has begun a generation in the file (a
 * connection that did not make the restart writes new random salts) that
 * the wal-index does not name yet: none of its frames is committed.
 *
 * A frame of this generation right after mxFrame is most often a commit
 * still under way (its writer syncs the WAL between writing the frames and
 * the wal-index, and only the frames wake the engine): the call reports
 * past_index, so the tenant is looked at again without a write to wake it.
 */
static int wal_index_bound(struct ws_stream *st, const struct ws_wal_hdr *wh, uint64_t *wal_bytes)
{
	uint8_t h[48];
	uint32_t mx;
	if (!wal_index_hdr(st, h))
		return 0;
	mx = wal_index_mx(h);
	if (ws_get_be32(h + 32) != wh->salt1 || ws_get_be32(h + 36) != wh->salt2) {
		if (mx != 0 || ws_get_be32(h + 32) == wh->salt1 + 1u)
			return 0;
	}
	uint64_t end = ws_wal_frame_offset(wh->page_size, (uint64_t)mx + 1);
	if (*wal_bytes <= end)
		return 0;
	if (*wal_bytes >= end + WS_WAL_FRAME_HDR_SIZE) {
		const uint8_t *buf = ws_reader_buf(st->reader) + st->small_off;
		ssize_t got = ws_reader_read(st->reader, st->wal_slot, end, st->small_off, WS_WAL_FRAME_HDR_SIZE);
		if (got < 0)
			return ws_fail((int)got, "tenant %s: read %s at %" PRIu64, st->tenant, st->wal_path, end);
		st->past_index = got == (ssize_t)WS_WAL_FRAME_HDR_SIZE && ws_get_be32(buf + 8) == wh->salt1 &&
				 ws_get_be32(buf + 12) == wh->salt2;
	}
	ws_debug("tenant %s: %s runs %" PRIu64 " bytes past the wal-index's last commit (frame %u)%s: "
		 "not committed, not read", st->tenant, st->wal_path, *wal_bytes - end, mx,
		 st->past_index ? ", a frame of this generation next" : "");
	*wal_bytes = end;
	return 0;
}

/*
 * The live WAL header, for the generation it names; -ENOENT when the WAL
 * is empty as SQLite reads it: 0 bytes, or a file header that fails
 * SQLite's checks (ws_wal_hdr_sqlite_empty: shorter than a header, a wrong
 * magic, page size or checksum) while the wal-index names no frame
 * (wal_index_empty): SQLite then reads the database file alone and
 * restarts the WAL at its next write.
 */
static int read_wal_gen(struct ws_stream *st, struct ws_wal_hdr *wh)
{
	uint8_t *buf = ws_reader_buf(st->reader) + st->small_off;
	ssize_t got = ws_reader_read(st->reader, st->wal_slot, 0, st->small_off, WS_WAL_HDR_SIZE);
	int rc;
	if (got < 0)
		return ws_fail((int)got, "tenant %s: read %s", st->tenant, st->wal_path);
	if (got == 0 || (ws_wal_hdr_sqlite_empty(buf, (size_t)got) && wal_index_empty(st)))
		return -ENOENT;
	if (got < (ssize_t)WS_WAL_HDR_SIZE)
		return ws_fail(WS_ENOTWAL, "tenant %s: %s is %zd bytes, shorter than a WAL header, while SQLite's "
			       "wal-index names frames in it; nothing uploaded", st->tenant, st->wal_path, got);
	rc = ws_wal_hdr_parse(buf, wh);
	if (rc)
		return ws_fail_wrap(rc, "tenant %s: %s (nothing uploaded)", st->tenant, st->wal_path);
	return 0;
}

/*
 * A re-base is exact only if its frames and its database image belong
 * together. Under a read mark above 0 no writer can restart the WAL, so
 * they do. Under read mark 0 (the WAL was fully backfilled when the read
 * transaction began) a writer may restart the WAL and overwrite frames
 * while we scan: then the frames read may stop short of the state the
 * database file holds, and frames older than the file would be laid over
 * it (invariant 10). The database file itself cannot move under mark 0
 * (a checkpoint needs READ_LOCK(0) exclusively to backfill), so reading
 * the header again once every frame and page has been read tells: the
 * same generation means nothing was overwritten.
 */
static int wal_unmoved(struct ws_stream *st, const struct scan *sc)
{
	struct ws_wal_hdr wh;
	int rc = read_wal_gen(st, &wh);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	return wh.salt1 == sc->gen.salt1 && wh.salt2 == sc->gen.salt2 &&
	       wh.checkpoint_seq == sc->gen.checkpoint_seq;
}

/*
 * One call, as the steps the top of this file lists, each a function of its
 * own over the call's state (struct tail). A step returns 0 to go on,
 * TAIL_DONE when it has decided the outcome (*out), TAIL_RETRY when the
 * call must start over, or an error (nothing acknowledged).
 */
#define TAIL_DONE 2

struct tail {
	struct scan sc;
	struct ws_wal_hdr wh;     /* the live WAL's header (sc.gen.wal_magic != 0) */
	uint64_t wal_bytes;       /* the WAL file's size when the call began */
	uint32_t kind;            /* WS_MANIFEST_CONTINUE, _NEXT_GEN or _REBASE */
	bool locked;              /* we hold the write lock: nothing commits meanwhile */
	bool fresh;               /* the watermark was first read by this call */
	uint64_t last;            /* the last committed frame this call ships */
	uint32_t db_pages;        /* database size in pages at last */
	char mkey[WS_KEY_MAX];    /* the manifest written */
	uint8_t msha[WS_SHA256_LEN];
	uint64_t mlen;
	struct ws_fmt_watermark prev; /* the watermark before ours (report) */
	bool had;
	bool unproven;            /* a CONTINUE on a fresh read mark that cannot prove where its
				   * generation ended (step_write_watermark) */
	bool merged;              /* the manifest replaces the carried one the watermark names (same seq) */
	bool carried;             /* the watermark carries the manifest: it is stored nowhere else */
};

/* Empty: nothing new since the watermark (or only an uncommitted transaction). */
static int done_empty(const struct ws_stream *st, struct ws_outcome *out)
{
	memset(out, 0, sizeof(*out));
	out->kind = WS_OUTCOME_EMPTY;
	if (st->have_wm)
		ws_wm_to_public(&st->wm, &out->u.empty.watermark);
	fill_rpo(st, &out->u.empty.rpo);
	return TAIL_DONE;
}

static int done_fenced(const struct ws_stream *st, struct ws_outcome *out)
{
	fill_fenced(st, out);
	return TAIL_DONE;
}

/* 1. The live generation: the WAL header, or "none" for an empty or absent WAL. */
static int step_read_generation(struct ws_stream *st, struct tail *t)
{
	int rc;
	if (access(st->db_path, F_OK) != 0)
		return ws_fail(-ENOENT, "tenant %s: database %s vanished", st->tenant, st->db_path);
	if ((rc = WS_FAULT("stream.before_wal_header")) != 0)
		return ws_fail(rc, "tenant %s: injected fault before reading the WAL header", st->tenant);
	rc = file_refresh(st, st->wal_path, &st->wal_fd, &st->wal_slot);
	if (rc && rc != -ENOENT)
		return rc;
	t->wal_bytes = file_size(st->wal_fd);
	if (t->wal_bytes != 0) {
		rc = read_wal_gen(st, &t->wh);
		if (rc == -ENOENT) {
			/* No frame SQLite would read: the database file alone. */
			ws_warn("tenant %s: %s (%" PRIu64 " bytes) holds no valid WAL header and SQLite's wal-index "
				"names no frame: read as an empty WAL, as SQLite reads it (the database file alone)",
				st->tenant, st->wal_path, t->wal_bytes);
			t->wal_bytes = 0;
		} else if (rc) {
			return rc;
		} else if ((rc = wal_index_bound(st, &t->wh, &t->wal_bytes)) != 0) {
			return rc;
		}
	}
	if (t->wal_bytes == 0) {
		uint32_t ps, pages;
		rc = db_header(st, &ps, &pages);
		if (rc)
			return rc;
		t->sc.gen.page_size = ps;
	} else {
		t->sc.gen.wal_magic = t->wh.magic;
		t->sc.gen.checkpoint_seq = t->wh.checkpoint_seq;
		t->sc.gen.salt1 = t->wh.salt1;
		t->sc.gen.salt2 = t->wh.salt2;
		t->sc.gen.page_size = t->wh.page_size;
		ws_wal_cursor_init(&t->sc.cur, &t->wh);
	}
	if ((rc = WS_FAULT("stream.after_wal_header")) != 0)
		return ws_fail(rc, "tenant %s: injected fault after reading the WAL header", st->tenant);
	return 0;
}

/* Start the scan over from frame 1 of the live generation (a re-base). */
static void scan_from_top(struct tail *t)
{
	t->kind = WS_MANIFEST_REBASE;
	if (t->sc.gen.wal_magic != 0)
		ws_wal_cursor_init(&t->sc.cur, &t->wh);
	t->sc.first_frame = t->sc.cur.next_frame ? t->sc.cur.next_frame : 1;
	t->sc.seed[0] = t->sc.cur.cksum[0];
	t->sc.seed[1] = t->sc.cur.cksum[1];
}

/*
 * 2. Decide continuity: from the watermark we know, how this call goes on
 * (CONTINUE: the same generation, still holding the frame we stopped at;
 * NEXT_GEN: another generation, which only our unbroken read mark proves
 * follows what we shipped; else REBASE). Decides Fenced by a watermark we
 * already hold, and Empty when nothing new is there, without a request.
 */
static int step_decide_continuity(struct ws_stream *st, struct tail *t, struct ws_outcome *out)
{
	struct scan *sc = &t->sc;
	int rc;

	t->fresh = !st->wm_loaded;
	if (t->fresh && (rc = refresh_wm(st)) != 0)
		return rc;
	/* A watermark we hold that fences us: say so before anything else,
	 * re-reading it (unless just read) so the outcome names the current
	 * owner. A takeover after our last read is found by the fencing read
	 * that comes before any upload; an idle stale owner makes no request. */
	if (st->have_wm && fenced_by(st, &st->wm)) {
		if (!t->fresh && (rc = refresh_wm(st)) != 0)
			return rc;
		return done_fenced(st, out);
	}
	/* With no WAL on either side, only the held read mark proves the
	 * database file unchanged: without it, writes may have come and been
	 * checkpointed away (a TRUNCATE, or the last connection closing). */
	bool same_gen = st->have_wm && st->wm.version >= 2 && ws_fmt_gen_equal(&st->wm.gen, &sc->gen) &&
			(sc->gen.wal_magic != 0 || st->continuous);
	if (same_gen && sc->gen.wal_magic != 0 && st->wm.last_frame > 0) {
		/* Prove the live WAL still holds the frame we stopped at. */
		uint8_t *buf = ws_reader_buf(st->reader) + st->small_off;
		uint64_t off = ws_wal_frame_offset(sc->gen.page_size, st->wm.last_frame);
		ssize_t got = ws_reader_read(st->reader, st->wal_slot, off, st->small_off, WS_WAL_FRAME_HDR_SIZE);
		if (got < 0)
			return ws_fail((int)got, "tenant %s: read %s", st->tenant, st->wal_path);
		if (got != (ssize_t)WS_WAL_FRAME_HDR_SIZE || ws_get_be32(buf + 16) != st->wm.end_cksum[0] ||
		    ws_get_be32(buf + 20) != st->wm.end_cksum[1])
			same_gen = false;
	}
	if (same_gen) {
		t->kind = WS_MANIFEST_CONTINUE;
		if (sc->gen.wal_magic != 0 && st->wm.last_frame > 0)
			ws_wal_cursor_resume(&sc->cur, &t->wh, st->wm.last_frame + 1, st->wm.end_cksum);
	} else if (st->have_wm && st->continuous && !ws_fmt_gen_equal(&st->wm.gen, &sc->gen)) {
		/* A different generation is all the handover proves; the same
		 * salts with different frames would be a WAL we cannot explain. */
		t->kind = WS_MANIFEST_NEXT_GEN;
	} else {
		t->kind = WS_MANIFEST_REBASE;
	}
	sc->first_frame = sc->cur.next_frame ? sc->cur.next_frame : 1;
	sc->seed[0] = sc->cur.cksum[0];
	sc->seed[1] = sc->cur.cksum[1];
	if (t->kind == WS_MANIFEST_REBASE)
		return 0;

	/* Nothing new? Decide without a single store request. */
	if (sc->gen.wal_magic != 0) {
		uint64_t off = ws_wal_frame_offset(sc->gen.page_size, sc->cur.next_frame);
		const uint32_t fsz = ws_wal_frame_size(sc->gen.page_size);
		if (off + fsz <= t->wal_bytes) {
			struct ws_wal_cursor probe = sc->cur;
			ssize_t got = ws_reader_read(st->reader, st->wal_slot, off, st->small_off, fsz);
			/* A failed read proves nothing: Empty would leave the
			 * commits there unshipped with no failure to retry, and
			 * let walship's WAL checkpoint copy them away. A short one
			 * (the file changed since its size was taken): the scan
			 * finds what is there. */
			if (got < 0)
				return ws_fail((int)got, "tenant %s: read %s at %" PRIu64 ": %s (nothing acknowledged)",
					       st->tenant, st->wal_path, off, ws_strerror((int)got));
			if (got != (ssize_t)fsz ||
			    ws_wal_cursor_step(&probe, ws_reader_buf(st->reader) + st->small_off, NULL) == 1)
				return 0;
		}
	}
	return done_empty(st, out);
}

/*
 * 3. Fence: a pure read of the watermark before the first upload, so a
 * stale owner writes nothing. The watermark may have moved since step 2
 * (another writer of our own epoch, or a takeover at a lower level): the
 * decision is made again from it.
 */
static int step_fence(struct ws_stream *st, struct tail *t, struct ws_outcome *out)
{
	int rc;
	WS_ASSERT(st->part_count == 0); /* nothing uploaded before the fencing read */
	if ((rc = WS_FAULT("stream.before_fence")) != 0)
		return ws_fail(rc, "tenant %s: injected fault before the fencing read", st->tenant);
	if ((rc = refresh_wm(st)) != 0)
		return rc;
	if (st->have_wm && fenced_by(st, &st->wm))
		return done_fenced(st, out);
	if (t->kind != WS_MANIFEST_REBASE) {
		/* NEXT_GEN: continuous holds only while the watermark read now is
		 * our own last write (refresh_wm), and the live WAL must be
		 * another generation than the one it names. */
		bool still = st->have_wm &&
			     ((t->kind == WS_MANIFEST_CONTINUE && ws_fmt_gen_equal(&st->wm.gen, &t->sc.gen) &&
			       st->wm.last_frame + 1 == t->sc.first_frame && st->wm.end_cksum[0] == t->sc.seed[0] &&
			       st->wm.end_cksum[1] == t->sc.seed[1]) ||
			      (t->kind == WS_MANIFEST_NEXT_GEN && st->continuous && st->wm.epoch == st->epoch &&
			       st->wm.pointer_generation == st->pg && !ws_fmt_gen_equal(&st->wm.gen, &t->sc.gen)));
		if (!still)
			scan_from_top(t);
	}
	/* The WAL was reset and nothing new written yet: the database file is
	 * exactly the last shipped state. */
	if (t->kind == WS_MANIFEST_NEXT_GEN && t->sc.gen.wal_magic == 0)
		return done_empty(st, out);
	rc = ws_key_gen_prefix(t->sc.prefix, sizeof(t->sc.prefix), st->tenant, st->epoch, st->pg, &t->sc.gen);
	if (rc)
		return ws_fail(rc, "tenant %s: key too long", st->tenant);
	return 0;
}

/*
 * A re-base reads and uploads the whole database file: taken for a call
 * that then cannot prove continuity (a stream parked over the open-file
 * budget, a database replaced at its path), the write lock would hold the
 * application's writers for all of it. Let go before the scan; the call
 * goes on as an unlocked one (its own read transaction keeps the image
 * exact), and walship's WAL checkpoint waits for a later locked call.
 */
static void unlock_for_rebase(struct ws_stream *st, struct tail *t)
{
	if (!t->locked || t->kind != WS_MANIFEST_REBASE)
		return;
	write_lock_release(st);
	t->locked = false;
	st->lock_call = false;
	ws_debug("tenant %s: re-basing: the database's write lock is let go first", st->tenant);
}

/* 4. Scan and check the WAL from the first frame to ship, publishing each
 * slot as a batch (pipe.h); learns the last commit and its database size. */
static int step_scan(struct ws_stream *st, struct tail *t, struct ws_outcome *out)
{
	struct scan *sc = &t->sc;
	int rc;
	WS_ASSERT(st->held >= 0); /* every frame is read under our read mark */
	unlock_for_rebase(st, t);
	/* Shed stops reading at a full ring, except while re-basing: the
	 * snapshot must be whole, and a database larger than the ring would
	 * otherwise never re-base at all. */
	st->shed_nowait = st->policy == WS_POLICY_SHED && !st->drain && t->kind != WS_MANIFEST_REBASE;
	/* The work bound, never while re-basing: the snapshot names the cut. */
	st->tail_stop_ms = 0;
	if (st->tail_ms && t->kind != WS_MANIFEST_REBASE) {
		uint64_t at = ws_mono_ms() + st->tail_ms;
		if (st->key_ms && st->wm_put_mono_ms && st->wm_put_mono_ms + st->key_ms > at)
			at = st->wm_put_mono_ms + st->key_ms; /* one watermark write per key_ms */
		st->tail_stop_ms = at;
	}
	if (sc->gen.wal_magic != 0) {
		rc = scan_checked(st, sc, t->wal_bytes, t->kind == WS_MANIFEST_REBASE ? LIMIT_REBASE : LIMIT_STOP);
		if (rc)
			return rc;
		/* Stopped before any commit (one transaction longer than the
		 * bound): going on is the only way forward. */
		if (st->early_stop && sc->cur.last_commit < sc->first_frame) {
			st->early_stop = false;
			st->tail_stop_ms = 0;
			rc = scan_checked(st, sc, t->wal_bytes, LIMIT_ONE_TXN);
			if (rc)
				return rc;
		}
		if (st->shed_stop && (rc = scan_rest(st, sc, t->wal_bytes)) != 0)
			return rc;
	}
	if ((rc = WS_FAULT("stream.after_scan")) != 0)
		return ws_fail(rc, "tenant %s: injected fault after the WAL scan", st->tenant);
	t->last = sc->gen.wal_magic ? sc->cur.last_commit : 0;
	if (t->kind != WS_MANIFEST_REBASE && t->last < sc->first_frame)
		return done_empty(st, out); /* only an uncommitted transaction was there */
	if (t->last > 0) {
		t->db_pages = sc->cur.commit_db_size;
	} else {
		uint32_t ps;
		rc = db_header(st, &ps, &t->db_pages);
		if (rc)
			return rc;
		if (sc->gen.wal_magic == 0)
			sc->gen.page_size = ps;
	}
	return 0;
}

/* 5. A re-base uploads the database file read under the same read mark. */
static int step_snapshot(struct ws_stream *st, struct tail *t)
{
	int rc;
	if (t->kind != WS_MANIFEST_REBASE)
		return 0;
	rc = upload_snapshot(st, &t->sc, t->db_pages);
	if (rc)
		return rc;
	if ((rc = WS_FAULT("stream.after_snapshot")) != 0)
		return ws_fail(rc, "tenant %s: injected fault after the snapshot", st->tenant);
	return 0;
}

/* The outcome of a call that shed its range (nothing acknowledged). */
static int done_shed(const struct ws_stream *st, const struct tail *t, struct ws_outcome *out)
{
	memset(out, 0, sizeof(*out));
	out->kind = WS_OUTCOME_SHED;
	out->u.shed.checkpoint_seq = t->sc.gen.checkpoint_seq;
	/* A re-base of a database without frames (no WAL) shed only its
	 * snapshot: no frame range, 0..0 as Streamed says of one. */
	if (t->last >= t->sc.first_frame) {
		out->u.shed.first_frame = t->sc.first_frame;
		out->u.shed.last_frame = t->last;
	}
	fill_bp(st, &out->u.shed.backpressure);
	fill_rpo(st, &out->u.shed.rpo);
	return TAIL_DONE;
}

/*
 * 6. Wait until everything published is durable (or failed), check that
 * what was read still belongs together (the WAL under a re-base, the file
 * at the path), and settle what of it the manifest names: all, the
 * persisted prefix, or nothing (Shed).
 */
static int step_settle(struct ws_stream *st, struct tail *t, struct ws_outcome *out)
{
	int rc;
	/* Every slot read (the upload thread reads some) before the WAL header
	 * is checked again, every part durable before the manifest. */
	ws_pipe_drain(st->pipe);
	WS_ASSERT(ws_pipe_used(st->pipe) == 0);
	/* Frames and pages came from the file our read mark pins only while
	 * the path still names it (invariant 9). First: the WAL at the path of
	 * a replaced database is another database's, free to move under us,
	 * and starting over would only meet it again. */
	if (!ident_same(st))
		return ws_fail(WS_EREPLACED, "tenant %s: database %s was replaced at its path during the call; "
			       "nothing acknowledged (the next call re-bases)", st->tenant, st->db_path);
	if (t->kind == WS_MANIFEST_CONTINUE && !st->continuous && t->sc.gen.wal_magic != 0) {
		/* A fresh read mark: see step_write_watermark. What was
		 * scanned is still a state the source committed, and ships. */
		rc = wal_unmoved(st, &t->sc);
		if (rc < 0)
			return rc;
		t->unproven = rc == 0;
	}
	if (t->kind == WS_MANIFEST_REBASE && t->sc.gen.wal_magic != 0) {
		rc = wal_unmoved(st, &t->sc);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			ws_info("tenant %s: the WAL was restarted (or emptied by a TRUNCATE checkpoint) during the "
				"re-base; starting it over", st->tenant);
			return TAIL_RETRY;
		}
	}
	rc = settle(st, &t->sc, t->kind, &t->last, &t->db_pages);
	if (rc < 0)
		return rc;
	if (rc == 1)
		return done_shed(st, t, out);
	return 0;
}

/*
 * The earliest time the next manifest may be stamped with: the stamp of
 * the manifest the watermark names (read once from the sink when this
 * stream did not write it), so stamps never go back along a tenant's
 * history, whatever the clock does (NTP stepping it back, a takeover by a
 * host whose clock is behind). restore --time takes the run of manifests
 * from the oldest it loads that are stamped at or before the time; that
 * run starts at a re-base or a checkpoint's cut, and a re-base stamped
 * before the history behind it would let a time before that history
 * restore commits made after it. A stamp raised to the floor is later
 * than the read it stands for, never earlier: a restore by time then
 * yields an earlier state, never a later one.
 */
static int64_t stamp_floor(struct ws_stream *st)
{
	struct ws_fmt_manifest m;
	struct ws_buf b;

	if (!st->have_wm)
		return INT64_MIN;
	if (strcmp(st->stamp_key, st->wm.manifest_key) == 0)
		return st->stamp_ms;
	/* Unreadable (retention, a damaged object): the watermark's own time
	 * is the best known; it is not later than its manifest's stamp. */
	st->stamp_ms = st->wm.time_ms;
	ws_buf_init(&b, 256u << 20);
	/* A carried one is in hand (this call's fencing read). */
	const bool carried = st->wm.carried_len && st->carry.len == st->wm.carried_len;
	if ((carried || ws_store_get(st->sink->store, st->wm.manifest_key, 0, UINT64_MAX, &b, NULL) == 0) &&
	    ws_fmt_manifest_decode(carried ? st->carry.data : b.data, carried ? st->carry.len : b.len, &m) == 0) {
		if (strcmp(m.tenant, st->tenant) == 0 && m.time_ms > st->stamp_ms)
			st->stamp_ms = m.time_ms;
		ws_fmt_manifest_free(&m);
	}
	ws_buf_free(&b);
	snprintf(st->stamp_key, sizeof(st->stamp_key), "%s", st->wm.manifest_key);
	return st->stamp_ms;
}

/* 7. The generation manifest: names every batch and part of this call,
 * chained to the manifest the watermark names (unless re-basing). */
/*
 * A manifest that carries its batch is that batch's upload too, and meets
 * a struggling sink as a batch would (pipe.h): under `block` it is tried
 * again, with a growing pause, until it lands or the engine stops (never
 * under the application's write lock); under `shed` the call sheds its
 * range (no manifest, no watermark: the next call ships it); otherwise
 * the call fails. 0, TAIL_DONE (shed: *out filled) or the error.
 */
static int put_inline_manifest(struct ws_stream *st, struct tail *t, const struct iovec *iov,
			       struct ws_outcome *out)
{
	const enum ws_policy policy = st->lock_call && st->policy == WS_POLICY_BLOCK ? WS_POLICY_THROTTLE
									       : st->policy;
	uint32_t backoff = WS_PIPE_BACKOFF_MIN_MS;
	for (;;) {
		int rc = ws_store_putv(st->sink->store, t->mkey, iov, 1, WS_PUT_CREATE, NULL, NULL);
		if (rc == WS_EPRECOND)
			rc = ws_store_created_same(st->sink->store, t->mkey, iov, 1);
		if (rc == 0)
			return 0;
		if (rc == WS_ETHROTTLED)
			st->call_throttle++;
		/* The caller retries the whole call after the store's
		 * Retry-After (ws_store.throttle_fail_fast): nothing shed. */
		if (!ws_err_transient(rc) || (rc == WS_ETHROTTLED && st->sink->store->throttle_fail_fast))
			return ws_fail_wrap(rc, "tenant %s: upload %s", st->tenant, t->mkey);
		if (policy == WS_POLICY_SHED && !st->drain) {
			st->frames_shed = t->last - t->sc.first_frame + 1;
			ws_info("tenant %s: shed frames %" PRIu64 "..%" PRIu64 " (%s)", st->tenant, t->sc.first_frame,
				t->last, ws_strerror(rc));
			return done_shed(st, t, out);
		}
		/* As the pipe's uploads (the engine stops them with ws_pipe_give_up). */
		if (!ws_pipe_waits_out(st->pipe, policy, rc))
			return ws_fail_wrap(rc, "tenant %s: upload %s (carrying its batch; policy %s%s; nothing "
					    "acknowledged)", st->tenant, t->mkey, ws_policy_name(policy),
					    st->lock_call ? ", not waited out under the database's write lock" : "");
		ws_debug("tenant %s: sink struggling (%s); block policy waits %u ms and retries %s", st->tenant,
			 ws_errmsg(), backoff, t->mkey);
		ws_sleep_ms(backoff);
		backoff = ws_pipe_backoff_next(backoff);
	}
}

/* This call ships one inline batch, and no snapshot, on top of the
 * watermark: what a carried manifest may be. A re-base names no
 * predecessor: it is never carried. */
static bool one_inline_on_wm(const struct ws_stream *st, const struct tail *t)
{
	return t->kind != WS_MANIFEST_REBASE && st->have_wm && !st->snap_count && st->inl_held &&
	       st->batch_count == 1;
}

/* ... and continues the watermark's generation: what a carried manifest
 * may take in. */
static bool one_inline_continue(const struct ws_stream *st, const struct tail *t)
{
	return t->kind == WS_MANIFEST_CONTINUE && one_inline_on_wm(st, t);
}

/*
 * The most bytes the carried manifest of sequence seq may grow to: between
 * 1/2 and 3/2 of inline_batch_bytes_max, drawn from the tenant's name and
 * seq (the same for every merge into it). Tenants that write alike would
 * otherwise pass one bound on the same round and all store their merges
 * together: one round of two writes a tenant, which ages every one of them
 * by as much again, and then a round of one.
 */
static uint64_t carry_bound(const struct ws_stream *st, uint64_t seq)
{
	uint64_t h = ws_xxh64(st->tenant, strlen(st->tenant)) ^ (seq * 0x9e3779b97f4a7c15ull);
	/* splitmix64's finaliser: seq alone changes every bit */
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	h ^= h >> 31;
	return st->inline_max / 2 + h % (st->inline_max + 1);
}

/*
 * Whether this call's manifest of mlen bytes (sequence seq) may be carried
 * by its watermark (one write for the call): one_inline_on_wm (a
 * continuation, or the first manifest of a next generation), while
 * the sink holds writes back (or always, as configured), and at most
 * carry_bound, merges included (each merge writes it whole again, and
 * each fencing read reads it back: the bound trades request count against
 * bytes).
 */
static bool carry_wanted(struct ws_stream *st, const struct tail *t, uint64_t seq, uint64_t mlen)
{
	if (st->carry_mode == WS_CARRY_NEVER || !one_inline_on_wm(st, t) || mlen > carry_bound(st, seq))
		return false;
	return st->carry_mode == WS_CARRY_ALWAYS || ws_store_pressed(st->sink->store);
}

/* The carried manifest the watermark names, stored under its own key (the
 * key names its content: any earlier store of it wrote the same bytes),
 * so that the manifest written now can link to it. */
static int store_carried(struct ws_stream *st)
{
	struct iovec iov = { st->carry.data, st->carry.len };
	int rc;
	if (st->carry.len != st->wm.carried_len)
		return ws_fail(WS_EINCOMPLETE, "tenant %s: the manifest %s its watermark carries was not kept",
			       st->tenant, st->wm.manifest_key);
	rc = WS_FAULT("stream.before_carried_store");
	if (rc)
		return ws_fail(rc, "tenant %s: injected fault before storing the carried manifest", st->tenant);
	rc = put_immutable(st, st->wm.manifest_key, &iov, 1);
	if (rc)
		return rc;
	st->call.puts++;
	st->call.bytes += iov.iov_len;
	st->carry_own = false; /* stored: what follows links to it */
	return 0;
}

/*
 * A tail that merges into the carried manifest the watermark names (which
 * this stream wrote and stored nowhere): the new manifest takes that one's
 * place, with its kind (CONTINUE, or the NEXT_GEN that began this
 * generation), sequence, predecessor, first frame and seed, its inline
 * batches and then this call's. p is that manifest, decoded; refs
 * and iov are filled for the encoder.
 */
static int merge_carried(struct ws_stream *st, struct ws_fmt_manifest *m, const struct ws_fmt_manifest *p,
			 struct ws_fmt_objref **refs, struct iovec **iov, int *iovcnt)
{
	const uint32_t n = p->batch_count + m->batch_count;
	*refs = calloc(n, sizeof(**refs));
	*iov = calloc(n + 1, sizeof(**iov));
	if (!*refs || !*iov)
		return -ENOMEM;
	for (uint32_t k = 0; k < p->batch_count; k++) {
		const struct ws_fmt_objref *r = &p->batches[k];
		WS_ASSERT(ws_fmt_objref_inline(r)); /* carried manifests hold inline batches only */
		(*refs)[k] = *r;
		(*iov)[k].iov_base = st->carry.data + r->inline_off;
		(*iov)[k].iov_len = r->length;
	}
	memcpy(*refs + p->batch_count, m->batches, m->batch_count * sizeof(**refs));
	for (int i = 0; i < m->inline_iovcnt; i++)
		(*iov)[p->batch_count + (uint32_t)i] = m->inline_iov[i];
	*iovcnt = (int)p->batch_count + m->inline_iovcnt;
	m->batches = *refs;
	m->batch_count = n;
	m->inline_iov = *iov;
	m->inline_iovcnt = *iovcnt;
	m->kind = p->kind; /* a carried NEXT_GEN stays the generation's first */
	m->wm_seq = p->wm_seq;
	m->first_frame = p->first_frame;
	m->valid_from_frame = p->valid_from_frame;
	m->seed_cksum[0] = p->seed_cksum[0];
	m->seed_cksum[1] = p->seed_cksum[1];
	snprintf(m->prev_key, sizeof(m->prev_key), "%s", p->prev_key);
	memcpy(m->prev_sha, p->prev_sha, WS_SHA256_LEN);
	m->prev_length = p->prev_length;
	if (m->time_ms < p->time_ms)
		m->time_ms = p->time_ms;
	return 0;
}

static int step_write_manifest(struct ws_stream *st, struct tail *t, struct ws_outcome *out)
{
	const struct scan *sc = &t->sc;
	struct ws_fmt_manifest m, pm;
	struct ws_fmt_objref *mrefs = NULL;
	struct iovec *miov = NULL;
	int miovcnt = 0;
	bool have_pm = false;
	char shahex[WS_SHA256_HEX_LEN + 1];
	int rc;

	WS_ASSERT(t->kind == WS_MANIFEST_REBASE || t->last >= sc->first_frame);
	memset(&m, 0, sizeof(m));
	snprintf(m.tenant, sizeof(m.tenant), "%s", st->tenant);
	m.epoch = st->epoch;
	m.pointer_generation = st->pg;
	m.wm_seq = (st->have_wm ? st->wm.seq : 0) + 1;
	/* Stamped after the scan, not before it: a reused WAL file lets the
	 * scan meet commits made while it ran, and restore by time must never
	 * yield a commit made after the time it was asked for. */
	t->sc.read_ms = ws_wall_ms();
	m.time_ms = t->sc.read_ms;
	{
		int64_t floor = stamp_floor(st);
		if (m.time_ms < floor)
			m.time_ms = floor;
	}
	m.gen = sc->gen;
	m.kind = t->kind;
	m.first_frame = sc->first_frame;
	m.last_frame = t->last;
	m.valid_from_frame = t->kind == WS_MANIFEST_REBASE ? t->last : sc->first_frame;
	m.seed_cksum[0] = sc->seed[0];
	m.seed_cksum[1] = sc->seed[1];
	m.end_cksum[0] = t->last ? sc->cur.commit_cksum[0] : sc->seed[0];
	m.end_cksum[1] = t->last ? sc->cur.commit_cksum[1] : sc->seed[1];
	m.db_pages = t->db_pages;
	if (st->have_wm && t->kind != WS_MANIFEST_REBASE) {
		snprintf(m.prev_key, sizeof(m.prev_key), "%s", st->wm.manifest_key);
		memcpy(m.prev_sha, st->wm.manifest_sha, WS_SHA256_LEN);
		m.prev_length = st->wm.manifest_length;
	}
	m.batch_count = st->batch_count;
	m.batches = st->batches;
	m.snap_count = st->snap_count;
	m.snaps = st->snaps;
	struct iovec inl[2];
	for (uint32_t k = 0; k < m.batch_count; k++) {
		if (!ws_fmt_objref_inline(&m.batches[k]))
			continue;
		/* The batch held in its slot (part_done): the only inline one. */
		struct ws_pipe_desc *d = ws_pipe_desc(st->pipe, st->inl_idx);
		WS_ASSERT(st->inl_held && m.inline_iovcnt == 0 &&
			  m.batches[k].length == d->hdr_len + d->payload_len);
		inl[0].iov_base = d->hdr;
		inl[0].iov_len = d->hdr_len;
		inl[1].iov_base = ws_pipe_slot(st->pipe, st->inl_idx);
		inl[1].iov_len = d->payload_len;
		m.inline_iov = inl;
		m.inline_iovcnt = 2;
	}
	if (st->have_wm && st->wm.carried_len && t->kind != WS_MANIFEST_REBASE) {
		/* The watermark carries the manifest this one follows: merge
		 * into it when this stream wrote it and this call ships one
		 * inline batch more of its generation; otherwise store it first,
		 * so that this manifest can link to it. */
		if (st->carry_own && one_inline_continue(st, t)) {
			rc = ws_fmt_manifest_decode(st->carry.data, st->carry.len, &pm);
			if (rc) {
				rc = ws_fail_wrap(rc, "tenant %s: the carried manifest %s", st->tenant,
						  st->wm.manifest_key);
				goto out;
			}
			have_pm = true;
			if (pm.kind == WS_MANIFEST_REBASE || !pm.prev_key[0] || pm.wm_seq != st->wm.seq ||
			    pm.last_frame + 1 != m.first_frame || !ws_fmt_gen_equal(&pm.gen, &m.gen) ||
			    pm.end_cksum[0] != m.seed_cksum[0] || pm.end_cksum[1] != m.seed_cksum[1]) {
				rc = ws_fail(WS_EINCOMPLETE, "tenant %s: this call does not continue the carried "
					     "manifest %s", st->tenant, st->wm.manifest_key);
				goto out;
			}
			if ((rc = merge_carried(st, &m, &pm, &mrefs, &miov, &miovcnt)) != 0)
				goto out;
			t->merged = true;
		} else if ((rc = store_carried(st)) != 0) {
			goto out;
		}
	}
	rc = ws_fmt_manifest_encode(&m, &st->work->scratch);
	if (rc) {
		rc = ws_fail(rc, "tenant %s: cannot encode manifest", st->tenant);
		goto out;
	}

	t->mlen = st->work->scratch.len;
	ws_sha256(st->work->scratch.data, st->work->scratch.len, t->msha);
	ws_hex(t->msha, 8, shahex);
	if (snprintf(t->mkey, sizeof(t->mkey), "%s/m%016" PRIx64 "-%s", sc->prefix, m.wm_seq, shahex) >=
	    (int)sizeof(t->mkey)) {
		rc = ws_fail(WS_ETOOBIG, "tenant %s: manifest key too long", st->tenant);
		goto out;
	}
	/* Carried: the watermark is this manifest's one write (step 8). */
	t->carried = carry_wanted(st, t, m.wm_seq, t->mlen);
	if (t->carried) {
		ws_buf_reset(&st->carry_next);
		rc = ws_buf_append(&st->carry_next, st->work->scratch.data, st->work->scratch.len);
		if (rc)
			goto out;
	} else {
		rc = WS_FAULT("stream.before_manifest_put");
		if (rc) {
			rc = ws_fail(rc, "tenant %s: injected fault before manifest upload", st->tenant);
			goto out;
		}
		struct iovec iov = { st->work->scratch.data, st->work->scratch.len };
		rc = m.inline_iovcnt ? put_inline_manifest(st, t, &iov, out) : put_immutable(st, t->mkey, &iov, 1);
		if (rc)
			goto out;
		st->call.puts++;
		st->call.bytes += iov.iov_len;
	}
	snprintf(st->stamp_key, sizeof(st->stamp_key), "%s", t->mkey);
	st->stamp_ms = m.time_ms;
out:
	if (have_pm)
		ws_fmt_manifest_free(&pm);
	free(mrefs);
	free(miov);
	return rc;
}

/*
 * 8. The watermark, last, by compare-and-swap on the one we fenced with: it
 * names only what is now durable. Then keep a read mark without a gap: from
 * here on a new generation is provably the continuation of what we shipped.
 */
static int step_write_watermark(struct ws_stream *st, struct tail *t)
{
	struct ws_fmt_watermark nw;
	struct ws_etag new_etag = { .s = "" };
	char wmkey[WS_KEY_MAX];
	int rc;

	WS_ASSERT(t->mkey[0] != '\0'); /* the manifest it names is durable */
	memset(&nw, 0, sizeof(nw));
	nw.version = 2;
	snprintf(nw.tenant, sizeof(nw.tenant), "%s", st->tenant);
	nw.epoch = st->epoch;
	nw.pointer_generation = st->pg;
	/* A manifest merged into the carried one takes its place, and its
	 * sequence: consecutive manifests still differ by exactly 1. */
	nw.seq = (st->have_wm ? st->wm.seq : 0) + (t->merged ? 0 : 1);
	/* The time as of which everything the source had committed is durable
	 * (its age is the RPO): when this call began, if it ships all it
	 * found; a partial ship (shed, or stopped at the work bound) leaves
	 * commits behind whose age is unknown, so the time stays where the
	 * last complete ship put it (from when the stream opened if none). */
	bool complete = st->frames_shed == 0 && !st->early_stop && !t->unproven;
	uint64_t nw_mono;
	if (complete) {
		nw.time_ms = st->call_wall_ms;
		nw_mono = st->call_mono_ms;
	} else if (st->have_wm) {
		nw.time_ms = st->wm.time_ms;
		nw_mono = st->wm.seq == st->own_seq ? st->own_mono_ms : 0;
	} else {
		nw.time_ms = st->opened_ms;
		nw_mono = 0;
	}
	nw.gen = t->sc.gen;
	nw.last_frame = t->last;
	nw.end_cksum[0] = t->last ? t->sc.cur.commit_cksum[0] : t->sc.seed[0];
	nw.end_cksum[1] = t->last ? t->sc.cur.commit_cksum[1] : t->sc.seed[1];
	snprintf(nw.manifest_key, sizeof(nw.manifest_key), "%s", t->mkey);
	memcpy(nw.manifest_sha, t->msha, WS_SHA256_LEN);
	nw.manifest_length = t->mlen;
	if (t->carried) {
		nw.carried = st->carry_next.data;
		nw.carried_len = st->carry_next.len;
	}
	rc = ws_fmt_watermark_encode(&nw, &st->work->scratch);
	if (rc)
		return ws_fail(rc, "tenant %s: cannot encode watermark", st->tenant);
	rc = ws_key_watermark(wmkey, sizeof(wmkey), st->tenant);
	if (rc)
		return rc;
	rc = WS_FAULT(t->carried ? "stream.before_carrying_watermark_put" : "stream.before_watermark_put");
	if (rc)
		return ws_fail(rc, "tenant %s: injected fault before watermark write", st->tenant);
	st->pend_seq = nw.seq;
	memcpy(st->pend_msha, nw.manifest_sha, WS_SHA256_LEN);
	st->pend_mono_ms = nw_mono;
	rc = ws_store_put(st->sink->store, wmkey, st->work->scratch.data, st->work->scratch.len,
			  st->have_wm ? WS_PUT_CAS : WS_PUT_CREATE, st->have_wm ? &st->wm_etag : NULL, &new_etag);
	if (rc == WS_EPRECOND) {
		/* Someone wrote the watermark since our fencing read. Batches and
		 * the manifest are already up: this is not Fenced (a pure read),
		 * it is a lost race, and nothing of it is acknowledged. Unless
		 * the watermark there is this very one: an earlier attempt of
		 * this write landed and its reply was lost. */
		struct ws_fmt_watermark before = st->wm;
		bool had = st->have_wm, was_continuous = st->continuous;
		int rc2 = refresh_wm(st);
		if (rc2)
			return rc2;
		if (st->have_wm && wm_same_write(&st->wm, &nw)) {
			ws_info("tenant %s: watermark %s: the compare-and-swap was refused, but the watermark there "
				"is this write (an earlier attempt landed): written", st->tenant, wmkey);
			new_etag = st->wm_etag;
			st->wm = before;
			st->have_wm = had;
			st->continuous = was_continuous;
			rc = 0;
		} else if (st->have_wm && fenced_by(st, &st->wm))
			return ws_fail(WS_ELOSTRACE, "tenant %s: epoch %llu pointer generation %llu took the "
				       "stream over after our fencing read (we are %llu/%llu); objects uploaded "
				       "by this call are not named by any watermark; nothing acknowledged",
				       st->tenant, (unsigned long long)st->wm.epoch,
				       (unsigned long long)st->wm.pointer_generation, (unsigned long long)st->epoch,
				       (unsigned long long)st->pg);
		else {
			st->wm_loaded = false;
			return ws_fail(WS_EPRECOND, "tenant %s: watermark %s changed concurrently (another writer "
				       "with epoch %llu?); nothing acknowledged", st->tenant, wmkey,
				       (unsigned long long)st->epoch);
		}
	}
	if (rc) {
		st->wm_loaded = false; /* ambiguous: re-read before the next decision */
		return ws_fail_wrap(rc, "tenant %s: write watermark %s", st->tenant, wmkey);
	}
	st->call.puts++;
	st->call.bytes += st->work->scratch.len;
	st->wm_put_mono_ms = ws_mono_ms();
	rc = WS_FAULT("stream.after_watermark_put");
	if (rc)
		return ws_fail(rc, "tenant %s: injected fault after watermark write", st->tenant);

	t->prev = st->wm;
	t->had = st->have_wm;
	/* Nothing is held between calls: the next call's fencing read brings
	 * back the manifest this watermark carries, still this stream's to
	 * merge into while the watermark there is this write (refresh_wm). */
	carry_drop(st);
	ws_buf_free(&st->carry_next);
	st->carry_own = t->carried;
	st->call.carried = t->carried;
	nw.carried = NULL;
	st->wm = nw;
	st->wm_etag = new_etag;
	st->have_wm = true;
	st->own_seq = nw.seq;
	memcpy(st->own_msha, nw.manifest_sha, WS_SHA256_LEN);
	st->own_mono_ms = nw_mono;
	/* No etag known (the store gave none, even to a HEAD): re-read it
	 * before the next swap rather than send one that cannot match. */
	st->wm_loaded = new_etag.s[0] != '\0';
	/* continuous: no frame past this watermark can have been
	 * checkpointed away unshipped, so a new generation continues it
	 * (NEXT_GEN). A read mark held since our last watermark, or a REBASE
	 * (its snapshot under this mark, the WAL checked unmoved), proves it.
	 * A CONTINUE on a fresh mark (after a park, a restart, a takeover)
	 * does not by itself: the mark may be 0 over a WAL whose frames past
	 * the watermark were backfilled and never shipped, and mark 0 does not
	 * hold a restart off. Only when the call shipped all it scanned with
	 * the WAL unmoved after the scan did that generation end no later than
	 * what shipped (while mark 0 is held nothing more can be backfilled,
	 * and a restart needs everything backfilled). Otherwise the shipped
	 * prefix is acknowledged, and a new generation re-bases. */
	bool proven = st->continuous || t->kind != WS_MANIFEST_CONTINUE ||
		      (!t->unproven && st->frames_shed == 0 && !st->early_stop);
	/* After a partial ship (shed, or stopped at the work bound) the old
	 * mark stays: frames between what shipped and it must not be
	 * checkpointed away. */
	if (!t->locked && st->frames_shed == 0 && !st->early_stop)
		handover_read(st);
	st->continuous = proven;
	return 0;
}

/* 9. Report: Streamed for a continuation (or the very first watermark),
 * Restarted when the stream started over from a new generation. */
static void step_report(const struct ws_stream *st, const struct tail *t, struct ws_outcome *out)
{
	struct ws_backpressure_report bp;
	memset(out, 0, sizeof(*out));
	fill_bp(st, &bp);
	if (t->kind == WS_MANIFEST_CONTINUE || !t->had) {
		out->kind = WS_OUTCOME_STREAMED;
		snprintf(out->u.streamed.generation_key, WS_GEN_KEY_MAX, "%s", t->mkey);
		out->u.streamed.first_frame = t->last ? t->sc.first_frame : 0;
		out->u.streamed.last_frame = t->last;
		out->u.streamed.checkpoint_seq = t->sc.gen.checkpoint_seq;
		out->u.streamed.frame_count = t->last ? t->last - t->sc.first_frame + 1 : 0;
		out->u.streamed.backpressure = bp;
		fill_rpo(st, &out->u.streamed.rpo);
	} else {
		out->kind = WS_OUTCOME_RESTARTED;
		snprintf(out->u.restarted.generation_key, WS_GEN_KEY_MAX, "%s", t->mkey);
		ws_gen_to_public(&t->prev.gen, t->prev.version >= 2, &out->u.restarted.previous_generation);
		ws_gen_to_public(&t->sc.gen, true, &out->u.restarted.new_generation);
		out->u.restarted.first_frame = t->last ? 1 : 0;
		out->u.restarted.last_frame = t->last;
		out->u.restarted.frame_count = t->last;
		out->u.restarted.backpressure = bp;
		fill_rpo(st, &out->u.restarted.rpo);
	}
}

/* The frames this attempt set out to ship, for the engine's report of a refused call. */
static void call_range(struct ws_stream *st, const struct tail *t)
{
	st->call.checkpoint_seq = t->sc.gen.checkpoint_seq;
	st->call.first_frame = t->last >= t->sc.first_frame ? t->sc.first_frame : 0;
	st->call.last_frame = t->last >= t->sc.first_frame ? t->last : 0;
}

static int tail_inner(struct ws_stream *st, struct ws_outcome *out, bool locked)
{
	struct tail t;
	int rc;

	memset(out, 0, sizeof(*out));
	memset(&t, 0, sizeof(t));
	t.locked = locked;
	st->batch_count = st->snap_count = 0;
	st->high_water = 0;
	if ((rc = step_read_generation(st, &t)) != 0 || (rc = step_decide_continuity(st, &t, out)) != 0 ||
	    (rc = step_fence(st, &t, out)) != 0 || (rc = step_scan(st, &t, out)) != 0 ||
	    (rc = step_snapshot(st, &t)) != 0 || (rc = step_settle(st, &t, out)) != 0 ||
	    (rc = step_write_manifest(st, &t, out)) != 0 || (rc = step_write_watermark(st, &t)) != 0) {
		call_range(st, &t);
		return rc == TAIL_DONE ? 0 : rc;
	}
	call_range(st, &t);
	step_report(st, &t, out);
	return 0;
}

/* A stale owner ships nothing, so its read marks protect nothing: let
 * the application's WAL checkpoints through (issue: a fenced stream must
 * not pin the WAL for ever). The next tail that is not fenced re-bases. */
static void release_reads(struct ws_stream *st)
{
	for (int i = 0; i < 2; i++)
		conn_end_read(st, i);
	st->held = -1;
	st->continuous = false;
}

/* Per attempt of a call: no part published, nothing shed. */
static void attempt_reset(struct ws_stream *st)
{
	st->part_count = 0;
	st->part_base = st->pipe->ring.head;
	st->upload_why[0] = '\0';
	st->upload_why_key[0] = '\0';
	st->frames_shed = 0;
	st->shed_stop = false;
	st->shed_nowait = false;
	st->early_stop = false;
	st->past_index = false;
	st->tail_stop_ms = 0;
	st->inl_held = false;
}

/* The generation the watermark names has passed wal_checkpoint_bytes. */
static bool wm_gen_past_ckpt_bytes(const struct ws_stream *st)
{
	return st->wm.last_frame * ws_wal_frame_size(st->wm.gen.page_size) >= st->wal_checkpoint_bytes;
}

/*
 * Whether the live WAL is still the generation the watermark names. A
 * WAL that restarted since (a writer's own checkpoint) is as long as its
 * new frames, not as the watermark's last frame: locking writers out and
 * checkpointing it then would only restart the WAL a second time, a few
 * frames in. A restart between this look and the lock is caught after
 * the call (wm_gen_past_ckpt_bytes on what it shipped).
 */
static bool wal_still_wm_gen(struct ws_stream *st)
{
	struct ws_wal_hdr wh;
	if (file_refresh(st, st->wal_path, &st->wal_fd, &st->wal_slot) != 0 || file_size(st->wal_fd) == 0)
		return false;
	if (read_wal_gen(st, &wh) != 0)
		return false; /* the call's own read of it says what is wrong */
	return wh.magic == st->wm.gen.wal_magic && wh.checkpoint_seq == st->wm.gen.checkpoint_seq &&
	       wh.salt1 == st->wm.gen.salt1 && wh.salt2 == st->wm.gen.salt2;
}

int ws_stream_tail_frames(struct ws_stream *st, struct ws_outcome *out)
{
	bool locked = false;
	int rc;

	/* The shard's per-call arrays, where another stream's call left them. */
	use_work(st, st->work);
	st->call_wall_ms = ws_wall_ms();
	st->call_mono_ms = ws_mono_ms();
	memset(&st->call, 0, sizeof(st->call));
	st->call_throttle = 0;
	st->frames_shed = 0;
	st->throttle_at_start = __atomic_load_n(&st->sink->store->stats.throttle_retries, __ATOMIC_RELAXED);
	/* Known to be fenced: answer from a fresh read of the watermark, with
	 * no read transaction taken. */
	if (st->have_wm && fenced_by(st, &st->wm)) {
		if ((rc = refresh_wm(st)) != 0)
			return rc;
		if (st->have_wm && fenced_by(st, &st->wm)) {
			release_reads(st);
			fill_fenced(st, out);
			return 0;
		}
	}
	/* The path names another file than the one we hold: a new life of the
	 * tenant. Let go of the old file; hold_read opens the new one and
	 * the call re-bases. */
	if (st->held >= 0 && !ident_same(st)) {
		ws_info("tenant %s: database %s was replaced at its path; re-basing", st->tenant, st->db_path);
		ws_stream_park(st);
	}
	rc = hold_read(st);
	if (rc == WS_EREPLACED) {
		ws_stream_park(st); /* replaced while we opened it: once more */
		rc = hold_read(st);
	}
	if (rc)
		return rc;
	/* The WAL in use (not the file, which SQLite reuses from the top
	 * without shrinking) is what must stay bounded. */
	/* The write lock stops the application's writers for the length of
	 * this call: only when the last call went through (a sink that fails
	 * now would hold them for its retries), and then with no upload
	 * waited out (publish_part). */
	if (st->have_wm && st->wm.gen.wal_magic != 0 && st->last_ok && wm_gen_past_ckpt_bytes(st) &&
	    wal_still_wm_gen(st)) {
		if ((rc = WS_FAULT("stream.before_checkpoint_lock")) != 0)
			return ws_fail(rc, "tenant %s: injected fault before the WAL checkpoint's write lock",
				       st->tenant);
		locked = write_lock_try(st);
	}
	st->lock_call = locked;
	st->pipe->on_done = part_done;
	st->pipe->arg = st;
	for (unsigned attempt = 1;; attempt++) {
		attempt_reset(st);
		rc = tail_inner(st, out, st->locker >= 0); /* an attempt that re-based let it go */
		/* A failed call may leave parts in flight: none outlives it. */
		ws_pipe_drain(st->pipe);
		if (rc != TAIL_RETRY)
			break;
		if (attempt == TAIL_ATTEMPTS) {
			rc = ws_fail(-EAGAIN, "tenant %s: the WAL restarted under %u re-bases in a row; nothing "
				     "acknowledged", st->tenant, attempt);
			break;
		}
	}
	st->pipe->on_done = NULL;
	st->pipe->arg = NULL;
	st->call.throttle_retries = call_throttle(st);
	st->call.frames_shed = st->frames_shed;
	st->call.spill_high_water = st->high_water;
	/* Ended early: what it read shipped, the rest is due at once. A call
	 * that shed (nothing, or a prefix) waits as shedding says. */
	st->call.ended_early = rc == 0 && st->early_stop && st->frames_shed == 0 &&
			       (out->kind == WS_OUTCOME_STREAMED || out->kind == WS_OUTCOME_RESTARTED);
	st->call.past_index = rc == 0 && st->past_index;
	st->lock_call = false;
	st->last_ok = rc == 0 && out->kind != WS_OUTCOME_SHED && out->kind != WS_OUTCOME_FENCED;
	locked = locked && st->locker >= 0;
	if (locked) {
		/* Nothing could commit since the scan began: on success every
		 * committed frame in the WAL is durable at the sink, unless the
		 * tail stopped at its work bound. */
		if (rc == 0 && out->kind != WS_OUTCOME_FENCED && out->kind != WS_OUTCOME_SHED &&
		    st->frames_shed == 0 && !st->early_stop && st->continuous && wm_gen_past_ckpt_bytes(st) &&
		    WS_FAULT("stream.before_wal_checkpoint") == 0)
			wal_checkpoint_locked(st);
		write_lock_release(st);
	}
	if (rc == WS_EREPLACED)
		ws_stream_park(st);
	else if (rc == 0 && out->kind == WS_OUTCOME_FENCED)
		release_reads(st);
	else if (st->held >= 0 && conn_db_mode(st, st->held) != DB_WAL)
		/* An empty file (shipped as an empty database) or one not in
		 * WAL mode: a read transaction there is a lock that keeps the
		 * application from writing, or from switching it to WAL. */
		release_reads(st);
	return rc;
}

uint64_t ws_stream_wal_checkpoints(const struct ws_stream *st) { return st->wal_checkpoints; }

void ws_stream_set_drain(struct ws_stream *st, bool drain) { st->drain = drain; }

void ws_stream_set_tail_bound(struct ws_stream *st, uint32_t tail_ms, uint32_t key_ms)
{
	st->tail_ms = tail_ms;
	st->key_ms = key_ms;
}
