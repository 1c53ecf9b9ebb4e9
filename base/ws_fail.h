/*
 * Recording failures inside walship (not installed): every layer returns
 * `ws_fail(code, "what, which object, why")` so the thread's detail
 * (ws_errmsg(), ws_err.h) names the problem for the person being paged.
 */
#ifndef WS_FAIL_H
#define WS_FAIL_H

#include <stdarg.h>

#include "ws_err.h"

#define WS_PRINTF(a, b) __attribute__((format(printf, a, b)))

/*
 * A failure that means the sink is struggling or out of reach for now
 * (throttling, timeouts, resets, refused or unreachable connections, I/O
 * errors): what `block` waits out and `shed` drops. One list for both.
 */
int ws_err_transient(int err);

/* Record detail for the current thread and return err, for `return ws_fail(...)`. */
int ws_fail(int err, const char *fmt, ...) WS_PRINTF(2, 3);
int ws_failv(int err, const char *fmt, va_list ap) WS_PRINTF(2, 0);

/* Prefix the current detail with more context ("tenant orders: " + detail). */
int ws_fail_wrap(int err, const char *fmt, ...) WS_PRINTF(2, 3);

#endif
