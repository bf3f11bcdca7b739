/* Plan runtime: launching a run's kernels, replaying a recorded graph for decode steps, and the
 * profiling reports. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/clock.h"
#include "plan_internal.h"

static int graph_applicable(const Plan *p, const RunState *s) {
  if (!p->graph_sym || p->kernel_ms || p->graph_failed || !p->b->ops->graph_new || s->any_variant) return 0;
  if (s->graph_key != p->graph_key) return 0;
  for (int k = 0; k < p->kp->nkernels; k++)
    if (!s->use[k]->skip && s->grids[k] <= 0) return 0; /* an empty launch cannot be a graph node */
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
  p->g_node = malloc(nkk * sizeof(int));
  if (!p->g_args || !p->g_syms || !p->g_grids || !p->g_node) abort();
  int nodes = 0;
  for (int k = 0; k < nk; k++) {
    const KKernel *kk = s->use[k];
    p->g_node[k] = kk->skip ? -1 : nodes++; /* kernels that launch nothing are no nodes */
    if (kk->skip) continue;
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
    if (p->g_node[k] < 0) continue;
    if (s->grids[k] == p->g_grids[k] && !memcmp(a, &p->g_args[(size_t)k * ARG_STRIDE], sizeof(void *) * s->nargs[k]) &&
        !memcmp(y, &p->g_syms[(size_t)k * 16], sizeof(int64_t) * s->nsyms[k]))
      continue;
    if (!o->graph_update(p->b, p->graph, p->g_node[k], a, s->nargs[k], y, s->nsyms[k], s->grids[k], d)) return 0;
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

/* The library form of tensor-core GEMM k (KKernel.lib), after its pre-pass wrote A's planes: each
 * distinct weight times the planes (summed) into the products after the planes, then the epilogue. */
static int launch_library_gemm(Plan *p, RunState *s, int k, Diag *d) {
  const KKernel *kk = s->use[k];
  const KGemmLib *lib = kk->lib;
  const BackendOps *o = p->b->ops;
  int64_t m = s->lib_m[k];
  char *planes = (char *)p->scratch + MMA_COUNTERS;
  float *products = (float *)(planes + (size_t)m * (size_t)lib->k * 2 * (size_t)lib->a_parts);
  for (int w = 0; w < lib->nw; w++) {
    const void *weight = s->args[(size_t)k * ARG_STRIDE + lib->w_param[w]];
    for (int part = 0; part < lib->a_parts; part++)
      if (!o->gemm_bf16(p->b, m, lib->w_rows[w], lib->k, planes + (size_t)part * (size_t)m * (size_t)lib->k * 2, weight,
                        products, part > 0, d))
        return 0;
    products += (size_t)m * (size_t)lib->w_rows[w];
  }
  const KKernel *e = lib->epilogue;
  return o->launch(p->b, p->m, e->code_name ? e->code_name : e->name, &s->args[(size_t)k * ARG_STRIDE], s->nargs[k],
                   &s->syms[(size_t)k * 16], s->nsyms[k], s->epi_grids[k], e->block, d);
}

/* Kernel slot k: the chosen kernel's pre-pass, then the kernel or its library form. */
static int launch_slot(Plan *p, RunState *s, int k, Diag *d) {
  const KKernel *kk = s->use[k];
  const BackendOps *o = p->b->ops;
  if (kk->pre && !o->launch(p->b, p->m, kk->pre->code_name ? kk->pre->code_name : kk->pre->name,
                            &s->args[(size_t)k * ARG_STRIDE], s->nargs[k], &s->syms[(size_t)k * 16], s->nsyms[k],
                            s->pre_grids[k], kk->pre->block, d))
    return 0;
  if (s->lib_m[k] > 0) return launch_library_gemm(p, s, k, d);
  return o->launch(p->b, p->m, kk->code_name ? kk->code_name : kk->name, &s->args[(size_t)k * ARG_STRIDE], s->nargs[k],
                   &s->syms[(size_t)k * 16], s->nsyms[k], s->grids[k], kk->block, d);
}

int plan_launch_all(Plan *p, RunState *s, Diag *d) {
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
    if (!kk->skip && !launch_slot(p, s, k, d)) return 0; /* skip: a later kernel's variant does its work */
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
void plan_print_profile(const Plan *p) {
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

void plan_print_step_profile(const Plan *p) {
  double n = p->step_runs;
  fprintf(stderr,
          "lathe step profile: %d graph replays; per replay: host prep %.3f ms, %.1f node updates %.3f ms, launch "
          "%.3f ms, wait %.3f ms (graph on device %.3f ms), outputs %.3f ms\n",
          p->step_runs, p->step_prep_ms / n, p->step_updates / n, p->step_update_ms / n, p->step_launch_ms / n,
          p->step_wait_ms / n, p->step_gpu_ms / n, p->step_out_ms / n);
}
