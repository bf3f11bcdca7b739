/* graph -> tensor: walks the graph in id order (already topological) and expands every op into
 * map / reduce / contract / gather / view primitives. Op families live in lower_*.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "lower_internal.h"
#include "../base/checked.h"
#include "../base/mem.h"

int lw_fail(Lower *L, const GNode *n, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  diag_error(L->d, n ? n->line : 0, n ? n->col : 0, "%s: %s", n ? gop_name(n->op) : "tensor", msg);
  return -1;
}

const Shape *lw_shape(Lower *L, int t) { return &L->p->nodes[t].shape; }
DType lw_dtype(Lower *L, int t) { return L->p->nodes[t].dtype; }
Expr *lw_arg(Lower *L, int i, int t) { return ex_arg(L->x, i, lw_dtype(L, t)); }
Expr *lw_fdim(Lower *L, Expr *dim) { return ex_cast(L->x, DT_F32, dim); }
Expr *lw_f32(Lower *L, double v) { return ex_const(L->x, DT_F32, v); }
Expr *lw_var(Lower *L, int k) { return ex_var(L->x, k); }

Expr *lw_numel_axes(Lower *L, const Shape *s, unsigned axes) {
  Expr *n = ex_int(L->x, 1);
  for (int k = 0; k < s->rank; k++)
    if (axes & (1u << k)) n = ex_mul(L->x, n, s->dim[k]);
  return n;
}

int lw_node(Lower *L, int gid) {
  if (L->tid[gid] >= 0) return L->tid[gid];
  const GNode *n = &L->g->nodes[gid];
  Shape scalar = {0};
  /* Only reached when a constant is used where a tensor is needed (e.g. as an output). */
  DType t = n->op == G_CONST ? n->dtype : DT_F32;
  Expr *v =
      n->op == G_CONST && !dtype_is_float(t) ? ex_const_int(L->x, t, n->attr.ivalue) : ex_const(L->x, t, n->attr.value);
  int id = t_map(L->p, v, t, &scalar, NULL, 0);
  L->p->nodes[id].origin = "const";
  L->tid[gid] = id;
  return id;
}

int lw_bcast(Lower *L, int t, const Shape *out) {
  Shape s = *lw_shape(L, t);
  Expr *idx[LT_MAX_RANK];
  for (int d = 0; d < s.rank; d++) {
    int k = out->rank - s.rank + d;
    int bc = ex_is_int_const(s.dim[d], 1) && !ex_is_int_const(out->dim[k], 1);
    idx[d] = bc ? ex_int(L->x, 0) : lw_var(L, k);
  }
  return t_view(L->p, t, out, idx, NULL);
}

int lw_map(Lower *L, Expr *fn, DType dt, const Shape *s, const int *src, int n) {
  int b[T_MAX_SRC];
  for (int i = 0; i < n; i++) b[i] = lw_bcast(L, src[i], s);
  return t_map(L->p, ex_cast(L->x, dt, fn), dt, s, b, n);
}

int lw_cast(Lower *L, int t, DType dt) {
  if (lw_dtype(L, t) == dt) return t;
  Shape s = *lw_shape(L, t);
  return t_map(L->p, ex_cast(L->x, dt, lw_arg(L, 0, t)), dt, &s, &t, 1);
}

int lw_drop(Lower *L, int t, unsigned axes, const Shape *out) {
  int rank = lw_shape(L, t)->rank;
  Expr *idx[LT_MAX_RANK];
  for (int d = 0, k = 0; d < rank; d++) idx[d] = axes & (1u << d) ? ex_int(L->x, 0) : lw_var(L, k++);
  return t_view(L->p, t, out, idx, NULL);
}

int lw_softmax(Lower *L, int x, unsigned axes, DType dt) {
  Shape s = *lw_shape(L, x);
  int m = t_reduce(L->p, RED_MAX, x, axes);
  int xm[2] = {x, m};
  Expr *e = ex_un(L->x, X_EXP, ex_bin(L->x, X_SUB, lw_arg(L, 0, x), lw_arg(L, 1, m)));
  int ex = lw_map(L, e, DT_F32, &s, xm, 2);
  int sum = t_reduce(L->p, RED_ADD, ex, axes);
  int es[2] = {ex, sum};
  return lw_map(L, ex_bin(L->x, X_DIV, lw_arg(L, 0, ex), lw_arg(L, 1, sum)), dt, &s, es, 2);
}

int lower_input(Lower *L, const GNode *n) { return t_input(L->p, n->name, n->dtype, &n->shape); }
int lower_const(Lower *L, const GNode *n) { return -2; } /* folded into consumers; materialised only on demand */
int lower_embedding(Lower *L, const GNode *n) { return t_gather(L->p, lw_node(L, n->in[1]), lw_node(L, n->in[0])); }

/* The lowering of each op, from the op table. */
typedef int (*LowerFn)(Lower *L, const GNode *n);
static const LowerFn lower_fns[G_OP_COUNT] = {
#define OP(E, NAME, LO, HI, INFER, REF, LOWER, ...) [G_##E] = LOWER,
#include "../graph/ops.def"
#undef OP
};

static int lower_op(Lower *L, const GNode *n) {
  if ((unsigned)n->op >= G_OP_COUNT || !lower_fns[n->op])
    return lw_fail(L, n, "op %d is not supported by the tensor stage", (int)n->op);
  return lower_fns[n->op](L, n);
}

/* The constant factors of s's element count fit LT_MAX_NUMEL (symbols are checked at run time). */
static int const_numel_fits(const Shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++)
    if (s->dim[i]->op == X_CONST && (!ck_mul(n, s->dim[i]->ival, &n) || n > LT_MAX_NUMEL)) return 0;
  return 1;
}

TProgram *tensor_from_graph(const Graph *g, Diag *d) {
  TProgram *p = tprog_new(g->arena, g->pool);
  Lower L = {g, p, g->pool, d, NULL};
  if (g->ninputs > LT_MAX_INPUTS || g->noutputs > LT_MAX_OUTPUTS) {
    diag_error(d, 0, 0, "tensor: at most %d inputs and %d outputs are supported", LT_MAX_INPUTS, LT_MAX_OUTPUTS);
    return NULL;
  }
  L.tid = xmalloc(sizeof(int) * (size_t)(g->n ? g->n : 1), "the tensor lowering");
  for (int i = 0; i < g->n; i++) L.tid[i] = -1;
  for (int i = 0; i < g->nsymbols && i < 16; i++) p->symbols[p->nsymbols++] = g->symbols[i];

  for (int i = 0; i < g->n; i++) {
    const GNode *n = &g->nodes[i];
    int first = p->n;
    int r = lower_op(&L, n);
    if (r == -2) continue;
    if (r < 0) {
      if (!d->set) lw_fail(&L, n, "lowering failed");
      free(L.tid);
      return NULL;
    }
    /* Every op ends in the graph node's dtype (intermediates compute in f32 / i64). */
    if (n->op != G_INPUT) r = lw_cast(&L, r, n->dtype);
    const char *origin = n->op == G_INPUT ? NULL : gop_name(n->op);
    for (int t = first; t < p->n; t++)
      if (!const_numel_fits(&p->nodes[t].shape)) {
        StrBuf b = {0};
        shape_print(&b, &p->nodes[t].shape);
        lw_fail(&L, n, "an intermediate %s of this op has more than 2^56 elements", sb_str(&b));
        sb_free(&b);
        free(L.tid);
        return NULL;
      }
    for (int t = first; t < p->n; t++) {
      p->nodes[t].origin = origin;
      p->nodes[t].line = n->line;
      p->nodes[t].col = n->col;
    }
    /* Name only a node this op created: an op that reuses its source (identity view) must not
     * rename that source. */
    if (r >= first && n->name) p->nodes[r].name = n->name;
    L.tid[i] = r;
  }

  p->ninputs = 0; /* graph order, which need not be id order */
  for (int j = 0; j < g->ninputs; j++) p->inputs[p->ninputs++] = L.tid[g->inputs[j]];
  for (int j = 0; j < g->noutputs; j++) {
    const GNode *n = &g->nodes[g->outputs[j]];
    p->outputs[j] = lw_node(&L, n->id);
    p->output_names[j] = n->name ? n->name : arena_printf(p->arena, "out%d", j);
  }
  p->noutputs = g->noutputs;
  free(L.tid);
  return p;
}
