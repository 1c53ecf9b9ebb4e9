/*
 * Crash test with the real binary: `walship replicate` is killed with
 * SIGKILL at random moments, or kills itself at a fault site in the middle
 * of its upload protocol (WS_FAULT=site:nth:crash), again and again, and
 * after every death a restore must yield exactly a state the source
 * committed, no older than the last acknowledged one, never torn; and
 * `walship verify` must pass (a crash at any instant leaves the sink
 * restorable).
 *
 * The writer lives in this process (libsqlite3). Every transaction bumps
 * meta.n, and the content hash of the database after each commit is
 * recorded at index n, so a restored file names its own index and must
 * hash to exactly the recorded state there.
 *
 * "Acknowledged": a `replicate --once` that exits 0 while the writer is
 * idle must restore to the latest state, and so must a killed run that had
 * already printed an outcome line (each one follows a watermark write) with
 * the writer idle. A restore can never go back: each restored index becomes
 * the new floor.
 *
 * The concurrent variant runs the writer in a forked child that commits for
 * about 100 ms while the replicator runs, logging (n, hash) per commit to a
 * file, and kills the replicator in the middle of it.
 *
 * WS_CRASH_ITERS (default 40) and WS_CRASH_SEED make longer soaks and
 * replays; the seed is printed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define TENANT "crash"
#define STATES_MAX 200000

/* ---- state fingerprints ------------------------------------------------ */

/* Fold one row into the hash at arg, column types and bytes included. */
static void hash_row(sqlite3_stmt *st, void *arg)
{
	uint64_t *h = arg;
	int n = sqlite3_column_count(st);
	wt_fnv(h, "R", 1);
	for (int i = 0; i < n; i++) {
		int t = sqlite3_column_type(st, i);
		int64_t v;
		size_t len;
		wt_fnv(h, &t, sizeof(t));
		switch (t) {
		case SQLITE_INTEGER:
			v = sqlite3_column_int64(st, i);
			wt_fnv(h, &v, sizeof(v));
			break;
		case SQLITE_TEXT:
		case SQLITE_BLOB:
			len = (size_t)sqlite3_column_bytes(st, i);
			wt_fnv(h, &len, sizeof(len));
			if (len)
				wt_fnv(h, sqlite3_column_blob(st, i), len);
			break;
		default:
			break;
		}
	}
}

/* Content hash of the whole database; -1 on a query error. */
static int db_state(sqlite3 *db, int64_t *n, uint64_t *hash)
{
	static const char *const q[] = {
		"SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master ORDER BY name",
		"SELECT * FROM meta",
		"SELECT * FROM t ORDER BY id",
	};
	sqlite3_stmt *st = NULL;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++)
		if (wt_each_row(db, q[i], hash_row, &h) != SQLITE_OK)
			return -1;
	if (sqlite3_prepare_v2(db, "SELECT n FROM meta", -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_finalize(st);
		return -1;
	}
	*n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	*hash = h;
	return 0;
}

/* ---- the test's world -------------------------------------------------- */

struct world {
	uint64_t seed, rng;
	char *bin;
	char *wal_path, *cfg_path;
	char *dir, *src, *sink_dir, *sink_url, *out_path, *json_path, *err_path, *log_path, *cmd_err;
	sqlite3 *w;
	uint64_t *states;           /* hash at index n */
	int64_t latest;             /* index of the newest committed state */
	int64_t acked;              /* floor for every later restore; -1 none */
	int64_t max_id;
	/* statistics */
	unsigned killed_by_test, killed_by_fault, once_ok, json_acked, restore_latest, restore_older,
		restore_none, concurrent, ckpt_busy, ckpt_ok, verify_no_wm;
};

static bool trace_on;

static uint64_t rnd(struct world *wd, uint64_t n) { return n ? wt_rand(&wd->rng) % n : 0; }

static sqlite3 *writer_open_path(const char *path, int busy_ms)
{
	sqlite3 *db = NULL;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK)
		return NULL;
	sqlite3_busy_timeout(db, busy_ms);
	if (sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL", NULL, NULL, NULL) != SQLITE_OK) {
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

/*
 * One random transaction: inserts of random-size blobs (some overflow
 * pages), updates, range deletes that keep the table small, and meta.n+1.
 * Returns 0 and the new state, or an SQLite error (the caller decides).
 */
static int txn(sqlite3 *db, uint64_t *rng, int64_t *max_id, int64_t *n, uint64_t *hash)
{
	static uint8_t blob[200000];
	unsigned ops = 1 + (unsigned)(wt_rand(rng) % 12);
	sqlite3_stmt *ins = NULL, *upd = NULL, *del = NULL;
	int rc;

	rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		return rc;
	if ((rc = sqlite3_prepare_v2(db, "INSERT INTO t(id, v) VALUES(?, ?)", -1, &ins, NULL)) != SQLITE_OK ||
	    (rc = sqlite3_prepare_v2(db, "UPDATE t SET v = ? WHERE id = ?", -1, &upd, NULL)) != SQLITE_OK ||
	    (rc = sqlite3_prepare_v2(db, "DELETE FROM t WHERE id < ?", -1, &del, NULL)) != SQLITE_OK)
		goto out;
	for (unsigned i = 0; i < ops; i++) {
		uint64_t p = wt_rand(rng) % 100;
		size_t len = (size_t)(wt_rand(rng) % 100 < 90 ? wt_rand(rng) % 3000 : wt_rand(rng) % sizeof(blob));
		for (size_t k = 0; k < len; k += 8) {
			uint64_t x = wt_rand(rng);
			memcpy(blob + k, &x, len - k < 8 ? len - k : 8);
		}
		sqlite3_stmt *s;
		if (p < 70 || *max_id == 0) {
			s = ins;
			sqlite3_bind_int64(s, 1, ++*max_id);
			sqlite3_bind_blob(s, 2, blob, (int)len, SQLITE_STATIC);
		} else if (p < 95) {
			s = upd;
			sqlite3_bind_blob(s, 1, blob, (int)len, SQLITE_STATIC);
			sqlite3_bind_int64(s, 2, 1 + (int64_t)(wt_rand(rng) % (uint64_t)*max_id));
		} else {
			s = del;
			sqlite3_bind_int64(s, 1, *max_id - 300);
		}
		rc = sqlite3_step(s);
		sqlite3_reset(s);
		if (rc != SQLITE_DONE)
			goto out;
	}
	rc = sqlite3_exec(db, "UPDATE meta SET n = n + 1", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		goto out;
	rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		goto out;
	rc = db_state(db, n, hash) == 0 ? SQLITE_OK : SQLITE_ERROR;
out:
	if (rc != SQLITE_OK && sqlite3_get_autocommit(db) == 0)
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_finalize(ins);
	sqlite3_finalize(upd);
	sqlite3_finalize(del);
	return rc;
}

static void record_state(struct world *wd, int64_t n, uint64_t hash)
{
	if (n != wd->latest + 1 || n >= STATES_MAX)
		fail_msg("seed %" PRIu64 ": state %" PRId64 " recorded after %" PRId64, wd->seed, n, wd->latest);
	wd->states[n] = hash;
	wd->latest = n;
}

static void writer_txn(struct world *wd)
{
	int64_t n;
	uint64_t h;
	int rc = txn(wd->w, &wd->rng, &wd->max_id, &n, &h);
	if (rc != SQLITE_OK)
		fail_msg("seed %" PRIu64 ": writer transaction: %s", wd->seed, sqlite3_errmsg(wd->w));
	record_state(wd, n, h);
}

/* Ids only grow; after another process wrote, pick up where it stopped. */
static void writer_reopen(struct world *wd)
{
	sqlite3_stmt *st = NULL;
	if (wd->w)
		sqlite3_close(wd->w);
	wd->w = writer_open_path(wd->src, 0);
	assert_non_null(wd->w);
	assert_int_equal(sqlite3_prepare_v2(wd->w, "SELECT coalesce(max(id), 0) FROM t", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	if (sqlite3_column_int64(st, 0) > wd->max_id)
		wd->max_id = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
}

static void writer_checkpoint(struct world *wd)
{
	static const int modes[4] = { SQLITE_CHECKPOINT_PASSIVE, SQLITE_CHECKPOINT_FULL,
				      SQLITE_CHECKPOINT_RESTART, SQLITE_CHECKPOINT_TRUNCATE };
	int rc = sqlite3_wal_checkpoint_v2(wd->w, NULL, modes[rnd(wd, 4)], NULL, NULL);
	if (rc == SQLITE_OK)
		wd->ckpt_ok++;
	else if (rc == SQLITE_BUSY)
		wd->ckpt_busy++;
	else
		fail_msg("seed %" PRIu64 ": checkpoint: %s", wd->seed, sqlite3_errmsg(wd->w));
}

/* ---- processes --------------------------------------------------------- */

static pid_t spawn(char *const argv[], const char *out, const char *err, const char *fault)
{
	pid_t pid;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		fail_msg("fork: %s", strerror(errno));
	if (pid == 0) {
		int o = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		int e = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(126);
		if (fault)
			setenv("WS_FAULT", fault, 1);
		else
			unsetenv("WS_FAULT");
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* Wait up to ms for pid; returns true and *status if it ended. */
static bool wait_for(pid_t pid, int ms, int *status)
{
	int64_t deadline = wt_now_ms() + ms;
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r == pid)
			return true;
		if (r < 0)
			fail_msg("waitpid: %s", strerror(errno));
		if (wt_now_ms() >= deadline)
			return false;
		wt_sleep_ms(1);
	}
}

static int run_cmd(char *const argv[], const char *out, const char *err)
{
	int status;
	pid_t pid = spawn(argv, out, err, NULL);
	if (waitpid(pid, &status, 0) != pid)
		fail_msg("waitpid: %s", strerror(errno));
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static char *slurp(const char *path)
{
	size_t len = 0;
	uint8_t *b = wt_read_file(path, &len);
	char *s = malloc(len + 1);
	assert_non_null(s);
	if (b)
		memcpy(s, b, len);
	s[len] = '\0';
	free(b);
	return s;
}

/* Complete outcome lines the replicator printed (each after a watermark write or an empty call). */
static unsigned json_outcomes(const char *path)
{
	char *s = slurp(path);
	unsigned n = 0;
	for (char *line = s, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
		*nl = '\0';
		if (strstr(line, "\"outcome\":\"streamed\"") || strstr(line, "\"outcome\":\"restarted\"") ||
		    strstr(line, "\"outcome\":\"empty\""))
			n++;
		else if (*line && !strstr(line, "\"outcome\":\"error\""))
			fail_msg("replicator printed an unexpected line: %s", line);
	}
	free(s);
	return n;
}

static const char *const fault_sites[] = {
	"stream.before_batch_put",    "stream.before_manifest_put", "stream.before_watermark_put",
	"stream.after_watermark_put", "file.put.after_write",       "file.put.before_publish",
	"file.put.after_publish",
};

struct rep_result {
	bool died_by_kill;   /* SIGKILL from the test */
	bool died_by_fault;  /* SIGKILL from its own fault site */
	int exit_code;       /* when it exited */
	unsigned outcomes;   /* outcome lines printed */
};

/*
 * Run the replicator: once (wait for it), or until a random kill after
 * kill_ms, or with a fault site armed (killed anyway after kill_ms if the
 * site was never reached that often).
 */
static void replicate(struct world *wd, bool once, const char *fault, unsigned kill_ms, struct rep_result *res)
{
	char tenant_arg[4096];
	char *argv[14];
	int i = 0, status = 0;
	pid_t pid;

	memset(res, 0, sizeof(*res));
	snprintf(tenant_arg, sizeof(tenant_arg), TENANT "=%s", wd->src);
	argv[i++] = wd->bin;
	argv[i++] = (char *)"replicate";
	argv[i++] = (char *)"--sink";
	argv[i++] = wd->sink_url;
	argv[i++] = (char *)"--json";
	argv[i++] = (char *)"--interval-ms";
	argv[i++] = (char *)"5";
	argv[i++] = (char *)"--quiet";
	if (once)
		argv[i++] = (char *)"--once";
	/* Half the runs checkpoint the WAL themselves at a small size, so
	 * kills also land while the replicator holds the write lock or is
	 * in the middle of its own WAL checkpoint. */
	if (rnd(wd, 2)) {
		argv[i++] = (char *)"--config";
		argv[i++] = wd->cfg_path;
	}
	argv[i++] = tenant_arg;
	argv[i] = NULL;
	/* A child killed before it opens its output must not leave the last
	 * run's outcome lines to be read as its own. */
	unlink(wd->json_path);
	unlink(wd->err_path);
	pid = spawn(argv, wd->json_path, wd->err_path, fault);
	if (once) {
		if (!wait_for(pid, 60000, &status)) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			fail_msg("seed %" PRIu64 ": replicate --once hung", wd->seed);
		}
	} else if (!wait_for(pid, (int)kill_ms, &status)) {
		kill(pid, SIGKILL);
		if (waitpid(pid, &status, 0) != pid)
			fail_msg("waitpid: %s", strerror(errno));
		res->died_by_kill = true;
	}
	if (!res->died_by_kill) {
		if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && fault) {
			res->died_by_fault = true;
		} else if (WIFEXITED(status)) {
			res->exit_code = WEXITSTATUS(status);
		} else {
			char *err = slurp(wd->err_path);
			fail_msg("seed %" PRIu64 ": replicator died of signal %d; stderr: %s", wd->seed,
				 WIFSIGNALED(status) ? WTERMSIG(status) : -1, err);
		}
	}
	res->outcomes = json_outcomes(wd->json_path);
}

/* The live -wal file in a few words (its header generation and size). */
static const char *wal_desc(struct world *wd, char *buf, size_t cap)
{
	uint8_t hdr[32];
	struct stat sb;
	int fd = open(wd->wal_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(buf, cap, "no -wal file");
		return buf;
	}
	if (fstat(fd, &sb) != 0 || pread(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr)) {
		snprintf(buf, cap, "-wal file of %lld bytes (no header)", (long long)(fstat(fd, &sb) == 0 ? sb.st_size : -1));
	} else {
		snprintf(buf, cap, "-wal file of %lld bytes, checkpoint seq %u, salt1 %08x, inode %llu", (long long)sb.st_size,
			 (unsigned)hdr[12] << 24 | (unsigned)hdr[13] << 16 | (unsigned)hdr[14] << 8 | hdr[15],
			 (unsigned)hdr[16] << 24 | (unsigned)hdr[17] << 16 | (unsigned)hdr[18] << 8 | hdr[19],
			 (unsigned long long)sb.st_ino);
	}
	close(fd);
	return buf;
}

/*
 * Restore with the binary and check the invariants: a recorded state,
 * not torn, within [floor, latest]. Returns the restored index (-1 when
 * nothing was ever shipped, allowed only while nothing was acknowledged).
 */
static int64_t restore_check(struct world *wd, int64_t floor, const char *why)
{
	char *argv[] = { wd->bin, (char *)"restore", (char *)"--sink", wd->sink_url, (char *)"--tenant",
			 (char *)TENANT, (char *)"--force", (char *)"-o", wd->out_path, NULL };
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t n;
	uint64_t h;
	int rc;

	unlink(wd->out_path);
	rc = run_cmd(argv, "/dev/null", wd->cmd_err);
	if (rc != 0) {
		char *err = slurp(wd->cmd_err);
		if (floor < 0 && strstr(err, "no watermark")) {
			free(err);
			wd->restore_none++;
			return -1;
		}
		fail_msg("seed %" PRIu64 " (%s): restore exited %d with the floor at state %" PRId64 ": %s", wd->seed,
			 why, rc, floor, err);
	}
	if (sqlite3_open_v2(wd->out_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		fail_msg("seed %" PRIu64 " (%s): cannot open the restored file", wd->seed, why);
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	if (strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0)
		fail_msg("seed %" PRIu64 " (%s): restored file fails integrity_check: %s", wd->seed, why,
			 sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	if (db_state(db, &n, &h) != 0)
		fail_msg("seed %" PRIu64 " (%s): restored file cannot be read: %s", wd->seed, why, sqlite3_errmsg(db));
	sqlite3_close(db);
	if (n < 0 || n > wd->latest)
		fail_msg("seed %" PRIu64 " (%s): restored state %" PRId64 " was never committed (latest %" PRId64 ")",
			 wd->seed, why, n, wd->latest);
	if (h != wd->states[n])
		fail_msg("seed %" PRIu64 " (%s): restored file claims state %" PRId64 " but its content differs from "
			 "what was committed there (torn or mixed state)", wd->seed, why, n);
	if (n < floor) {
		char desc[160];
		char *json = slurp(wd->json_path);
		char *last = json, *p;
		/* The replicator's last outcome line, for the report. */
		while ((p = strchr(last, '\n')) != NULL && p[1])
			last = p + 1;
		fail_msg("seed %" PRIu64 " (%s): restore went back to state %" PRId64 ", below the acknowledged %" PRId64
			 " (latest %" PRId64 "); live %s; the replicator's last outcome: %s", wd->seed, why, n, floor,
			 wd->latest, wal_desc(wd, desc, sizeof(desc)), *last ? last : "(none)");
	}
	if (n == wd->latest)
		wd->restore_latest++;
	else
		wd->restore_older++;
	return n;
}

static void verify_check(struct world *wd, const char *why)
{
	char *argv[] = { wd->bin, (char *)"verify", (char *)"--sink", wd->sink_url, NULL };
	int rc = run_cmd(argv, "/dev/null", wd->cmd_err);
	if (rc != 0) {
		char *err = slurp(wd->cmd_err);
		char *wm = wt_path(wd->sink_dir, TENANT "/wm");
		bool no_wm = access(wm, F_OK) != 0;
		free(wm);
		/* Objects of a first attempt but no watermark yet: covered on its
		 * own by test_verify_before_first_watermark; not repeated here so
		 * the loop goes on to what it is for. */
		if (no_wm && wd->acked < 0) {
			free(err);
			wd->verify_no_wm++;
			return;
		}
		fail_msg("seed %" PRIu64 " (%s): verify exited %d after a crash: %s", wd->seed, why, rc, err);
	}
}

/* ---- setup ------------------------------------------------------------- */

static void world_init(struct world *wd, const char *tag, uint64_t seed)
{
	memset(wd, 0, sizeof(*wd));
	wd->seed = wd->rng = seed;
	wd->bin = getenv("WS_BIN");
	if (!wd->bin || access(wd->bin, X_OK) != 0)
		fail_msg("WS_BIN (the walship binary) is not set or not executable: %s", wd->bin ? wd->bin : "(unset)");
	wd->bin = strdup(wd->bin);
	assert_non_null(wd->bin);
	wd->dir = wt_tmpdir(tag);
	assert_non_null(wd->dir);
	wd->src = wt_path(wd->dir, "src.db");
	wd->wal_path = wt_path(wd->dir, "src.db-wal");
	wd->cfg_path = wt_path(wd->dir, "small-ckpt.ini");
	{
		static const char ini[] = "[engine]\nwal_checkpoint_bytes = 64KiB\n";
		assert_int_equal(wt_write_file(wd->cfg_path, ini, sizeof(ini) - 1), 0);
	}
	wd->sink_dir = wt_path(wd->dir, "sink");
	assert_true(asprintf(&wd->sink_url, "file://%s", wd->sink_dir) > 0);
	wd->out_path = wt_path(wd->dir, "restored.db");
	wd->json_path = wt_path(wd->dir, "replicate.json");
	wd->err_path = wt_path(wd->dir, "replicate.err");
	wd->log_path = wt_path(wd->dir, "writer.log");
	wd->cmd_err = wt_path(wd->dir, "cmd.err");
	wd->states = calloc(STATES_MAX, sizeof(*wd->states));
	assert_non_null(wd->states);
	wd->acked = -1;
	wd->latest = -1;
	trace_on = wt_env_u64("WS_CRASH_TRACE", 0) != 0;
	assert_int_equal(mkdir(wd->sink_dir, 0755), 0);

	wd->w = writer_open_path(wd->src, 0);
	assert_non_null(wd->w);
	wt_exec(wd->w, "CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB);"
			 "CREATE TABLE meta(n INTEGER NOT NULL);"
			 "INSERT INTO meta VALUES(0);");
	{
		int64_t n;
		uint64_t h;
		assert_int_equal(db_state(wd->w, &n, &h), 0);
		record_state(wd, n, h);
	}
}

static void world_free(struct world *wd, bool ok)
{
	if (wd->w)
		sqlite3_close(wd->w);
	if (ok)
		wt_rmrf(wd->dir);
	free(wd->states);
	free(wd->bin);
	free(wd->dir);
	free(wd->src);
	free(wd->wal_path);
	free(wd->cfg_path);
	free(wd->sink_dir);
	free(wd->sink_url);
	free(wd->out_path);
	free(wd->json_path);
	free(wd->err_path);
	free(wd->log_path);
	free(wd->cmd_err);
}

static void print_stats(const struct world *wd, const char *name, unsigned iters, int64_t t0)
{
	printf("[ crash ] %s seed=%" PRIu64 " iters=%u: %" PRId64 " states; killed by test %u, by fault site %u, "
	       "--once ok %u, acked by printed outcome %u; restores at latest %u, older %u, none yet %u; "
	       "concurrent runs %u; app checkpoints ok %u busy %u; verify without watermark %u; %.1f s\n",
	       name, wd->seed, iters, wd->latest + 1, wd->killed_by_test, wd->killed_by_fault, wd->once_ok,
	       wd->json_acked, wd->restore_latest, wd->restore_older, wd->restore_none, wd->concurrent, wd->ckpt_ok,
	       wd->ckpt_busy, wd->verify_no_wm, (double)(wt_now_ms() - t0) / 1000.0);
	fflush(stdout);
}

/* ---- sequential: writer idle while the replicator runs ----------------- */

static void one_sequential(struct world *wd, unsigned iter)
{
	struct rep_result res;
	char fault[96], why[160];
	unsigned mode = (unsigned)rnd(wd, 100);
	unsigned ntx = (unsigned)rnd(wd, 5);

	if (!wd->w)
		writer_reopen(wd);
	for (unsigned i = 0; i < ntx; i++) {
		writer_txn(wd);
		if (rnd(wd, 6) == 0)
			writer_checkpoint(wd);
		if (rnd(wd, 8) == 0)
			writer_reopen(wd);
	}
	if (rnd(wd, 4) == 0) {
		/* The writer is the last connection: its close checkpoints and
		 * deletes the WAL before the replicator ever sees it. */
		sqlite3_close(wd->w);
		wd->w = NULL;
	}

	if (trace_on) {
		char desc[160];
		printf("  before the run: %s\n", wal_desc(wd, desc, sizeof(desc)));
	}
	if (mode < 40) {
		unsigned ms = (unsigned)rnd(wd, 81);
		snprintf(why, sizeof(why), "iteration %u: kill -9 after %u ms", iter, ms);
		replicate(wd, false, NULL, ms, &res);
	} else if (mode < 75) {
		const char *site = fault_sites[rnd(wd, sizeof(fault_sites) / sizeof(fault_sites[0]))];
		snprintf(fault, sizeof(fault), "%s:%u:crash", site, 1 + (unsigned)rnd(wd, 4));
		snprintf(why, sizeof(why), "iteration %u: WS_FAULT=%s", iter, fault);
		/* The fault site kills it; the deadline only ends a run whose
		 * site is never reached. Long enough for an ASan build on a
		 * loaded machine to get there (at 300 ms every fault run of a
		 * slow run was the timer's, and the run failed its mix check). */
		replicate(wd, false, fault, 1500, &res);
	} else {
		snprintf(why, sizeof(why), "iteration %u: replicate --once", iter);
		replicate(wd, true, NULL, 0, &res);
	}

	if (mode >= 75) {
		if (res.exit_code != 0) {
			char *err = slurp(wd->err_path);
			fail_msg("seed %" PRIu64 " (%s): exited %d: %s", wd->seed, why, res.exit_code, err);
		}
		if (res.outcomes != 1)
			fail_msg("seed %" PRIu64 " (%s): printed %u outcomes, not 1", wd->seed, why, res.outcomes);
		wd->once_ok++;
		wd->acked = wd->latest;
	} else {
		if (!res.died_by_kill && !res.died_by_fault) {
			char *err = slurp(wd->err_path);
			fail_msg("seed %" PRIu64 " (%s): the replicator exited %d on its own: %s", wd->seed, why,
				 res.exit_code, err);
		}
		if (res.died_by_kill)
			wd->killed_by_test++;
		else
			wd->killed_by_fault++;
		/* An outcome line follows a watermark covering every commit in
		 * the WAL (or says there was nothing new): with the writer idle
		 * that is the latest state. */
		if (res.outcomes > 0) {
			wd->acked = wd->latest;
			wd->json_acked++;
		}
	}
	verify_check(wd, why);
	{
		int64_t floor = wd->acked;
		wd->acked = restore_check(wd, wd->acked, why);
		if (trace_on)
			printf("  %s: writer %s, %u outcome lines, floor %" PRId64 ", latest %" PRId64 ", restored %" PRId64
			       "\n", why, wd->w ? "open" : "closed", res.outcomes, floor, wd->latest, wd->acked);
	}
	if (mode >= 75 && wd->acked != wd->latest)
		fail_msg("seed %" PRIu64 " (%s): restore after a successful run is state %" PRId64 ", not the latest %"
			 PRId64, wd->seed, why, wd->acked, wd->latest);
}

static void test_crash_sequential(void **state)
{
	(void)state;
	struct world wd;
	unsigned iters = (unsigned)wt_env_u64("WS_CRASH_ITERS", 40);
	uint64_t seed = wt_env_u64("WS_CRASH_SEED", 0xc0ffee01);
	int64_t t0 = wt_now_ms();

	world_init(&wd, "core_crash_seq", seed);
	printf("[ crash ] sequential: seed=%" PRIu64 " (WS_CRASH_SEED) iters=%u dir=%s\n", seed, iters, wd.dir);
	fflush(stdout);
	for (unsigned i = 0; i < iters; i++)
		one_sequential(&wd, i);
	print_stats(&wd, "sequential", iters, t0);
	assert_true(wd.killed_by_test > 0 && wd.killed_by_fault > 0 && wd.once_ok > 0);
	world_free(&wd, true);
}

/* ---- concurrent: the writer commits while the replicator is killed ------ */

/* Child: commit for run_ms, logging "n hash" per commit; exits 0 or 1. */
static void writer_child(const char *src, const char *log_path, uint64_t seed, int64_t max_id, unsigned run_ms)
{
	uint64_t rng = seed;
	int64_t deadline = wt_now_ms() + run_ms;
	int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	sqlite3 *db = writer_open_path(src, 2000);
	if (fd < 0 || !db)
		_exit(1);
	while (wt_now_ms() < deadline) {
		int64_t n;
		uint64_t h;
		char line[64];
		int len, rc = txn(db, &rng, &max_id, &n, &h);
		if (rc == SQLITE_BUSY)
			continue; /* the replicator's WAL checkpoint held the write lock */
		if (rc != SQLITE_OK) {
			fprintf(stderr, "writer child: %s\n", sqlite3_errmsg(db));
			_exit(1);
		}
		len = snprintf(line, sizeof(line), "%" PRId64 " %" PRIu64 "\n", n, h);
		if (write(fd, line, (size_t)len) != len)
			_exit(1);
		switch (wt_rand(&rng) % 20) {
		case 0: { /* an application checkpoint, without waiting on readers */
			static const int modes[4] = { SQLITE_CHECKPOINT_PASSIVE, SQLITE_CHECKPOINT_FULL,
						      SQLITE_CHECKPOINT_RESTART, SQLITE_CHECKPOINT_TRUNCATE };
			sqlite3_busy_timeout(db, 0);
			rc = sqlite3_wal_checkpoint_v2(db, NULL, modes[wt_rand(&rng) % 4], NULL, NULL);
			sqlite3_busy_timeout(db, 2000);
			if (rc != SQLITE_OK && rc != SQLITE_BUSY && rc != SQLITE_LOCKED) {
				fprintf(stderr, "writer child: checkpoint: %s\n", sqlite3_errmsg(db));
				_exit(1);
			}
			break;
		}
		case 1: /* writer restart */
			sqlite3_close(db);
			db = writer_open_path(src, 2000);
			if (!db)
				_exit(1);
			break;
		default:
			if (wt_rand(&rng) % 2)
				wt_sleep_ms((unsigned)(wt_rand(&rng) % 3));
		}
	}
	if (fsync(fd) != 0 || sqlite3_close(db) != SQLITE_OK)
		_exit(1);
	close(fd);
	_exit(0);
}

static void read_child_log(struct world *wd)
{
	char *s = slurp(wd->log_path);
	for (char *line = s, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
		int64_t n;
		uint64_t h;
		*nl = '\0';
		if (sscanf(line, "%" SCNd64 " %" SCNu64, &n, &h) != 2)
			fail_msg("writer log line '%s'", line);
		record_state(wd, n, h);
	}
	free(s);
}

static void one_concurrent(struct world *wd, unsigned iter)
{
	struct rep_result res;
	char fault[96], why[160];
	bool with_fault = rnd(wd, 3) == 0;
	unsigned kill_ms = 5 + (unsigned)rnd(wd, 300);
	uint64_t child_seed = wt_rand(&wd->rng);
	int status;
	pid_t child;

	/* No SQLite connection may cross fork(). */
	writer_reopen(wd);
	sqlite3_close(wd->w);
	wd->w = NULL;
	fflush(stdout);
	child = fork();
	if (child < 0)
		fail_msg("fork: %s", strerror(errno));
	if (child == 0)
		writer_child(wd->src, wd->log_path, child_seed, wd->max_id, 150);

	if (with_fault) {
		const char *site = fault_sites[rnd(wd, sizeof(fault_sites) / sizeof(fault_sites[0]))];
		snprintf(fault, sizeof(fault), "%s:%u:crash", site, 1 + (unsigned)rnd(wd, 8));
		snprintf(why, sizeof(why), "concurrent iteration %u: WS_FAULT=%s", iter, fault);
		replicate(wd, false, fault, kill_ms, &res);
	} else {
		snprintf(why, sizeof(why), "concurrent iteration %u: kill -9 after %u ms", iter, kill_ms);
		replicate(wd, false, NULL, kill_ms, &res);
	}
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("seed %" PRIu64 " (%s): writer child failed (status %d)", wd->seed, why, status);
	read_child_log(wd);
	if (!res.died_by_kill && !res.died_by_fault) {
		char *err = slurp(wd->err_path);
		fail_msg("seed %" PRIu64 " (%s): the replicator exited %d on its own: %s", wd->seed, why, res.exit_code,
			 err);
	}
	if (res.died_by_kill)
		wd->killed_by_test++;
	else
		wd->killed_by_fault++;
	wd->concurrent++;
	verify_check(wd, why);
	{
		int64_t floor = wd->acked;
		wd->acked = restore_check(wd, wd->acked, why);
		if (trace_on)
			printf("  %s: %u outcome lines, floor %" PRId64 ", latest %" PRId64 ", restored %" PRId64 "\n", why,
			       res.outcomes, floor, wd->latest, wd->acked);
	}
}

static void test_crash_concurrent(void **state)
{
	(void)state;
	struct world wd;
	unsigned iters = (unsigned)wt_env_u64("WS_CRASH_ITERS", 40) / 2;
	uint64_t seed = wt_env_u64("WS_CRASH_SEED", 0xc0ffee01) + 1;
	int64_t t0 = wt_now_ms();

	if (iters == 0)
		iters = 1;
	world_init(&wd, "core_crash_conc", seed);
	printf("[ crash ] concurrent: seed=%" PRIu64 " (WS_CRASH_SEED+1) iters=%u dir=%s\n", seed, iters, wd.dir);
	fflush(stdout);
	for (unsigned i = 0; i < iters; i++) {
		one_concurrent(&wd, i);
		/* Now and then a quiet, complete run: everything must be there. */
		if (rnd(&wd, 4) == 0)
			one_sequential(&wd, i);
	}
	print_stats(&wd, "concurrent", iters, t0);
	assert_true(wd.concurrent == iters);
	world_free(&wd, true);
}

/*
 * A replicator killed after uploading objects but before its first
 * watermark leaves a tenant directory without a watermark. Nothing was
 * acknowledged, restore says so, and the sink is in a state a crash may
 * leave it in: verify must pass, not report a missing object.
 */
static void test_verify_before_first_watermark(void **state)
{
	(void)state;
	struct world wd;
	struct rep_result res;
	static const char *const sites[] = { "stream.before_manifest_put", "stream.before_watermark_put",
					     "file.put.after_write" };

	for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++) {
		char fault[96];
		world_init(&wd, "core_crash_nowm", 1);
		writer_txn(&wd);
		/* file.put.after_write: the 2nd put is the manifest, the 3rd the watermark */
		snprintf(fault, sizeof(fault), "%s:%u:crash", sites[i], i == 2 ? 3u : 1u);
		replicate(&wd, false, fault, 5000, &res);
		assert_true(res.died_by_fault);
		{
			char *wm = wt_path(wd.sink_dir, TENANT "/wm");
			assert_int_not_equal(access(wm, F_OK), 0);
			free(wm);
		}
		assert_int_equal(restore_check(&wd, -1, fault), -1);
		{
			char *argv[] = { wd.bin, (char *)"verify", (char *)"--sink", wd.sink_url, NULL };
			int rc = run_cmd(argv, "/dev/null", wd.cmd_err);
			if (rc != 0) {
				char *err = slurp(wd.cmd_err);
				fail_msg("WS_FAULT=%s: verify of a sink with objects but no watermark yet exited %d: %s "
					 "(reproduce: walship replicate --sink file://DIR --once with this WS_FAULT, then "
					 "walship verify --sink file://DIR)", fault, rc, err);
			}
		}
		world_free(&wd, true);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verify_before_first_watermark),
		cmocka_unit_test(test_crash_sequential),
		cmocka_unit_test(test_crash_concurrent),
	};
	return WT_RUN_GROUP(tests, NULL, NULL);
}
