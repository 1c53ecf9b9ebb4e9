/*
 * Sealed objects (ws_seal.h; docs/FORMAT.md "Sealed objects"): keyrings,
 * and the payload of a version 2 batch or snapshot part compressed with
 * zstd and encrypted with AES-256-GCM (OpenSSL EVP).
 *
 * Sealing: plaintext -> zstd (codec 1) or as it is (codec 0) -> with a key,
 * AES-256-GCM under a fresh 12-byte random nonce, the whole version 2
 * header (which names codec, cipher, key id, nonce and the stored length)
 * as additional data, the 16-byte tag after the ciphertext. Opening runs
 * it backwards and then checks the plaintext's XXH3-64, which the header
 * carries: end to end, whatever the codec.
 */
#include "ws_seal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "ws_hash.h"

#define KEY_FILE_BYTES_MAX ((size_t)1 << 20)
#define KEY_ID_LABEL "walship key id" /* and its NUL: 15 bytes */

/* ---- keys ------------------------------------------------------------- */

uint64_t ws_seal_key_id(const uint8_t key[WS_SEAL_KEY_LEN])
{
	uint8_t sha[WS_SHA256_LEN];
	struct iovec iov[2] = { { (void *)(uintptr_t)KEY_ID_LABEL, sizeof(KEY_ID_LABEL) }, { (void *)(uintptr_t)key, WS_SEAL_KEY_LEN } };
	ws_sha256v(iov, 2, sha);
	return ws_get_le64(sha);
}

const struct ws_seal_key *ws_keyring_find(const struct ws_keyring *kr, uint64_t id)
{
	for (size_t i = 0; kr && i < kr->count; i++)
		if (kr->keys[i].id == id)
			return &kr->keys[i];
	return NULL;
}

static int ring_add(struct ws_keyring *kr, const struct ws_seal_key *k)
{
	struct ws_seal_key *n;
	if (ws_keyring_find(kr, k->id))
		return 0;
	if (kr->count >= WS_KEYRING_MAX)
		return ws_fail(WS_ETOOBIG, "more than %u keys in one keyring", WS_KEYRING_MAX);
	/* A new array, the old one wiped: no copy of a key is left behind. */
	n = calloc(kr->count + 1, sizeof(*n));
	if (!n)
		return ws_fail(-ENOMEM, "keyring: no memory for %zu keys", kr->count + 1);
	if (kr->count)
		memcpy(n, kr->keys, kr->count * sizeof(*n));
	n[kr->count] = *k;
	OPENSSL_cleanse(kr->keys, kr->count * sizeof(*n));
	free(kr->keys);
	kr->keys = n;
	kr->count++;
	return 0;
}

int ws_keyring_merge(struct ws_keyring *kr, const struct ws_keyring *src)
{
	for (size_t i = 0; src && i < src->count; i++) {
		int rc = ring_add(kr, &src->keys[i]);
		if (rc)
			return rc;
	}
	return 0;
}

void ws_keyring_free(struct ws_keyring *kr)
{
	if (kr->keys)
		OPENSSL_cleanse(kr->keys, kr->count * sizeof(*kr->keys));
	free(kr->keys);
	kr->keys = NULL;
	kr->count = 0;
	kr->last_id = 0;
}

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* One line (trimmed: [b, e)) of a key file: a key into *k (returns 1),
 * nothing (0), or an error naming the line, never its text. */
static int parse_line(const char *name, unsigned line, const char *b, const char *e, struct ws_seal_key *k)
{
	while (b < e && blank(*b))
		b++;
	while (e > b && blank(e[-1]))
		e--;
	if (b == e || *b == '#')
		return 0;
	if (e - b != 2 * WS_SEAL_KEY_LEN)
		return ws_fail(WS_ECONFIG, "key file %s line %u: a key is 64 hex characters (256 bits), this line "
			       "holds %zu", name, line, (size_t)(e - b));
	for (unsigned i = 0; i < WS_SEAL_KEY_LEN; i++) {
		int hi = ws_hexval(b[2 * i]), lo = ws_hexval(b[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			OPENSSL_cleanse(k->bytes, sizeof(k->bytes));
			return ws_fail(WS_ECONFIG, "key file %s line %u: character %u is not a hex digit", name,
				       line, 2 * i + (hi < 0 ? 1 : 2));
		}
		k->bytes[i] = (uint8_t)(hi << 4 | lo);
	}
	k->id = ws_seal_key_id(k->bytes);
	return 1;
}

int ws_keyring_parse(struct ws_keyring *kr, const char *name, const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	struct ws_seal_key k;
	unsigned line = 0, found = 0;
	int rc = 0;

	while (p < end && rc >= 0) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *e = nl ? nl : end;
		rc = parse_line(name, ++line, p, e, &k);
		if (rc == 1) {
			found++;
			kr->last_id = k.id;
			rc = ring_add(kr, &k);
		}
		p = nl ? nl + 1 : end;
	}
	OPENSSL_cleanse(&k, sizeof(k));
	if (rc < 0)
		return rc;
	if (!found)
		return ws_fail(WS_ECONFIG, "key file %s holds no key (one per line, 64 hex characters)", name);
	return 0;
}

/* The whole file, at most KEY_FILE_BYTES_MAX, into buf (wiped by the caller). */
static int read_key_file(const char *path, char *buf, size_t cap, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	*len = 0;
	if (fd < 0)
		return ws_fail(-errno, "open key file %s: %s", path, strerror(errno));
	while ((n = read(fd, buf + *len, cap - *len)) > 0 && *len + (size_t)n < cap)
		*len += (size_t)n;
	if (n > 0)
		*len += (size_t)n;
	int err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return ws_fail(err, "read key file %s: %s", path, strerror(-err));
	if (*len >= cap)
		return ws_fail(WS_ECONFIG, "key file %s is larger than %zu bytes", path, cap - 1);
	return 0;
}

int ws_keyring_load(struct ws_keyring *kr, const char *path)
{
	char *buf = malloc(KEY_FILE_BYTES_MAX);
	size_t len;
	int rc;
	if (!buf)
		return ws_fail(-ENOMEM, "key file %s: no memory to read it", path);
	rc = read_key_file(path, buf, KEY_FILE_BYTES_MAX, &len);
	if (!rc)
		rc = ws_keyring_parse(kr, path, buf, len);
	OPENSSL_cleanse(buf, KEY_FILE_BYTES_MAX);
	free(buf);
	return rc;
}

/* ---- contexts: one of each per thread, made on first use ------------- */

/*
 * A zstd compression and decompression context and an AES-256-GCM cipher
 * context per thread, kept for the thread's life: making them costs more
 * than sealing a small object (a zstd CCtx is ~1 MB of tables; OpenSSL 3
 * fetches the cipher's implementation on every init from nothing). A
 * context holds no key between objects: each use sets the key and nonce
 * afresh, and the cipher context is wiped (EVP_CIPHER_CTX_reset) before it
 * goes back, so what one tenant's key leaves is never there for another's.
 */
static pthread_key_t cctx_key, dctx_key, gctx_key;
static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;
static EVP_CIPHER *aes_gcm; /* fetched once; NULL: fall back to EVP_aes_256_gcm() */

static void free_cctx(void *p) { ZSTD_freeCCtx(p); }
static void free_dctx(void *p) { ZSTD_freeDCtx(p); }
static void free_gctx(void *p) { EVP_CIPHER_CTX_free(p); }
static void ctx_keys(void)
{
	(void)pthread_key_create(&cctx_key, free_cctx);
	(void)pthread_key_create(&dctx_key, free_dctx);
	(void)pthread_key_create(&gctx_key, free_gctx);
	aes_gcm = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
}

/* This thread's context under key k, made by make (freed by drop if it
 * cannot be kept). */
static void *thread_ctx(pthread_key_t *k, void *(*make)(void), void (*drop)(void *))
{
	void *c;
	pthread_once(&ctx_once, ctx_keys);
	c = pthread_getspecific(*k);
	if (!c && (c = make()) != NULL && pthread_setspecific(*k, c) != 0) {
		drop(c);
		c = NULL;
	}
	return c;
}

static void *make_cctx(void) { return ZSTD_createCCtx(); }
static void *make_dctx(void) { return ZSTD_createDCtx(); }
static void *make_gctx(void) { return EVP_CIPHER_CTX_new(); }
static ZSTD_CCtx *cctx(void) { return thread_ctx(&cctx_key, make_cctx, free_cctx); }
static ZSTD_DCtx *dctx(void) { return thread_ctx(&dctx_key, make_dctx, free_dctx); }
static EVP_CIPHER_CTX *gctx(void) { return thread_ctx(&gctx_key, make_gctx, free_gctx); }

/* ---- sealing ---------------------------------------------------------- */

size_t ws_seal_bound(const struct ws_seal *s, size_t plain_len)
{
	size_t n = s->codec == WS_FMT_CODEC_ZSTD ? ZSTD_compressBound(plain_len) : plain_len;
	return n + (s->key ? WS_SEAL_TAG_LEN : 0);
}

static size_t iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;
	for (int i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

/* The window: the payload's size rounded up to a power of two (within
 * WINDOW_LOG_MIN..WINDOW_LOG_MAX), so a batch's last page can match its
 * first. Level 3's own window is 2 MiB, half a full batch: on the text
 * workload a whole-batch window stores 8% fewer bytes and costs 6% fewer
 * instructions to compress and 4% to decompress (a page's earlier version
 * is found further back instead of being coded again). A reader needs no
 * more memory: a frame decompresses whole into its destination. Checkpoint
 * artifacts (ws_seal_compress) keep the level's window: their readers are
 * held to a heap bound measured with it (test_core_ckpt_seal). */
#define WINDOW_LOG_MIN 10
#define WINDOW_LOG_MAX 23
static int window_log(size_t len)
{
	int wl = WINDOW_LOG_MIN;
	while (wl < WINDOW_LOG_MAX && ((size_t)1 << wl) < len)
		wl++;
	return wl;
}

static int compress_iov(const struct ws_seal *s, const struct iovec *iov, int n, uint8_t *out, size_t cap,
			size_t *clen, bool whole_window)
{
	ZSTD_CCtx *c = cctx();
	ZSTD_outBuffer ob = { out, cap, 0 };
	const size_t total = iov_total(iov, n);
	size_t r;
	if (!c)
		return ws_fail(-ENOMEM, "zstd: no memory for a compression context");
	ZSTD_CCtx_reset(c, ZSTD_reset_session_and_parameters);
	r = ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, s->level ? s->level : WS_ZSTD_LEVEL_DEFAULT);
	if (!ZSTD_isError(r) && whole_window)
		r = ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, window_log(total));
	if (!ZSTD_isError(r) && n == 1) {
		/* One piece (every batch and snapshot part): one shot, from the
		 * caller's bytes straight into out, without the streaming
		 * API's copy of the input into its own window buffer. */
		r = ZSTD_compress2(c, out, cap, iov[0].iov_base, iov[0].iov_len);
		if (ZSTD_isError(r) && ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall)
			return ws_fail(WS_ETOOBIG, "zstd: the sealed payload outgrows its %zu-byte buffer", cap);
		if (ZSTD_isError(r))
			return ws_fail(-EIO, "zstd: compress: %s", ZSTD_getErrorName(r));
		*clen = r;
		return 0;
	}
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setPledgedSrcSize(c, total);
	for (int i = 0; i < n && !ZSTD_isError(r); i++) {
		ZSTD_inBuffer ib = { iov[i].iov_base, iov[i].iov_len, 0 };
		while (ib.pos < ib.size && !ZSTD_isError(r))
			r = ZSTD_compressStream2(c, &ob, &ib, ZSTD_e_continue);
	}
	while (!ZSTD_isError(r) && (r = ZSTD_compressStream2(c, &ob, &(ZSTD_inBuffer){ NULL, 0, 0 }, ZSTD_e_end)) != 0)
		if (!ZSTD_isError(r) && ob.pos == ob.size)
			return ws_fail(WS_ETOOBIG, "zstd: the sealed payload outgrows its %zu-byte buffer", cap);
	if (ZSTD_isError(r))
		return ws_fail(-EIO, "zstd: compress: %s", ZSTD_getErrorName(r));
	*clen = ob.pos;
	return 0;
}

static int copy_iov(const struct iovec *iov, int n, uint8_t *out, size_t cap, size_t *len)
{
	size_t at = 0;
	if (iov_total(iov, n) > cap)
		return ws_fail(WS_ETOOBIG, "seal: %zu payload bytes outgrow a %zu-byte buffer", iov_total(iov, n), cap);
	for (int i = 0; i < n; i++) {
		memcpy(out + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	*len = at;
	return 0;
}

/* AES-256-GCM: len bytes of in encrypted into out (the header as AAD), the
 * tag written after them; or decrypted and the tag checked. in == out is
 * allowed (in place), as EVP allows it; otherwise they do not overlap. */
static int gcm(bool enc, const struct ws_seal_key *k, const uint8_t nonce[WS_SEAL_NONCE_LEN], const uint8_t *aad,
	       size_t aad_len, const uint8_t *in, uint8_t *out, size_t len, uint8_t tag[WS_SEAL_TAG_LEN])
{
	EVP_CIPHER_CTX *c = gctx();
	int n = 0, ok;
	if (!c)
		return ws_fail(-ENOMEM, "OpenSSL: no memory for a cipher context");
	/* The cipher and nonce length set every time: a reset context (below)
	 * keeps neither, and a failed use may leave it part way. */
	ok = EVP_CipherInit_ex(c, aes_gcm ? aes_gcm : EVP_aes_256_gcm(), NULL, NULL, NULL, enc) == 1 &&
	     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, WS_SEAL_NONCE_LEN, NULL) == 1 &&
	     EVP_CipherInit_ex(c, NULL, NULL, k->bytes, nonce, enc) == 1 &&
	     EVP_CipherUpdate(c, NULL, &n, aad, (int)aad_len) == 1;
	for (size_t at = 0; ok && at < len;) {
		int chunk = len - at > (1u << 30) ? 1 << 30 : (int)(len - at);
		ok = EVP_CipherUpdate(c, out + at, &n, in + at, chunk) == 1;
		at += (size_t)chunk;
	}
	if (ok && !enc)
		ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, WS_SEAL_TAG_LEN, tag) == 1;
	int fin = ok ? EVP_CipherFinal_ex(c, out + len, &n) : 0;
	if (ok && fin == 1 && enc)
		ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, WS_SEAL_TAG_LEN, tag) == 1;
	/* The expanded key schedule goes: the context outlives this object. */
	EVP_CIPHER_CTX_reset(c);
	if (!ok)
		return ws_fail(-EIO, "OpenSSL: AES-256-GCM could not run");
	if (fin != 1)
		return enc ? ws_fail(-EIO, "OpenSSL: AES-256-GCM could not finish")
			   : ws_fail(WS_ECORRUPT, "authentication failed");
	return 0;
}

/* Compress (or copy) into out and draw the nonce: every field of fs but
 * the header's own. */
static int seal_payload(const struct ws_seal *s, const struct iovec *iov, int n, uint8_t *out, size_t cap,
			struct ws_fmt_seal *fs)
{
	const size_t tag = s->key ? WS_SEAL_TAG_LEN : 0;
	size_t clen = 0;
	int rc;
	memset(fs, 0, sizeof(*fs));
	fs->version = 2;
	fs->codec = s->codec;
	if (cap < tag)
		return ws_fail(WS_ETOOBIG, "seal: a %zu-byte buffer cannot hold the tag", cap);
	rc = s->codec == WS_FMT_CODEC_ZSTD ? compress_iov(s, iov, n, out, cap - tag, &clen, true)
					   : copy_iov(iov, n, out, cap - tag, &clen);
	if (rc)
		return rc;
	if (s->key) {
		fs->cipher = WS_FMT_CIPHER_AES256GCM;
		fs->key_id = s->key->id;
		if (RAND_bytes(fs->nonce, WS_SEAL_NONCE_LEN) != 1)
			return ws_fail(-EIO, "OpenSSL: no random bytes for a nonce");
	}
	fs->stored_len = clen + tag;
	return 0;
}

/* The payload, compressed (or copied) into out, encrypted in place under
 * the header just encoded: *stored bytes. */
static int seal_finish(const struct ws_seal *s, const struct ws_fmt_seal *fs, const uint8_t *hdr, size_t hdr_len,
		       uint8_t *out, size_t *stored)
{
	*stored = (size_t)fs->stored_len;
	if (!s->key)
		return 0;
	return gcm(true, s->key, fs->nonce, hdr, hdr_len, out, out, *stored - WS_SEAL_TAG_LEN,
		   out + *stored - WS_SEAL_TAG_LEN);
}

int ws_seal_batch(const struct ws_seal *s, struct ws_fmt_batch *b, const struct iovec *iov, int iovcnt,
		  uint8_t hdr[WS_OBJ_HDR_MAX], size_t *hdr_len, uint8_t *out, size_t cap, size_t *stored_len)
{
	int rc = seal_payload(s, iov, iovcnt, out, cap, &b->seal);
	if (rc)
		return rc;
	*hdr_len = ws_fmt_batch_encode_hdr(b, hdr);
	return seal_finish(s, &b->seal, hdr, *hdr_len, out, stored_len);
}

int ws_seal_snap(const struct ws_seal *s, struct ws_fmt_snap *sn, const struct iovec *iov, int iovcnt,
		 uint8_t hdr[WS_OBJ_HDR_MAX], size_t *hdr_len, uint8_t *out, size_t cap, size_t *stored_len)
{
	int rc = seal_payload(s, iov, iovcnt, out, cap, &sn->seal);
	if (rc)
		return rc;
	*hdr_len = ws_fmt_snap_encode_hdr(sn, hdr);
	return seal_finish(s, &sn->seal, hdr, *hdr_len, out, stored_len);
}

/* ---- opening ---------------------------------------------------------- */

static int decompress(const uint8_t *src, size_t len, uint8_t *dst, size_t plain_len)
{
	ZSTD_DCtx *d = dctx();
	size_t r;
	if (!d)
		return ws_fail(-ENOMEM, "zstd: no memory for a decompression context");
	r = ZSTD_decompressDCtx(d, dst, plain_len, src, len);
	if (ZSTD_isError(r))
		return ws_fail(WS_ECORRUPT, "zstd: %s", ZSTD_getErrorName(r));
	if (r != plain_len)
		return ws_fail(WS_ECORRUPT, "zstd: decompresses to %zu bytes, the header says %zu", r, plain_len);
	return 0;
}

/*
 * A sealed payload (hdr_len bytes of header at obj, then fs->stored_len)
 * into plain: plain_len bytes of plaintext first, then (when it is both
 * compressed and encrypted) room to decrypt the compressed bytes into.
 */
static int open_payload(const struct ws_keyring *kr, const uint8_t *obj, size_t hdr_len, const struct ws_fmt_seal *fs,
			uint64_t plain_len, struct ws_buf *plain)
{
	const struct ws_seal_key *k = NULL;
	const uint8_t *src = obj + hdr_len;
	size_t clen = (size_t)fs->stored_len, room = (size_t)plain_len;
	int rc;

	if (fs->cipher) {
		if ((k = ws_keyring_find(kr, fs->key_id)) == NULL)
			return ws_fail(WS_ENOKEY, "key %016llx not available", (unsigned long long)fs->key_id);
		clen -= WS_SEAL_TAG_LEN;
		if (fs->codec != WS_FMT_CODEC_NONE)
			room += clen;
	}
	if (plain_len > SIZE_MAX / 2 || (rc = ws_buf_reserve(plain, room)) != 0)
		return ws_fail(plain->err ? plain->err : WS_ETOOBIG, "%llu bytes of plaintext: more than this "
			       "reader holds", (unsigned long long)plain_len);
	if (k) {
		/* Decrypted from the object straight to where it is used: the
		 * plaintext itself (no codec) or the room after it, which zstd
		 * then decompresses from into the plaintext. */
		uint8_t *pt = plain->data + (fs->codec != WS_FMT_CODEC_NONE ? (size_t)plain_len : 0);
		uint8_t tag[WS_SEAL_TAG_LEN];
		memcpy(tag, src + clen, WS_SEAL_TAG_LEN);
		if ((rc = gcm(false, k, fs->nonce, obj, hdr_len, src, pt, clen, tag)) != 0)
			return rc;
		src = pt;
	}
	if (fs->codec == WS_FMT_CODEC_ZSTD && (rc = decompress(src, clen, plain->data, (size_t)plain_len)) != 0)
		return rc;
	plain->len = (size_t)plain_len;
	return 0;
}

/* The plaintext of a decoded header's object, its hash checked. */
static int open_checked(const struct ws_keyring *kr, const uint8_t *obj, size_t len, size_t hl,
			const struct ws_fmt_seal *fs, uint64_t plain_len, uint64_t xxh, struct ws_buf *plain,
			const uint8_t **out)
{
	const uint8_t *p = obj + hl;
	int rc;
	if (!ws_fmt_seal_plain(fs)) {
		ws_buf_reset(plain);
		if ((rc = open_payload(kr, obj, hl, fs, plain_len, plain)) != 0)
			return rc;
		p = plain->data;
	} else if (len - hl != plain_len) {
		return ws_fail(WS_EFORMAT, "payload of %zu bytes, header says %llu", len - hl,
			       (unsigned long long)plain_len);
	}
	if (ws_xxh64(p, (size_t)plain_len) != xxh)
		return ws_fail(WS_ECORRUPT, "payload hash mismatch%s", ws_fmt_seal_plain(fs) ? "" : " after opening");
	if (out)
		*out = p;
	return 0;
}

int ws_seal_open_batch(const struct ws_keyring *kr, const uint8_t *obj, size_t len, struct ws_fmt_batch *b,
		       struct ws_buf *plain, const uint8_t **frames)
{
	size_t hl;
	int rc = ws_fmt_batch_decode_hdr(obj, len, b, &hl);
	if (!rc)
		rc = open_checked(kr, obj, len, hl, &b->seal, ws_fmt_batch_plain_len(b), b->payload_xxh, plain,
				  frames);
	return rc;
}

int ws_seal_open_snap(const struct ws_keyring *kr, const uint8_t *obj, size_t len, struct ws_fmt_snap *sn,
		      struct ws_buf *plain, const uint8_t **pages)
{
	size_t hl;
	int rc = ws_fmt_snap_decode_hdr(obj, len, sn, &hl);
	if (!rc)
		rc = open_checked(kr, obj, len, hl, &sn->seal, ws_fmt_snap_plain_len(sn), sn->payload_xxh, plain,
				  pages);
	return rc;
}

/* ---- primitives for other sealed layouts (checkpoint artifacts) -------- */

int ws_seal_compress(const struct ws_seal *s, const uint8_t *src, size_t len, uint8_t *out, size_t cap,
		     size_t *clen)
{
	const struct iovec iov = { (void *)(uintptr_t)src, len };
	return compress_iov(s, &iov, 1, out, cap, clen, false);
}

int ws_seal_decompress(const uint8_t *src, size_t len, uint8_t *dst, size_t plain_len)
{
	return decompress(src, len, dst, plain_len);
}

int ws_seal_gcm(bool enc, const struct ws_seal_key *k, const uint8_t nonce[WS_SEAL_NONCE_LEN], const uint8_t *aad,
		size_t aad_len, uint8_t *buf, size_t len, uint8_t tag[WS_SEAL_TAG_LEN])
{
	return gcm(enc, k, nonce, aad, aad_len, buf, buf, len, tag);
}

int ws_seal_random(uint8_t *out, size_t len)
{
	if (RAND_bytes(out, (int)len) != 1)
		return ws_fail(-EIO, "OpenSSL: no random bytes for a nonce");
	return 0;
}
