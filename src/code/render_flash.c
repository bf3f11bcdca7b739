/* CUDA: a KS_FLASH statement as one flash-attention kernel on tensor cores (mma.sync.m16n8k16, bf16
 * inputs, f32 accumulators).
 *
 * The kernel is the template lt_flash (src/code/templates/flash.cuh, which describes the algorithm);
 * this file writes what varies: its constants as template arguments and the kernel's expressions (q, k,
 * v, the causal end, the score, the store) as small device functions (lambdas) of the indices the
 * template passes, each binding the loop variables its expression reads. */
#include "render_common.h"

/* `auto NAME = [&](const i64 lt_gi, PARAMS) -> RET {` with the group variables bound from the block's
 * group lt_gi; returns the body's level. */
static int open_fn(Render *R, const KFlash *f, int L, const char *name, const char *params, const char *ret) {
  rc_line(R, L, "auto %s = [&](const i64 lt_gi, %s) -> %s {", name, params, ret);
  rc_bind_flat(R, L + 1, f->group_var, f->group_ext, f->ngroup, "lt_gi");
  return L + 1;
}

void rc_put_flash(Render *R, const KStmt *s, int level) {
  const KFlash *f = s->flash;
  if (!f || f->parts < 1 || f->parts > 2 || f->d_extent % 16 || f->d_extent > 128 || f->width % 16 || f->width > 128 ||
      f->groups < 1) {
    rc_fail(R, "malformed flash-attention statement");
    return;
  }
  const char *mv = R->var_name[f->m_var], *tv = R->var_name[f->t_var], *dv = R->var_name[f->d_var];
  int L = level, B;
  rc_line(R, L++, "{");
  rc_put_assign(R, L, "const i64 lt_M", f->m_extent);
  rc_put_assign(R, L, "const i64 lt_T", f->t_extent);
  B = open_fn(R, f, L, "lt_fq", "const i64 lt_m, const i64 lt_d", "float");
  rc_line(R, B, "const i64 %s = lt_m;", mv);
  rc_line(R, B, "const i64 %s = lt_d;", dv);
  rc_put_return(R, B, f->q);
  rc_line(R, L, "};");
  B = open_fn(R, f, L, "lt_fk", "const i64 lt_t, const i64 lt_d", "float");
  rc_line(R, B, "const i64 %s = lt_t;", tv);
  rc_line(R, B, "const i64 %s = lt_d;", dv);
  rc_put_return(R, B, f->k);
  rc_line(R, L, "};");
  B = open_fn(R, f, L, "lt_fv", "const i64 lt_t, const i64 lt_cc", "float");
  rc_line(R, B, "const i64 %s = lt_t;", tv);
  rc_bind_flat(R, B, f->value_var, f->value_ext, f->nvalue, "lt_cc");
  rc_put_return(R, B, f->v);
  rc_line(R, L, "};");
  B = open_fn(R, f, L, "lt_ftlast", "const i64 lt_m", "i64");
  if (f->t_last) {
    rc_line(R, B, "const i64 %s = lt_m;", mv);
    rc_put_return(R, B, f->t_last);
  } else {
    rc_line(R, B, "return lt_T - 1; /* no causal mask (not called) */");
  }
  rc_line(R, L, "};");
  B = open_fn(R, f, L, "lt_fscore", "const i64 lt_m, const i64 lt_t, const float lt_dot", "float");
  rc_line(R, B, "const i64 %s = lt_m;", mv);
  rc_line(R, B, "const i64 %s = lt_t;", tv);
  rc_line(R, B, "const float %s = lt_dot;", R->tmp_name[f->s_tmp]);
  rc_put_return(R, B, f->score);
  rc_line(R, L, "};");
  B = open_fn(R, f, L, "lt_fstore", "const i64 lt_m, const i64 lt_cc, const float lt_out", "void");
  rc_line(R, B, "const i64 %s = lt_m;", mv);
  rc_bind_flat(R, B, f->value_var, f->value_ext, f->nvalue, "lt_cc");
  rc_line(R, B, "const float %s = lt_out;", R->tmp_name[f->o_tmp]);
  rc_put_stmt(R, f->store, B);
  rc_line(R, L, "};");
  rc_line(R, L,
          "lt_flash<%d, %lld, %lld, %lldLL, %s>(lt_M, lt_T, lt_fq, lt_fk, lt_fv, lt_ftlast, lt_fscore, lt_fstore);",
          f->parts, (long long)f->d_extent, (long long)f->width, (long long)f->groups, f->t_last ? "true" : "false");
  L--;
  rc_line(R, L, "}");
}
