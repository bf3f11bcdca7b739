/* Target descriptions: the built-in devices, their checks, and schedules that follow the description
 * (the same programs compiled for two devices choose from each one's own numbers). */
#include "testutil.h"
#include <stdlib.h>
#include "driver/pipeline.h"
#include "tile/space.h"

static Compilation *compiled_for(const char *device, const char *src, Stage upto) {
  TargetDesc t;
  Diag dd = {0};
  if (!target_from_spec(device, &t, &dd)) fail_msg("%s: %s", device, dd.msg);
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

/* Flash-decoding splits a row's keys into as many chunks as keep eight blocks on each SM: with 2 pairs of heads,
 * 264 a row on the h200 and 116 on the L4, so the cap of 64 for 10000 keys on both (this contiguous cache keeps
 * the element-at-a-time form; test_flash's decode_vector_rows has the paged 16-byte form's chunks). */
static void decode_chunks_follow_sms(void **state) {
  (void)state;
  const char *attn = "q: f32[1,4,1,64]; k: f32[1,2,n,64]; v: f32[1,2,n,64]; y = attention(q, k, v, false)";
  Compilation *h = compiled_for("h200", attn, ST_KERNEL), *l = compiled_for("l4", attn, ST_KERNEL);
  const KKernel *kh = &h->kernel->kernels[2], *kl = &l->kernel->kernels[2];
  assert_int_equal(h->tile->kernels[2].s.decode_fill, 8 * 132);
  assert_int_equal(l->tile->kernels[2].s.decode_fill, 8 * 58);
  /* 1 row x 2 head pairs x chunks */
  assert_int_equal(eval_at(kh->grid, "n", 10000), 2 * 64);
  assert_int_equal(eval_at(kl->grid, "n", 10000), 2 * 64);
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

/* A built-in description with fields changed after ':' (lathe compile --device h200:sms=66): sizes take K / M,
 * the name says it is not the built-in, and a wrong word is one error naming it. */
static void descriptions_from_text(void **state) {
  (void)state;
  TargetDesc t;
  Diag d = {0};
  assert_true(target_from_spec("h200", &t, &d));
  assert_string_equal(t.name, "h200");
  assert_true(target_from_spec("h200:sms=66,smem_per_sm=64K,l2=25M,cc=8.0", &t, &d));
  assert_string_equal(t.name, "h200:sms=66,smem_per_sm=64K,l2=25M,cc=8.0");
  assert_int_equal(t.sms, 66);
  assert_int_equal(t.smem_per_sm, 65536);
  assert_int_equal(t.smem_per_block_optin, 65536); /* no block opts in to more than a multiprocessor has */
  assert_int_equal(t.l2_bytes, 25 << 20);
  assert_int_equal(t.cc_major, 8);
  assert_int_equal(t.cc_minor, 0);
  assert_int_equal(t.max_threads_per_sm, 2048); /* untouched fields are the h200's */
  assert_true(target_from_spec("host:cores=1,vector_bytes=16", &t, &d));
  assert_int_equal(t.kind, TARGET_CPU);
  assert_int_equal(t.cores, 1);
  assert_int_equal(t.vector_bytes, 16);
  static const struct {
    const char *spec, *msg;
  } bad[] = {
      {"x100:sms=1", "unknown device 'x100' (known: h200, a100, l4, t4 for cuda; host for cpu)"},
      {"h200:", "nothing after ':'"},
      {"h200:sms", "device override 'sms' is not FIELD=VALUE"},
      {"h200:sms=", "device override sms: '' is not a count"},
      {"h200:sms=6x", "device override sms: '6x' is not a count"},
      {"h200:cores=4", "device override 'cores': no such cuda field"},
      {"host:sms=4", "device override 'sms': no such cpu field"},
      {"h200:sms=0", "multiprocessors is 0"},
      {"h200:cc=9", "cc=9: expected MAJOR.MINOR"},
      {"h200:smem_per_sm=16K", "49152 bytes of shared memory per block but 16384 per multiprocessor"},
      {"h200:threads_per_block=100", "100 threads per block"},
      {"host:vector_bytes=24", "24-byte vectors is not a CPU description"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    d = (Diag){0};
    if (target_from_spec(bad[i].spec, &t, &d)) fail_msg("%s was accepted", bad[i].spec);
    assert_contains(d.msg, bad[i].msg);
  }
}

/* Half the multiprocessors and less shared memory (64 KB per SM: one 256-thread GEMM block of 48 KB each instead
 * of two) change the defaults, each for a reason the description gives:
 *   - split-k GEMMs fill the blocks the device holds at once: 66 x 1 instead of 132 x 2 = 264;
 *   - flash-decoding's key chunks keep 8 blocks on each SM: 528 instead of 1056;
 *   - a GEMV's threads per row double only while the launch holds less than half the device: 3072 rows (gate/up
 *     of Qwen3-0.6B) x a warp already fill half of 66 SMs, so a warp per row instead of 64 threads;
 *   - a long-row RMSNorm keeps the rows in flight within half of L2: with 66 SMs 128 threads per row already do
 *     (66 x 16 rows x 16 KB = 17 MB), on the h200 it takes 256.
 * And the tuner's space follows: block-fill candidates are 1 and 2 blocks per SM (66, 132 instead of 132, 264). */
static void smaller_description_chooses_differently(void **state) {
  (void)state;
  const char *small = "h200:sms=66,smem_per_sm=64K";
  const char *lin = "x: f32[seq, 1024]; w: bf16[96, 1024]; y = linear(x, w)";
  Compilation *h = compiled_for("h200", lin, ST_TILE), *s = compiled_for(small, lin, ST_TILE);
  assert_int_equal(h->tile->kernels[0].s.gemm_fill, 264);
  assert_int_equal(s->tile->kernels[0].s.gemm_fill, 66);
  char *ts = printed(s, ST_TILE);
  assert_contains(ts, "device h200:sms=66,smem_per_sm=64K: sm_90, 66 SMs");
  assert_contains(ts, "64 KB/SM");
  free(ts);
  compilation_free(h), compilation_free(s);
  const char *attn = "q: f32[1,4,1,64]; k: f32[1,2,n,64]; v: f32[1,2,n,64]; y = attention(q, k, v, false)";
  h = compiled_for("h200", attn, ST_TILE), s = compiled_for(small, attn, ST_TILE);
  assert_int_equal(h->tile->kernels[2].s.decode_fill, 1056);
  assert_int_equal(s->tile->kernels[2].s.decode_fill, 528);
  compilation_free(h), compilation_free(s);
  const char *gateup = "x: f32[1, 1024]; w: bf16[3072, 1024]; y = linear(x, w)";
  h = compiled_for("h200", gateup, ST_TILE), s = compiled_for(small, gateup, ST_TILE);
  assert_int_equal(h->tile->kernels[0].s.red, RS_BLOCK);
  assert_int_equal(h->tile->kernels[0].s.block_threads, 64);
  assert_int_equal(s->tile->kernels[0].s.red, RS_WARP);
  compilation_free(h), compilation_free(s);
  const char *norm = "x: f32[32,4096,4096]; w: f32[4096]; y = rms_norm(x, w, 1e-6)";
  h = compiled_for("h200", norm, ST_TILE), s = compiled_for(small, norm, ST_TILE);
  assert_int_equal(h->tile->kernels[0].s.block_threads, 256);
  assert_int_equal(s->tile->kernels[0].s.block_threads, 128);
  int fills[2][3] = {{0}};
  for (int which = 0; which < 2; which++) {
    const Compilation *c = which ? s : h;
    ScheduleSpace sp;
    Diag d = {0};
    assert_true(schedule_space(c->loop, c->tile->kernels[0].k, &c->device, c->matmul, &c->tile->kernels[0].s, &sp, &d));
    for (int i = 0; i < sp.n; i++) {
      int f = sp.s[i].block_fill;
      fills[which][f == 66 ? 0 : f == 132 ? 1 : f == 264 ? 2 : 0] += f > 0;
    }
  }
  assert_int_equal(fills[0][0], 0), assert_true(fills[0][1] > 0), assert_true(fills[0][2] > 0);
  assert_true(fills[1][0] > 0), assert_true(fills[1][1] > 0), assert_int_equal(fills[1][2], 0);
  compilation_free(h), compilation_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(builtin_descriptions),   cmocka_unit_test(broken_descriptions_are_refused),
      cmocka_unit_test(split_k_follows_sms),    cmocka_unit_test(decode_chunks_follow_sms),
      cmocka_unit_test(threads_follow_sms),     cmocka_unit_test(no_bf16_mma_no_tensor_cores),
      cmocka_unit_test(descriptions_from_text), cmocka_unit_test(smaller_description_chooses_differently),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
