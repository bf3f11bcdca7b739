/* The learned prior: a ranking model over kernel, schedule and target features that picks a schedule where
 * nothing was measured. Score(kernel, schedule) = sum over i, j of w[i][j] * s_i * k_j, schedule features s
 * (the knobs, on log scales) crossed with kernel and target features k (sizes at the compile's values, the
 * device's multiprocessors), so the best knobs can differ between a long reduction and a short one, a
 * decode GEMV and a prefill GEMM, one device and another. Higher is faster. `lathe fit` fits w from the
 * goldens (pairs of measurements of one kernel, a logistic loss on which is faster) and writes it as JSON
 * (goldens/prior.json, embedded in the binary at build time); compiles evaluate it in C. */
#ifndef LATHE_TUNE_PRIOR_H
#define LATHE_TUNE_PRIOR_H
#include "../base/diag.h"
#include "../tile/tile.h"

enum { PRIOR_SCHEDULE_FEATURES = 18, PRIOR_KERNEL_FEATURES = 10 };

typedef struct Prior {
  double w[PRIOR_SCHEDULE_FEATURES][PRIOR_KERNEL_FEATURES];
  int pairs, kernels; /* what it was fitted on (for messages) */
  int loaded;         /* 0: no prior (an empty or absent file): compiles keep their defaults */
  /* How far it is trusted: the goldens' pools are what the tuner measured, a walk near each default, so a prior
   * scores schedules far from every default on no evidence. reach > 0 keeps its picks within that many knobs of
   * the default (schedule_distance); 0: anywhere. */
  int reach;
} Prior;

/* Kernel k's features at env's sizes (a size env does not give counts as 1: a decode step) on dev. */
void prior_kernel_features(const LKernel *k, const SymEnv *env, const TargetDesc *dev, double f[PRIOR_KERNEL_FEATURES]);
void prior_schedule_features(const Schedule *s, double f[PRIOR_SCHEDULE_FEATURES]);
double prior_score(const Prior *p, const double kf[PRIOR_KERNEL_FEATURES], const Schedule *s);
/* The prior's pick among n candidates, cand[0] the default: the best-scored one within its reach of the default
 * if it outscores the default, else 0. What compiles use where nothing is measured, and what the
 * gate checks. */
int prior_pick(const Prior *p, const double kf[PRIOR_KERNEL_FEATURES], const Schedule *cand, int n);

/* The prior from JSON text ({"format": "lathe-prior", "version": 1, "weights": [[...], ...], optional "reach"});
 * an empty text
 * is "no prior" (loaded 0, returns 1). 0 with d on a malformed one. */
int prior_parse(const char *text, const char *what, Prior *out, Diag *d);
/* The prior lathe was built with (goldens/prior.json when it was built); loaded 0 when it had none. */
const Prior *prior_builtin(void);
/* The built-in prior for a target's kernels: the CPU's prior_builtin(), CUDA's goldens/prior-cuda.json (fitted
 * on GPU goldens: `lathe fit --target cuda`); a prior fitted on one target is never used for the other's. */
const Prior *prior_builtin_for(Target t);
/* As JSON, for goldens/prior.json. */
char *prior_to_json(const Prior *p);

/* One measured kernel for fitting: its features and its ok measurements (schedule and median). */
typedef struct PriorKernel {
  double kf[PRIOR_KERNEL_FEATURES];
  Schedule *s;
  double *us;
  int n;
  char name[64];
} PriorKernel;

/* Fits the prior to the kernels (pairs of one kernel's measurements more than 3% apart, logistic loss, an
 * L2 penalty of l2 times the squared weights) by gradient descent. */
void prior_fit(const PriorKernel *k, int nk, double l2, Prior *out);
/* The reproduction gate: for each kernel with at least min_pool measurements (the first the default's, as the
 * tuner measures it first), whether the prior's pick among them (prior_pick) is in their best half (the faster ceil(n /
 * 2) by median); *counted and *passed; missed (NULL, or nk long) marks the kernels whose pick is not. */
void prior_gate(const Prior *p, const PriorKernel *k, int nk, int min_pool, int *counted, int *passed,
                unsigned char *missed);
#endif
