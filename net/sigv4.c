/*
 * AWS Signature Version 4 (header form), over OpenSSL.
 *
 * The canonical request is built straight into out->canonical_request, so
 * every limit is the size of the buffer it lands in (WS_ETOOBIG past it)
 * and the inputs that need scratch space (query pairs, the normalised path)
 * are refused above WS_SIGV4_CREQ_MAX before anything is allocated.
 *
 * Two canonical URI rules, both from the AWS documentation:
 *   s3:      the path exactly as sent (each segment already encoded once by
 *            the caller); no normalisation, since "a/../b" and "a//b" are
 *            distinct S3 keys.
 *   generic: remove "." and ".." segments and empty segments, then encode
 *            each segment once more. The path as sent is already encoded
 *            once, so a sent "/a%20b" signs as "/a%2520b" ("encode twice");
 *            the AWS suite's .req files carry raw paths ("/example space/")
 *            and sign them as "/example%20space/", the same rule applied to
 *            an unencoded path.
 *
 * Secrets: the secret key, the derived keys and the signature never reach
 * ws_fail() or the log. Error details name the offending field, not its value.
 */
#include "ws_sigv4.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "ws_assert.h"
#include "ws_hash.h"

#define SIGV4_ALGO "AWS4-HMAC-SHA256"
/* Headers signed per request: the caller's plus up to four of our own. */
#define SIGV4_HEADERS_MAX 64
#define SIGV4_HEADER_NAME_MAX 128

/* Bounded string builder over a caller's fixed buffer; sticky overflow. */
struct sb {
	char *p;
	size_t len, cap;
	bool toobig;
};

static void sb_init(struct sb *b, char *p, size_t cap)
{
	WS_ASSERT(p && cap > 0); /* every builder writes into one of ws_sigv4_out's arrays */
	b->p = p;
	b->len = 0;
	b->cap = cap;
	b->toobig = false;
	p[0] = '\0';
}

static void sb_putn(struct sb *b, const char *s, size_t n)
{
	if (b->toobig || n >= b->cap - b->len) {
		b->toobig = true;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	WS_ASSERT(b->len < b->cap); /* room for the NUL, checked above */
	b->p[b->len] = '\0';
}

static void sb_puts(struct sb *b, const char *s)
{
	sb_putn(b, s, strlen(s));
}

static void sb_putc(struct sb *b, char c)
{
	sb_putn(b, &c, 1);
}

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.' || c == '~';
}

/* Encode into a builder (the shared core of ws_uri_encode). */
static void sb_uri_encode(struct sb *b, const char *in, size_t len, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		if (unreserved(c) || (c == '/' && keep_slash)) {
			sb_putc(b, (char)c);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };
			sb_putn(b, e, 3);
		}
	}
}

int ws_uri_encode(const char *in, size_t len, bool keep_slash, char *out, size_t cap)
{
	struct sb b;

	if (!in || !out || cap == 0)
		return ws_fail(-EINVAL, "uri encode: no input or output buffer");
	sb_init(&b, out, cap);
	sb_uri_encode(&b, in, len, keep_slash);
	if (b.toobig) {
		out[0] = '\0';
		return ws_fail(WS_ETOOBIG, "uri encode: %zu input bytes do not fit in %zu", len, cap);
	}
	return 0;
}

void ws_sha256_hex(const void *data, size_t len, char out[65])
{
	uint8_t md[WS_SHA256_LEN];
	ws_sha256(data, len, md);
	ws_hex(md, sizeof(md), out);
}

void ws_sigv4_amz_date(time_t t, char out[17])
{
	struct tm tm;
	if (!gmtime_r(&t, &tm) || strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm) != 16)
		memcpy(out, "19700101T000000Z", 17);
}

/*
 * Decode %XX escapes into out (at least len bytes). A '%' not followed by
 * two hex digits stays literal, so it re-encodes as %25: the server sees
 * the same bytes either way. '+' stays '+' (S3 does not read it as space).
 */
static size_t pct_decode(const char *in, size_t len, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		int hi, lo;
		if (in[i] == '%' && i + 2 < len && (hi = ws_hexval(in[i + 1])) >= 0 && (lo = ws_hexval(in[i + 2])) >= 0) {
			out[o++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			out[o++] = in[i];
		}
	}
	return o;
}

/* ---- validation ---- */

static bool digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static int num(const char *s, size_t n)
{
	int v = 0;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (s[i] - '0');
	return v;
}

static int check_amz_date(const char *d)
{
	if (strlen(d) != 16 || !digits(d, 8) || d[8] != 'T' || !digits(d + 9, 6) || d[15] != 'Z')
		return ws_fail(-EINVAL, "sigv4: amz_date is not YYYYMMDDTHHMMSSZ");
	int mon = num(d + 4, 2), day = num(d + 6, 2);
	int hh = num(d + 9, 2), mm = num(d + 11, 2), ss = num(d + 13, 2);
	if (mon < 1 || mon > 12 || day < 1 || day > 31 || hh > 23 || mm > 59 || ss > 60)
		return ws_fail(-EINVAL, "sigv4: amz_date out of range");
	return 0;
}

static int check_payload_hash(const char *h)
{
	if (strcmp(h, "UNSIGNED-PAYLOAD") == 0)
		return 0;
	if (strlen(h) != WS_SHA256_HEX_LEN)
		return ws_fail(-EINVAL, "sigv4: payload hash is neither 64 hex digits nor UNSIGNED-PAYLOAD");
	for (size_t i = 0; i < WS_SHA256_HEX_LEN; i++)
		if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
			return ws_fail(-EINVAL, "sigv4: payload hash is not lower-case hex");
	return 0;
}

/* A creds field must be NUL-terminated within its array; required ones non-empty. */
static int check_field(const char *f, size_t cap, bool required, const char *what)
{
	size_t n = strnlen(f, cap);
	if (n == cap)
		return ws_fail(-EINVAL, "sigv4: credentials %s is not terminated", what);
	if (required && n == 0)
		return ws_fail(-EINVAL, "sigv4: credentials %s is empty", what);
	return 0;
}

/* Values end up in a header line: CR, LF and NUL-like controls would split it. */
static bool value_ok(const char *v)
{
	for (; *v; v++) {
		unsigned char c = (unsigned char)*v;
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return false;
	}
	return true;
}

/*
 * The credential scope's parts (access key, region, service) go into the
 * Authorization header between '/' and ',' separators: a control byte
 * would split the header, a space, '/' or ',' would forge the scope.
 */
static bool scope_part_ok(const char *v)
{
	for (; *v; v++) {
		unsigned char c = (unsigned char)*v;
		if (c <= 0x20 || c == 0x7f || c == '/' || c == ',' || c == '=')
			return false;
	}
	return true;
}

/* RFC 7230 token characters. */
static bool name_ok(const char *n)
{
	if (!*n)
		return false;
	for (; *n; n++) {
		unsigned char c = (unsigned char)*n;
		if (!(isalnum(c) || strchr("!#$%&'*+-.^_`|~", c)))
			return false;
	}
	return true;
}

/* ---- canonical headers ---- */

struct hdr {
	char name[SIGV4_HEADER_NAME_MAX]; /* lower-cased */
	const char *value;
	size_t order; /* input position: same-name values join in sent order */
};

static int hdr_cmp(const void *a, const void *b)
{
	const struct hdr *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* Trim both ends and fold inner runs of blanks to one space. */
static void sb_put_folded(struct sb *b, const char *v)
{
	bool pending_space = false, started = false;
	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			pending_space = started;
			continue;
		}
		if (pending_space)
			sb_putc(b, ' ');
		pending_space = false;
		started = true;
		sb_putc(b, *v);
	}
}

static const char *const reserved_headers[] = {
	"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token",
};

static int add_hdr(struct hdr *h, size_t *count, const char *name, const char *value)
{
	size_t n = strlen(name);
	struct hdr *e;

	if (*count >= SIGV4_HEADERS_MAX)
		return ws_fail(WS_ETOOBIG, "sigv4: more than %d headers to sign", SIGV4_HEADERS_MAX);
	if (n >= SIGV4_HEADER_NAME_MAX)
		return ws_fail(WS_ETOOBIG, "sigv4: header name longer than %d", SIGV4_HEADER_NAME_MAX - 1);
	e = &h[*count];
	WS_ASSERT(n < sizeof(e->name)); /* the name and its NUL fit (checked above) */
	for (size_t i = 0; i <= n; i++)
		e->name[i] = (char)tolower((unsigned char)name[i]);
	e->value = value;
	e->order = *count;
	(*count)++;
	return 0;
}

static int collect_headers(const struct ws_sigv4_creds *creds, const struct ws_sigv4_request *req,
			   struct hdr *h, size_t *count)
{
	int rc;

	*count = 0;
	if (req->header_count && !req->headers)
		return ws_fail(-EINVAL, "sigv4: header_count %zu with no headers", req->header_count);
	for (size_t i = 0; i < req->header_count; i++) {
		const struct ws_sigv4_header *x = &req->headers[i];
		if (!x->name || !x->value)
			return ws_fail(-EINVAL, "sigv4: header %zu has no name or value", i);
		if (!name_ok(x->name))
			return ws_fail(-EINVAL, "sigv4: header %zu has a malformed name", i);
		if (!value_ok(x->value))
			return ws_fail(-EINVAL, "sigv4: header '%.64s' has a control character in its value",
				       x->name);
		/* Ours are added below; a second copy would be joined into one signed value. */
		for (size_t r = 0; r < sizeof(reserved_headers) / sizeof(reserved_headers[0]); r++)
			if (strcasecmp(x->name, reserved_headers[r]) == 0)
				return ws_fail(-EINVAL, "sigv4: header '%s' is set by the signer, not the caller",
					       reserved_headers[r]);
		if ((rc = add_hdr(h, count, x->name, x->value)))
			return rc;
	}
	if ((rc = add_hdr(h, count, "host", req->host)) || (rc = add_hdr(h, count, "x-amz-date", req->amz_date)))
		return rc;
	if (req->sign_content_sha256 &&
	    (rc = add_hdr(h, count, "x-amz-content-sha256", req->payload_sha256_hex)))
		return rc;
	if (creds->session_token[0] &&
	    (rc = add_hdr(h, count, "x-amz-security-token", creds->session_token)))
		return rc;
	qsort(h, *count, sizeof(*h), hdr_cmp);
	return 0;
}

/* "name:v1,v2\n" lines into creq; "a;b;c" into signed. */
static void put_headers(struct sb *creq, struct sb *signed_hdrs, const struct hdr *h, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		bool first = i == 0 || strcmp(h[i].name, h[i - 1].name) != 0;
		bool last = i + 1 == count || strcmp(h[i].name, h[i + 1].name) != 0;
		if (first) {
			if (signed_hdrs->len)
				sb_putc(signed_hdrs, ';');
			sb_puts(signed_hdrs, h[i].name);
			sb_puts(creq, h[i].name);
			sb_putc(creq, ':');
		} else {
			sb_putc(creq, ',');
		}
		sb_put_folded(creq, h[i].value);
		if (last)
			sb_putc(creq, '\n');
	}
}

/* ---- canonical URI ---- */

static int put_uri(struct sb *creq, const char *path, bool s3)
{
	size_t len = strlen(path);
	char *norm = NULL;
	size_t n = 0;
	bool trailing;

	if (path[0] != '/')
		return ws_fail(-EINVAL, "sigv4: path does not start with '/'");
	if (len > WS_SIGV4_CREQ_MAX)
		return ws_fail(WS_ETOOBIG, "sigv4: path of %zu bytes", len);
	if (s3) {
		for (size_t i = 0; i < len; i++) {
			unsigned char c = (unsigned char)path[i];
			if (c <= 0x20 || c >= 0x7f || c == '?' || c == '#')
				return ws_fail(-EINVAL, "sigv4: s3 path byte %zu is not URI-encoded", i);
		}
		sb_putn(creq, path, len);
		return 0;
	}

	/* Remove dot and empty segments into norm ("/a/b"), then encode it. */
	norm = malloc(len + 2);
	if (!norm)
		return ws_fail(-ENOMEM, "sigv4: path buffer");
	trailing = false;
	for (size_t i = 0; i < len;) {
		size_t j = i;
		while (j < len && path[j] != '/')
			j++;
		size_t seg = j - i;
		const char *s = path + i;
		if (seg == 0 || (seg == 1 && s[0] == '.')) {
			trailing = true;
		} else if (seg == 2 && s[0] == '.' && s[1] == '.') {
			while (n > 0 && norm[--n] != '/')
				;
			trailing = true;
		} else {
			norm[n++] = '/';
			memcpy(norm + n, s, seg);
			n += seg;
			/* Kept segments and their slashes never outgrow the path. */
			WS_ASSERT(n <= len + 1);
			trailing = false;
		}
		i = j + 1;
		if (j == len - 1) /* path ends in '/' */
			trailing = true;
	}
	if (n == 0 || trailing)
		norm[n++] = '/';
	WS_ASSERT(n <= len + 2); /* norm's size */
	sb_uri_encode(creq, norm, n, true);
	free(norm);
	return 0;
}

/* ---- canonical query ---- */

struct qpair {
	const char *name, *value; /* encoded, NUL-terminated, in the scratch buffer */
};

static int qpair_cmp(const void *a, const void *b)
{
	const struct qpair *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->value, y->value);
}

/* Decode then encode one name or value into scratch; returns its start. */
static const char *requote(struct sb *scratch, char *tmp, const char *s, size_t len)
{
	const char *start = scratch->p + scratch->len;
	size_t d = pct_decode(s, len, tmp);
	sb_uri_encode(scratch, tmp, d, false);
	sb_putc(scratch, '\0');
	return start;
}

static int put_query(struct sb *creq, const char *query)
{
	size_t len = query ? strlen(query) : 0;
	size_t npairs = 1, count = 0;
	struct qpair *pairs = NULL;
	char *scratch_mem = NULL, *tmp = NULL;
	struct sb scratch;
	int rc = 0;

	if (len == 0)
		return 0;
	if (len > WS_SIGV4_CREQ_MAX)
		return ws_fail(WS_ETOOBIG, "sigv4: query of %zu bytes", len);
	for (size_t i = 0; i < len; i++)
		npairs += query[i] == '&';
	pairs = calloc(npairs, sizeof(*pairs));
	/* Each input byte encodes to at most 3; plus two NULs per pair. */
	scratch_mem = malloc(3 * len + 2 * npairs + 1);
	tmp = malloc(len + 1);
	if (!pairs || !scratch_mem || !tmp) {
		rc = ws_fail(-ENOMEM, "sigv4: query buffers");
		goto fail;
	}
	sb_init(&scratch, scratch_mem, 3 * len + 2 * npairs + 1);

	for (size_t i = 0; i < len;) {
		size_t j = i, eq;
		while (j < len && query[j] != '&')
			j++;
		if (j > i) { /* "a=1&&b=2": an empty piece names nothing */
			eq = i;
			while (eq < j && query[eq] != '=')
				eq++;
			pairs[count].name = requote(&scratch, tmp, query + i, eq - i);
			pairs[count].value = eq < j ? requote(&scratch, tmp, query + eq + 1, j - eq - 1)
						    : requote(&scratch, tmp, "", 0);
			count++;
		}
		i = j + 1;
	}
	/* Sized for the worst case above; overflow here is a bug, not input. */
	if (scratch.toobig) {
		rc = ws_fail(WS_ETOOBIG, "sigv4: query scratch overflow");
		goto fail;
	}
	qsort(pairs, count, sizeof(*pairs), qpair_cmp);
	for (size_t i = 0; i < count; i++) {
		if (i)
			sb_putc(creq, '&');
		sb_puts(creq, pairs[i].name);
		sb_putc(creq, '=');
		sb_puts(creq, pairs[i].value);
	}
fail:
	free(tmp);
	free(scratch_mem);
	free(pairs);
	return rc;
}

/* ---- signing ---- */

static int hmac256(const void *key, size_t key_len, const void *msg, size_t msg_len, uint8_t out[32])
{
	unsigned int out_len = 32;
	if (!HMAC(EVP_sha256(), key, (int)key_len, msg, msg_len, out, &out_len) || out_len != 32)
		return ws_fail(-EIO, "sigv4: HMAC-SHA256 failed in OpenSSL");
	return 0;
}

static int derive_signature(const struct ws_sigv4_creds *creds, const char *date8, const char *sts,
			    char sig_hex[65])
{
	char k0[4 + sizeof(creds->secret_key)];
	uint8_t ka[32], kb[32], sig[32];
	size_t slen = strlen(creds->secret_key);
	int rc;

	/* kDate -> kRegion -> kService -> kSigning, never hashing into the key being read. */
	memcpy(k0, "AWS4", 4);
	memcpy(k0 + 4, creds->secret_key, slen);
	rc = hmac256(k0, 4 + slen, date8, 8, ka);
	if (!rc)
		rc = hmac256(ka, 32, creds->region, strlen(creds->region), kb);
	if (!rc)
		rc = hmac256(kb, 32, creds->service, strlen(creds->service), ka);
	if (!rc)
		rc = hmac256(ka, 32, "aws4_request", 12, kb);
	if (!rc)
		rc = hmac256(kb, 32, sts, strlen(sts), sig);
	if (!rc)
		ws_hex(sig, 32, sig_hex);
	/* Key material does not outlive the call on the stack. */
	OPENSSL_cleanse(k0, sizeof(k0));
	OPENSSL_cleanse(ka, sizeof(ka));
	OPENSSL_cleanse(kb, sizeof(kb));
	OPENSSL_cleanse(sig, sizeof(sig));
	return rc;
}

static void clear_out(struct ws_sigv4_out *out)
{
	out->authorization[0] = '\0';
	out->canonical_request[0] = '\0';
	out->string_to_sign[0] = '\0';
	out->signature[0] = '\0';
	out->signed_headers[0] = '\0';
}

int ws_sigv4_sign(const struct ws_sigv4_creds *creds, const struct ws_sigv4_request *req,
		  struct ws_sigv4_out *out)
{
	struct hdr hdrs[SIGV4_HEADERS_MAX];
	size_t hdr_count = 0;
	struct sb creq, sh, sts, auth;
	char creq_hash[65], date8[9];
	int rc;

	if (!creds || !req || !out)
		return ws_fail(-EINVAL, "sigv4: missing creds, request or output");
	clear_out(out);
	if ((rc = check_field(creds->access_key, sizeof(creds->access_key), true, "access_key")) ||
	    (rc = check_field(creds->secret_key, sizeof(creds->secret_key), true, "secret_key")) ||
	    (rc = check_field(creds->session_token, sizeof(creds->session_token), false, "session_token")) ||
	    (rc = check_field(creds->region, sizeof(creds->region), true, "region")) ||
	    (rc = check_field(creds->service, sizeof(creds->service), true, "service")))
		return rc;
	if (!value_ok(creds->session_token))
		return ws_fail(-EINVAL, "sigv4: session token has a control character");
	if (!scope_part_ok(creds->access_key) || !scope_part_ok(creds->region) || !scope_part_ok(creds->service))
		return ws_fail(-EINVAL, "sigv4: access key, region or service has a control character, a space, "
			       "'/', ',' or '='");
	if (!req->method || !req->method[0] || !name_ok(req->method))
		return ws_fail(-EINVAL, "sigv4: missing or malformed method");
	if (!req->host || !req->host[0] || !value_ok(req->host))
		return ws_fail(-EINVAL, "sigv4: missing or malformed host");
	if (!req->path || !req->path[0])
		return ws_fail(-EINVAL, "sigv4: missing path");
	if (!req->payload_sha256_hex)
		return ws_fail(-EINVAL, "sigv4: missing payload hash");
	if (!req->amz_date)
		return ws_fail(-EINVAL, "sigv4: missing amz_date");
	if ((rc = check_amz_date(req->amz_date)) || (rc = check_payload_hash(req->payload_sha256_hex)))
		return rc;
	if ((rc = collect_headers(creds, req, hdrs, &hdr_count)))
		return rc;

	sb_init(&creq, out->canonical_request, sizeof(out->canonical_request));
	sb_init(&sh, out->signed_headers, sizeof(out->signed_headers));
	sb_puts(&creq, req->method);
	sb_putc(&creq, '\n');
	if ((rc = put_uri(&creq, req->path, req->s3)))
		goto fail;
	sb_putc(&creq, '\n');
	if ((rc = put_query(&creq, req->query)))
		goto fail;
	sb_putc(&creq, '\n');
	put_headers(&creq, &sh, hdrs, hdr_count);
	sb_putc(&creq, '\n');
	sb_puts(&creq, out->signed_headers);
	sb_putc(&creq, '\n');
	sb_puts(&creq, req->payload_sha256_hex);
	if (creq.toobig || sh.toobig) {
		rc = ws_fail(WS_ETOOBIG, "sigv4: %s exceeds %zu bytes",
			     creq.toobig ? "canonical request" : "signed header list",
			     creq.toobig ? sizeof(out->canonical_request) : sizeof(out->signed_headers));
		goto fail;
	}

	/* The canonical request stands whole in its buffer, NUL-terminated. */
	WS_ASSERT(creq.len < sizeof(out->canonical_request) && creq.p[creq.len] == '\0');
	WS_ASSERT(sh.len < sizeof(out->signed_headers));
	memcpy(date8, req->amz_date, 8);
	date8[8] = '\0';
	ws_sha256_hex(creq.p, creq.len, creq_hash);
	sb_init(&sts, out->string_to_sign, sizeof(out->string_to_sign));
	sb_puts(&sts, SIGV4_ALGO "\n");
	sb_puts(&sts, req->amz_date);
	sb_putc(&sts, '\n');
	sb_puts(&sts, date8);
	sb_putc(&sts, '/');
	sb_puts(&sts, creds->region);
	sb_putc(&sts, '/');
	sb_puts(&sts, creds->service);
	sb_puts(&sts, "/aws4_request\n");
	sb_puts(&sts, creq_hash);
	if (sts.toobig) {
		rc = ws_fail(WS_ETOOBIG, "sigv4: string to sign exceeds %zu bytes", sizeof(out->string_to_sign));
		goto fail;
	}

	if ((rc = derive_signature(creds, date8, out->string_to_sign, out->signature)))
		goto fail;

	sb_init(&auth, out->authorization, sizeof(out->authorization));
	sb_puts(&auth, SIGV4_ALGO " Credential=");
	sb_puts(&auth, creds->access_key);
	sb_putc(&auth, '/');
	sb_puts(&auth, date8);
	sb_putc(&auth, '/');
	sb_puts(&auth, creds->region);
	sb_putc(&auth, '/');
	sb_puts(&auth, creds->service);
	sb_puts(&auth, "/aws4_request, SignedHeaders=");
	sb_puts(&auth, out->signed_headers);
	sb_puts(&auth, ", Signature=");
	sb_puts(&auth, out->signature);
	if (auth.toobig) {
		rc = ws_fail(WS_ETOOBIG, "sigv4: authorization header exceeds %zu bytes",
			     sizeof(out->authorization));
		goto fail;
	}
	return 0;

fail:
	/* No half-built output (and no signature) survives a failure. */
	OPENSSL_cleanse(out->signature, sizeof(out->signature));
	clear_out(out);
	return rc;
}

/* ---- environment ---- */

static int env_copy(char *dst, size_t cap, const char *var, bool required)
{
	const char *v = getenv(var);
	size_t n;

	if (!v || !*v) {
		if (required)
			return ws_fail(WS_ECONFIG, "credentials: %s is not set", var);
		dst[0] = '\0';
		return 0;
	}
	n = strlen(v);
	if (n >= cap)
		return ws_fail(WS_ECONFIG, "credentials: %s is longer than %zu bytes", var, cap - 1);
	memcpy(dst, v, n + 1);
	return 0;
}

int ws_sigv4_creds_from_env(struct ws_sigv4_creds *out)
{
	int rc;

	if (!out)
		return ws_fail(-EINVAL, "credentials: no output");
	memset(out, 0, sizeof(*out));
	if ((rc = env_copy(out->access_key, sizeof(out->access_key), "AWS_ACCESS_KEY_ID", true)) ||
	    (rc = env_copy(out->secret_key, sizeof(out->secret_key), "AWS_SECRET_ACCESS_KEY", true)) ||
	    (rc = env_copy(out->session_token, sizeof(out->session_token), "AWS_SESSION_TOKEN", false)) ||
	    (rc = env_copy(out->region, sizeof(out->region), "AWS_REGION", false)))
		goto fail;
	if (!out->region[0] &&
	    (rc = env_copy(out->region, sizeof(out->region), "AWS_DEFAULT_REGION", false)))
		goto fail;
	if (!out->region[0])
		memcpy(out->region, "us-east-1", sizeof("us-east-1"));
	memcpy(out->service, "s3", sizeof("s3"));
	return 0;
fail:
	OPENSSL_cleanse(out, sizeof(*out));
	return rc;
}
