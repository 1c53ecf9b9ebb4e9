/*
 * The CLI's configuration: the INI file of `replicate --config` (libinih),
 * tenants from the command line, and the command line's overrides, merged
 * into one ws_engine_config's worth of settings. docs/CLI.md "Configuration file"
 * documents every key.
 *
 * Every error is printed to stderr as "walship: config FILE:LINE: reason"
 * (or "walship: reason" for a command-line argument) and returned as
 * WS_CLI_EXIT_USAGE: a bad config is a usage error, exit status 2.
 */
#ifndef WS_CLI_CONFIG_H
#define WS_CLI_CONFIG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "walship.h"

#define WS_CLI_EXIT_USAGE 2
#define WS_CLI_TENANTS_MAX 100000u   /* per run, file and command line together */

struct ws_cli_tenant {
	char *name;
	char *path;
	int shard;                   /* -1: the engine's stable hash picks it */
	bool has_policy;
	enum ws_policy policy;
	int line;                    /* of its [tenant.NAME] header; 0: command line only */
	int path_line, shard_line, policy_line; /* 0: not set in the file */
	/* Its own compression/encryption (any of compression,
	 * compression_level, key_file in its section); the rest from [engine]. */
	bool has_seal;
	struct ws_seal_config seal;  /* seal.key_file: key_file or [engine]'s */
	char *key_file;
	int codec_line, level_line, key_file_line;
};

/* What the command line set; it wins over the file's [engine] section.
 * policy and interval_ms are shard defaults: a [shard.N] key still wins. */
struct ws_cli_overrides {
	const char *sink;
	const char *metrics_addr;
	bool has_epoch, has_pointer_generation, has_shards, has_policy, has_interval;
	uint64_t epoch, pointer_generation;
	unsigned shards;
	enum ws_policy policy;
	uint32_t interval_ms;        /* -> every shard's batch_age_ms_max */
	bool has_codec;              /* --compression */
	enum ws_codec codec;
	const char *key_file;        /* --key-file or $WALSHIP_KEY_FILE: [engine] key_file */
	/* checkpoint, retention: only the sink and the epoch are used; what
	 * only a replicate on this host needs (cores, memory, inotify) is not
	 * checked against this host. */
	bool sink_only;
};

struct ws_cli_config_parse;         /* the file's sections while it is read */

struct ws_cli_config {
	/* Results, complete after ws_cli_config_finish(). */
	char *sink;                  /* NULL: none given */
	char *metrics_addr;          /* NULL: no metrics endpoint */
	uint64_t epoch, pointer_generation;
	uint64_t wal_checkpoint_bytes; /* 0: the engine's default; UINT64_MAX: off */
	uint32_t drain_ms_max;       /* the stop's drain as a whole (has_: set; 0 = off) */
	bool has_drain_ms_max;
	unsigned shards;
	struct ws_shard_config *shard; /* shards entries */
	struct ws_cli_tenant *tenants;
	size_t tenant_count;
	struct ws_seal_config seal;  /* [engine]'s and the command line's (the default of every shard) */
	char **key_files;            /* owned: the names shard[i].seal.key_file point at */
	size_t key_file_count;

	/* Internal. */
	const char *file;            /* NULL: no --config */
	size_t tenant_cap;
	uint32_t *index;             /* open-addressing name -> tenants[i] + 1; 0 = empty */
	size_t index_cap;            /* power of two, >= 2 * tenant_count */
	struct ws_cli_config_parse *parse;
};

/* Read FILE (once, before ws_cli_config_finish). 0 or WS_CLI_EXIT_USAGE. */
int ws_cli_config_load(struct ws_cli_config *c, const char *file);
/* The same from an open stream (closed before it returns, whatever the
 * outcome), called name in messages: tests/fuzz feeds it memory. */
int ws_cli_config_load_stream(struct ws_cli_config *c, FILE *f, const char *name);
/* A database argument of `replicate`: NAME=PATH or PATH (NAME = the file
 * name without its extension). 0 or WS_CLI_EXIT_USAGE. */
int ws_cli_config_add_tenant_arg(struct ws_cli_config *c, const char *arg);
/* Apply the command line, check what spans sections (shard counts, ring
 * versus batch sizes, tenants' paths and shards) and build c->shard.
 * 0, WS_CLI_EXIT_USAGE, or -ENOMEM (printed). */
int ws_cli_config_finish(struct ws_cli_config *c, const struct ws_cli_overrides *o);
/* Every key file c names ([engine], [shard.N], [tenant.NAME], --key-file,
 * WALSHIP_KEY_FILE) joins the sink's keys: a checkpoint reads what each
 * tenant wrote. 0, or the error (said on stderr). */
struct ws_sink;
int ws_cli_add_config_keys(struct ws_sink *sink, const struct ws_cli_config *c);
/* A checkpoint's artifacts sealed as replicate seals each tenant's batches:
 * co->seal = c->seal, co->tenant_seal a tenant's own seal or its pinned
 * shard's. *owned: free() after the checkpoint. 0 or -ENOMEM. */
int ws_cli_checkpoint_seal(const struct ws_cli_config *c, struct ws_checkpoint_opts *co,
			   struct ws_checkpoint_seal **owned);
void ws_cli_config_free(struct ws_cli_config *c);

/* Index of the tenant called name in c->tenants, or -1. Read-only: safe from
 * any thread once the config is finished. */
long ws_cli_config_tenant_index(const struct ws_cli_config *c, const char *name);

/* "walship: config FILE:LINE: " (or "walship: config FILE: " with line <= 0,
 * "walship: " without a file), the message, a newline, then hint's line if
 * not NULL, on stderr. Returns WS_CLI_EXIT_USAGE. */
int ws_cli_verror(const char *file, int line, const char *hint, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));

/* A usage error of a command: "walship: " and the message, then the line
 * that points at `walship help`, on stderr. Returns WS_CLI_EXIT_USAGE. */
int ws_cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Strict parsers shared with the command line; 0 or -1. */
int ws_cli_parse_u64(const char *s, uint64_t *out);          /* digits only, no overflow */
/* getopt_long's c for opts: the option's name when it takes a value and was
 * already given (*seen holds one bit per entry of opts), else NULL. A value
 * given twice is a usage error: the last one silently winning dropped the
 * first (a second --config's tenants, another --sink). */
struct option;
const char *ws_cli_twice(const struct option *opts, int c, uint64_t *seen);
/* An owner token (epoch, pointer generation): ws_cli_parse_u64, at most 2^63-1
 * (what --json prints as a number). */
int ws_cli_parse_token(const char *s, uint64_t *out);
#define WS_CLI_TOKEN_RANGE "0..9223372036854775807"
int ws_cli_parse_size(const char *s, uint64_t *out);         /* 4096, 64KiB, 4MiB, 1GiB (K, M, G too) */
int ws_cli_parse_policy(const char *s, enum ws_policy *out); /* block | throttle | shed */
int ws_cli_parse_codec(const char *s, enum ws_codec *out);   /* zstd | none */
/* [A-Za-z0-9._-], 1..WS_TENANT_MAX-1 bytes. */
bool ws_cli_tenant_name_ok(const char *name);

#endif
