/* Kernel stage: tile -> kernel lowering for each target and reduction strategy, checked on the
 * statement tree and on the printed text. (test_codegen.c runs the same kernels.) */
#include "testutil.h"
#include <stdlib.h>
#include "kernel/kernel.h"

/* ---- building loop-stage programs by hand ---- */

typedef struct Zoo {
  Arena *a;
  LProgram *lp;
  ExprPool *P;
} Zoo;

static Expr *I(Zoo *z, int64_t v) { return ex_int(z->P, v); }
static Expr *V(Zoo *z, int v) { return ex_var(z->P, v); }

static int buf(Zoo *z, const char *name, DType t, LBufKind kind, int rank, Expr *d0, Expr *d1, Expr *d2) {
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

static LKernel *kern(Zoo *z, const char *name, int out) {
  LKernel *k = &z->lp->kernels[z->lp->nkernels++];
  k->name = name;
  k->out_buf = out;
  return k;
}

static int newvar(LKernel *k, const char *name) {
  k->var_names[k->nvars] = name;
  return k->nvars++;
}

static int par(LKernel *k, const char *name, Expr *ext) {
  int v = newvar(k, name);
  k->par[k->npar++] = (LAxis){v, ext};
  return v;
}

static int inner(LKernel *k, const char *name, Expr *ext) {
  int v = newvar(k, name);
  k->inner[k->ninner++] = (LAxis){v, ext};
  return v;
}

static LPhase *phase(LKernel *k, ReduceOp op, DType acc) {
  LPhase *ph = &k->phases[k->nphase];
  ph->id = k->nphase++;
  ph->op = op;
  ph->acc_dtype = acc;
  return ph;
}

static int red(LKernel *k, LPhase *ph, const char *name, Expr *ext) {
  int v = newvar(k, name);
  ph->axes[ph->naxes++] = (LAxis){v, ext};
  return v;
}

static Expr *ld(Zoo *z, int b, int n, Expr *i0, Expr *i1, Expr *i2) {
  Expr *idx[3] = {i0, i1, i2};
  return ex_load(z->P, b, z->lp->bufs[b].dtype, n, idx, MEM_GLOBAL);
}

static Expr *bin(Zoo *z, ExprOp op, Expr *a, Expr *b) { return ex_bin(z->P, op, a, b); }
static Expr *f32c(Zoo *z, double v) { return ex_const(z->P, DT_F32, v); }

static void set_out(LKernel *k, int n, Expr *i0, Expr *i1, Expr *i2, Expr *value) {
  Expr *idx[3] = {i0, i1, i2};
  for (int i = 0; i < n; i++) k->out_idx[i] = idx[i];
  k->value = value;
}

/* y[5,7] = a[5,7] + b[7] (broadcast along rows) */
static void k_add(Zoo *z) {
  int a = buf(z, "a", DT_F32, BUF_INPUT, 2, I(z, 5), I(z, 7), NULL), b = buf(z, "b", DT_F32, BUF_INPUT, 1, I(z, 7), NULL, NULL);
  int y = buf(z, "y", DT_F32, BUF_OUTPUT, 2, I(z, 5), I(z, 7), NULL);
  LKernel *k = kern(z, "add_0", y);
  int i0 = par(k, "i0", I(z, 5)), i1 = par(k, "i1", I(z, 7));
  set_out(k, 2, V(z, i0), V(z, i1), NULL, bin(z, X_ADD, ld(z, a, 2, V(z, i0), V(z, i1), NULL), ld(z, b, 1, V(z, i1), NULL, NULL)));
}

/* y = x * rsqrt(mean(x^2) + eps) * w over the last axis of [2,3,50] */
static void k_rms(Zoo *z, const char *name, DType t) {
  int x = buf(z, "x", t, BUF_INPUT, 3, I(z, 2), I(z, 3), I(z, 50)), w = buf(z, "w", t, BUF_INPUT, 1, I(z, 50), NULL, NULL);
  int y = buf(z, "y", t, BUF_OUTPUT, 3, I(z, 2), I(z, 3), I(z, 50));
  LKernel *k = kern(z, name, y);
  int i0 = par(k, "i0", I(z, 2)), i1 = par(k, "i1", I(z, 3));
  LPhase *ph = phase(k, RED_ADD, DT_F32);
  int r0 = red(k, ph, "r0", I(z, 50));
  Expr *xr = ld(z, x, 3, V(z, i0), V(z, i1), V(z, r0));
  ph->body = bin(z, X_MUL, xr, xr);
  int j0 = inner(k, "j0", I(z, 50));
  Expr *scale = ex_un(z->P, X_RSQRT, bin(z, X_ADD, bin(z, X_DIV, ex_acc(z->P, 0, DT_F32), f32c(z, 50)), f32c(z, 1e-5)));
  Expr *v = bin(z, X_MUL, bin(z, X_MUL, ld(z, x, 3, V(z, i0), V(z, i1), V(z, j0)), scale), ld(z, w, 1, V(z, j0), NULL, NULL));
  set_out(k, 3, V(z, i0), V(z, i1), V(z, j0), ex_cast(z->P, t, v));
}

/* row softmax of x[rows, cols]: two dependent phases (max, then sum of exp) and an inner loop */
static void k_softmax(Zoo *z, const char *name, Expr *rows, Expr *cols) {
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
static void k_matvec(Zoo *z) {
  int W = buf(z, "W", DT_F32, BUF_INPUT, 2, I(z, 16), I(z, 100), NULL), x = buf(z, "x", DT_F32, BUF_INPUT, 1, I(z, 100), NULL, NULL);
  int y = buf(z, "y", DT_F32, BUF_OUTPUT, 1, I(z, 16), NULL, NULL);
  LKernel *k = kern(z, "matvec_0", y);
  int i0 = par(k, "i0", I(z, 16));
  LPhase *ph = phase(k, RED_ADD, DT_F32);
  int r0 = red(k, ph, "r0", I(z, 100));
  ph->body = bin(z, X_MUL, ld(z, W, 2, V(z, i0), V(z, r0), NULL), ld(z, x, 1, V(z, r0), NULL, NULL));
  set_out(k, 1, V(z, i0), NULL, NULL, ex_acc(z->P, 0, DT_F32));
}

/* y[3,5] = sum over the symbolic middle axis of x[3,seq,5] */
static void k_seqsum(Zoo *z) {
  Expr *seq = ex_sym(z->P, "seq");
  int x = buf(z, "x", DT_F32, BUF_INPUT, 3, I(z, 3), seq, I(z, 5)), y = buf(z, "y", DT_F32, BUF_OUTPUT, 2, I(z, 3), I(z, 5), NULL);
  LKernel *k = kern(z, "seqsum_0", y);
  int i0 = par(k, "i0", I(z, 3)), i1 = par(k, "i1", I(z, 5));
  LPhase *ph = phase(k, RED_ADD, DT_F32);
  int r0 = red(k, ph, "r0", seq);
  ph->body = ld(z, x, 3, V(z, i0), V(z, r0), V(z, i1));
  set_out(k, 2, V(z, i0), V(z, i1), NULL, ex_acc(z->P, 0, DT_F32));
}

static Zoo zoo_new(void) {
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

static KProgram *lower(Zoo *z, Target t, Schedule s, Diag *d) {
  TileProgram *tp = ARENA_NEW(z->a, TileProgram);
  tp->loop = z->lp;
  tp->target = t;
  tp->nkernels = z->lp->nkernels;
  tp->kernels = ARENA_ARRAY(z->a, TileKernel, tp->nkernels);
  for (int i = 0; i < tp->nkernels; i++) tp->kernels[i] = (TileKernel){&z->lp->kernels[i], s};
  return kernel_from_tile(tp, d);
}

/* ---- walking the tree ---- */

typedef struct Census {
  int n[KS_WARP_REDUCE + 1];
  int hw_exprs; /* statements whose expressions use hardware indices */
  const KStmt *vec_loop; /* a KS_FOR with constant extent 4 starting at 0 */
} Census;

static int uses_hw(const Expr *e) { return e && (e->flags & EXF_HW); }

static void census(Census *c, const KStmt *s) {
  c->n[s->kind]++;
  int hw = uses_hw(s->lo) || uses_hw(s->hi) || uses_hw(s->step) || uses_hw(s->cond) || uses_hw(s->value);
  for (int i = 0; i < s->nidx; i++) hw |= uses_hw(s->idx[i]);
  c->hw_exprs += hw;
  if (s->kind == KS_FOR && ex_is_int_const(s->hi, 4) && ex_is_int_const(s->lo, 0) && !c->vec_loop) c->vec_loop = s;
  for (int i = 0; i < s->nbody; i++) census(c, s->body[i]);
}

static Census census_of(const KKernel *kk) {
  Census c = {0};
  census(&c, kk->body);
  return c;
}

static int64_t eval_grid(const KKernel *kk, int64_t seq) {
  SymEnv env = {0};
  symenv_set(&env, "seq", seq);
  int64_t v = -1;
  assert_true(ex_eval_int(kk->grid, &env, &v));
  return v;
}

static char *printed(const KProgram *kp) {
  StrBuf b = {0};
  kernel_print(&b, kp);
  return b.data;
}

/* ---- tests ---- */

static void test_cpu_omp(void **state) {
  Zoo z = zoo_new();
  k_rms(&z, "rms_norm_0", DT_F32);
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CPU, (Schedule){RS_SERIAL, 1, 1, 1}, &d);
  assert_non_null(kp);
  const KKernel *kk = &kp->kernels[0];
  Census c = census_of(kk);
  assert_int_equal(c.n[KS_PARFOR], 1);
  assert_int_equal(c.n[KS_WARP_REDUCE] + c.n[KS_SMEM] + c.n[KS_BARRIER], 0);
  assert_int_equal(c.hw_exprs, 0);
  assert_true(ex_is_int_const(kk->grid, 1));
  assert_int_equal(kk->block, 1);
  /* output first, then reads by first use */
  assert_int_equal(kk->nparams, 3);
  assert_int_equal(kk->params[0].buf, 2);
  assert_true(kk->params[0].is_output);
  assert_int_equal(kk->params[1].buf, 0);
  assert_int_equal(kk->params[2].buf, 1);
  assert_false(kk->params[1].is_output);
  char *s = printed(kp);
  assert_contains(s, "kernel rms_norm_0(out y: f32[2,3,50], x: f32[2,3,50], w: f32[50]) cpu omp\n");
  assert_contains(s, "parallel for p");
  assert_contains(s, "i0: i64 = p");
  assert_contains(s, "acc0: f32 = 0.0\n");
  assert_contains(s, "for r0 = 0; r0 < 50; r0 += 1:\n");
  assert_contains(s, "acc0 = acc0 + x[i0, i1, r0]*x[i0, i1, r0]\n");
  assert_contains(s, "y[i0, i1, j0] = ");
  free(s);
  arena_free(z.a);
}

static void test_cpu_serial_no_parfor(void **state) {
  Zoo z = zoo_new();
  k_add(&z);
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CPU, (Schedule){RS_SERIAL, 1, 1, 0}, &d);
  assert_non_null(kp);
  Census c = census_of(&kp->kernels[0]);
  assert_int_equal(c.n[KS_PARFOR], 0);
  assert_int_equal(c.n[KS_FOR], 1);
  /* two par axes from one point index */
  assert_int_equal(c.n[KS_DECL], 2);
  char *s = printed(kp);
  assert_contains(s, "i1: i64 = p");
  assert_contains(s, " % 7");
  assert_contains(s, "i0: i64 = p");
  assert_contains(s, " // 7");
  free(s);
  arena_free(z.a);
}

static void test_cuda_serial(void **state) {
  Zoo z = zoo_new();
  k_softmax(&z, "softmax_0", ex_sym(z.P, "seq"), I(&z, 37));
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CUDA, (Schedule){RS_SERIAL, 128, 1, 0}, &d);
  assert_non_null(kp);
  const KKernel *kk = &kp->kernels[0];
  assert_int_equal(eval_grid(kk, 1000), 8); /* ceil(1000 / 128) */
  assert_int_equal(eval_grid(kk, 1024), 8);
  assert_int_equal(eval_grid(kk, 1025), 9);
  assert_int_equal(kk->block, 128);
  assert_int_equal(kk->nsyms, 1);
  assert_string_equal(kk->syms[0], "seq");
  Census c = census_of(kk);
  assert_int_equal(c.n[KS_WARP_REDUCE] + c.n[KS_SMEM] + c.n[KS_BARRIER] + c.n[KS_PARFOR], 0);
  char *s = printed(kp);
  assert_contains(s, "grid=");
  assert_contains(s, "p: i64 = block*128 + thread\n");
  assert_contains(s, "if p < seq:\n");
  assert_contains(s, "acc0: f32 = -inf");
  free(s);
  arena_free(z.a);
}

static void test_cuda_warp(void **state) {
  Zoo z = zoo_new();
  k_softmax(&z, "softmax_0", ex_sym(z.P, "seq"), I(&z, 37));
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CUDA, (Schedule){RS_WARP, 256, 1, 0}, &d);
  assert_non_null(kp);
  const KKernel *kk = &kp->kernels[0];
  assert_int_equal(eval_grid(kk, 1000), 125); /* 8 rows per block */
  Census c = census_of(kk);
  assert_int_equal(c.n[KS_WARP_REDUCE], 2);
  assert_int_equal(c.n[KS_SMEM] + c.n[KS_BARRIER], 0);
  char *s = printed(kp);
  assert_contains(s, "red=warp");
  assert_contains(s, "p: i64 = block*8 + warp\n");
  assert_contains(s, "for r0 = lane; r0 < 37; r0 += 32:\n");
  assert_contains(s, "acc0 = warp_max(acc0)\n");
  assert_contains(s, "acc1 = warp_sum(acc1)\n");
  assert_contains(s, "for j0 = lane; j0 < 37; j0 += 32:\n");
  free(s);
  arena_free(z.a);
}

/* No inner axes: one lane stores the point's value. */
static void test_cuda_warp_matvec(void **state) {
  Zoo z = zoo_new();
  k_matvec(&z);
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CUDA, (Schedule){RS_WARP, 128, 1, 0}, &d);
  assert_non_null(kp);
  assert_int_equal(kp->kernels[0].params[1].buf, 0); /* W before x: first use */
  char *s = printed(kp);
  assert_contains(s, "kernel matvec_0(out y: f32[16], W: f32[16,100], x: f32[100]) grid=4 block=128");
  assert_contains(s, "if lane == 0:\n      y[i0] = acc0\n");
  free(s);
  arena_free(z.a);
}

static void test_cuda_block(void **state) {
  Zoo z = zoo_new();
  k_rms(&z, "rms_norm_0", DT_F32);
  k_softmax(&z, "softmax_0", I(&z, 6), I(&z, 37));
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CUDA, (Schedule){RS_BLOCK, 256, 1, 0}, &d);
  assert_non_null(kp);
  const KKernel *rms = &kp->kernels[0], *sm = &kp->kernels[1];
  assert_int_equal(eval_grid(rms, 0), 6); /* one block per row */
  Census c = census_of(rms);
  assert_int_equal(c.n[KS_SMEM], 1);
  assert_int_equal(c.n[KS_BARRIER], 2);
  assert_int_equal(c.n[KS_WARP_REDUCE], 2); /* within warps, then across the partials */
  assert_int_equal(rms->body->body[0]->body[0]->count, 9); /* 8 partials + broadcast slot */
  c = census_of(sm);
  assert_int_equal(c.n[KS_SMEM], 2);
  assert_int_equal(c.n[KS_BARRIER], 4);
  char *s = printed(kp);
  assert_contains(s, "red=block");
  assert_contains(s, "smem smem0: f32[9]\n");
  assert_contains(s, "for r0 = thread; r0 < 50; r0 += 256:\n");
  assert_contains(s, "acc0 = warp_sum(acc0)\n  if lane == 0:\n    smem0[warp] = acc0\n  barrier\n  if warp == 0:\n");
  assert_contains(s, "acc0 = lane < 8 ? smem0[lane] : 0.0\n");
  assert_contains(s, "acc0 = smem0[8]\n");
  free(s);
  arena_free(z.a);
}

/* One warp per block: the warp shuffle is the whole reduction. */
static void test_cuda_block32(void **state) {
  Zoo z = zoo_new();
  k_rms(&z, "rms_norm_0", DT_F32);
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CUDA, (Schedule){RS_BLOCK, 32, 1, 0}, &d);
  assert_non_null(kp);
  Census c = census_of(&kp->kernels[0]);
  assert_int_equal(c.n[KS_SMEM] + c.n[KS_BARRIER], 0);
  assert_int_equal(c.n[KS_WARP_REDUCE], 1);
  arena_free(z.a);
}

/* vec: a constant-extent inner loop; guarded only where vec may not divide the domain. */
static void test_vec(void **state) {
  Zoo z = zoo_new();
  k_matvec(&z); /* 100 = 25 * 4: no guard */
  k_rms(&z, "rms_norm_0", DT_F32); /* 50: guard */
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CUDA, (Schedule){RS_WARP, 256, 4, 0}, &d);
  assert_non_null(kp);
  Census c = census_of(&kp->kernels[0]);
  assert_non_null(c.vec_loop);
  assert_int_not_equal(c.vec_loop->body[0]->kind, KS_IF);
  c = census_of(&kp->kernels[1]);
  assert_non_null(c.vec_loop);
  assert_int_equal(c.vec_loop->body[0]->kind, KS_IF);
  char *s = printed(kp);
  assert_contains(s, "vec=4");
  assert_contains(s, " = lane*4; ");
  assert_contains(s, " += 128:\n");
  free(s);
  arena_free(z.a);
}

static void test_symbolic_extents(void **state) {
  Zoo z = zoo_new();
  k_add(&z);
  k_softmax(&z, "softmax_0", I(&z, 3), ex_sym(z.P, "seq"));
  k_seqsum(&z);
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CUDA, (Schedule){RS_BLOCK, 128, 2, 0}, &d);
  assert_non_null(kp);
  assert_int_equal(kp->kernels[0].nsyms, 0);
  assert_int_equal(kp->kernels[1].nsyms, 1);
  /* seq only in the input's shape and the reduction extent: still a parameter */
  assert_int_equal(kp->kernels[2].nsyms, 1);
  assert_int_equal(eval_grid(&kp->kernels[2], 7), 15);
  Census c = census_of(&kp->kernels[1]);
  assert_non_null(c.n[KS_IF] ? (void *)1 : NULL);
  char *s = printed(kp);
  assert_contains(s, "kernel softmax_0(out y: f32[3,seq], x: f32[3,seq], seq: i64) grid=3 block=128");
  assert_contains(s, " < seq:\n");
  free(s);
  arena_free(z.a);
}

static void test_bad_schedules(void **state) {
  Zoo z = zoo_new();
  k_rms(&z, "rms_norm_0", DT_F32);
  Diag d = {0};
  assert_null(lower(&z, TARGET_CUDA, (Schedule){RS_WARP, 100, 1, 0}, &d));
  assert_contains(d.msg, "rms_norm_0");
  assert_contains(d.msg, "multiple of 32");
  Diag d2 = {0};
  assert_null(lower(&z, TARGET_CUDA, (Schedule){RS_BLOCK, 256, 3, 0}, &d2));
  assert_contains(d2.msg, "vector width 3");
  arena_free(z.a);
}

static void test_acc_before_phase(void **state) {
  Zoo z = zoo_new();
  k_matvec(&z);
  LKernel *k = &z.lp->kernels[0];
  k->phases[0].body = ex_bin(z.P, X_ADD, k->phases[0].body, ex_acc(z.P, 0, DT_F32)); /* uses itself */
  Diag d = {0};
  assert_null(lower(&z, TARGET_CPU, (Schedule){RS_SERIAL, 1, 1, 1}, &d));
  assert_contains(d.msg, "acc0 is used before its phase");
  arena_free(z.a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_omp),
      cmocka_unit_test(test_cpu_serial_no_parfor),
      cmocka_unit_test(test_cuda_serial),
      cmocka_unit_test(test_cuda_warp),
      cmocka_unit_test(test_cuda_warp_matvec),
      cmocka_unit_test(test_cuda_block),
      cmocka_unit_test(test_cuda_block32),
      cmocka_unit_test(test_vec),
      cmocka_unit_test(test_symbolic_extents),
      cmocka_unit_test(test_bad_schedules),
      cmocka_unit_test(test_acc_before_phase),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
