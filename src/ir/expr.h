/* Scalar expressions, shared by every stage below the graph.
 *
 * One hash-consed expression type serves as
 *   - symbolic sizes (shapes: constants, run-time symbols such as `seq`, arithmetic),
 *   - index maps (views: source index as a function of output axis variables),
 *   - tensor-stage map functions (leaves X_ARG = the i-th input at the same index, X_VAR = axis index),
 *   - loop- and kernel-stage bodies (X_LOAD, X_ACC, X_TMP, hardware indices).
 * Structurally equal expressions are the same pointer (per pool), so `a == b` is equality.
 * Constructors simplify: constant folding, neutral elements, canonical operand order.
 */
#ifndef LATHE_EXPR_H
#define LATHE_EXPR_H
#include <stdint.h>
#include "../base/arena.h"
#include "../base/strbuf.h"
#include "dtype.h"

typedef enum ExprOp {
  /* leaves */
  X_CONST, /* ival (ints, bool) or fval (floats) */
  X_SYM,   /* run-time dimension symbol, `name`; dtype i64 */
  X_VAR,   /* loop / axis variable number `ival`; dtype i64 */
  X_ARG,   /* tensor stage: input `ival` of a map, at the map's own index */
  X_ACC,   /* loop stage: the result of reduction phase `ival` */
  X_TMP,   /* kernel stage: scalar temporary `ival` */
  X_HW,    /* kernel stage: hardware index, ival is an HwIndex; dtype i64 */
  X_LOAD,  /* buffer `ival` (aux = memory space) at indices a[0..n-1]; dtype = the buffer's storage type */
  /* unary */
  X_NEG,
  X_NOT,
  X_EXP,
  X_LOG,
  X_SQRT,
  X_RSQRT,
  X_TANH,
  X_SIGMOID,
  X_ABS,
  X_ERF,
  X_SIN,
  X_COS,
  X_CAST, /* to `dtype` (f16/bf16 round) */
  /* binary */
  X_ADD,
  X_SUB,
  X_MUL,
  X_DIV,
  X_MAX,
  X_MIN,
  X_POW,
  X_IDIV,
  X_MOD, /* integers, C semantics; index math only (operands non-negative) */
  X_LT,
  X_LE,
  X_EQ,
  X_NE,
  X_AND,
  X_OR,
  /* ternary */
  X_SELECT, /* a[0] ? a[1] : a[2] */
  X_OP_COUNT
} ExprOp;

typedef enum HwIndex { HW_THREAD, HW_BLOCK, HW_LANE, HW_WARP, HW_BLOCK_DIM } HwIndex;
typedef enum MemSpace { MEM_GLOBAL = 0, MEM_SHARED = 1 } MemSpace;

typedef struct Expr Expr;
struct Expr {
  ExprOp op;
  DType dtype;
  int n;            /* number of operands */
  int aux;          /* X_LOAD: MemSpace */
  int64_t ival;     /* integer constant, variable/argument/phase/temp/buffer number, HwIndex */
  double fval;      /* float constant */
  const char *name; /* X_SYM */
  uint64_t varmask; /* bit v set when X_VAR v (v < 64) occurs inside */
  unsigned flags;   /* EXF_* below, OR-ed over the subtree */
  int depth;        /* 1 for a leaf, else 1 + the deepest operand's */
  uint64_t hash;
  Expr *next_in_bucket;
  Expr *a[]; /* operands */
};

enum { EXF_LOAD = 1, EXF_ACC = 2, EXF_ARG = 4, EXF_SYM = 8, EXF_TMP = 16, EXF_HW = 32 };

typedef struct ExprPool ExprPool;
ExprPool *expr_pool_new(Arena *arena); /* lives in (and is freed with) the arena */

Expr *ex_int(ExprPool *p, int64_t v);                /* i64 constant */
Expr *ex_const(ExprPool *p, DType t, double v);      /* constant of any type (ints: ex_float_to_int) */
Expr *ex_const_int(ExprPool *p, DType t, int64_t v); /* exact integer constant (wraps to i32; floats round) */
/* Float -> integer conversion as every backend and the reference do it: NaN -> 0, out of range -> the
 * nearest end of t's range (i32 or i64), otherwise truncation toward zero. */
int64_t ex_float_to_int(DType t, double v);
Expr *ex_bool(ExprPool *p, int v);
Expr *ex_sym(ExprPool *p, const char *name);
Expr *ex_var(ExprPool *p, int v);
Expr *ex_arg(ExprPool *p, int i, DType t);
Expr *ex_acc(ExprPool *p, int phase, DType t);
Expr *ex_tmp(ExprPool *p, int id, DType t);
Expr *ex_hw(ExprPool *p, HwIndex h);
Expr *ex_load(ExprPool *p, int buf, DType storage, int n, Expr *const *idx, MemSpace space);
/* Unary ops promote ints to f32 where the op is a float function; X_NEG/X_ABS keep ints. */
Expr *ex_un(ExprPool *p, ExprOp op, Expr *a);
Expr *ex_cast(ExprPool *p, DType t, Expr *a);
/* Binary ops first convert both operands to dtype_compute(dtype_promote(a, b)). */
Expr *ex_bin(ExprPool *p, ExprOp op, Expr *a, Expr *b);
Expr *ex_select(ExprPool *p, Expr *c, Expr *a, Expr *b);
/* Convenience for index math. */
Expr *ex_add(ExprPool *p, Expr *a, Expr *b);
Expr *ex_mul(ExprPool *p, Expr *a, Expr *b);

int ex_is_const(const Expr *e);
int ex_is_int_const(const Expr *e, int64_t v); /* e is the integer constant v */
const char *ex_op_name(ExprOp op);             /* "add", "exp", ... */
int ex_op_arity(ExprOp op);                    /* 0 for leaves (X_LOAD: variable) */

/* Post-order rewrite with memoisation (shared subexpressions are visited once).
 * After a node's operands are rewritten and the node rebuilt, fn(ctx, node) returns its replacement
 * (return the node itself to keep it). */
typedef Expr *(*ExprRewriteFn)(void *ctx, ExprPool *p, Expr *node);
Expr *ex_rewrite(ExprPool *p, Expr *e, ExprRewriteFn fn, void *ctx);
/* e's operation over new operands ops[0..e->n) (leaves: e itself). */
Expr *ex_rebuild(ExprPool *p, Expr *e, Expr *const *ops);
/* Replace X_VAR v by to[v] for v < n where to[v] != NULL. */
Expr *ex_subst_vars(ExprPool *p, Expr *e, int n, Expr *const *to);

/* Visit every distinct node once, operands before users. */
typedef void (*ExprVisitFn)(void *ctx, const Expr *node);
void ex_visit(const Expr *e, ExprVisitFn fn, void *ctx);

/* Values of run-time symbols. */
typedef struct SymEnv {
  int n;
  const char *names[16];
  int64_t values[16];
} SymEnv;
int symenv_get(const SymEnv *env, const char *name, int64_t *out);
void symenv_set(SymEnv *env, const char *name, int64_t v);
/* Evaluates an integer expression of constants, symbols and arithmetic. 0 if something is unbound, a
 * division by zero, or an intermediate result overflows int64. */
int ex_eval_int(const Expr *e, const SymEnv *env, int64_t *out);

/* Printing. Callbacks may be NULL: then defaults like i3, buf2, acc1, a0 are used. */
typedef struct ExprNames {
  void *ctx;
  const char *(*var)(void *ctx, int v);
  const char *(*buf)(void *ctx, int b, MemSpace space);
  const char *(*arg)(void *ctx, int i);
  const char *(*acc)(void *ctx, int phase);
  const char *(*tmp)(void *ctx, int id);
} ExprNames;
void ex_print(StrBuf *b, const Expr *e, const ExprNames *names);

/* Shapes: dimensions are integer expressions (constants or symbolic). */
#define LT_MAX_RANK 8
/* Program inputs (a whole model has one per weight and KV cache) and outputs. */
#define LT_MAX_INPUTS 1024
#define LT_MAX_OUTPUTS 64
typedef struct Shape {
  int rank;
  Expr *dim[LT_MAX_RANK];
} Shape;
int shape_equal(const Shape *a, const Shape *b);
Expr *shape_numel(ExprPool *p, const Shape *s);
void shape_print(StrBuf *b, const Shape *s);                      /* [1,32,seq] */
int shape_eval(const Shape *s, const SymEnv *env, int64_t *dims); /* 0 if a symbol is unbound */
int64_t shape_numel_eval(const Shape *s, const SymEnv *env);      /* -1: a symbol is unbound, or > LT_MAX_NUMEL */
#endif
