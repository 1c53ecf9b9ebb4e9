#include "ws_clock.h"

#include <errno.h>
#include <stdio.h>

#include <time.h>

int64_t ws_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *ws_time_str(int64_t ms, char out[WS_TIME_STR_MAX])
{
	/* Floor division: a time before 1970 keeps its millisecond digits right. */
	int64_t secs = ms / 1000, frac = ms % 1000;
	struct tm tm;
	if (frac < 0) {
		frac += 1000;
		secs--;
	}
	time_t t = (time_t)secs;
	if (!gmtime_r(&t, &tm) ||
	    snprintf(out, WS_TIME_STR_MAX, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)frac) >= WS_TIME_STR_MAX)
		snprintf(out, WS_TIME_STR_MAX, "%lld ms since 1970", (long long)ms);
	return out;
}

uint64_t ws_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t ws_mono_ms(void) { return ws_mono_ns() / 1000000u; }

void ws_sleep_ms(unsigned ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}
