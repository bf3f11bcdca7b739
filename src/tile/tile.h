/* Tile stage: each loop-stage kernel plus its schedule. A schedule is plain data (knob values),
 * chosen by one default function per target today and by the tuner later. Passes below only obey it. */
#ifndef LATHE_TILE_H
#define LATHE_TILE_H
#include "../loop/loop.h"
#include "../target/target.h"
#include "match.h"

typedef enum RedStrategy {
  RS_SERIAL, /* one thread per parallel point; reductions and inner loops run serially in it */
  RS_WARP,   /* one warp per parallel point; lanes split reduction and inner loops; shuffle reduce */
  RS_BLOCK   /* one block per parallel point; threads split them; warp shuffles then a shared-memory tree */
} RedStrategy;
const char *red_strategy_name(RedStrategy r);

typedef struct Schedule {
  RedStrategy red;   /* CUDA */
  int block_threads; /* CUDA: threads per block (multiple of 32, <= 1024) */
  int vec;           /* elements per thread step (1, 2, 4, 8): CPU: along reductions and inner loops;
                        CUDA: the widest vector of a one-axis reduction (lower_phase.c) */
  /* CPU: OpenMP over the parallel axes: 0 = off, 1 = on, 2 = where the run-time work (points times
   * their reduction and inner elements, OMP_RUN_TIME_WORK) is large: a batched step of many tokens */
  int omp;
  /* Register blocking: `rows` consecutive values of parallel axis `row_axis` (an index into the
   * kernel's par axes) are computed together, so a buffer whose index does not depend on that axis
   * (a weight, for the tokens of a prefill) is read once for all of them. rows = 1: off. */
  int rows;
  int row_axis;
  /* CPU: the blocked variant's OpenMP (0, 1, 2 as `omp`): it runs only for at least `rows` values of the
   * blocked axis (a batched step, a prefill), so it has that many times the work the kernel itself has */
  int rows_omp;
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
  /* CUDA, a block per point (RS_BLOCK): at most this many blocks, each taking every block_fill-th point in turn
   * (a grid-stride loop), so fewer rows are in flight at once (a long-row normalization's later passes then
   * find its row in L1 / L2); 0: a block per point */
  int block_fill;
  /* CUDA: elements each thread takes per step of a one-axis inner loop of constant length (the row a normalization
   * writes): its loads and its store as vectors of this many (4: one 16-byte f32 vector); 0 or 1: one element */
  int store_vec;
  /* vectors per loop step of a vectorized one-axis reduction (their loads issued before any use): 0 = as many as
   * divide the thread's vectors, up to 4 and 8 vector loads a step (lower_phase.c); 1, 2 or 4: at most that many */
  int unroll;
  /* CUDA, the kernel itself (not its blocked variant): each point is this many consecutive values of the last
   * parallel axis (of constant extent), their sums in one loop, so the buffers that do not depend on that axis
   * (a decode GEMV's activation row) are read once for all of them and each value's own loads (its weight row)
   * are in flight together; 0 or 1: one value a point. LATHE_GEMV_ROWS overrides the default's choice. */
  int gemv_rows;
  /* CUDA, the kernel itself where it is a sum over quantized weights that a tensor-core GEMM could compute (its
   * blocked variant's shape, tile/match_gemm.c): a GEMV on integer tensor cores with the activations as 24-bit
   * integers (code/templates/qgemv.cuh), a block of 16 output columns and this many warps (1, 2, 4, 8 or 16)
   * splitting k; 0 = the loop nest. LATHE_QUANT_GEMV=0 turns it off, to compare. */
  int qgemv;
} Schedule;

/* Work (points times their reduction and inner elements) from which a CPU kernel takes OpenMP: a
 * parallel region costs microseconds (more on a loaded machine). */
#define OMP_MIN_WORK 262144
/* The same where the sizes are known only at run time (Schedule.omp = 2): attention's softmax and P x V, whose
 * elements are scalar and strided (P x V over 161 keys of SmolLM2: ~0.75 ns an element on one core, against
 * 0.06 for a GEMV's integer dot products), and the blocked variants. A team of two there costs ~0.6 us; P x V
 * over 161 keys took 70 us alone and 37 us on two cores. */
#define OMP_MIN_RUNTIME_WORK 32768

/* How f32 activations meet bf16 weights in tensor-core GEMMs, named as in PyTorch's
 * torch.set_float32_matmul_precision: highest = no tensor cores (f32 FMAs), high = the activation split
 * into bf16 hi + lo (about f32 accuracy, two MMAs), medium = the activation rounded to bf16 (one MMA,
 * as a bf16 model in PyTorch computes). */
typedef enum MatmulPrecision { MM_HIGH, MM_HIGHEST, MM_MEDIUM } MatmulPrecision;
const char *matmul_precision_name(MatmulPrecision m);
int matmul_precision_parse(const char *s, MatmulPrecision *out);

/* What a loop nest becomes, decided here from the nest, its Schedule and the device (the kernel stage
 * builds exactly this and nothing else). */
typedef enum KernelKind {
  KIND_NONE,         /* (variant) no variant */
  KIND_LOOP,         /* the loop nest itself: points, reductions, the store */
  KIND_ROWS,         /* the register-blocked variant on CUDA cores (or the CPU) */
  KIND_GEMM,         /* the blocked variant as a tensor-core GEMM (kernel/lower_mma.c) */
  KIND_FLASH,        /* the blocked variant as flash attention over this P x V, its scores and softmax */
  KIND_FLASH_DECODE, /* the kernel itself as flash-decoding (CUDA cores) */
  KIND_QGEMV,        /* the kernel itself as a GEMV over quantized weights on integer tensor cores (CUDA) */
  KIND_SKIP,         /* launches nothing: another kernel's flash computes it (TileChoice.by) */
} KernelKind;
const char *kernel_kind_name(KernelKind k);

typedef struct TileChoice {
  KernelKind self;         /* KIND_LOOP, KIND_FLASH_DECODE, KIND_QGEMV or KIND_SKIP */
  KernelKind variant;      /* with Schedule.rows > 1: KIND_ROWS, KIND_GEMM or KIND_FLASH; else KIND_NONE */
  int library;             /* the GEMM also has its library form (cuBLASLt) */
  const GemmMatch *gemm;   /* variant == KIND_GEMM: what the matcher found */
  const AttnMatch *flash;  /* variant == KIND_FLASH */
  const AttnMatch *decode; /* self == KIND_FLASH_DECODE */
  const GemmMatch *qgemv;  /* self == KIND_QGEMV: the sums as the GEMM matcher found them */
  /* The scores and softmax kernels of an attention whose P x V is kernel `by` (-1: none): in decode
   * (by's self is flash-decoding) this kernel launches nothing; in prefill (by's variant is flash
   * attention, under its condition) it gets a variant that launches nothing. */
  int by, by_decode, by_prefill;
} TileChoice;

typedef struct TileKernel {
  const LKernel *k;
  Schedule s;
  TileChoice c;
  const char *origin; /* where s came from ("measured 12.3 us", "default: ..."), printed by --ir tile; NULL when
                         no tuning database was consulted */
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

/* The default schedule for one kernel (of p) on one device (the function the tuner will replace): tensor
 * cores, flash attention and flash-decoding only where the matchers accept the nest. */
Schedule schedule_default(const LProgram *p, const LKernel *k, const TargetDesc *dev);
/* Whether kernel k's own form (not its blocked variant) takes s->gemv_rows values of its last parallel axis a point
 * (Schedule.gemv_rows): CUDA, a warp per point, sums and no inner loop, the axis of constant extent (at least that
 * many) with some reduction streaming a buffer that does not depend on it. */
int tile_gemv_rows_apply(const LKernel *k, const Schedule *s);
/* The quantized weight types the quantized GEMV reads (Schedule.qgemv, code/templates/qgemv.cuh), and the longest k
 * it is chosen for (beyond the largest models' down projections; the template's loop over k has no limit of its own) */
int tile_qgemv_format(DType t);
#define QGEMV_MAX_K 32768
/* Whether schedule s is legal for kernel k (of p) on the device: the knobs' ranges (vector width,
 * rows, threads per block against the device), and every kernel kind it asks for (tensor-core GEMM,
 * flash attention, flash-decoding) against the matchers and the device (bf16 mma). 0 with d saying
 * why. A schedule from outside (a tuner) is honoured exactly when this accepts it. */
int schedule_check(const LProgram *p, const LKernel *k, const TargetDesc *dev, const Schedule *s, Diag *d);
/* The kinds schedule s makes of kernel k (s already checked), with the matchers' findings (allocated in
 * p's arena); the by / by_decode / by_prefill links are set by tile_link_attention. */
int tile_choose(const LProgram *p, const LKernel *k, const TargetDesc *dev, const Schedule *s, TileChoice *c, Diag *d);
/* Every kernel's schedule_default (with the precision's parts and LATHE_FLASH_DECODE=0 applied). */
/* batch_invariant: no kernel variants (register blocking, tensor cores, library GEMMs) and no flash-decoding, so
 * every row's reductions run in an order its own sizes fix, whatever else the batch holds. */
TileProgram *tile_from_loop(const LProgram *p, const TargetDesc *dev, const FusionPolicy *fusion, MatmulPrecision mm,
                            int batch_invariant, Diag *d);
/* The given schedules (one per kernel, e.g. a tuner's), each checked by schedule_check: honoured, or
 * NULL with d saying which kernel's knob is illegal and why. fusion may be NULL (printed as default). */
TileProgram *tile_from_schedules(const LProgram *p, const TargetDesc *dev, const FusionPolicy *fusion,
                                 MatmulPrecision mm, const Schedule *given, Diag *d);
/* `--ir tile`:  kernel rms_norm_0: i0,i1->grid(32) r0->thread(256) reduce=block-tree vec=1 */
void tile_print(StrBuf *b, const TileProgram *tp);
#endif
