/*
 * Checkpoint decision store, part 1: the durable objects as canonical JSON.
 * docs/CHECKPOINTS.md is the byte-level specification; this file must match
 * it field for field.
 *
 * Canonical form: jansson's JSON_COMPACT | JSON_SORT_KEYS output (no
 * whitespace, object keys in byte order, strings in UTF-8, "/" unescaped).
 * Every u64 is a JSON string of decimal digits without leading zeros, so no
 * reader's double can round it. A reader decodes (duplicate keys rejected),
 * re-encodes and compares bytes: anything that is not exactly the canonical
 * encoding is rejected, so one logical object has one byte string, one
 * SHA-256 and one etag. Every object has exactly its listed fields; an
 * extra or missing field, a wrong "format" or a foreign "deployment" is
 * WS_EFORMAT naming the key.
 */
#include "ckpt_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_format.h"

static _Thread_local enum ws_ckpt_kind g_kind;

enum ws_ckpt_kind ws_ckpt_last_kind(void)
{
	return g_kind;
}

void ckpt_kind_set(enum ws_ckpt_kind k)
{
	g_kind = k;
}

const char *ws_ckpt_kind_name(enum ws_ckpt_kind k)
{
	static const char *const names[] = {
		[WS_CKPT_OK] = "ok",
		[WS_CKPT_CONVERGED] = "converged",
		[WS_CKPT_STALE_EPOCH] = "stale epoch",
		[WS_CKPT_CONFLICTING_OUTCOME] = "conflicting outcome",
		[WS_CKPT_STALE_CHECKPOINT] = "stale checkpoint",
		[WS_CKPT_ACTIVE_ATTEMPT] = "different active attempt",
		[WS_CKPT_TERMINAL_ATTEMPT_REUSED] = "reused terminal attempt",
		[WS_CKPT_CONFLICTING_BODY] = "conflicting body",
		[WS_CKPT_SEALED] = "sealed aborted candidate",
		[WS_CKPT_FORKED_PREDECESSOR] = "forked commit predecessor",
		[WS_CKPT_STALE_CUT] = "stale retention cut",
		[WS_CKPT_STATE_MISMATCH] = "state mismatch",
		[WS_CKPT_CLUSTER_AUTHORITY] = "cluster authority",
		[WS_CKPT_INVALID_INPUT] = "invalid input",
		[WS_CKPT_FOREIGN] = "foreign deployment",
		[WS_CKPT_MALFORMED] = "malformed",
		[WS_CKPT_REF_MISMATCH] = "reference mismatch",
		[WS_CKPT_MISSING] = "missing",
		[WS_CKPT_EXHAUSTED] = "ID space exhausted",
		[WS_CKPT_NO_CONDITIONAL] = "no conditional writes",
		[WS_CKPT_LEASE_HELD] = "lease held",
		[WS_CKPT_IO] = "object store I/O",
	};
	if ((unsigned)k < sizeof(names) / sizeof(names[0]) && names[k])
		return names[k];
	return "unknown";
}

int ckpt_fail(enum ws_ckpt_kind k, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ws_failv(code, fmt, ap);
	va_end(ap);
	g_kind = k;
	return code;
}

/* ---- encoding ------------------------------------------------------------- */

/* Builders: a NULL argument (a failed allocation below) makes the result NULL. */
static json_t *jobj(void)
{
	return json_object();
}

static void jset(json_t *o, const char *name, json_t *v, bool *bad)
{
	if (!o || !v || json_object_set_new(o, name, v) != 0)
		*bad = true;
}

static json_t *ju64(uint64_t v)
{
	char s[24];
	snprintf(s, sizeof(s), "%" PRIu64, v);
	return json_string(s);
}

static json_t *done(json_t *o, bool bad)
{
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *enc_ref(const struct ws_ckpt_ref *r)
{
	bool bad = false;
	json_t *o = jobj();
	jset(o, "id", ju64(r->id), &bad);
	jset(o, "key", json_string(r->key), &bad);
	jset(o, "length", ju64(r->length), &bad);
	jset(o, "sha256", json_string(r->sha256), &bad);
	return done(o, bad);
}

static json_t *enc_attempt(const struct ws_ckpt_attempt *a)
{
	bool bad = false;
	json_t *o = jobj();
	jset(o, "checkpoint_id", ju64(a->checkpoint_id), &bad);
	jset(o, "epoch", ju64(a->epoch), &bad);
	jset(o, "token", ju64(a->token), &bad);
	return done(o, bad);
}

static json_t *enc_outcome(const struct ws_ckpt_outcome *oc)
{
	bool bad = false;
	json_t *o = jobj();
	jset(o, "checkpoint_id", ju64(oc->checkpoint_id), &bad);
	jset(o, "committed", oc->has_committed ? enc_ref(&oc->committed) : json_null(), &bad);
	jset(o, "epoch", ju64(oc->epoch), &bad);
	jset(o, "scope", json_string("local"), &bad);
	jset(o, "verdict", json_string(oc->verdict == WS_CKPT_COMMIT ? "commit" : "abort"), &bad);
	return done(o, bad);
}

static json_t *head_obj(const char *format, const char *dep)
{
	bool bad = false;
	json_t *o = jobj();
	jset(o, "format", json_string(format), &bad);
	jset(o, "deployment", json_string(dep), &bad);
	return done(o, bad);
}

/* The canonical bytes of o (consumed); NULL on allocation failure. */
static char *dump(json_t *o, size_t *len)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	if (s)
		*len = strlen(s);
	return s;
}

char *ckpt_enc_index(const struct ws_ckpt_index *idx, size_t *len)
{
	bool bad = false;
	json_t *o = head_obj(CKPT_FMT_INDEX, idx->deployment);
	json_t *tenants = json_array(), *arts = json_array();

	for (size_t i = 0; i < idx->tenant_count; i++) {
		const struct ws_ckpt_tenant_entry *t = &idx->tenants[i];
		json_t *e = jobj();
		jset(e, "last_frame", ju64(t->last_frame), &bad);
		jset(e, "manifest_key", json_string(t->manifest_key), &bad);
		jset(e, "manifest_length", ju64(t->manifest_length), &bad);
		jset(e, "manifest_sha256", json_string(t->manifest_sha256), &bad);
		jset(e, "tenant", json_string(t->tenant), &bad);
		jset(e, "wal_generation", ju64(t->wal_generation), &bad);
		if (!e || json_array_append_new(tenants, e) != 0)
			bad = true;
	}
	for (size_t i = 0; i < idx->artifact_count; i++) {
		const struct ws_ckpt_artifact *a = &idx->artifacts[i];
		json_t *e = jobj();
		jset(e, "key", json_string(a->key), &bad);
		jset(e, "length", ju64(a->length), &bad);
		jset(e, "sha256", json_string(a->sha256), &bad);
		if (!e || json_array_append_new(arts, e) != 0)
			bad = true;
	}
	jset(o, "artifacts", arts, &bad);
	jset(o, "checkpoint_id", ju64(idx->checkpoint_id), &bad);
	jset(o, "epoch", ju64(idx->epoch), &bad);
	jset(o, "predecessor", idx->has_predecessor ? enc_ref(&idx->predecessor) : json_null(), &bad);
	jset(o, "tenants", tenants, &bad);
	return dump(done(o, bad), len);
}

char *ckpt_enc_seal(const char *dep, uint64_t id, const char *sha, uint64_t length, size_t *len)
{
	bool bad = false;
	json_t *o = head_obj(CKPT_FMT_SEAL, dep);
	jset(o, "checkpoint_id", ju64(id), &bad);
	jset(o, "length", ju64(length), &bad);
	jset(o, "sha256", json_string(sha), &bad);
	return dump(done(o, bad), len);
}

char *ckpt_enc_deployment(const struct ckpt_deployment *d, size_t *len)
{
	bool bad = false;
	json_t *o = head_obj(CKPT_FMT_DEPLOYMENT, d->id);
	jset(o, "authority", json_string(d->local ? "local" : "shared"), &bad);
	jset(o, "next_id", ju64(d->next_id), &bad);
	return dump(done(o, bad), len);
}

char *ckpt_enc_head(const char *dep, const struct ws_ckpt_head *h, size_t *len)
{
	bool bad = false;
	json_t *o = head_obj(CKPT_FMT_HEAD, dep);
	jset(o, "decisions", ju64(h->decisions), &bad);
	jset(o, "epoch", ju64(h->epoch), &bad);
	jset(o, "latest_commit", h->has_commit ? enc_outcome(&h->latest_commit) : json_null(), &bad);
	jset(o, "latest_terminal", enc_outcome(&h->latest_terminal), &bad);
	return dump(done(o, bad), len);
}

char *ckpt_enc_inventory(const char *dep, const struct ckpt_inventory_rec *r, size_t *len)
{
	bool bad = false;
	json_t *o = head_obj(CKPT_FMT_INVENTORY, dep);
	json_t *active = json_null();

	if (r->active) {
		json_t *keys = json_array();
		active = jobj();
		for (size_t i = 0; i < r->inv.key_count; i++)
			if (!keys || json_array_append_new(keys, json_string(r->inv.keys[i])) != 0)
				bad = true;
		jset(active, "attempt", enc_attempt(&r->inv.attempt), &bad);
		jset(active, "keys", keys, &bad);
	}
	jset(o, "active", active, &bad);
	jset(o, "last_completed", r->has_completed ? enc_attempt(&r->completed) : json_null(), &bad);
	return dump(done(o, bad), len);
}

static const char *phase_name(enum ws_ckpt_retention_phase p)
{
	switch (p) {
	case WS_CKPT_RET_IDLE: return "idle";
	case WS_CKPT_RET_SWEEP_ARTIFACTS: return "sweep_artifacts";
	case WS_CKPT_RET_SWEEP_INDEXES: return "sweep_indexes";
	}
	return "?";
}

char *ckpt_enc_retention(const char *dep, const struct ws_ckpt_retention *r, size_t *len)
{
	bool bad = false;
	json_t *o = head_obj(CKPT_FMT_RETENTION, dep);
	jset(o, "generation", ju64(r->generation), &bad);
	jset(o, "phase", json_string(phase_name(r->phase)), &bad);
	jset(o, "protected", enc_ref(&r->protected_ref), &bad);
	if (r->has_kept)
		jset(o, "kept", enc_ref(&r->kept_ref), &bad);
	return dump(done(o, bad), len);
}

char *ckpt_enc_witness(const char *dep, const struct ws_ckpt_witness *w, size_t *len)
{
	bool bad = false;
	json_t *o = head_obj(CKPT_FMT_WITNESS, dep);
	json_t *sinks = json_array();
	for (size_t i = 0; i < w->sink_count; i++)
		if (!sinks || json_array_append_new(sinks, json_string(w->sinks[i])) != 0)
			bad = true;
	jset(o, "attempt", enc_attempt(&w->attempt), &bad);
	jset(o, "participant", ju64(w->participant_id), &bad);
	jset(o, "pipeline", json_string(w->pipeline), &bad);
	jset(o, "sequence", ju64(w->sequence), &bad);
	jset(o, "sinks", sinks, &bad);
	jset(o, "state", json_string(w->state == WS_CKPT_WITNESS_OPEN ? "open" : "closed"), &bad);
	return dump(done(o, bad), len);
}

/* ---- decoding --------------------------------------------------------------- */

/* Sticky parse context: the first failure is kept, later getters do nothing. */
struct pctx {
	const char *key;
	int rc;
	size_t max_values;   /* 0: CKPT_VALUES_MAX */
};

/*
 * The most values (array elements and object members, counted by the
 * commas outside strings) a decoded object may hold, checked before it is
 * parsed: the parser holds every value in memory, about 40 times its few
 * bytes of text, so a hostile object of a few hundred MiB of "0," would take
 * many GiB. An index names up to a million tenants and artifacts, a dozen
 * values each.
 */
#define CKPT_VALUES_MAX ((size_t)16 << 20)

static size_t json_commas(const uint8_t *d, size_t len, size_t stop)
{
	size_t n = 0;
	bool in_str = false;
	for (size_t i = 0; i < len && n <= stop; i++) {
		if (in_str) {
			if (d[i] == '\\')
				i++;
			else if (d[i] == '"')
				in_str = false;
		} else if (d[i] == '"') {
			in_str = true;
		} else if (d[i] == ',') {
			n++;
		}
	}
	return n;
}

WS_PRINTF(2, 3)
static void pbad(struct pctx *p, const char *fmt, ...)
{
	char why[512];
	va_list ap;
	if (p->rc)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	p->rc = ckpt_fail(WS_CKPT_MALFORMED, WS_EFORMAT, "checkpoint object %s: %s", p->key, why);
}

static json_t *pget(struct pctx *p, json_t *o, const char *name, int type)
{
	json_t *v = p->rc ? NULL : json_object_get(o, name);
	if (p->rc)
		return NULL;
	if (!v || (type >= 0 && json_typeof(v) != (json_type)type)) {
		pbad(p, "field \"%s\" is missing or has the wrong type", name);
		return NULL;
	}
	return v;
}

static void pfields(struct pctx *p, json_t *o, size_t n, const char *what)
{
	if (!p->rc && (!json_is_object(o) || json_object_size(o) != n))
		pbad(p, "%s must be an object of exactly %zu fields", what, n);
}

bool ckpt_parse_u64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

static uint64_t pu64(struct pctx *p, json_t *o, const char *name)
{
	json_t *v = pget(p, o, name, JSON_STRING);
	uint64_t out = 0;
	if (v && !ckpt_parse_u64(json_string_value(v), json_string_length(v), &out))
		pbad(p, "field \"%s\" is not a canonical decimal u64", name);
	return out;
}

static void pstr(struct pctx *p, json_t *o, const char *name, char *out, size_t cap)
{
	json_t *v = pget(p, o, name, JSON_STRING);
	out[0] = '\0';
	if (!v)
		return;
	if (json_string_length(v) >= cap || json_string_length(v) == 0) {
		pbad(p, "field \"%s\" is empty or longer than %zu bytes", name, cap - 1);
		return;
	}
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
}

bool ckpt_hex_ok(const char *s, size_t n)
{
	if (strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

bool ckpt_ref_shape_ok(const struct ws_ckpt_ref *r)
{
	char key[WS_KEY_MAX];
	if (r->id == 0 || r->id > WS_CKPT_ID_MAX || !ckpt_hex_ok(r->sha256, WS_SHA256_HEX_LEN))
		return false;
	ws_ckpt_committed_key(r->id, r->sha256, key);
	return strcmp(key, r->key) == 0;
}

static void pref(struct pctx *p, json_t *o, struct ws_ckpt_ref *r)
{
	pfields(p, o, 4, "a reference");
	r->id = pu64(p, o, "id");
	pstr(p, o, "key", r->key, sizeof(r->key));
	r->length = pu64(p, o, "length");
	pstr(p, o, "sha256", r->sha256, sizeof(r->sha256));
	if (!p->rc && !ckpt_ref_shape_ok(r))
		pbad(p, "reference to %s does not name its own id and SHA-256", r->key);
}

static void pattempt(struct pctx *p, json_t *o, struct ws_ckpt_attempt *a)
{
	pfields(p, o, 3, "an attempt");
	a->checkpoint_id = pu64(p, o, "checkpoint_id");
	a->epoch = pu64(p, o, "epoch");
	a->token = pu64(p, o, "token");
	if (!p->rc && !ckpt_attempt_ok(a))
		pbad(p, "attempt has a zero token or an id outside 1..%" PRIu64, (uint64_t)WS_CKPT_ID_MAX);
	/* Owner epochs are 0..2^63-1 (the CLI's range): one above would be
	 * recorded as the head's and no later taker could ever match it. */
	if (!p->rc && a->epoch > INT64_MAX)
		pbad(p, "attempt has epoch %" PRIu64 ", above 2^63-1", a->epoch);
}

static void poutcome(struct pctx *p, json_t *o, struct ws_ckpt_outcome *oc)
{
	json_t *v;
	memset(oc, 0, sizeof(*oc));
	pfields(p, o, 5, "an outcome");
	oc->checkpoint_id = pu64(p, o, "checkpoint_id");
	oc->epoch = pu64(p, o, "epoch");
	/* Epochs are 0..2^63-1 (the CLI's range), as an attempt's. */
	if (!p->rc && oc->epoch > INT64_MAX)
		pbad(p, "outcome has epoch %" PRIu64 ", above 2^63-1", oc->epoch);
	v = pget(p, o, "scope", JSON_STRING);
	if (v && strcmp(json_string_value(v), "local") != 0)
		pbad(p, "outcome scope is not \"local\"");
	oc->scope = WS_CKPT_SCOPE_LOCAL;
	v = pget(p, o, "verdict", JSON_STRING);
	if (v && strcmp(json_string_value(v), "commit") == 0)
		oc->verdict = WS_CKPT_COMMIT;
	else if (v && strcmp(json_string_value(v), "abort") == 0)
		oc->verdict = WS_CKPT_ABORT;
	else
		pbad(p, "outcome verdict is neither \"commit\" nor \"abort\"");
	v = pget(p, o, "committed", -1);
	if (v && !json_is_null(v)) {
		oc->has_committed = true;
		pref(p, v, &oc->committed);
	}
	if (p->rc)
		return;
	if (oc->checkpoint_id == 0 || oc->checkpoint_id > WS_CKPT_ID_MAX)
		pbad(p, "outcome checkpoint id out of range");
	else if (oc->has_committed != (oc->verdict == WS_CKPT_COMMIT))
		pbad(p, "a Commit must name its committed index and an Abort must not");
	else if (oc->has_committed && oc->committed.id != oc->checkpoint_id)
		pbad(p, "Commit of %" PRIu64 " names the index of %" PRIu64, oc->checkpoint_id,
		     oc->committed.id);
}

/*
 * Decode b as the object `format` at key: JSON, canonical, an object with
 * the format and (when dep is not NULL) deployment dep. *out is the parsed
 * object (caller decrefs). nfields: the object's exact field count.
 */
static int pdoc(struct pctx *p, const uint8_t *data, size_t len, const char *format, const char *dep,
		size_t nfields, json_t **out)
{
	json_error_t jerr;
	json_t *o, *v;
	char *again;
	size_t again_len = 0;

	*out = NULL;
	const size_t max_values = p->max_values ? p->max_values : CKPT_VALUES_MAX;
	if (json_commas(data, len, max_values) >= max_values) {
		pbad(p, "holds more than %zu values (not parsed)", max_values);
		return p->rc;
	}
	o = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o) {
		pbad(p, "not JSON: %s at byte %d", jerr.text, jerr.position);
		return p->rc;
	}
	again = dump(json_incref(o), &again_len);
	if (!again) {
		json_decref(o);
		return p->rc = ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint object %s: out of memory", p->key);
	}
	if (again_len != len || memcmp(again, data, len) != 0)
		pbad(p, "not canonical JSON (keys sorted, compact, u64 as decimal strings)");
	free(again);
	v = pget(p, o, "format", JSON_STRING);
	if (v && strcmp(json_string_value(v), format) != 0)
		pbad(p, "format is \"%s\", expected \"%s\"", json_string_value(v), format);
	pfields(p, o, nfields, "the object");
	v = pget(p, o, "deployment", JSON_STRING);
	if (v && !ckpt_hex_ok(json_string_value(v), WS_CKPT_DEPLOYMENT_LEN))
		pbad(p, "deployment is not %d lower-case hex digits", WS_CKPT_DEPLOYMENT_LEN);
	if (!p->rc && dep && strcmp(json_string_value(v), dep) != 0)
		p->rc = ckpt_fail(WS_CKPT_FOREIGN, WS_EFORMAT,
				  "checkpoint object %s: belongs to deployment %s, this namespace is %s", p->key,
				  json_string_value(v), dep[0] ? dep : "(no deployment record)");
	if (p->rc) {
		json_decref(o);
		return p->rc;
	}
	*out = o;
	return 0;
}

int ckpt_dec_deployment(const char *key, const uint8_t *data, size_t len, struct ckpt_deployment *d)
{
	struct pctx p = { key, 0, 0 };
	json_t *o, *v;
	if (pdoc(&p, data, len, CKPT_FMT_DEPLOYMENT, NULL, 4, &o))
		return p.rc;
	pstr(&p, o, "deployment", d->id, sizeof(d->id));
	d->next_id = pu64(&p, o, "next_id");
	v = pget(&p, o, "authority", JSON_STRING);
	if (v && strcmp(json_string_value(v), "local") == 0)
		d->local = true;
	else if (v && strcmp(json_string_value(v), "shared") == 0)
		d->local = false;
	else
		pbad(&p, "authority is neither \"local\" nor \"shared\"");
	if (!p.rc && d->next_id == 0)
		pbad(&p, "next_id is 0 (IDs start at 1)");
	json_decref(o);
	return p.rc;
}

const char *ckpt_index_invalid(const struct ws_ckpt_index *idx, char *why, size_t cap)
{
	if (!ckpt_hex_ok(idx->deployment, WS_CKPT_DEPLOYMENT_LEN))
		return snprintf(why, cap, "deployment is not %d hex digits", WS_CKPT_DEPLOYMENT_LEN), why;
	if (idx->checkpoint_id == 0 || idx->checkpoint_id > WS_CKPT_ID_MAX)
		return snprintf(why, cap, "checkpoint id %" PRIu64 " out of range", idx->checkpoint_id), why;
	if (idx->tenant_count > WS_CKPT_TENANTS_MAX || (idx->tenant_count && !idx->tenants))
		return snprintf(why, cap, "too many tenants (%zu)", idx->tenant_count), why;
	if (idx->artifact_count > WS_CKPT_ARTIFACTS_MAX || (idx->artifact_count && !idx->artifacts))
		return snprintf(why, cap, "too many artifacts (%zu)", idx->artifact_count), why;
	for (size_t i = 0; i < idx->tenant_count; i++) {
		const struct ws_ckpt_tenant_entry *t = &idx->tenants[i];
		if (!memchr(t->tenant, 0, sizeof(t->tenant)) || !ws_tenant_name_valid(t->tenant) ||
		    strcmp(t->tenant, WS_CKPT_PREFIX) == 0)
			return snprintf(why, cap, "tenant %zu has an invalid or reserved name", i), why;
		if (i && strcmp(idx->tenants[i - 1].tenant, t->tenant) >= 0)
			return snprintf(why, cap, "tenants not strictly sorted at \"%s\"", t->tenant), why;
		if (!memchr(t->manifest_key, 0, sizeof(t->manifest_key)) || !ws_key_valid(t->manifest_key) ||
		    !memchr(t->manifest_sha256, 0, sizeof(t->manifest_sha256)) ||
		    !ckpt_hex_ok(t->manifest_sha256, WS_SHA256_HEX_LEN))
			return snprintf(why, cap, "tenant \"%s\" has an invalid manifest key or SHA-256",
					t->tenant), why;
	}
	for (size_t i = 0; i < idx->artifact_count; i++) {
		const struct ws_ckpt_artifact *a = &idx->artifacts[i];
		if (!memchr(a->key, 0, sizeof(a->key)) || !ws_key_valid(a->key) ||
		    !memchr(a->sha256, 0, sizeof(a->sha256)) || !ckpt_hex_ok(a->sha256, WS_SHA256_HEX_LEN))
			return snprintf(why, cap, "artifact %zu has an invalid key or SHA-256", i), why;
		if (i && strcmp(idx->artifacts[i - 1].key, a->key) >= 0)
			return snprintf(why, cap, "artifacts not strictly sorted at \"%s\"", a->key), why;
	}
	if (idx->has_predecessor) {
		if (!memchr(idx->predecessor.key, 0, sizeof(idx->predecessor.key)) ||
		    !ckpt_ref_shape_ok(&idx->predecessor))
			return snprintf(why, cap, "predecessor reference is malformed"), why;
		if (idx->predecessor.id >= idx->checkpoint_id)
			return snprintf(why, cap, "predecessor %" PRIu64 " is not older than %" PRIu64,
					idx->predecessor.id, idx->checkpoint_id), why;
	}
	return NULL;
}

int ckpt_dec_index(const char *key, const uint8_t *data, size_t len, const char *dep, struct ws_ckpt_index *idx)
{
	struct pctx p = { key, 0, 0 };
	json_t *o, *ts, *as, *v;
	char why[256];

	memset(idx, 0, sizeof(*idx));
	if (pdoc(&p, data, len, CKPT_FMT_INDEX, dep, 7, &o))
		return p.rc;
	pstr(&p, o, "deployment", idx->deployment, sizeof(idx->deployment));
	idx->checkpoint_id = pu64(&p, o, "checkpoint_id");
	idx->epoch = pu64(&p, o, "epoch");
	if (!p.rc && idx->epoch > INT64_MAX)
		pbad(&p, "index has epoch %" PRIu64 ", above 2^63-1", idx->epoch);
	v = pget(&p, o, "predecessor", -1);
	if (v && !json_is_null(v)) {
		idx->has_predecessor = true;
		pref(&p, v, &idx->predecessor);
	}
	ts = pget(&p, o, "tenants", JSON_ARRAY);
	as = pget(&p, o, "artifacts", JSON_ARRAY);
	if (p.rc)
		goto out;
	if (json_array_size(ts) > WS_CKPT_TENANTS_MAX || json_array_size(as) > WS_CKPT_ARTIFACTS_MAX) {
		pbad(&p, "more than %u tenants or artifacts", WS_CKPT_TENANTS_MAX);
		goto out;
	}
	idx->tenants = calloc(json_array_size(ts) + 1, sizeof(*idx->tenants));
	idx->artifacts = calloc(json_array_size(as) + 1, sizeof(*idx->artifacts));
	if (!idx->tenants || !idx->artifacts) {
		p.rc = ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint object %s: out of memory", key);
		goto out;
	}
	for (size_t i = 0; i < json_array_size(ts) && !p.rc; i++) {
		struct ws_ckpt_tenant_entry *t = &idx->tenants[i];
		json_t *e = json_array_get(ts, i);
		pfields(&p, e, 6, "a tenant entry");
		pstr(&p, e, "tenant", t->tenant, sizeof(t->tenant));
		t->wal_generation = pu64(&p, e, "wal_generation");
		t->last_frame = pu64(&p, e, "last_frame");
		pstr(&p, e, "manifest_key", t->manifest_key, sizeof(t->manifest_key));
		pstr(&p, e, "manifest_sha256", t->manifest_sha256, sizeof(t->manifest_sha256));
		t->manifest_length = pu64(&p, e, "manifest_length");
		idx->tenant_count = i + 1;
	}
	for (size_t i = 0; i < json_array_size(as) && !p.rc; i++) {
		struct ws_ckpt_artifact *a = &idx->artifacts[i];
		json_t *e = json_array_get(as, i);
		pfields(&p, e, 3, "an artifact");
		pstr(&p, e, "key", a->key, sizeof(a->key));
		a->length = pu64(&p, e, "length");
		pstr(&p, e, "sha256", a->sha256, sizeof(a->sha256));
		idx->artifact_count = i + 1;
	}
	if (!p.rc && ckpt_index_invalid(idx, why, sizeof(why)))
		pbad(&p, "committed-index invariant: %s", why);
out:
	json_decref(o);
	if (p.rc)
		ws_ckpt_index_free(idx);
	return p.rc;
}

int ckpt_dec_seal(const char *key, const uint8_t *data, size_t len, const char *dep, struct ckpt_seal *s)
{
	struct pctx p = { key, 0, 0 };
	json_t *o;
	if (pdoc(&p, data, len, CKPT_FMT_SEAL, dep, 5, &o))
		return p.rc;
	s->checkpoint_id = pu64(&p, o, "checkpoint_id");
	s->length = pu64(&p, o, "length");
	pstr(&p, o, "sha256", s->sha256, sizeof(s->sha256));
	if (!p.rc && !ckpt_hex_ok(s->sha256, WS_SHA256_HEX_LEN))
		pbad(&p, "seal SHA-256 is not 64 lower-case hex digits");
	json_decref(o);
	return p.rc;
}

bool ckpt_is_seal(const uint8_t *data, size_t len)
{
	static const char needle[] = "\"format\":\"" CKPT_FMT_SEAL "\"";
	/* An empty object (data may then be NULL) holds no seal; memmem's
	 * arguments must be valid pointers even for zero lengths. */
	if (!data || len < sizeof(needle) - 1)
		return false;
	return memmem(data, len, needle, sizeof(needle) - 1) != NULL;
}

int ckpt_dec_head(const char *key, const uint8_t *data, size_t len, const char *dep, struct ws_ckpt_head *h)
{
	struct pctx p = { key, 0, 0 };
	json_t *o, *v;
	memset(h, 0, sizeof(*h));
	if (pdoc(&p, data, len, CKPT_FMT_HEAD, dep, 6, &o))
		return p.rc;
	h->decisions = pu64(&p, o, "decisions");
	h->epoch = pu64(&p, o, "epoch");
	/* An epoch above the CLI's range would fence every later taker, as if
	 * a newer owner had decided: a forged or damaged head, said so. */
	if (!p.rc && h->epoch > INT64_MAX)
		pbad(&p, "head has epoch %" PRIu64 ", above 2^63-1", h->epoch);
	v = pget(&p, o, "latest_terminal", JSON_OBJECT);
	if (v)
		poutcome(&p, v, &h->latest_terminal);
	v = pget(&p, o, "latest_commit", -1);
	if (v && !json_is_null(v)) {
		h->has_commit = true;
		poutcome(&p, v, &h->latest_commit);
	}
	if (p.rc)
		goto out;
	if (h->decisions == 0 || h->latest_terminal.epoch > h->epoch)
		pbad(&p, "head has no decisions or a terminal epoch above the head epoch");
	else if (h->latest_terminal.verdict == WS_CKPT_COMMIT &&
		 (!h->has_commit || !ckpt_outcome_equal(&h->latest_terminal, &h->latest_commit)))
		pbad(&p, "latest terminal is a Commit but latest commit differs");
	else if (h->has_commit && (h->latest_commit.verdict != WS_CKPT_COMMIT ||
				   h->latest_commit.checkpoint_id > h->latest_terminal.checkpoint_id))
		pbad(&p, "latest commit is not a Commit at or before the latest terminal");
out:
	json_decref(o);
	return p.rc;
}

/* Strictly sorted strings of 1..cap-1 bytes into out[i * cap]. */
static void pkeys(struct pctx *p, json_t *arr, size_t max, char *out, size_t *count, size_t cap)
{
	if (!p->rc && json_array_size(arr) > max) {
		pbad(p, "more than %zu keys", max);
		return;
	}
	*count = 0;
	for (size_t i = 0; i < json_array_size(arr) && !p->rc; i++) {
		json_t *k = json_array_get(arr, i);
		if (!json_is_string(k) || json_string_length(k) >= cap || json_string_length(k) == 0) {
			pbad(p, "key %zu is not a string of 1..%zu bytes", i, cap - 1);
			return;
		}
		memcpy(out + i * cap, json_string_value(k), json_string_length(k) + 1);
		if (i && strcmp(out + (i - 1) * cap, out + i * cap) >= 0)
			pbad(p, "keys not strictly sorted at \"%s\"", out + i * cap);
		*count = i + 1;
	}
}

int ckpt_dec_inventory(const char *key, const uint8_t *data, size_t len, const char *dep,
		       struct ckpt_inventory_rec *r)
{
	/* One key per artifact, and a few fields around them. */
	struct pctx p = { key, 0, WS_CKPT_ARTIFACTS_MAX + 64 };
	json_t *o, *v, *keys;
	memset(r, 0, sizeof(*r));
	if (pdoc(&p, data, len, CKPT_FMT_INVENTORY, dep, 4, &o))
		return p.rc;
	snprintf(r->inv.deployment, sizeof(r->inv.deployment), "%s", dep ? dep : "");
	v = pget(&p, o, "last_completed", -1);
	if (v && !json_is_null(v)) {
		r->has_completed = true;
		pattempt(&p, v, &r->completed);
	}
	v = pget(&p, o, "active", -1);
	if (v && !json_is_null(v)) {
		r->active = true;
		pfields(&p, v, 2, "the active attempt");
		pattempt(&p, json_object_get(v, "attempt"), &r->inv.attempt);
		keys = pget(&p, v, "keys", JSON_ARRAY);
		if (keys && !p.rc && json_array_size(keys) > WS_CKPT_ARTIFACTS_MAX)
			pbad(&p, "active attempt names %zu keys, more than %u", json_array_size(keys),
			     WS_CKPT_ARTIFACTS_MAX);
		if (keys && !p.rc) {
			r->inv.keys = calloc(json_array_size(keys) + 1, WS_KEY_MAX);
			if (!r->inv.keys)
				p.rc = ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint object %s: out of memory", key);
			else
				pkeys(&p, keys, WS_CKPT_ARTIFACTS_MAX, r->inv.keys[0], &r->inv.key_count, WS_KEY_MAX);
			for (size_t i = 0; i < r->inv.key_count && !p.rc; i++)
				if (!ws_key_valid(r->inv.keys[i]))
					pbad(&p, "artifact key %zu is not a valid object key", i);
		}
	}
	json_decref(o);
	if (p.rc) {
		free(r->inv.keys);
		r->inv.keys = NULL;
	}
	return p.rc;
}

int ckpt_dec_retention(const char *key, const uint8_t *data, size_t len, const char *dep,
		       struct ws_ckpt_retention *r)
{
	struct pctx p = { key, 0, 0 };
	json_t *o, *v;
	/* "kept" is there only for a run that keeps older checkpoints: the
	 * field count says which (the parse checks it exactly). */
	const bool kept = memmem(data, len, "\"kept\":", 7) != NULL;
	memset(r, 0, sizeof(*r));
	if (pdoc(&p, data, len, CKPT_FMT_RETENTION, dep, kept ? 6 : 5, &o))
		return p.rc;
	r->generation = pu64(&p, o, "generation");
	v = pget(&p, o, "phase", JSON_STRING);
	if (v) {
		const char *s = json_string_value(v);
		if (strcmp(s, "idle") == 0)
			r->phase = WS_CKPT_RET_IDLE;
		else if (strcmp(s, "sweep_artifacts") == 0)
			r->phase = WS_CKPT_RET_SWEEP_ARTIFACTS;
		else if (strcmp(s, "sweep_indexes") == 0)
			r->phase = WS_CKPT_RET_SWEEP_INDEXES;
		else
			pbad(&p, "unknown retention phase \"%s\"", s);
	}
	v = pget(&p, o, "protected", JSON_OBJECT);
	if (v)
		pref(&p, v, &r->protected_ref);
	if (kept) {
		v = pget(&p, o, "kept", JSON_OBJECT);
		if (v)
			pref(&p, v, &r->kept_ref);
		r->has_kept = true;
		if (!p.rc && r->kept_ref.id >= r->protected_ref.id)
			pbad(&p, "retention keeps checkpoint %" PRIu64 ", not older than the protected %" PRIu64,
			     r->kept_ref.id, r->protected_ref.id);
	}
	if (!p.rc && r->generation == 0)
		pbad(&p, "retention generation is 0");
	/* Each phase adds one: a generation this high could only wrap to 0
	 * (a state no reader accepts) after a write that already deleted. */
	if (!p.rc && r->generation > INT64_MAX)
		pbad(&p, "retention generation %" PRIu64 " is above 2^63-1", r->generation);
	json_decref(o);
	return p.rc;
}

bool ckpt_name_ok(const char *s)
{
	size_t n = strnlen(s, WS_CKPT_NAME_MAX);
	if (n == 0 || n >= WS_CKPT_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

int ckpt_dec_witness(const char *key, const uint8_t *data, size_t len, const char *dep, struct ws_ckpt_witness *w)
{
	struct pctx p = { key, 0, 0 };
	json_t *o, *v;
	memset(w, 0, sizeof(*w));
	if (pdoc(&p, data, len, CKPT_FMT_WITNESS, dep, 8, &o))
		return p.rc;
	v = pget(&p, o, "attempt", JSON_OBJECT);
	if (v)
		pattempt(&p, v, &w->attempt);
	w->participant_id = pu64(&p, o, "participant");
	pstr(&p, o, "pipeline", w->pipeline, sizeof(w->pipeline));
	w->sequence = pu64(&p, o, "sequence");
	v = pget(&p, o, "sinks", JSON_ARRAY);
	if (v)
		pkeys(&p, v, WS_CKPT_SINKS_MAX, w->sinks[0], &w->sink_count, WS_CKPT_NAME_MAX);
	for (size_t i = 0; i < w->sink_count && !p.rc; i++)
		if (!ckpt_name_ok(w->sinks[i]))
			pbad(&p, "sink name %zu is not printable ASCII", i);
	if (!p.rc && !ckpt_name_ok(w->pipeline))
		pbad(&p, "pipeline identity is not printable ASCII");
	v = pget(&p, o, "state", JSON_STRING);
	if (v && strcmp(json_string_value(v), "open") == 0)
		w->state = WS_CKPT_WITNESS_OPEN;
	else if (v && strcmp(json_string_value(v), "closed") == 0)
		w->state = WS_CKPT_WITNESS_CLOSED;
	else
		pbad(&p, "witness state is neither \"open\" nor \"closed\"");
	if (!p.rc && w->sequence == 0)
		pbad(&p, "witness sequence is 0");
	json_decref(o);
	return p.rc;
}

char *ckpt_enc_removed(const char *dep, const char *tenant, uint64_t after, size_t *len)
{
	bool bad = false;
	json_t *o = head_obj(CKPT_FMT_REMOVED, dep);
	jset(o, "after_checkpoint", ju64(after), &bad);
	jset(o, "tenant", json_string(tenant), &bad);
	return dump(done(o, bad), len);
}

int ckpt_dec_removed(const char *key, const uint8_t *data, size_t len, const char *dep, const char *tenant,
		     uint64_t *after)
{
	struct pctx p = { key, 0, 0 };
	char name[WS_CKPT_NAME_MAX];
	json_t *o;
	if (pdoc(&p, data, len, CKPT_FMT_REMOVED, dep, 4, &o))
		return p.rc;
	*after = pu64(&p, o, "after_checkpoint");
	pstr(&p, o, "tenant", name, sizeof(name));
	if (!p.rc && (*after > WS_CKPT_ID_MAX || strcmp(name, tenant) != 0))
		pbad(&p, "names tenant \"%s\" after checkpoint %" PRIu64 ", not tenant %s after a valid ID", name,
		     *after, tenant);
	json_decref(o);
	return p.rc;
}

/* ---- comparisons ------------------------------------------------------------ */

bool ckpt_ref_equal(const struct ws_ckpt_ref *a, const struct ws_ckpt_ref *b)
{
	return a->id == b->id && a->length == b->length && strcmp(a->sha256, b->sha256) == 0 &&
	       strcmp(a->key, b->key) == 0;
}

bool ckpt_outcome_equal(const struct ws_ckpt_outcome *a, const struct ws_ckpt_outcome *b)
{
	return a->checkpoint_id == b->checkpoint_id && a->epoch == b->epoch && a->scope == b->scope &&
	       a->verdict == b->verdict && a->has_committed == b->has_committed &&
	       (!a->has_committed || ckpt_ref_equal(&a->committed, &b->committed));
}

bool ckpt_attempt_ok(const struct ws_ckpt_attempt *a)
{
	return a->token != 0 && a->checkpoint_id != 0 && a->checkpoint_id <= WS_CKPT_ID_MAX;
}

bool ws_ckpt_attempt_equal(const struct ws_ckpt_attempt *a, const struct ws_ckpt_attempt *b)
{
	return a->checkpoint_id == b->checkpoint_id && a->epoch == b->epoch && a->token == b->token;
}

void ws_ckpt_committed_key(uint64_t id, const char *sha256_hex, char *out)
{
	snprintf(out, WS_KEY_MAX, WS_CKPT_PREFIX "/committed/%016" PRIx64 "-%.64s.json", id, sha256_hex);
}

void ws_ckpt_index_free(struct ws_ckpt_index *idx)
{
	if (!idx)
		return;
	free(idx->tenants);
	free(idx->artifacts);
	idx->tenants = NULL;
	idx->artifacts = NULL;
	idx->tenant_count = 0;
	idx->artifact_count = 0;
}
