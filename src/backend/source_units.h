/* Splitting one CUDA C translation unit into several that compile independently (in parallel), at
 * lines that the code generator marks: the text before the first mark is shared by every unit
 * (helpers, typedefs), and the marked sections (kernels, which call only the shared text) are
 * grouped, in order, into units of at least `min_bytes` each, at most `max_units` in all. A source
 * without marks is one unit, itself. */
#ifndef LATHE_SOURCE_UNITS_H
#define LATHE_SOURCE_UNITS_H
#include <stddef.h>

#define SOURCE_UNIT_MARK "/* lathe: unit */\n"

typedef struct SourceUnits {
  int n;
  char **text; /* n malloc'ed sources */
} SourceUnits;

/* 0 only when out of memory. */
int source_units_split(const char *source, size_t min_bytes, int max_units, SourceUnits *out);
/* The same sections grouped by their kernel's name (a hash of it modulo max_units, empty units dropped) rather
 * than by size, so a change to one kernel changes only its own unit's text and the others stay cache hits (a
 * tuner compiling one kernel's candidates). 0 only when out of memory. */
int source_units_split_stable(const char *source, int max_units, SourceUnits *out);
void source_units_free(SourceUnits *u);
#endif
