/*
 * The s3:// backend: S3-compatible object storage (AWS S3, R2, Ceph RGW)
 * over net/ (libcurl multi, SigV4 signed here, never by libcurl).
 *
 * URL: s3://BUCKET[/PREFIX][?endpoint=http://127.0.0.1:7480&region=us-east-1
 *      &etag_quotes=auto|0|1&conditional_writes=off&ca_file=/path&insecure=1
 *      &retry_attempts_max=10&retry_deadline_ms=30000&max_in_flight=8
 *      &payload_signing=signed|unsigned&multipart_threshold_bytes=64MiB
 *      &multipart_part_bytes=16MiB]
 * A custom endpoint is addressed path-style (endpoint/BUCKET/KEY); without
 * one, AWS virtual-hosted style (https://BUCKET.s3.REGION.amazonaws.com/KEY).
 * Everything is checked at open, before any request (WS_ECONFIG naming the
 * parameter): the bucket by S3's naming rules, the region as a region name
 * (it goes into the signature and, without an endpoint, the host name), the
 * endpoint as scheme://host[:port] with a port of 1..65535 and no user
 * info, and no value with a control byte (which would split a header).
 * Messages show the URL as written, less any user info (display_url), and
 * never the defaults a caller passed beside it (ws_store_s3_open_defaults).
 * Credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
 * AWS_REGION. They never appear in logs or error details.
 *
 * Payload signing: x-amz-content-sha256 carries the SHA-256 of a PUT's body
 * (signed: the server verifies it) or the literal UNSIGNED-PAYLOAD (the
 * headers are still signed; the body is then neither hashed here nor
 * verified by the server). Default: unsigned over https, where TLS protects
 * the body in transit (what the AWS SDKs do for PutObject), signed over
 * plain http. walship checks every object by its own hashes on read-back
 * either way. GET, HEAD and DELETE, which have no body, send
 * UNSIGNED-PAYLOAD in every mode (call_begin), and DeleteObjects (a POST
 * with an XML body) always signs its body. Content-Length is sent but not
 * signed (call_sign).
 *
 * Conditional writes: create-once is If-None-Match: *, compare-and-swap is
 * If-Match: ETAG, quoted (RFC 9110, AWS) or bare (radosgw 16.2 matches only
 * that): etag_quotes=auto (the default) finds out which by probing
 * (probe_conditional), 0|1 forces one. 412 is a clean precondition failure;
 * 409 ConditionalRequestConflict is retried. Every PUT carries a random
 * attempt token in x-amz-meta-ws-attempt: when a conditional PUT gets 412, a
 * HEAD tells our own earlier success (same token) from someone else's write,
 * and a swap refused while the object still has the etag it named from
 * both: that is the store not honouring If-Match (WS_EBADSTORE), never
 * retried as if another writer had won.
 *
 * Retries: exponential backoff with full jitter (50 ms base, 5 s cap),
 * Retry-After honoured (seconds or an HTTP date, at most 60 s; reported
 * with each put_many request), bounded by attempts and a deadline
 * (retry_deadline_ms from the call's start, which also cuts an attempt
 * still hanging then: net/ ends each request at it); on 500, 502,
 * 503, 504, 429, 408, transport errors and truncated bodies; never on other
 * 4xx. 503 and 429 count as throttling (stats.throttle_retries); when
 * retries run out and the last failure was throttling, the error is
 * WS_ETHROTTLED (backpressure policies tell it from other failures).
 * libcurl's own silent resends on a dead reused connection are not retries:
 * they count in stats.resends (net/ws_http.h says when they happen).
 *
 * Objects over multipart_threshold_bytes go up in parts of
 * multipart_part_bytes (s3_multipart.c). get_many runs ranged GETs at once
 * as put_many runs PUTs (s3_call_many).
 *
 * put_many: the PUTs run concurrently over the store's one ws_http (up to
 * max_in_flight at once), each signed (and hashed, when payloads are
 * signed) and retried on its own, in rounds (s3_put_many). Overwrite and
 * create-once only.
 *
 * Before the sink is trusted for fencing, open probes once that the store
 * enforces create-once and compare-and-swap (probe_conditional), and which
 * If-Match spelling it honours; a store opened without the probe
 * (WS_STORE_EXISTING) runs it before its first swap when etag_quotes is
 * auto. A store that enforces neither spelling is refused unless
 * conditional_writes=off, logged.
 *
 * The backend's files: this one runs the signed requests with their
 * retries (one call, and put_many's concurrent rounds); s3_ops.c the
 * operations over them (HEAD, PUT, GET, DELETE, the probe, the ops table);
 * s3_multipart.c the uploads in parts; s3_list.c the XML bodies
 * (ListObjectsV2, DeleteObjects, the small replies of uploads in parts); s3_url.c the URL,
 * open and the shared write pacers. s3_internal.h is what they share.
 */
#include <assert.h>
#include <stdatomic.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ws_clock.h"
#include "ws_hash.h"
#include "ws_logging.h"
#include "ws_sigv4.h"
#include "ws_assert.h"
#include "s3_internal.h"

#define BACKOFF_BASE_MS 50
#define BACKOFF_CAP_MS 5000

static bool is_write(const char *method) { return method[0] == 'P' || method[0] == 'D'; /* PUT POST DELETE */ }

/* ---- small helpers ----------------------------------------------------- */

uint64_t s3_rnd64(struct s3_store *s)
{
	/* xorshift64*: only for jitter and attempt tokens, seeded from getrandom. */
	uint64_t x = s->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	s->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* An ETag header's value, bare. One longer than struct ws_etag holds is
 * never cut (a compare-and-swap naming a prefix of it would never match):
 * it is kept as "" with its length, which a swap against it reports. */
static void strip_quotes(const char *in, struct ws_etag *out)
{
	size_t whole = strlen(in), n = whole;
	if (n >= 2 && in[0] == '"' && in[n - 1] == '"') {
		in++;
		n -= 2;
	}
	out->too_long = 0;
	if (n >= sizeof(out->s)) {
		out->too_long = whole > UINT32_MAX ? UINT32_MAX : (uint32_t)whole;
		n = 0;
	}
	WS_ASSERT(n < sizeof(out->s)); /* never cut: kept whole or not at all */
	memcpy(out->s, in, n);
	out->s[n] = '\0';
}

/* A reply's ETag, bare; too long to keep: "" with its length. */
void s3_reply_etag(const struct ws_http_req *r, struct ws_etag *out)
{
	const char *v = ws_http_header(r, "etag");
	size_t cut = ws_http_header_cut(r, "etag");
	memset(out, 0, sizeof(*out));
	if (v)
		strip_quotes(v, out);
	else if (cut)
		out->too_long = cut > UINT32_MAX ? UINT32_MAX : (uint32_t)cut;
}

int s3_etag_too_long(const struct s3_store *s, const char *what, const char *key, const struct ws_etag *e)
{
	return ws_fail(-EPROTO, "s3 %s: %s%s: the store's ETag for it is %u bytes, longer than the %d bytes walship "
		       "keeps: compare-and-swap cannot name it", s->base.url, what, key, e->too_long, WS_ETAG_MAX - 1);
}

/* Object path for key ("" for the bucket itself), URI-encoded. */
static int object_path(struct s3_store *s, const char *key, char *out, size_t cap)
{
	char full[WS_KEY_MAX * 2];
	char enc[WS_KEY_MAX * 6];
	int n;
	if (!key[0]) {
		/* The bucket itself. */
		n = snprintf(out, cap, "/%s", s->path_style ? s->bucket : "");
		return n < 0 || (size_t)n >= cap ? WS_ETOOBIG : 0;
	}
	n = snprintf(full, sizeof(full), "%s%s%s", s->prefix, s->prefix[0] ? "/" : "", key);
	if (n < 0 || (size_t)n >= sizeof(full))
		return WS_ETOOBIG;
	if (ws_uri_encode(full, strlen(full), true, enc, sizeof(enc)) != 0)
		return WS_ETOOBIG;
	if (s->path_style)
		n = snprintf(out, cap, "/%s/%s", s->bucket, enc);
	else
		n = snprintf(out, cap, "/%s", enc);
	return n < 0 || (size_t)n >= cap ? WS_ETOOBIG : 0;
}

static int body_append(void *arg, const void *data, size_t len)
{
	struct body_ctx *c = arg;
	if (c->req && c->req->status >= 300) {
		/* An error's body only names the error: its first part does, and
		 * a long error page (a proxy's 503) must not turn a throttle or
		 * a retryable error into a final "response too large". */
		size_t max = c->buf->max ? c->buf->max : WS_BUF_DEFAULT_MAX;
		size_t room = max > c->buf->len ? max - c->buf->len : 0;
		if (len > room)
			len = room;
		if (len == 0)
			return 0;
	}
	return ws_buf_append(c->buf, data, len);
}

/* ---- one signed request, with retries ----------------------------------- */

static bool retryable_status(long st)
{
	return st == 500 || st == 502 || st == 503 || st == 504 || st == 429 || st == 408;
}

static bool throttle_status(long st)
{
	return st == 503 || st == 429;
}

/* "Sun" .. "Sat" and "Jan" .. "Dec" as HTTP dates spell them. */
static int name_index(const char *p, const char *const *names, int n, size_t len)
{
	for (int i = 0; i < n; i++)
		if (strlen(names[i]) == len && !strncmp(p, names[i], len))
			return i;
	return -1;
}

/* Exactly n digits at *p (advanced past them). */
static bool digits(const char **p, int n, int *out)
{
	int v = 0;
	for (int i = 0; i < n; i++) {
		if ((*p)[i] < '0' || (*p)[i] > '9')
			return false;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return true;
}

static bool lit(const char **p, const char *s)
{
	size_t n = strlen(s);
	if (strncmp(*p, s, n))
		return false;
	*p += n;
	return true;
}

/* "HH:MM:SS" */
static bool hms(const char **p, struct tm *tm)
{
	return digits(p, 2, &tm->tm_hour) && lit(p, ":") && digits(p, 2, &tm->tm_min) && lit(p, ":") &&
	       digits(p, 2, &tm->tm_sec) && tm->tm_hour < 24 && tm->tm_min < 60 && tm->tm_sec <= 60;
}

/*
 * The three HTTP-date forms a recipient must accept (RFC 9110 5.6.7):
 * IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", RFC 850
 * "Sunday, 06-Nov-94 08:49:37 GMT" and asctime "Sun Nov  6 08:49:37 1994".
 * Seconds since the epoch, or -1 for anything else.
 */
static int64_t http_date(const char *v)
{
	static const char *const wk[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
	static const char *const wkl[] = { "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday" };
	static const char *const mon[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	struct tm tm;
	const char *p = v, *comma = strchr(v, ',');
	int year = 0;

	memset(&tm, 0, sizeof(tm));
	if (comma && comma - v == 3) { /* IMF-fixdate */
		if (name_index(v, wk, 7, 3) < 0)
			return -1;
		p = v + 4;
		if (!lit(&p, " ") || !digits(&p, 2, &tm.tm_mday) || !lit(&p, " ") ||
		    (tm.tm_mon = name_index(p, mon, 12, 3)) < 0)
			return -1;
		p += 3;
		if (!lit(&p, " ") || !digits(&p, 4, &year) || !lit(&p, " ") || !hms(&p, &tm) || !lit(&p, " GMT"))
			return -1;
	} else if (comma) { /* RFC 850 */
		if (name_index(v, wkl, 7, (size_t)(comma - v)) < 0)
			return -1;
		p = comma + 1;
		if (!lit(&p, " ") || !digits(&p, 2, &tm.tm_mday) || !lit(&p, "-") ||
		    (tm.tm_mon = name_index(p, mon, 12, 3)) < 0)
			return -1;
		p += 3;
		if (!lit(&p, "-") || !digits(&p, 2, &year) || !lit(&p, " ") || !hms(&p, &tm) || !lit(&p, " GMT"))
			return -1;
		year += year < 70 ? 2000 : 1900; /* two-digit years: RFC 9110's 50-year rule, simplified */
	} else { /* asctime */
		if (name_index(v, wk, 7, 3) < 0)
			return -1;
		p = v + 3;
		if (!lit(&p, " ") || (tm.tm_mon = name_index(p, mon, 12, 3)) < 0)
			return -1;
		p += 3;
		if (!lit(&p, " "))
			return -1;
		if (*p == ' ') {
			p++;
			if (!digits(&p, 1, &tm.tm_mday))
				return -1;
		} else if (!digits(&p, 2, &tm.tm_mday)) {
			return -1;
		}
		if (!lit(&p, " ") || !hms(&p, &tm) || !lit(&p, " ") || !digits(&p, 4, &year))
			return -1;
	}
	if (*p != '\0' || tm.tm_mday < 1 || tm.tm_mday > mdays[tm.tm_mon] || year < 1970)
		return -1;
	tm.tm_year = year - 1900;
	time_t t = timegm(&tm);
	return t == (time_t)-1 ? -1 : (int64_t)t;
}

int ws_s3_parse_retry_after(const char *v, int64_t now_wall_ms, uint64_t *ms)
{
	const char *p = v;
	*ms = 0;
	if (!v || !*v)
		return -EINVAL;
	while (*p >= '0' && *p <= '9')
		p++;
	if (*p == '\0') { /* delay-seconds: 1*DIGIT */
		uint64_t s = 0;
		for (p = v; *p; p++) {
			s = s * 10 + (uint64_t)(*p - '0');
			if (s > WS_S3_RETRY_AFTER_MAX_MS / 1000)
				s = WS_S3_RETRY_AFTER_MAX_MS / 1000; /* (and no overflow) */
		}
		*ms = s * 1000;
		return 0;
	}
	int64_t t = http_date(v);
	if (t < 0)
		return -EINVAL;
	if (t * 1000 > now_wall_ms)
		*ms = (uint64_t)(t * 1000 - now_wall_ms);
	if (*ms > WS_S3_RETRY_AFTER_MAX_MS)
		*ms = WS_S3_RETRY_AFTER_MAX_MS;
	WS_ASSERT(*ms <= WS_S3_RETRY_AFTER_MAX_MS);
	return 0;
}

/*
 * A store that answers a Retry-After walship cannot read is told to a
 * person: a warning, at most one a minute for the process (a throttled
 * store answers many), saying how many were ignored since the last one.
 */
static _Atomic uint64_t ra_bad_count, ra_bad_warned_ms;

static void retry_after_unreadable(const char *ra)
{
	uint64_t n = atomic_fetch_add(&ra_bad_count, 1) + 1;
	uint64_t now = ws_mono_ms(), last = atomic_load(&ra_bad_warned_ms);
	if ((last && now - last < 60000) || !atomic_compare_exchange_strong(&ra_bad_warned_ms, &last, now ? now : 1)) {
		ws_debug("s3: Retry-After '%.40s' is neither seconds nor an HTTP date; ignored", ra);
		return;
	}
	atomic_store(&ra_bad_count, 0);
	ws_warn("s3: the store answered Retry-After '%.40s', neither seconds nor an HTTP date: ignored, the "
		"request's own backoff used instead (%" PRIu64 " such answers since the last warning; at most one "
		"warning a minute)", ra, n);
}

uint64_t ws_s3_retry_after_ms(const struct ws_http_req *r)
{
	const char *ra = ws_http_header(r, "retry-after");
	uint64_t ms;
	if (!ra)
		return 0;
	if (ws_s3_parse_retry_after(ra, ws_wall_ms(), &ms)) {
		retry_after_unreadable(ra);
		return 0;
	}
	return ms;
}

/* How long to wait before the next attempt of c: full jitter, Retry-After, the deadline. */
static uint64_t backoff_ms(struct s3_store *s, const struct s3_call *c)
{
	unsigned attempt = c->attempts;
	uint64_t cap = (uint64_t)BACKOFF_BASE_MS << (attempt < 16 ? attempt : 16);
	uint64_t ms, now = ws_mono_ms();
	uint64_t ra = ws_s3_retry_after_ms(&c->req);
	if (cap > BACKOFF_CAP_MS)
		cap = BACKOFF_CAP_MS;
	ms = s3_rnd64(s) % (cap + 1); /* full jitter */
	if (ra > ms)
		ms = ra;
	if (now + ms > c->deadline_ms)
		ms = c->deadline_ms > now ? c->deadline_ms - now : 0;
	/* Jitter within the cap, a Retry-After within its most: no wait is longer. */
	WS_ASSERT(ms <= (BACKOFF_CAP_MS > WS_S3_RETRY_AFTER_MAX_MS ? BACKOFF_CAP_MS : WS_S3_RETRY_AFTER_MAX_MS));
	return ms;
}

/* A request that never has a body: nothing for a payload hash to protect. */
static bool bodiless(const struct s3_call *c)
{
	return (!c->body || c->body_iovcnt == 0) &&
	       (!strcmp(c->method, "GET") || !strcmp(c->method, "HEAD") || !strcmp(c->method, "DELETE"));
}

/*
 * Before the first attempt: the payload hash (SHA-256, streamed over the
 * iovecs, or UNSIGNED-PAYLOAD without reading the body) and the deadline.
 * A GET, HEAD or DELETE sends UNSIGNED-PAYLOAD whatever payload_signing
 * says: it has no body, and the empty body's SHA-256 would spend 48 more
 * bytes of every such request on proving that (the signature still
 * covers the method, the key, the query and every x-amz-* header).
 */
static void call_begin(struct s3_store *s, struct s3_call *c)
{
	if (c->unsigned_payload || bodiless(c)) {
		static const char unsigned_payload[] = "UNSIGNED-PAYLOAD";
		static_assert(sizeof(unsigned_payload) <= sizeof(c->payload_hash), "payload_hash holds it");
		memcpy(c->payload_hash, unsigned_payload, sizeof(unsigned_payload));
	} else if (c->body && c->body_iovcnt > 0) {
		uint8_t md[WS_SHA256_LEN];
		ws_sha256v(c->body, c->body_iovcnt, md);
		ws_hex(md, WS_SHA256_LEN, c->payload_hash);
	} else {
		ws_sha256_hex("", 0, c->payload_hash);
	}
	c->deadline_ms = ws_mono_ms() + s->deadline_ms;
	if (c->within_ms && c->within_ms < c->deadline_ms)
		c->deadline_ms = c->within_ms;
	c->resp_len0 = c->resp ? c->resp->len : 0;
	c->attempts = 0;
	c->throttle_retries = 0;
	c->throttle_status = 0;
	c->retry_until_ms = 0;
}

/* Sign the next attempt of c (a fresh date and signature each time) and fill c->req. */
static int call_sign(struct s3_store *s, struct s3_call *c)
{
	char path[WS_KEY_MAX * 7];
	char amz_date[17];
	struct ws_sigv4_header sh[8];
	char names[6][64];
	size_t nl = 0, nh = 0;
	struct ws_sigv4_out *sig;
	int rc;

	/* call_judge gives up once attempts_max were made: never one more. */
	WS_ASSERT(c->attempts < s->attempts_max);
	WS_ASSERT(c->extra_count <= sizeof(c->extra) / sizeof(c->extra[0]));
	c->attempts++;
	if (c->resp) {
		/* A retried GET starts its body again. */
		c->resp->len = c->resp_len0;
		c->resp->err = 0;
	}
	rc = object_path(s, c->key, path, sizeof(path));
	if (rc)
		return ws_fail(rc, "s3 %s: key %s too long", s->base.url, c->key);
	snprintf(c->url, sizeof(c->url), "%s%s%s%s", s->endpoint, path, c->query ? "?" : "",
		 c->query ? c->query : "");
	ws_sigv4_amz_date(time(NULL), amz_date);
	for (size_t i = 0; i < c->extra_count && nh < 6; i++) {
		/* "Name: value" -> a signed header */
		const char *colon = strchr(c->extra[i], ':');
		size_t n = colon ? (size_t)(colon - c->extra[i]) : 0;
		if (!colon || n >= sizeof(names[0]))
			return ws_fail(-EINVAL, "s3 %s: malformed header for %s", s->base.url, c->key);
		/* Sent, not signed (SigV4 asks for host and the x-amz-* headers):
		 * the signed payload hash fixes the body and so its length, and
		 * an unsigned payload goes only over TLS by default. */
		if (n == 14 && !strncasecmp(c->extra[i], "Content-Length", 14))
			continue;
		memcpy(names[nh], c->extra[i], n);
		names[nh][n] = '\0';
		sh[nh].name = names[nh];
		sh[nh].value = colon + 1 + strspn(colon + 1, " ");
		nh++;
	}
	sig = malloc(sizeof(*sig));
	if (!sig)
		return ws_fail(-ENOMEM, "s3 %s: signature for %s", s->base.url, c->key);
	struct ws_sigv4_request sr = {
		.method = c->method,
		.host = s->host,
		.path = path,
		.query = c->query,
		.headers = sh,
		.header_count = nh,
		.payload_sha256_hex = c->payload_hash,
		.amz_date = amz_date,
		.s3 = true,
		.sign_content_sha256 = true,
	};
	rc = ws_sigv4_sign(&s->creds, &sr, sig);
	if (rc) {
		free(sig);
		return ws_fail_wrap(rc, "s3 %s: cannot sign %s %s", s->base.url, c->method, c->key);
	}
	snprintf(c->h_date, sizeof(c->h_date), "x-amz-date: %s", amz_date);
	snprintf(c->h_sha, sizeof(c->h_sha), "x-amz-content-sha256: %s", c->payload_hash);
	snprintf(c->h_auth, sizeof(c->h_auth), "Authorization: %s", sig->authorization);
	explicit_bzero(sig, sizeof(*sig));
	free(sig);
	c->lines[nl++] = c->h_date;
	c->lines[nl++] = c->h_sha;
	c->lines[nl++] = c->h_auth;
	if (s->creds.session_token[0]) {
		snprintf(c->h_token, sizeof(c->h_token), "x-amz-security-token: %s", s->creds.session_token);
		c->lines[nl++] = c->h_token;
	}
	/* date, sha, auth, token and the extra headers: lines holds them all. */
	WS_ASSERT(nl + c->extra_count <= sizeof(c->lines) / sizeof(c->lines[0]));
	for (size_t i = 0; i < c->extra_count; i++)
		c->lines[nl++] = c->extra[i];

	c->bc.buf = c->resp;
	c->bc.req = &c->req;
	memset(&c->req, 0, sizeof(c->req));
	c->req.method = c->method;
	c->req.url = c->url;
	c->req.headers = c->lines;
	c->req.header_count = nl;
	c->req.body = c->body;
	c->req.body_iovcnt = c->body_iovcnt;
	c->req.on_body = c->resp ? body_append : NULL;
	c->req.on_body_arg = &c->bc;
	c->req.deadline_ms = c->deadline_ms; /* an attempt still hanging at the deadline is cut there */
	return 0;
}

/*
 * When retries of c have run out (attempts, or no time left before the
 * deadline for another one): the error its last attempt ended with.
 * WS_ETHROTTLED when that was throttling (503, 429), else the transport
 * error or -EIO; the detail names the object.
 */
static int call_give_up(struct s3_store *s, struct s3_call *c)
{
	char tries[96];
	/* The caller's buffer gets nothing of a failed call. */
	if (c->resp)
		c->resp->len = c->resp_len0;
	/* Which bound ended it: the attempts, or the deadline (retry_deadline_ms). */
	if (c->attempts >= s->attempts_max)
		snprintf(tries, sizeof(tries), "%u attempt%s", c->attempts, c->attempts == 1 ? "" : "s");
	else
		snprintf(tries, sizeof(tries), "%u attempt%s and retry_deadline_ms=%" PRIu64, c->attempts,
			 c->attempts == 1 ? "" : "s", s->deadline_ms);
	/* Throttled until the deadline cut the last attempt short (or left it
	 * no time to start): still throttling, which backpressure policies
	 * must be able to tell from other failures. */
	if (c->req.err == -ETIMEDOUT && c->throttle_retries && ws_mono_ms() + 5 >= c->deadline_ms)
		return ws_fail(WS_ETHROTTLED, "s3 %s: %s %s throttled (HTTP %ld) through %s, the last attempt "
			       "cut at the deadline: retries ran out", s->base.url, c->method, c->key,
			       c->throttle_status, tries);
	if (c->req.err)
		return ws_fail(c->req.err, "s3 %s: %s %s failed after %s: %s", s->base.url, c->method, c->key, tries,
			       c->req.err_detail);
	if (!c->req.truncated && throttle_status(c->req.status))
		return ws_fail(WS_ETHROTTLED, "s3 %s: %s %s throttled (HTTP %ld) through %s: retries ran out",
			       s->base.url, c->method, c->key, c->req.status, tries);
	return ws_fail(-EIO, "s3 %s: %s %s failed after %s: HTTP %ld%s", s->base.url, c->method, c->key, tries,
		       c->req.status, c->req.truncated ? " (truncated body)" : "");
}

/*
 * After an attempt of c has run: 0 when it is final (c->req.status holds any
 * non-retryable status, 2xx or 4xx), 1 when it should be retried after
 * c->backoff_ms (counted in the store's stats), or a negative error when
 * retries ran out (call_give_up). A retry that could not start before the
 * deadline is not made: the call fails now with the last attempt's cause
 * rather than send an attempt with no time left.
 */
static int call_judge(struct s3_store *s, struct s3_call *c)
{
	bool retry = false, throttled = false;

	/* The authorization header must not outlive the request. */
	explicit_bzero(c->h_auth, sizeof(c->h_auth));
	c->req.url = NULL;
	c->req.headers = NULL;
	if (c->req.resends)
		__atomic_fetch_add(&s->base.stats.resends, c->req.resends, __ATOMIC_RELAXED);
	if (s->pacer && is_write(c->method)) {
		bool thr = !c->req.err && !c->req.truncated && throttle_status(c->req.status);
		ws_pacer_answer(&s->pacer->p, thr, ws_mono_ms());
		if (thr)
			ws_debug("s3 %s: %s %s: throttled (HTTP %ld); writes now paced at %.2f/s", s->base.url, c->method,
				 c->key, c->req.status, ws_pacer_rate(&s->pacer->p));
	}
	if (c->req.err) {
		if (c->req.err == WS_ETOOBIG)
			return ws_fail(c->req.err, "s3 %s: %s %s: response too large", s->base.url, c->method, c->key);
		if (c->req.err == WS_HTTP_ETLS) /* the same certificate answers every retry */
			return ws_fail(c->req.err, "s3 %s: %s %s: %s", s->base.url, c->method, c->key,
				       c->req.err_detail);
		retry = true;
	} else if (c->req.truncated) {
		retry = true;
	} else if ((c->error_in_2xx || !strcmp(c->method, "PUT")) && c->req.status >= 200 && c->req.status <= 299 &&
		   c->resp &&
		   c->resp->len > c->resp_len0 &&
		   memmem(c->resp->data + c->resp_len0, c->resp->len - c->resp_len0, "<Error>", 7)) {
		/* A success status over an error document (a proxy's, or a
		 * store's that reports late): not taken as written. Sent again
		 * with the same attempt token, a write that did land is told
		 * from another's by its 412 (put_end). */
		char code[64];
		ws_s3_error_code(c->resp->data + c->resp_len0, c->resp->len - c->resp_len0, code, sizeof(code));
		c->req.err = -EIO;
		snprintf(c->req.err_detail, sizeof(c->req.err_detail), "HTTP %ld with an error document (%s)",
			 c->req.status, code[0] ? code : "no code");
		retry = true;
	} else if (c->framed && c->req.unframed && c->req.status >= 200 && c->req.status <= 299) {
		/* A body that ends where the connection closed cannot be told
		 * from one cut short: never taken for the whole object. */
		c->req.err = -EIO;
		snprintf(c->req.err_detail, sizeof(c->req.err_detail), "HTTP %ld with neither Content-Length nor "
			 "chunked encoding: a body that may be cut short", c->req.status);
		retry = true;
	} else if (retryable_status(c->req.status)) {
		retry = true;
		throttled = throttle_status(c->req.status);
	} else if (c->req.status == 409 && c->conditional) {
		retry = true; /* ConditionalRequestConflict: a concurrent conditional write */
	}
	if (!retry)
		return 0;
	if (c->attempts >= s->attempts_max)
		return call_give_up(s, c);
	c->backoff_ms = backoff_ms(s, c);
	if (ws_mono_ms() + c->backoff_ms >= c->deadline_ms)
		return call_give_up(s, c);
	__atomic_fetch_add(&s->base.stats.retries, 1, __ATOMIC_RELAXED);
	if (throttled) {
		__atomic_fetch_add(&s->base.stats.throttle_retries, 1, __ATOMIC_RELAXED);
		c->throttle_retries++;
		c->throttle_status = c->req.status;
		uint64_t ra = ws_s3_retry_after_ms(&c->req);
		if (ra && ws_mono_ms() + ra > c->retry_until_ms)
			c->retry_until_ms = ws_mono_ms() + ra;
	}
	ws_debug("s3 %s: %s %s: retry %u after %s %ld", s->base.url, c->method, c->key, c->attempts,
		 c->req.err ? c->req.err_detail : "HTTP", c->req.status);
	return 1;
}

/* Before an attempt of c, a write: its place in the pace (0 when not
 * paced, or go now), counted in stats.paced_ms. A turn that comes only
 * after the call's deadline fails it now, as throttled. */
static int pace_wait(struct s3_store *s, const struct s3_call *c, uint64_t *ms)
{
	uint64_t now;
	*ms = 0;
	if (!s->pacer || !is_write(c->method))
		return 0;
	now = ws_mono_ms();
	*ms = ws_pacer_reserve(&s->pacer->p, now);
	if (*ms && now + *ms >= c->deadline_ms)
		return ws_fail(WS_ETHROTTLED, "s3 %s: %s %s: the store has been throttling writes, and this one's "
			       "turn at the paced rate (%.1f/s) comes after its retry_deadline_ms=%" PRIu64,
			       s->base.url, c->method, c->key, ws_pacer_rate(&s->pacer->p), s->deadline_ms);
	__atomic_fetch_add(&s->base.stats.paced_ms, *ms, __ATOMIC_RELAXED);
	if (*ms)
		ws_debug("s3 %s: %s %s: waits %" PRIu64 " ms for its turn at %.2f/s", s->base.url, c->method, c->key, *ms,
			 ws_pacer_rate(&s->pacer->p));
	return 0;
}

/* A write's last answer, for --debug timelines (bench/throttle_timeline.py). */
static void call_said(const struct s3_store *s, const struct s3_call *c, int rc, uint64_t paced_ms)
{
	if (is_write(c->method))
		ws_debug("s3 %s: %s %s: %s %ld after %u attempt(s), paced %" PRIu64 " ms", s->base.url, c->method,
			 c->key, rc ? "failed, HTTP" : "HTTP", c->req.status, c->attempts, paced_ms);
}

/*
 * Run a call with retries. Returns 0 with c->req.status set to the final
 * HTTP status (any non-retryable status, 2xx or 4xx), or a negative error
 * when retries ran out (the detail names the last cause; call_judge).
 */
int s3_call(struct s3_store *s, struct s3_call *c)
{
	int rc;
	uint64_t paced = 0;

	call_begin(s, c);
	for (;;) {
		uint64_t pace;
		rc = pace_wait(s, c, &pace);
		if (rc)
			return rc;
		if (pace)
			ws_sleep_ms((unsigned)pace);
		paced += pace;
		rc = call_sign(s, c);
		if (rc)
			return rc;
		if (is_write(c->method))
			s->base.write_sent_ms = ws_mono_ms();
		rc = ws_http_perform(s->http, &c->req, 1);
		if (rc)
			return rc;
		rc = call_judge(s, c);
		if (rc <= 0) {
			call_said(s, c, rc, paced);
			return rc;
		}
		/* A retry is judged only while attempts and time remain. */
		WS_ASSERT(rc == 1 && c->attempts < s->attempts_max);
		if (s->base.throttle_fail_fast && !c->req.err && !c->req.truncated && throttle_status(c->req.status)) {
			/* Not waited out here: the caller retries after it (the
			 * backoff already covers the Retry-After). */
			s->base.throttle_until_ms = ws_mono_ms() + c->backoff_ms;
			call_said(s, c, WS_ETHROTTLED, paced);
			return ws_fail(WS_ETHROTTLED, "s3 %s: %s %s throttled (HTTP %ld); left to the caller to retry "
				       "in %" PRIu64 " ms", s->base.url, c->method, c->key, c->req.status,
				       c->backoff_ms);
		}
		if (c->backoff_ms)
			ws_sleep_ms((unsigned)c->backoff_ms);
	}
}

void ws_s3_error_code(const void *body, size_t len, char *out, size_t cap)
{
	const char *p, *e;
	out[0] = '\0';
	if (!body || len == 0)
		return;
	p = memmem(body, len, "<Code>", 6);
	if (!p)
		return;
	p += 6;
	e = memmem(p, len - (size_t)(p - (const char *)body), "</Code>", 7);
	if (!e || (size_t)(e - p) >= cap)
		return;
	memcpy(out, p, (size_t)(e - p));
	out[e - p] = '\0';
}

/* An S3 error body's <Code>, for messages. */
void s3_error_code(const struct ws_buf *b, char *out, size_t cap)
{
	if (!b)
		out[0] = '\0';
	else
		ws_s3_error_code(b->data, b->len, out, cap);
}

int s3_status_error(struct s3_store *s, const struct s3_call *c, const struct ws_buf *body)
{
	char code[64], what[WS_KEY_MAX + 96];
	s3_error_code(body, code, sizeof(code));
	/* Name what was asked: the object, or the bucket for bucket-level calls. */
	if (c->key[0])
		snprintf(what, sizeof(what), "%s %s", c->method, c->key);
	else if (c->query)
		snprintf(what, sizeof(what), "list bucket %s", s->bucket);
	else
		snprintf(what, sizeof(what), "%s bucket %s", c->method, s->bucket);
	if (!strcmp(code, "NoSuchBucket") || (c->req.status == 404 && !c->key[0]))
		return ws_fail(WS_ENOTFOUND, "s3 %s: bucket %s does not exist (%s)", s->base.url, s->bucket,
			       code[0] ? code : "HTTP 404");
	if (c->req.status == 404)
		return ws_fail(WS_ENOTFOUND, "s3 %s: %s: no such object", s->base.url, c->key);
	if (c->req.status == 403)
		return ws_fail(-EACCES, "s3 %s: %s: access denied (HTTP 403 %s): check credentials and "
			       "clock", s->base.url, what, code);
	/* A body that did not arrive whole or in time (S3 answers these 400):
	 * sent again, it may. */
	if (!strcmp(code, "RequestTimeout") || !strcmp(code, "BadDigest") || !strcmp(code, "IncompleteBody") ||
	    !strcmp(code, "XAmzContentSHA256Mismatch"))
		return ws_fail(-EIO, "s3 %s: %s: HTTP %ld %s", s->base.url, what, c->req.status, code);
	/* Any other final status is the store refusing this request as it is
	 * (400 InvalidArgument, 301 PermanentRedirect for another region, 405,
	 * 411, 413, 501 ...): sending it again cannot help, so it is no
	 * transient error a backpressure policy would retry for ever. */
	return ws_fail(-EPROTO, "s3 %s: %s: the store refused the request: HTTP %ld %s", s->base.url, what,
		       c->req.status, code[0] ? code : "(no error code)");
}

/* ---- put_many: many PUTs at once, in rounds ------------------------------ */

/*
 * Of the pending calls idx[0..pending) of a round that would start at
 * start_ms, end those whose deadline has come by then: each fails with its
 * last attempt's cause (call_give_up), the retry call_judge counted for it
 * taken back, since it is never made. Returns how many remain (compacted
 * to the front of idx).
 */
static size_t give_up_late(struct s3_store *s, struct s3_call **calls, int *rcs, size_t *idx, size_t pending,
			   uint64_t start_ms)
{
	size_t keep = 0;
	for (size_t j = 0; j < pending; j++) {
		size_t i = idx[j];
		struct s3_call *c = calls[i];
		if (c->attempts == 0 || start_ms < c->deadline_ms) {
			idx[keep++] = i;
			continue;
		}
		__atomic_fetch_sub(&s->base.stats.retries, 1, __ATOMIC_RELAXED);
		if (!c->req.err && !c->req.truncated && throttle_status(c->req.status)) {
			__atomic_fetch_sub(&s->base.stats.throttle_retries, 1, __ATOMIC_RELAXED);
			c->throttle_retries--;
		}
		rcs[i] = call_give_up(s, c);
	}
	WS_ASSERT(keep <= pending);
	return keep;
}

/*
 * A call of a round is signed as it is sent, not when its round begins: a
 * round of more calls than max_in_flight sends its last ones only as
 * earlier ones end, and a store refuses a signature dated more than 15
 * minutes before it arrives (RequestTimeTooSkewed).
 */
static int sign_on_send(void *arg, struct ws_http_req *r)
{
	struct s3_call *c = arg;
	(void)r;
	c->sign_rc = call_sign(c->store, c);
	return c->sign_rc;
}

/* Each pending call's place in the pace: the round goes at the last, and
 * those whose turn is past their deadline fail now. Returns how many remain. */
static size_t round_pace(struct s3_store *s, struct s3_call **calls, int *rcs, size_t *idx, size_t pending)
{
	uint64_t pace = 0;
	size_t kept = 0;
	for (size_t j = 0; j < pending; j++) {
		uint64_t w;
		int r = pace_wait(s, calls[idx[j]], &w);
		if (r) {
			rcs[idx[j]] = r;
			continue;
		}
		pace = w > pace ? w : pace;
		idx[kept++] = idx[j];
	}
	if (pace)
		ws_sleep_ms((unsigned)pace);
	return kept;
}

/* After a round's transfers: each call judged; those to retry go back into
 * idx (returned: how many), *due_ms the end of their longest backoff. */
static size_t round_judge(struct s3_store *s, struct s3_call **calls, int *rcs, size_t *idx, size_t m,
			  uint64_t *due_ms)
{
	size_t pending = 0;
	*due_ms = 0;
	for (size_t j = 0; j < m; j++) {
		size_t i = idx[j];
		if (calls[i]->sign_rc) {
			rcs[i] = calls[i]->sign_rc;
			continue;
		}
		int r = call_judge(s, calls[i]);
		if (r == 1) {
			uint64_t due = ws_mono_ms() + calls[i]->backoff_ms;
			*due_ms = due > *due_ms ? due : *due_ms;
			idx[pending++] = i;
			continue;
		}
		rcs[i] = r;
	}
	return pending;
}

/*
 * n calls at once. Each runs s3_call's attempt loop (call_sign, call_judge,
 * backoff_ms), but in rounds: every call still pending goes into one
 * ws_http_perform_each, signed afresh as it is sent (at most max_in_flight
 * on the wire at a time); those that need a retry wait for the largest
 * backoff of the round, then go again together. Backoff, Retry-After,
 * attempts, deadline and the pacer are each call's own, as for s3_call.
 * rcs[i]: 0 when call i ended with a final status (c->req.status), else
 * the error its retries ran out with. Returns 0, or a negative error when
 * the HTTP client itself failed (then every call not yet finished
 * carries it in rcs).
 */
int s3_call_many(struct s3_store *s, struct s3_call **calls, int *rcs, size_t n)
{
	struct ws_http_req **round = calloc(n ? n : 1, sizeof(*round));
	size_t *idx = calloc(n ? n : 1, sizeof(*idx)); /* the calls still pending */
	size_t pending = 0;
	uint64_t due_ms = 0;
	int rc = 0;

	if (!round || !idx) {
		rc = ws_fail(-ENOMEM, "s3 %s: %zu requests at once", s->base.url, n);
		for (size_t i = 0; i < n; i++)
			rcs[i] = rc;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		call_begin(s, calls[i]);
		idx[pending++] = i;
	}
	while (pending) {
		uint64_t now = ws_mono_ms();
		/* A round waits for its longest backoff: those whose deadline
		 * comes first end now, not with an attempt that has no time. */
		pending = give_up_late(s, calls, rcs, idx, pending, due_ms > now ? due_ms : now);
		if (due_ms > now)
			ws_sleep_ms((unsigned)(due_ms - now));
		/* (and those the sleep overshot) */
		pending = give_up_late(s, calls, rcs, idx, pending, ws_mono_ms());
		pending = round_pace(s, calls, rcs, idx, pending);
		for (size_t m = 0; m < pending; m++) {
			struct s3_call *c = calls[idx[m]];
			c->store = s;
			c->sign_rc = 0;
			c->req.on_send = sign_on_send;
			c->req.on_send_arg = c;
			round[m] = &c->req;
		}
		rc = ws_http_perform_each(s->http, round, pending);
		if (rc) {
			for (size_t j = 0; j < pending; j++)
				rcs[idx[j]] = rc;
			goto out;
		}
		pending = round_judge(s, calls, rcs, idx, pending, &due_ms);
	}
out:
	free(round);
	free(idx);
	return rc;
}

/*
 * n PUTs at once (s3_call_many), a 412 of a create-once reconciled by its
 * attempt token (put_end) as for single PUTs. Returns 0 with every
 * reqs[i].rc set, or a negative error when the HTTP client itself failed
 * (then every request not yet finished carries it).
 */
int s3_put_many(struct ws_store *base, struct ws_put_req *reqs, size_t n)
{
	struct s3_store *s = (struct s3_store *)base;
	struct s3_put_op *ops = calloc(n ? n : 1, sizeof(*ops));
	struct s3_call **calls = calloc(n ? n : 1, sizeof(*calls));
	int *rcs = calloc(n ? n : 1, sizeof(*rcs));
	size_t *back = calloc(n ? n : 1, sizeof(*back)); /* calls[j] is reqs[back[j]]'s */
	size_t m = 0;
	int rc = 0;

	if (!ops || !calls || !rcs || !back) {
		rc = ws_fail(-ENOMEM, "s3 %s: put_many of %zu objects", base->url, n);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct ws_put_req *r = &reqs[i];
		r->throttle_retries = 0;
		r->retry_until_ms = 0;
		if (r->mode != WS_PUT_OVERWRITE && r->mode != WS_PUT_CREATE)
			r->rc = ws_fail(-EINVAL, "s3 %s: %s: put_many takes overwrite or create-once only", base->url,
					r->key ? r->key : "(null)");
		else
			r->rc = s3_put_begin(s, &ops[i], r->key, r->iov, r->iovcnt, r->mode, NULL);
		if (r->rc == 0) {
			back[m] = i;
			calls[m++] = &ops[i].c;
		}
	}
	rc = s3_call_many(s, calls, rcs, m);
	for (size_t j = 0; j < m; j++) {
		struct ws_put_req *r = &reqs[back[j]];
		r->throttle_retries = calls[j]->throttle_retries;
		r->retry_until_ms = calls[j]->retry_until_ms;
		r->rc = rcs[j] == 0 ? s3_put_end(s, &ops[back[j]], NULL) : rcs[j];
	}
out:
	for (size_t i = 0; ops && i < n; i++)
		ws_buf_free(&ops[i].err_body);
	free(ops);
	free(calls);
	free(rcs);
	free(back);
	return rc;
}
