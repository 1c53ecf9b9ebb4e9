#include "storeutil.h"

#include <stdlib.h>
#include <string.h>

void wt_put_bytes(struct ws_store *s, const char *key, const void *p, size_t n, struct ws_etag *etag)
{
	int rc = ws_store_put(s, key, p, n, WS_PUT_OVERWRITE, NULL, etag);
	if (rc)
		fail_msg("put %s: %s", key, ws_errmsg());
}

void wt_put_str(struct ws_store *s, const char *key, const char *v, struct ws_etag *etag)
{
	wt_put_bytes(s, key, v, strlen(v), etag);
}

char *wt_get_str(struct ws_store *s, const char *key, int *rc, struct ws_obj_info *info)
{
	struct ws_buf b;
	char *out = NULL;
	ws_buf_init(&b, 0);
	*rc = ws_store_get(s, key, 0, UINT64_MAX, &b, info);
	if (*rc == 0) {
		out = malloc(b.len + 1);
		assert_non_null(out);
		if (b.len)
			memcpy(out, b.data, b.len);
		out[b.len] = '\0';
	}
	ws_buf_free(&b);
	return out;
}

void wt_assert_content(struct ws_store *s, const char *key, const char *want)
{
	int rc;
	char *got = wt_get_str(s, key, &rc, NULL);
	if (rc)
		fail_msg("get %s: %s", key, ws_errmsg());
	assert_string_equal(got, want);
	free(got);
}
