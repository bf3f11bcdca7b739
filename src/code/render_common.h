/* Shared by the C and CUDA renderers: naming, expression rendering with per-statement common
 * subexpression elimination, index flattening and the statement walker. The target-specific files
 * write only their preamble and the kernel signatures. */
#ifndef LATHE_RENDER_COMMON_H
#define LATHE_RENDER_COMMON_H
#include "code.h"

#define RC_MAX_SMEM 64

typedef struct NameSet {
  char **slots;
  size_t cap, n;
} NameSet;

typedef struct CseMap CseMap;

/* What the renderers write for one target language: the shared walker (render_common.c,
 * render_expr.c) reads these instead of testing for a target, so another C-like language (OpenCL C,
 * say) is one more table, a preamble and its kernel signature. NULL: the language lacks the feature,
 * and a kernel that needs it fails to render with a clear error. */
typedef struct Dialect {
  const char *renderer, *target;    /* "render_cuda", "CUDA": error messages */
  const char *i64, *i32, *u16, *u8; /* integer types (u16: f16/bf16 storage, u8: bool storage) */
  const char *bool_compute;         /* a bool value inside a kernel */
  const char *nan, *inf;            /* float constants */
  const char *hw[5];                /* HwIndex order: thread, block, lane, warp, block size */
  const char *shared;               /* qualifier of block-shared arrays */
  const char *barrier;              /* the statement that synchronises a block */
  const char *shuffle_xor;          /* printf format of (value, lane mask): value exchanged in a warp */
  const char *bits_to_float;        /* reinterprets 32 bits as a float (vector loads; NULL: element loads) */
  const char *vec2, *vec4;          /* 8- and 16-byte vector types of 32-bit words */
  const char *parallel_for;         /* the line before a KS_PARFOR loop */
  int templates;                    /* the template kernels (templates/ *.cuh: KS_MMA, KS_FLASH) */
} Dialect;
extern const Dialect rc_dialect_c, rc_dialect_cuda;

typedef struct Render {
  StrBuf *out;
  const KProgram *kp;
  const LProgram *lp;
  const KKernel *kk;
  ExprPool *pool;
  Diag *d;
  const Dialect *dl; /* the target language */
  int failed;
  const char **buf_name; /* by LBuf id; NULL for buffers that are not parameters of this kernel */
  const char *sym_name[16];
  const char *var_name[L_MAX_VARS];
  const char *tmp_name[K_MAX_TMPS];
  const char *smem_name[RC_MAX_SMEM];
  DType smem_dtype[RC_MAX_SMEM];
  NameSet names;
  int ncse;
  CseMap *cse;      /* the statement being rendered */
  int canonical;    /* name buffer parameters b0, b1, ... by position (code_dedupe compares such texts) */
  int hpairs;       /* C: the f16 tile dot products rendered so far in this kernel (each has a pair cache) */
  int hpairs_total; /* C: and in the whole kernel (a thread's pair caches) */
} Render;

/* The most variables and temporaries a CPU row cache's key holds (kernel.h) */
#define RC_QKEYS K_QROW_KEYS

/* render_quant.c: the decoder function of quantized type t ("lt_dq_q4_1"), and every decoder, into the
 * preamble of a program that reads a quantized buffer (cuda: CUDA C, else C). */
const char *rc_quant_decoder(DType t);
void rc_put_quant_decoders(StrBuf *out, const KProgram *kp, int cuda);
/* The decoders themselves (CUDA: also lt_dq8_FORMAT, eight elements at once), whatever the program. */
void rc_put_quant_source(StrBuf *out, int cuda);
/* C: the tile form of the integer dot products (render_quant_tile.c), after rc_put_quant_source's */
void rc_put_quant_tile_source(StrBuf *out);
/* C: the row caches' head (OpenMP's thread number, the weight prefetch distance LT_QPF, LT_OPQ), which
 * rc_put_quant_source includes; and the f16 dot products (render_hdot.c: lt_hdot, lt_hdott), after that head. */
void rc_put_rowcache_head(StrBuf *out);
void rc_put_hdot_source(StrBuf *out);

/* render_qdot.c, CUDA: a KS_VQDOT statement. */
void rc_put_vqdot(Render *R, const KStmt *s, int level);

/* One kernel's definition in the target language (render_c.c / render_cuda.c). */
void rc_c_kernel(Render *R, const KKernel *kk);
void rc_cuda_kernel(Render *R, const KKernel *kk);

/* Records the first error ("render_c: kernel k: ...") and marks the render failed. */
void rc_fail(Render *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* render_names.c: names every parameter, symbol, temporary, shared array and loop variable of kk (0 on failure);
 * rc_kernel_end forgets them. */
int rc_kernel_begin(Render *R, const KKernel *kk);
void rc_kernel_end(Render *R);
/* C type of a value of dtype t inside a kernel (f16/bf16 compute as float) / in memory. */
const char *rc_compute_type(const Render *R, DType t);
const char *rc_storage_type(const Render *R, DType t);
/* The kernel body, statements at indentation `level`. */
void rc_body(Render *R, int level);
/* 1 if s is a C identifier (render_names.c). */
int rc_is_identifier(const char *s);
/* One statement at indentation `level` (any kind). */
void rc_put_stmt(Render *R, const KStmt *s, int level);
/* `lhs = value;` at `level`, with value's repeated subexpressions named first. */
void rc_put_assign(Render *R, int level, const char *lhs, Expr *value);
/* `return value;` at `level`, likewise (the body of a template kernel's expression function). */
void rc_put_return(Render *R, int level, Expr *value);
/* render_expr.c: the row-major flat index of buffer b at idx[0..n); a use of e (its CSE name when it
 * has one); a load as a computed value; e as float. */
Expr *rc_flat_index(Render *R, const LBuf *b, int n, Expr *const *idx);
void rc_put_ref(Render *R, StrBuf *b, const Expr *e);
void rc_put_load(Render *R, StrBuf *b, const Expr *e);
void rc_put_as_float(Render *R, StrBuf *b, const Expr *e);
/* Flattens the loads in roots[], then declares, at `level`, every subexpression used more than once
 * (and safe to evaluate unconditionally) as a named constant; rc_cse_end forgets them. */
void rc_cse_begin(Render *R, Expr **roots, int n, int level);
void rc_cse_end(Render *R);
/* A kernel name not used yet in this kernel, close to base (render_names.c). */
const char *rc_unique_name(Render *R, const char *base);
/* One line of a template kernel (render_mma.c, render_flash.c) at indentation `level`, printf-style;
 * a line longer than 511 characters fails the render instead of being cut. */
void rc_line(Render *R, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Declares axis variables vars[] (extents ext[], last fastest) from the flat index `flat`. */
void rc_bind_flat(Render *R, int level, const int *vars, const int64_t *ext, int n, const char *flat);
/* CUDA: a KS_MMA statement (render_mma.c). */
void rc_put_mma(Render *R, const KStmt *s, int level);
/* render_mma.c's pieces the quantized GEMV shares: the column variables from a flat column index, lt_fstore */
void rc_mma_bind_columns(Render *R, const KMma *m, int level, const char *flat);
void rc_mma_put_store_fn(Render *R, const KMma *m, int L);
/* render_qgemv.c: a KS_MMA statement of role MMA_QGEMV */
void rc_put_qgemv(Render *R, const KMma *m, int level);
/* CUDA: a KS_FLASH statement (render_flash.c; flash-decoding: render_flash_decode.c). */
void rc_put_flash(Render *R, const KStmt *s, int level);
void rc_put_flash_decode(Render *R, const KStmt *s, int level);
void rc_put_flash_cpu(Render *R, const KStmt *s, int level);
#endif
