#include "strbuf.h"
#include "mem.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(StrBuf *b, size_t extra) {
  if (b->len + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) cap *= 2;
  char *d = xrealloc(b->data, cap, "a string");
  b->data = d;
  b->cap = cap;
}

void sb_printf(StrBuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  reserve(b, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void sb_puts(StrBuf *b, const char *s) {
  size_t n = strlen(s);
  reserve(b, n);
  memcpy(b->data + b->len, s, n + 1);
  b->len += n;
}

void sb_putc(StrBuf *b, char c) {
  reserve(b, 1);
  b->data[b->len++] = c;
  b->data[b->len] = 0;
}

void sb_putn(StrBuf *b, const void *p, size_t n) {
  if (!n) return;
  reserve(b, n);
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = 0;
}

void sb_indent(StrBuf *b, int level) {
  for (int i = 0; i < level; i++) sb_puts(b, "  ");
}

void sb_clear(StrBuf *b) {
  b->len = 0;
  if (b->data) b->data[0] = 0;
}

const char *sb_str(StrBuf *b) { return b->data ? b->data : ""; }

void sb_free(StrBuf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}
