/* Routes the captured vLLM prompt from C: two workers, the real BlockStored batch applied to worker 1, then the
 * prompt's 25 blocks found on worker 1. Usage: route <batch.msgpack> <tokens.u32le>; exit 0 when all blocks match. */
#include <stdio.h>
#include <stdlib.h>
#include "kvgate.h"

static unsigned char* slurp(const char* path, size_t* n) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char* buf = malloc(len > 0 ? (size_t)len : 1);
  *n = buf ? fread(buf, 1, (size_t)len, f) : 0;
  fclose(f);
  return buf;
}

static int check(kvgate_index* x, int st, const char* what) {
  if (st == KVGATE_OK) return 0;
  fprintf(stderr, "%s: %d %s\n", what, st, x ? kvgate_last_error(x) : kvgate_status_message(st));
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s <batch.msgpack> <tokens.u32le>\n", argv[0]);
    return 2;
  }
  size_t batch_len = 0, token_bytes = 0;
  unsigned char* batch = slurp(argv[1], &batch_len);
  unsigned char* tokens = slurp(argv[2], &token_bytes);
  if (!batch || !tokens) {
    fprintf(stderr, "cannot read inputs\n");
    return 2;
  }
  kvgate_options o;
  kvgate_options_init(&o);
  o.max_slots = 2;
  o.capacity = 4096;
  kvgate_index* x = NULL;
  if (check(NULL, kvgate_create(&o, &x), "create")) return 1;
  if (check(x, kvgate_open_slot(x, 0), "open 0") || check(x, kvgate_open_slot(x, 1), "open 1")) return 1;

  kvgate_ingest_policy policy;
  kvgate_ingest_policy_init(&policy, 16);
  kvgate_batch_info info;
  if (check(x, kvgate_apply_engine_batch(x, 1, batch, batch_len, &policy, &info), "apply batch")) return 1;
  printf("batch: rank %lld, %u events, %u records applied\n", (long long)info.rank, info.events, info.applied);

  const uint32_t* ids = (const uint32_t*)tokens;
  size_t n_tokens = token_bytes / 4;
  kvgate_hash_opts h = {.block_size = 16, .lora = NULL, .ns = NULL, .eagle = 0};
  uint64_t seq[64];
  size_t blocks = 0;
  if (check(x, kvgate_hash_prompt(x, ids, n_tokens, &h, NULL, seq, 64, &blocks), "hash")) return 1;
  printf("prompt: %zu tokens, %zu blocks, first sequence hash %llu\n", n_tokens, blocks, (unsigned long long)seq[0]);

  kvgate_match m[2];
  size_t n_matches = 0;
  if (check(x, kvgate_find_matches(x, ids, n_tokens, &h, m, 2, &n_matches, &blocks), "find_matches")) return 1;
  uint32_t on_reporter = 0;
  for (size_t i = 0; i < n_matches; i++) {
    printf("worker %u: %u/%zu blocks (holds %u)\n", m[i].slot, m[i].blocks, blocks, m[i].tree_size);
    if (m[i].slot == 1) on_reporter = m[i].blocks;
  }
  kvgate_destroy(x);
  free(batch);
  free(tokens);
  return n_matches == 1 && on_reporter == 25 && blocks == 25 ? 0 : 1;
}
