/* libkvgate queries: prompt matching (by tokens or by sequence hashes), approximate-mode routing records,
 * expiry and the candidate scoring kernel. */
#include "kvgate-internal.h"

/* Reads `n` (slot, depth) pairs from OUT with each slot's tree size. */
static int collect(kvgate_index* x, int n, kvgate_match* out, size_t cap, size_t* n_matches) {
  *n_matches = (size_t)n;
  if ((size_t)n > cap) return kvg_fail(x, KVGATE_E_BUFFER, "find_matches: %d matches, room for %zu", n, cap);
  const uint8_t* m = kvg_mem(x);
  for (int i = 0; i < n; i++) {
    uint32_t pair[2], tree;
    memcpy(pair, m + x->out + 8ull * i, 8);
    memcpy(&tree, m + x->sizes + 4ull * pair[0], 4);
    out[i].slot = pair[0];
    out[i].blocks = pair[1];
    out[i].tree_size = tree;
  }
  return kvg_ok(x);
}

int kvgate_find_matches(kvgate_index* x, const uint32_t* tokens, size_t n_tokens, const kvgate_hash_opts* h,
                        kvgate_match* out, size_t out_cap, size_t* n_matches, size_t* n_blocks) {
  KVG_CHECK(x);
  if (!h || !n_matches || (!out && out_cap > 0) || (!tokens && n_tokens > 0)) {
    return kvg_fail(x, KVGATE_E_NULL, "find_matches: NULL argument");
  }
  if (h->block_size == 0) return kvg_fail(x, KVGATE_E_BAD_ARG, "find_matches: block_size 0");
  *n_matches = 0;
  if (n_blocks) *n_blocks = 0;
  KVG_ENTER(x, "find_matches");
  int n = kvg_hash_call(x, tokens, n_tokens, h, 1);
  if (n < 0) return n;
  if (n_blocks) *n_blocks = Z_kvgate_coreZ_last_blocks(&x->inst);
  return collect(x, n, out, out_cap, n_matches);
}

/* Copies sequence hashes into SEQ, growing the prompt regions when needed; under the caller's guard. */
static int load_seq(kvgate_index* x, const uint64_t* seq, size_t n) {
  int st = kvg_fit_prompt(x, n);
  if (st != KVGATE_OK) return st;
  if (n > 0) memcpy(kvg_mem(x) + x->seq, seq, 8 * n);
  return KVGATE_OK;
}

int kvgate_find_matches_by_hashes(kvgate_index* x, const uint64_t* seq, size_t n, kvgate_match* out,
                                  size_t out_cap, size_t* n_matches) {
  KVG_CHECK(x);
  if (!n_matches || (!out && out_cap > 0) || (!seq && n > 0)) return kvg_fail(x, KVGATE_E_NULL, "find_matches_by_hashes: NULL argument");
  *n_matches = 0;
  KVG_ENTER(x, "find_matches_by_hashes");
  int st = load_seq(x, seq, n);
  if (st != KVGATE_OK) return st;
  int r = (int)Z_kvgate_coreZ_find_matches(&x->inst, (uint32_t)n);
  if (r < 0) return kvg_status(x, r, "find_matches_by_hashes");
  return collect(x, r, out, out_cap, n_matches);
}

int kvgate_record_route(kvgate_index* x, uint32_t slot, const uint64_t* seq, size_t n, double now, double ttl,
                        uint32_t* recorded) {
  KVG_CHECK(x);
  if (!recorded || (!seq && n > 0)) return kvg_fail(x, KVGATE_E_NULL, "record_route: NULL argument");
  *recorded = 0;
  if (slot >= x->opts.max_slots) return kvg_fail(x, KVGATE_E_BAD_SLOT, "record_route: slot %u >= max_slots", slot);
  if (!(ttl > 0)) return kvg_fail(x, KVGATE_E_BAD_ARG, "record_route: ttl must be > 0");
  KVG_ENTER(x, "record_route");
  int st = load_seq(x, seq, n);
  if (st != KVGATE_OK) return st;
  int r = (int)Z_kvgate_coreZ_record_route(&x->inst, slot, (uint32_t)n, now, ttl);
  if (r < 0) return kvg_status(x, r, "record_route");
  *recorded = (uint32_t)r;
  return kvg_ok(x);
}

int kvgate_slot_capacity(kvgate_index* x, uint32_t slot, uint32_t capacity, uint32_t* dropped) {
  KVG_CHECK(x);
  if (!dropped) return kvg_fail(x, KVGATE_E_NULL, "slot_capacity: NULL argument");
  *dropped = 0;
  if (slot >= x->opts.max_slots) return kvg_fail(x, KVGATE_E_BAD_SLOT, "slot_capacity: slot %u >= max_slots", slot);
  if (capacity > 0x7fffffffu) return kvg_fail(x, KVGATE_E_BAD_ARG, "slot_capacity: capacity %u is not a block count", capacity);
  KVG_ENTER(x, "slot_capacity");
  int r = (int)Z_kvgate_coreZ_slot_capacity(&x->inst, slot, capacity);
  if (r < 0) return kvg_status(x, r, "slot_capacity");
  *dropped = (uint32_t)r;
  return kvg_ok(x);
}

int kvgate_match_jump(kvgate_index* x, uint32_t jump) {
  KVG_CHECK(x);
  if (jump < 1 || jump > 1024) return kvg_fail(x, KVGATE_E_BAD_ARG, "match_jump: jump %u is not in 1..1024", jump);
  KVG_ENTER(x, "match_jump");
  int r = (int)Z_kvgate_coreZ_match_jump(&x->inst, jump);
  if (r < 0) return kvg_status(x, r, "match_jump");
  x->match_jump = jump;
  return kvg_ok(x);
}

int kvgate_expire(kvgate_index* x, double now, uint32_t* expired) {
  KVG_CHECK(x);
  if (!expired) return kvg_fail(x, KVGATE_E_NULL, "expire: NULL argument");
  KVG_ENTER(x, "expire");
  int r = (int)Z_kvgate_coreZ_expire(&x->inst, now);
  if (r < 0) return kvg_status(x, r, "expire");
  *expired = (uint32_t)r;
  return kvg_ok(x);
}

/* Score region columns (assembly/score/cost.ts COL_*). */
enum { COL_OVERLAP, COL_PREFILL, COL_DECODE, COL_ACTIVE_OVERLAP, COL_BLOCK_SIZE, COL_TREE, COL_COST };

int kvgate_score(kvgate_index* x, const kvgate_candidate* c, size_t n, const kvgate_score_request* r,
                 double* costs_out, uint32_t* chosen) {
  KVG_CHECK(x);
  if (!c || !r || !chosen) return kvg_fail(x, KVGATE_E_NULL, "score: NULL argument");
  if (n == 0 || n > x->opts.max_slots) return kvg_fail(x, KVGATE_E_BAD_ARG, "score: %zu candidates (1..%u)", n, x->opts.max_slots);
  if (!(r->temperature >= 0)) return kvg_fail(x, KVGATE_E_BAD_ARG, "score: temperature must be >= 0");
  KVG_ENTER(x, "score");
  uint8_t* base = kvg_mem(x) + x->score;
  size_t col = 8ull * x->opts.max_slots;
  for (size_t i = 0; i < n; i++) {
    const double v[6] = {c[i].overlap_blocks, c[i].active_prefill_tokens, c[i].active_decode_blocks,
                         c[i].active_overlap_blocks, c[i].block_size, c[i].tree_size};
    for (int k = 0; k < 6; k++) memcpy(base + k * col + 8 * i, &v[k], 8);
  }
  int k = (int)Z_kvgate_coreZ_score(&x->inst, (uint32_t)n, r->isl, r->overlap_weight, r->temperature, r->rand);
  if (k < 0) return kvg_status(x, k, "score");
  base = kvg_mem(x) + x->score;
  if (costs_out) memcpy(costs_out, base + COL_COST * col, 8 * n);
  *chosen = (uint32_t)k;
  return kvg_ok(x);
}
