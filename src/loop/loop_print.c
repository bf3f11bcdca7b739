/* `--ir loop`: the buffers, then each kernel's loop nest. */
#include "loop.h"

typedef struct {
  const LProgram *p;
  const LKernel *k;
} NameCtx;

static const char *var_name(void *ctx, int v) {
  const LKernel *k = ((NameCtx *)ctx)->k;
  return v < k->nvars && k->var_names[v] ? k->var_names[v] : "?";
}
static const char *buf_name(void *ctx, int b, MemSpace s) {
  const LProgram *p = ((NameCtx *)ctx)->p;
  return b < p->nbufs ? p->bufs[b].name : "?";
}
static const char *acc_name(void *ctx, int i) {
  static const char *names[L_MAX_PHASES] = {"acc0", "acc1", "acc2", "acc3", "acc4", "acc5", "acc6", "acc7"};
  return i < L_MAX_PHASES ? names[i] : "acc?";
}

ExprNames loop_expr_names(const LProgram *p, const LKernel *k) {
  /* The context must outlive the returned struct's uses: keep it in the arena. */
  NameCtx *c = ARENA_NEW(p->arena, NameCtx);
  c->p = p;
  c->k = k;
  ExprNames n = {c, var_name, buf_name, NULL, acc_name, NULL};
  return n;
}

static const char *red_name(ReduceOp op) {
  switch (op) {
  case RED_ADD: return "sum";
  case RED_MAX: return "max";
  default: return "min";
  }
}

static void print_axes(StrBuf *b, const LAxis *ax, int n, const ExprNames *nm) {
  for (int i = 0; i < n; i++) {
    if (i) sb_puts(b, ", ");
    sb_printf(b, "%s < ", nm->var(nm->ctx, ax[i].var));
    ex_print(b, ax[i].extent, NULL);
  }
}

static const char *kind_name(LBufKind k) { return k == BUF_INPUT ? "input" : k == BUF_OUTPUT ? "output" : "temp"; }

void loop_print(StrBuf *b, const LProgram *p) {
  for (int i = 0; i < p->nbufs; i++) {
    const LBuf *f = &p->bufs[i];
    sb_printf(b, "%s %s: %s", kind_name(f->kind), f->name, dtype_name(f->dtype));
    shape_print(b, &f->shape);
    sb_putc(b, '\n');
  }
  for (int i = 0; i < p->nkernels; i++) {
    const LKernel *k = &p->kernels[i];
    ExprNames nm = loop_expr_names(p, k);
    sb_printf(b, "\nkernel %s -> %s\n", k->name, p->bufs[k->out_buf].name);
    int lvl = 1;
    if (k->npar) {
      sb_indent(b, lvl++);
      sb_puts(b, "for ");
      print_axes(b, k->par, k->npar, &nm);
      sb_puts(b, " parallel:\n");
    }
    for (int ph = 0; ph < k->nphase; ph++) {
      const LPhase *f = &k->phases[ph];
      sb_indent(b, lvl);
      sb_printf(b, "acc%d: %s = %s over ", ph, dtype_name(f->acc_dtype), red_name(f->op));
      print_axes(b, f->axes, f->naxes, &nm);
      sb_puts(b, f->recompute ? " (recomputed per point)" : "");
      sb_puts(b, ":\n");
      sb_indent(b, lvl + 1);
      ex_print(b, f->body, &nm);
      sb_putc(b, '\n');
    }
    if (k->ninner) {
      sb_indent(b, lvl++);
      sb_puts(b, "for ");
      print_axes(b, k->inner, k->ninner, &nm);
      sb_puts(b, ":\n");
    }
    sb_indent(b, lvl);
    if (k->out_valid) {
      sb_puts(b, "if ");
      ex_print(b, k->out_valid, &nm);
      sb_puts(b, ": ");
    }
    sb_printf(b, "%s[", p->bufs[k->out_buf].name);
    for (int d = 0; d < p->bufs[k->out_buf].shape.rank; d++) {
      if (d) sb_puts(b, ", ");
      ex_print(b, k->out_idx[d], &nm);
    }
    sb_puts(b, "] = ");
    ex_print(b, k->value, &nm);
    sb_putc(b, '\n');
  }
}
