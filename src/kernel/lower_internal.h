/* Internal to the kernel-stage lowering (lower_*.c): the lowering context and its statement,
 * variable and expression helpers. */
#ifndef LATHE_KERNEL_LOWER_INTERNAL_H
#define LATHE_KERNEL_LOWER_INTERNAL_H
#include "kernel.h"

typedef struct Lower {
  const LProgram *lp;
  const LKernel *k;
  Schedule s;
  Target target;
  const TargetDesc *dev; /* the device the tile stage chose for (its limits) */
  ExprPool *pool;
  Arena *arena;
  KKernel *kk;
  Diag *d;
  Expr *var_map[L_MAX_VARS];   /* X_VAR id -> replacement (NULL: keep) */
  Expr *acc_map[L_MAX_PHASES]; /* X_ACC id -> X_TMP of its accumulator */
  KStmt *smem_decls;           /* KS_SMEM statements, placed first in the kernel body */
  /* Register blocking (Schedule.rows): while nrows > 1, phases are computed for the parallel points
   * row_base + t (t < nrows) of axis variable row_var together, one accumulator set per row. */
  int nrows, row_var;
  Expr *row_base;
  Expr *acc_rows[8][L_MAX_PHASES];
  int nsmem;
  int nqrows; /* KS_QROW row caches so far */
  int failed;
} Lower;

KStmt *kl_st_new(Lower *L, KStmtKind kind);
void kl_st_add(Lower *L, KStmt *parent, KStmt *child);
KStmt *kl_st_for(Lower *L, KStmt *parent, int var, Expr *lo, Expr *hi, Expr *step);
KStmt *kl_st_if(Lower *L, KStmt *parent, Expr *cond);
void kl_st_assign(Lower *L, KStmt *parent, int tmp, Expr *value);
void kl_st_barrier(Lower *L, KStmt *parent);
void kl_st_warp_reduce(Lower *L, KStmt *parent, int tmp, ReduceOp op);
void kl_st_store_shared(Lower *L, KStmt *parent, int buf, Expr *idx, Expr *value);
int kl_new_var(Lower *L, const char *name);
Expr *kl_decl_tmp(Lower *L, KStmt *parent, DType t, const char *name, Expr *value, int *id_out);
Expr *kl_subst(Lower *L, Expr *e);
Expr *kl_domain_size(Lower *L, const LAxis *axes, int n);
Expr *kl_identity(Lower *L, ReduceOp op, DType t);
Expr *kl_combine(Lower *L, ReduceOp op, Expr *acc, Expr *v);
void kl_bind_axes(Lower *L, KStmt *parent, const LAxis *axes, int n, Expr *f);
/* vec > 1: each thread takes vec consecutive elements per step (the CPU's unrolling; on CUDA that
 * strides a warp's accesses, so CUDA passes 1 and vectorizes reductions in lower_phase.c instead). */
KStmt *kl_domain_loop(Lower *L, KStmt *parent, const LAxis *axes, int n, Expr *start, Expr *stride, int vec);
/* The vec that kl_domain_loop should use for this kernel's inner loops. */
int kl_loop_vec(const Lower *L);
void kl_coop_start(Lower *L, Expr **start, Expr **stride);
void kl_block_reduce(Lower *L, KStmt *seq, int acc_id, Expr *acc, ReduceOp op);

/* CUDA, Schedule.store_vec > 1: the kernel's one-axis inner loop with its store as vectors of that many
 * elements (its vectorizable loads too) into seq, 1; 0 (nothing emitted) where the loop does not split evenly
 * into whole vectors per thread or the store is not contiguous and aligned. */
int kl_emit_inner_vec(Lower *L, KStmt *seq);
/* The kernel's reduction phases, in order, into seq; sets L->acc_map (L->acc_rows[t] per row when
 * L->nrows > 1). */
void kl_emit_phases(Lower *L, KStmt *seq);
/* A register-blocked CPU kernel some of whose sums take the tile form of the integer dot products over quantized
 * weights (lower_phase.c): its block of rows is then the slowest point index. */
int kl_quant_tiled(const Lower *L);
/* The kernel's store of its value at its output index, with the current variable and accumulator
 * bindings (not yet added to any statement). */
KStmt *kl_output_store(Lower *L);
/* The kernel as the tensor-core GEMM (KS_MMA) its matcher found (1), else 0 with L->d saying why. */
int kl_mma_body(Lower *L, const GemmMatch *g);
/* The kernel itself as the quantized GEMV on integer tensor cores (KS_MMA of role MMA_QGEMV, no scratch): the same
 * description as the GEMM's, a block per row and 16 columns, Schedule.qgemv warps. */
int kl_qgemv_body(Lower *L, const GemmMatch *g);
/* After the parameters are known: the GEMM's A pre-pass (KKernel.pre) and its scratch size. */
void kl_mma_pack_kernel(Lower *L);
/* The library form of the GEMM (KKernel.lib), which the tile stage chose (TileChoice.library). */
void kl_mma_library(Lower *L);
/* The kernel (P x V) as one flash attention with the scores and softmax kernels before it (KS_FLASH), as
 * its matcher found them (1), else 0 with L->d saying why. */
int kl_flash_body(Lower *L, const AttnMatch *am);
/* Makes row t current (its row variable value and accumulators) / keeps its accumulators. */
void kl_select_row(Lower *L, int t);
void kl_save_row(Lower *L, int t);
#endif
