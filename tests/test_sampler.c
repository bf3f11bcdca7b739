/* The sampling rule (generate/sampler.h) on the host: greedy, the candidate sets of top-k and top-p
 * against an independent sort, the probabilities a grid of uniforms reproduces, ties, NaNs, seeds;
 * and the device sampler's CUDA C compiling under NVRTC (it runs on the GPU in make test-gpu, against
 * this host sampler). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "testutil.h"
#include "backend/nvrtc.h"
#include "base/rng.h"
#include "generate/sampler_device.h"

#define N 64
#define GRID 20000

static float logits[N];

static void fill(uint64_t seed) {
  for (int i = 0; i < N; i++) logits[i] = (float)(splitmix64_unit(&seed) * 8.0 - 4.0);
}

/* How often each token comes out for uniforms (j + 0.5) / GRID: the sampler's inverse CDF. */
static void counts_for(SamplerOptions o, const float *l, int n, int *count) {
  Sampler s;
  sampler_init(&s, &o);
  memset(count, 0, sizeof(int) * (size_t)n);
  for (int j = 0; j < GRID; j++) {
    int t = sampler_pick(&s, (float)((j + 0.5) / GRID), l, n);
    assert_true(t >= 0 && t < n);
    count[t]++;
  }
  sampler_free(&s);
}

static const float *sort_by;
static int desc(const void *a, const void *b) {
  float x = sort_by[*(const int *)a], y = sort_by[*(const int *)b];
  return (x < y) - (x > y);
}

/* Expected probabilities by the textbook procedure: sort, keep top k, softmax at t, keep the
 * shortest prefix holding top_p of the mass, renormalize. */
static void expected(const float *l, int n, double t, int k, double p, double *prob) {
  int order[N];
  for (int i = 0; i < n; i++) order[i] = i;
  sort_by = l;
  qsort(order, (size_t)n, sizeof(int), desc);
  int keep = k > 0 && k < n ? k : n;
  double z[N], sum = 0;
  for (int i = 0; i < keep; i++) sum += z[i] = exp((l[order[i]] - l[order[0]]) / t);
  if (p > 0 && p < 1) {
    double acc = 0;
    for (int i = 0; i < keep; i++)
      if ((acc += z[i]) >= p * sum) {
        keep = i + 1;
        break;
      }
    sum = acc;
  }
  for (int i = 0; i < n; i++) prob[i] = 0;
  for (int i = 0; i < keep; i++) prob[order[i]] = z[i] / sum;
}

static void assert_matches(SamplerOptions o, uint64_t seed) {
  fill(seed);
  int count[N];
  double prob[N];
  counts_for(o, logits, N, count);
  expected(logits, N, o.temperature, o.top_k, o.top_p, prob);
  for (int i = 0; i < N; i++) {
    double want = prob[i] * GRID;
    if (fabs(count[i] - want) > 2.0) /* the grid quantizes each token's mass to whole uniforms */
      fail_msg("token %d: %d of %d uniforms, expected %.2f (T=%g k=%d p=%g)", i, count[i], GRID, want, o.temperature,
               o.top_k, o.top_p);
    if (prob[i] == 0) assert_int_equal(count[i], 0);
  }
}

static void temperature_only(void **state) {
  (void)state;
  assert_matches((SamplerOptions){.temperature = 1.0}, 1);
  assert_matches((SamplerOptions){.temperature = 0.5}, 2);
  assert_matches((SamplerOptions){.temperature = 2.5}, 3);
}

static void top_k_and_top_p(void **state) {
  (void)state;
  assert_matches((SamplerOptions){.temperature = 1.0, .top_k = 5}, 4);
  assert_matches((SamplerOptions){.temperature = 0.7, .top_k = 40, .top_p = 0.9}, 5);
  assert_matches((SamplerOptions){.temperature = 1.5, .top_p = 0.5}, 6);
  assert_matches((SamplerOptions){.temperature = 1.0, .top_k = 1}, 7); /* = greedy */
  assert_matches((SamplerOptions){.temperature = 1.0, .top_p = 0.01}, 8);
}

static void greedy_and_special_values(void **state) {
  (void)state;
  Sampler s;
  float l[6] = {NAN, 1.0f, 5.0f, 5.0f, -INFINITY, 2.0f};
  sampler_init(&s, &(SamplerOptions){.temperature = 0});
  for (int j = 0; j < 10; j++) assert_int_equal(sampler_pick(&s, (float)j / 10, l, 6), 2); /* first maximum */
  sampler_free(&s);
  sampler_init(&s, &(SamplerOptions){.greedy = 1, .temperature = 1});
  assert_int_equal(sampler_next(&s, l, 6), 2);
  sampler_free(&s);
  /* sampling: NaN and -inf never come out; ties at the top-k boundary are all kept */
  int count[6];
  counts_for((SamplerOptions){.temperature = 1, .top_k = 1}, l, 6, count);
  assert_int_equal(count[2] + count[3], GRID);
  assert_in_range(count[2], GRID / 2 - 1, GRID / 2 + 1);
  counts_for((SamplerOptions){.temperature = 1}, l, 6, count);
  assert_int_equal(count[0], 0);
  assert_int_equal(count[4], 0);
  assert_true(count[1] > 0 && count[5] > 0);
  /* nothing finite: the argmax rule decides */
  float none[3] = {-INFINITY, -INFINITY, -INFINITY};
  sampler_init(&s, &(SamplerOptions){.temperature = 1});
  assert_int_equal(sampler_pick(&s, 0.5f, none, 3), 0);
  sampler_free(&s);
}

static void seeds_repeat(void **state) {
  (void)state;
  fill(9);
  SamplerOptions o = {.temperature = 1.0, .seed = 1234};
  Sampler a, b, c;
  sampler_init(&a, &o);
  sampler_init(&b, &o);
  o.seed = 99;
  sampler_init(&c, &o);
  int same = 1, other = 0;
  for (int i = 0; i < 200; i++) {
    int x = sampler_next(&a, logits, N), y = sampler_next(&b, logits, N), z = sampler_next(&c, logits, N);
    same &= x == y;
    other += x != z;
  }
  assert_true(same);
  assert_true(other > 0);
  float u = sampler_draw(&a);
  assert_true(u >= 0.0f && u < 1.0f);
  sampler_free(&a);
  sampler_free(&b);
  sampler_free(&c);
}

/* A vocabulary-sized step: top-k and top-p thresholds over 151936 logits. */
static void large_vocabulary(void **state) {
  (void)state;
  enum { V = 151936 };
  float *l = malloc(sizeof(float) * V);
  uint64_t st = 5;
  for (int i = 0; i < V; i++) l[i] = (float)(splitmix64_unit(&st) * 10.0);
  l[100] = 30.0f; /* dominant: top_p = 0.9 keeps it alone */
  Sampler s;
  sampler_init(&s, &(SamplerOptions){.temperature = 1.0, .top_p = 0.9});
  for (int j = 0; j < 5; j++) assert_int_equal(sampler_pick(&s, (float)j / 5, l, V), 100);
  sampler_free(&s);
  sampler_init(&s, &(SamplerOptions){.temperature = 1.0, .top_k = 3});
  l[200] = 29.0f;
  l[300] = 29.0f;
  for (int j = 0; j < 20; j++) {
    int t = sampler_pick(&s, (float)j / 20, l, V);
    assert_true(t == 100 || t == 200 || t == 300);
  }
  sampler_free(&s);
  free(l);
}

static void device_source_compiles(void **state) {
  (void)state;
  const char *src = device_sampler_source();
  assert_contains(src, "lathe_sample(");
  if (!nvrtc_available()) skip();
  Diag d = {0};
  void *cubin = NULL;
  size_t size = 0;
  if (!nvrtc_compile(src, "sm_90", &cubin, &size, &d)) fail_msg("%s", d.msg);
  assert_true(size > 0);
  free(cubin);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(temperature_only),          cmocka_unit_test(top_k_and_top_p),
      cmocka_unit_test(greedy_and_special_values), cmocka_unit_test(seeds_repeat),
      cmocka_unit_test(large_vocabulary),          cmocka_unit_test(device_source_compiles),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
