/*
 * The replica's WAL writer (replica_wal.c), under replica.c: the locks, the
 * -shm mapping, frames, hash tables and header, as SQLite's wal.c writes
 * them. Layout of the -shm (wal.c, "WAL-INDEX FORMAT"), native byte order:
 *   0..47    wal-index header, copy 1      48..95  copy 2 (written first)
 *   96       nBackfill: frames copied into the database
 *   100..119 aReadMark[0..4]: the WAL frame each READ lock's readers use
 *   120..127 the lock bytes (not written): WRITE 120, CKPT 121,
 *            RECOVER 122, READ0..4 123..127; 128 the dead-man switch
 *   128      nBackfillAttempted
 * then per 32 KiB region k: aPgno[4096] (region 0: after those 136 bytes,
 * 4062 entries) giving the page of each frame, and aHash[8192] (u16) an
 * open-addressing table of frame indexes into aPgno, hashed on
 * page * 383. Region 0 holds frames 1..4062, region k frames
 * 4062 + (k-1) * 4096 + 1 onwards.
 */
#ifndef WS_CORE_REPLICA_INTERNAL_H
#define WS_CORE_REPLICA_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

struct ws_rwal {
	const char *path;        /* the database's, for messages */
	int db_fd, shm_fd, wal_fd;
	volatile uint8_t **shm;  /* mapped 32 KiB regions of the -shm */
	uint32_t nshm;
	uint32_t page_size;
};

/*
 * Open the -shm and -wal of w->path (an open WAL database whose wal-index
 * a connection built) and take the locks (replica.h). -EBUSY: another
 * writer holds the write lock. w->db_fd is open already.
 */
int ws_rwal_attach(struct ws_rwal *w);
/* Unmap, release the locks, close (ws_rwal_close_fd). */
void ws_rwal_detach(struct ws_rwal *w);
/*
 * Close fd (if >= 0) once no lock is held on its file, its own released
 * now: closing it sooner would drop the POSIX locks of this process's
 * SQLite connections to the same file. Until then it is kept open.
 */
void ws_rwal_close_fd(int fd);

/*
 * Append one transaction and publish it. pgno NULL: pages 1..n. page1 (if
 * not NULL) is written instead of the page given for page 1. Pages past
 * db_pages are not written. *mx_frame: the WAL's frames after it.
 */
int ws_rwal_commit(struct ws_rwal *w, const uint32_t *pgno, const uint8_t *pages, uint32_t n, uint32_t db_pages,
		   const uint8_t *page1, uint32_t *mx_frame);

#endif
