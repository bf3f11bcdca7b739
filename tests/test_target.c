/* Target descriptions: the built-in devices, their checks, and schedules that follow the description
 * (the same programs compiled for two devices choose from each one's own numbers). */
#include "testutil.h"
#include <stdlib.h>
#include "driver/pipeline.h"

static Compilation *compiled_for(const char *device, const char *src, Stage upto) {
  TargetDesc t;
  assert_true(target_builtin(device, &t));
  Compilation *c = compilation_new(t.kind, NULL);
  c->device = t;
  Diag d = {0};
  if (!compile_source(c, src, upto, &d)) fail_msg("%s: %s", device, d.msg);
  return c;
}

static char *printed(const Compilation *c, Stage s) {
  StrBuf b = {0};
  print_stage(&b, c, s);
  return b.data;
}

static int64_t eval_at(const Expr *e, const char *sym, int64_t v) {
  SymEnv env = {0};
  symenv_set(&env, sym, v);
  int64_t out = -1;
  assert_true(ex_eval_int(e, &env, &out));
  return out;
}

static void builtin_descriptions(void **state) {
  (void)state;
  TargetDesc t;
  assert_true(target_builtin("h200", &t));
  assert_int_equal(t.kind, TARGET_CUDA);
  assert_int_equal(t.sms, 132);
  assert_int_equal(t.smem_per_block, 49152);
  assert_true(target_has_bf16_mma(&t));
  char arch[16];
  target_arch(&t, arch, sizeof arch);
  assert_string_equal(arch, "sm_90");
  Diag d = {0};
  assert_true(target_check(&t, &d));
  /* two 256-thread GEMM blocks of 128 registers each fill an SM's registers */
  assert_int_equal(target_resident_blocks(&t, 256, 128, 49152), 2);
  assert_true(target_builtin("a100", &t));
  assert_int_equal(t.sms, 108);
  assert_true(target_builtin("l4", &t));
  assert_int_equal(t.sms, 58);
  assert_int_equal(t.max_threads_per_sm, 1536);
  assert_true(target_builtin("t4", &t));
  assert_false(target_has_bf16_mma(&t));
  assert_int_equal(target_resident_blocks(&t, 256, 128, 49152), 1); /* 64 KB of shared memory per SM */
  assert_false(target_builtin("h900", &t));
  /* the default is the h200 for CUDA, the host for the CPU */
  TargetDesc def = target_default(TARGET_CUDA);
  assert_string_equal(def.name, "h200");
  def = target_default(TARGET_CPU);
  assert_int_equal(def.kind, TARGET_CPU);
  assert_true(def.cores >= 1);
  assert_true(def.vector_bytes >= 16);
  assert_true(target_check(&def, &d));
  StrBuf b = {0};
  assert_true(target_builtin("a100", &t));
  target_print(&b, &t);
  assert_contains(sb_str(&b), "device a100: sm_80, 108 SMs");
  sb_free(&b);
}

/* A description missing what the stages rely on is refused with the field named. */
static void broken_descriptions_are_refused(void **state) {
  (void)state;
  TargetDesc t;
  assert_true(target_builtin("h200", &t));
  t.sms = 0;
  Diag d = {0};
  assert_false(target_check(&t, &d));
  assert_contains(d.msg, "multiprocessors is 0");
  assert_true(target_builtin("h200", &t));
  t.warp_size = 64;
  d = (Diag){0};
  assert_false(target_check(&t, &d));
  assert_contains(d.msg, "warp size 64");
  /* compiling for it fails the same way, in the tile stage */
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  c->device = t;
  d = (Diag){0};
  assert_false(compile_source(c, "x: f32[4]; y = exp(x)", ST_TILE, &d));
  assert_contains(d.msg, "warp size 64");
  compilation_free(c);
  /* a CPU description for a CUDA compilation */
  c = compilation_new(TARGET_CUDA, NULL);
  c->device = target_default(TARGET_CPU);
  d = (Diag){0};
  assert_false(compile_source(c, "x: f32[4]; y = exp(x)", ST_TILE, &d));
  assert_contains(d.msg, "is a cpu device, not cuda");
  compilation_free(c);
}

/* Split-k GEMMs fill the blocks the device holds at once: two per SM (264 on an h200, 116 on an L4),
 * and the grid follows: the one output tile of a 96-column linear at 37 rows splits into 8 parts
 * either way, at 4096 rows (64 tiles) into 4 parts on the h200 and 1 on the L4. */
static void split_k_follows_sms(void **state) {
  (void)state;
  const char *lin = "x: f32[seq, 1024]; w: bf16[96, 1024]; y = linear(x, w)";
  Compilation *h = compiled_for("h200", lin, ST_KERNEL), *l = compiled_for("l4", lin, ST_KERNEL);
  assert_int_equal(h->tile->kernels[0].s.gemm_fill, 264);
  assert_int_equal(l->tile->kernels[0].s.gemm_fill, 116);
  const KKernel *gh = h->kernel->kernels[0].alt, *gl = l->kernel->kernels[0].alt;
  assert_string_equal(gh->name, "linear_0_mma");
  assert_string_equal(gl->name, "linear_0_mma");
  assert_int_equal(eval_at(gh->grid, "seq", 4096), 64 * 4);
  assert_int_equal(eval_at(gl->grid, "seq", 4096), 64);
  assert_int_equal(eval_at(gl->grid, "seq", 37), 8);
  assert_int_equal(eval_at(gh->grid, "seq", 37), 8);
  char *th = printed(h, ST_TILE), *tl = printed(l, ST_TILE);
  assert_contains(th, "device h200: sm_90, 132 SMs");
  assert_contains(th, "split-k-fill=264");
  assert_contains(tl, "device l4: sm_89, 58 SMs");
  assert_contains(tl, "split-k-fill=116");
  free(th);
  free(tl);
  compilation_free(h);
  compilation_free(l);
}

/* Flash-decoding splits a row's keys into as many chunks as keep eight blocks on each SM (its 16-byte form: at most
 * the four that fit at once): with 2 pairs of heads, 264 a row on the h200 and 116 on the L4, so the cap of 64
 * for 10000 keys (313 tiles) on both, 5 tiles a chunk, which 63 chunks cover. */
static void decode_chunks_follow_sms(void **state) {
  (void)state;
  const char *attn = "q: f32[1,4,1,64]; k: f32[1,2,n,64]; v: f32[1,2,n,64]; y = attention(q, k, v, false)";
  Compilation *h = compiled_for("h200", attn, ST_KERNEL), *l = compiled_for("l4", attn, ST_KERNEL);
  const KKernel *kh = &h->kernel->kernels[2], *kl = &l->kernel->kernels[2];
  assert_int_equal(h->tile->kernels[2].s.decode_fill, 8 * 132);
  assert_int_equal(l->tile->kernels[2].s.decode_fill, 8 * 58);
  /* 1 row x 2 head pairs x chunks */
  assert_int_equal(eval_at(kh->grid, "n", 10000), 2 * 63);
  assert_int_equal(eval_at(kl->grid, "n", 10000), 2 * 63);
  assert_int_equal(eval_at(kh->grid, "n", 1000), 2 * 32); /* 32 key tiles: one chunk each */
  compilation_free(h);
  compilation_free(l);
}

/* A GEMV's threads per row double while the launch fills less than half of the device: 512 rows of
 * 65536 get 512 threads each on the h200's 132 SMs and 128 on the L4's 58 (1536 threads each). */
static void threads_follow_sms(void **state) {
  (void)state;
  const char *gemv = "x: f32[1, 65536]; w: f32[512, 65536]; y = linear(x, w)";
  Compilation *h = compiled_for("h200", gemv, ST_TILE), *l = compiled_for("l4", gemv, ST_TILE);
  assert_int_equal(h->tile->kernels[0].s.red, RS_BLOCK);
  assert_int_equal(h->tile->kernels[0].s.block_threads, 512);
  assert_int_equal(l->tile->kernels[0].s.block_threads, 128);
  compilation_free(h);
  compilation_free(l);
}

/* A device without bf16 mma (T4, sm_75) gets no tensor-core variant: the projection's blocked variant
 * runs on CUDA cores, and no generated code uses mma. The same program for the h200 has one. */
static void no_bf16_mma_no_tensor_cores(void **state) {
  (void)state;
  const char *lin = "x: f32[seq, 64]; w: bf16[96, 64]; y = linear(x, w)";
  Compilation *t = compiled_for("t4", lin, ST_CODE), *h = compiled_for("h200", lin, ST_CODE);
  assert_int_equal(t->tile->kernels[0].s.mma, 0);
  assert_string_equal(t->kernel->kernels[0].alt->name, "linear_0_rows8");
  assert_false(t->kernel->kernels[0].alt->tensor_cores);
  assert_null(strstr(sb_str(&t->code), "linear_0_mma"));
  assert_string_equal(h->kernel->kernels[0].alt->name, "linear_0_mma");
  assert_non_null(strstr(sb_str(&h->code), "linear_0_mma("));
  char *tile = printed(t, ST_TILE);
  assert_contains(tile, "no bf16 mma");
  assert_null(strstr(tile, "mma=bf16"));
  free(tile);
  compilation_free(t);
  compilation_free(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(builtin_descriptions), cmocka_unit_test(broken_descriptions_are_refused),
      cmocka_unit_test(split_k_follows_sms),  cmocka_unit_test(decode_chunks_follow_sms),
      cmocka_unit_test(threads_follow_sms),   cmocka_unit_test(no_bf16_mma_no_tensor_cores),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
