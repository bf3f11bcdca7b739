/* Reference: reductions, softmax, rms_norm, layer_norm. */
#include <math.h>
#include <stdlib.h>
#include "ref_internal.h"

int ref_reduce(const RefOp *op) {
  const RefTensor *x = op->in[0];
  RefTensor *o = op->out;
  const GAttr *at = &op->node->attr;
  GOp kind = op->node->op;
  int red[LT_MAX_RANK] = {0};
  if (at->naxes < 0 || at->naxes > LT_MAX_RANK)
    return ref_fail(op, "%s: invalid axis count %d", ref_op_name(kind), at->naxes);
  if (at->naxes == 0) {
    /* No axes: torch.sum(x) reduces everything (unless the result keeps every element). */
    if (o->numel != x->numel || x->numel == 0)
      for (int i = 0; i < x->rank; i++) red[i] = 1;
  }
  for (int k = 0; k < at->naxes; k++) {
    if (at->axes[k] < 0 || at->axes[k] >= x->rank)
      return ref_fail(op, "%s: axis %d out of range for rank %d", ref_op_name(kind), at->axes[k], x->rank);
    red[at->axes[k]] = 1;
  }
  /* The result's dims must be the input's with reduced axes dropped (or kept as 1). */
  int64_t want[LT_MAX_RANK], count = 1;
  int wr = 0;
  for (int i = 0; i < x->rank; i++) {
    if (red[i]) {
      count *= x->dims[i];
      if (at->keepdim) want[wr++] = 1;
    } else {
      want[wr++] = x->dims[i];
    }
  }
  int ok = wr == o->rank;
  for (int i = 0; ok && i < wr; i++) ok = want[i] == o->dims[i];
  if (!ok) {
    char a[160], b[160], c[160];
    return ref_fail(op, "%s: reducing %s gives %s, node says %s", ref_op_name(kind),
                    ref_dims_str(a, sizeof a, x->rank, x->dims), ref_dims_str(b, sizeof b, wr, want),
                    ref_dims_str(c, sizeof c, o->rank, o->dims));
  }
  /* Result offset of an input element: strides over the kept axes only. */
  int64_t ost[LT_MAX_RANK], s = 1, idx[LT_MAX_RANK] = {0};
  for (int i = x->rank - 1; i >= 0; i--) {
    ost[i] = red[i] ? 0 : s;
    if (!red[i]) s *= x->dims[i];
  }
  double init = kind == G_MAX ? -INFINITY : kind == G_MIN ? INFINITY : 0.0;
  for (int64_t i = 0; i < o->numel; i++) o->data[i] = init;
  for (int64_t i = 0; i < x->numel; i++) {
    int64_t oi = 0;
    for (int k = 0; k < x->rank; k++) oi += idx[k] * ost[k];
    double v = x->data[i], *acc = &o->data[oi];
    if (kind == G_SUM || kind == G_MEAN) *acc += v;
    else if (isnan(v) || isnan(*acc)) *acc = NAN; /* max/min propagate NaN, as torch */
    else if (kind == G_MAX ? v > *acc : v < *acc) *acc = v;
    ref_next_index(x->rank, x->dims, idx);
  }
  if (kind == G_MEAN)
    for (int64_t i = 0; i < o->numel; i++) o->data[i] /= (double)count; /* empty: 0/0 = NaN like torch */
  if (o->ival && kind != G_MEAN) { /* integer sums and extrema exactly (sums wrap, two's complement) */
    int64_t iinit = kind == G_MAX ? INT64_MIN : kind == G_MIN ? INT64_MAX : 0;
    for (int64_t i = 0; i < o->numel; i++) o->ival[i] = iinit;
    for (int k = 0; k < x->rank; k++) idx[k] = 0;
    for (int64_t i = 0; i < x->numel; i++) {
      int64_t oi = 0;
      for (int k = 0; k < x->rank; k++) oi += idx[k] * ost[k];
      int64_t v = ref_ival(x, i), *acc = &o->ival[oi];
      if (kind == G_SUM) *acc = (int64_t)((uint64_t)*acc + (uint64_t)v);
      else if (kind == G_MAX ? v > *acc : v < *acc) *acc = v;
      ref_next_index(x->rank, x->dims, idx);
    }
    *op->exact = 1;
  }
  return 1;
}

/* The index of the first maximum along the one axis; NaNs are skipped, an all-NaN row gives 0. */
int ref_argmax(const RefOp *op) {
  const RefTensor *x = op->in[0];
  RefTensor *o = op->out;
  const GAttr *at = &op->node->attr;
  if (at->naxes != 1 || at->axes[0] < 0 || at->axes[0] >= x->rank) return ref_fail(op, "argmax: needs one valid axis");
  int a = at->axes[0];
  int64_t outer = 1, inner = 1, n = x->dims[a];
  for (int i = 0; i < a; i++) outer *= x->dims[i];
  for (int i = a + 1; i < x->rank; i++) inner *= x->dims[i];
  if (n == 0 && outer * inner > 0)
    return ref_fail(op, "argmax: axis %d is empty (argmax of no elements is undefined)", a);
  if (o->numel != outer * inner)
    return ref_fail(op, "argmax: result has %lld elements, expected %lld", (long long)o->numel,
                    (long long)(outer * inner));
  for (int64_t i = 0; i < outer; i++)
    for (int64_t j = 0; j < inner; j++) {
      int64_t best = -1;
      for (int64_t k = 0; k < n; k++) {
        double v = x->data[(i * n + k) * inner + j];
        if (!isnan(v) && (best < 0 || v > x->data[(i * n + best) * inner + j])) best = k;
      }
      o->data[i * inner + j] = best < 0 ? 0 : (double)best;
    }
  return 1;
}

static int same_as_input(const RefOp *op) {
  const RefTensor *x = op->in[0];
  int ok = x->rank == op->out->rank;
  for (int i = 0; ok && i < x->rank; i++) ok = x->dims[i] == op->out->dims[i];
  if (!ok) {
    char a[160], b[160];
    ref_fail(op, "%s: input %s but result %s", ref_op_name(op->node->op), ref_dims_str(a, sizeof a, x->rank, x->dims),
             ref_dims_str(b, sizeof b, op->out->rank, op->out->dims));
  }
  return ok;
}

int ref_softmax(const RefOp *op) {
  const RefTensor *x = op->in[0];
  int axis = op->node->attr.axis;
  if (!same_as_input(op)) return 0;
  if (x->rank == 0) { /* softmax of a scalar is 1 */
    op->out->data[0] = isnan(x->data[0]) ? NAN : 1.0;
    return 1;
  }
  if (axis < 0 || axis >= x->rank) return ref_fail(op, "softmax: axis %d out of range for rank %d", axis, x->rank);
  int64_t outer = 1, len = x->dims[axis], inner = 1;
  for (int i = 0; i < axis; i++) outer *= x->dims[i];
  for (int i = axis + 1; i < x->rank; i++) inner *= x->dims[i];
  for (int64_t a = 0; a < outer; a++)
    for (int64_t c = 0; c < inner; c++) {
      const double *xs = x->data + a * len * inner + c;
      double *ys = op->out->data + a * len * inner + c;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < len; j++) mx = isnan(xs[j * inner]) || xs[j * inner] > mx ? xs[j * inner] : mx;
      for (int64_t j = 0; j < len; j++) sum += ys[j * inner] = exp(xs[j * inner] - mx);
      for (int64_t j = 0; j < len; j++) ys[j * inner] /= sum;
    }
  return 1;
}

/* Checks that a norm's weight/bias has exactly `d` elements (one per position of the last axis). */
static int check_param(const RefOp *op, const RefTensor *p, const char *what, int64_t d) {
  if (p->numel == d) return 1;
  char a[160];
  return ref_fail(op, "%s: %s has shape %s, expected [%lld]", ref_op_name(op->node->op), what,
                  ref_dims_str(a, sizeof a, p->rank, p->dims), (long long)d);
}

/* Shared by rms_norm and layer_norm: rows of the last axis, w (and b) indexed by position in the row. */
static int norm(const RefOp *op, int centered) {
  const RefTensor *x = op->in[0], *w = op->in[1], *b = op->node->nin > 2 ? op->in[2] : NULL;
  if (!same_as_input(op)) return 0;
  if (x->rank == 0) return ref_fail(op, "%s: input must have at least one axis", ref_op_name(op->node->op));
  int64_t d = x->dims[x->rank - 1];
  if (!check_param(op, w, "weight", d) || (b && !check_param(op, b, "bias", d))) return 0;
  if (d == 0) return 1;
  double eps = op->node->attr.eps;
  for (int64_t r = 0; r < x->numel / d; r++) {
    const double *xs = x->data + r * d;
    double *ys = op->out->data + r * d;
    double mean = 0, sq = 0;
    if (centered) {
      for (int64_t i = 0; i < d; i++) mean += xs[i];
      mean /= (double)d;
    }
    for (int64_t i = 0; i < d; i++) sq += (xs[i] - mean) * (xs[i] - mean);
    double inv = 1.0 / sqrt(sq / (double)d + eps); /* biased variance / mean square */
    for (int64_t i = 0; i < d; i++) ys[i] = (xs[i] - mean) * inv * w->data[i] + (b ? b->data[i] : 0.0);
  }
  return 1;
}

int ref_rms_norm(const RefOp *op) { return norm(op, 0); }
int ref_layer_norm(const RefOp *op) { return norm(op, 1); }
