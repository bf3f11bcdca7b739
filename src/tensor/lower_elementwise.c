/* Elementwise ops (one map each, constants folded into the fn) and reductions. */
#include "lower_internal.h"

/* Operand i of an elementwise op: a literal for a G_CONST, else the next map argument. */
static Expr *operand(Lower *L, const GNode *n, int i, int *src, int *nsrc) {
  const GNode *in = &L->g->nodes[n->in[i]];
  if (in->op == G_CONST) {
    /* Constants are weakly typed: they take the op's compute type. */
    DType t = dtype_is_float(n->dtype) ? DT_F32 : dtype_compute(n->dtype);
    if (n->op == G_DIV) t = DT_F32;
    return dtype_is_float(in->dtype) ? ex_const(L->x, t, in->attr.value) : ex_const_int(L->x, t, in->attr.ivalue);
  }
  int t = lw_node(L, in->id);
  for (int j = 0; j < *nsrc; j++)
    if (src[j] == t) return lw_arg(L, j, t); /* x*x reads x once */
  src[*nsrc] = t;
  return lw_arg(L, (*nsrc)++, t);
}

static Expr *unary_fn(Lower *L, GOp op, Expr *a) {
  ExprPool *x = L->x;
  switch (op) {
  case G_NEG: return ex_un(x, X_NEG, a);
  case G_EXP: return ex_un(x, X_EXP, a);
  case G_LOG: return ex_un(x, X_LOG, a);
  case G_SQRT: return ex_un(x, X_SQRT, a);
  case G_RSQRT: return ex_un(x, X_RSQRT, a);
  case G_TANH: return ex_un(x, X_TANH, a);
  case G_SIGMOID: return ex_un(x, X_SIGMOID, a);
  case G_ABS: return ex_un(x, X_ABS, a);
  case G_SILU: return ex_mul(x, a, ex_un(x, X_SIGMOID, a));
  case G_GELU: {
    Expr *erf = ex_un(x, X_ERF, ex_mul(x, a, lw_f32(L, 0.7071067811865476)));
    return ex_mul(x, ex_mul(x, lw_f32(L, 0.5), a), ex_add(x, lw_f32(L, 1), erf));
  }
  case G_RELU: return ex_bin(x, X_MAX, a, ex_const(x, dtype_compute(a->dtype), 0));
  default: return a; /* G_CAST: the final cast does the work */
  }
}

static Expr *binary_fn(Lower *L, GOp op, Expr *a, Expr *b) {
  ExprPool *x = L->x;
  switch (op) {
  case G_ADD: return ex_bin(x, X_ADD, a, b);
  case G_SUB: return ex_bin(x, X_SUB, a, b);
  case G_MUL: return ex_bin(x, X_MUL, a, b);
  case G_DIV:
    /* True division, also for integers. */
    return ex_bin(x, X_DIV, dtype_is_float(a->dtype) ? a : ex_cast(x, DT_F32, a),
                  dtype_is_float(b->dtype) ? b : ex_cast(x, DT_F32, b));
  case G_POW: return ex_bin(x, X_POW, a, b);
  case G_MAXIMUM: return ex_bin(x, X_MAX, a, b);
  case G_MINIMUM: return ex_bin(x, X_MIN, a, b);
  default: return a;
  }
}

int lower_elementwise(Lower *L, const GNode *n) {
  int src[3], nsrc = 0;
  Expr *a = operand(L, n, 0, src, &nsrc);
  Expr *fn = n->nin >= 2 ? binary_fn(L, n->op, a, operand(L, n, 1, src, &nsrc)) : unary_fn(L, n->op, a);
  return lw_map(L, fn, n->dtype, &n->shape, src, nsrc);
}

/* argmax = min over the axis of (x == max ? index : n), then n (every element NaN) -> 0: two reductions
 * that fuse into one kernel per row. */
int lower_argmax(Lower *L, const GNode *n) {
  int x = lw_node(L, n->in[0]), a = n->attr.axes[0];
  Shape xs = *lw_shape(L, x);
  unsigned axes = 1u << a;
  int m = t_reduce(L->p, RED_MAX, x, axes);
  int xm[2] = {x, m};
  Expr *len = xs.dim[a];
  Expr *hit = ex_bin(L->x, X_EQ, lw_arg(L, 0, x), lw_arg(L, 1, m));
  int idx = lw_map(L, ex_select(L->x, hit, lw_var(L, a), len), DT_I64, &xs, xm, 1 + 1);
  int first = t_reduce(L->p, RED_MIN, idx, axes);
  Shape fs = *lw_shape(L, first);
  Expr *none = ex_bin(L->x, X_EQ, lw_arg(L, 0, first), len);
  int r = lw_map(L, ex_select(L->x, none, ex_int(L->x, 0), lw_arg(L, 0, first)), DT_I64, &fs, &first, 1);
  if (!n->attr.keepdim) r = lw_drop(L, r, axes, &n->shape);
  return r;
}

int lower_reduce(Lower *L, const GNode *n) {
  int x = lw_node(L, n->in[0]);
  Shape xs = *lw_shape(L, x);
  unsigned axes = 0;
  for (int i = 0; i < n->attr.naxes; i++) axes |= 1u << n->attr.axes[i];
  if (n->attr.naxes == 0) axes = (1u << xs.rank) - 1; /* no axes given: reduce everything */
  ReduceOp op = n->op == G_MAX ? RED_MAX : n->op == G_MIN ? RED_MIN : RED_ADD;
  int r = t_reduce(L->p, op, x, axes);
  if (n->op == G_MEAN) {
    Expr *fn = ex_bin(L->x, X_DIV, lw_arg(L, 0, r), lw_fdim(L, lw_numel_axes(L, &xs, axes)));
    Shape rs = *lw_shape(L, r);
    r = t_map(L->p, fn, fn->dtype, &rs, &r, 1);
  }
  if (!n->attr.keepdim) r = lw_drop(L, r, axes, &n->shape);
  return r;
}
