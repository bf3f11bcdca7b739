/* C for the CPU backend: one translation unit, compiled by the system cc with OpenMP. */
#include "render_common.h"

/* f16/bf16 conversions by bit manipulation (round to nearest even), so only libc headers are needed. */
static const char c_preamble[] =
    "#include <stdint.h>\n"
    "#include <math.h>\n"
    "\n"
    "static inline float lt_f16_to_f32(uint16_t h) {\n"
    "  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;\n"
    "  union { uint32_t u; float f; } v;\n"
    "  if (e == 0) { float f = (float)m * 5.9604644775390625e-08f; return sign ? -f : f; }\n"
    "  v.u = e == 31 ? (sign | 0x7f800000u | (m << 13)) : (sign | ((e + 112) << 23) | (m << 13));\n"
    "  return v.f;\n"
    "}\n"
    "static inline uint16_t lt_f32_to_f16(float f) {\n"
    "  union { float f; uint32_t u; } v = {f};\n"
    "  uint32_t sign = (v.u >> 16) & 0x8000u, ax = v.u & 0x7fffffffu;\n"
    "  if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);\n"
    "  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */\n"
    "  if (ax < 0x38800000u) { /* below 2^-14: subnormal half, quantum 2^-24 */\n"
    "    if (ax <= 0x33000000u) return (uint16_t)sign; /* <= 2^-25 rounds to (even) zero */\n"
    "    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;\n"
    "    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);\n"
    "    if (rem > half || (rem == half && (r & 1u))) r++;\n"
    "    return (uint16_t)(sign | r);\n"
    "  }\n"
    "  uint32_t r = ax - 0x38000000u; /* rebias the exponent from 127 to 15 */\n"
    "  r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;\n"
    "  return (uint16_t)(sign | r);\n"
    "}\n"
    "static inline float lt_bf16_to_f32(uint16_t h) {\n"
    "  union { uint32_t u; float f; } v;\n"
    "  v.u = (uint32_t)h << 16;\n"
    "  return v.f;\n"
    "}\n"
    "static inline uint16_t lt_f32_to_bf16(float f) {\n"
    "  union { float f; uint32_t u; } v = {f};\n"
    "  if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40u);\n"
    "  return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1u)) >> 16);\n"
    "}\n"
    "static inline float lt_f16_round(float f) { return lt_f16_to_f32(lt_f32_to_f16(f)); }\n"
    "static inline float lt_bf16_round(float f) { return lt_bf16_to_f32(lt_f32_to_bf16(f)); }\n"
    "static inline int64_t lt_maxi(int64_t a, int64_t b) { return a > b ? a : b; }\n"
    "static inline int64_t lt_mini(int64_t a, int64_t b) { return a < b ? a : b; }\n"
    "static inline int64_t lt_absi(int64_t a) { return a < 0 ? -a : a; }\n"
    /* LT_VW floats as one vector (GCC and Clang), the rows of the CPU flash kernel's vector form: 16 with AVX-512,
     * else 8 (AVX2's registers; GCC lowered 16-float vectors there through the stack, 3.7x slower); lt_vfu loads
     * one from any float */
    "#if defined(__AVX512F__)\n"
    "#define LT_VW 16\n"
    "#else\n"
    "#define LT_VW 8\n"
    "#endif\n"
    "typedef float lt_vf __attribute__((vector_size(4 * LT_VW)));\n"
    "typedef float lt_vfu __attribute__((vector_size(4 * LT_VW), aligned(4), may_alias));\n"
    "static inline float lt_hsumv(lt_vf x) {\n"
    "  float s = 0.0f;\n"
    "  for (int i = 0; i < LT_VW; i++) s += x[i];\n"
    "  return s;\n"
    "}\n"
    /* e^x for the softmax of the CPU's flash attention (x <= 0 there; 0 below -87, where e^x leaves the normal
     * floats, and for -inf): Cephes' polynomial for e^r on |r| <= ln 2 / 2 times 2^n, within 2 ulp down to -20
     * and 5 below, without branches or calls, so that a loop of it vectorizes (expf does not without -ffast-math) */
    "static inline float lt_expf(float x) {\n"
    "  float xc = x >= -87.0f ? x : -87.0f; /* so that n converts (NaN and the infinities too) */\n"
    "  xc = xc <= 88.0f ? xc : 88.0f;\n"
    "  const float n = floorf(xc * 1.44269504088896341f + 0.5f);\n"
    "  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;\n"
    "  float p = 1.9875691500e-4f;\n"
    "  p = p * r + 1.3981999507e-3f;\n"
    "  p = p * r + 8.3334519073e-3f;\n"
    "  p = p * r + 4.1665795894e-2f;\n"
    "  p = p * r + 1.6666665459e-1f;\n"
    "  p = p * r + 5.0000001201e-1f;\n"
    "  p = p * r * r + r + 1.0f;\n"
    "  union { int32_t i; float f; } s;\n"
    "  s.i = ((int32_t)n + 127) << 23;\n"
    "  const float v = x <= 88.0f ? p * s.f : INFINITY;\n"
    "  return x >= -87.0f ? v : x == x ? 0.0f : x;\n"
    "}\n";

/* The row caches of KS_QROW statements: how many, and the most bytes one holds (a multiple of 64). */
static void find_qrows(const KStmt *s, int *slots, int64_t *bytes) {
  if (!s) return;
  if (s->kind == KS_QROW) {
    /* 80, 640: sizeof(lt_q16x), sizeof(lt_q16t); f16 weights' rows: count floats, 8 of them a tile */
    int64_t b = s->dtype == DT_F32   ? 4 * (int64_t)s->count
                : s->dtype == DT_F16 ? (s->rows == 8 ? 32 : 4) * (int64_t)s->count
                                     : (s->rows == 8 ? 640 : 80) * (int64_t)s->count;
    b = (b + 63) / 64 * 64;
    if (s->slot + 1 > *slots) *slots = s->slot + 1;
    if (b > *bytes) *bytes = b;
  }
  for (int i = 0; i < s->nbody; i++) find_qrows(s->body[i], slots, bytes);
}

/* The f16 tile dot products (KS_QDOT of dtype f16 over 8 rows): each has a pair cache per thread (render_hdot.c) */
static int count_hpairs(const KStmt *s) {
  int n = s && s->kind == KS_QDOT && s->dtype == DT_F16 && s->rows == 8;
  for (int i = 0; s && i < s->nbody; i++) n += count_hpairs(s->body[i]);
  return n;
}

void rc_c_kernel(Render *R, const KKernel *kk) {
  StrBuf *o = R->out;
  if (!rc_kernel_begin(R, kk)) {
    rc_kernel_end(R);
    return;
  }
  sb_printf(o, "\nvoid %s(void *const *lt_bufs, const int64_t *lt_syms) {\n", kk->name);
  sb_puts(o, "  (void)lt_bufs;\n  (void)lt_syms;\n");
  for (int i = 0; i < kk->nparams; i++) {
    const KParam *p = &kk->params[i];
    const char *t = rc_storage_type(R, R->lp->bufs[p->buf].dtype), *c = p->is_output ? "" : "const ";
    sb_printf(o, "  %s%s *restrict %s = (%s%s *)lt_bufs[%d];\n", c, t, R->buf_name[p->buf], c, t, i);
  }
  for (int i = 0; i < kk->nsyms; i++) sb_printf(o, "  const int64_t %s = lt_syms[%d];\n", R->sym_name[i], i);
  int slots = 0, pairs = count_hpairs(kk->body);
  int64_t bytes = 0;
  find_qrows(kk->body, &slots, &bytes);
  R->hpairs = 0;
  R->hpairs_total = pairs;
  if (slots) { /* each thread's row caches for this launch (KS_QROW): the rows (64-byte aligned: a tile's row of a
                 block is one cache line), flag + RC_QKEYS keys per slot, and the f16 tiles' row records (lt_hpair),
                 each thread's keys and records on cache lines of their own: the records are written at every point,
                 and a line two threads write moves between their cores each time */
    sb_printf(o, "  const int64_t lt_nslots = %d, lt_slot_bytes = %lld, lt_nt = omp_get_max_threads();\n", slots,
              (long long)bytes);
    sb_puts(o, "  unsigned char *lt_qr = (unsigned char *)aligned_alloc(64, (size_t)(lt_nt * lt_nslots * "
               "lt_slot_bytes));\n");
    sb_printf(o, "  const int64_t lt_qks = (lt_nslots * %d + 7) / 8 * 8; /* a thread's keys: whole cache lines */\n",
              RC_QKEYS + 1);
    sb_puts(o, "  double *lt_qk = (double *)lt_zalloc64((size_t)(lt_nt * lt_qks) * sizeof(double));\n");
    if (pairs) {
      sb_printf(o, "  lt_hpair *lt_hpc = (lt_hpair *)lt_zalloc64((size_t)(lt_nt * %d) * sizeof(lt_hpair));\n", pairs);
      sb_puts(o, "  if (!lt_hpc) free(lt_qr), lt_qr = 0;\n");
    }
    sb_puts(o, "  if (!lt_qr || !lt_qk) free(lt_qr), free(lt_qk), lt_qr = 0, lt_qk = 0;\n");
  }
  rc_body(R, 1);
  if (slots) sb_puts(o, "  free(lt_qr);\n  free(lt_qk);\n");
  if (slots && pairs) sb_puts(o, "  free(lt_hpc);\n");
  sb_puts(o, "}\n");
  rc_kernel_end(R);
}

int render_c(StrBuf *out, const KProgram *kp, Diag *d) {
  Render R = {0};
  R.out = out;
  R.kp = kp;
  R.d = d;
  R.dl = &rc_dialect_c;
  sb_puts(out, c_preamble);
  rc_put_quant_decoders(out, kp, 0);
  for (int i = 0; i < kp->nkernels && !R.failed; i++) {
    const KKernel *kk = &kp->kernels[i];
    if (!kk->code_name && !kk->skip) rc_c_kernel(&R, kk);
    if (kk->alt && !kk->alt->code_name && !kk->alt->skip && !R.failed) rc_c_kernel(&R, kk->alt);
  }
  return !R.failed;
}
