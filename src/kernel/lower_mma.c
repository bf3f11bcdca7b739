/* Kernel-stage lowering to a tensor-core GEMM (KS_MMA), for the register-blocked variant of a kernel
 * whose shape allows it: one or two phases, each a sum over k of A[m][k] * W_i[n][k] with W_i a bf16
 * weight read at (column variables, k) and A the same f32 expression of the row and k in every phase;
 * no inner loop; every parallel axis but the row axis has a constant extent, whose product is a multiple
 * of 32, and k has a constant extent that is a multiple of 16. Schedule.mma is the number of bf16
 * parts A is split into (1 or 2). Anything else keeps the CUDA-core
 * variant (lower_phase.c). */
#include "lower_internal.h"

/* e is W[..., k] converted to f32, W a bf16 global buffer read at (columns..., k). */
static Expr *weight_load(const Lower *L, Expr *e, int k_var, uint64_t col_mask) {
  if (e->op == X_CAST && e->dtype == DT_F32) e = e->a[0];
  if (e->op != X_LOAD || e->aux != MEM_GLOBAL || e->dtype != DT_BF16 || e->n < 1) return NULL;
  if (e->ival < 0 || e->ival >= L->lp->nbufs) return NULL;
  const Shape *sh = &L->lp->bufs[e->ival].shape;
  if (sh->rank != e->n) return NULL;
  /* 8 consecutive k values are one 16-byte copy: every row must start at a multiple of 8 elements */
  const Expr *last_dim = sh->dim[e->n - 1];
  if (e->n > 1 && !(last_dim->op == X_CONST && last_dim->ival % 8 == 0)) return NULL;
  for (int i = 0; i < e->n; i++) {
    const Expr *ix = e->a[i];
    if (ix->flags & (EXF_LOAD | EXF_TMP | EXF_ACC | EXF_HW)) return NULL;
    if (i == e->n - 1 ? !(ix->op == X_VAR && ix->ival == k_var) : ((ix->varmask >> k_var & 1) || (ix->varmask & ~col_mask)))
      return NULL;
  }
  return e;
}

int kl_mma_body(Lower *L) {
  const LKernel *k = L->k;
  ExprPool *P = L->pool;
  int a = L->s.row_axis;
  if (L->target != TARGET_CUDA || a < 0 || a >= k->npar || k->ninner || k->nphase < 1 || k->nphase > 2) return 0;
  KMma *m = ARENA_NEW(L->arena, KMma);
  m->m_var = k->par[a].var;
  m->m_extent = k->par[a].extent;
  m->n_total = 1;
  uint64_t col_mask = 0;
  for (int i = 0; i < k->npar; i++) {
    if (i == a) continue;
    const Expr *e = k->par[i].extent;
    if (e->op != X_CONST || e->ival < 1) return 0;
    if (e->ival == 1) {
      L->var_map[k->par[i].var] = ex_int(P, 0);
      continue;
    }
    m->n_var[m->nn] = k->par[i].var;
    m->n_ext[m->nn++] = e->ival;
    m->n_total *= e->ival;
    col_mask |= 1ull << k->par[i].var;
  }
  if (m->n_total % 32) return 0;
  const LPhase *ph = k->phases;
  const Expr *kext = ph[0].axes[0].extent;
  if (kext->op != X_CONST || kext->ival % 16 || kext->ival < 16) return 0;
  m->k_var = ph[0].axes[0].var;
  m->k_extent = kext->ival;
  m->bk = kext->ival % 32 ? 16 : 32;
  m->a_parts = L->s.mma;
  for (int i = 0; i < k->nphase; i++) {
    if (ph[i].op != RED_ADD || ph[i].naxes != 1 || ph[i].axes[0].extent != kext || ph[i].acc_dtype != DT_F32) return 0;
    if (ph[i].body->flags & EXF_ACC) return 0;
    L->var_map[ph[i].axes[0].var] = i ? ex_var(P, m->k_var) : NULL;
  }
  for (int i = 0; i < k->nphase; i++) {
    Expr *body = kl_subst(L, ph[i].body);
    if (body->op != X_MUL) return 0;
    Expr *w = NULL, *x = NULL;
    for (int side = 0; side < 2 && !w; side++)
      if ((w = weight_load(L, body->a[side], m->k_var, col_mask))) x = body->a[1 - side];
    if (!w || !dtype_is_float(x->dtype) || (x->varmask & col_mask) || (x->flags & (EXF_TMP | EXF_ACC | EXF_HW))) return 0;
    if (x->dtype != DT_F32) x = ex_cast(P, DT_F32, x);
    if (i > 0 && x != m->a) return 0; /* the phases must share A */
    m->a = x;
    m->b[i] = w;
  }
  m->nb = k->nphase;
  /* the epilogue: the kernel's store with each sum in a temporary */
  KKernel *kk = L->kk;
  for (int i = 0; i < m->nb; i++) {
    if (kk->ntmps >= K_MAX_TMPS) return 0;
    m->acc_tmp[i] = kk->ntmps;
    kk->tmp_dtype[kk->ntmps] = DT_F32;
    kk->tmp_names[kk->ntmps++] = arena_printf(L->arena, "acc%d", i);
    L->acc_map[ph[i].id] = ex_tmp(P, m->acc_tmp[i], DT_F32);
  }
  m->store = kl_output_store(L);
  KStmt *root = kl_st_new(L, KS_SEQ);
  KStmt *s = kl_st_new(L, KS_MMA);
  s->mma = m;
  kl_st_add(L, root, s);
  kk->body = root;
  kk->tensor_cores = 1;
  /* A as bf16 planes, written by the pre-pass (kl_mma_pack_kernel) */
  /* blocks of 64 rows x 128 accumulator columns (code/render_mma.c) */
  int64_t cols = 128 / m->nb;
  Expr *mblocks = ex_bin(P, X_IDIV, ex_add(P, m->m_extent, ex_int(P, 63)), ex_int(P, 64));
  Expr *tiles = ex_mul(P, mblocks, ex_int(P, (m->n_total + cols - 1) / cols));
  /* split k when the tiles leave the device idle: into fill / tiles parts, each of at least 4 k
   * stages, at most 8 */
  int64_t stages = m->k_extent / m->bk;
  m->split_max = stages / 4 < 8 ? (int)(stages / 4) : 8;
  if (L->s.gemm_fill < 2 || L->s.gemm_fill / 2 > MMA_COUNTERS / 4 || m->split_max < 2) m->split_max = 1;
  Expr *splits = ex_int(P, 1);
  if (m->split_max > 1) {
    splits = ex_bin(P, X_IDIV, ex_int(P, L->s.gemm_fill), tiles);
    splits = ex_bin(P, X_MAX, ex_int(P, 1), ex_bin(P, X_MIN, ex_int(P, m->split_max), splits));
  }
  kk->grid = ex_mul(P, tiles, splits);
  kk->block = 256;
  /* scratch: MMA_COUNTERS bytes of tile counters (zero between kernels), A's planes, and when split,
   * one 64 x 128 f32 partial tile per block (at most gemm_fill blocks split) */
  Expr *planes = ex_mul(P, m->m_extent, ex_int(P, m->k_extent * 2 * m->a_parts));
  int64_t partials = m->split_max > 1 ? (int64_t)L->s.gemm_fill * 64 * 128 * 4 : 0;
  kk->scratch = ex_add(P, planes, ex_int(P, MMA_COUNTERS + partials));
  /* the library form's products: one f32 [M][rows] block per distinct weight (kl_mma_library) */
  if (L->s.gemm_library) {
    int64_t rows = 0;
    for (int i = 0; i < m->nb; i++) {
      int same = i > 0 && m->b[1]->ival == m->b[0]->ival;
      const Shape *sh = &L->lp->bufs[m->b[i]->ival].shape;
      if (sh->rank != 2 || sh->dim[0]->op != X_CONST || sh->dim[1]->op != X_CONST || sh->dim[1]->ival != m->k_extent) {
        m->lib_nw = 0;
        break;
      }
      m->lib_w[i] = same ? 0 : m->lib_nw;
      if (!same) {
        m->lib_rows[m->lib_nw++] = sh->dim[0]->ival;
        rows += sh->dim[0]->ival;
      }
    }
    if (m->lib_nw > 0) {
      Expr *products = ex_mul(P, m->m_extent, ex_int(P, rows * 4));
      kk->scratch = ex_add(P, ex_add(P, planes, ex_int(P, MMA_COUNTERS)), ex_bin(P, X_MAX, ex_int(P, partials), products));
    }
  }
  return 1;
}

void kl_mma_pack_kernel(Lower *L) {
  KKernel *kk = L->kk;
  ExprPool *P = L->pool;
  const KMma *m = kk->body->body[0]->mma;
  KMma *pm = ARENA_NEW(L->arena, KMma);
  *pm = *m;
  pm->pack = 1;
  KKernel *pre = ARENA_NEW(L->arena, KKernel);
  *pre = *kk; /* the same parameters, symbols, temporaries and variable names; named with the GEMM
                 (kernel_from_tile) */
  pre->alt = NULL;
  pre->pre = NULL;
  pre->body = kl_st_new(L, KS_SEQ);
  KStmt *s = kl_st_new(L, KS_MMA);
  s->mma = pm;
  kl_st_add(L, pre->body, s);
  /* one thread per pair of consecutive k values */
  Expr *pairs = ex_mul(P, m->m_extent, ex_int(P, m->k_extent / 2));
  pre->grid = ex_bin(P, X_IDIV, ex_add(P, pairs, ex_int(P, 255)), ex_int(P, 256));
  pre->block = 256;
  kk->pre = pre;
}

/* The library form (KGemmLib), for a GEMM whose weights are all plain [rows][k] matrices: the
 * epilogue kernel runs one thread per output element (row, flat column), reading each sum from the
 * products of its weight at the weight row that column reads. */
void kl_mma_library(Lower *L) {
  KKernel *kk = L->kk;
  ExprPool *P = L->pool;
  const KMma *m = kk->body->body[0]->mma;
  if (!L->s.gemm_library || m->lib_nw < 1) return;
  KGemmLib *lib = ARENA_NEW(L->arena, KGemmLib);
  lib->nw = m->lib_nw;
  lib->k = m->k_extent;
  lib->a_parts = m->a_parts;
  lib->m = m->m_extent;
  for (int w = 0; w < m->lib_nw; w++) {
    int b = m->lib_w[1] == w && m->nb > 1 ? 1 : 0;
    lib->w_param[w] = -1;
    for (int i = 0; i < kk->nparams; i++)
      if (kk->params[i].buf == m->b[b]->ival) lib->w_param[w] = i;
    if (lib->w_param[w] < 0) return; /* not a parameter: no library form */
    lib->w_rows[w] = m->lib_rows[w];
  }
  KMma *em = ARENA_NEW(L->arena, KMma);
  *em = *m;
  em->epilogue = 1;
  KKernel *epi = ARENA_NEW(L->arena, KKernel);
  *epi = *kk; /* the same parameters, symbols and temporaries; named with the GEMM (kernel_from_tile) */
  epi->alt = NULL;
  epi->pre = NULL;
  epi->lib = NULL;
  epi->tensor_cores = 0;
  epi->body = kl_st_new(L, KS_SEQ);
  KStmt *s = kl_st_new(L, KS_MMA);
  s->mma = em;
  kl_st_add(L, epi->body, s);
  Expr *elements = ex_mul(P, m->m_extent, ex_int(P, m->n_total));
  epi->grid = ex_bin(P, X_IDIV, ex_add(P, elements, ex_int(P, 255)), ex_int(P, 256));
  epi->block = 256;
  lib->epilogue = epi;
  kk->lib = lib;
}
