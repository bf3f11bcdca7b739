/* Schedule spaces: the cross product of each knob's values that apply to a kernel's nest on a device,
 * kept where schedule_check accepts it. Knobs that a candidate does not use are put at their "off"
 * value, so no two candidates build the same kernels. */
#include <stdlib.h>
#include <string.h>
#include "space.h"
#include "tile_internal.h"

typedef struct Builder {
  const LProgram *p;
  const LKernel *k;
  const TargetDesc *dev;
  Schedule *s;
  int n, cap;
} Builder;

/* Off values for the knobs a candidate does not use. */
static Schedule canonical(Schedule s, Target t) {
  if (s.rows < 2) s.rows = 1, s.row_axis = -1, s.rows_serial = 0, s.mma = 0, s.flash = 0, s.rows_omp = 0;
  if (!s.mma) s.gemm_fill = 0, s.gemm_library = 0;
  if (s.mma || s.flash) s.rows_serial = 0;
  if (!s.flash_decode) s.decode_fill = 0;
  if (s.red != RS_BLOCK || s.flash_decode || t != TARGET_CUDA) s.block_fill = 0;
  if (s.store_vec < 2 || t != TARGET_CUDA) s.store_vec = 0;
  if (s.vec < 2 || t != TARGET_CUDA) s.unroll = 0; /* unrolling counts vectors */
  if (s.gemv_rows < 2 || t != TARGET_CUDA || s.red != RS_WARP) s.gemv_rows = 0;
  if (t != TARGET_CUDA) s.qgemv = 0;
  if (s.qgemv) /* the quantized GEMV replaces the kernel's own form: its knobs at one value */
    s.red = RS_WARP, s.block_threads = 128, s.vec = 8, s.unroll = 0, s.gemv_rows = 0, s.block_fill = 0, s.store_vec = 0;
  if (t == TARGET_CPU) s.red = RS_SERIAL, s.block_threads = 1, s.rows_serial = 0;
  else s.omp = 0, s.rows_omp = 0;
  if (t == TARGET_CPU && s.flash_decode) s.rows = 1, s.row_axis = -1, s.rows_omp = 0; /* it takes every row */
  return s;
}

/* The default is kept as given (the schedule tile_from_loop uses); the others in canonical form. */
static void add(Builder *b, Schedule s) {
  if (b->n > 0) s = canonical(s, b->dev->kind);
  for (int i = 0; i < b->n; i++) {
    Schedule have = canonical(b->s[i], b->dev->kind);
    if (schedule_equal(&have, &s)) return;
  }
  Diag ignored = {0};
  if (b->n > 0 && !schedule_check(b->p, b->k, b->dev, &s, &ignored)) return; /* the default is always kept */
  if (b->n == b->cap) {
    b->cap = b->cap ? 2 * b->cap : 64;
    Schedule *grown = ARENA_ARRAY(b->p->arena, Schedule, b->cap);
    if (b->n) memcpy(grown, b->s, (size_t)b->n * sizeof *grown);
    b->s = grown;
  }
  b->s[b->n++] = s;
}

/* The blocked variant's forms: off, then per blockable axis CUDA-core rows (2, 4, 8; on CUDA with one
 * thread per point or with the kernel's own strategy), a tensor-core GEMM (without split k, or split to fill
 * half, all or twice the device; with and without its library form) and flash attention. */
typedef struct Variant {
  int rows, axis, serial, mma, flash, fill, lib;
} Variant;

static int variants(const LKernel *k, const TargetDesc *dev, int parts, const Schedule *def, Variant *out, int cap) {
  int n = 0;
  out[n++] = (Variant){1, -1, 0, 0, 0, 0, 0};
  const int cuda = dev->kind == TARGET_CUDA;
  /* split-k: the default's fill (blocks the device holds at once), else computed the same way */
  int fill = def->gemm_fill ? def->gemm_fill
                            : (cuda ? target_resident_blocks(dev, 256, 128, dev->smem_per_block) * dev->sms : 0);
  for (int a = 0; a < k->npar && n + 16 < cap; a++) {
    if (k->par[a].var >= 64 || !tile_streams_independent_of(k, k->par[a].var)) continue;
    for (int rows = 2; rows <= 8; rows *= 2)
      for (int serial = 0; serial <= cuda; serial++) out[n++] = (Variant){rows, a, serial, 0, 0, 0, 0};
    if (!cuda || !parts || !target_has_bf16_mma(dev)) continue;
    /* split-k parts: none, or as many as fill half, all or twice the blocks the device holds at once (fewer or
     * more parts per output tile; kernel/lower_mma.c caps them at 8) */
    const int fills[4] = {0, fill / 2, fill, 2 * fill};
    for (int f = 0; f < 4; f++)
      for (int lib = 0; lib < 2; lib++)
        if (!f || fills[f] > 0) out[n++] = (Variant){8, a, 0, parts, 0, fills[f], lib};
    out[n++] = (Variant){8, a, 0, 0, parts, 0, 0};
  }
  return n;
}

int schedule_space(const LProgram *p, const LKernel *k, const TargetDesc *dev, MatmulPrecision mm, const Schedule *def,
                   ScheduleSpace *out, Diag *d) {
  Builder b = {p, k, dev, NULL, 0, 0};
  add(&b, *def);
  const int parts = mm == MM_HIGHEST ? 0 : mm == MM_MEDIUM ? 1 : 2;
  Variant var[64];
  int nvar = variants(k, dev, parts, def, var, 64);
  /* the kernel's own form: (strategy, threads) pairs and vector widths */
  typedef struct Self {
    RedStrategy red;
    int threads, fill;
  } Self;
  Self self[32];
  int nself = 0;
  static const int vecs[] = {1, 2, 4, 8};
  int nvec = 4;
  if (dev->kind == TARGET_CPU) {
    self[nself++] = (Self){RS_SERIAL, 1};
  } else if (k->nphase > 0 || k->ninner > 0) {
    static const int serial_t[] = {128, 256}, warp_t[] = {128, 256}, block_t[] = {64, 128, 256, 512, 1024};
    for (int i = 0; i < 2; i++) self[nself++] = (Self){RS_SERIAL, serial_t[i]};
    for (int i = 0; i < 2; i++) self[nself++] = (Self){RS_WARP, warp_t[i]};
    /* a block per point, and with many points (known) a grid of one or two blocks per multiprocessor walking them */
    int64_t pts = 1;
    for (int i = 0; i < k->npar && pts > 0; i++)
      pts = k->par[i].extent->op == X_CONST ? pts * k->par[i].extent->ival : -1;
    const int fills = k->nphase > 0 && pts >= 4 * (int64_t)dev->sms ? 2 : 0;
    for (int i = 0; i < 5; i++)
      if (block_t[i] <= dev->max_threads_per_block)
        for (int f = 0; f <= fills; f++) self[nself++] = (Self){RS_BLOCK, block_t[i], f * dev->sms};
  } else { /* one thread per point: only the block size */
    static const int t[] = {64, 128, 256, 512, 1024};
    for (int i = 0; i < 5; i++)
      if (t[i] <= dev->max_threads_per_block) self[nself++] = (Self){RS_SERIAL, t[i]};
  }
  /* CUDA vectors only widen a reduction's loads */
  if (dev->kind == TARGET_CUDA && k->nphase == 0) nvec = 1;
  /* off, on, and where the default decides at run time (omp = 2) that too, so that it has neighbours one knob away */
  int omps = dev->kind == TARGET_CPU && k->npar > 0 ? (def->omp == 2 ? 3 : 2) : 1;
  /* flash-decoding: off, or key chunks filling 1, 2, 4 or 8 blocks per multiprocessor */
  int decode_fills[5] = {0}, ndecode = 1;
  if (dev->kind == TARGET_CUDA && k->nphase == 1)
    for (int f = 1; f <= 8; f *= 2) decode_fills[ndecode++] = f * dev->sms;
  if (dev->kind == TARGET_CPU && k->nphase == 1) decode_fills[ndecode++] = 1; /* the CPU's flash kernel */
  /* CUDA store vectors: a one-axis inner loop of constant length (a normalization's row) also as 16-byte f32
   * vectors, where its length splits evenly into them for some thread count (kernel/lower_phase.c checks each) */
  const int64_t inner_n = k->ninner == 1 && k->inner[0].extent->op == X_CONST ? k->inner[0].extent->ival : 0;
  int nsvec = dev->kind == TARGET_CUDA && inner_n > 0 && p->bufs[k->out_buf].dtype == DT_F32 ? 2 : 1;
  /* unrolling: with 8-element vectors on CUDA reductions, also one or at most two vectors a step */
  const int nunroll = dev->kind == TARGET_CUDA && k->nphase > 0;
  for (int dc = 0; dc < ndecode; dc++)
    for (int v = 0; v < nvar; v++)
      for (int si = 0; si < (dc ? 1 : nself); si++) /* flash-decoding replaces the kernel's own form */
        for (int vi = 0; vi < (dc ? 1 : nvec); vi++)
          for (int o = 0; o < omps; o++)
            for (int sv = 0; sv < (dc ? 1 : nsvec); sv++)
              for (int un = 0; un < (dc || vecs[vi] != 8 || !nunroll ? 1 : 3); un++) {
                Schedule s = *def;
                s.qgemv = 0; /* its forms come last */
                s.store_vec = sv ? 4 : 0;
                s.unroll = un; /* 0 automatic (up to 4), 1 none, 2 at most two */
                if (sv) {      /* every cooperating thread gets whole vectors: the length splits evenly */
                  const int coop = self[si].red == RS_WARP    ? dev->warp_size
                                   : self[si].red == RS_BLOCK ? self[si].threads
                                                              : 1;
                  if (inner_n % (4 * coop)) continue;
                }
                if (!dc) {
                  s.red = self[si].red;
                  s.block_threads = self[si].threads;
                  s.block_fill = self[si].fill;
                  s.vec = nvec == 1 && dev->kind == TARGET_CUDA ? def->vec : vecs[vi];
                }
                s.omp = s.rows_omp = o; /* the variant's OpenMP as the kernel's */
                s.rows = var[v].rows, s.row_axis = var[v].axis, s.rows_serial = var[v].serial;
                s.mma = var[v].mma, s.flash = var[v].flash, s.gemm_fill = var[v].fill, s.gemm_library = var[v].lib;
                s.flash_decode = dc > 0;
                s.decode_fill = decode_fills[dc];
                add(&b, s);
              }
  /* output rows a warp (Schedule.gemv_rows): off, 2, 4 and 8 for each warp-per-point candidate of 8-element vectors
   * (schedule_check keeps those whose kernel takes them); those without a blocked variant first, so that where the
   * variant does not run (schedule_space_at) each form is represented by one without it */
  for (int pass = 0, n = b.n; pass < 2 && dev->kind == TARGET_CUDA; pass++)
    for (int i = 0; i < n; i++)
      if (b.s[i].red == RS_WARP && b.s[i].vec == 8 && !b.s[i].flash_decode && (b.s[i].rows > 1) == pass)
        for (int r = 1; r <= 8; r *= 2) {
          Schedule s = b.s[i];
          s.gemv_rows = r > 1 ? r : 0;
          add(&b, s);
        }
  /* the kernel itself as the quantized GEMV (Schedule.qgemv) of 1, 2, 4, 8 or 16 warps a block, with each blocked
   * variant, where the default takes it (the nest's sums read quantized weights) */
  for (int i = 0, n = b.n; i < n && def->qgemv > 0; i++)
    for (int r = 1; r <= 16; r *= 2) {
      Schedule s = b.s[i];
      s.qgemv = r;
      add(&b, s);
    }
  (void)d;
  out->s = b.s;
  out->n = b.n;
  return 1;
}

int schedule_variant_runs(const LKernel *k, const Schedule *s, const SymEnv *env) {
  int64_t extent;
  if (s->rows < 2 || s->row_axis < 0 || s->row_axis >= k->npar) return 0;
  /* kernel/lower_kernel.c's variant_when: rows <= the axis's extent */
  return !ex_eval_int(k->par[s->row_axis].extent, env, &extent) || s->rows <= extent;
}

static Schedule launched_at(const LKernel *k, const SymEnv *env, Schedule s, Target t) {
  if (!schedule_variant_runs(k, &s, env)) s.rows = 1; /* canonical() turns the variant's knobs off */
  return canonical(s, t);
}

void schedule_space_at(const LKernel *k, const SymEnv *env, Target t, ScheduleSpace *sp) {
  int n = sp->n ? 1 : 0;
  for (int i = 1; i < sp->n; i++) {
    Schedule a = launched_at(k, env, sp->s[i], t);
    int same = 0;
    for (int j = 0; j < n && !same; j++) {
      Schedule b = launched_at(k, env, sp->s[j], t);
      same = schedule_equal(&a, &b);
    }
    if (!same) sp->s[n++] = sp->s[i];
  }
  sp->n = n;
}

int tile_print_candidates(StrBuf *b, const TileProgram *tp, Diag *d) {
  for (int i = 0; i < tp->nkernels; i++) {
    ScheduleSpace sp;
    const TileKernel *tk = &tp->kernels[i];
    if (!schedule_space(tp->loop, tk->k, &tp->device, tp->matmul, &tk->s, &sp, d)) return 0;
    sb_printf(b, "\ncandidates %s: %d\n", tk->k->name, sp.n);
    for (int j = 0; j < sp.n; j++) {
      sb_printf(b, "  %s", j ? "" : "default ");
      schedule_format(b, &sp.s[j]);
      sb_putc(b, '\n');
    }
  }
  return 1;
}
