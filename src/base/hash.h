/* 64-bit FNV-1a: content keys for the compile caches and hash-consing. Not cryptographic. */
#ifndef LATHE_HASH_H
#define LATHE_HASH_H
#include <stddef.h>
#include <stdint.h>

#define HASH_SEED 0xcbf29ce484222325ULL
uint64_t hash_bytes(uint64_t h, const void *p, size_t n);
uint64_t hash_str(uint64_t h, const char *s);
uint64_t hash_u64(uint64_t h, uint64_t v);
#endif
