/*
 * The s3:// backend's multipart upload: an object larger than the store
 * takes in one PUT (5 GiB on AWS S3 and radosgw's default
 * rgw_max_put_size) goes up in parts. s3_put sends an object of more than
 * multipart_threshold_bytes this way (store_s3.c lists the parameters):
 *
 *   CreateMultipartUpload    POST key?uploads          -> <UploadId>
 *   UploadPart  1..N         PUT  key?partNumber=i&uploadId=U, a few at once
 *   CompleteMultipartUpload  POST key?uploadId=U       <- every part's ETag
 *   AbortMultipartUpload     DELETE key?uploadId=U     on any failure
 *
 * Parts are multipart_part_bytes long (the last one shorter), raised in
 * whole MiB until N <= 10,000 (S3's most). Each part is an s3_call of its
 * own: hashed for x-amz-content-sha256 as a PUT's body is (or sent
 * UNSIGNED-PAYLOAD), retried, throttled and paced as a PUT is, and sent from
 * the caller's iovecs (a mapped file): nothing is copied, and at most
 * MP_WINDOW parts are on the wire at a time.
 *
 * Any failure after the upload was created aborts it, so no parts stay
 * stored (and billed); an abort that itself fails is logged with the
 * upload's id, and the store's own lifecycle rules are the last resort.
 *
 * Create-once (WS_PUT_CREATE): the completion carries If-None-Match: *
 * (AWS S3 honours it on CompleteMultipartUpload), and the upload carries
 * the attempt token (x-amz-meta-ws-attempt) that a 412 is settled by, as
 * for a single PUT (s3_put_end). A store that ignores the condition on a
 * completion (the probe at open checks it on PUTs only) would replace an
 * object already there, so a HEAD before the upload refuses a key that
 * exists (WS_EPRECOND) before any part is sent. What
 * is left between that HEAD and the completion is a race only with a
 * writer of the very same key, and walship's large objects (checkpoint
 * artifacts) are at keys that name a checkpoint ID the store handed out
 * once and its inventory admitted: no other writer writes them.
 *
 * A CompleteMultipartUpload that fails after the store began its answer
 * comes as HTTP 200 with an <Error> document: an attempt that failed
 * (retried; when retries run out, the error it is), never a completion.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_assert.h"
#include "ws_fault.h"
#include "ws_logging.h"
#include "s3_internal.h"

#define MP_WINDOW 4u                    /* parts on the wire at once */
#define MP_UPLOAD_ID_MAX 1024

struct mp {
	struct s3_store *s;
	const char *key;
	const struct iovec *iov;
	int iovcnt;
	uint64_t len, part_bytes;
	unsigned parts;
	enum ws_put_mode mode;
	char upload_id[MP_UPLOAD_ID_MAX];
	char id_enc[MP_UPLOAD_ID_MAX * 3];   /* upload_id, URI-encoded for a query */
	char token[33];                      /* x-amz-meta-ws-attempt of the object */
	struct ws_etag *etags;               /* each part's, bare */
};

uint64_t ws_s3_part_bytes(uint64_t len, uint64_t want)
{
	const uint64_t mib = 1u << 20;
	uint64_t least = (len + WS_S3_PARTS_MAX - 1) / WS_S3_PARTS_MAX;
	uint64_t p = want > least ? want : least;
	if (p != want)
		p = (p + mib - 1) / mib * mib;
	WS_ASSERT(p >= want && (len + p - 1) / p <= WS_S3_PARTS_MAX);
	return p;
}

/* CreateMultipartUpload: the upload's id into m->upload_id. */
static int mp_create(struct mp *m)
{
	struct s3_store *s = m->s;
	char h_attempt[64];
	struct ws_buf body;
	struct s3_call c = { .method = "POST", .key = m->key, .query = "uploads", .framed = true,
			     .error_in_2xx = true };
	int rc;

	snprintf(h_attempt, sizeof(h_attempt), "x-amz-meta-ws-attempt: %s", m->token);
	c.extra[c.extra_count++] = h_attempt;
	ws_buf_init(&body, 64u << 10);
	c.resp = &body;
	rc = s3_call(s, &c);
	if (rc == 0 && c.req.status != 200)
		rc = s3_status_error(s, &c, &body);
	if (rc == 0)
		rc = ws_s3_xml_field(s->base.url, "CreateMultipartUpload", body.data, body.len,
				     "InitiateMultipartUploadResult", "UploadId", m->upload_id, sizeof(m->upload_id));
	if (rc == 0 && ws_uri_encode(m->upload_id, strlen(m->upload_id), false, m->id_enc, sizeof(m->id_enc)))
		rc = ws_fail(WS_EFORMAT, "s3 %s: CreateMultipartUpload %s: an UploadId that cannot be encoded",
			     s->base.url, m->key);
	ws_buf_free(&body);
	if (rc)
		return ws_fail_wrap(rc, "multipart upload of %s (%" PRIu64 " bytes)", m->key, m->len);
	return 0;
}

/* AbortMultipartUpload after cause; returns cause with its detail (a
 * failed abort is logged, never hides what ended the upload). */
static int mp_abort(struct mp *m, int cause)
{
	struct s3_store *s = m->s;
	char query[sizeof(m->id_enc) + 16], why[1024];
	struct s3_call c = { .method = "DELETE", .key = m->key, .query = query };

	snprintf(why, sizeof(why), "%s", ws_errmsg());
	snprintf(query, sizeof(query), "uploadId=%s", m->id_enc);
	int rc = s3_call(s, &c);
	if (rc == 0 && c.req.status != 204 && c.req.status != 200 && c.req.status != 404)
		rc = s3_status_error(s, &c, NULL);
	if (rc)
		ws_warn("s3 %s: %s: aborting multipart upload %s failed (%s): its parts stay stored until the "
			"store's lifecycle rules remove them", s->base.url, m->key, m->upload_id, ws_errmsg());
	return ws_fail(cause, "%s", why);
}

/* Part i's bytes, [i * part_bytes, +n) of the caller's iovecs, as iovecs
 * into out (at most m->iovcnt of them): how many. */
static int part_iov(const struct mp *m, unsigned i, struct iovec *out, uint64_t *n)
{
	uint64_t off = (uint64_t)i * m->part_bytes, at = 0;
	uint64_t left = m->len - off < m->part_bytes ? m->len - off : m->part_bytes;
	int k = 0;

	*n = left;
	for (int j = 0; j < m->iovcnt && left; j++) {
		uint64_t l = m->iov[j].iov_len;
		if (at + l > off) {
			uint64_t skip = off > at ? off - at : 0, take = l - skip < left ? l - skip : left;
			out[k].iov_base = (char *)m->iov[j].iov_base + skip;
			out[k++].iov_len = (size_t)take;
			left -= take;
			off += take;
		}
		at += l;
	}
	WS_ASSERT(left == 0 && k <= m->iovcnt);
	return k;
}

struct part_op {
	struct s3_call c;
	char query[MP_UPLOAD_ID_MAX * 3 + 48], h_len[64];
	struct ws_buf err_body;
	struct iovec *iov;
};

/* A part's call set up (nothing sent). */
static void part_begin(struct mp *m, unsigned i, struct part_op *op, struct iovec *iov)
{
	uint64_t n;
	memset(op, 0, sizeof(*op));
	op->iov = iov;
	op->c.body_iovcnt = part_iov(m, i, iov, &n);
	op->c.body = iov;
	op->c.method = "PUT";
	op->c.key = m->key;
	op->c.unsigned_payload = m->s->payload_unsigned;
	snprintf(op->query, sizeof(op->query), "partNumber=%u&uploadId=%s", i + 1, m->id_enc);
	op->c.query = op->query;
	snprintf(op->h_len, sizeof(op->h_len), "Content-Length: %" PRIu64, n);
	op->c.extra[op->c.extra_count++] = op->h_len;
	ws_buf_init(&op->err_body, 64u << 10);
	op->c.resp = &op->err_body;
}

/* A part's outcome: 200 with its ETag, kept for the completion. */
static int part_end(struct mp *m, unsigned i, struct part_op *op, int rc)
{
	if (rc == 0 && op->c.req.status != 200)
		rc = s3_status_error(m->s, &op->c, &op->err_body);
	if (rc == 0) {
		s3_reply_etag(&op->c.req, &m->etags[i]);
		if (m->etags[i].too_long)
			rc = s3_etag_too_long(m->s, "UploadPart of ", m->key, &m->etags[i]);
		else if (!m->etags[i].s[0])
			rc = ws_fail(-EPROTO, "s3 %s: UploadPart %u of %s: the store's answer (HTTP 200) has no ETag: "
				     "the part cannot be named in the completion", m->s->base.url, i + 1, m->key);
	}
	if (rc)
		return ws_fail_wrap(rc, "multipart upload of %s: part %u of %u", m->key, i + 1, m->parts);
	return 0;
}

/* Parts first..first+n-1 at once: the first failure, or 0. */
static int mp_window(struct mp *m, unsigned first, unsigned n, struct part_op *ops, struct iovec *iovs)
{
	struct s3_call *calls[MP_WINDOW];
	int rcs[MP_WINDOW], rc = 0;

	WS_ASSERT(n <= MP_WINDOW);
	for (unsigned j = 0; j < n; j++) {
		part_begin(m, first + j, &ops[j], iovs + (size_t)j * (size_t)m->iovcnt);
		calls[j] = &ops[j].c;
	}
	if ((rc = WS_FAULT("s3.multipart.part")) != 0)
		rc = ws_fail(rc, "fault s3.multipart.part: parts %u..%u of %s", first + 1, first + n, m->key);
	if (rc == 0)
		rc = s3_call_many(m->s, calls, rcs, n);
	for (unsigned j = 0; j < n; j++) {
		if (rc == 0)
			rc = part_end(m, first + j, &ops[j], rcs[j]);
		ws_buf_free(&ops[j].err_body);
	}
	return rc;
}

static int mp_parts(struct mp *m)
{
	struct part_op *ops = calloc(MP_WINDOW, sizeof(*ops));
	struct iovec *iovs = calloc((size_t)MP_WINDOW * (size_t)m->iovcnt, sizeof(*iovs));
	int rc = 0;

	m->etags = calloc(m->parts, sizeof(*m->etags));
	if (!ops || !iovs || !m->etags)
		rc = ws_fail(-ENOMEM, "s3 %s: multipart upload of %s: %u parts", m->s->base.url, m->key, m->parts);
	for (unsigned i = 0; rc == 0 && i < m->parts; i += MP_WINDOW)
		rc = mp_window(m, i, m->parts - i < MP_WINDOW ? m->parts - i : MP_WINDOW, ops, iovs);
	free(ops);
	free(iovs);
	return rc;
}

/* The CompleteMultipartUpload body: every part by number and ETag. */
static int mp_complete_body(const struct mp *m, struct ws_buf *b)
{
	char part[WS_ETAG_MAX + 96];
	static const char head[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><CompleteMultipartUpload>";
	ws_buf_append(b, head, sizeof(head) - 1);
	for (unsigned i = 0; i < m->parts; i++) {
		/* ETags are quoted strings of hex digits and '-': nothing to escape. */
		int n = snprintf(part, sizeof(part), "<Part><PartNumber>%u</PartNumber><ETag>\"%s\"</ETag></Part>",
				 i + 1, m->etags[i].s);
		ws_buf_append(b, part, (size_t)n);
	}
	ws_buf_append(b, "</CompleteMultipartUpload>", 26);
	return b->err ? ws_fail(b->err, "s3 %s: multipart upload of %s: completion body", m->s->base.url, m->key)
		      : 0;
}

/* The completion's call on op (an s3_put_op, so that a 412 is settled as a PUT's is). */
static void mp_complete_begin(struct mp *m, struct s3_put_op *op, char *query, size_t query_cap,
			      struct iovec *iov)
{
	struct s3_call *c = &op->c;
	memset(op, 0, sizeof(*op));
	snprintf(query, query_cap, "uploadId=%s", m->id_enc);
	*c = (struct s3_call){ .method = "POST", .key = m->key, .query = query, .body = iov, .body_iovcnt = 1,
			       .framed = true, .error_in_2xx = true };
	op->mode = m->mode;
	memcpy(op->token, m->token, sizeof(op->token));
	snprintf(op->h_len, sizeof(op->h_len), "Content-Length: %zu", iov->iov_len);
	c->extra[c->extra_count++] = op->h_len;
	if (m->mode == WS_PUT_CREATE && m->s->conditional_writes) {
		snprintf(op->h_cond, sizeof(op->h_cond), "If-None-Match: *");
		c->extra[c->extra_count++] = op->h_cond;
		c->conditional = true;
	}
	ws_buf_init(&op->err_body, 1u << 20);
	c->resp = &op->err_body;
}

/*
 * A completion answered 404 (NoSuchUpload) after more than one send (a
 * retry, or libcurl's own resend on a connection that died with no reply):
 * an earlier send may have completed it, the upload gone because it did
 * (radosgw answers a second completion 200; other stores 404). True when
 * the object carries this upload's attempt token.
 */
static bool mp_completed_before(struct mp *m, const struct s3_call *c)
{
	char attempt[64];
	struct ws_obj_info info;
	if (c->attempts < 2 && !c->req.resends)
		return false;
	return s3_head_attempt(m->s, m->key, &info, attempt, sizeof(attempt), c->deadline_ms) == 0 &&
	       !strcmp(attempt, m->token);
}

static int mp_complete(struct mp *m, struct ws_etag *out_etag)
{
	char query[sizeof(m->id_enc) + 16];
	struct ws_buf body;
	struct s3_put_op op;
	struct iovec iov;
	int rc;

	ws_buf_init(&body, (size_t)m->parts * (WS_ETAG_MAX + 96) + 256);
	if ((rc = mp_complete_body(m, &body)) != 0) {
		ws_buf_free(&body);
		return rc;
	}
	iov = (struct iovec){ body.data, body.len };
	mp_complete_begin(m, &op, query, sizeof(query), &iov);
	rc = s3_call(m->s, &op.c);
	/* Its <ETag> is not read: radosgw 16.2 leaves it empty. */
	if (rc == 0 && op.c.req.status == 404 && mp_completed_before(m, &op.c))
		op.c.req.status = 200; /* (and its body, the 404's, is not read) */
	else if (rc == 0 && op.c.req.status == 200)
		rc = ws_s3_xml_field(m->s->base.url, "CompleteMultipartUpload", op.err_body.data, op.err_body.len,
				     "CompleteMultipartUploadResult", NULL, NULL, 0);
	if (rc == 0)
		rc = s3_put_end(m->s, &op, out_etag);
	ws_buf_free(&op.err_body);
	ws_buf_free(&body);
	if (rc)
		return ws_fail_wrap(rc, "multipart upload of %s: completion", m->key);
	return 0;
}

/* Create-once: refused before any part is sent when the key exists (see above). */
static int mp_absent(struct mp *m)
{
	struct ws_obj_info info;
	int rc = m->s->base.ops->head(&m->s->base, m->key, &info);
	if (rc == WS_ENOTFOUND)
		return 0;
	if (rc == 0)
		return ws_fail(WS_EPRECOND, "s3 %s: %s: already exists", m->s->base.url, m->key);
	return ws_fail_wrap(rc, "s3 %s: %s: create-once of %" PRIu64 " bytes in parts: is it there (HEAD)",
			    m->s->base.url, m->key, m->len);
}

int s3_multipart_put(struct s3_store *s, const char *key, const struct iovec *iov, int iovcnt, uint64_t len,
		     enum ws_put_mode mode, struct ws_etag *out_etag)
{
	struct mp m = { .s = s, .key = key, .iov = iov, .iovcnt = iovcnt, .len = len, .mode = mode };
	int rc;

	WS_ASSERT(mode == WS_PUT_OVERWRITE || mode == WS_PUT_CREATE);
	m.part_bytes = ws_s3_part_bytes(len, s->part_bytes);
	m.parts = (unsigned)((len + m.part_bytes - 1) / m.part_bytes);
	snprintf(m.token, sizeof(m.token), "%016" PRIx64 "%016" PRIx64, s3_rnd64(s), s3_rnd64(s));
	if (mode == WS_PUT_CREATE && (rc = mp_absent(&m)) != 0)
		return rc;
	if ((rc = mp_create(&m)) != 0)
		return rc;
	ws_debug("s3 %s: %s: %" PRIu64 " bytes in %u parts of %" PRIu64 " (upload %s)", s->base.url, key, len,
		 m.parts, m.part_bytes, m.upload_id);
	rc = mp_parts(&m);
	if (rc == 0)
		rc = mp_complete(&m, out_etag);
	if (rc)
		rc = mp_abort(&m, rc);
	free(m.etags);
	return rc;
}
