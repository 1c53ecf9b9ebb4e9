/*
 * The follower tests' replica (test_core_follow*): a database image built
 * only from a follower's callbacks (core/follow.h), checked at every call
 * against the record of the states the source committed (evreplica.h): an
 * image must be one of them, at or after the last; a transaction must make
 * exactly the next one.
 */
#ifndef WS_FOLREPLICA_H
#define WS_FOLREPLICA_H

#include "evreplica.h"

struct mem {
	const struct record *rec;
	uint8_t *img;
	uint64_t pages;
	uint32_t page_size;
	uint64_t last_tx;
	int at;                  /* index of the recorded state the image is (-1: none yet) */
	unsigned images, txns;
};

void mem_init(struct mem *m, const struct record *rec);
void mem_free(struct mem *m);
/* The callbacks (struct ws_follow_ops), arg a struct mem. */
int mem_image(void *arg, uint64_t tx, const uint8_t *img, uint64_t pages, uint32_t ps);
int mem_apply(void *arg, uint64_t tx, const uint32_t *pgno, const uint8_t *pages, uint32_t n, uint32_t ps,
	      uint32_t db_pages);

/*
 * A real writer in this thread shipped by a one-shard engine (its own WAL
 * checkpoints every 64 KiB, the application's of every mode) to sink_url,
 * and a follower of it polling between the writer's rounds, checked as
 * above, then brought to the source's last commit once the engine flushed.
 * *rebuilds, *lists_steady: the follower's rebuilds, and the LISTs the
 * sink saw from the follower's store after its first poll.
 */
void fol_engine_scenario(const char *tag, const char *sink_url, unsigned rounds, uint64_t *rebuilds,
			 uint64_t *lists_steady);

#endif
