/* The tensor-core GEMM shape: one or two phases, each a sum over k of A[m][k] * W_i[n][k] with W_i a
 * bf16 weight read at (column variables, k), or a quantized [rows][k] weight (its blocks dequantized to bf16
 * in the scratch before the GEMM: kernel/lower_mma.c), and A the same f32 expression of the row and k in every
 * phase; no inner loop; every parallel axis but the row axis has a constant extent, whose product is a
 * multiple of 32, and k has a constant extent that is a multiple of 16. */
#include <string.h>
#include "match.h"

/* e is W[..., k] converted to f32, W a bf16 global buffer read at (columns..., k), or a quantized [rows][k]
 * one read at (row, k) (dequantized whole into the scratch, so it must be a plain matrix). */
static Expr *weight_load(const LProgram *lp, Expr *e, int k_var, uint64_t col_mask) {
  if (e->op == X_CAST && e->dtype == DT_F32) e = e->a[0];
  if (e->op != X_LOAD || e->aux != MEM_GLOBAL || (e->dtype != DT_BF16 && !dtype_is_quant(e->dtype)) || e->n < 1)
    return NULL;
  if (e->ival < 0 || e->ival >= lp->nbufs || lp->bufs[e->ival].dtype != e->dtype) return NULL;
  const Shape *sh = &lp->bufs[e->ival].shape;
  if (sh->rank != e->n) return NULL;
  if (dtype_is_quant(e->dtype) &&
      (sh->rank != 2 || sh->dim[0]->op != X_CONST || sh->dim[1]->op != X_CONST || sh->dim[1]->ival % 8))
    return NULL;
  /* 8 consecutive k values are one 16-byte copy: every row must start at a multiple of 8 elements */
  const Expr *last_dim = sh->dim[e->n - 1];
  if (e->n > 1 && !(last_dim->op == X_CONST && last_dim->ival % 8 == 0)) return NULL;
  for (int i = 0; i < e->n; i++) {
    const Expr *ix = e->a[i];
    if (ix->flags & (EXF_LOAD | EXF_TMP | EXF_ACC | EXF_HW)) return NULL;
    if (i == e->n - 1 ? !(ix->op == X_VAR && ix->ival == k_var)
                      : ((ix->varmask >> k_var & 1) || (ix->varmask & ~col_mask)))
      return NULL;
  }
  return e;
}

#define REFUSE(...)                                                                                                    \
  do {                                                                                                                 \
    diag_error(why, 0, 0, __VA_ARGS__);                                                                                \
    return 0;                                                                                                          \
  } while (0)

int match_gemm(const LProgram *lp, const LKernel *k, int a, GemmMatch *m, Diag *why) {
  ExprPool *P = lp->pool;
  memset(m, 0, sizeof *m);
  if (a < 0 || a >= k->npar) REFUSE("%s is not a GEMM: no blocked row axis", k->name);
  if (k->ninner) REFUSE("%s is not a GEMM: it has an inner store loop", k->name);
  if (k->nphase < 1 || k->nphase > 2) REFUSE("%s is not a GEMM: %d reductions (a GEMM has 1 or 2)", k->name, k->nphase);
  m->row_axis = a;
  m->n_total = 1;
  uint64_t col_mask = 0;
  for (int i = 0; i < k->npar; i++) {
    if (i == a) continue;
    const Expr *e = k->par[i].extent;
    if (e->op != X_CONST || e->ival < 1) REFUSE("%s is not a GEMM: column axis %d has a run-time extent", k->name, i);
    if (e->ival == 1) {
      m->var_map[k->par[i].var] = ex_int(P, 0);
      continue;
    }
    m->n_var[m->nn] = k->par[i].var;
    m->n_ext[m->nn++] = e->ival;
    m->n_total *= e->ival;
    col_mask |= 1ull << k->par[i].var;
  }
  if (m->n_total % 32) REFUSE("%s is not a GEMM: %lld columns, not a multiple of 32", k->name, (long long)m->n_total);
  const LPhase *ph = k->phases;
  if (ph[0].naxes != 1) REFUSE("%s is not a GEMM: its reduction runs over %d axes", k->name, ph[0].naxes);
  const Expr *kext = ph[0].axes[0].extent;
  if (kext->op != X_CONST || kext->ival % 16 || kext->ival < 16)
    REFUSE("%s is not a GEMM: its reduction is not over a constant multiple of 16", k->name);
  m->k_var = ph[0].axes[0].var;
  m->k_extent = kext->ival;
  for (int i = 0; i < k->nphase; i++) {
    if (ph[i].op != RED_ADD || ph[i].naxes != 1 || ph[i].axes[0].extent != kext || ph[i].acc_dtype != DT_F32)
      REFUSE("%s is not a GEMM: reduction %d is not an f32 sum over the same k", k->name, i);
    if (ph[i].body->flags & EXF_ACC) REFUSE("%s is not a GEMM: reduction %d reads another one", k->name, i);
    m->var_map[ph[i].axes[0].var] = i ? ex_var(P, m->k_var) : NULL;
  }
  for (int i = 0; i < k->nphase; i++) {
    Expr *body = ex_subst_vars(P, ph[i].body, L_MAX_VARS, m->var_map);
    if (body->op != X_MUL) REFUSE("%s is not a GEMM: reduction %d is not a product", k->name, i);
    Expr *w = NULL, *x = NULL;
    for (int side = 0; side < 2 && !w; side++)
      if ((w = weight_load(lp, body->a[side], m->k_var, col_mask))) x = body->a[1 - side];
    if (!w)
      REFUSE("%s is not a GEMM: reduction %d reads no bf16 weight (nor a quantized [rows][k] one) at (columns, k)",
             k->name, i);
    if (!dtype_is_float(x->dtype) || (x->varmask & col_mask) || (x->flags & (EXF_TMP | EXF_ACC | EXF_HW)))
      REFUSE("%s is not a GEMM: the other factor of reduction %d depends on the columns or is not a float", k->name, i);
    if (x->dtype != DT_F32) x = ex_cast(P, DT_F32, x);
    if (i > 0 && x != m->a) REFUSE("%s is not a GEMM: its two reductions multiply different A", k->name);
    m->a = x;
    m->b[i] = w;
  }
  m->nb = k->nphase;
  m->library = 1;
  for (int b = 0; b < m->nb; b++) {
    const Shape *sh = &lp->bufs[m->b[b]->ival].shape;
    if (sh->rank != 2 || sh->dim[0]->op != X_CONST || sh->dim[1]->op != X_CONST || sh->dim[1]->ival != m->k_extent)
      m->library = 0;
  }
  return 1;
}
