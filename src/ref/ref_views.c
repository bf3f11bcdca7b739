/* Reference: reshape, permute, slice, concat (data movement only). */
#include <string.h>
#include "ref_internal.h"

/* Integer results move exactly: o->ival[oi] = x's element xi (exact when x has one). */
static void move_int(const RefOp *op, const RefTensor *x, int64_t oi, int64_t xi) {
  if (op->out->ival) op->out->ival[oi] = ref_ival(x, xi);
}

static void done_int(const RefOp *op) {
  if (op->out->ival) *op->exact = 1;
}

int ref_reshape(const RefOp *op) {
  const RefTensor *x = op->in[0];
  if (x->numel != op->out->numel) {
    char a[160], b[160];
    return ref_fail(op, "reshape: cannot reshape %s (%lld elements) into %s (%lld elements)",
                    ref_dims_str(a, sizeof a, x->rank, x->dims), (long long)x->numel,
                    ref_dims_str(b, sizeof b, op->out->rank, op->out->dims), (long long)op->out->numel);
  }
  if (x->numel) memcpy(op->out->data, x->data, (size_t)x->numel * sizeof(double));
  for (int64_t i = 0; op->out->ival && i < x->numel; i++) move_int(op, x, i, i);
  done_int(op);
  return 1;
}

int ref_permute(const RefOp *op) {
  const RefTensor *x = op->in[0];
  RefTensor *o = op->out;
  const GAttr *at = &op->node->attr;
  char a[160], b[160];
  int seen[LT_MAX_RANK] = {0}, ok = at->naxes == x->rank && o->rank == x->rank;
  for (int i = 0; ok && i < x->rank; i++) {
    int p = at->axes[i];
    ok = p >= 0 && p < x->rank && !seen[p] && o->dims[i] == x->dims[p];
    if (ok) seen[p] = 1;
  }
  if (!ok)
    return ref_fail(op, "permute: permutation of %d axes does not map %s to %s", at->naxes,
                    ref_dims_str(a, sizeof a, x->rank, x->dims), ref_dims_str(b, sizeof b, o->rank, o->dims));
  int64_t xs[LT_MAX_RANK], st[LT_MAX_RANK], idx[LT_MAX_RANK] = {0};
  ref_strides(x->rank, x->dims, xs);
  for (int i = 0; i < o->rank; i++) st[i] = xs[at->axes[i]]; /* result axis i walks input axis perm[i] */
  for (int64_t i = 0; i < o->numel; i++) {
    int64_t off = 0;
    for (int k = 0; k < o->rank; k++) off += idx[k] * st[k];
    o->data[i] = x->data[off];
    move_int(op, x, i, off);
    ref_next_index(o->rank, o->dims, idx);
  }
  done_int(op);
  return 1;
}

/* Rows before the axis and elements after it; a slice and a concat move whole [len * inner] blocks. */
static void split_at(const RefTensor *t, int axis, int64_t *outer, int64_t *inner) {
  *outer = *inner = 1;
  for (int i = 0; i < axis; i++) *outer *= t->dims[i];
  for (int i = axis + 1; i < t->rank; i++) *inner *= t->dims[i];
}

static int dims_equal_except(const RefTensor *a, const RefTensor *b, int axis) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (i != axis && a->dims[i] != b->dims[i]) return 0;
  return 1;
}

int ref_slice(const RefOp *op) {
  const RefTensor *x = op->in[0];
  RefTensor *o = op->out;
  int axis = op->node->attr.axis;
  int64_t start, end, outer, inner;
  char a[160], b[160];
  if (axis < 0 || axis >= x->rank) return ref_fail(op, "slice: axis %d out of range for rank %d", axis, x->rank);
  if (!ref_eval_dim(op, op->node->attr.start, &start) || !ref_eval_dim(op, op->node->attr.end, &end)) return 0;
  if (start < 0 || end < start || end > x->dims[axis])
    return ref_fail(op, "slice: range [%lld, %lld) out of bounds for axis %d of %s", (long long)start, (long long)end,
                    axis, ref_dims_str(a, sizeof a, x->rank, x->dims));
  if (!dims_equal_except(x, o, axis) || o->dims[axis] != end - start)
    return ref_fail(op, "slice: [%lld, %lld) of axis %d of %s does not give %s", (long long)start, (long long)end, axis,
                    ref_dims_str(a, sizeof a, x->rank, x->dims), ref_dims_str(b, sizeof b, o->rank, o->dims));
  split_at(x, axis, &outer, &inner);
  int64_t len = x->dims[axis], n = end - start;
  for (int64_t r = 0; r < outer; r++)
    if (n > 0 && inner > 0) {
      memcpy(o->data + r * n * inner, x->data + (r * len + start) * inner, (size_t)(n * inner) * sizeof(double));
      for (int64_t j = 0; o->ival && j < n * inner; j++)
        move_int(op, x, r * n * inner + j, (r * len + start) * inner + j);
    }
  done_int(op);
  return 1;
}

int ref_concat(const RefOp *op) {
  const RefTensor *x = op->in[0], *y = op->in[1];
  RefTensor *o = op->out;
  int axis = op->node->attr.axis;
  char a[160], b[160], c[160];
  if (axis < 0 || axis >= x->rank || !dims_equal_except(x, y, axis) || !dims_equal_except(x, o, axis) ||
      o->dims[axis] != x->dims[axis] + y->dims[axis])
    return ref_fail(op, "concat: %s and %s along axis %d do not give %s", ref_dims_str(a, sizeof a, x->rank, x->dims),
                    ref_dims_str(b, sizeof b, y->rank, y->dims), axis, ref_dims_str(c, sizeof c, o->rank, o->dims));
  int64_t outer, inner;
  split_at(x, axis, &outer, &inner);
  int64_t nx = x->dims[axis] * inner, ny = y->dims[axis] * inner;
  for (int64_t r = 0; r < outer; r++) {
    if (nx) memcpy(o->data + r * (nx + ny), x->data + r * nx, (size_t)nx * sizeof(double));
    if (ny) memcpy(o->data + r * (nx + ny) + nx, y->data + r * ny, (size_t)ny * sizeof(double));
    for (int64_t j = 0; o->ival && j < nx; j++) move_int(op, x, r * (nx + ny) + j, r * nx + j);
    for (int64_t j = 0; o->ival && j < ny; j++) move_int(op, y, r * (nx + ny) + nx + j, r * ny + j);
  }
  done_int(op);
  return 1;
}

/* cache_write: the cache with positions [start, start + len) along axis replaced by x. */
int ref_cache_write(const RefOp *op) {
  const RefTensor *c = op->in[0], *x = op->in[1];
  int axis = op->node->attr.axis;
  int64_t start;
  if (!ref_eval_dim(op, op->node->attr.start, &start)) return 0;
  char s1[160], s2[160];
  if (x->rank != c->rank || axis < 0 || axis >= c->rank || start < 0 || start + x->dims[axis] > c->dims[axis])
    return ref_fail(op, "cache_write: %s written at %lld along axis %d does not fit in cache %s",
                    ref_dims_str(s1, sizeof s1, x->rank, x->dims), (long long)start, axis,
                    ref_dims_str(s2, sizeof s2, c->rank, c->dims));
  for (int64_t i = 0; i < c->numel; i++) {
    op->out->data[i] = c->data[i];
    move_int(op, c, i, i);
  }
  done_int(op);
  int64_t cs[LT_MAX_RANK], idx[LT_MAX_RANK] = {0};
  ref_strides(c->rank, c->dims, cs);
  if (!x->numel) return 1;
  int64_t i = 0;
  do {
    int64_t off = 0;
    for (int d = 0; d < x->rank; d++) off += (idx[d] + (d == axis ? start : 0)) * cs[d];
    op->out->data[off] = ref_round(op->node->dtype, x->data[i]);
    move_int(op, x, off, i); /* the driver wraps it to the cache's dtype */
    i++;
  } while (ref_next_index(x->rank, x->dims, idx));
  return 1;
}

/* cache_scatter: the cache with row slots[t] of its [blocks * block_size, ...] rows replaced by x[t]; slots
 * outside the pool write nothing. */
int ref_cache_scatter(const RefOp *op) {
  const RefTensor *c = op->in[0], *x = op->in[1], *slots = op->in[2];
  char s1[160], s2[160];
  if (c->rank < 2 || x->rank + 1 != c->rank || slots->rank != 1 || slots->dims[0] != x->dims[0])
    return ref_fail(op, "cache_scatter: x %s does not fit cache %s", ref_dims_str(s1, sizeof s1, x->rank, x->dims),
                    ref_dims_str(s2, sizeof s2, c->rank, c->dims));
  for (int64_t i = 0; i < c->numel; i++) {
    op->out->data[i] = c->data[i];
    move_int(op, c, i, i);
  }
  done_int(op);
  int64_t nrows = c->dims[0] * c->dims[1], row = x->dims[0] ? x->numel / x->dims[0] : 0;
  for (int64_t t = 0; t < x->dims[0]; t++) {
    int64_t s = ref_ival(slots, t);
    if (s < 0 || s >= nrows) continue;
    for (int64_t j = 0; j < row; j++) {
      op->out->data[s * row + j] = ref_round(op->node->dtype, x->data[t * row + j]);
      move_int(op, x, s * row + j, t * row + j);
    }
  }
  return 1;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* paged_gather: out[t, j, ...] = pool[table[rows[t], j / bs], j % bs, ...], the row and block indices
 * clamped into the table and the pool. */
int ref_paged_gather(const RefOp *op) {
  const RefTensor *p = op->in[0], *tab = op->in[1], *rows = op->in[2];
  int64_t len;
  if (!ref_eval_dim(op, op->node->attr.end, &len)) return 0;
  char s1[160], s2[160];
  if (p->rank < 2 || tab->rank != 2 || rows->rank != 1 || !p->dims[0] || !tab->dims[0] || !tab->dims[1])
    return ref_fail(op, "paged_gather: pool %s or table %s is empty or misshapen",
                    ref_dims_str(s1, sizeof s1, p->rank, p->dims), ref_dims_str(s2, sizeof s2, tab->rank, tab->dims));
  int64_t bs = p->dims[1], row = p->numel / (p->dims[0] * bs), nt = rows->dims[0];
  if (op->out->numel != nt * len * row)
    return ref_fail(op, "paged_gather: result should hold %lld elements", (long long)(nt * len * row));
  for (int64_t t = 0; t < nt; t++) {
    int64_t r = clamp64(ref_ival(rows, t), 0, tab->dims[0] - 1);
    for (int64_t j = 0; j < len; j++) {
      int64_t blk = clamp64(ref_ival(tab, r * tab->dims[1] + clamp64(j / bs, 0, tab->dims[1] - 1)), 0, p->dims[0] - 1);
      int64_t src = (blk * bs + j % bs) * row, dst = (t * len + j) * row;
      for (int64_t i = 0; i < row; i++) {
        op->out->data[dst + i] = p->data[src + i];
        move_int(op, p, dst + i, src + i);
      }
    }
  }
  done_int(op);
  return 1;
}
