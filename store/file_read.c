/*
 * The file:// backend's reads: get (a range of one published object),
 * head, and list (a sorted walk of the tree, skipping temp and lock files
 * and anything neither a directory nor a regular file).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ws_hash.h"
#include "ws_assert.h"
#include "ws_logging.h"

/*
 * Opens a published object; WS_ENOTFOUND when there is none (or a directory
 * has the name); WS_EFORMAT when a link, FIFO, device or socket is on its
 * path (never followed or opened).
 */
static int open_obj(const struct file_store *fs, const char *op, const char *key, int *out_fd,
		    struct stat *st)
{
	char dir[WS_KEY_MAX];
	const char *name = file_split_key(key, dir);
	int dir_fd = -1, rc;

	rc = file_open_dir_nofollow(fs, op, key, dir, &dir_fd);
	if (rc == 0) {
		rc = file_open_reg_at(fs, op, key, dir_fd, name, out_fd, st);
		close(dir_fd);
	}
	if (rc == -ENOENT || rc == -ENOTDIR || rc == -EISDIR)
		return file_fail_key(WS_ENOTFOUND, fs, op, key, "no such object");
	if (rc && rc != WS_EFORMAT)
		return file_fail_key(rc, fs, op, key, "cannot open: %s", strerror(-rc));
	return rc;
}

/* The range off/len of the object open as fd (st its stat), appended to out. */
static int read_open(struct file_store *fs, const char *key, int fd, const struct stat *st, uint64_t off,
		     uint64_t len, struct ws_buf *out, struct ws_obj_info *info)
{
	uint64_t size, n = 0, got = 0;
	uint8_t *dst;
	int rc;

	size = (uint64_t)st->st_size;
	if (off < size)
		n = len < size - off ? len : size - off;
	if (n > SIZE_MAX) {
		rc = file_fail_key(WS_ETOOBIG, fs, "get", key, "range of %" PRIu64 " bytes", n);
		return rc;
	}
	rc = ws_buf_reserve(out, (size_t)n);
	if (rc) {
		rc = file_fail_key(rc, fs, "get", key, "cannot hold %" PRIu64 " bytes at offset %" PRIu64
			      " (buffer max %zu)", n, off, out->max);
		return rc;
	}
	/* ws_buf_reserve made room for the whole range: the reads below stay in it. */
	WS_ASSERT(n == 0 || out->cap - out->len >= n);
	dst = n ? out->data + out->len : NULL;
	while (got < n) {
		ssize_t r = pread(fd, dst + got, (size_t)(n - got), (off_t)(off + got));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			rc = file_fail_key(-errno, fs, "get", key, "read failed: %s", strerror(errno));
			return rc;
		}
		if (r == 0) {
			/* Published objects never shrink; something outside walship truncated it. */
			rc = file_fail_key(-EIO, fs, "get", key, "object shrank while reading "
				      "(%" PRIu64 " of %" PRIu64 " bytes)", got, n);
			return rc;
		}
		got += (uint64_t)r;
	}
	WS_ASSERT(got == n); /* pread never returns more than asked */
	if (info) {
		info->size_bytes = size;
		info->mtime_ms = file_mtime_ms(st);
		if (off == 0 && n == size && n > 0)
			file_etag_make(ws_xxh64(dst, (size_t)n), size, &info->etag);
		else if ((rc = file_etag_of_fd(fd, size, &info->etag)) != 0)
			return file_fail_key(rc, fs, "get", key, "cannot hash object: %s", strerror(-rc));
	}
	out->len += (size_t)n;
	return 0;
}

int file_get(struct ws_store *s, const char *key, uint64_t off, uint64_t len,
	     struct ws_buf *out, struct ws_obj_info *info)
{
	struct file_store *fs = file_store_of(s);
	struct stat st;
	int fd = -1, rc;

	rc = file_check_key(fs, "get", key);
	if (rc)
		return rc;
	if (!out)
		return file_fail_key(-EINVAL, fs, "get", key, "no output buffer");
	rc = open_obj(fs, "get", key, &fd, &st);
	if (rc)
		return rc;
	rc = read_open(fs, key, fd, &st, off, len, out, info);
	close(fd);
	return rc;
}

/* The validator of a published file (ws_store_ops.get_changed): a new copy
 * is renamed over the old one, so its inode is new; the times and size
 * catch an inode number the file system hands out again. */
static void file_validator(const struct stat *st, struct ws_etag *out)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->s, sizeof(out->s), "f%llx.%llx.%llx.%lld.%ld.%lld.%ld", (unsigned long long)st->st_dev,
		 (unsigned long long)st->st_ino, (unsigned long long)st->st_size, (long long)st->st_mtim.tv_sec,
		 (long)st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, (long)st->st_ctim.tv_nsec);
}

int file_get_changed(struct ws_store *s, const char *key, struct ws_etag *tag, struct ws_buf *out)
{
	struct file_store *fs = file_store_of(s);
	struct ws_etag now;
	struct stat st;
	int fd = -1, rc;

	rc = file_check_key(fs, "get", key);
	if (rc)
		return rc;
	if (!out || !tag)
		return file_fail_key(-EINVAL, fs, "get", key, "no output buffer or validator");
	rc = open_obj(fs, "get", key, &fd, &st);
	if (rc)
		return rc;
	/* The stat and the read are of one open file: the bytes are the copy
	 * the validator names, whatever is renamed over the name meanwhile. */
	file_validator(&st, &now);
	if (tag->s[0] && strcmp(tag->s, now.s) == 0) {
		close(fd);
		return 1;
	}
	rc = read_open(fs, key, fd, &st, 0, UINT64_MAX, out, NULL);
	close(fd);
	if (rc == 0)
		*tag = now;
	return rc;
}

int file_head(struct ws_store *s, const char *key, struct ws_obj_info *info)
{
	struct file_store *fs = file_store_of(s);
	struct stat st;
	int fd = -1, rc;

	rc = file_check_key(fs, "head", key);
	if (rc)
		return rc;
	rc = open_obj(fs, "head", key, &fd, &st);
	if (rc)
		return rc;
	if (info) {
		info->size_bytes = (uint64_t)st.st_size;
		info->mtime_ms = file_mtime_ms(&st);
		rc = file_etag_of_fd(fd, (uint64_t)st.st_size, &info->etag);
		if (rc)
			rc = file_fail_key(rc, fs, "head", key, "cannot hash object: %s", strerror(-rc));
	}
	close(fd);
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
	fd = file_open_dir_at(dir_fd, "");
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
		    file_reserved_segment(de->d_name))
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
					file_type_name(st.st_mode));
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

int file_list(struct ws_store *s, const char *prefix, const char *token, unsigned max_keys,
	      struct ws_list_page *out)
{
	struct file_store *fs = file_store_of(s);
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
	/* The walk stops once it holds one key past the page (to know more follow). */
	WS_ASSERT(c.count <= c.want);
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
