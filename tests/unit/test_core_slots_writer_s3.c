/*
 * test_core_slots_writer.c against radosgw (the ctest "s3" fixture,
 * $WS_S3_DIR/env): one request per tail with slots, and a takeover between
 * tails (the old owner's refused create is Fenced). Without $WS_S3_DIR the
 * test FAILS: it must never pass without a server.
 */
#define SLOTS_WRITER_S3 1
/* The file://-only tests stay compiled, unused (a lost reply and a write
 * that never lands are faults of the file store's). */
#pragma GCC diagnostic ignored "-Wunused-function"
#include "test_core_slots_writer.c"
