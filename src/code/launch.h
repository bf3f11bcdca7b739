/* The launch table: what the code stage hands the runtime along with the source text. Everything a
 * plan needs to run the rendered code is here, as plain data: the buffer table (names, dtypes, shapes
 * as expressions over the program's symbols), the program's inputs, outputs and symbols, and per kernel
 * the function to launch, its parameters, grid and block, scratch, and the variants that replace it
 * under a condition. The runtime reads nothing else of the kernel or code stages.
 *
 * Made by code_render_program (code.h) in the same pass as the source; it lives in the compilation's
 * arena. Expressions (grid, conditions, sizes) are Exprs over X_SYM leaves, evaluated with the run's
 * symbol values. */
#ifndef LATHE_LAUNCH_H
#define LATHE_LAUNCH_H
#include "../ir/expr.h"

typedef enum LaunchBufKind { LB_INPUT, LB_OUTPUT, LB_TEMP } LaunchBufKind;

typedef struct LaunchBuf {
  const char *name;
  DType dtype; /* storage dtype */
  Shape shape; /* row-major, contiguous */
  LaunchBufKind kind;
} LaunchBuf;

typedef struct LaunchParam {
  int buf;       /* LaunchBuf index */
  int is_output; /* written by the kernel */
} LaunchParam;

#define LAUNCH_MAX_PARAMS 32
#define LAUNCH_MAX_SYMS 16

typedef struct LaunchKernel LaunchKernel;

/* A tensor-core GEMM's library form: after the kernel's `pre`, which wrote A's planes (bf16, a_parts
 * planes of [m][k]) into the scratch at planes_at, C_w[p * m + i][r] = sum_k A_p[i][k] *
 * W_w[r][k] for each distinct weight w (the kernel's parameter w_param[w], w_rows[w] rows) and each of
 * a_parts planes of A, into the scratch; then `epilogue` applies the kernel's store. */
typedef struct LaunchGemmLib {
  int nw;
  int w_param[2];
  int64_t w_rows[2];
  int64_t k;
  int a_parts;
  Expr *m;           /* rows of A */
  int64_t planes_at; /* byte offset of A's planes in the scratch (the products follow them) */
  const LaunchKernel *epilogue;
  const char *a_sig; /* what the pre-pass writes into the planes (KGemmLib.a_sig) */
  const int *a_bufs; /* the buffers it reads */
  int na_bufs;       /* -1: unknown */
  int direct_out;    /* >= 0: C is this output parameter itself, no epilogue runs (KGemmLib.direct_out) */
  int direct_add;    /* >= 0: and the GEMM adds this parameter into it */
  int64_t w_at[2];   /* >= 0: weight w is the pre-pass's bf16 copy at this scratch byte (a quantized weight) */
} LaunchGemmLib;

struct LaunchKernel {
  const char *name;                      /* the kernel's own name (profiles, messages) */
  const char *fn;                        /* the source's function to launch: its own, or an identical kernel's */
  LaunchParam params[LAUNCH_MAX_PARAMS]; /* buffer arguments, in call order */
  int nparams;
  const char *syms[LAUNCH_MAX_SYMS]; /* symbols passed by value after the buffers (targets whose kernels
                                        do not read the symbol table from memory) */
  int nsyms;
  Expr *grid;              /* blocks */
  int block;               /* threads per block */
  int skip;                /* launches nothing: a later kernel's variant computes its result under the same condition */
  Expr *scratch;           /* device scratch bytes passed after the symbol table, NULL = none */
  const LaunchKernel *pre; /* launched right before, with the same arguments and scratch */
  const LaunchKernel *alt; /* launched instead when alt_when is non-zero */
  Expr *alt_when;
  const LaunchGemmLib *lib; /* the library form, where the kernel has one */
  int tensor_cores;         /* needs bf16 mma (sm_80 or newer) */
};

typedef struct LaunchTable {
  int symbols_in_memory; /* kernels read the symbols from a device table (pointer after the buffers) */
  const LaunchBuf *bufs;
  int nbufs;
  const int *inputs, *outputs; /* LaunchBuf indices in program input / output order */
  int ninputs, noutputs;
  const char *const *symbols; /* the program's symbols, in symbol-table order */
  int nsymbols;
  const LaunchKernel *kernels; /* in execution order */
  int nkernels;
} LaunchTable;
#endif
