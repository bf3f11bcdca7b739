/* Tensor-core GEMM (mma.sync.m16n8k16, bf16 inputs, f32 accumulators): one KS_MMA statement
 * (render_mma.c), in two kernels, and the library form's epilogue.
 *
 * The pre-pass (lt_mma_pack) evaluates A (any f32 expression of row and k: a norm's output, an
 * activation) once per element and stores it in the scratch as bf16 planes [PARTS][M][K]: A rounded to
 * bf16, or split into hi + lo so that two MMAs keep about f32 accuracy. Done inside the GEMM, that
 * evaluation was repeated for every block of columns and cost more than the MMAs it fed.
 *
 * The GEMM (lt_mma): a block of 8 warps computes 64 rows x 128 accumulator columns (128 output columns
 * of one weight, or 64 columns of each of two: NB). Tiles of A (64 x BK per plane) and of the weights
 * (128 x BK) are copied to shared memory with cp.async, 16 bytes at a time, through a ring of STAGES
 * buffers, so the copies for later k steps are in flight while the tensor cores work on the current
 * one. Warps sit 2 (rows) x 4 (columns), each computing 32 rows x 32 accumulator columns as 2 x 4 m16n8
 * tiles whose fragments come from shared memory with ldmatrix. Rows are padded by 8 elements (16
 * bytes), so the 8 rows an ldmatrix phase reads fall in different banks. Rows past the end of A and
 * columns past the end of the weights (NTOTAL) are clamped to the last one, and their results dropped.
 * Consecutive blocks share one weight tile (rows vary fastest), so a weight tile is read from memory
 * once and then from L2.
 *
 * Split k (SPLIT): when the tiles are too few to keep the device busy, each tile's k range (K) is cut
 * into the grid's parts, one block each; every block stores its partial tile and counts itself on the
 * tile's counter at the start of the scratch; the last to arrive adds the parts in split order (the same
 * sums whichever block is last) and runs the epilogue.
 *
 * The scratch (kernel.h): tile counters (and the bf16 copies of quantized weights, lt_mma_dequant) in the first
 * COUNTER_WORDS words, A's bf16 planes, then the split partials or the library products. The kernel's
 * expressions, as device functions:
 *   a(m, k) -> float, A at row m and k (the pre-pass);
 *   w0(nn, k), w1(nn, k) -> const unsigned short *, weight 0's / 1's element at flat column nn and k;
 *   store(m, nn, acc0, acc1) stores the outputs at row m, flat column nn from the accumulators of the
 *   weights (acc1 only at NB = 2);
 *   row0(nn), row1(nn) -> i64, the library form's: the weight row column nn reads. */

/* The pre-pass: thread p evaluates A at (row, 2j) and (row, 2j+1), p = row * K/2 + j. */
template <int PARTS, long long K, int COUNTER_WORDS, class A>
static __device__ __forceinline__ void lt_mma_pack(const i64 lt_M, unsigned int *lt_scratch, const A &lt_fa) {
  constexpr long long HALF = K / 2;
  const i64 lt_p = (i64)blockIdx.x * 256 + threadIdx.x;
  if (lt_p < lt_M * HALF) {
    const i64 lt_m = lt_p / HALF;
    float lt_v[2];
#pragma unroll
    for (int lt_j = 0; lt_j < 2; lt_j++) lt_v[lt_j] = lt_fa(lt_m, 2 * (lt_p % HALF) + lt_j);
    unsigned int *lt_planes = lt_scratch + COUNTER_WORDS; /* after the tile counters */
    if constexpr (PARTS == 2) {
      unsigned int lt_hi, lt_lo;
      lt_split_bf16x2(lt_v[0], lt_v[1], &lt_hi, &lt_lo);
      lt_planes[lt_p] = lt_hi;
      lt_planes[lt_M * HALF + lt_p] = lt_lo;
    } else {
      lt_planes[lt_p] = lt_pack_bf16x2(lt_v[0], lt_v[1]);
    }
  }
}

/* The pre-pass with a row statistic first (a norm's sum of squares, that A reads): block lt_m (256 threads)
 * sums s(m, r) over r < E, thread t taking r = t, t + 256, ... in order, then the warps' sums in warp order
 * (every thread adds the same values in the same order, so each row's statistic is one value whatever the
 * rows), then stores the planes as lt_mma_pack does, A given the statistic. */
template <int PARTS, long long K, int COUNTER_WORDS, long long E, class S, class A>
static __device__ __forceinline__ void lt_mma_pack_stat(const i64 lt_M, unsigned int *lt_scratch, const S &lt_fs,
                                                        const A &lt_fa) {
  constexpr long long HALF = K / 2;
  __shared__ float lt_warp_sum[8];
  const i64 lt_m = blockIdx.x;
  if (lt_m >= lt_M) return; /* the grid is lt_M blocks: uniform per block, before the barrier */
  float lt_s = 0.0f;
  for (i64 lt_r = threadIdx.x; lt_r < E; lt_r += 256) lt_s += lt_fs(lt_m, lt_r);
#pragma unroll
  for (int lt_o = 16; lt_o > 0; lt_o >>= 1) lt_s += __shfl_xor_sync(0xffffffffu, lt_s, lt_o);
  if ((threadIdx.x & 31) == 0) lt_warp_sum[threadIdx.x >> 5] = lt_s;
  __syncthreads();
  lt_s = lt_warp_sum[0];
#pragma unroll
  for (int lt_w = 1; lt_w < 8; lt_w++) lt_s += lt_warp_sum[lt_w];
  unsigned int *lt_planes = lt_scratch + COUNTER_WORDS; /* after the tile counters */
  for (i64 lt_j = threadIdx.x; lt_j < HALF; lt_j += 256) {
    const i64 lt_p = lt_m * HALF + lt_j;
    const float lt_v0 = lt_fa(lt_m, 2 * lt_j, lt_s), lt_v1 = lt_fa(lt_m, 2 * lt_j + 1, lt_s);
    if constexpr (PARTS == 2) {
      unsigned int lt_hi, lt_lo;
      lt_split_bf16x2(lt_v0, lt_v1, &lt_hi, &lt_lo);
      lt_planes[lt_p] = lt_hi;
      lt_planes[lt_M * HALF + lt_p] = lt_lo;
    } else {
      lt_planes[lt_p] = lt_pack_bf16x2(lt_v0, lt_v1);
    }
  }
}

/* A quantized weight's bf16 copy at byte AT of the scratch (before A's planes), in the pre-pass's threads, whatever
 * its grid (one block per row when it computes a row statistic): thread p decodes elements 8p .. 8p + 7, then
 * 8(p + threads) .. (dq(i, v): eight consecutive elements from i, a multiple of 8, each the reference
 * dequantization's f32 value) and stores them rounded to bf16 as one 16-byte write, for the GEMM to read as it
 * reads a bf16 weight. */
template <long long N8, long long AT, class D>
static __device__ __forceinline__ void lt_mma_dequant(unsigned int *lt_scratch, const D &lt_dq) {
  const i64 lt_stride = (i64)gridDim.x * 256;
  for (i64 lt_p = (i64)blockIdx.x * 256 + threadIdx.x; lt_p < N8; lt_p += lt_stride) {
    float lt_v[8];
    lt_dq(lt_p * 8, lt_v);
    uint4 lt_o;
    lt_o.x = lt_pack_bf16x2(lt_v[0], lt_v[1]);
    lt_o.y = lt_pack_bf16x2(lt_v[2], lt_v[3]);
    lt_o.z = lt_pack_bf16x2(lt_v[4], lt_v[5]);
    lt_o.w = lt_pack_bf16x2(lt_v[6], lt_v[7]);
    ((uint4 *)((char *)lt_scratch + AT))[lt_p] = lt_o;
  }
}

/* The copies of k step kt (A planes and weights) into ring buffer buf. */
template <int NB, int PARTS, int BK, int STAGES, long long K, long long NTOTAL, class W0, class W1>
static __device__ __forceinline__ void lt_mma_stage(unsigned short (&lt_sa)[STAGES][PARTS][64][BK + 8],
                                                    unsigned short (&lt_sb)[STAGES][128][BK + 8],
                                                    const unsigned short *lt_A, const int lt_tid, const i64 lt_M,
                                                    const i64 lt_m0, const i64 lt_n0, const int lt_kt, const int lt_buf,
                                                    const W0 &lt_fw0, const W1 &lt_fw1) {
  constexpr int CHUNKS = BK / 8, COLS = 128 / NB;
#pragma unroll
  for (int lt_q = lt_tid; lt_q < PARTS * 64 * CHUNKS; lt_q += 256) {
    const int lt_s = lt_q / (64 * CHUNKS), lt_row = (lt_q / CHUNKS) % 64, lt_kc = (lt_q % CHUNKS) * 8;
    const i64 lt_r = lt_m0 + lt_row < lt_M ? lt_m0 + lt_row : lt_M - 1;
    lt_cp_async16(lt_smem_u32(&lt_sa[lt_buf][lt_s][lt_row][lt_kc]),
                  lt_A + ((i64)lt_s * lt_M + lt_r) * K + (i64)(lt_kt) * BK + lt_kc);
  }
#pragma unroll
  for (int lt_q = lt_tid; lt_q < 128 * CHUNKS; lt_q += 256) {
    const int lt_row = lt_q / CHUNKS, lt_kc = (lt_q % CHUNKS) * 8;
    const i64 lt_k = (i64)(lt_kt) * BK + lt_kc;
    i64 lt_nn = lt_n0 + lt_row % COLS;
    if (lt_nn >= NTOTAL) lt_nn = NTOTAL - 1;
    if constexpr (NB == 1) {
      lt_cp_async16(lt_smem_u32(&lt_sb[lt_buf][lt_row][lt_kc]), lt_fw0(lt_nn, lt_k));
    } else {
      if (lt_row < COLS)
        lt_cp_async16(lt_smem_u32(&lt_sb[lt_buf][lt_row][lt_kc]), lt_fw0(lt_nn, lt_k));
      else
        lt_cp_async16(lt_smem_u32(&lt_sb[lt_buf][lt_row][lt_kc]), lt_fw1(lt_nn, lt_k));
    }
  }
}

template <int NB, int PARTS, int BK, int STAGES, long long K, long long NTOTAL, bool SPLIT, int COUNTER_WORDS,
          class W0, class W1, class ST>
static __device__ __forceinline__ void lt_mma(const i64 lt_M, unsigned int *lt_scratch, const W0 &lt_fw0,
                                              const W1 &lt_fw1, const ST &lt_fstore) {
  constexpr int WCOLS = 32 / NB; /* output columns per warp */
  constexpr int TILES = 4 / NB;  /* n8 tiles per weight per warp */
  constexpr long long KT = K / BK, NBLOCKS = (NTOTAL + 128 / NB - 1) / (128 / NB);
  const int lt_tid = threadIdx.x, lt_lane = lt_tid & 31, lt_warp = lt_tid >> 5;
  const int lt_g = lt_lane >> 2, lt_t = lt_lane & 3, lt_wm = lt_warp & 1, lt_wn = lt_warp >> 1;
  const i64 lt_mb = (lt_M + 63) / 64, lt_tiles = lt_mb * NBLOCKS;
  /* the grid is tiles x splits (lower_mma.c); block b computes tile b % tiles, k part b / tiles */
  const int lt_S = SPLIT ? (int)((i64)gridDim.x / lt_tiles) : 1, lt_split = SPLIT ? (int)((i64)blockIdx.x / lt_tiles) : 0;
  const i64 lt_tile = (i64)blockIdx.x % lt_tiles;
  const i64 lt_m0 = (lt_tile % lt_mb) * 64;
  const i64 lt_n0 = (lt_tile / lt_mb) * (128 / NB);
  const int lt_per = (KT + lt_S - 1) / lt_S, lt_kt0 = lt_split * lt_per;
  const int lt_nkt = KT - lt_kt0 < lt_per ? KT - lt_kt0 : lt_per; /* may be 0 or less */
  const unsigned short *lt_A = (const unsigned short *)(lt_scratch + COUNTER_WORDS);
  __shared__ __align__(16) unsigned short lt_sa[STAGES][PARTS][64][BK + 8];
  __shared__ __align__(16) unsigned short lt_sb[STAGES][128][BK + 8];
  float lt_c[2][4][4];
#pragma unroll
  for (int lt_i = 0; lt_i < 32; lt_i++) (&lt_c[0][0][0])[lt_i] = 0.0f;
  /* prologue: the first STAGES-1 k steps in flight; every iteration commits one group (empty past the
     last step), so wait_group counts stay exact */
#pragma unroll
  for (int lt_ps = 0; lt_ps < STAGES - 1; lt_ps++) {
    if (lt_ps < lt_nkt)
      lt_mma_stage<NB, PARTS, BK, STAGES, K, NTOTAL>(lt_sa, lt_sb, lt_A, lt_tid, lt_M, lt_m0, lt_n0, lt_kt0 + lt_ps,
                                                     lt_ps, lt_fw0, lt_fw1);
    lt_cp_async_commit();
  }
  for (int lt_kt = 0; lt_kt < lt_nkt; lt_kt++) {
    /* step kt's copies have landed once at most STAGES-2 later groups are pending; the barrier also
       tells every warp that the buffer refilled below is no longer read (it held step kt-1) */
    lt_cp_async_wait_group<STAGES - 2>();
    __syncthreads();
    {
      const int lt_nk = lt_kt + STAGES - 1, lt_nbuf = lt_nk % STAGES;
      if (lt_nk < lt_nkt)
        lt_mma_stage<NB, PARTS, BK, STAGES, K, NTOTAL>(lt_sa, lt_sb, lt_A, lt_tid, lt_M, lt_m0, lt_n0, lt_kt0 + lt_nk,
                                                       lt_nbuf, lt_fw0, lt_fw1);
      lt_cp_async_commit();
    }
    const int lt_cb = lt_kt % STAGES;
#pragma unroll
    for (int lt_kk = 0; lt_kk < BK; lt_kk += 16) {
      unsigned int lt_a[PARTS][2][4], lt_b[4][2];
#pragma unroll
      for (int lt_s = 0; lt_s < PARTS; lt_s++)
#pragma unroll
        for (int lt_mt = 0; lt_mt < 2; lt_mt++)
          lt_ldsm_x4(lt_a[lt_s][lt_mt], lt_smem_u32(&lt_sa[lt_cb][lt_s][lt_wm * 32 + lt_mt * 16 + (lt_lane & 15)]
                                                          [lt_kk + (lt_lane >> 4) * 8]));
#pragma unroll
      for (int lt_pr = 0; lt_pr < 2; lt_pr++) {
        /* the shared rows of n8 tiles 2pr and 2pr+1: weight pr / (2 / NB)'s rows of this warp's columns */
        const int lt_base = NB == 1 ? lt_wn * 32 + lt_pr * 16 : lt_pr * 64 + lt_wn * 16;
        unsigned int lt_w[4];
        lt_ldsm_x4(lt_w, lt_smem_u32(&lt_sb[lt_cb][lt_base + (lt_lane & 7) + ((lt_lane >> 4) << 3)]
                                           [lt_kk + ((lt_lane >> 3) & 1) * 8]));
        lt_b[2 * lt_pr][0] = lt_w[0];
        lt_b[2 * lt_pr][1] = lt_w[1];
        lt_b[2 * lt_pr + 1][0] = lt_w[2];
        lt_b[2 * lt_pr + 1][1] = lt_w[3];
      }
#pragma unroll
      for (int lt_mt = 0; lt_mt < 2; lt_mt++)
#pragma unroll
        for (int lt_j = 0; lt_j < 4; lt_j++)
#pragma unroll
          for (int lt_s = 0; lt_s < PARTS; lt_s++)
            lt_mma_bf16(lt_c[lt_mt][lt_j], lt_a[lt_s][lt_mt], lt_b[lt_j][0], lt_b[lt_j][1]);
    }
  }
  lt_cp_async_wait_group<0>();
  /* split k: thread t's 32 sums at t, t + 256, ... of the block's partial tile */
  bool lt_last = true;
  if constexpr (SPLIT) {
    if (lt_S > 1) {
      float *lt_part = (float *)(lt_scratch + COUNTER_WORDS + lt_M * (K / 2 * PARTS));
      float *lt_mine = lt_part + (i64)blockIdx.x * 8192;
#pragma unroll
      for (int lt_i = 0; lt_i < 32; lt_i++) __stcg(&lt_mine[lt_i * 256 + lt_tid], (&lt_c[0][0][0])[lt_i]);
      lt_last = lt_arrive_last(lt_scratch, lt_tile, lt_S);
      if (lt_last) {
        __threadfence();
#pragma unroll
        for (int lt_i = 0; lt_i < 32; lt_i++) {
          float lt_sum = 0.0f;
          for (int lt_s = 0; lt_s < lt_S; lt_s++)
            lt_sum += lt_s == lt_split ? (&lt_c[0][0][0])[lt_i]
                                       : __ldcg(&lt_part[((i64)lt_s * lt_tiles + lt_tile) * 8192 + lt_i * 256 + lt_tid]);
          (&lt_c[0][0][0])[lt_i] = lt_sum;
        }
      }
    }
  }
  /* epilogue: element e of tile (mt, j) is (row mt*16 + g + 8*(e/2), column j*8 + 2t + e%2) */
  if (lt_last) {
#pragma unroll
    for (int lt_mt = 0; lt_mt < 2; lt_mt++)
#pragma unroll
      for (int lt_j = 0; lt_j < TILES; lt_j++)
#pragma unroll
        for (int lt_e = 0; lt_e < 4; lt_e++) {
          const i64 lt_m = lt_m0 + lt_wm * 32 + lt_mt * 16 + lt_g + ((lt_e >> 1) ? 8 : 0);
          const i64 lt_nn = lt_n0 + lt_wn * WCOLS + lt_j * 8 + 2 * lt_t + (lt_e & 1);
          if (lt_m < lt_M && lt_nn < NTOTAL)
            lt_fstore(lt_m, lt_nn, lt_c[lt_mt][lt_j][lt_e], NB == 2 ? lt_c[lt_mt][TILES * (NB - 1) + lt_j][lt_e] : 0.0f);
        }
  }
}

/* The library form's epilogue: thread p is output element (row p / NTOTAL, flat column p % NTOTAL);
 * sum b is a product of its weight at the weight row that column reads, at product AT_b (in rows of
 * M) with ROWS_b rows, summed over A's parts (each weight's block is [PARTS * M][ROWS_b]). */
template <int NB, int PARTS, long long K, long long NTOTAL, int COUNTER_WORDS, long long AT0, long long ROWS0,
          long long AT1, long long ROWS1, class R0, class R1, class ST>
static __device__ __forceinline__ void lt_mma_epilogue(const i64 lt_M, const unsigned int *lt_scratch,
                                                       const R0 &lt_frow0, const R1 &lt_frow1, const ST &lt_fstore) {
  const i64 lt_p = (i64)blockIdx.x * 256 + threadIdx.x;
  if (lt_p < lt_M * NTOTAL) {
    const i64 lt_m = lt_p / NTOTAL;
    const i64 lt_nn = lt_p % NTOTAL;
    const float *lt_prod = (const float *)(lt_scratch + COUNTER_WORDS + lt_M * (K / 2 * PARTS));
    float lt_acc[2] = {0.0f, 0.0f};
#pragma unroll
    for (int lt_b = 0; lt_b < NB; lt_b++) {
      const long long lt_at = lt_b ? AT1 : AT0, lt_rows = lt_b ? ROWS1 : ROWS0;
      const i64 lt_row = lt_b ? lt_frow1(lt_nn) : lt_frow0(lt_nn);
      if constexpr (PARTS == 1)
        lt_acc[lt_b] = lt_prod[lt_M * lt_at + lt_m * lt_rows + lt_row];
      else /* the hi part's product, then the lo part's, M rows below it */
        lt_acc[lt_b] = lt_prod[lt_M * lt_at + lt_m * lt_rows + lt_row] + lt_prod[lt_M * (lt_at + lt_rows) + lt_m * lt_rows + lt_row];
    }
    lt_fstore(lt_m, lt_nn, lt_acc[0], lt_acc[1]);
  }
}
