/* Kernel-stage building of a tensor-core GEMM (KS_MMA) for the register-blocked variant of a kernel the
 * tile stage chose it for: tile/match_gemm.c found the shape (one or two sums over k of A[m][k] *
 * W_i[n][k], W_i bf16 weights or quantized ones, which the pre-pass dequantizes to bf16 into the scratch); here it
 * becomes the statement, its launch, the A pre-pass and the library form. Schedule.mma is the number of bf16 parts A is
 * split into (1 or 2). */
#include <stdio.h>
#include <string.h>
#include "../base/strbuf.h"
#include "lower_internal.h"
#include "../base/settings.h"

/* Scratch bytes: the tile counters, A's bf16 planes, then `tail` bytes (code/render_mma.c). */
static Expr *scratch_after_planes(ExprPool *P, const KMma *m, Expr *tail) {
  Expr *planes = ex_mul(P, m->m_extent, ex_int(P, m->k_extent * 2 * m->a_parts));
  return ex_add(P, ex_add(P, planes, ex_int(P, m->planes_at)), tail);
}

/* The scratch places of the quantized weights' bf16 copies (KMma.wq_at), after the tile counters and before A's
 * planes: one copy per distinct weight (gate and up are two), each at a multiple of 256 bytes, so the GEMM's
 * 16-byte copies stay aligned. The scratch is one buffer for all kernels, so a program holds its quantized weights
 * plus the bf16 copies of the largest kernel's. */
static void place_weight_copies(const Lower *L, KMma *m) {
  m->planes_at = MMA_COUNTERS;
  for (int b = 0; b < 2; b++) m->wq_at[b] = -1;
  for (int b = 0; b < m->nb; b++) {
    const LBuf *buf = &L->lp->bufs[m->b[b]->ival];
    if (!dtype_is_quant(buf->dtype)) continue;
    if (b == 1 && m->b[1]->ival == m->b[0]->ival) {
      m->wq_at[1] = m->wq_at[0];
      continue;
    }
    m->wq_at[b] = m->planes_at;
    int64_t bytes = buf->shape.dim[0]->ival * buf->shape.dim[1]->ival * 2;
    m->planes_at += (bytes + 255) / 256 * 256;
  }
}

/* Whether the GEMM reads a quantized weight (from its bf16 copy). */
static int reads_quantized(const KMma *m) { return m->wq_at[0] >= 0 || (m->nb > 1 && m->wq_at[1] >= 0); }

/* The GEMM's description from the matcher's: its operands, the accumulators as temporaries and the kernel's store
 * reading them (NULL: too many temporaries, reported). */
static KMma *describe(Lower *L, const GemmMatch *g) {
  const LKernel *k = L->k;
  ExprPool *P = L->pool;
  const LPhase *ph = k->phases;
  KMma *m = ARENA_NEW(L->arena, KMma);
  memcpy(L->var_map, g->var_map, sizeof L->var_map);
  m->m_var = k->par[g->row_axis].var;
  m->m_extent = k->par[g->row_axis].extent;
  m->nn = g->nn;
  memcpy(m->n_var, g->n_var, sizeof m->n_var);
  memcpy(m->n_ext, g->n_ext, sizeof m->n_ext);
  m->n_total = g->n_total;
  m->k_var = g->k_var;
  m->k_extent = g->k_extent;
  m->bk = g->k_extent % 32 ? 16 : 32;
  m->a_parts = L->s.mma;
  m->smem_limit = L->dev->smem_per_block;
  m->a = g->a;
  m->nb = g->nb;
  for (int i = 0; i < g->nb; i++) m->b[i] = g->b[i];
  place_weight_copies(L, m);
  /* the epilogue: the kernel's store with each sum in a temporary */
  KKernel *kk = L->kk;
  for (int i = 0; i < m->nb; i++) {
    if (kk->ntmps >= K_MAX_TMPS) {
      diag_error(L->d, 0, 0, "kernel %s: more than %d temporaries", k->name, K_MAX_TMPS);
      return NULL;
    }
    m->acc_tmp[i] = kk->ntmps;
    kk->tmp_dtype[kk->ntmps] = DT_F32;
    kk->tmp_names[kk->ntmps++] = arena_printf(L->arena, "acc%d", i);
    L->acc_map[ph[i].id] = ex_tmp(P, m->acc_tmp[i], DT_F32);
  }
  m->store = kl_output_store(L);
  return m;
}

/* kk's body: the one KS_MMA statement of m */
static void mma_statement(Lower *L, KMma *m) {
  KStmt *root = kl_st_new(L, KS_SEQ);
  KStmt *s = kl_st_new(L, KS_MMA);
  s->mma = m;
  kl_st_add(L, root, s);
  L->kk->body = root;
}

int kl_qgemv_body(Lower *L, const GemmMatch *g) {
  ExprPool *P = L->pool;
  KMma *m = describe(L, g);
  if (!m) return 0;
  for (int b = 0; b < 2; b++) m->wq_at[b] = -1; /* the blocks are read where they are */
  m->planes_at = 0;
  m->role = MMA_QGEMV;
  m->qwarps = L->s.qgemv;
  /* the weights prefetched before the wait for the kernel before (LATHE_QGEMV_PREFETCH=0: not) */
  m->qearly = setting_bool(SET_QGEMV_PREFETCH, 1);
  L->kk->late_pdl = m->qearly;
  mma_statement(L, m);
  /* a block per row and QGEMV_COLS columns, qwarps warps (code/templates/qgemv.cuh) */
  L->kk->grid = ex_mul(P, m->m_extent, ex_int(P, (m->n_total + QGEMV_COLS - 1) / QGEMV_COLS));
  L->kk->block = 32 * m->qwarps;
  return 1;
}

int kl_mma_body(Lower *L, const GemmMatch *g) {
  ExprPool *P = L->pool;
  KMma *m = describe(L, g);
  if (!m) return 0;
  KKernel *kk = L->kk;
  mma_statement(L, m);
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
  ExprPool *P = L->pool;
  /* one thread per pair of consecutive k values; and per 8 elements of each quantized weight it dequantizes */
  Expr *threads = ex_mul(P, m->m_extent, ex_int(P, m->k_extent / 2));
  for (int b = 0; b < m->nb; b++)
    if (m->wq_at[b] >= 0) {
      const Shape *sh = &L->lp->bufs[m->b[b]->ival].shape;
      threads = ex_bin(P, X_MAX, threads, ex_int(P, sh->dim[0]->ival * sh->dim[1]->ival / 8));
    }
  L->kk->pre = companion_kernel(L, m, MMA_PACK, threads);
}

typedef struct SigNames {
  const LProgram *lp;
  int m_var, k_var, stat_var;
  char tmp[16];
} SigNames;

static const char *sig_var(void *ctx, int v) {
  SigNames *n = ctx;
  if (v == n->m_var) return "m";
  if (v == n->k_var) return "k";
  if (v == n->stat_var) return "r";
  snprintf(n->tmp, sizeof n->tmp, "v%d", v);
  return n->tmp;
}

static const char *sig_buf(void *ctx, int b, MemSpace space) {
  SigNames *n = ctx;
  return space == MEM_GLOBAL && b >= 0 && b < n->lp->nbufs ? n->lp->bufs[b].name : "?";
}

static void a_bufs(const Expr *e, KGemmLib *lib) {
  if (!e || lib->na_bufs < 0) return;
  if (e->op == X_LOAD) {
    int seen = 0;
    for (int i = 0; i < lib->na_bufs; i++) seen |= lib->a_bufs[i] == (int)e->ival;
    if (!seen && lib->na_bufs == LIB_MAX_A_BUFS) lib->na_bufs = -1;
    else if (!seen) lib->a_bufs[lib->na_bufs++] = (int)e->ival;
  }
  int n = e->op == X_LOAD ? e->n : ex_op_arity(e->op);
  for (int i = 0; i < n; i++) a_bufs(e->a[i], lib);
}

static const char *sig_other(void *ctx, int i) {
  SigNames *n = ctx;
  snprintf(n->tmp, sizeof n->tmp, "x%d", i);
  return n->tmp;
}

/* KGemmLib.a_sig and a_bufs: what the pre-pass writes into the planes (with the row statistic it computes
 * first, if any) and where, as text two kernels can compare. A pre-pass that also writes quantized weights' bf16
 * copies is never skipped (na_bufs -1): those copies are its GEMM's own. */
static void a_signature(const LProgram *lp, Arena *arena, const KMma *m, KGemmLib *lib) {
  SigNames n = {lp, m->m_var, m->k_var, m->stat_body ? m->stat_var : -1, ""};
  ExprNames nm = {&n, sig_var, sig_buf, sig_other, sig_other, sig_other};
  StrBuf b = {0};
  sb_printf(&b, "parts %d, k %lld, planes at %lld, rows ", m->a_parts, (long long)m->k_extent, (long long)m->planes_at);
  ex_print(&b, m->m_extent, &nm);
  sb_puts(&b, ": ");
  ex_print(&b, m->a, &nm);
  if (m->stat_body) {
    sb_printf(&b, "; x%d = sum over r < %lld of ", m->stat_tmp, (long long)m->stat_extent);
    ex_print(&b, m->stat_body, &nm);
  }
  lib->a_sig = arena_strdup(arena, sb_str(&b));
  sb_free(&b);
  lib->na_bufs = 0;
  a_bufs(m->a, lib);
  a_bufs(m->stat_body, lib);
  if (reads_quantized(m)) lib->na_bufs = -1;
}

/* Whether buffer b read or written at idx is laid out as the products are: element (row m_var, column n_var) at
 * m_var * n_total + n_var, row-major, the axes of extent 1 aside. */
static int like_products(Lower *L, const KMma *m, int b, int nidx, Expr *const *idx) {
  ExprPool *P = L->pool;
  const LBuf *buf = &L->lp->bufs[b];
  if (buf->dtype != DT_F32 || buf->shape.rank != nidx) return 0;
  Expr *zero[L_MAX_VARS] = {0};
  for (int i = 0; i < L->k->npar; i++)
    if (ex_is_int_const(L->k->par[i].extent, 1) && L->k->par[i].var < L_MAX_VARS) zero[L->k->par[i].var] = ex_int(P, 0);
  Expr *at = ex_int(P, 0);
  for (int d = 0; d < nidx; d++)
    at = ex_add(P, ex_mul(P, at, buf->shape.dim[d]), ex_subst_vars(P, idx[d], L_MAX_VARS, zero));
  return at == ex_add(P, ex_mul(P, ex_var(P, m->m_var), ex_int(P, m->n_total)), ex_var(P, m->n_var[0]));
}

/* Whether the library GEMM can write the kernel's output itself (lib->direct_out, direct_add): when the epilogue
 * would only copy the products or add them to another buffer of the same layout (a residual), that is one weight
 * read at its column's own row, one plane of A, and the store of sum (+ that buffer) into an f32 buffer laid out
 * as the products are. */
static void direct_output(Lower *L, const KMma *m, KGemmLib *lib) {
  ExprPool *P = L->pool;
  const KStmt *st = m->store;
  lib->direct_out = lib->direct_add = -1;
  if (m->nb != 1 || m->a_parts != 1 || m->nn != 1 || lib->w_rows[0] != m->n_total || st->kind != KS_STORE) return;
  const Expr *w = m->b[0], *v = st->value, *acc = ex_tmp(P, m->acc_tmp[0], DT_F32);
  if (w->op != X_LOAD || w->n != 2 || w->a[0] != ex_var(P, m->n_var[0]) || w->a[1] != ex_var(P, m->k_var)) return;
  if (!like_products(L, m, st->buf, st->nidx, st->idx)) return;
  int add = -1;
  if (v != acc) {
    const Expr *r = v->op == X_ADD && v->a[0] == acc ? v->a[1] : v->op == X_ADD && v->a[1] == acc ? v->a[0] : NULL;
    if (!r || r->op != X_LOAD || r->aux != MEM_GLOBAL || r->ival == st->buf ||
        !like_products(L, m, (int)r->ival, r->n, r->a) || (add = kernel_param_of(L->kk, (int)r->ival, 0)) < 0)
      return;
  }
  lib->direct_out = kernel_param_of(L->kk, st->buf, 1);
  lib->direct_add = lib->direct_out >= 0 ? add : -1;
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
    lib->w_at[w] = m->wq_at[b];
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
  lib->planes_at = m->planes_at;
  a_signature(L->lp, L->arena, m, lib);
  direct_output(L, m, lib);
  kk->lib = lib;
}

/* Whether e reads buffer buf. */
static int reads_buf(const Expr *e, int buf) {
  if (!e || !(e->flags & EXF_LOAD)) return 0;
  if (e->op == X_LOAD && e->ival == buf) return 1;
  int n = e->op == X_LOAD ? e->n : ex_op_arity(e->op);
  for (int i = 0; i < n; i++)
    if (reads_buf(e->a[i], buf)) return 1;
  return 0;
}

static int kernel_reads_buf(const LKernel *k, int buf) {
  for (int i = 0; i < k->nphase; i++)
    if (reads_buf(k->phases[i].body, buf)) return 1;
  for (int d = 0; d < LT_MAX_RANK; d++)
    if (reads_buf(k->out_idx[d], buf)) return 1;
  return reads_buf(k->value, buf) || reads_buf(k->out_valid, buf);
}

typedef struct StatSubst {
  int buf;           /* the statistic kernel's output */
  Expr *value;       /* what a load of it becomes (NULL until the first load) */
  Expr *const *vars; /* the statistic kernel's variables -> expressions of the GEMM's */
  int nvars;
  const LKernel *k0;
  Expr *stat;  /* the statistic's temporary */
  int refused; /* a load at another index, or an index the statistic kernel's store cannot be matched to */
  Expr *at[LT_MAX_RANK];
} StatSubst;

static Expr *acc_to_stat(void *ctx, ExprPool *p, Expr *e) {
  (void)p;
  StatSubst *s = ctx;
  return e->op == X_ACC ? s->stat : e;
}

/* A load of the statistic kernel's output becomes that kernel's stored value at the load's index. */
static Expr *load_to_value(void *ctx, ExprPool *P, Expr *e) {
  StatSubst *s = ctx;
  if (e->op != X_LOAD || e->ival != s->buf || s->refused) return e;
  if (s->value) {
    for (int d = 0; d < e->n; d++) s->refused |= e->a[d] != s->at[d];
    return s->value;
  }
  const LKernel *k0 = s->k0;
  Expr *to[L_MAX_VARS] = {0};
  memcpy(to, s->vars, sizeof(Expr *) * (size_t)s->nvars);
  for (int d = 0; d < e->n; d++) {
    s->at[d] = e->a[d];
    const Expr *o = k0->out_idx[d];
    if (o->op != X_VAR || o->ival >= L_MAX_VARS || (to[o->ival] && to[o->ival] != e->a[d])) {
      s->refused = 1;
      return e;
    }
    to[o->ival] = e->a[d];
  }
  uint64_t mapped = 0;
  for (int v = 0; v < L_MAX_VARS; v++)
    if (to[v]) mapped |= 1ull << v;
  if (k0->value->varmask & ~mapped) {
    s->refused = 1;
    return e;
  }
  Expr *v = ex_rewrite(P, ex_subst_vars(P, k0->value, L_MAX_VARS, to), acc_to_stat, s);
  s->value = ex_cast(P, (DType)e->dtype, v);
  return s->value;
}

typedef struct SymSet {
  const char *name[32];
  int n;
} SymSet;

static void sym_node(void *ctx, const Expr *e) {
  SymSet *s = ctx;
  if (e->op != X_SYM) return;
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->name[i], e->name)) return;
  if (s->n < 32) s->name[s->n++] = e->name;
}

static int has_sym(const char *const *names, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], name)) return 1;
  return 0;
}

/* kk's symbol parameters with those of `more` added, in the program's order (as every kernel passes them);
 * 0 where that is not possible (a symbol the program does not name, or more than 16). */
static int merged_syms(const LProgram *lp, const KKernel *kk, const SymSet *more, const char **out, int *nout) {
  int n = 0;
  for (int i = 0; i < lp->nsymbols; i++)
    if (has_sym(kk->syms, kk->nsyms, lp->symbols[i]) || has_sym(more->name, more->n, lp->symbols[i])) {
      if (n == 16) return 0;
      out[n++] = lp->symbols[i];
    }
  for (int i = 0; i < kk->nsyms; i++)
    if (!has_sym(lp->symbols, lp->nsymbols, kk->syms[i])) return 0;
  for (int i = 0; i < more->n; i++)
    if (!has_sym(lp->symbols, lp->nsymbols, more->name[i])) return 0;
  *nout = n;
  return 1;
}

int kl_mma_fuse_row_stat(const TileProgram *tp, KProgram *kp, int i) {
  if (i < 1 || i >= kp->nkernels) return 0;
  const LProgram *lp = tp->loop;
  ExprPool *P = lp->pool;
  KKernel *k0k = &kp->kernels[i - 1], *gk = &kp->kernels[i];
  const LKernel *k0 = tp->kernels[i - 1].k, *k1 = tp->kernels[i].k;
  KKernel *pre = gk->alt ? gk->alt->pre : NULL;
  if (!pre || !pre->body || pre->body->nbody != 1 || pre->body->body[0]->kind != KS_MMA) return 0;
  KMma *m = pre->body->body[0]->mma;
  if (m->role != MMA_PACK || m->stat_body || !gk->alt_when) return 0;
  /* the statistic's kernel: a plain kernel of one sum over a fixed extent, its value a function of it */
  if (k0k->alt || k0k->skip || k0k->pre || k0k->lib || tp->kernels[i - 1].c.by >= 0) return 0;
  if (k0->nphase != 1 || k0->out_valid || k0->phases[0].naxes != 1 || k0->phases[0].op != RED_ADD ||
      k0->phases[0].acc_dtype != DT_F32 || (k0->phases[0].body->flags & (EXF_ACC | EXF_TMP | EXF_HW)))
    return 0;
  const LAxis *ax = &k0->phases[0].axes[0];
  if (ax->extent->op != X_CONST || ax->extent->ival < 1) return 0;
  const int buf = k0->out_buf;
  if (lp->bufs[buf].kind != BUF_TEMP) return 0;
  for (int j = 0; j < tp->nkernels; j++)
    if (j != i - 1 && j != i && kernel_reads_buf(tp->kernels[j].k, buf)) return 0;
  /* the GEMM kernel reads it only through A */
  for (int d = 0; d < LT_MAX_RANK; d++)
    if (reads_buf(k1->out_idx[d], buf)) return 0;
  if (reads_buf(k1->value, buf) || reads_buf(k1->out_valid, buf) || !reads_buf(m->a, buf)) return 0;
  if (pre->nvars >= L_MAX_VARS || pre->ntmps >= K_MAX_TMPS) return 0;
  int stat_var = pre->nvars > k1->nvars ? pre->nvars : k1->nvars;
  if (stat_var >= L_MAX_VARS) return 0;
  int stat_tmp = pre->ntmps;
  Expr *to[L_MAX_VARS] = {0};
  StatSubst s = {buf, NULL, to, L_MAX_VARS, k0, ex_tmp(P, stat_tmp, DT_F32), 0, {0}};
  Expr *a = ex_rewrite(P, m->a, load_to_value, &s);
  if (s.refused || !s.value || reads_buf(a, buf)) return 0;
  /* the statistic's body at the row the GEMM reads: the store's index variables as the load's, the sum's own
   * variable as the pre-pass's new one; it may depend on the row only */
  to[ax->var] = ex_var(P, stat_var);
  for (int d = 0; d < lp->bufs[buf].shape.rank; d++) to[k0->out_idx[d]->ival] = s.at[d];
  uint64_t mapped = 0;
  for (int v = 0; v < L_MAX_VARS; v++)
    if (to[v]) mapped |= 1ull << v;
  Expr *body0 = k0->phases[0].body;
  if (body0->varmask & ~mapped) return 0;
  Expr *body = ex_subst_vars(P, body0, L_MAX_VARS, to);
  if (body->varmask & ~((1ull << m->m_var) | (1ull << stat_var))) return 0;
  if (a->varmask & ~((1ull << m->m_var) | (1ull << m->k_var))) return 0;
  /* the buffers the statistic's kernel read that the GEMM did not become parameters of the GEMM and its pre-pass
   * and epilogue (which share its parameters), so they also live until the GEMM */
  KGemmLib probe = {0};
  a_bufs(a, &probe);
  a_bufs(body, &probe);
  if (probe.na_bufs < 0) return 0;
  int add[LIB_MAX_A_BUFS], nadd = 0;
  for (int b = 0; b < probe.na_bufs; b++) {
    if (kernel_param_of(pre, probe.a_bufs[b], 0) >= 0) continue;
    if (kernel_param_of(pre, probe.a_bufs[b], 1) >= 0) return 0; /* the GEMM writes what it would read */
    add[nadd++] = probe.a_bufs[b];
  }
  if (pre->nparams + nadd > K_MAX_PARAMS) return 0;
  /* and the symbols of their shapes and of the new expressions */
  SymSet more = {{0}, 0};
  ex_visit(a, sym_node, &more);
  ex_visit(body, sym_node, &more);
  for (int b = 0; b < nadd; b++)
    for (int d = 0; d < lp->bufs[add[b]].shape.rank; d++) ex_visit(lp->bufs[add[b]].shape.dim[d], sym_node, &more);
  const char *syms[16];
  int nsyms = 0;
  if (more.n == 32 || !merged_syms(lp, pre, &more, syms, &nsyms)) return 0;
  KKernel *shares[3] = {gk->alt, pre, gk->alt->lib ? gk->alt->lib->epilogue : NULL};
  for (int j = 0; j < 3; j++) {
    if (!shares[j]) continue;
    for (int b = 0; b < nadd; b++) shares[j]->params[shares[j]->nparams++] = (KParam){add[b], 0};
    memcpy(shares[j]->syms, syms, sizeof syms);
    shares[j]->nsyms = nsyms;
  }
  m->a = a;
  m->stat_body = body;
  m->stat_var = stat_var;
  m->stat_tmp = stat_tmp;
  m->stat_extent = ax->extent->ival;
  pre->nvars = stat_var + 1;
  pre->var_names[stat_var] = "r_stat";
  pre->tmp_dtype[stat_tmp] = DT_F32;
  pre->tmp_names[pre->ntmps++] = "stat";
  /* one block per row (the quantized weights' copies, if any, in a grid-stride loop over those blocks) */
  pre->grid = m->m_extent;
  if (gk->alt->lib) a_signature(lp, lp->arena, m, gk->alt->lib);
  /* kernel i - 1 launches nothing where the GEMM runs: under its condition, on devices with tensor cores */
  KKernel *skip = ARENA_NEW(lp->arena, KKernel);
  skip->name = arena_printf(lp->arena, "%s_skip", k0k->name);
  skip->skip = 1;
  skip->by = pre->name;
  skip->grid = ex_int(P, 0);
  skip->block = 32;
  skip->sched = k0k->sched;
  skip->tensor_cores = 1;
  k0k->alt = skip;
  k0k->alt_when = gk->alt_when;
  return 1;
}
