/*
 * Object store interface: a small table of function pointers, one per
 * backend (file:// here, s3:// later). Keys are relative paths made of
 * [A-Za-z0-9._-] segments separated by '/', at most WS_KEY_MAX-1 bytes, no
 * empty, "." or ".." segment, no leading or trailing '/'. Backends reject
 * anything else with -EINVAL.
 *
 * Conditional writes are how walship decides ownership:
 *   WS_PUT_CREATE  succeeds only if the key does not exist  (If-None-Match: *)
 *   WS_PUT_CAS     succeeds only if the key's etag == expect (If-Match)
 * Both return WS_EPRECOND when the condition fails. Both hold between
 * processes (and, for s3, between hosts). A store found not to honour them
 * is refused at open (WS_ECONFIG), or, found out on a swap that got 412
 * while the object still had the named etag, fails it with WS_EBADSTORE:
 * not a lost race, and nothing a retry can fix.
 */
#ifndef WS_STORE_H
#define WS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ws_fail.h"

#define WS_KEY_MAX 512
#define WS_ETAG_MAX 256
#define WS_LIST_PAGE_MAX 1000u

/* Growable byte buffer with a hard maximum; a write past max sets a sticky error. */
struct ws_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
	size_t max;   /* 0 = WS_BUF_DEFAULT_MAX */
	int err;      /* sticky: first failure (-ENOMEM, WS_ETOOBIG) */
};
#define WS_BUF_DEFAULT_MAX ((size_t)1 << 31)

void ws_buf_init(struct ws_buf *b, size_t max);
int ws_buf_reserve(struct ws_buf *b, size_t extra) WS_MUST_CHECK;
int ws_buf_append(struct ws_buf *b, const void *p, size_t n);
void ws_buf_reset(struct ws_buf *b);
void ws_buf_free(struct ws_buf *b);

struct ws_etag {
	char s[WS_ETAG_MAX];   /* opaque, NUL-terminated, "" = none */
	uint32_t too_long;     /* the store's ETag header was this many bytes, more than s holds (s is ""); else 0 */
};

enum ws_put_mode {
	WS_PUT_OVERWRITE = 0,
	WS_PUT_CREATE = 1,
	WS_PUT_CAS = 2,
};

struct ws_obj_info {
	uint64_t size_bytes;
	int64_t mtime_ms;
	struct ws_etag etag;
};

struct ws_list_page {
	char **keys;          /* sorted ascending (byte order) */
	uint64_t *sizes;      /* object sizes in bytes, parallel to keys */
	size_t count;
	bool truncated;       /* more keys follow: pass next_token */
	char next_token[WS_KEY_MAX];
};
void ws_list_page_free(struct ws_list_page *p);
/* The most bytes a listed object may have: S3's object limit (5 TiB). A
 * listing that names a larger size is bad data from the store. */
#define WS_OBJ_BYTES_MAX (5ull << 40)
/* The most a sum of listed sizes may reach: what a signed 64-bit count
 * (and a JSON integer) holds. */
#define WS_LIST_BYTES_MAX ((uint64_t)INT64_MAX)

/* Operation counters per store, for metrics and the idle-tenant benchmark. */
struct ws_store_stats {
	uint64_t puts, gets, heads, lists, deletes;
	uint64_t bytes_put, bytes_got;
	uint64_t precond_failed;
	uint64_t retries;            /* requests retried (any cause) */
	uint64_t throttle_retries;   /* of which: the store said slow down (503 SlowDown, 429) */
	uint64_t resends;            /* requests the HTTP library sent again on its own after a
					reused connection died with no reply (not in retries) */
	uint64_t paced_ms;           /* s3: waits for a turn while pacing writes (pace=1), summed */
};

struct ws_store;

/* One request of ws_store_putv_many. */
struct ws_put_req {
	const char *key;
	const struct iovec *iov;
	int iovcnt;
	enum ws_put_mode mode;       /* WS_PUT_OVERWRITE or WS_PUT_CREATE */
	int rc;                      /* out: 0, WS_EPRECOND, WS_ETHROTTLED, other errors */
	uint32_t throttle_retries;   /* out: retries of this request caused by throttling */
	uint64_t retry_until_ms;     /* out: ws_mono_ms() before which the store asked for no new
				      * request (its latest Retry-After; 0: none) */
};

/* One request of ws_store_get_many: len bytes at off (as get reads them)
 * appended to out. */
struct ws_get_req {
	const char *key;
	uint64_t off, len;
	struct ws_buf *out;
	int rc;                      /* out: as get returns */
};

/*
 * Which backend a store is, for callers whose protocol differs by backend
 * (the checkpoint authority: a lease on a local directory, or conditional
 * writes on a shared store). Asked of the store, never read off the URL.
 */
enum ws_store_kind {
	WS_STORE_OTHER = 0,          /* neither backend: a test's or a bench's own table */
	WS_STORE_FILE,               /* file://; ws_store_file_root names its directory */
	WS_STORE_S3,                 /* s3:// */
};

struct ws_store_ops {
	/*
	 * Write the concatenation of iov as the object's whole content, durably:
	 * when put returns 0 the object survives a crash and is visible whole
	 * to every reader; readers never see a partial object.
	 * mode/expect as above; out_etag (may be NULL) gets the new etag.
	 * Errors: WS_EPRECOND, WS_EBADSTORE (s3: the store ignored If-Match),
	 * WS_ECONFIG (s3: a store opened without the probe fails it before its
	 * first swap), -EINVAL (bad key), -EIO/-ENOSPC/... (I/O).
	 */
	int (*put)(struct ws_store *s, const char *key, const struct iovec *iov, int iovcnt,
		   enum ws_put_mode mode, const struct ws_etag *expect, struct ws_etag *out_etag);
	/*
	 * Read len bytes at off (len == UINT64_MAX: to the end) appended to out.
	 * A range past the end returns what exists (possibly nothing).
	 * info (may be NULL) gets size and etag of the whole object.
	 * Errors: WS_ENOTFOUND, -EINVAL, WS_ETOOBIG (out->max), I/O errors.
	 */
	int (*get)(struct ws_store *s, const char *key, uint64_t off, uint64_t len,
		   struct ws_buf *out, struct ws_obj_info *info);
	/*
	 * Conditional read of a whole object: tag is the validator of the copy
	 * the caller holds ("" = none). 1 when the object is still that copy
	 * (out untouched, no body moved); 0 with the whole object appended to
	 * out and tag replaced by its validator. s3: a GET with If-None-Match
	 * on the ETag (304). file://: the published file's identity and times
	 * (device, inode, size, mtime and ctime in ns): an object is replaced
	 * only by renaming a new file over it, so a new copy is a new inode.
	 * NULL: the wrapper reads the object and compares etags.
	 * Errors: those of get.
	 */
	int (*get_changed)(struct ws_store *s, const char *key, struct ws_etag *tag, struct ws_buf *out);
	/* Errors: WS_ENOTFOUND, -EINVAL, I/O errors. */
	int (*head)(struct ws_store *s, const char *key, struct ws_obj_info *info);
	/*
	 * One page of keys starting with prefix, strictly after token (NULL or ""
	 * = from the start), at most max_keys (1..WS_LIST_PAGE_MAX).
	 * out must be zeroed or freed; caller frees with ws_list_page_free.
	 */
	int (*list)(struct ws_store *s, const char *prefix, const char *token, unsigned max_keys,
		    struct ws_list_page *out);
	/* Deleting a missing key succeeds (idempotent). Errors: -EINVAL, I/O. */
	int (*del)(struct ws_store *s, const char *key);
	/*
	 * Delete up to WS_DEL_MANY_MAX keys in one request where the backend can
	 * (S3 DeleteObjects). NULL: the wrapper deletes one by one. Missing keys
	 * succeed. Errors: -EINVAL, I/O (the detail names the first key that
	 * failed; the others may be gone).
	 */
	int (*del_many)(struct ws_store *s, const char *const *keys, size_t n);
	/*
	 * Run n independent PUTs concurrently where the backend can (S3: up to
	 * its max_in_flight on one connection pool). Each request gets its own
	 * rc and retries. NULL: the wrapper runs them one by one.
	 */
	int (*put_many)(struct ws_store *s, struct ws_put_req *reqs, size_t n);
	/*
	 * Run n ranged reads concurrently where the backend can (S3: up to
	 * its max_in_flight on one connection pool), each as get (no object
	 * info) with its own rc and retries. NULL: the wrapper runs them one
	 * by one.
	 */
	int (*get_many)(struct ws_store *s, struct ws_get_req *reqs, size_t n);
	/*
	 * Whether the store is holding this process's writes back now (s3: it
	 * refused one lately, or the pacer is spacing them out). NULL: never.
	 */
	bool (*pressed)(struct ws_store *s);
	void (*close)(struct ws_store *s);
	enum ws_store_kind kind;     /* which backend: ws_store_kind */
};

struct ws_keyring;

struct ws_store {
	const struct ws_store_ops *ops;
	char url[1024];
	struct ws_store_stats stats;
	/* Set by the one thread that uses the handle, around its calls: a
	 * throttled answer (503 SlowDown, 429) fails the call at once with
	 * WS_ETHROTTLED instead of being waited out and retried within it,
	 * and throttle_until_ms (mono) is set to when its Retry-After (or
	 * backoff) ends. The caller retries the work no sooner, and its
	 * other work goes on meanwhile (s3 only; other stores never throttle). */
	bool throttle_fail_fast;
	uint64_t throttle_until_ms;
	/* The keys sealed objects read through this handle are opened with
	 * (borrowed: the sink's; NULL: none). Set before any reader runs. */
	const struct ws_keyring *keys;
	/* How many objects a replay of a chain through this handle (restore,
	 * verify) fetches at once, ahead of the one it applies (core/prefetch.c);
	 * 0 or 1: one after another. Set before any reader runs. */
	unsigned fetch_parallelism;
	/* The store does not enforce create-once and compare-and-swap (s3
	 * conditional_writes=off): a refused write cannot fence an owner. */
	bool conditions_off;
	/* A store of another kind in front of one whose conditional writes
	 * fence, passing every put's mode and etag on unchanged (a test's
	 * throttle store, when asked): ws_store_cas_fences holds for it. */
	bool forwards_conditions;
	/* Monotonic ms at which the handle's last write went out: its call
	 * (ws_store_putv), or on s3 its last attempt, sent after any wait for
	 * the pacer or a retry's backoff. Written by the thread using the
	 * handle; a watermark's key_write_interval_ms counts from it. */
	uint64_t write_sent_ms;
};

enum ws_store_kind ws_store_kind(const struct ws_store *s);
/* The store is holding writes back now (ws_store_ops.pressed). */
bool ws_store_pressed(struct ws_store *s);
/* A compare-and-swap on this store is refused once the object changed
 * (file://, and s3:// unless conditional_writes=off): the write itself
 * fences. Any other store (a test's table) is taken not to. */
bool ws_store_cas_fences(const struct ws_store *s);

/* Thin wrappers that count operations in s->stats. */
int ws_store_put(struct ws_store *s, const char *key, const void *data, size_t len,
		 enum ws_put_mode mode, const struct ws_etag *expect, struct ws_etag *out_etag) WS_MUST_CHECK;
int ws_store_putv(struct ws_store *s, const char *key, const struct iovec *iov, int iovcnt,
		  enum ws_put_mode mode, const struct ws_etag *expect, struct ws_etag *out_etag) WS_MUST_CHECK;
int ws_store_get(struct ws_store *s, const char *key, uint64_t off, uint64_t len,
		 struct ws_buf *out, struct ws_obj_info *info) WS_MUST_CHECK;
int ws_store_head(struct ws_store *s, const char *key, struct ws_obj_info *info) WS_MUST_CHECK;
/* ws_store_ops.get_changed: 1 unchanged, 0 read (tag updated), or an error.
 * A read counts in gets and bytes_got; an unchanged answer in gets only. */
int ws_store_get_changed(struct ws_store *s, const char *key, struct ws_etag *tag, struct ws_buf *out)
	WS_MUST_CHECK;
/*
 * A create-once of iov under a key that names its content was refused as
 * already there (WS_EPRECOND): 0 when the object there holds the very same
 * bytes (an earlier attempt's), WS_ECORRUPT naming the key when it does
 * not (a damaged object, never to be taken as this write: its length, or
 * its bytes read back and compared), -EIO when it is gone again, or the
 * read's error. A rare path (after a lost reply or a killed tail), so the
 * object is read whole.
 */
int ws_store_created_same(struct ws_store *s, const char *key, const struct iovec *iov, int iovcnt) WS_MUST_CHECK;
/* Also checks that the page moves past token (-EPROTO otherwise), so that a
 * paging loop ends whatever the backend answers. */
int ws_store_list(struct ws_store *s, const char *prefix, const char *token, unsigned max_keys,
		  struct ws_list_page *out) WS_MUST_CHECK;
/*
 * Add page's sizes to *total. A size over WS_OBJ_BYTES_MAX, or a total
 * that would pass WS_LIST_BYTES_MAX, is WS_EFORMAT naming the store, the
 * key and the value, as bad data from the store; *total then holds the
 * sum of the sizes before it.
 */
int ws_list_page_add_bytes(const struct ws_store *s, const struct ws_list_page *page, uint64_t *total)
	WS_MUST_CHECK;
int ws_store_del(struct ws_store *s, const char *key) WS_MUST_CHECK;
/*
 * The first top-level name (a key's first segment) after the name `after`
 * ("" or NULL: the first of all), into name; "" when there is none. Keys
 * without '/' (objects at the top, no tenant's) are stepped over. One LIST
 * of one key per name or top-level object, however many keys a name holds
 * and however long it is, and each answer is past `after`, so a loop over
 * the names ends. Errors: -EPROTO (the store did not move on), those of
 * ws_store_list.
 */
int ws_store_next_top(struct ws_store *s, const char *after, char name[WS_KEY_MAX]) WS_MUST_CHECK;
/*
 * n PUTs, concurrently where the backend can. Returns 0 when every request
 * ran (each has its own rc; the detail of a failed one is not kept, so the
 * caller names it), negative when the call itself failed.
 */
int ws_store_putv_many(struct ws_store *s, struct ws_put_req *reqs, size_t n) WS_MUST_CHECK;
/*
 * n ranged reads (ws_get_req), concurrently where the backend can. Returns
 * 0 when every request ran (each has its own rc; the detail of a failed
 * one is not kept, so the caller reads it again or names it), negative
 * when the call itself failed.
 */
int ws_store_get_many(struct ws_store *s, struct ws_get_req *reqs, size_t n) WS_MUST_CHECK;
#define WS_DEL_MANY_MAX 1000u
/* Delete n keys (any n), in requests of at most WS_DEL_MANY_MAX. */
int ws_store_del_many(struct ws_store *s, const char *const *keys, size_t n) WS_MUST_CHECK;
void ws_store_close(struct ws_store *s);

/* True when key is well-formed as described above. */
bool ws_key_valid(const char *key);

/*
 * Open a sink by URL. "file:///absolute/dir" creates the directory if needed.
 * Errors: WS_ECONFIG (unknown scheme, relative path, malformed URL), I/O errors.
 */
struct ws_store *ws_store_open(const char *url, int *err);

/* The file backend directly (root must be absolute). */
struct ws_store *ws_store_file_open(const char *root, int *err);

/* The root directory of a file:// store (absolute, no trailing '/'); NULL
 * for any other backend. For callers that must keep their own files out of
 * the sink. */
const char *ws_store_file_root(const struct ws_store *s);

/*
 * Open flags. WS_STORE_EXISTING: the sink must already exist (WS_ENOTFOUND
 * otherwise); nothing is created or cleaned up. For read-only commands, so a
 * mistyped URL is an error rather than a new empty sink.
 */
#define WS_STORE_EXISTING 1u
struct ws_store *ws_store_open_flags(const char *url, unsigned flags, int *err);
struct ws_store *ws_store_file_open_flags(const char *root, unsigned flags, int *err);

/*
 * The s3:// backend (store_s3.c documents the URL and its parameters).
 * Errors: WS_ECONFIG (URL, credentials, a store that ignores If-None-Match
 * or honours If-Match in neither spelling; the detail names the parameter
 * or what the probe saw), I/O errors from the probe.
 */
struct ws_store *ws_store_s3_open(const char *url, unsigned flags, int *err);

/*
 * Open with defaults: a query string ("name=value&...") of parameters that
 * apply where the URL does not set them (the engine's per-shard retry
 * bounds). Messages name only what the URL holds, never these. Other
 * schemes ignore defaults.
 */
struct ws_store *ws_store_open_defaults(const char *url, const char *defaults, unsigned flags, int *err);
struct ws_store *ws_store_s3_open_defaults(const char *url, const char *defaults, unsigned flags, int *err);

/*
 * Open with the engine's per-shard bounds, where the URL does not set them.
 * The s3:// backend owns what they are called in its URL (store_s3.c);
 * the file backend has no requests to retry and ignores them. lim NULL:
 * ws_store_open_flags.
 */
struct ws_store_limits {
	uint64_t retry_attempts_max;     /* per request */
	uint64_t retry_deadline_ms;      /* per request */
	uint64_t max_in_flight;          /* requests outstanding at once */
	bool no_pace;                    /* s3: do not pace writes once throttled (pace=0) */
};
struct ws_store *ws_store_open_limits(const char *url, const struct ws_store_limits *lim, unsigned flags, int *err);
/* Create the sink's bucket; an existing bucket of ours is success. */
int ws_store_s3_create_bucket(struct ws_store *s) WS_MUST_CHECK;

#endif
