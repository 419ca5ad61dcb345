/* libkvgate lifecycle: options, creating one wasm2c instance per index (with the page budget the JS host uses),
 * status messages, rebuilding after a trap, slots and stats. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "kvgate-internal.h"

static int g_runtime_ready = 0;

void kvgate_options_init(kvgate_options* o) {
  if (!o) return;
  o->max_slots = 64;
  o->capacity = 1u << 20;
  o->prompt_tokens = 65536;
  o->max_prompt_tokens = 1u << 21;
  o->event_blocks = 8192;
  o->event_bytes = 1u << 20;
  o->max_multimodal = 4096;
  o->approx_max_blocks = 1u << 20;
  o->prune_ratio = 0.8;
  o->salt = 0;
  o->prompt_memo_entries = 128;
  o->prompt_memo_bytes = 8u << 20;
  FILE* f = fopen("/dev/urandom", "rb");
  if (f) {
    if (fread(&o->salt, sizeof o->salt, 1, f) != 1) o->salt = 0;
    fclose(f);
  }
  if (o->salt == 0) o->salt = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull;
}

const char* kvgate_status_message(int st) {
  switch (st) {
    case KVGATE_OK: return "ok";
    case KVGATE_E_STATE: return "the index is not ready for this call";
    case KVGATE_E_NO_MEMORY: return "memory budget exhausted";
    case KVGATE_E_BAD_ARG: return "invalid argument";
    case KVGATE_E_BAD_SLOT: return "slot out of range or not open";
    case KVGATE_E_CAPACITY: return "index capacity reached";
    case KVGATE_E_PARENT_NOT_FOUND: return "parent block not held by the slot";
    case KVGATE_E_INVALID_SEQUENCE: return "a block hash repeats within the event";
    case KVGATE_E_CORRUPT: return "corrupt event batch";
    case KVGATE_E_TOO_LONG: return "prompt too long";
    case KVGATE_E_INGEST_FALLBACK: return "batch shape needs the host decoder (LoRA names, EAGLE pairs, other media)";
    case KVGATE_E_INGEST_FULL: return "decoded records would not fit the ingest region";
    case KVGATE_E_NULL: return "a required pointer was NULL";
    case KVGATE_E_BUFFER: return "output buffer too small";
    case KVGATE_E_TRAP: return "the core trapped; the index was rebuilt empty";
    case KVGATE_E_ABI: return "core ABI version mismatch";
    case KVGATE_E_BROKEN: return "index broken after a failed rebuild";
    default: return "unknown status";
  }
}

const char* kvgate_last_error(const kvgate_index* x) { return x ? x->err : "no index"; }

int kvg_fail(kvgate_index* x, int status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->err, sizeof x->err, fmt, ap);
  va_end(ap);
  return status;
}

int kvg_ok(kvgate_index* x) {
  x->err[0] = 0;
  return KVGATE_OK;
}

int kvg_status(kvgate_index* x, int st, const char* what) {
  if (st >= 0) return kvg_ok(x);
  return kvg_fail(x, st, "%s: %s", what, kvgate_status_message(st));
}

static uint64_t pow2_at_least(uint64_t n) {
  uint64_t p = 16;
  while (p < n) p <<= 1;
  return p;
}

/* Ingest regions, as ingestBytes in src/core/kv-index-options.ts. */
static void ingest_sizes(const kvgate_options* o, uint32_t* in, uint32_t* out) {
  uint64_t i = o->event_bytes < (1u << 16) ? (1u << 16) : o->event_bytes;
  if (i > (1u << 22)) i = 1u << 22;
  *in = (uint32_t)i;
  *out = (uint32_t)(2 * i);
}

/* Pages the core may grow to: budgetBytes in src/core/kv-index-options.ts. */
static uint32_t budget_pages(const kvgate_options* o) {
  uint64_t words = (o->max_slots + 63) / 64;
  uint64_t table = pow2_at_least(((uint64_t)o->capacity * 4 + 2) / 3);
  uint64_t heap = (o->capacity < (uint64_t)o->approx_max_blocks + 1 ? o->capacity : (uint64_t)o->approx_max_blocks + 1) + 64;
  uint64_t fixed = table * (8 + 8 * words) + table * 32 + heap * 80 + (uint64_t)o->max_slots * 36 + words * 8 +
                   o->event_bytes + (uint64_t)o->event_blocks * 24 + 9ull * o->max_slots * 8 +
                   (uint64_t)o->max_multimodal * 24 + 8193 * 4 + 4096;
  uint64_t e16 = o->event_bytes >> 4;
  uint64_t dup = pow2_at_least((e16 > o->event_blocks ? e16 : o->event_blocks) * 2) * 16;
  uint32_t in, out;
  ingest_sizes(o, &in, &out);
  /* Prompt memo (assembly/hash/prompt-memo.ts): entry records, the ring, a directory and a doorkeeper of `slots`. */
  uint64_t slots = pow2_at_least(16ull * o->prompt_memo_entries > 1024 ? 16ull * o->prompt_memo_entries : 1024);
  uint64_t memo = o->prompt_memo_entries ? 64ull * o->prompt_memo_entries + o->prompt_memo_bytes + slots * 12 + 128 : 0;
  uint64_t total = fixed + dup + memo + 2 * 24ull * o->max_prompt_tokens + 24ull * o->prompt_tokens + in + out + 256 + (1u << 20);
  uint64_t pages = (total + 65535) / 65536;
  return pages > 65536 ? 65536 : (uint32_t)pages;
}

void kvg_read_regions(kvgate_index* x) {
  kvg_core* c = &x->inst;
  x->tokens = Z_kvgate_coreZ_tokens_ptr(c);
  x->tokens_cap = Z_kvgate_coreZ_tokens_cap(c);
  x->local = Z_kvgate_coreZ_local_ptr(c);
  x->seq = Z_kvgate_coreZ_seq_ptr(c);
  x->blocks_cap = Z_kvgate_coreZ_blocks_cap(c);
  x->out = Z_kvgate_coreZ_out_ptr(c);
  x->sizes = Z_kvgate_coreZ_sizes_ptr(c);
  x->counters = Z_kvgate_coreZ_counters_ptr(c);
  x->events = Z_kvgate_coreZ_events_ptr(c);
  x->events_cap = Z_kvgate_coreZ_events_cap(c);
  x->io = Z_kvgate_coreZ_io_ptr(c);
  x->io_cap = Z_kvgate_coreZ_io_cap(c);
  x->score = Z_kvgate_coreZ_score_ptr(c);
  x->result = Z_kvgate_coreZ_result_ptr(c);
  x->ingest_in = Z_kvgate_coreZ_ingest_in_ptr(c);
  x->ingest_in_cap = Z_kvgate_coreZ_ingest_in_cap(c);
  x->ingest_out = Z_kvgate_coreZ_ingest_out_ptr(c);
  x->ingest_result = Z_kvgate_coreZ_ingest_result_ptr(c);
}

int kvg_fit_prompt(kvgate_index* x, uint64_t tokens) {
  if (tokens <= x->tokens_cap && tokens <= x->blocks_cap) return KVGATE_OK;
  if (tokens > x->opts.max_prompt_tokens) {
    return kvg_fail(x, KVGATE_E_TOO_LONG, "prompt of %llu tokens exceeds max_prompt_tokens %u",
                    (unsigned long long)tokens, x->opts.max_prompt_tokens);
  }
  uint64_t next = (uint64_t)x->tokens_cap * 2;
  if (next < tokens) next = tokens;
  if (next > x->opts.max_prompt_tokens) next = x->opts.max_prompt_tokens;
  int st = (int)Z_kvgate_coreZ_grow_prompt(&x->inst, (uint32_t)next, (uint32_t)next);
  if (st != KVGATE_OK) return kvg_status(x, st, "grow_prompt");
  kvg_read_regions(x);
  return KVGATE_OK;
}

/* Instantiates and initialises the core. Runs under the caller's trap guard. */
static int boot(kvgate_index* x) {
  const kvgate_options* o = &x->opts;
  Z_kvgate_core_instantiate(&x->inst);
  x->live = 1;
  int v = (int)Z_kvgate_coreZ_abi_version(&x->inst);
  if (v != KVGATE_ABI_VERSION) return kvg_fail(x, KVGATE_E_ABI, "core ABI %d, library expects %d", v, KVGATE_ABI_VERSION);
  int st = (int)Z_kvgate_coreZ_init(&x->inst, o->max_slots, o->capacity, o->prompt_tokens, o->event_blocks, o->event_bytes,
                                    o->max_multimodal, o->approx_max_blocks, o->prune_ratio, (uint32_t)o->salt,
                                    (uint32_t)(o->salt >> 32), budget_pages(o));
  if (st != KVGATE_OK) return kvg_status(x, st, "init");
  st = (int)Z_kvgate_coreZ_grow_prompt(&x->inst, o->prompt_tokens, o->prompt_tokens);
  if (st != KVGATE_OK) return kvg_status(x, st, "init");
  uint32_t in, out;
  ingest_sizes(o, &in, &out);
  st = (int)Z_kvgate_coreZ_ingest_reserve(&x->inst, in, out);
  if (st != KVGATE_OK) return kvg_status(x, st, "ingest_reserve");
  if (o->prompt_memo_entries > 0) {
    st = (int)Z_kvgate_coreZ_memo_init(&x->inst, o->prompt_memo_entries, o->prompt_memo_bytes);
    if (st != KVGATE_OK) return kvg_status(x, st, "memo_init");
  }
  kvg_read_regions(x);
  for (uint32_t s = 0; s < o->max_slots; s++) {
    if (x->open[s]) Z_kvgate_coreZ_slot_open(&x->inst, s);
  }
  if (x->match_jump > 1) Z_kvgate_coreZ_match_jump(&x->inst, x->match_jump);
  x->salt_valid = 0;
  x->decoded_valid = 0;
  return KVGATE_OK;
}

static void drop_instance(kvgate_index* x) {
  if (x->live) Z_kvgate_core_free(&x->inst);
  x->live = 0;
}

/* boot() under its own trap guard: a trap while booting is a status like any other. */
static int boot_guarded(kvgate_index* x) {
  if (wasm_rt_impl_try() != 0) return KVGATE_E_TRAP;
  return boot(x);
}

static int valid_options(const kvgate_options* o) {
  return o->max_slots >= 1 && o->max_slots <= 4096 && o->capacity >= 1 && o->capacity <= (1u << 26) &&
         o->prompt_tokens >= 1 && o->max_prompt_tokens >= 1 && o->max_prompt_tokens <= (1u << 26) &&
         o->event_blocks >= 1 && o->event_blocks <= (1u << 22) && o->event_bytes >= 16 && o->event_bytes <= (1u << 28) &&
         o->approx_max_blocks >= 1 && o->approx_max_blocks <= (1u << 30) && o->prune_ratio > 0 && o->prune_ratio <= 1 &&
         o->prompt_memo_entries <= 4096 && o->prompt_memo_bytes <= (1u << 30) &&
         (o->prompt_memo_entries == 0) == (o->prompt_memo_bytes == 0);
}

int kvgate_create(const kvgate_options* o, kvgate_index** out) {
  if (!out) return KVGATE_E_NULL;
  *out = NULL;
  kvgate_options d;
  if (!o) {
    kvgate_options_init(&d);
    o = &d;
  }
  if (!valid_options(o)) return KVGATE_E_BAD_ARG;
  kvgate_index* x = calloc(1, sizeof *x);
  if (!x) return KVGATE_E_NO_MEMORY;
  x->opts = *o;
  if (x->opts.prompt_tokens > x->opts.max_prompt_tokens) x->opts.prompt_tokens = x->opts.max_prompt_tokens;
  x->open = calloc(o->max_slots, 1);
  if (!x->open) {
    free(x);
    return KVGATE_E_NO_MEMORY;
  }
  if (!g_runtime_ready) {
    wasm_rt_init();
    Z_kvgate_core_init_module();
    g_runtime_ready = 1;
  }
  int st = boot_guarded(x);
  if (st != KVGATE_OK) {
    kvgate_destroy(x);
    return st;
  }
  kvg_ok(x);
  *out = x;
  return KVGATE_OK;
}

void kvgate_destroy(kvgate_index* x) {
  if (!x) return;
  drop_instance(x);
  free(x->open);
  free(x);
}

int kvgate_core_abi_version(kvgate_index* x, int* out) {
  KVG_CHECK(x);
  if (!out) return kvg_fail(x, KVGATE_E_NULL, "abi_version: out is NULL");
  KVG_ENTER(x, "abi_version");
  *out = (int)Z_kvgate_coreZ_abi_version(&x->inst);
  return kvg_ok(x);
}

int kvg_trapped(kvgate_index* x, int trap, const char* what) {
  drop_instance(x);
  x->generation++;
  char why[96];
  snprintf(why, sizeof why, "%s", wasm_rt_strerror((wasm_rt_trap_t)trap));
  int st = boot_guarded(x);
  if (st != KVGATE_OK) {
    drop_instance(x);
    x->broken = 1;
    return kvg_fail(x, KVGATE_E_BROKEN, "core trapped in %s (%s) and the rebuild failed", what, why);
  }
  return kvg_fail(x, KVGATE_E_TRAP, "core trapped in %s (%s); index rebuilt empty (generation %u)", what, why,
                  x->generation);
}

static int slot_call(kvgate_index* x, uint32_t slot, const char* what, u32 (*fn)(kvg_core*, u32), int open_after) {
  KVG_CHECK(x);
  if (slot >= x->opts.max_slots) return kvg_fail(x, KVGATE_E_BAD_SLOT, "%s: slot %u >= max_slots %u", what, slot, x->opts.max_slots);
  KVG_ENTER(x, what);
  int st = (int)fn(&x->inst, slot);
  if (st < 0) return kvg_status(x, st, what);
  if (open_after >= 0) x->open[slot] = (uint8_t)open_after;
  return kvg_ok(x);
}

int kvgate_open_slot(kvgate_index* x, uint32_t slot) { return slot_call(x, slot, "slot_open", Z_kvgate_coreZ_slot_open, 1); }
int kvgate_remove_worker(kvgate_index* x, uint32_t slot) { return slot_call(x, slot, "slot_close", Z_kvgate_coreZ_slot_close, 0); }
int kvgate_clear_slot(kvgate_index* x, uint32_t slot) { return slot_call(x, slot, "clear_slot", Z_kvgate_coreZ_clear_slot, -1); }

int kvgate_tree_size(kvgate_index* x, uint32_t slot, uint32_t* out) {
  KVG_CHECK(x);
  if (!out) return kvg_fail(x, KVGATE_E_NULL, "tree_size: out is NULL");
  if (slot >= x->opts.max_slots) return kvg_fail(x, KVGATE_E_BAD_SLOT, "tree_size: slot %u >= max_slots", slot);
  memcpy(out, kvg_mem(x) + x->sizes + 4ull * slot, 4);
  return kvg_ok(x);
}

int kvgate_stats_get(kvgate_index* x, kvgate_stats* out) {
  KVG_CHECK(x);
  if (!out) return kvg_fail(x, KVGATE_E_NULL, "stats: out is NULL");
  KVG_ENTER(x, "stats");
  kvg_core* c = &x->inst;
  out->entries = Z_kvgate_coreZ_entries(c);
  out->nodes = Z_kvgate_coreZ_nodes(c);
  out->ttl_entries = Z_kvgate_coreZ_ttl_entries(c);
  out->heap_items = Z_kvgate_coreZ_heap_items(c);
  out->memory_bytes = Z_kvgate_coreZ_memory_used(c);
  out->linear_bytes = kvg_mem_size(x);
  out->generation = x->generation;
  memcpy(out->counters, kvg_mem(x) + x->counters, sizeof out->counters);
  return kvg_ok(x);
}

int kvgate_debug_trap(kvgate_index* x) {
  KVG_CHECK(x);
  KVG_ENTER(x, "debug_trap");
  Z_kvgate_coreZ_debug_trap(&x->inst);
  return kvg_fail(x, KVGATE_E_STATE, "debug_trap returned");
}
