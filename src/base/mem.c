#include "mem.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static OomHandler oom_handler;

void mem_set_oom_handler(OomHandler h) { oom_handler = h; }

void mem_oom_message(char *out, size_t cap, size_t n, const char *what) {
  if (n == SIZE_MAX) snprintf(out, cap, "out of memory: the size of %s overflows", what ? what : "an allocation");
  else snprintf(out, cap, "out of memory: %zu bytes for %s", n, what ? what : "an allocation");
}

_Noreturn void mem_fail(size_t n, const char *what) {
  char msg[256];
  mem_oom_message(msg, sizeof msg, n, what);
  if (oom_handler) oom_handler(msg);
  abort(); /* no handler (or one that returned): the caller has no way to go on */
}

/* count * size, or SIZE_MAX when it overflows. */
static size_t array_bytes(size_t count, size_t size) {
  return size && count > SIZE_MAX / size ? SIZE_MAX : count * size;
}

static void *diag_oom(Diag *d, size_t n, const char *what) {
  char msg[256];
  mem_oom_message(msg, sizeof msg, n, what);
  diag_error(d, 0, 0, "%s", msg);
  return NULL;
}

void *mem_alloc(Diag *d, size_t n, const char *what) {
  void *p = malloc(n ? n : 1);
  return p ? p : diag_oom(d, n, what);
}

void *mem_calloc(Diag *d, size_t count, size_t size, const char *what) {
  size_t n = array_bytes(count, size);
  void *p = n == SIZE_MAX ? NULL : calloc(count ? count : 1, size ? size : 1);
  return p ? p : diag_oom(d, n, what);
}

void *mem_realloc(Diag *d, void *p, size_t n, const char *what) {
  void *q = realloc(p, n ? n : 1);
  return q ? q : diag_oom(d, n, what);
}

void *xmalloc(size_t n, const char *what) {
  void *p = malloc(n ? n : 1);
  if (!p) mem_fail(n, what);
  return p;
}

void *xcalloc(size_t count, size_t size, const char *what) {
  size_t n = array_bytes(count, size);
  void *p = n == SIZE_MAX ? NULL : calloc(count ? count : 1, size ? size : 1);
  if (!p) mem_fail(n, what);
  return p;
}

void *xrealloc(void *p, size_t n, const char *what) {
  void *q = realloc(p, n ? n : 1);
  if (!q) mem_fail(n, what);
  return q;
}

void *xreallocarray(void *p, size_t count, size_t size, const char *what) {
  size_t n = array_bytes(count, size);
  if (n == SIZE_MAX) mem_fail(n, what);
  return xrealloc(p, n, what);
}

char *xstrdup(const char *s, const char *what) {
  size_t n = strlen(s) + 1;
  char *d = xmalloc(n, what);
  memcpy(d, s, n);
  return d;
}

char *xstrndup(const char *s, size_t n, const char *what) {
  size_t len = strnlen(s, n);
  char *d = xmalloc(len + 1, what);
  memcpy(d, s, len);
  d[len] = '\0';
  return d;
}
