/* Kernel stage: tile -> kernel lowering for each target and reduction strategy, checked on the
 * statement tree and on the printed text. (test_codegen.c runs the same kernels.) */
#include "testutil.h"
#include <stdlib.h>
#include "code/code.h"
#include "kernel/kernel.h"
#include "kernel_testutil.h"
#include "backend/nvrtc.h"
#include "driver/pipeline.h"

/* ---- walking the tree ---- */

typedef struct Census {
  int n[KS_MMA + 1];
  int hw_exprs;          /* statements whose expressions use hardware indices */
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
  assert_int_equal(c.n[KS_WARP_REDUCE], 2);                /* within warps, then across the partials */
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

/* y[i] = sum over r < n of x[i, r]^2, x bf16 */
static void k_sumsq(Zoo *z, const char *name, int64_t n) {
  int x = buf(z, "x", DT_BF16, BUF_INPUT, 2, I(z, 4), I(z, n), NULL);
  int y = buf(z, "y", DT_F32, BUF_OUTPUT, 1, I(z, 4), NULL, NULL);
  LKernel *k = kern(z, name, y);
  int i0 = par(k, "i0", I(z, 4));
  LPhase *ph = phase(k, RED_ADD, DT_F32);
  int r0 = red(k, ph, "r0", I(z, n));
  Expr *xr = ex_cast(z->P, DT_F32, ld(z, x, 2, V(z, i0), V(z, r0), NULL));
  ph->body = bin(z, X_MUL, xr, xr);
  set_out(k, 1, V(z, i0), NULL, NULL, ex_acc(z->P, 0, DT_F32));
}

/* Unrolled vectors are not bounds-checked one by one, so a reduction is unrolled only when every lane
 * has the same number of 8-wide vectors: 2048 = 32 lanes * 8 * 8 unrolls (4 per step), 576 = 32 * 8
 * * 2.25 does not (lanes 0-7 have a third vector; unrolled by 2, they read 256 elements past the end). */
static void test_unroll_only_even_split(void **state) {
  Zoo z = zoo_new();
  k_sumsq(&z, "even_0", 2048);
  k_sumsq(&z, "uneven_1", 576);
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CUDA, (Schedule){RS_WARP, 128, 8, 0}, &d);
  assert_non_null(kp);
  assert_int_equal(census_of(&kp->kernels[0]).n[KS_VLOAD], 4);
  assert_int_equal(census_of(&kp->kernels[1]).n[KS_VLOAD], 1);
  char *s = printed(kp);
  const char *loop = strstr(s, " < 576; ");
  assert_non_null(loop);
  const char *eol = strchr(loop, '\n');
  assert_non_null(eol);
  assert_true(strstr(loop, " += 256:") != NULL && strstr(loop, " += 256:") < eol); /* one vector per step */
  free(s);
  arena_free(z.a);
}

/* CUDA vec: a one-axis reduction takes the widest vector (<= vec) that divides its extent and still
 * gives each lane a whole one (100 = 32 lanes * 3 + 4: width 2); loads at consecutive elements become
 * vector loads. Too short for any vector (50 < 32 * 2): a plain lane loop. */
static void test_vec(void **state) {
  Zoo z = zoo_new();
  k_matvec(&z);
  k_rms(&z, "rms_norm_0", DT_F32);
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CUDA, (Schedule){RS_WARP, 256, 4, 0}, &d);
  assert_non_null(kp);
  Census c = census_of(&kp->kernels[0]);
  assert_int_equal(c.n[KS_VLOAD], 2);
  c = census_of(&kp->kernels[1]);
  assert_int_equal(c.n[KS_VLOAD], 0);
  char *s = printed(kp);
  assert_contains(s, "vec=4");
  assert_contains(s, " = lane*2; ");
  assert_contains(s, " += 64:\n");
  assert_contains(s, ": f32 = vload2 W[i0, r");
  assert_contains(s, ": f32 = vload2 x[r");
  assert_contains(s, "for r0 = lane; r0 < 50; r0 += 32:\n");
  /* CUDA inner loops stay one element per lane (a lane striding over 4 breaks coalescing) */
  assert_contains(s, "for j0 = lane; j0 < 50; j0 += 32:\n");
  free(s);
  arena_free(z.a);
}

/* Two phases over the same extent that do not read each other share one loop; the loop-invariant
 * norm scale is computed once before it. A phase reading an earlier one's result (softmax) does not
 * join it. */
static void test_phase_groups(void **state) {
  Zoo z = zoo_new();
  int x = buf(&z, "x", DT_F32, BUF_INPUT, 1, I(&z, 256), NULL, NULL),
      sc = buf(&z, "s", DT_F32, BUF_INPUT, 1, I(&z, 1), NULL, NULL);
  int w1 = buf(&z, "w1", DT_BF16, BUF_INPUT, 2, I(&z, 12), I(&z, 256), NULL);
  int w2 = buf(&z, "w2", DT_BF16, BUF_INPUT, 2, I(&z, 12), I(&z, 256), NULL);
  int y = buf(&z, "y", DT_F32, BUF_OUTPUT, 1, I(&z, 12), NULL, NULL);
  LKernel *k = kern(&z, "gateup_0", y);
  int i0 = par(k, "i0", I(&z, 12));
  Expr *inv = ex_un(z.P, X_RSQRT, ld(&z, sc, 1, I(&z, 0), NULL, NULL));
  for (int p = 0; p < 2; p++) {
    LPhase *ph = phase(k, RED_ADD, DT_F32);
    int r = red(k, ph, p ? "r1" : "r0", I(&z, 256));
    Expr *xn = bin(&z, X_MUL, ld(&z, x, 1, V(&z, r), NULL, NULL), inv);
    ph->body = bin(&z, X_MUL, xn, ex_cast(z.P, DT_F32, ld(&z, p ? w2 : w1, 2, V(&z, i0), V(&z, r), NULL)));
  }
  set_out(k, 1, V(&z, i0), NULL, NULL, bin(&z, X_MUL, ex_acc(z.P, 0, DT_F32), ex_acc(z.P, 1, DT_F32)));
  k_softmax(&z, "softmax_0", I(&z, 6), I(&z, 256));
  Diag d = {0};
  KProgram *kp = lower(&z, TARGET_CUDA, (Schedule){RS_WARP, 128, 8, 0}, &d);
  assert_non_null(kp);
  Census c = census_of(&kp->kernels[0]);
  assert_int_equal(c.n[KS_FOR], 1);
  assert_int_equal(c.n[KS_VLOAD], 3); /* x once for both phases, w1, w2 */
  assert_int_equal(c.n[KS_WARP_REDUCE], 2);
  c = census_of(&kp->kernels[1]);
  assert_int_equal(c.n[KS_FOR], 3); /* max, sum, store */
  char *s = printed(kp);
  assert_contains(s, "inv: f32 = rsqrt(s[0])\n");
  assert_contains(s, ": bf16 = vload8 w1[i0, r");
  assert_contains(s, ": bf16 = vload8 w2[i0, r");
  assert_contains(s, ": f32 = vload8 x[r");
  free(s);
  StrBuf src = {0};
  assert_true(render_cuda(&src, kp, &d));
  assert_contains(sb_str(&src), "const lt_u4 lt_q = *(const lt_u4 *)(w1 + ");
  assert_contains(sb_str(&src), "lt_bf16_to_f32((unsigned short)(lt_q.w >> 16))");
  sb_free(&src);
  arena_free(z.a);
}

/* A GEMM over a run-time number of rows with bf16 weights gets a tensor-core variant; with f32
 * weights the CUDA-core blocked loop instead (a schedule asking for tensor cores there is refused).
 * Schedule.mma is the number of bf16 parts of A. */
static void mma_variant(int parts) {
  Zoo z = zoo_new();
  Expr *seq = ex_sym(z.P, "seq");
  for (int f32w = 0; f32w < 2; f32w++) {
    int x = buf(&z, "x", DT_F32, BUF_INPUT, 2, seq, I(&z, 64), NULL);
    int w = buf(&z, "w", f32w ? DT_F32 : DT_BF16, BUF_INPUT, 2, I(&z, 96), I(&z, 64), NULL);
    int y = buf(&z, "y", DT_F32, BUF_OUTPUT, 2, seq, I(&z, 96), NULL);
    LKernel *k = kern(&z, f32w ? "gemm_f32" : "gemm_bf16", y);
    int i0 = par(k, "i0", seq), i1 = par(k, "i1", I(&z, 96));
    LPhase *ph = phase(k, RED_ADD, DT_F32);
    int r0 = red(k, ph, "r0", I(&z, 64));
    ph->body = bin(&z, X_MUL, ld(&z, x, 2, V(&z, i0), V(&z, r0), NULL),
                   ex_cast(z.P, DT_F32, ld(&z, w, 2, V(&z, i1), V(&z, r0), NULL)));
    set_out(k, 2, V(&z, i0), V(&z, i1), NULL, ex_acc(z.P, 0, DT_F32));
  }
  Diag d = {0};
  Schedule mma = {RS_WARP, 128, 8, 0, .rows = 8, .row_axis = 0, .mma = parts};
  assert_null(lower(&z, TARGET_CUDA, mma, &d));
  assert_contains(d.msg, "kernel gemm_f32 is not a GEMM: reduction 0 reads no bf16 weight");
  d = (Diag){0};
  Schedule given[2] = {mma, mma};
  given[1].mma = 0;
  KProgram *kp = lower_each(&z, TARGET_CUDA, given, &d);
  assert_non_null(kp);
  assert_non_null(kp->kernels[0].alt);
  assert_string_equal(kp->kernels[0].alt->name, "gemm_bf16_mma");
  assert_int_equal(census_of(kp->kernels[0].alt).n[KS_MMA], 1);
  assert_string_equal(kp->kernels[1].alt->name, "gemm_f32_rows8");
  assert_int_equal(census_of(kp->kernels[1].alt).n[KS_MMA], 0);
  assert_int_equal(census_of(&kp->kernels[0]).n[KS_MMA], 0); /* the decode kernel is the plain one */
  StrBuf src = {0};
  assert_true(render_cuda(&src, kp, &d));
  assert_int_equal(kp->kernels[0].alt->block, 256);
  assert_int_equal(census_of(kp->kernels[0].alt).n[KS_MMA], 1);
  const char *code = sb_str(&src);
  /* the pre-pass writes A as `parts` bf16 planes into the scratch; the GEMM stages k steps of 32 of
   * them (2 ring buffers fit 48 KB with two planes, 3 with one) and multiplies every plane */
  const KKernel *pre = kp->kernels[0].alt->pre;
  assert_non_null(pre);
  assert_string_equal(pre->name, "gemm_bf16_mma_pack");
  assert_non_null(kp->kernels[0].alt->scratch);
  assert_ptr_equal(pre->scratch, kp->kernels[0].alt->scratch);
  assert_contains(code, "gemm_bf16_mma_pack(");
  char *shown = printed(kp); /* --ir kernel shows the pre-pass before the GEMM */
  assert_contains(shown, "after its pre-pass:\nkernel gemm_bf16_mma_pack(");
  assert_contains(shown, parts == 2 ? "pack A into 2 bf16 planes of scratch" : "pack A into 1 bf16 plane of scratch");
  free(shown);
  /* the templates' constants (mma.cuh): planes, k = 64, one weight, bk 32, ring buffers, no split */
  assert_contains(code, parts == 2 ? "lt_mma_pack<2, 64LL, 1024>(" : "lt_mma_pack<1, 64LL, 1024>(");
  assert_contains(code, parts == 2 ? "lt_mma<1, 2, 32, 2, 64LL, " : "lt_mma<1, 1, 32, 3, 64LL, ");
  assert_contains(code, "return w + lt_wi;"); /* the weight's element address */
  sb_free(&src);
  StrBuf c = {0};
  assert_false(render_c(&c, kp, &d)); /* the CPU has no tensor cores */
  sb_free(&c);
  arena_free(z.a);
}

static void test_mma_variant(void **state) {
  (void)state;
  mma_variant(1);
  mma_variant(2);
}

/* A GEMM with few output tiles splits k (Schedule.gemm_fill): the grid holds fill / tiles parts of
 * at least 4 k stages each, at most 8, and the last block of a tile adds them. Without the knob, or
 * with k too short, one block per tile. */
static KProgram *gemm_k_as(Zoo *z, int64_t k_extent, int fill, int library, int parts, int plus_one);
static KProgram *gemm_k(Zoo *z, int64_t k_extent, int fill) { return gemm_k_as(z, k_extent, fill, 0, 2, 0); }
static KProgram *gemm_k_lib(Zoo *z, int64_t k_extent, int fill, int library) {
  return gemm_k_as(z, k_extent, fill, library, 2, 0);
}
/* y = x @ w^T over `parts` bf16 planes of x, then per `epi`: 0 nothing, 1 plus one (an epilogue that is more than
 * a copy), 2 plus r[i0, i1] (a residual of y's layout), 3 plus t[i1, i0] (another layout). */
static KProgram *gemm_k_as(Zoo *z, int64_t k_extent, int fill, int library, int parts, int epi) {
  Expr *seq = ex_sym(z->P, "seq");
  int x = buf(z, "x", DT_F32, BUF_INPUT, 2, seq, I(z, k_extent), NULL);
  int w = buf(z, "w", DT_BF16, BUF_INPUT, 2, I(z, 96), I(z, k_extent), NULL);
  int y = buf(z, "y", DT_F32, BUF_OUTPUT, 2, seq, I(z, 96), NULL);
  int r = epi >= 2 ? buf(z, "r", DT_F32, BUF_INPUT, 2, seq, I(z, 96), NULL) : -1;
  int t = epi == 3 ? buf(z, "t", DT_F32, BUF_INPUT, 2, I(z, 96), seq, NULL) : -1;
  LKernel *k = kern(z, "gemm", y);
  int i0 = par(k, "i0", seq), i1 = par(k, "i1", I(z, 96));
  LPhase *ph = phase(k, RED_ADD, DT_F32);
  int r0 = red(k, ph, "r0", I(z, k_extent));
  ph->body = bin(z, X_MUL, ld(z, x, 2, V(z, i0), V(z, r0), NULL),
                 ex_cast(z->P, DT_F32, ld(z, w, 2, V(z, i1), V(z, r0), NULL)));
  Expr *acc = ex_acc(z->P, 0, DT_F32);
  Expr *v = epi == 1   ? bin(z, X_ADD, acc, ex_const(z->P, DT_F32, 1))
            : epi == 2 ? bin(z, X_ADD, ld(z, r, 2, V(z, i0), V(z, i1), NULL), acc)
            : epi == 3 ? bin(z, X_ADD, ld(z, t, 2, V(z, i1), V(z, i0), NULL), acc)
                       : acc;
  set_out(k, 2, V(z, i0), V(z, i1), NULL, v);
  Diag d = {0};
  KProgram *kp = lower(z, TARGET_CUDA,
                       (Schedule){RS_WARP, 128, 8, 0, .rows = 8, .row_axis = 0, .mma = parts, .gemm_fill = fill,
                                  .gemm_library = library},
                       &d);
  assert_non_null(kp);
  assert_non_null(kp->kernels[0].alt);
  assert_string_equal(kp->kernels[0].alt->name, "gemm_mma");
  return kp;
}

static void test_mma_split_k(void **state) {
  (void)state;
  Zoo z = zoo_new();
  KProgram *kp = gemm_k(&z, 1568, 264); /* 49 stages of 32: up to 8 parts of 7 (the last one empty) */
  const KKernel *g = kp->kernels[0].alt;
  assert_int_equal(g->body->body[0]->mma->split_max, 8);
  assert_int_equal(eval_grid(g, 37), 8);     /* 1 tile, 8 parts */
  assert_int_equal(eval_grid(g, 4096), 256); /* 64 tiles, 264 / 64 = 4 parts */
  assert_int_equal(eval_grid(g, 8448), 264); /* 132 tiles, 2 parts */
  assert_int_equal(eval_grid(g, 8512), 133); /* 133 tiles: one part each */
  /* the scratch: the tile counters, two bf16 planes of A, a partial tile for each of 264 blocks */
  SymEnv env = {0};
  symenv_set(&env, "seq", 37);
  int64_t bytes = 0;
  assert_true(ex_eval_int(g->scratch, &env, &bytes));
  assert_int_equal(bytes, MMA_COUNTERS + 37 * 1568 * 2 * 2 + 264 * 64 * 128 * 4);
  StrBuf src = {0};
  Diag d = {0};
  assert_true(render_cuda(&src, kp, &d));
  const char *code = sb_str(&src);
  assert_contains(code, "lt_mma<1, 2, 32, 2, 1568LL, 96LL, true, 1024>("); /* split k (mma.cuh) */
  char *shown = printed(kp);
  assert_contains(shown, "sum over r0 < 1568 (split over up to 8 blocks) of ");
  free(shown);
  sb_free(&src);
  arena_free(z.a);

  z = zoo_new();
  kp = gemm_k(&z, 1568, 0); /* no fill: one block per tile */
  assert_int_equal(kp->kernels[0].alt->body->body[0]->mma->split_max, 1);
  assert_int_equal(eval_grid(kp->kernels[0].alt, 37), 1);
  src = (StrBuf){0};
  assert_true(render_cuda(&src, kp, &d));
  assert_contains(sb_str(&src), "lt_mma<1, 2, 32, 2, 1568LL, 96LL, false, 1024>("); /* no split, no counter */
  sb_free(&src);
  arena_free(z.a);

  z = zoo_new();
  kp = gemm_k(&z, 224, 264); /* 7 stages: too few to split */
  assert_int_equal(kp->kernels[0].alt->body->body[0]->mma->split_max, 1);
  assert_int_equal(eval_grid(kp->kernels[0].alt, 37), 1);
  arena_free(z.a);
}

/* Schedule.gemm_library: a GEMM over a plain [rows][k] weight also gets a library form (cuBLASLt):
 * the weight's parameter and shape, and an epilogue kernel that reads each sum from the products in
 * the scratch (after the counters and A's planes) at the weight row its column reads. The scratch
 * holds the larger of the split partials and the products. */
static void test_mma_library_form(void **state) {
  (void)state;
  Zoo z = zoo_new();
  KProgram *kp = gemm_k(&z, 1568, 264);
  assert_null(kp->kernels[0].alt->lib); /* not asked for */
  arena_free(z.a);
  z = zoo_new();
  kp = gemm_k_lib(&z, 1568, 264, 1);
  const KKernel *g = kp->kernels[0].alt;
  const KGemmLib *lib = g->lib;
  assert_non_null(lib);
  assert_int_equal(lib->nw, 1);
  assert_int_equal(lib->w_rows[0], 96);
  assert_int_equal(lib->k, 1568);
  assert_int_equal(lib->a_parts, 2);
  assert_int_equal(g->params[lib->w_param[0]].buf, 1); /* w */
  assert_int_equal(lib->direct_out, -1);               /* two planes: the epilogue adds them */
  assert_string_equal(lib->epilogue->name, "gemm_mma_epilogue");
  SymEnv env = {0};
  symenv_set(&env, "seq", 4096);
  int64_t v = 0;
  assert_true(ex_eval_int(lib->epilogue->grid, &env, &v));
  assert_int_equal(v, 4096 * 96 / 256);
  assert_true(ex_eval_int(g->scratch, &env, &v)); /* 264 partial tiles outsize 2 x 4096 x 96 products */
  assert_int_equal(v, MMA_COUNTERS + 4096LL * 1568 * 2 * 2 + 264LL * 64 * 128 * 4);
  symenv_set(&env, "seq", 65536);
  assert_true(ex_eval_int(g->scratch, &env, &v)); /* and the products of both planes outsize them */
  assert_int_equal(v, MMA_COUNTERS + 65536LL * 1568 * 2 * 2 + 2 * 65536LL * 96 * 4);
  StrBuf src = {0};
  Diag d = {0};
  assert_true(render_cuda(&src, kp, &d));
  const char *code = sb_str(&src);
  assert_contains(code, "gemm_mma_epilogue(");
  /* two planes, k = 1568, 96 columns, the product at 0 with 96 rows (the lo plane's M rows below it) */
  assert_contains(code, "lt_mma_epilogue<1, 2, 1568LL, 96LL, 1024, 0LL, 96LL, 0LL, 0LL>(");
  assert_contains(code, "return lt_wi / 1568LL;");
  char *shown = printed(kp);
  assert_contains(
      shown,
      "or, where cuBLASLt loads, after the pre-pass: cuBLASLt products of the A planes with w [96, 1568], then:");
  assert_contains(shown, "each sum read from the products in the scratch");
  free(shown);
  sb_free(&src);
  arena_free(z.a);
}

/* One plane of A and a store of the plain sum into an f32 [seq][columns] output: the library GEMM writes the
 * output itself and no epilogue runs; an epilogue that computes something still runs. */
static void test_mma_library_direct(void **state) {
  (void)state;
  Zoo z = zoo_new();
  KProgram *kp = gemm_k_as(&z, 1568, 264, 1, 1, 0);
  const KKernel *g = kp->kernels[0].alt;
  assert_non_null(g->lib);
  assert_true(g->lib->direct_out >= 0);
  assert_int_equal(g->params[g->lib->direct_out].buf, 2); /* y */
  assert_true(g->params[g->lib->direct_out].is_output);
  assert_int_equal(g->lib->direct_add, -1);
  char *shown = printed(kp);
  assert_contains(shown, "cuBLASLt products of the A planes with w [96, 1568], straight into y (no epilogue)");
  free(shown);
  arena_free(z.a);
  z = zoo_new();
  kp = gemm_k_as(&z, 1568, 264, 1, 1, 1);
  assert_int_equal(kp->kernels[0].alt->lib->direct_out, -1);
  arena_free(z.a);
  /* a residual of the output's layout is added by the GEMM itself (beta = 1); one of another layout is not */
  z = zoo_new();
  kp = gemm_k_as(&z, 1568, 264, 1, 1, 2);
  g = kp->kernels[0].alt;
  assert_true(g->lib->direct_out >= 0 && g->lib->direct_add >= 0);
  assert_int_equal(g->params[g->lib->direct_add].buf, 3); /* r */
  assert_false(g->params[g->lib->direct_add].is_output);
  shown = printed(kp);
  assert_contains(shown, "straight into y, adding r (no epilogue)");
  free(shown);
  arena_free(z.a);
  z = zoo_new();
  kp = gemm_k_as(&z, 1568, 264, 1, 1, 3);
  assert_int_equal(kp->kernels[0].alt->lib->direct_out, -1);
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
  assert_contains(s, "for j0 = thread; j0 < seq; j0 += 128:\n"); /* symbolic extents: no vectors */
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

/* Where libnvrtc is installed, generated CUDA C compiles for sm_90. */
static void nvrtc_compiles(const char *code) {
  if (!nvrtc_available()) return;
  void *cubin = NULL;
  size_t size = 0;
  Diag d = {0};
  if (!nvrtc_compile(code, "sm_90", &cubin, &size, &d)) fail_msg("%s\n---\n%s", d.msg, code);
  free(cubin);
}

/* A row statistic before a GEMM (kl_mma_fuse_row_stat): RMSNorm's sum of squares (`full` = 0: the GEMM reads
 * x * rsqrt(s) itself) or the whole normalized row (`full` = 1: the final norm before an LM head; the GEMM reads
 * only n, so x becomes its parameter) is computed by the GEMM's pre-pass, one block per row, and the statistic's
 * kernel launches nothing under the GEMM's condition. With another reader of the statistic (`extra`) nothing
 * changes. */
static void mma_row_stat(int full, int extra) {
  Zoo z = zoo_new();
  Expr *seq = ex_sym(z.P, "seq");
  int x = buf(&z, "x", DT_F32, BUF_INPUT, 2, seq, I(&z, 64), NULL);
  int w = buf(&z, "w", DT_BF16, BUF_INPUT, 2, I(&z, 96), I(&z, 64), NULL);
  int st = full ? buf(&z, "n", DT_F32, BUF_TEMP, 2, seq, I(&z, 64), NULL)
                : buf(&z, "s", DT_F32, BUF_TEMP, 1, seq, NULL, NULL);
  int y = buf(&z, "y", DT_F32, BUF_OUTPUT, 2, seq, I(&z, 96), NULL);
  Expr *eps = ex_const(z.P, DT_F32, 1e-5);
  LKernel *k0 = kern(&z, "stat", st);
  int a0 = par(k0, "i0", seq);
  LPhase *p0 = phase(k0, RED_ADD, DT_F32);
  int ra = red(k0, p0, "r0", I(&z, 64));
  p0->body = bin(&z, X_MUL, ld(&z, x, 2, V(&z, a0), V(&z, ra), NULL), ld(&z, x, 2, V(&z, a0), V(&z, ra), NULL));
  Expr *inv =
      ex_un(z.P, X_RSQRT, bin(&z, X_ADD, bin(&z, X_DIV, ex_acc(z.P, 0, DT_F32), ex_const(z.P, DT_F32, 64)), eps));
  if (full) {
    int j0 = inner(k0, "j0", I(&z, 64));
    set_out(k0, 2, V(&z, a0), V(&z, j0), NULL, bin(&z, X_MUL, ld(&z, x, 2, V(&z, a0), V(&z, j0), NULL), inv));
  } else {
    set_out(k0, 1, V(&z, a0), NULL, NULL, ex_acc(z.P, 0, DT_F32));
  }
  LKernel *k1 = kern(&z, "gemm", y);
  int i0 = par(k1, "i0", seq), i1 = par(k1, "i1", I(&z, 96));
  LPhase *ph = phase(k1, RED_ADD, DT_F32);
  int r0 = red(k1, ph, "r0", I(&z, 64));
  Expr *a = full
                ? ld(&z, st, 2, V(&z, i0), V(&z, r0), NULL)
                : bin(&z, X_MUL, ld(&z, x, 2, V(&z, i0), V(&z, r0), NULL),
                      ex_un(z.P, X_RSQRT,
                            bin(&z, X_ADD,
                                bin(&z, X_DIV, ld(&z, st, 1, V(&z, i0), NULL, NULL), ex_const(z.P, DT_F32, 64)), eps)));
  ph->body = bin(&z, X_MUL, a, ex_cast(z.P, DT_F32, ld(&z, w, 2, V(&z, i1), V(&z, r0), NULL)));
  set_out(k1, 2, V(&z, i0), V(&z, i1), NULL, ex_acc(z.P, 0, DT_F32));
  if (extra) { /* another reader of the statistic */
    int o = buf(&z, "o", DT_F32, BUF_OUTPUT, 1, seq, NULL, NULL);
    LKernel *k2 = kern(&z, "copy", o);
    int c0 = par(k2, "i0", seq);
    set_out(k2, 1, V(&z, c0), NULL, NULL,
            full ? ld(&z, st, 2, V(&z, c0), I(&z, 0), NULL) : ld(&z, st, 1, V(&z, c0), NULL, NULL));
  }
  Schedule plain = {RS_BLOCK, 128, 1, 0, 1, -1};
  Schedule mma = {RS_WARP, 128, 8, 0, .rows = 8, .row_axis = 0, .mma = 2};
  Schedule given[3] = {plain, mma, plain};
  Diag d = {0};
  KProgram *kp = lower_each(&z, TARGET_CUDA, given, &d);
  if (!kp) fail_msg("%s", d.msg);
  const KKernel *pre = kp->kernels[1].alt->pre;
  assert_non_null(pre);
  StrBuf src = {0};
  assert_true(render_cuda(&src, kp, &d));
  const char *code = sb_str(&src);
  if (extra) {
    assert_null(kp->kernels[0].alt);
    assert_null(pre->body->body[0]->mma->stat_body);
    assert_contains(code, "lt_mma_pack<2, 64LL, 1024>(");
  } else {
    const KKernel *skip = kp->kernels[0].alt;
    assert_non_null(skip);
    assert_true(skip->skip);
    assert_true(skip->tensor_cores); /* not skipped where the GEMM variant cannot run */
    assert_string_equal(skip->by, "gemm_mma_pack");
    assert_ptr_equal(kp->kernels[0].alt_when, kp->kernels[1].alt_when);
    assert_non_null(pre->body->body[0]->mma->stat_body);
    assert_ptr_equal(pre->grid, seq); /* one block per row */
    assert_contains(code, "lt_mma_pack_stat<2, 64LL, 1024, 64LL>(lt_M, lt_scratch, lt_fs, lt_fa);");
    /* the pre-pass reads the statistic's input, so x is a parameter of the GEMM and its pre-pass */
    int has_x = 0;
    for (int i = 0; i < pre->nparams; i++) has_x |= pre->params[i].buf == x;
    assert_true(has_x);
    assert_int_equal(pre->nparams, kp->kernels[1].alt->nparams);
    char *shown = printed(kp);
    assert_contains(shown, "nothing: gemm_mma_pack computes it");
    assert_contains(shown, "first, one block per row: stat = sum over ");
    free(shown);
  }
  nvrtc_compiles(code);
  sb_free(&src);
  arena_free(z.a);
}

static void test_mma_row_stat(void **state) {
  (void)state;
  for (int full = 0; full < 2; full++)
    for (int extra = 0; extra < 2; extra++) mma_row_stat(full, extra);
}

/* Consecutive independent elementwise kernels become one CUDA launch (kernel/merge.c): a and b (one reads x, the
 * other x too, each writing its own buffer, over different extents) merge; c reads what a writes, so it stays;
 * the merged kernel's blocks go to a, then b, each with its own block index; b's slot launches nothing. The CPU
 * keeps every kernel. */
static void test_merge_elementwise(void **state) {
  (void)state;
  for (int cuda = 0; cuda < 2; cuda++) {
    Zoo z = zoo_new();
    Expr *seq = ex_sym(z.P, "seq");
    int x = buf(&z, "x", DT_F32, BUF_INPUT, 1, seq, NULL, NULL);
    int y1 = buf(&z, "y1", DT_F32, BUF_OUTPUT, 1, seq, NULL, NULL);
    int y2 = buf(&z, "y2", DT_F32, BUF_OUTPUT, 2, seq, I(&z, 3), NULL);
    int y3 = buf(&z, "y3", DT_F32, BUF_OUTPUT, 1, seq, NULL, NULL);
    LKernel *a = kern(&z, "a", y1);
    int i = par(a, "i0", seq);
    set_out(a, 1, V(&z, i), NULL, NULL, bin(&z, X_MUL, ld(&z, x, 1, V(&z, i), NULL, NULL), ex_const(z.P, DT_F32, 2)));
    LKernel *b = kern(&z, "b", y2);
    int j = par(b, "i0", seq), c3 = par(b, "i1", I(&z, 3));
    set_out(b, 2, V(&z, j), V(&z, c3), NULL,
            bin(&z, X_ADD, ld(&z, x, 1, V(&z, j), NULL, NULL), ex_cast(z.P, DT_F32, V(&z, c3))));
    LKernel *c = kern(&z, "c", y3);
    int k = par(c, "i0", seq);
    set_out(c, 1, V(&z, k), NULL, NULL, ld(&z, y1, 1, V(&z, k), NULL, NULL));
    Diag d = {0};
    KProgram *kp = lower(&z, cuda ? TARGET_CUDA : TARGET_CPU, (Schedule){RS_SERIAL, cuda ? 256 : 1, 1, !cuda}, &d);
    if (!kp) fail_msg("%s", d.msg);
    if (!cuda) {
      for (int n = 0; n < 3; n++) assert_false(kp->kernels[n].skip);
      assert_string_equal(kp->kernels[0].name, "a");
      arena_free(z.a);
      continue;
    }
    assert_string_equal(kp->kernels[0].name, "a_plus_1");
    assert_true(kp->kernels[1].skip);
    assert_string_equal(kp->kernels[1].by, "a_plus_1");
    assert_false(kp->kernels[2].skip);
    assert_string_equal(kp->kernels[2].name, "c");
    /* its grid is a's blocks and then b's: 1 + 1 at seq = 10 (256 threads per block), 4 + 1 at seq = 1000 */
    assert_int_equal(eval_grid(&kp->kernels[0], 10), 2);
    assert_int_equal(eval_grid(&kp->kernels[0], 1000), 4 + 12);
    assert_int_equal(kp->kernels[0].nparams, 3); /* y1, x, y2: x once */
    StrBuf src = {0};
    assert_true(render_cuda(&src, kp, &d));
    const char *code = sb_str(&src);
    assert_contains(code, "a_plus_1(float *__restrict__ y1, const float *__restrict__ x, float *__restrict__ y2, ");
    assert_null(strstr(code, " b("));
    char *shown = printed(kp);
    assert_contains(shown, "kernel b: nothing: a_plus_1 computes it");
    assert_contains(shown, "  if (seq + 255) // 256 <= block:\n    p: i64 = (block - (seq + 255) // 256)*256 + thread");
    free(shown);
    nvrtc_compiles(code);
    sb_free(&src);
    arena_free(z.a);
  }
}

/* CPU: an elementwise kernel with a run-time axis and a constant last one loops in parallel over the others and has
 * the last axis as its own inner loop (no division by the run-time extent per element); a kernel with a reduction,
 * or with constant extents only, keeps one flat loop over its points. */
static int inner_loops_of(const char *src, const char *name) {
  Diag d = {0};
  Compilation *c = compilation_new(TARGET_CPU, NULL);
  if (!compile_source(c, src, ST_CODE, &d)) fail_msg("%s", d.msg);
  int found = -1;
  for (int i = 0; i < c->kernel->nkernels; i++) {
    const KKernel *kk = &c->kernel->kernels[i];
    if (strncmp(kk->name, name, strlen(name)) || kk->body->nbody < 1) continue;
    const KStmt *loop = kk->body->body[kk->body->nbody - 1];
    assert_true(loop->kind == KS_PARFOR || loop->kind == KS_FOR);
    found = 0;
    for (int j = 0; j < loop->nbody; j++) {
      const KStmt *in = loop->body[j];
      const char *v = in->kind == KS_FOR && in->var >= 0 ? kk->var_names[in->var] : NULL;
      if (v && v[0] == 'q' && ex_is_int_const(in->lo, 0) && in->hi->op == X_CONST) found = (int)in->hi->ival;
    }
  }
  compilation_free(c);
  return found;
}

static void test_cpu_inner_axis_loop(void **state) {
  (void)state;
  assert_int_equal(inner_loops_of("x: f32[seq, 9, 64]; w: f32[64]\ny = x * w", "mul"), 64);
  assert_int_equal(inner_loops_of("x: f32[1, 9, seq, 64]; pos: i32[seq]\ny = rope(x, pos, 10000.0)", "rope"), 64);
  assert_int_equal(inner_loops_of("x: f32[4, 9, 64]; w: f32[64]\ny = x * w", "mul"), 0);
  assert_int_equal(inner_loops_of("x: f32[seq, 64]\ny = sum(x, -1)", "sum"), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_omp),
      cmocka_unit_test(test_cpu_serial_no_parfor),
      cmocka_unit_test(test_cpu_inner_axis_loop),
      cmocka_unit_test(test_cuda_serial),
      cmocka_unit_test(test_cuda_warp),
      cmocka_unit_test(test_cuda_warp_matvec),
      cmocka_unit_test(test_cuda_block),
      cmocka_unit_test(test_cuda_block32),
      cmocka_unit_test(test_vec),
      cmocka_unit_test(test_phase_groups),
      cmocka_unit_test(test_mma_variant),
      cmocka_unit_test(test_mma_row_stat),
      cmocka_unit_test(test_merge_elementwise),
      cmocka_unit_test(test_mma_split_k),
      cmocka_unit_test(test_mma_library_form),
      cmocka_unit_test(test_mma_library_direct),
      cmocka_unit_test(test_unroll_only_even_split),
      cmocka_unit_test(test_symbolic_extents),
      cmocka_unit_test(test_bad_schedules),
      cmocka_unit_test(test_acc_before_phase),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
