/* C: a KS_FLASH statement with decode = 1 as one CPU attention kernel for any number of query rows (a
 * decode step's one, a prefill's many): the scores, the softmax and P x V in one pass over the keys.
 *
 * Each work item of an OpenMP loop (interleaved, since a causal row's keys grow with the row) is a query row
 * and, in the vector form (KFlash.vec), the `rows` heads that read the same k and v (grouped-query attention),
 * else one head. Its query rows are copied once; the keys go by tiles of LT_FT: a tile's scores and their
 * maximum, then the running softmax (the outputs and the sum rescaled by exp(old max - new max)) and each
 * key's exp times its V row; the exponentials are lt_expf (render_c.c), a polynomial that vectorizes. With a
 * causal mask (KFlash.t_last) the walk stops at the row's last visible key. A row's result depends only on its
 * own keys, in tiles from key 0: the same bits alone or in any batch.
 *
 * The vector form computes each key's row offsets once (a paged cache's block-table lookup among them) and
 * holds q, k, v and the outputs as vectors of LT_VW floats (lt_vf: 16 with AVX-512, 8 otherwise), so the dot
 * products and the P x V updates are
 * whole-vector operations; the scalar form leaves the vectorizing to the compiler, which for a paged cache
 * gathered the values key by key (8x slower on a batched decode step). Over a contiguous cache the vector form
 * takes up to 8 query rows; past a tile of rows (a prefill) the block form takes LT_QB rows an item and each tile's
 * k rows transposed, so a row's scores are FMAs over d with no horizontal sums; the scalar form takes the rows
 * between. */
#include <stdio.h>
#include "render_common.h"
#include "../tile/tile.h"

#define LT_FT 64 /* keys a tile */
/* query rows a work item of the block form: each tile's k and v rows are copied (k transposed) once per item, and
 * 4 rows an item spent about a third of a prefill's attention on the copies (16: 1.2-1.5x faster; 32: slower).
 * At most LT_QB_PAIRS (row, head) pairs an item, so that many heads sharing k and v keep the item's arrays (on the
 * thread's stack) as small as 16 rows of 4 heads. */
#define LT_QB 16
#define LT_QB_PAIRS 64

/* The value variables from the flat column lt_cc (< width): one value axis is lt_cc itself, which keeps its index
 * affine for the vectorizer. */
static void bind_values(Render *R, const KFlash *f, int level) {
  if (f->nvalue == 1) rc_line(R, level, "const int64_t %s = lt_cc;", R->var_name[f->value_var[0]]);
  else rc_bind_flat(R, level, f->value_var, f->value_ext, f->nvalue, "lt_cc");
}

/* The vector form's group variables from the item's group block lt_gb: every group axis, the shared one as its
 * block index lt_sb. */
static void bind_groups(Render *R, const KFlash *f, int L) {
  int64_t stride = 1;
  for (int i = f->ngroup - 1; i >= 0; i--) {
    int64_t ext = i == f->share ? f->group_ext[i] / f->rows : f->group_ext[i];
    rc_line(R, L, "const int64_t %s = (lt_gb / %lldLL) %% %lldLL;",
            i == f->share ? "lt_sb" : R->var_name[f->group_var[i]], (long long)stride, (long long)ext);
    stride *= ext;
  }
}

/* The shared group variable at head `head` of the item (an expression of lt_r, or "0"). */
static void bind_share(Render *R, const KFlash *f, int L, const char *head) {
  if (f->share >= 0)
    rc_line(R, L, "const int64_t %s = lt_sb * %dLL + %s;", R->var_name[f->group_var[f->share]], f->rows, head);
}

/* The f32 load at a split's element (its flat index variable), or NULL where it converts. */
static const char *f32_buffer(const Render *R, const Expr *at) {
  if (at->op != X_LOAD || at->dtype != DT_F32 || at->ival < 0 || at->ival >= R->lp->nbufs) return NULL;
  return R->lp->bufs[at->ival].dtype == DT_F32 ? R->buf_name[at->ival] : NULL;
}

/* `lt_<x>p`, a pointer to one key's row of k (is_k) or v as `n` floats: the buffer at row + column 0 where it
 * holds f32, else the row converted into lt_<x>b. `row` is the C expression of the row offset. */
static void put_row_pointer(Render *R, const KFlash *f, int L, int is_k, const char *row) {
  const char *x = is_k ? "k" : "v";
  const Expr *at = is_k ? f->k_at : f->v_at;
  Expr *col = is_k ? f->k_col : f->v_col;
  const char *at_name = R->var_name[is_k ? f->k_at_var : f->v_at_var];
  const char *buf = f32_buffer(R, at);
  rc_line(R, L, "{");
  if (buf) {
    if (is_k) rc_line(R, L + 1, "const int64_t %s = 0;", R->var_name[f->d_var]);
    else rc_bind_flat(R, L + 1, f->value_var, f->value_ext, f->nvalue, "0");
    rc_put_assign(R, L + 1, "const int64_t lt_c0", col);
    rc_line(R, L + 1, "lt_%sp = %s + %s + lt_c0;", x, buf, row);
  } else {
    rc_line(R, L + 1, "for (int64_t lt_i = 0; lt_i < %lldLL; lt_i++) {", (long long)(is_k ? f->d_extent : f->width));
    if (is_k) rc_line(R, L + 2, "const int64_t %s = lt_i;", R->var_name[f->d_var]);
    else rc_bind_flat(R, L + 2, f->value_var, f->value_ext, f->nvalue, "lt_i");
    rc_put_assign(R, L + 2, "const int64_t lt_ci", col);
    rc_line(R, L + 2, "const int64_t %s = %s + lt_ci;", at_name, row);
    char lhs[64];
    snprintf(lhs, sizeof lhs, "lt_%sb[lt_i]", x);
    rc_put_assign(R, L + 2, lhs, (Expr *)at);
    rc_line(R, L + 1, "}");
    rc_line(R, L + 1, "lt_%sp = lt_%sb;", x, x);
  }
  rc_line(R, L, "}");
}

/* `{`, the extents and the OpenMP loop over work items, `per_row` of them a query row (in parallel where the work,
 * rows x groups x keys x (d + values), pays for a team), with the row variable bound; returns the loop body's
 * level. close_items ends both. */
static int open_items(Render *R, const KFlash *f, int level, long long per_row) {
  const long long G = (long long)f->groups, D = (long long)f->d_extent, W = (long long)f->width;
  rc_line(R, level, "{");
  rc_put_assign(R, level + 1, "const int64_t lt_M", f->m_extent);
  rc_put_assign(R, level + 1, "const int64_t lt_T", f->t_extent);
  rc_line(R, level + 1, "#pragma omp parallel for schedule(static, 1) if (%d <= lt_M * %lldLL * lt_T * %lldLL)",
          OMP_MIN_RUNTIME_WORK, G, D + W);
  rc_line(R, level + 1, "for (int64_t lt_w = 0; lt_w < lt_M * %lldLL; lt_w++) {", per_row);
  if (f->m_var >= 0) rc_line(R, level + 2, "const int64_t %s = lt_w / %lldLL;", R->var_name[f->m_var], per_row);
  return level + 2;
}

static void close_items(Render *R, int level) {
  rc_line(R, level + 1, "}");
  rc_line(R, level, "}");
}

/* Head `i`'s (a C expression) start: its q row into `qrow`, zero outputs, the softmax's max and sum. */
static void put_head_start(Render *R, const KFlash *f, int L, const char *qrow, const char *i) {
  const char *dv = R->var_name[f->d_var];
  rc_line(R, L, "for (int64_t %s = 0; %s < %lldLL; %s++) {", dv, dv, (long long)f->d_extent, dv);
  char lhs[96];
  snprintf(lhs, sizeof lhs, "%s[%s]", qrow, dv);
  rc_put_assign(R, L + 1, lhs, f->q);
  rc_line(R, L, "}");
  rc_line(R, L, "for (int lt_c = 0; lt_c < %lld / LT_VW; lt_c++) lt_o[%s][lt_c] = (lt_vf){0};", (long long)f->width, i);
  rc_line(R, L, "lt_mx[%s] = -INFINITY;", i);
  rc_line(R, L, "lt_l[%s] = 0.0f;", i);
}

/* `end` lowered to the row's last visible key + 1 (a causal mask), the shared head bound to 0. */
static void put_row_end(Render *R, const KFlash *f, int L, const char *end) {
  if (!f->t_last) return;
  rc_line(R, L, "{");
  bind_share(R, f, L + 1, "0");
  rc_put_assign(R, L + 1, "const int64_t lt_last", f->t_last);
  rc_line(R, L + 1, "if (lt_last + 1 < %s) %s = lt_last + 1;", end, end);
  rc_line(R, L, "}");
}

/* Head `i`'s outputs divided by its sum, stored (the value variables bound). */
static void put_head_store(Render *R, const KFlash *f, int L, const char *i) {
  const long long W = (long long)f->width;
  rc_line(R, L, "float lt_os[%lld];", W);
  rc_line(R, L, "__builtin_memcpy(lt_os, lt_o[%s], sizeof lt_os);", i);
  rc_line(R, L, "for (int64_t lt_cc = 0; lt_cc < %lldLL; lt_cc++) {", W);
  bind_values(R, f, L + 1);
  rc_line(R, L + 1, "const float %s = lt_os[lt_cc] / lt_l[%s];", R->tmp_name[f->o_tmp], i);
  rc_put_stmt(R, f->store, L + 1);
  rc_line(R, L, "}");
}

/* The vector form's item state: each head's q as vectors, zero outputs, the softmax's max and sum; lt_end. */
static void put_vec_start(Render *R, const KFlash *f, int L) {
  const long long H = f->rows, D = (long long)f->d_extent, W = (long long)f->width;
  rc_line(R, L, "lt_vf lt_q[%lld][%lld / LT_VW], lt_o[%lld][%lld / LT_VW];", H, D, H, W);
  rc_line(R, L, "float lt_p[%lld][%d], lt_mx[%lld], lt_l[%lld];", H, LT_FT, H, H);
  /* rows that are not f32 in memory are converted into these (put_row_pointer) */
  if (!f32_buffer(R, f->k_at)) rc_line(R, L, "float lt_kb[%lld];", D);
  if (!f32_buffer(R, f->v_at)) rc_line(R, L, "float lt_vb[%lld];", W);
  rc_line(R, L, "int64_t lt_vrow[%d];", LT_FT);
  rc_line(R, L, "for (int lt_r = 0; lt_r < %lld; lt_r++) {", H);
  bind_share(R, f, L + 1, "lt_r");
  rc_line(R, L + 1, "float lt_qs[%lld];", D);
  put_head_start(R, f, L + 1, "lt_qs", "lt_r");
  rc_line(R, L + 1, "__builtin_memcpy(lt_q[lt_r], lt_qs, sizeof lt_qs);");
  rc_line(R, L, "}");
  rc_line(R, L, "int64_t lt_end = lt_T;");
  put_row_end(R, f, L, "lt_end");
}

/* A tile's scores: each key's row offsets (k's and v's) once, its k row dotted with every head's q. */
static void put_vec_scores(Render *R, const KFlash *f, int L) {
  const long long H = f->rows, D = (long long)f->d_extent;
  rc_line(R, L, "float lt_tm[%lld];", H);
  rc_line(R, L, "for (int lt_r = 0; lt_r < %lld; lt_r++) lt_tm[lt_r] = -INFINITY;", H);
  rc_line(R, L, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) {");
  rc_line(R, L + 1, "const int64_t %s = lt_t0 + lt_j;", R->var_name[f->t_var]);
  rc_line(R, L + 1, "const float *lt_kp;");
  rc_line(R, L + 1, "{");
  bind_share(R, f, L + 2, "0");
  rc_put_assign(R, L + 2, "const int64_t lt_kr", f->k_row);
  rc_put_assign(R, L + 2, "lt_vrow[lt_j]", f->v_row);
  put_row_pointer(R, f, L + 2, 1, "lt_kr");
  rc_line(R, L + 1, "}");
  rc_line(R, L + 1, "lt_vf lt_k[%lld / LT_VW];", D);
  rc_line(R, L + 1, "for (int lt_c = 0; lt_c < %lld / LT_VW; lt_c++) lt_k[lt_c] = ((const lt_vfu *)lt_kp)[lt_c];", D);
  rc_line(R, L + 1, "for (int lt_r = 0; lt_r < %lld; lt_r++) {", H);
  rc_line(R, L + 2, "lt_vf lt_a = lt_q[lt_r][0] * lt_k[0];");
  rc_line(R, L + 2, "for (int lt_c = 1; lt_c < %lld / LT_VW; lt_c++) lt_a += lt_q[lt_r][lt_c] * lt_k[lt_c];", D);
  bind_share(R, f, L + 2, "lt_r");
  rc_line(R, L + 2, "const float %s = lt_hsumv(lt_a);", R->tmp_name[f->s_tmp]);
  rc_put_assign(R, L + 2, "const float lt_sc", f->score);
  rc_line(R, L + 2, "lt_p[lt_r][lt_j] = lt_sc;");
  rc_line(R, L + 2, "lt_tm[lt_r] = fmaxf(lt_tm[lt_r], lt_sc);");
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
}

/* Each of `count` (a C expression) heads' running softmax over the tile; a head whose keys so far are all masked
 * keeps its state and adds nothing. */
static void put_vec_softmax(Render *R, const KFlash *f, int L, const char *count) {
  rc_line(R, L, "int lt_any = 0;");
  rc_line(R, L, "for (int lt_r = 0; lt_r < %s; lt_r++) lt_any |= lt_tm[lt_r] != -INFINITY;", count);
  rc_line(R, L, "if (!lt_any) continue; /* every key of the tile masked */");
  rc_line(R, L, "for (int lt_r = 0; lt_r < %s; lt_r++) {", count);
  rc_line(R, L + 1, "float *lt_pr = lt_p[lt_r];");
  rc_line(R, L + 1, "const float lt_nm = fmaxf(lt_mx[lt_r], lt_tm[lt_r]);");
  rc_line(R, L + 1, "if (lt_nm == -INFINITY) {");
  rc_line(R, L + 2, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) lt_pr[lt_j] = 0.0f;");
  rc_line(R, L + 2, "continue;");
  rc_line(R, L + 1, "}");
  rc_line(R, L + 1, "const float lt_c = lt_expf(lt_mx[lt_r] - lt_nm);");
  rc_line(R, L + 1, "float lt_ts = 0.0f;");
  rc_line(R, L + 1, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) lt_pr[lt_j] = lt_expf(lt_pr[lt_j] - lt_nm);");
  rc_line(R, L + 1, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) lt_ts += lt_pr[lt_j];");
  rc_line(R, L + 1, "lt_l[lt_r] = lt_l[lt_r] * lt_c + lt_ts;");
  rc_line(R, L + 1, "for (int lt_cc = 0; lt_cc < %lld / LT_VW; lt_cc++) lt_o[lt_r][lt_cc] *= lt_c;",
          (long long)f->width);
  rc_line(R, L + 1, "lt_mx[lt_r] = lt_nm;");
  rc_line(R, L, "}");
}

/* P x V: each key's v row once, into every head's outputs. */
static void put_vec_values(Render *R, const KFlash *f, int L) {
  const long long W = (long long)f->width;
  rc_line(R, L, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) {");
  rc_line(R, L + 1, "const float *lt_vp;");
  put_row_pointer(R, f, L + 1, 0, "lt_vrow[lt_j]");
  rc_line(R, L + 1, "lt_vf lt_v[%lld / LT_VW];", W);
  rc_line(R, L + 1, "for (int lt_c = 0; lt_c < %lld / LT_VW; lt_c++) lt_v[lt_c] = ((const lt_vfu *)lt_vp)[lt_c];", W);
  rc_line(R, L + 1, "for (int lt_r = 0; lt_r < %lld; lt_r++) {", (long long)f->rows);
  rc_line(R, L + 2, "const float lt_e = lt_p[lt_r][lt_j];");
  rc_line(R, L + 2, "for (int lt_c = 0; lt_c < %lld / LT_VW; lt_c++) lt_o[lt_r][lt_c] += lt_e * lt_v[lt_c];", W);
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
}

static void put_flash_cpu_vec(Render *R, const KFlash *f, int level) {
  const long long GB = (long long)(f->groups / f->rows);
  int L = open_items(R, f, level, GB);
  rc_line(R, L, "const int64_t lt_gb = lt_w %% %lldLL;", GB);
  bind_groups(R, f, L);
  put_vec_start(R, f, L);
  rc_line(R, L, "for (int64_t lt_t0 = 0; lt_t0 < lt_end; lt_t0 += %d) {", LT_FT);
  rc_line(R, L + 1, "const int64_t lt_n = lt_end - lt_t0 < %d ? lt_end - lt_t0 : %d;", LT_FT, LT_FT);
  put_vec_scores(R, f, L + 1);
  char heads[24];
  snprintf(heads, sizeof heads, "%d", f->rows);
  put_vec_softmax(R, f, L + 1, heads);
  put_vec_values(R, f, L + 1);
  rc_line(R, L, "}");
  rc_line(R, L, "for (int lt_r = 0; lt_r < %lld; lt_r++) {", (long long)f->rows);
  bind_share(R, f, L + 1, "lt_r");
  put_head_store(R, f, L + 1, "lt_r");
  rc_line(R, L, "}");
  close_items(R, level);
}

static void put_flash_cpu_scalar(Render *R, const KFlash *f, int level);

/* Whether e reads variable v (unknown past the mask's 64: yes). */
static int reads_var(const Expr *e, int v) { return v >= 64 || ((e->varmask >> v) & 1); }

/* The block form: a work item is QB consecutive query rows (LT_QB, fewer where many heads share k and v) and those
 * heads. Each tile's k rows are transposed once into lt_kt (d-major) and its v rows copied into lt_vt, so a (row,
 * head)'s scores are whole-vector FMAs over d with q broadcast (no horizontal sums), for QB x rows pairs a tile. A
 * row's result does not depend on its block: keys in tiles from 0, its keys past its own last masked (exact zeros
 * added), a tile all masked for it skipped. */
static void put_flash_cpu_block(Render *R, const KFlash *f, int level) {
  const long long H = f->rows, D = (long long)f->d_extent, W = (long long)f->width;
  const int QB = H >= LT_QB_PAIRS ? 1 : LT_QB_PAIRS / H < LT_QB ? (int)(LT_QB_PAIRS / H) : LT_QB;
  const long long G = (long long)f->groups, GB = G / H, NP = QB * H;
  const char *tv = R->var_name[f->t_var];
  char mrow[64] = "";
  if (f->m_var >= 0) snprintf(mrow, sizeof mrow, "const int64_t %s = lt_qb * %d + lt_qi;", R->var_name[f->m_var], QB);
  rc_line(R, level, "{");
  int L = level + 1;
  rc_put_assign(R, L, "const int64_t lt_M", f->m_extent);
  rc_put_assign(R, L, "const int64_t lt_T", f->t_extent);
  rc_line(R, L, "#pragma omp parallel for schedule(static, 1) if (%d <= lt_M * %lldLL * lt_T * %lldLL)",
          OMP_MIN_RUNTIME_WORK, G, D + W);
  rc_line(R, L, "for (int64_t lt_w = 0; lt_w < (lt_M + %d) / %d * %lldLL; lt_w++) {", QB - 1, QB, GB);
  L++;
  rc_line(R, L, "const int64_t lt_qb = lt_w / %lldLL, lt_gb = lt_w %% %lldLL;", GB, GB);
  rc_line(R, L, "const int lt_nq = lt_M - lt_qb * %d < %d ? (int)(lt_M - lt_qb * %d) : %d;", QB, QB, QB, QB);
  bind_groups(R, f, L);
  rc_line(R, L, "float lt_q[%lld][%lld], lt_p[%lld][%d], lt_mx[%lld], lt_l[%lld], lt_tm[%lld];", NP, D, NP, LT_FT, NP,
          NP, NP);
  rc_line(R, L, "lt_vf lt_o[%lld][%lld / LT_VW];", NP, W);
  rc_line(R, L, "float lt_kt[%lld][%d], lt_vt[%d][%lld];", D, LT_FT, LT_FT, W);
  if (!f32_buffer(R, f->k_at)) rc_line(R, L, "float lt_kb[%lld];", D);
  if (!f32_buffer(R, f->v_at)) rc_line(R, L, "float lt_vb[%lld];", W);
  rc_line(R, L, "int64_t lt_qend[%d], lt_end = 0;", QB);
  /* each row's q, zero outputs, softmax state and last key + 1 */
  rc_line(R, L, "for (int lt_qi = 0; lt_qi < lt_nq; lt_qi++) {");
  if (*mrow) rc_line(R, L + 1, "%s", mrow);
  rc_line(R, L + 1, "int64_t lt_e = lt_T;");
  put_row_end(R, f, L + 1, "lt_e");
  rc_line(R, L + 1, "lt_qend[lt_qi] = lt_e;");
  rc_line(R, L + 1, "if (lt_e > lt_end) lt_end = lt_e;");
  rc_line(R, L + 1, "for (int lt_r = 0; lt_r < %lld; lt_r++) {", H);
  bind_share(R, f, L + 2, "lt_r");
  rc_line(R, L + 2, "const int lt_i = lt_qi * %lld + lt_r;", H);
  put_head_start(R, f, L + 2, "lt_q[lt_i]", "lt_i");
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  rc_line(R, L, "for (int64_t lt_t0 = 0; lt_t0 < lt_end; lt_t0 += %d) {", LT_FT);
  L++;
  rc_line(R, L, "const int64_t lt_n = lt_end - lt_t0 < %d ? lt_end - lt_t0 : %d;", LT_FT, LT_FT);
  /* the tile's k rows transposed, its v rows in a run; keys past lt_n zero (every tile's dot products are whole) */
  rc_line(R, L, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) {");
  rc_line(R, L + 1, "const int64_t %s = lt_t0 + lt_j;", tv);
  rc_line(R, L + 1, "const float *lt_kp, *lt_vp;");
  rc_line(R, L + 1, "{");
  bind_share(R, f, L + 2, "0");
  rc_put_assign(R, L + 2, "const int64_t lt_kr", f->k_row);
  rc_put_assign(R, L + 2, "const int64_t lt_vr", f->v_row);
  put_row_pointer(R, f, L + 2, 1, "lt_kr");
  rc_line(R, L + 2, "for (int64_t lt_d = 0; lt_d < %lldLL; lt_d++) lt_kt[lt_d][lt_j] = lt_kp[lt_d];", D);
  put_row_pointer(R, f, L + 2, 0, "lt_vr");
  rc_line(R, L + 2, "for (int64_t lt_cc = 0; lt_cc < %lldLL; lt_cc++) lt_vt[lt_j][lt_cc] = lt_vp[lt_cc];", W);
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  rc_line(R, L, "for (int64_t lt_j = lt_n; lt_j < %d; lt_j++)", LT_FT);
  rc_line(R, L + 1, "for (int64_t lt_d = 0; lt_d < %lldLL; lt_d++) lt_kt[lt_d][lt_j] = 0.0f;", D);
  /* each (row, head)'s scores over the tile */
  rc_line(R, L, "for (int lt_qi = 0; lt_qi < lt_nq; lt_qi++) {");
  if (*mrow) rc_line(R, L + 1, "%s", mrow);
  rc_line(R, L + 1, "for (int lt_r = 0; lt_r < %lld; lt_r++) {", H);
  rc_line(R, L + 2, "const int lt_i = lt_qi * %lld + lt_r;", H);
  rc_line(R, L + 2, "lt_tm[lt_i] = -INFINITY;");
  rc_line(R, L + 2, "if (lt_t0 >= lt_qend[lt_qi]) continue; /* every key of the tile past the row's last */");
  bind_share(R, f, L + 2, "lt_r");
  rc_line(R, L + 2, "lt_vf lt_a[%d / LT_VW];", LT_FT);
  rc_line(R, L + 2, "for (int lt_c = 0; lt_c < %d / LT_VW; lt_c++) lt_a[lt_c] = (lt_vf){0};", LT_FT);
  rc_line(R, L + 2, "for (int64_t lt_d = 0; lt_d < %lldLL; lt_d++) {", D);
  rc_line(R, L + 3, "const float lt_b = lt_q[lt_i][lt_d];");
  rc_line(R, L + 3,
          "for (int lt_c = 0; lt_c < %d / LT_VW; lt_c++) lt_a[lt_c] += lt_b * ((const lt_vfu *)lt_kt[lt_d])[lt_c];",
          LT_FT);
  rc_line(R, L + 2, "}");
  rc_line(R, L + 2, "float lt_s[%d] __attribute__((aligned(64)));", LT_FT);
  rc_line(R, L + 2, "for (int lt_c = 0; lt_c < %d / LT_VW; lt_c++) *(lt_vf *)(lt_s + lt_c * LT_VW) = lt_a[lt_c];",
          LT_FT);
  rc_line(R, L + 2, "float lt_t = -INFINITY;");
  rc_line(R, L + 2, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) {");
  rc_line(R, L + 3, "const int64_t %s = lt_t0 + lt_j;", tv);
  rc_line(R, L + 3, "const float %s = lt_s[lt_j];", R->tmp_name[f->s_tmp]);
  rc_put_assign(R, L + 3, "const float lt_sc", f->score);
  rc_line(R, L + 3, "lt_p[lt_i][lt_j] = lt_sc;");
  /* fmaxf's result (a NaN score leaves the maximum), without its call: the loop vectorizes */
  rc_line(R, L + 3, "lt_t = lt_sc > lt_t ? lt_sc : lt_t;");
  rc_line(R, L + 2, "}");
  rc_line(R, L + 2, "lt_tm[lt_i] = lt_t;");
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  rc_line(R, L, "const int lt_np = lt_nq * %lld;", H);
  put_vec_softmax(R, f, L, "lt_np");
  /* P x V from the tile's v rows, a pair's outputs in registers */
  rc_line(R, L, "for (int lt_i = 0; lt_i < lt_np; lt_i++) {");
  rc_line(R, L + 1, "if (lt_tm[lt_i] == -INFINITY) continue; /* its weights are all zero */");
  rc_line(R, L + 1, "lt_vf lt_acc[%lld / LT_VW];", W);
  rc_line(R, L + 1, "for (int lt_c = 0; lt_c < %lld / LT_VW; lt_c++) lt_acc[lt_c] = lt_o[lt_i][lt_c];", W);
  rc_line(R, L + 1, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) {");
  rc_line(R, L + 2, "const float lt_e = lt_p[lt_i][lt_j];");
  rc_line(R, L + 2,
          "for (int lt_c = 0; lt_c < %lld / LT_VW; lt_c++) lt_acc[lt_c] += lt_e * ((const lt_vfu *)lt_vt[lt_j])[lt_c];",
          W);
  rc_line(R, L + 1, "}");
  rc_line(R, L + 1, "for (int lt_c = 0; lt_c < %lld / LT_VW; lt_c++) lt_o[lt_i][lt_c] = lt_acc[lt_c];", W);
  rc_line(R, L, "}");
  L--;
  rc_line(R, L, "}");
  rc_line(R, L, "for (int lt_qi = 0; lt_qi < lt_nq; lt_qi++) {");
  if (*mrow) rc_line(R, L + 1, "%s", mrow);
  rc_line(R, L + 1, "for (int lt_r = 0; lt_r < %lld; lt_r++) {", H);
  bind_share(R, f, L + 2, "lt_r");
  rc_line(R, L + 2, "const int lt_i = lt_qi * %lld + lt_r;", H);
  put_head_store(R, f, L + 2, "lt_i");
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  close_items(R, level);
}

void rc_put_flash_cpu(Render *R, const KStmt *s, int level) {
  const KFlash *f = s->flash;
  if (!f || f->d_extent < 1 || f->d_extent > 256 || f->width < 1 || f->width > 1024 || f->groups < 1) {
    rc_fail(R, "malformed flash-attention statement");
    return;
  }
  if (f->vec) {
    if (!f->k_row || !f->v_row || f->d_extent % 16 || f->width % 16 || f->rows < 1 || f->rows > 8 ||
        f->groups % f->rows || (f->share < 0 && f->rows != 1) || f->share >= f->ngroup || f->vec_rows < 0) {
      rc_fail(R, "malformed flash-attention statement (vector form)");
      return;
    }
    if (!f->vec_rows) {
      put_flash_cpu_vec(R, f, level);
      return;
    }
    /* the vector form for few query rows, the scalar form for more (KFlash.vec_rows) */
    rc_line(R, level, "{");
    rc_put_assign(R, level + 1, "const int64_t lt_rows", f->m_extent);
    rc_line(R, level + 1, "if (lt_rows <= %d)", f->vec_rows);
    put_flash_cpu_vec(R, f, level + 2);
    /* more than a tile of rows (a prefill): blocks of rows, where k and v rows do not depend on the row and fit
     * the block's buffers (below a tile the scalar form was faster: the block form's tiles are mostly padding) */
    if (f->d_extent <= 128 && f->width <= 128 &&
        (f->m_var < 0 || (!reads_var(f->k_row, f->m_var) && !reads_var(f->v_row, f->m_var)))) {
      rc_line(R, level + 1, "else if (lt_rows > %d)", LT_FT);
      put_flash_cpu_block(R, f, level + 2);
    }
    rc_line(R, level + 1, "else");
    put_flash_cpu_scalar(R, f, level + 2);
    rc_line(R, level, "}");
    return;
  }
  put_flash_cpu_scalar(R, f, level);
}

static void put_flash_cpu_scalar(Render *R, const KFlash *f, int level) {
  const long long G = (long long)f->groups, D = (long long)f->d_extent, W = (long long)f->width;
  const char *tv = R->var_name[f->t_var], *dv = R->var_name[f->d_var];
  const char *sv = R->tmp_name[f->s_tmp], *ov = R->tmp_name[f->o_tmp];
  int L = open_items(R, f, level, G);
  rc_line(R, L, "const int64_t lt_gi = lt_w %% %lldLL;", G);
  rc_bind_flat(R, L, f->group_var, f->group_ext, f->ngroup, "lt_gi");
  rc_line(R, L, "float lt_q[%lld], lt_o[%lld], lt_p[%d], lt_mx = -INFINITY, lt_l = 0.0f;", D, W, LT_FT);
  rc_line(R, L, "for (int64_t %s = 0; %s < %lldLL; %s++) {", dv, dv, D, dv);
  char lhs[96];
  snprintf(lhs, sizeof lhs, "lt_q[%s]", dv);
  rc_put_assign(R, L + 1, lhs, f->q);
  rc_line(R, L, "}");
  rc_line(R, L, "for (int64_t lt_c = 0; lt_c < %lldLL; lt_c++) lt_o[lt_c] = 0.0f;", W);
  rc_line(R, L, "int64_t lt_end = lt_T;");
  if (f->t_last) {
    rc_line(R, L, "{");
    rc_put_assign(R, L + 1, "const int64_t lt_last", f->t_last);
    rc_line(R, L + 1, "if (lt_last + 1 < lt_end) lt_end = lt_last + 1;");
    rc_line(R, L, "}");
  }
  rc_line(R, L, "for (int64_t lt_t0 = 0; lt_t0 < lt_end; lt_t0 += %d) {", LT_FT);
  L++;
  rc_line(R, L, "const int64_t lt_n = lt_end - lt_t0 < %d ? lt_end - lt_t0 : %d;", LT_FT, LT_FT);
  rc_line(R, L, "float lt_tm = -INFINITY;");
  rc_line(R, L, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) {");
  rc_line(R, L + 1, "const int64_t %s = lt_t0 + lt_j;", tv);
  rc_line(R, L + 1, "float %s = 0.0f;", sv);
  rc_line(R, L + 1, "for (int64_t %s = 0; %s < %lldLL; %s++) {", dv, dv, D, dv);
  rc_put_assign(R, L + 2, "const float lt_k", f->k);
  rc_line(R, L + 2, "%s += lt_q[%s] * lt_k;", sv, dv);
  rc_line(R, L + 1, "}");
  rc_put_assign(R, L + 1, "lt_p[lt_j]", f->score);
  rc_line(R, L + 1, "lt_tm = fmaxf(lt_tm, lt_p[lt_j]);");
  rc_line(R, L, "}");
  rc_line(R, L, "if (lt_tm == -INFINITY) continue; /* every key of the tile masked */");
  rc_line(R, L, "const float lt_nm = fmaxf(lt_mx, lt_tm), lt_c = lt_expf(lt_mx - lt_nm);");
  rc_line(R, L, "float lt_ts = 0.0f;");
  /* apart: each loop vectorizes alone */
  rc_line(R, L, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) lt_p[lt_j] = lt_expf(lt_p[lt_j] - lt_nm);");
  rc_line(R, L, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) lt_ts += lt_p[lt_j];");
  rc_line(R, L, "lt_l = lt_l * lt_c + lt_ts;");
  rc_line(R, L, "for (int64_t lt_cc = 0; lt_cc < %lldLL; lt_cc++) lt_o[lt_cc] *= lt_c;", W);
  rc_line(R, L, "for (int64_t lt_j = 0; lt_j < lt_n; lt_j++) {");
  rc_line(R, L + 1, "const int64_t %s = lt_t0 + lt_j;", tv);
  rc_line(R, L + 1, "const float lt_e = lt_p[lt_j];");
  rc_line(R, L + 1, "for (int64_t lt_cc = 0; lt_cc < %lldLL; lt_cc++) {", W);
  bind_values(R, f, L + 2);
  rc_put_assign(R, L + 2, "const float lt_v", f->v);
  rc_line(R, L + 2, "lt_o[lt_cc] += lt_e * lt_v;");
  rc_line(R, L + 1, "}");
  rc_line(R, L, "}");
  rc_line(R, L, "lt_mx = lt_nm;");
  L--;
  rc_line(R, L, "}");
  rc_line(R, L, "for (int64_t lt_cc = 0; lt_cc < %lldLL; lt_cc++) {", W);
  bind_values(R, f, L + 1);
  rc_line(R, L + 1, "const float %s = lt_o[lt_cc] / lt_l;", ov);
  rc_put_stmt(R, f->store, L + 1);
  rc_line(R, L, "}");
  close_items(R, level);
}
