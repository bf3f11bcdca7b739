/* CUDA backend: device memory and kernels through the driver API (loaded at run time, see
 * cuda_driver.c); CUDA C compiled by NVRTC to a cubin for the device's own sm_XX, through the
 * on-disk cache; kernels launched with code.h's CUDA ABI (buffer pointers, then the symbols). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <inttypes.h>
#include <link.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/hash.h"
#include "../base/settings.h"
#include "../base/notice.h"
#include "../base/mem.h"
#include "backend.h"
#include "cache.h"
#include "cublaslt.h"
#include "cuda_driver.h"
#include "nvrtc.h"
#include "source_units.h"
#include "cuda_internal.h"

/* Part of every cache key. nvrtc.c chooses the NVRTC options; bump this when they change (v2: entries carry
 * the cache.h trailer). */
#define CUDA_CACHE_TAG "lathe-cuda-v2 nvrtc_compile(--gpu-architecture=ARCH -default-device)"
#define CUDA_MIN_ALLOC 256 /* cuMemAlloc rejects 0 bytes; empty buffers still get a real pointer */

CudaImpl *cuda_impl(Backend *b) { return (CudaImpl *)b->impl; }

int cuda_check(CudaImpl *c, Diag *d, CUresult rc, const char *call, const char *what) {
  if (rc == CUDA_SUCCESS) return 1;
  cuda_diag(&c->drv, d, rc, call, what);
  return 0;
}

/* Driver calls act on the calling thread's current context; make ours current first. */
int cuda_make_current(CudaImpl *c, Diag *d) {
  return cuda_check(c, d, c->drv.cuCtxSetCurrent(c->ctx), "cuCtxSetCurrent", NULL);
}

static CUdeviceptr dptr(const void *p) { return (CUdeviceptr)(uintptr_t)p; }

/* ---- memory ---- */

static void *cuda_alloc(Backend *b, size_t bytes, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  if (!cuda_make_current(c, d)) return NULL;
  CUdeviceptr p = 0;
  char what[48];
  snprintf(what, sizeof what, "%zu bytes", bytes);
  if (!cuda_check(c, d, c->drv.cuMemAlloc(&p, bytes < CUDA_MIN_ALLOC ? CUDA_MIN_ALLOC : bytes), "cuMemAlloc", what))
    return NULL;
  return (void *)(uintptr_t)p;
}

static void cuda_free(Backend *b, void *ptr) {
  CudaImpl *c = cuda_impl(b);
  if (!ptr) return;
  /* Nowhere to report a failure here; a bad free shows up as an error of a later call. */
  if (c->drv.cuCtxSetCurrent(c->ctx) == CUDA_SUCCESS) c->drv.cuMemFree(dptr(ptr));
}

static int cuda_upload(Backend *b, void *dst, const void *src, size_t bytes, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  if (bytes == 0) return 1;
  char what[48];
  snprintf(what, sizeof what, "%zu bytes", bytes);
  return cuda_make_current(c, d) && cuda_check(c, d, c->drv.cuMemcpyHtoD(dptr(dst), src, bytes), "cuMemcpyHtoD", what);
}

static int cuda_download(Backend *b, void *dst, const void *src, size_t bytes, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  if (bytes == 0) return 1;
  char what[48];
  snprintf(what, sizeof what, "%zu bytes", bytes);
  return cuda_make_current(c, d) && cuda_check(c, d, c->drv.cuMemcpyDtoH(dst, dptr(src), bytes), "cuMemcpyDtoH", what);
}

static int cuda_sync(Backend *b, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  if (!cuda_make_current(c, d)) return 0;
  char what[160];
  snprintf(what, sizeof what, "after %s", c->last_kernel[0] ? c->last_kernel : "no kernel");
  return cuda_check(c, d, c->drv.cuCtxSynchronize(), "cuCtxSynchronize", what);
}

/* ---- NVRTC identity (part of the cache key) ---- */

typedef struct LibSearch {
  char path[1024];
} LibSearch;

static int find_loaded_nvrtc(struct dl_phdr_info *info, size_t size, void *ctx) {
  LibSearch *s = ctx;
  const char *name = info->dlpi_name ? info->dlpi_name : "";
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  if (strncmp(base, "libnvrtc", 8) != 0 || strstr(base, "builtins")) return 0;
  snprintf(s->path, sizeof s->path, "%s", name);
  return 1;
}

/* "nvrtc MAJOR.MINOR FILE SIZE MTIME" of the libnvrtc that nvrtc.c loaded, so a toolkit upgrade
 * (even one that keeps the version number) never reuses cubins from the old compiler. */
static const char *nvrtc_identity(CudaImpl *c) {
  if (c->have_nvrtc_id) return c->nvrtc_id;
  c->have_nvrtc_id = 1;
  snprintf(c->nvrtc_id, sizeof c->nvrtc_id, "nvrtc unknown");
  LibSearch s = {{0}};
  if (!dl_iterate_phdr(find_loaded_nvrtc, &s) || !s.path[0]) return c->nvrtc_id;
  int major = 0, minor = 0;
  void *dl = dlopen(s.path, RTLD_LAZY | RTLD_NOLOAD);
  if (dl) {
    void *sym = dlsym(dl, "nvrtcVersion");
    int (*version)(int *, int *) = NULL;
    if (sym) memcpy(&version, &sym, sizeof version);
    if (version) version(&major, &minor);
    dlclose(dl);
  }
  struct stat st = {0};
  char *real = realpath(s.path, NULL); /* malloc'ed: a fixed buffer must be PATH_MAX for FORTIFY */
  const char *file = real ? real : s.path;
  stat(file, &st);
  snprintf(c->nvrtc_id, sizeof c->nvrtc_id, "nvrtc %d.%d %.1024s %lld %lld", major, minor, file, (long long)st.st_size,
           (long long)st.st_mtime);
  free(real);
  return c->nvrtc_id;
}

/* ---- compiling and loading ---- */

static uint64_t source_key(CudaImpl *c, const char *source) {
  uint64_t h = hash_str(HASH_SEED, CUDA_CACHE_TAG);
  h = hash_str(h, source);
  h = hash_str(h, c->arch);
  h = hash_str(h, nvrtc_identity(c));
  return h;
}

static int load_unit(CudaImpl *c, const void *cubin, CUmodule *mod, Diag *d) {
  *mod = NULL;
  return cuda_make_current(c, d) && cuda_check(c, d, c->drv.cuModuleLoadData(mod, cubin), "cuModuleLoadData", c->arch);
}

static CudaModule *module_new(CudaImpl *c, const CUmodule *mods, int n, Diag *d) {
  CudaModule *m = mem_calloc(d, 1, sizeof *m, "a CUDA module");
  if (!m) {
    for (int i = 0; i < n; i++) c->drv.cuModuleUnload(mods[i]);
    return NULL;
  }
  memcpy(m->mods, mods, sizeof(CUmodule) * (size_t)n);
  m->nmods = n;
  return m;
}

BackendModule *cuda_module_from_image(Backend *b, const void *image, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  CUmodule mod;
  if (!load_unit(c, image, &mod, d)) return NULL;
  return (BackendModule *)module_new(c, &mod, 1, d);
}

/* One translation unit: its cache entry, or NVRTC (on its own thread when there are several). */
typedef struct Unit {
  const char *source;
  const char *arch;
  uint64_t key;    /* its cache key */
  char path[4200]; /* cache entry; "" without a cache */
  void *cubin;
  size_t size;
  int compiled, ok;
  Diag d;
} Unit;

static void *compile_unit(void *arg) {
  Unit *u = arg;
  u->ok = nvrtc_compile(u->source, u->arch, &u->cubin, &u->size, &u->d);
  return NULL;
}

static int unit_count(void) {
  int n = (int)setting_int(SET_NVRTC_UNITS, CUDA_MAX_UNITS, NULL);
  return n < 1 ? 1 : n > CUDA_MAX_UNITS ? CUDA_MAX_UNITS : n;
}

/* Compiles a program's translation units, those missing from the cache in parallel (NVRTC programs
 * are independent), and loads each as its own module; a kernel is found in whichever holds it. */
static BackendModule *cuda_compile(Backend *b, const char *source, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  if (!nvrtc_available()) {
    diag_error(d, 0, 0, "NVRTC (libnvrtc.so) not found: install the CUDA toolkit or add its lib64 to LD_LIBRARY_PATH");
    return NULL;
  }
  SourceUnits su;
  if (!(c->stable_units ? source_units_split_stable(source, unit_count(), &su)
                        : source_units_split(source, CUDA_UNIT_BYTES, unit_count(), &su))) {
    diag_error(d, 0, 0, "out of memory: the CUDA translation units");
    return NULL;
  }
  Unit units[CUDA_MAX_UNITS];
  CUmodule mods[CUDA_MAX_UNITS];
  pthread_t threads[CUDA_MAX_UNITS];
  int n = su.n, nloaded = 0, ok = 1;
  memset(units, 0, sizeof units);
  const char *dir = cache_dir();
  for (int i = 0; i < n; i++) { /* cache hits load now; the rest compile below */
    Unit *u = &units[i];
    u->source = su.text[i];
    u->arch = c->arch;
    if (!dir) continue;
    u->key = source_key(c, u->source);
    cache_path(u->path, sizeof u->path, u->key, ".cubin");
    char why[256];
    CacheLookup r = cache_load(u->path, u->key, &u->cubin, &u->size, why, sizeof why);
    if (r == CACHE_BAD) cache_discard(u->path, why); /* damaged, replaced or foreign: rebuild it */
    if (r == CACHE_NOMEM && ok) {
      diag_error(d, 0, 0, "%s", why);
      ok = 0;
    }
    if (r != CACHE_HIT) continue;
    Diag probe = {0};
    if (load_unit(c, u->cubin, &mods[i], &probe)) {
      u->ok = 1;
      c->cache_hits++;
    } else {
      cache_discard(u->path, probe.msg); /* intact but refused by this driver: rebuild it */
    }
    free(u->cubin);
    u->cubin = NULL;
  }
  int started[CUDA_MAX_UNITS] = {0};
  for (int i = 0; i < n; i++) {
    if (units[i].ok) continue;
    units[i].compiled = 1;
    c->compiles++;
    started[i] = n > 1 && pthread_create(&threads[i], NULL, compile_unit, &units[i]) == 0;
    if (!started[i]) compile_unit(&units[i]);
  }
  for (int i = 0; i < n; i++) {
    Unit *u = &units[i];
    if (started[i]) pthread_join(threads[i], NULL);
    if (u->compiled && u->ok) {
      char why[256]; /* best effort: a cache that cannot be written only costs a recompile next time */
      if (dir && !cache_store(dir, u->path, u->key, u->cubin, u->size, why, sizeof why))
        cache_warn_unwritable(dir, why);
      u->ok = load_unit(c, u->cubin, &mods[i], &u->d);
      free(u->cubin);
    }
    if (!u->ok && ok) { /* the first unit's error, in source order */
      ok = 0;
      if (!d->set) *d = u->d;
    }
  }
  for (int i = 0; i < n; i++)
    if (units[i].ok) mods[nloaded++] = mods[i];
  source_units_free(&su);
  if (!ok) {
    for (int i = 0; i < nloaded; i++) c->drv.cuModuleUnload(mods[i]);
    return NULL;
  }
  return (BackendModule *)module_new(c, mods, nloaded, d);
}

static void cuda_module_free(Backend *b, BackendModule *bm) {
  CudaImpl *c = cuda_impl(b);
  CudaModule *m = (CudaModule *)bm;
  if (!m) return;
  if (c->drv.cuCtxSetCurrent(c->ctx) == CUDA_SUCCESS)
    for (int i = 0; i < m->nmods; i++) c->drv.cuModuleUnload(m->mods[i]);
  for (int i = 0; i < m->nfns; i++) free(m->fns[i].name);
  free(m->fns);
  free(m);
}

/* ---- launching ---- */

int cuda_lookup_kernel(CudaImpl *c, CudaModule *m, const char *name, CUfunction *out, Diag *d) {
  for (int i = 0; i < m->nfns; i++)
    if (!strcmp(m->fns[i].name, name)) {
      *out = m->fns[i].fn;
      return 1;
    }
  CUfunction fn = NULL;
  CUresult rc = CUDA_ERROR_NOT_FOUND;
  for (int i = 0; i < m->nmods && rc == CUDA_ERROR_NOT_FOUND; i++) /* the unit that holds it */
    rc = c->drv.cuModuleGetFunction(&fn, m->mods[i], name);
  if (!cuda_check(c, d, rc, "cuModuleGetFunction", name)) return 0;
  *out = fn;
  if (m->nfns == m->cap) {
    int cap = m->cap ? 2 * m->cap : 8;
    CudaFn *grown = xrealloc(m->fns, sizeof *grown * (size_t)cap, "the kernel table");
    if (!grown) return 1; /* still launchable, just not remembered */
    m->fns = grown;
    m->cap = cap;
  }
  char *copy = xstrdup(name, "a kernel name");
  if (copy) m->fns[m->nfns++] = (CudaFn){copy, fn};
  return 1;
}

/* Kernel arguments as the driver takes them: a pointer to each value, in parameter order (buffers,
 * then symbols as long long), NULL-terminated. The values live in ptrs/vals. */
void cuda_pack_args(void *const *bufs, int nbufs, const int64_t *syms, int nsyms, CUdeviceptr *ptrs, long long *vals,
                    void **params) {
  for (int i = 0; i < nbufs; i++) {
    ptrs[i] = dptr(bufs[i]);
    params[i] = &ptrs[i];
  }
  for (int j = 0; j < nsyms; j++) {
    vals[j] = (long long)syms[j];
    params[nbufs + j] = &vals[j];
  }
  params[nbufs + nsyms] = NULL;
}

static int cuda_launch(Backend *b, BackendModule *bm, const char *name, void *const *bufs, int nbufs,
                       const int64_t *syms, int nsyms, int64_t grid, int block, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  CudaModule *m = (CudaModule *)bm;
  if (!m || !name) {
    diag_error(d, 0, 0, "cuda: launch without a module or kernel name");
    return 0;
  }
  if (nbufs < 0 || nsyms < 0 || nbufs + nsyms > CUDA_MAX_ARGS) {
    diag_error(d, 0, 0, "cuLaunchKernel(%s): %d buffers and %d symbols exceed the limit of %d arguments", name, nbufs,
               nsyms, CUDA_MAX_ARGS);
    return 0;
  }
  if (grid < 0 || grid > 0x7fffffff || block < 1 || block > c->max_threads) {
    diag_error(d, 0, 0, "cuLaunchKernel(%s): launch shape grid=%" PRId64 " block=%d out of range (block 1..%d)", name,
               grid, block, c->max_threads);
    return 0;
  }
  if (!cuda_make_current(c, d)) return 0;
  CUfunction fn;
  if (!cuda_lookup_kernel(c, m, name, &fn, d)) return 0;
  if (grid == 0) return 1; /* an empty extent (a symbol of 0): nothing to run */
  CUdeviceptr ptrs[CUDA_MAX_ARGS];
  long long vals[CUDA_MAX_ARGS];
  void *params[CUDA_MAX_ARGS + 1];
  cuda_pack_args(bufs, nbufs, syms, nsyms, ptrs, vals, params);
  snprintf(c->last_kernel, sizeof c->last_kernel, "%s", name);
  return cuda_check(c, d, c->drv.cuLaunchKernel(fn, (unsigned)grid, 1, 1, (unsigned)block, 1, 1, 0, NULL, params, NULL),
                    "cuLaunchKernel", name);
}

/* ---- profiling timers ---- */

static int cuda_timer_mark(Backend *b, int slot, Diag *d) {
  CudaImpl *c = cuda_impl(b);
  if (slot < 0 || slot >= BACKEND_TIMER_SLOTS) {
    diag_error(d, 0, 0, "timer slot %d out of range", slot);
    return 0;
  }
  if (!cuda_make_current(c, d)) return 0;
  if (!c->timers) c->timers = xcalloc(BACKEND_TIMER_SLOTS, sizeof *c->timers, "the kernel timers");
  if (!c->timers[slot] && !cuda_check(c, d, c->drv.cuEventCreate(&c->timers[slot], 0), "cuEventCreate", NULL)) return 0;
  return cuda_check(c, d, c->drv.cuEventRecord(c->timers[slot], NULL), "cuEventRecord", NULL);
}

static double cuda_timer_ms(Backend *b, int from, int to) {
  CudaImpl *c = cuda_impl(b);
  float ms = 0;
  if (!c->timers || from < 0 || to < 0 || from >= BACKEND_TIMER_SLOTS || to >= BACKEND_TIMER_SLOTS ||
      !c->timers[from] || !c->timers[to] ||
      c->drv.cuEventElapsedTime(&ms, c->timers[from], c->timers[to]) != CUDA_SUCCESS)
    return 0;
  return ms;
}

/* ---- library GEMMs (cuBLASLt) ---- */

/* ---- lifetime ---- */

static void impl_release(CudaImpl *c) {
  if (c->lt) cublaslt_close(c->lt);
  if (c->lt_ws) c->drv.cuMemFree(c->lt_ws);
  if (c->capture) c->drv.cuStreamDestroy(c->capture);
  if (c->timers) {
    for (int i = 0; i < BACKEND_TIMER_SLOTS; i++)
      if (c->timers[i]) c->drv.cuEventDestroy(c->timers[i]);
    free(c->timers);
  }
  if (c->have_ctx) {
    c->drv.cuCtxSetCurrent(NULL);
    c->drv.cuDevicePrimaryCtxRelease(c->dev);
  }
  cuda_driver_unload(&c->drv);
  free(c);
}

static void cuda_destroy(Backend *b) {
  if (!b) return;
  impl_release(cuda_impl(b));
  free(b);
}

static size_t cuda_memory_free(Backend *b) {
  CudaImpl *c = cuda_impl(b);
  size_t free_bytes = 0, total = 0;
  Diag d = {0};
  if (!c->drv.cuMemGetInfo || !cuda_make_current(c, &d) || c->drv.cuMemGetInfo(&free_bytes, &total) != CUDA_SUCCESS)
    return 0;
  return free_bytes;
}

static const BackendOps cuda_ops = {
    .name = "cuda",
    .memory_free = cuda_memory_free,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .compile = cuda_compile,
    .module_free = cuda_module_free,
    .launch = cuda_launch,
    .sync = cuda_sync,
    .destroy = cuda_destroy,
    .graph_new = cuda_graph_new,
    .graph_add = cuda_graph_add,
    .graph_instantiate = cuda_graph_instantiate,
    .graph_update = cuda_graph_update,
    .graph_launch = cuda_graph_launch,
    .graph_free = cuda_graph_free,
    .timer_mark = cuda_timer_mark,
    .timer_ms = cuda_timer_ms,
    .gemm_available = cuda_gemm_available,
    .gemm_bf16 = cuda_gemm_bf16,
    .graph_add_gemm = cuda_graph_add_gemm,
};

/* Picks the device ($LATHE_CUDA_DEVICE, else 0) and reads what compiles and launches need. */
/* The target description from the device's attributes (every field the compiler's stages read). */
static int query_device(CudaImpl *c, Diag *d) {
  TargetDesc *t = &c->desc;
  *t = (TargetDesc){.kind = TARGET_CUDA};
  int l2 = 0;
  const struct {
    int attr;
    int *out;
    const char *what;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &t->cc_major, "compute capability"},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &t->cc_minor, "compute capability"},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &t->sms, "multiprocessors"},
      {CU_DEVICE_ATTRIBUTE_WARP_SIZE, &t->warp_size, "warp size"},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &t->max_threads_per_block, "max threads per block"},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, &t->max_threads_per_sm, "max threads per multiprocessor"},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &t->smem_per_block, "shared memory per block"},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &t->smem_per_block_optin,
       "opt-in shared memory per block"},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &t->smem_per_sm, "shared memory per multiprocessor"},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, &t->regs_per_block, "registers per block"},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, &t->regs_per_sm, "registers per multiprocessor"},
      {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &l2, "L2 cache size"},
      {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &t->mem_clock_khz, "memory clock"},
      {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, &t->bus_width_bits, "memory bus width"},
  };
  for (int i = 0; i < (int)(sizeof attrs / sizeof attrs[0]); i++)
    if (!cuda_check(c, d, c->drv.cuDeviceGetAttribute(attrs[i].out, attrs[i].attr, c->dev), "cuDeviceGetAttribute",
                    attrs[i].what))
      return 0;
  t->l2_bytes = l2;
  return 1;
}

static int open_device(CudaImpl *c, Diag *d) {
  const CudaDriver *drv = &c->drv;
  CUresult rc = drv->cuInit(0);
  if (rc == CUDA_ERROR_NO_DEVICE) {
    diag_error(d, 0, 0, "%s", CUDA_NO_DEVICE_MSG);
    return 0;
  }
  if (!cuda_check(c, d, rc, "cuInit", NULL)) return 0;
  int count = 0;
  if (!cuda_check(c, d, drv->cuDeviceGetCount(&count), "cuDeviceGetCount", NULL)) return 0;
  if (count <= 0) {
    diag_error(d, 0, 0, "%s", CUDA_NO_DEVICE_MSG);
    return 0;
  }
  int ordinal = 0;
  const char *env = setting_str(SET_CUDA_DEVICE);
  if (env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end || v < 0 || v >= count) {
      diag_error(d, 0, 0, "LATHE_CUDA_DEVICE=%s: no such GPU (this machine has %d)", env, count);
      return 0;
    }
    ordinal = (int)v;
  }
  char what[32];
  snprintf(what, sizeof what, "device %d", ordinal);
  if (!cuda_check(c, d, drv->cuDeviceGet(&c->dev, ordinal), "cuDeviceGet", what)) return 0;
  if (!query_device(c, d)) return 0;
  const TargetDesc *t = &c->desc;
  c->max_threads = t->max_threads_per_block;
  target_arch(t, c->arch, (int)sizeof c->arch);
  c->pdl = t->cc_major >= 9 && drv->cuGraphAddDependencies_v2 && setting_bool(SET_PDL, 1);
  if (!cuda_check(c, d, drv->cuDeviceGetName(c->dev_name, (int)sizeof c->dev_name, c->dev), "cuDeviceGetName", what))
    return 0;
  c->dev_name[sizeof c->dev_name - 1] = '\0';
  snprintf(c->desc.name, sizeof c->desc.name, "%.63s", c->dev_name);
  if (!cuda_check(c, d, drv->cuDevicePrimaryCtxRetain(&c->ctx, c->dev), "cuDevicePrimaryCtxRetain", what)) return 0;
  c->have_ctx = 1;
  return cuda_make_current(c, d);
}

Backend *cuda_backend_with_driver(const CudaDriver *drv, Diag *d) {
  CudaImpl *c = xcalloc(1, sizeof *c, "the CUDA backend");
  Backend *b = xcalloc(1, sizeof *b, "the CUDA backend");
  if (!c || !b) {
    free(c);
    free(b);
    CudaDriver owned = *drv;
    cuda_driver_unload(&owned);
    diag_error(d, 0, 0, "cuda: out of memory");
    return NULL;
  }
  c->drv = *drv;
  if (!open_device(c, d) || !target_check(&c->desc, d)) {
    impl_release(c);
    free(b);
    return NULL;
  }
  b->ops = &cuda_ops;
  b->target = c->desc;
  b->impl = c;
  return b;
}

Backend *backend_cuda_new(Diag *d) {
  CudaDriver drv;
  if (!cuda_driver_load(&drv, d)) return NULL;
  return cuda_backend_with_driver(&drv, d);
}

void backend_cuda_stable_units(Backend *b, int on) {
  if (b && b->ops == &cuda_ops) cuda_impl(b)->stable_units = on;
}

void backend_cuda_stats(Backend *b, int *compiles, int *cache_hits) {
  CudaImpl *c = b && b->ops == &cuda_ops ? cuda_impl(b) : NULL;
  if (compiles) *compiles = c ? c->compiles : 0;
  if (cache_hits) *cache_hits = c ? c->cache_hits : 0;
}

const char *backend_cuda_device(Backend *b) {
  CudaImpl *c = b && b->ops == &cuda_ops ? cuda_impl(b) : NULL;
  return c ? c->dev_name : NULL;
}

const char *backend_cuda_arch(Backend *b) {
  CudaImpl *c = b && b->ops == &cuda_ops ? cuda_impl(b) : NULL;
  return c ? c->arch : NULL;
}
