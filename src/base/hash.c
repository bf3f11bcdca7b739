#include "hash.h"
#include <string.h>

uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t hash_str(uint64_t h, const char *s) { return hash_bytes(h, s, strlen(s) + 1); }

uint64_t hash_u64(uint64_t h, uint64_t v) { return hash_bytes(h, &v, sizeof v); }
