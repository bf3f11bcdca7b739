/* Code stage: expressions as C / CUDA C text, with per-statement common subexpression elimination
 * (a node used twice is named once) and row-major flattening of multi-dimensional loads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "render_common.h"
#include "../base/mem.h"

/* ---- per-statement CSE ---- */

typedef struct CseEnt {
  const Expr *e;
  int uses; /* parent edges inside the statement (+1 per root) */
  unsigned char seen_uncond, seen_cond, uncond;
  const char *name; /* set once hoisted */
} CseEnt;

struct CseMap {
  CseEnt *ents;
  size_t cap, n;
  const Expr **order; /* post-order: operands before users */
  size_t norder, ordercap;
};

static size_t ptr_slot(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ULL;
  return (size_t)(x >> 17) & (cap - 1);
}

static CseEnt *cse_find(CseMap *m, const Expr *e, int add) {
  if (add && (m->n + 1) * 2 > m->cap) {
    CseMap g = {0};
    g.cap = m->cap ? m->cap * 2 : 64;
    g.ents = xcalloc(g.cap, sizeof *g.ents, "common subexpressions");
    for (size_t i = 0; i < m->cap; i++)
      if (m->ents[i].e) {
        size_t j = ptr_slot(m->ents[i].e, g.cap);
        while (g.ents[j].e) j = (j + 1) & (g.cap - 1);
        g.ents[j] = m->ents[i];
      }
    free(m->ents);
    m->ents = g.ents;
    m->cap = g.cap;
  }
  if (!m->cap) return NULL;
  size_t i = ptr_slot(e, m->cap);
  while (m->ents[i].e && m->ents[i].e != e) i = (i + 1) & (m->cap - 1);
  if (m->ents[i].e) return &m->ents[i];
  if (!add) return NULL;
  m->ents[i].e = e;
  m->n++;
  return &m->ents[i];
}

/* Counts parent edges; iterative would be nicer but expression depth is modest. */
static CseEnt *cse_count(CseMap *m, const Expr *e) {
  CseEnt *ent = cse_find(m, e, 0);
  if (ent) return ent;
  for (int i = 0; i < e->n; i++) cse_count(m, e->a[i])->uses++;
  ent = cse_find(m, e, 1);
  if (m->norder == m->ordercap) {
    m->ordercap = m->ordercap ? m->ordercap * 2 : 64;
    m->order = xrealloc(m->order, m->ordercap * sizeof *m->order, "common subexpressions");
  }
  m->order[m->norder++] = e;
  return ent;
}

/* Marks nodes evaluated on every path (not only inside a select arm). */
static void cse_mark(CseMap *m, const Expr *e, int cond) {
  CseEnt *ent = cse_find(m, e, 0);
  if (cond) {
    if (ent->seen_cond || ent->seen_uncond) return;
    ent->seen_cond = 1;
  } else {
    if (ent->seen_uncond) return;
    ent->seen_uncond = ent->uncond = 1;
  }
  for (int i = 0; i < e->n; i++) cse_mark(m, e->a[i], cond || (e->op == X_SELECT && i > 0));
}

static void cse_free(CseMap *m) {
  free(m->ents);
  free(m->order);
}

/* ---- index flattening ---- */

Expr *rc_flat_index(Render *R, const LBuf *b, int n, Expr *const *idx) {
  if (n != b->shape.rank) {
    rc_fail(R, "%s has rank %d but is indexed with %d indices", b->name, b->shape.rank, n);
    return ex_int(R->pool, 0);
  }
  Expr *f = ex_int(R->pool, 0);
  for (int i = 0; i < n; i++) f = ex_add(R->pool, ex_mul(R->pool, f, b->shape.dim[i]), idx[i]);
  return f;
}

static Expr *flatten_fn(void *ctx, ExprPool *p, Expr *e) {
  Render *R = ctx;
  if (e->op != X_LOAD || e->aux != MEM_GLOBAL) return e;
  if (e->ival < 0 || e->ival >= R->lp->nbufs) {
    rc_fail(R, "load from buffer %lld, which does not exist", (long long)e->ival);
    return e;
  }
  const LBuf *b = &R->lp->bufs[e->ival];
  if (dtype_is_quant(e->dtype) && e->n == b->shape.rank + 2) { /* [rows..., block of the row, group, element] */
    Expr *blk = ex_int(p, 0);
    int last = b->shape.rank - 1;
    for (int i = 0; i < last; i++) blk = ex_add(p, ex_mul(p, blk, b->shape.dim[i]), e->a[i]);
    Expr *per_row = ex_bin(p, X_IDIV, b->shape.dim[last], ex_int(p, dtype_block_elems(e->dtype)));
    Expr *at[3] = {ex_add(p, ex_mul(p, blk, per_row), e->a[last]), e->a[last + 1], e->a[last + 2]};
    return ex_load(p, (int)e->ival, e->dtype, 3, at, MEM_GLOBAL);
  }
  if (b->shape.rank == 1 && e->n == 1) return e;
  Expr *f = rc_flat_index(R, b, e->n, e->a);
  return ex_load(p, (int)e->ival, e->dtype, 1, &f, MEM_GLOBAL);
}

/* ---- expressions ---- */

static void put_float(Render *R, StrBuf *b, double v) {
  if (isnan(v)) {
    sb_puts(b, R->dl->nan);
    return;
  }
  if (isinf(v)) {
    const char *inf = R->dl->inf;
    if (v < 0) sb_printf(b, "(-%s)", inf);
    else sb_puts(b, inf);
    return;
  }
  char s[48];
  snprintf(s, sizeof s, "%.9g", (double)(float)v);
  if (!strpbrk(s, ".en")) strcat(s, ".0");
  if (s[0] == '-') sb_printf(b, "(%sf)", s);
  else sb_printf(b, "%sf", s);
}

static void put_int(StrBuf *b, int64_t v) {
  if (v == INT64_MIN) sb_puts(b, "(-9223372036854775807LL - 1)");
  else if (v < 0) sb_printf(b, "(%lld%s)", (long long)v, v < INT32_MIN ? "LL" : "");
  else sb_printf(b, "%lld%s", (long long)v, v > INT32_MAX ? "LL" : "");
}

static const char *i64_name(const Render *R) { return R->dl->i64; }

void rc_put_as_float(Render *R, StrBuf *b, const Expr *e) {
  if (dtype_is_float(e->dtype)) rc_put_ref(R, b, e);
  else {
    sb_puts(b, "(float)(");
    rc_put_ref(R, b, e);
    sb_putc(b, ')');
  }
}

static void put_cast(Render *R, StrBuf *b, DType t, const Expr *x) {
  if (dtype_is_float(t)) {
    const char *round = t == DT_F16 ? "lt_f16_round(" : t == DT_BF16 ? "lt_bf16_round(" : NULL;
    if (round) sb_puts(b, round);
    rc_put_as_float(R, b, x);
    if (round) sb_putc(b, ')');
  } else if (t == DT_BOOL) {
    sb_puts(b, "(");
    rc_put_ref(R, b, x);
    sb_puts(b, " != 0)");
  } else if (dtype_is_float(x->dtype)) {
    /* Saturating, as ex_float_to_int and the reference: NaN -> 0, out of range -> the nearest end of the
     * range (a plain C conversion is undefined there; CUDA's cvt.rzi happens to agree). */
    const char *hi = t == DT_I32 ? "2147483648.0f" : "9223372036854775808.0f";
    const char *max = t == DT_I32 ? "2147483647LL" : "9223372036854775807LL";
    const char *min = t == DT_I32 ? "(-2147483647LL - 1)" : "(-9223372036854775807LL - 1)";
    sb_printf(b, "((%s)(", i64_name(R));
    rc_put_ref(R, b, x);
    sb_puts(b, " != ");
    rc_put_ref(R, b, x);
    sb_puts(b, " ? 0 : ");
    rc_put_ref(R, b, x);
    sb_printf(b, " >= %s ? %s : ", hi, max);
    rc_put_ref(R, b, x);
    sb_printf(b, " <= -%s ? %s : (%s)(", hi, min, i64_name(R));
    rc_put_ref(R, b, x);
    sb_puts(b, ")))");
  } else {
    sb_printf(b, "((%s)", i64_name(R));
    if (t == DT_I32) sb_printf(b, "(%s)", R->dl->i32);
    sb_putc(b, '(');
    rc_put_ref(R, b, x);
    sb_puts(b, "))");
  }
}

void rc_put_load(Render *R, StrBuf *b, const Expr *e) {
  const char *name;
  DType t = e->dtype;
  if (e->aux == MEM_SHARED) {
    if (!R->dl->shared) rc_fail(R, "shared memory, which the %s target does not have", R->dl->target);
    name = e->ival >= 0 && e->ival < RC_MAX_SMEM ? R->smem_name[e->ival] : NULL;
    if (!name) {
      rc_fail(R, "shared array %lld is not declared", (long long)e->ival);
      return;
    }
    t = R->smem_dtype[e->ival];
  } else {
    name = e->ival >= 0 && e->ival < R->lp->nbufs ? R->buf_name[e->ival] : NULL;
    if (!name) {
      rc_fail(R, "buffer %lld is read but is not a parameter", (long long)e->ival);
      return;
    }
  }
  if (dtype_is_quant(t)) { /* element i decoded from its block (render_quant.c) */
    sb_printf(b, "%s%s(%s, ", rc_quant_decoder(t), e->n == 3 ? "_at" : "", name);
    for (int i = 0; i < e->n && i < 3; i++) {
      if (i) sb_puts(b, ", ");
      rc_put_ref(R, b, e->a[i]);
    }
    if (!e->n) sb_puts(b, "0");
    sb_puts(b, ")");
    return;
  }
  const char *pre = "", *post = "";
  char widen[32];
  snprintf(widen, sizeof widen, "((%s)", R->dl->i64);
  switch (t) {
  case DT_F16:
    pre = "lt_f16_to_f32(";
    post = ")";
    break;
  case DT_BF16:
    pre = "lt_bf16_to_f32(";
    post = ")";
    break;
  case DT_I32:
    pre = widen;
    post = ")";
    break;
  case DT_BOOL:
    pre = "(";
    post = " != 0)";
    break;
  default: break;
  }
  sb_printf(b, "%s%s[", pre, name);
  if (e->n == 1) rc_put_ref(R, b, e->a[0]);
  else sb_puts(b, "0");
  sb_printf(b, "]%s", post);
}

static const char *fn_name(ExprOp op) {
  switch (op) {
  case X_EXP: return "expf";
  case X_LOG: return "logf";
  case X_SQRT: return "sqrtf";
  case X_TANH: return "tanhf";
  case X_ERF: return "erff";
  case X_SIN: return "sinf";
  case X_COS: return "cosf";
  case X_POW: return "powf";
  default: return NULL;
  }
}

static const char *infix(ExprOp op) {
  switch (op) {
  case X_ADD: return " + ";
  case X_SUB: return " - ";
  case X_MUL: return " * ";
  case X_DIV:
  case X_IDIV: return " / ";
  case X_MOD: return " % ";
  case X_LT: return " < ";
  case X_LE: return " <= ";
  case X_EQ: return " == ";
  case X_NE: return " != ";
  case X_AND: return " && ";
  case X_OR: return " || ";
  default: return NULL;
  }
}

static void put_hw(Render *R, StrBuf *b, HwIndex h) {
  const char *v = (int)h >= 0 && (int)h < 5 ? R->dl->hw[h] : NULL;
  if (!v) {
    rc_fail(R, "hardware thread indices, which the %s target does not have", R->dl->target);
    return;
  }
  sb_puts(b, v);
}

/* The node itself (never its CSE name). */
static void put_node(Render *R, StrBuf *b, const Expr *e) {
  int fl = e->n > 0 && dtype_is_float(e->a[0]->dtype);
  switch (e->op) {
  case X_CONST:
    if (dtype_is_float(e->dtype)) put_float(R, b, e->fval);
    else put_int(b, e->ival);
    return;
  case X_SYM:
    for (int i = 0; i < R->kk->nsyms; i++)
      if (!strcmp(R->kk->syms[i], e->name)) {
        sb_puts(b, R->sym_name[i]);
        return;
      }
    rc_fail(R, "symbol %s is not a parameter", e->name);
    return;
  case X_VAR:
    if (e->ival >= 0 && e->ival < L_MAX_VARS && R->var_name[e->ival]) sb_puts(b, R->var_name[e->ival]);
    else rc_fail(R, "variable %lld is not bound by a loop", (long long)e->ival);
    return;
  case X_TMP:
    if (e->ival >= 0 && e->ival < R->kk->ntmps) sb_puts(b, R->tmp_name[e->ival]);
    else rc_fail(R, "temporary %lld is not declared", (long long)e->ival);
    return;
  case X_HW: put_hw(R, b, (HwIndex)e->ival); return;
  case X_LOAD: rc_put_load(R, b, e); return;
  case X_ARG:
  case X_ACC: rc_fail(R, "%s left in a kernel-stage expression", ex_op_name(e->op)); return;
  case X_NEG:
    sb_puts(b, "(-");
    rc_put_ref(R, b, e->a[0]);
    sb_putc(b, ')');
    return;
  case X_NOT:
    sb_puts(b, "(!");
    rc_put_ref(R, b, e->a[0]);
    sb_putc(b, ')');
    return;
  case X_RSQRT:
    sb_puts(b, "(1.0f / sqrtf(");
    rc_put_ref(R, b, e->a[0]);
    sb_puts(b, "))");
    return;
  case X_SIGMOID:
    sb_puts(b, "(1.0f / (1.0f + expf(-");
    rc_put_ref(R, b, e->a[0]);
    sb_puts(b, ")))");
    return;
  case X_ABS:
    sb_puts(b, fl ? "fabsf(" : "lt_absi(");
    rc_put_ref(R, b, e->a[0]);
    sb_putc(b, ')');
    return;
  case X_CAST: put_cast(R, b, e->dtype, e->a[0]); return;
  case X_MAX:
  case X_MIN:
    if (fl) sb_puts(b, e->op == X_MAX ? "fmaxf(" : "fminf(");
    else sb_puts(b, e->op == X_MAX ? "lt_maxi(" : "lt_mini(");
    rc_put_ref(R, b, e->a[0]);
    sb_puts(b, ", ");
    rc_put_ref(R, b, e->a[1]);
    sb_putc(b, ')');
    return;
  case X_SELECT:
    sb_putc(b, '(');
    rc_put_ref(R, b, e->a[0]);
    sb_puts(b, " ? ");
    rc_put_ref(R, b, e->a[1]);
    sb_puts(b, " : ");
    rc_put_ref(R, b, e->a[2]);
    sb_putc(b, ')');
    return;
  default: break;
  }
  const char *fn = fn_name(e->op), *in = infix(e->op);
  if (fn) {
    sb_printf(b, "%s(", fn);
    for (int i = 0; i < e->n; i++) {
      if (i) sb_puts(b, ", ");
      rc_put_ref(R, b, e->a[i]);
    }
    sb_putc(b, ')');
  } else if (in && e->n == 2) {
    sb_putc(b, '(');
    rc_put_ref(R, b, e->a[0]);
    sb_puts(b, in);
    rc_put_ref(R, b, e->a[1]);
    sb_putc(b, ')');
  } else {
    rc_fail(R, "cannot render operation %s", ex_op_name(e->op));
  }
}

/* A use of e: its CSE name when it has one. */
void rc_put_ref(Render *R, StrBuf *b, const Expr *e) {
  CseEnt *ent = R->cse ? cse_find(R->cse, e, 0) : NULL;
  if (ent && ent->name) sb_puts(b, ent->name);
  else put_node(R, b, e);
}

/* Flattens loads in roots[], then declares every non-leaf node used more than once (and safe to
 * evaluate unconditionally: no load that only a select arm guards) as `const T vN`. */
void rc_cse_begin(Render *R, Expr **roots, int n, int level) {
  CseMap *m = xcalloc(1, sizeof *m, "common subexpressions");
  for (int i = 0; i < n; i++)
    if (roots[i]) roots[i] = ex_rewrite(R->pool, roots[i], flatten_fn, R);
  for (int i = 0; i < n; i++)
    if (roots[i]) cse_count(m, roots[i])->uses++;
  for (int i = 0; i < n; i++)
    if (roots[i]) cse_mark(m, roots[i], 0);
  R->cse = m;
  for (size_t i = 0; i < m->norder; i++) {
    const Expr *e = m->order[i];
    CseEnt *ent = cse_find(m, e, 0);
    if (e->n == 0 || ent->uses < 2 || (!ent->uncond && (e->flags & EXF_LOAD))) continue;
    char nm[32];
    snprintf(nm, sizeof nm, "v%d", R->ncse++);
    const char *name = rc_unique_name(R, nm);
    sb_indent(R->out, level);
    sb_printf(R->out, "const %s %s = ", rc_compute_type(R, e->dtype), name);
    put_node(R, R->out, e);
    sb_puts(R->out, ";\n");
    ent->name = name;
  }
}

void rc_cse_end(Render *R) {
  if (R->cse) cse_free(R->cse);
  free(R->cse);
  R->cse = NULL;
}
