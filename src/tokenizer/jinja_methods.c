/* Jinja attribute and item access, iteration, the methods of strings and dicts templates call
 * (startswith, strip, split, items, get, ...) and the global functions (range, namespace, dict,
 * raise_exception, strftime_now), with Python's semantics. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "jinja.h"

static const char *const STR_METHODS[] = {"startswith", "endswith", "strip",   "lstrip",     "rstrip",     "split",
                                          "upper",      "lower",    "replace", "title",      "capitalize", "find",
                                          "count",      "join",     "format",  "splitlines", "isdigit",    "isspace",
                                          "isalpha",    "rsplit",   NULL};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", NULL};

static int in_list(const char *const *l, const char *s) {
  for (; *l; l++)
    if (!strcmp(*l, s)) return 1;
  return 0;
}

static JValue method(JCtx *c, JValue self, const char *name) {
  JMethod *m = jalloc(c, sizeof *m);
  m->self = self, m->name = name;
  return (JValue){JV_METHOD, 0, {.m = m}};
}

/* loop.index, loop.first, ... of the iteration l. */
static JValue loop_field(JCtx *c, JValue loop, const char *name) {
  const JLoop *l = loop.u.loop;
  int64_t i = (int64_t)l->i, n = (int64_t)l->items->n;
  if (!strcmp(name, "index")) return jv_int(i + 1);
  if (!strcmp(name, "index0")) return jv_int(i);
  if (!strcmp(name, "revindex")) return jv_int(n - i);
  if (!strcmp(name, "revindex0")) return jv_int(n - i - 1);
  if (!strcmp(name, "first")) return jv_bool(i == 0);
  if (!strcmp(name, "last")) return jv_bool(i + 1 == n);
  if (!strcmp(name, "length")) return jv_int(n);
  if (!strcmp(name, "previtem")) return i > 0 ? l->items->v[i - 1] : jv_undef("previtem");
  if (!strcmp(name, "nextitem")) return i + 1 < n ? l->items->v[i + 1] : jv_undef("nextitem");
  if (!strcmp(name, "cycle")) return method(c, loop, "cycle");
  return jv_undef(name);
}

JValue jgetattr(JCtx *c, JValue obj, const char *name) {
  JValue v;
  if (obj.t == JV_LOOP) return loop_field(c, obj, name);
  if (obj.t == JV_STR && in_list(STR_METHODS, name)) return method(c, obj, name);
  if (obj.t == JV_DICT && in_list(DICT_METHODS, name)) return method(c, obj, name);
  if ((obj.t == JV_DICT || obj.t == JV_NS) && jv_dict_get(obj.u.d, jv_cstr(name), &v)) return v;
  return jv_undef(name);
}

JValue jgetitem(JCtx *c, const JNode *at, JValue obj, JValue key) {
  JValue v;
  if (obj.t == JV_DICT || obj.t == JV_NS) {
    if (jv_dict_get(obj.u.d, key, &v)) return v;
    if (key.t == JV_STR) return jgetattr(c, obj, key.u.s);
    return jv_undef(NULL);
  }
  if ((obj.t == JV_LIST || obj.t == JV_STR) && (key.t == JV_INT || key.t == JV_BOOL)) {
    int64_t n = obj.t == JV_LIST ? (int64_t)obj.u.l->n : (int64_t)utf8_count(obj.u.s, obj.n), i = key.u.i;
    if (i < 0) i += n;
    if (i < 0 || i >= n) return jv_undef(NULL);
    if (obj.t == JV_LIST) return obj.u.l->v[i];
    size_t o = utf8_offset(obj.u.s, obj.n, (size_t)i), e = o + 1;
    while (e < obj.n && ((unsigned char)obj.u.s[e] & 0xC0) == 0x80) e++;
    return jv_str(c, obj.u.s + o, e - o);
  }
  if (key.t == JV_STR) return jgetattr(c, obj, key.u.s);
  (void)at;
  return jv_undef(NULL);
}

JList *jiterate(JCtx *c, const JNode *at, JValue v) {
  switch (v.t) {
  case JV_UNDEF: return jv_list(c, 0).u.l;
  case JV_LIST: return v.u.l;
  case JV_DICT:
  case JV_NS: {
    JValue l = jv_list(c, v.u.d->n);
    for (size_t i = 0; i < v.u.d->n; i++) l.u.l->v[i] = v.u.d->k[i];
    return l.u.l;
  }
  case JV_STR: {
    JValue l = jv_list(c, utf8_count(v.u.s, v.n));
    size_t k = 0;
    for (size_t i = 0; i < v.n;) {
      size_t e = i + 1;
      while (e < v.n && ((unsigned char)v.u.s[e] & 0xC0) == 0x80) e++;
      l.u.l->v[k++] = jv_str(c, v.u.s + i, e - i);
      i = e;
    }
    return l.u.l;
  }
  default: jfail(c, at->line, at->col, "a %s is not iterable", jv_type_name(v));
  }
}

/* Python's str.isspace() characters. */
static size_t space_len(const char *s, size_t n) {
  unsigned char ch = (unsigned char)s[0];
  if (ch == ' ' || (ch >= '\t' && ch <= '\r') || (ch >= 0x1c && ch <= 0x1f)) return 1;
  static const char *const wide[] = {"\xc2\x85",     "\xc2\xa0",     "\xe1\x9a\x80",
                                     "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaf",
                                     "\xe2\x81\x9f", "\xe3\x80\x80", NULL};
  for (int i = 0; wide[i]; i++)
    if (n >= strlen(wide[i]) && !memcmp(s, wide[i], strlen(wide[i]))) return strlen(wide[i]);
  if (n >= 3 && (unsigned char)s[0] == 0xe2 && (unsigned char)s[1] == 0x80 && (unsigned char)s[2] >= 0x80 &&
      (unsigned char)s[2] <= 0x8a)
    return 3; /* U+2000..U+200A */
  return 0;
}

static size_t char_len(const char *s, size_t n) {
  size_t e = 1;
  while (e < n && ((unsigned char)s[e] & 0xC0) == 0x80) e++;
  return e;
}

/* Whether the character at s is one of `chars` (a string value), or whitespace when chars is none. */
static size_t strip_match(const char *s, size_t n, JValue chars) {
  if (chars.t != JV_STR) return space_len(s, n);
  size_t k = char_len(s, n);
  for (size_t i = 0; i < chars.n;) {
    size_t m = char_len(chars.u.s + i, chars.n - i);
    if (m == k && !memcmp(chars.u.s + i, s, k)) return k;
    i += m;
  }
  return 0;
}

JValue jstrip(JCtx *c, JValue s, JValue chars, int left, int right) {
  size_t b = 0, e = s.n;
  if (left)
    for (size_t k; b < e && (k = strip_match(s.u.s + b, e - b, chars)); b += k) {}
  if (right) {
    while (e > b) {
      size_t st = e - 1;
      while (st > b && ((unsigned char)s.u.s[st] & 0xC0) == 0x80) st--;
      if (!strip_match(s.u.s + st, e - st, chars)) break;
      e = st;
    }
  }
  return jv_str(c, s.u.s + b, e - b);
}

JValue jreplace(JCtx *c, JValue s, JValue old, JValue new, int64_t count) {
  JBuf *b = jbuf_new(c);
  size_t i = 0;
  for (int64_t done = 0; i <= s.n && (count < 0 || done < count); done++) {
    size_t j = i;
    if (old.n == 0) { /* Python inserts `new` between every character */
      jbuf_put(c, b, new.u.s, new.n);
      if (i == s.n) {
        i = s.n + 1;
        break;
      }
      size_t k = char_len(s.u.s + i, s.n - i);
      jbuf_put(c, b, s.u.s + i, k);
      i += k;
      continue;
    }
    while (j + old.n <= s.n && memcmp(s.u.s + j, old.u.s, old.n)) j++;
    if (j + old.n > s.n) break;
    jbuf_put(c, b, s.u.s + i, j - i);
    jbuf_put(c, b, new.u.s, new.n);
    i = j + old.n;
  }
  if (i < s.n) jbuf_put(c, b, s.u.s + i, s.n - i);
  return jbuf_value(c, b);
}

static JValue split(JCtx *c, JValue s, JValue sep, int64_t maxsplit) {
  JValue out = jv_list(c, s.n + 1);
  size_t n = 0, i = 0;
  if (sep.t != JV_STR) { /* runs of whitespace, ends ignored */
    for (;;) {
      size_t k;
      while (i < s.n && (k = space_len(s.u.s + i, s.n - i))) i += k;
      if (i >= s.n) break;
      size_t st = i;
      if (maxsplit >= 0 && (int64_t)n >= maxsplit) {
        size_t e = s.n;
        JValue rest = jstrip(c, jv_str(c, s.u.s + st, e - st), jv_none(), 0, 1);
        out.u.l->v[n++] = rest;
        break;
      }
      while (i < s.n && !space_len(s.u.s + i, s.n - i)) i += char_len(s.u.s + i, s.n - i);
      out.u.l->v[n++] = jv_str(c, s.u.s + st, i - st);
    }
  } else {
    for (;;) {
      size_t j = i;
      int found = 0;
      if (maxsplit < 0 || (int64_t)n < maxsplit)
        for (; j + sep.n <= s.n; j++)
          if (!memcmp(s.u.s + j, sep.u.s, sep.n)) {
            found = 1;
            break;
          }
      if (!found) {
        out.u.l->v[n++] = jv_str(c, s.u.s + i, s.n - i);
        break;
      }
      out.u.l->v[n++] = jv_str(c, s.u.s + i, j - i);
      i = j + sep.n;
    }
  }
  out.u.l->n = n;
  return out;
}

JValue jcase(JCtx *c, JValue s, int mode); /* jinja_filters.c: 0 lower, 1 upper, 2 capitalize, 3 title */

static int starts_at(JValue s, size_t at, JValue p) { return at + p.n <= s.n && !memcmp(s.u.s + at, p.u.s, p.n); }

static JValue arg(JArgs *a, int i, const char *name, JValue def) {
  for (int k = 0; k < a->nkw; k++)
    if (name && !strcmp(a->kwnames[k], name)) return a->kw[k];
  return i >= 0 && i < a->npos ? a->pos[i] : def;
}

static JValue str_arg(JCtx *c, const JNode *at, JArgs *a, int i, const char *what) {
  JValue v = arg(a, i, NULL, jv_undef(NULL));
  if (v.t != JV_STR) jfail(c, at->line, at->col, "%s: expected a string argument, got %s", what, jv_type_name(v));
  return v;
}

static JValue str_method(JCtx *c, const JNode *at, JValue s, const char *name, JArgs *a) {
  if (!strcmp(name, "startswith") || !strcmp(name, "endswith")) {
    JValue p = arg(a, 0, NULL, jv_undef(NULL));
    JList one = {&p, 1}, *opts = p.t == JV_LIST ? p.u.l : &one;
    for (size_t i = 0; i < opts->n; i++) {
      JValue o = opts->v[i];
      if (o.t != JV_STR) jfail(c, at->line, at->col, "%s: expected a string argument, got %s", name, jv_type_name(o));
      if (o.n <= s.n && starts_at(s, name[0] == 's' ? 0 : s.n - o.n, o)) return jv_bool(1);
    }
    return jv_bool(0);
  }
  if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip"))
    return jstrip(c, s, arg(a, 0, "chars", jv_none()), name[0] != 'r', name[0] != 'l');
  if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
    JValue sep = arg(a, 0, "sep", jv_none()), mx = arg(a, 1, "maxsplit", jv_int(-1));
    if (sep.t == JV_STR && !sep.n) jfail(c, at->line, at->col, "split: empty separator");
    if (!strcmp(name, "rsplit") && mx.u.i >= 0) jfail(c, at->line, at->col, "rsplit with maxsplit is not supported");
    return split(c, s, sep, mx.t == JV_INT ? mx.u.i : -1);
  }
  if (!strcmp(name, "upper")) return jcase(c, s, 1);
  if (!strcmp(name, "lower")) return jcase(c, s, 0);
  if (!strcmp(name, "capitalize")) return jcase(c, s, 2);
  if (!strcmp(name, "title")) return jcase(c, s, 4);
  if (!strcmp(name, "replace")) {
    JValue cnt = arg(a, 2, "count", jv_int(-1));
    return jreplace(c, s, str_arg(c, at, a, 0, name), str_arg(c, at, a, 1, name), cnt.t == JV_INT ? cnt.u.i : -1);
  }
  if (!strcmp(name, "find") || !strcmp(name, "count")) {
    JValue p = str_arg(c, at, a, 0, name);
    int64_t count = 0;
    for (size_t i = 0; i + p.n <= s.n;) {
      if (starts_at(s, i, p)) {
        if (name[0] == 'f') return jv_int((int64_t)utf8_count(s.u.s, i));
        count++;
        i += p.n ? p.n : 1;
      } else i++;
    }
    return jv_int(name[0] == 'f' ? -1 : count + (p.n == 0 ? 1 : 0));
  }
  if (!strcmp(name, "join")) {
    JList *items = jiterate(c, at, arg(a, 0, NULL, jv_undef(NULL)));
    JBuf *b = jbuf_new(c);
    for (size_t i = 0; i < items->n; i++) {
      if (items->v[i].t != JV_STR)
        jfail(c, at->line, at->col, "join: item %zu is a %s, not a string", i, jv_type_name(items->v[i]));
      if (i) jbuf_put(c, b, s.u.s, s.n);
      jbuf_put(c, b, items->v[i].u.s, items->v[i].n);
    }
    return jbuf_value(c, b);
  }
  if (!strcmp(name, "splitlines")) {
    JValue l = split(c, s, jv_cstr("\n"), -1);
    if (l.u.l->n && l.u.l->v[l.u.l->n - 1].n == 0) l.u.l->n--;
    return l;
  }
  if (!strcmp(name, "isdigit") || !strcmp(name, "isspace") || !strcmp(name, "isalpha")) {
    if (!s.n) return jv_bool(0);
    for (size_t i = 0; i < s.n; i++) {
      char ch = s.u.s[i];
      int ok = name[2] == 'd'   ? ch >= '0' && ch <= '9'
               : name[2] == 's' ? space_len(s.u.s + i, s.n - i) > 0
                                : ((ch | 32) >= 'a' && (ch | 32) <= 'z');
      if (!ok) return jv_bool(0);
    }
    return jv_bool(1);
  }
  if (!strcmp(name, "format")) { /* "{}" and "{0}" fields only */
    JBuf *b = jbuf_new(c);
    int next = 0;
    for (size_t i = 0; i < s.n; i++) {
      if (s.u.s[i] == '{' && i + 1 < s.n && s.u.s[i + 1] == '{') jbuf_puts(c, b, "{"), i++;
      else if (s.u.s[i] == '}' && i + 1 < s.n && s.u.s[i + 1] == '}') jbuf_puts(c, b, "}"), i++;
      else if (s.u.s[i] == '{') {
        size_t e = i + 1;
        int idx = 0, explicit_idx = 0;
        while (e < s.n && s.u.s[e] >= '0' && s.u.s[e] <= '9') idx = idx * 10 + s.u.s[e++] - '0', explicit_idx = 1;
        if (e >= s.n || s.u.s[e] != '}') jfail(c, at->line, at->col, "format: only {} and {N} fields are supported");
        if (!explicit_idx) idx = next++;
        if (idx >= a->npos) jfail(c, at->line, at->col, "format: no argument %d", idx);
        jv_to_str(c, b, a->pos[idx]);
        i = e;
      } else jbuf_put(c, b, s.u.s + i, 1);
    }
    return jbuf_value(c, b);
  }
  jfail(c, at->line, at->col, "str has no method '%s'", name);
}

JValue jformat_percent(JCtx *c, const JNode *at, JValue fmt, JValue args) {
  JList one = {&args, 1, 0}, *vals = args.t == JV_LIST && args.u.l->tuple ? args.u.l : &one;
  size_t next = 0;
  JBuf *b = jbuf_new(c);
  for (size_t i = 0; i < fmt.n; i++) {
    if (fmt.u.s[i] != '%') {
      jbuf_put(c, b, fmt.u.s + i, 1);
      continue;
    }
    int prec = -1;
    if (i + 2 < fmt.n && fmt.u.s[i + 1] == '.' && fmt.u.s[i + 2] >= '0' && fmt.u.s[i + 2] <= '9')
      prec = fmt.u.s[i + 2] - '0', i += 2;
    char conv = i + 1 < fmt.n ? fmt.u.s[++i] : 0;
    if (conv == '%') {
      jbuf_puts(c, b, "%");
      continue;
    }
    if (!strchr("srdif", conv) || !conv)
      jfail(c, at->line, at->col, "'%%' formatting: only %%s, %%r, %%d, %%i, %%f and %%%%");
    if (next >= vals->n) jfail(c, at->line, at->col, "'%%' formatting: not enough arguments");
    JValue v = vals->v[next++];
    if (conv == 's') jv_to_str(c, b, v);
    else if (conv == 'r') jv_repr(c, b, v);
    else {
      if (v.t != JV_INT && v.t != JV_BOOL && v.t != JV_FLOAT)
        jfail(c, at->line, at->col, "'%%' formatting: %%%c needs a number, not %s", conv, jv_type_name(v));
      char tmp[400];
      double x = v.t == JV_FLOAT ? v.u.f : (double)v.u.i;
      if (conv == 'f') snprintf(tmp, sizeof tmp, "%.*f", prec < 0 ? 6 : prec, x);
      else if (v.t == JV_FLOAT) snprintf(tmp, sizeof tmp, "%.0f", trunc(x));
      else snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
      jbuf_puts(c, b, tmp);
    }
  }
  if (next < vals->n) jfail(c, at->line, at->col, "'%%' formatting: not all arguments converted");
  return jbuf_value(c, b);
}

static JValue global(JCtx *c, const JNode *at, const char *name, JArgs *a) {
  if (!strcmp(name, "range")) {
    int64_t v[3] = {0, 0, 1};
    if (a->npos < 1 || a->npos > 3) jfail(c, at->line, at->col, "range takes 1 to 3 arguments");
    for (int i = 0; i < a->npos; i++) {
      if (a->pos[i].t != JV_INT && a->pos[i].t != JV_BOOL)
        jfail(c, at->line, at->col, "range: arguments must be integers");
      v[a->npos == 1 ? 1 : i] = a->pos[i].u.i;
    }
    if (v[2] == 0) jfail(c, at->line, at->col, "range: step must not be zero");
    __int128 lo = v[0], hi = v[1], st = v[2]; /* no overflow at the ends of int64 */
    __int128 span = st > 0 ? (hi > lo ? (hi - lo + st - 1) / st : 0) : (lo > hi ? (lo - hi - st - 1) / -st : 0);
    if (span > (__int128)(c->lim.max_memory / sizeof(JValue)))
      jfail(c, at->line, at->col, "range of more than %zu items is too long", c->lim.max_memory / sizeof(JValue));
    int64_t n = (int64_t)span;
    JValue l = jv_list(c, (size_t)n);
    for (int64_t i = 0; i < n; i++) l.u.l->v[i] = jv_int((int64_t)(lo + (__int128)i * st));
    return l;
  }
  if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
    JValue d = jv_dict(c, name[0] == 'n' ? JV_NS : JV_DICT);
    for (int i = 0; i < a->npos; i++) {
      if (a->pos[i].t != JV_DICT) jfail(c, at->line, at->col, "%s: positional arguments must be dicts", name);
      for (size_t k = 0; k < a->pos[i].u.d->n; k++) jv_dict_set(c, d.u.d, a->pos[i].u.d->k[k], a->pos[i].u.d->v[k]);
    }
    for (int i = 0; i < a->nkw; i++) jv_dict_set(c, d.u.d, jv_cstr(a->kwnames[i]), a->kw[i]);
    return d;
  }
  if (!strcmp(name, "raise_exception")) {
    JValue m = jv_stringify(c, arg(a, 0, NULL, jv_cstr("")));
    jfail(c, at->line, at->col, "raise_exception: %s", m.u.s);
  }
  if (!strcmp(name, "strftime_now")) {
    JValue f = str_arg(c, at, a, 0, name);
    char out[256];
    size_t n = f.n < 100 ? strftime(out, sizeof out, f.u.s, &c->now) : 0;
    if (!n && f.n) jfail(c, at->line, at->col, "strftime_now: cannot format '%s'", f.u.s);
    return jv_str(c, out, n);
  }
  jfail(c, at->line, at->col, "unknown function '%s'", name);
}

JValue jcall_method(JCtx *c, const JNode *at, JMethod *m, JArgs *a) {
  JValue s = m->self;
  if (s.t == JV_STR) return str_method(c, at, s, m->name, a);
  if (s.t == JV_LOOP) { /* loop.cycle(a, b, ...) */
    if (!a->npos) jfail(c, at->line, at->col, "loop.cycle needs at least one value");
    return a->pos[s.u.loop->i % (size_t)a->npos];
  }
  if (s.t == JV_DICT) {
    JDict *d = s.u.d;
    if (!strcmp(m->name, "get")) {
      JValue v;
      return jv_dict_get(d, arg(a, 0, NULL, jv_none()), &v) ? v : arg(a, 1, NULL, jv_none());
    }
    JValue l = jv_list(c, d->n);
    for (size_t i = 0; i < d->n; i++) {
      if (m->name[0] == 'k') l.u.l->v[i] = d->k[i];
      else if (m->name[0] == 'v') l.u.l->v[i] = d->v[i];
      else {
        JValue pair = jv_list(c, 2);
        pair.u.l->tuple = 1;
        pair.u.l->v[0] = d->k[i], pair.u.l->v[1] = d->v[i];
        l.u.l->v[i] = pair;
      }
    }
    return l;
  }
  return global(c, at, m->name, a);
}
