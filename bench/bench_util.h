/* Helpers shared by the plain-C benchmark drivers. */
#ifndef WS_BENCH_UTIL_H
#define WS_BENCH_UTIL_H

#include <stdint.h>

/* Monotonic seconds. */
double bench_now_s(void);
/* Print "PROGRAM: message" to stderr and exit 1. */
void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* Strict decimal in min..max, or bench_die naming the flag. */
uint64_t bench_parse_num(const char *flag, const char *s, uint64_t min, uint64_t max);
/* Median of n values (n >= 1; v is not reordered). */
double bench_median(const double *v, unsigned n);
/* Print "LABEL: median UNIT (min..max)" of n values (n >= 1). */
void bench_print_spread(const char *label, const double *v, unsigned n, const char *unit);

#endif
