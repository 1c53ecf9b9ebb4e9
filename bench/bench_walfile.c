#include "bench_walfile.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "bench_util.h"

uint64_t bench_file_bytes(const char *path)
{
	struct stat sb;
	if (stat(path, &sb) < 0)
		return 0;
	return (uint64_t)sb.st_size;
}

static void sql(sqlite3 *db, const char *s)
{
	char *msg = NULL;
	if (sqlite3_exec(db, s, NULL, NULL, &msg) != SQLITE_OK)
		bench_die("sqlite: %s: %s", s, msg ? msg : sqlite3_errmsg(db));
}

sqlite3 *bench_make_wal(const char *db_path, const char *wal_path, uint64_t want_bytes, unsigned page_size)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *ins = NULL;
	char pragma[64];

	if (sqlite3_open(db_path, &db) != SQLITE_OK)
		bench_die("sqlite: open %s: %s", db_path, db ? sqlite3_errmsg(db) : "out of memory");
	/* Closing must leave the WAL alone (the bench deletes it anyway). */
	sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, (int *)NULL);
	snprintf(pragma, sizeof(pragma), "PRAGMA page_size=%u;", page_size);
	sql(db, pragma);
	sql(db, "PRAGMA journal_mode=WAL;");
	sql(db, "PRAGMA wal_autocheckpoint=0;");
	sql(db, "PRAGMA synchronous=OFF;"); /* the writer's speed is not what is measured */
	sql(db, "PRAGMA cache_size=-65536;");
	sql(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);");
	if (sqlite3_prepare_v2(db,
			       "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1200) "
			       "INSERT INTO t(v) SELECT randomblob(800) FROM c;",
			       -1, &ins, NULL) != SQLITE_OK)
		bench_die("sqlite: prepare: %s", sqlite3_errmsg(db));
	while (bench_file_bytes(wal_path) < want_bytes) {
		if (sqlite3_step(ins) != SQLITE_DONE)
			bench_die("sqlite: insert: %s", sqlite3_errmsg(db));
		sqlite3_reset(ins);
	}
	sqlite3_finalize(ins);
	return db;
}

void bench_warm(const char *path, uint8_t *buf, size_t buf_bytes)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		bench_die("open %s: %s", path, strerror(errno));
	while (read(fd, buf, buf_bytes) > 0)
		;
	close(fd);
}

void bench_mkdir_durable(const char *path)
{
	char parent[PATH_MAX];
	char *slash;
	int fd;
	if (mkdir(path, 0755) < 0)
		bench_die("mkdir %s: %s", path, strerror(errno));
	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (slash && slash != parent)
		*slash = '\0';
	fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		bench_die("fsync %s: %s", parent, strerror(errno));
	close(fd);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	if (remove(path) < 0 && errno != ENOENT)
		fprintf(stderr, "%s: cannot remove %s: %s\n", program_invocation_short_name, path, strerror(errno));
	return 0;
}

void bench_rm_rf(const char *path)
{
	nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS);
}

char *bench_path_join(const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 2;
	char *p = malloc(n);
	if (!p)
		bench_die("out of memory");
	snprintf(p, n, "%s/%s", a, b);
	return p;
}

const char *bench_fs_name(const char *path)
{
	struct statfs sf;
	if (statfs(path, &sf) < 0)
		return "?";
	switch ((unsigned long)sf.f_type) {
	case 0xEF53: return "ext4";
	case 0x58465342: return "xfs";
	case 0x9123683E: return "btrfs";
	case 0x01021994: return "tmpfs (fsync is free)";
	case 0x794c7630: return "overlayfs";
	default: return "other";
	}
}

struct bench_baseline bench_run_baseline(const char *wal_path, uint64_t wal_bytes, size_t chunk_bytes,
					 const char *dir, uint8_t *buf)
{
	struct bench_baseline r = { 0, 0, 0 };
	int wal_fd, dir_fd;
	double t0;

	bench_mkdir_durable(dir);
	wal_fd = open(wal_path, O_RDONLY | O_CLOEXEC);
	dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (wal_fd < 0 || dir_fd < 0)
		bench_die("open %s / %s: %s", wal_path, dir, strerror(errno));

	t0 = bench_now_s();
	for (uint64_t off = 0; off < wal_bytes; off += chunk_bytes) {
		size_t n = wal_bytes - off < chunk_bytes ? (size_t)(wal_bytes - off) : chunk_bytes;
		char tmp[64], name[64];
		size_t done = 0;
		int fd;

		while (done < n) {
			ssize_t got = pread(wal_fd, buf + done, n - done, (off_t)(off + done));
			if (got <= 0)
				bench_die("pread %s: %s", wal_path, got < 0 ? strerror(errno) : "short file");
			done += (size_t)got;
		}
		snprintf(tmp, sizeof(tmp), ".tmp.%" PRIu64, r.files);
		snprintf(name, sizeof(name), "b%016" PRIu64, r.files);
		fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0)
			bench_die("create %s/%s: %s", dir, tmp, strerror(errno));
		for (done = 0; done < n;) {
			ssize_t put = write(fd, buf + done, n - done);
			if (put < 0)
				bench_die("write %s/%s: %s", dir, tmp, strerror(errno));
			done += (size_t)put;
		}
		if (fdatasync(fd) < 0)
			bench_die("fdatasync %s/%s: %s", dir, tmp, strerror(errno));
		close(fd);
		if (renameat(dir_fd, tmp, dir_fd, name) < 0)
			bench_die("rename %s/%s: %s", dir, tmp, strerror(errno));
		if (fsync(dir_fd) < 0)
			bench_die("fsync %s: %s", dir, strerror(errno));
		r.files++;
		r.fsyncs += 2;
	}
	r.seconds = bench_now_s() - t0;
	close(dir_fd);
	close(wal_fd);
	return r;
}
