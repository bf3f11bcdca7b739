/* Flash attention on tensor cores (mma.sync.m16n8k16, bf16 inputs, f32 accumulators): one KS_FLASH
 * statement (render_flash.c).
 *
 * A block of 4 warps takes 64 query rows of one column group (a head); each warp owns 16 rows. The warp
 * keeps its rows of Q as A fragments in registers for the whole kernel, then walks the keys in tiles of
 * 32: the block stages K's and V's rows of the tile in shared memory as bf16 (hi and lo planes at
 * PARTS = 2), each warp computes its 16 x 32 scores with MMAs, applies the score expression (scale,
 * mask) per element, and folds them into an online softmax: the running row maximum, the running sum of
 * exp(score - maximum), and the output accumulators, rescaled whenever the maximum grows. The
 * exponentials become the A fragments of P x V directly from the score registers (an m16n8 accumulator
 * tile has the layout of half an m16k16 A fragment), and V's fragments come from shared memory with
 * ldmatrix.trans. At the end each output is divided by its row's sum and stored by the kernel's store.
 * A causal mask (HAS_TLAST) ends the walk at the last key the block's last row can see. Rows past the
 * end are clamped to the last one and their results dropped; keys past the end are staged from the
 * last key and scored -inf.
 *
 * Constants: PARTS (1: bf16, 2: hi + lo planes), D the head dimension and W the value width (multiples
 * of 16, <= 128), G the column groups (blocks per 64 rows). The kernel's expressions, as device
 * functions of the block's group gi (= blockIdx.x % G), query row m, key t, element d, value column cc:
 *   q(gi, m, d), k(gi, t, d), v(gi, t, cc) -> float; tlast(gi, m) -> i64, the last key row m sees;
 *   score(gi, m, t, s) -> float, the score of dot product s; store(gi, m, cc, o) stores output o. */
#define LT_FL_KEYS 32 /* keys per tile */

/* Two f32 values x[0], x[1] as bf16 pairs: the hi pair into hi, at PARTS = 2 the lo pair into lo. */
template <int PARTS>
static __device__ __forceinline__ void lt_flash_split(const float *lt_x, unsigned int &lt_hi, unsigned int &lt_lo) {
  if constexpr (PARTS == 2)
    lt_split_bf16x2(lt_x[0], lt_x[1], &lt_hi, &lt_lo);
  else
    lt_hi = lt_pack_bf16x2(lt_x[0], lt_x[1]);
}

/* Stages KEYS x COLS values f(t, col) of the keys from t0 into the shared planes sm (bf16, rows padded
 * by 8), one pair of columns per step; keys past the end are the last key's. */
template <int PARTS, int COLS, class F>
static __device__ __forceinline__ void lt_flash_stage(unsigned short (&lt_sm)[PARTS][LT_FL_KEYS][COLS + 8],
                                                      const int lt_tid, const i64 lt_t0, const i64 lt_T,
                                                      const F &lt_f) {
#pragma unroll 4
  for (int lt_p = lt_tid; lt_p < LT_FL_KEYS * COLS / 2; lt_p += 128) {
    const int lt_row = lt_p / (COLS / 2), lt_col = (lt_p % (COLS / 2)) * 2;
    const i64 lt_t = lt_mini(lt_t0 + lt_row, lt_T - 1);
    float lt_x[2];
#pragma unroll
    for (int lt_j = 0; lt_j < 2; lt_j++) lt_x[lt_j] = lt_f(lt_t, (i64)(lt_col + lt_j));
    if constexpr (PARTS == 2)
      lt_split_bf16x2(lt_x[0], lt_x[1], (unsigned int *)&lt_sm[0][lt_row][lt_col],
                      (unsigned int *)&lt_sm[1][lt_row][lt_col]);
    else
      *(unsigned int *)&lt_sm[0][lt_row][lt_col] = lt_pack_bf16x2(lt_x[0], lt_x[1]);
  }
}

/* d += a * b for the parts (hi*hi, and at PARTS = 2 lo*hi and hi*lo): a[part] an A fragment, b the
 * registers first and first + 1 of ldmatrix result w[part]. */
template <int PARTS>
static __device__ __forceinline__ void lt_flash_mmas(float *lt_d, const unsigned int (*lt_a)[4],
                                                     const unsigned int (*lt_w)[4], const int lt_first) {
  lt_mma_bf16(lt_d, lt_a[0], lt_w[0][lt_first], lt_w[0][lt_first + 1]);
  if constexpr (PARTS == 2) {
    lt_mma_bf16(lt_d, lt_a[1], lt_w[0][lt_first], lt_w[0][lt_first + 1]);
    lt_mma_bf16(lt_d, lt_a[0], lt_w[1][lt_first], lt_w[1][lt_first + 1]);
  }
}

template <int PARTS, int D, int W, long long G, bool HAS_TLAST, class Q, class K, class V, class TL, class S,
          class ST>
static __device__ __forceinline__ void lt_flash(const i64 lt_M, const i64 lt_T, const Q &lt_fq, const K &lt_fk,
                                                const V &lt_fv, const TL &lt_ftlast, const S &lt_fscore,
                                                const ST &lt_fstore) {
  const float lt_ninf = -__int_as_float(0x7f800000);
  const int lt_tid = threadIdx.x, lt_lane = lt_tid & 31, lt_warp = lt_tid >> 5;
  const int lt_r = lt_lane >> 2, lt_q = lt_lane & 3;
  const i64 lt_gi = (i64)blockIdx.x % G, lt_m0 = ((i64)blockIdx.x / G) * 64;
  __shared__ __align__(16) unsigned short lt_sk[PARTS][LT_FL_KEYS][D + 8];
  __shared__ __align__(16) unsigned short lt_sv[PARTS][LT_FL_KEYS][W + 8];
  /* this warp's rows of Q as A fragments: element pair i of k step ks is (row r + 8 (i & 1), k 2q + 8 (i >> 1)) */
  unsigned int lt_qf[D / 16][PARTS][4];
#pragma unroll
  for (int lt_ks = 0; lt_ks < D / 16; lt_ks++) {
#pragma unroll
    for (int lt_i = 0; lt_i < 4; lt_i++) {
      const i64 lt_m = lt_mini(lt_m0 + lt_warp * 16 + lt_r + (lt_i & 1) * 8, lt_M - 1);
      float lt_x[2];
#pragma unroll
      for (int lt_j = 0; lt_j < 2; lt_j++) lt_x[lt_j] = lt_fq(lt_gi, lt_m, (i64)(lt_ks * 16 + (lt_i >> 1) * 8 + 2 * lt_q + lt_j));
      lt_flash_split<PARTS>(lt_x, lt_qf[lt_ks][0][lt_i], lt_qf[lt_ks][PARTS - 1][lt_i]);
    }
  }
  float lt_o[W / 8][4];
#pragma unroll
  for (int lt_i = 0; lt_i < W / 2; lt_i++) lt_o[lt_i >> 2][lt_i & 3] = 0.0f;
  float lt_mx[2] = {lt_ninf, lt_ninf}, lt_l[2] = {0.0f, 0.0f};
  i64 lt_tend = lt_T;
  if constexpr (HAS_TLAST) /* the last key the block's last row sees */
    lt_tend = lt_mini(lt_T, lt_ftlast(lt_gi, lt_mini(lt_m0 + 63, lt_M - 1)) + 1);
  for (i64 lt_t0 = 0; lt_t0 < lt_tend; lt_t0 += LT_FL_KEYS) {
    __syncthreads(); /* every warp is done with the last tile */
    lt_flash_stage<PARTS, D>(lt_sk, lt_tid, lt_t0, lt_T, [&](const i64 lt_t, const i64 lt_d) { return lt_fk(lt_gi, lt_t, lt_d); });
    lt_flash_stage<PARTS, W>(lt_sv, lt_tid, lt_t0, lt_T, [&](const i64 lt_t, const i64 lt_cc) { return lt_fv(lt_gi, lt_t, lt_cc); });
    __syncthreads();
    /* scores: n8 tiles j of keys t0 + 8j .. */
    float lt_s[4][4];
#pragma unroll
    for (int lt_i = 0; lt_i < 16; lt_i++) lt_s[lt_i >> 2][lt_i & 3] = 0.0f;
#pragma unroll
    for (int lt_ks = 0; lt_ks < D / 16; lt_ks++) {
#pragma unroll
      for (int lt_pr = 0; lt_pr < 2; lt_pr++) {
        unsigned int lt_w[PARTS][4];
#pragma unroll
        for (int lt_sp = 0; lt_sp < PARTS; lt_sp++)
          lt_ldsm_x4(lt_w[lt_sp], lt_smem_u32(&lt_sk[lt_sp][lt_pr * 16 + (lt_lane & 7) + ((lt_lane >> 4) << 3)]
                                                     [lt_ks * 16 + ((lt_lane >> 3) & 1) * 8]));
        lt_flash_mmas<PARTS>(lt_s[2 * lt_pr], lt_qf[lt_ks], lt_w, 0);
        lt_flash_mmas<PARTS>(lt_s[2 * lt_pr + 1], lt_qf[lt_ks], lt_w, 2);
      }
    }
    /* the score expression per element: (row r + 8 (e >> 1), key 8j + 2q + (e & 1)) */
#pragma unroll
    for (int lt_j = 0; lt_j < 4; lt_j++)
#pragma unroll
      for (int lt_e = 0; lt_e < 4; lt_e++) {
        const i64 lt_m = lt_mini(lt_m0 + lt_warp * 16 + lt_r + (lt_e >> 1) * 8, lt_M - 1);
        const i64 lt_t = lt_t0 + lt_j * 8 + 2 * lt_q + (lt_e & 1);
        if (lt_t < lt_T) {
          lt_s[lt_j][lt_e] = lt_fscore(lt_gi, lt_m, lt_t, lt_s[lt_j][lt_e]);
        } else {
          lt_s[lt_j][lt_e] = lt_ninf;
        }
      }
    /* online softmax: rows r (h = 0) and r + 8 (h = 1); a row's values sit in the 4 lanes of a quad */
#pragma unroll
    for (int lt_h = 0; lt_h < 2; lt_h++) {
      float lt_bm = lt_mx[lt_h];
#pragma unroll
      for (int lt_j = 0; lt_j < 4; lt_j++) lt_bm = fmaxf(lt_bm, fmaxf(lt_s[lt_j][2 * lt_h], lt_s[lt_j][2 * lt_h + 1]));
      lt_bm = fmaxf(lt_bm, __shfl_xor_sync(0xffffffffu, lt_bm, 1));
      lt_bm = fmaxf(lt_bm, __shfl_xor_sync(0xffffffffu, lt_bm, 2));
      const float lt_base = lt_bm == lt_ninf ? 0.0f : lt_bm; /* no key seen yet */
      const float lt_scale = expf(lt_mx[lt_h] - lt_base);
      lt_mx[lt_h] = lt_bm;
      lt_l[lt_h] *= lt_scale;
#pragma unroll
      for (int lt_j = 0; lt_j < W / 8; lt_j++) {
        lt_o[lt_j][2 * lt_h] *= lt_scale;
        lt_o[lt_j][2 * lt_h + 1] *= lt_scale;
      }
#pragma unroll
      for (int lt_j = 0; lt_j < 4; lt_j++)
#pragma unroll
        for (int lt_e = 2 * lt_h; lt_e < 2 * lt_h + 2; lt_e++) {
          const float lt_pv = expf(lt_s[lt_j][lt_e] - lt_base);
          lt_s[lt_j][lt_e] = lt_pv;
          lt_l[lt_h] += lt_pv;
        }
    }
    /* O += P V over the tile's two k16 steps */
#pragma unroll
    for (int lt_kt = 0; lt_kt < 2; lt_kt++) {
      unsigned int lt_pf[PARTS][4];
#pragma unroll
      for (int lt_i = 0; lt_i < 4; lt_i++) {
        float lt_x[2] = {lt_s[2 * lt_kt + (lt_i >> 1)][2 * (lt_i & 1)], lt_s[2 * lt_kt + (lt_i >> 1)][2 * (lt_i & 1) + 1]};
        lt_flash_split<PARTS>(lt_x, lt_pf[0][lt_i], lt_pf[PARTS - 1][lt_i]);
      }
#pragma unroll
      for (int lt_nt = 0; lt_nt < W / 16; lt_nt++) {
        unsigned int lt_w[PARTS][4];
#pragma unroll
        for (int lt_sp = 0; lt_sp < PARTS; lt_sp++)
          lt_ldsm_x4_trans(lt_w[lt_sp], lt_smem_u32(&lt_sv[lt_sp][lt_kt * 16 + (lt_lane & 7) + (((lt_lane >> 3) & 1) << 3)]
                                                           [lt_nt * 16 + ((lt_lane >> 4) << 3)]));
        lt_flash_mmas<PARTS>(lt_o[2 * lt_nt], lt_pf, lt_w, 0);
        lt_flash_mmas<PARTS>(lt_o[2 * lt_nt + 1], lt_pf, lt_w, 2);
      }
    }
  }
  /* each row's sum over its quad, then the store */
#pragma unroll
  for (int lt_h = 0; lt_h < 2; lt_h++) {
    lt_l[lt_h] += __shfl_xor_sync(0xffffffffu, lt_l[lt_h], 1);
    lt_l[lt_h] += __shfl_xor_sync(0xffffffffu, lt_l[lt_h], 2);
  }
#pragma unroll
  for (int lt_j = 0; lt_j < W / 8; lt_j++)
#pragma unroll
    for (int lt_e = 0; lt_e < 4; lt_e++) {
      const i64 lt_m = lt_m0 + lt_warp * 16 + lt_r + (lt_e >> 1) * 8;
      if (lt_m < lt_M) lt_fstore(lt_gi, lt_m, (i64)(lt_j * 8 + 2 * lt_q + (lt_e & 1)), lt_o[lt_j][lt_e] / lt_l[lt_e >> 1]);
    }
}
