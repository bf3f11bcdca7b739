/* NVRTC through dlopen/dlsym: the prototypes are declared here, so building lathe needs no CUDA
 * headers and a machine without the toolkit still starts (nvrtc_available() says 0). */
#include "nvrtc.h"
#include "../base/settings.h"
#include "../base/mem.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvrtcResult; /* NVRTC_SUCCESS = 0 */
typedef struct _nvrtcProgram *nvrtcProgram;

typedef struct NvrtcApi {
  void *lib;
  nvrtcResult (*create)(nvrtcProgram *, const char *, const char *, int, const char *const *, const char *const *);
  nvrtcResult (*compile)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*log_size)(nvrtcProgram, size_t *);
  nvrtcResult (*log)(nvrtcProgram, char *);
  nvrtcResult (*cubin_size)(nvrtcProgram, size_t *);
  nvrtcResult (*cubin)(nvrtcProgram, char *);
  nvrtcResult (*destroy)(nvrtcProgram *);
  const char *(*error_string)(nvrtcResult);
} NvrtcApi;

/* Loaded once per process: the library is large and dlopen of it is not free. */
static NvrtcApi api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void *try_open(const char *dir, const char *name) {
  char path[1024];
  if (dir) snprintf(path, sizeof path, "%s/%s", dir, name);
  else snprintf(path, sizeof path, "%s", name);
  return dlopen(path, RTLD_NOW | RTLD_LOCAL);
}

static void load_api(void) {
  static const char *const names[] = {"libnvrtc.so",      "libnvrtc.so.13", "libnvrtc.so.12",
                                      "libnvrtc.so.11.2", "libnvrtc.so.11", NULL};
  char home_lib[900] = "";
  const char *home = setting_str(SET_CUDA_HOME);
  if (home) snprintf(home_lib, sizeof home_lib, "%s/lib64", home);
  const char *dirs[] = {NULL, home_lib[0] ? home_lib : NULL, "/usr/local/cuda/lib64"};
  void *lib = NULL;
  for (int d = 0; d < 3 && !lib; d++) {
    if (d > 0 && !dirs[d]) continue;
    for (int i = 0; names[i] && !lib; i++) lib = try_open(dirs[d], names[i]);
  }
  if (!lib) return;
  NvrtcApi a = {lib};
  *(void **)&a.create = dlsym(lib, "nvrtcCreateProgram");
  *(void **)&a.compile = dlsym(lib, "nvrtcCompileProgram");
  *(void **)&a.log_size = dlsym(lib, "nvrtcGetProgramLogSize");
  *(void **)&a.log = dlsym(lib, "nvrtcGetProgramLog");
  *(void **)&a.cubin_size = dlsym(lib, "nvrtcGetCUBINSize");
  *(void **)&a.cubin = dlsym(lib, "nvrtcGetCUBIN");
  *(void **)&a.destroy = dlsym(lib, "nvrtcDestroyProgram");
  *(void **)&a.error_string = dlsym(lib, "nvrtcGetErrorString");
  if (!a.create || !a.compile || !a.log_size || !a.log || !a.cubin_size || !a.cubin || !a.destroy || !a.error_string) {
    dlclose(lib);
    return;
  }
  api = a;
}

static const NvrtcApi *get_api(void) {
  pthread_once(&api_once, load_api);
  return api.lib ? &api : NULL;
}

int nvrtc_available(void) { return get_api() != NULL; }

/* Keeps the first `max_lines` lines of a compiler log, for a diag message. */
static void first_lines(char *dst, size_t n, const char *log, int max_lines) {
  size_t len = 0;
  int lines = 0;
  while (log[len] && lines < max_lines) {
    if (log[len] == '\n') lines++;
    len++;
  }
  if (len >= n) len = n - 1;
  memcpy(dst, log, len);
  dst[len] = 0;
  while (len > 0 && (dst[len - 1] == '\n' || dst[len - 1] == ' ')) dst[--len] = 0;
}

int nvrtc_compile(const char *source, const char *arch, void **cubin, size_t *size, Diag *d) {
  *cubin = NULL;
  *size = 0;
  const NvrtcApi *a = get_api();
  if (!a) {
    diag_error(d, 0, 0, "nvrtc: libnvrtc.so could not be loaded (install the CUDA toolkit or set CUDA_HOME)");
    return 0;
  }
  nvrtcProgram prog = NULL;
  nvrtcResult r = a->create(&prog, source, "lathe.cu", 0, NULL, NULL);
  if (r) {
    diag_error(d, 0, 0, "nvrtc: creating the program failed: %s", a->error_string(r));
    return 0;
  }
  char arch_opt[64];
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
  /* No --use_fast_math: kernels must match the reference to f32 precision. */
  const char *opts[] = {arch_opt, "-default-device"};
  r = a->compile(prog, 2, opts);
  if (r) {
    size_t n = 0;
    char *log = NULL;
    if (!a->log_size(prog, &n) && n > 0 && (log = xmalloc(n + 1, "the NVRTC log")) && !a->log(prog, log)) log[n] = 0;
    else if (log) log[0] = 0;
    char head[400];
    first_lines(head, sizeof head, log ? log : "", 20);
    diag_error(d, 0, 0, "nvrtc: compiling for %s failed (%s):\n%s", arch, a->error_string(r), head);
    free(log);
    a->destroy(&prog);
    return 0;
  }
  size_t n = 0;
  if ((r = a->cubin_size(prog, &n)) || n == 0) {
    diag_error(d, 0, 0, "nvrtc: no cubin for %s (%s); the architecture must be sm_XX", arch,
               r ? a->error_string(r) : "empty");
    a->destroy(&prog);
    return 0;
  }
  char *bin = mem_alloc(d, n, "a cubin");
  if (!bin || (r = a->cubin(prog, bin))) {
    diag_error(d, 0, 0, "nvrtc: reading the cubin failed%s%s", r ? ": " : "", r ? a->error_string(r) : "");
    free(bin);
    a->destroy(&prog);
    return 0;
  }
  a->destroy(&prog);
  *cubin = bin;
  *size = n;
  return 1;
}
