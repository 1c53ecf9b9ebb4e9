/*
 * The s3:// backend's response parsers, apart from the network so that
 * tests/fuzz can feed them any bytes. store_s3.c is their only caller in the
 * library; nothing outside store/ and tests/fuzz includes this header.
 */
#ifndef WS_S3_INTERNAL_H
#define WS_S3_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ws_http.h"
#include "ws_store.h"

/*
 * A ListObjectsV2 response body: keys (without store_prefix and its '/')
 * and sizes into out, whose keys and sizes arrays the caller allocated for
 * max_keys entries and which holds none yet. Keys must be sorted, start with
 * prefix and come after token (when not NULL or ""). url names the sink in
 * errors. Errors: WS_EFORMAT, -ENOMEM; out may then hold keys (the caller
 * frees it with ws_list_page_free either way).
 */
int ws_s3_list_parse(const char *url, const void *xml, size_t len, const char *store_prefix, const char *prefix,
		     const char *token, unsigned max_keys, struct ws_list_page *out);

/* A quiet DeleteObjects response body: 0, -EIO (a key not deleted, other
 * than NoSuchKey; the detail names the first), WS_EFORMAT, -ENOMEM. */
int ws_s3_delete_parse(const char *url, const void *xml, size_t len);

/* The <Code> of an S3 error body into out (cap bytes), "" when none fits. */
void ws_s3_error_code(const void *body, size_t len, char *out, size_t cap);

/* A HEAD response's headers: size, etag without quotes, mtime, and our
 * attempt token (x-amz-meta-ws-attempt, "" when absent). Either may be NULL. */
void ws_s3_head_info(const struct ws_http_req *r, struct ws_obj_info *info, char *attempt, size_t attempt_cap);

/* lim as the query parameters the s3:// URL spells them into q (cap bytes): q, or NULL when lim is. */
const char *ws_s3_limits_query(const struct ws_store_limits *lim, char *q, size_t cap);

/* Retry-After in milliseconds when it is whole seconds 0..60, else 0. */
/* Retry-After is honoured up to this long: a store asking for more is
 * waited for this long and asked again. */
#define WS_S3_RETRY_AFTER_MAX_MS 60000u
/* A Retry-After value: delay-seconds or an HTTP-date (IMF-fixdate, RFC 850,
 * asctime), relative to now_wall_ms; *ms capped at WS_S3_RETRY_AFTER_MAX_MS,
 * 0 for a date already past. -EINVAL (and *ms 0) for anything else. */
int ws_s3_parse_retry_after(const char *v, int64_t now_wall_ms, uint64_t *ms);
/* The response's Retry-After in ms (0: none, or not one of the forms). */
uint64_t ws_s3_retry_after_ms(const struct ws_http_req *r);

#endif
