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
#include "../driver/check.h"
#include "../runtime/plan.h"
#include "child.h"
#include "key.h"
#include "prior.h"

typedef struct RefOutputs {
  int n;
  HostTensor t[LT_MAX_OUTPUTS];
} RefOutputs;

/* What the measuring child keeps between requests: its backend, the inputs and the default schedules'
 * outputs (computed by the child itself on its first request, so a restarted child checks the same way). */
typedef struct WorkerState {
  Backend *be;
  HostTensor in[LT_MAX_INPUTS];
  void *in_ptr[LT_MAX_INPUTS];
  int nin;
  RefOutputs ref;
} WorkerState;

typedef struct Tuner {
  Compilation *c;
  TuneDb *db;
  const TuneOptions *o;
  Schedule *orig;  /* each kernel's default, as compiled */
  Schedule *def;   /* the defaults with the earlier structures' bests in place */
  Schedule *given; /* what is measured */
  /* the group being searched */
  const ScheduleSpace *space;
  int *members, nmembers;
  int *slots, nslots; /* the launches timed: the members and the kernels their candidates may absorb */
  char key[24], bucket[128], device[256];
  TuneKernelReport *rep;
  int group, ngroups;
  double start_s;
  TuneWorker w;
  WorkerState ws;                   /* the child's (unused in the tuning process) */
  double kf[PRIOR_KERNEL_FEATURES]; /* the group's kernel features for the prior */
} Tuner;

/* The prior's score of the group's candidate i (TuneSearchOps.score). */
static double prior_score_of(void *ctx, int i) {
  Tuner *t = ctx;
  return prior_score(t->o->prior, t->kf, &t->space->s[i]);
}

/* A request to the measuring child: what to time, then one Schedule per kernel, then the slots. */
/* REQ_GROUPS: several groups' kernels timed apart in one run of the program, their slots separated by -1 */
enum { REQ_START, REQ_KERNELS, REQ_PROGRAM, REQ_GROUPS };
typedef struct Request {
  int kind, repeats, nslots;
} Request;

/* The child serves this many requests, then a new one starts: each candidate's compile adds to the
 * compilation's arena, which only a new process gives back. */
#define WORKER_REQUESTS 200

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

static void free_outputs(RefOutputs *r) {
  for (int i = 0; i < r->n; i++) host_tensor_free(&r->t[i]);
  r->n = 0;
}

/* Compiles `given` and runs it once on the child's inputs, outputs into out (poisoned first: an element no
 * kernel writes fails the check). Graph replay for a decode step (seq = 1), as generation runs it. */
static Plan *compile_and_run(Tuner *t, const Schedule *given, RefOutputs *out, int *device_used, Diag *d) {
  const LProgram *lp = t->c->loop;
  WorkerState *w = &t->ws;
  *device_used = 0;
  if (!compile_schedules(t->c, given, ST_CODE, d)) return NULL;
  *device_used = 1;
  Plan *plan = plan_new(t->c->launch, sb_str(&t->c->code), w->be, d);
  if (!plan) return NULL;
  int64_t seq;
  if (symenv_get(&t->o->env, "seq", &seq) && seq == 1) plan_use_graphs(plan, "seq", 1);
  void *outp[LT_MAX_OUTPUTS];
  out->n = 0;
  for (int i = 0; i < lp->noutputs; i++) {
    const LBuf *b = &lp->bufs[lp->outputs[i]];
    if (!host_tensor_alloc(&out->t[i], b->dtype, &b->shape, &t->o->env, d)) break;
    outp[out->n++] = out->t[i].data;
  }
  if (out->n < lp->noutputs || !plan_run(plan, &t->o->env, w->in_ptr, outp, d)) {
    free_outputs(out);
    plan_free(plan);
    return NULL;
  }
  return plan;
}

/* The child's start: the backend, the random inputs and the default schedules' outputs. */
static int worker_start(Tuner *t, StrBuf *out) {
  WorkerState *w = &t->ws;
  Diag d = {0};
  if (!(w->be = t->o->open_backend(&d))) goto fail;
  backend_cuda_stable_units(w->be, 1); /* a candidate recompiles its own kernel's unit only */
  if (!graph_check_sizes(t->c->graph, &t->o->env, &d) ||
      !make_inputs(t->c->graph, &t->o->env, t->o->seed, w->in, NULL, &d))
    goto fail;
  w->nin = t->c->graph->ninputs;
  for (int i = 0; i < w->nin; i++) w->in_ptr[i] = w->in[i].data;
  int used;
  Plan *plan = compile_and_run(t, t->orig, &w->ref, &used, &d);
  if (!plan) goto fail;
  plan_free(plan);
  return 1;
fail:
  sb_printf(out, "the default schedules did not run: %s", d.msg);
  return -1;
}

/* One candidate (or the whole program): compiled, run, checked against the defaults' outputs, timed. */
static int serve(void *ctx, const char *req, size_t n, StrBuf *out) {
  Tuner *t = ctx;
  const int nk = t->c->loop->nkernels;
  Request q;
  if (n < sizeof q) return -1;
  memcpy(&q, req, sizeof q);
  if (q.kind == REQ_START) return worker_start(t, out);
  if (q.repeats < 1 || q.nslots < 0 || n != sizeof q + sizeof *t->given * (size_t)nk + sizeof(int) * (size_t)q.nslots)
    return -1;
  memcpy(t->given, req + sizeof q, sizeof *t->given * (size_t)nk);
  const int *slots = (const int *)(req + sizeof q + sizeof *t->given * (size_t)nk);
  Diag d = {0};
  RefOutputs got = {0};
  int used;
  Plan *plan = compile_and_run(t, t->given, &got, &used, &d);
  if (!plan) { /* the code stage's refusal leaves the device as it was; a failed compile or run may not */
    sb_puts(out, d.msg);
    return used ? -1 : 0;
  }
  TuneMeasurement m = {TS_OK, 0, 0, 0, 0, 0};
  for (int i = 0; i < got.n && i < t->ws.ref.n; i++) { /* two computations, each within the tolerance */
    double tol = check_tolerance(got.t[i].dtype, t->c->matmul);
    if (!(difference(&got.t[i], &t->ws.ref.t[i]) <= 2 * tol)) m.status = TS_WRONG;
  }
  if (got.n != t->ws.ref.n) m.status = TS_WRONG;
  free_outputs(&got);
  double *ms = calloc((size_t)q.repeats, sizeof *ms);
  int ok = ms != NULL;
  /* one measurement per run of slots between -1 separators (REQ_KERNELS: one run; REQ_PROGRAM: the program) */
  for (int from = 0; ok;) {
    int to = from;
    while (to < q.nslots && slots[to] >= 0) to++;
    TuneMeasurement g = m;
    if (g.status == TS_OK) {
      ok = q.kind == REQ_PROGRAM
               ? plan_bench_times(plan, &t->o->env, t->ws.in_ptr, t->o->warmup, q.repeats, ms, &d)
               : plan_bench_slots(plan, &t->o->env, slots + from, to - from, t->o->warmup, q.repeats, ms, &d);
      if (ok) {
        qsort(ms, (size_t)q.repeats, sizeof *ms, cmp_double);
        int r = q.repeats;
        g.median_us = 1000 * (r % 2 ? ms[r / 2] : 0.5 * (ms[r / 2 - 1] + ms[r / 2]));
        g.min_us = 1000 * ms[0];
        g.max_us = 1000 * ms[r - 1];
        g.samples = r;
      }
    }
    if (ok) sb_putn(out, &g, sizeof g);
    if (q.kind != REQ_GROUPS || to >= q.nslots) break;
    from = to + 1;
  }
  free(ms);
  plan_free(plan);
  if (!ok) {
    sb_clear(out);
    sb_puts(out, d.msg[0] ? d.msg : "out of memory for the timings");
    return -1; /* a launch failed: the device context may be gone */
  }
  return 1;
}

/* Sends one request, starting the child first where none runs; the status and reply as tune_worker_call. */
static ChildStatus call_worker(Tuner *t, int kind, int repeats, const Schedule *given, StrBuf *b, char *why,
                               size_t nwhy, Diag *d) {
  const int nk = t->c->loop->nkernels;
  if (t->w.pid && t->w.served >= WORKER_REQUESTS) tune_worker_stop(&t->w);
  if (!t->w.pid) {
    if (!tune_worker_start(&t->w, serve, t, why, nwhy)) {
      diag_error(d, 0, 0, "tune: %s", why);
      return CHILD_FAILED;
    }
    Request q = {REQ_START, 1, 0};
    StrBuf r = {0};
    /* the start compiles the whole program (cold: every unit) and makes the inputs: more than a candidate */
    ChildStatus st = tune_worker_call(&t->w, &q, sizeof q, fmax(t->o->timeout_s, 600), &r, why, nwhy);
    if (st != CHILD_OK) {
      diag_error(d, 0, 0, "tune: %s", st == CHILD_FAILED ? sb_str(&r) : why);
      sb_free(&r);
      tune_worker_stop(&t->w);
      return CHILD_FAILED;
    }
    sb_free(&r);
  }
  Request q = {kind, repeats, kind == REQ_PROGRAM ? 0 : t->nslots};
  StrBuf req = {0};
  sb_putn(&req, &q, sizeof q);
  sb_putn(&req, given, sizeof *given * (size_t)nk);
  if (q.nslots) sb_putn(&req, t->slots, sizeof *t->slots * (size_t)q.nslots);
  ChildStatus st = tune_worker_call(&t->w, req.data, req.len, t->o->timeout_s, b, why, nwhy);
  sb_free(&req);
  return st;
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
  StrBuf b = {0};
  char why[256];
  ChildStatus st = call_worker(t, REQ_KERNELS, repeats, t->given, &b, why, sizeof why, d);
  if (d->set) { /* the measuring child itself did not start: nothing can be measured */
    sb_free(&b);
    return 0;
  }
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
  return 1;
}

/* The launches a group's candidates are timed by: its members, and the scores and softmax kernels that a
 * member's flash attention or flash-decoding candidate computes itself (they launch in the default, not in
 * such a candidate: both sides are timed over the same work). In launch order. */
static void group_slots(Tuner *t, const ScheduleSpace *sp) {
  const LProgram *p = t->c->loop;
  unsigned char *in = calloc((size_t)p->nkernels + 1, 1);
  for (int j = 0; j < t->nmembers; j++) in[t->members[j]] = 1;
  for (int j = 0; j < p->nkernels; j++) {
    int by = t->c->tile->kernels[j].c.by;
    for (int m = 0; by >= 0 && m < t->nmembers; m++) in[j] |= t->members[m] == by;
  }
  for (int i = 0; i < sp->n; i++) {
    if (!sp->s[i].flash && !sp->s[i].flash_decode) continue;
    for (int j = 0; j < t->nmembers; j++) {
      TileChoice c;
      Diag ignored = {0};
      if (!schedule_check(p, &p->kernels[t->members[j]], &t->c->device, &sp->s[i], &ignored) ||
          !tile_choose(p, &p->kernels[t->members[j]], &t->c->device, &sp->s[i], &c, &ignored))
        continue;
      const AttnMatch *am[2] = {c.flash, c.decode};
      for (int a = 0; a < 2; a++)
        if (am[a]) in[am[a]->scores_kernel] = in[am[a]->softmax_kernel] = 1;
    }
  }
  t->nslots = 0;
  for (int k = 0; k < p->nkernels; k++)
    if (in[k]) t->slots[t->nslots++] = k;
  free(in);
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

/* The whole program with the given schedules (the assembled step against its parts). */
static double time_program(Tuner *t, const Schedule *s, Diag *d) {
  StrBuf b = {0};
  char why[256];
  TuneMeasurement m = {0};
  int repeats = t->o->lim.repeats > 0 ? t->o->lim.repeats : 1;
  if (call_worker(t, REQ_PROGRAM, repeats, s, &b, why, sizeof why, d) == CHILD_OK && b.len == sizeof m)
    memcpy(&m, b.data, sizeof m);
  sb_free(&b);
  return m.status == TS_OK ? m.median_us : -1;
}

/* The group led by kernel i: its members (every kernel of i's key), its space (the candidates that launch
 * differently at the tuned sizes), its key, bucket and timed slots. */
static int group_setup(Tuner *t, int i, char (*keys)[24], ScheduleSpace *sp, Diag *d) {
  const LProgram *p = t->c->loop;
  t->nmembers = 0;
  for (int j = i; j < p->nkernels; j++)
    if (!strcmp(keys[i], keys[j])) t->members[t->nmembers++] = j;
  if (!schedule_space(p, &p->kernels[i], &t->c->device, t->c->matmul, &t->def[i], sp, d)) return 0;
  schedule_space_at(&p->kernels[i], &t->o->env, t->c->device.kind, sp); /* what launches the same here, once */
  snprintf(t->key, sizeof t->key, "%s", keys[i]);
  tune_kernel_bucket(p, &p->kernels[i], &t->o->env, t->bucket, sizeof t->bucket);
  group_slots(t, sp);
  return 1;
}

/* Every group's default timed in one request (REQ_GROUPS): weight[g], 0 where it did not measure ok. */
static int default_weights(Tuner *t, const int *lead, int ngroups, char (*keys)[24], double *weight, Diag *d) {
  const int nk = t->c->loop->nkernels;
  const TuneOptions *o = t->o;
  int ok = 1;
  int *all = calloc((size_t)(nk + 2) * (size_t)(ngroups + 1), sizeof *all), n = 0;
  for (int g = 0; ok && g < ngroups; g++) {
    ScheduleSpace sp;
    if (!(ok = group_setup(t, lead[g], keys, &sp, d))) break;
    if (g) all[n++] = -1;
    memcpy(all + n, t->slots, sizeof *all * (size_t)t->nslots);
    n += t->nslots;
  }
  int *own = t->slots, nown = t->nslots;
  t->slots = all, t->nslots = n;
  StrBuf b = {0};
  char why[256];
  ChildStatus st =
      ok ? call_worker(t, REQ_GROUPS, o->lim.repeats > 0 ? o->lim.repeats : 1, t->def, &b, why, sizeof why, d)
         : CHILD_FAILED;
  ok = ok && !d->set;
  TuneMeasurement m;
  for (int g = 0; st == CHILD_OK && b.len == sizeof m * (size_t)ngroups && g < ngroups; g++) {
    memcpy(&m, b.data + sizeof m * (size_t)g, sizeof m);
    weight[g] = m.status == TS_OK && m.median_us > 0 ? m.median_us : 0;
  }
  sb_free(&b);
  t->slots = own, t->nslots = nown;
  free(all);
  return ok;
}

/* Group numbers by weight, heaviest first (malloc'ed). */
static int *heaviest_first(const double *weight, int ngroups) {
  int *order = calloc((size_t)ngroups + 1, sizeof *order);
  for (int g = 0; g < ngroups; g++) order[g] = g;
  for (int a = 0; a < ngroups; a++)
    for (int b = a + 1; b < ngroups; b++)
      if (weight[order[b]] > weight[order[a]]) {
        int x = order[a];
        order[a] = order[b], order[b] = x;
      }
  return order;
}

int tune_report_parts(TuneReport *r) {
  r->parts_default_us = r->parts_tuned_us = 0;
  if (r->untuned || r->n == 0) return 0;
  double def = 0, tuned = 0;
  for (int i = 0; i < r->n; i++) {
    if (r->k[i].absorbed) continue;
    if (!(r->k[i].default_us > 0) || !(r->k[i].best_us > 0)) return 0;
    def += r->k[i].default_us, tuned += r->k[i].best_us;
  }
  r->parts_default_us = def, r->parts_tuned_us = tuned;
  return 1;
}

double tune_assembled_ratio(const TuneReport *r) {
  return r->tuned_us > 0 && r->parts_tuned_us > 0 ? r->tuned_us / r->parts_tuned_us : 0;
}

/* A structure whose kernels are all timed within another's part (covered[k]) is left out of the sum of the parts;
 * group_of[lead] is the report index of a searched structure. */
static void mark_absorbed(TuneReport *r, char (*keys)[24], const int *lead, int ngroups, int nk,
                          const unsigned char *covered, const int *group_of) {
  for (int g = 0; g < ngroups; g++) {
    const int i = lead[g];
    int all = 1, searched = 0;
    for (int j = 0; j < r->n && !searched; j++) searched = !strcmp(r->k[j].key, keys[i]);
    for (int j = i; j < nk && searched; j++)
      if (!strcmp(keys[i], keys[j])) all &= covered[j];
    if (searched && all) r->k[group_of[i]].absorbed = 1;
  }
}

int tune_compilation(Compilation *c, TuneDb *db, const TuneOptions *o, TuneReport *r, Diag *d) {
  memset(r, 0, sizeof *r);
  const LProgram *p = c->loop;
  const int nk = p->nkernels;
  Tuner t;
  memset(&t, 0, sizeof t);
  t.c = c, t.db = db, t.o = o;
  t.orig = calloc((size_t)nk + 1, sizeof *t.orig);
  t.def = calloc((size_t)nk + 1, sizeof *t.def);
  t.given = calloc((size_t)nk + 1, sizeof *t.given);
  t.members = calloc((size_t)nk + 1, sizeof *t.members);
  t.slots = calloc((size_t)nk + 1, sizeof *t.slots);
  char(*keys)[24] = calloc((size_t)nk + 1, sizeof *keys);
  r->k = calloc((size_t)nk + 1, sizeof *r->k);
  int ok = 1;
  for (int i = 0; i < nk; i++) {
    t.orig[i] = t.def[i] = c->tile->kernels[i].s;
    tune_kernel_key(p, &p->kernels[i], c->matmul, keys[i]);
  }
  tune_device_identity(&c->device, o->driver, t.device, sizeof t.device);
  /* the measuring child starts now: its reference run (the default schedules) must work */
  {
    StrBuf b = {0};
    char why[256];
    memcpy(t.given, t.def, sizeof *t.given * (size_t)nk);
    t.nslots = 0;
    ChildStatus st = call_worker(&t, REQ_PROGRAM, 1, t.def, &b, why, sizeof why, d);
    if (!d->set && st != CHILD_OK)
      diag_error(d, 0, 0, "tune: the default schedules did not run: %s", st == CHILD_FAILED ? sb_str(&b) : why);
    ok = st == CHILD_OK;
    sb_free(&b);
  }
  /* kernels of one structure are tuned once (in program order, or the heaviest first under a budget) */
  int ngroups = 0;
  int *lead = calloc((size_t)nk + 1, sizeof *lead);
  double *weight = calloc((size_t)nk + 1, sizeof *weight);
  for (int i = 0; i < nk; i++) {
    int first = 1;
    for (int j = 0; j < i; j++) first &= strcmp(keys[i], keys[j]) != 0;
    if (first) lead[ngroups++] = i;
  }
  t.ngroups = ngroups;
  t.start_s = wall_s(NULL);
  /* Under a budget, each structure's share is its defaults' share of the time (a decode step's projections
   * get most, a cast almost none): one measurement of every group's default first. */
  if (ok && o->lim.budget_s > 0 && ngroups > 1) ok = default_weights(&t, lead, ngroups, keys, weight, d);
  /* the heaviest structures first (under a budget), so a budget spent early leaves out the light ones */
  int *order = heaviest_first(weight, ngroups);
  unsigned char *covered = calloc((size_t)nk + 1, 1);       /* timed as an extra slot of another structure's part */
  int *group_of = calloc((size_t)nk + 1, sizeof *group_of); /* report index of each lead kernel's structure */
  for (int gi = 0; ok && gi < ngroups; gi++) {
    const int g = order[gi], i = lead[g];
    /* the budget is the whole run's: each search gets its share of what is left */
    TuneLimits lim = o->lim;
    if (o->lim.budget_s > 0) {
      double rest = 0;
      for (int h = gi; h < ngroups; h++) rest += weight[order[h]];
      lim.budget_s = o->lim.budget_s - (wall_s(NULL) - t.start_s);
      if (rest > 0) lim.budget_s *= weight[g] / rest;
      if (lim.budget_s <= 0 || (rest > 0 && weight[g] <= 0)) {
        r->untuned++;
        continue;
      }
    }
    ScheduleSpace sp;
    if (!(ok = group_setup(&t, i, keys, &sp, d))) break;
    t.group = gi; /* the order searched in */
    TuneKernelReport *kr = &r->k[r->n++];
    snprintf(kr->key, sizeof kr->key, "%s", keys[i]);
    snprintf(kr->name, sizeof kr->name, "%s", p->kernels[i].name);
    kr->members = t.nmembers;
    kr->candidates = sp.n;
    for (int s = 0; s < t.nslots; s++) {
      int member = 0;
      for (int j = 0; j < t.nmembers; j++) member |= t.members[j] == t.slots[s];
      if (!member) covered[t.slots[s]] = 1;
    }
    group_of[i] = r->n - 1;
    t.space = &sp;
    t.rep = kr;
    TuneSearchOps ops = {&t, measure, wall_s, progress, NULL};
    if (o->prior && o->prior->loaded) {
      prior_kernel_features(&p->kernels[i], &o->env, &c->device, t.kf);
      ops.score = prior_score_of;
    }
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
  if (ok) mark_absorbed(r, keys, lead, ngroups, nk, covered, group_of);
  free(covered);
  free(group_of);
  /* the assembled program: every best in place, against every default, and against the sum of its parts */
  if (ok && r->n) {
    r->tuned_us = time_program(&t, t.def, d);
    r->default_us = time_program(&t, t.orig, d);
    tune_report_parts(r);
    ok = !d->set;
  }
  tune_worker_stop(&t.w);
  free(order);
  free(lead);
  free(weight);
  free(t.orig);
  free(t.def);
  free(t.given);
  free(t.members);
  free(t.slots);
  free(keys);
  return ok;
}
