/* Kernel-stage lowering of reduction phases.
 *
 * A phase over one reduction axis is lowered as a "group": consecutive such phases over the same
 * extent that do not read each other's results share one loop (a gate and an up projection read the
 * activation once, with two accumulators). For the group's loop:
 *   - loop-invariant subexpressions (a norm's 1/sqrt(mean + eps), a row's base offset) are computed
 *     once, before it;
 *   - with vector width V > 1 each thread takes V consecutive elements per step, the V bodies are
 *     unrolled, and every load whose flat index is `aligned + k` for element k becomes one KS_VLOAD
 *     of V elements (on CUDA, 16-byte loads of bf16 weights instead of eight 2-byte ones); up to 4
 *     vectors are unrolled per step with all their loads first;
 *   - with register blocking (L->nrows > 1) the phases are computed for several rows at once, one
 *     accumulator per row and phase, so loads that do not depend on the row are shared.
 * The order in which each accumulator folds its elements is unchanged within a thread.
 * Phases over several axes get one flattened loop each (emit_phase).
 */
#include <stdlib.h>
#include <string.h>
#include "lower_internal.h"
#include "../base/mem.h"
#include "../base/settings.h"

int kl_loop_vec(const Lower *L) { return L->target == TARGET_CUDA ? 1 : L->s.vec; }

void kl_select_row(Lower *L, int t) {
  if (L->nrows <= 1) return;
  L->var_map[L->row_var] = ex_add(L->pool, L->row_base, ex_int(L->pool, t));
  memcpy(L->acc_map, L->acc_rows[t], sizeof L->acc_map);
}

void kl_save_row(Lower *L, int t) {
  if (L->nrows > 1) memcpy(L->acc_rows[t], L->acc_map, sizeof L->acc_map);
}

static void reduce_across_threads(Lower *L, KStmt *seq, int acc_id, Expr *acc, ReduceOp op) {
  if (L->target != TARGET_CUDA || L->s.red == RS_SERIAL) return;
  kl_st_warp_reduce(L, seq, acc_id, op);
  if (L->s.red == RS_BLOCK) kl_block_reduce(L, seq, acc_id, acc, op);
}

static void emit_phase(Lower *L, KStmt *seq, const LPhase *ph, int index) {
  int acc_id = -1;
  const char *name = arena_printf(L->arena, "acc%d", index);
  Expr *acc = kl_decl_tmp(L, seq, ph->acc_dtype, name, kl_identity(L, ph->op, ph->acc_dtype), &acc_id);
  if (acc_id < 0) return;
  Expr *start, *stride;
  kl_coop_start(L, &start, &stride);
  KStmt *body = kl_domain_loop(L, seq, ph->axes, ph->naxes, start, stride, kl_loop_vec(L));
  kl_st_assign(L, body, acc_id, kl_combine(L, ph->op, acc, kl_subst(L, ph->body)));
  reduce_across_threads(L, seq, acc_id, acc, ph->op);
  L->acc_map[ph->id] = acc;
}

/* ---- a set of (expression, flag) pairs, for walks over DAG-shaped bodies ---- */

typedef struct Memo {
  const Expr **from;
  Expr **to;
  int n, cap;
} Memo;

static Expr **memo_slot(Memo *m, const Expr *e, int add) {
  for (int i = 0; i < m->n; i++)
    if (m->from[i] == e) return &m->to[i];
  if (!add) return NULL;
  if (m->n == m->cap) {
    m->cap = m->cap ? 2 * m->cap : 64;
    m->from = xrealloc(m->from, (size_t)m->cap * sizeof *m->from, "the phase map");
    m->to = xrealloc(m->to, (size_t)m->cap * sizeof *m->to, "the phase map");
  }
  m->from[m->n] = e;
  m->to[m->n] = NULL;
  return &m->to[m->n++];
}

static void memo_free(Memo *m) {
  free(m->from);
  free(m->to);
  *m = (Memo){0};
}

/* ---- loop-invariant code motion ---- */

typedef struct Hoist {
  Lower *L;
  KStmt *seq;        /* where the invariant values are declared (before the loop) */
  uint64_t loopmask; /* X_VAR bits that change inside the loop */
  int loads_ok;      /* subtrees with loads may move too */
  Memo done[2];      /* by "under a select arm" */
} Hoist;

/* The largest invariant subtrees of e become temporaries declared before the loop. Nothing is hoisted
 * out of a select's arms: an arm may guard a load that is only valid when it is chosen. */
static Expr *hoist(Hoist *h, Expr *e, int under_arm) {
  Expr **slot = memo_slot(&h->done[under_arm], e, 1);
  if (*slot) return *slot;
  Expr *r = e;
  if (!(e->varmask & h->loopmask)) {
    if (e->n > 0 && !under_arm && !(e->flags & EXF_ACC) && (h->loads_ok || !(e->flags & EXF_LOAD)))
      r = kl_decl_tmp(h->L, h->seq, e->dtype, "inv", e, NULL);
  } else if (e->n > 0) {
    Expr *ops[LT_MAX_RANK > 3 ? LT_MAX_RANK : 3];
    int changed = 0;
    for (int i = 0; i < e->n; i++) {
      ops[i] = hoist(h, e->a[i], under_arm || (e->op == X_SELECT && i > 0));
      changed |= ops[i] != e->a[i];
    }
    if (changed) r = ex_rebuild(h->L->pool, e, ops);
  }
  /* the slot may have moved while operands were memoised */
  *memo_slot(&h->done[under_arm], e, 0) = r;
  return r;
}

/* ---- vector loads ---- */

/* e is affine in variable v (< 64): *c is its coefficient. */
static int affine_coeff(const Expr *e, int v, int64_t *c) {
  if (!(e->varmask >> v & 1)) {
    *c = 0;
    return 1;
  }
  int64_t a, b;
  switch (e->op) {
  case X_VAR: *c = 1; return 1;
  case X_ADD:
  case X_SUB:
    if (!affine_coeff(e->a[0], v, &a) || !affine_coeff(e->a[1], v, &b)) return 0;
    *c = e->op == X_ADD ? a + b : a - b;
    return 1;
  case X_MUL:
    for (int i = 0; i < 2; i++)
      if (e->a[i]->op == X_CONST && affine_coeff(e->a[1 - i], v, &a)) {
        *c = a * e->a[i]->ival;
        return 1;
      }
    return 0;
  default: return 0;
  }
}

/* e is a multiple of V whenever variable `step_var` (itself always a multiple of V) is. */
static int multiple_of(const Expr *e, int64_t V, int step_var) {
  switch (e->op) {
  case X_CONST: return !dtype_is_float(e->dtype) && e->ival % V == 0;
  case X_VAR: return e->ival == step_var;
  case X_ADD:
  case X_SUB: return multiple_of(e->a[0], V, step_var) && multiple_of(e->a[1], V, step_var);
  case X_MUL: return multiple_of(e->a[0], V, step_var) || multiple_of(e->a[1], V, step_var);
  default: return 0;
  }
}

typedef struct VecLoads {
  Lower *L;
  int kvar, rvar, V;
  Expr *load[64]; /* loads read as vectors (at symbolic element k) */
  int tmp[64];    /* first temporary of each: element k is tmp + k */
  int n;
  Memo seen[2];
} VecLoads;

/* A global load read at consecutive elements k = 0..V-1, from a flat index that is a multiple of V
 * (so no vector straddles its alignment), of a 2- or 4-byte type, with no load in its index. */
static int vectorizable(const VecLoads *vl, const Expr *e) {
  if (e->op != X_LOAD || e->aux != MEM_GLOBAL || e->n < 1) return 0;
  /* quantized weights: eight elements decoded at once on CUDA (render_quant.c's lt_dq8_FORMAT) */
  int quant = dtype_is_quant(e->dtype) && vl->L->target == TARGET_CUDA && vl->V == 8;
  if (e->dtype != DT_F32 && e->dtype != DT_BF16 && e->dtype != DT_F16 && e->dtype != DT_I32 && !quant) return 0;
  if (e->ival < 0 || e->ival >= vl->L->lp->nbufs) return 0;
  const Shape *sh = &vl->L->lp->bufs[e->ival].shape;
  if (sh->rank != e->n) return 0;
  int last = e->n - 1;
  const Expr *dl = sh->dim[last];
  int last_dim_aligned = dl->op == X_CONST && dl->ival % vl->V == 0;
  int64_t c;
  for (int i = 0; i < e->n; i++) {
    if (e->a[i]->flags & EXF_LOAD) return 0;
    if (!affine_coeff(e->a[i], vl->kvar, &c) || c != (i == last ? 1 : 0)) return 0;
  }
  ExprPool *P = vl->L->pool;
  Expr *zero[L_MAX_VARS] = {0};
  zero[vl->kvar] = ex_int(P, 0);
  if (!multiple_of(ex_subst_vars(P, e->a[last], L_MAX_VARS, zero), vl->V, vl->rvar)) return 0;
  for (int i = 0; i < last; i++)
    if (!last_dim_aligned && !multiple_of(e->a[i], vl->V, vl->rvar)) return 0;
  return 1;
}

/* Collects the vectorizable loads evaluated unconditionally (not only inside a select's arms, where
 * the scalar code might never read them). */
static void find_vec_loads(VecLoads *vl, Expr *e, int under_arm) {
  Expr **slot = memo_slot(&vl->seen[under_arm], e, 1);
  if (*slot) return;
  *slot = e;
  if (!under_arm && vl->n < 64 && vectorizable(vl, e)) {
    for (int i = 0; i < vl->n; i++)
      if (vl->load[i] == e) return;
    vl->load[vl->n++] = e;
    return;
  }
  for (int i = 0; i < e->n; i++) find_vec_loads(vl, e->a[i], under_arm || (e->op == X_SELECT && i > 0));
}

/* The type of a vector-loaded element: its own, or f32 for a decoded quantized one. */
static DType vec_value_type(DType t) { return dtype_is_quant(t) ? DT_F32 : t; }

/* Declares the V temporaries of vector load j and the KS_VLOAD that fills them, at k = 0. */
static void emit_vload(VecLoads *vl, KStmt *loop, int j) {
  Lower *L = vl->L;
  KKernel *kk = L->kk;
  Expr *e = vl->load[j];
  if (kk->ntmps + vl->V > K_MAX_TMPS) {
    if (!L->failed) diag_error(L->d, 0, 0, "kernel %s: more than %d temporaries", kk->name, K_MAX_TMPS);
    L->failed = 1;
    return;
  }
  KStmt *s = kl_st_new(L, KS_VLOAD);
  s->buf = (int)e->ival;
  s->dtype = e->dtype;
  s->count = vl->V;
  s->tmp = kk->ntmps;
  s->nidx = e->n;
  Expr *zero[L_MAX_VARS] = {0};
  zero[vl->kvar] = ex_int(L->pool, 0);
  for (int i = 0; i < e->n; i++) s->idx[i] = ex_subst_vars(L->pool, e->a[i], L_MAX_VARS, zero);
  for (int k = 0; k < vl->V; k++) {
    kk->tmp_dtype[kk->ntmps] = vec_value_type(e->dtype);
    kk->tmp_names[kk->ntmps++] = arena_printf(L->arena, "ld%d_%d", j, k);
  }
  vl->tmp[j] = s->tmp;
  kl_st_add(L, loop, s);
}

typedef struct AtElement {
  VecLoads *vl;
  int k;
  Expr *inst[64]; /* load j at element k: replaced by temporary tmp[j] + k */
} AtElement;

static Expr *at_element_fn(void *ctx, ExprPool *p, Expr *e) {
  AtElement *a = ctx;
  if (e->op == X_VAR && e->ival == a->vl->kvar) return ex_int(p, a->k);
  if (e->op == X_LOAD)
    for (int j = 0; j < a->vl->n; j++)
      if (a->inst[j] == e) return ex_tmp(p, a->vl->tmp[j] + a->k, vec_value_type(e->dtype));
  return e;
}

/* body (over symbolic element k) at element k, with vector-loaded values in place of their loads. */
static Expr *at_element(VecLoads *vl, Expr *body, int k) {
  AtElement a = {vl, k, {0}};
  Expr *to[L_MAX_VARS] = {0};
  to[vl->kvar] = ex_int(vl->L->pool, k);
  for (int j = 0; j < vl->n; j++) a.inst[j] = ex_subst_vars(vl->L->pool, vl->load[j], L_MAX_VARS, to);
  return ex_rewrite(vl->L->pool, body, at_element_fn, &a);
}

/* ---- groups ---- */

static int coop_threads(const Lower *L) {
  if (L->target != TARGET_CUDA) return 1;
  return L->s.red == RS_WARP ? L->dev->warp_size : L->s.red == RS_BLOCK ? L->s.block_threads : 1;
}

/* ---- vector stores: a one-axis inner loop on CUDA (Schedule.store_vec) ---- */

int kl_emit_inner_vec(Lower *L, KStmt *seq) {
  const LKernel *k = L->k;
  const int V = L->s.store_vec;
  if (L->target != TARGET_CUDA || V < 2 || k->ninner != 1 || k->inner[0].extent->op != X_CONST || k->out_valid)
    return 0;
  const LBuf *out = &L->lp->bufs[k->out_buf];
  const int64_t n = k->inner[0].extent->ival, T = coop_threads(L);
  if (out->dtype != DT_F32 || n % (T * V) || out->shape.rank < 1 || out->shape.rank > LT_MAX_RANK) return 0;
  ExprPool *P = L->pool;
  const int iv = k->inner[0].var, rv = kl_new_var(L, "j"), kv = kl_new_var(L, "k");
  L->var_map[iv] = ex_add(P, ex_var(P, rv), ex_var(P, kv));
  Expr *idx[LT_MAX_RANK];
  for (int i = 0; i < out->shape.rank; i++) idx[i] = kl_subst(L, k->out_idx[i]);
  /* the store takes V consecutive elements at a multiple of V exactly when a load at its index would */
  VecLoads vl = {.L = L, .kvar = kv, .rvar = rv, .V = V};
  if (!vectorizable(&vl, ex_load(P, k->out_buf, out->dtype, out->shape.rank, idx, MEM_GLOBAL))) {
    L->var_map[iv] = NULL;
    return 0;
  }
  Expr *value = kl_subst(L, k->value);
  if (value->dtype != out->dtype) value = ex_cast(P, out->dtype, value);
  Expr *start, *stride;
  kl_coop_start(L, &start, &stride);
  KStmt *loop =
      kl_st_for(L, seq, rv, ex_mul(P, start, ex_int(P, V)), k->inner[0].extent, ex_mul(P, stride, ex_int(P, V)));
  find_vec_loads(&vl, value, 0);
  memo_free(&vl.seen[0]);
  memo_free(&vl.seen[1]);
  for (int j = 0; j < vl.n && !L->failed; j++) emit_vload(&vl, loop, j);
  int first = -1;
  for (int e = 0; e < V && !L->failed; e++) {
    int id = -1;
    kl_decl_tmp(L, loop, out->dtype, arena_printf(L->arena, "st%d", e), at_element(&vl, value, e), &id);
    if (e == 0) first = id;
    else if (id != first + e && !L->failed) {
      diag_error(L->d, 0, 0, "kernel %s: the vector store's values are not consecutive temporaries", L->kk->name);
      L->failed = 1;
    }
  }
  if (L->failed) return 1;
  KStmt *st = kl_st_new(L, KS_VSTORE);
  st->buf = k->out_buf;
  st->dtype = out->dtype;
  st->count = V;
  st->tmp = first;
  st->nidx = out->shape.rank;
  Expr *zero[L_MAX_VARS] = {0};
  zero[kv] = ex_int(P, 0);
  for (int i = 0; i < st->nidx; i++) st->idx[i] = ex_subst_vars(P, idx[i], L_MAX_VARS, zero);
  kl_st_add(L, loop, st);
  return 1;
}

/* The vector width of a one-axis phase: the largest V <= s.vec dividing a constant extent that still
 * gives every cooperating thread a whole vector. */
static int phase_vec(const Lower *L, const LPhase *ph) {
  if (L->s.vec <= 1 || ph->axes[0].extent->op != X_CONST) return 1;
  int64_t e = ph->axes[0].extent->ival, threads = coop_threads(L);
  for (int v = L->s.vec; v > 1; v /= 2)
    if (e % v == 0 && e >= threads * v) return v;
  return 1;
}

typedef struct AccScan {
  int lo, hi, hit;
} AccScan;

static void acc_scan_fn(void *ctx, const Expr *e) {
  AccScan *s = ctx;
  if (e->op == X_ACC && e->ival >= s->lo && e->ival < s->hi) s->hit = 1;
}

/* Phase `next` can join the group phases[first .. next): one axis, the same extent, and it does not
 * read the group's accumulators (they are final only after the loop). */
static int joins_group(const LKernel *k, int first, int next) {
  const LPhase *q = &k->phases[next];
  if (q->naxes != 1 || q->axes[0].extent != k->phases[first].axes[0].extent) return 0;
  AccScan s = {k->phases[first].id, k->phases[first].id + (next - first), 0};
  if (q->body->flags & EXF_ACC) ex_visit(q->body, acc_scan_fn, &s);
  return !s.hit;
}

/* The bytes of a block that CUDA's 8-element dot product reads (render_quant.c's lt_qld_FORMAT): the elements' 8
 * bytes of bits (q5_0, q5_k, q6_k: also their high bits) and the scales (q4_k, q5_k: the block's 16-byte head). */
static int quant_vector_bytes(DType t) {
  switch (t) {
  case DT_Q5_0:
  case DT_Q5_1: return 16;
  case DT_Q4_K: return 24;
  case DT_Q5_K: return 32;
  case DT_Q6_K: return 20;
  default: return 12;
  }
}

/* Unrolling (at most Schedule.unroll where set): U vectors per loop step, their loads issued before any use, so each
 * thread keeps U times the bytes in flight (a GEMV with few rows is latency-bound otherwise). Every thread has the same
 * number of vectors and U divides it (the loop checks only the first vector of a step, so there is no
 * remainder to guard), and U * (vector loads per step) stays <= 8 to bound registers. */
static int phase_unroll(const Lower *L, const LPhase *ph, int V, int nloads, int nquant, int qbytes) {
  const int quant = nquant > 0;
  if (V <= 1 || ph->axes[0].extent->op != X_CONST) return 1;
  int64_t chunk = (int64_t)coop_threads(L) * V;   /* elements per pass of all threads */
  if (ph->axes[0].extent->ival % chunk) return 1; /* threads differ in their number of vectors */
  int64_t per_thread = ph->axes[0].extent->ival / chunk;
  /* a quantized weight's vector is a few bytes (q4_0: 4.5 for 8 elements, against 16 of bf16), so the same
   * unrolling keeps far fewer bytes in flight: LATHE_QUANT_UNROLL allows more vectors (and loads) a step */
  int most = 4, bound = 8, ok = 1;
  if (quant) {
    long q = setting_int(SET_QUANT_UNROLL, 4, &ok);
    if (ok && q >= 2 && q <= 16 && !(q & (q - 1))) most = (int)q, bound = 2 * (int)q;
  }
  if (L->s.unroll > 0 && L->s.unroll < most) most = L->s.unroll; /* Schedule.unroll caps it */
  /* R rows of quantized weights a point (register blocking on CUDA: a GEMV's rows a warp) share the activations'
   * loads, so a row's share of the loads counts; the bytes of the U * nquant block vectors a step holds (one a row
   * and weight) stay within 192
   * (48 registers each time: q4_0's 10-byte vectors 16 a step, q4_k's 24-byte ones 8, q5_k's 32-byte ones 4) */
  const int cuda_quant = quant && L->target == TARGET_CUDA;
  const int R = cuda_quant && L->nrows > 1 ? L->nrows : 1;
  if (R > 1) nloads = (nloads + R - 1) / R;
  for (int u = most; u > 1; u /= 2)
    if (per_thread % u == 0 && u * (nloads > 0 ? nloads : 1) <= bound && (!cuda_quant || u * nquant * qbytes <= 192))
      return u;
  return 1;
}

static Expr *subst_var(ExprPool *P, Expr *e, int var, Expr *to) {
  Expr *map[L_MAX_VARS] = {0};
  map[var] = to;
  return ex_subst_vars(P, e, L_MAX_VARS, map);
}

/* ---- quantized weights read block by block ---- */

/* A serial loop over rv whose body reads quantized weights at column `aligned + rv` (aligned a multiple of
 * the block) runs as blocks rb, groups g of a block and elements e of a group (rv = rb * B + g * G + e,
 * dtype_quant_group), each such load indexed as [rows..., block of the row, group, element]: the block's
 * scale and minimum do not change across the inner loops and the bytes read are affine in e, so the C
 * compiler loads and converts them once per block and vectorizes the element loop. */
typedef struct QuantSplit {
  Lower *L;
  int rv, rb, gv, ev, B, G, ok, found;
} QuantSplit;

static int quant_split_load(QuantSplit *q, const Expr *e) {
  if (e->op != X_LOAD || e->aux != MEM_GLOBAL || !dtype_is_quant(e->dtype) || !(e->varmask >> q->rv & 1)) return 0;
  const Shape *sh = &q->L->lp->bufs[e->ival].shape;
  int last = e->n - 1;
  int64_t c;
  if (e->n != sh->rank || dtype_block_elems(e->dtype) != q->B || dtype_quant_group(e->dtype) != q->G) return -1;
  for (int i = 0; i < e->n; i++)
    if ((e->a[i]->flags & EXF_LOAD) || !affine_coeff(e->a[i], q->rv, &c) || c != (i == last ? 1 : 0)) return -1;
  if (!multiple_of(subst_var(q->L->pool, e->a[last], q->rv, ex_int(q->L->pool, 0)), q->B, -1)) return -1;
  return 1;
}

static void quant_scan_fn(void *ctx, const Expr *e) {
  QuantSplit *q = ctx;
  if (e->op != X_LOAD || !dtype_is_quant(e->dtype) || !(e->varmask >> q->rv & 1)) return;
  if (!q->B) q->B = dtype_block_elems(e->dtype), q->G = dtype_quant_group(e->dtype);
  int r = quant_split_load(q, e);
  if (r < 0) q->ok = 0;
  if (r > 0) q->found = 1;
}

static Expr *quant_split_fn(void *ctx, ExprPool *P, Expr *e) {
  QuantSplit *q = ctx;
  if (quant_split_load(q, e) <= 0) return e;
  Expr *idx[LT_MAX_RANK + 2];
  int last = e->n - 1;
  for (int i = 0; i < last; i++) idx[i] = e->a[i];
  Expr *aligned = subst_var(P, e->a[last], q->rv, ex_int(P, 0));
  idx[last] = ex_add(P, ex_bin(P, X_IDIV, aligned, ex_int(P, q->B)), ex_var(P, q->rb));
  idx[last + 1] = ex_var(P, q->gv);
  idx[last + 2] = ex_var(P, q->ev);
  return ex_load(P, (int)e->ival, e->dtype, e->n + 2, idx, MEM_GLOBAL);
}

/* The loop over rv of the group's bodies: split into blocks where quant_split_load holds for every
 * quantized load, else one plain loop. Returns the statement the accumulations go into. */
static KStmt *quant_block_loop(Lower *L, KStmt *seq, int rv, Expr *start, const Expr *ext, Expr *stride, Expr **body,
                               int ne) {
  QuantSplit q = {L, rv, -1, -1, -1, 0, 0, 1, 0};
  if (L->target == TARGET_CPU && ex_is_int_const(start, 0) && ex_is_int_const(stride, 1) && ext->op == X_CONST)
    for (int e = 0; e < ne; e++) ex_visit(body[e], quant_scan_fn, &q);
  if (!q.found || !q.ok || ext->ival % q.B) return kl_st_for(L, seq, rv, start, (Expr *)ext, stride);
  q.rb = kl_new_var(L, "rb");
  q.gv = kl_new_var(L, "g");
  q.ev = kl_new_var(L, "e");
  ExprPool *P = L->pool;
  Expr *at =
      ex_add(P, ex_add(P, ex_mul(P, ex_var(P, q.rb), ex_int(P, q.B)), ex_mul(P, ex_var(P, q.gv), ex_int(P, q.G))),
             ex_var(P, q.ev));
  for (int e = 0; e < ne; e++) body[e] = subst_var(P, ex_rewrite(P, body[e], quant_split_fn, &q), rv, at);
  KStmt *blocks = kl_st_for(L, seq, q.rb, ex_int(P, 0), ex_int(P, ext->ival / q.B), ex_int(P, 1));
  KStmt *groups = kl_st_for(L, blocks, q.gv, ex_int(P, 0), ex_int(P, q.B / q.G), ex_int(P, 1));
  return kl_st_for(L, groups, q.ev, ex_int(P, 0), ex_int(P, q.G), ex_int(P, 1));
}

/* ---- integer dot products over quantized weights (CPU) ---- */

/* The block formats render_quant.c has an integer dot product for. */
static int qdot_format(DType t) {
  return t == DT_Q8_0 || t == DT_Q4_0 || t == DT_Q4_1 || t == DT_Q5_0 || t == DT_Q5_1 || t == DT_Q4_K || t == DT_Q5_K ||
         t == DT_Q6_K;
}

/* The weights a CPU row dot product reads: the block formats, and f16 rows (render_hdot.c: converted by the hardware,
 * f32 FMAs with an f32 activation row) unless LATHE_CPU_HALF_DOT=0. */
static int cpu_dot_format(DType t) {
  return (qdot_format(t) && setting_bool(SET_CPU_INT_DOT, 1)) || (t == DT_F16 && setting_bool(SET_CPU_HALF_DOT, 1));
}

/* A row cache's form for a weight of type t: an f32 row (f16 weights) or int16 blocks (anything but f32 and f16) */
static DType qrow_dtype(DType t) { return t == DT_F16 ? DT_F16 : DT_I32; }

/* e is a global load whose every index is free of rv except the last, which is `aligned + rv`: *at0 is the load
 * at rv = 0. */
static int row_load(Lower *L, const Expr *e, int rv, Expr **at0) {
  if (e->op != X_LOAD || e->aux != MEM_GLOBAL || e->n != L->lp->bufs[e->ival].shape.rank) return 0;
  int64_t c;
  for (int i = 0; i < e->n; i++)
    if (!affine_coeff(e->a[i], rv, &c) || c != (i == e->n - 1 ? 1 : 0)) return 0;
  *at0 = subst_var(L->pool, (Expr *)e, rv, ex_int(L->pool, 0));
  return 1;
}

static void find_quant_load(void *ctx, const Expr *e) {
  if (e->op == X_LOAD && dtype_is_quant(e->dtype)) *(int *)ctx = 1;
}

/* body = x * w (either order): w a quantized load (perhaps cast to f32: a decoded element is f32), or with half an
 * f16 load cast to f32, x an f32 expression that reads no quantized buffer (an activation, or a norm's output
 * computed on the fly). */
static int quant_product(const Expr *body, int half, Expr **w, Expr **x) {
  if (body->op != X_MUL) return 0;
  for (int i = 0; i < 2; i++) {
    Expr *q = body->a[1 - i];
    int cast = q->op == X_CAST && q->dtype == DT_F32;
    if (cast) q = q->a[0];
    int quant_in_x = 0;
    ex_visit(body->a[i], find_quant_load, &quant_in_x);
    if (q->op == X_LOAD && (dtype_is_quant(q->dtype) || (half && cast && q->dtype == DT_F16)) &&
        body->a[i]->dtype == DT_F32 && !quant_in_x) {
      *w = q;
      *x = body->a[i];
      return 1;
    }
  }
  return 0;
}

/* body = x * w (quant_product): w a quantized (or f16) weight row of ext elements from a block's start, x a function
 * of rv. *w0: w at rv = 0. */
static int qdot_weight(const Lower *L, const Expr *body, int rv, int64_t ext, Expr **w0, Expr **x) {
  Expr *w;
  if (!quant_product(body, 1, &w, x) || !((*x)->varmask >> rv & 1)) return 0;
  if (!cpu_dot_format(w->dtype) || ext % dtype_block_elems(w->dtype)) return 0;
  return row_load((Lower *)L, w, rv, w0) && multiple_of((*w0)->a[(*w0)->n - 1], dtype_block_elems(w->dtype), -1);
}

/* qdot_weight, x reading no accumulator of the loop (it is computed before the loop, into the row cache) */
static int qdot_operands(Lower *L, const Expr *body, int rv, int64_t ext, Expr **w0, Expr **x) {
  return qdot_weight(L, body, rv, ext, w0, x) && !((*x)->flags & EXF_ACC);
}

/* A serial sum over rv < ext of f32 activations times quantized weights, for every phase of the group, in a
 * kernel without register blocking: the activation row goes into a row cache (KS_QROW, once per row and thread)
 * and each accumulation becomes one KS_QDOT (integer dot products of the blocks with the activations quantized to
 * int16 per 32 elements), unless LATHE_CPU_INT_DOT=0. f16 weights the same way (unless LATHE_CPU_HALF_DOT=0): the
 * row cache keeps the activations in f32, the KS_QDOT is an f32 dot product (render_hdot.c lt_hdot). Returns
 * whether it did. */
#define QDOT_MAX_ROW 16384 /* elements: the row is computed in a stack array of floats */
static int quant_dots(Lower *L, KStmt *seq, int rv, Expr *start, const Expr *ext, Expr *stride, Expr **body, int ne,
                      const LPhase *ph, int n, const int *acc_id) {
  if (L->target != TARGET_CPU || L->nrows > 1 || !ex_is_int_const(start, 0) || !ex_is_int_const(stride, 1) ||
      ext->op != X_CONST || ext->ival <= 0 || ext->ival % 32 || ext->ival > QDOT_MAX_ROW)
    return 0;
  Expr *w0[8 * L_MAX_PHASES], *x[8 * L_MAX_PHASES];
  for (int e = 0; e < ne; e++)
    if (ph[e % n].op != RED_ADD || ph[e % n].acc_dtype != DT_F32 ||
        !qdot_operands(L, body[e], rv, ext->ival, &w0[e], &x[e]))
      return 0;
  int slot[8 * L_MAX_PHASES];
  for (int e = 0; e < ne; e++) {
    const DType form = qrow_dtype(w0[e]->dtype);
    int same = 0; /* hash-consed: an equal row is the same Expr; it must also be kept in the same form */
    while (same < e && (x[same] != x[e] || qrow_dtype(w0[same]->dtype) != form)) same++;
    if (same < e) {
      slot[e] = slot[same];
      continue;
    }
    KStmt *r = kl_st_new(L, KS_QROW);
    r->slot = slot[e] = L->nqrows++;
    r->dtype = form;
    r->value = x[e];
    r->var = rv;
    r->count = (int)(form == DT_F16 ? ext->ival : ext->ival / 32);
    kl_st_add(L, seq, r);
  }
  for (int e = 0; e < ne; e++) {
    KStmt *s = kl_st_new(L, KS_QDOT);
    s->tmp = acc_id[e];
    s->buf = (int)w0[e]->ival;
    s->dtype = w0[e]->dtype;
    s->value = w0[e];
    s->slot = slot[e];
    s->count = (int)(ext->ival / dtype_block_elems(s->dtype)); /* f16: elements */
    kl_st_add(L, seq, s);
  }
  return 1;
}

/* ---- a tile of 8 activation rows against each quantized weight row (CPU, register-blocked) ---- */

/* The distinct variables (but rv) and temporaries that expressions read: a row cache's key */
typedef struct TileKeys {
  int var[K_QROW_KEYS + 1], tmp[K_QROW_KEYS + 1];
  int nvar, ntmp, skip;
} TileKeys;

static void tile_key_fn(void *ctx, const Expr *e) {
  TileKeys *k = ctx;
  int *v = e->op == X_VAR ? k->var : e->op == X_TMP ? k->tmp : NULL, *n = e->op == X_VAR ? &k->nvar : &k->ntmp;
  if (!v || (e->op == X_VAR && e->ival == k->skip) || k->nvar + k->ntmp > K_QROW_KEYS) return;
  for (int i = 0; i < *n; i++)
    if (v[i] == (int)e->ival) return;
  v[(*n)++] = (int)e->ival;
}

/* Phase i's 8 rows x[t * n + i] make a key the row cache holds. */
static int tile_keys_fit(Expr *const *x, int n, int i, int rv) {
  TileKeys k = {.skip = rv};
  for (int t = 0; t < 8; t++) ex_visit(x[t * n + i], tile_key_fn, &k);
  return k.nvar + k.ntmp <= K_QROW_KEYS;
}

/* The CPU sums of a register-blocked point (8 rows) whose terms are activations times a quantized weight row,
 * for every phase of a group, become integer dot products of the weight row with a tile of the 8 activation rows
 * quantized to int16 (KS_QROW with rows = 8, once per thread and block of rows: kl_quant_tiled puts the block of
 * rows slowest among the points, so a thread's consecutive points share it) and one KS_QDOT tile form per phase,
 * unless LATHE_CPU_INT_DOT=0 or LATHE_CPU_INT_TILE=0. The weight must not depend on the row (a projection), the
 * phases' sums be f32 additions over a constant extent of whole blocks. f16 weights the same way (unless
 * LATHE_CPU_HALF_DOT=0): the tile keeps the 8 rows in f32 (render_hdot.c lt_hdott; at most HDOT_MAX_TILE elements
 * a row, its stack fallback being 32 bytes an element). Returns whether it did. */
#define HDOT_MAX_TILE 8192
static int quant_tiles(Lower *L, KStmt *seq, int rv, Expr *start, const Expr *ext, Expr *stride, Expr **body, int n,
                       const LPhase *ph, const int *acc_id) {
  enum { T = 8 };
  if (L->target != TARGET_CPU || L->nrows != T || !ex_is_int_const(start, 0) || !ex_is_int_const(stride, 1) ||
      ext->op != X_CONST || ext->ival <= 0 || ext->ival % 32 || ext->ival > QDOT_MAX_ROW)
    return 0;
  Expr *w0[T * L_MAX_PHASES], *x[T * L_MAX_PHASES];
  for (int e = 0; e < T * n; e++)
    if (ph[e % n].op != RED_ADD || ph[e % n].acc_dtype != DT_F32 ||
        !qdot_operands(L, body[e], rv, ext->ival, &w0[e], &x[e]) || w0[e] != w0[e % n] ||
        (w0[e]->dtype == DT_F16 ? ext->ival > HDOT_MAX_TILE : !setting_bool(SET_CPU_INT_TILE, 1)))
      return 0;
  for (int i = 0; i < n; i++)
    if (!tile_keys_fit(x, n, i, rv)) return 0;
  int slot[L_MAX_PHASES];
  for (int i = 0; i < n; i++) {
    const DType form = qrow_dtype(w0[i]->dtype);
    int same = 0; /* an earlier phase over the same 8 rows (hash-consed: equal rows are the same Exprs), same form */
    for (; same < i; same++) {
      int t = 0;
      while (t < T && x[t * n + same] == x[t * n + i]) t++;
      if (t == T && qrow_dtype(w0[same]->dtype) == form) break;
    }
    if (same < i) {
      slot[i] = slot[same];
      continue;
    }
    KStmt *r = kl_st_new(L, KS_QROW);
    r->slot = slot[i] = L->nqrows++;
    r->dtype = form;
    r->rows = T;
    r->nidx = T;
    for (int t = 0; t < T; t++) r->idx[t] = x[t * n + i];
    r->var = rv;
    r->count = (int)(form == DT_F16 ? ext->ival : ext->ival / 32);
    kl_st_add(L, seq, r);
  }
  for (int i = 0; i < n; i++) {
    KStmt *s = kl_st_new(L, KS_QDOT);
    s->rows = T;
    for (int t = 0; t < T; t++) s->row_tmp[t] = acc_id[t * n + i];
    s->tmp = acc_id[i];
    s->buf = (int)w0[i]->ival;
    s->dtype = w0[i]->dtype;
    s->value = w0[i];
    s->slot = slot[i];
    s->count = (int)(ext->ival / dtype_block_elems(s->dtype));
    kl_st_add(L, seq, s);
  }
  return 1;
}

int kl_quant_tiled(const Lower *L) {
  const LKernel *k = L->k;
  if (L->target != TARGET_CPU || L->s.rows != 8) return 0;
  for (int i = 0; i < k->nphase; i++) {
    const LPhase *p = &k->phases[i];
    const Expr *ext = p->naxes == 1 ? p->axes[0].extent : NULL;
    Expr *w0, *x;
    if (ext && ext->op == X_CONST && ext->ival > 0 && ext->ival % 32 == 0 && ext->ival <= QDOT_MAX_ROW &&
        p->op == RED_ADD && p->acc_dtype == DT_F32 && qdot_weight(L, p->body, p->axes[0].var, ext->ival, &w0, &x) &&
        (w0->dtype == DT_F16 ? ext->ival <= HDOT_MAX_TILE : setting_bool(SET_CPU_INT_TILE, 1)))
      return 1;
  }
  return 0;
}

/* ---- quantized weight rows decoded once for a register-blocked point (CPU) ---- */

typedef struct RowTiles {
  Lower *L;
  KStmt *seq;
  int rv;
  int64_t ext;
  Expr *from[8], *to[8]; /* a weight row's load (at rv = 0) -> its decoded row's element rv */
  int n, ok;
} RowTiles;

static Expr *row_tile_fn(void *ctx, ExprPool *P, Expr *e) {
  RowTiles *t = ctx;
  Expr *w0;
  if (e->op != X_LOAD || !dtype_is_quant(e->dtype) || !t->ok) return e;
  if (!row_load(t->L, e, t->rv, &w0)) {
    t->ok = 0;
    return e;
  }
  for (int i = 0; i < t->n; i++)
    if (t->from[i] == w0) return t->to[i];
  if (t->n == 8) {
    t->ok = 0;
    return e;
  }
  /* the row decoded into a row cache, read as an array of the point */
  int sm = t->L->nsmem++;
  KStmt *r = kl_st_new(t->L, KS_QROW);
  r->slot = t->L->nqrows++;
  r->dtype = DT_F32;
  r->buf = sm;
  r->value = w0;
  r->var = t->rv;
  r->count = (int)t->ext;
  kl_st_add(t->L, t->seq, r);
  t->from[t->n] = w0;
  t->to[t->n++] = ex_load(P, sm, DT_F32, 1, (Expr *[]){ex_var(P, t->rv)}, MEM_SHARED);
  return t->to[t->n - 1];
}

/* A register-blocked point on the CPU whose sums read quantized weight rows: each row is decoded into an f32 row
 * cache (KS_QROW), and the rows' sums read it, so the sums' loop is the f32 weights' loop and an element is decoded
 * once per thread and weight row, not once per point: consecutive points of a thread take the row blocks of one
 * weight row. Returns whether it did. */
static int quant_row_tiles(Lower *L, KStmt *seq, int rv, Expr *start, const Expr *ext, Expr *stride, Expr **body,
                           int ne) {
  if (L->target != TARGET_CPU || L->nrows <= 1 || !ex_is_int_const(start, 0) || !ex_is_int_const(stride, 1) ||
      ext->op != X_CONST || ext->ival <= 0 || ext->ival > QDOT_MAX_ROW)
    return 0;
  int found = 0;
  for (int e = 0; e < ne; e++) ex_visit(body[e], find_quant_load, &found);
  if (!found) return 0;
  RowTiles t = {L, seq, rv, ext->ival, {0}, {0}, 0, 1};
  Expr *out[8 * L_MAX_PHASES];
  for (int e = 0; e < ne && t.ok; e++) out[e] = ex_rewrite(L->pool, body[e], row_tile_fn, &t);
  if (!t.ok) return 0; /* the row caches already emitted are dead code: harmless, and rare (odd loads) */
  for (int e = 0; e < ne; e++) body[e] = out[e];
  return 1;
}

/* ---- CUDA: a sum of quantized weights times activations, 8 elements a statement ---- */

typedef struct QDotTerm {
  Expr *w; /* the quantized weight's load (symbolic element k), NULL where the term is summed element by element */
  Expr *x; /* the activation it multiplies */
} QDotTerm;

typedef struct Finds {
  const Expr *x;
  int found;
} Finds;

static void finds_fn(void *ctx, const Expr *e) {
  Finds *f = ctx;
  if (e == f->x) f->found = 1;
}

static int contains(const Expr *e, const Expr *x) {
  Finds f = {x, 0};
  ex_visit(e, finds_fn, &f);
  return f.found;
}

/* Body b of a sum is w * x (quant_product) with w read as an 8-element vector: the block's integer values can meet
 * x before any scale (lt_qd8_FORMAT). */
static QDotTerm qdot_term(const VecLoads *vl, Expr *b) {
  QDotTerm t = {NULL, NULL};
  if (b->dtype == DT_F32 && quant_product(b, 0, &t.w, &t.x) && vectorizable(vl, t.w)) return t;
  return (QDotTerm){NULL, NULL};
}

/* Which of the n unrolled bodies bu become KS_VQDOT statements (LATHE_QUANT_DOT, CUDA, sums in f32): those of
 * qdot_term whose weight load no other body reads (a weight shared by several rows is decoded once instead). */
static void find_qdot_terms(const Lower *L, const VecLoads *vl, Expr **bu, int n, int ne, const LPhase *ph, int nph,
                            QDotTerm *t) {
  for (int i = 0; i < n; i++) t[i] = (QDotTerm){NULL, NULL};
  if (L->target != TARGET_CUDA || vl->V != 8 || !setting_bool(SET_QUANT_DOT, 1)) return;
  for (int i = 0; i < n; i++) {
    const LPhase *p = &ph[(i % ne) % nph];
    if (p->op == RED_ADD && p->acc_dtype == DT_F32) t[i] = qdot_term(vl, bu[i]);
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; t[i].w && j < n; j++)
      if (j != i && contains(bu[j], t[i].w)) t[i] = (QDotTerm){NULL, NULL};
}

/* tmp acc += lt_qd8(term's weights at element 0, its activations at elements 0..7 as consecutive temporaries) */
static void emit_qdot(Lower *L, VecLoads *vl, KStmt *loop, int acc, const QDotTerm *t, int label) {
  int first = -1; /* kl_decl_tmp numbers temporaries consecutively (and fails the kernel past K_MAX_TMPS) */
  for (int k = 0; k < 8; k++) {
    int id = -1;
    kl_decl_tmp(L, loop, DT_F32, arena_printf(L->arena, "qx%d_%d", label, k), at_element(vl, t->x, k), &id);
    if (k == 0) first = id;
  }
  KStmt *s = kl_st_new(L, KS_VQDOT);
  s->tmp = acc;
  s->xtmp = first;
  s->buf = (int)t->w->ival;
  s->dtype = t->w->dtype;
  s->count = 8;
  s->value = subst_var(L->pool, t->w, vl->kvar, ex_int(L->pool, 0));
  kl_st_add(L, loop, s);
}

/* Phases first .. first+n-1 for every row (L->nrows, or 1): one loop, one accumulator per phase and row;
 * entry e = row * n + phase. */
static void emit_group(Lower *L, KStmt *seq, int first, int n) {
  ExprPool *P = L->pool;
  const LPhase *ph = &L->k->phases[first];
  int V = phase_vec(L, ph), R = L->nrows > 1 ? L->nrows : 1, ne = R * n;
  Expr *acc[8 * L_MAX_PHASES], *body[8 * L_MAX_PHASES];
  int acc_id[8 * L_MAX_PHASES];
  for (int e = 0; e < ne; e++) {
    int i = e % n;
    acc_id[e] = -1;
    const char *name = arena_printf(L->arena, "acc%d", first + i);
    acc[e] = kl_decl_tmp(L, seq, ph[i].acc_dtype, name, kl_identity(L, ph[i].op, ph[i].acc_dtype), &acc_id[e]);
    if (acc_id[e] < 0) return;
  }
  Expr *start, *stride;
  kl_coop_start(L, &start, &stride);
  /* Without vectors the first phase's own axis variable is the loop variable. With them, element k of
   * unrolled vector u is at r + u*stride*V + k (u and k are placeholders, replaced by constants). */
  int rv = V > 1 ? kl_new_var(L, "r") : ph[0].axes[0].var;
  int kv = V > 1 ? kl_new_var(L, "k") : -1, uv = V > 1 ? kl_new_var(L, "u") : -1;
  Expr *at = ex_var(P, rv);
  if (V > 1) at = ex_add(P, ex_add(P, at, ex_var(P, uv)), ex_var(P, kv));
  for (int i = 0; i < n; i++) L->var_map[ph[i].axes[0].var] = ph[i].axes[0].var == rv ? NULL : at;
  /* Loads move before the loop only when it surely runs (an empty extent may mean an empty buffer). */
  const Expr *ext = ph[0].axes[0].extent;
  uint64_t loopmask = (1ull << rv) | (V > 1 ? (1ull << kv) | (1ull << uv) : 0);
  Hoist h = {L, seq, loopmask, ext->op == X_CONST && ext->ival > 0, {{0}}};
  for (int t = 0; t < R; t++) {
    kl_select_row(L, t);
    for (int i = 0; i < n; i++) body[t * n + i] = hoist(&h, kl_subst(L, ph[i].body), 0);
  }
  memo_free(&h.done[0]);
  memo_free(&h.done[1]);
  if (V == 1) {
    if (!quant_dots(L, seq, rv, start, ext, stride, body, ne, ph, n, acc_id) &&
        !quant_tiles(L, seq, rv, start, ext, stride, body, n, ph, acc_id)) {
      quant_row_tiles(L, seq, rv, start, ext, stride, body, ne);
      KStmt *loop = quant_block_loop(L, seq, rv, start, ph[0].axes[0].extent, stride, body, ne);
      for (int e = 0; e < ne; e++) kl_st_assign(L, loop, acc_id[e], kl_combine(L, ph[e % n].op, acc[e], body[e]));
    }
  } else {
    VecLoads probe = {.L = L, .kvar = kv, .rvar = rv, .V = V};
    for (int e = 0; e < ne; e++) find_vec_loads(&probe, subst_var(P, body[e], uv, ex_int(P, 0)), 0);
    memo_free(&probe.seen[0]);
    memo_free(&probe.seen[1]);
    int nquant = 0, qbytes = 0;
    for (int j = 0; j < probe.n; j++)
      if (dtype_is_quant(probe.load[j]->dtype)) {
        nquant++;
        if (quant_vector_bytes(probe.load[j]->dtype) > qbytes) qbytes = quant_vector_bytes(probe.load[j]->dtype);
      }
    int U = phase_unroll(L, ph, V, probe.n, nquant, qbytes);
    Expr *step = ex_mul(P, stride, ex_int(P, V)); /* between unrolled vectors */
    KStmt *loop =
        kl_st_for(L, seq, rv, ex_mul(P, start, ex_int(P, V)), ph[0].axes[0].extent, ex_mul(P, step, ex_int(P, U)));
    Expr **bu = xmalloc(sizeof(Expr *) * (size_t)(U * ne), "the unrolled expressions");
    QDotTerm *qt = xmalloc(sizeof(QDotTerm) * (size_t)(U * ne), "the unrolled dot products");
    VecLoads vl = {.L = L, .kvar = kv, .rvar = rv, .V = V};
    for (int u = 0; u < U; u++)
      for (int e = 0; e < ne; e++) bu[u * ne + e] = subst_var(P, body[e], uv, ex_mul(P, step, ex_int(P, u)));
    find_qdot_terms(L, &vl, bu, U * ne, ne, ph, n, qt);
    for (int i = 0; i < U * ne; i++) find_vec_loads(&vl, qt[i].w ? qt[i].x : bu[i], 0);
    memo_free(&vl.seen[0]);
    memo_free(&vl.seen[1]);
    for (int j = 0; j < vl.n && !L->failed; j++) emit_vload(&vl, loop, j);
    for (int u = 0; u < U; u++) {
      for (int k = 0; k < V; k++)
        for (int e = 0; e < ne; e++)
          if (!qt[u * ne + e].w)
            kl_st_assign(L, loop, acc_id[e], kl_combine(L, ph[e % n].op, acc[e], at_element(&vl, bu[u * ne + e], k)));
      for (int e = 0; e < ne && !L->failed; e++)
        if (qt[u * ne + e].w) emit_qdot(L, &vl, loop, acc_id[e], &qt[u * ne + e], u * ne + e);
    }
    free(qt);
    free(bu);
  }
  for (int t = 0; t < R; t++) {
    kl_select_row(L, t);
    for (int i = 0; i < n; i++) {
      reduce_across_threads(L, seq, acc_id[t * n + i], acc[t * n + i], ph[i].op);
      L->acc_map[ph[i].id] = acc[t * n + i];
    }
    kl_save_row(L, t);
  }
}

void kl_emit_phases(Lower *L, KStmt *seq) {
  const LKernel *k = L->k;
  for (int i = 0; i < k->nphase && !L->failed;) {
    if (k->phases[i].naxes != 1) {
      for (int t = 0; t < (L->nrows > 1 ? L->nrows : 1); t++) {
        kl_select_row(L, t);
        emit_phase(L, seq, &k->phases[i], i);
        kl_save_row(L, t);
      }
      i++;
      continue;
    }
    int n = 1;
    while (i + n < k->nphase && joins_group(k, i, i + n)) n++;
    emit_group(L, seq, i, n);
    i += n;
  }
}
