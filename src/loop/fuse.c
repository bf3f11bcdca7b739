/* tensor -> loop: build one loop nest per realized tensor node by inlining everything else into it
 * (which nodes are realized is found by fuse_fixpoint.c).
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
 * A build that breaks a rule names the node to realize (want_realize) instead of a kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuse_internal.h"
#include "../base/mem.h"

FusionPolicy fusion_policy_default(void) {
  FusionPolicy p = {.fuse_reductions = 1, .allow_recompute = 0, .shared_max_inputs = 1};
  return p;
}

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
    if (b->pol->realize_reread) {
      request_realize(b, n->id);
      return NULL;
    }
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
  /* Nested phases were appended while expanding the body, so dependencies come first. When they fill
   * the kernel, this reduction is realized; if it is the kernel's own root (a chain of norms), the last
   * phase of its body is, which leaves room for the root's phase. */
  if (b->k->nphase >= L_MAX_PHASES) {
    request_realize(b, b->node_buf[n->id] >= 0 ? b->keys[b->k->nphase - 1].node : n->id);
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

static uint64_t memo_hash(int node, Expr *const *idx, int nidx) {
  uint64_t h = (uint64_t)node * 0x9e3779b97f4a7c15ULL;
  for (int d = 0; d < nidx; d++) h = (h ^ idx[d]->hash) * 0x100000001b3ULL;
  return h ^ (h >> 29);
}

static MemoEntry *memo_slot(Builder *b, int node, Expr *const *idx, int nidx) {
  for (unsigned i = (unsigned)memo_hash(node, idx, nidx) & (b->memo_cap - 1);; i = (i + 1) & (b->memo_cap - 1)) {
    MemoEntry *m = &b->memo[i];
    if (m->stamp != b->stamp) return m;
    if (m->node != node || m->nidx != nidx) continue;
    int same = 1;
    for (int d = 0; d < nidx && same; d++) same = m->idx[d] == idx[d];
    if (same) return m;
  }
}

static Expr *memo_find(Builder *b, int node, Expr *const *idx, int nidx) {
  if (!b->memo_cap) return NULL;
  MemoEntry *m = memo_slot(b, node, idx, nidx);
  return m->stamp == b->stamp ? m->value : NULL;
}

static void memo_add(Builder *b, int node, Expr *const *idx, int nidx, Expr *v) {
  if ((b->memo_used + 1) * 2 > b->memo_cap) {
    MemoEntry *old = b->memo;
    unsigned oldcap = b->memo_cap;
    b->memo_cap = oldcap ? oldcap * 2 : 256;
    b->memo = xcalloc(b->memo_cap, sizeof *b->memo, "the fusion memo");
    for (unsigned i = 0; i < oldcap; i++)
      if (old[i].stamp == b->stamp) *memo_slot(b, old[i].node, old[i].idx, old[i].nidx) = old[i];
    free(old);
  }
  MemoEntry *m = memo_slot(b, node, idx, nidx);
  m->stamp = b->stamp;
  m->node = node;
  m->nidx = nidx;
  for (int d = 0; d < nidx; d++) m->idx[d] = idx[d];
  m->value = v;
  b->memo_used++;
}

static void push_int(int **a, int *n, int *cap, int v) {
  if (*n == *cap) {
    *cap = *cap ? *cap * 2 : 64;
    *a = xrealloc(*a, sizeof **a * (size_t)*cap, "the fusion pass");
  }
  (*a)[(*n)++] = v;
}

/* The build reads whether `node` is realized: it is to be redone when that changes. */
static void note_reached(Builder *b, int node) {
  if (b->seen[node] == b->stamp) return;
  b->seen[node] = b->stamp;
  push_int(&b->reached, &b->nreached, &b->capreached, node);
}

/* The value of tensor node `node` at index idx (Exprs over the kernel's variables). NULL when the
 * build must be retried with another node realized (b->want_realize) or failed (b->fail). */
static Expr *expand_node(Builder *b, int node, Expr *const *idx, int nidx, int is_root) {
  const TNode *n = &b->t->nodes[node];
  note_reached(b, node);
  if (!is_root && b->node_buf[node] >= 0) return load_buf(b, b->node_buf[node], idx, nidx);
  switch (n->kind) {
  case T_INPUT: return load_buf(b, b->node_buf[node], idx, nidx);
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
  case T_UPDATE: /* always realized: reached only as a root, handled by fuse_build_kernel */
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
  case X_EXP:
  case X_LOG:
  case X_TANH:
  case X_SIGMOID:
  case X_ERF:
  case X_SIN:
  case X_COS:
  case X_POW: *(int *)ctx = 1; break;
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

/* Whether `node` reads `shared`, directly or through views. */
static int reads_through_views(const TProgram *t, int node, int shared) {
  for (int s = 0; s < t->nodes[node].nsrc; s++)
    for (int n = t->nodes[node].src[s];; n = t->nodes[n].src[0]) {
      if (n == shared) return 1;
      if (t->nodes[n].kind != T_VIEW) break;
    }
  return 0;
}

/* How many of `shared`'s consumers (as fuse_count_consumers counts them) the unrealized nodes under `top` are,
 * `top` included; a node is counted once however it is reached. */
static int consumers_under(Builder *b, int top, int shared, uint8_t *seen) {
  if (seen[top] || (top != shared && b->node_buf[top] >= 0)) return 0;
  seen[top] = 1;
  const TNode *n = &b->t->nodes[top];
  int count = n->kind != T_VIEW && reads_through_views(b->t, top, shared);
  if (top == shared) return count;
  for (int s = 0; s < n->nsrc; s++) count += consumers_under(b, n->src[s], shared, seen);
  return count;
}

/* A node of the walk out of a nested reduction may be realized in place of the shared node it was locked on when
 * every consumer of that node is inside it: the shared value is then read by one kernel only (two slices of one
 * projection read by one product). */
static int covers_locked(Builder *b, int node) {
  uint8_t *seen = xcalloc((size_t)b->t->n + 1, 1, "the fusion pass");
  int all = consumers_under(b, node, b->locked_node, seen) == b->consumers[b->locked_node];
  free(seen);
  return all;
}

static Expr *expand(Builder *b, int node, Expr *const *idx, int nidx) {
  if (b->fail || b->want_realize >= 0) return NULL;
  Expr *v = memo_find(b, node, idx, nidx);
  if (v) return v;
  if (b->depth >= FUSE_MAX_DEPTH && b->node_buf[node] < 0 && b->t->nodes[node].kind != T_INPUT) {
    note_reached(b, node);
    request_realize(b, node); /* a chain too long to inline in one piece: it continues in its own kernel */
    return NULL;
  }
  b->depth++;
  v = expand_node(b, node, idx, nidx, 0);
  b->depth--;
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
        b->node_buf[node] < 0 && (!b->override_locked || covers_locked(b, node))) {
      b->want_realize = node;
      b->override_locked = b->consumers[node] > 1; /* a shared value: realize it, not a private user of it */
      b->locked_node = node;
    }
    return NULL;
  }
  /* Transcendental math inside a reduction body is recomputed for every parallel point it does not
   * depend on (silu(gate) * up inside the down projection); which points those are is known only
   * once the kernel's parallel axes are, so remember it and decide in fuse_build_kernel. */
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
      push_int(&b->tracked, &b->ntracked, &b->captracked, node);
    }
  }
  memo_add(b, node, idx, nidx, v);
  return v;
}

static int is_const_one(const Expr *e) { return ex_is_int_const(e, 1); }

/* Rope reads q both directly and through a rotated view, which is one consumer, not two. */
int *fuse_count_consumers(const TProgram *t) {
  int *count = xcalloc((size_t)t->n + 1, sizeof(int), "the fusion pass"),
      *last = xmalloc(sizeof(int) * ((size_t)t->n + 1), "the fusion pass");
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

int fuse_build_kernel(Builder *b, LKernel *k, int root, int out_buf, DType out_dtype, int out_rank, int copy_from) {
  memset(k, 0, sizeof *k);
  b->k = k;
  b->stamp++;
  b->memo_used = 0;
  b->nreached = b->ntracked = 0;
  b->depth = 0;
  b->builds++;
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
  k->value = ex_cast(b->pool, out_dtype, v);
  k->out_buf = out_buf;
  if (is_update && n->nsrc == 3) { /* a scatter: the index tensor's value at x's leading axes */
    Expr *at = expand(b, n->src[2], idx, b->t->nodes[n->src[2]].shape.rank);
    if (!at) return 0;
    FnSubst s = {&at, 1, idx, rank};
    for (int d = 0; d < out_rank; d++) k->out_idx[d] = ex_rewrite(b->pool, n->idx[d], fn_subst_cb, &s);
    if (n->valid) k->out_valid = ex_rewrite(b->pool, n->valid, fn_subst_cb, &s);
  } else {
    for (int d = 0; d < out_rank; d++) k->out_idx[d] = is_update ? n->idx[d] : idx[d];
  }
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

void fuse_name_vars(LProgram *p, LKernel *k) {
  int ni = 0, nj = 0, nr = 0;
  for (int i = 0; i < k->npar; i++) k->var_names[k->par[i].var] = arena_printf(p->arena, "i%d", ni++);
  for (int i = 0; i < k->ninner; i++) k->var_names[k->inner[i].var] = arena_printf(p->arena, "j%d", nj++);
  for (int i = 0; i < k->nphase; i++)
    for (int a = 0; a < k->phases[i].naxes; a++)
      k->var_names[k->phases[i].axes[a].var] = arena_printf(p->arena, "r%d", nr++);
  for (int v = 0; v < k->nvars; v++)
    if (!k->var_names[v]) k->var_names[v] = arena_printf(p->arena, "v%d", v);
}

const char *fuse_kernel_base_name(const TNode *n) {
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
