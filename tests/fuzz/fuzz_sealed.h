/*
 * The sealed targets' (batch, snap, artifact) common start: a keyring of
 * the one key gen_corpus.c seals its seeds with, and a buffer to open into.
 */
#ifndef WS_FUZZ_SEALED_H
#define WS_FUZZ_SEALED_H

#include "fuzz.h"
#include "ws_seal.h"

#define FUZZ_KEY "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

static struct ws_keyring ring;
static struct ws_buf plain;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	if (ws_keyring_parse(&ring, "fuzz", FUZZ_KEY, 64) != 0)
		abort();
	ws_buf_init(&plain, (size_t)64 << 20);
	return 0;
}

#endif
