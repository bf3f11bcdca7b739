#include "source_units.h"
#include "../base/mem.h"
#include "../base/strbuf.h"
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char *join(const char *shared, size_t nshared, const char *from, size_t n) {
  char *s = xmalloc(nshared + n + 1, "a CUDA translation unit");
  if (!s) return NULL;
  memcpy(s, shared, nshared);
  memcpy(s + nshared, from, n);
  s[nshared + n] = 0;
  return s;
}

/* The first mark at or after `from` that starts a line of `source`, or NULL. */
static const char *next_mark(const char *source, const char *from) {
  const char *m = strstr(from, SOURCE_UNIT_MARK);
  while (m && m != source && m[-1] != '\n') m = strstr(m + 1, SOURCE_UNIT_MARK);
  return m;
}

int source_units_split(const char *source, size_t min_bytes, int max_units, SourceUnits *out) {
  out->n = 0;
  out->text = NULL;
  const size_t mark_len = strlen(SOURCE_UNIT_MARK);
  const char *first = next_mark(source, source);
  size_t total = strlen(source);
  if (max_units < 1) max_units = 1;
  if (!first || max_units == 1) {
    out->text = xmalloc(sizeof *out->text, "the CUDA translation units");
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
  out->text = xcalloc(units, sizeof *out->text, "the CUDA translation units");
  if (!out->text) return 0;
  const char *at = first, *end = source + total;
  for (size_t u = 0; u < units && at < end; u++) {
    const char *stop = end;
    if (u + 1 < units) { /* the first mark at a line start past this unit's share of the body */
      const char *want = first + (body * (u + 1)) / units;
      stop = next_mark(source, want < at + mark_len ? at + mark_len : want);
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

/* FNV-1a of the section's kernel name: the first identifier followed by '(' on its first line that is not
 * __launch_bounds__ (whose argument changes with the block size); the whole first line when there is none. */
static uint64_t section_name_hash(const char *section) {
  const char *eol = strchr(section, '\n'), *name = section, *name_end = eol ? eol : section + strlen(section);
  for (const char *q = section; q < name_end; q++) {
    if (*q != '(') continue;
    const char *b = q;
    while (b > section && (isalnum((unsigned char)b[-1]) || b[-1] == '_')) b--;
    if (b < q && strncmp(b, "__launch_bounds__", (size_t)(q - b)) != 0) {
      name = b, name_end = q;
      break;
    }
  }
  uint64_t h = 1469598103934665603ULL;
  for (const char *q = name; q < name_end; q++) h = (h ^ (unsigned char)*q) * 1099511628211ULL;
  return h;
}

int source_units_split_stable(const char *source, int max_units, SourceUnits *out) {
  const size_t mark_len = strlen(SOURCE_UNIT_MARK);
  const char *first = next_mark(source, source);
  if (!first || max_units <= 1) return source_units_split(source, 0, 1, out);
  out->n = 0;
  out->text = NULL;
  size_t shared = (size_t)(first - source);
  StrBuf *unit = xcalloc((size_t)max_units, sizeof *unit, "the CUDA translation units");
  out->text = xcalloc((size_t)max_units, sizeof *out->text, "the CUDA translation units");
  int ok = unit && out->text;
  for (const char *at = first; ok && at;) {
    const char *next = next_mark(source, at + mark_len);
    const char *end = next ? next : source + strlen(source);
    StrBuf *u = &unit[section_name_hash(at + mark_len) % (uint64_t)max_units];
    if (!u->len) sb_putn(u, source, shared);
    sb_putn(u, at, (size_t)(end - at));
    at = next;
  }
  for (int i = 0; ok && i < max_units; i++) {
    if (!unit[i].len) continue;
    if (!(out->text[out->n] = xstrdup(sb_str(&unit[i]), "a CUDA translation unit"))) ok = 0;
    else out->n++;
  }
  for (int i = 0; unit && i < max_units; i++) sb_free(&unit[i]);
  free(unit);
  if (!ok) source_units_free(out);
  return ok;
}

void source_units_free(SourceUnits *u) {
  for (int i = 0; i < u->n; i++) free(u->text[i]);
  free(u->text);
  u->n = 0;
  u->text = NULL;
}
