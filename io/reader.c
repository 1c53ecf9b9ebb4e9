/*
 * WAL reader: io_uring with a registered buffer and fixed files, or pread.
 *
 * Reads are synchronous from the caller's point of view (one request in
 * flight): the shard verifies a frame before deciding what to read next, so
 * queue depth buys nothing here, while the registered buffer (no per-read
 * page pinning) and fixed files (no per-read fd lookup and refcount) cut the
 * kernel's per-read work. With SQPOLL a kernel thread picks submissions up,
 * so a busy shard can read without entering the kernel at all.
 *
 * Which path is used is decided once at open and always logged, with the
 * reason when it is the fallback.
 *
 * Registering a buffer faults in and pins every page of it: for a shard's
 * 64 MiB spill ring that took 10-240 ms here, before the first read, on the
 * path of every `replicate --once`. A buffer larger than one chunk (2 MiB) is
 * therefore registered as a sparse table of chunks, each registered on the
 * first read into it (reads are split at chunk boundaries), so the cost is
 * paid as the ring fills, while earlier slots are being uploaded, and a
 * ring that never fills never pins its tail. Kernels without sparse buffer
 * tables (before 5.19) get the whole buffer registered at open, as before.
 * A chunk whose registration fails is read with pread (logged once).
 */
#include "ws_assert.h"
#include "ws_reader.h"

#include <errno.h>
#include <limits.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ws_fault.h"
#include "ws_logging.h"
#include "ws_logging.h"

#define READER_ALIGN 4096u
/* One read in flight; a few spare entries cost nothing. */
#define READER_RING_ENTRIES 4u
/* How long the SQPOLL thread spins after the last submission before it
 * sleeps: long enough to cover the gap between two frames of a busy WAL,
 * short enough that an idle shard does not burn a core. */
#define READER_SQ_IDLE_MS 100u
/* The kernel caps one read at MAX_RW_COUNT (INT_MAX rounded down to a page)
 * and an sqe length is 32 bits; larger requests are split and looped. */
#define READER_CHUNK_MAX (1u << 30)
/* How long a SQPOLL reader spins on the CQ ring before sleeping in the
 * kernel: a few page-cache reads' worth, far below a scheduler tick. */
#define READER_SPIN_NS 50000L
/* Consecutive EINTR/EAGAIN results tolerated before the read gives up. */
#define READER_RETRY_MAX 16u
/* Lazily registered pieces of a large buffer (a huge page each), and the
 * kernel's limit on registered buffers (IORING_MAX_REG_BUFFERS). */
#define READER_REG_CHUNK ((size_t)2 << 20)
#define READER_REG_BUFS_MAX 16384u

struct ws_reader {
	enum ws_reader_backend backend;
	bool sqpoll;              /* ring was created with IORING_SETUP_SQPOLL */
	struct io_uring ring;     /* valid only when backend == WS_READER_URING */
	uint8_t *buf;
	size_t buf_bytes;
	size_t map_bytes;         /* buf is an mmap of this many bytes (0: posix_memalign) */
	bool foreign_buf;         /* buf belongs to the caller (ws_reader_open_over) */
	unsigned files_max;
	int *fds;                 /* slot -> fd, -1 when free */
	size_t chunk_bytes;       /* registered buffer i is buf[i * chunk_bytes, ...); 0: one, all of buf */
	uint8_t *chunk_ok;        /* chunk i is registered (chunk_bytes != 0) */
	bool chunk_warned;        /* a failed chunk registration was logged */
	struct ws_reader_stats stats;
};

#define TAG_SYNC 1u

/*
 * Create the ring, register the buffer and a sparse file table. Returns 0 or
 * a negative errno with *why naming the step, leaving no ring behind.
 */
static int uring_setup(struct ws_reader *r, unsigned flags, const char **why)
{
	struct io_uring_params p;
	struct iovec iov;
	int *table = NULL;
	unsigned i;
	int rc;

	memset(&p, 0, sizeof(p));
	if (flags & WS_READER_SQPOLL) {
		p.flags = IORING_SETUP_SQPOLL;
		p.sq_thread_idle = READER_SQ_IDLE_MS;
		rc = WS_FAULT("reader.sqpoll_init");
		if (rc == 0)
			rc = io_uring_queue_init_params(READER_RING_ENTRIES, &r->ring, &p);
		if (rc == 0) {
			r->sqpoll = true;
		} else {
			/* Older kernels need privileges for SQPOLL; a plain ring
			 * still gets registered buffers and fixed files. */
			ws_info("reader: io_uring SQPOLL unavailable (%s), using a ring without it",
				ws_strerror(rc));
			memset(&p, 0, sizeof(p));
		}
	}
	if (!r->sqpoll) {
		rc = WS_FAULT("reader.uring_init");
		if (rc == 0)
			rc = io_uring_queue_init_params(READER_RING_ENTRIES, &r->ring, &p);
		if (rc < 0) {
			*why = "io_uring_queue_init";
			return rc;
		}
	}

	rc = WS_FAULT("reader.register_buffers");
	if (rc == 0 && r->buf_bytes > READER_REG_CHUNK) {
		size_t chunk = READER_REG_CHUNK, n;
		while (r->buf_bytes / chunk >= READER_REG_BUFS_MAX)
			chunk *= 2;
		n = (r->buf_bytes + chunk - 1) / chunk;
		r->chunk_ok = calloc(n, 1);
		if (r->chunk_ok && io_uring_register_buffers_sparse(&r->ring, (unsigned)n) == 0) {
			r->chunk_bytes = chunk;
		} else {
			/* Before 5.19 (or no memory for the map): all of it now. */
			free(r->chunk_ok);
			r->chunk_ok = NULL;
		}
	}
	if (rc == 0 && !r->chunk_bytes) {
		iov.iov_base = r->buf;
		iov.iov_len = r->buf_bytes;
		rc = io_uring_register_buffers(&r->ring, &iov, 1);
	}
	if (rc < 0) {
		/* Typically -ENOMEM from RLIMIT_MEMLOCK on kernels that still
		 * charge registered pages to it. */
		*why = "io_uring_register_buffers";
		goto fail;
	}

	rc = WS_FAULT("reader.register_files");
	if (rc == 0)
		rc = io_uring_register_files_sparse(&r->ring, r->files_max);
	if (rc == -EINVAL) {
		/* Kernels before 5.19 lack IORING_RSRC_REGISTER_SPARSE but
		 * accept a table of -1 entries (since 5.5). */
		table = malloc(r->files_max * sizeof(*table));
		if (!table) {
			rc = -ENOMEM;
			*why = "file table allocation";
			goto fail;
		}
		for (i = 0; i < r->files_max; i++)
			table[i] = -1;
		rc = io_uring_register_files(&r->ring, table, r->files_max);
		free(table);
	}
	if (rc < 0) {
		*why = "io_uring_register_files";
		goto fail;
	}
	return 0;

fail:
	/* Tearing down the ring also drops whatever was registered on it. */
	io_uring_queue_exit(&r->ring);
	r->sqpoll = false;
	free(r->chunk_ok);
	r->chunk_ok = NULL;
	r->chunk_bytes = 0;
	return rc;
}

/*
 * Page-aligned so O_DIRECT reads would work too, and so registration pins
 * whole pages that belong to this buffer only. Buffers of 2 MiB and more
 * are mapped 2 MiB-aligned and asked to be transparent huge pages: a reader
 * that walks frame headers one 4 KiB page apart (the engine's tails) would
 * otherwise take a TLB miss on every frame, and a costly one in a VM.
 */
#define HUGE_BYTES ((size_t)2 << 20)

static int buf_alloc(struct ws_reader *r, void **out)
{
	if (r->buf_bytes >= HUGE_BYTES) {
		size_t len = (r->buf_bytes + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1);
		uint8_t *m = mmap(NULL, len + HUGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint8_t *a;
		if (m == MAP_FAILED)
			return -errno;
		a = (uint8_t *)(((uintptr_t)m + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
		/* Give back the unaligned head and the tail beyond len. */
		if (a > m)
			munmap(m, (size_t)(a - m));
		munmap(a + len, HUGE_BYTES - (size_t)(a - m));
		if (madvise(a, len, MADV_HUGEPAGE) != 0)
			ws_debug("reader: no transparent huge pages for the buffer: %s", strerror(errno));
		r->map_bytes = len;
		*out = a;
		return 0;
	}
	return -posix_memalign(out, READER_ALIGN, r->buf_bytes);
}

static void buf_free(struct ws_reader *r)
{
	if (!r->buf || r->foreign_buf)
		return;
	if (r->map_bytes)
		munmap(r->buf, r->map_bytes);
	else
		free(r->buf);
	r->buf = NULL;
}

static struct ws_reader *open_reader(uint8_t *over, size_t buf_bytes, unsigned files_max, unsigned flags,
				     int *err)
{
	struct ws_reader *r = NULL;
	const char *why = NULL;
	void *mem = NULL;
	unsigned i;
	int rc;

	if (buf_bytes == 0 || files_max == 0) {
		rc = ws_fail(-EINVAL, "reader: buf_bytes %zu and files_max %u must be > 0",
			     buf_bytes, files_max);
		goto fail;
	}
	if (buf_bytes > SIZE_MAX - (READER_ALIGN - 1) || files_max > INT_MAX) {
		rc = ws_fail(-EINVAL, "reader: buf_bytes %zu or files_max %u too large",
			     buf_bytes, files_max);
		goto fail;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		rc = -ENOMEM;
		goto fail;
	}
	r->buf_bytes = (buf_bytes + READER_ALIGN - 1) & ~(size_t)(READER_ALIGN - 1);
	r->files_max = files_max;
	r->fds = malloc(files_max * sizeof(*r->fds));
	if (!r->fds) {
		rc = ws_fail(-ENOMEM, "reader: no memory for %u file slots", files_max);
		goto fail;
	}
	for (i = 0; i < files_max; i++)
		r->fds[i] = -1;
	if (over) {
		/* Someone else's memory (page aligned, buf_bytes long). */
		if ((uintptr_t)over % READER_ALIGN || buf_bytes % READER_ALIGN) {
			rc = ws_fail(-EINVAL, "reader: memory at %p (%zu bytes) is not page aligned", (void *)over,
				     buf_bytes);
			goto fail;
		}
		r->foreign_buf = true;
		mem = over;
	} else {
		rc = buf_alloc(r, &mem);
		if (rc != 0) {
			rc = ws_fail(rc, "reader: no memory for a %zu-byte buffer", r->buf_bytes);
			goto fail;
		}
	}
	r->buf = mem;

	r->backend = WS_READER_PREAD;
	if (flags & WS_READER_FORCE_PREAD) {
		ws_info("reader: using pread (forced by WS_READER_FORCE_PREAD)");
	} else if ((rc = uring_setup(r, flags, &why)) < 0) {
		ws_warn("reader: io_uring unavailable (%s: %s), falling back to pread",
			why, ws_strerror(rc));
	} else {
		r->backend = WS_READER_URING;
		ws_info("reader: using io_uring%s, %zu-byte registered buffer, %u fixed files",
			r->sqpoll ? " with SQPOLL" : "", r->buf_bytes, files_max);
	}
	return r;

fail:
	if (r) {
		buf_free(r);
		free(r->fds);
		free(r);
	}
	*err = rc;
	return NULL;
}

struct ws_reader *ws_reader_open(size_t buf_bytes, unsigned files_max, unsigned flags, int *err)
{
	return open_reader(NULL, buf_bytes, files_max, flags, err);
}

struct ws_reader *ws_reader_open_over(uint8_t *mem, size_t bytes, unsigned files_max, unsigned flags, int *err)
{
	if (!mem)
		return *err = ws_fail(-EINVAL, "reader: no memory to read into"), NULL;
	return open_reader(mem, bytes, files_max, flags, err);
}

void ws_reader_close(struct ws_reader *r)
{
	if (!r)
		return;
	if (r->backend == WS_READER_URING)
		io_uring_queue_exit(&r->ring);
	buf_free(r);
	free(r->chunk_ok);
	free(r->fds);
	free(r);
}

enum ws_reader_backend ws_reader_backend(const struct ws_reader *r)
{
	return r->backend;
}

const char *ws_reader_backend_name(const struct ws_reader *r)
{
	return r->backend == WS_READER_URING ? "io_uring" : "pread";
}

uint8_t *ws_reader_buf(struct ws_reader *r)
{
	return r->buf;
}

size_t ws_reader_buf_bytes(const struct ws_reader *r)
{
	return r->buf_bytes;
}

void ws_reader_get_stats(const struct ws_reader *r, struct ws_reader_stats *out)
{
	*out = r->stats;
}

int ws_reader_attach(struct ws_reader *r, int fd)
{
	unsigned slot;
	int rc;

	if (fd < 0)
		return ws_fail(-EBADF, "reader: attach of fd %d", fd);
	for (slot = 0; slot < r->files_max; slot++)
		if (r->fds[slot] < 0)
			break;
	if (slot == r->files_max)
		return ws_fail(-ENOSPC, "reader: all %u file slots in use", r->files_max);
	if (r->backend == WS_READER_URING) {
		rc = WS_FAULT("reader.attach");
		if (rc == 0)
			rc = io_uring_register_files_update(&r->ring, slot, &fd, 1);
		if (rc < 0)
			return ws_fail(rc, "reader: registering fd %d in slot %u: %s",
				       fd, slot, ws_strerror(rc));
	}
	r->fds[slot] = fd;
	return (int)slot;
}

void ws_reader_detach(struct ws_reader *r, int slot)
{
	int none = -1;
	int rc;

	if (slot < 0 || (unsigned)slot >= r->files_max || r->fds[slot] < 0)
		return;
	if (r->backend == WS_READER_URING) {
		/* The kernel keeps its own reference until in-flight requests
		 * finish, so the caller may close fd as soon as this returns.
		 * Failure here would leave a stale registration, not a
		 * dangling fd; log it because the slot is still reused. */
		rc = io_uring_register_files_update(&r->ring, (unsigned)slot, &none, 1);
		if (rc < 0)
			ws_warn("reader: unregistering slot %d: %s", slot, ws_strerror(rc));
	}
	r->fds[slot] = -1;
}

/*
 * Wait for the one completion; counts the system call only when one is made.
 * With SQPOLL the kernel thread is already working on the request, and a
 * page-cache read completes in microseconds, so spin on the CQ ring for a
 * bounded time first: that is what lets a busy shard read without entering
 * the kernel at all. Without SQPOLL the completion usually is there already
 * (submit_and_wait waited for it).
 */
static int uring_wait(struct ws_reader *r, struct io_uring_cqe **cqe)
{
	struct timespec t0, t;
	unsigned spins;
	int rc;

	if (r->sqpoll && io_uring_peek_cqe(&r->ring, cqe) != 0) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (spins = 1;; spins++) {
			if (io_uring_peek_cqe(&r->ring, cqe) == 0)
				return 0;
			/* Read the clock (vDSO, no system call) only now and then. */
			if (spins % 64 == 0) {
				clock_gettime(CLOCK_MONOTONIC, &t);
				if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) >
				    READER_SPIN_NS)
					break;
			}
		}
	}
	for (;;) {
		if (io_uring_peek_cqe(&r->ring, cqe) == 0)
			return 0;
		r->stats.submits++;
		rc = io_uring_wait_cqe(&r->ring, cqe);
		if (rc != -EINTR)
			return rc;
	}
}

/* Wait for the completion tagged `tag` (one request is in flight at a time). */
static int wait_for(struct ws_reader *r, uint64_t tag, int *res)
{
	for (;;) {
		struct io_uring_cqe *cqe;
		int rc = uring_wait(r, &cqe);
		uint64_t ud;
		int v;
		if (rc < 0)
			return rc;
		ud = cqe->user_data;
		v = cqe->res;
		io_uring_cqe_seen(&r->ring, cqe);
		if (ud == tag) {
			*res = v;
			return 0;
		}
	}
}

static ssize_t uring_read_once(struct ws_reader *r, int slot, uint64_t off, uint8_t *dst, unsigned len,
			       unsigned buf_index)
{
	struct io_uring_sqe *sqe;
	bool need_wakeup;
	int res, rc;

	sqe = io_uring_get_sqe(&r->ring);
	/* One request in flight at a time, so the SQ is never full here. */
	if (!sqe)
		return -EBUSY;
	io_uring_prep_read_fixed(sqe, slot, dst, len, off, (int)buf_index);
	sqe->flags |= IOSQE_FIXED_FILE;
	sqe->user_data = TAG_SYNC;

	if (r->sqpoll) {
		/* With SQPOLL, io_uring_submit enters the kernel only to wake a
		 * sleeping poller. This relaxed load pairs with the SQ thread's
		 * store of IORING_SQ_NEED_WAKEUP before it sleeps; liburing makes
		 * the same check (behind a full barrier) to decide whether to
		 * enter. It only feeds the count: a stale answer makes the count
		 * off by one, never the data wrong. */
		need_wakeup = IO_URING_READ_ONCE(*r->ring.sq.kflags) & IORING_SQ_NEED_WAKEUP;
		rc = io_uring_submit(&r->ring);
		if (need_wakeup)
			r->stats.submits++;
		if (rc < 0)
			return rc;
		rc = wait_for(r, TAG_SYNC, &res);
	} else {
		do {
			/* Submit and wait in one io_uring_enter. */
			r->stats.submits++;
			rc = io_uring_submit_and_wait(&r->ring, 1);
		} while (rc == -EINTR);
		if (rc >= 0)
			rc = wait_for(r, TAG_SYNC, &res);
	}
	if (rc < 0)
		return rc;
	return res;
}

/*
 * Registers chunk ci of a lazily registered buffer if it is not yet.
 * Returns 0, or a negative errno (the caller reads that piece with pread).
 */
static int chunk_register(struct ws_reader *r, size_t ci)
{
	size_t start = ci * r->chunk_bytes;
	struct iovec iov = { .iov_base = r->buf + start, .iov_len = r->buf_bytes - start };
	__u64 tag = 0;
	int rc;

	if (r->chunk_ok[ci])
		return 0;
	if (iov.iov_len > r->chunk_bytes)
		iov.iov_len = r->chunk_bytes;
	rc = WS_FAULT("reader.register_chunk");
	if (rc == 0)
		rc = io_uring_register_buffers_update_tag(&r->ring, (unsigned)ci, &iov, &tag, 1);
	if (rc == 1) {
		r->chunk_ok[ci] = 1;
		return 0;
	}
	rc = rc < 0 ? rc : -EIO;
	if (!r->chunk_warned) {
		r->chunk_warned = true;
		ws_warn("reader: registering buffer chunk %zu (%zu bytes): %s; reading it with pread until "
			"it registers", ci, iov.iov_len, ws_strerror(rc));
	}
	return rc;
}

ssize_t ws_reader_read(struct ws_reader *r, int slot, uint64_t off, size_t buf_off, size_t len)
{
	unsigned retries = 0;
	size_t done = 0;
	ssize_t n;
	int fd;

	if (slot < 0 || (unsigned)slot >= r->files_max || r->fds[slot] < 0)
		return ws_fail(-EBADF, "reader: read from unattached slot %d", slot);
	if (buf_off > r->buf_bytes || len > r->buf_bytes - buf_off)
		return ws_fail(-EINVAL, "reader: %zu bytes at buffer offset %zu exceed the %zu-byte buffer",
			       len, buf_off, r->buf_bytes);
	if (off > (uint64_t)INT64_MAX - len)
		return ws_fail(-EINVAL, "reader: file offset %llu + %zu overflows",
			       (unsigned long long)off, len);
	fd = r->fds[slot];

	while (done < len) {
		size_t want = len - done;
		int rc = WS_FAULT("reader.read");

		if (rc < 0)
			return ws_fail(rc, "reader: read of fd %d at %llu: injected fault",
				       fd, (unsigned long long)(off + done));
		if (want > READER_CHUNK_MAX)
			want = READER_CHUNK_MAX;
		size_t ci = 0;
		bool fixed = r->backend == WS_READER_URING;
		if (fixed && r->chunk_bytes) {
			/* A fixed read stays inside one registered chunk. */
			size_t pos = buf_off + done, room;
			ci = pos / r->chunk_bytes;
			room = (ci + 1) * r->chunk_bytes - pos;
			if (want > room)
				want = room;
			fixed = chunk_register(r, ci) == 0;
		}
		/* The contract checked above: every piece lands inside the buffer. */
		WS_ASSERT(want > 0 && done + want <= len && buf_off + done + want <= r->buf_bytes);
		if (fixed) {
			n = uring_read_once(r, slot, off + done, r->buf + buf_off + done, (unsigned)want,
					    (unsigned)ci);
		} else {
			r->stats.submits++;
			n = pread(fd, r->buf + buf_off + done, want, (off_t)(off + done));
			if (n < 0)
				n = -errno;
		}
		if ((n == -EINTR || n == -EAGAIN) && ++retries < READER_RETRY_MAX)
			continue;
		if (n < 0)
			return ws_fail((int)n, "reader: read of fd %d at %llu: %s", fd,
				       (unsigned long long)(off + done), ws_strerror((int)n));
		if (n == 0)
			break;  /* end of file: a short read, not an error */
		WS_ASSERT((size_t)n <= want); /* no read runs past what it asked for */
		done += (size_t)n;
		retries = 0;
	}
	r->stats.reads++;
	r->stats.bytes += done;
	return (ssize_t)done;
}
