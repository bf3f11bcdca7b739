/* The order a kernel's schedule is chosen in: the fastest ok measurement for its key (structure, bucket,
 * device, compiler identity), else the default. A compile for no particular sizes (a model's plan, which runs
 * decode steps and prefills) whose kernel was measured at several sizes of `seq` takes the kernel's own form
 * (threads, reduction, vector width, flash-decoding) from the smallest, where it is what runs, and the blocked
 * variant (rows, tensor cores, split-k, library) from the largest, where that is what runs (a variant the
 * smallest's best runs there gives way to a tensor-core, flash or library one of the largest). The learned prior
 * (issue 19, part 6) goes between measured and default. */
#include "lookup.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "../base/notice.h"
#include "../tile/space.h"
#include "key.h"

/* A bucket's text ("past=256 seq=1") as symbol values; names point into `text` (a copy). */
static void bucket_env(const char *bucket, char *text, size_t n, SymEnv *env) {
  memset(env, 0, sizeof *env);
  snprintf(text, n, "%s", bucket);
  for (char *w = strtok(text, " "); w && env->n < 16; w = strtok(NULL, " ")) {
    char *eq = strchr(w, '='), *end;
    if (!eq) continue;
    *eq = 0;
    long long v = strtoll(eq + 1, &end, 10);
    if (end != eq + 1 && !*end) symenv_set(env, w, v);
  }
}

/* The variant's knobs of `from` on `to`'s own form. */
static Schedule with_variant_of(Schedule to, const Schedule *from) {
  to.rows = from->rows, to.row_axis = from->row_axis, to.rows_serial = from->rows_serial;
  to.mma = from->mma, to.flash = from->flash, to.gemm_fill = from->gemm_fill, to.gemm_library = from->gemm_library;
  return to;
}

/* Across the kernel's sizes (see the head of the file): 1 chosen, 0 not applicable (fewer than two sizes of
 * seq), -1 error. */
static int across_sizes(TuneLookup *l, const LProgram *p, const LKernel *k, const TargetDesc *dev, const char *key,
                        const char *device, Schedule *s, char *why, size_t nwhy, Diag *d) {
  char buckets[16][128];
  int nb = tune_db_buckets(l->db, key, device, TUNE_COMPILER_IDENTITY, buckets, 16, d);
  if (nb < 2) return nb < 0 ? -1 : 0;
  int small = -1, large = -1;
  int64_t lo = 0, hi = 0;
  for (int i = 0; i < nb; i++) {
    char text[128];
    SymEnv env;
    int64_t seq;
    bucket_env(buckets[i], text, sizeof text, &env);
    if (!symenv_get(&env, "seq", &seq)) continue;
    if (small < 0 || seq < lo) small = i, lo = seq;
    if (large < 0 || seq > hi) large = i, hi = seq;
  }
  if (small < 0 || lo == hi) return 0;
  TuneRecord rs, rl;
  if (tune_db_best(l->db, key, buckets[small], device, TUNE_COMPILER_IDENTITY, &rs, d) != 1 ||
      tune_db_best(l->db, key, buckets[large], device, TUNE_COMPILER_IDENTITY, &rl, d) != 1)
    return d->set ? -1 : 0;
  Schedule own, blocked;
  Diag pd = {0};
  if (!schedule_parse(rs.schedule, &own, &pd) || !schedule_parse(rl.schedule, &blocked, &pd)) return 0;
  char text[128];
  SymEnv env;
  bucket_env(buckets[small], text, sizeof text, &env);
  Schedule merged = with_variant_of(own, &blocked);
  Diag ignored = {0};
  /* The small sizes' best may itself be a variant that runs there (rows of a GEMV's outputs); then it decides
   * alone, unless the large sizes' best is a tensor-core, flash or library variant: keeping the small one would
   * cost every prefill its tensor cores (qwen3-0.6b's q and o projections made a 512-token prefill 5.8x slower
   * on the H200, session 13), so that variant is kept and the small sizes run their own form without theirs. */
  int small_variant = schedule_variant_runs(k, &own, &env);
  int large_is_blocked = blocked.mma > 0 || blocked.flash > 0 || blocked.gemm_library;
  if (small_variant && large_is_blocked) {
    Schedule plain = own;
    plain.rows = 1, plain.row_axis = -1, plain.rows_serial = 0;
    merged = with_variant_of(plain, &blocked);
  }
  if ((small_variant && !large_is_blocked) || !schedule_check(p, k, dev, &merged, &ignored)) {
    *s = own; /* the small sizes' variant runs there too, or the two do not combine: the small sizes decide */
    snprintf(why, nwhy, "measured: %.1f us, its kernels alone, %d samples, at %s", rs.median_us, rs.samples, rs.bucket);
    return 1;
  }
  *s = merged;
  if (small_variant)
    snprintf(why, nwhy,
             "measured: its own form at %s without the rows variant measured there (%.1f us), its blocked "
             "variant %.1f us at %s",
             rs.bucket, rs.median_us, rl.median_us, rl.bucket);
  else
    snprintf(why, nwhy, "measured: its own form %.1f us at %s, its blocked variant %.1f us at %s", rs.median_us,
             rs.bucket, rl.median_us, rl.bucket);
  return 1;
}

/* No measurement: the prior's best-scored candidate (at the lookup's sizes), where it scores above the default. */
static int by_prior(TuneLookup *l, const LProgram *p, const LKernel *k, const TargetDesc *dev, MatmulPrecision mm,
                    Schedule *s, char *why, size_t nwhy) {
  ScheduleSpace sp;
  Diag ignored = {0};
  /* each target its own prior: on the H200 the CPU-fitted one's picks made a tuned decode 0.67x and a prefill 9x
   * slower (bench/RESULTS.md, session 11); CUDA's stays empty (the defaults) until fitted on GPU goldens */
  const Prior *prior = dev->kind == TARGET_CUDA ? l->prior_cuda : dev->kind == TARGET_CPU ? l->prior : NULL;
  if (!prior || !prior->loaded || !schedule_space(p, k, dev, mm, s, &sp, &ignored)) {
    snprintf(why, nwhy, "default: no measurement");
    return 0;
  }
  if (l->env) schedule_space_at(k, l->env, dev->kind, &sp);
  double kf[PRIOR_KERNEL_FEATURES];
  prior_kernel_features(k, l->env, dev, kf);
  const int pick = prior_pick(prior, kf, sp.s, sp.n);
  const double def = prior_score(prior, kf, &sp.s[0]);
  if (pick == 0) {
    snprintf(why, nwhy, "default: no measurement, and the prior ranks it first%s (prior: %.3f)",
             prior->reach > 0 ? " within its reach" : "", def);
    return 0;
  }
  *s = sp.s[pick];
  snprintf(why, nwhy, "prior: %.3f against the default's %.3f, no measurement", prior_score(prior, kf, &sp.s[pick]),
           def);
  return 1;
}

static int lookup(void *ctx, const LProgram *p, const LKernel *k, const TargetDesc *dev, MatmulPrecision mm,
                  Schedule *s, char *why, size_t nwhy) {
  TuneLookup *l = ctx;
  char key[24], bucket[128], device[256];
  tune_kernel_key(p, k, mm, key);
  if (l->env) tune_kernel_bucket(p, k, l->env, bucket, sizeof bucket);
  tune_device_identity(dev, l->driver, device, sizeof device);
  TuneRecord r;
  Diag d = {0};
  int across = l->env ? 0 : across_sizes(l, p, k, dev, key, device, s, why, nwhy, &d);
  if (across > 0) return 1;
  int found =
      across < 0 ? -1 : tune_db_best(l->db, key, l->env ? bucket : NULL, device, TUNE_COMPILER_IDENTITY, &r, &d);
  if (found < 0) {
    if (!l->warned++) notice(NOTICE_WARNING, "%s: compiling with the default schedules", d.msg);
    snprintf(why, nwhy, "default: the tuning database could not be read");
    return 0;
  }
  if (!found) return by_prior(l, p, k, dev, mm, s, why, nwhy);
  /* a compile for every size (a model's plan) from one size of seq: a decode measurement would set the knobs of
   * every prefill too, and on the H200 that made qwen3-0.6b's 512-token prefill 5.9x slower (session 11) */
  char text[128];
  SymEnv at;
  int64_t seq;
  bucket_env(r.bucket, text, sizeof text, &at);
  if (!l->env && symenv_get(&at, "seq", &seq)) {
    snprintf(why, nwhy, "default: measured only at %s (a compile for every size takes two sizes of seq)", r.bucket);
    return 0;
  }
  d = (Diag){0};
  if (!schedule_parse(r.schedule, s, &d)) {
    snprintf(why, nwhy, "default: the measured schedule does not parse (%s)", d.msg);
    return 0;
  }
  snprintf(why, nwhy, "measured: %.1f us, its kernels alone, %d samples%s%s", r.median_us, r.samples,
           r.bucket[0] ? ", at " : "", r.bucket);
  return 1;
}

int tune_lookup_open(TuneLookup *l, const char *path, const SymEnv *env, int driver) {
  *l = (TuneLookup){{l, lookup}, NULL, env, driver, 0, prior_builtin(), prior_builtin_for(TARGET_CUDA)};
  struct stat st;
  if (stat(path, &st) != 0) return 0; /* never tuned: nothing to consult, and no file is created */
  Diag d = {0};
  if (!(l->db = tune_db_open(path, &d))) {
    notice(NOTICE_WARNING, "%s: compiling with the default schedules", d.msg);
    return 0;
  }
  return 1;
}

void tune_lookup_close(TuneLookup *l) {
  tune_db_close(l->db);
  l->db = NULL;
}
