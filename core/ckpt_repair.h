/* Rebuilding damaged checkpoint control objects before an attempt (ckpt_repair.c). */
#ifndef WS_CORE_CKPT_REPAIR_H
#define WS_CORE_CKPT_REPAIR_H

#include "core_internal.h"
#include "ws_ckpt.h"

/*
 * checkpoints/inventory and checkpoints/witness that cannot be decoded are
 * rebuilt from the rest of the sink, each with a log line: the inventory
 * from the witness (an open witness: its attempt active, with the
 * artifacts stored under its ID; otherwise idle, its attempt the last
 * completed), the witness closed. Every writer calls it before its
 * attempt: an undecodable one stops every writer alike, so a shared
 * writer's peer whose attempt was in flight finds its state gone and
 * aborts, as it would after the peer wait. A valid object is never touched.
 */
int ws_repair_controls(struct ws_ckpt *c, const char *pipeline, uint64_t participant, const char *sink_name)
	WS_MUST_CHECK;

#endif
