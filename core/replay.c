/*
 * Replay: apply a verified chain's frames to a database image, exactly up to
 * a commit. Every object is fetched and verified (ws_chain_obj_fetch,
 * ws_batch_verify) before a byte of it is applied; frames are applied only up
 * to a commit frame, so the image never holds a torn or uncommitted
 * transaction. In verify mode (a ws_replay_report) a bad object is reported
 * and the rest checked on.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chain.h"
#include "prefetch.h"
#include "replay.h"
#include "ws_seal.h"
#include "ws_assert.h"

int ws_image_pwrite(int fd, const uint8_t *p, size_t n, uint64_t off)
{
	while (n > 0) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* SQLite's largest possible page count (SQLITE_MAX_PAGE_COUNT's ceiling). */
#define SQLITE_PAGES_MAX 4294967294u

/*
 * Page 1's in-header database size (offset 28) when SQLite takes it as
 * the database's size: valid when the change counter at 24 equals
 * version-valid-for at 92, and not 0. 0 when SQLite goes by the file's
 * size instead (or h holds no database header).
 */
uint32_t ws_image_header_pages(const uint8_t h[100])
{
	return ws_db_hdr_is_sqlite(h, WS_DB_HDR_SIZE) ? ws_db_hdr_page_count(h) : 0;
}

/*
 * The pages a published image of a state of db_pages pages holds. A
 * commit frame's size is the file's, which may run past the database's
 * end: SQLITE_FCNTL_CHUNK_SIZE grows the file in chunks, and a commit on
 * an empty WAL takes its size from the file. SQLite reads only the pages
 * page 1's valid in-header size names and rewrites any page past them
 * before it uses one (a new page goes through the WAL), so the image ends
 * there: the same database, without the file's slack (a sparse file of up
 * to 16 TiB when the size is a hash-consistent forgery).
 */
uint32_t ws_image_pages(const uint8_t h[100], uint32_t db_pages)
{
	uint32_t hp = db_pages ? ws_image_header_pages(h) : 0;
	return hp && hp < db_pages ? hp : db_pages;
}

/*
 * A commit frame's database size, checked before it becomes the image's
 * length: against SQLite's ceiling, and against page 1's in-header size
 * when the image holds page 1 and that field is valid (ws_image_header_pages).
 * SQLite takes a database whose header names more pages than its file
 * holds for corrupt; fewer is a file with slack past the database's end
 * (ws_image_pages), as SQLite itself leaves it.
 */
static int check_commit_size(const char *tenant, const char *key, uint64_t frame, uint32_t dbsz, uint32_t ps,
			     int fd, const uint8_t *page1, bool exact)
{
	uint8_t h[100];
	ssize_t n;

	if (dbsz > SQLITE_PAGES_MAX)
		return ws_fail(WS_ECORRUPT, "tenant %s: batch %s: commit frame %" PRIu64 " says the database has "
			       "%" PRIu32 " pages, more than SQLite's maximum of %" PRIu32, tenant, key, frame, dbsz,
			       SQLITE_PAGES_MAX);
	/* Only a state the source really had is whole: inside a re-base, the
	 * commits before its last lie over a snapshot taken at the last, and
	 * page 1 there is the later one (valid_from_frame). */
	if (!exact)
		return 0;
	if (fd >= 0) {
		n = pread(fd, h, sizeof(h), 0);
	} else if (page1) {
		/* verify (no image): page 1 as the replay last saw it. */
		memcpy(h, page1, sizeof(h));
		n = (ssize_t)sizeof(h);
	} else {
		return 0;
	}
	if (n < (ssize_t)sizeof(h))
		return 0; /* no page 1 yet: the chain's own checks decide */
	if (ws_image_header_pages(h) > dbsz)
		return ws_fail(WS_ECORRUPT, "tenant %s: batch %s: commit frame %" PRIu64 " says the database has "
			       "%" PRIu32 " pages of %" PRIu32 " bytes, but page 1's header says %" PRIu32 ": more than "
			       "the commit holds", tenant, key, frame, dbsz, ps, ws_image_header_pages(h));
	return 0;
}

/* Page 1 names its page size (bytes 16-17, 1 = 65536): the manifest's. */
static int check_page1(const char *tenant, const char *key, const uint8_t *p1, uint32_t ps)
{
	uint32_t hps = ws_db_hdr_page_size(p1);
	if (ws_db_hdr_is_sqlite(p1, WS_DB_HDR_MAGIC_SIZE) && hps != ps)
		return ws_fail(WS_ECORRUPT, "tenant %s: %s: page 1 says the page size is %" PRIu32 " bytes, its "
			       "manifest %" PRIu32, tenant, key, hps, ps);
	return 0;
}

/*
 * The frame at a manifest's last_frame (fr, its frame number no) closes it:
 * a commit frame, whose cumulative checksum (frame header bytes 16-23) is
 * the manifest's end checksum, the seed of the manifest after it, and whose
 * database size is the manifest's. A manifest that says otherwise would
 * make a restore stop inside a transaction, or splice two chains.
 */
int ws_replay_check_end(const char *tenant, const char *key, const struct ws_fmt_manifest *m,
			      const uint8_t *fr, uint64_t no)
{
	struct ws_wal_frame_hdr fh;
	ws_wal_frame_hdr_decode(fr, &fh);
	uint32_t dbsz = fh.db_size, ck0 = fh.cksum1, ck1 = fh.cksum2;
	if (dbsz == 0)
		return ws_fail(WS_ECORRUPT, "tenant %s: manifest %s ends at frame %" PRIu64 ", which is not a "
			       "commit frame", tenant, key, no);
	if (ck0 != m->end_cksum[0] || ck1 != m->end_cksum[1])
		return ws_fail(WS_ECORRUPT, "tenant %s: manifest %s: end checksum %08" PRIx32 "%08" PRIx32 " is "
			       "not that of its last frame %" PRIu64 " (%08" PRIx32 "%08" PRIx32 ")", tenant, key,
			       m->end_cksum[0], m->end_cksum[1], no, ck0, ck1);
	if (dbsz != m->db_pages)
		return ws_fail(WS_ECORRUPT, "tenant %s: manifest %s says the database has %" PRIu32 " pages at "
			       "frame %" PRIu64 "; the commit frame says %" PRIu32, tenant, key, m->db_pages, no,
			       dbsz);
	return 0;
}

/* In verify mode, report a bad object and go on; otherwise stop. */
bool ws_replay_keep_going(struct ws_replay_report *rep, const char *tenant, const char *key, int rc)
{
	if (!rep)
		return false;
	rep->problems++;
	if (!rep->first_err)
		rep->first_err = rc;
	if (rep->fn)
		rep->fn(tenant, key, rc, ws_errmsg(), rep->arg);
	return true;
}

/*
 * ws_replay_keep_going for the replay: once an object is bad, the image is no longer
 * the state restore would build, so nothing more is written to it nor read
 * back from it (page 1's header); the objects after are checked on their own.
 */
static bool go_on(struct ws_replay_report *rep, int *fd, const char *tenant, const char *key, int rc)
{
	WS_ASSERT(rc != 0);
	if (!ws_replay_keep_going(rep, tenant, key, rc))
		return false;
	*fd = -1;
	return true;
}

/* A snapshot part's header and pages: as the window's thread opened them
 * (op done), else opened now (ws_seal_open_snap, which op would hold). */
static int open_snap(const struct ws_keyring *kr, const struct ws_buf *b, const struct ws_obj_opened *op,
		     struct ws_fmt_snap *sh, struct ws_buf *plain, const uint8_t **pages)
{
	size_t hl;
	if (!op->done)
		return ws_seal_open_snap(kr, b->data, b->len, sh, plain, pages);
	if (op->rc)
		return ws_fail(op->rc, "%s", op->msg);
	/* It decoded there: the same bytes decode the same here. */
	const int hdr = ws_fmt_snap_decode_hdr(b->data, b->len, sh, &hl);
	WS_ASSERT(hdr == 0); /* an opened snapshot part's header decodes */
	(void)hdr;
	*pages = op->payload;
	return 0;
}

int ws_replay(struct ws_store *s, const char *tenant, const struct ws_chain *c, size_t upto,
	      uint64_t target_frame, int fd, struct ws_replay_result *res, struct ws_replay_report *rep)
{
	return ws_replay_from(s, tenant, c, 0, upto, target_frame, fd, res, rep);
}

int ws_replay_from(struct ws_store *s, const char *tenant, const struct ws_chain *c, size_t from,
		   size_t upto, uint64_t target_frame, int fd, struct ws_replay_result *res,
		   struct ws_replay_report *rep)
{
	struct ws_buf b, plain; /* an object as read; its payload opened when sealed */
	uint32_t run[2] = { 0, 0 };
	bool resync = false, have_p1 = false;
	uint8_t p1[100]; /* page 1's header as last replayed (verify has no image to read it from) */
	struct ws_prefetch *pf = NULL;
	struct ws_obj_opened op; /* what the window's thread found opening the object taken */
	int rc = 0;

	/* Callers pick upto and from inside the chain (choose_target, the
	 * chain's last manifest); from 1 only past a cut at c->m[0]. */
	WS_ASSERT(c->count > 0 && upto < c->count && from <= upto + 1);
	memset(res, 0, sizeof(*res));
	if (from > 0 && from <= c->count) {
		/* The state at the end of m[from-1] is already in fd. */
		const struct ws_fmt_manifest *base = &c->m[from - 1];
		res->db_pages = base->db_pages;
		res->page_size = base->gen.page_size;
		res->commit_frame = base->last_frame;
		res->commit_manifest = from - 1;
	}
	ws_buf_init(&b, (size_t)1 << 30);
	ws_buf_init(&plain, (size_t)1 << 31);
	/* The objects are read ahead, s->fetch_parallelism at once, and taken
	 * here one by one in chain order (NULL: each read when it is needed). */
	pf = ws_prefetch_start(s, c, from, upto, s->fetch_parallelism);
	for (size_t i = from; i <= upto && i < c->count; i++) {
		const struct ws_fmt_manifest *m = &c->m[i];
		const uint32_t ps = m->gen.page_size;
		const uint32_t fsz = ws_wal_frame_size(ps);
		bool last_manifest = i == upto;
		uint64_t prev_commit = 0; /* the last commit applied from m */

		if (m->kind == WS_MANIFEST_REBASE) {
			for (uint32_t k = 0; k < m->snap_count; k++) {
				struct ws_fmt_snap sh;
				const uint8_t *pages;
				rc = ws_prefetch_or_fetch(pf, s, c, i, &m->snaps[k], &b, &plain, &op);
				if (!rc)
					rc = open_snap(s->keys, &b, &op, &sh, &plain, &pages);
				if (!rc && (sh.first_page != m->snaps[k].first || sh.page_count != m->snaps[k].count ||
					    sh.page_size != ps))
					rc = ws_fail(WS_EFORMAT, "snapshot part does not match its manifest entry");
				if (rc) {
					ws_fail_wrap(rc, "tenant %s: snapshot %s", tenant, m->snaps[k].key);
					if (go_on(rep, &fd, tenant, m->snaps[k].key, rc)) {
						have_p1 = false; /* what page 1 holds is unknown from here */
						continue;
					}
					goto out;
				}
				if (sh.first_page == 1 && ps >= sizeof(p1)) {
					memcpy(p1, pages, sizeof(p1));
					have_p1 = true;
					if ((rc = check_page1(tenant, m->snaps[k].key, p1, ps)) != 0) {
						if (go_on(rep, &fd, tenant, m->snaps[k].key, rc))
							continue;
						goto out;
					}
				}
				/* The decoder checked first_page >= 1 and the part's size. */
				WS_ASSERT(sh.first_page >= 1);
				if (fd >= 0 && (rc = ws_image_pwrite(fd, pages, (size_t)sh.page_count * ps,
								     (uint64_t)(sh.first_page - 1) * ps)) != 0) {
					ws_fail(rc, "tenant %s: write restored pages", tenant);
					goto out;
				}
			}
			res->db_pages = m->db_pages;
			res->page_size = ps;
			res->commit_frame = m->last_frame;
			res->commit_manifest = i;
		}
		run[0] = m->seed_cksum[0];
		run[1] = m->seed_cksum[1];
		for (uint32_t k = 0; k < m->batch_count; k++) {
			struct ws_fmt_batch bh;
			const uint8_t *frames;
			uint32_t end[2];
			size_t hdr_len;
			char name[WS_KEY_MAX + 32];
			/* What messages and reports call it: an inline batch by its manifest. */
			if (!ws_fmt_objref_inline(&m->batches[k]))
				snprintf(name, sizeof(name), "%s", m->batches[k].key);
			else
				snprintf(name, sizeof(name), "%s (inline batch %u)", c->keys[i], k);
			rc = ws_prefetch_or_fetch(pf, s, c, i, &m->batches[k], &b, &plain, &op);
			if (!rc && resync && ws_fmt_batch_decode_hdr(b.data, b.len, &bh, &hdr_len) == 0) {
				/* After a bad batch, check the rest on their own. */
				run[0] = bh.seed_cksum[0];
				run[1] = bh.seed_cksum[1];
			}
			if (!rc)
				rc = ws_batch_verify(s->keys, b.data, b.len, m, &m->batches[k], name, run, end, &op, &bh,
						     &plain, &frames);
			if (rc) {
				ws_fail_wrap(rc, "tenant %s", tenant);
				if (go_on(rep, &fd, tenant, name, rc)) {
					resync = true;
					have_p1 = false; /* what page 1 holds is unknown from here */
					continue;
				}
				goto out;
			}
			resync = false;
			for (uint64_t f = 0; f < bh.frame_count; f++) {
				uint64_t no = bh.first_frame + f;
				const uint8_t *fr = frames + f * fsz;
				struct ws_wal_frame_hdr fh;
				ws_wal_frame_hdr_decode(fr, &fh);
				uint32_t pgno = fh.pgno, dbsz = fh.db_size;
				/* Stop at the manifest's last commit, and at the target
				 * inside the last manifest: never past a commit. */
				if (no > m->last_frame || (last_manifest && no > target_frame))
					break;
				if (pgno == 0) {
					rc = ws_fail(WS_ECORRUPT, "tenant %s: batch %s frame %" PRIu64 " has page 0",
						     tenant, name, no);
					goto out;
				}
				if (fd >= 0 && (rc = ws_image_pwrite(fd, fr + WS_WAL_FRAME_HDR_SIZE, ps,
								     (uint64_t)(pgno - 1) * ps)) != 0) {
					ws_fail(rc, "tenant %s: write restored pages", tenant);
					goto out;
				}
				if (pgno == 1 && ps >= sizeof(p1)) {
					memcpy(p1, fr + WS_WAL_FRAME_HDR_SIZE, sizeof(p1));
					have_p1 = true;
					if ((rc = check_page1(tenant, name, p1, ps)) != 0) {
						if (go_on(rep, &fd, tenant, name, rc)) {
							rc = 0;
							break;
						}
						goto out;
					}
				}
				if (dbsz && (rc = check_commit_size(tenant, name, no, dbsz, ps, fd,
								    have_p1 ? p1 : NULL,
								    no >= m->valid_from_frame)) != 0) {
					if (go_on(rep, &fd, tenant, name, rc)) {
						rc = 0;
						break;
					}
					goto out;
				}
				/* The batches tile the manifest up to its last frame (the
				 * decoder), so every manifest is closed here unless a bad
				 * batch was reported or the target stops it earlier. */
				if (no == m->last_frame) {
					if ((rc = ws_replay_check_end(tenant, c->keys[i], m, fr, no)) != 0) {
						if (go_on(rep, &fd, tenant, c->keys[i], rc)) {
							rc = 0;
							break;
						}
						goto out;
					}
				}
				if (dbsz) {
					/* Commit order: the batches tile m in frame order
					 * (the decoder checked it), so each commit applied
					 * is past the one before, and never past the target. */
					WS_ASSERT(no > prev_commit && no <= m->last_frame);
					WS_ASSERT(!last_manifest || no <= target_frame);
					prev_commit = no;
					res->db_pages = dbsz;
					res->commit_frame = no;
					res->commit_manifest = i;
				}
			}
			run[0] = end[0];
			run[1] = end[1];
		}
		res->page_size = ps;
	}
out:
	WS_ASSERT(rc != 0 || res->commit_manifest <= upto);
	ws_prefetch_end(pf, NULL);
	ws_buf_free(&b);
	ws_buf_free(&plain);
	if (!rc && rep && rep->first_err)
		rc = rep->first_err;
	return rc;
}

/* The point asked for is before cut (c->m[0]), whose history retention removed. */
