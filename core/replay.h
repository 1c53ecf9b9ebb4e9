#ifndef WS_REPLAY_H
#define WS_REPLAY_H

#include "core_internal.h"

struct ws_replay_result {
	uint32_t page_size;
	uint32_t db_pages;        /* database size at commit_frame */
	uint64_t commit_frame;    /* last commit applied (in the last generation) */
	size_t commit_manifest;   /* index of the manifest commit_frame belongs to */
};

/* Verify mode: report every bad object through fn and keep going. */
struct ws_replay_report {
	ws_problem_fn fn;
	void *arg;
	unsigned problems;
	int first_err;
};

/*
 * Fetch and verify every object of manifests c->m[0..upto], applying pages to
 * fd (or only verifying when fd < 0), never past frame target_frame of the
 * last manifest nor past any manifest's last commit.
 */
int ws_replay(struct ws_store *s, const char *tenant, const struct ws_chain *c, size_t upto,
	      uint64_t target_frame, int fd, struct ws_replay_result *res,
	      struct ws_replay_report *rep) WS_MUST_CHECK;

struct ws_restore_base;
/*
 * verify: the latest state of c built as restore builds it, in a temporary
 * file under TMPDIR (removed after): every object fetched and checked, each
 * bad one reported through rep and the rest checked on; when none was bad,
 * the image is finished and must pass PRAGMA integrity_check, as restore's
 * must before it is published. cut: c->m[0] is that checkpoint's cut, whose
 * state is its artifact (history before it removed), else NULL;
 * cut_reported: a bad artifact was already reported (ws_checkpoint_verify
 * checked it): counted, not reported again. Returns 0, the first problem's
 * error, or an error that is no object's (reported by the caller, with
 * ws_errmsg()).
 */
int ws_replay_verify(struct ws_store *s, const char *tenant, const struct ws_chain *c,
		     const struct ws_restore_base *cut, bool cut_reported,
		     struct ws_replay_report *rep) WS_MUST_CHECK;

/* A manifest named exactly: key, SHA-256 and length. */
struct ws_chain_stop {
	char key[WS_KEY_MAX];
	uint8_t sha[WS_SHA256_LEN];
	uint64_t length;
};

/*
 * ws_chain_load, but the walk also ends at stop (when the chain passes
 * through it, *stopped = true and stop is c->m[0]).
 */
int ws_chain_load_stop(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm,
		       const struct ws_chain_stop *stop, struct ws_chain *out, bool *stopped) WS_MUST_CHECK;

/* A missing predecessor ends the walk (the chain so far is returned). */
#define WS_CHAIN_UPTO_MISSING 1u
/*
 * The chain from the manifest head names (no watermark check) back to its
 * REBASE base or to stop (may be NULL). Errors as ws_chain_load.
 */
int ws_chain_load_from(struct ws_store *s, const char *tenant, const struct ws_chain_stop *head,
		       const struct ws_chain_stop *stop, unsigned flags, struct ws_chain *out,
		       bool *stopped) WS_MUST_CHECK;

/*
 * ws_replay over c->m[from..upto] only: the state at the end of c->m[from-1]
 * is already in fd (a checkpoint artifact), so res starts from that
 * manifest's database size and last frame. from == 0 is ws_replay.
 */
int ws_replay_from(struct ws_store *s, const char *tenant, const struct ws_chain *c, size_t from,
		   size_t upto, uint64_t target_frame, int fd, struct ws_replay_result *res,
		   struct ws_replay_report *rep) WS_MUST_CHECK;

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

/*
 * Build the tenant's database exactly at the state of the manifest head
 * names into path (created or truncated, a rollback-journal file), from
 * the base artifact (when the chain passes through base->cut; may be NULL)
 * or from the chain's REBASE base. *used_base tells which.
 */
struct ws_restore_base {
	struct ws_chain_stop cut;            /* the checkpoint's cut manifest for the tenant */
	char artifact_key[WS_KEY_MAX];       /* its database image */
	uint64_t artifact_length;
	char artifact_sha256[WS_SHA256_HEX_LEN + 1];
	uint64_t checkpoint_id;              /* the checkpoint whose cut this is */
};
int ws_restore_image(struct ws_store *s, const char *tenant, const struct ws_chain_stop *head,
		     const struct ws_restore_base *base, const char *path, bool *used_base) WS_MUST_CHECK;

/*
 * The latest Commit's base for tenant (checkpoint.c): its cut manifest and
 * artifact. WS_ENOTFOUND when there is no Commit or it does not name the
 * tenant; other errors when the metadata cannot be read.
 */
int ws_checkpoint_base_for(struct ws_sink *sink, const char *tenant, struct ws_restore_base *out) WS_MUST_CHECK;

/*
 * The bases of every stored committed checkpoint that names tenant, newest
 * first (*out malloc'd, *count may be 0). WS_ENOTFOUND when nothing is
 * decided at the sink.
 */
int ws_checkpoint_bases_for(struct ws_sink *sink, const char *tenant, struct ws_restore_base **out,
			    size_t *count) WS_MUST_CHECK;

/*
 * verify's part for checkpoints: checkpoints/head present when committed
 * indexes are; the latest Commit loads; each tenant it names (only: just
 * that one) still has a readable watermark, and its artifact matches its
 * length and SHA-256 and passes PRAGMA integrity_check. Each problem goes
 * to fn; returns the first error. *verified_id: the Commit whose artifacts
 * were checked (0: none).
 */
int ws_checkpoint_verify(struct ws_sink *sink, const char *only, ws_problem_fn fn, void *arg,
			 uint64_t *verified_id) WS_MUST_CHECK;

/*
 * Every key the checkpoint namespace names, for verify --orphans: its
 * singletons (present or not), each stored committed index from the latest
 * Commit back and the artifacts it names, the protected index of the
 * retention record, the keys the attempt in flight inventoried and its
 * candidate indexes, and every seal. For each stored checkpoint's cut of a
 * tenant, fn gets the cut too (key: its manifest), so the caller names the
 * chain behind it. fn's non-zero return ends the walk and is returned.
 */
typedef int (*ws_named_fn)(const char *key, const char *tenant, const struct ws_chain_stop *cut, void *arg);
int ws_checkpoint_named(struct ws_sink *sink, ws_named_fn fn, void *arg) WS_MUST_CHECK;

/*
 * The cut of tenant in the checkpoint the latest retention run protected
 * (checkpoints/retention): history behind it may be gone by retention's
 * doing, history in front of it never. WS_ENOTFOUND when no run protected
 * a checkpoint that names tenant.
 */
int ws_checkpoint_retained_cut(struct ws_sink *sink, const char *tenant, struct ws_chain_stop *cut,
			       uint64_t *id) WS_MUST_CHECK;

/*
 * The chain the watermark names, walked back with flags (ws_chain_load with
 * WS_CHAIN_UPTO_MISSING: ws_chain_truncated(out) when a predecessor is
 * missing).
 */
int ws_chain_load_flags(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm, unsigned flags,
			struct ws_chain *out) WS_MUST_CHECK;

/* The walk ended at a missing predecessor, not at a REBASE base. */
static inline bool ws_chain_truncated(const struct ws_chain *c)
{
	return c->count > 0 && c->m[0].kind != WS_MANIFEST_REBASE;
}

/*
 * c is truncated (walked from wm): history retention removed before the
 * latest Commit's cut, when that cut (key, SHA-256 and length) is in c. Then
 * drop the manifests before it (c->m[0] is the cut, whose state is base's
 * artifact) and fill base. Otherwise fail as ws_chain_load does
 * (WS_EINCOMPLETE: the missing manifest). skip (may be NULL): checkpoints
 * not to use as the base (their artifact failed to serve this restore).
 */
#define WS_CUT_SKIP_MAX 16u
struct ws_cut_skip {
	uint64_t ids[WS_CUT_SKIP_MAX];
	size_t n;
	uint64_t failed;        /* set by a restore whose base artifact failed; 0: none */
	char passed_over[WS_KEY_MAX + 160]; /* an artifact of a cut in the chain that was not there
					     * whole (missing, or not its recorded size); "" none */
	bool before_used_cut;   /* the point asked for is before the cut the restore started from */
	uint64_t wm_checked;    /* 1 + the watermark sequence the went-back check was run for; 0: none */
	bool went_back;         /* refused: the watermark went back (no other base serves) */
};
int ws_chain_from_cut(struct ws_sink *sink, const char *tenant, const struct ws_fmt_watermark *wm,
		      struct ws_chain *c, struct ws_restore_base *base, struct ws_cut_skip *skip) WS_MUST_CHECK;

/*
 * ws_chain_from_cut for verify: the missing link must be history a
 * retention run removed (the cut that run protected is in c), else it is
 * reported as missing.
 */
int ws_chain_from_cut_retained(struct ws_sink *sink, const char *tenant, const struct ws_fmt_watermark *wm,
			       struct ws_chain *c, struct ws_restore_base *base) WS_MUST_CHECK;

/*
 * Fetch the artifact base names, verify its length and SHA-256, write it to
 * fd. cut (may be NULL): the cut manifest, whose state the artifact is: its
 * size must be the cut's db_pages x page size, and page 1 must say that
 * page size and page count (an index naming another database's image).
 */
int ws_artifact_fetch(struct ws_store *s, const char *key, uint64_t length, const char *sha256_hex,
		      const struct ws_fmt_manifest *cut, int fd) WS_MUST_CHECK;
/* base's artifact, checked against its cut manifest when that is still stored. */
int ws_artifact_fetch_base(struct ws_store *s, const struct ws_restore_base *base, int fd) WS_MUST_CHECK;

/*
 * Verify base's artifact as verify does: length and SHA-256 against the
 * committed index, and that it opens as a SQLite database with PRAGMA
 * integrity_check ok (in a temporary file, removed). Errors name its key.
 */
int ws_artifact_verify(struct ws_store *s, const struct ws_restore_base *base) WS_MUST_CHECK;

#endif
