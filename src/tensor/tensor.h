/* Tensor stage: a DAG of a handful of primitives. Every graph op lowers to these.
 *
 *   input                      a program input
 *   map(fn, s0, s1, ...)       elementwise: fn is a scalar Expr over X_ARG(i) = s_i at the same index
 *                              and X_VAR(k) = the index along output axis k; all s_i have the output shape
 *                              (broadcasts are explicit views). A cast is a map whose fn is X_CAST.
 *   reduce(op, s, axes)        op in add/max/min over `axes`; keepdim (reduced dims become 1)
 *   contract(a, b, axes)       sum over `axes` of a*b; a, b have the same (broadcast) shape; keepdim
 *   gather(table, ids)         out[i..., j...] = table[ids[i...], j...]
 *   update(dst, x)             dst (a program input holding state) with x written at dst[idx(i)] for every
 *                              index i of x (idx over X_VAR(k) = x's axis k); done in place in dst's buffer
 *   update(dst, x, ids)        the same, with X_ARG(0) in idx and `valid` = ids at x's leading axes (a
 *                              scatter: the paged KV cache's write); where `valid` is false nothing is written
 *   view(s)                    no data movement: for each source axis d, idx[d] is the source index as
 *                              an Expr over X_VAR(k) = output axis k; where `valid` (if set) is false the
 *                              value is 0 (padding, used by concat)
 */
#ifndef LATHE_TENSOR_H
#define LATHE_TENSOR_H
#include "../base/diag.h"
#include "../graph/graph.h"
#include "../ir/expr.h"

typedef enum TKind { T_INPUT, T_MAP, T_REDUCE, T_CONTRACT, T_GATHER, T_VIEW, T_UPDATE } TKind;
typedef enum ReduceOp { RED_ADD, RED_MAX, RED_MIN } ReduceOp;

#define T_MAX_SRC 8

typedef struct TNode {
  int id;
  TKind kind;
  DType dtype;
  Shape shape;
  int nsrc;
  int src[T_MAX_SRC];
  Expr *fn;               /* T_MAP */
  ReduceOp rop;           /* T_REDUCE (T_CONTRACT is always add) */
  unsigned axes;          /* T_REDUCE / T_CONTRACT: bit k set = axis k reduced */
  Expr *idx[LT_MAX_RANK]; /* T_VIEW: one per source axis; T_UPDATE: one per dst axis, over x's axes */
  Expr *valid;            /* T_VIEW, T_UPDATE: NULL = always valid */
  const char *name;       /* user-visible name from the graph (input name, assigned name) or NULL */
  const char *origin;     /* graph op this came from, e.g. "rms_norm", for printing and kernel names */
  int line, col;          /* source position of that graph op (0: none) */
} TNode;

typedef struct TProgram {
  Arena *arena;
  ExprPool *pool;
  TNode *nodes; /* topologically ordered: sources have smaller ids */
  int n, cap;
  int inputs[LT_MAX_INPUTS], ninputs;    /* node ids of T_INPUT, in graph order */
  int outputs[LT_MAX_OUTPUTS], noutputs; /* node ids of program outputs, in graph order */
  const char *output_names[LT_MAX_OUTPUTS];
  const char *symbols[16];
  int nsymbols;
} TProgram;

/* graph -> tensor. Fails only on ops this stage does not support (diag set). */
TProgram *tensor_from_graph(const Graph *g, Diag *d);

/* Builders used by the lowering (and by tests that construct tensor programs directly). */
TProgram *tprog_new(Arena *arena, ExprPool *pool);
int t_input(TProgram *p, const char *name, DType t, const Shape *s);
int t_map(TProgram *p, Expr *fn, DType out, const Shape *s, const int *src, int nsrc);
int t_reduce(TProgram *p, ReduceOp op, int src, unsigned axes);
int t_contract(TProgram *p, int a, int b, unsigned axes);
int t_gather(TProgram *p, int table, int ids);
int t_view(TProgram *p, int src, const Shape *out, Expr *const *idx, Expr *valid);
int t_update(TProgram *p, int dst, int x, Expr *const *idx);
int t_scatter(TProgram *p, int dst, int x, int ids, Expr *const *idx, Expr *valid);

/* `--ir tensor`:  t5 = reduce(add, t4, axes=[2]) : f32[1,32,1]  # rms_norm */
void tensor_print(StrBuf *b, const TProgram *p);
#endif
