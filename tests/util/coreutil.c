#include "coreutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void wt_env_init(struct wt_env *e, const char *tag, unsigned page_size)
{
	int err = 0;
	memset(e, 0, sizeof(*e));
	e->dir = wt_tmpdir(tag);
	assert_non_null(e->dir);
	e->db = wt_path(e->dir, "src.db");
	assert_int_not_equal(asprintf(&e->wal, "%s-wal", e->db), -1);
	e->sink_dir = wt_path(e->dir, "sink");
	e->out_dir = wt_path(e->dir, "out");
	assert_int_equal(mkdir(e->out_dir, 0755), 0);
	assert_int_not_equal(asprintf(&e->sink_url, "file://%s", e->sink_dir), -1);
	e->sink = ws_sink_open(e->sink_url, &err);
	assert_int_equal(err, 0);
	assert_non_null(e->sink);
	e->page_size = page_size ? page_size : 4096;
	e->w = wt_writer_open(e->db, page_size);
}

void wt_env_free(struct wt_env *e)
{
	if (e->w)
		sqlite3_close(e->w);
	ws_sink_close(e->sink);
	wt_rmrf(e->dir);
	free(e->dir);
	free(e->db);
	free(e->wal);
	free(e->sink_dir);
	free(e->sink_url);
	free(e->out_dir);
}

void wt_tail_ok(struct ws_stream *st, struct ws_outcome *o)
{
	int rc = ws_stream_tail_frames(st, o);
	if (rc)
		fail_msg("tail_frames: %s (%s)", ws_strerror(rc), ws_errmsg());
}
