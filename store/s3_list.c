/*
 * The s3:// backend's two XML bodies: ListObjectsV2 (a page of keys and
 * sizes, trusted only when whole, sorted and within the prefix) and the
 * quiet DeleteObjects reply, each parsed with expat apart from the network
 * (tests/fuzz feed them any bytes through s3_internal.h).
 */
#include <ctype.h>
#include <errno.h>
#include <expat.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_hash.h"
#include "ws_assert.h"
#include "s3_internal.h"

/* ---- ListObjectsV2 -------------------------------------------------------- */

struct list_parse {
	struct ws_list_page *page;
	const char *store_prefix;   /* every key must start with it and '/' (when not "") */
	size_t strip;               /* bytes of prefix + '/' to strip from keys */
	size_t cap;
	int depth;
	bool in_contents;
	bool key_taken;             /* this <Contents>' key went into the page */
	char text[WS_KEY_MAX * 2];
	size_t text_len;
	bool text_overflow;
	bool truncated;
	bool truncated_seen;        /* <IsTruncated> was there */
	bool key_seen;              /* this <Contents> had a <Key> */
	bool size_seen;             /* ... and a <Size>, size (in whichever order) */
	uint64_t size;
	bool root_ok;               /* the document is a <ListBucketResult> */
	bool overflow;              /* more <Contents> than max-keys asked for */
	size_t long_key;            /* length of a key too long for walship (0: none) */
	uint64_t big_size;          /* the first size over WS_OBJ_BYTES_MAX (0: none) ... */
	char big_key[WS_KEY_MAX];   /* ... and its key */
	char next[WS_KEY_MAX * 2];
	int err;
};

static void XMLCALL xml_start(void *arg, const XML_Char *name, const XML_Char **attrs)
{
	struct list_parse *p = arg;
	(void)attrs;
	p->depth++;
	if (p->depth == 1)
		p->root_ok = !strcmp(name, "ListBucketResult");
	if (p->depth == 2 && !strcmp(name, "Contents")) {
		p->in_contents = true;
		p->key_taken = false;
		p->key_seen = false;
		p->size_seen = false;
	}
	p->text_len = 0;
	p->text_overflow = false;
}

static void XMLCALL xml_text(void *arg, const XML_Char *s, int len)
{
	struct list_parse *p = arg;
	if (len < 0 || p->text_len + (size_t)len >= sizeof(p->text)) {
		p->text_overflow = true;
		return;
	}
	memcpy(p->text + p->text_len, s, (size_t)len);
	p->text_len += (size_t)len;
}

static void XMLCALL xml_end(void *arg, const XML_Char *name)
{
	struct list_parse *p = arg;
	/* expat pairs every end with its start; xml_text keeps room for the NUL. */
	WS_ASSERT(p->depth > 0 && p->text_len < sizeof(p->text));
	p->text[p->text_len] = '\0';
	if (p->in_contents && p->depth == 3 && !strcmp(name, "Key")) {
		if (p->key_seen)
			p->err = WS_EFORMAT; /* two keys in one <Contents> */
		p->key_seen = true;
		if (p->text_overflow || p->text_len < p->strip ||
		    (p->strip && (memcmp(p->text, p->store_prefix, p->strip - 1) != 0 ||
				  p->text[p->strip - 1] != '/'))) {
			/* Short, or another prefix's key: never strip it into one of ours. */
			p->err = WS_EFORMAT;
		} else if (p->text_len - p->strip >= WS_KEY_MAX) {
			/* Longer than any key walship writes or reads: copied into a
			 * key buffer, it would be cut into another key. */
			p->err = WS_EFORMAT;
			p->long_key = p->text_len - p->strip;
		} else if (p->page->count < p->cap) {
			char *k;
			WS_ASSERT(p->text_len - p->strip < WS_KEY_MAX); /* (checked just above) */
			k = strdup(p->text + p->strip);
			if (!k)
				p->err = -ENOMEM;
			else
				p->page->keys[p->page->count++] = k;
			p->key_taken = k != NULL;
		} else {
			p->key_taken = false;
			p->overflow = true;
		}
	} else if (p->in_contents && p->depth == 3 && !strcmp(name, "Size")) {
		char *end;
		unsigned long long v;
		errno = 0;
		v = strtoull(p->text, &end, 10);
		/* Decimal digits only: strtoull alone takes "-1" (as 2^64-1), "+5", " 5". */
		if (p->size_seen || !isdigit((unsigned char)p->text[0]) || *end || errno == ERANGE)
			p->err = WS_EFORMAT;
		p->size = v;
		p->size_seen = true;
	} else if (p->depth == 2 && !strcmp(name, "IsTruncated")) {
		/* xs:boolean, with the whitespace XML allows around it. */
		const char *t = p->text + strspn(p->text, " \t\r\n");
		size_t n = strlen(t);
		while (n && strchr(" \t\r\n", t[n - 1]))
			n--;
		if ((n == 4 && !memcmp(t, "true", 4)) || (n == 1 && t[0] == '1'))
			p->truncated = true;
		else if ((n == 5 && !memcmp(t, "false", 5)) || (n == 1 && t[0] == '0'))
			p->truncated = false;
		else
			p->err = WS_EFORMAT;
		if (p->truncated_seen)
			p->err = WS_EFORMAT;
		p->truncated_seen = true;
	} else if (p->depth == 2 && !strcmp(name, "Contents")) {
		/* An object without a key or a size: nothing to take it for. */
		if (!p->key_seen || !p->size_seen) {
			p->err = WS_EFORMAT;
		} else if (p->size > WS_OBJ_BYTES_MAX) {
			/* No store holds it: summed, it would wrap (ls). */
			if (!p->big_size)
				snprintf(p->big_key, sizeof(p->big_key), "%s",
					 p->key_taken ? p->page->keys[p->page->count - 1] : "(past the page)");
			p->big_size = p->big_size ? p->big_size : p->size;
		} else if (p->key_taken) {
			p->page->sizes[p->page->count - 1] = p->size;
		}
		p->in_contents = false;
	}
	p->depth--;
	p->text_len = 0;
}

int ws_s3_list_parse(const char *url, const void *xml, size_t len, const char *store_prefix, const char *prefix,
		     const char *token, unsigned max_keys, struct ws_list_page *out)
{
	struct list_parse lp;
	XML_Parser xp;
	int rc = 0;

	memset(&lp, 0, sizeof(lp));
	lp.page = out;
	lp.cap = max_keys;
	lp.store_prefix = store_prefix;
	lp.strip = store_prefix[0] ? strlen(store_prefix) + 1 : 0;
	xp = XML_ParserCreate(NULL);
	if (!xp)
		return -ENOMEM;
	XML_SetUserData(xp, &lp);
	XML_SetElementHandler(xp, xml_start, xml_end);
	XML_SetCharacterDataHandler(xp, xml_text);
	if (len > INT32_MAX || XML_Parse(xp, xml, (int)len, 1) != XML_STATUS_OK) {
		rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 response is not well-formed XML: %s", url,
			     XML_ErrorString(XML_GetErrorCode(xp)));
		goto out;
	}
	/* A listing that ends early loses what it did not show: a tenant
	 * missing from verify, ls or a checkpoint's cut. Anything but a whole
	 * page that can be continued is an error, never a short listing. */
	if (!lp.root_ok) {
		rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 response is not a ListBucketResult (an error "
			     "document in a 200?)", url);
		goto out;
	}
	if (lp.long_key) {
		rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 returned a key of %zu bytes under the sink's prefix, "
			     "longer than walship's %d: not an object of this sink (move it out of the prefix)", url,
			     lp.long_key, WS_KEY_MAX - 1);
		goto out;
	}
	if (lp.big_size && !lp.err) {
		rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 gives %s a size of %" PRIu64 " bytes, more than an "
			     "object can have (%llu): bad data from the store", url, lp.big_key, lp.big_size,
			     WS_OBJ_BYTES_MAX);
		goto out;
	}
	if (lp.err) {
		rc = ws_fail(lp.err, "s3 %s: ListObjectsV2 response has a malformed key, size or IsTruncated, or a "
			     "key outside the sink's prefix", url);
		goto out;
	}
	/* Without it a listing that goes on would be taken for a whole one. */
	if (!lp.truncated_seen) {
		rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 response has no IsTruncated: cannot tell whether "
			     "the listing goes on", url);
		goto out;
	}
	if (lp.overflow) {
		rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 returned more keys than the %u asked for", url,
			     max_keys);
		goto out;
	}
	if (lp.truncated && out->count == 0) {
		rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 says the listing goes on but returned no key to "
			     "go on after", url);
		goto out;
	}
	/* Keys must come sorted, within the prefix and after the token: a
	 * response that breaks this is not trusted. */
	for (size_t i = 0; i < out->count; i++) {
		if (strncmp(out->keys[i], prefix, strlen(prefix)) != 0 ||
		    (token && token[0] && strcmp(out->keys[i], token) <= 0) ||
		    (i > 0 && strcmp(out->keys[i - 1], out->keys[i]) >= 0)) {
			rc = ws_fail(WS_EFORMAT, "s3 %s: ListObjectsV2 returned key \"%s\" out of order or "
				     "outside the prefix", url, out->keys[i]);
			goto out;
		}
	}
	WS_ASSERT(out->count <= max_keys); /* the parser takes no key past the page */
	out->truncated = lp.truncated;
	if (out->truncated)
		snprintf(out->next_token, sizeof(out->next_token), "%s", out->keys[out->count - 1]);
out:
	XML_ParserFree(xp);
	return rc;
}

static void append_param(char *q, size_t cap, const char *name, const char *value)
{
	char enc[WS_KEY_MAX * 6];
	size_t n = strlen(q);
	if (ws_uri_encode(value, strlen(value), false, enc, sizeof(enc)) != 0)
		enc[0] = '\0';
	snprintf(q + n, cap - n, "%s%s=%s", n ? "&" : "", name, enc);
}

int s3_list(struct ws_store *base, const char *prefix, const char *token, unsigned max_keys,
	    struct ws_list_page *out)
{
	struct s3_store *s = (struct s3_store *)base;
	char query[WS_KEY_MAX * 14] = "";
	char full_prefix[WS_KEY_MAX * 2], after[WS_KEY_MAX * 2], num[16];
	struct ws_buf body;
	struct s3_call c = { .method = "GET", .key = "" };
	int rc;

	if (max_keys == 0 || max_keys > WS_LIST_PAGE_MAX)
		return ws_fail(-EINVAL, "s3 %s: list of %u keys (1..%u)", base->url, max_keys, WS_LIST_PAGE_MAX);
	memset(out, 0, sizeof(*out));
	out->keys = calloc(max_keys, sizeof(*out->keys));
	out->sizes = calloc(max_keys, sizeof(*out->sizes));
	if (!out->keys || !out->sizes) {
		ws_list_page_free(out);
		return -ENOMEM;
	}
	snprintf(full_prefix, sizeof(full_prefix), "%s%s%s", s->prefix, s->prefix[0] ? "/" : "", prefix);
	/* Query parameters in any order: the signer sorts its canonical copy. */
	append_param(query, sizeof(query), "list-type", "2");
	snprintf(num, sizeof(num), "%u", max_keys);
	append_param(query, sizeof(query), "max-keys", num);
	append_param(query, sizeof(query), "prefix", full_prefix);
	if (token && token[0]) {
		snprintf(after, sizeof(after), "%s%s%s", s->prefix, s->prefix[0] ? "/" : "", token);
		append_param(query, sizeof(query), "start-after", after);
	}
	c.query = query;
	ws_buf_init(&body, 16u << 20);
	c.resp = &body;
	rc = s3_call(s, &c);
	if (rc)
		goto fail;
	if (c.req.status != 200) {
		rc = s3_status_error(s, &c, &body);
		goto fail;
	}
	rc = ws_s3_list_parse(base->url, body.data, body.len, s->prefix, prefix, token, max_keys, out);
	if (rc)
		goto fail;
	ws_buf_free(&body);
	return 0;
fail:
	ws_buf_free(&body);
	ws_list_page_free(out);
	return rc;
}

/* DeleteObjects' reply in quiet mode lists only failures: keep the first. */
struct del_parse {
	int depth;
	bool in_error;
	char tag[32];
	char text[WS_KEY_MAX * 2];
	size_t text_len;
	char key[WS_KEY_MAX * 2];
	char code[64];
	unsigned errors;
	bool root_ok;            /* the document is a <DeleteResult> */
};

static void XMLCALL del_start(void *arg, const XML_Char *name, const XML_Char **attrs)
{
	struct del_parse *p = arg;
	(void)attrs;
	p->depth++;
	if (p->depth == 1)
		p->root_ok = !strcmp(name, "DeleteResult");
	if (p->depth == 2 && !strcmp(name, "Error"))
		p->in_error = true;
	p->text_len = 0;
}

static void XMLCALL del_text(void *arg, const XML_Char *s, int len)
{
	struct del_parse *p = arg;
	if (len > 0 && p->text_len + (size_t)len < sizeof(p->text)) {
		memcpy(p->text + p->text_len, s, (size_t)len);
		p->text_len += (size_t)len;
	}
}

static void XMLCALL del_end(void *arg, const XML_Char *name)
{
	struct del_parse *p = arg;
	WS_ASSERT(p->depth > 0 && p->text_len < sizeof(p->text));
	p->text[p->text_len] = '\0';
	if (p->in_error && p->depth == 3 && p->errors == 0) {
		if (!strcmp(name, "Key"))
			snprintf(p->key, sizeof(p->key), "%s", p->text);
		else if (!strcmp(name, "Code"))
			snprintf(p->code, sizeof(p->code), "%.63s", p->text);
	} else if (p->depth == 2 && !strcmp(name, "Error")) {
		p->in_error = false;
		/* A key that is already gone is what delete asked for. */
		if (strcmp(p->code, "NoSuchKey") != 0)
			p->errors++;
		else
			p->key[0] = p->code[0] = '\0';
	}
	p->depth--;
	p->text_len = 0;
}

int ws_s3_delete_parse(const char *url, const void *xml, size_t len)
{
	struct del_parse dp;
	XML_Parser xp;
	int rc = 0;

	memset(&dp, 0, sizeof(dp));
	xp = XML_ParserCreate(NULL);
	if (!xp)
		return -ENOMEM;
	XML_SetUserData(xp, &dp);
	XML_SetElementHandler(xp, del_start, del_end);
	XML_SetCharacterDataHandler(xp, del_text);
	if (len > INT32_MAX || XML_Parse(xp, xml, (int)len, 1) != XML_STATUS_OK)
		rc = ws_fail(WS_EFORMAT, "s3 %s: DeleteObjects response is not well-formed XML", url);
	else if (!dp.root_ok)
		rc = ws_fail(WS_EFORMAT, "s3 %s: DeleteObjects response is not a DeleteResult (an error document "
			     "in a 200?): nothing taken as deleted", url);
	else if (dp.errors)
		rc = ws_fail(-EIO, "s3 %s: DeleteObjects: %u key%s not deleted, first %s (%s)", url, dp.errors,
			     dp.errors == 1 ? "" : "s", dp.key, dp.code);
	XML_ParserFree(xp);
	return rc;
}

int s3_del_many(struct ws_store *base, const char *const *keys, size_t n)
{
	struct s3_store *s = (struct s3_store *)base;
	struct ws_buf body, resp;
	struct s3_call c = { .method = "POST", .key = "", .query = "delete" };
	char h_len[64], h_md5[64], b64[32];
	unsigned char md5[16];
	unsigned int md5_len = 0;
	int rc;

	if (n == 0)
		return 0;
	if (n > WS_DEL_MANY_MAX)
		return ws_fail(-EINVAL, "s3 %s: DeleteObjects of %zu keys (at most %u)", base->url, n,
			       WS_DEL_MANY_MAX);
	ws_buf_init(&body, (size_t)n * (WS_KEY_MAX * 2 + 32) + 256);
	ws_buf_init(&resp, 16u << 20);
	{
		static const char head[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Delete><Quiet>true</Quiet>";
		ws_buf_append(&body, head, sizeof(head) - 1);
	}
	for (size_t i = 0; i < n; i++) {
		char full[WS_KEY_MAX * 2];
		/* Valid keys hold no XML metacharacters: nothing to escape. */
		if (!ws_key_valid(keys[i])) {
			rc = ws_fail(-EINVAL, "s3 %s: invalid key \"%s\"", base->url, keys[i]);
			goto out;
		}
		snprintf(full, sizeof(full), "%s%s%s", s->prefix, s->prefix[0] ? "/" : "", keys[i]);
		ws_buf_append(&body, "<Object><Key>", 13);
		ws_buf_append(&body, full, strlen(full));
		ws_buf_append(&body, "</Key></Object>", 15);
	}
	ws_buf_append(&body, "</Delete>", 9);
	if (body.err) {
		rc = body.err;
		goto out;
	}
	/* DeleteObjects requires Content-MD5 of the body. */
	if (EVP_Digest(body.data, body.len, md5, &md5_len, EVP_md5(), NULL) != 1) {
		rc = ws_fail(-EIO, "s3 %s: MD5 failed", base->url);
		goto out;
	}
	EVP_EncodeBlock((unsigned char *)b64, md5, (int)md5_len);
	snprintf(h_len, sizeof(h_len), "Content-Length: %zu", body.len);
	snprintf(h_md5, sizeof(h_md5), "Content-MD5: %s", b64);
	c.extra[c.extra_count++] = h_len;
	c.extra[c.extra_count++] = h_md5;
	struct iovec iov = { body.data, body.len };
	c.body = &iov;
	c.body_iovcnt = 1;
	c.resp = &resp;
	rc = s3_call(s, &c);
	if (rc)
		goto out;
	if (c.req.status != 200) {
		rc = s3_status_error(s, &c, &resp);
		goto out;
	}
	rc = ws_s3_delete_parse(base->url, resp.data, resp.len);
out:
	ws_buf_free(&body);
	ws_buf_free(&resp);
	return rc;
}

/* ---- one field of a small reply (multipart uploads) ------------------------ */

struct field_parse {
	const char *root, *field;
	int depth;
	bool root_ok, in_field, seen, too_long;
	char *out;
	size_t cap, len;
};

static void XMLCALL field_start(void *arg, const XML_Char *name, const XML_Char **attrs)
{
	struct field_parse *p = arg;
	(void)attrs;
	p->depth++;
	if (p->depth == 1)
		p->root_ok = !strcmp(name, p->root);
	if (p->depth == 2 && p->root_ok && p->field && !strcmp(name, p->field) && !p->seen) {
		p->in_field = true;
		p->seen = true;
		p->len = 0;
	}
}

static void XMLCALL field_text(void *arg, const XML_Char *s, int len)
{
	struct field_parse *p = arg;
	if (!p->in_field || len <= 0)
		return;
	if (p->len + (size_t)len >= p->cap) {
		p->too_long = true;
		return;
	}
	memcpy(p->out + p->len, s, (size_t)len);
	p->len += (size_t)len;
}

static void XMLCALL field_end(void *arg, const XML_Char *name)
{
	struct field_parse *p = arg;
	(void)name;
	if (p->depth == 2 && p->in_field)
		p->in_field = false;
	p->depth--;
}

int ws_s3_xml_field(const char *url, const char *what, const void *xml, size_t len, const char *root,
		    const char *field, char *out, size_t cap)
{
	struct field_parse fp = { .root = root, .field = field, .out = out, .cap = cap };
	XML_Parser xp;
	int rc = 0;

	WS_ASSERT(!field || (out && cap > 0));
	if (out)
		out[0] = '\0';
	xp = XML_ParserCreate(NULL);
	if (!xp)
		return -ENOMEM;
	XML_SetUserData(xp, &fp);
	XML_SetElementHandler(xp, field_start, field_end);
	XML_SetCharacterDataHandler(xp, field_text);
	if (len > INT32_MAX || XML_Parse(xp, xml, (int)len, 1) != XML_STATUS_OK)
		rc = ws_fail(WS_EFORMAT, "s3 %s: %s: the reply is not well-formed XML (%s)", url, what,
			     len ? XML_ErrorString(XML_GetErrorCode(xp)) : "an empty body");
	else if (!fp.root_ok)
		rc = ws_fail(WS_EFORMAT, "s3 %s: %s: the reply is not a %s", url, what, root);
	else if (fp.too_long)
		rc = ws_fail(WS_EFORMAT, "s3 %s: %s: the reply's %s is longer than %zu bytes", url, what, field,
			     cap - 1);
	else if (field && (!fp.seen || fp.len == 0))
		rc = ws_fail(WS_EFORMAT, "s3 %s: %s: the reply has no %s", url, what, field);
	else if (field)
		out[fp.len] = '\0';
	XML_ParserFree(xp);
	return rc;
}
