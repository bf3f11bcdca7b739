/* A nearest-neighbour local search. Why not sampling or a tree search: with no prior yet, the default is the
 * best guess there is, and the knobs interact weakly (vector width, threads and the blocked variant
 * mostly change the time independently), so walking one or two knobs away from the best so far finds the
 * improvements early and patience cuts the tail. With a fitted prior it is the policy: its first choice is
 * measured second (a prior that reproduces the goldens' best half puts a good candidate there, however many
 * knobs it is from the default), and the nearest candidates are taken in its order. A full tree search (MCTS with
 * the prior as its policy) could replace next_candidate without changing the rest. */
#include "search.h"
#include <stdlib.h>
#include <string.h>

const char *tune_stop_name(TuneStop s) {
  switch (s) {
  case STOP_EXHAUSTED: return "space exhausted";
  case STOP_MAX_CANDIDATES: return "max candidates";
  case STOP_PATIENCE: return "patience";
  default: return "budget";
  }
}

int schedule_features(const Schedule *s, int *out) {
  /* store_vec and gemv_rows: 0 and 1 are the same schedule (one element, one value a point) */
  const int f[SCHEDULE_FEATURES] = {s->red,           s->block_threads, s->vec,
                                    s->omp,           s->rows,          s->row_axis,
                                    s->rows_serial,   s->mma,           s->flash,
                                    s->flash_decode,  s->decode_fill,   s->gemm_fill,
                                    s->gemm_library,  s->rows_omp,      s->block_fill,
                                    s->store_vec > 1, s->unroll,        s->gemv_rows > 1 ? s->gemv_rows : 1};
  memcpy(out, f, sizeof f);
  return SCHEDULE_FEATURES;
}

int schedule_distance(const Schedule *a, const Schedule *b) {
  int fa[SCHEDULE_FEATURES], fb[SCHEDULE_FEATURES], d = 0;
  const int n = schedule_features(a, fa);
  schedule_features(b, fb);
  for (int i = 0; i < n; i++) d += fa[i] != fb[i];
  return d;
}

/* score: the prior's per candidate, or NULL (ties by order then) */
static int next_candidate(const ScheduleSpace *sp, const TuneMeasurement *m, int best, const double *score) {
  int pick = -1, dist = 1 << 30;
  for (int i = 0; i < sp->n; i++) {
    if (m[i].measured) continue;
    int di = schedule_distance(&sp->s[i], &sp->s[best]);
    if (di < dist || (di == dist && score && score[i] > score[pick])) pick = i, dist = di;
  }
  return pick;
}

/* The prior's best-scored untried candidate other than the default (-1: none, or no prior). */
static int prior_first(const ScheduleSpace *sp, const double *score) {
  int pick = -1;
  for (int i = 1; score && i < sp->n; i++)
    if (pick < 0 || score[i] > score[pick]) pick = i;
  return pick >= 0 && score[pick] > score[0] ? pick : -1;
}

static int better(const TuneMeasurement *a, const TuneMeasurement *b, double tie) {
  return a->status == TS_OK && a->median_us < b->median_us * (1 - tie * 0.5);
}

int tune_search(const ScheduleSpace *space, const TuneLimits *lim, const TuneSearchOps *ops, TuneSearchResult *out,
                Diag *d) {
  memset(out, 0, sizeof *out);
  out->m = calloc((size_t)(space->n ? space->n : 1), sizeof *out->m);
  if (!out->m) {
    diag_error(d, 0, 0, "out of memory for the search's measurements");
    return 0;
  }
  TuneMeasurement *m = out->m;
  double *score = ops->score && space->n ? calloc((size_t)space->n, sizeof *score) : NULL;
  for (int i = 0; score && i < space->n; i++) score[i] = ops->score(ops->ctx, i);
  const double start = ops->now_s(ops->ctx);
  const int repeats = lim->repeats > 0 ? lim->repeats : 1;
  const double tie = lim->tie > 0 ? lim->tie : 0.03;
  int best = 0, since_better = 0;
#define LEFT() (lim->budget_s > 0 ? lim->budget_s - (ops->now_s(ops->ctx) - start) : -1)
  if (!ops->measure(ops->ctx, 0, repeats, &m[0], d)) {
    free(score);
    return 0;
  }
  m[0].measured = 1;
  out->tried = 1;
  if (m[0].status != TS_OK) {
    diag_error(d, 0, 0, "the default schedule did not run (%s): there is nothing to check candidates against",
               tune_status_name(m[0].status));
    free(score);
    return 0;
  }
  if (ops->progress) ops->progress(ops->ctx, 1, 0, m[0].median_us, LEFT());
  out->stop = STOP_EXHAUSTED;
  int policy = prior_first(space, score); /* the prior's first choice, measured next */
  for (;;) {
    int next = policy >= 0 ? policy : next_candidate(space, m, best, score);
    policy = -1;
    if (next < 0) break;
    if (lim->max_candidates > 0 && out->tried >= lim->max_candidates) {
      out->stop = STOP_MAX_CANDIDATES;
      break;
    }
    if (lim->patience > 0 && since_better >= lim->patience) {
      out->stop = STOP_PATIENCE;
      break;
    }
    if (lim->budget_s > 0 && LEFT() <= 0) {
      out->stop = STOP_BUDGET;
      break;
    }
    if (!ops->measure(ops->ctx, next, repeats, &m[next], d)) {
      free(score);
      return 0;
    }
    m[next].measured = 1;
    out->tried++;
    if (better(&m[next], &m[best], tie)) {
      best = next;
      since_better = 0;
    } else {
      since_better++;
    }
    if (ops->progress) ops->progress(ops->ctx, out->tried, best, m[best].median_us, LEFT());
  }
  /* Near-ties (within `tie` of the best): noise may have ordered them; measure them again with twice the
   * runs, the best included, while the budget lasts, and keep the fastest of the second measurements. */
  int ties[64], nties = 0;
  for (int i = 0; i < space->n && nties < 64; i++)
    if (m[i].measured && m[i].status == TS_OK && m[i].median_us <= m[best].median_us * (1 + tie)) ties[nties++] = i;
  for (int t = 0; nties > 1 && t < nties; t++) {
    if (lim->budget_s > 0 && LEFT() <= 0) break;
    TuneMeasurement again;
    memset(&again, 0, sizeof again);
    if (!ops->measure(ops->ctx, ties[t], repeats * 2, &again, d)) {
      free(score);
      return 0;
    }
    again.measured = m[ties[t]].measured + 1;
    m[ties[t]] = again;
  }
  /* the fastest ok measurement (a tie that went wrong or faulted when measured again is out) */
  best = 0;
  for (int i = 0; i < space->n; i++)
    if (m[i].measured && m[i].status == TS_OK && (m[best].status != TS_OK || m[i].median_us < m[best].median_us))
      best = i;
#undef LEFT
  free(score);
  out->best = best;
  return 1;
}
