/* Data-movement ops as views (index maps): reshape, permute, slice; concat as two masked views added. */
#include "lower_internal.h"

/* One group of a reshape: source dims [i0,i1) hold exactly the elements of output dims [j0,j1).
 * flat = row-major index of the group's output vars; source dim d reads (flat // stride_d) % dim_d,
 * without the % on the group's first dim and without the // on its last. Size-1 dims read 0. */
static void reshape_group(Lower *L, const Shape *s, const Shape *out, int i0, int i1, int j0, int j1, Expr **idx) {
  ExprPool *x = L->x;
  Expr *flat = ex_int(x, 0), *stride = ex_int(x, 1);
  for (int k = j1 - 1; k >= j0; k--) {
    if (ex_is_int_const(out->dim[k], 1)) continue;
    flat = ex_add(x, ex_mul(x, lw_var(L, k), stride), flat);
    stride = ex_mul(x, stride, out->dim[k]);
  }
  int first = -1, last = -1;
  for (int d = i0; d < i1; d++)
    if (!ex_is_int_const(s->dim[d], 1)) {
      if (first < 0) first = d;
      last = d;
    }
  stride = ex_int(x, 1);
  for (int d = i1 - 1; d >= i0; d--) {
    if (ex_is_int_const(s->dim[d], 1)) {
      idx[d] = ex_int(x, 0);
      continue;
    }
    Expr *e = d == last ? flat : ex_bin(x, X_IDIV, flat, stride);
    idx[d] = d == first ? e : ex_bin(x, X_MOD, e, s->dim[d]);
    stride = ex_mul(x, stride, s->dim[d]);
  }
}

/* Row-major reshape as a view. The shapes are split into the smallest groups whose element counts
 * match (equal dims pair up 1:1 and read the output var directly), which keeps the index math short:
 * [2,3,4] -> [2,12] reads [i0, i1 // 4, i1 % 4]. Symbolic dims that do not pair up end grouping. */
static int reshape(Lower *L, int src, const Shape *out) {
  Shape s = *lw_shape(L, src);
  Expr *idx[LT_MAX_RANK];
  int i = 0, j = 0;
  while (i < s.rank || j < out->rank) {
    int gi = i, gj = j;
    if (i < s.rank && j < out->rank && s.dim[i] == out->dim[j]) {
      i++, j++;
    } else {
      int64_t ps = 1, po = 1;
      int ok = 1;
      while (ok && (ps != po || i == gi || j == gj) && (i < s.rank || j < out->rank)) {
        int take_src = i < s.rank && (ps <= po || j >= out->rank);
        Expr *dim = take_src ? s.dim[i++] : out->dim[j++];
        if (dim->op != X_CONST) ok = 0;
        else if (take_src) ps *= dim->ival;
        else po *= dim->ival;
      }
      if (!ok) i = s.rank, j = out->rank; /* symbolic: linearise everything that is left */
    }
    reshape_group(L, &s, out, gi, i, gj, j, idx);
  }
  return t_view(L->p, src, out, idx, NULL);
}

/* out = (i_axis < dimA ? a[..i_axis..] : 0) + (i_axis >= dimA ? b[..i_axis - dimA..] : 0) */
static int concat(Lower *L, const GNode *n) {
  ExprPool *x = L->x;
  int a = lw_node(L, n->in[0]), b = lw_node(L, n->in[1]);
  int ax = n->attr.axis, r = n->shape.rank;
  Expr *da = lw_shape(L, a)->dim[ax], *iv = lw_var(L, ax);
  Expr *idx[LT_MAX_RANK];
  for (int d = 0; d < r; d++) idx[d] = lw_var(L, d);
  int va = t_view(L->p, a, &n->shape, idx, ex_bin(x, X_LT, iv, da));
  idx[ax] = ex_bin(x, X_SUB, iv, da);
  int vb = t_view(L->p, b, &n->shape, idx, ex_bin(x, X_LE, da, iv));
  int src[2] = {va, vb};
  Expr *fn = ex_add(x, lw_arg(L, 0, va), lw_arg(L, 1, vb));
  return t_map(L->p, ex_cast(x, n->dtype, fn), n->dtype, &n->shape, src, 2);
}

int lower_shape_op(Lower *L, const GNode *n) {
  if (n->op == G_CONCAT) return concat(L, n);
  int src = lw_node(L, n->in[0]);
  if (n->op == G_RESHAPE) return reshape(L, src, &n->shape);
  int r = lw_shape(L, src)->rank;
  Expr *idx[LT_MAX_RANK];
  for (int d = 0; d < r; d++) idx[d] = lw_var(L, d);
  if (n->op == G_PERMUTE)
    for (int k = 0; k < r; k++) idx[n->attr.axes[k]] = lw_var(L, k);
  else /* G_SLICE */ idx[n->attr.axis] = ex_add(L->x, lw_var(L, n->attr.axis), n->attr.start);
  return t_view(L->p, src, &n->shape, idx, NULL);
}

/* cache_write: x goes to the cache at start along the axis, converted to the cache's dtype. */
int lower_cache_write(Lower *L, const GNode *n) {
  ExprPool *x = L->x;
  int cache = lw_node(L, n->in[0]), val = lw_cast(L, lw_node(L, n->in[1]), n->dtype);
  if (val < 0) return -1;
  Expr *idx[LT_MAX_RANK];
  for (int d = 0; d < n->shape.rank; d++)
    idx[d] = d == n->attr.axis ? ex_add(x, lw_var(L, d), n->attr.start) : lw_var(L, d);
  return t_update(L->p, cache, val, idx);
}

/* cache_scatter: x[t] goes to row slots[t] of the cache's [blocks * block_size] rows, converted to the
 * cache's dtype; a slot outside them writes nothing. */
int lower_cache_scatter(Lower *L, const GNode *n) {
  ExprPool *x = L->x;
  int cache = lw_node(L, n->in[0]), val = lw_cast(L, lw_node(L, n->in[1]), n->dtype), slots = lw_node(L, n->in[2]);
  if (val < 0 || slots < 0) return -1;
  const Shape *C = lw_shape(L, cache);
  Expr *slot = ex_cast(x, DT_I64, lw_arg(L, 0, slots)), *bs = C->dim[1];
  Expr *idx[LT_MAX_RANK] = {ex_bin(x, X_IDIV, slot, bs), ex_bin(x, X_MOD, slot, bs)};
  for (int d = 2; d < C->rank; d++) idx[d] = lw_var(L, d - 1);
  Expr *valid = ex_bin(x, X_AND, ex_bin(x, X_LE, ex_int(x, 0), slot), ex_bin(x, X_LT, slot, ex_mul(x, C->dim[0], bs)));
  return t_scatter(L->p, cache, val, slots, idx, valid);
}

static Expr *clamp(ExprPool *x, Expr *v, Expr *hi) {
  return ex_bin(x, X_MIN, ex_bin(x, X_MAX, v, ex_int(x, 0)), ex_add(x, hi, ex_int(x, -1)));
}

/* paged_gather: the row's block table entry for key j names the pool block; the key is row j % block_size of
 * it. Every index is clamped, so a table entry that is garbage reads some block of the pool, never outside. */
int lower_paged_gather(Lower *L, const GNode *n) {
  ExprPool *x = L->x;
  int pool = lw_node(L, n->in[0]), table = lw_node(L, n->in[1]), rows = lw_node(L, n->in[2]);
  if (pool < 0 || table < 0 || rows < 0) return -1;
  const Shape *P = lw_shape(L, pool), *TB = lw_shape(L, table);
  Expr *nt = lw_shape(L, rows)->dim[0], *bs = P->dim[1], *v0 = lw_var(L, 0), *v1 = lw_var(L, 1);
  Shape one = {1, {nt}}, tl = {2, {nt, n->attr.end}};
  int rc = t_map(L->p, clamp(x, ex_cast(x, DT_I64, lw_arg(L, 0, rows)), TB->dim[0]), DT_I64, &one, &rows, 1);
  int trow = t_gather(L->p, table, rc); /* [tokens, blocks per sequence] */
  Expr *ti[2] = {v0, ex_bin(x, X_MIN, ex_bin(x, X_IDIV, v1, bs), ex_add(x, TB->dim[1], ex_int(x, -1)))};
  int entry = t_view(L->p, trow, &tl, ti, NULL);
  int blk = t_map(L->p, clamp(x, ex_cast(x, DT_I64, lw_arg(L, 0, entry)), P->dim[0]), DT_I64, &tl, &entry, 1);
  int g = t_gather(L->p, pool, blk); /* [tokens, len, block_size, ...] */
  Shape out = n->shape;
  Expr *gi[LT_MAX_RANK] = {v0, v1, ex_bin(x, X_MOD, v1, bs)};
  for (int d = 2; d < P->rank; d++) gi[d + 1] = lw_var(L, d);
  return t_view(L->p, g, &out, gi, NULL);
}
