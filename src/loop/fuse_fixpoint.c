/* tensor -> loop: which tensor nodes are realized (get a buffer), found as a fixpoint.
 *
 * The plain fixpoint: an attempt builds one kernel per realized node in topological order of the roots;
 * the first build that breaks a rule (fuse.c) names a node to realize, and the next attempt starts over
 * at the first kernel, since realizing a node can make other choices legal or necessary. Most kernels
 * come out the same in the next attempt, though, and this file computes exactly the plain fixpoint's
 * result without redoing them:
 *  - a kernel built earlier is reused when building it again would give the same result: no node it
 *    reached was realized since (expansion reads nothing else of the realized set), and none of the
 *    nodes it marked in expanded_by is marked by an earlier kernel of this attempt;
 *  - the next attempt resumes at the first kernel that can differ (the new node's own kernel, or the
 *    first kernel that reached it), since every kernel before that one is the same as in the last
 *    attempt, with the same marks.
 * That is about one build per distinct kernel, instead of one per kernel and attempt. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fuse_internal.h"
#include "../base/mem.h"

typedef struct Cached {
  int valid; /* k is what building root would give now (but see `tracked`) */
  LKernel *k;
  int *tracked, ntracked;
} Cached;

typedef struct IntList {
  int *v, n, cap;
} IntList;

typedef struct Fixpoint {
  Builder b;
  const TProgram *t;
  int nvbufs;
  DType *vdtype;  /* per virtual buffer */
  Cached *cache;  /* per tensor node, as a kernel root */
  IntList *users; /* per tensor node: roots whose cached kernel reached it (may hold stale entries) */
  int *job_root;  /* the realized nodes' kernels, in node order (topological) */
  int njobs;
  int no_reuse;
} Fixpoint;

static void list_push(IntList *l, int v) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 4;
    l->v = xrealloc(l->v, sizeof *l->v * (size_t)l->cap, "the fusion fixpoint");
  }
  l->v[l->n++] = v;
}

static int has_own_buffer(const TNode *n) { return n->kind == T_INPUT; }

/* Position of root in the sorted job list, or where it would be inserted. */
static int job_position(const Fixpoint *f, int root) {
  int lo = 0, hi = f->njobs;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (f->job_root[mid] < root) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* Gives node `node` its temporary and drops every cached kernel that inlined it. Returns the first job
 * position whose kernel may now differ (at most `failed`, the kernel that asked for it); *new_job: the
 * node's kernel is to be added to the job list. */
static int realize(Fixpoint *f, int node, int failed, int *new_job) {
  Builder *b = &f->b;
  const TNode *n = &f->t->nodes[node];
  b->realized[node] = 1;
  *new_job = 0;
  if (b->node_buf[node] >= 0 || has_own_buffer(n)) return failed;
  b->node_buf[node] = vbuf_temp(b, node);
  f->vdtype[b->node_buf[node]] = n->dtype;
  int first = failed;
  IntList *u = &f->users[node];
  for (int i = 0; i < u->n; i++) {
    int root = u->v[i], at = job_position(f, root);
    if (f->cache[root].valid && at < first) first = at;
    f->cache[root].valid = 0;
  }
  u->n = 0;
  *new_job = 1;
  int at = job_position(f, node);
  return at < first ? at : first;
}

static void add_job(Fixpoint *f, int node) {
  int at = job_position(f, node);
  memmove(f->job_root + at + 1, f->job_root + at, sizeof(int) * (size_t)(f->njobs - at));
  f->job_root[at] = node;
  f->njobs++;
}

/* Forgets the marks of the kernels at positions from..failed (the failed build's are in b->tracked),
 * so that the next attempt can resume at `from`. */
static void unmark(Fixpoint *f, int from, int failed) {
  Builder *b = &f->b;
  for (int j = from; j <= failed; j++) {
    const int *tr = j == failed ? b->tracked : f->cache[f->job_root[j]].tracked;
    int ntr = j == failed ? b->ntracked : f->cache[f->job_root[j]].ntracked;
    for (int i = 0; i < ntr; i++)
      if (b->expanded_by[tr[i]] >= from) b->expanded_by[tr[i]] = -1; /* marked by a kernel from `from` on */
  }
}

/* Whether root's cached kernel can stand as this attempt's kernel j; if so, marks its nodes as
 * fuse_build_kernel would have. */
static int reuse(Fixpoint *f, int root, int j) {
  Cached *c = &f->cache[root];
  if (!c->valid || f->no_reuse) return 0;
  for (int i = 0; i < c->ntracked; i++) {
    int e = f->b.expanded_by[c->tracked[i]];
    if (e >= 0 && e != j) return 0; /* a second kernel inlines it now: the build would realize it */
  }
  for (int i = 0; i < c->ntracked; i++) f->b.expanded_by[c->tracked[i]] = j;
  return 1;
}

static void remember(Fixpoint *f, int root) {
  Builder *b = &f->b;
  Cached *c = &f->cache[root];
  c->valid = 1;
  free(c->tracked);
  c->tracked = NULL;
  c->ntracked = b->ntracked;
  if (b->ntracked) {
    c->tracked = xmalloc(sizeof(int) * (size_t)b->ntracked, "the fusion fixpoint");
    memcpy(c->tracked, b->tracked, sizeof(int) * (size_t)b->ntracked);
  }
  for (int i = 0; i < b->nreached; i++) list_push(&f->users[b->reached[i]], root);
}

/* Runs attempts until every kernel builds. Returns the number of regular kernels, or -1 on error. */
static int run_fixpoint(Fixpoint *f, int *attempts) {
  Builder *b = &f->b;
  const TProgram *t = f->t;
  for (int i = 0; i < t->n; i++) b->expanded_by[i] = -1;
  f->njobs = 0;
  for (int i = 0; i < t->n; i++)
    if (b->node_buf[i] >= 0 && t->nodes[i].kind != T_INPUT) f->job_root[f->njobs++] = i;
  *attempts = 1;
  for (int j = 0; j < f->njobs;) {
    int root = f->job_root[j];
    if (reuse(f, root, j)) {
      j++;
      continue;
    }
    Cached *c = &f->cache[root];
    if (!c->k) c->k = xmalloc(sizeof *c->k, "the fusion fixpoint");
    b->want_realize = -1;
    b->nest_conflict = 0;
    b->override_locked = 0;
    b->cur_kernel = j;
    const TNode *n = &t->nodes[root];
    int out_buf = b->node_buf[root];
    /* an update stores into its destination's buffer, at the destination's rank */
    int rank = n->kind == T_UPDATE ? t->nodes[n->src[0]].shape.rank : n->shape.rank;
    int ok = fuse_build_kernel(b, c->k, root, out_buf, f->vdtype[out_buf], rank, -1);
    c->valid = 0;
    if (b->fail) return -1;
    if (!ok) {
      if (b->want_realize < 0 || b->realized[b->want_realize]) {
        diag_error(b->d, 0, 0, "internal: fusion made no progress at tensor node t%d", root);
        return -1;
      }
      int node = b->want_realize, new_job;
      int from = realize(f, node, j, &new_job);
      if (f->no_reuse) from = 0; /* the plain fixpoint: every attempt from the first kernel */
      unmark(f, from, j);
      if (new_job) add_job(f, node);
      j = from;
      ++*attempts;
      continue;
    }
    remember(f, root);
    j++;
  }
  return f->njobs;
}

typedef struct Renumber {
  const int *to; /* virtual buffer -> final id */
  ExprPool *pool;
} Renumber;

static Expr *renumber_load(void *ctx, ExprPool *p, Expr *e) {
  const Renumber *r = ctx;
  if (e->op != X_LOAD || e->aux != MEM_GLOBAL || r->to[e->ival] == e->ival) return e;
  return ex_load(p, r->to[e->ival], e->dtype, e->n, e->a, MEM_GLOBAL);
}

static void renumber_kernel(LKernel *k, const int *to, ExprPool *pool) {
  Renumber r = {to, pool};
  k->out_buf = to[k->out_buf];
  k->value = ex_rewrite(pool, k->value, renumber_load, &r);
  for (int i = 0; i < k->nphase; i++) k->phases[i].body = ex_rewrite(pool, k->phases[i].body, renumber_load, &r);
  for (int d = 0; d < LT_MAX_RANK; d++)
    if (k->out_idx[d]) k->out_idx[d] = ex_rewrite(pool, k->out_idx[d], renumber_load, &r);
  if (k->out_valid) k->out_valid = ex_rewrite(pool, k->out_valid, renumber_load, &r);
}

static void add_buf(LProgram *p, const char *name, DType t, const Shape *s, LBufKind kind) {
  LBuf *b = &p->bufs[p->nbufs];
  b->id = p->nbufs++;
  b->name = name;
  b->dtype = t;
  b->shape = *s;
  b->kind = kind;
}

/* The loop program of the stable realized set: buffers with their final ids (inputs, outputs, then
 * temporaries in node order), the cached kernels in order, then the output copies. */
static int assemble(Fixpoint *f, LProgram *lp, int nregular) {
  Builder *b = &f->b;
  const TProgram *t = f->t;
  lp->bufs = ARENA_ARRAY(lp->arena, LBuf, f->nvbufs);
  int *to = xmalloc(sizeof(int) * (size_t)f->nvbufs, "the fusion fixpoint");
  for (int i = 0; i < f->nvbufs; i++) to[i] = i;
  for (int i = 0; i < t->ninputs; i++) {
    const TNode *n = &t->nodes[t->inputs[i]];
    add_buf(lp, n->name, n->dtype, &n->shape, BUF_INPUT);
    lp->inputs[lp->ninputs++] = lp->nbufs - 1;
  }
  for (int i = 0; i < t->noutputs; i++) {
    const TNode *n = &t->nodes[t->outputs[i]];
    add_buf(lp, t->output_names[i], n->dtype, &n->shape, BUF_OUTPUT);
    lp->outputs[lp->noutputs++] = lp->nbufs - 1;
  }
  for (int i = 0; i < t->n; i++) {
    const TNode *n = &t->nodes[i];
    if (b->node_buf[i] != vbuf_temp(b, i)) continue;
    to[b->node_buf[i]] = lp->nbufs;
    add_buf(lp, n->name ? arena_printf(lp->arena, "%s_t%d", n->name, i) : arena_printf(lp->arena, "t%d", i), n->dtype,
            &n->shape, BUF_TEMP);
  }
  lp->kernels = ARENA_ARRAY(lp->arena, LKernel, nregular + t->noutputs + 1);
  for (int j = 0; j < nregular; j++) {
    int root = f->job_root[j];
    LKernel *k = &lp->kernels[lp->nkernels];
    *k = *f->cache[root].k;
    renumber_kernel(k, to, lp->pool);
    k->name = arena_printf(lp->arena, "%s_%d", fuse_kernel_base_name(&t->nodes[root]), lp->nkernels);
    fuse_name_vars(lp, k);
    lp->nkernels++;
  }
  /* Inputs returned as outputs and repeated outputs become copies of the node's buffer. */
  for (int i = 0; i < t->noutputs; i++) {
    int root = t->outputs[i], ob = lp->outputs[i];
    if (ob == b->node_buf[root]) continue;
    LKernel *k = &lp->kernels[lp->nkernels];
    const TNode *n = &t->nodes[root];
    if (!fuse_build_kernel(b, k, root, ob, n->dtype, n->shape.rank, b->node_buf[root])) {
      diag_error(b->d, 0, 0, "internal: output copy of t%d failed", root);
      free(to);
      return 0;
    }
    renumber_kernel(k, to, lp->pool);
    k->name = arena_printf(lp->arena, "copy_%d", lp->nkernels);
    fuse_name_vars(lp, k);
    lp->nkernels++;
  }
  free(to);
  return 1;
}

/* In-place updates are legal only when nothing else reads the old state. */
static int check_updates(const TProgram *t, Diag *d) {
  for (int i = 0; i < t->n; i++) {
    const TNode *n = &t->nodes[i];
    if (n->kind != T_UPDATE) continue;
    int readers = 0;
    for (int j = 0; j < t->n; j++)
      for (int s = 0; s < t->nodes[j].nsrc; s++) readers += t->nodes[j].src[s] == n->src[0];
    for (int j = 0; j < t->noutputs; j++) readers += t->outputs[j] == n->src[0];
    if (t->nodes[n->src[0]].kind != T_INPUT || readers > 1) {
      diag_error(d, n->line, n->col,
                 "cache_write: the cache '%s' is read or written elsewhere; read the result of cache_write "
                 "instead (it is updated in place)",
                 t->nodes[n->src[0]].name ? t->nodes[n->src[0]].name : "?");
      return 0;
    }
  }
  return 1;
}

/* Initial buffers: inputs, then outputs (the first output of a computed node is that node's buffer),
 * with every update writing into its destination's buffer. */
static void init_buffers(Fixpoint *f) {
  Builder *b = &f->b;
  const TProgram *t = f->t;
  for (int i = 0; i < t->n; i++) b->node_buf[i] = b->expanded_by[i] = -1;
  for (int i = 0; i < t->ninputs; i++) {
    const TNode *n = &t->nodes[t->inputs[i]];
    b->node_buf[n->id] = i;
    f->vdtype[i] = n->dtype;
  }
  for (int i = 0; i < t->n; i++)
    if (t->nodes[i].kind == T_UPDATE) {
      b->realized[i] = 1;
      b->node_buf[i] = b->node_buf[t->nodes[i].src[0]];
    }
  for (int i = 0; i < t->noutputs; i++) {
    const TNode *n = &t->nodes[t->outputs[i]];
    int ob = t->ninputs + i;
    f->vdtype[ob] = n->dtype;
    if (b->node_buf[n->id] < 0 && n->kind != T_INPUT) b->node_buf[n->id] = ob;
  }
}

LProgram *loop_from_tensor(const TProgram *t, const FusionPolicy *pol, Diag *d) {
  return loop_from_tensor_stats(t, pol, d, NULL);
}

LProgram *loop_from_tensor_stats(const TProgram *t, const FusionPolicy *pol, Diag *d, LoopStats *stats) {
  if (!check_updates(t, d)) return NULL;
  LProgram *lp = ARENA_NEW(t->arena, LProgram);
  lp->arena = t->arena;
  lp->pool = t->pool;
  lp->nsymbols = t->nsymbols;
  for (int i = 0; i < t->nsymbols; i++) lp->symbols[i] = t->symbols[i];
  Fixpoint f = {0};
  Builder *b = &f.b;
  f.t = t;
  f.no_reuse = stats && stats->no_reuse;
  b->t = t;
  b->pool = t->pool;
  b->pol = pol;
  b->d = d;
  b->temp_base = t->ninputs + t->noutputs;
  f.nvbufs = b->temp_base + t->n + 1;
  size_t n1 = (size_t)t->n + 1;
  b->realized = xcalloc(n1, 1, "the fusion fixpoint");
  b->node_buf = xcalloc(n1, sizeof(int), "the fusion fixpoint");
  b->expanded_by = xcalloc(n1, sizeof(int), "the fusion fixpoint");
  b->seen = xcalloc(n1, sizeof(unsigned), "the fusion fixpoint");
  b->consumers = fuse_count_consumers(t);
  f.vdtype = xcalloc((size_t)f.nvbufs, sizeof(DType), "the fusion fixpoint");
  f.cache = xcalloc(n1, sizeof *f.cache, "the fusion fixpoint");
  f.users = xcalloc(n1, sizeof *f.users, "the fusion fixpoint");
  f.job_root = xcalloc(n1, sizeof(int), "the fusion fixpoint");
  b->buf_dtype = f.vdtype;
  init_buffers(&f);
  int attempts, rc = run_fixpoint(&f, &attempts);
  int ok = rc >= 0 && assemble(&f, lp, rc);
  if (stats) {
    stats->attempts = attempts;
    stats->builds = b->builds;
  }
  for (int i = 0; i < t->n; i++) {
    free(f.cache[i].k);
    free(f.cache[i].tracked);
    free(f.users[i].v);
  }
  free(f.cache);
  free(f.users);
  free(f.job_root);
  free(f.vdtype);
  free(b->realized);
  free(b->node_buf);
  free(b->expanded_by);
  free(b->seen);
  free(b->consumers);
  free(b->memo);
  free(b->reached);
  free(b->tracked);
  return ok ? lp : NULL;
}
