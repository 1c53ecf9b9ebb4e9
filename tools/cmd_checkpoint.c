/*
 * The checkpoint commands of the CLI: take a checkpoint, run retention,
 * list checkpoints, restore a tenant at a checkpoint. JSON via jansson,
 * one object per line.
 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cmd_checkpoint.h"
#include "config.h"
#include "walship.h"

#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_USAGE WS_CLI_EXIT_USAGE

enum { OPT_SINK = 1000, OPT_CONFIG, OPT_EPOCH, OPT_DRY_RUN, OPT_JSON, OPT_KEEP, OPT_TENANT };

static json_t *u64(uint64_t v)
{
	return json_integer((json_int_t)v);
}

static void emit(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (s) {
		puts(s);
		free(s);
	}
	json_decref(o);
	fflush(stdout);
}

static json_t *info_json(const struct ws_checkpoint_info *i)
{
	json_t *o = json_object(), *ref = json_object();
	json_object_set_new(o, "id", u64(i->id));
	json_object_set_new(ref, "id", u64(i->id));
	json_object_set_new(ref, "key", json_string(i->ref_key));
	json_object_set_new(ref, "length", u64(i->ref_length));
	json_object_set_new(ref, "sha256", json_string(i->ref_sha256));
	json_object_set_new(o, "reference", i->committed ? ref : json_null());
	if (!i->committed)
		json_decref(ref);
	json_object_set_new(o, "committed", json_boolean(i->committed));
	json_object_set_new(o, "epoch", u64(i->epoch));
	json_object_set_new(o, "tenants", u64(i->tenants));
	json_object_set_new(o, "artifacts", u64(i->artifacts));
	json_object_set_new(o, "artifact_bytes", u64(i->artifact_bytes));
	json_object_set_new(o, "incremental", u64(i->incremental));
	json_object_set_new(o, "predecessor", i->has_predecessor ? u64(i->predecessor_id) : json_null());
	return o;
}

/* The sink URL from --sink, else from --config's [engine] sink. */
static int resolve_sink(const char *sink_url, const char *config, struct ws_cli_config *cfg, const char **out)
{
	struct ws_cli_overrides o;
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	*out = sink_url;
	/* The environment's key file, as replicate takes it. */
	if (getenv("WALSHIP_KEY_FILE") && *getenv("WALSHIP_KEY_FILE"))
		cfg->seal.key_file = getenv("WALSHIP_KEY_FILE");
	if (!config)
		return sink_url ? EXIT_OK : ws_cli_usage("--sink URL (or --config FILE naming a sink) is required");
	if ((rc = ws_cli_config_load(cfg, config)) != 0)
		return EXIT_USAGE;
	memset(&o, 0, sizeof(o));
	o.sink = sink_url;
	o.sink_only = true;
	o.key_file = cfg->seal.key_file;
	if ((rc = ws_cli_config_finish(cfg, &o)) != 0)
		return EXIT_USAGE;
	*out = cfg->sink;
	if (!*out)
		return ws_cli_usage("--sink URL (or --config FILE naming a sink) is required");
	return EXIT_OK;
}

static struct ws_sink *open_sink(const char *url, int *exit_code) { return ws_cli_sink_open(url, NULL, exit_code); }

/* The sink --sink or --config names, opened with the keys of both;
 * NULL with *exit_code set. epoch (may be NULL): the config's [engine]
 * epoch, when it has one. keep (may be NULL): the config, kept (the
 * caller frees it; zero without --config but for the environment's key). */
static struct ws_sink *sink_from_args_keep(const char *sink_url, const char *config, int *exit_code,
					   uint64_t *epoch, struct ws_cli_config *keep)
{
	struct ws_cli_config own, *cfg_p = keep ? keep : &own;
	struct ws_sink *sink = NULL;
	const char *url;

	*exit_code = resolve_sink(sink_url, config, cfg_p, &url);
	if (*exit_code == EXIT_OK)
		sink = open_sink(url, exit_code);
	if (sink && ws_cli_add_config_keys(sink, cfg_p)) {
		ws_sink_close(sink);
		sink = NULL;
		*exit_code = EXIT_FAIL;
	}
	if (epoch && config)
		*epoch = cfg_p->epoch;
	if (!keep)
		ws_cli_config_free(&own);
	return sink;
}

static struct ws_sink *sink_from_args(const char *sink_url, const char *config, int *exit_code, uint64_t *epoch)
{
	return sink_from_args_keep(sink_url, config, exit_code, epoch, NULL);
}

int cmd_checkpoint(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sink", required_argument, NULL, OPT_SINK },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "epoch", required_argument, NULL, OPT_EPOCH },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sink_url = NULL, *config = NULL;
	struct ws_checkpoint_opts co;
	struct ws_checkpoint_info info;
	struct ws_checkpoint_seal *seals = NULL;
	struct ws_cli_config cfg;
	struct ws_sink *sink;
	uint64_t cfg_epoch = 0;
	bool has_epoch = false;
	int c, rc, code;

	memset(&co, 0, sizeof(co));
	optind = 1;
	uint64_t seen = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		const char *twice = ws_cli_twice(opts, c, &seen);
		if (twice)
			return ws_cli_usage("--%s given twice", twice);
		switch (c) {
		case 'h': return ws_cli_help("checkpoint");
		case OPT_SINK: sink_url = optarg; break;
		case OPT_CONFIG: config = optarg; break;
		case OPT_EPOCH:
			/* The same --epoch as replicate's (0 and 1 decide alike). */
			if (ws_cli_parse_token(optarg, &co.epoch))
				return ws_cli_usage("--epoch: '%s' is not an integer " WS_CLI_TOKEN_RANGE, optarg);
			has_epoch = true;
			break;
		default: return ws_cli_usage("checkpoint: unknown or incomplete option");
		}
	}
	if (optind < argc)
		return ws_cli_usage("checkpoint: unexpected argument '%s'", argv[optind]);
	if (!(sink = sink_from_args_keep(sink_url, config, &code, &cfg_epoch, &cfg))) {
		ws_cli_config_free(&cfg);
		return code;
	}
	if (!has_epoch)
		co.epoch = cfg_epoch;
	/* Artifacts sealed as the tenants' batches are. */
	if (ws_cli_checkpoint_seal(&cfg, &co, &seals) != 0) {
		fprintf(stderr, "walship: checkpoint: out of memory\n");
		ws_cli_config_free(&cfg);
		ws_sink_close(sink);
		return EXIT_FAIL;
	}
	rc = ws_checkpoint_take(sink, &co, &info);
	free(seals);
	ws_cli_config_free(&cfg);
	ws_sink_close(sink);
	if (rc) {
		fprintf(stderr, "walship: checkpoint failed: %s\n", ws_errmsg());
		/* The arguments were checked before the sink was opened: a
		 * WS_ECONFIG from here on came from what the sink holds. */
		return EXIT_FAIL;
	}
	emit(info_json(&info));
	if (!info.own) {
		/* Not ours: no checkpoint was taken by this call. */
		fprintf(stderr, "walship: checkpoint not taken: another writer's checkpoint %" PRIu64 " was decided "
			"first (%s)\n", info.id, info.committed ? "commit" : "abort");
		return EXIT_FAIL;
	}
	return info.committed ? EXIT_OK : EXIT_FAIL;
}

struct ret_print {
	bool json;
	json_t *keys;
};

static void on_delete(const char *key, void *arg)
{
	struct ret_print *p = arg;
	if (p->json)
		json_array_append_new(p->keys, json_string(key));
	else
		printf("%s\n", key);
}

int cmd_retention(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sink", required_argument, NULL, OPT_SINK },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "dry-run", no_argument, NULL, OPT_DRY_RUN },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "keep-checkpoints", required_argument, NULL, OPT_KEEP },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sink_url = NULL, *config = NULL;
	struct ret_print p = { false, NULL };
	struct ws_retention_report rep;
	struct ws_sink *sink;
	bool dry = false;
	uint64_t keep = 1;
	int c, rc, code;

	optind = 1;
	uint64_t seen = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		const char *twice = ws_cli_twice(opts, c, &seen);
		if (twice)
			return ws_cli_usage("--%s given twice", twice);
		switch (c) {
		case 'h': return ws_cli_help("retention");
		case OPT_SINK: sink_url = optarg; break;
		case OPT_CONFIG: config = optarg; break;
		case OPT_DRY_RUN: dry = true; break;
		case OPT_JSON: p.json = true; break;
		case OPT_KEEP:
			if (ws_cli_parse_u64(optarg, &keep) || keep < 1 || keep > 1000000)
				return ws_cli_usage("retention: --keep-checkpoints '%s' is not a count 1..1000000", optarg);
			break;
		default: return ws_cli_usage("retention: unknown or incomplete option");
		}
	}
	if (optind < argc)
		return ws_cli_usage("retention: unexpected argument '%s'", argv[optind]);
	if (!(sink = sink_from_args(sink_url, config, &code, NULL)))
		return code;
	if (p.json)
		p.keys = json_array();
	rc = ws_retention_run_keep(sink, dry, (unsigned)keep, on_delete, &p, &rep);
	ws_sink_close(sink);
	if (p.json) {
		json_t *o = json_object();
		json_object_set_new(o, "dry_run", json_boolean(dry));
		json_object_set_new(o, "protected", rep.ran ? u64(rep.protected_id) : json_null());
		json_object_set_new(o, "kept_from", rep.ran && rep.kept_from_id ? u64(rep.kept_from_id) : json_null());
		json_object_set_new(o, "ok", json_boolean(rc == 0));
		json_object_set_new(o, "deleted", p.keys);
		emit(o);
	}
	if (rc) {
		fprintf(stderr, "walship: retention failed (it resumes on the next run): %s\n", ws_errmsg());
		/* The arguments were checked before the sink was opened: a
		 * WS_ECONFIG from here on came from what the sink holds. */
		return EXIT_FAIL;
	}
	if (!rep.ran)
		fprintf(stderr, "walship: retention: no committed checkpoint yet; nothing deleted\n");
	else
		fprintf(stderr, "walship: retention: protected checkpoint %" PRIu64 ", kept from checkpoint %" PRIu64
			"; %s %" PRIu64 " objects (%" PRIu64 " older checkpoints)\n", rep.protected_id,
			rep.kept_from_id ? rep.kept_from_id : rep.protected_id, dry ? "would delete" : "deleted",
			rep.deleted, rep.checkpoints_deleted);
	return EXIT_OK;
}

int cmd_forget(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sink", required_argument, NULL, OPT_SINK },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "tenant", required_argument, NULL, OPT_TENANT },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sink_url = NULL, *config = NULL, *tenant = NULL;
	struct ws_forget_report rep;
	struct ws_sink *sink;
	bool json = false;
	int c, rc, code;

	optind = 1;
	uint64_t seen = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		const char *twice = ws_cli_twice(opts, c, &seen);
		if (twice)
			return ws_cli_usage("--%s given twice", twice);
		switch (c) {
		case 'h': return ws_cli_help("forget");
		case OPT_SINK: sink_url = optarg; break;
		case OPT_CONFIG: config = optarg; break;
		case OPT_TENANT: tenant = optarg; break;
		case OPT_JSON: json = true; break;
		default: return ws_cli_usage("forget: unknown or incomplete option");
		}
	}
	if (optind < argc)
		return ws_cli_usage("forget: unexpected argument '%s'", argv[optind]);
	if (!tenant)
		return ws_cli_usage("forget: --tenant NAME is required");
	if (!(sink = sink_from_args(sink_url, config, &code, NULL)))
		return code;
	rc = ws_tenant_forget(sink, tenant, &rep);
	ws_sink_close(sink);
	if (rc) {
		fprintf(stderr, "walship: forget failed: %s\n", ws_errmsg());
		/* A name that is not a tenant's was the argument: usage. */
		return rc == WS_ECONFIG ? EXIT_USAGE : EXIT_FAIL;
	}
	if (json) {
		json_t *o = json_object();
		json_object_set_new(o, "tenant", json_string(tenant));
		json_object_set_new(o, "after_checkpoint", rep.after_checkpoint ? u64(rep.after_checkpoint) : json_null());
		json_object_set_new(o, "watermark_deleted", json_boolean(rep.had_watermark));
		json_object_set_new(o, "objects_left", json_boolean(rep.had_objects));
		emit(o);
	}
	fprintf(stderr, "walship: tenant %s removed for good%s; checkpoints no longer require it%s\n", tenant,
		rep.had_watermark ? " (its watermark deleted)" : "",
		rep.had_objects ? ", and the retention after the next checkpoint deletes its objects" : "");
	return EXIT_OK;
}

/* One repaired object as the CLI prints it: a line on stdout, or one JSON object of the array. */
static void repair_print(const struct ws_repair_report *r, bool json, json_t *arr)
{
	const char *verb = r->dry_run ? "would rebuild" : "rebuilt";
	if (r->deployment_repaired) {
		if (json) {
			json_t *o = json_object();
			json_object_set_new(o, "key", json_string("checkpoints/deployment"));
			json_object_set_new(o, "damage", json_string(r->deployment_damage));
			json_object_set_new(o, "deployment", json_string(r->deployment));
			json_object_set_new(o, "deployment_fresh", json_boolean(r->deployment_fresh));
			json_object_set_new(o, "authority", json_string(r->deployment_local ? "local" : "shared"));
			json_object_set_new(o, "next_id", u64(r->next_id));
			json_array_append_new(arr, o);
		} else {
			printf("checkpoints/deployment: %s: deployment %s%s, authority %s, next_id %" PRIu64 " (it was %s)\n",
			       verb, r->deployment, r->deployment_fresh ? " (chosen afresh: no record carries one)" : "",
			       r->deployment_local ? "local" : "shared", r->next_id, r->deployment_damage);
		}
	}
	if (!r->head_repaired)
		return;
	if (json) {
		json_t *o = json_object();
		json_object_set_new(o, "key", json_string("checkpoints/head"));
		json_object_set_new(o, "damage", json_string(r->head_damage));
		json_object_set_new(o, "removed", json_boolean(r->head_removed));
		json_object_set_new(o, "latest_commit", !r->head_removed && r->latest_commit ? u64(r->latest_commit)
										       : json_null());
		json_object_set_new(o, "latest_terminal", r->head_removed ? json_null() : u64(r->latest_terminal));
		json_object_set_new(o, "latest_terminal_verdict",
				    r->head_removed ? json_null() : json_string(r->terminal_commit ? "commit" : "abort"));
		json_object_set_new(o, "epoch", r->head_removed ? json_null() : u64(r->epoch));
		json_object_set_new(o, "decisions", r->head_removed ? json_null() : u64(r->decisions));
		json_object_set_new(o, "in_flight", r->in_flight ? u64(r->in_flight) : json_null());
		json_array_append_new(arr, o);
	} else if (r->head_removed) {
		printf("checkpoints/head: %s: no checkpoint ID was ever handed out, so nothing was decided (it "
		       "was %s)\n", r->dry_run ? "would remove" : "removed", r->head_damage);
	} else {
		char commit[32] = "none";
		if (r->latest_commit)
			snprintf(commit, sizeof(commit), "%" PRIu64, r->latest_commit);
		printf("checkpoints/head: %s: latest Commit %s, latest terminal %s %" PRIu64 ", epoch %" PRIu64
		       ", decisions %" PRIu64 " (it was %s)\n", verb, commit, r->terminal_commit ? "Commit" : "Abort",
		       r->latest_terminal, r->epoch, r->decisions, r->head_damage);
		if (r->in_flight)
			printf("checkpoints/head: attempt %" PRIu64 " was in flight (its witness open): not taken as "
			       "decided; the next checkpoint aborts it\n", r->in_flight);
	}
}

int cmd_repair(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sink", required_argument, NULL, OPT_SINK },
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "dry-run", no_argument, NULL, OPT_DRY_RUN },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sink_url = NULL, *config = NULL;
	struct ws_repair_report rep;
	struct ws_sink *sink;
	bool dry = false, json = false;
	json_t *arr = NULL;
	int c, rc, code;

	optind = 1;
	uint64_t seen = 0;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		const char *twice = ws_cli_twice(opts, c, &seen);
		if (twice)
			return ws_cli_usage("--%s given twice", twice);
		switch (c) {
		case 'h': return ws_cli_help("repair");
		case OPT_SINK: sink_url = optarg; break;
		case OPT_CONFIG: config = optarg; break;
		case OPT_DRY_RUN: dry = true; break;
		case OPT_JSON: json = true; break;
		default: return ws_cli_usage("repair: unknown or incomplete option");
		}
	}
	if (optind < argc)
		return ws_cli_usage("repair: unexpected argument '%s'", argv[optind]);
	if (!(sink = sink_from_args(sink_url, config, &code, NULL)))
		return code;
	rc = ws_checkpoint_repair(sink, dry, &rep);
	ws_sink_close(sink);
	if (json) {
		json_t *o = json_object();
		arr = json_array();
		if (rc == 0)
			repair_print(&rep, true, arr);
		json_object_set_new(o, "dry_run", json_boolean(dry));
		json_object_set_new(o, "ok", json_boolean(rc == 0));
		json_object_set_new(o, "repaired", arr);
		emit(o);
	}
	if (rc) {
		fprintf(stderr, "walship: repair failed: %s\n", ws_errmsg());
		return EXIT_FAIL;
	}
	if (!json)
		repair_print(&rep, false, NULL);
	if (!rep.deployment_repaired && !rep.head_repaired)
		fprintf(stderr, "walship: repair: nothing to repair: checkpoints/deployment and checkpoints/head "
			"decode (or nothing was decided yet)\n");
	else if (dry)
		fprintf(stderr, "walship: repair: dry run, nothing written\n");
	return EXIT_OK;
}

struct ls_print {
	bool json;
};

/* ms since the epoch as RFC 3339 in UTC, to the millisecond; NULL when 0 (unknown). */
static const char *rfc3339(int64_t ms, char out[40])
{
	struct tm tm;
	time_t t;
	if (ms <= 0)
		return NULL;
	t = (time_t)(ms / 1000);
	if (!gmtime_r(&t, &tm) || strftime(out, 24, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
		return NULL;
	snprintf(out + strlen(out), 16, ".%03dZ", (int)(ms % 1000));
	return out;
}

static int ls_cb(const struct ws_checkpoint_info *i, void *arg)
{
	struct ls_print *p = arg;
	char dbuf[40], cbuf[40];
	const char *decided = rfc3339(i->decided_ms, dbuf), *cut = rfc3339(i->cut_time_ms, cbuf);
	if (p->json) {
		json_t *o = info_json(i);
		json_object_set_new(o, "decided", decided ? json_string(decided) : json_null());
		json_object_set_new(o, "cut_time", cut ? json_string(cut) : json_null());
		json_object_set_new(o, "damaged", json_boolean(i->damaged));
		json_object_set_new(o, "damage", i->damaged ? json_string(i->damage) : json_null());
		emit(o);
		return 0;
	}
	if (i->damaged) {
		/* Nothing of it restores; the next checkpoint commits past it and retention removes it. */
		printf("checkpoint %-8" PRIu64 " DAMAGED index=%s: %s\n", i->id, i->ref_key, i->damage);
		return 0;
	}
	printf("checkpoint %-8" PRIu64 " epoch=%" PRIu64 " tenants=%" PRIu64 " artifact_bytes=%" PRIu64
	       " decided=%s cut_time=%s index=%s\n", i->id, i->epoch, i->tenants, i->artifact_bytes,
	       decided ? decided : "unknown", cut ? cut : "unknown", i->ref_key);
	return 0;
}

int cmd_ls_checkpoints(const char *sink_url, bool json)
{
	struct ls_print p = { json };
	struct ws_sink *sink;
	int rc, code;

	if (!sink_url)
		return ws_cli_usage("ls: --sink URL is required");
	if (!(sink = open_sink(sink_url, &code)))
		return code;
	rc = ws_checkpoint_list(sink, ls_cb, &p);
	ws_sink_close(sink);
	if (rc) {
		fprintf(stderr, "walship: ls --checkpoints: %s\n", ws_errmsg());
		/* The arguments were checked before the sink was opened: a
		 * WS_ECONFIG from here on came from what the sink holds. */
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

int cmd_restore_checkpoint(const char *sink_url, const char *tenant, const char *checkpoint, const char *out,
			   bool force, const char *key_file)
{
	uint64_t id = WS_CHECKPOINT_LATEST;
	struct ws_sink *sink;
	int rc, code;

	if (!sink_url || !tenant || !out)
		return ws_cli_usage("restore: --sink, --tenant and -o are required");
	if (strcmp(checkpoint, "latest") != 0 && (ws_cli_parse_u64(checkpoint, &id) || id == 0))
		return ws_cli_usage("--checkpoint: '%s' must be a checkpoint ID or 'latest'", checkpoint);
	if (!(sink = ws_cli_sink_open(sink_url, key_file, &code)))
		return code;
	rc = ws_restore_checkpoint(sink, tenant, id, out, force);
	ws_sink_close(sink);
	if (rc) {
		fprintf(stderr, "walship: restore refused: %s\n", ws_errmsg());
		/* The arguments were checked before the sink was opened: a
		 * WS_ECONFIG from here on came from what the sink holds. */
		return EXIT_FAIL;
	}
	fprintf(stderr, "walship: tenant %s restored to %s at checkpoint %s\n", tenant, out, checkpoint);
	return EXIT_OK;
}
