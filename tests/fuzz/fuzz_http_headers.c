/*
 * HTTP response headers: the input is what libcurl hands net/http.c, one
 * line per '\n' (CRLF kept, status lines included), through
 * ws_http_header_line; then what store_s3.c reads from them (a HEAD's size,
 * etag, mtime and attempt token; Retry-After). Kept headers must be
 * NUL-terminated, lower-cased, within the table, and findable.
 */
#include <ctype.h>
#include <errno.h>

#include "fuzz.h"
#include "http_internal.h"
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
	static struct ws_http_req r; /* 17 KiB of headers */
	struct ws_obj_info info;
	char attempt[64];
	const char *p = (const char *)data, *end = p + size;

	memset(&r, 0, sizeof(r));
	r.content_length = -1;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		/* libcurl's buffer is its own copy: an exact-size one lets ASan see overreads. */
		char *line = malloc(n ? n : 1);
		if (!line)
			abort();
		memcpy(line, p, n);
		ws_http_header_line(&r, line, n);
		free(line);
		p += n;
	}
	FUZZ_CHECK(r.hdr_count <= WS_HTTP_HDR_MAX);
	for (size_t i = 0; i < r.hdr_count; i++) {
		const struct ws_http_header *h = &r.hdrs[i];
		FUZZ_CHECK(memchr(h->name, '\0', sizeof(h->name)) && memchr(h->value, '\0', sizeof(h->value)));
		for (const char *c = h->name; *c; c++)
			FUZZ_CHECK(!isupper((unsigned char)*c));
		/* A value too long to keep is absent, with its length, never cut;
		 * the lookup answers for the first header of a name. */
		FUZZ_CHECK(!h->cut_len || (h->cut_len >= sizeof(h->value) && !h->value[0]));
		FUZZ_CHECK((ws_http_header(&r, h->name) != NULL) != (ws_http_header_cut(&r, h->name) != 0));
	}
	ws_s3_head_info(&r, &info, attempt, sizeof(attempt));
	FUZZ_CHECK(!info.etag.too_long || !info.etag.s[0]);
	FUZZ_CHECK(memchr(info.etag.s, '\0', sizeof(info.etag.s)) && memchr(attempt, '\0', sizeof(attempt)));
	FUZZ_CHECK(ws_s3_retry_after_ms(&r) <= 60000);
	return 0;
}
