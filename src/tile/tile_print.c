/* `--ir tile`: each kernel's loop nest summarised with where each axis goes under its schedule. */
#include "tile.h"

static void axes(StrBuf *b, const LKernel *k, const LAxis *ax, int n) {
  for (int i = 0; i < n; i++) {
    if (i) sb_putc(b, ',');
    sb_printf(b, "%s<", k->var_names[ax[i].var]);
    ex_print(b, ax[i].extent, NULL);
  }
}

static void points(StrBuf *b, const LKernel *k) {
  if (!k->npar) {
    sb_puts(b, "1");
    return;
  }
  for (int i = 0; i < k->npar; i++) {
    if (i) sb_putc(b, '*');
    ex_print(b, k->par[i].extent, NULL);
  }
}

/* Where the per-point loops (reductions, inner store loop) go. */
static const char *split_name(const Schedule *s, Target t) {
  if (t == TARGET_CPU || s->red == RS_SERIAL) return "serial";
  return s->red == RS_WARP ? "lane" : "thread";
}

void tile_print(StrBuf *b, const TileProgram *tp) {
  sb_printf(b, "target %s  fusion: reductions=%s recompute=%s", target_name(tp->target),
            tp->fusion.fuse_reductions ? "fuse" : "cut", tp->fusion.allow_recompute ? "allow" : "cut");
  if (tp->target == TARGET_CUDA) sb_printf(b, "  matmul precision: %s", matmul_precision_name(tp->matmul));
  sb_putc(b, '\n');
  target_print(b, &tp->device);
  sb_putc(b, '\n');
  const int warp = tp->device.warp_size;
  for (int i = 0; i < tp->nkernels; i++) {
    const LKernel *k = tp->kernels[i].k;
    const Schedule *s = &tp->kernels[i].s;
    sb_printf(b, "kernel %s: ", k->name);
    if (k->npar) axes(b, k, k->par, k->npar);
    else sb_puts(b, "(single point)");
    if (tp->target == TARGET_CPU) {
      sb_puts(b, s->omp == 2 ? " -> omp-if-large(" : s->omp ? " -> omp(" : " -> serial(");
      points(b, k);
      sb_putc(b, ')');
    } else if (s->red == RS_SERIAL) {
      sb_printf(b, " -> grid(ceil(");
      points(b, k);
      sb_printf(b, "/%d)) x thread(%d)", s->block_threads, s->block_threads);
    } else if (s->red == RS_WARP) {
      sb_printf(b, " -> grid(ceil(");
      points(b, k);
      sb_printf(b, "/%d)) x warp(%d per block)", s->block_threads / warp, s->block_threads / warp);
    } else if (s->block_fill > 0) {
      sb_puts(b, " -> grid(min(");
      points(b, k);
      sb_printf(b, ", %d)) walking every %d-th", s->block_fill, s->block_fill);
    } else {
      sb_puts(b, " -> grid(");
      points(b, k);
      sb_puts(b, ")");
    }
    const char *split = split_name(s, tp->target);
    for (int ph = 0; ph < k->nphase; ph++) {
      sb_printf(b, " | acc%d ", ph);
      axes(b, k, k->phases[ph].axes, k->phases[ph].naxes);
      sb_printf(b, " -> %s", split);
      if (s->red == RS_WARP && tp->target == TARGET_CUDA) sb_printf(b, "(%d)", warp);
      if (tp->target == TARGET_CUDA && s->red != RS_SERIAL)
        sb_printf(b, "(%d)", s->red == RS_WARP ? warp : s->block_threads);
      if (tp->target == TARGET_CUDA)
        sb_printf(b, " reduce=%s", s->red == RS_BLOCK ? "block-tree" : s->red == RS_WARP ? "warp-shuffle" : "serial");
      if (k->phases[ph].recompute) sb_puts(b, " recompute");
    }
    if (k->ninner) {
      sb_puts(b, " | store ");
      axes(b, k, k->inner, k->ninner);
      sb_printf(b, " -> %s", split);
      if (s->red == RS_WARP && tp->target == TARGET_CUDA) sb_printf(b, "(%d)", warp);
      if (tp->target == TARGET_CUDA && s->red != RS_SERIAL)
        sb_printf(b, "(%d)", s->red == RS_WARP ? warp : s->block_threads);
    }
    sb_printf(b, " vec=%d", s->vec);
    if (s->rows > 1 && s->row_axis >= 0 && s->row_axis < k->npar)
      sb_printf(b, " rows=%d(%s)", s->rows,
                k->var_names[k->par[s->row_axis].var] ? k->var_names[k->par[s->row_axis].var] : "?");
    if (tp->target == TARGET_CUDA && tile_gemv_rows_apply(k, s) && !s->qgemv)
      sb_printf(b, " gemv-rows=%d(%s)", s->gemv_rows,
                k->var_names[k->par[k->npar - 1].var] ? k->var_names[k->par[k->npar - 1].var] : "?");
    if (s->rows > 1 && tp->target == TARGET_CPU && s->rows_omp)
      sb_puts(b, s->rows_omp == 2 ? " rows-omp-if-large" : " rows-omp");
    if (s->mma) sb_printf(b, " mma=bf16x%d", s->mma);
    if (s->mma && s->gemm_fill) sb_printf(b, " split-k-fill=%d", s->gemm_fill);
    if (s->mma && s->gemm_library) sb_puts(b, " or-cublaslt");
    if (s->flash) sb_printf(b, " flash-attention=bf16x%d", s->flash);
    if (s->flash_decode) sb_printf(b, " flash-decoding(fill=%d)", s->decode_fill);
    if (s->rows_serial) sb_puts(b, " rows-serial");
    if (s->qgemv) sb_printf(b, " qgemv=%d", s->qgemv);
    /* what the kernel stage builds: the kernel itself, its blocked variant, who computes it */
    const TileChoice *c = &tp->kernels[i].c;
    KernelKind var = c->variant;
    if (c->by >= 0 && c->by < tp->nkernels) { /* an attention's flash kernel decides this one's variant */
      const TileKernel *by = &tp->kernels[c->by];
      if (!c->by_decode) var = KIND_SKIP; /* under the flash variant's condition */
      else if (by->c.variant == KIND_NONE || by->c.variant == KIND_FLASH) var = KIND_NONE;
      else if (!(var != KIND_NONE && s->rows == by->s.rows &&
                 k->par[s->row_axis].extent == by->k->par[by->s.row_axis].extent))
        var = KIND_LOOP; /* its own kernel where the P x V's (CUDA-core) variant runs */
    }
    sb_printf(b, " => %s", kernel_kind_name(c->self));
    if (var != KIND_NONE) sb_printf(b, " + variant %s%s", kernel_kind_name(var), c->library ? "|cublaslt" : "");
    if (c->by >= 0 && c->by < tp->nkernels) {
      /* a flash-decoding kernel without a variant (the CPU's) computes it at every size */
      const int always = c->by_prefill || (c->by_decode && tp->kernels[c->by].c.variant == KIND_NONE);
      sb_printf(b, " (computed by %s in %s)", tp->kernels[c->by].k->name,
                c->by_decode && always ? "decode and prefill"
                : c->by_decode         ? "decode"
                                       : "prefill");
    }
    if (tp->kernels[i].origin) sb_printf(b, "  [%s]", tp->kernels[i].origin);
    sb_putc(b, '\n');
  }
}
