/* Kernel-stage lowering helpers: statements, loop variables, temporaries, substitution, flattened
 * domain loops and the cooperative (warp / block) reductions. */
#include <math.h>
#include <stdint.h>
#include "lower_internal.h"

/* ---- statements ---- */

KStmt *kl_st_new(Lower *L, KStmtKind kind) {
  KStmt *s = ARENA_NEW(L->arena, KStmt);
  s->kind = kind;
  return s;
}

/* Appends to a KS_SEQ/FOR/PARFOR/IF body; capacity doubles at powers of two (no cap field needed). */
void kl_st_add(Lower *L, KStmt *parent, KStmt *child) {
  int n = parent->nbody;
  if (n == 0 || (n >= 4 && (n & (n - 1)) == 0)) {
    KStmt **nb = ARENA_ARRAY(L->arena, KStmt *, n < 4 ? 4 : 2 * n);
    for (int i = 0; i < n; i++) nb[i] = parent->body[i];
    parent->body = nb;
  }
  parent->body[parent->nbody++] = child;
}

KStmt *kl_st_for(Lower *L, KStmt *parent, int var, Expr *lo, Expr *hi, Expr *step) {
  KStmt *s = kl_st_new(L, KS_FOR);
  s->var = var;
  s->lo = lo;
  s->hi = hi;
  s->step = step;
  kl_st_add(L, parent, s);
  return s;
}

KStmt *kl_st_if(Lower *L, KStmt *parent, Expr *cond) {
  KStmt *s = kl_st_new(L, KS_IF);
  s->cond = cond;
  kl_st_add(L, parent, s);
  return s;
}

void kl_st_assign(Lower *L, KStmt *parent, int tmp, Expr *value) {
  KStmt *s = kl_st_new(L, KS_ASSIGN);
  s->tmp = tmp;
  s->value = value;
  kl_st_add(L, parent, s);
}

void kl_st_barrier(Lower *L, KStmt *parent) { kl_st_add(L, parent, kl_st_new(L, KS_BARRIER)); }

void kl_st_warp_reduce(Lower *L, KStmt *parent, int tmp, ReduceOp op) {
  KStmt *s = kl_st_new(L, KS_WARP_REDUCE);
  s->tmp = tmp;
  s->rop = op;
  kl_st_add(L, parent, s);
}

void kl_st_store_shared(Lower *L, KStmt *parent, int buf, Expr *idx, Expr *value) {
  KStmt *s = kl_st_new(L, KS_STORE);
  s->buf = buf;
  s->space = MEM_SHARED;
  s->nidx = 1;
  s->idx[0] = idx;
  s->value = value;
  kl_st_add(L, parent, s);
}

/* ---- variables and temporaries ---- */

int kl_new_var(Lower *L, const char *name) {
  KKernel *kk = L->kk;
  if (kk->nvars >= L_MAX_VARS) {
    if (!L->failed) diag_error(L->d, 0, 0, "kernel %s: more than %d loop variables", kk->name, L_MAX_VARS);
    L->failed = 1;
    return kk->nvars - 1;
  }
  kk->var_names[kk->nvars] = arena_printf(L->arena, "%s%d", name, kk->nvars);
  return kk->nvars++;
}

/* Declares a temporary initialised to `value` in `parent`; returns its X_TMP. */
Expr *kl_decl_tmp(Lower *L, KStmt *parent, DType t, const char *name, Expr *value, int *id_out) {
  KKernel *kk = L->kk;
  if (kk->ntmps >= K_MAX_TMPS) {
    if (!L->failed) diag_error(L->d, 0, 0, "kernel %s: more than %d temporaries", kk->name, K_MAX_TMPS);
    L->failed = 1;
    return value;
  }
  int id = kk->ntmps++;
  kk->tmp_dtype[id] = t;
  kk->tmp_names[id] = name;
  KStmt *s = kl_st_new(L, KS_DECL);
  s->tmp = id;
  s->dtype = t;
  s->value = t == value->dtype ? value : ex_cast(L->pool, t, value);
  kl_st_add(L, parent, s);
  if (id_out) *id_out = id;
  return ex_tmp(L->pool, id, t);
}

/* ---- expressions ---- */

static Expr *subst_fn(void *ctx, ExprPool *p, Expr *e) {
  Lower *L = ctx;
  if (e->op == X_VAR && e->ival >= 0 && e->ival < L_MAX_VARS && L->var_map[e->ival]) return L->var_map[e->ival];
  if (e->op == X_ACC) {
    Expr *t = e->ival >= 0 && e->ival < L_MAX_PHASES ? L->acc_map[e->ival] : NULL;
    if (!t) {
      if (!L->failed)
        diag_error(L->d, 0, 0, "kernel %s: acc%lld is used before its phase", L->kk->name, (long long)e->ival);
      L->failed = 1;
      return e;
    }
    return t->dtype == e->dtype ? t : ex_cast(p, e->dtype, t);
  }
  if (e->op == X_ARG) {
    if (!L->failed)
      diag_error(L->d, 0, 0, "kernel %s: tensor-stage argument a%lld in a loop body", L->kk->name, (long long)e->ival);
    L->failed = 1;
  }
  return e;
}

Expr *kl_subst(Lower *L, Expr *e) { return ex_rewrite(L->pool, e, subst_fn, L); }

Expr *kl_domain_size(Lower *L, const LAxis *axes, int n) {
  Expr *sz = ex_int(L->pool, 1);
  for (int i = 0; i < n; i++) sz = ex_mul(L->pool, sz, axes[i].extent);
  return sz;
}

Expr *kl_identity(Lower *L, ReduceOp op, DType t) {
  int is_float = dtype_is_float(t);
  switch (op) {
  case RED_MAX: return is_float ? ex_const(L->pool, t, -INFINITY) : ex_int(L->pool, INT64_MIN);
  case RED_MIN: return is_float ? ex_const(L->pool, t, INFINITY) : ex_int(L->pool, INT64_MAX);
  default: return ex_const(L->pool, t, 0);
  }
}

Expr *kl_combine(Lower *L, ReduceOp op, Expr *acc, Expr *v) {
  ExprOp x = op == RED_MAX ? X_MAX : op == RED_MIN ? X_MIN : X_ADD;
  return ex_cast(L->pool, acc->dtype, ex_bin(L->pool, x, acc, ex_cast(L->pool, acc->dtype, v)));
}

/* Maps the axis variables to their values at flat index `f` (last axis fastest). */
void kl_bind_axes(Lower *L, KStmt *parent, const LAxis *axes, int n, Expr *f) {
  ExprPool *P = L->pool;
  if (n == 1) {
    L->var_map[axes[0].var] = f;
    return;
  }
  Expr *stride = ex_int(P, 1);
  for (int i = n - 1; i >= 0; i--) {
    Expr *v = f;
    if (i < n - 1) v = ex_bin(P, X_IDIV, v, stride);
    if (i > 0) v = ex_bin(P, X_MOD, v, axes[i].extent);
    if (ex_is_int_const(axes[i].extent, 1)) v = ex_int(P, 0);
    stride = ex_mul(P, stride, axes[i].extent);
    const char *name = L->k->var_names[axes[i].var];
    L->var_map[axes[i].var] = ex_is_const(v) ? v : kl_decl_tmp(L, parent, DT_I64, name ? name : "ax", v, NULL);
  }
}

/* A loop over the flattened domain of `axes`: flat indices start, start+stride, ... (each step taking
 * `vec` consecutive elements). Binds the axis variables and returns the statement to put the body in. */
KStmt *kl_domain_loop(Lower *L, KStmt *parent, const LAxis *axes, int n, Expr *start, Expr *stride, int vec) {
  ExprPool *P = L->pool;
  Expr *size = kl_domain_size(L, axes, n);
  if (vec < 1) vec = 1;
  Expr *one = ex_int(P, 1);
  if (vec == 1) {
    int var = n == 1 ? axes[0].var : kl_new_var(L, "f");
    KStmt *loop = kl_st_for(L, parent, var, start, size, stride);
    if (n != 1) kl_bind_axes(L, loop, axes, n, ex_var(P, var));
    else L->var_map[var] = NULL; /* the loop variable is the axis itself */
    return loop;
  }
  Expr *v_ext = ex_int(P, vec);
  int base = kl_new_var(L, "b"), lane = kl_new_var(L, "v");
  KStmt *outer = kl_st_for(L, parent, base, ex_mul(P, start, v_ext), size, ex_mul(P, stride, v_ext));
  KStmt *inner = kl_st_for(L, outer, lane, ex_int(P, 0), v_ext, one);
  Expr *f = ex_add(P, ex_var(P, base), ex_var(P, lane));
  KStmt *body = inner;
  /* base is a multiple of vec below size, so only a size that vec may not divide needs a guard. */
  if (!(size->op == X_CONST && size->ival % vec == 0)) body = kl_st_if(L, inner, ex_bin(P, X_LT, f, size));
  kl_bind_axes(L, body, axes, n, f);
  return body;
}

/* First flat index and stride of this thread in a cooperative (reduction / inner) loop. */
void kl_coop_start(Lower *L, Expr **start, Expr **stride) {
  ExprPool *P = L->pool;
  switch (L->target == TARGET_CUDA ? L->s.red : RS_SERIAL) {
  case RS_WARP:
    *start = ex_hw(P, HW_LANE);
    *stride = ex_int(P, L->dev->warp_size);
    break;
  case RS_BLOCK:
    *start = ex_hw(P, HW_THREAD);
    *stride = ex_int(P, L->s.block_threads);
    break;
  default:
    *start = ex_int(P, 0);
    *stride = ex_int(P, 1);
    break;
  }
}

/* Block-wide all-reduce of `acc` after each warp reduced its own lanes: partials through shared memory. */
void kl_block_reduce(Lower *L, KStmt *seq, int acc_id, Expr *acc, ReduceOp op) {
  ExprPool *P = L->pool;
  int nw = L->s.block_threads / L->dev->warp_size;
  if (nw <= 1) return;
  int sm = L->nsmem++;
  KStmt *decl = kl_st_new(L, KS_SMEM);
  decl->buf = sm;
  decl->dtype = acc->dtype;
  decl->count = nw + 1; /* nw partials, then the broadcast slot */
  kl_st_add(L, L->smem_decls, decl);
  Expr *lane = ex_hw(P, HW_LANE), *warp = ex_hw(P, HW_WARP), *zero = ex_int(P, 0);
  Expr *bslot = ex_int(P, nw);
  kl_st_store_shared(L, kl_st_if(L, seq, ex_bin(P, X_EQ, lane, zero)), sm, warp, acc);
  kl_st_barrier(L, seq);
  KStmt *w0 = kl_st_if(L, seq, ex_bin(P, X_EQ, warp, zero));
  Expr *part = ex_load(P, sm, acc->dtype, 1, &lane, MEM_SHARED);
  kl_st_assign(L, w0, acc_id, ex_select(P, ex_bin(P, X_LT, lane, bslot), part, kl_identity(L, op, acc->dtype)));
  kl_st_warp_reduce(L, w0, acc_id, op);
  kl_st_store_shared(L, kl_st_if(L, w0, ex_bin(P, X_EQ, lane, zero)), sm, bslot, acc);
  kl_st_barrier(L, seq);
  /* Each phase has its own buffer, so no later phase overwrites one still being read. */
  kl_st_assign(L, seq, acc_id, ex_load(P, sm, acc->dtype, 1, &bslot, MEM_SHARED));
}
