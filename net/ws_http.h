/*
 * HTTP client over the libcurl multi interface.
 *
 * One ws_http per shard (not thread-safe): a CURLM with its connection
 * cache, so connections are reused across requests, and a bound on the
 * requests in flight. ws_http_perform runs a set of requests concurrently
 * (never more than max_in_flight at once) until each has completed or
 * failed, driving the transfers with curl_multi_poll: non-blocking sockets,
 * no thread per request.
 *
 * Request bodies are sent straight from the caller's iovecs through
 * CURLOPT_READFUNCTION: walship's buffers are not copied again (the iovecs
 * must stay valid until ws_http_perform returns). Response bodies go to the
 * request's on_body sink, which bounds them (returning WS_ETOOBIG when full).
 *
 * This layer does not retry and does not sign: store/ does both.
 *
 * Fault sites (WS_FAULTS builds): "http.perform" fails the whole call with
 * -EIO; "http.request" fails one request with -ECONNRESET before it is sent.
 */
#ifndef WS_HTTP_H
#define WS_HTTP_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ws_fail.h"


/*
 * A request's err for a TLS failure that no retry can mend: the server's
 * certificate is not trusted or does not name the host, the CA file cannot
 * be read, or the handshake failed on protocol (not on a broken
 * connection). err_detail names the URL and the ca_file in force. Not in
 * ws_err_transient's list: callers fail at once.
 */
#define WS_HTTP_ETLS (-EPROTO)

#define WS_HTTP_HDR_MAX 32        /* response headers kept per request */
#define WS_HTTP_HDR_VALUE_MAX 512

struct ws_http_opts {
	unsigned max_in_flight;      /* 1..256; 0 = 8 */
	long connect_timeout_ms;     /* 0 = 5000 */
	long timeout_ms;             /* whole transfer; 0 = 30000 (a request's deadline_ms cuts it
					shorter) */
	long low_speed_bytes;        /* abort below this many bytes/s ... (0 = off) */
	long low_speed_time_s;       /* ... for this long */
	const char *ca_file;         /* NULL = system default */
	bool insecure;               /* skip TLS verification (tests only; logged) */
};

struct ws_http_header {
	char name[64];               /* lower-cased */
	char value[WS_HTTP_HDR_VALUE_MAX]; /* "" when cut_len is set */
	size_t cut_len;              /* a value longer than value holds: its length (never kept cut) */
};

/* Appends response body bytes; returns 0 or a negative error to abort. */
typedef int (*ws_http_sink_fn)(void *arg, const void *data, size_t len);

struct ws_http_req {
	/* in */
	const char *method;          /* "GET", "PUT", "HEAD", "DELETE", "POST" */
	const char *url;             /* full URL */
	const char *const *headers;  /* "Name: value" lines: header_count of them, or, */
	size_t header_count;         /* when header_count is 0, up to a NULL entry */
	const struct iovec *body;    /* request body (PUT/POST), may be NULL */
	int body_iovcnt;
	ws_http_sink_fn on_body;     /* response body, may be NULL (discarded) */
	void *on_body_arg;
	/* Called (when not NULL) as the request is handed to libcurl, after
	 * it waited for a free slot (a perform of more requests than
	 * max_in_flight): the caller may fill in or sign the request then, so
	 * that one sent late carries the time it is sent. A non-zero return
	 * fails the request with that error, unsent (err_detail from
	 * ws_errmsg()). */
	int (*on_send)(void *arg, struct ws_http_req *r);
	void *on_send_arg;
	uint64_t deadline_ms;        /* ws_mono_ms() by which the request ends, whatever stage it
					is in (connecting, sending, waiting, receiving); 0 = only
					the client's timeout_ms. A request that would start at or
					after it fails with -ETIMEDOUT without being sent */

	/* out */
	int err;                     /* 0 (whatever the HTTP status), or negative: -ETIMEDOUT,
					-ECONNRESET (reset, or closed with no reply),
					-ECONNREFUSED, WS_HTTP_ETLS (certificate, host name or
					handshake: final), -EINVAL (bad request fields),
					-ENOMEM, the sink's own error (WS_ETOOBIG when its
					buffer is full), -EIO (other transport error,
					including a body cut short by a clean close) */
	char err_detail[256];        /* curl's message, no secrets */
	long status;                 /* HTTP status, 0 when no response */
	uint64_t body_bytes;         /* response body bytes accepted by the sink */
	int64_t content_length;      /* from the response header, -1 unknown */
	bool truncated;              /* fewer body bytes than Content-Length (never for HEAD) */
	bool unframed;               /* a body (not HEAD, 204 or 304) with neither Content-Length nor
					chunked encoding: it ended where the connection closed, which
					a body cut short does too */
	struct ws_http_header hdrs[WS_HTTP_HDR_MAX]; /* of the final response; names over 63
							bytes and headers past the first
							WS_HTTP_HDR_MAX are dropped, values
							truncated to fit */
	size_t hdr_count;
	unsigned resends;            /* times libcurl sent this request again on its own after a
					reused connection died with no reply (see ws_http_stats);
					the outcome above is the last send's */
};

struct ws_http_stats {
	uint64_t requests;
	uint64_t connects;           /* new connections made (reuse = requests - connects) */
	uint64_t bytes_sent, bytes_received; /* body bytes, headers not counted */
	/*
	 * Requests libcurl re-sent on its own: a request on a reused connection
	 * that got no byte of a reply (the server closed or reset it, maybe
	 * after acting on the request) is sent again on a fresh connection,
	 * silently, up to 5 times; libcurl 7.88 cannot be told not to. Each such
	 * resend counts here (and in the request's resends). The server may
	 * have applied the request more than once: conditional writes must be
	 * reconciled by their caller. Not counted in requests.
	 */
	uint64_t resends;
};

struct ws_http;

/* Errors: -ENOMEM, -EINVAL (bad opts), -EIO (libcurl init failed). */
struct ws_http *ws_http_open(const struct ws_http_opts *opts, int *err);
void ws_http_close(struct ws_http *h);

/*
 * Run n requests to completion, at most max_in_flight at a time. Returns 0
 * when every request ran (each has its own err/status), or a negative error
 * when the client itself failed (-EINVAL: no client or requests; -EIO:
 * libcurl's multi interface failed); then every request not completed
 * carries that error too.
 */
int ws_http_perform(struct ws_http *h, struct ws_http_req *reqs, size_t n) WS_MUST_CHECK;
/* The same over an array of pointers (requests that do not lie side by side). */
int ws_http_perform_each(struct ws_http *h, struct ws_http_req *const *reqs, size_t n) WS_MUST_CHECK;

/* First response header with this (lower-case) name, or NULL. */
const char *ws_http_header(const struct ws_http_req *r, const char *name);
/* The length of a response header's value too long to keep (ws_http_header
 * is NULL for it: no prefix of a value is ever read as the value); 0 when
 * the header is absent or kept. */
size_t ws_http_header_cut(const struct ws_http_req *r, const char *name);

void ws_http_get_stats(const struct ws_http *h, struct ws_http_stats *out);

#endif
