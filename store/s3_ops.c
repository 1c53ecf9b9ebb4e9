/*
 * The s3:// backend's operations (store_s3.c describes the backend): HEAD,
 * PUT with its conditions and the 412 that may answer our own earlier
 * attempt, ranged GET, DELETE, the conditional-write probe, and the ops
 * table. Each is one s3_call (store_s3.c); listing is in s3_list.c.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ws_clock.h"
#include "ws_logging.h"
#include "ws_assert.h"
#include "ws_fault.h"
#include "s3_internal.h"

/* ---- ops ----------------------------------------------------------------- */

void ws_s3_head_info(const struct ws_http_req *r, struct ws_obj_info *info, char *attempt, size_t attempt_cap)
{
	const char *v;
	if (info) {
		memset(info, 0, sizeof(*info));
		info->size_bytes = r->content_length >= 0 ? (uint64_t)r->content_length : 0;
		s3_reply_etag(r, &info->etag);
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
		return s3_status_error(s, &c, NULL);
	/* Only where the size is read: the HEADs that settle a 412 or read
	 * an etag need none, and HTTP lets a HEAD omit it. */
	if (need_size && c.req.content_length < 0)
		return ws_fail(-EPROTO, "s3 %s: HEAD %s: the store's answer has no Content-Length: the object's "
			       "size is unknown", s->base.url, key);
	ws_s3_head_info(&c.req, info, attempt, attempt_cap);
	return 0;
}

int s3_head_attempt(struct s3_store *s, const char *key, struct ws_obj_info *info, char *attempt, size_t cap,
		    uint64_t within_ms)
{
	return s3_head_raw(s, key, info, attempt, cap, within_ms, false);
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

/*
 * Check a PUT and set op up for s3_call (nothing is sent). op->err_body is
 * always safe to free afterwards. Errors: -EINVAL (bad key, CAS without an
 * etag), WS_EPRECOND (CAS against an empty etag).
 */
int s3_put_begin(struct s3_store *s, struct s3_put_op *op, const char *key, const struct iovec *iov,
		 int iovcnt, enum ws_put_mode mode, const struct ws_etag *expect)
{
	struct s3_call *c = &op->c;
	uint64_t len = 0;

	memset(op, 0, sizeof(*op));
	if (!ws_key_valid(key))
		return ws_fail(-EINVAL, "s3 %s: invalid key \"%s\"", s->base.url, key ? key : "(null)");
	if (mode == WS_PUT_CAS && expect && expect->too_long)
		return s3_etag_too_long(s, "", key, expect);
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
	/* 64 random bits: a writer taking another's token for its own is a
	 * 2^-64 chance per 412; 16 more hex digits on every PUT buy nothing. */
	snprintf(op->token, sizeof(op->token), "%016" PRIx64, s3_rnd64(s));
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
	WS_ASSERT(c->extra_count <= sizeof(c->extra) / sizeof(c->extra[0]));
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
int s3_put_end(struct s3_store *s, struct s3_put_op *op, struct ws_etag *out_etag)
{
	const struct s3_call *c = &op->c;

	/* 200 as S3 answers, or 201 and 204 as HTTP allows; never 202, which
	 * says the write is only accepted for later. */
	if (c->req.status == 200 || c->req.status == 201 || c->req.status == 204) {
		if (out_etag) {
			s3_reply_etag(&c->req, out_etag);
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
	return s3_status_error(s, c, &op->err_body);
}

static int s3_put(struct ws_store *base, const char *key, const struct iovec *iov, int iovcnt,
		  enum ws_put_mode mode, const struct ws_etag *expect, struct ws_etag *out_etag)
{
	struct s3_store *s = (struct s3_store *)base;
	struct s3_put_op op;
	int rc;

	if (mode == WS_PUT_CAS && s->conditional_writes && !s->if_match_known) {
		/* Opened without the probe (WS_STORE_EXISTING): which If-Match form
		 * works is learnt before the first compare-and-swap needs it, from
		 * the probe another open handle of this process made on the same
		 * endpoint and bucket if there was one (a shard's tail lanes: each
		 * probe is five or six writes, which a store that throttles
		 * writes counts against its rate like any other), else by its own. */
		int form = s->pacer ? s3_pacer_if_match(s->pacer) : -1;
		if (form >= 0) {
			s->if_match_quoted = form == 1;
			s->if_match_known = true;
			ws_debug("s3 %s: If-Match etags %s, as a probe of this process found", s->base.url,
				 form ? "quoted" : "bare");
		} else if ((rc = s3_probe_conditional(s)) != 0) {
			return rc;
		}
	}
	if (mode != WS_PUT_CAS && ws_key_valid(key)) {
		uint64_t len = 0;
		for (int i = 0; i < iovcnt; i++)
			len += iov[i].iov_len;
		/* Above the threshold, in parts (s3_multipart.c): a swap is
		 * never that large (the checkpoint head, watermarks). */
		if (len > s->mp_threshold)
			return s3_multipart_put(s, key, iov, iovcnt, len, mode, out_etag);
	}
	rc = s3_put_begin(s, &op, key, iov, iovcnt, mode, expect);
	if (rc == 0)
		rc = s3_call(s, &op.c);
	if (rc == 0)
		rc = s3_put_end(s, &op, out_etag);
	ws_buf_free(&op.err_body);
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
	WS_ASSERT(out->len >= len0); /* the call only appends to out */
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
		WS_ASSERT(off + keep <= got || keep == 0); /* the range kept lies in what came */
		if (keep && off)
			memmove(out->data + len0, out->data + len0 + off, (size_t)keep);
		out->len = len0 + (size_t)keep;
	}
	if (info) {
		memset(info, 0, sizeof(*info));
		s3_reply_etag(&c->req, &info->etag);
		info->size_bytes = total;
	}
	return 0;
}

/*
 * A GET's final status and body (out from len0 on): 200, or 206 where
 * partial_ok, with as many bytes as its Content-Length says. Anything
 * else is the error it names, and out is left as it was.
 */
static int get_body_check(struct s3_store *s, const struct s3_call *c, struct ws_buf *out, size_t len0,
			  bool partial_ok)
{
	if (c->req.status != 200 && !(partial_ok && c->req.status == 206)) {
		struct ws_buf tmp = *out;
		tmp.data += len0;
		tmp.len -= len0;
		int rc = s3_status_error(s, c, &tmp);
		out->len = len0;
		return rc;
	}
	if (c->req.content_length >= 0 && out->len - len0 != (uint64_t)c->req.content_length) {
		size_t got = out->len - len0;
		out->len = len0;
		return ws_fail(-EIO, "s3 %s: %s: body is %zu bytes, Content-Length says %" PRId64, s->base.url,
			       c->key, got, c->req.content_length);
	}
	return 0;
}

/* A ranged GET's Range header into h (cap bytes), on c; none for a whole object. */
static void get_range_header(struct s3_call *c, uint64_t off, uint64_t len, char *h, size_t cap)
{
	if (off == 0 && len == UINT64_MAX)
		return;
	if (len == UINT64_MAX || off + len < off)
		snprintf(h, cap, "Range: bytes=%" PRIu64 "-", off);
	else
		snprintf(h, cap, "Range: bytes=%" PRIu64 "-%" PRIu64, off, off + len - 1);
	c->extra[c->extra_count++] = h;
}

/* The outcome of a GET of len bytes at off whose call ended with a final status. */
static int get_end(struct s3_store *s, const struct s3_call *c, uint64_t off, uint64_t len, struct ws_buf *out,
		   size_t len0, struct ws_obj_info *info)
{
	int rc;
	if (c->req.status == 416) {
		/* The range starts past the end: nothing there, like the file store. */
		out->len = len0;
		if (!info)
			return 0;
		rc = s3_head_raw(s, c->key, info, NULL, 0, c->deadline_ms, true);
		if (rc == WS_ENOTFOUND)
			return ws_fail(rc, "s3 %s: %s: no such object", s->base.url, c->key);
		return rc;
	}
	rc = get_body_check(s, c, out, len0, true);
	if (rc)
		return rc;
	return get_range_check(s, c, c->key, off, len, out, len0, info);
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
	get_range_header(&c, off, len, h_range, sizeof(h_range));
	rc = s3_call(s, &c);
	if (rc)
		return rc;
	return get_end(s, &c, off, len, out, len0, info);
}

struct get_op {
	struct s3_call c;
	char h_range[96];
	size_t len0;
};

/*
 * n ranged GETs at once over the store's connections (s3_call_many), each
 * judged as s3_get judges its one. A request for nothing, or with a bad
 * key, is s3_get's (a HEAD, or its error) on its own.
 */
static int s3_get_many(struct ws_store *base, struct ws_get_req *reqs, size_t n)
{
	struct s3_store *s = (struct s3_store *)base;
	struct get_op *ops = calloc(n, sizeof(*ops));
	struct s3_call **calls = calloc(n, sizeof(*calls));
	int *rcs = calloc(n, sizeof(*rcs));
	size_t *back = calloc(n, sizeof(*back)), m = 0;
	int rc = 0;

	if (!ops || !calls || !rcs || !back) {
		rc = ws_fail(-ENOMEM, "s3 %s: %zu ranged reads at once", base->url, n);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct ws_get_req *r = &reqs[i];
		if (r->len == 0 || !ws_key_valid(r->key)) {
			r->rc = s3_get(base, r->key, r->off, r->len, r->out, NULL);
			continue;
		}
		ops[i].c = (struct s3_call){ .method = "GET", .key = r->key, .resp = r->out, .framed = true };
		ops[i].len0 = r->out->len;
		get_range_header(&ops[i].c, r->off, r->len, ops[i].h_range, sizeof(ops[i].h_range));
		back[m] = i;
		calls[m++] = &ops[i].c;
	}
	rc = s3_call_many(s, calls, rcs, m);
	for (size_t j = 0; j < m; j++) {
		struct ws_get_req *r = &reqs[back[j]];
		r->rc = rcs[j] ? rcs[j] : get_end(s, calls[j], r->off, r->len, r->out, ops[back[j]].len0, NULL);
	}
out:
	free(ops);
	free(calls);
	free(rcs);
	free(back);
	return rc;
}

/*
 * A whole-object GET with If-None-Match on the etag the caller holds: 304
 * when it is still that one (no body), else the object and its new etag.
 */
static int s3_get_changed(struct ws_store *base, const char *key, struct ws_etag *tag, struct ws_buf *out)
{
	struct s3_store *s = (struct s3_store *)base;
	char h_cond[WS_ETAG_MAX + 32];
	struct s3_call c = { .method = "GET", .key = key, .resp = out, .framed = true };
	size_t len0 = out->len;
	int rc;

	if (!ws_key_valid(key))
		return ws_fail(-EINVAL, "s3 %s: invalid key \"%s\"", base->url, key);
	if (tag->s[0]) {
		snprintf(h_cond, sizeof(h_cond), s->if_match_quoted ? "If-None-Match: \"%s\"" : "If-None-Match: %s",
			 tag->s);
		c.extra[c.extra_count++] = h_cond;
	}
	rc = s3_call(s, &c);
	if (rc)
		return rc;
	if (c.req.status == 304) {
		out->len = len0;
		return 1;
	}
	rc = get_body_check(s, &c, out, len0, false);
	if (rc == 0)
		s3_reply_etag(&c.req, tag);
	return rc;
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
	return s3_status_error(s, &c, NULL);
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
int s3_probe_conditional(struct s3_store *s)
{
	char key[96], why[2][160];
	struct ws_etag cur, prev, got;
	unsigned n = 0;
	int forms[2], nforms = 0, rc, chosen = -1;

	snprintf(key, sizeof(key), "_walship/probe-%016" PRIx64, s3_rnd64(s));
	rc = probe_put(s, key, ++n, WS_PUT_CREATE, NULL, &cur);
	if (rc)
		return ws_fail_wrap(rc, "conditional-write probe");
	/* A process killed here leaves the probe: core/probes.c removes it once stale. */
	if ((rc = WS_FAULT("s3.probe.after_create")) != 0) {
		rc = ws_fail(rc, "fault s3.probe.after_create at %s", key);
		goto out;
	}
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
	if (s->pacer)
		s3_pacer_set_if_match(s->pacer, chosen == 1);
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
		s3_error_code(&body, code, sizeof(code));
		if (!(c.req.status == 409 && !strcmp(code, "BucketAlreadyOwnedByYou")))
			rc = s3_status_error(s, &c, &body);
	}
	ws_buf_free(&body);
	return rc;
}

static void s3_close(struct ws_store *base)
{
	struct s3_store *s = (struct s3_store *)base;
	ws_http_close(s->http);
	s3_pacer_put(s->pacer);
	explicit_bzero(&s->creds, sizeof(s->creds));
	free(s);
}

static bool s3_pressed(struct ws_store *base)
{
	struct s3_store *s = (struct s3_store *)base;
	return s->pacer && ws_pacer_pressed(&s->pacer->p, ws_mono_ms());
}

const struct ws_store_ops s3_ops = {
	.put = s3_put,
	.get = s3_get,
	.get_changed = s3_get_changed,
	.head = s3_head,
	.list = s3_list,
	.del = s3_del,
	.del_many = s3_del_many,
	.put_many = s3_put_many,
	.get_many = s3_get_many,
	.pressed = s3_pressed,
	.close = s3_close,
	.kind = WS_STORE_S3,
};
