/* The decoders of the quantized weight types (ir/dtype.h), written once for both languages: a kernel's
 * load of element i of a quantized buffer is `lt_dq_FORMAT(buffer, i)`, which finds i's block (i / 32 or
 * i / 256, the buffer being consecutive blocks in element order) and decodes the one element from its
 * scale, minimum and bits; a load the kernel stage split by blocks (lower_phase.c) is
 * `lt_dq_FORMAT_at(buffer, block, group, element)`. The arithmetic is dequant.c's, operation for operation in f32 and
 * never fused into an FMA (CUDA's __fmul_rn / __fadd_rn; C: generated code is compiled without contraction), so a
 * decoded element equals the loader's dequantized value bit for bit. Emitted only into programs that read
 * a quantized buffer, so other programs' code is unchanged. */
#include <stdio.h>
#include <string.h>
#include "render_common.h"

/* LT_Q: the function qualifier; LT_MUL/LT_ADD/LT_SUB: one rounded f32 operation each. */
static const char quant_c_head[] = "#if defined(__F16C__)\n"
                                   "#include <immintrin.h>\n"
                                   "#define LT_HALF(h) _cvtsh_ss(h)\n"
                                   "#else\n"
                                   "#define LT_HALF(h) lt_f16_to_f32(h)\n"
                                   "#endif\n"
                                   "#define LT_Q static inline\n"
                                   "#define LT_MUL(a, b) ((a) * (b))\n"
                                   "#define LT_ADD(a, b) ((a) + (b))\n"
                                   "#define LT_SUB(a, b) ((a) - (b))\n";
static const char quant_cuda_head[] = "#define LT_HALF(h) lt_f16_to_f32(h)\n"
                                      "#define LT_Q static __device__ __forceinline__\n"
                                      "#define LT_MUL(a, b) __fmul_rn(a, b)\n"
                                      "#define LT_ADD(a, b) __fadd_rn(a, b)\n"
                                      "#define LT_SUB(a, b) __fsub_rn(a, b)\n";

static const char quant_decoders[] =
    "typedef const unsigned char *lt_qp;\n"
    "LT_Q float lt_qhalf(lt_qp b) { return LT_HALF((unsigned short)(b[0] | (unsigned)b[1] << 8)); }\n"
    "LT_Q unsigned lt_qword(lt_qp b) {\n"
    "  return (unsigned)b[0] | (unsigned)b[1] << 8 | (unsigned)b[2] << 16 | (unsigned)b[3] << 24;\n"
    "}\n"
    /* lt_dq_F_at(p, block, g, l): element g * G + l of block `block` (G = dtype_quant_group: 16 or 32), so
     * that in a loop over l every byte it reads is at an affine offset; lt_dq_F(p, i): element i */
    "LT_Q float lt_dq_q8_0_at(lt_qp p, long long blk, int g, int l) {\n"
    "  lt_qp b = p + blk * 34;\n"
    "  return LT_MUL((float)(signed char)b[2 + g * 32 + l], lt_qhalf(b));\n"
    "}\n"
    /* 32-blocks of nibbles: element l < 16 is the low nibble of byte l, element 16 + l the high one */
    "LT_Q float lt_dq_q4_0_at(lt_qp p, long long blk, int g, int l) {\n"
    "  lt_qp b = p + blk * 18;\n"
    "  return LT_MUL((float)(((b[2 + l] >> (g * 4)) & 15) - 8), lt_qhalf(b));\n"
    "}\n"
    "LT_Q float lt_dq_q4_1_at(lt_qp p, long long blk, int g, int l) {\n"
    "  lt_qp b = p + blk * 20;\n"
    "  return LT_ADD(LT_MUL((float)((b[4 + l] >> (g * 4)) & 15), lt_qhalf(b)), lt_qhalf(b + 2));\n"
    "}\n"
    /* q5: bit j of the 32-bit word after the scale(s) is element j's fifth bit */
    "LT_Q float lt_dq_q5_0_at(lt_qp p, long long blk, int g, int l) {\n"
    "  lt_qp b = p + blk * 22;\n"
    "  int q = ((b[6 + l] >> (g * 4)) & 15) | (int)((lt_qword(b + 2) >> (g * 16 + l)) & 1) << 4;\n"
    "  return LT_MUL((float)(q - 16), lt_qhalf(b));\n"
    "}\n"
    "LT_Q float lt_dq_q5_1_at(lt_qp p, long long blk, int g, int l) {\n"
    "  lt_qp b = p + blk * 24;\n"
    "  int q = ((b[8 + l] >> (g * 4)) & 15) | (int)((lt_qword(b + 4) >> (g * 16 + l)) & 1) << 4;\n"
    "  return LT_ADD(LT_MUL((float)q, lt_qhalf(b)), lt_qhalf(b + 2));\n"
    "}\n"
    /* q4_k / q5_k: sub-block s of 32 (of 8) has a 6-bit scale and minimum packed in 12 bytes: s < 4 in the
     * low 6 bits of bytes s and s + 4, else low 4 bits from byte s + 4 (scale low nibble, min high) and
     * the top 2 bits from the spare top bits of bytes s - 4 and s */
    "LT_Q int lt_qk_scale(lt_qp s, int j) { return j < 4 ? s[j] & 63 : (s[j + 4] & 15) | (s[j - 4] >> 6) << 4; }\n"
    "LT_Q int lt_qk_min(lt_qp s, int j) { return j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4; }\n"
    "LT_Q float lt_qk_value(lt_qp b, int sub, int q) {\n"
    "  float d = LT_MUL(lt_qhalf(b), (float)lt_qk_scale(b + 4, sub));\n"
    "  float m = LT_MUL(lt_qhalf(b + 2), (float)lt_qk_min(b + 4, sub));\n"
    "  return LT_SUB(LT_MUL(d, (float)q), m);\n"
    "}\n"
    /* groups of 32 are the sub-blocks; each 32 bytes of nibbles hold two: sub-block g is at byte (g / 2) * 32,
     * the low nibbles for an even g */
    "LT_Q float lt_dq_q4_k_at(lt_qp p, long long blk, int g, int l) {\n"
    "  lt_qp b = p + blk * 144;\n"
    "  return lt_qk_value(b, g, (b[16 + (g >> 1) * 32 + l] >> ((g & 1) * 4)) & 15);\n"
    "}\n"
    /* q5_k: bit g of high-bit byte l is the fifth bit */
    "LT_Q float lt_dq_q5_k_at(lt_qp p, long long blk, int g, int l) {\n"
    "  lt_qp b = p + blk * 176;\n"
    "  int q = ((b[48 + (g >> 1) * 32 + l] >> ((g & 1) * 4)) & 15) | ((b[16 + l] >> g) & 1) << 4;\n"
    "  return lt_qk_value(b, g, q);\n"
    "}\n"
    /* q6_k: halves h of 128; in a half, element 32k + m (k < 4) takes nibble k / 2 of low byte m + 32 (k % 2)
     * and bits 2k, 2k + 1 of high byte m; its int8 scale is number m / 16 + 2k of the half's 8. Groups of
     * 16: g = 8h + 2k + m / 16 */
    "LT_Q float lt_dq_q6_k_at(lt_qp p, long long blk, int g, int l) {\n"
    "  lt_qp b = p + blk * 210;\n"
    "  int h = g >> 3, k = (g >> 1) & 3, m = (g & 1) * 16 + l;\n"
    "  int lo = (b[h * 64 + 32 * (k & 1) + m] >> 4 * (k >> 1)) & 15, hi = (b[128 + h * 32 + m] >> 2 * k) & 3;\n"
    "  float sc = (float)(signed char)b[192 + h * 8 + (g & 1) + 2 * k];\n"
    "  return LT_MUL(LT_MUL(lt_qhalf(b + 208), sc), (float)((lo | hi << 4) - 32));\n"
    "}\n"
    /* block shift s (32 or 256 elements), group shift t (16 or 32) */
    "#define LT_DQ_FLAT(f, s, t) LT_Q float lt_dq_##f(lt_qp p, long long i) {"
    " return lt_dq_##f##_at(p, i >> s, (int)(i & ((1 << s) - 1)) >> t, (int)(i & ((1 << t) - 1))); }\n"
    "LT_DQ_FLAT(q8_0, 5, 5)\nLT_DQ_FLAT(q4_0, 5, 4)\nLT_DQ_FLAT(q4_1, 5, 4)\nLT_DQ_FLAT(q5_0, 5, 4)\n"
    "LT_DQ_FLAT(q5_1, 5, 4)\nLT_DQ_FLAT(q4_k, 8, 5)\nLT_DQ_FLAT(q5_k, 8, 5)\nLT_DQ_FLAT(q6_k, 8, 4)\n";

/* CUDA: eight consecutive elements i .. i + 7 (i a multiple of 8, so within one group) decoded at once, for a
 * vector load (lower_phase.c): the block's scale and minimum are read once, the eight elements' bits with the
 * widest load the block's layout aligns (blocks are packed at 18, 20, 22, 34, 144, 176, 210 bytes on a
 * 256-byte aligned buffer: 2-, 4- or 8-byte loads). Every element is computed by the same operations as
 * lt_dq_FORMAT's, so the values are the same bit for bit. */
static const char quant_cuda_vec8[] =
    "LT_Q void lt_q8b2(lt_qp q, unsigned *w) {\n"
    "  const unsigned short *h = (const unsigned short *)q;\n"
    "  w[0] = h[0] | (unsigned)h[1] << 16, w[1] = h[2] | (unsigned)h[3] << 16;\n"
    "}\n"
    "LT_Q void lt_q8b4(lt_qp q, unsigned *w) { w[0] = ((const unsigned *)q)[0], w[1] = ((const unsigned *)q)[1]; }\n"
    "LT_Q void lt_q8b8(lt_qp q, unsigned *w) { const uint2 u = *(const uint2 *)q; w[0] = u.x, w[1] = u.y; }\n"
    "#define LT_QB(w, j) (((w)[(j) >> 2] >> (8 * ((j) & 3))) & 255u)\n"
    /* (float)u for 0 <= u < 2^23 without an int-to-float conversion (a quarter-rate instruction, most of the
     * decode's cost): u in the mantissa of 2^23, minus 2^23, exact. Signed values are offset first (u - 128 for
     * a signed byte's bits ^ 128): every element gets the same value, bit for bit, as lt_dq_FORMAT's. */
    "LT_Q float lt_qf(unsigned u) { return LT_SUB(__uint_as_float(0x4B000000u | u), 8388608.0f); }\n"
    "LT_Q void lt_dq8_q8_0(lt_qp p, long long i, float *v) {\n"
    "  lt_qp b = p + (i >> 5) * 34;\n"
    "  unsigned w[2];\n"
    "  lt_q8b2(b + 2 + (i & 31), w);\n"
    "  const float d = lt_qhalf(b);\n"
    "  _Pragma(\"unroll\") for (int j = 0; j < 8; j++) v[j] = LT_MUL(LT_SUB(lt_qf(LT_QB(w, j) ^ 128u), 128.0f), d);\n"
    "}\n"
    "LT_Q void lt_dq8_q4_0(lt_qp p, long long i, float *v) {\n"
    "  lt_qp b = p + (i >> 5) * 18;\n"
    "  const int g = (int)(i >> 4) & 1;\n"
    "  unsigned w[2];\n"
    "  lt_q8b2(b + 2 + (i & 15), w);\n"
    "  const float d = lt_qhalf(b);\n"
    "  _Pragma(\"unroll\") for (int j = 0; j < 8; j++) v[j] = LT_MUL(LT_SUB(lt_qf((LT_QB(w, j) >> (g * 4)) & 15), 8.0f), d);\n"
    "}\n"
    "LT_Q void lt_dq8_q4_1(lt_qp p, long long i, float *v) {\n"
    "  lt_qp b = p + (i >> 5) * 20;\n"
    "  const int g = (int)(i >> 4) & 1;\n"
    "  unsigned w[2];\n"
    "  lt_q8b4(b + 4 + (i & 15), w);\n"
    "  const float d = lt_qhalf(b), m = lt_qhalf(b + 2);\n"
    "  _Pragma(\"unroll\") for (int j = 0; j < 8; j++) v[j] = LT_ADD(LT_MUL(lt_qf((LT_QB(w, j) >> (g * 4)) & 15), d), m);\n"
    "}\n"
    "LT_Q void lt_dq8_q5_0(lt_qp p, long long i, float *v) {\n"
    "  lt_qp b = p + (i >> 5) * 22;\n"
    "  const int g = (int)(i >> 4) & 1, l = (int)(i & 15);\n"
    "  unsigned w[2], hw[2];\n"
    "  lt_q8b2(b + 6 + l, w);\n"
    "  lt_q8b2(b + 2, hw);\n"
    "  const unsigned qh = hw[0] >> (g * 16 + l);\n"
    "  const float d = lt_qhalf(b);\n"
    "  _Pragma(\"unroll\") for (int j = 0; j < 8; j++) {\n"
    "    const int q = (int)((LT_QB(w, j) >> (g * 4)) & 15) | (int)((qh >> j) & 1) << 4;\n"
    "    v[j] = LT_MUL(LT_SUB(lt_qf((unsigned)q), 16.0f), d);\n"
    "  }\n"
    "}\n"
    "LT_Q void lt_dq8_q5_1(lt_qp p, long long i, float *v) {\n"
    "  lt_qp b = p + (i >> 5) * 24;\n"
    "  const int g = (int)(i >> 4) & 1, l = (int)(i & 15);\n"
    "  unsigned w[2];\n"
    "  lt_q8b8(b + 8 + l, w);\n"
    "  const unsigned qh = *(const unsigned *)(b + 4) >> (g * 16 + l);\n"
    "  const float d = lt_qhalf(b), m = lt_qhalf(b + 2);\n"
    "  _Pragma(\"unroll\") for (int j = 0; j < 8; j++) {\n"
    "    const int q = (int)((LT_QB(w, j) >> (g * 4)) & 15) | (int)((qh >> j) & 1) << 4;\n"
    "    v[j] = LT_ADD(LT_MUL(lt_qf((unsigned)q), d), m);\n"
    "  }\n"
    "}\n"
    /* q4_k / q5_k: the block's first 16 bytes (d, dmin, the 12 bytes of scales and minimums; blocks of 144 and 176
     * bytes stay 16-byte aligned) in one load instead of seven byte loads, sub-block g's scale and minimum taken
     * from its words as lt_qk_scale / lt_qk_min take them from bytes */
    "LT_Q void lt_qk_dm(lt_qp b, int g, float *d, float *m) {\n"
    "  const uint4 h = *(const uint4 *)b;\n"
    "  const int s = 8 * (g & 3);\n"
    "  const unsigned lo = (h.y >> s) & 255u, mid = (h.z >> s) & 255u, hi = (h.w >> s) & 255u;\n"
    "  const int sc = g < 4 ? (int)(lo & 63u) : (int)((hi & 15u) | (lo >> 6) << 4);\n"
    "  const int mn = g < 4 ? (int)(mid & 63u) : (int)((hi >> 4) | (mid >> 6) << 4);\n"
    "  *d = LT_MUL(LT_HALF((unsigned short)(h.x & 0xffffu)), (float)sc);\n"
    "  *m = LT_MUL(LT_HALF((unsigned short)(h.x >> 16)), (float)mn);\n"
    "}\n"
    "LT_Q void lt_dq8_q4_k(lt_qp p, long long i, float *v) {\n"
    "  lt_qp b = p + (i >> 8) * 144;\n"
    "  const int g = (int)(i >> 5) & 7;\n"
    "  unsigned w[2];\n"
    "  lt_q8b8(b + 16 + (g >> 1) * 32 + (i & 31), w);\n"
    "  float d, m;\n"
    "  lt_qk_dm(b, g, &d, &m);\n"
    "  _Pragma(\"unroll\") for (int j = 0; j < 8; j++) v[j] = LT_SUB(LT_MUL(d, lt_qf((LT_QB(w, j) >> ((g & 1) * 4)) & 15)), m);\n"
    "}\n"
    "LT_Q void lt_dq8_q5_k(lt_qp p, long long i, float *v) {\n"
    "  lt_qp b = p + (i >> 8) * 176;\n"
    "  const int g = (int)(i >> 5) & 7, l = (int)(i & 31);\n"
    "  unsigned w[2], hw[2];\n"
    "  lt_q8b8(b + 48 + (g >> 1) * 32 + l, w);\n"
    "  lt_q8b8(b + 16 + l, hw);\n"
    "  float d, m;\n"
    "  lt_qk_dm(b, g, &d, &m);\n"
    "  _Pragma(\"unroll\") for (int j = 0; j < 8; j++) {\n"
    "    const int q = (int)((LT_QB(w, j) >> ((g & 1) * 4)) & 15) | (int)((LT_QB(hw, j) >> g) & 1) << 4;\n"
    "    v[j] = LT_SUB(LT_MUL(d, lt_qf((unsigned)q)), m);\n"
    "  }\n"
    "}\n"
    "LT_Q void lt_dq8_q6_k(lt_qp p, long long i, float *v) {\n"
    "  lt_qp b = p + (i >> 8) * 210;\n"
    "  const int g = (int)(i >> 4) & 15, h = g >> 3, k = (g >> 1) & 3, m = (g & 1) * 16 + (int)(i & 15);\n"
    "  unsigned lw[2], hw[2];\n"
    "  lt_q8b2(b + h * 64 + 32 * (k & 1) + m, lw);\n"
    "  lt_q8b2(b + 128 + h * 32 + m, hw);\n"
    "  const float ds = LT_MUL(lt_qhalf(b + 208), (float)(signed char)b[192 + h * 8 + (g & 1) + 2 * k]);\n"
    "  _Pragma(\"unroll\") for (int j = 0; j < 8; j++) {\n"
    "    const int lo = (int)((LT_QB(lw, j) >> 4 * (k >> 1)) & 15), hi = (int)((LT_QB(hw, j) >> 2 * k) & 3);\n"
    "    v[j] = LT_MUL(ds, LT_SUB(lt_qf((unsigned)(lo | hi << 4)), 32.0f));\n"
    "  }\n"
    "}\n";

const char *rc_quant_decoder(DType t) {
  static char names[DT_COUNT][16];
  if (!dtype_is_quant(t)) return NULL;
  if (!names[t][0]) snprintf(names[t], sizeof names[t], "lt_dq_%s", dtype_name(t));
  return names[t];
}

static int program_reads_quant(const KProgram *kp) {
  for (int i = 0; kp->loop && i < kp->loop->nbufs; i++)
    if (dtype_is_quant(kp->loop->bufs[i].dtype)) return 1;
  return 0;
}

void rc_put_quant_source(StrBuf *out, int cuda) {
  sb_puts(out, cuda ? quant_cuda_head : quant_c_head);
  sb_puts(out, quant_decoders);
  if (cuda) sb_puts(out, quant_cuda_vec8);
}

void rc_put_quant_decoders(StrBuf *out, const KProgram *kp, int cuda) {
  if (program_reads_quant(kp)) rc_put_quant_source(out, cuda);
}
