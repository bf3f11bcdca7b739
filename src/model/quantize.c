/* f32 → ggml blocks, round-to-nearest. Each format's scale choice is the standard one:
 *   q8_0:  d = amax / 127, q = round(x / d)
 *   q4_0 / q5_0: v = the element of largest magnitude, d = v / -8 (-16), q = round(x / d) + 8 (16)
 *   q4_1 / q5_1: m = min, d = (max - min) / 15 (31), q = round((x - m) / d)
 *   q4_k / q5_k: per sub-block of 32, min = min(0, min x), scale = (max - min) / 15 (31); the eight
 *          scales and mins are quantized to 6 bits against d = max scale / 63, dmin = max min / 63
 *   q6_k:  per sub-block of 16, scale = v / -32 (v as for q4_0); the 16 scales are quantized to int8
 *          against d = max-magnitude scale / -128
 * Element codes are computed against the scales as stored (after f16 and 6/8-bit rounding), so the
 * dequantized value is the nearest the stored scales can give. Layouts: see dequant.c. */
#include "quantize.h"
#include <math.h>
#include <string.h>
#include "../ir/dtype.h"
#include "gguf.h"

static int clampi(long v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

/* The f16 d stored at p, read back as the value the dequantizer will use. */
static float put_half(unsigned char *p, float x) {
  unsigned short h = f32_to_f16(x);
  memcpy(p, &h, 2);
  return f16_to_f32(h);
}

static float signed_absmax(const float *x, int n) {
  float v = 0, a = 0;
  for (int i = 0; i < n; i++)
    if (fabsf(x[i]) > a) a = fabsf(x[i]), v = x[i];
  return v;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
  *mn = *mx = x[0];
  for (int i = 1; i < n; i++) {
    if (x[i] < *mn) *mn = x[i];
    if (x[i] > *mx) *mx = x[i];
  }
}

static int code(float x, float d, int lo, int hi) { return d != 0 ? clampi(lrintf(x / d), lo, hi) : 0; }

static void quant_q8_0(const float *x, unsigned char *b) {
  float amax = fabsf(signed_absmax(x, 32));
  float d = put_half(b, amax / 127.0f);
  for (int i = 0; i < 32; i++) b[2 + i] = (unsigned char)(signed char)code(x[i], d, -127, 127);
}

/* q4_0 and q5_0: 32 codes of `bits` bits around zero; the high bit (q5_0) goes into 4 bytes. */
static void quant_sym32(const float *x, unsigned char *b, int bits) {
  int half = 1 << (bits - 1);
  float d = put_half(b, signed_absmax(x, 32) / (float)-half);
  unsigned char *qs = b + (bits == 5 ? 6 : 2);
  uint32_t qh = 0;
  for (int i = 0; i < 16; i++) {
    int q0 = code(x[i], d, -half, half - 1) + half, q1 = code(x[i + 16], d, -half, half - 1) + half;
    qs[i] = (unsigned char)((q0 & 0xF) | (q1 & 0xF) << 4);
    qh |= (uint32_t)(q0 >> 4) << i | (uint32_t)(q1 >> 4) << (i + 16);
  }
  if (bits == 5) memcpy(b + 2, &qh, 4);
}

/* q4_1 and q5_1: 32 codes from the minimum up. */
static void quant_affine32(const float *x, unsigned char *b, int bits) {
  int top = (1 << bits) - 1;
  float mn, mx;
  min_max(x, 32, &mn, &mx);
  float d = put_half(b, (mx - mn) / (float)top), m = put_half(b + 2, mn);
  unsigned char *qs = b + (bits == 5 ? 8 : 4);
  uint32_t qh = 0;
  for (int i = 0; i < 16; i++) {
    int q0 = code(x[i] - m, d, 0, top), q1 = code(x[i + 16] - m, d, 0, top);
    qs[i] = (unsigned char)((q0 & 0xF) | (q1 & 0xF) << 4);
    qh |= (uint32_t)(q0 >> 4) << i | (uint32_t)(q1 >> 4) << (i + 16);
  }
  if (bits == 5) memcpy(b + 4, &qh, 4);
}

/* The 12-byte packing of eight 6-bit (scale, min) pairs that dequant.c's q4k_scale_min reads. */
static void pack_scale_min(unsigned char *s, const int *sc, const int *mn) {
  memset(s, 0, 12);
  for (int j = 0; j < 4; j++) {
    s[j] = (unsigned char)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
    s[j + 4] = (unsigned char)((mn[j] & 63) | (mn[j + 4] >> 4) << 6);
    s[j + 8] = (unsigned char)((sc[j + 4] & 0xF) | (mn[j + 4] & 0xF) << 4);
  }
}

/* q4_k (bits 4) and q5_k (bits 5): 256 elements in 8 sub-blocks of 32. */
static void quant_k_affine(const float *x, unsigned char *b, int bits) {
  int top = (1 << bits) - 1;
  float scale[8], minv[8], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; j++) {
    float mn, mx;
    min_max(x + 32 * j, 32, &mn, &mx);
    if (mn > 0) mn = 0;
    scale[j] = (mx - mn) / (float)top;
    minv[j] = -mn;
    if (scale[j] > max_scale) max_scale = scale[j];
    if (minv[j] > max_min) max_min = minv[j];
  }
  float d = put_half(b, max_scale / 63.0f), dmin = put_half(b + 2, max_min / 63.0f);
  int sc[8], mn[8];
  for (int j = 0; j < 8; j++) {
    sc[j] = code(scale[j], d, 0, 63);
    mn[j] = code(minv[j], dmin, 0, 63);
  }
  pack_scale_min(b + 4, sc, mn);
  unsigned char *qh = b + 16, *qs = b + (bits == 5 ? 48 : 16);
  if (bits == 5) memset(qh, 0, 32);
  for (int pair = 0; pair < 4; pair++) {
    int j0 = 2 * pair, j1 = 2 * pair + 1;
    float d0 = d * (float)sc[j0], m0 = dmin * (float)mn[j0], d1 = d * (float)sc[j1], m1 = dmin * (float)mn[j1];
    for (int l = 0; l < 32; l++) {
      int q0 = code(x[32 * j0 + l] + m0, d0, 0, top), q1 = code(x[32 * j1 + l] + m1, d1, 0, top);
      qs[32 * pair + l] = (unsigned char)((q0 & 0xF) | (q1 & 0xF) << 4);
      if (bits == 5) qh[l] |= (unsigned char)((q0 >> 4) << j0 | (q1 >> 4) << j1);
    }
  }
}

static void quant_q6_k(const float *x, unsigned char *b) {
  float scale[16], max_scale = 0;
  for (int j = 0; j < 16; j++) {
    scale[j] = signed_absmax(x + 16 * j, 16) / -32.0f;
    if (fabsf(scale[j]) > fabsf(max_scale)) max_scale = scale[j];
  }
  unsigned char *ql = b, *qh = b + 128;
  signed char *sc = (signed char *)(b + 192);
  float d = put_half(b + 208, max_scale / -128.0f);
  int q[256];
  for (int j = 0; j < 16; j++) {
    sc[j] = (signed char)code(scale[j], d, -128, 127);
    float dj = d * (float)sc[j];
    for (int l = 0; l < 16; l++) q[16 * j + l] = code(x[16 * j + l], dj, -32, 31) + 32;
  }
  memset(qh, 0, 64);
  for (int half = 0; half < 2; half++) {
    const int *h = q + 128 * half;
    for (int l = 0; l < 32; l++) {
      ql[64 * half + l] = (unsigned char)((h[l] & 0xF) | (h[l + 64] & 0xF) << 4);
      ql[64 * half + l + 32] = (unsigned char)((h[l + 32] & 0xF) | (h[l + 96] & 0xF) << 4);
      qh[32 * half + l] =
          (unsigned char)(h[l] >> 4 | (h[l + 32] >> 4) << 2 | (h[l + 64] >> 4) << 4 | (h[l + 96] >> 4) << 6);
    }
  }
}

static void quant_q4_0(const float *x, unsigned char *b) { quant_sym32(x, b, 4); }
static void quant_q5_0(const float *x, unsigned char *b) { quant_sym32(x, b, 5); }
static void quant_q4_1(const float *x, unsigned char *b) { quant_affine32(x, b, 4); }
static void quant_q5_1(const float *x, unsigned char *b) { quant_affine32(x, b, 5); }
static void quant_q4_k(const float *x, unsigned char *b) { quant_k_affine(x, b, 4); }
static void quant_q5_k(const float *x, unsigned char *b) { quant_k_affine(x, b, 5); }

int ggml_quantize(int type, const float *src, void *dst, int64_t n, Diag *d) {
  int be;
  size_t bb;
  if (!ggml_type_block(type, &be, &bb)) {
    diag_error(d, 0, 0, "cannot quantize to ggml type %d (%s)", type, ggml_type_name(type));
    return 0;
  }
  if (n < 0 || n % be) {
    diag_error(d, 0, 0, "quantize %s: %lld elements is not a multiple of the block size %d", ggml_type_name(type),
               (long long)n, be);
    return 0;
  }
  unsigned char *o = dst;
  if (type == GGML_F32) {
    memcpy(o, src, sizeof(float) * (size_t)n);
    return 1;
  }
  if (type == GGML_F16 || type == GGML_BF16) {
    for (int64_t i = 0; i < n; i++) {
      unsigned short h = type == GGML_F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
      memcpy(o + 2 * i, &h, 2);
    }
    return 1;
  }
  void (*block)(const float *, unsigned char *) = type == GGML_Q8_0   ? quant_q8_0
                                                  : type == GGML_Q4_0 ? quant_q4_0
                                                  : type == GGML_Q4_1 ? quant_q4_1
                                                  : type == GGML_Q5_0 ? quant_q5_0
                                                  : type == GGML_Q5_1 ? quant_q5_1
                                                  : type == GGML_Q4_K ? quant_q4_k
                                                  : type == GGML_Q5_K ? quant_q5_k
                                                                      : quant_q6_k;
  for (int64_t i = 0; i < n / be; i++) block(src + i * be, o + (size_t)i * bb);
  return 1;
}
