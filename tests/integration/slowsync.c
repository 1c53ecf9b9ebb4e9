/*
 * LD_PRELOAD shim for the integration tests: fsync and fdatasync of a file
 * whose name ends in "-wal" sleep WS_SLOW_SYNC_MS first, after the first
 * WS_SLOW_SYNC_SKIP of them (default 0; a writer that begins a WAL syncs
 * its header before it writes a frame). A slow disk under
 * a writer: SQLite (synchronous=FULL) syncs its WAL after writing a
 * commit's frames and before writing the wal-index, so the commit is in
 * the file, and not yet committed, for that long. Built by the test that
 * uses it (cc -shared -fPIC), outside the sanitizer builds.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void maybe_sleep(int fd)
{
	char link[64], path[4096];
	const char *ms = getenv("WS_SLOW_SYNC_MS"), *skip = getenv("WS_SLOW_SYNC_SKIP");
	static int seen;
	ssize_t n;
	if (!ms)
		return;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n > 4 && memcmp(path + n - 4, "-wal", 4) == 0 && seen++ >= (skip ? atoi(skip) : 0))
		usleep((useconds_t)atoi(ms) * 1000);
}

int fsync(int fd)
{
	static int (*real)(int);
	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
	maybe_sleep(fd);
	return real(fd);
}

int fdatasync(int fd)
{
	static int (*real)(int);
	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	maybe_sleep(fd);
	return real(fd);
}
