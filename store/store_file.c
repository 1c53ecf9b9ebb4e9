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
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* renameat2, O_DIRECTORY, struct dirent d_type */
#endif
#include "ws_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
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
#include "ws_logging.h"

#define TMP_PREFIX ".tmp."
#define LOCK_PREFIX ".lock."
/* Times a put makes its directory again when a prune removed it under it. */
#define PRUNE_RACE_TRIES 8u
#define LOCK_STRIPES 64u
#define IOV_WINDOW 64
/* Directories this handle already made durable; cleared when 3/4 full. */
#define DIR_CACHE_SLOTS 1024u
/* A key has at most WS_KEY_MAX/2 segments, so no real tree is deeper. */
#define WALK_DEPTH_MAX (WS_KEY_MAX / 2)
#define TMP_NAME_MAX 64
#define TMP_TRIES_MAX 100

struct file_store {
	struct ws_store base; /* first: ops get &base back */
	int root_fd;
	char *root;           /* absolute, no trailing '/' */
	pthread_mutex_t dir_mu;
	uint64_t dir_known[DIR_CACHE_SLOTS]; /* hashes of relative dir paths; 0 = empty */
	unsigned dir_known_count;
};

/* Temp names must differ between threads of one process; the pid separates processes. */
static atomic_ulong tmp_seq;

static struct file_store *fs_of(struct ws_store *s)
{
	return (struct file_store *)s;
}

WS_PRINTF(5, 6)
static int fail_key(int err, const struct file_store *fs, const char *op, const char *key,
		    const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return ws_fail(err, "file store: %s %s (%s/%s): %s", op, key, fs->root, key, what);
}

static int64_t mtime_ms_of(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000 + (int64_t)st->st_mtim.tv_nsec / 1000000;
}

static void etag_make(uint64_t h, uint64_t size, struct ws_etag *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->s, sizeof(out->s), "%016" PRIx64 "-%" PRIu64, h, size);
}

/*
 * Etag of an open, published file of the given size. Read, not mapped:
 * walship never rewrites a published file, but someone else may (a cp over
 * the sink truncates first), and a mapping past a shrunk end is SIGBUS for
 * the whole process; here it is an error naming the size.
 */
static int etag_of_fd(int fd, uint64_t size, struct ws_etag *out)
{
	enum { CHUNK = 1 << 20 };
	struct ws_xxh_state st;
	uint8_t *buf;
	uint64_t off = 0;
	int rc = 0;

	if (size == 0) {
		etag_make(ws_xxh64("", 0), 0, out);
		return 0;
	}
	if ((rc = WS_FAULT("file.etag.before_read")) != 0)
		return rc;
	buf = malloc(size < CHUNK ? (size_t)size : CHUNK);
	if (!buf)
		return -ENOMEM;
	ws_xxh_reset(&st);
	while (off < size) {
		size_t want = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
		ssize_t got = pread(fd, buf, want, (off_t)off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			rc = got < 0 ? -errno : -EIO; /* shrank under us: not the object it was */
			break;
		}
		ws_xxh_update(&st, buf, (size_t)got);
		off += (uint64_t)got;
	}
	free(buf);
	if (rc)
		return rc;
	etag_make(ws_xxh_digest(&st), size, out);
	return 0;
}

static bool reserved_segment(const char *seg)
{
	return strncmp(seg, TMP_PREFIX, strlen(TMP_PREFIX)) == 0 ||
	       strncmp(seg, LOCK_PREFIX, strlen(LOCK_PREFIX)) == 0;
}

static int check_key(const struct file_store *fs, const char *op, const char *key)
{
	if (!key)
		return ws_fail(-EINVAL, "file store %s: %s: key is NULL", fs->root, op);
	if (!ws_key_valid(key))
		return ws_fail(-EINVAL, "file store %s: %s: invalid key \"%.*s\"", fs->root, op,
			       WS_KEY_MAX, key);
	for (const char *p = key; p; p = strchr(p, '/'), p = p ? p + 1 : NULL) {
		size_t seg_len = strcspn(p, "/");
		if (reserved_segment(p))
			return ws_fail(-EINVAL, "file store %s: %s: key \"%s\" uses a segment prefix "
				       "reserved by the file backend (.tmp., .lock.)", fs->root, op, key);
		/* Valid for object stores, but no file system takes such a file name. */
		if (seg_len > NAME_MAX)
			return ws_fail(-EINVAL, "file store %s: %s: key \"%s\" has a %zu-byte segment; "
				       "the file backend allows at most %d", fs->root, op, key, seg_len,
				       NAME_MAX);
	}
	return 0;
}

/* Splits a valid key into its directory part ("" at the root) and its last segment. */
static const char *split_key(const char *key, char dir[WS_KEY_MAX])
{
	const char *slash = strrchr(key, '/');

	if (!slash) {
		dir[0] = '\0';
		return key;
	}
	memcpy(dir, key, (size_t)(slash - key));
	dir[slash - key] = '\0';
	return slash + 1;
}

static int open_dir_at(int at_fd, const char *rel)
{
	return openat(at_fd, rel[0] ? rel : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static int fsync_dir_at(int at_fd, const char *rel)
{
	int fd = open_dir_at(at_fd, rel), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static const char *type_name(mode_t mode)
{
	if (S_ISLNK(mode))
		return "a symbolic link";
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISDIR(mode))
		return "a directory";
	return "not a regular file";
}

/* Why openat(O_NOFOLLOW) of name in at_fd failed with err, as WS_EFORMAT
 * when a foreign entry (a link, a FIFO, ...) is there, else -err. */
static int why_not_opened(const struct file_store *fs, const char *op, const char *key, int at_fd,
			  const char *name, const char *shown, int shown_len, int err)
{
	struct stat st;

	if ((err == ELOOP || err == ENOTDIR || err == ENXIO) &&
	    fstatat(at_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
	    !S_ISREG(st.st_mode))
		return fail_key(WS_EFORMAT, fs, op, key, "%.*s is %s; the file store follows and opens "
				"only directories and regular files", shown_len, shown, type_name(st.st_mode));
	return -err;
}

#define DIR_OPEN_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)

/*
 * Opens directory rel ("" = the root) one segment at a time, following no
 * symbolic link. Returns 0, -ENOENT or -ENOTDIR (a segment is missing or a
 * regular file: no such directory, nothing reported), WS_EFORMAT (reported:
 * a segment is a link or another foreign entry), or another -errno.
 */
static int open_dir_nofollow(const struct file_store *fs, const char *op, const char *key, const char *rel,
			     int *out_fd)
{
	int cur = openat(fs->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	size_t start = 0, len = strlen(rel);

	if (cur < 0)
		return -errno;
	while (start < len) {
		size_t n = strcspn(rel + start, "/");
		char seg[NAME_MAX + 1];
		int next, rc;

		if (n > NAME_MAX) {
			close(cur);
			return -ENAMETOOLONG;
		}
		memcpy(seg, rel + start, n);
		seg[n] = '\0';
		next = openat(cur, seg, DIR_OPEN_FLAGS);
		if (next < 0) {
			rc = why_not_opened(fs, op, key, cur, seg, rel, (int)(start + n), errno);
			close(cur);
			return rc;
		}
		close(cur);
		cur = next;
		start += n + (rel[start + n] == '/');
	}
	*out_fd = cur;
	return 0;
}

/*
 * Opens name in dir_fd for reading if it is a regular file. The type is
 * checked before the open, without following a link: opening a device or a
 * FIFO can block or act on hardware. Returns 0, -ENOENT, -EISDIR (a
 * directory has the name), WS_EFORMAT (reported), other -errno.
 */
static int open_reg_at(const struct file_store *fs, const char *op, const char *key, int dir_fd,
		       const char *name, int *out_fd, struct stat *st)
{
	int fd, rc;

	if (fstatat(dir_fd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (S_ISDIR(st->st_mode))
		return -EISDIR;
	if (!S_ISREG(st->st_mode))
		return fail_key(WS_EFORMAT, fs, op, key, "is %s, not an object; the file store opens only "
				"regular files", type_name(st->st_mode));
	fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return why_not_opened(fs, op, key, dir_fd, name, key, (int)strlen(key), errno);
	/* Swapped since the fstatat: check what was opened. */
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		rc = S_ISDIR(st->st_mode) ? -EISDIR : fail_key(WS_EFORMAT, fs, op, key, "is not a regular file");
		close(fd);
		return rc;
	}
	*out_fd = fd;
	return 0;
}

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
		return fail_key(-errno, fs, "put", key, "cannot open the root: %s", strerror(errno));
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
				rc = fail_key(-errno, fs, "put", key, "cannot create directory %.*s: %s", (int)end,
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
			rc = why_not_opened(fs, "put", key, cur, seg, dir, (int)end, e);
			if (rc != WS_EFORMAT)
				rc = fail_key(rc, fs, "put", key, "cannot open directory %.*s: %s", (int)end, dir,
					      strerror(e));
			goto fail;
		}
		if (statx(next, "", AT_EMPTY_PATH, STATX_INO | STATX_BTIME, &st) < 0) {
			rc = fail_key(-errno, fs, "put", key, "cannot stat directory %.*s: %s", (int)end, dir,
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
				rc = fail_key(rc, fs, "put", key, "injected fault before syncing directory \"%.*s\"",
					      (int)(start ? start - 1 : 0), dir);
				close(next);
				goto fail;
			}
			if (fsync(cur) < 0) {
				rc = fail_key(-errno, fs, "put", key, "cannot fsync directory \"%.*s\"",
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

static int lock_key(const struct file_store *fs, const char *op, const char *key, int dir_fd, const char *name,
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
		return fail_key(WS_EFORMAT, fs, op, key, "its lock file %s is %s; the file store opens only "
				"regular files", lname, type_name(st.st_mode));
	fd = openat(dir_fd, lname, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = why_not_opened(fs, op, key, dir_fd, lname, lname, (int)strlen(lname), errno);
		return rc == WS_EFORMAT ? rc : fail_key(rc, fs, op, key, "cannot open lock file %s: %s", lname,
							 strerror(-rc));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return fail_key(WS_EFORMAT, fs, op, key, "its lock file %s is not a regular file", lname);
	}
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			rc = fail_key(-errno, fs, op, key, "cannot lock %s: %s", lname, strerror(errno));
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

static void unlock_key(int fd)
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

		snprintf(name, TMP_NAME_MAX, TMP_PREFIX "%ld.%lu", (long)getpid(), seq);
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
		return fail_key(rc, fs, "put", key, "fault injected before the fsync of an existing entry");
	if (fsync(dir_fd) < 0)
		return fail_key(-errno, fs, "put", key, "fsync of directory failed: %s", strerror(errno));
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return fail_key(WS_EPRECOND, fs, "put", key, "%s", what);
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

	rc = open_reg_at(fs, "put", key, dir_fd, name, &fd, &st);
	if (rc == -ENOENT) {
		if (mode == WS_PUT_CAS)
			return fail_key(WS_EPRECOND, fs, "put", key, "CAS expected etag %s but the "
					"object does not exist", expect->s);
		return 0;
	}
	if (rc == -EISDIR)
		return fail_key(-EISDIR, fs, "put", key, "a directory holds the key's name");
	if (rc == WS_EFORMAT)
		return rc;
	if (rc)
		return fail_key(rc, fs, "put", key, "cannot open current object: %s", strerror(-rc));
	if (mode == WS_PUT_CREATE) {
		close(fd);
		return precond_failed(fs, dir_fd, key, "create-once but the object exists");
	}
	rc = etag_of_fd(fd, (uint64_t)st.st_size, &cur);
	if (rc) {
		rc = fail_key(rc, fs, "put", key, "cannot hash current object");
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
	int rc = check_key(fs, "put", key);

	if (rc)
		return rc;
	if (iovcnt < 0 || (iovcnt > 0 && !iov))
		return fail_key(-EINVAL, fs, "put", key, "bad iovec array (%d entries)", iovcnt);
	if (mode != WS_PUT_OVERWRITE && mode != WS_PUT_CREATE && mode != WS_PUT_CAS)
		return fail_key(-EINVAL, fs, "put", key, "unknown put mode %d", (int)mode);
	if (mode == WS_PUT_CAS && !expect)
		return fail_key(-EINVAL, fs, "put", key, "CAS without an expected etag");
	*size = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > UINT64_MAX - *size)
			return fail_key(-EINVAL, fs, "put", key, "iovec sizes overflow");
		*size += iov[i].iov_len;
	}
	return 0;
}

static int file_put(struct ws_store *s, const char *key, const struct iovec *iov, int iovcnt,
		    enum ws_put_mode mode, const struct ws_etag *expect, struct ws_etag *out_etag)
{
	struct file_store *fs = fs_of(s);
	char dir[WS_KEY_MAX], tmp[TMP_NAME_MAX];
	const char *name;
	struct ws_etag etag;
	uint64_t size = 0;
	int dir_fd = -1, fd = -1, lock_fd = -1, rc;
	bool tmp_exists = false;

	rc = check_put_args(fs, key, iov, iovcnt, mode, expect, &size);
	if (rc)
		return rc;
	etag_make(ws_xxh64v(iov, iovcnt), size, &etag);
	name = split_key(key, dir);

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
		rc = fail_key(rc, fs, "put", key, "cannot create temp file: %s", strerror(-rc));
		goto fail;
	}
	tmp_exists = true;
	rc = write_all(fd, iov, iovcnt);
	if (rc) {
		rc = fail_key(rc, fs, "put", key, "write of %" PRIu64 " bytes to %s failed: %s", size,
			      tmp, strerror(-rc));
		goto fail;
	}
	rc = WS_FAULT("file.put.after_write");
	if (rc) {
		rc = fail_key(rc, fs, "put", key, "fault injected after write");
		goto fail;
	}
	if (fdatasync(fd) < 0) {
		rc = fail_key(-errno, fs, "put", key, "fdatasync of %s failed: %s", tmp, strerror(errno));
		goto fail;
	}
	rc = close(fd) < 0 ? -errno : 0;
	fd = -1;
	if (rc) {
		rc = fail_key(rc, fs, "put", key, "close of %s failed: %s", tmp, strerror(-rc));
		goto fail;
	}
	rc = WS_FAULT("file.put.before_publish");
	if (rc) {
		rc = fail_key(rc, fs, "put", key, "fault injected before publish");
		goto fail;
	}

	if (mode != WS_PUT_CREATE) {
		rc = lock_key(fs, "put", key, dir_fd, name, &lock_fd);
		if (rc)
			goto fail;
	}
	if (mode == WS_PUT_CAS) {
		rc = check_precond(fs, dir_fd, name, key, mode, expect);
		if (rc)
			goto fail;
	}
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
				rc = fail_key(-errno, fs, "put", key, "cannot publish %s: %s", tmp,
					      strerror(errno));
			goto fail;
		}
	} else {
		if (renameat(dir_fd, tmp, dir_fd, name) < 0) {
			rc = fail_key(-errno, fs, "put", key, "cannot rename %s into place: %s", tmp,
				      strerror(errno));
			goto fail;
		}
		tmp_exists = false;
	}
	rc = WS_FAULT("file.put.after_publish");
	if (rc) {
		rc = fail_key(rc, fs, "put", key, "fault injected after publish");
		goto fail;
	}
	/* Still under the lock (but for a create-once): nobody may act on this
	 * version before it is durable. An overwrite, CAS or delete of a
	 * created object syncs the directory itself before it returns. */
	if (fsync(dir_fd) < 0) {
		rc = fail_key(-errno, fs, "put", key, "fsync of directory failed: %s", strerror(errno));
		goto fail;
	}
	unlock_key(lock_fd);
	close(dir_fd);
	if (out_etag)
		*out_etag = etag;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	if (tmp_exists)
		unlinkat(dir_fd, tmp, 0);
	unlock_key(lock_fd);
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
		return fail_key(-EINVAL, fs, "put", r->key, "put_many takes overwrite or create-once only");
	op->name = split_key(r->key, op->dir);
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
		return fail_key(rc, fs, "put", r->key, "cannot create temp file: %s", strerror(-rc));
	op->tmp_exists = true;
	rc = write_all(op->fd, r->iov, r->iovcnt);
	if (rc)
		return fail_key(rc, fs, "put", r->key, "write of %" PRIu64 " bytes to %s failed: %s", size, op->tmp,
				strerror(-rc));
	rc = WS_FAULT("file.put.after_write");
	if (rc)
		return fail_key(rc, fs, "put", r->key, "fault injected after write");
	/* Only a hint (the fdatasync below is the guarantee, and reports any
	 * error): the device gets every object's data at once. */
	(void)sync_file_range(op->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	return 0;
}

static int many_sync(const struct file_store *fs, struct many_op *op)
{
	const char *key = op->req->key;
	int rc;

	if (fdatasync(op->fd) < 0)
		return fail_key(-errno, fs, "put", key, "fdatasync of %s failed: %s", op->tmp, strerror(errno));
	rc = close(op->fd) < 0 ? -errno : 0;
	op->fd = -1;
	if (rc)
		return fail_key(rc, fs, "put", key, "close of %s failed: %s", op->tmp, strerror(-rc));
	rc = WS_FAULT("file.put.before_publish");
	if (rc)
		return fail_key(rc, fs, "put", key, "fault injected before publish");
	return 0;
}

/* link() (CREATE: EEXIST atomically, no lock) or rename() (OVERWRITE, under its lock) into place. */
static int many_publish(const struct file_store *fs, struct many_op *op)
{
	const char *key = op->req->key;
	int rc;

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
			return fail_key(-errno, fs, "put", key, "cannot publish %s: %s", op->tmp, strerror(errno));
		}
	} else {
		if (renameat(op->dir_fd, op->tmp, op->dir_fd, op->name) < 0)
			return fail_key(-errno, fs, "put", key, "cannot rename %s into place: %s", op->tmp,
					strerror(errno));
		op->tmp_exists = false;
	}
	rc = WS_FAULT("file.put.after_publish");
	if (rc)
		return fail_key(rc, fs, "put", key, "fault injected after publish");
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

static int file_put_many(struct ws_store *s, struct ws_put_req *reqs, size_t n)
{
	struct file_store *fs = fs_of(s);
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
		op->req->rc = lock_key(fs, "put", op->req->key, op->dir_fd, op->name, &op->lock_fd);
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
		if (fsync(ops[i].dir_fd) < 0)
			rc = fail_key(-errno, fs, "put", reqs[i].key, "fsync of directory failed: %s", strerror(errno));
		if (rc)
			for (size_t j = i; j < n; j++)
				if (reqs[j].rc == 0 && strcmp(ops[j].dir, ops[i].dir) == 0)
					reqs[j].rc = rc;
	}

	for (size_t i = 0; i < n; i++) {
		unlock_key(ops[i].lock_fd);
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

/*
 * Opens a published object; WS_ENOTFOUND when there is none (or a directory
 * has the name); WS_EFORMAT when a link, FIFO, device or socket is on its
 * path (never followed or opened).
 */
static int open_obj(const struct file_store *fs, const char *op, const char *key, int *out_fd,
		    struct stat *st)
{
	char dir[WS_KEY_MAX];
	const char *name = split_key(key, dir);
	int dir_fd = -1, rc;

	rc = open_dir_nofollow(fs, op, key, dir, &dir_fd);
	if (rc == 0) {
		rc = open_reg_at(fs, op, key, dir_fd, name, out_fd, st);
		close(dir_fd);
	}
	if (rc == -ENOENT || rc == -ENOTDIR || rc == -EISDIR)
		return fail_key(WS_ENOTFOUND, fs, op, key, "no such object");
	if (rc && rc != WS_EFORMAT)
		return fail_key(rc, fs, op, key, "cannot open: %s", strerror(-rc));
	return rc;
}

static int file_get(struct ws_store *s, const char *key, uint64_t off, uint64_t len,
		    struct ws_buf *out, struct ws_obj_info *info)
{
	struct file_store *fs = fs_of(s);
	struct stat st;
	uint64_t size, n = 0, got = 0;
	uint8_t *dst;
	int fd = -1, rc;

	rc = check_key(fs, "get", key);
	if (rc)
		return rc;
	if (!out)
		return fail_key(-EINVAL, fs, "get", key, "no output buffer");
	rc = open_obj(fs, "get", key, &fd, &st);
	if (rc)
		return rc;
	size = (uint64_t)st.st_size;
	if (off < size)
		n = len < size - off ? len : size - off;
	if (n > SIZE_MAX) {
		rc = fail_key(WS_ETOOBIG, fs, "get", key, "range of %" PRIu64 " bytes", n);
		goto fail;
	}
	rc = ws_buf_reserve(out, (size_t)n);
	if (rc) {
		rc = fail_key(rc, fs, "get", key, "cannot hold %" PRIu64 " bytes at offset %" PRIu64
			      " (buffer max %zu)", n, off, out->max);
		goto fail;
	}
	dst = n ? out->data + out->len : NULL;
	while (got < n) {
		ssize_t r = pread(fd, dst + got, (size_t)(n - got), (off_t)(off + got));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			rc = fail_key(-errno, fs, "get", key, "read failed: %s", strerror(errno));
			goto fail;
		}
		if (r == 0) {
			/* Published objects never shrink; something outside walship truncated it. */
			rc = fail_key(-EIO, fs, "get", key, "object shrank while reading "
				      "(%" PRIu64 " of %" PRIu64 " bytes)", got, n);
			goto fail;
		}
		got += (uint64_t)r;
	}
	if (info) {
		info->size_bytes = size;
		info->mtime_ms = mtime_ms_of(&st);
		if (off == 0 && n == size && n > 0)
			etag_make(ws_xxh64(dst, (size_t)n), size, &info->etag);
		else if ((rc = etag_of_fd(fd, size, &info->etag)) != 0) {
			rc = fail_key(rc, fs, "get", key, "cannot hash object: %s", strerror(-rc));
			goto fail;
		}
	}
	out->len += (size_t)n;
	close(fd);
	return 0;
fail:
	close(fd);
	return rc;
}

static int file_head(struct ws_store *s, const char *key, struct ws_obj_info *info)
{
	struct file_store *fs = fs_of(s);
	struct stat st;
	int fd = -1, rc;

	rc = check_key(fs, "head", key);
	if (rc)
		return rc;
	rc = open_obj(fs, "head", key, &fd, &st);
	if (rc)
		return rc;
	if (info) {
		info->size_bytes = (uint64_t)st.st_size;
		info->mtime_ms = mtime_ms_of(&st);
		rc = etag_of_fd(fd, (uint64_t)st.st_size, &info->etag);
		if (rc)
			rc = fail_key(rc, fs, "head", key, "cannot hash object: %s", strerror(-rc));
	}
	close(fd);
	return rc;
}

/*
 * Remove directory rel (below the root) when it holds nothing but lock
 * files: what deleting its last object leaves (a snapshot's or a
 * checkpoint's directory after retention). Returns true when it is gone.
 *
 * Never racing a writer: each lock file is taken (LOCK_NB: one in use means
 * a writer is here; a create-once writer holds none, and its temp file or
 * object is what the read below finds) and the directory read again under
 * all of them; only then are the lock files unlinked, still held (lock_key
 * takes the lock at the name again when it finds its file unlinked), and
 * the directory removed with rmdir, which fails, leaving it, if a writer's temp file went
 * in meanwhile. A writer that opened the directory before it went finds it
 * gone when it creates its temp file and makes it again (file_put). The
 * parent is synced, so the removal is as durable as the delete before it.
 */
static bool prune_dir(struct file_store *fs, const char *rel)
{
	char names[LOCK_STRIPES][16], parent[WS_KEY_MAX];
	int locks[LOCK_STRIPES], pfd;
	unsigned nlocks = 0;
	bool gone = false;
	const char *base;

	if (!rel[0])
		return false; /* never the root */
	base = split_key(rel, parent);
	if (open_dir_nofollow(fs, "prune", rel, parent, &pfd) != 0)
		return false;
	/* Pass 0 takes every lock file; pass 1, under them all, finds the
	 * same lock files and nothing else (lock files are only ever added,
	 * so an equal count is the same set). */
	for (int pass = 0; pass < 2; pass++) {
		unsigned seen = 0;
		bool only_locks = true;
		struct dirent *de;
		int fd = openat(pfd, base, DIR_OPEN_FLAGS);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		if (!d) {
			if (fd >= 0)
				close(fd);
			goto out;
		}
		while ((de = readdir(d)) != NULL) {
			int lfd;
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			if (strncmp(de->d_name, LOCK_PREFIX, sizeof(LOCK_PREFIX) - 1) != 0 || de->d_type != DT_REG ||
			    strlen(de->d_name) >= sizeof(names[0]) || seen == LOCK_STRIPES) {
				only_locks = false;
				break;
			}
			seen++;
			if (pass == 1)
				continue;
			lfd = openat(dirfd(d), de->d_name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			if (lfd < 0 || flock(lfd, LOCK_EX | LOCK_NB) < 0) {
				if (lfd >= 0)
					close(lfd);
				only_locks = false; /* in use: a writer is here */
				break;
			}
			memcpy(names[nlocks], de->d_name, strlen(de->d_name) + 1); /* < sizeof(names[0]): above */
			locks[nlocks++] = lfd;
		}
		closedir(d);
		if (!only_locks || (pass == 1 && seen != nlocks))
			goto out;
	}
	{
		int dfd = openat(pfd, base, DIR_OPEN_FLAGS);
		if (dfd < 0)
			goto out;
		/* Only the lock files held: one a writer made since is its own. */
		for (unsigned i = 0; i < nlocks; i++)
			(void)unlinkat(dfd, names[i], 0);
		close(dfd);
	}
	if (unlinkat(pfd, base, AT_REMOVEDIR) == 0) {
		gone = true;
		if (fsync(pfd) < 0)
			ws_warn("file store %s: fsync of the parent of %s after removing it: %s", fs->root, rel,
				strerror(errno));
	}
out:
	for (unsigned i = 0; i < nlocks; i++)
		close(locks[i]);
	close(pfd);
	return gone;
}

/* prune_dir on rel and then each parent it empties, up to the root. */
static void prune_dirs(struct file_store *fs, const char *rel)
{
	char dir[WS_KEY_MAX];
	snprintf(dir, sizeof(dir), "%s", rel);
	while (dir[0] && prune_dir(fs, dir)) {
		char *slash = strrchr(dir, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
}

static int file_del(struct ws_store *s, const char *key)
{
	struct file_store *fs = fs_of(s);
	char dir[WS_KEY_MAX];
	const char *name;
	int dir_fd = -1, lock_fd = -1, rc;

	rc = check_key(fs, "delete", key);
	if (rc)
		return rc;
	name = split_key(key, dir);
	rc = open_dir_nofollow(fs, "delete", key, dir, &dir_fd);
	if (rc == -ENOENT || rc == -ENOTDIR)
		return 0;
	if (rc == WS_EFORMAT)
		return rc;
	if (rc)
		return fail_key(rc, fs, "delete", key, "cannot open directory: %s", strerror(-rc));
	{
		/* Only an object is deleted; whatever else holds the name is named. */
		struct stat st;
		if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = errno == ENOENT ? 0 : fail_key(-errno, fs, "delete", key, "cannot stat: %s",
							    strerror(errno));
			close(dir_fd);
			return rc;
		}
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
			rc = fail_key(WS_EFORMAT, fs, "delete", key, "is %s, not an object; not deleted",
				      type_name(st.st_mode));
			close(dir_fd);
			return rc;
		}
	}
	/* The lock keeps a delete from landing between a CAS's compare and its rename. */
	if ((rc = WS_FAULT("file.del.before_lock")) != 0) {
		rc = fail_key(rc, fs, "delete", key, "injected fault before its lock");
		goto fail;
	}
	rc = lock_key(fs, "delete", key, dir_fd, name, &lock_fd);
	if (rc == -ENOENT) {
		/* Its directory was pruned meanwhile (only an empty one is): a
		 * concurrent delete of the key finished, through its fsyncs. */
		close(dir_fd);
		return 0;
	}
	if (rc)
		goto fail;
	if (unlinkat(dir_fd, name, 0) < 0) {
		/*
		 * Missing: an earlier delete ran under this lock through its fsync, so
		 * the absence is durable. EISDIR: the name is a directory, not an object.
		 */
		if (errno == ENOENT || errno == EISDIR)
			goto done;
		rc = fail_key(-errno, fs, "delete", key, "unlink failed: %s", strerror(errno));
		goto fail;
	}
	if (fsync(dir_fd) < 0) {
		rc = fail_key(-errno, fs, "delete", key, "fsync of directory failed: %s",
			      strerror(errno));
		goto fail;
	}
	unlock_key(lock_fd);
	lock_fd = -1;
	close(dir_fd);
	dir_fd = -1;
	prune_dirs(fs, dir);
done:
	rc = 0;
fail:
	unlock_key(lock_fd);
	if (dir_fd >= 0)
		close(dir_fd);
	return rc;
}

/* ---- list ----------------------------------------------------------------- */

struct list_ctx {
	const struct file_store *fs;
	const char *prefix;
	size_t prefix_len;
	const char *token;
	size_t want;       /* max_keys + 1: the extra one proves truncation */
	char **keys;
	uint64_t *sizes;
	size_t count;
	char path[WS_KEY_MAX + 1]; /* relative path of the directory being walked, with '/' */
};

/* Entry names; a directory's carries a trailing '/' so byte order matches its keys'. */
struct name_vec {
	char **v;
	size_t count, cap;
};

static void name_vec_free(struct name_vec *nv)
{
	for (size_t i = 0; i < nv->count; i++)
		free(nv->v[i]);
	free(nv->v);
	memset(nv, 0, sizeof(*nv));
}

static int name_vec_push(struct name_vec *nv, const char *name, bool is_dir)
{
	size_t len = strlen(name);
	char *p;

	if (nv->count == nv->cap) {
		size_t cap = nv->cap ? nv->cap * 2 : 64;
		char **v = realloc(nv->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		nv->v = v;
		nv->cap = cap;
	}
	p = malloc(len + 2);
	if (!p)
		return -ENOMEM;
	memcpy(p, name, len);
	p[len] = is_dir ? '/' : '\0';
	p[len + 1] = '\0';
	nv->v[nv->count++] = p;
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Reads dir_fd's visible entries (regular files and directories), sorted.
 * Anything else (a link, FIFO, device, socket) is no object: skipped, with a
 * warning naming it, since the store never puts one there.
 */
static int read_sorted(const struct list_ctx *c, int dir_fd, size_t path_len, struct name_vec *nv)
{
	struct dirent *de;
	DIR *d;
	int fd, rc = 0;

	/* A fresh open file description: a dup would share its offset with other threads. */
	fd = open_dir_at(dir_fd, "");
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		bool is_dir;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    reserved_segment(de->d_name))
			continue;
		if (de->d_type == DT_DIR || de->d_type == DT_REG) {
			is_dir = de->d_type == DT_DIR;
		} else {
			struct stat st;
			if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
				ws_warn("file store %s: list: skipping %.*s%.*s: %s, not an object or directory",
					c->fs->root, (int)path_len, c->path, NAME_MAX, de->d_name,
					type_name(st.st_mode));
				continue;
			}
			is_dir = S_ISDIR(st.st_mode);
		}
		rc = name_vec_push(nv, de->d_name, is_dir);
		if (rc)
			goto out;
	}
	if (errno)
		rc = -errno;
	if (nv->count > 1)
		qsort(nv->v, nv->count, sizeof(*nv->v), cmp_names);
out:
	closedir(d);
	return rc;
}

static int list_walk(struct list_ctx *c, int dir_fd, size_t path_len, unsigned depth)
{
	struct name_vec nv = { 0 };
	int rc;

	if (depth > WALK_DEPTH_MAX)
		return 0;
	rc = read_sorted(c, dir_fd, path_len, &nv);
	if (rc) {
		rc = ws_fail(rc, "file store %s: list: cannot read directory \"%.*s\": %s",
			     c->fs->root, (int)path_len, c->path, strerror(-rc));
		goto out;
	}
	/* Entries in order, subtrees whole, so keys come out in global byte order. */
	for (size_t i = 0; i < nv.count && c->count < c->want; i++) {
		const char *e = nv.v[i];
		size_t elen = strlen(e), full_len = path_len + elen;
		bool is_dir = e[elen - 1] == '/';
		size_t cmp_len;

		if (full_len >= sizeof(c->path))
			continue; /* cannot be (or contain) a valid key */
		memcpy(c->path + path_len, e, elen + 1);
		cmp_len = full_len < c->prefix_len ? full_len : c->prefix_len;
		if (strncmp(c->path, c->prefix, cmp_len) != 0)
			continue;
		if (is_dir) {
			int sub;
			/* All keys below start with path; below token unless token is inside. */
			if (strcmp(c->path, c->token) < 0 && strncmp(c->token, c->path, full_len) != 0)
				continue;
			c->path[full_len - 1] = '\0';
			sub = openat(dir_fd, c->path + path_len, DIR_OPEN_FLAGS);
			c->path[full_len - 1] = '/';
			if (sub < 0) {
				if (errno == ENOENT)
					continue; /* removed since readdir */
				rc = ws_fail(-errno, "file store %s: list: cannot open %s: %s",
					     c->fs->root, c->path, strerror(errno));
				goto out;
			}
			rc = list_walk(c, sub, full_len, depth + 1);
			close(sub);
			if (rc)
				goto out;
			continue;
		}
		if (full_len < c->prefix_len || strcmp(c->path, c->token) <= 0 ||
		    !ws_key_valid(c->path))
			continue;
		{
			struct stat sb;
			char *k;
			if (fstatat(dir_fd, e, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
				if (errno == ENOENT)
					continue; /* removed since readdir */
				rc = ws_fail(-errno, "file store %s: list: cannot stat %s: %s", c->fs->root,
					     c->path, strerror(errno));
				goto out;
			}
			k = strdup(c->path);
			if (!k) {
				rc = -ENOMEM;
				goto out;
			}
			c->sizes[c->count] = (uint64_t)sb.st_size;
			c->keys[c->count++] = k;
		}
	}
out:
	name_vec_free(&nv);
	return rc;
}

static int file_list(struct ws_store *s, const char *prefix, const char *token, unsigned max_keys,
		     struct ws_list_page *out)
{
	struct file_store *fs = fs_of(s);
	struct list_ctx c;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!prefix)
		prefix = "";
	if (!token)
		token = "";
	if (max_keys == 0 || max_keys > WS_LIST_PAGE_MAX)
		return ws_fail(-EINVAL, "file store %s: list: max_keys %u outside 1..%u", fs->root,
			       max_keys, WS_LIST_PAGE_MAX);
	if (strnlen(prefix, WS_KEY_MAX) >= WS_KEY_MAX || strnlen(token, WS_KEY_MAX) >= WS_KEY_MAX)
		return ws_fail(-EINVAL, "file store %s: list: prefix or token longer than %d bytes",
			       fs->root, WS_KEY_MAX - 1);
	memset(&c, 0, sizeof(c));
	c.fs = fs;
	c.prefix = prefix;
	c.prefix_len = strlen(prefix);
	c.token = token;
	c.want = (size_t)max_keys + 1;
	c.keys = calloc(c.want, sizeof(*c.keys));
	c.sizes = calloc(c.want, sizeof(*c.sizes));
	if (!c.keys || !c.sizes) {
		free(c.keys);
		free(c.sizes);
		return ws_fail(-ENOMEM, "file store %s: list: out of memory", fs->root);
	}
	rc = list_walk(&c, fs->root_fd, 0, 0);
	if (rc) {
		if (rc == -ENOMEM)
			ws_fail(rc, "file store %s: list %s: out of memory", fs->root, prefix);
		goto fail;
	}
	if (c.count > max_keys) {
		free(c.keys[max_keys]);
		c.count = max_keys;
		out->truncated = true;
		snprintf(out->next_token, sizeof(out->next_token), "%s", c.keys[max_keys - 1]);
	}
	out->keys = c.keys;
	out->sizes = c.sizes;
	out->count = c.count;
	return 0;
fail:
	for (size_t i = 0; i < c.count; i++)
		free(c.keys[i]);
	free(c.keys);
	free(c.sizes);
	return rc;
}

/* ---- open, close ------------------------------------------------------------ */

static void file_close(struct ws_store *s)
{
	struct file_store *fs = fs_of(s);

	if (fs->root_fd >= 0)
		close(fs->root_fd);
	pthread_mutex_destroy(&fs->dir_mu);
	free(fs->root);
	free(fs);
}

static const struct ws_store_ops file_ops = {
	.put = file_put,
	.put_many = file_put_many,
	.get = file_get,
	.head = file_head,
	.list = file_list,
	.del = file_del,
	.close = file_close,
	.kind = WS_STORE_FILE,
};

const char *ws_store_file_root(const struct ws_store *s)
{
	return s && s->ops == &file_ops ? ((const struct file_store *)s)->root : NULL;
}

/* Pid of a ".tmp.<pid>.<seq>" name, or 0 when the name is not one of ours. */
static pid_t tmp_owner(const char *name)
{
	const char *p = name + strlen(TMP_PREFIX);
	char *end;
	long pid;

	if (strncmp(name, TMP_PREFIX, strlen(TMP_PREFIX)) != 0 || *p < '0' || *p > '9')
		return 0;
	errno = 0;
	pid = strtol(p, &end, 10);
	if (errno || *end != '.' || pid <= 0 || pid > INT_MAX)
		return 0;
	return (pid_t)pid;
}

/*
 * Removes temp files whose writer is dead: leftovers of a crash between write
 * and publish. A live pid (possibly recycled) keeps its files; they are
 * invisible to readers and cost only space. Best effort: problems are logged.
 */
static void clean_stale(const struct file_store *fs, int dir_fd, unsigned depth)
{
	struct dirent *de;
	DIR *d;
	int fd;

	if (depth > WALK_DEPTH_MAX)
		return;
	fd = open_dir_at(dir_fd, "");
	if (fd < 0)
		return;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d)) != NULL) {
		pid_t pid;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		pid = tmp_owner(de->d_name);
		if (pid > 0) {
			if (kill(pid, 0) < 0 && errno == ESRCH) {
				if (unlinkat(dir_fd, de->d_name, 0) == 0)
					ws_info("file store %s: removed %s left by dead process %ld",
						fs->root, de->d_name, (long)pid);
				else if (errno != ENOENT)
					ws_warn("file store %s: cannot remove stale %s: %s", fs->root,
						de->d_name, strerror(errno));
			}
			continue;
		}
		if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN) {
			int sub = openat(dir_fd, de->d_name,
					 O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			if (sub >= 0) {
				clean_stale(fs, sub, depth + 1);
				close(sub);
			}
		}
	}
	closedir(d);
}

/*
 * mkdir -p, fsyncing the parent of every directory on the path, made here
 * or not: one made by `mkdir -p` just before (or by a process that crashed
 * before its fsync) may not be durable yet, and every object acknowledged
 * under it would go with it in a power failure. A few fsyncs per writer open.
 */
static int mkdir_durable(const char *root)
{
	char path[PATH_MAX];
	size_t len = strlen(root);
	int rc;

	memcpy(path, root, len + 1);
	for (size_t i = 1; i <= len; i++) {
		if (i < len && path[i] != '/')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0755) == 0 || errno == EEXIST) {
			char *slash = strrchr(path, '/');
			char save = slash[1];
			if (i == len && (rc = WS_FAULT("file.open.root_entry_fsync")) != 0)
				return ws_fail(rc, "file store %s: injected fault before syncing its entry", root);
			slash[1] = '\0';
			rc = fsync_dir_at(AT_FDCWD, path);
			slash[1] = save;
			/* An ancestor this user may not read (mode 711, say) is
			 * someone else's to keep durable; the root's parent is ours. */
			if (rc && (rc == -EACCES || rc == -EPERM)) {
				if (i == len)
					ws_warn("file store %s: cannot fsync the directory holding it (%s): its entry "
						"there may not survive a power failure", root, strerror(-rc));
				rc = 0;
			}
			if (rc)
				return ws_fail(rc, "file store %s: cannot fsync parent of %s", root, path);
		} else {
			rc = -errno;
			return ws_fail(rc, "file store %s: cannot create directory %s: %s", root, path,
				       strerror(errno));
		}
		if (i < len)
			path[i] = '/';
	}
	return 0;
}

struct ws_store *ws_store_file_open(const char *root, int *err)
{
	return ws_store_file_open_flags(root, 0, err);
}

struct ws_store *ws_store_file_open_flags(const char *root, unsigned flags, int *err)
{
	struct file_store *fs = NULL;
	size_t len;
	int rc;

	if (!root || root[0] != '/') {
		rc = ws_fail(WS_ECONFIG, "file store root \"%s\" is not an absolute path",
			     root ? root : "(null)");
		goto fail;
	}
	len = strlen(root);
	while (len > 1 && root[len - 1] == '/')
		len--;
	if (len + 1 + WS_KEY_MAX + TMP_NAME_MAX >= PATH_MAX) {
		rc = ws_fail(WS_ECONFIG, "file store root \"%s\" is too long", root);
		goto fail;
	}
	fs = calloc(1, sizeof(*fs));
	if (!fs) {
		rc = ws_fail(-ENOMEM, "file store %s: out of memory", root);
		goto fail;
	}
	fs->root_fd = -1;
	fs->base.ops = &file_ops;
	pthread_mutex_init(&fs->dir_mu, NULL);
	fs->root = strndup(root, len);
	if (!fs->root) {
		rc = ws_fail(-ENOMEM, "file store %s: out of memory", root);
		goto fail;
	}
	snprintf(fs->base.url, sizeof(fs->base.url), "file://%s", fs->root);
	if (flags & WS_STORE_EXISTING) {
		struct stat sb;
		if (stat(fs->root, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
			rc = ws_fail(WS_ENOTFOUND, "file store %s: no such directory", fs->root);
			goto fail;
		}
	} else {
		rc = mkdir_durable(fs->root);
		if (rc)
			goto fail;
	}
	fs->root_fd = open(fs->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fs->root_fd < 0) {
		rc = ws_fail(-errno, "file store %s: cannot open root: %s", fs->root, strerror(errno));
		goto fail;
	}
	/* Readers leave writers' temp files alone; only a writer pays for the walk. */
	if (!(flags & WS_STORE_EXISTING))
		clean_stale(fs, fs->root_fd, 0);
	if (err)
		*err = 0;
	return &fs->base;
fail:
	if (fs)
		file_close(&fs->base);
	if (err)
		*err = rc;
	return NULL;
}
