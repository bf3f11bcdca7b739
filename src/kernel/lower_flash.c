/* Kernel-stage lowering of attention to one flash-attention kernel (KS_FLASH): on tensor cores for the
 * register-blocked variant of a P x V kernel (prefill), and on CUDA cores with the keys split over
 * blocks (flash-decoding, KFlash.decode) for the kernel itself (few query rows: decode). Fusion (loop/fuse.c) leaves attention as three kernels:
 *
 *   A  S[i..., t] = score(sum over d of Q(i..., d) * K(i..., t, d))         (scale, causal mask)
 *   B  P[i..., t] = exp(S[i..., t] - max_t S) / sum_t exp(S[i..., t] - max_t S)
 *   C  out[...]   = epilogue(sum over t of P[idx(...), t] * V(..., t))
 *
 * When C, B and A have exactly these shapes, S and P are temporaries nobody else reads, and nothing
 * between A and C writes what Q and K read, C's variant (or C) computes A's and B's work too, with an
 * online softmax over blocks of keys (code/render_flash.c, render_flash_decode.c), and A and B get
 * variants (or are kernels) that launch nothing.
 * C's columns split into groups (heads: they share Q's row and K) and values (the head's elements):
 * a column axis the scores read whole is a group axis, one they do not read is a value axis, and one
 * they read only as n // c (the head of a flattened [heads * dim] axis) is both, n = g * c + c'. */
#include <math.h>
#include "lower_internal.h"

/* e is the load of f32 buffer `buf` at exactly the variables vars[0..n). */
static int is_load_at(const Expr *e, int buf, const int *vars, int n) {
  if (e->op != X_LOAD || e->ival != buf || e->aux != MEM_GLOBAL || e->n != n || e->dtype != DT_F32) return 0;
  for (int i = 0; i < n; i++)
    if (e->a[i]->op != X_VAR || e->a[i]->ival != vars[i]) return 0;
  return 1;
}

static int kernel_writing(const LProgram *lp, int buf, int before) {
  for (int i = before - 1; i >= 0; i--)
    if (lp->kernels[i].out_buf == buf) return i;
  return -1;
}

typedef struct ReadScan {
  int buf, found;
} ReadScan;

static void read_scan_fn(void *ctx, const Expr *e) {
  ReadScan *r = ctx;
  if (e->op == X_LOAD && e->ival == r->buf) r->found = 1;
}

static int kernel_reads(const LKernel *k, int buf) {
  ReadScan r = {buf, 0};
  for (int i = 0; i < k->nphase; i++) ex_visit(k->phases[i].body, read_scan_fn, &r);
  ex_visit(k->value, read_scan_fn, &r);
  for (int i = 0; i < k->ninner; i++) ex_visit(k->inner[i].extent, read_scan_fn, &r);
  return r.found;
}

static int readers(const LProgram *lp, int buf) {
  int n = 0;
  for (int i = 0; i < lp->nkernels; i++) n += kernel_reads(&lp->kernels[i], buf);
  return n;
}

/* B: P = softmax of S over the last axis, in exactly the loop-stage form fusion gives softmax. The
 * buffer S, or -1. */
static int softmax_source(const LProgram *lp, const LKernel *b, Expr *t_extent) {
  ExprPool *P = lp->pool;
  if (b->nphase != 2 || b->ninner != 1 || b->npar + 1 > LT_MAX_RANK) return -1;
  const LPhase *mx = &b->phases[0], *sum = &b->phases[1];
  if (mx->op != RED_MAX || sum->op != RED_ADD || mx->naxes != 1 || sum->naxes != 1 || mx->acc_dtype != DT_F32 ||
      sum->acc_dtype != DT_F32)
    return -1;
  if (mx->axes[0].extent != t_extent || sum->axes[0].extent != t_extent || b->inner[0].extent != t_extent) return -1;
  int vars[LT_MAX_RANK], n = b->npar + 1;
  for (int i = 0; i < b->npar; i++) vars[i] = b->par[i].var;
  vars[b->npar] = b->inner[0].var;
  if (lp->bufs[b->out_buf].shape.rank != n) return -1;
  for (int i = 0; i < n; i++)
    if (b->out_idx[i]->op != X_VAR || b->out_idx[i]->ival != vars[i]) return -1;
  const Expr *ld = mx->body;
  if (ld->op != X_LOAD) return -1;
  int s = (int)ld->ival;
  vars[b->npar] = mx->axes[0].var;
  if (!is_load_at(ld, s, vars, n)) return -1;
  Expr *idx[LT_MAX_RANK];
  for (int i = 0; i < n; i++) idx[i] = ex_var(P, vars[i]);
  Expr *acc0 = ex_acc(P, 0, DT_F32), *acc1 = ex_acc(P, 1, DT_F32);
  idx[b->npar] = ex_var(P, sum->axes[0].var);
  Expr *want_sum = ex_un(P, X_EXP, ex_bin(P, X_SUB, ex_load(P, s, DT_F32, n, idx, MEM_GLOBAL), acc0));
  idx[b->npar] = ex_var(P, b->inner[0].var);
  Expr *e = ex_un(P, X_EXP, ex_bin(P, X_SUB, ex_load(P, s, DT_F32, n, idx, MEM_GLOBAL), acc0));
  if (sum->body != want_sum || b->value != ex_bin(P, X_DIV, e, acc1)) return -1;
  return s;
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* How the score side (Q, K, the score) uses column variable v: *whole is set where v appears other
 * than as v // c; *div (0 at the start: none seen) becomes the gcd of every such c. */
static void scan_use(const Expr *e, int v, int64_t *div, int *whole) {
  if (!(e->varmask >> v & 1)) return;
  if (e->op == X_IDIV && e->a[0]->op == X_VAR && e->a[0]->ival == v && e->a[1]->op == X_CONST && e->a[1]->ival > 0) {
    *div = gcd64(*div, e->a[1]->ival);
    return;
  }
  if (e->op == X_VAR) {
    *whole = 1;
    return;
  }
  for (int i = 0; i < e->n; i++) scan_use(e->a[i], v, div, whole);
}

typedef struct SplitRewrite {
  int v, g, cv;
  int64_t c;
} SplitRewrite;

/* v // c' -> g // (c' / c) */
static Expr *split_fn(void *ctx, ExprPool *P, Expr *e) {
  const SplitRewrite *s = ctx;
  if (e->op == X_IDIV && e->a[0]->op == X_VAR && e->a[0]->ival == s->v && e->a[1]->op == X_CONST)
    return ex_bin(P, X_IDIV, ex_var(P, s->g), ex_int(P, e->a[1]->ival / s->c));
  return e;
}

/* The value side of a split n = g * c + c' (c' < c): n // (k c) -> g // k and n %% m -> c' %% m for m
 * dividing c, so that v's index shows which heads read the same rows. */
static Expr *split_value_fn(void *ctx, ExprPool *P, Expr *e) {
  const SplitRewrite *s = ctx;
  if ((e->op != X_IDIV && e->op != X_MOD) || e->a[0]->op != X_VAR || e->a[0]->ival != s->v || e->a[1]->op != X_CONST ||
      e->a[1]->ival < 1)
    return e;
  int64_t k = e->a[1]->ival;
  if (e->op == X_IDIV && k % s->c == 0) return ex_bin(P, X_IDIV, ex_var(P, s->g), ex_int(P, k / s->c));
  if (e->op == X_MOD && s->c % k == 0) return ex_bin(P, X_MOD, ex_var(P, s->cv), ex_int(P, k));
  return e;
}

/* score == (a < t ? -inf : x) with a = m or m + terms of neither m nor t: a, else NULL */
static Expr *causal_last(const Expr *score, int m, int t) {
  if (score->op != X_SELECT || score->a[1]->op != X_CONST || !isinf(score->a[1]->fval) || score->a[1]->fval > 0)
    return NULL;
  const Expr *c = score->a[0];
  if (c->op != X_LT || c->a[1]->op != X_VAR || c->a[1]->ival != t) return NULL;
  Expr *a = c->a[0];
  if (a->op == X_VAR && a->ival == m) return a;
  if (a->op != X_ADD) return NULL;
  for (int side = 0; side < 2; side++) {
    const Expr *x = a->a[side], *rest = a->a[1 - side];
    if (x->op == X_VAR && x->ival == m && !(rest->varmask & ((1ull << m) | (1ull << t))) && !(rest->flags & (EXF_LOAD | EXF_TMP)))
      return a;
  }
  return NULL;
}

/* Flash-decoding (KFlash.decode): the group axis whose consecutive values read the same k and v
 * (k and v use it only as g // c, or not at all), with the most such values up to 8 (a block's
 * rows), and the launch: a block per query row, row group and key chunk. Chunks of at least 32 keys,
 * as many as keep about Schedule.decode_fill blocks in all (the tile stage's choice: two on each
 * multiprocessor), at most 64 (the merge's shared weights and
 * two chunks per lane: code/render_flash_decode.c); a row with more than one chunk merges them
 * through the scratch (counters, then rows x (max, sum, width outputs) per block). */
static void decode_launch(Lower *L, KFlash *f) {
  ExprPool *P = L->pool;
  f->decode = 1;
  f->share = -1;
  f->rows = 1;
  for (int i = 0; i < f->ngroup; i++) {
    int64_t div = 0, best = 1;
    int whole = 0;
    scan_use(f->k, f->group_var[i], &div, &whole);
    scan_use(f->v, f->group_var[i], &div, &whole);
    if (whole) continue;
    for (int64_t r = 2; r <= 8; r++)
      if (f->group_ext[i] % r == 0 && (div == 0 || div % r == 0)) best = r;
    if (best > f->rows) {
      f->share = i;
      f->rows = (int)best;
    }
  }
  Expr *row_blocks = ex_mul(P, f->m_extent, ex_int(P, f->groups / f->rows));
  Expr *key_tiles = ex_bin(P, X_IDIV, ex_add(P, f->t_extent, ex_int(P, 31)), ex_int(P, 32));
  Expr *fill = ex_bin(P, X_MIN, ex_bin(P, X_IDIV, ex_int(P, L->s.decode_fill), row_blocks), ex_int(P, 64));
  f->chunks = ex_bin(P, X_MAX, ex_bin(P, X_MIN, key_tiles, fill), ex_int(P, 1));
  KKernel *kk = L->kk;
  kk->grid = ex_mul(P, row_blocks, f->chunks);
  kk->block = 128;
  kk->scratch = ex_add(P, ex_int(P, MMA_COUNTERS),
                       ex_mul(P, kk->grid, ex_int(P, (int64_t)f->rows * (f->width + 2) * 4)));
}

/* A's accumulator -> the temporary holding the dot product */
static Expr *acc_to_tmp(void *ctx, ExprPool *P, Expr *e) {
  (void)P;
  return e->op == X_ACC && e->ival == 0 ? ctx : e;
}

int kl_flash_body(Lower *L) {
  const LProgram *lp = L->lp;
  const LKernel *C = L->k;
  ExprPool *P = L->pool;
  KKernel *kk = L->kk;
  int ra = L->s.row_axis, ci = (int)(C - lp->kernels);
  int parts = L->s.flash, decode = !parts && L->s.flash_decode;
  if (L->target != TARGET_CUDA || (!decode && (parts < 1 || parts > 2 || ra < 0)) || ra >= C->npar || C->ninner ||
      C->nphase != 1)
    return 0;
  const LPhase *ph = &C->phases[0];
  if (ph->op != RED_ADD || ph->naxes != 1 || ph->acc_dtype != DT_F32 || ph->body->op != X_MUL) return 0;
  int m = ra >= 0 ? C->par[ra].var : -1, t = ph->axes[0].var; /* decode: m = -1 is one query row */
  Expr *T = ph->axes[0].extent;
  for (int i = 0; i < C->npar; i++) /* unit axes are 0 */
    if (i != ra && C->par[i].extent->op == X_CONST && C->par[i].extent->ival == 1) L->var_map[C->par[i].var] = ex_int(P, 0);
  /* C's product: P at an index whose last element is t, times V */
  Expr *pl = NULL, *v = NULL;
  for (int side = 0; side < 2 && !pl; side++) {
    Expr *x = kl_subst(L, ph->body->a[side]);
    if (x->op != X_LOAD || x->aux != MEM_GLOBAL || x->dtype != DT_F32 || x->n < 2) continue;
    const Expr *last = x->a[x->n - 1];
    if (last->op != X_VAR || last->ival != t) continue;
    int other_t = 0;
    for (int i = 0; i + 1 < x->n; i++) other_t |= (int)(x->a[i]->varmask >> t & 1);
    if (other_t) continue;
    pl = x;
    v = kl_subst(L, ph->body->a[1 - side]);
  }
  uint64_t tb = 1ull << t, mb = m >= 0 ? 1ull << m : 0;
  if (!pl || (v->varmask & mb) || (v->flags & (EXF_ACC | EXF_TMP | EXF_HW)) || !dtype_is_float(v->dtype)) return 0;
  int pbuf = (int)pl->ival;
  int bi = kernel_writing(lp, pbuf, ci);
  if (bi < 0 || lp->bufs[pbuf].kind != BUF_TEMP || readers(lp, pbuf) != 1) return 0;
  const LKernel *B = &lp->kernels[bi];
  int sbuf = softmax_source(lp, B, T);
  if (sbuf < 0 || lp->bufs[sbuf].kind != BUF_TEMP || readers(lp, sbuf) != 1) return 0;
  int ai = kernel_writing(lp, sbuf, bi);
  if (ai < 0) return 0;
  const LKernel *A = &lp->kernels[ai];
  /* A: S[par] = score(sum over d of Q * K), S indexed by its parallel variables, t last */
  if (A->ninner || A->nphase != 1 || A->npar != pl->n || A->nvars > L_MAX_VARS) return 0;
  const LPhase *aph = &A->phases[0];
  if (aph->op != RED_ADD || aph->naxes != 1 || aph->acc_dtype != DT_F32 || aph->body->op != X_MUL) return 0;
  const Expr *dext = aph->axes[0].extent;
  if (dext->op != X_CONST || dext->ival < 1 || dext->ival > 128 || (!decode && (dext->ival % 16 || dext->ival < 16)))
    return 0;
  if (A->par[A->npar - 1].extent != T) return 0;
  for (int i = 0; i < A->npar; i++)
    if (A->out_idx[i]->op != X_VAR || A->out_idx[i]->ival != A->par[i].var) return 0;
  /* A's variables in C's terms: its parallel ones where C reads P (= S), its d a new variable */
  KFlash *f = ARENA_NEW(L->arena, KFlash);
  f->d_var = kl_new_var(L, "d");
  Expr *to[L_MAX_VARS] = {0};
  for (int i = 0; i < A->npar; i++) to[A->par[i].var] = pl->a[i];
  to[aph->axes[0].var] = ex_var(P, f->d_var);
  for (int av = 0; av < 64; av++) /* every variable A's sum and value use has its meaning in C */
    if (((aph->body->varmask | A->value->varmask) >> av & 1) && !to[av]) return 0;
  f->s_tmp = kk->ntmps;
  if (kk->ntmps + 2 > K_MAX_TMPS) return 0;
  kk->tmp_dtype[kk->ntmps] = DT_F32;
  kk->tmp_names[kk->ntmps++] = "s";
  Expr *x0 = ex_subst_vars(P, aph->body->a[0], A->nvars, to), *x1 = ex_subst_vars(P, aph->body->a[1], A->nvars, to);
  Expr *sacc = ex_tmp(P, f->s_tmp, DT_F32);
  Expr *score = ex_rewrite(P, ex_subst_vars(P, A->value, A->nvars, to), acc_to_tmp, sacc);
  if (!dtype_is_float(score->dtype) || (score->flags & (EXF_HW | EXF_ACC))) return 0;
  if (score->dtype != DT_F32) score = ex_cast(P, DT_F32, score);
  /* Q does not depend on t, K not on m */
  Expr *q = (x0->varmask & tb) ? x1 : x0, *k = (x0->varmask & tb) ? x0 : x1;
  if ((q->varmask & tb) || (k->varmask & mb) || ((q->flags | k->flags) & (EXF_ACC | EXF_TMP | EXF_HW))) return 0;
  if (!dtype_is_float(q->dtype) || !dtype_is_float(k->dtype)) return 0;
  /* nothing between A and C writes what the score side reads */
  for (int i = ai + 1; i < ci; i++) {
    int ob = lp->kernels[i].out_buf;
    ReadScan r = {ob, 0};
    ex_visit(q, read_scan_fn, &r);
    ex_visit(k, read_scan_fn, &r);
    ex_visit(score, read_scan_fn, &r);
    if (r.found && i != bi) return 0;
  }
  /* columns: group and value axes */
  f->groups = f->width = 1;
  for (int i = 0; i < C->npar; i++) {
    if (i == ra || L->var_map[C->par[i].var]) continue;
    const Expr *e = C->par[i].extent;
    if (e->op != X_CONST || f->ngroup >= LT_MAX_RANK || f->nvalue >= LT_MAX_RANK) return 0;
    int cv = C->par[i].var, whole = 0;
    int64_t div = 0;
    scan_use(q, cv, &div, &whole);
    scan_use(k, cv, &div, &whole);
    scan_use(score, cv, &div, &whole);
    if (whole || (div > 0 && (e->ival % div || div == 1))) { /* a group axis */
      f->group_var[f->ngroup] = cv;
      f->group_ext[f->ngroup++] = e->ival;
      f->groups *= e->ival;
    } else if (div == 0) { /* a value axis */
      f->value_var[f->nvalue] = cv;
      f->value_ext[f->nvalue++] = e->ival;
      f->width *= e->ival;
    } else { /* n = g * div + c */
      SplitRewrite sr = {cv, kl_new_var(L, "g"), 0, div};
      int c = kl_new_var(L, "c");
      sr.cv = c;
      v = ex_rewrite(P, v, split_value_fn, &sr);
      q = ex_rewrite(P, q, split_fn, &sr);
      k = ex_rewrite(P, k, split_fn, &sr);
      score = ex_rewrite(P, score, split_fn, &sr);
      f->group_var[f->ngroup] = sr.g;
      f->group_ext[f->ngroup++] = e->ival / div;
      f->groups *= e->ival / div;
      f->value_var[f->nvalue] = c;
      f->value_ext[f->nvalue++] = div;
      f->width *= div;
      L->var_map[cv] = ex_add(P, ex_mul(P, ex_var(P, sr.g), ex_int(P, div)), ex_var(P, c));
    }
  }
  if (f->width > 128 || f->nvalue < 1 || (!decode && f->width % 16)) return 0;
  uint64_t value_mask = 0;
  for (int i = 0; i < f->nvalue; i++) value_mask |= 1ull << f->value_var[i];
  if ((q->varmask | k->varmask | score->varmask) & value_mask) return 0;
  f->m_var = m;
  f->m_extent = m >= 0 ? C->par[ra].extent : ex_int(P, 1);
  f->t_var = t;
  f->t_extent = T;
  f->d_extent = dext->ival;
  f->q = q->dtype == DT_F32 ? q : ex_cast(P, DT_F32, q);
  f->k = k->dtype == DT_F32 ? k : ex_cast(P, DT_F32, k);
  f->v = kl_subst(L, v);
  if (f->v->dtype != DT_F32) f->v = ex_cast(P, DT_F32, f->v);
  f->score = score;
  f->t_last = m >= 0 ? causal_last(score, m, t) : NULL;
  f->parts = parts;
  /* the store, with the sum over t in o_tmp */
  f->o_tmp = kk->ntmps;
  kk->tmp_dtype[kk->ntmps] = DT_F32;
  kk->tmp_names[kk->ntmps++] = "o";
  L->acc_map[ph->id] = ex_tmp(P, f->o_tmp, DT_F32);
  f->store = kl_output_store(L);
  /* P x V's epilogue and V must not read the probabilities or scores themselves: nothing writes them */
  for (int b = 0; b < 2; b++) {
    ReadScan r = {b ? sbuf : pbuf, 0};
    ex_visit(f->v, read_scan_fn, &r);
    ex_visit(f->store->value, read_scan_fn, &r);
    for (int i = 0; i < f->store->nidx; i++) ex_visit(f->store->idx[i], read_scan_fn, &r);
    if (r.found) return 0;
  }
  KStmt *root = kl_st_new(L, KS_SEQ);
  KStmt *s = kl_st_new(L, KS_FLASH);
  s->flash = f;
  kl_st_add(L, root, s);
  kk->body = root;
  f->scores_kernel = ai;
  f->softmax_kernel = bi;
  if (decode) {
    decode_launch(L, f);
    return 1;
  }
  kk->tensor_cores = 1;
  /* a block of 4 warps: 64 query rows of one group */
  Expr *mblocks = ex_bin(P, X_IDIV, ex_add(P, f->m_extent, ex_int(P, 63)), ex_int(P, 64));
  kk->grid = ex_mul(P, mblocks, ex_int(P, f->groups));
  kk->block = 128;
  return 1;
}
