/* Kernels over quantized weights: where the kernel stage reads blocks (the CPU's reduction loops split into
 * blocks, groups and elements, lt_dq_*_at) and where it reads single elements (lt_dq_*); programs without a
 * quantized buffer get no decoders. The values themselves are checked by test_differential's quant_* cases. */
#include <stdlib.h>
#include "testutil.h"
#include "driver/pipeline.h"

static char *code_of(Target t, const char *src) {
  Diag d = {0};
  Compilation *c = compilation_new(t, NULL);
  if (!compile_source(c, src, ST_CODE, &d)) fail_msg("compile failed: %s\n%s", d.msg, src);
  char *s = strdup(sb_str(&c->code));
  compilation_free(c);
  return s;
}

static void cpu_projection_reads_blocks(void **state) {
  (void)state;
  char *c = code_of(TARGET_CPU, "x: f32[seq,512]; w: q4_k[5,512]; y = linear(x, w)");
  assert_contains(c, "lt_dq_q4_k_at(w, ((i1 * 2) + rb");
  free(c);
  c = code_of(TARGET_CPU, "x: f32[seq,64]; w: q4_1[5,64]; v: q5_0[5,64]; y = linear(x, w) * linear(x, v)");
  assert_contains(c, "lt_dq_q4_1_at(w, ");
  assert_contains(c, "lt_dq_q5_0_at(v, ");
  free(c);
}

static void element_reads_elsewhere(void **state) {
  (void)state;
  /* blocks or groups of different sizes in one loop, the weight read along its columns, CUDA: element by element */
  char *c = code_of(TARGET_CPU, "x: f32[1,256]; w: q4_1[5,256]; v: q6_k[5,256]; y = linear(x, w) + linear(x, v)");
  assert_contains(c, "lt_dq_q6_k(v, ");
  free(c);
  c = code_of(TARGET_CPU, "x: f32[1,64]; w: q8_0[64,32]; y = matmul(x, w)");
  assert_contains(c, "lt_dq_q8_0(w, ");
  assert_null(strstr(c, "lt_dq_q8_0_at(w, "));
  free(c);
  c = code_of(TARGET_CUDA, "x: f32[seq,512]; w: q4_k[5,512]; y = linear(x, w)");
  assert_contains(c, "lt_dq_q4_k(w, ");
  assert_contains(c, "__fmul_rn");
  free(c);
  c = code_of(TARGET_CPU, "x: f32[seq,512]; w: f32[5,512]; y = linear(x, w)");
  assert_null(strstr(c, "lt_dq_"));
  free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cpu_projection_reads_blocks),
      cmocka_unit_test(element_reads_elsewhere),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
