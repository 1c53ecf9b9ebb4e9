/* Minimal leveled logging to stderr; the host can replace the sink.
 * Installed with walship.h; the logging calls themselves are ws_logging.h's. */
#ifndef WS_LOG_H
#define WS_LOG_H

/* Installed with walship.h: C linkage for C++ hosts too. */
#ifdef __cplusplus
extern "C" {
#endif

enum ws_log_level { WS_LOG_ERROR = 0, WS_LOG_WARN, WS_LOG_INFO, WS_LOG_DEBUG };

typedef void (*ws_log_fn)(enum ws_log_level level, const char *msg, void *arg);

void ws_log_set_level(enum ws_log_level level);
void ws_log_set_sink(ws_log_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

#endif
