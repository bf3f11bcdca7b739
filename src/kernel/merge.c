/* Kernel stage, CUDA: consecutive independent elementwise kernels become one launch (a horizontal merge).
 *
 * Each such kernel costs a launch and its latency (4-7 us on an H200) for a few microseconds of work; in a
 * batched decode step RoPE of q, and the K and V cache scatters of a layer are three of them, each reading the
 * q/k/v projection and writing its own buffer. The merged kernel's grid is the members' grids one after the
 * other; block b runs the member whose range holds it, with the block index less that member's first block,
 * so each member computes exactly what it did alone. The first member's slot launches the merged kernel and
 * the others launch nothing (KKernel.skip), so the slots still match the tile stage's kernels.
 *
 * A member is a plain kernel (no variant, pre-pass, library form, scratch or tensor cores) whose statements
 * use no shared memory, barrier or warp shuffle and whose hardware indices are only the block and thread
 * index; all members have the same block size; no member writes a buffer another one reads or writes. */
#include <string.h>
#include "lower_internal.h"

#define MERGE_MAX 8 /* members of one merged kernel */

typedef struct Plain {
  int ok;
} Plain;

static void hw_check(void *ctx, const Expr *e) {
  Plain *p = ctx;
  if (e->op == X_HW && e->ival != HW_BLOCK && e->ival != HW_THREAD) p->ok = 0;
}

static void plain_stmt(Plain *p, const KStmt *s) {
  if (!s || !p->ok) return;
  if (s->kind == KS_SMEM || s->kind == KS_BARRIER || s->kind == KS_WARP_REDUCE || s->kind == KS_MMA ||
      s->kind == KS_FLASH || s->kind == KS_PARFOR) {
    p->ok = 0;
    return;
  }
  const Expr *es[4] = {s->lo, s->hi, s->step, s->cond};
  for (int i = 0; i < 4; i++)
    if (es[i]) ex_visit(es[i], hw_check, p);
  if (s->value) ex_visit(s->value, hw_check, p);
  for (int i = 0; i < s->nidx; i++) ex_visit(s->idx[i], hw_check, p);
  for (int i = 0; i < s->nbody; i++) plain_stmt(p, s->body[i]);
}

static int mergeable(const KKernel *kk) {
  if (kk->skip || kk->alt || kk->pre || kk->lib || kk->scratch || kk->tensor_cores || !kk->body || !kk->grid) return 0;
  Plain p = {1};
  plain_stmt(&p, kk->body);
  return p.ok;
}

static int param_at(const KKernel *kk, int buf) {
  for (int i = 0; i < kk->nparams; i++)
    if (kk->params[i].buf == buf) return i;
  return -1;
}

/* Whether a and b touch no buffer that either writes. */
static int independent(const KKernel *a, const KKernel *b) {
  for (int i = 0; i < a->nparams; i++) {
    int j = param_at(b, a->params[i].buf);
    if (j >= 0 && (a->params[i].is_output || b->params[j].is_output)) return 0;
  }
  return 1;
}

/* A member's statements renumbered into the merged kernel: temporaries and variables after the earlier
 * members', the block index counted from the member's first block. */
typedef struct Shift {
  ExprPool *P;
  int tmp, var;
  Expr *first_block;
} Shift;

static Expr *shift_expr_cb(void *ctx, ExprPool *P, Expr *e) {
  Shift *s = ctx;
  if (e->op == X_TMP) return ex_tmp(P, (int)e->ival + s->tmp, e->dtype);
  if (e->op == X_VAR) return ex_var(P, (int)e->ival + s->var);
  if (e->op == X_HW && e->ival == HW_BLOCK) return ex_bin(P, X_SUB, e, s->first_block);
  return e;
}

static Expr *shift_expr(Shift *s, Expr *e) { return e ? ex_rewrite(s->P, e, shift_expr_cb, s) : NULL; }

static KStmt *shift_stmt(Shift *s, Arena *a, const KStmt *src) {
  KStmt *t = ARENA_NEW(a, KStmt);
  *t = *src;
  if (src->kind == KS_FOR) t->var = src->var + s->var;
  if (src->kind == KS_DECL || src->kind == KS_ASSIGN || src->kind == KS_VLOAD || src->kind == KS_VSTORE ||
      src->kind == KS_VQDOT)
    t->tmp = src->tmp + s->tmp;
  if (src->kind == KS_VQDOT) t->xtmp = src->xtmp + s->tmp;
  t->lo = shift_expr(s, src->lo);
  t->hi = shift_expr(s, src->hi);
  t->step = shift_expr(s, src->step);
  t->cond = shift_expr(s, src->cond);
  t->value = shift_expr(s, src->value);
  for (int i = 0; i < src->nidx; i++) t->idx[i] = shift_expr(s, src->idx[i]);
  if (src->nbody) {
    t->body = ARENA_ARRAY(a, KStmt *, src->nbody);
    for (int i = 0; i < src->nbody; i++) t->body[i] = shift_stmt(s, a, src->body[i]);
  }
  return t;
}

static int has_name(const char *const *names, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], name)) return 1;
  return 0;
}

/* Kernels first .. first + n - 1 as one (see the top of the file); 0 where it does not fit one kernel. */
static int merge_group(KProgram *kp, int first, int n) {
  const LProgram *lp = kp->loop;
  ExprPool *P = lp->pool;
  Arena *a = lp->arena;
  KKernel *m = ARENA_NEW(a, KKernel);
  const KKernel *k0 = &kp->kernels[first];
  m->name = arena_printf(a, "%s_plus_%d", k0->name, n - 1);
  m->block = k0->block;
  m->sched = k0->sched;
  /* parameters: the union, an output where any member writes it; symbols in the program's order */
  for (int j = 0; j < n; j++) {
    const KKernel *kk = &kp->kernels[first + j];
    for (int i = 0; i < kk->nparams; i++) {
      int at = param_at(m, kk->params[i].buf);
      if (at >= 0) {
        m->params[at].is_output |= kk->params[i].is_output;
        continue;
      }
      if (m->nparams == K_MAX_PARAMS) return 0;
      m->params[m->nparams++] = kk->params[i];
    }
  }
  for (int i = 0; i < lp->nsymbols; i++)
    for (int j = 0; j < n; j++) {
      const KKernel *kk = &kp->kernels[first + j];
      if (!has_name(kk->syms, kk->nsyms, lp->symbols[i])) continue;
      if (m->nsyms == 16) return 0;
      m->syms[m->nsyms++] = lp->symbols[i];
      break;
    }
  for (int j = 0; j < n; j++) {
    const KKernel *kk = &kp->kernels[first + j];
    for (int i = 0; i < kk->nsyms; i++)
      if (!has_name(m->syms, m->nsyms, kk->syms[i])) return 0; /* a symbol the program does not name */
  }
  int ntmps = 0, nvars = 0;
  for (int j = 0; j < n; j++) ntmps += kp->kernels[first + j].ntmps, nvars += kp->kernels[first + j].nvars;
  if (ntmps > K_MAX_TMPS || nvars > L_MAX_VARS) return 0;
  /* the body: member j where its first block <= block < the next member's first */
  KStmt *body = ARENA_NEW(a, KStmt);
  body->kind = KS_SEQ;
  body->body = ARENA_ARRAY(a, KStmt *, n);
  Expr *at = ex_int(P, 0), *blk = ex_hw(P, HW_BLOCK);
  for (int j = 0; j < n; j++) {
    const KKernel *kk = &kp->kernels[first + j];
    Shift s = {P, m->ntmps, m->nvars, at};
    for (int i = 0; i < kk->ntmps; i++) {
      m->tmp_dtype[m->ntmps] = kk->tmp_dtype[i];
      m->tmp_names[m->ntmps++] = kk->tmp_names[i];
    }
    for (int i = 0; i < kk->nvars; i++) m->var_names[m->nvars++] = kk->var_names[i];
    Expr *next = ex_add(P, at, kk->grid);
    KStmt *when = ARENA_NEW(a, KStmt);
    when->kind = KS_IF;
    Expr *lo = ex_bin(P, X_LE, at, blk), *hi = ex_bin(P, X_LT, blk, next);
    when->cond = j == 0 ? hi : j == n - 1 ? lo : ex_bin(P, X_AND, lo, hi);
    when->body = ARENA_ARRAY(a, KStmt *, 1);
    when->body[0] = shift_stmt(&s, a, kk->body);
    when->nbody = 1;
    body->body[body->nbody++] = when;
    at = next;
  }
  m->body = body;
  m->grid = at;
  const char *name = m->name;
  kp->kernels[first] = *m;
  for (int j = 1; j < n; j++) {
    KKernel *kk = &kp->kernels[first + j];
    KKernel skip = {0};
    skip.name = kk->name;
    skip.skip = 1;
    skip.by = name;
    skip.grid = ex_int(P, 0);
    skip.block = 32;
    skip.sched = kk->sched;
    *kk = skip;
  }
  return 1;
}

int kl_merge_elementwise(KProgram *kp) {
  if (kp->target != TARGET_CUDA) return 0;
  int merged = 0;
  for (int i = 0; i < kp->nkernels;) {
    int n = 0;
    while (i + n < kp->nkernels && n < MERGE_MAX && mergeable(&kp->kernels[i + n]) &&
           kp->kernels[i + n].block == kp->kernels[i].block) {
      int free_of_all = 1;
      for (int j = 0; j < n && free_of_all; j++) free_of_all = independent(&kp->kernels[i + j], &kp->kernels[i + n]);
      if (!free_of_all) break;
      n++;
    }
    if (n >= 2 && merge_group(kp, i, n)) {
      merged++;
      i += n;
    } else {
      i += n > 0 ? n : 1;
    }
  }
  return merged;
}
