/* Kernel stage: target-neutral hardware primitives, as a small structured statement tree.
 *
 * Lowered from the tile stage (loop nest + schedule). The same tree feeds the C and the CUDA
 * renderers; a renderer refuses a primitive its target lacks (the CPU has no barriers, shuffles,
 * shared memory or hardware indices; CUDA has no parallel-for).
 *
 * Expressions are loop-stage Exprs plus X_TMP (scalar temporaries declared by KS_DECL) and
 * X_HW (thread / block / lane / warp index, block size). Loads keep multi-dimensional indices into
 * row-major buffers; renderers flatten them with the buffer's (possibly symbolic) shape.
 */
#ifndef LATHE_KERNEL_H
#define LATHE_KERNEL_H
#include "../tile/tile.h"

typedef enum KStmtKind {
  KS_SEQ,         /* body[0..nbody) in order */
  KS_FOR,         /* for (var = lo; var < hi; var += step) body   -- serial */
  KS_PARFOR,      /* CPU only: parallel loop, var in [0, hi), iterations independent */
  KS_IF,          /* if (cond) body */
  KS_DECL,        /* declare mutable scalar temporary `tmp` of `dtype`, initialised to `value` */
  KS_ASSIGN,      /* tmp = value */
  KS_STORE,       /* buf[idx...] = value; space says global or shared */
  KS_SMEM,        /* CUDA only: shared array `buf` (shared-memory id) of `count` elements of `dtype` */
  KS_BARRIER,     /* CUDA only: all threads of the block */
  KS_WARP_REDUCE, /* CUDA only: tmp = all-reduce(rop) of tmp across the 32 lanes of the warp */
  KS_VLOAD,       /* declare temporaries tmp .. tmp+count-1 (`dtype` values) = `count` consecutive elements
                     of global buffer `buf` from idx...; the flat index is a multiple of `count`, so CUDA
                     reads them with vector loads (16 bytes at most each) */
  KS_VSTORE,      /* `count` consecutive elements of global buffer `buf` from idx... = temporaries tmp ..
                     tmp+count-1 (`dtype`, the buffer's); the flat index is a multiple of `count` (CUDA: 16-byte
                     vector stores at most each) */
  KS_MMA,         /* CUDA only: a whole tensor-core GEMM kernel body, described by `mma` */
  KS_FLASH,       /* CUDA only: a whole flash-attention kernel body on tensor cores, described by `flash` */
  KS_QROW,        /* CPU only: row cache `slot` holds f32 expression `value` over variable `var` (one row), unless
                     it already holds this row: each thread keeps its slots for the whole launch, keyed by the
                     values of the variables and temporaries `value` reads (code/render_common.c, render_c.c).
                     dtype f32: `value` is instead a quantized load at a weight row's first element, the row's
                     `count` elements decoded to f32, read as point array `buf` (a MEM_SHARED load); else the
                     row quantized to `count` int16 blocks of 32 for KS_QDOT; dtype f16: the row kept in f32
                     (`count` elements) for a KS_QDOT over f16 weights. rows = 8: a tile of 8 rows for the
                     tile form of KS_QDOT, the f32 expressions of the rows idx[0..7] (nidx = 8) over `var` */
  KS_QDOT,        /* CPU only: tmp += the dot product of `count` blocks of quantized buffer `buf` (`dtype`) from
                     the load `value` (the row's first element) with row cache `slot`, summed in integers; rows =
                     8: with the tile in `slot`, row t's product added to temporary row_tmp[t]. dtype f16: `count`
                     elements of an f16 weight row times the f32 row cache (code/render_hdot.c) */
  KS_VQDOT,       /* CUDA only: tmp += the dot product of the 8 consecutive elements of quantized buffer `buf`
                     (`dtype`) from the load `value` (a multiple of 8) with f32 temporaries xtmp .. xtmp+7: the
                     blocks' integer values times the activations, each scale applied once (lt_qd8_FORMAT) */
} KStmtKind;

/* A kernel that is a sum over k of A[m][k] * B_i[n][k] for one or two weights B_i (bf16) and an
 * epilogue per output element, run on tensor cores (mma.sync m16n8k16) as a tiled GEMM
 * (code/render_mma.c: 64 x 128 block tiles staged through shared memory). A (f32, any expression of m
 * and k, e.g. a norm's output) is rounded to bf16 (a_parts = 1, PyTorch's "medium" matmul precision)
 * or split into two bf16 parts, hi + lo, both multiplied by the exact bf16 weights (a_parts = 2,
 * "high"), so the result keeps about f32 accuracy. */
/* What a KS_MMA statement is: the GEMM itself (reading A from the scratch planes), its pre-pass
 * (A -> bf16 planes [a_parts][M][k_extent] in the scratch), or the library form's epilogue (each
 * output element from the products a library GEMM left in the scratch). */
/* MMA_QGEMV: the few-rows form of the same sums over quantized weights, a decode GEMV on integer tensor cores with
 * the activations as 24-bit integers (code/render_qgemv.c, code/templates/qgemv.cuh): a block per row and 16
 * columns, its `qwarps` warps splitting k, reading the blocks where they are (no scratch). */
typedef enum KMmaRole { MMA_GEMM, MMA_PACK, MMA_EPILOGUE, MMA_QGEMV } KMmaRole;

typedef struct KMma {
  int m_var; /* X_VAR of the row axis (a run-time extent: the tokens of a prefill) */
  Expr *m_extent;
  int k_var;        /* X_VAR of the reduction */
  int64_t k_extent; /* a multiple of 16 */
  int bk;           /* k per shared-memory stage: 32 where k_extent allows, else 16 */
  int a_parts;      /* 1: A rounded to bf16; 2: A = hi + lo, two MMAs per step */
  int nn;           /* column axes, last fastest; their product n_total is a multiple of 32 */
  int n_var[LT_MAX_RANK];
  int64_t n_ext[LT_MAX_RANK];
  int64_t n_total;
  Expr *a;             /* A[m][k], f32, not depending on the column variables */
  int nb;              /* 1 or 2 weights (gate and up) */
  Expr *b[2];          /* each a bf16 X_LOAD at (column variables, k), k the last index; rows of a
                          multiple of 8 elements, so 8 values of k are one aligned 16-byte copy */
  int acc_tmp[2];      /* the temporaries that hold each sum in `store` */
  struct KStmt *store; /* stores one output element (uses m_var, the column variables, acc_tmp) */
  int split_max;       /* > 1: the k range may be split over up to this many blocks per output tile,
                          as many as the grid holds (grid = tiles x splits, splits chosen from the rows
                          at run time); the last block of a tile adds the parts in split order */
  /* MMA_EPILOGUE: sum b is read from the products in the scratch (after the A planes), at
   * prod_at[b] * M + row * prod_rows[b] + the weight row its column reads */
  int64_t prod_at[2], prod_rows[2];
  KMmaRole role;
  /* MMA_PACK, stat_body != NULL: a row statistic the pre-pass computes first, one block per row: the sum of
   * stat_body over stat_var < stat_extent at row m_var (a norm's sum of squares), which A reads as temporary
   * stat_tmp. The kernel that computed it on its own (kl_mma_fuse_row_stat) launches nothing then. */
  Expr *stat_body;
  int stat_var, stat_tmp;
  int64_t stat_extent;
  int smem_limit; /* bytes of static shared memory a block may use (the device's, TargetDesc) */
  /* A quantized weight b (a block-format [rows][k] buffer) is read by the GEMM as its bf16 copy at byte
   * wq_at[b] of the scratch (-1: weight b is bf16 and read where it is), which the pre-pass writes (each element
   * lt_dq_FORMAT's value rounded to bf16) after the tile counters; A's planes start at planes_at (MMA_COUNTERS
   * when no weight is quantized). */
  int64_t wq_at[2];
  int64_t planes_at;
  int qwarps; /* MMA_QGEMV: warps a block (Schedule.qgemv) */
  int qearly; /* MMA_QGEMV: its weights prefetched before it waits for the kernel before it (KKernel.late_pdl) */
} KMma;

/* Attention as one kernel (kernel/lower_flash.c, code/render_flash.c): for each query row m and
 * column group g (a head), out[m, g, c] = sum_t softmax_t(score(q . k_t)) * v[t, c], with the scores
 * and their softmax never stored. It replaces three loop-stage kernels (scores, softmax, P x V); the
 * first two get a `skip` variant under the same condition. Expressions use the kernel's variables:
 * q of (m, group, d), k of (group, t, d), score of (s_tmp, m, group, t), v of (group, t, value), the
 * store of (m, group, value, o_tmp). f32 operands go to bf16 tensor cores as `parts` bf16 parts
 * (1: rounded; 2: hi + lo, three MMAs per product: hi*hi + hi*lo + lo*hi). */
typedef struct KFlash {
  int m_var;
  Expr *m_extent; /* query rows (run-time) */
  int t_var;
  Expr *t_extent; /* keys (run-time) */
  int d_var;
  int64_t d_extent;   /* the dot product's length: at most 128 (tensor cores: a multiple of 16) */
  int ngroup, nvalue; /* group axes (one block's columns share q and k) and value axes, last fastest */
  int group_var[LT_MAX_RANK], value_var[LT_MAX_RANK];
  int64_t group_ext[LT_MAX_RANK], value_ext[LT_MAX_RANK];
  int64_t groups, width; /* products of the extents; width at most 128 (tensor cores: a multiple of 16) */
  Expr *q, *k, *v;       /* f32 */
  int s_tmp;             /* the dot product, in `score` */
  Expr *score;           /* f32; -inf masks the key out */
  Expr *t_last;          /* NULL, or the last key row m can see: score is -inf for every t > t_last, which
                            is m plus terms of neither m nor t (a causal mask), so blocks stop early */
  int o_tmp;             /* the attention's output, in `store` */
  struct KStmt *store;
  int parts;
  int scores_kernel, softmax_kernel; /* the loop-stage kernels (A and B) whose work this kernel does */
  /* decode = 1 (flash-decoding, code/render_flash_decode.c): f32 on CUDA cores, parts = 0, for few
   * query rows. A block takes one query row, `rows` consecutive values of group axis `share` (heads
   * whose k and v are the same: grouped-query attention) and one chunk of the keys; the grid is
   * rows of m x (groups / rows) x `chunks` (an Expr over symbols). With chunks > 1 each block leaves
   * its softmax state (max, sum, outputs) in the scratch and the last block of a row merges them in
   * chunk order. m_var = -1: one query row. */
  int decode;
  int share, rows;
  Expr *chunks; /* NULL: the CPU's form (code/render_flash_cpu.c), one C function for every number of rows */
  /* decode, where k and v are each one load whose index reads memory per key (a paged cache's block
   * table): the index as a key's row part (of t and the block's row, no column variable) plus a column
   * part (of d, or of the value axes), and the element as a load at variable *_at_var, so the block
   * computes each key's row once per tile instead of once per element. NULL: no such split. */
  Expr *k_row, *k_col, *k_at, *v_row, *v_col, *v_at;
  int k_at_var, v_at_var;
  /* with the split: every key's row starts at a multiple of 8 elements, and 8 consecutive d (and 8 consecutive
   * value columns from a multiple of 8) are 8 consecutive elements of one f32, bf16 or f16 load, so the kernel
   * reads k and v 16 bytes at a time (lt_flash_decode_vec; LATHE_DECODE_VEC=0: never). On the CPU (chunks NULL)
   * vec = 1 is its vector form: the split with consecutive columns (any base), d and the width multiples of 16,
   * `rows` heads an item reading each key once (code/render_flash_cpu.c); vec = 0 there: no split, rows = 1. */
  int vec;
  int vec_rows; /* CPU, vec = 1: > 0: the vector form only up to this many query rows, the scalar form beyond */
} KFlash;

#define MMA_COUNTERS 4096 /* bytes of tile counters at the start of a tensor-core GEMM's scratch */

/* The most variables and temporaries a KS_QROW's expressions may read (its row cache's key): a tile's 8 row
 * indices and a norm's factor per row fit */
#define K_QROW_KEYS 24

typedef struct KStmt KStmt;
struct KStmt {
  KStmtKind kind;
  int var;              /* KS_FOR / KS_PARFOR loop variable (X_VAR id) */
  Expr *lo, *hi, *step; /* KS_FOR; KS_PARFOR uses hi */
  Expr *cond;           /* KS_IF; KS_PARFOR: run in parallel only where it holds (NULL: always) */
  int tmp;              /* KS_DECL / KS_ASSIGN / KS_WARP_REDUCE / KS_VLOAD (the first) */
  DType dtype;          /* KS_DECL / KS_SMEM / KS_VLOAD */
  Expr *value;          /* KS_DECL / KS_ASSIGN / KS_STORE */
  int buf;              /* KS_STORE / KS_SMEM / KS_VLOAD */
  MemSpace space;       /* KS_STORE */
  int nidx;
  Expr *idx[LT_MAX_RANK]; /* KS_STORE / KS_VLOAD */
  ReduceOp rop;           /* KS_WARP_REDUCE */
  int count;              /* KS_SMEM, KS_VLOAD */
  KMma *mma;              /* KS_MMA */
  KFlash *flash;          /* KS_FLASH */
  int slot;               /* KS_QROW / KS_QDOT: the row cache */
  int xtmp;               /* KS_VQDOT: the first of the 8 activations */
  int rows;               /* KS_QROW / KS_QDOT: 8 for a tile of activation rows, else 0 */
  int row_tmp[8];         /* KS_QDOT with rows = 8: each row's accumulator */
  KStmt **body;           /* KS_SEQ / KS_FOR / KS_PARFOR / KS_IF */
  int nbody;
};

typedef struct KKernel KKernel;
/* The library form of a tensor-core GEMM: C_w[p * m + i][r] = sum_k A_p[i][k] * W_w[r][k] for each
 * distinct weight w and plane p of A (bf16 planes and weights, f32 C; one GEMM of a_parts * m rows
 * per weight), then the epilogue kernel, which adds the planes' products. */
#define LIB_MAX_A_BUFS 8
typedef struct KGemmLib {
  int nw;
  int w_param[2]; /* the GEMM kernel's parameter index of each distinct weight */
  int64_t w_rows[2];
  int64_t k;
  int a_parts;
  Expr *m; /* rows of A (symbols) */
  KKernel *epilogue;
  /* A as the pre-pass computes it (its expression with the rows and k named m and k, the parts and k) and
   * the buffers it reads: the plan skips a pre-pass whose planes the previous kernel's left in place */
  const char *a_sig;
  int a_bufs[LIB_MAX_A_BUFS], na_bufs; /* na_bufs = -1: more than fit (never skipped) */
  /* >= 0: the epilogue would only copy the products (direct_add < 0) or add them to another f32 buffer of the
   * output's layout (a residual: parameter direct_add), so the GEMM writes straight into this output parameter,
   * adding that buffer, and the epilogue is not launched */
  int direct_out, direct_add;
  int64_t planes_at; /* byte offset of A's planes in the scratch (KMma.planes_at) */
  int64_t w_at[2];   /* >= 0: weight w is read from its bf16 copy at this scratch byte (KMma.wq_at), not w_param */
} KGemmLib;

typedef struct KParam {
  int buf;       /* LBuf id */
  int is_output; /* written by this kernel */
} KParam;

#define K_MAX_PARAMS 32
#define K_MAX_TMPS 512

struct KKernel {
  const char *name;
  KParam params[K_MAX_PARAMS]; /* buffer parameters, in call order */
  int nparams;
  const char *syms[16]; /* symbol parameters (i64), after the buffers, in this order */
  int nsyms;
  KStmt *body;
  /* CUDA launch shape: grid = number of blocks (an Expr over symbols), block = threads per block. */
  Expr *grid;
  int block;
  int min_blocks; /* CUDA: > 0 asks the compiler for registers that let this many blocks share a multiprocessor */
  int late_pdl;   /* CUDA: the body waits for the kernel before it itself (lt_pdl), after work that does not need it */
  /* Set by the code stage when another kernel of the program has exactly the same code (the same
   * layer op in every layer): the function to launch, with this kernel's own arguments. NULL = name. */
  const char *code_name;
  /* A variant for large run-time extents (register blocking, Schedule.rows): the same computation,
   * launched instead of this kernel when `alt_when` (an Expr over symbols) is non-zero, e.g. seq >= 8
   * for a prefill. Kept apart so the decode kernel is not compiled for the variant's registers. */
  KKernel *alt;
  Expr *alt_when;
  int tensor_cores; /* the body is a KS_MMA or KS_FLASH (bf16 mma.sync needs sm_80 or newer) */
  /* A variant that launches nothing: a later kernel's variant (`by`, a flash attention) computes what
   * this kernel would, under the same condition. */
  int skip;
  const char *by;
  /* Device scratch the kernel needs (bytes, an Expr over symbols; NULL = none): the plan passes it as
   * one more argument, after the symbol table. `pre` is a kernel of the same parameters (and scratch)
   * that the plan launches right before this one, with its own grid: the tensor-core GEMM's pass that
   * evaluates A once and stores it as bf16 planes in the scratch. The scratch is zero when the plan
   * allocates it, and its first MMA_COUNTERS bytes (a split GEMM's tile counters) are zero again
   * whenever a kernel ends. */
  Expr *scratch;
  KKernel *pre;
  /* A tensor-core GEMM whose weights are plain [rows][k] matrices may instead run as library GEMMs
   * (cuBLASLt; Schedule.gemm_library): after `pre`, the plan multiplies A's planes by each distinct
   * weight into the scratch, then launches lib->epilogue, which applies this kernel's store. */
  struct KGemmLib *lib;
  int ntmps;
  DType tmp_dtype[K_MAX_TMPS];
  const char *tmp_names[K_MAX_TMPS]; /* readable names ("acc0", "i0", "p"); renderers make them unique */
  const char *var_names[L_MAX_VARS]; /* names of X_VAR ids, for printing and code */
  int nvars;
  Schedule sched;
};

typedef struct KProgram {
  const LProgram *loop; /* buffers (names, dtypes, shapes), inputs, outputs, symbols */
  Target target;
  TargetDesc device; /* the tile stage's device */
  KKernel *kernels;
  int nkernels;
} KProgram;

KProgram *kernel_from_tile(const TileProgram *tp, Diag *d);
/* The index of kk's parameter for buffer buf that the kernel writes (output 1) or only reads (0), else -1. */
int kernel_param_of(const KKernel *kk, int buf, int output);
/* Kernel i's tensor-core pre-pass takes over kernel i - 1 where that one only computes a row statistic (or a
 * row normalized by one) that no other kernel reads: the pre-pass computes it per row, and kernel i - 1
 * launches nothing whenever the GEMM variant runs. Returns whether it did. */
int kl_mma_fuse_row_stat(const TileProgram *tp, KProgram *kp, int i);
/* The columns of a quantized GEMV's block (MMA_QGEMV): one m16n8k32 MMA's rows. */
#define QGEMV_COLS 16

/* CUDA: runs of consecutive independent elementwise kernels (RoPE of q and the K and V cache scatters) become
 * one kernel each, launched from the run's first slot (kernel/merge.c). Returns how many it made. */
int kl_merge_elementwise(KProgram *kp);
/* `--ir kernel`: the statement tree, e.g.  smem s0[8] f32; v = warp_sum(v); barrier */
void kernel_print(StrBuf *b, const KProgram *kp);
#endif
