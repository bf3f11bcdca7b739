typedef long long i64;
struct alignas(8) lt_u2 { unsigned int x, y; };
struct alignas(16) lt_u4 { unsigned int x, y, z, w; };

static __device__ __forceinline__ float lt_f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
static __device__ __forceinline__ unsigned short lt_f32_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
static __device__ __forceinline__ float lt_bf16_to_f32(unsigned short h) {
  return __uint_as_float(((unsigned int)h) << 16);
}
static __device__ __forceinline__ unsigned short lt_f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  unsigned int x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
#endif
}
static __device__ __forceinline__ float lt_f16_round(float f) { return lt_f16_to_f32(lt_f32_to_f16(f)); }
static __device__ __forceinline__ float lt_bf16_round(float f) { return lt_bf16_to_f32(lt_f32_to_bf16(f)); }
static __device__ __forceinline__ i64 lt_maxi(i64 a, i64 b) { return a > b ? a : b; }
static __device__ __forceinline__ i64 lt_mini(i64 a, i64 b) { return a < b ? a : b; }
static __device__ __forceinline__ i64 lt_absi(i64 a) { return a < 0 ? -a : a; }
/* c += a (16x16 bf16) * b (16x8 bf16) on tensor cores; only tensor-core kernels (KS_MMA) call it */
static __device__ __forceinline__ void lt_mma_bf16(float *c, const unsigned int *a, unsigned int b0, unsigned int b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};" : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap(); /* bf16 mma needs sm_80 */
#endif
}
/* Programmatic dependent launch (sm_90): every kernel lets the next one be scheduled, then waits
   until the kernel before it has completed and its writes are visible. Without a programmatic
   edge (ordinary launches, older GPUs) both are no-ops. */
static __device__ __forceinline__ void lt_pdl(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
/* shared-memory staging of tensor-core kernels: addresses, 16-byte asynchronous copies, ldmatrix */
static __device__ __forceinline__ unsigned int lt_smem_u32(const void *p) {
  unsigned int r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}
static __device__ __forceinline__ void lt_cp_async16(unsigned int dst, const void *src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src) : "memory");
#else
  __trap();
#endif
}
static __device__ __forceinline__ void lt_cp_async_commit(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N> static __device__ __forceinline__ void lt_cp_async_wait_group(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
#endif
}
static __device__ __forceinline__ void lt_ldsm_x4(unsigned int *r, unsigned int addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
#else
  __trap();
#endif
}
static __device__ __forceinline__ void lt_ldsm_x4_trans(unsigned int *r, unsigned int addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
#else
  __trap();
#endif
}
/* two f32 values as a bf16 pair (the first in the low half), rounded, or split into hi + lo pairs */
static __device__ __forceinline__ unsigned int lt_pack_bf16x2(float a, float b) {
  return (unsigned int)lt_f32_to_bf16(a) | ((unsigned int)lt_f32_to_bf16(b) << 16);
}
static __device__ __forceinline__ void lt_split_bf16x2(float a, float b, unsigned int *hi, unsigned int *lo) {
  const unsigned short ha = lt_f32_to_bf16(a), hb = lt_f32_to_bf16(b);
  *hi = (unsigned int)ha | ((unsigned int)hb << 16);
  *lo = lt_pack_bf16x2(a - lt_bf16_to_f32(ha), b - lt_bf16_to_f32(hb));
}
/* Split work meeting at a counter (the scratch's first words, kernel.h): after this block stored its
   part, counts it on counter `counter` of `total` parts; true in the block that arrived last, which has
   reset the counter and, after a __threadfence(), sees every part. Every thread of the block calls it. */
static __device__ __forceinline__ bool lt_arrive_last(unsigned int *lt_scratch, i64 counter, i64 total) {
  __threadfence();
  __syncthreads();
  __shared__ int lt_arrived_last;
  if (threadIdx.x == 0) {
    lt_arrived_last = atomicAdd(&lt_scratch[counter], 1u) == (unsigned int)total - 1;
    if (lt_arrived_last) lt_scratch[counter] = 0;
  }
  __syncthreads();
  return lt_arrived_last;
}
