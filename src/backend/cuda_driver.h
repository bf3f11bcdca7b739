/* Private to the CUDA backend: the CUDA driver API as a table of function pointers, filled from
 * libcuda.so.1 at run time (so lathe builds without cuda.h and starts on machines without a GPU).
 * Prototypes are declared here by hand: CUresult is an int, handles are opaque pointers. */
#ifndef LATHE_CUDA_DRIVER_H
#define LATHE_CUDA_DRIVER_H
#include <stddef.h>

#include "../base/diag.h"
#include "backend.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUgraphNode_st *CUgraphNode;

/* cuGraphAddKernelNode's parameters (the original, v1 layout of the exported v1 entry points). */
typedef struct CudaKernelNodeParams {
  CUfunction func;
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  void **kernelParams;
  void **extra;
} CudaKernelNodeParams;

/* CUgraphEdgeData: how a graph edge triggers (cuGraphAddDependencies_v2). */
typedef struct CudaGraphEdge {
  unsigned char from_port, to_port, type, reserved[5];
} CudaGraphEdge;
#define CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC 1
#define CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC 1

#define CUDA_SUCCESS 0
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_NOT_FOUND 500
#define CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK 1
#define CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK 8
#define CU_DEVICE_ATTRIBUTE_WARP_SIZE 10
#define CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK 12
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE 36
#define CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH 37
#define CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE 38
#define CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR 39
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR 81
#define CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR 82
#define CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97

typedef struct CudaDriver {
  void *dl; /* dlopen handle; NULL for a table filled by hand (tests) */
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *dev, int ordinal);
  CUresult (*cuDeviceGetAttribute)(int *value, int attrib, CUdevice dev);
  CUresult (*cuDeviceGetName)(char *name, int len, CUdevice dev);
  /* The primary context is shared with the runtime API (cuBLASLt later), so pointers mix freely. */
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice dev);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice dev);
  CUresult (*cuCtxSetCurrent)(CUcontext ctx);
  CUresult (*cuCtxSynchronize)(void);
  CUresult (*cuMemAlloc)(CUdeviceptr *ptr, size_t bytes);
  CUresult (*cuMemFree)(CUdeviceptr ptr);
  CUresult (*cuMemGetInfo)(size_t *free_bytes, size_t *total_bytes);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
  CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuModuleLoadData)(CUmodule *mod, const void *image);
  CUresult (*cuModuleUnload)(CUmodule mod);
  CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule mod, const char *name);
  CUresult (*cuLaunchKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared_bytes, CUstream stream, void **params, void **extra);
  CUresult (*cuGetErrorName)(CUresult rc, const char **name);
  CUresult (*cuGetErrorString)(CUresult rc, const char **text);
  /* Timing (for plan_bench on this backend later). */
  CUresult (*cuEventCreate)(CUevent *ev, unsigned flags);
  CUresult (*cuEventDestroy)(CUevent ev);
  CUresult (*cuEventRecord)(CUevent ev, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent ev);
  CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
  /* CUDA graphs: optional (NULL when the driver lacks them; graphs are then not offered). */
  CUresult (*cuGraphCreate)(CUgraph *g, unsigned flags);
  CUresult (*cuGraphAddKernelNode)(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                   const CudaKernelNodeParams *p);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *exec, CUgraph g, unsigned long long flags);
  CUresult (*cuGraphExecKernelNodeSetParams)(CUgraphExec exec, CUgraphNode node, const CudaKernelNodeParams *p);
  CUresult (*cuGraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec exec);
  CUresult (*cuGraphDestroy)(CUgraph g);
  /* Optional on its own (CUDA 12.3 drivers and newer): edges that let a kernel start while the one
   * before it finishes (programmatic dependent launch). NULL: plain edges. */
  CUresult (*cuGraphAddDependencies_v2)(CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                                        const CudaGraphEdge *edges, size_t n);
  /* Optional on their own: recording a library call (cuBLASLt) on a stream of lathe's into a graph of
   * its own, added to a step's graph as a child node. NULL: library GEMMs are not recorded. */
  CUresult (*cuStreamCreate)(CUstream *s, unsigned flags);
  CUresult (*cuStreamDestroy)(CUstream s);
  CUresult (*cuStreamBeginCapture)(CUstream s, int mode);
  CUresult (*cuStreamEndCapture)(CUstream s, CUgraph *g);
  CUresult (*cuGraphAddChildGraphNode)(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                       CUgraph child);
} CudaDriver;

#define CUDA_NO_DRIVER_MSG "no CUDA driver found (libcuda.so.1 not loadable): is an NVIDIA GPU and driver installed?"
#define CUDA_NO_DEVICE_MSG "CUDA driver found but no GPU is present (cuInit: CUDA_ERROR_NO_DEVICE)"

/* Loads libcuda.so.1 and resolves every entry point. On failure sets the diag, leaves drv zeroed. */
int cuda_driver_load(CudaDriver *drv, Diag *d);
void cuda_driver_unload(CudaDriver *drv);

/* Records "CALL(WHAT): CUDA_ERROR_X: text" for a failed call rc; what may be NULL. */
void cuda_diag(const CudaDriver *drv, Diag *d, CUresult rc, const char *call, const char *what);

/* Backend over an already filled driver table (copied; it then owns the dlopen handle, also on
 * failure). backend_cuda_new passes the real driver; CPU tests pass a fake one, no GPU needed. */
Backend *cuda_backend_with_driver(const CudaDriver *drv, Diag *d);
/* Module from an already compiled image (cubin, PTX, fatbin), bypassing NVRTC and the cache. */
BackendModule *cuda_module_from_image(Backend *b, const void *image, Diag *d);
#endif
