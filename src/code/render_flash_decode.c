/* CUDA: a KS_FLASH statement with decode = 1 as one flash-decoding kernel on CUDA cores (f32).
 *
 * A block of 4 warps takes one query row, `rows` heads that read the same keys and values (a
 * grouped-query attention's group; KFlash.share) and one chunk of the keys, which it walks in tiles
 * of 32. Per tile: each thread first loads the values it will need for P x V (so they are in flight
 * with the keys); the warps score the keys, a key's dot product spread over `lk` lanes (coalesced
 * loads of a key row, the row's q held in registers) and summed with shuffles, each key read once for
 * all the block's heads; a warp per head folds the tile into an online softmax (running maximum, sum,
 * and the factor that rescales the outputs); then each thread adds its keys' p x v to its column's
 * outputs. A block with the row's only chunk divides and stores. Otherwise it leaves (max, sum,
 * outputs) per head in the scratch and counts itself on the row's counter; the last block to arrive
 * resets the counter and merges the chunks: a warp per head turns the chunks' maxima and sums into
 * weights, then each column adds the chunks' weighted outputs in chunk order (the same sums whichever
 * block is last), several chunks' loads in flight. */
#include "render_common.h"

#define TILE 32       /* keys per tile: one per lane in the softmax step */
#define MAX_CHUNKS 64 /* chunks per row (kernel/lower_flash.c): two per lane in the merge */

static int pow2_at_least(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}

/* v = the max or sum of v over groups of `width` lanes (a power of two), in every lane. */
static void put_warp_all(Render *R, int L, const char *v, int is_max, int width) {
  rc_line(R, L, "#pragma unroll");
  if (is_max)
    rc_line(R, L, "for (int lt_x = %d; lt_x > 0; lt_x >>= 1) %s = fmaxf(%s, __shfl_xor_sync(0xffffffffu, %s, lt_x));",
            width / 2, v, v, v);
  else
    rc_line(R, L, "for (int lt_x = %d; lt_x > 0; lt_x >>= 1) %s += __shfl_xor_sync(0xffffffffu, %s, lt_x);", width / 2, v, v);
}

/* The group variables of the block (the shared axis as its block index lt_sb), from lt_gb. */
static void bind_groups(Render *R, const KFlash *f, int L) {
  int64_t stride = 1;
  for (int i = f->ngroup - 1; i >= 0; i--) {
    int64_t ext = i == f->share ? f->group_ext[i] / f->rows : f->group_ext[i];
    rc_line(R, L, "const i64 %s = (lt_gb / %lldLL) %% %lldLL;", i == f->share ? "lt_sb" : R->var_name[f->group_var[i]],
            (long long)stride, (long long)ext);
    stride *= ext;
  }
}

/* The shared group variable at head `row` of the block (an expression of lt_r, or "0"). */
static void bind_share(Render *R, const KFlash *f, int L, const char *row) {
  if (f->share >= 0) rc_line(R, L, "const i64 %s = lt_sb * %dLL + %s;", R->var_name[f->group_var[f->share]], f->rows, row);
}

/* out = o / l (l NULL: o) per head for column lt_cc (the threads below the width), by the kernel's store */
static void put_store(Render *R, const KFlash *f, int L, const char *o, const char *l) {
  rc_line(R, L, "const i64 lt_cc = lt_tid;");
  rc_bind_flat(R, L, f->value_var, f->value_ext, f->nvalue, "lt_cc");
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_r = 0; lt_r < %d; lt_r++) {", f->rows);
  bind_share(R, f, L + 1, "lt_r");
  if (l)
    rc_line(R, L + 1, "const float %s = %s / %s;", R->tmp_name[f->o_tmp], o, l);
  else
    rc_line(R, L + 1, "const float %s = %s;", R->tmp_name[f->o_tmp], o);
  rc_put_stmt(R, f->store, L + 1);
  rc_line(R, L, "}");
}

void rc_put_flash_decode(Render *R, const KStmt *s, int level) {
  const KFlash *f = s->flash;
  if (!f || !f->decode || f->d_extent < 1 || f->d_extent > 128 || f->width < 1 || f->width > 128 || f->rows < 1 ||
      f->rows > 8 || f->groups % f->rows || (f->share < 0 && f->rows != 1) || f->share >= f->ngroup) {
    rc_fail(R, "malformed flash-decoding statement");
    return;
  }
  const int D = (int)f->d_extent, W = (int)f->width, RW = f->rows;
  const long long GB = (long long)(f->groups / f->rows);
  const int LK = pow2_at_least((D + 3) / 4 < 32 ? (D + 3) / 4 : 32); /* lanes per key */
  const int DJ = (D + LK - 1) / LK, KPW = 32 / LK;                                 /* q per lane, keys per warp */
  const int NPH = 128 / W, VPT = (TILE + NPH - 1) / NPH; /* P x V: threads per column, keys per thread */
  const char *tv = R->var_name[f->t_var], *dv = R->var_name[f->d_var];
  const char *ninf = "-__int_as_float(0x7f800000)";
  const int stride = RW * (W + 2); /* floats of one block's partial state */
  int L = level;
  rc_line(R, L++, "{");
  rc_line(R, L, "const int lt_tid = threadIdx.x, lt_lane = lt_tid & 31, lt_warp = lt_tid >> 5;");
  rc_line(R, L, "const int lt_sub = lt_lane / %d, lt_dl = lt_lane %% %d;", LK, LK);
  rc_put_assign(R, L, "const i64 lt_M", f->m_extent);
  rc_put_assign(R, L, "const i64 lt_T", f->t_extent);
  rc_line(R, L, "const i64 lt_C = (i64)gridDim.x / (lt_M * %lldLL); /* key chunks per row */", GB);
  rc_line(R, L, "const i64 lt_rb = (i64)blockIdx.x / lt_C, lt_c = (i64)blockIdx.x %% lt_C;");
  if (f->m_var >= 0) rc_line(R, L, "const i64 %s = lt_rb / %lldLL;", R->var_name[f->m_var], GB);
  rc_line(R, L, "const i64 lt_gb = lt_rb %% %lldLL;", GB);
  bind_groups(R, f, L);
  rc_line(R, L, "__shared__ float lt_s[%d][%d];", RW, TILE);
  rc_line(R, L, "__shared__ float lt_smax[%d], lt_ssum[%d], lt_salpha[%d];", RW, RW, RW);
  rc_line(R, L, "const i64 lt_per = ((lt_T + %d) / %d + lt_C - 1) / lt_C * %d;", TILE - 1, TILE, TILE);
  rc_line(R, L, "const i64 lt_t0 = lt_c * lt_per;");
  rc_line(R, L, "i64 lt_t1 = lt_mini(lt_t0 + lt_per, lt_T);");
  if (f->t_last) {
    rc_line(R, L, "{");
    rc_put_assign(R, L + 1, "const i64 lt_tl", f->t_last);
    rc_line(R, L + 1, "lt_t1 = lt_mini(lt_t1, lt_tl + 1);");
    rc_line(R, L, "}");
  }
  /* q of the block's heads: lane dl holds elements dl, dl + lk, ... */
  rc_line(R, L, "float lt_q[%d][%d];", RW, DJ);
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_r = 0; lt_r < %d; lt_r++) {", RW);
  bind_share(R, f, L + 1, "lt_r");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_j = 0; lt_j < %d; lt_j++) {", DJ);
  rc_line(R, L + 2, "const i64 %s = lt_dl + lt_j * %d;", dv, LK);
  rc_line(R, L + 2, "lt_q[lt_r][lt_j] = 0.0f;");
  rc_line(R, L + 2, "if (%s < %d) {", dv, D);
  rc_put_assign(R, L + 3, "lt_q[lt_r][lt_j]", f->q);
  rc_line(R, L + 2, "}");
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  rc_line(R, L, "if (lt_tid < %d) {", RW);
  rc_line(R, L + 1, "lt_smax[lt_tid] = %s;", ninf);
  rc_line(R, L + 1, "lt_ssum[lt_tid] = 0.0f;");
  rc_line(R, L, "}");
  rc_line(R, L, "__syncthreads();");
  rc_line(R, L, "const int lt_col = lt_tid %% %d, lt_ph = lt_tid / %d; /* P x V: column, key phase */", W, W);
  rc_line(R, L, "float lt_o[%d];", RW);
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_r = 0; lt_r < %d; lt_r++) lt_o[lt_r] = 0.0f;", RW);
  rc_line(R, L, "for (i64 lt_k0 = lt_t0; lt_k0 < lt_t1; lt_k0 += %d) {", TILE);
  L++;
  /* this thread's values of the tile */
  rc_line(R, L, "float lt_vr[%d];", VPT);
  rc_line(R, L, "{");
  bind_share(R, f, L + 1, "0");
  rc_line(R, L + 1, "const i64 lt_cc = lt_col;");
  rc_bind_flat(R, L + 1, f->value_var, f->value_ext, f->nvalue, "lt_cc");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_i = 0; lt_i < %d; lt_i++) {", VPT);
  rc_line(R, L + 2, "const int lt_kk = lt_ph + lt_i * %d;", NPH);
  rc_line(R, L + 2, "const i64 %s = lt_k0 + lt_kk;", tv);
  rc_line(R, L + 2, "lt_vr[lt_i] = 0.0f;");
  rc_line(R, L + 2, "if (lt_ph < %d && lt_kk < %d && %s < lt_t1) {", NPH, TILE, tv);
  rc_put_assign(R, L + 3, "lt_vr[lt_i]", f->v);
  rc_line(R, L + 2, "}");
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  /* scores: key lt_kk of the tile on lanes lt_sub * lk .. + lk of its warp */
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_i = 0; lt_i < %d; lt_i++) {", TILE / (4 * KPW));
  rc_line(R, L + 1, "const int lt_kk = lt_i * %d + lt_warp * %d + lt_sub;", 4 * KPW, KPW);
  rc_line(R, L + 1, "const i64 lt_tk = lt_k0 + lt_kk;");
  rc_line(R, L + 1, "float lt_a[%d];", RW);
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_r = 0; lt_r < %d; lt_r++) lt_a[lt_r] = 0.0f;", RW);
  rc_line(R, L + 1, "if (lt_tk < lt_t1) {");
  bind_share(R, f, L + 2, "0");
  rc_line(R, L + 2, "const i64 %s = lt_tk;", tv);
  rc_line(R, L + 2, "#pragma unroll");
  rc_line(R, L + 2, "for (int lt_j = 0; lt_j < %d; lt_j++) {", DJ);
  rc_line(R, L + 3, "const i64 %s = lt_dl + lt_j * %d;", dv, LK);
  rc_line(R, L + 3, "if (%s < %d) {", dv, D);
  rc_line(R, L + 4, "float lt_kv;");
  rc_put_assign(R, L + 4, "lt_kv", f->k);
  rc_line(R, L + 4, "#pragma unroll");
  rc_line(R, L + 4, "for (int lt_r = 0; lt_r < %d; lt_r++) lt_a[lt_r] += lt_q[lt_r][lt_j] * lt_kv;", RW);
  rc_line(R, L + 3, "}");
  rc_line(R, L + 2, "}");
  rc_line(R, L + 1, "}");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_r = 0; lt_r < %d; lt_r++)", RW);
  put_warp_all(R, L + 2, "lt_a[lt_r]", 0, LK);
  rc_line(R, L + 1, "if (lt_dl == 0) {");
  rc_line(R, L + 2, "#pragma unroll");
  rc_line(R, L + 2, "for (int lt_r = 0; lt_r < %d; lt_r++) {", RW);
  bind_share(R, f, L + 3, "lt_r");
  rc_line(R, L + 3, "const i64 %s = lt_tk;", tv);
  rc_line(R, L + 3, "const float %s = lt_a[lt_r];", R->tmp_name[f->s_tmp]);
  rc_line(R, L + 3, "float lt_sc = %s;", ninf);
  rc_line(R, L + 3, "if (%s < lt_t1) {", tv);
  rc_put_assign(R, L + 4, "lt_sc", f->score);
  rc_line(R, L + 3, "}");
  rc_line(R, L + 3, "lt_s[lt_r][lt_kk] = lt_sc;");
  rc_line(R, L + 2, "}");
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  rc_line(R, L, "__syncthreads();");
  /* online softmax: a warp per head; p replaces the score in lt_s */
  rc_line(R, L, "for (int lt_r = lt_warp; lt_r < %d; lt_r += 4) {", RW);
  rc_line(R, L + 1, "const float lt_sv = lt_s[lt_r][lt_lane];");
  rc_line(R, L + 1, "float lt_bm = lt_sv;");
  put_warp_all(R, L + 1, "lt_bm", 1, 32);
  rc_line(R, L + 1, "const float lt_mold = lt_smax[lt_r], lt_mnew = fmaxf(lt_mold, lt_bm);");
  rc_line(R, L + 1, "const float lt_base = lt_mnew == %s ? 0.0f : lt_mnew; /* no key seen yet */", ninf);
  rc_line(R, L + 1, "const float lt_p = expf(lt_sv - lt_base);");
  rc_line(R, L + 1, "lt_s[lt_r][lt_lane] = lt_p;");
  rc_line(R, L + 1, "float lt_ps = lt_p;");
  put_warp_all(R, L + 1, "lt_ps", 0, 32);
  rc_line(R, L + 1, "if (lt_lane == 0) {");
  rc_line(R, L + 2, "const float lt_al = expf(lt_mold - lt_base);");
  rc_line(R, L + 2, "lt_salpha[lt_r] = lt_al;");
  rc_line(R, L + 2, "lt_ssum[lt_r] = lt_ssum[lt_r] * lt_al + lt_ps;");
  rc_line(R, L + 2, "lt_smax[lt_r] = lt_mnew;");
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  rc_line(R, L, "__syncthreads();");
  /* P x V */
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_r = 0; lt_r < %d; lt_r++) lt_o[lt_r] *= lt_salpha[lt_r];", RW);
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_i = 0; lt_i < %d; lt_i++) {", VPT);
  rc_line(R, L + 1, "const int lt_kk = lt_ph + lt_i * %d;", NPH);
  rc_line(R, L + 1, "if (lt_kk < %d) {", TILE);
  rc_line(R, L + 2, "#pragma unroll");
  rc_line(R, L + 2, "for (int lt_r = 0; lt_r < %d; lt_r++) lt_o[lt_r] += lt_s[lt_r][lt_kk] * lt_vr[lt_i];", RW);
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  rc_line(R, L, "__syncthreads(); /* before the next tile's scores */");
  L--;
  rc_line(R, L, "}");
  /* the key phases of each column into phase 0 */
  if (NPH > 1) {
    rc_line(R, L, "__shared__ float lt_red[%d][%d][%d];", NPH - 1, RW, W);
    rc_line(R, L, "if (lt_ph > 0 && lt_ph < %d)", NPH);
    rc_line(R, L + 1, "#pragma unroll");
    rc_line(R, L + 1, "for (int lt_r = 0; lt_r < %d; lt_r++) lt_red[lt_ph - 1][lt_r][lt_col] = lt_o[lt_r];", RW);
    rc_line(R, L, "__syncthreads();");
    rc_line(R, L, "if (lt_ph == 0)");
    rc_line(R, L + 1, "for (int lt_x = 0; lt_x < %d; lt_x++)", NPH - 1);
    rc_line(R, L + 2, "#pragma unroll");
    rc_line(R, L + 2, "for (int lt_r = 0; lt_r < %d; lt_r++) lt_o[lt_r] += lt_red[lt_x][lt_r][lt_col];", RW);
  }
  rc_line(R, L, "if (lt_C == 1) {");
  rc_line(R, L + 1, "if (lt_tid < %d) {", W);
  put_store(R, f, L + 2, "lt_o[lt_r]", "lt_ssum[lt_r]");
  rc_line(R, L + 1, "}");
  rc_line(R, L, "} else {");
  L++;
  rc_line(R, L, "float *lt_part = (float *)(lt_scratch + %d); /* after the row counters */", MMA_COUNTERS / 4);
  rc_line(R, L, "float *lt_mine = lt_part + (i64)blockIdx.x * %d;", stride);
  rc_line(R, L, "if (lt_tid < %d)", W);
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_r = 0; lt_r < %d; lt_r++) __stcg(&lt_mine[lt_r * %d + 2 + lt_tid], lt_o[lt_r]);", RW, W + 2);
  rc_line(R, L, "if (lt_tid < %d) {", RW);
  rc_line(R, L + 1, "__stcg(&lt_mine[lt_tid * %d], lt_smax[lt_tid]);", W + 2);
  rc_line(R, L + 1, "__stcg(&lt_mine[lt_tid * %d + 1], lt_ssum[lt_tid]);", W + 2);
  rc_line(R, L, "}");
  rc_put_arrive(R, L, "lt_rb", "lt_C");
  rc_line(R, L, "if (lt_arrived_last) {");
  L++;
  rc_line(R, L, "__threadfence();");
  rc_line(R, L, "const float *lt_row = lt_part + lt_rb * lt_C * %d;", stride);
  /* each chunk's weight per head, exp(max_k - max) / sum: a warp per head, a lane per chunk */
  rc_line(R, L, "__shared__ float lt_w[%d][%d];", MAX_CHUNKS, RW);
  rc_line(R, L, "for (int lt_r = lt_warp; lt_r < %d; lt_r += 4) {", RW);
  rc_line(R, L + 1, "float lt_m[2] = {%s, %s}, lt_sm[2] = {0.0f, 0.0f};", ninf, ninf);
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_h = 0; lt_h < 2; lt_h++)");
  rc_line(R, L + 2, "if (lt_lane + 32 * lt_h < lt_C) {");
  rc_line(R, L + 3, "lt_m[lt_h] = __ldcg(&lt_row[(lt_lane + 32 * lt_h) * %d + lt_r * %d]);", stride, W + 2);
  rc_line(R, L + 3, "lt_sm[lt_h] = __ldcg(&lt_row[(lt_lane + 32 * lt_h) * %d + lt_r * %d + 1]);", stride, W + 2);
  rc_line(R, L + 2, "}");
  rc_line(R, L + 1, "float lt_mx = fmaxf(lt_m[0], lt_m[1]);");
  put_warp_all(R, L + 1, "lt_mx", 1, 32);
  rc_line(R, L + 1, "const float lt_base = lt_mx == %s ? 0.0f : lt_mx;", ninf);
  rc_line(R, L + 1, "const float lt_a0 = expf(lt_m[0] - lt_base), lt_a1 = expf(lt_m[1] - lt_base);");
  rc_line(R, L + 1, "float lt_l = lt_sm[0] * lt_a0 + lt_sm[1] * lt_a1;");
  put_warp_all(R, L + 1, "lt_l", 0, 32);
  rc_line(R, L + 1, "if (lt_lane < lt_C) lt_w[lt_lane][lt_r] = lt_a0 / lt_l;");
  rc_line(R, L + 1, "if (lt_lane + 32 < lt_C) lt_w[lt_lane + 32][lt_r] = lt_a1 / lt_l;");
  rc_line(R, L, "}");
  rc_line(R, L, "__syncthreads();");
  /* the weighted sum of the chunks' outputs, several chunks' loads in flight */
  rc_line(R, L, "if (lt_tid < %d) {", W);
  L++;
  rc_line(R, L, "float lt_acc[%d];", RW);
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_r = 0; lt_r < %d; lt_r++) lt_acc[lt_r] = 0.0f;", RW);
  rc_line(R, L, "#pragma unroll 4");
  rc_line(R, L, "for (int lt_k = 0; lt_k < (int)lt_C; lt_k++)");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_r = 0; lt_r < %d; lt_r++)", RW);
  rc_line(R, L + 2, "lt_acc[lt_r] += lt_w[lt_k][lt_r] * __ldcg(&lt_row[lt_k * %d + lt_r * %d + 2 + lt_tid]);", stride, W + 2);
  put_store(R, f, L, "lt_acc[lt_r]", NULL);
  L--;
  rc_line(R, L, "}");
  L--;
  rc_line(R, L, "}");
  L--;
  rc_line(R, L, "}");
  L--;
  rc_line(R, L, "}");
}
