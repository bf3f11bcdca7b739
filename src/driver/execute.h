/* Running a compiled program on random inputs and checking it: shared by `lathe run` and the tests. */
#ifndef LATHE_EXECUTE_H
#define LATHE_EXECUTE_H
#include "../runtime/plan.h"
#include "check.h"
#include "pipeline.h"

typedef struct Execution {
  Plan *plan;
  int nin, nout;
  HostTensor in[LT_MAX_INPUTS], out[LT_MAX_OUTPUTS];
  RefTensor ref_in[LT_MAX_INPUTS];
  void *in_ptr[LT_MAX_INPUTS];
} Execution;

/* Compiles c's code with backend be, makes random inputs (seed) and runs the plan once.
 * c must have been compiled through ST_CODE. */
int execute_program(const Compilation *c, Backend *be, const SymEnv *env, uint64_t seed, Execution *x, Diag *d);
/* Evaluates the reference on the same inputs; err[i] = compare_output for output i. */
int execute_check(const Compilation *c, const Execution *x, const SymEnv *env, double *err, Diag *d);
void execution_free(Execution *x);
#endif
