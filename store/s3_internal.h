/*
 * The s3:// backend's internals: its response parsers, apart from the
 * network so that tests/fuzz can feed them any bytes, and what its five
 * files share (the store, one call, one PUT). store_s3.c runs the signed
 * requests with their retries, s3_ops.c the operations over them,
 * s3_multipart.c uploads in parts, s3_list.c the XML bodies, s3_url.c the
 * URL and open. Nothing outside
 * store/, tests/unit and tests/fuzz includes this header.
 */
#ifndef WS_S3_INTERNAL_H
#define WS_S3_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ws_http.h"
#include "ws_pacer.h"
#include "ws_sigv4.h"
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

/* The text of root's child element field (the first) of a small XML reply
 * into out (cap bytes); field NULL: only that the reply is a root. what
 * names the request in errors. WS_EFORMAT (not
 * well-formed, another root, no such field or an empty one, longer than
 * cap-1), -ENOMEM. */
int ws_s3_xml_field(const char *url, const char *what, const void *xml, size_t len, const char *root,
		    const char *field, char *out, size_t cap);

/* The <Code> of an S3 error body into out (cap bytes), "" when none fits. */
void ws_s3_error_code(const void *body, size_t len, char *out, size_t cap);

/* A HEAD response's headers: size, etag without quotes, mtime, and our
 * attempt token (x-amz-meta-ws-attempt, "" when absent). Either may be NULL. */
void ws_s3_head_info(const struct ws_http_req *r, struct ws_obj_info *info, char *attempt, size_t attempt_cap);

/* S3's most parts in one multipart upload, and its least part (but the last). */
#define WS_S3_PARTS_MAX 10000u
#define WS_S3_PART_BYTES_MIN ((uint64_t)5 << 20)
#define WS_S3_PART_BYTES_MAX ((uint64_t)5 << 30)
/* The size of the parts of a len-byte object for parts of want bytes asked
 * for: want, or, when that makes more than WS_S3_PARTS_MAX, the least
 * whole number of MiB that does not. */
uint64_t ws_s3_part_bytes(uint64_t len, uint64_t want);

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

/* ---- the backend's pieces: store_s3.c (requests), s3_ops.c, s3_list.c, s3_url.c ---- */

#define URL_MAX 2048

struct s3_store {
	struct ws_store base;
	struct ws_http *http;
	struct ws_sigv4_creds creds;
	char bucket[64];
	char prefix[WS_KEY_MAX];     /* "" or "dir/sub" without slashes at the ends */
	char endpoint[512];          /* "http://127.0.0.1:7480", no trailing slash */
	char host[512];              /* Host header */
	bool path_style;
	int etag_quotes;             /* -1 auto (probed), 0 bare, 1 quoted: as configured */
	bool if_match_known;         /* if_match_quoted is settled (configured or probed) */
	bool if_match_quoted;        /* If-Match carries the etag in quotes */
	bool conditional_writes;
	bool payload_unsigned;       /* PUT bodies as UNSIGNED-PAYLOAD (payload_signing=unsigned) */
	unsigned attempts_max;
	uint64_t deadline_ms;
	uint64_t rng;
	bool pace;                   /* pace writes once throttled (pace=1, the default) */
	uint64_t mp_threshold;       /* objects of more bytes go up in parts (multipart_threshold_bytes) */
	uint64_t part_bytes;         /* their parts' size before ws_s3_part_bytes (multipart_part_bytes) */
	struct shared_pacer *pacer;  /* shared by the process's handles on this endpoint and bucket */
};

struct shared_pacer {
	struct shared_pacer *next;
	char name[600];              /* endpoint "|" bucket */
	unsigned refs;
	struct ws_pacer p;
	int if_match_form;           /* -1: not probed yet; else the form a probe settled (1 quoted, 0 bare) */
};

struct body_ctx {
	struct ws_buf *buf;
	const struct ws_http_req *req;   /* its status, once the status line is in */
};

struct s3_call {
	const char *method;
	const char *key;             /* object key, or "" for the bucket */
	const char *query;           /* raw, without '?', or NULL */
	const char *extra[6];        /* extra "Name: value" headers (signed) */
	size_t extra_count;
	const struct iovec *body;
	int body_iovcnt;
	struct ws_buf *resp;         /* response body, may be NULL */
	bool conditional;            /* 409 ConditionalRequestConflict is retried */
	bool unsigned_payload;       /* body sent as UNSIGNED-PAYLOAD: never hashed */
	bool framed;                 /* a 2xx body must say where it ends (Content-Length or chunked):
					one that ends where the connection closes is retried as cut */
	uint64_t within_ms;          /* monotonic, 0 = none: a step of a call with this deadline (a HEAD
					that settles a PUT's 412), which may not outlast it */
	bool error_in_2xx;           /* a 2xx whose body is an S3 <Error> document is a failed attempt
					(PUTs always; CompleteMultipartUpload answers its errors so) */
	/* state across attempts (call_begin) */
	char payload_hash[65];
	uint64_t deadline_ms;        /* monotonic */
	size_t resp_len0;
	struct body_ctx bc;
	struct s3_store *store;      /* s3_call_many: signs the call as it is sent ... */
	int sign_rc;                 /* ... and how that went */
	/* the signed request of the current attempt: req points into these */
	char url[URL_MAX + WS_KEY_MAX * 7];
	char h_date[64], h_sha[128], h_auth[WS_SIGV4_AUTH_MAX + 32], h_token[4200];
	const char *lines[16];
	/* out */
	struct ws_http_req req;
	unsigned attempts;
	unsigned throttle_retries;   /* retries of this call caused by throttling */
	uint64_t retry_until_ms;     /* mono ms: the latest end of a Retry-After a throttled attempt carried */
	long throttle_status;        /* the HTTP status of the last throttled attempt (503, 429) */
	uint64_t backoff_ms;         /* wait before the next attempt (call_judge returned 1) */
};


/* One PUT: its call, and what all its attempts share (headers, attempt token). */
struct s3_put_op {
	struct s3_call c;
	enum ws_put_mode mode;
	struct ws_etag expect;       /* CAS: the etag If-Match names (bare) */
	char h_len[64], h_cond[WS_ETAG_MAX + 32], h_attempt[64], token[33];
	struct ws_buf err_body;
};

/* The ops table (s3_ops.c) a store opened by s3_url.c carries. */
extern const struct ws_store_ops s3_ops;

/* store_s3.c: one signed request with retries. */
/* Run c with retries: 0 with c->req.status the final HTTP status (2xx or a
 * status not retried), or a negative error when retries ran out. */
int s3_call(struct s3_store *s, struct s3_call *c);
/* A final status that is not success, as an error naming what was asked. */
int s3_status_error(struct s3_store *s, const struct s3_call *c, const struct ws_buf *body);
/* An S3 error body's <Code> (b may be NULL: ""). */
void s3_error_code(const struct ws_buf *b, char *out, size_t cap);
/* The next of the store's random numbers (jitter, attempt tokens, probe keys). */
uint64_t s3_rnd64(struct s3_store *s);
/* A reply's ETag, bare; too long to keep: "" with its length. */
void s3_reply_etag(const struct ws_http_req *r, struct ws_etag *out);
/* -EPROTO: the store's etag for key is longer than walship keeps. */
int s3_etag_too_long(const struct s3_store *s, const char *what, const char *key, const struct ws_etag *e);
int s3_put_many(struct ws_store *base, struct ws_put_req *reqs, size_t n);
/* n calls at once, each with its own retries (store_s3.c says how): rcs[i]
 * as s3_call returns for calls[i]; negative when the HTTP client failed. */
int s3_call_many(struct s3_store *s, struct s3_call **calls, int *rcs, size_t n);

/* s3_ops.c: a PUT set up (nothing sent) and judged once its call ended. */
int s3_put_begin(struct s3_store *s, struct s3_put_op *op, const char *key, const struct iovec *iov, int iovcnt,
		 enum ws_put_mode mode, const struct ws_etag *expect);
int s3_put_end(struct s3_store *s, struct s3_put_op *op, struct ws_etag *out_etag);
/* HEAD of key: its info and attempt token (x-amz-meta-ws-attempt, "" when
 * none), within the deadline within_ms (0: its own). WS_ENOTFOUND, errors. */
int s3_head_attempt(struct s3_store *s, const char *key, struct ws_obj_info *info, char *attempt, size_t cap,
		    uint64_t within_ms);
/* Which If-Match spelling the store honours, and that it enforces both conditions. */
int s3_probe_conditional(struct s3_store *s);

/* s3_multipart.c: an object in parts (overwrite or create-once), from the
 * caller's iovecs (len bytes); errors as a PUT's, and WS_EFORMAT for a
 * reply that is not what S3 sends. The upload is aborted on any failure. */
int s3_multipart_put(struct s3_store *s, const char *key, const struct iovec *iov, int iovcnt, uint64_t len,
		     enum ws_put_mode mode, struct ws_etag *out_etag);

/* s3_list.c */
int s3_list(struct ws_store *base, const char *prefix, const char *token, unsigned max_keys,
	    struct ws_list_page *out);
int s3_del_many(struct ws_store *base, const char *const *keys, size_t n);

/* s3_url.c: the write pacer of an endpoint and bucket, shared and counted. */
struct shared_pacer *s3_pacer_get(const char *endpoint, const char *bucket);
void s3_pacer_put(struct shared_pacer *sp);
/* The If-Match form a probe of this process settled on the endpoint and
 * bucket while any handle on them stayed open (-1: none), and its record. */
int s3_pacer_if_match(struct shared_pacer *sp);
void s3_pacer_set_if_match(struct shared_pacer *sp, bool quoted);

#endif
