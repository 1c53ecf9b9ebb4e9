#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

char *wt_tmpdir(const char *tag)
{
	const char *base = getenv("WS_TEST_TMP");
	char *p;
	if (!base || !*base)
		base = "/tmp";
	mkdir(base, 0755);
	if (asprintf(&p, "%s/%s.XXXXXX", base, tag) < 0)
		return NULL;
	if (!mkdtemp(p)) {
		free(p);
		return NULL;
	}
	return p;
}

void wt_rmrf(const char *path)
{
	if (path && *path && strcmp(path, "/") != 0)
		wt_sh("rm -rf '%s'", path);
}

uint8_t *wt_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;
	*len = 0;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)n + 1);
		if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n)
			*len = (size_t)n;
	}
	fclose(f);
	return buf;
}

int wt_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	int rc;
	if (!f)
		return -errno;
	rc = fwrite(data, 1, len, f) == len ? 0 : -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

char *wt_path(const char *dir, const char *name)
{
	char *p;
	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	return p;
}

int wt_sh(const char *fmt, ...)
{
	char *cmd;
	va_list ap;
	int rc;
	va_start(ap, fmt);
	rc = vasprintf(&cmd, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -1;
	rc = system(cmd);
	free(cmd);
	if (rc == -1 || !WIFEXITED(rc))
		return -1;
	return WEXITSTATUS(rc);
}

uint64_t wt_rand(uint64_t *state)
{
	uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545f4914f6cdd1dull;
}
