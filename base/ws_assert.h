/*
 * Invariants the code relies on, checked in every build (Redis keeps its
 * serverAssert on in release builds for the same reason: a broken
 * invariant in a storage engine must stop the process, not ship a wrong
 * byte). Each check is a comparison or two: keep them off per-byte paths.
 * static_assert is for layout.
 */
#ifndef WS_ASSERT_H
#define WS_ASSERT_H

_Noreturn void ws_assert_fail(const char *expr, const char *file, int line, const char *func);

#define WS_ASSERT(cond)                                                           \
	do {                                                                      \
		if (__builtin_expect(!(cond), 0))                                 \
			ws_assert_fail(#cond, __FILE__, __LINE__, __func__);      \
	} while (0)

#endif
