/* The tune driver. The tuning process compiles (no device), forks a child for everything that touches the
 * device: the device query, the reference run with the default schedules, and each candidate's compile,
 * check and timing. Children inherit the compiled program and the reference outputs by fork. */
#include "tune.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../base/clock.h"
#include "../base/notice.h"
#include "../driver/execute.h"
#include "child.h"
#include "key.h"

typedef struct RefOutputs {
  int n;
  HostTensor t[LT_MAX_OUTPUTS];
} RefOutputs;

typedef struct Tuner {
  Compilation *c;
  TuneDb *db;
  const TuneOptions *o;
  Schedule *def;   /* each kernel's default */
  Schedule *given; /* what the child compiles */
  RefOutputs ref;
  /* the group being searched */
  const ScheduleSpace *space;
  int *members, nmembers;
  char key[24], bucket[128], device[256];
  TuneKernelReport *rep;
  int group, ngroups;
  double start_s, budget_end_s;
  int repeats; /* of the measurement being made */
} Tuner;

static double wall_s(void *ctx) {
  (void)ctx;
  return now_ms() / 1000;
}

/* ---- children ---- */

static int query_child(void *ctx, StrBuf *out) {
  Backend *(*open_backend)(Diag *) = *(Backend * (**)(Diag *)) ctx;
  Diag d = {0};
  Backend *be = open_backend(&d);
  if (!be) {
    sb_puts(out, d.msg);
    return 0;
  }
  sb_putn(out, &be->target, sizeof be->target);
  be->ops->destroy(be);
  return 1;
}

int tune_query_device(Backend *(*open_backend)(Diag *d), double timeout_s, TargetDesc *out, Diag *d) {
  StrBuf b = {0};
  char why[256];
  ChildStatus st = tune_run_child(query_child, &open_backend, timeout_s, &b, why, sizeof why);
  int ok = st == CHILD_OK && b.len == sizeof *out;
  if (ok) memcpy(out, b.data, sizeof *out);
  else if (st == CHILD_FAILED) diag_error(d, 0, 0, "%s", sb_str(&b));
  else diag_error(d, 0, 0, "opening the device to tune on: %s", why[0] ? why : "no description came back");
  sb_free(&b);
  return ok;
}

/* Compiles t->given and runs it once on the options' inputs (x set up; the caller frees it). */
static Backend *compile_and_run(Tuner *t, Execution *x, StrBuf *out) {
  Diag d = {0};
  Backend *be = NULL;
  if (!compile_schedules(t->c, t->given, ST_CODE, &d) || !(be = t->o->open_backend(&d)) ||
      !execute_program(t->c, be, &t->o->env, t->o->seed, x, &d)) {
    sb_puts(out, d.msg);
    if (be) execution_free(x), be->ops->destroy(be);
    return NULL;
  }
  return be;
}

static int reference_child(void *ctx, StrBuf *out) {
  Tuner *t = ctx;
  Execution x = {0};
  Backend *be = compile_and_run(t, &x, out);
  if (!be) return 0;
  int n = x.nout;
  sb_putn(out, &n, sizeof n);
  for (int i = 0; i < n; i++) {
    const HostTensor *h = &x.out[i];
    sb_putn(out, h, sizeof *h); /* the data pointer is replaced by the parent */
    sb_putn(out, h->data, (size_t)h->numel * dtype_size(h->dtype));
  }
  execution_free(&x);
  be->ops->destroy(be);
  return 1;
}

static int read_reference(Tuner *t, const StrBuf *b, Diag *d) {
  size_t at = 0;
  int n = 0;
  if (b->len < sizeof n) goto bad;
  memcpy(&n, b->data, sizeof n);
  at = sizeof n;
  if (n < 0 || n > LT_MAX_OUTPUTS) goto bad;
  for (int i = 0; i < n; i++) {
    HostTensor *h = &t->ref.t[i];
    if (b->len - at < sizeof *h) goto bad;
    memcpy(h, b->data + at, sizeof *h);
    at += sizeof *h;
    size_t bytes = (size_t)h->numel * dtype_size(h->dtype);
    if (h->numel < 0 || b->len - at < bytes) goto bad;
    h->data = malloc(bytes ? bytes : 1);
    memcpy(h->data, b->data + at, bytes);
    at += bytes;
    t->ref.n = i + 1;
  }
  return 1;
bad:
  diag_error(d, 0, 0, "tune: the reference run's outputs came back damaged");
  return 0;
}

/* Normwise relative difference of two runs' outputs, as compare_output measures against the reference:
 * NaN in the same places is equal, in only one of them +inf; integers must match exactly. */
static double difference(const HostTensor *a, const HostTensor *b) {
  if (a->numel != b->numel || a->dtype != b->dtype) return INFINITY;
  int exact = !dtype_is_float(a->dtype);
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a->numel; i++) {
    double x = host_get(a, i), y = host_get(b, i);
    if (isnan(x) || isnan(y)) {
      if (isnan(x) != isnan(y)) return INFINITY;
      continue;
    }
    if (isinf(x) || isinf(y)) {
      if (x != y) return INFINITY;
      continue;
    }
    if (exact && x != y) return INFINITY;
    diff = fmax(diff, fabs(x - y));
    scale = fmax(scale, fabs(y));
  }
  return diff / fmax(scale, 1e-6);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int measure_child(void *ctx, StrBuf *out) {
  Tuner *t = ctx;
  Execution x = {0};
  Backend *be = compile_and_run(t, &x, out);
  if (!be) return 0;
  TuneMeasurement m = {TS_OK, 0, 0, 0, 0, 0};
  for (int i = 0; i < x.nout && i < t->ref.n; i++) /* two computations, each within the tolerance */
    if (!(difference(&x.out[i], &t->ref.t[i]) <= 2 * check_tolerance(x.out[i].dtype, t->c->matmul)))
      m.status = TS_WRONG;
  if (x.nout != t->ref.n) m.status = TS_WRONG;
  Diag d = {0};
  double *ms = calloc((size_t)t->repeats, sizeof *ms);
  if (m.status == TS_OK) {
    if (!plan_bench_times(x.plan, &t->o->env, x.in_ptr, t->o->warmup, t->repeats, ms, &d)) {
      sb_puts(out, d.msg);
      free(ms);
      execution_free(&x);
      be->ops->destroy(be);
      return 0;
    }
    qsort(ms, (size_t)t->repeats, sizeof *ms, cmp_double);
    int r = t->repeats;
    m.median_us = 1000 * (r % 2 ? ms[r / 2] : 0.5 * (ms[r / 2 - 1] + ms[r / 2]));
    m.min_us = 1000 * ms[0];
    m.max_us = 1000 * ms[r - 1];
    m.samples = r;
  }
  free(ms);
  sb_putn(out, &m, sizeof m);
  execution_free(&x);
  be->ops->destroy(be);
  return 1;
}

/* ---- the search's measurement: candidate i on every kernel of the group ---- */

static void record(Tuner *t, int candidate, const TuneMeasurement *m) {
  TuneRecord r = {0};
  snprintf(r.kernel, sizeof r.kernel, "%s", t->key);
  snprintf(r.bucket, sizeof r.bucket, "%s", t->bucket);
  snprintf(r.device, sizeof r.device, "%s", t->device);
  snprintf(r.compiler, sizeof r.compiler, "%s", TUNE_COMPILER_IDENTITY);
  StrBuf s = {0};
  schedule_format(&s, &t->space->s[candidate]);
  snprintf(r.schedule, sizeof r.schedule, "%s", sb_str(&s));
  sb_free(&s);
  snprintf(r.name, sizeof r.name, "%s", t->c->loop->kernels[t->members[0]].name);
  r.status = m->status;
  r.median_us = m->median_us, r.min_us = m->min_us, r.max_us = m->max_us;
  r.samples = m->samples;
  r.time = (int64_t)time(NULL);
  Diag d = {0};
  if (!tune_db_add(t->db, &r, &d)) notice(NOTICE_WARNING, "%s (measurement not kept)", d.msg);
}

static int measure(void *ctx, int candidate, int repeats, TuneMeasurement *m, Diag *d) {
  Tuner *t = ctx;
  const LProgram *p = t->c->loop;
  memcpy(t->given, t->def, sizeof *t->given * (size_t)p->nkernels);
  for (int j = 0; j < t->nmembers; j++) {
    int k = t->members[j];
    Diag ignored = {0};
    /* a member whose neighbours make this schedule illegal (an attention match) keeps its default */
    if (schedule_check(p, &p->kernels[k], &t->c->device, &t->space->s[candidate], &ignored))
      t->given[k] = t->space->s[candidate];
  }
  t->repeats = repeats;
  StrBuf b = {0};
  char why[256];
  ChildStatus st = tune_run_child(measure_child, t, t->o->timeout_s, &b, why, sizeof why);
  memset(m, 0, sizeof *m);
  if (st == CHILD_OK && b.len == sizeof *m) {
    memcpy(m, b.data, sizeof *m);
  } else if (st == CHILD_TIMEOUT) {
    m->status = TS_TIMEOUT;
  } else {
    m->status = TS_FAULT;
    StrBuf s = {0};
    schedule_format(&s, &t->space->s[candidate]);
    notice(NOTICE_WARNING, "tune %s [%s]: %s", p->kernels[t->members[0]].name, sb_str(&s),
           st == CHILD_FAILED ? sb_str(&b) : why);
    sb_free(&s);
  }
  sb_free(&b);
  record(t, candidate, m);
  (void)d;
  return 1;
}

static void progress(void *ctx, int tried, int best, double best_us, double left_s) {
  Tuner *t = ctx;
  TuneKernelReport *r = t->rep;
  r->tried = tried;
  r->best_us = best_us;
  (void)best;
  if (tried == 1) r->default_us = best_us;
  if (!t->o->progress) return;
  TuneProgress p = {r->name, t->group, t->ngroups, t->nmembers, tried, t->space->n, r->default_us, best_us, left_s};
  t->o->progress(t->o->progress_ctx, &p);
}

/* The whole program with the given schedules, timed in a child (the assembled step against its parts). */
static double time_program(Tuner *t, const Schedule *s) {
  memcpy(t->given, s, sizeof *t->given * (size_t)t->c->loop->nkernels);
  t->repeats = t->o->lim.repeats > 0 ? t->o->lim.repeats : 1;
  StrBuf b = {0};
  char why[256];
  TuneMeasurement m = {0};
  if (tune_run_child(measure_child, t, t->o->timeout_s, &b, why, sizeof why) == CHILD_OK && b.len == sizeof m)
    memcpy(&m, b.data, sizeof m);
  sb_free(&b);
  return m.status == TS_OK ? m.median_us : -1;
}

int tune_compilation(Compilation *c, TuneDb *db, const TuneOptions *o, TuneReport *r, Diag *d) {
  memset(r, 0, sizeof *r);
  const LProgram *p = c->loop;
  const int nk = p->nkernels;
  Tuner t = {c, db, o, NULL, NULL, {0}, NULL, NULL, 0, "", "", "", NULL, 0, 0, 0, 0, 1};
  t.def = calloc((size_t)nk + 1, sizeof *t.def);
  t.given = calloc((size_t)nk + 1, sizeof *t.given);
  t.members = calloc((size_t)nk + 1, sizeof *t.members);
  char(*keys)[24] = calloc((size_t)nk + 1, sizeof *keys);
  r->k = calloc((size_t)nk + 1, sizeof *r->k);
  int ok = 1;
  for (int i = 0; i < nk; i++) {
    t.def[i] = c->tile->kernels[i].s;
    tune_kernel_key(p, &p->kernels[i], c->matmul, keys[i]);
  }
  tune_device_identity(&c->device, o->driver, t.device, sizeof t.device);
  /* the reference: the default schedules' outputs */
  memcpy(t.given, t.def, sizeof *t.given * (size_t)nk);
  StrBuf b = {0};
  char why[256];
  ChildStatus st = tune_run_child(reference_child, &t, o->timeout_s, &b, why, sizeof why);
  if (st != CHILD_OK) {
    diag_error(d, 0, 0, "tune: the default schedules did not run: %s", st == CHILD_FAILED ? sb_str(&b) : why);
    ok = 0;
  }
  ok = ok && read_reference(&t, &b, d);
  sb_free(&b);
  /* kernels of one structure are tuned once, in program order */
  int ngroups = 0;
  for (int i = 0; i < nk; i++) {
    int first = 1;
    for (int j = 0; j < i; j++) first &= strcmp(keys[i], keys[j]) != 0;
    ngroups += first;
  }
  t.ngroups = ngroups;
  t.start_s = wall_s(NULL);
  for (int i = 0; ok && i < nk; i++) {
    int first = 1;
    for (int j = 0; j < i; j++) first &= strcmp(keys[i], keys[j]) != 0;
    if (!first) continue;
    t.nmembers = 0;
    for (int j = i; j < nk; j++)
      if (!strcmp(keys[i], keys[j])) t.members[t.nmembers++] = j;
    /* the budget is the whole run's: each search gets what is left */
    TuneLimits lim = o->lim;
    if (o->lim.budget_s > 0) {
      lim.budget_s = o->lim.budget_s - (wall_s(NULL) - t.start_s);
      if (lim.budget_s <= 0) {
        r->untuned++;
        continue;
      }
    }
    ScheduleSpace sp;
    if (!schedule_space(p, &p->kernels[i], &c->device, c->matmul, &t.def[i], &sp, d)) {
      ok = 0;
      break;
    }
    t.group = r->n + r->untuned;
    TuneKernelReport *kr = &r->k[r->n++];
    snprintf(kr->key, sizeof kr->key, "%s", keys[i]);
    snprintf(kr->name, sizeof kr->name, "%s", p->kernels[i].name);
    kr->members = t.nmembers;
    kr->candidates = sp.n;
    t.space = &sp;
    t.rep = kr;
    snprintf(t.key, sizeof t.key, "%s", keys[i]);
    tune_kernel_bucket(p, &p->kernels[i], &o->env, t.bucket, sizeof t.bucket);
    TuneSearchOps ops = {&t, measure, wall_s, progress};
    TuneSearchResult res;
    ok = tune_search(&sp, &lim, &ops, &res, d);
    if (ok) {
      kr->tried = res.tried;
      kr->stop = res.stop;
      kr->default_us = res.m[0].median_us;
      kr->best_us = res.m[res.best].median_us;
      StrBuf s = {0};
      schedule_format(&s, &sp.s[res.best]);
      snprintf(kr->best, sizeof kr->best, "%s", sb_str(&s));
      sb_free(&s);
      for (int j = 0; j < sp.n; j++) {
        kr->wrong += res.m[j].status == TS_WRONG && res.m[j].measured;
        kr->faults += res.m[j].status == TS_FAULT && res.m[j].measured;
        kr->timeouts += res.m[j].status == TS_TIMEOUT && res.m[j].measured;
      }
      /* later groups are searched with this one's best in place */
      for (int j = 0; j < t.nmembers; j++) {
        Diag ignored = {0};
        if (schedule_check(p, &p->kernels[t.members[j]], &c->device, &sp.s[res.best], &ignored))
          t.def[t.members[j]] = sp.s[res.best];
      }
    }
    free(res.m);
  }
  /* the assembled program: every best in place, against every default */
  if (ok && r->n) {
    r->tuned_us = time_program(&t, t.def);
    Schedule *defaults = calloc((size_t)nk + 1, sizeof *defaults);
    for (int i = 0; i < nk; i++) defaults[i] = c->tile->kernels[i].s;
    r->default_us = time_program(&t, defaults);
    free(defaults);
  }
  for (int i = 0; i < t.ref.n; i++) free(t.ref.t[i].data);
  free(t.def);
  free(t.given);
  free(t.members);
  free(keys);
  return ok;
}
