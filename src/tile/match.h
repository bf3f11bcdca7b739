/* Shape matchers: whether a loop nest is a tensor-core GEMM or the end of an attention (flash attention,
 * flash-decoding), read from loop-stage data only. The tile stage calls them to choose what kind of
 * kernel a nest becomes (and to check a schedule given from outside); the kernel stage builds from
 * what they found. A refusal says why in `why` (a Diag, so tests and the schedule check can show it). */
#ifndef LATHE_TILE_MATCH_H
#define LATHE_TILE_MATCH_H
#include "../loop/loop.h"

/* A sum over k of A[m][k] * W_i[n][k] for one or two bf16 weights W_i (kernel/lower_mma.c builds it). */
typedef struct GemmMatch {
  int row_axis;              /* index into the kernel's par axes: m, of run-time extent */
  Expr *var_map[L_MAX_VARS]; /* unit column axes -> 0, the second phase's k -> the first's */
  int nn;                    /* column axes (extent > 1), last fastest */
  int n_var[LT_MAX_RANK];
  int64_t n_ext[LT_MAX_RANK];
  int64_t n_total; /* a multiple of 32 */
  int k_var;
  int64_t k_extent; /* a multiple of 16 */
  int nb;           /* weights (phases): 1 or 2 */
  Expr *a;          /* A, f32, of m and k only */
  Expr *b[2];       /* each weight's bf16 load at (columns..., k) */
  /* every weight is a plain [rows][k] matrix, so the product can be a library GEMM (cuBLASLt) */
  int library;
} GemmMatch;

int match_gemm(const LProgram *lp, const LKernel *k, int row_axis, GemmMatch *m, Diag *why);

/* Kernel C = P x V after B = softmax(S) after A = score(Q . K) (kernel/lower_flash.c builds it):
 * everything below in C's variables, with the new ones the flash kernel needs numbered from
 * C's nvars on in the order new_names lists them. */
typedef struct AttnMatch {
  int decode;                        /* matched for flash-decoding (CUDA cores: no multiple-of-16 sizes needed) */
  int scores_kernel, softmax_kernel; /* A and B, loop-kernel indices */
  int p_buf, s_buf;
  int m_var; /* query rows' variable (the row axis), -1: one query row */
  Expr *m_extent;
  int t_var;
  Expr *t_extent;
  int64_t d_extent;
  int nnew;
  const char *new_names[1 + 2 * LT_MAX_RANK]; /* "d", then "g", "c" for each split column axis */
  int d_var;
  Expr *var_map[L_MAX_VARS]; /* C's unit axes -> 0, a split axis n -> g * c + c' */
  Expr *q, *k, *v;           /* float (not yet cast to f32); v with var_map applied */
  Expr *score;               /* A's value in C's terms: X_ACC 0 is the dot product */
  int ngroup, nvalue;
  int group_var[LT_MAX_RANK], value_var[LT_MAX_RANK];
  int64_t group_ext[LT_MAX_RANK], value_ext[LT_MAX_RANK];
  int64_t groups, width;
} AttnMatch;

/* row_axis: the blocked axis of a prefill variant, or the kernel's own (-1 where it has none) for
 * flash-decoding; decode selects the flash-decoding limits. */
int match_attention(const LProgram *lp, int kernel, int row_axis, int decode, AttnMatch *m, Diag *why);
/* How e uses variable v: *whole is set where v appears other than as v // c; *div (0 at the start:
 * none seen) becomes the gcd of every such c. */
void match_scan_use(const Expr *e, int v, int64_t *div, int *whole);
#endif
