/* Plan runtime: renders and compiles a KProgram once, then runs its kernels in order for given
 * symbol values, allocating every buffer of the program's table on the backend. */
#include "plan.h"
#include "../base/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strbuf.h"
#include "../code/code.h"

/* Kernel arguments: the buffer parameters, then (CUDA) the symbol table's device pointer. */
#define ARG_STRIDE (K_MAX_PARAMS + 1)

/* Everything one set of symbol values needs: device buffers and per-kernel arguments. */
typedef struct RunState {
  int nbufs;
  size_t *bytes;  /* by LBuf index */
  void **dev;     /* by LBuf index */
  int *index_of;  /* LBuf id -> index */
  int nids;
  void **args;    /* nkernels * ARG_STRIDE: buffers, then the symbol table when symbols are in memory */
  int *nargs;     /* per kernel: arguments passed */
  int64_t *syms;  /* nkernels * 16: by-value symbols (none when they are in memory) */
  int *nsyms;     /* per kernel: by-value symbols passed */
  const KKernel **use; /* per kernel: the kernel or its variant (KKernel.alt), chosen by the sizes */
  int any_variant;
  size_t *io_at;  /* per LBuf: offset in the per-run block, 0 = not in it (offset 0 holds the symbols) */
  size_t io_used; /* bytes of the block this run uploads */
  int64_t *grids; /* nkernels */
  int64_t graph_key; /* value of the plan's graph symbol in this run (-1 if none) */
} RunState;

#define IO_BYTES 4096 /* the per-run block: symbol table and small inputs */
#define IO_SMALL 256  /* inputs up to this size travel in it */

struct Plan {
  const KProgram *kp; /* borrowed: lives in the compilation's arena, which must outlive the plan */
  Backend *b;         /* borrowed */
  BackendModule *m;
  char *source;
  double *kernel_ms;   /* LATHE_PROFILE=1: device time per kernel, summed over runs (graphs off) */
  int runs;
  /* LATHE_PROFILE=steps: where the wall time of graph-replayed runs goes (graphs on) */
  int step_profile, step_runs, step_updates;
  double step_prep_ms, step_update_ms, step_launch_ms, step_wait_ms, step_gpu_ms, step_out_ms;
  void **bound;        /* per program input: persistent device buffer (weights, state) or NULL */
  void **ws;           /* per LBuf: buffers kept across runs for non-bound inputs and outputs */
  size_t *ws_bytes;
  /* Temporaries share one arena, placed by liveness: two temporaries overlap in memory only if no
   * kernel runs while both are live. Offsets are planned for each buffer's capacity and re-planned
   * only when a buffer outgrows it (capacities grow geometrically as `past` grows). */
  int *first_use, *last_use; /* per LBuf: kernel index range, -1 if unused */
  size_t *cap, *offset;      /* per LBuf */
  void *arena;
  size_t arena_bytes;
  /* Graph replay: runs whose `graph_sym` equals `graph_key` (decode steps: seq = 1) replay one
   * recorded graph; between replays only the nodes whose arguments or grid changed are updated. */
  const char *graph_sym;
  int64_t graph_key;
  BackendGraph *graph;
  void **g_args;
  int64_t *g_syms, *g_grids;
  int graph_failed;
  size_t *bound_bytes;
  /* Where generated kernels read symbols from memory (code_symbols_in_memory): the program's symbol
   * values on the device, uploaded before each run that changes them, so a replayed graph's
   * arguments stay the same from one decode step to the next. */
  void *sym_table;
  RunState rs; /* arrays reused by every run (state_init) */
  /* Small per-run data (the symbol table, then inputs of at most IO_SMALL bytes: a decode step's token
   * and position) share one device block and go up in one copy: each copy is a synchronising driver
   * call, a few microseconds of a decode step. */
  char *io_dev;
  unsigned char *io_host;
  size_t io_syms; /* bytes at the block's start for the symbol table */
};

static void print_profile(const Plan *p);
static void state_release(RunState *s);

Plan *plan_new(const KProgram *kp, Backend *b, Diag *d) {
  StrBuf sb = {0};
  if (!render_code(&sb, kp, d)) {
    sb_free(&sb);
    return NULL;
  }
  Plan *p = calloc(1, sizeof *p);
  char *source = strdup(sb_str(&sb));
  sb_free(&sb);
  if (!p || !source) {
    free(p);
    free(source);
    diag_error(d, 0, 0, "plan: out of memory");
    return NULL;
  }
  p->kp = kp;
  p->b = b;
  p->source = source;
  const char *prof = getenv("LATHE_PROFILE");
  if (prof && !strcmp(prof, "steps")) p->step_profile = 1;
  else if (prof && *prof && strcmp(prof, "0")) p->kernel_ms = calloc((size_t)(kp->nkernels ? kp->nkernels : 1), sizeof(double));
  p->m = b->ops->compile(b, source, d);
  if (!p->m) {
    plan_free(p);
    return NULL;
  }
  int nsym = kp->loop->nsymbols;
  if (code_symbols_in_memory(kp->target) && nsym > 0) p->io_syms = ((size_t)nsym * sizeof(int64_t) + 15) & ~(size_t)15;
  if (p->io_syms > IO_BYTES / 2) {
    diag_error(d, 0, 0, "plan: %d symbols do not fit the per-run block", nsym);
    plan_free(p);
    return NULL;
  }
  if (!(p->io_host = calloc(1, IO_BYTES)) || !(p->io_dev = b->ops->alloc(b, IO_BYTES, d))) {
    if (!p->io_host) diag_error(d, 0, 0, "plan: out of memory");
    plan_free(p);
    return NULL;
  }
  if (p->io_syms) p->sym_table = p->io_dev;
  return p;
}

void plan_free(Plan *p) {
  if (!p) return;
  if (p->kernel_ms && p->runs) print_profile(p);
  if (p->step_profile && p->step_runs) {
    double n = p->step_runs;
    fprintf(stderr,
            "lathe step profile: %d graph replays; per replay: host prep %.3f ms, %.1f node updates %.3f ms, launch "
            "%.3f ms, wait %.3f ms (graph on device %.3f ms), outputs %.3f ms\n",
            p->step_runs, p->step_prep_ms / n, p->step_updates / n, p->step_update_ms / n, p->step_launch_ms / n,
            p->step_wait_ms / n, p->step_gpu_ms / n, p->step_out_ms / n);
  }
  free(p->kernel_ms);
  if (p->m) p->b->ops->module_free(p->b, p->m);
  for (int i = 0; p->bound && i < p->kp->loop->ninputs; i++)
    if (p->bound[i]) p->b->ops->free(p->b, p->bound[i]);
  free(p->bound);
  free(p->bound_bytes);
  for (int i = 0; p->ws && i < p->kp->loop->nbufs; i++)
    if (p->ws[i]) p->b->ops->free(p->b, p->ws[i]);
  free(p->ws);
  free(p->ws_bytes);
  if (p->arena) p->b->ops->free(p->b, p->arena);
  if (p->io_dev) p->b->ops->free(p->b, p->io_dev);
  free(p->io_host);
  if (p->graph) p->b->ops->graph_free(p->b, p->graph);
  free(p->g_args);
  free(p->g_syms);
  free(p->g_grids);
  free(p->first_use);
  free(p->last_use);
  free(p->cap);
  free(p->offset);
  free(p->source);
  state_release(&p->rs);
  free(p);
}

const char *plan_source(const Plan *p) { return p ? p->source : ""; }

/* ---- evaluating sizes ---- */

typedef struct UnboundSearch {
  const SymEnv *env;
  const char *name; /* first symbol without a value */
} UnboundSearch;

static void find_unbound(void *ctx, const Expr *e) {
  UnboundSearch *s = ctx;
  int64_t v;
  if (!s->name && e->op == X_SYM && !symenv_get(s->env, e->name, &v)) s->name = e->name;
}

/* Evaluates an integer expression; on failure names the unbound symbol in the diag. */
static int eval_or_diag(const Expr *e, const SymEnv *env, const char *what, int64_t *out, Diag *d) {
  if (ex_eval_int(e, env, out)) return 1;
  UnboundSearch s = {env, NULL};
  ex_visit(e, find_unbound, &s);
  if (s.name)
    diag_error(d, 0, 0, "symbolic dimension '%s' has no value; pass --dim %s=N", s.name, s.name);
  else
    diag_error(d, 0, 0, "%s cannot be evaluated (division by zero or a non-integer expression)", what);
  return 0;
}


/* The run state's arrays are allocated once per plan and reused by every run (a decode step would
 * otherwise allocate and clear ~100 KB of argument tables). */
static void state_free(Plan *p, RunState *s) {
  (void)p;
  memset(s, 0, sizeof *s);
}

static void state_release(RunState *s) {
  free(s->io_at);
  free(s->use);
  free(s->nargs);
  free(s->nsyms);
  free(s->bytes);
  free(s->dev);
  free(s->index_of);
  free(s->args);
  free(s->syms);
  free(s->grids);
  memset(s, 0, sizeof *s);
}

static int buf_index(const RunState *s, int id, Diag *d) {
  if (id < 0 || id >= s->nids || s->index_of[id] < 0) {
    diag_error(d, 0, 0, "plan: reference to unknown buffer %d", id);
    return -1;
  }
  return s->index_of[id];
}

/* Kernel index range in which each buffer is read or written. */
static int compute_lifetimes(Plan *p) {
  const LProgram *lp = p->kp->loop;
  size_t nb = (size_t)(lp->nbufs ? lp->nbufs : 1);
  p->first_use = malloc(nb * sizeof(int));
  p->last_use = malloc(nb * sizeof(int));
  p->cap = calloc(nb, sizeof(size_t));
  p->offset = calloc(nb, sizeof(size_t));
  if (!p->first_use || !p->last_use || !p->cap || !p->offset) return 0;
  for (int i = 0; i < lp->nbufs; i++) p->first_use[i] = p->last_use[i] = -1;
  for (int k = 0; k < p->kp->nkernels; k++)
    for (int a = 0; a < p->kp->kernels[k].nparams; a++) {
      int b = p->kp->kernels[k].params[a].buf;
      if (b < 0 || b >= lp->nbufs) continue;
      if (p->first_use[b] < 0) p->first_use[b] = k;
      p->last_use[b] = k;
    }
  return 1;
}

static size_t align_up(size_t n) { return (n + 255) & ~(size_t)255; }

/* First-fit by decreasing size: each temporary goes at the lowest offset that does not overlap a
 * temporary already placed whose lifetime intersects its own. */
typedef struct Span {
  size_t lo, hi;
} Span;

static int by_lo(const void *x, const void *y) {
  const Span *a = x, *b = y;
  return (a->lo > b->lo) - (a->lo < b->lo);
}

static size_t plan_offsets(Plan *p) {
  const LProgram *lp = p->kp->loop;
  size_t nb = (size_t)(lp->nbufs ? lp->nbufs : 1);
  int n = 0, *order = malloc(sizeof(int) * nb);
  Span *busy = malloc(sizeof(Span) * nb);
  if (!order || !busy) abort();
  for (int i = 0; i < lp->nbufs; i++)
    if (lp->bufs[i].kind == BUF_TEMP && p->first_use[i] >= 0 && p->cap[i]) order[n++] = i;
  for (int i = 1; i < n; i++) /* insertion sort by capacity, descending (n is a few hundred) */
    for (int j = i; j > 0 && p->cap[order[j]] > p->cap[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  size_t total = 0;
  for (int i = 0; i < n; i++) {
    int b = order[i], nbusy = 0;
    /* the address ranges of placed temporaries alive at the same time, in address order */
    for (int j = 0; j < i; j++) {
      int o = order[j];
      if (p->last_use[o] < p->first_use[b] || p->last_use[b] < p->first_use[o]) continue;
      busy[nbusy++] = (Span){p->offset[o], p->offset[o] + p->cap[o]};
    }
    qsort(busy, (size_t)nbusy, sizeof *busy, by_lo);
    size_t off = 0;
    for (int j = 0; j < nbusy; j++) {
      if (off + p->cap[b] <= busy[j].lo) break; /* fits in the gap before this range */
      if (busy[j].hi > off) off = align_up(busy[j].hi);
    }
    p->offset[b] = off;
    if (off + p->cap[b] > total) total = off + p->cap[b];
  }
  free(order);
  free(busy);
  return total;
}

static int place_temporaries(Plan *p, RunState *s, Diag *d) {
  const LProgram *lp = p->kp->loop;
  if (!p->first_use && !compute_lifetimes(p)) {
    diag_error(d, 0, 0, "plan: out of memory");
    return 0;
  }
  int replan = 0;
  for (int i = 0; i < lp->nbufs; i++)
    if (!s->dev[i] && lp->bufs[i].kind == BUF_TEMP && p->first_use[i] >= 0 && s->bytes[i] > p->cap[i]) {
      p->cap[i] = align_up(s->bytes[i] > 2 * p->cap[i] ? s->bytes[i] : 2 * p->cap[i]);
      replan = 1;
    }
  if (replan) {
    size_t need = plan_offsets(p);
    if (need > p->arena_bytes) {
      if (p->arena) p->b->ops->free(p->b, p->arena);
      p->arena_bytes = 0;
      if (!(p->arena = p->b->ops->alloc(p->b, need, d))) return 0;
      p->arena_bytes = need;
    }
  }
  for (int i = 0; i < lp->nbufs; i++)
    if (!s->dev[i] && lp->bufs[i].kind == BUF_TEMP && p->first_use[i] >= 0 && p->cap[i]) {
      s->dev[i] = (char *)p->arena + p->offset[i]; /* empty temporaries get a buffer of their own below */
    }
  return 1;
}

static int state_init(Plan *p, const SymEnv *env, RunState *s, Diag *d) {
  const LProgram *lp = p->kp->loop;
  int nk = p->kp->nkernels;
  if (p->rs.dev) { /* reuse: only what runs do not overwrite is cleared */
    *s = p->rs;
    memset(s->dev, 0, (size_t)s->nbufs * sizeof *s->dev);
    memset(s->io_at, 0, (size_t)s->nbufs * sizeof *s->io_at);
    s->any_variant = 0;
    s->io_used = 0;
    goto sized;
  }
  memset(s, 0, sizeof *s);
  s->nbufs = lp->nbufs;
  for (int i = 0; i < lp->nbufs; i++)
    if (lp->bufs[i].id + 1 > s->nids) s->nids = lp->bufs[i].id + 1;
  size_t nb = (size_t)(s->nbufs > 0 ? s->nbufs : 1), ni = (size_t)(s->nids > 0 ? s->nids : 1);
  size_t nkk = (size_t)(nk > 0 ? nk : 1);
  s->bytes = calloc(nb, sizeof *s->bytes);
  s->dev = calloc(nb, sizeof *s->dev);
  s->index_of = malloc(ni * sizeof *s->index_of);
  s->args = calloc(nkk * ARG_STRIDE, sizeof *s->args);
  s->syms = calloc(nkk * 16, sizeof *s->syms);
  s->nargs = calloc(nkk, sizeof *s->nargs);
  s->nsyms = calloc(nkk, sizeof *s->nsyms);
  s->use = calloc(nkk, sizeof *s->use);
  s->io_at = calloc(nb, sizeof *s->io_at);
  s->grids = calloc(nkk, sizeof *s->grids);
  if (!s->bytes || !s->dev || !s->index_of || !s->args || !s->syms || !s->grids || !s->nargs || !s->nsyms || !s->use || !s->io_at) {
    diag_error(d, 0, 0, "plan: out of memory");
    state_release(s);
    return 0;
  }
  for (int i = 0; i < s->nids; i++) s->index_of[i] = -1;
  for (int i = 0; i < lp->nbufs; i++) {
    if (lp->bufs[i].id < 0) {
      diag_error(d, 0, 0, "plan: buffer '%s' has a negative id", lp->bufs[i].name);
      state_release(s);
      return 0;
    }
    s->index_of[lp->bufs[i].id] = i;
  }
  p->rs = *s;
sized:
  for (int i = 0; i < lp->nbufs; i++) {
    const LBuf *buf = &lp->bufs[i];
    int64_t numel = 1;
    for (int k = 0; k < buf->shape.rank; k++) {
      int64_t dim;
      if (!eval_or_diag(buf->shape.dim[k], env, "a dimension", &dim, d)) goto fail;
      if (dim < 0) {
        diag_error(d, 0, 0, "buffer '%s': dimension %d is %lld, which is negative", buf->name, k,
                   (long long)dim);
        goto fail;
      }
      numel *= dim;
    }
    s->bytes[i] = (size_t)numel * dtype_size(buf->dtype);
  }
  for (int i = 0; p->bound && i < lp->ninputs; i++) {
    int bi = lp->inputs[i];
    if (!p->bound[i]) continue;
    if (s->bytes[bi] != p->bound_bytes[i]) {
      diag_error(d, 0, 0, "input '%s' was bound with %zu bytes but needs %zu at these sizes", lp->bufs[bi].name,
                 p->bound_bytes[i], s->bytes[bi]);
      goto fail;
    }
    s->dev[bi] = p->bound[i];
  }
  s->graph_key = -1;
  if (p->graph_sym && !symenv_get(env, p->graph_sym, &s->graph_key)) s->graph_key = -1;
  if (!place_temporaries(p, s, d)) goto fail;
  /* Small non-bound inputs go in the per-run block, after the symbol table. */
  s->io_used = p->io_syms;
  for (int i = 0; i < lp->ninputs; i++) {
    int bi = lp->inputs[i];
    if (s->dev[bi] || !s->bytes[bi] || s->bytes[bi] > IO_SMALL) continue;
    size_t at = (s->io_used + 15) & ~(size_t)15;
    if (at == 0) at = 16; /* offset 0 means "not in the block" */
    if (at + s->bytes[bi] > IO_BYTES) break;
    s->io_at[bi] = at;
    s->dev[bi] = p->io_dev + at;
    s->io_used = at + s->bytes[bi];
  }
  /* Non-bound inputs and outputs keep their own buffers across runs, grown geometrically. */
  if (!p->ws) {
    size_t nbuf = (size_t)(lp->nbufs > 0 ? lp->nbufs : 1);
    p->ws = calloc(nbuf, sizeof *p->ws);
    p->ws_bytes = calloc(nbuf, sizeof *p->ws_bytes);
    if (!p->ws || !p->ws_bytes) {
      diag_error(d, 0, 0, "plan: out of memory");
      goto fail;
    }
  }
  for (int i = 0; i < lp->nbufs; i++) {
    if (s->dev[i]) continue;
    if (!p->ws[i] || p->ws_bytes[i] < s->bytes[i]) {
      size_t want = s->bytes[i] > 2 * p->ws_bytes[i] ? s->bytes[i] : 2 * p->ws_bytes[i];
      if (p->ws[i]) p->b->ops->free(p->b, p->ws[i]);
      p->ws_bytes[i] = 0;
      if (!(p->ws[i] = p->b->ops->alloc(p->b, want, d))) goto fail;
      p->ws_bytes[i] = want;
    }
    s->dev[i] = p->ws[i];
  }
  for (int k = 0; k < nk; k++) {
    const KKernel *kk = &p->kp->kernels[k];
    int64_t when = 0;
    if (kk->alt && kk->alt_when && !eval_or_diag(kk->alt_when, env, "a kernel variant's condition", &when, d)) goto fail;
    if (when) {
      kk = kk->alt;
      s->any_variant = 1;
    }
    s->use[k] = kk;
    if (kk->nparams > K_MAX_PARAMS || kk->nsyms > 16) {
      diag_error(d, 0, 0, "plan: kernel '%s' has too many parameters", kk->name);
      goto fail;
    }
    for (int a = 0; a < kk->nparams; a++) {
      int bi = buf_index(s, kk->params[a].buf, d);
      if (bi < 0) goto fail;
      s->args[(size_t)k * ARG_STRIDE + a] = s->dev[bi];
    }
    s->nargs[k] = kk->nparams;
    for (int j = 0; j < kk->nsyms; j++)
      if (!symenv_get(env, kk->syms[j], &s->syms[(size_t)k * 16 + j])) {
        diag_error(d, 0, 0, "symbolic dimension '%s' has no value; pass --dim %s=N", kk->syms[j], kk->syms[j]);
        goto fail;
      }
    s->nsyms[k] = kk->nsyms;
    if (p->sym_table && kk->nsyms) { /* the kernel reads its symbols from the table (code.h) */
      s->args[(size_t)k * ARG_STRIDE + s->nargs[k]++] = p->sym_table;
      s->nsyms[k] = 0;
    }
    s->grids[k] = 1;
    if (kk->grid && !eval_or_diag(kk->grid, env, "the launch grid", &s->grids[k], d)) goto fail;
  }
  return 1;
fail:
  state_free(p, s);
  return 0;
}

static int upload_inputs(Plan *p, RunState *s, const SymEnv *env, void *const *inputs, Diag *d) {
  const LProgram *lp = p->kp->loop;
  for (int i = 0; p->io_syms && i < lp->nsymbols; i++) {
    int64_t v = 0;
    if (!symenv_get(env, lp->symbols[i], &v)) v = 0; /* no kernel of this run reads it (state_init checked) */
    memcpy(p->io_host + (size_t)i * sizeof v, &v, sizeof v);
  }
  for (int i = 0; i < lp->ninputs; i++) {
    int bi = buf_index(s, lp->inputs[i], d);
    if (bi < 0) return 0;
    if (!s->bytes[bi] || (p->bound && p->bound[i])) continue;
    if (!inputs || !inputs[i]) {
      diag_error(d, 0, 0, "plan: no host data for input '%s'", lp->bufs[bi].name);
      return 0;
    }
    if (s->io_at[bi]) memcpy(p->io_host + s->io_at[bi], inputs[i], s->bytes[bi]);
    else if (!p->b->ops->upload(p->b, s->dev[bi], inputs[i], s->bytes[bi], d)) return 0;
  }
  return !s->io_used || p->b->ops->upload(p->b, p->io_dev, p->io_host, s->io_used, d);
}

static int graph_applicable(const Plan *p, const RunState *s) {
  if (!p->graph_sym || p->kernel_ms || p->graph_failed || !p->b->ops->graph_new || s->any_variant) return 0;
  if (s->graph_key != p->graph_key) return 0;
  for (int k = 0; k < p->kp->nkernels; k++)
    if (s->grids[k] <= 0) return 0; /* an empty launch cannot be a graph node */
  return 1;
}

static int graph_build(Plan *p, RunState *s, Diag *d) {
  const BackendOps *o = p->b->ops;
  int nk = p->kp->nkernels;
  size_t nkk = (size_t)(nk ? nk : 1);
  if (!(p->graph = o->graph_new(p->b, d))) return 0;
  p->g_args = malloc(nkk * ARG_STRIDE * sizeof(void *));
  p->g_syms = malloc(nkk * 16 * sizeof(int64_t));
  p->g_grids = malloc(nkk * sizeof(int64_t));
  if (!p->g_args || !p->g_syms || !p->g_grids) abort();
  for (int k = 0; k < nk; k++) {
    const KKernel *kk = s->use[k];
    if (!o->graph_add(p->b, p->graph, p->m, kk->code_name ? kk->code_name : kk->name,
                      &s->args[(size_t)k * ARG_STRIDE], s->nargs[k], &s->syms[(size_t)k * 16], s->nsyms[k],
                      s->grids[k], kk->block, d))
      return 0;
  }
  memcpy(p->g_args, s->args, nkk * ARG_STRIDE * sizeof(void *));
  memcpy(p->g_syms, s->syms, nkk * 16 * sizeof(int64_t));
  memcpy(p->g_grids, s->grids, nkk * sizeof(int64_t));
  return o->graph_instantiate(p->b, p->graph, d);
}

static int graph_run(Plan *p, RunState *s, Diag *d) {
  const BackendOps *o = p->b->ops;
  if (!p->graph && !graph_build(p, s, d)) return 0;
  double t0 = now_ms();
  int updates = 0;
  for (int k = 0; k < p->kp->nkernels; k++) {
    void **a = &s->args[(size_t)k * ARG_STRIDE];
    int64_t *y = &s->syms[(size_t)k * 16];
    if (s->grids[k] == p->g_grids[k] && !memcmp(a, &p->g_args[(size_t)k * ARG_STRIDE], sizeof(void *) * s->nargs[k]) &&
        !memcmp(y, &p->g_syms[(size_t)k * 16], sizeof(int64_t) * s->nsyms[k]))
      continue;
    if (!o->graph_update(p->b, p->graph, k, a, s->nargs[k], y, s->nsyms[k], s->grids[k], d)) return 0;
    memcpy(&p->g_args[(size_t)k * ARG_STRIDE], a, sizeof(void *) * s->nargs[k]);
    memcpy(&p->g_syms[(size_t)k * 16], y, sizeof(int64_t) * s->nsyms[k]);
    p->g_grids[k] = s->grids[k];
    updates++;
  }
  if (!p->step_profile) return o->graph_launch(p->b, p->graph, d) && o->sync(p->b, d);
  int timed = o->timer_mark && o->timer_ms;
  double t1 = now_ms();
  if ((timed && !o->timer_mark(p->b, 0, d)) || !o->graph_launch(p->b, p->graph, d) || (timed && !o->timer_mark(p->b, 1, d)))
    return 0;
  double t2 = now_ms();
  if (!o->sync(p->b, d)) return 0;
  double t3 = now_ms();
  p->step_runs++;
  p->step_updates += updates;
  p->step_update_ms += t1 - t0;
  p->step_launch_ms += t2 - t1;
  p->step_wait_ms += t3 - t2;
  if (timed) p->step_gpu_ms += o->timer_ms(p->b, 0, 1);
  return 1;
}

static int launch_all(Plan *p, RunState *s, Diag *d) {
  p->runs++;
  if (graph_applicable(p, s)) {
    Diag gd = {0};
    if (graph_run(p, s, &gd)) return 1;
    /* No replay after all (an old driver, a refused update): launch one by one from now on. */
    fprintf(stderr, "lathe: graph replay failed (%s); launching kernels one by one\n", gd.msg);
    p->graph_failed = 1;
    if (p->graph) p->b->ops->graph_free(p->b, p->graph);
    p->graph = NULL;
    if (!p->b->ops->sync(p->b, d)) return 0;
  }
  /* Profiling: device timestamps between kernels where the backend has them (launches stay
   * asynchronous), else a synchronisation after each kernel. */
  const BackendOps *o = p->b->ops;
  int timed = p->kernel_ms && o->timer_mark && o->timer_ms && p->kp->nkernels < BACKEND_TIMER_SLOTS;
  if (timed && !o->timer_mark(p->b, 0, d)) return 0;
  for (int k = 0; k < p->kp->nkernels; k++) {
    const KKernel *kk = s->use[k];
    double t0 = p->kernel_ms ? now_ms() : 0;
    if (!o->launch(p->b, p->m, kk->code_name ? kk->code_name : kk->name, &s->args[(size_t)k * ARG_STRIDE], s->nargs[k],
                   &s->syms[(size_t)k * 16], s->nsyms[k], s->grids[k], kk->block, d))
      return 0;
    if (timed && !o->timer_mark(p->b, k + 1, d)) return 0;
    if (p->kernel_ms && !timed) {
      if (!o->sync(p->b, d)) return 0;
      p->kernel_ms[k] += now_ms() - t0;
    }
  }
  if (!o->sync(p->b, d)) return 0;
  for (int k = 0; timed && k < p->kp->nkernels; k++) p->kernel_ms[k] += o->timer_ms(p->b, k, k + 1);
  return 1;
}

static const double *prof_ms;
static int by_time_desc(const void *a, const void *b) {
  double x = prof_ms[*(const int *)a], y = prof_ms[*(const int *)b];
  return (x < y) - (x > y);
}

/* LATHE_PROFILE=1: device time per kernel function (the same layer op in every layer shares one),
 * printed when the plan is freed. */
static void print_profile(const Plan *p) {
  int n = p->kp->nkernels, nf = 0;
  size_t cap = (size_t)(n ? n : 1);
  int *order = malloc(sizeof(int) * cap), *count = calloc(cap, sizeof(int));
  double *fn_ms = calloc(cap, sizeof(double)), total = 0;
  const char **fn = calloc(cap, sizeof(char *));
  if (!order || !count || !fn_ms || !fn) abort();
  for (int k = 0; k < n; k++) {
    const KKernel *kk = &p->kp->kernels[k];
    const char *name = kk->code_name ? kk->code_name : kk->name;
    int f = 0;
    while (f < nf && strcmp(fn[f], name)) f++;
    if (f == nf) fn[nf++] = name;
    fn_ms[f] += p->kernel_ms[k];
    count[f]++;
    total += p->kernel_ms[k];
  }
  for (int f = 0; f < nf; f++) order[f] = f;
  prof_ms = fn_ms;
  qsort(order, (size_t)nf, sizeof(int), by_time_desc);
  double runs = p->runs ? p->runs : 1;
  fprintf(stderr, "lathe profile: %d runs, %.3f ms per run in %d kernels (%d functions):\n", p->runs, total / runs, n, nf);
  for (int i = 0; i < nf; i++) {
    int f = order[i];
    fprintf(stderr, "  %8.3f ms/run %5.1f%%  %3d x %-24s %.4f ms each\n", fn_ms[f] / runs, total > 0 ? 100 * fn_ms[f] / total : 0,
            count[f], fn[f], fn_ms[f] / runs / count[f]);
  }
  free(order);
  free(count);
  free(fn_ms);
  free(fn);
}

int plan_run(Plan *p, const SymEnv *env, void *const *inputs, void *const *outputs, Diag *d) {
  RunState s;
  double t0 = now_ms();
  if (!state_init(p, env, &s, d)) return 0;
  const LProgram *lp = p->kp->loop;
  int ok = upload_inputs(p, &s, env, inputs, d);
  double t1 = now_ms();
  int replays = p->step_runs;
  ok = ok && launch_all(p, &s, d);
  double t2 = now_ms();
  for (int i = 0; ok && i < lp->noutputs; i++) {
    int bi = buf_index(&s, lp->outputs[i], d);
    if (bi < 0) {
      ok = 0;
    } else if (s.bytes[bi]) {
      if (!outputs) {
        diag_error(d, 0, 0, "plan: no host memory for output '%s'", lp->bufs[bi].name);
        ok = 0;
      } else if (outputs[i]) { /* NULL: the caller does not need this output copied back */
        ok = p->b->ops->download(p->b, outputs[i], s.dev[bi], s.bytes[bi], d);
      }
    }
  }
  state_free(p, &s);
  if (p->step_runs > replays) { /* this run was a graph replay */
    p->step_prep_ms += t1 - t0;
    p->step_out_ms += now_ms() - t2;
  }
  return ok;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}


int plan_bench(Plan *p, const SymEnv *env, void *const *inputs, int warmup, int iters, double *median_ms, Diag *d) {
  if (iters < 1 || warmup < 0) {
    diag_error(d, 0, 0, "bench: need at least one timed iteration (got warmup=%d iters=%d)", warmup, iters);
    return 0;
  }
  double *times = malloc(sizeof *times * (size_t)iters);
  if (!times) {
    diag_error(d, 0, 0, "bench: out of memory");
    return 0;
  }
  RunState s;
  if (!state_init(p, env, &s, d)) {
    free(times);
    return 0;
  }
  int ok = upload_inputs(p, &s, env, inputs, d);
  for (int i = 0; ok && i < warmup; i++) ok = launch_all(p, &s, d);
  for (int i = 0; ok && i < iters; i++) {
    double t0 = now_ms();
    ok = launch_all(p, &s, d);
    times[i] = now_ms() - t0;
  }
  if (ok) {
    qsort(times, (size_t)iters, sizeof *times, cmp_double);
    *median_ms = iters % 2 ? times[iters / 2] : 0.5 * (times[iters / 2 - 1] + times[iters / 2]);
  }
  state_free(p, &s);
  free(times);
  return ok;
}

int plan_bind_input(Plan *p, int input, const void *host, const SymEnv *env, Diag *d) {
  const LProgram *lp = p->kp->loop;
  if (input < 0 || input >= lp->ninputs) {
    diag_error(d, 0, 0, "plan: no input number %d", input);
    return 0;
  }
  if (!p->bound) {
    p->bound = calloc((size_t)lp->ninputs, sizeof *p->bound);
    p->bound_bytes = calloc((size_t)lp->ninputs, sizeof *p->bound_bytes);
    if (!p->bound || !p->bound_bytes) {
      diag_error(d, 0, 0, "plan: out of memory");
      return 0;
    }
  }
  const LBuf *buf = &lp->bufs[lp->inputs[input]];
  int64_t numel = 1;
  for (int k = 0; k < buf->shape.rank; k++) {
    int64_t dim;
    if (!eval_or_diag(buf->shape.dim[k], env, "a dimension", &dim, d)) return 0;
    numel *= dim;
  }
  size_t bytes = (size_t)numel * dtype_size(buf->dtype);
  if (p->bound[input] && p->bound_bytes[input] != bytes) {
    p->b->ops->free(p->b, p->bound[input]);
    p->bound[input] = NULL;
  }
  if (!p->bound[input] && !(p->bound[input] = p->b->ops->alloc(p->b, bytes, d))) return 0;
  p->bound_bytes[input] = bytes;
  if (!bytes) return 1;
  if (host) return p->b->ops->upload(p->b, p->bound[input], host, bytes, d);
  void *zeros = calloc(1, bytes);
  if (!zeros) {
    diag_error(d, 0, 0, "plan: out of memory");
    return 0;
  }
  int ok = p->b->ops->upload(p->b, p->bound[input], zeros, bytes, d);
  free(zeros);
  return ok;
}

int plan_input_index(const Plan *p, const char *name) {
  const LProgram *lp = p->kp->loop;
  for (int i = 0; i < lp->ninputs; i++)
    if (!strcmp(lp->bufs[lp->inputs[i]].name, name)) return i;
  return -1;
}

size_t plan_workspace_bytes(const Plan *p) {
  size_t n = p->arena_bytes;
  for (int i = 0; p->ws && i < p->kp->loop->nbufs; i++) n += p->ws_bytes[i];
  return n;
}

void plan_use_graphs(Plan *p, const char *sym, int64_t value) {
  p->graph_sym = sym;
  p->graph_key = value;
}
