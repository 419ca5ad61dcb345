/* Seeded fuzz driver over the libkvgate C API: NULL pointers, lengths past the core's regions, batches that lie
 * about their size, random and mutated binary and msgpack batches, interleaved with valid traffic. It checks after
 * every call that a status came back (never a trap), that a refused call left the index untouched, that entries
 * equal the slots' tree sizes within capacity, and every 100 calls that the index still stores and matches exactly.
 * Usage: fuzz-driver <seed> <calls> <batch.msgpack>; prints a JSON summary, exit 1 on a violation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kvgate.h"

#define SLOTS 8
#define CAPACITY 2048
#define EVENT_BYTES 4096
#define MAX_PROMPT 2048

static uint64_t rng;
static uint64_t next(void) {
  uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static uint32_t below(uint32_t n) { return (uint32_t)(next() % n); }

static kvgate_index* x;
static long status_count[64];
static long violations, probes, calls;

static void violation(const char* what, int st) {
  violations++;
  if (violations <= 5) fprintf(stderr, "violation after call %ld (%s): status %d %s\n", calls, what, st, kvgate_last_error(x));
}

static void count(int st) {
  int k = -st;
  if (k >= 0 && k < 64) status_count[k]++;
}

static void snapshot(kvgate_stats* s) {
  if (kvgate_stats_get(x, s) != KVGATE_OK) violation("stats", -1);
}

/* Entries equal the sum of tree sizes and stay within capacity. */
static void consistent(const char* what) {
  kvgate_stats s;
  snapshot(&s);
  uint64_t sum = 0;
  for (uint32_t slot = 0; slot < SLOTS; slot++) {
    uint32_t t = 0;
    if (kvgate_tree_size(x, slot, &t) != KVGATE_OK) violation("tree_size", -1);
    sum += t;
  }
  if (sum != s.entries || s.entries > CAPACITY) violation(what, (int)s.entries);
}

/* A refused call must leave entries and counters as they were. */
static void refused(const char* what, int st, int want, const kvgate_stats* before) {
  count(st);
  if (st != want) violation(what, st);
  kvgate_stats after;
  snapshot(&after);
  if (after.entries != before->entries || memcmp(after.counters, before->counters, sizeof after.counters) != 0) violation(what, st);
}

static size_t stored_record(uint8_t* b, uint32_t slot, int has_parent, uint64_t parent, const uint64_t* h, size_t n) {
  uint32_t head[4] = {1u | (has_parent ? 1u << 8 : 0), slot, (uint32_t)n, 0};
  memcpy(b, head, 16);
  memcpy(b + 16, &parent, 8);
  for (size_t i = 0; i < n; i++) {
    memcpy(b + 24 + 16 * i, &h[i], 8);
    uint64_t local = h[i] * 31 + 7;
    memcpy(b + 32 + 16 * i, &local, 8);
  }
  return 24 + 16 * n;
}

static size_t removed_record(uint8_t* b, uint32_t slot, const uint64_t* h, size_t n) {
  uint32_t head[4] = {2u, slot, (uint32_t)n, 0};
  memcpy(b, head, 16);
  memcpy(b + 16, h, 8 * n);
  return 16 + 8 * n;
}

/* A valid batch of a few records for slots 1..SLOTS-1 (slot 0 is left to the probe). */
static size_t valid_batch(uint8_t* b, size_t cap) {
  size_t len = 0;
  for (uint32_t r = 0, n = 1 + below(4); r < n; r++) {
    uint64_t h[8];
    size_t k = 1 + below(8);
    for (size_t i = 0; i < k; i++) h[i] = below(64) + 1;
    uint32_t slot = 1 + below(SLOTS - 1);
    if (len + 24 + 16 * k > cap) break;
    len += below(3) ? stored_record(b + len, slot, 0, 0, h, k) : removed_record(b + len, slot, h, k);
  }
  return len;
}

/* Valid engine traffic and queries on slots 1..SLOTS-1. */
static void valid_call(void) {
  uint32_t slot = 1 + below(SLOTS - 1);
  uint64_t h[16], l[16];
  size_t n = 1 + below(16);
  for (size_t i = 0; i < n; i++) h[i] = below(256) + 1, l[i] = next();
  uint32_t u;
  int st;
  switch (below(4)) {
    case 0: st = kvgate_store(x, slot, below(2), below(256) + 1, h, l, n); break;
    case 1: st = kvgate_remove(x, slot, h, n, &u); break;
    case 2: st = kvgate_record_route(x, slot, l, n, (double)calls, 1000, &u); break;
    default: st = kvgate_expire(x, (double)calls - 500, &u); break;
  }
  count(st);
  if (st == KVGATE_E_TRAP || st == KVGATE_E_BROKEN) violation("valid call", st);
}

static void null_call(void) {
  kvgate_stats before;
  snapshot(&before);
  uint64_t h = 1, out;
  uint32_t u, tokens[32] = {0};
  size_t n;
  kvgate_hash_opts ho = {.block_size = 16};
  kvgate_match m[SLOTS];
  kvgate_batch_info info;
  kvgate_ingest_policy p;
  kvgate_ingest_policy_init(&p, 16);
  kvgate_candidate c = {0};
  kvgate_score_request r = {.isl = 32, .overlap_weight = 1};
  int st;
  switch (below(13)) {
    case 0: st = kvgate_store(x, 1, 0, 0, NULL, &h, 1); break;
    case 1: st = kvgate_store(x, 1, 0, 0, &h, NULL, 3); break;
    case 2: st = kvgate_remove(x, 1, NULL, 2, &u); break;
    case 3: st = kvgate_remove(x, 1, &h, 1, NULL); break;
    case 4: st = kvgate_apply_binary(x, NULL, 64, &u, &out); break;
    case 5: st = kvgate_hash_prompt(x, NULL, 32, &ho, &out, &out, 1, &n); break;
    case 6: st = kvgate_hash_prompt(x, tokens, 32, NULL, &out, &out, 1, &n); break;
    case 7: st = kvgate_find_matches(x, tokens, 32, &ho, NULL, SLOTS, &n, NULL); break;
    case 8: st = kvgate_find_matches_by_hashes(x, &h, 1, m, SLOTS, NULL); break;
    case 9: st = kvgate_apply_engine_batch(x, 1, NULL, 100, &p, &info); break;
    case 10: st = kvgate_score(x, NULL, 1, &r, NULL, &u); break;
    case 11: st = kvgate_xxh3(x, NULL, 5, 0, &out); break;
    default: {
      st = kvgate_stats_get(NULL, NULL);
      if (kvgate_open_slot(NULL, 0) != KVGATE_E_NULL) violation("NULL index", -1);
      (void)c;
      break;
    }
  }
  refused("NULL argument", st, KVGATE_E_NULL, &before);
}

static void range_call(uint8_t* big, size_t big_len) {
  kvgate_stats before;
  snapshot(&before);
  uint32_t u, *tokens = (uint32_t*)big;
  uint64_t out, h = 5;
  size_t n;
  kvgate_hash_opts ho = {.block_size = 16};
  kvgate_match m[1];
  kvgate_batch_info info;
  kvgate_ingest_policy p;
  kvgate_ingest_policy_init(&p, 16);
  kvgate_candidate c[SLOTS + 1];
  memset(c, 0, sizeof c);
  kvgate_score_request r = {.isl = 32, .overlap_weight = 1, .temperature = NAN};
  int st, want;
  switch (below(10)) {
    case 0: st = kvgate_apply_binary(x, big, EVENT_BYTES + 1 + below(EVENT_BYTES), &u, &out); want = KVGATE_E_BAD_ARG; break;
    case 1: st = kvgate_xxh3(x, big, EVENT_BYTES + 1 + below(100), 0, &out); want = KVGATE_E_BAD_ARG; break;
    case 2: st = kvgate_apply_engine_batch(x, 1, big, big_len, &p, &info); want = KVGATE_E_BAD_ARG; break;
    case 3: st = kvgate_hash_prompt(x, tokens, MAX_PROMPT + 1 + below(1000), &ho, NULL, NULL, 0, &n); want = KVGATE_E_TOO_LONG; break;
    case 4: ho.block_size = below(2) ? 0 : 8193 + below(1000); st = kvgate_hash_prompt(x, tokens, 64, &ho, NULL, NULL, 0, &n); want = KVGATE_E_BAD_ARG; break;
    case 5: st = kvgate_store(x, SLOTS + below(1u << 30), 0, 0, &h, &h, 1); want = KVGATE_E_BAD_SLOT; break;
    case 6: st = kvgate_remove(x, SLOTS + below(1000), &h, 1, &u); want = KVGATE_E_BAD_SLOT; break;
    case 7: st = kvgate_score(x, c, below(2) ? 0 : SLOTS + 1, &r, NULL, &u); want = KVGATE_E_BAD_ARG; break;
    case 8: r.temperature = NAN; st = kvgate_score(x, c, 1, &r, NULL, &u); want = KVGATE_E_BAD_ARG; break;
    default: {
      /* Output room for fewer matches than there are: refused, nothing written past the room. */
      uint64_t local = next() | 1;
      if (kvgate_store(x, 1 + below(SLOTS - 1), 0, 0, &h, &local, 1) != KVGATE_OK) violation("store", -1);
      snapshot(&before);
      st = kvgate_find_matches_by_hashes(x, &local, 1, m, 0, &n);
      want = KVGATE_E_BUFFER;
      break;
    }
  }
  refused("range", st, want, &before);
}

/* Valid batches mutated into liars: counts raised or lowered, truncated, bits flipped, or random bytes. */
static void lying_batch(uint8_t* b) {
  size_t len = valid_batch(b, EVENT_BYTES);
  switch (below(5)) {
    case 0: { uint32_t c; memcpy(&c, b + 8, 4); c += 1 + below(1u << 20); memcpy(b + 8, &c, 4); break; }
    case 1: { uint32_t c = 0xFFFFFFFFu - below(16); memcpy(b + 8, &c, 4); break; }
    case 2: len = below((uint32_t)len + 1); break;
    case 3: for (int i = 0, k = 1 + below(8); i < k; i++) b[below((uint32_t)len)] ^= (uint8_t)(1u << below(8)); break;
    default: len = below(EVENT_BYTES); for (size_t i = 0; i < len; i++) b[i] = (uint8_t)next(); break;
  }
  uint32_t records;
  uint64_t at;
  int st = kvgate_apply_binary(x, b, len, &records, &at);
  count(st);
  if (st != KVGATE_OK && st != KVGATE_E_CORRUPT) violation("lying batch", st);
  if (st == KVGATE_E_CORRUPT && at > len) violation("corrupt offset past the batch", st);
}

static void mutated_msgpack(const uint8_t* batch, size_t n, uint8_t* b) {
  memcpy(b, batch, n);
  size_t len = n;
  switch (below(4)) {
    case 0: len = below((uint32_t)n); break;
    case 1: for (int i = 0, k = 1 + below(6); i < k; i++) b[below((uint32_t)n)] ^= (uint8_t)(1u << below(8)); break;
    case 2: b[below((uint32_t)n)] = (uint8_t)(0xC0 + below(64)); break;
    default: len = below(2048); for (size_t i = 0; i < len; i++) b[i] = (uint8_t)next(); break;
  }
  kvgate_ingest_policy p;
  kvgate_ingest_policy_init(&p, 16);
  kvgate_batch_info info;
  uint32_t slot = 1 + below(SLOTS - 1);
  int st;
  if (below(2)) {
    st = kvgate_apply_engine_batch(x, slot, b, len, &p, &info);
  } else {
    /* The two-step form: decode (rank known), apply once; a second apply has nothing left to apply. */
    st = kvgate_engine_batch_decode(x, b, len, &p, &info);
    if (st == KVGATE_OK) st = kvgate_engine_batch_apply(x, slot, &info);
    if (st == KVGATE_OK && kvgate_engine_batch_apply(x, slot, &info) != KVGATE_E_STATE) violation("second apply", st);
  }
  count(st);
  if (st == KVGATE_E_TRAP || st == KVGATE_E_BROKEN || st == KVGATE_E_NULL) violation("mutated msgpack", st);
}

/* The index still stores and matches exactly: a 25-block prompt stored on slot 0 is found whole, tree size 25. */
static void probe(void) {
  probes++;
  uint32_t tokens[100];
  for (int i = 0; i < 100; i++) tokens[i] = (uint32_t)(i * 7919);
  kvgate_hash_opts ho = {.block_size = 4};
  uint64_t h[25], local[25], seq[25];
  size_t blocks = 0, k = 0;
  for (int i = 0; i < 25; i++) h[i] = 0xABC000 + (uint64_t)i;
  kvgate_match m[SLOTS];
  if (kvgate_hash_prompt(x, tokens, 100, &ho, local, seq, 25, &blocks) != KVGATE_OK || blocks != 25) violation("probe hash", -1);
  if (kvgate_clear_slot(x, 0) != KVGATE_OK || kvgate_store(x, 0, 0, 0, h, local, 25) != KVGATE_OK) violation("probe store", -1);
  if (kvgate_find_matches_by_hashes(x, seq, 25, m, SLOTS, &k) != KVGATE_OK) violation("probe match", -1);
  int found = 0;
  for (size_t i = 0; i < k; i++) {
    if (m[i].slot == 0) found = m[i].blocks == 25 && m[i].tree_size == 25;
  }
  if (!found) violation("probe: slot 0 lost its 25 blocks", (int)k);
  if (kvgate_clear_slot(x, 0) != KVGATE_OK) violation("probe clear", -1);
}

/* Slot 1 holds a 12-block prompt but its block 5 (a hole, as a lost event leaves): probing every 4th block matches
   past the hole, every block stops at it. Returns the blocks matched on slot 1. */
static uint32_t hole_match(void) {
  uint32_t tokens[48];
  for (int i = 0; i < 48; i++) tokens[i] = (uint32_t)(i * 104729 + 3);
  kvgate_hash_opts ho = {.block_size = 4};
  uint64_t h[12], local[12], seq[12];
  size_t blocks = 0, k = 0;
  uint32_t unknown = 0, got = 0;
  for (int i = 0; i < 12; i++) h[i] = 0xD0E000 + (uint64_t)i;
  kvgate_match m[SLOTS];
  if (kvgate_hash_prompt(x, tokens, 48, &ho, local, seq, 12, &blocks) != KVGATE_OK || blocks != 12) violation("hole hash", -1);
  if (kvgate_clear_slot(x, 1) != KVGATE_OK || kvgate_store(x, 1, 0, 0, h, local, 12) != KVGATE_OK) violation("hole store", -1);
  if (kvgate_remove(x, 1, &h[5], 1, &unknown) != KVGATE_OK || unknown != 0) violation("hole remove", -1);
  if (kvgate_find_matches_by_hashes(x, seq, 12, m, SLOTS, &k) != KVGATE_OK) violation("hole match", -1);
  for (size_t i = 0; i < k; i++) {
    if (m[i].slot == 1) got = m[i].blocks;
  }
  if (kvgate_clear_slot(x, 1) != KVGATE_OK) violation("hole clear", -1);
  return got;
}

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  rng = strtoull(argv[1], NULL, 10);
  long total = strtol(argv[2], NULL, 10);
  FILE* f = fopen(argv[3], "rb");
  if (!f) return 2;
  uint8_t msgpack[8192];
  size_t msgpack_len = fread(msgpack, 1, sizeof msgpack, f);
  fclose(f);
  kvgate_options o;
  kvgate_options_init(&o);
  o.max_slots = SLOTS;
  o.capacity = CAPACITY;
  o.event_bytes = EVENT_BYTES;
  o.event_blocks = 64;
  o.prompt_tokens = 256;
  o.max_prompt_tokens = MAX_PROMPT;
  o.salt = rng;
  if (kvgate_create(&o, &x) != KVGATE_OK) return 1;
  for (uint32_t s = 0; s < SLOTS; s++) kvgate_open_slot(x, s);
  size_t big_len = (1u << 22) + 4096;
  uint8_t* big = calloc(big_len, 1);
  uint8_t* scratch = calloc(EVENT_BYTES, 1);
  for (calls = 0; calls < total; calls++) {
    switch (below(6)) {
      case 0: null_call(); break;
      case 1: range_call(big, big_len); break;
      case 2: lying_batch(scratch); break;
      case 3: mutated_msgpack(msgpack, msgpack_len, scratch); break;
      default: valid_call(); break;
    }
    consistent("after call");
    if (calls % 100 == 99) probe();
  }
  /* The match jump: refused outside 1..1024, and kept across the rebuild below. */
  if (hole_match() != 5) violation("every block probed by default", (int)hole_match());
  if (kvgate_match_jump(x, 0) != KVGATE_E_BAD_ARG || kvgate_match_jump(x, 1025) != KVGATE_E_BAD_ARG) violation("match_jump range", -1);
  if (kvgate_match_jump(x, 4) != KVGATE_OK || hole_match() != 12) violation("match_jump 4", -1);
  /* A trap inside the core: a status, the index rebuilt with its slots reopened, and still exact. */
  int st = kvgate_debug_trap(x);
  count(st);
  if (st != KVGATE_E_TRAP) violation("debug_trap", st);
  probe();
  if (hole_match() != 12) violation("match_jump after the rebuild", -1);
  if (kvgate_match_jump(x, 1) != KVGATE_OK || hole_match() != 5) violation("match_jump 1", -1);
  consistent("after trap");
  kvgate_stats s;
  snapshot(&s);
  if (s.generation != 1 || s.entries != 0) violation("rebuild", (int)s.generation);
  printf("{\"calls\":%ld,\"probes\":%ld,\"violations\":%ld,\"generation\":%u,\"entries\":%u,\"statuses\":{", calls, probes,
         violations, s.generation, s.entries);
  int first = 1;
  for (int k = 0; k < 64; k++) {
    if (!status_count[k]) continue;
    printf("%s\"%d\":%ld", first ? "" : ",", -k, status_count[k]);
    first = 0;
  }
  printf("}}\n");
  kvgate_destroy(x);
  free(big);
  free(scratch);
  return violations ? 1 : 0;
}
