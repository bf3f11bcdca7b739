/* The paged KV block pool (kv_blocks.h): per-block state, two intrusive doubly linked lists (free, LRU of
 * cached blocks) and a chained hash table of registered blocks whose entries are the blocks themselves. */
#include "kv_blocks.h"
#include <stdlib.h>
#include <string.h>
#include "../base/mem.h"

enum { BLOCK_FREE, BLOCK_HELD, BLOCK_CACHED };

typedef struct Block {
  int ref, state;
  int prev, next; /* links in the free list or the LRU, -1 at the ends */
  int hnext;      /* next block in the same hash bucket, -1 at the end */
  uint64_t hash, parent_hash;
  /* Registration identity: serial != 0 while registered (unique over the pool's life, never reused);
   * parent_serial is the parent's serial when registered (0 for a first block). Matching the parent's
   * serial, not its hash, makes a chain match exact. */
  uint64_t serial, parent_serial;
} Block;

typedef struct List {
  int head, tail, count;
} List;

struct KvBlockPool {
  int nblocks, block_size;
  Block *b;
  int32_t *tokens; /* block_size per block: what a registered block was registered with */
  int *bucket;     /* nbuckets heads, -1 when empty */
  int nbuckets;    /* a power of two */
  List free, lru;
  uint64_t next_serial;
  KvHashFn hash;
  KvBlockStats st;
};

static uint64_t fmix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

uint64_t kv_hash_default(uint64_t parent, const int32_t *tokens, int n) {
  uint64_t h = fmix64(parent ^ 0x9e3779b97f4a7c15ULL);
  for (int i = 0; i < n; i++) h = fmix64(h + 0x9e3779b97f4a7c15ULL * ((uint64_t)(uint32_t)tokens[i] + 1));
  return fmix64(h ^ (uint64_t)n);
}

static void list_push_tail(KvBlockPool *p, List *l, int id) {
  p->b[id].prev = l->tail;
  p->b[id].next = -1;
  if (l->tail >= 0) p->b[l->tail].next = id;
  else l->head = id;
  l->tail = id;
  l->count++;
}

static void list_remove(KvBlockPool *p, List *l, int id) {
  Block *x = &p->b[id];
  if (x->prev >= 0) p->b[x->prev].next = x->next;
  else l->head = x->next;
  if (x->next >= 0) p->b[x->next].prev = x->prev;
  else l->tail = x->prev;
  x->prev = x->next = -1;
  l->count--;
}

KvBlockPool *kv_blocks_new(int nblocks, int block_size, Diag *d) {
  if (nblocks < 1 || block_size < 1) {
    diag_error(d, 0, 0, "KV block pool: nblocks (%d) and block_size (%d) must be at least 1", nblocks, block_size);
    return NULL;
  }
  if ((long long)nblocks * block_size > (1LL << 31) - 1) {
    diag_error(d, 0, 0, "KV block pool: %d blocks of %d tokens exceed 2^31 slots", nblocks, block_size);
    return NULL;
  }
  KvBlockPool *p = mem_calloc(d, 1, sizeof *p, "KV block pool");
  if (!p) return NULL;
  p->nblocks = nblocks;
  p->block_size = block_size;
  p->nbuckets = 1;
  while (p->nbuckets < nblocks) p->nbuckets *= 2;
  p->b = mem_calloc(d, (size_t)nblocks, sizeof *p->b, "KV blocks");
  p->tokens = p->b ? mem_calloc(d, (size_t)nblocks * (size_t)block_size, sizeof *p->tokens, "KV block tokens") : 0;
  p->bucket = p->tokens ? mem_alloc(d, (size_t)p->nbuckets * sizeof *p->bucket, "KV prefix hash table") : 0;
  if (!p->bucket) {
    kv_blocks_free(p);
    return NULL;
  }
  for (int i = 0; i < p->nbuckets; i++) p->bucket[i] = -1;
  p->free = p->lru = (List){-1, -1, 0};
  for (int i = 0; i < nblocks; i++) {
    p->b[i].hnext = -1;
    list_push_tail(p, &p->free, i);
  }
  p->next_serial = 1;
  p->hash = kv_hash_default;
  p->st.total = p->st.free = nblocks;
  return p;
}

void kv_blocks_free(KvBlockPool *p) {
  if (!p) return;
  free(p->b);
  free(p->tokens);
  free(p->bucket);
  free(p);
}

int kv_blocks_nblocks(const KvBlockPool *p) { return p->nblocks; }
int kv_blocks_block_size(const KvBlockPool *p) { return p->block_size; }

int kv_blocks_set_hash(KvBlockPool *p, KvHashFn fn) {
  if (p->st.registered) return -1;
  p->hash = fn ? fn : kv_hash_default;
  return 0;
}

static int in_range(const KvBlockPool *p, int id) { return id >= 0 && id < p->nblocks; }
int kv_blocks_refcount(const KvBlockPool *p, int id) { return in_range(p, id) ? p->b[id].ref : 0; }
int kv_blocks_is_registered(const KvBlockPool *p, int id) { return in_range(p, id) && p->b[id].serial != 0; }
const int32_t *kv_blocks_tokens(const KvBlockPool *p, int id) {
  return kv_blocks_is_registered(p, id) ? p->tokens + (size_t)id * (size_t)p->block_size : NULL;
}

static void unregister(KvBlockPool *p, int id) {
  int *at = &p->bucket[p->b[id].hash & (uint64_t)(p->nbuckets - 1)];
  while (*at != id) at = &p->b[*at].hnext;
  *at = p->b[id].hnext;
  p->b[id].hnext = -1;
  p->b[id].serial = p->b[id].parent_serial = 0;
  p->st.registered--;
}

/* Takes one more reference on a registered block found by a lookup (it may be held or cached). */
static void take(KvBlockPool *p, int id) {
  Block *x = &p->b[id];
  if (x->state == BLOCK_CACHED) {
    list_remove(p, &p->lru, id);
    x->state = BLOCK_HELD;
    p->st.cached--;
    p->st.held++;
  }
  x->ref++;
}

int kv_blocks_alloc(KvBlockPool *p) {
  int id = p->free.head;
  if (id >= 0) {
    list_remove(p, &p->free, id);
    p->st.free--;
  } else if ((id = p->lru.head) >= 0) {
    list_remove(p, &p->lru, id);
    unregister(p, id);
    p->st.cached--;
    p->st.evictions++;
  } else {
    return -1;
  }
  p->b[id].state = BLOCK_HELD;
  p->b[id].ref = 1;
  p->st.held++;
  return id;
}

int kv_blocks_release(KvBlockPool *p, int id, Diag *d) {
  if (!in_range(p, id)) {
    diag_error(d, 0, 0, "KV block pool: release of block %d, not in 0..%d", id, p->nblocks - 1);
    return -1;
  }
  Block *x = &p->b[id];
  if (x->state != BLOCK_HELD || x->ref < 1) {
    diag_error(d, 0, 0, "KV block pool: release of block %d, which is not held (%s): a double release?", id,
               x->state == BLOCK_FREE ? "free" : "cached");
    return -1;
  }
  if (--x->ref > 0) return 0;
  p->st.held--;
  if (x->serial) {
    x->state = BLOCK_CACHED;
    list_push_tail(p, &p->lru, id);
    p->st.cached++;
  } else {
    x->state = BLOCK_FREE;
    list_push_tail(p, &p->free, id);
    p->st.free++;
  }
  return 0;
}

/* The registered block at chain position (parent_serial, tokens) with this hash, or -1. */
static int find(const KvBlockPool *p, uint64_t hash, uint64_t parent_serial, const int32_t *tokens) {
  size_t bytes = (size_t)p->block_size * sizeof *tokens;
  for (int id = p->bucket[hash & (uint64_t)(p->nbuckets - 1)]; id >= 0; id = p->b[id].hnext) {
    const Block *x = &p->b[id];
    if (x->hash == hash && x->parent_serial == parent_serial &&
        !memcmp(p->tokens + (size_t)id * (size_t)p->block_size, tokens, bytes))
      return id;
  }
  return -1;
}

int kv_blocks_register(KvBlockPool *p, int id, int parent, const int32_t *tokens, Diag *d) {
  if (!in_range(p, id) || p->b[id].state != BLOCK_HELD) {
    diag_error(d, 0, 0, "KV block pool: register of block %d, which is not held", id);
    return -1;
  }
  if (p->b[id].serial) {
    diag_error(d, 0, 0, "KV block pool: block %d is already registered", id);
    return -1;
  }
  if (parent != -1 && !kv_blocks_is_registered(p, parent)) {
    diag_error(d, 0, 0, "KV block pool: register of block %d after block %d, which is not registered", id, parent);
    return -1;
  }
  uint64_t parent_hash = parent < 0 ? KV_HASH_ROOT : p->b[parent].hash;
  uint64_t parent_serial = parent < 0 ? 0 : p->b[parent].serial;
  uint64_t h = p->hash(parent_hash, tokens, p->block_size);
  int same = find(p, h, parent_serial, tokens);
  if (same >= 0) {
    take(p, same);
    if (kv_blocks_release(p, id, d)) return -1;
    return same;
  }
  Block *x = &p->b[id];
  x->hash = h;
  x->parent_hash = parent_hash;
  x->parent_serial = parent_serial;
  x->serial = p->next_serial++;
  memcpy(p->tokens + (size_t)id * (size_t)p->block_size, tokens, (size_t)p->block_size * sizeof *tokens);
  int *head = &p->bucket[h & (uint64_t)(p->nbuckets - 1)];
  x->hnext = *head;
  *head = id;
  p->st.registered++;
  return id;
}

int kv_blocks_lookup(KvBlockPool *p, const int32_t *tokens, int n, int max_blocks, int32_t *out) {
  int want = n / p->block_size;
  if (max_blocks < want) want = max_blocks;
  if (want < 0) want = 0;
  uint64_t parent_hash = KV_HASH_ROOT, parent_serial = 0;
  int got = 0;
  while (got < want) {
    const int32_t *t = tokens + (size_t)got * (size_t)p->block_size;
    uint64_t h = p->hash(parent_hash, t, p->block_size);
    int id = find(p, h, parent_serial, t);
    if (id < 0) break;
    take(p, id);
    out[got++] = id;
    parent_hash = h;
    parent_serial = p->b[id].serial;
  }
  p->st.lookups++;
  p->st.lookup_blocks += want;
  p->st.hit_blocks += got;
  p->st.hit_tokens += (long)got * p->block_size;
  p->st.miss_blocks += want - got;
  return got;
}

void kv_blocks_stats(const KvBlockPool *p, KvBlockStats *out) { *out = p->st; }

/* Walks one list: links both ways, no cycle, every member in the expected state. */
static int check_list(const KvBlockPool *p, const List *l, int state, const char *name, Diag *d) {
  int n = 0, prev = -1;
  for (int id = l->head; id >= 0; id = p->b[id].next) {
    if (!in_range(p, id) || n >= p->nblocks) {
      diag_error(d, 0, 0, "KV block pool: %s list is corrupt (bad id %d or a cycle)", name, id);
      return -1;
    }
    if (p->b[id].state != state || p->b[id].prev != prev) {
      diag_error(d, 0, 0, "KV block pool: block %d on the %s list has a wrong state or back link", id, name);
      return -1;
    }
    prev = id;
    n++;
  }
  if (prev != l->tail || n != l->count) {
    diag_error(d, 0, 0, "KV block pool: %s list holds %d blocks, its count says %d", name, n, l->count);
    return -1;
  }
  return 0;
}

static int check_hash_table(const KvBlockPool *p, Diag *d) {
  int n = 0;
  size_t bytes = (size_t)p->block_size * sizeof(int32_t);
  for (int bkt = 0; bkt < p->nbuckets; bkt++) {
    int len = 0;
    for (int id = p->bucket[bkt]; id >= 0; id = p->b[id].hnext) {
      if (!in_range(p, id) || ++len > p->nblocks) {
        diag_error(d, 0, 0, "KV block pool: hash bucket %d is corrupt (bad id %d or a cycle)", bkt, id);
        return -1;
      }
      const Block *x = &p->b[id];
      const int32_t *t = p->tokens + (size_t)id * (size_t)p->block_size;
      if (!x->serial || x->state == BLOCK_FREE || (x->hash & (uint64_t)(p->nbuckets - 1)) != (uint64_t)bkt ||
          p->hash(x->parent_hash, t, p->block_size) != x->hash) {
        diag_error(d, 0, 0, "KV block pool: block %d in hash bucket %d is not registered there as it says", id, bkt);
        return -1;
      }
      for (int o = x->hnext; o >= 0; o = p->b[o].hnext)
        if (p->b[o].hash == x->hash && p->b[o].parent_serial == x->parent_serial &&
            !memcmp(p->tokens + (size_t)o * (size_t)p->block_size, t, bytes)) {
          diag_error(d, 0, 0, "KV block pool: blocks %d and %d are registered at the same chain position", id, o);
          return -1;
        }
      n++;
    }
  }
  if (n != p->st.registered) {
    diag_error(d, 0, 0, "KV block pool: %d blocks in the hash table, %d registered", n, p->st.registered);
    return -1;
  }
  return 0;
}

static int check_holders(const KvBlockPool *p, const int32_t *const *tables, const int *lens, int ntables, Diag *d) {
  int *count = mem_calloc(d, (size_t)p->nblocks, sizeof *count, "KV block check");
  if (!count) return -1;
  int rc = 0;
  for (int t = 0; t < ntables && !rc; t++)
    for (int i = 0; i < lens[t]; i++) {
      int id = tables[t][i];
      if (!in_range(p, id)) {
        diag_error(d, 0, 0, "KV block pool: block table %d lists block %d, not in 0..%d", t, id, p->nblocks - 1);
        rc = -1;
        break;
      }
      count[id]++;
    }
  for (int id = 0; id < p->nblocks && !rc; id++)
    if (count[id] != p->b[id].ref) {
      diag_error(d, 0, 0, "KV block pool: block %d has refcount %d but %d holders", id, p->b[id].ref, count[id]);
      rc = -1;
    }
  free(count);
  return rc;
}

int kv_blocks_check(const KvBlockPool *p, const int32_t *const *tables, const int *lens, int ntables, Diag *d) {
  int nstate[3] = {0, 0, 0}, nreg = 0;
  for (int id = 0; id < p->nblocks; id++) {
    const Block *x = &p->b[id];
    int ok = x->state == BLOCK_FREE     ? x->ref == 0 && !x->serial
             : x->state == BLOCK_HELD   ? x->ref > 0
             : x->state == BLOCK_CACHED ? x->ref == 0 && x->serial
                                        : 0;
    if (!ok) {
      diag_error(d, 0, 0, "KV block pool: block %d has state %d, refcount %d, registered %d", id, x->state, x->ref,
                 x->serial != 0);
      return -1;
    }
    nstate[x->state]++;
    nreg += x->serial != 0;
  }
  if (nstate[BLOCK_FREE] != p->st.free || nstate[BLOCK_HELD] != p->st.held || nstate[BLOCK_CACHED] != p->st.cached ||
      nreg != p->st.registered || p->st.free + p->st.held + p->st.cached != p->st.total) {
    diag_error(d, 0, 0, "KV block pool: counters (free %d, held %d, cached %d) disagree with the blocks (%d, %d, %d)",
               p->st.free, p->st.held, p->st.cached, nstate[BLOCK_FREE], nstate[BLOCK_HELD], nstate[BLOCK_CACHED]);
    return -1;
  }
  if (check_list(p, &p->free, BLOCK_FREE, "free", d) || check_list(p, &p->lru, BLOCK_CACHED, "LRU", d)) return -1;
  if (p->free.count != nstate[BLOCK_FREE] || p->lru.count != nstate[BLOCK_CACHED]) {
    diag_error(d, 0, 0, "KV block pool: a free or cached block is missing from its list");
    return -1;
  }
  if (check_hash_table(p, d)) return -1;
  return tables ? check_holders(p, tables, lens, ntables, d) : 0;
}
