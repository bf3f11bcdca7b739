#include "render_common.h"
#include "../base/mem.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../base/hash.h"
#include "../base/settings.h"

void rc_fail(Render *R, const char *fmt, ...) {
  if (!R->failed) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag_error(R->d, 0, 0, "%s: kernel %s: %s", R->dl->renderer, R->kk ? R->kk->name : "?", msg);
  }
  R->failed = 1;
}

/* ---- dialects ---- */

const Dialect rc_dialect_c = {
    .renderer = "render_c",
    .target = "CPU",
    .i64 = "int64_t",
    .i32 = "int32_t",
    .u16 = "uint16_t",
    .u8 = "uint8_t",
    .bool_compute = "int",
    .nan = "NAN",
    .inf = "INFINITY",
    .shared = "", /* an array of the point that declares it (a weight row decoded once for a blocked point) */
    .parallel_for = "#pragma omp parallel for schedule(static)",
};

const Dialect rc_dialect_cuda = {
    .renderer = "render_cuda",
    .target = "CUDA",
    .i64 = "i64",
    .i32 = "int",
    .u16 = "unsigned short",
    .u8 = "unsigned char",
    .bool_compute = "bool",
    .nan = "__int_as_float(0x7fffffff)",
    .inf = "__int_as_float(0x7f800000)",
    .hw = {"((i64)threadIdx.x)", "((i64)blockIdx.x)", "((i64)(threadIdx.x & 31u))", "((i64)(threadIdx.x >> 5))",
           "((i64)blockDim.x)"},
    .shared = "__shared__",
    .barrier = "__syncthreads();",
    .shuffle_xor = "__shfl_xor_sync(0xffffffffu, %s, %s)",
    .bits_to_float = "__uint_as_float",
    .vec2 = "lt_u2",
    .vec4 = "lt_u4",
    .templates = 1,
};

/* ---- types ---- */

const char *rc_compute_type(const Render *R, DType t) {
  if (dtype_is_float(t)) return "float";
  if (t == DT_BOOL) return R->dl->bool_compute;
  return R->dl->i64;
}

const char *rc_storage_type(const Render *R, DType t) {
  switch (t) {
  case DT_F32: return "float";
  case DT_F16:
  case DT_BF16: return R->dl->u16;
  case DT_I32: return R->dl->i32;
  case DT_I64: return R->dl->i64;
  case DT_BOOL: return R->dl->u8;
  default: return dtype_is_quant(t) ? "unsigned char" : "void"; /* blocks, read by the decoders */
  }
}

static const char *i64_name(const Render *R) { return R->dl->i64; }

/* ---- statements ---- */

static void refuse(Render *R, const char *what) {
  rc_fail(R, "uses %s, which the %s target does not have", what, R->dl->target);
}

static void put_store(Render *R, const KStmt *s, int level) {
  StrBuf *o = R->out;
  const char *name = NULL;
  DType bt;
  Expr *roots[2] = {NULL, s->value};
  if (s->space == MEM_SHARED) {
    if (!R->dl->shared) {
      refuse(R, "shared memory");
      return;
    }
    name = s->buf >= 0 && s->buf < RC_MAX_SMEM ? R->smem_name[s->buf] : NULL;
    if (!name || s->nidx != 1) {
      rc_fail(R, "store to an undeclared shared array %d", s->buf);
      return;
    }
    bt = R->smem_dtype[s->buf];
    roots[0] = s->idx[0];
  } else {
    name = s->buf >= 0 && s->buf < R->lp->nbufs ? R->buf_name[s->buf] : NULL;
    if (!name) {
      rc_fail(R, "buffer %d is written but is not a parameter", s->buf);
      return;
    }
    const LBuf *b = &R->lp->bufs[s->buf];
    bt = b->dtype;
    roots[0] = rc_flat_index(R, b, s->nidx, s->idx);
  }
  /* A value already rounded to f16/bf16 is converted once, not rounded twice. */
  if ((bt == DT_F16 || bt == DT_BF16) && roots[1]->op == X_CAST && roots[1]->dtype == bt) roots[1] = roots[1]->a[0];
  rc_cse_begin(R, roots, 2, level);
  sb_indent(o, level);
  sb_printf(o, "%s[", name);
  rc_put_ref(R, o, roots[0]);
  sb_puts(o, "] = ");
  switch (bt) {
  case DT_F32: rc_put_as_float(R, o, roots[1]); break;
  case DT_F16:
  case DT_BF16:
    sb_puts(o, bt == DT_F16 ? "lt_f32_to_f16(" : "lt_f32_to_bf16(");
    rc_put_as_float(R, o, roots[1]);
    sb_putc(o, ')');
    break;
  case DT_BOOL:
    sb_printf(o, "(%s)(", rc_storage_type(R, DT_BOOL));
    rc_put_ref(R, o, roots[1]);
    sb_puts(o, " != 0)");
    break;
  default:
    sb_printf(o, "(%s)(", rc_storage_type(R, bt));
    rc_put_ref(R, o, roots[1]);
    sb_putc(o, ')');
    break;
  }
  sb_puts(o, ";\n");
  rc_cse_end(R);
}

static void put_stmt(Render *R, const KStmt *s, int level);
void rc_put_stmt(Render *R, const KStmt *s, int level) { put_stmt(R, s, level); }

static void put_children(Render *R, const KStmt *s, int level) {
  for (int i = 0; i < s->nbody && !R->failed; i++) put_stmt(R, s->body[i], level);
}

void rc_put_assign(Render *R, int level, const char *lhs, Expr *value) {
  Expr *roots[1] = {value};
  rc_cse_begin(R, roots, 1, level);
  sb_indent(R->out, level);
  sb_printf(R->out, "%s = ", lhs);
  rc_put_ref(R, R->out, roots[0]);
  sb_puts(R->out, ";\n");
  rc_cse_end(R);
}

void rc_put_return(Render *R, int level, Expr *value) {
  Expr *roots[1] = {value};
  rc_cse_begin(R, roots, 1, level);
  sb_indent(R->out, level);
  sb_puts(R->out, "return ");
  rc_put_ref(R, R->out, roots[0]);
  sb_puts(R->out, ";\n");
  rc_cse_end(R);
}

static void put_warp_reduce(Render *R, const KStmt *s, int level) {
  if (!R->dl->shuffle_xor) {
    refuse(R, "warp shuffles");
    return;
  }
  if (s->tmp < 0 || s->tmp >= R->kk->ntmps) {
    rc_fail(R, "warp reduce of undeclared temporary %d", s->tmp);
    return;
  }
  const char *t = R->tmp_name[s->tmp];
  int fl = dtype_is_float(R->kk->tmp_dtype[s->tmp]);
  char shfl[160];
  snprintf(shfl, sizeof shfl, R->dl->shuffle_xor, t, "lt_off");
  StrBuf *o = R->out;
  sb_indent(o, level);
  sb_puts(o, "#pragma unroll\n");
  sb_indent(o, level);
  sb_printf(o, "for (int lt_off = 16; lt_off > 0; lt_off >>= 1) %s = ", t);
  if (s->rop == RED_ADD) sb_printf(o, "%s + %s;\n", t, shfl);
  else
    sb_printf(o, "%s(%s, %s);\n", s->rop == RED_MAX ? (fl ? "fmaxf" : "lt_maxi") : (fl ? "fminf" : "lt_mini"), t, shfl);
}

/* count consecutive elements into temporaries: 16-byte (or 8/4-byte) vector loads on CUDA, whose
 * 32-bit words are split into the elements; plain loads in C. */
/* KS_VSTORE: f32 temporaries to consecutive elements, 16 bytes a store where the dialect has vectors (CUDA; the flat
 * index is a multiple of count, so each store is aligned), else one element a store. */
static void put_vstore(Render *R, const KStmt *s, int level) {
  StrBuf *o = R->out;
  const char *name = s->buf >= 0 && s->buf < R->lp->nbufs ? R->buf_name[s->buf] : NULL;
  if (!name || s->count < 2 || s->count > 8 || s->tmp < 0 || s->tmp + s->count > R->kk->ntmps || s->dtype != DT_F32 ||
      R->lp->bufs[s->buf].dtype != DT_F32) {
    rc_fail(R, "malformed vector store to buffer %d", s->buf);
    return;
  }
  const LBuf *b = &R->lp->bufs[s->buf];
  Expr *roots[1] = {rc_flat_index(R, b, s->nidx, s->idx)};
  rc_cse_begin(R, roots, 1, level);
  if (!R->dl->bits_to_float) {
    for (int i = 0; i < s->count; i++) {
      sb_indent(o, level);
      sb_printf(o, "%s[", name);
      rc_put_ref(R, o, roots[0]);
      sb_printf(o, " + %d] = %s;\n", i, R->tmp_name[s->tmp + i]);
    }
    rc_cse_end(R);
    return;
  }
  const int per = s->count < 4 ? s->count : 4; /* f32 elements per vector: 16 bytes at most */
  const char *vt = per == 2 ? R->dl->vec2 : R->dl->vec4;
  for (int c = 0; c < s->count; c += per) {
    sb_indent(o, level);
    sb_printf(o, "*(%s *)(%s + ", vt, name);
    rc_put_ref(R, o, roots[0]);
    sb_printf(o, " + %d) = %s{", c, vt);
    for (int e = 0; e < per; e++) sb_printf(o, "%s__float_as_uint(%s)", e ? ", " : "", R->tmp_name[s->tmp + c + e]);
    sb_puts(o, "};\n");
  }
  rc_cse_end(R);
}

static void put_vload(Render *R, const KStmt *s, int level) {
  StrBuf *o = R->out;
  const char *name = s->buf >= 0 && s->buf < R->lp->nbufs ? R->buf_name[s->buf] : NULL;
  size_t size = dtype_size(s->dtype);
  if (!name || s->count < 2 || s->tmp < 0 || s->tmp + s->count > R->kk->ntmps ||
      R->lp->bufs[s->buf].dtype != s->dtype || (size != 2 && size != 4 && !dtype_is_quant(s->dtype)) ||
      (dtype_is_quant(s->dtype) && s->count != 8)) {
    rc_fail(R, "malformed vector load from buffer %d", s->buf);
    return;
  }
  const LBuf *b = &R->lp->bufs[s->buf];
  Expr *roots[1] = {rc_flat_index(R, b, s->nidx, s->idx)};
  rc_cse_begin(R, roots, 1, level);
  sb_indent(o, level);
  sb_printf(o, "%s ", rc_compute_type(R, s->dtype));
  for (int i = 0; i < s->count; i++) sb_printf(o, "%s%s", i ? ", " : "", R->tmp_name[s->tmp + i]);
  sb_puts(o, ";\n");
  if (dtype_is_quant(s->dtype) && R->dl->bits_to_float) { /* CUDA: eight elements decoded at once */
    sb_indent(o, level);
    sb_printf(o, "{\n");
    sb_indent(o, level + 1);
    sb_printf(o, "float lt_v[8];\n");
    sb_indent(o, level + 1);
    sb_printf(o, "lt_dq8_%s(%s, ", dtype_name(s->dtype), name);
    rc_put_ref(R, o, roots[0]);
    sb_puts(o, ", lt_v);\n");
    for (int i = 0; i < 8; i++) {
      sb_indent(o, level + 1);
      sb_printf(o, "%s = lt_v[%d];\n", R->tmp_name[s->tmp + i], i);
    }
    sb_indent(o, level);
    sb_puts(o, "}\n");
    rc_cse_end(R);
    return;
  }
  if (!R->dl->bits_to_float) {
    for (int i = 0; i < s->count; i++) {
      Expr *at = ex_add(R->pool, roots[0], ex_int(R->pool, i));
      sb_indent(o, level);
      sb_printf(o, "%s = ", R->tmp_name[s->tmp + i]);
      rc_put_load(R, o, ex_load(R->pool, s->buf, s->dtype, 1, &at, MEM_GLOBAL));
      sb_puts(o, ";\n");
    }
    rc_cse_end(R);
    return;
  }
  int per = (int)(16 / size) < s->count ? (int)(16 / size) : s->count; /* elements per vector */
  int words = per * (int)size / 4;
  const char *vt = words == 1 ? "unsigned int" : words == 2 ? R->dl->vec2 : R->dl->vec4;
  for (int c = 0; c < s->count; c += per) {
    sb_indent(o, level);
    sb_printf(o, "{\n");
    sb_indent(o, level + 1);
    sb_printf(o, "const %s lt_q = *(const %s *)(%s + ", vt, vt, name);
    rc_put_ref(R, o, roots[0]);
    sb_printf(o, " + %d);\n", c);
    for (int e = 0; e < per; e++) {
      int byte = e * (int)size;
      char word[16];
      snprintf(word, sizeof word, words == 1 ? "lt_q" : "lt_q.%c", "xyzw"[byte / 4]);
      char half[48];
      snprintf(half, sizeof half, "(unsigned short)(%s >> %d)", word, (byte % 4) * 8);
      sb_indent(o, level + 1);
      sb_printf(o, "%s = ", R->tmp_name[s->tmp + c + e]);
      switch (s->dtype) {
      case DT_F32: sb_printf(o, "%s(%s);\n", R->dl->bits_to_float, word); break;
      case DT_I32: sb_printf(o, "(%s)(%s)%s;\n", R->dl->i64, R->dl->i32, word); break;
      case DT_F16: sb_printf(o, "lt_f16_to_f32(%s);\n", half); break;
      default: sb_printf(o, "lt_bf16_to_f32(%s);\n", half); break;
      }
    }
    sb_indent(o, level);
    sb_puts(o, "}\n");
  }
  rc_cse_end(R);
}

/* The variables and temporaries an expression reads (a row cache's key), each once. */
typedef struct QKeys {
  const Expr *e[RC_QKEYS];
  int n, over, skip_var;
} QKeys;

static void find_qkeys(void *ctx, const Expr *e) {
  QKeys *k = ctx;
  if ((e->op != X_VAR || e->ival == k->skip_var) && e->op != X_TMP) return;
  for (int i = 0; i < k->n; i++)
    if (k->e[i]->op == e->op && k->e[i]->ival == e->ival) return;
  if (k->n < RC_QKEYS) k->e[k->n++] = e;
  else k->over = 1;
}

/* The kernel's temporaries that are fixed values: declared once (KS_DECL) and written by nothing else, from an
 * expression whose loads read global buffers the kernel does not write. */
typedef struct FixedTmps {
  const Expr *value[K_MAX_TMPS];
  unsigned char writes[K_MAX_TMPS];
} FixedTmps;

/* tmp as written by a declaration of `value` (declared twice: not fixed) */
static void declared(FixedTmps *f, int tmp, const Expr *value) {
  if (tmp < 0 || tmp >= K_MAX_TMPS) return;
  f->writes[tmp] = f->writes[tmp] ? 2 : 1;
  f->value[tmp] = value;
}

/* tmp as written by something else than its declaration: not fixed */
static void assigned(FixedTmps *f, int tmp) {
  if (tmp >= 0 && tmp < K_MAX_TMPS) f->writes[tmp] = 2;
}

static void find_tmp_writes(const KStmt *s, FixedTmps *f) {
  if (!s) return;
  switch (s->kind) {
  case KS_DECL: declared(f, s->tmp, s->value); break;
  case KS_ASSIGN:
  case KS_WARP_REDUCE:
  case KS_VQDOT: assigned(f, s->tmp); break;
  case KS_VLOAD:
    for (int i = 0; i < s->count; i++) assigned(f, s->tmp + i);
    break;
  case KS_QDOT:
    assigned(f, s->tmp);
    for (int t = 0; s->rows == 8 && t < 8; t++) assigned(f, s->row_tmp[t]);
    break;
  default: break;
  }
  for (int i = 0; i < s->nbody; i++) find_tmp_writes(s->body[i], f);
}

typedef struct LoadCheck {
  const KKernel *kk;
  int bad;
} LoadCheck;

static void check_fixed_load(void *ctx, const Expr *e) {
  LoadCheck *c = ctx;
  if (e->op != X_LOAD) return;
  if (e->aux != MEM_GLOBAL || kernel_param_of(c->kk, (int)e->ival, 1) >= 0) c->bad = 1;
}

static const Expr *fixed_value(const Render *R, const FixedTmps *f, int tmp) {
  if (tmp < 0 || tmp >= K_MAX_TMPS || f->writes[tmp] != 1 || !f->value[tmp]) return NULL;
  LoadCheck c = {R->kk, 0};
  ex_visit(f->value[tmp], check_fixed_load, &c);
  return c.bad ? NULL : f->value[tmp];
}

static int key_index(const QKeys *k, const Expr *e) {
  for (int i = 0; i < k->n; i++)
    if (k->e[i]->op == e->op && k->e[i]->ival == e->ival) return i;
  return -1;
}

/* Drops from k each fixed temporary whose value reads only keys that stay or were dropped before it, each a
 * variable or a fixed temporary: its value follows from theirs, so the key without it tells the same rows apart,
 * and what computes it (a norm's square root) is only needed where the row is filled. Only ever removes keys, so a
 * key never varies more. */
static void reduce_qkeys(const Render *R, QKeys *k) {
  FixedTmps f = {{0}, {0}};
  find_tmp_writes(R->kk->body, &f);
  int dropped[RC_QKEYS] = {0}, changed = 1;
  while (changed) {
    changed = 0;
    for (int i = 0; i < k->n; i++) {
      const Expr *v = dropped[i] || k->e[i]->op != X_TMP ? NULL : fixed_value(R, &f, (int)k->e[i]->ival);
      if (!v) continue;
      QKeys leaves = {.skip_var = -1};
      ex_visit(v, find_qkeys, &leaves);
      int ok = !leaves.over;
      for (int j = 0; ok && j < leaves.n; j++) { /* a leaf that can change later (an accumulator) would not do */
        const Expr *l = leaves.e[j];
        const int at = key_index(k, l);
        ok = at >= 0 && at != i && (l->op == X_VAR ? l->ival != k->skip_var : fixed_value(R, &f, (int)l->ival) != NULL);
      }
      if (ok) dropped[i] = changed = 1;
    }
  }
  int n = 0;
  for (int i = 0; i < k->n; i++)
    if (!dropped[i]) k->e[n++] = k->e[i];
  k->n = n;
}

/* C, KS_QROW: this thread's slot (lt_qr, lt_qk: render_c.c) is filled unless its key (a flag, then each key
 * value) says it holds this row; without them (no memory) an array of the point, filled every time. */
/* One activation row of n elements into dst: for (v = 0; v < n; v++) dst[v] = x. */
static void put_xrow(Render *R, const Expr *x, const char *v, int n, const char *dst, int level) {
  StrBuf *o = R->out;
  rc_line(R, level, "for (int64_t %s = 0; %s < %d; %s++) {", v, v, n, v);
  Expr *roots[1] = {(Expr *)x};
  rc_cse_begin(R, roots, 1, level + 1);
  sb_indent(o, level + 1);
  sb_printf(o, "%s[%s] = ", dst, v);
  rc_put_ref(R, o, roots[0]);
  sb_puts(o, ";\n");
  rc_cse_end(R);
  rc_line(R, level, "}");
}

static void put_qrow(Render *R, const KStmt *s, int level) {
  StrBuf *o = R->out;
  QKeys k = {.skip_var = s->var};
  const int tile = s->rows == 8 && s->nidx == 8;
  if (s->value) ex_visit(s->value, find_qkeys, &k);
  for (int t = 0; tile && t < 8; t++)
    if (s->idx[t]) ex_visit(s->idx[t], find_qkeys, &k);
  if (!k.over) reduce_qkeys(R, &k);
  const int f32 = s->dtype == DT_F32, half = s->dtype == DT_F16; /* half: f32 activations for f16 weights */
  if (R->dl != &rc_dialect_c || !(tile ? s->idx[7] != NULL : s->value != NULL) || (s->rows && !tile) || (tile && f32) ||
      s->count <= 0 || s->var < 0 || s->var >= L_MAX_VARS || k.over || !R->var_name[s->var] ||
      (f32 && (s->buf < 0 || s->buf >= RC_MAX_SMEM || !R->smem_name[s->buf]))) {
    rc_fail(R, "malformed row cache");
    return;
  }
  const int q = s->slot, n = f32 || half ? s->count : s->count * 32;
  const char *v = R->var_name[s->var], *type = f32 || half ? "float" : tile ? "lt_q16t" : "lt_q16x";
  char row[64];
  if (f32) snprintf(row, sizeof row, "%s", R->smem_name[s->buf]);
  else snprintf(row, sizeof row, "lt_q%d", q);
  rc_line(R, level, "%s lt_qs%d[%d];", type, q, half && tile ? 8 * s->count : s->count);
  rc_line(R, level, "double *const lt_qk%d = lt_qr ? lt_qk + (int64_t)lt_thread() * lt_qks + %d : 0;", q,
          q * (RC_QKEYS + 1));
  rc_line(R, level,
          "%s *const %s = lt_qr ? (%s *)(lt_qr + ((int64_t)lt_thread() * lt_nslots + %d) * lt_slot_bytes) : "
          "lt_qs%d;",
          type, row, type, q, q);
  sb_indent(o, level);
  sb_printf(o, "if (!lt_qk%d || lt_qk%d[0] == 0.0", q, q);
  for (int i = 0; i < k.n; i++) {
    sb_printf(o, " || lt_qk%d[%d] != (double)", q, i + 1);
    rc_put_ref(R, o, k.e[i]);
  }
  sb_puts(o, ") {\n");
  if (f32) { /* whole blocks, decoded by lt_dq_FORMAT_at's operations */
    const Expr *w = s->value;
    if (w->op != X_LOAD || !dtype_is_quant(w->dtype)) {
      rc_fail(R, "malformed row cache");
      return;
    }
    Expr *roots[1] = {rc_flat_index(R, &R->lp->bufs[w->ival], w->n, w->a)};
    int B = dtype_block_elems(w->dtype);
    rc_cse_begin(R, roots, 1, level + 1);
    sb_indent(o, level + 1);
    sb_printf(o, "lt_dqrow_%s(%s, (", dtype_name(w->dtype), R->buf_name[w->ival]);
    rc_put_ref(R, o, roots[0]);
    sb_printf(o, ") / %d, %d, %s);\n", B, s->count / B, row);
    rc_cse_end(R);
  } else if (half && !tile) { /* the row itself */
    put_xrow(R, s->value, v, n, row, level + 1);
  } else if (tile) { /* row by row into the tile's layout */
    rc_line(R, level + 1, "float lt_xr[%d];", n);
    for (int t = 0; t < 8; t++) {
      put_xrow(R, s->idx[t], v, n, "lt_xr", level + 1);
      if (half) rc_line(R, level + 1, "lt_htile_row(lt_xr, %s, %d, %d);", row, t, n);
      else rc_line(R, level + 1, "lt_q16t_row(lt_xr, %s, %d, %d);", row, t, s->count);
    }
  } else {
    rc_line(R, level + 1, "float lt_xr[%d];", n);
    put_xrow(R, s->value, v, n, "lt_xr", level + 1);
    rc_line(R, level + 1, "for (int lt_b = 0; lt_b < %d; lt_b++) lt_q16_block(lt_xr + 32 * lt_b, %s + lt_b);", s->count,
            row);
  }
  sb_indent(o, level + 1);
  sb_printf(o, "if (lt_qk%d) {\n", q);
  if (half && tile) rc_line(R, level + 2, "lt_qk%d[0] = lt_qk%d[0] + 1.0; /* the fills: lt_hdott_pc's key */", q, q);
  else rc_line(R, level + 2, "lt_qk%d[0] = 1.0;", q);
  for (int i = 0; i < k.n; i++) {
    sb_indent(o, level + 2);
    sb_printf(o, "lt_qk%d[%d] = (double)", q, i + 1);
    rc_put_ref(R, o, k.e[i]);
    sb_puts(o, ";\n");
  }
  rc_line(R, level + 1, "}");
  rc_line(R, level, "}");
}

/* C, KS_QDOT: acc = acc + lt_qdot_FORMAT(w, first block, blocks, row cache); f16 weights: acc = acc + lt_hdot(w +
 * first element, elements, row cache) (render_hdot.c). The tile forms: lt_qdott_FORMAT, lt_hdott. */
static void put_qdot(Render *R, const KStmt *s, int level) {
  StrBuf *o = R->out;
  const Expr *w = s->value;
  if (R->dl != &rc_dialect_c) {
    refuse(R, "integer dot products over quantized weights");
    return;
  }
  const int half = s->dtype == DT_F16;
  int ok = w && w->op == X_LOAD && s->tmp >= 0 && s->tmp < R->kk->ntmps && s->count > 0 &&
           (half || rc_quant_decoder(s->dtype)) && R->buf_name[w->ival] && (s->rows == 0 || s->rows == 8);
  for (int t = 0; ok && t < s->rows; t++) ok = s->row_tmp[t] >= 0 && s->row_tmp[t] < R->kk->ntmps;
  if (!ok) {
    rc_fail(R, "malformed quantized dot product");
    return;
  }
  Expr *roots[1] = {rc_flat_index(R, &R->lp->bufs[w->ival], w->n, w->a)};
  rc_cse_begin(R, roots, 1, level);
  const char *t = R->tmp_name[s->tmp];
  sb_indent(o, level);
  if (s->rows) { /* the tile form: the 8 rows' sums, then each row's accumulator */
    sb_printf(o, "{\n");
    rc_line(R, level + 1, "float lt_dt[8];");
    sb_indent(o, level + 1);
    if (half) { /* with the thread's pair cache of this statement, and the weights' end where it is constant */
      const LBuf *wb = &R->lp->bufs[w->ival];
      Expr *numel = shape_numel(R->pool, &wb->shape);
      const int pc = R->hpairs++;
      sb_printf(o, "lt_hdott_pc(%s + (", R->buf_name[w->ival]);
      rc_put_ref(R, o, roots[0]);
      sb_printf(
          o, "), %d, lt_q%d, lt_dt, lt_qr ? lt_hpc + (int64_t)lt_thread() * %d + %d : 0, lt_qk%d ? lt_qk%d[0] : 0.0, ",
          s->count, s->slot, R->hpairs_total, pc, s->slot, s->slot);
      if (numel->op == X_CONST) sb_printf(o, "%s + %lld);\n", R->buf_name[w->ival], (long long)numel->ival);
      else sb_puts(o, "0);\n");
    } else {
      sb_printf(o, "lt_qdott_%s(%s, (", dtype_name(s->dtype), R->buf_name[w->ival]);
      rc_put_ref(R, o, roots[0]);
      sb_printf(o, ") / %d, %d, lt_q%d, lt_dt);\n", dtype_block_elems(s->dtype), s->count, s->slot);
    }
    for (int r = 0; r < 8; r++) {
      const char *a = R->tmp_name[s->row_tmp[r]];
      rc_line(R, level + 1, "%s = (%s + lt_dt[%d]);", a, a, r);
    }
    rc_line(R, level, "}");
  } else if (half) {
    sb_printf(o, "%s = (%s + lt_hdot(%s + (", t, t, R->buf_name[w->ival]);
    rc_put_ref(R, o, roots[0]);
    sb_printf(o, "), %d, lt_q%d));\n", s->count, s->slot);
  } else {
    sb_printf(o, "%s = (%s + lt_qdot_%s(%s, (", t, t, dtype_name(s->dtype), R->buf_name[w->ival]);
    rc_put_ref(R, o, roots[0]);
    sb_printf(o, ") / %d, %d, lt_q%d));\n", dtype_block_elems(s->dtype), s->count, s->slot);
  }
  rc_cse_end(R);
}

static void put_stmt(Render *R, const KStmt *s, int level) {
  StrBuf *o = R->out;
  switch (s->kind) {
  case KS_SEQ: put_children(R, s, level); return;
  case KS_FOR:
  case KS_PARFOR: {
    if (s->kind == KS_PARFOR && !R->dl->parallel_for) {
      refuse(R, "parallel-for");
      return;
    }
    Expr *roots[4] = {s->lo ? s->lo : ex_int(R->pool, 0), s->hi, s->step ? s->step : ex_int(R->pool, 1), NULL};
    if (s->kind == KS_PARFOR) roots[0] = ex_int(R->pool, 0), roots[2] = ex_int(R->pool, 1);
    int nroots = s->kind == KS_PARFOR && s->cond ? 4 : 3;
    if (nroots == 4) roots[3] = s->cond;
    rc_cse_begin(R, roots, nroots, level);
    const char *v = s->var >= 0 && s->var < L_MAX_VARS ? R->var_name[s->var] : NULL;
    if (!v) {
      rc_cse_end(R);
      rc_fail(R, "loop variable %d has no name", s->var);
      return;
    }
    if (s->kind == KS_PARFOR) {
      sb_indent(o, level);
      sb_puts(o, R->dl->parallel_for);
      if (nroots == 4) { /* OpenMP's if clause: a team of one where the work is small */
        sb_puts(o, " if(");
        rc_put_ref(R, o, roots[3]);
        sb_putc(o, ')');
      }
      sb_putc(o, '\n');
    }
    sb_indent(o, level);
    sb_printf(o, "for (%s %s = ", i64_name(R), v);
    rc_put_ref(R, o, roots[0]);
    sb_printf(o, "; %s < ", v);
    rc_put_ref(R, o, roots[1]);
    if (ex_is_int_const(roots[2], 1)) sb_printf(o, "; %s++) {\n", v);
    else {
      sb_printf(o, "; %s += ", v);
      rc_put_ref(R, o, roots[2]);
      sb_puts(o, ") {\n");
    }
    rc_cse_end(R);
    put_children(R, s, level + 1);
    sb_indent(o, level);
    sb_puts(o, "}\n");
    return;
  }
  case KS_IF: {
    Expr *roots[1] = {s->cond};
    rc_cse_begin(R, roots, 1, level);
    sb_indent(o, level);
    sb_puts(o, "if (");
    rc_put_ref(R, o, roots[0]);
    sb_puts(o, ") {\n");
    rc_cse_end(R);
    put_children(R, s, level + 1);
    sb_indent(o, level);
    sb_puts(o, "}\n");
    return;
  }
  case KS_DECL:
  case KS_ASSIGN: {
    if (s->tmp < 0 || s->tmp >= R->kk->ntmps) {
      rc_fail(R, "temporary %d is not declared", s->tmp);
      return;
    }
    Expr *roots[1] = {s->value};
    rc_cse_begin(R, roots, 1, level);
    sb_indent(o, level);
    if (s->kind == KS_DECL) sb_printf(o, "%s ", rc_compute_type(R, s->dtype));
    sb_printf(o, "%s = ", R->tmp_name[s->tmp]);
    rc_put_ref(R, o, roots[0]);
    sb_puts(o, ";\n");
    rc_cse_end(R);
    return;
  }
  case KS_STORE: put_store(R, s, level); return;
  case KS_SMEM:
    if (!R->dl->shared) {
      refuse(R, "shared memory");
      return;
    }
    sb_indent(o, level);
    sb_printf(o, "%s%s%s %s[%d];\n", R->dl->shared, *R->dl->shared ? " " : "", rc_compute_type(R, s->dtype),
              R->smem_name[s->buf], s->count);
    return;
  case KS_BARRIER:
    if (!R->dl->barrier) {
      refuse(R, "barriers");
      return;
    }
    sb_indent(o, level);
    sb_printf(o, "%s\n", R->dl->barrier);
    return;
  case KS_WARP_REDUCE: put_warp_reduce(R, s, level); return;
  case KS_VLOAD: put_vload(R, s, level); return;
  case KS_QROW:
    if (R->dl != &rc_dialect_c) refuse(R, "integer dot products over quantized weights");
    else put_qrow(R, s, level);
    return;
  case KS_QDOT: put_qdot(R, s, level); return;
  case KS_VQDOT: rc_put_vqdot(R, s, level); return;
  case KS_VSTORE: put_vstore(R, s, level); return;
  case KS_MMA:
    if (!R->dl->templates) {
      refuse(R, "tensor-core matrix multiply");
      return;
    }
    rc_put_mma(R, s, level);
    return;
  case KS_FLASH:
    if (R->dl == &rc_dialect_c && s->flash && s->flash->decode) {
      rc_put_flash_cpu(R, s, level);
      return;
    }
    if (!R->dl->templates) {
      refuse(R, "flash attention");
      return;
    }
    if (s->flash && s->flash->decode) rc_put_flash_decode(R, s, level);
    else rc_put_flash(R, s, level);
    return;
  }
  rc_fail(R, "unknown statement kind %d", (int)s->kind);
}

void rc_body(Render *R, int level) {
  if (R->kk->body) put_stmt(R, R->kk->body, level);
}

int code_dedupe(KProgram *kp, Diag *d) {
  typedef struct Seen {
    uint64_t hash;
    char *text;
    const char *name;
  } Seen;
  /* every kernel and every variant, variants compared among themselves too */
  int n = 0;
  KKernel **all = xcalloc((size_t)(4 * kp->nkernels + 1), sizeof *all, "the kernel deduplication");
  Seen *seen = xcalloc((size_t)(4 * kp->nkernels + 1), sizeof *seen, "the kernel deduplication");
  for (int i = 0; i < kp->nkernels; i++)
    if (!kp->kernels[i].skip) all[n++] = &kp->kernels[i];
  for (int i = 0; i < kp->nkernels; i++)
    if (kp->kernels[i].alt && !kp->kernels[i].alt->skip) {
      all[n++] = kp->kernels[i].alt;
      if (kp->kernels[i].alt->pre) all[n++] = kp->kernels[i].alt->pre;
      if (kp->kernels[i].alt->lib) all[n++] = kp->kernels[i].alt->lib->epilogue;
    }
  int nseen = 0, ok = 1;
  for (int i = 0; i < n && ok; i++) {
    KKernel *kk = all[i];
    kk->code_name = NULL;
    StrBuf t = {0};
    Render R = {0};
    R.out = &t;
    R.kp = kp;
    R.d = d;
    R.dl = kp->target == TARGET_CUDA ? &rc_dialect_cuda : &rc_dialect_c;
    R.canonical = 1;
    (kp->target == TARGET_CUDA ? rc_cuda_kernel : rc_c_kernel)(&R, kk);
    if (R.failed) {
      ok = 0;
      sb_free(&t);
      break;
    }
    /* the text without the kernel's own name, which appears once, in the signature */
    char *text = xstrdup(sb_str(&t), "a kernel's text"), *at = strstr(text, kk->name);
    if (at) memmove(at, at + strlen(kk->name), strlen(at + strlen(kk->name)) + 1);
    uint64_t h = hash_str(HASH_SEED, text);
    int dup = -1;
    for (int j = 0; j < nseen && dup < 0; j++)
      if (seen[j].hash == h && !strcmp(seen[j].text, text)) dup = j;
    if (dup >= 0) {
      kk->code_name = seen[dup].name;
      free(text);
    } else {
      seen[nseen++] = (Seen){h, text, kk->name};
    }
    sb_free(&t);
  }
  for (int j = 0; j < nseen; j++) free(seen[j].text);
  free(seen);
  free(all);
  return ok ? nseen : -1;
}

int render_code(StrBuf *out, const KProgram *kp, Diag *d) {
  return kp->target == TARGET_CUDA ? render_cuda(out, kp, d) : render_c(out, kp, d);
}

void rc_line(Render *R, int level, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0 || n >= (int)sizeof buf) { /* names are short; never emit a cut line */
    rc_fail(R, "%s: a generated line is too long", R->kk && R->kk->name ? R->kk->name : "kernel");
    return;
  }
  sb_indent(R->out, level);
  sb_puts(R->out, buf);
  sb_putc(R->out, '\n');
}

void rc_bind_flat(Render *R, int level, const int *vars, const int64_t *ext, int n, const char *flat) {
  int64_t stride = 1;
  for (int i = n - 1; i >= 0; i--) {
    rc_line(R, level, "const %s %s = (%s / %lldLL) %% %lldLL;", R->dl->i64, R->var_name[vars[i]], flat,
            (long long)stride, (long long)ext[i]);
    stride *= ext[i];
  }
}
