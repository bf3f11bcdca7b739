/* Vocabulary and merge tables shared by both loaders, and the simple public accessors. */
#include <stdlib.h>
#include <string.h>
#include "../base/hash.h"
#include "../base/mem.h"
#include "tokenizer_internal.h"

static void *vocab_calloc(size_t n, size_t size) {
  void *p = xcalloc(n, size, "the tokenizer");
  return p;
}

/* ---- string -> id ---- */
static size_t str_slot(const StrIdMap *m, const char *s, size_t len) {
  size_t mask = m->cap - 1, i = (size_t)hash_bytes(HASH_SEED, s, len) & mask;
  while (m->keys[i] && !(m->lens[i] == len && memcmp(m->keys[i], s, len) == 0)) i = (i + 1) & mask;
  return i;
}

static void str_grow(StrIdMap *m) {
  StrIdMap old = *m;
  m->cap = old.cap ? old.cap * 2 : 1024;
  m->keys = vocab_calloc(m->cap, sizeof *m->keys);
  m->lens = vocab_calloc(m->cap, sizeof *m->lens);
  m->vals = vocab_calloc(m->cap, sizeof *m->vals);
  for (size_t i = 0; i < old.cap; i++) {
    if (!old.keys[i]) continue;
    size_t j = str_slot(m, old.keys[i], old.lens[i]);
    m->keys[j] = old.keys[i], m->lens[j] = old.lens[i], m->vals[j] = old.vals[i];
  }
  free(old.keys), free(old.lens), free(old.vals);
}

static void str_put(StrIdMap *m, const char *s, size_t len, int32_t v) {
  if (2 * (m->count + 1) > m->cap) str_grow(m);
  size_t i = str_slot(m, s, len);
  if (!m->keys[i]) m->count++;
  m->keys[i] = s, m->lens[i] = (uint32_t)len, m->vals[i] = v;
}

int32_t tok_lookup(const Tokenizer *t, const char *s, size_t len) {
  if (!t->vocab.cap) return -1;
  size_t i = str_slot(&t->vocab, s, len);
  return t->vocab.keys[i] ? t->vocab.vals[i] : -1;
}

/* ---- (left, right) -> rank, merged ---- */
static size_t merge_slot(const MergeMap *m, uint64_t key) {
  size_t mask = m->cap - 1, i = (size_t)(key * 0x9e3779b97f4a7c15ULL >> 17) & mask;
  while (m->keys[i] && m->keys[i] != key) i = (i + 1) & mask;
  return i;
}

static void merge_grow(MergeMap *m) {
  MergeMap old = *m;
  m->cap = old.cap ? old.cap * 2 : 1024;
  m->keys = vocab_calloc(m->cap, sizeof *m->keys);
  m->rank = vocab_calloc(m->cap, sizeof *m->rank);
  m->merged = vocab_calloc(m->cap, sizeof *m->merged);
  for (size_t i = 0; i < old.cap; i++) {
    if (!old.keys[i]) continue;
    size_t j = merge_slot(m, old.keys[i]);
    m->keys[j] = old.keys[i], m->rank[j] = old.rank[i], m->merged[j] = old.merged[i];
  }
  free(old.keys), free(old.rank), free(old.merged);
}

static uint64_t merge_key(int32_t l, int32_t r) { return ((uint64_t)(uint32_t)l << 32 | (uint32_t)r) + 1; }

int merge_lookup(const MergeMap *m, int32_t left, int32_t right, int32_t *merged) {
  if (!m->cap) return -1;
  size_t i = merge_slot(m, merge_key(left, right));
  if (!m->keys[i]) return -1;
  *merged = m->merged[i];
  return m->rank[i];
}

void tok_add_merge(Tokenizer *t, const char *left, size_t llen, const char *right, size_t rlen, int32_t rank) {
  int32_t l = tok_lookup(t, left, llen), r = tok_lookup(t, right, rlen);
  if (l < 0 || r < 0) return;
  char stack[256];
  char *cat = llen + rlen <= sizeof stack ? stack : xmalloc(llen + rlen, "a merge pair");
  memcpy(cat, left, llen);
  memcpy(cat + llen, right, rlen);
  int32_t m = tok_lookup(t, cat, llen + rlen);
  if (cat != stack) free(cat);
  if (m < 0) return;
  MergeMap *mm = &t->merges;
  if (2 * (mm->count + 1) > mm->cap) merge_grow(mm);
  uint64_t key = merge_key(l, r);
  size_t i = merge_slot(mm, key);
  if (mm->keys[i]) return; /* a repeated merge keeps its first (lowest) rank */
  mm->keys[i] = key, mm->rank[i] = rank, mm->merged[i] = m, mm->count++;
}

/* ---- tokens ---- */
Tokenizer *tok_new(void) {
  Tokenizer *t = vocab_calloc(1, sizeof *t);
  t->arena = arena_new();
  t->bos = t->eos = -1;
  return t;
}

void tok_set_vocab_size(Tokenizer *t, int n) {
  if (n <= t->vocab_size) return;
  const char **tok = vocab_calloc((size_t)n, sizeof *tok);
  uint32_t *len = vocab_calloc((size_t)n, sizeof *len);
  unsigned char *flags = vocab_calloc((size_t)n, 1);
  if (t->vocab_size) {
    memcpy(tok, t->tok, sizeof *tok * (size_t)t->vocab_size);
    memcpy(len, t->tok_len, sizeof *len * (size_t)t->vocab_size);
    memcpy(flags, t->flags, (size_t)t->vocab_size);
  }
  free(t->tok), free(t->tok_len), free(t->flags);
  t->tok = tok, t->tok_len = len, t->flags = flags, t->vocab_size = n;
}

void tok_define(Tokenizer *t, int32_t id, const char *s, size_t len, unsigned flags) {
  if (id >= t->vocab_size) {
    int n = t->vocab_size ? t->vocab_size : 256;
    while (n <= id) n *= 2;
    tok_set_vocab_size(t, n); /* trimmed to max id + 1 in tok_finish */
  }
  char *copy = arena_strndup(t->arena, s, len);
  t->tok[id] = copy, t->tok_len[id] = (uint32_t)len, t->flags[id] = (unsigned char)flags;
  str_put(&t->vocab, copy, len, id);
}

typedef struct AddedSort {
  uint32_t len;
  int32_t id;
} AddedSort;

static int cmp_added(const void *a, const void *b) {
  const AddedSort *x = a, *y = b;
  if (x->len != y->len) return x->len > y->len ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

int tok_finish(Tokenizer *t, Diag *d) {
  int n = 0;
  for (int i = 0; i < t->vocab_size; i++)
    if (t->tok[i]) n = i + 1;
  if (n == 0) {
    diag_error(d, 0, 0, "tokenizer: the vocabulary is empty");
    return 0;
  }
  t->vocab_size = n; /* the arrays may be longer; only the first n entries are used */
  for (int b = 0; b < 256; b++) {
    char c[4];
    int len = bytelevel_char((unsigned char)b, c);
    t->byte_id[b] = tok_lookup(t, c, (size_t)len);
  }
  AddedSort *a = vocab_calloc((size_t)n, sizeof *a);
  int na = 0;
  for (int i = 0; i < n; i++)
    if (t->tok[i] && (t->flags[i] & TOK_FLAG_ADDED) && t->tok_len[i] > 0) a[na].len = t->tok_len[i], a[na++].id = i;
  qsort(a, (size_t)na, sizeof *a, cmp_added);
  t->added = vocab_calloc((size_t)na, sizeof *t->added);
  for (int i = 0; i < na; i++) {
    t->added[i] = a[i].id;
    t->added_first[(unsigned char)t->tok[a[i].id][0]] = 1;
  }
  t->nadded = na;
  free(a);
  return 1;
}

void tokenizer_free(Tokenizer *t) {
  if (!t) return;
  free(t->tok), free(t->tok_len), free(t->flags), free(t->added);
  free(t->vocab.keys), free(t->vocab.lens), free(t->vocab.vals);
  free(t->merges.keys), free(t->merges.rank), free(t->merges.merged);
  free(t->chat_template);
  pre_free(t);
  arena_free(t->arena);
  free(t);
}

int tokenizer_vocab_size(const Tokenizer *t) { return t->vocab_size; }

int tokenizer_token_id(const Tokenizer *t, const char *token) { return tok_lookup(t, token, strlen(token)); }

int tokenizer_bos(const Tokenizer *t) { return t->bos; }
int tokenizer_eos(const Tokenizer *t) { return t->eos; }

int tokenizer_is_special(const Tokenizer *t, int32_t id) {
  return id >= 0 && id < t->vocab_size && (t->flags[id] & TOK_FLAG_SPECIAL) != 0;
}
