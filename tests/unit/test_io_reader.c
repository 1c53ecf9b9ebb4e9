/*
 * io/reader.c: io_uring and pread paths read the same bytes, slots, limits,
 * stats, and the fallbacks (driven by fault sites) are logged, never silent.
 */
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ws_fault.h"
#include "ws_logging.h"
#include "ws_reader.h"

/* Not a multiple of 4096, so reads near the end are short. */
#define FILE_BYTES ((size_t)(1u << 20) + 1234u)
#define BUF_BYTES ((size_t)(2u << 20))

struct fixture {
	char *dir;
	char *path;
	uint8_t *data;
	int fd;
};

/* Log capture: every message since the last reset, joined. */
static char log_text[8192];

static void log_capture(enum ws_log_level level, const char *msg, void *arg)
{
	size_t used = strlen(log_text);

	(void)level;
	(void)arg;
	snprintf(log_text + used, sizeof(log_text) - used, "%s\n", msg);
}

static void log_reset(void)
{
	log_text[0] = '\0';
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	uint64_t rng = 1234;

	if (!f)
		return -1;
	f->dir = wt_tmpdir("reader");
	f->path = wt_path(f->dir, "data");
	f->data = malloc(FILE_BYTES);
	if (!f->dir || !f->path || !f->data)
		return -1;
	for (size_t i = 0; i < FILE_BYTES; i++)
		f->data[i] = (uint8_t)(wt_rand(&rng) >> 24);
	if (wt_write_file(f->path, f->data, FILE_BYTES) != 0)
		return -1;
	f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (f->fd < 0)
		return -1;
	ws_log_set_level(WS_LOG_INFO);
	ws_log_set_sink(log_capture, NULL);
	log_reset();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	ws_log_set_sink(NULL, NULL);
	ws_log_set_level(WS_LOG_WARN);
	close(f->fd);
	wt_rmrf(f->dir);
	free(f->dir);
	free(f->path);
	free(f->data);
	free(f);
	return 0;
}

static struct ws_reader *open_ok(size_t buf_bytes, unsigned files_max, unsigned flags)
{
	int err = 0;
	struct ws_reader *r = ws_reader_open(buf_bytes, files_max, flags, &err);

	if (!r)
		fail_msg("ws_reader_open: %d %s", err, ws_errmsg());
	return r;
}

static int attach_ok(struct ws_reader *r, int fd)
{
	int slot = ws_reader_attach(r, fd);

	if (slot < 0)
		fail_msg("ws_reader_attach: %d %s", slot, ws_errmsg());
	return slot;
}

/* Read through r and check the bytes against the file's contents. */
static void read_check(const struct fixture *f, struct ws_reader *r, int slot,
		       uint64_t off, size_t buf_off, size_t len)
{
	ssize_t n = ws_reader_read(r, slot, off, buf_off, len);
	size_t want = off >= FILE_BYTES ? 0 : FILE_BYTES - (size_t)off;

	if (want > len)
		want = len;
	if (n < 0)
		fail_msg("read off %llu len %zu: %zd %s", (unsigned long long)off, len, n, ws_errmsg());
	assert_int_equal((size_t)n, want);
	if (want)
		assert_memory_equal(ws_reader_buf(r) + buf_off, f->data + off, want);
}

static void test_open_invalid(void **state)
{
	int err = 0;

	(void)state;
	assert_null(ws_reader_open(0, 4, 0, &err));
	assert_int_equal(err, -EINVAL);
	err = 0;
	assert_null(ws_reader_open(4096, 0, 0, &err));
	assert_int_equal(err, -EINVAL);
	err = 0;
	assert_null(ws_reader_open(0, 0, WS_READER_FORCE_PREAD, &err));
	assert_int_equal(err, -EINVAL);
	err = 0;
	assert_null(ws_reader_open(SIZE_MAX, 1, WS_READER_FORCE_PREAD, &err));
	assert_int_equal(err, -EINVAL);
}

static void test_buffer_rounded_and_aligned(void **state)
{
	(void)state;
	for (unsigned flags = 0; flags <= WS_READER_FORCE_PREAD; flags++) {
		struct ws_reader *r = open_ok(5000, 1, flags);

		assert_int_equal(ws_reader_buf_bytes(r), 8192);
		assert_int_equal((uintptr_t)ws_reader_buf(r) % 4096, 0);
		ws_reader_close(r);
		r = open_ok(4096, 1, flags);
		assert_int_equal(ws_reader_buf_bytes(r), 4096);
		ws_reader_close(r);
	}
	ws_reader_close(NULL);
}

static void test_backend_reported_and_logged(void **state)
{
	struct ws_reader *r;

	(void)state;
	log_reset();
	r = open_ok(4096, 1, WS_READER_FORCE_PREAD);
	assert_int_equal(ws_reader_backend(r), WS_READER_PREAD);
	assert_string_equal(ws_reader_backend_name(r), "pread");
	assert_non_null(strstr(log_text, "pread"));
	ws_reader_close(r);

	log_reset();
	r = open_ok(4096, 1, 0);
	/* Whichever path this kernel allows, it is named in the log. */
	assert_non_null(strstr(log_text, ws_reader_backend_name(r)));
	if (ws_reader_backend(r) == WS_READER_URING) {
		assert_string_equal(ws_reader_backend_name(r), "io_uring");
	} else {
		assert_string_equal(ws_reader_backend_name(r), "pread");
		assert_non_null(strstr(log_text, "falling back"));
		print_message("note: io_uring unavailable here: %s", log_text);
	}
	ws_reader_close(r);
}

static const struct {
	uint64_t off;
	size_t buf_off, len;
} cases[] = {
	{ 0, 0, 4096 },
	{ 0, 0, 1 },
	{ 1, 0, 1 },
	{ 4095, 7, 2 },
	{ 1000, 0, 70000 },
	{ 65536, 4096, 65536 + 24 },
	{ 12345, 100, 300000 },
	{ FILE_BYTES - 10, 0, 100 },       /* short: EOF inside the request */
	{ FILE_BYTES - 1, 0, 1 },
	{ FILE_BYTES, 0, 100 },            /* at EOF */
	{ FILE_BYTES + 5000, 0, 10 },      /* past EOF */
	{ 0, 0, BUF_BYTES },               /* whole buffer, file shorter */
	{ 4096, BUF_BYTES - 4096, 4096 },  /* last page of the buffer */
	{ 3, 0, 0 },                       /* empty request */
};

static void test_backends_read_identical_bytes(void **state)
{
	struct fixture *f = *state;
	const unsigned flag_sets[] = { 0, WS_READER_SQPOLL, WS_READER_FORCE_PREAD };
	uint8_t *first = malloc(BUF_BYTES);

	assert_non_null(first);
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		for (size_t i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); i++) {
			struct ws_reader *r = open_ok(BUF_BYTES, 2, flag_sets[i]);
			int slot = attach_ok(r, f->fd);

			memset(ws_reader_buf(r), 0xee, BUF_BYTES);
			read_check(f, r, slot, cases[k].off, cases[k].buf_off, cases[k].len);
			/* Byte-for-byte the same buffer whatever the path,
			 * including what lies outside the read. */
			if (i == 0)
				memcpy(first, ws_reader_buf(r), BUF_BYTES);
			else
				assert_memory_equal(first, ws_reader_buf(r), BUF_BYTES);
			ws_reader_detach(r, slot);
			ws_reader_close(r);
		}
	}
	free(first);
}

/*
 * A second reader over the first one's memory (its own ring, as the upload
 * thread has over the shard's spill ring): its reads land where the first
 * reader sees them, both can read into disjoint parts at once, closing it
 * leaves the memory alone, and memory that is not page aligned is refused.
 */
static void test_open_over_shared_memory(void **state)
{
	struct fixture *f = *state;
	struct ws_reader *a = open_ok(BUF_BYTES, 2, 0);
	int err = 0;
	struct ws_reader *b = ws_reader_open_over(ws_reader_buf(a), BUF_BYTES, 1, 0, &err);
	int sa, sb;

	if (!b)
		fail_msg("ws_reader_open_over: %d %s", err, ws_errmsg());
	assert_ptr_equal(ws_reader_buf(b), ws_reader_buf(a));
	assert_int_equal(ws_reader_backend(b), ws_reader_backend(a));
	sa = attach_ok(a, f->fd);
	sb = attach_ok(b, f->fd);
	memset(ws_reader_buf(a), 0xee, BUF_BYTES);
	/* b fills the second half, a the first: a sees both. */
	assert_int_equal(ws_reader_read(b, sb, 1000, BUF_BYTES / 2, BUF_BYTES / 2), (ssize_t)(BUF_BYTES / 2));
	read_check(f, a, sa, 0, 0, BUF_BYTES / 2);
	assert_memory_equal(ws_reader_buf(a) + BUF_BYTES / 2, f->data + 1000, BUF_BYTES / 2);
	ws_reader_detach(b, sb);
	ws_reader_close(b);
	/* The memory is still a's (ASan would see a double free or a use after free). */
	read_check(f, a, sa, 8192, 0, 4096);
	ws_reader_detach(a, sa);

	err = 0;
	assert_null(ws_reader_open_over(ws_reader_buf(a) + 100, 4096, 1, 0, &err));
	assert_int_equal(err, -EINVAL);
	err = 0;
	assert_null(ws_reader_open_over(ws_reader_buf(a), 1000, 1, 0, &err));
	assert_int_equal(err, -EINVAL);
	err = 0;
	assert_null(ws_reader_open_over(NULL, 4096, 1, 0, &err));
	assert_int_equal(err, -EINVAL);
	ws_reader_close(a);
}

static void test_read_limits(void **state)
{
	struct fixture *f = *state;

	for (unsigned flags = 0; flags <= WS_READER_FORCE_PREAD; flags++) {
		struct ws_reader *r = open_ok(8192, 2, flags);
		int slot = attach_ok(r, f->fd);

		assert_int_equal(ws_reader_read(r, slot, 0, 0, 8193), -EINVAL);
		assert_int_equal(ws_reader_read(r, slot, 0, 8192, 1), -EINVAL);
		assert_int_equal(ws_reader_read(r, slot, 0, 8193, 0), -EINVAL);
		assert_int_equal(ws_reader_read(r, slot, 0, SIZE_MAX, 2), -EINVAL);
		assert_int_equal(ws_reader_read(r, slot, UINT64_MAX - 1, 0, 16), -EINVAL);
		assert_int_equal(ws_reader_read(r, slot, 0, 8192, 0), 0);
		assert_int_equal(ws_reader_read(r, 1, 0, 0, 16), -EBADF);
		assert_int_equal(ws_reader_read(r, -1, 0, 0, 16), -EBADF);
		assert_int_equal(ws_reader_read(r, 2, 0, 0, 16), -EBADF);
		read_check(f, r, slot, 100, 0, 8192);
		ws_reader_detach(r, slot);
		assert_int_equal(ws_reader_read(r, slot, 0, 0, 16), -EBADF);
		ws_reader_close(r);
	}
}

static void test_slots(void **state)
{
	struct fixture *f = *state;

	for (unsigned flags = 0; flags <= WS_READER_FORCE_PREAD; flags++) {
		struct ws_reader *r = open_ok(4096, 3, flags);
		int fds[4], s[4];

		for (int i = 0; i < 4; i++) {
			fds[i] = open(f->path, O_RDONLY | O_CLOEXEC);
			assert_true(fds[i] >= 0);
		}
		for (int i = 0; i < 3; i++) {
			s[i] = attach_ok(r, fds[i]);
			assert_int_equal(s[i], i);
		}
		assert_int_equal(ws_reader_attach(r, fds[3]), -ENOSPC);
		assert_int_equal(ws_reader_attach(r, -1), -EBADF);

		/* Each slot reads its own file. */
		for (int i = 0; i < 3; i++)
			read_check(f, r, s[i], (uint64_t)i * 1000, 0, 4096);

		/* A freed slot is reused, and the fd may be closed after detach. */
		ws_reader_detach(r, s[1]);
		close(fds[1]);
		assert_int_equal(ws_reader_read(r, s[1], 0, 0, 16), -EBADF);
		assert_int_equal(attach_ok(r, fds[3]), 1);
		read_check(f, r, 1, 77, 0, 4096);

		/* Detaching what is not attached is harmless. */
		ws_reader_detach(r, -1);
		ws_reader_detach(r, 3);
		ws_reader_detach(r, 1);
		ws_reader_detach(r, 1);

		ws_reader_detach(r, s[0]);
		ws_reader_detach(r, s[2]);
		close(fds[0]);
		close(fds[2]);
		close(fds[3]);
		ws_reader_close(r);
	}
}

static void test_stats(void **state)
{
	struct fixture *f = *state;
	const unsigned flag_sets[] = { 0, WS_READER_SQPOLL, WS_READER_FORCE_PREAD };

	for (size_t i = 0; i < sizeof(flag_sets) / sizeof(flag_sets[0]); i++) {
		struct ws_reader *r = open_ok(BUF_BYTES, 1, flag_sets[i]);
		struct ws_reader_stats st;
		int slot = attach_ok(r, f->fd);
		uint64_t bytes = 0;

		ws_reader_get_stats(r, &st);
		assert_int_equal(st.reads, 0);
		assert_int_equal(st.bytes, 0);
		assert_int_equal(st.submits, 0);
		for (int k = 0; k < 10; k++) {
			read_check(f, r, slot, (uint64_t)k * 4096, 0, 4096);
			bytes += 4096;
		}
		read_check(f, r, slot, FILE_BYTES - 10, 0, 100);
		bytes += 10;
		ws_reader_get_stats(r, &st);
		assert_int_equal(st.reads, 11);
		assert_int_equal(st.bytes, bytes);
		if (ws_reader_backend(r) == WS_READER_PREAD) {
			/* One pread per full read; the short one needs a second
			 * call to see EOF. */
			assert_int_equal(st.submits, 12);
		} else if (!(flag_sets[i] & WS_READER_SQPOLL)) {
			/* One io_uring_enter (submit and wait) per completion. */
			assert_int_equal(st.submits, 12);
		} else {
			/* SQPOLL: enters only to wake the poller or to wait. */
			assert_true(st.submits <= 24);
		}
		print_message("%s%s: reads %llu bytes %llu submits %llu\n",
			      ws_reader_backend_name(r),
			      flag_sets[i] & WS_READER_SQPOLL ? "+sqpoll" : "",
			      (unsigned long long)st.reads, (unsigned long long)st.bytes,
			      (unsigned long long)st.submits);
		ws_reader_detach(r, slot);
		ws_reader_close(r);
	}
}

/*
 * A buffer larger than one 2 MiB chunk is registered a chunk at a time, on
 * the first read into it: reads that cross chunk boundaries (and the last,
 * partial chunk) land whole and exact, and a read costs one submit per
 * chunk it touches. A chunk that cannot be registered is read with pread,
 * logged once, and registered on a later read when that works.
 */
static void test_large_buffer_chunks(void **state)
{
	struct fixture *f = *state;
	const size_t chunk = (size_t)2 << 20, buf_bytes = 3 * chunk + 8192;
	struct ws_reader *r = open_ok(buf_bytes, 1, 0);
	struct ws_reader_stats st;
	int slot;

	if (ws_reader_backend(r) != WS_READER_URING) {
		ws_reader_close(r);
		skip();
	}
	slot = attach_ok(r, f->fd);
	/* Across the first boundary: two chunks, two submits. */
	read_check(f, r, slot, 0, chunk - 4096, 65536);
	ws_reader_get_stats(r, &st);
	assert_int_equal(st.reads, 1);
	assert_int_equal(st.submits, 2);
	/* Into the partial last chunk, and the whole file over three chunks. */
	read_check(f, r, slot, 4096, 3 * chunk, 8192);
	read_check(f, r, slot, 0, chunk + 12345, FILE_BYTES);
	read_check(f, r, slot, 777, 2 * chunk - 100, 1000);

#ifdef WS_FAULTS
	ws_reader_detach(r, slot);
	ws_reader_close(r);
	r = open_ok(buf_bytes, 1, 0);
	slot = attach_ok(r, f->fd);
	log_reset();
	ws_fault_arm("reader.register_chunk", 1, 0);
	read_check(f, r, slot, 100, 0, 5000);
	ws_fault_disarm();
	if (!strstr(log_text, "registering buffer chunk 0") || !strstr(log_text, "pread"))
		fail_msg("failed chunk registration not logged: '%s'", log_text);
	/* Later reads into it register it and go through the ring again. */
	log_reset();
	read_check(f, r, slot, 200, 0, 5000);
	read_check(f, r, slot, 300, 4096, 5000);
	assert_string_equal(log_text, "");
#endif
	ws_reader_detach(r, slot);
	ws_reader_close(r);
}

#ifdef WS_FAULTS
/* Each setup step that fails falls back to pread, and says so. */
static void test_fallbacks_logged(void **state)
{
	struct fixture *f = *state;
	const char *sites[] = { "reader.uring_init", "reader.register_buffers",
				"reader.register_files" };
	const char *steps[] = { "io_uring_queue_init", "io_uring_register_buffers",
				"io_uring_register_files" };
	struct ws_reader *r;
	int slot;

	for (size_t i = 0; i < sizeof(sites) / sizeof(sites[0]); i++) {
		log_reset();
		ws_fault_arm(sites[i], 1, 0);
		r = open_ok(8192, 2, 0);
		ws_fault_disarm();
		assert_int_equal(ws_reader_backend(r), WS_READER_PREAD);
		assert_string_equal(ws_reader_backend_name(r), "pread");
		if (!strstr(log_text, steps[i]) || !strstr(log_text, "falling back to pread"))
			fail_msg("fallback at %s not logged: '%s'", sites[i], log_text);
		slot = attach_ok(r, f->fd);
		read_check(f, r, slot, 4000, 0, 8192);
		ws_reader_detach(r, slot);
		ws_reader_close(r);
	}

	/* SQPOLL refused: still io_uring, without the poller, and logged. */
	log_reset();
	ws_fault_arm("reader.sqpoll_init", 1, 0);
	r = open_ok(8192, 2, WS_READER_SQPOLL);
	ws_fault_disarm();
	assert_non_null(strstr(log_text, "SQPOLL unavailable"));
	if (ws_reader_backend(r) == WS_READER_URING)
		assert_null(strstr(log_text, "with SQPOLL"));
	slot = attach_ok(r, f->fd);
	read_check(f, r, slot, 0, 0, 8192);
	ws_reader_detach(r, slot);
	ws_reader_close(r);
}

static void test_fault_read_and_attach(void **state)
{
	struct fixture *f = *state;

	for (unsigned flags = 0; flags <= WS_READER_FORCE_PREAD; flags++) {
		struct ws_reader *r = open_ok(8192, 1, flags);
		struct ws_reader_stats st;
		int slot;

		if (ws_reader_backend(r) == WS_READER_URING) {
			ws_fault_arm("reader.attach", 1, 0);
			assert_int_equal(ws_reader_attach(r, f->fd), -EIO);
			ws_fault_disarm();
		}
		/* A failed attach does not use up the slot. */
		slot = attach_ok(r, f->fd);
		ws_fault_arm("reader.read", 1, 0);
		assert_int_equal(ws_reader_read(r, slot, 0, 0, 4096), -EIO);
		ws_fault_disarm();
		ws_reader_get_stats(r, &st);
		assert_int_equal(st.reads, 0);
		read_check(f, r, slot, 0, 0, 4096);
		ws_reader_detach(r, slot);
		ws_reader_close(r);
	}
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_invalid),
		cmocka_unit_test(test_buffer_rounded_and_aligned),
		cmocka_unit_test_setup_teardown(test_backend_reported_and_logged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_backends_read_identical_bytes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_read_limits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slots, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_buffer_chunks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_over_shared_memory, setup, teardown),
#ifdef WS_FAULTS
		cmocka_unit_test_setup_teardown(test_fallbacks_logged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fault_read_and_attach, setup, teardown),
#endif
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
