/* The paged KV block pool: nblocks blocks of block_size token positions each, with reference counts and a
 * prefix cache. It holds no K/V itself: it decides which block ids (0..nblocks-1) a sequence's positions
 * live in; the engine owns the memory (slot = block * block_size + position % block_size).
 *
 * A block is in exactly one state:
 *  - free:   refcount 0, not registered; on the free list.
 *  - held:   refcount > 0 (one per holder: each block table that lists it). May be registered.
 *  - cached: refcount 0 but registered in the prefix cache; on the LRU list, reusable by a later identical
 *            prefix until allocation evicts it (least recently released first).
 *
 * Prefix cache: a full block (all block_size positions computed) is registered under its chain position:
 * its parent (the registered block before it in the sequence, or the root for block 0) and its tokens. The
 * hash chains hash(parent's hash, tokens) and only picks the bucket; a match compares the parent's
 * registration and the tokens exactly, so a hash collision never shares a block whose token run from
 * position 0 differs. Not thread-safe: one caller (the scheduler) at a time. */
#ifndef LATHE_KV_BLOCKS_H
#define LATHE_KV_BLOCKS_H
#include <stdint.h>
#include "../base/diag.h"

typedef struct KvBlockPool KvBlockPool;

/* The chain hash of one full block: parent is the previous block's hash (KV_HASH_ROOT for block 0). */
typedef uint64_t (*KvHashFn)(uint64_t parent, const int32_t *tokens, int n);
#define KV_HASH_ROOT 0x6c617468652d6b76ULL
uint64_t kv_hash_default(uint64_t parent, const int32_t *tokens, int n);

typedef struct KvBlockStats {
  int total, free, held, cached; /* blocks by state; free + held + cached == total */
  int registered;                /* held or cached blocks in the prefix cache */
  long lookups;                  /* kv_blocks_lookup calls */
  long lookup_blocks;            /* full blocks those lookups asked for */
  long hit_blocks, hit_tokens;   /* ... and found (hit_tokens = hit_blocks * block_size) */
  long miss_blocks;              /* lookup_blocks - hit_blocks */
  long evictions;                /* cached blocks unregistered to satisfy an allocation */
} KvBlockStats;

/* nblocks >= 1, block_size >= 1; NULL with an error in d otherwise or when memory runs out. */
KvBlockPool *kv_blocks_new(int nblocks, int block_size, Diag *d);
void kv_blocks_free(KvBlockPool *p);
int kv_blocks_nblocks(const KvBlockPool *p);
int kv_blocks_block_size(const KvBlockPool *p);
/* Test hook: replaces the hash (e.g. by one that collides). Only while nothing is registered: -1 otherwise. */
int kv_blocks_set_hash(KvBlockPool *p, KvHashFn fn);

/* A block with refcount 1: a free one first, else the least recently used cached one (unregistered).
 * -1 when every block is held. */
int kv_blocks_alloc(KvBlockPool *p);
/* Drops one reference. At 0 a registered block becomes cached (LRU tail), any other free. A block that is
 * not held (a double release) or an id out of range is refused: -1 and an error in d; 0 on success. */
int kv_blocks_release(KvBlockPool *p, int id, Diag *d);
int kv_blocks_refcount(const KvBlockPool *p, int id);
int kv_blocks_is_registered(const KvBlockPool *p, int id);
/* The block_size tokens a registered block was registered with; NULL when it is not registered. */
const int32_t *kv_blocks_tokens(const KvBlockPool *p, int id);

/* Registers held block id, whose block_size positions are computed and hold tokens, as the chain's next
 * block after parent (a registered block, or -1 for the sequence's first block). When an identical chain
 * position is already registered in another block E, E is taken instead (refcount + 1, off the LRU), id is
 * released, and E is returned: the caller puts E in its block table in id's place. Returns id or E; -1
 * with an error in d when id is not held or already registered, or parent is not registered. */
int kv_blocks_register(KvBlockPool *p, int id, int parent, const int32_t *tokens, Diag *d);

/* The longest chain of registered blocks matching tokens[0..n) block by block from position 0, at most
 * max_blocks (and n / block_size) blocks. Each found block is taken (refcount + 1, off the LRU) and written
 * to out[]; returns how many. */
int kv_blocks_lookup(KvBlockPool *p, const int32_t *tokens, int n, int max_blocks, int32_t *out);

void kv_blocks_stats(const KvBlockPool *p, KvBlockStats *out);

/* Verifies every invariant: each block in one state, refcounts, the free and LRU lists (links, counts, no
 * cycle), the hash table (every registered block once in its right bucket with its hash recomputed from
 * its tokens, no two identical chain positions, nothing unregistered in it) and the counters. When
 * tables is not NULL, the caller lists every holder: ntables block tables (tables[i] of lens[i] ids), and
 * each block's refcount must equal the number of times it appears in them. Returns 0, or -1 with the first
 * violation in d. */
int kv_blocks_check(const KvBlockPool *p, const int32_t *const *tables, const int *lens, int ntables, Diag *d);
#endif
