/* Byte-pair merging of one pre-tokenized piece: start from one symbol per byte (its byte-level
 * character's id) and repeatedly apply the lowest-ranked merge, leftmost first, as HF tokenizers does.
 * A binary heap of candidate pairs with lazy invalidation keeps long pieces O(n log n). */
#include <stdlib.h>
#include <string.h>
#include "tokenizer_internal.h"
#include "../base/mem.h"

typedef struct Cand {
  int32_t rank, pos; /* ordering: rank, then position */
  int32_t left, right, merged;
} Cand;

typedef struct Heap {
  Cand *v;
  int n, cap;
} Heap;

static int less(const Cand *a, const Cand *b) { return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos; }

static void heap_push(Heap *h, Cand c) {
  if (h->n == h->cap) {
    h->cap = h->cap ? h->cap * 2 : 32;
    h->v = xrealloc(h->v, (size_t)h->cap * sizeof *h->v, "the BPE merge heap");
  }
  int i = h->n++;
  while (i > 0 && less(&c, &h->v[(i - 1) / 2])) {
    h->v[i] = h->v[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->v[i] = c;
}

static Cand heap_pop(Heap *h) {
  Cand top = h->v[0], last = h->v[--h->n];
  int i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && less(&h->v[c + 1], &h->v[c])) c++;
    if (!less(&h->v[c], &last)) break;
    h->v[i] = h->v[c];
    i = c;
  }
  if (h->n > 0) h->v[i] = last;
  return top;
}

static void push_ids(int32_t **ids, int *len, int *cap, int32_t id) {
  if (*len == *cap) {
    *cap = *cap ? *cap * 2 : 64;
    *ids = xrealloc(*ids, (size_t)*cap * sizeof **ids, "the token ids");
  }
  (*ids)[(*len)++] = id;
}

static void consider(const Tokenizer *t, Heap *h, const int32_t *sym, int l, int r) {
  if (l < 0 || r < 0 || sym[l] < 0 || sym[r] < 0) return;
  int32_t merged;
  int rank = merge_lookup(&t->merges, sym[l], sym[r], &merged);
  if (rank >= 0) heap_push(h, (Cand){rank, l, sym[l], sym[r], merged});
}

/* With ignore_merges, a piece whose byte-level form is a whole token is that token. */
static int32_t whole_piece_id(const Tokenizer *t, const char *s, size_t n) {
  char stack[512];
  char *buf = 2 * n <= sizeof stack ? stack : xmalloc(2 * n + 1, "a BPE word");
  buf[0] = 0; /* n > 0 always; this only quiets -Wmaybe-uninitialized */
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += (size_t)bytelevel_char((unsigned char)s[i], buf + k);
  int32_t id = tok_lookup(t, buf, k);
  if (buf != stack) free(buf);
  return id;
}

void bpe_encode_piece(const Tokenizer *t, const char *s, size_t n, int32_t **ids, int *len, int *cap) {
  if (t->ignore_merges) {
    int32_t id = whole_piece_id(t, s, n);
    if (id >= 0) {
      push_ids(ids, len, cap, id);
      return;
    }
  }
  int32_t *sym = xmalloc(n * sizeof *sym, "a BPE word");
  int *prev = xmalloc(n * sizeof *prev, "a BPE word"), *next = xmalloc(n * sizeof *next, "a BPE word");
  for (size_t i = 0; i < n; i++) {
    sym[i] = t->byte_id[(unsigned char)s[i]]; /* -1 (no such token): never merges, emits nothing, as HF without unk */
    prev[i] = (int)i - 1;
    next[i] = i + 1 < n ? (int)i + 1 : -1;
  }
  Heap h = {0};
  for (size_t i = 0; i + 1 < n; i++) consider(t, &h, sym, (int)i, (int)i + 1);
  while (h.n > 0) {
    Cand c = heap_pop(&h);
    int l = c.pos, r = next[l];
    /* Stale when either side changed since the candidate was pushed. */
    if (sym[l] != c.left || r < 0 || sym[r] != c.right) continue;
    sym[l] = c.merged;
    sym[r] = -2; /* dead */
    next[l] = next[r];
    if (next[r] >= 0) prev[next[r]] = l;
    consider(t, &h, sym, prev[l], l);
    consider(t, &h, sym, l, next[l]);
  }
  for (int i = 0; i >= 0 && n > 0; i = next[i])
    if (sym[i] >= 0) push_ids(ids, len, cap, sym[i]);
  free(h.v), free(sym), free(prev), free(next);
}
