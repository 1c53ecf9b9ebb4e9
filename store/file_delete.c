/*
 * The file:// backend's delete, and the directory prune that removes what
 * deleting a directory's last object leaves, never racing a writer.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* renameat2, O_DIRECTORY, struct dirent d_type */
#endif
#include "file_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ws_fault.h"
#include "ws_assert.h"
#include "ws_logging.h"

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
	base = file_split_key(rel, parent);
	if (file_open_dir_nofollow(fs, "prune", rel, parent, &pfd) != 0)
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
			/* seen < LOCK_STRIPES and the name's length were checked above. */
			WS_ASSERT(nlocks < LOCK_STRIPES && strlen(de->d_name) < sizeof(names[0]));
			memcpy(names[nlocks], de->d_name, strlen(de->d_name) + 1);
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

int file_del(struct ws_store *s, const char *key)
{
	struct file_store *fs = file_store_of(s);
	char dir[WS_KEY_MAX];
	const char *name;
	int dir_fd = -1, lock_fd = -1, rc;

	rc = file_check_key(fs, "delete", key);
	if (rc)
		return rc;
	name = file_split_key(key, dir);
	rc = file_open_dir_nofollow(fs, "delete", key, dir, &dir_fd);
	if (rc == -ENOENT || rc == -ENOTDIR)
		return 0;
	if (rc == WS_EFORMAT)
		return rc;
	if (rc)
		return file_fail_key(rc, fs, "delete", key, "cannot open directory: %s", strerror(-rc));
	{
		/* Only an object is deleted; whatever else holds the name is named. */
		struct stat st;
		if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			rc = errno == ENOENT ? 0 : file_fail_key(-errno, fs, "delete", key, "cannot stat: %s",
							    strerror(errno));
			close(dir_fd);
			return rc;
		}
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
			rc = file_fail_key(WS_EFORMAT, fs, "delete", key, "is %s, not an object; not deleted",
				      file_type_name(st.st_mode));
			close(dir_fd);
			return rc;
		}
	}
	/* The lock keeps a delete from landing between a CAS's compare and its rename. */
	if ((rc = WS_FAULT("file.del.before_lock")) != 0) {
		rc = file_fail_key(rc, fs, "delete", key, "injected fault before its lock");
		goto fail;
	}
	rc = file_lock_key(fs, "delete", key, dir_fd, name, &lock_fd);
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
		rc = file_fail_key(-errno, fs, "delete", key, "unlink failed: %s", strerror(errno));
		goto fail;
	}
	if (fsync(dir_fd) < 0) {
		rc = file_fail_key(-errno, fs, "delete", key, "fsync of directory failed: %s",
			      strerror(errno));
		goto fail;
	}
	file_unlock_key(lock_fd);
	lock_fd = -1;
	close(dir_fd);
	dir_fd = -1;
	prune_dirs(fs, dir);
done:
	rc = 0;
fail:
	file_unlock_key(lock_fd);
	if (dir_fd >= 0)
		close(dir_fd);
	return rc;
}
