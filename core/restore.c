/*
 * Restore: rebuild a tenant's database from its base snapshot and the
 * frames after it, exactly at a committed state.
 *
 * Everything is fetched and verified (ws_chain_load, ws_batch_verify)
 * before it is applied, the image is built in a temporary file next to the
 * output, checked with PRAGMA integrity_check, fsynced, and only then
 * published: a restore that cannot prove its result complete leaves nothing
 * at the output path. Frames are applied only up to a commit frame, so a
 * restore never yields a torn or uncommitted transaction.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "artifact.h"
#include "chain.h"
#include "chain_cut.h"
#include "ckpt_read.h"
#include "history.h"
#include "publish.h"
#include "replay.h"
#include "restore.h"
#include "slots.h"
#include "ws_fault.h"
#include "ws_assert.h"
#include "ws_clock.h"
#include "ws_logging.h"

/* The point asked for is before cut (c->m[0]), whose history retention removed. */
static int before_cut(const char *tenant, const struct ws_chain *c, const struct ws_restore_base *cut)
{
	char when[WS_TIME_STR_MAX];
	return ws_fail(WS_ERANGE_, "tenant %s: retention removed the history before checkpoint %" PRIu64
		       "'s cut (frame %" PRIu64 " of manifest %s, shipped at %s); the requested point is "
		       "before it", tenant, cut->checkpoint_id, c->m[0].last_frame, c->keys[0],
		       ws_time_str(c->m[0].time_ms, when));
}

/* The manifests c->m[first..*seg_last] of the newest run of WAL generation
 * gen in c (a run starts at a REBASE, a NEXT_GEN or the chain's start);
 * false when c holds none. */
static bool gen_run(const struct ws_chain *c, const char *gen, size_t *first, size_t *seg_last)
{
	char id[WS_GEN_ID_MAX];
	for (size_t i = c->count; i-- > 0;) {
		ws_gen_id(&c->m[i].gen, id);
		if (strcmp(id, gen) != 0)
			continue;
		*seg_last = i;
		while (i > 0 && c->m[i].kind == WS_MANIFEST_CONTINUE)
			i--;
		*first = i;
		return true;
	}
	return false;
}

/*
 * Pick the manifest and frame the options ask for. cut: c->m[0] is that
 * checkpoint's cut, the oldest state stored (else NULL). *older: the point
 * is in the history before c's REBASE base (a chain before it), nothing
 * picked.
 */
static int choose_target(const char *tenant, const struct ws_chain *c, const struct ws_restore_opts *o,
			 const struct ws_restore_base *cut, size_t *idx, uint64_t *frame, bool *before, bool *older,
			 uint64_t *gen_from)
{
	*before = false;
	*older = false;
	size_t last = c->count - 1;
	const bool rebased = !cut && c->m[0].kind == WS_MANIFEST_REBASE;
	if (o->time_ms) {
		/* The longest run of manifests from the oldest that were all
		 * stamped at or before the time: a clock that stepped back (NTP,
		 * a takeover by a host whose clock is behind) can stamp a newer
		 * manifest earlier than an older one, and a state past a manifest
		 * stamped after the time may hold commits made after it. */
		size_t i = 0;
		while (i < c->count && c->m[i].time_ms <= o->time_ms)
			i++;
		if (i == 0 && cut) {
			*before = true;
			return before_cut(tenant, c, cut);
		}
		/* The first manifest stamped after the time may hold tails merged
		 * into it that were acknowledged by then (its tail index): the
		 * last of them is the state. Not in a cut, whose state is its
		 * artifact's, at its end. */
		if (i < c->count && (i > 0 || !cut)) {
			const struct ws_fmt_manifest *m = &c->m[i];
			for (uint32_t k = m->tail_count; k-- > 0;) {
				if (m->tails[k].time_ms <= o->time_ms) {
					*idx = i;
					*frame = m->tails[k].frame;
					return 0;
				}
			}
		}
		if (i == 0 && rebased) {
			*older = true;
			return 0;
		}
		if (i == 0) {
			char when[WS_TIME_STR_MAX];
			return ws_fail(WS_ERANGE_, "tenant %s: nothing was shipped at or before the requested time "
				       "(oldest stored state is from %s)", tenant, ws_time_str(c->m[0].time_ms, when));
		}
		*idx = i - 1;
		*frame = c->m[i - 1].last_frame;
		return 0;
	}
	if (o->frame) {
		/* Frames count within the newest WAL generation, or within the
		 * one named (its newest run: a chain before may hold it). */
		size_t first = last;
		if (o->generation && o->generation[0]) {
			/* Not here, or from a later frame on only (a re-base inside
			 * the generation holds its frames from its last on): an
			 * older chain may hold the frame, the same WAL's. */
			/* (A run may be valid from frame 0: a re-base of a WAL
			 * that held no frame yet, its frames all stored.) */
			uint64_t from = 0;
			bool here = gen_run(c, o->generation, &first, &last);
			if (here)
				from = cut && first == 0 ? c->m[0].last_frame : c->m[first].valid_from_frame;
			if (!here || o->frame < from) {
				if (here)
					*gen_from = from;
				*older = true;
				return 0;
			}
		} else {
			while (first > 0 && c->m[first].kind == WS_MANIFEST_CONTINUE)
				first--;
		}
		/* The generation began at or before the cut: only its frames
		 * from the cut's last one on are stored. */
		if (cut && first == 0 && o->frame < c->m[0].last_frame) {
			*before = true;
			return before_cut(tenant, c, cut);
		}
		if (o->frame < c->m[first].valid_from_frame || o->frame < 1)
			return ws_fail(WS_ERANGE_, "tenant %s: frame %" PRIu64 " is before the first restorable "
				       "frame %" PRIu64 " of %s%s", tenant, o->frame, c->m[first].valid_from_frame,
				       o->generation && o->generation[0] ? "generation " : "the current generation",
				       o->generation && o->generation[0] ? o->generation : "");
		for (size_t i = first; i <= last; i++) {
			if (c->m[i].last_frame >= o->frame) {
				*idx = i;
				*frame = o->frame;
				return 0;
			}
		}
		*idx = last;
		*frame = c->m[last].last_frame;
		return 0;
	}
	*idx = last;
	*frame = c->m[last].last_frame;
	return 0;
}

/* No chain holds the point: say where the stored history ends. */
static int out_of_history(const char *tenant, const struct ws_restore_opts *o, const struct ws_chain *c,
			  enum ws_hist_end end, uint64_t gen_from)
{
	char when[WS_TIME_STR_MAX], unlinked[WS_KEY_MAX + 200];
	const char *why = end == WS_HIST_REMOVED ? "; older history was removed by retention" : unlinked;
	snprintf(unlinked, sizeof(unlinked), "%s%s%s", end == WS_HIST_UNLINKED ? "; the re-base " : "",
		 end == WS_HIST_UNLINKED ? c->keys[0] : "", end == WS_HIST_UNLINKED ? " records no link to the "
		 "history before it (restore --checkpoint ID may still reach that)" : "");
	ws_time_str(c->m[0].time_ms, when);
	if (o->frame && gen_from)
		return ws_fail(WS_ERANGE_, "tenant %s: frame %" PRIu64 " is before the first restorable frame %" PRIu64
			       " of generation %s in the oldest stored chain that holds it%s", tenant, o->frame,
			       gen_from, o->generation, why);
	if (o->frame)
		return ws_fail(WS_ERANGE_, "tenant %s: no stored chain holds WAL generation %s (walship ls --sink "
			       "URL %s lists the generations; the oldest stored state is from %s%s)", tenant,
			       o->generation, tenant, when, why);
	return ws_fail(WS_ERANGE_, "tenant %s: nothing was shipped at or before the requested time (the oldest "
		       "stored state is from %s%s)", tenant, when, why);
}

/*
 * choose_target over the live chain c, then over each chain before it
 * while the point lies behind the chain's REBASE base: c, *base and
 * *stopped become the chain that holds it (*from_cut: it starts at a
 * checkpoint's cut found for it).
 */
static int choose_across(struct ws_sink *sink, const char *tenant, const struct ws_restore_opts *o,
			 struct ws_chain *c, struct ws_restore_base *base, bool *stopped, bool *from_cut,
			 size_t *idx, uint64_t *frame, bool *before, struct ws_cut_skip *skip)
{
	uint64_t gen_from = 0;
	for (;;) {
		struct ws_hist_chain prev;
		enum ws_hist_end end = WS_HIST_REMOVED;
		bool older;
		int rc = choose_target(tenant, c, o, *stopped ? base : NULL, idx, frame, before, &older, &gen_from);
		if (rc || !older)
			return rc;
		/* A chain that starts at a cut links nowhere: retention removed
		 * what was before it. */
		if (!*stopped && (rc = ws_hist_prev(sink, tenant, c, false, skip, &prev, &end)) != 0)
			return rc;
		if (end != WS_HIST_MORE)
			return out_of_history(tenant, o, c, end, gen_from);
		ws_chain_free(c);
		*c = prev.c;
		*stopped = *from_cut = prev.from_cut;
		if (prev.from_cut)
			*base = prev.base;
	}
}

/* Make fd (holding res's state) a standalone database file, durably. */
static int image_finish(int fd, const char *path, const struct ws_replay_result *res)
{
	/* A standalone file: switch the header from WAL to rollback-journal
	 * mode (bytes 18-19), as PRAGMA journal_mode=DELETE would. */
	static const uint8_t legacy[2] = { 1, 1 };
	uint8_t h[100];
	uint32_t pages = res->db_pages;
	int rc;

	if (pages && pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h))
		pages = ws_image_pages(h, pages);
	if (ftruncate(fd, (off_t)pages * res->page_size) != 0)
		return ws_fail(-errno, "truncate %s", path);
	/* An empty file is an empty database (the source's file was empty
	 * when it was shipped): nothing to switch. */
	if (res->db_pages > 0 && (rc = ws_image_pwrite(fd, legacy, 2, 18)) != 0)
		return ws_fail(rc, "write %s", path);
	if (fsync(fd) != 0)
		return ws_fail(-errno, "fsync %s", path);
	return 0;
}

int ws_replay_verify(struct ws_store *s, const char *tenant, const struct ws_chain *c,
		     const struct ws_restore_base *cut, bool cut_reported, struct ws_replay_report *rep)
{
	const size_t last = c->count - 1;
	const uint64_t target = c->m[last].last_frame;
	struct ws_replay_result res;
	unsigned before = rep->problems;
	char what[WS_TENANT_NAME_MAX + 16];
	char *tmp;
	int fd, rc;

	/* cut: the chain starts at that checkpoint's cut (ws_chain_from_cut_retained). */
	WS_ASSERT(c->count > 0 && (!cut || strcmp(c->keys[0], cut->cut.key) == 0));

	snprintf(what, sizeof(what), "tenant %s", tenant);
	if ((rc = ws_verify_tmp_open(what, &tmp, &fd)) != 0)
		return rc;
	if (!cut) {
		rc = ws_replay(s, tenant, c, last, target, fd, &res, rep);
	} else {
		/* The cut's own objects, still stored, are checked too; its
		 * state is the artifact, the rest is applied onto it. */
		rc = ws_replay(s, tenant, c, 0, c->m[0].last_frame, -1, &res, rep);
		if (rc && rep->problems == before)
			goto out; /* no object's problem: stop */
		rc = ws_artifact_fetch(s, cut->artifact_key, cut->artifact_length, cut->artifact_sha256, &c->m[0],
				       fd);
		if (rc) {
			ws_fail_wrap(rc, "tenant %s", tenant);
			if (cut_reported) {
				rep->problems++;
				if (!rep->first_err)
					rep->first_err = rc;
			} else {
				ws_replay_keep_going(rep, tenant, cut->artifact_key, rc);
			}
			goto out;
		}
		rc = ws_replay_from(s, tenant, c, 1, last, target, fd, &res, rep);
	}
	if (rc == 0 && rep->problems == before) {
		/* Every object held: the image restore would publish must pass
		 * what restore checks before publishing. */
		rc = image_finish(fd, tmp, &res);
		if (rc == 0)
			rc = ws_image_integrity_check(tmp);
		if (rc)
			ws_fail_wrap(rc, "tenant %s", tenant);
	}
out:
	ws_verify_no_room(rc, tmp);
	close(fd);
	unlink(tmp);
	free(tmp);
	if (rep->problems > before && rep->first_err)
		return rep->first_err;
	return rc;
}

/*
 * The chain c is loaded; stopped: c->m[0] is base's cut, whose state is the
 * artifact. Apply everything up to (idx, frame) to fd.
 */
static int image_apply(struct ws_store *s, const char *tenant, const struct ws_chain *c, bool stopped,
		       const struct ws_restore_base *base, size_t idx, uint64_t frame, int fd,
		       struct ws_replay_result *res, bool *artifact_failed)
{
	int rc;
	WS_ASSERT(idx < c->count && (!stopped || base));
	if (!stopped)
		return ws_replay(s, tenant, c, idx, frame, fd, res, NULL);
	rc = ws_artifact_fetch(s, base->artifact_key, base->artifact_length, base->artifact_sha256, &c->m[0], fd);
	if (rc && artifact_failed)
		*artifact_failed = true;
	if (rc)
		return ws_fail_wrap(rc, "tenant %s", tenant);
	return ws_replay_from(s, tenant, c, 1, idx, frame, fd, res, NULL);
}

/* Build c's last state into a fresh file at path (restore_image's and
 * ws_restore_image_wm's common part); c is freed. */
static int image_of_chain(struct ws_store *s, const char *tenant, struct ws_chain *c, bool stopped,
			  const struct ws_restore_base *base, const char *path, struct ws_replay_result *res)
{
	int fd = -1, rc;

	/* A fresh file, never through a link or into a file someone put at
	 * the name (the name is predictable, often under /tmp): whatever is
	 * there is removed (a link itself, not its target), then the file is
	 * created exclusively. */
	if (unlink(path) != 0 && errno != ENOENT) {
		rc = ws_fail(-errno, "cannot remove %s: %s", path, strerror(errno));
		goto out;
	}
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = ws_fail(-errno, "cannot create %s: %s", path, strerror(errno));
		goto out;
	}
	WS_ASSERT(c->count > 0 && (!stopped || strcmp(c->keys[0], base->cut.key) == 0));
	rc = image_apply(s, tenant, c, stopped, base, c->count - 1, c->m[c->count - 1].last_frame, fd, res, NULL);
	if (!rc)
		rc = image_finish(fd, path, res);
out:
	if (fd >= 0)
		close(fd);
	ws_chain_free(c);
	return rc;
}

int ws_restore_image(struct ws_store *s, const char *tenant, const struct ws_chain_stop *head,
		     const struct ws_restore_base *base, const char *path, bool *used_base)
{
	struct ws_chain c;
	struct ws_replay_result res;
	bool stopped = false;
	int rc;

	*used_base = false;
	rc = ws_chain_load_from(s, tenant, head, base ? &base->cut : NULL, 0, &c, &stopped);
	if (rc)
		return rc;
	*used_base = stopped;
	rc = image_of_chain(s, tenant, &c, stopped, base, path, &res);
	if (rc)
		*used_base = false;
	return rc;
}

int ws_restore_image_wm(struct ws_store *s, const char *tenant, const struct ws_fmt_watermark *wm,
			const struct ws_restore_base *base, const char *path, struct ws_replay_result *res)
{
	struct ws_chain c;
	bool stopped = false;
	int rc;

	rc = ws_chain_load_stop(s, tenant, wm, base ? &base->cut : NULL, &c, &stopped);
	if (rc)
		return rc;
	return image_of_chain(s, tenant, &c, stopped, base, path, res);
}

/*
 * One restore. use_latest: the latest state may start from the latest
 * Commit's artifact. skip: stored cuts not to start from; when the base
 * chosen among them fails to serve, skip->failed names its checkpoint.
 */
static int restore_once(struct ws_sink *sink, const char *tenant, const struct ws_restore_opts *opts,
			const char *out_path, bool use_latest, struct ws_cut_skip *skip)
{
	bool from_cut = false, artifact_failed = false, before = false;
	struct ws_fmt_watermark wm;
	struct ws_head hd; /* its watermark's bytes: a manifest it carries is stored nowhere else */
	struct ws_chain c;
	struct ws_replay_result res;
	struct ws_restore_base base;
	bool have_base = false, stopped = false;
	char *tmp = NULL;
	size_t idx = 0;
	uint64_t frame = 0;
	int fd = -1, rc;

	memset(&c, 0, sizeof(c));
	/* The head: the watermark's, or with manifest slots the last slot its
	 * hint leads to (for the latest state, also checked for a hole). */
	rc = ws_head_load(sink->store, tenant, !opts->frame && !opts->time_ms ? WS_HEAD_HOLES : 0, &hd);
	if (rc == WS_ENOTFOUND) {
		ws_head_free(&hd);
		return ws_fail(WS_ENOTFOUND, "tenant %s has no watermark at %s: nothing was shipped",
			       tenant, sink->store->url);
	}
	if (rc) {
		ws_head_free(&hd);
		return rc;
	}
	wm = hd.head;
	if (wm.seq == 0) {
		rc = ws_fail(WS_ENOTFOUND, "tenant %s: its watermark opens lane %016" PRIx64 ", which holds no "
			     "manifest slot yet: nothing was shipped", tenant, hd.wm.lane);
		ws_head_free(&hd);
		return rc;
	}
	/* With manifest slots the hole check above stands for the went-back
	 * check (docs/SLOTS.md item 3c). */
	if (!ws_head_slots(&hd) && !opts->frame && !opts->time_ms && skip->wm_checked != wm.seq + 1) {
		/* The latest state is the watermark's: one that went back would
		 * restore less than was acknowledged. Once per watermark: a
		 * later attempt of this restore (another base) reads the same. */
		char ev[WS_KEY_MAX];
		rc = ws_wm_went_back(sink->store, tenant, &wm, false, ev);
		skip->wm_checked = wm.seq + 1;
		skip->went_back = rc > 0;
		if (rc > 0) {
			rc = ws_fail(WS_EINCOMPLETE, "tenant %s: the watermark (sequence %" PRIu64 ") went back: "
				       "manifest %s was written after watermark %" PRIu64 " on top of it, so the "
				       "store lost acknowledged writes and the latest state it names is older than "
				       "what was acknowledged; refusing it (--time or --frame restores an earlier "
				       "point on purpose)", tenant, wm.seq, ev, wm.seq + 1);
			ws_head_free(&hd);
			return rc;
		}
		if (rc < 0)
			ws_warn("tenant %s: cannot look for manifests after its watermark (%s): the state it names "
				"is restored without that check", tenant, ws_errmsg());
	}
	/* The latest state can start from the latest Commit's artifact when the
	 * live chain passes through its cut: after retention, the manifests
	 * before the cut are gone. Any failure to read the checkpoint metadata
	 * falls back to the full chain. */
	if (use_latest && !opts->frame && !opts->time_ms)
		have_base = ws_checkpoint_base_for(sink, tenant, &base) == 0;
	if (have_base && (rc = ws_head_behind_cut(tenant, &hd, &base)) != 0) {
		/* No other base changes that: not tried again. */
		skip->went_back = true;
		goto out;
	}
	if (have_base) {
		rc = ws_chain_load_stop(sink->store, tenant, &wm, &base.cut, &c, &stopped);
	} else {
		/* A point in the past: the full chain, unless retention removed
		 * the history before the latest Commit's cut (then it starts
		 * there, from the artifact). */
		rc = ws_chain_load_flags(sink->store, tenant, &wm, WS_CHAIN_UPTO_MISSING, &c);
		if (!rc && ws_chain_truncated(&c)) {
			rc = ws_chain_from_cut(sink, tenant, &wm, &c, &base, skip);
			stopped = from_cut = rc == 0;
		}
	}
	if (rc)
		goto out;
	rc = choose_across(sink, tenant, opts, &c, &base, &stopped, &from_cut, &idx, &frame, &before, skip);
	/* Before the cut used: an older cut could have served it (said below
	 * when one in the chain was passed over). */
	skip->before_used_cut = rc == WS_ERANGE_ && before && from_cut;
	/* Chosen: writers, re-bases and retention may go on meanwhile. */
	if (rc || (rc = WS_FAULT("restore.after_choose")) != 0)
		goto out;
	/* Replay bounds: the target is a manifest of the chain and a frame it holds. */
	WS_ASSERT(idx < c.count && frame <= c.m[idx].last_frame);
	if (opts->time_ms && frame < c.m[idx].last_frame) {
		/* A merged tail's end (the tail index): it must be a commit of
		 * this manifest, as the tail that acknowledged it saw it. */
		rc = ws_replay_from(sink->store, tenant, &c, stopped ? 1 : 0, idx, frame, -1, &res, NULL);
		if (rc)
			goto out;
		if (res.commit_manifest != idx || res.commit_frame != frame) {
			rc = ws_fail(WS_ECORRUPT, "tenant %s: manifest %s names frame %" PRIu64 " as the end of a "
				     "tail merged into it, but that frame is no commit", tenant, c.keys[idx], frame);
			goto out;
		}
	} else if (opts->frame && frame < c.m[idx].last_frame) {
		/* A frame inside a manifest: find the last commit at or before it
		 * first (a dry replay), so no uncommitted frame is applied. */
		rc = ws_replay_from(sink->store, tenant, &c, stopped ? 1 : 0, idx, frame, -1, &res, NULL);
		if (rc)
			goto out;
		if (res.commit_manifest == idx && res.commit_frame >= c.m[idx].valid_from_frame) {
			frame = res.commit_frame;
		} else if (idx > 0 && c.m[idx].kind != WS_MANIFEST_REBASE) {
			/* No commit of this manifest at or before the frame: the
			 * state is where its predecessor ended. Compare manifests,
			 * not frame numbers: they restart in a new generation. */
			idx--;
			frame = c.m[idx].last_frame;
		} else {
			rc = ws_fail(WS_ERANGE_, "tenant %s: no restorable commit at or before frame %" PRIu64,
				     tenant, opts->frame);
			goto out;
		}
	}
	if ((rc = ws_restore_tmp_open(out_path, &tmp, &fd)) != 0)
		goto out;
	rc = image_apply(sink->store, tenant, &c, stopped, &base, idx, frame, fd, &res, &artifact_failed);
	if (rc && from_cut && artifact_failed)
		skip->failed = base.checkpoint_id;
	if (!rc)
		rc = image_finish(fd, tmp, &res);
out:
	rc = ws_restore_end(fd, tmp, out_path, opts->force, tenant, rc);
	ws_chain_free(&c);
	ws_head_free(&hd);
	/* The arguments were checked above: from here on a WS_ECONFIG came
	 * from what the sink holds, a damaged object, never the user's input. */
	return rc == WS_ECONFIG ? WS_EFORMAT : rc;
}

int ws_restore(struct ws_sink *sink, const char *tenant, const struct ws_restore_opts *opts,
	       const char *out_path)
{
	struct ws_restore_opts none = { 0 };
	struct ws_cut_skip skip = { 0 };
	int rc;

	if (!opts)
		opts = &none;
	if ((rc = ws_restore_prepare(sink->store, tenant, out_path, opts->force)) != 0)
		return rc;
	rc = restore_once(sink, tenant, opts, out_path, true, &skip);
	if (rc && rc != WS_ECONFIG && rc != WS_ENOTFOUND && !skip.went_back && !opts->frame && !opts->time_ms) {
		/* The latest Commit's artifact (or its cut) could not be used:
		 * damaged, or gone. The full chain, or an older checkpoint, may
		 * still hold the state: one bad artifact is never total loss. */
		ws_info("restore: tenant %s: from the latest checkpoint: %s; trying the full chain and older "
			"checkpoints", tenant, ws_errmsg());
		rc = restore_once(sink, tenant, opts, out_path, false, &skip);
	}
	/* The stored cut chosen (the oldest in the chain) could not serve: its
	 * artifact damaged or gone since it was looked at. A newer cut may
	 * still hold the point: try the next one. */
	if (rc && skip.failed) {
		int first_rc = rc;
		char first[512];
		snprintf(first, sizeof(first), "%s", ws_errmsg());
		while (rc && skip.failed && skip.n < WS_CUT_SKIP_MAX) {
			ws_info("restore: tenant %s: from checkpoint %" PRIu64 ": %s; trying the next stored "
				"checkpoint", tenant, skip.failed, ws_errmsg());
			skip.ids[skip.n++] = skip.failed;
			skip.failed = 0;
			rc = restore_once(sink, tenant, opts, out_path, false, &skip);
		}
		/* No newer cut reaches back to the point (or none is left): the
		 * damaged artifact is the reason, not the retention window. */
		if (rc == WS_ERANGE_ || rc == WS_EINCOMPLETE)
			rc = ws_fail(first_rc, "%s", first);
	} else if (rc == WS_ERANGE_ && skip.before_used_cut && skip.passed_over[0]) {
		/* A point before the cut used, which an older cut whose artifact
		 * is not there whole would have served. */
		char msg[1024];
		snprintf(msg, sizeof(msg), "%s", ws_errmsg());
		rc = ws_fail(WS_EINCOMPLETE, "%s; an older cut could have served it, but its %s", msg,
			     skip.passed_over);
	}
	return rc;
}
