/*
 * The XXH3 entry points, compiled once per kernel: hash.c includes this for
 * the baseline (SSE2) kernel, hash_avx2.c for AVX2, each after including
 * xxhash.h inline with its XXH_VECTOR, and with WS_XXH_FN(name) naming the
 * functions for that kernel.
 */
uint64_t WS_XXH_FN(ws_xxh64)(const void *data, size_t len)
{
	return XXH3_64bits(data, len);
}

uint64_t WS_XXH_FN(ws_xxh64v)(const struct iovec *iov, int iovcnt)
{
	XXH3_state_t st;
	XXH3_64bits_reset(&st);
	for (int i = 0; i < iovcnt; i++)
		XXH3_64bits_update(&st, iov[i].iov_base, iov[i].iov_len);
	return XXH3_64bits_digest(&st);
}

void WS_XXH_FN(ws_xxh_update)(struct ws_xxh_state *s, const void *data, size_t len)
{
	_Static_assert(sizeof(XXH3_state_t) <= sizeof(s->opaque), "XXH3_state_t fits ws_xxh_state");
	(void)XXH3_64bits_update((XXH3_state_t *)(void *)s->opaque, data, len);
}
