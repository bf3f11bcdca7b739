/* Diagnostics: the first error of a compilation, with a source position where one is known.
   Every stage reports through a Diag and returns failure; nothing prints or exits inside passes. */
#ifndef LATHE_DIAG_H
#define LATHE_DIAG_H

typedef struct Diag {
  int set;       /* 1 once an error was recorded; later errors are ignored (first one wins) */
  int line, col; /* 1-based; 0 when the error has no source position */
  char msg[512];
} Diag;

void diag_error(Diag *d, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* "file:line:col: error: msg" (or "error: msg" without a position), no trailing newline. */
void diag_format(const Diag *d, const char *file, char *out, unsigned long n);
#endif
