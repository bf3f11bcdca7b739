/* The plan's memory planner: temporaries whose lifetimes do not overlap share memory, results stay
 * right, and a plan reused across runs of growing size re-plans and still computes correctly. */
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "driver/execute.h"

/* Four residual blocks: h1..h3 are temporaries, each live for two kernels. */
static const char *chain = "x: f32[4,256]; w: f32[256,256]\n"
                           "h1 = x + linear(x, w)\nh2 = h1 + linear(h1, w)\nh3 = h2 + linear(h2, w)\n"
                           "y = h3 + linear(h3, w)";

static void temporaries_share_memory(void **s) {
  Diag d = {0};
  Backend *cpu = backend_cpu_new(&d);
  Compilation *c = compilation_new(TARGET_CPU, NULL);
  assert_true(compile_source(c, chain, ST_CODE, &d));
  size_t temp_bytes = 0, io_bytes = 0;
  int ntemps = 0;
  for (int i = 0; i < c->loop->nbufs; i++) {
    size_t b = (size_t)shape_numel_eval(&c->loop->bufs[i].shape, NULL) * dtype_size(c->loop->bufs[i].dtype);
    if (c->loop->bufs[i].kind == BUF_TEMP) temp_bytes += b, ntemps++;
    else io_bytes += b; /* inputs and outputs keep their own buffers */
  }
  assert_int_equal(ntemps, 3);
  Execution x;
  if (!execute_program(c, cpu, NULL, 5, &x, &d)) fail_msg("%s", d.msg);
  double err[LT_MAX_OUTPUTS];
  assert_true(execute_check(c, &x, NULL, err, &d));
  assert_true(err[0] <= check_tolerance(DT_F32, MM_HIGH));
  /* h1 and h3 are never live together: the arena holds two of the three temporaries, not all three */
  size_t ws = plan_workspace_bytes(x.plan);
  assert_true(ws >= io_bytes);
  assert_true(ws - io_bytes < temp_bytes);
  assert_true(ws - io_bytes >= temp_bytes / 3 * 2);
  execution_free(&x);
  compilation_free(c);
  cpu->ops->destroy(cpu);
}

/* A CPU plan of src, with its backend and compilation. */
static Plan *cpu_plan(const char *src, Backend **cpu, Compilation **c) {
  Diag d = {0};
  *cpu = backend_cpu_new(&d);
  *c = compilation_new(TARGET_CPU, NULL);
  assert_true(compile_source(*c, src, ST_CODE, &d));
  Plan *p = plan_new((*c)->launch, sb_str(&(*c)->code), *cpu, &d);
  assert_non_null(p);
  return p;
}

static void growing_runs_replan_correctly(void **s) {
  /* one plan, run at growing sizes: each run must match the reference */
  const char *src =
      "x: f32[n, 64]; w: f32[64]\na = softmax(x * 2, -1)\nb = rms_norm(x + a, w, 1e-6)\ny = sum(a * b, 0)";
  Diag d = {0};
  Backend *cpu;
  Compilation *c;
  Plan *p = cpu_plan(src, &cpu, &c);
  for (int n = 1; n <= 300; n = n * 3 + 1) {
    SymEnv env = {0};
    symenv_set(&env, "n", n);
    HostTensor in[2], out;
    RefTensor rin[2] = {0}, rout = {0};
    assert_true(make_inputs(c->graph, &env, (uint64_t)n, in, rin, &d));
    assert_true(host_tensor_alloc(&out, DT_F32, &c->loop->bufs[c->loop->outputs[0]].shape, &env, &d));
    void *inp[2] = {in[0].data, in[1].data}, *outp[1] = {out.data};
    if (!plan_run(p, &env, inp, outp, &d)) fail_msg("%s", d.msg);
    assert_true(ref_eval(c->graph, &env, rin, &rout, &d));
    double err = compare_output(&out, &rout);
    if (!(err <= check_tolerance(DT_F32, MM_HIGH))) fail_msg("n=%d: error %.3g", n, err);
    for (int i = 0; i < 2; i++) {
      host_tensor_free(&in[i]);
      ref_tensor_free(&rin[i]);
    }
    host_tensor_free(&out);
    ref_tensor_free(&rout);
  }
  plan_free(p);
  compilation_free(c);
  cpu->ops->destroy(cpu);
}

/* Runs re-evaluate only what depends on the symbols that changed since the run before: one symbol
 * changing at a time, both, neither, and sizes going back down must all give the reference's results. */
static void runs_with_changing_symbols(void **s) {
  const char *src = "x: f32[a, 16]; y: f32[b, 16]; w: f32[16]\n"
                    "return softmax(x, -1), rms_norm(y, w, 1e-6), sum(y, 0)";
  Diag d = {0};
  Backend *cpu;
  Compilation *c;
  Plan *p = cpu_plan(src, &cpu, &c);
  static const int sizes[][2] = {{3, 5}, {3, 5}, {40, 5}, {40, 70}, {40, 70}, {2, 70}, {2, 1}, {90, 90}, {3, 5}};
  for (int r = 0; r < (int)(sizeof sizes / sizeof sizes[0]); r++) {
    SymEnv env = {0};
    symenv_set(&env, "a", sizes[r][0]);
    symenv_set(&env, "b", sizes[r][1]);
    HostTensor in[3], out[3];
    RefTensor rin[3] = {0}, rout[3] = {0};
    assert_true(make_inputs(c->graph, &env, (uint64_t)r, in, rin, &d));
    void *inp[3] = {in[0].data, in[1].data, in[2].data}, *outp[3];
    for (int o = 0; o < 3; o++) {
      assert_true(host_tensor_alloc(&out[o], DT_F32, &c->loop->bufs[c->loop->outputs[o]].shape, &env, &d));
      outp[o] = out[o].data;
    }
    if (!plan_run(p, &env, inp, outp, &d)) fail_msg("%s", d.msg);
    assert_true(ref_eval(c->graph, &env, rin, rout, &d));
    for (int o = 0; o < 3; o++) {
      double err = compare_output(&out[o], &rout[o]);
      if (!(err <= check_tolerance(DT_F32, MM_HIGH)))
        fail_msg("run %d (a=%d, b=%d) output %d: error %.3g", r, sizes[r][0], sizes[r][1], o, err);
      host_tensor_free(&out[o]);
      ref_tensor_free(&rout[o]);
    }
    for (int i = 0; i < 3; i++) {
      host_tensor_free(&in[i]);
      ref_tensor_free(&rin[i]);
    }
  }
  /* a run without a symbol's value fails clearly, and the next complete run is right again */
  SymEnv partial = {0};
  symenv_set(&partial, "a", 3);
  assert_false(plan_run(p, &partial, NULL, NULL, &d));
  assert_non_null(strstr(d.msg, "'b'"));
  plan_free(p);
  compilation_free(c);
  cpu->ops->destroy(cpu);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(temporaries_share_memory),
      cmocka_unit_test(growing_runs_replan_correctly),
      cmocka_unit_test(runs_with_changing_symbols),
  };
  return cmocka_run_group_tests_name("plan_memory", tests, NULL, NULL);
}
