/* Element types. Floats compute in f32 inside kernels (f64 in the reference); f16/bf16 are storage types. */
#ifndef LATHE_DTYPE_H
#define LATHE_DTYPE_H
#include <stddef.h>

typedef enum DType { DT_F32, DT_F16, DT_BF16, DT_I32, DT_I64, DT_BOOL, DT_COUNT } DType;

const char *dtype_name(DType t);            /* "f32", "f16", "bf16", "i32", "i64", "bool" */
int dtype_parse(const char *s, DType *out); /* 1 on success */
size_t dtype_size(DType t);
int dtype_is_float(DType t);
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
