/* Loading the CUDA driver API from libcuda.so.1 at run time, and formatting its errors. */
#include "cuda_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* Symbol names as the driver exports them: the _v2 names are the current ABI of calls whose
 * signature changed once (64-bit device pointers, sizes). */
typedef struct DriverSym {
  const char *name;
  size_t offset;
} DriverSym;

#define SYM(field, exported)                                                                                           \
  { exported, offsetof(CudaDriver, field) }
static const DriverSym driver_syms[] = {
    SYM(cuInit, "cuInit"),
    SYM(cuDriverGetVersion, "cuDriverGetVersion"),
    SYM(cuDeviceGetCount, "cuDeviceGetCount"),
    SYM(cuDeviceGet, "cuDeviceGet"),
    SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
    SYM(cuDeviceGetName, "cuDeviceGetName"),
    SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
    SYM(cuCtxSetCurrent, "cuCtxSetCurrent"),
    SYM(cuCtxSynchronize, "cuCtxSynchronize"),
    SYM(cuMemAlloc, "cuMemAlloc_v2"),
    SYM(cuMemFree, "cuMemFree_v2"),
    SYM(cuMemGetInfo, "cuMemGetInfo_v2"),
    SYM(cuMemcpyHtoD, "cuMemcpyHtoD_v2"),
    SYM(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
    SYM(cuModuleLoadData, "cuModuleLoadData"),
    SYM(cuModuleUnload, "cuModuleUnload"),
    SYM(cuModuleGetFunction, "cuModuleGetFunction"),
    SYM(cuLaunchKernel, "cuLaunchKernel"),
    SYM(cuGetErrorName, "cuGetErrorName"),
    SYM(cuGetErrorString, "cuGetErrorString"),
    SYM(cuEventCreate, "cuEventCreate"),
    SYM(cuEventDestroy, "cuEventDestroy_v2"),
    SYM(cuEventRecord, "cuEventRecord"),
    SYM(cuEventSynchronize, "cuEventSynchronize"),
    SYM(cuEventElapsedTime, "cuEventElapsedTime"),
};

/* Resolved when present; a driver without them still runs everything, without graph replay. */
static const DriverSym optional_syms[] = {
    SYM(cuGraphCreate, "cuGraphCreate"),
    SYM(cuGraphAddKernelNode, "cuGraphAddKernelNode"),
    SYM(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags"),
    SYM(cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams"),
    SYM(cuGraphLaunch, "cuGraphLaunch"),
    SYM(cuGraphExecDestroy, "cuGraphExecDestroy"),
    SYM(cuGraphDestroy, "cuGraphDestroy"),
};

int cuda_driver_load(CudaDriver *drv, Diag *d) {
  memset(drv, 0, sizeof *drv);
  void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    diag_error(d, 0, 0, "%s", CUDA_NO_DRIVER_MSG);
    return 0;
  }
  for (size_t i = 0; i < sizeof driver_syms / sizeof driver_syms[0]; i++) {
    void *sym = dlsym(dl, driver_syms[i].name);
    if (!sym) {
      diag_error(d, 0, 0, "CUDA driver libcuda.so.1 lacks %s: the driver is too old for lathe", driver_syms[i].name);
      dlclose(dl);
      memset(drv, 0, sizeof *drv);
      return 0;
    }
    /* object pointer -> function pointer slot, as POSIX dlsym intends */
    memcpy((char *)drv + driver_syms[i].offset, &sym, sizeof sym);
  }
  int have_all = 1;
  void *opt[sizeof optional_syms / sizeof optional_syms[0]];
  for (size_t i = 0; i < sizeof optional_syms / sizeof optional_syms[0]; i++)
    have_all &= (opt[i] = dlsym(dl, optional_syms[i].name)) != NULL;
  for (size_t i = 0; have_all && i < sizeof optional_syms / sizeof optional_syms[0]; i++)
    memcpy((char *)drv + optional_syms[i].offset, &opt[i], sizeof opt[i]);
  void *deps = have_all ? dlsym(dl, "cuGraphAddDependencies_v2") : NULL;
  memcpy(&drv->cuGraphAddDependencies_v2, &deps, sizeof deps);
  static const DriverSym capture_syms[] = {
      SYM(cuStreamCreate, "cuStreamCreate"),
      SYM(cuStreamDestroy, "cuStreamDestroy_v2"),
      SYM(cuStreamBeginCapture, "cuStreamBeginCapture_v2"),
      SYM(cuStreamEndCapture, "cuStreamEndCapture"),
      SYM(cuGraphAddChildGraphNode, "cuGraphAddChildGraphNode"),
  };
  const size_t ncap = sizeof capture_syms / sizeof capture_syms[0];
  void *cap[sizeof capture_syms / sizeof capture_syms[0]];
  for (size_t i = 0; i < ncap; i++) have_all &= (cap[i] = dlsym(dl, capture_syms[i].name)) != NULL;
  for (size_t i = 0; have_all && i < ncap; i++) memcpy((char *)drv + capture_syms[i].offset, &cap[i], sizeof cap[i]);
  drv->dl = dl;
  return 1;
}

#undef SYM

void cuda_driver_unload(CudaDriver *drv) {
  if (drv->dl) dlclose(drv->dl);
  memset(drv, 0, sizeof *drv);
}

void cuda_diag(const CudaDriver *drv, Diag *d, CUresult rc, const char *call, const char *what) {
  const char *name = NULL, *text = NULL;
  if (drv->cuGetErrorName && drv->cuGetErrorName(rc, &name) != CUDA_SUCCESS) name = NULL;
  if (drv->cuGetErrorString && drv->cuGetErrorString(rc, &text) != CUDA_SUCCESS) text = NULL;
  char code[32];
  if (!name) {
    snprintf(code, sizeof code, "CUDA error %d", rc);
    name = code;
  }
  if (what) diag_error(d, 0, 0, "%s(%s): %s: %s", call, what, name, text ? text : "unknown error");
  else diag_error(d, 0, 0, "%s: %s: %s", call, name, text ? text : "unknown error");
}
