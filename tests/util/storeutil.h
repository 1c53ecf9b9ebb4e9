/* Helpers for the object-store tests (test_store_*): put, get, compare. */
#ifndef WS_STOREUTIL_H
#define WS_STOREUTIL_H

#include <stddef.h>

#include "testutil.h"
#include "ws_store.h"

/* Overwrite key with bytes / a string; fails the test on error. */
void wt_put_bytes(struct ws_store *s, const char *key, const void *p, size_t n, struct ws_etag *etag);
void wt_put_str(struct ws_store *s, const char *key, const char *v, struct ws_etag *etag);
/* Whole object as a NUL-terminated malloc'd string, or NULL with *rc set. */
char *wt_get_str(struct ws_store *s, const char *key, int *rc, struct ws_obj_info *info);
/* The object holds exactly want. */
void wt_assert_content(struct ws_store *s, const char *key, const char *want);

#endif
