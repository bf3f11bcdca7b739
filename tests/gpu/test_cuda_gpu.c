/* GPU test of the CUDA backend (needs an NVIDIA GPU, its driver and libnvrtc): compiles hand-written
 * CUDA C that follows code.h's ABI, launches it, compares with the CPU, and checks the compile
 * cache and the error reports. Plain C without cmocka, so the binary needs only libc, libm, libdl.
 * Prints one line per check and ends with "N passed, M failed"; exit status 1 on any failure. */
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "base/rng.h"
#include "generate/sampler_device.h"

static int g_passed, g_failed;

#define CHECK(cond, ...)                                                                                               \
  do {                                                                                                                 \
    if (cond) {                                                                                                        \
      g_passed++;                                                                                                      \
    } else {                                                                                                           \
      g_failed++;                                                                                                      \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                                           \
      printf(__VA_ARGS__);                                                                                             \
      printf("\n");                                                                                                    \
    }                                                                                                                  \
  } while (0)

/* Kernels in code.h's CUDA ABI: buffers first, then the symbols as long long. */
static const char *k_source =
    "extern \"C\" __global__ void vadd(const float *a, const float *b, float *c, long long n) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) c[i] = a[i] + b[i];\n"
    "}\n"
    "extern \"C\" __global__ void axpb(float *x, long long n, long long a, long long b) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = x[i] * (float)a + (float)b;\n"
    "}\n"
    "extern \"C\" __global__ void echo_syms(long long *out, long long s0, long long s1) {\n"
    "  if (threadIdx.x == 0 && blockIdx.x == 0) { out[0] = s0; out[1] = s1; }\n"
    "}\n"
    "extern \"C\" __global__ void block_sum(const float *x, float *out, long long n) {\n"
    "  __shared__ float part[256];\n"
    "  float acc = 0.0f;\n"
    "  for (long long i = threadIdx.x; i < n; i += blockDim.x) acc += x[i];\n"
    "  part[threadIdx.x] = acc;\n"
    "  __syncthreads();\n"
    "  for (int s = blockDim.x / 2; s > 0; s >>= 1) {\n"
    "    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (threadIdx.x == 0) out[0] = part[0];\n"
    "}\n";

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) { return remove(path); }

static int64_t blocks_for(int64_t n, int block) { return (n + block - 1) / block; }

static void test_vadd(Backend *b, BackendModule *m) {
  const int64_t n = (1 << 20) + 3; /* not a multiple of the block: the bounds check matters */
  size_t bytes = (size_t)n * sizeof(float);
  float *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
  for (int64_t i = 0; i < n; i++) {
    ha[i] = (float)(i % 1000) * 0.5f;
    hb[i] = (float)(i % 77) - 20.0f;
    hc[i] = -1.0f;
  }
  Diag d = {0};
  void *da = b->ops->alloc(b, bytes, &d), *db = b->ops->alloc(b, bytes, &d), *dc = b->ops->alloc(b, bytes, &d);
  CHECK(da && db && dc, "alloc: %s", d.msg);
  CHECK(b->ops->upload(b, da, ha, bytes, &d) && b->ops->upload(b, db, hb, bytes, &d), "upload: %s", d.msg);
  void *bufs[3] = {da, db, dc};
  int64_t syms[1] = {n};
  CHECK(b->ops->launch(b, m, "vadd", bufs, 3, syms, 1, blocks_for(n, 256), 256, &d), "launch: %s", d.msg);
  CHECK(b->ops->sync(b, &d), "sync: %s", d.msg);
  CHECK(b->ops->download(b, hc, dc, bytes, &d), "download: %s", d.msg);
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++)
    if (hc[i] != ha[i] + hb[i]) bad = i;
  CHECK(bad < 0, "vadd mismatch at %lld: %g != %g", (long long)bad, bad < 0 ? 0.0 : hc[bad],
        bad < 0 ? 0.0 : ha[bad] + hb[bad]);
  b->ops->free(b, da);
  b->ops->free(b, db);
  b->ops->free(b, dc);
  free(ha);
  free(hb);
  free(hc);
}

static void test_symbols(Backend *b, BackendModule *m) {
  Diag d = {0};
  const int64_t n = 1000;
  float hx[1000], want[1000];
  for (int i = 0; i < n; i++) {
    hx[i] = (float)i;
    want[i] = (float)i * 3.0f - 7.0f;
  }
  void *dx = b->ops->alloc(b, sizeof hx, &d);
  CHECK(dx && b->ops->upload(b, dx, hx, sizeof hx, &d), "alloc/upload: %s", d.msg);
  int64_t syms[3] = {n, 3, -7};
  CHECK(b->ops->launch(b, m, "axpb", &dx, 1, syms, 3, blocks_for(n, 128), 128, &d), "launch axpb: %s", d.msg);
  CHECK(b->ops->download(b, hx, dx, sizeof hx, &d), "download: %s", d.msg);
  CHECK(memcmp(hx, want, sizeof hx) == 0, "axpb mismatch: x[5]=%g want %g", hx[5], want[5]);
  b->ops->free(b, dx);

  /* 64-bit symbol values survive the trip (no truncation to int). */
  long long out[2] = {0, 0};
  void *dout = b->ops->alloc(b, sizeof out, &d);
  int64_t big[2] = {(int64_t)1 << 40, -((int64_t)1 << 33) - 5};
  CHECK(b->ops->launch(b, m, "echo_syms", &dout, 1, big, 2, 1, 32, &d), "launch echo_syms: %s", d.msg);
  CHECK(b->ops->download(b, out, dout, sizeof out, &d), "download: %s", d.msg);
  CHECK(out[0] == big[0] && out[1] == big[1], "echo_syms: got %lld %lld", out[0], out[1]);
  b->ops->free(b, dout);
}

static void test_shared_memory_reduction(Backend *b, BackendModule *m) {
  Diag d = {0};
  enum { N = 10000 };
  static float hx[N];
  double want = 0;
  for (int i = 0; i < N; i++) {
    hx[i] = (float)((i * 37) % 101) / 7.0f;
    want += hx[i];
  }
  void *dx = b->ops->alloc(b, sizeof hx, &d), *dout = b->ops->alloc(b, sizeof(float), &d);
  CHECK(b->ops->upload(b, dx, hx, sizeof hx, &d), "upload: %s", d.msg);
  void *bufs[2] = {dx, dout};
  int64_t syms[1] = {N};
  CHECK(b->ops->launch(b, m, "block_sum", bufs, 2, syms, 1, 1, 256, &d), "launch block_sum: %s", d.msg);
  float got = 0;
  CHECK(b->ops->download(b, &got, dout, sizeof got, &d), "download: %s", d.msg);
  CHECK(fabs(got - want) <= 1e-4 * fabs(want), "block_sum %g want %g", got, want);
  b->ops->free(b, dx);
  b->ops->free(b, dout);
}

static void test_zero_bytes(Backend *b) {
  Diag d = {0};
  void *p = b->ops->alloc(b, 0, &d), *q = b->ops->alloc(b, 0, &d);
  CHECK(p && q && p != q, "zero-byte alloc: %p %p %s", p, q, d.msg);
  CHECK(b->ops->upload(b, p, NULL, 0, &d) && b->ops->download(b, NULL, p, 0, &d), "zero-byte copy: %s", d.msg);
  b->ops->free(b, p);
  b->ops->free(b, q);
}

static void test_errors(Backend *b, BackendModule *m) {
  Diag d = {0};
  void *buf = b->ops->alloc(b, 64, &d);
  int64_t syms[1] = {1};
  CHECK(!b->ops->launch(b, m, "no_such_kernel", &buf, 1, syms, 1, 1, 32, &d), "bad name launched");
  CHECK(strstr(d.msg, "cuModuleGetFunction(no_such_kernel): CUDA_ERROR_NOT_FOUND") != NULL, "bad name: %s", d.msg);
  printf("  bad kernel name -> %s\n", d.msg);

  Diag d2 = {0};
  CHECK(!b->ops->launch(b, m, "vadd", &buf, 1, syms, 1, 1, 4096, &d2), "block 4096 launched");
  CHECK(strstr(d2.msg, "vadd") != NULL, "block too big: %s", d2.msg);
  printf("  block 4096 -> %s\n", d2.msg);

  Diag d3 = {0};
  b->ops->free(b, buf);
  CHECK(b->ops->sync(b, &d3), "sync after errors: %s", d3.msg);

  Diag d4 = {0};
  BackendModule *bad =
      b->ops->compile(b, "extern \"C\" __global__ void broken(float *x) { x[0] = undefined_name; }\n", &d4);
  CHECK(bad == NULL, "bad source compiled");
  CHECK(d4.set && strstr(d4.msg, "undefined_name") != NULL, "nvrtc error text: %s", d4.msg);
  printf("  NVRTC error -> %s\n", d4.msg);
  if (bad) b->ops->module_free(b, bad);
}

/* Run last: a kernel fault poisons the context for the rest of the process. */
static void test_fault_is_reported(Backend *b, BackendModule *m) {
  Diag d = {0};
  void *bufs[3] = {(void *)(uintptr_t)0x10, (void *)(uintptr_t)0x10, (void *)(uintptr_t)0x10};
  int64_t syms[1] = {1 << 20};
  int launched = b->ops->launch(b, m, "vadd", bufs, 3, syms, 1, blocks_for(syms[0], 256), 256, &d);
  int synced = launched && b->ops->sync(b, &d);
  CHECK(!synced, "faulting kernel not reported");
  CHECK(strstr(d.msg, "CUDA_ERROR_") != NULL && strstr(d.msg, "vadd") != NULL, "fault text: %s", d.msg);
  printf("  faulting kernel -> %s\n", d.msg);
}

/* The device sampler against the host one (the same rule, generate/sampler.h) on one set of logits:
 * tokens for a grid of uniforms. The two compute exp() with different roundings, so a uniform that
 * falls within rounding of a boundary may pick a neighbour; at most 1% may differ. */
static void sampler_case(Backend *b, DeviceSampler *ds, const char *what, const float *logits, int n,
                         SamplerOptions o) {
  Diag d = {0};
  void *dl = b->ops->alloc(b, sizeof(float) * (size_t)n, &d);
  CHECK(dl && b->ops->upload(b, dl, logits, sizeof(float) * (size_t)n, &d), "%s: upload: %s", what, d.msg);
  if (!dl) return;
  Sampler hs;
  sampler_init(&hs, &o);
  int grid = 400, differ = 0, failed = 0, distinct = 0, last = -1;
  for (int j = 0; j < grid && !failed; j++) {
    float u = (float)((j + 0.5) / grid);
    int32_t got = -1;
    if (!device_sampler_pick(ds, &o, u, dl, n, &got, &d)) {
      failed = 1;
      break;
    }
    int want = sampler_pick(&hs, u, logits, n);
    differ += got != want;
    distinct += got != last;
    last = got;
  }
  CHECK(!failed, "%s: device sampler: %s", what, d.msg);
  CHECK(differ * 100 <= grid, "%s: device and host samplers differ on %d of %d uniforms", what, differ, grid);
  printf("  sampler %s: %d of %d uniforms differ from the host, %d token changes\n", what, differ, grid, distinct);
  sampler_free(&hs);
  b->ops->free(b, dl);
}

static void test_device_sampler(Backend *b) {
  Diag d = {0};
  DeviceSampler *ds = device_sampler_new(b, &d);
  CHECK(ds != NULL, "device_sampler_new: %s", d.msg);
  if (!ds) return;
  enum { V = 151936 };
  float *l = malloc(sizeof(float) * V);
  uint64_t st = 42;
  for (int i = 0; i < V; i++) l[i] = (float)(splitmix64_unit(&st) * 12.0 - 6.0);
  l[777] = 9.0f; /* a clear favourite */
  sampler_case(b, ds, "greedy", l, V, (SamplerOptions){.temperature = 0});
  sampler_case(b, ds, "T=1", l, V, (SamplerOptions){.temperature = 1.0});
  sampler_case(b, ds, "T=0.7 k=40 p=0.9", l, V, (SamplerOptions){.temperature = 0.7, .top_k = 40, .top_p = 0.9});
  sampler_case(b, ds, "T=1.3 p=0.5", l, V, (SamplerOptions){.temperature = 1.3, .top_p = 0.5});
  sampler_case(b, ds, "T=0.9 k=1000", l, V, (SamplerOptions){.temperature = 0.9, .top_k = 1000});
  sampler_case(b, ds, "T=1 k=2000 p=0.95", l, V, (SamplerOptions){.temperature = 1.0, .top_k = 2000, .top_p = 0.95});
  float *flat = calloc(V, sizeof(float)); /* every logit tied: top-k keeps them all (the slow paths) */
  sampler_case(b, ds, "all tied k=40 p=0.5", flat, V, (SamplerOptions){.temperature = 1.0, .top_k = 40, .top_p = 0.5});
  free(flat);
  float small[5] = {1.0f, 3.0f, 3.0f, -INFINITY, 2.0f}; /* ties at the top-k boundary, a masked token */
  sampler_case(b, ds, "ties k=1", small, 5, (SamplerOptions){.temperature = 1.0, .top_k = 1});
  sampler_case(b, ds, "small p=0.8", small, 5, (SamplerOptions){.temperature = 2.0, .top_p = 0.8});
  /* greedy options give the first maximum */
  int32_t tok = -1;
  CHECK(device_sampler_pick(ds, &(SamplerOptions){.greedy = 1, .temperature = 1}, 0.5f, NULL, 0, &tok, &d) == 0,
        "an empty vocabulary was sampled");
  free(l);
  device_sampler_free(ds);
}

int main(void) {
  char cache[] = "/tmp/lathe-gpu-cache-XXXXXX";
  if (!mkdtemp(cache)) {
    printf("cannot create a temporary cache directory\n0 passed, 1 failed\n");
    return 1;
  }
  setenv("LATHE_CACHE_DIR", cache, 1);

  Diag d = {0};
  Backend *b = backend_cuda_new(&d);
  CHECK(b != NULL, "backend_cuda_new: %s", d.msg);
  if (!b) {
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return 1;
  }
  printf("device: %s (%s)\n", backend_cuda_device(b), backend_cuda_arch(b));
  { /* the target description from cuDeviceGetAttribute: a real device reports every field */
    const TargetDesc *t = &b->target;
    StrBuf line = {0};
    target_print(&line, t);
    printf("%s\n", sb_str(&line));
    sb_free(&line);
    CHECK(t->sms > 0 && t->warp_size == 32 && t->max_threads_per_block >= 1024 && t->smem_per_block >= 49152 &&
              t->smem_per_block_optin >= t->smem_per_block && t->smem_per_sm >= t->smem_per_block_optin &&
              t->regs_per_sm > 0 && t->l2_bytes > 0 && t->mem_clock_khz > 0 && t->bus_width_bits > 0,
          "target description: %d SMs, warp %d, %d threads, shared %d/%d/%d, %d registers, L2 %lld, %d kHz x %d bits",
          t->sms, t->warp_size, t->max_threads_per_block, t->smem_per_block, t->smem_per_block_optin, t->smem_per_sm,
          t->regs_per_sm, (long long)t->l2_bytes, t->mem_clock_khz, t->bus_width_bits);
  }

  BackendModule *m = b->ops->compile(b, k_source, &d);
  CHECK(m != NULL, "compile: %s", d.msg);
  int compiles = 0, hits = 0;
  backend_cuda_stats(b, &compiles, &hits);
  CHECK(compiles == 1 && hits == 0, "first compile: compiles=%d hits=%d", compiles, hits);
  BackendModule *m2 = b->ops->compile(b, k_source, &d);
  backend_cuda_stats(b, &compiles, &hits);
  CHECK(m2 != NULL && compiles == 1 && hits == 1, "second compile: compiles=%d hits=%d %s", compiles, hits, d.msg);
  if (m2) b->ops->module_free(b, m2);
  if (!m) {
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return 1;
  }

  test_vadd(b, m);
  test_symbols(b, m);
  test_shared_memory_reduction(b, m);
  test_zero_bytes(b);
  test_errors(b, m);
  test_device_sampler(b);
  b->ops->module_free(b, m);
  b->ops->destroy(b);

  /* A new backend (a new process, in effect) finds the cubin on disk. */
  Diag d2 = {0};
  Backend *b2 = backend_cuda_new(&d2);
  CHECK(b2 != NULL, "second backend: %s", d2.msg);
  if (b2) {
    BackendModule *m3 = b2->ops->compile(b2, k_source, &d2);
    backend_cuda_stats(b2, &compiles, &hits);
    CHECK(m3 != NULL && compiles == 0 && hits == 1, "disk cache: compiles=%d hits=%d %s", compiles, hits, d2.msg);
    if (m3) {
      test_vadd(b2, m3);
      test_fault_is_reported(b2, m3);
      b2->ops->module_free(b2, m3);
    }
    b2->ops->destroy(b2);
  }

  nftw(cache, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed ? 1 : 0;
}
