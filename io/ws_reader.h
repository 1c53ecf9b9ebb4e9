/*
 * WAL reader: io_uring with one registered buffer and registered (fixed) files,
 * falling back to pread(2) where io_uring cannot be set up.
 *
 * The reader owns one page-aligned buffer of buf_bytes. Reads land in it and
 * callers verify and upload straight from it, so a frame is read once and
 * never copied on its way to the sink. The path in use is reported by
 * ws_reader_backend() and logged once at open, never chosen silently.
 *
 * Not thread-safe: one reader per shard (or per stream).
 */
#ifndef WS_READER_H
#define WS_READER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ws_fail.h"

enum ws_reader_backend {
	WS_READER_URING = 0,  /* io_uring, registered buffer, fixed file */
	WS_READER_PREAD = 1,  /* fallback */
};

enum {
	WS_READER_FORCE_PREAD = 1u << 0, /* skip io_uring (tests, operators) */
	WS_READER_SQPOLL = 1u << 1,      /* ask for a kernel SQ polling thread */
};

struct ws_reader_stats {
	uint64_t reads;       /* read requests completed */
	uint64_t bytes;       /* bytes read */
	uint64_t submits;     /* io_uring_enter / pread system calls made */
};

struct ws_reader;

/*
 * Create a reader with a buffer of buf_bytes (rounded up to 4096) and room for
 * files_max fixed files. Falls back to pread when io_uring setup or buffer
 * registration fails, logging why.
 * Errors (in *err, NULL returned): -ENOMEM, -EINVAL (buf_bytes or files_max 0).
 */
struct ws_reader *ws_reader_open(size_t buf_bytes, unsigned files_max, unsigned flags, int *err);
/*
 * A reader over memory the caller owns (page aligned, bytes a multiple of
 * 4096), registered with a ring of its own: a second thread can read into
 * the same memory as another reader, each with its own ring. The memory
 * is not freed at close. Errors as ws_reader_open, and -EINVAL for
 * unaligned memory.
 */
struct ws_reader *ws_reader_open_over(uint8_t *mem, size_t bytes, unsigned files_max, unsigned flags, int *err);
void ws_reader_close(struct ws_reader *r);

enum ws_reader_backend ws_reader_backend(const struct ws_reader *r);
const char *ws_reader_backend_name(const struct ws_reader *r); /* "io_uring" | "pread" */
uint8_t *ws_reader_buf(struct ws_reader *r);
size_t ws_reader_buf_bytes(const struct ws_reader *r);
void ws_reader_get_stats(const struct ws_reader *r, struct ws_reader_stats *out);

/*
 * Register fd in a fixed-file slot; returns the slot (>= 0) to pass to
 * ws_reader_read. The caller keeps owning fd and must ws_reader_detach before
 * closing it. Errors: -ENOSPC (all slots used), or the kernel's error.
 */
int ws_reader_attach(struct ws_reader *r, int fd) WS_MUST_CHECK;
void ws_reader_detach(struct ws_reader *r, int slot);

/*
 * Read up to len bytes at file offset off into the buffer at buf_off,
 * synchronously: submit and wait, one request in flight at a time (a read
 * that returns has landed; nothing completes behind the caller's back).
 * buf_off + len must fit in the buffer. Short reads at end of file are not
 * errors: the return value is the byte count (0 at EOF). Loops over partial
 * completions until len bytes or EOF. Errors: negative errno.
 */
ssize_t ws_reader_read(struct ws_reader *r, int slot, uint64_t off, size_t buf_off, size_t len) WS_MUST_CHECK;

#endif
