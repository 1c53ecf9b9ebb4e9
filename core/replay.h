/* Replaying a verified chain onto a database image (replay.c). */
#ifndef WS_CORE_REPLAY_H
#define WS_CORE_REPLAY_H

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

/*
 * ws_replay over c->m[from..upto] only: the state at the end of c->m[from-1]
 * is already in fd (a checkpoint artifact), so res starts from that
 * manifest's database size and last frame. from == 0 is ws_replay.
 */
int ws_replay_from(struct ws_store *s, const char *tenant, const struct ws_chain *c, size_t from,
		   size_t upto, uint64_t target_frame, int fd, struct ws_replay_result *res,
		   struct ws_replay_report *rep) WS_MUST_CHECK;

/*
 * The frame fr (number no) at m's last_frame closes m (key): a commit frame
 * with m's end checksum and database size; else WS_ECORRUPT naming m.
 */
int ws_replay_check_end(const char *tenant, const char *key, const struct ws_fmt_manifest *m, const uint8_t *fr,
			uint64_t no) WS_MUST_CHECK;
/* Write n bytes at off, whatever short writes pwrite makes. 0 or -errno. */
int ws_image_pwrite(int fd, const uint8_t *p, size_t n, uint64_t off) WS_MUST_CHECK;
/* Page 1's in-header database size when SQLite takes it as the size, else 0. */
uint32_t ws_image_header_pages(const uint8_t h[100]);
/* The pages a published image of a state of db_pages pages holds. */
uint32_t ws_image_pages(const uint8_t h[100], uint32_t db_pages);
/* In verify mode (rep), count and report a bad object and say go on; else false. */
bool ws_replay_keep_going(struct ws_replay_report *rep, const char *tenant, const char *key, int rc);

#endif
