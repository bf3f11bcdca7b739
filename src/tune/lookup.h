/* Compile-time use of the tuning database: a ScheduleSource (driver/pipeline.h) that gives each kernel the
 * fastest schedule measured for its key on this device by this lathe, else the learned prior's choice among the
 * kernel's candidates where it scores above the default, else nothing (the default stays). The prior is
 * consulted only where a tuning database is (a compile with no tune.db, or --no-tune, keeps every default). */
#ifndef LATHE_TUNE_LOOKUP_H
#define LATHE_TUNE_LOOKUP_H
#include "../driver/pipeline.h"
#include "db.h"
#include "prior.h"

typedef struct TuneLookup {
  ScheduleSource source; /* what Compilation.schedules points at */
  TuneDb *db;
  const SymEnv *env; /* the symbols' values to take measurements of; NULL: each kernel's latest bucket */
  int driver;        /* the CUDA driver's version (device identity) */
  int warned;
  const Prior *prior;      /* CPU kernels, where nothing is measured (prior_builtin(); loaded 0: none) */
  const Prior *prior_cuda; /* CUDA kernels (prior_builtin_for(TARGET_CUDA): fitted on GPU goldens only) */
} TuneLookup;

/* 1 with l->source ready when the database at path exists and opens; 0 when there is no such file (nothing
 * to consult) or it cannot be used (a warning says why): either way the compile goes on with the defaults. */
int tune_lookup_open(TuneLookup *l, const char *path, const SymEnv *env, int driver);
void tune_lookup_close(TuneLookup *l);
#endif
