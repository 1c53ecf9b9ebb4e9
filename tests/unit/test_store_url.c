/*
 * The s3:// URL parser, without a server: every malformed or hostile URL is
 * refused when the store is opened (WS_ECONFIG, before any request), with a
 * message that names the parameter at fault and never holds a password from
 * the URL or a parameter the caller supplied as a default. Good URLs open.
 * The one test that sends requests aims them at a port nothing listens on.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testutil.h"
#include "ws_store.h"

#define SECRET "s3cretPW"

static int setup(void **state)
{
	(void)state;
	setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", 1);
	setenv("AWS_REGION", "us-east-1", 1);
	unsetenv("AWS_SESSION_TOKEN");
	return 0;
}

/* Open without the probe (no request is sent); the error, or 0. */
static int try_open(const char *url, const char *defaults)
{
	int err = 0;
	struct ws_store *s = ws_store_open_defaults(url, defaults, WS_STORE_EXISTING, &err);
	if (s) {
		ws_store_close(s);
		return 0;
	}
	assert_int_not_equal(err, 0);
	return err;
}

static void test_bad_urls(void **state)
{
	static const struct {
		const char *url, *names; /* what the message must name */
	} bad[] = {
		/* region: a header injection, a host smuggled into the AWS host name */
		{ "s3://bkt?endpoint=http://127.0.0.1:9000&region=us%0d%0aX-Injected:%20yes", "region" },
		{ "s3://bkt?region=x@127.0.0.1:9000%23", "region" },
		{ "s3://bkt?region=x.evil.example%2F", "region" },
		{ "s3://bkt?region=", "region" },
		{ "s3://bkt?region=US-EAST-1", "region" },
		{ "s3://bkt?endpoint=http://127.0.0.1:9000&region=a%09b", "region" },
		/* endpoint: ports, IPv6 literals, control bytes, paths, schemes */
		{ "s3://bkt?endpoint=http://127.0.0.1:0", "endpoint" },
		{ "s3://bkt?endpoint=http://127.0.0.1:-1", "endpoint" },
		{ "s3://bkt?endpoint=http://127.0.0.1:65536", "endpoint" },
		{ "s3://bkt?endpoint=http://127.0.0.1:99999999", "endpoint" },
		{ "s3://bkt?endpoint=http://127.0.0.1:", "endpoint" },
		{ "s3://bkt?endpoint=http://127.0.0.1:80a", "endpoint" },
		{ "s3://bkt?endpoint=http://::1:9000", "endpoint" },
		{ "s3://bkt?endpoint=http://[::1", "endpoint" },
		{ "s3://bkt?endpoint=http://[::g]:9000", "endpoint" },
		{ "s3://bkt?endpoint=http://[::1]x", "endpoint" },
		{ "s3://bkt?endpoint=http://127.0.0.1:9000%0d%0aX-Injected:%20yes", "endpoint" },
		{ "s3://bkt?endpoint=http://127.0.0.1:9000/path", "endpoint" },
		{ "s3://bkt?endpoint=http://127.0.0.1:9000%23frag", "endpoint" },
		{ "s3://bkt?endpoint=ftp://127.0.0.1:9000", "endpoint" },
		{ "s3://bkt?endpoint=127.0.0.1:9000", "endpoint" },
		{ "s3://bkt?endpoint=http://", "endpoint" },
		{ "s3://bkt?endpoint=http://-host:9000", "endpoint" },
		{ "s3://bkt?endpoint=http://ho_st:9000", "endpoint" },
		/* bucket names, by S3's rules */
		{ "s3://b..b?endpoint=http://127.0.0.1:9000", "bucket" },
		{ "s3://-bb?endpoint=http://127.0.0.1:9000", "bucket" },
		{ "s3://bb-?endpoint=http://127.0.0.1:9000", "bucket" },
		{ "s3://.bb", "bucket" },
		{ "s3://b.-b", "bucket" },
		{ "s3://b-.b", "bucket" },
		{ "s3://ab", "bucket" },
		{ "s3://Abc", "bucket" },
		{ "s3://b_b", "bucket" },
		{ "s3://192.168.1.10", "bucket" },
		{ "s3://0123456789012345678901234567890123456789012345678901234567890123", "bucket" },
		{ "s3://", "bucket" },
		/* other parameters */
		{ "s3://bkt?retry_attempts_max=-1", "retry_attempts_max" },
		{ "s3://bkt?retry_deadline_ms=0", "retry_deadline_ms" },
		{ "s3://bkt?max_in_flight=%2B5", "max_in_flight" },
		{ "s3://bkt?etag_quotes=2", "etag_quotes" },
		{ "s3://bkt?pace=2", "pace=2" },
		{ "s3://bkt?pace=", "pace" },
		{ "s3://bkt?bogus=1", "bogus" },
		{ "s3://bkt?ca_file=%2Fa%0ab", "ca_file" },
		{ "s3://bkt?region=a%zz", "region" },
		{ "s3://bkt?region=a%00b", "region" },
		{ "s3://bkt?=x", "parameter" },
		{ "s3://bkt?noequals", "parameter" },
		{ "s3://bkt/\r\n?endpoint=http://127.0.0.1:9000", "control character" },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = try_open(bad[i].url, NULL);
		if (rc != WS_ECONFIG)
			fail_msg("%s: got %d (%s), want WS_ECONFIG", bad[i].url, rc, ws_errmsg());
		if (!strstr(ws_errmsg(), bad[i].names))
			fail_msg("%s: message does not name %s: %s", bad[i].url, bad[i].names, ws_errmsg());
		/* Control bytes never reach a message, whatever the URL held. */
		for (const char *m = ws_errmsg(); *m; m++)
			if ((unsigned char)*m < 0x20)
				fail_msg("%s: control byte in message: %s", bad[i].url, ws_errmsg());
	}
}

/* A password in the URL is refused, and no message ever shows it. */
static void test_userinfo_redacted(void **state)
{
	static const char *const bad[] = {
		"s3://bkt?endpoint=http://user:" SECRET "@127.0.0.1:9000",
		"s3://bkt?endpoint=https://user:" SECRET "@s3.example.com",
		"s3://bkt?endpoint=http%3A%2F%2Fuser%3A" SECRET "%40127.0.0.1%3A9000",
		"s3://bkt?endpoint=http://user:" SECRET "@127.0.0.1:0&bogus=1",
		"s3://bkt?bogus=1&endpoint=http://user:" SECRET "@127.0.0.1:9000",
		"s3://user:" SECRET "@bkt/prefix?endpoint=http://127.0.0.1:9000",
		"s3://user:" SECRET "@bkt",
	};
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = try_open(bad[i], NULL);
		if (rc != WS_ECONFIG)
			fail_msg("%s: got %d, want WS_ECONFIG", bad[i], rc);
		if (strstr(ws_errmsg(), SECRET))
			fail_msg("%s: the password is in the message: %s", bad[i], ws_errmsg());
		assert_non_null(strstr(ws_errmsg(), "user info removed"));
	}
	/* The endpoint's message says why, once it is the only problem. */
	assert_int_equal(try_open(bad[0], NULL), WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "must not hold a user name or password"));
	assert_non_null(strstr(ws_errmsg(), "AWS_ACCESS_KEY_ID"));
}

static void test_good_urls(void **state)
{
	static const char *const good[] = {
		"s3://bkt",
		"s3://my.bucket-1/some/prefix/",
		"s3://bkt?region=eu-west-3",
		"s3://bkt?endpoint=http://127.0.0.1:9000",
		"s3://bkt?endpoint=http://127.0.0.1:9000/",
		"s3://bkt?endpoint=https://s3.example.com",
		"s3://bkt?endpoint=http://[::1]:9000",
		"s3://bkt?endpoint=http://[::1]",
		"s3://bkt?endpoint=http://localhost:1&region=default",
		"s3://bkt?endpoint=http://127.0.0.1:65535&etag_quotes=auto&conditional_writes=off",
		"s3://bkt?endpoint=http://127.0.0.1:65535&pace=0",
		"s3://bkt?endpoint=http://127.0.0.1:9000&etag_quotes=0&retry_attempts_max=3&retry_deadline_ms=100",
		"s3://bkt?endpoint=http%3A%2F%2F127.0.0.1%3A9000",
		"s3://012",
		"s3://1.2.3",
		"s3://1.2.3.4.5",
	};
	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		int err = 0;
		struct ws_store *s = ws_store_open_defaults(good[i], NULL, WS_STORE_EXISTING, &err);
		if (!s)
			fail_msg("%s: %s", good[i], ws_errmsg());
		/* Messages name the store by exactly what the user wrote. */
		assert_string_equal(s->url, good[i]);
		ws_store_close(s);
	}
}

/* AWS_REGION is checked like region= (it also goes into host names). */
static void test_region_from_env(void **state)
{
	(void)state;
	setenv("AWS_REGION", "us\r\nX-Injected: yes", 1);
	assert_int_equal(try_open("s3://bkt", NULL), WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "AWS_REGION"));
	assert_null(strchr(ws_errmsg(), '\n'));
	/* region= in the URL overrides the environment. */
	assert_int_equal(try_open("s3://bkt?region=us-west-2", NULL), 0);
	setenv("AWS_REGION", "us-east-1", 1);
}

/* A port nothing listens on (bound, then released). */
static int dead_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	close(fd);
	return ntohs(a.sin_port);
}

/*
 * Defaults (the engine's per-shard retry bounds) apply where the URL is
 * silent, the URL's own value wins, and no message shows a default.
 */
static void test_defaults(void **state)
{
	char url[256];
	int err = 0;
	struct ws_store *s;
	(void)state;

	/* A bad URL: the message holds what the user wrote, not the defaults. */
	assert_int_equal(try_open("s3://bkt?region=bad!", "retry_attempts_max=7&retry_deadline_ms=30000"),
			 WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "region"));
	assert_null(strstr(ws_errmsg(), "retry_"));
	/* A bad default is the caller's, and says so. */
	assert_int_equal(try_open("s3://bkt", "max_in_flight=0"), WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "walship's default"));

	/* Which value ran: the attempts a refused connection took. */
	snprintf(url, sizeof(url), "s3://bkt?endpoint=http://127.0.0.1:%d", dead_port());
	s = ws_store_open_defaults(url, "retry_attempts_max=4&retry_deadline_ms=30000", WS_STORE_EXISTING, &err);
	assert_non_null(s);
	assert_string_equal(s->url, url);
	assert_int_equal(ws_store_head(s, "k", NULL), -ECONNREFUSED);
	assert_non_null(strstr(ws_errmsg(), "after 4 attempts"));
	assert_null(strstr(ws_errmsg(), "retry_"));
	ws_store_close(s);
	snprintf(url + strlen(url), sizeof(url) - strlen(url), "&retry_attempts_max=2");
	s = ws_store_open_defaults(url, "retry_attempts_max=4", WS_STORE_EXISTING, &err);
	assert_non_null(s);
	assert_int_equal(ws_store_head(s, "k", NULL), -ECONNREFUSED);
	assert_non_null(strstr(ws_errmsg(), "after 2 attempts"));
	ws_store_close(s);
}

/*
 * ws_store_open_limits: the engine's bounds reach the s3:// backend under
 * the backend's own parameter names (the attempts a refused connection
 * takes), the URL's own setting still wins, and the backend kind is the
 * store's, whatever the URL's case.
 */
static void test_limits(void **state)
{
	const struct ws_store_limits lim = { 3, 30000, 8, false };
	char url[256], *dir;
	int err = 0;
	struct ws_store *s;
	(void)state;

	snprintf(url, sizeof(url), "s3://bkt?endpoint=http://127.0.0.1:%d", dead_port());
	s = ws_store_open_limits(url, &lim, WS_STORE_EXISTING, &err);
	assert_non_null(s);
	assert_int_equal(ws_store_kind(s), WS_STORE_S3);
	assert_null(ws_store_file_root(s));
	assert_int_equal(ws_store_head(s, "k", NULL), -ECONNREFUSED);
	assert_non_null(strstr(ws_errmsg(), "after 3 attempts"));
	ws_store_close(s);
	snprintf(url + strlen(url), sizeof(url) - strlen(url), "&retry_attempts_max=2");
	s = ws_store_open_limits(url, &lim, WS_STORE_EXISTING, &err);
	assert_non_null(s);
	assert_int_equal(ws_store_head(s, "k", NULL), -ECONNREFUSED);
	assert_non_null(strstr(ws_errmsg(), "after 2 attempts"));
	ws_store_close(s);
	/* A bad bound is the caller's, and says so. */
	const struct ws_store_limits none_in_flight = { 3, 30000, 0, false };
	s = ws_store_open_limits("s3://bkt", &none_in_flight, WS_STORE_EXISTING, &err);
	assert_null(s);
	assert_int_equal(err, WS_ECONFIG);
	assert_non_null(strstr(ws_errmsg(), "walship's default"));

	dir = wt_tmpdir("store_kind");
	snprintf(url, sizeof(url), "FILE://%s", dir);
	s = ws_store_open_limits(url, &lim, 0, &err);
	assert_non_null(s);
	assert_int_equal(ws_store_kind(s), WS_STORE_FILE);
	assert_string_equal(ws_store_file_root(s), dir);
	ws_store_close(s);
	wt_rmrf(dir);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_urls),
		cmocka_unit_test(test_userinfo_redacted),
		cmocka_unit_test(test_good_urls),
		cmocka_unit_test(test_region_from_env),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_limits),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
