/* CUDA backend without a GPU: the real driver's absence is reported clearly, and the backend's own
 * logic (argument packing, launch checks, kernel lookup cache, error text, zero-byte buffers,
 * compile cache) runs against a fake driver table. */
#include "testutil.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cache.h"
#include "base/notice.h"
#include "backend/cuda_driver.h"
#include "backend/nvrtc.h"
#include "backend/source_units.h"
#include "driver/pipeline.h"
#include "generate/sampler_device.h"
#include "runtime/plan.h"

/* ---- the fake driver: device memory is host memory, kernels only record their launch ---- */

typedef struct FakeGpu {
  CUresult init_rc;
  int device_count;
  int live_allocs;
  size_t last_alloc;
  int get_function_calls;
  int module_loads, module_unloads;
  CUresult next_launch_rc;
  int launches;
  unsigned grid, block, shared;
  CUdeviceptr arg_ptr[4];
  long long arg_sym[4];
  int ctx_retained;
  int cc_major, cc_minor; /* compute capability reported (0: 9.0) */
  int sms;                /* multiprocessors reported (0: 132) */
  int zero_attr;          /* an attribute reported as 0 (0: none) */
  int any_function;       /* every kernel name exists (plans) */
  int per_module;         /* a kernel exists only in the module whose cubin names it */
  char launched[64][64];  /* kernel names launched, in order (any_function only) */
  int nlaunched;
} FakeGpu;

static FakeGpu g_gpu;
static char g_module_token; /* the fake CUmodule and CUcontext point here */
static char g_function_token;
static int g_launch_nbufs; /* how the fake kernel reads its parameters */
static int g_launch_nsyms;

static CUresult f_init(unsigned flags) { return g_gpu.init_rc; }
static CUresult f_version(int *v) {
  *v = 13000;
  return 0;
}
static CUresult f_count(int *n) {
  *n = g_gpu.device_count;
  return 0;
}
static CUresult f_get(CUdevice *dev, int ordinal) {
  *dev = ordinal;
  return 0;
}
/* An H200's attributes unless the test asks otherwise (cc_major, sms; zero_attr reports 0 for one). */
static CUresult f_attr(int *v, int attrib, CUdevice dev) {
  switch (attrib) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = g_gpu.cc_major ? g_gpu.cc_major : 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = g_gpu.cc_minor; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = g_gpu.sms ? g_gpu.sms : 132; break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *v = 49152; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = 233472; break;
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
  case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; break;
  case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50 << 20; break;
  case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 3125000; break;
  case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 6144; break;
  default: *v = 0;
  }
  if (g_gpu.zero_attr && attrib == g_gpu.zero_attr) *v = 0;
  return 0;
}
static CUresult f_name(char *name, int len, CUdevice dev) {
  snprintf(name, (size_t)len, "Fake GPU");
  return 0;
}
static CUresult f_retain(CUcontext *ctx, CUdevice dev) {
  *ctx = (CUcontext)(void *)&g_module_token;
  g_gpu.ctx_retained++;
  return 0;
}
static CUresult f_release(CUdevice dev) {
  g_gpu.ctx_retained--;
  return 0;
}
static CUresult f_set_current(CUcontext ctx) { return 0; }
static CUresult f_sync(void) { return 0; }
static CUresult f_alloc(CUdeviceptr *p, size_t bytes) {
  if (bytes == 0) return 1; /* like the real driver: CUDA_ERROR_INVALID_VALUE */
  void *m = malloc(bytes);
  if (!m) return 2;
  memset(m, 0xbe, bytes); /* poison: what no kernel wrote is never a plausible value */
  g_gpu.live_allocs++;
  g_gpu.last_alloc = bytes;
  *p = (CUdeviceptr)(uintptr_t)m;
  return 0;
}
static CUresult f_free(CUdeviceptr p) {
  free((void *)(uintptr_t)p);
  g_gpu.live_allocs--;
  return 0;
}
static CUresult f_htod(CUdeviceptr dst, const void *src, size_t n) {
  memcpy((void *)(uintptr_t)dst, src, n);
  return 0;
}
static CUresult f_dtoh(void *dst, CUdeviceptr src, size_t n) {
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return 0;
}
/* With per_module, a module is a copy of its image (an ELF cubin, sized by its section headers) and
 * holds the kernels whose names occur in it. */
typedef struct FakeModule {
  char *image;
  size_t size;
} FakeModule;
static FakeModule g_modules[32];
static int g_nmodules;
static CUresult f_load(CUmodule *mod, const void *image) {
  g_gpu.module_loads++;
  *mod = (CUmodule)(void *)&g_module_token;
  const unsigned char *e = image;
  if (!g_gpu.per_module ||
      memcmp(e,
             "\x7f"
             "ELF",
             4) ||
      g_nmodules == 32)
    return 0;
  uint64_t shoff;
  uint16_t shentsize, shnum;
  memcpy(&shoff, e + 0x28, 8);
  memcpy(&shentsize, e + 0x3A, 2);
  memcpy(&shnum, e + 0x3C, 2);
  FakeModule *m = &g_modules[g_nmodules++];
  m->size = (size_t)(shoff + (uint64_t)shentsize * shnum);
  m->image = malloc(m->size);
  memcpy(m->image, image, m->size);
  *mod = (CUmodule)(void *)m;
  return 0;
}
static CUresult f_unload(CUmodule mod) {
  g_gpu.module_unloads++;
  return 0;
}
static char g_names[64][64]; /* with any_function, a function handle is its name's slot */
static CUresult f_get_function(CUfunction *fn, CUmodule mod, const char *name) {
  g_gpu.get_function_calls++;
  if (g_gpu.per_module && (void *)mod != (void *)&g_module_token) {
    const FakeModule *m = (const FakeModule *)(void *)mod;
    if (!memmem(m->image, m->size, name, strlen(name) + 1)) return 500; /* CUDA_ERROR_NOT_FOUND */
    *fn = (CUfunction)(void *)&g_function_token;
    return 0;
  }
  if (g_gpu.any_function) {
    for (int i = 0; i < 64; i++)
      if (!g_names[i][0] || !strcmp(g_names[i], name)) {
        snprintf(g_names[i], sizeof g_names[i], "%s", name);
        *fn = (CUfunction)(void *)g_names[i];
        return 0;
      }
    return 2;
  }
  if (strcmp(name, "rms_norm_0") != 0 && strcmp(name, "vadd") != 0) return 500; /* CUDA_ERROR_NOT_FOUND */
  *fn = (CUfunction)(void *)&g_function_token;
  return 0;
}
static CUresult f_launch(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                         unsigned shared, CUstream stream, void **params, void **extra) {
  if (g_gpu.next_launch_rc) {
    CUresult rc = g_gpu.next_launch_rc;
    g_gpu.next_launch_rc = 0;
    return rc;
  }
  g_gpu.launches++;
  if (g_gpu.any_function && g_gpu.nlaunched < 64)
    snprintf(g_gpu.launched[g_gpu.nlaunched++], 64, "%s", (const char *)(void *)fn);
  g_gpu.grid = gx * gy * gz;
  g_gpu.block = bx * by * bz;
  g_gpu.shared = shared;
  for (int i = 0; i < g_launch_nbufs && i < 4; i++) g_gpu.arg_ptr[i] = *(CUdeviceptr *)params[i];
  for (int j = 0; j < g_launch_nsyms && j < 4; j++) g_gpu.arg_sym[j] = *(long long *)params[g_launch_nbufs + j];
  return 0;
}
static CUresult f_error_name(CUresult rc, const char **s) {
  switch (rc) {
  case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
  case 3: *s = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
  case 100: *s = "CUDA_ERROR_NO_DEVICE"; return 0;
  case 500: *s = "CUDA_ERROR_NOT_FOUND"; return 0;
  default: *s = NULL; return 1; /* unknown code: the backend must fall back to the number */
  }
}
static CUresult f_error_string(CUresult rc, const char **s) {
  switch (rc) {
  case 1: *s = "invalid argument"; return 0;
  case 3: *s = "initialization error"; return 0;
  case 100: *s = "no CUDA-capable device is detected"; return 0;
  case 500: *s = "named symbol not found"; return 0;
  default: *s = NULL; return 1;
  }
}

static CudaDriver fake_driver(void) {
  CudaDriver drv = {0};
  drv.cuInit = f_init;
  drv.cuDriverGetVersion = f_version;
  drv.cuDeviceGetCount = f_count;
  drv.cuDeviceGet = f_get;
  drv.cuDeviceGetAttribute = f_attr;
  drv.cuDeviceGetName = f_name;
  drv.cuDevicePrimaryCtxRetain = f_retain;
  drv.cuDevicePrimaryCtxRelease = f_release;
  drv.cuCtxSetCurrent = f_set_current;
  drv.cuCtxSynchronize = f_sync;
  drv.cuMemAlloc = f_alloc;
  drv.cuMemFree = f_free;
  drv.cuMemcpyHtoD = f_htod;
  drv.cuMemcpyDtoH = f_dtoh;
  drv.cuModuleLoadData = f_load;
  drv.cuModuleUnload = f_unload;
  drv.cuModuleGetFunction = f_get_function;
  drv.cuLaunchKernel = f_launch;
  drv.cuGetErrorName = f_error_name;
  drv.cuGetErrorString = f_error_string;
  return drv;
}

static Backend *fake_backend(void) {
  memset(&g_gpu, 0, sizeof g_gpu);
  g_gpu.device_count = 1;
  CudaDriver drv = fake_driver();
  Diag d = {0};
  Backend *b = cuda_backend_with_driver(&drv, &d);
  if (!b) fail_msg("fake backend: %s", d.msg);
  return b;
}

/* ---- the real driver ---- */

static void test_real_driver_reports_clearly(void **state) {
  Diag d = {0};
  Backend *b = backend_cuda_new(&d);
  if (b) { /* a machine with a GPU */
    assert_false(d.set);
    assert_string_equal(b->ops->name, "cuda");
    assert_non_null(backend_cuda_arch(b));
    assert_int_equal(strncmp(backend_cuda_arch(b), "sm_", 3), 0);
    b->ops->destroy(b);
    return;
  }
  assert_true(d.set);
  assert_contains(d.msg, "CUDA");
  if (strcmp(d.msg, CUDA_NO_DRIVER_MSG) != 0 && strcmp(d.msg, CUDA_NO_DEVICE_MSG) != 0)
    fail_msg("unexpected diag: %s", d.msg);
  /* A second attempt behaves the same (nothing half-initialised is left behind). */
  Diag d2 = {0};
  assert_null(backend_cuda_new(&d2));
  assert_string_equal(d2.msg, d.msg);
}

static void test_messages_are_the_documented_ones(void **state) {
  assert_string_equal(CUDA_NO_DRIVER_MSG,
                      "no CUDA driver found (libcuda.so.1 not loadable): is an NVIDIA GPU and driver installed?");
  assert_string_equal(CUDA_NO_DEVICE_MSG, "CUDA driver found but no GPU is present (cuInit: CUDA_ERROR_NO_DEVICE)");
}

/* ---- startup failures through the fake driver ---- */

static void test_no_device_from_cuinit(void **state) {
  memset(&g_gpu, 0, sizeof g_gpu);
  g_gpu.init_rc = 100;
  CudaDriver drv = fake_driver();
  Diag d = {0};
  assert_null(cuda_backend_with_driver(&drv, &d));
  assert_string_equal(d.msg, CUDA_NO_DEVICE_MSG);
  assert_int_equal(g_gpu.ctx_retained, 0);
}

static void test_no_device_from_count(void **state) {
  memset(&g_gpu, 0, sizeof g_gpu);
  g_gpu.device_count = 0;
  CudaDriver drv = fake_driver();
  Diag d = {0};
  assert_null(cuda_backend_with_driver(&drv, &d));
  assert_string_equal(d.msg, CUDA_NO_DEVICE_MSG);
}

static void test_other_init_error_named(void **state) {
  memset(&g_gpu, 0, sizeof g_gpu);
  g_gpu.init_rc = 3;
  CudaDriver drv = fake_driver();
  Diag d = {0};
  assert_null(cuda_backend_with_driver(&drv, &d));
  assert_string_equal(d.msg, "cuInit: CUDA_ERROR_NOT_INITIALIZED: initialization error");
}

static void test_bad_device_ordinal(void **state) {
  memset(&g_gpu, 0, sizeof g_gpu);
  g_gpu.device_count = 2;
  setenv("LATHE_CUDA_DEVICE", "5", 1);
  CudaDriver drv = fake_driver();
  Diag d = {0};
  Backend *b = cuda_backend_with_driver(&drv, &d);
  unsetenv("LATHE_CUDA_DEVICE");
  assert_null(b);
  assert_string_equal(d.msg, "LATHE_CUDA_DEVICE=5: no such GPU (this machine has 2)");
}

static void test_unknown_error_code_falls_back_to_number(void **state) {
  CudaDriver drv = fake_driver();
  Diag d = {0};
  cuda_diag(&drv, &d, 719, "cuCtxSynchronize", "after k");
  assert_string_equal(d.msg, "cuCtxSynchronize(after k): CUDA error 719: unknown error");
}

/* ---- graphs: programmatic edges between kernel nodes ---- */

static struct {
  int nodes, plain_deps, programmatic_edges, plain_edges;
  int refuse_programmatic;
} g_graph;
static char g_graph_token;
static CUresult f_graph_create(CUgraph *g, unsigned flags) {
  *g = (CUgraph)(void *)&g_graph_token;
  return 0;
}
static CUresult f_graph_add_kernel(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                                   const CudaKernelNodeParams *p) {
  *node = (CUgraphNode)(intptr_t)(++g_graph.nodes);
  g_graph.plain_deps += (int)ndeps;
  return 0;
}
static CUresult f_graph_destroy(CUgraph g) { return 0; }
static CUresult f_graph_add_deps(CUgraph g, const CUgraphNode *from, const CUgraphNode *to, const CudaGraphEdge *e,
                                 size_t n) {
  assert_int_equal(n, 1);
  assert_true((intptr_t)*from + 1 == (intptr_t)*to); /* each node after the one before it */
  if (e->type == CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC) {
    if (g_graph.refuse_programmatic) return 1;
    assert_int_equal(e->from_port, CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC);
    g_graph.programmatic_edges++;
  } else {
    g_graph.plain_edges++;
  }
  return 0;
}

/* Three kernels as a graph on a device of compute capability `major`.0. */
static void build_graph(int major, int refuse) {
  memset(&g_gpu, 0, sizeof g_gpu);
  memset(&g_graph, 0, sizeof g_graph);
  g_gpu.device_count = 1;
  g_gpu.cc_major = major;
  g_graph.refuse_programmatic = refuse;
  CudaDriver drv = fake_driver();
  drv.cuGraphCreate = f_graph_create;
  drv.cuGraphAddKernelNode = f_graph_add_kernel;
  drv.cuGraphAddDependencies_v2 = f_graph_add_deps;
  drv.cuGraphDestroy = f_graph_destroy;
  Diag d = {0};
  Backend *b = cuda_backend_with_driver(&drv, &d);
  assert_non_null(b);
  BackendModule *m = cuda_module_from_image(b, "fake image", &d);
  assert_non_null(m);
  BackendGraph *g = b->ops->graph_new(b, &d);
  assert_non_null(g);
  void *bufs[1] = {(void *)(uintptr_t)0x1000};
  for (int i = 0; i < 3; i++)
    if (!b->ops->graph_add(b, g, m, "vadd", bufs, 1, NULL, 0, 4, 32, &d)) fail_msg("%s", d.msg);
  b->ops->graph_free(b, g);
  b->ops->module_free(b, m);
  b->ops->destroy(b);
}

static void test_graph_edges_are_programmatic_on_hopper(void **state) {
  build_graph(9, 0);
  assert_int_equal(g_graph.nodes, 3);
  assert_int_equal(g_graph.programmatic_edges, 2);
  assert_int_equal(g_graph.plain_deps + g_graph.plain_edges, 0);
  build_graph(8, 0); /* griddepcontrol needs sm_90: ordinary edges */
  assert_int_equal(g_graph.programmatic_edges, 0);
  assert_int_equal(g_graph.plain_deps, 2);
  setenv("LATHE_PDL", "0", 1);
  build_graph(9, 0);
  unsetenv("LATHE_PDL");
  assert_int_equal(g_graph.programmatic_edges, 0);
  assert_int_equal(g_graph.plain_deps, 2);
  build_graph(9, 1); /* the driver refuses them: an ordinary edge, and ordinary edges from then on */
  assert_int_equal(g_graph.programmatic_edges, 0);
  assert_int_equal(g_graph.plain_edges, 1);
  assert_int_equal(g_graph.plain_deps, 1);
}

/* ---- a working fake device ---- */

static void test_device_properties(void **state) {
  Backend *b = fake_backend();
  assert_string_equal(backend_cuda_arch(b), "sm_90");
  assert_string_equal(backend_cuda_device(b), "Fake GPU");
  assert_int_equal(g_gpu.ctx_retained, 1);
  b->ops->destroy(b);
  assert_int_equal(g_gpu.ctx_retained, 0); /* primary context released */
  assert_null(backend_cuda_arch(NULL));
}

/* The backend's target description comes from cuDeviceGetAttribute: every field, the name, and a
 * device that reports no multiprocessors is refused with the attribute named. Compiling for it
 * chooses schedules from its own numbers (split-k fills two GEMM blocks on each SM). */
static void test_device_description_from_attributes(void **state) {
  Backend *b = fake_backend();
  const TargetDesc *t = &b->target;
  assert_int_equal(t->kind, TARGET_CUDA);
  assert_string_equal(t->name, "Fake GPU");
  assert_int_equal(t->cc_major, 9);
  assert_int_equal(t->sms, 132);
  assert_int_equal(t->warp_size, 32);
  assert_int_equal(t->max_threads_per_sm, 2048);
  assert_int_equal(t->smem_per_block, 49152);
  assert_int_equal(t->smem_per_block_optin, 232448);
  assert_int_equal(t->smem_per_sm, 233472);
  assert_int_equal(t->regs_per_sm, 65536);
  assert_int_equal(t->l2_bytes, 50 << 20);
  assert_int_equal(t->bus_width_bits, 6144);
  assert_true(target_has_bf16_mma(t));
  b->ops->destroy(b);
  memset(&g_gpu, 0, sizeof g_gpu);
  g_gpu.device_count = 1;
  g_gpu.sms = 58;
  g_gpu.cc_major = 8;
  g_gpu.cc_minor = 9;
  CudaDriver drv = fake_driver();
  Diag d = {0};
  b = cuda_backend_with_driver(&drv, &d);
  assert_non_null(b);
  assert_int_equal(b->target.sms, 58);
  assert_string_equal(backend_cuda_arch(b), "sm_89");
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  c->device = b->target;
  assert_true(compile_source(c, "x: f32[seq, 64]; w: bf16[96, 64]; y = linear(x, w)", ST_TILE, &d));
  assert_int_equal(c->tile->kernels[0].s.gemm_fill, 2 * 58);
  compilation_free(c);
  b->ops->destroy(b);
  memset(&g_gpu, 0, sizeof g_gpu);
  g_gpu.device_count = 1;
  g_gpu.zero_attr = CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
  drv = fake_driver();
  d = (Diag){0};
  assert_null(cuda_backend_with_driver(&drv, &d));
  assert_contains(d.msg, "multiprocessors is 0");
  assert_int_equal(g_gpu.ctx_retained, 0);
}

static void test_memory_roundtrip_and_zero_bytes(void **state) {
  Backend *b = fake_backend();
  Diag d = {0};
  void *empty1 = b->ops->alloc(b, 0, &d);
  void *empty2 = b->ops->alloc(b, 0, &d);
  assert_false(d.set);
  assert_non_null(empty1);
  assert_non_null(empty2);
  assert_ptr_not_equal(empty1, empty2);
  assert_true(b->ops->upload(b, empty1, NULL, 0, &d)); /* zero-byte copies touch nothing */
  float host[5] = {1, 2, 3, 4, 5}, back[5] = {0};
  void *buf = b->ops->alloc(b, sizeof host, &d);
  assert_non_null(buf);
  assert_true(b->ops->upload(b, buf, host, sizeof host, &d));
  assert_true(b->ops->download(b, back, buf, sizeof back, &d));
  assert_memory_equal(host, back, sizeof host);
  assert_true(b->ops->sync(b, &d));
  b->ops->free(b, buf);
  b->ops->free(b, empty1);
  b->ops->free(b, empty2);
  b->ops->free(b, NULL);
  assert_int_equal(g_gpu.live_allocs, 0);
  b->ops->destroy(b);
}

static void test_launch_packs_abi_arguments(void **state) {
  Backend *b = fake_backend();
  Diag d = {0};
  BackendModule *m = cuda_module_from_image(b, "fake image", &d);
  assert_non_null(m);
  void *bufs[2] = {(void *)(uintptr_t)0x1000, (void *)(uintptr_t)0x2000};
  int64_t syms[2] = {7, -3};
  g_launch_nbufs = 2;
  g_launch_nsyms = 2;
  assert_true(b->ops->launch(b, m, "rms_norm_0", bufs, 2, syms, 2, 32, 256, &d));
  assert_false(d.set);
  assert_int_equal(g_gpu.launches, 1);
  assert_int_equal(g_gpu.grid, 32);
  assert_int_equal(g_gpu.block, 256);
  assert_int_equal(g_gpu.shared, 0);
  assert_true(g_gpu.arg_ptr[0] == 0x1000 && g_gpu.arg_ptr[1] == 0x2000);
  assert_true(g_gpu.arg_sym[0] == 7 && g_gpu.arg_sym[1] == -3);
  /* The function handle is cached: a second launch does not look it up again. */
  assert_true(b->ops->launch(b, m, "rms_norm_0", bufs, 2, syms, 2, 1, 32, &d));
  assert_int_equal(g_gpu.get_function_calls, 1);
  assert_int_equal(g_gpu.launches, 2);
  b->ops->module_free(b, m);
  assert_int_equal(g_gpu.module_unloads, 1);
  b->ops->destroy(b);
}

static void test_launch_errors_name_call_and_kernel(void **state) {
  Backend *b = fake_backend();
  Diag d = {0};
  BackendModule *m = cuda_module_from_image(b, "fake image", &d);
  void *bufs[1] = {(void *)(uintptr_t)0x1000};
  g_launch_nbufs = 1;
  g_launch_nsyms = 0;
  g_gpu.next_launch_rc = 1;
  assert_false(b->ops->launch(b, m, "rms_norm_0", bufs, 1, NULL, 0, 4, 128, &d));
  assert_string_equal(d.msg, "cuLaunchKernel(rms_norm_0): CUDA_ERROR_INVALID_VALUE: invalid argument");

  Diag d2 = {0};
  assert_false(b->ops->launch(b, m, "no_such_kernel", bufs, 1, NULL, 0, 4, 128, &d2));
  assert_string_equal(d2.msg, "cuModuleGetFunction(no_such_kernel): CUDA_ERROR_NOT_FOUND: named symbol not found");

  Diag d3 = {0};
  assert_false(b->ops->launch(b, m, "vadd", bufs, 1, NULL, 0, 4, 2048, &d3));
  assert_contains(d3.msg, "cuLaunchKernel(vadd): launch shape grid=4 block=2048 out of range");
  assert_int_equal(g_gpu.launches, 0);

  /* An empty grid (a symbolic extent of 0) launches nothing and is not an error. */
  Diag d4 = {0};
  assert_true(b->ops->launch(b, m, "vadd", bufs, 1, NULL, 0, 0, 128, &d4));
  assert_false(d4.set);
  assert_int_equal(g_gpu.launches, 0);

  Diag d5 = {0};
  assert_false(b->ops->launch(b, NULL, "vadd", bufs, 1, NULL, 0, 1, 1, &d5));
  assert_contains(d5.msg, "without a module");
  b->ops->module_free(b, m);
  b->ops->destroy(b);
}

/* ---- compile through NVRTC and the cache (only where libnvrtc is installed) ---- */

static char g_cache[256];
static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) { return remove(path); }

static void test_compile_is_cached(void **state) {
  if (!nvrtc_available()) skip();
  snprintf(g_cache, sizeof g_cache, "/tmp/lathe-test-cuda-XXXXXX");
  assert_non_null(mkdtemp(g_cache));
  setenv("LATHE_CACHE_DIR", g_cache, 1);
  Backend *b = fake_backend();
  const char *src = "extern \"C\" __global__ void vadd(float *a, float *b, float *c, long long n) {\n"
                    "  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;\n"
                    "  if (i < n) c[i] = a[i] + b[i];\n"
                    "}\n";
  Diag d = {0};
  BackendModule *m1 = b->ops->compile(b, src, &d);
  assert_non_null(m1);
  BackendModule *m2 = b->ops->compile(b, src, &d);
  assert_non_null(m2);
  int compiles = -1, hits = -1;
  backend_cuda_stats(b, &compiles, &hits);
  assert_int_equal(compiles, 1);
  assert_int_equal(hits, 1);
  Diag bad = {0};
  assert_null(b->ops->compile(b, "extern \"C\" __global__ void broken( { }\n", &bad));
  assert_true(bad.set);
  b->ops->module_free(b, m1);
  b->ops->module_free(b, m2);
  b->ops->destroy(b);
  unsetenv("LATHE_CACHE_DIR");
  nftw(g_cache, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- a program as several translation units (source_units.c) ---- */

static void fresh_cache(void);
static void drop_cache(void);

static char *marked_source(int nkernels, int pad) {
  StrBuf b = {0};
  sb_puts(&b, "typedef long long i64;\nstatic __device__ float twice(float x) { return 2 * x; }\n");
  for (int k = 0; k < nkernels; k++) {
    sb_puts(&b, "\n" SOURCE_UNIT_MARK);
    sb_printf(&b, "extern \"C\" __global__ void kern%d(float *y) { y[threadIdx.x] = twice(%d.0f); }\n", k, k);
    for (int i = 0; i < pad; i++) sb_puts(&b, "/* padding padding padding padding padding padding padding */\n");
  }
  char *s = strdup(sb_str(&b));
  sb_free(&b);
  return s;
}

static void test_source_units_split(void **state) {
  SourceUnits u;
  assert_true(source_units_split("no marks here", 10, 16, &u));
  assert_int_equal(u.n, 1);
  assert_string_equal(u.text[0], "no marks here");
  source_units_free(&u);
  char *src = marked_source(10, 2); /* ten sections of about 230 bytes */
  const char *first = strstr(src, SOURCE_UNIT_MARK);
  size_t shared = (size_t)(first - src);
  assert_true(source_units_split(src, 1u << 20, 16, &u)); /* too small to split */
  assert_int_equal(u.n, 1);
  assert_string_equal(u.text[0], src);
  source_units_free(&u);
  assert_true(source_units_split(src, 500, 16, &u)); /* about 2300 bytes in units of 500 or more */
  assert_int_equal(u.n, 4);
  StrBuf again = {0};
  for (int i = 0; i < u.n; i++) {
    assert_int_equal(strncmp(u.text[i], src, shared), 0); /* the shared helpers first */
    assert_int_equal(strncmp(u.text[i] + shared, SOURCE_UNIT_MARK, strlen(SOURCE_UNIT_MARK)), 0);
    sb_puts(&again, u.text[i] + shared);
  }
  assert_string_equal(sb_str(&again), first); /* every section once, in order */
  sb_free(&again);
  source_units_free(&u);
  assert_true(source_units_split(src, 1, 3, &u)); /* capped */
  assert_int_equal(u.n, 3);
  source_units_free(&u);
  assert_true(source_units_split("a mark /* lathe: unit */\nnot at a line start", 1, 16, &u));
  assert_int_equal(u.n, 1);
  source_units_free(&u);
  free(src);
}

/* Units by kernel name: every section once, each unit's sections in order; a change to one kernel (its text,
 * its block size) changes only the unit holding it. */
static void test_source_units_split_stable(void **state) {
  (void)state;
  SourceUnits u, v;
  char *src = marked_source(10, 2);
  const char *first = strstr(src, SOURCE_UNIT_MARK);
  size_t shared = (size_t)(first - src);
  assert_true(source_units_split_stable(src, 4, &u));
  assert_true(u.n >= 2 && u.n <= 4);
  size_t body = 0;
  for (int i = 0; i < u.n; i++) {
    assert_int_equal(strncmp(u.text[i], src, shared), 0);
    body += strlen(u.text[i]) - shared;
  }
  assert_int_equal(body, strlen(first));
  for (int k = 0; k < 10; k++) { /* each kernel in exactly one unit */
    char name[32];
    snprintf(name, sizeof name, "kern%d(", k);
    int holders = 0;
    for (int i = 0; i < u.n; i++) holders += strstr(u.text[i], name) != NULL;
    assert_int_equal(holders, 1);
  }
  /* kern3 rewritten with a launch bound and another body */
  StrBuf b = {0};
  const char *k3 = strstr(src, "extern \"C\" __global__ void kern3(");
  assert_non_null(k3);
  sb_putn(&b, src, (size_t)(k3 - src));
  sb_puts(&b, "extern \"C\" __global__ void __launch_bounds__(128) kern3(float *y) { y[0] = 7.0f; }\n");
  sb_puts(&b, strchr(k3, '\n') + 1);
  assert_true(source_units_split_stable(sb_str(&b), 4, &v));
  assert_int_equal(v.n, u.n);
  int changed = 0;
  for (int i = 0; i < u.n; i++) {
    changed += strcmp(u.text[i], v.text[i]) != 0;
    if (strcmp(u.text[i], v.text[i])) assert_non_null(strstr(v.text[i], "__launch_bounds__(128) kern3("));
  }
  assert_int_equal(changed, 1);
  source_units_free(&u);
  source_units_free(&v);
  sb_free(&b);
  assert_true(source_units_split_stable("no marks here", 4, &u));
  assert_int_equal(u.n, 1);
  assert_string_equal(u.text[0], "no marks here");
  source_units_free(&u);
  free(src);
}

/* A big program compiles as several units, cached one by one, and each kernel is found in the
 * module that holds it; LATHE_NVRTC_UNITS=1 keeps one unit. */
static void test_compile_in_units(void **state) {
  if (!nvrtc_available()) skip();
  fresh_cache();
  Backend *b = fake_backend();
  g_gpu.per_module = 1;
  g_nmodules = 0;
  char *src = marked_source(3, 300); /* about 18 KB per kernel */
  Diag d = {0};
  BackendModule *m = b->ops->compile(b, src, &d);
  if (!m) fail_msg("%s", d.msg);
  int compiles = -1, hits = -1;
  backend_cuda_stats(b, &compiles, &hits);
  assert_int_equal(compiles, 3);
  assert_int_equal(hits, 0);
  assert_int_equal(g_nmodules, 3);
  g_launch_nbufs = 1;
  g_launch_nsyms = 0;
  void *y = b->ops->alloc(b, 64, &d);
  for (int k = 2; k >= 0; k--) {
    char name[16];
    snprintf(name, sizeof name, "kern%d", k);
    if (!b->ops->launch(b, m, name, &y, 1, NULL, 0, 1, 32, &d)) fail_msg("%s: %s", name, d.msg);
  }
  Diag nf = {0};
  assert_false(b->ops->launch(b, m, "kern9", &y, 1, NULL, 0, 1, 32, &nf));
  assert_contains(nf.msg, "cuModuleGetFunction(kern9): CUDA_ERROR_NOT_FOUND");
  BackendModule *m2 = b->ops->compile(b, src, &d); /* all three from the cache */
  assert_non_null(m2);
  backend_cuda_stats(b, &compiles, &hits);
  assert_int_equal(compiles, 3);
  assert_int_equal(hits, 3);
  int unloads = g_gpu.module_unloads;
  b->ops->module_free(b, m);
  b->ops->module_free(b, m2);
  assert_int_equal(g_gpu.module_unloads - unloads, 6);
  setenv("LATHE_NVRTC_UNITS", "1", 1);
  BackendModule *one = b->ops->compile(b, src, &d);
  unsetenv("LATHE_NVRTC_UNITS");
  assert_non_null(one);
  backend_cuda_stats(b, &compiles, &hits);
  assert_int_equal(compiles, 4);
  b->ops->module_free(b, one);
  /* an error in one unit is the compile's error, and nothing stays loaded */
  char *broken = marked_source(3, 300);
  *strstr(broken, "twice(1.0f)") = '@';
  unloads = g_gpu.module_unloads;
  int loads = g_gpu.module_loads;
  Diag bad = {0};
  assert_null(b->ops->compile(b, broken, &bad));
  assert_contains(bad.msg, "nvrtc: compiling for sm_90 failed");
  assert_int_equal(g_gpu.module_loads - loads, g_gpu.module_unloads - unloads);
  free(broken);
  b->ops->free(b, y);
  b->ops->destroy(b);
  for (int i = 0; i < g_nmodules; i++) free(g_modules[i].image);
  g_nmodules = 0;
  free(src);
  drop_cache();
}

/* The kernels a run of program `src` launches on a fake device of compute capability major.minor
 * with seq = `seq` (every input zero), comma-separated in launch order. */
static void run_launches(const char *src, int ninputs, int cc_major, int cc_minor, int64_t seq, char *name_out,
                         size_t cap) {
  memset(&g_gpu, 0, sizeof g_gpu);
  memset(g_names, 0, sizeof g_names);
  g_gpu.device_count = 1;
  g_gpu.cc_major = cc_major; /* read when the backend opens the device */
  g_gpu.cc_minor = cc_minor;
  g_gpu.any_function = 1;
  CudaDriver drv = fake_driver();
  Diag d = {0};
  Backend *b = cuda_backend_with_driver(&drv, &d);
  assert_non_null(b);
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  if (!compile_source(c, src, ST_CODE, &d)) fail_msg("%s", d.msg);
  Plan *p = plan_new(c->launch, sb_str(&c->code), b, &d);
  if (!p) fail_msg("%s", d.msg);
  SymEnv env = {0};
  symenv_set(&env, "seq", seq);
  void *in[8] = {0}, *out[8] = {0};
  for (int i = 0; i < ninputs; i++) in[i] = calloc((size_t)seq * 4096, sizeof(float)); /* enough for each */
  if (!plan_run(p, &env, in, out, &d)) fail_msg("%s", d.msg);
  name_out[0] = 0;
  for (int i = 0; i < g_gpu.nlaunched; i++)
    snprintf(name_out + strlen(name_out), cap - strlen(name_out), "%s%s", i ? "," : "", g_gpu.launched[i]);
  for (int i = 0; i < ninputs; i++) free(in[i]);
  plan_free(p);
  compilation_free(c);
  b->ops->destroy(b);
}

static void fresh_cache(void) {
  snprintf(g_cache, sizeof g_cache, "/tmp/lathe-test-cuda-XXXXXX");
  assert_non_null(mkdtemp(g_cache));
  setenv("LATHE_CACHE_DIR", g_cache, 1);
}

static void drop_cache(void) {
  unsetenv("LATHE_CACHE_DIR");
  nftw(g_cache, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int g_cuda_warnings;
static void count_warning(const char *msg) {
  if (strstr(msg, "is damaged")) g_cuda_warnings++;
}
static void count_warning_notice(void *ctx, const Notice *n) {
  if (n->kind == NOTICE_WARNING) count_warning(n->text);
}

/* The one .cubin in g_cache (its path into out); fails unless there is exactly one. */
static void only_cubin(char *out, size_t n) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "ls %s/*.cubin", g_cache);
  FILE *p = popen(cmd, "r");
  int count = 0;
  char line[512];
  while (fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = 0;
    if (count++ == 0) snprintf(out, n, "%s", line);
  }
  pclose(p);
  assert_int_equal(count, 1);
}

/* A cubin entry that is truncated, overwritten or another program's is not handed to the driver: it is
 * rebuilt (one warning each), and the rebuilt entry is a hit again. */
static void test_damaged_cubin_is_rebuilt(void **state) {
  if (!nvrtc_available()) skip();
  fresh_cache();
  notice_set_sink(count_warning_notice, NULL);
  g_cuda_warnings = 0;
  Backend *b = fake_backend();
  const char *src = "extern \"C\" __global__ void twice(float *a) { a[threadIdx.x] *= 2; }\n";
  const char *other = "extern \"C\" __global__ void twice(float *a) { a[threadIdx.x] *= 3; }\n";
  Diag d = {0};
  BackendModule *m = b->ops->compile(b, src, &d);
  if (!m) fail_msg("%s", d.msg);
  b->ops->module_free(b, m);
  char path[512], saved[520];
  only_cubin(path, sizeof path);
  /* another program's entry, same kernel name, under this one's name */
  snprintf(saved, sizeof saved, "%s.mine", path);
  assert_int_equal(rename(path, saved), 0);
  if (!(m = b->ops->compile(b, other, &d))) fail_msg("%s", d.msg);
  b->ops->module_free(b, m);
  only_cubin(path, sizeof path); /* the other program's entry */
  char theirs[512];
  snprintf(theirs, sizeof theirs, "%s", path);
  snprintf(path, sizeof path, "%.*s", (int)(strlen(saved) - 5), saved);
  assert_int_equal(rename(theirs, path), 0);
  unlink(saved);
  if (!(m = b->ops->compile(b, src, &d))) fail_msg("%s", d.msg);
  b->ops->module_free(b, m);
  assert_int_equal(g_cuda_warnings, 1);
  /* truncated, then one byte changed */
  assert_int_equal(truncate(path, 100), 0);
  if (!(m = b->ops->compile(b, src, &d))) fail_msg("%s", d.msg);
  b->ops->module_free(b, m);
  assert_int_equal(g_cuda_warnings, 2);
  FILE *f = fopen(path, "r+b");
  fseek(f, 200, SEEK_SET);
  int c = fgetc(f);
  fseek(f, 200, SEEK_SET);
  fputc(c ^ 1, f);
  fclose(f);
  if (!(m = b->ops->compile(b, src, &d))) fail_msg("%s", d.msg);
  b->ops->module_free(b, m);
  assert_int_equal(g_cuda_warnings, 3);
  if (!(m = b->ops->compile(b, src, &d))) fail_msg("%s", d.msg); /* intact again: a hit */
  b->ops->module_free(b, m);
  int compiles = -1, hits = -1;
  backend_cuda_stats(b, &compiles, &hits);
  assert_int_equal(compiles, 5); /* src, other, and the three rebuilds */
  assert_int_equal(hits, 1);
  assert_int_equal(g_cuda_warnings, 3);
  b->ops->destroy(b);
  notice_set_sink(NULL, NULL);
  drop_cache();
}

/* A prefill-sized run of a bf16 linear launches the tensor-core variant (its A pre-pass, then the
 * GEMM) on an sm_90 device and the CUDA-core kernel on an sm_75 one (no bf16 mma there); a
 * decode-sized run never the variant. */
static void test_plan_picks_tensor_cores_by_device(void **state) {
  if (!nvrtc_available()) skip();
  fresh_cache();
  const char *linear = "x: f32[1, seq, 64]; w: bf16[96, 64]; y = linear(x, w)";
  char name[512];
  run_launches(linear, 2, 9, 0, 37, name, sizeof name);
  assert_string_equal(name, "linear_0_mma_pack,linear_0_mma");
  run_launches(linear, 2, 9, 0, 1, name, sizeof name);
  assert_string_equal(name, "linear_0");
  run_launches(linear, 2, 7, 5, 37, name, sizeof name);
  assert_string_equal(name, "linear_0");
  drop_cache();
}

/* Attention in a prefill is one flash-attention launch (the scores and softmax kernels launch
 * nothing); a decode step, or a device without bf16 mma, is one flash-decoding launch: a block per
 * query row, pair of heads sharing k and v, and chunk of 32 keys (at most 264 blocks in all). */
static void test_plan_flash_attention_launches(void **state) {
  if (!nvrtc_available()) skip();
  fresh_cache();
  const char *attn = "q: f32[1,4,seq,16]; k: f32[1,2,seq,16]; v: f32[1,2,seq,16]\nreturn attention(q, k, v, true)";
  char name[512];
  run_launches(attn, 3, 9, 0, 37, name, sizeof name);
  assert_string_equal(name, "attention_2_flash");
  assert_int_equal(g_gpu.block, 128);
  assert_int_equal(g_gpu.grid, 4); /* one block of 64 rows for each of 4 heads */
  run_launches(attn, 3, 9, 0, 1, name, sizeof name);
  assert_string_equal(name, "attention_2");
  assert_int_equal(g_gpu.block, 128);
  assert_int_equal(g_gpu.grid, 2); /* 1 row x 2 head pairs x 1 chunk */
  run_launches(attn, 3, 7, 5, 37, name, sizeof name);
  assert_string_equal(name, "attention_2");
  assert_int_equal(g_gpu.grid, 37 * 2 * 2); /* 37 rows x 2 head pairs x 2 chunks (37 keys) */
  drop_cache();
}

/* The device sampler compiles through the backend and launches one block of 1024 threads with the
 * documented arguments; a token outside the vocabulary is an error, and an empty vocabulary is
 * refused before any launch. */
static void test_device_sampler_launch(void **state) {
  if (!nvrtc_available()) skip();
  fresh_cache();
  memset(&g_gpu, 0, sizeof g_gpu);
  memset(g_names, 0, sizeof g_names);
  g_gpu.device_count = 1;
  g_gpu.any_function = 1;
  CudaDriver drv = fake_driver();
  Diag d = {0};
  Backend *b = cuda_backend_with_driver(&drv, &d);
  assert_non_null(b);
  DeviceSampler *s = device_sampler_new(b, &d);
  if (!s) fail_msg("%s", d.msg);
  float *logits = b->ops->alloc(b, 100 * sizeof(float), &d);
  assert_non_null(logits);
  g_launch_nbufs = 2;
  g_launch_nsyms = 5;
  SamplerOptions o = sampler_defaults();
  int32_t token = -1;
  /* the fake kernel writes nothing: the token read back is the allocation's poison, which the
   * sampler must refuse rather than return */
  Diag pd = {0};
  assert_false(device_sampler_pick(s, &o, 0.25f, logits, 100, &token, &pd));
  assert_contains(pd.msg, "outside the vocabulary [0, 100)");
  assert_string_equal(g_gpu.launched[0], "lathe_sample");
  assert_int_equal(g_gpu.grid, 1);
  assert_int_equal(g_gpu.block, 1024);
  assert_true(g_gpu.arg_ptr[1] == (CUdeviceptr)(uintptr_t)logits);
  assert_int_equal(g_gpu.arg_sym[0], 100);
  float temperature, top_p;
  int32_t bits = (int32_t)g_gpu.arg_sym[1];
  memcpy(&temperature, &bits, sizeof bits);
  bits = (int32_t)g_gpu.arg_sym[3];
  memcpy(&top_p, &bits, sizeof bits);
  assert_true(temperature == 0.7f && top_p == 0.9f);
  assert_int_equal(g_gpu.arg_sym[2], 40);
  int launches = g_gpu.launches;
  assert_false(device_sampler_pick(s, &o, 0.25f, logits, 0, &token, &d));
  assert_contains(d.msg, "no logits to sample");
  assert_int_equal(g_gpu.launches, launches);
  b->ops->free(b, logits);
  device_sampler_free(s);
  b->ops->destroy(b);
  drop_cache();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_real_driver_reports_clearly),
      cmocka_unit_test(test_graph_edges_are_programmatic_on_hopper),
      cmocka_unit_test(test_messages_are_the_documented_ones),
      cmocka_unit_test(test_no_device_from_cuinit),
      cmocka_unit_test(test_no_device_from_count),
      cmocka_unit_test(test_other_init_error_named),
      cmocka_unit_test(test_bad_device_ordinal),
      cmocka_unit_test(test_unknown_error_code_falls_back_to_number),
      cmocka_unit_test(test_device_properties),
      cmocka_unit_test(test_memory_roundtrip_and_zero_bytes),
      cmocka_unit_test(test_launch_packs_abi_arguments),
      cmocka_unit_test(test_launch_errors_name_call_and_kernel),
      cmocka_unit_test(test_compile_is_cached),
      cmocka_unit_test(test_damaged_cubin_is_rebuilt),
      cmocka_unit_test(test_plan_picks_tensor_cores_by_device),
      cmocka_unit_test(test_device_description_from_attributes),
      cmocka_unit_test(test_plan_flash_attention_launches),
      cmocka_unit_test(test_source_units_split),
      cmocka_unit_test(test_source_units_split_stable),
      cmocka_unit_test(test_compile_in_units),
      cmocka_unit_test(test_device_sampler_launch),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
