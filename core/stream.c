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
 * tail_frames order of effects, each step durable before the next:
 * batches and snapshot parts, then the manifest, then the watermark by
 * compare-and-swap. The fencing check is a read of the watermark before the
 * first upload: a stale owner writes nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core_internal.h"
#include "pipe.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_log.h"
#include "ws_reader.h"
#include "ws_wal.h"

#define BATCH_BYTES_DEFAULT ((size_t)4 << 20)
#define BATCH_BYTES_MIN ((size_t)WS_WAL_PAGE_MAX + WS_WAL_FRAME_HDR_SIZE)
#define MAX_REFS 4096u
#define MAX_PARTS (2 * MAX_REFS)
#define WAL_CKPT_DEFAULT ((uint64_t)4 << 20)
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

	bool wm_loaded;       /* wm/wm_etag reflect the sink (have_wm says if one exists) */
	bool have_wm;
	struct ws_fmt_watermark wm;
	struct ws_etag wm_etag;
	int64_t opened_ms;

	struct ws_fmt_objref *batches;
	struct ws_fmt_objref *snaps;
	struct ws_part *parts;
	uint32_t batch_count, snap_count, part_count;
	uint32_t part_base;          /* ring index of parts[0] in this call */
	uint64_t call_throttle;      /* throttle retries of this call's parts */
	uint64_t frames_shed;        /* this call */
	bool shed_stop;              /* shed: the ring was full, reading stopped */
	bool shed_nowait;            /* this call sheds at a full ring */
	struct ws_stream_call call;
	uint64_t high_water;
	uint64_t throttle_at_start;   /* store's throttle_retries when this call began */
	uint64_t wal_checkpoint_bytes;
	uint64_t wal_checkpoints;
};

/* ---- SQLite read transaction ------------------------------------------ */

static int conn_open(struct ws_stream *st, sqlite3 **out)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(st->db_path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
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
	return 0;
}

static void conn_end_read(struct ws_stream *st, int i)
{
	if (st->conn[i])
		sqlite3_exec(st->conn[i], "COMMIT", NULL, NULL, NULL);
}

/* Make sure a read transaction is held; taking a fresh one breaks continuity. */
static int hold_read(struct ws_stream *st)
{
	int rc;
	if (st->held >= 0)
		return 0;
	rc = conn_begin_read(st, 0);
	if (rc)
		return rc;
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
	usleep(1000);
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
	if (rc != SQLITE_OK)
		ws_debug("tenant %s: write lock busy; WAL checkpoint deferred", st->tenant);
	return rc == SQLITE_OK;
}

static void write_lock_release(struct ws_stream *st)
{
	int spare = 1 - st->held;
	sqlite3_exec(st->conn[spare], "ROLLBACK", NULL, NULL, NULL);
}

static void wal_checkpoint_locked(struct ws_stream *st)
{
	int log_frames = 0, ckpt_frames = 0;
	conn_end_read(st, st->held);
	sqlite3_wal_checkpoint_v2(st->conn[st->held], NULL, SQLITE_CHECKPOINT_PASSIVE, &log_frames,
				  &ckpt_frames);
	if (conn_begin_read(st, st->held) != 0) {
		/* Keep the spare's read mark instead: still no gap. */
		int spare = 1 - st->held;
		ws_warn("%s", ws_errmsg());
		sqlite3_exec(st->conn[spare], "ROLLBACK; BEGIN; PRAGMA schema_version;", NULL,
			     NULL, NULL);
		st->held = spare;
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
	w->batches = calloc(MAX_REFS, sizeof(*w->batches));
	w->snaps = calloc(MAX_REFS, sizeof(*w->snaps));
	w->parts = calloc(MAX_PARTS, sizeof(*w->parts));
	if (!w->batches || !w->snaps || !w->parts) {
		ws_tail_work_free(w);
		return -ENOMEM;
	}
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
	st->wal_checkpoint_bytes = cfg->wal_checkpoint_bytes ? cfg->wal_checkpoint_bytes : WAL_CKPT_DEFAULT;
	st->wal_fd = st->wal_slot = -1;
	st->opened_ms = ws_wall_ms();
	if (asprintf(&st->db_path, "%s", cfg->db_path) < 0 ||
	    asprintf(&st->wal_path, "%s-wal", cfg->db_path) < 0) {
		st->db_path = st->wal_path = NULL;
		rc = -ENOMEM;
		goto fail;
	}
	if (access(st->db_path, F_OK) != 0) {
		rc = ws_fail(-ENOENT, "tenant %s: database %s does not exist", st->tenant, st->db_path);
		goto fail;
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
	st->reader = ws_reader_open(st->batch_bytes_max, 2, cfg->reader_flags, &rc);
	if (!st->reader)
		goto fail;
	/* One slot over the whole buffer, uploaded on our thread at publish:
	 * header reads and the slot share the buffer, never at once. */
	st->small_off = 0;
	st->small_bytes = ws_reader_buf_bytes(st->reader);
	st->ring_off = 0;
	rc = ws_pipe_init(&st->own_pipe, ws_reader_buf(st->reader), ws_reader_buf_bytes(st->reader), 1,
			  sink->store, 1, false);
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
	if (st->reader)
		file_close(st, &st->wal_fd, &st->wal_slot);
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
	free(st->db_path);
	free(st->wal_path);
	free(st);
}

void ws_stream_last_call(const struct ws_stream *st, struct ws_stream_call *out) { *out = st->call; }
uint64_t ws_stream_wm_last_frame(const struct ws_stream *st) { return st->have_wm ? st->wm.last_frame : 0; }

const char *ws_stream_tenant(const struct ws_stream *st) { return st->tenant; }
const char *ws_stream_read_path(const struct ws_stream *st) { return ws_reader_backend_name(st->reader); }

/* ---- helpers ---------------------------------------------------------- */

static void fill_rpo(const struct ws_stream *st, struct ws_rpo_status *rpo)
{
	int64_t now = ws_wall_ms();
	int64_t since = st->have_wm ? st->wm.time_ms : st->opened_ms;
	rpo->has_watermark = st->have_wm;
	rpo->watermark_age_ms = now > since ? (uint64_t)(now - since) : 0;
}

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

static void wm_to_public(const struct ws_fmt_watermark *w, struct ws_watermark *out)
{
	memset(out, 0, sizeof(*out));
	out->epoch = w->epoch;
	out->pointer_generation = w->pointer_generation;
	ws_gen_from_fmt(w, &out->generation);
	out->last_frame = w->last_frame;
	out->seq = w->seq;
	out->time_ms = w->time_ms;
	snprintf(out->manifest_key, sizeof(out->manifest_key), "%s", w->manifest_key);
}

static int refresh_wm(struct ws_stream *st)
{
	int rc = ws_wm_load(st->sink->store, st->tenant, &st->wm, &st->wm_etag);
	if (rc == WS_ENOTFOUND) {
		st->have_wm = false;
		st->wm_etag.s[0] = '\0';
		st->wm_loaded = true;
		return 0;
	}
	if (rc)
		return rc;
	st->have_wm = true;
	st->wm_loaded = true;
	return 0;
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
		return 0;
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
	if (d->checked) {
		struct ws_part *pt = &st->parts[i];
		struct ws_fmt_objref *ref = &st->batches[pt->ref];
		pt->filled = d->filled;
		pt->dropped = d->dropped;
		pt->cont = d->cont;
		pt->first = d->batch.first_frame;
		pt->valid = d->valid;
		pt->ship = d->ship;
		pt->slot_commit = d->last_commit;
		pt->slot_commit_cksum[0] = d->commit_cksum[0];
		pt->slot_commit_cksum[1] = d->commit_cksum[1];
		pt->slot_commit_db_size = d->commit_db_size;
		pt->end_cksum[0] = d->end_cksum[0];
		pt->end_cksum[1] = d->end_cksum[1];
		ref->first = d->batch.first_frame;
		ref->count = d->ship;
		ref->length = WS_BATCH_HDR_SIZE + d->payload_len;
		if (d->rc == 0 && d->ship) {
			snprintf(ref->key, sizeof(ref->key), "%s", d->key);
			ref->xxh = d->hdr_xxh;
		}
		if (d->dropped || !d->ship)
			return; /* nothing was sent */
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
	if (st->part_count >= MAX_PARTS)
		return ws_fail(WS_ETOOBIG, "tenant %s: more than %u objects in one call", st->tenant, MAX_PARTS);
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
	d->policy = st->policy;
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
	}
	d->dropped = false;
	d->rc = 0;
	d->throttle_retries = 0;
	st->parts[st->part_count] = *info;
	st->parts[st->part_count].done = false;
	st->part_count++;
	used = st->pipe->outstanding + payload_len; /* a checked batch: what it may hold */
	if (used > st->high_water)
		st->high_water = used;
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
static void merge_checked(struct ws_stream *st, struct scan *sc, uint32_t first_part)
{
	uint32_t keep_parts = first_part, keep_refs = first_part < st->part_count ? st->parts[first_part].ref : 0;
	bool chain = true;

	ws_pipe_drain(st->pipe);
	for (uint32_t i = first_part; i < st->part_count; i++) {
		struct ws_part pt = st->parts[i];
		if (!chain || pt.dropped)
			continue;
		/* What the slot's reader found holds whether or not its upload
		 * then failed (settle decides about that). */
		if (pt.done && pt.filled) {
			if (pt.valid > 0) {
				sc->cur.next_frame = pt.first + pt.valid;
				sc->cur.cksum[0] = pt.end_cksum[0];
				sc->cur.cksum[1] = pt.end_cksum[1];
			}
			if (pt.slot_commit) {
				sc->cur.last_commit = pt.slot_commit;
				sc->cur.commit_cksum[0] = pt.slot_commit_cksum[0];
				sc->cur.commit_cksum[1] = pt.slot_commit_cksum[1];
				sc->cur.commit_db_size = pt.slot_commit_db_size;
			}
		}
		pt.last_commit = sc->cur.last_commit;
		pt.commit_cksum[0] = sc->cur.commit_cksum[0];
		pt.commit_cksum[1] = sc->cur.commit_cksum[1];
		pt.commit_db_size = sc->cur.commit_db_size;
		if (!pt.done || !pt.filled || !pt.cont)
			chain = false;
		if (pt.done && pt.filled && pt.ship == 0)
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
}

/*
 * The scan when every slot is checked where it is read (pipe.h): the tail
 * reads and checks every other slot itself and hands the others to the
 * upload thread to read and check, assuming the chain goes on through
 * them; the in-order merge sorts out where it really ended. Stops at the
 * end of the file, at a slot of its own that ended the chain, or (shed)
 * at a full ring.
 */
static int scan_checked(struct ws_stream *st, struct scan *sc, uint64_t wal_bytes)
{
	const uint32_t fsz = ws_wal_frame_size(sc->gen.page_size);
	size_t per_chunk = st->pipe->ring.slot_bytes / fsz;
	const uint32_t first_part = st->part_count;
	uint64_t next = sc->cur.next_frame;

	if (st->batch_frames_max && st->batch_frames_max < per_chunk)
		per_chunk = st->batch_frames_max;
	const uint64_t start = ws_wal_frame_offset(sc->gen.page_size, next);
	const bool multi = start < wal_bytes && (wal_bytes - start) / fsz > per_chunk;
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
		if (st->batch_count >= MAX_REFS)
			return ws_fail(WS_ETOOBIG, "tenant %s: more than %u batches in one call", st->tenant, MAX_REFS);
		rc = reserve_slot(st, &idx);
		if (rc == -EAGAIN) {
			st->shed_stop = true;
			break;
		}
		if (rc)
			return rc;
		d = ws_pipe_desc(st->pipe, idx);
		memset(&d->batch, 0, sizeof(d->batch));
		d->batch.gen = sc->gen;
		d->batch.first_frame = next;
		d->batch.seed_cksum[0] = sc->cur.cksum[0];
		d->batch.seed_cksum[1] = sc->cur.cksum[1];
		d->first_slot = k == 0;
		d->wal_fd = st->wal_fd;
		d->wal_off = off;
		d->want = (uint32_t)want;
		d->per_chunk = (uint32_t)per_chunk;
		snprintf(d->key_prefix, sizeof(d->key_prefix), "%s", sc->prefix);
		/* Every other slot goes to the upload thread, which has a ring
		 * of its own. When there is more than a slot to read, the first
		 * goes there too, so both threads start at once; a tail of one
		 * slot reads it here (no hand-over). */
		d->delegated = st->pipe->reader && ((k & 1) == (multi ? 0u : 1u));
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
			own_cont = d->cont;
		}
		rc = publish_part(st, idx, ref, NULL, 0, want * fsz, &part, "stream.before_batch_put", true);
		if (rc)
			return rc;
		if (!own_cont)
			break; /* the chain ended in a slot read here */
		next += want;
	}
	merge_checked(st, sc, first_part);
	return 0;
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
	int rc0 = db_size(st, &file_bytes);
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
		if (st->snap_count >= MAX_REFS)
			return ws_fail(WS_ETOOBIG, "tenant %s: snapshot needs more than %u parts", st->tenant,
				       MAX_REFS);
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

/* Failures that mean the sink cannot keep up, which `shed` drops. */
static bool sheddable(int rc)
{
	return rc == WS_ETHROTTLED || rc == -EIO || rc == -ETIMEDOUT || rc == -ECONNRESET ||
	       rc == -ECONNREFUSED || rc == -EAGAIN;
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
	if (first_err && (st->policy != WS_POLICY_SHED || !sheddable(first_err)))
		return ws_fail(first_err, "tenant %s: upload %s: %s (policy %s; nothing acknowledged)", st->tenant,
			       bad_key, ws_strerror(first_err), ws_policy_name(st->policy));
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

static int tail_inner(struct ws_stream *st, struct ws_outcome *out, bool locked)
{
	struct scan sc;
	struct ws_wal_hdr wh;
	uint64_t wal_bytes = 0;
	uint32_t kind;
	int rc;

	memset(out, 0, sizeof(*out));
	memset(&sc, 0, sizeof(sc));
	st->batch_count = st->snap_count = 0;
	st->high_water = 0;

	if (access(st->db_path, F_OK) != 0)
		return ws_fail(-ENOENT, "tenant %s: database %s vanished", st->tenant, st->db_path);
	rc = file_refresh(st, st->wal_path, &st->wal_fd, &st->wal_slot);
	if (rc && rc != -ENOENT)
		return rc;
	wal_bytes = file_size(st->wal_fd);

	/* The live generation. An empty or absent WAL is generation "none". */
	if (wal_bytes == 0) {
		uint32_t ps, pages;
		rc = db_header(st, &ps, &pages);
		if (rc)
			return rc;
		sc.gen.page_size = ps;
	} else {
		uint8_t *buf = ws_reader_buf(st->reader) + st->small_off;
		ssize_t got = ws_reader_read(st->reader, st->wal_slot, 0, st->small_off, WS_WAL_HDR_SIZE);
		if (got < 0)
			return ws_fail((int)got, "tenant %s: read %s", st->tenant, st->wal_path);
		if (got < (ssize_t)WS_WAL_HDR_SIZE)
			return ws_fail(WS_ENOTWAL, "tenant %s: %s is %zd bytes, shorter than a WAL header; "
				       "nothing uploaded", st->tenant, st->wal_path, got);
		rc = ws_wal_hdr_parse(buf, &wh);
		if (rc)
			return ws_fail_wrap(rc, "tenant %s: %s (nothing uploaded)", st->tenant, st->wal_path);
		sc.gen.wal_magic = wh.magic;
		sc.gen.checkpoint_seq = wh.checkpoint_seq;
		sc.gen.salt1 = wh.salt1;
		sc.gen.salt2 = wh.salt2;
		sc.gen.page_size = wh.page_size;
		ws_wal_cursor_init(&sc.cur, &wh);
	}

	bool fresh = !st->wm_loaded;
	if (fresh && (rc = refresh_wm(st)) != 0)
		return rc;
	/* A watermark we hold that fences us: say so before anything else,
	 * re-reading it (unless just read) so the outcome names the current
	 * owner. A takeover after our last read is found by the fencing read
	 * that comes before any upload; an idle stale owner makes no request. */
	if (st->have_wm && fenced_by(st, &st->wm)) {
		if (!fresh && (rc = refresh_wm(st)) != 0)
			return rc;
		fill_fenced(st, out);
		return 0;
	}

	/* Decide how this call continues the stream. */
	/* With no WAL on either side, only the held read mark proves the
	 * database file unchanged: without it, writes may have come and been
	 * checkpointed away (a TRUNCATE, or the last connection closing). */
	bool same_gen = st->have_wm && st->wm.version >= 2 && ws_fmt_gen_equal(&st->wm.gen, &sc.gen) &&
			(sc.gen.wal_magic != 0 || st->continuous);
	if (same_gen && sc.gen.wal_magic != 0 && st->wm.last_frame > 0) {
		/* Prove the live WAL still holds the frame we stopped at. */
		uint8_t *buf = ws_reader_buf(st->reader) + st->small_off;
		uint64_t off = ws_wal_frame_offset(sc.gen.page_size, st->wm.last_frame);
		ssize_t got = ws_reader_read(st->reader, st->wal_slot, off, st->small_off, WS_WAL_FRAME_HDR_SIZE);
		if (got < 0)
			return ws_fail((int)got, "tenant %s: read %s", st->tenant, st->wal_path);
		if (got != (ssize_t)WS_WAL_FRAME_HDR_SIZE || ws_get_be32(buf + 16) != st->wm.end_cksum[0] ||
		    ws_get_be32(buf + 20) != st->wm.end_cksum[1])
			same_gen = false;
	}

	if (same_gen) {
		kind = WS_MANIFEST_CONTINUE;
		if (sc.gen.wal_magic != 0 && st->wm.last_frame > 0)
			ws_wal_cursor_resume(&sc.cur, &wh, st->wm.last_frame + 1, st->wm.end_cksum);
	} else if (st->have_wm && st->continuous && !ws_fmt_gen_equal(&st->wm.gen, &sc.gen)) {
		/* A different generation is all the handover proves; the same
		 * salts with different frames would be a WAL we cannot explain. */
		kind = WS_MANIFEST_NEXT_GEN;
	} else {
		kind = WS_MANIFEST_REBASE;
	}
	sc.first_frame = sc.cur.next_frame ? sc.cur.next_frame : 1;
	sc.seed[0] = sc.cur.cksum[0];
	sc.seed[1] = sc.cur.cksum[1];

	/* Nothing new? Decide without a single store request. */
	if (kind != WS_MANIFEST_REBASE) {
		bool any = false;
		if (sc.gen.wal_magic != 0) {
			uint64_t off = ws_wal_frame_offset(sc.gen.page_size, sc.cur.next_frame);
			const uint32_t fsz = ws_wal_frame_size(sc.gen.page_size);
			if (off + fsz <= wal_bytes) {
				struct ws_wal_cursor probe = sc.cur;
				ssize_t got = ws_reader_read(st->reader, st->wal_slot, off, st->small_off, fsz);
				any = got == (ssize_t)fsz &&
				      ws_wal_cursor_step(&probe, ws_reader_buf(st->reader) + st->small_off, NULL) == 1;
			}
		}
		if (!any) {
			out->kind = WS_OUTCOME_EMPTY;
			if (st->have_wm)
				wm_to_public(&st->wm, &out->u.empty.watermark);
			fill_rpo(st, &out->u.empty.rpo);
			return 0;
		}
	}

	/* Fencing: a pure read before the first upload. */
	rc = refresh_wm(st);
	if (rc)
		return rc;
	if (st->have_wm && fenced_by(st, &st->wm)) {
		fill_fenced(st, out);
		return 0;
	}
	/* The watermark may have moved since we decided (another writer of our
	 * own epoch, or a takeover at a lower level): decide again from it. */
	if (kind != WS_MANIFEST_REBASE) {
		bool still = st->have_wm && ((kind == WS_MANIFEST_CONTINUE && ws_fmt_gen_equal(&st->wm.gen, &sc.gen) &&
					       st->wm.last_frame + 1 == sc.first_frame) ||
					      (kind == WS_MANIFEST_NEXT_GEN && st->continuous &&
					       st->wm.epoch == st->epoch && st->wm.pointer_generation == st->pg));
		if (!still) {
			kind = WS_MANIFEST_REBASE;
			if (sc.gen.wal_magic != 0) {
				ws_wal_cursor_init(&sc.cur, &wh);
				sc.first_frame = 1;
				sc.seed[0] = sc.cur.cksum[0];
				sc.seed[1] = sc.cur.cksum[1];
			}
		}
	}
	if (kind == WS_MANIFEST_NEXT_GEN && sc.gen.wal_magic == 0) {
		/* The WAL was reset and nothing new written yet: the database file
		 * is exactly the last shipped state. */
		out->kind = WS_OUTCOME_EMPTY;
		wm_to_public(&st->wm, &out->u.empty.watermark);
		fill_rpo(st, &out->u.empty.rpo);
		return 0;
	}

	rc = ws_key_gen_prefix(sc.prefix, sizeof(sc.prefix), st->tenant, st->epoch, st->pg, &sc.gen);
	if (rc)
		return ws_fail(rc, "tenant %s: key too long", st->tenant);

	/* Shed stops reading at a full ring, except while re-basing: the
	 * snapshot must be whole, and a database larger than the ring would
	 * otherwise never re-base at all. */
	st->shed_nowait = st->policy == WS_POLICY_SHED && kind != WS_MANIFEST_REBASE;
	if (sc.gen.wal_magic != 0) {
		rc = scan_checked(st, &sc, wal_bytes);
		if (rc)
			return rc;
		if (st->shed_stop && (rc = scan_rest(st, &sc, wal_bytes)) != 0)
			return rc;
	}
	uint64_t last = sc.gen.wal_magic ? sc.cur.last_commit : 0;
	if (kind != WS_MANIFEST_REBASE && last < sc.first_frame) {
		/* Only an uncommitted transaction was there. */
		out->kind = WS_OUTCOME_EMPTY;
		if (st->have_wm)
			wm_to_public(&st->wm, &out->u.empty.watermark);
		fill_rpo(st, &out->u.empty.rpo);
		return 0;
	}

	uint32_t db_pages;
	if (last > 0) {
		db_pages = sc.cur.commit_db_size;
	} else {
		uint32_t ps;
		rc = db_header(st, &ps, &db_pages);
		if (rc)
			return rc;
		if (sc.gen.wal_magic == 0)
			sc.gen.page_size = ps;
	}
	if (kind == WS_MANIFEST_REBASE) {
		rc = upload_snapshot(st, &sc, db_pages);
		if (rc)
			return rc;
	}
	/* Everything this call publishes must be durable before the manifest. */
	ws_pipe_drain(st->pipe);
	rc = settle(st, &sc, kind, &last, &db_pages);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		out->kind = WS_OUTCOME_SHED;
		out->u.shed.checkpoint_seq = sc.gen.checkpoint_seq;
		out->u.shed.first_frame = sc.first_frame;
		out->u.shed.last_frame = last;
		fill_bp(st, &out->u.shed.backpressure);
		fill_rpo(st, &out->u.shed.rpo);
		return 0;
	}

	/* Manifest. */
	struct ws_fmt_manifest m;
	memset(&m, 0, sizeof(m));
	snprintf(m.tenant, sizeof(m.tenant), "%s", st->tenant);
	m.epoch = st->epoch;
	m.pointer_generation = st->pg;
	m.wm_seq = (st->have_wm ? st->wm.seq : 0) + 1;
	/* Stamped after the scan, not before it: a reused WAL file lets the
	 * scan meet commits made while it ran, and restore by time must never
	 * yield a commit made after the time it was asked for. */
	sc.read_ms = ws_wall_ms();
	m.time_ms = sc.read_ms;
	m.gen = sc.gen;
	m.kind = kind;
	m.first_frame = sc.first_frame;
	m.last_frame = last;
	m.valid_from_frame = kind == WS_MANIFEST_REBASE ? last : sc.first_frame;
	m.seed_cksum[0] = sc.seed[0];
	m.seed_cksum[1] = sc.seed[1];
	m.end_cksum[0] = last ? sc.cur.commit_cksum[0] : sc.seed[0];
	m.end_cksum[1] = last ? sc.cur.commit_cksum[1] : sc.seed[1];
	m.db_pages = db_pages;
	if (st->have_wm && kind != WS_MANIFEST_REBASE) {
		snprintf(m.prev_key, sizeof(m.prev_key), "%s", st->wm.manifest_key);
		memcpy(m.prev_sha, st->wm.manifest_sha, WS_SHA256_LEN);
		m.prev_length = st->wm.manifest_length;
	}
	m.batch_count = st->batch_count;
	m.batches = st->batches;
	m.snap_count = st->snap_count;
	m.snaps = st->snaps;
	rc = ws_fmt_manifest_encode(&m, &st->work->scratch);
	if (rc)
		return ws_fail(rc, "tenant %s: cannot encode manifest", st->tenant);

	uint8_t sha[WS_SHA256_LEN];
	char shahex[WS_SHA256_HEX_LEN + 1];
	char mkey[WS_KEY_MAX];
	uint64_t mlen = st->work->scratch.len;
	ws_sha256(st->work->scratch.data, st->work->scratch.len, sha);
	ws_hex(sha, 8, shahex);
	if (snprintf(mkey, sizeof(mkey), "%s/m%016" PRIx64 "-%s", sc.prefix, m.wm_seq, shahex) >=
	    (int)sizeof(mkey))
		return ws_fail(WS_ETOOBIG, "tenant %s: manifest key too long", st->tenant);
	rc = WS_FAULT("stream.before_manifest_put");
	if (rc)
		return ws_fail(rc, "tenant %s: injected fault before manifest upload", st->tenant);
	{
		struct iovec iov = { st->work->scratch.data, st->work->scratch.len };
		rc = put_immutable(st, mkey, &iov, 1);
		if (rc)
			return rc;
		st->call.puts++;
		st->call.bytes += iov.iov_len;
	}

	/* Watermark, last: it names only what is now durable. */
	struct ws_fmt_watermark nw;
	struct ws_etag new_etag;
	char wmkey[WS_KEY_MAX];
	memset(&nw, 0, sizeof(nw));
	nw.version = 2;
	snprintf(nw.tenant, sizeof(nw.tenant), "%s", st->tenant);
	nw.epoch = st->epoch;
	nw.pointer_generation = st->pg;
	nw.seq = m.wm_seq;
	nw.time_ms = ws_wall_ms();
	nw.gen = sc.gen;
	nw.last_frame = last;
	nw.end_cksum[0] = m.end_cksum[0];
	nw.end_cksum[1] = m.end_cksum[1];
	snprintf(nw.manifest_key, sizeof(nw.manifest_key), "%s", mkey);
	memcpy(nw.manifest_sha, sha, WS_SHA256_LEN);
	nw.manifest_length = mlen;
	rc = ws_fmt_watermark_encode(&nw, &st->work->scratch);
	if (rc)
		return ws_fail(rc, "tenant %s: cannot encode watermark", st->tenant);
	rc = ws_key_watermark(wmkey, sizeof(wmkey), st->tenant);
	if (rc)
		return rc;
	rc = WS_FAULT("stream.before_watermark_put");
	if (rc)
		return ws_fail(rc, "tenant %s: injected fault before watermark write", st->tenant);
	rc = ws_store_put(st->sink->store, wmkey, st->work->scratch.data, st->work->scratch.len,
			  st->have_wm ? WS_PUT_CAS : WS_PUT_CREATE, st->have_wm ? &st->wm_etag : NULL, &new_etag);
	if (rc == WS_EPRECOND) {
		/* Someone wrote the watermark since our fencing read. */
		int rc2 = refresh_wm(st);
		if (rc2)
			return rc2;
		if (st->have_wm && fenced_by(st, &st->wm)) {
			fill_fenced(st, out);
			return 0;
		}
		st->wm_loaded = false;
		return ws_fail(WS_EPRECOND, "tenant %s: watermark %s changed concurrently (another writer "
			       "with epoch %llu?); nothing acknowledged", st->tenant, wmkey,
			       (unsigned long long)st->epoch);
	}
	if (rc) {
		st->wm_loaded = false; /* ambiguous: re-read before the next decision */
		return ws_fail_wrap(rc, "tenant %s: write watermark %s", st->tenant, wmkey);
	}
	st->call.puts++;
	st->call.bytes += st->work->scratch.len;
	rc = WS_FAULT("stream.after_watermark_put");
	if (rc)
		return ws_fail(rc, "tenant %s: injected fault after watermark write", st->tenant);

	struct ws_fmt_watermark prev = st->wm;
	bool had = st->have_wm;
	st->wm = nw;
	st->wm_etag = new_etag;
	st->have_wm = true;
	st->wm_loaded = true;

	/* Keep a read mark without a gap; from here on a new generation is
	 * provably the continuation of what we just shipped. After a partial
	 * ship (shed) the old mark stays: frames between what shipped and it
	 * must not be checkpointed away. */
	if (!locked && st->frames_shed == 0)
		handover_read(st);
	st->continuous = true;

	struct ws_backpressure_report bp;
	fill_bp(st, &bp);
	if (kind == WS_MANIFEST_CONTINUE || !had) {
		out->kind = WS_OUTCOME_STREAMED;
		snprintf(out->u.streamed.generation_key, WS_GEN_KEY_MAX, "%s", mkey);
		out->u.streamed.first_frame = last ? sc.first_frame : 0;
		out->u.streamed.last_frame = last;
		out->u.streamed.checkpoint_seq = sc.gen.checkpoint_seq;
		out->u.streamed.frame_count = last ? last - sc.first_frame + 1 : 0;
		out->u.streamed.backpressure = bp;
		fill_rpo(st, &out->u.streamed.rpo);
	} else {
		out->kind = WS_OUTCOME_RESTARTED;
		snprintf(out->u.restarted.generation_key, WS_GEN_KEY_MAX, "%s", mkey);
		ws_gen_to_public(&prev.gen, prev.version >= 2, &out->u.restarted.previous_generation);
		ws_gen_to_public(&sc.gen, true, &out->u.restarted.new_generation);
		out->u.restarted.first_frame = last ? 1 : 0;
		out->u.restarted.last_frame = last;
		out->u.restarted.frame_count = last;
		out->u.restarted.backpressure = bp;
		fill_rpo(st, &out->u.restarted.rpo);
	}
	return 0;
}

int ws_stream_tail_frames(struct ws_stream *st, struct ws_outcome *out)
{
	bool locked = false;
	int rc;

	memset(&st->call, 0, sizeof(st->call));
	st->call_throttle = 0;
	st->frames_shed = 0;
	st->throttle_at_start = __atomic_load_n(&st->sink->store->stats.throttle_retries, __ATOMIC_RELAXED);
	rc = hold_read(st);
	if (rc)
		return rc;
	/* The WAL in use (not the file, which SQLite reuses from the top
	 * without shrinking) is what must stay bounded. */
	if (st->have_wm && st->wm.gen.wal_magic != 0 &&
	    st->wm.last_frame * ws_wal_frame_size(st->wm.gen.page_size) >= st->wal_checkpoint_bytes)
		locked = write_lock_try(st);
	st->pipe->on_done = part_done;
	st->pipe->arg = st;
	st->part_count = 0;
	st->part_base = st->pipe->ring.head;
	st->frames_shed = 0;
	st->shed_stop = false;
	st->shed_nowait = false;
	rc = tail_inner(st, out, locked);
	/* A failed call may leave parts in flight: none outlives it. */
	ws_pipe_drain(st->pipe);
	st->pipe->on_done = NULL;
	st->pipe->arg = NULL;
	st->call.throttle_retries = call_throttle(st);
	st->call.frames_shed = st->frames_shed;
	st->call.spill_high_water = st->high_water;
	if (locked) {
		/* Nothing could commit since the scan began: on success every
		 * committed frame in the WAL is durable at the sink. */
		if (rc == 0 && out->kind != WS_OUTCOME_FENCED && out->kind != WS_OUTCOME_SHED &&
		    st->frames_shed == 0 && st->continuous)
			wal_checkpoint_locked(st);
		write_lock_release(st);
	}
	return rc;
}

uint64_t ws_stream_wal_checkpoints(const struct ws_stream *st) { return st->wal_checkpoints; }
