/* CUDA's 8-element dot products over quantized weights (KS_VQDOT, lower_phase.c's decode GEMV), and the loops
 * whose dot products read the next step's blocks ahead.
 *
 * One statement is `acc = acc + lt_qd8_FORMAT(w + row * row bytes, element, x)` (render_quant.c). Left like that,
 * ptxas puts each block's loads right before its arithmetic (it keeps few registers live), so a warp has about one
 * vector of weights in flight: a few bytes a lane, far from what covers DRAM latency. A loop whose dot products
 * read blocks at indices of its own variable and of values fixed before it is rendered software-pipelined instead:
 * every block of the first step is loaded (lt_qld_FORMAT into an lt_qr) before the loop, and each step first loads
 * the blocks of the next one (the last step reloads its own: no branch, no read past the rows), then does this
 * step's arithmetic on the blocks loaded a step ago (lt_qdr_FORMAT): the loads cross the loop's back edge, which no
 * scheduler moves them over, so all of a step's blocks are in flight during the previous step's arithmetic. */
#include <string.h>
#include "render_common.h"

typedef struct QRoots {
  int by_row;    /* the row's first byte (roots[0] times row_bytes) and the element within the row (roots[1]) */
  Expr *root[2]; /* else the flat element index (roots[0]) */
  int64_t row_bytes;
} QRoots;

static int vqdot_ok(Render *R, const KStmt *s) {
  const Expr *w = s->value;
  if (!w || w->op != X_LOAD || !dtype_is_quant(w->dtype) || w->dtype != s->dtype || s->tmp < 0 ||
      s->tmp >= R->kk->ntmps || s->xtmp < 0 || s->xtmp + 8 > R->kk->ntmps || w->ival < 0 || w->ival >= R->lp->nbufs ||
      !R->buf_name[w->ival] || w->n < 1) {
    rc_fail(R, "malformed quantized dot product");
    return 0;
  }
  return 1;
}

/* Rows of whole blocks (a weight [rows][k]): the row's first byte and the element within the row, so the block
 * arithmetic on the element is the same for every row a point reads and the row offsets stay out of the loop. */
static QRoots qroots(Render *R, const Expr *w) {
  const LBuf *b = &R->lp->bufs[w->ival];
  const Expr *k = b->shape.rank > 1 ? b->shape.dim[b->shape.rank - 1] : NULL;
  QRoots q = {0, {NULL, NULL}, 0};
  q.by_row = k && k->op == X_CONST && k->ival % dtype_block_elems(w->dtype) == 0;
  if (!q.by_row) {
    q.root[0] = rc_flat_index(R, b, w->n, w->a);
    return q;
  }
  Expr *row = ex_int(R->pool, 0);
  for (int i = 0; i + 1 < w->n; i++) row = ex_add(R->pool, ex_mul(R->pool, row, b->shape.dim[i]), w->a[i]);
  q.root[0] = row;
  q.root[1] = w->a[w->n - 1];
  q.row_bytes = k->ival / dtype_block_elems(w->dtype) * (int64_t)dtype_block_bytes(w->dtype);
  return q;
}

/* `buf + row * bytes, element` or `buf, flat index` (the roots already CSE-named) */
static void put_block_args(Render *R, const Expr *w, const QRoots *q) {
  StrBuf *o = R->out;
  sb_puts(o, R->buf_name[w->ival]);
  if (q->by_row) {
    sb_puts(o, " + (");
    rc_put_ref(R, o, q->root[0]);
    sb_printf(o, ") * %lldLL, ", (long long)q->row_bytes);
    rc_put_ref(R, o, q->root[1]);
  } else {
    sb_puts(o, ", ");
    rc_put_ref(R, o, q->root[0]);
  }
}

/* The pipelined loop's block variable of dot product s (its index in R->qpipe), or -1. */
static int pipelined(const Render *R, const KStmt *s) {
  for (int i = 0; i < R->nqpipe; i++)
    if (R->qpipe[i] == s) return i;
  return -1;
}

void rc_put_vqdot(Render *R, const KStmt *s, int level) {
  StrBuf *o = R->out;
  if (R->dl != &rc_dialect_cuda) {
    rc_fail(R, "uses 8-element dot products over quantized weights, which the %s target does not have", R->dl->target);
    return;
  }
  if (!vqdot_ok(R, s)) return;
  const Expr *w = s->value;
  QRoots q = qroots(R, w);
  const int pipe = pipelined(R, s);
  /* pipelined: the block arithmetic needs only the element (within the row, or flat) */
  Expr *elem[1] = {q.by_row ? q.root[1] : q.root[0]};
  if (pipe >= 0) rc_cse_begin(R, elem, 1, level);
  else rc_cse_begin(R, q.root, q.by_row ? 2 : 1, level);
  sb_indent(o, level);
  sb_puts(o, "{\n");
  sb_indent(o, level + 1);
  sb_puts(o, "const float lt_x[8] = {");
  for (int i = 0; i < 8; i++) sb_printf(o, "%s%s", i ? ", " : "", R->tmp_name[s->xtmp + i]);
  sb_puts(o, "};\n");
  const char *t = R->tmp_name[s->tmp];
  sb_indent(o, level + 1);
  if (pipe >= 0) {
    sb_printf(o, "%s = %s + lt_qdr_%s(%s, ", t, t, dtype_name(s->dtype), R->qpipe_cur[pipe]);
    rc_put_ref(R, o, elem[0]);
  } else {
    sb_printf(o, "%s = %s + lt_qd8_%s(", t, t, dtype_name(s->dtype));
    put_block_args(R, w, &q);
  }
  sb_puts(o, ", lt_x);\n");
  sb_indent(o, level);
  sb_puts(o, "}\n");
  rc_cse_end(R);
}

/* ---- pipelined loops ---- */

typedef struct Declared {
  uint64_t tmp[(K_MAX_TMPS + 63) / 64];
} Declared;

static void declared_in(const KStmt *s, Declared *d) {
  if (s->kind == KS_DECL && s->tmp >= 0 && s->tmp < K_MAX_TMPS) d->tmp[s->tmp / 64] |= 1ull << (s->tmp % 64);
  if (s->kind == KS_VLOAD)
    for (int i = 0; i < s->count; i++)
      if (s->tmp + i >= 0 && s->tmp + i < K_MAX_TMPS) d->tmp[(s->tmp + i) / 64] |= 1ull << ((s->tmp + i) % 64);
  for (int i = 0; i < s->nbody; i++) declared_in(s->body[i], d);
}

typedef struct Fixed {
  const Declared *inside;
  int ok;
} Fixed;

static void fixed_fn(void *ctx, const Expr *e) {
  Fixed *f = ctx;
  if (e->op == X_TMP && e->ival >= 0 && e->ival < K_MAX_TMPS && (f->inside->tmp[e->ival / 64] >> (e->ival % 64) & 1))
    f->ok = 0;
  if (e->op == X_LOAD) f->ok = 0; /* an index read from memory could change within the loop */
}

/* Every dot product directly in loop s reads its block at an index of s's variable and of temporaries declared
 * before s: the next step's blocks can be loaded a step ahead. Returns how many there are (0: not pipelined). */
static int pipeline_candidates(Render *R, const KStmt *s, const KStmt **out, int cap) {
  if (s->kind != KS_FOR || !s->lo || !s->hi || !s->step || s->var < 0 || s->var >= L_MAX_VARS ||
      R->kk->nvars >= L_MAX_VARS)
    return 0;
  Declared inside;
  memset(&inside, 0, sizeof inside);
  declared_in(s, &inside);
  int n = 0;
  for (int i = 0; i < s->nbody; i++) {
    const KStmt *c = s->body[i];
    if (c->kind != KS_VQDOT) continue;
    if (n == cap || !c->value || c->value->op != X_LOAD) return 0;
    Fixed f = {&inside, 1};
    for (int j = 0; j < c->value->n; j++) ex_visit(c->value->a[j], fixed_fn, &f);
    if (!f.ok) return 0;
    out[n++] = c;
  }
  return n;
}

/* `lt_qr NAME = lt_qld_F(block args at the loop variable := at);` (decl) or `NAME = ...;` */
static void put_block_load(Render *R, const KStmt *c, int var, Expr *at, const char *name, int decl, int level) {
  ExprPool *P = R->pool;
  Expr *map[L_MAX_VARS] = {0};
  map[var] = at;
  const Expr *w = c->value;
  Expr *idx[LT_MAX_RANK];
  for (int i = 0; i < w->n; i++) idx[i] = ex_subst_vars(P, w->a[i], L_MAX_VARS, map);
  Expr *moved = ex_load(P, (int)w->ival, w->dtype, w->n, idx, MEM_GLOBAL);
  QRoots q = qroots(R, moved);
  rc_cse_begin(R, q.root, q.by_row ? 2 : 1, level);
  sb_indent(R->out, level);
  sb_printf(R->out, "%s%s = lt_qld_%s(", decl ? "lt_qr " : "", name, dtype_name(c->dtype));
  put_block_args(R, moved, &q);
  sb_puts(R->out, ");\n");
  rc_cse_end(R);
}

int rc_put_pipelined_loop(Render *R, const KStmt *s, int level) {
  const KStmt *dots[RC_MAX_QPIPE];
  if (R->dl != &rc_dialect_cuda || R->nqpipe) return 0; /* one pipelined loop at a time (no nesting) */
  const int n = pipeline_candidates(R, s, dots, RC_MAX_QPIPE);
  if (n == 0) return 0;
  StrBuf *o = R->out;
  ExprPool *P = R->pool;
  const char *v = R->var_name[s->var];
  /* the next step's value of the loop variable, clamped to the last step: a variable of its own */
  const int nv = R->kk->nvars;
  const char *next_name = rc_unique_name(R, "lt_next");
  R->var_name[nv] = next_name;
  const char *next[RC_MAX_QPIPE];
  for (int i = 0; i < n; i++) {
    next[i] = rc_unique_name(R, "lt_qn");
    R->qpipe_cur[i] = rc_unique_name(R, "lt_qc");
    R->qpipe[i] = dots[i];
  }
  sb_indent(o, level);
  sb_puts(o, "{\n");
  /* the first step's blocks; a thread with no step (lo >= hi) loads element 0's, which every row has */
  Expr *roots[3] = {s->lo, s->hi, s->step};
  rc_cse_begin(R, roots, 3, level + 1);
  sb_indent(o, level + 1);
  sb_printf(o, "const %s %s = ", R->dl->i64, next_name);
  rc_put_ref(R, o, roots[0]);
  sb_puts(o, " < ");
  rc_put_ref(R, o, roots[1]);
  sb_puts(o, " ? ");
  rc_put_ref(R, o, roots[0]);
  sb_puts(o, " : 0;\n");
  rc_cse_end(R);
  for (int i = 0; i < n; i++) put_block_load(R, dots[i], s->var, ex_var(P, nv), next[i], 1, level + 1);
  /* a loop of one step a thread (a block per row whose K is 32 threads' vectors: most decode projections): ptxas
   * would interleave the loads above with the arithmetic again, but keeps them above a warp fence, so the step's
   * blocks are all in flight before any arithmetic (over several steps the loads cross the back edge instead: a fence
   * there only costs registers, and ptxas moves the next step's loads past one in the loop). Every lane of the warp
   * reaches it where the lanes share the sums (a warp or a block a point: the points' guards are the same for the
   * whole warp). */
  const int fence =
      R->kk->sched.red != RS_SERIAL && s->hi->op == X_CONST && s->step->op == X_CONST && s->hi->ival <= s->step->ival;
  if (fence) {
    sb_indent(o, level + 1);
    sb_puts(o, "__syncwarp();\n");
  }
  rc_cse_begin(R, roots, 3, level + 1);
  sb_indent(o, level + 1);
  sb_printf(o, "for (%s %s = ", R->dl->i64, v);
  rc_put_ref(R, o, roots[0]);
  sb_printf(o, "; %s < ", v);
  rc_put_ref(R, o, roots[1]);
  sb_printf(o, "; %s += ", v);
  rc_put_ref(R, o, roots[2]);
  sb_puts(o, ") {\n");
  rc_cse_end(R);
  for (int i = 0; i < n; i++) {
    sb_indent(o, level + 2);
    sb_printf(o, "const lt_qr %s = %s;\n", R->qpipe_cur[i], next[i]);
  }
  Expr *step_roots[2] = {ex_add(P, ex_var(P, s->var), s->step), s->hi};
  rc_cse_begin(R, step_roots, 2, level + 2);
  sb_indent(o, level + 2);
  sb_printf(o, "{\n");
  sb_indent(o, level + 3);
  sb_printf(o, "const %s %s = ", R->dl->i64, next_name);
  rc_put_ref(R, o, step_roots[0]);
  sb_puts(o, " < ");
  rc_put_ref(R, o, step_roots[1]);
  sb_puts(o, " ? ");
  rc_put_ref(R, o, step_roots[0]);
  sb_printf(o, " : %s;\n", v);
  rc_cse_end(R);
  for (int i = 0; i < n; i++) put_block_load(R, dots[i], s->var, ex_var(P, nv), next[i], 0, level + 3);
  sb_indent(o, level + 2);
  sb_puts(o, "}\n");
  R->nqpipe = n;
  for (int i = 0; i < s->nbody; i++) rc_put_stmt(R, s->body[i], level + 2);
  R->nqpipe = 0;
  R->var_name[nv] = NULL;
  sb_indent(o, level + 1);
  sb_puts(o, "}\n");
  sb_indent(o, level);
  sb_puts(o, "}\n");
  return 1;
}
