/* tensor -> loop: decide which tensor nodes get a buffer ("realized") and build one loop nest per
 * realized node by inlining everything else into it.
 *
 * Inlining rules (legality first; `FusionPolicy` picks among the legal options):
 *  - map / view / gather nodes are substituted into their consumers (index math composes);
 *  - a reduce/contract node read at an index that depends only on the consumer's output axes becomes
 *    a *phase* of the consumer: computed once per parallel point, before the inner loops. Reading it at
 *    an index that depends on an enclosing reduction variable would nest reductions, so it is realized;
 *  - a phase that is recomputed for parallel points it does not depend on (norm -> linear prologue)
 *    is kept only when the policy allows recompute;
 *  - a node whose expansion carries a reduction and that two kernels inline is realized, so no
 *    reduction is computed by two kernels.
 * Realizing a node can make other choices legal or necessary, so kernels are rebuilt until the set of
 * realized nodes stops changing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "loop.h"
#include "../base/mem.h"

FusionPolicy fusion_policy_default(void) {
  FusionPolicy p = {.fuse_reductions = 1, .allow_recompute = 0, .shared_max_inputs = 1};
  return p;
}

#define MAX_COSTLY 64

typedef struct MemoEntry {
  int node;
  int nidx;
  Expr *idx[LT_MAX_RANK];
  Expr *value;
} MemoEntry;

typedef struct PhaseKey {
  int node;
  Expr *idx[LT_MAX_RANK];
} PhaseKey;

typedef struct Builder {
  const TProgram *t;
  ExprPool *pool;
  const FusionPolicy *pol;
  char *realized;     /* per tensor node */
  int *node_buf;      /* per tensor node: buffer holding its value, or -1 */
  const DType *buf_dtype;
  int *expanded_by;   /* per tensor node: the kernel that inlined its reduction-bearing value, or -1 */
  int cur_kernel;
  /* the kernel being built */
  LKernel *k;
  unsigned outer_mask; /* vars usable by a phase index at the current nesting (output vars) */
  int in_phase;        /* expanding a reduction body */
  struct {
    int node;
    uint64_t vars;
  } costly[MAX_COSTLY]; /* transcendental maps inlined into reduction bodies, with the vars they use */
  int ncostly;
  int shared_candidate; /* outermost multi-input node shared by two kernels, to get a buffer, or -1 */
  int shared_acc;       /* outermost such node that has several consumers in the graph, or -1 */
  int *consumers;       /* per tensor node: distinct computing consumers, looking through views
                           (program outputs count as one) */
  int override_locked;  /* the nest-conflict realization settled on a node with several consumers */
  int nest_conflict;    /* the pending realization is a reduction read inside another reduction's loop */
  PhaseKey keys[L_MAX_PHASES];
  MemoEntry *memo;
  int nmemo, capmemo;
  int want_realize;   /* node to realize before retrying, or -1 */
  int fail;           /* set with the diag on hard errors */
  Diag *d;
} Builder;

static Expr *expand(Builder *b, int node, Expr *const *idx, int nidx);

static void request_realize(Builder *b, int node) {
  if (b->want_realize < 0) b->want_realize = node;
}

typedef struct {
  Expr *const *args;
  int nargs;
  Expr *const *idx;
  int nidx;
} FnSubst;

/* Replaces a map fn's leaves in one pass: X_ARG(i) -> the i-th input's expansion, X_VAR(k) -> idx[k]. */
static Expr *fn_subst_cb(void *ctx, ExprPool *p, Expr *e) {
  (void)p;
  FnSubst *s = ctx;
  if (e->op == X_ARG && e->ival < s->nargs) return s->args[e->ival];
  if (e->op == X_VAR && e->ival < s->nidx) return s->idx[e->ival];
  return e;
}

static Expr *load_buf(Builder *b, int buf, Expr *const *idx, int nidx) {
  return ex_load(b->pool, buf, b->buf_dtype[buf], nidx, idx, MEM_GLOBAL);
}

static int new_var(Builder *b) {
  if (b->k->nvars >= L_MAX_VARS) return -1;
  return b->k->nvars++;
}

/* A reduce/contract node read at idx: find or create its phase. */
static Expr *expand_reduction(Builder *b, const TNode *n, Expr *const *idx) {
  int rank = n->shape.rank;
  uint64_t used = 0;
  for (int d = 0; d < rank; d++)
    if (!(n->axes & (1u << d))) used |= idx[d]->varmask;
  /* The phase runs outside every reduction loop: its index may only use output axes. Otherwise the
   * reductions would nest: the value that reads this one inside the enclosing reduction gets a buffer
   * (see expand), so its own kernel can fuse this reduction as a phase. */
  if (used & ~(uint64_t)b->outer_mask) {
    request_realize(b, n->id);
    b->nest_conflict = 1;
    return NULL;
  }
  for (int d = 0; d < rank; d++)
    if (!(n->axes & (1u << d)) && (idx[d]->flags & (EXF_ACC | EXF_LOAD))) { /* data-dependent index */
      request_realize(b, n->id);
      return NULL;
    }
  for (int i = 0; i < b->k->nphase; i++) {
    if (b->keys[i].node != n->id) continue;
    int same = 1;
    for (int d = 0; d < rank && same; d++) same = (n->axes & (1u << d)) || b->keys[i].idx[d] == idx[d];
    if (same) return ex_acc(b->pool, i, b->k->phases[i].acc_dtype);
  }
  if (b->k->nphase >= L_MAX_PHASES) {
    request_realize(b, n->id);
    return NULL;
  }
  const TNode *src = &b->t->nodes[n->src[0]];
  Expr *ridx[LT_MAX_RANK];
  LPhase ph = {0};
  for (int d = 0; d < rank; d++) {
    if (n->axes & (1u << d)) {
      int v = new_var(b);
      if (v < 0) {
        diag_error(b->d, 0, 0, "kernel needs more than %d loop variables", L_MAX_VARS);
        b->fail = 1;
        return NULL;
      }
      ph.axes[ph.naxes].var = v;
      ph.axes[ph.naxes++].extent = src->shape.dim[d];
      ridx[d] = ex_var(b->pool, v);
    } else {
      ridx[d] = idx[d];
    }
  }
  Expr *body;
  b->in_phase++;
  if (n->kind == T_CONTRACT) {
    Expr *x = expand(b, n->src[0], ridx, rank);
    Expr *y = x ? expand(b, n->src[1], ridx, rank) : NULL;
    body = y ? ex_mul(b->pool, x, y) : NULL;
  } else {
    body = expand(b, n->src[0], ridx, rank);
  }
  b->in_phase--;
  if (!body) return NULL;
  /* Nested phases were appended while expanding the body, so dependencies come first. */
  if (b->k->nphase >= L_MAX_PHASES) {
    request_realize(b, n->id);
    return NULL;
  }
  int id = b->k->nphase++;
  ph.id = id;
  ph.op = n->kind == T_CONTRACT ? RED_ADD : n->rop;
  ph.acc_dtype = dtype_compute(n->dtype);
  ph.body = ex_cast(b->pool, ph.acc_dtype, body);
  b->k->phases[id] = ph;
  b->keys[id].node = n->id;
  for (int d = 0; d < rank; d++) b->keys[id].idx[d] = (n->axes & (1u << d)) ? NULL : idx[d];
  return ex_acc(b->pool, id, ph.acc_dtype);
}

static Expr *memo_find(Builder *b, int node, Expr *const *idx, int nidx) {
  for (int i = 0; i < b->nmemo; i++) {
    MemoEntry *m = &b->memo[i];
    if (m->node != node || m->nidx != nidx) continue;
    int same = 1;
    for (int d = 0; d < nidx && same; d++) same = m->idx[d] == idx[d];
    if (same) return m->value;
  }
  return NULL;
}

static void memo_add(Builder *b, int node, Expr *const *idx, int nidx, Expr *v) {
  if (b->nmemo == b->capmemo) {
    b->capmemo = b->capmemo ? b->capmemo * 2 : 64;
    b->memo = xrealloc(b->memo, sizeof *b->memo * (size_t)b->capmemo, "the fusion memo");
  }
  MemoEntry *m = &b->memo[b->nmemo++];
  m->node = node;
  m->nidx = nidx;
  for (int d = 0; d < nidx; d++) m->idx[d] = idx[d];
  m->value = v;
}

/* The value of tensor node `node` at index idx (Exprs over the kernel's variables). NULL when the
 * build must be retried with another node realized (b->want_realize) or failed (b->fail). */
static Expr *expand_node(Builder *b, int node, Expr *const *idx, int nidx, int is_root) {
  const TNode *n = &b->t->nodes[node];
  if (!is_root && b->node_buf[node] >= 0) return load_buf(b, b->node_buf[node], idx, nidx);
  switch (n->kind) {
  case T_INPUT:
    return load_buf(b, b->node_buf[node], idx, nidx);
  case T_MAP: {
    Expr *args[T_MAX_SRC];
    for (int i = 0; i < n->nsrc; i++)
      if (!(args[i] = expand(b, n->src[i], idx, nidx))) return NULL;
    FnSubst s = {args, n->nsrc, idx, nidx};
    return ex_rewrite(b->pool, n->fn, fn_subst_cb, &s);
  }
  case T_VIEW: {
    const TNode *src = &b->t->nodes[n->src[0]];
    Expr *sidx[LT_MAX_RANK];
    for (int d = 0; d < src->shape.rank; d++) sidx[d] = ex_subst_vars(b->pool, n->idx[d], nidx, idx);
    Expr *v = expand(b, n->src[0], sidx, src->shape.rank);
    if (!v || !n->valid) return v;
    Expr *ok = ex_subst_vars(b->pool, n->valid, nidx, idx);
    /* Guard the index too, so an out-of-range position is never read. */
    return ex_select(b->pool, ok, v, ex_const(b->pool, v->dtype, 0));
  }
  case T_GATHER: {
    const TNode *ids = &b->t->nodes[n->src[1]];
    int k = ids->shape.rank;
    Expr *id = expand(b, n->src[1], idx, k);
    if (!id) return NULL;
    Expr *tidx[LT_MAX_RANK];
    tidx[0] = ex_cast(b->pool, DT_I64, id);
    for (int d = k; d < nidx; d++) tidx[d - k + 1] = idx[d];
    return expand(b, n->src[0], tidx, nidx - k + 1);
  }
  case T_UPDATE: /* always realized: reached only as a root, handled by build_kernel */
    diag_error(b->d, 0, 0, "internal: update node t%d inlined", node);
    b->fail = 1;
    return NULL;
  case T_REDUCE:
  case T_CONTRACT:
    if (!b->pol->fuse_reductions && !is_root) {
      request_realize(b, node);
      return NULL;
    }
    return expand_reduction(b, n, idx);
  }
  return NULL;
}

static void find_transcendental(void *ctx, const Expr *e) {
  switch (e->op) {
  case X_EXP: case X_LOG: case X_TANH: case X_SIGMOID: case X_ERF: case X_SIN: case X_COS: case X_POW:
    *(int *)ctx = 1;
    break;
  default: break;
  }
}

/* Variables an index expression distinguishes: a variable seen only inside `x // c` (c > 1) does not
 * count, since the points that differ in x % c share the value (an attention head `i // 64`). */
static uint64_t strong_vars(const Expr *e) {
  if (e->op == X_VAR) return e->varmask;
  if (e->op == X_IDIV && e->a[1]->op == X_CONST && e->a[1]->ival > 1) return 0;
  uint64_t m = 0;
  for (int i = 0; i < e->n; i++)
    if (e->a[i]->varmask) m |= strong_vars(e->a[i]);
  return m;
}

static void load_strong_vars(void *ctx, const Expr *e) {
  if (e->op != X_LOAD) return;
  for (int d = 0; d < e->n; d++) *(uint64_t *)ctx |= strong_vars(e->a[d]);
}

/* The variables a value's loads distinguish: the points it is not recomputed for. */
static uint64_t value_strong_vars(const Expr *e) {
  uint64_t m = 0;
  ex_visit(e, load_strong_vars, &m);
  return m;
}

static int has_transcendental(const Expr *e) {
  int found = 0;
  ex_visit(e, find_transcendental, &found);
  return found;
}

typedef struct BufSet {
  int n;
  int ids[8];
} BufSet;

static void count_buf(void *ctx, const Expr *e) {
  BufSet *s = ctx;
  if (e->op != X_LOAD || s->n >= 8) return;
  for (int i = 0; i < s->n; i++)
    if (s->ids[i] == e->ival) return;
  s->ids[s->n++] = (int)e->ival;
}

/* How many different buffers an expression reads (saturating at 8). */
static int distinct_buffers(const Expr *e) {
  BufSet s = {0};
  ex_visit(e, count_buf, &s);
  return s.n;
}

static Expr *expand(Builder *b, int node, Expr *const *idx, int nidx) {
  if (b->fail || b->want_realize >= 0) return NULL;
  Expr *v = memo_find(b, node, idx, nidx);
  if (v) return v;
  v = expand_node(b, node, idx, nidx, 0);
  if (!v) {
    /* Nested reductions: realize the outermost computed value inside the enclosing reduction's body
     * rather than the inner reduction, so the inner one still fuses (as a phase) into that value's
     * kernel. A view that only rearranges (as many elements as its source, no padding) may be stored
     * too: the inner kernel then writes straight into the layout its consumer reads contiguously (the
     * attention output in [batch, seq, heads*dim] order for the o-projection). Broadcasting views are
     * passed over: storing one would multiply its size. */
    const TNode *n = &b->t->nodes[node];
    int rearranging_view = n->kind == T_VIEW && !n->valid &&
                           shape_numel(b->pool, &n->shape) == shape_numel(b->pool, &b->t->nodes[n->src[0]].shape);
    if (b->nest_conflict && b->in_phase && (n->kind == T_MAP || n->kind == T_GATHER || rearranging_view) &&
        b->node_buf[node] < 0 && !b->override_locked) {
      b->want_realize = node;
      b->override_locked = b->consumers[node] > 1; /* a shared value: realize it, not a private user of it */
    }
    return NULL;
  }
  /* Transcendental math inside a reduction body is recomputed for every parallel point it does not
   * depend on (silu(gate) * up inside the down projection); which points those are is known only
   * once the kernel's parallel axes are, so remember it and decide in build_kernel. */
  if (b->in_phase && !b->pol->inline_costly_prologue && b->node_buf[node] < 0 && b->t->nodes[node].kind == T_MAP &&
      b->ncostly < MAX_COSTLY && has_transcendental(v)) {
    b->costly[b->ncostly].node = node;
    b->costly[b->ncostly++].vars = value_strong_vars(v);
  }
  /* A node whose value carries a reduction, or reads several buffers, and that a second kernel also
   * inlines gets its own buffer: the reduction is not computed twice, and a chain such as a residual
   * stream is not re-read from all its sources by every later kernel. The outermost node with several
   * consumers is realized (the sharing point), else the outermost candidate. */
  if (((v->flags & EXF_ACC) || ((v->flags & EXF_LOAD) && distinct_buffers(v) > b->pol->shared_max_inputs)) &&
      b->node_buf[node] < 0) {
    if (b->expanded_by[node] >= 0 && b->expanded_by[node] != b->cur_kernel) {
      /* prefer a node the graph itself shares (several consumers): that is where work is duplicated */
      int *slot = b->consumers[node] > 1 ? &b->shared_acc : &b->shared_candidate;
      if (node > *slot) *slot = node;
    } else {
      b->expanded_by[node] = b->cur_kernel;
    }
  }
  memo_add(b, node, idx, nidx, v);
  return v;
}

static int is_const_one(const Expr *e) { return ex_is_int_const(e, 1); }

/* For each node, how many different non-view nodes read it, directly or through views: rope reads q
 * both directly and through a rotated view, which is one consumer, not two. */
static int *count_consumers(const TProgram *t) {
  int *count = xcalloc((size_t)t->n + 1, sizeof(int), "the fusion pass"), *last = xmalloc(sizeof(int) * ((size_t)t->n + 1), "the fusion pass");
  for (int i = 0; i < t->n; i++) last[i] = -1;
  for (int c = 0; c < t->n; c++) {
    if (t->nodes[c].kind == T_VIEW) continue;
    for (int s = 0; s < t->nodes[c].nsrc; s++)
      for (int n = t->nodes[c].src[s];; n = t->nodes[n].src[0]) {
        if (last[n] != c) last[n] = c, count[n]++;
        if (t->nodes[n].kind != T_VIEW) break;
      }
  }
  for (int i = 0; i < t->noutputs; i++) count[t->outputs[i]]++;
  free(last);
  return count;
}

/* Builds the kernel computing `root` into buffer `out_buf`. Returns 1 on success, 0 if a node must
 * be realized first (b->want_realize) or on error (b->fail). */
static int build_kernel(Builder *b, LKernel *k, int root, int out_buf, const LBuf *out, int copy_from) {
  memset(k, 0, sizeof *k);
  b->k = k;
  b->nmemo = 0;
  memset(b->keys, 0, sizeof b->keys);
  const TNode *n = &b->t->nodes[root];
  /* An update's loop runs over the written value's shape and stores at the update's index map. */
  int is_update = n->kind == T_UPDATE && copy_from < 0;
  const Shape *dom = is_update ? &b->t->nodes[n->src[1]].shape : &n->shape;
  int rank = dom->rank;
  Expr *idx[LT_MAX_RANK];
  for (int d = 0; d < rank; d++) idx[d] = ex_var(b->pool, d);
  k->nvars = rank;
  b->outer_mask = rank >= 32 ? ~0u : (1u << rank) - 1;
  b->in_phase = 0;
  b->ncostly = 0;
  b->shared_candidate = -1;
  b->shared_acc = -1;
  Expr *v = copy_from >= 0 ? load_buf(b, copy_from, idx, rank)
            : is_update    ? expand(b, n->src[1], idx, rank)
                           : expand_node(b, root, idx, rank, 1);
  if (!v) return 0;
  k->value = ex_cast(b->pool, out->dtype, v);
  k->out_buf = out_buf;
  for (int d = 0; d < out->shape.rank; d++) k->out_idx[d] = is_update ? n->idx[d] : idx[d];
  /* Output axes some phase depends on are parallel; the rest are the inner (store) loop. */
  uint64_t par = 0;
  for (int i = 0; i < k->nphase; i++) {
    for (int d = 0; d < LT_MAX_RANK; d++)
      if (b->keys[i].idx[d]) par |= b->keys[i].idx[d]->varmask;
  }
  par &= b->outer_mask;
  if (k->nphase == 0) par = b->outer_mask; /* pure elementwise: everything is parallel */
  for (int d = 0; d < rank; d++) {
    LAxis ax = {d, dom->dim[d]};
    if ((par & (1ULL << d)) || is_const_one(ax.extent)) k->par[k->npar++] = ax; /* size 1: no loop */
    else k->inner[k->ninner++] = ax;
  }
  if (b->shared_acc >= 0 || b->shared_candidate >= 0) {
    request_realize(b, b->shared_acc >= 0 ? b->shared_acc : b->shared_candidate);
    return 0;
  }
  uint64_t wide_par = 0;
  for (int j = 0; j < k->npar; j++)
    if (!is_const_one(k->par[j].extent)) wide_par |= 1ULL << k->par[j].var;
  for (int i = b->ncostly - 1; i >= 0; i--)
    if ((b->costly[i].vars & wide_par) != wide_par) {
      request_realize(b, b->costly[i].node);
      return 0;
    }
  /* Recompute check: a phase independent of some parallel axis is evaluated again for each of its
   * points (e.g. an RMSNorm sum inside a linear). Allowed only by policy. */
  for (int i = 0; i < k->nphase; i++) {
    uint64_t dep = 0;
    for (int d = 0; d < LT_MAX_RANK; d++)
      if (b->keys[i].idx[d]) dep |= strong_vars(b->keys[i].idx[d]);
    for (int j = 0; j < k->npar; j++) {
      if (dep & (1ULL << k->par[j].var) || is_const_one(k->par[j].extent)) continue;
      k->phases[i].recompute = 1;
    }
    if (k->phases[i].recompute && !b->pol->allow_recompute && b->keys[i].node != root) {
      request_realize(b, b->keys[i].node);
      return 0;
    }
  }
  return 1;
}

static void name_vars(LProgram *p, LKernel *k) {
  int ni = 0, nj = 0, nr = 0;
  for (int i = 0; i < k->npar; i++) k->var_names[k->par[i].var] = arena_printf(p->arena, "i%d", ni++);
  for (int i = 0; i < k->ninner; i++) k->var_names[k->inner[i].var] = arena_printf(p->arena, "j%d", nj++);
  for (int i = 0; i < k->nphase; i++)
    for (int a = 0; a < k->phases[i].naxes; a++)
      k->var_names[k->phases[i].axes[a].var] = arena_printf(p->arena, "r%d", nr++);
  for (int v = 0; v < k->nvars; v++)
    if (!k->var_names[v]) k->var_names[v] = arena_printf(p->arena, "v%d", v);
}

static const char *kernel_base_name(const TNode *n) {
  if (n->origin) return n->origin;
  switch (n->kind) {
  case T_INPUT: return "copy";
  case T_MAP: return "map";
  case T_REDUCE: return "reduce";
  case T_CONTRACT: return "contract";
  case T_GATHER: return "gather";
  default: return "view";
  }
}

static int add_buf(LProgram *p, int *cap, const char *name, DType t, const Shape *s, LBufKind kind) {
  if (p->nbufs == *cap) {
    int nc = *cap * 2;
    LBuf *nb = ARENA_ARRAY(p->arena, LBuf, nc);
    memcpy(nb, p->bufs, sizeof(LBuf) * (size_t)p->nbufs);
    p->bufs = nb;
    *cap = nc;
  }
  LBuf *b = &p->bufs[p->nbufs];
  b->id = p->nbufs;
  b->name = name;
  b->dtype = t;
  b->shape = *s;
  b->kind = kind;
  return p->nbufs++;
}

typedef struct Job {
  int root;    /* tensor node computed */
  int out_buf; /* buffer written */
} Job;

/* One attempt with the current realized set. Returns 1 when every kernel was built, 0 when the
 * realized set grew (retry), -1 on error. */
static int attempt(Builder *b, LProgram *lp, DType **bufdt) {
  const TProgram *t = b->t;
  int bufcap = 16 + t->n;
  lp->bufs = ARENA_ARRAY(lp->arena, LBuf, bufcap);
  lp->nbufs = 0;
  lp->nkernels = 0;
  lp->ninputs = lp->noutputs = 0;
  for (int i = 0; i < t->n; i++) b->node_buf[i] = b->expanded_by[i] = -1;
  Job *jobs = xcalloc((size_t)(t->n + t->noutputs + 1), sizeof *jobs, "the fusion work list");
  int njobs = 0;
  for (int i = 0; i < t->ninputs; i++) {
    const TNode *n = &t->nodes[t->inputs[i]];
    b->node_buf[n->id] = add_buf(lp, &bufcap, n->name, n->dtype, &n->shape, BUF_INPUT);
    lp->inputs[lp->ninputs++] = b->node_buf[n->id];
  }
  /* An update writes into its destination's buffer (in place). */
  for (int i = 0; i < t->n; i++)
    if (t->nodes[i].kind == T_UPDATE) b->node_buf[i] = b->node_buf[t->nodes[i].src[0]];
  /* Outputs: the first output of a computed node is that node's buffer; inputs returned as outputs and
   * repeated outputs become copies. */
  for (int i = 0; i < t->noutputs; i++) {
    const TNode *n = &t->nodes[t->outputs[i]];
    int ob = add_buf(lp, &bufcap, t->output_names[i], n->dtype, &n->shape, BUF_OUTPUT);
    lp->outputs[lp->noutputs++] = ob;
    if (b->node_buf[n->id] < 0 && n->kind != T_INPUT) b->node_buf[n->id] = ob;
  }
  for (int i = 0; i < t->n; i++) {
    const TNode *n = &t->nodes[i];
    if (b->realized[i] && b->node_buf[i] < 0 && n->kind != T_INPUT)
      b->node_buf[i] = add_buf(lp, &bufcap, n->name ? arena_printf(lp->arena, "%s_t%d", n->name, i)
                                                    : arena_printf(lp->arena, "t%d", i),
                               n->dtype, &n->shape, BUF_TEMP);
  }
  /* Kernels in topological order of their roots; output copies after everything else. */
  for (int i = 0; i < t->n; i++)
    if (b->node_buf[i] >= 0 && t->nodes[i].kind != T_INPUT) jobs[njobs++] = (Job){i, b->node_buf[i]};
  for (int i = 0; i < t->noutputs; i++)
    if (lp->outputs[i] != b->node_buf[t->outputs[i]]) jobs[njobs++] = (Job){t->outputs[i], lp->outputs[i]};
  *bufdt = xrealloc(*bufdt, sizeof(DType) * (size_t)lp->nbufs, "the buffer types");
  for (int i = 0; i < lp->nbufs; i++) (*bufdt)[i] = lp->bufs[i].dtype;
  b->buf_dtype = *bufdt;
  lp->kernels = ARENA_ARRAY(lp->arena, LKernel, njobs ? njobs : 1);
  int rc = 1;
  for (int j = 0; j < njobs; j++) {
    LKernel *k = &lp->kernels[lp->nkernels];
    b->want_realize = -1;
    b->nest_conflict = 0;
    b->override_locked = 0;
    b->cur_kernel = j;
    int root = jobs[j].root;
    /* A copy job (an input returned as output, a repeated output) reads the node's buffer. */
    int copy_from = jobs[j].out_buf != b->node_buf[root] ? b->node_buf[root] : -1;
    int ok = build_kernel(b, k, root, jobs[j].out_buf, &lp->bufs[jobs[j].out_buf], copy_from);
    if (b->fail) {
      rc = -1;
      break;
    }
    if (!ok) {
      if (b->want_realize >= 0 && !b->realized[b->want_realize]) {
        b->realized[b->want_realize] = 1;
        rc = 0;
      } else {
        diag_error(b->d, 0, 0, "internal: fusion made no progress at tensor node t%d", root);
        rc = -1;
      }
      break;
    }
    k->name = arena_printf(lp->arena, "%s_%d", copy_from >= 0 ? "copy" : kernel_base_name(&t->nodes[root]),
                           lp->nkernels);
    name_vars(lp, k);
    lp->nkernels++;
  }
  free(jobs);
  return rc;
}

LProgram *loop_from_tensor(const TProgram *t, const FusionPolicy *pol, Diag *d) {
  LProgram *lp = ARENA_NEW(t->arena, LProgram);
  lp->arena = t->arena;
  lp->pool = t->pool;
  lp->nsymbols = t->nsymbols;
  for (int i = 0; i < t->nsymbols; i++) lp->symbols[i] = t->symbols[i];
  Builder b = {0};
  b.t = t;
  b.pool = t->pool;
  b.pol = pol;
  b.d = d;
  b.realized = xcalloc((size_t)t->n + 1, 1, "the fusion pass");
  b.node_buf = xcalloc((size_t)t->n + 1, sizeof(int), "the fusion pass");
  b.expanded_by = xcalloc((size_t)t->n + 1, sizeof(int), "the fusion pass");
  b.consumers = count_consumers(t);
  /* In-place updates are legal only when nothing else reads the old state. */
  for (int i = 0; i < t->n; i++) {
    const TNode *n = &t->nodes[i];
    if (n->kind != T_UPDATE) continue;
    b.realized[i] = 1;
    int readers = 0;
    for (int j = 0; j < t->n; j++)
      for (int s = 0; s < t->nodes[j].nsrc; s++) readers += t->nodes[j].src[s] == n->src[0];
    for (int j = 0; j < t->noutputs; j++) readers += t->outputs[j] == n->src[0];
    if (t->nodes[n->src[0]].kind != T_INPUT || readers > 1) {
      diag_error(d, 0, 0, "cache_write: the cache '%s' is read or written elsewhere; read the result of cache_write "
                 "instead (it is updated in place)", t->nodes[n->src[0]].name ? t->nodes[n->src[0]].name : "?");
      free(b.realized);
      free(b.node_buf);
      free(b.expanded_by);
      free(b.consumers);
      return NULL;
    }
  }
  DType *bufdt = NULL;
  int rc;
  while ((rc = attempt(&b, lp, &bufdt)) == 0) {
  }
  free(bufdt);
  free(b.realized);
  free(b.node_buf);
  free(b.expanded_by);
  free(b.consumers);
  free(b.memo);
  return rc == 1 ? lp : NULL;
}
