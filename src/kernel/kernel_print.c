/* `--ir kernel`: the statement tree of each kernel, one statement a line, bodies indented. */
#include <stdio.h>
#include "kernel.h"

typedef struct PrintNames {
  const KProgram *kp;
  const KKernel *kk;
  char scratch[32]; /* for shared-memory names, used at once by ex_print */
} PrintNames;

static const char *pn_var(void *ctx, int v) {
  PrintNames *n = ctx;
  if (v >= 0 && v < n->kk->nvars && n->kk->var_names[v]) return n->kk->var_names[v];
  snprintf(n->scratch, sizeof n->scratch, "x%d", v);
  return n->scratch;
}

static const char *pn_buf(void *ctx, int b, MemSpace space) {
  PrintNames *n = ctx;
  if (space == MEM_GLOBAL && b >= 0 && b < n->kp->loop->nbufs) return n->kp->loop->bufs[b].name;
  snprintf(n->scratch, sizeof n->scratch, "%s%d", space == MEM_SHARED ? "smem" : "buf", b);
  return n->scratch;
}

static const char *pn_tmp(void *ctx, int t) {
  PrintNames *n = ctx;
  if (t >= 0 && t < n->kk->ntmps && n->kk->tmp_names[t]) return n->kk->tmp_names[t];
  snprintf(n->scratch, sizeof n->scratch, "t%d", t);
  return n->scratch;
}

static const char *rop_name(ReduceOp op) { return op == RED_MAX ? "max" : op == RED_MIN ? "min" : "sum"; }

static void print_stmt(StrBuf *b, const KStmt *s, const ExprNames *nm, int level);

static void print_axes(StrBuf *b, PrintNames *n, const int *vars, const int64_t *ext, int count) {
  for (int i = 0; i < count; i++) sb_printf(b, "%s%s < %lld", i ? ", " : "", pn_var(n, vars[i]), (long long)ext[i]);
}

/* A GEMM's (or the quantized GEMV's) A, each weight and its accumulator, then its store */
static void print_gemm_operands(StrBuf *b, const KMma *m, const ExprNames *nm, int child) {
  ex_print(b, m->a, nm);
  for (int i = 0; i < m->nb; i++) {
    sb_printf(b, i ? ", acc%d: * " : " * (acc%d: ", i);
    ex_print(b, m->b[i], nm);
  }
  sb_puts(b, "), then per element:\n");
  print_stmt(b, m->store, nm, child);
}

static void print_flash(StrBuf *b, const KFlash *f, const ExprNames *nm, int child) {
  PrintNames *n = nm->ctx;
  if (f->decode) {
    /* without key chunks: the CPU's form (code/render_flash_cpu.c) */
    sb_puts(b, f->chunks ? "flash-decoding, f32: " : "flash attention, f32, one C loop over rows and groups: ");
    if (f->m_var >= 0) {
      sb_printf(b, "row %s < ", pn_var(n, f->m_var));
      ex_print(b, f->m_extent, nm);
    } else {
      sb_puts(b, "one row");
    }
  }
  if (f->decode && f->chunks) {
    sb_printf(b, ", %d head%s a block", f->rows, f->rows > 1 ? "s sharing k and v in" : " in");
    if (f->share >= 0) sb_printf(b, " (%s)", pn_var(n, f->group_var[f->share]));
    sb_puts(b, ", key chunks ");
    ex_print(b, f->chunks, nm);
    if (f->vec) sb_puts(b, ", k and v 8 elements a load");
  } else if (f->decode && f->vec) { /* the CPU's vector form */
    sb_printf(b, ", %d head%s an item", f->rows, f->rows > 1 ? "s sharing k and v in" : " in");
    if (f->share >= 0) sb_printf(b, " (%s)", pn_var(n, f->group_var[f->share]));
    sb_puts(b, ", rows as vectors");
    if (f->vec_rows > 0) sb_printf(b, " up to %d rows", f->vec_rows);
  } else if (!f->decode) {
    sb_printf(b, "flash attention, bf16 tensor cores (x%d): rows %s < ", f->parts, pn_var(n, f->m_var));
    ex_print(b, f->m_extent, nm);
  }
  sb_puts(b, ", groups ");
  print_axes(b, n, f->group_var, f->group_ext, f->ngroup);
  sb_puts(b, ", values ");
  print_axes(b, n, f->value_var, f->value_ext, f->nvalue);
  sb_printf(b, ", keys %s < ", pn_var(n, f->t_var));
  ex_print(b, f->t_extent, nm);
  if (f->t_last) {
    sb_printf(b, " (up to %s = ", pn_var(n, f->t_var));
    ex_print(b, f->t_last, nm);
    sb_puts(b, ")");
  }
  sb_putc(b, '\n');
  sb_indent(b, child);
  sb_printf(b, "%s = sum over %s < %lld of ", pn_tmp(n, f->s_tmp), pn_var(n, f->d_var), (long long)f->d_extent);
  ex_print(b, f->q, nm);
  sb_puts(b, " * ");
  ex_print(b, f->k, nm);
  sb_putc(b, '\n');
  sb_indent(b, child);
  sb_puts(b, "score = ");
  ex_print(b, f->score, nm);
  sb_putc(b, '\n');
  sb_indent(b, child);
  sb_printf(b, "%s = sum over %s of softmax(score) * ", pn_tmp(n, f->o_tmp), pn_var(n, f->t_var));
  ex_print(b, f->v, nm);
  sb_puts(b, ", then per element:\n");
  print_stmt(b, f->store, nm, child);
}

/* qrow0 = int16 blocks of (x[i1, r0] * 2.0) over r0 < 576;  qrow1 = smem0: f32 row w[i1, 0] .. 576 elements;
 * acc0 += qdot(w[i1, 0] .. 18 blocks, qrow0); the tile forms:
 * qrow0 = int16 tile of 8 rows x[row0, r0], x[inv, r0], ... over r0 < 576;
 * acc0, acc0_1, ... += qdot tile(w[i1, 0] .. 18 blocks, qrow0); over f16 weights (elements, the rows in f32):
 * qrow0 = f32 row of x[i1, r0] over r0 < 576;  acc0 += hdot(w[i1, 0] .. 576 elements, qrow0) */
static void print_qtile(StrBuf *b, const KStmt *s, PrintNames *n, const ExprNames *nm) {
  if (s->kind == KS_QROW) {
    sb_printf(b, "qrow%d = %s tile of %d rows ", s->slot, s->dtype == DT_F16 ? "f32" : "int16", s->nidx);
    for (int t = 0; t < s->nidx; t++) {
      if (t) sb_puts(b, ", ");
      ex_print(b, s->idx[t], nm);
    }
    sb_printf(b, " over %s < %d\n", pn_var(n, s->var), s->dtype == DT_F16 ? s->count : s->count * 32);
    return;
  }
  for (int t = 0; t < s->rows; t++) sb_printf(b, "%s%s", t ? ", " : "", pn_tmp(n, s->row_tmp[t]));
  sb_puts(b, s->dtype == DT_F16 ? " += hdot tile(" : " += qdot tile(");
  ex_print(b, s->value, nm);
  sb_printf(b, " .. %d %s, qrow%d)\n", s->count, s->dtype == DT_F16 ? "elements" : "blocks", s->slot);
}

static void print_qstmt(StrBuf *b, const KStmt *s, PrintNames *n, const ExprNames *nm) {
  if (s->rows) {
    print_qtile(b, s, n, nm);
    return;
  }
  const int half = s->dtype == DT_F16;
  if (s->kind == KS_QDOT) sb_printf(b, "%s += %s(", pn_tmp(n, s->tmp), half ? "hdot" : "qdot");
  else if (s->dtype == DT_F32) sb_printf(b, "qrow%d = smem%d: f32 row ", s->slot, s->buf);
  else if (half) sb_printf(b, "qrow%d = f32 row of ", s->slot);
  else sb_printf(b, "qrow%d = int16 blocks of ", s->slot);
  ex_print(b, s->value, nm);
  if (s->kind == KS_QDOT) sb_printf(b, " .. %d %s, qrow%d)\n", s->count, half ? "elements" : "blocks", s->slot);
  else if (s->dtype == DT_F32) sb_printf(b, " .. %d elements\n", s->count);
  else sb_printf(b, " over %s < %d\n", pn_var(n, s->var), half ? s->count : s->count * 32);
}

static void print_stmt(StrBuf *b, const KStmt *s, const ExprNames *nm, int level) {
  PrintNames *n = nm->ctx;
  int child = level + 1;
  if (s->kind != KS_SEQ) sb_indent(b, level);
  switch (s->kind) {
  case KS_SEQ: child = level; break;
  case KS_FOR: {
    const char *v = pn_var(n, s->var);
    sb_printf(b, "for %s = ", v);
    ex_print(b, s->lo, nm);
    sb_printf(b, "; %s < ", pn_var(n, s->var));
    ex_print(b, s->hi, nm);
    sb_printf(b, "; %s += ", pn_var(n, s->var));
    ex_print(b, s->step, nm);
    sb_puts(b, ":\n");
    break;
  }
  case KS_PARFOR:
    sb_printf(b, "parallel for %s < ", pn_var(n, s->var));
    ex_print(b, s->hi, nm);
    sb_puts(b, ":\n");
    break;
  case KS_IF:
    sb_puts(b, "if ");
    ex_print(b, s->cond, nm);
    sb_puts(b, ":\n");
    break;
  case KS_DECL:
    sb_printf(b, "%s: %s = ", pn_tmp(n, s->tmp), dtype_name(s->dtype));
    ex_print(b, s->value, nm);
    sb_putc(b, '\n');
    break;
  case KS_ASSIGN:
    sb_printf(b, "%s = ", pn_tmp(n, s->tmp));
    ex_print(b, s->value, nm);
    sb_putc(b, '\n');
    break;
  case KS_STORE:
    sb_printf(b, "%s[", pn_buf(n, s->buf, s->space));
    for (int i = 0; i < s->nidx; i++) {
      if (i) sb_puts(b, ", ");
      ex_print(b, s->idx[i], nm);
    }
    sb_puts(b, "] = ");
    ex_print(b, s->value, nm);
    sb_putc(b, '\n');
    break;
  case KS_SMEM: sb_printf(b, "smem smem%d: %s[%d]\n", s->buf, dtype_name(s->dtype), s->count); break;
  case KS_BARRIER: sb_puts(b, "barrier\n"); break;
  case KS_VLOAD:
    sb_printf(b, "%s..", pn_tmp(n, s->tmp));
    sb_printf(b, "%s: %s = vload%d ", pn_tmp(n, s->tmp + s->count - 1), dtype_name(s->dtype), s->count);
    sb_printf(b, "%s[", pn_buf(n, s->buf, MEM_GLOBAL));
    for (int i = 0; i < s->nidx; i++) {
      if (i) sb_puts(b, ", ");
      ex_print(b, s->idx[i], nm);
    }
    sb_puts(b, "]\n");
    break;
  case KS_QROW:
  case KS_QDOT: print_qstmt(b, s, n, nm); break;
  case KS_VQDOT:
    sb_printf(b, "%s += qdot8(", pn_tmp(n, s->tmp));
    if (s->value) ex_print(b, s->value, nm);
    sb_printf(b, ", %s..", pn_tmp(n, s->xtmp));
    sb_printf(b, "%s)\n", pn_tmp(n, s->xtmp + 7));
    break;
  case KS_VSTORE:
    sb_printf(b, "vstore%d %s[", s->count, pn_buf(n, s->buf, MEM_GLOBAL));
    for (int i = 0; i < s->nidx; i++) {
      if (i) sb_puts(b, ", ");
      ex_print(b, s->idx[i], nm);
    }
    sb_printf(b, "] = %s..", pn_tmp(n, s->tmp));
    sb_printf(b, "%s\n", pn_tmp(n, s->tmp + s->count - 1));
    break;
  case KS_FLASH:
    if (s->flash) print_flash(b, s->flash, nm, child);
    return;
  case KS_MMA:
    if (s->mma && s->mma->role == MMA_EPILOGUE) {
      const KMma *m = s->mma;
      sb_printf(b, "rows %s < ", pn_var(n, m->m_var));
      ex_print(b, m->m_extent, nm);
      sb_printf(b, ", %lld columns: each sum read from the products in the scratch, then per element:\n",
                (long long)m->n_total);
      print_stmt(b, m->store, nm, child);
    } else if (s->mma && s->mma->role == MMA_PACK) {
      const KMma *m = s->mma;
      sb_printf(b, "pack A into %d bf16 plane%s of scratch: rows %s < ", m->a_parts, m->a_parts > 1 ? "s" : "",
                pn_var(n, m->m_var));
      ex_print(b, m->m_extent, nm);
      sb_printf(b, ", %s < %lld: ", pn_var(n, m->k_var), (long long)m->k_extent);
      ex_print(b, m->a, nm);
      if (m->stat_body) {
        sb_printf(b, "; first, one block per row: stat = sum over %s < %lld of ", pn_var(n, m->stat_var),
                  (long long)m->stat_extent);
        ex_print(b, m->stat_body, nm);
      }
      for (int w = 0; w < m->nb; w++)
        if (m->wq_at[w] >= 0 && !(w == 1 && m->b[1]->ival == m->b[0]->ival)) {
          sb_puts(b, "; dequantize ");
          ex_print(b, m->b[w], nm);
          sb_printf(b, " whole to bf16 at scratch byte %lld", (long long)m->wq_at[w]);
        }
      sb_putc(b, '\n');
    } else if (s->mma && s->mma->role == MMA_QGEMV) {
      const KMma *m = s->mma;
      sb_printf(b, "qgemv (24-bit activations, int8 mma): a block per row %s < ", pn_var(n, m->m_var));
      ex_print(b, m->m_extent, nm);
      sb_printf(b, " and %d of %lld columns, %d warps splitting k, sum over %s < %lld of ", QGEMV_COLS,
                (long long)m->n_total, m->qwarps, pn_var(n, m->k_var), (long long)m->k_extent);
      print_gemm_operands(b, m, nm, child);
    } else if (s->mma) {
      const KMma *m = s->mma;
      sb_printf(b, "mma bf16 tensor cores (A from the scratch planes, k stages of %d): rows %s < ", m->bk,
                pn_var(n, m->m_var));
      ex_print(b, m->m_extent, nm);
      sb_printf(b, ", %lld columns, sum over %s < %lld", (long long)m->n_total, pn_var(n, m->k_var),
                (long long)m->k_extent);
      if (m->split_max > 1) sb_printf(b, " (split over up to %d blocks)", m->split_max);
      sb_puts(b, " of ");
      print_gemm_operands(b, m, nm, child);
    }
    break;
  case KS_WARP_REDUCE: {
    const char *t = pn_tmp(n, s->tmp);
    sb_printf(b, "%s = warp_%s(", t, rop_name(s->rop));
    sb_printf(b, "%s)\n", pn_tmp(n, s->tmp));
    break;
  }
  }
  for (int i = 0; i < s->nbody; i++) print_stmt(b, s->body[i], nm, child);
}

static const char *red_name(RedStrategy r) { return r == RS_WARP ? "warp" : r == RS_BLOCK ? "block" : "serial"; }

static void print_kernel(StrBuf *b, const KProgram *kp, const KKernel *kk) {
  const LProgram *lp = kp->loop;
  if (kk->skip) { /* a kernel that launches nothing (flash-decoding computes its output) */
    sb_printf(b, "kernel %s: nothing: %s computes it\n", kk->name, kk->by);
    return;
  }
  sb_printf(b, "kernel %s(", kk->name);
  for (int i = 0; i < kk->nparams; i++) {
    const LBuf *buf = &lp->bufs[kk->params[i].buf];
    sb_printf(b, "%s%s%s: %s", i ? ", " : "", kk->params[i].is_output ? "out " : "", buf->name, dtype_name(buf->dtype));
    shape_print(b, &buf->shape);
  }
  for (int i = 0; i < kk->nsyms; i++) sb_printf(b, "%s%s: i64", kk->nparams || i ? ", " : "", kk->syms[i]);
  sb_putc(b, ')');
  if (kp->target == TARGET_CUDA) {
    sb_puts(b, " grid=");
    ex_print(b, kk->grid, NULL);
    sb_printf(b, " block=%d red=%s", kk->block, red_name(kk->sched.red));
  } else {
    sb_printf(b, " cpu%s", kk->sched.omp ? " omp" : "");
  }
  if (kk->sched.vec > 1) sb_printf(b, " vec=%d", kk->sched.vec);
  if (kk->code_name) { /* the same code as an earlier kernel: its body is not repeated */
    sb_printf(b, "  = code of %s\n", kk->code_name);
    return;
  }
  sb_putc(b, '\n');
  PrintNames n = {kp, kk, {0}};
  ExprNames nm = {&n, pn_var, pn_buf, NULL, NULL, pn_tmp};
  print_stmt(b, kk->body, &nm, 1);
}

void kernel_print(StrBuf *b, const KProgram *kp) {
  for (int i = 0; i < kp->nkernels; i++) {
    if (i) sb_putc(b, '\n');
    print_kernel(b, kp, &kp->kernels[i]);
    const KKernel *alt = kp->kernels[i].alt;
    if (alt) {
      sb_puts(b, "\nvariant, launched instead when ");
      ex_print(b, kp->kernels[i].alt_when, NULL);
      sb_puts(b, ":\n");
      if (alt->skip) {
        sb_printf(b, "nothing: %s computes it\n", alt->by);
        continue;
      }
      if (alt->pre) {
        sb_puts(b, "after its pre-pass:\n");
        print_kernel(b, kp, alt->pre);
      }
      print_kernel(b, kp, alt);
      if (alt->lib) {
        const KGemmLib *lib = alt->lib;
        PrintNames names = {kp, alt, {0}};
        sb_puts(b, "or, where cuBLASLt loads, after the pre-pass: cuBLASLt products of the A planes with");
        for (int w = 0; w < lib->nw; w++)
          sb_printf(b, "%s %s%s [%lld, %lld]", w ? " and" : "", lib->w_at[w] >= 0 ? "the bf16 copy of " : "",
                    pn_buf(&names, alt->params[lib->w_param[w]].buf, MEM_GLOBAL), (long long)lib->w_rows[w],
                    (long long)lib->k);
        if (lib->direct_out >= 0) {
          sb_printf(b, ", straight into %s", pn_buf(&names, alt->params[lib->direct_out].buf, MEM_GLOBAL));
          if (lib->direct_add >= 0)
            sb_printf(b, ", adding %s", pn_buf(&names, alt->params[lib->direct_add].buf, MEM_GLOBAL));
          sb_puts(b, " (no epilogue)\n");
          continue;
        }
        sb_puts(b, ", then:\n");
        print_kernel(b, kp, lib->epilogue);
      }
    }
  }
}
