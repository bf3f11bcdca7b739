/* The attention shape. Fusion (loop/fuse.c) leaves attention as three kernels:
 *
 *   A  S[i..., t] = score(sum over d of Q(i..., d) * K(i..., t, d))         (scale, causal mask)
 *   B  P[i..., t] = exp(S[i..., t] - max_t S) / sum_t exp(S[i..., t] - max_t S)
 *   C  out[...]   = epilogue(sum over t of P[idx(...), t] * V(..., t))
 *
 * C matches when C, B and A have exactly these shapes, S and P are temporaries nobody else reads, and
 * nothing between A and C writes what Q and K read; then one flash kernel in C's place can do A's and
 * B's work too (kernel/lower_flash.c). C's columns split into groups (heads: they share Q's row and K)
 * and values (the head's elements): a column axis the scores read whole is a group axis, one they do
 * not read is a value axis, and one they read only as n // c (the head of a flattened [heads * dim]
 * axis) is both, n = g * c + c'. */
#include <string.h>
#include "match.h"

#define REFUSE(...)                                                                                                    \
  do {                                                                                                                 \
    diag_error(why, 0, 0, __VA_ARGS__);                                                                                \
    return 0;                                                                                                          \
  } while (0)

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

static int reads(const Expr *e, int buf) {
  ReadScan r = {buf, 0};
  if (e) ex_visit(e, read_scan_fn, &r);
  return r.found;
}

static int kernel_reads(const LKernel *k, int buf) {
  int found = reads(k->value, buf);
  for (int i = 0; i < k->nphase; i++) found |= reads(k->phases[i].body, buf);
  for (int i = 0; i < k->ninner; i++) found |= reads(k->inner[i].extent, buf);
  return found;
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
void match_scan_use(const Expr *e, int v, int64_t *div, int *whole) {
  if (!(e->varmask >> v & 1)) return;
  if (e->op == X_IDIV && e->a[0]->op == X_VAR && e->a[0]->ival == v && e->a[1]->op == X_CONST && e->a[1]->ival > 0) {
    *div = gcd64(*div, e->a[1]->ival);
    return;
  }
  if (e->op == X_VAR) {
    *whole = 1;
    return;
  }
  for (int i = 0; i < e->n; i++) match_scan_use(e->a[i], v, div, whole);
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

/* A's accumulator -> the temporary holding the dot product */
static Expr *acc_to_tmp(void *ctx, ExprPool *P, Expr *e) {
  (void)P;
  return e->op == X_ACC && e->ival == 0 ? ctx : e;
}

/* A new variable of the flash kernel (numbered after C's own, in order); -1 when there is no room. */
static int new_var(AttnMatch *m, const LKernel *C, const char *name) {
  if (C->nvars + m->nnew >= L_MAX_VARS || m->nnew >= 1 + 2 * LT_MAX_RANK) return -1;
  m->new_names[m->nnew] = name;
  return C->nvars + m->nnew++;
}

/* C's column axes as groups and values (splitting n = g * c + c' where the score side reads n // c),
 * rewriting q, k, score and v to the split variables. */
static int classify_columns(const LProgram *lp, const LKernel *C, int ra, AttnMatch *m, Expr **qp, Expr **kp,
                            Expr **scorep, Expr **vp, Diag *why) {
  ExprPool *P = lp->pool;
  Expr *q = *qp, *k = *kp, *score = *scorep, *v = *vp;
  m->groups = m->width = 1;
  for (int i = 0; i < C->npar; i++) {
    if (i == ra || m->var_map[C->par[i].var]) continue;
    const Expr *e = C->par[i].extent;
    if (e->op != X_CONST || m->ngroup >= LT_MAX_RANK || m->nvalue >= LT_MAX_RANK)
      REFUSE("%s: column axis %d has a run-time extent", C->name, i);
    int cv = C->par[i].var, whole = 0;
    int64_t div = 0;
    match_scan_use(q, cv, &div, &whole);
    match_scan_use(k, cv, &div, &whole);
    match_scan_use(score, cv, &div, &whole);
    if (whole || (div > 0 && (e->ival % div || div == 1))) { /* a group axis */
      m->group_var[m->ngroup] = cv;
      m->group_ext[m->ngroup++] = e->ival;
      m->groups *= e->ival;
    } else if (div == 0) { /* a value axis */
      m->value_var[m->nvalue] = cv;
      m->value_ext[m->nvalue++] = e->ival;
      m->width *= e->ival;
    } else { /* n = g * div + c */
      SplitRewrite sr = {cv, new_var(m, C, "g"), 0, div};
      int c = new_var(m, C, "c");
      if (sr.g < 0 || c < 0) REFUSE("%s: too many loop variables for a flash kernel", C->name);
      sr.cv = c;
      v = ex_rewrite(P, v, split_value_fn, &sr);
      q = ex_rewrite(P, q, split_fn, &sr);
      k = ex_rewrite(P, k, split_fn, &sr);
      score = ex_rewrite(P, score, split_fn, &sr);
      m->group_var[m->ngroup] = sr.g;
      m->group_ext[m->ngroup++] = e->ival / div;
      m->groups *= e->ival / div;
      m->value_var[m->nvalue] = c;
      m->value_ext[m->nvalue++] = div;
      m->width *= div;
      m->var_map[cv] = ex_add(P, ex_mul(P, ex_var(P, sr.g), ex_int(P, div)), ex_var(P, c));
    }
  }
  if (m->width > 128 || m->nvalue < 1 || (!m->decode && m->width % 16))
    REFUSE("%s: %lld values per head, not 1 to 128%s", C->name, (long long)m->width,
           m->decode ? "" : " and a multiple of 16 (tensor cores)");
  *qp = q;
  *kp = k;
  *scorep = score;
  *vp = v;
  return 1;
}

int match_attention(const LProgram *lp, int ci, int ra, int decode, AttnMatch *m, Diag *why) {
  ExprPool *P = lp->pool;
  memset(m, 0, sizeof *m);
  if (ci < 0 || ci >= lp->nkernels) REFUSE("#%d does not exist (the program has %d kernels)", ci, lp->nkernels);
  const LKernel *C = &lp->kernels[ci];
  m->decode = decode;
  if (!decode && ra < 0) REFUSE("%s: flash attention needs a blocked row axis", C->name);
  if (ra >= C->npar) REFUSE("%s: row axis %d does not exist", C->name, ra);
  /* Flash-decoding takes one query row per block, so K and V may differ from row to row (a batch of
   * sequences, each with its own keys): an unblocked decode kernel's one run-time axis is its rows. */
  if (decode && ra < 0)
    for (int i = 0; i < C->npar; i++)
      if (C->par[i].extent->op != X_CONST) {
        if (ra >= 0) REFUSE("%s: more than one run-time column axis", C->name);
        ra = i;
      }
  if (C->ninner || C->nphase != 1)
    REFUSE("%s is not P x V: it has %d reductions and %d inner axes", C->name, C->nphase, C->ninner);
  const LPhase *ph = &C->phases[0];
  if (ph->op != RED_ADD || ph->naxes != 1 || ph->acc_dtype != DT_F32 || ph->body->op != X_MUL)
    REFUSE("%s is not P x V: its reduction is not an f32 sum of a product over one axis", C->name);
  if (ph->body->flags & EXF_ACC) REFUSE("%s is not P x V: its product reads another reduction", C->name);
  int mv = ra >= 0 ? C->par[ra].var : -1, t = ph->axes[0].var; /* decode: mv = -1 is one query row */
  Expr *T = ph->axes[0].extent;
  for (int i = 0; i < C->npar; i++) /* unit axes are 0 */
    if (i != ra && C->par[i].extent->op == X_CONST && C->par[i].extent->ival == 1)
      m->var_map[C->par[i].var] = ex_int(P, 0);
  /* C's product: P at an index whose last element is t, times V */
  Expr *pl = NULL, *v = NULL;
  for (int side = 0; side < 2 && !pl; side++) {
    Expr *x = ex_subst_vars(P, ph->body->a[side], L_MAX_VARS, m->var_map);
    if (x->op != X_LOAD || x->aux != MEM_GLOBAL || x->dtype != DT_F32 || x->n < 2) continue;
    const Expr *last = x->a[x->n - 1];
    if (last->op != X_VAR || last->ival != t) continue;
    int other_t = 0;
    for (int i = 0; i + 1 < x->n; i++) other_t |= (int)(x->a[i]->varmask >> t & 1);
    if (other_t) continue;
    pl = x;
    v = ex_subst_vars(P, ph->body->a[1 - side], L_MAX_VARS, m->var_map);
  }
  uint64_t tb = 1ull << t, mb = mv >= 0 ? 1ull << mv : 0;
  if (!pl) REFUSE("%s is not P x V: neither factor is an f32 buffer read with the summed axis last", C->name);
  if ((!decode && (v->varmask & mb)) || (v->flags & (EXF_ACC | EXF_TMP | EXF_HW)) || !dtype_is_float(v->dtype))
    REFUSE("%s is not P x V: V depends on the query row or is not a float", C->name);
  int pbuf = (int)pl->ival;
  int bi = kernel_writing(lp, pbuf, ci);
  if (bi < 0 || lp->bufs[pbuf].kind != BUF_TEMP || readers(lp, pbuf) != 1)
    REFUSE("%s is not P x V: P (%s) is not a temporary only it reads", C->name, lp->bufs[pbuf].name);
  const LKernel *B = &lp->kernels[bi];
  int sbuf = softmax_source(lp, B, T);
  if (sbuf < 0) REFUSE("%s is not P x V: %s is not a softmax over the summed axis", C->name, B->name);
  if (lp->bufs[sbuf].kind != BUF_TEMP || readers(lp, sbuf) != 1)
    REFUSE("%s is not P x V: the scores (%s) are not a temporary only the softmax reads", C->name, lp->bufs[sbuf].name);
  int ai = kernel_writing(lp, sbuf, bi);
  if (ai < 0) REFUSE("%s is not P x V: no kernel writes the scores", C->name);
  const LKernel *A = &lp->kernels[ai];
  /* A: S[par] = score(sum over d of Q * K), S indexed by its parallel variables, t last */
  if (A->ninner || A->nphase != 1 || A->npar != pl->n || A->nvars > L_MAX_VARS)
    REFUSE("%s is not P x V: the scores kernel %s is not one sum per score", C->name, A->name);
  const LPhase *aph = &A->phases[0];
  if (aph->op != RED_ADD || aph->naxes != 1 || aph->acc_dtype != DT_F32 || aph->body->op != X_MUL)
    REFUSE("%s is not P x V: the scores kernel %s is not an f32 dot product", C->name, A->name);
  const Expr *dext = aph->axes[0].extent;
  if (dext->op != X_CONST || dext->ival < 1 || dext->ival > 128 || (!decode && (dext->ival % 16 || dext->ival < 16)))
    REFUSE("%s: the dot product's length is not a constant of at most 128%s", C->name,
           decode ? "" : " and a multiple of 16 (tensor cores)");
  if (A->par[A->npar - 1].extent != T) REFUSE("%s is not P x V: the scores' last axis is not the summed one", C->name);
  for (int i = 0; i < A->npar; i++)
    if (A->out_idx[i]->op != X_VAR || A->out_idx[i]->ival != A->par[i].var)
      REFUSE("%s is not P x V: the scores are not stored at their own indices", C->name);
  /* A's variables in C's terms: its parallel ones where C reads P (= S), its d a new variable */
  if ((m->d_var = new_var(m, C, "d")) < 0) REFUSE("%s: too many loop variables for a flash kernel", C->name);
  Expr *to[L_MAX_VARS] = {0};
  for (int i = 0; i < A->npar; i++) to[A->par[i].var] = pl->a[i];
  to[aph->axes[0].var] = ex_var(P, m->d_var);
  for (int av = 0; av < 64; av++) /* every variable A's sum and value use has its meaning in C */
    if (((aph->body->varmask | A->value->varmask) >> av & 1) && !to[av])
      REFUSE("%s is not P x V: the scores use a variable P's index does not give", C->name);
  Expr *x0 = ex_subst_vars(P, aph->body->a[0], A->nvars, to), *x1 = ex_subst_vars(P, aph->body->a[1], A->nvars, to);
  /* the dot product is the flash kernel's first temporary (kernel/lower_flash.c declares it so) */
  Expr *score = ex_rewrite(P, ex_subst_vars(P, A->value, A->nvars, to), acc_to_tmp, ex_tmp(P, 0, DT_F32));
  if (!dtype_is_float(score->dtype) || (score->flags & (EXF_HW | EXF_ACC)))
    REFUSE("%s is not P x V: the score is not a float of the dot product alone", C->name);
  if (score->dtype != DT_F32) score = ex_cast(P, DT_F32, score);
  /* Q does not depend on t, K not on m */
  Expr *q = (x0->varmask & tb) ? x1 : x0, *k = (x0->varmask & tb) ? x0 : x1;
  if ((q->varmask & tb) || (!decode && (k->varmask & mb)) || ((q->flags | k->flags) & (EXF_ACC | EXF_TMP | EXF_HW)))
    REFUSE("%s is not P x V: Q depends on the keys or K on the query row", C->name);
  if (!dtype_is_float(q->dtype) || !dtype_is_float(k->dtype)) REFUSE("%s: Q or K is not a float", C->name);
  /* nothing between A and C writes what the score side reads */
  for (int i = ai + 1; i < ci; i++) {
    int ob = lp->kernels[i].out_buf;
    if (i != bi && (reads(q, ob) || reads(k, ob) || reads(score, ob)))
      REFUSE("%s: %s writes what the scores read between them and P x V", C->name, lp->kernels[i].name);
  }
  if (!classify_columns(lp, C, ra, m, &q, &k, &score, &v, why)) return 0;
  uint64_t value_mask = 0;
  for (int i = 0; i < m->nvalue; i++) value_mask |= 1ull << m->value_var[i];
  if ((q->varmask | k->varmask | score->varmask) & value_mask)
    REFUSE("%s is not P x V: the scores depend on a value axis", C->name);
  /* P x V's epilogue and V must not read the probabilities or scores themselves: nothing writes them */
  v = ex_subst_vars(P, v, L_MAX_VARS, m->var_map);
  for (int b = 0; b < 2; b++) {
    int buf = b ? sbuf : pbuf;
    int found = reads(v, buf) || reads(C->value, buf);
    for (int i = 0; i < lp->bufs[C->out_buf].shape.rank; i++) found |= reads(C->out_idx[i], buf);
    if (found) REFUSE("%s: V or the epilogue reads the %s themselves", C->name, b ? "scores" : "probabilities");
  }
  m->scores_kernel = ai;
  m->softmax_kernel = bi;
  m->p_buf = pbuf;
  m->s_buf = sbuf;
  m->m_var = mv;
  m->m_extent = mv >= 0 ? C->par[ra].extent : ex_int(P, 1);
  m->t_var = t;
  m->t_extent = T;
  m->d_extent = dext->ival;
  m->q = q;
  m->k = k;
  m->v = v;
  m->score = score;
  return 1;
}
