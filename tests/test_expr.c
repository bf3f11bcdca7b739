/* Scalar expressions: integer constants stay exact 64-bit integers through construction and folding,
 * and float -> integer conversion saturates (the one rule of every backend and the reference). */
#include "testutil.h"
#include <math.h>
#include <stdint.h>
#include "ir/expr.h"

static void test_int_constants_exact(void **state) {
  Arena *a = arena_new();
  ExprPool *p = expr_pool_new(a);
  Expr *big = ex_int(p, 9007199254740993LL); /* 2^53 + 1: not a double */
  assert_true(ex_bin(p, X_ADD, big, ex_int(p, 0)) == big);
  assert_int_equal(ex_bin(p, X_ADD, big, ex_int(p, 2))->ival, 9007199254740995LL);
  assert_int_equal(ex_bin(p, X_SUB, ex_int(p, INT64_MAX), ex_int(p, 1))->ival, INT64_MAX - 1);
  assert_int_equal(ex_bin(p, X_ADD, ex_int(p, INT64_MAX), ex_int(p, 1))->ival, INT64_MIN); /* wraps, defined */
  assert_int_equal(ex_bin(p, X_IDIV, ex_int(p, INT64_MIN), ex_int(p, -1))->ival, INT64_MIN);
  assert_int_equal(ex_bin(p, X_MOD, ex_int(p, INT64_MIN), ex_int(p, -1))->ival, 0);
  assert_int_equal(ex_un(p, X_NEG, big)->ival, -9007199254740993LL);
  assert_int_equal(ex_bin(p, X_LT, ex_int(p, 9007199254740992LL), big)->ival, 1);
  assert_int_equal(ex_bin(p, X_MAX, ex_int(p, 9007199254740992LL), big)->ival, 9007199254740993LL);
  /* i64 -> i32 wraps; an integer constant keeps its value through a cast to i64 */
  assert_int_equal(ex_cast(p, DT_I32, ex_int(p, 3000000000LL))->ival, (int64_t)(int32_t)(uint32_t)3000000000u);
  assert_int_equal(ex_cast(p, DT_I64, ex_const_int(p, DT_I32, -5))->ival, -5);
  assert_int_equal(ex_const_int(p, DT_I64, INT64_MAX)->ival, INT64_MAX);
  int64_t v;
  Expr *e = ex_bin(p, X_MUL, ex_sym(p, "n"), big);
  SymEnv env = {0};
  symenv_set(&env, "n", 1);
  assert_true(ex_eval_int(e, &env, &v));
  assert_int_equal(v, 9007199254740993LL);
  arena_free(a);
}

static void test_float_to_int_saturates(void **state) {
  Arena *a = arena_new();
  ExprPool *p = expr_pool_new(a);
  assert_int_equal(ex_float_to_int(DT_I32, NAN), 0);
  assert_int_equal(ex_float_to_int(DT_I32, 1e30), INT32_MAX);
  assert_int_equal(ex_float_to_int(DT_I32, -1e30), INT32_MIN);
  assert_int_equal(ex_float_to_int(DT_I32, INFINITY), INT32_MAX);
  assert_int_equal(ex_float_to_int(DT_I32, -2.9), -2);
  assert_int_equal(ex_float_to_int(DT_I32, 2147483647.5), INT32_MAX);
  assert_int_equal(ex_float_to_int(DT_I64, 1e30), INT64_MAX);
  assert_int_equal(ex_float_to_int(DT_I64, -INFINITY), INT64_MIN);
  assert_int_equal(ex_float_to_int(DT_I64, 9223372036854775808.0), INT64_MAX);
  assert_int_equal(ex_float_to_int(DT_I64, -9223372036854775808.0), INT64_MIN);
  assert_int_equal(ex_const(p, DT_I32, 1e30)->ival, INT32_MAX);
  assert_int_equal(ex_cast(p, DT_I64, ex_const(p, DT_F32, NAN))->ival, 0);
  assert_int_equal(ex_cast(p, DT_I32, ex_const(p, DT_F32, -1e20))->ival, INT32_MIN);
  arena_free(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_int_constants_exact),
      cmocka_unit_test(test_float_to_int_saturates),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
