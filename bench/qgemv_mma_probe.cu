// Probe (not part of lathe; bench/RESULTS.md, session 22): a q4_k decode GEMV on int8 tensor cores with the
// activations as three int8 digits (24-bit integers per 256 elements), against lathe's generated loop-nest GEMV of
// the same shapes. lathe_gen.cuh is lathe's code for them: the first file whole, the other two from their kernel on,
// each kernel renamed lathe_N_K:
//   for s in "12288 4096" "4096 12288" "2048 8192"; do set -- $s; lathe compile -e "x: f32[1,$2]; w: q4_k[$1,$2]
//   return linear(x, w)" --target cuda --ir code > gen_$1_$2.cu; done
// then, on the GPU machine: nvcc -O3 -arch=sm_90 -o qmma bench/qgemv_mma_probe.cu && ./qmma
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include "lathe_gen.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)

static constexpr int XMAX = 127 * 65536;

// x -> digits D[sub][4][32] (row 3 zero), scale per 256 (sx), sum of X per 32 (SX). One thread 8 elements.
__global__ void qx_kernel(const float *x, int K, signed char *D, float *sx, int *SX) {
  const int e0 = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
  if (e0 >= K) return;
  float v[8];
  const float4 a = *(const float4 *)(x + e0), b = *(const float4 *)(x + e0 + 4);
  v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
  float m = 0.f;
  for (int i = 0; i < 8; i++) m = fmaxf(m, fabsf(v[i]));
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  const float inv = m > 0.f ? (float)XMAX / m : 0.f;
  unsigned dg[3][2] = {{0, 0}, {0, 0}, {0, 0}};
  int sum = 0;
  for (int i = 0; i < 8; i++) {
    int X = __float2int_rn(v[i] * inv);
    X = max(-XMAX, min(XMAX, X));
    sum += X;
    const int l = (int)(signed char)(X & 255);
    const int X1 = (X - l) >> 8;
    const int md = (int)(signed char)(X1 & 255);
    const int h = (X1 - md) >> 8;
    dg[0][i >> 2] |= (unsigned)(h & 255) << (8 * (i & 3));
    dg[1][i >> 2] |= (unsigned)(md & 255) << (8 * (i & 3));
    dg[2][i >> 2] |= (unsigned)(l & 255) << (8 * (i & 3));
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  const int sub = e0 >> 5, off = e0 & 31;
  for (int g = 0; g < 3; g++) *(uint2 *)(D + sub * 128 + g * 32 + off) = make_uint2(dg[g][0], dg[g][1]);
  *(uint2 *)(D + sub * 128 + 96 + off) = make_uint2(0, 0);
  if ((threadIdx.x & 3) == 0) SX[sub] = sum;
  if ((threadIdx.x & 31) == 0) sx[e0 >> 8] = m / (float)XMAX;
}

static __device__ __forceinline__ void mma_u8s8(int *c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                                unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%10,%11,%12,%13};"
               : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
               : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0), "r"(0), "r"(0), "r"(0));
}
static __device__ __forceinline__ int byte_of(unsigned w, int i) { return (int)((w >> (8 * i)) & 255u); }

// 16 rows a block-row, KSPLIT warps split the superblocks; UNR superblocks a loop step (loads first)
template <int KSPLIT, int UNR>
__global__ void __launch_bounds__(32 * KSPLIT) qmma_q4k(const unsigned char *W, int N, int K, const signed char *D,
                                                       const float *sx, const int *SX, float *y) {
  const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.x * 16;
  const int NSB = K / 256, per = NSB / KSPLIT, sb0 = wp * per;
  const long RB = (long)NSB * 144;
  const unsigned char *rA = W + (long)(n0 + g) * RB, *rB = W + (long)(n0 + g + 8) * RB;
  float acc0 = 0.f, acc1 = 0.f;
  for (int s = sb0; s < sb0 + per; s += UNR) {
    uint4 hA[UNR], hB[UNR];
    uint2 qA[UNR][4], qB[UNR][4];
#pragma unroll
    for (int u = 0; u < UNR; u++) {
      hA[u] = *(const uint4 *)(rA + (long)(s + u) * 144);
      hB[u] = *(const uint4 *)(rB + (long)(s + u) * 144);
#pragma unroll
      for (int c = 0; c < 4; c++) {
        qA[u][c] = *(const uint2 *)(rA + (long)(s + u) * 144 + 16 + 32 * c + 8 * t);
        qB[u][c] = *(const uint2 *)(rB + (long)(s + u) * 144 + 16 + 32 * c + 8 * t);
      }
    }
#pragma unroll
    for (int u = 0; u < UNR; u++) {
      const int sb = s + u;
      const uint4 ha = hA[u], hb = hB[u];
      const unsigned scA[2] = {ha.y & 0x3F3F3F3Fu, (ha.w & 0x0F0F0F0Fu) | ((ha.y >> 2) & 0x30303030u)};
      const unsigned mnA[2] = {ha.z & 0x3F3F3F3Fu, ((ha.w >> 4) & 0x0F0F0F0Fu) | ((ha.z >> 2) & 0x30303030u)};
      const unsigned scB[2] = {hb.y & 0x3F3F3F3Fu, (hb.w & 0x0F0F0F0Fu) | ((hb.y >> 2) & 0x30303030u)};
      const unsigned mnB[2] = {hb.z & 0x3F3F3F3Fu, ((hb.w >> 4) & 0x0F0F0F0Fu) | ((hb.z >> 2) & 0x30303030u)};
      int IA0 = 0, IA1 = 0, IA2 = 0, IB0 = 0, IB1 = 0, IB2 = 0;
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const int c = j >> 1, hf = j & 1;
        const unsigned a0 = (qA[u][c].x >> (4 * hf)) & 0x0F0F0F0Fu, a2 = (qA[u][c].y >> (4 * hf)) & 0x0F0F0F0Fu;
        const unsigned a1 = (qB[u][c].x >> (4 * hf)) & 0x0F0F0F0Fu, a3 = (qB[u][c].y >> (4 * hf)) & 0x0F0F0F0Fu;
        const uint2 bx = *(const uint2 *)(D + ((long)sb * 8 + j) * 128 + (g & 3) * 32 + 8 * t);
        int cc[4];
        mma_u8s8(cc, a0, a1, a2, a3, bx.x, bx.y);
        const int v0 = __shfl_down_sync(0xffffffffu, cc[0], 1), v2 = __shfl_down_sync(0xffffffffu, cc[2], 1);
        const int sa = byte_of(scA[j >> 2], j & 3), sbb = byte_of(scB[j >> 2], j & 3);
        IA0 += sa * cc[0]; IA1 += sa * cc[1]; IA2 += sa * v0;
        IB0 += sbb * cc[2]; IB1 += sbb * cc[3]; IB2 += sbb * v2;
      }
      float minA = 0.f, minB = 0.f;
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const float sxj = (float)SX[sb * 8 + j];
        minA = fmaf((float)byte_of(mnA[j >> 2], j & 3), sxj, minA);
        minB = fmaf((float)byte_of(mnB[j >> 2], j & 3), sxj, minB);
      }
      const float s_ = sx[sb];
      const float dA = __half2float(__ushort_as_half((unsigned short)(ha.x & 0xffffu)));
      const float mA = __half2float(__ushort_as_half((unsigned short)(ha.x >> 16)));
      const float dB = __half2float(__ushort_as_half((unsigned short)(hb.x & 0xffffu)));
      const float mB = __half2float(__ushort_as_half((unsigned short)(hb.x >> 16)));
      const float TA = fmaf((float)IA0, 65536.f, fmaf((float)IA1, 256.f, (float)IA2));
      const float TB = fmaf((float)IB0, 65536.f, fmaf((float)IB1, 256.f, (float)IB2));
      acc0 = fmaf(s_, fmaf(dA, TA, -mA * minA), acc0);
      acc1 = fmaf(s_, fmaf(dB, TB, -mB * minB), acc1);
    }
  }
  __shared__ float red[KSPLIT][16];
  if (t == 0) red[wp][g] = acc0, red[wp][g + 8] = acc1;
  __syncthreads();
  if (threadIdx.x < 16) {
    float r = 0.f;
    for (int i = 0; i < KSPLIT; i++) r += red[i][threadIdx.x];
    y[n0 + threadIdx.x] = r;
  }
}

__global__ void read_kernel(const uint4 *p, size_t n, unsigned *out) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// host q4_k dequantization (ggml's layout)
static float h2f(unsigned short h) { return __half2float(__ushort_as_half(h)); }
static void scale_min_k4(int j, const unsigned char *q, int *d, int *m) {
  if (j < 4) *d = q[j] & 63, *m = q[j + 4] & 63;
  else *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
}
static void deq_row(const unsigned char *row, int K, float *out) {
  for (int sb = 0; sb < K / 256; sb++) {
    const unsigned char *b = row + sb * 144;
    unsigned short dh, mh;
    memcpy(&dh, b, 2), memcpy(&mh, b + 2, 2);
    const float d = h2f(dh), dmin = h2f(mh);
    const unsigned char *sc = b + 4, *q = b + 16;
    int is = 0;
    float *y = out + sb * 256;
    for (int j = 0; j < 256; j += 64) {
      int s1, m1, s2, m2;
      scale_min_k4(is, sc, &s1, &m1), scale_min_k4(is + 1, sc, &s2, &m2);
      for (int l = 0; l < 32; l++) *y++ = d * s1 * (q[l] & 0xF) - dmin * m1;
      for (int l = 0; l < 32; l++) *y++ = d * s2 * (q[l] >> 4) - dmin * m2;
      q += 32, is += 2;
    }
  }
}

typedef void (*gen_fn)(float *, const float *, const unsigned char *);
struct Shape { int N, K; gen_fn gen; int gen_grid, gen_block; };

template <int KS, int U> static float run_mma(const unsigned char *dW, int N, int K, const float *dx, signed char *dD, float *dsx,
                                             int *dSX, float *dy, int iters) {
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  for (int it = -3; it < iters; it++) {
    if (it == 0) cudaEventRecord(a);
    qx_kernel<<<(K / 8 + 127) / 128, 128>>>(dx, K, dD, dsx, dSX);
    qmma_q4k<KS, U><<<N / 16, 32 * KS>>>(dW, N, K, dD, dsx, dSX, dy);
  }
  cudaEventRecord(b);
  CK(cudaEventSynchronize(b));
  float ms;
  cudaEventElapsedTime(&ms, a, b);
  return ms * 1000.f / iters;
}

static double check(const std::vector<float> &ref, const float *dy, int N, double *rms) {
  std::vector<float> y(N);
  CK(cudaMemcpy(y.data(), dy, N * 4, cudaMemcpyDeviceToHost));
  double e = 0, r = 0;
  for (int i = 0; i < N; i++) e = fmax(e, fabs(y[i] - ref[i])), r += (double)ref[i] * ref[i];
  *rms = sqrt(r / N);
  return e;
}

int main() {
  Shape shapes[] = {{12288, 4096, (gen_fn)lathe_12288_4096, 768, 128},
                    {4096, 12288, (gen_fn)lathe_4096_12288, 4096, 64},
                    {2048, 8192, (gen_fn)lathe_2048_8192, 2048, 128}};
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  printf("%s, %d SMs\n", p.name, p.multiProcessorCount);
  srand(7);
  for (Shape &S : shapes) {
    const int N = S.N, K = S.K;
    const size_t wb = (size_t)N * K / 256 * 144;
    std::vector<unsigned char> W(wb);
    for (size_t i = 0; i < wb; i++) W[i] = rand() & 255;
    for (size_t r = 0; r < (size_t)N * K / 256; r++) { // sane d, dmin: small positive halves
      unsigned short d = __half_as_ushort(__float2half(0.001f + (rand() % 1000) * 1e-5f));
      unsigned short m = __half_as_ushort(__float2half(0.0005f + (rand() % 1000) * 1e-5f));
      memcpy(&W[r * 144], &d, 2), memcpy(&W[r * 144 + 2], &m, 2);
    }
    std::vector<float> x(K), ref(N), row(K);
    for (int i = 0; i < K; i++) x[i] = ((rand() % 20001) - 10000) * 1e-4f * (i % 97 == 0 ? 30.f : 1.f);
    for (int n = 0; n < N; n++) {
      deq_row(&W[(size_t)n * (K / 256) * 144], K, row.data());
      double s = 0;
      for (int k = 0; k < K; k++) s += (double)row[k] * x[k];
      ref[n] = (float)s;
    }
    unsigned char *dW;
    float *dx, *dy, *dsx;
    signed char *dD;
    int *dSX;
    CK(cudaMalloc(&dW, wb)); CK(cudaMalloc(&dx, K * 4)); CK(cudaMalloc(&dy, N * 4));
    CK(cudaMalloc(&dD, K / 32 * 128)); CK(cudaMalloc(&dsx, K / 256 * 4)); CK(cudaMalloc(&dSX, K / 32 * 4));
    CK(cudaMemcpy(dW, W.data(), wb, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dx, x.data(), K * 4, cudaMemcpyHostToDevice));
    double rms;
    const int iters = 200;
    // lathe's kernel
    CK(cudaMemset(dy, 0xff, N * 4));
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    for (int it = -3; it < iters; it++) {
      if (it == 0) cudaEventRecord(a);
      S.gen<<<S.gen_grid, S.gen_block>>>(dy, dx, dW);
    }
    cudaEventRecord(b);
    CK(cudaEventSynchronize(b));
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    double e = check(ref, dy, N, &rms);
    const double us_l = ms * 1000. / iters;
    printf("[%d,%d] q4_k %.1f MB  lathe: %.2f us %.0f GB/s err %.2e (rms %.3g)\n", N, K, wb / 1e6, us_l, wb / us_l / 1e3, e,
           rms);
#define TRY(KS, U)                                                                                                      \
    if ((K / 256) % (KS * U) == 0) {                                                                                    \
      CK(cudaMemset(dy, 0xff, N * 4));                                                                                  \
      const float us = run_mma<KS, U>(dW, N, K, dx, dD, dsx, dSX, dy, iters);                                           \
      CK(cudaGetLastError());                                                                                           \
      e = check(ref, dy, N, &rms);                                                                                      \
      printf("   mma KSPLIT=%d UNR=%d: %.2f us %.0f GB/s err %.2e  (x%.2f)\n", KS, U, us, wb / us / 1e3, e, us_l / us); \
    }
    TRY(1, 1) TRY(1, 2) TRY(2, 1) TRY(2, 2) TRY(4, 1) TRY(4, 2) TRY(8, 1) TRY(8, 2)
    {
      unsigned *dummy;
      CK(cudaMalloc(&dummy, 4));
      cudaEventRecord(a);
      for (int it = 0; it < iters; it++) read_kernel<<<132 * 8, 256>>>((const uint4 *)dW, wb / 16, dummy);
      cudaEventRecord(b);
      CK(cudaEventSynchronize(b));
      cudaEventElapsedTime(&ms, a, b);
      printf("   plain read of the bytes: %.2f us %.0f GB/s\n", ms * 1000. / iters, wb / (ms * 1000. / iters) / 1e3);
      cudaFree(dummy);
    }
    // the digits kernel alone
    {
      cudaEventRecord(a);
      for (int it = 0; it < iters; it++) qx_kernel<<<(K / 8 + 127) / 128, 128>>>(dx, K, dD, dsx, dSX);
      cudaEventRecord(b);
      CK(cudaEventSynchronize(b));
      cudaEventElapsedTime(&ms, a, b);
      printf("   qx alone: %.2f us\n", ms * 1000. / iters);
    }
    cudaFree(dW), cudaFree(dx), cudaFree(dy), cudaFree(dD), cudaFree(dsx), cudaFree(dSX);
  }
  return 0;
}
