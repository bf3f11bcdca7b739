/* Plan runtime: compiles the code stage's source once, then runs its kernels in order (by the launch
 * table, code/launch.h) for given symbol values, allocating every buffer of the table on the backend. */
#include "plan_internal.h"
#include "../base/checked.h"
#include "../base/mem.h"
#include "../base/clock.h"
#include "../base/settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/strbuf.h"

static void state_release(RunState *s);

Plan *plan_new(const LaunchTable *lt, const char *src, Backend *b, Diag *d) {
  Plan *p = xcalloc(1, sizeof *p, "a plan");
  char *source = xstrdup(src, "the plan's source");
  if (!p || !source) {
    free(p);
    free(source);
    diag_error(d, 0, 0, "plan: out of memory");
    return NULL;
  }
  p->lt = lt;
  p->b = b;
  p->source = source;
  const char *prof = setting_str(SET_PROFILE);
  if (prof && !strcmp(prof, "steps")) p->step_profile = 1;
  else if (prof && *prof && strcmp(prof, "0")) {
    size_t n = (size_t)(lt->nkernels ? lt->nkernels : 1) * PROF_PARTS;
    p->kernel_ms = xcalloc(n, sizeof(double), "the profile");
    p->prof_name = xcalloc(n, sizeof(char *), "the profile");
  }
  p->m = b->ops->compile(b, source, d);
  if (!p->m) {
    plan_free(p);
    return NULL;
  }
  int nsym = lt->nsymbols;
  if (lt->symbols_in_memory && nsym > 0) p->io_syms = ((size_t)nsym * sizeof(int64_t) + 15) & ~(size_t)15;
  if (p->io_syms > IO_BYTES / 2) {
    diag_error(d, 0, 0, "plan: %d symbols do not fit the per-run block", nsym);
    plan_free(p);
    return NULL;
  }
  if (!(p->io_host = mem_calloc(d, 1, IO_BYTES, "the plan's I/O area")) ||
      !(p->io_dev = b->ops->alloc(b, IO_BYTES, d))) {
    plan_free(p);
    return NULL;
  }
  if (p->io_syms) p->sym_table = p->io_dev;
  p->tensor_cores = target_has_bf16_mma(&b->target);
  /* whether cuBLASLt runs is asked when a run first chooses a GEMM with a library form, so plans
   * that never prefill (and CPU plans) do not load it */
  p->gemm_library = p->tensor_cores && b->ops->gemm_available && b->ops->gemm_bf16 ? -1 : 0;
  p->graph_library = b->ops->graph_add_gemm && setting_bool(SET_GRAPH_GEMM, 1);
  p->last_key = -1;
  if (!plan_deps_init(p)) {
    diag_error(d, 0, 0, "plan: out of memory");
    plan_free(p);
    return NULL;
  }
  return p;
}

void plan_free(Plan *p) {
  if (!p) return;
  if (p->kernel_ms && p->runs) plan_print_profile(p, "");
  if (p->step_profile && p->step_runs) plan_print_step_profile(p);
  free(p->kernel_ms);
  free(p->prof_name);
  if (p->m) p->b->ops->module_free(p->b, p->m);
  for (int i = 0; p->bound && i < p->lt->ninputs; i++)
    if (p->bound[i] && !p->borrowed[i]) p->b->ops->free(p->b, p->bound[i]);
  free(p->bound);
  free(p->borrowed);
  free(p->bound_bytes);
  for (int i = 0; p->ws && i < p->lt->nbufs; i++)
    if (p->ws[i]) p->b->ops->free(p->b, p->ws[i]);
  free(p->ws);
  free(p->ws_bytes);
  if (p->arena) p->b->ops->free(p->b, p->arena);
  if (p->scratch) p->b->ops->free(p->b, p->scratch);
  if (p->io_dev) p->b->ops->free(p->b, p->io_dev);
  free(p->io_host);
  for (int i = 0; i < PLAN_GRAPHS; i++) plan_graph_free(p, &p->graphs[i]);
  free(p->first_use);
  free(p->last_use);
  free(p->cap);
  free(p->offset);
  free(p->source);
  plan_deps_free(p);
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
  if (s.name) diag_error(d, 0, 0, "symbolic dimension '%s' has no value; pass --dim %s=N", s.name, s.name);
  else diag_error(d, 0, 0, "%s cannot be evaluated (it overflows int64, divides by zero or is not an integer)", what);
  return 0;
}

/* The run state's arrays are allocated once per plan (p->rs) and reused by every run (a decode step
 * would otherwise allocate and clear ~100 KB of argument tables); plan_free releases them. */
static void state_release(RunState *s) {
  free(s->io_at);
  free(s->use);
  free(s->nargs);
  free(s->nsyms);
  free(s->bytes);
  free(s->dev);
  free(s->args);
  free(s->syms);
  free(s->grids);
  free(s->pre_grids);
  free(s->need);
  free(s->lib_m);
  free(s->epi_grids);
  free(s->skip_pre);
  memset(s, 0, sizeof *s);
}

static int buf_index(const RunState *s, int id, Diag *d) {
  if (id < 0 || id >= s->nbufs) {
    diag_error(d, 0, 0, "plan: reference to unknown buffer %d", id);
    return -1;
  }
  return id;
}

/* Replaces the device buffer *buf (*have bytes) by one of at least `need` bytes, twice the old size
 * if that is more, so that a growing size reallocates rarely; zeroed when `zero`. */
static int grow(Plan *p, void **buf, size_t *have, size_t need, int zero, Diag *d) {
  size_t want = need > 2 * *have ? need : 2 * *have;
  if (*buf) p->b->ops->free(p->b, *buf);
  *have = 0;
  if (!(*buf = p->b->ops->alloc(p->b, want, d))) return 0;
  *have = want;
  if (!zero) return 1;
  void *zeros = mem_calloc(d, 1, want, "zeroing a buffer");
  int ok = zeros && p->b->ops->upload(p->b, *buf, zeros, want, d);
  free(zeros);
  return ok;
}

/* Must something that depends on the symbols `dep` be evaluated again? `changed` (plan_deps.c) is ~0
 * when everything must: the first run, or none recorded. */
static int stale(uint64_t dep, uint64_t changed) { return changed == ~0ull || (dep & changed); }

/* Whether kernel j writes a buffer that A of library GEMM `lib` reads. */
static int writes_a_input(const LaunchKernel *j, const LaunchGemmLib *lib) {
  for (int i = 0; i < j->nparams; i++)
    for (int b = 0; j->params[i].is_output && b < lib->na_bufs; b++)
      if (j->params[i].buf == lib->a_bufs[b]) return 1;
  return 0;
}

/* RunState.skip_pre: a library GEMM whose pre-pass would write the planes that the kernel launched just
 * before it left in the scratch (the same A, rows and parts: q, k and v of one layer) runs without it, as
 * long as that kernel wrote nothing A reads. */
static void mark_shared_planes(const Plan *p, RunState *s) {
  int prev = -1;
  for (int k = 0; k < p->lt->nkernels; k++) {
    const LaunchKernel *kk = s->use[k];
    s->skip_pre[k] = 0;
    if (kk->skip) continue;
    if (prev >= 0 && s->lib_m[k] > 0 && s->lib_m[prev] == s->lib_m[k] && kk->pre) {
      const LaunchGemmLib *a = s->use[prev]->lib, *b = kk->lib;
      s->skip_pre[k] = a->a_sig && b->a_sig && b->na_bufs >= 0 && a->planes_at == b->planes_at &&
                       !strcmp(a->a_sig, b->a_sig) && !writes_a_input(s->use[prev], b);
    }
    prev = k;
  }
}

/* The run state for these symbol values: buffer sizes and device pointers, the kernel or variant of each
 * slot, its arguments and grid. */
static int state_init(Plan *p, const SymEnv *env, RunState *s, Diag *d) {
  const LaunchTable *lp = p->lt;
  int nk = p->lt->nkernels;
  /* only what depends on a symbol that changed since the last complete run is evaluated again */
  int64_t symv[64];
  uint64_t present;
  uint64_t changed = plan_changed_symbols(p, env, symv, &present);
  p->have_last = 0; /* until this run's state is complete */
  if (p->rs.dev) {  /* reuse: only what runs do not overwrite is cleared */
    *s = p->rs;
    memset(s->dev, 0, (size_t)s->nbufs * sizeof *s->dev);
    memset(s->io_at, 0, (size_t)s->nbufs * sizeof *s->io_at);
    s->any_variant = 0;
    s->io_used = 0;
    goto sized;
  }
  memset(s, 0, sizeof *s);
  changed = ~0ull; /* new arrays: everything is evaluated */
  s->nbufs = lp->nbufs;
  size_t nb = (size_t)(s->nbufs > 0 ? s->nbufs : 1);
  size_t nkk = (size_t)(nk > 0 ? nk : 1);
  s->bytes = xcalloc(nb, sizeof *s->bytes, "the plan's buffer sizes");
  s->dev = xcalloc(nb, sizeof *s->dev, "the plan's device buffers");
  s->args = xcalloc(nkk * ARG_STRIDE, sizeof *s->args, "the plan's kernel arguments");
  s->syms = xcalloc(nkk * 16, sizeof *s->syms, "the plan's kernel symbols");
  s->nargs = xcalloc(nkk, sizeof *s->nargs, "the plan's argument counts");
  s->nsyms = xcalloc(nkk, sizeof *s->nsyms, "the plan's symbol counts");
  s->use = xcalloc(nkk, sizeof *s->use, "the plan's kernel uses");
  s->io_at = xcalloc(nb, sizeof *s->io_at, "the plan's I/O offsets");
  s->grids = xcalloc(nkk, sizeof *s->grids, "the plan's grids");
  s->pre_grids = xcalloc(nkk, sizeof *s->pre_grids, "the plan's pre-pass grids");
  s->need = xcalloc(nkk, sizeof *s->need, "the plan's requirements");
  s->lib_m = xcalloc(nkk, sizeof *s->lib_m, "the plan's library GEMM rows");
  s->epi_grids = xcalloc(nkk, sizeof *s->epi_grids, "the plan's epilogue grids");
  s->skip_pre = xcalloc(nkk, sizeof *s->skip_pre, "the plan's pre-pass skips");
  if (!s->bytes || !s->dev || !s->args || !s->syms || !s->grids || !s->pre_grids || !s->need || !s->lib_m ||
      !s->epi_grids || !s->nargs || !s->nsyms || !s->use || !s->io_at) {
    diag_error(d, 0, 0, "plan: out of memory");
    state_release(s);
    return 0;
  }
  p->rs = *s;
sized:
  for (int i = 0; i < lp->nbufs; i++) {
    const LaunchBuf *buf = &lp->bufs[i];
    if (!stale(p->dep_buf[i], changed)) continue;
    int64_t numel, dims[LT_MAX_RANK];
    for (int k = 0; k < buf->shape.rank; k++) {
      int64_t dim;
      if (!eval_or_diag(buf->shape.dim[k], env, "a dimension", &dim, d)) return 0;
      if (dim < 0) {
        diag_error(d, 0, 0, "buffer '%s': dimension %d is %lld, which is negative", buf->name, k, (long long)dim);
        return 0;
      }
      dims[k] = dim;
    }
    if (!ck_numel(buf->shape.rank, dims, &numel) || !dtype_bytes(buf->dtype, numel, &s->bytes[i])) {
      diag_error(d, 0, 0, "buffer '%s' would have more than 2^56 elements at these sizes", buf->name);
      return 0;
    }
  }
  for (int i = 0; p->bound && i < lp->ninputs; i++) {
    int bi = lp->inputs[i];
    if (!p->bound[i]) continue;
    if (s->bytes[bi] != p->bound_bytes[i]) {
      diag_error(d, 0, 0, "input '%s' was bound with %zu bytes but needs %zu at these sizes", lp->bufs[bi].name,
                 p->bound_bytes[i], s->bytes[bi]);
      return 0;
    }
    s->dev[bi] = p->bound[i];
  }
  s->graph_key = -1;
  if (p->graph_sym && !symenv_get(env, p->graph_sym, &s->graph_key)) s->graph_key = -1;
  if (!plan_place_temporaries(p, s, d)) return 0;
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
    p->ws = mem_calloc(d, nbuf, sizeof *p->ws, "the plan's workspaces");
    p->ws_bytes = mem_calloc(d, nbuf, sizeof *p->ws_bytes, "the plan's workspaces");
    if (!p->ws || !p->ws_bytes) { return 0; }
  }
  for (int i = 0; i < lp->nbufs; i++) {
    if (s->dev[i]) continue;
    /* a temporary no kernel uses (the scores of an attention that flash-decoding computes) */
    if (lp->bufs[i].kind == LB_TEMP && p->first_use && p->first_use[i] < 0) continue;
    if ((!p->ws[i] || p->ws_bytes[i] < s->bytes[i]) && !grow(p, &p->ws[i], &p->ws_bytes[i], s->bytes[i], 0, d))
      return 0;
    s->dev[i] = p->ws[i];
  }
  /* a run that replays a graph runs the generated GEMMs where the backend cannot record a library call */
  int graphable = plan_graph_wanted(p, s->graph_key) && !p->graph_library;
  /* which kernel or variant runs, and the scratch they need, before any argument points at it */
  size_t scratch = 0;
  for (int k = 0; k < nk; k++) {
    if (stale(p->dep_kernel[k], changed)) {
      const LaunchKernel *kk = &p->lt->kernels[k];
      int64_t when = 0;
      if (kk->alt && kk->alt_when && !eval_or_diag(kk->alt_when, env, "a kernel variant's condition", &when, d))
        return 0;
      if (when && kk->alt->tensor_cores && !p->tensor_cores) when = 0; /* keep the CUDA-core kernel */
      s->use[k] = when ? kk->alt : kk;
      s->need[k] = 0;
      if (s->use[k]->scratch && !eval_or_diag(s->use[k]->scratch, env, "a kernel's scratch size", &s->need[k], d))
        return 0;
    }
    if (s->use[k] != &p->lt->kernels[k]) s->any_variant = 1;
    if (s->need[k] > 0 && (size_t)s->need[k] > scratch) scratch = (size_t)s->need[k];
  }
  /* kernels find the scratch zero (kernel.h) */
  if (scratch > p->scratch_bytes && !grow(p, &p->scratch, &p->scratch_bytes, scratch, 1, d)) return 0;
  for (int k = 0; k < nk; k++) {
    const LaunchKernel *kk = s->use[k];
    if (kk->nparams > LAUNCH_MAX_PARAMS || kk->nsyms > 16) {
      diag_error(d, 0, 0, "plan: kernel '%s' has too many parameters", kk->name);
      return 0;
    }
    for (int a = 0; a < kk->nparams; a++) {
      int bi = buf_index(s, kk->params[a].buf, d);
      if (bi < 0) return 0;
      s->args[(size_t)k * ARG_STRIDE + a] = s->dev[bi];
    }
    s->nargs[k] = kk->nparams;
    int fresh = stale(p->dep_kernel[k], changed); /* else the symbols and grids of the last run hold */
    for (int j = 0; fresh && j < kk->nsyms; j++)
      if (!symenv_get(env, kk->syms[j], &s->syms[(size_t)k * 16 + j])) {
        diag_error(d, 0, 0, "symbolic dimension '%s' has no value; pass --dim %s=N", kk->syms[j], kk->syms[j]);
        return 0;
      }
    s->nsyms[k] = kk->nsyms;
    if (p->sym_table && kk->nsyms) { /* the kernel reads its symbols from the table (code.h) */
      s->args[(size_t)k * ARG_STRIDE + s->nargs[k]++] = p->sym_table;
      s->nsyms[k] = 0;
    }
    if (kk->scratch) s->args[(size_t)k * ARG_STRIDE + s->nargs[k]++] = p->scratch;
    /* whether the library runs depends on the run replaying a graph, not only on the kernel's own symbols */
    s->lib_m[k] = 0;
    if (kk->lib && p->gemm_library < 0) p->gemm_library = p->b->ops->gemm_available(p->b);
    if (kk->lib && p->gemm_library && !graphable &&
        (!eval_or_diag(kk->lib->m, env, "the rows of a GEMM", &s->lib_m[k], d) ||
         !eval_or_diag(kk->lib->epilogue->grid, env, "the launch grid", &s->epi_grids[k], d)))
      return 0;
    if (!fresh) continue;
    s->grids[k] = 1;
    if (kk->grid && !eval_or_diag(kk->grid, env, "the launch grid", &s->grids[k], d)) return 0;
    s->pre_grids[k] = 0;
    if (kk->pre && kk->pre->grid && !eval_or_diag(kk->pre->grid, env, "the launch grid", &s->pre_grids[k], d)) return 0;
  }
  mark_shared_planes(p, s);
  plan_remember_symbols(p, symv, present);
  return 1;
}

static int upload_inputs(Plan *p, RunState *s, const SymEnv *env, void *const *inputs, Diag *d) {
  const LaunchTable *lp = p->lt;
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

const void *plan_output_device(const Plan *p, int output) {
  const LaunchTable *lp = p->lt;
  if (output < 0 || output >= lp->noutputs || !p->rs.dev || !p->runs) return NULL;
  int id = lp->outputs[output];
  if (id < 0 || id >= p->rs.nbufs) return NULL;
  return p->rs.dev[id];
}

int plan_run(Plan *p, const SymEnv *env, void *const *inputs, void *const *outputs, Diag *d) {
  RunState s;
  double t0 = now_ms();
  if (!state_init(p, env, &s, d)) return 0;
  const LaunchTable *lp = p->lt;
  int ok = upload_inputs(p, &s, env, inputs, d);
  double t1 = now_ms();
  int replays = p->step_runs;
  ok = ok && plan_launch_all(p, &s, d);
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

int plan_bench_times(Plan *p, const SymEnv *env, void *const *inputs, int warmup, int iters, double *times, Diag *d) {
  if (iters < 1 || warmup < 0) {
    diag_error(d, 0, 0, "bench: need at least one timed iteration (got warmup=%d iters=%d)", warmup, iters);
    return 0;
  }
  RunState s;
  if (!state_init(p, env, &s, d)) return 0;
  int ok = upload_inputs(p, &s, env, inputs, d);
  for (int i = 0; ok && i < warmup; i++) ok = plan_launch_all(p, &s, d);
  for (int i = 0; ok && i < iters; i++) {
    double t0 = now_ms();
    ok = plan_launch_all(p, &s, d);
    times[i] = now_ms() - t0;
  }
  return ok;
}

int plan_bench_slots(Plan *p, const SymEnv *env, const int *slots, int nslots, int warmup, int iters, double *times,
                     Diag *d) {
  if (iters < 1 || warmup < 0 || nslots < 1) {
    diag_error(d, 0, 0, "bench: need kernels and at least one timed iteration (got %d kernels, warmup=%d iters=%d)",
               nslots, warmup, iters);
    return 0;
  }
  if (!p->runs) {
    diag_error(d, 0, 0, "bench: timing kernels alone needs a complete run first (their inputs)");
    return 0;
  }
  for (int i = 0; i < nslots; i++)
    if (slots[i] < 0 || slots[i] >= p->lt->nkernels) {
      diag_error(d, 0, 0, "bench: no kernel number %d", slots[i]);
      return 0;
    }
  RunState s;
  /* the same sizes as the last run: its buffers, which hold that run's inputs and intermediates */
  return state_init(p, env, &s, d) && plan_time_slots(p, &s, slots, nslots, warmup, iters, times, d);
}

int plan_bench(Plan *p, const SymEnv *env, void *const *inputs, int warmup, int iters, double *median_ms, Diag *d) {
  if (iters < 1 || warmup < 0) {
    diag_error(d, 0, 0, "bench: need at least one timed iteration (got warmup=%d iters=%d)", warmup, iters);
    return 0;
  }
  double *times = mem_calloc(d, (size_t)iters, sizeof *times, "the benchmark's times");
  if (!times) return 0;
  int ok = plan_bench_times(p, env, inputs, warmup, iters, times, d);
  if (ok) {
    qsort(times, (size_t)iters, sizeof *times, cmp_double);
    *median_ms = iters % 2 ? times[iters / 2] : 0.5 * (times[iters / 2 - 1] + times[iters / 2]);
  }
  free(times);
  return ok;
}

/* The byte size of input `input` at env's sizes, with the bound-input tables set up. */
static int input_bytes(Plan *p, int input, const SymEnv *env, size_t *bytes, Diag *d) {
  const LaunchTable *lp = p->lt;
  if (input < 0 || input >= lp->ninputs) {
    diag_error(d, 0, 0, "plan: no input number %d", input);
    return 0;
  }
  if (!p->bound) {
    p->bound = mem_calloc(d, (size_t)lp->ninputs, sizeof *p->bound, "the plan's bound inputs");
    p->bound_bytes = mem_calloc(d, (size_t)lp->ninputs, sizeof *p->bound_bytes, "the plan's bound inputs");
    p->borrowed = mem_calloc(d, (size_t)lp->ninputs, 1, "the plan's borrowed inputs");
    if (!p->bound || !p->bound_bytes || !p->borrowed) { return 0; }
  }
  const LaunchBuf *buf = &lp->bufs[lp->inputs[input]];
  int64_t numel, dims[LT_MAX_RANK];
  for (int k = 0; k < buf->shape.rank; k++)
    if (!eval_or_diag(buf->shape.dim[k], env, "a dimension", &dims[k], d)) return 0;
  if (!ck_numel(buf->shape.rank, dims, &numel) || !dtype_bytes(buf->dtype, numel, bytes)) {
    diag_error(d, 0, 0, "input '%s' would have more than 2^56 elements (or a negative size) at these sizes", buf->name);
    return 0;
  }
  return 1;
}

/* Frees input's bound buffer unless it is borrowed, leaving no buffer bound. */
static void unbind(Plan *p, int input) {
  if (p->bound[input] && !p->borrowed[input]) p->b->ops->free(p->b, p->bound[input]);
  p->bound[input] = NULL;
  p->borrowed[input] = 0;
}

int plan_bind_input(Plan *p, int input, const void *host, const SymEnv *env, Diag *d) {
  size_t bytes;
  if (!input_bytes(p, input, env, &bytes, d)) return 0;
  if (p->bound[input] && (p->bound_bytes[input] != bytes || p->borrowed[input])) unbind(p, input);
  if (!p->bound[input] && !(p->bound[input] = p->b->ops->alloc(p->b, bytes, d))) return 0;
  p->bound_bytes[input] = bytes;
  if (!bytes) return 1;
  if (host) return p->b->ops->upload(p->b, p->bound[input], host, bytes, d);
  void *zeros = mem_calloc(d, 1, bytes, "zeroing a buffer");
  if (!zeros) return 0;
  int ok = p->b->ops->upload(p->b, p->bound[input], zeros, bytes, d);
  free(zeros);
  return ok;
}

int plan_bind_input_host(Plan *p, int input, const void *host, size_t bytes, const SymEnv *env, Diag *d) {
  size_t want;
  if (!input_bytes(p, input, env, &want, d)) return 0;
  if (want != bytes) {
    diag_error(d, 0, 0, "input '%s' needs %zu bytes but %zu were given", p->lt->bufs[p->lt->inputs[input]].name, want,
               bytes);
    return 0;
  }
  if (p->b->target.kind != TARGET_CPU) return plan_bind_input(p, input, host, env, d);
  unbind(p, input);
  p->bound[input] = (void *)host;
  p->bound_bytes[input] = bytes;
  p->borrowed[input] = 1;
  return 1;
}

int plan_input_index(const Plan *p, const char *name) {
  const LaunchTable *lp = p->lt;
  for (int i = 0; i < lp->ninputs; i++)
    if (!strcmp(lp->bufs[lp->inputs[i]].name, name)) return i;
  return -1;
}

int plan_gemm_library(const Plan *p) { return p->gemm_library > 0; }

void plan_profile_report(Plan *p, const char *what) {
  if (!p->kernel_ms) return;
  if (p->runs && what) plan_print_profile(p, what);
  memset(p->kernel_ms, 0, sizeof(double) * (size_t)(p->lt->nkernels ? p->lt->nkernels : 1) * PROF_PARTS);
  p->runs = 0;
}

size_t plan_workspace_bytes(const Plan *p) {
  size_t n = p->arena_bytes + p->scratch_bytes;
  for (int i = 0; p->ws && i < p->lt->nbufs; i++) n += p->ws_bytes[i];
  return n;
}

void plan_use_graphs(Plan *p, const char *sym, int64_t value) {
  p->graph_sym = sym;
  p->graph_key = value;
  p->graph_upto = 0;
}

void plan_use_graphs_upto(Plan *p, const char *sym, int64_t max) {
  p->graph_sym = sym;
  p->graph_key = -1;
  p->graph_upto = max;
}
