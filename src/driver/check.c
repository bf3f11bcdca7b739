#include "check.h"
#include "../base/checked.h"
#include "../base/mem.h"
#include "../base/rng.h"
#include "../model/gguf.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void host_tensor_free(HostTensor *t) {
  free(t->data);
  t->data = NULL;
}

int host_tensor_alloc(HostTensor *t, DType dt, const Shape *s, const SymEnv *env, Diag *d) {
  memset(t, 0, sizeof *t);
  t->dtype = dt;
  t->rank = s->rank;
  if (!shape_eval(s, env, t->dims)) {
    diag_error(d, 0, 0, "a symbolic dimension has no value; pass --dim NAME=N for each");
    return 0;
  }
  t->numel = 1;
  for (int i = 0; i < s->rank; i++) {
    if (t->dims[i] < 0) {
      diag_error(d, 0, 0, "negative dimension %lld", (long long)t->dims[i]);
      return 0;
    }
  }
  size_t bytes;
  if (!ck_numel(t->rank, t->dims, &t->numel) || !dtype_bytes(dt, t->numel, &bytes)) {
    diag_error(d, 0, 0, "a tensor of more than 2^56 elements at these sizes (or not whole %s blocks)", dtype_name(dt));
    return 0;
  }
  if (!(t->data = mem_alloc(d, bytes ? bytes : 1, "a host tensor"))) return 0;
  if (dtype_is_quant(dt)) {
    memset(t->data, 0xff, bytes); /* NaN scales */
  } else if (dtype_is_float(dt)) {
    for (int64_t i = 0; i < t->numel; i++) {
      if (dt == DT_F32) ((float *)t->data)[i] = NAN;
      else ((uint16_t *)t->data)[i] = 0x7e00 | (dt == DT_BF16 ? 0x7fc0 : 0);
    }
  } else {
    memset(t->data, 0x5a, bytes);
  }
  return 1;
}

/* Element i of a quantized tensor: its block dequantized by the model loader's reference (dequant.c). */
static double quant_get(const HostTensor *t, int64_t i) {
  float block[256];
  int be = dtype_block_elems(t->dtype);
  const unsigned char *at = (const unsigned char *)t->data + (size_t)(i / be) * dtype_block_bytes(t->dtype);
  if (!ggml_dequantize(ggml_type_of_dtype(t->dtype), at, block, be, NULL)) return NAN;
  return block[i % be];
}

double host_get(const HostTensor *t, int64_t i) {
  if (dtype_is_quant(t->dtype)) return quant_get(t, i);
  switch (t->dtype) {
  case DT_F32: return ((const float *)t->data)[i];
  case DT_F16: return f16_to_f32(((const uint16_t *)t->data)[i]);
  case DT_BF16: return bf16_to_f32(((const uint16_t *)t->data)[i]);
  case DT_I32: return ((const int32_t *)t->data)[i];
  case DT_I64: return (double)((const int64_t *)t->data)[i];
  case DT_BOOL: return ((const uint8_t *)t->data)[i] != 0;
  default: return 0;
  }
}

static void host_set(HostTensor *t, int64_t i, double v) {
  switch (t->dtype) {
  case DT_F32: ((float *)t->data)[i] = (float)v; break;
  case DT_F16: ((uint16_t *)t->data)[i] = f32_to_f16((float)v); break;
  case DT_BF16: ((uint16_t *)t->data)[i] = f32_to_bf16((float)v); break;
  case DT_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
  case DT_I64: ((int64_t *)t->data)[i] = (int64_t)v; break;
  case DT_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
  default: break;
  }
}

typedef struct Range {
  int is_int;
  double lo, hi; /* floats: [lo, hi); ints: [lo, hi] */
  int distinct;  /* ints: no value twice while the range has room (a scatter's slots: parallel writes to one slot
                    would race) */
} Range;

/* How an input is used decides which values make sense for it. */
static Range input_range(const Graph *g, int node, const SymEnv *env) {
  Range r = {0, -1.0, 1.0};
  DType dt = g->nodes[node].dtype;
  if (!dtype_is_float(dt)) r = (Range){1, -4, 4};
  if (dt == DT_BOOL) r = (Range){1, 0, 1};
  for (int i = node + 1; i < g->n; i++) {
    const GNode *n = &g->nodes[i];
    for (int j = 0; j < n->nin; j++) {
      if (n->in[j] != node) continue;
      if (n->op == G_EMBEDDING && j == 0) {
        int64_t rows = 1;
        ex_eval_int(g->nodes[n->in[1]].shape.dim[0], env, &rows);
        if (r.lo < 0 || rows - 1 < r.hi) r = (Range){1, 0, (double)(rows - 1)};
      } else if (n->op == G_CACHE_SCATTER && j == 2) { /* some slots outside the pool: they write nothing */
        int64_t blocks = 1, bs = 1;
        ex_eval_int(g->nodes[n->in[0]].shape.dim[0], env, &blocks);
        ex_eval_int(g->nodes[n->in[0]].shape.dim[1], env, &bs);
        r = (Range){1, -1, (double)(blocks * bs), 1};
      } else if (n->op == G_PAGED_GATHER && j > 0) { /* table entries and rows, a few out of range (clamped) */
        int64_t hi = 1;
        ex_eval_int(g->nodes[n->in[j == 1 ? 0 : 1]].shape.dim[0], env, &hi);
        r = (Range){1, -1, (double)hi};
      } else if (n->op == G_ATTENTION && j == 3) {
        int64_t keys = 1;
        ex_eval_int(g->nodes[n->in[1]].shape.dim[2], env, &keys);
        r = (Range){1, 1, (double)keys};
      } else if (n->op == G_ROPE && j == 1) {
        r = (Range){1, 0, 63};
      } else if (j == 0 && (n->op == G_LOG || n->op == G_SQRT || n->op == G_RSQRT || n->op == G_POW)) {
        if (!r.is_int) r = (Range){0, 0.25, 2.0};
      }
    }
  }
  return r;
}

/* Element e of an input of range r: random, or for a distinct range the e-th value of a random permutation of it
 * (perm: its values, shuffled one step further per element; random again past its end). */
static double input_value(const Range *r, int64_t e, double *perm, int64_t nperm, uint64_t *s) {
  if (r->is_int && r->distinct && perm && e < nperm) {
    int64_t j = e + (int64_t)(splitmix64(s) % (uint64_t)(nperm - e));
    double t = perm[e];
    perm[e] = perm[j];
    perm[j] = t;
    return perm[e];
  }
  return r->is_int ? r->lo + (double)(splitmix64(s) % (uint64_t)(r->hi - r->lo + 1))
                   : r->lo + (r->hi - r->lo) * splitmix64_unit(s);
}

/* The values of a distinct range in order, for input_value to shuffle (NULL: not distinct, or too many). */
static double *distinct_values(const Range *r, int64_t *n) {
  *n = 0;
  if (!r->is_int || !r->distinct || r->hi - r->lo + 1 > (1 << 24)) return NULL;
  *n = (int64_t)(r->hi - r->lo + 1);
  double *v = malloc((size_t)*n * sizeof *v);
  for (int64_t i = 0; v && i < *n; i++) v[i] = r->lo + (double)i;
  if (!v) *n = 0;
  return v;
}

int make_inputs(const Graph *g, const SymEnv *env, uint64_t seed, HostTensor *host, RefTensor *ref, Diag *d) {
  uint64_t s = seed * 0x2545F4914F6CDD1DULL + 1;
  for (int i = 0; i < g->ninputs; i++) {
    const GNode *n = &g->nodes[g->inputs[i]];
    if (!host_tensor_alloc(&host[i], n->dtype, &n->shape, env, d)) {
      for (int j = 0; j < i; j++) {
        host_tensor_free(&host[j]);
        if (ref) ref_tensor_free(&ref[j]);
      }
      return 0;
    }
    Range r = input_range(g, n->id, env);
    int64_t nperm;
    double *perm = distinct_values(&r, &nperm);
    if (!ref) { /* the values alone (a tuner compares runs with each other, not with the reference) */
      if (dtype_is_quant(n->dtype))
        ggml_random_blocks(ggml_type_of_dtype(n->dtype), host[i].data, host[i].numel / dtype_block_elems(n->dtype), &s);
      for (int64_t e = 0; !dtype_is_quant(n->dtype) && e < host[i].numel; e++)
        host_set(&host[i], e, input_value(&r, e, perm, nperm, &s));
      free(perm);
      continue;
    }
    memset(&ref[i], 0, sizeof ref[i]);
    ref[i].rank = host[i].rank;
    memcpy(ref[i].dims, host[i].dims, sizeof ref[i].dims);
    ref[i].numel = host[i].numel;
    ref[i].data = mem_calloc(d, (size_t)host[i].numel, sizeof(double), "an input's reference copy");
    if (!ref[i].data) {
      free(perm);
      for (int j = 0; j <= i; j++) {
        host_tensor_free(&host[j]);
        ref_tensor_free(&ref[j]);
      }
      return 0;
    }
    if (dtype_is_quant(n->dtype)) { /* random blocks; the reference sees them dequantized */
      int be = dtype_block_elems(n->dtype);
      ggml_random_blocks(ggml_type_of_dtype(n->dtype), host[i].data, host[i].numel / be, &s);
      for (int64_t e = 0; e < host[i].numel; e++) ref[i].data[e] = host_get(&host[i], e);
      free(perm);
      continue;
    }
    for (int64_t e = 0; e < host[i].numel; e++) {
      host_set(&host[i], e, input_value(&r, e, perm, nperm, &s));
      ref[i].data[e] = host_get(&host[i], e); /* exactly what the kernel sees */
    }
    free(perm);
  }
  return 1;
}

double compare_output(const HostTensor *got, const RefTensor *want) {
  if (got->numel != want->numel) return INFINITY;
  double maxref = 0, maxdiff = 0;
  int is_int = !dtype_is_float(got->dtype);
  for (int64_t i = 0; i < got->numel; i++) {
    double y = host_get(got, i), r = want->data[i];
    if (isnan(r) || isnan(y)) {
      if (isnan(r) != isnan(y)) return INFINITY;
      continue;
    }
    if (isinf(r) || isinf(y)) {
      if (r != y) return INFINITY;
      continue;
    }
    if (is_int && y != r) return INFINITY;
    if (is_int && want->ival) { /* beyond 2^53 the doubles agree where the integers need not */
      int64_t gi = got->dtype == DT_I64   ? ((const int64_t *)got->data)[i]
                   : got->dtype == DT_I32 ? ((const int32_t *)got->data)[i]
                                          : (int64_t)y;
      if (gi != want->ival[i]) return INFINITY;
    }
    if (fabs(r) > maxref) maxref = fabs(r);
    if (fabs(y - r) > maxdiff) maxdiff = fabs(y - r);
  }
  return maxdiff / (maxref > 1e-6 ? maxref : 1e-6);
}

double check_tolerance(DType t, MatmulPrecision mm) {
  double tol = 0;
  switch (t) {
  case DT_F32: tol = 2e-4; break;
  case DT_F16: tol = 5e-3; break;
  case DT_BF16: tol = 2e-2; break;
  default: return 0;
  }
  return mm == MM_MEDIUM && tol < 1e-2 ? 1e-2 : tol;
}
