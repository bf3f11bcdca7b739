/* The order a kernel's schedule is chosen in: the fastest ok measurement for its key (structure, bucket,
 * device, compiler identity), else the default. The learned prior (issue 19, part 6) goes between the two:
 * where no measurement exists, lookup would ask the prior's ranking of schedule_space's candidates and
 * say "prior score S" in `why`. */
#include "lookup.h"
#include <stdio.h>
#include <sys/stat.h>
#include "../base/notice.h"
#include "../tile/space.h"
#include "key.h"

static int lookup(void *ctx, const LProgram *p, const LKernel *k, const TargetDesc *dev, MatmulPrecision mm,
                  Schedule *s, char *why, size_t nwhy) {
  TuneLookup *l = ctx;
  char key[24], bucket[128], device[256];
  tune_kernel_key(p, k, mm, key);
  if (l->env) tune_kernel_bucket(p, k, l->env, bucket, sizeof bucket);
  tune_device_identity(dev, l->driver, device, sizeof device);
  TuneRecord r;
  Diag d = {0};
  int found = tune_db_best(l->db, key, l->env ? bucket : NULL, device, TUNE_COMPILER_IDENTITY, &r, &d);
  if (found < 0) {
    if (!l->warned++) notice(NOTICE_WARNING, "%s: compiling with the default schedules", d.msg);
    snprintf(why, nwhy, "default: the tuning database could not be read");
    return 0;
  }
  if (!found) {
    snprintf(why, nwhy, "default: no measurement");
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
  *l = (TuneLookup){{l, lookup}, NULL, env, driver, 0};
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
