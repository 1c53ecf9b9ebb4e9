/* JSON output of the CLI (jansson): one object per line, the seed's field names. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "ws_clock.h"

static json_t *u64(uint64_t v) { return json_integer((json_int_t)v); }

static json_t *gen_json(const struct ws_wal_generation *g)
{
	json_t *o = json_object();
	json_object_set_new(o, "checkpoint_seq", u64(g->checkpoint_seq));
	if (g->has_salt) {
		json_t *salt = json_array();
		json_array_append_new(salt, u64(g->salt1));
		json_array_append_new(salt, u64(g->salt2));
		json_object_set_new(o, "salt", salt);
	} else {
		json_object_set_new(o, "salt", json_null());
	}
	return o;
}

static json_t *bp_json(const struct ws_backpressure_report *bp)
{
	json_t *o = json_object();
	json_object_set_new(o, "policy", json_string(ws_policy_name(bp->policy)));
	json_object_set_new(o, "spill_high_water", u64(bp->spill_high_water));
	json_object_set_new(o, "frames_shed", u64(bp->frames_shed));
	json_object_set_new(o, "throttle_retries", u64(bp->throttle_retries));
	return o;
}

static json_t *rpo_json(const struct ws_rpo_status *r)
{
	json_t *o = json_object();
	json_object_set_new(o, "watermark_age_ms", u64(r->watermark_age_ms));
	json_object_set_new(o, "has_watermark", json_boolean(r->has_watermark));
	return o;
}

static json_t *wm_json(const struct ws_watermark *w)
{
	json_t *o = json_object();
	json_object_set_new(o, "epoch", u64(w->epoch));
	json_object_set_new(o, "pointer_generation", u64(w->pointer_generation));
	json_object_set_new(o, "generation", gen_json(&w->generation));
	json_object_set_new(o, "last_frame", u64(w->last_frame));
	json_object_set_new(o, "seq", u64(w->seq));
	json_object_set_new(o, "time_ms", json_integer(w->time_ms));
	json_object_set_new(o, "manifest_key", json_string(w->manifest_key));
	json_object_set_new(o, "carried", json_boolean(w->carried));
	return o;
}

void ws_cli_emit_json(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (s) {
		/* One line per object, whole: shard threads and the main thread
		 * (checkpoints) print at once, and stdio locks per call. */
		flockfile(stdout);
		fputs(s, stdout);
		fputc('\n', stdout);
		fflush(stdout);
		funlockfile(stdout);
		free(s);
	}
	json_decref(o);
}

void ws_cli_print_outcome_json(const char *tenant, const struct ws_outcome *oc)
{
	json_t *o = json_object();
	json_object_set_new(o, "tenant", json_string(tenant));
	json_object_set_new(o, "outcome", json_string(ws_outcome_name(oc->kind)));
	switch (oc->kind) {
	case WS_OUTCOME_EMPTY:
		if (oc->u.empty.rpo.has_watermark)
			json_object_set_new(o, "watermark", wm_json(&oc->u.empty.watermark));
		break;
	case WS_OUTCOME_STREAMED:
		json_object_set_new(o, "generation_key", json_string(oc->u.streamed.generation_key));
		json_object_set_new(o, "first_frame", u64(oc->u.streamed.first_frame));
		json_object_set_new(o, "last_frame", u64(oc->u.streamed.last_frame));
		json_object_set_new(o, "checkpoint_seq", u64(oc->u.streamed.checkpoint_seq));
		json_object_set_new(o, "frame_count", u64(oc->u.streamed.frame_count));
		break;
	case WS_OUTCOME_RESTARTED:
		json_object_set_new(o, "generation_key", json_string(oc->u.restarted.generation_key));
		json_object_set_new(o, "previous_generation", gen_json(&oc->u.restarted.previous_generation));
		json_object_set_new(o, "new_generation", gen_json(&oc->u.restarted.new_generation));
		json_object_set_new(o, "first_frame", u64(oc->u.restarted.first_frame));
		json_object_set_new(o, "last_frame", u64(oc->u.restarted.last_frame));
		json_object_set_new(o, "frame_count", u64(oc->u.restarted.frame_count));
		break;
	case WS_OUTCOME_SHED:
		json_object_set_new(o, "checkpoint_seq", u64(oc->u.shed.checkpoint_seq));
		json_object_set_new(o, "first_frame", u64(oc->u.shed.first_frame));
		json_object_set_new(o, "last_frame", u64(oc->u.shed.last_frame));
		break;
	case WS_OUTCOME_FENCED:
		json_object_set_new(o, "current_epoch", u64(oc->u.fenced.current_epoch));
		json_object_set_new(o, "our_epoch", u64(oc->u.fenced.our_epoch));
		json_object_set_new(o, "current_pointer_generation", u64(oc->u.fenced.current_pointer_generation));
		json_object_set_new(o, "our_pointer_generation", u64(oc->u.fenced.our_pointer_generation));
		break;
	case WS_OUTCOME_ERROR:
		json_object_set_new(o, "code", json_integer(oc->u.error.code));
		json_object_set_new(o, "error", json_string(ws_strerror(oc->u.error.code)));
		json_object_set_new(o, "message", json_string(oc->u.error.message));
		json_object_set_new(o, "deferred", json_boolean(oc->u.error.deferred));
		break;
	}
	const struct ws_backpressure_report *bp = ws_outcome_backpressure(oc);
	if (bp)
		json_object_set_new(o, "backpressure", bp_json(bp));
	const struct ws_rpo_status *rpo = ws_outcome_rpo(oc);
	if (rpo)
		json_object_set_new(o, "rpo", rpo_json(rpo));
	ws_cli_emit_json(o);
}

json_t *ws_cli_applied_json(const char *tenant, const char *what, uint64_t tx_id, uint32_t pages, uint32_t db_pages)
{
	json_t *o = json_object();
	json_object_set_new(o, "tenant", json_string(tenant));
	json_object_set_new(o, "applied", json_string(what));
	json_object_set_new(o, "tx_id", json_integer((json_int_t)tx_id));
	json_object_set_new(o, "pages", json_integer(pages));
	json_object_set_new(o, "db_pages", json_integer(db_pages));
	return o;
}

void ws_cli_print_tenant_json(const struct ws_tenant_info *t)
{
	json_t *o = json_object();
	json_object_set_new(o, "tenant", json_string(t->tenant));
	if (t->has_watermark) {
		json_object_set_new(o, "watermark", wm_json(&t->watermark));
		json_object_set_new(o, "page_size", u64(t->page_size));
	} else {
		json_object_set_new(o, "watermark", json_null());
	}
	json_object_set_new(o, "objects", u64(t->objects));
	json_object_set_new(o, "bytes", u64(t->bytes));
	if (t->error)
		json_object_set_new(o, "error", json_string(t->error));
	ws_cli_emit_json(o);
}

void ws_cli_print_generation_json(const struct ws_generation_info *g)
{
	char a[WS_TIME_STR_MAX], b[WS_TIME_STR_MAX];
	json_t *o = json_object();
	json_object_set_new(o, "tenant", json_string(g->tenant));
	json_object_set_new(o, "chain", u64(g->chain));
	json_object_set_new(o, "generation", json_string(g->generation));
	json_object_set_new(o, "start", json_string(g->start));
	json_object_set_new(o, "first_frame", u64(g->first_frame));
	json_object_set_new(o, "last_frame", u64(g->last_frame));
	json_object_set_new(o, "first_time", json_string(ws_time_str(g->first_time_ms, a)));
	json_object_set_new(o, "last_time", json_string(ws_time_str(g->last_time_ms, b)));
	json_object_set_new(o, "first_time_ms", json_integer(g->first_time_ms));
	json_object_set_new(o, "last_time_ms", json_integer(g->last_time_ms));
	json_object_set_new(o, "manifests", u64(g->manifests));
	ws_cli_emit_json(o);
}
