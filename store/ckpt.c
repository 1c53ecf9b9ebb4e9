/*
 * Checkpoint decision store, part 2: the protocol. Objects and their bytes
 * are in ckpt_json.c and docs/CHECKPOINTS.md.
 *
 * Every mutation is one conditional PUT of one object: create-once for a
 * new object, compare-and-swap against the etag just read for a singleton.
 * A lost condition means someone else moved first: re-read and decide again
 * (bounded by RETRY_MAX). Every CAS'd singleton carries a counter that only
 * grows (next_id, decisions, generation, sequence), so two states never
 * share bytes and an etag can never come back (no ABA on content etags).
 * An identical retry finds its own write and converges without writing.
 *
 * Fault sites "ckpt.<op>.<step>" sit between durable steps so crash tests
 * can stop a writer at each one.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ckpt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <unistd.h>

#include "ws_assert.h"
#include "ws_fault.h"

#define KEY_DEPLOYMENT WS_CKPT_PREFIX "/deployment"
#define KEY_HEAD WS_CKPT_PREFIX "/head"
#define KEY_INVENTORY WS_CKPT_PREFIX "/inventory"
#define KEY_RETENTION WS_CKPT_PREFIX "/retention"
#define KEY_WITNESS WS_CKPT_PREFIX "/witness"
#define KEY_PROBE_DIR WS_CKPT_PREFIX "/probe"
#define LEASE_NAME ".lock.ckpt-lease"   /* the file store hides and never lists ".lock." names */
#define RETRY_MAX 256

struct ws_ckpt {
	struct ws_store *s;
	bool owns_store;
	bool local;
	bool reader;         /* ws_ckpt_open_reader: either authority, no writes */
	int lease_fd;
	bool dep_known;
	char dep[WS_CKPT_DEPLOYMENT_LEN + 1];
	/* local: IDs [mem_next, mem_end) are reserved durably and not handed out yet */
	uint64_t mem_next, mem_end;
};

/* ---- plumbing --------------------------------------------------------------- */

static int io_fail(int rc, const char *op, const char *key)
{
	ckpt_kind_set(WS_CKPT_IO);
	return ws_fail_wrap(rc, "checkpoint store: %s %s", op, key);
}

/* GET key into b. *found false (rc 0) when the object is absent. */
static int get_obj(struct ws_ckpt *c, const char *key, size_t max, struct ws_buf *b, struct ws_etag *etag,
		   bool *found)
{
	struct ws_obj_info info;
	int rc;

	ws_buf_init(b, max);
	memset(&info, 0, sizeof(info));
	rc = ws_store_get(c->s, key, 0, UINT64_MAX, b, &info);
	*found = rc == 0;
	if (rc == WS_ENOTFOUND)
		return 0;
	if (rc == WS_ETOOBIG)
		return ckpt_fail(WS_CKPT_MALFORMED, WS_EFORMAT, "checkpoint object %s: larger than %zu bytes",
				 key, max);
	if (rc)
		return io_fail(rc, "get", key);
	if (info.size_bytes != b->len)
		return ckpt_fail(WS_CKPT_MALFORMED, WS_ECORRUPT,
				 "checkpoint object %s: read %zu bytes of %" PRIu64, key, b->len, info.size_bytes);
	if (etag)
		*etag = info.etag;
	return 0;
}

/*
 * Conditional PUT of body (freed here). mode CAS when found (expect = etag)
 * else CREATE. Returns 0, WS_EPRECOND (kind untouched: the caller re-reads),
 * or an error.
 */
static int put_obj(struct ws_ckpt *c, const char *key, char *body, size_t len, bool found,
		   const struct ws_etag *etag, struct ws_etag *out_etag)
{
	int rc;
	if (!body)
		return ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: encode %s: out of memory", key);
	if (c->reader) {
		free(body);
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG,
				 "checkpoint store: %s: a read-only handle never writes", key);
	}
	rc = ws_store_put(c->s, key, body, len, found ? WS_PUT_CAS : WS_PUT_CREATE, found ? etag : NULL,
			  out_etag);
	free(body);
	if (rc && rc != WS_EPRECOND)
		return io_fail(rc, "put", key);
	return rc;
}

/* A read-only handle (ws_ckpt_open_reader) never writes. */
static int reader_refused(const struct ws_ckpt *c, const char *what)
{
	if (!c->reader)
		return 0;
	return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: %s: a read-only handle never "
			 "writes", what);
}

static int contention(const char *key)
{
	return ckpt_fail(WS_CKPT_STATE_MISMATCH, WS_EPRECOND,
			 "checkpoint store: %s: lost %d compare-and-swaps in a row", key, RETRY_MAX);
}

static int fault(const char *site)
{
	int rc = WS_FAULT(site);
	(void)site; /* unused in builds without WS_FAULTS */
	if (rc)
		return ckpt_fail(WS_CKPT_IO, rc, "checkpoint store: fault site %s fired", site);
	return 0;
}

/* Set the kind of a finished update (written, or an identical retry) and pass its after-write site. */
static int finish(bool wrote, const char *after_site)
{
	ckpt_kind_set(wrote ? WS_CKPT_OK : WS_CKPT_CONVERGED);
	return wrote ? fault(after_site) : 0;
}

/* The expected deployment for reads: "" (matches nothing) when none exists yet. */
static const char *dep_or_none(struct ws_ckpt *c)
{
	return c->dep_known ? c->dep : "";
}

/* The CAS'd singletons, each one fixed key read with one GET (never a listing). */
enum singleton { OBJ_HEAD, OBJ_INVENTORY, OBJ_RETENTION, OBJ_WITNESS };
static const char *const singleton_key[] = { KEY_HEAD, KEY_INVENTORY, KEY_RETENTION, KEY_WITNESS };

/* GET and strictly decode one singleton into out (its struct); *found false when absent. */
static int load_singleton(struct ws_ckpt *c, enum singleton o, void *out, struct ws_etag *etag, bool *found)
{
	const char *key = singleton_key[o], *dep = dep_or_none(c);
	struct ws_buf b;
	int rc = get_obj(c, key, o == OBJ_INVENTORY ? WS_CKPT_INDEX_BYTES_MAX : WS_CKPT_SINGLETON_BYTES_MAX, &b,
			 etag, found);

	if (rc == 0 && *found) {
		switch (o) {
		case OBJ_HEAD:
			rc = ckpt_dec_head(key, b.data, b.len, dep, out);
			break;
		case OBJ_INVENTORY:
			rc = ckpt_dec_inventory(key, b.data, b.len, dep, out);
			break;
		case OBJ_RETENTION:
			rc = ckpt_dec_retention(key, b.data, b.len, dep, out);
			break;
		case OBJ_WITNESS:
			rc = ckpt_dec_witness(key, b.data, b.len, dep, out);
			break;
		}
	}
	ws_buf_free(&b);
	return rc;
}

/* Fault site `site`, then the conditional PUT of body (freed): 0, WS_EPRECOND or an error. */
static int cas_step(struct ws_ckpt *c, const char *site, const char *key, char *body, size_t len, bool found,
		    const struct ws_etag *etag)
{
	int rc = fault(site);
	if (rc) {
		free(body);
		return rc;
	}
	return put_obj(c, key, body, len, found, etag, NULL);
}

/*
 * The read-decide-write loop of every singleton update. decide() looks at
 * the state just read into op->cur (absent when !found) and returns 1 with a
 * new body for a conditional write, 0 when the call is done without writing
 * (an identical retry), or an error. A lost condition re-reads and decides
 * again. *wrote tells the caller which way a 0 came.
 */
struct cas_op;
typedef int (*cas_decide_fn)(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len);
struct cas_op {
	enum singleton obj;
	const char *site;       /* fault site right before the write */
	void *cur;              /* the state load_singleton fills */
	cas_decide_fn decide;
	const void *in;         /* the call's input */
};

static int cas_loop(struct ws_ckpt *c, struct cas_op *op, bool *wrote)
{
	*wrote = false;
	for (int i = 0; i < RETRY_MAX; i++) {
		struct ws_etag etag;
		bool found;
		char *body = NULL;
		size_t len = 0;
		int rc = load_singleton(c, op->obj, op->cur, &etag, &found);

		if (rc == 0)
			rc = op->decide(c, op, found, &body, &len);
		if (rc <= 0)
			return rc;
		rc = cas_step(c, op->site, singleton_key[op->obj], body, len, found, &etag);
		if (rc != WS_EPRECOND) {
			*wrote = rc == 0;
			return rc;
		}
	}
	return contention(singleton_key[op->obj]);
}

static int load_deployment(struct ws_ckpt *c, struct ckpt_deployment *d, struct ws_etag *etag, bool *found)
{
	struct ws_buf b;
	int rc = get_obj(c, KEY_DEPLOYMENT, 4096, &b, etag, found);
	if (rc == 0 && *found)
		rc = ckpt_dec_deployment(KEY_DEPLOYMENT, b.data, b.len, d);
	ws_buf_free(&b);
	if (rc || !*found)
		return rc;
	if (c->reader)
		c->local = d->local; /* a reader reads either authority's namespace */
	if (d->local != c->local)
		return ckpt_fail(WS_CKPT_FOREIGN, WS_EFORMAT,
				 "checkpoint object %s: the namespace belongs to a %s authority, this store "
				 "is %s", KEY_DEPLOYMENT, d->local ? "local single-writer" : "shared",
				 c->local ? "a local single writer" : "shared");
	if (c->dep_known && strcmp(c->dep, d->id) != 0)
		return ckpt_fail(WS_CKPT_FOREIGN, WS_EFORMAT,
				 "checkpoint object %s: deployment changed from %s to %s under this store",
				 KEY_DEPLOYMENT, c->dep, d->id);
	memcpy(c->dep, d->id, sizeof(c->dep));
	c->dep_known = true;
	return 0;
}

/* The deployment record, read (or created when create) into c->dep. */
static int refresh_dep(struct ws_ckpt *c, bool create)
{
	struct ckpt_deployment d;
	struct ws_etag etag;
	bool found;
	int rc;

	if (c->dep_known)
		return 0;
	for (int i = 0; i < RETRY_MAX; i++) {
		uint8_t raw[WS_CKPT_DEPLOYMENT_LEN / 2];
		char *body;
		size_t len = 0;

		rc = load_deployment(c, &d, &etag, &found);
		if (rc || found || !create)
			return rc;
		if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
			return ckpt_fail(WS_CKPT_IO, -errno, "checkpoint store: getrandom failed");
		memset(&d, 0, sizeof(d));
		ws_hex(raw, sizeof(raw), d.id);
		d.local = c->local;
		d.next_id = 1;
		if ((rc = fault("ckpt.deployment.before_create")) != 0)
			return rc;
		body = ckpt_enc_deployment(&d, &len);
		rc = put_obj(c, KEY_DEPLOYMENT, body, len, false, NULL, NULL);
		if (rc == WS_EPRECOND)
			continue; /* a concurrent creator won: adopt its identity */
		if (rc)
			return rc;
		memcpy(c->dep, d.id, sizeof(c->dep));
		c->dep_known = true;
		return fault("ckpt.deployment.after_create");
	}
	return contention(KEY_DEPLOYMENT);
}

static int ensure_dep(struct ws_ckpt *c)
{
	return refresh_dep(c, true);
}

/* A public read of one singleton: no deployment record yet means nothing is there. */
static int read_singleton(struct ws_ckpt *c, enum singleton o, void *out, bool *found)
{
	int rc;
	ckpt_kind_set(WS_CKPT_OK);
	*found = false;
	if ((rc = refresh_dep(c, false)) != 0)
		return rc;
	return load_singleton(c, o, out, NULL, found);
}

/* ---- open / close ------------------------------------------------------------ */

/* Create-once twice and a CAS with a wrong etag on a fresh probe key: all must lose. */
static int probe_conditional(struct ws_store *s)
{
	char key[WS_KEY_MAX], hex[33];
	uint8_t raw[16];
	struct ws_etag wrong;
	int rc, rc2, rc3;

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return ckpt_fail(WS_CKPT_IO, -errno, "checkpoint store: getrandom failed");
	ws_hex(raw, sizeof(raw), hex);
	snprintf(key, sizeof(key), KEY_PROBE_DIR "/%s", hex);
	memset(&wrong, 0, sizeof(wrong));
	snprintf(wrong.s, sizeof(wrong.s), "walship-probe-%s", hex);
	rc = ws_store_put(s, key, "1", 1, WS_PUT_CREATE, NULL, NULL);
	if (rc)
		return io_fail(rc, "probe put", key);
	rc2 = ws_store_put(s, key, "2", 1, WS_PUT_CREATE, NULL, NULL);
	rc3 = rc2 == WS_EPRECOND ? ws_store_put(s, key, "3", 1, WS_PUT_CAS, &wrong, NULL) : 0;
	rc = ws_store_del(s, key);
	if (rc2 == 0 || rc3 == 0)
		return ckpt_fail(WS_CKPT_NO_CONDITIONAL, WS_ECONFIG,
				 "checkpoint store on %s: the store ignores %s (probe %s), so it cannot decide "
				 "checkpoints; use a store with native conditional writes", s->url,
				 rc2 == 0 ? "create-once" : "compare-and-swap", key);
	if (rc2 != WS_EPRECOND)
		return io_fail(rc2, "probe put", key);
	if (rc3 != WS_EPRECOND)
		return io_fail(rc3, "probe put", key);
	if (rc)
		return io_fail(rc, "probe delete", key);
	return 0;
}

struct ws_ckpt *ws_ckpt_open_shared(struct ws_store *s, unsigned flags, int *err)
{
	struct ws_ckpt *c;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if (!s) {
		*err = ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: no object store");
		return NULL;
	}
	if (!(flags & WS_CKPT_TRUST_CONDITIONAL) && (rc = probe_conditional(s)) != 0) {
		*err = rc;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		*err = ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: out of memory");
		return NULL;
	}
	c->s = s;
	c->lease_fd = -1;
	*err = 0;
	return c;
}

struct ws_ckpt *ws_ckpt_open_local(const char *root, int *err)
{
	struct ws_ckpt *c = NULL;
	struct ws_store *s;
	char path[4096];
	int fd;

	ckpt_kind_set(WS_CKPT_OK);
	if (!root || root[0] != '/') {
		*err = ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: local root \"%s\" is "
				 "not an absolute path", root ? root : "(null)");
		return NULL;
	}
	s = ws_store_file_open(root, err);
	if (!s) {
		ckpt_kind_set(WS_CKPT_IO);
		return NULL;
	}
	snprintf(path, sizeof(path), "%s/%s", root, LEASE_NAME);
	/* Never through a link, never a FIFO or a device planted at the name
	 * (an open alone can block, or act on hardware): a regular file only,
	 * as the file store's own lock files. */
	{
		struct stat lst;
		if (lstat(path, &lst) == 0 && !S_ISREG(lst.st_mode)) {
			*err = ckpt_fail(WS_CKPT_IO, WS_EFORMAT, "checkpoint store: lease %s is not a regular file "
					 "(a link, a FIFO, a device?); not opened", path);
			goto fail;
		}
	}
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
	if (fd < 0) {
		*err = ckpt_fail(WS_CKPT_IO, -errno, "checkpoint store: cannot open lease %s: %s", path,
				 strerror(errno));
		goto fail;
	}
	{
		struct stat st;
		if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
			*err = ckpt_fail(WS_CKPT_IO, WS_EFORMAT, "checkpoint store: lease %s is not a regular file",
					 path);
			close(fd);
			goto fail;
		}
	}
	/* The lease is the open file description's flock: it dies with the holder. */
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EWOULDBLOCK)
			*err = ckpt_fail(WS_CKPT_LEASE_HELD, WS_EFENCED,
					 "checkpoint store: another writer holds the exclusive lease %s; a "
					 "local checkpoint namespace has exactly one writer", path);
		else
			*err = ckpt_fail(WS_CKPT_IO, -errno, "checkpoint store: flock %s: %s", path,
					 strerror(errno));
		close(fd);
		goto fail;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		*err = ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: out of memory");
		goto fail;
	}
	c->s = s;
	c->owns_store = true;
	c->local = true;
	c->lease_fd = fd;
	*err = 0;
	return c;
fail:
	ws_store_close(s);
	return NULL;
}

struct ws_ckpt *ws_ckpt_open_reader(struct ws_store *s, int *err)
{
	struct ws_ckpt *c;

	ckpt_kind_set(WS_CKPT_OK);
	if (!s) {
		*err = ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: no object store");
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		*err = ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: out of memory");
		return NULL;
	}
	c->s = s;
	c->reader = true;
	c->lease_fd = -1;
	*err = 0;
	return c;
}

void ws_ckpt_close(struct ws_ckpt *c)
{
	if (!c)
		return;
	if (c->owns_store)
		ws_store_close(c->s);
	if (c->lease_fd >= 0)
		close(c->lease_fd);
	free(c);
}

struct ws_store *ws_ckpt_store(struct ws_ckpt *c)
{
	return c->s;
}

int ws_ckpt_deployment_id(struct ws_ckpt *c, char out[WS_CKPT_DEPLOYMENT_LEN + 1])
{
	int rc;
	ckpt_kind_set(WS_CKPT_OK);
	c->dep_known = false; /* re-read: detect a namespace replaced under us */
	rc = ensure_dep(c);
	if (rc == 0)
		memcpy(out, c->dep, WS_CKPT_DEPLOYMENT_LEN + 1);
	return rc;
}

/* ---- IDs ----------------------------------------------------------------------- */

static int exhausted(uint64_t minimum)
{
	return ckpt_fail(WS_CKPT_EXHAUSTED, WS_ETOOBIG,
			 "checkpoint store: checkpoint ID space exhausted (asked for >= %" PRIu64
			 ", highest ID is %" PRIu64 ")", minimum, (uint64_t)WS_CKPT_ID_MAX);
}

int ws_ckpt_allocate_id_at_least(struct ws_ckpt *c, uint64_t minimum, uint64_t *out)
{
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if (minimum == 0)
		minimum = 1;
	if (minimum > WS_CKPT_ID_MAX)
		return exhausted(minimum);
	if (c->local && c->mem_next < c->mem_end) {
		uint64_t id = minimum > c->mem_next ? minimum : c->mem_next;
		if (id < c->mem_end) {
			c->mem_next = id + 1;
			*out = id;
			return 0;
		}
	}
	if ((rc = ensure_dep(c)) != 0)
		return rc;
	for (int i = 0; i < RETRY_MAX; i++) {
		struct ckpt_deployment d;
		struct ws_etag etag;
		bool found;
		uint64_t id, end;
		char *body;
		size_t len = 0;

		if ((rc = load_deployment(c, &d, &etag, &found)) != 0)
			return rc;
		if (!found)
			return ckpt_fail(WS_CKPT_MISSING, WS_ENOTFOUND, "checkpoint object %s: vanished",
					 KEY_DEPLOYMENT);
		id = d.next_id > minimum ? d.next_id : minimum;
		if (id > WS_CKPT_ID_MAX)
			return exhausted(minimum);
		/* Shared: exactly one ID per CAS. Local: a range, burned if we crash. */
		end = id + 1;
		if (c->local)
			end = id <= WS_CKPT_ID_MAX - WS_CKPT_LOCAL_ID_RANGE ? id + WS_CKPT_LOCAL_ID_RANGE
									   : WS_CKPT_ID_MAX + 1;
		d.next_id = end;
		body = ckpt_enc_deployment(&d, &len);
		rc = cas_step(c, "ckpt.alloc.before_cas", KEY_DEPLOYMENT, body, len, true, &etag);
		if (rc == WS_EPRECOND)
			continue;
		if (rc)
			return rc;
		if (c->local) {
			c->mem_next = id + 1;
			c->mem_end = end;
		}
		*out = id;
		return fault("ckpt.alloc.after_cas");
	}
	return contention(KEY_DEPLOYMENT);
}

/* ---- committed indexes ------------------------------------------------------- */

static int check_index_input(struct ws_ckpt *c, const struct ws_ckpt_index *idx)
{
	char why[256];
	int rc;
	if (!idx)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: no index");
	if (ckpt_index_invalid(idx, why, sizeof(why)))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG,
				 "checkpoint store: committed index %" PRIu64 " is invalid: %s", idx->checkpoint_id,
				 why);
	if ((rc = ensure_dep(c)) != 0)
		return rc;
	if (strcmp(idx->deployment, c->dep) != 0)
		return ckpt_fail(WS_CKPT_FOREIGN, WS_EFORMAT,
				 "checkpoint store: index %" PRIu64 " belongs to deployment %s, this namespace is %s",
				 idx->checkpoint_id, idx->deployment, c->dep);
	return 0;
}

/* The canonical body of idx and its reference. */
static int index_body(const struct ws_ckpt_index *idx, char **body, size_t *len, struct ws_ckpt_ref *ref)
{
	uint8_t sha[WS_SHA256_LEN];
	*body = ckpt_enc_index(idx, len);
	if (!*body)
		return ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: encode index: out of memory");
	ws_sha256(*body, *len, sha);
	memset(ref, 0, sizeof(*ref));
	ref->id = idx->checkpoint_id;
	ref->length = *len;
	ws_hex(sha, sizeof(sha), ref->sha256);
	ws_ckpt_committed_key(ref->id, ref->sha256, ref->key);
	return 0;
}

static int check_ref_input(const struct ws_ckpt_ref *ref)
{
	if (!ref || !memchr(ref->key, 0, sizeof(ref->key)) || !memchr(ref->sha256, 0, sizeof(ref->sha256)) ||
	    !ckpt_ref_shape_ok(ref))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG,
				 "checkpoint store: reference %s does not name its own id and SHA-256",
				 ref && memchr(ref->key, 0, sizeof(ref->key)) ? ref->key : "(invalid)");
	if (ref->length == 0 || ref->length > WS_CKPT_INDEX_BYTES_MAX)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG,
				 "checkpoint store: reference %s records length %" PRIu64 " (1..%zu)", ref->key,
				 ref->length, WS_CKPT_INDEX_BYTES_MAX);
	return 0;
}

/*
 * Verify b (the object at ref->key) is exactly ref's index, into out (may be
 * NULL). A seal for ref is SEALED; anything else a mismatch or malformed.
 */
static int verify_index(struct ws_ckpt *c, const struct ws_ckpt_ref *ref, const struct ws_buf *b,
			struct ws_ckpt_index *out)
{
	uint8_t sha[WS_SHA256_LEN];
	char hex[WS_SHA256_HEX_LEN + 1];
	struct ws_ckpt_index idx;
	int rc;

	ws_sha256(b->data, b->len, sha);
	ws_hex(sha, sizeof(sha), hex);
	if (ckpt_is_seal(b->data, b->len)) {
		struct ckpt_seal seal;
		if ((rc = ckpt_dec_seal(ref->key, b->data, b->len, dep_or_none(c), &seal)) != 0)
			return rc;
		if (seal.checkpoint_id == ref->id && seal.length == ref->length &&
		    strcmp(seal.sha256, ref->sha256) == 0)
			return ckpt_fail(WS_CKPT_SEALED, WS_EPRECOND,
					 "checkpoint object %s: sealed: the attempt of checkpoint %" PRIu64
					 " was aborted", ref->key, ref->id);
		return ckpt_fail(WS_CKPT_REF_MISMATCH, WS_ECORRUPT,
				 "checkpoint object %s: holds a seal for another candidate", ref->key);
	}
	if (b->len != ref->length)
		return ckpt_fail(WS_CKPT_REF_MISMATCH, WS_ECORRUPT,
				 "checkpoint object %s: %zu bytes, the reference records %" PRIu64, ref->key,
				 b->len, ref->length);
	if (strcmp(hex, ref->sha256) != 0)
		return ckpt_fail(WS_CKPT_REF_MISMATCH, WS_ECORRUPT,
				 "checkpoint object %s: SHA-256 is %s, the reference records %s", ref->key, hex,
				 ref->sha256);
	if ((rc = ckpt_dec_index(ref->key, b->data, b->len, dep_or_none(c), &idx)) != 0)
		return rc;
	if (idx.checkpoint_id != ref->id) {
		ws_ckpt_index_free(&idx);
		return ckpt_fail(WS_CKPT_REF_MISMATCH, WS_ECORRUPT,
				 "checkpoint object %s: holds checkpoint %" PRIu64, ref->key, idx.checkpoint_id);
	}
	if (out)
		*out = idx;
	else
		ws_ckpt_index_free(&idx);
	return 0;
}

int ws_ckpt_create_committed(struct ws_ckpt *c, const struct ws_ckpt_index *idx, struct ws_ckpt_ref *ref)
{
	struct ws_ckpt_ref r;
	struct ws_buf b;
	char *body = NULL;
	size_t len = 0;
	bool found;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if ((rc = reader_refused(c, "create committed index")) != 0)
		return rc;
	if ((rc = check_index_input(c, idx)) != 0 || (rc = index_body(idx, &body, &len, &r)) != 0)
		return rc;
	if (len > WS_CKPT_INDEX_BYTES_MAX) {
		free(body);
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ETOOBIG, "checkpoint store: index %" PRIu64
				 " encodes to %zu bytes (max %zu)", r.id, len, WS_CKPT_INDEX_BYTES_MAX);
	}
	if ((rc = fault("ckpt.create.before_put")) != 0) {
		free(body);
		return rc;
	}
	rc = ws_store_put(c->s, r.key, body, len, WS_PUT_CREATE, NULL, NULL);
	if (rc == 0) {
		free(body);
		*ref = r;
		return fault("ckpt.create.after_put");
	}
	if (rc != WS_EPRECOND) {
		free(body);
		return io_fail(rc, "put", r.key);
	}
	/* The path exists: our own earlier write (converge), a seal, or a stranger. */
	rc = get_obj(c, r.key, len + 1, &b, NULL, &found);
	if (rc == WS_EFORMAT && ws_ckpt_last_kind() == WS_CKPT_MALFORMED)
		rc = ckpt_fail(WS_CKPT_CONFLICTING_BODY, WS_EPRECOND,
			       "checkpoint object %s: holds a different, larger body", r.key);
	else if (rc == 0 && !found)
		rc = ckpt_fail(WS_CKPT_CONFLICTING_BODY, WS_EPRECOND,
			       "checkpoint object %s: create lost, then the object vanished", r.key);
	else if (rc == 0 && b.len == len && memcmp(b.data, body, len) == 0) {
		*ref = r;
		ckpt_kind_set(WS_CKPT_CONVERGED);
	} else if (rc == 0) {
		rc = verify_index(c, &r, &b, NULL);
		if (rc == 0 || ws_ckpt_last_kind() != WS_CKPT_SEALED)
			rc = ckpt_fail(WS_CKPT_CONFLICTING_BODY, WS_EPRECOND,
				       "checkpoint object %s: holds a different body than index %" PRIu64, r.key,
				       r.id);
	}
	ws_buf_free(&b);
	free(body);
	return rc;
}

int ws_ckpt_load_committed(struct ws_ckpt *c, const struct ws_ckpt_ref *ref, struct ws_ckpt_index *out)
{
	struct ws_buf b;
	bool found;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	memset(out, 0, sizeof(*out));
	if ((rc = check_ref_input(ref)) != 0 || (rc = refresh_dep(c, false)) != 0)
		return rc;
	/* One byte past the recorded length tells "longer than recorded" from "as recorded". */
	rc = get_obj(c, ref->key, (size_t)ref->length + 1, &b, NULL, &found);
	if (rc == WS_EFORMAT && ws_ckpt_last_kind() == WS_CKPT_MALFORMED)
		rc = ckpt_fail(WS_CKPT_REF_MISMATCH, WS_ECORRUPT,
			       "checkpoint object %s: longer than the %" PRIu64 " bytes the reference records",
			       ref->key, ref->length);
	else if (rc == 0 && !found)
		rc = ckpt_fail(WS_CKPT_MISSING, WS_ENOTFOUND, "checkpoint object %s: not found", ref->key);
	else if (rc == 0)
		rc = verify_index(c, ref, &b, out);
	ws_buf_free(&b);
	return rc;
}

int ws_ckpt_seal_aborted_candidate(struct ws_ckpt *c, const struct ws_ckpt_index *idx)
{
	struct ws_ckpt_ref r;
	char *cand = NULL, *seal = NULL;
	size_t cand_len = 0, seal_len = 0;
	bool wrote = false;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if ((rc = reader_refused(c, "seal candidate")) != 0)
		return rc;
	if ((rc = check_index_input(c, idx)) != 0 || (rc = index_body(idx, &cand, &cand_len, &r)) != 0)
		return rc;
	seal = ckpt_enc_seal(c->dep, r.id, r.sha256, r.length, &seal_len);
	if (!seal) {
		rc = ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: encode seal: out of memory");
		goto out;
	}
	rc = contention(r.key);
	for (int i = 0; i < RETRY_MAX; i++) {
		struct ws_etag etag;
		struct ws_buf b;
		bool found;
		size_t max = cand_len > seal_len ? cand_len : seal_len;

		rc = get_obj(c, r.key, max + 1, &b, &etag, &found);
		if (rc == WS_EFORMAT && ws_ckpt_last_kind() == WS_CKPT_MALFORMED)
			rc = ckpt_fail(WS_CKPT_CONFLICTING_BODY, WS_EPRECOND,
				       "checkpoint object %s: holds a different, larger body", r.key);
		if (rc)
			break;
		if (found && b.len == seal_len && memcmp(b.data, seal, seal_len) == 0) {
			ws_buf_free(&b);
			ckpt_kind_set(wrote ? WS_CKPT_OK : WS_CKPT_CONVERGED);
			rc = 0;
			break;
		}
		if (found && !(b.len == cand_len && memcmp(b.data, cand, cand_len) == 0)) {
			ws_buf_free(&b);
			rc = ckpt_fail(WS_CKPT_CONFLICTING_BODY, WS_EPRECOND,
				       "checkpoint object %s: holds neither candidate %" PRIu64 " nor its seal",
				       r.key, r.id);
			break;
		}
		ws_buf_free(&b);
		/* Absent: pre-empt a create still in flight. Candidate: replace it exactly. */
		if ((rc = fault("ckpt.seal.before_put")) != 0)
			break;
		rc = ws_store_put(c->s, r.key, seal, seal_len, found ? WS_PUT_CAS : WS_PUT_CREATE,
				  found ? &etag : NULL, NULL);
		if (rc && rc != WS_EPRECOND) {
			rc = io_fail(rc, "put", r.key);
			break;
		}
		if (rc == 0) {
			wrote = true;
			if ((rc = fault("ckpt.seal.after_put")) != 0)
				break;
		}
		rc = contention(r.key); /* loop: re-read and confirm the exact seal is there */
	}
out:
	free(cand);
	free(seal);
	return rc;
}

int ws_ckpt_delete_committed(struct ws_ckpt *c, const struct ws_ckpt_ref *ref)
{
	struct ws_obj_info info;
	struct ws_buf b;
	bool found;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if ((rc = reader_refused(c, "delete committed index")) != 0)
		return rc;
	if ((rc = check_ref_input(ref)) != 0 || (rc = refresh_dep(c, false)) != 0)
		return rc;
	rc = get_obj(c, ref->key, (size_t)ref->length + 4096, &b, NULL, &found);
	if (rc == 0 && !found) {
		ckpt_kind_set(WS_CKPT_CONVERGED);
		return 0;
	}
	/* A seal stays: it occupies an aborted candidate's path for good, so
	 * that a create of the candidate still in flight loses to it
	 * (verify_index refuses it with SEALED). */
	if (rc == 0)
		rc = verify_index(c, ref, &b, NULL);
	ws_buf_free(&b);
	if (rc)
		return ws_fail_wrap(rc, "delete refused");
	if ((rc = fault("ckpt.delete.before_del")) != 0)
		return rc;
	rc = ws_store_del(c->s, ref->key);
	if (rc) {
		/* An ambiguous delete that did remove the object is a successful retry. */
		int hrc = ws_store_head(c->s, ref->key, &info);
		if (hrc == WS_ENOTFOUND)
			return 0;
		return io_fail(rc, "delete", ref->key);
	}
	ckpt_kind_set(WS_CKPT_OK);
	return 0;
}

/* ---- decisions ------------------------------------------------------------------ */

static int cluster_refused(const char *what)
{
	return ckpt_fail(WS_CKPT_CLUSTER_AUTHORITY, WS_ECONFIG,
			 "checkpoint store: %s: cluster scope needs a cluster authority (a leader proof "
			 "and an assignment fence checked by the cluster decision store); this store "
			 "decides local scope only", what);
}

static void winner(struct ws_ckpt_record_result *res, enum ws_ckpt_kind k, const struct ws_ckpt_outcome *w)
{
	res->kind = k;
	res->winner = *w;
	ckpt_kind_set(k);
}

struct record_ctx {
	struct ws_ckpt_outcome want;
	const struct ws_ckpt_index *idx;     /* the Commit's verified index, NULL for an Abort */
	struct ws_ckpt_record_result *res;
};

/*
 * The decision: the head names want as latest terminal, or an earlier
 * decision stands and its winner goes back (rc 0, nothing written).
 */
static int record_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	const struct record_ctx *x = op->in;
	const struct ws_ckpt_head *h = op->cur;
	const struct ws_ckpt_outcome *lt = &h->latest_terminal, *want = &x->want;
	bool head_commit = found && h->has_commit;
	struct ws_ckpt_head next;

	if (found && lt->checkpoint_id == want->checkpoint_id && ckpt_outcome_equal(lt, want))
		return winner(x->res, WS_CKPT_CONVERGED, lt), 0;
	if (found && want->epoch < h->epoch)
		return winner(x->res, WS_CKPT_STALE_EPOCH, lt), 0;
	if (found && lt->checkpoint_id == want->checkpoint_id)
		return winner(x->res, WS_CKPT_CONFLICTING_OUTCOME, lt), 0;
	if (found && want->checkpoint_id < lt->checkpoint_id)
		return winner(x->res, WS_CKPT_STALE_CHECKPOINT, lt), 0;
	if (x->idx && (head_commit != x->idx->has_predecessor ||
		       (head_commit && !ckpt_ref_equal(&x->idx->predecessor, &h->latest_commit.committed))))
		return ckpt_fail(WS_CKPT_FORKED_PREDECESSOR, WS_EPRECOND,
				 "checkpoint store: Commit of %" PRIu64 " names predecessor %s, the latest "
				 "Commit is %s", want->checkpoint_id,
				 x->idx->has_predecessor ? x->idx->predecessor.key : "(none)",
				 head_commit ? h->latest_commit.committed.key : "(none)");
	/* decisions only grows (no ABA): at its maximum no further decision
	 * can be recorded, and wrapping to 0 would break the head for good. */
	if (found && h->decisions == UINT64_MAX)
		return ckpt_fail(WS_CKPT_EXHAUSTED, WS_ETOOBIG, "checkpoint object %s: the decision counter is "
				 "at its maximum (%" PRIu64 "); no further checkpoint can be decided", KEY_HEAD,
				 h->decisions);
	memset(&next, 0, sizeof(next));
	next.epoch = found && h->epoch > want->epoch ? h->epoch : want->epoch;
	next.decisions = found ? h->decisions + 1 : 1;
	next.latest_terminal = *want;
	next.has_commit = x->idx || head_commit;
	if (x->idx)
		next.latest_commit = *want;
	else if (head_commit)
		next.latest_commit = h->latest_commit;
	*body = ckpt_enc_head(c->dep, &next, len);
	return 1;
}

int ws_ckpt_record_outcome(struct ws_ckpt *c, uint64_t epoch, uint64_t checkpoint_id, enum ws_ckpt_scope scope,
			   const struct ws_ckpt_assignment_fence *fence, const struct ws_ckpt_leader_proof *proof,
			   enum ws_ckpt_verdict verdict, const struct ws_ckpt_ref *committed,
			   struct ws_ckpt_record_result *res)
{
	struct ws_ckpt_index idx;
	struct ws_ckpt_outcome want;
	struct ws_ckpt_head h;
	struct record_ctx ctx;
	struct cas_op op = { OBJ_HEAD, "ckpt.record.before_cas", &h, record_decide, &ctx };
	bool wrote;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	memset(res, 0, sizeof(*res));
	memset(&idx, 0, sizeof(idx));
	if (scope != WS_CKPT_SCOPE_LOCAL)
		return cluster_refused("record_outcome");
	if (fence || proof)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: record_outcome: "
				 "a local decision takes no leader proof or assignment fence");
	if (checkpoint_id == 0 || checkpoint_id > WS_CKPT_ID_MAX ||
	    (verdict != WS_CKPT_COMMIT && verdict != WS_CKPT_ABORT))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: record_outcome: "
				 "checkpoint id %" PRIu64 " or verdict out of range", checkpoint_id);
	if ((verdict == WS_CKPT_COMMIT) != (committed != NULL) ||
	    (committed && committed->id != checkpoint_id))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: record_outcome: a "
				 "Commit of %" PRIu64 " names exactly its own committed index, an Abort none",
				 checkpoint_id);
	if ((rc = ensure_dep(c)) != 0)
		return rc;
	memset(&want, 0, sizeof(want));
	want.checkpoint_id = checkpoint_id;
	want.epoch = epoch;
	want.scope = WS_CKPT_SCOPE_LOCAL;
	want.verdict = verdict;
	if (committed) {
		want.has_committed = true;
		want.committed = *committed;
		if ((rc = ws_ckpt_load_committed(c, committed, &idx)) != 0)
			return ws_fail_wrap(rc, "record_outcome of %" PRIu64, checkpoint_id);
		if (idx.epoch != epoch) {
			ws_ckpt_index_free(&idx);
			return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG,
					 "checkpoint store: record_outcome: index %s has epoch %" PRIu64
					 ", the decision %" PRIu64, committed->key, idx.epoch, epoch);
		}
	}
	ctx.want = want;
	ctx.idx = committed ? &idx : NULL;
	ctx.res = res;
	rc = cas_loop(c, &op, &wrote);
	if (rc == 0 && wrote) {
		winner(res, WS_CKPT_OK, &want);
		rc = fault("ckpt.record.after_cas");
	}
	ws_ckpt_index_free(&idx);
	return rc;
}

int ws_ckpt_decision_head(struct ws_ckpt *c, struct ws_ckpt_head *out, bool *found)
{
	return read_singleton(c, OBJ_HEAD, out, found);
}

int ws_ckpt_latest_terminal(struct ws_ckpt *c, struct ws_ckpt_outcome *out, bool *found)
{
	struct ws_ckpt_head h;
	int rc = ws_ckpt_decision_head(c, &h, found);
	if (rc == 0 && *found)
		*out = h.latest_terminal;
	return rc;
}

int ws_ckpt_latest_commit(struct ws_ckpt *c, struct ws_ckpt_outcome *out, bool *found)
{
	struct ws_ckpt_head h;
	int rc = ws_ckpt_decision_head(c, &h, found);
	if (rc == 0 && *found) {
		*found = h.has_commit;
		if (h.has_commit)
			*out = h.latest_commit;
	}
	return rc;
}

/* ---- artifact inventory --------------------------------------------------------- */

static int check_inventory_input(struct ws_ckpt *c, const struct ws_ckpt_inventory *inv, const char *op)
{
	int rc;
	if (!inv)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: %s: no inventory", op);
	if (inv->scope != WS_CKPT_SCOPE_LOCAL)
		return cluster_refused(op);
	if (!ckpt_attempt_ok(&inv->attempt) || inv->key_count > WS_CKPT_ARTIFACTS_MAX ||
	    (inv->key_count && !inv->keys))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: %s: attempt needs a "
				 "non-zero token, an id in 1..%" PRIu64 " and at most %u keys", op,
				 (uint64_t)WS_CKPT_ID_MAX, WS_CKPT_ARTIFACTS_MAX);
	for (size_t i = 0; i < inv->key_count; i++)
		if (!memchr(inv->keys[i], 0, WS_KEY_MAX) || !ws_key_valid(inv->keys[i]) ||
		    (i && strcmp(inv->keys[i - 1], inv->keys[i]) >= 0))
			return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: %s: artifact "
					 "key %zu is invalid or not strictly sorted", op, i);
	if ((rc = ensure_dep(c)) != 0)
		return rc;
	if (!memchr(inv->deployment, 0, sizeof(inv->deployment)) || strcmp(inv->deployment, c->dep) != 0)
		return ckpt_fail(WS_CKPT_FOREIGN, WS_EFORMAT, "checkpoint store: %s: inventory of attempt "
				 "%" PRIu64 " belongs to another deployment than %s", op,
				 inv->attempt.checkpoint_id, c->dep);
	return 0;
}

static bool inventory_equal(const struct ws_ckpt_inventory *a, const struct ws_ckpt_inventory *b)
{
	if (!ws_ckpt_attempt_equal(&a->attempt, &b->attempt) || a->key_count != b->key_count)
		return false;
	for (size_t i = 0; i < a->key_count; i++)
		if (strcmp(a->keys[i], b->keys[i]) != 0)
			return false;
	return true;
}

/* begin: admit op->in unless another attempt is active or op->in is already terminal. */
static int inventory_begin_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	struct ckpt_inventory_rec *cur = op->cur, next;
	const struct ws_ckpt_inventory *inv = op->in;
	bool active = found && cur->active, same = active && inventory_equal(&cur->inv, inv);
	struct ws_ckpt_head h;
	bool hfound;
	int rc;

	free(cur->inv.keys);
	cur->inv.keys = NULL;
	if (same)
		return 0;
	if (active)
		return ckpt_fail(WS_CKPT_ACTIVE_ATTEMPT, WS_EPRECOND,
				 "checkpoint object %s: attempt %" PRIu64 "/%" PRIu64 " is active; attempt %"
				 PRIu64 "/%" PRIu64 " must wait for its cleanup", KEY_INVENTORY,
				 cur->inv.attempt.checkpoint_id, cur->inv.attempt.token, inv->attempt.checkpoint_id,
				 inv->attempt.token);
	if (found && cur->has_completed && (cur->completed.token == inv->attempt.token ||
					    inv->attempt.checkpoint_id <= cur->completed.checkpoint_id))
		return ckpt_fail(WS_CKPT_TERMINAL_ATTEMPT_REUSED, WS_EPRECOND,
				 "checkpoint object %s: attempt %" PRIu64 "/%" PRIu64 " reuses a completed "
				 "attempt (last completed %" PRIu64 "/%" PRIu64 ")", KEY_INVENTORY,
				 inv->attempt.checkpoint_id, inv->attempt.token, cur->completed.checkpoint_id,
				 cur->completed.token);
	/* An attempt the head already decided is terminal: it may not write artifacts again. */
	if ((rc = load_singleton(c, OBJ_HEAD, &h, NULL, &hfound)) != 0)
		return rc;
	if (hfound && inv->attempt.checkpoint_id <= h.latest_terminal.checkpoint_id)
		return ckpt_fail(WS_CKPT_TERMINAL_ATTEMPT_REUSED, WS_EPRECOND,
				 "checkpoint store: attempt of checkpoint %" PRIu64 " is already terminal "
				 "(latest decided %" PRIu64 ")", inv->attempt.checkpoint_id,
				 h.latest_terminal.checkpoint_id);
	memset(&next, 0, sizeof(next));
	if (found)
		next = *cur;
	next.active = true;
	next.inv = *inv;
	*body = ckpt_enc_inventory(c->dep, &next, len);
	return 1;
}

/* complete: exactly op->in active becomes the last completed attempt. */
static int inventory_complete_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	struct ckpt_inventory_rec *cur = op->cur, next;
	const struct ws_ckpt_inventory *expected = op->in;
	bool same = found && cur->active && inventory_equal(&cur->inv, expected);

	free(cur->inv.keys);
	cur->inv.keys = NULL;
	if (!found)
		return ckpt_fail(WS_CKPT_MISSING, WS_ENOTFOUND, "checkpoint object %s: no inventory to complete",
				 KEY_INVENTORY);
	if (!cur->active && cur->has_completed && ws_ckpt_attempt_equal(&cur->completed, &expected->attempt))
		return 0;
	if (!same)
		return ckpt_fail(WS_CKPT_STATE_MISMATCH, WS_EPRECOND,
				 "checkpoint object %s: does not hold attempt %" PRIu64 "/%" PRIu64 " with the "
				 "expected artifacts", KEY_INVENTORY, expected->attempt.checkpoint_id,
				 expected->attempt.token);
	memset(&next, 0, sizeof(next));
	next.has_completed = true;
	next.completed = expected->attempt;
	*body = ckpt_enc_inventory(c->dep, &next, len);
	return 1;
}

static int inventory_update(struct ws_ckpt *c, const struct ws_ckpt_inventory *inv, bool begin,
			    struct ws_ckpt_inventory_result *res)
{
	struct ckpt_inventory_rec cur;
	struct cas_op op = { OBJ_INVENTORY, begin ? "ckpt.inventory.before_begin" : "ckpt.inventory.before_complete",
			     &cur, begin ? inventory_begin_decide : inventory_complete_decide, inv };
	bool wrote;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	memset(res, 0, sizeof(*res));
	memset(&cur, 0, sizeof(cur));
	rc = check_inventory_input(c, inv, begin ? "begin_checkpoint_artifact_inventory"
					       : "complete_checkpoint_artifact_cleanup");
	if (rc || (rc = cas_loop(c, &op, &wrote)) != 0)
		return rc;
	res->kind = wrote ? WS_CKPT_OK : WS_CKPT_CONVERGED;
	res->active = begin;
	res->attempt = inv->attempt;
	return finish(wrote, begin ? "ckpt.inventory.after_begin" : "ckpt.inventory.after_complete");
}

int ws_ckpt_begin_inventory(struct ws_ckpt *c, const struct ws_ckpt_inventory *inv,
			    struct ws_ckpt_inventory_result *res)
{
	return inventory_update(c, inv, true, res);
}

int ws_ckpt_complete_inventory(struct ws_ckpt *c, const struct ws_ckpt_inventory *expected,
			       struct ws_ckpt_inventory_result *res)
{
	return inventory_update(c, expected, false, res);
}

int ws_ckpt_active_inventory(struct ws_ckpt *c, struct ws_ckpt_inventory *inv, bool *active)
{
	struct ckpt_inventory_rec rec;
	bool found;
	int rc;

	memset(inv, 0, sizeof(*inv));
	*active = false;
	memset(&rec, 0, sizeof(rec));
	rc = read_singleton(c, OBJ_INVENTORY, &rec, &found);
	if (rc || !found)
		return rc;
	if (!rec.active) {
		free(rec.inv.keys); /* NULL: the decoder allocates keys for an active attempt only */
		return 0;
	}
	/* The decoder checked the deployment against this store's, which is
	 * known once a singleton was read. */
	WS_ASSERT(c->dep_known && strcmp(rec.inv.deployment, c->dep) == 0);
	*inv = rec.inv;
	inv->scope = WS_CKPT_SCOPE_LOCAL;
	*active = true;
	return 0;
}

void ws_ckpt_inventory_free(struct ws_ckpt_inventory *inv)
{
	if (!inv)
		return;
	free(inv->keys);
	inv->keys = NULL;
	inv->key_count = 0;
}

int ws_ckpt_list_candidates(struct ws_ckpt *c, uint64_t id, ws_ckpt_ref_fn fn, void *arg)
{
	char prefix[WS_KEY_MAX], token[WS_KEY_MAX] = "";
	int rc;

	snprintf(prefix, sizeof(prefix), WS_CKPT_PREFIX "/committed/%016" PRIx64 "-", id);
	for (;;) {
		struct ws_list_page page;
		bool more;
		memset(&page, 0, sizeof(page));
		rc = ws_store_list(c->s, prefix, token, WS_LIST_PAGE_MAX, &page);
		if (rc)
			return ws_fail_wrap(rc, "checkpoint %" PRIu64 ": list candidates", id);
		for (size_t i = 0; i < page.count && !rc; i++) {
			struct ws_ckpt_ref ref;
			memset(&ref, 0, sizeof(ref));
			ref.id = id;
			ref.length = page.sizes ? page.sizes[i] : 0;
			/* The name's hash part as the key spells it; loading the
			 * ref checks it against the body. */
			snprintf(ref.sha256, sizeof(ref.sha256), "%.64s", page.keys[i] + strlen(prefix));
			snprintf(ref.key, sizeof(ref.key), "%s", page.keys[i]);
			rc = fn(&ref, arg);
		}
		more = page.truncated;
		if (more)
			snprintf(token, sizeof(token), "%s", page.next_token);
		ws_list_page_free(&page);
		if (rc || !more)
			return rc;
	}
}

/* ---- retention ---------------------------------------------------------------------- */

static bool kept_equal(const struct ws_ckpt_retention *a, const struct ws_ckpt_retention *b)
{
	return a->has_kept == b->has_kept && (!a->has_kept || ckpt_ref_equal(&a->kept_ref, &b->kept_ref));
}

static bool retention_equal(const struct ws_ckpt_retention *a, const struct ws_ckpt_retention *b)
{
	return a->phase == b->phase && a->generation == b->generation &&
	       ckpt_ref_equal(&a->protected_ref, &b->protected_ref) && kept_equal(a, b);
}

/* begin: a new run for op->in, unless one for it exists (resume) or another is in flight. */
static int retention_begin_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	/* op->in: the run wanted (its cut and what it keeps; phase and
	 * generation unset). */
	struct ws_ckpt_retention *cur = op->cur, next = *(const struct ws_ckpt_retention *)op->in;
	const struct ws_ckpt_ref *protected_ref = &next.protected_ref;

	if (found && ckpt_ref_equal(&cur->protected_ref, protected_ref) && kept_equal(cur, &next))
		return 0; /* resume, or already done */
	if (found && cur->phase != WS_CKPT_RET_IDLE)
		return ckpt_fail(WS_CKPT_STATE_MISMATCH, WS_EPRECOND,
				 "checkpoint object %s: a run protecting %s is in flight; finish it first",
				 KEY_RETENTION, cur->protected_ref.key);
	if (found && cur->protected_ref.id > protected_ref->id)
		return ckpt_fail(WS_CKPT_STALE_CUT, WS_EPRECOND,
				 "checkpoint object %s: already retained a later cut %s", KEY_RETENTION,
				 cur->protected_ref.key);
	next.phase = WS_CKPT_RET_SWEEP_ARTIFACTS;
	next.generation = found ? cur->generation + 1 : 1;
	*cur = next;
	*body = ckpt_enc_retention(c->dep, &next, len);
	return 1;
}

static struct ws_ckpt_retention retention_successor(const struct ws_ckpt_retention *s)
{
	struct ws_ckpt_retention next;
	memset(&next, 0, sizeof(next));
	next.phase = s->phase == WS_CKPT_RET_SWEEP_ARTIFACTS ? WS_CKPT_RET_SWEEP_INDEXES : WS_CKPT_RET_IDLE;
	next.generation = s->generation + 1;
	next.protected_ref = s->protected_ref;
	next.has_kept = s->has_kept;
	next.kept_ref = s->kept_ref;
	return next;
}

/* advance: exactly op->in becomes its successor phase. */
static int retention_advance_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	struct ws_ckpt_retention *cur = op->cur;
	const struct ws_ckpt_retention *expected = op->in;
	struct ws_ckpt_retention next = retention_successor(expected);

	if (found && retention_equal(cur, &next))
		return 0;
	if (!found || !retention_equal(cur, expected))
		return ckpt_fail(WS_CKPT_STATE_MISMATCH, WS_EPRECOND,
				 "checkpoint object %s: does not hold the expected retention state "
				 "(generation %" PRIu64 ")", KEY_RETENTION, expected->generation);
	*cur = next;
	*body = ckpt_enc_retention(c->dep, &next, len);
	return 1;
}

static int retention_update(struct ws_ckpt *c, struct cas_op *op, bool begin, struct ws_ckpt_retention_result *res)
{
	bool wrote;
	int rc = cas_loop(c, op, &wrote);
	if (rc)
		return rc;
	res->kind = wrote ? WS_CKPT_OK : WS_CKPT_CONVERGED;
	res->state = *(struct ws_ckpt_retention *)op->cur;
	return finish(wrote, begin ? "ckpt.retention.after_begin" : "ckpt.retention.after_advance");
}

int ws_ckpt_begin_retention(struct ws_ckpt *c, const struct ws_ckpt_ref *protected_ref,
			    struct ws_ckpt_retention_result *res)
{
	return ws_ckpt_begin_retention_keep(c, protected_ref, NULL, res);
}

int ws_ckpt_begin_retention_keep(struct ws_ckpt *c, const struct ws_ckpt_ref *protected_ref,
				 const struct ws_ckpt_ref *kept, struct ws_ckpt_retention_result *res)
{
	struct ws_ckpt_retention cur, want;
	struct cas_op op = { OBJ_RETENTION, "ckpt.retention.before_begin", &cur, retention_begin_decide,
			     &want };
	struct ws_ckpt_index idx;
	struct ws_ckpt_head h;
	bool hfound;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	memset(res, 0, sizeof(*res));
	if ((rc = check_ref_input(protected_ref)) != 0 || (rc = ensure_dep(c)) != 0)
		return rc;
	memset(&want, 0, sizeof(want));
	want.protected_ref = *protected_ref;
	if ((rc = load_singleton(c, OBJ_HEAD, &h, NULL, &hfound)) != 0)
		return rc;
	if (!hfound || !h.has_commit || !ckpt_ref_equal(&h.latest_commit.committed, protected_ref))
		return ckpt_fail(WS_CKPT_STALE_CUT, WS_EPRECOND,
				 "checkpoint store: retention must protect the latest Commit (%s), not %s",
				 hfound && h.has_commit ? h.latest_commit.committed.key : "none yet",
				 protected_ref->key);
	/* The cut must load and verify, or retention would keep a chain that does not restore. */
	if ((rc = ws_ckpt_load_committed(c, protected_ref, &idx)) != 0)
		return ws_fail_wrap(rc, "retention cut");
	ws_ckpt_index_free(&idx);
	if (kept && !ckpt_ref_equal(kept, protected_ref)) {
		if ((rc = check_ref_input(kept)) != 0)
			return rc;
		if (kept->id >= protected_ref->id)
			return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: retention keeps "
					 "checkpoint %" PRIu64 ", not older than the protected %" PRIu64, kept->id,
					 protected_ref->id);
		if ((rc = ws_ckpt_load_committed(c, kept, &idx)) != 0)
			return ws_fail_wrap(rc, "retention: the oldest checkpoint kept");
		ws_ckpt_index_free(&idx);
		want.has_kept = true;
		want.kept_ref = *kept;
	}
	return retention_update(c, &op, true, res);
}

int ws_ckpt_advance_retention(struct ws_ckpt *c, const struct ws_ckpt_retention *expected,
			      struct ws_ckpt_retention_result *res)
{
	struct ws_ckpt_retention cur;
	struct cas_op op = { OBJ_RETENTION, "ckpt.retention.before_advance", &cur, retention_advance_decide,
			     expected };
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	memset(res, 0, sizeof(*res));
	if (!expected || expected->phase == WS_CKPT_RET_IDLE ||
	    (expected->phase != WS_CKPT_RET_SWEEP_ARTIFACTS && expected->phase != WS_CKPT_RET_SWEEP_INDEXES) ||
	    expected->generation == 0 || expected->generation == UINT64_MAX ||
	    !memchr(expected->protected_ref.key, 0, WS_KEY_MAX) || !ckpt_ref_shape_ok(&expected->protected_ref))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: "
				 "advance_checkpoint_retention: the expected state is idle or invalid");
	if ((rc = ensure_dep(c)) != 0)
		return rc;
	return retention_update(c, &op, false, res);
}

int ws_ckpt_retention_state(struct ws_ckpt *c, struct ws_ckpt_retention *out, bool *found)
{
	return read_singleton(c, OBJ_RETENTION, out, found);
}

/* ---- sink-open witness ---------------------------------------------------------------- */

/* Same owner, attempt and sinks (state and sequence aside). */
static bool witness_same(const struct ws_ckpt_witness *a, const struct ws_ckpt_witness *b)
{
	if (strcmp(a->pipeline, b->pipeline) != 0 || a->participant_id != b->participant_id ||
	    !ws_ckpt_attempt_equal(&a->attempt, &b->attempt) || a->sink_count != b->sink_count)
		return false;
	for (size_t i = 0; i < a->sink_count; i++)
		if (strcmp(a->sinks[i], b->sinks[i]) != 0)
			return false;
	return true;
}

int ws_ckpt_sink_open_witness(struct ws_ckpt *c, struct ws_ckpt_witness *out, bool *found)
{
	return read_singleton(c, OBJ_WITNESS, out, found);
}

/* create: open op->in unless another witness is live or op->in's attempt was closed. */
static int witness_open_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	struct ws_ckpt_witness *cur = op->cur;
	const struct ws_ckpt_witness *want = op->in;
	uint64_t sequence;

	if (found && cur->state == WS_CKPT_WITNESS_OPEN && witness_same(cur, want))
		return 0;
	if (found && cur->state == WS_CKPT_WITNESS_OPEN)
		return ckpt_fail(WS_CKPT_ACTIVE_ATTEMPT, WS_EPRECOND,
				 "checkpoint object %s: pipeline %s participant %" PRIu64 " attempt %" PRIu64
				 "/%" PRIu64 " holds the live witness", KEY_WITNESS, cur->pipeline,
				 cur->participant_id, cur->attempt.checkpoint_id, cur->attempt.token);
	if (found && witness_same(cur, want))
		return ckpt_fail(WS_CKPT_TERMINAL_ATTEMPT_REUSED, WS_EPRECOND,
				 "checkpoint object %s: the witness of attempt %" PRIu64 "/%" PRIu64 " was "
				 "already closed", KEY_WITNESS, cur->attempt.checkpoint_id, cur->attempt.token);
	if (found && cur->sequence == UINT64_MAX)
		return ckpt_fail(WS_CKPT_EXHAUSTED, WS_ETOOBIG, "checkpoint object %s: sequence exhausted",
				 KEY_WITNESS);
	/* cur becomes the new state: the durable one when this call returns. */
	sequence = found ? cur->sequence + 1 : 1;
	*cur = *want;
	cur->state = WS_CKPT_WITNESS_OPEN;
	cur->sequence = sequence;
	*body = ckpt_enc_witness(c->dep, cur, len);
	return 1;
}

/* clear: exactly op->in (same sequence) open becomes its closed tombstone. */
static int witness_close_decide(struct ws_ckpt *c, struct cas_op *op, bool found, char **body, size_t *len)
{
	struct ws_ckpt_witness *cur = op->cur;
	const struct ws_ckpt_witness *expected = op->in;

	if (!found)
		return ckpt_fail(WS_CKPT_MISSING, WS_ENOTFOUND, "checkpoint object %s: no witness to clear",
				 KEY_WITNESS);
	if (!witness_same(cur, expected) || cur->sequence != expected->sequence)
		return ckpt_fail(WS_CKPT_STATE_MISMATCH, WS_EPRECOND,
				 "checkpoint object %s: holds witness sequence %" PRIu64 " of attempt %" PRIu64
				 "/%" PRIu64 ", not the expected sequence %" PRIu64, KEY_WITNESS, cur->sequence,
				 cur->attempt.checkpoint_id, cur->attempt.token, expected->sequence);
	if (cur->state == WS_CKPT_WITNESS_CLOSED)
		return 0;
	cur->state = WS_CKPT_WITNESS_CLOSED;
	*body = ckpt_enc_witness(c->dep, cur, len);
	return 1;
}

int ws_ckpt_create_sink_open_witness(struct ws_ckpt *c, const char *pipeline, uint64_t participant_id,
				     const struct ws_ckpt_attempt *attempt, const char *const *sinks,
				     size_t sink_count, struct ws_ckpt_witness *out)
{
	struct ws_ckpt_witness *want = NULL, *cur = NULL;
	struct cas_op op = { OBJ_WITNESS, "ckpt.witness.before_open", NULL, witness_open_decide, NULL };
	bool wrote;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if (!pipeline || !ckpt_name_ok(pipeline) || !attempt || !ckpt_attempt_ok(attempt) ||
	    sink_count > WS_CKPT_SINKS_MAX || (sink_count && !sinks))
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: create_sink_open_witness: "
				 "needs a printable pipeline identity, a valid attempt and at most %u sinks",
				 WS_CKPT_SINKS_MAX);
	for (size_t i = 0; i < sink_count; i++)
		if (!sinks[i] || !ckpt_name_ok(sinks[i]) || (i && strcmp(sinks[i - 1], sinks[i]) >= 0))
			return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: "
					 "create_sink_open_witness: committable sink %zu (\"%s\") is not "
					 "printable or not strictly after the one before (sorted, unique)", i,
					 sinks[i] ? sinks[i] : "(null)");
	if ((rc = ensure_dep(c)) != 0)
		return rc;
	want = calloc(1, sizeof(*want));
	cur = calloc(1, sizeof(*cur));
	if (!want || !cur) {
		rc = ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: out of memory");
		goto out;
	}
	snprintf(want->pipeline, sizeof(want->pipeline), "%s", pipeline);
	want->participant_id = participant_id;
	want->attempt = *attempt;
	want->sink_count = sink_count;
	for (size_t i = 0; i < sink_count; i++)
		snprintf(want->sinks[i], sizeof(want->sinks[i]), "%s", sinks[i]);
	op.cur = cur;
	op.in = want;
	if ((rc = cas_loop(c, &op, &wrote)) != 0)
		goto out;
	*out = *cur;
	rc = finish(wrote, "ckpt.witness.after_open");
out:
	free(want);
	free(cur);
	return rc;
}

int ws_ckpt_clear_sink_open_witness(struct ws_ckpt *c, const struct ws_ckpt_witness *expected)
{
	struct cas_op op = { OBJ_WITNESS, "ckpt.witness.before_close", NULL, witness_close_decide, expected };
	bool wrote;
	int rc;

	ckpt_kind_set(WS_CKPT_OK);
	if (!expected || expected->state != WS_CKPT_WITNESS_OPEN || expected->sequence == 0)
		return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: "
				 "clear_sink_open_witness: the expected witness must be an open one");
	if ((rc = ensure_dep(c)) != 0)
		return rc;
	if (!(op.cur = calloc(1, sizeof(struct ws_ckpt_witness))))
		return ckpt_fail(WS_CKPT_IO, -ENOMEM, "checkpoint store: out of memory");
	rc = cas_loop(c, &op, &wrote);
	free(op.cur);
	if (rc)
		return rc;
	return finish(wrote, "ckpt.witness.after_close");
}
