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

/* Scratch bytes: the tile counters, A's bf16 planes, then `tail` bytes (code/render_mma.c). */
static Expr *scratch_after_planes(ExprPool *P, const KMma *m, Expr *tail) {
  Expr *planes = ex_mul(P, m->m_extent, ex_int(P, m->k_extent * 2 * m->a_parts));
  return ex_add(P, ex_add(P, planes, ex_int(P, MMA_COUNTERS)), tail);
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
  m->smem_limit = L->dev->smem_per_block;
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
  /* scratch: the tile counters, A's planes (written by the pre-pass, kl_mma_pack_kernel), and when
   * split, one 64 x 128 f32 partial tile per block (at most gemm_fill blocks split) */
  int64_t partials = m->split_max > 1 ? (int64_t)L->s.gemm_fill * 64 * 128 * 4 : 0;
  kk->scratch = scratch_after_planes(P, m, ex_int(P, partials));
  return 1;
}

/* A kernel of the GEMM's parameters, symbols and temporaries (named with the GEMM in
 * kernel_from_tile) whose body is `m` in another role, one thread for each of `threads`. */
static KKernel *companion_kernel(Lower *L, const KMma *m, KMmaRole role, Expr *threads) {
  ExprPool *P = L->pool;
  KMma *cm = ARENA_NEW(L->arena, KMma);
  *cm = *m;
  cm->role = role;
  KKernel *c = ARENA_NEW(L->arena, KKernel);
  *c = *L->kk;
  c->alt = NULL;
  c->pre = NULL;
  c->lib = NULL;
  c->tensor_cores = 0;
  c->body = kl_st_new(L, KS_SEQ);
  KStmt *s = kl_st_new(L, KS_MMA);
  s->mma = cm;
  kl_st_add(L, c->body, s);
  c->grid = ex_bin(P, X_IDIV, ex_add(P, threads, ex_int(P, 255)), ex_int(P, 256));
  c->block = 256;
  return c;
}

void kl_mma_pack_kernel(Lower *L) {
  const KMma *m = L->kk->body->body[0]->mma;
  /* one thread per pair of consecutive k values */
  L->kk->pre = companion_kernel(L, m, MMA_PACK, ex_mul(L->pool, m->m_extent, ex_int(L->pool, m->k_extent / 2)));
}

/* The library form (KGemmLib), for a GEMM whose weights are all plain [rows][k] parameters: one
 * product block ([a_parts * M][rows]) per distinct weight (gate and up are two; RoPE's rotated half
 * reads the same weight at other rows), and the epilogue kernel, one thread per output element (row,
 * flat column), which reads each sum at the weight row that column reads. The scratch grows to hold
 * the products. */
void kl_mma_library(Lower *L) {
  KKernel *kk = L->kk;
  ExprPool *P = L->pool;
  const KMma *m = kk->body->body[0]->mma;
  if (!L->s.gemm_library) return;
  KGemmLib *lib = ARENA_NEW(L->arena, KGemmLib);
  KMma em = *m;
  int64_t rows = 0;
  for (int b = 0; b < m->nb; b++) {
    const Shape *sh = &L->lp->bufs[m->b[b]->ival].shape;
    if (sh->rank != 2 || sh->dim[0]->op != X_CONST || sh->dim[1]->op != X_CONST || sh->dim[1]->ival != m->k_extent)
      return;
    em.prod_rows[b] = sh->dim[0]->ival;
    if (b == 1 && m->b[1]->ival == m->b[0]->ival) { /* the same weight: its products again */
      em.prod_at[1] = em.prod_at[0];
      continue;
    }
    int w = lib->nw++;
    lib->w_param[w] = -1;
    for (int i = 0; i < kk->nparams; i++)
      if (kk->params[i].buf == m->b[b]->ival) lib->w_param[w] = i;
    if (lib->w_param[w] < 0) return;
    lib->w_rows[w] = em.prod_rows[b];
    em.prod_at[b] = rows;
    rows += em.prod_rows[b];
  }
  lib->k = m->k_extent;
  lib->a_parts = m->a_parts;
  lib->m = m->m_extent;
  /* A's planes are one [a_parts * M][k] matrix: one library GEMM per weight covers every part (at
   * precision high, twice the rows of one part: better-filled waves than a GEMM per part), and the
   * epilogue adds the parts' products. */
  Expr *products = ex_mul(P, m->m_extent, ex_int(P, rows * 4 * m->a_parts));
  kk->scratch = ex_bin(P, X_MAX, kk->scratch, scratch_after_planes(P, m, products));
  lib->epilogue = companion_kernel(L, &em, MMA_EPILOGUE, ex_mul(P, m->m_extent, ex_int(P, m->n_total)));
  kk->lib = lib;
}
