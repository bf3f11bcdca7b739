/* C: dot products of f16 weight rows with f32 activation rows, for CPU projections over f16 weights
 * (lower_phase.c quant_dots and quant_tiles with an f16 weight; the KS_QDOT statements of dtype f16). Each weight is
 * converted by the hardware where the compiler targets it (AVX-512: vcvtph2ps, 16 halves an instruction; F16C with
 * AVX2 and FMA: 8), else by lt_f16_to_f32, and meets an f32 activation row that a row cache computed once per thread
 * (a norm's output is not recomputed per weight), in f32 FMAs. lt_hdot(w, n, x): one row (a decode step's GEMV);
 * lt_hdott(w, n, tile, out[8]): the same weight row against a tile of 8 activation rows (a prefill's register-blocked
 * projections), each chunk of 16 weights converted once for the 8 rows.
 *
 * Every form computes a row the same way, so its result is the same bits alone, in a tile, in any batch and with
 * AVX-512, AVX2 or neither: 16 f32 lanes, lane l summing the elements 16 i + l by one FMA each in order of i, then
 * the lanes added in one fixed tree, (l + l+8) for l < 8, then ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)) of those.
 * The activations stay f32 (llama.cpp rounds them to f16 for its f16 dot products), so a sum differs from the
 * reference only by f32 rounding. n is a multiple of 32 (the lowering's condition). */
#include "render_common.h"

static const char hdot_c[] =
    "typedef const unsigned short *lt_hp;\n"
    "#if defined(__AVX512F__) && !defined(LT_QDOT_SCALAR)\n"
    "#include <immintrin.h>\n"
    "typedef __m512 lt_h16;\n"
    "static inline lt_h16 lt_h16_zero(void) { return _mm512_setzero_ps(); }\n"
    "static inline lt_h16 lt_h16_ld(lt_hp w) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)w)); }\n"
    "static inline lt_h16 lt_h16_fma(lt_h16 w, const float *x, lt_h16 a) { return _mm512_fmadd_ps(w, _mm512_loadu_ps(x), a); }\n"
    /* lanes l and l + 8 added, then lt_hsum8's tree */
    "static inline float lt_h16_sum(lt_h16 a) {\n"
    "  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));\n"
    "  const __m256 v = _mm256_add_ps(_mm512_castps512_ps256(a), hi);\n"
    "  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));\n"
    "  s = _mm_add_ps(s, _mm_movehl_ps(s, s));\n"
    "  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));\n"
    "}\n"
    "#elif defined(LT_QDOT_AVX2) && defined(__F16C__)\n"
    "typedef struct lt_h16 { __m256 lo, hi; } lt_h16; /* lanes 0..7, 8..15 */\n"
    "static inline lt_h16 lt_h16_zero(void) { return (lt_h16){_mm256_setzero_ps(), _mm256_setzero_ps()}; }\n"
    "static inline lt_h16 lt_h16_ld(lt_hp w) {\n"
    "  return (lt_h16){_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)w)), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + 8)))};\n"
    "}\n"
    "static inline lt_h16 lt_h16_fma(lt_h16 w, const float *x, lt_h16 a) {\n"
    "  return (lt_h16){_mm256_fmadd_ps(w.lo, _mm256_loadu_ps(x), a.lo), _mm256_fmadd_ps(w.hi, _mm256_loadu_ps(x + 8), a.hi)};\n"
    "}\n"
    "static inline float lt_h16_sum(lt_h16 a) {\n"
    "  const __m256 v = _mm256_add_ps(a.lo, a.hi);\n"
    "  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));\n"
    "  s = _mm_add_ps(s, _mm_movehl_ps(s, s));\n"
    "  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));\n"
    "}\n"
    "#else\n"
    /* scalar: the same lanes; LT_OPQ keeps -fassociative-math from regrouping the tree */
    "typedef struct lt_h16 { float v[16]; } lt_h16;\n"
    "static inline lt_h16 lt_h16_zero(void) { return (lt_h16){{0.0f}}; }\n"
    "static inline lt_h16 lt_h16_ld(lt_hp w) {\n"
    "  lt_h16 r;\n"
    "  for (int l = 0; l < 16; l++) r.v[l] = lt_f16_to_f32(w[l]);\n"
    "  return r;\n"
    "}\n"
    "static inline lt_h16 lt_h16_fma(lt_h16 w, const float *x, lt_h16 a) {\n"
    "  for (int l = 0; l < 16; l++) a.v[l] = fmaf(w.v[l], x[l], a.v[l]);\n"
    "  return a;\n"
    "}\n"
    "static inline float lt_h16_sum(lt_h16 a) {\n"
    "  float v[8], p[4];\n"
    "  for (int l = 0; l < 8; l++) {\n"
    "    v[l] = a.v[l] + a.v[l + 8];\n"
    "    LT_OPQ(v[l]);\n"
    "  }\n"
    "  for (int l = 0; l < 4; l++) {\n"
    "    p[l] = v[l] + v[l + 4];\n"
    "    LT_OPQ(p[l]);\n"
    "  }\n"
    "  float e = p[0] + p[2], o = p[1] + p[3];\n"
    "  LT_OPQ(e);\n"
    "  LT_OPQ(o);\n"
    "  return e + o;\n"
    "}\n"
    "#endif\n"
    /* one weight row of n halves times x; the weights LT_QPF bytes ahead asked for once a 64-byte line (a decode
     * step streams them from memory) */
    "static inline float lt_hdot(lt_hp w, int n, const float *x) {\n"
    "  lt_h16 a = lt_h16_zero();\n"
    "  for (int i = 0; i < n; i += 32) {\n"
    "    __builtin_prefetch(w + i + LT_QPF / 2);\n"
    "    a = lt_h16_fma(lt_h16_ld(w + i), x + i, a);\n"
    "    a = lt_h16_fma(lt_h16_ld(w + i + 16), x + i + 16, a);\n"
    "  }\n"
    "  return lt_h16_sum(a);\n"
    "}\n"
    /* a tile of 8 activation rows: per 16 elements the 8 rows' 16 values (row t's element k at
     * (k / 16) * 128 + 16 t + k % 16), so each chunk of weights meets its 8 rows in one run of 512 bytes */
    "static inline void lt_htile_row(const float *x, float *tile, int t, int n) {\n"
    "  for (int k = 0; k < n; k++) tile[(k >> 4) * 128 + 16 * t + (k & 15)] = x[k];\n"
    "}\n"
    "static inline void lt_hdott(lt_hp w, int n, const float *tile, float *out) {\n"
    "  lt_h16 a[8];\n"
    "  for (int t = 0; t < 8; t++) a[t] = lt_h16_zero();\n"
    "  for (int i = 0; i < n; i += 16) {\n"
    "    if (!(i & 31)) __builtin_prefetch(w + i + LT_QPF / 2);\n"
    "    const lt_h16 wv = lt_h16_ld(w + i);\n"
    "    const float *x = tile + (long long)i * 8;\n"
    "    for (int t = 0; t < 8; t++) a[t] = lt_h16_fma(wv, x + 16 * t, a[t]);\n"
    "  }\n"
    "  for (int t = 0; t < 8; t++) out[t] = lt_h16_sum(a[t]);\n"
    "}\n"
    /* two weight rows against the tile, each as lt_hdott computes it alone (the same lanes, FMAs and tree): each
     * chunk of tile values loaded once for both rows */
    "#if defined(__AVX512F__) && !defined(LT_QDOT_SCALAR)\n"
    "static inline void lt_hdott2(lt_hp w, lt_hp w2, int n, const float *tile, float *out, float *out2) {\n"
    "  lt_h16 a[8], b[8];\n"
    "  for (int t = 0; t < 8; t++) a[t] = lt_h16_zero(), b[t] = lt_h16_zero();\n"
    "  for (int i = 0; i < n; i += 16) {\n"
    "    if (!(i & 31)) __builtin_prefetch(w + i + LT_QPF / 2), __builtin_prefetch(w2 + i + LT_QPF / 2);\n"
    "    const lt_h16 wv = lt_h16_ld(w + i), wu = lt_h16_ld(w2 + i);\n"
    "    const float *x = tile + (long long)i * 8;\n"
    "    for (int t = 0; t < 8; t++) {\n"
    "      const __m512 xv = _mm512_loadu_ps(x + 16 * t);\n"
    "      a[t] = _mm512_fmadd_ps(wv, xv, a[t]), b[t] = _mm512_fmadd_ps(wu, xv, b[t]);\n"
    "    }\n"
    "  }\n"
    "  for (int t = 0; t < 8; t++) out[t] = lt_h16_sum(a[t]), out2[t] = lt_h16_sum(b[t]);\n"
    "}\n"
    "#elif defined(LT_QDOT_AVX2) && defined(__F16C__)\n"
    /* AVX2: 16 more 8-lane accumulators would not fit its 16 registers, so four passes over the two rows (tile rows
     * 0-3 then 4-7, lanes 0-7 then 8-15), each with 8 accumulators: per 16 elements two conversions and four tile
     * loads (kept in a register, LT_OPQ, rather than folded into both FMAs) for eight FMAs. A row of more than 640
     * elements (a tile past 20 KB) is taken in steps of 512, the four passes over each step, so that the step's tile
     * stays in L1 between passes (the accumulators wait in memory between steps; each lane still adds its elements in
     * order) */
    "static inline void lt_hdott2(lt_hp w, lt_hp w2, int n, const float *tile, float *out, float *out2) {\n"
    "  __m256 acc[2][2][8];\n"
    "  const int step = n <= 640 ? n : 512;\n"
    "  for (int k0 = 0; k0 < n; k0 += step) {\n"
    "    const int k1 = k0 + step < n ? k0 + step : n;\n"
    "    for (int g = 0; g < 2; g++)\n"
    "      for (int h = 0; h < 2; h++) {\n"
    "        __m256 a[4], b[4];\n"
    "        for (int r = 0; r < 4; r++) {\n"
    "          a[r] = k0 ? acc[g][h][r] : _mm256_setzero_ps();\n"
    "          b[r] = k0 ? acc[g][h][4 + r] : _mm256_setzero_ps();\n"
    "        }\n"
    "        for (int i = k0; i < k1; i += 16) {\n"
    "          if (g == 0 && h == 0 && !(i & 31)) __builtin_prefetch(w + i + LT_QPF / 2), __builtin_prefetch(w2 + i + LT_QPF / 2);\n"
    "          const float *x = tile + (long long)i * 8 + 64 * g + 8 * h;\n"
    "          const __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i + 8 * h)));\n"
    "          const __m256 wu = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w2 + i + 8 * h)));\n"
    "          for (int r = 0; r < 4; r++) {\n"
    "            __m256 xv = _mm256_loadu_ps(x + 16 * r);\n"
    "            LT_OPQ(xv);\n"
    "            a[r] = _mm256_fmadd_ps(wv, xv, a[r]), b[r] = _mm256_fmadd_ps(wu, xv, b[r]);\n"
    "          }\n"
    "        }\n"
    "        for (int r = 0; r < 4; r++) acc[g][h][r] = a[r], acc[g][h][4 + r] = b[r];\n"
    "      }\n"
    "  }\n"
    "  for (int g = 0; g < 2; g++)\n"
    "    for (int r = 0; r < 4; r++) {\n"
    "      out[4 * g + r] = lt_h16_sum((lt_h16){acc[g][0][r], acc[g][1][r]});\n"
    "      out2[4 * g + r] = lt_h16_sum((lt_h16){acc[g][0][4 + r], acc[g][1][4 + r]});\n"
    "    }\n"
    "}\n"
    "#else\n"
    "static inline void lt_hdott2(lt_hp w, lt_hp w2, int n, const float *tile, float *out, float *out2) {\n"
    "  lt_hdott(w, n, tile, out);\n"
    "  lt_hdott(w2, n, tile, out2);\n"
    "}\n"
    "#endif\n"
    /* A thread's consecutive points of a tiled kernel take consecutive weight rows against one tile (the block of rows
     * is the slower point index), so a point computes its row and the next one (lt_hdott2) and keeps the next one's
     * sums in pc, keyed by that row and the tile's fill (gen: the row cache's count of fills); the next point takes
     * them. Without pc, or where the next row would pass the weights' end, one row. */
    "typedef struct lt_hpair { lt_hp w; double gen; float v[8]; } lt_hpair;\n"
    "static inline void lt_hdott_pc(lt_hp w, int n, const float *tile, float *out, lt_hpair *pc, double gen, lt_hp end) {\n"
    "  if (pc && pc->w == w && pc->gen == gen) {\n"
    "    for (int t = 0; t < 8; t++) out[t] = pc->v[t];\n"
    "    pc->w = 0;\n"
    "  } else if (pc && end && w + 2 * (long long)n <= end) {\n"
    "    lt_hdott2(w, w + n, n, tile, out, pc->v);\n"
    "    pc->w = w + n, pc->gen = gen;\n"
    "  } else {\n"
    "    lt_hdott(w, n, tile, out);\n"
    "  }\n"
    "}\n";

void rc_put_hdot_source(StrBuf *out) { sb_puts(out, hdot_c); }
