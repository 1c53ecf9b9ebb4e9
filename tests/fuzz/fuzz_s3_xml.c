/*
 * S3 response bodies (store/store_s3.c, expat): a ListObjectsV2 listing, a
 * DeleteObjects reply and an error body's <Code>, as the server sends them.
 * The first input byte picks the listing's context (the sink's prefix, the
 * list prefix, a start-after token, the page size); the rest is the body,
 * given to all three parsers. A listing accepted is sorted, within the
 * prefix, after the token, and no larger than the page.
 */
#include <errno.h>

#include "fuzz.h"
#include "s3_internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const store_prefixes[] = { "", "walship/p" };
	static const char *const prefixes[] = { "", "a/" };
	static const char *const tokens[] = { NULL, "a/0005" };
	static const unsigned caps[] = { 1000, 2 };
	struct ws_list_page page;
	const char *sp, *prefix, *token;
	unsigned cap;
	char code[64];
	int rc;

	if (size < 1)
		return 0;
	sp = store_prefixes[data[0] & 1];
	prefix = prefixes[(data[0] >> 1) & 1];
	token = tokens[(data[0] >> 2) & 1];
	cap = caps[(data[0] >> 3) & 1];
	data++;
	size--;

	memset(&page, 0, sizeof(page));
	page.keys = calloc(cap, sizeof(*page.keys));
	page.sizes = calloc(cap, sizeof(*page.sizes));
	if (!page.keys || !page.sizes)
		abort();
	rc = ws_s3_list_parse("s3://fuzz", data, size, sp, prefix, token, cap, &page);
	FUZZ_CHECK(rc <= 0);
	if (rc == 0) {
		FUZZ_CHECK(page.count <= cap);
		for (size_t i = 0; i < page.count; i++) {
			FUZZ_CHECK(page.keys[i] && !strncmp(page.keys[i], prefix, strlen(prefix)));
			FUZZ_CHECK(!token || strcmp(page.keys[i], token) > 0);
			FUZZ_CHECK(i == 0 || strcmp(page.keys[i - 1], page.keys[i]) < 0);
		}
		FUZZ_CHECK(!page.truncated || (page.count > 0 && !strcmp(page.next_token, page.keys[page.count - 1])));
	}
	ws_list_page_free(&page);

	rc = ws_s3_delete_parse("s3://fuzz", data, size);
	FUZZ_CHECK(rc == 0 || rc == -EIO || rc == WS_EFORMAT || rc == -ENOMEM);

	ws_s3_error_code(data, size, code, sizeof(code));
	FUZZ_CHECK(strlen(code) < sizeof(code));

	char id[64];
	rc = ws_s3_xml_field("s3://fuzz", "fuzz", data, size, "InitiateMultipartUploadResult", "UploadId", id,
			     sizeof(id));
	FUZZ_CHECK(rc == WS_EFORMAT || rc == -ENOMEM || (rc == 0 && id[0] && strlen(id) < sizeof(id)));
	return 0;
}
