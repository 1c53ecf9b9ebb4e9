/*
 * The checkpoint decision store's JSON objects as read back from a store
 * (store/ckpt_json.c): every decoder gets every input, once for any
 * deployment and once for the input's own. Each object has one canonical
 * byte string, so whatever a decoder accepts must encode back to exactly the
 * input (the seal, whose decoded form drops its deployment, is re-encoded
 * with the one the input names).
 */
#include <jansson.h>

#include "ckpt_internal.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

static void same(char *enc, size_t enc_len, const uint8_t *data, size_t size)
{
	FUZZ_CHECK(enc != NULL);
	FUZZ_CHECK(enc_len == size && memcmp(enc, data, size) == 0);
	free(enc);
}

/* The deployment the input names ("" when it names none): decoders check it. */
static void input_dep(const uint8_t *data, size_t size, char *dep, size_t cap)
{
	json_t *o = json_loadb((const char *)data, size, 0, NULL);
	json_t *v = o ? json_object_get(o, "deployment") : NULL;
	dep[0] = '\0';
	if (v && json_is_string(v))
		snprintf(dep, cap, "%s", json_string_value(v));
	json_decref(o);
}

static void run(const uint8_t *data, size_t size, const char *dep, const char *own)
{
	static const char key[] = "checkpoints/fuzz";
	size_t len = 0;

	{
		struct ckpt_deployment d;
		memset(&d, 0, sizeof(d));
		if (ckpt_dec_deployment(key, data, size, &d) == 0)
			same(ckpt_enc_deployment(&d, &len), len, data, size);
	}
	{
		struct ws_ckpt_index idx;
		if (ckpt_dec_index(key, data, size, dep, &idx) == 0) {
			FUZZ_CHECK(ckpt_index_invalid(&idx, (char[256]){ 0 }, 256) == NULL);
			same(ckpt_enc_index(&idx, &len), len, data, size);
			ws_ckpt_index_free(&idx);
		}
	}
	{
		struct ckpt_seal s;
		memset(&s, 0, sizeof(s));
		if (ckpt_dec_seal(key, data, size, dep, &s) == 0) {
			FUZZ_CHECK(ckpt_is_seal(data, size));
			same(ckpt_enc_seal(own, s.checkpoint_id, s.sha256, s.length, &len), len, data, size);
		}
	}
	{
		struct ws_ckpt_head h;
		if (ckpt_dec_head(key, data, size, dep, &h) == 0)
			same(ckpt_enc_head(own, &h, &len), len, data, size);
	}
	{
		struct ckpt_inventory_rec r;
		if (ckpt_dec_inventory(key, data, size, dep, &r) == 0) {
			same(ckpt_enc_inventory(own, &r, &len), len, data, size);
			free(r.inv.keys);
		}
	}
	{
		struct ws_ckpt_retention r;
		if (ckpt_dec_retention(key, data, size, dep, &r) == 0)
			same(ckpt_enc_retention(own, &r, &len), len, data, size);
	}
	{
		static struct ws_ckpt_witness w; /* 32 KiB of sink names: not on the stack */
		if (ckpt_dec_witness(key, data, size, dep, &w) == 0)
			same(ckpt_enc_witness(own, &w, &len), len, data, size);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char own[128];

	input_dep(data, size, own, sizeof(own));
	run(data, size, NULL, own);
	if (own[0])
		run(data, size, own, own);
	return 0;
}
