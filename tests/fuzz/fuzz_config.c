/*
 * The CLI's INI config (tools/config.c over libinih) on any bytes as the
 * --config file, through ws_cli_config_load_stream and
 * ws_cli_config_finish, as `replicate --config` runs them. A rejected
 * config must come back as the usage exit status; an accepted one must have
 * what finish promises (a sink, shards, each tenant's path and a shard in
 * range). Messages go to stderr, as in the CLI.
 */
#include "config.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	/* [s3] keys set these unless already set: keep them fixed across inputs. */
	setenv("AWS_ACCESS_KEY_ID", "fuzz", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "fuzz", 1);
	setenv("AWS_SESSION_TOKEN", "fuzz", 1);
	setenv("AWS_REGION", "us-east-1", 1);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ws_cli_config c;
	struct ws_cli_overrides o;
	FILE *f;
	int rc;

	memset(&c, 0, sizeof(c));
	memset(&o, 0, sizeof(o));
	/* fmemopen of 0 bytes fails with EINVAL; an empty file is a real case. */
	f = size ? fmemopen((void *)(uintptr_t)data, size, "r") : fopen("/dev/null", "r");
	if (!f)
		abort();
	rc = ws_cli_config_load_stream(&c, f, "fuzz.ini");
	FUZZ_CHECK(rc == 0 || rc == WS_CLI_EXIT_USAGE);
	if (rc == 0) {
		rc = ws_cli_config_finish(&c, &o);
		FUZZ_CHECK(rc == 0 || rc == WS_CLI_EXIT_USAGE);
		if (rc == 0) {
			FUZZ_CHECK(c.shards >= 1 && c.shard != NULL);
			for (size_t i = 0; i < c.tenant_count; i++) {
				FUZZ_CHECK(c.tenants[i].name && c.tenants[i].path);
				FUZZ_CHECK(c.tenants[i].shard < 0 || (unsigned)c.tenants[i].shard < c.shards);
				FUZZ_CHECK(ws_cli_config_tenant_index(&c, c.tenants[i].name) == (long)i);
			}
		}
	}
	ws_cli_config_free(&c);
	return 0;
}
