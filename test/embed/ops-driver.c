/* Test driver: replays an operation script (test/embed/op-script.ts writes it) against libkvgate and prints one
 * result line per operation, so a vitest test can compare C, Python and the TypeScript reference line by line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kvgate.h"

static kvgate_index* x;
static char* cur;

static char* word(void) {
  while (*cur == ' ') cur++;
  if (!*cur || *cur == '\n') return NULL;
  char* w = cur;
  while (*cur && *cur != ' ' && *cur != '\n') cur++;
  if (*cur) *cur++ = 0;
  return w;
}
static uint64_t num(void) {
  char* w = word();
  if (!w) {
    fprintf(stderr, "ops-driver: missing number\n");
    exit(3);
  }
  return strtoull(w, NULL, 10);
}
static double real(void) { return (double)num(); }

/* Hex -> bytes (NUL-terminated, so text can use it too); *n bytes. */
static uint8_t* unhex(const char* hex, size_t* n) {
  if (!hex) exit(3);
  *n = strlen(hex) / 2;
  uint8_t* b = malloc(*n + 1);
  for (size_t i = 0; i < *n; i++) {
    unsigned v;
    sscanf(hex + 2 * i, "%2x", &v);
    b[i] = (uint8_t)v;
  }
  b[*n] = 0;
  return b;
}

/* "-" or hex of UTF-8 bytes -> a NUL-terminated string to free (NULL for "-"). */
static char* text(void) {
  char* w = word();
  if (!w || strcmp(w, "-") == 0) return NULL;
  size_t n;
  return (char*)unhex(w, &n);
}

static uint64_t* u64s(size_t n) {
  uint64_t* v = malloc(8 * (n ? n : 1));
  for (size_t i = 0; i < n; i++) v[i] = num();
  return v;
}

static uint32_t entries(void) {
  kvgate_stats s;
  if (kvgate_stats_get(x, &s) != KVGATE_OK) exit(4);
  return s.entries;
}

static int cmp_match(const void* a, const void* b) {
  const kvgate_match *p = a, *q = b;
  return p->slot < q->slot ? -1 : p->slot > q->slot;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  FILE* f = fopen(argv[1], "r");
  if (!f) return 2;
  char* line = NULL;
  size_t cap = 0;
  kvgate_match* matches = NULL;
  size_t max_slots = 0;
  while (getline(&line, &cap, f) > 0) {
    cur = line;
    char* op = word();
    if (!op) continue;
    int st = 0;
    switch (op[0]) {
      case 'I': {
        kvgate_options o;
        kvgate_options_init(&o);
        o.max_slots = (uint32_t)num();
        o.capacity = (uint32_t)num();
        o.approx_max_blocks = (uint32_t)num();
        o.salt = num();
        o.prompt_tokens = 256;
        o.event_blocks = 64;
        max_slots = o.max_slots;
        matches = calloc(max_slots, sizeof *matches);
        st = kvgate_create(&o, &x);
        printf("I %d\n", st);
        if (st) return 1;
        break;
      }
      case 'X': {
        size_t n;
        uint8_t* b = unhex(word(), &n);
        uint64_t seed = num();
        uint64_t h = 0;
        st = kvgate_xxh3(x, b, n, seed, &h);
        printf("X %d %llu\n", st, (unsigned long long)h);
        free(b);
        break;
      }
      case 'H': {
        kvgate_hash_opts h = {.block_size = (uint32_t)num()};
        char *lora = text(), *ns = text();
        h.lora = lora;
        h.ns = ns;
        size_t n = num();
        uint32_t* t = malloc(4 * (n ? n : 1));
        for (size_t i = 0; i < n; i++) t[i] = (uint32_t)num();
        size_t out = n + 1, blocks = 0;
        uint64_t *local = malloc(8 * out), *seq = malloc(8 * out);
        st = kvgate_hash_prompt(x, t, n, &h, local, seq, out, &blocks);
        printf("H %d %zu", st, blocks);
        for (size_t i = 0; i < blocks; i++) printf(" %llu", (unsigned long long)local[i]);
        for (size_t i = 0; i < blocks; i++) printf(" %llu", (unsigned long long)seq[i]);
        printf("\n");
        free(t), free(local), free(seq), free(lora), free(ns);
        break;
      }
      case 'O': st = kvgate_open_slot(x, (uint32_t)num()); printf("O %d =%u\n", st, entries()); break;
      case 'W': st = kvgate_remove_worker(x, (uint32_t)num()); printf("W %d =%u\n", st, entries()); break;
      case 'C': st = kvgate_clear_slot(x, (uint32_t)num()); printf("C %d =%u\n", st, entries()); break;
      case 'S': {
        uint32_t slot = (uint32_t)num();
        int hp = (int)num();
        uint64_t parent = num();
        size_t n = num();
        uint64_t *hs = malloc(8 * (n ? n : 1)), *ls = malloc(8 * (n ? n : 1));
        for (size_t i = 0; i < n; i++) hs[i] = num(), ls[i] = num();
        st = kvgate_store(x, slot, hp, parent, hs, ls, n);
        printf("S %d =%u\n", st, entries());
        free(hs), free(ls);
        break;
      }
      case 'R': {
        uint32_t slot = (uint32_t)num();
        size_t n = num();
        uint64_t* hs = u64s(n);
        uint32_t unknown = 0;
        st = kvgate_remove(x, slot, hs, n, &unknown);
        printf("R %d %u =%u\n", st, unknown, entries());
        free(hs);
        break;
      }
      case 'B': {
        size_t n;
        uint8_t* b = unhex(word(), &n);
        uint32_t records = 0;
        uint64_t at = 0;
        st = kvgate_apply_binary(x, b, n, &records, &at);
        printf("B %d %u =%u\n", st, records, entries());
        free(b);
        break;
      }
      case 'T': {
        uint32_t slot = (uint32_t)num();
        double now = real(), ttl = real();
        size_t n = num();
        uint64_t* seq = u64s(n);
        uint32_t done = 0;
        st = kvgate_record_route(x, slot, seq, n, now, ttl, &done);
        printf("T %d %u =%u\n", st, done, entries());
        free(seq);
        break;
      }
      case 'L': {
        uint32_t slot = (uint32_t)num(), cap = (uint32_t)num(), dropped = 0;
        st = kvgate_slot_capacity(x, slot, cap, &dropped);
        printf("L %d %u =%u\n", st, dropped, entries());
        break;
      }
      case 'J': {
        st = kvgate_match_jump(x, (uint32_t)num());
        printf("J %d\n", st);
        break;
      }
      case 'M': {
        size_t n = num();
        uint64_t* seq = u64s(n);
        size_t k = 0;
        st = kvgate_find_matches_by_hashes(x, seq, n, matches, max_slots, &k);
        qsort(matches, k, sizeof *matches, cmp_match);
        printf("M %d %zu", st, k);
        for (size_t i = 0; i < k; i++) printf(" %u:%u:%u", matches[i].slot, matches[i].blocks, matches[i].tree_size);
        printf("\n");
        free(seq);
        break;
      }
      case 'E': {
        uint32_t n = 0;
        st = kvgate_expire(x, real(), &n);
        printf("E %d %u =%u\n", st, n, entries());
        break;
      }
      case 'K': {
        kvgate_score_request r;
        r.isl = strtod(word(), NULL);
        r.overlap_weight = strtod(word(), NULL);
        r.temperature = strtod(word(), NULL);
        r.rand = strtod(word(), NULL);
        size_t n = num();
        kvgate_candidate* c = calloc(n ? n : 1, sizeof *c);
        double* costs = calloc(n ? n : 1, sizeof *costs);
        for (size_t i = 0; i < n; i++) {
          c[i].overlap_blocks = real(), c[i].active_prefill_tokens = real(), c[i].active_decode_blocks = real();
          c[i].active_overlap_blocks = real(), c[i].block_size = real(), c[i].tree_size = real();
        }
        uint32_t chosen = 0;
        st = kvgate_score(x, c, n, &r, costs, &chosen);
        printf("K %d %u", st, chosen);
        for (size_t i = 0; i < n; i++) {
          uint64_t bits;
          memcpy(&bits, &costs[i], 8);
          printf(" %016llx", (unsigned long long)bits);
        }
        printf("\n");
        free(c), free(costs);
        break;
      }
      case 'Q': {
        kvgate_stats s;
        st = kvgate_stats_get(x, &s);
        printf("Q %d %u %u", st, s.entries, s.ttl_entries);
        static const int shown[] = {KVGATE_C_APPLIED, KVGATE_C_PARENT_MISSING, KVGATE_C_INVALID, KVGATE_C_CAPACITY,
                                    KVGATE_C_UNKNOWN_REMOVED, KVGATE_C_EVICTED, KVGATE_C_EXPIRED, KVGATE_C_PRUNED,
                                    KVGATE_C_CAPPED};
        for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) printf(" %u", s.counters[shown[i]]);
        printf("\n");
        break;
      }
      case 'P': {
        kvgate_stats s;
        st = kvgate_stats_get(x, &s);
        printf("P %d %u %u\n", st, s.counters[KVGATE_C_MEMO_REUSED], s.counters[KVGATE_C_MEMO_HASHED]);
        break;
      }
      default:
        fprintf(stderr, "ops-driver: unknown op %s\n", op);
        return 3;
    }
  }
  free(line);
  free(matches);
  kvgate_destroy(x);
  return 0;
}
