/* ggml block formats → f32. Blocks are read byte-wise (memcpy) because tensor data inside a GGUF
 * mapping need not be aligned for the scalar types. Layouts follow the GGML format:
 *   q8_0: f16 d, 32 x int8 q                 x = q*d
 *   q4_0: f16 d, 16 bytes (lo nibbles: 0..15, hi: 16..31)   x = (q-8)*d
 *   q4_1: f16 d, f16 m, 16 bytes as q4_0                     x = q*d + m
 *   q4_k: 256 elements = 8 sub-blocks of 32: f16 d, f16 dmin, 12 bytes of packed 6-bit (scale, min)
 *         pairs, 128 bytes of nibbles; x = d*sc*q - dmin*mn
 *   q5_0: f16 d, 4 bytes of high bits (bit i: element i), 16 bytes as q4_0   x = (q-16)*d
 *   q5_1: f16 d, f16 m, high bits and nibbles as q5_0                       x = q*d + m
 *   q5_k: as q4_k plus 32 bytes of high bits before the nibbles (bit j of byte l: sub-block j, element l)
 *   q6_k: 256 elements = 16 sub-blocks of 16: 128 bytes low nibbles, 64 bytes high 2-bit pairs,
 *         16 x int8 scales, f16 d; x = d*sc*(q-32) */
#include <stdint.h>
#include <string.h>
#include "../base/rng.h"
#include "../ir/dtype.h"
#include "gguf.h"

const char *ggml_type_name(int type) {
  /* Every ggml type number, so an unsupported file says which type it has. */
  static const char *const names[] = {"f32",     "f16",    "q4_0",    "q4_1",  NULL,     NULL,    "q5_0",  "q5_1",
                                      "q8_0",    "q8_1",   "q2_k",    "q3_k",  "q4_k",   "q5_k",  "q6_k",  "q8_k",
                                      "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs",
                                      "i8",      "i16",    "i32",     "i64",   "f64",    "iq1_m", "bf16"};
  if (type < 0 || type >= (int)(sizeof names / sizeof names[0]) || !names[type]) return "unknown";
  return names[type];
}

int ggml_type_block(int type, int *block_elems, size_t *block_bytes) {
  int be;
  size_t bb;
  switch (type) {
  case GGML_F32: be = 1, bb = 4; break;
  case GGML_F16: be = 1, bb = 2; break;
  case GGML_BF16: be = 1, bb = 2; break;
  case GGML_Q8_0: be = 32, bb = 2 + 32; break;
  case GGML_Q4_0: be = 32, bb = 2 + 16; break;
  case GGML_Q4_1: be = 32, bb = 2 + 2 + 16; break;
  case GGML_Q5_0: be = 32, bb = 2 + 4 + 16; break;
  case GGML_Q5_1: be = 32, bb = 2 + 2 + 4 + 16; break;
  case GGML_Q4_K: be = 256, bb = 2 + 2 + 12 + 128; break;
  case GGML_Q5_K: be = 256, bb = 2 + 2 + 12 + 32 + 128; break;
  case GGML_Q6_K: be = 256, bb = 128 + 64 + 16 + 2; break;
  default: return 0;
  }
  if (block_elems) *block_elems = be;
  if (block_bytes) *block_bytes = bb;
  return 1;
}

static const struct {
  int ggml;
  DType dt;
} block_types[] = {{GGML_Q8_0, DT_Q8_0}, {GGML_Q4_0, DT_Q4_0}, {GGML_Q4_1, DT_Q4_1}, {GGML_Q5_0, DT_Q5_0},
                   {GGML_Q5_1, DT_Q5_1}, {GGML_Q4_K, DT_Q4_K}, {GGML_Q5_K, DT_Q5_K}, {GGML_Q6_K, DT_Q6_K}};

int ggml_type_dtype(int type, DType *out) {
  for (size_t i = 0; i < sizeof block_types / sizeof block_types[0]; i++)
    if (block_types[i].ggml == type) {
      *out = block_types[i].dt;
      return 1;
    }
  return 0;
}

int ggml_type_of_dtype(DType t) {
  for (size_t i = 0; i < sizeof block_types / sizeof block_types[0]; i++)
    if (block_types[i].dt == t) return block_types[i].ggml;
  return -1;
}

static void put_half(unsigned char *p, float v) {
  unsigned short h = f32_to_f16(v);
  memcpy(p, &h, 2);
}

void ggml_random_blocks(int type, void *dst, int64_t nblocks, uint64_t *state) {
  int be;
  size_t bb;
  if (!ggml_type_block(type, &be, &bb) || be == 1) return;
  unsigned char *b = dst;
  for (int64_t k = 0; k < nblocks; k++, b += bb) {
    for (size_t i = 0; i < bb; i++) b[i] = (unsigned char)(splitmix64(state) >> 56);
    /* a scale in [0.5, 1) / (the largest quantized magnitude); a minimum in [-1, 0) */
    float u = 0.5f + 0.5f * (float)splitmix64_unit(state), m = -(float)splitmix64_unit(state);
    switch (type) {
    case GGML_Q8_0: put_half(b, u / 128); break;
    case GGML_Q4_0: put_half(b, u / 8); break;
    case GGML_Q5_0: put_half(b, u / 16); break;
    case GGML_Q4_1:
    case GGML_Q5_1: put_half(b, u / (type == GGML_Q4_1 ? 8 : 16)), put_half(b + 2, m); break;
    case GGML_Q4_K:
    case GGML_Q5_K: put_half(b, u / (63.0f * (type == GGML_Q4_K ? 8 : 16))), put_half(b + 2, -m / 63); break;
    case GGML_Q6_K: put_half(b + 208, u / (128.0f * 32)); break;
    default: break;
    }
  }
}

static float half_at(const unsigned char *p) {
  unsigned short h;
  memcpy(&h, p, 2);
  return f16_to_f32(h);
}

static void block_q8_0(const unsigned char *b, float *y) {
  float d = half_at(b);
  for (int i = 0; i < 32; i++) y[i] = (float)(signed char)b[2 + i] * d;
}

static void block_q4_0(const unsigned char *b, float *y) {
  float d = half_at(b);
  const unsigned char *q = b + 2;
  for (int i = 0; i < 16; i++) {
    y[i] = (float)((q[i] & 0xF) - 8) * d;
    y[i + 16] = (float)((q[i] >> 4) - 8) * d;
  }
}

static void block_q4_1(const unsigned char *b, float *y) {
  float d = half_at(b), m = half_at(b + 2);
  const unsigned char *q = b + 4;
  for (int i = 0; i < 16; i++) {
    y[i] = (float)(q[i] & 0xF) * d + m;
    y[i + 16] = (float)(q[i] >> 4) * d + m;
  }
}

static void block_q5_0(const unsigned char *b, float *y) {
  float d = half_at(b);
  uint32_t qh;
  memcpy(&qh, b + 2, 4);
  const unsigned char *q = b + 6;
  for (int i = 0; i < 16; i++) {
    y[i] = (float)((int)((q[i] & 0xF) | ((qh >> i) & 1) << 4) - 16) * d;
    y[i + 16] = (float)((int)((q[i] >> 4) | ((qh >> (i + 16)) & 1) << 4) - 16) * d;
  }
}

static void block_q5_1(const unsigned char *b, float *y) {
  float d = half_at(b), m = half_at(b + 2);
  uint32_t qh;
  memcpy(&qh, b + 4, 4);
  const unsigned char *q = b + 8;
  for (int i = 0; i < 16; i++) {
    y[i] = (float)((q[i] & 0xF) | ((qh >> i) & 1) << 4) * d + m;
    y[i + 16] = (float)((q[i] >> 4) | ((qh >> (i + 16)) & 1) << 4) * d + m;
  }
}

/* q4_k packs 8 (scale, min) pairs of 6 bits into 12 bytes: pairs 0..3 sit in the low 6 bits of
 * bytes 0..3 (scale) and 4..7 (min); pairs 4..7 take their low 4 bits from bytes 8..11 (scale in the
 * low nibble, min in the high) and their top 2 bits from the spare top bits of bytes 0..3 / 4..7. */
static void q4k_scale_min(const unsigned char *s, int j, int *sc, int *mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

static void block_q4_k(const unsigned char *b, float *y) {
  float d = half_at(b), dmin = half_at(b + 2);
  const unsigned char *scales = b + 4, *q = b + 16;
  /* Each 32 bytes of nibbles hold two sub-blocks: low nibbles the first, high nibbles the second. */
  for (int pair = 0; pair < 4; pair++) {
    int sc0, mn0, sc1, mn1;
    q4k_scale_min(scales, 2 * pair, &sc0, &mn0);
    q4k_scale_min(scales, 2 * pair + 1, &sc1, &mn1);
    float d0 = d * (float)sc0, m0 = dmin * (float)mn0, d1 = d * (float)sc1, m1 = dmin * (float)mn1;
    for (int l = 0; l < 32; l++) {
      y[l] = d0 * (float)(q[l] & 0xF) - m0;
      y[l + 32] = d1 * (float)(q[l] >> 4) - m1;
    }
    y += 64;
    q += 32;
  }
}

static void block_q5_k(const unsigned char *b, float *y) {
  float d = half_at(b), dmin = half_at(b + 2);
  const unsigned char *scales = b + 4, *qh = b + 16, *q = b + 48;
  for (int pair = 0; pair < 4; pair++) {
    int sc0, mn0, sc1, mn1, j0 = 2 * pair, j1 = 2 * pair + 1;
    q4k_scale_min(scales, j0, &sc0, &mn0);
    q4k_scale_min(scales, j1, &sc1, &mn1);
    float d0 = d * (float)sc0, m0 = dmin * (float)mn0, d1 = d * (float)sc1, m1 = dmin * (float)mn1;
    for (int l = 0; l < 32; l++) {
      y[l] = d0 * (float)((q[l] & 0xF) | ((qh[l] >> j0) & 1) << 4) - m0;
      y[l + 32] = d1 * (float)((q[l] >> 4) | ((qh[l] >> j1) & 1) << 4) - m1;
    }
    y += 64;
    q += 32;
  }
}

static void block_q6_k(const unsigned char *b, float *y) {
  const unsigned char *ql = b, *qh = b + 128;
  const signed char *sc = (const signed char *)(b + 192);
  float d = half_at(b + 208);
  /* Two halves of 128 elements; in each, element l + 32k (k = 0..3) takes a nibble of ql (low nibble
   * of ql[l] / ql[l+32] for k = 0/1, high nibble for k = 2/3) and bits 2k..2k+1 of qh[l]. */
  for (int half = 0; half < 2; half++) {
    for (int l = 0; l < 32; l++) {
      int s = l / 16;
      int q0 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      int q1 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * (float)sc[s] * (float)q0;
      y[l + 32] = d * (float)sc[s + 2] * (float)q1;
      y[l + 64] = d * (float)sc[s + 4] * (float)q2;
      y[l + 96] = d * (float)sc[s + 6] * (float)q3;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

int ggml_dequantize(int type, const void *src, float *dst, int64_t n, Diag *d) {
  int be;
  size_t bb;
  if (!ggml_type_block(type, &be, &bb)) {
    diag_error(d, 0, 0, "cannot dequantize ggml type %d (%s)", type, ggml_type_name(type));
    return 0;
  }
  if (n < 0 || n % be) {
    diag_error(d, 0, 0, "dequantize %s: %lld elements is not a multiple of the block size %d", ggml_type_name(type),
               (long long)n, be);
    return 0;
  }
  const unsigned char *s = src;
  switch (type) {
  case GGML_F32: memcpy(dst, s, (size_t)n * 4); return 1;
  case GGML_F16:
    for (int64_t i = 0; i < n; i++) dst[i] = half_at(s + 2 * i);
    return 1;
  case GGML_BF16:
    for (int64_t i = 0; i < n; i++) {
      unsigned short h;
      memcpy(&h, s + 2 * i, 2);
      dst[i] = bf16_to_f32(h);
    }
    return 1;
  default: break;
  }
  void (*block)(const unsigned char *, float *) = type == GGML_Q8_0   ? block_q8_0
                                                  : type == GGML_Q4_0 ? block_q4_0
                                                  : type == GGML_Q4_1 ? block_q4_1
                                                  : type == GGML_Q5_0 ? block_q5_0
                                                  : type == GGML_Q5_1 ? block_q5_1
                                                  : type == GGML_Q4_K ? block_q4_k
                                                  : type == GGML_Q5_K ? block_q5_k
                                                                      : block_q6_k;
  for (int64_t i = 0; i < n / be; i++) block(s + (size_t)i * bb, dst + i * be);
  return 1;
}
