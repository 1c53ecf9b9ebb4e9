/*
 * What the end-to-end file:// benchmarks (bench_e2e, bench_cli) share: a
 * real SQLite WAL to ship, and the write+fdatasync+rename+directory-fsync
 * baseline that every file:// figure is a ratio against.
 */
#ifndef WS_BENCH_WALFILE_H
#define WS_BENCH_WALFILE_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#define BENCH_WAL_HDR_BYTES 32u
#define BENCH_FRAME_HDR_BYTES 24u

/*
 * Writes committed WAL (transactions of ~1 MiB of random rows) into a new
 * database at db_path, WAL mode, autocheckpoint off, until wal_path holds at
 * least want_bytes. Returns the writer, still open: while it is, no other
 * connection's close checkpoints the WAL away, and its own close leaves it.
 */
sqlite3 *bench_make_wal(const char *db_path, const char *wal_path, uint64_t want_bytes, unsigned page_size);
/* Size of a file, 0 when it cannot be stat()ed. */
uint64_t bench_file_bytes(const char *path);
/* Reads the whole file once so it is in the page cache. */
void bench_warm(const char *path, uint8_t *buf, size_t buf_bytes);
/* mkdir, then fsync of its parent. */
void bench_mkdir_durable(const char *path);
/* rm -rf (no symbolic links followed). */
void bench_rm_rf(const char *path);
/* "a/b", malloc()ed. */
char *bench_path_join(const char *a, const char *b);
/* "ext4", "tmpfs (fsync is free)", ... for the filesystem holding path. */
const char *bench_fs_name(const char *path);

struct bench_baseline {
	double seconds;
	uint64_t files;
	uint64_t fsyncs; /* fdatasync of each file + fsync of the directory after each rename */
};

/*
 * The baseline: wal_bytes of wal_path, read with pread in chunks of
 * chunk_bytes (buf holds one), each written to a temp file in dir (created
 * here, durably) with write + fdatasync + rename + fsync of the directory:
 * what the file sink's put does, without anything else. Timed from the
 * first pread to the last directory fsync.
 */
struct bench_baseline bench_run_baseline(const char *wal_path, uint64_t wal_bytes, size_t chunk_bytes,
					 const char *dir, uint8_t *buf);

#endif
