/* CUDA: a KS_MMA statement as a tiled tensor-core GEMM (mma.sync.m16n8k16, bf16 inputs, f32
 * accumulators), in two kernels.
 *
 * The pre-pass (KMma.role MMA_PACK) evaluates A (any f32 expression of row and k: a norm's output, an
 * activation) once per element and stores it in the scratch as bf16 planes [a_parts][M][K]: A rounded
 * to bf16, or split into hi + lo so that two MMAs keep about f32 accuracy. Done inside the GEMM, that
 * evaluation was repeated for every block of columns and cost more than the MMAs it fed.
 *
 * The GEMM: a block of 8 warps computes 64 rows x 128 accumulator columns (128 output columns of one
 * weight, or 64 columns of each of two). Tiles of A (64 x bk per plane) and of the weights (128 x bk)
 * are copied to shared memory with cp.async, 16 bytes at a time, through a ring of `stages` buffers, so
 * the copies for later k steps are in flight while the tensor cores work on the current one. Warps sit
 * 2 (rows) x 4 (columns), each computing 32 rows x 32 accumulator columns as 2 x 4 m16n8 tiles whose
 * fragments come from shared memory with ldmatrix. Rows are padded by 8 elements (16 bytes), so the 8
 * rows an ldmatrix phase reads fall in different banks. Rows past the end of A and columns past the
 * end of the weights are clamped to the last one, and their results dropped. Consecutive blocks share
 * one weight tile (rows vary fastest), so a weight tile is read from memory once and then from L2.
 *
 * Split k: when the tiles are too few to keep the device busy (KMma.split_max, grid from
 * lower_mma.c), each tile's k range is cut into the grid's parts, one block each; the blocks of a tile
 * meet through a counter at the start of the scratch, and the last to arrive adds the partial tiles
 * and runs the epilogue. */
#include <stdio.h>
#include "render_common.h"

/* Declares the column variables from the flat column index `flat` (last axis fastest). */
static void bind_columns(Render *R, const KMma *m, int level, const char *flat) {
  int64_t stride = 1;
  for (int i = m->nn - 1; i >= 0; i--) {
    rc_line(R, level, "const i64 %s = (%s / %lldLL) %% %lldLL;", R->var_name[m->n_var[i]], flat, (long long)stride,
         (long long)m->n_ext[i]);
    stride *= m->n_ext[i];
  }
}

/* cp.async of 8 values of weight b (columns at flat column `lt_nn`, k = `lt_k`) into shared row
 * `lt_row` of ring buffer `buf`. */
static void copy_weight_chunk(Render *R, const KMma *m, int b, int level, const char *buf) {
  const Expr *w = m->b[b];
  const char *name = R->buf_name[w->ival];
  if (!name) {
    rc_fail(R, "weight buffer %lld is not a parameter", (long long)w->ival);
    return;
  }
  rc_line(R, level, "{");
  bind_columns(R, m, level + 1, "lt_nn");
  rc_line(R, level + 1, "const i64 %s = lt_k;", R->var_name[m->k_var]);
  rc_put_assign(R, level + 1, "const i64 lt_wi", rc_flat_index(R, &R->lp->bufs[w->ival], w->n, w->a));
  rc_line(R, level + 1, "lt_cp_async16(lt_smem_u32(&lt_sb[%s][lt_row][lt_kc]), %s + lt_wi);", buf, name);
  rc_line(R, level, "}");
}

/* The copies of k step `kt` (A planes and weights) into ring buffer `buf`, then one commit group. */
static void put_stage(Render *R, const KMma *m, int L, const char *kt, const char *buf) {
  const int nb = m->nb, parts = m->a_parts, bk = m->bk, cols = 128 / nb, chunks = bk / 8;
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_q = lt_tid; lt_q < %d; lt_q += 256) {", parts * 64 * chunks);
  rc_line(R, L + 1, "const int lt_s = lt_q / %d, lt_row = (lt_q / %d) %% 64, lt_kc = (lt_q %% %d) * 8;", 64 * chunks,
       chunks, chunks);
  rc_line(R, L + 1, "const i64 lt_r = lt_m0 + lt_row < lt_M ? lt_m0 + lt_row : lt_M - 1;");
  rc_line(R, L + 1,
       "lt_cp_async16(lt_smem_u32(&lt_sa[%s][lt_s][lt_row][lt_kc]), lt_A + ((i64)lt_s * lt_M + lt_r) * %lldLL + "
       "(i64)(%s) * %d + lt_kc);",
       buf, (long long)m->k_extent, kt, bk);
  rc_line(R, L, "}");
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_q = lt_tid; lt_q < %d; lt_q += 256) {", 128 * chunks);
  rc_line(R, L + 1, "const int lt_row = lt_q / %d, lt_kc = (lt_q %% %d) * 8;", chunks, chunks);
  rc_line(R, L + 1, "const i64 lt_k = (i64)(%s) * %d + lt_kc;", kt, bk);
  rc_line(R, L + 1, "i64 lt_nn = lt_n0 + lt_row %% %d;", cols);
  rc_line(R, L + 1, "if (lt_nn >= %lldLL) lt_nn = %lldLL;", (long long)m->n_total, (long long)m->n_total - 1);
  if (nb == 1) {
    copy_weight_chunk(R, m, 0, L + 1, buf);
  } else {
    rc_line(R, L + 1, "if (lt_row < %d)", cols);
    copy_weight_chunk(R, m, 0, L + 2, buf);
    rc_line(R, L + 1, "else");
    copy_weight_chunk(R, m, 1, L + 2, buf);
  }
  rc_line(R, L, "}");
}

/* This block's k step `i` (of lt_nkt, from lt_kt0) into ring buffer `buf` when it exists, then a
 * commit group (empty past the last step, so that every iteration commits one group and wait_group
 * counts stay exact). */
static void put_stage_group(Render *R, const KMma *m, int L, const char *i, const char *buf) {
  char kt[64];
  snprintf(kt, sizeof kt, "lt_kt0 + %s", i);
  rc_line(R, L, "if (%s < lt_nkt) {", i);
  put_stage(R, m, L + 1, kt, buf);
  rc_line(R, L, "}");
  rc_line(R, L, "lt_cp_async_commit();");
}

/* The scratch (kernel.h): MMA_COUNTERS bytes of tile counters, A's bf16 planes, then the split
 * partials or the library products. The words where those begin. */
static void planes_end(char *buf, size_t n, const KMma *m) {
  snprintf(buf, n, "lt_scratch + %d + lt_M * %lldLL", MMA_COUNTERS / 4, (long long)(m->k_extent / 2 * m->a_parts));
}

/* Split k (KMma.split_max): every block stores its partial tile (thread t's 32 sums at t, t + 256,
 * ...) and counts itself on the tile's counter; the last block to arrive resets the counter, adds
 * the parts in split order (the same sums whichever block is last) and runs the epilogue. */
static void put_split_sum(Render *R, const KMma *m, int L) {
  if (m->split_max < 2) {
    rc_line(R, L, "const int lt_last = 1;");
    return;
  }
  rc_line(R, L, "int lt_last = 1;");
  rc_line(R, L, "if (lt_S > 1) {");
  L++;
  char part[96];
  planes_end(part, sizeof part, m);
  rc_line(R, L, "float *lt_part = (float *)(%s);", part);
  rc_line(R, L, "float *lt_mine = lt_part + (i64)blockIdx.x * 8192;");
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_i = 0; lt_i < 32; lt_i++) __stcg(&lt_mine[lt_i * 256 + lt_tid], (&lt_c[0][0][0])[lt_i]);");
  rc_put_arrive(R, L, "lt_tile", "lt_S");
  rc_line(R, L, "lt_last = lt_arrived_last;");
  rc_line(R, L, "if (lt_last) {");
  rc_line(R, L + 1, "__threadfence();");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_i = 0; lt_i < 32; lt_i++) {");
  rc_line(R, L + 2, "float lt_sum = 0.0f;");
  rc_line(R, L + 2, "for (int lt_s = 0; lt_s < lt_S; lt_s++)");
  rc_line(R, L + 3,
       "lt_sum += lt_s == lt_split ? (&lt_c[0][0][0])[lt_i] : __ldcg(&lt_part[((i64)lt_s * lt_tiles + lt_tile) * 8192 "
       "+ lt_i * 256 + lt_tid]);");
  rc_line(R, L + 2, "(&lt_c[0][0][0])[lt_i] = lt_sum;");
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  L--;
  rc_line(R, L, "}");
}

/* The pre-pass and the epilogue run one thread per item, `per_row` items of each row of A: opens
 * the guarded body with the row variable bound and lt_p the item; returns the body's level. */
static int open_items(Render *R, const KMma *m, int L, long long per_row) {
  rc_line(R, L++, "{");
  rc_put_assign(R, L, "const i64 lt_M", m->m_extent);
  rc_line(R, L, "const i64 lt_p = (i64)blockIdx.x * 256 + threadIdx.x;");
  rc_line(R, L, "if (lt_p < lt_M * %lldLL) {", per_row);
  rc_line(R, L + 1, "const i64 %s = lt_p / %lldLL;", R->var_name[m->m_var], per_row);
  return L + 1;
}

static void close_items(Render *R, int L) {
  rc_line(R, L - 1, "}");
  rc_line(R, L - 2, "}");
}

/* The pre-pass: thread p evaluates A at (row, 2j) and (row, 2j+1), p = row * K/2 + j. */
static void put_pack(Render *R, const KMma *m, int level) {
  const char *kv = R->var_name[m->k_var];
  long long half = (long long)(m->k_extent / 2);
  int L = open_items(R, m, level, half);
  rc_line(R, L, "float lt_v[2];");
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_j = 0; lt_j < 2; lt_j++) {");
  rc_line(R, L + 1, "const i64 %s = 2 * (lt_p %% %lldLL) + lt_j;", kv, half);
  rc_put_assign(R, L + 1, "lt_v[lt_j]", m->a);
  rc_line(R, L, "}");
  rc_line(R, L, "unsigned int *lt_planes = lt_scratch + %d; /* after the tile counters */", MMA_COUNTERS / 4);
  if (m->a_parts == 2) {
    rc_line(R, L, "unsigned int lt_hi, lt_lo;");
    rc_line(R, L, "lt_split_bf16x2(lt_v[0], lt_v[1], &lt_hi, &lt_lo);");
    rc_line(R, L, "lt_planes[lt_p] = lt_hi;");
    rc_line(R, L, "lt_planes[lt_M * %lldLL + lt_p] = lt_lo;", half);
  } else {
    rc_line(R, L, "lt_planes[lt_p] = lt_pack_bf16x2(lt_v[0], lt_v[1]);");
  }
  close_items(R, L);
}

/* The library form's epilogue: thread p is output element (row p / columns, flat column p %
 * columns); sum b is a product of its weight (KMma.prod_at, prod_rows) at the weight row that
 * column reads (the weight's index at k = 0, over k), summed over A's parts (each weight's block
 * is [a_parts * M][prod_rows]). */
static void put_epilogue(Render *R, const KMma *m, int level) {
  const char *mv = R->var_name[m->m_var];
  long long cols = (long long)m->n_total;
  char prod[96];
  planes_end(prod, sizeof prod, m);
  int L = open_items(R, m, level, cols);
  rc_line(R, L, "const i64 lt_nn = lt_p %% %lldLL;", cols);
  bind_columns(R, m, L, "lt_nn");
  rc_line(R, L, "const float *lt_prod = (const float *)(%s);", prod);
  for (int b = 0; b < m->nb; b++) {
    const Expr *w = m->b[b];
    rc_line(R, L, "i64 lt_row%d;", b);
    rc_line(R, L, "{");
    rc_line(R, L + 1, "const i64 %s = 0;", R->var_name[m->k_var]);
    rc_put_assign(R, L + 1, "const i64 lt_wi", rc_flat_index(R, &R->lp->bufs[w->ival], w->n, w->a));
    rc_line(R, L + 1, "lt_row%d = lt_wi / %lldLL;", b, (long long)m->k_extent);
    rc_line(R, L, "}");
    long long at = (long long)m->prod_at[b] * m->a_parts, rows = (long long)m->prod_rows[b];
    if (m->a_parts == 1)
      rc_line(R, L, "const float %s = lt_prod[lt_M * %lldLL + %s * %lldLL + lt_row%d];", R->tmp_name[m->acc_tmp[b]], at,
              mv, rows, b);
    else /* the hi part's product, then the lo part's, M rows below it */
      rc_line(R, L, "const float %s = lt_prod[lt_M * %lldLL + %s * %lldLL + lt_row%d] + lt_prod[lt_M * %lldLL + %s * %lldLL + lt_row%d];",
              R->tmp_name[m->acc_tmp[b]], at, mv, rows, b, at + rows, mv, rows, b);
  }
  rc_put_stmt(R, m->store, L);
  close_items(R, L);
}

void rc_put_mma(Render *R, const KStmt *s, int level) {
  const KMma *m = s->mma;
  if (!m || m->nb < 1 || m->nb > 2 || m->k_extent % m->bk || (m->bk != 16 && m->bk != 32) || m->a_parts < 1 ||
      m->a_parts > 2 || !R->kk->scratch) {
    rc_fail(R, "malformed tensor-core statement");
    return;
  }
  if (m->role == MMA_PACK) {
    put_pack(R, m, level);
    return;
  }
  if (m->role == MMA_EPILOGUE) {
    put_epilogue(R, m, level);
    return;
  }
  const char *mv = R->var_name[m->m_var];
  const int nb = m->nb, parts = m->a_parts, bk = m->bk;
  const int wcols = 32 / nb; /* output columns per warp */
  const int tiles = 4 / nb;  /* n8 tiles per weight per warp */
  /* as many ring buffers as fit the block's static shared memory (48 KB), at most 4 */
  const int stage_bytes = (parts * 64 + 128) * (bk + 8) * 2;
  int stages = m->smem_limit / stage_bytes;
  if (stages > 4) stages = 4;
  const long long kt_count = (long long)(m->k_extent / bk);
  const long long nblocks = (long long)((m->n_total + 128 / nb - 1) / (128 / nb));
  int L = level;
  rc_line(R, L++, "{");
  rc_line(R, L, "const int lt_tid = threadIdx.x, lt_lane = lt_tid & 31, lt_warp = lt_tid >> 5;");
  rc_line(R, L, "const int lt_g = lt_lane >> 2, lt_t = lt_lane & 3, lt_wm = lt_warp & 1, lt_wn = lt_warp >> 1;");
  rc_put_assign(R, L, "const i64 lt_M", m->m_extent);
  rc_line(R, L, "const i64 lt_mb = (lt_M + 63) / 64, lt_tiles = lt_mb * %lldLL;", nblocks);
  /* the grid is tiles x splits (lower_mma.c); block b computes tile b %% tiles, k part b / tiles */
  if (m->split_max > 1)
    rc_line(R, L, "const int lt_S = (int)((i64)gridDim.x / lt_tiles), lt_split = (int)((i64)blockIdx.x / lt_tiles);");
  else
    rc_line(R, L, "const int lt_S = 1, lt_split = 0;");
  rc_line(R, L, "const i64 lt_tile = (i64)blockIdx.x %% lt_tiles;");
  rc_line(R, L, "const i64 lt_m0 = (lt_tile %% lt_mb) * 64;");
  rc_line(R, L, "const i64 lt_n0 = (lt_tile / lt_mb) * %d;", 128 / nb);
  rc_line(R, L, "const int lt_per = (%lld + lt_S - 1) / lt_S, lt_kt0 = lt_split * lt_per;", kt_count);
  rc_line(R, L, "const int lt_nkt = %lld - lt_kt0 < lt_per ? %lld - lt_kt0 : lt_per; /* may be 0 or less */", kt_count,
       kt_count);
  rc_line(R, L, "const unsigned short *lt_A = (const unsigned short *)(lt_scratch + %d);", MMA_COUNTERS / 4);
  rc_line(R, L, "__shared__ __align__(16) unsigned short lt_sa[%d][%d][64][%d];", stages, parts, bk + 8);
  rc_line(R, L, "__shared__ __align__(16) unsigned short lt_sb[%d][128][%d];", stages, bk + 8);
  rc_line(R, L, "float lt_c[2][4][4];");
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_i = 0; lt_i < 32; lt_i++) (&lt_c[0][0][0])[lt_i] = 0.0f;");
  /* prologue: the first stages-1 k steps in flight */
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_ps = 0; lt_ps < %d; lt_ps++) {", stages - 1);
  put_stage_group(R, m, L + 1, "lt_ps", "lt_ps");
  rc_line(R, L, "}");
  rc_line(R, L, "for (int lt_kt = 0; lt_kt < lt_nkt; lt_kt++) {");
  L++;
  /* step kt's copies have landed once at most stages-2 later groups are pending; the barrier also
   * tells every warp that the buffer refilled below is no longer read (it held step kt-1) */
  rc_line(R, L, "lt_cp_async_wait_group<%d>();", stages - 2);
  rc_line(R, L, "__syncthreads();");
  rc_line(R, L, "{");
  rc_line(R, L + 1, "const int lt_nk = lt_kt + %d, lt_nbuf = lt_nk %% %d;", stages - 1, stages);
  put_stage_group(R, m, L + 1, "lt_nk", "lt_nbuf");
  rc_line(R, L, "}");
  rc_line(R, L, "const int lt_cb = lt_kt %% %d;", stages);
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_kk = 0; lt_kk < %d; lt_kk += 16) {", bk);
  L++;
  rc_line(R, L, "unsigned int lt_a[%d][2][4], lt_b[4][2];", parts);
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_s = 0; lt_s < %d; lt_s++)", parts);
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_mt = 0; lt_mt < 2; lt_mt++)");
  rc_line(R, L + 2,
       "lt_ldsm_x4(lt_a[lt_s][lt_mt], lt_smem_u32(&lt_sa[lt_cb][lt_s][lt_wm * 32 + lt_mt * 16 + (lt_lane & 15)]"
       "[lt_kk + (lt_lane >> 4) * 8]));");
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_pr = 0; lt_pr < 2; lt_pr++) {");
  /* the shared rows of n8 tiles 2pr and 2pr+1: weight pr / (2 / nb)'s rows of this warp's columns */
  if (nb == 1)
    rc_line(R, L + 1, "const int lt_base = lt_wn * 32 + lt_pr * 16;");
  else
    rc_line(R, L + 1, "const int lt_base = lt_pr * 64 + lt_wn * 16;");
  rc_line(R, L + 1, "unsigned int lt_w[4];");
  rc_line(R, L + 1,
       "lt_ldsm_x4(lt_w, lt_smem_u32(&lt_sb[lt_cb][lt_base + (lt_lane & 7) + ((lt_lane >> 4) << 3)]"
       "[lt_kk + ((lt_lane >> 3) & 1) * 8]));");
  rc_line(R, L + 1, "lt_b[2 * lt_pr][0] = lt_w[0];");
  rc_line(R, L + 1, "lt_b[2 * lt_pr][1] = lt_w[1];");
  rc_line(R, L + 1, "lt_b[2 * lt_pr + 1][0] = lt_w[2];");
  rc_line(R, L + 1, "lt_b[2 * lt_pr + 1][1] = lt_w[3];");
  rc_line(R, L, "}");
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_mt = 0; lt_mt < 2; lt_mt++)");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_j = 0; lt_j < 4; lt_j++)");
  rc_line(R, L + 2, "#pragma unroll");
  rc_line(R, L + 2, "for (int lt_s = 0; lt_s < %d; lt_s++)", parts);
  rc_line(R, L + 3, "lt_mma_bf16(lt_c[lt_mt][lt_j], lt_a[lt_s][lt_mt], lt_b[lt_j][0], lt_b[lt_j][1]);");
  L--;
  rc_line(R, L, "}");
  L--;
  rc_line(R, L, "}");
  rc_line(R, L, "lt_cp_async_wait_group<0>();");
  put_split_sum(R, m, L);
  /* epilogue: element e of tile (mt, j) is (row mt*16 + g + 8*(e/2), column j*8 + 2t + e%2) */
  rc_line(R, L++, "if (lt_last) {");
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_mt = 0; lt_mt < 2; lt_mt++)");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_j = 0; lt_j < %d; lt_j++)", tiles);
  rc_line(R, L + 2, "#pragma unroll");
  rc_line(R, L + 2, "for (int lt_e = 0; lt_e < 4; lt_e++) {");
  int E = L + 3;
  rc_line(R, E, "const i64 %s = lt_m0 + lt_wm * 32 + lt_mt * 16 + lt_g + ((lt_e >> 1) ? 8 : 0);", mv);
  rc_line(R, E, "const i64 lt_nn = lt_n0 + lt_wn * %d + lt_j * 8 + 2 * lt_t + (lt_e & 1);", wcols);
  rc_line(R, E, "if (%s < lt_M && lt_nn < %lldLL) {", mv, (long long)m->n_total);
  bind_columns(R, m, E + 1, "lt_nn");
  for (int b = 0; b < nb; b++)
    rc_line(R, E + 1, "const float %s = lt_c[lt_mt][%d + lt_j][lt_e];", R->tmp_name[m->acc_tmp[b]], b * tiles);
  rc_put_stmt(R, m->store, E + 1);
  rc_line(R, E, "}");
  rc_line(R, L + 2, "}");
  rc_line(R, --L, "}");
  L--;
  rc_line(R, L, "}");
}
