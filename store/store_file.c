/*
 * file:// backend: one regular file per key under a root directory, keys'
 * '/' separators becoming subdirectories.
 *
 * On-disk layout and durability rules:
 *   <root>/<key>              a published object, never modified in place
 *   <dir>/.tmp.<pid>.<seq>    an object being written by process <pid>; a
 *                             crash between write and publish leaves one,
 *                             removed by the next open once <pid> is dead
 *   <dir>/.lock.<xx>          flock() stripe (xx = hash(name) mod 64) that
 *                             every overwrite, CAS or delete of a key in
 *                             <dir> holds, so they are atomic with respect
 *                             to each other, between threads and processes.
 *                             A create-once publishes with link(), which
 *                             fails with EEXIST atomically: it needs no lock
 *                             (against an overwrite, CAS or delete of the
 *                             same key it is ordered by the link itself;
 *                             against a directory prune, by its temp file
 *                             and then the object, which keep rmdir from
 *                             succeeding). So a directory of create-once
 *                             objects (batches, manifests, snapshot parts)
 *                             holds no lock files.
 * A put writes the temp file, fdatasync()s it, then publishes it with
 * rename() (OVERWRITE, CAS) or link() (CREATE, atomic EEXIST), then fsync()s
 * the directory, all before returning: a reader sees the old object or the
 * whole new one, and a returned put survives a crash. Directories for nested
 * keys are created with their parent fsync()ed before any object goes in.
 * Deleting a directory's last object removes the directory and each parent
 * it empties (prune_dir: under every one of its locks, never while a writer
 * is in it; a put that finds its directory removed makes it again).
 * Key segments starting with ".tmp." or ".lock." are reserved here and are
 * rejected with -EINVAL; list never shows those entries. So are segments
 * longer than NAME_MAX (255 bytes), which no file name can hold.
 *
 * The tree holds only directories and regular files. Every path below the
 * root is opened one segment at a time with O_NOFOLLOW: a symbolic link, a
 * FIFO, a device or a socket in the sink is never followed, opened, written
 * through or deleted through (it could lead out of the sink, block, or act
 * on a device). get, head, put and delete name it with WS_EFORMAT; list
 * skips it with a warning.
 *
 * Etag: "<xxh3-64 of content, 16 lowercase hex>-<size in bytes>".
 *
 * This file is the durable write path (the directory cache, locks, temp
 * files, put and put_many); file_read.c reads and lists, file_delete.c
 * deletes and prunes, file_open.c holds the key and path helpers and
 * open/close; file_internal.h is what they share.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* renameat2, O_DIRECTORY, struct dirent d_type */
#endif
#include "file_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ws_fault.h"
#include "ws_hash.h"
#include "ws_assert.h"
#include "ws_logging.h"

/* Temp names must differ between threads of one process; the pid separates processes. */
static atomic_ulong tmp_seq;

/*
 * Where one put stands in the durability order: its temp file written,
 * then synced (fdatasync) and closed, then published (link or rename),
 * and only then its directory synced. A publish of bytes not yet synced
 * could survive a crash as a torn object under its real name; a directory
 * synced before the publish would not hold the name. Each step asserts
 * the one before it.
 */
enum put_step { PUT_NONE, PUT_WRITTEN, PUT_SYNCED, PUT_PUBLISHED };

/* ---- which directories are already durable ------------------------------- */

/* A directory as made durable: its path, device, inode and birth time, so
 * one removed (a prune) and made again, maybe by another process that has
 * not synced its parent yet, is not taken for the one this process synced
 * (a new directory can get the inode number a removed one had; its birth
 * time differs, where the file system keeps one). */
static uint64_t dir_hash(const char *rel, size_t len, const struct statx *st)
{
	uint64_t id[4] = { (uint64_t)st->stx_dev_major << 32 | st->stx_dev_minor, st->stx_ino, 0, 0 };
	uint64_t h;

	if (st->stx_mask & STATX_BTIME) {
		id[2] = (uint64_t)st->stx_btime.tv_sec;
		id[3] = st->stx_btime.tv_nsec;
	}
	h = ws_xxh64(rel, len) ^ ws_xxh64(id, sizeof(id));
	return h ? h : 1;
}

static bool dir_known(struct file_store *fs, uint64_t h)
{
	bool found = false;

	pthread_mutex_lock(&fs->dir_mu);
	for (unsigned i = 0; i < DIR_CACHE_SLOTS; i++) {
		unsigned slot = (unsigned)((h + i) % DIR_CACHE_SLOTS);
		if (fs->dir_known[slot] == 0)
			break;
		if (fs->dir_known[slot] == h) {
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&fs->dir_mu);
	return found;
}

static void dir_remember(struct file_store *fs, uint64_t h)
{
	pthread_mutex_lock(&fs->dir_mu);
	if (fs->dir_known_count >= DIR_CACHE_SLOTS / 4 * 3) {
		/* Forgetting only costs an extra fsync of a parent later. */
		memset(fs->dir_known, 0, sizeof(fs->dir_known));
		fs->dir_known_count = 0;
	}
	for (unsigned i = 0; i < DIR_CACHE_SLOTS; i++) {
		unsigned slot = (unsigned)((h + i) % DIR_CACHE_SLOTS);
		if (fs->dir_known[slot] == h)
			break;
		if (fs->dir_known[slot] == 0) {
			fs->dir_known[slot] = h;
			fs->dir_known_count++;
			break;
		}
	}
	/* Cleared at 3/4 full: the probe above always finds a free slot. */
	WS_ASSERT(fs->dir_known_count <= DIR_CACHE_SLOTS / 4 * 3);
	pthread_mutex_unlock(&fs->dir_mu);
}

static void dir_forget_all(struct file_store *fs)
{
	pthread_mutex_lock(&fs->dir_mu);
	memset(fs->dir_known, 0, sizeof(fs->dir_known));
	fs->dir_known_count = 0;
	pthread_mutex_unlock(&fs->dir_mu);
}

/*
 * Make every directory of key's path exist durably and open the last one
 * (*out_fd), one segment at a time without following links. Each one's
 * entry in its parent is fsync()ed even when another process created it:
 * that process may not have synced it yet, and our object would vanish with
 * it in a crash. A directory this process synced before is not synced
 * again, unless it is another one now (removed and made again: dir_hash),
 * and one this call made always is.
 */
static int ensure_dirs(struct file_store *fs, const char *key, const char *dir, int *out_fd)
{
	size_t dir_len = strlen(dir);
	unsigned retries = 0;
	int cur, rc;

again:
	cur = openat(fs->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return file_fail_key(-errno, fs, "put", key, "cannot open the root: %s", strerror(errno));
	for (size_t start = 0; start < dir_len;) {
		size_t n = strcspn(dir + start, "/"), end = start + n;
		char seg[NAME_MAX + 1];
		struct statx st;
		uint64_t h;
		int next, e;
		bool made = false;

		memcpy(seg, dir + start, n); /* n <= NAME_MAX: check_key */
		seg[n] = '\0';
		next = openat(cur, seg, DIR_OPEN_FLAGS);
		if (next < 0 && errno == ENOENT) {
			made = mkdirat(cur, seg, 0755) == 0;
			if (!made && errno != EEXIST) {
				if (errno == ENOENT && retries < PRUNE_RACE_TRIES) {
					/* cur was pruned (prune_dir) since we opened it. */
					close(cur);
					dir_forget_all(fs);
					retries++;
					goto again;
				}
				rc = file_fail_key(-errno, fs, "put", key, "cannot create directory %.*s: %s", (int)end,
					      dir, strerror(errno));
				goto fail;
			}
			next = openat(cur, seg, DIR_OPEN_FLAGS);
		}
		if (next < 0) {
			e = errno;
			if (e == ENOENT && retries < PRUNE_RACE_TRIES) {
				/* Removed since we made it or saw it exist: by a prune
				 * (prune_dir) once it was empty, or by hand. */
				close(cur);
				dir_forget_all(fs);
				retries++;
				goto again;
			}
			rc = file_why_not_opened(fs, "put", key, cur, seg, dir, (int)end, e);
			if (rc != WS_EFORMAT)
				rc = file_fail_key(rc, fs, "put", key, "cannot open directory %.*s: %s", (int)end, dir,
					      strerror(e));
			goto fail;
		}
		if (statx(next, "", AT_EMPTY_PATH, STATX_INO | STATX_BTIME, &st) < 0) {
			rc = file_fail_key(-errno, fs, "put", key, "cannot stat directory %.*s: %s", (int)end, dir,
				      strerror(errno));
			close(next);
			goto fail;
		}
		h = dir_hash(dir, end, &st);
		/* One this call made is new whatever the cache says: a directory
		 * pruned and made again can get the inode number it had. */
		if (made || !dir_known(fs, h)) {
			/* Its entry in cur, whoever made it. */
			if ((rc = WS_FAULT("file.put.dir_entry_fsync")) != 0) {
				rc = file_fail_key(rc, fs, "put", key, "injected fault before syncing directory \"%.*s\"",
					      (int)(start ? start - 1 : 0), dir);
				close(next);
				goto fail;
			}
			if (fsync(cur) < 0) {
				rc = file_fail_key(-errno, fs, "put", key, "cannot fsync directory \"%.*s\"",
					      (int)(start ? start - 1 : 0), dir);
				close(next);
				goto fail;
			}
			dir_remember(fs, h);
		}
		close(cur);
		cur = next;
		start = end + (dir[end] == '/');
	}
	*out_fd = cur;
	return 0;
fail:
	close(cur);
	return rc;
}

/* ---- locking, temp files -------------------------------------------------- */

/* Which of its directory's lock files guards name. */
static unsigned lock_stripe(const char *name)
{
	return (unsigned)(ws_xxh64(name, strlen(name)) % LOCK_STRIPES);
}

int file_lock_key(const struct file_store *fs, const char *op, const char *key, int dir_fd, const char *name,
		  int *out_fd)
{
	char lname[32];
	struct stat st;
	int fd, rc;

	snprintf(lname, sizeof(lname), LOCK_PREFIX "%02x", lock_stripe(name));
again:
	/* Never through a link, and never opening a FIFO or a device planted
	 * under the name (an open alone can block or act on hardware). */
	if (fstatat(dir_fd, lname, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
		return file_fail_key(WS_EFORMAT, fs, op, key, "its lock file %s is %s; the file store opens only "
				"regular files", lname, file_type_name(st.st_mode));
	fd = openat(dir_fd, lname, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = file_why_not_opened(fs, op, key, dir_fd, lname, lname, (int)strlen(lname), errno);
		return rc == WS_EFORMAT ? rc : file_fail_key(rc, fs, op, key, "cannot open lock file %s: %s", lname,
							 strerror(-rc));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return file_fail_key(WS_EFORMAT, fs, op, key, "its lock file %s is not a regular file", lname);
	}
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			rc = file_fail_key(-errno, fs, op, key, "cannot lock %s: %s", lname, strerror(errno));
			close(fd);
			return rc;
		}
	}
	/* A directory prune (prune_dir) unlinks a lock file while holding its
	 * lock: a lock won on an unlinked file excludes nobody (the next
	 * opener creates a new one), so take the one at the name again. */
	if (fstat(fd, &st) == 0 && st.st_nlink == 0) {
		close(fd);
		goto again;
	}
	*out_fd = fd;
	return 0;
}

void file_unlock_key(int fd)
{
	/* Closing the only descriptor of this open file description drops the flock. */
	if (fd >= 0)
		close(fd);
}

static int create_tmp(int dir_fd, char name[TMP_NAME_MAX], int *out_fd)
{
	for (int i = 0; i < TMP_TRIES_MAX; i++) {
		unsigned long seq = atomic_fetch_add_explicit(&tmp_seq, 1, memory_order_relaxed);
		int fd;

		int len = snprintf(name, TMP_NAME_MAX, TMP_PREFIX "%ld.%lu", (long)getpid(), seq);
		WS_ASSERT(len > 0 && len < TMP_NAME_MAX); /* a pid and a counter: never cut */
		fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0) {
			*out_fd = fd;
			return 0;
		}
		/* EEXIST: a crashed process with our recycled pid left this name behind. */
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* Writes all of iov at offset 0, surviving short writes and IOV_MAX. */
static int write_all(int fd, const struct iovec *iov, int iovcnt)
{
	struct iovec win[IOV_WINDOW];
	int idx = 0;
	size_t skip = 0;
	off_t off = 0;

	for (;;) {
		ssize_t w;
		size_t left;
		int n = 0;

		for (int i = idx; i < iovcnt && n < IOV_WINDOW; i++) {
			size_t from = i == idx ? skip : 0;
			if (iov[i].iov_len == from)
				continue;
			win[n].iov_base = (char *)iov[i].iov_base + from;
			win[n].iov_len = iov[i].iov_len - from;
			n++;
		}
		if (n == 0)
			return 0;
		WS_ASSERT(idx < iovcnt && skip <= iov[idx].iov_len); /* (an empty iovec at idx: skip 0) */
		w = pwritev(fd, win, n, off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		off += w;
		left = (size_t)w;
		while (left && idx < iovcnt) {
			size_t avail = iov[idx].iov_len - skip;
			if (left < avail) {
				skip += left;
				left = 0;
			} else {
				left -= avail;
				idx++;
				skip = 0;
			}
		}
		WS_ASSERT(left == 0); /* the kernel wrote no more than the window offered */
	}
}

/*
 * A lost CREATE or CAS reports what another writer published. That writer
 * may have died between its link()/rename() and its directory fsync(): make
 * the entry durable before anyone acts on "it exists" (the key's parent
 * directories are durable already: ensure_dirs).
 */
static int precond_failed(const struct file_store *fs, int dir_fd, const char *key, const char *fmt, ...)
	WS_PRINTF(4, 5);
static int precond_failed(const struct file_store *fs, int dir_fd, const char *key, const char *fmt, ...)
{
	char what[160];
	va_list ap;
	int rc = WS_FAULT("file.put.exists_fsync");

	if (rc)
		return file_fail_key(rc, fs, "put", key, "fault injected before the fsync of an existing entry");
	if (fsync(dir_fd) < 0)
		return file_fail_key(-errno, fs, "put", key, "fsync of directory failed: %s", strerror(errno));
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return file_fail_key(WS_EPRECOND, fs, "put", key, "%s", what);
}

/*
 * The CREATE / CAS condition against what is in dir_fd/name now. Without the
 * key's lock this is only a fast path (for CREATE always: link() decides);
 * with it, it is the decision.
 */
static int check_precond(const struct file_store *fs, int dir_fd, const char *name, const char *key,
			 enum ws_put_mode mode, const struct ws_etag *expect)
{
	struct ws_etag cur;
	struct stat st;
	int fd = -1, rc;

	rc = file_open_reg_at(fs, "put", key, dir_fd, name, &fd, &st);
	if (rc == -ENOENT) {
		if (mode == WS_PUT_CAS)
			return file_fail_key(WS_EPRECOND, fs, "put", key, "CAS expected etag %s but the "
					"object does not exist", expect->s);
		return 0;
	}
	if (rc == -EISDIR)
		return file_fail_key(-EISDIR, fs, "put", key, "a directory holds the key's name");
	if (rc == WS_EFORMAT)
		return rc;
	if (rc)
		return file_fail_key(rc, fs, "put", key, "cannot open current object: %s", strerror(-rc));
	if (mode == WS_PUT_CREATE) {
		close(fd);
		return precond_failed(fs, dir_fd, key, "create-once but the object exists");
	}
	rc = file_etag_of_fd(fd, (uint64_t)st.st_size, &cur);
	if (rc) {
		rc = file_fail_key(rc, fs, "put", key, "cannot hash current object");
		goto fail;
	}
	if (strcmp(cur.s, expect->s) != 0)
		rc = precond_failed(fs, dir_fd, key, "CAS expected etag %s, object has %s", expect->s, cur.s);
fail:
	close(fd);
	return rc;
}

/* ---- ops ------------------------------------------------------------------ */

/* What put and put_many check before touching the tree; *size gets the object's size. */
static int check_put_args(const struct file_store *fs, const char *key, const struct iovec *iov, int iovcnt,
			  enum ws_put_mode mode, const struct ws_etag *expect, uint64_t *size)
{
	int rc = file_check_key(fs, "put", key);

	if (rc)
		return rc;
	if (iovcnt < 0 || (iovcnt > 0 && !iov))
		return file_fail_key(-EINVAL, fs, "put", key, "bad iovec array (%d entries)", iovcnt);
	if (mode != WS_PUT_OVERWRITE && mode != WS_PUT_CREATE && mode != WS_PUT_CAS)
		return file_fail_key(-EINVAL, fs, "put", key, "unknown put mode %d", (int)mode);
	if (mode == WS_PUT_CAS && !expect)
		return file_fail_key(-EINVAL, fs, "put", key, "CAS without an expected etag");
	*size = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > UINT64_MAX - *size)
			return file_fail_key(-EINVAL, fs, "put", key, "iovec sizes overflow");
		*size += iov[i].iov_len;
	}
	return 0;
}

int file_put(struct ws_store *s, const char *key, const struct iovec *iov, int iovcnt,
	     enum ws_put_mode mode, const struct ws_etag *expect, struct ws_etag *out_etag)
{
	struct file_store *fs = file_store_of(s);
	char dir[WS_KEY_MAX], tmp[TMP_NAME_MAX];
	const char *name;
	struct ws_etag etag;
	uint64_t size = 0;
	int dir_fd = -1, fd = -1, lock_fd = -1, rc;
	bool tmp_exists = false;
	enum put_step step = PUT_NONE;

	rc = check_put_args(fs, key, iov, iovcnt, mode, expect, &size);
	if (rc)
		return rc;
	file_etag_make(ws_xxh64v(iov, iovcnt), size, &etag);
	name = file_split_key(key, dir);

	for (unsigned tries = 0;; tries++) {
		rc = ensure_dirs(fs, key, dir, &dir_fd);
		if (rc)
			goto fail;
		/* A lost CREATE/CAS is common (retries, contention): skip the write+fsync then. */
		if (mode != WS_PUT_OVERWRITE) {
			rc = check_precond(fs, dir_fd, name, key, mode, expect);
			if (rc)
				goto fail;
		}
		rc = create_tmp(dir_fd, tmp, &fd);
		/* ENOENT: a prune removed the (then empty) directory after we
		 * opened it; once our temp file is in, none can. */
		if (rc != -ENOENT || tries == PRUNE_RACE_TRIES)
			break;
		close(dir_fd);
		dir_fd = -1;
		dir_forget_all(fs);
	}
	if (rc) {
		rc = file_fail_key(rc, fs, "put", key, "cannot create temp file: %s", strerror(-rc));
		goto fail;
	}
	tmp_exists = true;
	rc = write_all(fd, iov, iovcnt);
	if (rc) {
		rc = file_fail_key(rc, fs, "put", key, "write of %" PRIu64 " bytes to %s failed: %s", size,
			      tmp, strerror(-rc));
		goto fail;
	}
	rc = WS_FAULT("file.put.after_write");
	if (rc) {
		rc = file_fail_key(rc, fs, "put", key, "fault injected after write");
		goto fail;
	}
	WS_ASSERT(step == PUT_NONE && fd >= 0 && tmp_exists);
	step = PUT_WRITTEN;
	if (fdatasync(fd) < 0) {
		rc = file_fail_key(-errno, fs, "put", key, "fdatasync of %s failed: %s", tmp, strerror(errno));
		goto fail;
	}
	rc = close(fd) < 0 ? -errno : 0;
	fd = -1;
	if (rc) {
		rc = file_fail_key(rc, fs, "put", key, "close of %s failed: %s", tmp, strerror(-rc));
		goto fail;
	}
	step = PUT_SYNCED;
	rc = WS_FAULT("file.put.before_publish");
	if (rc) {
		rc = file_fail_key(rc, fs, "put", key, "fault injected before publish");
		goto fail;
	}

	if (mode != WS_PUT_CREATE) {
		rc = file_lock_key(fs, "put", key, dir_fd, name, &lock_fd);
		if (rc)
			goto fail;
	}
	if (mode == WS_PUT_CAS) {
		rc = check_precond(fs, dir_fd, name, key, mode, expect);
		if (rc)
			goto fail;
	}
	/* Only synced bytes are published; an overwrite or swap under its lock. */
	WS_ASSERT(step == PUT_SYNCED && fd < 0 && tmp_exists);
	WS_ASSERT(mode == WS_PUT_CREATE || lock_fd >= 0);
	if (mode == WS_PUT_CREATE) {
		/* link() fails with EEXIST atomically: the decision, with no lock taken. */
		if (linkat(dir_fd, tmp, dir_fd, name, 0) == 0) {
			if (unlinkat(dir_fd, tmp, 0) < 0)
				ws_warn("file store %s: cannot remove %s after publishing %s: %s",
					fs->root, tmp, key, strerror(errno));
			tmp_exists = false;
		} else if (errno == EPERM || errno == EOPNOTSUPP || errno == EMLINK) {
			/* No hard links here (some FUSE, vfat): same atomicity via rename. */
			if (renameat2(dir_fd, tmp, dir_fd, name, RENAME_NOREPLACE) == 0)
				tmp_exists = false;
		}
		if (tmp_exists) {
			if (errno == EEXIST)
				rc = precond_failed(fs, dir_fd, key, "create-once but the object exists");
			else
				rc = file_fail_key(-errno, fs, "put", key, "cannot publish %s: %s", tmp,
					      strerror(errno));
			goto fail;
		}
	} else {
		if (renameat(dir_fd, tmp, dir_fd, name) < 0) {
			rc = file_fail_key(-errno, fs, "put", key, "cannot rename %s into place: %s", tmp,
				      strerror(errno));
			goto fail;
		}
		tmp_exists = false;
	}
	rc = WS_FAULT("file.put.after_publish");
	if (rc) {
		rc = file_fail_key(rc, fs, "put", key, "fault injected after publish");
		goto fail;
	}
	step = PUT_PUBLISHED;
	/* Still under the lock (but for a create-once): nobody may act on this
	 * version before it is durable. An overwrite, CAS or delete of a
	 * created object syncs the directory itself before it returns. */
	WS_ASSERT(step == PUT_PUBLISHED && !tmp_exists);
	if (fsync(dir_fd) < 0) {
		rc = file_fail_key(-errno, fs, "put", key, "fsync of directory failed: %s", strerror(errno));
		goto fail;
	}
	file_unlock_key(lock_fd);
	close(dir_fd);
	if (out_etag)
		*out_etag = etag;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	if (tmp_exists)
		unlinkat(dir_fd, tmp, 0);
	file_unlock_key(lock_fd);
	if (dir_fd >= 0)
		close(dir_fd);
	return rc;
}

/*
 * put_many: n independent OVERWRITE / CREATE puts (a tail's batches), each
 * as durable on return as a put, with the waits shared. A put alone waits
 * for two journal commits (its data, then its directory entry); n of them
 * one after another wait for 2n. Here every temp file is written and its
 * writeback started first, then each is fdatasync()ed (the first wait
 * commits the blocks of all of them), then each is published (an
 * overwrite under its lock; a create-once by link(), no lock), and each
 * directory is fsync()ed once, still under the overwrites' locks: the
 * same states a crash can leave as n puts (a temp file, or a published,
 * whole object), the same rules as a put, and about 2 commits per call
 * instead of 2n.
 *
 * Locks (overwrites): the distinct (directory, stripe) pairs are taken in
 * sorted order (two keys may share a stripe; flock on a second descriptor
 * of one file would wait for ourselves), so two put_many callers cannot
 * deadlock, and everyone else holds one lock at a time.
 *
 * Writing the temp files is the copy of every byte into the page cache,
 * most of a file:// tail's CPU (55 % of replicate --once's samples): a
 * second thread takes every other file while the caller writes the rest.
 * The waits, publishing and locking stay on the caller's thread.
 */
struct many_op {
	struct ws_put_req *req;
	const char *name;           /* last segment of req->key */
	char dir[WS_KEY_MAX];       /* directory part of req->key */
	char tmp[TMP_NAME_MAX];
	int dir_fd, fd, lock_fd;    /* -1: a create-once, or an earlier op holds the same lock */
	unsigned stripe;
	bool tmp_exists;
	enum put_step step;         /* the durability order (enum put_step) */
	char why[256];              /* the error detail of a write on the helper thread */
};

static int many_write(struct file_store *fs, struct many_op *op);

struct many_writers {
	struct file_store *fs;
	struct many_op *ops;
	size_t n;
	size_t next;                /* next op to write; see many_write_some */
};

/*
 * Writes ops until none is left, taking them one at a time from w->next
 * (relaxed: the counter only hands out indices, each to one thread; what a
 * thread wrote to its ops is published to the caller by pthread_join).
 */
static void many_write_some(struct many_writers *w, bool helper)
{
	for (;;) {
		size_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
		struct many_op *op;

		if (i >= w->n)
			return;
		op = &w->ops[i];
		op->req->rc = many_write(w->fs, op);
		/* ws_errmsg is per thread: keep the helper's for the caller. */
		if (op->req->rc && helper)
			snprintf(op->why, sizeof(op->why), "%s", ws_errmsg());
	}
}

static void *many_writer_main(void *arg)
{
	many_write_some(arg, true);
	return NULL;
}

/* Writes op's temp file and starts its writeback; sets nothing durable. */
static int many_write(struct file_store *fs, struct many_op *op)
{
	struct ws_put_req *r = op->req;
	uint64_t size;
	int rc;

	rc = check_put_args(fs, r->key, r->iov, r->iovcnt, r->mode, NULL, &size);
	if (rc)
		return rc;
	if (r->mode == WS_PUT_CAS)
		return file_fail_key(-EINVAL, fs, "put", r->key, "put_many takes overwrite or create-once only");
	op->name = file_split_key(r->key, op->dir);
	op->stripe = lock_stripe(op->name);
	for (unsigned tries = 0;; tries++) {
		rc = ensure_dirs(fs, r->key, op->dir, &op->dir_fd);
		if (rc)
			return rc;
		if (r->mode == WS_PUT_CREATE) {
			rc = check_precond(fs, op->dir_fd, op->name, r->key, r->mode, NULL);
			if (rc)
				return rc;
		}
		rc = create_tmp(op->dir_fd, op->tmp, &op->fd);
		/* ENOENT: a prune (prune_dir) removed the then empty directory
		 * after we opened it, as in file_put; once our temp file is in,
		 * none can. */
		if (rc != -ENOENT || tries == PRUNE_RACE_TRIES)
			break;
		close(op->dir_fd);
		op->dir_fd = -1;
		dir_forget_all(fs);
	}
	if (rc)
		return file_fail_key(rc, fs, "put", r->key, "cannot create temp file: %s", strerror(-rc));
	op->tmp_exists = true;
	rc = write_all(op->fd, r->iov, r->iovcnt);
	if (rc)
		return file_fail_key(rc, fs, "put", r->key, "write of %" PRIu64 " bytes to %s failed: %s", size, op->tmp,
				strerror(-rc));
	rc = WS_FAULT("file.put.after_write");
	if (rc)
		return file_fail_key(rc, fs, "put", r->key, "fault injected after write");
	/* Only a hint (the fdatasync below is the guarantee, and reports any
	 * error): the device gets every object's data at once. */
	(void)sync_file_range(op->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	op->step = PUT_WRITTEN;
	return 0;
}

static int many_sync(const struct file_store *fs, struct many_op *op)
{
	const char *key = op->req->key;
	int rc;

	WS_ASSERT(op->step == PUT_WRITTEN && op->fd >= 0 && op->tmp_exists);
	if (fdatasync(op->fd) < 0)
		return file_fail_key(-errno, fs, "put", key, "fdatasync of %s failed: %s", op->tmp, strerror(errno));
	rc = close(op->fd) < 0 ? -errno : 0;
	op->fd = -1;
	if (rc)
		return file_fail_key(rc, fs, "put", key, "close of %s failed: %s", op->tmp, strerror(-rc));
	op->step = PUT_SYNCED;
	rc = WS_FAULT("file.put.before_publish");
	if (rc)
		return file_fail_key(rc, fs, "put", key, "fault injected before publish");
	return 0;
}

/* link() (CREATE: EEXIST atomically, no lock) or rename() (OVERWRITE, under its lock) into place. */
static int many_publish(const struct file_store *fs, struct many_op *op)
{
	const char *key = op->req->key;
	int rc;

	WS_ASSERT(op->step == PUT_SYNCED && op->fd < 0 && op->tmp_exists);
	if (op->req->mode == WS_PUT_CREATE) {
		if (linkat(op->dir_fd, op->tmp, op->dir_fd, op->name, 0) == 0) {
			if (unlinkat(op->dir_fd, op->tmp, 0) < 0)
				ws_warn("file store %s: cannot remove %s after publishing %s: %s", fs->root, op->tmp,
					key, strerror(errno));
			op->tmp_exists = false;
		} else if (errno == EPERM || errno == EOPNOTSUPP || errno == EMLINK) {
			/* No hard links here (some FUSE, vfat): same atomicity via rename. */
			if (renameat2(op->dir_fd, op->tmp, op->dir_fd, op->name, RENAME_NOREPLACE) == 0)
				op->tmp_exists = false;
		}
		if (op->tmp_exists) {
			if (errno == EEXIST)
				return precond_failed(fs, op->dir_fd, key, "create-once but the object exists");
			return file_fail_key(-errno, fs, "put", key, "cannot publish %s: %s", op->tmp, strerror(errno));
		}
	} else {
		if (renameat(op->dir_fd, op->tmp, op->dir_fd, op->name) < 0)
			return file_fail_key(-errno, fs, "put", key, "cannot rename %s into place: %s", op->tmp,
					strerror(errno));
		op->tmp_exists = false;
	}
	rc = WS_FAULT("file.put.after_publish");
	if (rc)
		return file_fail_key(rc, fs, "put", key, "fault injected after publish");
	op->step = PUT_PUBLISHED;
	return 0;
}

static int cmp_lock_order(const void *a, const void *b)
{
	const struct many_op *x = *(const struct many_op *const *)a, *y = *(const struct many_op *const *)b;
	int c = strcmp(x->dir, y->dir);

	if (c)
		return c;
	return (x->stripe > y->stripe) - (x->stripe < y->stripe);
}

int file_put_many(struct ws_store *s, struct ws_put_req *reqs, size_t n)
{
	struct file_store *fs = file_store_of(s);
	struct many_op *ops, **order;
	size_t locked = 0;

	ops = n > 1 ? calloc(n, sizeof(*ops)) : NULL;
	order = ops ? calloc(n, sizeof(*order)) : NULL;
	if (!order) {
		/* One put needs no sharing; without memory, share nothing. */
		free(ops);
		for (size_t i = 0; i < n; i++)
			reqs[i].rc = file_put(s, reqs[i].key, reqs[i].iov, reqs[i].iovcnt, reqs[i].mode, NULL, NULL);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		ops[i].req = &reqs[i];
		ops[i].dir_fd = ops[i].fd = ops[i].lock_fd = -1;
		reqs[i].throttle_retries = 0;
	}
	struct many_writers w = { .fs = fs, .ops = ops, .n = n, .next = 0 };
	pthread_t helper;
	bool helped = pthread_create(&helper, NULL, many_writer_main, &w) == 0;
	/* Without a helper (no thread to be had), the caller writes them all. */
	many_write_some(&w, false);
	if (helped)
		pthread_join(helper, NULL);
	for (size_t i = 0; i < n; i++) {
		if (reqs[i].rc && ops[i].why[0]) {
			ws_fail(reqs[i].rc, "%s", ops[i].why);
			break;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (reqs[i].rc == 0)
			reqs[i].rc = many_sync(fs, &ops[i]);

	for (size_t i = 0; i < n; i++)
		if (reqs[i].rc == 0 && reqs[i].mode != WS_PUT_CREATE) /* create-once: no lock (above) */
			order[locked++] = &ops[i];
	qsort(order, locked, sizeof(*order), cmp_lock_order);
	for (size_t k = 0; k < locked; k++) {
		struct many_op *op = order[k];
		if (k > 0 && cmp_lock_order(&order[k - 1], &order[k]) == 0 && order[k - 1]->req->rc == 0)
			continue; /* held already (by the op before it, or the one it shares with) */
		WS_ASSERT(op->step == PUT_SYNCED && op->lock_fd < 0);
		op->req->rc = file_lock_key(fs, "put", op->req->key, op->dir_fd, op->name, &op->lock_fd);
	}
	for (size_t i = 0; i < n; i++)
		if (reqs[i].rc == 0)
			reqs[i].rc = many_publish(fs, &ops[i]);
	/* One fsync per directory, still under the locks taken. */
	for (size_t i = 0; i < n; i++) {
		bool seen = false;
		int rc = 0;

		if (reqs[i].rc != 0)
			continue;
		for (size_t j = 0; j < i && !seen; j++)
			seen = reqs[j].rc == 0 && strcmp(ops[j].dir, ops[i].dir) == 0;
		if (seen)
			continue; /* synced with the first of its directory */
		WS_ASSERT(ops[i].step == PUT_PUBLISHED && !ops[i].tmp_exists);
		if (fsync(ops[i].dir_fd) < 0)
			rc = file_fail_key(-errno, fs, "put", reqs[i].key, "fsync of directory failed: %s", strerror(errno));
		if (rc)
			for (size_t j = i; j < n; j++)
				if (reqs[j].rc == 0 && strcmp(ops[j].dir, ops[i].dir) == 0)
					reqs[j].rc = rc;
	}

	for (size_t i = 0; i < n; i++) {
		file_unlock_key(ops[i].lock_fd);
		if (ops[i].fd >= 0)
			close(ops[i].fd);
		if (ops[i].tmp_exists)
			unlinkat(ops[i].dir_fd, ops[i].tmp, 0);
		if (ops[i].dir_fd >= 0)
			close(ops[i].dir_fd);
	}
	free(order);
	free(ops);
	return 0;
}
