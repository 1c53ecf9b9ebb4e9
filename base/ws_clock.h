#ifndef WS_CLOCK_H
#define WS_CLOCK_H

#include <stdint.h>

/* Wall clock, ms since the Unix epoch: stamped into durable objects. */
int64_t ws_wall_ms(void);
/* Monotonic clock for intervals and deadlines. */
uint64_t ws_mono_ns(void);
uint64_t ws_mono_ms(void);
/* Sleep at least ms milliseconds (resumed after signals). */
void ws_sleep_ms(unsigned ms);

#endif
