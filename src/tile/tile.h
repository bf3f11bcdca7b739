/* Tile stage: each loop-stage kernel plus its schedule. A schedule is plain data (knob values),
 * chosen by one default function per target today and by the tuner later. Passes below only obey it. */
#ifndef LATHE_TILE_H
#define LATHE_TILE_H
#include "../loop/loop.h"
#include "../target/target.h"

typedef enum RedStrategy {
  RS_SERIAL, /* one thread per parallel point; reductions and inner loops run serially in it */
  RS_WARP,   /* one warp per parallel point; lanes split reduction and inner loops; shuffle reduce */
  RS_BLOCK   /* one block per parallel point; threads split them; warp shuffles then a shared-memory tree */
} RedStrategy;
const char *red_strategy_name(RedStrategy r);

typedef struct Schedule {
  RedStrategy red;    /* CUDA */
  int block_threads;  /* CUDA: threads per block (multiple of 32, <= 1024) */
  int vec;            /* elements per thread step (1, 2, 4, 8): CPU: along reductions and inner loops;
                         CUDA: the widest vector of a one-axis reduction (lower_phase.c) */
  int omp;            /* CPU: OpenMP over the parallel axes */
  /* Register blocking: `rows` consecutive values of parallel axis `row_axis` (an index into the
   * kernel's par axes) are computed together, so a buffer whose index does not depend on that axis
   * (a weight, for the tokens of a prefill) is read once for all of them. rows = 1: off. */
  int rows;
  int row_axis;
  /* CUDA: the blocked variant, where it runs on CUDA cores, takes one thread per point (serial
   * reductions) instead of `red`: set when its reductions are short or read, along the innermost
   * parallel axis, consecutive elements or one element for all (attention's scores and P x V). */
  int rows_serial;
  /* CUDA: run the blocked variant on tensor cores where its shape allows (kernel/lower_mma.c), with f32
   * operands as this many bf16 parts (1 or 2; 0 = off) */
  int mma;
  /* CUDA: where the kernel is P x V after a softmax of scores (attention; kernel/lower_flash.c checks),
   * its blocked variant computes the scores, the softmax and P x V as one flash-attention kernel on
   * tensor cores, with f32 operands as this many bf16 parts (1 or 2; 0 = off) */
  int flash;
  /* CUDA: where the kernel is P x V over a run-time number of keys after a softmax of scores, the
   * kernel itself (the few-query-rows path: decode) computes the whole attention as one split-key
   * kernel on CUDA cores (flash-decoding; kernel/lower_flash.c checks the shape); 0 = off.
   * LATHE_FLASH_DECODE=0 turns it off, to compare. */
  int flash_decode;
  /* CUDA tensor-core GEMMs whose output tiles are fewer than half this many split their k range over
   * more blocks, up to about this many in all (the blocks the device runs at once), and the last
   * block of each tile adds the parts; 0 = never split */
  int gemm_fill;
  /* CUDA: tensor-core GEMMs whose weights are plain matrices also get a library form (cuBLASLt),
   * which the plan runs where the library loads (kernel.h, KGemmLib) */
  int gemm_library;
  /* CUDA flash-decoding: key chunks per row chosen so the grid holds about this many blocks in all
   * (two on each multiprocessor) */
  int decode_fill;
} Schedule;

/* How f32 activations meet bf16 weights in tensor-core GEMMs, named as in PyTorch's
 * torch.set_float32_matmul_precision: highest = no tensor cores (f32 FMAs), high = the activation split
 * into bf16 hi + lo (about f32 accuracy, two MMAs), medium = the activation rounded to bf16 (one MMA,
 * as a bf16 model in PyTorch computes). */
typedef enum MatmulPrecision { MM_HIGH, MM_HIGHEST, MM_MEDIUM } MatmulPrecision;
const char *matmul_precision_name(MatmulPrecision m);
int matmul_precision_parse(const char *s, MatmulPrecision *out);

typedef struct TileKernel {
  const LKernel *k;
  Schedule s;
} TileKernel;

typedef struct TileProgram {
  const LProgram *loop;
  Target target;
  TargetDesc device;   /* what the schedules were chosen for (printed first) */
  FusionPolicy fusion; /* the fusion choices the loop stage was built with, printed with the schedules */
  MatmulPrecision matmul;
  TileKernel *kernels; /* parallel to loop->kernels */
  int nkernels;
} TileProgram;

/* The default schedule for one kernel on one device (the function the tuner will replace). */
Schedule schedule_default(const LProgram *p, const LKernel *k, const TargetDesc *dev);
/* Refuses only illegal schedules (e.g. block_threads not a multiple of the warp size). */
int schedule_check(const Schedule *s, const TargetDesc *dev, Diag *d);
TileProgram *tile_from_loop(const LProgram *p, const TargetDesc *dev, const FusionPolicy *fusion, MatmulPrecision mm,
                            Diag *d);
/* `--ir tile`:  kernel rms_norm_0: i0,i1->grid(32) r0->thread(256) reduce=block-tree vec=1 */
void tile_print(StrBuf *b, const TileProgram *tp);
#endif
