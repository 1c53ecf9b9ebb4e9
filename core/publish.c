/*
 * Where a restored image goes: checks on the output path before anything is
 * written, the temporary file next to it, and publishing the finished image
 * (PRAGMA integrity_check, fsync, rename or link, directory fsync): a restore
 * that cannot prove its result complete leaves nothing at the output path.
 * Also the temporary file verify builds an image in.
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

#include "publish.h"
#include "ws_assert.h"

int ws_image_integrity_check(const char *path)
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
	int rc = ws_image_integrity_check(tmp);
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
	/* Durability order: the image was fsynced and checked before it was
	 * put in place; its directory entry is made durable last. */
	WS_ASSERT(rc == 0);
	rc = fsync_dir_of(out_path);
	if (rc)
		ws_fail(rc, "%s is in place, but its directory could not be fsynced: it may not survive a crash "
			"of this machine (restore again with --force)", out_path);
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

/* A temporary file under TMPDIR for an image verify checks (*tmp malloc'd). */
int ws_verify_tmp_open(const char *what, char **tmp, int *fd)
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
void ws_verify_no_room(int rc, const char *tmp)
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
