/* Printer for `--ir graph`. The output reads like the input language: inputs first, one line per op,
 * constants inline, attributes as keywords, then `return`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "graph.h"

/* Shortest %g spelling that reads back as the same double. */
static void put_double(StrBuf *b, double v) {
  char s[40];
  for (int prec = 6; prec <= 17; prec++) {
    snprintf(s, sizeof s, "%.*g", prec, v);
    if (strtod(s, NULL) == v || isnan(v)) break;
  }
  sb_puts(b, s);
}

static void put_ref(StrBuf *b, const Graph *g, int id) {
  const GNode *n = &g->nodes[id];
  if (n->op == G_CONST) {
    if (!dtype_is_float(n->dtype)) {
      sb_printf(b, "%lld", (long long)n->attr.ivalue);
      return;
    }
    size_t start = b->len;
    put_double(b, n->attr.value);
    /* keep float literals float when read back: 2 -> 2.0 */
    if (!strpbrk(b->data + start, ".eni")) sb_puts(b, ".0");
    return;
  }
  if (n->name) sb_puts(b, n->name);
  else sb_printf(b, "t%d", n->id);
}

static void put_ints(StrBuf *b, const int *v, int n) {
  sb_putc(b, '[');
  for (int i = 0; i < n; i++) sb_printf(b, i ? ",%d" : "%d", v[i]);
  sb_putc(b, ']');
}

/* The op's attributes as keyword arguments, in the order of its parameters in ops.def. */
static void put_attrs(StrBuf *b, const GNode *n) {
  const GAttr *a = &n->attr;
  const GOpInfo *info = gop_info(n->op);
  for (int i = 0; info && i < info->nparams; i++) {
    const GParam *p = &info->params[i];
    const void *field = (const char *)a + p->offset;
    if (p->kind == GP_TENSOR) continue;
    if ((p->flags & GPF_OMIT_AT_MAX_IN) && n->nin == info->max_in) continue;
    if (p->kind == GP_FLAG && (p->flags & GPF_OMIT_FALSE) && !*(const int *)field) continue;
    sb_printf(b, ", %s=", p->name);
    switch (p->kind) {
    case GP_AXES:
      if (a->naxes == 1) sb_printf(b, "%d", a->axes[0]);
      else put_ints(b, a->axes, a->naxes);
      break;
    case GP_PERM: put_ints(b, a->axes, a->naxes); break;
    case GP_AXIS: sb_printf(b, "%d", *(const int *)field); break;
    case GP_NUM: put_double(b, *(const double *)field); break;
    case GP_FLAG: sb_puts(b, *(const int *)field ? "true" : "false"); break;
    case GP_INDEX:
    case GP_POSITION: ex_print(b, *(Expr *const *)field, NULL); break;
    case GP_SHAPE: shape_print(b, &n->shape); break;
    case GP_DTYPE: sb_puts(b, dtype_name(n->dtype)); break;
    case GP_TENSOR:
    case GP_SWAP: break;
    }
  }
}

void graph_print(StrBuf *b, const Graph *g) {
  for (int i = 0; i < g->ninputs; i++) {
    const GNode *n = &g->nodes[g->inputs[i]];
    sb_printf(b, "%s: %s", n->name, dtype_name(n->dtype));
    shape_print(b, &n->shape);
    sb_putc(b, '\n');
  }
  for (int i = 0; i < g->n; i++) {
    const GNode *n = &g->nodes[i];
    if (n->op == G_INPUT || n->op == G_CONST) continue;
    put_ref(b, g, i);
    sb_printf(b, " = %s(", gop_name(n->op));
    for (int j = 0; j < n->nin; j++) {
      if (j) sb_puts(b, ", ");
      put_ref(b, g, n->in[j]);
    }
    put_attrs(b, n);
    sb_printf(b, ") : %s", dtype_name(n->dtype));
    shape_print(b, &n->shape);
    sb_putc(b, '\n');
  }
  if (g->noutputs) {
    sb_puts(b, "return ");
    for (int i = 0; i < g->noutputs; i++) {
      if (i) sb_puts(b, ", ");
      put_ref(b, g, g->outputs[i]);
    }
    sb_putc(b, '\n');
  }
}
