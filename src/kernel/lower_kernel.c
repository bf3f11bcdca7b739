/* Tile -> kernel stage: turns one loop nest plus its Schedule into a statement tree of hardware
 * primitives. Every domain (parallel axes, a phase's reduction axes, the inner axes) is iterated as
 * one flattened index whose last axis varies fastest, so neighbouring threads touch neighbouring
 * elements; the axis variables are recovered from it with / and %. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "kernel.h"

typedef struct Lower {
  const LProgram *lp;
  const LKernel *k;
  Schedule s;
  Target target;
  ExprPool *pool;
  Arena *arena;
  KKernel *kk;
  Diag *d;
  Expr *var_map[L_MAX_VARS];   /* X_VAR id -> replacement (NULL: keep) */
  Expr *acc_map[L_MAX_PHASES]; /* X_ACC id -> X_TMP of its accumulator */
  KStmt *smem_decls;           /* KS_SMEM statements, placed first in the kernel body */
  int nsmem;
  int failed;
} Lower;

/* ---- statements ---- */

static KStmt *st_new(Lower *L, KStmtKind kind) {
  KStmt *s = ARENA_NEW(L->arena, KStmt);
  s->kind = kind;
  return s;
}

/* Appends to a KS_SEQ/FOR/PARFOR/IF body; capacity doubles at powers of two (no cap field needed). */
static void st_add(Lower *L, KStmt *parent, KStmt *child) {
  int n = parent->nbody;
  if (n == 0 || (n >= 4 && (n & (n - 1)) == 0)) {
    KStmt **nb = ARENA_ARRAY(L->arena, KStmt *, n < 4 ? 4 : 2 * n);
    for (int i = 0; i < n; i++) nb[i] = parent->body[i];
    parent->body = nb;
  }
  parent->body[parent->nbody++] = child;
}

static KStmt *st_for(Lower *L, KStmt *parent, int var, Expr *lo, Expr *hi, Expr *step) {
  KStmt *s = st_new(L, KS_FOR);
  s->var = var;
  s->lo = lo;
  s->hi = hi;
  s->step = step;
  st_add(L, parent, s);
  return s;
}

static KStmt *st_if(Lower *L, KStmt *parent, Expr *cond) {
  KStmt *s = st_new(L, KS_IF);
  s->cond = cond;
  st_add(L, parent, s);
  return s;
}

static void st_assign(Lower *L, KStmt *parent, int tmp, Expr *value) {
  KStmt *s = st_new(L, KS_ASSIGN);
  s->tmp = tmp;
  s->value = value;
  st_add(L, parent, s);
}

static void st_barrier(Lower *L, KStmt *parent) { st_add(L, parent, st_new(L, KS_BARRIER)); }

static void st_warp_reduce(Lower *L, KStmt *parent, int tmp, ReduceOp op) {
  KStmt *s = st_new(L, KS_WARP_REDUCE);
  s->tmp = tmp;
  s->rop = op;
  st_add(L, parent, s);
}

static void st_store_shared(Lower *L, KStmt *parent, int buf, Expr *idx, Expr *value) {
  KStmt *s = st_new(L, KS_STORE);
  s->buf = buf;
  s->space = MEM_SHARED;
  s->nidx = 1;
  s->idx[0] = idx;
  s->value = value;
  st_add(L, parent, s);
}

/* ---- variables and temporaries ---- */

static int new_var(Lower *L, const char *name) {
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
static Expr *decl_tmp(Lower *L, KStmt *parent, DType t, const char *name, Expr *value, int *id_out) {
  KKernel *kk = L->kk;
  if (kk->ntmps >= K_MAX_TMPS) {
    if (!L->failed) diag_error(L->d, 0, 0, "kernel %s: more than %d temporaries", kk->name, K_MAX_TMPS);
    L->failed = 1;
    return value;
  }
  int id = kk->ntmps++;
  kk->tmp_dtype[id] = t;
  kk->tmp_names[id] = name;
  KStmt *s = st_new(L, KS_DECL);
  s->tmp = id;
  s->dtype = t;
  s->value = t == value->dtype ? value : ex_cast(L->pool, t, value);
  st_add(L, parent, s);
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
      if (!L->failed) diag_error(L->d, 0, 0, "kernel %s: acc%lld is used before its phase", L->kk->name, (long long)e->ival);
      L->failed = 1;
      return e;
    }
    return t->dtype == e->dtype ? t : ex_cast(p, e->dtype, t);
  }
  if (e->op == X_ARG) {
    if (!L->failed) diag_error(L->d, 0, 0, "kernel %s: tensor-stage argument a%lld in a loop body", L->kk->name, (long long)e->ival);
    L->failed = 1;
  }
  return e;
}

static Expr *subst(Lower *L, Expr *e) { return ex_rewrite(L->pool, e, subst_fn, L); }

static Expr *domain_size(Lower *L, const LAxis *axes, int n) {
  Expr *sz = ex_int(L->pool, 1);
  for (int i = 0; i < n; i++) sz = ex_mul(L->pool, sz, axes[i].extent);
  return sz;
}

static Expr *identity(Lower *L, ReduceOp op, DType t) {
  int is_float = dtype_is_float(t);
  switch (op) {
  case RED_MAX: return is_float ? ex_const(L->pool, t, -INFINITY) : ex_int(L->pool, INT64_MIN);
  case RED_MIN: return is_float ? ex_const(L->pool, t, INFINITY) : ex_int(L->pool, INT64_MAX);
  default: return ex_const(L->pool, t, 0);
  }
}

static Expr *combine(Lower *L, ReduceOp op, Expr *acc, Expr *v) {
  ExprOp x = op == RED_MAX ? X_MAX : op == RED_MIN ? X_MIN : X_ADD;
  return ex_cast(L->pool, acc->dtype, ex_bin(L->pool, x, acc, ex_cast(L->pool, acc->dtype, v)));
}

/* Maps the axis variables to their values at flat index `f` (last axis fastest). */
static void bind_axes(Lower *L, KStmt *parent, const LAxis *axes, int n, Expr *f) {
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
    L->var_map[axes[i].var] = ex_is_const(v) ? v : decl_tmp(L, parent, DT_I64, name ? name : "ax", v, NULL);
  }
}

/* A loop over the flattened domain of `axes`: flat indices start, start+stride, ... (each step taking
 * `vec` consecutive elements). Binds the axis variables and returns the statement to put the body in. */
static KStmt *domain_loop(Lower *L, KStmt *parent, const LAxis *axes, int n, Expr *start, Expr *stride) {
  ExprPool *P = L->pool;
  Expr *size = domain_size(L, axes, n);
  int vec = L->s.vec > 1 ? L->s.vec : 1;
  Expr *one = ex_int(P, 1);
  if (vec == 1) {
    int var = n == 1 ? axes[0].var : new_var(L, "f");
    KStmt *loop = st_for(L, parent, var, start, size, stride);
    if (n != 1) bind_axes(L, loop, axes, n, ex_var(P, var));
    else L->var_map[var] = NULL; /* the loop variable is the axis itself */
    return loop;
  }
  Expr *v_ext = ex_int(P, vec);
  int base = new_var(L, "b"), lane = new_var(L, "v");
  KStmt *outer = st_for(L, parent, base, ex_mul(P, start, v_ext), size, ex_mul(P, stride, v_ext));
  KStmt *inner = st_for(L, outer, lane, ex_int(P, 0), v_ext, one);
  Expr *f = ex_add(P, ex_var(P, base), ex_var(P, lane));
  KStmt *body = inner;
  /* base is a multiple of vec below size, so only a size that vec may not divide needs a guard. */
  if (!(size->op == X_CONST && size->ival % vec == 0)) body = st_if(L, inner, ex_bin(P, X_LT, f, size));
  bind_axes(L, body, axes, n, f);
  return body;
}

/* First flat index and stride of this thread in a cooperative (reduction / inner) loop. */
static void coop_start(Lower *L, Expr **start, Expr **stride) {
  ExprPool *P = L->pool;
  switch (L->target == TARGET_CUDA ? L->s.red : RS_SERIAL) {
  case RS_WARP: *start = ex_hw(P, HW_LANE); *stride = ex_int(P, 32); break;
  case RS_BLOCK: *start = ex_hw(P, HW_THREAD); *stride = ex_int(P, L->s.block_threads); break;
  default: *start = ex_int(P, 0); *stride = ex_int(P, 1); break;
  }
}

/* Block-wide all-reduce of `acc` after each warp reduced its own lanes: partials through shared memory. */
static void block_reduce(Lower *L, KStmt *seq, int acc_id, Expr *acc, ReduceOp op) {
  ExprPool *P = L->pool;
  int nw = L->s.block_threads / 32;
  if (nw <= 1) return;
  int sm = L->nsmem++;
  KStmt *decl = st_new(L, KS_SMEM);
  decl->buf = sm;
  decl->dtype = acc->dtype;
  decl->count = nw + 1; /* nw partials, then the broadcast slot */
  st_add(L, L->smem_decls, decl);
  Expr *lane = ex_hw(P, HW_LANE), *warp = ex_hw(P, HW_WARP), *zero = ex_int(P, 0);
  Expr *bslot = ex_int(P, nw);
  st_store_shared(L, st_if(L, seq, ex_bin(P, X_EQ, lane, zero)), sm, warp, acc);
  st_barrier(L, seq);
  KStmt *w0 = st_if(L, seq, ex_bin(P, X_EQ, warp, zero));
  Expr *part = ex_load(P, sm, acc->dtype, 1, &lane, MEM_SHARED);
  st_assign(L, w0, acc_id, ex_select(P, ex_bin(P, X_LT, lane, bslot), part, identity(L, op, acc->dtype)));
  st_warp_reduce(L, w0, acc_id, op);
  st_store_shared(L, st_if(L, w0, ex_bin(P, X_EQ, lane, zero)), sm, bslot, acc);
  st_barrier(L, seq);
  /* Each phase has its own buffer, so no later phase overwrites one still being read. */
  st_assign(L, seq, acc_id, ex_load(P, sm, acc->dtype, 1, &bslot, MEM_SHARED));
}

static void emit_phase(Lower *L, KStmt *seq, const LPhase *ph, int index) {
  int acc_id = -1;
  const char *name = arena_printf(L->arena, "acc%d", index);
  Expr *acc = decl_tmp(L, seq, ph->acc_dtype, name, identity(L, ph->op, ph->acc_dtype), &acc_id);
  if (acc_id < 0) return;
  Expr *start, *stride;
  coop_start(L, &start, &stride);
  KStmt *body = domain_loop(L, seq, ph->axes, ph->naxes, start, stride);
  st_assign(L, body, acc_id, combine(L, ph->op, acc, subst(L, ph->body)));
  if (L->target == TARGET_CUDA && L->s.red != RS_SERIAL) {
    st_warp_reduce(L, seq, acc_id, ph->op);
    if (L->s.red == RS_BLOCK) block_reduce(L, seq, acc_id, acc, ph->op);
  }
  L->acc_map[ph->id] = acc;
}

static void emit_store(Lower *L, KStmt *seq) {
  const LKernel *k = L->k;
  const LBuf *out = &L->lp->bufs[k->out_buf];
  KStmt *s = st_new(L, KS_STORE);
  s->buf = k->out_buf;
  s->space = MEM_GLOBAL;
  s->nidx = out->shape.rank;
  for (int i = 0; i < s->nidx; i++) s->idx[i] = subst(L, k->out_idx[i]);
  Expr *v = subst(L, k->value);
  s->value = v->dtype == out->dtype ? v : ex_cast(L->pool, out->dtype, v);
  st_add(L, seq, s);
}

static void emit_inner(Lower *L, KStmt *seq) {
  const LKernel *k = L->k;
  ExprPool *P = L->pool;
  if (k->ninner > 0) {
    Expr *start, *stride;
    coop_start(L, &start, &stride);
    emit_store(L, domain_loop(L, seq, k->inner, k->ninner, start, stride));
    return;
  }
  /* One value per point: one thread of the cooperating group writes it. */
  if (L->target == TARGET_CUDA && L->s.red == RS_WARP)
    seq = st_if(L, seq, ex_bin(P, X_EQ, ex_hw(P, HW_LANE), ex_int(P, 0)));
  else if (L->target == TARGET_CUDA && L->s.red == RS_BLOCK)
    seq = st_if(L, seq, ex_bin(P, X_EQ, ex_hw(P, HW_THREAD), ex_int(P, 0)));
  emit_store(L, seq);
}

/* The per-point work: par variables from p, phases, inner loop with the store. */
static void emit_point(Lower *L, KStmt *seq, Expr *p) {
  const LKernel *k = L->k;
  if (k->npar > 0) {
    /* Par variables are always temporaries (even for one axis) so the body sees one name. */
    if (k->npar == 1) {
      const char *nm = k->var_names[k->par[0].var];
      L->var_map[k->par[0].var] = decl_tmp(L, seq, DT_I64, nm ? nm : "i", p, NULL);
    } else {
      bind_axes(L, seq, k->par, k->npar, p);
    }
  }
  for (int i = 0; i < k->nphase && !L->failed; i++) emit_phase(L, seq, &k->phases[i], i);
  if (!L->failed) emit_inner(L, seq);
}

static int check_schedule(Lower *L) {
  const Schedule *s = &L->s;
  if (s->vec != 0 && s->vec != 1 && s->vec != 2 && s->vec != 4 && s->vec != 8) {
    diag_error(L->d, 0, 0, "kernel %s: vector width %d is not 1, 2, 4 or 8", L->k->name, s->vec);
    return 0;
  }
  if (L->target != TARGET_CUDA) return 1;
  if (s->block_threads < 32 || s->block_threads > 1024 || s->block_threads % 32) {
    diag_error(L->d, 0, 0, "kernel %s: %d threads per block is not a multiple of 32 in [32, 1024]", L->k->name,
               s->block_threads);
    return 0;
  }
  return 1;
}

static void lower_body(Lower *L) {
  ExprPool *P = L->pool;
  const LKernel *k = L->k;
  KKernel *kk = L->kk;
  KStmt *root = st_new(L, KS_SEQ);
  L->smem_decls = st_new(L, KS_SEQ);
  st_add(L, root, L->smem_decls);
  Expr *npoints = domain_size(L, k->par, k->npar);
  int B = L->s.block_threads;
  if (L->target == TARGET_CPU) {
    int pv = new_var(L, "p");
    KStmt *loop = st_new(L, L->s.omp ? KS_PARFOR : KS_FOR);
    loop->var = pv;
    loop->lo = ex_int(P, 0);
    loop->hi = npoints;
    loop->step = ex_int(P, 1);
    st_add(L, root, loop);
    emit_point(L, loop, ex_var(P, pv));
    kk->grid = ex_int(P, 1);
    kk->block = 1;
  } else if (L->s.red == RS_BLOCK) {
    Expr *p = decl_tmp(L, root, DT_I64, "p", ex_hw(P, HW_BLOCK), NULL);
    emit_point(L, root, p);
    kk->grid = npoints;
    kk->block = B;
  } else {
    int per_block = L->s.red == RS_WARP ? B / 32 : B;
    Expr *who = L->s.red == RS_WARP ? ex_hw(P, HW_WARP) : ex_hw(P, HW_THREAD);
    Expr *p = decl_tmp(L, root, DT_I64, "p", ex_add(P, ex_mul(P, ex_hw(P, HW_BLOCK), ex_int(P, per_block)), who), NULL);
    KStmt *guard = st_if(L, root, ex_bin(P, X_LT, p, npoints));
    emit_point(L, guard, p);
    kk->grid = ex_bin(P, X_IDIV, ex_add(P, npoints, ex_int(P, per_block - 1)), ex_int(P, per_block));
    kk->block = B;
  }
  kk->body = root;
}

/* ---- parameters: output first, then buffers read, by first use ---- */

typedef struct Collect {
  KKernel *kk;
  const LProgram *lp;
  const char *syms[64];
  int nsyms;
  Diag *d;
  int failed;
} Collect;

static void add_param(Collect *c, int buf, int is_output) {
  KKernel *kk = c->kk;
  for (int i = 0; i < kk->nparams; i++)
    if (kk->params[i].buf == buf) return;
  if (kk->nparams >= K_MAX_PARAMS) {
    if (!c->failed) diag_error(c->d, 0, 0, "kernel %s: more than %d buffer parameters", kk->name, K_MAX_PARAMS);
    c->failed = 1;
    return;
  }
  kk->params[kk->nparams].buf = buf;
  kk->params[kk->nparams++].is_output = is_output;
}

static void add_sym(Collect *c, const char *name) {
  for (int i = 0; i < c->nsyms; i++)
    if (!strcmp(c->syms[i], name)) return;
  if (c->nsyms < 64) c->syms[c->nsyms++] = name;
}

static void collect_node(void *ctx, const Expr *e) {
  Collect *c = ctx;
  if (e->op == X_LOAD && e->aux == MEM_GLOBAL) add_param(c, (int)e->ival, 0);
  if (e->op == X_SYM) add_sym(c, e->name);
}

static void collect_expr(Collect *c, const Expr *e) {
  if (e) ex_visit(e, collect_node, c);
}

static void collect_stmt(Collect *c, const KStmt *s) {
  collect_expr(c, s->lo);
  collect_expr(c, s->hi);
  collect_expr(c, s->step);
  collect_expr(c, s->cond);
  for (int i = 0; i < s->nidx; i++) collect_expr(c, s->idx[i]);
  collect_expr(c, s->value);
  for (int i = 0; i < s->nbody; i++) collect_stmt(c, s->body[i]);
}

static void collect_params(KKernel *kk, const LProgram *lp, int out_buf, Diag *d, int *failed) {
  Collect c = {kk, lp, {0}, 0, d, 0};
  add_param(&c, out_buf, 1);
  collect_stmt(&c, kk->body);
  collect_expr(&c, kk->grid);
  for (int i = 0; i < kk->nparams; i++) {
    const Shape *sh = &lp->bufs[kk->params[i].buf].shape;
    for (int j = 0; j < sh->rank; j++) collect_expr(&c, sh->dim[j]);
  }
  /* Program symbol order first, so every kernel of a program passes symbols alike. */
  kk->nsyms = 0;
  for (int i = 0; i < lp->nsymbols; i++)
    for (int j = 0; j < c.nsyms; j++)
      if (c.syms[j] && !strcmp(c.syms[j], lp->symbols[i])) {
        if (kk->nsyms < 16) kk->syms[kk->nsyms++] = lp->symbols[i];
        c.syms[j] = NULL;
      }
  for (int j = 0; j < c.nsyms; j++)
    if (c.syms[j] && kk->nsyms < 16) kk->syms[kk->nsyms++] = c.syms[j];
  if (c.nsyms > 16 && !c.failed) {
    diag_error(d, 0, 0, "kernel %s: more than 16 symbols", kk->name);
    c.failed = 1;
  }
  *failed |= c.failed;
}

static int lower_kernel(const TileProgram *tp, const LKernel *k, Schedule s, KKernel *kk, Diag *d) {
  const LProgram *lp = tp->loop;
  Lower L = {0};
  L.lp = lp;
  L.k = k;
  L.s = s;
  L.target = tp->target;
  L.pool = lp->pool;
  L.arena = lp->arena;
  L.kk = kk;
  L.d = d;
  if (!check_schedule(&L)) return 0;
  if (L.s.vec < 1) L.s.vec = 1;
  if (k->out_buf < 0 || k->out_buf >= lp->nbufs) {
    diag_error(d, 0, 0, "kernel %s: output buffer %d does not exist", k->name, k->out_buf);
    return 0;
  }
  if (k->nvars > L_MAX_VARS) {
    diag_error(d, 0, 0, "kernel %s: %d loop variables (at most %d)", k->name, k->nvars, L_MAX_VARS);
    return 0;
  }
  kk->name = k->name;
  kk->sched = L.s;
  kk->nvars = k->nvars;
  for (int i = 0; i < k->nvars; i++) kk->var_names[i] = k->var_names[i] ? k->var_names[i] : arena_printf(lp->arena, "x%d", i);
  lower_body(&L);
  if (L.failed) return 0;
  collect_params(kk, lp, k->out_buf, d, &L.failed);
  return !L.failed;
}

KProgram *kernel_from_tile(const TileProgram *tp, Diag *d) {
  const LProgram *lp = tp->loop;
  KProgram *kp = ARENA_NEW(lp->arena, KProgram);
  kp->loop = lp;
  kp->target = tp->target;
  kp->nkernels = tp->nkernels;
  kp->kernels = ARENA_ARRAY(lp->arena, KKernel, tp->nkernels > 0 ? tp->nkernels : 1);
  for (int i = 0; i < tp->nkernels; i++) {
    const LKernel *k = tp->kernels[i].k ? tp->kernels[i].k : &lp->kernels[i];
    if (!lower_kernel(tp, k, tp->kernels[i].s, &kp->kernels[i], d)) return NULL;
  }
  return kp;
}
