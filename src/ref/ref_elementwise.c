/* Reference: elementwise unary and binary ops (NumPy broadcasting) and cast. */
#include <math.h>
#include "ref_internal.h"

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static double unary(GOp op, double x) {
  switch (op) {
  case G_NEG: return -x;
  case G_EXP: return exp(x);
  case G_LOG: return log(x);
  case G_SQRT: return sqrt(x);
  case G_RSQRT: return 1.0 / sqrt(x);
  case G_TANH: return tanh(x);
  case G_SIGMOID: return sigmoid(x);
  case G_SILU: return x * sigmoid(x);
  case G_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
  case G_RELU: return x < 0 ? 0.0 : x; /* NaN stays NaN, as in torch */
  case G_ABS: return fabs(x);
  default: return NAN;
  }
}

static int same_dims(const RefTensor *a, const RefTensor *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

static int shape_mismatch(const RefOp *op, const RefTensor *x) {
  char a[160], b[160];
  return ref_fail(op, "%s: operand %s does not match result %s", ref_op_name(op->node->op),
                  ref_dims_str(a, sizeof a, x->rank, x->dims), ref_dims_str(b, sizeof b, op->out->rank, op->out->dims));
}

int ref_unary(const RefOp *op) {
  const RefTensor *x = op->in[0];
  GOp o = op->node->op;
  if (!same_dims(x, op->out)) return shape_mismatch(op, x);
  for (int64_t i = 0; i < x->numel; i++) op->out->data[i] = unary(o, x->data[i]);
  if (op->out->ival && (o == G_NEG || o == G_ABS || o == G_RELU)) { /* integers exactly (two's complement) */
    for (int64_t i = 0; i < x->numel; i++) {
      int64_t v = ref_ival(x, i);
      int neg = o == G_NEG || (o == G_ABS && v < 0);
      op->out->ival[i] = o == G_RELU && v < 0 ? 0 : neg ? (int64_t)(0 - (uint64_t)v) : v;
    }
    *op->exact = 1;
  }
  return 1;
}

int ref_cast(const RefOp *op) {
  const RefTensor *x = op->in[0];
  if (!same_dims(x, op->out)) return shape_mismatch(op, x);
  /* Float -> integer saturates (NaN -> 0, out of range -> the nearest end of the range, else truncation
   * toward zero): the rule of every backend, ex_float_to_int. Other conversions (integer wrap-around,
   * f16 rounding) are the driver's final rounding. */
  DType to = op->node->dtype, from = op->g->nodes[op->node->in[0]].dtype;
  int saturate = dtype_is_float(from) && (to == DT_I32 || to == DT_I64);
  for (int64_t i = 0; i < x->numel; i++)
    op->out->data[i] = saturate ? (double)ex_float_to_int(to, x->data[i]) : x->data[i];
  if (op->out->ival) { /* integer results exactly (the driver wraps them to i32) */
    for (int64_t i = 0; i < x->numel; i++)
      op->out->ival[i] = saturate ? ex_float_to_int(to, x->data[i]) : ref_ival(x, i);
    *op->exact = 1;
  }
  return 1;
}

/* Strides of t seen through the result's index space: right-aligned, 0 on broadcast (size-1 or missing) dims. */
static int broadcast_strides(const RefTensor *t, const RefTensor *out, int64_t *st) {
  int64_t ts[LT_MAX_RANK];
  if (t->rank > out->rank) return 0;
  ref_strides(t->rank, t->dims, ts);
  for (int i = 0; i < out->rank; i++) {
    int k = i - (out->rank - t->rank);
    if (k < 0) st[i] = 0;
    else if (t->dims[k] == out->dims[i]) st[i] = ts[k];
    else if (t->dims[k] == 1) st[i] = 0;
    else return 0;
  }
  return 1;
}

/* Two's-complement wrap-around, as integer tensors in torch (done in unsigned to stay defined). */
static int64_t int_arith(GOp op, int64_t a, int64_t b) {
  uint64_t x = (uint64_t)a, y = (uint64_t)b;
  switch (op) {
  case G_ADD: return (int64_t)(x + y);
  case G_SUB: return (int64_t)(x - y);
  case G_MUL: return (int64_t)(x * y);
  case G_MAXIMUM: return a > b ? a : b;
  default: return a < b ? a : b; /* G_MINIMUM */
  }
}

static double binary(GOp op, int ints, double a, double b) {
  switch (op) {
  case G_ADD: return ints ? (double)int_arith(op, ref_to_i64(a), ref_to_i64(b)) : a + b;
  case G_SUB: return ints ? (double)int_arith(op, ref_to_i64(a), ref_to_i64(b)) : a - b;
  case G_MUL: return ints ? (double)int_arith(op, ref_to_i64(a), ref_to_i64(b)) : a * b;
  case G_DIV: return a / b;
  case G_POW: return pow(a, b);
  case G_MAXIMUM: return isnan(a) || isnan(b) ? NAN : a > b ? a : b; /* torch.maximum propagates NaN */
  case G_MINIMUM: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
  default: return NAN;
  }
}

int ref_binary(const RefOp *op) {
  const RefTensor *a = op->in[0], *b = op->in[1];
  RefTensor *o = op->out;
  int64_t sa[LT_MAX_RANK], sb[LT_MAX_RANK], idx[LT_MAX_RANK] = {0};
  if (!broadcast_strides(a, o, sa) || !broadcast_strides(b, o, sb)) {
    char x[160], y[160], z[160];
    return ref_fail(op, "%s: shapes %s and %s do not broadcast to %s", ref_op_name(op->node->op),
                    ref_dims_str(x, sizeof x, a->rank, a->dims), ref_dims_str(y, sizeof y, b->rank, b->dims),
                    ref_dims_str(z, sizeof z, o->rank, o->dims));
  }
  int ints = !dtype_is_float(op->node->dtype) && op->node->dtype != DT_BOOL;
  GOp g = op->node->op;
  int exact = ints && o->ival && (g == G_ADD || g == G_SUB || g == G_MUL || g == G_MAXIMUM || g == G_MINIMUM);
  for (int64_t i = 0; i < o->numel; i++) {
    int64_t ia = 0, ib = 0;
    for (int k = 0; k < o->rank; k++) {
      ia += idx[k] * sa[k];
      ib += idx[k] * sb[k];
    }
    if (exact) o->ival[i] = int_arith(g, ref_ival(a, ia), ref_ival(b, ib));
    else o->data[i] = binary(g, ints, a->data[ia], b->data[ib]);
    ref_next_index(o->rank, o->dims, idx);
  }
  if (exact) *op->exact = 1;
  return 1;
}
