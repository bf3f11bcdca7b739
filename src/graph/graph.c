/* Graph builder: every node is checked (arity, dtypes, shapes) and its shape/dtype inferred when it
 * is added, so later stages can assume a well-formed graph. Attributes are normalised here
 * (non-negative sorted axes, resolved slice bounds and reshape targets). */
#include "graph.h"
#include "../base/checked.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

Graph *graph_new(Arena *arena, ExprPool *pool) {
  Graph *g = ARENA_NEW(arena, Graph);
  g->arena = arena;
  g->pool = pool;
  return g;
}

static GNode *new_node(Graph *g, GOp op, int line, int col) {
  if (g->n == g->cap) {
    int cap = g->cap ? g->cap * 2 : 64;
    GNode *nodes = ARENA_ARRAY(g->arena, GNode, cap);
    if (g->n) memcpy(nodes, g->nodes, sizeof(GNode) * (size_t)g->n);
    g->nodes = nodes;
    g->cap = cap;
  }
  GNode *nd = &g->nodes[g->n];
  memset(nd, 0, sizeof *nd);
  nd->id = g->n++;
  nd->op = op;
  nd->line = line;
  nd->col = col;
  return nd;
}

/* "[2,seq]" in the arena, for messages. */
static const char *shape_str(Graph *g, const Shape *s) {
  StrBuf b = {0};
  shape_print(&b, s);
  const char *r = arena_strdup(g->arena, sb_str(&b));
  sb_free(&b);
  return r;
}

static const char *expr_str(Graph *g, const Expr *e) {
  StrBuf b = {0};
  ex_print(&b, e, NULL);
  const char *r = arena_strdup(g->arena, sb_str(&b));
  sb_free(&b);
  return r;
}

Expr *graph_symbol(Graph *g, const char *name) {
  for (int i = 0; i < g->nsymbols; i++)
    if (!strcmp(g->symbols[i], name)) return ex_sym(g->pool, g->symbols[i]);
  const char *nm = arena_strdup(g->arena, name);
  if (g->nsymbols < (int)(sizeof g->symbols / sizeof g->symbols[0])) g->symbols[g->nsymbols++] = nm;
  return ex_sym(g->pool, nm);
}

/* Largest constant dimension: far above any real tensor, low enough that size arithmetic on a few
 * of them cannot overflow int64. */
#define MAX_DIM ((int64_t)1 << 40)

/* A dimension is valid when it is a positive constant or an integer expression of symbols. */
static int dim_ok(const Expr *e) {
  if (e->op == X_CONST) return !dtype_is_float(e->dtype) && e->ival > 0 && e->ival <= MAX_DIM;
  return !dtype_is_float(e->dtype) && !(e->flags & (EXF_LOAD | EXF_ACC | EXF_ARG | EXF_TMP | EXF_HW));
}

/* Whether the constant factors of s's element count fit LT_MAX_NUMEL (symbols count as 1 here; their
 * values are checked at run time by graph_check_sizes). */
static int numel_fits(const Shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) {
    const Expr *e = s->dim[i];
    if (e->op == X_CONST && !dtype_is_float(e->dtype) && (!ck_mul(n, e->ival, &n) || n > LT_MAX_NUMEL)) return 0;
  }
  return 1;
}

int graph_input(Graph *g, const char *name, DType t, const Shape *shape, int line, int col, Diag *d) {
  if (!name || !*name) {
    diag_error(d, line, col, "input needs a name");
    return -1;
  }
  for (int i = 0; i < g->ninputs; i++)
    if (!strcmp(g->nodes[g->inputs[i]].name, name)) {
      diag_error(d, line, col, "duplicate input '%s'", name);
      return -1;
    }
  if (g->ninputs >= (int)(sizeof g->inputs / sizeof g->inputs[0])) {
    diag_error(d, line, col, "too many inputs (at most %d)", (int)(sizeof g->inputs / sizeof g->inputs[0]));
    return -1;
  }
  if (t == DT_BOOL || (unsigned)t >= DT_COUNT) {
    diag_error(d, line, col, "input '%s': unsupported dtype", name);
    return -1;
  }
  if (!shape || shape->rank < 0 || shape->rank > LT_MAX_RANK) {
    diag_error(d, line, col, "input '%s': rank must be between 0 and %d", name, LT_MAX_RANK);
    return -1;
  }
  for (int i = 0; i < shape->rank; i++)
    if (!shape->dim[i] || !dim_ok(shape->dim[i])) {
      diag_error(d, line, col, "input '%s': dimension %d must be a positive integer (at most 2^40) or a size symbol",
                 name, i);
      return -1;
    }
  if (dtype_is_quant(t)) {
    int be = dtype_block_elems(t);
    const Expr *last = shape->rank ? shape->dim[shape->rank - 1] : NULL;
    if (!last || last->op != X_CONST || last->ival % be) {
      diag_error(d, line, col, "input '%s': a %s tensor's last dimension must be a constant multiple of %d (its block)",
                 name, dtype_name(t), be);
      return -1;
    }
  }
  if (!numel_fits(shape)) {
    StrBuf b = {0};
    shape_print(&b, shape);
    diag_error(d, line, col, "input '%s': %s%s has more than 2^56 elements", name, dtype_name(t), sb_str(&b));
    sb_free(&b);
    return -1;
  }
  GNode *nd = new_node(g, G_INPUT, line, col);
  nd->dtype = t;
  nd->shape = *shape;
  nd->name = arena_strdup(g->arena, name);
  g->inputs[g->ninputs++] = nd->id;
  return nd->id;
}

int graph_const(Graph *g, double value, int line, int col) {
  GNode *nd = new_node(g, G_CONST, line, col);
  /* Integral values are integer literals; the parser marks float literals such as `2.0` as f32. */
  nd->dtype = (isfinite(value) && value == floor(value) && fabs(value) < 9.2e18) ? DT_I64 : DT_F32;
  nd->attr.value = value;
  if (nd->dtype == DT_I64) nd->attr.ivalue = (int64_t)value;
  return nd->id;
}

int graph_const_int(Graph *g, int64_t value, int line, int col) {
  GNode *nd = new_node(g, G_CONST, line, col);
  nd->dtype = DT_I64;
  nd->attr.value = (double)value;
  nd->attr.ivalue = value;
  return nd->id;
}

void graph_set_name(Graph *g, int node, const char *name) {
  if (node < 0 || node >= g->n) return;
  g->nodes[node].name = name ? arena_strdup(g->arena, name) : NULL;
}

int graph_add_output(Graph *g, int node) {
  if (node < 0 || node >= g->n || g->noutputs >= (int)(sizeof g->outputs / sizeof g->outputs[0])) return -1;
  g->outputs[g->noutputs] = node;
  return g->noutputs++;
}

/* ---- inference helpers ---- */

typedef struct Ctx {
  Graph *g;
  Diag *d;
  int line, col;
  const char *op;
} Ctx;

#define FAIL(c, ...) (diag_error((c)->d, (c)->line, (c)->col, __VA_ARGS__), -1)

static int is_one(const Expr *e) { return ex_is_int_const(e, 1); }
static int const_dim(const Expr *e, int64_t *v) {
  if (e->op != X_CONST || dtype_is_float(e->dtype)) return 0;
  *v = e->ival;
  return 1;
}

/* NumPy broadcasting of two shapes; dims match when pointer-equal or one is the constant 1. */
static int broadcast(const Shape *a, const Shape *b, Shape *out) {
  int r = a->rank > b->rank ? a->rank : b->rank;
  out->rank = r;
  for (int i = 0; i < r; i++) {
    int ia = a->rank - r + i, ib = b->rank - r + i;
    Expr *x = ia >= 0 ? a->dim[ia] : NULL, *y = ib >= 0 ? b->dim[ib] : NULL;
    if (!x) out->dim[i] = y;
    else if (!y) out->dim[i] = x;
    else if (x == y || is_one(y)) out->dim[i] = x;
    else if (is_one(x)) out->dim[i] = y;
    else return 0;
  }
  return 1;
}

static int norm_axis(Ctx *c, int axis, const Shape *s, int *out) {
  int r = s->rank;
  if (axis < -r || axis >= r || r == 0)
    return FAIL(c, "%s: axis %d out of range for %s", c->op, axis, shape_str(c->g, s));
  *out = axis < 0 ? axis + r : axis;
  return 0;
}

static int need_float(Ctx *c, const GNode *n, const char *what) {
  if (dtype_is_float(n->dtype)) return 0;
  return FAIL(c, "%s: %s must be a float tensor, got %s", c->op, what, dtype_name(n->dtype));
}

static int need_int(Ctx *c, const GNode *n, const char *what) {
  if (n->dtype == DT_I32 || n->dtype == DT_I64) return 0;
  return FAIL(c, "%s: %s must be an integer tensor (i32 or i64), got %s", c->op, what, dtype_name(n->dtype));
}

static int need_rank(Ctx *c, const GNode *n, const char *what, int lo) {
  if (n->shape.rank >= lo) return 0;
  return FAIL(c, "%s: %s must have at least %d dimension%s, got %s", c->op, what, lo, lo == 1 ? "" : "s",
              shape_str(c->g, &n->shape));
}

/* Element count as a canonical product (constant times non-constant factors in hash order), so
 * equal counts built from differently ordered dims are the same pointer. */
typedef struct Factors {
  int64_t k;
  int overflow; /* the constant part does not fit int64 */
  int n;
  Expr *f[4 * LT_MAX_RANK];
} Factors;

static int collect(Factors *fs, Expr *e) {
  if (e->op == X_CONST && !dtype_is_float(e->dtype)) {
    if (__builtin_mul_overflow(fs->k, e->ival, &fs->k)) fs->overflow = 1;
    return 1;
  }
  if (e->op == X_MUL && !dtype_is_float(e->dtype)) return collect(fs, e->a[0]) && collect(fs, e->a[1]);
  if (fs->n >= (int)(sizeof fs->f / sizeof fs->f[0])) return 0;
  fs->f[fs->n++] = e;
  return 1;
}

static int cmp_factor(const void *x, const void *y) {
  const Expr *a = *(Expr *const *)x, *b = *(Expr *const *)y;
  if (a->hash != b->hash) return a->hash < b->hash ? -1 : 1;
  return a == b ? 0 : (a < b ? -1 : 1);
}

static Expr *factors_product(ExprPool *p, Factors *fs) {
  qsort(fs->f, (size_t)fs->n, sizeof fs->f[0], cmp_factor);
  Expr *r = NULL;
  for (int i = 0; i < fs->n; i++) r = r ? ex_mul(p, r, fs->f[i]) : fs->f[i];
  return r ? ex_mul(p, r, ex_int(p, fs->k)) : ex_int(p, fs->k);
}

static int dims_factors(Factors *fs, const Shape *s, int skip) {
  fs->k = 1;
  fs->n = 0;
  fs->overflow = 0;
  for (int i = 0; i < s->rank; i++)
    if (i != skip && !collect(fs, s->dim[i])) return 0;
  return 1;
}

/* NULL when the constant part overflows. */
static Expr *numel(Graph *g, const Shape *s) {
  Factors fs;
  int ok = dims_factors(&fs, s, -1);
  if (fs.overflow) return NULL;
  if (!ok) return shape_numel(g->pool, s);
  return factors_product(g->pool, &fs);
}

/* numel / known: cancel common factors; falls back to an integer division the check will refuse. */
static Expr *divide_count(Graph *g, const Shape *src, const Shape *dst, int skip) {
  Factors a, b;
  if (!dims_factors(&a, src, -1) || !dims_factors(&b, dst, skip)) goto fallback;
  for (int i = 0; i < b.n; i++) {
    int j = 0;
    while (j < a.n && a.f[j] != b.f[i]) j++;
    if (j == a.n) goto fallback;
    a.f[j] = a.f[--a.n];
  }
  if (b.k == 0 || a.k % b.k) goto fallback;
  a.k /= b.k;
  return factors_product(g->pool, &a);
fallback : {
  Shape known = *dst;
  known.dim[skip] = ex_int(g->pool, 1);
  return ex_bin(g->pool, X_IDIV, numel(g, src), numel(g, &known));
}
}

/* ---- per-op inference ---- */

static int infer_unary(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *x = in[0];
  nd->shape = x->shape;
  nd->dtype = x->dtype;
  int keeps_int = nd->op == G_NEG || nd->op == G_ABS || nd->op == G_RELU;
  if (!keeps_int && !dtype_is_float(x->dtype)) nd->dtype = DT_F32;
  return 0;
}

static int infer_binary(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *a = in[0], *b = in[1];
  if (!broadcast(&a->shape, &b->shape, &nd->shape))
    return FAIL(c, "%s: shapes %s and %s do not broadcast", c->op, shape_str(c->g, &a->shape),
                shape_str(c->g, &b->shape));
  int ca = a->op == G_CONST, cb = b->op == G_CONST;
  DType t;
  /* Literals are weak: they adopt the tensor's dtype, except a float literal turns an int tensor f32. */
  if (ca != cb) {
    const GNode *lit = ca ? a : b, *ten = ca ? b : a;
    t = ten->dtype;
    if (!dtype_is_float(t) && dtype_is_float(lit->dtype)) t = DT_F32;
    if (t == DT_I32 && !dtype_is_float(lit->dtype) && (lit->attr.ivalue < INT32_MIN || lit->attr.ivalue > INT32_MAX)) {
      diag_error(c->d, lit->line ? lit->line : c->line, lit->line ? lit->col : c->col,
                 "integer literal %lld does not fit the i32 operand of %s (range -2147483648 to 2147483647)",
                 (long long)lit->attr.ivalue, c->op);
      return -1;
    }
  } else {
    t = dtype_promote(a->dtype, b->dtype);
  }
  if ((nd->op == G_DIV || nd->op == G_POW) && !dtype_is_float(t)) t = DT_F32;
  nd->dtype = t;
  return 0;
}

static int cmp_int(const void *x, const void *y) { return *(const int *)x - *(const int *)y; }

static int infer_reduce(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *x = in[0];
  const Shape *s = &x->shape;
  GAttr *at = &nd->attr;
  if (at->naxes < 0 || at->naxes > LT_MAX_RANK) return FAIL(c, "%s: bad number of axes %d", c->op, at->naxes);
  if (at->naxes == 0) { /* all axes */
    at->naxes = s->rank;
    for (int i = 0; i < s->rank; i++) at->axes[i] = i;
  } else {
    for (int i = 0; i < at->naxes; i++)
      if (norm_axis(c, at->axes[i], s, &at->axes[i])) return -1;
    qsort(at->axes, (size_t)at->naxes, sizeof at->axes[0], cmp_int);
    for (int i = 1; i < at->naxes; i++)
      if (at->axes[i] == at->axes[i - 1]) return FAIL(c, "%s: axis %d given twice", c->op, at->axes[i]);
  }
  at->keepdim = at->keepdim != 0;
  Shape o = {0};
  for (int i = 0, j = 0; i < s->rank; i++) {
    int red = j < at->naxes && at->axes[j] == i;
    if (red) j++;
    if (!red) o.dim[o.rank++] = s->dim[i];
    else if (at->keepdim) o.dim[o.rank++] = ex_int(c->g->pool, 1);
  }
  nd->shape = o;
  nd->dtype = x->dtype;
  if (nd->op == G_SUM && !dtype_is_float(x->dtype)) nd->dtype = DT_I64;
  if (nd->op == G_MEAN && !dtype_is_float(x->dtype)) nd->dtype = DT_F32;
  return 0;
}

static int check_last_dim(Ctx *c, const GNode *x, const GNode *p, const char *what) {
  Expr *last = x->shape.dim[x->shape.rank - 1];
  if (p->shape.rank != 1 || p->shape.dim[0] != last)
    return FAIL(c, "%s: %s shape %s does not match last dim %s of %s", c->op, what, shape_str(c->g, &p->shape),
                expr_str(c->g, last), shape_str(c->g, &x->shape));
  return need_float(c, p, what);
}

static int infer_norm(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *x = in[0];
  if (need_float(c, x, "x") || need_rank(c, x, "x", 1)) return -1;
  if (check_last_dim(c, x, in[1], "weight")) return -1;
  if (nd->op == G_LAYER_NORM && check_last_dim(c, x, in[2], "bias")) return -1;
  if (!(nd->attr.eps >= 0) || !isfinite(nd->attr.eps)) return FAIL(c, "%s: eps must be a non-negative number", c->op);
  nd->shape = x->shape;
  nd->dtype = x->dtype;
  return 0;
}

static int infer_matmul(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *a = in[0], *b = in[1];
  const Shape *A = &a->shape, *B = &b->shape;
  if (A->rank < 1 || B->rank < 1)
    return FAIL(c, "matmul: operands must have at least 1 dimension: %s @ %s", shape_str(c->g, A), shape_str(c->g, B));
  int a1 = A->rank == 1, b1 = B->rank == 1;
  Expr *ka = A->dim[A->rank - 1], *kb = b1 ? B->dim[0] : B->dim[B->rank - 2];
  if (ka != kb) return FAIL(c, "matmul: inner dimensions differ: %s @ %s", shape_str(c->g, A), shape_str(c->g, B));
  Shape ba = {0}, bb = {0}, o;
  for (int i = 0; i < A->rank - 2; i++) ba.dim[ba.rank++] = A->dim[i];
  for (int i = 0; i < B->rank - 2; i++) bb.dim[bb.rank++] = B->dim[i];
  if (!broadcast(&ba, &bb, &o))
    return FAIL(c, "matmul: batch dimensions do not broadcast: %s @ %s", shape_str(c->g, A), shape_str(c->g, B));
  if (!a1) o.dim[o.rank++] = A->dim[A->rank - 2];
  if (!b1) o.dim[o.rank++] = B->dim[B->rank - 1];
  nd->shape = o;
  nd->dtype = dtype_promote(a->dtype, b->dtype);
  return 0;
}

static int infer_linear(Ctx *c, GNode *nd, GNode *const *in) {
  int nin = nd->nin;
  const GNode *x = in[0], *w = in[1];
  if (need_rank(c, x, "x", 1)) return -1;
  if (w->shape.rank != 2) return FAIL(c, "linear: weight must be 2-D [out, in], got %s", shape_str(c->g, &w->shape));
  Expr *fin = x->shape.dim[x->shape.rank - 1];
  if (w->shape.dim[1] != fin)
    return FAIL(c, "linear: weight %s does not match input features %s of %s (expected [out,%s])",
                shape_str(c->g, &w->shape), expr_str(c->g, fin), shape_str(c->g, &x->shape), expr_str(c->g, fin));
  if (nin == 3) {
    const GNode *b = in[2];
    if (b->shape.rank != 1 || b->shape.dim[0] != w->shape.dim[0])
      return FAIL(c, "linear: bias shape %s does not match weight %s (expected [%s])", shape_str(c->g, &b->shape),
                  shape_str(c->g, &w->shape), expr_str(c->g, w->shape.dim[0]));
  }
  nd->shape = x->shape;
  nd->shape.dim[nd->shape.rank - 1] = w->shape.dim[0];
  nd->dtype = dtype_promote(x->dtype, w->dtype);
  if (nin == 3) nd->dtype = dtype_promote(nd->dtype, in[2]->dtype);
  return 0;
}

static int infer_embedding(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *ids = in[0], *tab = in[1];
  if (need_int(c, ids, "ids")) return -1;
  if (tab->shape.rank != 2)
    return FAIL(c, "embedding: table must be 2-D [vocab, dim], got %s", shape_str(c->g, &tab->shape));
  if (ids->shape.rank + 1 > LT_MAX_RANK) return FAIL(c, "embedding: result would have more than %d dims", LT_MAX_RANK);
  nd->shape = ids->shape;
  nd->shape.dim[nd->shape.rank++] = tab->shape.dim[1];
  nd->dtype = tab->dtype;
  return 0;
}

static int infer_rope(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *x = in[0], *pos = in[1], *freqs = nd->nin == 3 ? in[2] : NULL;
  if (need_float(c, x, "x") || need_rank(c, x, "x", 2) || need_int(c, pos, "pos")) return -1;
  const Shape *s = &x->shape;
  int64_t hd;
  if (!const_dim(s->dim[s->rank - 1], &hd) || hd % 2)
    return FAIL(c, "rope: head_dim (last dim of %s) must be an even constant", shape_str(c->g, s));
  if (pos->shape.rank != 1 || pos->shape.dim[0] != s->dim[s->rank - 2])
    return FAIL(c, "rope: pos shape %s does not match seq dim %s of %s (expected [%s])", shape_str(c->g, &pos->shape),
                expr_str(c->g, s->dim[s->rank - 2]), shape_str(c->g, s), expr_str(c->g, s->dim[s->rank - 2]));
  if (freqs) {
    int64_t nf;
    if (need_float(c, freqs, "freqs") || freqs->shape.rank != 1 || !const_dim(freqs->shape.dim[0], &nf) || nf != hd / 2)
      return FAIL(c, "rope: freqs must be [%lld] (head_dim/2), got %s", (long long)(hd / 2),
                  shape_str(c->g, &freqs->shape));
  } else if (!(nd->attr.theta > 0) || !isfinite(nd->attr.theta)) {
    return FAIL(c, "rope: theta must be a positive number");
  }
  nd->shape = *s;
  nd->dtype = x->dtype;
  return 0;
}

static int infer_attention(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *q = in[0], *k = in[1], *v = in[2];
  const Shape *Q = &q->shape, *K = &k->shape, *V = &v->shape;
  if (Q->rank != 4 || K->rank != 4 || V->rank != 4)
    return FAIL(c, "attention: q, k, v must be 4-D [batch, heads, seq, dim], got %s, %s, %s", shape_str(c->g, Q),
                shape_str(c->g, K), shape_str(c->g, V));
  if (need_float(c, q, "q") || need_float(c, k, "k") || need_float(c, v, "v")) return -1;
  if (Q->dim[0] != K->dim[0] || Q->dim[0] != V->dim[0])
    return FAIL(c, "attention: batch sizes differ: q %s, k %s, v %s", shape_str(c->g, Q), shape_str(c->g, K),
                shape_str(c->g, V));
  if (K->dim[1] != V->dim[1] || K->dim[2] != V->dim[2])
    return FAIL(c, "attention: k %s and v %s differ in heads or sequence length", shape_str(c->g, K),
                shape_str(c->g, V));
  if (Q->dim[3] != K->dim[3])
    return FAIL(c, "attention: head dims of q %s and k %s differ", shape_str(c->g, Q), shape_str(c->g, K));
  int64_t h, kvh;
  if (!const_dim(Q->dim[1], &h) || !const_dim(K->dim[1], &kvh))
    return FAIL(c, "attention: head counts must be constants, got q %s and k %s", shape_str(c->g, Q),
                shape_str(c->g, K));
  if (h % kvh)
    return FAIL(c, "attention: query heads %lld is not a multiple of key/value heads %lld", (long long)h,
                (long long)kvh);
  if (nd->nin == 4) {
    const GNode *len = in[3];
    if (need_int(c, len, "kv_len")) return -1;
    if (len->shape.rank != 1 || len->shape.dim[0] != Q->dim[0])
      return FAIL(c, "attention: kv_len must be 1-D [batch] = [%s], got %s", shape_str(c->g, &(Shape){1, {Q->dim[0]}}),
                  shape_str(c->g, &len->shape));
  }
  nd->shape = *Q;
  nd->shape.dim[3] = V->dim[3];
  nd->dtype = q->dtype;
  nd->attr.causal = nd->attr.causal != 0;
  return 0;
}

/* cache [blocks, block_size, d...], x [tokens, d...], slots [tokens] */
static int infer_cache_scatter(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *cache = in[0], *x = in[1], *slots = in[2];
  if (cache->op != G_INPUT)
    return FAIL(c, "cache_scatter: the cache must be a program input (persistent state), not a computed value");
  const Shape *C = &cache->shape, *X = &x->shape;
  if (need_int(c, slots, "slots")) return -1;
  if (C->rank < 2 || C->rank != X->rank + 1)
    return FAIL(c, "cache_scatter: cache %s must be [blocks, block_size, ...] with one more axis than x %s",
                shape_str(c->g, C), shape_str(c->g, X));
  for (int d = 1; d < X->rank; d++)
    if (C->dim[d + 1] != X->dim[d])
      return FAIL(c, "cache_scatter: cache %s rows and x %s rows differ", shape_str(c->g, C), shape_str(c->g, X));
  if (slots->shape.rank != 1 || slots->shape.dim[0] != X->dim[0])
    return FAIL(c, "cache_scatter: slots %s must be 1-D, one per row of x %s", shape_str(c->g, &slots->shape),
                shape_str(c->g, X));
  if (dtype_is_float(cache->dtype) != dtype_is_float(x->dtype))
    return FAIL(c, "cache_scatter: cache is %s but the value is %s", dtype_name(cache->dtype), dtype_name(x->dtype));
  nd->shape = *C;
  nd->dtype = cache->dtype;
  return 0;
}

/* pool [blocks, block_size, d...], table [seqs, blocks_per_seq], rows [tokens] -> [tokens, len, d...] */
static int infer_paged_gather(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *pool = in[0], *table = in[1], *rows = in[2];
  const Shape *P = &pool->shape;
  if (need_int(c, table, "table") || need_int(c, rows, "rows")) return -1;
  if (P->rank < 2) return FAIL(c, "paged_gather: pool %s must be [blocks, block_size, ...]", shape_str(c->g, P));
  if (table->shape.rank != 2)
    return FAIL(c, "paged_gather: table must be 2-D [sequences, blocks], got %s", shape_str(c->g, &table->shape));
  if (rows->shape.rank != 1) return FAIL(c, "paged_gather: rows must be 1-D, got %s", shape_str(c->g, &rows->shape));
  if (!nd->attr.end || !dim_ok(nd->attr.end))
    return FAIL(c, "paged_gather: len must be a positive size (an integer or a size name)");
  nd->shape.rank = P->rank;
  nd->shape.dim[0] = rows->shape.dim[0];
  nd->shape.dim[1] = nd->attr.end;
  for (int d = 2; d < P->rank; d++) nd->shape.dim[d] = P->dim[d];
  nd->dtype = pool->dtype;
  return 0;
}

static int infer_reshape(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *x = in[0];
  Shape t = nd->attr.shape;
  Graph *g = c->g;
  if (t.rank < 0 || t.rank > LT_MAX_RANK) return FAIL(c, "reshape: target rank must be between 0 and %d", LT_MAX_RANK);
  int infer = -1;
  for (int i = 0; i < t.rank; i++) {
    if (!t.dim[i]) return FAIL(c, "reshape: target dimension %d is missing", i);
    if (ex_is_int_const(t.dim[i], -1)) {
      if (infer >= 0) return FAIL(c, "reshape: only one -1 allowed in %s", shape_str(g, &t));
      infer = i;
    } else if (!dim_ok(t.dim[i])) {
      return FAIL(c, "reshape: dimension %s in %s must be positive or -1", expr_str(g, t.dim[i]), shape_str(g, &t));
    }
  }
  Expr *n_in = numel(g, &x->shape);
  Shape known = t;
  if (infer >= 0) known.dim[infer] = ex_int(g->pool, 1);
  if (!n_in || !numel(g, &known))
    return FAIL(c, "reshape: element count of %s or %s is too large", shape_str(g, &x->shape), shape_str(g, &t));
  Shape asked = t;
  if (infer >= 0) t.dim[infer] = divide_count(g, &x->shape, &t, infer);
  Expr *n_out = numel(g, &t);
  if (!n_out || n_in != n_out || (infer >= 0 && !dim_ok(t.dim[infer]))) {
    if (!n_out) return FAIL(c, "reshape: element count of %s is too large", shape_str(g, &t));
    if (ex_is_const(n_in) && ex_is_const(n_out) && infer < 0)
      return FAIL(c, "reshape: cannot reshape %s (%s elements) to %s (%s elements)", shape_str(g, &x->shape),
                  expr_str(g, n_in), shape_str(g, &asked), expr_str(g, n_out));
    if (ex_is_const(n_in) && infer >= 0) {
      return FAIL(c, "reshape: cannot reshape %s (%s elements) to %s (%s elements is not a multiple of %s)",
                  shape_str(g, &x->shape), expr_str(g, n_in), shape_str(g, &asked), expr_str(g, n_in),
                  expr_str(g, numel(g, &known)));
    }
    return FAIL(c, "reshape: cannot reshape %s (%s elements) to %s: element counts are not provably equal",
                shape_str(g, &x->shape), expr_str(g, n_in), shape_str(g, &asked));
  }
  nd->shape = t;
  nd->attr.shape = t;
  nd->dtype = x->dtype;
  return 0;
}

static int infer_permute(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *x = in[0];
  GAttr *at = &nd->attr;
  int r = x->shape.rank, seen[LT_MAX_RANK] = {0};
  if (at->naxes != r)
    return FAIL(c, "permute: permutation has %d entries but %s has rank %d", at->naxes, shape_str(c->g, &x->shape), r);
  for (int i = 0; i < r; i++) {
    if (norm_axis(c, at->axes[i], &x->shape, &at->axes[i])) return -1;
    if (seen[at->axes[i]]++) return FAIL(c, "permute: axis %d appears twice in the permutation", at->axes[i]);
  }
  nd->shape.rank = r;
  for (int i = 0; i < r; i++) nd->shape.dim[i] = x->shape.dim[at->axes[i]];
  nd->dtype = x->dtype;
  return 0;
}

/* A slice bound: negative constants and a missing end count from the end of the axis. */
typedef struct Bound {
  int rel;      /* relative to the dim: value = dim + off */
  int64_t off;  /* offset (rel) or constant value (!rel, is_const) */
  int is_const; /* !rel and a constant */
  Expr *e;      /* resolved expression */
} Bound;

static Bound resolve_bound(ExprPool *p, Expr *b, Expr *dim) {
  Bound r = {0};
  if (!b) r.rel = 1;
  else if (b->op == X_CONST && !dtype_is_float(b->dtype) && b->ival < 0) r.rel = 1, r.off = b->ival;
  else if (b->op == X_CONST && !dtype_is_float(b->dtype)) r.is_const = 1, r.off = b->ival;
  int64_t dv = 0;
  if (r.rel && const_dim(dim, &dv)) r.rel = 0, r.is_const = 1, r.off += dv;
  r.e = r.rel ? ex_add(p, dim, ex_int(p, r.off)) : r.is_const ? ex_int(p, r.off) : b;
  return r;
}

static int infer_slice(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *x = in[0];
  GAttr *at = &nd->attr;
  ExprPool *p = c->g->pool;
  if (norm_axis(c, at->axis, &x->shape, &at->axis)) return -1;
  if (!at->start) return FAIL(c, "slice: start is missing");
  if (dtype_is_float(at->start->dtype) || (at->end && dtype_is_float(at->end->dtype)))
    return FAIL(c, "slice: bounds must be integers");
  for (int i = 0; i < 2; i++) { /* keeps the bound arithmetic below in range */
    Expr *b = i ? at->end : at->start;
    if (b && b->op == X_CONST && (b->ival > MAX_DIM || b->ival < -MAX_DIM))
      return FAIL(c, "slice: bound %lld is out of range", (long long)b->ival);
  }
  Expr *dim = x->shape.dim[at->axis];
  Bound s = resolve_bound(p, at->start, dim), e = resolve_bound(p, at->end, dim);
  int64_t dv = 0;
  int dconst = const_dim(dim, &dv);
  int bad = (s.is_const && s.off < 0) || (s.rel && s.off > 0) || (e.rel && e.off > 0) ||
            (s.is_const && e.is_const && s.off >= e.off) || (s.rel && e.rel && s.off >= e.off) ||
            (dconst && e.is_const && e.off > dv) || (e.is_const && e.off <= 0);
  if (bad) {
    StrBuf b = {0};
    ex_print(&b, at->start, NULL);
    sb_puts(&b, ", ");
    if (at->end) ex_print(&b, at->end, NULL);
    const char *bs = arena_strdup(c->g->arena, sb_str(&b));
    sb_free(&b);
    return FAIL(c, "slice: bounds (%s) out of range for axis %d of %s (need 0 <= start < end <= %s)", bs, at->axis,
                shape_str(c->g, &x->shape), expr_str(c->g, dim));
  }
  Expr *len;
  if (s.rel == e.rel && (s.rel || (s.is_const && e.is_const))) len = ex_int(p, e.off - s.off);
  else if (s.is_const && e.rel) len = ex_add(p, dim, ex_int(p, e.off - s.off));
  else len = ex_bin(p, X_SUB, e.e, s.e);
  at->start = s.e;
  at->end = e.e;
  nd->shape = x->shape;
  nd->shape.dim[at->axis] = len;
  nd->dtype = x->dtype;
  return 0;
}

static int infer_concat(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *a = in[0], *b = in[1];
  const Shape *A = &a->shape, *B = &b->shape;
  if (A->rank != B->rank || A->rank == 0)
    return FAIL(c, "concat: shapes %s and %s must have the same non-zero rank", shape_str(c->g, A), shape_str(c->g, B));
  if (norm_axis(c, nd->attr.axis, A, &nd->attr.axis)) return -1;
  for (int i = 0; i < A->rank; i++)
    if (i != nd->attr.axis && A->dim[i] != B->dim[i])
      return FAIL(c, "concat: shapes %s and %s differ outside axis %d", shape_str(c->g, A), shape_str(c->g, B),
                  nd->attr.axis);
  nd->shape = *A;
  Expr *da = A->dim[nd->attr.axis], *db = B->dim[nd->attr.axis];
  if (da->op == X_CONST && db->op == X_CONST && da->ival + db->ival > MAX_DIM)
    return FAIL(c, "concat: result dimension is too large");
  nd->shape.dim[nd->attr.axis] = da == db ? ex_mul(c->g->pool, da, ex_int(c->g->pool, 2)) : ex_add(c->g->pool, da, db);
  nd->dtype = dtype_promote(a->dtype, b->dtype);
  return 0;
}

static int infer_cache_write(Ctx *c, GNode *nd, GNode *const *in) {
  const GNode *cache = in[0], *x = in[1];
  if (cache->op != G_INPUT)
    return FAIL(c, "cache_write: the cache must be a program input (persistent state), not a computed value");
  const Shape *C = &cache->shape, *X = &x->shape;
  if (C->rank != X->rank)
    return FAIL(c, "cache_write: cache %s and value %s differ in rank", shape_str(c->g, C), shape_str(c->g, X));
  if (norm_axis(c, nd->attr.axis, C, &nd->attr.axis)) return -1;
  for (int d = 0; d < C->rank; d++)
    if (d != nd->attr.axis && C->dim[d] != X->dim[d])
      return FAIL(c, "cache_write: cache %s and value %s differ outside axis %d", shape_str(c->g, C),
                  shape_str(c->g, X), nd->attr.axis);
  if (dtype_is_float(cache->dtype) != dtype_is_float(x->dtype))
    return FAIL(c, "cache_write: cache is %s but the value is %s", dtype_name(cache->dtype), dtype_name(x->dtype));
  if (!nd->attr.start) nd->attr.start = ex_int(c->g->pool, 0);
  nd->shape = *C;
  nd->dtype = cache->dtype;
  return 0;
}

static int infer_argmax(Ctx *c, GNode *nd, GNode *const *in) {
  if (nd->attr.naxes != 1)
    return FAIL(c, "argmax: give exactly one axis (got %d)", nd->attr.naxes == 0 ? in[0]->shape.rank : nd->attr.naxes);
  if (infer_reduce(c, nd, in)) return -1;
  nd->dtype = DT_I64;
  return 0;
}

static int infer_softmax(Ctx *c, GNode *nd, GNode *const *in) {
  if (need_float(c, in[0], "x") || norm_axis(c, nd->attr.axis, &in[0]->shape, &nd->attr.axis)) return -1;
  nd->shape = in[0]->shape;
  nd->dtype = in[0]->dtype;
  return 0;
}

static int infer_cast(Ctx *c, GNode *nd, GNode *const *in) {
  if ((unsigned)nd->attr.dtype >= DT_COUNT || nd->attr.dtype == DT_BOOL)
    return FAIL(c, "cast: unsupported target dtype");
  if (dtype_is_quant(nd->attr.dtype))
    return FAIL(c, "cast: %s is a weight format that only program inputs have", dtype_name(nd->attr.dtype));
  nd->shape = in[0]->shape;
  nd->dtype = nd->attr.dtype;
  return 0;
}

/* A cache updated in place by cache_write may have no other reader: the old state is gone once the
 * kernel writes it. Checked as the graph is built, so the message points at the second use. */
static int check_cache_use(Ctx *c, const GNode *nd, GNode *const *in) {
  for (int i = 0; i < nd->nin; i++) {
    const GNode *s = in[i];
    if (s->op != G_INPUT) continue;
    const char *name = s->name ? s->name : "?";
    if (s->writer) {
      const GNode *w = &c->g->nodes[s->writer];
      return FAIL(c,
                  "%s: the cache '%s' is updated in place by the cache_write at line %d, column %d; read the "
                  "result of cache_write instead",
                  c->op, name, w->line, w->col);
    }
    if ((nd->op == G_CACHE_WRITE || nd->op == G_CACHE_SCATTER) && i == 0 && s->first_use) {
      const GNode *u = &c->g->nodes[s->first_use];
      return FAIL(c,
                  "cache_write: the cache '%s' is also read by the %s at line %d, column %d; read the result of "
                  "cache_write instead (it is updated in place)",
                  name, gop_name(u->op), u->line, u->col);
    }
  }
  return 0;
}

/* The shape rules, from the op table. */
typedef int (*InferFn)(Ctx *c, GNode *nd, GNode *const *in);
static const InferFn infer_fns[G_OP_COUNT] = {
#define OP(E, NAME, LO, HI, INFER, ...) [G_##E] = INFER,
#include "ops.def"
#undef OP
};

int graph_op(Graph *g, GOp op, const int *in, int nin, const GAttr *attr, int line, int col, Diag *d) {
  Ctx c = {g, d, line, col, gop_name(op)};
  if ((unsigned)op >= G_OP_COUNT || !infer_fns[op])
    return FAIL(&c, "graph_op: %s nodes are made with graph_input/graph_const", gop_name(op));
  const GOpInfo *info = gop_info(op);
  int lo = info->min_in, hi = info->max_in;
  if (nin < lo || nin > hi || (nin && !in)) {
    if (lo == hi) return FAIL(&c, "%s: expected %d input%s, got %d", c.op, lo, lo == 1 ? "" : "s", nin);
    return FAIL(&c, "%s: expected %d to %d inputs, got %d", c.op, lo, hi, nin);
  }
  GNode *x[G_MAX_IN] = {0};
  for (int i = 0; i < nin; i++) {
    if (in[i] < 0 || in[i] >= g->n) return FAIL(&c, "%s: input %d refers to no node (%d)", c.op, i, in[i]);
    x[i] = &g->nodes[in[i]];
  }
  GNode tmp = {0}; /* built aside so a failed op leaves the graph unchanged */
  tmp.op = op;
  tmp.line = line;
  tmp.col = col;
  tmp.nin = nin;
  for (int i = 0; i < nin; i++) tmp.in[i] = in[i];
  tmp.attr = attr ? *attr : gop_default_attr(op);
  if (infer_fns[op](&c, &tmp, x) || check_cache_use(&c, &tmp, x)) return -1;
  if ((op == G_CACHE_WRITE || op == G_CACHE_SCATTER) && dtype_is_quant(x[0]->dtype))
    return FAIL(&c, "%s: the cache is %s; a quantized tensor is read-only (a weight)", c.op, dtype_name(x[0]->dtype));
  if (dtype_is_quant(tmp.dtype)) tmp.dtype = DT_F32; /* ops read quantized inputs as f32 values */
  /* Every stage walks size expressions recursively: their depth is bounded here, where it grows (a
   * long chain of concats of a run-time size). */
  for (int i = 0; i < tmp.shape.rank; i++)
    if (tmp.shape.dim[i]->depth > GRAPH_MAX_SIZE_DEPTH)
      return FAIL(&c, "%s: the size of dimension %d is an expression of more than %d nested terms", c.op, i,
                  GRAPH_MAX_SIZE_DEPTH);
  if (!numel_fits(&tmp.shape))
    return FAIL(&c, "%s: the result %s%s has more than 2^56 elements", c.op, dtype_name(tmp.dtype),
                shape_str(g, &tmp.shape));
  GNode *nd = new_node(g, op, line, col);
  int id = nd->id;
  *nd = tmp;
  nd->id = id;
  for (int i = 0; i < nin; i++) {
    GNode *src = &g->nodes[in[i]];
    if (!src->first_use) src->first_use = id;
    if ((op == G_CACHE_WRITE || op == G_CACHE_SCATTER) && i == 0) src->writer = id;
  }
  return id;
}
