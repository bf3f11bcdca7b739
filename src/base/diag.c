#include "diag.h"
#include <stdarg.h>
#include <stdio.h>

void diag_error(Diag *d, int line, int col, const char *fmt, ...) {
  if (!d || d->set) return;
  d->set = 1;
  d->line = line;
  d->col = col;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->msg, sizeof d->msg, fmt, ap);
  va_end(ap);
}

void diag_format(const Diag *d, const char *file, char *out, unsigned long n) {
  if (d->line > 0)
    snprintf(out, n, "%s:%d:%d: error: %s", file ? file : "<program>", d->line, d->col, d->msg);
  else
    snprintf(out, n, "error: %s", d->msg);
}
