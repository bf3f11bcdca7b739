/* CUDA: a KS_FLASH statement with decode = 1 as one flash-decoding kernel on CUDA cores (f32).
 *
 * The kernel is the template lt_flash_decode (src/code/templates/flash_decode.cuh, which describes the
 * algorithm); this file writes what varies: its constants as template arguments and the kernel's
 * expressions (q, k, v, the causal end, the score, the store) as small device functions (lambdas) of
 * the indices the template passes, each binding the loop variables its expression reads. */
#include <stdio.h>
#include "render_common.h"

/* The block's query row and group variables from lt_rb (= blockIdx.x / chunks): the row, then the
 * groups of heads (the shared axis as its block index lt_sb). */
static void bind_row(Render *R, const KFlash *f, int L) {
  const long long GB = (long long)(f->groups / f->rows);
  if (f->m_var >= 0) rc_line(R, L, "const i64 %s = lt_rb / %lldLL;", R->var_name[f->m_var], GB);
  rc_line(R, L, "const i64 lt_gb = lt_rb %% %lldLL;", GB);
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
  if (f->share >= 0)
    rc_line(R, L, "const i64 %s = lt_sb * %dLL + %s;", R->var_name[f->group_var[f->share]], f->rows, row);
}

/* `auto NAME = [&](PARAMS) -> RET {` with the row's variables bound; returns the body's level. */
static int open_fn(Render *R, const KFlash *f, int L, const char *name, const char *params, const char *ret) {
  rc_line(R, L, "auto %s = [&](%s) -> %s {", name, params, ret);
  bind_row(R, f, L + 1);
  return L + 1;
}

/* `auto NAME = [&](rb, PARAM) -> i64` with the row's variables and the shared head bound, variable `var`
 * (< 0: the value axes, flattened) taken from PARAM, returning e. */
static void index_fn(Render *R, const KFlash *f, int L, const char *name, const char *param, int var, Expr *e) {
  char params[64];
  snprintf(params, sizeof params, "const i64 lt_rb, const i64 %s", param);
  int B = open_fn(R, f, L, name, params, "i64");
  bind_share(R, f, B, "0");
  if (var >= 0) rc_line(R, B, "const i64 %s = %s;", R->var_name[var], param);
  else rc_bind_flat(R, B, f->value_var, f->value_ext, f->nvalue, param);
  rc_put_return(R, B, e);
  rc_line(R, L, "};");
}

/* `auto NAME = [&](at) -> float`: the element at flat index `at` (variable at_var). */
static void element_fn(Render *R, int L, const char *name, int at_var, Expr *e) {
  rc_line(R, L, "auto %s = [&](const i64 %s) -> float {", name, R->var_name[at_var]);
  rc_put_return(R, L + 1, e);
  rc_line(R, L, "};");
}

/* KFlash.k_row and v_row: a key's row offsets, a column's offset and the element at an index, for k and v. */
static void put_rows(Render *R, const KFlash *f, int L) {
  index_fn(R, f, L, "lt_fkr", "lt_t", f->t_var, f->k_row);
  index_fn(R, f, L, "lt_fkc", "lt_d", f->d_var, f->k_col);
  element_fn(R, L, "lt_fka", f->k_at_var, f->k_at);
  index_fn(R, f, L, "lt_fvr", "lt_t", f->t_var, f->v_row);
  index_fn(R, f, L, "lt_fvc", "lt_cc", -1, f->v_col);
  element_fn(R, L, "lt_fva", f->v_at_var, f->v_at);
}

/* KFlash.vec: `auto NAME = [&](at) -> const T *`, the address of the element at flat index `at` of the load in
 * e (a load or a cast of one); *elt is the template's element kind (0 f32, 1 bf16, 2 f16). */
static int pointer_fn(Render *R, int L, const char *name, int at_var, const Expr *e, int *elt) {
  const Expr *load = e->op == X_CAST ? e->a[0] : e;
  if (load->op != X_LOAD || load->ival < 0 || load->ival >= R->lp->nbufs) return 0;
  *elt = load->dtype == DT_F32 ? 0 : load->dtype == DT_BF16 ? 1 : load->dtype == DT_F16 ? 2 : -1;
  if (*elt < 0 || R->lp->bufs[load->ival].dtype != load->dtype) return 0;
  rc_line(R, L, "auto %s = [&](const i64 %s) { return %s + %s; };", name, R->var_name[at_var], R->buf_name[load->ival],
          R->var_name[at_var]);
  return 1;
}

/* The vector form's lambdas and call (lt_flash_decode_vec). */
static void put_vec(Render *R, const KFlash *f, int L) {
  int kelt, velt;
  index_fn(R, f, L, "lt_fkr", "lt_t", f->t_var, f->k_row);
  index_fn(R, f, L, "lt_fkc", "lt_d", f->d_var, f->k_col);
  index_fn(R, f, L, "lt_fvr", "lt_t", f->t_var, f->v_row);
  index_fn(R, f, L, "lt_fvc", "lt_cc", -1, f->v_col);
  if (!pointer_fn(R, L, "lt_fkp", f->k_at_var, f->k_at, &kelt) ||
      !pointer_fn(R, L, "lt_fvp", f->v_at_var, f->v_at, &velt)) {
    rc_fail(R, "malformed flash-decoding statement (vector loads)");
    return;
  }
  rc_line(R, L,
          "lt_flash_decode_vec<%d, %d, %d, %lldLL, %d, %s, %d, %d>(lt_M, lt_T, lt_scratch, lt_fq, lt_ftlast, "
          "lt_fscore, lt_fstore, lt_fkr, lt_fkc, lt_fkp, lt_fvr, lt_fvc, lt_fvp);",
          (int)f->d_extent, (int)f->width, f->rows, (long long)(f->groups / f->rows), MMA_COUNTERS / 4,
          f->t_last ? "true" : "false", kelt, velt);
}

void rc_put_flash_decode(Render *R, const KStmt *s, int level) {
  const KFlash *f = s->flash;
  if (!f || !f->decode || f->d_extent < 1 || f->d_extent > 128 || f->width < 1 || f->width > 128 || f->rows < 1 ||
      f->rows > 8 || f->groups % f->rows || (f->share < 0 && f->rows != 1) || f->share >= f->ngroup) {
    rc_fail(R, "malformed flash-decoding statement");
    return;
  }
  const char *tv = R->var_name[f->t_var], *dv = R->var_name[f->d_var];
  int L = level, B;
  rc_line(R, L++, "{");
  rc_put_assign(R, L, "const i64 lt_M", f->m_extent);
  rc_put_assign(R, L, "const i64 lt_T", f->t_extent);
  B = open_fn(R, f, L, "lt_fq", "const i64 lt_rb, const int lt_r, const i64 lt_d", "float");
  bind_share(R, f, B, "lt_r");
  rc_line(R, B, "const i64 %s = lt_d;", dv);
  rc_put_return(R, B, f->q);
  rc_line(R, L, "};");
  B = open_fn(R, f, L, "lt_fk", "const i64 lt_rb, const i64 lt_t, const i64 lt_d", "float");
  bind_share(R, f, B, "0");
  rc_line(R, B, "const i64 %s = lt_t;", tv);
  rc_line(R, B, "const i64 %s = lt_d;", dv);
  rc_put_return(R, B, f->k);
  rc_line(R, L, "};");
  B = open_fn(R, f, L, "lt_fv", "const i64 lt_rb, const i64 lt_cc, const i64 lt_t", "float");
  bind_share(R, f, B, "0");
  rc_bind_flat(R, B, f->value_var, f->value_ext, f->nvalue, "lt_cc");
  rc_line(R, B, "const i64 %s = lt_t;", tv);
  rc_put_return(R, B, f->v);
  rc_line(R, L, "};");
  B = open_fn(R, f, L, "lt_ftlast", "const i64 lt_rb", "i64");
  if (f->t_last) rc_put_return(R, B, f->t_last);
  else rc_line(R, B, "return lt_T - 1; /* no causal mask (not called) */");
  rc_line(R, L, "};");
  B = open_fn(R, f, L, "lt_fscore", "const i64 lt_rb, const int lt_r, const i64 lt_t, const float lt_dot", "float");
  bind_share(R, f, B, "lt_r");
  rc_line(R, B, "const i64 %s = lt_t;", tv);
  rc_line(R, B, "const float %s = lt_dot;", R->tmp_name[f->s_tmp]);
  rc_put_return(R, B, f->score);
  rc_line(R, L, "};");
  B = open_fn(R, f, L, "lt_fstore", "const i64 lt_rb, const int lt_r, const i64 lt_cc, const float lt_out", "void");
  rc_bind_flat(R, B, f->value_var, f->value_ext, f->nvalue, "lt_cc");
  bind_share(R, f, B, "lt_r");
  rc_line(R, B, "const float %s = lt_out;", R->tmp_name[f->o_tmp]);
  rc_put_stmt(R, f->store, B);
  rc_line(R, L, "};");
  if (f->k_row && f->v_row && f->vec) {
    put_vec(R, f, L);
  } else if (f->k_row && f->v_row) {
    put_rows(R, f, L);
    rc_line(R, L,
            "lt_flash_decode_rows<%d, %d, %d, %lldLL, %d, %s>(lt_M, lt_T, lt_scratch, lt_fq, lt_ftlast, lt_fscore, "
            "lt_fstore, lt_fkr, lt_fkc, lt_fka, lt_fvr, lt_fvc, lt_fva);",
            (int)f->d_extent, (int)f->width, f->rows, (long long)(f->groups / f->rows), MMA_COUNTERS / 4,
            f->t_last ? "true" : "false");
  } else {
    rc_line(R, L,
            "lt_flash_decode<%d, %d, %d, %lldLL, %d, %s>(lt_M, lt_T, lt_scratch, lt_fq, lt_fk, lt_fv, lt_ftlast, "
            "lt_fscore, lt_fstore);",
            (int)f->d_extent, (int)f->width, f->rows, (long long)(f->groups / f->rows), MMA_COUNTERS / 4,
            f->t_last ? "true" : "false");
  }
  L--;
  rc_line(R, L, "}");
}
