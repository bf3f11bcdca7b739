#include "dtype.h"
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "../base/checked.h"

static const char *names[DT_COUNT] = {"f32",  "f16",  "bf16", "i32",  "i64",  "bool", "q8_0",
                                      "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"};

const char *dtype_name(DType t) { return t < DT_COUNT ? names[t] : "?"; }

int dtype_parse(const char *s, DType *out) {
  for (int i = 0; i < DT_COUNT; i++)
    if (!strcmp(s, names[i])) {
      *out = (DType)i;
      return 1;
    }
  return 0;
}

size_t dtype_size(DType t) {
  switch (t) {
  case DT_F32:
  case DT_I32: return 4;
  case DT_F16:
  case DT_BF16: return 2;
  case DT_I64: return 8;
  case DT_BOOL: return 1;
  default: return 0;
  }
}

int dtype_is_quant(DType t) { return t >= DT_Q8_0 && t < DT_COUNT; }

int dtype_is_float(DType t) { return t == DT_F32 || t == DT_F16 || t == DT_BF16 || dtype_is_quant(t); }

int dtype_block_elems(DType t) {
  return t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K ? 256 : dtype_is_quant(t) ? 32 : 1;
}

int dtype_quant_group(DType t) {
  return t == DT_Q4_0 || t == DT_Q4_1 || t == DT_Q5_0 || t == DT_Q5_1 || t == DT_Q6_K ? 16 : 32;
}

size_t dtype_block_bytes(DType t) {
  switch (t) {
  case DT_Q8_0: return 2 + 32;
  case DT_Q4_0: return 2 + 16;
  case DT_Q4_1: return 2 + 2 + 16;
  case DT_Q5_0: return 2 + 4 + 16;
  case DT_Q5_1: return 2 + 2 + 4 + 16;
  case DT_Q4_K: return 2 + 2 + 12 + 128;
  case DT_Q5_K: return 2 + 2 + 12 + 32 + 128;
  case DT_Q6_K: return 128 + 64 + 16 + 2;
  default: return dtype_size(t);
  }
}

int dtype_bytes(DType t, int64_t numel, size_t *bytes) {
  int64_t be = dtype_block_elems(t);
  if (numel < 0 || numel > LT_MAX_NUMEL || numel % be) return 0;
  *bytes = (size_t)(numel / be) * dtype_block_bytes(t);
  return 1;
}

static int rank(DType t) {
  switch (t) {
  case DT_BOOL: return 0;
  case DT_I32: return 1;
  case DT_I64: return 2;
  case DT_BF16: return 3;
  case DT_F16: return 4;
  case DT_F32: return 5;
  default: return 0;
  }
}

DType dtype_promote(DType a, DType b) {
  if (dtype_is_quant(a)) a = DT_F32; /* a quantized value computes as f32 */
  if (dtype_is_quant(b)) b = DT_F32;
  if ((a == DT_F16 && b == DT_BF16) || (a == DT_BF16 && b == DT_F16)) return DT_F32;
  return rank(a) >= rank(b) ? a : b;
}

DType dtype_compute(DType t) {
  if (dtype_is_float(t)) return DT_F32;
  if (t == DT_BOOL) return DT_BOOL;
  return DT_I64;
}

float f16_to_f32(unsigned short h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) bits = sign;
    else { /* subnormal: value = man * 2^-24 */ float f = (float)man * 5.9604644775390625e-08f;
      return sign ? -f : f;
    }
  } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
  else bits = sign | ((exp + 112) << 23) | (man << 13);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

unsigned short f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  if (isnan(f)) return (unsigned short)(sign | 0x7e00);
  float a = fabsf(f);
  if (a >= 65520.0f) return (unsigned short)(sign | 0x7c00);
  if (a < 6.103515625e-05f) { /* subnormal half: quantum 2^-24 */
    float q = nearbyintf(a * 16777216.0f);
    return (unsigned short)(sign | (uint32_t)q);
  }
  uint32_t ax = x & 0x7fffffff;
  uint32_t lsb = (ax >> 13) & 1;
  ax += 0xfff + lsb; /* round to nearest even at bit 13 */
  uint32_t exp = (ax >> 23) - 112, man = (ax >> 13) & 0x3ff;
  return (unsigned short)(sign | (exp << 10) | man);
}

float bf16_to_f32(unsigned short h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

unsigned short f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if (isnan(f)) return (unsigned short)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (unsigned short)(x >> 16);
}

double dtype_round(DType t, double v) {
  switch (t) {
  case DT_F32: return (double)(float)v;
  case DT_F16: return f16_to_f32(f32_to_f16((float)v));
  case DT_BF16: return bf16_to_f32(f32_to_bf16((float)v));
  /* saturating, NaN -> 0 (a plain conversion is undefined out of range), as ex_float_to_int */
  case DT_I32:
    if (v != v) return 0;
    return v >= 2147483647.0 ? 2147483647.0 : v <= -2147483648.0 ? -2147483648.0 : (double)(int32_t)v;
  case DT_I64:
    if (v != v) return 0;
    if (v >= 9223372036854775807.0) return 9223372036854775807.0;
    if (v <= -9223372036854775808.0) return -9223372036854775808.0;
    return (double)(int64_t)v;
  case DT_BOOL: return v != 0;
  default: return v;
  }
}
