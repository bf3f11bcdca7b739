/* Tile -> kernel stage: turns one loop nest plus its Schedule into a statement tree of hardware
 * primitives. Every domain (parallel axes, a phase's reduction axes, the inner axes) is iterated as
 * one flattened index whose last axis varies fastest, so neighbouring threads touch neighbouring
 * elements; the axis variables are recovered from it with / and %. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "lower_internal.h"

KStmt *kl_output_store(Lower *L) {
  const LKernel *k = L->k;
  const LBuf *out = &L->lp->bufs[k->out_buf];
  KStmt *s = kl_st_new(L, KS_STORE);
  s->buf = k->out_buf;
  s->space = MEM_GLOBAL;
  s->nidx = out->shape.rank;
  for (int i = 0; i < s->nidx; i++) s->idx[i] = kl_subst(L, k->out_idx[i]);
  Expr *v = kl_subst(L, k->value);
  s->value = v->dtype == out->dtype ? v : ex_cast(L->pool, out->dtype, v);
  if (!k->out_valid) return s;
  KStmt *guard = kl_st_new(L, KS_IF);
  guard->cond = kl_subst(L, k->out_valid);
  kl_st_add(L, guard, s);
  return guard;
}

static void emit_store(Lower *L, KStmt *seq) { kl_st_add(L, seq, kl_output_store(L)); }

static void emit_inner(Lower *L, KStmt *seq) {
  const LKernel *k = L->k;
  ExprPool *P = L->pool;
  if (k->ninner > 0) {
    if (kl_emit_inner_vec(L, seq)) return;
    Expr *start, *stride;
    kl_coop_start(L, &start, &stride);
    emit_store(L, kl_domain_loop(L, seq, k->inner, k->ninner, start, stride, kl_loop_vec(L)));
    return;
  }
  /* One value per point: one thread of the cooperating group writes it. */
  if (L->target == TARGET_CUDA && L->s.red == RS_WARP)
    seq = kl_st_if(L, seq, ex_bin(P, X_EQ, ex_hw(P, HW_LANE), ex_int(P, 0)));
  else if (L->target == TARGET_CUDA && L->s.red == RS_BLOCK)
    seq = kl_st_if(L, seq, ex_bin(P, X_EQ, ex_hw(P, HW_THREAD), ex_int(P, 0)));
  emit_store(L, seq);
}

/* The parallel axes as the points enumerate them: with register blocking, the blocked axis counts
 * blocks of `rows`. On the CPU the blocked axis also varies fastest, so a thread (a contiguous range
 * of points under OpenMP's static schedule) computes every block of rows of one output column before
 * the next: the weight row that column streams is read from memory once per step and from L1 after.
 * Where the sums take a tile of the 8 rows quantized to int16 (kl_quant_tiled), it varies slowest
 * instead: the tile, quantized once per thread and block, stays in L1 while every weight row passes. */
static void point_axes(const Lower *L, LAxis *par) {
  const LKernel *k = L->k;
  for (int i = 0; i < k->npar; i++) par[i] = k->par[i];
  int a = L->s.row_axis;
  if (L->s.rows > 1 && a >= 0 && a < k->npar) {
    Expr *e = k->par[a].extent, *r = ex_int(L->pool, L->s.rows);
    par[a].extent = ex_bin(L->pool, X_IDIV, ex_add(L->pool, e, ex_int(L->pool, L->s.rows - 1)), r);
    if (L->target == TARGET_CPU && kl_quant_tiled(L)) {
      LAxis blocked = par[a];
      for (int i = a; i > 0; i--) par[i] = par[i - 1];
      par[0] = blocked;
    } else if (L->target == TARGET_CPU) {
      LAxis blocked = par[a];
      for (int i = a; i + 1 < k->npar; i++) par[i] = par[i + 1];
      par[k->npar - 1] = blocked;
    }
  }
}

/* The n axes' variables from the flat index p, always as temporaries (even for one axis), so the body sees one name */
static void bind_point_vars(Lower *L, KStmt *seq, const LAxis *axes, int n, Expr *p) {
  if (n == 1) {
    const char *nm = L->k->var_names[axes[0].var];
    L->var_map[axes[0].var] = kl_decl_tmp(L, seq, DT_I64, nm ? nm : "i", p, NULL);
  } else {
    kl_bind_axes(L, seq, axes, n, p);
  }
}

/* The per-point work: par variables from p (or, where `last` is given, the last from it and the others bound
 * by the caller), phases, inner loop with the store. With register blocking,
 * a point is `rows` consecutive values of the blocked axis: when all of them exist, their phases share
 * one pass over the streamed buffers; the last, partial block (and every decode step, whose axis has
 * extent 1) takes them one at a time. */
static void emit_point(Lower *L, KStmt *seq, Expr *p, Expr *last) {
  const LKernel *k = L->k;
  ExprPool *P = L->pool;
  LAxis par[LT_MAX_RANK];
  point_axes(L, par);
  if (k->npar > 0 && last) /* the last axis its own loop (cpu_inner_extent), the others bound around it */
    L->var_map[par[k->npar - 1].var] = last;
  else if (k->npar > 0) bind_point_vars(L, seq, par, k->npar, p);
  int R = L->s.rows, a = L->s.row_axis;
  if (R <= 1 || a < 0 || a >= k->npar) {
    kl_emit_phases(L, seq);
    if (!L->failed) emit_inner(L, seq);
    return;
  }
  int var = k->par[a].var;
  Expr *base = kl_decl_tmp(L, seq, DT_I64, "row0", ex_mul(P, L->var_map[var], ex_int(P, R)), NULL);
  Expr *left = ex_bin(P, X_SUB, k->par[a].extent, base);
  /* a constant extent that R divides has no partial block */
  const int whole = k->par[a].extent->op == X_CONST && k->par[a].extent->ival % R == 0;
  KStmt *full = whole ? seq : kl_st_if(L, seq, ex_bin(P, X_LE, ex_int(P, R), left));
  L->nrows = R;
  L->row_var = var;
  L->row_base = base;
  memset(L->acc_rows, 0, sizeof L->acc_rows);
  kl_emit_phases(L, full);
  for (int t = 0; t < R && !L->failed; t++) {
    kl_select_row(L, t);
    emit_inner(L, full);
  }
  L->nrows = 1;
  if (whole) return;
  KStmt *rest = kl_st_if(L, seq, ex_bin(P, X_LT, left, ex_int(P, R)));
  int tv = kl_new_var(L, "t");
  KStmt *loop = kl_st_for(L, rest, tv, ex_int(P, 0), left, ex_int(P, 1));
  L->var_map[var] = ex_add(P, base, ex_var(P, tv));
  kl_emit_phases(L, loop);
  if (!L->failed) emit_inner(L, loop);
}

static int check_schedule(Lower *L) {
  const Schedule *s = &L->s;
  if (s->vec != 0 && s->vec != 1 && s->vec != 2 && s->vec != 4 && s->vec != 8) {
    diag_error(L->d, 0, 0, "kernel %s: vector width %d is not 1, 2, 4 or 8", L->k->name, s->vec);
    return 0;
  }
  if (s->rows > 1 && (s->rows > 8 || (s->rows & (s->rows - 1)) || s->row_axis < 0 || s->row_axis >= L->k->npar)) {
    diag_error(L->d, 0, 0, "kernel %s: register blocking of %d rows on parallel axis %d is not possible", L->k->name,
               s->rows, s->row_axis);
    return 0;
  }
  if (L->target != TARGET_CUDA) return 1;
  const TargetDesc *dev = L->dev;
  if (s->block_threads < dev->warp_size || s->block_threads > dev->max_threads_per_block ||
      s->block_threads % dev->warp_size) {
    diag_error(L->d, 0, 0, "kernel %s: %d threads per block is not a multiple of %d in [%d, %d]", L->k->name,
               s->block_threads, dev->warp_size, dev->warp_size, dev->max_threads_per_block);
    return 0;
  }
  if (s->flash_decode && s->decode_fill < 1) {
    diag_error(L->d, 0, 0, "kernel %s: flash-decoding without a block count to fill (Schedule.decode_fill)",
               L->k->name);
    return 0;
  }
  return 1;
}

/* The elements a point computes (its longest reduction or inner loop, at least 1, as the tile stage
 * counts them) for a run-time OpenMP decision (Schedule.omp = 2). With register blocking a point is
 * `rows` values. */
static Expr *work_of_point(Lower *L) {
  const LKernel *k = L->k;
  Expr *w = kl_domain_size(L, k->inner, k->ninner);
  for (int i = 0; i < k->nphase; i++)
    w = ex_bin(L->pool, X_MAX, w, kl_domain_size(L, k->phases[i].axes, k->phases[i].naxes));
  return L->s.rows > 1 ? ex_mul(L->pool, w, ex_int(L->pool, L->s.rows)) : w;
}

/* CPU: the extent of the last point axis where the kernel's points get a loop of their own over it, inside the
 * parallel loop over the others, else 0. That is for a kernel without reductions (an elementwise one: its points
 * are cheap) whose last axis has a constant extent and another axis a run-time one: the flat loop would recover
 * the axes with a 64-bit division and modulo by the run-time extent per element (rope over [seq, heads, 64]: ~21
 * ns an element), the inner loop does it once per row. A kernel with reductions keeps the flat loop, whose points
 * a decode step needs spread over the threads. */
static int64_t cpu_inner_extent(const Lower *L, const LAxis *par) {
  const LKernel *k = L->k;
  if (k->nphase > 0 || k->npar < 2 || L->s.rows > 1) return 0;
  const Expr *e = par[k->npar - 1].extent;
  if (e->op != X_CONST || e->ival < 2) return 0;
  for (int i = 0; i + 1 < k->npar; i++)
    if (par[i].extent->op != X_CONST) return e->ival;
  return 0;
}

static void lower_body(Lower *L) {
  ExprPool *P = L->pool;
  const LKernel *k = L->k;
  KKernel *kk = L->kk;
  KStmt *root = kl_st_new(L, KS_SEQ);
  L->smem_decls = kl_st_new(L, KS_SEQ);
  kl_st_add(L, root, L->smem_decls);
  LAxis par[LT_MAX_RANK];
  point_axes(L, par);
  Expr *npoints = kl_domain_size(L, par, k->npar);
  int B = L->s.block_threads;
  if (L->target == TARGET_CPU) {
    int pv = kl_new_var(L, "p");
    const int64_t inner = cpu_inner_extent(L, par);
    KStmt *loop = kl_st_new(L, L->s.omp ? KS_PARFOR : KS_FOR);
    loop->var = pv;
    loop->lo = ex_int(P, 0);
    loop->hi = inner ? kl_domain_size(L, par, k->npar - 1) : npoints;
    loop->step = ex_int(P, 1);
    if (L->s.omp == 2)
      loop->cond = ex_bin(P, X_LE, ex_int(P, OMP_MIN_RUNTIME_WORK), ex_mul(P, npoints, work_of_point(L)));
    kl_st_add(L, root, loop);
    if (inner) { /* the other axes once per row of the last one */
      bind_point_vars(L, loop, par, k->npar - 1, ex_var(P, pv));
      int qv = kl_new_var(L, "q");
      KStmt *in = kl_st_for(L, loop, qv, ex_int(P, 0), ex_int(P, inner), ex_int(P, 1));
      emit_point(L, in, NULL, ex_var(P, qv));
    } else {
      emit_point(L, loop, ex_var(P, pv), NULL);
    }
    kk->grid = ex_int(P, 1);
    kk->block = 1;
  } else if (L->s.red == RS_BLOCK && L->s.block_fill > 0) {
    /* at most block_fill blocks, each walking the points block_fill apart */
    Expr *fill = ex_int(P, L->s.block_fill);
    int pv = kl_new_var(L, "p");
    KStmt *loop = kl_st_for(L, root, pv, ex_hw(P, HW_BLOCK), npoints, fill);
    emit_point(L, loop, ex_var(P, pv), NULL);
    /* the next point's block-wide partials reuse the shared slots that this one's result was read from */
    kl_st_barrier(L, loop);
    kk->grid = ex_bin(P, X_MIN, npoints, fill);
    kk->block = B;
  } else if (L->s.red == RS_BLOCK) {
    Expr *p = kl_decl_tmp(L, root, DT_I64, "p", ex_hw(P, HW_BLOCK), NULL);
    emit_point(L, root, p, NULL);
    kk->grid = npoints;
    kk->block = B;
  } else {
    int per_block = L->s.red == RS_WARP ? B / L->dev->warp_size : B;
    Expr *who = L->s.red == RS_WARP ? ex_hw(P, HW_WARP) : ex_hw(P, HW_THREAD);
    Expr *p =
        kl_decl_tmp(L, root, DT_I64, "p", ex_add(P, ex_mul(P, ex_hw(P, HW_BLOCK), ex_int(P, per_block)), who), NULL);
    KStmt *guard = kl_st_if(L, root, ex_bin(P, X_LT, p, npoints));
    emit_point(L, guard, p, NULL);
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

int kernel_param_of(const KKernel *kk, int buf, int output) {
  for (int i = 0; i < kk->nparams; i++)
    if (kk->params[i].buf == buf && kk->params[i].is_output == output) return i;
  return -1;
}

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
  if (s->kind == KS_VLOAD) add_param(c, s->buf, 0);
  if (s->kind == KS_FLASH) {
    const KFlash *f = s->flash;
    collect_expr(c, f->q);
    collect_expr(c, f->k);
    collect_expr(c, f->v);
    collect_expr(c, f->score);
    collect_expr(c, f->t_last);
    collect_expr(c, f->m_extent);
    collect_expr(c, f->t_extent);
    collect_stmt(c, f->store);
  }
  if (s->kind == KS_MMA) {
    collect_expr(c, s->mma->a);
    for (int i = 0; i < s->mma->nb; i++) collect_expr(c, s->mma->b[i]);
    collect_expr(c, s->mma->m_extent);
    collect_stmt(c, s->mma->store);
  }
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

/* What one lowering builds: the loop nest (KIND_LOOP / KIND_ROWS, by the schedule), or the GEMM or
 * flash kernel the tile stage matched. */
typedef struct Build {
  KernelKind kind;
  const GemmMatch *gemm;
  const AttnMatch *attn;
  int library;
} Build;

/* 1: lowered; 0: error (d says why). */
static int lower_kernel(const TileProgram *tp, const LKernel *k, Schedule s, Build b, KKernel *kk, Diag *d) {
  const LProgram *lp = tp->loop;
  Lower L = {0};
  L.lp = lp;
  L.k = k;
  L.s = s;
  L.target = tp->target;
  L.dev = &tp->device;
  L.pool = lp->pool;
  L.arena = lp->arena;
  L.kk = kk;
  L.d = d;
  if (!check_schedule(&L)) return 0;
  if (L.s.vec < 1) L.s.vec = 1;
  /* the kernel itself as several values of its last parallel axis a point (Schedule.gemv_rows): the blocked
   * points of register blocking, on that axis */
  if (b.kind == KIND_LOOP && L.target == TARGET_CUDA && L.s.rows <= 1 && tile_gemv_rows_apply(k, &L.s)) {
    L.s.rows = L.s.gemv_rows;
    L.s.row_axis = k->npar - 1;
  }
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
  for (int i = 0; i < k->nvars; i++)
    kk->var_names[i] = k->var_names[i] ? k->var_names[i] : arena_printf(lp->arena, "x%d", i);
  if (b.kind == KIND_GEMM) {
    if (!kl_mma_body(&L, b.gemm)) return 0;
  } else if (b.kind == KIND_QGEMV) {
    if (!kl_qgemv_body(&L, b.gemm)) return 0;
  } else if (b.kind == KIND_FLASH || b.kind == KIND_FLASH_DECODE) {
    if (!kl_flash_body(&L, b.attn)) return 0;
  } else {
    lower_body(&L);
  }
  if (L.failed) return 0;
  collect_params(kk, lp, k->out_buf, d, &L.failed);
  if (!L.failed && b.kind == KIND_GEMM) {
    if (b.library) kl_mma_library(&L); /* first: it may enlarge the scratch the pre-pass shares */
    kl_mma_pack_kernel(&L);
  }
  return !L.failed;
}

/* A kernel that launches nothing because kernel `by` computes its output. */
static KKernel skip_kernel(const LProgram *lp, const KKernel *r, const char *by) {
  KKernel skip = {0};
  skip.name = arena_printf(lp->arena, "%s_skip", r->name);
  skip.skip = 1;
  skip.by = by;
  skip.grid = ex_int(lp->pool, 0);
  skip.block = 32;
  skip.sched = r->sched;
  return skip;
}

/* The condition under which kernel i's blocked variant runs (at least `rows` values of its axis). */
static Expr *variant_when(const TileProgram *tp, int i) {
  const Schedule *s = &tp->kernels[i].s;
  const LKernel *k = tp->kernels[i].k;
  return ex_bin(tp->loop->pool, X_LE, ex_int(tp->loop->pool, s->rows), k->par[s->row_axis].extent);
}

/* Kernel i as its tile choice says, before any attention replaces it: the kernel itself (the loop
 * nest or flash-decoding) and its blocked variant (CUDA-core rows, tensor-core GEMM or flash). */
static int lower_own(const TileProgram *tp, int i, KKernel *kk, Diag *d) {
  const LProgram *lp = tp->loop;
  const LKernel *k = tp->kernels[i].k;
  const TileChoice *c = &tp->kernels[i].c;
  Schedule s = tp->kernels[i].s;
  s.flash_decode = 0; /* for the kernel itself, never its variant */
  Build loop = {KIND_LOOP, NULL, NULL, 0};
  if (c->variant != KIND_NONE) {
    /* the blocked schedule as a variant for extents of at least `rows`; the kernel itself without it */
    Schedule one = s;
    one.rows = 1;
    one.row_axis = -1;
    one.mma = 0;
    one.flash = 0;
    kk->alt = ARENA_NEW(lp->arena, KKernel);
    if (!lower_kernel(tp, k, one, loop, kk, d)) return 0;
    if (c->variant == KIND_GEMM) {
      Build g = {KIND_GEMM, c->gemm, NULL, c->library};
      if (!lower_kernel(tp, k, s, g, kk->alt, d)) return 0;
      kk->alt->name = arena_printf(lp->arena, "%s_mma", k->name);
      if (kk->alt->pre) kk->alt->pre->name = arena_printf(lp->arena, "%s_mma_pack", k->name);
      if (kk->alt->lib) kk->alt->lib->epilogue->name = arena_printf(lp->arena, "%s_mma_epilogue", k->name);
    } else if (c->variant == KIND_FLASH) { /* the whole attention as one kernel: this is its P x V */
      Schedule fl = s;
      fl.mma = 0;
      Build f = {KIND_FLASH, NULL, c->flash, 0};
      if (!lower_kernel(tp, k, fl, f, kk->alt, d)) return 0;
      kk->alt->name = arena_printf(lp->arena, "%s_flash", k->name);
    } else {
      Schedule cores = s;
      cores.mma = 0;
      cores.flash = 0;
      if (tp->target == TARGET_CPU) cores.omp = s.rows_omp;
      if (s.rows_serial) { /* one thread per blocked point (tile stage's choice) */
        cores.red = RS_SERIAL;
        cores.block_threads = 128;
      }
      if (!lower_kernel(tp, k, cores, loop, kk->alt, d)) return 0;
      kk->alt->name = arena_printf(lp->arena, "%s_rows%d", k->name, s.rows);
    }
    kk->alt_when = variant_when(tp, i);
  } else {
    s.mma = 0;
    if (c->self != KIND_FLASH_DECODE && c->self != KIND_QGEMV && !lower_kernel(tp, k, s, loop, kk, d)) return 0;
  }
  if (c->self == KIND_QGEMV || c->self == KIND_FLASH_DECODE) {
    /* the few-rows kernel itself: the quantized GEMV where its sums are a GEMM's over quantized weights, or
     * flash-decoding where this is an attention's P x V; its variant stays */
    Schedule one = tp->kernels[i].s;
    one.rows = 1;
    one.mma = 0;
    one.flash = 0;
    if (c->self == KIND_QGEMV) {
      one.row_axis = -1;
      one.gemv_rows = 0;
    }
    KKernel self = {0};
    Build b =
        c->self == KIND_QGEMV ? (Build){KIND_QGEMV, c->qgemv, NULL, 0} : (Build){KIND_FLASH_DECODE, NULL, c->decode, 0};
    if (!lower_kernel(tp, k, one, b, &self, d)) return 0;
    self.alt = kk->alt;
    self.alt_when = kk->alt_when;
    *kk = self;
  }
  return 1;
}

/* Kernel i is the scores or softmax kernel of an attention that kernel `by` computes (TileChoice.by):
 * in decode (by is flash-decoding) it launches nothing, except where by's variant runs and is not
 * flash attention: then its own kernel runs (its variant under the same condition, or itself); in
 * prefill only (by's variant is flash attention) it keeps itself and gets a variant that launches
 * nothing under by's variant's condition. */
static void replace_by_attention(const TileProgram *tp, int i, KKernel *kk) {
  const LProgram *lp = tp->loop;
  const TileChoice *c = &tp->kernels[i].c;
  const TileChoice *bc = &tp->kernels[c->by].c;
  const char *by = tp->kernels[c->by].k->name;
  Expr *when = bc->variant != KIND_NONE ? variant_when(tp, c->by) : NULL;
  if (c->by_decode) {
    KKernel *real = NULL;
    if (bc->variant != KIND_NONE && bc->variant != KIND_FLASH) {
      real = ARENA_NEW(lp->arena, KKernel);
      *real = kk->alt && !kk->alt->skip && kk->alt_when == when ? *kk->alt : *kk;
      real->alt = NULL;
      real->alt_when = NULL;
    }
    const char *name = kk->name;
    *kk = skip_kernel(lp, kk, by);
    kk->name = name;
    if (real) {
      kk->alt = real;
      kk->alt_when = when;
    }
    return;
  }
  KKernel *skip = ARENA_NEW(lp->arena, KKernel);
  *skip = skip_kernel(lp, kk, arena_printf(lp->arena, "%s_flash", by));
  skip->tensor_cores = 1; /* chosen exactly when the flash kernel is */
  kk->alt = skip;
  kk->alt_when = when;
}

KProgram *kernel_from_tile(const TileProgram *tp, Diag *d) {
  const LProgram *lp = tp->loop;
  KProgram *kp = ARENA_NEW(lp->arena, KProgram);
  kp->loop = lp;
  kp->target = tp->target;
  kp->device = tp->device;
  kp->nkernels = tp->nkernels;
  kp->kernels = ARENA_ARRAY(lp->arena, KKernel, tp->nkernels > 0 ? tp->nkernels : 1);
  for (int i = 0; i < tp->nkernels; i++) {
    if (!tp->kernels[i].k) {
      diag_error(d, 0, 0, "tile stage: kernel %d has no loop nest", i);
      return NULL;
    }
    if (!lower_own(tp, i, &kp->kernels[i], d)) return NULL;
    const TileChoice *c = &tp->kernels[i].c;
    if (c->by >= 0 && c->by < tp->nkernels) replace_by_attention(tp, i, &kp->kernels[i]);
  }
  for (int i = 1; i < tp->nkernels; i++) kl_mma_fuse_row_stat(tp, kp, i);
  kl_merge_elementwise(kp);
  return kp;
}
