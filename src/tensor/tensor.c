/* Tensor-stage builders: each appends one node, inferring its shape and dtype from its sources. */
#include "tensor.h"
#include <string.h>

TProgram *tprog_new(Arena *arena, ExprPool *pool) {
  TProgram *p = ARENA_NEW(arena, TProgram);
  p->arena = arena;
  p->pool = pool;
  return p;
}

/* Appends a zeroed node of `kind`; the node array grows inside the arena (old copies are simply left). */
static TNode *push(TProgram *p, TKind kind) {
  if (p->n == p->cap) {
    int cap = p->cap ? p->cap * 2 : 64;
    TNode *nodes = ARENA_ARRAY(p->arena, TNode, cap);
    if (p->n) memcpy(nodes, p->nodes, sizeof(TNode) * (size_t)p->n);
    p->nodes = nodes;
    p->cap = cap;
  }
  TNode *t = &p->nodes[p->n];
  memset(t, 0, sizeof *t);
  t->id = p->n++;
  t->kind = kind;
  return t;
}

int t_input(TProgram *p, const char *name, DType t, const Shape *s) {
  TNode *n = push(p, T_INPUT);
  n->dtype = t;
  n->shape = *s;
  n->name = name ? arena_strdup(p->arena, name) : NULL;
  if (p->ninputs < LT_MAX_INPUTS) p->inputs[p->ninputs++] = n->id;
  return n->id;
}

int t_map(TProgram *p, Expr *fn, DType out, const Shape *s, const int *src, int nsrc) {
  TNode *n = push(p, T_MAP);
  n->dtype = out;
  n->shape = *s;
  n->fn = fn;
  n->nsrc = nsrc < T_MAX_SRC ? nsrc : T_MAX_SRC;
  for (int i = 0; i < n->nsrc; i++) n->src[i] = src[i];
  return n->id;
}

/* Reduced axes keep their place with size 1. */
static Shape keepdim_shape(ExprPool *x, const Shape *s, unsigned axes) {
  Shape r = *s;
  for (int k = 0; k < r.rank; k++)
    if (axes & (1u << k)) r.dim[k] = ex_int(x, 1);
  return r;
}

int t_reduce(TProgram *p, ReduceOp op, int src, unsigned axes) {
  DType st = p->nodes[src].dtype;
  Shape s = keepdim_shape(p->pool, &p->nodes[src].shape, axes);
  /* Sums accumulate in the compute type (f32 / i64); a sum of bools counts. */
  DType t = dtype_compute(st);
  if (op == RED_ADD && t == DT_BOOL) t = DT_I64;
  TNode *n = push(p, T_REDUCE);
  n->dtype = t;
  n->shape = s;
  n->rop = op;
  n->axes = axes;
  n->nsrc = 1;
  n->src[0] = src;
  return n->id;
}

int t_contract(TProgram *p, int a, int b, unsigned axes) {
  DType t = dtype_compute(dtype_promote(p->nodes[a].dtype, p->nodes[b].dtype));
  if (t == DT_BOOL) t = DT_I64;
  Shape s = keepdim_shape(p->pool, &p->nodes[a].shape, axes);
  TNode *n = push(p, T_CONTRACT);
  n->dtype = t;
  n->shape = s;
  n->axes = axes;
  n->nsrc = 2;
  n->src[0] = a;
  n->src[1] = b;
  return n->id;
}

int t_gather(TProgram *p, int table, int ids) {
  const TNode *tb = &p->nodes[table], *id = &p->nodes[ids];
  Shape s = id->shape;
  for (int k = 1; k < tb->shape.rank && s.rank < LT_MAX_RANK; k++) s.dim[s.rank++] = tb->shape.dim[k];
  DType t = tb->dtype;
  TNode *n = push(p, T_GATHER);
  n->dtype = t;
  n->shape = s;
  n->nsrc = 2;
  n->src[0] = table;
  n->src[1] = ids;
  return n->id;
}

/* An identity view (same shape, idx[d] = i_d, always valid) is the source itself. */
static int is_identity(TProgram *p, int src, const Shape *out, Expr *const *idx, Expr *valid) {
  if (valid && !(valid->op == X_CONST && valid->ival)) return 0;
  if (!shape_equal(&p->nodes[src].shape, out)) return 0;
  for (int d = 0; d < out->rank; d++)
    if (idx[d] != ex_var(p->pool, d)) return 0;
  return 1;
}

int t_view(TProgram *p, int src, const Shape *out, Expr *const *idx, Expr *valid) {
  if (is_identity(p, src, out, idx, valid)) return src;
  /* A constant-true mask is no mask. */
  if (valid && valid->op == X_CONST && valid->ival) valid = NULL;
  int rank = p->nodes[src].shape.rank;
  DType t = p->nodes[src].dtype;
  TNode *n = push(p, T_VIEW);
  n->dtype = t;
  n->shape = *out;
  for (int d = 0; d < rank; d++) n->idx[d] = idx[d];
  n->valid = valid;
  n->nsrc = 1;
  n->src[0] = src;
  return n->id;
}

int t_update(TProgram *p, int dst, int x, Expr *const *idx) {
  TNode *n = push(p, T_UPDATE);
  n->dtype = p->nodes[dst].dtype;
  n->shape = p->nodes[dst].shape;
  for (int d = 0; d < n->shape.rank; d++) n->idx[d] = idx[d];
  n->nsrc = 2;
  n->src[0] = dst;
  n->src[1] = x;
  return n->id;
}

int t_scatter(TProgram *p, int dst, int x, int ids, Expr *const *idx, Expr *valid) {
  int id = t_update(p, dst, x, idx);
  TNode *n = &p->nodes[id];
  n->nsrc = 3;
  n->src[2] = ids;
  n->valid = valid;
  return id;
}
