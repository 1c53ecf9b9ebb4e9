/* Minimal leveled logging to stderr; the host can replace the sink. */
#ifndef WS_LOG_H
#define WS_LOG_H

#include "ws_err.h"

/* Installed with walship.h: C linkage for C++ hosts too. */
#ifdef __cplusplus
extern "C" {
#endif

enum ws_log_level { WS_LOG_ERROR = 0, WS_LOG_WARN, WS_LOG_INFO, WS_LOG_DEBUG };

typedef void (*ws_log_fn)(enum ws_log_level level, const char *msg, void *arg);

void ws_log_set_level(enum ws_log_level level);
void ws_log_set_sink(ws_log_fn fn, void *arg);
void ws_log(enum ws_log_level level, const char *fmt, ...) WS_PRINTF(2, 3);

#define ws_error(...) ws_log(WS_LOG_ERROR, __VA_ARGS__)
#define ws_warn(...) ws_log(WS_LOG_WARN, __VA_ARGS__)
#define ws_info(...) ws_log(WS_LOG_INFO, __VA_ARGS__)
#define ws_debug(...) ws_log(WS_LOG_DEBUG, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif
