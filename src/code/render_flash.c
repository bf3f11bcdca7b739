/* CUDA: a KS_FLASH statement as one flash-attention kernel on tensor cores (mma.sync.m16n8k16, bf16
 * inputs, f32 accumulators).
 *
 * A block of 4 warps takes 64 query rows of one column group (a head); each warp owns 16 rows. The
 * warp keeps its rows of Q as A fragments in registers for the whole kernel, then walks the keys in
 * tiles of 32: the block stages K's and V's rows of the tile in shared memory as bf16 (hi and lo
 * planes at parts = 2), each warp computes its 16 x 32 scores with MMAs, applies the score
 * expression (scale, mask) per element, and folds them into an online softmax: the running row
 * maximum, the running sum of exp(score - maximum), and the output accumulators, rescaled whenever
 * the maximum grows. The exponentials become the A fragments of P x V directly from the score
 * registers (an m16n8 accumulator tile has the layout of half an m16k16 A fragment), and V's
 * fragments come from shared memory with ldmatrix.trans. At the end each output is divided by its
 * row's sum and stored by the kernel's store. A causal mask (KFlash.t_last) ends the walk at the last
 * key the block's last row can see. Rows past the end are clamped to the last one and their results
 * dropped; keys past the end are staged from the last key and scored -inf. */
#include <stdio.h>
#include "render_common.h"

#define KEYS 32 /* keys per tile */

/* Two f32 values (lt_x[0], lt_x[1]) as bf16 pairs: the hi pair into `hi`, the lo pair into `lo`. */
static void put_split(Render *R, int level, int parts, const char *hi, const char *lo) {
  if (parts == 2)
    rc_line(R, level, "lt_split_bf16x2(lt_x[0], lt_x[1], &%s, &%s);", hi, lo);
  else
    rc_line(R, level, "%s = lt_pack_bf16x2(lt_x[0], lt_x[1]);", hi);
}

/* Stages `rows` x `cols` values of expression e into shared planes `smem` (bf16, rows padded by 8),
 * one pair of columns per step; `bind` names the column variables from lt_col + lt_j. */
static void put_stage(Render *R, const KFlash *f, int L, const char *smem, int64_t cols, Expr *e, int values) {
  const char *tv = R->var_name[f->t_var];
  rc_line(R, L, "#pragma unroll 4");
  rc_line(R, L, "for (int lt_p = lt_tid; lt_p < %lld; lt_p += 128) {", (long long)(KEYS * cols / 2));
  rc_line(R, L + 1, "const int lt_row = lt_p / %lld, lt_col = (lt_p %% %lld) * 2;", (long long)(cols / 2),
       (long long)(cols / 2));
  rc_line(R, L + 1, "const i64 %s = lt_mini(lt_t0 + lt_row, lt_T - 1);", tv);
  rc_line(R, L + 1, "float lt_x[2];");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_j = 0; lt_j < 2; lt_j++) {");
  if (values) {
    rc_line(R, L + 2, "const i64 lt_cc = lt_col + lt_j;");
    rc_bind_flat(R, L + 2, f->value_var, f->value_ext, f->nvalue, "lt_cc");
  } else {
    rc_line(R, L + 2, "const i64 %s = lt_col + lt_j;", R->var_name[f->d_var]);
  }
  rc_put_assign(R, L + 2, "lt_x[lt_j]", e);
  rc_line(R, L + 1, "}");
  if (f->parts == 2)
    rc_line(R, L + 1,
         "lt_split_bf16x2(lt_x[0], lt_x[1], (unsigned int *)&%s[0][lt_row][lt_col], "
         "(unsigned int *)&%s[1][lt_row][lt_col]);",
         smem, smem);
  else
    rc_line(R, L + 1, "*(unsigned int *)&%s[0][lt_row][lt_col] = lt_pack_bf16x2(lt_x[0], lt_x[1]);", smem);
  rc_line(R, L, "}");
}

/* d += a * b for the parts (hi*hi, and at parts = 2 lo*hi and hi*lo): a[part] an A fragment, b the
 * registers first and first + 1 of ldmatrix result w[part] */
static void put_mmas(Render *R, int L, int parts, const char *d, const char *a, const char *w, int first) {
  rc_line(R, L, "lt_mma_bf16(%s, %s[0], %s[0][%d], %s[0][%d]);", d, a, w, first, w, first + 1);
  if (parts == 2) {
    rc_line(R, L, "lt_mma_bf16(%s, %s[1], %s[0][%d], %s[0][%d]);", d, a, w, first, w, first + 1);
    rc_line(R, L, "lt_mma_bf16(%s, %s[0], %s[1][%d], %s[1][%d]);", d, a, w, first, w, first + 1);
  }
}

void rc_put_flash(Render *R, const KStmt *s, int level) {
  const KFlash *f = s->flash;
  if (!f || f->parts < 1 || f->parts > 2 || f->d_extent % 16 || f->d_extent > 128 || f->width % 16 || f->width > 128 ||
      f->groups < 1) {
    rc_fail(R, "malformed flash-attention statement");
    return;
  }
  const int parts = f->parts;
  const long long D = (long long)f->d_extent, W = (long long)f->width, G = (long long)f->groups;
  const char *mv = R->var_name[f->m_var], *tv = R->var_name[f->t_var], *dv = R->var_name[f->d_var];
  int L = level;
  rc_line(R, L++, "{");
  rc_line(R, L, "const int lt_tid = threadIdx.x, lt_lane = lt_tid & 31, lt_warp = lt_tid >> 5;");
  rc_line(R, L, "const int lt_r = lt_lane >> 2, lt_q = lt_lane & 3;");
  rc_put_assign(R, L, "const i64 lt_M", f->m_extent);
  rc_put_assign(R, L, "const i64 lt_T", f->t_extent);
  rc_line(R, L, "const i64 lt_gi = (i64)blockIdx.x %% %lldLL, lt_m0 = ((i64)blockIdx.x / %lldLL) * 64;", G, G);
  rc_bind_flat(R, L, f->group_var, f->group_ext, f->ngroup, "lt_gi");
  rc_line(R, L, "__shared__ __align__(16) unsigned short lt_sk[%d][%d][%lld];", parts, KEYS, D + 8);
  rc_line(R, L, "__shared__ __align__(16) unsigned short lt_sv[%d][%d][%lld];", parts, KEYS, W + 8);
  /* this warp's rows of Q as A fragments: element pair i of k step ks is (row r + 8 (i & 1), k 2q + 8 (i >> 1)) */
  rc_line(R, L, "unsigned int lt_qf[%lld][%d][4];", D / 16, parts);
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_ks = 0; lt_ks < %lld; lt_ks++) {", D / 16);
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_i = 0; lt_i < 4; lt_i++) {");
  rc_line(R, L + 2, "const i64 %s = lt_mini(lt_m0 + lt_warp * 16 + lt_r + (lt_i & 1) * 8, lt_M - 1);", mv);
  rc_line(R, L + 2, "float lt_x[2];");
  rc_line(R, L + 2, "#pragma unroll");
  rc_line(R, L + 2, "for (int lt_j = 0; lt_j < 2; lt_j++) {");
  rc_line(R, L + 3, "const i64 %s = lt_ks * 16 + (lt_i >> 1) * 8 + 2 * lt_q + lt_j;", dv);
  rc_put_assign(R, L + 3, "lt_x[lt_j]", f->q);
  rc_line(R, L + 2, "}");
  put_split(R, L + 2, parts, "lt_qf[lt_ks][0][lt_i]", "lt_qf[lt_ks][1][lt_i]");
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  rc_line(R, L, "float lt_o[%lld][4];", W / 8);
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_i = 0; lt_i < %lld; lt_i++) lt_o[lt_i >> 2][lt_i & 3] = 0.0f;", W / 2);
  rc_line(R, L, "float lt_mx[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)}, lt_l[2] = {0.0f, 0.0f};");
  rc_line(R, L, "i64 lt_tend = lt_T;");
  if (f->t_last) { /* the last key the block's last row sees */
    rc_line(R, L, "{");
    rc_line(R, L + 1, "const i64 %s = lt_mini(lt_m0 + 63, lt_M - 1);", mv);
    rc_put_assign(R, L + 1, "const i64 lt_tl", f->t_last);
    rc_line(R, L + 1, "lt_tend = lt_mini(lt_T, lt_tl + 1);");
    rc_line(R, L, "}");
  }
  rc_line(R, L, "for (i64 lt_t0 = 0; lt_t0 < lt_tend; lt_t0 += %d) {", KEYS);
  L++;
  rc_line(R, L, "__syncthreads(); /* every warp is done with the last tile */");
  put_stage(R, f, L, "lt_sk", f->d_extent, f->k, 0);
  put_stage(R, f, L, "lt_sv", f->width, f->v, 1);
  rc_line(R, L, "__syncthreads();");
  /* scores: n8 tiles j of keys t0 + 8j .. */
  rc_line(R, L, "float lt_s[4][4];");
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_i = 0; lt_i < 16; lt_i++) lt_s[lt_i >> 2][lt_i & 3] = 0.0f;");
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_ks = 0; lt_ks < %lld; lt_ks++) {", D / 16);
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_pr = 0; lt_pr < 2; lt_pr++) {");
  rc_line(R, L + 2, "unsigned int lt_w[%d][4];", parts);
  rc_line(R, L + 2, "#pragma unroll");
  rc_line(R, L + 2, "for (int lt_sp = 0; lt_sp < %d; lt_sp++)", parts);
  rc_line(R, L + 3,
       "lt_ldsm_x4(lt_w[lt_sp], lt_smem_u32(&lt_sk[lt_sp][lt_pr * 16 + (lt_lane & 7) + ((lt_lane >> 4) << 3)]"
       "[lt_ks * 16 + ((lt_lane >> 3) & 1) * 8]));");
  put_mmas(R, L + 2, parts, "lt_s[2 * lt_pr]", "lt_qf[lt_ks]", "lt_w", 0);
  put_mmas(R, L + 2, parts, "lt_s[2 * lt_pr + 1]", "lt_qf[lt_ks]", "lt_w", 2);
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  /* the score expression per element: (row r + 8 (e >> 1), key 8j + 2q + (e & 1)) */
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_j = 0; lt_j < 4; lt_j++)");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_e = 0; lt_e < 4; lt_e++) {");
  rc_line(R, L + 2, "const i64 %s = lt_mini(lt_m0 + lt_warp * 16 + lt_r + (lt_e >> 1) * 8, lt_M - 1);", mv);
  rc_line(R, L + 2, "const i64 %s = lt_t0 + lt_j * 8 + 2 * lt_q + (lt_e & 1);", tv);
  rc_line(R, L + 2, "const float %s = lt_s[lt_j][lt_e];", R->tmp_name[f->s_tmp]);
  rc_line(R, L + 2, "if (%s < lt_T) {", tv);
  rc_put_assign(R, L + 3, "lt_s[lt_j][lt_e]", f->score);
  rc_line(R, L + 2, "} else {");
  rc_line(R, L + 3, "lt_s[lt_j][lt_e] = -__int_as_float(0x7f800000);");
  rc_line(R, L + 2, "}");
  rc_line(R, L + 1, "}");
  /* online softmax: rows r (h = 0) and r + 8 (h = 1); a row's values sit in the 4 lanes of a quad */
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_h = 0; lt_h < 2; lt_h++) {");
  rc_line(R, L + 1, "float lt_bm = lt_mx[lt_h];");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1,
          "for (int lt_j = 0; lt_j < 4; lt_j++) lt_bm = fmaxf(lt_bm, fmaxf(lt_s[lt_j][2 * lt_h], "
          "lt_s[lt_j][2 * lt_h + 1]));");
  rc_line(R, L + 1, "lt_bm = fmaxf(lt_bm, __shfl_xor_sync(0xffffffffu, lt_bm, 1));");
  rc_line(R, L + 1, "lt_bm = fmaxf(lt_bm, __shfl_xor_sync(0xffffffffu, lt_bm, 2));");
  rc_line(R, L + 1, "const float lt_base = lt_bm == -__int_as_float(0x7f800000) ? 0.0f : lt_bm; /* no key seen yet */");
  rc_line(R, L + 1, "const float lt_scale = expf(lt_mx[lt_h] - lt_base);");
  rc_line(R, L + 1, "lt_mx[lt_h] = lt_bm;");
  rc_line(R, L + 1, "lt_l[lt_h] *= lt_scale;");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_j = 0; lt_j < %lld; lt_j++) {", W / 8);
  rc_line(R, L + 2, "lt_o[lt_j][2 * lt_h] *= lt_scale;");
  rc_line(R, L + 2, "lt_o[lt_j][2 * lt_h + 1] *= lt_scale;");
  rc_line(R, L + 1, "}");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_j = 0; lt_j < 4; lt_j++)");
  rc_line(R, L + 2, "#pragma unroll");
  rc_line(R, L + 2, "for (int lt_e = 2 * lt_h; lt_e < 2 * lt_h + 2; lt_e++) {");
  rc_line(R, L + 3, "const float lt_pv = expf(lt_s[lt_j][lt_e] - lt_base);");
  rc_line(R, L + 3, "lt_s[lt_j][lt_e] = lt_pv;");
  rc_line(R, L + 3, "lt_l[lt_h] += lt_pv;");
  rc_line(R, L + 2, "}");
  rc_line(R, L, "}");
  /* O += P V over the tile's two k16 steps */
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_kt = 0; lt_kt < 2; lt_kt++) {");
  rc_line(R, L + 1, "unsigned int lt_pf[2][4];");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_i = 0; lt_i < 4; lt_i++) {");
  rc_line(R, L + 2,
          "float lt_x[2] = {lt_s[2 * lt_kt + (lt_i >> 1)][2 * (lt_i & 1)], "
          "lt_s[2 * lt_kt + (lt_i >> 1)][2 * (lt_i & 1) + 1]};");
  put_split(R, L + 2, parts, "lt_pf[0][lt_i]", "lt_pf[1][lt_i]");
  rc_line(R, L + 1, "}");
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_nt = 0; lt_nt < %lld; lt_nt++) {", W / 16);
  rc_line(R, L + 2, "unsigned int lt_w[%d][4];", parts);
  rc_line(R, L + 2, "#pragma unroll");
  rc_line(R, L + 2, "for (int lt_sp = 0; lt_sp < %d; lt_sp++)", parts);
  rc_line(R, L + 3,
       "lt_ldsm_x4_trans(lt_w[lt_sp], lt_smem_u32(&lt_sv[lt_sp][lt_kt * 16 + (lt_lane & 7) + "
       "(((lt_lane >> 3) & 1) << 3)]"
       "[lt_nt * 16 + ((lt_lane >> 4) << 3)]));");
  put_mmas(R, L + 2, parts, "lt_o[2 * lt_nt]", "lt_pf", "lt_w", 0);
  put_mmas(R, L + 2, parts, "lt_o[2 * lt_nt + 1]", "lt_pf", "lt_w", 2);
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  L--;
  rc_line(R, L, "}");
  /* each row's sum over its quad, then the store */
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_h = 0; lt_h < 2; lt_h++) {");
  rc_line(R, L + 1, "lt_l[lt_h] += __shfl_xor_sync(0xffffffffu, lt_l[lt_h], 1);");
  rc_line(R, L + 1, "lt_l[lt_h] += __shfl_xor_sync(0xffffffffu, lt_l[lt_h], 2);");
  rc_line(R, L, "}");
  rc_line(R, L, "#pragma unroll");
  rc_line(R, L, "for (int lt_j = 0; lt_j < %lld; lt_j++)", W / 8);
  rc_line(R, L + 1, "#pragma unroll");
  rc_line(R, L + 1, "for (int lt_e = 0; lt_e < 4; lt_e++) {");
  rc_line(R, L + 2, "const i64 %s = lt_m0 + lt_warp * 16 + lt_r + (lt_e >> 1) * 8;", mv);
  rc_line(R, L + 2, "if (%s < lt_M) {", mv);
  rc_line(R, L + 3, "const i64 lt_cc = lt_j * 8 + 2 * lt_q + (lt_e & 1);");
  rc_bind_flat(R, L + 3, f->value_var, f->value_ext, f->nvalue, "lt_cc");
  rc_line(R, L + 3, "const float %s = lt_o[lt_j][lt_e] / lt_l[lt_e >> 1];", R->tmp_name[f->o_tmp]);
  rc_put_stmt(R, f->store, L + 3);
  rc_line(R, L + 2, "}");
  rc_line(R, L + 1, "}");
  L--;
  rc_line(R, L, "}");
}
