/* Fusion tests: how many kernels each pattern becomes, and that the choice is the policy's. */
#include <stdio.h>
#include <stdlib.h>
#include "testutil.h"
#include "driver/pipeline.h"
#include "model/arch/arch.h"
#include "model/presets.h"

static int count_kernels(const char *src, const FusionPolicy *pol, Target t) {
  Diag d = {0};
  Compilation *c = compilation_new(t, pol);
  if (!compile_source(c, src, ST_CODE, &d)) fail_msg("compile failed: %s\n%s", d.msg, src);
  int n = c->loop->nkernels, distinct = 0;
  for (int i = 0; i < c->kernel->nkernels; i++) {
    const KKernel *kk = &c->kernel->kernels[i];
    distinct += kk->code_name == NULL && !kk->skip; /* flash-decoding's scores and softmax: no code */
    distinct += kk->alt && !kk->alt->skip && kk->alt->code_name == NULL;    /* a register-blocked variant */
    distinct += kk->alt && kk->alt->pre && kk->alt->pre->code_name == NULL; /* its tensor-core pre-pass */
  }
  /* The code stage has exactly one entry point per distinct kernel or variant. */
  const char *code = sb_str(&c->code), *needle = t == TARGET_CUDA ? "__global__" : "(void *const *lt_bufs";
  int found = 0;
  for (const char *p = code; (p = strstr(p, needle)); p++) found++;
  assert_int_equal(found, distinct);
  compilation_free(c);
  return n;
}

static int kernels(const char *src) {
  FusionPolicy p = fusion_policy_default();
  int cpu = count_kernels(src, &p, TARGET_CPU);
  assert_int_equal(count_kernels(src, &p, TARGET_CUDA), cpu);
  return cpu;
}

static void rms_norm_is_one_kernel(void **s) {
  assert_int_equal(kernels("x: f32[1,32,2048]; w: f32[2048]; y = rms_norm(x, w, 1e-6)"), 1);
}
static void layer_norm_is_one_kernel(void **s) {
  assert_int_equal(kernels("x: f16[4,1000]; w: f16[1000]; b: f16[1000]; y = layer_norm(x, w, b, 1e-5)"), 1);
}
static void softmax_is_one_kernel(void **s) {
  assert_int_equal(kernels("x: f32[8,4097]; y = softmax(x, -1)"), 1);
  assert_int_equal(kernels("x: f32[8,seq]; y = softmax(x, 0)"), 1);
}
static void elementwise_chain_is_one_kernel(void **s) {
  assert_int_equal(kernels("a: f32[64,64]; b: f32[64]; y = gelu(exp(a) * b + 1) / 3 - sigmoid(a)"), 1);
}
static void linear_epilogues_fuse(void **s) {
  assert_int_equal(kernels("x: f32[4,256]; w: f32[512,256]; b: f32[512]; y = silu(linear(x, w, b))"), 1);
  assert_int_equal(kernels("x: f32[4,256]; r: f32[4,512]; w: f32[512,256]; y = r + linear(x, w)"), 1);
  assert_int_equal(
      kernels("x: f32[1,256]; wg: f32[512,256]; wu: f32[512,256]; y = silu(linear(x, wg)) * linear(x, wu)"), 1);
}
static void norm_prologue_is_a_policy_choice(void **s) {
  const char *src = "x: f32[2,256]; nw: f32[256]; w: f32[128,256]; y = linear(rms_norm(x, nw, 1e-6), w)";
  FusionPolicy p = fusion_policy_default();
  assert_int_equal(count_kernels(src, &p, TARGET_CPU), 2); /* the row sum is realized, then the prologue */
  p.allow_recompute = 1;
  assert_int_equal(count_kernels(src, &p, TARGET_CPU), 1);
  assert_int_equal(count_kernels(src, &p, TARGET_CUDA), 1);
  p.fuse_reductions = 0; /* sum, contraction, and the view that drops the contraction's unit axis */
  p.allow_recompute = 0;
  assert_int_equal(count_kernels(src, &p, TARGET_CPU), 3);
}
static void attention_is_three_kernels(void **s) {
  /* scores (QK^T, scale, mask), softmax, and the weighted sum of V */
  assert_int_equal(kernels("q: f32[1,4,3,16]; k: f32[1,2,seq,16]; v: f32[1,2,seq,16]; y = attention(q, k, v, true)"),
                   3);
}

static void no_fuse_cuts_reductions(void **s) {
  FusionPolicy p = fusion_policy_default();
  p.fuse_reductions = 0;
  /* max, exp(x - max) (read by two kernels, so stored once), sum, and the division */
  assert_int_equal(count_kernels("x: f32[4,64]; y = softmax(x, -1)", &p, TARGET_CPU), 4);
}
static void shared_reduction_is_computed_once(void **s) {
  /* h feeds two consumers and contains a reduction: it gets a buffer instead of being recomputed. */
  assert_int_equal(kernels("x: f32[4,64]; w: f32[64,64]; h = x + linear(x, w); return h * 2, h + 1"), 3);
}
static void slices_of_one_projection_fuse(void **s) {
  /* Gate and up as one projection over stacked weights: its two slices are read by one product, which is the
   * kernel (the projection is not stored for it), and the down projection another. */
  assert_int_equal(kernels("x: f32[1,64]; w: f32[192,64]; wd: f32[64,96]; y = linear(x, w); "
                           "g = slice(y, axis=1, start=0, end=96); u = slice(y, axis=1, start=96, end=192); "
                           "o = linear(silu(g) * u, wd)"),
                   2);
  /* read by two kernels (the projection's slices also leave as outputs), it is stored once */
  assert_int_equal(kernels("x: f32[1,64]; w: f32[192,64]; wd: f32[64,96]; y = linear(x, w); "
                           "g = slice(y, axis=1, start=0, end=96); u = slice(y, axis=1, start=96, end=192); "
                           "o = linear(silu(g) * u, wd); return o, g + 1"),
                   4);
}
static void costly_prologue_is_not_recomputed(void **s) {
  /* exp(x) feeding a linear would be recomputed for every output column, so it is stored; the policy
   * knob allows inlining it. */
  const char *src = "x: f32[1,64]; w: f32[96,64]; y = linear(exp(x), w)";
  FusionPolicy p = fusion_policy_default();
  assert_int_equal(count_kernels(src, &p, TARGET_CPU), 2);
  p.inline_costly_prologue = 1;
  assert_int_equal(count_kernels(src, &p, TARGET_CPU), 1);
  /* A gated MLP: gate and up projections and silu(gate) * up in one kernel, the down projection in
   * another (it cannot hold the others: that would nest reductions). */
  assert_int_equal(kernels("x: f32[1,64]; wg: f32[96,64]; wu: f32[96,64]; wd: f32[64,96]; "
                           "y = linear(silu(linear(x, wg)) * linear(x, wu), wd)"),
                   2);
  /* a residual stream read by several kernels is stored, not re-summed from its sources */
  FusionPolicy q = fusion_policy_default();
  assert_int_equal(count_kernels("a: f32[4,8]; b: f32[4,8]; c: f32[4,8]; h = a + b + c; return h * 2, h + 1, exp(h)",
                                 &q, TARGET_CPU),
                   4);
}

static void identical_layers_share_code(void **s) {
  /* two layers with the same shapes: one function per distinct kernel, launched twice */
  const char *src = "x: f32[4,64]; w1: f32[64,64]; w2: f32[64,64]; n1: f32[64]; n2: f32[64]\n"
                    "h = x + linear(rms_norm(x, n1, 1e-6), w1)\n"
                    "y = h + linear(rms_norm(h, n2, 1e-6), w2)";
  Diag d = {0};
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  assert_true(compile_source(c, src, ST_CODE, &d));
  int distinct = 0;
  for (int i = 0; i < c->kernel->nkernels; i++) distinct += c->kernel->kernels[i].code_name == NULL;
  assert_true(c->kernel->nkernels >= 4);
  assert_int_equal(distinct * 2, c->kernel->nkernels);
  compilation_free(c);
}

/* Where attention stays on CUDA cores (--matmul-precision highest: no flash attention), the blocked
 * (prefill) variants of its scores and P x V run one thread per point: short reductions, or loads
 * coalesced along the innermost axis. A linear with f32 weights over a long row (each output column
 * streams its own weight row) keeps a warp per point. */
static void attention_prefill_variants_are_serial(void **s) {
  const char *src = "q: f32[1,4,seq,16]; k: f32[1,2,seq,16]; v: f32[1,2,seq,16]; x: f32[1,seq,512]; w: f32[96,512]\n"
                    "return attention(q, k, v, true), linear(x, w)";
  Diag d = {0};
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  c->matmul = MM_HIGHEST;
  if (!compile_source(c, src, ST_KERNEL, &d)) fail_msg("%s", d.msg);
  int serial = 0, warp = 0;
  for (int i = 0; i < c->kernel->nkernels; i++) {
    const KKernel *kk = &c->kernel->kernels[i];
    if (!kk->alt || kk->alt->sched.rows < 2) continue; /* softmax runs itself where P x V is blocked */
    assert_false(kk->alt->tensor_cores);               /* f32 operands: CUDA cores */
    if (kk->alt->sched.red == RS_SERIAL) serial++;
    else warp++;
    assert_int_equal(kk->sched.red != RS_SERIAL || kk->sched.rows == 1, 1); /* the decode kernel is not blocked */
  }
  assert_int_equal(serial, 2); /* scores, P x V */
  assert_int_equal(warp, 1);   /* the linear */
  StrBuf b = {0};
  print_stage(&b, c, ST_TILE);
  assert_contains(sb_str(&b), "rows-serial");
  sb_free(&b);
  compilation_free(c);
}

static void loop_stage_prints_phases(void **s) {
  Diag d = {0};
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  assert_true(compile_source(c, "x: f32[1,32,2048]; w: f32[2048]; y = rms_norm(x, w, 1e-6)", ST_TILE, &d));
  StrBuf b = {0};
  print_stage(&b, c, ST_LOOP);
  assert_contains(sb_str(&b), "acc0: f32 = sum over r0 < 2048");
  assert_contains(sb_str(&b), "for j0 < 2048:");
  sb_free(&b);
  print_stage(&b, c, ST_TILE);
  assert_contains(sb_str(&b), "kernel rms_norm_0");
  assert_contains(sb_str(&b), "reduce=block-tree");
  sb_free(&b);
  compilation_free(c);
}

/* The fixpoint reuses a kernel built in an earlier attempt when nothing it reached changed: the loop
 * program is the one that rebuilding every kernel in every attempt gives, for about one build per kernel
 * (the plain fixpoint did one per kernel and attempt: ~57,000 for qwen3-0.6b). */
static void fixpoint_reuses_kernels(void **s) {
  static const char *names[] = {"qwen3-0.6b", "smollm2-135m"};
  for (int m = 0; m < 2; m++) {
    for (int t = 0; t < 2; t++) {
      ModelConfig cfg;
      assert_true(model_preset(names[m], &cfg));
      cfg.layers = 3;
      ModelBuildOptions o = {.max_ctx = 64, .weight_dtype = DT_BF16, .cache_dtype = DT_BF16};
      Diag d = {0};
      Compilation *c = compilation_new(t ? TARGET_CUDA : TARGET_CPU, NULL);
      c->graph = model_build(&cfg, &o, c->arena, c->pool, &d);
      if (!c->graph || !compile_graph(c, ST_TENSOR, &d)) fail_msg("%s: %s", names[m], d.msg);
      LoopStats plain = {.no_reuse = 1}, reused = {0};
      LProgram *a = loop_from_tensor_stats(c->tensor, &c->fusion, &d, &plain);
      LProgram *b = loop_from_tensor_stats(c->tensor, &c->fusion, &d, &reused);
      assert_non_null(a);
      assert_non_null(b);
      StrBuf pa = {0}, pb = {0};
      loop_print(&pa, a);
      loop_print(&pb, b);
      assert_string_equal(sb_str(&pa), sb_str(&pb));
      assert_int_equal(plain.attempts, reused.attempts); /* the same realizations, in the same order */
      assert_true(plain.builds > 10 * b->nkernels);
      if (reused.builds > 3 * b->nkernels)
        fail_msg("%s: %ld builds for %d kernels", names[m], reused.builds, b->nkernels);
      sb_free(&pa);
      sb_free(&pb);
      compilation_free(c);
    }
  }
}

/* A chain of inlined nodes longer than the fusion's depth bound continues in another kernel (the
 * expansion recursion stays bounded); below the bound it stays one kernel. */
static void long_chains_are_cut(void **s) {
  StrBuf src = {0};
  sb_puts(&src, "x: f32[16]; y = x");
  for (int i = 0; i < 40; i++) sb_puts(&src, " + 1");
  assert_int_equal(kernels(sb_str(&src)), 1);
  for (int i = 0; i < 400; i++) sb_puts(&src, " + 1");
  int n = kernels(sb_str(&src));
  assert_true(n >= 440 / 64 && n <= 440 / 32 + 1);
  sb_free(&src);
}

/* RoPE reads its input at two positions (rotate-half): over a projection that is two dot products a point unless
 * the projection gets its own kernel, as the CPU's policy gives it (its GEMVs are the decode step's time). */
static void rope_of_a_projection_is_a_policy_choice(void **s) {
  const char *src = "x: f32[3,256]; w: f32[128,256]; pos: i32[3]; y = rope(linear(x, w), pos)";
  FusionPolicy p = fusion_policy_default();
  assert_int_equal(count_kernels(src, &p, TARGET_CPU), 1);
  p = fusion_policy_for(TARGET_CUDA);
  assert_int_equal(count_kernels(src, &p, TARGET_CUDA), 1);
  p = fusion_policy_for(TARGET_CPU);
  assert_int_equal(count_kernels(src, &p, TARGET_CPU), 2);
  /* a reduction read twice at the same index is still one phase */
  assert_int_equal(count_kernels("x: f32[3,256]; w: f32[128,256]; y = linear(x, w) * linear(x, w)", &p, TARGET_CPU), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rms_norm_is_one_kernel),
      cmocka_unit_test(layer_norm_is_one_kernel),
      cmocka_unit_test(softmax_is_one_kernel),
      cmocka_unit_test(elementwise_chain_is_one_kernel),
      cmocka_unit_test(linear_epilogues_fuse),
      cmocka_unit_test(norm_prologue_is_a_policy_choice),
      cmocka_unit_test(no_fuse_cuts_reductions),
      cmocka_unit_test(attention_is_three_kernels),
      cmocka_unit_test(shared_reduction_is_computed_once),
      cmocka_unit_test(attention_prefill_variants_are_serial),
      cmocka_unit_test(loop_stage_prints_phases),
      cmocka_unit_test(identical_layers_share_code),
      cmocka_unit_test(costly_prologue_is_not_recomputed),
      cmocka_unit_test(slices_of_one_projection_fuse),
      cmocka_unit_test(fixpoint_reuses_kernels),
      cmocka_unit_test(long_chains_are_cut),
      cmocka_unit_test(rope_of_a_projection_is_a_policy_choice),
  };
  return cmocka_run_group_tests_name("fusion", tests, NULL, NULL);
}
