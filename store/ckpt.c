/*
 * Checkpoint decision store, part 2: the protocol (the read-decide-write
 * loop, the deployment record, open and close, IDs). Objects and their
 * bytes are in ckpt_json.c and docs/CHECKPOINTS.md; the committed indexes
 * in ckpt_index.c, the decision records in ckpt_records.c.
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

#define LEASE_NAME ".lock.ckpt-lease"   /* the file store hides and never lists ".lock." names */

/* ---- plumbing --------------------------------------------------------------- */

int ckpt_io_fail(int rc, const char *op, const char *key)
{
	ckpt_kind_set(WS_CKPT_IO);
	return ws_fail_wrap(rc, "checkpoint store: %s %s", op, key);
}

/* GET key into b. *found false (rc 0) when the object is absent. */
int ckpt_get_obj(struct ws_ckpt *c, const char *key, size_t max, struct ws_buf *b, struct ws_etag *etag,
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
		return ckpt_io_fail(rc, "get", key);
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
		return ckpt_io_fail(rc, "put", key);
	return rc;
}

/* A read-only handle (ws_ckpt_open_reader) never writes. */
int ckpt_reader_refused(const struct ws_ckpt *c, const char *what)
{
	if (!c->reader)
		return 0;
	return ckpt_fail(WS_CKPT_INVALID_INPUT, WS_ECONFIG, "checkpoint store: %s: a read-only handle never "
			 "writes", what);
}

int ckpt_contention(const char *key)
{
	return ckpt_fail(WS_CKPT_STATE_MISMATCH, WS_EPRECOND,
			 "checkpoint store: %s: lost %d compare-and-swaps in a row", key, RETRY_MAX);
}

int ckpt_fault(const char *site)
{
	int rc = WS_FAULT(site);
	(void)site; /* unused in builds without WS_FAULTS */
	if (rc)
		return ckpt_fail(WS_CKPT_IO, rc, "checkpoint store: fault site %s fired", site);
	return 0;
}

/* Set the kind of a finished update (written, or an identical retry) and pass its after-write site. */
int ckpt_finish(bool wrote, const char *after_site)
{
	ckpt_kind_set(wrote ? WS_CKPT_OK : WS_CKPT_CONVERGED);
	return wrote ? ckpt_fault(after_site) : 0;
}

/*
 * A checkpoints/deployment or checkpoints/head that cannot be decoded (or,
 * as the deployment record, is missing while other objects carry one):
 * name it and the command that rebuilds it from the rest of the sink
 * (docs/CHECKPOINTS.md "Damaged control objects"). Other errors, and the
 * other authority's namespace (not damage), pass as they are.
 */
int ckpt_repair_hint(struct ws_ckpt *c, int rc, const char *key)
{
	enum ws_ckpt_kind k = ws_ckpt_last_kind();
	if ((rc != WS_EFORMAT && rc != WS_ECORRUPT && rc != WS_EINCOMPLETE) ||
	    (k == WS_CKPT_FOREIGN && strcmp(key, KEY_DEPLOYMENT) == 0))
		return rc;
	return ws_fail_wrap(rc, "%s is damaged or lost (run: walship repair --sink %s)", key, c->s->url);
}

/* The expected deployment for reads: "" (matches nothing) when none exists yet. */
const char *ckpt_dep_or_none(struct ws_ckpt *c)
{
	return c->dep_known ? c->dep : "";
}

static const char *const singleton_key[] = { KEY_HEAD, KEY_INVENTORY, KEY_RETENTION, KEY_WITNESS };

/* No deployment record while key, which carries one, is there: the record was lost. */
static int deployment_missing(struct ws_ckpt *c, const char *key)
{
	return ckpt_repair_hint(c, ckpt_fail(WS_CKPT_MISSING, WS_EINCOMPLETE, "checkpoint object %s is missing, "
					     "but %s is there", KEY_DEPLOYMENT, key), KEY_DEPLOYMENT);
}

/* GET and strictly decode one singleton into out (its struct); *found false when absent. */
int ckpt_load_singleton(struct ws_ckpt *c, enum singleton o, void *out, struct ws_etag *etag, bool *found)
{
	const char *key = singleton_key[o], *dep = ckpt_dep_or_none(c);
	struct ws_buf b;
	int rc = ckpt_get_obj(c, key, o == OBJ_INVENTORY ? WS_CKPT_INDEX_BYTES_MAX : WS_CKPT_SINGLETON_BYTES_MAX, &b,
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
	/* Every other object carries the deployment's id: with no record, the
	 * record is what is lost, not this object. */
	if (*found && !c->dep_known && (rc == 0 || ws_ckpt_last_kind() == WS_CKPT_FOREIGN))
		return deployment_missing(c, key);
	return o == OBJ_HEAD ? ckpt_repair_hint(c, rc, KEY_HEAD) : rc;
}

/* Fault site `site`, then the conditional PUT of body (freed): 0, WS_EPRECOND or an error. */
static int cas_step(struct ws_ckpt *c, const char *site, const char *key, char *body, size_t len, bool found,
		    const struct ws_etag *etag)
{
	int rc = ckpt_fault(site);
	if (rc) {
		free(body);
		return rc;
	}
	return put_obj(c, key, body, len, found, etag, NULL);
}

int ckpt_cas_loop(struct ws_ckpt *c, struct cas_op *op, bool *wrote)
{
	*wrote = false;
	for (int i = 0; i < RETRY_MAX; i++) {
		struct ws_etag etag;
		bool found;
		char *body = NULL;
		size_t len = 0;
		int rc = ckpt_load_singleton(c, op->obj, op->cur, &etag, &found);

		if (rc == 0)
			rc = op->decide(c, op, found, &body, &len);
		if (rc <= 0)
			return rc;
		/* decide() answers 1 with a body to write, 0 when done, or an error: nothing else. */
		WS_ASSERT(rc == 1);
		rc = cas_step(c, op->site, singleton_key[op->obj], body, len, found, &etag);
		if (rc != WS_EPRECOND) {
			*wrote = rc == 0;
			return rc;
		}
	}
	return ckpt_contention(singleton_key[op->obj]);
}

static int load_deployment(struct ws_ckpt *c, struct ckpt_deployment *d, struct ws_etag *etag, bool *found)
{
	struct ws_buf b;
	int rc = ckpt_get_obj(c, KEY_DEPLOYMENT, 4096, &b, etag, found);
	if (rc == 0 && *found)
		rc = ckpt_dec_deployment(KEY_DEPLOYMENT, b.data, b.len, d);
	ws_buf_free(&b);
	if (rc)
		return ckpt_repair_hint(c, rc, KEY_DEPLOYMENT);
	if (!*found)
		return 0;
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

/*
 * No deployment record, about to create one: refused while a head or a
 * witness is there. Every object is written after the record it carries
 * (the head by a decision, the witness by an attempt), so one of them
 * without it means the record was lost; a fresh one would make every
 * stored checkpoint foreign for good. Read again first: a concurrent
 * creator writes the record before its witness.
 */
static int deployment_lost(struct ws_ckpt *c)
{
	static const char *const keys[] = { KEY_HEAD, KEY_WITNESS };
	struct ckpt_deployment d;
	struct ws_obj_info info;
	bool found;
	int rc;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		rc = ws_store_head(c->s, keys[i], &info);
		if (rc == WS_ENOTFOUND)
			continue;
		if (rc)
			return ckpt_io_fail(rc, "head", keys[i]);
		if ((rc = load_deployment(c, &d, NULL, &found)) != 0 || found)
			return rc;
		return deployment_missing(c, keys[i]);
	}
	return 0;
}

/* The deployment record, read (or created when create) into c->dep. */
int ckpt_refresh_dep(struct ws_ckpt *c, bool create)
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
		if ((rc = deployment_lost(c)) != 0)
			return rc;
		if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
			return ckpt_fail(WS_CKPT_IO, -errno, "checkpoint store: getrandom failed");
		memset(&d, 0, sizeof(d));
		ws_hex(raw, sizeof(raw), d.id);
		d.local = c->local;
		d.next_id = 1;
		if ((rc = ckpt_fault("ckpt.deployment.before_create")) != 0)
			return rc;
		body = ckpt_enc_deployment(&d, &len);
		rc = put_obj(c, KEY_DEPLOYMENT, body, len, false, NULL, NULL);
		if (rc == WS_EPRECOND)
			continue; /* a concurrent creator won: adopt its identity */
		if (rc)
			return rc;
		memcpy(c->dep, d.id, sizeof(c->dep));
		c->dep_known = true;
		return ckpt_fault("ckpt.deployment.after_create");
	}
	return ckpt_contention(KEY_DEPLOYMENT);
}

int ckpt_ensure_dep(struct ws_ckpt *c)
{
	return ckpt_refresh_dep(c, true);
}

/* A public read of one singleton: no deployment record yet means nothing is there. */
int ckpt_read_singleton(struct ws_ckpt *c, enum singleton o, void *out, bool *found)
{
	int rc;
	ckpt_kind_set(WS_CKPT_OK);
	*found = false;
	if ((rc = ckpt_refresh_dep(c, false)) != 0)
		return rc;
	return ckpt_load_singleton(c, o, out, NULL, found);
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
		return ckpt_io_fail(rc, "probe put", key);
	/* A process killed here leaves the probe: core/probes.c removes it once stale. */
	if ((rc = ckpt_fault("ckpt.probe.after_create")) != 0)
		return rc;
	rc2 = ws_store_put(s, key, "2", 1, WS_PUT_CREATE, NULL, NULL);
	rc3 = rc2 == WS_EPRECOND ? ws_store_put(s, key, "3", 1, WS_PUT_CAS, &wrong, NULL) : 0;
	rc = ws_store_del(s, key);
	if (rc2 == 0 || rc3 == 0)
		return ckpt_fail(WS_CKPT_NO_CONDITIONAL, WS_ECONFIG,
				 "checkpoint store on %s: the store ignores %s (probe %s), so it cannot decide "
				 "checkpoints; use a store with native conditional writes", s->url,
				 rc2 == 0 ? "create-once" : "compare-and-swap", key);
	if (rc2 != WS_EPRECOND)
		return ckpt_io_fail(rc2, "probe put", key);
	if (rc3 != WS_EPRECOND)
		return ckpt_io_fail(rc3, "probe put", key);
	if (rc)
		return ckpt_io_fail(rc, "probe delete", key);
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
	rc = ckpt_ensure_dep(c);
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
			/* The reserved range never holds an ID past the ID space. */
			WS_ASSERT(id >= minimum && id <= WS_CKPT_ID_MAX);
			c->mem_next = id + 1;
			*out = id;
			return 0;
		}
	}
	if ((rc = ckpt_ensure_dep(c)) != 0)
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
		/* The reservation is never empty and never past the ID space. */
		WS_ASSERT(end > id && end <= WS_CKPT_ID_MAX + 1);
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
		return ckpt_fault("ckpt.alloc.after_cas");
	}
	return ckpt_contention(KEY_DEPLOYMENT);
}
