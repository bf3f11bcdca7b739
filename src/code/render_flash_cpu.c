/* C: a KS_FLASH statement with decode = 1 as one CPU attention kernel for any number of query rows (a
 * decode step's one, a prefill's many): the scores, the softmax and P x V in one pass over the keys.
 *
 * Each (query row, group) is one work item of an OpenMP loop (interleaved, since a causal row's keys grow
 * with the row). Its query row is copied once; the keys go by tiles of LT_FT: a tile's scores (a dot product
 * over d that the compiler vectorizes) and their maximum, then the running softmax (the outputs and the sum
 * rescaled by exp(old max - new max)) and each key's exp times its V row (vectorized over the values); the
 * exponentials are lt_expf (render_c.c), a polynomial that vectorizes. With a
 * causal mask (KFlash.t_last) the walk stops at the row's last visible key. A row's result depends only on its
 * own keys, in tiles from key 0: the same bits alone or in any batch. */
#include <stdio.h>
#include "render_common.h"
#include "../tile/tile.h"

#define LT_FT 64 /* keys a tile */

/* The value variables from the flat column lt_cc (< width): one value axis is lt_cc itself, which keeps its index
 * affine for the vectorizer. */
static void bind_values(Render *R, const KFlash *f, int level) {
  if (f->nvalue == 1) rc_line(R, level, "const int64_t %s = lt_cc;", R->var_name[f->value_var[0]]);
  else rc_bind_flat(R, level, f->value_var, f->value_ext, f->nvalue, "lt_cc");
}

void rc_put_flash_cpu(Render *R, const KStmt *s, int level) {
  const KFlash *f = s->flash;
  if (!f || f->d_extent < 1 || f->d_extent > 256 || f->width < 1 || f->width > 1024 || f->groups < 1) {
    rc_fail(R, "malformed flash-attention statement");
    return;
  }
  const long long G = (long long)f->groups, D = (long long)f->d_extent, W = (long long)f->width;
  const char *tv = R->var_name[f->t_var], *dv = R->var_name[f->d_var];
  const char *sv = R->tmp_name[f->s_tmp], *ov = R->tmp_name[f->o_tmp];
  int L = level;
  rc_line(R, L++, "{");
  rc_put_assign(R, L, "const int64_t lt_M", f->m_extent);
  rc_put_assign(R, L, "const int64_t lt_T", f->t_extent);
  /* in parallel where the work (rows x groups x keys x (d + values)) pays for a team */
  rc_line(R, L, "#pragma omp parallel for schedule(static, 1) if (%d <= lt_M * %lldLL * lt_T * %lldLL)",
          OMP_MIN_RUNTIME_WORK, G, D + W);
  rc_line(R, L, "for (int64_t lt_w = 0; lt_w < lt_M * %lldLL; lt_w++) {", G);
  L++;
  if (f->m_var >= 0) rc_line(R, L, "const int64_t %s = lt_w / %lldLL;", R->var_name[f->m_var], G);
  rc_line(R, L, "const int64_t lt_gi = lt_w %% %lldLL;", G);
  rc_bind_flat(R, L, f->group_var, f->group_ext, f->ngroup, "lt_gi");
  rc_line(R, L, "float lt_q[%lld], lt_o[%lld], lt_p[%d], lt_mx = -INFINITY, lt_l = 0.0f;", D, W, LT_FT);
  rc_line(R, L, "for (int64_t %s = 0; %s < %lldLL; %s++) {", dv, dv, D, dv);
  char lhs[96];
  snprintf(lhs, sizeof lhs, "lt_q[%s]", dv);
  rc_put_assign(R, L + 1, lhs, f->q);
  rc_line(R, L, "}");
  rc_line(R, L, "for (int64_t lt_c = 0; lt_c < %lldLL; lt_c++) lt_o[lt_c] = 0.0f;", W);
  rc_line(R, L, "int64_t lt_end = lt_T;");
  if (f->t_last) {
    rc_line(R, L, "{");
    rc_put_assign(R, L + 1, "const int64_t lt_last", f->t_last);
    rc_line(R, L + 1, "if (lt_last + 1 < lt_end) lt_end = lt_last + 1;");
    rc_line(R, L, "}");
  }
  rc_line(R, L, "for (int64_t lt_t0 = 0; lt_t0 < lt_end; lt_t0 += %d) {", LT_FT);
  L++;
  rc_line(R, L, "const int64_t lt_n = lt_end - lt_t0 < %d ? lt_end - lt_t0 : %d;", LT_FT, LT_FT);
  rc_line(R, L, "float lt_tm = -INFINITY;");
  rc_line(R, L, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) {");
  rc_line(R, L + 1, "const int64_t %s = lt_t0 + lt_j;", tv);
  rc_line(R, L + 1, "float %s = 0.0f;", sv);
  rc_line(R, L + 1, "for (int64_t %s = 0; %s < %lldLL; %s++) {", dv, dv, D, dv);
  rc_put_assign(R, L + 2, "const float lt_k", f->k);
  rc_line(R, L + 2, "%s += lt_q[%s] * lt_k;", sv, dv);
  rc_line(R, L + 1, "}");
  rc_put_assign(R, L + 1, "lt_p[lt_j]", f->score);
  rc_line(R, L + 1, "lt_tm = fmaxf(lt_tm, lt_p[lt_j]);");
  rc_line(R, L, "}");
  rc_line(R, L, "if (lt_tm == -INFINITY) continue; /* every key of the tile masked */");
  rc_line(R, L, "const float lt_nm = fmaxf(lt_mx, lt_tm), lt_c = lt_expf(lt_mx - lt_nm);");
  rc_line(R, L, "float lt_ts = 0.0f;");
  /* apart: each loop vectorizes alone */
  rc_line(R, L, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) lt_p[lt_j] = lt_expf(lt_p[lt_j] - lt_nm);");
  rc_line(R, L, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) lt_ts += lt_p[lt_j];");
  rc_line(R, L, "lt_l = lt_l * lt_c + lt_ts;");
  rc_line(R, L, "for (int64_t lt_cc = 0; lt_cc < %lldLL; lt_cc++) lt_o[lt_cc] *= lt_c;", W);
  rc_line(R, L, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) {");
  rc_line(R, L + 1, "const int64_t %s = lt_t0 + lt_j;", tv);
  rc_line(R, L + 1, "const float lt_e = lt_p[lt_j];");
  rc_line(R, L + 1, "for (int64_t lt_cc = 0; lt_cc < %lldLL; lt_cc++) {", W);
  bind_values(R, f, L + 2);
  rc_put_assign(R, L + 2, "const float lt_v", f->v);
  rc_line(R, L + 2, "lt_o[lt_cc] += lt_e * lt_v;");
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  rc_line(R, L, "lt_mx = lt_nm;");
  L--;
  rc_line(R, L, "}");
  rc_line(R, L, "for (int64_t lt_cc = 0; lt_cc < %lldLL; lt_cc++) {", W);
  bind_values(R, f, L + 1);
  rc_line(R, L + 1, "const float %s = lt_o[lt_cc] / lt_l;", ov);
  rc_put_stmt(R, f->store, L + 1);
  rc_line(R, L, "}");
  L--;
  rc_line(R, L, "}");
  L--;
  rc_line(R, L, "}");
}
