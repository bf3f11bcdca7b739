/* Loop stage: one loop nest per kernel, after fusion.
 *
 *   kernel k(...):
 *     for i0 < P0, i1 < P1 ... (parallel)          -- `par`
 *       acc0 = reduce(op) over r0 < R0 ...: body0  -- `phases`, in order; a phase may use earlier accs
 *       acc1 = ...
 *       for j0 < I0 ... (inner, serial per point)   -- `inner`: output axes not in `par`
 *         out[out_idx] = value                       -- may use par/inner vars, accs, loads
 *
 * RMSNorm, LayerNorm and softmax are one kernel of this shape (par = rows, phases = the row
 * reductions, inner = the row). A GEMV/GEMM is par = output elements, one phase over k, no inner axes,
 * with any elementwise epilogue in `value`. Every variable id is unique inside its kernel.
 */
#ifndef LATHE_LOOP_H
#define LATHE_LOOP_H
#include "../base/diag.h"
#include "../tensor/tensor.h"

typedef enum LBufKind { BUF_INPUT, BUF_OUTPUT, BUF_TEMP } LBufKind;

typedef struct LBuf {
  int id;
  const char *name; /* input/output name, or t<N> for temporaries */
  DType dtype;
  Shape shape; /* row-major, contiguous */
  LBufKind kind;
} LBuf;

typedef struct LAxis {
  int var;      /* X_VAR id */
  Expr *extent; /* may be symbolic */
} LAxis;

#define L_MAX_PHASES 8
#define L_MAX_VARS 64

typedef struct LPhase {
  int id; /* X_ACC id inside this kernel (= index in phases[]) */
  ReduceOp op;
  DType acc_dtype; /* f32 for floats, i64 for ints */
  int naxes;
  LAxis axes[LT_MAX_RANK]; /* reduction loops, outermost first */
  Expr *body;              /* value folded into the accumulator */
  int recompute;           /* 1 if this phase is evaluated again for parallel points it does not depend on */
} LPhase;

typedef struct LKernel {
  const char *name; /* e.g. "rms_norm_0" */
  int npar;
  LAxis par[LT_MAX_RANK];
  int nphase;
  LPhase phases[L_MAX_PHASES];
  int ninner;
  LAxis inner[LT_MAX_RANK];
  int out_buf;                       /* LBuf id written */
  Expr *out_idx[LT_MAX_RANK];        /* one per output dim; usually X_VAR of a par or inner axis */
  Expr *value;                       /* stored value; its dtype is the buffer's dtype */
  Expr *out_valid;                   /* the store happens only where this holds (a scatter's range); NULL: always */
  int nvars;                         /* X_VAR ids in use: 0..nvars-1 */
  const char *var_names[L_MAX_VARS]; /* "i0", "r0", "j0", ... */
} LKernel;

typedef struct LProgram {
  Arena *arena;
  ExprPool *pool;
  LBuf *bufs;
  int nbufs;
  LKernel *kernels; /* in execution order */
  int nkernels;
  int inputs[LT_MAX_INPUTS], ninputs;    /* buffer ids in program input order */
  int outputs[LT_MAX_OUTPUTS], noutputs; /* buffer ids in program output order */
  const char *symbols[16];
  int nsymbols;
} LProgram;

/* Which legal fusions are taken: a schedule decision, chosen per target (and later by the tuner). */
typedef struct FusionPolicy {
  int fuse_reductions;        /* fuse a reduction into the kernel that consumes it (norms, softmax, epilogues) */
  int allow_recompute;        /* also when its result is recomputed per consumer point (norm -> linear prologue) */
  int shared_max_inputs;      /* a value several kernels read is inlined into each of them only while it reads
                                 at most this many buffers (and no reduction); otherwise it gets a buffer */
  int inline_costly_prologue; /* inline transcendental math (exp, sigmoid, ...) into a reduction body that
                                 would recompute it for every point of another parallel axis */
  int realize_reread;         /* a reduction one kernel reads at two indices (RoPE's rotate-half of a projection)
                                 gets a buffer, instead of two phases computing it twice a point */
} FusionPolicy;

FusionPolicy fusion_policy_default(void);
LProgram *loop_from_tensor(const TProgram *t, const FusionPolicy *pol, Diag *d);
/* The work the fusion fixpoint did: attempts (realized sets tried) and kernel builds. no_reuse (set by
 * the caller) rebuilds every kernel in every attempt, the plain fixpoint that reuse must agree with. */
typedef struct LoopStats {
  int no_reuse;
  int attempts;
  long builds;
} LoopStats;
LProgram *loop_from_tensor_stats(const TProgram *t, const FusionPolicy *pol, Diag *d, LoopStats *stats);
/* Names for printing loop-stage expressions of kernel k (vars, buffers, accs). */
ExprNames loop_expr_names(const LProgram *p, const LKernel *k);
void loop_print(StrBuf *b, const LProgram *p);
#endif
