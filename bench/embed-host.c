/* The C host's half of `npm run bench -- embed`: replays the workload bench/embed.ts wrote (engine msgpack batches,
 * binary batches, prompts to match) through libkvgate, one sample per "s" line on stdin, so the JS side can
 * interleave its own samples with these; prints one JSON line per sample, and the totals on "q".
 * Usage: embed-host <workload.bin> <cycles> <rounds>. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kvgate.h"

typedef struct { uint32_t len; uint8_t* bytes; } blob;

static FILE* in;
static uint32_t u32(void) {
  uint32_t v;
  if (fread(&v, 4, 1, in) != 1) exit(3);
  return v;
}
static blob* blobs(uint32_t* n) {
  *n = u32();
  blob* b = calloc(*n ? *n : 1, sizeof *b);
  for (uint32_t i = 0; i < *n; i++) {
    b[i].len = u32();
    b[i].bytes = malloc(b[i].len ? b[i].len : 1);
    if (fread(b[i].bytes, 1, b[i].len, in) != b[i].len) exit(3);
  }
  return b;
}
static double ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static void fail(kvgate_index* x, int st, const char* what) {
  fprintf(stderr, "embed-host: %s: %d %s\n", what, st, kvgate_last_error(x));
  exit(1);
}

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  in = fopen(argv[1], "rb");
  if (!in) return 2;
  int cycles = atoi(argv[2]), rounds = atoi(argv[3]);
  uint32_t slots = u32(), capacity = u32(), event_slot = u32();
  uint64_t salt = u32();
  uint32_t n_setup, n_engine, n_binary;
  blob* setup = blobs(&n_setup);
  blob* engine = blobs(&n_engine);
  blob* binary = blobs(&n_binary);
  uint32_t n_prompts = u32(), n_tokens = u32();
  uint32_t* tokens = malloc(4ull * n_prompts * n_tokens);
  if (fread(tokens, 4, (size_t)n_prompts * n_tokens, in) != (size_t)n_prompts * n_tokens) return 3;
  fclose(in);

  kvgate_options o;
  kvgate_options_init(&o);
  o.max_slots = slots;
  o.capacity = capacity;
  o.salt = salt;
  kvgate_index* x;
  int st = kvgate_create(&o, &x);
  if (st) fail(x, st, "create");
  for (uint32_t s = 0; s < slots; s++) kvgate_open_slot(x, s);
  uint32_t records;
  uint64_t at;
  for (uint32_t i = 0; i < n_setup; i++) {
    if ((st = kvgate_apply_binary(x, setup[i].bytes, setup[i].len, &records, &at))) fail(x, st, "setup");
  }
  kvgate_stats stats;
  kvgate_stats_get(x, &stats);
  uint32_t setup_entries = stats.entries;
  kvgate_ingest_policy p;
  kvgate_ingest_policy_init(&p, 16);
  kvgate_batch_info info;
  kvgate_hash_opts h = {.block_size = 16};
  kvgate_match* m = calloc(slots, sizeof *m);
  uint64_t matched = 0, applied = 0;
  char cmd[16];
  while (fgets(cmd, sizeof cmd, stdin) && cmd[0] == 's') {
    double t0 = ms();
    for (int c = 0; c < cycles; c++) {
      for (uint32_t i = 0; i < n_engine; i++) {
        if ((st = kvgate_apply_engine_batch(x, event_slot, engine[i].bytes, engine[i].len, &p, &info))) fail(x, st, "engine batch");
        applied += info.applied;
      }
    }
    double t1 = ms();
    for (int c = 0; c < cycles; c++) {
      for (uint32_t i = 0; i < n_binary; i++) {
        if ((st = kvgate_apply_binary(x, binary[i].bytes, binary[i].len, &records, &at))) fail(x, st, "binary batch");
        applied += records;
      }
    }
    double t2 = ms();
    for (int r = 0; r < rounds; r++) {
      for (uint32_t i = 0; i < n_prompts; i++) {
        size_t n = 0, blocks = 0;
        if ((st = kvgate_find_matches(x, tokens + (size_t)i * n_tokens, n_tokens, &h, m, slots, &n, &blocks))) fail(x, st, "find_matches");
        for (size_t k = 0; k < n; k++) matched += m[k].blocks + m[k].tree_size;
      }
    }
    double t3 = ms();
    printf("{\"engine_ms\":%.4f,\"binary_ms\":%.4f,\"match_ms\":%.4f}\n", t1 - t0, t2 - t1, t3 - t2);
    fflush(stdout);
  }
  kvgate_stats_get(x, &stats);
  printf("{\"setup_entries\":%u,\"matched\":%llu,\"applied\":%llu,\"entries\":%u}\n", setup_entries,
         (unsigned long long)matched, (unsigned long long)applied, stats.entries);
  kvgate_destroy(x);
  return 0;
}
