/*
 * HTTP client over the libcurl multi interface (libcurl 7.88).
 *
 * Layout: one CURLM per ws_http holds the connection cache; a fixed pool of
 * max_in_flight easy handles ("slots") is created at open and reused for
 * every request, so a running shard allocates nothing here beyond what
 * curl itself does per request (the header list). A slot's options that
 * never change (callbacks, TLS, protocols) are set once when it is made;
 * per request only the URL, headers, timeouts and method are, the method
 * from a clean GET each time (curl_easy_reset and setting everything again
 * cost more instructions per 64 KiB PUT than all of ws_http's own work). The multi handle caps total and per-host connections at
 * max_in_flight, and never more than max_in_flight transfers are added at
 * once, so the server never sees more than that many connections from us.
 *
 * Request bodies: CURLOPT_READFUNCTION walks the caller's iovecs and copies
 * straight into curl's send buffer; CURLOPT_SEEKFUNCTION rewinds them when
 * curl must resend (a reused connection the server had already closed).
 *
 * Silent resends: when a request on a reused connection gets no byte of a
 * reply (the server closed or reset the connection, perhaps after it had
 * acted on the request), libcurl sends the same request again on a fresh
 * connection, up to 5 times, and reports only the last outcome. libcurl 7.88
 * has no option to stop this (CURLOPT_FORBID_RETRY_ON_REUSE came in 8.16).
 * It cannot be told from a normal transfer by CURLINFO_NUM_CONNECTS (a
 * transfer that found no idle connection also makes one), so each easy
 * handle counts its CURLOPT_PREREQFUNCTION calls: libcurl calls it once per
 * request it puts on a connection, and we follow no redirects, so every call
 * after the first is a resend. They are counted per request (resends) and per
 * client (stats.resends). Callers that write conditionally must still treat
 * a reply as possibly answering a resend (store_s3.c checks its attempt
 * token on every 412).
 *
 * Deadlines: a request's deadline_ms bounds the whole transfer (curl's
 * CURLOPT_TIMEOUT_MS, set to what is left of it when the request takes a
 * slot, never more than the client's timeout_ms), so a request that hangs
 * at any stage, a server that accepted and never answers or a body that
 * stops half way, ends at the deadline with -ETIMEDOUT, not when some
 * unrelated timeout fires.
 *
 * Errors: each request gets its own err (negative errno, or the sink's own
 * error when it refused the body); ws_http_perform fails as a whole only when
 * curl's multi machinery does.
 */
#include "ws_http.h"
#include "http_internal.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "ws_assert.h"
#include "ws_clock.h"
#include "ws_fault.h"
#include "ws_logging.h"

#define HTTP_IN_FLIGHT_MAX 256
#define HTTP_POLL_MS 1000

struct slot {
	CURL *easy;
	struct ws_http_req *req;      /* NULL when the slot is free */
	struct curl_slist *hdrs;
	const struct iovec *iov;      /* request body cursor */
	int iovcnt, iov_idx;
	size_t iov_off;
	int sink_err;                 /* set when on_body refused bytes */
	unsigned sends;               /* CURLOPT_PREREQFUNCTION calls: requests put on a connection */
	bool nobody;
	char errbuf[CURL_ERROR_SIZE];
};

struct ws_http {
	CURLM *multi;
	struct slot *slots;
	unsigned slot_count;
	long connect_timeout_ms, timeout_ms, low_speed_bytes, low_speed_time_s;
	char *ca_file;
	bool insecure;
	struct ws_http_stats stats;
};

/* ---- one-time libcurl initialisation ---- */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
	/* Never paired with curl_global_cleanup: other ws_http may outlive any one of them. */
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- callbacks ---- */

static size_t on_read(char *buf, size_t size, size_t nitems, void *arg)
{
	struct slot *s = arg;
	size_t room = size * nitems, done = 0;

	while (done < room && s->iov_idx < s->iovcnt) {
		const struct iovec *v = &s->iov[s->iov_idx];
		WS_ASSERT(s->iov_off <= v->iov_len); /* the cursor stays inside its iovec */
		size_t left = v->iov_len - s->iov_off;
		size_t n = left < room - done ? left : room - done;
		if (n)
			memcpy(buf + done, (const char *)v->iov_base + s->iov_off, n);
		done += n;
		s->iov_off += n;
		if (s->iov_off == v->iov_len) {
			s->iov_idx++;
			s->iov_off = 0;
		}
	}
	WS_ASSERT(done <= room && s->iov_idx <= s->iovcnt);
	return done;
}

static int on_seek(void *arg, curl_off_t offset, int origin)
{
	struct slot *s = arg;

	if (origin != SEEK_SET || offset < 0)
		return CURL_SEEKFUNC_CANTSEEK;
	s->iov_idx = 0;
	s->iov_off = 0;
	while (s->iov_idx < s->iovcnt && (size_t)offset >= s->iov[s->iov_idx].iov_len) {
		offset -= (curl_off_t)s->iov[s->iov_idx].iov_len;
		s->iov_idx++;
	}
	if (s->iov_idx == s->iovcnt)
		return offset == 0 ? CURL_SEEKFUNC_OK : CURL_SEEKFUNC_FAIL;
	s->iov_off = (size_t)offset;
	return CURL_SEEKFUNC_OK;
}

/* libcurl is about to send the request on a connection (once per send, resends included). */
static int on_prereq(void *arg, char *primary_ip, char *local_ip, int primary_port, int local_port)
{
	struct slot *s = arg;

	(void)primary_ip;
	(void)local_ip;
	(void)primary_port;
	(void)local_port;
	s->sends++;
	return CURL_PREREQFUNC_OK;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct slot *s = arg;
	struct ws_http_req *r = s->req;
	size_t len = size * nmemb;

	WS_ASSERT(r); /* a transfer runs only while its slot holds a request */
	if (r->on_body && len) {
		int rc = r->on_body(r->on_body_arg, data, len);
		if (rc) {
			s->sink_err = rc < 0 ? rc : -EIO;
			return 0; /* anything but len aborts with CURLE_WRITE_ERROR */
		}
	}
	r->body_bytes += len;
	return len;
}

/* Copy at most cap-1 bytes of [p, p+n) into dst, NUL-terminated. */
static void copy_trunc(char *dst, size_t cap, const char *p, size_t n)
{
	WS_ASSERT(cap > 0);
	if (n > cap - 1)
		n = cap - 1;
	memcpy(dst, p, n);
	dst[n] = '\0';
}

/* The response headers walship reads (store_s3.c). */
static bool header_read(const char *lname)
{
	static const char *const names[] = { "etag", "content-range", "content-length", "last-modified",
					     "retry-after", "x-amz-meta-ws-attempt", "transfer-encoding" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(lname, names[i]))
			return true;
	return false;
}

void ws_http_header_line(struct ws_http_req *r, const char *line, size_t len)
{
	size_t name_len;
	const char *colon, *v, *end;
	struct ws_http_header *h;

	/* A new status line starts a new response (after 100 Continue, say): keep only the last. */
	if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
		const char *sp = memchr(line, ' ', len);
		r->hdr_count = 0;
		/* Its status, for the body sink before the transfer ends (it is
		 * set again from libcurl then). */
		if (sp && line + len - sp >= 4 && isdigit((unsigned char)sp[1]) && isdigit((unsigned char)sp[2]) &&
		    isdigit((unsigned char)sp[3]))
			r->status = (sp[1] - '0') * 100 + (sp[2] - '0') * 10 + (sp[3] - '0');
		return;
	}
	colon = memchr(line, ':', len);
	/* Blank line, folded continuation or garbage: nothing to keep. */
	if (!colon || colon == line || line[0] == ' ' || line[0] == '\t')
		return;
	name_len = (size_t)(colon - line);
	/* A truncated name would be a different header; drop it instead. */
	if (name_len >= sizeof(h->name))
		return;
	char lname[sizeof(h->name)];
	for (size_t i = 0; i < name_len; i++)
		lname[i] = (char)tolower((unsigned char)line[i]);
	lname[name_len] = '\0';
	if (r->hdr_count < WS_HTTP_HDR_MAX) {
		h = &r->hdrs[r->hdr_count++];
	} else {
		/* Full: a header walship reads takes the place of one it does
		 * not (a reply padded with headers must not hide its ETag). */
		h = NULL;
		if (header_read(lname))
			for (size_t i = WS_HTTP_HDR_MAX; i-- > 0 && !h;)
				if (!header_read(r->hdrs[i].name))
					h = &r->hdrs[i];
		if (!h)
			return;
	}
	/* The slot is one of hdrs[], and the name fits it (longer ones were dropped). */
	WS_ASSERT(h >= r->hdrs && h < r->hdrs + WS_HTTP_HDR_MAX && r->hdr_count <= WS_HTTP_HDR_MAX);
	WS_ASSERT(name_len < sizeof(h->name));
	memcpy(h->name, lname, name_len + 1);
	v = colon + 1;
	end = line + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
		end--;
	h->cut_len = 0;
	if ((size_t)(end - v) >= sizeof(h->value)) {
		h->cut_len = (size_t)(end - v);
		h->value[0] = '\0';
		return;
	}
	copy_trunc(h->value, sizeof(h->value), v, (size_t)(end - v));
}

static size_t on_header(char *line, size_t size, size_t nitems, void *arg)
{
	struct slot *s = arg;
	size_t len = size * nitems;

	ws_http_header_line(s->req, line, len);
	return len;
}

/* Set an option; any failure is remembered (curl_easy_setopt is variadic, hence the macro). */
#define SETOPT(s, opt, val)                                          \
	do {                                                         \
		if (curl_easy_setopt((s)->easy, (opt), (val)) != CURLE_OK) \
			bad = true;                                  \
	} while (0)

/* The options of slot s that are the same for every request. */
static int slot_init(struct ws_http *h, struct slot *s)
{
	bool bad = false;

	SETOPT(s, CURLOPT_PRIVATE, (void *)s);
	SETOPT(s, CURLOPT_ERRORBUFFER, s->errbuf);
	SETOPT(s, CURLOPT_NOSIGNAL, 1L);
	SETOPT(s, CURLOPT_TCP_NODELAY, 1L);
	SETOPT(s, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	SETOPT(s, CURLOPT_PROTOCOLS_STR, "http,https");
#if LIBCURL_VERSION_NUM >= 0x075700
	/* A timed-out request does not wait for its name lookup's thread (a
	 * slow resolver held the caller past the deadline by its own timeouts). */
	SETOPT(s, CURLOPT_QUICK_EXIT, 1L);
#endif
	if (h->low_speed_bytes > 0 && h->low_speed_time_s > 0) {
		SETOPT(s, CURLOPT_LOW_SPEED_LIMIT, h->low_speed_bytes);
		SETOPT(s, CURLOPT_LOW_SPEED_TIME, h->low_speed_time_s);
	}
	if (h->ca_file)
		SETOPT(s, CURLOPT_CAINFO, h->ca_file);
	if (h->insecure) {
		SETOPT(s, CURLOPT_SSL_VERIFYPEER, 0L);
		SETOPT(s, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	SETOPT(s, CURLOPT_HEADERFUNCTION, on_header);
	SETOPT(s, CURLOPT_HEADERDATA, (void *)s);
	SETOPT(s, CURLOPT_WRITEFUNCTION, on_write);
	SETOPT(s, CURLOPT_WRITEDATA, (void *)s);
	SETOPT(s, CURLOPT_PREREQFUNCTION, on_prereq);
	SETOPT(s, CURLOPT_PREREQDATA, (void *)s);
	/* Called only for requests with a body (UPLOAD, POST); others leave s->iov NULL. */
	SETOPT(s, CURLOPT_READFUNCTION, on_read);
	SETOPT(s, CURLOPT_READDATA, (void *)s);
	SETOPT(s, CURLOPT_SEEKFUNCTION, on_seek);
	SETOPT(s, CURLOPT_SEEKDATA, (void *)s);
	return bad ? -EIO : 0;
}

/* ---- open / close ---- */

struct ws_http *ws_http_open(const struct ws_http_opts *opts, int *err)
{
	struct ws_http *h = NULL;
	struct ws_http_opts def = { 0 };
	int rc = 0;

	if (!opts)
		opts = &def;
	if (opts->max_in_flight > HTTP_IN_FLIGHT_MAX || opts->connect_timeout_ms < 0 ||
	    opts->timeout_ms < 0 || opts->low_speed_bytes < 0 || opts->low_speed_time_s < 0) {
		rc = ws_fail(-EINVAL, "http: bad options (max_in_flight 1..%d, timeouts >= 0)",
			     HTTP_IN_FLIGHT_MAX);
		goto fail;
	}
	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK) {
		rc = ws_fail(-EIO, "http: curl_global_init: %s", curl_easy_strerror(global_rc));
		goto fail;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		rc = ws_fail(-ENOMEM, "http: client");
		goto fail;
	}
	h->slot_count = opts->max_in_flight ? opts->max_in_flight : 8;
	h->connect_timeout_ms = opts->connect_timeout_ms ? opts->connect_timeout_ms : 5000;
	h->timeout_ms = opts->timeout_ms ? opts->timeout_ms : 30000;
	h->low_speed_bytes = opts->low_speed_bytes;
	h->low_speed_time_s = opts->low_speed_time_s;
	h->insecure = opts->insecure;
	if (opts->ca_file && !(h->ca_file = strdup(opts->ca_file))) {
		rc = ws_fail(-ENOMEM, "http: ca_file");
		goto fail;
	}
	h->slots = calloc(h->slot_count, sizeof(*h->slots));
	h->multi = curl_multi_init();
	if (!h->slots || !h->multi) {
		rc = ws_fail(-ENOMEM, "http: multi handle or slots");
		goto fail;
	}
	for (unsigned i = 0; i < h->slot_count; i++) {
		if (!(h->slots[i].easy = curl_easy_init())) {
			rc = ws_fail(-ENOMEM, "http: easy handle %u", i);
			goto fail;
		}
		if (slot_init(h, &h->slots[i])) {
			rc = ws_fail(-EIO, "http: curl_easy_setopt refused an option of easy handle %u", i);
			goto fail;
		}
	}
	/* The cache keeps as many idle connections as may ever be busy at once. */
	if (curl_multi_setopt(h->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)h->slot_count) ||
	    curl_multi_setopt(h->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)h->slot_count) ||
	    curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)h->slot_count) ||
	    curl_multi_setopt(h->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING)) {
		rc = ws_fail(-EIO, "http: curl_multi_setopt");
		goto fail;
	}
	if (h->insecure)
		ws_warn("http: TLS certificate verification is OFF (insecure); for tests only");
	if (err)
		*err = 0;
	return h;

fail:
	ws_http_close(h);
	if (err)
		*err = rc;
	return NULL;
}

void ws_http_close(struct ws_http *h)
{
	if (!h)
		return;
	if (h->slots) {
		for (unsigned i = 0; i < h->slot_count; i++) {
			struct slot *s = &h->slots[i];
			if (s->req && h->multi)
				curl_multi_remove_handle(h->multi, s->easy);
			curl_slist_free_all(s->hdrs);
			if (s->easy)
				curl_easy_cleanup(s->easy);
		}
	}
	/* After the easy handles: the multi owns the connection cache they used. */
	if (h->multi)
		curl_multi_cleanup(h->multi);
	free(h->slots);
	free(h->ca_file);
	free(h);
}

/* ---- one request ---- */

static void reset_out(struct ws_http_req *r)
{
	r->err = 0;
	r->err_detail[0] = '\0';
	r->status = 0;
	r->body_bytes = 0;
	r->content_length = -1;
	r->truncated = false;
	r->unframed = false;
	r->hdr_count = 0;
	r->resends = 0;
}

static void req_fail(struct ws_http_req *r, int err, const char *detail)
{
	r->err = err;
	snprintf(r->err_detail, sizeof(r->err_detail), "%s", detail);
}

/* Whether one of the n headers ("Name: value") is named as name ("Name:"). */
static bool header_set(const char *const *headers, size_t n, const char *name)
{
	const size_t len = strlen(name);
	for (size_t i = 0; i < n; i++)
		if (headers[i] && !strncasecmp(headers[i], name, len))
			return true;
	return false;
}

/*
 * Configure slot s for r (on top of slot_init's options). Returns 0, or a negative error that belongs to
 * the request (bad input, no memory); the slot stays free in that case.
 */
static int slot_setup(struct ws_http *h, struct slot *s, struct ws_http_req *r)
{
	size_t body_len = 0, nhdr;
	bool bad = false, has_body = r->body && r->body_iovcnt > 0;
	const char *m = r->method;
	long timeout_ms = h->timeout_ms, connect_ms = h->connect_timeout_ms;

	WS_ASSERT(!s->req); /* one request per slot at a time */
	if (!r->method || !r->method[0] || !r->url || !r->url[0] || r->body_iovcnt < 0 ||
	    (r->body_iovcnt > 0 && !r->body)) {
		req_fail(r, -EINVAL, "http: request needs a method and a URL (and iovecs for its body count)");
		return -EINVAL;
	}
	for (int i = 0; has_body && i < r->body_iovcnt; i++)
		body_len += r->body[i].iov_len;
	if (r->deadline_ms) {
		/* What is left of the caller's deadline bounds every stage of this request. */
		uint64_t now = ws_mono_ms();
		if (now >= r->deadline_ms) {
			req_fail(r, -ETIMEDOUT, "http: the request's deadline passed before it was sent");
			return -ETIMEDOUT;
		}
		if (r->deadline_ms - now < (uint64_t)timeout_ms)
			timeout_ms = (long)(r->deadline_ms - now);
		if (connect_ms > timeout_ms)
			connect_ms = timeout_ms;
	}

	s->req = NULL;
	s->iov = has_body ? r->body : NULL;
	s->iovcnt = has_body ? r->body_iovcnt : 0;
	s->iov_idx = 0;
	s->iov_off = 0;
	s->sink_err = 0;
	s->sends = 0;
	s->nobody = false;
	s->errbuf[0] = '\0';
	curl_slist_free_all(s->hdrs);
	s->hdrs = NULL;

	/* header_count wins; with 0, the list runs to its NULL. */
	nhdr = r->header_count;
	if (!nhdr && r->headers)
		while (r->headers[nhdr])
			nhdr++;
	/* Last, headers libcurl would add that no store needs, each taken
	 * out by naming it empty: "Expect:" stops curl waiting a second for
	 * 100 Continue on PUT/POST, "Accept:" its default "Accept: * / *"
	 * (13 bytes on every request; S3 answers the same without it),
	 * "Content-Type:" the form type it gives a POST's body (unsigned, and
	 * a multipart create would store it as the object's type). A header
	 * the request sets itself is left as it set it. */
	static const char *const unset[] = { "Expect:", "Accept:", "Content-Type:" };
	const size_t nunset = sizeof(unset) / sizeof(unset[0]);
	for (size_t i = 0; i < nhdr + nunset; i++) {
		const char *line = i < nhdr ? r->headers[i] : unset[i - nhdr];
		struct curl_slist *n;
		if (!line || (i >= nhdr && header_set(r->headers, nhdr, line)))
			continue;
		if (!(n = curl_slist_append(s->hdrs, line))) {
			req_fail(r, -ENOMEM, "http: header list");
			return -ENOMEM;
		}
		s->hdrs = n;
	}

	SETOPT(s, CURLOPT_URL, r->url);
	SETOPT(s, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
	SETOPT(s, CURLOPT_TIMEOUT_MS, timeout_ms);
	SETOPT(s, CURLOPT_HTTPHEADER, s->hdrs);

	/* Back to a plain GET whatever the slot's last request was (each of
	 * these undoes one of the method options below), then this one's. */
	SETOPT(s, CURLOPT_UPLOAD, 0L);
	SETOPT(s, CURLOPT_NOBODY, 0L);
	SETOPT(s, CURLOPT_CUSTOMREQUEST, (char *)NULL);
	SETOPT(s, CURLOPT_HTTPGET, 1L);
	if (strcmp(m, "HEAD") == 0) {
		SETOPT(s, CURLOPT_NOBODY, 1L);
		s->nobody = true;
	} else if (strcmp(m, "POST") == 0) {
		/* POSTFIELDSIZE with no POSTFIELDS: curl pulls the body through the read callback. */
		SETOPT(s, CURLOPT_POST, 1L);
		SETOPT(s, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
	} else if (strcmp(m, "PUT") == 0 || has_body) {
		SETOPT(s, CURLOPT_UPLOAD, 1L);
		SETOPT(s, CURLOPT_INFILESIZE_LARGE, (curl_off_t)body_len);
		if (strcmp(m, "PUT") != 0)
			SETOPT(s, CURLOPT_CUSTOMREQUEST, m);
	} else if (strcmp(m, "GET") != 0) {
		SETOPT(s, CURLOPT_CUSTOMREQUEST, m);
	}
	if (bad) {
		req_fail(r, -EIO, "http: curl_easy_setopt refused an option");
		return -EIO;
	}
	s->req = r;
	return 0;
}

/*
 * A handshake that failed because of what the peer is or says, not because
 * the connection broke: the certificate, its name, its issuer, or a protocol
 * the two sides cannot agree on. Trying again meets the same certificate,
 * so these are final (WS_HTTP_ETLS). CURLE_SSL_CONNECT_ERROR also covers a
 * connection reset or closed mid-handshake (OpenSSL's SSL_ERROR_SYSCALL):
 * that one stays a transient reset.
 */
static bool tls_final(CURLcode c, const char *detail)
{
	switch (c) {
	case CURLE_PEER_FAILED_VERIFICATION: /* = CURLE_SSL_CACERT: untrusted, or the name does not match */
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_CLIENTCERT:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_USE_SSL_FAILED:
		return true;
	case CURLE_SSL_CONNECT_ERROR:
		return !strstr(detail, "SSL_ERROR_SYSCALL") && !strstr(detail, "reset by peer") &&
		       !strstr(detail, "unexpected eof") && !strstr(detail, "Connection timed out");
	default:
		return false;
	}
}

static int map_curl(CURLcode c, const char *detail)
{
	if (tls_final(c, detail))
		return WS_HTTP_ETLS;
	switch (c) {
	case CURLE_OK: return 0;
	case CURLE_OPERATION_TIMEDOUT: return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT: return -ECONNREFUSED;
	case CURLE_SSL_CONNECT_ERROR: /* broken mid-handshake (tls_final) */
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING: return -ECONNRESET;
	case CURLE_OUT_OF_MEMORY: return -ENOMEM;
	default: return -EIO;
	}
}

/* r's detail for a final TLS failure: the URL (up to its query), curl's
 * words, and the setting that decides whom walship trusts. */
static void tls_detail(const struct ws_http *h, struct ws_http_req *r, const char *curl_msg)
{
	size_t url_len = strcspn(r->url, "?");
	if (url_len > 120)
		url_len = 120;
	snprintf(r->err_detail, sizeof(r->err_detail), "TLS to %.*s failed, final (not retried): %.100s; "
		 "ca_file=%s", (int)url_len, r->url, curl_msg,
		 h->ca_file ? h->ca_file : "(unset: the system's CAs; set ca_file in the sink URL)");
}

/* Fill r's results from a finished transfer and free the slot. */
static void slot_finish(struct ws_http *h, struct slot *s, CURLcode result)
{
	struct ws_http_req *r = s->req;
	long status = 0, connects = 0;

	WS_ASSERT(r); /* only a slot in use finishes */
	curl_off_t cl = -1, up = 0, down = 0;

	curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(s->easy, CURLINFO_NUM_CONNECTS, &connects);
	curl_easy_getinfo(s->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
	curl_easy_getinfo(s->easy, CURLINFO_SIZE_UPLOAD_T, &up);
	curl_easy_getinfo(s->easy, CURLINFO_SIZE_DOWNLOAD_T, &down);
	r->status = status;
	r->content_length = cl >= 0 ? (int64_t)cl : -1;
	r->truncated = result == CURLE_PARTIAL_FILE ||
		       (!s->nobody && cl >= 0 && r->body_bytes < (uint64_t)cl);
	{
		const char *te = ws_http_header(r, "transfer-encoding");
		r->unframed = !s->nobody && cl < 0 && status != 204 && status != 304 && status >= 200 &&
			      !(te && strcasestr(te, "chunked"));
	}
	if (result == CURLE_WRITE_ERROR && s->sink_err) {
		r->err = s->sink_err;
		snprintf(r->err_detail, sizeof(r->err_detail),
			 "response body refused by the sink after %llu bytes",
			 (unsigned long long)r->body_bytes);
	} else if (result != CURLE_OK) {
		const char *msg = s->errbuf[0] ? s->errbuf : curl_easy_strerror(result);
		r->err = map_curl(result, msg);
		if (r->err == WS_HTTP_ETLS)
			tls_detail(h, r, msg);
		else
			snprintf(r->err_detail, sizeof(r->err_detail), "%s", msg);
	}
	r->resends = s->sends > 1 ? s->sends - 1 : 0;
	h->stats.resends += r->resends;
	h->stats.connects += connects > 0 ? (uint64_t)connects : 0;
	h->stats.bytes_sent += up > 0 ? (uint64_t)up : 0;
	h->stats.bytes_received += down > 0 ? (uint64_t)down : 0;

	curl_multi_remove_handle(h->multi, s->easy);
	curl_slist_free_all(s->hdrs);
	s->hdrs = NULL;
	s->req = NULL;
}

static struct slot *free_slot(struct ws_http *h)
{
	for (unsigned i = 0; i < h->slot_count; i++)
		if (!h->slots[i].req)
			return &h->slots[i];
	return NULL;
}

/* Abandon every active transfer (the multi handle failed); each gets err. */
static void abort_all(struct ws_http *h, int err, const char *why)
{
	for (unsigned i = 0; i < h->slot_count; i++) {
		struct slot *s = &h->slots[i];
		if (!s->req)
			continue;
		curl_multi_remove_handle(h->multi, s->easy);
		req_fail(s->req, err, why);
		curl_slist_free_all(s->hdrs);
		s->hdrs = NULL;
		s->req = NULL;
	}
}

/* Request i of a perform call: from the array, or through the pointer array. */
static struct ws_http_req *req_at(struct ws_http_req *arr, struct ws_http_req *const *ptrs, size_t i)
{
	return ptrs ? ptrs[i] : &arr[i];
}

static int perform(struct ws_http *h, struct ws_http_req *reqs, struct ws_http_req *const *ptrs, size_t n)
{
	size_t next = 0;
	unsigned active = 0;
	int rc = 0;

	if (!h || (n && !reqs && !ptrs))
		return ws_fail(-EINVAL, "http: perform without a client or requests");
	for (size_t i = 0; i < n; i++) {
		if (!req_at(reqs, ptrs, i))
			return ws_fail(-EINVAL, "http: perform: request %zu is NULL", i);
	}
	for (size_t i = 0; i < n; i++)
		reset_out(req_at(reqs, ptrs, i));
	if ((rc = WS_FAULT("http.perform"))) {
		rc = ws_fail(rc, "http: fault injected at http.perform");
		goto fail;
	}

	for (;;) {
		int running = 0;
		CURLMsg *msg;
		CURLMcode mc;

		while (active < h->slot_count && next < n) {
			struct ws_http_req *r = req_at(reqs, ptrs, next++);
			struct slot *s = free_slot(h);
			WS_ASSERT(s); /* fewer active than slots: one is free */
			if (r->on_send) {
				int e = r->on_send(r->on_send_arg, r);
				reset_out(r); /* whatever the callback set there */
				if (e) {
					req_fail(r, e, ws_errmsg());
					continue;
				}
			}
			/* A fault here looks like a connection that died before any reply. */
			if (WS_FAULT("http.request")) {
				req_fail(r, -ECONNRESET, "http: fault injected at http.request");
				continue;
			}
			if (slot_setup(h, s, r))
				continue;
			if ((mc = curl_multi_add_handle(h->multi, s->easy)) != CURLM_OK) {
				s->req = NULL;
				req_fail(r, -EIO, curl_multi_strerror(mc));
				rc = ws_fail(-EIO, "http: curl_multi_add_handle: %s", curl_multi_strerror(mc));
				goto fail;
			}
			h->stats.requests++;
			active++;
		}
		if (active == 0 && next == n)
			break;

		if ((mc = curl_multi_perform(h->multi, &running)) != CURLM_OK) {
			rc = ws_fail(-EIO, "http: curl_multi_perform: %s", curl_multi_strerror(mc));
			goto fail;
		}
		bool freed = false;
		int left;
		while ((msg = curl_multi_info_read(h->multi, &left))) {
			char *priv = NULL;
			struct slot *s;
			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
			s = (struct slot *)(void *)priv;
			if (!s || !s->req)
				continue;
			WS_ASSERT(active > 0);
			slot_finish(h, s, msg->data.result);
			active--;
			freed = true;
		}
		/* A slot came free: start the next request before waiting on sockets. */
		if ((freed && next < n) || active == 0)
			continue;
		if ((mc = curl_multi_poll(h->multi, NULL, 0, HTTP_POLL_MS, NULL)) != CURLM_OK) {
			rc = ws_fail(-EIO, "http: curl_multi_poll: %s", curl_multi_strerror(mc));
			goto fail;
		}
	}
	return 0;

fail:
	abort_all(h, rc, "http: client failed before this request completed");
	/* Requests never started carry the client's error too, so none reads as success. */
	for (; next < n; next++)
		req_fail(req_at(reqs, ptrs, next), rc, "http: client failed before this request started");
	return rc;
}

int ws_http_perform(struct ws_http *h, struct ws_http_req *reqs, size_t n)
{
	return perform(h, reqs, NULL, n);
}

int ws_http_perform_each(struct ws_http *h, struct ws_http_req *const *reqs, size_t n)
{
	if (n && !reqs)
		return ws_fail(-EINVAL, "http: perform without a client or requests");
	return perform(h, NULL, reqs, n);
}

const char *ws_http_header(const struct ws_http_req *r, const char *name)
{
	if (!r || !name)
		return NULL;
	for (size_t i = 0; i < r->hdr_count && i < WS_HTTP_HDR_MAX; i++)
		if (strcasecmp(r->hdrs[i].name, name) == 0)
			return r->hdrs[i].cut_len ? NULL : r->hdrs[i].value;
	return NULL;
}

size_t ws_http_header_cut(const struct ws_http_req *r, const char *name)
{
	if (!r || !name)
		return 0;
	for (size_t i = 0; i < r->hdr_count && i < WS_HTTP_HDR_MAX; i++)
		if (strcasecmp(r->hdrs[i].name, name) == 0)
			return r->hdrs[i].cut_len;
	return 0;
}

void ws_http_get_stats(const struct ws_http *h, struct ws_http_stats *out)
{
	if (!out)
		return;
	if (!h) {
		memset(out, 0, sizeof(*out));
		return;
	}
	*out = h->stats;
}
