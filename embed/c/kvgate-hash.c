/* libkvgate hashing: XXH3 of bytes, LoRA/namespace seeds and prompt block hashes, all computed by the core. */
#include "kvgate-internal.h"

#define KVG_BASE_SEED 1337ull

/* XXH3 of bytes already validated against events_cap; runs under the caller's guard. */
static int core_xxh3(kvgate_index* x, const uint8_t* bytes, size_t n, uint64_t seed, uint64_t* out) {
  if (n > 0) memcpy(kvg_mem(x) + x->events, bytes, n);
  int st = (int)Z_kvgate_coreZ_hash_bytes(&x->inst, (uint32_t)n, (uint32_t)seed, (uint32_t)(seed >> 32));
  if (st != KVGATE_OK) return kvg_status(x, st, "hash_bytes");
  memcpy(out, kvg_mem(x) + x->result, 8);
  return KVGATE_OK;
}

int kvgate_xxh3(kvgate_index* x, const uint8_t* bytes, size_t n, uint64_t seed, uint64_t* out) {
  KVG_CHECK(x);
  if (!out || (!bytes && n > 0)) return kvg_fail(x, KVGATE_E_NULL, "xxh3: NULL bytes or out");
  if (n > x->events_cap) return kvg_fail(x, KVGATE_E_BAD_ARG, "xxh3: %zu bytes exceed event_bytes %u", n, x->events_cap);
  KVG_ENTER(x, "xxh3");
  int st = core_xxh3(x, bytes, n, seed, out);
  return st == KVGATE_OK ? kvg_ok(x) : st;
}

static size_t bounded_len(const char* s) {
  if (!s) return 0;
  size_t n = 0;
  while (n <= KVG_SALT_LEN && s[n]) n++;
  return n;
}

int kvg_seed(kvgate_index* x, const char* lora, const char* ns, uint64_t* out) {
  size_t nl = bounded_len(lora), nn = bounded_len(ns);
  if (nl > KVG_SALT_LEN || nn > KVG_SALT_LEN) {
    return kvg_fail(x, KVGATE_E_BAD_ARG, "LoRA name or namespace longer than %d bytes", KVG_SALT_LEN);
  }
  if (nl == 0 && nn == 0) {
    *out = KVG_BASE_SEED;
    return KVGATE_OK;
  }
  char key[sizeof x->salt_key];
  memcpy(key, lora ? lora : "", nl);
  key[nl] = 0;
  memcpy(key + nl + 1, ns ? ns : "", nn);
  key[nl + 1 + nn] = 0;
  if (x->salt_valid && memcmp(key, x->salt_key, nl + nn + 2) == 0) {
    *out = x->salt_seed;
    return KVGATE_OK;
  }
  uint64_t s = KVG_BASE_SEED, h = 0;
  if (nl > 0) {
    int st = core_xxh3(x, (const uint8_t*)lora, nl, 0, &h);
    if (st != KVGATE_OK) return st;
    s += h;
  }
  if (nn > 0) {
    int st = core_xxh3(x, (const uint8_t*)ns, nn, 1, &h);
    if (st != KVGATE_OK) return st;
    s += h;
  }
  memcpy(x->salt_key, key, nl + nn + 2);
  x->salt_seed = s;
  x->salt_valid = 1;
  *out = s;
  return KVGATE_OK;
}

int kvgate_seed(kvgate_index* x, const char* lora, const char* ns, uint64_t* out) {
  KVG_CHECK(x);
  if (!out) return kvg_fail(x, KVGATE_E_NULL, "seed: out is NULL");
  KVG_ENTER(x, "seed");
  int st = kvg_seed(x, lora, ns, out);
  return st == KVGATE_OK ? kvg_ok(x) : st;
}

/* Copies the prompt in and hashes it (route = 1 also matches); returns the core's result. Under the caller's guard. */
int kvg_hash_call(kvgate_index* x, const uint32_t* tokens, size_t n, const kvgate_hash_opts* h, int route) {
  if (n > 0xFFFFFFFFu) return kvg_fail(x, KVGATE_E_TOO_LONG, "prompt too long");
  int st = kvg_fit_prompt(x, n);
  if (st != KVGATE_OK) return st;
  uint64_t seed;
  st = kvg_seed(x, h->lora, h->ns, &seed);
  if (st != KVGATE_OK) return st;
  if (n > 0) memcpy(kvg_mem(x) + x->tokens, tokens, 4 * n);
  u32 (*fn)(kvg_core*, u32, u32, u32, u32, u32, u32) = route ? Z_kvgate_coreZ_route : Z_kvgate_coreZ_hash_prompt;
  int r = (int)fn(&x->inst, (uint32_t)n, h->block_size, (uint32_t)seed, (uint32_t)(seed >> 32), h->eagle ? 1 : 0, 0);
  if (r < 0) return kvg_status(x, r, route ? "route" : "hash_prompt");
  return r;
}

int kvgate_hash_prompt(kvgate_index* x, const uint32_t* tokens, size_t n_tokens, const kvgate_hash_opts* h,
                       uint64_t* local_out, uint64_t* seq_out, size_t out_cap, size_t* n_blocks) {
  KVG_CHECK(x);
  if (!h || !n_blocks || (!tokens && n_tokens > 0)) return kvg_fail(x, KVGATE_E_NULL, "hash_prompt: NULL argument");
  if (h->block_size == 0) return kvg_fail(x, KVGATE_E_BAD_ARG, "hash_prompt: block_size 0");
  *n_blocks = 0;
  KVG_ENTER(x, "hash_prompt");
  int n = kvg_hash_call(x, tokens, n_tokens, h, 0);
  if (n < 0) return n;
  *n_blocks = (size_t)n;
  if ((local_out || seq_out) && (size_t)n > out_cap) {
    return kvg_fail(x, KVGATE_E_BUFFER, "hash_prompt: %d blocks, room for %zu", n, out_cap);
  }
  if (local_out) memcpy(local_out, kvg_mem(x) + x->local, 8ull * n);
  if (seq_out) memcpy(seq_out, kvg_mem(x) + x->seq, 8ull * n);
  return kvg_ok(x);
}
