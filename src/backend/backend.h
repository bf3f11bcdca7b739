/* Backend interface: a small vtable in the manner of ggml's backend, one implementation per target.
 * Pointers returned by alloc are device pointers (host memory for the CPU backend). */
#ifndef LATHE_BACKEND_H
#define LATHE_BACKEND_H
#include <stddef.h>
#include <stdint.h>
#include "../base/diag.h"
#include "../target/target.h"

typedef struct Backend Backend;
typedef struct BackendModule BackendModule;
typedef struct BackendGraph BackendGraph;

#define BACKEND_TIMER_SLOTS 4096

typedef struct BackendOps {
  const char *name;
  void *(*alloc)(Backend *b, size_t bytes, Diag *d);
  void (*free)(Backend *b, void *ptr);
  int (*upload)(Backend *b, void *dst, const void *src, size_t bytes, Diag *d);
  int (*download)(Backend *b, void *dst, const void *src, size_t bytes, Diag *d);
  /* Compiles one translation unit (C for cpu, CUDA C for cuda), through the on-disk cache. */
  BackendModule *(*compile)(Backend *b, const char *source, Diag *d);
  void (*module_free)(Backend *b, BackendModule *m);
  /* Launches kernel `name` of module m. bufs/syms as in code.h's ABI. grid/block are ignored on the CPU. */
  int (*launch)(Backend *b, BackendModule *m, const char *name, void *const *bufs, int nbufs, const int64_t *syms,
                int nsyms, int64_t grid, int block, Diag *d);
  int (*sync)(Backend *b, Diag *d);
  void (*destroy)(Backend *b);
  /* Optional (NULL where a backend has none): a recorded sequence of launches replayed with one call,
   * as CUDA graphs do. graph_add appends a kernel that runs after the previous one (same arguments as
   * launch); graph_update changes node i's arguments and grid in the instantiated graph. */
  BackendGraph *(*graph_new)(Backend *b, Diag *d);
  int (*graph_add)(Backend *b, BackendGraph *g, BackendModule *m, const char *name, void *const *bufs, int nbufs,
                   const int64_t *syms, int nsyms, int64_t grid, int block, Diag *d);
  int (*graph_instantiate)(Backend *b, BackendGraph *g, Diag *d);
  int (*graph_update)(Backend *b, BackendGraph *g, int node, void *const *bufs, int nbufs, const int64_t *syms,
                      int nsyms, int64_t grid, Diag *d);
  int (*graph_launch)(Backend *b, BackendGraph *g, Diag *d);
  void (*graph_free)(Backend *b, BackendGraph *g);
  /* Optional: device-side timestamps for profiling. timer_mark records mark `slot` (< BACKEND_TIMER_SLOTS)
   * after the work launched so far; timer_ms is the device time between two marks (after a sync). */
  int (*timer_mark)(Backend *b, int slot, Diag *d);
  double (*timer_ms)(Backend *b, int from, int to);
  /* Optional: a library GEMM (cuBLASLt on CUDA), out[m][n] = sum_k a[m][k] * w[n][k] (+ add[m][n] when add is
   * not NULL), a and w bf16 row-major, out and add f32, in launch order with the kernels.
   * gemm_available loads the library on first use and says whether it can run. */
  int (*gemm_available)(Backend *b);
  int (*gemm_bf16)(Backend *b, int64_t m, int64_t n, int64_t k, const void *a, const void *w, const void *add,
                   void *out, Diag *d);
  /* Optional: gemm_bf16 appended to graph g after its previous node, with these pointers for the graph's
   * life (no graph_update of it). */
  int (*graph_add_gemm)(Backend *b, BackendGraph *g, int64_t m, int64_t n, int64_t k, const void *a, const void *w,
                        const void *add, void *out, Diag *d);
  /* Optional: the bytes allocations can take now (free device memory; available host memory on the CPU);
   * 0 when unknown. */
  size_t (*memory_free)(Backend *b);
} BackendOps;

struct Backend {
  const BackendOps *ops;
  void *impl;
  TargetDesc target; /* the device, as the backend found it (CUDA: cuDeviceGetAttribute; CPU: the host) */
};

Backend *backend_cpu_new(Diag *d);
/* CPU backend counters: compiler invocations and compile-cache hits since creation (for tests). */
void backend_cpu_stats(Backend *b, int *compiles, int *cache_hits);
/* CUDA backend over the driver API (libcuda.so.1, loaded at run time). NULL with a diag saying why
 * when there is no driver or no GPU. */
Backend *backend_cuda_new(Diag *d);
/* CUDA backend counters: NVRTC compiles and compile-cache hits since creation (for tests). */
void backend_cuda_stats(Backend *b, int *compiles, int *cache_hits);
/* The GPU's name ("NVIDIA H200") and NVRTC target ("sm_90"); NULL for other backends. */
const char *backend_cuda_device(Backend *b);
const char *backend_cuda_arch(Backend *b);
#endif
