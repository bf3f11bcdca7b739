/* The tile stage's decisions: the shape matchers (GEMM, attention) accept and refuse with reasons, and
 * a schedule given from outside is honoured by the kernel stage or refused with a reason. */
#include "testutil.h"
#include <stdio.h>
#include <stdlib.h>
#include "backend/nvrtc.h"
#include "base/settings.h"
#include "driver/pipeline.h"
#include "tile/space.h"

static const char *LINEAR = "x: f32[seq, 64]; w: bf16[96, 64]; y = linear(x, w)";
static const char *ATTN = "q: f32[1,4,seq,16]; k: f32[1,2,seq,16]; v: f32[1,2,seq,16]; y = attention(q, k, v, true)";

static Compilation *loop_of(const char *src) {
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  Diag d = {0};
  if (!compile_source(c, src, ST_LOOP, &d)) fail_msg("%s", d.msg);
  return c;
}

/* the parallel axis of run-time extent (the tokens), as the default schedule blocks it */
static int seq_axis(const LKernel *k) {
  for (int i = 0; i < k->npar; i++)
    if (k->par[i].extent->op != X_CONST) return i;
  return -1;
}

static void gemm_matches(void **state) {
  (void)state;
  Compilation *c = loop_of(LINEAR);
  const LKernel *k = &c->loop->kernels[0];
  GemmMatch m;
  Diag why = {0};
  assert_true(match_gemm(c->loop, k, seq_axis(k), &m, &why));
  assert_int_equal(m.n_total, 96);
  assert_int_equal(m.k_extent, 64);
  assert_int_equal(m.nb, 1);
  assert_true(m.library);
  assert_int_equal(m.b[0]->dtype, DT_BF16);
  compilation_free(c);
  /* gate and up: two weights sharing A */
  c = loop_of("x: f32[seq, 64]; g: bf16[96, 64]; u: bf16[96, 64]; y = silu(linear(x, g)) * linear(x, u)");
  k = &c->loop->kernels[c->loop->nkernels - 1];
  why = (Diag){0};
  assert_true(match_gemm(c->loop, k, seq_axis(k), &m, &why));
  assert_int_equal(m.nb, 2);
  compilation_free(c);
}

static void expect_gemm_refused(const char *src, int kernel, const char *reason) {
  Compilation *c = loop_of(src);
  const LKernel *k = &c->loop->kernels[kernel < 0 ? c->loop->nkernels - 1 : kernel];
  GemmMatch m;
  Diag why = {0};
  assert_false(match_gemm(c->loop, k, seq_axis(k), &m, &why));
  assert_contains(why.msg, reason);
  compilation_free(c);
}

static void gemm_refusals(void **state) {
  (void)state;
  expect_gemm_refused("x: f32[seq, 64]; w: f32[96, 64]; y = linear(x, w)", 0,
                      "linear_0 is not a GEMM: reduction 0 reads no bf16 weight");
  expect_gemm_refused("x: f32[seq, 64]; w: bf16[40, 64]; y = linear(x, w)", 0, "40 columns, not a multiple of 32");
  expect_gemm_refused("x: f32[seq, 40]; w: bf16[96, 40]; y = linear(x, w)", 0, "not over a constant multiple of 16");
  expect_gemm_refused("x: f32[seq, 64]; y = softmax(x, -1)", 0, "has an inner store loop");
  expect_gemm_refused("x: f32[4, 64]; w: bf16[96, 64]; y = linear(x, w)", 0, "no blocked row axis");
}

static void attention_matches(void **state) {
  (void)state;
  Compilation *c = loop_of(ATTN);
  AttnMatch m;
  Diag why = {0};
  const LKernel *pv = &c->loop->kernels[2];
  assert_true(match_attention(c->loop, 2, seq_axis(pv), 0, &m, &why));
  assert_int_equal(m.scores_kernel, 0);
  assert_int_equal(m.softmax_kernel, 1);
  assert_int_equal(m.d_extent, 16);
  assert_int_equal(m.groups, 4);
  assert_int_equal(m.width, 16);
  assert_int_equal(m.m_var, pv->par[seq_axis(pv)].var);
  assert_string_equal(m.new_names[0], "d");
  /* flash-decoding of the same rows, and of a decode step's one query row */
  why = (Diag){0};
  assert_true(match_attention(c->loop, 2, seq_axis(pv), 1, &m, &why));
  assert_true(m.decode);
  compilation_free(c);
  c = loop_of("q: f32[1,4,1,16]; k: f32[1,2,n,16]; v: f32[1,2,n,16]; y = attention(q, k, v, false)");
  why = (Diag){0};
  if (!match_attention(c->loop, 2, -1, 1, &m, &why)) fail_msg("%s", why.msg);
  assert_int_equal(m.m_var, -1);
  /* unblocked, flash-decoding takes the one run-time column axis as its query rows (one per block) */
  compilation_free(c);
  c = loop_of(ATTN);
  why = (Diag){0};
  pv = &c->loop->kernels[2];
  if (!match_attention(c->loop, 2, -1, 1, &m, &why)) fail_msg("%s", why.msg);
  assert_int_equal(m.m_var, pv->par[seq_axis(pv)].var);
  /* but not two of them */
  compilation_free(c);
  c = loop_of("q: f32[b,4,s,16]; k: f32[b,2,n,16]; v: f32[b,2,n,16]; y = attention(q, k, v, false)");
  why = (Diag){0};
  assert_false(match_attention(c->loop, 2, -1, 1, &m, &why));
  assert_contains(why.msg, "more than one run-time column axis");
  compilation_free(c);
}

static void expect_attention_refused(const char *src, int kernel, int decode, const char *reason) {
  Compilation *c = loop_of(src);
  int ki = kernel < 0 ? c->loop->nkernels - 1 : kernel;
  AttnMatch m;
  Diag why = {0};
  assert_false(match_attention(c->loop, ki, seq_axis(&c->loop->kernels[ki]), decode, &m, &why));
  assert_contains(why.msg, reason);
  compilation_free(c);
}

static void attention_refusals(void **state) {
  (void)state;
  /* P is an input, not the softmax's temporary */
  expect_attention_refused("p: f32[1,4,seq,seq]; v: f32[1,4,seq,16]; y = matmul(p, v)", 0, 0,
                           "matmul_0 is not P x V: P (p) is not a temporary only it reads");
  /* a linear is not P x V */
  expect_attention_refused(LINEAR, 0, 0, "linear_0 is not P x V: P (x) is not a temporary only it reads");
  expect_attention_refused("x: bf16[seq, 64]; w: bf16[96, 64]; y = linear(x, w)", 0, 1,
                           "neither factor is an f32 buffer read with the summed axis last");
  /* a head dimension of 24: no tensor cores (multiple of 16), but flash-decoding takes it */
  const char *d24 = "q: f32[1,4,seq,24]; k: f32[1,2,seq,24]; v: f32[1,2,seq,24]; y = attention(q, k, v, true)";
  expect_attention_refused(d24, 2, 0, "the dot product's length is not a constant of at most 128 and a multiple of 16");
  Compilation *c = loop_of(d24);
  AttnMatch m;
  Diag why = {0};
  assert_true(match_attention(c->loop, 2, seq_axis(&c->loop->kernels[2]), 1, &m, &why));
  compilation_free(c);
  /* the scores used by a second output: not a temporary only the softmax reads */
  expect_attention_refused("q: f32[1,4,seq,16]; k: f32[1,4,seq,16]; v: f32[1,4,seq,16]\n"
                           "s = matmul(q, transpose(k, 2, 3)); p = softmax(s, -1)\nreturn matmul(p, v), s",
                           -1, 1, "not a temporary");
}

/* ---- schedules from outside ---- */

static Schedule *defaults(const Compilation *c, const TargetDesc *dev) {
  Schedule *s = calloc((size_t)c->loop->nkernels, sizeof *s);
  for (int i = 0; i < c->loop->nkernels; i++) s[i] = schedule_default(c->loop, &c->loop->kernels[i], dev);
  return s;
}

static void expect_rejected(const char *src, int kernel, Schedule (*edit)(Schedule), const char *device,
                            const char *reason) {
  Compilation *c = loop_of(src);
  TargetDesc dev;
  assert_true(target_builtin(device, &dev));
  Schedule *s = defaults(c, &dev);
  int ki = kernel < 0 ? c->loop->nkernels - 1 : kernel;
  s[ki] = edit(s[ki]);
  Diag d = {0};
  assert_false(schedule_check(c->loop, &c->loop->kernels[ki], &dev, &s[ki], &d));
  assert_contains(d.msg, reason);
  d = (Diag){0};
  assert_null(tile_from_schedules(c->loop, &dev, NULL, MM_HIGH, s, &d));
  assert_contains(d.msg, reason);
  free(s);
  compilation_free(c);
}

static Schedule gemm_on(Schedule s) {
  s.rows = 8;
  s.row_axis = 0;
  s.mma = 2;
  return s;
}
static Schedule flash_on(Schedule s) {
  s.rows = 8;
  s.row_axis = 0;
  s.mma = 0;
  s.flash = 2;
  return s;
}
static Schedule decode_on(Schedule s) {
  s.flash_decode = 1;
  s.decode_fill = 264;
  return s;
}
static Schedule vec3(Schedule s) {
  s.vec = 3;
  return s;
}
static Schedule threads2048(Schedule s) {
  s.red = RS_BLOCK;
  s.block_threads = 2048;
  return s;
}
static Schedule gemm_unblocked(Schedule s) {
  s.rows = 1;
  s.mma = 2;
  return s;
}

static void illegal_schedules_rejected(void **state) {
  (void)state;
  /* a tensor-core GEMM on a kernel that is not one (a softmax's sums; a linear of f32 weights) */
  expect_rejected("x: f32[seq, 64]; y = softmax(x, -1)", 0, gemm_on, "h200", "kernel softmax_0 is not a GEMM");
  expect_rejected("x: f32[seq, 64]; w: f32[96, 64]; y = linear(x, w)", 0, gemm_on, "h200", "reads no bf16 weight");
  /* flash attention, or flash-decoding, on a kernel that is not an attention's P x V */
  expect_rejected(LINEAR, 0, flash_on, "h200", "kernel linear_0 is not P x V");
  expect_rejected("x: f32[seq, 64]; y = softmax(x, -1)", 0, decode_on, "h200", "kernel softmax_0 is not P x V");
  /* a vector width that does not divide the widest vector */
  expect_rejected(LINEAR, 0, vec3, "h200", "kernel linear_0: vector width 3 does not divide 8");
  /* more threads than the device allows */
  expect_rejected(LINEAR, 0, threads2048, "h200", "2048 threads per block, more than h200 allows (1024)");
  /* tensor cores on a device without bf16 mma, or without register blocking */
  expect_rejected(LINEAR, 0, gemm_on, "t4", "a tensor-core GEMM asked, but t4 (sm_75) has no bf16 mma");
  expect_rejected(LINEAR, 0, gemm_unblocked, "h200", "needs rows > 1");
}

/* A legal schedule from outside is what the kernel stage builds: the linear's variant on CUDA cores
 * (mma off) instead of the default GEMM, with 512 threads per block for the decode kernel, and the
 * attention's P x V without flash attention (its scores and softmax then keep their kernels in
 * prefill). */
static void legal_schedules_honoured(void **state) {
  (void)state;
  Compilation *c = loop_of(LINEAR);
  TargetDesc dev = target_default(TARGET_CUDA);
  Schedule *s = defaults(c, &dev);
  assert_int_equal(s[0].mma, 2); /* the default: a tensor-core GEMM */
  s[0].mma = 0;
  s[0].red = RS_BLOCK;
  s[0].block_threads = 512;
  Diag d = {0};
  assert_true(schedule_check(c->loop, &c->loop->kernels[0], &dev, &s[0], &d));
  TileProgram *tp = tile_from_schedules(c->loop, &dev, NULL, MM_HIGH, s, &d);
  assert_non_null(tp);
  assert_int_equal(tp->kernels[0].c.variant, KIND_ROWS);
  KProgram *kp = kernel_from_tile(tp, &d);
  assert_non_null(kp);
  assert_int_equal(kp->kernels[0].block, 512);
  assert_string_equal(kp->kernels[0].alt->name, "linear_0_rows8");
  free(s);
  compilation_free(c);

  c = loop_of(ATTN);
  s = defaults(c, &dev);
  assert_int_equal(s[2].flash, 2);
  s[2].flash = 0;
  d = (Diag){0};
  tp = tile_from_schedules(c->loop, &dev, NULL, MM_HIGH, s, &d);
  assert_non_null(tp);
  assert_int_equal(tp->kernels[2].c.self, KIND_FLASH_DECODE);
  assert_int_equal(tp->kernels[2].c.variant, KIND_ROWS);
  assert_int_equal(tp->kernels[0].c.by, 2);
  assert_true(tp->kernels[0].c.by_decode);
  assert_false(tp->kernels[0].c.by_prefill);
  kp = kernel_from_tile(tp, &d);
  assert_non_null(kp);
  assert_string_equal(kp->kernels[2].alt->name, "attention_2_rows8");
  assert_true(kp->kernels[0].skip);    /* decode: flash-decoding computes the scores */
  assert_non_null(kp->kernels[0].alt); /* prefill: the scores kernel's own blocked variant runs */
  assert_false(kp->kernels[0].alt->skip);
  StrBuf b = {0};
  tile_print(&b, tp);
  assert_contains(sb_str(&b), "kernel attention_2: ");
  assert_contains(sb_str(&b), "=> flash-decoding + variant rows");
  assert_contains(sb_str(&b), "(computed by attention_2 in decode)");
  sb_free(&b);
  free(s);
  compilation_free(c);
}

/* The tile stage records and prints what each nest becomes; the defaults ask for tensor cores and
 * flash only where the matchers accept. */
static void default_choices_printed(void **state) {
  (void)state;
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  Diag d = {0};
  assert_true(compile_source(c, ATTN, ST_TILE, &d));
  StrBuf b = {0};
  print_stage(&b, c, ST_TILE);
  assert_contains(sb_str(&b), "=> flash-decoding + variant flash-attention");
  assert_contains(sb_str(&b), "kernel attention_0: ");
  assert_contains(sb_str(&b), "=> skip (computed by attention_2 in decode and prefill)");
  assert_null(strstr(sb_str(&b), "mma=bf16")); /* no GEMM here, so no tensor-core GEMM asked */
  sb_free(&b);
  compilation_free(c);
  c = compilation_new(TARGET_CUDA, NULL);
  assert_true(compile_source(c, LINEAR, ST_TILE, &d));
  print_stage(&b, c, ST_TILE);
  assert_contains(sb_str(&b), "mma=bf16x2 split-k-fill=264 or-cublaslt");
  assert_contains(sb_str(&b), "=> loop + variant gemm|cublaslt");
  sb_free(&b);
  compilation_free(c);
}

/* The CUDA default of kernel 0 of src (on the H200 description), and its code compiled by NVRTC. */
static Schedule cuda_default(const char *src) {
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  Diag d = {0};
  if (!compile_source(c, src, ST_CODE, &d)) fail_msg("%s: %s", src, d.msg);
  Schedule s = c->tile->kernels[0].s;
  if (nvrtc_available()) {
    void *cubin = NULL;
    size_t size = 0;
    if (!nvrtc_compile(sb_str(&c->code), "sm_90", &cubin, &size, &d)) fail_msg("%s: %s", src, d.msg);
    free(cubin);
  }
  compilation_free(c);
  return s;
}

/* Long-row normalizations whose rows do not fit in L2 together take a block per row, enough threads that the rows
 * in flight fit in half of it (the H200: 132 SMs x 2048 threads, 50 MB): RMSNorm rows of 16 KB 256 threads
 * (1,056 rows, 17 MB), LayerNorm's of 32 KB 512, softmax's of 128 KB the most, 1024. Smaller ones, other kernels
 * and LATHE_ROWS_IN_L2=0 keep the earlier choice. */
static void rows_in_l2_default(void **state) {
  (void)state;
  static const char *RMS = "x: f32[32,4096,4096]; w: f32[4096]; y = rms_norm(x, w, 1e-6)";
  static const char *LN = "x: f32[8192,8192]; w: f32[8192]; b: f32[8192]; y = layer_norm(x, w, b, 1e-5)";
  static const char *SM = "x: f32[4096,32000]; y = softmax(x, -1)";
  Schedule s = cuda_default(RMS);
  assert_int_equal(s.red, RS_BLOCK);
  assert_int_equal(s.block_threads, 256);
  s = cuda_default(LN);
  assert_int_equal(s.red, RS_BLOCK);
  assert_int_equal(s.block_threads, 512);
  s = cuda_default(SM);
  assert_int_equal(s.red, RS_BLOCK);
  assert_int_equal(s.block_threads, 1024);
  /* rows that fit in L2 together (4 MB), and a constant-shape matrix product (not a normalization: its row is
   * not written back) keep what they had */
  static const char *SMALL = "x: f32[256,4096]; w: f32[4096]; y = rms_norm(x, w, 1e-6)";
  static const char *MATMUL = "x: f32[8192, 4096]; w: f32[1024, 4096]; y = linear(x, w)";
  Schedule small = cuda_default(SMALL), matmul = cuda_default(MATMUL);
  assert_int_equal(matmul.red, RS_WARP);
  setting_set(SET_ROWS_IN_L2, "0");
  s = cuda_default(SMALL);
  assert_true(s.red == small.red && s.block_threads == small.block_threads);
  s = cuda_default(MATMUL);
  assert_true(s.red == matmul.red && s.block_threads == matmul.block_threads);
  s = cuda_default(RMS);
  assert_int_equal(s.red, RS_WARP);
  assert_int_equal(s.block_threads, 128);
  s = cuda_default(SM);
  assert_int_equal(s.block_threads, 64);
  setting_set(SET_ROWS_IN_L2, NULL);
}

/* LATHE_STORE_VEC=4: the normalizations' defaults write their rows as 16-byte vectors (an A/B without tuning);
 * other kernels and the setting's absence keep one element a step, and a value that is no width is ignored. */
static void store_vec_setting(void **state) {
  (void)state;
  static const char *RMS = "x: f32[32,4096,4096]; w: f32[4096]; y = rms_norm(x, w, 1e-6)";
  static const char *SM = "x: f32[4096,32000]; y = softmax(x, -1)";
  static const char *MATMUL = "x: f32[8192, 4096]; w: f32[1024, 4096]; y = linear(x, w)";
  assert_int_equal(cuda_default(RMS).store_vec, 0);
  setting_set(SET_STORE_VEC, "4");
  assert_int_equal(cuda_default(RMS).store_vec, 4);
  assert_int_equal(cuda_default(SM).store_vec, 4);
  assert_int_equal(cuda_default(MATMUL).store_vec, 0);
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  Diag d = {0};
  if (!compile_source(c, RMS, ST_CODE, &d)) fail_msg("%s", d.msg);
  assert_non_null(strstr(sb_str(&c->code), "*(lt_u4 *)(y + "));
  compilation_free(c);
  setting_set(SET_STORE_VEC, "3");
  assert_int_equal(cuda_default(RMS).store_vec, 0);
  setting_set(SET_STORE_VEC, NULL);
}

/* Output rows a warp in a decode GEMV (Schedule.gemv_rows): the fewest that give a lane's step 16 bytes of
 * quantized weights, halved while fewer than 8 warps would run on each multiprocessor; one for bf16 weights and
 * for a block per row (few rows); LATHE_GEMV_ROWS forces it wherever a warp computes a row. */
static void gemv_rows_default(void **state) {
  (void)state;
  assert_int_equal(cuda_default("x: f32[1,4096]; w: q4_0[12288,4096]; y = linear(x, w)").gemv_rows, 4);
  assert_int_equal(cuda_default("x: f32[1,4096]; w: q6_k[12288,4096]; y = linear(x, w)").gemv_rows, 4);
  assert_int_equal(cuda_default("x: f32[1,4096]; w: q8_0[12288,4096]; y = linear(x, w)").gemv_rows, 2);
  assert_int_equal(cuda_default("x: f32[1,4096]; w: bf16[12288,4096]; y = linear(x, w)").gemv_rows, 0);
  /* the fewest rows with a warp each (4224 = 32 a multiprocessor) still give 8 warps a multiprocessor at 4 a warp */
  assert_int_equal(cuda_default("x: f32[1,4096]; w: q4_0[4224,4096]; y = linear(x, w)").gemv_rows, 4);
  /* gate and up read 9 bytes of q4_0 a step together */
  assert_int_equal(
      cuda_default("x: f32[1,4096]; g: q4_0[12288,4096]; u: q4_0[12288,4096]; y = silu(linear(x, g)) * linear(x, u)")
          .gemv_rows,
      2);
  Schedule few = cuda_default("x: f32[1,4096]; w: q4_0[2048,4096]; y = linear(x, w)");
  assert_int_equal(few.red, RS_BLOCK);
  assert_int_equal(few.gemv_rows, 0);
  setting_set(SET_GEMV_ROWS, "8");
  assert_int_equal(cuda_default("x: f32[1,4096]; w: bf16[12288,4096]; y = linear(x, w)").gemv_rows, 8);
  assert_int_equal(cuda_default("x: f32[1,4096]; w: q4_0[2048,4096]; y = linear(x, w)").gemv_rows, 0);
  setting_set(SET_GEMV_ROWS, "1");
  assert_int_equal(cuda_default("x: f32[1,4096]; w: q4_0[12288,4096]; y = linear(x, w)").gemv_rows, 0);
  setting_set(SET_GEMV_ROWS, NULL);
  /* the tile stage prints it (where the loop nest runs: not the quantized GEMV), and a schedule asking for it where
   * a block computes a row is refused */
  setting_set(SET_QUANT_GEMV, "0");
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  Diag d = {0};
  if (!compile_source(c, "x: f32[1,4096]; w: q4_0[12288,4096]; y = linear(x, w)", ST_TILE, &d)) fail_msg("%s", d.msg);
  setting_set(SET_QUANT_GEMV, NULL);
  StrBuf b = {0};
  tile_print(&b, c->tile);
  assert_non_null(strstr(sb_str(&b), " gemv-rows=4(i1)"));
  sb_free(&b);
  Schedule s = c->tile->kernels[0].s;
  s.red = RS_BLOCK;
  d = (Diag){0};
  assert_false(schedule_check(c->loop, c->tile->kernels[0].k, &c->device, &s, &d));
  assert_non_null(strstr(d.msg, "output rows a warp"));
  compilation_free(c);
}

/* The quantized GEMV (Schedule.qgemv, LATHE_QUANT_GEMV=1) where sums over quantized weights are a GEMM's: the fewest
 * warps a block (16 columns), at most 8, that give 16 warps a multiprocessor (132 on the H200: 2,112 warps), at most
 * the steps of 256 elements of k, for a decode step's rows and for one row of fixed extent; none for bf16 weights, for
 * sums that are no GEMM's, or by default; the tile stage prints it, its text round-trips, and a schedule asking for it
 * where it does not apply (or on a device without int8 mma) is refused. */
static void qgemv_default(void **state) {
  (void)state;
  setting_set(SET_QUANT_GEMV, "1");
  assert_int_equal(cuda_default("x: f32[seq,4096]; w: q4_k[12288,4096]; y = linear(x, w)").qgemv, 4);
  assert_int_equal(cuda_default("x: f32[seq,4096]; w: q4_k[4096,4096]; y = linear(x, w)").qgemv, 8);
  assert_int_equal(cuda_default("x: f32[seq,2048]; w: q8_0[2048,2048]; y = linear(x, w)").qgemv, 8); /* 8 steps */
  assert_int_equal(cuda_default("x: f32[seq,2048]; w: q6_k[512,2048]; y = linear(x, w)").qgemv, 8);
  assert_int_equal(cuda_default("x: f32[1,2048]; w: q6_k[128256,2048]; y = linear(x, w)").qgemv, 1);
  assert_int_equal(cuda_default("x: f32[seq,4096]; w: bf16[12288,4096]; y = linear(x, w)").qgemv, 0);
  assert_int_equal(cuda_default("x: f32[seq,4096]; w: q4_k[20,4096]; y = linear(x, w)").qgemv, 0); /* 20 columns */
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  Diag d = {0};
  if (!compile_source(c, "x: f32[seq,4096]; w: q4_k[12288,4096]; y = linear(x, w)", ST_TILE, &d)) fail_msg("%s", d.msg);
  setting_set(SET_QUANT_GEMV, NULL);
  assert_int_equal(cuda_default("x: f32[seq,4096]; w: q4_k[12288,4096]; y = linear(x, w)").qgemv, 0);
  StrBuf b = {0};
  tile_print(&b, c->tile);
  assert_non_null(strstr(sb_str(&b), " qgemv=4 => qgemv + variant gemm"));
  sb_free(&b);
  Schedule s = c->tile->kernels[0].s, back;
  schedule_format(&b, &s);
  assert_non_null(strstr(sb_str(&b), " qgemv=4"));
  assert_true(schedule_parse(sb_str(&b), &back, &d));
  assert_true(schedule_equal(&s, &back));
  sb_free(&b);
  s.qgemv = 3;
  d = (Diag){0};
  assert_false(schedule_check(c->loop, c->tile->kernels[0].k, &c->device, &s, &d));
  assert_non_null(strstr(d.msg, "1, 2, 4, 8 or 16 warps"));
  TargetDesc turing = c->device;
  turing.cc_major = 7, turing.cc_minor = 5;
  s.qgemv = 4, s.mma = 0;
  d = (Diag){0};
  assert_false(schedule_check(c->loop, c->tile->kernels[0].k, &turing, &s, &d));
  assert_non_null(strstr(d.msg, "needs int8 mma (sm_80"));
  compilation_free(c);
  c = compilation_new(TARGET_CUDA, NULL);
  if (!compile_source(c, "x: f32[seq,4096]; w: bf16[12288,4096]; y = linear(x, w)", ST_TILE, &d)) fail_msg("%s", d.msg);
  s = c->tile->kernels[0].s;
  s.qgemv = 4;
  d = (Diag){0};
  assert_false(schedule_check(c->loop, c->tile->kernels[0].k, &c->device, &s, &d));
  assert_non_null(strstr(d.msg, "needs quantized weights"));
  compilation_free(c);
}

/* A block fill (Schedule.block_fill): at most that many blocks, each walking the rows that far apart with a
 * barrier between rows; the tile stage prints it, NVRTC compiles it, and it is refused without a block per row. */
static void block_fill_walks_rows(void **state) {
  (void)state;
  static const char *RMS = "x: f32[4096,4096]; w: f32[4096]; y = rms_norm(x, w, 1e-6)";
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  Diag d = {0};
  if (!compile_source(c, RMS, ST_TILE, &d)) fail_msg("%s", d.msg);
  Schedule s = c->tile->kernels[0].s;
  s.red = RS_BLOCK, s.block_threads = 256, s.block_fill = 264;
  if (!compile_schedules(c, &s, ST_CODE, &d)) fail_msg("%s", d.msg);
  const char *code = sb_str(&c->code);
  if (getenv("SHOW_CODE")) puts(code);
  const char *walk = strstr(code, " = ((i64)blockIdx.x); p");
  assert_non_null(walk);
  assert_non_null(strstr(walk, " < 4096; p"));
  assert_non_null(strstr(walk, " += 264) {"));
  assert_non_null(strstr(code, "__syncthreads();\n  }\n}"));
  assert_int_equal(c->kernel->kernels[0].grid->op, X_CONST); /* min(4096, 264), folded */
  assert_int_equal(c->kernel->kernels[0].grid->ival, 264);
  StrBuf b = {0};
  print_stage(&b, c, ST_TILE);
  assert_contains(sb_str(&b), "grid(min(4096, 264)) walking every 264-th");
  sb_free(&b);
  if (nvrtc_available()) {
    void *cubin = NULL;
    size_t size = 0;
    if (!nvrtc_compile(code, "sm_90", &cubin, &size, &d)) fail_msg("%s", d.msg);
    free(cubin);
  }
  s.red = RS_WARP, s.block_threads = 128;
  d = (Diag){0};
  assert_false(compile_schedules(c, &s, ST_CODE, &d));
  assert_contains(d.msg, "a block fill (264) needs a CUDA block per point (red=block)");
  compilation_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gemm_matches),
      cmocka_unit_test(gemm_refusals),
      cmocka_unit_test(attention_matches),
      cmocka_unit_test(attention_refusals),
      cmocka_unit_test(illegal_schedules_rejected),
      cmocka_unit_test(legal_schedules_honoured),
      cmocka_unit_test(default_choices_printed),
      cmocka_unit_test(rows_in_l2_default),
      cmocka_unit_test(store_vec_setting),
      cmocka_unit_test(block_fill_walks_rows),
      cmocka_unit_test(gemv_rows_default),
      cmocka_unit_test(qgemv_default),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
