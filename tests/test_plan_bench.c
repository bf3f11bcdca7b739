/* Timing kernels alone (plan_bench_slots, what lathe tune measures a candidate by): only the given launches
 * run, after a complete run, so a cheap kernel times far below an expensive one of the same program; the
 * requests it refuses. */
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "driver/execute.h"

/* kernel 0: a norm over 256 x 256 values; kernel 1: a 256 x 256 x 256 product of it */
static const char *two = "x: f32[256, 256]; w: f32[256]; b: f32[256, 256]\n"
                         "h = rms_norm(x, w, 1e-6)\ny = linear(h, b)";

static double median_of(Plan *p, const int *slots, int n) {
  double t[9];
  Diag d = {0};
  if (!plan_bench_slots(p, NULL, slots, n, 1, 9, t, &d)) fail_msg("%s", d.msg);
  for (int i = 0; i < 9; i++)
    for (int j = i + 1; j < 9; j++)
      if (t[j] < t[i]) {
        double s = t[i];
        t[i] = t[j], t[j] = s;
      }
  return t[4];
}

static void kernels_alone(void **s) {
  (void)s;
  Diag d = {0};
  Backend *cpu = backend_cpu_new(&d);
  Compilation *c = compilation_new(TARGET_CPU, NULL);
  assert_true(compile_source(c, two, ST_CODE, &d));
  assert_int_equal(c->launch->nkernels, 2);
  int norm = strstr(c->launch->kernels[0].name, "rms_norm") ? 0 : 1, product = 1 - norm;
  Plan *p = plan_new(c->launch, sb_str(&c->code), cpu, &d);
  assert_non_null(p);
  int one = norm;
  double t;
  assert_false(plan_bench_slots(p, NULL, &one, 1, 0, 1, &t, &d)); /* no run yet: no inputs on the device */
  assert_contains(d.msg, "needs a complete run first");
  Execution x;
  if (!execute_program(c, cpu, NULL, 3, &x, &d)) fail_msg("%s", d.msg);
  d = (Diag){0};
  int bad = 2;
  assert_false(plan_bench_slots(x.plan, NULL, &bad, 1, 0, 1, &t, &d));
  assert_contains(d.msg, "no kernel number 2");
  d = (Diag){0};
  assert_false(plan_bench_slots(x.plan, NULL, &one, 1, 0, 0, &t, &d));
  double t_norm = median_of(x.plan, &norm, 1), t_product = median_of(x.plan, &product, 1);
  int both[2] = {0, 1};
  double t_both = median_of(x.plan, both, 2);
  /* (medians taken apart in time: on a loaded machine only the large ratio is a safe claim) */
  /* 16.7M multiply-adds against 65536 values: the product, alone or with the norm, takes far longer */
  assert_true(t_norm > 0);
  assert_true(t_product > 8 * t_norm);
  assert_true(t_both > 8 * t_norm);
  /* the plan runs on as before: a complete run after the timing is still right */
  memset(x.out[0].data, 0xff, (size_t)x.out[0].numel * sizeof(float));
  void *outp[1] = {x.out[0].data};
  assert_true(plan_run(x.plan, NULL, x.in_ptr, outp, &d));
  double err[LT_MAX_OUTPUTS];
  assert_true(execute_check(c, &x, NULL, err, &d));
  assert_true(err[0] <= check_tolerance(DT_F32, MM_HIGH));
  execution_free(&x);
  plan_free(p);
  compilation_free(c);
  cpu->ops->destroy(cpu);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(kernels_alone)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
