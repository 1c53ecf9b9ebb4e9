#include "bench_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double bench_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void bench_die(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", program_invocation_short_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

uint64_t bench_parse_num(const char *flag, const char *s, uint64_t min, uint64_t max)
{
	char *end;
	unsigned long long v;
	if (!s || !*s || *s == '-')
		bench_die("%s needs a number", flag);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		bench_die("%s: '%s' must be %" PRIu64 "..%" PRIu64, flag, s, min, max);
	return v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bench_median(const double *v, unsigned n)
{
	double *s = malloc(n * sizeof(*s));
	double m;
	if (!s)
		bench_die("out of memory");
	memcpy(s, v, n * sizeof(*v));
	qsort(s, n, sizeof(*s), cmp_double);
	m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
	return m;
}

void bench_print_spread(const char *label, const double *v, unsigned n, const char *unit)
{
	double lo = v[0], hi = v[0];
	for (unsigned i = 1; i < n; i++) {
		lo = v[i] < lo ? v[i] : lo;
		hi = v[i] > hi ? v[i] : hi;
	}
	printf("%s: %.2f %s (%.2f..%.2f)\n", label, bench_median(v, n), unit, lo, hi);
}
