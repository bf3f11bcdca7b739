/* Hand-built loop-stage programs shared by test_kernel.c and test_codegen.c: a "zoo" of small
 * kernels (add, rmsnorm, softmax, matvec, symbolic-extent sum). Everything is static inline so each
 * test program gets its own copy and the helpers a test does not use cause no warnings. */
#ifndef LATHE_KERNEL_TESTUTIL_H
#define LATHE_KERNEL_TESTUTIL_H
#include "kernel/kernel.h"

/* ---- building loop-stage programs by hand ---- */

typedef struct Zoo {
  Arena *a;
  LProgram *lp;
  ExprPool *P;
} Zoo;

static inline Expr *I(Zoo *z, int64_t v) { return ex_int(z->P, v); }
static inline Expr *V(Zoo *z, int v) { return ex_var(z->P, v); }

static inline int buf(Zoo *z, const char *name, DType t, LBufKind kind, int rank, Expr *d0, Expr *d1, Expr *d2) {
  LBuf *b = &z->lp->bufs[z->lp->nbufs];
  b->id = z->lp->nbufs;
  b->name = name;
  b->dtype = t;
  b->kind = kind;
  b->shape.rank = rank;
  Expr *d[3] = {d0, d1, d2};
  for (int i = 0; i < rank; i++) b->shape.dim[i] = d[i];
  return z->lp->nbufs++;
}

static inline LKernel *kern(Zoo *z, const char *name, int out) {
  LKernel *k = &z->lp->kernels[z->lp->nkernels++];
  k->name = name;
  k->out_buf = out;
  return k;
}

static inline int newvar(LKernel *k, const char *name) {
  k->var_names[k->nvars] = name;
  return k->nvars++;
}

static inline int par(LKernel *k, const char *name, Expr *ext) {
  int v = newvar(k, name);
  k->par[k->npar++] = (LAxis){v, ext};
  return v;
}

static inline int inner(LKernel *k, const char *name, Expr *ext) {
  int v = newvar(k, name);
  k->inner[k->ninner++] = (LAxis){v, ext};
  return v;
}

static inline LPhase *phase(LKernel *k, ReduceOp op, DType acc) {
  LPhase *ph = &k->phases[k->nphase];
  ph->id = k->nphase++;
  ph->op = op;
  ph->acc_dtype = acc;
  return ph;
}

static inline int red(LKernel *k, LPhase *ph, const char *name, Expr *ext) {
  int v = newvar(k, name);
  ph->axes[ph->naxes++] = (LAxis){v, ext};
  return v;
}

static inline Expr *ld(Zoo *z, int b, int n, Expr *i0, Expr *i1, Expr *i2) {
  Expr *idx[3] = {i0, i1, i2};
  return ex_load(z->P, b, z->lp->bufs[b].dtype, n, idx, MEM_GLOBAL);
}

static inline Expr *bin(Zoo *z, ExprOp op, Expr *a, Expr *b) { return ex_bin(z->P, op, a, b); }
static inline Expr *f32c(Zoo *z, double v) { return ex_const(z->P, DT_F32, v); }

static inline void set_out(LKernel *k, int n, Expr *i0, Expr *i1, Expr *i2, Expr *value) {
  Expr *idx[3] = {i0, i1, i2};
  for (int i = 0; i < n; i++) k->out_idx[i] = idx[i];
  k->value = value;
}

/* y[5,7] = a[5,7] + b[7] (broadcast along rows) */
static inline void k_add(Zoo *z) {
  int a = buf(z, "a", DT_F32, BUF_INPUT, 2, I(z, 5), I(z, 7), NULL),
      b = buf(z, "b", DT_F32, BUF_INPUT, 1, I(z, 7), NULL, NULL);
  int y = buf(z, "y", DT_F32, BUF_OUTPUT, 2, I(z, 5), I(z, 7), NULL);
  LKernel *k = kern(z, "add_0", y);
  int i0 = par(k, "i0", I(z, 5)), i1 = par(k, "i1", I(z, 7));
  set_out(k, 2, V(z, i0), V(z, i1), NULL,
          bin(z, X_ADD, ld(z, a, 2, V(z, i0), V(z, i1), NULL), ld(z, b, 1, V(z, i1), NULL, NULL)));
}

/* y = x * rsqrt(mean(x^2) + eps) * w over the last axis of [2,3,50] */
static inline void k_rms(Zoo *z, const char *name, DType t) {
  int x = buf(z, "x", t, BUF_INPUT, 3, I(z, 2), I(z, 3), I(z, 50)),
      w = buf(z, "w", t, BUF_INPUT, 1, I(z, 50), NULL, NULL);
  int y = buf(z, "y", t, BUF_OUTPUT, 3, I(z, 2), I(z, 3), I(z, 50));
  LKernel *k = kern(z, name, y);
  int i0 = par(k, "i0", I(z, 2)), i1 = par(k, "i1", I(z, 3));
  LPhase *ph = phase(k, RED_ADD, DT_F32);
  int r0 = red(k, ph, "r0", I(z, 50));
  Expr *xr = ld(z, x, 3, V(z, i0), V(z, i1), V(z, r0));
  ph->body = bin(z, X_MUL, xr, xr);
  int j0 = inner(k, "j0", I(z, 50));
  Expr *scale = ex_un(z->P, X_RSQRT, bin(z, X_ADD, bin(z, X_DIV, ex_acc(z->P, 0, DT_F32), f32c(z, 50)), f32c(z, 1e-5)));
  Expr *v =
      bin(z, X_MUL, bin(z, X_MUL, ld(z, x, 3, V(z, i0), V(z, i1), V(z, j0)), scale), ld(z, w, 1, V(z, j0), NULL, NULL));
  set_out(k, 3, V(z, i0), V(z, i1), V(z, j0), ex_cast(z->P, t, v));
}

/* row softmax of x[rows, cols]: two dependent phases (max, then sum of exp) and an inner loop */
static inline void k_softmax(Zoo *z, const char *name, Expr *rows, Expr *cols) {
  int x = buf(z, "x", DT_F32, BUF_INPUT, 2, rows, cols, NULL), y = buf(z, "y", DT_F32, BUF_OUTPUT, 2, rows, cols, NULL);
  LKernel *k = kern(z, name, y);
  int i0 = par(k, "i0", rows);
  LPhase *p0 = phase(k, RED_MAX, DT_F32);
  int r0 = red(k, p0, "r0", cols);
  p0->body = ld(z, x, 2, V(z, i0), V(z, r0), NULL);
  LPhase *p1 = phase(k, RED_ADD, DT_F32);
  int r1 = red(k, p1, "r1", cols);
  Expr *m = ex_acc(z->P, 0, DT_F32);
  p1->body = ex_un(z->P, X_EXP, bin(z, X_SUB, ld(z, x, 2, V(z, i0), V(z, r1), NULL), m));
  int j0 = inner(k, "j0", cols);
  Expr *e = ex_un(z->P, X_EXP, bin(z, X_SUB, ld(z, x, 2, V(z, i0), V(z, j0), NULL), m));
  set_out(k, 2, V(z, i0), V(z, j0), NULL, bin(z, X_DIV, e, ex_acc(z->P, 1, DT_F32)));
}

/* y[16] = W[16,100] x[100] */
static inline void k_matvec(Zoo *z) {
  int W = buf(z, "W", DT_F32, BUF_INPUT, 2, I(z, 16), I(z, 100), NULL),
      x = buf(z, "x", DT_F32, BUF_INPUT, 1, I(z, 100), NULL, NULL);
  int y = buf(z, "y", DT_F32, BUF_OUTPUT, 1, I(z, 16), NULL, NULL);
  LKernel *k = kern(z, "matvec_0", y);
  int i0 = par(k, "i0", I(z, 16));
  LPhase *ph = phase(k, RED_ADD, DT_F32);
  int r0 = red(k, ph, "r0", I(z, 100));
  ph->body = bin(z, X_MUL, ld(z, W, 2, V(z, i0), V(z, r0), NULL), ld(z, x, 1, V(z, r0), NULL, NULL));
  set_out(k, 1, V(z, i0), NULL, NULL, ex_acc(z->P, 0, DT_F32));
}

/* y[3,5] = sum over the symbolic middle axis of x[3,seq,5] */
static inline void k_seqsum(Zoo *z) {
  Expr *seq = ex_sym(z->P, "seq");
  int x = buf(z, "x", DT_F32, BUF_INPUT, 3, I(z, 3), seq, I(z, 5)),
      y = buf(z, "y", DT_F32, BUF_OUTPUT, 2, I(z, 3), I(z, 5), NULL);
  LKernel *k = kern(z, "seqsum_0", y);
  int i0 = par(k, "i0", I(z, 3)), i1 = par(k, "i1", I(z, 5));
  LPhase *ph = phase(k, RED_ADD, DT_F32);
  int r0 = red(k, ph, "r0", seq);
  ph->body = ld(z, x, 3, V(z, i0), V(z, r0), V(z, i1));
  set_out(k, 2, V(z, i0), V(z, i1), NULL, ex_acc(z->P, 0, DT_F32));
}

static inline Zoo zoo_new(void) {
  Zoo z;
  z.a = arena_new();
  z.P = expr_pool_new(z.a);
  z.lp = ARENA_NEW(z.a, LProgram);
  z.lp->arena = z.a;
  z.lp->pool = z.P;
  z.lp->bufs = ARENA_ARRAY(z.a, LBuf, 64);
  z.lp->kernels = ARENA_ARRAY(z.a, LKernel, 16);
  z.lp->symbols[z.lp->nsymbols++] = "seq";
  return z;
}
/* The zoo's kernels lowered to the kernel stage, every one under schedule s. */
/* Kernel i under given[i], through the tile stage's check of given schedules. */
static inline KProgram *lower_each(Zoo *z, Target t, const Schedule *given, Diag *d) {
  TargetDesc dev = target_default(t);
  TileProgram *tp = tile_from_schedules(z->lp, &dev, NULL, MM_HIGH, given, d);
  return tp ? kernel_from_tile(tp, d) : NULL;
}

static inline KProgram *lower(Zoo *z, Target t, Schedule s, Diag *d) {
  /* every kernel under s, through the tile stage's check of given schedules */
  Schedule *given = ARENA_ARRAY(z->a, Schedule, z->lp->nkernels ? z->lp->nkernels : 1);
  for (int i = 0; i < z->lp->nkernels; i++) given[i] = s;
  TargetDesc dev = target_default(t);
  TileProgram *tp = tile_from_schedules(z->lp, &dev, NULL, MM_HIGH, given, d);
  return tp ? kernel_from_tile(tp, d) : NULL;
}
#endif
