/* Schedules as text: the tuning database's storage form and `--candidates`' lines. */
#include <stdlib.h>
#include <string.h>
#include "space.h"

typedef struct Field {
  const char *key;
  size_t off;
} Field;

#define F(k, m)                                                                                                        \
  { k, offsetof(Schedule, m) }
/* every int field of Schedule except red, which is written by name */
static const Field fields[] = {F("threads", block_threads),
                               F("vec", vec),
                               F("omp", omp),
                               F("rows", rows),
                               F("axis", row_axis),
                               F("serial", rows_serial),
                               F("mma", mma),
                               F("flash", flash),
                               F("decode", flash_decode),
                               F("dfill", decode_fill),
                               F("fill", gemm_fill),
                               F("lib", gemm_library),
                               F("romp", rows_omp),
                               F("bfill", block_fill),
                               F("svec", store_vec),
                               F("unroll", unroll),
                               F("grows", gemv_rows),
                               F("qgemv", qgemv)};
#undef F
enum { NFIELDS = sizeof fields / sizeof fields[0] };

static int *field_at(Schedule *s, const Field *f) { return (int *)((char *)s + f->off); }

void schedule_format(StrBuf *b, const Schedule *s) {
  sb_printf(b, "red=%s", s->red == RS_SERIAL ? "serial" : s->red == RS_WARP ? "warp" : "block");
  Schedule copy = *s;
  /* the knobs after bfill (store_vec, unroll, gemv_rows, qgemv) only when set: texts written before they existed
   * stay the same */
  for (int i = 0; i < NFIELDS; i++)
    if (i < NFIELDS - 4 || *field_at(&copy, &fields[i]) > 0)
      sb_printf(b, " %s=%d", fields[i].key, *field_at(&copy, &fields[i]));
}

int schedule_equal(const Schedule *a, const Schedule *b) {
  if (a->red != b->red) return 0;
  Schedule x = *a, y = *b;
  for (int i = 0; i < NFIELDS; i++)
    if (*field_at(&x, &fields[i]) != *field_at(&y, &fields[i])) return 0;
  return 1;
}

int schedule_parse(const char *text, Schedule *out, Diag *d) {
  Schedule s = {.red = RS_SERIAL, .row_axis = -1};
  const char *p = text;
  while (*p) {
    while (*p == ' ') p++;
    if (!*p) break;
    const char *end = p + strcspn(p, " ");
    const char *eq = memchr(p, '=', (size_t)(end - p));
    int klen = eq ? (int)(eq - p) : (int)(end - p);
    if (!eq) {
      diag_error(d, 0, 0, "schedule '%s': word '%.*s' is not KEY=VALUE", text, (int)(end - p), p);
      return 0;
    }
    const char *val = eq + 1;
    int vlen = (int)(end - val);
    if (klen == 3 && !strncmp(p, "red", 3)) {
      if (vlen == 6 && !strncmp(val, "serial", 6)) s.red = RS_SERIAL;
      else if (vlen == 4 && !strncmp(val, "warp", 4)) s.red = RS_WARP;
      else if (vlen == 5 && !strncmp(val, "block", 5)) s.red = RS_BLOCK;
      else {
        diag_error(d, 0, 0, "schedule '%s': red=%.*s (serial, warp or block)", text, vlen, val);
        return 0;
      }
    } else {
      const Field *f = NULL;
      for (int i = 0; i < NFIELDS; i++)
        if ((int)strlen(fields[i].key) == klen && !strncmp(fields[i].key, p, (size_t)klen)) f = &fields[i];
      char num[24];
      char *numend;
      if (!f || vlen < 1 || vlen >= (int)sizeof num) {
        diag_error(d, 0, 0, "schedule '%s': unknown word '%.*s'", text, (int)(end - p), p);
        return 0;
      }
      memcpy(num, val, (size_t)vlen);
      num[vlen] = 0;
      long v = strtol(num, &numend, 10);
      if (*numend || v < -1 || v > 1 << 20) {
        diag_error(d, 0, 0, "schedule '%s': %.*s is not a number in range", text, (int)(end - p), p);
        return 0;
      }
      *field_at(&s, f) = (int)v;
    }
    p = end;
  }
  *out = s;
  return 1;
}
