/* Decoding: each token's bytes (byte-level characters mapped back; added tokens verbatim) go through
 * a small UTF-8 assembler, so a character whose bytes are split across tokens is emitted whole, once
 * complete. Invalid bytes become U+FFFD, one per maximal invalid subpart, as String::from_utf8_lossy
 * (and so HF tokenizers' decode) does. */
#include "tokenizer_internal.h"

static const char REPLACEMENT[] = "\xef\xbf\xbd";

static int seq_len(unsigned char b) {
  if (b >= 0xc2 && b <= 0xdf) return 2;
  if (b >= 0xe0 && b <= 0xef) return 3;
  if (b >= 0xf0 && b <= 0xf4) return 4;
  return 0; /* ASCII is handled separately; the rest can never start a character */
}

/* Whether b may follow the bytes in s->pending (the second byte has lead-specific ranges). */
static int continues(const DecodeState *s, unsigned char b) {
  if ((b & 0xc0) != 0x80) return 0;
  if (s->npending != 1) return 1;
  switch (s->pending[0]) {
  case 0xe0: return b >= 0xa0;
  case 0xed: return b <= 0x9f;
  case 0xf0: return b >= 0x90;
  case 0xf4: return b <= 0x8f;
  default: return 1;
  }
}

static void put_bytes(StrBuf *out, const unsigned char *p, int n) {
  for (int i = 0; i < n; i++) sb_putc(out, (char)p[i]);
}

static void feed(DecodeState *s, unsigned char b, StrBuf *out) {
  if (s->npending > 0) {
    if (continues(s, b)) {
      s->pending[s->npending++] = b;
      if (s->npending == seq_len(s->pending[0])) {
        put_bytes(out, s->pending, s->npending);
        s->npending = 0;
      }
      return;
    }
    sb_puts(out, REPLACEMENT); /* the incomplete sequence; b starts afresh */
    s->npending = 0;
  }
  if (b < 0x80) sb_putc(out, (char)b);
  else if (seq_len(b)) s->pending[s->npending++] = b;
  else sb_puts(out, REPLACEMENT);
}

/* Decodes one UTF-8 character of a token string; returns its length (1 for an invalid byte). */
static int next_char(const unsigned char *p, size_t n, uint32_t *cp) {
  int len = p[0] < 0x80 ? 1 : seq_len(p[0]);
  if (len == 0 || (size_t)len > n) {
    *cp = 0xffffffffu;
    return 1;
  }
  uint32_t c = len == 1 ? p[0] : (uint32_t)(p[0] & (0xff >> (len + 1)));
  for (int i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80) {
      *cp = 0xffffffffu;
      return 1;
    }
    c = c << 6 | (p[i] & 0x3f);
  }
  *cp = c;
  return len;
}

void tokenizer_decode_step(const Tokenizer *t, DecodeState *s, int32_t id, int skip_special, StrBuf *out) {
  if (id < 0 || id >= t->vocab_size || !t->tok[id]) return;
  if (skip_special && (t->flags[id] & TOK_FLAG_SPECIAL)) return;
  const unsigned char *p = (const unsigned char *)t->tok[id];
  size_t n = t->tok_len[id];
  if (t->flags[id] & TOK_FLAG_ADDED) {
    for (size_t i = 0; i < n; i++) feed(s, p[i], out);
    return;
  }
  for (size_t i = 0; i < n;) {
    uint32_t cp;
    int len = next_char(p + i, n - i, &cp);
    int b = cp == 0xffffffffu ? -1 : bytelevel_byte(cp);
    if (b >= 0) feed(s, (unsigned char)b, out);
    else
      for (int k = 0; k < len; k++) feed(s, p[i + k], out); /* not a byte-level character: its own bytes */
    i += (size_t)len;
  }
}

void tokenizer_decode_flush(DecodeState *s, StrBuf *out) {
  if (s->npending > 0) sb_puts(out, REPLACEMENT);
  s->npending = 0;
}

void tokenizer_decode(const Tokenizer *t, const int32_t *ids, int n, int skip_special, StrBuf *out) {
  DecodeState s = {0};
  for (int i = 0; i < n; i++) tokenizer_decode_step(t, &s, ids[i], skip_special, out);
  tokenizer_decode_flush(&s, out);
}
