#ifndef WS_CLOCK_H
#define WS_CLOCK_H

#include <stdint.h>

/* Wall clock, ms since the Unix epoch: stamped into durable objects. */
int64_t ws_wall_ms(void);
/* ms since the Unix epoch as RFC 3339 UTC with milliseconds
 * (2026-12-05T07:01:02.345Z): how every message names a time. Returns out. */
#define WS_TIME_STR_MAX 40
const char *ws_time_str(int64_t ms, char out[WS_TIME_STR_MAX]);
/* Monotonic clock for intervals and deadlines. */
uint64_t ws_mono_ns(void);
uint64_t ws_mono_ms(void);
/* Sleep at least ms milliseconds (resumed after signals). */
void ws_sleep_ms(unsigned ms);

#endif
