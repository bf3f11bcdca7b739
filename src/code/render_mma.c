/* CUDA: a KS_MMA statement as a tensor-core GEMM (mma.sync.m16n8k16, bf16 inputs, f32 accumulators).
 *
 * Block = 4 warps; warp w computes rows m0 .. m0+15 (m0 = 64 * block row + 16 * w) and columns
 * n0 .. n0+31 as four 16 x 8 tiles. Lane l holds, as the PTX ISA lays the fragments out (g = l / 4,
 * t = l % 4): A words (row g | g+8, k 2t..2t+1 | 2t+8..2t+9), B words (column g, k 2t..2t+1 |
 * 2t+8..2t+9), accumulators (row g | g+8, column 2t, 2t+1). A is evaluated from its expression at
 * each (row, k) it needs (rows past the end are clamped to the last one and their results dropped) and
 * split into bf16 hi + lo; the weights are bf16 already, so two MMAs give about f32 accuracy. Fragments
 * come straight from global memory (L1/L2); no shared-memory staging yet. */
#include <stdio.h>
#include "render_common.h"

static void line(Render *R, int level, const char *text) {
  sb_indent(R->out, level);
  sb_puts(R->out, text);
  sb_putc(R->out, '\n');
}

/* Declares the column variables from the flat column index `flat` (last axis fastest). */
static void bind_columns(Render *R, const KMma *m, int level, const char *flat) {
  int64_t stride = 1;
  for (int i = m->nn - 1; i >= 0; i--) {
    sb_indent(R->out, level);
    sb_printf(R->out, "const i64 %s = (%s / %lldLL) %% %lldLL;\n", R->var_name[m->n_var[i]], flat, (long long)stride,
              (long long)m->n_ext[i]);
    stride *= m->n_ext[i];
  }
}

/* 32-bit word of weight b at k = kexpr (two consecutive bf16) into `dst`. */
static void load_weight_word(Render *R, const KMma *m, int b, int level, const char *dst, const char *kexpr) {
  const Expr *w = m->b[b];
  const LBuf *buf = &R->lp->bufs[w->ival];
  const char *name = R->buf_name[w->ival];
  if (!name) {
    rc_fail(R, "weight buffer %lld is not a parameter", (long long)w->ival);
    return;
  }
  sb_indent(R->out, level);
  sb_puts(R->out, "{\n");
  sb_indent(R->out, level + 1);
  sb_printf(R->out, "const i64 %s = %s;\n", R->var_name[m->k_var], kexpr);
  rc_put_assign(R, level + 1, "const i64 lt_wi", rc_flat_index(R, buf, w->n, w->a));
  sb_indent(R->out, level + 1);
  sb_printf(R->out, "%s = *(const unsigned int *)(%s + lt_wi);\n", dst, name);
  sb_indent(R->out, level);
  sb_puts(R->out, "}\n");
}

void rc_put_mma(Render *R, const KStmt *s, int level) {
  const KMma *m = s->mma;
  StrBuf *o = R->out;
  if (!m || m->nb < 1 || m->nb > 2 || m->n_total % 32 || m->k_extent % 16) {
    rc_fail(R, "malformed tensor-core statement");
    return;
  }
  const char *mv = R->var_name[m->m_var], *kv = R->var_name[m->k_var];
  int L = level;
  line(R, L, "{");
  L++;
  line(R, L, "const int lt_lane = threadIdx.x & 31, lt_g = lt_lane >> 2, lt_t = lt_lane & 3;");
  rc_put_assign(R, L, "const i64 lt_M", m->m_extent);
  sb_indent(o, L);
  sb_printf(o, "const i64 lt_m0 = ((i64)blockIdx.x / %lldLL) * 64 + (threadIdx.x >> 5) * 16;\n", (long long)(m->n_total / 32));
  sb_indent(o, L);
  sb_printf(o, "const i64 lt_n0 = ((i64)blockIdx.x %% %lldLL) * 32;\n", (long long)(m->n_total / 32));
  line(R, L, "if (lt_m0 < lt_M) {");
  L++;
  sb_indent(o, L);
  sb_printf(o, "float lt_c[%d][4][4];\n", m->nb);
  sb_indent(o, L);
  sb_printf(o, "for (int lt_i = 0; lt_i < %d * 16; lt_i++) (&lt_c[0][0][0])[lt_i] = 0.0f;\n", m->nb);
  line(R, L, "const i64 lt_ra = lt_m0 + lt_g < lt_M ? lt_m0 + lt_g : lt_M - 1;");
  line(R, L, "const i64 lt_rb = lt_m0 + lt_g + 8 < lt_M ? lt_m0 + lt_g + 8 : lt_M - 1;");
  sb_indent(o, L);
  sb_printf(o, "for (i64 lt_k0 = 0; lt_k0 < %lldLL; lt_k0 += 16) {\n", (long long)m->k_extent);
  L++;
  line(R, L, "unsigned int lt_ah[4], lt_al[4];");
  line(R, L, "#pragma unroll");
  line(R, L, "for (int lt_r = 0; lt_r < 4; lt_r++) {");
  L++;
  sb_indent(o, L);
  sb_printf(o, "const i64 %s = (lt_r & 1) ? lt_rb : lt_ra;\n", mv);
  line(R, L, "float lt_v[2];");
  line(R, L, "#pragma unroll");
  line(R, L, "for (int lt_j = 0; lt_j < 2; lt_j++) {");
  sb_indent(o, L + 1);
  sb_printf(o, "const i64 %s = lt_k0 + 2 * lt_t + ((lt_r >> 1) ? 8 : 0) + lt_j;\n", kv);
  rc_put_assign(R, L + 1, "lt_v[lt_j]", m->a);
  line(R, L, "}");
  line(R, L, "const unsigned short lt_h0 = lt_f32_to_bf16(lt_v[0]), lt_h1 = lt_f32_to_bf16(lt_v[1]);");
  line(R, L, "const unsigned short lt_l0 = lt_f32_to_bf16(lt_v[0] - lt_bf16_to_f32(lt_h0));");
  line(R, L, "const unsigned short lt_l1 = lt_f32_to_bf16(lt_v[1] - lt_bf16_to_f32(lt_h1));");
  line(R, L, "lt_ah[lt_r] = (unsigned int)lt_h0 | ((unsigned int)lt_h1 << 16);");
  line(R, L, "lt_al[lt_r] = (unsigned int)lt_l0 | ((unsigned int)lt_l1 << 16);");
  L--;
  line(R, L, "}");
  line(R, L, "#pragma unroll");
  line(R, L, "for (int lt_s = 0; lt_s < 4; lt_s++) {");
  L++;
  line(R, L, "const i64 lt_nn = lt_n0 + lt_s * 8 + lt_g;");
  bind_columns(R, m, L, "lt_nn");
  for (int b = 0; b < m->nb && !R->failed; b++) {
    line(R, L, "{");
    line(R, L + 1, "unsigned int lt_b0, lt_b1;");
    load_weight_word(R, m, b, L + 1, "lt_b0", "lt_k0 + 2 * lt_t");
    load_weight_word(R, m, b, L + 1, "lt_b1", "lt_k0 + 2 * lt_t + 8");
    sb_indent(o, L + 1);
    sb_printf(o, "lt_mma_bf16(lt_c[%d][lt_s], lt_ah, lt_b0, lt_b1);\n", b);
    sb_indent(o, L + 1);
    sb_printf(o, "lt_mma_bf16(lt_c[%d][lt_s], lt_al, lt_b0, lt_b1);\n", b);
    line(R, L, "}");
  }
  L--;
  line(R, L, "}");
  L--;
  line(R, L, "}");
  /* epilogue: element e of tile s is (row g + 8 * (e / 2), column s * 8 + 2t + e % 2) */
  line(R, L, "#pragma unroll");
  line(R, L, "for (int lt_s = 0; lt_s < 4; lt_s++) {");
  line(R, L + 1, "#pragma unroll");
  line(R, L + 1, "for (int lt_e = 0; lt_e < 4; lt_e++) {");
  int E = L + 2;
  sb_indent(o, E);
  sb_printf(o, "const i64 %s = lt_m0 + lt_g + ((lt_e >> 1) ? 8 : 0);\n", mv);
  sb_indent(o, E);
  sb_printf(o, "if (%s < lt_M) {\n", mv);
  line(R, E + 1, "const i64 lt_nn = lt_n0 + lt_s * 8 + 2 * lt_t + (lt_e & 1);");
  bind_columns(R, m, E + 1, "lt_nn");
  for (int b = 0; b < m->nb; b++) {
    sb_indent(o, E + 1);
    sb_printf(o, "const float %s = lt_c[%d][lt_s][lt_e];\n", R->tmp_name[m->acc_tmp[b]], b);
  }
  rc_put_stmt(R, m->store, E + 1);
  line(R, E, "}");
  line(R, L + 1, "}");
  line(R, L, "}");
  L--;
  line(R, L, "}");
  L--;
  line(R, L, "}");
}
