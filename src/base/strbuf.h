/* Growable text buffer: printers and code generators write into one. */
#ifndef LATHE_STRBUF_H
#define LATHE_STRBUF_H
#include <stddef.h>

typedef struct StrBuf {
  char *data; /* always NUL-terminated once anything was written */
  size_t len, cap;
} StrBuf;

void sb_printf(StrBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_puts(StrBuf *b, const char *s);
void sb_putc(StrBuf *b, char c);
void sb_putn(StrBuf *b, const void *p, size_t n); /* n bytes, which may hold NULs */
void sb_indent(StrBuf *b, int level);             /* two spaces per level */
const char *sb_str(StrBuf *b);                    /* "" when empty */
void sb_clear(StrBuf *b);                         /* empty it, keeping the memory */
void sb_free(StrBuf *b);
#endif
