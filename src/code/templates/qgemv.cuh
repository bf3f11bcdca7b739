/* A decode GEMV over quantized weights with integer activations: one KS_MMA statement of role MMA_QGEMV
 * (render_qgemv.c), the few-rows form of a kernel whose blocked variant is a tensor-core GEMM.
 *
 * y[m][n] = sum_k A[m][k] * W_b[n][k] for NB = 1 or 2 weights (gate and up) in GGUF blocks. A block of WARPS warps
 * takes one row m and R consecutive columns n (blocks m fastest). It first computes the row of A (every thread 8 consecutive
 * elements, coalesced) and quantizes it into shared memory as llama.cpp's q8_1 activations are: int8 values per 32
 * elements with the scale max|a| / 127, and each 16 elements' integer sum (for the formats' offsets and minimums).
 * Then the threads split the row's units (32 weight elements, q6_k 64: a few 16-byte loads of one block) and each
 * sums its units' integer products with __dp4a, applying the weight's and the activations' scales once per 16 or
 * 32 elements, for every column of the block; the sums meet through warp shuffles and then shared memory, added in
 * warp order (the same bits whatever else runs). Where the weight is a tensor-core GEMM's in prefill, the GEMM
 * (its blocked variant) reads the blocks dequantized to bf16 instead.
 *
 * Accuracy: the activations' rounding (up to max|a| / 254 of each group's elements) is the error of llama.cpp's
 * CUDA GEMV; the weights' values are exact. LATHE_QUANT_GEMV=0 keeps the f32-activation loop form.
 *
 * Constants: NB, the formats F0 and F1 (LT_QG_*), R columns a block, WARPS, K the reduction's length (a multiple of
 * the formats' units), NT the columns (flattened), EARLY (below). The kernel's expressions, as device functions: a(m, k) -> float;
 * w0(n), w1(n) -> the first byte of column n's weight row; store(m, n, acc0, acc1). */
enum { LT_QG_Q8_0, LT_QG_Q4_0, LT_QG_Q4_1, LT_QG_Q5_0, LT_QG_Q5_1, LT_QG_Q4_K, LT_QG_Q5_K, LT_QG_Q6_K };

/* The quantized activation row in shared memory: q[k], d[k / 32] (its scale), s[k / 16] (sum of q) */
struct lt_qgx {
  const signed char *q;
  const float *d;
  const int *s;
};

/* n 4-byte words from p, which is 2-byte aligned (every block size is even): aligned loads joined by funnel shifts;
 * the last one reads only the 2 bytes it needs, never past the data */
template <int N> static __device__ __forceinline__ void lt_qg_words(const unsigned char *p, unsigned *w) {
  const unsigned *b = (const unsigned *)((unsigned long long)p & ~3ull);
  if (((unsigned long long)p & 3) == 0) {
#pragma unroll
    for (int i = 0; i < N; i++) w[i] = b[i];
    return;
  }
  unsigned prev = b[0];
#pragma unroll
  for (int i = 0; i < N; i++) {
    const unsigned next = i + 1 < N ? b[i + 1] : (unsigned)*(const unsigned short *)(b + N);
    w[i] = __funnelshift_r(prev, next, 16);
    prev = next;
  }
}
static __device__ __forceinline__ float lt_qg_half(const unsigned char *p) {
  return lt_f16_to_f32(*(const unsigned short *)p);
}
static __device__ __forceinline__ int lt_qg_dp4(unsigned a, int b, int c) { return __dp4a((int)a, b, c); }
/* 4 bits (bit i of t at byte i) as the value 16 in each byte whose bit is set: q5's fifth bit */
static __device__ __forceinline__ unsigned lt_qg_bit4(unsigned t) { return ((t & 15u) * 0x00204081u & 0x01010101u) << 4; }
/* the 8 dot products of 16 bytes of weights with 16 int8 activations each (a: words w, x: 4 words) */
static __device__ __forceinline__ int lt_qg_dot16(const unsigned *w, const int4 x) {
  int s = 0;
  s = lt_qg_dp4(w[0], x.x, s);
  s = lt_qg_dp4(w[1], x.y, s);
  s = lt_qg_dp4(w[2], x.z, s);
  return lt_qg_dp4(w[3], x.w, s);
}
static __device__ __forceinline__ int4 lt_qg_x16(const lt_qgx &x, int e) { return *(const int4 *)(x.q + e); }

/* One format's unit u of a weight row (E elements) times the activations: its partial sum. */
template <int F> struct lt_qg;

template <> struct lt_qg<LT_QG_Q8_0> { /* {d; int8 q[32]}: unit = block */
  static constexpr int E = 32, BE = 32, BB = 34;
  static __device__ __forceinline__ float dot(const unsigned char *row, int u, const lt_qgx &x) {
    const unsigned char *b = row + u * BB;
    unsigned w[8];
    lt_qg_words<8>(b + 2, w);
    const int s = lt_qg_dot16(w, lt_qg_x16(x, u * 32)) + lt_qg_dot16(w + 4, lt_qg_x16(x, u * 32 + 16));
    return lt_qg_half(b) * x.d[u] * (float)s;
  }
};

/* A 32-element block u of {d; [m;] ...} whose elements 0..15 are the bytes lo, 16..31 hi: with a minimum m (MIN) d q +
 * m, else d (q - OFF) */
template <int MIN, int OFF>
static __device__ __forceinline__ float lt_qg_block32(const unsigned char *b, int u, const lt_qgx &x, const unsigned *lo,
                                                      const unsigned *hi) {
  const int s = lt_qg_dot16(lo, lt_qg_x16(x, u * 32)) + lt_qg_dot16(hi, lt_qg_x16(x, u * 32 + 16));
  const int xs = x.s[2 * u] + x.s[2 * u + 1];
  if (MIN) return x.d[u] * (lt_qg_half(b) * (float)s + lt_qg_half(b + 2) * (float)xs);
  return lt_qg_half(b) * x.d[u] * (float)(s - OFF * xs);
}

/* {d; [m;] nibbles[16]}: element j < 16 the low nibble of byte j, j >= 16 the high nibble of byte j - 16 */
template <int MIN> static __device__ __forceinline__ float lt_qg_q4(const unsigned char *b, int q_at, int u,
                                                                    const lt_qgx &x) {
  unsigned w[4], lo[4], hi[4];
  lt_qg_words<4>(b + q_at, w);
#pragma unroll
  for (int i = 0; i < 4; i++) lo[i] = w[i] & 0x0F0F0F0Fu, hi[i] = w[i] >> 4 & 0x0F0F0F0Fu;
  return lt_qg_block32<MIN, 8>(b, u, x, lo, hi);
}
template <> struct lt_qg<LT_QG_Q4_0> {
  static constexpr int E = 32, BE = 32, BB = 18;
  static __device__ __forceinline__ float dot(const unsigned char *row, int u, const lt_qgx &x) {
    return lt_qg_q4<0>(row + u * BB, 2, u, x);
  }
};
template <> struct lt_qg<LT_QG_Q4_1> {
  static constexpr int E = 32, BE = 32, BB = 20;
  static __device__ __forceinline__ float dot(const unsigned char *row, int u, const lt_qgx &x) {
    return lt_qg_q4<1>(row + u * BB, 4, u, x);
  }
};

/* {d; [m;] qh (32 fifth bits); nibbles[16]}: q4's layout with bit j of qh added as 16 */
template <int MIN> static __device__ __forceinline__ float lt_qg_q5(const unsigned char *b, int qh_at, int u,
                                                                    const lt_qgx &x) {
  unsigned w[4], qh[1], lo[4], hi[4];
  lt_qg_words<4>(b + qh_at + 4, w);
  lt_qg_words<1>(b + qh_at, qh);
#pragma unroll
  for (int i = 0; i < 4; i++) {
    lo[i] = (w[i] & 0x0F0F0F0Fu) | lt_qg_bit4(qh[0] >> (4 * i));
    hi[i] = (w[i] >> 4 & 0x0F0F0F0Fu) | lt_qg_bit4(qh[0] >> (16 + 4 * i));
  }
  return lt_qg_block32<MIN, 16>(b, u, x, lo, hi);
}
template <> struct lt_qg<LT_QG_Q5_0> {
  static constexpr int E = 32, BE = 32, BB = 22;
  static __device__ __forceinline__ float dot(const unsigned char *row, int u, const lt_qgx &x) {
    return lt_qg_q5<0>(row + u * BB, 2, u, x);
  }
};
template <> struct lt_qg<LT_QG_Q5_1> {
  static constexpr int E = 32, BE = 32, BB = 24;
  static __device__ __forceinline__ float dot(const unsigned char *row, int u, const lt_qgx &x) {
    return lt_qg_q5<1>(row + u * BB, 4, u, x);
  }
};

/* q4_k / q5_k: sub-block j's scale and minimum (6 bits each, packed in the 12 bytes after d and dmin) times d and
 * dmin, from the block's first 16 bytes h */
static __device__ __forceinline__ void lt_qg_kscale(uint4 h, int j, float *d, float *m) {
  const int sh = 8 * (j & 3);
  const unsigned lo = (h.y >> sh) & 255u, mid = (h.z >> sh) & 255u, hi = (h.w >> sh) & 255u;
  const int sc = j < 4 ? (int)(lo & 63u) : (int)((hi & 15u) | (lo >> 6) << 4);
  const int mn = j < 4 ? (int)(mid & 63u) : (int)((hi >> 4) | (mid >> 6) << 4);
  *d = lt_f16_to_f32((unsigned short)(h.x & 0xffffu)) * (float)sc;
  *m = lt_f16_to_f32((unsigned short)(h.x >> 16)) * (float)mn;
}
/* unit u of a K-quant row: block u / 8, 32-byte chunk c = (u / 2) % 4 of its nibbles, half hf = u % 2: 16 elements
 * of sub-block 2c (low nibbles, elements e0 ..) and 16 of sub-block 2c + 1 (high nibbles, e0 + 32 ..) */
template <int FIFTH> static __device__ __forceinline__ float lt_qg_qk(const unsigned char *row, int u, const lt_qgx &x) {
  const int blk = u >> 3, c = (u >> 1) & 3, hf = u & 1;
  const unsigned char *b = row + blk * (FIFTH ? 176 : 144);
  const uint4 h = *(const uint4 *)b, w = *(const uint4 *)(b + (FIFTH ? 48 : 16) + c * 32 + hf * 16);
  const unsigned wv[4] = {w.x, w.y, w.z, w.w};
  unsigned lo[4], hi[4];
#pragma unroll
  for (int i = 0; i < 4; i++) lo[i] = wv[i] & 0x0F0F0F0Fu, hi[i] = wv[i] >> 4 & 0x0F0F0F0Fu;
  if (FIFTH) { /* qh: byte l holds element l's fifth bit of sub-block j at bit j */
    const uint4 q = *(const uint4 *)(b + 16 + hf * 16);
    const unsigned qv[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      lo[i] |= (qv[i] >> (2 * c) & 0x01010101u) << 4;
      hi[i] |= (qv[i] >> (2 * c + 1) & 0x01010101u) << 4;
    }
  }
  const int e0 = blk * 256 + c * 64 + hf * 16, e1 = e0 + 32;
  const int s0 = lt_qg_dot16(lo, lt_qg_x16(x, e0)), s1 = lt_qg_dot16(hi, lt_qg_x16(x, e1));
  float d0, m0, d1, m1;
  lt_qg_kscale(h, 2 * c, &d0, &m0);
  lt_qg_kscale(h, 2 * c + 1, &d1, &m1);
  return x.d[e0 >> 5] * (d0 * (float)s0 - m0 * (float)x.s[e0 >> 4]) +
         x.d[e1 >> 5] * (d1 * (float)s1 - m1 * (float)x.s[e1 >> 4]);
}
template <> struct lt_qg<LT_QG_Q4_K> {
  static constexpr int E = 32, BE = 256, BB = 144;
  static __device__ __forceinline__ float dot(const unsigned char *row, int u, const lt_qgx &x) {
    return lt_qg_qk<0>(row, u, x);
  }
};
template <> struct lt_qg<LT_QG_Q5_K> {
  static constexpr int E = 32, BE = 256, BB = 176;
  static __device__ __forceinline__ float dot(const unsigned char *row, int u, const lt_qgx &x) {
    return lt_qg_qk<1>(row, u, x);
  }
};

/* q6_k {ql[128]; qh[64]; int8 scales[16]; d}: unit u = half hh of block u / 4, 16 positions l from l0: the four runs
 * of 16 elements 128 hh + 32 k + l0 .. (k < 4), each with its own scale */
template <> struct lt_qg<LT_QG_Q6_K> {
  static constexpr int E = 64, BE = 256, BB = 210;
  static __device__ __forceinline__ float dot(const unsigned char *row, int u, const lt_qgx &x) {
    const int blk = u >> 2, hh = (u >> 1) & 1, l0 = (u & 1) * 16;
    const unsigned char *b = row + blk * BB;
    unsigned la[4], lb[4], qh[4];
    lt_qg_words<4>(b + hh * 64 + l0, la);
    lt_qg_words<4>(b + hh * 64 + 32 + l0, lb);
    lt_qg_words<4>(b + 128 + hh * 32 + l0, qh);
    const signed char *sc = (const signed char *)(b + 192 + hh * 8 + (l0 >> 4));
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const int e = blk * 256 + hh * 128 + 32 * k + l0;
      const unsigned *l = (k & 1) ? lb : la;
      unsigned q[4];
#pragma unroll
      for (int i = 0; i < 4; i++) q[i] = (l[i] >> (4 * (k >> 1)) & 0x0F0F0F0Fu) | (qh[i] >> (2 * k) & 0x03030303u) << 4;
      acc += x.d[e >> 5] * (float)sc[2 * k] * (float)(lt_qg_dot16(q, lt_qg_x16(x, e)) - 32 * x.s[e >> 4]);
    }
    return lt_qg_half(b + 208) * acc;
  }
};

/* Elements e .. e + 7 of the row (v), quantized: 4 consecutive lanes hold a group of 32 */
static __device__ __forceinline__ void lt_qg_put8(const float *v, int e, signed char *q, float *d, int *s) {
  const unsigned lane = threadIdx.x & 31u, mask = 0xFu << (lane & 28u);
  float a = 0.f;
#pragma unroll
  for (int j = 0; j < 8; j++) a = fmaxf(a, fabsf(v[j]));
  a = fmaxf(a, __shfl_xor_sync(mask, a, 1));
  a = fmaxf(a, __shfl_xor_sync(mask, a, 2));
  const float id = a > 0.f ? 127.f / a : 0.f;
  int qi[8], sum = 0;
#pragma unroll
  for (int j = 0; j < 8; j++) qi[j] = __float2int_rn(v[j] * id), sum += qi[j];
  lt_u2 p;
  p.x = (unsigned)(qi[0] & 255) | (unsigned)(qi[1] & 255) << 8 | (unsigned)(qi[2] & 255) << 16 | (unsigned)qi[3] << 24;
  p.y = (unsigned)(qi[4] & 255) | (unsigned)(qi[5] & 255) << 8 | (unsigned)(qi[6] & 255) << 16 | (unsigned)qi[7] << 24;
  *(lt_u2 *)(q + e) = p;
  sum += __shfl_xor_sync(mask, sum, 1);
  if (!(lane & 1u)) s[e >> 4] = sum;
  if (!(lane & 3u)) d[e >> 5] = a / 127.f;
}

/* The block's weight rows into L2 (one bulk prefetch a row, sm_90) while the kernel before this one finishes: they do
 * not depend on it. Rows of a multiple of 16 bytes only (the bulk copy's unit); others are read when needed. */
template <int R, i64 NT, i64 ROWB, typename FW>
static __device__ __forceinline__ void lt_qg_prefetch(const i64 n0, FW w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (ROWB % 16 == 0 && ROWB < (1ll << 20)) {
    const int r = (int)threadIdx.x;
    if (r < R && n0 + r < NT)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(w(n0 + r)), "r"((unsigned)ROWB) : "memory");
  }
#endif
}

/* EARLY: the kernel prefetches its weights, then waits for the kernel before it (lt_pdl), which the renderer then
 * leaves out of the kernel's prologue (KKernel.late_pdl) */
template <int NB, int F0, int F1, int R, int WARPS, i64 K, i64 NT, bool EARLY, typename FA, typename FW0,
          typename FW1, typename FS>
static __device__ __forceinline__ void lt_qgemv(const i64 lt_M, FA a, FW0 w0, FW1 w1, FS store) {
  static_assert(K % 256 == 0 || (lt_qg<F0>::BE == 32 && lt_qg<F1>::BE == 32 && K % 32 == 0), "whole blocks");
  constexpr int T = WARPS * 32;
  __shared__ __align__(16) signed char lt_xq[K];
  __shared__ float lt_xd[K / 32];
  __shared__ int lt_xs[K / 16];
  __shared__ float lt_red[WARPS][NB][R];
  /* the rows fastest: the blocks that read the same weight rows run together, so all but the first find them in L2 */
  const i64 rows = lt_M > 0 ? lt_M : 1, m = (i64)blockIdx.x % rows, n0 = (i64)blockIdx.x / rows * R;
  if constexpr (EARLY) { /* by the columns' first row (the other rows' blocks read the same weights) */
    if (m == 0) lt_qg_prefetch<R, NT, K / lt_qg<F0>::BE * lt_qg<F0>::BB>(n0, w0);
    if constexpr (NB > 1)
      if (m == 0) lt_qg_prefetch<R, NT, K / lt_qg<F1>::BE * lt_qg<F1>::BB>(n0, w1);
    lt_pdl();
  }
  if (lt_M < 1 || n0 >= NT) return; /* the whole block: the barriers below see every thread or none */
  const int tid = threadIdx.x;
  for (int e = tid * 8; e < K; e += T * 8) {
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; j++) v[j] = a(m, (i64)(e + j));
    lt_qg_put8(v, e, lt_xq, lt_xd, lt_xs);
  }
  __syncthreads();
  const lt_qgx x = {lt_xq, lt_xd, lt_xs};
  float acc[NB][R];
#pragma unroll
  for (int b = 0; b < NB; b++)
#pragma unroll
    for (int r = 0; r < R; r++) acc[b][r] = 0.f;
  /* both weights' units cover the same elements only when their unit sizes agree; otherwise each walks its own */
  constexpr int U0 = (int)(K / lt_qg<F0>::E), U1 = (int)(K / lt_qg<F1>::E);
  for (int u = tid; u < U0; u += T)
#pragma unroll
    for (int r = 0; r < R; r++)
      if (n0 + r < NT) acc[0][r] += lt_qg<F0>::dot(w0(n0 + r), u, x);
  if constexpr (NB > 1)
    for (int u = tid; u < U1; u += T)
#pragma unroll
      for (int r = 0; r < R; r++)
        if (n0 + r < NT) acc[NB - 1][r] += lt_qg<F1>::dot(w1(n0 + r), u, x);
#pragma unroll
  for (int b = 0; b < NB; b++)
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[b][r] += __shfl_xor_sync(0xffffffffu, acc[b][r], o);
      if ((tid & 31) == 0) lt_red[tid >> 5][b][r] = acc[b][r];
    }
  __syncthreads();
  if (tid < R && n0 + tid < NT) {
    float s[2] = {0.f, 0.f};
#pragma unroll
    for (int b = 0; b < NB; b++)
      for (int i = 0; i < WARPS; i++) s[b] += lt_red[i][b][tid];
    store(m, n0 + tid, s[0], s[1]);
  }
}
