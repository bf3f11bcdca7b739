/* Reference interpreter: evaluates the graph stage in float64, directly from the graph ops
 * (it never looks at the tensor stage or below), so it is an independent oracle for every backend. */
#ifndef LATHE_REF_H
#define LATHE_REF_H
#include "../base/diag.h"
#include "../graph/graph.h"

typedef struct RefTensor {
  int rank;
  int64_t dims[LT_MAX_RANK];
  int64_t numel;
  double *data;  /* row-major; owned (free with ref_tensor_free) */
  int64_t *ival; /* results of integer dtype: the exact values (data holds them rounded to doubles); NULL for
                    floats and for given inputs (their doubles hold small integers) */
} RefTensor;

void ref_tensor_free(RefTensor *t);

/* inputs[i] holds graph input i (g->inputs order), with the concrete dims given by env.
 * Integer inputs are passed as doubles holding integers. On success outputs[j] (g->outputs order)
 * are filled in (caller frees each with ref_tensor_free). Fails with diag on an unbound symbol,
 * an out-of-range embedding id or rope position, an invalid reshape at these sizes, an argmax over an
 * empty axis, attention without keys, or a tensor of more than 2^56 elements. Float -> integer casts
 * saturate (ex_float_to_int), as in every backend. */
int ref_eval(const Graph *g, const SymEnv *env, const RefTensor *inputs, RefTensor *outputs, Diag *d);
#endif
