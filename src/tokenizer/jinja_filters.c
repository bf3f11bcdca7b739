/* Jinja filters (x | name(args)) and tests (x is name args), with Jinja2's behaviour, and tojson as
 * transformers defines it (json.dumps with ensure_ascii=False). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>
#include "jinja.h"

JValue jstrip(JCtx *c, JValue s, JValue chars, int left, int right);
JValue jreplace(JCtx *c, JValue s, JValue old, JValue new, int64_t count);

static JValue arg(JArgs *a, int i, const char *name, JValue def) {
  for (int k = 0; k < a->nkw; k++)
    if (name && !strcmp(a->kwnames[k], name)) return a->kw[k];
  return i >= 0 && i < a->npos ? a->pos[i] : def;
}

static JValue need_str(JCtx *c, const JNode *at, const char *what, JValue v) {
  if (v.t == JV_UNDEF) return jv_cstr("");
  if (v.t != JV_STR) return jv_stringify(c, v);
  (void)at, (void)what;
  return v;
}

/* mode 0 lower, 1 upper, 2 capitalize (first upper, rest lower), 3 Jinja's title (words start after
 * -, whitespace or an opening bracket), 4 Python's str.title (words start after any non-letter). */
JValue jcase(JCtx *c, JValue s, int mode) {
  JBuf *b = jbuf_new(c);
  int word_start = 1;
  for (size_t i = 0; i < s.n;) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s.u.s + i, (utf8proc_ssize_t)(s.n - i), &cp);
    if (k <= 0) {
      jbuf_put(c, b, s.u.s + i, 1);
      i++;
      continue;
    }
    int up = mode == 1 || ((mode == 2 && i == 0) || (mode >= 3 && word_start));
    utf8proc_int32_t out = up ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
    if (mode == 3)
      word_start = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || cp == ' ' || (cp >= 9 && cp <= 13);
    if (mode == 4) {
      utf8proc_category_t cat = utf8proc_category(cp);
      int cased = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
      word_start = !cased;
    }
    utf8proc_uint8_t enc[4];
    jbuf_put(c, b, (const char *)enc, (size_t)utf8proc_encode_char(out, enc));
    i += (size_t)k;
  }
  return jbuf_value(c, b);
}

static int64_t length(JCtx *c, const JNode *at, JValue v) {
  switch (v.t) {
  case JV_UNDEF: return 0;
  case JV_STR: return (int64_t)utf8_count(v.u.s, v.n);
  case JV_LIST: return (int64_t)v.u.l->n;
  case JV_DICT:
  case JV_NS: return (int64_t)v.u.d->n;
  default: jfail(c, at->line, at->col, "a %s has no length", jv_type_name(v));
  }
}

/* item.a.b for an attribute path "a.b" (selectattr, map, join, sort). */
static JValue attr_path(JCtx *c, JValue v, JValue path) {
  if (path.t == JV_INT) return jgetitem(c, NULL, v, path);
  const char *p = path.u.s;
  while (v.t != JV_UNDEF) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    JValue key = jv_str(c, p, n);
    v = jgetitem(c, NULL, v, key);
    if (!dot) break;
    p = dot + 1;
  }
  return v;
}

static JValue tail_args(JCtx *c, JArgs *a, int from, JArgs *out) {
  *out = (JArgs){a->npos > from ? a->pos + from : NULL, a->npos > from ? a->npos - from : 0, NULL, NULL, 0};
  (void)c;
  return jv_none();
}

static JValue lowered(JCtx *c, JValue v, int case_sensitive) {
  return !case_sensitive && v.t == JV_STR ? jcase(c, v, 0) : v;
}

static JValue select_items(JCtx *c, const JNode *at, JValue seq, JArgs *a, int by_attr, int keep) {
  JList *items = jiterate(c, at, seq);
  JValue out = jv_list(c, items->n);
  out.u.l->n = 0;
  int first_test = by_attr ? 1 : 0;
  JValue test = arg(a, first_test, NULL, jv_undef(NULL));
  JArgs targs;
  tail_args(c, a, first_test + 1, &targs);
  for (size_t i = 0; i < items->n; i++) {
    JValue v = by_attr ? attr_path(c, items->v[i], arg(a, 0, NULL, jv_cstr(""))) : items->v[i];
    int r = test.t == JV_STR ? jtest(c, at, test.u.s, v, &targs) : jv_truthy(v);
    if (r == keep) out.u.l->v[out.u.l->n++] = items->v[i];
  }
  return out;
}

static JValue to_list(JCtx *c, const JNode *at, JValue v) {
  if (v.t == JV_LIST && !v.u.l->tuple) return v;
  JList *l = jiterate(c, at, v);
  JValue out = jv_list(c, l->n);
  if (l->n) memcpy(out.u.l->v, l->v, sizeof *l->v * l->n);
  return out;
}

static JValue indent(JCtx *c, JValue s, JArgs *a) {
  JValue w = arg(a, 0, "width", jv_int(4));
  int first = jv_truthy(arg(a, 1, "first", jv_bool(0))), blank = jv_truthy(arg(a, 2, "blank", jv_bool(0)));
  JBuf *pad = jbuf_new(c);
  if (w.t == JV_STR) jbuf_put(c, pad, w.u.s, w.n);
  else
    for (int64_t i = 0; i < w.u.i && i < 256; i++) jbuf_puts(c, pad, " ");
  JBuf *b = jbuf_new(c);
  if (first) jbuf_put(c, b, pad->p ? pad->p : "", pad->n);
  size_t i = 0;
  int line = 0;
  while (i < s.n) {
    size_t e = i;
    while (e < s.n && s.u.s[e] != '\n') e++;
    if (line > 0) {
      jbuf_puts(c, b, "\n");
      if (blank || e > i) jbuf_put(c, b, pad->p ? pad->p : "", pad->n);
    }
    jbuf_put(c, b, s.u.s + i, e - i);
    line++;
    i = e + 1;
  }
  return jbuf_value(c, b);
}

/* sort, min, max, dictsort and sum; *found = 0 when name is none of them. */
static JValue order_filter(JCtx *c, const JNode *at, const char *name, JValue v, JArgs *a, int *found) {
  if (!strcmp(name, "sort") || !strcmp(name, "min") || !strcmp(name, "max")) {
    /* stable; strings compare case-insensitively unless case_sensitive, as Jinja2 */
    JList *l = jiterate(c, at, v);
    int rev = name[1] == 'o' && jv_truthy(arg(a, 0, "reverse", jv_bool(0)));
    int cs = jv_truthy(arg(a, name[1] == 'o' ? 1 : 0, "case_sensitive", jv_bool(0)));
    JValue attr = arg(a, name[1] == 'o' ? 2 : 1, "attribute", jv_undef(NULL));
    JValue out = jv_list(c, l->n), *keys = jalloc(c, sizeof *keys * (l->n + 1));
    for (size_t i = 0; i < l->n; i++) {
      JValue k = attr.t != JV_UNDEF ? attr_path(c, l->v[i], attr) : l->v[i];
      keys[i] = lowered(c, k, cs);
      out.u.l->v[i] = l->v[i];
      for (size_t j = i; j > 0; j--) { /* insertion sort: templates sort a handful of items */
        int r = jv_compare(c, at, keys[j - 1], keys[j]);
        if (rev ? r >= 0 : r <= 0) break;
        JValue t = keys[j], u = out.u.l->v[j];
        keys[j] = keys[j - 1], out.u.l->v[j] = out.u.l->v[j - 1];
        keys[j - 1] = t, out.u.l->v[j - 1] = u;
      }
    }
    if (name[1] == 'o') return out;
    if (!l->n) return jv_undef(NULL);
    return out.u.l->v[name[1] == 'i' ? 0 : l->n - 1];
  }
  if (!strcmp(name, "dictsort")) { /* (key, value) pairs sorted by key, or by value with by='value' */
    if (v.t != JV_DICT && v.t != JV_NS)
      jfail(c, at->line, at->col, "dictsort: expected a mapping, got %s", jv_type_name(v));
    int cs = jv_truthy(arg(a, 0, "case_sensitive", jv_bool(0))), rev = jv_truthy(arg(a, 2, "reverse", jv_bool(0)));
    JValue by = arg(a, 1, "by", jv_cstr("key"));
    int at_value = by.t == JV_STR && !strcmp(by.u.s, "value");
    JDict *d = v.u.d;
    JValue out = jv_list(c, d->n);
    for (size_t i = 0; i < d->n; i++) {
      JValue pair = jv_list(c, 2);
      pair.u.l->tuple = 1, pair.u.l->v[0] = d->k[i], pair.u.l->v[1] = d->v[i];
      out.u.l->v[i] = pair;
      for (size_t j = i; j > 0; j--) {
        JValue x = lowered(c, out.u.l->v[j - 1].u.l->v[at_value], cs),
               y = lowered(c, out.u.l->v[j].u.l->v[at_value], cs);
        int r = jv_compare(c, at, x, y);
        if (rev ? r >= 0 : r <= 0) break;
        JValue t = out.u.l->v[j];
        out.u.l->v[j] = out.u.l->v[j - 1], out.u.l->v[j - 1] = t;
      }
    }
    return out;
  }
  if (!strcmp(name, "sum")) {
    JList *l = jiterate(c, at, v);
    JValue attr = arg(a, 0, "attribute", jv_undef(NULL)), total = arg(a, 1, "start", jv_int(0));
    for (size_t i = 0; i < l->n; i++) {
      JValue x = attr.t != JV_UNDEF ? attr_path(c, l->v[i], attr) : l->v[i];
      if (x.t == JV_FLOAT || total.t == JV_FLOAT) {
        double fx = x.t == JV_FLOAT ? x.u.f : (double)x.u.i, ft = total.t == JV_FLOAT ? total.u.f : (double)total.u.i;
        if ((x.t != JV_INT && x.t != JV_BOOL && x.t != JV_FLOAT)) jfail(c, at->line, at->col, "sum: not a number");
        total = jv_float(fx + ft);
      } else if ((x.t == JV_INT || x.t == JV_BOOL) && !__builtin_add_overflow(total.u.i, x.u.i, &total.u.i)) {
        total.t = JV_INT;
      } else {
        jfail(c, at->line, at->col, "sum: cannot add a %s", jv_type_name(x));
      }
    }
    return total;
  }
  *found = 0;
  return jv_none();
}

/* The filters over a sequence (first, sort, map, join, ...); *found = 0 when name is none of them. */
static JValue seq_filter(JCtx *c, const JNode *at, const char *name, JValue v, JArgs *a, int *found) {
  *found = 1;
  if (!strcmp(name, "first") || !strcmp(name, "last")) {
    JList *l = jiterate(c, at, v);
    if (!l->n) return jv_undef(NULL);
    return l->v[name[0] == 'f' ? 0 : l->n - 1];
  }
  if (!strcmp(name, "reverse")) {
    if (v.t == JV_STR) {
      JList *l = jiterate(c, at, v);
      JBuf *b = jbuf_new(c);
      for (size_t i = l->n; i-- > 0;) jbuf_put(c, b, l->v[i].u.s, l->v[i].n);
      return jbuf_value(c, b);
    }
    JList *l = jiterate(c, at, v);
    JValue out = jv_list(c, l->n);
    for (size_t i = 0; i < l->n; i++) out.u.l->v[i] = l->v[l->n - 1 - i];
    return out;
  }
  if (!strcmp(name, "selectattr") || !strcmp(name, "rejectattr")) return select_items(c, at, v, a, 1, name[0] == 's');
  if (!strcmp(name, "select") || !strcmp(name, "reject")) return select_items(c, at, v, a, 0, name[0] == 's');
  if (!strcmp(name, "map")) {
    JList *l = jiterate(c, at, v);
    JValue out = jv_list(c, l->n), attr = arg(a, -1, "attribute", jv_undef(NULL));
    JValue def = arg(a, -1, "default", jv_undef(NULL));
    JArgs rest;
    tail_args(c, a, 1, &rest);
    if (attr.t == JV_UNDEF && (a->npos < 1 || a->pos[0].t != JV_STR))
      jfail(c, at->line, at->col, "map: give a filter name or attribute=");
    for (size_t i = 0; i < l->n; i++) {
      if (attr.t != JV_UNDEF) {
        JValue x = attr_path(c, l->v[i], attr);
        out.u.l->v[i] = x.t == JV_UNDEF && def.t != JV_UNDEF ? def : x;
      } else {
        out.u.l->v[i] = jfilter(c, at, a->pos[0].u.s, l->v[i], &rest);
      }
    }
    return out;
  }
  if (!strcmp(name, "join")) {
    JList *l = jiterate(c, at, v);
    JValue sep = arg(a, 0, "d", jv_cstr("")), attr = arg(a, 1, "attribute", jv_undef(NULL));
    JBuf *b = jbuf_new(c);
    for (size_t i = 0; i < l->n; i++) {
      if (i) jv_to_str(c, b, sep);
      jv_to_str(c, b, attr.t != JV_UNDEF ? attr_path(c, l->v[i], attr) : l->v[i]);
    }
    return jbuf_value(c, b);
  }
  if (!strcmp(name, "unique")) {
    JList *l = jiterate(c, at, v);
    int cs = jv_truthy(arg(a, 0, "case_sensitive", jv_bool(0)));
    JValue out = jv_list(c, l->n);
    out.u.l->n = 0;
    for (size_t i = 0; i < l->n; i++) {
      int seen = 0;
      for (size_t k = 0; k < out.u.l->n && !seen; k++)
        seen = jv_equal(lowered(c, out.u.l->v[k], cs), lowered(c, l->v[i], cs));
      if (!seen) out.u.l->v[out.u.l->n++] = l->v[i];
    }
    return out;
  }
  return order_filter(c, at, name, v, a, found);
}

JValue jfilter(JCtx *c, const JNode *at, const char *name, JValue v, JArgs *a) {
  if (!strcmp(name, "default") || !strcmp(name, "d")) {
    int boolean = jv_truthy(arg(a, 1, "boolean", jv_bool(0)));
    return v.t == JV_UNDEF || (boolean && !jv_truthy(v)) ? arg(a, 0, "default_value", jv_cstr("")) : v;
  }
  if (!strcmp(name, "safe")) return v;
  if (!strcmp(name, "tojson")) {
    for (int k = 0; k < a->nkw; k++)
      if (strcmp(a->kwnames[k], "indent") && strcmp(a->kwnames[k], "ensure_ascii"))
        jfail(c, at->line, at->col, "tojson: argument '%s' is not supported", a->kwnames[k]);
    if (jv_truthy(arg(a, 1, "ensure_ascii", jv_bool(0))))
      jfail(c, at->line, at->col, "tojson: ensure_ascii=True is not supported");
    JValue ind = arg(a, 0, "indent", jv_none());
    JBuf *b = jbuf_new(c);
    jv_to_json(c, b, v, ind.t == JV_INT ? (int)(ind.u.i < 64 ? ind.u.i : 64) : -1, 0, at);
    return jbuf_value(c, b);
  }
  if (!strcmp(name, "length") || !strcmp(name, "count")) return jv_int(length(c, at, v));
  if (!strcmp(name, "string")) return v.t == JV_UNDEF ? jv_cstr("") : jv_stringify(c, v);
  if (!strcmp(name, "list")) return to_list(c, at, v);
  if (!strcmp(name, "items")) {
    if (v.t == JV_UNDEF) return jv_list(c, 0);
    if (v.t != JV_DICT && v.t != JV_NS)
      jfail(c, at->line, at->col, "items: expected a mapping, got %s", jv_type_name(v));
    JMethod m = {v, "items"};
    JArgs none = {0};
    return jcall_method(c, at, &m, &none);
  }
  int found;
  JValue r = seq_filter(c, at, name, v, a, &found);
  if (found) return r;
  if (!strcmp(name, "int") || !strcmp(name, "float")) {
    JValue def = arg(a, 0, "default", name[0] == 'i' ? jv_int(0) : jv_float(0));
    double f;
    if (v.t == JV_INT || v.t == JV_BOOL) f = (double)v.u.i;
    else if (v.t == JV_FLOAT) f = v.u.f;
    else if (v.t == JV_STR) {
      char *end;
      f = strtod(v.u.s, &end);
      while (*end == ' ') end++;
      if (end == v.u.s || *end) return def;
    } else return def;
    if (name[0] == 'f') return jv_float(f);
    if (v.t == JV_INT || v.t == JV_BOOL) return jv_int(v.u.i);
    if (f != f || f >= 9.2e18 || f <= -9.2e18) return def;
    return jv_int((int64_t)f);
  }
  if (!strcmp(name, "round")) { /* Python's round (half to even on the exact value), or floor / ceil */
    JValue prec = arg(a, 0, "precision", jv_int(0)), method = arg(a, 1, "method", jv_cstr("common"));
    int p = prec.t == JV_INT ? (int)(prec.u.i < 0 ? 0 : prec.u.i > 15 ? 15 : prec.u.i) : 0;
    if (v.t != JV_INT && v.t != JV_BOOL && v.t != JV_FLOAT) jfail(c, at->line, at->col, "round: not a number");
    double x = v.t == JV_FLOAT ? v.u.f : (double)v.u.i, scale = pow(10, p);
    if (method.t == JV_STR && !strcmp(method.u.s, "floor")) return jv_float(floor(x * scale) / scale);
    if (method.t == JV_STR && !strcmp(method.u.s, "ceil")) return jv_float(ceil(x * scale) / scale);
    if (method.t != JV_STR || strcmp(method.u.s, "common"))
      jfail(c, at->line, at->col, "round: method must be common, floor or ceil");
    if (v.t != JV_FLOAT) return jv_int(v.u.i);
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%.*f", p, x);
    return jv_float(strtod(tmp, NULL));
  }
  if (!strcmp(name, "abs")) {
    if (v.t == JV_FLOAT) return jv_float(v.u.f < 0 ? -v.u.f : v.u.f);
    if ((v.t == JV_INT || v.t == JV_BOOL) && v.u.i != INT64_MIN) return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
    jfail(c, at->line, at->col, "abs: bad operand %s", jv_type_name(v));
  }
  if (!strcmp(name, "indent")) return indent(c, need_str(c, at, name, v), a);
  JValue s = need_str(c, at, name, v);
  if (!strcmp(name, "trim")) return jstrip(c, s, arg(a, 0, "chars", jv_none()), 1, 1);
  if (!strcmp(name, "upper")) return jcase(c, s, 1);
  if (!strcmp(name, "lower")) return jcase(c, s, 0);
  if (!strcmp(name, "capitalize")) return jcase(c, s, 2);
  if (!strcmp(name, "title")) return jcase(c, s, 3);
  if (!strcmp(name, "replace")) {
    JValue old = need_str(c, at, name, arg(a, 0, "old", jv_cstr(""))),
           new = need_str(c, at, name, arg(a, 1, "new", jv_cstr("")));
    JValue cnt = arg(a, 2, "count", jv_none());
    return jreplace(c, s, old, new, cnt.t == JV_INT ? cnt.u.i : -1);
  }
  if (!strcmp(name, "wordcount")) { /* runs of \w: letters, numbers and _ */
    int64_t words = 0;
    int in_word = 0;
    for (size_t i = 0; i < s.n;) {
      utf8proc_int32_t cp;
      utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s.u.s + i, (utf8proc_ssize_t)(s.n - i), &cp);
      if (k <= 0) k = 1, cp = 0xFFFD;
      utf8proc_category_t cat = utf8proc_category(cp);
      int w = cp == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
              (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
      if (w && !in_word) words++;
      in_word = w;
      i += (size_t)k;
    }
    return jv_int(words);
  }
  jfail(c, at->line, at->col, "unknown filter '%s'", name);
}

int jtest(JCtx *c, const JNode *at, const char *name, JValue v, JArgs *a) {
  JValue x = arg(a, 0, NULL, jv_undef(NULL));
  if (!strcmp(name, "defined")) return v.t != JV_UNDEF;
  if (!strcmp(name, "undefined")) return v.t == JV_UNDEF;
  if (!strcmp(name, "none")) return v.t == JV_NONE;
  if (!strcmp(name, "string")) return v.t == JV_STR;
  if (!strcmp(name, "number")) return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
  if (!strcmp(name, "integer")) return v.t == JV_INT;
  if (!strcmp(name, "float")) return v.t == JV_FLOAT;
  if (!strcmp(name, "boolean")) return v.t == JV_BOOL;
  if (!strcmp(name, "true")) return v.t == JV_BOOL && v.u.i;
  if (!strcmp(name, "false")) return v.t == JV_BOOL && !v.u.i;
  if (!strcmp(name, "mapping")) return v.t == JV_DICT;
  if (!strcmp(name, "iterable"))
    return v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_NS || v.t == JV_UNDEF;
  if (!strcmp(name, "sequence")) return v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT || v.t == JV_UNDEF;
  if (!strcmp(name, "callable")) return v.t == JV_MACRO || v.t == JV_FUNC || v.t == JV_METHOD;
  if (!strcmp(name, "eq") || !strcmp(name, "equalto") || !strcmp(name, "==")) return jv_equal(v, x);
  if (!strcmp(name, "ne") || !strcmp(name, "!=")) return !jv_equal(v, x);
  if (!strcmp(name, "sameas")) return v.t == x.t && jv_equal(v, x);
  if (!strcmp(name, "lt") || !strcmp(name, "lessthan")) return jv_compare(c, at, v, x) < 0;
  if (!strcmp(name, "le")) return jv_compare(c, at, v, x) <= 0;
  if (!strcmp(name, "gt") || !strcmp(name, "greaterthan")) return jv_compare(c, at, v, x) > 0;
  if (!strcmp(name, "ge")) return jv_compare(c, at, v, x) >= 0;
  if (!strcmp(name, "in")) {
    if (x.t == JV_STR && v.t == JV_STR) {
      for (size_t i = 0; i + v.n <= x.n; i++)
        if (!memcmp(x.u.s + i, v.u.s, v.n)) return 1;
      return 0;
    }
    if (x.t == JV_DICT || x.t == JV_NS) {
      JValue y;
      return jv_dict_get(x.u.d, v, &y);
    }
    JList *l = jiterate(c, at, x);
    for (size_t i = 0; i < l->n; i++)
      if (jv_equal(l->v[i], v)) return 1;
    return 0;
  }
  if (!strcmp(name, "odd") || !strcmp(name, "even") || !strcmp(name, "divisibleby")) {
    if (v.t != JV_INT && v.t != JV_BOOL)
      jfail(c, at->line, at->col, "test '%s' needs an integer, got %s", name, jv_type_name(v));
    int64_t m = name[0] == 'd' ? (x.t == JV_INT ? x.u.i : 0) : 2;
    if (!m) jfail(c, at->line, at->col, "divisibleby: divisor must be a non-zero integer");
    int64_t r = v.u.i % m;
    return name[0] == 'o' ? r != 0 : r == 0;
  }
  if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
    if (v.t != JV_STR) return 0;
    JValue t = jcase(c, v, name[0] == 'u');
    return jv_equal(t, v);
  }
  jfail(c, at->line, at->col, "unknown test '%s'", name);
}
