/* Graph stage: LLM-level ops as written by the user or emitted by a model builder.
 * Shapes and dtypes are inferred when a node is added; invalid programs are refused there,
 * with the source position of the op, so later stages can assume a well-formed graph. */
#ifndef LATHE_GRAPH_H
#define LATHE_GRAPH_H
#include "../base/diag.h"
#include "../ir/expr.h"

/* Deepest size expression a node may have (a shape dimension such as `seq*2 + seq`). */
#define GRAPH_MAX_SIZE_DEPTH 64

typedef enum GOp {
  G_INPUT,    /* name: dtype[dims] */
  G_CONST,    /* scalar literal, shape [], attr.value; dtype is "weak" (adopts the other operand's) */
  /* elementwise unary */
  G_NEG, G_EXP, G_LOG, G_SQRT, G_RSQRT, G_TANH, G_SIGMOID, G_SILU, G_GELU, G_RELU, G_ABS,
  /* elementwise binary, NumPy broadcasting */
  G_ADD, G_SUB, G_MUL, G_DIV, G_POW, G_MAXIMUM, G_MINIMUM,
  /* reductions over attr.axes (normalised to non-negative, sorted), attr.keepdim */
  G_SUM, G_MEAN, G_MAX, G_MIN,
  G_ARGMAX,     /* one axis (attr.axes[0]), attr.keepdim; i64 index of the first maximum (NaNs are skipped;
                   all NaN: 0) */
  G_SOFTMAX,    /* in[0], attr.axis */
  G_RMS_NORM,   /* x, w, attr.eps; normalises the last axis */
  G_LAYER_NORM, /* x, w, b, attr.eps; normalises the last axis */
  G_MATMUL,     /* a [..., m, k] @ b [..., k, n], batch dims broadcast; 1-D operands as in torch.matmul */
  G_LINEAR,     /* x [..., in], w [out, in], optional b [out] */
  G_EMBEDDING,  /* ids (int) [...], table [vocab, dim] -> [..., dim] */
  G_ROPE,       /* x [..., seq, head_dim], pos (int) [seq], attr.theta; rotate-half (Llama). With a third
                   input freqs f32[head_dim/2], those inverse frequencies replace theta^(-2i/d) (Llama 3
                   rope scaling). */
  G_ATTENTION,  /* q [b, h, s, d], k/v [b, kvh, kvs, d]; h % kvh == 0; attr.causal; scale 1/sqrt(d) */
  G_RESHAPE,    /* target shape in node->shape; element counts must match */
  G_PERMUTE,    /* attr.perm */
  G_SLICE,      /* attr.axis, attr.start, attr.end (end exclusive, already resolved to expressions) */
  G_CONCAT,     /* in[0], in[1] along attr.axis */
  G_CAST,       /* to node->dtype */
  G_CACHE_WRITE, /* cache (a graph input holding persistent state), x, attr.axis, attr.start: the cache with
                    positions [start, start + x.dim[axis]) along axis replaced by x. Compiled in place, so the
                    cache input may have no other consumer. */
  G_OP_COUNT
} GOp;

typedef struct GAttr {
  double value;      /* G_CONST */
  double eps;        /* norms */
  double theta;      /* rope */
  int axis;          /* softmax, slice, concat (non-negative after validation) */
  int naxes;         /* reductions: number of axes; permute: rank */
  int axes[LT_MAX_RANK]; /* reductions: sorted non-negative axes; permute: the permutation */
  int keepdim;
  int causal;
  Expr *start, *end; /* slice bounds */
  Shape shape;       /* reshape target (may contain one -1 before validation: pass ex_int(-1)) */
  DType dtype;       /* cast target */
} GAttr;

typedef struct GNode {
  int id;
  GOp op;
  DType dtype;
  Shape shape;
  int nin;
  int in[3];
  GAttr attr;
  const char *name; /* input name, or the name it was assigned to; may be NULL */
  int line, col;    /* where in the source it came from (0 if built by code) */
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
/* Adds an op after checking arity, dtypes and shapes; fills in shape and dtype.
 * attr may be NULL for ops without attributes. Returns the node id or -1 with diag set
 * (message names the op and the offending shapes, position = line/col). */
int graph_op(Graph *g, GOp op, const int *in, int nin, const GAttr *attr, int line, int col, Diag *d);
void graph_set_name(Graph *g, int node, const char *name);
int graph_add_output(Graph *g, int node);
/* Registers a symbolic dimension name (idempotent) and returns its expression. */
Expr *graph_symbol(Graph *g, const char *name);

const char *gop_name(GOp op); /* the language's spelling: "rms_norm", "add", ... */
/* Printer for `--ir graph`:  t3 = rms_norm(x, w, eps=1e-06) : f32[1,32,2048] */
void graph_print(StrBuf *b, const Graph *g);
#endif
