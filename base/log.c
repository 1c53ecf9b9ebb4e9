#include "ws_logging.h"

#include <stdarg.h>
#include <stdio.h>

static enum ws_log_level log_level = WS_LOG_WARN;
static ws_log_fn log_sink;
static void *log_arg;

void ws_log_set_level(enum ws_log_level level) { log_level = level; }

void ws_log_set_sink(ws_log_fn fn, void *arg)
{
	log_sink = fn;
	log_arg = arg;
}

void ws_log(enum ws_log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	char msg[1024];
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log_sink)
		log_sink(level, msg, log_arg);
	else
		fprintf(stderr, "walship: %s: %s\n", names[level], msg);
}
