/*
 * test_core_fence_cas.c against radosgw (the ctest "s3" fixture,
 * $WS_S3_DIR/env): fencing with the watermark's If-Match, the races at
 * its sites, a refused etag of our own. Without $WS_S3_DIR the test FAILS:
 * it must never pass without a server.
 */
#define FENCE_CAS_S3 1
#include "test_core_fence_cas.c"
