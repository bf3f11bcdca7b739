typedef long long i64;
typedef unsigned long long u64;
#define NT 1024
#define FULL 0xffffffffu
#define U 8 /* loads in flight per thread: one block has few warps to hide latency with */
/* body for each of the U elements i (value v) of this thread in a block-strided sweep; every lane
   runs the same iterations (warp-wide intrinsics inside), i >= n marks a lane with no element */
#define LT_SWEEP(body) \
  for (i64 base = 0; base < n; base += (i64)NT * U) { \
    float vs[U]; \
    _Pragma("unroll") for (int j = 0; j < U; j++) { const i64 i = base + (i64)j * NT + tid; vs[j] = i < n ? logits[i] : 0.0f; } \
    _Pragma("unroll") for (int j = 0; j < U; j++) { const i64 i = base + (i64)j * NT + tid; const float v = vs[j]; body } \
  }
static __device__ __forceinline__ unsigned int lt_key(float f) {
  unsigned int x = __float_as_uint(f);
  if (f != f) return 0u;
  return (x & 0x80000000u) ? ~x : x | 0x80000000u;
}
static __device__ __forceinline__ float lt_bits_f(i64 b) { return __int_as_float((int)b); }
/* hist[bin] += w for the lanes where valid, one atomic per distinct bin of the warp: the lanes of
   a bin add their amounts first (in two 32-bit pieces: w < 2^41). Every lane of the warp calls it. */
static __device__ __forceinline__ void lt_hist_add(u64 *hist, int valid, unsigned int bin, u64 w) {
  const unsigned int peers = __match_any_sync(FULL, valid ? bin : 256u);
  const unsigned int a = __reduce_add_sync(peers, (unsigned int)(w & 0x7ffffffull));
  const unsigned int b = __reduce_add_sync(peers, (unsigned int)(w >> 27));
  if (valid && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hist[bin], (u64)a + ((u64)b << 27));
}
/* Inclusive scan of v over the block's threads; *total gets the block's sum. */
static __device__ u64 lt_block_scan(u64 v, u64 *red, u64 *total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 1; o < 32; o <<= 1) {
    const u64 y = __shfl_up_sync(FULL, v, o);
    if (lane >= o) v += y;
  }
  __syncthreads();
  if (lane == 31) red[warp] = v;
  __syncthreads();
  if (warp == 0) {
    u64 w = red[lane];
    for (int o = 1; o < 32; o <<= 1) {
      const u64 y = __shfl_up_sync(FULL, w, o);
      if (lane >= o) w += y;
    }
    red[lane] = w;
  }
  __syncthreads();
  *total = red[31];
  return v + (warp ? red[warp - 1] : 0);
}
/* The block's maximum of v (every thread gets it). */
static __device__ unsigned int lt_block_max(unsigned int v, u64 *red) {
  v = __reduce_max_sync(FULL, v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  unsigned int m = 0u;
  for (int w = 0; w < NT / 32; w++) m = max(m, (unsigned int)red[w]);
  return m;
}
/* The digit of one radix-selection pass: walking the bins from the top, the first b where the amount
   above it plus its own reaches *need (or b = 0); *need loses the amount above. Warp 0 does it: lane l
   holds bins 255 - 8l down to 248 - 8l. */
static __device__ void lt_select_digit(const u64 *hist, unsigned int *prefix, u64 *need, int shift) {
  __syncthreads();
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x, top = 255 - 8 * lane;
    u64 cs = 0;
    for (int b = top; b > top - 8; b--) cs += hist[b];
    u64 incl = cs;
    for (int o = 1; o < 32; o <<= 1) {
      const u64 y = __shfl_up_sync(FULL, incl, o);
      if (lane >= o) incl += y;
    }
    const u64 want = *need;
    const unsigned int reach = __ballot_sync(FULL, incl >= want);
    const int at = reach ? __ffs(reach) - 1 : 31;
    if (lane == at) {
      u64 above = incl - cs;
      int b = top;
      while (b > 0 && above + hist[b] < want) above += hist[b--];
      *prefix |= (unsigned int)b << shift;
      *need = want - above;
    }
  }
  __syncthreads();
}
/* One row's token into *out, by the whole block. */
static __device__ __forceinline__ void lt_sample_row(int *out, const float *logits, i64 n, i64 temperature_bits,
    i64 top_k, i64 top_p_bits, i64 u_bits) {
  __shared__ u64 hist[256], red[32];
  __shared__ float w_max[32];
  __shared__ i64 w_arg[32], s_arg;
  __shared__ unsigned int s_prefix;
  __shared__ u64 s_need;
  __shared__ unsigned int c_count, c_zb[NT];
  __shared__ i64 c_idx[NT];
  __shared__ u64 c_w[NT];
  __shared__ unsigned int near[2048], s_bin;
  const int tid = threadIdx.x, lane = tid & 31;
  const float t = lt_bits_f(temperature_bits), top_p = lt_bits_f(top_p_bits), u = lt_bits_f(u_bits);
  const float inf = __int_as_float(0x7f800000);
  /* 1. the maximum and its first index (NaNs skipped) */
  float mx = -inf;
  i64 arg = n;
  LT_SWEEP(if (i < n && v > mx) { mx = v; arg = i; })
  for (int o = 16; o; o >>= 1) {
    const float m2 = __shfl_xor_sync(FULL, mx, o);
    const i64 a2 = __shfl_xor_sync(FULL, arg, o);
    if (m2 > mx || (m2 == mx && a2 < arg)) { mx = m2; arg = a2; }
  }
  if (lane == 0) { w_max[tid >> 5] = mx; w_arg[tid >> 5] = arg; }
  __syncthreads();
  mx = w_max[0];
  arg = w_arg[0];
  for (int w = 1; w < 32; w++)
    if (w_max[w] > mx || (w_max[w] == mx && w_arg[w] < arg)) { mx = w_max[w]; arg = w_arg[w]; }
  if (!(t > 0.0f) || !(mx > -inf) || mx == inf) {
    if (tid == 0) *out = (int)(arg < n ? arg : 0);
    return;
  }
  /* 2. the top-k threshold: the key of the k-th largest logit. Fast path for k <= NT: a histogram of
     the distance below the maximum in 1/64 steps (near the maximum the bins are sparse, so plain
     atomics rarely collide) gives a cut holding at least k logits; when at most NT do, gather them
     and take the k-th largest key among them exactly. Otherwise radix selection over all logits. */
  unsigned int kth = 0u;
  int gathered = 0; /* the candidates (key >= kth) are c_idx[0 .. c_count) */
  if (top_k > 0 && top_k < n && top_k <= NT) {
    for (int b = tid; b < 2048; b += NT) near[b] = 0u;
    if (tid == 0) c_count = 0u;
    __syncthreads();
    LT_SWEEP(const float d = mx - v; if (i < n && d < 32.0f) atomicAdd(&near[(int)(d * 64.0f)], 1u);)
    __syncthreads();
    if (tid < 32) { /* the first bin where the count from the top reaches k, or 2048 */
      unsigned int cs = 0u;
      for (int b = 64 * tid; b < 64 * tid + 64; b++) cs += near[b];
      unsigned int incl = cs;
      for (int o = 1; o < 32; o <<= 1) {
        const unsigned int y = __shfl_up_sync(FULL, incl, o);
        if (tid >= o) incl += y;
      }
      const unsigned int reach = __ballot_sync(FULL, incl >= (unsigned int)top_k);
      if (tid == (reach ? __ffs(reach) - 1 : 0)) {
        unsigned int run = incl - cs;
        int b = 64 * tid;
        while (b < 64 * tid + 63 && run + near[b] < (unsigned int)top_k) run += near[b++];
        s_bin = reach ? (unsigned int)b : 2048u;
      }
    }
    __syncthreads();
    const unsigned int cut = s_bin;
    if (cut < 2048u) {
      LT_SWEEP(const float d = mx - v; if (i < n && d < 32.0f && (unsigned int)(d * 64.0f) <= cut) {
                 const unsigned int at = atomicAdd(&c_count, 1u); if (at < NT) c_idx[at] = i; })
      __syncthreads();
      const unsigned int cn = c_count;
      if (cn <= NT) { /* the k-th largest key: the largest key with at least k candidates at or above it */
        const unsigned int key = tid < (int)cn ? lt_key(logits[c_idx[tid]]) : 0u;
        c_zb[tid] = key;
        __syncthreads();
        unsigned int ge = 0u;
        if (tid < (int)cn)
          for (unsigned int j = 0; j < cn; j++) ge += c_zb[j] >= key;
        kth = lt_block_max(tid < (int)cn && ge >= (unsigned int)top_k ? key : 0u, red);
        __syncthreads();
        const int keep = tid < (int)cn && key >= kth; /* compact to the candidates */
        if (tid == 0) c_count = 0u;
        __syncthreads();
        const i64 my = tid < (int)cn ? c_idx[tid] : 0;
        __syncthreads();
        if (keep) c_idx[atomicAdd(&c_count, 1u)] = my;
        __syncthreads();
        gathered = 1;
      }
    }
  }
  if (!gathered && top_k > 0 && top_k < n) {
    if (tid == 0) { s_prefix = 0u; s_need = (u64)top_k; }
    for (int shift = 24; shift >= 0; shift -= 8) {
      __syncthreads();
      const unsigned int high = shift == 24 ? 0u : ~0u << (shift + 8), prefix = s_prefix;
      for (int b = tid; b < 256; b += NT) hist[b] = 0;
      __syncthreads();
      LT_SWEEP(const unsigned int k = lt_key(v); lt_hist_add(hist, i < n && (k & high) == prefix, (k >> shift) & 255u, 1ull);)
      lt_select_digit(hist, &s_prefix, &s_need, shift);
    }
    kth = s_prefix;
  }
#define LT_Z(v) expf(((v) - mx) / t)
#define LT_WEIGHT(v, z) (lt_key(v) >= kth && (z) > 0.0f ? (u64)((double)(z) * 1099511627776.0) : 0ull)
  /* 2b. top-k leaves few candidates: gather them (one per thread) and finish in shared memory; the
     top-p threshold is the largest candidate weight whose mass at or above it reaches top_p of the
     total, and the draw walks the kept ones in vocabulary order */
  if (top_k > 0 && top_k <= NT) {
    if (!gathered) {
      if (tid == 0) c_count = 0u;
      __syncthreads();
      LT_SWEEP(if (i < n && lt_key(v) >= kth) { const unsigned int at = atomicAdd(&c_count, 1u); if (at < NT) c_idx[at] = i; })
      __syncthreads();
    }
    const unsigned int cn = c_count;
    if (cn <= NT) { /* else ties at the k-th value overflow: the sweeps below */
      const int have = tid < (int)cn;
      const i64 ci = have ? c_idx[tid] : n;
      const float cv = have ? logits[ci] : 0.0f, cz = have ? LT_Z(cv) : 0.0f;
      const u64 cw = have ? LT_WEIGHT(cv, cz) : 0ull;
      c_w[tid] = cw;
      c_zb[tid] = __float_as_uint(cz);
      u64 total = 0;
      lt_block_scan(cw, red, &total); /* its barriers publish c_w and c_zb */
      unsigned int zth = 0u;
      if (top_p > 0.0f && top_p < 1.0f) {
        u64 need = (u64)((double)top_p * (double)total), at_or_above = 0;
        if (!need) need = 1;
        if (cw)
          for (unsigned int j = 0; j < cn; j++)
            if (c_zb[j] >= c_zb[tid]) at_or_above += c_w[j];
        zth = lt_block_max(cw && at_or_above >= need ? c_zb[tid] : 0u, red);
      }
      const u64 kw = cw && c_zb[tid] >= zth ? cw : 0ull;
      __syncthreads();
      c_w[tid] = kw;
      u64 kept = 0;
      lt_block_scan(kw, red, &kept);
      u64 before = 0;
      if (kw)
        for (unsigned int j = 0; j < cn; j++)
          if (c_idx[j] < ci) before += c_w[j];
      const u64 r = (u64)((double)u * (double)kept);
      if (tid == 0) s_arg = arg;
      __syncthreads();
      if (kw && before <= r && r < before + kw) s_arg = ci;
      __syncthreads();
      if (tid == 0) *out = (int)s_arg;
      return;
    }
  }
  /* 3. the top-p threshold on the weights' bits, against the candidates' total weight */
  unsigned int zth = 0u;
  if (top_p > 0.0f && top_p < 1.0f) {
    u64 mine = 0, total = 0;
    LT_SWEEP(const float z = LT_Z(v); if (i < n) mine += LT_WEIGHT(v, z);)
    lt_block_scan(mine, red, &total);
    const u64 need = (u64)((double)top_p * (double)total);
    if (tid == 0) { s_prefix = 0u; s_need = need ? need : 1ull; }
    for (int shift = 24; shift >= 0; shift -= 8) {
      __syncthreads();
      const unsigned int high = shift == 24 ? 0u : ~0u << (shift + 8), prefix = s_prefix;
      for (int b = tid; b < 256; b += NT) hist[b] = 0;
      __syncthreads();
      LT_SWEEP(const float z = LT_Z(v); const unsigned int k = __float_as_uint(z);
               const u64 w = i < n ? LT_WEIGHT(v, z) : 0ull;
               lt_hist_add(hist, w && (k & high) == prefix, (k >> shift) & 255u, w);)
      lt_select_digit(hist, &s_prefix, &s_need, shift);
    }
    zth = s_prefix;
  }
  /* 4. the kept weights of this thread's slice, a scan over the slices, the walk in the slice that
     holds u * total */
  const i64 per = (n + NT - 1) / NT, lo = tid * per < n ? tid * per : n, hi = lo + per < n ? lo + per : n;
  u64 mine = 0, kept = 0;
#pragma unroll 8
  for (i64 i = lo; i < hi; i++) {
    const float v = logits[i], z = LT_Z(v);
    if (__float_as_uint(z) >= zth) mine += LT_WEIGHT(v, z);
  }
  const u64 before = lt_block_scan(mine, red, &kept) - mine;
  const u64 r = (u64)((double)u * (double)kept);
  if (tid == 0) s_arg = arg; /* only if rounding left r past every kept weight */
  __syncthreads();
  if (mine && before <= r && r < before + mine) {
    u64 acc = before;
    for (i64 i = lo; i < hi; i++) {
      const float v = logits[i], z = LT_Z(v);
      if (__float_as_uint(z) < zth) continue;
      acc += LT_WEIGHT(v, z);
      if (acc > r) { s_arg = i; break; }
    }
  }
  __syncthreads();
  if (tid == 0) *out = (int)s_arg;
}

extern "C" __global__ void __launch_bounds__(NT) lathe_sample(int *out, const float *logits, i64 n,
    i64 temperature_bits, i64 top_k, i64 top_p_bits, i64 u_bits) {
  lt_sample_row(out, logits, n, temperature_bits, top_k, top_p_bits, u_bits);
}

/* Every sampled row of a batched step in one launch, a block per row: params[5 * b ..] holds the row of the
   logits (each n wide), the temperature's bits, top-k, top-p's bits and the uniform's bits. */
extern "C" __global__ void __launch_bounds__(NT) lathe_sample_rows(int *out, const float *logits, const i64 *params,
    i64 n) {
  const i64 *q = params + 5 * (i64)blockIdx.x;
  lt_sample_row(out + blockIdx.x, logits + q[0] * n, n, q[1], q[2], q[3], q[4]);
}
