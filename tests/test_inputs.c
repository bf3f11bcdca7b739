/* The random inputs of the checks (driver/check.c make_inputs): each input's values fit its use, and the slots of
 * a cache scatter are distinct, since two tokens writing one slot would race on a GPU and their order decide the
 * result. */
#include <stdlib.h>
#include "testutil.h"
#include "driver/execute.h"

static void scatter_slots_are_distinct(void **state) {
  (void)state;
  Diag d = {0};
  Compilation *c = compilation_new(TARGET_CPU, NULL);
  assert_true(compile_source(c, "c: f32[6, 4, 2, 8]; x: f32[tok, 2, 8]; s: i32[tok]\nreturn cache_scatter(c, x, s)",
                             ST_CODE, &d));
  SymEnv env = {0};
  symenv_set(&env, "tok", 20); /* 20 of the 26 values -1..24 */
  for (uint64_t seed = 1; seed <= 20; seed++) {
    HostTensor in[3];
    RefTensor ref[3];
    assert_true(make_inputs(c->graph, &env, seed, in, ref, &d));
    const int32_t *s = in[2].data;
    int seen[26] = {0};
    for (int i = 0; i < 20; i++) {
      assert_true(s[i] >= -1 && s[i] <= 24);
      assert_int_equal(seen[s[i] + 1]++, 0);
      assert_true(ref[2].data[i] == s[i]);
    }
    for (int i = 0; i < 3; i++) {
      host_tensor_free(&in[i]);
      ref_tensor_free(&ref[i]);
    }
    /* without the reference (the tuner's inputs): the same rule */
    assert_true(make_inputs(c->graph, &env, seed, in, NULL, &d));
    s = in[2].data;
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 20; i++) assert_int_equal(seen[s[i] + 1]++, 0);
    for (int i = 0; i < 3; i++) host_tensor_free(&in[i]);
  }
  /* more tokens than slots: the rest are random again, still in range */
  symenv_set(&env, "tok", 40);
  HostTensor in[3];
  assert_true(make_inputs(c->graph, &env, 3, in, NULL, &d));
  for (int i = 0; i < 40; i++)
    assert_true(((const int32_t *)in[2].data)[i] >= -1 && ((const int32_t *)in[2].data)[i] <= 24);
  for (int i = 0; i < 3; i++) host_tensor_free(&in[i]);
  compilation_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(scatter_slots_are_distinct),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
