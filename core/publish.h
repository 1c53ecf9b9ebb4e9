/* Checking a restore's output path and publishing its image (publish.c). */
#ifndef WS_CORE_PUBLISH_H
#define WS_CORE_PUBLISH_H

#include "core_internal.h"

/*
 * Checks before a restore writes anything: a valid tenant name and a usable
 * output (ws_restore_check_output). Errors: WS_ECONFIG, -EEXIST, -errno.
 */
int ws_restore_prepare(struct ws_store *s, const char *tenant, const char *out_path, bool force) WS_MUST_CHECK;
/*
 * out_path may receive a restore from store s: a non-empty path whose file
 * name fits NAME_MAX (else WS_ECONFIG); nothing there, or with force a
 * regular file without a -wal or hot -journal beside it; and not inside s
 * when s is a file:// sink (else -EEXIST, or the -errno of a lookup).
 */
int ws_restore_check_output(struct ws_store *s, const char *out_path, bool force) WS_MUST_CHECK;
/* Create the temporary image next to out_path (*tmp malloc'd, *fd open). */
int ws_restore_tmp_open(const char *out_path, char **tmp, int *fd) WS_MUST_CHECK;

/*
 * End a restore: close fd; when rc is 0 publish tmp at out_path
 * (ws_restore_publish); unlink tmp unless published; free it. Returns rc or
 * the publish error (wrapped with the tenant).
 */
int ws_restore_end(int fd, char *tmp, const char *out_path, bool force, const char *tenant, int rc) WS_MUST_CHECK;

/*
 * Publish a finished image: integrity check, then rename (force) or link
 * to out_path, fsync its directory. Used by restore and checkpoint restore.
 */
int ws_restore_publish(const char *tmp, const char *out_path, bool force) WS_MUST_CHECK;

/* PRAGMA integrity_check of the database at path: 0, WS_ECORRUPT or an error. */
int ws_image_integrity_check(const char *path) WS_MUST_CHECK;
/* A temporary file under TMPDIR for an image verify checks (*tmp malloc'd);
 * what: the object it is for, in the error. */
int ws_verify_tmp_open(const char *what, char **tmp, int *fd) WS_MUST_CHECK;
/* When rc says the image verify built in tmp did not fit: say where and what to do. */
void ws_verify_no_room(int rc, const char *tmp);

#endif
