/* What the CPU offers the vector kernels (WAL checksums, XXH3). */
#ifndef WS_CPU_H
#define WS_CPU_H

#include <stdbool.h>

/*
 * True when the CPU has AVX2 and the environment does not say WS_SIMD=none
 * (which keeps every kernel on its plain path: a debugging aid, and how
 * valgrind runs compare). Decided once per process.
 */
bool ws_cpu_avx2(void);

#endif
