#include "source_units.h"
#include <stdlib.h>
#include <string.h>

static char *join(const char *shared, size_t nshared, const char *from, size_t n) {
  char *s = malloc(nshared + n + 1);
  if (!s) return NULL;
  memcpy(s, shared, nshared);
  memcpy(s + nshared, from, n);
  s[nshared + n] = 0;
  return s;
}

int source_units_split(const char *source, size_t min_bytes, int max_units, SourceUnits *out) {
  out->n = 0;
  out->text = NULL;
  const size_t mark_len = strlen(SOURCE_UNIT_MARK);
  const char *first = strstr(source, SOURCE_UNIT_MARK);
  while (first && first != source && first[-1] != '\n') first = strstr(first + 1, SOURCE_UNIT_MARK);
  size_t total = strlen(source);
  if (max_units < 1) max_units = 1;
  if (!first || max_units == 1) {
    out->text = malloc(sizeof *out->text);
    if (!out->text || !(out->text[0] = join("", 0, source, total))) {
      free(out->text);
      out->text = NULL;
      return 0;
    }
    out->n = 1;
    return 1;
  }
  size_t shared = (size_t)(first - source), body = total - shared;
  /* as many units as the sections' bytes allow, each closed at the first mark past its share */
  size_t units = body / (min_bytes ? min_bytes : 1);
  if (units < 1) units = 1;
  if (units > (size_t)max_units) units = (size_t)max_units;
  out->text = calloc(units, sizeof *out->text);
  if (!out->text) return 0;
  const char *at = first, *end = source + total;
  for (size_t u = 0; u < units && at < end; u++) {
    const char *stop = end;
    if (u + 1 < units) { /* the first mark at a line start past this unit's share of the body */
      const char *want = first + (body * (u + 1)) / units;
      stop = want < at + mark_len ? at + mark_len : want;
      while ((stop = strstr(stop, SOURCE_UNIT_MARK)) && stop[-1] != '\n') stop++;
      if (!stop) stop = end;
    }
    if (!(out->text[out->n] = join(source, shared, at, (size_t)(stop - at)))) {
      source_units_free(out);
      return 0;
    }
    out->n++;
    at = stop;
  }
  return 1;
}

void source_units_free(SourceUnits *u) {
  for (int i = 0; i < u->n; i++) free(u->text[i]);
  free(u->text);
  u->n = 0;
  u->text = NULL;
}
