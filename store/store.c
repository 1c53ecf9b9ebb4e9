/*
 * Backend-independent half of the store layer: the bounded byte buffer, key
 * validation, the counting wrappers around a backend's ops table, and the
 * URL dispatch that picks a backend.
 */
#include "ws_store.h"
#include "s3_internal.h"
#include "ws_assert.h"
#include "ws_clock.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- ws_buf ------------------------------------------------------------ */

void ws_buf_init(struct ws_buf *b, size_t max)
{
	memset(b, 0, sizeof(*b));
	b->max = max ? max : WS_BUF_DEFAULT_MAX;
}

static size_t buf_max(const struct ws_buf *b)
{
	/* A zeroed struct that skipped ws_buf_init still gets a bound. */
	return b->max ? b->max : WS_BUF_DEFAULT_MAX;
}

int ws_buf_reserve(struct ws_buf *b, size_t extra)
{
	size_t need, cap, max = buf_max(b);
	uint8_t *p;

	if (b->err)
		return b->err;
	if (extra > max || b->len > max - extra) {
		b->err = WS_ETOOBIG;
		return ws_fail(WS_ETOOBIG, "buffer would grow past its maximum of %zu bytes "
			       "(holds %zu, asked for %zu more)", max, b->len, extra);
	}
	need = b->len + extra;
	if (need <= b->cap)
		return 0;
	/* Doubling keeps appends amortised O(1); the clamp keeps the bound exact. */
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap = cap > max / 2 ? max : cap * 2;
	if (cap > max)
		cap = max;
	p = realloc(b->data, cap);
	if (!p) {
		b->err = -ENOMEM;
		return ws_fail(-ENOMEM, "buffer: cannot grow to %zu bytes", cap);
	}
	b->data = p;
	b->cap = cap;
	return 0;
}

int ws_buf_append(struct ws_buf *b, const void *p, size_t n)
{
	int rc = ws_buf_reserve(b, n);

	if (rc)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

/* Keeps the memory for the next object; a new object starts without an error. */
void ws_buf_reset(struct ws_buf *b)
{
	b->len = 0;
	b->err = 0;
}

void ws_buf_free(struct ws_buf *b)
{
	size_t max = b->max;

	free(b->data);
	memset(b, 0, sizeof(*b));
	b->max = max;
}

/* ---- listing, keys ------------------------------------------------------ */

void ws_list_page_free(struct ws_list_page *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->count; i++)
		free(p->keys[i]);
	free(p->keys);
	free(p->sizes);
	memset(p, 0, sizeof(*p));
}

int ws_list_page_add_bytes(const struct ws_store *s, const struct ws_list_page *page, uint64_t *total)
{
	for (size_t i = 0; page->sizes && i < page->count; i++) {
		uint64_t size = page->sizes[i];
		if (size > WS_OBJ_BYTES_MAX)
			return ws_fail(WS_EFORMAT, "%s: the listing gives %s a size of %" PRIu64 " bytes, more than "
				       "an object can have (%llu): bad data from the store", s->url, page->keys[i],
				       size, WS_OBJ_BYTES_MAX);
		if (*total > WS_LIST_BYTES_MAX - size)
			return ws_fail(WS_EFORMAT, "%s: the listed sizes, %s's %" PRIu64 " bytes the last, add up "
				       "past %" PRIu64 " bytes: bad data from the store", s->url, page->keys[i], size,
				       WS_LIST_BYTES_MAX);
		*total += size;
	}
	WS_ASSERT(*total <= WS_LIST_BYTES_MAX);
	return 0;
}

static bool key_char_ok(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

bool ws_key_valid(const char *key)
{
	size_t len, seg = 0;

	if (!key)
		return false;
	len = strnlen(key, WS_KEY_MAX);
	if (len == 0 || len >= WS_KEY_MAX)
		return false;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || key[i] == '/') {
			/* Covers a leading '/', a trailing '/' and "//" alike. */
			if (seg == 0)
				return false;
			if ((seg == 1 && key[i - 1] == '.') ||
			    (seg == 2 && key[i - 1] == '.' && key[i - 2] == '.'))
				return false;
			seg = 0;
			continue;
		}
		if (!key_char_ok(key[i]))
			return false;
		seg++;
	}
	return true;
}

/* ---- counting wrappers --------------------------------------------------- */

/*
 * Counters are relaxed atomics: a store may be shared by threads, and the
 * counts are read only as statistics, so they pair with no other operation.
 */
static void stat_add(uint64_t *ctr, uint64_t n)
{
	__atomic_fetch_add(ctr, n, __ATOMIC_RELAXED);
}

int ws_store_putv(struct ws_store *s, const char *key, const struct iovec *iov, int iovcnt,
		  enum ws_put_mode mode, const struct ws_etag *expect, struct ws_etag *out_etag)
{
	uint64_t bytes = 0;
	int rc;

	stat_add(&s->stats.puts, 1);
	s->write_sent_ms = ws_mono_ms(); /* an s3 store moves it to its last attempt */
	rc = s->ops->put(s, key, iov, iovcnt, mode, expect, out_etag);
	if (rc == WS_EPRECOND)
		stat_add(&s->stats.precond_failed, 1);
	if (rc == 0) {
		for (int i = 0; i < iovcnt; i++)
			bytes += iov[i].iov_len;
		stat_add(&s->stats.bytes_put, bytes);
	}
	return rc;
}

int ws_store_putv_many(struct ws_store *s, struct ws_put_req *reqs, size_t n)
{
	if (n == 0)
		return 0;
	if (!reqs)
		return ws_fail(-EINVAL, "store %s: put_many without requests", s->url);
	if (s->ops->put_many) {
		int rc;
		stat_add(&s->stats.puts, n);
		rc = s->ops->put_many(s, reqs, n);
		if (rc)
			return rc;
		for (size_t i = 0; i < n; i++) {
			if (reqs[i].rc == WS_EPRECOND)
				stat_add(&s->stats.precond_failed, 1);
			if (reqs[i].rc == 0)
				for (int j = 0; j < reqs[i].iovcnt; j++)
					stat_add(&s->stats.bytes_put, reqs[i].iov[j].iov_len);
		}
		return 0;
	}
	/* One by one; a store instance is used by one thread, so the counter's
	 * movement during a request is that request's. */
	for (size_t i = 0; i < n; i++) {
		uint64_t t0 = __atomic_load_n(&s->stats.throttle_retries, __ATOMIC_RELAXED);
		reqs[i].rc = ws_store_putv(s, reqs[i].key, reqs[i].iov, reqs[i].iovcnt, reqs[i].mode, NULL, NULL);
		reqs[i].throttle_retries =
			(uint32_t)(__atomic_load_n(&s->stats.throttle_retries, __ATOMIC_RELAXED) - t0);
	}
	return 0;
}

int ws_store_put(struct ws_store *s, const char *key, const void *data, size_t len,
		 enum ws_put_mode mode, const struct ws_etag *expect, struct ws_etag *out_etag)
{
	struct iovec iov = { .iov_base = (void *)(uintptr_t)data, .iov_len = len };

	return ws_store_putv(s, key, &iov, len ? 1 : 0, mode, expect, out_etag);
}

int ws_store_get(struct ws_store *s, const char *key, uint64_t off, uint64_t len,
		 struct ws_buf *out, struct ws_obj_info *info)
{
	size_t before = out->len;
	int rc;

	stat_add(&s->stats.gets, 1);
	rc = s->ops->get(s, key, off, len, out, info);
	if (rc == 0 && out->len > before)
		stat_add(&s->stats.bytes_got, out->len - before);
	return rc;
}

int ws_store_get_many(struct ws_store *s, struct ws_get_req *reqs, size_t n)
{
	if (n == 0)
		return 0;
	if (!reqs)
		return ws_fail(-EINVAL, "store %s: get_many without requests", s->url);
	if (!s->ops->get_many) {
		for (size_t i = 0; i < n; i++)
			reqs[i].rc = ws_store_get(s, reqs[i].key, reqs[i].off, reqs[i].len, reqs[i].out, NULL);
		return 0;
	}
	/* (each out's length before, summed, then what they hold after) */
	uint64_t before = 0, after = 0;
	for (size_t i = 0; i < n; i++)
		before += reqs[i].out->len;
	stat_add(&s->stats.gets, n);
	int rc = s->ops->get_many(s, reqs, n);
	for (size_t i = 0; i < n; i++)
		after += reqs[i].out->len;
	if (after > before)
		stat_add(&s->stats.bytes_got, after - before);
	return rc;
}

int ws_store_get_changed(struct ws_store *s, const char *key, struct ws_etag *tag, struct ws_buf *out)
{
	struct ws_obj_info info;
	size_t before = out->len;
	int rc;

	if (s->ops->get_changed) {
		stat_add(&s->stats.gets, 1);
		rc = s->ops->get_changed(s, key, tag, out);
		if (rc == 0 && out->len > before)
			stat_add(&s->stats.bytes_got, out->len - before);
		return rc;
	}
	/* A table without it: read the object and compare etags. */
	rc = ws_store_get(s, key, 0, UINT64_MAX, out, &info);
	if (rc)
		return rc;
	if (tag->s[0] && strcmp(tag->s, info.etag.s) == 0) {
		out->len = before;
		return 1;
	}
	*tag = info.etag;
	return 0;
}

int ws_store_head(struct ws_store *s, const char *key, struct ws_obj_info *info)
{
	stat_add(&s->stats.heads, 1);
	return s->ops->head(s, key, info);
}

int ws_store_created_same(struct ws_store *s, const char *key, const struct iovec *iov, int iovcnt)
{
	struct ws_obj_info info;
	struct ws_buf b;
	uint64_t len = 0, off = 0;
	int rc;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	rc = ws_store_head(s, key, &info);
	if (rc == WS_ENOTFOUND)
		return ws_fail(-EIO, "store %s: %s: a create was refused as already there, but the object is gone "
			       "now; not taken as written", s->url, key);
	if (rc)
		return ws_fail_wrap(rc, "store %s: %s: a create was refused as already there, and the object "
				    "could not be looked at", s->url, key);
	if (info.size_bytes != len)
		return ws_fail(WS_ECORRUPT, "store %s: %s: a create was refused as already there, but the object "
			       "there is %" PRIu64 " bytes and this write is %" PRIu64 ": its key names other bytes "
			       "than it holds (a damaged object; remove it to let this write through)", s->url, key,
			       info.size_bytes, len);
	ws_buf_init(&b, len + 1 > WS_BUF_DEFAULT_MAX ? (size_t)len + 1 : WS_BUF_DEFAULT_MAX);
	rc = ws_store_get(s, key, 0, UINT64_MAX, &b, NULL);
	if (rc == WS_ENOTFOUND)
		rc = ws_fail(-EIO, "store %s: %s: a create was refused as already there, but the object is gone "
			     "now; not taken as written", s->url, key);
	else if (rc)
		ws_fail_wrap(rc, "store %s: %s: a create was refused as already there, and the object could not be "
			     "read back", s->url, key);
	for (int i = 0; i < iovcnt && !rc; i++) {
		if (b.len < off + iov[i].iov_len || memcmp(b.data + off, iov[i].iov_base, iov[i].iov_len) != 0)
			rc = ws_fail(WS_ECORRUPT, "store %s: %s: a create was refused as already there, but the object "
				     "there holds other bytes than this write: its key names other bytes than it holds "
				     "(a damaged object; remove it to let this write through)", s->url, key);
		off += iov[i].iov_len;
	}
	if (!rc && b.len != len)
		rc = ws_fail(WS_ECORRUPT, "store %s: %s: a create was refused as already there, but the object read "
			     "back is %zu bytes and this write is %" PRIu64 " (a damaged object; remove it to let this "
			     "write through)", s->url, key, b.len, len);
	ws_buf_free(&b);
	return rc;
}

/*
 * A page that does not move past token would make every paging loop spin
 * for ever (a backend bug, or a hostile server repeating its marker), so
 * each page is checked here: keys ascending, all after token and under
 * prefix, and a truncated page's next token past token.
 */
static int list_page_check(const struct ws_store *s, const char *prefix, const char *token,
			   const struct ws_list_page *p)
{
	const char *prev = token;

	for (size_t i = 0; i < p->count; i++) {
		if (!p->keys[i] || strncmp(p->keys[i], prefix, strlen(prefix)) != 0 ||
		    strcmp(p->keys[i], prev) <= 0)
			return ws_fail(-EPROTO, "store %s: list of \"%s\" after \"%s\": key %zu (\"%.*s\") is "
				       "not after the one before it or not under the prefix", s->url, prefix, token, i,
				       WS_KEY_MAX, p->keys[i] ? p->keys[i] : "(null)");
		prev = p->keys[i];
	}
	if (p->truncated && (p->count == 0 || strcmp(p->next_token, token) <= 0))
		return ws_fail(-EPROTO, "store %s: list of \"%s\" after \"%s\" did not advance (next token "
			       "\"%s\" with %zu keys)", s->url, prefix, token, p->next_token, p->count);
	return 0;
}

int ws_store_list(struct ws_store *s, const char *prefix, const char *token, unsigned max_keys,
		  struct ws_list_page *out)
{
	int rc;

	stat_add(&s->stats.lists, 1);
	rc = s->ops->list(s, prefix, token, max_keys, out);
	if (rc == 0 && (rc = list_page_check(s, prefix ? prefix : "", token ? token : "", out)) != 0)
		ws_list_page_free(out);
	return rc;
}

int ws_store_next_top(struct ws_store *s, const char *after, char name[WS_KEY_MAX])
{
	char token[WS_KEY_MAX] = "";
	struct ws_list_page page;
	size_t n;
	int rc;

	name[0] = '\0';
	if (!after)
		after = "";
	if (*after) {
		size_t alen = strnlen(after, WS_KEY_MAX);
		/* "<name>/~" sorts after every key below <name>/ ('~' after every key
		 * character); a name too long for that has no keys below it. */
		if (alen + 2 < sizeof(token))
			snprintf(token, sizeof(token), "%s/~", after);
		else if (alen < sizeof(token))
			memcpy(token, after, alen + 1);
		else
			return ws_fail(-EINVAL, "store %s: list: a top-level name of more than %d bytes", s->url,
				       WS_KEY_MAX - 1);
	}
	for (;;) {
		memset(&page, 0, sizeof(page));
		rc = ws_store_list(s, "", token, 1, &page);
		if (rc)
			return rc;
		if (page.count == 0) {
			ws_list_page_free(&page);
			return 0;
		}
		/* Each call must move on in key order, or a caller's loop would
		 * never end. (Names themselves need not ascend: "db-2/" and
		 * "db.x/" sort before "db/", '-' and '.' being below '/'.) */
		if (*token && strcmp(page.keys[0], token) <= 0) {
			rc = ws_fail(-EPROTO, "store %s: list after \"%s\" returned \"%s\", not a later key", s->url,
				     token, page.keys[0]);
			ws_list_page_free(&page);
			return rc;
		}
		/* A key without '/' is an object at the top, never a tenant's:
		 * stepped over by itself. Resuming after "<key>/~" would also
		 * step over the names between them ("db-2/", "db.x/" after an
		 * object "db"), and every tenant there would go unseen. */
		if (strchr(page.keys[0], '/') || strlen(page.keys[0]) >= sizeof(token))
			break;
		snprintf(token, sizeof(token), "%s", page.keys[0]);
		ws_list_page_free(&page);
	}
	n = strcspn(page.keys[0], "/");
	if (n >= WS_KEY_MAX)
		n = WS_KEY_MAX - 1;
	memcpy(name, page.keys[0], n);
	name[n] = '\0';
	ws_list_page_free(&page);
	return 0;
}
int ws_store_del(struct ws_store *s, const char *key)
{
	stat_add(&s->stats.deletes, 1);
	return s->ops->del(s, key);
}

int ws_store_del_many(struct ws_store *s, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t chunk = n - i < WS_DEL_MANY_MAX ? n - i : WS_DEL_MANY_MAX;
		int rc;
		if (s->ops->del_many) {
			rc = s->ops->del_many(s, keys + i, chunk);
			if (rc)
				return rc;
			stat_add(&s->stats.deletes, chunk);
		} else {
			for (size_t k = 0; k < chunk; k++) {
				rc = ws_store_del(s, keys[i + k]);
				if (rc)
					return rc;
			}
		}
		i += chunk;
	}
	return 0;
}

bool ws_store_pressed(struct ws_store *s)
{
	return s && s->ops->pressed && s->ops->pressed(s);
}

bool ws_store_cas_fences(const struct ws_store *s)
{
	const enum ws_store_kind k = ws_store_kind(s);
	return k == WS_STORE_FILE || (k == WS_STORE_S3 && !s->conditions_off) ||
	       (k == WS_STORE_OTHER && s && s->forwards_conditions);
}

enum ws_store_kind ws_store_kind(const struct ws_store *s)
{
	return s ? s->ops->kind : WS_STORE_OTHER;
}

struct ws_store *ws_store_open_limits(const char *url, const struct ws_store_limits *lim, unsigned flags, int *err)
{
	char q[256];
	return ws_store_open_defaults(url, ws_s3_limits_query(lim, q, sizeof(q)), flags, err);
}

void ws_store_close(struct ws_store *s)
{
	if (s)
		s->ops->close(s);
}

/* ---- URL dispatch -------------------------------------------------------- */

struct ws_store *ws_store_open(const char *url, int *err)
{
	return ws_store_open_flags(url, 0, err);
}

struct ws_store *ws_store_open_flags(const char *url, unsigned flags, int *err)
{
	return ws_store_open_defaults(url, NULL, flags, err);
}

struct ws_store *ws_store_open_defaults(const char *url, const char *defaults, unsigned flags, int *err)
{
	struct ws_store *s = NULL;
	const char *path;
	int rc;

	if (!url || !*url) {
		rc = ws_fail(WS_ECONFIG, "sink URL is empty; expected file:///absolute/dir");
		goto fail;
	}
	if (strnlen(url, sizeof(s->url)) >= sizeof(s->url)) {
		rc = ws_fail(WS_ECONFIG, "sink URL is longer than %zu bytes", sizeof(s->url) - 1);
		goto fail;
	}
	if (strncasecmp(url, "s3://", 5) == 0) {
		s = ws_store_s3_open_defaults(url, defaults, flags, &rc);
		if (!s)
			goto fail;
		if (err)
			*err = 0;
		return s;
	}
	if (strncasecmp(url, "file:", 5) != 0) {
		/* Named by its scheme only: the rest may hold user:password@. */
		rc = ws_fail(WS_ECONFIG, "sink %.*s...: unknown scheme; expected file:///absolute/dir or s3://bucket",
			     (int)strcspn(url, ":/?@"), url);
		goto fail;
	}
	if (strncmp(url + 5, "//", 2) != 0) {
		rc = ws_fail(WS_ECONFIG, "sink %s: a file URL is file:///absolute/dir", url);
		goto fail;
	}
	path = url + 7;
	if (!*path) {
		rc = ws_fail(WS_ECONFIG, "sink %s: the URL names no directory", url);
		goto fail;
	}
	if (path[0] != '/') {
		/* file://host/dir or file://relative: neither names a local absolute path. */
		rc = ws_fail(WS_ECONFIG, "sink %s: the path must be absolute (file:///dir); "
			     "a host part or relative path is not supported", url);
		goto fail;
	}
	if (strpbrk(path, "?#")) {
		rc = ws_fail(WS_ECONFIG, "sink %s: a file URL takes no query or fragment", url);
		goto fail;
	}
	if (strchr(path, '%')) {
		/* Taking "%20" literally would silently pick a different directory. */
		rc = ws_fail(WS_ECONFIG, "sink %s: percent-encoded file paths are not supported", url);
		goto fail;
	}
	if (path[strspn(path, "/")] == '\0') {
		rc = ws_fail(WS_ECONFIG, "sink %s: refusing the filesystem root as a sink", url);
		goto fail;
	}
	s = ws_store_file_open_flags(path, flags, &rc);
	if (!s)
		goto fail;
	snprintf(s->url, sizeof(s->url), "%s", url);
	if (err)
		*err = 0;
	return s;
fail:
	if (err)
		*err = rc;
	return NULL;
}
