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

/* C: integer dot products of quantized weight rows with activation rows quantized to int16 per 32 elements: a
 * row's blocks are lt_q16x (q = round(x / d), d = max |x| / 32767; the sum s of q and s16 of its first 16, for
 * the formats' offsets and minimums), made by lt_q16_block (render_common.c's row caches). Per block the weights'
 * bits, widened to 16 bits, meet the activations in 16-bit multiply-adds summed exactly in 32 bits (AVX2
 * vpmaddwd, AVX-512 VNNI vpdpwssd; a scalar loop without AVX2), and the scales are applied to the block's integer
 * sums in f32. int16 rather than llama.cpp's int8 activations: int8's rounding (0.4% of a block's largest value)
 * changed the default model's greedy tokens; int16's (0.0015%) stays within the f32 path's tolerance, at about
 * the same number of instructions per block. lt_qdot_F(w, first block, blocks, the row's blocks).
 *
 * Every form of a row's dot product (this one, the tile form over 8 rows in render_quant_tile.c, AVX-512, AVX2 and
 * scalar) rounds the same f32 operations in the same order, so a row's result is the same bits whichever form and
 * whichever machine computes it (a batched step's rows equal the row alone): per 32-element (sub)block, eight
 * exact integer lanes (lane i: elements 2i, 2i + 1, 16 + 2i, 17 + 2i, the format's offset subtracted from the
 * weights; q6_k's halves as two sets of lanes) are converted and FMA'd into eight f32 lanes with the scale
 * dw * dx (one rounding: LT_OPQ keeps -fassociative-math from regrouping it); a minimum goes into one f32 term by
 * FMA; the result is ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) plus that term. */
/* C: what the CPU's row caches (render_c.c, render_common.c put_qrow) and every dot product over them need, the
 * integer ones over quantized blocks and the f16 ones (render_hdot.c): emitted once before either. */
static const char rowcache_c_head[] =
    "#include <stdlib.h>\n"
    "#include <float.h>\n"
    "#ifdef _OPENMP\n"
    "#include <omp.h>\n"
    "#else\n"
    "#define omp_get_thread_num() 0\n"
    "#define omp_get_max_threads() 1\n"
    "#endif\n"
    /* the thread's number is fixed for the whole parallel loop: const, so its calls leave the point loop */
    "__attribute__((const)) static int lt_thread(void) { return omp_get_thread_num(); }\n"
    /* zeroed memory on cache lines of its own (a size rounded up to them, as aligned_alloc asks) */
    "static inline void *lt_zalloc64(size_t n) {\n"
    "  n = (n + 63) / 64 * 64;\n"
    "  void *p = aligned_alloc(64, n ? n : 64);\n"
    "  if (p) __builtin_memset(p, 0, n);\n"
    "  return p;\n"
    "}\n"
    "#if defined(__AVX2__) && defined(__FMA__) && !defined(LT_QDOT_SCALAR)\n"
    "#define LT_QDOT_AVX2 1\n"
    "#include <immintrin.h>\n"
    "#endif\n"
    /* the weights LT_QPF bytes ahead are asked for as each block is read (lt_qdot, lt_qdott): a decode step streams
     * every weight from memory once, and with the compute between its loads the hardware prefetchers alone kept one
     * core at half of a plain read's bandwidth (a [1536, 576] q4_1 GEMV over 110 MB of weights: 4.5 GB/s; 8 KB
     * ahead: 11.6-13.6) */
    "#define LT_QPF 8192\n"
    /* v as a value the compiler cannot see into: a product with it is rounded as written under -fassociative-math */
    "#if defined(__x86_64__)\n"
    "#define LT_OPQ(v) __asm__(\"\" : \"+x\"(v))\n"
    "#elif defined(__aarch64__)\n"
    "#define LT_OPQ(v) __asm__(\"\" : \"+w\"(v))\n"
    "#else\n"
    "#define LT_OPQ(v) do { volatile float lt_v_ = (v); (v) = lt_v_; } while (0)\n"
    "#endif\n"
    /* a block's scale: the weights' dw (exact: an f16 times a small integer) times the activations' dx, rounded once */
    "static inline float lt_opq(float v) {\n"
    "  LT_OPQ(v);\n"
    "  return v;\n"
    "}\n";

static const char quant_c_dot[] =
    "typedef struct lt_q16x { short q[32]; float d, ds; int s, s16; } lt_q16x;\n"
    "LT_Q float lt_qscale(float dw, float dx) { return lt_opq(dw) * dx; }\n"
    /* a block with a NaN or an infinity gets d = NaN, so every dot product over it is NaN */
    "LT_Q void lt_q16_block(const float *x, lt_q16x *o) {\n"
    "  float amax = 0.0f;\n"
    "  int bad = 0, s = 0, s16 = 0;\n"
    "  for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[i])), bad |= !(fabsf(x[i]) <= FLT_MAX);\n"
    "  const float id = amax > 0.0f && !bad ? 32767.0f / amax : 0.0f;\n"
    "  for (int i = 0; i < 32; i++) {\n"
    "    const int q = (int)nearbyintf(bad ? 0.0f : x[i] * id);\n"
    "    o->q[i] = (short)q, s += q, s16 += i < 16 ? q : 0;\n"
    "  }\n"
    "  o->d = bad ? NAN : amax / 32767.0f, o->s = s, o->s16 = s16, o->ds = o->d * (float)s;\n"
    "}\n"
    /* nb whole blocks from blk decoded to f32 (a row cache's weight row), the element loop vectorized */
    "#define LT_DQROW(f, B, G)\\\n"
    "  LT_Q void lt_dqrow_##f(lt_qp w, long long blk, int nb, float *out) {\\\n"
    "    for (int i = 0; i < nb; i++)\\\n"
    "      for (int g = 0; g < B / G; g++)\\\n"
    "        for (int l = 0; l < G; l++) out[i * B + g * G + l] = lt_dq_##f##_at(w, blk + i, g, l);\\\n"
    "  }\n"
    "LT_DQROW(q8_0, 32, 32)\nLT_DQROW(q4_0, 32, 16)\nLT_DQROW(q4_1, 32, 16)\nLT_DQROW(q5_0, 32, 16)\n"
    "LT_DQROW(q5_1, 32, 16)\nLT_DQROW(q4_k, 256, 32)\nLT_DQROW(q5_k, 256, 32)\nLT_DQROW(q6_k, 256, 16)\n"
    /* q4_k / q5_k: sub-block j's scale and minimum in f32, the block's d and dmin times its 6-bit values (here and
     * in the tile form, render_quant_tile.c) */
    "typedef struct lt_qksm { float d, m; } lt_qksm;\n"
    "LT_Q lt_qksm lt_qk_sm(lt_qp b, float d, float dmin, int j) {\n"
    "  return (lt_qksm){d * (float)lt_qk_scale(b + 4, j), dmin * (float)lt_qk_min(b + 4, j)};\n"
    "}\n"
    "#ifdef LT_QDOT_AVX2\n"
    /* 16 weights (16-bit lanes) times 16 activations, as eight int32 sums of pairs, added to acc */
    "LT_Q __m256i lt_madd16(__m256i acc, __m256i w, const short *q) {\n"
    "#if defined(__AVX512VNNI__) && defined(__AVX512VL__)\n"
    "  return _mm256_dpwssd_epi32(acc, w, _mm256_loadu_si256((const __m256i *)q));\n"
    "#else\n"
    "  return _mm256_add_epi32(acc, _mm256_madd_epi16(w, _mm256_loadu_si256((const __m256i *)q)));\n"
    "#endif\n"
    "}\n"
    /* 32 unsigned (signed: lt_dot_s8) bytes of weights times a block of activations: eight int32 partial sums */
    "LT_Q __m256i lt_dot_u8(__m256i u, const short *q) {\n"
    "  const __m256i lo = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(u));\n"
    "  const __m256i hi = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(u, 1));\n"
    "  return lt_madd16(lt_madd16(_mm256_setzero_si256(), lo, q), hi, q + 16);\n"
    "}\n"
    "LT_Q __m256i lt_dot_s8(__m256i u, const short *q) {\n"
    "  const __m256i lo = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(u));\n"
    "  const __m256i hi = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(u, 1));\n"
    "  return lt_madd16(lt_madd16(_mm256_setzero_si256(), lo, q), hi, q + 16);\n"
    "}\n"
    "LT_Q float lt_hsum8(__m256 v) {\n"
    "  __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));\n"
    "  a = _mm_add_ps(a, _mm_movehl_ps(a, a));\n"
    "  return _mm_cvtss_f32(_mm_add_ss(a, _mm_movehdup_ps(a)));\n"
    "}\n"
    "LT_Q __m256i lt_ld32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }\n"
    "LT_Q __m256i lt_lo4(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(15)); }\n"
    "LT_Q __m256i lt_shr16(__m256i v, int n) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n)); }\n"
    /* q4_k / q5_k: sub-block j's 32 weights as unsigned bytes from the 32 bytes of nibbles q it shares with its
     * neighbour (the low nibbles for an even j); q5_k's fifth bits are bit j of the block's 32 high-bit bytes hb */
    "LT_Q __m256i lt_qk_nib(__m256i q, int j) { return lt_lo4(j & 1 ? _mm256_srli_epi16(q, 4) : q); }\n"
    "LT_Q __m256i lt_q5k_u8(__m256i q, __m256i hb, int j) {\n"
    "  const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(lt_shr16(hb, j), _mm256_set1_epi8(1)), 4);\n"
    "  return _mm256_or_si256(lt_qk_nib(q, j), hi);\n"
    "}\n"
    /* 16 bytes of nibbles as 32 bytes: the low nibbles (elements 0..15), then the high ones */
    "LT_Q __m256i lt_nib16(lt_qp q) {\n"
    "  const __m128i b = _mm_loadu_si128((const __m128i *)q), m = _mm_set1_epi8(15);\n"
    "  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));\n"
    "}\n"
    /* bit j of h as byte j: 16 where set (q5's fifth bits) */
    "LT_Q __m256i lt_bits16(unsigned h) {\n"
    "  const __m256i at = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0);\n"
    "  const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);\n"
    "  const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)h), at), bit);\n"
    "  return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(16));\n"
    "}\n"
    /* 16 bytes widened to 16-bit lanes, unsigned (lt_w16u) or signed (lt_w16s): one load-and-extend each, where
     * lt_dot_u8 / lt_dot_s8 widen halves of a 32-byte register (an extract and a shuffle more a block) */
    "LT_Q __m256i lt_w16u(lt_qp q) { return _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)q)); }\n"
    "LT_Q __m256i lt_w16s(lt_qp q) { return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)q)); }\n"
    /* a block's weights as 16-bit lanes, lo (elements 0..15) and hi (16..31), times its activations: the same eight
     * int32 sums as lt_dot_u8's */
    "LT_Q __m256i lt_dot16(__m256i lo, __m256i hi, const short *q) {\n"
    "  return lt_madd16(lt_madd16(_mm256_setzero_si256(), lo, q), hi, q + 16);\n"
    "}\n"
    /* 16 bytes of nibbles (low nibbles elements 0..15, high ones 16..31) widened once: the high nibble of a byte in a
     * 16-bit lane is the lane shifted, with no mask; fifth_lo / fifth_hi: q5's fifth bits (16 or 0 a lane); off: the
     * format's offset, subtracted in 16 bits */
    "LT_Q __m256i lt_dot_nib(lt_qp q, __m256i fifth_lo, __m256i fifth_hi, short off, const short *x) {\n"
    "  const __m256i v = lt_w16u(q), o = _mm256_set1_epi16(off);\n"
    "  const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi16(15)), fifth_lo);\n"
    "  const __m256i hi = _mm256_or_si256(_mm256_srli_epi16(v, 4), fifth_hi);\n"
    "  return lt_dot16(_mm256_sub_epi16(lo, o), _mm256_sub_epi16(hi, o), x);\n"
    "}\n"
    /* bit l of h (l < 16) as 16 in 16-bit lane l */
    "LT_Q __m256i lt_fifth16(unsigned h) {\n"
    "#if defined(__AVX512BW__) && defined(__AVX512VL__)\n"
    "  return _mm256_maskz_mov_epi16((__mmask16)h, _mm256_set1_epi16(16));\n"
    "#else\n"
    "  const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, -32768);\n"
    "  const __m256i v = _mm256_and_si256(_mm256_set1_epi16((short)h), bit);\n"
    "  return _mm256_and_si256(_mm256_cmpeq_epi16(v, bit), _mm256_set1_epi16(16));\n"
    "#endif\n"
    "}\n"
    /* the two f16 at b (a scale, then a minimum) in lanes 0 and 1, one conversion */
    "LT_Q __m128 lt_qhalf2(lt_qp b) {\n"
    "#if defined(__F16C__)\n"
    "  return _mm_cvtph_ps(_mm_cvtsi32_si128((int)lt_qword(b)));\n"
    "#else\n"
    "  return _mm_setr_ps(lt_qhalf(b), lt_qhalf(b + 2), 0.0f, 0.0f);\n"
    "#endif\n"
    "}\n"
    "LT_Q float lt_lane1(__m128 v) { return _mm_cvtss_f32(_mm_movehdup_ps(v)); }\n"
    "#define LT_FMA(acc, p, scale) _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(scale), acc)\n"
    /* one block: acc (eight lanes) and *m (the minimum term) grow by its part of the dot product */
    "LT_Q __m256 lt_qv_q8_0(lt_qp b, const lt_q16x *x, __m256 acc, float *m) {\n"
    "  (void)m;\n"
    "  return LT_FMA(acc, lt_dot16(lt_w16s(b + 2), lt_w16s(b + 18), x->q), lt_qscale(lt_qhalf(b), x->d));\n"
    "}\n"
    "LT_Q __m256 lt_qv_q4_0(lt_qp b, const lt_q16x *x, __m256 acc, float *m) {\n"
    "  const __m256i z = _mm256_setzero_si256();\n"
    "  (void)m;\n"
    "  return LT_FMA(acc, lt_dot_nib(b + 2, z, z, 8, x->q), lt_qscale(lt_qhalf(b), x->d));\n"
    "}\n"
    "LT_Q __m256 lt_qv_q4_1(lt_qp b, const lt_q16x *x, __m256 acc, float *m) {\n"
    "  const __m128 dm = lt_qhalf2(b);\n"
    "  const __m256i z = _mm256_setzero_si256();\n"
    "  *m = fmaf(lt_lane1(dm), x->ds, *m);\n"
    "  return LT_FMA(acc, lt_dot_nib(b + 4, z, z, 0, x->q), lt_qscale(_mm_cvtss_f32(dm), x->d));\n"
    "}\n"
    "LT_Q __m256 lt_qv_q5_0(lt_qp b, const lt_q16x *x, __m256 acc, float *m) {\n"
    "  const unsigned h = lt_qword(b + 2);\n"
    "  (void)m;\n"
    "  return LT_FMA(acc, lt_dot_nib(b + 6, lt_fifth16(h), lt_fifth16(h >> 16), 16, x->q), lt_qscale(lt_qhalf(b), x->d));\n"
    "}\n"
    "LT_Q __m256 lt_qv_q5_1(lt_qp b, const lt_q16x *x, __m256 acc, float *m) {\n"
    "  const __m128 dm = lt_qhalf2(b);\n"
    "  const unsigned h = lt_qword(b + 4);\n"
    "  *m = fmaf(lt_lane1(dm), x->ds, *m);\n"
    "  return LT_FMA(acc, lt_dot_nib(b + 8, lt_fifth16(h), lt_fifth16(h >> 16), 0, x->q), lt_qscale(_mm_cvtss_f32(dm), x->d));\n"
    "}\n"
    /* 256-blocks: sub-block j of 32 meets x[j] */
    "LT_Q __m256 lt_qv_q4_k(lt_qp b, const lt_q16x *x, __m256 acc, float *m) {\n"
    "  const __m128 dm = lt_qhalf2(b);\n"
    "  const float d = _mm_cvtss_f32(dm), dmin = lt_lane1(dm);\n"
    "  const __m256i f = _mm256_set1_epi16(15);\n"
    "  for (int p = 0; p < 4; p++) {\n"
    "    const __m256i v0 = lt_w16u(b + 16 + p * 32), v1 = lt_w16u(b + 32 + p * 32);\n"
    "    for (int h = 0; h < 2; h++) {\n"
    "      const int j = 2 * p + h;\n"
    "      const __m256i lo = h ? _mm256_srli_epi16(v0, 4) : _mm256_and_si256(v0, f);\n"
    "      const __m256i hi = h ? _mm256_srli_epi16(v1, 4) : _mm256_and_si256(v1, f);\n"
    "      const lt_qksm s = lt_qk_sm(b, d, dmin, j);\n"
    "      acc = LT_FMA(acc, lt_dot16(lo, hi, x[j].q), lt_qscale(s.d, x[j].d));\n"
    "      *m = fmaf(-s.m, x[j].ds, *m);\n"
    "    }\n"
    "  }\n"
    "  return acc;\n"
    "}\n"
    "LT_Q __m256 lt_qv_q5_k(lt_qp b, const lt_q16x *x, __m256 acc, float *m) {\n"
    "  const float d = lt_qhalf(b), dmin = lt_qhalf(b + 2);\n"
    "  const __m256i hb = lt_ld32(b + 16);\n"
    "  for (int p = 0; p < 4; p++) {\n"
    "    const __m256i q = lt_ld32(b + 48 + p * 32);\n"
    "    for (int h = 0; h < 2; h++) {\n"
    "      const int j = 2 * p + h;\n"
    "      const lt_qksm s = lt_qk_sm(b, d, dmin, j);\n"
    "      acc = LT_FMA(acc, lt_dot_u8(lt_q5k_u8(q, hb, j), x[j].q), lt_qscale(s.d, x[j].d));\n"
    "      *m = fmaf(-s.m, x[j].ds, *m);\n"
    "    }\n"
    "  }\n"
    "  return acc;\n"
    "}\n"
    /* q6_k: sub-block 4h + k of 32 takes low bits from bytes h * 64 + 32 (k & 1) (nibble k / 2) and high bits 2k,
     * 2k + 1 from bytes 128 + 32h; its two halves of 16 have their own int8 scales (the lanes of the first half, then
     * of the second) */
    "LT_Q __m256 lt_qv_q6_k(lt_qp b, const lt_q16x *x, __m256 acc, float *m) {\n"
    "  const float d = lt_qhalf(b + 208);\n"
    "  const __m256i three = _mm256_set1_epi8(3), off = _mm256_set1_epi16(32);\n"
    "  (void)m;\n"
    "  for (int h = 0; h < 2; h++) {\n"
    "    const __m256i qh = lt_ld32(b + 128 + h * 32);\n"
    "    for (int k = 0; k < 4; k++) {\n"
    "      const int j = 4 * h + k;\n"
    "      const __m256i lo = lt_lo4(lt_shr16(lt_ld32(b + h * 64 + 32 * (k & 1)), 4 * (k >> 1)));\n"
    "      const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(lt_shr16(qh, 2 * k), three), 4);\n"
    "      const float sa = (float)(signed char)b[192 + h * 8 + 2 * k], sb = (float)(signed char)b[193 + h * 8 + 2 * k];\n"
    "      const __m256i u = _mm256_or_si256(lo, hi), z = _mm256_setzero_si256();\n"
    "      const __m256i ua = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(u)), off);\n"
    "      const __m256i ub = _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm256_extracti128_si256(u, 1)), off);\n"
    "      acc = LT_FMA(acc, lt_madd16(z, ua, x[j].q), lt_qscale(d * sa, x[j].d));\n"
    "      acc = LT_FMA(acc, lt_madd16(z, ub, x[j].q + 16), lt_qscale(d * sb, x[j].d));\n"
    "    }\n"
    "  }\n"
    "  return acc;\n"
    "}\n"
    "#define LT_QDOT(f, BYTES, NX)\\\n"
    "  LT_Q float lt_qdot_##f(lt_qp w, long long blk, int nb, const lt_q16x *x) {\\\n"
    "    lt_qp b = w + blk * BYTES;\\\n"
    "    __m256 acc = _mm256_setzero_ps();\\\n"
    "    float m = 0.0f;\\\n"
    "    for (int i = 0; i < nb; i++) {\\\n"
    "      __builtin_prefetch(b + (long long)i * BYTES + LT_QPF);\\\n"
    "      acc = lt_qv_##f(b + (long long)i * BYTES, x + (long long)i * NX, acc, &m);\\\n"
    "    }\\\n"
    "    return lt_hsum8(acc) + m;\\\n"
    "  }\n"
    "#else\n"
    /* scalar: the same lanes and the same f32 operations, element by element (u: a (sub)block's 32 weights as
     * integers, the format's offset subtracted) */
    "LT_Q void lt_nibs(lt_qp q, int *u) { for (int l = 0; l < 16; l++) u[l] = q[l] & 15, u[16 + l] = q[l] >> 4; }\n"
    /* q4_k / q5_k: sub-block j's 32 weights' bits (as lt_qk_nib, lt_q5k_u8) */
    "LT_Q void lt_q4k_bits(lt_qp b, int j, int *u) {\n"
    "  for (int l = 0; l < 32; l++) u[l] = b[16 + (j >> 1) * 32 + l] >> (j & 1) * 4 & 15;\n"
    "}\n"
    "LT_Q void lt_q5k_bits(lt_qp b, int j, int *u) {\n"
    "  for (int l = 0; l < 32; l++) u[l] = (b[48 + (j >> 1) * 32 + l] >> (j & 1) * 4 & 15) | (b[16 + l] >> j & 1) << 4;\n"
    "}\n"
    "LT_Q void lt_q5hi(int *u, unsigned h, int off) { for (int l = 0; l < 32; l++) u[l] = (u[l] | (int)(h >> l & 1) << 4) - off; }\n"
    "LT_Q void lt_q6k_bits(lt_qp b, int j, int *u) {\n"
    "  const int h = j >> 2, k = j & 3;\n"
    "  for (int l = 0; l < 32; l++)\n"
    "    u[l] = ((b[h * 64 + 32 * (k & 1) + l] >> 4 * (k >> 1) & 15) | (b[128 + h * 32 + l] >> 2 * k & 3) << 4) - 32;\n"
    "}\n"
    /* lane i of elements 2i, 2i + 1 (half 1), 16 + 2i, 17 + 2i (half 2) or all four (0), FMA'd into a[i] */
    "LT_Q void lt_sacc(float *a, const int *u, const short *q, float sc, int half) {\n"
    "  for (int i = 0; i < 8; i++) {\n"
    "    const int lo = u[2 * i] * q[2 * i] + u[2 * i + 1] * q[2 * i + 1];\n"
    "    const int hi = u[16 + 2 * i] * q[16 + 2 * i] + u[17 + 2 * i] * q[17 + 2 * i];\n"
    "    a[i] = fmaf((float)(half == 1 ? lo : half == 2 ? hi : lo + hi), sc, a[i]);\n"
    "  }\n"
    "}\n"
    "LT_Q float lt_tree8(const float *a, float m) {\n"
    "  float p0 = a[0] + a[4], p1 = a[1] + a[5], p2 = a[2] + a[6], p3 = a[3] + a[7];\n"
    "  LT_OPQ(p0);\n"
    "  LT_OPQ(p1);\n"
    "  LT_OPQ(p2);\n"
    "  LT_OPQ(p3);\n"
    "  float e = p0 + p2, o = p1 + p3;\n"
    "  LT_OPQ(e);\n"
    "  LT_OPQ(o);\n"
    "  float s = e + o;\n"
    "  LT_OPQ(s);\n"
    "  return s + m;\n"
    "}\n"
    "LT_Q void lt_qs_q8_0(lt_qp b, const lt_q16x *x, float *a, float *m) {\n"
    "  int u[32];\n"
    "  (void)m;\n"
    "  for (int l = 0; l < 32; l++) u[l] = (signed char)b[2 + l];\n"
    "  lt_sacc(a, u, x->q, lt_qscale(lt_qhalf(b), x->d), 0);\n"
    "}\n"
    "LT_Q void lt_qs_q4_0(lt_qp b, const lt_q16x *x, float *a, float *m) {\n"
    "  int u[32];\n"
    "  (void)m;\n"
    "  lt_nibs(b + 2, u);\n"
    "  for (int l = 0; l < 32; l++) u[l] -= 8;\n"
    "  lt_sacc(a, u, x->q, lt_qscale(lt_qhalf(b), x->d), 0);\n"
    "}\n"
    "LT_Q void lt_qs_q4_1(lt_qp b, const lt_q16x *x, float *a, float *m) {\n"
    "  int u[32];\n"
    "  lt_nibs(b + 4, u);\n"
    "  lt_sacc(a, u, x->q, lt_qscale(lt_qhalf(b), x->d), 0);\n"
    "  *m = fmaf(lt_qhalf(b + 2), x->ds, *m);\n"
    "}\n"
    "LT_Q void lt_qs_q5_0(lt_qp b, const lt_q16x *x, float *a, float *m) {\n"
    "  int u[32];\n"
    "  (void)m;\n"
    "  lt_nibs(b + 6, u);\n"
    "  lt_q5hi(u, lt_qword(b + 2), 16);\n"
    "  lt_sacc(a, u, x->q, lt_qscale(lt_qhalf(b), x->d), 0);\n"
    "}\n"
    "LT_Q void lt_qs_q5_1(lt_qp b, const lt_q16x *x, float *a, float *m) {\n"
    "  int u[32];\n"
    "  lt_nibs(b + 8, u);\n"
    "  lt_q5hi(u, lt_qword(b + 4), 0);\n"
    "  lt_sacc(a, u, x->q, lt_qscale(lt_qhalf(b), x->d), 0);\n"
    "  *m = fmaf(lt_qhalf(b + 2), x->ds, *m);\n"
    "}\n"
    "LT_Q void lt_qs_q4_k(lt_qp b, const lt_q16x *x, float *a, float *m) {\n"
    "  const float d = lt_qhalf(b), dmin = lt_qhalf(b + 2);\n"
    "  for (int j = 0; j < 8; j++) {\n"
    "    int u[32];\n"
    "    lt_q4k_bits(b, j, u);\n"
    "    const lt_qksm s = lt_qk_sm(b, d, dmin, j);\n"
    "    lt_sacc(a, u, x[j].q, lt_qscale(s.d, x[j].d), 0);\n"
    "    *m = fmaf(-s.m, x[j].ds, *m);\n"
    "  }\n"
    "}\n"
    "LT_Q void lt_qs_q5_k(lt_qp b, const lt_q16x *x, float *a, float *m) {\n"
    "  const float d = lt_qhalf(b), dmin = lt_qhalf(b + 2);\n"
    "  for (int j = 0; j < 8; j++) {\n"
    "    int u[32];\n"
    "    lt_q5k_bits(b, j, u);\n"
    "    const lt_qksm s = lt_qk_sm(b, d, dmin, j);\n"
    "    lt_sacc(a, u, x[j].q, lt_qscale(s.d, x[j].d), 0);\n"
    "    *m = fmaf(-s.m, x[j].ds, *m);\n"
    "  }\n"
    "}\n"
    "LT_Q void lt_qs_q6_k(lt_qp b, const lt_q16x *x, float *a, float *m) {\n"
    "  const float d = lt_qhalf(b + 208);\n"
    "  (void)m;\n"
    "  for (int j = 0; j < 8; j++) {\n"
    "    const int h = j >> 2, k = j & 3;\n"
    "    int u[32];\n"
    "    lt_q6k_bits(b, j, u);\n"
    "    const float sa = (float)(signed char)b[192 + h * 8 + 2 * k], sb = (float)(signed char)b[193 + h * 8 + 2 * k];\n"
    "    lt_sacc(a, u, x[j].q, lt_qscale(d * sa, x[j].d), 1);\n"
    "    lt_sacc(a, u, x[j].q, lt_qscale(d * sb, x[j].d), 2);\n"
    "  }\n"
    "}\n"
    "#define LT_QDOT(f, BYTES, NX)\\\n"
    "  LT_Q float lt_qdot_##f(lt_qp w, long long blk, int nb, const lt_q16x *x) {\\\n"
    "    float a[8] = {0}, m = 0.0f;\\\n"
    "    for (int i = 0; i < nb; i++) {\\\n"
    "      __builtin_prefetch(w + (blk + i) * BYTES + LT_QPF);\\\n"
    "      lt_qs_##f(w + (blk + i) * BYTES, x + (long long)i * NX, a, &m);\\\n"
    "    }\\\n"
    "    return lt_tree8(a, m);\\\n"
    "  }\n"
    "#endif\n"
    "LT_QDOT(q8_0, 34, 1)\nLT_QDOT(q4_0, 18, 1)\nLT_QDOT(q4_1, 20, 1)\nLT_QDOT(q5_0, 22, 1)\nLT_QDOT(q5_1, 24, 1)\n"
    "LT_QDOT(q4_k, 144, 8)\nLT_QDOT(q5_k, 176, 8)\nLT_QDOT(q6_k, 210, 8)\n";

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
    "LT_Q void lt_qk_dmh(uint4 h, int g, float *d, float *m) {\n"
    "  const int s = 8 * (g & 3);\n"
    "  const unsigned lo = (h.y >> s) & 255u, mid = (h.z >> s) & 255u, hi = (h.w >> s) & 255u;\n"
    "  const int sc = g < 4 ? (int)(lo & 63u) : (int)((hi & 15u) | (lo >> 6) << 4);\n"
    "  const int mn = g < 4 ? (int)(mid & 63u) : (int)((hi >> 4) | (mid >> 6) << 4);\n"
    "  *d = LT_MUL(LT_HALF((unsigned short)(h.x & 0xffffu)), (float)sc);\n"
    "  *m = LT_MUL(LT_HALF((unsigned short)(h.x >> 16)), (float)mn);\n"
    "}\n"
    "LT_Q void lt_qk_dm(lt_qp b, int g, float *d, float *m) { lt_qk_dmh(*(const uint4 *)b, g, d, m); }\n"
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
    "}\n"
    /* lt_qd8_FORMAT(p, i, x): the sum over j < 8 of element i + j times x[j] (i a multiple of 8), the elements'
     * integer values (less the format's offset) times x summed first and each scale applied once, d * sum(q x)
     * (- m * sum(x)): about three instructions an element against lt_dq8's six or more, which leave a GEMV
     * over blocks instruction-bound. A byte q of a word becomes the float 2^23 + q by a byte permute; less 2^23
     * and the offset it is q - offset exactly. Only the rounding of the sums differs from decoding first. Every
     * block size is even, so a block's f16 scale is one aligned 2-byte load (lt_qh16). */
    "#define LT_QF(w, j, off) LT_SUB(__uint_as_float(__byte_perm((w), 0x4B000000u, 0x7440u + (j))), 8388608.0f + (off))\n"
    "LT_Q float lt_qh16(lt_qp b) { return LT_HALF(*(const unsigned short *)b); }\n"
    "LT_Q float lt_qdot8(unsigned w0, unsigned w1, float off, const float *x) {\n"
    "  float s0 = 0.0f, s1 = 0.0f;\n"
    "  _Pragma(\"unroll\") for (int j = 0; j < 4; j++) s0 = fmaf(LT_QF(w0, j, off), x[j], s0);\n"
    "  _Pragma(\"unroll\") for (int j = 0; j < 4; j++) s1 = fmaf(LT_QF(w1, j, off), x[4 + j], s1);\n"
    "  return s0 + s1;\n"
    "}\n"
    "LT_Q float lt_xsum8(const float *x) {\n"
    "  return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]));\n"
    "}\n"
    "#define LT_NIB(w, g) (((w) >> ((g) * 4)) & 0x0F0F0F0Fu)\n"
    /* bits 0..3 of h as bit 4 of bytes 0..3 (q5's fifth bits) */
    "LT_Q unsigned lt_q5bits(unsigned h) { return (h & 1u) << 4 | (h & 2u) << 11 | (h & 4u) << 18 | (h & 8u) << 25; }\n"
    /* lt_qd8_FORMAT = lt_qdr_FORMAT(lt_qld_FORMAT(p, i), i, x): the loads of the block's bytes (lt_qr: the eight
     * elements' words a, b, the words c, d their scales or high bits need, q4_k / q5_k's 16-byte head h), then the
     * arithmetic */
    "typedef struct lt_qr { unsigned a, b, c, d; uint4 h; } lt_qr;\n"
    "LT_Q lt_qr lt_qr_of(const unsigned *w, unsigned c, unsigned d) {\n"
    "  lt_qr r = {};\n"
    "  r.a = w[0], r.b = w[1], r.c = c, r.d = d;\n"
    "  return r;\n"
    "}\n"
    "LT_Q unsigned lt_qu16(lt_qp b) { return *(const unsigned short *)b; }\n"
    "LT_Q lt_qr lt_qld_q8_0(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 5) * 34;\n"
    "  unsigned w[2];\n"
    "  lt_q8b2(b + 2 + (i & 31), w);\n"
    "  return lt_qr_of(w, lt_qu16(b), 0);\n"
    "}\n"
    "LT_Q float lt_qdr_q8_0(lt_qr r, long long i, const float *x) {\n"
    "  (void)i;\n"
    "  return LT_HALF((unsigned short)r.c) * lt_qdot8(r.a ^ 0x80808080u, r.b ^ 0x80808080u, 128.0f, x);\n"
    "}\n"
    "LT_Q lt_qr lt_qld_q4_0(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 5) * 18;\n"
    "  unsigned w[2];\n"
    "  lt_q8b2(b + 2 + (i & 15), w);\n"
    "  return lt_qr_of(w, lt_qu16(b), 0);\n"
    "}\n"
    "LT_Q float lt_qdr_q4_0(lt_qr r, long long i, const float *x) {\n"
    "  const int g = (int)(i >> 4) & 1;\n"
    "  return LT_HALF((unsigned short)r.c) * lt_qdot8(LT_NIB(r.a, g), LT_NIB(r.b, g), 8.0f, x);\n"
    "}\n"
    /* 20-, 24-byte blocks are 4-byte aligned: d and m (q4_1, q5_1) in one word, q5_1's high bits in another */
    "LT_Q lt_qr lt_qld_q4_1(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 5) * 20;\n"
    "  unsigned w[2];\n"
    "  lt_q8b4(b + 4 + (i & 15), w);\n"
    "  return lt_qr_of(w, *(const unsigned *)b, 0);\n"
    "}\n"
    "LT_Q float lt_qdr_q4_1(lt_qr r, long long i, const float *x) {\n"
    "  const int g = (int)(i >> 4) & 1;\n"
    "  const float d = LT_HALF((unsigned short)(r.c & 0xffffu)), m = LT_HALF((unsigned short)(r.c >> 16));\n"
    "  return d * lt_qdot8(LT_NIB(r.a, g), LT_NIB(r.b, g), 0.0f, x) + m * lt_xsum8(x);\n"
    "}\n"
    "LT_Q lt_qr lt_qld_q5_0(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 5) * 22;\n"
    "  unsigned w[2], hw[2];\n"
    "  lt_q8b2(b + 6 + (i & 15), w);\n"
    "  lt_q8b2(b + 2, hw);\n"
    "  return lt_qr_of(w, hw[0], lt_qu16(b));\n"
    "}\n"
    "LT_Q float lt_qdr_q5_0(lt_qr r, long long i, const float *x) {\n"
    "  const int g = (int)(i >> 4) & 1, l = (int)(i & 15);\n"
    "  const unsigned qh = r.c >> (g * 16 + l);\n"
    "  const unsigned w0 = LT_NIB(r.a, g) | lt_q5bits(qh), w1 = LT_NIB(r.b, g) | lt_q5bits(qh >> 4);\n"
    "  return LT_HALF((unsigned short)r.d) * lt_qdot8(w0, w1, 16.0f, x);\n"
    "}\n"
    "LT_Q lt_qr lt_qld_q5_1(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 5) * 24;\n"
    "  unsigned w[2];\n"
    "  lt_q8b8(b + 8 + (i & 15), w);\n"
    "  return lt_qr_of(w, *(const unsigned *)(b + 4), *(const unsigned *)b);\n"
    "}\n"
    "LT_Q float lt_qdr_q5_1(lt_qr r, long long i, const float *x) {\n"
    "  const int g = (int)(i >> 4) & 1, l = (int)(i & 15);\n"
    "  const unsigned qh = r.c >> (g * 16 + l);\n"
    "  const unsigned w0 = LT_NIB(r.a, g) | lt_q5bits(qh), w1 = LT_NIB(r.b, g) | lt_q5bits(qh >> 4);\n"
    "  const float d = LT_HALF((unsigned short)(r.d & 0xffffu)), m = LT_HALF((unsigned short)(r.d >> 16));\n"
    "  return d * lt_qdot8(w0, w1, 0.0f, x) + m * lt_xsum8(x);\n"
    "}\n"
    "LT_Q lt_qr lt_qld_q4_k(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 8) * 144;\n"
    "  unsigned w[2];\n"
    "  lt_q8b8(b + 16 + (((int)(i >> 5) & 7) >> 1) * 32 + (i & 31), w);\n"
    "  lt_qr r = lt_qr_of(w, 0, 0);\n"
    "  r.h = *(const uint4 *)b;\n"
    "  return r;\n"
    "}\n"
    "LT_Q float lt_qdr_q4_k(lt_qr r, long long i, const float *x) {\n"
    "  const int g = (int)(i >> 5) & 7;\n"
    "  float d, m;\n"
    "  lt_qk_dmh(r.h, g, &d, &m);\n"
    "  return d * lt_qdot8(LT_NIB(r.a, g & 1), LT_NIB(r.b, g & 1), 0.0f, x) - m * lt_xsum8(x);\n"
    "}\n"
    "LT_Q lt_qr lt_qld_q5_k(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 8) * 176;\n"
    "  const int g = (int)(i >> 5) & 7, l = (int)(i & 31);\n"
    "  unsigned w[2], hw[2];\n"
    "  lt_q8b8(b + 48 + (g >> 1) * 32 + l, w);\n"
    "  lt_q8b8(b + 16 + l, hw);\n"
    "  lt_qr r = lt_qr_of(w, hw[0], hw[1]);\n"
    "  r.h = *(const uint4 *)b;\n"
    "  return r;\n"
    "}\n"
    "LT_Q float lt_qdr_q5_k(lt_qr r, long long i, const float *x) {\n"
    "  const int g = (int)(i >> 5) & 7;\n"
    "  const unsigned w0 = LT_NIB(r.a, g & 1) | ((r.c >> g) & 0x01010101u) << 4;\n"
    "  const unsigned w1 = LT_NIB(r.b, g & 1) | ((r.d >> g) & 0x01010101u) << 4;\n"
    "  float d, m;\n"
    "  lt_qk_dmh(r.h, g, &d, &m);\n"
    "  return d * lt_qdot8(w0, w1, 0.0f, x) - m * lt_xsum8(x);\n"
    "}\n"
    /* q6_k: h.x holds the f16 scale and the group's int8 scale */
    "LT_Q lt_qr lt_qld_q6_k(lt_qp p, long long i) {\n"
    "  lt_qp b = p + (i >> 8) * 210;\n"
    "  const int g = (int)(i >> 4) & 15, h = g >> 3, k = (g >> 1) & 3, m = (g & 1) * 16 + (int)(i & 15);\n"
    "  unsigned lw[2], hw[2];\n"
    "  lt_q8b2(b + h * 64 + 32 * (k & 1) + m, lw);\n"
    "  lt_q8b2(b + 128 + h * 32 + m, hw);\n"
    "  lt_qr r = lt_qr_of(lw, hw[0], hw[1]);\n"
    "  r.h.x = lt_qu16(b + 208) | (unsigned)b[192 + h * 8 + (g & 1) + 2 * k] << 16;\n"
    "  return r;\n"
    "}\n"
    "LT_Q float lt_qdr_q6_k(lt_qr r, long long i, const float *x) {\n"
    "  const int k = ((int)(i >> 5) & 3);\n"
    "  const float ds = LT_MUL(LT_HALF((unsigned short)(r.h.x & 0xffffu)), (float)(signed char)(r.h.x >> 16));\n"
    "  const unsigned w0 = LT_NIB(r.a, k >> 1) | ((r.c >> 2 * k) & 0x03030303u) << 4;\n"
    "  const unsigned w1 = LT_NIB(r.b, k >> 1) | ((r.d >> 2 * k) & 0x03030303u) << 4;\n"
    "  return ds * lt_qdot8(w0, w1, 32.0f, x);\n"
    "}\n"
    "#define LT_QD8(f) LT_Q float lt_qd8_##f(lt_qp p, long long i, const float *x) { return lt_qdr_##f(lt_qld_##f(p, i), i, x); }\n"
    "LT_QD8(q8_0)\nLT_QD8(q4_0)\nLT_QD8(q4_1)\nLT_QD8(q5_0)\nLT_QD8(q5_1)\nLT_QD8(q4_k)\nLT_QD8(q5_k)\nLT_QD8(q6_k)\n";

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

void rc_put_rowcache_head(StrBuf *out) { sb_puts(out, rowcache_c_head); }

void rc_put_quant_source(StrBuf *out, int cuda) {
  sb_puts(out, cuda ? quant_cuda_head : quant_c_head);
  sb_puts(out, quant_decoders);
  if (!cuda) rc_put_rowcache_head(out);
  sb_puts(out, cuda ? quant_cuda_vec8 : quant_c_dot);
  if (!cuda) rc_put_quant_tile_source(out);
}

static int program_reads_f16(const KProgram *kp) {
  for (int i = 0; kp->loop && i < kp->loop->nbufs; i++)
    if (kp->loop->bufs[i].dtype == DT_F16) return 1;
  return 0;
}

/* C: the f16 dot products go into every program that reads an f16 buffer (its weights may be f16), after the
 * row caches' head (once: with the quantized source when the program reads both) */
void rc_put_quant_decoders(StrBuf *out, const KProgram *kp, int cuda) {
  const int quant = program_reads_quant(kp);
  if (quant) rc_put_quant_source(out, cuda);
  if (cuda || !program_reads_f16(kp)) return;
  if (!quant) rc_put_rowcache_head(out);
  rc_put_hdot_source(out);
}
