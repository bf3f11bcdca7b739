/* Jinja evaluator: expressions to values and statements to output, with Jinja2's scoping (a for loop's
 * body gets a fresh scope each iteration, a macro's body one per call; `set` writes the innermost scope,
 * so only a namespace carries values out of a loop), and the render entry point with its limits. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "jinja.h"

const JinjaLimits JINJA_DEFAULT_LIMITS = {200, 20000000, 16u << 20, 256u << 20};

struct JFrame {
  JFrame *parent;
  const char **names;
  JValue *vals;
  int n, cap;
};

struct JMacro {
  const JNode *def;
  JFrame *closure;
};

void jfail(JCtx *c, int line, int col, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!line && c->at) line = c->at->line, col = c->at->col;
  diag_error(c->d, line, col, "%s", msg);
  longjmp(c->fail, 1);
}

void *jalloc(JCtx *c, size_t n) {
  if (n > c->lim.max_memory - c->mem)
    jfail(c, 0, 0, "the template needs more than %zu bytes of memory", c->lim.max_memory);
  c->mem += n;
  return arena_alloc(c->arena, n ? n : 1);
}

void jdepth_enter(JCtx *c, int line, int col) {
  if (++c->depth > c->lim.max_depth) jfail(c, line, col, "nested deeper than %d levels", c->lim.max_depth);
}

static void step(JCtx *c, const JNode *at) {
  if (++c->steps > c->lim.max_steps)
    jfail(c, at->line, at->col, "the template ran for more than %ld steps", c->lim.max_steps);
}

JFrame *jframe_new(JCtx *c, JFrame *parent) {
  JFrame *f = jalloc(c, sizeof *f);
  f->parent = parent;
  return f;
}

void jframe_set(JCtx *c, JFrame *f, const char *name, JValue v) {
  for (int i = 0; i < f->n; i++) {
    if (!strcmp(f->names[i], name)) {
      f->vals[i] = v;
      return;
    }
  }
  if (f->n == f->cap) {
    int cap = f->cap ? 2 * f->cap : 2;
    const char **nn = jalloc(c, sizeof *nn * (size_t)cap);
    JValue *nv = jalloc(c, sizeof *nv * (size_t)cap);
    if (f->n) memcpy(nn, f->names, sizeof *nn * (size_t)f->n), memcpy(nv, f->vals, sizeof *nv * (size_t)f->n);
    f->names = nn, f->vals = nv, f->cap = cap;
  }
  f->names[f->n] = name, f->vals[f->n++] = v;
}

static JValue lookup(JFrame *f, const char *name) {
  for (; f; f = f->parent)
    for (int i = f->n - 1; i >= 0; i--)
      if (!strcmp(f->names[i], name)) return f->vals[i];
  return jv_undef(name);
}

static _Noreturn void undefined_error(JCtx *c, const JNode *at, JValue v) {
  if (v.u.s) jfail(c, at->line, at->col, "'%s' is undefined", v.u.s);
  jfail(c, at->line, at->col, "a value is undefined");
}

/* a + b, a - b or a * b of integers, an overflow being an error (Python's integers have no bound). */
static JValue int_op(JCtx *c, const JNode *at, char op, int64_t a, int64_t b) {
  int64_t r;
  int over = op == '+'   ? __builtin_add_overflow(a, b, &r)
             : op == '-' ? __builtin_sub_overflow(a, b, &r)
                         : __builtin_mul_overflow(a, b, &r);
  if (over) jfail(c, at->line, at->col, "integer overflow in '%c'", op);
  return jv_int(r);
}

static JValue repeat(JCtx *c, const JNode *at, JValue s, int64_t times) {
  if (times <= 0) return s.t == JV_STR ? jv_cstr("") : jv_list(c, 0);
  size_t unit = s.t == JV_STR ? s.n : s.u.l->n;
  if (unit && (uint64_t)times > c->lim.max_output / unit)
    jfail(c, at->line, at->col, "'*' would make more than %zu items", c->lim.max_output);
  size_t total = unit * (size_t)times;
  if (s.t == JV_STR) {
    char *p = jalloc(c, total + 1);
    for (int64_t i = 0; i < times; i++) memcpy(p + (size_t)i * unit, s.u.s, unit);
    p[total] = 0;
    return (JValue){JV_STR, total, {.s = p}};
  }
  JValue l = jv_list(c, total);
  for (size_t i = 0; i < total; i++) l.u.l->v[i] = s.u.l->v[i % unit];
  return l;
}

static JValue binop(JCtx *c, const JNode *at, const char *op, JValue a, JValue b) {
  if (op[0] == '~') {
    JBuf *buf = jbuf_new(c);
    jv_to_str(c, buf, a), jv_to_str(c, buf, b);
    return jbuf_value(c, buf);
  }
  if (a.t == JV_UNDEF) undefined_error(c, at, a);
  if (b.t == JV_UNDEF) undefined_error(c, at, b);
  int ints = (a.t == JV_INT || a.t == JV_BOOL) && (b.t == JV_INT || b.t == JV_BOOL);
  int nums =
      (a.t == JV_INT || a.t == JV_BOOL || a.t == JV_FLOAT) && (b.t == JV_INT || b.t == JV_BOOL || b.t == JV_FLOAT);
  double x = a.t == JV_FLOAT ? a.u.f : (double)a.u.i, y = b.t == JV_FLOAT ? b.u.f : (double)b.u.i;
  if (!strcmp(op, "+")) {
    if (ints) return int_op(c, at, '+', a.u.i, b.u.i);
    if (nums) return jv_float(x + y);
    if (a.t == JV_STR && b.t == JV_STR) {
      char *p = jalloc(c, a.n + b.n + 1);
      memcpy(p, a.u.s, a.n), memcpy(p + a.n, b.u.s, b.n), p[a.n + b.n] = 0;
      if (a.n + b.n > c->lim.max_output) jfail(c, at->line, at->col, "a string over the output limit");
      return (JValue){JV_STR, a.n + b.n, {.s = p}};
    }
    if (a.t == JV_LIST && b.t == JV_LIST) {
      JValue l = jv_list(c, a.u.l->n + b.u.l->n);
      if (a.u.l->n) memcpy(l.u.l->v, a.u.l->v, sizeof(JValue) * a.u.l->n);
      if (b.u.l->n) memcpy(l.u.l->v + a.u.l->n, b.u.l->v, sizeof(JValue) * b.u.l->n);
      return l;
    }
  } else if (!strcmp(op, "-")) {
    if (ints) return int_op(c, at, '-', a.u.i, b.u.i);
    if (nums) return jv_float(x - y);
  } else if (!strcmp(op, "*")) {
    if (ints) return int_op(c, at, '*', a.u.i, b.u.i);
    if (nums) return jv_float(x * y);
    if ((a.t == JV_STR || a.t == JV_LIST) && (b.t == JV_INT || b.t == JV_BOOL)) return repeat(c, at, a, b.u.i);
    if ((b.t == JV_STR || b.t == JV_LIST) && (a.t == JV_INT || a.t == JV_BOOL)) return repeat(c, at, b, a.u.i);
  } else if (!strcmp(op, "%") && a.t == JV_STR) {
    return jformat_percent(c, at, a, b);
  } else if (!strcmp(op, "/") || !strcmp(op, "//") || !strcmp(op, "%")) {
    if (nums) {
      if (y == 0) jfail(c, at->line, at->col, "division by zero");
      if (op[0] == '/' && !op[1]) return jv_float(x / y);
      if (ints) {
        if (a.u.i == INT64_MIN && b.u.i == -1) jfail(c, at->line, at->col, "integer overflow in '%s'", op);
        int64_t q = a.u.i / b.u.i, m = a.u.i % b.u.i;
        if (m != 0 && (m < 0) != (b.u.i < 0)) q--, m += b.u.i; /* Python floors */
        return jv_int(op[0] == '%' ? m : q);
      }
      if (op[0] == '/') return jv_float(floor(x / y));
      double m = fmod(x, y);
      if (m != 0 && (m < 0) != (y < 0)) m += y;
      return jv_float(m);
    }
  } else if (!strcmp(op, "**")) {
    if (ints && b.u.i >= 0) {
      int64_t p = 1, base = a.u.i;
      for (int64_t e = b.u.i; e > 0; e--)
        if (__builtin_mul_overflow(p, base, &p)) jfail(c, at->line, at->col, "integer overflow in '**'");
        else if (p == 0 || p == 1) break;
      return jv_int(p);
    }
    if (nums) return jv_float(pow(x, y));
  }
  jfail(c, at->line, at->col, "unsupported operand types for %s: %s and %s", op, jv_type_name(a), jv_type_name(b));
}

static int contains(JCtx *c, const JNode *at, JValue item, JValue seq) {
  switch (seq.t) {
  case JV_UNDEF: return 0;
  case JV_STR:
    if (item.t != JV_STR) jfail(c, at->line, at->col, "'in <string>' requires a string, not %s", jv_type_name(item));
    if (!item.n) return 1;
    for (size_t i = 0; i + item.n <= seq.n; i++)
      if (!memcmp(seq.u.s + i, item.u.s, item.n)) return 1;
    return 0;
  case JV_LIST:
    for (size_t i = 0; i < seq.u.l->n; i++)
      if (jv_equal(seq.u.l->v[i], item)) return 1;
    return 0;
  case JV_DICT:
  case JV_NS: {
    JValue v;
    return jv_dict_get(seq.u.d, item, &v);
  }
  default: jfail(c, at->line, at->col, "argument of type %s is not a container", jv_type_name(seq));
  }
}

static JArgs eval_args(JCtx *c, JFrame *f, const JNode *e, JValue *first) {
  JArgs a = {0};
  int extra = first != NULL;
  a.npos = e->items.n + extra;
  a.pos = jalloc(c, sizeof *a.pos * (size_t)(a.npos + 1));
  if (first) a.pos[0] = *first;
  for (int i = 0; i < e->items.n; i++) a.pos[i + extra] = jeval(c, f, e->items.v[i]);
  a.nkw = e->nnames;
  a.kwnames = e->names;
  a.kw = jalloc(c, sizeof *a.kw * (size_t)(a.nkw + 1));
  for (int i = 0; i < a.nkw; i++) a.kw[i] = jeval(c, f, e->vals.v[i]);
  return a;
}

static int64_t slice_index(JCtx *c, const JNode *at, JValue v, int64_t len, int64_t def) {
  if (v.t == JV_UNDEF || v.t == JV_NONE) return def;
  if (v.t != JV_INT && v.t != JV_BOOL) jfail(c, at->line, at->col, "slice indices must be integers");
  return v.u.i;
}

/* obj[start:stop:step] of a list or string (by code points), as Python. */
static JValue slice(JCtx *c, const JNode *at, JValue obj, JValue s0, JValue s1, JValue s2) {
  if (obj.t == JV_UNDEF) undefined_error(c, at, obj);
  if (obj.t != JV_LIST && obj.t != JV_STR) jfail(c, at->line, at->col, "cannot slice a %s", jv_type_name(obj));
  int64_t len = obj.t == JV_LIST ? (int64_t)obj.u.l->n : (int64_t)utf8_count(obj.u.s, obj.n);
  int64_t st = slice_index(c, at, s2, len, 1);
  if (st == 0) jfail(c, at->line, at->col, "slice step cannot be zero");
  if (st > len + 1) st = len + 1; /* any longer step takes one item: keeps i += st from overflowing */
  if (st < -(len + 1)) st = -(len + 1);
  int64_t lo = slice_index(c, at, s0, len, st > 0 ? 0 : len - 1), hi = slice_index(c, at, s1, len, st > 0 ? len : -1);
  if (s0.t == JV_INT || s0.t == JV_BOOL) {
    if (lo < 0) lo += len;
    if (lo < 0) lo = st > 0 ? 0 : -1;
    if (lo > len) lo = st > 0 ? len : len - 1;
    if (st < 0 && lo >= len) lo = len - 1;
  }
  if (s1.t == JV_INT || s1.t == JV_BOOL) {
    if (hi < 0) hi += len;
    if (hi < 0) hi = st > 0 ? 0 : -1;
    if (hi > len) hi = len;
  }
  size_t count = 0;
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) count++;
  if (obj.t == JV_LIST) {
    JValue l = jv_list(c, count);
    l.u.l->tuple = obj.u.l->tuple;
    size_t k = 0;
    for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) l.u.l->v[k++] = obj.u.l->v[i];
    return l;
  }
  JBuf *b = jbuf_new(c);
  for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
    size_t o = utf8_offset(obj.u.s, obj.n, (size_t)i), e = o + 1;
    while (e < obj.n && ((unsigned char)obj.u.s[e] & 0xC0) == 0x80) e++;
    jbuf_put(c, b, obj.u.s + o, e - o);
  }
  return jbuf_value(c, b);
}

static JValue eval_cmp(JCtx *c, JFrame *f, const JNode *e) {
  JValue left = jeval(c, f, e->items.v[0]);
  for (int i = 1; i < e->items.n; i++) {
    JValue right = jeval(c, f, e->items.v[i]);
    const char *op = e->ops[i - 1];
    int r;
    if (!strcmp(op, "==")) r = jv_equal(left, right);
    else if (!strcmp(op, "!=")) r = !jv_equal(left, right);
    else if (!strcmp(op, "in")) r = contains(c, e, left, right);
    else if (!strcmp(op, "not in")) r = !contains(c, e, left, right);
    else {
      int k = jv_compare(c, e, left, right);
      r = op[0] == '<' ? (op[1] ? k <= 0 : k < 0) : (op[1] ? k >= 0 : k > 0);
    }
    if (!r) return jv_bool(0);
    left = right;
  }
  return jv_bool(1);
}

JValue jeval(JCtx *c, JFrame *f, const JNode *e) {
  c->at = e;
  step(c, e);
  jdepth_enter(c, e->line, e->col);
  JValue v;
  switch (e->k) {
  case JN_LIT: v = e->lit; break;
  case JN_NAME: v = lookup(f, e->name); break;
  case JN_LIST:
    v = jv_list(c, (size_t)e->items.n);
    v.u.l->tuple = e->negate;
    for (int i = 0; i < e->items.n; i++) v.u.l->v[i] = jeval(c, f, e->items.v[i]);
    break;
  case JN_DICT:
    v = jv_dict(c, JV_DICT);
    for (int i = 0; i < e->items.n; i++) {
      JValue k = jeval(c, f, e->items.v[i]);
      jv_dict_set(c, v.u.d, k, jeval(c, f, e->vals.v[i]));
    }
    break;
  case JN_ATTR: {
    JValue obj = jeval(c, f, e->a);
    if (obj.t == JV_UNDEF) undefined_error(c, e->a, obj);
    v = jgetattr(c, obj, e->name);
    break;
  }
  case JN_ITEM: {
    JValue obj = jeval(c, f, e->a);
    if (obj.t == JV_UNDEF) undefined_error(c, e->a, obj);
    v = jgetitem(c, e, obj, jeval(c, f, e->b));
    break;
  }
  case JN_SLICE: {
    JValue obj = jeval(c, f, e->a), p[3];
    for (int i = 0; i < 3; i++) p[i] = e->items.v[i] ? jeval(c, f, e->items.v[i]) : jv_none();
    v = slice(c, e, obj, p[0], p[1], p[2]);
    break;
  }
  case JN_CALL: {
    JValue fn = jeval(c, f, e->a);
    JArgs args = eval_args(c, f, e, NULL);
    if (fn.t == JV_UNDEF) undefined_error(c, e->a, fn);
    v = jcall(c, e, fn, &args);
    break;
  }
  case JN_FILTER: {
    JValue in = jeval(c, f, e->a);
    JArgs args = eval_args(c, f, e, NULL);
    v = jfilter(c, e, e->name, in, &args);
    break;
  }
  case JN_TEST: {
    JValue in = jeval(c, f, e->a);
    JArgs args = eval_args(c, f, e, NULL);
    v = jv_bool(jtest(c, e, e->name, in, &args) != e->negate);
    break;
  }
  case JN_NOT: v = jv_bool(!jv_truthy(jeval(c, f, e->a))); break;
  case JN_NEG:
  case JN_POS: {
    JValue a = jeval(c, f, e->a);
    if (a.t == JV_FLOAT) v = jv_float(e->k == JN_NEG ? -a.u.f : a.u.f);
    else if (a.t == JV_INT || a.t == JV_BOOL) {
      if (e->k == JN_NEG && a.u.i == INT64_MIN) jfail(c, e->line, e->col, "integer overflow in '-'");
      v = jv_int(e->k == JN_NEG ? -a.u.i : a.u.i);
    } else jfail(c, e->line, e->col, "bad operand type for unary %c: %s", e->k == JN_NEG ? '-' : '+', jv_type_name(a));
    break;
  }
  case JN_BIN: {
    JValue a = jeval(c, f, e->a);
    v = binop(c, e, e->name, a, jeval(c, f, e->b));
    break;
  }
  case JN_AND:
    v = jeval(c, f, e->a);
    if (jv_truthy(v)) v = jeval(c, f, e->b);
    break;
  case JN_OR:
    v = jeval(c, f, e->a);
    if (!jv_truthy(v)) v = jeval(c, f, e->b);
    break;
  case JN_CMP: v = eval_cmp(c, f, e); break;
  case JN_COND:
    if (jv_truthy(jeval(c, f, e->b))) v = jeval(c, f, e->a);
    else v = e->c ? jeval(c, f, e->c) : jv_undef(NULL);
    break;
  default: jfail(c, e->line, e->col, "not an expression");
  }
  c->depth--;
  return v;
}

/* Statements return 0, or JN_BREAK / JN_CONTINUE while a loop control unwinds to its loop. */
static int exec_body(JCtx *c, JFrame *f, JNodes body);

static void assign(JCtx *c, JFrame *f, const JNode *at, const char **names, int n, JValue v) {
  if (n == 1) return jframe_set(c, f, names[0], v);
  if (v.t != JV_LIST) jfail(c, at->line, at->col, "cannot unpack a %s into %d names", jv_type_name(v), n);
  if (v.u.l->n != (size_t)n) jfail(c, at->line, at->col, "cannot unpack %zu values into %d names", v.u.l->n, n);
  for (int i = 0; i < n; i++) jframe_set(c, f, names[i], v.u.l->v[i]);
}

static JValue loop_info(JCtx *c, JList *items, size_t i) {
  JLoop *l = jalloc(c, sizeof *l);
  l->items = items, l->i = i;
  return (JValue){JV_LOOP, 0, {.loop = l}};
}

static void exec_for(JCtx *c, JFrame *f, const JNode *s) {
  JList *all = jiterate(c, s->a, jeval(c, f, s->a)), *items = all;
  if (s->b) { /* for x in xs if cond: loop.* counts what the condition keeps */
    JValue kept = jv_list(c, all->n);
    kept.u.l->n = 0;
    for (size_t i = 0; i < all->n; i++) {
      JFrame *g = jframe_new(c, f);
      assign(c, g, s, s->names, s->nnames, all->v[i]);
      if (jv_truthy(jeval(c, g, s->b))) kept.u.l->v[kept.u.l->n++] = all->v[i];
    }
    items = kept.u.l;
  }
  for (size_t i = 0; i < items->n; i++) {
    step(c, s);
    JFrame *g = jframe_new(c, f);
    jframe_set(c, g, "loop", loop_info(c, items, i));
    assign(c, g, s, s->names, s->nnames, items->v[i]);
    if (exec_body(c, g, s->body) == JN_BREAK) break;
  }
  if (!items->n) exec_body(c, jframe_new(c, f), s->orelse);
}

static JValue capture(JCtx *c, JFrame *f, JNodes body) {
  JBuf *saved = c->out, *b = jbuf_new(c);
  c->out = b;
  exec_body(c, f, body);
  c->out = saved;
  return jbuf_value(c, b);
}

static JValue call_macro(JCtx *c, const JNode *at, JMacro *m, JArgs *args) {
  const JNode *def = m->def;
  if (args->npos > def->nnames)
    jfail(c, at->line, at->col, "macro '%s' takes at most %d arguments (%d given)", def->name, def->nnames, args->npos);
  jdepth_enter(c, at->line, at->col);
  JFrame *g = jframe_new(c, m->closure);
  for (int i = 0; i < def->nnames; i++) {
    JValue v = jv_undef(def->names[i]);
    int given = 0;
    if (i < args->npos) v = args->pos[i], given = 1;
    for (int k = 0; k < args->nkw; k++)
      if (!strcmp(args->kwnames[k], def->names[i])) v = args->kw[k], given = 1;
    if (!given && def->vals.v[i]) v = jeval(c, g, def->vals.v[i]);
    jframe_set(c, g, def->names[i], v);
  }
  for (int k = 0; k < args->nkw; k++) {
    int known = 0;
    for (int i = 0; i < def->nnames; i++) known |= !strcmp(args->kwnames[k], def->names[i]);
    if (!known) jfail(c, at->line, at->col, "macro '%s' has no argument '%s'", def->name, args->kwnames[k]);
  }
  JValue r = capture(c, g, def->body);
  c->depth--;
  return r;
}

JValue jcall(JCtx *c, const JNode *at, JValue fn, JArgs *args) {
  if (fn.t == JV_MACRO) return call_macro(c, at, fn.u.mac, args);
  if (fn.t == JV_METHOD) return jcall_method(c, at, fn.u.m, args);
  if (fn.t != JV_FUNC) jfail(c, at->line, at->col, "a %s is not callable", jv_type_name(fn));
  JMethod global = {jv_none(), NULL};
  static const char *const names[] = {NULL, "range", "namespace", "dict", "raise_exception", "strftime_now"};
  global.name = names[fn.u.i];
  return jcall_method(c, at, &global, args);
}

static int exec_stmt(JCtx *c, JFrame *f, const JNode *s) {
  c->at = s;
  step(c, s);
  switch (s->k) {
  case JN_TEXT: jbuf_put(c, c->out, s->lit.u.s, s->lit.n); return 0;
  case JN_OUTPUT: jv_to_str(c, c->out, jeval(c, f, s->a)); return 0;
  case JN_IF: return exec_body(c, f, jv_truthy(jeval(c, f, s->a)) ? s->body : s->orelse);
  case JN_FOR: exec_for(c, f, s); return 0;
  case JN_SET: {
    JValue v = jeval(c, f, s->b);
    if (!s->a) {
      assign(c, f, s, s->names, s->nnames, v);
      return 0;
    }
    JValue ns = lookup(f, s->a->a->name);
    if (ns.t != JV_NS)
      jfail(c, s->line, s->col, "cannot set an attribute on a value of type %s (only on a namespace)",
            jv_type_name(ns));
    jv_dict_set(c, ns.u.d, jv_cstr(s->a->name), v);
    return 0;
  }
  case JN_SET_BLOCK: jframe_set(c, f, s->names[0], capture(c, f, s->body)); return 0;
  case JN_MACRO: {
    JMacro *m = jalloc(c, sizeof *m);
    m->def = s, m->closure = f;
    jframe_set(c, f, s->name, (JValue){JV_MACRO, 0, {.mac = m}});
    return 0;
  }
  case JN_BREAK:
  case JN_CONTINUE: return s->k;
  case JN_BODY: return exec_body(c, f, s->body);
  default: jfail(c, s->line, s->col, "not a statement");
  }
}

static int exec_body(JCtx *c, JFrame *f, JNodes body) {
  jdepth_enter(c, 0, 0);
  for (int i = 0; i < body.n; i++) {
    int r = exec_stmt(c, f, body.v[i]);
    if (r) {
      c->depth--;
      return r;
    }
  }
  c->depth--;
  return 0;
}

void jexec(JCtx *c, JFrame *f, JNodes body) { exec_body(c, f, body); }

int jinja_render(const char *src, JValue (*make_vars)(JCtx *c, void *arg), void *arg, const JinjaLimits *lim,
                 const struct tm *now, StrBuf *out, Diag *d) {
  JCtx *c = calloc(1, sizeof *c);
  if (!c) {
    diag_error(d, 0, 0, "out of memory for the chat template");
    return 0;
  }
  c->arena = arena_new();
  c->d = d;
  c->lim = lim ? *lim : JINJA_DEFAULT_LIMITS;
  if (now) c->now = *now;
  else {
    time_t t = time(NULL);
    localtime_r(&t, &c->now);
  }
  int ok = 0;
  if (setjmp(c->fail) == 0) {
    int ntok;
    JToken *toks = jinja_lex(c, src, &ntok);
    JNodes body = jinja_parse(c, toks, ntok);
    c->depth = 0;
    c->globals = jframe_new(c, NULL);
    static const struct {
      const char *name;
      int id;
    } funcs[] = {{"range", JF_RANGE},
                 {"namespace", JF_NAMESPACE},
                 {"dict", JF_DICT},
                 {"raise_exception", JF_RAISE},
                 {"strftime_now", JF_STRFTIME}};
    for (size_t i = 0; i < sizeof funcs / sizeof *funcs; i++)
      jframe_set(c, c->globals, funcs[i].name, (JValue){JV_FUNC, 0, {.i = funcs[i].id}});
    JValue vars = make_vars(c, arg);
    for (size_t i = 0; i < vars.u.d->n; i++) jframe_set(c, c->globals, vars.u.d->k[i].u.s, vars.u.d->v[i]);
    c->out = jbuf_new(c);
    jexec(c, jframe_new(c, c->globals), body);
    sb_puts(out, c->out->p ? c->out->p : "");
    ok = 1;
  }
  for (JBuf *b = c->bufs; b; b = b->next) free(b->p);
  arena_free(c->arena);
  free(c);
  return ok;
}
