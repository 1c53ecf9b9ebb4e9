/*
 * The s3:// backend: S3-compatible object storage (AWS S3, R2, Ceph RGW)
 * over net/ (libcurl multi, SigV4 signed here, never by libcurl).
 *
 * URL: s3://BUCKET[/PREFIX][?endpoint=http://127.0.0.1:7480&region=us-east-1
 *      &etag_quotes=auto|0|1&conditional_writes=off&ca_file=/path&insecure=1
 *      &retry_attempts_max=10&retry_deadline_ms=30000&max_in_flight=8
 *      &payload_signing=signed|unsigned]
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
 * either way. Requests without a body sign the empty payload's hash, and
 * DeleteObjects (a POST with an XML body) always signs its body.
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
 */
#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <expat.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ws_clock.h"
#include "ws_hash.h"
#include "ws_http.h"
#include "ws_logging.h"
#include "ws_pacer.h"
#include "ws_sigv4.h"
#include "ws_store.h"
#include "s3_internal.h"

#define URL_MAX 2048
#define BACKOFF_BASE_MS 50
#define BACKOFF_CAP_MS 5000

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
	struct shared_pacer *pacer;  /* shared by the process's handles on this endpoint and bucket */
};

/* ---- write pacing (ws_pacer.h), one per endpoint and bucket ------------- */

struct shared_pacer {
	struct shared_pacer *next;
	char name[600];              /* endpoint "|" bucket */
	unsigned refs;
	struct ws_pacer p;
};
static pthread_mutex_t pacers_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shared_pacer *pacers;

static struct shared_pacer *pacer_get(const char *endpoint, const char *bucket)
{
	char name[sizeof(((struct shared_pacer *)0)->name)];
	struct shared_pacer *sp;
	snprintf(name, sizeof(name), "%s|%s", endpoint, bucket);
	pthread_mutex_lock(&pacers_mu);
	for (sp = pacers; sp; sp = sp->next)
		if (!strcmp(sp->name, name))
			break;
	if (!sp && (sp = calloc(1, sizeof(*sp))) != NULL) {
		memcpy(sp->name, name, sizeof(name));
		ws_pacer_init(&sp->p);
		sp->next = pacers;
		pacers = sp;
	}
	if (sp)
		sp->refs++;
	pthread_mutex_unlock(&pacers_mu);
	return sp;
}

static void pacer_put(struct shared_pacer *sp)
{
	if (!sp)
		return;
	pthread_mutex_lock(&pacers_mu);
	if (--sp->refs == 0) {
		struct shared_pacer **pp = &pacers;
		while (*pp != sp)
			pp = &(*pp)->next;
		*pp = sp->next;
		ws_pacer_destroy(&sp->p);
		free(sp);
	}
	pthread_mutex_unlock(&pacers_mu);
}

static bool is_write(const char *method) { return method[0] == 'P' || method[0] == 'D'; /* PUT POST DELETE */ }


/* ---- small helpers ----------------------------------------------------- */

static uint64_t rnd64(struct s3_store *s)
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
	memcpy(out->s, in, n);
	out->s[n] = '\0';
}

/* A reply's ETag, bare; too long to keep: "" with its length. */
static void reply_etag(const struct ws_http_req *r, struct ws_etag *out)
{
	const char *v = ws_http_header(r, "etag");
	size_t cut = ws_http_header_cut(r, "etag");
	memset(out, 0, sizeof(*out));
	if (v)
		strip_quotes(v, out);
	else if (cut)
		out->too_long = cut > UINT32_MAX ? UINT32_MAX : (uint32_t)cut;
}

static int etag_too_long(const struct s3_store *s, const char *what, const char *key, const struct ws_etag *e)
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

struct body_ctx {
	struct ws_buf *buf;
	const struct ws_http_req *req;   /* its status, once the status line is in */
};

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
	/* state across attempts (call_begin) */
	char payload_hash[65];
	uint64_t deadline_ms;        /* monotonic */
	size_t resp_len0;
	struct body_ctx bc;
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
	return 0;
}

uint64_t ws_s3_retry_after_ms(const struct ws_http_req *r)
{
	const char *ra = ws_http_header(r, "retry-after");
	uint64_t ms;
	if (!ra)
		return 0;
	if (ws_s3_parse_retry_after(ra, ws_wall_ms(), &ms)) {
		ws_debug("s3: Retry-After '%.40s' is neither seconds nor an HTTP date; ignored", ra);
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
	ms = rnd64(s) % (cap + 1); /* full jitter */
	if (ra > ms)
		ms = ra;
	if (now + ms > c->deadline_ms)
		ms = c->deadline_ms > now ? c->deadline_ms - now : 0;
	return ms;
}

/*
 * Before the first attempt: the payload hash (SHA-256, streamed over the
 * iovecs, or UNSIGNED-PAYLOAD without reading the body) and the deadline.
 */
static void call_begin(struct s3_store *s, struct s3_call *c)
{
	if (c->unsigned_payload) {
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
	if (s->pacer && is_write(c->method))
		ws_pacer_answer(&s->pacer->p, !c->req.err && !c->req.truncated && throttle_status(c->req.status),
				ws_mono_ms());
	if (c->req.err) {
		if (c->req.err == WS_ETOOBIG)
			return ws_fail(c->req.err, "s3 %s: %s %s: response too large", s->base.url, c->method, c->key);
		retry = true;
	} else if (c->req.truncated) {
		retry = true;
	} else if (!strcmp(c->method, "PUT") && c->req.status >= 200 && c->req.status <= 299 && c->resp &&
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
	return 0;
}

/*
 * Run a call with retries. Returns 0 with c->req.status set to the final
 * HTTP status (any non-retryable status, 2xx or 4xx), or a negative error
 * when retries ran out (the detail names the last cause; call_judge).
 */
static int s3_call(struct s3_store *s, struct s3_call *c)
{
	int rc;

	call_begin(s, c);
	for (;;) {
		uint64_t pace;
		rc = pace_wait(s, c, &pace);
		if (rc)
			return rc;
		if (pace)
			ws_sleep_ms((unsigned)pace);
		rc = call_sign(s, c);
		if (rc)
			return rc;
		rc = ws_http_perform(s->http, &c->req, 1);
		if (rc)
			return rc;
		rc = call_judge(s, c);
		if (rc <= 0)
			return rc;
		if (s->base.throttle_fail_fast && !c->req.err && !c->req.truncated && throttle_status(c->req.status)) {
			/* Not waited out here: the caller retries after it (the
			 * backoff already covers the Retry-After). */
			s->base.throttle_until_ms = ws_mono_ms() + c->backoff_ms;
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
static void error_code(const struct ws_buf *b, char *out, size_t cap)
{
	if (!b)
		out[0] = '\0';
	else
		ws_s3_error_code(b->data, b->len, out, cap);
}

static int status_error(struct s3_store *s, const struct s3_call *c, const struct ws_buf *body)
{
	char code[64], what[WS_KEY_MAX + 96];
	error_code(body, code, sizeof(code));
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

/* ---- ops ----------------------------------------------------------------- */

void ws_s3_head_info(const struct ws_http_req *r, struct ws_obj_info *info, char *attempt, size_t attempt_cap)
{
	const char *v;
	if (info) {
		memset(info, 0, sizeof(*info));
		info->size_bytes = r->content_length >= 0 ? (uint64_t)r->content_length : 0;
		reply_etag(r, &info->etag);
		if ((v = ws_http_header(r, "last-modified"))) {
			struct tm tm;
			memset(&tm, 0, sizeof(tm));
			if (strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm))
				info->mtime_ms = (int64_t)timegm(&tm) * 1000;
		}
	}
	if (attempt) {
		v = ws_http_header(r, "x-amz-meta-ws-attempt");
		snprintf(attempt, attempt_cap, "%s", v ? v : "");
	}
}

/* within_ms: the deadline of the call this HEAD is a step of (0: its own);
 * need_size: the caller reads info->size_bytes. */
static int s3_head_raw(struct s3_store *s, const char *key, struct ws_obj_info *info, char *attempt,
		       size_t attempt_cap, uint64_t within_ms, bool need_size)
{
	struct s3_call c = { .method = "HEAD", .key = key, .within_ms = within_ms };
	int rc = s3_call(s, &c);
	if (rc)
		return rc;
	if (c.req.status == 404)
		return WS_ENOTFOUND;
	if (c.req.status != 200)
		return status_error(s, &c, NULL);
	/* Only where the size is read: the HEADs that settle a 412 or read
	 * an etag need none, and HTTP lets a HEAD omit it. */
	if (need_size && c.req.content_length < 0)
		return ws_fail(-EPROTO, "s3 %s: HEAD %s: the store's answer has no Content-Length: the object's "
			       "size is unknown", s->base.url, key);
	ws_s3_head_info(&c.req, info, attempt, attempt_cap);
	return 0;
}

static int s3_head(struct ws_store *base, const char *key, struct ws_obj_info *info)
{
	struct s3_store *s = (struct s3_store *)base;
	if (!ws_key_valid(key))
		return ws_fail(-EINVAL, "s3 %s: invalid key \"%s\"", base->url, key);
	int rc = s3_head_raw(s, key, info, NULL, 0, 0, true);
	if (rc == WS_ENOTFOUND)
		return ws_fail(rc, "s3 %s: %s: no such object", base->url, key);
	return rc;
}

static int probe_conditional(struct s3_store *s);

/* One PUT: its call, and what all its attempts share (headers, attempt token). */
struct s3_put_op {
	struct s3_call c;
	struct s3_store *store;      /* put_many: signs c when it is sent */
	int sign_rc;
	enum ws_put_mode mode;
	struct ws_etag expect;       /* CAS: the etag If-Match names (bare) */
	char h_len[64], h_cond[WS_ETAG_MAX + 32], h_attempt[64], token[33];
	struct ws_buf err_body;
};

/*
 * Check a PUT and set op up for s3_call (nothing is sent). op->err_body is
 * always safe to free afterwards. Errors: -EINVAL (bad key, CAS without an
 * etag), WS_EPRECOND (CAS against an empty etag).
 */
static int put_begin(struct s3_store *s, struct s3_put_op *op, const char *key, const struct iovec *iov,
		     int iovcnt, enum ws_put_mode mode, const struct ws_etag *expect)
{
	struct s3_call *c = &op->c;
	uint64_t len = 0;

	memset(op, 0, sizeof(*op));
	if (!ws_key_valid(key))
		return ws_fail(-EINVAL, "s3 %s: invalid key \"%s\"", s->base.url, key ? key : "(null)");
	if (mode == WS_PUT_CAS && expect && expect->too_long)
		return etag_too_long(s, "", key, expect);
	if (mode == WS_PUT_CAS && (!expect || !expect->s[0]))
		return expect ? ws_fail(WS_EPRECOND, "s3 %s: %s: compare-and-swap against an unknown etag (the "
					"store gave none for it): re-read it first", s->base.url, key)
			      : ws_fail(-EINVAL, "s3 %s: compare-and-swap without an etag", s->base.url);
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	c->method = "PUT";
	c->key = key;
	c->body = iov;
	c->body_iovcnt = iovcnt;
	c->unsigned_payload = s->payload_unsigned;
	op->mode = mode;
	snprintf(op->token, sizeof(op->token), "%016" PRIx64 "%016" PRIx64, rnd64(s), rnd64(s));
	snprintf(op->h_len, sizeof(op->h_len), "Content-Length: %" PRIu64, len);
	snprintf(op->h_attempt, sizeof(op->h_attempt), "x-amz-meta-ws-attempt: %s", op->token);
	c->extra[c->extra_count++] = op->h_len;
	c->extra[c->extra_count++] = op->h_attempt;
	if (mode == WS_PUT_CREATE && s->conditional_writes) {
		snprintf(op->h_cond, sizeof(op->h_cond), "If-None-Match: *");
		c->extra[c->extra_count++] = op->h_cond;
		c->conditional = true;
	} else if (mode == WS_PUT_CAS && s->conditional_writes) {
		op->expect = *expect;
		snprintf(op->h_cond, sizeof(op->h_cond), s->if_match_quoted ? "If-Match: \"%s\"" : "If-Match: %s",
			 expect->s);
		c->extra[c->extra_count++] = op->h_cond;
		c->conditional = true;
	}
	ws_buf_init(&op->err_body, 64u << 10);
	c->resp = &op->err_body;
	return 0;
}

/*
 * A PUT went through (200) without an ETag (a proxy may strip it), and the
 * caller needs it for its next compare-and-swap: the object's, from a HEAD,
 * only while it still carries this attempt's token (another writer's etag
 * taken for ours would let our next swap overwrite its write). Otherwise
 * the write stands and the etag is left empty: the next swap then fails
 * as changed, and its caller re-reads the object.
 */
static int etag_after_put(struct s3_store *s, const struct s3_put_op *op, struct ws_etag *out_etag)
{
	char attempt[64];
	struct ws_obj_info info;
	int hrc = s3_head_raw(s, op->c.key, &info, attempt, sizeof(attempt), op->c.deadline_ms, false);

	if (hrc == 0 && !strcmp(attempt, op->token) && (info.etag.s[0] || info.etag.too_long))
		*out_etag = info.etag;
	else
		ws_warn("s3 %s: %s: written, but the store's answer carried no ETag and the object's could not be "
			"read back as this write's: the next compare-and-swap of it re-reads it first",
			s->base.url, op->c.key);
	return 0;
}

/* The outcome of a PUT whose call ended with a final status (s3_call returned 0). */
static int put_end(struct s3_store *s, struct s3_put_op *op, struct ws_etag *out_etag)
{
	const struct s3_call *c = &op->c;

	/* 200 as S3 answers, or 201 and 204 as HTTP allows; never 202, which
	 * says the write is only accepted for later. */
	if (c->req.status == 200 || c->req.status == 201 || c->req.status == 204) {
		if (out_etag) {
			reply_etag(&c->req, out_etag);
			/* One too long to keep is reported by the swap that names it. */
			if (!out_etag->s[0] && !out_etag->too_long)
				return etag_after_put(s, op, out_etag);
		}
		return 0;
	}
	if (c->req.status == 412 && c->conditional) {
		/* Ours, from an earlier attempt whose reply was lost? Checked on
		 * every 412, not only after a retry we saw: libcurl itself resends
		 * a request whose reused connection died before any reply, so the
		 * first 412 we see may already answer our own second send. */
		char attempt[64];
		struct ws_obj_info info;
		int hrc = s3_head_raw(s, c->key, &info, attempt, sizeof(attempt), c->deadline_ms, false);
		if (hrc == 0 && !strcmp(attempt, op->token)) {
			if (out_etag)
				*out_etag = info.etag;
			return 0;
		}
		/* A create refused as already there is taken for an object that
		 * is durable (its key names its bytes): only when the store
		 * shows one. A 412 over nothing, or one that cannot be looked
		 * at now, is no proof: an error the caller retries. */
		if (op->mode == WS_PUT_CREATE && hrc == WS_ENOTFOUND)
			return ws_fail(-EIO, "s3 %s: %s: the store refused a create as already there (412) but has "
				       "no such object (HEAD 404); not taken as written", s->base.url, c->key);
		if (op->mode == WS_PUT_CREATE && hrc)
			return ws_fail_wrap(hrc, "s3 %s: %s: the store refused a create as already there (412), "
					    "and the object could not be looked at (HEAD)", s->base.url, c->key);
		/* Nor is a refused compare-and-swap proof of another writer
		 * while the object cannot be looked at: it may be this very
		 * write, landed on an earlier attempt. */
		if (op->mode == WS_PUT_CAS && hrc && hrc != WS_ENOTFOUND)
			return ws_fail_wrap(hrc, "s3 %s: %s: the store refused a compare-and-swap (412), and the "
					    "object could not be looked at (HEAD) to tell whether an earlier attempt "
					    "of this write landed", s->base.url, c->key);
		/* A compare-and-swap refused while the object still carries the
		 * very etag it named: nobody else wrote it (another writer's PUT
		 * changes the etag, the MD5 of the body, unless it wrote the very
		 * same bytes, and walship never writes one watermark or head
		 * twice), the store did not honour If-Match. Retrying cannot help;
		 * calling it another writer would send the operator after a
		 * writer that does not exist. */
		if (hrc == 0 && op->mode == WS_PUT_CAS && info.etag.s[0] && !strcmp(info.etag.s, op->expect.s)) {
			const char *form = s->if_match_quoted ? "quoted" : "bare";
			if (s->etag_quotes < 0)
				return ws_fail(WS_EBADSTORE, "s3 %s: %s: the store answered 412 to If-Match with the "
					       "object's current etag %s (sent %s, the form etag_quotes=auto found "
					       "working): it does not honour If-Match, so compare-and-swap cannot "
					       "work; the object did not change, this is not another writer",
					       s->base.url, c->key, op->expect.s, form);
			return ws_fail(WS_EBADSTORE, "s3 %s: %s: the store answered 412 to If-Match with the "
				       "object's current etag %s (sent %s, as etag_quotes=%d says): it does not "
				       "honour If-Match in that form; the object did not change, this is not another "
				       "writer: use etag_quotes=%d, or leave it out to let walship probe the store",
				       s->base.url, c->key, op->expect.s, form, s->etag_quotes, !s->etag_quotes);
		}
		return ws_fail(WS_EPRECOND, "s3 %s: %s: %s", s->base.url, c->key,
			       op->mode == WS_PUT_CREATE ? "already exists" : "changed since it was read");
	}
	return status_error(s, c, &op->err_body);
}

static int s3_put(struct ws_store *base, const char *key, const struct iovec *iov, int iovcnt,
		  enum ws_put_mode mode, const struct ws_etag *expect, struct ws_etag *out_etag)
{
	struct s3_store *s = (struct s3_store *)base;
	struct s3_put_op op;
	int rc;

	if (mode == WS_PUT_CAS && s->conditional_writes && !s->if_match_known) {
		/* Opened without the probe (WS_STORE_EXISTING): which If-Match form
		 * works is learnt before the first compare-and-swap needs it. */
		rc = probe_conditional(s);
		if (rc)
			return rc;
	}
	rc = put_begin(s, &op, key, iov, iovcnt, mode, expect);
	if (rc == 0)
		rc = s3_call(s, &op.c);
	if (rc == 0)
		rc = put_end(s, &op, out_etag);
	ws_buf_free(&op.err_body);
	return rc;
}

/*
 * Of the pending requests idx[0..pending) of a put_many round that would
 * start at start_ms, end those whose deadline has come by then: each fails
 * with its last attempt's cause (call_give_up), the retry call_judge counted
 * for it taken back, since it is never made. Returns how many remain
 * (compacted to the front of idx).
 */
static size_t give_up_late(struct s3_store *s, struct s3_put_op *ops, struct ws_put_req *reqs, size_t *idx,
			   size_t pending, uint64_t start_ms)
{
	size_t keep = 0;
	for (size_t j = 0; j < pending; j++) {
		size_t i = idx[j];
		struct s3_call *c = &ops[i].c;
		if (c->attempts == 0 || start_ms < c->deadline_ms) {
			idx[keep++] = i;
			continue;
		}
		__atomic_fetch_sub(&s->base.stats.retries, 1, __ATOMIC_RELAXED);
		if (!c->req.err && !c->req.truncated && throttle_status(c->req.status)) {
			__atomic_fetch_sub(&s->base.stats.throttle_retries, 1, __ATOMIC_RELAXED);
			c->throttle_retries--;
		}
		reqs[i].throttle_retries = c->throttle_retries;
		reqs[i].rc = call_give_up(s, c);
	}
	return keep;
}

/*
 * A put_many request is signed as it is sent, not when its round begins: a
 * round of more requests than max_in_flight sends its last ones only as
 * earlier ones end, and a store refuses a signature dated more than 15
 * minutes before it arrives (RequestTimeTooSkewed).
 */
static int put_sign_on_send(void *arg, struct ws_http_req *r)
{
	struct s3_put_op *op = arg;
	(void)r;
	op->sign_rc = call_sign(op->store, &op->c);
	return op->sign_rc;
}

/*
 * n PUTs at once. Each runs s3_call's attempt loop (call_sign, call_judge,
 * backoff_ms), but in rounds: every request still pending goes into one
 * ws_http_perform, signed afresh as it is sent (at most max_in_flight on the
 * wire at a time); those that need a retry wait for the largest backoff of
 * the round, then go again together. Backoff, Retry-After, attempts and
 * deadline are each request's own, as for single PUTs, and a 412 of a
 * create-once is reconciled by its attempt token (put_end).
 * Returns 0 with every reqs[i].rc set, or a negative error when the HTTP
 * client itself failed (then every request not yet finished carries it).
 */
static int s3_put_many(struct ws_store *base, struct ws_put_req *reqs, size_t n)
{
	struct s3_store *s = (struct s3_store *)base;
	struct s3_put_op *ops = calloc(n, sizeof(*ops));
	struct ws_http_req **round = calloc(n, sizeof(*round));
	size_t *idx = calloc(n, sizeof(*idx)); /* the requests still pending */
	size_t pending = 0;
	uint64_t due_ms = 0;
	int rc = 0;

	if (!ops || !round || !idx) {
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
			r->rc = put_begin(s, &ops[i], r->key, r->iov, r->iovcnt, r->mode, NULL);
		if (r->rc == 0) {
			call_begin(s, &ops[i].c);
			idx[pending++] = i;
		}
	}
	while (pending) {
		size_t m = 0;
		uint64_t now = ws_mono_ms();
		/* A round waits for its longest backoff: those whose deadline
		 * comes first end now, not with an attempt that has no time. */
		pending = give_up_late(s, ops, reqs, idx, pending, due_ms > now ? due_ms : now);
		if (due_ms > now)
			ws_sleep_ms((unsigned)(due_ms - now));
		/* (and those the sleep overshot) */
		pending = give_up_late(s, ops, reqs, idx, pending, ws_mono_ms());
		/* Each request's place in the pace: the round goes at the last
		 * (those whose turn is past their deadline fail now). */
		uint64_t pace = 0;
		size_t kept = 0;
		for (size_t j = 0; j < pending; j++) {
			uint64_t w;
			int r = pace_wait(s, &ops[idx[j]].c, &w);
			if (r) {
				reqs[idx[j]].rc = r;
				continue;
			}
			pace = w > pace ? w : pace;
			idx[kept++] = idx[j];
		}
		pending = kept;
		if (pace)
			ws_sleep_ms((unsigned)pace);
		for (m = 0; m < pending; m++) {
			struct s3_put_op *op = &ops[idx[m]];
			op->store = s;
			op->sign_rc = 0;
			op->c.req.on_send = put_sign_on_send;
			op->c.req.on_send_arg = op;
			round[m] = &op->c.req;
		}
		rc = ws_http_perform_each(s->http, round, m);
		if (rc) {
			for (size_t j = 0; j < m; j++)
				reqs[idx[j]].rc = rc;
			goto out;
		}
		pending = 0;
		due_ms = 0;
		for (size_t j = 0; j < m; j++) {
			size_t i = idx[j];
			if (ops[i].sign_rc) {
				reqs[i].rc = ops[i].sign_rc;
				continue;
			}
			int r = call_judge(s, &ops[i].c);
			reqs[i].throttle_retries = ops[i].c.throttle_retries;
			reqs[i].retry_until_ms = ops[i].c.retry_until_ms;
			if (r == 1) {
				uint64_t due = ws_mono_ms() + ops[i].c.backoff_ms;
				due_ms = due > due_ms ? due : due_ms;
				idx[pending++] = i;
				continue;
			}
			reqs[i].rc = r == 0 ? put_end(s, &ops[i], NULL) : r;
		}
	}
out:
	for (size_t i = 0; ops && i < n; i++)
		ws_buf_free(&ops[i].err_body);
	free(ops);
	free(round);
	free(idx);
	return rc;
}

/*
 * A GET's body against what was asked: a range answered with its own
 * Content-Range (start where asked, as long as its header says, within the
 * object's size), or a whole object (200: a server may ignore Range), of
 * which the range asked for is kept. Anything else is never taken as the
 * bytes at off. out holds the body from len0 on.
 */
/* Decimal digits at *p (at least one, no sign or blank, no overflow),
 * *p moved past them. */
static bool digits_u64(const char **p, uint64_t *out)
{
	char *end;
	unsigned long long v;
	if (!isdigit((unsigned char)**p))
		return false;
	errno = 0;
	v = strtoull(*p, &end, 10);
	if (errno == ERANGE)
		return false;
	*p = end;
	*out = v;
	return true;
}

/* Content-Range "bytes first-last/size" of a 206 (size may be "*": 0). */
static bool content_range(const char *v, uint64_t *first, uint64_t *last, uint64_t *size)
{
	*size = 0;
	if (!v || strncmp(v, "bytes ", 6) != 0)
		return false;
	v += 6;
	if (!digits_u64(&v, first) || *v++ != '-' || !digits_u64(&v, last) || *v++ != '/')
		return false;
	if (!strcmp(v, "*"))
		return true;
	return digits_u64(&v, size) && !*v && *size > *last;
}

static int get_range_check(struct s3_store *s, const struct s3_call *c, const char *key, uint64_t off,
			   uint64_t len, struct ws_buf *out, size_t len0, struct ws_obj_info *info)
{
	const bool ranged = off > 0 || len != UINT64_MAX;
	const uint64_t got = out->len - len0;
	uint64_t total = got;
	const char *v = ws_http_header(&c->req, "content-range");

	if (c->req.status == 206) {
		uint64_t first, last, size;
		if (!ranged || !content_range(v, &first, &last, &size) || first != off || last < first ||
		    last - first + 1 != got || (len != UINT64_MAX && got > len)) {
			out->len = len0;
			return ws_fail(WS_EFORMAT, "s3 %s: %s: a partial answer (206, Content-Range \"%.64s\") to a "
				       "request for %" PRIu64 " bytes at %" PRIu64 " that is not that range",
				       s->base.url, key, v ? v : "", len, off);
		}
		total = size ? size : off + got;
		/* All of the range asked for that the object holds: a server
		 * may not answer with less (RFC 9110 14.2), and less would be
		 * taken for the object's end. */
		if (size && got < (len == UINT64_MAX || off + len > size || off + len < off ? size - off : len)) {
			out->len = len0;
			return ws_fail(-EIO, "s3 %s: %s: a partial answer (206, Content-Range \"%.64s\") with fewer "
				       "bytes than the %" PRIu64 " asked for at %" PRIu64 " that the object holds",
				       s->base.url, key, v ? v : "", len, off);
		}
	} else if (ranged) {
		/* 200: the whole object; keep the range asked for. */
		uint64_t keep = off >= got ? 0 : got - off;
		if (len != UINT64_MAX && keep > len)
			keep = len;
		if (keep && off)
			memmove(out->data + len0, out->data + len0 + off, (size_t)keep);
		out->len = len0 + (size_t)keep;
	}
	if (info) {
		memset(info, 0, sizeof(*info));
		reply_etag(&c->req, &info->etag);
		info->size_bytes = total;
	}
	return 0;
}

static int s3_get(struct ws_store *base, const char *key, uint64_t off, uint64_t len, struct ws_buf *out,
		  struct ws_obj_info *info)
{
	struct s3_store *s = (struct s3_store *)base;
	char h_range[96];
	struct s3_call c = { .method = "GET", .key = key, .resp = out, .framed = true };
	size_t len0 = out->len;
	int rc;

	if (!ws_key_valid(key))
		return ws_fail(-EINVAL, "s3 %s: invalid key \"%s\"", base->url, key);
	if (len == 0) {
		/* Nothing to read: a HEAD says whether it exists. */
		return s3_head(base, key, info);
	}
	if (off > 0 || len != UINT64_MAX) {
		if (len == UINT64_MAX || off + len < off)
			snprintf(h_range, sizeof(h_range), "Range: bytes=%" PRIu64 "-", off);
		else
			snprintf(h_range, sizeof(h_range), "Range: bytes=%" PRIu64 "-%" PRIu64, off, off + len - 1);
		c.extra[c.extra_count++] = h_range;
	}
	rc = s3_call(s, &c);
	if (rc)
		return rc;
	if (c.req.status == 416) {
		/* The range starts past the end: nothing there, like the file store. */
		out->len = len0;
		if (info) {
			rc = s3_head_raw(s, key, info, NULL, 0, c.deadline_ms, true);
			if (rc == WS_ENOTFOUND)
				return ws_fail(rc, "s3 %s: %s: no such object", base->url, key);
			return rc;
		}
		return 0;
	}
	if (c.req.status != 200 && c.req.status != 206) {
		struct ws_buf tmp = *out;
		tmp.data += len0;
		tmp.len -= len0;
		rc = status_error(s, &c, &tmp);
		out->len = len0;
		return rc;
	}
	if (c.req.content_length >= 0 && out->len - len0 != (uint64_t)c.req.content_length) {
		out->len = len0;
		return ws_fail(-EIO, "s3 %s: %s: body is %zu bytes, Content-Length says %" PRId64, base->url,
			       key, out->len - len0, c.req.content_length);
	}
	return get_range_check(s, &c, key, off, len, out, len0, info);
}

static int s3_del(struct ws_store *base, const char *key)
{
	struct s3_store *s = (struct s3_store *)base;
	struct s3_call c = { .method = "DELETE", .key = key };
	int rc;
	if (!ws_key_valid(key))
		return ws_fail(-EINVAL, "s3 %s: invalid key \"%s\"", base->url, key);
	rc = s3_call(s, &c);
	if (rc)
		return rc;
	if (c.req.status == 204 || c.req.status == 200 || c.req.status == 404)
		return 0;
	return status_error(s, &c, NULL);
}

/* ---- ListObjectsV2 -------------------------------------------------------- */

struct list_parse {
	struct ws_list_page *page;
	const char *store_prefix;   /* every key must start with it and '/' (when not "") */
	size_t strip;               /* bytes of prefix + '/' to strip from keys */
	size_t cap;
	int depth;
	bool in_contents;
	bool key_taken;             /* this <Contents>' key went into the page */
	char text[WS_KEY_MAX * 2];
	size_t text_len;
	bool text_overflow;
	bool truncated;
	bool truncated_seen;        /* <IsTruncated> was there */
	bool key_seen;              /* this <Contents> had a <Key> */
	bool size_seen;             /* ... and a <Size>, size (in whichever order) */
	uint64_t size;
	bool root_ok;               /* the document is a <ListBucketResult> */
	bool overflow;              /* more <Contents> than max-keys asked for */
	size_t long_key;            /* length of a key too long for walship (0: none) */
	char next[WS_KEY_MAX * 2];
	int err;
};

static void XMLCALL xml_start(void *arg, const XML_Char *name, const XML_Char **attrs)
{
	struct list_parse *p = arg;
	(void)attrs;
	p->depth++;
	if (p->depth == 1)
		p->root_ok = !strcmp(name, "ListBucketResult");
	if (p->depth == 2 && !strcmp(name, "Contents")) {
		p->in_contents = true;
		p->key_taken = false;
		p->key_seen = false;
		p->size_seen = false;
	}
	p->text_len = 0;
	p->text_overflow = false;
}

static void XMLCALL xml_text(void *arg, const XML_Char *s, int len)
{
	struct list_parse *p = arg;
	if (len < 0 || p->text_len + (size_t)len >= sizeof(p->text)) {
		p->text_overflow = true;
		return;
	}
	memcpy(p->text + p->text_len, s, (size_t)len);
	p->text_len += (size_t)len;
}

static void XMLCALL xml_end(void *arg, const XML_Char *name)
{
	struct list_parse *p = arg;
	p->text[p->text_len] = '\0';
	if (p->in_contents && p->depth == 3 && !strcmp(name, "Key")) {
		if (p->key_seen)
			p->err = WS_EFORMAT; /* two keys in one <Contents> */
		p->key_seen = true;
		if (p->text_overflow || p->text_len < p->strip ||
		    (p->strip && (memcmp(p->text, p->store_prefix, p->strip - 1) != 0 ||
				  p->text[p->strip - 1] != '/'))) {
			/* Short, or another prefix's key: never strip it into one of ours. */
			p->err = WS_EFORMAT;
		} else if (p->text_len - p->strip >= WS_KEY_MAX) {
			/* Longer than any key walship writes or reads: copied into a
			 * key buffer, it would be cut into another key. */
			p->err = WS_EFORMAT;
			p->long_key = p->text_len - p->strip;
		} else if (p->page->count < p->cap) {
			char *k = strdup(p->text + p->strip);
			if (!k)
				p->err = -ENOMEM;
			else
				p->page->keys[p->page->count++] = k;
			p->key_taken = k != NULL;
		} else {
			p->key_taken = false;
			p->overflow = true;
		}
	} else if (p->in_contents && p->depth == 3 && !strcmp(name, "Size")) {
		char *end;
		unsigned long long v;
		errno = 0;
		v = strtoull(p->text, &end, 10);
		/* Decimal digits only: strtoull alone takes "-1" (as 2^64-1), "+5", " 5". */
		if (p->size_seen || !isdigit((unsigned char)p->text[0]) || *end || errno == ERANGE)
			p->err = WS_EFORMAT;
		p->size = v;
		p->size_seen = true;
	} else if (p->depth == 2 && !strcmp(name, "IsTruncated")) {
		/* xs:boolean, with the whitespace XML allows around it. */
		const char *t = p->text + strspn(p->text, " \t\r\n");
		size_t n = strlen(t);
		while (n && strchr(" \t\r\n", t[n - 1]))
			n--;
		if ((n == 4 && !memcmp(t, "true", 4)) || (n == 1 && t[0] == '1'))
			p->truncated = true;
		else if ((n == 5 && !memcmp(t, "false", 5)) || (n == 1 && t[0] == '0'))
			p->truncated = false;
		else
			p->err = WS_EFORMAT;
		if (p->truncated_seen)
			p->err = WS_EFORMAT;
		p->truncated_seen = true;
	} else if (p->depth == 2 && !strcmp(name, "Contents")) {
		/* An object without a key or a size: nothing to take it for. */
		if (!p->key_seen || !p->size_seen)
			p->err = WS_EFORMAT;
		else if (p->key_taken)
			p->page->sizes[p->page->count - 1] = p->size;
		p->in_contents = false;
	}
	p->depth--;
	p->text_len = 0;
}

int ws_s3_list_parse(const char *url, const void *xml, size_t len, const char *store_prefix, const char *prefix,
		     const char *token, unsigned max_keys, struct ws_list_page *out)
{
	struct list_parse lp;
	XML_Parser xp;
	int rc = 0;

	memset(&lp, 0, sizeof(lp));
	lp.page = out;
	lp.cap = max_keys;
	lp.store_prefix = store_prefix;
	lp.strip = store_prefix[0] ? strlen(store_prefix) + 1 : 0;
	xp = XML_ParserCreate(NULL);
	if (!xp)
		return -ENOMEM;
	XML_SetUserData(xp, &lp);
	XML_SetElementHandler(xp, xml_start, xml_end);
	XML_SetCharacterDataHandler(xp, xml_text);
	if (len > INT32_MAX || XML_Parse(xp, xml, (int)len, 1) != XML_STATUS_OK) {
		rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 response is not well-formed XML: %s", url,
			     XML_ErrorString(XML_GetErrorCode(xp)));
		goto out;
	}
	/* A listing that ends early loses what it did not show: a tenant
	 * missing from verify, ls or a checkpoint's cut. Anything but a whole
	 * page that can be continued is an error, never a short listing. */
	if (!lp.root_ok) {
		rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 response is not a ListBucketResult (an error "
			     "document in a 200?)", url);
		goto out;
	}
	if (lp.long_key) {
		rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 returned a key of %zu bytes under the sink's prefix, "
			     "longer than walship's %d: not an object of this sink (move it out of the prefix)", url,
			     lp.long_key, WS_KEY_MAX - 1);
		goto out;
	}
	if (lp.err) {
		rc = ws_fail(lp.err, "s3 %s: ListObjectsV2 response has a malformed key, size or IsTruncated, or a "
			     "key outside the sink's prefix", url);
		goto out;
	}
	/* Without it a listing that goes on would be taken for a whole one. */
	if (!lp.truncated_seen) {
		rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 response has no IsTruncated: cannot tell whether "
			     "the listing goes on", url);
		goto out;
	}
	if (lp.overflow) {
		rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 returned more keys than the %u asked for", url,
			     max_keys);
		goto out;
	}
	if (lp.truncated && out->count == 0) {
		rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 says the listing goes on but returned no key to "
			     "go on after", url);
		goto out;
	}
	/* Keys must come sorted, within the prefix and after the token: a
	 * response that breaks this is not trusted. */
	for (size_t i = 0; i < out->count; i++) {
		if (strncmp(out->keys[i], prefix, strlen(prefix)) != 0 ||
		    (token && token[0] && strcmp(out->keys[i], token) <= 0) ||
		    (i > 0 && strcmp(out->keys[i - 1], out->keys[i]) >= 0)) {
			rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 returned key \"%s\" out of order or "
				     "outside the prefix", url, out->keys[i]);
			goto out;
		}
	}
	out->truncated = lp.truncated;
	if (out->truncated)
		snprintf(out->next_token, sizeof(out->next_token), "%s", out->keys[out->count - 1]);
out:
	XML_ParserFree(xp);
	return rc;
}

static void append_param(char *q, size_t cap, const char *name, const char *value)
{
	char enc[WS_KEY_MAX * 6];
	size_t n = strlen(q);
	if (ws_uri_encode(value, strlen(value), false, enc, sizeof(enc)) != 0)
		enc[0] = '\0';
	snprintf(q + n, cap - n, "%s%s=%s", n ? "&" : "", name, enc);
}

static int s3_list(struct ws_store *base, const char *prefix, const char *token, unsigned max_keys,
		   struct ws_list_page *out)
{
	struct s3_store *s = (struct s3_store *)base;
	char query[WS_KEY_MAX * 14] = "";
	char full_prefix[WS_KEY_MAX * 2], after[WS_KEY_MAX * 2], num[16];
	struct ws_buf body;
	struct s3_call c = { .method = "GET", .key = "" };
	int rc;

	if (max_keys == 0 || max_keys > WS_LIST_PAGE_MAX)
		return ws_fail(-EINVAL, "s3 %s: list of %u keys (1..%u)", base->url, max_keys, WS_LIST_PAGE_MAX);
	memset(out, 0, sizeof(*out));
	out->keys = calloc(max_keys, sizeof(*out->keys));
	out->sizes = calloc(max_keys, sizeof(*out->sizes));
	if (!out->keys || !out->sizes) {
		ws_list_page_free(out);
		return -ENOMEM;
	}
	snprintf(full_prefix, sizeof(full_prefix), "%s%s%s", s->prefix, s->prefix[0] ? "/" : "", prefix);
	/* Query parameters in any order: the signer sorts its canonical copy. */
	append_param(query, sizeof(query), "list-type", "2");
	snprintf(num, sizeof(num), "%u", max_keys);
	append_param(query, sizeof(query), "max-keys", num);
	append_param(query, sizeof(query), "prefix", full_prefix);
	if (token && token[0]) {
		snprintf(after, sizeof(after), "%s%s%s", s->prefix, s->prefix[0] ? "/" : "", token);
		append_param(query, sizeof(query), "start-after", after);
	}
	c.query = query;
	ws_buf_init(&body, 16u << 20);
	c.resp = &body;
	rc = s3_call(s, &c);
	if (rc)
		goto fail;
	if (c.req.status != 200) {
		rc = status_error(s, &c, &body);
		goto fail;
	}
	rc = ws_s3_list_parse(base->url, body.data, body.len, s->prefix, prefix, token, max_keys, out);
	if (rc)
		goto fail;
	ws_buf_free(&body);
	return 0;
fail:
	ws_buf_free(&body);
	ws_list_page_free(out);
	return rc;
}

/* DeleteObjects' reply in quiet mode lists only failures: keep the first. */
struct del_parse {
	int depth;
	bool in_error;
	char tag[32];
	char text[WS_KEY_MAX * 2];
	size_t text_len;
	char key[WS_KEY_MAX * 2];
	char code[64];
	unsigned errors;
	bool root_ok;            /* the document is a <DeleteResult> */
};

static void XMLCALL del_start(void *arg, const XML_Char *name, const XML_Char **attrs)
{
	struct del_parse *p = arg;
	(void)attrs;
	p->depth++;
	if (p->depth == 1)
		p->root_ok = !strcmp(name, "DeleteResult");
	if (p->depth == 2 && !strcmp(name, "Error"))
		p->in_error = true;
	p->text_len = 0;
}

static void XMLCALL del_text(void *arg, const XML_Char *s, int len)
{
	struct del_parse *p = arg;
	if (len > 0 && p->text_len + (size_t)len < sizeof(p->text)) {
		memcpy(p->text + p->text_len, s, (size_t)len);
		p->text_len += (size_t)len;
	}
}

static void XMLCALL del_end(void *arg, const XML_Char *name)
{
	struct del_parse *p = arg;
	p->text[p->text_len] = '\0';
	if (p->in_error && p->depth == 3 && p->errors == 0) {
		if (!strcmp(name, "Key"))
			snprintf(p->key, sizeof(p->key), "%s", p->text);
		else if (!strcmp(name, "Code"))
			snprintf(p->code, sizeof(p->code), "%.63s", p->text);
	} else if (p->depth == 2 && !strcmp(name, "Error")) {
		p->in_error = false;
		/* A key that is already gone is what delete asked for. */
		if (strcmp(p->code, "NoSuchKey") != 0)
			p->errors++;
		else
			p->key[0] = p->code[0] = '\0';
	}
	p->depth--;
	p->text_len = 0;
}

int ws_s3_delete_parse(const char *url, const void *xml, size_t len)
{
	struct del_parse dp;
	XML_Parser xp;
	int rc = 0;

	memset(&dp, 0, sizeof(dp));
	xp = XML_ParserCreate(NULL);
	if (!xp)
		return -ENOMEM;
	XML_SetUserData(xp, &dp);
	XML_SetElementHandler(xp, del_start, del_end);
	XML_SetCharacterDataHandler(xp, del_text);
	if (len > INT32_MAX || XML_Parse(xp, xml, (int)len, 1) != XML_STATUS_OK)
		rc = ws_fail(WS_EFORMAT, "s3 %s: DeleteObjects response is not well-formed XML", url);
	else if (!dp.root_ok)
		rc = ws_fail(WS_EFORMAT, "s3 %s: DeleteObjects response is not a DeleteResult (an error document "
			     "in a 200?): nothing taken as deleted", url);
	else if (dp.errors)
		rc = ws_fail(-EIO, "s3 %s: DeleteObjects: %u key%s not deleted, first %s (%s)", url, dp.errors,
			     dp.errors == 1 ? "" : "s", dp.key, dp.code);
	XML_ParserFree(xp);
	return rc;
}

static int s3_del_many(struct ws_store *base, const char *const *keys, size_t n)
{
	struct s3_store *s = (struct s3_store *)base;
	struct ws_buf body, resp;
	struct s3_call c = { .method = "POST", .key = "", .query = "delete" };
	char h_len[64], h_md5[64], b64[32];
	unsigned char md5[16];
	unsigned int md5_len = 0;
	int rc;

	if (n == 0)
		return 0;
	if (n > WS_DEL_MANY_MAX)
		return ws_fail(-EINVAL, "s3 %s: DeleteObjects of %zu keys (at most %u)", base->url, n,
			       WS_DEL_MANY_MAX);
	ws_buf_init(&body, (size_t)n * (WS_KEY_MAX * 2 + 32) + 256);
	ws_buf_init(&resp, 16u << 20);
	{
		static const char head[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Delete><Quiet>true</Quiet>";
		ws_buf_append(&body, head, sizeof(head) - 1);
	}
	for (size_t i = 0; i < n; i++) {
		char full[WS_KEY_MAX * 2];
		/* Valid keys hold no XML metacharacters: nothing to escape. */
		if (!ws_key_valid(keys[i])) {
			rc = ws_fail(-EINVAL, "s3 %s: invalid key \"%s\"", base->url, keys[i]);
			goto out;
		}
		snprintf(full, sizeof(full), "%s%s%s", s->prefix, s->prefix[0] ? "/" : "", keys[i]);
		ws_buf_append(&body, "<Object><Key>", 13);
		ws_buf_append(&body, full, strlen(full));
		ws_buf_append(&body, "</Key></Object>", 15);
	}
	ws_buf_append(&body, "</Delete>", 9);
	if (body.err) {
		rc = body.err;
		goto out;
	}
	/* DeleteObjects requires Content-MD5 of the body. */
	if (EVP_Digest(body.data, body.len, md5, &md5_len, EVP_md5(), NULL) != 1) {
		rc = ws_fail(-EIO, "s3 %s: MD5 failed", base->url);
		goto out;
	}
	EVP_EncodeBlock((unsigned char *)b64, md5, (int)md5_len);
	snprintf(h_len, sizeof(h_len), "Content-Length: %zu", body.len);
	snprintf(h_md5, sizeof(h_md5), "Content-MD5: %s", b64);
	c.extra[c.extra_count++] = h_len;
	c.extra[c.extra_count++] = h_md5;
	struct iovec iov = { body.data, body.len };
	c.body = &iov;
	c.body_iovcnt = 1;
	c.resp = &resp;
	rc = s3_call(s, &c);
	if (rc)
		goto out;
	if (c.req.status != 200) {
		rc = status_error(s, &c, &resp);
		goto out;
	}
	rc = ws_s3_delete_parse(base->url, resp.data, resp.len);
out:
	ws_buf_free(&body);
	ws_buf_free(&resp);
	return rc;
}

static void s3_close(struct ws_store *base)
{
	struct s3_store *s = (struct s3_store *)base;
	ws_http_close(s->http);
	pacer_put(s->pacer);
	explicit_bzero(&s->creds, sizeof(s->creds));
	free(s);
}

static bool s3_pressed(struct ws_store *base)
{
	struct s3_store *s = (struct s3_store *)base;
	return s->pacer && ws_pacer_pressed(&s->pacer->p, ws_mono_ms());
}

static const struct ws_store_ops s3_ops = {
	.put = s3_put,
	.get = s3_get,
	.head = s3_head,
	.list = s3_list,
	.del = s3_del,
	.del_many = s3_del_many,
	.put_many = s3_put_many,
	.pressed = s3_pressed,
	.close = s3_close,
	.kind = WS_STORE_S3,
};

/* ---- open ---------------------------------------------------------------- */

static int parse_bool(const char *v, bool *out)
{
	if (!strcmp(v, "1") || !strcmp(v, "on") || !strcmp(v, "true"))
		*out = true;
	else if (!strcmp(v, "0") || !strcmp(v, "off") || !strcmp(v, "false"))
		*out = false;
	else
		return -1;
	return 0;
}

/* Percent-decode n bytes of a query value. */
static int url_decode(const char *in, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int ch = (unsigned char)in[i];
		if (ch == '%') {
			if (i + 2 >= n)
				return -1;
			int h = ws_hexval(in[i + 1]), l = ws_hexval(in[i + 2]);
			if (h < 0 || l < 0)
				return -1;
			ch = h * 16 + l;
			i += 2;
		}
		if (ch == 0 || o + 1 >= cap)
			return -1;
		out[o++] = (char)ch;
	}
	out[o] = '\0';
	return 0;
}

/* The etag a PUT returned, or, when its reply carried none, the object's. */
static int probe_etag(struct s3_store *s, const char *key, struct ws_etag *e)
{
	struct ws_obj_info info;
	int rc;
	if (e->s[0])
		return 0;
	rc = s3_head_raw(s, key, &info, NULL, 0, 0, false);
	if (rc)
		return ws_fail_wrap(rc, "s3 %s: conditional-write probe: HEAD %s", s->base.url, key);
	if (info.etag.too_long)
		return ws_fail(WS_ECONFIG, "s3 %s: conditional-write probe: the store's ETag for %s is %u bytes, longer "
			       "than the %d bytes walship keeps: compare-and-swap cannot name it; refusing it "
			       "(conditional_writes=off overrides)", s->base.url, key, info.etag.too_long,
			       WS_ETAG_MAX - 1);
	if (!info.etag.s[0])
		return ws_fail(WS_ECONFIG, "s3 %s: conditional-write probe: the store returns no ETag for %s: "
			       "compare-and-swap cannot work; refusing it (conditional_writes=off overrides)",
			       s->base.url, key);
	*e = info.etag;
	return 0;
}

/* One probe write of key: body "walship probe N", in mode, its new etag in out. */
static int probe_put(struct s3_store *s, const char *key, unsigned n, enum ws_put_mode mode,
		     const struct ws_etag *expect, struct ws_etag *out)
{
	char body[48];
	int len = snprintf(body, sizeof(body), "walship conditional-write probe %u", n);
	struct iovec iov = { body, (size_t)len };
	memset(out, 0, sizeof(*out));
	return s3_put(&s->base, key, &iov, 1, mode, expect, out);
}

/*
 * Fencing relies on two conditional writes; before the sink is trusted,
 * check on a scratch key that the store enforces both, as S3 specifies:
 *  - create-once: a second If-None-Match: * PUT of the key gets 412;
 *  - compare-and-swap: If-Match with the object's current etag succeeds,
 *    If-Match with an etag it had before gets 412.
 * Stores disagree on how If-Match spells the etag: RFC 9110 and AWS quote
 * it, radosgw 16.2 compares it bare (a quoted one never matches, so every
 * swap gets 412). With etag_quotes auto, each form is tried, quoted first,
 * and the first that passes both checks is used; with etag_quotes=0|1, only
 * that form, which must pass. When none does the store is refused:
 * WS_ECONFIG, the detail saying what each form got (a store that ignores
 * If-Match lets the stale etag's write through; one that wants the other
 * spelling refuses the current one).
 */
static int probe_conditional(struct s3_store *s)
{
	char key[96], why[2][160];
	struct ws_etag cur, prev, got;
	unsigned n = 0;
	int forms[2], nforms = 0, rc, chosen = -1;

	snprintf(key, sizeof(key), "_walship/probe-%016" PRIx64, rnd64(s));
	rc = probe_put(s, key, ++n, WS_PUT_CREATE, NULL, &cur);
	if (rc)
		return ws_fail_wrap(rc, "conditional-write probe");
	rc = probe_etag(s, key, &cur);
	if (rc)
		goto out;
	rc = probe_put(s, key, ++n, WS_PUT_CREATE, NULL, &got);
	if (rc == 0) {
		rc = ws_fail(WS_ECONFIG, "s3 %s: the store ignores If-None-Match (a second create-once of "
			     "%s succeeded): it cannot fence owners; refusing it (conditional_writes=off "
			     "overrides)", s->base.url, key);
		goto out;
	}
	if (rc != WS_EPRECOND) {
		rc = ws_fail_wrap(rc, "conditional-write probe");
		goto out;
	}
	if (s->etag_quotes != 0)
		forms[nforms++] = 1;
	if (s->etag_quotes != 1)
		forms[nforms++] = 0;
	/* s3_put must not come back here for the probe's own swaps. */
	s->if_match_known = true;
	for (int i = 0; i < nforms && chosen < 0; i++) {
		s->if_match_quoted = forms[i] == 1;
		rc = probe_put(s, key, ++n, WS_PUT_CAS, &cur, &got);
		if (rc == WS_EBADSTORE || rc == WS_EPRECOND) {
			snprintf(why[i], sizeof(why[i]), "%s etag: the current etag got 412",
				 forms[i] ? "quoted" : "bare");
			continue;
		}
		if (rc || (rc = probe_etag(s, key, &got)) != 0)
			goto fail_io;
		prev = cur;
		cur = got;
		rc = probe_put(s, key, ++n, WS_PUT_CAS, &prev, &got);
		if (rc == WS_EPRECOND) {
			chosen = forms[i];
			continue;
		}
		if (rc)
			goto fail_io;
		snprintf(why[i], sizeof(why[i]), "%s etag: a stale etag's write went through",
			 forms[i] ? "quoted" : "bare");
		if ((rc = probe_etag(s, key, &got)) != 0)
			goto fail_io;
		cur = got;
	}
	if (chosen < 0) {
		s->if_match_known = false;
		rc = ws_fail(WS_ECONFIG, "s3 %s: the store does not honour If-Match (%s%s%s), so compare-and-swap "
			     "cannot fence owners; refusing it (conditional_writes=off overrides)", s->base.url,
			     why[0], nforms > 1 ? "; " : "", nforms > 1 ? why[1] : "");
		goto out;
	}
	s->if_match_quoted = chosen == 1;
	ws_debug("s3 %s: conditional writes enforced; If-Match etags %s", s->base.url,
		 chosen ? "quoted" : "bare");
	rc = 0;
	goto out;
fail_io:
	s->if_match_known = false;
	rc = ws_fail_wrap(rc, "conditional-write probe");
out:
	(void)s3_del(&s->base, key);
	return rc;
}

/* ---- the URL ------------------------------------------------------------- */

/* What the parameters set besides the store itself. */
struct s3_parse {
	struct ws_http_opts ho;
	char ca_file[512];
	bool insecure;
	int payload_signing;        /* -1: by the endpoint's scheme, 0: unsigned, 1: signed */
	bool region_set;            /* region= given (else from the environment) */
};

static bool has_ctl(const char *v)
{
	for (; *v; v++)
		if ((unsigned char)*v < 0x20 || *v == 0x7f)
			return true;
	return false;
}

/* An endpoint value that holds user info (user:password@) anywhere, raw or encoded. */
static bool has_userinfo(const char *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == '@' || (i + 2 < n && v[i] == '%' && v[i + 1] == '4' && v[i + 2] == '0'))
			return true;
	return false;
}

/*
 * The URL as messages show it: control characters as '?', and user info
 * (user:password@, which may hold a secret) left out, before the bucket
 * or in an endpoint's value. Nothing else is changed, so the user
 * recognises what they wrote.
 */
static void display_url(const char *url, char *out, size_t cap)
{
	static const char redacted[] = "(user info removed)";
	size_t o = 0;
	const char *q = strchr(url, '?');
	const char *p = url;
	int w;

	if (!strncasecmp(url, "s3://", 5)) {
		size_t n = strcspn(url + 5, "/?");
		const char *at = memchr(url + 5, '@', n);
		if (at) {
			w = snprintf(out, cap, "%.5s%s@", url, redacted);
			o = w < 0 ? 0 : (size_t)w >= cap ? cap - 1 : (size_t)w;
			p = at + 1;
		}
	}
	while (*p && o + 1 < cap) {
		if (q && p > q && (p[-1] == '?' || p[-1] == '&')) {
			/* Any parameter's value: a name spelled another way
			 * (%65ndpoint) still carries what the user wrote. */
			size_t name = strcspn(p, "=&");
			if (p[name] == '=') {
				size_t n = strcspn(p + name + 1, "&");
				if (has_userinfo(p + name + 1, n)) {
					w = snprintf(out + o, cap - o, "%.*s=%s", (int)name, p, redacted);
					o = w < 0 ? o : o + (size_t)w >= cap ? cap - 1 : o + (size_t)w;
					p += name + 1 + n;
					continue;
				}
			}
		}
		unsigned char ch = (unsigned char)*p++;
		out[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	out[o] = '\0';
}

/*
 * An S3 bucket name as AWS defines it: 3..63 of a-z 0-9 . -, starting and
 * ending with a letter or digit, no "..", ".-" or "-.", not an IPv4
 * address. Checked here so a typo fails at once, not after DNS retries.
 */
static const char *bucket_problem(const char *b)
{
	size_t n = strlen(b);
	unsigned dots = 0;
	bool digits_dots = true;
	if (n < 3 || n > 63)
		return "must be 3..63 characters";
	for (size_t i = 0; i < n; i++) {
		char ch = b[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'))
			return "may hold only a-z 0-9 . -";
		if (!(ch >= '0' && ch <= '9') && ch != '.')
			digits_dots = false;
		dots += ch == '.';
	}
	if (!isalnum((unsigned char)b[0]) || !isalnum((unsigned char)b[n - 1]))
		return "must start and end with a letter or digit";
	if (strstr(b, "..") || strstr(b, ".-") || strstr(b, "-."))
		return "must not hold \"..\", \".-\" or \"-.\"";
	if (digits_dots && dots == 3)
		return "must not be an IP address";
	return NULL;
}

/* A signing region, which also goes into AWS host names: 1..63 of a-z 0-9 -. */
static bool region_ok(const char *r)
{
	size_t n = strlen(r);
	if (n == 0 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= '0' && r[i] <= '9') || r[i] == '-'))
			return false;
	return true;
}

/*
 * Check an endpoint value (trailing slashes already dropped):
 * http[s]://HOST[:PORT], HOST a name, an IPv4 address or a bracketed IPv6
 * one, PORT 1..65535, nothing after. On success the Host header curl will
 * send (without a default port) goes to host and *tls says https. On
 * failure why says what is wrong (never echoing user info).
 */
static bool endpoint_ok(const char *v, char *host, size_t host_cap, bool *tls, char *why, size_t why_cap)
{
	const char *a, *end, *port = NULL, *h_end;
	size_t n;

	if (!strncmp(v, "http://", 7)) {
		*tls = false;
		a = v + 7;
	} else if (!strncmp(v, "https://", 8)) {
		*tls = true;
		a = v + 8;
	} else {
		snprintf(why, why_cap, "must be an http:// or https:// URL");
		return false;
	}
	end = a + strcspn(a, "/?#");
	if (*end) {
		snprintf(why, why_cap, "must not have a path, query or fragment (just scheme://host[:port])");
		return false;
	}
	if (memchr(a, '@', (size_t)(end - a))) {
		snprintf(why, why_cap, "must not hold a user name or password (user:password@host): credentials "
			 "come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
		return false;
	}
	if (a == end) {
		snprintf(why, why_cap, "has no host");
		return false;
	}
	if (*a == '[') {
		char lit[64];
		const char *close = memchr(a, ']', (size_t)(end - a));
		struct in6_addr in6;
		if (!close) {
			snprintf(why, why_cap, "has an IPv6 address without its closing ']'");
			return false;
		}
		n = (size_t)(close - a - 1);
		if (n == 0 || n >= sizeof(lit)) {
			snprintf(why, why_cap, "has an empty or overlong IPv6 address");
			return false;
		}
		memcpy(lit, a + 1, n);
		lit[n] = '\0';
		if (inet_pton(AF_INET6, lit, &in6) != 1) {
			snprintf(why, why_cap, "has \"[%s]\", which is not an IPv6 address", lit);
			return false;
		}
		h_end = close + 1;
		if (h_end < end && *h_end != ':') {
			snprintf(why, why_cap, "has something other than :PORT after the IPv6 address");
			return false;
		}
	} else {
		h_end = a + strcspn(a, ":");
		if (h_end > end)
			h_end = end;
		if (h_end < end && memchr(h_end + 1, ':', (size_t)(end - h_end - 1))) {
			snprintf(why, why_cap, "has more than one ':' (an IPv6 address goes in brackets: "
				 "http://[::1]:9000)");
			return false;
		}
		if (h_end == a || (size_t)(h_end - a) > 253) {
			snprintf(why, why_cap, "has an empty or overlong host name");
			return false;
		}
		for (const char *c = a; c < h_end; c++) {
			if (!isalnum((unsigned char)*c) && *c != '-' && *c != '.') {
				snprintf(why, why_cap, "has a host name with a character other than A-Z a-z 0-9 . -");
				return false;
			}
		}
		if (*a == '-' || *a == '.') {
			snprintf(why, why_cap, "has a host name starting with '%c'", *a);
			return false;
		}
	}
	if (h_end < end) {
		unsigned long v_port = 0;
		port = h_end + 1;
		n = (size_t)(end - port);
		/* No leading zero: curl sends the port as a number (":9123"), and
		 * a Host signed as ":09123" would never match what was sent. */
		if (n == 0 || n > 5 || strspn(port, "0123456789") < n || port[0] == '0') {
			snprintf(why, why_cap, "has a port that is not a number from 1 to 65535 (without leading zeros)");
			return false;
		}
		for (size_t i = 0; i < n; i++)
			v_port = v_port * 10 + (unsigned long)(port[i] - '0');
		if (v_port < 1 || v_port > 65535) {
			snprintf(why, why_cap, "has port %lu, not 1..65535", v_port);
			return false;
		}
	}
	n = (size_t)(end - a);
	/* The Host header as curl sends it: without a default port. */
	if (port && ((!*tls && !strcmp(port, "80")) || (*tls && !strcmp(port, "443"))))
		n = (size_t)(port - 1 - a);
	if (n >= host_cap) {
		snprintf(why, why_cap, "has a host too long");
		return false;
	}
	memcpy(host, a, n);
	host[n] = '\0';
	return true;
}

/*
 * Apply the query parameters in q ("name=value&..."). from_defaults: the
 * caller's defaults, which name no user input; errors in them are the
 * caller's. Errors: WS_ECONFIG naming the parameter, never echoing a value
 * that may hold a secret.
 */
static int apply_params(struct s3_store *s, struct s3_parse *ps, const char *q, bool from_defaults)
{
	const char *u = s->base.url;
	const char *who = from_defaults ? " (walship's default)" : "";
	char seen[16][64];
	unsigned nseen = 0;

	while (q && *q) {
		char name[64], value[1024];
		const char *amp, *eq;
		amp = strchr(q, '&');
		if (!amp)
			amp = q + strlen(q);
		if (amp == q) {
			q = amp + 1;
			continue;
		}
		eq = memchr(q, '=', (size_t)(amp - q));
		if (!eq || eq == q || (size_t)(eq - q) >= sizeof(name))
			return ws_fail(WS_ECONFIG, "sink %s: malformed query parameter%s (expected name=value)", u, who);
		memcpy(name, q, (size_t)(eq - q));
		name[eq - q] = '\0';
		/* Given twice in one URL: which one was meant? (The config file
		 * refuses a key given twice as well.) */
		for (unsigned i = 0; i < nseen; i++)
			if (!strcmp(seen[i], name))
				return ws_fail(WS_ECONFIG, "sink %s: parameter %s given twice%s", u, name, who);
		if (nseen < sizeof(seen) / sizeof(seen[0]))
			memcpy(seen[nseen++], name, sizeof(name));
		if (url_decode(eq + 1, (size_t)(amp - eq - 1), value, sizeof(value)) != 0)
			return ws_fail(WS_ECONFIG, "sink %s: parameter %s%s: malformed percent-encoding, a NUL "
				       "byte, or longer than %zu bytes", u, name, who, sizeof(value) - 1);
		/* Values end up in URLs, headers and signatures: a CR or LF would
		 * smuggle a header into every request. */
		if (has_ctl(value))
			return ws_fail(WS_ECONFIG, "sink %s: parameter %s%s has a control character (CR, LF or "
				       "another byte below 0x20)", u, name, who);
		if (!strcmp(name, "endpoint")) {
			char why[200];
			size_t n = strlen(value);
			bool tls;
			while (n > 0 && value[n - 1] == '/')
				value[--n] = '\0';
			if (n >= sizeof(s->endpoint))
				return ws_fail(WS_ECONFIG, "sink %s: endpoint is longer than %zu bytes", u,
					       sizeof(s->endpoint) - 1);
			if (!endpoint_ok(value, s->host, sizeof(s->host), &tls, why, sizeof(why)))
				return ws_fail(WS_ECONFIG, "sink %s: endpoint %s%s", u, why, who);
			memcpy(s->endpoint, value, n + 1);
		} else if (!strcmp(name, "region")) {
			if (!region_ok(value))
				return ws_fail(WS_ECONFIG, "sink %s: region must be 1..63 of a-z 0-9 - (like us-east-1)",
					       u);
			memcpy(s->creds.region, value, strlen(value) + 1);
			ps->region_set = true;
		} else if (!strcmp(name, "etag_quotes")) {
			bool quoted;
			if (!strcmp(value, "auto"))
				s->etag_quotes = -1;
			else if (parse_bool(value, &quoted) == 0)
				s->etag_quotes = quoted;
			else
				return ws_fail(WS_ECONFIG, "sink %s: etag_quotes=%s is not auto, 0 or 1", u, value);
		} else if (!strcmp(name, "conditional_writes")) {
			if (parse_bool(value, &s->conditional_writes))
				return ws_fail(WS_ECONFIG, "sink %s: conditional_writes=%s is not on or off", u, value);
		} else if (!strcmp(name, "pace")) {
			if (parse_bool(value, &s->pace))
				return ws_fail(WS_ECONFIG, "sink %s: pace=%s%s is not 0 or 1", u, value, who);
		} else if (!strcmp(name, "insecure")) {
			if (parse_bool(value, &ps->insecure))
				return ws_fail(WS_ECONFIG, "sink %s: insecure=%s is not 0 or 1", u, value);
		} else if (!strcmp(name, "payload_signing")) {
			if (strcmp(value, "signed") && strcmp(value, "unsigned"))
				return ws_fail(WS_ECONFIG, "sink %s: payload_signing=%s is not signed or unsigned", u,
					       value);
			ps->payload_signing = !strcmp(value, "signed");
		} else if (!strcmp(name, "ca_file")) {
			if (strlen(value) >= sizeof(ps->ca_file))
				return ws_fail(WS_ECONFIG, "sink %s: ca_file path too long", u);
			memcpy(ps->ca_file, value, strlen(value) + 1);
		} else if (!strcmp(name, "retry_attempts_max") || !strcmp(name, "retry_deadline_ms") ||
			   !strcmp(name, "max_in_flight")) {
			char *end;
			unsigned long long v = strtoull(value, &end, 10);
			if (!value[0] || *end || value[0] == '-' || value[0] == '+' || v == 0 || v > 86400000)
				return ws_fail(WS_ECONFIG, "sink %s: %s=%s%s is not a positive integer (at most "
					       "86400000)", u, name, value, who);
			/* The user's value is taken or refused, never clamped
			 * without a word (walship's own defaults are clamped). */
			if (!from_defaults && ((!strcmp(name, "retry_attempts_max") && v > 1000) ||
					       (!strcmp(name, "max_in_flight") && v > 256)))
				return ws_fail(WS_ECONFIG, "sink %s: %s=%s is above its most (%s)", u, name, value,
					       !strcmp(name, "max_in_flight") ? "256" : "1000");
			if (!strcmp(name, "retry_attempts_max"))
				s->attempts_max = (unsigned)(v > 1000 ? 1000 : v);
			else if (!strcmp(name, "retry_deadline_ms"))
				s->deadline_ms = v;
			else
				ps->ho.max_in_flight = (unsigned)(v > 256 ? 256 : v);
		} else {
			return ws_fail(WS_ECONFIG, "sink %s: unknown parameter \"%s\"%s", u, name, who);
		}
		q = *amp ? amp + 1 : amp;
	}
	return 0;
}

struct ws_store *ws_store_s3_open(const char *url, unsigned flags, int *err)
{
	return ws_store_s3_open_defaults(url, NULL, flags, err);
}

const char *ws_s3_limits_query(const struct ws_store_limits *lim, char *q, size_t cap)
{
	if (!lim)
		return NULL;
	snprintf(q, cap, "retry_attempts_max=%" PRIu64 "&retry_deadline_ms=%" PRIu64 "&max_in_flight=%" PRIu64
		 "&pace=%d", lim->retry_attempts_max, lim->retry_deadline_ms, lim->max_in_flight, lim->no_pace ? 0 : 1);
	return q;
}

struct ws_store *ws_store_s3_open_defaults(const char *url, const char *defaults, unsigned flags, int *err)
{
	struct s3_store *s = NULL;
	struct s3_parse ps;
	const char *p, *q, *slash, *u;
	const char *problem;
	bool tls = true; /* AWS's own endpoints are https */
	int rc;

	memset(&ps, 0, sizeof(ps));
	ps.payload_signing = -1;
	s = calloc(1, sizeof(*s));
	if (!s) {
		rc = -ENOMEM;
		goto fail;
	}
	s->base.ops = &s3_ops;
	/* Messages show what the user wrote, less any password and control bytes. */
	display_url(url, s->base.url, sizeof(s->base.url));
	u = s->base.url;
	s->etag_quotes = -1;
	s->conditional_writes = true;
	s->attempts_max = 10;
	s->deadline_ms = 30000;
	s->pace = true;
	if (getrandom(&s->rng, sizeof(s->rng), 0) != sizeof(s->rng) || s->rng == 0)
		s->rng = ws_mono_ns() | 1;
	if (has_ctl(url)) {
		rc = ws_fail(WS_ECONFIG, "sink %s: the URL has a control character (CR, LF or another byte "
			     "below 0x20)", u);
		goto fail;
	}

	p = url + 5; /* after "s3://" */
	q = strchr(p, '?');
	slash = strchr(p, '/');
	if (slash && q && slash > q)
		slash = NULL;
	size_t blen = (size_t)((slash ? slash : q ? q : p + strlen(p)) - p);
	if (blen >= sizeof(s->bucket)) {
		rc = ws_fail(WS_ECONFIG, "sink %s: bucket name must be 3..63 characters", u);
		goto fail;
	}
	memcpy(s->bucket, p, blen);
	s->bucket[blen] = '\0';
	if ((problem = bucket_problem(s->bucket))) {
		rc = ws_fail(WS_ECONFIG, "sink %s: bucket name \"%s\" %s (S3's rules for bucket names)", u,
			     memchr(p, '@', blen) ? "(user info removed)" : s->bucket,
			     memchr(p, '@', blen) ? "must not hold user info (user:password@)" : problem);
		goto fail;
	}
	if (slash) {
		const char *pe = q ? q : slash + strlen(slash);
		const char *pstart = slash + 1;
		while (pe > pstart && pe[-1] == '/')
			pe--;
		if ((size_t)(pe - pstart) >= sizeof(s->prefix) / 2) {
			rc = ws_fail(WS_ECONFIG, "sink %s: prefix too long", u);
			goto fail;
		}
		memcpy(s->prefix, pstart, (size_t)(pe - pstart));
		s->prefix[pe - pstart] = '\0';
		if (s->prefix[0] && !ws_key_valid(s->prefix)) {
			rc = ws_fail(WS_ECONFIG, "sink %s: prefix \"%s\" is not a valid key path", u, s->prefix);
			goto fail;
		}
	}
	rc = ws_sigv4_creds_from_env(&s->creds);
	if (rc) {
		ws_fail_wrap(rc, "sink %s", u);
		goto fail;
	}
	/* The caller's defaults first: what the URL says overrides them. */
	if ((rc = apply_params(s, &ps, defaults, true)) != 0 || (rc = apply_params(s, &ps, q ? q + 1 : NULL, false)))
		goto fail;
	if (!ps.region_set && !region_ok(s->creds.region)) {
		rc = ws_fail(WS_ECONFIG, "sink %s: the region from AWS_REGION (or AWS_DEFAULT_REGION) must be "
			     "1..63 of a-z 0-9 - (like us-east-1)", u);
		goto fail;
	}
	if (s->endpoint[0]) {
		tls = !strncmp(s->endpoint, "https://", 8);
		s->path_style = true;
	} else {
		/* Virtual-hosted AWS: the host is made of the bucket and the
		 * region, both checked above, so it can only name AWS. */
		snprintf(s->endpoint, sizeof(s->endpoint), "https://%s.s3.%s.amazonaws.com", s->bucket,
			 s->creds.region);
		snprintf(s->host, sizeof(s->host), "%s.s3.%s.amazonaws.com", s->bucket, s->creds.region);
	}
	s->payload_unsigned = ps.payload_signing < 0 ? tls : ps.payload_signing == 0;
	if (s->payload_unsigned && !tls)
		ws_info("sink %s: payload signing: unsigned over plain http: PUT bodies are not covered by "
			"the signature (x-amz-content-sha256: UNSIGNED-PAYLOAD)", u);
	else
		ws_debug("sink %s: payload signing: %s", u, s->payload_unsigned ? "unsigned" : "signed");
	ps.ho.ca_file = ps.ca_file[0] ? ps.ca_file : NULL;
	ps.ho.insecure = ps.insecure;
	/* An attempt may run until the request's deadline (retry_deadline_ms)
	 * while it moves bytes: an object that takes longer than the client's
	 * own 30 s (a large artifact on a slow link) could otherwise never be
	 * sent, whatever the deadline. One that moves nothing for 30 s (a peer
	 * that accepted and went silent, a transfer hung mid-body) still ends
	 * then. */
	ps.ho.timeout_ms = s->deadline_ms > LONG_MAX ? LONG_MAX : (long)s->deadline_ms;
	ps.ho.low_speed_bytes = 1;
	ps.ho.low_speed_time_s = 30;
	s->http = ws_http_open(&ps.ho, &rc);
	if (!s->http)
		goto fail;
	if (s->pace && !(s->pacer = pacer_get(s->endpoint, s->bucket))) {
		rc = ws_fail(-ENOMEM, "sink %s: write pacer", u);
		goto fail;
	}
	/* Configured, or (auto) settled by the probe: now at open, or before the
	 * first compare-and-swap of a store opened without it. */
	s->if_match_known = s->etag_quotes >= 0;
	s->if_match_quoted = s->etag_quotes != 0;
	if (!s->conditional_writes)
		ws_warn("sink %s: conditional_writes=off: create-once and compare-and-swap are NOT enforced "
			"by the store; two owners of one stream will not be fenced", u);
	else if (!(flags & WS_STORE_EXISTING) && (rc = probe_conditional(s)) != 0)
		goto fail;
	*err = 0;
	return &s->base;
fail:
	if (s) {
		if (s->http)
			ws_http_close(s->http);
		pacer_put(s->pacer);
		explicit_bzero(&s->creds, sizeof(s->creds));
		free(s);
	}
	*err = rc;
	return NULL;
}

/* Create the bucket (tests and first-time setup). 409 "already owned by you" is success. */
int ws_store_s3_create_bucket(struct ws_store *base)
{
	struct s3_store *s = (struct s3_store *)base;
	struct s3_call c = { .method = "PUT", .key = "" };
	struct ws_buf body;
	char code[64];
	int rc;
	ws_buf_init(&body, 64u << 10);
	c.resp = &body;
	rc = s3_call(s, &c);
	if (rc == 0 && c.req.status != 200) {
		error_code(&body, code, sizeof(code));
		if (!(c.req.status == 409 && !strcmp(code, "BucketAlreadyOwnedByYou")))
			rc = status_error(s, &c, &body);
	}
	ws_buf_free(&body);
	return rc;
}
