#include "pipe.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ws_clock.h"
#include "ws_hash.h"
#include "ws_log.h"
#include "ws_wal.h"

#define BLOCK_BACKOFF_MIN_MS 10
#define BLOCK_BACKOFF_MAX_MS 1000

/* Failures that mean "the sink is struggling", which `block` waits out. */
static bool transient(int rc)
{
	return rc == WS_ETHROTTLED || rc == -EIO || rc == -ETIMEDOUT || rc == -ECONNRESET ||
	       rc == -ECONNREFUSED || rc == -EAGAIN || rc == -EHOSTUNREACH || rc == -ENETUNREACH;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/*
 * Verify, hash, encode and name a batch the tail only split. Verifying here,
 * on the upload side, takes SQLite's checksum chain and the payload hash off
 * the shard thread (each frame's stored checksum seeds the next, so a batch
 * verifies on its own). A frame that fails means the chain ends earlier
 * than the frame headers said: WS_ECORRUPT, and the tail starts over
 * checking every frame itself.
 */
/* Frames verified and hashed together: both passes read them from L1. */
#define FINISH_FRAMES 8

static int finish_batch(struct ws_pipe *p, uint32_t idx, struct ws_pipe_desc *d)
{
	struct ws_fmt_batch *b = &d->batch;
	const uint8_t *frames = ws_pipe_slot(p, idx);
	const uint32_t fsz = ws_wal_frame_size(b->gen.page_size);
	const size_t n = (size_t)b->frame_count;
	uint32_t seed[2] = { b->seed_cksum[0], b->seed_cksum[1] };
	struct ws_xxh_state hs;
	const uint8_t *last;

	/* The slot came from another core; one pass over it, in pieces small
	 * enough that the hash reads what the checksum just brought in. */
	ws_xxh_reset(&hs);
	for (size_t f = 0; f < n; f += FINISH_FRAMES) {
		size_t m = n - f < FINISH_FRAMES ? n - f : FINISH_FRAMES;
		const uint8_t *piece = frames + f * fsz;
		size_t ok = ws_wal_verify_frames(d->big_endian, b->gen.page_size, piece, m, seed);
		if (ok < m) {
			d->bad_frame = b->first_frame + f + ok;
			return WS_ECORRUPT;
		}
		seed[0] = ws_get_be32(piece + (m - 1) * fsz + 16);
		seed[1] = ws_get_be32(piece + (m - 1) * fsz + 20);
		ws_xxh_update(&hs, piece, m * fsz);
	}
	last = frames + (n - 1) * fsz;
	b->end_cksum[0] = ws_get_be32(last + 16);
	b->end_cksum[1] = ws_get_be32(last + 20);
	/* The payload is exactly the frames (hashing it all is what names it). */
	if (d->payload_len > n * fsz)
		ws_xxh_update(&hs, frames + n * fsz, d->payload_len - n * fsz);
	b->payload_xxh = ws_xxh_digest(&hs);
	ws_fmt_batch_encode_hdr(b, d->hdr);
	d->hdr_len = WS_BATCH_HDR_SIZE;
	d->hdr_xxh = ws_get_le64(d->hdr + WS_BATCH_HDR_HASH_OFF);
	if (snprintf(d->key, sizeof(d->key), "%s/b%016" PRIx64 "-%08" PRIx64 "-%016" PRIx64, d->key_prefix,
		     b->first_frame, b->frame_count, d->hdr_xxh) >= (int)sizeof(d->key))
		return WS_ETOOBIG;
	return 0;
}

/* Upload slots [from, to) (at most in_flight of them). */
static void upload(struct ws_pipe *p, uint32_t from, uint32_t to)
{
	struct ws_put_req reqs[64];
	struct iovec iov[64][2];
	bool run[64];
	uint32_t n = to - from, backoff = BLOCK_BACKOFF_MIN_MS;
	bool again;

	for (uint32_t i = 0; i < n; i++) {
		struct ws_pipe_desc *d = ws_pipe_desc(p, from + i);
		int frc = d->finish ? finish_batch(p, from + i, d) : 0;
		iov[i][0].iov_base = d->hdr;
		iov[i][0].iov_len = d->hdr_len;
		iov[i][1].iov_base = ws_pipe_slot(p, from + i);
		iov[i][1].iov_len = d->payload_len;
		memset(&reqs[i], 0, sizeof(reqs[i]));
		reqs[i].key = d->key;
		reqs[i].iov = iov[i];
		reqs[i].iovcnt = 2;
		/* Immutable objects named by their hash: an existing one is ours. */
		reqs[i].mode = WS_PUT_CREATE;
		reqs[i].rc = frc ? frc : 1; /* 1: not run yet */
		run[i] = frc == 0;
		d->throttle_retries = 0;
	}
	do {
		struct ws_put_req *todo[64];
		struct ws_put_req batch[64];
		uint32_t m = 0;
		int rc;

		for (uint32_t i = 0; i < n; i++)
			if (run[i] && reqs[i].rc != 0)
				todo[m++] = &reqs[i];
		for (uint32_t i = 0; i < m; i++) {
			batch[i] = *todo[i];
			batch[i].rc = 0;
			batch[i].throttle_retries = 0;
		}
		rc = ws_store_putv_many(p->store, batch, m);
		for (uint32_t i = 0; i < m; i++) {
			struct ws_pipe_desc *d = ws_pipe_desc(p, from + (uint32_t)(todo[i] - reqs));
			int r = rc ? rc : batch[i].rc;
			if (r == WS_EPRECOND)
				r = 0;
			todo[i]->rc = r;
			d->throttle_retries += batch[i].throttle_retries;
		}
		again = false;
		for (uint32_t i = 0; i < n; i++) {
			struct ws_pipe_desc *d = ws_pipe_desc(p, from + i);
			if (run[i] && reqs[i].rc != 0 && p->threaded && d->policy == WS_POLICY_BLOCK &&
			    transient(reqs[i].rc) &&
			    !__atomic_load_n(&p->ring.closed, __ATOMIC_ACQUIRE))
				again = true;
		}
		if (again) {
			ws_debug("upload: sink struggling (%s); block policy waits %u ms and retries",
				 ws_errmsg(), backoff);
			sleep_ms(backoff);
			backoff = backoff * 2 > BLOCK_BACKOFF_MAX_MS ? BLOCK_BACKOFF_MAX_MS : backoff * 2;
		}
	} while (again);
	for (uint32_t i = 0; i < n; i++)
		ws_pipe_desc(p, from + i)->rc = reqs[i].rc;
}

static void *uploader(void *arg)
{
	struct ws_pipe *p = arg;
	uint32_t next = 0;

	pthread_setname_np(pthread_self(), "ws-upload");
	for (;;) {
		uint32_t head = ws_ring_wait_head(&p->ring, next);
		if (head == next)
			break; /* closed and drained */
		while (next != head) {
			uint32_t n = head - next;
			if (n > p->in_flight)
				n = p->in_flight;
			upload(p, next, next + n);
			next += n;
			ws_ring_release(&p->ring, next);
		}
	}
	return NULL;
}

int ws_pipe_init(struct ws_pipe *p, uint8_t *mem, size_t slot_bytes, uint32_t nslots, struct ws_store *store,
		 unsigned in_flight, bool threaded)
{
	int rc;
	memset(p, 0, sizeof(*p));
	if (in_flight == 0 || in_flight > 64)
		return -EINVAL;
	rc = ws_ring_init(&p->ring, mem, slot_bytes, nslots, sizeof(struct ws_pipe_desc));
	if (rc)
		return rc;
	p->store = store;
	p->in_flight = in_flight;
	p->threaded = threaded;
	if (threaded) {
		rc = -pthread_create(&p->thread, NULL, uploader, p);
		if (rc) {
			ws_ring_destroy(&p->ring);
			return rc;
		}
		p->started = true;
	}
	return 0;
}

void ws_pipe_destroy(struct ws_pipe *p)
{
	if (p->started) {
		ws_ring_close(&p->ring);
		pthread_join(p->thread, NULL);
		p->started = false;
	}
	ws_ring_destroy(&p->ring);
}

/* Deliver results of every slot the uploader has finished. */
static void collect(struct ws_pipe *p)
{
	uint32_t tail = ws_ring_tail(&p->ring);
	while (p->collected != tail) {
		const struct ws_pipe_desc *d = ws_pipe_desc(p, p->collected);
		p->outstanding -= d->payload_len;
		if (p->on_done)
			p->on_done(p->arg, p->collected, d);
		p->collected++;
	}
}

int ws_pipe_reserve(struct ws_pipe *p, int timeout_ms, uint32_t *idx)
{
	int rc = ws_ring_reserve(&p->ring, timeout_ms, idx);
	collect(p);
	return rc;
}

void ws_pipe_publish(struct ws_pipe *p)
{
	uint32_t idx = p->ring.head;
	struct ws_pipe_desc *d = ws_pipe_desc(p, idx);
	p->outstanding += d->payload_len;
	ws_ring_publish(&p->ring);
	if (!p->threaded) {
		upload(p, idx, idx + 1);
		ws_ring_release(&p->ring, idx + 1);
		collect(p);
	}
}

void ws_pipe_drain(struct ws_pipe *p)
{
	(void)ws_ring_wait_tail(&p->ring, p->ring.head, -1);
	collect(p);
}
