/*
 * The replica applier (replica.h): opening a replica, the schema cookie,
 * rebuilds and transactions. Its WAL writer is replica_wal.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replica.h"
#include "replica_internal.h"
#include "ws_fail.h"
#include "ws_fault.h"
#include "ws_wal.h"

#define CKPT_FRAMES_DEFAULT 1000u
#define COOKIE_OFFSET 40u

struct ws_replica {
	char *path;
	sqlite3 *db;             /* the applier's connection: creation, recovery, checkpoints */
	struct ws_rwal wal;
	uint32_t page_size;
	uint32_t cookie;         /* the replica's schema cookie, as last written */
	uint32_t src_cookie;     /* the source's cookie that cookie stands for */
	bool cookie_fresh;       /* cookie went up since open: src_cookie means something */
	uint64_t last_tx;
	uint32_t ckpt_frames;
	uint8_t *page1;          /* page 1 as the replica gets it (page_size bytes) */
};

static int sql_fail(struct ws_replica *r, const char *what)
{
	return ws_fail(-EIO, "replica %s: %s: %s", r->path, what, sqlite3_errmsg(r->db));
}

/* One row's first column of sql, as an integer and (if text) as text. */
static int query1(sqlite3 *db, const char *sql, int64_t *v, char *text, size_t text_len)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (v)
			*v = sqlite3_column_int64(st, 0);
		if (text) {
			const unsigned char *t = sqlite3_column_text(st, 0);
			snprintf(text, text_len, "%s", t ? (const char *)t : "");
		}
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

/* Missing or empty is fine (it is created); anything else must be a SQLite database. */
static int check_file(struct ws_replica *r, bool *empty)
{
	uint8_t hdr[WS_DB_HDR_SIZE];
	struct stat st;
	if (fstat(r->wal.db_fd, &st) != 0)
		return ws_fail(-errno, "replica %s: %s", r->path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return ws_fail(WS_EFORMAT, "replica %s: not a regular file", r->path);
	*empty = st.st_size == 0;
	if (*empty)
		return 0;
	if (pread(r->wal.db_fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) || !ws_db_hdr_is_sqlite(hdr, sizeof(hdr)))
		return ws_fail(WS_EFORMAT, "replica %s: not a SQLite database (its header)", r->path);
	return 0;
}

/* The applier's connection: WAL mode, the wal-index built, the cookie and page size read. */
static int open_sql(struct ws_replica *r, bool empty)
{
	char mode[16];
	int64_t v = 0;
	if (sqlite3_open_v2(r->path, &r->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
		return sql_fail(r, "opening it");
	sqlite3_busy_timeout(r->db, 2000);
	if (empty && sqlite3_exec(r->db, "PRAGMA page_size=4096", NULL, NULL, NULL) != SQLITE_OK)
		return sql_fail(r, "setting its page size");
	if (query1(r->db, "PRAGMA journal_mode=WAL", NULL, mode, sizeof(mode)) != SQLITE_OK)
		return sql_fail(r, "putting it in WAL mode");
	if (strcmp(mode, "wal") != 0)
		return ws_fail(-EBUSY, "replica %s: cannot put it in WAL mode (another connection holds it)", r->path);
	if (query1(r->db, "PRAGMA schema_version", &v, NULL, 0) != SQLITE_OK)
		return sql_fail(r, "reading its schema cookie");
	r->cookie = (uint32_t)v;
	if (query1(r->db, "PRAGMA page_size", &v, NULL, 0) != SQLITE_OK)
		return sql_fail(r, "reading its page size");
	r->page_size = (uint32_t)v;
	return 0;
}

/* Everything open lives here, so that a rebuild by backup can let go and come back. */
static int attach(struct ws_replica *r)
{
	bool empty = false;
	int rc;
	r->wal.path = r->path;
	r->wal.shm_fd = r->wal.wal_fd = -1;
	r->wal.db_fd = open(r->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (r->wal.db_fd < 0)
		return ws_fail(-errno, "replica %s: cannot open it: %s", r->path, strerror(errno));
	if ((rc = check_file(r, &empty)) || (rc = open_sql(r, empty)))
		return rc;
	r->wal.page_size = r->page_size;
	free(r->page1);
	r->page1 = malloc(r->page_size);
	if (!r->page1)
		return ws_fail(-ENOMEM, "replica %s: out of memory", r->path);
	r->cookie_fresh = false;
	return ws_rwal_attach(&r->wal);
}

/*
 * The connection closes first, while the locks still keep it from taking
 * EXCLUSIVE and deleting the WAL other readers may use; the descriptors
 * (and with them the locks) after.
 */
static void detach(struct ws_replica *r)
{
	sqlite3_close(r->db);
	r->db = NULL;
	ws_rwal_detach(&r->wal);
	ws_rwal_close_fd(r->wal.db_fd);
	r->wal.db_fd = -1;
}

struct ws_replica *ws_replica_open(const char *path, int *err)
{
	struct ws_replica *r = NULL;
	int rc;
	if (!path || !path[0]) {
		rc = ws_fail(WS_ECONFIG, "replica: no path");
		goto fail;
	}
	if (!(r = calloc(1, sizeof(*r))) || !(r->path = strdup(path))) {
		rc = ws_fail(-ENOMEM, "replica %s: out of memory", path);
		goto fail;
	}
	r->ckpt_frames = CKPT_FRAMES_DEFAULT;
	r->wal.db_fd = -1;
	if ((rc = attach(r)))
		goto fail;
	return r;
fail:
	if (err)
		*err = rc;
	ws_replica_close(r);
	return NULL;
}

void ws_replica_close(struct ws_replica *r)
{
	if (!r)
		return;
	if (r->db)
		(void)sqlite3_wal_checkpoint_v2(r->db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	detach(r);
	free(r->page1);
	free(r->path);
	free(r);
}

uint64_t ws_replica_tx(const struct ws_replica *r) { return r ? r->last_tx : 0; }

void ws_replica_ckpt_frames(struct ws_replica *r, uint32_t frames)
{
	if (r && frames)
		r->ckpt_frames = frames;
}

/*
 * Page 1 as the replica gets it: its own schema cookie (replica.h), WAL
 * mode in bytes 18 and 19 whatever the source says.
 */
static const uint8_t *page1_for(struct ws_replica *r, const uint8_t *src, bool rebuild)
{
	uint32_t sc = ws_get_be32(src + COOKIE_OFFSET);
	if (rebuild || !r->cookie_fresh || sc != r->src_cookie) {
		r->cookie++;
		r->src_cookie = sc;
		r->cookie_fresh = true;
	}
	memcpy(r->page1, src, r->page_size);
	ws_put_be32(r->page1 + COOKIE_OFFSET, r->cookie);
	r->page1[18] = r->page1[19] = 2;
	return r->page1;
}

static int checkpoint(struct ws_replica *r, uint32_t mx_frame)
{
	if (mx_frame < r->ckpt_frames)
		return 0;
	int rc = sqlite3_wal_checkpoint_v2(r->db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	/* BUSY: another connection is checkpointing; the next transaction tries again. */
	return rc == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED ? 0 : sql_fail(r, "checkpointing");
}

static int commit(struct ws_replica *r, uint64_t tx_id, const uint32_t *pgno, const uint8_t *pages, uint32_t n,
		  uint32_t db_pages, const uint8_t *page1)
{
	uint32_t mx = 0;
	int rc = ws_rwal_commit(&r->wal, pgno, pages, n, db_pages, page1, &mx);
	if (rc)
		return rc;
	r->last_tx = tx_id;
	return checkpoint(r, mx);
}

/* A state applied (rc 0) reaches the site a script holds to read the replica right after each one. */
static int applied(int rc)
{
	if (!rc)
		(void)WS_FAULT("replica.applied");
	return rc;
}

static int check_image(struct ws_replica *r, const uint8_t *img, uint64_t pages, uint32_t page_size)
{
	if (!ws_wal_page_size_valid(page_size))
		return ws_fail(WS_EFORMAT, "replica %s: page size %u is not one SQLite can have", r->path, page_size);
	if (pages == 0 || pages > UINT32_MAX || page_size < WS_DB_HDR_SIZE || !ws_db_hdr_is_sqlite(img, page_size))
		return ws_fail(WS_EFORMAT, "replica %s: the image (%llu pages) is not a SQLite database", r->path,
			       (unsigned long long)pages);
	if (ws_db_hdr_page_size(img) != page_size)
		return ws_fail(WS_EFORMAT, "replica %s: the image's header says pages of %u bytes, not %u", r->path,
			       ws_db_hdr_page_size(img), page_size);
	return 0;
}

/* A backup from memory into the replica, out of WAL mode for as long as it takes. */
static int backup_into(struct ws_replica *r, sqlite3 *mem)
{
	char mode[16] = "";
	sqlite3 *dst = NULL;
	sqlite3_backup *b = NULL;
	int rc = 0;
	if (sqlite3_open_v2(r->path, &dst, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
		goto sqlerr;
	sqlite3_busy_timeout(dst, 2000);
	if (query1(dst, "PRAGMA journal_mode=DELETE", NULL, mode, sizeof(mode)) != SQLITE_OK ||
	    strcmp(mode, "delete") != 0) {
		rc = ws_fail(-EBUSY, "replica %s: its page size changes, which needs it without other connections",
			     r->path);
		goto out;
	}
	if (!(b = sqlite3_backup_init(dst, "main", mem, "main")) || sqlite3_backup_step(b, -1) != SQLITE_DONE)
		goto sqlerr;
	sqlite3_backup_finish(b);
	b = NULL;
	if (query1(dst, "PRAGMA journal_mode=WAL", NULL, mode, sizeof(mode)) != SQLITE_OK)
		goto sqlerr;
	goto out;
sqlerr:
	rc = ws_fail(-EIO, "replica %s: rewriting it: %s", r->path, dst ? sqlite3_errmsg(dst) : "out of memory");
out:
	if (b)
		sqlite3_backup_finish(b);
	sqlite3_close(dst);
	return rc;
}

/* A new page size: the file itself is rewritten (SQLite's backup), the applier lets go meanwhile. */
static int rebuild_file(struct ws_replica *r, uint64_t tx_id, const uint8_t *img, uint64_t pages, uint32_t page_size)
{
	sqlite3 *mem = NULL;
	size_t bytes = (size_t)pages * page_size;
	uint8_t *copy = sqlite3_malloc64(bytes);
	int rc;
	if (!copy)
		return ws_fail(-ENOMEM, "replica %s: out of memory", r->path);
	memcpy(copy, img, bytes);
	r->cookie++;
	r->src_cookie = ws_get_be32(img + COOKIE_OFFSET);
	ws_put_be32(copy + COOKIE_OFFSET, r->cookie);
	copy[18] = copy[19] = 1; /* a memory database cannot be in WAL mode; the replica is put back in it */
	if (sqlite3_open(":memory:", &mem) != SQLITE_OK ||
	    sqlite3_deserialize(mem, "main", copy, (sqlite3_int64)bytes, (sqlite3_int64)bytes,
				SQLITE_DESERIALIZE_FREEONCLOSE) != SQLITE_OK) {
		sqlite3_close(mem);
		return ws_fail(-ENOMEM, "replica %s: cannot load the image", r->path);
	}
	detach(r);
	rc = backup_into(r, mem);
	sqlite3_close(mem);
	uint32_t cookie = r->cookie, src = r->src_cookie;
	int arc = attach(r); /* back to WAL mode and the locks, whatever the backup did */
	r->cookie_fresh = true;
	r->cookie = cookie;
	r->src_cookie = src;
	if (!rc && !arc)
		r->last_tx = tx_id;
	return rc ? rc : arc;
}

int ws_replica_image(struct ws_replica *r, uint64_t tx_id, const uint8_t *img, uint64_t pages, uint32_t page_size)
{
	int rc;
	if (!r || !img)
		return ws_fail(WS_ECONFIG, "replica: NULL");
	if ((rc = check_image(r, img, pages, page_size)))
		return rc;
	if (!r->db)
		return ws_fail(WS_ECONFIG, "replica %s: not open (an earlier rebuild failed)", r->path);
	if (page_size != r->page_size)
		rc = rebuild_file(r, tx_id, img, pages, page_size);
	else
		rc = commit(r, tx_id, NULL, img, (uint32_t)pages, (uint32_t)pages, page1_for(r, img, true));
	return applied(rc);
}

static int check_txn(struct ws_replica *r, uint64_t tx_id, const uint32_t *pgno, const uint8_t *pages, uint32_t n,
		     uint32_t page_size, uint32_t db_pages)
{
	if (!pgno || !pages || n == 0 || db_pages == 0)
		return ws_fail(WS_ECONFIG, "replica %s: a transaction needs pages and a database size", r->path);
	if (!r->db)
		return ws_fail(WS_ECONFIG, "replica %s: not open (an earlier rebuild failed)", r->path);
	if (page_size != r->page_size)
		return ws_fail(WS_ECONFIG, "replica %s: pages of %u bytes, the replica's are %u: rebuild it first",
			       r->path, page_size, r->page_size);
	if (tx_id <= r->last_tx)
		return ws_fail(WS_ECONFIG, "replica %s: transaction %llu is at or before the last applied, %llu",
			       r->path, (unsigned long long)tx_id, (unsigned long long)r->last_tx);
	for (uint32_t i = 0; i < n; i++) {
		if (pgno[i] == 0)
			return ws_fail(WS_ECONFIG, "replica %s: page number 0", r->path);
		if (pgno[i] == 1 && !ws_db_hdr_is_sqlite(pages + (size_t)i * page_size, page_size))
			return ws_fail(WS_EFORMAT, "replica %s: page 1 is not a database header", r->path);
	}
	return 0;
}

int ws_replica_apply(struct ws_replica *r, uint64_t tx_id, const uint32_t *pgno, const uint8_t *pages, uint32_t n,
		     uint32_t page_size, uint32_t db_pages)
{
	const uint8_t *page1 = NULL;
	int rc;
	if (!r)
		return ws_fail(WS_ECONFIG, "replica: NULL");
	if ((rc = check_txn(r, tx_id, pgno, pages, n, page_size, db_pages)))
		return rc;
	/* The last copy of page 1 counts: its cookie is the source's after the transaction. */
	for (uint32_t i = n; i-- > 0 && !page1;)
		if (pgno[i] == 1)
			page1 = page1_for(r, pages + (size_t)i * page_size, false);
	return applied(commit(r, tx_id, pgno, pages, n, db_pages, page1));
}
