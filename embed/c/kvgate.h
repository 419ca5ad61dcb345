/* libkvgate: the kvgate WASM core (compiled to C by wasm2c) behind a plain C API. See docs/abi.md.
 * Every call takes the index it works on; errors are negative return codes, kvgate_last_error() tells more. */
#ifndef KVGATE_H
#define KVGATE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility; only these declarations are exported from libkvgate.so. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* Status codes. -1..-9 and -21/-22 are the core's own (docs/abi.md); -30 and below are added by this library. */
#define KVGATE_OK 0
#define KVGATE_E_STATE (-1)
#define KVGATE_E_NO_MEMORY (-2)
#define KVGATE_E_BAD_ARG (-3)
#define KVGATE_E_BAD_SLOT (-4)
#define KVGATE_E_CAPACITY (-5)
#define KVGATE_E_PARENT_NOT_FOUND (-6)
#define KVGATE_E_INVALID_SEQUENCE (-7)
#define KVGATE_E_CORRUPT (-8)
#define KVGATE_E_TOO_LONG (-9)
#define KVGATE_E_INGEST_FALLBACK (-21)
#define KVGATE_E_INGEST_FULL (-22)
#define KVGATE_E_NULL (-30)   /* a required pointer was NULL */
#define KVGATE_E_BUFFER (-31) /* an output buffer is too small; nothing was written past it */
#define KVGATE_E_TRAP (-32)   /* the core trapped; the index was rebuilt empty (open slots reopened) */
#define KVGATE_E_ABI (-33)    /* the embedded core's abi_version differs from KVGATE_ABI_VERSION */
#define KVGATE_E_BROKEN (-34) /* a rebuild after a trap failed; only kvgate_destroy is valid */

/* The core ABI this library was written against (assembly/abi.ts ABI_VERSION). */
#define KVGATE_ABI_VERSION 3

/* Counter indices of kvgate_stats.counters (cumulative since creation). */
enum {
  KVGATE_C_APPLIED, KVGATE_C_PARENT_MISSING, KVGATE_C_INVALID, KVGATE_C_CAPACITY, KVGATE_C_UNKNOWN_REMOVED,
  KVGATE_C_BAD_SLOT, KVGATE_C_CORRUPT, KVGATE_C_EVICTED, KVGATE_C_EXPIRED, KVGATE_C_PRUNED, KVGATE_C_CAPPED,
  KVGATE_C_MEMO_REUSED, /* prompt blocks whose hashes the prompt memo supplied */
  KVGATE_C_MEMO_HASHED, /* prompt blocks hashed while the memo was on */
  KVGATE_COUNTERS
};

typedef struct kvgate_index kvgate_index;

typedef struct kvgate_options {
  uint32_t max_slots;         /* worker slots, one per (worker, dp rank); 1..4096, default 64 */
  uint32_t capacity;          /* (slot, block) entries held at most; default 2^20 */
  uint32_t prompt_tokens;     /* prompt scratch before it grows; default 65,536 */
  uint32_t max_prompt_tokens; /* longest prompt accepted; default 2^21 */
  uint32_t event_blocks;      /* blocks of one Stored/Removed call; default 8,192 */
  uint32_t event_bytes;       /* bytes of one binary batch; default 1 MiB */
  uint32_t max_multimodal;    /* reserved for multimodal hashes; default 4,096 */
  uint32_t approx_max_blocks; /* approximate mode: blocks before pruning; default 2^20 */
  double prune_ratio;         /* approximate mode: pruning keeps this share; default 0.8 */
  uint64_t salt;              /* table-hash salt; kvgate_options_init draws a random one */
  uint32_t prompt_memo_entries; /* recent prompts kept with their block hashes (0..4096; 0 with 0 bytes: off); default 128 */
  uint32_t prompt_memo_bytes;   /* bytes of the prompt memo's ring; default 8 MiB */
} kvgate_options;

typedef struct kvgate_hash_opts {
  uint32_t block_size; /* tokens per KV block, as the engine's */
  const char* lora;    /* LoRA adapter name, NUL-terminated; NULL or "" for none */
  const char* ns;      /* cache namespace, NUL-terminated; NULL or "" for none */
  int eagle;           /* nonzero: each block also covers the next block's first token */
} kvgate_hash_opts;

typedef struct kvgate_match {
  uint32_t slot;
  uint32_t blocks;    /* contiguous leading prompt blocks the slot holds */
  uint32_t tree_size; /* blocks the slot holds in the index */
} kvgate_match;

#define KVGATE_INGEST_INDEX_DEVICE 1u
#define KVGATE_INGEST_DROP_FOREIGN_EXTRA_KEYS 2u

typedef struct kvgate_ingest_policy {
  uint32_t block_size; /* the worker's KV block size; events of another size are dropped and counted */
  int32_t kv_group;    /* KV cache group to index, or -1 for every group */
  uint32_t flags;      /* KVGATE_INGEST_* */
  const char* ns;      /* cache namespace salting the local hashes; NULL for none */
} kvgate_ingest_policy;

/* The JS host's default policy: every KV group, device (GPU) blocks indexed, foreign extra keys dropped. */
void kvgate_ingest_policy_init(kvgate_ingest_policy* p, uint32_t block_size);

typedef struct kvgate_batch_info {
  int64_t rank;      /* the batch's data-parallel rank, -1 when it names none */
  uint32_t events;   /* events in the batch */
  uint32_t records;  /* binary records it decoded into */
  uint32_t bytes;    /* bytes of those records */
  uint32_t clears;   /* 1 when it held an AllBlocksCleared */
  uint32_t applied;  /* records applied (after kvgate_engine_batch_apply) */
} kvgate_batch_info;

typedef struct kvgate_candidate {
  double overlap_blocks;        /* cached prefix blocks of this request on the candidate */
  double active_prefill_tokens; /* prefill tokens already booked on it */
  double active_decode_blocks;  /* decode blocks already booked on it */
  double active_overlap_blocks; /* blocks of this prompt already in active_decode_blocks */
  double block_size;
  double tree_size;             /* blocks it holds in the index; fewer wins a cost tie */
} kvgate_candidate;

typedef struct kvgate_score_request {
  double isl;            /* prompt length in tokens */
  double overlap_weight; /* weight of prefill blocks against decode blocks (1 is usual) */
  double temperature;    /* 0: cheapest; > 0: softmax sampling */
  double rand;           /* uniform draw in [0, 1) */
} kvgate_score_request;

typedef struct kvgate_stats {
  uint32_t entries, nodes, ttl_entries, heap_items;
  uint64_t memory_bytes;  /* bytes the core reserved */
  uint64_t linear_bytes;  /* size of the core's linear memory */
  uint32_t generation;    /* rebuilds after traps */
  uint32_t counters[KVGATE_COUNTERS];
} kvgate_stats;

/* Defaults (see kvgate_options) and a random salt. */
void kvgate_options_init(kvgate_options* o);
/* Creates an index; `o` NULL means defaults. On failure *out is NULL. */
int kvgate_create(const kvgate_options* o, kvgate_index** out);
void kvgate_destroy(kvgate_index* x);
/* A static description of a status code. */
const char* kvgate_status_message(int status);
/* The last error of `x` with detail (empty after success); valid until the next call on `x`. */
const char* kvgate_last_error(const kvgate_index* x);
/* The abi_version export of the embedded core (kvgate_create refuses a core whose version is not KVGATE_ABI_VERSION). */
int kvgate_core_abi_version(kvgate_index* x, int* out);

int kvgate_xxh3(kvgate_index* x, const uint8_t* bytes, size_t n, uint64_t seed, uint64_t* out);
/* The local-hash seed for a LoRA adapter and namespace: 1337 + xxh3(lora, 0) + xxh3(ns, 1). */
int kvgate_seed(kvgate_index* x, const char* lora, const char* ns, uint64_t* out);
/* Local and chained sequence hashes of the complete blocks; either output may be NULL; *n_blocks is always set. */
int kvgate_hash_prompt(kvgate_index* x, const uint32_t* tokens, size_t n_tokens, const kvgate_hash_opts* h,
                       uint64_t* local_out, uint64_t* seq_out, size_t out_cap, size_t* n_blocks);

int kvgate_open_slot(kvgate_index* x, uint32_t slot);
/* Removes a worker slot: drops its blocks and closes it (reopen with kvgate_open_slot). */
int kvgate_remove_worker(kvgate_index* x, uint32_t slot);
int kvgate_clear_slot(kvgate_index* x, uint32_t slot);
/* A Stored event of `n` blocks (engine hashes, local hashes) extending `parent` when has_parent; returns
 * KVGATE_OK or the outcome (PARENT_NOT_FOUND, INVALID_SEQUENCE, CAPACITY, BAD_SLOT). */
int kvgate_store(kvgate_index* x, uint32_t slot, int has_parent, uint64_t parent, const uint64_t* hashes,
                 const uint64_t* locals, size_t n);
/* A Removed event; *unknown counts hashes the slot did not hold. */
int kvgate_remove(kvgate_index* x, uint32_t slot, const uint64_t* hashes, size_t n, uint32_t* unknown);
/* A binary batch (docs/abi.md); *records applied. On KVGATE_E_CORRUPT *corrupt_at is the bad record's offset
 * and the records before it stay applied. */
int kvgate_apply_binary(kvgate_index* x, const uint8_t* bytes, size_t n, uint32_t* records, uint64_t* corrupt_at);
/* A vLLM/SGLang msgpack KVEventBatch: decode (nothing applied yet), then apply the decoded records to a slot
 * (chosen from info.rank). KVGATE_E_INGEST_FALLBACK: a shape only the TypeScript decoder handles. */
int kvgate_engine_batch_decode(kvgate_index* x, const uint8_t* payload, size_t n, const kvgate_ingest_policy* p,
                               kvgate_batch_info* info);
int kvgate_engine_batch_apply(kvgate_index* x, uint32_t slot, kvgate_batch_info* info);
/* decode + apply to `slot` in one call. */
int kvgate_apply_engine_batch(kvgate_index* x, uint32_t slot, const uint8_t* payload, size_t n,
                              const kvgate_ingest_policy* p, kvgate_batch_info* info);

/* Hashes a prompt and matches it; *n_matches slots land in `out` (at most max_slots). */
int kvgate_find_matches(kvgate_index* x, const uint32_t* tokens, size_t n_tokens, const kvgate_hash_opts* h,
                        kvgate_match* out, size_t out_cap, size_t* n_matches, size_t* n_blocks);
int kvgate_find_matches_by_hashes(kvgate_index* x, const uint64_t* seq, size_t n, kvgate_match* out,
                                  size_t out_cap, size_t* n_matches);
/* Approximate mode: `seq` (prompt order) was routed to `slot` at `now` ms, living `ttl` ms. */
int kvgate_record_route(kvgate_index* x, uint32_t slot, const uint64_t* seq, size_t n, double now, double ttl,
                        uint32_t* recorded);
int kvgate_expire(kvgate_index* x, double now, uint32_t* expired);
/* Approximate mode: `slot` keeps at most `capacity` routed blocks (0: only the TTLs bound them), least recently
   routed first out; the excess is dropped at once (*dropped). Blocks an engine event confirmed do not count. */
int kvgate_slot_capacity(kvgate_index* x, uint32_t slot, uint32_t capacity, uint32_t* dropped);
/* Matching probes every `jump`-th block while every slot still matching holds it, and walks back block by block only
   where one does not (1..1024; 1, the default, probes every block). Exact for slots whose blocks are prefix-closed,
   as engines' LRU eviction keeps them; a slot with a hole inside a skipped run is matched past it. Kept across rebuilds. */
int kvgate_match_jump(kvgate_index* x, uint32_t jump);
/* Costs of `n` candidates (costs_out may be NULL) and the chosen one. */
int kvgate_score(kvgate_index* x, const kvgate_candidate* c, size_t n, const kvgate_score_request* r,
                 double* costs_out, uint32_t* chosen);
int kvgate_tree_size(kvgate_index* x, uint32_t slot, uint32_t* out);
int kvgate_stats_get(kvgate_index* x, kvgate_stats* out);
/* Fault injection: runs the core's debug_trap; returns KVGATE_E_TRAP after rebuilding. */
int kvgate_debug_trap(kvgate_index* x);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif
