/* The CUDA backend's library GEMM: cuBLASLt, opened on first use, with the fastest of its candidate
 * algorithms measured once per shape. */
#include <stdio.h>
#include <stdlib.h>
#include "../base/mem.h"
#include "../base/notice.h"
#include "../base/settings.h"
#include "cuda_internal.h"
#include "gemm_algos.h"

#define CUBLASLT_WORKSPACE (32u << 20)

/* The file of this device's and library's measured choices (gemm_algos.h), or "" when there is none. */
static void algos_file(CudaImpl *c) {
  char id[512];
  snprintf(id, sizeof id, "%s sm_%d%d %d SMs cuBLASLt %zu", c->dev_name, c->desc.cc_major, c->desc.cc_minor,
           c->desc.sms, cublaslt_version(c->lt));
  if (!setting_bool(SET_CUBLASLT_TUNE, 1) || !gemm_algos_path(c->algos_path, sizeof c->algos_path, id))
    c->algos_path[0] = '\0';
}

/* Earlier runs' measurements of this device's GEMMs, so their shapes are not measured again. */
static void load_algos(CudaImpl *c) {
  algos_file(c);
  if (!c->algos_path[0]) return;
  enum { CAP = 4096 };
  GemmAlgoRecord *recs = xmalloc(CAP * sizeof *recs, "the GEMM algorithm choices");
  int bad = 0, n = gemm_algos_load(c->algos_path, recs, CAP, &bad);
  for (int i = 0; i < n; i++) cublaslt_remember(c->lt, recs[i].m, recs[i].n, recs[i].k, recs[i].algo);
  free(recs);
  if (bad)
    notice(NOTICE_WARNING, "%s: %d malformed line%s ignored (those GEMM shapes are measured again)", c->algos_path, bad,
           bad == 1 ? "" : "s");
}

int cuda_gemm_available(Backend *b) {
  CudaImpl *c = cuda_impl(b);
  if (c->lt_tried) return c->lt != NULL;
  c->lt_tried = 1;
  if (!setting_bool(SET_CUBLASLT, 1)) return 0;
  if (!c->drv.dl) return 0; /* a driver table filled by hand (tests): cuBLASLt would go to the real one */
  Diag d = {0};
  if (!cuda_make_current(c, &d) ||
      !cuda_check(c, &d, c->drv.cuMemAlloc(&c->lt_ws, CUBLASLT_WORKSPACE), "cuMemAlloc", "cuBLASLt workspace")) {
    c->lt_ws = 0;
  } else if (!(c->lt = cublaslt_open((void *)(uintptr_t)c->lt_ws, CUBLASLT_WORKSPACE, &d))) {
    c->drv.cuMemFree(c->lt_ws);
    c->lt_ws = 0;
  }
  if (!c->lt) notice(NOTICE_WARNING, "%s; prefill GEMMs run as lathe's own tensor-core kernels", d.msg);
  else load_algos(c);
  return c->lt != NULL;
}

/* The first GEMM of a shape measures cuBLASLt's candidate algorithms (one warm-up run, then one timed, and two
 * more for a candidate within twice the best so far; each run rewrites `out` with the same products) and keeps
 * the fastest for the backend's life and in the cache directory for later runs (gemm_algos.h): the heuristic's
 * first choice is not always the fastest. LATHE_CUBLASLT_TUNE=0 keeps the heuristic's first; LATHE_PROFILE
 * prints what was measured. */
int cuda_choose_gemm_algo(CudaImpl *c, int64_t m, int64_t n, int64_t k, const void *a, const void *w, void *out,
                          Diag *d) {
  int chosen = -1, count = cublaslt_candidates(c->lt, m, n, k, &chosen, d);
  if (!count) return 0;
  if (chosen >= 0) return 1;
  CUevent ev[2] = {0};
  if (count == 1 || !setting_bool(SET_CUBLASLT_TUNE, 1) || c->drv.cuEventCreate(&ev[0], 0) != CUDA_SUCCESS ||
      c->drv.cuEventCreate(&ev[1], 0) != CUDA_SUCCESS) {
    if (ev[0]) c->drv.cuEventDestroy(ev[0]);
    cublaslt_choose(c->lt, m, n, k, 0);
    return 1;
  }
  int best = 0;
  float best_ms = -1, first_ms = -1;
  for (int i = 0; i < count; i++) {
    Diag skip = {0}; /* a candidate that refuses this problem is passed over */
    int ok = cublaslt_gemm(c->lt, m, n, k, a, w, NULL, out, i, NULL, &skip), runs = 0;
    float ms = 0;
    for (int r = 0; ok && r < 3; r += runs) {
      /* one run first; a candidate over twice the best so far is not run again */
      runs = r ? 2 : 1;
      float part = 0;
      ok = c->drv.cuEventRecord(ev[0], NULL) == CUDA_SUCCESS;
      for (int j = 0; ok && j < runs; j++) ok = cublaslt_gemm(c->lt, m, n, k, a, w, NULL, out, i, NULL, &skip);
      ok = ok && c->drv.cuEventRecord(ev[1], NULL) == CUDA_SUCCESS &&
           c->drv.cuEventSynchronize(ev[1]) == CUDA_SUCCESS &&
           c->drv.cuEventElapsedTime(&part, ev[0], ev[1]) == CUDA_SUCCESS;
      ms += part;
      if (ok && !r && best_ms >= 0 && part > 2 * best_ms) break;
    }
    if (!ok) continue;
    float each = ms / (runs == 2 ? 3 : 1);
    if (i == 0) first_ms = each;
    if (best_ms < 0 || each < best_ms) best = i, best_ms = each;
  }
  c->drv.cuEventDestroy(ev[0]);
  c->drv.cuEventDestroy(ev[1]);
  cublaslt_choose(c->lt, m, n, k, best);
  GemmAlgoRecord rec = {m, n, k, {0}};
  if (c->algos_path[0] && cublaslt_chosen_algo(c->lt, m, n, k, rec.algo) && !gemm_algos_append(c->algos_path, &rec)) {
    notice(NOTICE_WARNING, "%s: cannot be written; GEMM shapes are measured again in every run", c->algos_path);
    c->algos_path[0] = '\0';
  }
  if (setting_bool(SET_PROFILE, 0))
    notice(NOTICE_PROFILE,
           "lathe: cuBLASLt %lld x %lld x %lld: candidate %d of %d, %.4f ms (the heuristic's first %.4f ms)",
           (long long)m, (long long)n, (long long)k, best + 1, count, best_ms, first_ms);
  return 1;
}

int cuda_gemm_bf16(Backend *b, int64_t m, int64_t n, int64_t k, const void *a, const void *w, const void *add,
                   void *out, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  if (!cuda_gemm_available(b)) {
    diag_error(d, 0, 0, "cuBLASLt is not available");
    return 0;
  }
  if (!cuda_make_current(c, d)) return 0;
  snprintf(c->last_kernel, sizeof c->last_kernel, "cuBLASLt %lldx%lldx%lld", (long long)m, (long long)n, (long long)k);
  return cuda_choose_gemm_algo(c, m, n, k, a, w, out, d) && cublaslt_gemm(c->lt, m, n, k, a, w, add, out, -1, NULL, d);
}
