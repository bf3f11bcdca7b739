/* Element types. Floats compute in f32 inside kernels (f64 in the reference); f16/bf16 are storage types. */
#ifndef LATHE_DTYPE_H
#define LATHE_DTYPE_H
#include <stddef.h>
#include <stdint.h>

/* The quantized types are ggml's block formats (src/model/dequant.c has their layouts): a tensor of one keeps
 * its logical shape, its last dimension a multiple of the block's elements, and is stored as consecutive
 * blocks in row-major element order (element i sits in block i / elems). They exist only as program inputs
 * (weights): every op reads them as f32 values, no op produces one, and kernels decode each element they
 * load from its block. */
typedef enum DType {
  DT_F32,
  DT_F16,
  DT_BF16,
  DT_I32,
  DT_I64,
  DT_BOOL,
  DT_Q8_0,
  DT_Q4_0,
  DT_Q4_1,
  DT_Q5_0,
  DT_Q5_1,
  DT_Q4_K,
  DT_Q5_K,
  DT_Q6_K,
  DT_COUNT
} DType;

const char *dtype_name(DType t);            /* "f32", "f16", "bf16", "i32", "i64", "bool", "q8_0", ... */
int dtype_parse(const char *s, DType *out); /* 1 on success */
size_t dtype_size(DType t);                 /* bytes per element; 0 for a quantized type (see dtype_bytes) */
int dtype_is_float(DType t);                /* true for the quantized types too: their values are floats */
int dtype_is_quant(DType t);
/* Elements and bytes of one block: 1 and dtype_size for the unquantized types. */
int dtype_block_elems(DType t);
size_t dtype_block_bytes(DType t);
/* A quantized block's elements in groups that share their bytes' offsets (16: the two nibbles of a byte are
 * elements l and 16 + l; else 32): kernels loop over a group's elements with affine byte offsets. */
int dtype_quant_group(DType t);
/* Bytes of numel elements of t; 0 when numel is negative, above LT_MAX_NUMEL or not a whole number of blocks. */
int dtype_bytes(DType t, int64_t numel, size_t *bytes);
/* The type both operands of a binary op are converted to: the wider float wins, a float beats an int. */
DType dtype_promote(DType a, DType b);
/* The type arithmetic is done in inside a kernel: f32 for every float, i64 for ints, bool for bool. */
DType dtype_compute(DType t);

/* Round-trip a value through a storage type (used by tests and the reference to see what a kernel sees). */
float f16_to_f32(unsigned short h);
unsigned short f32_to_f16(float f); /* round to nearest even */
float bf16_to_f32(unsigned short h);
unsigned short f32_to_bf16(float f);   /* round to nearest even */
double dtype_round(DType t, double v); /* v as stored in t, back as double */
#endif
