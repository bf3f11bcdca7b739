/* Which symbols each size, grid and variant condition depends on, so that a run re-evaluates only
 * what the symbols that changed since the previous run can change. A decode step differs from the one
 * before only in `past`, which about one kernel per layer (attention) and its buffers depend on;
 * evaluating every expression again was most of the host time between steps. */
#include <stdlib.h>
#include <string.h>
#include "plan_internal.h"
#include "../base/mem.h"

typedef struct DepScan {
  const LaunchTable *lp;
  uint64_t mask;
} DepScan;

static void dep_scan_fn(void *ctx, const Expr *e) {
  DepScan *s = ctx;
  if (e->op != X_SYM) return;
  for (int j = 0; j < s->lp->nsymbols; j++)
    if (!strcmp(s->lp->symbols[j], e->name)) {
      s->mask |= 1ull << j;
      return;
    }
  s->mask = ~0ull; /* not a program symbol: always re-evaluate */
}

static uint64_t deps_of(const LaunchTable *lp, const Expr *e) {
  DepScan s = {lp, 0};
  if (e) ex_visit(e, dep_scan_fn, &s);
  return s.mask;
}

/* Everything a kernel slot evaluates: its grid, its variant's condition, both kernels' grids, scratch
 * and pre-pass grids, the library form's rows and epilogue grid, and the symbols it passes by value
 * (none where kernels read the symbol table). */
static uint64_t kernel_deps(const LaunchTable *lp, const LaunchKernel *kk, int by_value) {
  uint64_t m = 0;
  for (const LaunchKernel *k = kk; k; k = k == kk ? kk->alt : NULL) {
    m |= deps_of(lp, k->grid) | deps_of(lp, k->scratch);
    if (k->pre) m |= deps_of(lp, k->pre->grid);
    if (k->lib) m |= deps_of(lp, k->lib->m) | deps_of(lp, k->lib->epilogue->grid);
    for (int j = 0; by_value && j < k->nsyms; j++)
      for (int i = 0; i < lp->nsymbols; i++)
        if (!strcmp(lp->symbols[i], k->syms[j])) m |= 1ull << i;
  }
  return m | deps_of(lp, kk->alt_when);
}

int plan_deps_init(Plan *p) {
  const LaunchTable *lp = p->lt;
  int nk = p->lt->nkernels;
  p->dep_buf = xcalloc((size_t)(lp->nbufs > 0 ? lp->nbufs : 1), sizeof *p->dep_buf, "the plan's dependencies");
  p->dep_kernel = xcalloc((size_t)(nk > 0 ? nk : 1), sizeof *p->dep_kernel, "the plan's dependencies");
  p->last_sym = xcalloc((size_t)(lp->nsymbols > 0 ? lp->nsymbols : 1), sizeof *p->last_sym, "the plan's dependencies");
  if (!p->dep_buf || !p->dep_kernel || !p->last_sym) return 0;
  for (int i = 0; i < lp->nbufs; i++)
    for (int k = 0; k < lp->bufs[i].shape.rank; k++) p->dep_buf[i] |= deps_of(lp, lp->bufs[i].shape.dim[k]);
  for (int k = 0; k < nk; k++) p->dep_kernel[k] = kernel_deps(lp, &p->lt->kernels[k], p->sym_table == NULL);
  p->have_last = 0;
  return 1;
}

uint64_t plan_changed_symbols(Plan *p, const SymEnv *env, int64_t *values, uint64_t *present) {
  const LaunchTable *lp = p->lt;
  uint64_t changed = 0;
  *present = 0;
  for (int j = 0; j < lp->nsymbols && j < 64; j++) {
    values[j] = 0;
    if (symenv_get(env, lp->symbols[j], &values[j])) *present |= 1ull << j;
    if (values[j] != p->last_sym[j]) changed |= 1ull << j;
  }
  changed |= *present ^ p->last_present;
  return p->have_last && lp->nsymbols <= 64 ? changed : ~0ull;
}

void plan_remember_symbols(Plan *p, const int64_t *values, uint64_t present) {
  const LaunchTable *lp = p->lt;
  for (int j = 0; j < lp->nsymbols && j < 64; j++) p->last_sym[j] = values[j];
  p->last_present = present;
  p->have_last = 1;
}

void plan_deps_free(Plan *p) {
  free(p->dep_buf);
  free(p->dep_kernel);
  free(p->last_sym);
}
