/* Arena allocator: every IR stage of one compilation lives in one arena and is freed at once. */
#ifndef LATHE_ARENA_H
#define LATHE_ARENA_H
#include <stddef.h>

typedef struct Arena Arena;

Arena *arena_new(void);
void arena_free(Arena *a);
/* Zeroed, 16-byte aligned memory that lives until arena_free. Out of memory (or a size that overflows) goes to
 * the out-of-memory handler of base/mem.h. */
void *arena_alloc(Arena *a, size_t n);
/* count elements of size bytes each, the product checked for overflow. */
void *arena_alloc_array(Arena *a, size_t count, size_t size);
char *arena_strdup(Arena *a, const char *s);
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_printf(Arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ARENA_NEW(a, T) ((T *)arena_alloc((a), sizeof(T)))
#define ARENA_ARRAY(a, T, n) ((T *)arena_alloc_array((a), (size_t)(n), sizeof(T)))
#endif
