/* Reference interpreter driver: evaluates every node in order, in float64, keeping every value. */
#include "ref.h"
#include "../base/mem.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ref_internal.h"
#include "../base/checked.h"

void ref_tensor_free(RefTensor *t) {
  if (!t) return;
  free(t->data);
  free(t->ival);
  t->data = NULL;
  t->ival = NULL;
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

int ref_input(const RefOp *op) {
  const Graph *g = op->g;
  const RefTensor *inputs = op->inputs;
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

int ref_const(const RefOp *op) {
  /* A literal enters every kernel as a compute-type constant (f32 / i64), never as a stored f16. */
  const GNode *n = op->node;
  double v = dtype_is_float(n->dtype) ? n->attr.value : (double)n->attr.ivalue;
  for (int64_t i = 0; i < op->out->numel; i++) op->out->data[i] = ref_round(dtype_compute(n->dtype), v);
  if (op->out->ival) {
    for (int64_t i = 0; i < op->out->numel; i++) op->out->ival[i] = n->attr.ivalue;
    *op->exact = 1;
  }
  return 1;
}

/* The reference of each op, from the op table. */
typedef int (*RefFn)(const RefOp *op);
static const RefFn ref_fns[G_OP_COUNT] = {
#define OP(E, NAME, LO, HI, INFER, REF, ...) [G_##E] = REF,
#include "../graph/ops.def"
#undef OP
};

static int eval_node(const Graph *g, int i, const SymEnv *env, const RefTensor *inputs, RefTensor *vals, Diag *d) {
  const GNode *n = &g->nodes[i];
  RefTensor *out = &vals[i];
  int exact = 0;
  RefOp op = {n, {NULL}, out, env, d, &exact, g, inputs};
  const GOpInfo *info = gop_info(n->op);
  if (!info || !ref_fns[n->op]) return ref_fail(&op, "reference interpreter: unknown op %d", (int)n->op);
  if (n->nin < info->min_in || n->nin > info->max_in)
    return ref_fail(&op, "%s: expects %d operands, node has %d", ref_op_name(n->op), info->min_in, n->nin);
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
  }
  if (!ck_numel(out->rank, out->dims, &out->numel))
    return ref_fail(&op, "%s: more than 2^56 elements at these sizes", ref_op_name(n->op));
  out->data = calloc((size_t)(out->numel ? out->numel : 1), sizeof(double));
  if (!out->data) {
    char what[64], msg[256];
    snprintf(what, sizeof what, "the reference value of %s", ref_op_name(n->op));
    size_t numel = (size_t)out->numel;
    mem_oom_message(msg, sizeof msg, numel > SIZE_MAX / sizeof(double) ? SIZE_MAX : numel * sizeof(double), what);
    return ref_fail(&op, "%s", msg);
  }
  int is_int = n->dtype == DT_I32 || n->dtype == DT_I64;
  if (is_int && !(out->ival = calloc((size_t)(out->numel ? out->numel : 1), sizeof(int64_t))))
    return ref_fail(&op, "%s: out of memory for %lld elements", ref_op_name(n->op), (long long)out->numel);
  if (!ref_fns[n->op](&op)) return 0;
  if (is_int) { /* integers: exact, wrapped to the dtype; data follows */
    for (int64_t k = 0; k < out->numel; k++) {
      int64_t v = exact ? out->ival[k] : ref_to_i64(out->data[k]);
      if (n->dtype == DT_I32) v = (int32_t)(uint32_t)(uint64_t)v;
      out->ival[k] = v;
      out->data[k] = (double)v;
    }
  } else if (n->op != G_CONST) {
    for (int64_t k = 0; k < out->numel; k++) out->data[k] = ref_round(n->dtype, out->data[k]);
  }
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
    if (vals[id].ival) {
      o->ival = malloc((size_t)(o->numel ? o->numel : 1) * sizeof(int64_t));
      if (o->ival && o->numel) memcpy(o->ival, vals[id].ival, (size_t)o->numel * sizeof(int64_t));
    }
  }
  if (!ok)
    for (int j = 0; j < g->noutputs; j++) ref_tensor_free(&outputs[j]);
  for (int i = 0; i < g->n; i++) ref_tensor_free(&vals[i]);
  free(vals);
  return ok;
}
