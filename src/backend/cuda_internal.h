/* Private to the CUDA backend: its state and the helpers its files share (cuda.c: devices, memory,
 * modules, launches; cuda_gemm.c: cuBLASLt; cuda_graph.c: graphs). */
#ifndef LATHE_CUDA_INTERNAL_H
#define LATHE_CUDA_INTERNAL_H
#include "backend.h"
#include "cublaslt.h"
#include "cuda_driver.h"
#include "../target/target.h"

#define CUDA_MAX_ARGS 128
/* A generated program compiles as up to CUDA_MAX_UNITS translation units, each at least CUDA_UNIT_BYTES, at
 * once (source_units.h; LATHE_NVRTC_UNITS overrides the count, 1 = one unit) */
#define CUDA_MAX_UNITS 16
#define CUDA_UNIT_BYTES 16384

typedef struct CudaImpl {
  CudaDriver drv;
  CUdevice dev;
  CUcontext ctx; /* the device's primary context, retained */
  int have_ctx;
  int max_threads;
  char arch[16];       /* "sm_90" */
  TargetDesc desc;     /* the device's description, from cuDeviceGetAttribute */
  int pdl;             /* graph edges with programmatic dependent launch (sm_90+, driver has them) */
  char dev_name[128];  /* "NVIDIA H200" */
  char nvrtc_id[1200]; /* NVRTC version and library file, part of every cache key */
  int have_nvrtc_id;
  char last_kernel[128]; /* for errors that surface at the next synchronize */
  int compiles, cache_hits;
  CUevent *timers; /* BACKEND_TIMER_SLOTS, created on first use (profiling only) */
  CublasLt *lt;    /* cuBLASLt, opened on first use; NULL when absent or LATHE_CUBLASLT=0 */
  int lt_tried;
  CUdeviceptr lt_ws;     /* its workspace */
  char algos_path[4200]; /* where its measured choices are kept across runs (gemm_algos.h); "" for nowhere */
  CUstream capture;      /* where library GEMMs are recorded into graphs (created on first use) */
} CudaImpl;

typedef struct CudaFn {
  char *name;
  CUfunction fn;
} CudaFn;

/* What a BackendModule* points to on this backend: one CUmodule per translation unit. */
typedef struct CudaModule {
  CUmodule mods[CUDA_MAX_UNITS];
  int nmods;
  CudaFn *fns; /* kernels already looked up, so launches skip cuModuleGetFunction */
  int nfns, cap;
} CudaModule;

CudaImpl *cuda_impl(Backend *b);
int cuda_check(CudaImpl *c, Diag *d, CUresult rc, const char *call, const char *what);
int cuda_make_current(CudaImpl *c, Diag *d);
int cuda_lookup_kernel(CudaImpl *c, CudaModule *m, const char *name, CUfunction *out, Diag *d);
/* Kernel arguments as the driver takes them (cuda.c). */
void cuda_pack_args(void *const *bufs, int nbufs, const int64_t *syms, int nsyms, CUdeviceptr *ptrs, long long *vals,
                    void **params);

/* cuda_gemm.c */
int cuda_gemm_available(Backend *b);
int cuda_choose_gemm_algo(CudaImpl *c, int64_t m, int64_t n, int64_t k, const void *a, const void *w, void *out,
                          Diag *d);
int cuda_gemm_bf16(Backend *b, int64_t m, int64_t n, int64_t k, const void *a, const void *w, const void *add,
                   void *out, Diag *d);

/* cuda_graph.c */
BackendGraph *cuda_graph_new(Backend *b, Diag *d);
int cuda_graph_add(Backend *b, BackendGraph *g, BackendModule *bm, const char *name, void *const *bufs, int nbufs,
                   const int64_t *syms, int nsyms, int64_t grid, int block, Diag *d);
int cuda_graph_instantiate(Backend *b, BackendGraph *g, Diag *d);
int cuda_graph_update(Backend *b, BackendGraph *g, int node, void *const *bufs, int nbufs, const int64_t *syms,
                      int nsyms, int64_t grid, Diag *d);
int cuda_graph_launch(Backend *b, BackendGraph *g, Diag *d);
void cuda_graph_free(Backend *b, BackendGraph *g);
int cuda_graph_add_gemm(Backend *b, BackendGraph *g, int64_t m, int64_t n, int64_t k, const void *a, const void *w,
                        const void *add, void *out, Diag *d);
#endif
