/*
 * The s3:// URL (store_s3.c's header says what it holds): its bucket,
 * prefix and parameters, all checked at open before any request, and the
 * write pacer shared by the process's handles on one endpoint and bucket.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "ws_clock.h"
#include "ws_hash.h"
#include "ws_logging.h"
#include "ws_assert.h"
#include "s3_internal.h"

/* ---- write pacing (ws_pacer.h), one per endpoint and bucket ------------- */

static pthread_mutex_t pacers_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shared_pacer *pacers;

struct shared_pacer *s3_pacer_get(const char *endpoint, const char *bucket)
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
		sp->if_match_form = -1;
		sp->next = pacers;
		pacers = sp;
	}
	if (sp)
		sp->refs++;
	WS_ASSERT(!sp || sp->refs > 0); /* (no wrap: one ref per open handle) */
	pthread_mutex_unlock(&pacers_mu);
	return sp;
}

void s3_pacer_put(struct shared_pacer *sp)
{
	if (!sp)
		return;
	pthread_mutex_lock(&pacers_mu);
	/* Every put pairs with the get of the same handle. */
	WS_ASSERT(sp->refs > 0);
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

int s3_pacer_if_match(struct shared_pacer *sp)
{
	int form;
	pthread_mutex_lock(&pacers_mu);
	form = sp->if_match_form;
	pthread_mutex_unlock(&pacers_mu);
	return form;
}

void s3_pacer_set_if_match(struct shared_pacer *sp, bool quoted)
{
	pthread_mutex_lock(&pacers_mu);
	sp->if_match_form = quoted ? 1 : 0;
	pthread_mutex_unlock(&pacers_mu);
}

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
	WS_ASSERT(o < cap); /* room for the NUL: every write above stops short of cap */
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
 * multipart_threshold_bytes or multipart_part_bytes: a whole number of
 * bytes, or of KiB, MiB or GiB with that suffix, from S3's least part
 * (5 MiB) to its largest single PUT (5 GiB). WS_ECONFIG naming it.
 */
static int apply_size(struct s3_store *s, const char *name, const char *value, const char *who)
{
	static const char *const units[] = { "", "KiB", "MiB", "GiB" };
	char *end;
	unsigned long long v = strtoull(value, &end, 10);
	int u = -1;

	for (int i = 0; i < 4; i++)
		if (!strcmp(end, units[i]))
			u = i;
	if (!isdigit((unsigned char)value[0]) || u < 0 || v > WS_S3_PART_BYTES_MAX ||
	    (v << (10 * u)) < WS_S3_PART_BYTES_MIN || (v << (10 * u)) > WS_S3_PART_BYTES_MAX)
		return ws_fail(WS_ECONFIG, "sink %s: %s=%s%s is not a size from 5MiB to 5GiB (bytes, or a number "
			       "with KiB, MiB or GiB)", s->base.url, name, value, who);
	if (!strcmp(name, "multipart_threshold_bytes"))
		s->mp_threshold = (uint64_t)v << (10 * u);
	else
		s->part_bytes = (uint64_t)v << (10 * u);
	return 0;
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
		} else if (!strcmp(name, "multipart_threshold_bytes") || !strcmp(name, "multipart_part_bytes")) {
			if (apply_size(s, name, value, who))
				return WS_ECONFIG;
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
	s->mp_threshold = (uint64_t)64 << 20;
	s->part_bytes = (uint64_t)16 << 20;
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
	if (s->pace && !(s->pacer = s3_pacer_get(s->endpoint, s->bucket))) {
		rc = ws_fail(-ENOMEM, "sink %s: write pacer", u);
		goto fail;
	}
	/* Configured, or (auto) settled by the probe: now at open, or before the
	 * first compare-and-swap of a store opened without it. */
	s->if_match_known = s->etag_quotes >= 0;
	s->if_match_quoted = s->etag_quotes != 0;
	s->base.conditions_off = !s->conditional_writes;
	if (!s->conditional_writes)
		ws_warn("sink %s: conditional_writes=off: create-once and compare-and-swap are NOT enforced "
			"by the store; two owners of one stream will not be fenced", u);
	else if (!(flags & WS_STORE_EXISTING) && (rc = s3_probe_conditional(s)) != 0)
		goto fail;
	*err = 0;
	return &s->base;
fail:
	if (s) {
		if (s->http)
			ws_http_close(s->http);
		s3_pacer_put(s->pacer);
		explicit_bzero(&s->creds, sizeof(s->creds));
		free(s);
	}
	*err = rc;
	return NULL;
}
