/* Reference interpreter driver: evaluates every node in order, in float64, keeping every value. */
#include "ref.h"
#include "../base/mem.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ref_internal.h"

void ref_tensor_free(RefTensor *t) {
  if (!t) return;
  free(t->data);
  t->data = NULL;
  t->numel = 0;
}

/* Op names for messages: the graph's own spelling (the oracle's independence is in how it computes,
 * not in how it names ops). */
const char *ref_op_name(GOp op) { return gop_name(op); }

int ref_fail(const RefOp *op, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_error(op->d, op->node->line, op->node->col, "%s", msg);
  return 0;
}

const char *ref_dims_str(char *buf, size_t n, int rank, const int64_t *dims) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

void ref_strides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= dims[i];
  }
}

int ref_next_index(int rank, const int64_t *dims, int64_t *idx) {
  for (int i = rank - 1; i >= 0; i--) {
    if (++idx[i] < dims[i]) return 1;
    idx[i] = 0;
  }
  return 0;
}

typedef struct UnboundSearch {
  const SymEnv *env;
  const char *name;
} UnboundSearch;

static void find_unbound(void *ctx, const Expr *e) {
  UnboundSearch *s = ctx;
  int64_t v;
  if (!s->name && e->op == X_SYM && !symenv_get(s->env, e->name, &v)) s->name = e->name;
}

int ref_eval_dim(const RefOp *op, const Expr *e, int64_t *out) {
  if (e && ex_eval_int(e, op->env, out)) return 1;
  if (!e) return ref_fail(op, "%s: missing size expression", ref_op_name(op->node->op));
  UnboundSearch s = {op->env, NULL};
  ex_visit(e, find_unbound, &s);
  if (s.name) return ref_fail(op, "symbolic dimension '%s' has no value", s.name);
  return ref_fail(op, "%s: size expression cannot be evaluated (division by zero?)", ref_op_name(op->node->op));
}

int64_t ref_to_i64(double v) {
  if (isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v; /* C conversion truncates toward zero */
}

double ref_round(DType t, double v) {
  switch (t) {
  case DT_I32: return (double)(int32_t)(uint32_t)(uint64_t)ref_to_i64(v); /* wraps like torch int32 */
  case DT_I64: return (double)ref_to_i64(v);
  case DT_BOOL: return v != 0;
  default: return dtype_round(t, v);
  }
}

static int eval_input(const RefOp *op, const Graph *g, const RefTensor *inputs) {
  int k = 0;
  while (k < g->ninputs && g->inputs[k] != op->node->id) k++;
  const char *name = op->node->name ? op->node->name : "?";
  if (k == g->ninputs) return ref_fail(op, "input '%s' is not listed among the graph inputs", name);
  const RefTensor *t = &inputs[k];
  const RefTensor *o = op->out;
  int same = t->rank == o->rank;
  for (int i = 0; same && i < o->rank; i++) same = t->dims[i] == o->dims[i];
  if (!same) {
    char a[160], b[160];
    return ref_fail(op, "input '%s': given dims %s but the graph expects %s", name,
                    ref_dims_str(a, sizeof a, t->rank, t->dims), ref_dims_str(b, sizeof b, o->rank, o->dims));
  }
  if (o->numel && !t->data) return ref_fail(op, "input '%s': no data", name);
  if (o->numel) memcpy(o->data, t->data, (size_t)o->numel * sizeof(double));
  return 1;
}

static int dispatch(const RefOp *op, const Graph *g, const RefTensor *inputs) {
  const GNode *n = op->node;
  switch (n->op) {
  case G_INPUT: return eval_input(op, g, inputs);
  case G_CONST:
    /* A literal enters every kernel as a compute-type constant (f32 / i64), never as a stored f16. */
    for (int64_t i = 0; i < op->out->numel; i++) op->out->data[i] = ref_round(dtype_compute(n->dtype), n->attr.value);
    return 1;
  case G_NEG: case G_EXP: case G_LOG: case G_SQRT: case G_RSQRT: case G_TANH: case G_SIGMOID:
  case G_SILU: case G_GELU: case G_RELU: case G_ABS:
    return ref_unary(op);
  case G_ADD: case G_SUB: case G_MUL: case G_DIV: case G_POW: case G_MAXIMUM: case G_MINIMUM:
    return ref_binary(op);
  case G_SUM: case G_MEAN: case G_MAX: case G_MIN: return ref_reduce(op);
  case G_ARGMAX: return ref_argmax(op);
  case G_SOFTMAX: return ref_softmax(op);
  case G_RMS_NORM: return ref_rms_norm(op);
  case G_LAYER_NORM: return ref_layer_norm(op);
  case G_MATMUL: return ref_matmul(op);
  case G_LINEAR: return ref_linear(op);
  case G_EMBEDDING: return ref_embedding(op);
  case G_ROPE: return ref_rope(op);
  case G_ATTENTION: return ref_attention(op);
  case G_RESHAPE: return ref_reshape(op);
  case G_PERMUTE: return ref_permute(op);
  case G_SLICE: return ref_slice(op);
  case G_CONCAT: return ref_concat(op);
  case G_CAST: return ref_cast(op);
  case G_CACHE_WRITE: return ref_cache_write(op);
  default: return ref_fail(op, "reference interpreter: unknown op %d", (int)n->op);
  }
}

/* Arity each op needs, so a malformed node fails cleanly instead of reading a missing operand. */
static int min_inputs(GOp op) {
  switch (op) {
  case G_INPUT: case G_CONST: return 0;
  case G_ADD: case G_SUB: case G_MUL: case G_DIV: case G_POW: case G_MAXIMUM: case G_MINIMUM:
  case G_RMS_NORM: case G_LAYER_NORM: case G_MATMUL: case G_LINEAR: case G_EMBEDDING: case G_ROPE:
  case G_CONCAT: case G_CACHE_WRITE:
    return 2;
  case G_ATTENTION: return 3;
  default: return 1;
  }
}

static int eval_node(const Graph *g, int i, const SymEnv *env, const RefTensor *inputs, RefTensor *vals, Diag *d) {
  const GNode *n = &g->nodes[i];
  RefTensor *out = &vals[i];
  RefOp op = {n, {NULL, NULL, NULL}, out, env, d};
  if (n->nin < min_inputs(n->op) || n->nin > 3)
    return ref_fail(&op, "%s: expects %d operands, node has %d", ref_op_name(n->op), min_inputs(n->op), n->nin);
  for (int k = 0; k < n->nin; k++) {
    if (n->in[k] < 0 || n->in[k] >= i)
      return ref_fail(&op, "%s: operand %d refers to node %d, which is not evaluated before node %d",
                      ref_op_name(n->op), k, n->in[k], i);
    op.in[k] = &vals[n->in[k]];
  }
  if (n->shape.rank < 0 || n->shape.rank > LT_MAX_RANK)
    return ref_fail(&op, "%s: invalid rank %d", ref_op_name(n->op), n->shape.rank);
  out->rank = n->shape.rank;
  out->numel = 1;
  for (int k = 0; k < out->rank; k++) {
    if (!ref_eval_dim(&op, n->shape.dim[k], &out->dims[k])) return 0;
    if (out->dims[k] < 0)
      return ref_fail(&op, "%s: dimension %d evaluates to %lld", ref_op_name(n->op), k, (long long)out->dims[k]);
    out->numel *= out->dims[k];
  }
  out->data = calloc((size_t)(out->numel ? out->numel : 1), sizeof(double));
  if (!out->data) {
    char what[64], msg[256];
    snprintf(what, sizeof what, "the reference value of %s", ref_op_name(n->op));
    size_t numel = (size_t)out->numel;
    mem_oom_message(msg, sizeof msg, numel > SIZE_MAX / sizeof(double) ? SIZE_MAX : numel * sizeof(double), what);
    return ref_fail(&op, "%s", msg);
  }
  if (!dispatch(&op, g, inputs)) return 0;
  if (n->op != G_CONST)
    for (int64_t k = 0; k < out->numel; k++) out->data[k] = ref_round(n->dtype, out->data[k]);
  return 1;
}

int ref_eval(const Graph *g, const SymEnv *env, const RefTensor *inputs, RefTensor *outputs, Diag *d) {
  for (int j = 0; j < g->noutputs; j++) memset(&outputs[j], 0, sizeof outputs[j]);
  RefTensor *vals = mem_calloc(d, (size_t)(g->n > 0 ? g->n : 1), sizeof *vals, "the reference interpreter");
  if (!vals) return 0;
  int ok = 1;
  for (int i = 0; i < g->n && ok; i++) ok = eval_node(g, i, env, inputs, vals, d);
  for (int j = 0; ok && j < g->noutputs; j++) {
    int id = g->outputs[j];
    if (id < 0 || id >= g->n) {
      diag_error(d, 0, 0, "output %d refers to node %d, which does not exist", j, id);
      ok = 0;
      break;
    }
    RefTensor *o = &outputs[j];
    *o = vals[id];
    if (!(o->data = mem_calloc(d, (size_t)o->numel, sizeof(double), "a reference output"))) {
      ok = 0;
      break;
    }
    if (o->numel) memcpy(o->data, vals[id].data, (size_t)o->numel * sizeof(double));
  }
  if (!ok)
    for (int j = 0; j < g->noutputs; j++) ref_tensor_free(&outputs[j]);
  for (int i = 0; i < g->n; i++) ref_tensor_free(&vals[i]);
  free(vals);
  return ok;
}
