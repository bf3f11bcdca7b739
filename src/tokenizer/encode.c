/* tokenizer_encode: added/special tokens are cut out of the raw text first (longest match at the
 * leftmost position); the text between them is normalized (if the tokenizer says so), pre-tokenized
 * and BPE-encoded. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include "tokenizer_internal.h"
#include "../base/mem.h"

typedef struct IdVec {
  int32_t *v;
  int n, cap;
} IdVec;

static void on_piece(const Tokenizer *t, const char *s, size_t n, void *ctx) {
  IdVec *out = ctx;
  bpe_encode_piece(t, s, n, &out->v, &out->n, &out->cap);
}

static int32_t added_at(const Tokenizer *t, const char *s, size_t n, size_t *len) {
  if (!t->added_first[(unsigned char)*s]) return -1;
  for (int i = 0; i < t->nadded; i++) {
    int32_t id = t->added[i];
    size_t l = t->tok_len[id];
    if (l <= n && memcmp(s, t->tok[id], l) == 0) {
      *len = l;
      return id;
    }
  }
  return -1;
}

static int encode_segment(const Tokenizer *t, const char *s, size_t n, IdVec *out, Diag *d) {
  if (n == 0) return 1;
  utf8proc_uint8_t *norm = NULL;
  if (t->norm != NORM_NONE) {
    int opts = UTF8PROC_STABLE | (t->norm == NORM_NFC || t->norm == NORM_NFKC ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) |
               (t->norm == NORM_NFKC || t->norm == NORM_NFKD ? UTF8PROC_COMPAT : 0);
    utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &norm, (utf8proc_option_t)opts);
    if (m == UTF8PROC_ERROR_NOMEM) {
      diag_error(d, 0, 0, "out of memory: %zu bytes of text to normalize", n);
      return 0;
    }
    if (m >= 0) s = (const char *)norm, n = (size_t)m; /* invalid UTF-8 is encoded as it is */
  }
  int ok = pre_tokenize(t, s, n, on_piece, out, d);
  free(norm);
  return ok;
}

int tokenizer_encode(const Tokenizer *t, const char *text, int add_bos, int32_t **ids, int *n, Diag *d) {
  IdVec out = {0};
  *ids = NULL, *n = 0;
  if (!text) {
    diag_error(d, 0, 0, "encode: text is NULL");
    return 0;
  }
  if (add_bos && t->add_bos && t->bos >= 0) {
    out.v = xmalloc(64 * sizeof *out.v, "the token ids");
    out.cap = 64;
    out.v[out.n++] = t->bos;
  }
  size_t len = strlen(text), seg = 0, i = 0;
  int ok = 1;
  while (ok && i < len) {
    size_t alen;
    int32_t id = t->nadded ? added_at(t, text + i, len - i, &alen) : -1;
    if (id < 0) {
      i++;
      continue;
    }
    ok = encode_segment(t, text + seg, i - seg, &out, d);
    if (out.n == out.cap) {
      out.cap = out.cap ? out.cap * 2 : 64;
      out.v = xrealloc(out.v, (size_t)out.cap * sizeof *out.v, "the token ids");
    }
    out.v[out.n++] = id;
    i += alen;
    seg = i;
  }
  if (ok) ok = encode_segment(t, text + seg, len - seg, &out, d);
  if (!ok) {
    free(out.v);
    return 0;
  }
  if (!out.v) out.v = xmalloc(sizeof *out.v, "the token ids"); /* callers always get something to free */
  *ids = out.v, *n = out.n;
  return 1;
}
