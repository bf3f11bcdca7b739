#include "diag.h"
#include <stdarg.h>
#include <stdio.h>

/* Length of the well-formed UTF-8 sequence at s (shortest form, no surrogates, at most U+10FFFF), or 0. */
static int utf8_len(const unsigned char *s) {
  unsigned c = s[0];
  int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (!n || c > 0xF4) return 0;
  for (int i = 1; i < n; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  if (c == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
  if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
  if (c == 0xF0 && s[1] < 0x90) return 0;  /* overlong */
  if (c == 0xF4 && s[1] >= 0x90) return 0; /* above U+10FFFF */
  return n;
}

/* Messages carry names from files (tensor names, keys, paths): control characters and bytes that are not
 * UTF-8 are written as \xNN, so an error is one readable line whatever the file holds. */
static void escape_into(char *out, size_t n, const char *in) {
  const unsigned char *s = (const unsigned char *)in;
  size_t at = 0;
  while (*s && at + 1 < n) {
    int len = *s >= 0x80 ? utf8_len(s) : (*s >= 0x20 && *s != 0x7F);
    if (len) {
      if (at + (size_t)len >= n) break;
      for (int i = 0; i < len; i++) out[at++] = (char)*s++;
    } else {
      if (at + 4 >= n) break;
      snprintf(out + at, 5, "\\x%02x", *s++);
      at += 4;
    }
  }
  out[at] = 0;
}

void diag_error(Diag *d, int line, int col, const char *fmt, ...) {
  if (!d || d->set) return;
  d->set = 1;
  d->line = line;
  d->col = col;
  char raw[sizeof d->msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  escape_into(d->msg, sizeof d->msg, raw);
}

void diag_format(const Diag *d, const char *file, char *out, unsigned long n) {
  if (d->line > 0) snprintf(out, n, "%s:%d:%d: error: %s", file ? file : "<program>", d->line, d->col, d->msg);
  else snprintf(out, n, "error: %s", d->msg);
}
