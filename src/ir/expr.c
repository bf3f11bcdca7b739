#include "expr.h"
#include "../base/mem.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "../base/checked.h"
#include "../base/hash.h"

struct ExprPool {
  Arena *arena;
  Expr **buckets;
  size_t nbuckets, count;
};

ExprPool *expr_pool_new(Arena *arena) {
  ExprPool *p = ARENA_NEW(arena, ExprPool);
  p->arena = arena;
  p->nbuckets = 4096;
  p->buckets = ARENA_ARRAY(arena, Expr *, p->nbuckets);
  return p;
}

static const struct {
  const char *name;
  int arity;
} op_info[X_OP_COUNT] = {
    [X_CONST] = {"const", 0},   [X_SYM] = {"sym", 0},     [X_VAR] = {"var", 0},   [X_ARG] = {"arg", 0},
    [X_ACC] = {"acc", 0},       [X_TMP] = {"tmp", 0},     [X_HW] = {"hw", 0},     [X_LOAD] = {"load", 0},
    [X_NEG] = {"neg", 1},       [X_NOT] = {"not", 1},     [X_EXP] = {"exp", 1},   [X_LOG] = {"log", 1},
    [X_SQRT] = {"sqrt", 1},     [X_RSQRT] = {"rsqrt", 1}, [X_TANH] = {"tanh", 1}, [X_SIGMOID] = {"sigmoid", 1},
    [X_ABS] = {"abs", 1},       [X_ERF] = {"erf", 1},     [X_SIN] = {"sin", 1},   [X_COS] = {"cos", 1},
    [X_CAST] = {"cast", 1},     [X_ADD] = {"add", 2},     [X_SUB] = {"sub", 2},   [X_MUL] = {"mul", 2},
    [X_DIV] = {"div", 2},       [X_MAX] = {"max", 2},     [X_MIN] = {"min", 2},   [X_POW] = {"pow", 2},
    [X_IDIV] = {"idiv", 2},     [X_MOD] = {"mod", 2},     [X_LT] = {"lt", 2},     [X_LE] = {"le", 2},
    [X_EQ] = {"eq", 2},         [X_NE] = {"ne", 2},       [X_AND] = {"and", 2},   [X_OR] = {"or", 2},
    [X_SELECT] = {"select", 3},
};

const char *ex_op_name(ExprOp op) { return op < X_OP_COUNT ? op_info[op].name : "?"; }
int ex_op_arity(ExprOp op) { return op < X_OP_COUNT ? op_info[op].arity : 0; }

static uint64_t node_hash(ExprOp op, DType t, int n, int aux, int64_t ival, double fval, const char *name,
                          Expr *const *a) {
  uint64_t h = hash_u64(HASH_SEED, (uint64_t)op | ((uint64_t)t << 8) | ((uint64_t)n << 16) | ((uint64_t)aux << 32));
  h = hash_u64(h, (uint64_t)ival);
  h = hash_bytes(h, &fval, sizeof fval);
  if (name) h = hash_str(h, name);
  for (int i = 0; i < n; i++) h = hash_u64(h, a[i]->hash);
  return h;
}

static void grow(ExprPool *p) {
  size_t nb = p->nbuckets * 2;
  Expr **b = ARENA_ARRAY(p->arena, Expr *, nb);
  for (size_t i = 0; i < p->nbuckets; i++)
    for (Expr *e = p->buckets[i], *nx; e; e = nx) {
      nx = e->next_in_bucket;
      e->next_in_bucket = b[e->hash & (nb - 1)];
      b[e->hash & (nb - 1)] = e;
    }
  p->buckets = b;
  p->nbuckets = nb;
}

/* The one place nodes are made: returns the existing node when an equal one exists. */
static Expr *mk(ExprPool *p, ExprOp op, DType t, int n, int aux, int64_t ival, double fval, const char *name,
                Expr *const *a) {
  if (fval == 0) fval = 0; /* -0.0 and 0.0 hash alike */
  uint64_t h = node_hash(op, t, n, aux, ival, fval, name, a);
  for (Expr *e = p->buckets[h & (p->nbuckets - 1)]; e; e = e->next_in_bucket) {
    if (e->hash != h || e->op != op || e->dtype != t || e->n != n || e->aux != aux || e->ival != ival) continue;
    if (memcmp(&e->fval, &fval, sizeof fval)) continue;
    if ((e->name == NULL) != (name == NULL) || (name && strcmp(e->name, name))) continue;
    int same = 1;
    for (int i = 0; i < n && same; i++) same = e->a[i] == a[i];
    if (same) return e;
  }
  if (p->count * 2 > p->nbuckets) grow(p);
  Expr *e = arena_alloc(p->arena, sizeof(Expr) + sizeof(Expr *) * (size_t)n);
  e->op = op;
  e->dtype = t;
  e->n = n;
  e->aux = aux;
  e->ival = ival;
  e->fval = fval;
  e->name = name ? arena_strdup(p->arena, name) : NULL;
  e->hash = h;
  e->depth = 1;
  for (int i = 0; i < n; i++) {
    e->a[i] = a[i];
    if (a[i]->depth >= e->depth) e->depth = a[i]->depth + 1;
    e->varmask |= a[i]->varmask;
    e->flags |= a[i]->flags;
  }
  switch (op) {
  case X_VAR:
    if (ival >= 0 && ival < 64) e->varmask |= 1ULL << ival;
    break;
  case X_LOAD: e->flags |= EXF_LOAD; break;
  case X_ACC: e->flags |= EXF_ACC; break;
  case X_ARG: e->flags |= EXF_ARG; break;
  case X_SYM: e->flags |= EXF_SYM; break;
  case X_TMP: e->flags |= EXF_TMP; break;
  case X_HW: e->flags |= EXF_HW; break;
  default: break;
  }
  size_t bi = h & (p->nbuckets - 1);
  e->next_in_bucket = p->buckets[bi];
  p->buckets[bi] = e;
  p->count++;
  return e;
}

/* Float -> integer conversion as every backend does it: NaN -> 0, out of range -> the nearest end of the
 * target's range, otherwise truncation toward zero. */
int64_t ex_float_to_int(DType t, double v) {
  double lo = t == DT_I32 ? -2147483648.0 : -9223372036854775808.0;
  double hi = t == DT_I32 ? 2147483648.0 : 9223372036854775808.0; /* first value past the top */
  if (isnan(v)) return 0;
  if (v <= lo) return t == DT_I32 ? INT32_MIN : INT64_MIN;
  if (v >= hi) return t == DT_I32 ? INT32_MAX : INT64_MAX;
  return (int64_t)v;
}

/* Integer -> narrower integer wraps (two's complement), as the generated code's conversions do. */
static int64_t wrap_int(DType t, int64_t v) { return t == DT_I32 ? (int32_t)(uint32_t)(uint64_t)v : v; }
static int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int64_t wsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
static int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }

Expr *ex_const(ExprPool *p, DType t, double v) {
  if (dtype_is_float(t)) return mk(p, X_CONST, t, 0, 0, 0, dtype_round(t, v), NULL, NULL);
  if (t == DT_BOOL) return mk(p, X_CONST, t, 0, 0, v != 0, 0, NULL, NULL);
  return mk(p, X_CONST, t, 0, 0, ex_float_to_int(t, v), 0, NULL, NULL);
}
Expr *ex_const_int(ExprPool *p, DType t, int64_t v) {
  if (dtype_is_float(t)) return mk(p, X_CONST, t, 0, 0, 0, dtype_round(t, (double)v), NULL, NULL);
  if (t == DT_BOOL) return mk(p, X_CONST, t, 0, 0, v != 0, 0, NULL, NULL);
  return mk(p, X_CONST, t, 0, 0, wrap_int(t, v), 0, NULL, NULL);
}
Expr *ex_int(ExprPool *p, int64_t v) { return mk(p, X_CONST, DT_I64, 0, 0, v, 0, NULL, NULL); }
Expr *ex_bool(ExprPool *p, int v) { return mk(p, X_CONST, DT_BOOL, 0, 0, v != 0, 0, NULL, NULL); }
Expr *ex_sym(ExprPool *p, const char *name) { return mk(p, X_SYM, DT_I64, 0, 0, 0, 0, name, NULL); }
Expr *ex_var(ExprPool *p, int v) { return mk(p, X_VAR, DT_I64, 0, 0, v, 0, NULL, NULL); }
Expr *ex_arg(ExprPool *p, int i, DType t) { return mk(p, X_ARG, t, 0, 0, i, 0, NULL, NULL); }
Expr *ex_acc(ExprPool *p, int phase, DType t) { return mk(p, X_ACC, t, 0, 0, phase, 0, NULL, NULL); }
Expr *ex_tmp(ExprPool *p, int id, DType t) { return mk(p, X_TMP, t, 0, 0, id, 0, NULL, NULL); }
Expr *ex_hw(ExprPool *p, HwIndex h) { return mk(p, X_HW, DT_I64, 0, 0, h, 0, NULL, NULL); }
Expr *ex_load(ExprPool *p, int buf, DType storage, int n, Expr *const *idx, MemSpace space) {
  return mk(p, X_LOAD, storage, n, (int)space, buf, 0, NULL, idx);
}

int ex_is_const(const Expr *e) { return e->op == X_CONST; }
int ex_is_int_const(const Expr *e, int64_t v) { return e->op == X_CONST && !dtype_is_float(e->dtype) && e->ival == v; }
static double cval(const Expr *e) { return dtype_is_float(e->dtype) ? e->fval : (double)e->ival; }
static int is_zero(const Expr *e) { return e->op == X_CONST && cval(e) == 0; }
static int is_one(const Expr *e) { return e->op == X_CONST && cval(e) == 1; }

Expr *ex_cast(ExprPool *p, DType t, Expr *a) {
  if (a->dtype == t) return a;
  if (a->op == X_CONST && !dtype_is_float(a->dtype)) return ex_const_int(p, t, a->ival); /* exact */
  if (a->op == X_CONST) return ex_const(p, t, cval(a));
  return mk(p, X_CAST, t, 1, 0, 0, 0, NULL, &a);
}

static int is_float_fn(ExprOp op) { return op != X_NEG && op != X_ABS && op != X_NOT; }

static double fold_un(ExprOp op, double x) {
  switch (op) {
  case X_NEG: return -x;
  case X_NOT: return !x;
  case X_EXP: return exp(x);
  case X_LOG: return log(x);
  case X_SQRT: return sqrt(x);
  case X_RSQRT: return 1.0 / sqrt(x);
  case X_TANH: return tanh(x);
  case X_SIGMOID: return 1.0 / (1.0 + exp(-x));
  case X_ABS: return fabs(x);
  case X_ERF: return erf(x);
  case X_SIN: return sin(x);
  case X_COS: return cos(x);
  default: return x;
  }
}

Expr *ex_un(ExprPool *p, ExprOp op, Expr *a) {
  if (op == X_CAST) abort(); /* use ex_cast */
  DType t = op == X_NOT ? DT_BOOL : dtype_compute(a->dtype);
  if (op != X_NOT && is_float_fn(op) && !dtype_is_float(t)) t = DT_F32;
  a = ex_cast(p, op == X_NOT ? DT_BOOL : t, a);
  if (a->op == X_CONST && !dtype_is_float(t) && (op == X_NEG || op == X_ABS)) /* integers stay exact */
    return ex_const_int(p, t, op == X_NEG || a->ival < 0 ? wsub(0, a->ival) : a->ival);
  if (a->op == X_CONST) return ex_const(p, t, fold_un(op, cval(a)));
  if (op == X_NEG && a->op == X_NEG) return a->a[0];
  return mk(p, op, t, 1, 0, 0, 0, NULL, &a);
}

static int commutative(ExprOp op) {
  return op == X_ADD || op == X_MUL || op == X_MAX || op == X_MIN || op == X_EQ || op == X_NE || op == X_AND ||
         op == X_OR;
}

static double fold_bin(ExprOp op, double x, double y, int is_int) {
  switch (op) {
  case X_ADD: return x + y;
  case X_SUB: return x - y;
  case X_MUL: return x * y;
  case X_DIV: return is_int ? (y != 0 ? (double)((int64_t)x / (int64_t)y) : 0) : x / y;
  case X_MAX: return x > y ? x : y;
  case X_MIN: return x < y ? x : y;
  case X_POW: return pow(x, y);
  case X_IDIV: return y != 0 ? (double)((int64_t)x / (int64_t)y) : 0;
  case X_MOD: return y != 0 ? (double)((int64_t)x % (int64_t)y) : 0;
  case X_LT: return x < y;
  case X_LE: return x <= y;
  case X_EQ: return x == y;
  case X_NE: return x != y;
  case X_AND: return x && y;
  case X_OR: return x || y;
  default: return 0;
  }
}

/* Integer constant folding; 0 where the op is undefined (division by zero). */
static int fold_int(ExprOp op, int64_t x, int64_t y, int64_t *r) {
  switch (op) {
  case X_ADD: *r = wadd(x, y); return 1;
  case X_SUB: *r = wsub(x, y); return 1;
  case X_MUL: *r = wmul(x, y); return 1;
  case X_DIV:
  case X_IDIV:
  case X_MOD:
    if (y == 0) return 0;
    if (y == -1) *r = op == X_MOD ? 0 : wsub(0, x); /* INT64_MIN / -1 wraps */
    else *r = op == X_MOD ? x % y : x / y;
    return 1;
  case X_MAX: *r = x > y ? x : y; return 1;
  case X_MIN: *r = x < y ? x : y; return 1;
  case X_LT: *r = x < y; return 1;
  case X_LE: *r = x <= y; return 1;
  case X_EQ: *r = x == y; return 1;
  case X_NE: *r = x != y; return 1;
  case X_AND: *r = x && y; return 1;
  case X_OR: *r = x || y; return 1;
  default: return 0;
  }
}

Expr *ex_bin(ExprPool *p, ExprOp op, Expr *a, Expr *b) {
  DType ct = dtype_compute(dtype_promote(a->dtype, b->dtype));
  if (op == X_AND || op == X_OR) ct = DT_BOOL;
  if (op == X_POW && !dtype_is_float(ct)) ct = DT_F32;
  if ((op == X_IDIV || op == X_MOD) && dtype_is_float(ct)) ct = DT_I64;
  a = ex_cast(p, ct, a);
  b = ex_cast(p, ct, b);
  DType rt = (op >= X_LT && op <= X_OR) ? DT_BOOL : ct;
  int is_int = !dtype_is_float(ct);
  if (a->op == X_CONST && b->op == X_CONST) {
    if (is_int) { /* in int64, wrapping, never through a double */
      int64_t r;
      if (fold_int(op, a->ival, b->ival, &r)) return ex_const_int(p, rt, r);
    } else {
      return ex_const(p, rt, fold_bin(op, cval(a), cval(b), is_int));
    }
  }
  if (commutative(op) && a->op == X_CONST && b->op != X_CONST) {
    Expr *t = a;
    a = b;
    b = t;
  }
  switch (op) {
  case X_ADD:
    if (is_zero(b)) return a;
    /* (x + c1) + c2 -> x + (c1 + c2) */
    if (is_int && b->op == X_CONST && a->op == X_ADD && a->a[1]->op == X_CONST)
      return ex_bin(p, X_ADD, a->a[0], ex_int(p, wadd(a->a[1]->ival, b->ival)));
    break;
  case X_SUB:
    if (is_zero(b)) return a;
    if (is_int && a == b) return ex_int(p, 0);
    if (is_int && b->op == X_CONST) return ex_bin(p, X_ADD, a, ex_int(p, wsub(0, b->ival)));
    /* x - (x + c) -> -c, (x + c) - x -> c, (x + c1) - (x + c2) -> c1 - c2: a slice of the last
     * position, seq - (seq - 1), is 1 */
    if (is_int) {
      int ba = b->op == X_ADD && b->a[1]->op == X_CONST, aa = a->op == X_ADD && a->a[1]->op == X_CONST;
      if (ba && b->a[0] == a) return ex_int(p, wsub(0, b->a[1]->ival));
      if (aa && a->a[0] == b) return a->a[1];
      if (aa && ba && a->a[0] == b->a[0]) return ex_int(p, wsub(a->a[1]->ival, b->a[1]->ival));
    }
    break;
  case X_MUL:
    if (is_one(b)) return a;
    if (is_int && is_zero(b)) return b;
    if (is_int && b->op == X_CONST && a->op == X_MUL && a->a[1]->op == X_CONST)
      return ex_bin(p, X_MUL, a->a[0], ex_int(p, wmul(a->a[1]->ival, b->ival)));
    break;
  case X_DIV:
    if (is_one(b)) return a;
    break;
  case X_IDIV:
    if (is_one(b)) return a;
    if (is_zero(a)) return a;
    /* (x * c) / c -> x ; (x * c1) / c2 -> x * (c1/c2) when c2 divides c1 */
    if (b->op == X_CONST && b->ival > 0 && a->op == X_MUL && a->a[1]->op == X_CONST && a->a[1]->ival % b->ival == 0)
      return ex_mul(p, a->a[0], ex_int(p, a->a[1]->ival / b->ival));
    /* (x / c1) / c2 -> x / (c1*c2) */
    if (b->op == X_CONST && b->ival > 0 && a->op == X_IDIV && a->a[1]->op == X_CONST && a->a[1]->ival > 0)
      return ex_bin(p, X_IDIV, a->a[0], ex_int(p, wmul(a->a[1]->ival, b->ival)));
    break;
  case X_MOD:
    if (is_one(b)) return ex_int(p, 0);
    if (is_zero(a)) return a;
    if (b->op == X_CONST && b->ival > 0 && a->op == X_MUL && a->a[1]->op == X_CONST && a->a[1]->ival % b->ival == 0)
      return ex_int(p, 0);
    break;
  case X_AND:
    if (b->op == X_CONST) return b->ival ? a : b;
    break;
  case X_OR:
    if (b->op == X_CONST) return b->ival ? b : a;
    break;
  default: break;
  }
  Expr *ops[2] = {a, b};
  return mk(p, op, rt, 2, 0, 0, 0, NULL, ops);
}

Expr *ex_select(ExprPool *p, Expr *c, Expr *a, Expr *b) {
  c = ex_cast(p, DT_BOOL, c);
  DType t = dtype_promote(a->dtype, b->dtype);
  if (a->dtype != b->dtype) t = dtype_compute(t);
  a = ex_cast(p, t, a);
  b = ex_cast(p, t, b);
  if (c->op == X_CONST) return c->ival ? a : b;
  if (a == b) return a;
  Expr *ops[3] = {c, a, b};
  return mk(p, X_SELECT, t, 3, 0, 0, 0, NULL, ops);
}

Expr *ex_add(ExprPool *p, Expr *a, Expr *b) { return ex_bin(p, X_ADD, a, b); }
Expr *ex_mul(ExprPool *p, Expr *a, Expr *b) { return ex_bin(p, X_MUL, a, b); }

/* ---- rewriting ---- */

typedef struct Memo {
  const Expr **from;
  Expr **to;
  size_t cap, n;
} Memo;

static Expr *memo_get(Memo *m, const Expr *e) {
  if (!m->cap) return NULL;
  for (size_t i = (e->hash * 0x9e3779b97f4a7c15ULL) >> 20 & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    if (!m->from[i]) return NULL;
    if (m->from[i] == e) return m->to[i];
  }
}

static void memo_put(Memo *m, const Expr *e, Expr *v) {
  if ((m->n + 1) * 2 > m->cap) {
    Memo g = {0};
    g.cap = m->cap ? m->cap * 2 : 64;
    g.from = xcalloc(g.cap, sizeof *g.from, "the substitution map");
    g.to = xcalloc(g.cap, sizeof *g.to, "the substitution map");
    for (size_t i = 0; i < m->cap; i++)
      if (m->from[i]) memo_put(&g, m->from[i], m->to[i]);
    free(m->from);
    free(m->to);
    *m = g;
  }
  size_t i = (e->hash * 0x9e3779b97f4a7c15ULL) >> 20 & (m->cap - 1);
  while (m->from[i]) i = (i + 1) & (m->cap - 1);
  m->from[i] = e;
  m->to[i] = v;
  m->n++;
}

Expr *ex_rebuild(ExprPool *p, Expr *e, Expr *const *ops) {
  switch (e->op) {
  case X_CONST:
  case X_SYM:
  case X_VAR:
  case X_ARG:
  case X_ACC:
  case X_TMP:
  case X_HW: return e;
  case X_LOAD: return ex_load(p, (int)e->ival, e->dtype, e->n, ops, (MemSpace)e->aux);
  case X_CAST: return ex_cast(p, e->dtype, ops[0]);
  case X_SELECT: return ex_select(p, ops[0], ops[1], ops[2]);
  default:
    if (e->n == 1) return ex_un(p, e->op, ops[0]);
    return ex_bin(p, e->op, ops[0], ops[1]);
  }
}

static Expr *rewrite_rec(ExprPool *p, Expr *e, ExprRewriteFn fn, void *ctx, Memo *m) {
  Expr *done = memo_get(m, e);
  if (done) return done;
  Expr *ops[LT_MAX_RANK > 3 ? LT_MAX_RANK : 3];
  int changed = 0;
  for (int i = 0; i < e->n; i++) {
    ops[i] = rewrite_rec(p, e->a[i], fn, ctx, m);
    changed |= ops[i] != e->a[i];
  }
  Expr *r = changed ? ex_rebuild(p, e, ops) : e;
  r = fn ? fn(ctx, p, r) : r;
  memo_put(m, e, r);
  return r;
}

Expr *ex_rewrite(ExprPool *p, Expr *e, ExprRewriteFn fn, void *ctx) {
  Memo m = {0};
  Expr *r = rewrite_rec(p, e, fn, ctx, &m);
  free(m.from);
  free(m.to);
  return r;
}

typedef struct {
  int n;
  Expr *const *to;
} SubstCtx;

static Expr *subst_fn(void *ctx, ExprPool *p, Expr *e) {
  (void)p;
  SubstCtx *s = ctx;
  if (e->op == X_VAR && e->ival < s->n && s->to[e->ival]) return s->to[e->ival];
  return e;
}

Expr *ex_subst_vars(ExprPool *p, Expr *e, int n, Expr *const *to) {
  SubstCtx s = {n, to};
  return ex_rewrite(p, e, subst_fn, &s);
}

static void visit_rec(const Expr *e, ExprVisitFn fn, void *ctx, Memo *m) {
  if (memo_get(m, e)) return;
  memo_put(m, e, (Expr *)e);
  for (int i = 0; i < e->n; i++) visit_rec(e->a[i], fn, ctx, m);
  fn(ctx, e);
}

void ex_visit(const Expr *e, ExprVisitFn fn, void *ctx) {
  Memo m = {0};
  visit_rec(e, fn, ctx, &m);
  free(m.from);
  free(m.to);
}

/* ---- evaluation of sizes ---- */

int symenv_get(const SymEnv *env, const char *name, int64_t *out) {
  for (int i = 0; env && i < env->n; i++)
    if (!strcmp(env->names[i], name)) {
      *out = env->values[i];
      return 1;
    }
  return 0;
}

void symenv_set(SymEnv *env, const char *name, int64_t v) {
  for (int i = 0; i < env->n; i++)
    if (!strcmp(env->names[i], name)) {
      env->values[i] = v;
      return;
    }
  if (env->n < 16) {
    env->names[env->n] = name;
    env->values[env->n++] = v;
  }
}

int ex_eval_int(const Expr *e, const SymEnv *env, int64_t *out) {
  int64_t x = 0, y = 0;
  switch (e->op) {
  case X_CONST: *out = dtype_is_float(e->dtype) ? ex_float_to_int(DT_I64, e->fval) : e->ival; return 1;
  case X_SYM: return symenv_get(env, e->name, out);
  case X_CAST: return ex_eval_int(e->a[0], env, out);
  case X_NEG: return ex_eval_int(e->a[0], env, &x) && ck_sub(0, x, out);
  default: break;
  }
  if (e->n != 2 || !ex_eval_int(e->a[0], env, &x) || !ex_eval_int(e->a[1], env, &y)) return 0;
  switch (e->op) {
  case X_ADD: return ck_add(x, y, out); /* sizes that overflow are an error, never a wrapped size */
  case X_SUB: return ck_sub(x, y, out);
  case X_MUL: return ck_mul(x, y, out);
  case X_DIV:
  case X_IDIV:
    if (!y || (y == -1 && x == INT64_MIN)) return 0;
    *out = x / y;
    return 1;
  case X_MOD:
    if (!y || y == -1) {
      *out = 0;
      return y != 0;
    }
    *out = x % y;
    return 1;
  case X_MAX: *out = x > y ? x : y; return 1;
  case X_MIN: *out = x < y ? x : y; return 1;
  case X_LT: *out = x < y; return 1;
  case X_LE: *out = x <= y; return 1;
  case X_EQ: *out = x == y; return 1;
  case X_NE: *out = x != y; return 1;
  default: return 0;
  }
}

/* ---- printing ---- */

static int prec(const Expr *e) {
  switch (e->op) {
  case X_SELECT: return 1;
  case X_OR: return 2;
  case X_AND: return 3;
  case X_EQ:
  case X_NE: return 4;
  case X_LT:
  case X_LE: return 5;
  case X_ADD:
  case X_SUB: return 6;
  case X_MUL:
  case X_DIV:
  case X_IDIV:
  case X_MOD: return 7;
  case X_NEG:
  case X_NOT: return 8;
  default: return 9;
  }
}

static const char *infix(ExprOp op) {
  switch (op) {
  case X_ADD: return " + ";
  case X_SUB: return " - ";
  case X_MUL: return "*";
  case X_DIV: return "/";
  case X_IDIV: return " // ";
  case X_MOD: return " % ";
  case X_LT: return " < ";
  case X_LE: return " <= ";
  case X_EQ: return " == ";
  case X_NE: return " != ";
  case X_AND: return " && ";
  case X_OR: return " || ";
  default: return NULL;
  }
}

static void print_rec(StrBuf *b, const Expr *e, const ExprNames *nm, int parent_prec);

static void print_operand(StrBuf *b, const Expr *e, const ExprNames *nm, int min_prec) {
  print_rec(b, e, nm, min_prec);
}

static void print_rec(StrBuf *b, const Expr *e, const ExprNames *nm, int parent_prec) {
  void *c = nm ? nm->ctx : NULL;
  int pr = prec(e);
  int paren = pr < parent_prec;
  if (paren) sb_putc(b, '(');
  switch (e->op) {
  case X_CONST:
    if (e->dtype == DT_BOOL) sb_puts(b, e->ival ? "true" : "false");
    else if (dtype_is_float(e->dtype)) {
      if (isinf(e->fval)) sb_puts(b, e->fval > 0 ? "inf" : "-inf");
      else if (fabs(e->fval) < 1e15 && e->fval == (double)(int64_t)e->fval) sb_printf(b, "%.1f", e->fval);
      else sb_printf(b, "%.9g", e->fval);
    } else sb_printf(b, "%lld", (long long)e->ival);
    break;
  case X_SYM: sb_puts(b, e->name); break;
  case X_VAR:
    if (nm && nm->var) sb_puts(b, nm->var(c, (int)e->ival));
    else sb_printf(b, "i%lld", (long long)e->ival);
    break;
  case X_ARG:
    if (nm && nm->arg) sb_puts(b, nm->arg(c, (int)e->ival));
    else sb_printf(b, "a%lld", (long long)e->ival);
    break;
  case X_ACC:
    if (nm && nm->acc) sb_puts(b, nm->acc(c, (int)e->ival));
    else sb_printf(b, "acc%lld", (long long)e->ival);
    break;
  case X_TMP:
    if (nm && nm->tmp) sb_puts(b, nm->tmp(c, (int)e->ival));
    else sb_printf(b, "t%lld", (long long)e->ival);
    break;
  case X_HW: {
    static const char *hw[] = {"thread", "block", "lane", "warp", "block_dim"};
    sb_puts(b, hw[e->ival]);
    break;
  }
  case X_LOAD:
    if (nm && nm->buf) sb_puts(b, nm->buf(c, (int)e->ival, (MemSpace)e->aux));
    else sb_printf(b, "%s%lld", e->aux == MEM_SHARED ? "smem" : "buf", (long long)e->ival);
    sb_putc(b, '[');
    for (int i = 0; i < e->n; i++) {
      if (i) sb_puts(b, ", ");
      print_rec(b, e->a[i], nm, 0);
    }
    sb_putc(b, ']');
    break;
  case X_NEG:
    sb_putc(b, '-');
    print_operand(b, e->a[0], nm, pr + 1);
    break;
  case X_NOT:
    sb_putc(b, '!');
    print_operand(b, e->a[0], nm, pr + 1);
    break;
  case X_CAST:
    sb_printf(b, "%s(", dtype_name(e->dtype));
    print_rec(b, e->a[0], nm, 0);
    sb_putc(b, ')');
    break;
  case X_SELECT:
    print_operand(b, e->a[0], nm, pr + 1);
    sb_puts(b, " ? ");
    print_operand(b, e->a[1], nm, pr + 1);
    sb_puts(b, " : ");
    print_operand(b, e->a[2], nm, pr);
    break;
  default: {
    const char *in = infix(e->op);
    if (in && e->n == 2) {
      print_operand(b, e->a[0], nm, pr);
      sb_puts(b, in);
      print_operand(b, e->a[1], nm, pr + 1);
    } else {
      sb_printf(b, "%s(", ex_op_name(e->op));
      for (int i = 0; i < e->n; i++) {
        if (i) sb_puts(b, ", ");
        print_rec(b, e->a[i], nm, 0);
      }
      sb_putc(b, ')');
    }
  }
  }
  if (paren) sb_putc(b, ')');
}

void ex_print(StrBuf *b, const Expr *e, const ExprNames *names) { print_rec(b, e, names, 0); }

/* ---- shapes ---- */

int shape_equal(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->dim[i] != b->dim[i]) return 0;
  return 1;
}

Expr *shape_numel(ExprPool *p, const Shape *s) {
  Expr *n = ex_int(p, 1);
  for (int i = 0; i < s->rank; i++) n = ex_mul(p, n, s->dim[i]);
  return n;
}

void shape_print(StrBuf *b, const Shape *s) {
  sb_putc(b, '[');
  for (int i = 0; i < s->rank; i++) {
    if (i) sb_putc(b, ',');
    ex_print(b, s->dim[i], NULL);
  }
  sb_putc(b, ']');
}

int shape_eval(const Shape *s, const SymEnv *env, int64_t *dims) {
  for (int i = 0; i < s->rank; i++)
    if (!ex_eval_int(s->dim[i], env, &dims[i])) return 0;
  return 1;
}

int64_t shape_numel_eval(const Shape *s, const SymEnv *env) {
  int64_t d[LT_MAX_RANK], n = 1;
  if (!shape_eval(s, env, d) || !ck_numel(s->rank, d, &n)) return -1;
  return n;
}
