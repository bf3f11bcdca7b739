/* Plan runtime: memory planning. Temporaries share one arena; each gets an offset by first-fit in
 * decreasing size, overlapping only temporaries whose kernel-index lifetimes are disjoint; offsets are
 * planned for capacities that grow geometrically, so a decode step re-plans only O(log n) times. */
#include <stdlib.h>
#include "plan_internal.h"
#include "../base/mem.h"

static int compute_lifetimes(Plan *p) {
  const LaunchTable *lp = p->lt;
  size_t nb = (size_t)(lp->nbufs ? lp->nbufs : 1);
  p->first_use = xmalloc(nb * sizeof(int), "the buffer lifetimes");
  p->last_use = xmalloc(nb * sizeof(int), "the buffer lifetimes");
  p->cap = xcalloc(nb, sizeof(size_t), "the buffer capacities");
  p->offset = xcalloc(nb, sizeof(size_t), "the buffer offsets");
  if (!p->first_use || !p->last_use || !p->cap || !p->offset) return 0;
  for (int i = 0; i < lp->nbufs; i++) p->first_use[i] = p->last_use[i] = -1;
  /* a kernel slot uses the buffers of its kernel and of its variant (a flash attention reads, in P x V's
   * slot, the queries and keys that the scores kernel reads earlier) */
  for (int k = 0; k < p->lt->nkernels; k++)
    for (const LaunchKernel *kk = &p->lt->kernels[k]; kk; kk = kk == &p->lt->kernels[k] ? kk->alt : NULL)
      for (int a = 0; a < kk->nparams; a++) {
        int b = kk->params[a].buf;
        if (b < 0 || b >= lp->nbufs) continue;
        if (p->first_use[b] < 0 || p->first_use[b] > k) p->first_use[b] = k;
        if (p->last_use[b] < k) p->last_use[b] = k;
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
  const LaunchTable *lp = p->lt;
  size_t nb = (size_t)(lp->nbufs ? lp->nbufs : 1);
  int n = 0, *order = xmalloc(sizeof(int) * nb, "the memory planner");
  Span *busy = xmalloc(sizeof(Span) * nb, "the memory planner");
  for (int i = 0; i < lp->nbufs; i++)
    if (lp->bufs[i].kind == LB_TEMP && p->first_use[i] >= 0 && p->cap[i]) order[n++] = i;
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

int plan_place_temporaries(Plan *p, RunState *s, Diag *d) {
  const LaunchTable *lp = p->lt;
  if (!p->first_use && !compute_lifetimes(p)) {
    diag_error(d, 0, 0, "plan: out of memory");
    return 0;
  }
  int replan = 0;
  for (int i = 0; i < lp->nbufs; i++)
    if (!s->dev[i] && lp->bufs[i].kind == LB_TEMP && p->first_use[i] >= 0 && s->bytes[i] > p->cap[i]) {
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
    if (!s->dev[i] && lp->bufs[i].kind == LB_TEMP && p->first_use[i] >= 0 && p->cap[i]) {
      s->dev[i] = (char *)p->arena + p->offset[i]; /* empty temporaries get a buffer of their own below */
    }
  return 1;
}
