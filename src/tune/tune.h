/* lathe tune's driver: for each kernel structure of a compiled program, search its schedule space on a
 * device, each candidate compiled, checked against the default schedule's outputs and timed in a child
 * process under a watchdog, and every measurement written to the tuning database. */
#ifndef LATHE_TUNE_TUNE_H
#define LATHE_TUNE_TUNE_H
#include "../backend/backend.h"
#include "../driver/pipeline.h"
#include "db.h"
#include "search.h"

typedef struct TuneProgress {
  const char *kernel; /* the group's first kernel */
  int group, ngroups, members;
  int tried, candidates;
  double default_us, best_us;
  double left_s; /* of the budget; < 0 when there is none */
} TuneProgress;

typedef struct TuneOptions {
  TuneLimits lim;   /* per kernel structure; budget_s is the whole run's, shared out as it goes */
  int warmup;       /* untimed runs before each measurement's */
  double timeout_s; /* a candidate's child (compile, check, timing) is killed after this long */
  SymEnv env;       /* the symbols' values the program runs at */
  uint64_t seed;    /* of the random inputs */
  /* Opens the backend to measure on; called in each child, never in the tuning process itself (a CUDA
   * context does not survive fork). */
  Backend *(*open_backend)(Diag *d);
  int driver; /* the CUDA driver's version, for the device identity (0: unknown or the CPU) */
  void (*progress)(void *ctx, const TuneProgress *p);
  void *progress_ctx;
  /* The search's policy (search.h): the prior scores each structure's candidates at env's sizes on the device
   * tuned for; NULL or not loaded: the nearest-first order alone. */
  const struct Prior *prior;
} TuneOptions;

typedef struct TuneKernelReport {
  char key[24], name[64];
  int members; /* kernels of this structure in the program (tuned once) */
  int candidates, tried, wrong, faults, timeouts;
  double default_us, best_us; /* the program's run time with the default / the best schedule */
  char best[256];             /* schedule_format of the best */
  TuneStop stop;
} TuneKernelReport;

typedef struct TuneReport {
  TuneKernelReport *k; /* calloc'ed; free() it */
  int n;
  int untuned;                 /* kernel structures not searched: the budget was spent */
  double default_us, tuned_us; /* the whole program with every default / every best schedule */
} TuneReport;

/* The backend's device description, queried in a child (see open_backend). */
int tune_query_device(Backend *(*open_backend)(Diag *d), double timeout_s, TargetDesc *out, Diag *d);
/* Tunes c (compiled through ST_TILE for the device to measure on) into db. */
int tune_compilation(Compilation *c, TuneDb *db, const TuneOptions *o, TuneReport *r, Diag *d);
#endif
