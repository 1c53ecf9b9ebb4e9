#include "outcome.h"

#include <stdio.h>
#include <string.h>

const char *ws_policy_name(enum ws_policy p)
{
	switch (p) {
	case WS_POLICY_BLOCK: return "block";
	case WS_POLICY_THROTTLE: return "throttle";
	case WS_POLICY_SHED: return "shed";
	}
	return "unknown";
}

const char *ws_carry_name(enum ws_carry c)
{
	switch (c) {
	case WS_CARRY_PRESSED: return "pressed";
	case WS_CARRY_ALWAYS: return "always";
	case WS_CARRY_NEVER: return "never";
	}
	return "unknown";
}

int ws_carry_parse(const char *name, enum ws_carry *out)
{
	for (enum ws_carry c = WS_CARRY_PRESSED; c <= WS_CARRY_NEVER; c++) {
		if (!strcmp(name, ws_carry_name(c))) {
			*out = c;
			return 0;
		}
	}
	return WS_ECONFIG;
}

const char *ws_outcome_name(enum ws_outcome_kind k)
{
	switch (k) {
	case WS_OUTCOME_EMPTY: return "empty";
	case WS_OUTCOME_STREAMED: return "streamed";
	case WS_OUTCOME_RESTARTED: return "restarted";
	case WS_OUTCOME_SHED: return "shed";
	case WS_OUTCOME_FENCED: return "fenced";
	case WS_OUTCOME_ERROR: return "error";
	}
	return "unknown";
}

const struct ws_rpo_status *ws_outcome_rpo(const struct ws_outcome *o)
{
	switch (o->kind) {
	case WS_OUTCOME_EMPTY: return &o->u.empty.rpo;
	case WS_OUTCOME_STREAMED: return &o->u.streamed.rpo;
	case WS_OUTCOME_RESTARTED: return &o->u.restarted.rpo;
	case WS_OUTCOME_SHED: return &o->u.shed.rpo;
	case WS_OUTCOME_ERROR: return &o->u.error.rpo;
	case WS_OUTCOME_FENCED: return NULL;
	}
	return NULL;
}

const struct ws_backpressure_report *ws_outcome_backpressure(const struct ws_outcome *o)
{
	switch (o->kind) {
	case WS_OUTCOME_STREAMED: return &o->u.streamed.backpressure;
	case WS_OUTCOME_RESTARTED: return &o->u.restarted.backpressure;
	case WS_OUTCOME_SHED: return &o->u.shed.backpressure;
	case WS_OUTCOME_EMPTY:
	case WS_OUTCOME_FENCED:
	case WS_OUTCOME_ERROR: return NULL;
	}
	return NULL;
}

void ws_gen_to_public(const struct ws_fmt_gen *g, bool salted, struct ws_wal_generation *out)
{
	out->checkpoint_seq = g->checkpoint_seq;
	out->has_salt = salted && g->wal_magic != 0;
	out->salt1 = out->has_salt ? g->salt1 : 0;
	out->salt2 = out->has_salt ? g->salt2 : 0;
}

void ws_gen_from_fmt(const struct ws_fmt_watermark *wm, struct ws_wal_generation *out)
{
	ws_gen_to_public(&wm->gen, wm->version >= 2, out);
}

void ws_wm_to_public(const struct ws_fmt_watermark *w, struct ws_watermark *out)
{
	memset(out, 0, sizeof(*out));
	out->epoch = w->epoch;
	out->pointer_generation = w->pointer_generation;
	ws_gen_from_fmt(w, &out->generation);
	out->last_frame = w->last_frame;
	out->seq = w->seq;
	out->time_ms = w->time_ms;
	snprintf(out->manifest_key, sizeof(out->manifest_key), "%s", w->manifest_key);
	out->carried = w->carried_len > 0;
}
