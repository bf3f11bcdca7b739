/* Plan runtime: launching a run's kernels, replaying a recorded graph for decode steps, and the
 * profiling reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/clock.h"
#include "../base/notice.h"
#include "../base/mem.h"
#include "plan_internal.h"

long plan_graph_replays(const Plan *p) { return p->graph_replays; }

/* Whether this run's symbol value may replay a graph (and so, where the backend cannot record a library
 * call, runs no library GEMM: plan.c). */
int plan_graph_wanted(const Plan *p, int64_t key) {
  if (!p->graph_sym || p->kernel_ms || p->graph_failed || !p->b->ops->graph_new) return 0;
  return p->graph_upto > 0 ? key >= 1 && key <= p->graph_upto : key == p->graph_key;
}

/* Whether slot k's library GEMM writes the kernel's output itself (LaunchGemmLib.direct_out), adding *add (NULL:
 * nothing) to it; not when the buffer it would add overlaps the output (then the epilogue runs). */
static int lib_direct(const RunState *s, int k, const void **add) {
  const LaunchGemmLib *lib = s->use[k]->lib;
  *add = NULL;
  if (lib->direct_out < 0) return 0;
  if (lib->direct_add < 0) return 1;
  const char *out = s->args[(size_t)k * ARG_STRIDE + lib->direct_out];
  const char *in = s->args[(size_t)k * ARG_STRIDE + lib->direct_add];
  size_t bytes = (size_t)s->lib_m[k] * (size_t)lib->w_rows[0] * sizeof(float);
  if (in < out + bytes && out < in + bytes) return 0;
  *add = in;
  return 1;
}

/* The variants the run chose, as a number: a graph records one choice. */
static uint64_t variant_sig(const Plan *p, const RunState *s) {
  uint64_t h = 1469598103934665603ULL;
  for (int k = 0; k < p->lt->nkernels; k++) {
    if (s->use[k] != &p->lt->kernels[k]) h = (h ^ (uint64_t)k) * 1099511628211ULL;
    if (s->lib_m[k] > 0) h = (h ^ ((uint64_t)s->lib_m[k] << 20 ^ (uint64_t)k)) * 1099511628211ULL;
    const void *add;
    if (s->lib_m[k] > 0 && lib_direct(s, k, &add)) /* and so does one that writes the output itself */
      h = (h ^ (uint64_t)(uintptr_t)s->args[(size_t)k * ARG_STRIDE + s->use[k]->lib->direct_out] ^
           (uint64_t)(uintptr_t)add * 31) *
          1099511628211ULL;
  }
  /* a recorded library GEMM keeps its pointers: the scratch moving makes another graph */
  return (h ^ (uint64_t)(uintptr_t)p->scratch) * 1099511628211ULL;
}

static int graph_applicable(const Plan *p, const RunState *s) {
  if (!plan_graph_wanted(p, s->graph_key)) return 0;
  for (int k = 0; k < p->lt->nkernels; k++) {
    if (s->use[k]->skip) continue;
    if (s->grids[k] <= 0 || s->lib_m[k] < 0) return 0; /* an empty launch is no graph node */
    if (s->lib_m[k] > 0 && (!p->graph_library || s->epi_grids[k] <= 0)) return 0;
    if (s->use[k]->pre && s->pre_grids[k] <= 0) return 0;
  }
  return 1;
}

void plan_graph_free(Plan *p, PlanGraph *g) {
  if (g->graph) p->b->ops->graph_free(p->b, g->graph);
  free(g->args);
  free(g->syms);
  free(g->grids);
  free(g->pre_grids);
  free(g->node);
  free(g->pre_node);
  memset(g, 0, sizeof *g);
}

/* The grid of slot k's kernel node: its library form's epilogue, or the kernel. */
static int64_t slot_grid(const RunState *s, int k) { return s->lib_m[k] > 0 ? s->epi_grids[k] : s->grids[k]; }

/* Slot k's library GEMMs (LaunchKernel.lib), after its pre-pass wrote A's planes: each distinct weight
 * times all the planes ([a_parts * m][k], stacked: one GEMM per weight covers every part) into the products
 * after the planes. Run now, or recorded into graph g. */
static int library_gemms(Plan *p, const RunState *s, int k, BackendGraph *g, Diag *d) {
  const LaunchGemmLib *lib = s->use[k]->lib;
  const BackendOps *o = p->b->ops;
  int64_t m = s->lib_m[k], rows = m * lib->a_parts;
  char *planes = (char *)p->scratch + lib->planes_at;
  const void *add;
  float *products = lib_direct(s, k, &add) ? s->args[(size_t)k * ARG_STRIDE + lib->direct_out]
                                           : (float *)(planes + (size_t)m * (size_t)lib->k * 2 * (size_t)lib->a_parts);
  for (int w = 0; w < lib->nw; w++) {
    /* a quantized weight: the bf16 copy the pre-pass made in the scratch */
    const void *weight = lib->w_at[w] >= 0 ? (const void *)((const char *)p->scratch + lib->w_at[w])
                                           : s->args[(size_t)k * ARG_STRIDE + lib->w_param[w]];
    if (g ? !o->graph_add_gemm(p->b, g, rows, lib->w_rows[w], lib->k, planes, weight, add, products, d)
          : !o->gemm_bf16(p->b, rows, lib->w_rows[w], lib->k, planes, weight, add, products, d))
      return 0;
    products += (size_t)rows * (size_t)lib->w_rows[w];
  }
  return 1;
}

/* Slot k's launches appended to graph g: its pre-pass (unless the planes are already there), then its kernel
 * or library form (its GEMMs, then the epilogue unless they wrote the output); *nodes counts the nodes, node /
 * pre_node (may be NULL) get the kernel's (the epilogue's) and the pre-pass's. */
static int graph_add_slot(Plan *p, RunState *s, BackendGraph *g, int k, int *nodes, int *node, int *pre_node, Diag *d) {
  const BackendOps *o = p->b->ops;
  const LaunchKernel *kk = s->use[k];
  void *const *a = &s->args[(size_t)k * ARG_STRIDE];
  const int64_t *y = &s->syms[(size_t)k * 16];
  if (kk->pre && !s->skip_pre[k]) {
    if (pre_node) *pre_node = *nodes;
    (*nodes)++;
    if (!o->graph_add(p->b, g, p->m, kk->pre->fn, a, s->nargs[k], y, s->nsyms[k], s->pre_grids[k], kk->pre->block, d))
      return 0;
  }
  if (s->lib_m[k] > 0) {
    const LaunchGemmLib *lib = kk->lib;
    const void *add;
    if (!library_gemms(p, s, k, g, d)) return 0;
    *nodes += lib->nw;
    if (lib_direct(s, k, &add)) return 1; /* the GEMMs wrote the output: no epilogue */
    if (node) *node = *nodes;             /* the epilogue, updated as the slot's kernel */
    (*nodes)++;
    return o->graph_add(p->b, g, p->m, lib->epilogue->fn, a, s->nargs[k], y, s->nsyms[k], s->epi_grids[k],
                        lib->epilogue->block, d);
  }
  if (node) *node = *nodes;
  (*nodes)++;
  return o->graph_add(p->b, g, p->m, kk->fn, a, s->nargs[k], y, s->nsyms[k], s->grids[k], kk->block, d);
}

/* Records the run's launch list: every slot's pre-pass and kernel (or library form), one node after another. */
static int graph_build(Plan *p, RunState *s, PlanGraph *g, Diag *d) {
  const BackendOps *o = p->b->ops;
  int nk = p->lt->nkernels;
  size_t nkk = (size_t)(nk ? nk : 1);
  if (!(g->graph = o->graph_new(p->b, d))) return 0;
  g->args = xmalloc(nkk * ARG_STRIDE * sizeof(void *), "the launch graph's arguments");
  g->syms = xmalloc(nkk * 16 * sizeof(int64_t), "the launch graph's symbols");
  g->grids = xmalloc(nkk * sizeof(int64_t), "the launch graph's grids");
  g->pre_grids = xmalloc(nkk * sizeof(int64_t), "the launch graph's grids");
  g->node = xmalloc(nkk * sizeof(int), "the launch graph's nodes");
  g->pre_node = xmalloc(nkk * sizeof(int), "the launch graph's nodes");
  int nodes = 0;
  for (int k = 0; k < nk; k++) {
    g->node[k] = g->pre_node[k] = -1; /* kernels that launch nothing are no nodes */
    if (!s->use[k]->skip && !graph_add_slot(p, s, g->graph, k, &nodes, &g->node[k], &g->pre_node[k], d)) return 0;
  }
  memcpy(g->args, s->args, nkk * ARG_STRIDE * sizeof(void *));
  memcpy(g->syms, s->syms, nkk * 16 * sizeof(int64_t));
  for (int k = 0; k < nk; k++) g->grids[k] = slot_grid(s, k);
  memcpy(g->pre_grids, s->pre_grids, nkk * sizeof(int64_t));
  return o->graph_instantiate(p->b, g->graph, d);
}

/* The graph of this run's key and variants: found, or recorded in place of the least recently used. */
static PlanGraph *graph_for(Plan *p, RunState *s, uint64_t sig, int first, Diag *d) {
  PlanGraph *lru = &p->graphs[0];
  for (int i = 0; i < PLAN_GRAPHS; i++) {
    PlanGraph *g = &p->graphs[i];
    if (g->graph && g->key == s->graph_key && g->sig == sig) {
      g->used = ++p->graph_clock;
      return g;
    }
    if (!g->graph || (lru->graph && g->used < lru->used)) lru = g;
  }
  if (p->graph_upto > 0 && first) return NULL; /* not yet: the first run of this key in a row */
  plan_graph_free(p, lru);
  lru->key = s->graph_key;
  lru->sig = sig;
  lru->used = ++p->graph_clock;
  if (!graph_build(p, s, lru, d)) {
    plan_graph_free(p, lru);
    return NULL;
  }
  return lru;
}

/* 1: replayed; 0: failed (d says why); -1: no graph for this run yet (launch one by one). */
static int graph_run(Plan *p, RunState *s, Diag *d) {
  const BackendOps *o = p->b->ops;
  uint64_t sig = variant_sig(p, s);
  int first = s->graph_key != p->last_key || sig != p->last_sig;
  p->last_key = s->graph_key;
  p->last_sig = sig;
  PlanGraph *g = graph_for(p, s, sig, first, d);
  if (!g) return d->set ? 0 : -1; /* graph_for records nothing on a key's first run in a row */
  double t0 = now_ms();
  int updates = 0;
  for (int k = 0; k < p->lt->nkernels; k++) {
    void **a = &s->args[(size_t)k * ARG_STRIDE];
    int64_t *y = &s->syms[(size_t)k * 16];
    if (g->node[k] < 0 && g->pre_node[k] < 0) continue;
    int same_args = !memcmp(a, &g->args[(size_t)k * ARG_STRIDE], sizeof(void *) * s->nargs[k]) &&
                    !memcmp(y, &g->syms[(size_t)k * 16], sizeof(int64_t) * s->nsyms[k]);
    if (g->pre_node[k] >= 0 && (!same_args || s->pre_grids[k] != g->pre_grids[k])) {
      if (!o->graph_update(p->b, g->graph, g->pre_node[k], a, s->nargs[k], y, s->nsyms[k], s->pre_grids[k], d))
        return 0;
      g->pre_grids[k] = s->pre_grids[k];
      updates++;
    }
    if (g->node[k] < 0) { /* a pre-pass before library GEMMs that write the output: no node of the slot's own */
      memcpy(&g->args[(size_t)k * ARG_STRIDE], a, sizeof(void *) * s->nargs[k]);
      memcpy(&g->syms[(size_t)k * 16], y, sizeof(int64_t) * s->nsyms[k]);
      continue;
    }
    if (same_args && slot_grid(s, k) == g->grids[k]) continue;
    if (!o->graph_update(p->b, g->graph, g->node[k], a, s->nargs[k], y, s->nsyms[k], slot_grid(s, k), d)) return 0;
    memcpy(&g->args[(size_t)k * ARG_STRIDE], a, sizeof(void *) * s->nargs[k]);
    memcpy(&g->syms[(size_t)k * 16], y, sizeof(int64_t) * s->nsyms[k]);
    g->grids[k] = slot_grid(s, k);
    updates++;
  }
  if (!p->step_profile) return o->graph_launch(p->b, g->graph, d) && o->sync(p->b, d);
  int timed = o->timer_mark && o->timer_ms;
  double t1 = now_ms();
  if ((timed && !o->timer_mark(p->b, 0, d)) || !o->graph_launch(p->b, g->graph, d) ||
      (timed && !o->timer_mark(p->b, 1, d)))
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

/* Profiling with device timestamps: mark `mark` + part + 1 ends part `part` of a slot's launches
 * (mark < 0: not profiling); the name of what ran as that part, for the report. */
static int end_part(Plan *p, int k, int mark, int part, const char *name, Diag *d) {
  if (mark < 0) return 1;
  if (name) p->prof_name[(size_t)k * PROF_PARTS + part] = name;
  return p->b->ops->timer_mark(p->b, mark + part + 1, d);
}

/* The library form of tensor-core GEMM k: its GEMMs, then the epilogue, which adds the parts. */
static int launch_library_gemm(Plan *p, RunState *s, int k, int mark, Diag *d) {
  const LaunchKernel *kk = s->use[k];
  const LaunchGemmLib *lib = kk->lib;
  const BackendOps *o = p->b->ops;
  if (!library_gemms(p, s, k, NULL, d)) return 0;
  if (!end_part(p, k, mark, PROF_LIBRARY, kk->fn, d)) return 0;
  const void *add;
  if (lib_direct(s, k, &add)) return end_part(p, k, mark, PROF_EPILOGUE, NULL, d);
  const LaunchKernel *e = lib->epilogue;
  return o->launch(p->b, p->m, e->fn, &s->args[(size_t)k * ARG_STRIDE], s->nargs[k], &s->syms[(size_t)k * 16],
                   s->nsyms[k], s->epi_grids[k], e->block, d) &&
         end_part(p, k, mark, PROF_EPILOGUE, e->fn, d);
}

/* Kernel slot k: the chosen kernel's pre-pass, then the kernel or its library form; `mark` as in
 * end_part (every part's mark is recorded, those of parts that did not run mark nothing). */
static int launch_slot(Plan *p, RunState *s, int k, int mark, Diag *d) {
  const LaunchKernel *kk = s->use[k];
  const BackendOps *o = p->b->ops;
  if (kk->pre && !s->skip_pre[k] &&
      !o->launch(p->b, p->m, kk->pre->fn, &s->args[(size_t)k * ARG_STRIDE], s->nargs[k], &s->syms[(size_t)k * 16],
                 s->nsyms[k], s->pre_grids[k], kk->pre->block, d))
    return 0;
  if (!end_part(p, k, mark, PROF_PRE, kk->pre ? kk->pre->fn : NULL, d)) return 0;
  if (s->lib_m[k] > 0) return end_part(p, k, mark, PROF_KERNEL, NULL, d) && launch_library_gemm(p, s, k, mark, d);
  return o->launch(p->b, p->m, kk->fn, &s->args[(size_t)k * ARG_STRIDE], s->nargs[k], &s->syms[(size_t)k * 16],
                   s->nsyms[k], s->grids[k], kk->block, d) &&
         end_part(p, k, mark, PROF_KERNEL, kk->fn, d) && end_part(p, k, mark, PROF_LIBRARY, NULL, d) &&
         end_part(p, k, mark, PROF_EPILOGUE, NULL, d);
}

int plan_launch_all(Plan *p, RunState *s, Diag *d) {
  p->runs++;
  int replayed = graph_applicable(p, s) ? -2 : -1;
  if (replayed == -2) {
    Diag gd = {0};
    if ((replayed = graph_run(p, s, &gd)) == 1) {
      p->graph_replays++;
      return 1;
    }
    if (replayed == 0) {
      /* No replay after all (an old driver, a refused update or recording): launch one by one from now on,
       * or, where recording a library call failed, record graphs without library GEMMs. */
      notice(NOTICE_WARNING, "graph replay failed (%s); launching %s one by one", gd.msg,
             p->graph_library ? "library GEMMs" : "kernels");
      if (p->graph_library) p->graph_library = 0;
      else p->graph_failed = 1;
      for (int i = 0; i < PLAN_GRAPHS; i++) plan_graph_free(p, &p->graphs[i]);
      if (!p->b->ops->sync(p->b, d)) return 0;
    }
  } else {
    p->last_key = -1;
  }
  /* Profiling: device timestamps between kernels and their parts where the backend has them
   * (launches stay asynchronous), else a synchronisation after each kernel. */
  const BackendOps *o = p->b->ops;
  const int n = p->lt->nkernels;
  int timed = p->kernel_ms && o->timer_mark && o->timer_ms && (int64_t)n * PROF_PARTS < BACKEND_TIMER_SLOTS;
  if (timed && !o->timer_mark(p->b, 0, d)) return 0;
  for (int k = 0; k < n; k++) {
    const LaunchKernel *kk = s->use[k];
    int mark = timed ? k * PROF_PARTS : -1;
    double t0 = p->kernel_ms ? now_ms() : 0;
    if (kk->skip) { /* a later kernel's variant does its work */
      for (int part = 0; part < PROF_PARTS; part++)
        if (!end_part(p, k, mark, part, NULL, d)) return 0;
    } else if (!launch_slot(p, s, k, mark, d)) {
      return 0;
    }
    if (p->kernel_ms && !timed && !kk->skip) { /* a kernel that launches nothing is no line of the profile */
      if (!o->sync(p->b, d)) return 0;
      p->kernel_ms[(size_t)k * PROF_PARTS + PROF_KERNEL] += now_ms() - t0;
      p->prof_name[(size_t)k * PROF_PARTS + PROF_KERNEL] = kk->fn;
    }
  }
  if (!o->sync(p->b, d)) return 0;
  for (int i = 0; timed && i < n * PROF_PARTS; i++) p->kernel_ms[i] += o->timer_ms(p->b, i, i + 1);
  return 1;
}

/* Whether slot k's launches can be graph nodes (as graph_applicable asks of a whole run). */
static int slot_graphable(const Plan *p, const RunState *s, int k) {
  const LaunchKernel *kk = s->use[k];
  if (kk->skip) return 1;
  if (s->grids[k] <= 0 || s->lib_m[k] < 0) return 0;
  if (s->lib_m[k] > 0 && (!p->b->ops->graph_add_gemm || s->epi_grids[k] <= 0)) return 0;
  return !(kk->pre && !s->skip_pre[k] && s->pre_grids[k] <= 0);
}

int plan_time_slots(Plan *p, RunState *s, const int *slots, int n, int warmup, int iters, double *times, Diag *d) {
  const BackendOps *o = p->b->ops;
  BackendGraph *g = NULL;
  int graphable = o->graph_new && o->graph_add && o->graph_instantiate && o->graph_launch;
  for (int i = 0; i < n && graphable; i++) graphable = slot_graphable(p, s, slots[i]);
  if (graphable) { /* one graph of the slots: no host launch gaps between short kernels */
    Diag gd = {0};
    int nodes = 0, ok = (g = o->graph_new(p->b, &gd)) != NULL;
    for (int i = 0; ok && i < n; i++)
      if (!s->use[slots[i]]->skip) ok = graph_add_slot(p, s, g, slots[i], &nodes, NULL, NULL, &gd);
    if (ok && nodes == 0) ok = 0; /* nothing launches: timed directly below (an empty graph is refused) */
    if (!(ok && o->graph_instantiate(p->b, g, &gd)) && g) {
      o->graph_free(p->b, g);
      g = NULL;
    }
  }
  const int timed = o->timer_mark && o->timer_ms;
  int ok = 1;
  for (int it = -warmup; ok && it < iters; it++) {
    double t0 = now_ms();
    if (timed) ok = o->timer_mark(p->b, 0, d);
    if (g) ok = ok && o->graph_launch(p->b, g, d);
    for (int i = 0; !g && ok && i < n; i++)
      if (!s->use[slots[i]]->skip) ok = launch_slot(p, s, slots[i], -1, d);
    if (timed) ok = ok && o->timer_mark(p->b, 1, d);
    ok = ok && o->sync(p->b, d);
    if (ok && it >= 0) times[it] = timed ? o->timer_ms(p->b, 0, 1) : now_ms() - t0;
  }
  if (g) o->graph_free(p->b, g);
  return ok;
}

static const double *prof_ms;
static int by_time_desc(const void *a, const void *b) {
  double x = prof_ms[*(const int *)a], y = prof_ms[*(const int *)b];
  return (x < y) - (x > y);
}

/* LATHE_PROFILE=1: device time per kernel function (the same layer op in every layer shares one;
 * a GEMM's cuBLASLt products count as "cuBLASLt NAME"), headed by `what`. */
void plan_print_profile(const Plan *p, const char *what) {
  int n = p->lt->nkernels * PROF_PARTS, nf = 0;
  size_t cap = (size_t)(n ? n : 1);
  int *order = xmalloc(sizeof(int) * cap, "the profile"), *count = xcalloc(cap, sizeof(int), "the profile");
  double *fn_ms = xcalloc(cap, sizeof(double), "the profile"), total = 0;
  char **fn = xcalloc(cap, sizeof(char *), "the profile");
  for (int i = 0; i < n; i++) {
    const char *name = p->prof_name[i];
    if (!name) continue;
    char label[160];
    snprintf(label, sizeof label, "%s%s", i % PROF_PARTS == PROF_LIBRARY ? "cuBLASLt " : "", name);
    int f = 0;
    while (f < nf && strcmp(fn[f], label)) f++;
    if (f == nf) fn[nf++] = xstrdup(label, "the profile");
    fn_ms[f] += p->kernel_ms[i];
    count[f]++;
    total += p->kernel_ms[i];
  }
  for (int f = 0; f < nf; f++) order[f] = f;
  prof_ms = fn_ms;
  qsort(order, (size_t)nf, sizeof(int), by_time_desc);
  double runs = p->runs ? p->runs : 1;
  notice(NOTICE_PROFILE,
         "lathe profile%s%s: %d runs, %.3f ms per run in %d kernels (%d functions):", *what ? " of " : "", what,
         p->runs, total / runs, p->lt->nkernels, nf);
  for (int i = 0; i < nf; i++) {
    int f = order[i];
    notice(NOTICE_PROFILE, "  %8.3f ms/run %5.1f%%  %3d x %-32s %.4f ms each", fn_ms[f] / runs,
           total > 0 ? 100 * fn_ms[f] / total : 0, count[f], fn[f], fn_ms[f] / runs / count[f]);
  }
  for (int f = 0; f < nf; f++) free(fn[f]);
  free(order);
  free(count);
  free(fn_ms);
  free(fn);
}

void plan_print_step_profile(const Plan *p) {
  double n = p->step_runs;
  notice(NOTICE_PROFILE,
         "lathe step profile: %d graph replays; per replay: host prep %.3f ms, %.1f node updates %.3f ms, launch "
         "%.3f ms, wait %.3f ms (graph on device %.3f ms), outputs %.3f ms",
         p->step_runs, p->step_prep_ms / n, p->step_updates / n, p->step_update_ms / n, p->step_launch_ms / n,
         p->step_wait_ms / n, p->step_gpu_ms / n, p->step_out_ms / n);
}
