/* The decoders of the quantized weight types (ir/dtype.h), written once for both languages: a kernel's
 * load of element i of a quantized buffer is `lt_dq_FORMAT(buffer, i)`, which finds i's block (i / 32 or
 * i / 256, the buffer being consecutive blocks in element order) and decodes the one element from its
 * scale, minimum and bits. The arithmetic is dequant.c's, operation for operation in f32 and never fused
 * into an FMA (CUDA's __fmul_rn / __fadd_rn; C: generated code is compiled without contraction), so a
 * decoded element equals the loader's dequantized value bit for bit. Emitted only into programs that read
 * a quantized buffer, so other programs' code is unchanged. */
#include <stdio.h>
#include <string.h>
#include "render_common.h"

/* LT_Q: the function qualifier; LT_MUL/LT_ADD/LT_SUB: one rounded f32 operation each. */
static const char quant_c_head[] = "#define LT_Q static inline\n"
                                   "#define LT_MUL(a, b) ((a) * (b))\n"
                                   "#define LT_ADD(a, b) ((a) + (b))\n"
                                   "#define LT_SUB(a, b) ((a) - (b))\n";
static const char quant_cuda_head[] = "#define LT_Q static __device__ __forceinline__\n"
                                      "#define LT_MUL(a, b) __fmul_rn(a, b)\n"
                                      "#define LT_ADD(a, b) __fadd_rn(a, b)\n"
                                      "#define LT_SUB(a, b) __fsub_rn(a, b)\n";

static const char quant_decoders[] =
    "typedef const unsigned char *lt_qp;\n"
    "LT_Q float lt_qhalf(lt_qp b) { return lt_f16_to_f32((unsigned short)(b[0] | (unsigned)b[1] << 8)); }\n"
    "LT_Q unsigned lt_qword(lt_qp b) {\n"
    "  return (unsigned)b[0] | (unsigned)b[1] << 8 | (unsigned)b[2] << 16 | (unsigned)b[3] << 24;\n"
    "}\n"
    /* elements j < 16 of a 32-block take the low nibble of byte j, elements 16..31 the high one of j - 16 */
    "LT_Q int lt_qnib32(lt_qp q, int j) { return j < 16 ? q[j] & 15 : q[j - 16] >> 4; }\n"
    "LT_Q float lt_dq_q8_0(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 5) * 34;\n"
    "  return LT_MUL((float)(signed char)b[2 + (i & 31)], lt_qhalf(b));\n"
    "}\n"
    "LT_Q float lt_dq_q4_0(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 5) * 18;\n"
    "  return LT_MUL((float)(lt_qnib32(b + 2, (int)(i & 31)) - 8), lt_qhalf(b));\n"
    "}\n"
    "LT_Q float lt_dq_q4_1(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 5) * 20;\n"
    "  return LT_ADD(LT_MUL((float)lt_qnib32(b + 4, (int)(i & 31)), lt_qhalf(b)), lt_qhalf(b + 2));\n"
    "}\n"
    /* q5: bit j of the 32-bit word after the scale(s) is element j's fifth bit */
    "LT_Q float lt_dq_q5_0(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 5) * 22;\n"
    "  int j = (int)(i & 31), q = lt_qnib32(b + 6, j) | (int)((lt_qword(b + 2) >> j) & 1) << 4;\n"
    "  return LT_MUL((float)(q - 16), lt_qhalf(b));\n"
    "}\n"
    "LT_Q float lt_dq_q5_1(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 5) * 24;\n"
    "  int j = (int)(i & 31), q = lt_qnib32(b + 8, j) | (int)((lt_qword(b + 4) >> j) & 1) << 4;\n"
    "  return LT_ADD(LT_MUL((float)q, lt_qhalf(b)), lt_qhalf(b + 2));\n"
    "}\n"
    /* q4_k / q5_k: sub-block s of 32 (of 8) has a 6-bit scale and minimum packed in 12 bytes: s < 4 in the
     * low 6 bits of bytes s and s + 4, else low 4 bits from byte s + 4 (scale low nibble, min high) and
     * the top 2 bits from the spare top bits of bytes s - 4 and s */
    "LT_Q int lt_qk_scale(lt_qp s, int j) { return j < 4 ? s[j] & 63 : (s[j + 4] & 15) | (s[j - 4] >> 6) << 4; }\n"
    "LT_Q int lt_qk_min(lt_qp s, int j) { return j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | (s[j] >> 6) << 4; }\n"
    /* each 32 bytes of nibbles hold two sub-blocks: element j's sub-block is j / 32, its byte
     * (j / 64) * 32 + j % 32, low nibble for an even sub-block */
    "LT_Q float lt_qk_value(lt_qp b, int sub, int q) {\n"
    "  float d = LT_MUL(lt_qhalf(b), (float)lt_qk_scale(b + 4, sub)), m = LT_MUL(lt_qhalf(b + 2), (float)lt_qk_min(b + 4, sub));\n"
    "  return LT_SUB(LT_MUL(d, (float)q), m);\n"
    "}\n"
    "LT_Q float lt_dq_q4_k(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 8) * 144;\n"
    "  int j = (int)(i & 255), sub = j >> 5, byte = b[16 + (j >> 6) * 32 + (j & 31)];\n"
    "  return lt_qk_value(b, sub, sub & 1 ? byte >> 4 : byte & 15);\n"
    "}\n"
    /* q5_k: bit `sub` of high-bit byte j % 32 is the fifth bit */
    "LT_Q float lt_dq_q5_k(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 8) * 176;\n"
    "  int j = (int)(i & 255), sub = j >> 5, byte = b[48 + (j >> 6) * 32 + (j & 31)];\n"
    "  int q = (sub & 1 ? byte >> 4 : byte & 15) | ((b[16 + (j & 31)] >> sub) & 1) << 4;\n"
    "  return lt_qk_value(b, sub, q);\n"
    "}\n"
    /* q6_k: halves of 128; in a half, element 32k + l (k < 4) takes nibble k / 2 of low byte l + 32 (k % 2)
     * and bits 2k, 2k + 1 of high byte l; its int8 scale is number l / 16 + 2k of the half's 8 */
    "LT_Q float lt_dq_q6_k(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 8) * 210;\n"
    "  int j = (int)(i & 255), h = j >> 7, k = (j >> 5) & 3, l = j & 31;\n"
    "  int lo = (b[h * 64 + l + 32 * (k & 1)] >> 4 * (k >> 1)) & 15, hi = (b[128 + h * 32 + l] >> 2 * k) & 3;\n"
    "  float sc = (float)(signed char)b[192 + h * 8 + l / 16 + 2 * k];\n"
    "  return LT_MUL(LT_MUL(lt_qhalf(b + 208), sc), (float)((lo | hi << 4) - 32));\n"
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

void rc_put_quant_decoders(StrBuf *out, const KProgram *kp, int cuda) {
  if (!program_reads_quant(kp)) return;
  sb_puts(out, cuda ? quant_cuda_head : quant_c_head);
  sb_puts(out, quant_decoders);
}
