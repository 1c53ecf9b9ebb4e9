/* The engine's test hooks (engine.c). */
#ifndef WS_CORE_ENGINE_H
#define WS_CORE_ENGINE_H

#include "core_internal.h"

/*
 * Test hook: when set, every store an engine opens comes from here (one for
 * each shard's own requests, one for its upload thread), so tests can put a
 * fault-injecting store in front of the real one. Not for production use.
 */
typedef struct ws_store *(*ws_engine_store_fn)(const char *url, unsigned shard, bool uploader, void *arg,
					       int *err);
extern ws_engine_store_fn ws_engine_open_store_hook;
/*
 * Test hook: when set (before ws_engine_create, cleared after
 * ws_engine_destroy), each shard thread calls it before its poll; a
 * negative return makes that poll fail with that error, as poll(2) can
 * with ENOMEM, which no test can make the kernel do on demand. Not a fault
 * site: the shard threads reach it all the time, while tests arm sites.
 */
extern int (*ws_engine_poll_hook)(void);
extern void *ws_engine_open_store_arg;

#endif
