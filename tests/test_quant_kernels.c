/* Kernels over quantized weights: where the kernel stage reads blocks (the CPU's reduction loops split into
 * blocks, groups and elements, lt_dq_*_at), eight elements at once (CUDA's vector loads, lt_dq8_*) and where it
 * reads single elements (lt_dq_*); programs without a quantized buffer get no decoders. The values themselves
 * are checked by test_differential's quant_* cases, the eight-at-once decoders against the single ones here. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "testutil.h"
#include "host_prog_testutil.h"
#include "backend/nvrtc.h"
#include "code/render_common.h"
#include "driver/pipeline.h"
#include "base/settings.h"
#include "kernel/kernel.h"

static char *code_of(Target t, const char *src) {
  Diag d = {0};
  Compilation *c = compilation_new(t, NULL);
  if (!compile_source(c, src, ST_CODE, &d)) fail_msg("compile failed: %s\n%s", d.msg, src);
  char *s = strdup(sb_str(&c->code));
  compilation_free(c);
  return s;
}

/* The CUDA C c (for weights of type q) compiles under NVRTC for sm_90, where NVRTC is installed. */
static void nvrtc_compiles(const char *c, const char *q) {
  if (!nvrtc_available()) return;
  Diag d = {0};
  void *cubin = NULL;
  size_t size = 0;
  if (!nvrtc_compile(c, "sm_90", &cubin, &size, &d)) fail_msg("%s: %s\n%s", q, d.msg, c);
  assert_true(size > 0);
  free(cubin);
}

/* code_of with setting id at value while it compiles */
static char *code_with(Target t, SettingId id, const char *value, const char *src) {
  setting_set(id, value);
  char *c = code_of(t, src);
  setting_set(id, NULL);
  return c;
}

/* Asserts that code contains fmt with q (a format's name) for its %s. */
static void assert_contains_q(const char *code, const char *fmt, const char *q) {
  char want[160];
  snprintf(want, sizeof want, fmt, q);
  assert_contains(code, want);
}

static const char PROJ_Q4_K[] = "x: f32[seq,512]; w: q4_k[5,512]; y = linear(x, w)";
static const char ROW_Q4_1_Q6_K[] = "x: f32[1,256]; w: q4_1[5,256]; v: q6_k[5,256]; y = linear(x, w) + linear(x, v)";

static void cpu_projection_reads_blocks(void **state) {
  (void)state;
  char *c = code_of(TARGET_CPU, PROJ_Q4_K);
  assert_contains(c, "lt_qdot_q4_k(w, ");  /* decode: integer dot products */
  assert_contains(c, "lt_qdott_q4_k(w, "); /* the blocked variant: a tile of 8 activation rows */
  free(c);
  /* the blocked variant: the weight row decoded to f32 once */
  c = code_with(TARGET_CPU, SET_CPU_INT_TILE, "0", PROJ_Q4_K);
  assert_contains(c, "lt_dqrow_q4_k(w, ");
  assert_null(strstr(c, "lt_qdott_q4_k(w, "));
  free(c);
  c = code_with(TARGET_CPU, SET_CPU_INT_DOT, "0", PROJ_Q4_K); /* the blocks decoded in the sums' loop */
  assert_contains(c, "lt_dq_q4_k_at(w, ((i1 * 2) + rb");
  assert_null(strstr(c, "lt_qdot_q4_k(w, "));
  free(c);
  c = code_of(TARGET_CPU, "x: f32[seq,64]; w: q4_1[5,64]; v: q5_0[5,64]; y = linear(x, w) * linear(x, v)");
  assert_contains(c, "lt_qdot_q4_1(w, ");
  assert_contains(c, "lt_qdot_q5_0(v, ");
  free(c);
  /* a prefill's register blocking takes 8 rows over quantized weights (each element decoded once for 8) and
   * over f32 (a batched step of 8 sequences is one block) */
  c = code_of(TARGET_CPU, "x: f32[seq,64]; w: q4_1[5,64]; y = linear(x, w)");
  assert_contains(c, "linear_0_rows8(");
  free(c);
  c = code_of(TARGET_CPU, "x: f32[seq,64]; w: f32[5,64]; y = linear(x, w)");
  assert_contains(c, "linear_0_rows8(");
  free(c);
}

static void element_reads_elsewhere(void **state) {
  (void)state;
  /* blocks or groups of different sizes in one loop, the weight read along its columns, CUDA: element by element */
  char *c = code_of(TARGET_CPU, ROW_Q4_1_Q6_K);
  assert_contains(c, "lt_qdot_q6_k(v, "); /* integer dot products: one activation row for both */
  free(c);
  c = code_with(TARGET_CPU, SET_CPU_INT_DOT, "0", ROW_Q4_1_Q6_K);
  assert_contains(c, "lt_dq_q6_k(v, ");
  free(c);
  c = code_of(TARGET_CPU, "x: f32[1,64]; w: q8_0[64,32]; y = matmul(x, w)");
  assert_contains(c, "lt_dq_q8_0(w, ");
  assert_null(strstr(c, "lt_dq_q8_0_at(w, "));
  free(c);
  c = code_of(TARGET_CUDA, "x: f32[seq,64]; w: q8_0[64,32]; y = matmul(x, w)"); /* along the columns */
  assert_contains(c, "lt_dq_q8_0(w, ");
  assert_null(strstr(c, "lt_dq8_q8_0(w, "));
  assert_contains(c, "__fmul_rn");
  free(c);
  c = code_of(TARGET_CPU, "x: f32[seq,512]; w: f32[5,512]; y = linear(x, w)");
  assert_null(strstr(c, "lt_dq_"));
  free(c);
}

static const char *QUANTS[] = {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"};

/* With LATHE_QUANT_GEMV=0, a decode GEMV over every block type on CUDA reads eight elements per decoder call (one
 * wide load of their bits, the block's scale once), so does the prefill GEMM's pre-pass that dequantizes the weights
 * to bf16, and the program compiles under NVRTC. */
static void cuda_gemv_decodes_eight_at_once(void **state) {
  (void)state;
  for (int t = 0; t < 8; t++) {
    const char *q = QUANTS[t];
    char src[256];
    snprintf(src, sizeof src, "x: f32[seq,2048]; w: %s[96,2048]; v: %s[96,2048]; y = silu(linear(x, w)) * linear(x, v)",
             q, q);
    char *c = code_with(TARGET_CUDA, SET_QUANT_GEMV, "0", src);
    assert_null(strstr(c, "lt_qgemv<"));
    assert_contains_q(c, "lt_dq8_%s(w, ", q);
    assert_contains_q(c, "lt_dq8_%s(v, ", q);
    /* the decode GEMV: a dot product a vector from the row's first byte */
    assert_contains_q(c, "+ lt_qd8_%s(w + (", q);
    nvrtc_compiles(c, q);
    free(c);
  }
}

/* With LATHE_QUANT_GEMV=1 the kernel itself (few rows: decode; or one row of fixed extent) is the quantized
 * GEMV over every block type, gate and up in one instantiation (the template's format ids follow DType's order),
 * mixed formats too, and it compiles under NVRTC; by default, and for sums that are no GEMM's, the loop stays. */
static void cuda_qgemv_when_asked(void **state) {
  (void)state;
  setting_set(SET_QUANT_GEMV, "1");
  for (int t = 0; t < 8; t++) {
    const char *q = QUANTS[t];
    char src[256], want[96];
    snprintf(src, sizeof src, "x: f32[seq,2048]; w: %s[96,2048]; v: %s[96,2048]; y = silu(linear(x, w)) * linear(x, v)",
             q, q);
    char *c = code_of(TARGET_CUDA, src);
    snprintf(want, sizeof want, "lt_qgemv<2, %d, %d, 8, 2048LL, 96LL, true>(", t, t);
    assert_contains(c, want);
    assert_null(strstr(c, "+ lt_qd8_"));
    nvrtc_compiles(c, q);
    free(c);
  }
  char *c = code_of(TARGET_CUDA, "x: f32[seq,4096]; w: q4_k[4352,4096]; v: q6_k[4352,4096]; g: f32[4096]\n"
                                 "h = rms_norm(x, g, 1e-6)\ny = silu(linear(h, w)) * linear(h, v)");
  assert_contains(c, "lt_qgemv<2, 5, 7, 8, 4096LL, 4352LL, true>(");
  free(c);
  c = code_of(TARGET_CUDA, "x: f32[1,2048]; w: q4_0[96,2048]; y = linear(x, w)"); /* one fixed row: an LM head */
  assert_contains(c, "lt_qgemv<1, 1, 1, 8, 2048LL, 96LL, true>(");
  free(c);
  c = code_of(TARGET_CUDA, "x: f32[seq,2048]; w: q4_0[5,2048]; y = linear(x, w)"); /* 5 columns: no GEMM */
  assert_null(strstr(c, "lt_qgemv<"));
  assert_contains(c, "+ lt_qd8_q4_0(");
  free(c);
  setting_set(SET_QUANT_GEMV, NULL);
  c = code_of(TARGET_CUDA, "x: f32[seq,2048]; w: q4_0[96,2048]; y = linear(x, w)");
  assert_null(strstr(c, "lt_qgemv<"));
  free(c);
}

/* A prefill over quantized weights runs on tensor cores (CUDA, 8 or more rows): the GEMM's pre-pass dequantizes
 * each distinct weight whole into the scratch as bf16 (after the tile counters, each copy at a multiple of 256
 * bytes, A's planes after them), and both lathe's GEMM and the cuBLASLt form read those copies, not the blocks;
 * the decode kernel keeps reading the blocks. A weight read along its columns is no GEMM. */
static void cuda_prefill_gemm_reads_bf16_copies(void **state) {
  (void)state;
  const char *src = "x: f32[seq,2048]; w: q4_k[96,2048]; v: q4_k[96,2048]; y = silu(linear(x, w)) * linear(x, v)";
  Diag d = {0};
  Compilation *c = compilation_new(TARGET_CUDA, NULL);
  if (!compile_source(c, src, ST_CODE, &d)) fail_msg("compile failed: %s", d.msg);
  const KKernel *kk = &c->kernel->kernels[0];
  assert_non_null(kk->alt);
  assert_non_null(kk->alt->lib);
  assert_true(kk->alt->tensor_cores);
  const KMma *m = kk->alt->body->body[0]->mma;
  const int64_t copy = 96 * 2048 * 2; /* bytes of one bf16 copy, a multiple of 256 */
  assert_int_equal(m->wq_at[0], MMA_COUNTERS);
  assert_int_equal(m->wq_at[1], MMA_COUNTERS + copy);
  assert_int_equal(m->planes_at, MMA_COUNTERS + 2 * copy);
  assert_int_equal(kk->alt->lib->planes_at, m->planes_at);
  assert_int_equal(kk->alt->lib->w_at[0], m->wq_at[0]);
  assert_int_equal(kk->alt->lib->w_at[1], m->wq_at[1]);
  assert_int_equal(kk->alt->lib->na_bufs, -1); /* its pre-pass writes the copies: never skipped */
  const char *code = sb_str(&c->code);
  char want[160];
  snprintf(want, sizeof want, "lt_mma_dequant<24576LL, %dLL>(lt_scratch", MMA_COUNTERS);
  assert_contains(code, want);
  snprintf(want, sizeof want, "lt_mma_dequant<24576LL, %lldLL>(lt_scratch", (long long)(MMA_COUNTERS + copy));
  assert_contains(code, want);
  assert_contains(code, "lt_dq8_q4_k(w, lt_i, lt_v);");
  assert_contains(code, "lt_dq8_q4_k(v, lt_i, lt_v);");
  snprintf(want, sizeof want, "return (const unsigned short *)((const char *)lt_scratch + %dLL) + lt_wi;",
           MMA_COUNTERS);
  assert_contains(code, want);
  snprintf(want, sizeof want, "lt_mma_pack<2, 2048LL, %lld>(", (long long)((MMA_COUNTERS + 2 * copy) / 4));
  assert_contains(code, want);
  compilation_free(c);
  /* bf16 weights: no copies, A's planes right after the counters */
  c = compilation_new(TARGET_CUDA, NULL);
  if (!compile_source(c, "x: f32[seq,2048]; w: bf16[96,2048]; y = linear(x, w)", ST_CODE, &d))
    fail_msg("compile failed: %s", d.msg);
  m = c->kernel->kernels[0].alt->body->body[0]->mma;
  assert_int_equal(m->wq_at[0], -1);
  assert_int_equal(m->planes_at, MMA_COUNTERS);
  assert_int_equal(c->kernel->kernels[0].alt->lib->w_at[0], -1);
  assert_null(strstr(sb_str(&c->code), "lt_mma_dequant<"));
  compilation_free(c);
  /* along the columns (matmul of a [k][n] weight): no GEMM, the rows variant reads the blocks */
  char *cc = code_of(TARGET_CUDA, "x: f32[seq,64]; w: q8_0[64,32]; y = matmul(x, w)");
  assert_null(strstr(cc, "lt_mma_dequant<"));
  assert_null(strstr(cc, "_mma("));
  free(cc);
}

/* Host programs over the generated decoders: the headers and f16 conversion the quantized source expects
 * (lt_qhalf's LT_HALF; normal, subnormal, inf/nan) */
static const char HOST_PRELUDE[] =
    "#include <stdio.h>\n#include <string.h>\n#include <stdlib.h>\n#include <math.h>\n#include <stdint.h>\n"
    "static float lt_f16_to_f32(uint16_t h) {\n"
    "  unsigned s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023, u;\n"
    "  if (e == 31) u = s << 31 | 255u << 23 | m << 13;\n"
    "  else if (e) u = s << 31 | (e + 112) << 23 | m << 13;\n"
    "  else { float f = (float)m / 16777216.0f; memcpy(&u, &f, 4); u |= s << 31; }\n"
    "  float f; memcpy(&f, &u, 4); return f;\n}\n";

/* The CPU dot products' host programs: a seeded generator (x_, set by main) and rows of random blocks */
static const char HOST_RANDOM_BLOCKS[] =
    "static unsigned x_;\n"
    "static unsigned rnd(void) { x_ = x_ * 1103515245u + 12345u; return x_ >> 8; }\n"
    /* n blocks of random bytes, the f16 fields (offsets) set to scales of 2^-7 .. 2^-6, sign random */
    "static void random_blocks(unsigned char *w, int n, int bytes, const int *halves, int nh) {\n"
    "  for (int i = 0; i < n * bytes; i++) w[i] = (unsigned char)rnd();\n"
    "  for (int i = 0; i < n; i++)\n"
    "    for (int h = 0; h < nh; h++) {\n"
    "      unsigned v = 0x2000u | (rnd() & 0x3ffu) | (rnd() & 1u) << 15;\n"
    "      w[i * bytes + halves[h]] = (unsigned char)v, w[i * bytes + halves[h] + 1] = (unsigned char)(v >> 8);\n"
    "    }\n"
    "}\n";

/* The CUDA decoders compiled for the host (the CUDA intrinsics as plain f32 operations, no contraction):
 * lt_dq8_FORMAT(p, i) gives lt_dq_FORMAT(p, i + j) for every j, bit for bit, at every i = 8n of random blocks
 * (random bytes: any scale and bits), and lt_qd8_FORMAT(p, i, x) their dot product with x up to rounding. */
static void eight_at_once_equal_one_at_a_time(void **state) {
  (void)state;
  if (system("c++ --version >/dev/null 2>&1") != 0) skip();
  StrBuf b = {0};
  sb_puts(&b, HOST_PRELUDE);
  sb_puts(&b, "#define __device__\n#define __forceinline__ inline\n"
              "#define __fmul_rn(a, b) ((a) * (b))\n#define __fadd_rn(a, b) ((a) + (b))\n"
              "#define __fsub_rn(a, b) ((a) - (b))\n"
              "struct uint2 { unsigned x, y; };\n"
              "struct uint4 { unsigned x, y, z, w; };\n"
              "static float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }\n"
              "static unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {\n" /* PTX prmt, default mode */
              "  unsigned long long v = (unsigned long long)y << 32 | x; unsigned r = 0;\n"
              "  for (int n = 0; n < 4; n++) r |= (unsigned)(v >> (8 * ((s >> (4 * n)) & 7)) & 255) << (8 * n);\n"
              "  return r;\n}\n");
  rc_put_quant_source(&b, 1);
  sb_puts(
      &b,
      "static int same(float a, float b) { return !memcmp(&a, &b, 4) || (a != a && b != b); }\n"
      "#define CHECK(f, bytes, elems) {\\\n"
      "  for (long long i = 0; i < n * (elems) / 8 * 8 && i + 8 <= (long long)(n / (bytes)) * (elems); i += 8) {\\\n"
      "    float v[8]; lt_dq8_##f(buf, i, v);\\\n"
      "    for (int j = 0; j < 8; j++) if (!same(v[j], lt_dq_##f(buf, i + j))) {\\\n"
      "      printf(#f \" element %lld: %g != %g\\n\", i + j, v[j], lt_dq_##f(buf, i + j)); return 1; } } }\n"
      /* lt_qd8_FORMAT against the decoded elements times x in double: within 1e-5 of the sum of |w x| plus 1e-6 of
       * the largest value of the 32-element group times 32 times the sum of |x| (a scale times its bits less a
       * minimum can cancel, each term at most ~32 times the group's largest value); non-finite blocks skipped */
      "#define QCHECK(f, bytes, elems) {\\\n"
      "  for (long long i = 0; i + 8 <= (long long)(n / (bytes)) * (elems); i += 8) {\\\n"
      "    float x[8]; double ref = 0, mag = 0, sx = 0, wmax = 0;\\\n"
      "    for (int j = 0; j < 8; j++) {\\\n"
      "      x[j] = (float)((int)((i * 7 + j * 13) % 29) - 14) / 7.0f;\\\n"
      "      const double w = lt_dq_##f(buf, i + j); ref += w * x[j], mag += fabs(w * x[j]), sx += fabs(x[j]); }\\\n"
      "    for (long long g = i & ~31LL; g < (i & ~31LL) + 32; g++) wmax = fmax(wmax, fabs(lt_dq_##f(buf, g)));\\\n"
      "    if (!(mag < 1e30) || !(wmax < 1e30)) continue;\\\n"
      "    const double got = lt_qd8_##f(buf, i, x);\\\n"
      "    if (!(fabs(got - ref) <= 1e-5 * mag + 32e-6 * wmax * sx)) {\\\n"
      "      printf(#f \" dot at %lld: %.9g != %.9g\\n\", i, got, ref); return 1; } } }\n"
      "int main(void) {\n"
      "  static unsigned char raw[210 * 64 + 16]; const long long n = 210 * 64;\n"
      "  unsigned char *buf = raw; unsigned x = 12345;\n"
      "  for (long long i = 0; i < n; i++) { x = x * 1103515245u + 12345u; buf[i] = (unsigned char)(x >> 16); }\n"
      "  CHECK(q8_0, 34, 32) CHECK(q4_0, 18, 32) CHECK(q4_1, 20, 32) CHECK(q5_0, 22, 32)\n"
      "  CHECK(q5_1, 24, 32) CHECK(q4_k, 144, 256) CHECK(q5_k, 176, 256) CHECK(q6_k, 210, 256)\n"
      "  QCHECK(q8_0, 34, 32) QCHECK(q4_0, 18, 32) QCHECK(q4_1, 20, 32) QCHECK(q5_0, 22, 32)\n"
      "  QCHECK(q5_1, 24, 32) QCHECK(q4_k, 144, 256) QCHECK(q5_k, 176, 256) QCHECK(q6_k, 210, 256)\n"
      "  puts(\"ok\"); return 0;\n}\n");
  HostProg p;
  host_prog_write(&p, "dq8.cc", sb_str(&b));
  sb_free(&b);
  int rc = host_prog_run(&p, "c++ -O1 -ffp-contract=off -w", NULL);
  host_prog_remove(&p);
  assert_int_equal(rc, 0);
}

/* The CPU's integer dot products (lt_qdot_FORMAT over int16 activation blocks, and the tile form lt_qdott_FORMAT
 * over 8 rows of them) against the sum of the decoded weights (lt_dq_FORMAT_at) times the activations in double,
 * for every format, compiled as the CPU backend compiles generated code (SIMD: AVX-512 VNNI on this machine), for
 * AVX2 without AVX-512 and with the scalar fallback (LT_QDOT_SCALAR): within 1e-4 of the sum of |w * x| (int16 rounding
 * is at most 2^-16 of a block's largest activation), over rows of random blocks with sane scales. */
static void int_dots_match_decoded(void **state) {
  (void)state;
  if (system("cc --version >/dev/null 2>&1") != 0) skip();
  StrBuf b = {0};
  sb_puts(&b, HOST_PRELUDE);
  rc_put_quant_source(&b, 0);
  sb_puts(&b, HOST_RANDOM_BLOCKS);
  sb_puts(
      &b,
      /* weight row r (nb blocks) decoded times x in double; *mag: the sum of |w x| */
      "static double decoded_dot(const unsigned char *w, int r, int nb, int elems, int G,\n"
      "                          float (*at)(lt_qp, long long, int, int), const float *x, double *mag) {\n"
      "  double want = 0;\n"
      "  *mag = 0;\n"
      "  for (int k = 0; k < nb * elems; k++) {\n"
      "    double v = (double)at(w, (long long)r * nb + k / elems, k % elems / G, k % G) * x[k];\n"
      "    want += v, *mag += fabs(v);\n"
      "  }\n"
      "  return want;\n"
      "}\n"
      "static int check(const char *name, int bytes, int elems, const int *halves, int nh,\n"
      "                 float (*dot)(lt_qp, long long, int, const lt_q16x *), float (*at)(lt_qp, long long, int, int), int G) {\n"
      "  enum { NB = 3, ROWS = 7 };\n"
      "  static unsigned char w[ROWS * NB * 210];\n"
      "  static float x[NB * 256];\n"
      "  static lt_q16x q[NB * 8];\n"
      "  random_blocks(w, ROWS * NB, bytes, halves, nh);\n"
      "  for (int i = 0; i < NB * elems; i++) x[i] = (float)((int)(rnd() % 2001) - 1000) / 250.0f;\n"
      "  for (int i = 0; i < NB * elems / 32; i++) lt_q16_block(x + 32 * i, q + i);\n"
      "  for (int r = 0; r < ROWS; r++) {\n"
      "    double mag, want = decoded_dot(w, r, NB, elems, G, at, x, &mag);\n"
      "    double got = dot(w, (long long)r * NB, NB, q);\n"
      "    if (!(fabs(got - want) <= 1e-4 * mag)) { printf(\"%s row %d: %g, decoded %g\\n\", name, r, got, want); return 1; }\n"
      "  }\n"
      "  return 0;\n"
      "}\n"
      /* the tile form: 8 activation rows of different magnitudes (2^-3 .. 2^4) against each weight row */
      "static int check_tile(const char *name, int bytes, int elems, const int *halves, int nh,\n"
      "                      void (*dot)(lt_qp, long long, int, const lt_q16t *, float *),\n"
      "                      float (*at)(lt_qp, long long, int, int), int G) {\n"
      "  enum { NB = 3, ROWS = 7 };\n"
      "  static unsigned char w[ROWS * NB * 210];\n"
      "  static float x[8][NB * 256];\n"
      "  static lt_q16t q[NB * 8];\n"
      "  random_blocks(w, ROWS * NB, bytes, halves, nh);\n"
      "  for (int t = 0; t < 8; t++) {\n"
      "    for (int i = 0; i < NB * elems; i++) x[t][i] = (float)((int)(rnd() % 2001) - 1000) / 2000.0f * (float)(1 << t);\n"
      "    lt_q16t_row(x[t], q, t, NB * elems / 32);\n"
      "  }\n"
      "  for (int r = 0; r < ROWS; r++) {\n"
      "    float got[8];\n"
      "    dot(w, (long long)r * NB, NB, q, got);\n"
      "    for (int t = 0; t < 8; t++) {\n"
      "      double mag, want = decoded_dot(w, r, NB, elems, G, at, x[t], &mag);\n"
      "      if (!(fabs(got[t] - want) <= 1e-4 * mag)) {\n"
      "        printf(\"%s tile row %d, activation row %d: %g, decoded %g\\n\", name, r, t, got[t], want);\n"
      "        return 1;\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "  return 0;\n"
      "}\n"
      "#define CHECK(f, bytes, elems, G, ...) { const int h[] = {__VA_ARGS__};\\\n"
      "  if (check(#f, bytes, elems, h, (int)(sizeof h / sizeof h[0]), lt_qdot_##f, lt_dq_##f##_at, G)) return 1;\\\n"
      "  if (check_tile(#f, bytes, elems, h, (int)(sizeof h / sizeof h[0]), lt_qdott_##f, lt_dq_##f##_at, G)) return 1; }\n"
      "int main(void) {\n"
      "  x_ = 12345;\n"
      "  CHECK(q8_0, 34, 32, 32, 0) CHECK(q4_0, 18, 32, 16, 0) CHECK(q4_1, 20, 32, 16, 0, 2)\n"
      "  CHECK(q5_0, 22, 32, 16, 0) CHECK(q5_1, 24, 32, 16, 0, 2) CHECK(q4_k, 144, 256, 32, 0, 2)\n"
      "  CHECK(q5_k, 176, 256, 32, 0, 2) CHECK(q6_k, 210, 256, 16, 208)\n"
      "  puts(\"ok\"); return 0;\n}\n");
  HostProg p;
  host_prog_write(&p, "qdot.c", sb_str(&b));
  sb_free(&b);
  /* native (AVX-512 here), AVX2 without AVX-512 (the tile form's 256-bit path), scalar */
  const char *forms[] = {"", "-mno-avx512f", "-DLT_QDOT_SCALAR"};
  for (int i = 0; i < 3; i++) {
    char compile[128];
    snprintf(compile, sizeof compile, "cc -O2 -march=native -std=c11 -w %s", forms[i]);
    if (host_prog_run(&p, compile, NULL) != 0)
      fail_msg("integer dot products (%s) differ from the decoded weights", forms[i][0] ? forms[i] : "SIMD");
  }
  host_prog_remove(&p);
}

/* A text file's whole content (NULL if unreadable); the caller frees it. */
static char *read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *s = calloc(1, 1 << 16);
  size_t n = s ? fread(s, 1, (1 << 16) - 1, f) : 0;
  fclose(f);
  if (s) s[n] = '\0';
  return s;
}

/* Program src (freed) built with the backend's flags on this machine's SIMD, on AVX2 (-mno-avx512f) and scalar
 * (-DLT_QDOT_SCALAR); each run must succeed (else `what` and its output) and print the same text of `len` bytes. */
static void three_builds_agree(StrBuf *src, const char *name, const char *what, int len) {
  HostProg p;
  host_prog_write(&p, name, sb_str(src));
  sb_free(src);
  const char *forms[] = {"", "-mno-avx512f", "-DLT_QDOT_SCALAR"};
  char out[3][128];
  for (int i = 0; i < 3; i++) {
    char compile[320];
    snprintf(out[i], sizeof out[i], "%s/out%d", p.dir, i);
    snprintf(compile, sizeof compile,
             "cc -O3 -march=native -std=c11 -fno-math-errno -fassociative-math -fno-signed-zeros -fno-trapping-math "
             "-ffp-contract=fast -mprefer-vector-width=512 -w %s",
             forms[i]);
    if (host_prog_run(&p, compile, out[i]) != 0) fail_msg("%s (%s): %s", what, forms[i][0] ? forms[i] : "SIMD", out[i]);
  }
  char *a = read_text(out[0]), *c = read_text(out[1]), *e = read_text(out[2]);
  assert_non_null(a);
  assert_non_null(c);
  assert_non_null(e);
  assert_int_equal((int)strlen(a), len);
  assert_string_equal(a, c);
  assert_string_equal(a, e);
  free(a);
  free(c);
  free(e);
  for (int i = 0; i < 3; i++) unlink(out[i]);
  host_prog_remove(&p);
}
/* A row's quantized dot product is the same bits in every form that computes it: lt_qdot (one activation row, the
 * decode form) and lt_qdott (a tile of 8 rows, the batched and prefill form), each compiled as generated code is
 * (AVX-512 VNNI and BW here), for AVX2 alone and with the scalar fallback. So a sequence's logits do not depend on
 * the rows that share its step, nor on the machine. The flags are the CPU backend's (-fassociative-math among them:
 * the scales' products must not be regrouped). Every format, rows of random blocks, 8 activation rows of different
 * magnitudes. */
static void int_dot_forms_agree_bitwise(void **state) {
  (void)state;
  StrBuf b = {0};
  rc_put_quant_source(&b, 0);
  assert_contains(sb_str(&b), "lt_dot_nib(b + 4, z, z, 0, x->q), lt_qscale(_mm_cvtss_f32(dm), x->d)");
  assert_contains(sb_str(&b), "lt_dot16(lt_w16s(b + 2), lt_w16s(b + 18), x->q)");
  if (system("cc --version >/dev/null 2>&1") != 0) {
    sb_free(&b);
    skip();
  }
  StrBuf src = {0};
  sb_puts(&src, HOST_PRELUDE);
  sb_puts(&src, sb_str(&b));
  sb_free(&b);
  sb_puts(&src, HOST_RANDOM_BLOCKS);
  sb_puts(
      &src,
      "static int rows(const char *name, int bytes, int elems, const int *halves, int nh,\n"
      "                float (*dot)(lt_qp, long long, int, const lt_q16x *),\n"
      "                void (*dott)(lt_qp, long long, int, const lt_q16t *, float *)) {\n"
      "  enum { NB = 5, ROWS = 9 };\n"
      "  static unsigned char w[ROWS * NB * 210];\n"
      "  static float x[8][NB * 256];\n"
      "  static lt_q16x q[8][NB * 8];\n"
      "  static lt_q16t qt[NB * 8];\n"
      "  random_blocks(w, ROWS * NB, bytes, halves, nh);\n"
      "  for (int t = 0; t < 8; t++) {\n"
      "    for (int i = 0; i < NB * elems; i++) x[t][i] = (float)((int)(rnd() % 2001) - 1000) / 300.0f * (float)(1 << t);\n"
      "    for (int i = 0; i < NB * elems / 32; i++) lt_q16_block(x[t] + 32 * i, q[t] + i);\n"
      "    lt_q16t_row(x[t], qt, t, NB * elems / 32);\n"
      "  }\n"
      "  for (int r = 0; r < ROWS; r++) {\n"
      "    float tile[8];\n"
      "    dott(w, (long long)r * NB, NB, qt, tile);\n"
      "    for (int t = 0; t < 8; t++) {\n"
      "      float v = dot(w, (long long)r * NB, NB, q[t]);\n"
      "      unsigned u, ut;\n"
      "      memcpy(&u, &v, 4), memcpy(&ut, &tile[t], 4);\n"
      "      if (u != ut) { printf(\"%s row %d, activation row %d: alone %.9g, in a tile %.9g\\n\", name, r, t, v, tile[t]); return 1; }\n"
      "      printf(\"%08x\\n\", u);\n"
      "    }\n"
      "  }\n"
      "  return 0;\n"
      "}\n"
      "#define ROWS(f, bytes, elems, ...) { const int h[] = {__VA_ARGS__};\\\n"
      "  if (rows(#f, bytes, elems, h, (int)(sizeof h / sizeof h[0]), lt_qdot_##f, lt_qdott_##f)) return 1; }\n"
      "int main(void) {\n"
      "  x_ = 777;\n"
      "  ROWS(q8_0, 34, 32, 0) ROWS(q4_0, 18, 32, 0) ROWS(q4_1, 20, 32, 0, 2) ROWS(q5_0, 22, 32, 0)\n"
      "  ROWS(q5_1, 24, 32, 0, 2) ROWS(q4_k, 144, 256, 0, 2) ROWS(q5_k, 176, 256, 0, 2) ROWS(q6_k, 210, 256, 208)\n"
      "  return 0;\n}\n");
  /* 8 formats x 9 rows x 8 activation rows, 9 characters a line */
  three_builds_agree(&src, "forms.c", "the tile form differs from the row form", 8 * 9 * 8 * 9);
}

/* The CPU's f16 dot products (render_hdot.c: lt_hdot over one f32 activation row, lt_hdott over a tile of 8, lt_hdottm
 * over a tile for LT_HROWS weight rows, each as lt_hdott alone, and lt_hdott_pc walking the rows through its cache)
 * against
 * the sum of the converted weights times the activations in double (within 1e-5 of the sum of |w x|: f32 rounding of
 * 16 lanes over 256 elements), and the same bits in every form: alone or in a tile, with AVX-512 (vcvtph2ps of 16
 * halves), AVX2 with F16C (8) and the scalar fallback (lt_f16_to_f32), compiled with the CPU backend's flags
 * (-fassociative-math among them: the lanes' tree must not be regrouped). Weight rows of random halves between 2^-6
 * and 2^6 of both signs, subnormals among them; 8 activation rows of different magnitudes. */
static void half_dots_match_and_agree(void **state) {
  (void)state;
  StrBuf b = {0};
  rc_put_rowcache_head(&b);
  rc_put_hdot_source(&b);
  assert_contains(sb_str(&b), "_mm512_cvtph_ps(_mm256_loadu_si256(");
  assert_contains(sb_str(&b), "_mm256_cvtph_ps(_mm_loadu_si128(");
  if (system("cc --version >/dev/null 2>&1") != 0) {
    sb_free(&b);
    skip();
  }
  StrBuf src = {0};
  sb_puts(&src, HOST_PRELUDE);
  sb_puts(&src, sb_str(&b));
  sb_free(&b);
  sb_puts(&src, HOST_RANDOM_BLOCKS);
  sb_puts(
      &src,
      /* 256 elements a row, and 1184: AVX2's three-row form takes rows of more than 640 in steps of 512 (two whole
       * steps and a part) */
      "enum { NMAX = 1184, ROWS = 9, SPARE = 4 }; /* SPARE >= LT_HROWS in every form, so all draw the same values */\n"
      "static unsigned short w[(ROWS + SPARE) * NMAX];\n"
      "static float x[8][NMAX], tile[8 * NMAX];\n"
      "static int rows(int N) {\n"
      "  for (int i = 0; i < (ROWS + SPARE) * N; i++)\n"
      "    w[i] = (unsigned short)((rnd() & 0x83ffu) | (i % 97 ? 9 + rnd() % 13 : 0) << 10);\n"
      "  for (int t = 0; t < 8; t++) {\n"
      "    for (int i = 0; i < N; i++) x[t][i] = (float)((int)(rnd() % 2001) - 1000) / 300.0f * (float)(1 << t);\n"
      "    lt_htile_row(x[t], tile, t, N);\n"
      "  }\n"
      "  lt_hpair pc = {0};\n"
      "  for (int r = 0; r < ROWS; r++) {\n"
      "    float got[8], first[8], more[LT_HROWS - 1][8], walked[8];\n"
      "    lt_hdottm(w + r * N, N, tile, first, more);\n"
      "    for (int j = 0; j < LT_HROWS - 1; j++) {\n"
      "      lt_hdott(w + (r + 1 + j) * N, N, tile, got);\n"
      "      if (memcmp(more[j], got, sizeof got)) { printf(\"n %d, row %d: the group's row %d differs\\n\", N, r, j + 1); return 1; }\n"
      "    }\n"
      "    lt_hdott(w + r * N, N, tile, got);\n"
      "    if (memcmp(first, got, sizeof got)) { printf(\"n %d, row %d: the group's first row differs\\n\", N, r); return 1; }\n"
      /* rows in order through the cache, the weights ending at row ROWS (its last rows one at a time) */
      "    lt_hdott_pc(w + r * N, N, tile, walked, &pc, (double)N, w + ROWS * N);\n"
      "    if (memcmp(walked, got, sizeof got)) { printf(\"n %d, row %d: through the row cache it differs\\n\", N, r); return 1; }\n"
      "    for (int t = 0; t < 8; t++) {\n"
      "      double want = 0, mag = 0;\n"
      "      for (int i = 0; i < N; i++) {\n"
      "        double v = (double)lt_f16_to_f32(w[r * N + i]) * x[t][i];\n"
      "        want += v, mag += fabs(v);\n"
      "      }\n"
      "      float v = lt_hdot(w + r * N, N, x[t]);\n"
      "      unsigned u, ut;\n"
      "      memcpy(&u, &v, 4), memcpy(&ut, &got[t], 4);\n"
      "      if (!(fabs(v - want) <= 1e-5 * mag)) { printf(\"n %d, row %d, activation row %d: %g, want %g\\n\", N, r, t, v, want); return 1; }\n"
      "      if (u != ut) { printf(\"n %d, row %d, activation row %d: alone %.9g, in a tile %.9g\\n\", N, r, t, v, got[t]); return 1; }\n"
      "      printf(\"%08x\\n\", u);\n"
      "    }\n"
      "  }\n"
      "  return 0;\n"
      "}\n"
      "int main(void) {\n"
      "  x_ = 4242;\n"
      "  return rows(256) || rows(1184);\n"
      "}\n");
  three_builds_agree(&src, "hdot.c", "f16 dot products are wrong",
                     2 * 9 * 8 * 9); /* 2 sizes x 9 rows x 8 activation rows */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(cpu_projection_reads_blocks),
      cmocka_unit_test(element_reads_elsewhere),
      cmocka_unit_test(cuda_gemv_decodes_eight_at_once),
      cmocka_unit_test(cuda_qgemv_when_asked),
      cmocka_unit_test(eight_at_once_equal_one_at_a_time),
      cmocka_unit_test(cuda_prefill_gemm_reads_bf16_copies),
      cmocka_unit_test(int_dots_match_decoded),
      cmocka_unit_test(int_dot_forms_agree_bitwise),
      cmocka_unit_test(half_dots_match_and_agree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
