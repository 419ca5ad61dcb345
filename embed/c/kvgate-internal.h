/* What the libkvgate sources share: the handle (one wasm2c instance and its region offsets), the trap guard and
 * bounds-checked access to the core's linear memory. Not installed; hosts include kvgate.h only. */
#ifndef KVGATE_INTERNAL_H
#define KVGATE_INTERNAL_H

#include <string.h>
#include "kvgate.h"
#include "kvgate_core.h"
#include "wasm-rt-impl.h"

#define KVG_ERR_LEN 256
#define KVG_SALT_LEN 128

typedef Z_kvgate_core_instance_t kvg_core;

struct kvgate_index {
  kvg_core inst;
  kvgate_options opts;
  int live;   /* the instance is instantiated */
  int broken; /* a rebuild failed */
  uint32_t generation;
  uint8_t* open; /* max_slots flags: slots the host opened (reopened after a rebuild) */
  uint32_t match_jump; /* the host's kvgate_match_jump, set again after a rebuild (0: never set) */
  /* Region offsets into linear memory, read after init and after prompt growth. */
  uint32_t tokens, tokens_cap, local, seq, blocks_cap, out, sizes, counters, events, events_cap, io, io_cap;
  uint32_t score, result, ingest_in, ingest_in_cap, ingest_out, ingest_result;
  /* One-entry cache of the last salted seed. */
  char salt_key[2 * KVG_SALT_LEN + 2];
  uint64_t salt_seed;
  int salt_valid;
  /* The last decoded engine batch, for kvgate_engine_batch_apply. */
  int decoded_valid;
  uint32_t decoded_bytes, decoded_generation;
  char err[KVG_ERR_LEN];
};

/* Linear memory: its base (moves when memory grows) and size. */
static inline uint8_t* kvg_mem(kvgate_index* x) { return Z_kvgate_coreZ_memory(&x->inst)->data; }
static inline uint64_t kvg_mem_size(kvgate_index* x) { return Z_kvgate_coreZ_memory(&x->inst)->size; }

/* Records `status` with a formatted detail in x->err and returns it. */
int kvg_fail(kvgate_index* x, int status, const char* fmt, ...);
/* Clears x->err and returns KVGATE_OK. */
int kvg_ok(kvgate_index* x);
/* Called after a trap: rebuilds the instance empty and reopens the host's slots; returns KVGATE_E_TRAP. */
int kvg_trapped(kvgate_index* x, int trap, const char* what);
/* Re-reads the region offsets (after init or grow_prompt). */
void kvg_read_regions(kvgate_index* x);
/* Makes the prompt regions hold `tokens` tokens (and as many blocks), growing up to max_prompt_tokens. */
int kvg_fit_prompt(kvgate_index* x, uint64_t tokens);
/* The seed for (lora, ns) as the core computes it; strings longer than KVG_SALT_LEN are refused. */
int kvg_seed(kvgate_index* x, const char* lora, const char* ns, uint64_t* out);
/* Copies a prompt in and runs hash_prompt (route 0) or route (1); the block or match count, or a status. */
int kvg_hash_call(kvgate_index* x, const uint32_t* tokens, size_t n, const kvgate_hash_opts* h, int route);
/* A core status as a library status with the detail recorded. */
int kvg_status(kvgate_index* x, int st, const char* what);

/* Every public entry point that calls into the core starts with KVG_ENTER after validating its arguments, and
 * calls no other public entry point: the wasm2c runtime has one process-wide unwind target. */
#define KVG_CHECK(x)                                                       \
  do {                                                                     \
    if (!(x)) return KVGATE_E_NULL;                                        \
    if ((x)->broken) return kvg_fail((x), KVGATE_E_BROKEN, "index is broken: a rebuild after a trap failed"); \
  } while (0)
#define KVG_ENTER(x, what)                                                 \
  do {                                                                     \
    int kvg_trap_ = wasm_rt_impl_try();                                    \
    if (kvg_trap_ != 0) return kvg_trapped((x), kvg_trap_, (what));        \
  } while (0)

#endif
