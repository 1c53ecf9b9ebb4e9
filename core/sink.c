#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sink.h"
#include "ws_hash.h"

struct ws_sink *ws_sink_open(const char *url, int *err)
{
	return ws_sink_open_flags(url, 0, err);
}

struct ws_sink *ws_sink_open_flags(const char *url, unsigned flags, int *err)
{
	struct ws_sink *sink = calloc(1, sizeof(*sink));
	int rc = 0;
	if (!sink) {
		rc = ws_fail(-ENOMEM, "out of memory opening sink");
		goto fail;
	}
	sink->store = ws_store_open_flags(url, (flags & WS_SINK_EXISTING) ? WS_STORE_EXISTING : 0, &rc);
	if (!sink->store)
		goto fail;
	sink->store->keys = &sink->ring;
	sink->store->fetch_parallelism = WS_FETCH_PARALLELISM_DEFAULT;
	*err = 0;
	return sink;
fail:
	free(sink);
	*err = rc ? rc : -EINVAL;
	return NULL;
}

void ws_sink_close(struct ws_sink *sink)
{
	if (!sink)
		return;
	ws_store_close(sink->store);
	ws_keyring_free(&sink->ring);
	free(sink);
}

int ws_sink_add_key_file(struct ws_sink *sink, const char *path)
{
	struct ws_keyring k = { 0 };
	int rc;
	if (!sink || !path)
		return ws_fail(WS_ECONFIG, "ws_sink_add_key_file: no sink or no path");
	rc = ws_keyring_load(&k, path);
	if (!rc)
		rc = ws_keyring_merge(&sink->ring, &k);
	ws_keyring_free(&k);
	return rc;
}

int ws_sink_set_fetch_parallelism(struct ws_sink *sink, unsigned n)
{
	if (!sink)
		return ws_fail(WS_ECONFIG, "ws_sink_set_fetch_parallelism: no sink");
	if (n == 0 || n > WS_FETCH_PARALLELISM_MAX)
		return ws_fail(WS_ECONFIG, "fetch parallelism %u: must be 1 to %u objects at once", n,
			       WS_FETCH_PARALLELISM_MAX);
	sink->store->fetch_parallelism = n;
	return 0;
}

/*
 * The codec WS_CODEC_DEFAULT stands for: resolved here and nowhere else,
 * by the store (docs/bench/README.md "Compression and encryption",
 * bench/run_seal_bench.sh and run_peer_bench.sh): ZSTD over the network
 * (s3://), where it more than doubled the ship rate, cut the bytes 20 to
 * 100 times and made restores faster; NONE into a local directory
 * (file://), where zstd alone shipped one of the two workloads at 0.93 of
 * the plain rate.
 */
static enum ws_codec seal_codec_default(const struct ws_sink *sink)
{
	return ws_store_kind(sink->store) == WS_STORE_S3 ? WS_CODEC_ZSTD : WS_CODEC_NONE;
}

int ws_sink_seal_resolve(struct ws_sink *sink, const char *who, const struct ws_seal_config *c,
			 struct ws_keyring *own, struct ws_seal *out)
{
	const enum ws_codec codec = c->codec == WS_CODEC_DEFAULT ? seal_codec_default(sink) : c->codec;
	int rc;
	memset(out, 0, sizeof(*out));
	if (codec != WS_CODEC_NONE && codec != WS_CODEC_ZSTD)
		return ws_fail(WS_ECONFIG, "%s: unknown codec %d", who, (int)c->codec);
	if (c->level < 0 || c->level > 19)
		return ws_fail(WS_ECONFIG, "%s: zstd level %d is not 1..19 (0: the default)", who, c->level);
	out->codec = codec == WS_CODEC_ZSTD ? WS_FMT_CODEC_ZSTD : WS_FMT_CODEC_NONE;
	out->level = c->level;
	if (!c->key_file)
		return 0;
	rc = ws_keyring_load(own, c->key_file);
	if (!rc)
		rc = ws_keyring_merge(&sink->ring, own);
	if (rc)
		return ws_fail_wrap(rc, "%s", who);
	out->key = ws_keyring_writer(own);
	return 0;
}

void ws_sink_get_stats(const struct ws_sink *sink, struct ws_sink_stats *out)
{
	const struct ws_store_stats *s = &sink->store->stats;
	out->puts = s->puts;
	out->gets = s->gets;
	out->heads = s->heads;
	out->lists = s->lists;
	out->deletes = s->deletes;
	out->bytes_put = s->bytes_put;
	out->bytes_got = s->bytes_got;
}

int ws_key_watermark(char *out, size_t cap, const char *tenant)
{
	int n = snprintf(out, cap, "%s/%s", tenant, WS_WM_NAME);
	return n < 0 || (size_t)n >= cap ? WS_ETOOBIG : 0;
}

uint64_t ws_key_manifest_seq(const char *key)
{
	const char *base = strrchr(key, '/');
	uint64_t v = 0;
	base = base ? base + 1 : key;
	if (base[0] != 'm' || strlen(base) < 18 || base[17] != '-')
		return 0;
	for (int i = 1; i <= 16; i++) {
		int h = ws_hexval(base[i]);
		if (h < 0)
			return 0;
		v = v << 4 | (uint64_t)h;
	}
	return v;
}

static bool hex_field(const char *p, int digits, uint64_t *out)
{
	uint64_t v = 0;
	for (int i = 0; i < digits; i++) {
		int h = ws_hexval(p[i]);
		if (h < 0)
			return false;
		v = v << 4 | (uint64_t)h;
	}
	*out = v;
	return true;
}

uint64_t ws_key_object_seq(const char *key)
{
	const char *base = strrchr(key, '/'), *dir;
	uint64_t v;
	if (!base)
		return 0;
	base++;
	/* b<first:16>-<count:8>-<xxh:16>-<seq:16> */
	if (base[0] == 'b' && strlen(base) == 60 && base[17] == '-' && base[26] == '-' && base[43] == '-')
		return hex_field(base + 1, 16, &v) && hex_field(base + 18, 8, &v) && hex_field(base + 27, 16, &v) &&
			       hex_field(base + 44, 16, &v)
		       ? v
		       : 0;
	/* s<frame:16>-<seq:16>/<page:8>-<xxh:16> */
	for (dir = base - 1; dir > key && dir[-1] != '/'; dir--)
		;
	if (dir[0] == 's' && base - dir == 35 && dir[17] == '-' && strlen(base) == 25 && base[8] == '-')
		return hex_field(dir + 1, 16, &v) && hex_field(base, 8, &v) && hex_field(base + 9, 16, &v) &&
			       hex_field(dir + 18, 16, &v)
		       ? v
		       : 0;
	return 0;
}

int ws_key_gen_prefix(char *out, size_t cap, const char *tenant, uint64_t epoch, uint64_t pg,
		      const struct ws_fmt_gen *gen)
{
	int n;
	if (gen->wal_magic == 0)
		n = snprintf(out, cap, "%s/e%llu-p%llu/g-none", tenant, (unsigned long long)epoch,
			     (unsigned long long)pg);
	else
		n = snprintf(out, cap, "%s/e%llu-p%llu/g%08x-%08x%08x", tenant, (unsigned long long)epoch,
			     (unsigned long long)pg, gen->checkpoint_seq, gen->salt1, gen->salt2);
	return n < 0 || (size_t)n >= cap ? WS_ETOOBIG : 0;
}

int ws_key_slot(char *out, size_t cap, const char *tenant, uint64_t epoch, uint64_t pg, uint64_t lane,
		uint64_t seq)
{
	int n = snprintf(out, cap, "%s/e%llu-p%llu/l%016llx/m%016llx", tenant, (unsigned long long)epoch,
			 (unsigned long long)pg, (unsigned long long)lane, (unsigned long long)seq);
	return n < 0 || (size_t)n >= cap ? WS_ETOOBIG : 0;
}

/* A decimal number as %llu writes it (no sign, no leading zero, no overflow). */
static bool dec_field(const char **p, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	*p = s;
	return true;
}

/* 16 lower-case hex digits. */
static bool hex16_lower(const char *p, uint64_t *out)
{
	for (int i = 0; i < 16; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return false;
	return hex_field(p, 16, out);
}

bool ws_key_slot_parse(const char *key, const char *tenant, uint64_t *epoch, uint64_t *pg, uint64_t *lane,
		       uint64_t *seq)
{
	size_t tl = strlen(tenant);
	const char *p = key + tl;
	uint64_t e, g, l, s;
	if (tl == 0 || strncmp(key, tenant, tl) != 0 || strncmp(p, "/e", 2) != 0)
		return false;
	p += 2;
	if (!dec_field(&p, &e) || strncmp(p, "-p", 2) != 0)
		return false;
	p += 2;
	if (!dec_field(&p, &g) || strncmp(p, "/l", 2) != 0)
		return false;
	p += 2;
	if (strlen(p) != 16 + 2 + 16 || !hex16_lower(p, &l) || strncmp(p + 16, "/m", 2) != 0 ||
	    !hex16_lower(p + 18, &s) || l == 0 || s == 0)
		return false;
	*epoch = e;
	*pg = g;
	*lane = l;
	*seq = s;
	return true;
}

bool ws_key_slot_any(const char *key)
{
	char top[WS_TENANT_NAME_MAX];
	const char *slash = strchr(key, '/');
	uint64_t e, g, l, s;
	if (!slash || (size_t)(slash - key) >= sizeof(top))
		return false;
	memcpy(top, key, (size_t)(slash - key));
	top[slash - key] = '\0';
	return ws_key_slot_parse(key, top, &e, &g, &l, &s);
}

uint64_t ws_key_any_manifest_seq(const char *tenant, const char *key)
{
	uint64_t e, p, l, seq = ws_key_manifest_seq(key);
	if (seq == 0 && !ws_key_slot_parse(key, tenant, &e, &p, &l, &seq))
		return 0;
	return seq;
}

int ws_slot_manifest_bound(const char *tenant, const char *key, const struct ws_fmt_manifest *m)
{
	uint64_t e, p, l, seq;
	const char *why = NULL;
	if (!ws_key_slot_parse(key, tenant, &e, &p, &l, &seq)) {
		if (m->lane == 0)
			return 0;
		return ws_fail(WS_EFORMAT, "tenant %s: manifest %s is a manifest slot's (version 4, lane %016" PRIx64
			       ") at a key that is no slot's", tenant, key, m->lane);
	}
	if (m->lane == 0)
		why = "it is no slot (version 3 or older)";
	else if (strcmp(m->tenant, tenant) != 0)
		why = "its tenant differs";
	else if (m->epoch != e || m->pointer_generation != p)
		why = "its epoch or pointer generation differs";
	else if (m->lane != l)
		why = "its lane differs";
	else if (m->wm_seq != seq)
		why = "its sequence differs";
	if (!why)
		return 0;
	return ws_fail(WS_EFORMAT, "tenant %s: manifest slot %s holds a manifest its key does not name (%s: tenant "
		       "'%s', epoch %" PRIu64 ", pointer generation %" PRIu64 ", lane %016" PRIx64 ", sequence %"
		       PRIu64 "): refused", tenant, key, why, m->tenant, m->epoch, m->pointer_generation, m->lane,
		       m->wm_seq);
}
