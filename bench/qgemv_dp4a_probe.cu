// Decode GEMV y = W x over GGUF blocks with int8 activations and __dp4a: how fast can it be on this card, and in
// which structure? A standalone measurement tool (issue 18), not part of lathe's build:
//
//   nvcc -O3 -arch=sm_90 -o qgemv_dp4a_probe bench/qgemv_dp4a_probe.cu && ./qgemv_dp4a_probe [--iters N]
//
// For q4_0, q8_0, q4_k, q6_k and each shape W [N, K] it checks every kernel form against a float64 reference of
// the decoded weights times the exact x (outputs poisoned with NaN first) and times it with CUDA events, the weight
// pointer rotating over copies that together exceed L2 (so every launch reads its weights from memory). Forms:
//   pro  W warps a block, R rows a block: x (f32) quantized by the block into shared memory, then the block's
//        threads split the row's units (32 elements each; q6_k 64) and reduce (warp shuffle, then shared)
//   glb  the same GEMV reading x pre-quantized into global memory by a separate tiny kernel (its time counted)
//   per  pro with a persistent grid (a fixed number of blocks, each walking row groups): x quantized once a block
// Prints a table: us per GEMV (one launch, or the two of glb) and % of the weights' bytes floor at 4.13 TB/s.
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#define CK(x)                                                                                     \
  do {                                                                                            \
    cudaError_t e_ = (x);                                                                         \
    if (e_ != cudaSuccess) {                                                                      \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));          \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

enum Fmt { Q4_0, Q8_0, Q4_K, Q6_K };
static const char *fmt_name[] = {"q4_0", "q8_0", "q4_k", "q6_k"};
__host__ __device__ constexpr int fmt_elems_d(int f) { return f < 2 ? 32 : 256; }
__host__ __device__ constexpr int fmt_bytes_d(int f) { return f == Q4_0 ? 18 : f == Q8_0 ? 34 : f == Q4_K ? 144 : 210; }

// ---- activations: per 32 elements int8 values q = rint(x / d), d = max|x| / 127; per 16 the sum of q ----
struct XQ {
  const int8_t *q;
  const float *d;
  const int *s;
};

// Thread quantizes elements e .. e+7 (e a multiple of 8); the 4 lanes of a 32-group are consecutive.
__device__ __forceinline__ void xq_put8(const float *v, int e, int8_t *q, float *d, int *s) {
  const unsigned lane = threadIdx.x & 31, mask = 0xFu << (lane & 28);
  float a = 0.f;
#pragma unroll
  for (int j = 0; j < 8; j++) a = fmaxf(a, fabsf(v[j]));
  a = fmaxf(a, __shfl_xor_sync(mask, a, 1));
  a = fmaxf(a, __shfl_xor_sync(mask, a, 2));
  const float dd = a / 127.f, id = a > 0.f ? 127.f / a : 0.f;
  int qi[8], sum = 0;
#pragma unroll
  for (int j = 0; j < 8; j++) qi[j] = __float2int_rn(v[j] * id), sum += qi[j];
  uint2 p;
  p.x = (qi[0] & 255) | (qi[1] & 255) << 8 | (qi[2] & 255) << 16 | (unsigned)qi[3] << 24;
  p.y = (qi[4] & 255) | (qi[5] & 255) << 8 | (qi[6] & 255) << 16 | (unsigned)qi[7] << 24;
  *(uint2 *)(q + e) = p;
  sum += __shfl_xor_sync(mask, sum, 1);
  if (!(lane & 1)) s[e >> 4] = sum;
  if (!(lane & 3)) d[e >> 5] = dd;
}

// x [K] quantized by threads tid .. of nt (a multiple of 4; K a multiple of 32)
__device__ __forceinline__ void xq_row(const float *x, int K, int tid, int nt, int8_t *q, float *d, int *s) {
  for (int e = tid * 8; e < K; e += nt * 8) {
    const float4 a = *(const float4 *)(x + e), b = *(const float4 *)(x + e + 4);
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    xq_put8(v, e, q, d, s);
  }
}

__global__ void xq_kernel(const float *x, int K, int8_t *q, float *d, int *s) {
  xq_row(x, K, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x, q, d, s);
}

// ---- weights: bytes at any 2-byte alignment as aligned words (funnel shifts) ----
__device__ __forceinline__ void ld_words(const uint8_t *p, int n, unsigned *w) {
  const uintptr_t a = (uintptr_t)p;
  const unsigned *b = (const unsigned *)(a & ~(uintptr_t)3);
  const unsigned sh = (unsigned)(a & 3) * 8;
  unsigned prev = b[0];
#pragma unroll
  for (int i = 0; i < n; i++) {
    const unsigned next = (sh || i + 1 < n) ? b[i + 1] : 0u; // no read past the last word when aligned
    w[i] = __funnelshift_r(prev, next, sh);
    prev = next;
  }
}
__device__ __forceinline__ float h2f(const uint8_t *p) { return __half2float(*(const __half *)p); }
__device__ __forceinline__ int dp4(unsigned a, unsigned b, int c) { return __dp4a((int)a, (int)b, c); }

// One unit of a row: the partial sum over its elements. Unit u of a row (UNIT elements).
template <int F> struct Unit;
template <> struct Unit<Q4_0> {
  static constexpr int E = 32;
  static __device__ __forceinline__ float dot(const uint8_t *row, int u, const XQ &x) {
    const uint8_t *b = row + u * 18;
    unsigned w[4];
    ld_words(b + 2, 4, w);
    const int4 xa = *(const int4 *)(x.q + u * 32), xb = *(const int4 *)(x.q + u * 32 + 16);
    int s = 0;
    s = dp4(w[0] & 0x0F0F0F0Fu, xa.x, s), s = dp4(w[1] & 0x0F0F0F0Fu, xa.y, s);
    s = dp4(w[2] & 0x0F0F0F0Fu, xa.z, s), s = dp4(w[3] & 0x0F0F0F0Fu, xa.w, s);
    s = dp4(w[0] >> 4 & 0x0F0F0F0Fu, xb.x, s), s = dp4(w[1] >> 4 & 0x0F0F0F0Fu, xb.y, s);
    s = dp4(w[2] >> 4 & 0x0F0F0F0Fu, xb.z, s), s = dp4(w[3] >> 4 & 0x0F0F0F0Fu, xb.w, s);
    const int2 xs = *(const int2 *)(x.s + u * 2);
    return h2f(b) * x.d[u] * (float)(s - 8 * (xs.x + xs.y));
  }
};
template <> struct Unit<Q8_0> {
  static constexpr int E = 32;
  static __device__ __forceinline__ float dot(const uint8_t *row, int u, const XQ &x) {
    const uint8_t *b = row + u * 34;
    unsigned w[8];
    ld_words(b + 2, 8, w);
    const int4 xa = *(const int4 *)(x.q + u * 32), xb = *(const int4 *)(x.q + u * 32 + 16);
    int s = 0;
    s = dp4(w[0], xa.x, s), s = dp4(w[1], xa.y, s), s = dp4(w[2], xa.z, s), s = dp4(w[3], xa.w, s);
    s = dp4(w[4], xb.x, s), s = dp4(w[5], xb.y, s), s = dp4(w[6], xb.z, s), s = dp4(w[7], xb.w, s);
    return h2f(b) * x.d[u] * (float)s;
  }
};
// q4_k: unit u = 16 bytes of a 32-byte chunk c: 16 elements of sub-block 2c (low nibbles), 16 of 2c + 1 (high)
__device__ __forceinline__ void qk_sm(uint4 h, int j, float *d, float *m) {
  const int sh = 8 * (j & 3);
  const unsigned lo = (h.y >> sh) & 255u, mid = (h.z >> sh) & 255u, hi = (h.w >> sh) & 255u;
  const int sc = j < 4 ? (int)(lo & 63u) : (int)((hi & 15u) | (lo >> 6) << 4);
  const int mn = j < 4 ? (int)(mid & 63u) : (int)((hi >> 4) | (mid >> 6) << 4);
  *d = __half2float(__ushort_as_half((unsigned short)(h.x & 0xffffu))) * (float)sc;
  *m = __half2float(__ushort_as_half((unsigned short)(h.x >> 16))) * (float)mn;
}
template <> struct Unit<Q4_K> {
  static constexpr int E = 32;
  static __device__ __forceinline__ float dot(const uint8_t *row, int u, const XQ &x) {
    const int blk = u >> 3, c = (u >> 1) & 3, hf = u & 1;
    const uint8_t *b = row + blk * 144;
    const uint4 h = *(const uint4 *)b, w = *(const uint4 *)(b + 16 + c * 32 + hf * 16);
    const int e0 = blk * 256 + c * 64 + hf * 16, e1 = e0 + 32;
    const int4 xa = *(const int4 *)(x.q + e0), xb = *(const int4 *)(x.q + e1);
    int s0 = 0, s1 = 0;
    s0 = dp4(w.x & 0x0F0F0F0Fu, xa.x, s0), s0 = dp4(w.y & 0x0F0F0F0Fu, xa.y, s0);
    s0 = dp4(w.z & 0x0F0F0F0Fu, xa.z, s0), s0 = dp4(w.w & 0x0F0F0F0Fu, xa.w, s0);
    s1 = dp4(w.x >> 4 & 0x0F0F0F0Fu, xb.x, s1), s1 = dp4(w.y >> 4 & 0x0F0F0F0Fu, xb.y, s1);
    s1 = dp4(w.z >> 4 & 0x0F0F0F0Fu, xb.z, s1), s1 = dp4(w.w >> 4 & 0x0F0F0F0Fu, xb.w, s1);
    float d0, m0, d1, m1;
    qk_sm(h, 2 * c, &d0, &m0);
    qk_sm(h, 2 * c + 1, &d1, &m1);
    return x.d[e0 >> 5] * (d0 * (float)s0 - m0 * (float)x.s[e0 >> 4]) +
           x.d[e1 >> 5] * (d1 * (float)s1 - m1 * (float)x.s[e1 >> 4]);
  }
};
// q6_k: unit u = half hh, 16 consecutive l (l0 = 0 or 16): the four 16-element runs 32k + l0 .. of the half
template <> struct Unit<Q6_K> {
  static constexpr int E = 64;
  static __device__ __forceinline__ float dot(const uint8_t *row, int u, const XQ &x) {
    const int blk = u >> 2, hh = (u >> 1) & 1, l0 = (u & 1) * 16;
    const uint8_t *b = row + blk * 210;
    unsigned la[4], lb[4], qh[4];
    ld_words(b + hh * 64 + l0, 4, la);
    ld_words(b + hh * 64 + 32 + l0, 4, lb);
    ld_words(b + 128 + hh * 32 + l0, 4, qh);
    const float d = h2f(b + 208);
    const int8_t *sc = (const int8_t *)(b + 192 + hh * 8 + (l0 >> 4));
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int e = blk * 256 + hh * 128 + 32 * k + l0;
      const int4 xv = *(const int4 *)(x.q + e);
      const unsigned *l = (k & 1) ? lb : la;
      const int nsh = 4 * (k >> 1), hsh = 2 * k;
      int s = 0;
      s = dp4((l[0] >> nsh & 0x0F0F0F0Fu) | (qh[0] >> hsh & 0x03030303u) << 4, xv.x, s);
      s = dp4((l[1] >> nsh & 0x0F0F0F0Fu) | (qh[1] >> hsh & 0x03030303u) << 4, xv.y, s);
      s = dp4((l[2] >> nsh & 0x0F0F0F0Fu) | (qh[2] >> hsh & 0x03030303u) << 4, xv.z, s);
      s = dp4((l[3] >> nsh & 0x0F0F0F0Fu) | (qh[3] >> hsh & 0x03030303u) << 4, xv.w, s);
      acc += x.d[e >> 5] * (float)sc[2 * k] * (float)(s - 32 * x.s[e >> 4]);
    }
    return d * acc;
  }
};

// ---- the GEMV: a block of W warps computes R rows; its threads split each row's units ----
template <int F, int R, int W>
__device__ __forceinline__ void rows_dot(const uint8_t *w, int N, int K, int row0, const XQ &x, float *red, float *y) {
  const int tid = threadIdx.x, nt = W * 32, units = K / Unit<F>::E;
  const long long rb = (long long)K / fmt_elems_d(F) * fmt_bytes_d(F);
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; r++) acc[r] = 0.f;
  for (int u = tid; u < units; u += nt)
#pragma unroll
    for (int r = 0; r < R; r++)
      if (row0 + r < N) acc[r] += Unit<F>::dot(w + (row0 + r) * rb, u, x);
#pragma unroll
  for (int r = 0; r < R; r++)
#pragma unroll
    for (int o = 16; o; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
  if (W == 1) {
    if (tid == 0)
#pragma unroll
      for (int r = 0; r < R; r++)
        if (row0 + r < N) y[row0 + r] = acc[r];
    return;
  }
  if ((tid & 31) == 0)
#pragma unroll
    for (int r = 0; r < R; r++) red[(tid >> 5) * R + r] = acc[r];
  __syncthreads();
  if (tid < R && row0 + tid < N) {
    float s = 0.f;
    for (int i = 0; i < W; i++) s += red[i * R + tid];
    y[row0 + tid] = s;
  }
  __syncthreads();
}

template <int F, int R, int W, int PERSIST>
__global__ void __launch_bounds__(W * 32) gemv_pro(const uint8_t *w, const float *xf, int N, int K, float *y) {
  extern __shared__ __align__(16) unsigned char sm[];
  int8_t *q = (int8_t *)sm;
  float *d = (float *)(sm + K);
  int *s = (int *)(sm + K + K / 32 * 4);
  float *red = (float *)(sm + K + K / 32 * 4 + K / 16 * 4);
  xq_row(xf, K, threadIdx.x, W * 32, q, d, s);
  __syncthreads();
  const XQ x = {q, d, s};
  const int groups = (N + R - 1) / R;
  for (int g = blockIdx.x; g < groups; g += PERSIST ? gridDim.x : groups) rows_dot<F, R, W>(w, N, K, g * R, x, red, y);
}

template <int F, int R, int W>
__global__ void __launch_bounds__(W * 32) gemv_glb(const uint8_t *w, XQ x, int N, int K, float *y) {
  __shared__ float red[W * R];
  rows_dot<F, R, W>(w, N, K, blockIdx.x * R, x, red, y);
}

// ---- host: blocks, their decoded values, the reference ----
static float f16_to_f32(uint16_t h) { return __half2float(*(__half *)&h); }
static uint16_t f32_to_f16(float f) {
  __half h = __float2half(f);
  return *(uint16_t *)&h;
}
static uint32_t rng = 12345u;
static uint32_t rnd(void) {
  rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
  return rng;
}
static float frand(float lo, float hi) { return lo + (hi - lo) * (rnd() >> 8) * (1.0f / 16777216.0f); }

static void make_block(int f, uint8_t *b) {
  const int nb = fmt_bytes_d(f);
  for (int i = 0; i < nb; i++) b[i] = (uint8_t)rnd();
  uint16_t d = f32_to_f16(frand(0.002f, 0.02f)), m = f32_to_f16(frand(0.001f, 0.01f));
  if (f == Q4_0 || f == Q8_0) memcpy(b, &d, 2);
  if (f == Q4_K) memcpy(b, &d, 2), memcpy(b + 2, &m, 2);
  if (f == Q6_K) memcpy(b + 208, &d, 2);
}

static int kscale(const uint8_t *s, int j) { return j < 4 ? s[j] & 63 : (s[j + 4] & 15) | (s[j - 4] >> 6) << 4; }
static int kmin(const uint8_t *s, int j) { return j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4; }
static void decode_block(int f, const uint8_t *b, float *v) {
  uint16_t h;
  if (f == Q4_0) {
    memcpy(&h, b, 2);
    for (int l = 0; l < 16; l++) v[l] = f16_to_f32(h) * ((b[2 + l] & 15) - 8), v[l + 16] = f16_to_f32(h) * ((b[2 + l] >> 4) - 8);
  } else if (f == Q8_0) {
    memcpy(&h, b, 2);
    for (int l = 0; l < 32; l++) v[l] = f16_to_f32(h) * (int8_t)b[2 + l];
  } else if (f == Q4_K) {
    uint16_t hm;
    memcpy(&h, b, 2), memcpy(&hm, b + 2, 2);
    for (int g = 0; g < 8; g++) {
      const float d = f16_to_f32(h) * kscale(b + 4, g), m = f16_to_f32(hm) * kmin(b + 4, g);
      for (int l = 0; l < 32; l++) v[g * 32 + l] = d * ((b[16 + (g >> 1) * 32 + l] >> ((g & 1) * 4)) & 15) - m;
    }
  } else {
    memcpy(&h, b + 208, 2);
    for (int hh = 0; hh < 2; hh++)
      for (int k = 0; k < 4; k++)
        for (int m = 0; m < 32; m++) {
          const int lo = (b[hh * 64 + 32 * (k & 1) + m] >> 4 * (k >> 1)) & 15, hi = (b[128 + hh * 32 + m] >> 2 * k) & 3;
          const float sc = (float)(int8_t)b[192 + hh * 8 + m / 16 + 2 * k];
          v[hh * 128 + 32 * k + m] = f16_to_f32(h) * sc * ((lo | hi << 4) - 32);
        }
  }
}

typedef void (*Launch)(const uint8_t *w, const float *x, int N, int K, float *y, XQ xq, cudaStream_t st);
struct Form {
  const char *name;
  int fmt;
  Launch fn;
};

template <int F, int R, int W> static void run_pro(const uint8_t *w, const float *x, int N, int K, float *y, XQ, cudaStream_t st) {
  const size_t smem = K + K / 32 * 4 + K / 16 * 4 + W * R * 4;
  static bool attr = false;
  if (!attr) {
    CK(cudaFuncSetAttribute(gemv_pro<F, R, W, 0>, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
    attr = true;
  }
  gemv_pro<F, R, W, 0><<<(N + R - 1) / R, W * 32, smem, st>>>(w, x, N, K, y);
}
template <int F, int R, int W> static void run_per(const uint8_t *w, const float *x, int N, int K, float *y, XQ, cudaStream_t st) {
  const size_t smem = K + K / 32 * 4 + K / 16 * 4 + W * R * 4;
  static int blocks = 0;
  if (!blocks) {
    CK(cudaFuncSetAttribute(gemv_pro<F, R, W, 1>, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_pro<F, R, W, 1>, W * 32, 32768));
    blocks = 132 * (per_sm > 0 ? per_sm : 1);
  }
  const int groups = (N + R - 1) / R;
  gemv_pro<F, R, W, 1><<<groups < blocks ? groups : blocks, W * 32, smem, st>>>(w, x, N, K, y);
}
template <int F, int R, int W> static void run_glb(const uint8_t *w, const float *x, int N, int K, float *y, XQ xq, cudaStream_t st) {
  xq_kernel<<<(K / 8 + 255) / 256, 256, 0, st>>>(x, K, (int8_t *)xq.q, (float *)xq.d, (int *)xq.s);
  gemv_glb<F, R, W><<<(N + R - 1) / R, W * 32, 0, st>>>(w, xq, N, K, y);
}

#define FORMS(F)                                                                                                \
  {"pro r1 w1", F, run_pro<F, 1, 1>}, {"pro r2 w1", F, run_pro<F, 2, 1>}, {"pro r4 w1", F, run_pro<F, 4, 1>},    \
      {"pro r1 w4", F, run_pro<F, 1, 4>}, {"pro r2 w4", F, run_pro<F, 2, 4>}, {"pro r4 w4", F, run_pro<F, 4, 4>}, \
      {"pro r8 w4", F, run_pro<F, 8, 4>}, {"pro r4 w8", F, run_pro<F, 4, 8>}, {"pro r8 w8", F, run_pro<F, 8, 8>}, \
      {"per r2 w4", F, run_per<F, 2, 4>}, {"per r4 w4", F, run_per<F, 4, 4>}, {"per r8 w8", F, run_per<F, 8, 8>}, \
      {"glb r1 w1", F, run_glb<F, 1, 1>}, {"glb r2 w1", F, run_glb<F, 2, 1>}, {"glb r4 w1", F, run_glb<F, 4, 1>}, \
      {"glb r2 w4", F, run_glb<F, 2, 4>}, {"glb r4 w4", F, run_glb<F, 4, 4>}

int main(int argc, char **argv) {
  int iters = 200;
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
  const Form forms[] = {FORMS(Q4_0), FORMS(Q8_0), FORMS(Q4_K), FORMS(Q6_K)};
  const int nforms = sizeof forms / sizeof forms[0];
  const int shapes[][2] = {{12288, 4096}, {2048, 8192}, {16384, 2048}, {2048, 2048}, {4096, 4096}};
  const size_t pool_bytes = (size_t)1 << 30; // weight copies rotate over 1 GiB, 20x L2
  uint8_t *pool;
  float *x, *y;
  int8_t *xq;
  float *xd;
  int *xs;
  CK(cudaMalloc(&pool, pool_bytes));
  CK(cudaMalloc(&x, 16384 * 4));
  CK(cudaMalloc(&y, 16384 * 4));
  CK(cudaMalloc(&xq, 16384));
  CK(cudaMalloc(&xd, 16384 / 32 * 4));
  CK(cudaMalloc(&xs, 16384 / 16 * 4));
  const XQ xqg = {xq, xd, xs};
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  printf("| weights | w [N, K] | form | max err / max |ref| | us | %% of floor |\n|---|---|---|---|---|---|\n");
  int failures = 0;
  for (int f = 0; f < 4; f++)
    for (const auto &sh : shapes) {
      const int N = sh[0], K = sh[1];
      const size_t rb = (size_t)K / fmt_elems_d(f) * fmt_bytes_d(f), wbytes = rb * N;
      const size_t stride = (wbytes + 255) & ~(size_t)255;
      const int copies = (int)(pool_bytes / stride);
      std::vector<uint8_t> hw(wbytes);
      for (size_t i = 0; i < wbytes; i += fmt_bytes_d(f)) make_block(f, &hw[i]);
      std::vector<float> hx(K), dec(K);
      for (int i = 0; i < K; i++) hx[i] = frand(-1.f, 1.f) * (i % 97 == 0 ? 8.f : 1.f);
      std::vector<double> ref(N);
      double refmax = 0;
      for (int n = 0; n < N; n++) {
        double acc = 0;
        for (int k0 = 0; k0 < K; k0 += fmt_elems_d(f)) {
          decode_block(f, &hw[n * rb + k0 / fmt_elems_d(f) * fmt_bytes_d(f)], &dec[k0]);
        }
        for (int k = 0; k < K; k++) acc += (double)dec[k] * hx[k];
        ref[n] = acc;
        refmax = fmax(refmax, fabs(acc));
      }
      CK(cudaMemcpy(pool, hw.data(), wbytes, cudaMemcpyHostToDevice));
      for (int c = 1; c < copies; c++) CK(cudaMemcpy(pool + c * stride, pool, wbytes, cudaMemcpyDeviceToDevice));
      CK(cudaMemcpy(x, hx.data(), K * 4, cudaMemcpyHostToDevice));
      const double floor_us = wbytes / 4.13e12 * 1e6;
      double best = 1e30;
      const char *best_name = "";
      for (int i = 0; i < nforms; i++) {
        if (forms[i].fmt != f) continue;
        CK(cudaMemset(y, 0xff, N * 4)); // NaN
        forms[i].fn(pool, x, N, K, y, xqg, st);
        CK(cudaStreamSynchronize(st));
        CK(cudaGetLastError());
        std::vector<float> hy(N);
        CK(cudaMemcpy(hy.data(), y, N * 4, cudaMemcpyDeviceToHost));
        double err = 0;
        for (int n = 0; n < N; n++) err = fmax(err, isfinite(hy[n]) ? fabs(hy[n] - ref[n]) : INFINITY);
        const double rel = err / refmax;
        const bool ok = rel < 2e-2;
        failures += !ok;
        for (int c = 0; c < 3; c++) forms[i].fn(pool + (c % copies) * stride, x, N, K, y, xqg, st);
        CK(cudaEventRecord(e0, st));
        for (int it = 0; it < iters; it++) forms[i].fn(pool + (it % copies) * stride, x, N, K, y, xqg, st);
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        const double us = ms * 1e3 / iters;
        if (ok && us < best) best = us, best_name = forms[i].name;
        printf("| %s | [%d, %d] | %s | %.2e%s | %.2f | %.1f |\n", fmt_name[f], N, K, forms[i].name, rel, ok ? "" : " FAIL",
               us, 100 * floor_us / us);
      }
      fprintf(stderr, "BEST %s [%d, %d]: %s %.2f us (%.1f%% of floor %.2f us)\n", fmt_name[f], N, K, best_name, best,
              100 * floor_us / best, floor_us);
    }
  fprintf(stderr, "failures: %d\n", failures);
  return failures != 0;
}
