#include "arena.h"
#include "mem.h"
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Chunk {
  struct Chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} Chunk;

struct Arena {
  Chunk *head;
};

Arena *arena_new(void) {
  Arena *a = xcalloc(1, sizeof *a, "an arena");
  return a;
}

void arena_free(Arena *a) {
  if (!a) return;
  for (Chunk *c = a->head, *n; c; c = n) {
    n = c->next;
    free(c);
  }
  free(a);
}

void *arena_alloc(Arena *a, size_t n) {
  if (n > SIZE_MAX - sizeof(Chunk) - 16) mem_fail(SIZE_MAX, "the compiler's arena");
  n = (n + 15) & ~(size_t)15;
  if (!a->head || a->head->cap - a->head->used < n) {
    size_t cap = n > 65536 ? n : 65536;
    Chunk *c = xmalloc(sizeof(Chunk) + cap, "the compiler's arena");
    c->next = a->head;
    c->used = 0;
    c->cap = cap;
    a->head = c;
  }
  void *p = a->head->data + a->head->used;
  a->head->used += n;
  memset(p, 0, n);
  return p;
}

void *arena_alloc_array(Arena *a, size_t count, size_t size) {
  if (size && count > SIZE_MAX / size) mem_fail(SIZE_MAX, "the compiler's arena");
  return arena_alloc(a, count * size);
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *d = arena_alloc(a, n + 1);
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

char *arena_strdup(Arena *a, const char *s) { return arena_strndup(a, s, strlen(s)); }

char *arena_printf(Arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *d = arena_alloc(a, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(d, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return d;
}
