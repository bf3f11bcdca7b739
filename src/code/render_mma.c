/* CUDA: a KS_MMA statement as a tiled tensor-core GEMM (mma.sync.m16n8k16, bf16 inputs, f32
 * accumulators), in two kernels (the pre-pass KMma.role MMA_PACK, and the GEMM), or the library form's
 * epilogue (MMA_EPILOGUE).
 *
 * The kernels are the templates lt_mma_pack, lt_mma and lt_mma_epilogue (src/code/templates/mma.cuh,
 * which describes the algorithm: shared-memory ring of cp.async stages, 8 warps of 32 x 32, split k
 * through a tile counter); this file writes what varies: the constants as template arguments (the tile
 * sizes, the number of ring buffers, the extents) and the kernel's expressions (A, the weights' element
 * addresses, the library products' rows, the store) as small device functions (lambdas). */
#include <stdio.h>
#include "render_common.h"

/* Declares the column variables from the flat column index `flat` (last axis fastest). */
void rc_mma_bind_columns(Render *R, const KMma *m, int level, const char *flat) {
  int64_t stride = 1;
  for (int i = m->nn - 1; i >= 0; i--) {
    rc_line(R, level, "const i64 %s = (%s / %lldLL) %% %lldLL;", R->var_name[m->n_var[i]], flat, (long long)stride,
            (long long)m->n_ext[i]);
    stride *= m->n_ext[i];
  }
}

/* lt_fwB: the address of weight b's element at flat column lt_nn and k = lt_k (weight 0 again when the
 * statement has one weight: the template never calls lt_fw1 then). */
static void put_weight_fn(Render *R, const KMma *m, int b, int L) {
  const Expr *w = m->b[b < m->nb ? b : 0];
  const char *name = R->buf_name[w->ival];
  if (!name) {
    rc_fail(R, "weight buffer %lld is not a parameter", (long long)w->ival);
    return;
  }
  rc_line(R, L, "auto lt_fw%d = [&](const i64 lt_nn, const i64 lt_k) -> const unsigned short * {", b);
  rc_mma_bind_columns(R, m, L + 1, "lt_nn");
  rc_line(R, L + 1, "const i64 %s = lt_k;", R->var_name[m->k_var]);
  rc_put_assign(R, L + 1, "const i64 lt_wi", rc_flat_index(R, &R->lp->bufs[w->ival], w->n, w->a));
  long long at = (long long)m->wq_at[b < m->nb ? b : 0];
  if (at >= 0) /* a quantized weight: its bf16 copy, which the pre-pass wrote */
    rc_line(R, L + 1, "return (const unsigned short *)((const char *)lt_scratch + %lldLL) + lt_wi;", at);
  else rc_line(R, L + 1, "return %s + lt_wi;", name);
  rc_line(R, L, "};");
}

/* lt_fstore(row, flat column, acc0, acc1): the kernel's store with the accumulators as its temporaries. */
void rc_mma_put_store_fn(Render *R, const KMma *m, int L) {
  rc_line(R, L,
          "auto lt_fstore = [&](const i64 lt_m, const i64 lt_nn, const float lt_acc0, const float lt_acc1) -> void {");
  rc_line(R, L + 1, "const i64 %s = lt_m;", R->var_name[m->m_var]);
  rc_mma_bind_columns(R, m, L + 1, "lt_nn");
  for (int b = 0; b < m->nb; b++) rc_line(R, L + 1, "const float %s = lt_acc%d;", R->tmp_name[m->acc_tmp[b]], b);
  rc_put_stmt(R, m->store, L + 1);
  rc_line(R, L, "};");
}

/* The template argument COUNTER_WORDS: where A's planes start, in 4-byte words (after the tile counters and the
 * quantized weights' bf16 copies). */
static int planes_words(const KMma *m) { return (int)(m->planes_at / 4); }

/* The pre-pass: A at row lt_m and k = lt_k (and the row statistic lt_stat it reads, if any: its body at
 * row lt_m and position lt_r); then the bf16 copies of the quantized weights. */
static void put_pack(Render *R, const KMma *m, int L) {
  if (!m->stat_body) {
    rc_line(R, L, "auto lt_fa = [&](const i64 lt_m, const i64 lt_k) -> float {");
  } else {
    rc_line(R, L, "auto lt_fs = [&](const i64 lt_m, const i64 lt_r) -> float {");
    rc_line(R, L + 1, "const i64 %s = lt_m;", R->var_name[m->m_var]);
    rc_line(R, L + 1, "const i64 %s = lt_r;", R->var_name[m->stat_var]);
    rc_put_return(R, L + 1, m->stat_body);
    rc_line(R, L, "};");
    rc_line(R, L, "auto lt_fa = [&](const i64 lt_m, const i64 lt_k, const float lt_stat) -> float {");
    rc_line(R, L + 1, "const float %s = lt_stat;", R->tmp_name[m->stat_tmp]);
  }
  rc_line(R, L + 1, "const i64 %s = lt_m;", R->var_name[m->m_var]);
  rc_line(R, L + 1, "const i64 %s = lt_k;", R->var_name[m->k_var]);
  rc_put_return(R, L + 1, m->a);
  rc_line(R, L, "};");
  if (m->stat_body)
    rc_line(R, L, "lt_mma_pack_stat<%d, %lldLL, %d, %lldLL>(lt_M, lt_scratch, lt_fs, lt_fa);", m->a_parts,
            (long long)m->k_extent, planes_words(m), (long long)m->stat_extent);
  else
    rc_line(R, L, "lt_mma_pack<%d, %lldLL, %d>(lt_M, lt_scratch, lt_fa);", m->a_parts, (long long)m->k_extent,
            planes_words(m));
  /* each quantized weight's bf16 copy: 8 elements per thread, decoded by lt_dq8_FORMAT (lt_dq_FORMAT's values) */
  for (int b = 0; b < m->nb; b++) {
    if (m->wq_at[b] < 0 || (b == 1 && m->b[1]->ival == m->b[0]->ival)) continue;
    const LBuf *buf = &R->lp->bufs[m->b[b]->ival];
    const char *dec = rc_quant_decoder(buf->dtype), *name = R->buf_name[m->b[b]->ival];
    if (!dec || !name || buf->shape.rank != 2) {
      rc_fail(R, "quantized weight %lld of a tensor-core GEMM is not a [rows][k] parameter", (long long)m->b[b]->ival);
      return;
    }
    rc_line(R, L, "lt_mma_dequant<%lldLL, %lldLL>(lt_scratch, [&](const i64 lt_i, float *lt_v) {",
            (long long)(buf->shape.dim[0]->ival * buf->shape.dim[1]->ival / 8), (long long)m->wq_at[b]);
    rc_line(R, L + 1, "lt_dq8_%s(%s, lt_i, lt_v);", dtype_name(buf->dtype), name);
    rc_line(R, L, "});");
  }
}

/* The library form's epilogue: lt_frowB, the weight row that flat column lt_nn reads (the weight's
 * index at k = 0, over k), then the template. */
static void put_epilogue(Render *R, const KMma *m, int L) {
  for (int b = 0; b < 2; b++) {
    rc_line(R, L, "auto lt_frow%d = [&](const i64 lt_nn) -> i64 {", b);
    if (b < m->nb) {
      const Expr *w = m->b[b];
      rc_mma_bind_columns(R, m, L + 1, "lt_nn");
      rc_line(R, L + 1, "const i64 %s = 0;", R->var_name[m->k_var]);
      rc_put_assign(R, L + 1, "const i64 lt_wi", rc_flat_index(R, &R->lp->bufs[w->ival], w->n, w->a));
      rc_line(R, L + 1, "return lt_wi / %lldLL;", (long long)m->k_extent);
    } else {
      rc_line(R, L + 1, "return 0; /* one weight (not called) */");
    }
    rc_line(R, L, "};");
  }
  rc_mma_put_store_fn(R, m, L);
  long long at[2] = {0, 0}, rows[2] = {0, 0};
  for (int b = 0; b < m->nb; b++) at[b] = (long long)m->prod_at[b] * m->a_parts, rows[b] = (long long)m->prod_rows[b];
  rc_line(R, L,
          "lt_mma_epilogue<%d, %d, %lldLL, %lldLL, %d, %lldLL, %lldLL, %lldLL, %lldLL>(lt_M, lt_scratch, lt_frow0, "
          "lt_frow1, lt_fstore);",
          m->nb, m->a_parts, (long long)m->k_extent, (long long)m->n_total, planes_words(m), at[0], rows[0], at[1],
          rows[1]);
}

void rc_put_mma(Render *R, const KStmt *s, int level) {
  const KMma *m = s->mma;
  if (m && m->role == MMA_QGEMV) {
    rc_put_qgemv(R, m, level);
    return;
  }
  if (!m || m->nb < 1 || m->nb > 2 || m->k_extent % m->bk || (m->bk != 16 && m->bk != 32) || m->a_parts < 1 ||
      m->a_parts > 2 || !R->kk->scratch) {
    rc_fail(R, "malformed tensor-core statement");
    return;
  }
  int L = level;
  rc_line(R, L++, "{");
  rc_put_assign(R, L, "const i64 lt_M", m->m_extent);
  if (m->role == MMA_PACK) {
    put_pack(R, m, L);
  } else if (m->role == MMA_EPILOGUE) {
    put_epilogue(R, m, L);
  } else {
    const int parts = m->a_parts, bk = m->bk;
    /* as many ring buffers as fit the block's static shared memory (the device's limit), at most 4 */
    const int stage_bytes = (parts * 64 + 128) * (bk + 8) * 2;
    int stages = m->smem_limit / stage_bytes;
    if (stages > 4) stages = 4;
    put_weight_fn(R, m, 0, L);
    put_weight_fn(R, m, 1, L);
    rc_mma_put_store_fn(R, m, L);
    rc_line(R, L, "lt_mma<%d, %d, %d, %d, %lldLL, %lldLL, %s, %d>(lt_M, lt_scratch, lt_fw0, lt_fw1, lt_fstore);", m->nb,
            parts, bk, stages, (long long)m->k_extent, (long long)m->n_total, m->split_max > 1 ? "true" : "false",
            planes_words(m));
  }
  L--;
  rc_line(R, L, "}");
}
