/*
 * Restore: rebuild a tenant's database from its base snapshot and the
 * frames after it, exactly at a committed state.
 *
 * Everything is fetched and verified (ws_chain_load, ws_batch_verify)
 * before it is applied, the image is built in a temporary file next to the
 * output, checked with PRAGMA integrity_check, fsynced, and only then
 * published: a restore that cannot prove its result complete leaves nothing
 * at the output path. Frames are applied only up to a commit frame, so a
 * restore never yields a torn or uncommitted transaction.
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

#include "core_internal.h"
#include "replay.h"
#include "ws_logging.h"
#include "ws_wal.h"

static int pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off)
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
static uint32_t header_pages(const uint8_t h[100])
{
	if (memcmp(h, "SQLite format 3", 16) != 0 || ws_get_be32(h + 24) != ws_get_be32(h + 92))
		return 0;
	return ws_get_be32(h + 28);
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
static uint32_t image_pages(const uint8_t h[100], uint32_t db_pages)
{
	uint32_t hp = db_pages ? header_pages(h) : 0;
	return hp && hp < db_pages ? hp : db_pages;
}

/*
 * A commit frame's database size, checked before it becomes the image's
 * length: against SQLite's ceiling, and against page 1's in-header size
 * when the image holds page 1 and that field is valid (header_pages).
 * SQLite takes a database whose header names more pages than its file
 * holds for corrupt; fewer is a file with slack past the database's end
 * (image_pages), as SQLite itself leaves it.
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
	if (header_pages(h) > dbsz)
		return ws_fail(WS_ECORRUPT, "tenant %s: batch %s: commit frame %" PRIu64 " says the database has "
			       "%" PRIu32 " pages of %" PRIu32 " bytes, but page 1's header says %" PRIu32 ": more than "
			       "the commit holds", tenant, key, frame, dbsz, ps, header_pages(h));
	return 0;
}

/* Page 1 names its page size (bytes 16-17, 1 = 65536): the manifest's. */
static int check_page1(const char *tenant, const char *key, const uint8_t *p1, uint32_t ps)
{
	uint32_t hps = (uint32_t)p1[16] << 8 | p1[17];
	if (hps == 1)
		hps = 65536;
	if (memcmp(p1, "SQLite format 3", 16) == 0 && hps != ps)
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
static int check_manifest_end(const char *tenant, const char *key, const struct ws_fmt_manifest *m,
			      const uint8_t *fr, uint64_t no)
{
	uint32_t dbsz = ws_get_be32(fr + 4);
	uint32_t ck0 = ws_get_be32(fr + 16), ck1 = ws_get_be32(fr + 20);
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
static bool keep_going(struct ws_replay_report *rep, const char *tenant, const char *key, int rc)
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
 * keep_going for the replay: once an object is bad, the image is no longer
 * the state restore would build, so nothing more is written to it nor read
 * back from it (page 1's header); the objects after are checked on their own.
 */
static bool go_on(struct ws_replay_report *rep, int *fd, const char *tenant, const char *key, int rc)
{
	if (!keep_going(rep, tenant, key, rc))
		return false;
	*fd = -1;
	return true;
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
	struct ws_buf b;
	uint32_t run[2] = { 0, 0 };
	bool resync = false, have_p1 = false;
	uint8_t p1[100]; /* page 1's header as last replayed (verify has no image to read it from) */
	int rc = 0;

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
	for (size_t i = from; i <= upto && i < c->count; i++) {
		const struct ws_fmt_manifest *m = &c->m[i];
		const uint32_t ps = m->gen.page_size;
		const uint32_t fsz = ws_wal_frame_size(ps);
		bool last_manifest = i == upto;

		if (m->kind == WS_MANIFEST_REBASE) {
			for (uint32_t k = 0; k < m->snap_count; k++) {
				struct ws_fmt_snap sh;
				const uint8_t *pages;
				rc = ws_chain_obj_fetch(s, c, i, &m->snaps[k], WS_SNAP_HDR_HASH_OFF, &b);
				if (!rc)
					rc = ws_fmt_snap_decode(b.data, b.len, &sh, &pages);
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
				if (fd >= 0 && (rc = pwrite_all(fd, pages, (size_t)sh.page_count * ps,
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
			char name[WS_KEY_MAX + 32];
			/* What messages and reports call it: an inline batch by its manifest. */
			if (!ws_fmt_objref_inline(&m->batches[k]))
				snprintf(name, sizeof(name), "%s", m->batches[k].key);
			else
				snprintf(name, sizeof(name), "%s (inline batch %u)", c->keys[i], k);
			rc = ws_chain_obj_fetch(s, c, i, &m->batches[k], WS_BATCH_HDR_HASH_OFF, &b);
			if (!rc && resync && ws_fmt_batch_decode(b.data, b.len, &bh, NULL) == 0) {
				/* After a bad batch, check the rest on their own. */
				run[0] = bh.seed_cksum[0];
				run[1] = bh.seed_cksum[1];
			}
			if (!rc)
				rc = ws_batch_verify(b.data, b.len, m, &m->batches[k], name, run, end, &bh, &frames);
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
				uint32_t pgno = ws_get_be32(fr);
				uint32_t dbsz = ws_get_be32(fr + 4);
				/* Stop at the manifest's last commit, and at the target
				 * inside the last manifest: never past a commit. */
				if (no > m->last_frame || (last_manifest && no > target_frame))
					break;
				if (pgno == 0) {
					rc = ws_fail(WS_ECORRUPT, "tenant %s: batch %s frame %" PRIu64 " has page 0",
						     tenant, name, no);
					goto out;
				}
				if (fd >= 0 && (rc = pwrite_all(fd, fr + WS_WAL_FRAME_HDR_SIZE, ps,
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
					if ((rc = check_manifest_end(tenant, c->keys[i], m, fr, no)) != 0) {
						if (go_on(rep, &fd, tenant, c->keys[i], rc)) {
							rc = 0;
							break;
						}
						goto out;
					}
				}
				if (dbsz) {
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
	ws_buf_free(&b);
	if (!rc && rep && rep->first_err)
		rc = rep->first_err;
	return rc;
}

/* The point asked for is before cut (c->m[0]), whose history retention removed. */
static int before_cut(const char *tenant, const struct ws_chain *c, const struct ws_restore_base *cut)
{
	return ws_fail(WS_ERANGE_, "tenant %s: retention removed the history before checkpoint %" PRIu64
		       "'s cut (frame %" PRIu64 " of manifest %s, shipped at %lld ms); the requested point is "
		       "before it", tenant, cut->checkpoint_id, c->m[0].last_frame, c->keys[0],
		       (long long)c->m[0].time_ms);
}

/*
 * Pick the manifest and frame the options ask for. cut: c->m[0] is that
 * checkpoint's cut, the oldest state stored (else NULL).
 */
static int choose_target(const char *tenant, const struct ws_chain *c, const struct ws_restore_opts *o,
			 const struct ws_restore_base *cut, size_t *idx, uint64_t *frame, bool *before)
{
	*before = false;
	size_t last = c->count - 1;
	if (o->time_ms) {
		/* The longest run of manifests from the oldest that were all
		 * stamped at or before the time: a clock that stepped back (NTP,
		 * a takeover by a host whose clock is behind) can stamp a newer
		 * manifest earlier than an older one, and a state past a manifest
		 * stamped after the time may hold commits made after it. */
		size_t i = 0;
		while (i < c->count && c->m[i].time_ms <= o->time_ms)
			i++;
		if (i == 0 && cut) {
			*before = true;
			return before_cut(tenant, c, cut);
		}
		if (i == 0)
			return ws_fail(WS_ERANGE_, "tenant %s: nothing was shipped at or before the requested time "
				       "(oldest stored state is from %lld ms)", tenant, (long long)c->m[0].time_ms);
		*idx = i - 1;
		*frame = c->m[i - 1].last_frame;
		return 0;
	}
	if (o->frame) {
		/* Frames count within the newest WAL generation. */
		size_t first = last;
		while (first > 0 && c->m[first].kind == WS_MANIFEST_CONTINUE)
			first--;
		/* The generation began at or before the cut: only its frames
		 * from the cut's last one on are stored. */
		if (cut && first == 0 && o->frame < c->m[0].last_frame) {
			*before = true;
			return before_cut(tenant, c, cut);
		}
		if (o->frame < c->m[first].valid_from_frame || o->frame < 1)
			return ws_fail(WS_ERANGE_, "tenant %s: frame %" PRIu64 " is before the first restorable "
				       "frame %" PRIu64 " of the current generation", tenant, o->frame,
				       c->m[first].valid_from_frame);
		for (size_t i = first; i <= last; i++) {
			if (c->m[i].last_frame >= o->frame) {
				*idx = i;
				*frame = o->frame;
				return 0;
			}
		}
		*idx = last;
		*frame = c->m[last].last_frame;
		return 0;
	}
	*idx = last;
	*frame = c->m[last].last_frame;
	return 0;
}

static int integrity_check(const char *path)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *stmt = NULL;
	char *uri = NULL;
	int rc = -EIO;

	if (asprintf(&uri, "file:%s?immutable=1", path) < 0)
		return -ENOMEM;
	if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &stmt, NULL) != SQLITE_OK) {
		rc = ws_fail(WS_ECORRUPT, "restored image cannot be opened by SQLite: %s", sqlite3_errmsg(db));
		goto out;
	}
	{
		/* Every line SQLite reports, on one line (up to a bound): some
		 * versions give one row per problem, the first being only
		 * "*** in database main ***". */
		char what[768] = "";
		size_t used = 0;
		int step, lines = 0;
		while ((step = sqlite3_step(stmt)) == SQLITE_ROW) {
			const char *line = (const char *)sqlite3_column_text(stmt, 0);
			if (lines == 0 && line && strcmp(line, "ok") == 0)
				break;
			if (used < sizeof(what) - 1)
				used += (size_t)snprintf(what + used, sizeof(what) - used, "%s%s", lines ? "; " : "",
							 line ? line : "(null)");
			lines++;
		}
		for (char *nl = what; (nl = strchr(nl, '\n')) != NULL;)
			*nl = ' ';
		if (step == SQLITE_ROW && lines == 0)
			rc = 0;
		else if (lines)
			rc = ws_fail(WS_ECORRUPT, "restored image fails PRAGMA integrity_check: %s", what);
		else
			rc = ws_fail(WS_ECORRUPT, "restored image fails PRAGMA integrity_check: %s", sqlite3_errmsg(db));
	}
out:
	sqlite3_finalize(stmt);
	sqlite3_close(db);
	free(uri);
	return rc;
}

static int fsync_dir_of(const char *path)
{
	char *copy = strdup(path);
	int fd, rc = 0;
	if (!copy)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) != 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	free(copy);
	return rc;
}

/* Make fd (holding res's state) a standalone database file, durably. */
static int image_finish(int fd, const char *path, const struct ws_replay_result *res)
{
	/* A standalone file: switch the header from WAL to rollback-journal
	 * mode (bytes 18-19), as PRAGMA journal_mode=DELETE would. */
	static const uint8_t legacy[2] = { 1, 1 };
	uint8_t h[100];
	uint32_t pages = res->db_pages;
	int rc;

	if (pages && pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h))
		pages = image_pages(h, pages);
	if (ftruncate(fd, (off_t)pages * res->page_size) != 0)
		return ws_fail(-errno, "truncate %s", path);
	/* An empty file is an empty database (the source's file was empty
	 * when it was shipped): nothing to switch. */
	if (res->db_pages > 0 && (rc = pwrite_all(fd, legacy, 2, 18)) != 0)
		return ws_fail(rc, "write %s", path);
	if (fsync(fd) != 0)
		return ws_fail(-errno, "fsync %s", path);
	return 0;
}

static const char *kind_of(mode_t mode)
{
	if (S_ISLNK(mode))
		return "a symbolic link";
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISCHR(mode) || S_ISBLK(mode))
		return "a device";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISSOCK(mode))
		return "a socket";
	return "not a regular file";
}

/* With force, out_path may be replaced only when it is a regular file. */
static int check_replaceable(const char *out_path, bool force)
{
	struct stat st;

	if (lstat(out_path, &st) != 0) {
		if (errno == ENOENT)
			return 0;
		return ws_fail(-errno, "output %s: %s", out_path, strerror(errno));
	}
	if (!force)
		return ws_fail(-EEXIST, "%s exists; pass --force to overwrite it", out_path);
	if (!S_ISREG(st.st_mode))
		return ws_fail(S_ISDIR(st.st_mode) ? -EISDIR : -EPERM,
			       "output %s is %s; --force replaces only a regular file (a database)", out_path,
			       kind_of(st.st_mode));
	return 0;
}

/*
 * Beside a database being replaced, a -wal or hot -journal of the old one
 * would be applied by SQLite to the restored image on its next open: a
 * state that never existed. Refused rather than deleted: a process may
 * still be using the old database.
 */
static int check_no_sidecar(const char *out_path)
{
	static const char *const suffix[] = { "-wal", "-journal" };
	char side[PATH_MAX];
	struct stat st;

	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		if ((size_t)snprintf(side, sizeof(side), "%s%s", out_path, suffix[i]) >= sizeof(side))
			continue;
		if (lstat(side, &st) == 0 && (!S_ISREG(st.st_mode) || st.st_size > 0))
			return ws_fail(-EEXIST, "output %s has %s (%lld bytes) beside it: SQLite would apply it "
				       "to the restored database; make sure nothing uses %s, remove %s, or "
				       "restore elsewhere", out_path, side, (long long)st.st_size, out_path, side);
	}
	return 0;
}

/*
 * The directory that will hold out_path must not be the sink's or below it:
 * a restore never writes where it reads (-o SINK/TENANT/wm would replace
 * the watermark being restored). Compared by device and inode up to '/', so
 * links and bind mounts do not hide the sink.
 */
static int check_outside_sink(struct ws_store *s, const char *out_path, const char *dir)
{
	const char *root = ws_store_file_root(s);
	struct stat rst, st;
	int fd, rc = 0;

	if (!root)
		return 0;
	if (stat(root, &rst) != 0)
		return 0; /* the store's open checked it; reading it will fail and say why */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return ws_fail(-errno, "output %s: directory %s: %s", out_path, dir, strerror(errno));
	for (int depth = 0; depth < PATH_MAX / 2; depth++) {
		int up;
		if (fstat(fd, &st) != 0) {
			rc = ws_fail(-errno, "output %s: stat of a directory above it: %s", out_path, strerror(errno));
			break;
		}
		if (st.st_dev == rst.st_dev && st.st_ino == rst.st_ino) {
			rc = ws_fail(-EPERM, "output %s is inside the sink %s; a restore never writes into the "
				     "sink it reads", out_path, root);
			break;
		}
		up = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (up < 0) {
			rc = ws_fail(-errno, "output %s: a directory above it: %s", out_path, strerror(errno));
			break;
		}
		close(fd);
		fd = up;
		{
			struct stat ust;
			if (fstat(fd, &ust) == 0 && ust.st_dev == st.st_dev && ust.st_ino == st.st_ino)
				break; /* reached '/' */
		}
	}
	close(fd);
	return rc;
}

int ws_restore_check_output(struct ws_store *s, const char *out_path, bool force)
{
	const char *base;
	char *copy;
	size_t len;
	int rc;

	if (!out_path || !*out_path)
		return ws_fail(WS_ECONFIG, "the output path is empty");
	len = strlen(out_path);
	if (len >= PATH_MAX)
		return ws_fail(WS_ECONFIG, "the output path is %zu bytes; at most %d", len, PATH_MAX - 1);
	if (out_path[len - 1] == '/')
		return ws_fail(WS_ECONFIG, "output %s names a directory; give a file name", out_path);
	base = strrchr(out_path, '/');
	base = base ? base + 1 : out_path;
	if (strlen(base) > NAME_MAX)
		return ws_fail(WS_ECONFIG, "output file name %.32s... is %zu bytes; a file name has at most %d",
			       base, strlen(base), NAME_MAX);
	if (!strcmp(base, ".") || !strcmp(base, ".."))
		return ws_fail(WS_ECONFIG, "output %s names a directory; give a file name", out_path);
	if ((rc = check_replaceable(out_path, force)) != 0)
		return rc;
	/* With or without --force: a -wal or hot -journal left beside a file
	 * that is gone is applied to whatever database next takes its name. */
	if ((rc = check_no_sidecar(out_path)) != 0)
		return rc;
	copy = strdup(out_path);
	if (!copy)
		return -ENOMEM;
	rc = check_outside_sink(s, out_path, dirname(copy));
	free(copy);
	return rc;
}

int ws_restore_publish(const char *tmp, const char *out_path, bool force)
{
	int rc = integrity_check(tmp);
	if (rc)
		return rc;
	/* Again, just before: something else may have appeared there. */
	if ((rc = check_no_sidecar(out_path)) != 0)
		return rc;
	if (force) {
		if ((rc = check_replaceable(out_path, true)) != 0)
			return rc;
		if (rename(tmp, out_path) != 0)
			return ws_fail(-errno, "rename %s to %s", tmp, out_path);
	} else {
		/* link() refuses to replace a file that appeared meanwhile. */
		if (link(tmp, out_path) != 0)
			return ws_fail(-errno, "publish %s", out_path);
		unlink(tmp);
	}
	rc = fsync_dir_of(out_path);
	if (rc)
		ws_fail(rc, "%s is in place, but its directory could not be fsynced: it may not survive a crash "
			"of this machine (restore again with --force)", out_path);
	return rc;
}

/* The artifact's bytes are the state of cut: its size (len) and page 1
 * (head: its first 100 bytes, or all of a shorter one) agree: as long as
 * the image of that state (image_pages: the cut's size, or page 1's valid
 * in-header size when that is smaller), page 1 naming the cut's page size
 * and, when its in-header size is valid, a size no larger than the cut's. */
static int artifact_shape(const char *key, const uint8_t *head, uint64_t len, const struct ws_fmt_manifest *cut)
{
	const uint64_t ps = cut->gen.page_size, full = (uint64_t)cut->db_pages * ps;
	uint32_t hdr_ps, hdr_pages;

	if (len == 0 && full == 0)
		return 0;
	if (len < 100)
		return ws_fail(WS_ECORRUPT, "checkpoint artifact %s is %" PRIu64 " bytes; the state it stands for "
			       "(cut manifest, %u pages of %llu bytes) is %llu bytes: not that state's image", key,
			       len, cut->db_pages, (unsigned long long)ps, (unsigned long long)full);
	hdr_ps = (uint32_t)head[16] << 8 | head[17];
	if (hdr_ps == 1)
		hdr_ps = 65536;
	hdr_pages = header_pages(head);
	if (hdr_ps != ps || hdr_pages > cut->db_pages)
		return ws_fail(WS_ECORRUPT, "checkpoint artifact %s: page 1 says %u pages of %u bytes; the state it "
			       "stands for (cut manifest) has %u pages of %llu bytes", key, hdr_pages, hdr_ps,
			       cut->db_pages, (unsigned long long)ps);
	if (len != (uint64_t)image_pages(head, cut->db_pages) * ps && len != full)
		return ws_fail(WS_ECORRUPT, "checkpoint artifact %s is %" PRIu64 " bytes; the state it stands for "
			       "(cut manifest, %u pages of %llu bytes, page 1 saying %u) is %llu bytes: not that "
			       "state's image", key, len, cut->db_pages, (unsigned long long)ps, hdr_pages,
			       (unsigned long long)image_pages(head, cut->db_pages) * ps);
	return 0;
}

/*
 * An artifact is a whole database image, as large as the database: it is
 * read in ranges of this size, each written to fd and hashed as it comes,
 * so memory stays bounded whatever the database's size.
 */
#define ARTIFACT_RANGE ((uint64_t)8 << 20)

int ws_artifact_fetch(struct ws_store *s, const char *key, uint64_t length, const char *sha256_hex,
		      const struct ws_fmt_manifest *cut, int fd)
{
	struct ws_buf b;
	struct ws_sha256_state h;
	uint8_t sha[WS_SHA256_LEN], head[100];
	char hex[WS_SHA256_HEX_LEN + 1];
	size_t head_len = 0;
	uint64_t off = 0;
	int rc;

	if ((rc = ws_sha256_begin(&h)) != 0)
		return ws_fail(rc, "read checkpoint artifact %s: no memory for its hash", key);
	ws_buf_init(&b, (size_t)ARTIFACT_RANGE);
	bool whole = false;
	do {
		uint64_t want = length - off < ARTIFACT_RANGE ? length - off : ARTIFACT_RANGE;
		if (whole)
			want = length;
		ws_buf_reset(&b);
		/* No object info asked: the file store would hash the whole
		 * object for its etag, reading it twice. The size is checked
		 * by what the ranges return, and by the read past its end. */
		rc = ws_store_get(s, key, off, whole ? UINT64_MAX : want, &b, NULL);
		if (rc == WS_ETOOBIG && off == 0 && !whole && length > ARTIFACT_RANGE) {
			/* A store that answers a range with the whole object (HTTP
			 * allows it; the S3 backend keeps the range asked for): read
			 * it whole, once, as large as it is, rather than whole
			 * again for every range. */
			ws_info("checkpoint artifact %s: the store answers ranges with the whole object; reading it "
				"whole (%" PRIu64 " bytes in memory)", key, length);
			whole = true;
			ws_buf_free(&b);
			ws_buf_init(&b, WS_BUF_DEFAULT_MAX);
			continue;
		}
		if (rc == WS_ENOTFOUND) {
			rc = ws_fail(WS_EINCOMPLETE, "checkpoint artifact %s is missing", key);
			goto out;
		}
		if (rc) {
			ws_fail_wrap(rc, "read checkpoint artifact %s", key);
			goto out;
		}
		if (b.len != want) {
			rc = ws_fail(WS_ECORRUPT, "checkpoint artifact %s is not the %" PRIu64 " bytes its index "
				     "records (SHA-256 %s): %zu bytes at offset %" PRIu64 " where %" PRIu64 " were asked",
				     key, length, sha256_hex, b.len, off, want);
			goto out;
		}
		if (head_len < sizeof(head)) {
			size_t n = b.len < sizeof(head) - head_len ? b.len : sizeof(head) - head_len;
			memcpy(head + head_len, b.data, n);
			head_len += n;
		}
		ws_sha256_update(&h, b.data, b.len);
		if ((rc = pwrite_all(fd, b.data, b.len, off)) != 0) {
			ws_fail(rc, "write checkpoint artifact %s", key);
			goto out;
		}
		off += b.len;
	} while (off < length);
	if (!whole) {
		/* Nothing past the recorded length: a longer object is not the
		 * one the index names (read whole, its length was checked). */
		ws_buf_reset(&b);
		rc = ws_store_get(s, key, length, 1, &b, NULL);
		if (rc) {
			ws_fail_wrap(rc, "read checkpoint artifact %s", key);
			goto out;
		}
		if (b.len) {
			rc = ws_fail(WS_ECORRUPT, "checkpoint artifact %s is longer than the %" PRIu64 " bytes its "
				     "index records (SHA-256 %s)", key, length, sha256_hex);
			goto out;
		}
	}
	ws_sha256_end(&h, sha);
	ws_hex(sha, sizeof(sha), hex);
	if (strcmp(hex, sha256_hex) != 0) {
		rc = ws_fail(WS_ECORRUPT, "checkpoint artifact %s is %" PRIu64 " bytes with SHA-256 %s; its index "
			     "records %" PRIu64 " bytes and %s", key, off, hex, length, sha256_hex);
		goto out_freed;
	}
	if (cut)
		rc = artifact_shape(key, head, off, cut);
	goto out_freed;
out:
	ws_sha256_end(&h, NULL);
out_freed:
	ws_buf_free(&b);
	return rc;
}

int ws_artifact_fetch_base(struct ws_store *s, const struct ws_restore_base *base, int fd)
{
	struct ws_fmt_manifest cut;
	struct ws_buf b;
	uint8_t sha[WS_SHA256_LEN];
	bool have = false;
	int rc;

	/* The cut manifest, when still stored (retention keeps the protected
	 * checkpoint's): checked as the chain checks a link. */
	ws_buf_init(&b, WS_BUF_DEFAULT_MAX);
	rc = ws_store_get(s, base->cut.key, 0, UINT64_MAX, &b, NULL);
	if (rc == 0) {
		ws_sha256(b.data, b.len, sha);
		if (b.len != base->cut.length || memcmp(sha, base->cut.sha, WS_SHA256_LEN) != 0)
			rc = ws_fail(WS_ECORRUPT, "manifest %s (the cut of checkpoint artifact %s) is not the one "
				     "its index names (length or SHA-256)", base->cut.key, base->artifact_key);
		else if ((rc = ws_fmt_manifest_decode(b.data, b.len, &cut)) != 0)
			ws_fail_wrap(rc, "manifest %s (the cut of checkpoint artifact %s)", base->cut.key,
				     base->artifact_key);
		else
			have = true;
	} else if (rc == WS_ENOTFOUND) {
		rc = 0; /* gone with its history: the index's hashes alone vouch */
	} else {
		ws_fail_wrap(rc, "read manifest %s", base->cut.key);
	}
	ws_buf_free(&b);
	if (rc)
		return rc;
	rc = ws_artifact_fetch(s, base->artifact_key, base->artifact_length, base->artifact_sha256,
			       have ? &cut : NULL, fd);
	if (have)
		ws_fmt_manifest_free(&cut);
	return rc;
}

/* A temporary file under TMPDIR for an image verify checks (*tmp malloc'd). */
static int verify_tmp(const char *what, char **tmp, int *fd)
{
	const char *dir = getenv("TMPDIR");
	int rc;

	if (!dir || !*dir)
		dir = "/tmp";
	if (asprintf(tmp, "%s/walship-verify.XXXXXX", dir) < 0) {
		*tmp = NULL;
		return -ENOMEM;
	}
	*fd = mkostemp(*tmp, O_CLOEXEC);
	if (*fd < 0) {
		rc = ws_fail(-errno, "%s: cannot create %s for the image to check: %s", what, *tmp, strerror(errno));
		free(*tmp);
		*tmp = NULL;
		return rc;
	}
	return 0;
}

/* When rc says the image verify builds did not fit where it was put:
 * say where and what to do. */
static void no_room(int rc, const char *tmp)
{
	char detail[1024];
	const char *slash = strrchr(tmp, '/');
	int dir_len = slash ? (int)(slash - tmp) : (int)strlen(tmp);

	if (rc != -ENOSPC && rc != -EDQUOT && rc != -EFBIG)
		return;
	snprintf(detail, sizeof(detail), "%s", ws_errmsg());
	ws_fail(rc, "%s (verify builds each tenant's image in %.*s, under TMPDIR: point TMPDIR at a file "
		"system with room for the database)", detail, dir_len, tmp);
}

int ws_artifact_verify(struct ws_store *s, const struct ws_restore_base *base)
{
	char what[WS_KEY_MAX + 32];
	char *tmp;
	int fd, rc;

	snprintf(what, sizeof(what), "checkpoint artifact %s", base->artifact_key);
	if ((rc = verify_tmp(what, &tmp, &fd)) != 0)
		return rc;
	rc = ws_artifact_fetch_base(s, base, fd);
	if (!rc && (rc = integrity_check(tmp)) != 0)
		ws_fail_wrap(rc, "checkpoint artifact %s", base->artifact_key);
	no_room(rc, tmp);
	close(fd);
	unlink(tmp);
	free(tmp);
	return rc;
}

int ws_replay_verify(struct ws_store *s, const char *tenant, const struct ws_chain *c,
		     const struct ws_restore_base *cut, bool cut_reported, struct ws_replay_report *rep)
{
	const size_t last = c->count - 1;
	const uint64_t target = c->m[last].last_frame;
	struct ws_replay_result res;
	unsigned before = rep->problems;
	char what[WS_TENANT_NAME_MAX + 16];
	char *tmp;
	int fd, rc;

	snprintf(what, sizeof(what), "tenant %s", tenant);
	if ((rc = verify_tmp(what, &tmp, &fd)) != 0)
		return rc;
	if (!cut) {
		rc = ws_replay(s, tenant, c, last, target, fd, &res, rep);
	} else {
		/* The cut's own objects, still stored, are checked too; its
		 * state is the artifact, the rest is applied onto it. */
		rc = ws_replay(s, tenant, c, 0, c->m[0].last_frame, -1, &res, rep);
		if (rc && rep->problems == before)
			goto out; /* no object's problem: stop */
		rc = ws_artifact_fetch(s, cut->artifact_key, cut->artifact_length, cut->artifact_sha256, &c->m[0],
				       fd);
		if (rc) {
			ws_fail_wrap(rc, "tenant %s", tenant);
			if (cut_reported) {
				rep->problems++;
				if (!rep->first_err)
					rep->first_err = rc;
			} else {
				keep_going(rep, tenant, cut->artifact_key, rc);
			}
			goto out;
		}
		rc = ws_replay_from(s, tenant, c, 1, last, target, fd, &res, rep);
	}
	if (rc == 0 && rep->problems == before) {
		/* Every object held: the image restore would publish must pass
		 * what restore checks before publishing. */
		rc = image_finish(fd, tmp, &res);
		if (rc == 0)
			rc = integrity_check(tmp);
		if (rc)
			ws_fail_wrap(rc, "tenant %s", tenant);
	}
out:
	no_room(rc, tmp);
	close(fd);
	unlink(tmp);
	free(tmp);
	if (rep->problems > before && rep->first_err)
		return rep->first_err;
	return rc;
}

/*
 * The chain c is loaded; stopped: c->m[0] is base's cut, whose state is the
 * artifact. Apply everything up to (idx, frame) to fd.
 */
static int image_apply(struct ws_store *s, const char *tenant, const struct ws_chain *c, bool stopped,
		       const struct ws_restore_base *base, size_t idx, uint64_t frame, int fd,
		       struct ws_replay_result *res, bool *artifact_failed)
{
	int rc;
	if (!stopped)
		return ws_replay(s, tenant, c, idx, frame, fd, res, NULL);
	rc = ws_artifact_fetch(s, base->artifact_key, base->artifact_length, base->artifact_sha256, &c->m[0], fd);
	if (rc && artifact_failed)
		*artifact_failed = true;
	if (rc)
		return ws_fail_wrap(rc, "tenant %s", tenant);
	return ws_replay_from(s, tenant, c, 1, idx, frame, fd, res, NULL);
}

int ws_restore_image(struct ws_store *s, const char *tenant, const struct ws_chain_stop *head,
		     const struct ws_restore_base *base, const char *path, bool *used_base)
{
	struct ws_chain c;
	struct ws_replay_result res;
	bool stopped = false;
	int fd = -1, rc;

	*used_base = false;
	rc = ws_chain_load_from(s, tenant, head, base ? &base->cut : NULL, 0, &c, &stopped);
	if (rc)
		return rc;
	/* A fresh file, never through a link or into a file someone put at
	 * the name (the name is predictable, often under /tmp): whatever is
	 * there is removed (a link itself, not its target), then the file is
	 * created exclusively. */
	if (unlink(path) != 0 && errno != ENOENT) {
		rc = ws_fail(-errno, "cannot remove %s: %s", path, strerror(errno));
		goto out;
	}
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = ws_fail(-errno, "cannot create %s: %s", path, strerror(errno));
		goto out;
	}
	rc = image_apply(s, tenant, &c, stopped, base, c.count - 1, c.m[c.count - 1].last_frame, fd, &res, NULL);
	if (!rc)
		rc = image_finish(fd, path, &res);
	*used_base = stopped;
out:
	if (fd >= 0)
		close(fd);
	ws_chain_free(&c);
	return rc;
}

int ws_restore_prepare(struct ws_store *s, const char *tenant, const char *out_path, bool force)
{
	if (!ws_tenant_name_valid(tenant))
		return ws_fail(WS_ECONFIG, "tenant name '%s' is invalid", tenant ? tenant : "");
	return ws_restore_check_output(s, out_path, force);
}

/* Temp names of concurrent restores in one process differ by this. */
static atomic_uint tmp_seq;

int ws_restore_tmp_open(const char *out_path, char **tmp, int *fd)
{
	char *copy = strdup(out_path);
	unsigned seq = atomic_fetch_add_explicit(&tmp_seq, 1, memory_order_relaxed); /* pairs with none: a counter */
	int n;

	*fd = -1;
	*tmp = NULL;
	if (!copy)
		return -ENOMEM;
	/* Named after the directory, not the file: a file name of up to
	 * NAME_MAX bytes still leaves room for the temporary one. */
	n = asprintf(tmp, "%s/.walship-restore.%d.%u", dirname(copy), (int)getpid(), seq);
	free(copy);
	if (n < 0) {
		*tmp = NULL;
		return -ENOMEM;
	}
	/* O_EXCL|O_NOFOLLOW: never through a link or over a file someone put there. */
	*fd = open(*tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (*fd < 0) {
		int rc = ws_fail(-errno, "cannot create %s: %s", *tmp, strerror(errno));
		free(*tmp);
		*tmp = NULL;
		return rc;
	}
	return 0;
}

/*
 * One restore. use_latest: the latest state may start from the latest
 * Commit's artifact. skip: stored cuts not to start from; when the base
 * chosen among them fails to serve, skip->failed names its checkpoint.
 */
static int restore_once(struct ws_sink *sink, const char *tenant, const struct ws_restore_opts *opts,
			const char *out_path, bool use_latest, struct ws_cut_skip *skip)
{
	bool from_cut = false, artifact_failed = false, before = false;
	struct ws_fmt_watermark wm;
	struct ws_buf wmraw; /* the watermark's bytes: a manifest it carries is stored nowhere else */
	struct ws_chain c;
	struct ws_replay_result res;
	struct ws_restore_base base;
	bool have_base = false, stopped = false;
	char *tmp = NULL;
	size_t idx = 0;
	uint64_t frame = 0;
	int fd = -1, rc;

	memset(&c, 0, sizeof(c));
	ws_buf_init(&wmraw, WS_WM_BYTES_MAX);
	rc = ws_wm_load_keep(sink->store, tenant, &wm, NULL, &wmraw);
	if (rc == WS_ENOTFOUND) {
		ws_buf_free(&wmraw);
		return ws_fail(WS_ENOTFOUND, "tenant %s has no watermark at %s: nothing was shipped",
			       tenant, sink->store->url);
	}
	if (rc) {
		ws_buf_free(&wmraw);
		return rc;
	}
	if (!opts->frame && !opts->time_ms && skip->wm_checked != wm.seq + 1) {
		/* The latest state is the watermark's: one that went back would
		 * restore less than was acknowledged. Once per watermark: a
		 * later attempt of this restore (another base) reads the same. */
		char ev[WS_KEY_MAX];
		rc = ws_wm_went_back(sink->store, tenant, &wm, false, ev);
		skip->wm_checked = wm.seq + 1;
		skip->went_back = rc > 0;
		if (rc > 0) {
			rc = ws_fail(WS_EINCOMPLETE, "tenant %s: the watermark (sequence %" PRIu64 ") went back: "
				       "manifest %s was written after watermark %" PRIu64 " on top of it, so the "
				       "store lost acknowledged writes and the latest state it names is older than "
				       "what was acknowledged; refusing it (--time or --frame restores an earlier "
				       "point on purpose)", tenant, wm.seq, ev, wm.seq + 1);
			ws_buf_free(&wmraw);
			return rc;
		}
		if (rc < 0)
			ws_warn("tenant %s: cannot look for manifests after its watermark (%s): the state it names "
				"is restored without that check", tenant, ws_errmsg());
	}
	/* The latest state can start from the latest Commit's artifact when the
	 * live chain passes through its cut: after retention, the manifests
	 * before the cut are gone. Any failure to read the checkpoint metadata
	 * falls back to the full chain. */
	if (use_latest && !opts->frame && !opts->time_ms)
		have_base = ws_checkpoint_base_for(sink, tenant, &base) == 0;
	if (have_base) {
		rc = ws_chain_load_stop(sink->store, tenant, &wm, &base.cut, &c, &stopped);
	} else {
		/* A point in the past: the full chain, unless retention removed
		 * the history before the latest Commit's cut (then it starts
		 * there, from the artifact). */
		rc = ws_chain_load_flags(sink->store, tenant, &wm, WS_CHAIN_UPTO_MISSING, &c);
		if (!rc && ws_chain_truncated(&c)) {
			rc = ws_chain_from_cut(sink, tenant, &wm, &c, &base, skip);
			stopped = from_cut = rc == 0;
		}
	}
	if (rc)
		goto out;
	rc = choose_target(tenant, &c, opts, stopped ? &base : NULL, &idx, &frame, &before);
	/* Before the cut used: an older cut could have served it (said below
	 * when one in the chain was passed over). */
	skip->before_used_cut = rc == WS_ERANGE_ && before && from_cut;
	if (rc)
		goto out;
	if (opts->frame && frame < c.m[idx].last_frame) {
		/* A frame inside a manifest: find the last commit at or before it
		 * first (a dry replay), so no uncommitted frame is applied. */
		rc = ws_replay_from(sink->store, tenant, &c, stopped ? 1 : 0, idx, frame, -1, &res, NULL);
		if (rc)
			goto out;
		if (res.commit_manifest == idx && res.commit_frame >= c.m[idx].valid_from_frame) {
			frame = res.commit_frame;
		} else if (idx > 0 && c.m[idx].kind != WS_MANIFEST_REBASE) {
			/* No commit of this manifest at or before the frame: the
			 * state is where its predecessor ended. Compare manifests,
			 * not frame numbers: they restart in a new generation. */
			idx--;
			frame = c.m[idx].last_frame;
		} else {
			rc = ws_fail(WS_ERANGE_, "tenant %s: no restorable commit at or before frame %" PRIu64,
				     tenant, opts->frame);
			goto out;
		}
	}
	if ((rc = ws_restore_tmp_open(out_path, &tmp, &fd)) != 0)
		goto out;
	rc = image_apply(sink->store, tenant, &c, stopped, &base, idx, frame, fd, &res, &artifact_failed);
	if (rc && from_cut && artifact_failed)
		skip->failed = base.checkpoint_id;
	if (!rc)
		rc = image_finish(fd, tmp, &res);
out:
	rc = ws_restore_end(fd, tmp, out_path, opts->force, tenant, rc);
	ws_chain_free(&c);
	ws_buf_free(&wmraw);
	/* The arguments were checked above: from here on a WS_ECONFIG came
	 * from what the sink holds, a damaged object, never the user's input. */
	return rc == WS_ECONFIG ? WS_EFORMAT : rc;
}

int ws_restore(struct ws_sink *sink, const char *tenant, const struct ws_restore_opts *opts,
	       const char *out_path)
{
	struct ws_restore_opts none = { 0 };
	struct ws_cut_skip skip = { 0 };
	int rc;

	if (!opts)
		opts = &none;
	if ((rc = ws_restore_prepare(sink->store, tenant, out_path, opts->force)) != 0)
		return rc;
	rc = restore_once(sink, tenant, opts, out_path, true, &skip);
	if (rc && rc != WS_ECONFIG && rc != WS_ENOTFOUND && !skip.went_back && !opts->frame && !opts->time_ms) {
		/* The latest Commit's artifact (or its cut) could not be used:
		 * damaged, or gone. The full chain, or an older checkpoint, may
		 * still hold the state: one bad artifact is never total loss. */
		ws_info("restore: tenant %s: from the latest checkpoint: %s; trying the full chain and older "
			"checkpoints", tenant, ws_errmsg());
		rc = restore_once(sink, tenant, opts, out_path, false, &skip);
	}
	/* The stored cut chosen (the oldest in the chain) could not serve: its
	 * artifact damaged or gone since it was looked at. A newer cut may
	 * still hold the point: try the next one. */
	if (rc && skip.failed) {
		int first_rc = rc;
		char first[512];
		snprintf(first, sizeof(first), "%s", ws_errmsg());
		while (rc && skip.failed && skip.n < WS_CUT_SKIP_MAX) {
			ws_info("restore: tenant %s: from checkpoint %" PRIu64 ": %s; trying the next stored "
				"checkpoint", tenant, skip.failed, ws_errmsg());
			skip.ids[skip.n++] = skip.failed;
			skip.failed = 0;
			rc = restore_once(sink, tenant, opts, out_path, false, &skip);
		}
		/* No newer cut reaches back to the point (or none is left): the
		 * damaged artifact is the reason, not the retention window. */
		if (rc == WS_ERANGE_ || rc == WS_EINCOMPLETE)
			rc = ws_fail(first_rc, "%s", first);
	} else if (rc == WS_ERANGE_ && skip.before_used_cut && skip.passed_over[0]) {
		/* A point before the cut used, which an older cut whose artifact
		 * is not there whole would have served. */
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", ws_errmsg());
		rc = ws_fail(WS_EINCOMPLETE, "%s; an older cut could have served it, but its %s", msg,
			     skip.passed_over);
	}
	return rc;
}

int ws_restore_end(int fd, char *tmp, const char *out_path, bool force, const char *tenant, int rc)
{
	if (fd >= 0)
		close(fd);
	if (!rc && tmp && (rc = ws_restore_publish(tmp, out_path, force)) != 0)
		ws_fail_wrap(rc, "tenant %s", tenant);
	if (tmp) {
		if (rc)
			unlink(tmp);
		free(tmp);
	}
	return rc;
}
