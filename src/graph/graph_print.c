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
      if (fabs(n->attr.value) < 9e18) sb_printf(b, "%lld", (long long)n->attr.value);
      else sb_printf(b, "%.0f", n->attr.value); /* beyond long long: no undefined conversion */
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

static void put_attrs(StrBuf *b, const GNode *n) {
  const GAttr *a = &n->attr;
  switch (n->op) {
  case G_SUM: case G_MEAN: case G_MAX: case G_MIN: case G_ARGMAX:
    sb_puts(b, ", axis=");
    if (a->naxes == 1) sb_printf(b, "%d", a->axes[0]);
    else put_ints(b, a->axes, a->naxes);
    if (a->keepdim) sb_puts(b, ", keepdim=true");
    break;
  case G_SOFTMAX: case G_CONCAT: sb_printf(b, ", axis=%d", a->axis); break;
  case G_RMS_NORM: case G_LAYER_NORM: sb_puts(b, ", eps="); put_double(b, a->eps); break;
  case G_ROPE:
    if (n->nin == 2) sb_puts(b, ", theta="), put_double(b, a->theta);
    break;
  case G_CACHE_WRITE:
    sb_printf(b, ", axis=%d, start=", a->axis);
    ex_print(b, a->start, NULL);
    break;
  case G_ATTENTION: sb_printf(b, ", causal=%s", a->causal ? "true" : "false"); break;
  case G_PERMUTE: sb_puts(b, ", perm="); put_ints(b, a->axes, a->naxes); break;
  case G_RESHAPE: sb_puts(b, ", shape="); shape_print(b, &n->shape); break;
  case G_SLICE:
    sb_printf(b, ", axis=%d, start=", a->axis);
    ex_print(b, a->start, NULL);
    sb_puts(b, ", end=");
    ex_print(b, a->end, NULL);
    break;
  case G_CAST: sb_printf(b, ", dtype=%s", dtype_name(n->dtype)); break;
  default: break;
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
