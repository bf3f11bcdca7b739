/* Graph stage: LLM-level ops as written by the user or emitted by a model builder.
 * Shapes and dtypes are inferred when a node is added; invalid programs are refused there,
 * with the source position of the op, so later stages can assume a well-formed graph. */
#ifndef LATHE_GRAPH_H
#define LATHE_GRAPH_H
#include <stddef.h>
#include "../base/diag.h"
#include "../ir/expr.h"

/* Deepest size expression a node may have (a shape dimension such as `seq*2 + seq`). */
#define GRAPH_MAX_SIZE_DEPTH 64

/* Every op is declared once, in ops.def (name, arity, parameters, shape rule, reference, lowering). */
typedef enum GOp {
#define OP(ENUM, ...) G_##ENUM,
#include "ops.def"
#undef OP
  G_OP_COUNT
} GOp;

typedef struct GAttr {
  double value;          /* G_CONST: the literal (a float literal, or an integer one as a double) */
  int64_t ivalue;        /* G_CONST of an integer dtype: the exact integer literal */
  double eps;            /* norms */
  double theta;          /* rope */
  int axis;              /* softmax, slice, concat (non-negative after validation) */
  int naxes;             /* reductions: number of axes; permute: rank */
  int axes[LT_MAX_RANK]; /* reductions: sorted non-negative axes; permute: the permutation */
  int keepdim;
  int causal;
  Expr *start, *end; /* slice bounds */
  Shape shape;       /* reshape target (may contain one -1 before validation: pass ex_int(-1)) */
  DType dtype;       /* cast target */
} GAttr;

/* The most operands an op takes (attention with kv_len). */
#define G_MAX_IN 4

typedef struct GNode {
  int id;
  GOp op;
  DType dtype;
  Shape shape;
  int nin;
  int in[G_MAX_IN];
  GAttr attr;
  const char *name; /* input name, or the name it was assigned to; may be NULL */
  int line, col;    /* where in the source it came from (0 if built by code) */
  int first_use;    /* id of the first node that reads this one (0: none yet; a reader's id is never 0) */
  int writer;       /* inputs: id of the cache_write that updates it in place (0: none) */
} GNode;

typedef struct Graph {
  Arena *arena;
  ExprPool *pool;
  GNode *nodes; /* nodes[i].id == i; inputs of a node always have smaller ids */
  int n, cap;
  int inputs[LT_MAX_INPUTS], ninputs;
  int outputs[LT_MAX_OUTPUTS], noutputs;
  const char *symbols[16]; /* names of symbolic dimensions, in order of first use */
  int nsymbols;
} Graph;

Graph *graph_new(Arena *arena, ExprPool *pool);
/* Adds an input. Fails (returns -1, diag set) on a duplicate name or bad dims. */
int graph_input(Graph *g, const char *name, DType t, const Shape *shape, int line, int col, Diag *d);
int graph_const(Graph *g, double value, int line, int col);
int graph_const_int(Graph *g, int64_t value, int line, int col); /* an exact integer literal (i64, weak) */
/* Adds an op after checking arity, dtypes and shapes; fills in shape and dtype.
 * attr may be NULL for ops without attributes. Returns the node id or -1 with diag set
 * (message names the op and the offending shapes, position = line/col). */
int graph_op(Graph *g, GOp op, const int *in, int nin, const GAttr *attr, int line, int col, Diag *d);
void graph_set_name(Graph *g, int node, const char *name);
int graph_add_output(Graph *g, int node);
/* Registers a symbolic dimension name (idempotent) and returns its expression. */
Expr *graph_symbol(Graph *g, const char *name);

const char *gop_name(GOp op); /* the language's spelling: "rms_norm", "add", ... */

/* An op's parameters in the language, from ops.def (see the macros there). */
typedef enum GParamKind {
  GP_TENSOR,
  GP_AXES,
  GP_AXIS,
  GP_PERM,
  GP_NUM,
  GP_FLAG,
  GP_INDEX,
  GP_POSITION,
  GP_SHAPE,
  GP_DTYPE,
  GP_SWAP /* parser sugar (transpose): two axes of operand 0 exchanged -> attr.axes as a permutation */
} GParamKind;
/* printer: leave a false flag out; leave the attribute out when the node has every operand (rope: freqs) */
enum { GPF_OMIT_FALSE = 1, GPF_OMIT_AT_MAX_IN = 2, GPF_REQUIRED = 4, GPF_OPTIONAL = 8 };
typedef struct GParam {
  const char *name;
  GParamKind kind;
  size_t offset;  /* of the attribute in GAttr (not GP_TENSOR) */
  double dflt;    /* GP_NUM, GP_AXIS: value when not given */
  unsigned flags; /* GPF_* */
} GParam;
#define GOP_MAX_PARAMS 5
typedef struct GOpInfo {
  const char *name;
  int min_in, max_in; /* operands graph_op accepts */
  int nparams;
  GParam params[GOP_MAX_PARAMS];
} GOpInfo;
const GOpInfo *gop_info(GOp op); /* NULL for an op outside the table */
/* Whether parameter i must be given in a call (the required ones come first). */
int gparam_required(const GOpInfo *info, int i);
/* op's attributes with every parameter at its default (what graph_op assumes for attr == NULL). */
GAttr gop_default_attr(GOp op);
/* Printer for `--ir graph`:  t3 = rms_norm(x, w, eps=1e-06) : f32[1,32,2048] */
void graph_print(StrBuf *b, const Graph *g);
/* With the symbols' values: every node's sizes evaluate without overflow, element counts stay within
 * LT_MAX_NUMEL, argmax has a non-empty axis and attention has keys. 0 with diag (node's position). */
int graph_check_sizes(const Graph *g, const SymEnv *env, Diag *d);
#endif
