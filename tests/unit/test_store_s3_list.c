/*
 * ListObjectsV2 bodies as the S3 backend reads them (store/s3_internal.h),
 * without a server: a good page is taken whole; a key from outside the
 * sink's prefix, a size that is not plain decimal, does not fit in 64
 * bits or is more than an object can have (5 TiB), keys out of order or outside the listed prefix are refused
 * (WS_EFORMAT naming the listing) rather than read as something else. A
 * reply that is no listing page (an error document in a 200), a page that
 * says the listing goes on but shows no key to go on after, or one with more
 * keys than asked for is refused too: each would end a listing early, and
 * what it did not show (a tenant) be missed by verify, ls or a checkpoint's
 * cut; so is an IsTruncated that is missing or no xs:boolean, a <Contents>
 * without its key or size, and a key longer than walship's. DeleteObjects replies likewise: an error document is no success.
 * The small replies of uploads in parts (ws_s3_xml_field): a missing, empty
 * or overlong field, another root, malformed XML are each named; and the
 * part size for an object (ws_s3_part_bytes) keeps it within 10,000 parts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_internal.h"
#include "testutil.h"

#define CAP 8

/* A body with one <Contents> per key/size pair (NULL-terminated). */
static char *body(const char *const *kv)
{
	static char b[8192];
	size_t n = (size_t)snprintf(b, sizeof(b),
				    "<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult>"
				    "<Name>bkt</Name><IsTruncated>false</IsTruncated>");
	for (size_t i = 0; kv[i]; i += 2)
		n += (size_t)snprintf(b + n, sizeof(b) - n, "<Contents><Key>%s</Key><Size>%s</Size></Contents>",
				      kv[i], kv[i + 1]);
	snprintf(b + n, sizeof(b) - n, "</ListBucketResult>");
	return b;
}

static int parse(const char *const *kv, const char *store_prefix, const char *prefix, struct ws_list_page *pg)
{
	const char *b = body(kv);
	memset(pg, 0, sizeof(*pg));
	pg->keys = calloc(CAP, sizeof(*pg->keys));
	pg->sizes = calloc(CAP, sizeof(*pg->sizes));
	assert_non_null(pg->keys);
	assert_non_null(pg->sizes);
	return ws_s3_list_parse("s3://bkt/pre", b, strlen(b), store_prefix, prefix, NULL, CAP, pg);
}

static void refused(const char *const *kv, const char *store_prefix, const char *prefix)
{
	struct ws_list_page pg;
	int rc = parse(kv, store_prefix, prefix, &pg);
	print_message("  refused: %s\n", ws_errmsg());
	assert_int_equal(rc, WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "ListObjectsV2"));
	ws_list_page_free(&pg);
}

static int parse_raw(const char *b, struct ws_list_page *pg)
{
	memset(pg, 0, sizeof(*pg));
	pg->keys = calloc(CAP, sizeof(*pg->keys));
	pg->sizes = calloc(CAP, sizeof(*pg->sizes));
	assert_non_null(pg->keys);
	assert_non_null(pg->sizes);
	return ws_s3_list_parse("s3://bkt/pre", b, strlen(b), "pre", "", NULL, CAP, pg);
}

static void refused_raw(const char *b, const char *why)
{
	struct ws_list_page pg;
	int rc = parse_raw(b, &pg);
	print_message("  refused: %s\n", ws_errmsg());
	assert_int_equal(rc, WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), why));
	ws_list_page_free(&pg);
}

static void test_good_page(void **state)
{
	const char *kv[] = { "pre/a/1", "0", "pre/a/2", "5497558138880", "pre/b", "4096", NULL };
	struct ws_list_page pg;
	(void)state;
	assert_int_equal(parse(kv, "pre", "", &pg), 0);
	assert_int_equal(pg.count, 3);
	assert_string_equal(pg.keys[0], "a/1");
	assert_string_equal(pg.keys[2], "b");
	assert_true(pg.sizes[1] == WS_OBJ_BYTES_MAX); /* 5 TiB, the most an object can have */
	assert_true(pg.sizes[2] == 4096);
	assert_false(pg.truncated);
	ws_list_page_free(&pg);
	/* No store prefix: keys as they are. */
	const char *kv2[] = { "a", "1", "b", "2", NULL };
	assert_int_equal(parse(kv2, "", "", &pg), 0);
	assert_int_equal(pg.count, 2);
	assert_string_equal(pg.keys[1], "b");
	ws_list_page_free(&pg);
}

static void test_foreign_prefix(void **state)
{
	(void)state;
	/* Same length as "pre/" but another prefix: stripping it would read
	 * "x" as one of the sink's keys. */
	const char *kv[] = { "oth/x", "1", NULL };
	refused(kv, "pre", "");
	const char *kv2[] = { "prex", "1", NULL }; /* the prefix without its '/' */
	refused(kv2, "pre", "");
	const char *kv3[] = { "pr", "1", NULL }; /* shorter than the prefix */
	refused(kv3, "pre", "");
}

static void test_bad_sizes(void **state)
{
	static const char *const bad[] = { "-1", "+5", " 5", "5 ", "0x10", "", "1e3",
					   "18446744073709551616", "99999999999999999999999", NULL };
	(void)state;
	for (int i = 0; bad[i]; i++) {
		const char *kv[] = { "pre/a", bad[i], NULL };
		print_message("size \"%s\"\n", bad[i]);
		refused(kv, "pre", "");
	}
}

/* A size no store can hold (over S3's 5 TiB) is bad data from the store,
 * named with its key and value: summed by ls it would wrap ("bytes":-3). */
static void test_size_beyond_a_store(void **state)
{
	static const char *const big[] = { "5497558138881", "9007199254740993", "18446744073709551615", NULL };
	(void)state;
	for (int i = 0; big[i]; i++) {
		const char *kv[] = { "pre/a", "1", "pre/b", big[i], NULL };
		struct ws_list_page pg;
		print_message("size \"%s\"\n", big[i]);
		assert_int_equal(parse(kv, "pre", "", &pg), WS_EFORMAT);
		print_message("  refused: %s\n", ws_errmsg());
		assert_non_null(strstr(ws_errmsg(), "bad data from the store"));
		assert_non_null(strstr(ws_errmsg(), " b a size of "));
		assert_non_null(strstr(ws_errmsg(), big[i]));
		ws_list_page_free(&pg);
	}
}

/* The sum ls makes of a listing's sizes: each size within an object's
 * most, the total within a signed 64-bit count; past either it is bad
 * data from the store, never a wrapped count. */
static void test_size_sum(void **state)
{
	char *keys[] = { "t/a", "t/b" };
	uint64_t sizes[] = { WS_OBJ_BYTES_MAX, 1 };
	struct ws_list_page pg = { .keys = keys, .sizes = sizes, .count = 2 };
	struct ws_store st;
	uint64_t total = 0;
	(void)state;
	memset(&st, 0, sizeof(st));
	snprintf(st.url, sizeof(st.url), "s3://bkt/pre");
	assert_int_equal(ws_list_page_add_bytes(&st, &pg, &total), 0);
	assert_true(total == WS_OBJ_BYTES_MAX + 1);
	/* A total that would pass INT64_MAX: refused, naming the key, the sum kept. */
	total = WS_LIST_BYTES_MAX - 10;
	assert_int_equal(ws_list_page_add_bytes(&st, &pg, &total), WS_EFORMAT);
	print_message("  refused: %s\n", ws_errmsg());
	assert_non_null(strstr(ws_errmsg(), "bad data from the store"));
	assert_non_null(strstr(ws_errmsg(), "t/a"));
	assert_true(total == WS_LIST_BYTES_MAX - 10);
	/* Exactly at the most: taken. */
	total = WS_LIST_BYTES_MAX - WS_OBJ_BYTES_MAX - 1;
	assert_int_equal(ws_list_page_add_bytes(&st, &pg, &total), 0);
	assert_true(total == WS_LIST_BYTES_MAX);
	/* One size over an object's most, from any store: refused with its value. */
	sizes[1] = UINT64_MAX;
	total = 0;
	assert_int_equal(ws_list_page_add_bytes(&st, &pg, &total), WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "t/b a size of 18446744073709551615 bytes"));
	assert_non_null(strstr(ws_errmsg(), "bad data from the store"));
	assert_true(total == WS_OBJ_BYTES_MAX);
}

static void test_order_and_prefix(void **state)
{
	(void)state;
	const char *unsorted[] = { "pre/b", "1", "pre/a", "1", NULL };
	refused(unsorted, "pre", "");
	const char *dup[] = { "pre/a", "1", "pre/a", "1", NULL };
	refused(dup, "pre", "");
	const char *outside[] = { "pre/t1/x", "1", "pre/t2/y", "1", NULL };
	refused(outside, "pre", "t1/");
}

static void test_not_a_whole_page(void **state)
{
	char b[8192];
	size_t n;
	struct ws_list_page pg;
	(void)state;
	/* An error document answered with 200. */
	refused_raw("<?xml version=\"1.0\"?><Error><Code>InternalError</Code><Message>x</Message></Error>",
		    "not a ListBucketResult");
	/* Well-formed, the right keys, the wrong document. */
	refused_raw("<Other><Contents><Key>pre/a</Key><Size>1</Size></Contents></Other>", "not a ListBucketResult");
	/* Goes on, but from where? */
	refused_raw("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>", "no key to go on after");
	/* More keys than asked for (CAP): the rest would be lost. */
	n = (size_t)snprintf(b, sizeof(b), "<ListBucketResult><IsTruncated>false</IsTruncated>");
	for (int i = 0; i <= CAP; i++)
		n += (size_t)snprintf(b + n, sizeof(b) - n, "<Contents><Key>pre/k%02d</Key><Size>1</Size></Contents>", i);
	snprintf(b + n, sizeof(b) - n, "</ListBucketResult>");
	refused_raw(b, "more keys than");
	/* A truncated page with keys goes on after its last one. */
	assert_int_equal(parse_raw("<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>pre/a</Key>"
				   "<Size>1</Size></Contents><Contents><Key>pre/b</Key><Size>2</Size></Contents>"
				   "</ListBucketResult>", &pg), 0);
	assert_int_equal(pg.count, 2);
	assert_true(pg.truncated);
	assert_string_equal(pg.next_token, "b");
	ws_list_page_free(&pg);
}

/* A two-key page ("pre/a", 1; "pre/b", 2) around the given IsTruncated element ("" for none). */
static int parse_truncated(const char *elem, struct ws_list_page *pg)
{
	char b[1024];
	snprintf(b, sizeof(b), "<ListBucketResult>%s<Contents><Key>pre/a</Key><Size>1</Size></Contents>"
		 "<Contents><Key>pre/b</Key><Size>2</Size></Contents></ListBucketResult>", elem);
	return parse_raw(b, pg);
}

/*
 * IsTruncated as xs:boolean, whitespace around it allowed (a proxy that
 * pretty-prints): read right, never taken for "false" because it is not
 * exactly "true", which would end a listing after its first page. Missing,
 * twice, or anything else: refused.
 */
static void test_is_truncated_forms(void **state)
{
	static const char *const yes[] = { "<IsTruncated>true</IsTruncated>", "<IsTruncated>\n  true\n</IsTruncated>",
					   "<IsTruncated>1</IsTruncated>", "<IsTruncated> 1\t</IsTruncated>", NULL };
	static const char *const no[] = { "<IsTruncated>false</IsTruncated>", "<IsTruncated>\r\n false </IsTruncated>",
					  "<IsTruncated>0</IsTruncated>", NULL };
	static const char *const bad[] = { "<IsTruncated>True</IsTruncated>", "<IsTruncated>yes</IsTruncated>",
					   "<IsTruncated></IsTruncated>", "<IsTruncated>t rue</IsTruncated>",
					   "<IsTruncated>true</IsTruncated><IsTruncated>false</IsTruncated>", NULL };
	struct ws_list_page pg;
	(void)state;
	for (int i = 0; yes[i]; i++) {
		print_message("%s\n", yes[i]);
		assert_int_equal(parse_truncated(yes[i], &pg), 0);
		assert_true(pg.truncated);
		assert_string_equal(pg.next_token, "b");
		ws_list_page_free(&pg);
	}
	for (int i = 0; no[i]; i++) {
		print_message("%s\n", no[i]);
		assert_int_equal(parse_truncated(no[i], &pg), 0);
		assert_false(pg.truncated);
		assert_int_equal(pg.count, 2);
		ws_list_page_free(&pg);
	}
	for (int i = 0; bad[i]; i++) {
		print_message("%s\n", bad[i]);
		assert_int_equal(parse_truncated(bad[i], &pg), WS_EFORMAT);
		assert_non_null(strstr(ws_errmsg(), "IsTruncated"));
		ws_list_page_free(&pg);
	}
	assert_int_equal(parse_truncated("", &pg), WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "no IsTruncated"));
	ws_list_page_free(&pg);
}

/*
 * Each <Contents> stands alone: its size is its own in whichever order
 * its elements come; one without a key or a size, or with two keys, is
 * refused, never given the size of the one before it.
 */
static void test_contents_shapes(void **state)
{
	struct ws_list_page pg;
	(void)state;
	assert_int_equal(parse_raw("<ListBucketResult><IsTruncated>false</IsTruncated>"
				   "<Contents><Key>pre/a</Key><Size>7</Size></Contents>"
				   "<Contents><Size>9</Size><ETag>x</ETag><Key>pre/b</Key></Contents>"
				   "</ListBucketResult>", &pg), 0);
	assert_int_equal(pg.count, 2);
	assert_true(pg.sizes[0] == 7);
	assert_true(pg.sizes[1] == 9);
	ws_list_page_free(&pg);
	refused_raw("<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>pre/a</Key><Size>7</Size>"
		    "</Contents><Contents><Size>9</Size></Contents></ListBucketResult>", "malformed key, size");
	refused_raw("<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>pre/a</Key></Contents>"
		    "</ListBucketResult>", "malformed key, size");
	refused_raw("<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>pre/a</Key><Key>pre/b</Key>"
		    "<Size>1</Size></Contents></ListBucketResult>", "malformed key, size");
	refused_raw("<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>pre/a</Key><Size>1</Size>"
		    "<Size>2</Size></Contents></ListBucketResult>", "malformed key, size");
}

/*
 * A key under the sink's prefix longer than any walship key (S3 allows
 * 1,024 bytes; a sink nested in another's prefix can hold one): refused,
 * naming its length, never cut into a shorter key that retention would
 * then read and delete.
 */
static void test_key_too_long(void **state)
{
	char b[4096], key[1100];
	size_t n;
	struct ws_list_page pg;
	(void)state;
	for (size_t len = WS_KEY_MAX - 2; len <= WS_KEY_MAX; len++) {
		memset(key, 'k', len);
		key[len] = '\0';
		n = (size_t)snprintf(b, sizeof(b), "<ListBucketResult><IsTruncated>false</IsTruncated>"
				     "<Contents><Key>pre/%s</Key><Size>1</Size></Contents></ListBucketResult>", key);
		assert_true(n < sizeof(b));
		print_message("key of %zu bytes\n", len);
		if (len < WS_KEY_MAX) {
			assert_int_equal(parse_raw(b, &pg), 0);
			assert_int_equal(strlen(pg.keys[0]), len);
			ws_list_page_free(&pg);
		} else {
			refused_raw(b, "longer than walship's");
		}
	}
	memset(key, 'k', 1000);
	key[1000] = '\0';
	snprintf(b, sizeof(b), "<ListBucketResult><IsTruncated>false</IsTruncated><Contents><Key>pre/%s</Key>"
		 "<Size>1</Size></Contents></ListBucketResult>", key);
	refused_raw(b, "1000 bytes");
}

static void test_delete_replies(void **state)
{
	(void)state;
	static const char ok[] = "<?xml version=\"1.0\"?><DeleteResult></DeleteResult>";
	static const char gone[] = "<DeleteResult><Error><Key>pre/a</Key><Code>NoSuchKey</Code></Error></DeleteResult>";
	static const char failed[] = "<DeleteResult><Error><Key>pre/a</Key><Code>AccessDenied</Code></Error>"
				     "</DeleteResult>";
	static const char error_doc[] = "<Error><Code>InternalError</Code><Message>x</Message></Error>";
	assert_int_equal(ws_s3_delete_parse("s3://bkt/pre", ok, strlen(ok)), 0);
	assert_int_equal(ws_s3_delete_parse("s3://bkt/pre", gone, strlen(gone)), 0);
	assert_int_equal(ws_s3_delete_parse("s3://bkt/pre", failed, strlen(failed)), -EIO);
	assert_non_null(strstr(ws_errmsg(), "AccessDenied"));
	assert_int_equal(ws_s3_delete_parse("s3://bkt/pre", error_doc, strlen(error_doc)), WS_EFORMAT);
	assert_non_null(strstr(ws_errmsg(), "not a DeleteResult"));
}

/* One field of a small reply (CreateMultipartUpload's UploadId): the text,
 * or WS_EFORMAT naming what is wrong. */
static void test_xml_field(void **state)
{
	char out[16];
	(void)state;
	static const char good[] = "<?xml version=\"1.0\"?><InitiateMultipartUploadResult xmlns=\"x\"><Bucket>b</Bucket>"
				   "<UploadId>2~abc</UploadId></InitiateMultipartUploadResult>";
	assert_int_equal(ws_s3_xml_field("s3://b", "Create", good, strlen(good), "InitiateMultipartUploadResult",
					 "UploadId", out, sizeof(out)), 0);
	assert_string_equal(out, "2~abc");
	static const struct {
		const char *body, *want;
	} bad[] = {
		{ "<InitiateMultipartUploadResult><Bucket>b</Bucket></InitiateMultipartUploadResult>", "has no UploadId" },
		{ "<InitiateMultipartUploadResult><UploadId></UploadId></InitiateMultipartUploadResult>", "has no UploadId" },
		{ "<InitiateMultipartUploadResult><UploadId>0123456789abcdef</UploadId></InitiateMultipartUploadResult>",
		  "longer than 15 bytes" },
		{ "<Error><Code>InternalError</Code><UploadId>x</UploadId></Error>", "not a InitiateMultipartUploadResult" },
		{ "<InitiateMultipartUploadResult><UploadId>x", "not well-formed XML" },
		{ "", "an empty body" },
		{ "<InitiateMultipartUploadResult><X><UploadId>x</UploadId></X></InitiateMultipartUploadResult>",
		  "has no UploadId" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = ws_s3_xml_field("s3://b", "Create", bad[i].body, strlen(bad[i].body),
					 "InitiateMultipartUploadResult", "UploadId", out, sizeof(out));
		assert_int_equal(rc, WS_EFORMAT);
		if (!strstr(ws_errmsg(), bad[i].want) || !strstr(ws_errmsg(), "Create"))
			fail_msg("case %zu: want \"%s\" in: %s", i, bad[i].want, ws_errmsg());
	}
	/* Only the root, for a completion. */
	assert_int_equal(ws_s3_xml_field("s3://b", "Complete", "<R><ETag></ETag></R>", 20, "R", NULL, NULL, 0), 0);
	assert_int_equal(ws_s3_xml_field("s3://b", "Complete", "<Q/>", 4, "R", NULL, NULL, 0), WS_EFORMAT);
}

/* Parts as asked for, raised in whole MiB only as far as 10,000 parts need. */
static void test_part_bytes(void **state)
{
	const uint64_t mib = 1u << 20;
	(void)state;
	assert_int_equal(ws_s3_part_bytes(40 * mib, 5 * mib), 5 * mib);
	assert_int_equal(ws_s3_part_bytes(10000 * 16 * mib, 16 * mib), 16 * mib);
	assert_int_equal(ws_s3_part_bytes(10000 * 16 * mib + 1, 16 * mib), 17 * mib);
	/* S3's largest object, 5 TiB: 525 MiB parts, 9,987 of them. */
	uint64_t p = ws_s3_part_bytes(5ull << 40, 16 * mib);
	assert_int_equal(p, 525 * mib);
	assert_true(((5ull << 40) + p - 1) / p <= WS_S3_PARTS_MAX);
	/* A size asked for that is not whole MiB is kept when it suffices. */
	assert_int_equal(ws_s3_part_bytes(6 * mib, 5 * mib + 3), 5 * mib + 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_page),
		cmocka_unit_test(test_foreign_prefix),
		cmocka_unit_test(test_bad_sizes),
		cmocka_unit_test(test_size_beyond_a_store),
		cmocka_unit_test(test_size_sum),
		cmocka_unit_test(test_order_and_prefix),
		cmocka_unit_test(test_not_a_whole_page),
		cmocka_unit_test(test_is_truncated_forms),
		cmocka_unit_test(test_contents_shapes),
		cmocka_unit_test(test_key_too_long),
		cmocka_unit_test(test_delete_replies),
		cmocka_unit_test(test_xml_field),
		cmocka_unit_test(test_part_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
