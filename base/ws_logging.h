/* Logging from inside walship (not installed): ws_warn("...") and friends
 * go to the level and sink the host set through ws_log.h. */
#ifndef WS_LOGGING_H
#define WS_LOGGING_H

#include "ws_fail.h"
#include "ws_log.h"

void ws_log(enum ws_log_level level, const char *fmt, ...) WS_PRINTF(2, 3);

#define ws_error(...) ws_log(WS_LOG_ERROR, __VA_ARGS__)
#define ws_warn(...) ws_log(WS_LOG_WARN, __VA_ARGS__)
#define ws_info(...) ws_log(WS_LOG_INFO, __VA_ARGS__)
#define ws_debug(...) ws_log(WS_LOG_DEBUG, __VA_ARGS__)

#endif
