/*
 * Sealed checkpoint artifacts end to end: a real SQLite writer shipped to a
 * real file:// sink, checkpoints taken with each codec with and without a
 * key (the second built from the first's artifact), restored by
 * checkpoint, from the latest state and verified, each against the digest
 * the source held at its cut. Without the key a restore fails with
 * WS_ENOKEY naming the artifact and the key id and writes nothing; verify
 * checks what it can and reports the rest with WS_ENOKEY. A damaged
 * artifact (a byte flipped in a chunk, cut short, chunks swapped, a
 * foreign version) or a wrong key is an error naming it, nothing at the
 * output; no message shows a key. Checkpoint, an incremental one, restore
 * and verify of a database larger than the heap they are given work
 * sealed too.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coreutil.h"
#include "walship.h"
#include "ws_artseal.h"
#include "ws_format.h"
#include "ws_seal.h"

#define TENANT "sealed"
#define KEY_HEX "8d1f6a0b3c2e4f5061728394a5b6c7d8e9f0011223344556677889aabbccddee"
#define KEY2_HEX "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
#define MARK "walship-ckpt-seal-marker"

struct senv {
	struct wt_env e;
	struct ws_stream *st;
	char *kf;                    /* the key file */
	struct ws_checkpoint_opts co;
};

/* rows of compressible marked text and of random bytes, one commit. */
static void write_rows(sqlite3 *w, int text_rows, int random_rows)
{
	wt_exec(w, "BEGIN");
	for (int i = 0; i < text_rows; i++)
		wt_exec(w, "INSERT INTO t(v) VALUES(replace(hex(zeroblob(1000)), '00', '" MARK " '))");
	for (int i = 0; i < random_rows; i++)
		wt_exec(w, "INSERT INTO t(v) VALUES(randomblob(3000))");
	wt_exec(w, "COMMIT");
}

static char *key_file(struct wt_env *e, const char *name, const char *hex)
{
	char *kf = wt_path(e->dir, name), text[128];
	snprintf(text, sizeof(text), "# artifacts\n%s\n", hex);
	assert_int_equal(wt_write_file(kf, text, strlen(text)), 0);
	return kf;
}

static void senv_init(struct senv *s, const char *tag, enum ws_codec codec, bool keyed)
{
	int rc;
	memset(s, 0, sizeof(*s));
	wt_env_init(&s->e, tag, 0);
	s->kf = key_file(&s->e, "keys", KEY_HEX);
	struct ws_stream_config sc = {
		.tenant = TENANT, .db_path = s->e.db, .policy = WS_POLICY_BLOCK, .wal_checkpoint_bytes = 1,
		.seal = { .codec = codec, .key_file = keyed ? s->kf : NULL },
	};
	s->st = ws_stream_open(s->e.sink, &sc, &rc);
	if (!s->st)
		fail_msg("open: %s", ws_errmsg());
	s->co.seal = sc.seal;
}

static void senv_free(struct senv *s)
{
	ws_stream_close(s->st);
	free(s->kf);
	wt_env_free(&s->e);
}

/* Commit and ship: the source's digest after it. */
static uint64_t ship(struct senv *s, int text_rows, int random_rows)
{
	struct ws_outcome o;
	write_rows(s->e.w, text_rows, random_rows);
	wt_tail_ok(s->st, &o);
	wt_tail_ok(s->st, &o);
	return wt_content_hash(s->e.w, NULL);
}

static void take(struct senv *s, struct ws_checkpoint_info *info)
{
	int rc = ws_checkpoint_take(s->e.sink, &s->co, info);
	if (rc)
		fail_msg("checkpoint: %s (%s)", ws_strerror(rc), ws_errmsg());
	assert_true(info->committed && info->own);
}

static char *artifact_path(struct senv *s, uint64_t id)
{
	char name[256];
	snprintf(name, sizeof(name), "checkpoints/artifacts/%016" PRIx64 "/" TENANT, id);
	return wt_path(s->e.sink_dir, name);
}

static uint64_t restore_ckpt_hash(struct senv *s, struct ws_sink *sink, uint64_t id)
{
	char *p = wt_out_path(&s->e);
	int rc = ws_restore_checkpoint(sink, TENANT, id, p, false);
	if (rc)
		fail_msg("restore --checkpoint %" PRIu64 ": %s (%s)", id, ws_strerror(rc), ws_errmsg());
	uint64_t h = wt_file_hash(p, NULL);
	unlink(p);
	free(p);
	return h;
}

/* restore --checkpoint id through sink fails with want, the message holding
 * each of names, no key, nothing at the output. */
static void restore_fails(struct senv *s, struct ws_sink *sink, uint64_t id, int want, const char *n1,
			  const char *n2)
{
	char *p = wt_out_path(&s->e);
	int rc = ws_restore_checkpoint(sink, TENANT, id, p, false);
	if (rc != want)
		fail_msg("restore --checkpoint: %s (%s), expected %s", ws_strerror(rc), ws_errmsg(), ws_strerror(want));
	if ((n1 && !strstr(ws_errmsg(), n1)) || (n2 && !strstr(ws_errmsg(), n2)))
		fail_msg("restore --checkpoint: '%s' does not name '%s' and '%s'", ws_errmsg(), n1, n2 ? n2 : "");
	assert_null(strstr(ws_errmsg(), KEY_HEX));
	assert_null(strstr(ws_errmsg(), KEY2_HEX));
	assert_int_equal(access(p, F_OK), -1);
	free(p);
}

struct problems {
	unsigned n, nokey, art_nokey;
	bool leaked;
};

static void on_problem(const char *tenant, const char *key, int err, const char *detail, void *arg)
{
	struct problems *p = arg;
	(void)tenant;
	p->n++;
	p->nokey += err == WS_ENOKEY;
	p->art_nokey += err == WS_ENOKEY && key && strstr(key, "checkpoints/artifacts/") != NULL;
	p->leaked |= strstr(detail, KEY_HEX) != NULL || strstr(detail, KEY_HEX + 8) != NULL;
}

static uint64_t key_id(const char *hex)
{
	struct ws_keyring kr = { 0 };
	assert_int_equal(ws_keyring_parse(&kr, "k", hex, strlen(hex)), 0);
	uint64_t id = kr.keys[0].id;
	ws_keyring_free(&kr);
	return id;
}

/* What the artifact file holds: its version, and whether the marker shows. */
static void artifact_is(struct senv *s, uint64_t id, bool sealed, bool keyed)
{
	char *p = artifact_path(s, id);
	size_t len = 0;
	uint8_t *b = wt_read_file(p, &len);
	assert_non_null(b);
	assert_true(len > 100);
	if (sealed)
		assert_memory_equal(b, WS_ART_MAGIC, 8);
	else
		assert_memory_equal(b, "SQLite format 3", 15);
	assert_true((memmem(b, len, MARK, strlen(MARK)) == NULL) == keyed);
	free(b);
	free(p);
}

/* A sink without the artifact key: restore fails by name, verify checks
 * what it can and reports the artifacts it could not open. */
static void without_key(struct senv *s, uint64_t id)
{
	int rc;
	struct ws_sink *bare = ws_sink_open(s->e.sink_url, &rc);
	char kid[17], art[128];
	struct problems p = { 0 };

	assert_non_null(bare);
	snprintf(kid, sizeof(kid), "%016" PRIx64, key_id(KEY_HEX));
	snprintf(art, sizeof(art), "checkpoints/artifacts/%016" PRIx64 "/" TENANT, id);
	restore_fails(s, bare, id, WS_ENOKEY, art, kid);
	rc = ws_verify(bare, TENANT, on_problem, &p);
	assert_int_equal(rc, WS_ENOKEY);
	assert_true(p.art_nokey > 0 && p.nokey == p.n);
	assert_false(p.leaked);
	/* A wrong key is no key: the message names the one needed. */
	char *kf2 = key_file(&s->e, "keys2", KEY2_HEX);
	assert_int_equal(ws_sink_add_key_file(bare, kf2), 0);
	restore_fails(s, bare, id, WS_ENOKEY, art, kid);
	assert_int_equal(ws_sink_add_key_file(bare, s->kf), 0);
	assert_int_equal(ws_verify(bare, TENANT, NULL, NULL), 0);
	free(kf2);
	ws_sink_close(bare);
}

static void run_ckpt(enum ws_codec codec, bool keyed)
{
	struct senv s;
	struct ws_checkpoint_info i1, i2;
	const bool sealed = codec == WS_CODEC_ZSTD || keyed;

	senv_init(&s, "ckseal", codec, keyed);
	/* More than two 8 MiB chunks: half text, half random. */
	uint64_t h1 = 0;
	for (int i = 0; i < 6; i++)
		h1 = ship(&s, 900, 300);
	take(&s, &i1);
	uint64_t h2 = ship(&s, 200, 100);
	take(&s, &i2);
	assert_true(i2.incremental > 0); /* built from the first artifact */
	artifact_is(&s, i1.id, sealed, keyed);
	artifact_is(&s, i2.id, sealed, keyed);
	assert_true(restore_ckpt_hash(&s, s.e.sink, i1.id) == h1);
	assert_true(restore_ckpt_hash(&s, s.e.sink, i2.id) == h2);
	assert_true(wt_restore_hash(&s.e, TENANT, NULL, NULL) == h2);
	assert_int_equal(ws_verify(s.e.sink, TENANT, NULL, NULL), 0);
	if (keyed)
		without_key(&s, i2.id);
	senv_free(&s);
}

static void test_plain(void **state) { (void)state; run_ckpt(WS_CODEC_NONE, false); }
static void test_zstd(void **state) { (void)state; run_ckpt(WS_CODEC_ZSTD, false); }
static void test_encrypted(void **state) { (void)state; run_ckpt(WS_CODEC_NONE, true); }
static void test_zstd_encrypted(void **state) { (void)state; run_ckpt(WS_CODEC_ZSTD, true); }

/* ---- damage ---------------------------------------------------------------- */

static void damage_flip(uint8_t *b, size_t len, const struct ws_art_hdr *h)
{
	(void)len;
	b[ws_art_chunk_off(h, 1) + 100] ^= 0x20;
}

static void damage_cut(uint8_t *b, size_t *len, const struct ws_art_hdr *h)
{
	(void)b;
	*len = ws_art_chunk_off(h, 2) - 7; /* chunk 1 cut short, chunk 2 gone */
}

/* Chunks 0 and 1 swapped, with their table entries. */
static void damage_swap(uint8_t *b, size_t len, const struct ws_art_hdr *h)
{
	const size_t a = h->chunks[0].stored_len, c = h->chunks[1].stored_len, off = ws_art_chunk_off(h, 0);
	const size_t hs = ws_art_hdr_size(h->chunk_count);
	uint8_t *tmp = malloc(a + c), e[WS_ART_ENTRY];
	(void)len;
	memcpy(tmp, b + off + a, c);
	memcpy(tmp + c, b + off, a);
	memcpy(b + off, tmp, a + c);
	memcpy(e, b + WS_ART_FIXED, WS_ART_ENTRY);
	memcpy(b + WS_ART_FIXED, b + WS_ART_FIXED + WS_ART_ENTRY, WS_ART_ENTRY);
	memcpy(b + WS_ART_FIXED + WS_ART_ENTRY, e, WS_ART_ENTRY);
	ws_put_le64(b + hs - 8, ws_xxh64(b, hs - 8));
	free(tmp);
}

static void damage_version(uint8_t *b, size_t len, const struct ws_art_hdr *h)
{
	(void)len;
	(void)h;
	ws_put_le32(b + 8, 3);
}

/* Each damage applied to a copy of the artifact: restore fails naming it
 * (and the reason), verify fails, nothing at the output; then the original
 * bytes back. */
static void test_damage(void **state)
{
	struct senv s;
	struct ws_checkpoint_info i1;
	struct ws_art_hdr h;
	size_t len = 0;
	(void)state;

	senv_init(&s, "ckseal_dmg", WS_CODEC_ZSTD, true);
	for (int i = 0; i < 6; i++)
		(void)ship(&s, 300, 600);
	take(&s, &i1);
	char *p = artifact_path(&s, i1.id), art[128];
	snprintf(art, sizeof(art), "checkpoints/artifacts/%016" PRIx64 "/" TENANT, i1.id);
	uint8_t *orig = wt_read_file(p, &len), *b = malloc(len);
	assert_int_equal(ws_art_hdr_decode(orig, len, &h), 0);
	assert_true(h.chunk_count >= 3);

	static const char *const why[] = { "authentication failed", "is not the", "authentication failed",
					   "version 3 is unknown" };
	for (int d = 0; d < 4; d++) {
		size_t n = len;
		struct problems pr = { 0 };
		memcpy(b, orig, len);
		if (d == 0)
			damage_flip(b, n, &h);
		else if (d == 1)
			damage_cut(b, &n, &h);
		else if (d == 2)
			damage_swap(b, n, &h);
		else
			damage_version(b, n, &h);
		assert_int_equal(wt_write_file(p, b, n), 0);
		restore_fails(&s, s.e.sink, i1.id, d == 3 ? WS_EFORMAT : WS_ECORRUPT, art, why[d]);
		assert_int_not_equal(ws_verify(s.e.sink, TENANT, on_problem, &pr), 0);
		assert_false(pr.leaked);
	}
	assert_int_equal(wt_write_file(p, orig, len), 0);
	(void)restore_ckpt_hash(&s, s.e.sink, i1.id);
	ws_art_hdr_free(&h);
	free(b);
	free(orig);
	free(p);
	senv_free(&s);
}

/* A bad key file or codec for artifacts fails the checkpoint before it
 * begins, naming the file and line, never a key. */
static void test_bad_config(void **state)
{
	struct senv s;
	struct ws_checkpoint_info info;
	(void)state;
	senv_init(&s, "ckseal_cfg", WS_CODEC_NONE, false);
	(void)ship(&s, 10, 10);
	char *kf = wt_path(s.e.dir, "badkeys");
	assert_int_equal(wt_write_file(kf, KEY_HEX "0\n", strlen(KEY_HEX) + 2), 0);
	struct ws_checkpoint_seal ts = { .tenant = TENANT, .seal = { .key_file = kf } };
	s.co.tenant_seal = &ts;
	s.co.tenant_seal_count = 1;
	assert_int_equal(ws_checkpoint_take(s.e.sink, &s.co, &info), WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "line 1"));
	assert_null(strstr(ws_errmsg(), KEY_HEX));
	ts.seal.key_file = NULL;
	ts.seal.codec = (enum ws_codec)7;
	assert_int_equal(ws_checkpoint_take(s.e.sink, &s.co, &info), WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "codec"));
	/* A tenant's own seal overrides the default: keyed here, plain default. */
	ts.seal.codec = WS_CODEC_ZSTD;
	ts.seal.key_file = s.kf;
	take(&s, &info);
	artifact_is(&s, info.id, true, true);
	free(kf);
	senv_free(&s);
}

/* ---- bounded memory ---------------------------------------------------------- */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HEAP_LIMIT 0 /* shadow memory counts against RLIMIT_DATA: no limit there */
#else
#define HEAP_LIMIT (64 << 20)
#endif

/* step in a child whose heap is limited (RLIMIT_DATA): its exit status. */
static int limited(struct senv *s, int step, uint64_t id, const char *out)
{
	struct ws_checkpoint_info info;
	pid_t pid = fork();
	int st = 0;
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = { HEAP_LIMIT, HEAP_LIMIT };
		int rc;
		if (HEAP_LIMIT && setrlimit(RLIMIT_DATA, &rl) != 0)
			_exit(99);
		if (step == 0)
			rc = ws_checkpoint_take(s->e.sink, &s->co, &info) || !info.committed;
		else if (step == 1)
			rc = ws_restore_checkpoint(s->e.sink, TENANT, id, out, false);
		else
			rc = ws_verify(s->e.sink, TENANT, NULL, NULL);
		if (rc)
			fprintf(stderr, "step %d under the heap limit: %s\n", step, ws_errmsg());
		_exit(rc ? 1 : 0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The id of the one checkpoint whose artifacts the sink holds. */
static uint64_t only_checkpoint(struct senv *s)
{
	char *d = wt_path(s->e.sink_dir, "checkpoints/artifacts");
	DIR *dir = opendir(d);
	struct dirent *de;
	uint64_t id = 0;
	unsigned n = 0;
	assert_non_null(dir);
	while ((de = readdir(dir)) != NULL)
		if (de->d_name[0] != '.' && ++n)
			id = strtoull(de->d_name, NULL, 16);
	closedir(dir);
	free(d);
	assert_int_equal(n, 1);
	return id;
}

/* A database of about 100 MiB (more than the heap limit), sealed with zstd
 * and a key: checkpoint, incremental checkpoint, restore of each and verify
 * each under a 64 MiB heap, the restores equal to the source at the cuts. */
static void test_bounded_memory(void **state)
{
	struct senv s;
	(void)state;
	senv_init(&s, "ckseal_big", WS_CODEC_ZSTD, true);
	uint64_t h1 = 0, h2;
	for (int i = 0; i < 12; i++)
		h1 = ship(&s, 300, 2500);
	assert_int_equal(limited(&s, 0, 0, NULL), 0);
	const uint64_t first = only_checkpoint(&s);
	h2 = ship(&s, 100, 500);
	assert_int_equal(limited(&s, 0, 0, NULL), 0);
	char *o1 = wt_out_path(&s.e), *o2 = wt_out_path(&s.e);
	assert_int_equal(limited(&s, 1, first, o1), 0);
	assert_int_equal(limited(&s, 1, WS_CHECKPOINT_LATEST, o2), 0);
	assert_true(wt_file_hash(o1, NULL) == h1);
	assert_true(wt_file_hash(o2, NULL) == h2);
	assert_int_equal(limited(&s, 2, 0, NULL), 0);
	free(o1);
	free(o2);
	senv_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain),
		cmocka_unit_test(test_zstd),
		cmocka_unit_test(test_encrypted),
		cmocka_unit_test(test_zstd_encrypted),
		cmocka_unit_test(test_damage),
		cmocka_unit_test(test_bad_config),
		cmocka_unit_test(test_bounded_memory),
	};
	return WT_RUN_GROUP(tests, NULL, NULL);
}
