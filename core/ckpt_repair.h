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
 * completed), the witness closed. Only a writer that may finish every
 * crashed attempt calls it (the local authority holding the lease; a
 * shared writer asked to recover). A valid object is never touched.
 */
int ws_repair_controls(struct ws_ckpt *c, const char *pipeline, uint64_t participant, const char *sink_name)
	WS_MUST_CHECK;

#endif
