/* The GPT-2 byte <-> unicode table: printable bytes stand for themselves, the other 68 bytes map to
 * U+0100.. in byte order, so every byte string becomes a printable token string. */
#include "tokenizer_internal.h"

static int is_printable_byte(unsigned b) {
  return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

static uint32_t byte_codepoint(unsigned char b) {
  if (is_printable_byte(b)) return b;
  uint32_t k = 0; /* index of b among the non-printable bytes */
  for (unsigned i = 0; i < b; i++) k += !is_printable_byte(i);
  return 256 + k;
}

int bytelevel_char(unsigned char b, char out[4]) {
  uint32_t cp = byte_codepoint(b);
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  out[0] = (char)(0xc0 | (cp >> 6));
  out[1] = (char)(0x80 | (cp & 0x3f));
  return 2;
}

int bytelevel_byte(uint32_t cp) {
  if (cp < 256) return is_printable_byte(cp) ? (int)cp : -1;
  if (cp >= 256 + 68) return -1;
  uint32_t k = cp - 256;
  for (unsigned b = 0; b < 256; b++) {
    if (is_printable_byte(b)) continue;
    if (k-- == 0) return (int)b;
  }
  return -1;
}
