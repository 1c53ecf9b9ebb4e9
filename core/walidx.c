/* The wal-index header, as SQLite's readers take it (walidx.h). */
#include <errno.h>
#include <sched.h>
#include <stdint.h>

#include "walidx.h"

bool ws_walidx_read(sqlite3_file *f, struct ws_walidx_hdr *h)
{
	void volatile *p = NULL;
	uint8_t both[WS_WALIDX_HDR_BOTH];

	if (!f || f->pMethods->iVersion < 2 || !f->pMethods->xShmMap ||
	    f->pMethods->xShmMap(f, 0, 32768, 0, &p) != SQLITE_OK || !p)
		return false;
	for (int tries = 0; tries < 64; tries++) {
		for (size_t i = 0; i < WS_WALIDX_HDR_SIZE; i++)
			both[i] = ((const volatile uint8_t *)p)[i];
		/* SQLite's own barrier between the two copies (sqlite3MemoryBarrier);
		 * the full-barrier builtin, unlike atomic_thread_fence, builds
		 * under -fsanitize=thread with warnings as errors. */
		__sync_synchronize();
		for (size_t i = WS_WALIDX_HDR_SIZE; i < WS_WALIDX_HDR_BOTH; i++)
			both[i] = ((const volatile uint8_t *)p)[i];
		int rc = ws_walidx_hdr_decode(both, sizeof(both), h);
		if (rc == 0)
			return true;
		if (rc == -ENODATA)
			return false;
		sched_yield();
	}
	return false;
}
