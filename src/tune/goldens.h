/* Goldens: a tuned program's measurements as a file kept in the repository (goldens/DEVICE-NAME.json), per
 * kernel structure its measured pool (every schedule tried and its latency or failure), the best, the
 * kernel's features (what the prior is fitted on), with the device, the date and the commit. `lathe tune
 * --export` writes one; `lathe fit` reads them. */
#ifndef LATHE_TUNE_GOLDENS_H
#define LATHE_TUNE_GOLDENS_H
#include "../driver/pipeline.h"
#include "db.h"
#include "prior.h"

typedef struct GoldensInfo {
  const char *program; /* what was tuned: a config's name, a model's path or the program's text */
  const char *commit;  /* lathe's commit ("" when unknown) */
  int driver;          /* the CUDA driver (device identity) */
} GoldensInfo;

/* c compiled through the tile stage for the device it was tuned on, env its sizes: every kernel structure's
 * measurements in db at those sizes into file. *kernels: structures written (those with a measurement). */
int tune_goldens_export(const Compilation *c, const SymEnv *env, TuneDb *db, const GoldensInfo *info, const char *file,
                        int *kernels, int *measurements, Diag *d);
/* Every measured kernel of a goldens file, or of every *.json goldens file in a directory (in name order; the
 * priors, prior*.json, are not goldens): its features and its ok measurements (one per schedule, the latest).
 * target: only goldens measured on that target ("cpu", "cuda"; their "target" field); NULL: all. *out is
 * malloc'ed (prior_kernels_free). */
int tune_goldens_load(const char *path, const char *target, PriorKernel **out, int *n, Diag *d);
void prior_kernels_free(PriorKernel *k, int n);
#endif
