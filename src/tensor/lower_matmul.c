/* matmul and linear: both operands are viewed to one broadcast shape [..., m, n, k] and contracted
 * over k; the size-1 k axis is then dropped by a view. */
#include "lower_internal.h"

/* a [..., m, k] @ b [..., k, n]; a 1-D a is [k] (no m axis in the result), a 1-D b is [k] (no n axis). */
int lower_matmul(Lower *L, const GNode *n) {
  ExprPool *x = L->x;
  int a = lw_node(L, n->in[0]), b = lw_node(L, n->in[1]);
  Shape as = *lw_shape(L, a), bs = *lw_shape(L, b);
  int am = as.rank > 1, bn = bs.rank > 1;
  int nb = n->shape.rank - am - bn; /* batch dims, read from the graph's result shape */
  if (nb < 0 || nb + 3 > LT_MAX_RANK) return lw_fail(L, n, "unsupported operand ranks %d and %d", as.rank, bs.rank);
  Shape c = {nb + 3};
  for (int k = 0; k < nb; k++) c.dim[k] = n->shape.dim[k];
  c.dim[nb] = am ? as.dim[as.rank - 2] : ex_int(x, 1);
  c.dim[nb + 1] = bn ? bs.dim[bs.rank - 1] : ex_int(x, 1);
  c.dim[nb + 2] = as.dim[as.rank - 1];
  Expr *mv = lw_var(L, nb), *nv = lw_var(L, nb + 1), *kv = lw_var(L, nb + 2);

  /* operand batch dims are right-aligned to the result's; size-1 dims broadcast */
  Expr *ai[LT_MAX_RANK], *bi[LT_MAX_RANK];
  for (int d = 0; d < as.rank - 2; d++) {
    int k = nb - (as.rank - 2) + d;
    ai[d] = ex_is_int_const(as.dim[d], 1) && !ex_is_int_const(c.dim[k], 1) ? ex_int(x, 0) : lw_var(L, k);
  }
  for (int d = 0; d < bs.rank - 2; d++) {
    int k = nb - (bs.rank - 2) + d;
    bi[d] = ex_is_int_const(bs.dim[d], 1) && !ex_is_int_const(c.dim[k], 1) ? ex_int(x, 0) : lw_var(L, k);
  }
  if (am) {
    ai[as.rank - 2] = mv;
    ai[as.rank - 1] = kv;
  } else ai[0] = kv;
  if (bn) {
    bi[bs.rank - 2] = kv;
    bi[bs.rank - 1] = nv;
  } else bi[0] = kv;
  int va = t_view(L->p, a, &c, ai, NULL), vb = t_view(L->p, b, &c, bi, NULL);
  int r = t_contract(L->p, va, vb, 1u << (nb + 2));

  /* drop k, and m / n where an operand was 1-D */
  unsigned drop = 1u << (nb + 2);
  if (!am) drop |= 1u << nb;
  if (!bn) drop |= 1u << (nb + 1);
  return lw_drop(L, r, drop, &n->shape);
}

/* x [..., in] @ w[out, in]^T (+ b[out]) */
int lower_linear(Lower *L, const GNode *n) {
  ExprPool *x = L->x;
  int in = lw_node(L, n->in[0]), w = lw_node(L, n->in[1]);
  Shape xs = *lw_shape(L, in);
  int r = xs.rank;
  if (r + 1 > LT_MAX_RANK) return lw_fail(L, n, "input rank %d is too large", r);
  Shape c = xs;
  c.rank = r + 1;
  c.dim[r - 1] = lw_shape(L, w)->dim[0];
  c.dim[r] = xs.dim[r - 1];
  Expr *xi[LT_MAX_RANK], *wi[2] = {lw_var(L, r - 1), lw_var(L, r)};
  for (int d = 0; d < r - 1; d++) xi[d] = lw_var(L, d);
  xi[r - 1] = lw_var(L, r);
  int vx = t_view(L->p, in, &c, xi, NULL), vw = t_view(L->p, w, &c, wi, NULL);
  int y = t_contract(L->p, vx, vw, 1u << r);
  y = lw_drop(L, y, 1u << r, &n->shape);
  if (n->nin < 3 || n->in[2] < 0) return y;
  int src[2] = {y, lw_node(L, n->in[2])};
  Expr *fn = ex_add(x, lw_arg(L, 0, y), lw_arg(L, 1, src[1]));
  return lw_map(L, fn, n->dtype, &n->shape, src, 2);
}
