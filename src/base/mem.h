/* Checked allocation. Two kinds, by where the failure can be reported:
 *  - mem_alloc / mem_calloc / mem_realloc take a Diag: on failure they record
 *    "out of memory: N bytes for WHAT" and return NULL, and the caller fails like for any other error.
 *    Use them wherever a Diag reaches (and always for sizes that come from the input: buffers, weights).
 *  - xmalloc / xcalloc / xrealloc / xstrdup are for small bookkeeping deep inside passes that have no
 *    error path (IR nodes, name tables, arena chunks): on failure they call the out-of-memory handler
 *    with the same message. The library installs none that prints or exits; the CLI installs one that
 *    prints the line and exits 2, and without one the process aborts (the library must not continue).
 * Sizes are checked for overflow (count * size), which is reported the same way. */
#ifndef LATHE_MEM_H
#define LATHE_MEM_H
#include <stddef.h>
#include "diag.h"

void *mem_alloc(Diag *d, size_t n, const char *what);
void *mem_calloc(Diag *d, size_t count, size_t size, const char *what);
void *mem_realloc(Diag *d, void *p, size_t n, const char *what);

void *xmalloc(size_t n, const char *what);
void *xcalloc(size_t count, size_t size, const char *what);
void *xrealloc(void *p, size_t n, const char *what);
/* realloc to count * size bytes (overflow-checked). */
void *xreallocarray(void *p, size_t count, size_t size, const char *what);
char *xstrdup(const char *s, const char *what);
/* The first n bytes of s (fewer if it ends sooner), terminated. */
char *xstrndup(const char *s, size_t n, const char *what);

/* Called with the one-line message ("out of memory: N bytes for WHAT") when an x* allocation fails; must
 * not return (exit, or longjmp in tests). NULL restores the default (abort). */
typedef void (*OomHandler)(const char *msg);
void mem_set_oom_handler(OomHandler h);
/* Reports a failed allocation of n bytes (SIZE_MAX: a size that overflowed) to the handler; never returns. */
_Noreturn void mem_fail(size_t n, const char *what);
/* The message for a failed allocation of n bytes (SIZE_MAX: a size that overflowed). */
void mem_oom_message(char *out, size_t cap, size_t n, const char *what);
#endif
