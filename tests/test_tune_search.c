/* The search (tune/search.c) against a fake device and a fake clock: it finds a planted best, respects
 * --max-candidates, --patience and --budget-s, records a planted fault and a planted wrong result and never
 * chooses them, and measures near-ties again. */
#include "testutil.h"
#include <stdlib.h>
#include "driver/pipeline.h"
#include "tune/search.h"

typedef struct Fake {
  double clock;       /* seconds */
  double step_s;      /* each measurement takes this long */
  double us[512];     /* the time of each candidate */
  double again[512];  /* when > 0: its time when measured a second time */
  TuneStatus st[512]; /* planted statuses */
  int calls[512];
  int total_calls;
  int progress_calls;
  int order[1024];   /* candidates in the order measured */
  double score[512]; /* the fake prior's */
} Fake;

static int fake_measure(void *ctx, int i, int repeats, TuneMeasurement *m, Diag *d) {
  Fake *f = ctx;
  (void)d;
  f->clock += f->step_s;
  if (f->total_calls < 1024) f->order[f->total_calls] = i;
  f->total_calls++;
  double us = f->calls[i]++ && f->again[i] > 0 ? f->again[i] : f->us[i];
  m->status = f->st[i];
  m->samples = repeats;
  m->median_us = m->min_us = m->max_us = f->st[i] == TS_OK || f->st[i] == TS_WRONG ? us : 0;
  return 1;
}
static double fake_now(void *ctx) { return ((Fake *)ctx)->clock; }
static void fake_progress(void *ctx, int tried, int best, double best_us, double left) {
  (void)tried, (void)best, (void)best_us, (void)left;
  ((Fake *)ctx)->progress_calls++;
}

static Compilation *cpu_linear(ScheduleSpace *sp) {
  Compilation *c = compilation_new(TARGET_CPU, NULL);
  Diag d = {0};
  if (!compile_source(c, "x: f32[seq, 64]; w: f32[96, 64]; y = linear(x, w)", ST_TILE, &d)) fail_msg("%s", d.msg);
  assert_true(schedule_space(c->loop, &c->loop->kernels[0], &c->device, MM_HIGH, &c->tile->kernels[0].s, sp, &d));
  assert_true(sp->n > 20);
  return c;
}

static void plant(Fake *f, int n) {
  memset(f, 0, sizeof *f);
  f->step_s = 1;
  for (int i = 0; i < n; i++) f->us[i] = 100 + i; /* all slower than the default but the planted ones */
  f->us[0] = 50;
}

static TuneSearchOps ops_of(Fake *f) { return (TuneSearchOps){f, fake_measure, fake_now, fake_progress}; }
static double fake_score(void *ctx, int i) { return ((Fake *)ctx)->score[i]; }

static void finds_planted_best_past_fault_and_wrong(void **state) {
  (void)state;
  ScheduleSpace sp;
  Compilation *c = cpu_linear(&sp);
  Fake f;
  plant(&f, sp.n);
  const int best = sp.n - 3, wrong = sp.n - 2, fault = 5;
  f.us[best] = 20;
  f.us[wrong] = 1; /* fastest of all, but wrong */
  f.st[wrong] = TS_WRONG;
  f.st[fault] = TS_FAULT;
  f.st[7] = TS_TIMEOUT;
  TuneLimits lim = {0, 0, 0, 0.03, 3};
  TuneSearchOps ops = ops_of(&f);
  TuneSearchResult r;
  Diag d = {0};
  assert_true(tune_search(&sp, &lim, &ops, &r, &d));
  assert_int_equal(r.best, best);
  assert_int_equal(r.tried, sp.n);
  assert_int_equal(r.stop, STOP_EXHAUSTED);
  assert_int_equal(r.m[wrong].status, TS_WRONG);
  assert_int_equal(r.m[fault].status, TS_FAULT);
  assert_int_equal(r.m[7].status, TS_TIMEOUT);
  assert_int_equal(r.m[best].samples, 3);
  assert_int_equal(f.total_calls, sp.n); /* no near-ties: nothing measured twice */
  assert_int_equal(f.progress_calls, sp.n);
  free(r.m);
  compilation_free(c);
}

static void respects_max_candidates_and_patience(void **state) {
  (void)state;
  ScheduleSpace sp;
  Compilation *c = cpu_linear(&sp);
  Fake f;
  plant(&f, sp.n);
  TuneLimits lim = {5, 0, 0, 0.03, 1};
  TuneSearchOps ops = ops_of(&f);
  TuneSearchResult r;
  Diag d = {0};
  assert_true(tune_search(&sp, &lim, &ops, &r, &d));
  assert_int_equal(r.tried, 5);
  assert_int_equal(r.stop, STOP_MAX_CANDIDATES);
  assert_int_equal(r.best, 0);
  free(r.m);
  /* patience 3: the default and three that are no better */
  plant(&f, sp.n);
  lim = (TuneLimits){0, 3, 0, 0.03, 1};
  assert_true(tune_search(&sp, &lim, &ops, &r, &d));
  assert_int_equal(r.tried, 4);
  assert_int_equal(r.stop, STOP_PATIENCE);
  free(r.m);
  /* an improvement resets patience: the nearest neighbours of the default are tried first */
  plant(&f, sp.n);
  int first_neighbour = -1;
  for (int i = 1; i < sp.n && first_neighbour < 0; i++)
    if (schedule_distance(&sp.s[i], &sp.s[0]) == 1) first_neighbour = i;
  assert_true(first_neighbour > 0);
  f.us[first_neighbour] = 10;
  assert_true(tune_search(&sp, &lim, &ops, &r, &d));
  assert_int_equal(r.best, first_neighbour);
  assert_int_equal(r.tried, 2 + 3);
  free(r.m);
  compilation_free(c);
}

static void respects_budget(void **state) {
  (void)state;
  ScheduleSpace sp;
  Compilation *c = cpu_linear(&sp);
  Fake f;
  plant(&f, sp.n);
  f.step_s = 2;
  TuneLimits lim = {0, 0, 7, 0.03, 1};
  TuneSearchOps ops = ops_of(&f);
  TuneSearchResult r;
  Diag d = {0};
  assert_true(tune_search(&sp, &lim, &ops, &r, &d));
  /* measurements start at 0, 2, 4 and 6 s; at 8 s the budget of 7 s is spent */
  assert_int_equal(r.tried, 4);
  assert_int_equal(r.stop, STOP_BUDGET);
  assert_true(f.clock <= 7 + f.step_s);
  free(r.m);
  compilation_free(c);
}

static void near_ties_measured_again(void **state) {
  (void)state;
  ScheduleSpace sp;
  Compilation *c = cpu_linear(&sp);
  Fake f;
  plant(&f, sp.n);
  f.us[3] = 30, f.again[3] = 31;   /* first the best, */
  f.us[4] = 30.5, f.again[4] = 25; /* within 3%: measured again, faster the second time */
  f.us[9] = 30.4, f.again[9] = 20;
  f.st[9] = TS_OK;
  TuneLimits lim = {0, 0, 0, 0.03, 2};
  TuneSearchOps ops = ops_of(&f);
  TuneSearchResult r;
  Diag d = {0};
  assert_true(tune_search(&sp, &lim, &ops, &r, &d));
  assert_int_equal(r.best, 9);
  assert_int_equal(f.total_calls, sp.n + 3);
  assert_int_equal(r.m[9].measured, 2);
  assert_int_equal(r.m[9].samples, 4); /* twice the runs */
  assert_int_equal(r.m[0].measured, 1);
  free(r.m);
  compilation_free(c);
}

static void default_must_run(void **state) {
  (void)state;
  ScheduleSpace sp;
  Compilation *c = cpu_linear(&sp);
  Fake f;
  plant(&f, sp.n);
  f.st[0] = TS_FAULT;
  TuneLimits lim = {0, 0, 0, 0.03, 1};
  TuneSearchOps ops = ops_of(&f);
  TuneSearchResult r;
  Diag d = {0};
  assert_false(tune_search(&sp, &lim, &ops, &r, &d));
  assert_contains(d.msg, "the default schedule did not run (fault)");
  free(r.m);
  compilation_free(c);
}

/* The prior as the search's policy: a best many knobs from the default, which the nearest-first order does not reach
 * within 4 candidates, is measured second when the prior ranks it first; among the nearest candidates the prior's
 * order decides; a prior that ranks the default first changes nothing; a misleading prior costs one measurement,
 * and the exhaustive search still finds the planted best. */
static void prior_is_the_policy(void **state) {
  (void)state;
  ScheduleSpace sp;
  Compilation *c = cpu_linear(&sp);
  int far = -1;
  for (int i = 1; i < sp.n; i++)
    if (far < 0 || schedule_distance(&sp.s[i], &sp.s[0]) > schedule_distance(&sp.s[far], &sp.s[0])) far = i;
  assert_true(schedule_distance(&sp.s[far], &sp.s[0]) >= 3);
  Fake f;
  TuneLimits lim = {4, 0, 0, 0.03, 1};
  TuneSearchResult r;
  Diag d = {0};
  /* no prior: not found in 4 */
  plant(&f, sp.n);
  f.us[far] = 10;
  TuneSearchOps ops = ops_of(&f);
  assert_true(tune_search(&sp, &lim, &ops, &r, &d));
  assert_int_equal(r.best, 0);
  free(r.m);
  /* the prior ranks it first: measured second */
  plant(&f, sp.n);
  f.us[far] = 10;
  for (int i = 0; i < sp.n; i++) f.score[i] = -schedule_distance(&sp.s[i], &sp.s[far]);
  ops.score = fake_score;
  assert_true(tune_search(&sp, &lim, &ops, &r, &d));
  assert_int_equal(f.order[1], far);
  assert_int_equal(r.best, far);
  free(r.m);
  /* the nearest candidates in the prior's order: of two at the same distance from the default (a space of just
   * them), the listed-first without a prior, the higher-scored with one */
  int x = -1, y = -1;
  for (int i = 1; i < sp.n && y < 0; i++)
    for (int j = i + 1; j < sp.n && y < 0; j++)
      if (schedule_distance(&sp.s[i], &sp.s[0]) == schedule_distance(&sp.s[j], &sp.s[0])) x = i, y = j;
  assert_true(y > 0);
  Schedule three[3] = {sp.s[0], sp.s[x], sp.s[y]};
  ScheduleSpace small = {three, 3};
  lim.max_candidates = 2;
  plant(&f, 3);
  ops.score = NULL;
  assert_true(tune_search(&small, &lim, &ops, &r, &d));
  assert_int_equal(f.order[1], 1);
  free(r.m);
  plant(&f, 3);
  f.score[0] = 9, f.score[1] = 1, f.score[2] = 2; /* the default ranked first: no policy pick, the order decides */
  ops.score = fake_score;
  assert_true(tune_search(&small, &lim, &ops, &r, &d));
  assert_int_equal(f.order[1], 2);
  free(r.m);
  /* a misleading prior (its pick is slow) and no limit: the planted best is still found, with no extra cost but
   * the one measurement */
  plant(&f, sp.n);
  const int best = sp.n - 3;
  f.us[best] = 20;
  for (int i = 0; i < sp.n; i++) f.score[i] = 0;
  f.score[far == 1 ? 2 : 1] = 5;
  lim.max_candidates = 0;
  assert_true(tune_search(&sp, &lim, &ops, &r, &d));
  assert_int_equal(f.order[1], far == 1 ? 2 : 1);
  assert_int_equal(r.best, best);
  assert_int_equal(r.tried, sp.n);
  free(r.m);
  compilation_free(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(finds_planted_best_past_fault_and_wrong),
      cmocka_unit_test(respects_max_candidates_and_patience),
      cmocka_unit_test(respects_budget),
      cmocka_unit_test(near_ties_measured_again),
      cmocka_unit_test(default_must_run),
      cmocka_unit_test(prior_is_the_policy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
