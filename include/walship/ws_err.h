/*
 * walship error model.
 *
 * Every fallible function returns int: 0 on success or a negative error.
 * System errors are negative errno values, exactly as io_uring's cqe->res
 * reports them. walship's own errors live in a reserved range below
 * WS_ERR_BASE so they never collide with errno (LMDB does the same).
 *
 * Each failing call also records a human-readable detail in a thread-local
 * slot (ws_errmsg()): the tenant, the object key and the cause. The code is
 * for programs, the message is for the person being paged.
 *
 * This header is installed with walship.h and declares only what the
 * library exports; the calls that record a failure are ws_fail.h's.
 */
#ifndef WS_ERR_H
#define WS_ERR_H

/* Installed with walship.h: C linkage for C++ hosts too. */
#ifdef __cplusplus
extern "C" {
#endif

#define WS_MUST_CHECK __attribute__((warn_unused_result))

enum {
	WS_ERR_BASE = -30800,
	WS_ECORRUPT = WS_ERR_BASE,      /* bytes failed a checksum or hash */
	WS_EFORMAT = WS_ERR_BASE - 1,   /* malformed or foreign object / input */
	WS_ENOTWAL = WS_ERR_BASE - 2,   /* file is not a SQLite WAL */
	WS_EPRECOND = WS_ERR_BASE - 3,  /* create-once or compare-and-swap lost */
	WS_EFENCED = WS_ERR_BASE - 4,   /* a newer owner holds the stream */
	WS_EINCOMPLETE = WS_ERR_BASE - 5, /* a chain is missing a link */
	WS_ECONFIG = WS_ERR_BASE - 6,   /* bad configuration or argument */
	WS_ETOOBIG = WS_ERR_BASE - 7,   /* a configured maximum was reached */
	WS_ENOTFOUND = WS_ERR_BASE - 8, /* object or tenant absent */
	WS_ERANGE_ = WS_ERR_BASE - 9,   /* requested point is outside what is stored */
	WS_ETHROTTLED = WS_ERR_BASE - 10, /* the store kept throttling until retries ran out */
	WS_ESHED = WS_ERR_BASE - 11,    /* dropped by the shed backpressure policy */
	WS_EREPLACED = WS_ERR_BASE - 12, /* the database file was replaced at its path */
	WS_ELOSTRACE = WS_ERR_BASE - 13, /* ownership moved after the fencing read: nothing acknowledged */
	WS_EBADSTORE = WS_ERR_BASE - 14, /* the object store broke its own protocol (a 412 to If-Match
					    with the object's current etag); retrying cannot help */
	WS_ENOKEY = WS_ERR_BASE - 15,   /* an object is encrypted under a key this reader does not hold */
	WS_ERR_LAST = WS_ERR_BASE - 15,
};

/* Static description of a code (negative errno or WS_E*). Never NULL. */
const char *ws_strerror(int err);

/* Detail of the last failure on this thread; ws_strerror(err) if none recorded. */
const char *ws_errmsg(void);
void ws_errclear(void);

#ifdef __cplusplus
}
#endif

#endif
