#include "pipe.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ws_assert.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_hash.h"
#include "ws_logging.h"
#include "ws_wal.h"


void ws_pipe_describe_batch(struct ws_pipe_desc *d, const struct ws_pipe_batch_spec *s)
{
	/* Only a tail's first slot may be held for its manifest (inline), and
	 * a slot reads at most a full slot's frames. */
	WS_ASSERT(!s->hold || s->first_slot);
	WS_ASSERT(s->want > 0 && s->want <= s->per_chunk);
	memset(&d->batch, 0, sizeof(d->batch));
	d->batch.gen = s->gen;
	d->batch.first_frame = s->first_frame;
	d->batch.seed_cksum[0] = s->seed_cksum[0];
	d->batch.seed_cksum[1] = s->seed_cksum[1];
	d->first_slot = s->first_slot;
	d->hold = s->hold;
	d->wal_fd = s->wal_fd;
	d->wal_off = s->wal_off;
	d->want = s->want;
	d->per_chunk = s->per_chunk;
	WS_ASSERT(!s->src || (s->first_slot && !s->delegated));
	WS_ASSERT(s->src_frames <= s->want && !s->src == !s->src_frames);
	d->src = s->src;
	d->src_frames = s->src_frames;
	snprintf(d->key_prefix, sizeof(d->key_prefix), "%s", s->key_prefix);
	d->key_seq = s->key_seq;
	d->delegated = s->delegated;
	d->seal = s->seal;
	d->sealed = false;
	memset(&d->chk, 0, sizeof(d->chk)); /* R fills it: nothing of a slot's last use */
}

/*
 * The slot's checked frames as an object: a version 1 header (the frames
 * go from the slot), or sealed into the slot's seal buffer under a
 * version 2 one (compressed, encrypted; ws_seal.h).
 */
static int seal_slot(struct ws_pipe *p, uint32_t idx, struct ws_pipe_desc *d, const uint8_t *frames)
{
	size_t hl, stored;
	int rc;
	d->sealed = false;
	if (!ws_seal_on(d->seal)) {
		d->hdr_len = (uint32_t)ws_fmt_batch_encode_hdr(&d->batch, d->hdr);
		return 0;
	}
	WS_ASSERT(p->seal_mem); /* ws_pipe_seal_reserve ran before a sealing slot was published */
	rc = ws_seal_batch(d->seal, &d->batch, &(struct iovec){ (void *)(uintptr_t)frames, (size_t)d->payload_len }, 1, d->hdr,
			   &hl, ws_pipe_seal_buf(p, idx), p->seal_slot_bytes, &stored);
	if (rc)
		return rc;
	d->hdr_len = (uint32_t)hl;
	d->payload_len = stored;
	d->sealed = true;
	return 0;
}

static void *sealer(void *arg);

/* Start the sealing thread where the upload thread reads slots; without
 * its ring or thread the upload thread goes on reading them itself. */
static void start_sealer(struct ws_pipe *p)
{
	int err = 0;
	if (!p->reader || p->s_reader)
		return;
	p->s_reader = ws_reader_open_over(p->ring.mem, p->ring.slot_bytes * p->ring.nslots, 1, 0, &err);
	if (p->s_reader && ws_reader_backend(p->s_reader) != WS_READER_URING) {
		ws_reader_close(p->s_reader);
		p->s_reader = NULL;
	}
	if (!p->s_reader) {
		/* Still correct, slower: sealing shares the upload thread. */
		ws_warn("pipe: no io_uring for a sealing thread (%s); the upload thread seals the shard's "
			"objects itself", err ? strerror(err < 0 ? -err : err) : "not io_uring");
		return;
	}
	pthread_mutex_init(&p->s_mu, NULL);
	pthread_cond_init(&p->s_cv, NULL);
	/* Only the producer publishes: every slot from head on is the
	 * sealing thread's to read. */
	p->seal_from = p->s_pub = p->s_done = p->ring.head;
	if (pthread_create(&p->s_thread, NULL, sealer, p) != 0) {
		ws_warn("pipe: cannot start a sealing thread; the upload thread seals the shard's objects itself");
		pthread_cond_destroy(&p->s_cv);
		pthread_mutex_destroy(&p->s_mu);
		ws_reader_close(p->s_reader);
		p->s_reader = NULL;
		return;
	}
	/* Before any slot from seal_from is published (P1 orders it for U). */
	__atomic_store_n(&p->sealing, 1, __ATOMIC_RELEASE);
}

int ws_pipe_seal_reserve(struct ws_pipe *p)
{
	const struct ws_seal most = { .codec = WS_FMT_CODEC_ZSTD, .key = &(struct ws_seal_key){ 0 } };
	if (p->seal_mem)
		return 0;
	p->seal_slot_bytes = ws_seal_bound(&most, p->ring.slot_bytes);
	p->seal_mem = malloc(p->seal_slot_bytes * p->ring.nslots);
	if (!p->seal_mem)
		return -ENOMEM;
	start_sealer(p);
	return 0;
}

/* WAL bytes read at a time: small enough to stay in L2 until checked. */
#define FILL_READ_BYTES ((size_t)256 << 10)

static int fill_slot(struct ws_pipe *p, struct ws_reader *r, int fslot, size_t ring_off, uint32_t idx,
		     struct ws_pipe_desc *d)
{
	struct ws_fmt_batch *b = &d->batch;
	struct ws_batch_check *c = &d->chk;
	const uint32_t fsz = ws_wal_frame_size(b->gen.page_size);
	const bool be = b->gen.wal_magic == WS_WAL_MAGIC_BE;
	uint8_t *frames = ws_pipe_slot(p, idx);
	const size_t boff = ring_off + (size_t)(frames - p->ring.mem);
	const uint32_t sub = FILL_READ_BYTES / fsz ? (uint32_t)(FILL_READ_BYTES / fsz) : 1;
	struct ws_xxh_state hs;
	struct ws_wal_frame_hdr fh;
	uint32_t have = 0;
	ssize_t got;

	/* R reads what the tail described into that slot only (d->checked is
	 * set at publish, after the tail's own read). */
	WS_ASSERT(d->want > 0 && (size_t)d->want * fsz <= p->ring.slot_bytes);
	memset(c, 0, sizeof(*c));
	d->hdr_len = 0;
	d->payload_len = 0;
	if (!d->first_slot) {
		/* The frame before this slot: its stored checksum seeds ours. It
		 * is read now, maybe long after the slot before was: the tail's
		 * merge keeps this slot only if the two agree. */
		got = ws_reader_read(r, fslot, d->wal_off - fsz, boff, WS_WAL_FRAME_HDR_SIZE);
		if (got < 0)
			return (int)got;
		if (got < (ssize_t)WS_WAL_FRAME_HDR_SIZE) {
			c->filled = true; /* the file is shorter now: nothing here belongs to the chain */
			c->run.ended = true;
			return 0;
		}
		ws_wal_frame_hdr_decode(frames, &fh);
		b->seed_cksum[0] = fh.cksum1;
		b->seed_cksum[1] = fh.cksum2;
	}
	c->run.first_frame = b->first_frame;
	c->run.seed[0] = b->seed_cksum[0];
	c->run.seed[1] = b->seed_cksum[1];
	ws_xxh_reset(&hs);
	while (have < d->want && !c->run.ended) {
		uint32_t n = d->want - have < sub ? d->want - have : sub;
		if (have < d->src_frames) {
			/* Read ahead of the tail, from this file at this offset. */
			if (n > d->src_frames - have)
				n = d->src_frames - have;
			memcpy(frames + (size_t)have * fsz, d->src + (size_t)have * fsz, (size_t)n * fsz);
			got = (ssize_t)((size_t)n * fsz);
		} else {
			got = ws_reader_read(r, fslot, d->wal_off + (uint64_t)have * fsz, boff + (size_t)have * fsz,
					     (size_t)n * fsz);
		}
		if (got < 0)
			return (int)got;
		uint32_t whole = (uint32_t)((size_t)got / fsz);
		ws_wal_run_check(&c->run, be, b->gen.page_size, b->gen.salt1, b->gen.salt2,
				 frames + (size_t)have * fsz, whole, &hs);
		have += whole;
		if (whole < n)
			c->run.ended = true; /* the file ended */
	}
	c->cont = !c->run.ended && c->run.valid == d->want && d->want == d->per_chunk;
	/* A full, valid slot goes whole (its transaction may go on); otherwise
	 * only up to its last commit. */
	if (c->cont)
		c->ship = c->run.valid;
	else if (c->run.last_commit >= b->first_frame)
		c->ship = (uint32_t)(c->run.last_commit - b->first_frame + 1);
	if (c->ship == 0) {
		c->filled = true;
		return 0;
	}
	WS_ASSERT(c->ship <= c->run.valid && c->ship <= d->want); /* never ships a frame it did not check */
	const uint8_t *last = frames + (size_t)(c->ship - 1) * fsz;
	b->frame_count = c->ship;
	ws_wal_frame_hdr_decode(last, &fh);
	b->end_cksum[0] = fh.cksum1;
	b->end_cksum[1] = fh.cksum2;
	/* The hash covers the valid frames; a batch cut at its last commit is
	 * hashed again (only where a transaction was still being written). */
	b->payload_xxh = c->ship == c->run.valid ? ws_xxh_digest(&hs) : ws_xxh64(frames, (size_t)c->ship * fsz);
	d->payload_len = (uint64_t)c->ship * fsz;
	int rc = seal_slot(p, idx, d, frames);
	if (rc)
		return rc;
	const bool named = ws_fmt_obj_hdr_hash(d->hdr, d->hdr_len, &d->hdr_xxh);
	WS_ASSERT(named); /* the header just encoded */
	if (snprintf(d->key, sizeof(d->key), "%s/b%016" PRIx64 "-%08" PRIx64 "-%016" PRIx64 "-%016" PRIx64,
		     d->key_prefix, b->first_frame, b->frame_count, d->hdr_xxh, d->key_seq) >= (int)sizeof(d->key))
		return WS_ETOOBIG;
	c->filled = true;
	return 0;
}

/* The read sites pause or fail a slot's read in whichever thread reads it. */
int ws_pipe_fill(struct ws_pipe *p, struct ws_reader *r, int fslot, size_t ring_off, uint32_t idx,
		 struct ws_pipe_desc *d)
{
	int rc = WS_FAULT("stream.before_wal_read");
	if (rc == 0)
		rc = fill_slot(p, r, fslot, ring_off, idx, d);
	if (rc == 0)
		rc = WS_FAULT("stream.after_wal_read");
	return rc;
}

/* The upload thread reads a slot the tail only described, with its own
 * ring over the same memory; the WAL is attached for this read only (the
 * tail keeps the descriptor open until its slots are done). */
static int fill_delegated(struct ws_pipe *p, struct ws_reader *r, uint32_t idx, struct ws_pipe_desc *d)
{
	int fslot;
	int rc;
	WS_ASSERT(d->delegated && r); /* U (or S) reads only what T handed it */
	fslot = ws_reader_attach(r, d->wal_fd);
	if (fslot < 0)
		return fslot;
	rc = ws_pipe_fill(p, r, fslot, 0, idx, d);
	ws_reader_detach(r, fslot);
	return rc;
}

/* The sealing thread: each delegated slot published from seal_from on,
 * in order, read, checked and sealed; progress in s_done. */
static void *sealer(void *arg)
{
	struct ws_pipe *p = arg;
	pthread_setname_np(pthread_self(), "ws-seal");
	pthread_mutex_lock(&p->s_mu);
	for (;;) {
		while (p->s_done == p->s_pub && !p->s_stop)
			pthread_cond_wait(&p->s_cv, &p->s_mu);
		if (p->s_done == p->s_pub)
			break; /* stopped, and every slot passed on is done */
		uint32_t idx = p->s_done;
		pthread_mutex_unlock(&p->s_mu);
		struct ws_pipe_desc *d = ws_pipe_desc(p, idx);
		if (d->checked && d->delegated)
			d->fill_rc = fill_delegated(p, p->s_reader, idx, d);
		pthread_mutex_lock(&p->s_mu);
		p->s_done = idx + 1;
		pthread_cond_broadcast(&p->s_cv);
	}
	pthread_mutex_unlock(&p->s_mu);
	return NULL;
}

/* U: whether the sealing thread reads published slot idx's (if delegated). */
static bool sealer_has(struct ws_pipe *p, uint32_t idx)
{
	return __atomic_load_n(&p->sealing, __ATOMIC_ACQUIRE) && (int32_t)(idx - p->seal_from) >= 0;
}

/* U: wait until the sealing thread is past slot idx; the slots it passed
 * from idx on (at least 1). */
static uint32_t sealer_wait(struct ws_pipe *p, uint32_t idx)
{
	uint32_t done;
	pthread_mutex_lock(&p->s_mu);
	while ((int32_t)(p->s_done - idx) <= 0)
		pthread_cond_wait(&p->s_cv, &p->s_mu);
	done = p->s_done;
	pthread_mutex_unlock(&p->s_mu);
	return done - idx;
}

/* Upload slots [from, to) (at most in_flight of them). */
static void upload(struct ws_pipe *p, uint32_t from, uint32_t to)
{
	struct ws_put_req reqs[64];
	struct iovec iov[64][2];
	bool run[64];
	uint32_t n = to - from, backoff = WS_PIPE_BACKOFF_MIN_MS;
	bool again;

	for (uint32_t i = 0; i < n; i++) {
		struct ws_pipe_desc *d = ws_pipe_desc(p, from + i);
		int frc = 0;
		bool send = true;
		if (d->checked) {
			/* In publish order: once a slot of this tail ended the
			 * chain, later ones (read ahead of knowing it) are not
			 * part of it and are not sent. */
			if (d->first_slot)
				p->chain_broken = false;
			const bool by_sealer = d->delegated && sealer_has(p, from + i);
			/* The sealing thread's writes to the slot come before ours. */
			if (by_sealer && sealer_wait(p, from + i) > 0)
				frc = d->fill_rc;
			d->chk.dropped = p->chain_broken;
			if (d->chk.dropped)
				frc = 0; /* read ahead of knowing the chain ended before it: not sent */
			else if (d->delegated && !by_sealer)
				frc = fill_delegated(p, p->reader, from + i, d);
			/* A slot whose seed is not where the chain before it ended
			 * holds frames rewritten meanwhile (another chain): the
			 * tail's merge ends the chain there, and it is not sent. */
			if (!d->chk.dropped && !frc && d->chk.filled && !d->first_slot &&
			    (d->batch.seed_cksum[0] != p->chain_end[0] || d->batch.seed_cksum[1] != p->chain_end[1]))
				d->chk.dropped = true;
			if (!d->chk.dropped && !frc && d->chk.filled) {
				p->chain_end[0] = d->chk.run.end_cksum[0];
				p->chain_end[1] = d->chk.run.end_cksum[1];
			}
			if (d->chk.dropped || frc || !d->chk.cont)
				p->chain_broken = true;
			send = !d->chk.dropped && d->chk.ship > 0 && !d->hold;
		}
		iov[i][0].iov_base = d->hdr;
		iov[i][0].iov_len = d->hdr_len;
		iov[i][1].iov_base = ws_pipe_payload(p, from + i, d);
		iov[i][1].iov_len = d->payload_len;
		memset(&reqs[i], 0, sizeof(reqs[i]));
		reqs[i].key = d->key;
		reqs[i].iov = iov[i];
		reqs[i].iovcnt = 2;
		/* Immutable objects named by their hash: an existing one is ours. */
		reqs[i].mode = WS_PUT_CREATE;
		reqs[i].rc = frc ? frc : send ? 1 : 0; /* 1: not run yet */
		run[i] = frc == 0 && send;
		d->throttle_retries = 0;
		d->why[0] = '\0';
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
		/* A store that asked for a pause (Retry-After) gets it before
		 * anything new is sent. */
		if (p->adaptive && m > 0) {
			uint64_t wait = ws_aimd_wait_ms(&p->aimd, ws_mono_ms());
			if (wait)
				ws_sleep_ms((uint32_t)wait);
		}
		rc = ws_store_putv_many(p->store, batch, m);
		uint32_t ok = 0, throttled = 0;
		uint64_t retry_until = 0;
		for (uint32_t i = 0; i < m; i++) {
			struct ws_pipe_desc *d = ws_pipe_desc(p, from + (uint32_t)(todo[i] - reqs));
			int r = rc ? rc : batch[i].rc;
			d->why[0] = '\0'; /* this round's */
			if (r == WS_EPRECOND) {
				r = ws_store_created_same(p->store, batch[i].key, batch[i].iov, batch[i].iovcnt);
				if (r)
					snprintf(d->why, sizeof(d->why), "%s", ws_errmsg());
			}
			todo[i]->rc = r;
			d->throttle_retries += batch[i].throttle_retries;
			if (batch[i].throttle_retries || r == WS_ETHROTTLED)
				throttled++;
			else if (r == 0)
				ok++;
			if (batch[i].retry_until_ms > retry_until)
				retry_until = batch[i].retry_until_ms;
		}
		if (p->adaptive) {
			ws_aimd_round(&p->aimd, ok, throttled, retry_until, ws_mono_ms());
			__atomic_store_n(&p->window, ws_aimd_window(&p->aimd), __ATOMIC_RELAXED);
			__atomic_store_n(&p->decreases, p->aimd.decreases, __ATOMIC_RELAXED);
		}
		again = false;
		for (uint32_t i = 0; i < n; i++) {
			struct ws_pipe_desc *d = ws_pipe_desc(p, from + i);
			if (run[i] && reqs[i].rc != 0 && ws_pipe_waits_out(p, d->policy, reqs[i].rc)) {
				again = true;
				/* Sent again because the store kept throttling it:
				 * a retry the store's own count does not hold. */
				if (reqs[i].rc == WS_ETHROTTLED)
					d->throttle_retries++;
			}
		}
		if (again) {
			ws_debug("upload: sink struggling (%s); block policy waits %u ms and retries",
				 ws_errmsg(), backoff);
			ws_sleep_ms(backoff);
			backoff = ws_pipe_backoff_next(backoff);
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
			/* Relaxed: only this thread writes the window. */
			uint32_t cap = p->adaptive ? __atomic_load_n(&p->window, __ATOMIC_RELAXED) : p->in_flight;
			if (n > cap)
				n = cap;
			/* Only what the sealing thread has passed goes in one
			 * round: a slot it is still sealing waits, not those
			 * before it. */
			if (sealer_has(p, next)) {
				uint32_t ready = sealer_wait(p, next);
				if (n > ready)
					n = ready;
			}
			upload(p, next, next + n);
			next += n;
			ws_ring_release(&p->ring, next);
		}
	}
	return NULL;
}

int ws_pipe_init(struct ws_pipe *p, uint8_t *mem, size_t slot_bytes, uint32_t nslots, struct ws_store *store,
		 unsigned in_flight, bool threaded, bool uring)
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
	p->window = in_flight;
	ws_aimd_init(&p->aimd, in_flight);
	p->threaded = threaded;
	if (threaded && uring) {
		/* A ring of the upload thread's own over the slots, so it can read
		 * some of them itself; without io_uring the tail reads them all. */
		int err = 0;
		p->reader = ws_reader_open_over(mem, slot_bytes * nslots, 1, 0, &err);
		if (p->reader && ws_reader_backend(p->reader) != WS_READER_URING) {
			ws_reader_close(p->reader);
			p->reader = NULL;
		}
	}
	if (threaded) {
		rc = -pthread_create(&p->thread, NULL, uploader, p);
		if (rc) {
			ws_reader_close(p->reader);
			p->reader = NULL;
			ws_ring_destroy(&p->ring);
			return rc;
		}
		p->started = true;
	}
	return 0;
}

void ws_pipe_set_adaptive(struct ws_pipe *p, bool on)
{
	/* Before any publish: the ring's release/acquire orders it for the
	 * upload thread, which reads it only for a published slot. */
	p->adaptive = on;
}

void ws_pipe_give_up(struct ws_pipe *p) { __atomic_store_n(&p->giving_up, 1, __ATOMIC_RELEASE); }

bool ws_pipe_waits_out(struct ws_pipe *p, enum ws_policy policy, int err)
{
	return p->threaded && policy == WS_POLICY_BLOCK && ws_err_transient(err) &&
	       !__atomic_load_n(&p->ring.closed, __ATOMIC_ACQUIRE) && !__atomic_load_n(&p->giving_up, __ATOMIC_ACQUIRE);
}

void ws_pipe_destroy(struct ws_pipe *p)
{
	if (p->started) {
		ws_ring_close(&p->ring);
		pthread_join(p->thread, NULL);
		p->started = false;
	}
	/* After the upload thread: it waits on the sealing thread's slots. */
	if (p->s_reader) {
		pthread_mutex_lock(&p->s_mu);
		p->s_stop = 1;
		pthread_cond_broadcast(&p->s_cv);
		pthread_mutex_unlock(&p->s_mu);
		pthread_join(p->s_thread, NULL);
		pthread_cond_destroy(&p->s_cv);
		pthread_mutex_destroy(&p->s_mu);
		ws_reader_close(p->s_reader);
		p->s_reader = NULL;
		p->sealing = 0;
	}
	ws_reader_close(p->reader);
	p->reader = NULL;
	ws_ring_destroy(&p->ring);
	free(p->seal_mem);
	p->seal_mem = NULL;
}

/* What a published slot counts for in outstanding: its payload, or for a
 * checked batch (whose length is known only once it is read) all it may
 * hold. The uploader changes neither input. */
static uint64_t accounted(const struct ws_pipe_desc *d)
{
	return d->checked ? (uint64_t)d->want * ws_wal_frame_size(d->batch.gen.page_size) : d->payload_len;
}

/* Deliver results of every slot the uploader has finished. */
static void collect(struct ws_pipe *p)
{
	uint32_t tail = ws_ring_tail(&p->ring);
	while (p->collected != tail) {
		const struct ws_pipe_desc *d = ws_pipe_desc(p, p->collected);
		/* T's count: accounted() reads only T fields, which U leaves alone. */
		WS_ASSERT(p->outstanding >= accounted(d));
		p->outstanding -= accounted(d);
		if (p->on_done)
			p->on_done(p->arg, p->collected, d);
		p->collected++;
	}
}

/*
 * Results are collected from released slots, whose buffers the ring hands
 * to the next reserved one (most recently released first): collected
 * before that slot is taken, and only collected slots give up their
 * buffers. Otherwise a slot's results (the event channel's Changed slices,
 * read from its frames) would be read from a buffer already refilled.
 */
int ws_pipe_reserve(struct ws_pipe *p, int timeout_ms, uint32_t *idx)
{
	int rc = ws_ring_wait_room(&p->ring, timeout_ms);
	collect(p);
	if (rc == 0)
		*idx = ws_ring_take(&p->ring, p->collected);
	return rc;
}

void ws_pipe_publish(struct ws_pipe *p)
{
	uint32_t idx = p->ring.head;
	struct ws_pipe_desc *d = ws_pipe_desc(p, idx);
	/* T's fields agree: only a checked batch is read elsewhere or held. */
	WS_ASSERT(d->checked || (!d->delegated && !d->hold));
	p->outstanding += accounted(d);
	ws_ring_publish(&p->ring);
	if (p->s_reader) {
		/* The sealing thread passes every slot in order; it reads only
		 * the delegated ones. */
		pthread_mutex_lock(&p->s_mu);
		p->s_pub = idx + 1;
		pthread_cond_broadcast(&p->s_cv);
		pthread_mutex_unlock(&p->s_mu);
	}
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
	WS_ASSERT(p->collected != p->ring.head || p->outstanding == 0);
}
