/* SQLite's wal-index header, read through a connection's own open file
 * (walidx.c): the stream's WAL bound and the event channel's baseline. */
#ifndef WS_CORE_WALIDX_H
#define WS_CORE_WALIDX_H

#include <sqlite3.h>
#include <stdbool.h>

#include "ws_wal.h"

/*
 * The wal-index header through SQLite's own open file f of a database (its
 * -shm mapped by that connection), read as SQLite's readers read it (the
 * first copy, then the second, decoded by ws_walidx_hdr_decode, a few
 * tries while a writer holds it in flux). false: f NULL, not mapped, not
 * initialised, or in flux on every try.
 */
bool ws_walidx_read(sqlite3_file *f, struct ws_walidx_hdr *h);

#endif
