#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

int program_arg_load(ProgramArg *p, const char *inline_text, const char *path) {
  memset(p, 0, sizeof *p);
  if (inline_text && path) {
    report_msg("give the program either with -e or as a file, not both");
    return 0;
  }
  if (inline_text) {
    p->text = inline_text;
    p->file = "<-e>";
    return 1;
  }
  if (!path) {
    report_msg("no program: give one with -e \"...\" or as a .lt file");
    return 0;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    report_msg("cannot open %s: %s", path, strerror(errno));
    return 0;
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
    n += got;
    if (cap - n - 1 == 0) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  int err = ferror(f);
  fclose(f);
  if (!buf || err) {
    free(buf);
    report_msg("cannot read %s", path);
    return 0;
  }
  buf[n] = 0;
  if (strlen(buf) != n) {
    free(buf);
    report_msg("%s: contains a NUL byte; is it a text program?", path);
    return 0;
  }
  p->owned = buf;
  p->text = buf;
  p->file = path;
  return 1;
}

void program_arg_free(ProgramArg *p) { free(p->owned); }

void report(const Diag *d, const char *file) {
  char msg[700];
  diag_format(d, file, msg, sizeof msg);
  fprintf(stderr, "lathe: %s\n", msg);
}

void report_msg(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("lathe: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}
