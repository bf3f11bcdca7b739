/* What each loop nest becomes (TileChoice), from its Schedule, the matchers and the device; the check
 * that a schedule is legal (the gate a tuner's schedules pass), and the tile program from given
 * schedules. */
#include <string.h>
#include "tile_internal.h"

const char *kernel_kind_name(KernelKind k) {
  switch (k) {
  case KIND_NONE: return "none";
  case KIND_LOOP: return "loop";
  case KIND_ROWS: return "rows";
  case KIND_GEMM: return "gemm";
  case KIND_FLASH: return "flash-attention";
  case KIND_FLASH_DECODE: return "flash-decoding";
  case KIND_QGEMV: return "qgemv";
  default: return "skip";
  }
}

static int kernel_index(const LProgram *p, const LKernel *k) {
  return k >= p->kernels && k < p->kernels + p->nkernels ? (int)(k - p->kernels) : -1;
}

/* A matcher's refusal (which begins with the kernel's name) as the schedule's error. */
static int refuse(Diag *d, const LKernel *k, const Diag *why) {
  (void)k;
  diag_error(d, 0, 0, "kernel %s", why->msg);
  return 0;
}

int tile_qgemv_format(DType t) { return dtype_is_quant(t) ? (int)(t - DT_Q8_0) : -1; }

/* Schedule.qgemv: the kernel itself as the quantized GEMV where its sums are a GEMM's over quantized weights of the
 * template's formats, of whole blocks. */
static int choose_qgemv(const LProgram *p, const LKernel *k, const TargetDesc *dev, Schedule *s, TileChoice *c,
                        int strict, Diag *d) {
  Diag why = {0};
  const GemmMatch *gm = c->variant == KIND_GEMM ? c->gemm : NULL;
  const char *no = NULL;
  if (dev->kind != TARGET_CUDA) no = "is a CUDA kernel";
  else if (!target_has_bf16_mma(dev)) no = "needs int8 mma (sm_80 or newer)"; /* the same generation as bf16's */
  else if (c->self != KIND_LOOP) no = "replaces the loop nest only";
  /* the rows: the blocked variant's axis, else one of extent 1 (an LM head over the last token) */
  int row = s->row_axis >= 0 && s->row_axis < k->npar ? s->row_axis : -1;
  for (int i = 0; i < k->npar && row < 0; i++)
    if (ex_is_int_const(k->par[i].extent, 1)) row = i;
  if (!no && row < 0) no = "needs a row axis (run-time, or of extent 1)";
  if (!no && !gm) {
    GemmMatch *own = ARENA_NEW(p->arena, GemmMatch);
    if (match_gemm(p, k, row, own, &why)) gm = own;
    else no = "needs the sums of a GEMM";
  }
  int kquant = 0;
  for (int b = 0; !no && b < gm->nb; b++) {
    DType t = gm->b[b]->dtype;
    if (tile_qgemv_format(t) < 0) no = "needs quantized weights";
    kquant |= dtype_block_elems(t) == 256;
  }
  if (!no && (gm->k_extent % (kquant ? 256 : 32) || gm->k_extent > QGEMV_MAX_K))
    no = "needs k of whole blocks, at most 32768";
  if (!no && s->qgemv != 1 && s->qgemv != 2 && s->qgemv != 4 && s->qgemv != 8 && s->qgemv != 16)
    no = "takes 1, 2, 4, 8 or 16 warps a block";
  if (no) {
    if (strict) {
      diag_error(d, 0, 0, "kernel %s: the quantized GEMV (qgemv) %s%s%s", k->name, no, why.msg[0] ? ": " : "", why.msg);
      return 0;
    }
    s->qgemv = 0;
    return 1;
  }
  c->self = KIND_QGEMV;
  c->qgemv = gm;
  return 1;
}

int tile_choose_kinds(const LProgram *p, const LKernel *k, const TargetDesc *dev, Schedule *s, TileChoice *c,
                      int strict, Diag *d) {
  *c = (TileChoice){.self = KIND_LOOP, .variant = KIND_NONE, .by = -1};
  int idx = kernel_index(p, k);
  Diag why = {0};
  int blocked = s->rows > 1 && s->row_axis >= 0 && s->row_axis < k->npar;
  if (blocked) c->variant = KIND_ROWS;
  if (s->mma && blocked) {
    GemmMatch *gm = ARENA_NEW(p->arena, GemmMatch);
    if (match_gemm(p, k, s->row_axis, gm, &why)) {
      c->variant = KIND_GEMM;
      c->gemm = gm;
      if (s->gemm_library && !gm->library) {
        if (strict) {
          diag_error(d, 0, 0, "kernel %s: a library GEMM needs every weight as a plain [rows][k] matrix", k->name);
          return 0;
        }
        s->gemm_library = 0;
      }
      c->library = s->gemm_library;
      s->flash = 0;
    } else if (strict) {
      return refuse(d, k, &why);
    } else {
      s->mma = 0;
    }
  }
  if (s->flash && blocked && c->variant != KIND_GEMM) {
    AttnMatch *am = ARENA_NEW(p->arena, AttnMatch);
    if (idx >= 0 && match_attention(p, idx, s->row_axis, 0, am, &why)) {
      c->variant = KIND_FLASH;
      c->flash = am;
    } else if (strict) {
      return idx < 0 ? (diag_error(d, 0, 0, "kernel %s is not in its program", k->name), 0) : refuse(d, k, &why);
    } else {
      s->flash = 0;
    }
  }
  if (s->flash_decode) {
    AttnMatch *am = ARENA_NEW(p->arena, AttnMatch);
    if (idx >= 0 && match_attention(p, idx, s->row_axis, 1, am, &why)) {
      c->self = KIND_FLASH_DECODE;
      c->decode = am;
      if (dev->kind == TARGET_CPU && c->variant != KIND_NONE) { /* the CPU's flash kernel computes every row */
        if (strict) {
          diag_error(d, 0, 0, "kernel %s: on the CPU flash attention takes every query row (rows 1)", k->name);
          return 0;
        }
        c->variant = KIND_NONE;
        s->rows = 1, s->row_axis = -1, s->rows_omp = 0;
      }
    } else if (strict) {
      return idx < 0 ? (diag_error(d, 0, 0, "kernel %s is not in its program", k->name), 0) : refuse(d, k, &why);
    } else {
      s->flash_decode = 0;
      s->decode_fill = 0;
    }
  }
  if (s->qgemv && !choose_qgemv(p, k, dev, s, c, strict, d)) return 0;
  return 1;
}

int tile_choose(const LProgram *p, const LKernel *k, const TargetDesc *dev, const Schedule *s, TileChoice *c, Diag *d) {
  Schedule copy = *s;
  return tile_choose_kinds(p, k, dev, &copy, c, 1, d);
}

int tile_knobs_check(const LKernel *k, const TargetDesc *dev, const Schedule *s, Diag *d) {
  const char *name = k->name;
  /* 8 elements = one 16-byte vector of bf16, the widest load the kernels issue (0 counts as 1) */
  if (s->vec < 0 || s->vec > 8 || (s->vec && 8 % s->vec)) {
    diag_error(d, 0, 0, "kernel %s: vector width %d does not divide 8 (1, 2, 4 or 8)", name, s->vec);
    return 0;
  }
  if (s->store_vec < 0 || s->store_vec > 8 || (s->store_vec && 8 % s->store_vec)) {
    diag_error(d, 0, 0, "kernel %s: store vector width %d does not divide 8 (1, 2, 4 or 8)", name, s->store_vec);
    return 0;
  }
  if (s->unroll != 0 && s->unroll != 1 && s->unroll != 2 && s->unroll != 4) {
    diag_error(d, 0, 0, "kernel %s: unrolling of %d vectors (0 automatic, 1, 2 or 4)", name, s->unroll);
    return 0;
  }
  if (s->gemv_rows != 0 && s->gemv_rows != 1 && s->gemv_rows != 2 && s->gemv_rows != 4 && s->gemv_rows != 8) {
    diag_error(d, 0, 0, "kernel %s: %d output rows a warp (0 or 1 off, 2, 4 or 8)", name, s->gemv_rows);
    return 0;
  }
  if (s->gemv_rows > 1 && (dev->kind != TARGET_CUDA || !tile_gemv_rows_apply(k, s))) {
    diag_error(d, 0, 0,
               "kernel %s: %d output rows a warp need CUDA, a warp per point, sums, no inner loop and a last parallel "
               "axis of at least that constant extent whose sums stream a buffer independent of it",
               name, s->gemv_rows);
    return 0;
  }
  if (s->store_vec > 1 && dev->kind != TARGET_CUDA) { /* the CPU's inner loops take `vec` */
    diag_error(d, 0, 0, "kernel %s: a store vector width is a CUDA knob (the CPU's inner loops use vec)", name);
    return 0;
  }
  if (s->rows != 0 && s->rows != 1 && s->rows != 2 && s->rows != 4 && s->rows != 8) { /* 0 or 1: off */
    diag_error(d, 0, 0, "kernel %s: register blocking of %d rows (1, 2, 4 or 8)", name, s->rows);
    return 0;
  }
  if (s->omp < 0 || s->omp > 2 || s->rows_omp < 0 || s->rows_omp > 2) {
    diag_error(d, 0, 0, "kernel %s: OpenMP setting %d / %d (0 off, 1 on, 2 where the run-time work is large)", name,
               s->omp, s->rows_omp);
    return 0;
  }
  if (s->rows > 1 && (s->row_axis < 0 || s->row_axis >= k->npar)) {
    diag_error(d, 0, 0, "kernel %s: register blocking on parallel axis %d, which it does not have", name, s->row_axis);
    return 0;
  }
  if (dev->kind == TARGET_CUDA) {
    if (s->block_threads > dev->max_threads_per_block) {
      diag_error(d, 0, 0, "kernel %s: %d threads per block, more than %s allows (%d)", name, s->block_threads,
                 dev->name, dev->max_threads_per_block);
      return 0;
    }
    if (s->block_threads < dev->warp_size || s->block_threads % dev->warp_size) {
      diag_error(d, 0, 0, "kernel %s: %d threads per block is not a multiple of %d", name, s->block_threads,
                 dev->warp_size);
      return 0;
    }
    if (s->red != RS_SERIAL && s->red != RS_WARP && s->red != RS_BLOCK) {
      diag_error(d, 0, 0, "kernel %s: reduction strategy %d does not exist", name, (int)s->red);
      return 0;
    }
  }
  if (s->mma < 0 || s->mma > 2 || s->flash < 0 || s->flash > 2) {
    diag_error(d, 0, 0, "kernel %s: tensor-core parts must be 0, 1 or 2 (mma %d, flash %d)", name, s->mma, s->flash);
    return 0;
  }
  if ((s->mma || s->flash || (s->flash_decode && dev->kind != TARGET_CPU)) && dev->kind != TARGET_CUDA) {
    diag_error(d, 0, 0, "kernel %s: tensor-core GEMMs, flash attention and flash-decoding are CUDA kernels", name);
    return 0;
  }
  if ((s->mma || s->flash) && !target_has_bf16_mma(dev)) {
    diag_error(d, 0, 0, "kernel %s: %s asked, but %s (sm_%d%d) has no bf16 mma", name,
               s->mma ? "a tensor-core GEMM" : "flash attention", dev->name, dev->cc_major, dev->cc_minor);
    return 0;
  }
  if ((s->mma || s->flash) && s->rows < 2) {
    diag_error(d, 0, 0, "kernel %s: %s is a register-blocked variant: it needs rows > 1", name,
               s->mma ? "a tensor-core GEMM" : "flash attention");
    return 0;
  }
  if (s->mma && s->flash) {
    diag_error(d, 0, 0, "kernel %s: a variant is a tensor-core GEMM or flash attention, not both", name);
    return 0;
  }
  if (s->flash_decode && s->decode_fill < 1) {
    diag_error(d, 0, 0, "kernel %s: flash-decoding needs a number of blocks to fill (decode_fill >= 1)", name);
    return 0;
  }
  if (s->block_fill < 0 || s->block_fill > (1 << 24) ||
      (s->block_fill && (dev->kind != TARGET_CUDA || s->red != RS_BLOCK || s->flash_decode))) {
    diag_error(d, 0, 0, "kernel %s: a block fill (%d) needs a CUDA block per point (red=block), no flash-decoding",
               name, s->block_fill);
    return 0;
  }
  return 1;
}

int schedule_check(const LProgram *p, const LKernel *k, const TargetDesc *dev, const Schedule *s, Diag *d) {
  TileChoice c;
  return tile_knobs_check(k, dev, s, d) && tile_choose(p, k, dev, s, &c, d);
}

/* The scores and softmax kernels of each chosen flash kernel learn which kernel computes them. */
void tile_link_attention(TileProgram *tp) {
  for (int i = 0; i < tp->nkernels; i++) {
    const TileChoice *c = &tp->kernels[i].c;
    for (int pass = 0; pass < 2; pass++) {
      const AttnMatch *am = pass ? c->decode : c->flash;
      if (!am) continue;
      int which[2] = {am->scores_kernel, am->softmax_kernel};
      for (int j = 0; j < 2; j++) {
        TileChoice *r = &tp->kernels[which[j]].c;
        r->by = i;
        if (pass) {
          r->by_decode = 1;
          r->self = KIND_SKIP;
        } else {
          r->by_prefill = 1;
        }
      }
    }
  }
}

TileProgram *tile_new(const LProgram *p, const TargetDesc *dev, const FusionPolicy *fusion, MatmulPrecision mm) {
  TileProgram *tp = ARENA_NEW(p->arena, TileProgram);
  tp->loop = p;
  tp->target = dev->kind;
  tp->device = *dev;
  tp->fusion = fusion ? *fusion : fusion_policy_default();
  tp->matmul = mm;
  tp->nkernels = p->nkernels;
  tp->kernels = ARENA_ARRAY(p->arena, TileKernel, p->nkernels ? p->nkernels : 1);
  return tp;
}

TileProgram *tile_from_schedules(const LProgram *p, const TargetDesc *dev, const FusionPolicy *fusion,
                                 MatmulPrecision mm, const Schedule *given, Diag *d) {
  if (!target_check(dev, d)) return NULL;
  TileProgram *tp = tile_new(p, dev, fusion, mm);
  for (int i = 0; i < p->nkernels; i++) {
    const LKernel *k = &p->kernels[i];
    tp->kernels[i].k = k;
    tp->kernels[i].s = given[i];
    if (!tile_knobs_check(k, dev, &given[i], d) || !tile_choose(p, k, dev, &given[i], &tp->kernels[i].c, d))
      return NULL;
  }
  tile_link_attention(tp);
  return tp;
}
