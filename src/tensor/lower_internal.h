/* Private to the graph -> tensor lowering (lower*.c): the shared context and small helpers. */
#ifndef LATHE_TENSOR_LOWER_INTERNAL_H
#define LATHE_TENSOR_LOWER_INTERNAL_H
#include "tensor.h"

typedef struct Lower {
  const Graph *g;
  TProgram *p;
  ExprPool *x;
  Diag *d;
  int *tid; /* graph node id -> tensor node id (-1: not lowered yet) */
} Lower;

/* Tensor node of graph node `gid`; a G_CONST used as a tensor becomes a 0-source map. */
int lw_node(Lower *L, int gid);
const Shape *lw_shape(Lower *L, int t);
DType lw_dtype(Lower *L, int t);
/* X_ARG(i) typed like tensor node t. */
Expr *lw_arg(Lower *L, int i, int t);
/* Explicit right-aligned broadcast of node t to `out` (identity when shapes already match). */
int lw_bcast(Lower *L, int t, const Shape *out);
/* map(fn) over srcs, each broadcast to `s` first. */
int lw_map(Lower *L, Expr *fn, DType dt, const Shape *s, const int *src, int n);
/* map(cast(dt, a0)) unless t already has dtype dt. */
int lw_cast(Lower *L, int t, DType dt);
/* View of t (keepdim result) dropping the size-1 axes in `axes`, giving shape `out`. */
int lw_drop(Lower *L, int t, unsigned axes, const Shape *out);
/* f32 value of an integer size expression (folds for constants). */
Expr *lw_fdim(Lower *L, Expr *dim);
Expr *lw_f32(Lower *L, double v);
Expr *lw_var(Lower *L, int k);
/* Product of the dims of s in `axes`. */
Expr *lw_numel_axes(Lower *L, const Shape *s, unsigned axes);
/* Softmax over `axes` of t, max-subtracted; computed in f32, the last map casts to dt. */
int lw_softmax(Lower *L, int t, unsigned axes, DType dt);
int lw_fail(Lower *L, const GNode *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* One function per op (the LOWER column of ops.def), shared by op families; each returns the tensor node holding the
 * op's result, or -1 with the diag set. */
int lower_input(Lower *L, const GNode *n);
int lower_const(Lower *L, const GNode *n); /* -2: a literal is folded into its consumers */
int lower_embedding(Lower *L, const GNode *n);
int lower_elementwise(Lower *L, const GNode *n); /* unary, binary, cast */
int lower_reduce(Lower *L, const GNode *n);
int lower_argmax(Lower *L, const GNode *n);
int lower_norm(Lower *L, const GNode *n); /* softmax, rms_norm, layer_norm */
int lower_rope(Lower *L, const GNode *n);
int lower_attention(Lower *L, const GNode *n);
int lower_matmul(Lower *L, const GNode *n);
int lower_linear(Lower *L, const GNode *n);
int lower_shape_op(Lower *L, const GNode *n); /* reshape, permute, slice, concat */
int lower_cache_write(Lower *L, const GNode *n);
int lower_cache_scatter(Lower *L, const GNode *n);
int lower_paged_gather(Lower *L, const GNode *n);
#endif
