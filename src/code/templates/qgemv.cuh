/* A decode GEMV over quantized weights on integer tensor cores: one KS_MMA statement of role MMA_QGEMV
 * (render_qgemv.c), the few-rows form of a kernel whose blocked variant is a tensor-core GEMM.
 *
 * y[m][n] = sum_k A[m][k] * W_b[n][k] for NB = 1 or 2 weights (gate and up) in GGUF blocks. A block of W warps takes
 * one row m and 16 consecutive columns n (blocks m fastest); its warps split k into steps of 256 elements (warp w takes
 * steps w, w + W, ...) and meet in shared memory at the end, added in warp order (the same bits whatever else runs).
 *
 * Per step a warp first issues the loads of its 16 weight rows' blocks, then computes the step's 256 activations
 * (A's expression, 8 a lane) and writes them as integers X = round(a / s), s = max|a| / (2^22 - 1), split into three
 * signed 8-bit digits (X = 65536 h + 256 m + l) into its shared memory: 24-bit activations, so the sums keep about
 * f32's accuracy, where 8-bit ones (llama.cpp's; this template's until session 22) lose up to 1e-2 of the largest
 * output. Then one
 * mma.m16n8k32 (int8, exact int32 sums) per 32 weight elements: A = the weights' small integers of 16 rows (lane (g,
 * t) holds rows g and g + 8, 8 elements each), B = the digits (columns 0, 1, 2 = h, m, l), so C's columns are the
 * three digits' sums, which the lanes weight by 65536, 256 and 1 at the end. Each unit of 32 elements gets its
 * scales there: K-quants add scale x sums in int32 over a 256-element block and convert once, the 32-element formats
 * convert every unit; minimums (q4_1, q5_1, q4_K, q5_K) take the unit's sum of X. Offsets (q4_0's 8, q5_0's 16,
 * q6_K's 32) are subtracted from the weight bytes, which then are signed.
 *
 * Which elements of a unit a lane supplies is free (both operands use the same k slots): formats whose byte j holds
 * elements j and 16 + j (q4_0, q4_1, q5_0, q5_1) give lane t elements 4t.. and 16 + 4t.., the others 8t..8t + 7.
 *
 * Constants: NB, the formats F0 and F1 (LT_QG_*), W warps a block, K the reduction's length (a multiple of 32, of
 * 256 for K-quants), NT the columns (flattened), EARLY (below). The kernel's expressions, as device functions:
 * a(m, k) -> float; w0(n), w1(n) -> the first byte of column n's weight row; store(m, n, acc0, acc1). */
enum { LT_QG_Q8_0, LT_QG_Q4_0, LT_QG_Q4_1, LT_QG_Q5_0, LT_QG_Q5_1, LT_QG_Q4_K, LT_QG_Q5_K, LT_QG_Q6_K };

/* One warp's step of activations in shared memory: dg[unit][digit][32] (digit 3 unused), X's sum per unit, the scale */
struct lt_qgx {
  const signed char *dg;
  const int *sx;
  float s;
};
/* A lane's sums: per weight row (g, g + 8) its two C columns (2t, 2t + 1) weighted later by the digits' place, and the
 * minimums' term (a lane with t = 0 holds the row's) */
struct lt_qga {
  float c[2][2], mn[2];
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
/* 4 bits (bit i of t at byte i) as the value 16 in each byte whose bit is set: q5's fifth bit */
static __device__ __forceinline__ unsigned lt_qg_bit4(unsigned t) { return ((t & 15u) * 0x00204081u & 0x01010101u) << 4; }
/* each byte (at most 127) less o, as a signed byte: no byte borrows from the next */
static __device__ __forceinline__ unsigned lt_qg_less(unsigned w, unsigned o) {
  return ((w | 0x80808080u) - o * 0x01010101u) ^ 0x80808080u;
}
/* c = A (16 x 32 bytes of weights, signed or not) x B (32 x 8 signed digits), exact in int32 */
template <bool SIGNED>
static __device__ __forceinline__ void lt_qg_mma(int *c, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                                 unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (SIGNED)
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%10,%10,%10};"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0));
  else
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%10,%10,%10,%10};"
                 : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0));
#elif defined(LT_QG_HOST_MMA)
  LT_QG_HOST_MMA(SIGNED, c, a0, a1, a2, a3, b0, b1); /* test_qgemv_host's warp emulation */
#else
  __trap(); /* integer mma needs sm_80 */
#endif
}
/* unit j's digits for lane (g, t): elements 8t .. 8t + 7 (SPLIT: 4t .. 4t + 3 and 16 + 4t .. 16 + 4t + 3) */
template <bool SPLIT>
static __device__ __forceinline__ void lt_qg_b(const lt_qgx &x, int j, unsigned *b) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const signed char *d = x.dg + j * 128 + (g & 3) * 32;
  if constexpr (SPLIT) {
    b[0] = *(const unsigned *)(d + 4 * t);
    b[1] = *(const unsigned *)(d + 16 + 4 * t);
  } else {
    const uint2 v = *(const uint2 *)(d + 8 * t);
    b[0] = v.x, b[1] = v.y;
  }
}
/* A unit's integer sums times each row's scale (ds: s x the weight's scale) into the float sums */
static __device__ __forceinline__ void lt_qg_fold(lt_qga &acc, const int *c, float ds0, float ds1) {
  acc.c[0][0] = fmaf(ds0, (float)c[0], acc.c[0][0]);
  acc.c[0][1] = fmaf(ds0, (float)c[1], acc.c[0][1]);
  acc.c[1][0] = fmaf(ds1, (float)c[2], acc.c[1][0]);
  acc.c[1][1] = fmaf(ds1, (float)c[3], acc.c[1][1]);
}

/* Unit j's operands: the weight bytes of rows g (a) and g + 8 (b) from format Q's loads, and the digits (bx) */
template <class Q, bool SPLIT>
static __device__ __forceinline__ void lt_qg_unit(const typename Q::V &va, const typename Q::V &vb, const lt_qgx &x,
                                                  int j, unsigned *a, unsigned *b, unsigned *bx) {
  Q::bytes(va, j, a);
  Q::bytes(vb, j, b);
  lt_qg_b<SPLIT>(x, j, bx);
}

/* One format's part of a step: load(row, step, nunits, v) issues a weight row's loads for the step (units of 32
 * elements below nunits), run(va, vb, x, nunits, acc) multiplies rows g and g + 8 with the step's digits. */
template <int F> struct lt_qg;

/* The 32-element formats: a unit is a block; d at 0, [m at 2,] [qh,] the quants at Q (B bytes) */
template <int F, int B, int Q, bool MIN, bool FIFTH, int OFF> struct lt_qg32 {
  static constexpr int BE = 32, BB = B;
  static constexpr bool SUMS = MIN; /* reads each unit's sum of X */
  struct V {
    unsigned q[8][2], h[8];
    float d[8], m[8];
  };
  static __device__ __forceinline__ void load(const unsigned char *row, int step, int nunits, V &v) {
    const int t = threadIdx.x & 3;
#pragma unroll
    for (int j = 0; j < 8; j++) {
      if (j >= nunits) break;
      const unsigned char *b = row + (long long)(step * 8 + j) * B;
      if constexpr (F == LT_QG_Q8_0) {
        lt_qg_words<2>(b + 2 + 8 * t, v.q[j]);
      } else {
        unsigned w[1];
        lt_qg_words<1>(b + Q + 4 * t, w);
        v.q[j][0] = w[0];
        if constexpr (FIFTH) {
          unsigned qh[1];
          lt_qg_words<1>(b + Q - 4, qh);
          v.h[j] = qh[0];
        }
      }
      v.d[j] = lt_qg_half(b);
      if constexpr (MIN) v.m[j] = lt_qg_half(b + 2);
    }
  }
  /* the unit's weight bytes for this lane: a[0] elements of the first k slots, a[1] of the second */
  static __device__ __forceinline__ void bytes(const V &v, int j, unsigned *a) {
    const int t = threadIdx.x & 3;
    if constexpr (F == LT_QG_Q8_0) {
      a[0] = v.q[j][0], a[1] = v.q[j][1];
    } else {
      unsigned lo = v.q[j][0] & 0x0F0F0F0Fu, hi = v.q[j][0] >> 4 & 0x0F0F0F0Fu;
      if constexpr (FIFTH) lo |= lt_qg_bit4(v.h[j] >> (4 * t)), hi |= lt_qg_bit4(v.h[j] >> (16 + 4 * t));
      if constexpr (OFF > 0) lo = lt_qg_less(lo, OFF), hi = lt_qg_less(hi, OFF);
      a[0] = lo, a[1] = hi;
    }
  }
  static __device__ __forceinline__ void run(const V &va, const V &vb, const lt_qgx &x, int nunits, lt_qga &acc) {
#pragma unroll
    for (int j = 0; j < 8; j++) {
      if (j >= nunits) break;
      unsigned a[2], b2[2], bx[2];
      lt_qg_unit<lt_qg32, F != LT_QG_Q8_0>(va, vb, x, j, a, b2, bx);
      int c[4];
      lt_qg_mma<F == LT_QG_Q8_0 || OFF != 0>(c, a[0], b2[0], a[1], b2[1], bx[0], bx[1]);
      lt_qg_fold(acc, c, x.s * va.d[j], x.s * vb.d[j]);
      if constexpr (MIN) {
        const float sx = x.s * (float)x.sx[j];
        acc.mn[0] = fmaf(va.m[j], sx, acc.mn[0]);
        acc.mn[1] = fmaf(vb.m[j], sx, acc.mn[1]);
      }
    }
  }
};
template <> struct lt_qg<LT_QG_Q8_0> : lt_qg32<LT_QG_Q8_0, 34, 2, false, false, 0> {};
template <> struct lt_qg<LT_QG_Q4_0> : lt_qg32<LT_QG_Q4_0, 18, 2, false, false, 8> {};
template <> struct lt_qg<LT_QG_Q4_1> : lt_qg32<LT_QG_Q4_1, 20, 4, true, false, 0> {};
template <> struct lt_qg<LT_QG_Q5_0> : lt_qg32<LT_QG_Q5_0, 22, 6, false, true, 16> {};
template <> struct lt_qg<LT_QG_Q5_1> : lt_qg32<LT_QG_Q5_1, 24, 8, true, true, 0> {};

/* The K-quants' sums of a 256-element block, laid out as C: int32 sums of scale x unit sum (at most about 2^27),
 * folded once (lt_qg_fold) */
struct lt_qgk {
  int i[4];
};
static __device__ __forceinline__ void lt_qgk_add(lt_qgk &k, const int *c, int sc0, int sc1) {
  k.i[0] += sc0 * c[0], k.i[1] += sc0 * c[1], k.i[2] += sc1 * c[2], k.i[3] += sc1 * c[3];
}

/* q4_K / q5_K {d, dmin; 12 bytes of 6-bit scales and minimums; [qh[32]]; qs[128]}: sub-block j = 2c + hf is the low
 * (hf = 0) or high nibbles of the 32-byte chunk c; q5_K's byte l of qh holds element l's fifth bit of sub-block j at
 * bit j */
template <bool FIFTH> struct lt_qgk4 {
  static constexpr int BE = 256, BB = FIFTH ? 176 : 144;
  static constexpr bool SUMS = true;
  struct V {
    uint4 h;
    uint2 q[4], qh;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, int step, int, V &v) {
    const int t = threadIdx.x & 3;
    const unsigned char *b = row + (long long)step * BB;
    v.h = *(const uint4 *)b;
#pragma unroll
    for (int c = 0; c < 4; c++) v.q[c] = *(const uint2 *)(b + (FIFTH ? 48 : 16) + 32 * c + 8 * t);
    if constexpr (FIFTH) v.qh = *(const uint2 *)(b + 16 + 8 * t);
  }
  /* scales (s[0]: sub-blocks 0-3, s[1]: 4-7) and minimums as bytes */
  static __device__ __forceinline__ void scales(const uint4 h, unsigned *s, unsigned *mn) {
    s[0] = h.y & 0x3F3F3F3Fu, s[1] = (h.w & 0x0F0F0F0Fu) | (h.y >> 2 & 0x30303030u);
    mn[0] = h.z & 0x3F3F3F3Fu, mn[1] = (h.w >> 4 & 0x0F0F0F0Fu) | (h.z >> 2 & 0x30303030u);
  }
  static __device__ __forceinline__ void bytes(const V &v, int j, unsigned *a) {
    const int c = j >> 1, sh = 4 * (j & 1);
    a[0] = v.q[c].x >> sh & 0x0F0F0F0Fu, a[1] = v.q[c].y >> sh & 0x0F0F0F0Fu;
    if constexpr (FIFTH) a[0] |= (v.qh.x >> j & 0x01010101u) << 4, a[1] |= (v.qh.y >> j & 0x01010101u) << 4;
  }
  static __device__ __forceinline__ void run(const V &va, const V &vb, const lt_qgx &x, int, lt_qga &acc) {
    unsigned sa[2], ma[2], sb[2], mb[2];
    scales(va.h, sa, ma);
    scales(vb.h, sb, mb);
    lt_qgk k = {{0, 0, 0, 0}};
    float mn0 = 0.f, mn1 = 0.f;
#pragma unroll
    for (int j = 0; j < 8; j++) {
      unsigned a[2], b2[2], bx[2];
      lt_qg_unit<lt_qgk4, false>(va, vb, x, j, a, b2, bx);
      int c[4];
      lt_qg_mma<false>(c, a[0], b2[0], a[1], b2[1], bx[0], bx[1]);
      const int sh = 8 * (j & 3);
      lt_qgk_add(k, c, (int)(sa[j >> 2] >> sh & 255u), (int)(sb[j >> 2] >> sh & 255u));
      const float sx = (float)x.sx[j];
      mn0 = fmaf((float)(ma[j >> 2] >> sh & 255u), sx, mn0);
      mn1 = fmaf((float)(mb[j >> 2] >> sh & 255u), sx, mn1);
    }
    const float d0 = lt_f16_to_f32((unsigned short)(va.h.x & 0xffffu)), m0 = lt_f16_to_f32((unsigned short)(va.h.x >> 16));
    const float d1 = lt_f16_to_f32((unsigned short)(vb.h.x & 0xffffu)), m1 = lt_f16_to_f32((unsigned short)(vb.h.x >> 16));
    lt_qg_fold(acc, k.i, x.s * d0, x.s * d1);
    acc.mn[0] = fmaf(-x.s * m0, mn0, acc.mn[0]);
    acc.mn[1] = fmaf(-x.s * m1, mn1, acc.mn[1]);
  }
};
template <> struct lt_qg<LT_QG_Q4_K> : lt_qgk4<false> {};
template <> struct lt_qg<LT_QG_Q5_K> : lt_qgk4<true> {};

/* q6_K {ql[128]; qh[64]; int8 scales[16]; d} (2-byte aligned): unit j = 4 hh + k is elements 128 hh + 32 k + l, l < 32,
 * low 4 bits the nibble k / 2 of ql[64 hh + 32 (k % 2) + l], high 2 bits bits 2k of qh[128 + 32 hh + l]; each 16 of
 * l has its own scale, so a unit takes two MMAs (lanes t < 2 hold l < 16) */
template <> struct lt_qg<LT_QG_Q6_K> {
  static constexpr int BE = 256, BB = 210;
  static constexpr bool SUMS = false;
  struct V {
    unsigned ql[4][2], qh[2][2], sc[4];
    float d;
  };
  static __device__ __forceinline__ void load(const unsigned char *row, int step, int, V &v) {
    const int t = threadIdx.x & 3;
    const unsigned char *b = row + (long long)step * BB;
#pragma unroll
    for (int i = 0; i < 4; i++) lt_qg_words<2>(b + 64 * (i >> 1) + 32 * (i & 1) + 8 * t, v.ql[i]);
#pragma unroll
    for (int hh = 0; hh < 2; hh++) lt_qg_words<2>(b + 128 + 32 * hh + 8 * t, v.qh[hh]);
    lt_qg_words<4>(b + 192, v.sc);
    v.d = lt_qg_half(b + 208);
  }
  static __device__ __forceinline__ void bytes(const V &v, int j, unsigned *a) {
    const int hh = j >> 2, k = j & 3;
    const unsigned *l = v.ql[2 * hh + (k & 1)];
#pragma unroll
    for (int i = 0; i < 2; i++)
      a[i] = lt_qg_less((l[i] >> (4 * (k >> 1)) & 0x0F0F0F0Fu) | (v.qh[hh][i] >> (2 * k) & 0x03030303u) << 4, 32);
  }
  static __device__ __forceinline__ int scale(const V &v, int s) { return (int)(signed char)(v.sc[s >> 2] >> (8 * (s & 3))); }
  static __device__ __forceinline__ void run(const V &va, const V &vb, const lt_qgx &x, int, lt_qga &acc) {
    const bool first = (threadIdx.x & 3) < 2;
    lt_qgk k = {{0, 0, 0, 0}};
#pragma unroll
    for (int j = 0; j < 8; j++) {
      unsigned a[2], b2[2], bx[2];
      lt_qg_unit<lt_qg, false>(va, vb, x, j, a, b2, bx);
      const int s = 8 * (j >> 2) + 2 * (j & 3);
#pragma unroll
      for (int half = 0; half < 2; half++) {
        const bool mine = first == (half == 0);
        int c[4];
        lt_qg_mma<true>(c, mine ? a[0] : 0u, mine ? b2[0] : 0u, mine ? a[1] : 0u, mine ? b2[1] : 0u, bx[0], bx[1]);
        lt_qgk_add(k, c, scale(va, s + half), scale(vb, s + half));
      }
    }
    lt_qg_fold(acc, k.i, x.s * va.d, x.s * vb.d);
  }
};

/* The step's 256 activations (elements e0 + 8 lane ..): their digits and (SUMS) each unit's sum of X into this warp's
 * shared memory */
template <i64 K, bool SUMS, typename FA>
static __device__ __forceinline__ float lt_qg_digits(FA a, i64 m, int e0, signed char *dg, int *sx) {
  const int lane = threadIdx.x & 31;
  const int e = e0 + 8 * lane;
  float v[8], mx = 0.f;
  bool finite = true;
#pragma unroll
  for (int j = 0; j < 8; j++) {
    v[j] = e < K ? a(m, (i64)(e + j)) : 0.f;
    mx = fmaxf(mx, fabsf(v[j]));
    finite &= fabsf(v[j]) <= 3.402823466e38f; /* false for NaN and Inf */
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  /* X + 0x808080 from the bits of a x (2^22 - 1) / max + 1.5 x 2^23 (round to nearest, |X| < 2^22): then byte i of
   * it, less 128, is digit i of X */
  const float inv = mx > 0.f ? 4194303.f / mx : 0.f;
  unsigned y[8];
#pragma unroll
  for (int j = 0; j < 8; j++) y[j] = (unsigned)__float_as_int(fmaf(v[j], inv, 12582912.f)) - (0x4B400000u - 0x808080u);
  signed char *d = dg + (lane >> 2) * 128 + (lane & 3) * 8;
#pragma unroll
  for (int i = 0; i < 3; i++) { /* digit row i: byte 2 - i of y */
    const unsigned sel = (unsigned)(2 - i) | (unsigned)(6 - i) << 4;
    uint2 p;
    p.x = __byte_perm(__byte_perm(y[0], y[1], sel), __byte_perm(y[2], y[3], sel), 0x5410) ^ 0x80808080u;
    p.y = __byte_perm(__byte_perm(y[4], y[5], sel), __byte_perm(y[6], y[7], sel), 0x5410) ^ 0x80808080u;
    *(uint2 *)(d + 32 * i) = p;
  }
  if constexpr (SUMS) {
    int sum = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) sum += (int)y[j] - 0x808080;
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    if (!(lane & 3)) sx[lane >> 2] = sum;
  }
  /* a NaN or Inf among the step's activations makes the scale, and so every output of the row, NaN (as f32's sums
   * would be), not a finite value from their meaningless digits */
  return __all_sync(0xffffffffu, finite) ? mx / 4194303.f : __int_as_float(0x7fc00000);
}

/* The block's weight rows into L2 (one bulk prefetch a row, sm_90) while the kernel before this one finishes: they do
 * not depend on it. Rows of a multiple of 16 bytes only (the bulk copy's unit); others are read when needed. */
template <i64 NT, i64 ROWB, typename FW>
static __device__ __forceinline__ void lt_qg_prefetch(const i64 n0, FW w) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (ROWB % 16 == 0 && ROWB < (1ll << 20)) {
    const int r = (int)threadIdx.x;
    if (r < 16 && n0 + r < NT)
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(w(n0 + r)), "r"((unsigned)ROWB) : "memory");
  }
#endif
}

/* EARLY: the kernel prefetches its weights, then waits for the kernel before it (lt_pdl), which the renderer then
 * leaves out of the kernel's prologue (KKernel.late_pdl) */
template <int NB, int F0, int F1, int W, i64 K, i64 NT, bool EARLY, typename FA, typename FW0, typename FW1,
          typename FS>
static __device__ __forceinline__ void lt_qgemv(const i64 lt_M, FA a, FW0 w0, FW1 w1, FS store) {
  static_assert(K % 256 == 0 || (lt_qg<F0>::BE == 32 && lt_qg<F1>::BE == 32 && K % 32 == 0), "whole blocks");
  __shared__ __align__(16) signed char lt_dg[W][8 * 128];
  __shared__ int lt_sx[W][8];
  __shared__ float lt_red[W][NB][16];
  /* the rows fastest: the blocks that read the same weight rows run together, so all but the first find them in L2 */
  const i64 rows = lt_M > 0 ? lt_M : 1, m = (i64)blockIdx.x % rows, n0 = (i64)blockIdx.x / rows * 16;
  if constexpr (EARLY) { /* by the columns' first row (the other rows' blocks read the same weights) */
    if (m == 0) lt_qg_prefetch<NT, K / lt_qg<F0>::BE * lt_qg<F0>::BB>(n0, w0);
    if constexpr (NB > 1)
      if (m == 0) lt_qg_prefetch<NT, K / lt_qg<F1>::BE * lt_qg<F1>::BB>(n0, w1);
    lt_pdl();
  }
  if (lt_M < 1 || n0 >= NT) return; /* the whole block: the barrier below sees every thread or none */
  const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  /* columns past the end read the last one; their results are dropped */
  const i64 ra = n0 + g < NT ? n0 + g : NT - 1, rb = n0 + g + 8 < NT ? n0 + g + 8 : NT - 1;
  const unsigned char *p0a = w0(ra), *p0b = w0(rb), *p1a = w1(ra), *p1b = w1(rb);
  lt_qga acc[NB];
#pragma unroll
  for (int b = 0; b < NB; b++) acc[b] = lt_qga{{{0.f, 0.f}, {0.f, 0.f}}, {0.f, 0.f}};
  constexpr int STEPS = (int)((K + 255) / 256);
  for (int st = wp; st < STEPS; st += W) {
    const int nunits = K - st * 256 >= 256 ? 8 : (int)(K - st * 256) / 32;
    typename lt_qg<F0>::V v0a, v0b;
    lt_qg<F0>::load(p0a, st, nunits, v0a);
    lt_qg<F0>::load(p0b, st, nunits, v0b);
    typename lt_qg<F1>::V v1a, v1b;
    if constexpr (NB > 1) {
      lt_qg<F1>::load(p1a, st, nunits, v1a);
      lt_qg<F1>::load(p1b, st, nunits, v1b);
    }
    __syncwarp(); /* the step before has read the digits */
    const float s = lt_qg_digits<K, lt_qg<F0>::SUMS || lt_qg<F1>::SUMS>(a, m, st * 256, lt_dg[wp], lt_sx[wp]);
    __syncwarp();
    const lt_qgx x = {lt_dg[wp], lt_sx[wp], s};
    lt_qg<F0>::run(v0a, v0b, x, nunits, acc[0]);
    if constexpr (NB > 1) lt_qg<F1>::run(v1a, v1b, x, nunits, acc[NB - 1]);
  }
  /* C's columns 0, 1, 2 are the digits h, m, l: lane t = 0 holds h and m, t = 1 holds l */
#pragma unroll
  for (int b = 0; b < NB; b++)
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float v = t == 0 ? fmaf(acc[b].c[r][0], 65536.f, fmaf(acc[b].c[r][1], 256.f, acc[b].mn[r]))
                       : t == 1 ? acc[b].c[r][0] : 0.f;
      v += __shfl_xor_sync(0xffffffffu, v, 1);
      v += __shfl_xor_sync(0xffffffffu, v, 2);
      if (t == 0) lt_red[wp][b][g + 8 * r] = v;
    }
  __syncthreads();
  const int tid = threadIdx.x;
  if (tid < 16 && n0 + tid < NT) {
    float s[2] = {0.f, 0.f};
#pragma unroll
    for (int b = 0; b < NB; b++)
      for (int i = 0; i < W; i++) s[b] += lt_red[i][b][tid];
    store(m, n0 + tid, s[0], s[1]);
  }
}
