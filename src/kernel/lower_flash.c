/* Kernel-stage building of attention as one flash-attention kernel (KS_FLASH): on tensor cores for the
 * register-blocked variant of a P x V kernel (prefill), on CUDA cores with the keys split over
 * blocks (flash-decoding, KFlash.decode) for the kernel itself (few query rows: decode), and on the CPU
 * as the kernel itself for every number of rows (KFlash.decode, one C function). The tile
 * stage chose it, and its matcher (tile/match_attention.c) found the shape: the scores (A) and
 * softmax (B) kernels before this P x V (C), Q, K, V and the score in C's variables, C's columns as
 * groups and values. Here that becomes the statement and its launch (code/render_flash.c,
 * render_flash_decode.c render it). */
#include <math.h>
#include <string.h>
#include "lower_internal.h"
#include "../base/settings.h"

/* score == (a < t ? -inf : x) with a = m or m + terms of neither m nor t: a; or score == (n <= t ? -inf : x)
 * with n an expression of m alone (a row's own key count, attention's kv_len): n - 1; else NULL */
static Expr *causal_last(ExprPool *P, const Expr *score, int m, int t) {
  if (score->op != X_SELECT || score->a[1]->op != X_CONST || !isinf(score->a[1]->fval) || score->a[1]->fval > 0)
    return NULL;
  const Expr *c = score->a[0];
  if (c->op == X_LE && c->a[1]->op == X_VAR && c->a[1]->ival == t && !(c->a[0]->varmask & ~(1ull << m)) &&
      !(c->a[0]->flags & (EXF_TMP | EXF_ACC | EXF_HW)) && !dtype_is_float(c->a[0]->dtype))
    return ex_add(P, ex_cast(P, DT_I64, c->a[0]), ex_int(P, -1));
  if (c->op != X_LT || c->a[1]->op != X_VAR || c->a[1]->ival != t) return NULL;
  Expr *a = c->a[0];
  if (a->op == X_VAR && a->ival == m) return a;
  if (a->op != X_ADD) return NULL;
  for (int side = 0; side < 2; side++) {
    const Expr *x = a->a[side], *rest = a->a[1 - side];
    if (x->op == X_VAR && x->ival == m && !(rest->varmask & ((1ull << m) | (1ull << t))) &&
        !(rest->flags & (EXF_LOAD | EXF_TMP)))
      return a;
  }
  return NULL;
}

/* The terms of an index that is a sum (n at most cap; -1 when there are more). */
static int add_terms(Expr *e, Expr **terms, int n, int cap) {
  if (n < 0) return -1;
  if (e->op == X_ADD) return add_terms(e->a[1], terms, add_terms(e->a[0], terms, n, cap), cap);
  if (n == cap) return -1;
  terms[n] = e;
  return n + 1;
}

/* Splits x (a load, or a cast of one) into row + col (KFlash.k_row) of its row-major flat index: col holds
 * the index terms that read a variable of colmask (none of them t), row the others, which must read memory
 * unless any_row. */
static int split_row_load(Lower *L, Expr *x, uint64_t colmask, int t, int any_row, const char *name, Expr **row,
                          Expr **col, Expr **at, int *at_var) {
  ExprPool *P = L->pool;
  Expr *load = x->op == X_CAST ? x->a[0] : x;
  if (load->op != X_LOAD || load->aux != MEM_GLOBAL || t >= 64 || load->ival < 0 || load->ival >= L->lp->nbufs)
    return 0;
  const Shape *sh = &L->lp->bufs[load->ival].shape;
  if (sh->rank != load->n || load->n < 1) return 0;
  Expr *r = NULL, *c = NULL, *stride = ex_int(P, 1);
  for (int i = load->n - 1; i >= 0; i--) {
    Expr *terms[32];
    int n = add_terms(load->a[i], terms, 0, 32);
    if (n < 1) return 0;
    for (int j = 0; j < n; j++) {
      Expr *term = ex_mul(P, terms[j], stride);
      if (terms[j]->varmask & colmask) {
        if (terms[j]->varmask & (1ull << t)) return 0;
        c = c ? ex_add(P, c, term) : term;
      } else {
        r = r ? ex_add(P, r, term) : term;
      }
    }
    stride = ex_mul(P, stride, sh->dim[i]);
  }
  if (!r || (!any_row && !(r->flags & EXF_LOAD))) return 0; /* direct addressing: little to save */
  *row = r;
  *col = c ? c : ex_int(P, 0);
  *at_var = kl_new_var(L, name);
  Expr *idx[LT_MAX_RANK]; /* (0, ..., 0, at): the flat index is `at` */
  for (int i = 0; i < load->n; i++) idx[i] = i + 1 < load->n ? ex_int(P, 0) : ex_var(P, *at_var);
  *at = ex_load(P, (int)load->ival, load->dtype, load->n, idx, MEM_GLOBAL);
  if (x != load) *at = ex_cast(P, x->dtype, *at);
  return 1;
}

/* e is a multiple of n for every value of its variables and symbols. */
static int multiple_of(const Expr *e, int64_t n) {
  switch (e->op) {
  case X_CONST: return !dtype_is_float(e->dtype) && e->ival % n == 0;
  case X_ADD:
  case X_SUB: return multiple_of(e->a[0], n) && multiple_of(e->a[1], n);
  case X_MUL: return multiple_of(e->a[0], n) || multiple_of(e->a[1], n);
  default: return 0;
  }
}

/* col, an index of the variables vars (extents ext, the last fastest, flattened as c), is base + c for every
 * c < width, with base a multiple of align. */
static int consecutive(Lower *L, const Expr *col, const int *vars, const int64_t *ext, int n, int64_t width,
                       int64_t align) {
  ExprPool *P = L->pool;
  SymEnv none = {0};
  int64_t base = 0;
  for (int64_t c = 0; c < width; c++) {
    Expr *to[L_MAX_VARS] = {0};
    int64_t stride = 1;
    for (int i = n - 1; i >= 0; i--) {
      if (vars[i] < 0 || vars[i] >= L_MAX_VARS) return 0;
      to[vars[i]] = ex_int(P, c / stride % ext[i]);
      stride *= ext[i];
    }
    int64_t at;
    if (!ex_eval_int(ex_subst_vars(P, (Expr *)col, L_MAX_VARS, to), &none, &at)) return 0;
    if (c == 0) base = at;
    if (at != base + c) return 0;
  }
  return base % align == 0;
}

/* The element load of a split (a load, or a cast of one) of f32, bf16 or f16, which the vector form reads
 * 8 elements at a time. */
static int vec_element(const Expr *at) {
  const Expr *load = at->op == X_CAST ? at->a[0] : at;
  return load->op == X_LOAD && (load->dtype == DT_F32 || load->dtype == DT_BF16 || load->dtype == DT_F16);
}

/* The element size of a split's element load. */
static size_t vec_element_size(const Expr *at) { return dtype_size((at->op == X_CAST ? at->a[0] : at)->dtype); }

/* KFlash.vec: the split rows read as 16-byte vectors (kernel.h). */
static int vec_ok(Lower *L, const KFlash *f) {
  const int64_t D = f->d_extent, W = f->width;
  if (!(D == 32 || D == 64 || D == 128) || !(W == 8 || W == 16 || W == 32 || W == 64 || W == 128)) return 0;
  if (!vec_element(f->k_at) || !vec_element(f->v_at)) return 0;

  if (!multiple_of(f->k_row, 8) || !multiple_of(f->v_row, 8)) return 0;
  return consecutive(L, f->k_col, &f->d_var, &D, 1, D, 8) &&
         consecutive(L, f->v_col, f->value_var, f->value_ext, f->nvalue, W, 8);
}

/* KFlash.k_row and v_row, both or neither; variables 64 and up are not in varmask, so they split nothing.
 * Rows that do not read memory are split only for the vector form (vec). */
static void split_rows(Lower *L, KFlash *f) {
  uint64_t vmask = 0;
  for (int i = 0; i < f->nvalue; i++) {
    if (f->value_var[i] >= 64) return;
    vmask |= 1ull << f->value_var[i];
  }
  if (f->d_var >= 64 || !vmask) return;
  int want_vec = setting_bool(SET_DECODE_VEC, 1);
  if (!split_row_load(L, f->k, 1ull << f->d_var, f->t_var, want_vec, "kat", &f->k_row, &f->k_col, &f->k_at,
                      &f->k_at_var) ||
      !split_row_load(L, f->v, vmask, f->t_var, want_vec, "vat", &f->v_row, &f->v_col, &f->v_at, &f->v_at_var)) {
    f->k_row = f->v_row = NULL;
    return;
  }
  /* the vector form for paged caches only: on the H200 it made the batched step 14% faster at 64 sequences and
   * batch 1 after 4,096 tokens 6%, but the one-sequence path over a contiguous cache 7% slower (session 13) */
  int paged = (f->k_row->flags & EXF_LOAD) && (f->v_row->flags & EXF_LOAD);
  f->vec = want_vec && paged && vec_ok(L, f);
  if (!f->vec && (!(f->k_row->flags & EXF_LOAD) || !(f->v_row->flags & EXF_LOAD))) f->k_row = f->v_row = NULL;
}

/* The vector form's blocks per multiprocessor (KKernel.min_blocks): the registers it keeps live, the outputs
 * (8 columns of each of the block's heads) and two tiles of loads (lt_flash_decode_vec's KIT = D / 32 and
 * VIT = ceil(W / 32) vectors of k and v, each one 16-byte word for 2-byte elements, two for f32), plus about 32
 * for indices, over 128 threads' share of 64K registers. Left to itself ptxas takes ~155 for Llama-3.2-1B's
 * shape (3 blocks); asked for 5 it fits in 96 without spilling (sm_90, ptxas -v). */
static int vec_blocks_per_sm(const KFlash *f) {
  const int kwords = vec_element_size(f->k_at) == 4 ? 2 : 1, vwords = vec_element_size(f->v_at) == 4 ? 2 : 1;
  const int kit = (int)f->d_extent / 32, vit = ((int)f->width + 31) / 32;
  const int live = 8 * f->rows + 2 * 4 * (kit * kwords + vit * vwords) + 32;
  const int regs = (live + 7) / 8 * 8, per = 65536 / (128 * regs);
  return per < 1 ? 1 : per > 8 ? 8 : per;
}

/* KFlash.share and rows: the group axis whose consecutive values read the same k and v (k and v use it only
 * as g // c, or not at all), with the most such values up to 8; share = -1 and rows = 1 where none has two. */
static void pick_share(KFlash *f) {
  f->share = -1;
  f->rows = 1;
  for (int i = 0; i < f->ngroup; i++) {
    int64_t div = 0, best = 1;
    int whole = 0;
    match_scan_use(f->k, f->group_var[i], &div, &whole);
    match_scan_use(f->v, f->group_var[i], &div, &whole);
    if (whole) continue;
    for (int64_t r = 2; r <= 8; r++)
      if (f->group_ext[i] % r == 0 && (div == 0 || div % r == 0)) best = r;
    if (best > f->rows) {
      f->share = i;
      f->rows = (int)best;
    }
  }
}

/* The CPU's vector form (KFlash.vec on the CPU, code/render_flash_cpu.c): the heads that share k and v in one
 * work item, each key's row offsets once, and rows read as vectors of a register's floats; it needs the split with
 * consecutive columns and d and the width multiples of 16. Where the rows read memory (a paged cache's block table) it
 * is taken for any number of query rows: the scalar form's P x V was vectorized by the compiler across keys with
 * gathers (8x slower for a batched decode step). Over a contiguous cache only for up to CPU_VEC_ROWS rows
 * (KFlash.vec_rows): there it reads each k and v row once for the heads that share it, which a decode step after
 * 2,000 tokens ran 1.3-1.5x faster, while a prefill's rows find k and v in the caches and the scalar form's loops
 * were faster (512 tokens: 3.8 ms a layer against 5.4; session 21). Else the scalar form: one head an item. */
#define CPU_VEC_ROWS 8
static void cpu_form(Lower *L, KFlash *f) {
  f->share = -1;
  f->rows = 1;
  f->vec = 0;
  f->vec_rows = 0;
  uint64_t vmask = 0;
  for (int i = 0; i < f->nvalue; i++) {
    if (f->value_var[i] >= 64) return;
    vmask |= 1ull << f->value_var[i];
  }
  const int64_t D = f->d_extent, W = f->width;
  if (f->d_var >= 64 || !vmask || D % 16 || W % 16 || !setting_bool(SET_DECODE_VEC, 1)) return;
  if (!split_row_load(L, f->k, 1ull << f->d_var, f->t_var, 1, "kat", &f->k_row, &f->k_col, &f->k_at, &f->k_at_var) ||
      !split_row_load(L, f->v, vmask, f->t_var, 1, "vat", &f->v_row, &f->v_col, &f->v_at, &f->v_at_var) ||
      !consecutive(L, f->k_col, &f->d_var, &D, 1, D, 1) ||
      !consecutive(L, f->v_col, f->value_var, f->value_ext, f->nvalue, W, 1)) {
    f->k_row = f->v_row = NULL;
    return;
  }
  pick_share(f);
  f->vec = 1;
  f->vec_rows = (f->k_row->flags & EXF_LOAD) && (f->v_row->flags & EXF_LOAD) ? 0 : CPU_VEC_ROWS;
}

/* Flash-decoding (KFlash.decode): the heads that share k and v (pick_share: a block's rows) and the launch: a
 * block per query row, row group and key chunk. Chunks of at least 32 keys,
 * as many as keep about Schedule.decode_fill blocks in all (the tile stage's choice: two on each
 * multiprocessor), at most 64 (the merge's shared weights and
 * two chunks per lane: code/render_flash_decode.c); a row with more than one chunk merges them
 * through the scratch (counters, then rows x (max, sum, width outputs) per block). */
static void decode_launch(Lower *L, KFlash *f) {
  ExprPool *P = L->pool;
  f->decode = 1;
  pick_share(f);
  split_rows(L, f);
  Expr *row_blocks = ex_mul(P, f->m_extent, ex_int(P, f->groups / f->rows));
  Expr *key_tiles = ex_bin(P, X_IDIV, ex_add(P, f->t_extent, ex_int(P, 31)), ex_int(P, 32));
  int64_t blocks = L->s.decode_fill;
  KKernel *kk = L->kk;
  /* the vector form: at most the blocks that run at once (min_blocks a multiprocessor), so no second wave */
  if (f->vec) {
    kk->min_blocks = vec_blocks_per_sm(f);
    if (L->dev && L->dev->sms > 0 && blocks > kk->min_blocks * (int64_t)L->dev->sms)
      blocks = kk->min_blocks * (int64_t)L->dev->sms;
  }
  Expr *fill = ex_bin(P, X_MIN, ex_bin(P, X_IDIV, ex_int(P, blocks), row_blocks), ex_int(P, 64));
  int ok = 1, min_tiles = f->vec ? (int)setting_int(SET_DECODE_TILES, 1, &ok) : 1;
  if (!ok || min_tiles < 1 || min_tiles > 64) min_tiles = 1;
  Expr *most = min_tiles > 1 ? ex_bin(P, X_IDIV, key_tiles, ex_int(P, min_tiles)) : key_tiles;
  f->chunks = ex_bin(P, X_MAX, ex_bin(P, X_MIN, most, fill), ex_int(P, 1));
  if (f->vec) { /* as many chunks as the tiles per chunk need, so none is left without keys */
    Expr *per =
        ex_bin(P, X_MAX, ex_bin(P, X_IDIV, ex_add(P, key_tiles, ex_add(P, f->chunks, ex_int(P, -1))), f->chunks),
               ex_int(P, 1));
    f->chunks =
        ex_bin(P, X_MAX, ex_bin(P, X_IDIV, ex_add(P, key_tiles, ex_add(P, per, ex_int(P, -1))), per), ex_int(P, 1));
  }
  kk->grid = ex_mul(P, row_blocks, f->chunks);
  kk->block = 128;
  kk->scratch = /* lt_fd_finish's layout, the vector form's too */
      ex_add(P, ex_int(P, MMA_COUNTERS), ex_mul(P, kk->grid, ex_int(P, (int64_t)f->rows * (f->width + 2) * 4)));
}

int kl_flash_body(Lower *L, const AttnMatch *am) {
  const LKernel *C = L->k;
  ExprPool *P = L->pool;
  KKernel *kk = L->kk;
  const int decode = am->decode;
  /* the matcher numbered the new variables after C's and wrote the dot product as temporary 0 */
  for (int i = 0; i < am->nnew; i++)
    if (kl_new_var(L, am->new_names[i]) != C->nvars + i) {
      if (!L->failed) diag_error(L->d, 0, 0, "kernel %s: the flash kernel's variables are not the matcher's", C->name);
      return 0;
    }
  if (kk->ntmps != 0 || kk->ntmps + 2 > K_MAX_TMPS) {
    diag_error(L->d, 0, 0, "kernel %s: the flash kernel's temporaries are not the matcher's", C->name);
    return 0;
  }
  memcpy(L->var_map, am->var_map, sizeof L->var_map);
  KFlash *f = ARENA_NEW(L->arena, KFlash);
  f->d_var = am->d_var;
  f->s_tmp = kk->ntmps;
  kk->tmp_dtype[kk->ntmps] = DT_F32;
  kk->tmp_names[kk->ntmps++] = "s";
  f->ngroup = am->ngroup;
  f->nvalue = am->nvalue;
  memcpy(f->group_var, am->group_var, sizeof f->group_var);
  memcpy(f->group_ext, am->group_ext, sizeof f->group_ext);
  memcpy(f->value_var, am->value_var, sizeof f->value_var);
  memcpy(f->value_ext, am->value_ext, sizeof f->value_ext);
  f->groups = am->groups;
  f->width = am->width;
  int m = am->m_var, t = am->t_var;
  f->m_var = m;
  f->m_extent = am->m_extent;
  f->t_var = t;
  f->t_extent = am->t_extent;
  f->d_extent = am->d_extent;
  f->q = am->q->dtype == DT_F32 ? am->q : ex_cast(P, DT_F32, am->q);
  f->k = am->k->dtype == DT_F32 ? am->k : ex_cast(P, DT_F32, am->k);
  f->v = am->v->dtype == DT_F32 ? am->v : ex_cast(P, DT_F32, am->v);
  f->score = am->score;
  f->t_last = m >= 0 ? causal_last(P, f->score, m, t) : NULL;
  f->parts = decode ? 0 : L->s.flash;
  /* the store, with the sum over t in o_tmp */
  f->o_tmp = kk->ntmps;
  kk->tmp_dtype[kk->ntmps] = DT_F32;
  kk->tmp_names[kk->ntmps++] = "o";
  L->acc_map[C->phases[0].id] = ex_tmp(P, f->o_tmp, DT_F32);
  f->store = kl_output_store(L);
  KStmt *root = kl_st_new(L, KS_SEQ);
  KStmt *s = kl_st_new(L, KS_FLASH);
  s->flash = f;
  kl_st_add(L, root, s);
  kk->body = root;
  f->scores_kernel = am->scores_kernel;
  f->softmax_kernel = am->softmax_kernel;
  if (decode && L->target == TARGET_CPU) {
    /* one C function (code/render_flash_cpu.c): its own OpenMP loop over query rows and groups */
    f->decode = 1;
    cpu_form(L, f);
    kk->grid = ex_int(P, 1);
    kk->block = 1;
    return !L->failed;
  }
  if (decode) {
    decode_launch(L, f);
    return !L->failed;
  }
  kk->tensor_cores = 1;
  /* a block of 4 warps: 64 query rows of one group */
  Expr *mblocks = ex_bin(P, X_IDIV, ex_add(P, f->m_extent, ex_int(P, 63)), ex_int(P, 64));
  kk->grid = ex_mul(P, mblocks, ex_int(P, f->groups));
  kk->block = 128;
  return !L->failed;
}
