/* CUDA: a KS_MMA statement of role MMA_QGEMV as the GEMV over quantized weights on integer tensor cores.
 *
 * The kernel is the template lt_qgemv (src/code/templates/qgemv.cuh, which describes the algorithm); this file
 * writes what varies: the formats, the warps a block, k and the columns as template arguments, and the kernel's
 * expressions as lambdas: A at (row, k), each weight's row start for a flat column, and the store. */
#include "render_common.h"

/* lt_fqwB: the first byte of the weight row flat column lt_nn reads (its element at k = 0, a block boundary since
 * k is whole blocks) */
static int put_row_fn(Render *R, const KMma *m, int b, int L) {
  const Expr *w = m->b[b < m->nb ? b : 0];
  const LBuf *buf = w->ival >= 0 && w->ival < R->lp->nbufs ? &R->lp->bufs[w->ival] : NULL;
  const char *name = buf ? R->buf_name[w->ival] : NULL;
  if (!name || !dtype_is_quant(w->dtype) || buf->dtype != w->dtype) {
    rc_fail(R, "the quantized GEMV's weight %lld is not a quantized parameter", (long long)w->ival);
    return 0;
  }
  rc_line(R, L, "auto lt_fqw%d = [&](const i64 lt_nn) -> const unsigned char * {", b);
  rc_mma_bind_columns(R, m, L + 1, "lt_nn");
  rc_line(R, L + 1, "const i64 %s = 0;", R->var_name[m->k_var]);
  rc_put_assign(R, L + 1, "const i64 lt_wi", rc_flat_index(R, buf, w->n, w->a));
  rc_line(R, L + 1, "return %s + lt_wi / %dLL * %lldLL;", name, dtype_block_elems(w->dtype),
          (long long)dtype_block_bytes(w->dtype));
  rc_line(R, L, "};");
  return 1;
}

void rc_put_qgemv(Render *R, const KMma *m, int level) {
  int fmt[2] = {-1, -1};
  for (int b = 0; b < m->nb && b < 2; b++) fmt[b] = tile_qgemv_format(m->b[b]->dtype);
  if (R->dl != &rc_dialect_cuda || m->nb < 1 || m->nb > 2 || fmt[0] < 0 || (m->nb == 2 && fmt[1] < 0) ||
      (m->qwarps != 1 && m->qwarps != 2 && m->qwarps != 4 && m->qwarps != 8 && m->qwarps != 16) || m->k_extent % 32 ||
      m->k_extent > QGEMV_MAX_K || m->n_total < 1) {
    rc_fail(R, "malformed quantized GEMV statement");
    return;
  }
  int L = level;
  rc_line(R, L++, "{");
  rc_put_assign(R, L, "const i64 lt_M", m->m_extent);
  rc_line(R, L, "auto lt_fa = [&](const i64 lt_m, const i64 lt_k) -> float {");
  rc_line(R, L + 1, "const i64 %s = lt_m;", R->var_name[m->m_var]);
  rc_line(R, L + 1, "const i64 %s = lt_k;", R->var_name[m->k_var]);
  rc_put_return(R, L + 1, m->a);
  rc_line(R, L, "};");
  if (!put_row_fn(R, m, 0, L) || !put_row_fn(R, m, 1, L)) return;
  rc_mma_put_store_fn(R, m, L);
  rc_line(R, L, "lt_qgemv<%d, %d, %d, %d, %lldLL, %lldLL, %s>(lt_M, lt_fa, lt_fqw0, lt_fqw1, lt_fstore);", m->nb,
          fmt[0], m->nb > 1 ? fmt[1] : fmt[0], m->qwarps, (long long)m->k_extent, (long long)m->n_total,
          m->qearly ? "true" : "false");
  L--;
  rc_line(R, L, "}");
}
