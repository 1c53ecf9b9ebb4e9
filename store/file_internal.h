/*
 * The file:// backend's internals, shared by its four files: store_file.c
 * (the durable write path: temp file, sync, publish, directory sync),
 * file_read.c (get, head, list), file_delete.c (delete and the directory
 * prune) and file_open.c (keys, paths, etags, open and close).
 * store_file.c's header is the layout and the durability rules.
 */
#ifndef WS_FILE_INTERNAL_H
#define WS_FILE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "ws_store.h"

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

#define DIR_OPEN_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)

/* ---- file_open.c: keys, paths, etags ---- */

struct file_store *file_store_of(struct ws_store *s);
/* ws_fail(err) naming the operation, the key and its path, with fmt's why. */
int file_fail_key(int err, const struct file_store *fs, const char *op, const char *key, const char *fmt, ...)
	WS_PRINTF(5, 6);
int64_t file_mtime_ms(const struct stat *st);
void file_etag_make(uint64_t h, uint64_t size, struct ws_etag *out);
/* Etag of an open, published file of the given size (read, never mapped). */
int file_etag_of_fd(int fd, uint64_t size, struct ws_etag *out);
/* A segment the store keeps for itself (".tmp.", ".lock."): never a key's, never listed. */
bool file_reserved_segment(const char *seg);
/* 0, or -EINVAL naming why key cannot be one of this store's. */
int file_check_key(const struct file_store *fs, const char *op, const char *key);
/* Splits a valid key into its directory part ("" at the root) and its last segment. */
const char *file_split_key(const char *key, char dir[WS_KEY_MAX]);
int file_open_dir_at(int at_fd, const char *rel);
const char *file_type_name(mode_t mode);
/* Why openat(O_NOFOLLOW) of name in at_fd failed with err: WS_EFORMAT for a foreign entry, else -err. */
int file_why_not_opened(const struct file_store *fs, const char *op, const char *key, int at_fd,
			const char *name, const char *shown, int shown_len, int err);
/* Directory rel ("" = the root), opened one segment at a time following no link. */
int file_open_dir_nofollow(const struct file_store *fs, const char *op, const char *key, const char *rel,
			   int *out_fd);
/* A regular file name in dir_fd, opened without following a link or opening a FIFO. */
int file_open_reg_at(const struct file_store *fs, const char *op, const char *key, int dir_fd,
		     const char *name, int *out_fd, struct stat *st);

/* ---- store_file.c: the lock stripes that delete shares ---- */

/* Take the lock stripe of name in dir_fd: *out_fd holds it until file_unlock_key. */
int file_lock_key(const struct file_store *fs, const char *op, const char *key, int dir_fd, const char *name,
		  int *out_fd);
void file_unlock_key(int fd);

/* ---- the ops (file_open.c's table) ---- */

int file_put(struct ws_store *s, const char *key, const struct iovec *iov, int iovcnt, enum ws_put_mode mode,
	     const struct ws_etag *expect, struct ws_etag *out_etag);
int file_put_many(struct ws_store *s, struct ws_put_req *reqs, size_t n);
int file_get(struct ws_store *s, const char *key, uint64_t off, uint64_t len, struct ws_buf *out,
	     struct ws_obj_info *info);
int file_get_changed(struct ws_store *s, const char *key, struct ws_etag *tag, struct ws_buf *out);
int file_head(struct ws_store *s, const char *key, struct ws_obj_info *info);
int file_list(struct ws_store *s, const char *prefix, const char *token, unsigned max_keys,
	      struct ws_list_page *out);
int file_del(struct ws_store *s, const char *key);

#endif
