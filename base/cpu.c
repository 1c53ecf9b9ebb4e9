#include "ws_cpu.h"

#include <stdlib.h>
#include <string.h>

bool ws_cpu_avx2(void)
{
	static int usable = -1;
	int u = __atomic_load_n(&usable, __ATOMIC_RELAXED);
	if (u < 0) {
		const char *env = getenv("WS_SIMD");
#if defined(__x86_64__) && defined(__GNUC__)
		u = __builtin_cpu_supports("avx2") && !(env && !strcmp(env, "none"));
#else
		(void)env;
		u = 0;
#endif
		__atomic_store_n(&usable, u, __ATOMIC_RELAXED);
	}
	return u;
}
