/*
 * Retry-After as the S3 backend reads it (store/s3_internal.h), without a
 * server: delay-seconds and the three HTTP-date forms, against a fixed
 * "now"; every malformed value is refused (the caller then ignores it and
 * keeps its own backoff), and nothing makes it wait past the cap.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "http_internal.h"
#include "s3_internal.h"
#include "ws_log.h"
#include "testutil.h"

/* Sun, 06 Nov 1994 08:49:37 GMT */
#define T0_MS (784111777LL * 1000)

static uint64_t ok(const char *v, int64_t now)
{
	uint64_t ms = 12345;
	assert_int_equal(ws_s3_parse_retry_after(v, now, &ms), 0);
	return ms;
}

static void bad(const char *v)
{
	uint64_t ms = 12345;
	assert_int_equal(ws_s3_parse_retry_after(v, T0_MS, &ms), -EINVAL);
	assert_int_equal(ms, 0);
}

static void test_seconds(void **state)
{
	(void)state;
	assert_int_equal(ok("0", T0_MS), 0);
	assert_int_equal(ok("1", T0_MS), 1000);
	assert_int_equal(ok("7", T0_MS), 7000);
	assert_int_equal(ok("060", T0_MS), 60000);
	/* More than the cap, or more than 64 bits: the cap. */
	assert_int_equal(ok("61", T0_MS), WS_S3_RETRY_AFTER_MAX_MS);
	assert_int_equal(ok("99999999999999999999999999", T0_MS), WS_S3_RETRY_AFTER_MAX_MS);
}

static void test_http_dates(void **state)
{
	(void)state;
	/* The same instant in each form, 5 s after now. */
	assert_int_equal(ok("Sun, 06 Nov 1994 08:49:42 GMT", T0_MS), 5000);
	assert_int_equal(ok("Sunday, 06-Nov-94 08:49:42 GMT", T0_MS), 5000);
	assert_int_equal(ok("Sun Nov  6 08:49:42 1994", T0_MS), 5000);
	/* now mid-second: the remainder in ms */
	assert_int_equal(ok("Sun, 06 Nov 1994 08:49:42 GMT", T0_MS + 250), 4750);
	/* In the past, or now: go at once. */
	assert_int_equal(ok("Sun, 06 Nov 1994 08:49:37 GMT", T0_MS), 0);
	assert_int_equal(ok("Sat, 05 Nov 1994 08:49:37 GMT", T0_MS), 0);
	/* Far ahead: the cap. */
	assert_int_equal(ok("Mon, 07 Nov 1994 08:49:37 GMT", T0_MS), WS_S3_RETRY_AFTER_MAX_MS);
	/* Month and day edges, and a leap day. */
	assert_int_equal(ok("Thu, 29 Feb 2024 00:00:00 GMT", 1709164800LL * 1000 - 1000), 1000);
	assert_int_equal(ok("Tue, 31 Dec 2024 23:59:59 GMT", 1735689599LL * 1000), 0);
}

static void test_bad_values(void **state)
{
	(void)state;
	bad("");
	bad(NULL);
	bad(" 5");
	bad("5 ");
	bad("-5");
	bad("+5");
	bad("5s");
	bad("1.5");
	bad("0x10");
	bad("soon");
	/* IMF-fixdate, each field wrong in turn */
	bad("Sun, 06 Nov 1994 08:49:37");
	bad("Sun, 06 Nov 1994 08:49:37 UTC");
	bad("Sun, 06 Nov 1994 08:49:37 GMT ");
	bad("Xyz, 06 Nov 1994 08:49:37 GMT");
	bad("Sun, 6 Nov 1994 08:49:37 GMT");
	bad("Sun, 06 nov 1994 08:49:37 GMT");
	bad("Sun, 06 Nov 94 08:49:37 GMT");
	bad("Sun, 06 Nov 1994 8:49:37 GMT");
	bad("Sun, 06 Nov 1994 24:00:00 GMT");
	bad("Sun, 06 Nov 1994 08:60:00 GMT");
	bad("Sun, 32 Nov 1994 08:49:37 GMT");
	bad("Sun, 31 Nov 1994 08:49:37 GMT");
	bad("Sun, 00 Nov 1994 08:49:37 GMT");
	bad("Sun, 06 Nov 1969 08:49:37 GMT");
	bad("Sun,06 Nov 1994 08:49:37 GMT");
	/* RFC 850 */
	bad("Sunday, 06-Nov-1994 08:49:37 GMT");
	bad("Sundae, 06-Nov-94 08:49:37 GMT");
	bad("Sunday, 06 Nov 94 08:49:37 GMT");
	/* asctime */
	bad("Sun Nov 6 08:49:37 1994");
	bad("Sun Nov  6 08:49:37 94");
	bad("Sun Nov  6 08:49:37 1994 GMT");
	bad("Sun Foo  6 08:49:37 1994");
	/* a NUL-free but hostile run of separators */
	bad(",,,,,,,,,,,,,,,,,,,,,,,,,,,,,,");
	bad("Sun, ");
}

struct logged {
	int warnings;
	char last[512];
};

static void log_keep(enum ws_log_level level, const char *msg, void *arg)
{
	struct logged *l = arg;
	if (level != WS_LOG_WARN)
		return;
	l->warnings++;
	snprintf(l->last, sizeof(l->last), "%s", msg);
}

static void answer(struct ws_http_req *r, const char *line)
{
	memset(r, 0, sizeof(*r));
	r->content_length = -1;
	ws_http_header_line(r, line, strlen(line));
}

/* An answer walship cannot read reaches a person: a warning naming the
 * value, then at most one a minute however many come (the count of those
 * ignored meanwhile goes with the next one). A readable one says nothing. */
static void test_unreadable_is_warned(void **state)
{
	static struct ws_http_req r;
	struct logged l = {0};
	(void)state;
	ws_log_set_sink(log_keep, &l);
	answer(&r, "Retry-After: 3\r\n");
	assert_int_equal(ws_s3_retry_after_ms(&r), 3000);
	assert_int_equal(l.warnings, 0);
	answer(&r, "Retry-After: in a moment\r\n");
	assert_int_equal(ws_s3_retry_after_ms(&r), 0);
	assert_int_equal(l.warnings, 1);
	assert_non_null(strstr(l.last, "Retry-After 'in a moment'"));
	assert_non_null(strstr(l.last, "ignored"));
	for (int i = 0; i < 5; i++)
		assert_int_equal(ws_s3_retry_after_ms(&r), 0);
	assert_int_equal(l.warnings, 1);
	ws_log_set_sink(NULL, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seconds),
		cmocka_unit_test(test_http_dates),
		cmocka_unit_test(test_bad_values),
		cmocka_unit_test(test_unreadable_is_warned),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
