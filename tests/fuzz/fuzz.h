/*
 * Shared by the libFuzzer targets (tests/fuzz/README.md): the entry points'
 * prototypes (the project warns on missing ones), a check that aborts so
 * libFuzzer records the input, a quiet log sink, and the hash fix-ups that
 * let mutated objects reach the checks behind their hashes.
 */
#ifndef WS_FUZZ_H
#define WS_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ws_hash.h"
#include "ws_logging.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A property the decoder promises; its failure is a finding like a crash. */
#define FUZZ_CHECK(cond)                                                                            \
	do {                                                                                        \
		if (!(cond)) {                                                                      \
			fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                                    \
		}                                                                                   \
	} while (0)

static inline void fuzz_log_drop(enum ws_log_level level, const char *msg, void *arg)
{
	(void)level;
	(void)msg;
	(void)arg;
}

/* Logs are noise at thousands of inputs a second; errors are checked by value. */
static inline void fuzz_quiet(void)
{
	ws_log_set_sink(fuzz_log_drop, NULL);
}

/* A malloc'd copy (never NULL: libFuzzer's inputs are small). */
static inline uint8_t *fuzz_dup(const uint8_t *data, size_t size)
{
	uint8_t *p = malloc(size ? size : 1);
	if (!p)
		abort();
	if (size)
		memcpy(p, data, size);
	return p;
}

static inline void fuzz_put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

#endif
