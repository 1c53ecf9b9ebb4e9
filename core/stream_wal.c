/*
 * The files a tail reads: the WAL and the database file, the wal-index
 * header, the live WAL generation, and whether it moved under a re-base.
 */
#include "stream_internal.h"

/* ---- files ------------------------------------------------------------ */

void file_close(struct ws_stream *st, int *fd, int *slot)
{
	if (*slot >= 0)
		ws_reader_detach(st->io.reader, *slot);
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	*slot = -1;
}

/* (Re)open path if it is not open or was replaced; -ENOENT leaves it closed. */
int file_refresh(struct ws_stream *st, const char *path, int *fd, int *slot)
{
	struct stat a, b;
	int nfd;
	if (*fd >= 0 && stat(path, &a) == 0 && fstat(*fd, &b) == 0 && a.st_ino == b.st_ino &&
	    a.st_dev == b.st_dev)
		return 0;
	file_close(st, fd, slot);
	/* Without access-time updates: each read of a file a writer keeps
	 * changing would otherwise dirty its inode, and wait for the
	 * filesystem's journal (behind the sink's fsyncs when both are on one
	 * disk) under the shard's read lock. Only the file's owner may ask. */
	nfd = open(path, O_RDONLY | O_CLOEXEC | O_NOATIME);
	if (nfd < 0 && errno == EPERM)
		nfd = open(path, O_RDONLY | O_CLOEXEC);
	if (nfd < 0)
		return errno == ENOENT ? -ENOENT : ws_fail(-errno, "tenant %s: open %s", st->tenant, path);
	*fd = nfd;
	*slot = ws_reader_attach(st->io.reader, nfd);
	if (*slot < 0) {
		int rc = *slot;
		*slot = -1;
		file_close(st, fd, slot);
		return ws_fail(rc, "tenant %s: cannot register %s with the reader", st->tenant, path);
	}
	return 0;
}

uint64_t file_size(int fd)
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
	if (st->txn.held < 0 ||
	    sqlite3_file_control(st->txn.conn[st->txn.held], "main", SQLITE_FCNTL_FILE_POINTER, &f) != SQLITE_OK ||
	    !f || !f->pMethods)
		return NULL;
	return f;
}

int db_size(struct ws_stream *st, uint64_t *size)
{
	sqlite3_file *f = db_file(st);
	sqlite3_int64 n = 0;
	if (!f || f->pMethods->xFileSize(f, &n) != SQLITE_OK || n < 0)
		return ws_fail(-EIO, "tenant %s: cannot size %s", st->tenant, st->db_path);
	*size = (uint64_t)n;
	return 0;
}

/* Read up to len bytes at off into dst; returns bytes read. */
ssize_t db_read(struct ws_stream *st, uint64_t off, size_t len, uint8_t *dst)
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

/* Database geometry from the file header (used when the WAL has no frames). */
int db_header(struct ws_stream *st, uint32_t *page_size, uint32_t *pages)
{
	uint8_t *buf = ws_reader_buf(st->io.reader) + st->io.small_off;
	ssize_t got;
	struct ws_db_hdr h;
	uint32_t ps;
	WS_ASSERT(st->io.small_bytes >= WS_DB_HDR_SIZE); /* the small area holds a header */
	got = db_read(st, 0, WS_DB_HDR_SIZE, buf);
	if (got < 0)
		return ws_fail((int)got, "tenant %s: read %s", st->tenant, st->db_path);
	if (got == 0) {
		*page_size = 4096;
		*pages = 0;
		return 0;
	}
	if (ws_db_hdr_decode(buf, (size_t)got, &h) != 0)
		return ws_fail(WS_EFORMAT, "tenant %s: %s is not a SQLite database", st->tenant, st->db_path);
	if (!ws_db_hdr_is_wal(&h))
		return ws_fail(WS_ECONFIG, "tenant %s: %s is not in WAL mode (PRAGMA journal_mode=WAL)",
			       st->tenant, st->db_path);
	ps = h.page_size;
	if (!ws_wal_page_size_valid(ps))
		return ws_fail(WS_EFORMAT, "tenant %s: %s has page size %u", st->tenant, st->db_path, ps);
	*page_size = ps;
	/* The in-header size is valid when the version-valid-for number matches
	 * the change counter (SQLite >= 3.7.0 always writes both). */
	if (ws_db_hdr_pages(&h) != 0)
		*pages = ws_db_hdr_pages(&h);
	else {
		uint64_t bytes;
		int rc = db_size(st, &bytes);
		if (rc)
			return rc;
		*pages = (uint32_t)(bytes / ps);
	}
	return 0;
}

/* ---- the WAL's generation and the wal-index ---------------------------- */

/*
 * The wal-index header (its format: io/wal.c, "WAL-INDEX HEADER"), read
 * through SQLite's own open file of the database under our read
 * transaction, as SQLite's readers read it: the first copy, then the
 * second (a writer writes them in the other order), decoded by
 * ws_walidx_hdr_decode. A writer holds them in flux for a few stores: try
 * again a little. false: not mapped (no other connection has built it),
 * not initialised, or in flux on every try.
 */
static bool wal_index_hdr(struct ws_stream *st, struct ws_walidx_hdr *h)
{
	return ws_walidx_read(db_file(st), h);
}

/* The wal-index's last committed frame, when it names the generation of
 * these salts (read ahead: stream_scan.c). false: it names another, or
 * cannot be read. */
bool wal_index_mx(struct ws_stream *st, uint32_t salt1, uint32_t salt2, uint32_t *mx)
{
	struct ws_walidx_hdr h;
	if (!wal_index_hdr(st, &h) || h.salt1 != salt1 || h.salt2 != salt2)
		return false;
	*mx = h.mx_frame;
	return true;
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
	struct ws_walidx_hdr h;
	return wal_index_hdr(st, &h) && h.mx_frame == 0;
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
int wal_index_bound(struct ws_stream *st, const struct ws_wal_hdr *wh, uint64_t *wal_bytes)
{
	struct ws_walidx_hdr h;
	uint32_t mx;
	if (!wal_index_hdr(st, &h))
		return 0;
	mx = h.mx_frame;
	if (h.salt1 != wh->salt1 || h.salt2 != wh->salt2) {
		if (mx != 0 || h.salt1 == wh->salt1 + 1u)
			return 0;
	}
	uint64_t end = ws_wal_frame_offset(wh->page_size, (uint64_t)mx + 1);
	if (*wal_bytes <= end)
		return 0;
	if (*wal_bytes >= end + WS_WAL_FRAME_HDR_SIZE) {
		const uint8_t *buf = ws_reader_buf(st->io.reader) + st->io.small_off;
		struct ws_wal_frame_hdr fh = { 0 };
		ssize_t got = ws_reader_read(st->io.reader, st->io.wal_slot, end, st->io.small_off, WS_WAL_FRAME_HDR_SIZE);
		if (got < 0)
			return ws_fail((int)got, "tenant %s: read %s at %" PRIu64, st->tenant, st->wal_path, end);
		if (got == (ssize_t)WS_WAL_FRAME_HDR_SIZE)
			ws_wal_frame_hdr_decode(buf, &fh);
		st->at.past_index = got == (ssize_t)WS_WAL_FRAME_HDR_SIZE && fh.salt1 == wh->salt1 &&
				 fh.salt2 == wh->salt2;
	}
	ws_debug("tenant %s: %s runs %" PRIu64 " bytes past the wal-index's last commit (frame %u)%s: "
		 "not committed, not read", st->tenant, st->wal_path, *wal_bytes - end, mx,
		 st->at.past_index ? ", a frame of this generation next" : "");
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
int read_wal_gen(struct ws_stream *st, struct ws_wal_hdr *wh)
{
	uint8_t *buf = ws_reader_buf(st->io.reader) + st->io.small_off;
	ssize_t got = ws_reader_read(st->io.reader, st->io.wal_slot, 0, st->io.small_off, WS_WAL_HDR_SIZE);
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
int wal_unmoved(struct ws_stream *st, const struct scan *sc)
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

