/* Pre-tokenization: the text between added tokens is cut into pieces by a sequence of steps (HF
 * tokenizers' Split / Digits / ByteLevel), each applied to every piece the previous step produced.
 * BPE then runs on each final piece separately, so merges never cross a piece boundary. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include "tokenizer_internal.h"
#include "../base/mem.h"

const char *const TOK_PATTERN_GPT2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char *const TOK_PATTERN_LLAMA3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
const char *const TOK_PATTERN_QWEN2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
const char *const TOK_PATTERN_DIGITS = "\\p{N}"; /* Digits(individual_digits=true) isolates each digit */

static pcre2_code *compile(const char *pattern, int literal, Diag *d) {
  int err;
  PCRE2_SIZE off;
  /* MATCH_INVALID_UTF: arbitrary bytes are legal input; invalid sequences simply never match. */
  uint32_t opts =
      PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP); /* UCP is not allowed with LITERAL */
  pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &err, &off, NULL);
  if (!re) {
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(err, msg, sizeof msg);
    diag_error(d, 0, 0, "pre-tokenizer regex at offset %zu: %s", (size_t)off, (const char *)msg);
    return NULL;
  }
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* a speed-up only; the interpreter is used if it fails */
  return re;
}

static int add_step(Tokenizer *t, PreStep s, Diag *d) {
  if (t->nsteps >= (int)(sizeof t->steps / sizeof t->steps[0])) {
    if (s.re) pcre2_code_free(s.re);
    diag_error(d, 0, 0, "pre-tokenizer: more than %d steps", (int)(sizeof t->steps / sizeof t->steps[0]));
    return 0;
  }
  t->steps[t->nsteps++] = s;
  return 1;
}

int pre_add_split(Tokenizer *t, const char *pattern, int literal, SplitBehavior b, int invert, Diag *d) {
  pcre2_code *re = compile(pattern, literal, d);
  if (!re) return 0;
  return add_step(t, (PreStep){.kind = PRE_SPLIT, .re = re, .behavior = b, .invert = invert}, d);
}

int pre_add_bytelevel(Tokenizer *t, int use_regex, int add_prefix_space, Diag *d) {
  pcre2_code *re = NULL;
  if (use_regex && !(re = compile(TOK_PATTERN_GPT2, 0, d))) return 0;
  return add_step(t, (PreStep){.kind = PRE_BYTELEVEL, .re = re, .add_prefix_space = add_prefix_space}, d);
}

void pre_free(Tokenizer *t) {
  for (int i = 0; i < t->nsteps; i++)
    if (t->steps[i].re) pcre2_code_free(t->steps[i].re);
  t->nsteps = 0;
}

typedef struct Span {
  size_t start, end;
  int is_match;
} Span;

typedef struct Spans {
  Span *v;
  size_t n, cap;
} Spans;

static void push(Spans *s, size_t start, size_t end, int is_match) {
  if (start >= end) return;
  if (s->n == s->cap) {
    s->cap = s->cap ? s->cap * 2 : 16;
    s->v = xrealloc(s->v, s->cap * sizeof *s->v, "the pre-tokenized pieces");
  }
  s->v[s->n++] = (Span){start, end, is_match};
}

static size_t utf8_len(unsigned char c) { return c < 0xc0 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4; }

/* Matches and the gaps between them, in order, covering s. */
static int find_spans(const pcre2_code *re, const char *s, size_t n, Spans *out, Diag *d) {
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
  if (!md) {
    diag_error(d, 0, 0, "out of memory: the pre-tokenizer's match data");
    return 0;
  }
  size_t pos = 0, gap = 0;
  int ok = 1;
  while (pos <= n) {
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, 0, md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[160];
      pcre2_get_error_message(rc, msg, sizeof msg);
      diag_error(d, 0, 0, "pre-tokenizer regex failed at byte %zu: %s", pos, (const char *)msg);
      ok = 0;
      break;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    if (ov[1] == ov[0]) { /* empty matches split nothing; step over one character */
      if (ov[0] >= n) break;
      pos = ov[0] + utf8_len((unsigned char)s[ov[0]]);
      if (pos > n) pos = n;
      continue;
    }
    push(out, gap, ov[0], 0);
    push(out, ov[0], ov[1], 1);
    gap = pos = ov[1];
  }
  push(out, gap, n, 0);
  pcre2_match_data_free(md);
  return ok;
}

/* Applies a Split behaviour to the spans, in place: the result's spans are the pieces. */
static void apply_behavior(Spans *sp, SplitBehavior b, int invert) {
  size_t k = 0;
  int prev_match = 0;
  if (b == SPLIT_MERGED_NEXT) {
    /* Walk backwards: a match joins the piece after it unless that piece is itself a match. */
    Span *v = sp->v;
    size_t w = sp->n;
    for (size_t i = sp->n; i-- > 0;) {
      int m = v[i].is_match ^ invert;
      if (m && !prev_match && w < sp->n) v[w].start = v[i].start;
      else v[--w] = (Span){v[i].start, v[i].end, m};
      prev_match = m;
    }
    memmove(v, v + w, (sp->n - w) * sizeof *v);
    sp->n -= w;
    return;
  }
  for (size_t i = 0; i < sp->n; i++) {
    Span s = sp->v[i];
    int m = s.is_match ^ invert;
    switch (b) {
    case SPLIT_ISOLATED: sp->v[k++] = s; break;
    case SPLIT_REMOVED:
      if (!m) sp->v[k++] = s;
      break;
    case SPLIT_MERGED_PREV:
      if (m && !prev_match && k > 0) sp->v[k - 1].end = s.end;
      else sp->v[k++] = s;
      break;
    case SPLIT_CONTIGUOUS:
      if (m && prev_match && k > 0) sp->v[k - 1].end = s.end;
      else sp->v[k++] = s;
      break;
    case SPLIT_MERGED_NEXT: break;
    }
    prev_match = m;
  }
  sp->n = k;
}

static int run_steps(const Tokenizer *t, int k, const char *s, size_t n, PieceFn fn, void *ctx, Diag *d) {
  if (n == 0) return 1;
  if (k == t->nsteps) {
    fn(t, s, n, ctx);
    return 1;
  }
  const PreStep *st = &t->steps[k];
  char *owned = NULL;
  if (st->kind == PRE_BYTELEVEL && st->add_prefix_space && s[0] != ' ') {
    owned = xmalloc(n + 1, "the normalized text");
    owned[0] = ' ';
    memcpy(owned + 1, s, n);
    s = owned, n = n + 1;
  }
  int ok = 1;
  if (!st->re) {
    ok = run_steps(t, k + 1, s, n, fn, ctx, d);
  } else {
    Spans sp = {0};
    ok = find_spans(st->re, s, n, &sp, d);
    if (ok) apply_behavior(&sp, st->kind == PRE_SPLIT ? st->behavior : SPLIT_ISOLATED, st->invert);
    for (size_t i = 0; ok && i < sp.n; i++)
      ok = run_steps(t, k + 1, s + sp.v[i].start, sp.v[i].end - sp.v[i].start, fn, ctx, d);
    free(sp.v);
  }
  free(owned);
  return ok;
}

int pre_tokenize(const Tokenizer *t, const char *s, size_t n, PieceFn fn, void *ctx, Diag *d) {
  return run_steps(t, 0, s, n, fn, ctx, d);
}
