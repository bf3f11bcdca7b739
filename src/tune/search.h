/* The search over one kernel's schedule space, apart from how a candidate is measured and what time it is
 * (both given as functions, so a test drives it with a fake device and a fake clock). */
#ifndef LATHE_TUNE_SEARCH_H
#define LATHE_TUNE_SEARCH_H
#include "../tile/space.h"
#include "db.h"

typedef struct TuneMeasurement {
  TuneStatus status;
  double median_us, min_us, max_us;
  int samples;
  int measured; /* times measured (a near-tie is measured again) */
} TuneMeasurement;

typedef struct TuneLimits {
  int max_candidates; /* measured candidates at most, the default included (>= 1) */
  int patience;       /* stop after this many measured in a row without a better one (0: never) */
  double budget_s;    /* stop starting measurements once this much time has gone (0: no limit) */
  double tie;         /* candidates within this fraction of the best are measured again (0.03) */
  int repeats;        /* timed runs per measurement; a near-tie gets twice as many */
} TuneLimits;

typedef struct TuneSearchOps {
  void *ctx;
  /* Measures candidate i (0 = the default) with `repeats` timed runs into m (status, times). Returns 0 on
   * an error that ends the search (d), not for a candidate that is wrong or faults (m->status). */
  int (*measure)(void *ctx, int candidate, int repeats, TuneMeasurement *m, Diag *d);
  double (*now_s)(void *ctx);
  /* After each measurement (may be NULL): tried so far, the best candidate and its median, seconds left. */
  void (*progress)(void *ctx, int tried, int best, double best_us, double left_s);
  /* The learned prior's score of candidate i, higher = predicted faster (may be NULL: no prior). It is the
   * search's policy: the prior's first choice is measured right after the default, and among the untried
   * candidates nearest the best so far the higher-scored go first. */
  double (*score)(void *ctx, int candidate);
} TuneSearchOps;

typedef enum TuneStop { STOP_EXHAUSTED, STOP_MAX_CANDIDATES, STOP_PATIENCE, STOP_BUDGET } TuneStop;
const char *tune_stop_name(TuneStop s);

typedef struct TuneSearchResult {
  int best;           /* the fastest ok candidate (0, the default, when none beat it) */
  int tried;          /* candidates measured */
  TuneStop stop;      /* why the search ended */
  TuneMeasurement *m; /* per candidate (calloc'ed, n long; measured == 0: not tried); free() it */
} TuneSearchResult;

/* A local search: the default first, then (with a prior) the prior's best-scored candidate, then always the
 * untried candidate nearest (fewest knobs different) to the best so far, ties by the prior's score, then by
 * order in the space; then the near-ties of the best measured again. The default
 * must measure ok (it is the reference the others are checked against). */
int tune_search(const ScheduleSpace *space, const TuneLimits *lim, const TuneSearchOps *ops, TuneSearchResult *out,
                Diag *d);
/* A schedule's knobs, one int each, into out (SCHEDULE_FEATURES long); returns how many. */
enum { SCHEDULE_FEATURES = 18 };
int schedule_features(const Schedule *s, int *out);
/* Knobs in which two schedules differ (their schedule_features). */
int schedule_distance(const Schedule *a, const Schedule *b);
#endif
