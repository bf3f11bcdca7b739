/* `--check` support: random program inputs, and comparing a backend's outputs with the float64
 * reference (ref/) under per-dtype tolerances. */
#ifndef LATHE_CHECK_H
#define LATHE_CHECK_H
#include "../graph/graph.h"
#include "../ref/ref.h"
#include "../tile/tile.h"

typedef struct HostTensor {
  DType dtype;
  int rank;
  int64_t dims[LT_MAX_RANK];
  int64_t numel;
  void *data; /* storage dtype, row-major, malloc'ed */
} HostTensor;

void host_tensor_free(HostTensor *t);
/* A host tensor of t's dtype and s's shape evaluated with env, filled with a poison pattern (NaN for
 * floats, 0x5a5a... for ints) so an element a kernel never writes cannot pass a check. */
int host_tensor_alloc(HostTensor *t, DType dt, const Shape *s, const SymEnv *env, Diag *d);

/* Random inputs for every graph input: uniform [-1, 1] floats (rounded to the storage type), positive
 * values where an input feeds log/sqrt/rsqrt/pow, in-range ids for embedding and positions for rope,
 * small integers otherwise. host[i] and ref[i] hold the same values (ref NULL: host only, the same values). */
int make_inputs(const Graph *g, const SymEnv *env, uint64_t seed, HostTensor *host, RefTensor *ref, Diag *d);

/* Normwise relative error max|got - want| / max(max|want|, 1e-6); NaN in the same places counts as
 * equal; a NaN or Inf in only one of them gives +inf. Integer outputs must match exactly (0 or inf). */
double compare_output(const HostTensor *got, const RefTensor *want);
/* Largest acceptable compare_output for an output of this dtype (computed in f32 from rounded inputs),
 * with matrix products at precision mm (medium rounds their activations to bf16: about 2^-9 each). */
double check_tolerance(DType t, MatmulPrecision mm);
/* Value i of a host tensor as double. */
double host_get(const HostTensor *t, int64_t i);
#endif
