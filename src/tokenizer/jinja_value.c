/* Jinja values: constructors, Python's truthiness, equality and ordering, str() / repr() / json.dumps
 * text, and the output buffers (bounded by the render's output limit). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jinja.h"

JValue jv_undef(const char *name) { return (JValue){JV_UNDEF, 0, {.s = name}}; }
JValue jv_none(void) { return (JValue){JV_NONE, 0, {0}}; }
JValue jv_bool(int b) { return (JValue){JV_BOOL, 0, {.i = b != 0}}; }
JValue jv_int(int64_t i) { return (JValue){JV_INT, 0, {.i = i}}; }
JValue jv_float(double f) { return (JValue){JV_FLOAT, 0, {.f = f}}; }
JValue jv_cstr(const char *s) { return (JValue){JV_STR, strlen(s), {.s = s}}; }

JValue jv_str(JCtx *c, const char *s, size_t n) {
  if (n > c->lim.max_output) jfail(c, 0, 0, "a string of %zu bytes is over the limit of %zu", n, c->lim.max_output);
  char *p = jalloc(c, n + 1);
  if (n) memcpy(p, s, n);
  p[n] = 0;
  return (JValue){JV_STR, n, {.s = p}};
}

JValue jv_list(JCtx *c, size_t n) {
  JList *l = jalloc(c, sizeof *l);
  l->v = n ? jalloc(c, sizeof *l->v * n) : NULL;
  l->n = n;
  return (JValue){JV_LIST, 0, {.l = l}};
}

JValue jv_dict(JCtx *c, JType t) {
  JDict *d = jalloc(c, sizeof *d);
  return (JValue){t, 0, {.d = d}};
}

int jv_dict_get(const JDict *d, JValue k, JValue *v) {
  for (size_t i = 0; i < d->n; i++) {
    if (jv_equal(d->k[i], k)) {
      *v = d->v[i];
      return 1;
    }
  }
  return 0;
}

void jv_dict_set(JCtx *c, JDict *d, JValue k, JValue v) {
  for (size_t i = 0; i < d->n; i++) {
    if (jv_equal(d->k[i], k)) {
      d->v[i] = v;
      return;
    }
  }
  if (d->n == d->cap) {
    size_t cap = d->cap ? 2 * d->cap : 8;
    JValue *nk = jalloc(c, sizeof *nk * cap), *nv = jalloc(c, sizeof *nv * cap);
    if (d->n) memcpy(nk, d->k, sizeof *nk * d->n), memcpy(nv, d->v, sizeof *nv * d->n);
    d->k = nk, d->v = nv, d->cap = cap;
  }
  d->k[d->n] = k, d->v[d->n++] = v;
}

int jv_truthy(JValue v) {
  switch (v.t) {
  case JV_UNDEF:
  case JV_NONE: return 0;
  case JV_BOOL:
  case JV_INT: return v.u.i != 0;
  case JV_FLOAT: return v.u.f != 0;
  case JV_STR: return v.n != 0;
  case JV_LIST: return v.u.l->n != 0;
  case JV_DICT: return v.u.d->n != 0;
  default: return 1;
  }
}

static int is_num(JValue v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
static double num(JValue v) { return v.t == JV_FLOAT ? v.u.f : (double)v.u.i; }

/* Values nest only as deep as a template builds them, but a loop can build deep ones: past this depth
 * two distinct containers compare unequal rather than overflow the stack (Python raises RecursionError). */
enum { EQUAL_MAX_DEPTH = 2000 };

static int equal_at(JValue a, JValue b, int depth);

int jv_equal(JValue a, JValue b) { return equal_at(a, b, 0); }

static int equal_at(JValue a, JValue b, int depth) {
  if (is_num(a) && is_num(b)) {
    if (a.t != JV_FLOAT && b.t != JV_FLOAT) return a.u.i == b.u.i;
    return num(a) == num(b);
  }
  if (a.t != b.t) return 0;
  switch (a.t) {
  case JV_UNDEF:
  case JV_NONE: return 1;
  case JV_STR: return a.n == b.n && memcmp(a.u.s, b.u.s, a.n) == 0;
  case JV_LIST:
    if (a.u.l == b.u.l) return 1; /* lists never change once made */
    if (a.u.l->n != b.u.l->n || a.u.l->tuple != b.u.l->tuple || depth > EQUAL_MAX_DEPTH) return 0;
    for (size_t i = 0; i < a.u.l->n; i++)
      if (!equal_at(a.u.l->v[i], b.u.l->v[i], depth + 1)) return 0;
    return 1;
  case JV_DICT:
    if (a.u.d == b.u.d) return 1;
    if (a.u.d->n != b.u.d->n || depth > EQUAL_MAX_DEPTH) return 0;
    for (size_t i = 0; i < a.u.d->n; i++) {
      JValue v;
      if (!jv_dict_get(b.u.d, a.u.d->k[i], &v) || !equal_at(a.u.d->v[i], v, depth + 1)) return 0;
    }
    return 1;
  default: return a.u.d == b.u.d; /* the same object */
  }
}

const char *jv_type_name(JValue v) {
  static const char *const names[] = {"undefined", "NoneType", "bool",      "int",   "float",    "str",
                                      "list",      "dict",     "Namespace", "Macro", "function", "method"};
  return names[v.t];
}

int jv_compare(JCtx *c, const JNode *at, JValue a, JValue b) {
  if (is_num(a) && is_num(b)) {
    if (a.t != JV_FLOAT && b.t != JV_FLOAT) return (a.u.i > b.u.i) - (a.u.i < b.u.i);
    return (num(a) > num(b)) - (num(a) < num(b));
  }
  if (a.t == JV_STR && b.t == JV_STR) { /* UTF-8 bytes order as code points */
    int r = memcmp(a.u.s, b.u.s, a.n < b.n ? a.n : b.n);
    return r ? (r > 0) - (r < 0) : (a.n > b.n) - (a.n < b.n);
  }
  if (a.t == JV_LIST && b.t == JV_LIST) {
    for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
      if (jv_equal(a.u.l->v[i], b.u.l->v[i])) continue;
      jdepth_enter(c, at->line, at->col);
      int r = jv_compare(c, at, a.u.l->v[i], b.u.l->v[i]);
      c->depth--;
      return r;
    }
    return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
  }
  jfail(c, at->line, at->col, "cannot compare %s with %s", jv_type_name(a), jv_type_name(b));
}

/* Buffers. */
JBuf *jbuf_new(JCtx *c) {
  JBuf *b = jalloc(c, sizeof *b);
  b->next = c->bufs;
  c->bufs = b;
  return b;
}

void jbuf_put(JCtx *c, JBuf *b, const char *s, size_t n) {
  if (n > c->lim.max_output - b->n)
    jfail(c, 0, 0, "the rendered text is over the limit of %zu bytes", c->lim.max_output);
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) jfail(c, 0, 0, "out of memory for %zu bytes of text", cap);
    b->p = p, b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}

void jbuf_puts(JCtx *c, JBuf *b, const char *s) { jbuf_put(c, b, s, strlen(s)); }

JValue jbuf_value(JCtx *c, JBuf *b) { return jv_str(c, b->p ? b->p : "", b->n); }

/* Python's repr of a float: the shortest digits that read back, fixed notation for exponents -4..15. */
static void put_float(JCtx *c, JBuf *b, double f, int json) {
  char tmp[64];
  if (isnan(f)) return jbuf_puts(c, b, json ? "NaN" : "nan");
  if (isinf(f)) return jbuf_puts(c, b, f > 0 ? (json ? "Infinity" : "inf") : (json ? "-Infinity" : "-inf"));
  int prec = 1;
  for (; prec < 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
    if (strtod(tmp, NULL) == f) break;
  }
  snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
  char digits[32];
  int nd = 0, neg = tmp[0] == '-';
  const char *p = tmp + neg;
  for (; *p && *p != 'e'; p++)
    if (*p >= '0' && *p <= '9') digits[nd++] = *p;
  int exp = atoi(p + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  char out[64];
  int w = 0;
  if (neg) out[w++] = '-';
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out[w++] = '0', out[w++] = '.';
      for (int i = 0; i < -exp - 1; i++) out[w++] = '0';
      for (int i = 0; i < nd; i++) out[w++] = digits[i];
    } else {
      for (int i = 0; i <= exp; i++) out[w++] = i < nd ? digits[i] : '0';
      out[w++] = '.';
      if (nd > exp + 1)
        for (int i = exp + 1; i < nd; i++) out[w++] = digits[i];
      else out[w++] = '0';
    }
    out[w] = 0;
  } else {
    out[w++] = digits[0];
    if (nd > 1) {
      out[w++] = '.';
      for (int i = 1; i < nd; i++) out[w++] = digits[i];
    }
    snprintf(out + w, sizeof out - (size_t)w, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  }
  jbuf_puts(c, b, out);
}

static void put_repr_str(JCtx *c, JBuf *b, const char *s, size_t n) {
  char q = memchr(s, '\'', n) && !memchr(s, '"', n) ? '"' : '\'';
  jbuf_put(c, b, &q, 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    char esc[8];
    if (ch == '\\' || ch == (unsigned char)q) esc[0] = '\\', esc[1] = (char)ch, esc[2] = 0;
    else if (ch == '\n') strcpy(esc, "\\n");
    else if (ch == '\r') strcpy(esc, "\\r");
    else if (ch == '\t') strcpy(esc, "\\t");
    else if (ch < 0x20 || ch == 0x7f) snprintf(esc, sizeof esc, "\\x%02x", ch);
    else esc[0] = (char)ch, esc[1] = 0;
    jbuf_puts(c, b, esc);
  }
  jbuf_put(c, b, &q, 1);
}

void jv_repr(JCtx *c, JBuf *b, JValue v) {
  if (v.t == JV_STR) return put_repr_str(c, b, v.u.s, v.n);
  if (v.t == JV_UNDEF) return; /* str(Undefined) is "" inside containers too */
  jv_to_str(c, b, v);
}

void jv_to_str(JCtx *c, JBuf *b, JValue v) {
  char tmp[32];
  switch (v.t) {
  case JV_UNDEF: return;
  case JV_NONE: return jbuf_puts(c, b, "None");
  case JV_BOOL: return jbuf_puts(c, b, v.u.i ? "True" : "False");
  case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); return jbuf_puts(c, b, tmp);
  case JV_FLOAT: return put_float(c, b, v.u.f, 0);
  case JV_STR: return jbuf_put(c, b, v.u.s, v.n);
  case JV_LIST:
    jdepth_enter(c, 0, 0); /* deep (or, through a namespace, cyclic) values end in an error */
    jbuf_puts(c, b, v.u.l->tuple ? "(" : "[");
    for (size_t i = 0; i < v.u.l->n; i++) {
      if (i) jbuf_puts(c, b, ", ");
      jv_repr(c, b, v.u.l->v[i]);
    }
    if (v.u.l->tuple && v.u.l->n == 1) jbuf_puts(c, b, ",");
    c->depth--;
    return jbuf_puts(c, b, v.u.l->tuple ? ")" : "]");
  case JV_DICT:
  case JV_NS:
    jdepth_enter(c, 0, 0);
    jbuf_puts(c, b, v.t == JV_NS ? "<Namespace {" : "{");
    for (size_t i = 0; i < v.u.d->n; i++) {
      if (i) jbuf_puts(c, b, ", ");
      jv_repr(c, b, v.u.d->k[i]);
      jbuf_puts(c, b, ": ");
      jv_repr(c, b, v.u.d->v[i]);
    }
    c->depth--;
    return jbuf_puts(c, b, v.t == JV_NS ? "}>" : "}");
  case JV_MACRO: return jbuf_puts(c, b, "<Macro>");
  default: return jbuf_puts(c, b, "<function>");
  }
}

JValue jv_stringify(JCtx *c, JValue v) {
  if (v.t == JV_STR) return v;
  JBuf *b = jbuf_new(c);
  jv_to_str(c, b, v);
  return jbuf_value(c, b);
}

static void put_json_str(JCtx *c, JBuf *b, const char *s, size_t n) {
  jbuf_puts(c, b, "\"");
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
    jbuf_put(c, b, s + run, i - run);
    run = i + 1;
    char esc[8];
    switch (ch) {
    case '"': strcpy(esc, "\\\""); break;
    case '\\': strcpy(esc, "\\\\"); break;
    case '\n': strcpy(esc, "\\n"); break;
    case '\r': strcpy(esc, "\\r"); break;
    case '\t': strcpy(esc, "\\t"); break;
    case '\b': strcpy(esc, "\\b"); break;
    case '\f': strcpy(esc, "\\f"); break;
    default: snprintf(esc, sizeof esc, "\\u%04x", ch);
    }
    jbuf_puts(c, b, esc);
  }
  jbuf_put(c, b, s + run, n - run);
  jbuf_puts(c, b, "\"");
}

static void newline(JCtx *c, JBuf *b, int indent, int level) {
  jbuf_puts(c, b, "\n");
  for (int i = 0; i < indent * level; i++) jbuf_puts(c, b, " ");
}

void jv_to_json(JCtx *c, JBuf *b, JValue v, int indent, int level, const JNode *at) {
  jdepth_enter(c, at->line, at->col);
  switch (v.t) {
  case JV_NONE: jbuf_puts(c, b, "null"); break;
  case JV_BOOL: jbuf_puts(c, b, v.u.i ? "true" : "false"); break;
  case JV_INT: jv_to_str(c, b, v); break;
  case JV_FLOAT: put_float(c, b, v.u.f, 1); break;
  case JV_STR: put_json_str(c, b, v.u.s, v.n); break;
  case JV_LIST:
    if (!v.u.l->n) {
      jbuf_puts(c, b, "[]");
      break;
    }
    jbuf_puts(c, b, "[");
    for (size_t i = 0; i < v.u.l->n; i++) {
      if (i) jbuf_puts(c, b, indent >= 0 ? "," : ", ");
      if (indent >= 0) newline(c, b, indent, level + 1);
      jv_to_json(c, b, v.u.l->v[i], indent, level + 1, at);
    }
    if (indent >= 0) newline(c, b, indent, level);
    jbuf_puts(c, b, "]");
    break;
  case JV_DICT:
  case JV_NS:
    if (!v.u.d->n) {
      jbuf_puts(c, b, "{}");
      break;
    }
    jbuf_puts(c, b, "{");
    for (size_t i = 0; i < v.u.d->n; i++) {
      if (i) jbuf_puts(c, b, indent >= 0 ? "," : ", ");
      if (indent >= 0) newline(c, b, indent, level + 1);
      JValue k = v.u.d->k[i];
      if (k.t == JV_STR) put_json_str(c, b, k.u.s, k.n);
      else if (k.t == JV_NONE) jbuf_puts(c, b, "\"null\"");
      else if (k.t == JV_BOOL) jbuf_puts(c, b, k.u.i ? "\"true\"" : "\"false\"");
      else if (k.t == JV_INT || k.t == JV_FLOAT)
        jbuf_puts(c, b, "\""), jv_to_json(c, b, k, -1, 0, at), jbuf_puts(c, b, "\"");
      else jfail(c, at->line, at->col, "tojson: keys must be str, int, float, bool or None, not %s", jv_type_name(k));
      jbuf_puts(c, b, ": ");
      jv_to_json(c, b, v.u.d->v[i], indent, level + 1, at);
    }
    if (indent >= 0) newline(c, b, indent, level);
    jbuf_puts(c, b, "}");
    break;
  default: jfail(c, at->line, at->col, "tojson: a %s is not JSON serializable", jv_type_name(v));
  }
  c->depth--;
}

size_t utf8_count(const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
  return k;
}

size_t utf8_offset(const char *s, size_t n, size_t cp) {
  size_t i = 0;
  for (size_t k = 0; i < n; i++) {
    if (((unsigned char)s[i] & 0xC0) != 0x80) {
      if (k == cp) return i;
      k++;
    }
  }
  return n;
}
