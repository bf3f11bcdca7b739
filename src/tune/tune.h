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
  /* every member is timed within another structure's part too (attention's scores and softmax, in the P x V's:
   * launched there unless its flash candidate computes them), so the sum of the parts leaves this one out */
  int absorbed;
} TuneKernelReport;

typedef struct TuneReport {
  TuneKernelReport *k; /* calloc'ed; free() it */
  int n;
  int untuned;                 /* kernel structures not searched: the budget was spent */
  double default_us, tuned_us; /* the whole program with every default / every best schedule */
  /* the sum of the parts: each structure's kernels timed alone (absorbed ones left out), with the defaults / the
   * bests; 0 when some structure was not tuned (tune_report_parts) */
  double parts_default_us, parts_tuned_us;
} TuneReport;

/* Sets r's sums of the parts from its kernel reports; 0 (sums 0) when a structure was not tuned or a part did not
 * measure ok. */
int tune_report_parts(TuneReport *r);
/* The assembled step against the sum of its parts: tuned_us / parts_tuned_us (0 when either is unknown). Above 1
 * the kernels cost more together than alone (launch gaps, a cache one leaves cold for the next). */
double tune_assembled_ratio(const TuneReport *r);

/* The backend's device description, queried in a child (see open_backend). */
int tune_query_device(Backend *(*open_backend)(Diag *d), double timeout_s, TargetDesc *out, Diag *d);
/* Tunes c (compiled through ST_TILE for the device to measure on) into db. */
int tune_compilation(Compilation *c, TuneDb *db, const TuneOptions *o, TuneReport *r, Diag *d);
#endif
