/* Default schedules: the one function per target that picks knob values for a kernel. The tuner will
 * replace these picks with measured ones; nothing below the tile stage makes performance choices. */
#include <stdlib.h>
#include <string.h>
#include "tile_internal.h"
#include "../base/settings.h"

const char *red_strategy_name(RedStrategy r) {
  switch (r) {
  case RS_SERIAL: return "serial";
  case RS_WARP: return "warp";
  default: return "block-tree";
  }
}

/* Product of extents; -1 when any is symbolic (unknown until run time). */
static int64_t const_product(const LAxis *ax, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) {
    if (ax[i].extent->op != X_CONST) return -1;
    p *= ax[i].extent->ival;
  }
  return p;
}

/* The largest amount of serial work one parallel point would do: its biggest reduction or inner loop. */
static int64_t work_per_point(const LKernel *k) {
  int64_t w = const_product(k->inner, k->ninner);
  if (w < 0) return -1;
  for (int i = 0; i < k->nphase; i++) {
    int64_t r = const_product(k->phases[i].axes, k->phases[i].naxes);
    if (r < 0) return -1;
    if (r > w) w = r;
  }
  return w;
}

typedef struct StreamScan {
  uint64_t red_mask; /* the phase's reduction variables */
  int axis_var;
  int found;
} StreamScan;

static void stream_scan_fn(void *ctx, const Expr *e) {
  StreamScan *s = ctx;
  if (e->op == X_LOAD && (e->varmask & s->red_mask) && !(e->varmask >> s->axis_var & 1)) s->found = 1;
}

/* Some reduction streams a buffer (its index runs over the reduction) that does not depend on `var`:
 * computing several values of `var` together reads that buffer once for all of them. */
int tile_streams_independent_of(const LKernel *k, int var) {
  for (int i = 0; i < k->nphase; i++) {
    StreamScan s = {0, var, 0};
    for (int j = 0; j < k->phases[i].naxes; j++) s.red_mask |= 1ull << k->phases[i].axes[j].var;
    ex_visit(k->phases[i].body, stream_scan_fn, &s);
    if (s.found) return 1;
  }
  return 0;
}

/* Loads as consecutive values of v (the threads of a warp) see them: `bad` once some load reads
 * neither consecutive elements (last index v or v % c) nor one element for all (v absent, or only as
 * v // c with c at least a warp). */
typedef struct ThreadScan {
  int v, warp;
  int bad;
} ThreadScan;

static int only_as_quotient(const Expr *e, int v, int warp) {
  if (!(e->varmask >> v & 1)) return 1;
  if (e->op == X_IDIV && e->a[1]->op == X_CONST && e->a[1]->ival >= warp && e->a[0]->op == X_VAR) return 1;
  if (e->op == X_VAR) return 0;
  for (int i = 0; i < e->n; i++)
    if (!only_as_quotient(e->a[i], v, warp)) return 0;
  return 1;
}

static void thread_scan_fn(void *ctx, const Expr *e) {
  ThreadScan *s = ctx;
  if (e->op != X_LOAD || !(e->varmask >> s->v & 1) || e->n < 1) return;
  for (int i = 0; i + 1 < e->n; i++)
    if (!only_as_quotient(e->a[i], s->v, s->warp)) s->bad = 1;
  const Expr *last = e->a[e->n - 1];
  int contiguous = (last->op == X_VAR && last->ival == s->v) ||
                   (last->op == X_MOD && last->a[0]->op == X_VAR && last->a[0]->ival == s->v &&
                    last->a[1]->op == X_CONST && last->a[1]->ival % s->warp == 0) ||
                   only_as_quotient(last, s->v, s->warp);
  if (!contiguous) s->bad = 1;
}

/* One thread per point suits the blocked CUDA-core variant when each reduction is short (a head
 * dimension: a thread reads its rows whole) or its loads are coalesced along the innermost parallel
 * axis (P x V: the value rows; the probabilities are one value per warp). */
static int serial_suits(const LKernel *k, int warp) {
  if (k->npar < 1) return 0;
  int v = k->par[k->npar - 1].var;
  for (int i = 0; i < k->nphase; i++) {
    int64_t r = const_product(k->phases[i].axes, k->phases[i].naxes);
    if (r > 0 && r <= 128) continue;
    ThreadScan s = {v, warp, 0};
    ex_visit(k->phases[i].body, thread_scan_fn, &s);
    if (s.bad) return 0;
  }
  return k->nphase > 0;
}

/* Register blocking over the first parallel axis of run-time extent (the tokens of a step) when a
 * reduction streams a buffer independent of it. A decode step (extent 1) takes the kernel's
 * one-row path, so the blocked path only runs for prefill. */
static void choose_rows(const LKernel *k, const TargetDesc *dev, Schedule *s) {
  Target t = dev->kind;
  s->rows = 1;
  s->row_axis = -1;
  s->mma = 0;
  s->flash = 0;
  s->gemm_fill = 0;
  s->gemm_library = 0;
  for (int i = 0; i < k->npar; i++)
    if (k->par[i].extent->op != X_CONST && k->par[i].var < 64 && tile_streams_independent_of(k, k->par[i].var)) {
      /* 8 rows on every target: a batched step of 8 sequences is one block (each weight read once a step),
       * and the CPU decodes a quantized weight element once per block (a 128-token prefill of the default
       * model's Q4_1 13% faster than with 4) */
      s->rows = 8;
      s->row_axis = i;
      s->mma = target_has_bf16_mma(dev) ? 2 : 0; /* tensor cores where the kernel's shape allows */
      /* a sum over a run-time length (the keys of P x V) may be the end of an attention */
      s->flash = work_per_point(k) < 0 ? s->mma : 0;
      /* as many GEMM blocks (256 threads, ~128 registers, a block's static shared memory) as the
       * device holds at once: two on each of an H200's 132 SMs */
      s->gemm_fill = t == TARGET_CUDA ? target_resident_blocks(dev, 256, 128, dev->smem_per_block) * dev->sms : 0;
      s->gemm_library = t == TARGET_CUDA;
      s->rows_serial = t == TARGET_CUDA && serial_suits(k, dev->warp_size);
      return;
    }
}

int tile_gemv_rows_apply(const LKernel *k, const Schedule *s) {
  if (s->gemv_rows < 2 || s->red != RS_WARP || k->npar < 1 || k->nphase < 1 || k->ninner > 0) return 0;
  const LAxis *a = &k->par[k->npar - 1];
  return a->extent->op == X_CONST && a->extent->ival >= s->gemv_rows && a->var < 64 &&
         tile_streams_independent_of(k, a->var);
}

typedef struct QuantBytes {
  double per_elem; /* bytes per element of the quantized loads seen, each buffer once */
  int buf[8], nbuf;
} QuantBytes;

static void quant_bytes_fn(void *ctx, const Expr *e) {
  QuantBytes *q = ctx;
  if (e->op != X_LOAD || !dtype_is_quant(e->dtype) || q->nbuf == 8) return;
  for (int i = 0; i < q->nbuf; i++)
    if (q->buf[i] == (int)e->ival) return;
  q->buf[q->nbuf++] = (int)e->ival;
  q->per_elem += (double)dtype_block_bytes(e->dtype) / dtype_block_elems(e->dtype);
}

/* Output values a warp computes in a decode GEMV over quantized weights (Schedule.gemv_rows): a lane's step reads 8
 * elements of each weight row, 4.5 bytes of q4_0 against bf16's one 16-byte vector, so the step does little but
 * re-read the activations (a whole row of them per weight row, from L1) and compute their addresses. R rows a
 * warp share those, and put R weight loads a step in flight: R is the smallest that gets a lane's step 16 bytes of
 * weights (q4_0, q4_k, q5, q6_k: 4; q8_0: 2; a gate and an up projection read together count both), halved while the
 * grid would give a multiprocessor fewer than 8 warps (two a scheduler) to switch between (a warp per row already
 * means 32 rows a multiprocessor or more, so this bites only past 4 rows). Plain f32 / bf16 weights keep one row.
 * LATHE_GEMV_ROWS=1, 2, 4, 8 overrides. */
static int choose_gemv_rows(const LKernel *k, const TargetDesc *dev, const Schedule *s) {
  Schedule probe = *s;
  probe.gemv_rows = 2;
  if (!tile_gemv_rows_apply(k, &probe)) return 0;
  int ok = 1;
  long forced = setting_int(SET_GEMV_ROWS, 0, &ok);
  if (ok && (forced == 1 || forced == 2 || forced == 4 || forced == 8)) {
    probe.gemv_rows = (int)forced;
    return forced > 1 && tile_gemv_rows_apply(k, &probe) ? (int)forced : 0;
  }
  QuantBytes q = {0};
  for (int i = 0; i < k->nphase; i++) ex_visit(k->phases[i].body, quant_bytes_fn, &q);
  if (q.per_elem <= 0) return 0;
  int R = 1;
  while (R < 8 && R * 8 * q.per_elem < 16) R *= 2;
  const int64_t rows = k->par[k->npar - 1].extent->ival;
  while (R > 1 && rows / R < 8 * (int64_t)dev->sms) R /= 2;
  return R > 1 ? R : 0;
}

/* Warps a block of the quantized GEMV (Schedule.qgemv) where the kernel's sums read quantized weights: a block takes
 * 16 columns and its warps split k in steps of 256 elements, so the fewest warps (1-8) that give the device 16 warps
 * a multiprocessor, but no more than the steps (session 22's probe on an H100: 4 for 12288 columns of k = 4096, 8
 * for 4096 and 2048 columns); 16 (512 threads, at most 128 registers each) made q5_1's gate and up spill, so only
 * the tuner offers it. tile_choose_kinds keeps it only where the sums are a GEMM's (tile/match_gemm.c). 0: none. */
static int choose_qgemv(const LKernel *k, const TargetDesc *dev, int64_t columns) {
  if (!setting_bool(SET_QUANT_GEMV, 0)) return 0;
  QuantBytes q = {0};
  int64_t steps = 1;
  for (int i = 0; i < k->nphase; i++) {
    ex_visit(k->phases[i].body, quant_bytes_fn, &q);
    const Expr *e = k->phases[i].naxes == 1 ? k->phases[i].axes[0].extent : NULL;
    if (e && e->op == X_CONST && (e->ival + 255) / 256 > steps) steps = (e->ival + 255) / 256;
  }
  if (q.nbuf == 0) return 0;
  const int64_t blocks = (columns + 15) / 16;
  int W = 1;
  while (W < 8 && 2 * W <= steps && blocks * W < 16 * (int64_t)dev->sms) W *= 2;
  return W;
}

/* A row-wise normalization (RMSNorm, LayerNorm, softmax): reductions over a row of constant length, then that
 * row written (one inner axis of the same length). Its elements per row; 0 for any other kernel. */
static int64_t normalized_row(const LKernel *k) {
  if (k->nphase < 1 || k->ninner != 1 || k->inner[0].extent->op != X_CONST) return 0;
  int64_t n = k->inner[0].extent->ival;
  for (int i = 0; i < k->nphase; i++)
    if (k->phases[i].naxes != 1 || !ex_is_int_const(k->phases[i].axes[0].extent, n)) return 0;
  return n;
}

/* Threads per row so that the rows the device runs at once fit in half its L2 cache, for a normalization whose
 * rows (pts of them, known) do not fit in it all together; 0: no such need. A normalization reads its row once
 * per reduction and once more to write it: a warp per row keeps 64 rows on every multiprocessor (8,448 rows of
 * 16 KB on an H200, 135 MB), so every pass after the first misses the 50 MB L2 and goes to memory again, which
 * caps RMSNorm at 2/3 of the bandwidth floor and LayerNorm and softmax at 1/2 (session 11: 67%, 49% and 42%
 * tuned). With fewer rows in flight the later passes hit the cache. LATHE_ROWS_IN_L2=0 keeps the warp per row. */
static int threads_for_rows_in_l2(const LKernel *k, const TargetDesc *dev, int64_t pts) {
  int64_t row = normalized_row(k), row_bytes = row * 4; /* f32 activations */
  if (!row || dev->l2_bytes <= 0 || pts * row_bytes <= dev->l2_bytes || !setting_bool(SET_ROWS_IN_L2, 1)) return 0;
  int T = dev->warp_size;
  while (T < dev->max_threads_per_block &&
         (int64_t)dev->sms * (dev->max_threads_per_sm / T) * row_bytes > dev->l2_bytes / 2)
    T *= 2;
  return T;
}

/* The knobs before the matchers: tensor cores, flash attention and flash-decoding proposed wherever the
 * nest might take them. */
static Schedule schedule_propose(const LKernel *k, const TargetDesc *dev) {
  Target t = dev->kind;
  Schedule s = {.red = RS_SERIAL, .block_threads = 256, .vec = 1, .omp = 0, .rows = 1, .row_axis = -1};
  if (k->nphase > 0) choose_rows(k, dev, &s);
  int64_t work = work_per_point(k);
  /* one sum over a run-time length may be the P x V of an attention: on the CPU one kernel for every number of
   * query rows (its blocked variant gives way to it) */
  s.flash_decode = (t == TARGET_CUDA || t == TARGET_CPU) && k->nphase == 1 && work < 0;
  /* flash-decoding's key chunks: about eight blocks on each multiprocessor (LATHE_DECODE_FILL); with two,
   * a batch of many rows left each block a long serial walk over its keys */
  if (s.flash_decode && t == TARGET_CPU) {
    s.decode_fill = 1; /* no blocks to fill: the kernel's own OpenMP loop */
  } else if (s.flash_decode) {
    int ok = 1, per_sm = (int)setting_int(SET_DECODE_FILL, 8, &ok);
    s.decode_fill = (ok && per_sm >= 1 && per_sm <= 64 ? per_sm : 8) * dev->sms;
  }
  if (t == TARGET_CPU) {
    /* A parallel region costs microseconds (more on a loaded machine), so only kernels with a lot of
     * work get OpenMP. Symbolic extents (seq) count as 1: the decode step is the common case. Below that,
     * a reduction over a run-time length (the keys of an attention: long contexts, a batch of tokens)
     * decides when it runs (omp = 2, a team of one costing ~0.2 us otherwise), and so do a kernel over a
     * run-time number of points (a prefill's RoPE, cache writes and norms: RoPE over 512 tokens took 2.9 ms a
     * layer on one core) and a blocked variant, which runs only for `rows` tokens or more (a batched step, a
     * prefill). */
    int64_t known = 1;
    int runtime_points = 0;
    for (int i = 0; i < k->npar; i++)
      if (k->par[i].extent->op == X_CONST) known *= k->par[i].extent->ival;
      else runtime_points = 1;
    known *= work < 1 ? 1 : work;
    s.omp = known >= OMP_MIN_WORK ? 1 : (work < 0 || runtime_points) && k->npar > 0 ? 2 : 0;
    if (s.rows > 1) s.rows_omp = s.omp == 1 || known * s.rows >= OMP_MIN_WORK ? 1 : 2;
    s.block_threads = 1;
    return s;
  }
  /* CUDA: enough serial work per point to be worth splitting across threads? */
  if (work >= 0 && work < 64) return s; /* one thread per point */
  /* Threads per point (up to a whole block): double them while the launch has fewer threads than half
   * of what the device holds at once (1024 on each of an H200's 132 SMs; a GEMV with few rows is
   * latency-bound without them) and each thread still gets two 8-element vectors. Symbolic extents
   * count as 1 point (decode: seq = 1) and a symbolic reduction as 256 elements (an attention row in
   * decode). A warp = a warp per point, several points per block; more = a block per point. */
  int64_t pts = 1, w = work < 0 ? 256 : work;
  for (int i = 0; i < k->npar; i++)
    if (k->par[i].extent->op == X_CONST) pts *= k->par[i].extent->ival;
  const int warp = dev->warp_size;
  const int64_t half_device = (int64_t)dev->sms * (dev->max_threads_per_sm / 2);
  int T = warp;
  while (T < dev->max_threads_per_block && pts * T < half_device && w >= (int64_t)T * 2 * 16) T *= 2;
  const int T_l2 = work >= 0 ? threads_for_rows_in_l2(k, dev, pts) : 0;
  if (T_l2 > T) T = T_l2;
  if (T == warp) {
    s.red = RS_WARP;
    s.block_threads = 128;
  } else {
    s.red = RS_BLOCK;
    s.block_threads = T;
  }
  /* Reductions read 8 consecutive elements per thread step: one 16-byte load of bf16 weights. */
  s.vec = 8;
  s.gemv_rows = choose_gemv_rows(k, dev, &s);
  s.qgemv = choose_qgemv(k, dev, pts);
  /* LATHE_STORE_VEC=4: a normalization's write pass in 16-byte vectors (Schedule.store_vec; kernel/lower_phase.c
   * keeps one element a step where the row does not split into whole vectors for the threads) */
  if (normalized_row(k) > 0) {
    int ok = 1, sv = (int)setting_int(SET_STORE_VEC, 0, &ok);
    s.store_vec = ok && (sv == 2 || sv == 4 || sv == 8) ? sv : 0;
  }
  return s;
}

Schedule schedule_default(const LProgram *p, const LKernel *k, const TargetDesc *dev) {
  Schedule s = schedule_propose(k, dev);
  TileChoice c;
  Diag ignored = {0};
  tile_choose_kinds(p, k, dev, &s, &c, 0, &ignored); /* lenient: never refuses */
  return s;
}

const char *matmul_precision_name(MatmulPrecision m) {
  return m == MM_HIGHEST ? "highest" : m == MM_MEDIUM ? "medium" : "high";
}

int matmul_precision_parse(const char *s, MatmulPrecision *out) {
  static const MatmulPrecision all[] = {MM_HIGHEST, MM_HIGH, MM_MEDIUM};
  for (int i = 0; i < 3; i++)
    if (!strcmp(s, matmul_precision_name(all[i]))) {
      *out = all[i];
      return 1;
    }
  return 0;
}

TileProgram *tile_from_loop(const LProgram *p, const TargetDesc *dev, const FusionPolicy *fusion, MatmulPrecision mm,
                            int batch_invariant, Diag *d) {
  if (!target_check(dev, d)) return NULL;
  TileProgram *tp = tile_new(p, dev, fusion, mm);
  int flash_decode_off = !setting_bool(SET_FLASH_DECODE, 1);
  const int parts = mm == MM_HIGHEST ? 0 : mm == MM_MEDIUM ? 1 : 2;
  for (int i = 0; i < p->nkernels; i++) {
    const LKernel *k = &p->kernels[i];
    Schedule *s = &tp->kernels[i].s;
    tp->kernels[i].k = k;
    *s = schedule_propose(k, dev);
    if (s->mma) s->mma = parts;
    if (s->flash) s->flash = parts;
    if (flash_decode_off || batch_invariant) s->flash_decode = s->decode_fill = 0;
    if (batch_invariant) s->rows = s->mma = s->flash = s->gemm_library = s->gemm_fill = 0, s->row_axis = -1;
    /* keep the kinds the matchers accept, and what they found */
    if (!tile_choose_kinds(p, k, dev, s, &tp->kernels[i].c, 0, d) || !tile_knobs_check(k, dev, s, d)) return NULL;
  }
  tile_link_attention(tp);
  return tp;
}
