#include "ws_fail.h"
#include "ws_assert.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char errbuf[2048]; /* keys are up to 1 KiB; a wrapped message names two */

const char *ws_strerror(int err)
{
	switch (err) {
	case 0: return "success";
	case WS_ECORRUPT: return "checksum or hash mismatch";
	case WS_EFORMAT: return "malformed or foreign data";
	case WS_ENOTWAL: return "not a SQLite WAL file";
	case WS_EPRECOND: return "precondition failed (object exists or changed)";
	case WS_EFENCED: return "fenced by a newer owner";
	case WS_EINCOMPLETE: return "incomplete chain";
	case WS_ECONFIG: return "invalid configuration";
	case WS_ETOOBIG: return "configured limit exceeded";
	case WS_ENOTFOUND: return "not found";
	case WS_ERANGE_: return "requested point not in stored range";
	case WS_ETHROTTLED: return "object store throttled until retries ran out";
	case WS_ESHED: return "dropped by the shed backpressure policy";
	case WS_EREPLACED: return "database file replaced at its path";
	case WS_ELOSTRACE: return "ownership moved during the call; nothing acknowledged";
	case WS_EBADSTORE: return "the object store does not honour a conditional write";
	case WS_ENOKEY: return "the key an object is encrypted under is not available";
	default: break;
	}
	if (err < 0 && err > WS_ERR_BASE)
		return strerror(-err);
	return "unknown error";
}

int ws_failv(int err, const char *fmt, va_list ap)
{
	int n = vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	if (n >= 0 && (size_t)n < sizeof(errbuf) - 4 && err != 0) {
		/* Append the code's meaning unless the caller already said it. */
		const char *s = ws_strerror(err);
		if (!strstr(errbuf, s))
			snprintf(errbuf + n, sizeof(errbuf) - (size_t)n, " (%s)", s);
	}
	return err;
}

int ws_fail(int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ws_failv(err, fmt, ap);
	va_end(ap);
	return err;
}

int ws_fail_wrap(int err, const char *fmt, ...)
{
	char prefix[512];
	char old[sizeof(errbuf)];
	va_list ap;

	snprintf(old, sizeof(old), "%s", errbuf[0] ? errbuf : ws_strerror(err));
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	{
		size_t pl = strlen(prefix);
		if (pl > sizeof(errbuf) - 3)
			pl = sizeof(errbuf) - 3;
		memcpy(errbuf, prefix, pl);
		memcpy(errbuf + pl, ": ", 2);
		size_t room = sizeof(errbuf) - pl - 3;
		size_t ol = strlen(old);
		if (ol > room)
			ol = room;
		memcpy(errbuf + pl + 2, old, ol);
		errbuf[pl + 2 + ol] = '\0';
	}
	return err;
}

const char *ws_errmsg(void)
{
	return errbuf[0] ? errbuf : "no error detail recorded";
}

void ws_errclear(void)
{
	errbuf[0] = '\0';
}

void ws_assert_fail(const char *expr, const char *file, int line, const char *func)
{
	fprintf(stderr, "walship: invariant broken: %s (%s:%d, %s)\n", expr, file, line, func);
	abort();
}

int ws_err_transient(int err)
{
	return err == WS_ETHROTTLED || err == -EIO || err == -ETIMEDOUT || err == -ECONNRESET ||
	       err == -ECONNREFUSED || err == -EAGAIN || err == -EHOSTUNREACH || err == -ENETUNREACH;
}
