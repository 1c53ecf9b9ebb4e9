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

#endif
