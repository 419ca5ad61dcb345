/* libkvgate events: Stored/Removed calls (split to the IO region as the JS host does), binary record batches
 * and vLLM/SGLang msgpack batches decoded in the core. */
#include "kvgate-internal.h"

static int slot_ok(kvgate_index* x, uint32_t slot, const char* what) {
  if (slot < x->opts.max_slots) return 1;
  kvg_fail(x, KVGATE_E_BAD_SLOT, "%s: slot %u >= max_slots %u", what, slot, x->opts.max_slots);
  return 0;
}

int kvgate_store(kvgate_index* x, uint32_t slot, int has_parent, uint64_t parent, const uint64_t* hashes,
                 const uint64_t* locals, size_t n) {
  KVG_CHECK(x);
  if (n > 0 && (!hashes || !locals)) return kvg_fail(x, KVGATE_E_NULL, "store: NULL hashes or locals");
  if (!slot_ok(x, slot, "store")) return KVGATE_E_BAD_SLOT;
  KVG_ENTER(x, "store");
  size_t start = 0;
  do {
    size_t part = n - start < x->io_cap ? n - start : x->io_cap;
    int hp = start == 0 ? has_parent != 0 : 1;
    uint64_t p = start == 0 ? parent : hashes[start - 1];
    uint8_t* io = kvg_mem(x) + x->io;
    for (size_t i = 0; i < part; i++) {
      memcpy(io + 16 * i, &hashes[start + i], 8);
      memcpy(io + 16 * i + 8, &locals[start + i], 8);
    }
    int st = (int)Z_kvgate_coreZ_store_blocks(&x->inst, slot, (uint32_t)hp, (uint32_t)p, (uint32_t)(p >> 32), (uint32_t)part);
    if (st != KVGATE_OK) return kvg_status(x, st, "store");
    start += part;
  } while (start < n);
  return kvg_ok(x);
}

int kvgate_remove(kvgate_index* x, uint32_t slot, const uint64_t* hashes, size_t n, uint32_t* unknown) {
  KVG_CHECK(x);
  if (!unknown || (n > 0 && !hashes)) return kvg_fail(x, KVGATE_E_NULL, "remove: NULL hashes or unknown");
  if (!slot_ok(x, slot, "remove")) return KVGATE_E_BAD_SLOT;
  *unknown = 0;
  KVG_ENTER(x, "remove");
  size_t cap = 2ull * x->io_cap;
  size_t start = 0;
  do {
    size_t part = n - start < cap ? n - start : cap;
    if (part > 0) memcpy(kvg_mem(x) + x->io, hashes + start, 8 * part);
    int st = (int)Z_kvgate_coreZ_remove_blocks(&x->inst, slot, (uint32_t)part);
    if (st < 0) return kvg_status(x, st, "remove");
    *unknown += (uint32_t)st;
    start += part;
  } while (start < n);
  return kvg_ok(x);
}

int kvgate_apply_binary(kvgate_index* x, const uint8_t* bytes, size_t n, uint32_t* records, uint64_t* corrupt_at) {
  KVG_CHECK(x);
  if (!records || (n > 0 && !bytes)) return kvg_fail(x, KVGATE_E_NULL, "apply_binary: NULL bytes or records");
  *records = 0;
  if (n > x->events_cap) return kvg_fail(x, KVGATE_E_BAD_ARG, "apply_binary: %zu bytes exceed event_bytes %u", n, x->events_cap);
  KVG_ENTER(x, "apply_binary");
  if (n > 0) memcpy(kvg_mem(x) + x->events, bytes, n);
  int r = (int)Z_kvgate_coreZ_apply_events(&x->inst, (uint32_t)n);
  if (r == KVGATE_E_CORRUPT) {
    uint64_t at;
    memcpy(&at, kvg_mem(x) + x->result, 8);
    if (corrupt_at) *corrupt_at = at;
    return kvg_fail(x, r, "apply_binary: corrupt record at byte %llu", (unsigned long long)at);
  }
  if (r < 0) return kvg_status(x, r, "apply_binary");
  *records = (uint32_t)r;
  return kvg_ok(x);
}

void kvgate_ingest_policy_init(kvgate_ingest_policy* p, uint32_t block_size) {
  if (!p) return;
  p->block_size = block_size;
  p->kv_group = -1;
  p->flags = KVGATE_INGEST_INDEX_DEVICE | KVGATE_INGEST_DROP_FOREIGN_EXTRA_KEYS;
  p->ns = NULL;
}

/* Decodes under the caller's guard. */
static int decode(kvgate_index* x, const uint8_t* payload, size_t n, const kvgate_ingest_policy* p, kvgate_batch_info* info) {
  x->decoded_valid = 0;
  uint64_t seed;
  int st = kvg_seed(x, NULL, p->ns, &seed);
  if (st != KVGATE_OK) return st;
  memcpy(kvg_mem(x) + x->ingest_in, payload, n);
  int r = (int)Z_kvgate_coreZ_ingest_decode(&x->inst, (uint32_t)n, p->block_size, (uint32_t)p->kv_group, p->flags,
                                            (uint32_t)seed, (uint32_t)(seed >> 32));
  if (r < 0) return kvg_status(x, r, "engine_batch_decode");
  const uint8_t* res = kvg_mem(x) + x->ingest_result;
  double rank;
  uint32_t w[4];
  memcpy(&rank, res, 8);
  memcpy(w, res + 8, 16);
  info->rank = rank < 0 ? -1 : (int64_t)rank;
  info->events = w[0];
  info->records = w[1];
  info->bytes = w[2];
  info->clears = w[3];
  info->applied = 0;
  x->decoded_valid = 1;
  x->decoded_bytes = w[2];
  x->decoded_generation = x->generation;
  return KVGATE_OK;
}

/* Applies the last decode under the caller's guard. */
static int apply_decoded(kvgate_index* x, uint32_t slot, kvgate_batch_info* info) {
  if (!x->decoded_valid || x->decoded_generation != x->generation) {
    return kvg_fail(x, KVGATE_E_STATE, "engine_batch_apply: no decoded batch in the core");
  }
  x->decoded_valid = 0;
  int r = (int)Z_kvgate_coreZ_ingest_apply(&x->inst, slot, x->decoded_bytes);
  if (r < 0) return kvg_status(x, r, "engine_batch_apply");
  info->applied = (uint32_t)r;
  return KVGATE_OK;
}

static int check_batch(kvgate_index* x, const uint8_t* payload, size_t n, const kvgate_ingest_policy* p, kvgate_batch_info* info) {
  if (!payload || !p || !info) return kvg_fail(x, KVGATE_E_NULL, "engine batch: NULL payload, policy or info");
  if (n > x->ingest_in_cap) return kvg_fail(x, KVGATE_E_BAD_ARG, "engine batch: %zu bytes exceed the ingest region (%u)", n, x->ingest_in_cap);
  if (p->block_size == 0) return kvg_fail(x, KVGATE_E_BAD_ARG, "engine batch: block_size 0");
  return KVGATE_OK;
}

int kvgate_engine_batch_decode(kvgate_index* x, const uint8_t* payload, size_t n, const kvgate_ingest_policy* p,
                               kvgate_batch_info* info) {
  KVG_CHECK(x);
  int st = check_batch(x, payload, n, p, info);
  if (st != KVGATE_OK) return st;
  KVG_ENTER(x, "engine_batch_decode");
  st = decode(x, payload, n, p, info);
  return st == KVGATE_OK ? kvg_ok(x) : st;
}

int kvgate_engine_batch_apply(kvgate_index* x, uint32_t slot, kvgate_batch_info* info) {
  KVG_CHECK(x);
  if (!info) return kvg_fail(x, KVGATE_E_NULL, "engine_batch_apply: info is NULL");
  if (!slot_ok(x, slot, "engine_batch_apply")) return KVGATE_E_BAD_SLOT;
  KVG_ENTER(x, "engine_batch_apply");
  int st = apply_decoded(x, slot, info);
  return st == KVGATE_OK ? kvg_ok(x) : st;
}

int kvgate_apply_engine_batch(kvgate_index* x, uint32_t slot, const uint8_t* payload, size_t n,
                              const kvgate_ingest_policy* p, kvgate_batch_info* info) {
  KVG_CHECK(x);
  int st = check_batch(x, payload, n, p, info);
  if (st != KVGATE_OK) return st;
  if (!slot_ok(x, slot, "apply_engine_batch")) return KVGATE_E_BAD_SLOT;
  KVG_ENTER(x, "apply_engine_batch");
  st = decode(x, payload, n, p, info);
  if (st == KVGATE_OK) st = apply_decoded(x, slot, info);
  return st == KVGATE_OK ? kvg_ok(x) : st;
}
