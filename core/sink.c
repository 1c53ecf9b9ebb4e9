#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"

struct ws_sink *ws_sink_open(const char *url, int *err)
{
	return ws_sink_open_flags(url, 0, err);
}

struct ws_sink *ws_sink_open_flags(const char *url, unsigned flags, int *err)
{
	struct ws_sink *sink = calloc(1, sizeof(*sink));
	int rc = 0;
	if (!sink) {
		rc = ws_fail(-ENOMEM, "out of memory opening sink");
		goto fail;
	}
	sink->store = ws_store_open_flags(url, (flags & WS_SINK_EXISTING) ? WS_STORE_EXISTING : 0, &rc);
	if (!sink->store)
		goto fail;
	*err = 0;
	return sink;
fail:
	free(sink);
	*err = rc ? rc : -EINVAL;
	return NULL;
}

void ws_sink_close(struct ws_sink *sink)
{
	if (!sink)
		return;
	ws_store_close(sink->store);
	free(sink);
}

void ws_sink_get_stats(const struct ws_sink *sink, struct ws_sink_stats *out)
{
	const struct ws_store_stats *s = &sink->store->stats;
	out->puts = s->puts;
	out->gets = s->gets;
	out->heads = s->heads;
	out->lists = s->lists;
	out->deletes = s->deletes;
	out->bytes_put = s->bytes_put;
	out->bytes_got = s->bytes_got;
}

int ws_key_watermark(char *out, size_t cap, const char *tenant)
{
	int n = snprintf(out, cap, "%s/%s", tenant, WS_WM_NAME);
	return n < 0 || (size_t)n >= cap ? WS_ETOOBIG : 0;
}

int ws_key_gen_prefix(char *out, size_t cap, const char *tenant, uint64_t epoch, uint64_t pg,
		      const struct ws_fmt_gen *gen)
{
	int n;
	if (gen->wal_magic == 0)
		n = snprintf(out, cap, "%s/e%llu-p%llu/g-none", tenant, (unsigned long long)epoch,
			     (unsigned long long)pg);
	else
		n = snprintf(out, cap, "%s/e%llu-p%llu/g%08x-%08x%08x", tenant, (unsigned long long)epoch,
			     (unsigned long long)pg, gen->checkpoint_seq, gen->salt1, gen->salt2);
	return n < 0 || (size_t)n >= cap ? WS_ETOOBIG : 0;
}
