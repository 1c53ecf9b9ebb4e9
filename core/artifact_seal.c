/*
 * Sealed checkpoint artifacts on the core's side (docs/CHECKPOINTS.md
 * "Sealed artifacts"): which seal a tenant's artifact gets, sealing an
 * image a chunk at a time into a file, and reading either version of an
 * artifact a range at a time, each chunk opened once its stored bytes have
 * arrived. Memory stays a few chunks whatever the image's size.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "artifact.h"
#include "replay.h"
#include "sink.h"

/* ---- which seal ---------------------------------------------------------- */

/*
 * An artifact's seal as configured, with WS_CODEC_DEFAULT taken as NONE:
 * the default codec by sink (core/sink.c) is for batches and snapshot
 * parts; an artifact is compressed only when a codec is named (sealing it
 * takes a second temporary file of its size, docs/CHECKPOINTS.md "Sealed
 * artifacts").
 */
static int art_seal_resolve(struct ws_sink *sink, const char *who, const struct ws_seal_config *c,
			    struct ws_keyring *own, struct ws_seal *out)
{
	struct ws_seal_config named = *c;
	if (named.codec == WS_CODEC_DEFAULT)
		named.codec = WS_CODEC_NONE;
	return ws_sink_seal_resolve(sink, who, &named, own, out);
}

int ws_art_seals_resolve(struct ws_sink *sink, const struct ws_checkpoint_opts *o, struct ws_art_seals *out)
{
	int rc;
	memset(out, 0, sizeof(*out));
	if ((rc = art_seal_resolve(sink, "checkpoint artifacts", &o->seal, &out->keys, &out->dflt)) != 0)
		return rc;
	if (o->tenant_seal_count && !(out->t = calloc(o->tenant_seal_count, sizeof(*out->t))))
		return ws_fail(-ENOMEM, "checkpoint: no memory for %zu tenants' seals", o->tenant_seal_count);
	for (size_t i = 0; i < o->tenant_seal_count; i++, out->count++) {
		struct ws_art_tenant_seal *t = &out->t[i];
		char who[WS_TENANT_MAX + 40];
		if (!o->tenant_seal[i].tenant || !ws_tenant_name_valid(o->tenant_seal[i].tenant))
			return ws_fail(WS_ECONFIG, "checkpoint: tenant_seal[%zu] names no valid tenant", i);
		snprintf(t->tenant, sizeof(t->tenant), "%s", o->tenant_seal[i].tenant);
		snprintf(who, sizeof(who), "checkpoint artifacts of tenant %s", t->tenant);
		if ((rc = art_seal_resolve(sink, who, &o->tenant_seal[i].seal, &t->keys, &t->seal)) != 0)
			return rc;
	}
	return 0;
}

const struct ws_seal *ws_art_seals_for(const struct ws_art_seals *s, const char *tenant)
{
	for (size_t i = 0; i < s->count; i++)
		if (strcmp(s->t[i].tenant, tenant) == 0)
			return &s->t[i].seal;
	return &s->dflt;
}

void ws_art_seals_free(struct ws_art_seals *s)
{
	for (size_t i = 0; i < s->count; i++)
		ws_keyring_free(&s->t[i].keys);
	free(s->t);
	ws_keyring_free(&s->keys);
	memset(s, 0, sizeof(*s));
}

/* ---- sealing ------------------------------------------------------------- */

/* Every chunk of img sealed and written at its offset in fd; h set. */
static int seal_chunks(const struct ws_seal *s, struct ws_art_hdr *h, const uint8_t *img, int fd, uint64_t *end)
{
	const size_t cap = ws_art_chunk_bound(s, h->chunk_size);
	uint8_t *out = malloc(cap ? cap : 1);
	uint64_t off = ws_art_hdr_size(h->chunk_count);
	int rc = 0;

	if (!out)
		return ws_fail(-ENOMEM, "seal artifact: no memory for a chunk");
	for (uint32_t k = 0; k < h->chunk_count && !rc; k++) {
		size_t n = 0;
		rc = ws_art_seal_chunk(s, h, k, img + (uint64_t)k * h->chunk_size, out, cap, &n);
		if (!rc && (rc = ws_image_pwrite(fd, out, n, off)) != 0)
			ws_fail_wrap(rc, "write sealed artifact");
		off += n;
	}
	free(out);
	*end = off;
	return rc;
}

int ws_artifact_seal_file(const struct ws_seal *s, const uint8_t *img, size_t len, const uint8_t sha[WS_SHA256_LEN],
			  const char *path)
{
	struct ws_art_hdr h;
	uint8_t *hdr = NULL;
	uint64_t end = 0;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600), rc;

	if (fd < 0)
		return ws_fail(-errno, "create %s: %s", path, strerror(errno));
	rc = ws_art_begin(s, len, WS_ART_CHUNK_DEFAULT, sha, &h);
	if (!rc)
		rc = seal_chunks(s, &h, img, fd, &end);
	if (!rc && !(hdr = malloc(ws_art_hdr_size(h.chunk_count))))
		rc = ws_fail(-ENOMEM, "seal artifact: no memory for its header");
	if (!rc) {
		ws_art_hdr_encode(&h, hdr);
		if ((rc = ws_image_pwrite(fd, hdr, ws_art_hdr_size(h.chunk_count), 0)) != 0)
			ws_fail_wrap(rc, "write sealed artifact");
	}
	free(hdr);
	ws_art_hdr_free(&h);
	close(fd);
	if (rc)
		unlink(path);
	return rc;
}

/* ---- reading ------------------------------------------------------------- */

enum { RD_START, RD_PLAIN, RD_HDR, RD_CHUNKS, RD_NOKEY, RD_DONE };

int ws_art_reader_init(struct ws_art_reader *r, const struct ws_keyring *kr, const char *key, uint64_t length, int fd)
{
	memset(r, 0, sizeof(*r));
	r->kr = kr;
	r->key = key;
	r->length = length;
	r->fd = fd;
	r->want = WS_ART_PEEK;
	ws_buf_init(&r->acc, WS_ART_HDR_MAX + WS_ART_CHUNK_MAX);
	if (ws_sha256_begin(&r->sha) != 0) {
		r->sha_done = true;
		return ws_fail(-ENOMEM, "read checkpoint artifact %s: no memory for its hash", key);
	}
	return 0;
}

void ws_art_reader_free(struct ws_art_reader *r)
{
	if (!r->sha_done)
		ws_sha256_end(&r->sha, NULL);
	r->sha_done = true;
	ws_buf_free(&r->acc);
	ws_art_hdr_free(&r->h);
	free(r->plain);
	r->plain = NULL;
}

/* Plaintext at its offset in the image: page 1's head kept, hashed, written. */
static int plain_out(struct ws_art_reader *r, const uint8_t *p, size_t n)
{
	int rc;
	if (r->head_len < sizeof(r->head)) {
		size_t m = n < sizeof(r->head) - r->head_len ? n : sizeof(r->head) - r->head_len;
		memcpy(r->head + r->head_len, p, m);
		r->head_len += m;
	}
	ws_sha256_update(&r->sha, p, n);
	if ((rc = ws_image_pwrite(r->fd, p, n, r->plain_off)) != 0)
		return ws_fail(rc, "write checkpoint artifact %s", r->key);
	r->plain_off += n;
	return 0;
}

/* The next chunk's stored bytes are what acc must reach (or the end). */
static void next_chunk(struct ws_art_reader *r)
{
	ws_buf_reset(&r->acc);
	if (r->k < r->h.chunk_count) {
		r->want = r->h.chunks[r->k].stored_len;
		r->state = RD_CHUNKS;
	} else {
		r->state = RD_DONE;
	}
}

/* The header is in acc: decode it, and check it against the index. */
static int hdr_step(struct ws_art_reader *r)
{
	size_t size;
	int rc;
	if (r->want == WS_ART_PEEK) {
		if ((rc = ws_art_hdr_peek(r->acc.data, r->acc.len, &size)) != 0)
			return rc;
		r->want = size;
		return 0;
	}
	if ((rc = ws_art_hdr_decode(r->acc.data, r->acc.len, &r->h)) != 0)
		return rc;
	if (ws_art_length(&r->h) != r->length)
		return ws_fail(WS_ECORRUPT, "its header gives %" PRIu64 " bytes, its index records %" PRIu64,
			       ws_art_length(&r->h), r->length);
	if (r->h.cipher && !ws_keyring_find(r->kr, r->h.key_id)) {
		r->state = RD_NOKEY; /* read on: its length and SHA-256 are still checked */
		return 0;
	}
	if (r->h.chunk_count && !(r->plain = malloc(r->h.chunk_size)))
		return ws_fail(-ENOMEM, "no memory for a %u-byte chunk", r->h.chunk_size);
	next_chunk(r);
	return 0;
}

static int chunk_step(struct ws_art_reader *r)
{
	const uint8_t *p;
	int rc = ws_art_open_chunk(r->kr, &r->h, r->k, r->acc.data, r->plain, &p);
	if (!rc)
		rc = plain_out(r, p, ws_art_chunk_plain(&r->h, r->k));
	r->k++;
	next_chunk(r);
	return rc;
}

static int feed_sealed(struct ws_art_reader *r, const uint8_t *p, size_t len)
{
	int rc = 0;
	while (len && !rc && r->state != RD_NOKEY) {
		size_t n = r->want - r->acc.len;
		if (r->state == RD_DONE)
			return ws_fail(WS_ECORRUPT, "%zu bytes past its last chunk", len);
		n = n < len ? n : len;
		if ((rc = ws_buf_append(&r->acc, p, n)) != 0)
			return ws_fail(rc, "no memory for a chunk of %zu bytes", r->want);
		p += n;
		len -= n;
		if (r->acc.len == r->want)
			rc = r->state == RD_HDR ? hdr_step(r) : chunk_step(r);
	}
	return rc;
}

int ws_art_reader_feed(struct ws_art_reader *r, const uint8_t *p, size_t len)
{
	int rc;
	if (r->state == RD_START)
		r->state = ws_art_sealed(p, len) ? RD_HDR : RD_PLAIN;
	if (r->state == RD_PLAIN)
		return plain_out(r, p, len);
	rc = feed_sealed(r, p, len);
	return rc ? ws_fail_wrap(rc, "checkpoint artifact %s", r->key) : 0;
}

int ws_art_reader_finish(struct ws_art_reader *r)
{
	uint8_t sha[WS_SHA256_LEN];
	if (r->state == RD_START || r->state == RD_PLAIN)
		return 0;
	if (r->state == RD_NOKEY)
		return ws_fail(WS_ENOKEY, "checkpoint artifact %s is sealed with key %016" PRIx64 ", not available: "
			       "its length and SHA-256 match its index; its contents are not checked", r->key,
			       r->h.key_id);
	if (r->state != RD_DONE)
		return ws_fail(WS_ECORRUPT, "checkpoint artifact %s ends inside its %s", r->key,
			       r->state == RD_HDR ? "header" : "chunks");
	ws_sha256_end(&r->sha, sha);
	r->sha_done = true;
	if (memcmp(sha, r->h.sha, sizeof(sha)) != 0 || r->plain_off != r->h.plain_len)
		return ws_fail(WS_ECORRUPT, "checkpoint artifact %s opens to an image that is not the one its header "
			       "records (length or SHA-256)", r->key);
	return 0;
}
