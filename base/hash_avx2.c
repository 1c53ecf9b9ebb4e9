/*
 * XXH3-64 with its AVX2 kernel (this file alone is compiled with -mavx2;
 * hash.c calls it only on a CPU that has AVX2). XXH3's output does not
 * depend on the kernel; tests compare the two.
 */
#include "hash_impl.h"
#include "ws_hash.h"

#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#include <xxhash.h>

#define WS_XXH_FN(name) name##_avx2
#include "xxh_body.h"
