/*
 * The replica's WAL writer (replica_internal.h has the -shm layout): what
 * SQLite's walFrames, walIndexAppend, walCleanupHash, walRestartHdr and
 * walIndexWriteHdr do, for frames that come from elsewhere.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "replica_internal.h"
#include "ws_fail.h"
#include "ws_fault.h"
#include "ws_wal.h"

#define SHM_REGION 32768u
#define SHM_LOCK_WRITE 120
#define SHM_LOCK_READ(i) (123 + (i))
#define SHM_LOCK_DMS 128
#define DB_SHARED_FIRST 0x40000002 /* PENDING_BYTE + 2, SQLite's SHARED range */
#define DB_SHARED_SIZE 510
#define CK_BACKFILL 96u
#define CK_READMARK(i) (100u + 4u * (i))
#define CK_BACKFILL_TRIED 128u
#define READMARK_NOT_USED 0xffffffffu
#define HT_NPAGE 4096u
#define HT_NSLOT 8192u
#define HT_NPAGE_ONE (HT_NPAGE - 136u / 4u)

static int ofd_lock(int fd, short type, off_t start, off_t len)
{
	struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len };
	return fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 0 : -errno;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = ms * 1000000L };
	nanosleep(&ts, NULL);
}

/* The write lock, waiting out a reader's recovery (which takes it briefly). */
static int take_write_lock(struct ws_rwal *w)
{
	for (int tries = 0; tries < 100; tries++) {
		int rc = ofd_lock(w->shm_fd, F_WRLCK, SHM_LOCK_WRITE, 1);
		if (rc != -EAGAIN && rc != -EACCES)
			return rc ? ws_fail(rc, "replica %s: locking its -shm: %s", w->path, strerror(-rc)) : 0;
		sleep_ms(10);
	}
	return ws_fail(-EBUSY, "replica %s: in use by another writer (it holds the WAL write lock)", w->path);
}

static int open_side(const struct ws_rwal *w, const char *suffix, int *fd)
{
	char p[PATH_MAX];
	if ((size_t)snprintf(p, sizeof(p), "%s%s", w->path, suffix) >= sizeof(p))
		return ws_fail(WS_ECONFIG, "replica %s: path too long", w->path);
	*fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	return *fd < 0 ? ws_fail(-errno, "replica %s: opening %s: %s", w->path, p, strerror(errno)) : 0;
}

/* Region k of the -shm, mapped (and the file grown to hold it). */
static volatile uint8_t *region(struct ws_rwal *w, uint32_t k)
{
	if (k < w->nshm && w->shm[k])
		return w->shm[k];
	if (k >= w->nshm) {
		volatile uint8_t **n = realloc(w->shm, (k + 1) * sizeof(*n));
		if (!n)
			return NULL;
		memset(n + w->nshm, 0, (k + 1 - w->nshm) * sizeof(*n));
		w->shm = n;
		w->nshm = k + 1;
	}
	struct stat st;
	off_t end = (off_t)(k + 1) * SHM_REGION;
	if (fstat(w->shm_fd, &st) != 0 || (st.st_size < end && posix_fallocate(w->shm_fd, st.st_size, end - st.st_size)))
		return NULL;
	void *p = mmap(NULL, SHM_REGION, PROT_READ | PROT_WRITE, MAP_SHARED, w->shm_fd, (off_t)k * SHM_REGION);
	if (p == MAP_FAILED)
		return NULL;
	w->shm[k] = p;
	return w->shm[k];
}

int ws_rwal_attach(struct ws_rwal *w)
{
	int rc;
	w->shm_fd = w->wal_fd = -1;
	if ((rc = open_side(w, "-shm", &w->shm_fd)) || (rc = open_side(w, "-wal", &w->wal_fd)))
		return rc;
	if ((rc = ofd_lock(w->shm_fd, F_RDLCK, SHM_LOCK_DMS, 1)) || (rc = ofd_lock(w->db_fd, F_RDLCK, DB_SHARED_FIRST, DB_SHARED_SIZE)))
		return ws_fail(rc == -EAGAIN || rc == -EACCES ? -EBUSY : rc,
			       "replica %s: held exclusively by another connection", w->path);
	if ((rc = take_write_lock(w)))
		return rc;
	if (!region(w, 0))
		return ws_fail(-EIO, "replica %s: mapping its -shm: %s", w->path, strerror(errno));
	return 0;
}

/*
 * Closing a descriptor drops every POSIX lock this process holds on its
 * file, those of SQLite's connections to the replica in this process
 * included (a reader's READ lock, its dead-man and SHARED locks): another
 * writer or checkpointer, or this applier's next restart of the WAL, would
 * then overwrite what that reader reads. So, as SQLite's unix VFS does
 * with its own descriptors, one goes only when nobody holds a lock on its
 * file (F_OFD_GETLK reports POSIX locks, this process's too); until then it
 * waits here, its own locks released, and is tried again at each close.
 */
static pthread_mutex_t parked_mu = PTHREAD_MUTEX_INITIALIZER;
static int *parked;
static size_t nparked, parked_cap;

static bool file_locked(int fd)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
	return fcntl(fd, F_OFD_GETLK, &fl) != 0 || fl.l_type != F_UNLCK;
}

static bool park(int fd)
{
	if (nparked == parked_cap) {
		size_t cap = parked_cap ? parked_cap * 2 : 8;
		int *n = realloc(parked, cap * sizeof(*n));
		if (!n)
			return false;
		parked = n;
		parked_cap = cap;
	}
	parked[nparked++] = fd;
	return true;
}

void ws_rwal_close_fd(int fd)
{
	pthread_mutex_lock(&parked_mu);
	if (fd >= 0)
		(void)ofd_lock(fd, F_UNLCK, 0, 0);
	for (size_t i = nparked; i-- > 0;)
		if (!file_locked(parked[i])) {
			close(parked[i]);
			parked[i] = parked[--nparked];
		}
	if (fd >= 0 && (!file_locked(fd) || !park(fd)))
		close(fd);
	pthread_mutex_unlock(&parked_mu);
}

void ws_rwal_detach(struct ws_rwal *w)
{
	for (uint32_t k = 0; k < w->nshm; k++)
		if (w->shm[k])
			munmap((void *)(uintptr_t)w->shm[k], SHM_REGION);
	free(w->shm);
	w->shm = NULL;
	w->nshm = 0;
	ws_rwal_close_fd(w->wal_fd);
	ws_rwal_close_fd(w->shm_fd);
	w->wal_fd = w->shm_fd = -1;
}

static uint32_t ck_get(struct ws_rwal *w, uint32_t off)
{
	return __atomic_load_n((volatile uint32_t *)(w->shm[0] + off), __ATOMIC_ACQUIRE);
}

static void ck_put(struct ws_rwal *w, uint32_t off, uint32_t v)
{
	__atomic_store_n((volatile uint32_t *)(w->shm[0] + off), v, __ATOMIC_RELEASE);
}

/* The header as it stands (the applier holds the write lock: nobody else changes it). */
static int read_hdr(struct ws_rwal *w, struct ws_walidx_hdr *h)
{
	uint8_t both[WS_WALIDX_HDR_BOTH];
	for (size_t i = 0; i < sizeof(both); i++)
		both[i] = w->shm[0][i];
	int rc = ws_walidx_hdr_decode(both, sizeof(both), h);
	if (rc)
		return ws_fail(WS_ECORRUPT, "replica %s: its wal-index header is not valid (%s)", w->path, strerror(-rc));
	return 0;
}

/* walIndexWriteHdr: the copy at 48 first, a full barrier, the one at 0. */
static void publish_hdr(struct ws_rwal *w, struct ws_walidx_hdr *h)
{
	uint8_t one[WS_WALIDX_HDR_SIZE];
	h->version = WS_WAL_VERSION;
	ws_walidx_hdr_encode(h, one);
	__sync_synchronize(); /* the frames and hash entries before the header that names them */
	for (size_t i = 0; i < sizeof(one); i++)
		w->shm[0][WS_WALIDX_HDR_SIZE + i] = one[i];
	__sync_synchronize(); /* pairs with the reader's barrier between its two copies */
	for (size_t i = 0; i < sizeof(one); i++)
		w->shm[0][i] = one[i];
	__sync_synchronize();
}

static uint32_t rand32(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t x = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^ (uint64_t)getpid() << 32;
	x ^= x >> 29;
	return (uint32_t)(x * 0xbf58476d1ce4e5b9ull >> 32);
}

/*
 * walRestartLog: a WAL whose every frame is in the database starts over
 * when no reader uses it. READ0 shared keeps a checkpointer from
 * backfilling meanwhile; READ1..4 exclusive proves no reader reads frames.
 */
static void try_restart(struct ws_rwal *w, struct ws_walidx_hdr *h)
{
	if (h->mx_frame == 0 || ck_get(w, CK_BACKFILL) != h->mx_frame)
		return;
	if (ofd_lock(w->shm_fd, F_RDLCK, SHM_LOCK_READ(0), 1) != 0)
		return;
	if (ofd_lock(w->shm_fd, F_WRLCK, SHM_LOCK_READ(1), 4) == 0) {
		if (ck_get(w, CK_BACKFILL) == h->mx_frame) {
			h->mx_frame = 0;
			h->salt1 += 1;
			h->salt2 = rand32();
			publish_hdr(w, h);
			ck_put(w, CK_BACKFILL, 0);
			ck_put(w, CK_BACKFILL_TRIED, 0);
			ck_put(w, CK_READMARK(1), 0);
			for (uint32_t i = 2; i < 5; i++)
				ck_put(w, CK_READMARK(i), READMARK_NOT_USED);
		}
		(void)ofd_lock(w->shm_fd, F_UNLCK, SHM_LOCK_READ(1), 4);
	}
	(void)ofd_lock(w->shm_fd, F_UNLCK, SHM_LOCK_READ(0), 1);
}

/* A new WAL generation at frame 1: new salts (stale frames never chain), the header written. */
static int start_wal(struct ws_rwal *w, struct ws_walidx_hdr *h, uint32_t s[2])
{
	uint8_t buf[WS_WAL_HDR_SIZE];
	struct ws_wal_hdr old, wh = { .magic = WS_WAL_MAGIC_LE, .version = WS_WAL_VERSION, .page_size = w->page_size };
	if (pread(w->wal_fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf) && ws_wal_hdr_parse(buf, &old) == 0)
		wh.checkpoint_seq = old.checkpoint_seq + 1;
	if (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)
		wh.magic = WS_WAL_MAGIC_BE;
	wh.salt1 = h->salt1 + 1;
	wh.salt2 = rand32();
	ws_wal_hdr_encode(&wh, buf);
	if (pwrite(w->wal_fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
		return ws_fail(-EIO, "replica %s: writing its WAL header: %s", w->path, strerror(errno));
	h->salt1 = wh.salt1;
	h->salt2 = wh.salt2;
	h->big_endian_cksum = wh.magic == WS_WAL_MAGIC_BE;
	s[0] = wh.cksum1;
	s[1] = wh.cksum2;
	return 0;
}

struct ht {
	volatile uint32_t *pgno; /* aPgno: entry i is frame izero + 1 + i */
	volatile uint16_t *hash;
	uint32_t izero;
};

static int ht_at(struct ws_rwal *w, uint32_t frame, struct ht *t)
{
	uint32_t k = (frame + HT_NPAGE - HT_NPAGE_ONE - 1) / HT_NPAGE;
	volatile uint8_t *base = region(w, k);
	if (!base)
		return ws_fail(-EIO, "replica %s: mapping its -shm: %s", w->path, strerror(errno));
	t->pgno = (volatile uint32_t *)base + (k == 0 ? 136 / 4 : 0);
	t->hash = (volatile uint16_t *)(base + HT_NPAGE * 4);
	t->izero = k == 0 ? 0 : HT_NPAGE_ONE + (k - 1) * HT_NPAGE;
	return 0;
}

/* walCleanupHash: entries past mx_frame (a writer that died mid-transaction) go. */
static int ht_cleanup(struct ws_rwal *w, uint32_t mx_frame)
{
	struct ht t = { 0 };
	int rc = ht_at(w, mx_frame, &t);
	if (rc)
		return rc;
	uint32_t limit = mx_frame - t.izero;
	for (uint32_t i = 0; i < HT_NSLOT; i++)
		if (t.hash[i] > limit)
			__atomic_store_n(&t.hash[i], 0, __ATOMIC_RELAXED);
	for (volatile uint32_t *p = t.pgno + limit; p < (volatile uint32_t *)t.hash; p++)
		*p = 0;
	return 0;
}

/* walIndexAppend. */
static int ht_append(struct ws_rwal *w, uint32_t frame, uint32_t pgno)
{
	struct ht t = { 0 };
	int rc = ht_at(w, frame, &t);
	if (rc)
		return rc;
	uint32_t idx = frame - t.izero;
	if (idx == 1) /* a new hash table: what an older generation left in it goes */
		for (volatile uint32_t *p = t.pgno; p < (volatile uint32_t *)(t.hash + HT_NSLOT); p++)
			*p = 0;
	uint32_t key = (pgno * 383u) & (HT_NSLOT - 1), collide = idx;
	while (t.hash[key]) {
		if (collide-- == 0)
			return ws_fail(WS_ECORRUPT, "replica %s: its wal-index hash table is full", w->path);
		key = (key + 1) & (HT_NSLOT - 1);
	}
	t.pgno[idx - 1] = pgno;
	__atomic_store_n(&t.hash[key], (uint16_t)idx, __ATOMIC_RELAXED);
	return 0;
}

struct txn {
	const uint32_t *pgno;
	const uint8_t *pages, *page1;
	uint32_t n, db_pages, last; /* last: the index of the commit frame's page */
};

static uint32_t txn_pgno(const struct txn *x, uint32_t i) { return x->pgno ? x->pgno[i] : i + 1; }

static int write_frame(struct ws_rwal *w, const struct txn *x, uint32_t i, uint32_t frame,
		       const struct ws_walidx_hdr *h, uint32_t s[2])
{
	uint8_t fh[WS_WAL_FRAME_HDR_SIZE];
	uint32_t pg = txn_pgno(x, i);
	const uint8_t *page = pg == 1 && x->page1 ? x->page1 : x->pages + (size_t)i * w->page_size;
	ws_put_be32(fh, pg);
	ws_put_be32(fh + 4, i == x->last ? x->db_pages : 0);
	ws_put_be32(fh + 8, h->salt1);
	ws_put_be32(fh + 12, h->salt2);
	ws_wal_checksum(h->big_endian_cksum, fh, 8, s);
	ws_wal_checksum(h->big_endian_cksum, page, w->page_size, s);
	ws_put_be32(fh + 16, s[0]);
	ws_put_be32(fh + 20, s[1]);
	struct iovec iov[2] = { { fh, sizeof(fh) }, { (void *)(uintptr_t)page, w->page_size } };
	ssize_t want = (ssize_t)(sizeof(fh) + w->page_size);
	if (pwritev(w->wal_fd, iov, 2, (off_t)ws_wal_frame_offset(w->page_size, frame)) != want)
		return ws_fail(-EIO, "replica %s: writing WAL frame %u: %s", w->path, frame, strerror(errno));
	return ht_append(w, frame, pg);
}

static int write_frames(struct ws_rwal *w, const struct txn *x, struct ws_walidx_hdr *h, uint32_t s[2])
{
	uint32_t frame = h->mx_frame;
	int rc = 0;
	for (uint32_t i = 0; i <= x->last && !rc; i++)
		if (txn_pgno(x, i) <= x->db_pages)
			rc = write_frame(w, x, i, ++frame, h, s);
	h->mx_frame = frame;
	return rc;
}

int ws_rwal_commit(struct ws_rwal *w, const uint32_t *pgno, const uint8_t *pages, uint32_t n, uint32_t db_pages,
		   const uint8_t *page1, uint32_t *mx_frame)
{
	struct txn x = { .pgno = pgno, .pages = pages, .page1 = page1, .n = n, .db_pages = db_pages, .last = n };
	struct ws_walidx_hdr h;
	uint32_t s[2];
	int rc;
	for (uint32_t i = n; i-- > 0 && x.last == n;)
		if (txn_pgno(&x, i) <= db_pages)
			x.last = i;
	if (x.last == n)
		return ws_fail(WS_EFORMAT, "replica %s: a transaction with no page within its %u pages", w->path, db_pages);
	if ((rc = read_hdr(w, &h)))
		return rc;
	try_restart(w, &h);
	if (h.mx_frame == 0)
		rc = start_wal(w, &h, s);
	else if (h.page_size != w->page_size)
		rc = ws_fail(WS_ECORRUPT, "replica %s: its WAL has pages of %u bytes, not %u", w->path, h.page_size,
			     w->page_size);
	else {
		s[0] = h.frame_cksum[0];
		s[1] = h.frame_cksum[1];
		rc = ht_cleanup(w, h.mx_frame);
	}
	if (rc || (rc = write_frames(w, &x, &h, s)) || (rc = WS_FAULT("replica.before_publish")))
		return rc; /* frames past the header's mxFrame: no reader sees them, the next commit writes over them */
	h.change++;
	h.page_size = w->page_size;
	h.n_page = db_pages;
	h.frame_cksum[0] = s[0];
	h.frame_cksum[1] = s[1];
	publish_hdr(w, &h);
	*mx_frame = h.mx_frame;
	return 0;
}
