/*
 * The sink URL parser through its public entry point, ws_store_open_flags
 * (store/store.c dispatches file:// and s3://), with WS_STORE_EXISTING so
 * nothing is created and no probe request is sent: an s3:// URL is parsed
 * and its HTTP client set up, never contacted. Every URL either opens or
 * fails with a negative error and a detail.
 */
#include "fuzz.h"
#include "ws_fail.h"
#include "ws_store.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	setenv("AWS_ACCESS_KEY_ID", "fuzz", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "fuzz", 1);
	setenv("AWS_REGION", "us-east-1", 1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *url;
	struct ws_store *s;
	int err = 1;

	/* A URL is a C string: the bytes up to the first NUL. */
	url = malloc(size + 1);
	if (!url)
		abort();
	memcpy(url, data, size);
	url[size] = '\0';
	s = ws_store_open_flags(url, WS_STORE_EXISTING, &err);
	if (s) {
		FUZZ_CHECK(err == 0);
		ws_store_close(s);
	} else {
		FUZZ_CHECK(err < 0);
	}
	free(url);
	return 0;
}
