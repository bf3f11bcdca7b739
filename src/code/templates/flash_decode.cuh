/* Flash-decoding on CUDA cores (f32): one KS_FLASH statement with decode = 1 (render_flash_decode.c).
 *
 * A block of 4 warps takes one query row, RW heads that read the same keys and values (a grouped-query
 * attention's group; KFlash.share) and one chunk of the keys, which it walks in tiles of 32. Per tile:
 * each thread first loads the values it will need for P x V (so they are in flight with the keys); the
 * warps score the keys, a key's dot product spread over LK lanes (coalesced loads of a key row, the
 * row's q held in registers) and summed with shuffles, each key read once for all the block's heads; a
 * warp per head folds the tile into an online softmax (running maximum, sum, and the factor that
 * rescales the outputs); then each thread adds its keys' p x v to its column's outputs. A block with the
 * row's only chunk divides and stores. Otherwise it leaves (max, sum, outputs) per head in the scratch
 * and counts itself on the row's counter; the last block to arrive resets the counter and merges the
 * chunks: a warp per head turns the chunks' maxima and sums into weights, then every thread takes a column
 * and every (128 / W)-th chunk, and the phases' sums are added in a fixed order (the same sums whichever
 * block is last).
 *
 * Constants: D the head dimension (<= 128), W the value width (<= 128), RW heads per block (<= 8), GB
 * blocks of heads per row, COUNTER_WORDS the words of row counters at the start of the scratch,
 * HAS_TLAST whether keys end at a causal mask. The kernel's expressions, as device functions of the
 * block's row-and-heads index rb (= blockIdx.x / chunks), the head r of the block, key t, element d,
 * value column cc:
 *   q(rb, r, d), k(rb, t, d), v(rb, cc, t) -> float; tlast(rb) -> i64, the last key row rb sees;
 *   score(rb, r, t, s) -> float, the score of dot product s; store(rb, r, cc, o) stores output o. */
#define LT_FD_TILE 32       /* keys per tile: one per lane in the softmax step */
#define LT_FD_MAX_CHUNKS 64 /* chunks per row (kernel/lower_flash.c): two per lane in the merge */

static constexpr __host__ __device__ int lt_pow2_at_least(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

/* Adds the values v[0..N) of every thread of phase ph = 1 .. NPH - 1 (column col) into those of phase 0's
 * thread of the same column, in phase order, through shared memory; threads of phase NPH and up (when
 * COLS * NPH < 128) take no part. Every thread of the block calls it; a barrier must separate two calls of one
 * instantiation (they share the shared array). */
template <int NPH, int N, int COLS>
static __device__ __forceinline__ void lt_fd_phases_into_first(float (&lt_v)[N], const int lt_ph, const int lt_col) {
  if constexpr (NPH > 1) {
    __shared__ float lt_red[NPH - 1][N][COLS];
    if (lt_ph > 0 && lt_ph < NPH)
#pragma unroll
      for (int lt_r = 0; lt_r < N; lt_r++) lt_red[lt_ph - 1][lt_r][lt_col] = lt_v[lt_r];
    __syncthreads();
    if (lt_ph == 0)
      for (int lt_x = 0; lt_x < NPH - 1; lt_x++)
#pragma unroll
        for (int lt_r = 0; lt_r < N; lt_r++) lt_v[lt_r] += lt_red[lt_x][lt_r][lt_col];
  }
}

/* The end of a block's work: lt_o holds, in the threads tid < W, the block's unnormalized outputs of column tid for
 * its RW heads, lt_smax and lt_ssum (shared) each head's running maximum and sum. A row with one chunk divides and
 * stores; otherwise the block leaves its state in the scratch and the last block of the row merges the chunks.
 * Every thread of the block calls it. */
template <int W, int RW, int COUNTER_WORDS, class ST>
static __device__ __forceinline__ void lt_fd_finish(const float (&lt_o)[RW], const float *lt_smax, const float *lt_ssum,
                                                    const i64 lt_C, const i64 lt_rb, unsigned int *lt_scratch,
                                                    const ST &lt_fstore) {
  constexpr int NPH = 128 / W, STRIDE = RW * (W + 2);
  const float lt_ninf = -__int_as_float(0x7f800000);
  const int lt_tid = threadIdx.x, lt_lane = lt_tid & 31, lt_warp = lt_tid >> 5;
  const int lt_col = lt_tid % W, lt_ph = lt_tid / W;
  if (lt_C == 1) {
    if (lt_tid < W) {
#pragma unroll
      for (int lt_r = 0; lt_r < RW; lt_r++) lt_fstore(lt_rb, lt_r, (i64)lt_tid, lt_o[lt_r] / lt_ssum[lt_r]);
    }
  } else {
    float *lt_part = (float *)(lt_scratch + COUNTER_WORDS); /* after the row counters */
    float *lt_mine = lt_part + (i64)blockIdx.x * STRIDE;
    if (lt_tid < W)
#pragma unroll
      for (int lt_r = 0; lt_r < RW; lt_r++) __stcg(&lt_mine[lt_r * (W + 2) + 2 + lt_tid], lt_o[lt_r]);
    if (lt_tid < RW) {
      __stcg(&lt_mine[lt_tid * (W + 2)], lt_smax[lt_tid]);
      __stcg(&lt_mine[lt_tid * (W + 2) + 1], lt_ssum[lt_tid]);
    }
    if (lt_arrive_last(lt_scratch, lt_rb, lt_C)) {
      __threadfence();
      const float *lt_row = lt_part + lt_rb * lt_C * STRIDE;
      /* each chunk's weight per head, exp(max_k - max) / sum: a warp per head, a lane per chunk */
      __shared__ float lt_w[LT_FD_MAX_CHUNKS][RW];
      for (int lt_r = lt_warp; lt_r < RW; lt_r += 4) {
        float lt_m[2] = {lt_ninf, lt_ninf}, lt_sm[2] = {0.0f, 0.0f};
#pragma unroll
        for (int lt_h = 0; lt_h < 2; lt_h++)
          if (lt_lane + 32 * lt_h < lt_C) {
            lt_m[lt_h] = __ldcg(&lt_row[(lt_lane + 32 * lt_h) * STRIDE + lt_r * (W + 2)]);
            lt_sm[lt_h] = __ldcg(&lt_row[(lt_lane + 32 * lt_h) * STRIDE + lt_r * (W + 2) + 1]);
          }
        float lt_mx = fmaxf(lt_m[0], lt_m[1]);
#pragma unroll
        for (int lt_x = 16; lt_x > 0; lt_x >>= 1) lt_mx = fmaxf(lt_mx, __shfl_xor_sync(0xffffffffu, lt_mx, lt_x));
        const float lt_base = lt_mx == lt_ninf ? 0.0f : lt_mx;
        const float lt_a0 = expf(lt_m[0] - lt_base), lt_a1 = expf(lt_m[1] - lt_base);
        float lt_l = lt_sm[0] * lt_a0 + lt_sm[1] * lt_a1;
#pragma unroll
        for (int lt_x = 16; lt_x > 0; lt_x >>= 1) lt_l += __shfl_xor_sync(0xffffffffu, lt_l, lt_x);
        if (lt_lane < lt_C) lt_w[lt_lane][lt_r] = lt_a0 / lt_l;
        if (lt_lane + 32 < lt_C) lt_w[lt_lane + 32][lt_r] = lt_a1 / lt_l;
      }
      __syncthreads();
      /* the weighted sum of the chunks' outputs: each of the NPH phases of W threads takes every NPH-th chunk,
       * eight chunks' loads in flight, then phase 0 adds the other phases in order (a fixed order: the same
       * sums whichever block is last) */
      float lt_acc[RW];
#pragma unroll
      for (int lt_r = 0; lt_r < RW; lt_r++) lt_acc[lt_r] = 0.0f;
      if (lt_ph < NPH) {
#pragma unroll 8
        for (int lt_k = lt_ph; lt_k < (int)lt_C; lt_k += NPH)
#pragma unroll
          for (int lt_r = 0; lt_r < RW; lt_r++)
            lt_acc[lt_r] += lt_w[lt_k][lt_r] * __ldcg(&lt_row[lt_k * STRIDE + lt_r * (W + 2) + 2 + lt_col]);
      }
      lt_fd_phases_into_first<NPH, RW, W>(lt_acc, lt_ph, lt_col);
      if (lt_ph == 0)
#pragma unroll
        for (int lt_r = 0; lt_r < RW; lt_r++) lt_fstore(lt_rb, lt_r, (i64)lt_col, lt_acc[lt_r]);
    }
  }
}

template <int D, int W, int RW, long long GB, int COUNTER_WORDS, bool HAS_TLAST, bool ROWS, class Q, class K, class V,
          class TL, class S, class ST, class KR, class KC, class KA, class VR, class VC, class VA>
static __device__ __forceinline__ void
lt_flash_decode_impl(const i64 lt_M, const i64 lt_T, unsigned int *lt_scratch, const Q &lt_fq, const K &lt_fk,
                     const V &lt_fv, const TL &lt_ftlast, const S &lt_fscore, const ST &lt_fstore, const KR &lt_fkr,
                     const KC &lt_fkc, const KA &lt_fka, const VR &lt_fvr, const VC &lt_fvc, const VA &lt_fva) {
  constexpr int LK = lt_pow2_at_least((D + 3) / 4 < 32 ? (D + 3) / 4 : 32); /* lanes per key */
  constexpr int DJ = (D + LK - 1) / LK, KPW = 32 / LK;                      /* q per lane, keys per warp */
  constexpr int NPH = 128 / W, VPT = (LT_FD_TILE + NPH - 1) / NPH; /* P x V: threads per column, keys per thread */
  const float lt_ninf = -__int_as_float(0x7f800000);
  const int lt_tid = threadIdx.x, lt_lane = lt_tid & 31, lt_warp = lt_tid >> 5;
  const int lt_sub = lt_lane / LK, lt_dl = lt_lane % LK;
  const i64 lt_C = (i64)gridDim.x / (lt_M * GB); /* key chunks per row */
  const i64 lt_rb = (i64)blockIdx.x / lt_C, lt_c = (i64)blockIdx.x % lt_C;
  __shared__ float lt_s[RW][LT_FD_TILE];
  __shared__ float lt_smax[RW], lt_ssum[RW], lt_salpha[RW];
  const i64 lt_per = ((lt_T + LT_FD_TILE - 1) / LT_FD_TILE + lt_C - 1) / lt_C * LT_FD_TILE;
  const i64 lt_t0 = lt_c * lt_per;
  i64 lt_t1 = lt_mini(lt_t0 + lt_per, lt_T);
  if constexpr (HAS_TLAST) lt_t1 = lt_mini(lt_t1, lt_ftlast(lt_rb) + 1);
  /* q of the block's heads: lane dl holds elements dl, dl + lk, ... */
  float lt_q[RW][DJ];
#pragma unroll
  for (int lt_r = 0; lt_r < RW; lt_r++) {
#pragma unroll
    for (int lt_j = 0; lt_j < DJ; lt_j++) {
      const i64 lt_d = lt_dl + lt_j * LK;
      lt_q[lt_r][lt_j] = 0.0f;
      if (lt_d < D) lt_q[lt_r][lt_j] = lt_fq(lt_rb, lt_r, lt_d);
    }
  }
  if (lt_tid < RW) {
    lt_smax[lt_tid] = lt_ninf;
    lt_ssum[lt_tid] = 0.0f;
  }
  __syncthreads();
  const int lt_col = lt_tid % W, lt_ph = lt_tid / W; /* P x V: column, key phase */
  /* ROWS: k and v as a key's row offset (once per key and tile, in shared memory) plus a column offset
   * (once per thread), so an element's load does not recompute the key's address (a block-table read) */
  __shared__ i64 lt_krow[ROWS ? LT_FD_TILE : 1], lt_vrow[ROWS ? LT_FD_TILE : 1];
  i64 lt_kcol[ROWS ? DJ : 1], lt_vcol = 0;
  if constexpr (ROWS) {
#pragma unroll
    for (int lt_j = 0; lt_j < DJ; lt_j++) lt_kcol[lt_j] = lt_dl + lt_j * LK < D ? lt_fkc(lt_rb, lt_dl + lt_j * LK) : 0;
    if (lt_ph < NPH) lt_vcol = lt_fvc(lt_rb, (i64)lt_col);
  }
  float lt_o[RW];
#pragma unroll
  for (int lt_r = 0; lt_r < RW; lt_r++) lt_o[lt_r] = 0.0f;
  for (i64 lt_k0 = lt_t0; lt_k0 < lt_t1; lt_k0 += LT_FD_TILE) {
    if constexpr (ROWS) {
      if (lt_tid < LT_FD_TILE && lt_k0 + lt_tid < lt_t1) {
        lt_krow[lt_tid] = lt_fkr(lt_rb, lt_k0 + lt_tid);
        lt_vrow[lt_tid] = lt_fvr(lt_rb, lt_k0 + lt_tid);
      }
      __syncthreads();
    }
    /* this thread's values of the tile */
    float lt_vr[VPT];
#pragma unroll
    for (int lt_i = 0; lt_i < VPT; lt_i++) {
      const int lt_kk = lt_ph + lt_i * NPH;
      const i64 lt_t = lt_k0 + lt_kk;
      lt_vr[lt_i] = 0.0f;
      if (lt_ph < NPH && lt_kk < LT_FD_TILE && lt_t < lt_t1) {
        if constexpr (ROWS) lt_vr[lt_i] = lt_fva(lt_vrow[lt_kk] + lt_vcol);
        else lt_vr[lt_i] = lt_fv(lt_rb, (i64)lt_col, lt_t);
      }
    }
    /* scores: key lt_kk of the tile on lanes lt_sub * lk .. + lk of its warp */
#pragma unroll
    for (int lt_i = 0; lt_i < LT_FD_TILE / (4 * KPW); lt_i++) {
      const int lt_kk = lt_i * (4 * KPW) + lt_warp * KPW + lt_sub;
      const i64 lt_tk = lt_k0 + lt_kk;
      float lt_a[RW];
#pragma unroll
      for (int lt_r = 0; lt_r < RW; lt_r++) lt_a[lt_r] = 0.0f;
      if (lt_tk < lt_t1) {
#pragma unroll
        for (int lt_j = 0; lt_j < DJ; lt_j++) {
          const i64 lt_d = lt_dl + lt_j * LK;
          if (lt_d < D) {
            float lt_kv;
            if constexpr (ROWS) lt_kv = lt_fka(lt_krow[lt_kk] + lt_kcol[lt_j]);
            else lt_kv = lt_fk(lt_rb, lt_tk, lt_d);
#pragma unroll
            for (int lt_r = 0; lt_r < RW; lt_r++) lt_a[lt_r] += lt_q[lt_r][lt_j] * lt_kv;
          }
        }
      }
#pragma unroll
      for (int lt_r = 0; lt_r < RW; lt_r++)
#pragma unroll
        for (int lt_x = LK / 2; lt_x > 0; lt_x >>= 1) lt_a[lt_r] += __shfl_xor_sync(0xffffffffu, lt_a[lt_r], lt_x);
      if (lt_dl == 0) {
#pragma unroll
        for (int lt_r = 0; lt_r < RW; lt_r++) {
          float lt_sc = lt_ninf;
          if (lt_tk < lt_t1) lt_sc = lt_fscore(lt_rb, lt_r, lt_tk, lt_a[lt_r]);
          lt_s[lt_r][lt_kk] = lt_sc;
        }
      }
    }
    __syncthreads();
    /* online softmax: a warp per head; p replaces the score in lt_s */
    for (int lt_r = lt_warp; lt_r < RW; lt_r += 4) {
      const float lt_sv = lt_s[lt_r][lt_lane];
      float lt_bm = lt_sv;
#pragma unroll
      for (int lt_x = 16; lt_x > 0; lt_x >>= 1) lt_bm = fmaxf(lt_bm, __shfl_xor_sync(0xffffffffu, lt_bm, lt_x));
      const float lt_mold = lt_smax[lt_r], lt_mnew = fmaxf(lt_mold, lt_bm);
      const float lt_base = lt_mnew == lt_ninf ? 0.0f : lt_mnew; /* no key seen yet */
      const float lt_p = expf(lt_sv - lt_base);
      lt_s[lt_r][lt_lane] = lt_p;
      float lt_ps = lt_p;
#pragma unroll
      for (int lt_x = 16; lt_x > 0; lt_x >>= 1) lt_ps += __shfl_xor_sync(0xffffffffu, lt_ps, lt_x);
      if (lt_lane == 0) {
        const float lt_al = expf(lt_mold - lt_base);
        lt_salpha[lt_r] = lt_al;
        lt_ssum[lt_r] = lt_ssum[lt_r] * lt_al + lt_ps;
        lt_smax[lt_r] = lt_mnew;
      }
    }
    __syncthreads();
    /* P x V */
#pragma unroll
    for (int lt_r = 0; lt_r < RW; lt_r++) lt_o[lt_r] *= lt_salpha[lt_r];
#pragma unroll
    for (int lt_i = 0; lt_i < VPT; lt_i++) {
      const int lt_kk = lt_ph + lt_i * NPH;
      if (lt_kk < LT_FD_TILE) {
#pragma unroll
        for (int lt_r = 0; lt_r < RW; lt_r++) lt_o[lt_r] += lt_s[lt_r][lt_kk] * lt_vr[lt_i];
      }
    }
    __syncthreads(); /* before the next tile's scores */
  }
  lt_fd_phases_into_first<NPH, RW, W>(lt_o, lt_ph, lt_col);
  lt_fd_finish<W, RW, COUNTER_WORDS>(lt_o, lt_smax, lt_ssum, lt_C, lt_rb, lt_scratch, lt_fstore);
}

/* Every element's index computed whole (contiguous caches). */
template <int D, int W, int RW, long long GB, int COUNTER_WORDS, bool HAS_TLAST, class Q, class K, class V, class TL,
          class S, class ST>
static __device__ __forceinline__ void lt_flash_decode(const i64 lt_M, const i64 lt_T, unsigned int *lt_scratch,
                                                       const Q &lt_fq, const K &lt_fk, const V &lt_fv,
                                                       const TL &lt_ftlast, const S &lt_fscore, const ST &lt_fstore) {
  lt_flash_decode_impl<D, W, RW, GB, COUNTER_WORDS, HAS_TLAST, false>(lt_M, lt_T, lt_scratch, lt_fq, lt_fk, lt_fv,
                                                                      lt_ftlast, lt_fscore, lt_fstore, 0, 0, 0, 0, 0, 0);
}

/* k and v through row offsets: a key's row (kr, vr: rb, t -> index), a column's offset (kc: rb, d; vc: rb, cc)
 * and the element at an index (ka, va). */
template <int D, int W, int RW, long long GB, int COUNTER_WORDS, bool HAS_TLAST, class Q, class TL, class S, class ST,
          class KR, class KC, class KA, class VR, class VC, class VA>
static __device__ __forceinline__ void
lt_flash_decode_rows(const i64 lt_M, const i64 lt_T, unsigned int *lt_scratch, const Q &lt_fq, const TL &lt_ftlast,
                     const S &lt_fscore, const ST &lt_fstore, const KR &lt_fkr, const KC &lt_fkc, const KA &lt_fka,
                     const VR &lt_fvr, const VC &lt_fvc, const VA &lt_fva) {
  lt_flash_decode_impl<D, W, RW, GB, COUNTER_WORDS, HAS_TLAST, true>(lt_M, lt_T, lt_scratch, lt_fq, 0, 0, lt_ftlast,
                                                                     lt_fscore, lt_fstore, lt_fkr, lt_fkc, lt_fka,
                                                                     lt_fvr, lt_fvc, lt_fva);
}

/* The vector form (KFlash.vec: every key's row of k and of v starts at a multiple of 8 elements and a thread's 8
 * columns are consecutive): 8 elements of f32 (ELT 0, two 16-byte loads), bf16 (1) or f16 (2, one load) at once. */
template <int ELT> struct lt_fd_raw {
  lt_u4 w[ELT == 0 ? 2 : 1];
};
template <int ELT, class P> static __device__ __forceinline__ void lt_fd_ld8(const P *lt_p, lt_fd_raw<ELT> &lt_r) {
  const lt_u4 *lt_v = (const lt_u4 *)lt_p;
  lt_r.w[0] = lt_v[0];
  if constexpr (ELT == 0) lt_r.w[1] = lt_v[1];
}
template <int ELT> static __device__ __forceinline__ void lt_fd_zero8(lt_fd_raw<ELT> &lt_r) {
#pragma unroll
  for (int lt_i = 0; lt_i < (ELT == 0 ? 2 : 1); lt_i++) lt_r.w[lt_i] = lt_u4{0u, 0u, 0u, 0u};
}
template <int ELT> static __device__ __forceinline__ void lt_fd_cvt8(const lt_fd_raw<ELT> &lt_r, float (&lt_o)[8]) {
  if constexpr (ELT == 0) {
#pragma unroll
    for (int lt_i = 0; lt_i < 2; lt_i++) {
      lt_o[4 * lt_i] = __uint_as_float(lt_r.w[lt_i].x);
      lt_o[4 * lt_i + 1] = __uint_as_float(lt_r.w[lt_i].y);
      lt_o[4 * lt_i + 2] = __uint_as_float(lt_r.w[lt_i].z);
      lt_o[4 * lt_i + 3] = __uint_as_float(lt_r.w[lt_i].w);
    }
  } else {
    const unsigned int lt_w[4] = {lt_r.w[0].x, lt_r.w[0].y, lt_r.w[0].z, lt_r.w[0].w};
#pragma unroll
    for (int lt_i = 0; lt_i < 4; lt_i++) { /* little-endian: the lower element in the low half */
      if constexpr (ELT == 1) {
        lt_o[2 * lt_i] = __uint_as_float(lt_w[lt_i] << 16);
        lt_o[2 * lt_i + 1] = __uint_as_float(lt_w[lt_i] & 0xffff0000u);
      } else {
        lt_o[2 * lt_i] = lt_f16_to_f32((unsigned short)(lt_w[lt_i] & 0xffffu));
        lt_o[2 * lt_i + 1] = lt_f16_to_f32((unsigned short)(lt_w[lt_i] >> 16));
      }
    }
  }
}

/* Flash-decoding with 16-byte loads of k and v (KFlash.vec), software-pipelined: the next tile's keys and values
 * are loaded (their rows looked up, a block-table read, by the threads that load them) while this tile is scored
 * and summed, and the scores alternate between two shared buffers, so a tile takes two barriers. A key's dot
 * products are spread over D / 8 lanes (8 consecutive elements each); for P x V each thread takes 8 consecutive
 * columns of every (128 / (W / 8))-th key of the tile; at the end the key phases are summed per column in
 * phase order and lt_fd_finish stores or merges as in the scalar form. KELT and VELT: k's and v's element type
 * (lt_fd_raw). kp and vp give the address of the element at an index. */
template <int D, int W, int RW, long long GB, int COUNTER_WORDS, bool HAS_TLAST, int KELT, int VELT, class Q, class TL,
          class S, class ST, class KR, class KC, class KP, class VR, class VC, class VP>
static __device__ __forceinline__ void
lt_flash_decode_vec(const i64 lt_M, const i64 lt_T, unsigned int *lt_scratch, const Q &lt_fq, const TL &lt_ftlast,
                    const S &lt_fscore, const ST &lt_fstore, const KR &lt_fkr, const KC &lt_fkc, const KP &lt_fkp,
                    const VR &lt_fvr, const VC &lt_fvc, const VP &lt_fvp) {
  constexpr int LK = D / 8, KPW = 32 / LK, KPB = 4 * KPW, KIT = LT_FD_TILE / KPB; /* lanes a key; keys a pass */
  constexpr int CPT = W / 8, NPH = 128 / CPT, VIT = (LT_FD_TILE + NPH - 1) / NPH; /* P x V: threads a key */
  static_assert(D % 8 == 0 && 32 % LK == 0 && KIT >= 1 && KIT * KPB == LT_FD_TILE, "head dimension 32, 64 or 128");
  static_assert(W % 8 == 0 && 128 % CPT == 0, "value width 8, 16, 32, 64 or 128");
  const float lt_ninf = -__int_as_float(0x7f800000);
  const int lt_tid = threadIdx.x, lt_lane = lt_tid & 31, lt_warp = lt_tid >> 5;
  const int lt_sub = lt_lane / LK, lt_dl = lt_lane % LK;
  const int lt_vc8 = lt_tid % CPT, lt_vph = lt_tid / CPT; /* P x V: columns 8 vc8 .. + 7, key phase */
  const i64 lt_C = (i64)gridDim.x / (lt_M * GB);          /* key chunks per row */
  const i64 lt_rb = (i64)blockIdx.x / lt_C, lt_c = (i64)blockIdx.x % lt_C;
  __shared__ float lt_s[2][RW][LT_FD_TILE];
  __shared__ float lt_smax[RW], lt_ssum[RW], lt_salpha[RW];
  const i64 lt_per = ((lt_T + LT_FD_TILE - 1) / LT_FD_TILE + lt_C - 1) / lt_C * LT_FD_TILE;
  const i64 lt_t0 = lt_c * lt_per;
  i64 lt_t1 = lt_mini(lt_t0 + lt_per, lt_T);
  if constexpr (HAS_TLAST) lt_t1 = lt_mini(lt_t1, lt_ftlast(lt_rb) + 1);
  const i64 lt_kcol = lt_fkc(lt_rb, (i64)lt_dl * 8), lt_vcol = lt_fvc(lt_rb, (i64)lt_vc8 * 8);
  /* this thread's keys of a tile (pass it) and values (key vph + i NPH), loaded 8 elements at a time */
  auto lt_issue = [&](const i64 lt_k0, lt_fd_raw<KELT> (&lt_kr)[KIT], lt_fd_raw<VELT> (&lt_vr)[VIT]) {
#pragma unroll
    for (int lt_it = 0; lt_it < KIT; lt_it++) {
      const i64 lt_t = lt_k0 + lt_it * KPB + lt_warp * KPW + lt_sub;
      if (lt_t < lt_t1) lt_fd_ld8(lt_fkp(lt_fkr(lt_rb, lt_t) + lt_kcol), lt_kr[lt_it]);
      else lt_fd_zero8(lt_kr[lt_it]);
    }
#pragma unroll
    for (int lt_i = 0; lt_i < VIT; lt_i++) {
      const int lt_kk = lt_vph + lt_i * NPH;
      const i64 lt_t = lt_k0 + lt_kk;
      if (lt_kk < LT_FD_TILE && lt_t < lt_t1) lt_fd_ld8(lt_fvp(lt_fvr(lt_rb, lt_t) + lt_vcol), lt_vr[lt_i]);
      else lt_fd_zero8(lt_vr[lt_i]); /* a masked key's value is 0, never what lies past the keys */
    }
  };
  lt_fd_raw<KELT> lt_ka[KIT], lt_kb[KIT];
  lt_fd_raw<VELT> lt_va[VIT], lt_vb[VIT];
  lt_issue(lt_t0, lt_ka, lt_va);
  /* q of the block's heads in shared memory (registers go to the loads in flight); lane dl reads 8 dl .. + 7 */
  __shared__ alignas(16) float lt_q[RW][D];
  for (int lt_i = lt_tid; lt_i < RW * D; lt_i += 128) lt_q[lt_i / D][lt_i % D] = lt_fq(lt_rb, lt_i / D, lt_i % D);
  if (lt_tid < RW) {
    lt_smax[lt_tid] = lt_ninf;
    lt_ssum[lt_tid] = 0.0f;
  }
  __syncthreads();
  float lt_o[RW][8];
#pragma unroll
  for (int lt_r = 0; lt_r < RW; lt_r++)
#pragma unroll
    for (int lt_e = 0; lt_e < 8; lt_e++) lt_o[lt_r][lt_e] = 0.0f;
  /* one tile at lt_k0 from the loads in kc / vc, scores in buffer b, the next tile's loads into kn / vn */
  auto lt_step = [&](const i64 lt_k0, const int lt_b, const lt_fd_raw<KELT> (&lt_kc)[KIT],
                     const lt_fd_raw<VELT> (&lt_vc)[VIT], lt_fd_raw<KELT> (&lt_kn)[KIT],
                     lt_fd_raw<VELT> (&lt_vn)[VIT]) {
    lt_issue(lt_k0 + LT_FD_TILE, lt_kn, lt_vn);
#pragma unroll
    for (int lt_it = 0; lt_it < KIT; lt_it++) {
      const int lt_kk = lt_it * KPB + lt_warp * KPW + lt_sub;
      const i64 lt_t = lt_k0 + lt_kk;
      float lt_k[8], lt_a[RW];
      lt_fd_cvt8(lt_kc[lt_it], lt_k);
#pragma unroll
      for (int lt_r = 0; lt_r < RW; lt_r++) {
        lt_a[lt_r] = 0.0f;
#pragma unroll
        for (int lt_e = 0; lt_e < 8; lt_e++) lt_a[lt_r] += lt_q[lt_r][lt_dl * 8 + lt_e] * lt_k[lt_e];
#pragma unroll
        for (int lt_x = LK / 2; lt_x > 0; lt_x >>= 1) lt_a[lt_r] += __shfl_xor_sync(0xffffffffu, lt_a[lt_r], lt_x);
      }
      if (lt_dl == 0)
#pragma unroll
        for (int lt_r = 0; lt_r < RW; lt_r++)
          lt_s[lt_b][lt_r][lt_kk] = lt_t < lt_t1 ? lt_fscore(lt_rb, lt_r, lt_t, lt_a[lt_r]) : lt_ninf;
    }
    __syncthreads();
    /* online softmax: a warp per head; p replaces the score */
    for (int lt_r = lt_warp; lt_r < RW; lt_r += 4) {
      const float lt_sv = lt_s[lt_b][lt_r][lt_lane];
      float lt_bm = lt_sv;
#pragma unroll
      for (int lt_x = 16; lt_x > 0; lt_x >>= 1) lt_bm = fmaxf(lt_bm, __shfl_xor_sync(0xffffffffu, lt_bm, lt_x));
      const float lt_mold = lt_smax[lt_r], lt_mnew = fmaxf(lt_mold, lt_bm);
      const float lt_base = lt_mnew == lt_ninf ? 0.0f : lt_mnew; /* no key seen yet */
      const float lt_p = expf(lt_sv - lt_base);
      lt_s[lt_b][lt_r][lt_lane] = lt_p;
      float lt_ps = lt_p;
#pragma unroll
      for (int lt_x = 16; lt_x > 0; lt_x >>= 1) lt_ps += __shfl_xor_sync(0xffffffffu, lt_ps, lt_x);
      if (lt_lane == 0) {
        const float lt_al = expf(lt_mold - lt_base);
        lt_salpha[lt_r] = lt_al;
        lt_ssum[lt_r] = lt_ssum[lt_r] * lt_al + lt_ps;
        lt_smax[lt_r] = lt_mnew;
      }
    }
    __syncthreads();
    /* P x V (the next tile's scores go to the other buffer; its softmax waits at that tile's first barrier) */
#pragma unroll
    for (int lt_r = 0; lt_r < RW; lt_r++) {
      const float lt_al = lt_salpha[lt_r];
#pragma unroll
      for (int lt_e = 0; lt_e < 8; lt_e++) lt_o[lt_r][lt_e] *= lt_al;
    }
#pragma unroll
    for (int lt_i = 0; lt_i < VIT; lt_i++) {
      const int lt_kk = lt_vph + lt_i * NPH;
      if (lt_kk < LT_FD_TILE) {
        float lt_v[8];
        lt_fd_cvt8(lt_vc[lt_i], lt_v);
#pragma unroll
        for (int lt_r = 0; lt_r < RW; lt_r++) {
          const float lt_p = lt_s[lt_b][lt_r][lt_kk];
#pragma unroll
          for (int lt_e = 0; lt_e < 8; lt_e++) lt_o[lt_r][lt_e] += lt_p * lt_v[lt_e];
        }
      }
    }
  };
  for (i64 lt_k0 = lt_t0; lt_k0 < lt_t1; lt_k0 += 2 * LT_FD_TILE) { /* two steps: the buffers swap roles */
    lt_step(lt_k0, 0, lt_ka, lt_va, lt_kb, lt_vb);
    if (lt_k0 + LT_FD_TILE < lt_t1) lt_step(lt_k0 + LT_FD_TILE, 1, lt_kb, lt_vb, lt_ka, lt_va);
  }
  /* the key phases of each column, summed in phase order by the column's thread (tid < W) */
  __shared__ float lt_red[NPH][RW][W];
#pragma unroll
  for (int lt_r = 0; lt_r < RW; lt_r++)
#pragma unroll
    for (int lt_e = 0; lt_e < 8; lt_e++) lt_red[lt_vph][lt_r][lt_vc8 * 8 + lt_e] = lt_o[lt_r][lt_e];
  __syncthreads();
  float lt_out[RW];
#pragma unroll
  for (int lt_r = 0; lt_r < RW; lt_r++) {
    lt_out[lt_r] = 0.0f;
    if (lt_tid < W)
      for (int lt_x = 0; lt_x < NPH; lt_x++) lt_out[lt_r] += lt_red[lt_x][lt_r][lt_tid];
  }
  lt_fd_finish<W, RW, COUNTER_WORDS>(lt_out, lt_smax, lt_ssum, lt_C, lt_rb, lt_scratch, lt_fstore);
}
