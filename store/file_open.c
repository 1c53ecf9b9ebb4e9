/*
 * The file:// backend's ground (store_file.c describes the layout): keys
 * checked and split into a directory and a name, paths opened one segment
 * at a time with O_NOFOLLOW, etags, and the store's open (which sweeps the
 * temp files of dead writers), close and ops table.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* renameat2, O_DIRECTORY, struct dirent d_type */
#endif
#include "file_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ws_fault.h"
#include "ws_hash.h"
#include "ws_assert.h"
#include "ws_logging.h"

struct file_store *file_store_of(struct ws_store *s)
{
	return (struct file_store *)s;
}

WS_PRINTF(5, 6)
int file_fail_key(int err, const struct file_store *fs, const char *op, const char *key,
		  const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return ws_fail(err, "file store: %s %s (%s/%s): %s", op, key, fs->root, key, what);
}

int64_t file_mtime_ms(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000 + (int64_t)st->st_mtim.tv_nsec / 1000000;
}

void file_etag_make(uint64_t h, uint64_t size, struct ws_etag *out)
{
	int n;
	memset(out, 0, sizeof(*out));
	n = snprintf(out->s, sizeof(out->s), "%016" PRIx64 "-%" PRIu64, h, size);
	/* 16 hex digits, '-', at most 20 digits: an etag is never cut, so a
	 * swap naming it always names the whole. */
	WS_ASSERT(n > 0 && (size_t)n < sizeof(out->s));
}

/*
 * Etag of an open, published file of the given size. Read, not mapped:
 * walship never rewrites a published file, but someone else may (a cp over
 * the sink truncates first), and a mapping past a shrunk end is SIGBUS for
 * the whole process; here it is an error naming the size.
 */
int file_etag_of_fd(int fd, uint64_t size, struct ws_etag *out)
{
	enum { CHUNK = 1 << 20 };
	struct ws_xxh_state st;
	uint8_t *buf;
	uint64_t off = 0;
	int rc = 0;

	if (size == 0) {
		file_etag_make(ws_xxh64("", 0), 0, out);
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
	file_etag_make(ws_xxh_digest(&st), size, out);
	return 0;
}

bool file_reserved_segment(const char *seg)
{
	return strncmp(seg, TMP_PREFIX, strlen(TMP_PREFIX)) == 0 ||
	       strncmp(seg, LOCK_PREFIX, strlen(LOCK_PREFIX)) == 0;
}

int file_check_key(const struct file_store *fs, const char *op, const char *key)
{
	if (!key)
		return ws_fail(-EINVAL, "file store %s: %s: key is NULL", fs->root, op);
	if (!ws_key_valid(key))
		return ws_fail(-EINVAL, "file store %s: %s: invalid key \"%.*s\"", fs->root, op,
			       WS_KEY_MAX, key);
	for (const char *p = key; p; p = strchr(p, '/'), p = p ? p + 1 : NULL) {
		size_t seg_len = strcspn(p, "/");
		if (file_reserved_segment(p))
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
const char *file_split_key(const char *key, char dir[WS_KEY_MAX])
{
	const char *slash = strrchr(key, '/');

	if (!slash) {
		dir[0] = '\0';
		return key;
	}
	/* A valid key (file_check_key) is shorter than WS_KEY_MAX: so is its directory. */
	WS_ASSERT((size_t)(slash - key) < WS_KEY_MAX);
	memcpy(dir, key, (size_t)(slash - key));
	dir[slash - key] = '\0';
	return slash + 1;
}

int file_open_dir_at(int at_fd, const char *rel)
{
	return openat(at_fd, rel[0] ? rel : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static int fsync_dir_at(int at_fd, const char *rel)
{
	int fd = file_open_dir_at(at_fd, rel), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

const char *file_type_name(mode_t mode)
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
int file_why_not_opened(const struct file_store *fs, const char *op, const char *key, int at_fd,
			const char *name, const char *shown, int shown_len, int err)
{
	struct stat st;

	if ((err == ELOOP || err == ENOTDIR || err == ENXIO) &&
	    fstatat(at_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) &&
	    !S_ISREG(st.st_mode))
		return file_fail_key(WS_EFORMAT, fs, op, key, "%.*s is %s; the file store follows and opens "
				"only directories and regular files", shown_len, shown, file_type_name(st.st_mode));
	return -err;
}

/*
 * Opens directory rel ("" = the root) one segment at a time, following no
 * symbolic link. Returns 0, -ENOENT or -ENOTDIR (a segment is missing or a
 * regular file: no such directory, nothing reported), WS_EFORMAT (reported:
 * a segment is a link or another foreign entry), or another -errno.
 */
int file_open_dir_nofollow(const struct file_store *fs, const char *op, const char *key, const char *rel,
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
			rc = file_why_not_opened(fs, op, key, cur, seg, rel, (int)(start + n), errno);
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
int file_open_reg_at(const struct file_store *fs, const char *op, const char *key, int dir_fd,
		     const char *name, int *out_fd, struct stat *st)
{
	int fd, rc;

	if (fstatat(dir_fd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (S_ISDIR(st->st_mode))
		return -EISDIR;
	if (!S_ISREG(st->st_mode))
		return file_fail_key(WS_EFORMAT, fs, op, key, "is %s, not an object; the file store opens only "
				"regular files", file_type_name(st->st_mode));
	fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return file_why_not_opened(fs, op, key, dir_fd, name, key, (int)strlen(key), errno);
	/* Swapped since the fstatat: check what was opened. */
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		rc = S_ISDIR(st->st_mode) ? -EISDIR : file_fail_key(WS_EFORMAT, fs, op, key, "is not a regular file");
		close(fd);
		return rc;
	}
	*out_fd = fd;
	return 0;
}

/* ---- open, close ------------------------------------------------------------ */

static void file_close(struct ws_store *s)
{
	struct file_store *fs = file_store_of(s);

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
	.get_changed = file_get_changed,
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
	fd = file_open_dir_at(dir_fd, "");
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
