/* CUDA's 8-element dot products over quantized weights (KS_VQDOT, lower_phase.c's decode GEMV): one statement is
 * `acc = acc + lt_qd8_FORMAT(w + row * row bytes, element, x)` (render_quant.c). */
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

void rc_put_vqdot(Render *R, const KStmt *s, int level) {
  StrBuf *o = R->out;
  if (R->dl != &rc_dialect_cuda) {
    rc_fail(R, "uses 8-element dot products over quantized weights, which the %s target does not have", R->dl->target);
    return;
  }
  if (!vqdot_ok(R, s)) return;
  const Expr *w = s->value;
  QRoots q = qroots(R, w);
  rc_cse_begin(R, q.root, q.by_row ? 2 : 1, level);
  sb_indent(o, level);
  sb_puts(o, "{\n");
  sb_indent(o, level + 1);
  sb_puts(o, "const float lt_x[8] = {");
  for (int i = 0; i < 8; i++) sb_printf(o, "%s%s", i ? ", " : "", R->tmp_name[s->xtmp + i]);
  sb_puts(o, "};\n");
  const char *t = R->tmp_name[s->tmp];
  sb_indent(o, level + 1);
  sb_printf(o, "%s = %s + lt_qd8_%s(", t, t, dtype_name(s->dtype));
  put_block_args(R, w, &q);
  sb_puts(o, ", lt_x);\n");
  sb_indent(o, level);
  sb_puts(o, "}\n");
  rc_cse_end(R);
}
