/* CUDA's quantized GEMV (code/templates/qgemv.cuh) run on the host: the template compiled as C++ with every thread
 * of a block a host thread, warp shuffles, barriers and the integer MMA emulated (the MMA by the fragment layout of
 * PTX's mma.m16n8k32, which session 22's probe confirmed on an H100). Each format, gate and up in one kernel and
 * mixed formats, a k with a partial last step, columns past the last block's 16, several activation rows and warps:
 * every output against the float64 sum of lathe's own decoded weights (lt_dq_FORMAT) times the activations, within
 * the 24-bit activations' rounding. So CI checks what the kernel computes, not only that it compiles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "host_prog_testutil.h"
#include "code/render_common.h"
#include "code/templates.h"

/* The CUDA names the template uses, for the host: one block at a time, `__shared__` arrays static (shared by the
 * block's threads), threadIdx per host thread */
static const char HOST_CUDA[] =
    "#include <stdio.h>\n#include <string.h>\n#include <stdlib.h>\n#include <math.h>\n#include <stdint.h>\n"
    "#include <thread>\n#include <mutex>\n#include <condition_variable>\n#include <vector>\n"
    "typedef long long i64;\n"
    "struct uint2 { unsigned x, y; };\nstruct uint4 { unsigned x, y, z, w; };\n"
    "struct lt_dim { unsigned x; };\n"
    "static thread_local lt_dim threadIdx;\nstatic lt_dim blockIdx;\n"
    "#define __device__\n#define __forceinline__ inline\n#define __shared__ static\n"
    "#define __align__(n) __attribute__((aligned(n)))\n"
    "#define __fmul_rn(a, b) ((a) * (b))\n#define __fadd_rn(a, b) ((a) + (b))\n#define __fsub_rn(a, b) ((a) - (b))\n"
    "static float lt_f16_to_f32(uint16_t h) {\n"
    "  unsigned s = (h >> 15) & 1, e = (h >> 10) & 31, m = h & 1023, u;\n"
    "  if (e == 31) u = s << 31 | 255u << 23 | m << 13;\n"
    "  else if (e) u = s << 31 | (e + 112) << 23 | m << 13;\n"
    "  else { float f = (float)m / 16777216.0f; memcpy(&u, &f, 4); u |= s << 31; }\n"
    "  float f; memcpy(&f, &u, 4); return f;\n}\n"
    "static float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }\n"
    "static int __float_as_int(float f) { int u; memcpy(&u, &f, 4); return u; }\n"
    "static float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }\n"
    "static unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {\n"
    "  unsigned long long v = (unsigned long long)y << 32 | x; unsigned r = 0;\n"
    "  for (int n = 0; n < 4; n++) r |= (unsigned)(v >> (8 * ((s >> (4 * n)) & 7)) & 255) << (8 * n);\n"
    "  return r;\n}\n"
    "static unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned sh) {\n"
    "  return (unsigned)((((unsigned long long)hi << 32) | lo) >> (sh & 31));\n}\n"
    "static void lt_pdl(void) {}\n"
    /* a barrier of n threads, reusable */
    "struct Bar {\n"
    "  std::mutex m; std::condition_variable cv; int n = 0, count = 0, gen = 0;\n"
    "  void wait() { std::unique_lock<std::mutex> l(m); int g = gen;\n"
    "    if (++count == n) { count = 0, gen++, cv.notify_all(); } else cv.wait(l, [&] { return gen != g; }); }\n"
    "};\n"
    "static Bar blk_bar, warp_bar[16];\n"
    "static unsigned long long slot[16][32][6];\n"
    "static inline int lane_(void) { return (int)threadIdx.x & 31; }\n"
    "static inline int warp_(void) { return (int)threadIdx.x >> 5; }\n"
    "static void __syncthreads(void) { blk_bar.wait(); }\n"
    "static void __syncwarp(void) { warp_bar[warp_()].wait(); }\n"
    "template <class T> static T lt_shfl(T v, int src) {\n"
    "  unsigned long long u = 0; memcpy(&u, &v, sizeof v); slot[warp_()][lane_()][0] = u; __syncwarp();\n"
    "  u = slot[warp_()][src][0]; __syncwarp(); T r; memcpy(&r, &u, sizeof r); return r;\n}\n"
    "template <class T> static T __shfl_xor_sync(unsigned, T v, int o) { return lt_shfl(v, lane_() ^ o); }\n"
    "static bool __all_sync(unsigned, bool p) {\n"
    "  int all = p;\n"
    "  for (int o = 1; o < 32; o <<= 1) { const int got = lt_shfl(all, lane_() ^ o); all = all && got; }\n"
    "  return all != 0;\n}\n"
    "template <class T> static T __shfl_down_sync(unsigned, T v, int d) {\n"
    "  return lt_shfl(v, lane_() + d < 32 ? lane_() + d : lane_());\n}\n"
    /* mma.m16n8k32 (A 16 x 32 bytes row-major, B 32 x 8 col-major, C 16 x 8 int32): lane (g, t) holds a0 = A[g][4t..],
     * a1 = A[g + 8][4t..], a2 = A[g][16 + 4t..], a3 = A[g + 8][16 + 4t..], b0 = B[4t..][g], b1 = B[16 + 4t..][g],
     * c = C[g][2t], C[g][2t + 1], C[g + 8][2t], C[g + 8][2t + 1] */
    "static int lt_byte(unsigned w, int i, bool sgn) { int v = (int)(w >> (8 * i) & 255u); return sgn && v > 127 ? v - 256 : v; }\n"
    "static void host_mma(bool sa, int *c, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {\n"
    "  const int w = warp_(), l = lane_();\n"
    "  const unsigned in[6] = {a0, a1, a2, a3, b0, b1};\n"
    "  for (int i = 0; i < 6; i++) slot[w][l][i] = in[i];\n"
    "  __syncwarp();\n"
    "  const int g = l >> 2, t = l & 3;\n"
    "  for (int r = 0; r < 4; r++) {\n"
    "    const int row = g + 8 * (r >> 1), col = 2 * t + (r & 1);\n"
    "    long long s = 0;\n"
    "    for (int k = 0; k < 32; k++) {\n"
    "      const int kt = (k & 15) >> 2, hi = k >= 16;\n"
    "      const int a = lt_byte((unsigned)slot[w][4 * (row & 7) + kt][(row >= 8) + 2 * hi], k & 3, sa);\n"
    "      const int b = lt_byte((unsigned)slot[w][4 * col + kt][4 + hi], k & 3, true);\n"
    "      s += (long long)a * b;\n"
    "    }\n"
    "    c[r] = (int)s;\n"
    "  }\n"
    "  __syncwarp();\n}\n"
    "#define LT_QG_HOST_MMA(S, c, a0, a1, a2, a3, b0, b1) host_mma(S, c, a0, a1, a2, a3, b0, b1)\n";

/* One case: NB weights of formats F0/F1, W warps, k = K, NT columns, M activation rows; its weights' random blocks,
 * the activations (one in 37 large), the kernel on the host, every output checked. */
static const char HOST_MAIN[] =
    "static unsigned x_ = 7;\n"
    "static unsigned rnd(void) { x_ = x_ * 1103515245u + 12345u; return x_ >> 8; }\n"
    "static void blocks(unsigned char *w, long long n, int bytes, const int *halves, int nh) {\n"
    "  for (long long i = 0; i < n * bytes; i++) w[i] = (unsigned char)rnd();\n"
    "  for (long long i = 0; i < n; i++)\n"
    "    for (int h = 0; h < nh; h++) {\n"
    "      unsigned v = 0x2000u | (rnd() & 0x3ffu) | (rnd() & 1u) << 15;\n"
    "      w[i * bytes + halves[h]] = (unsigned char)v, w[i * bytes + halves[h] + 1] = (unsigned char)(v >> 8);\n"
    "    }\n"
    "}\n"
    "struct Fmt { int be, bb, nh, halves[2]; float (*dq)(lt_qp, long long); };\n"
    "static const Fmt FMT[8] = {{32, 34, 1, {0}, lt_dq_q8_0}, {32, 18, 1, {0}, lt_dq_q4_0}, {32, 20, 2, {0, 2}, lt_dq_q4_1},\n"
    "  {32, 22, 1, {0}, lt_dq_q5_0}, {32, 24, 2, {0, 2}, lt_dq_q5_1}, {256, 144, 2, {0, 2}, lt_dq_q4_k},\n"
    "  {256, 176, 2, {0, 2}, lt_dq_q5_k}, {256, 210, 1, {208}, lt_dq_q6_k}};\n"
    "template <int NB, int F0, int F1, int W, i64 K, i64 NT>\n"
    "static int run_case(int M, int nan_at = -1) {\n"
    "  const int F[2] = {F0, F1};\n"
    "  std::vector<unsigned char> wb[2];\n"
    "  for (int b = 0; b < NB; b++) {\n"
    "    const Fmt &f = FMT[F[b]];\n"
    "    wb[b].resize((size_t)(NT * K / f.be * f.bb));\n"
    "    blocks(wb[b].data(), NT * K / f.be, f.bb, f.halves, f.nh);\n"
    "  }\n"
    "  std::vector<float> x((size_t)(M * K)), out((size_t)(2 * M * NT), NAN);\n"
    "  for (size_t i = 0; i < x.size(); i++) x[i] = ((int)(rnd() % 2001) - 1000) * (i % 37 == 5 ? 3e-2f : 1e-3f);\n"
    "  if (nan_at >= 0) x[(size_t)nan_at] = NAN;\n"
    "  const unsigned char *w0p = wb[0].data(), *w1p = wb[NB - 1].data();\n"
    "  const i64 rb0 = K / FMT[F0].be * FMT[F0].bb, rb1 = K / FMT[F1].be * FMT[F1].bb;\n"
    "  auto a = [&](i64 m, i64 k) -> float { return x[(size_t)(m * K + k)]; };\n"
    "  auto w0 = [&](i64 n) -> const unsigned char * { return w0p + n * rb0; };\n"
    "  auto w1 = [&](i64 n) -> const unsigned char * { return w1p + n * rb1; };\n"
    "  auto store = [&](i64 m, i64 n, float s0, float s1) { out[(size_t)(m * NT + n)] = s0, out[(size_t)((M + m) * NT + n)] = s1; };\n"
    "  const int grid = M * (int)((NT + 15) / 16);\n"
    "  blk_bar.n = 32 * W;\n"
    "  for (int i = 0; i < W; i++) warp_bar[i].n = 32;\n"
    "  for (int bk = 0; bk < grid; bk++) {\n"
    "    blockIdx.x = (unsigned)bk;\n"
    "    std::vector<std::thread> th;\n"
    "    for (int tid = 0; tid < 32 * W; tid++)\n"
    "      th.emplace_back([&, tid] { threadIdx.x = (unsigned)tid; lt_qgemv<NB, F0, F1, W, K, NT, false>((i64)M, a, w0, w1, store); });\n"
    "    for (auto &t : th) t.join();\n"
    "  }\n"
    "  for (int b = 0; b < NB; b++)\n"
    "    for (int m = 0; m < M; m++)\n"
    "      for (i64 n = 0; n < NT; n++) {\n"
    "        const unsigned char *row = b ? w1(n) : w0(n);\n"
    "        double ref = 0, wabs = 0, xmax = 0;\n"
    "        for (i64 k = 0; k < K; k++) {\n"
    "          const double wv = FMT[F[b]].dq(row, k);\n"
    "          ref += wv * x[(size_t)(m * K + k)], wabs += fabs(wv), xmax = fmax(xmax, fabs(x[(size_t)(m * K + k)]));\n"
    "        }\n"
    /* each activation rounded to 2^-23 of its step's largest (at most the row's), the sums in f32 */
    "        const double got = out[(size_t)((b * M + m) * NT + n)], tol = 4e-7 * wabs * xmax + 1e-6 * fabs(ref);\n"
    "        if (ref != ref ? got == got : !(fabs(got - ref) <= tol)) { /* a NaN activation: a NaN output */\n"
    "          printf(\"NB=%d F=%d,%d W=%d K=%lld NT=%lld M=%d: weight %d row %d column %lld: %.9g, want %.9g (tolerance %.3g)\\n\",\n"
    "                 NB, F0, F1, W, (long long)K, (long long)NT, M, b, m, (long long)n, got, ref, tol);\n"
    "          return 1;\n"
    "        }\n"
    "      }\n"
    "  return 0;\n"
    "}\n"
    "int main(void) {\n"
    "  int bad = 0;\n"
    /* every format, gate and up: k 576 (32-element formats: a last step of 64) or 512, 20 columns, 2 rows, 2 warps */
    "  bad |= run_case<2, 0, 0, 2, 576, 20>(2); bad |= run_case<2, 1, 1, 2, 576, 20>(2);\n"
    "  bad |= run_case<2, 2, 2, 2, 576, 20>(2); bad |= run_case<2, 3, 3, 2, 576, 20>(2);\n"
    "  bad |= run_case<2, 4, 4, 2, 576, 20>(2); bad |= run_case<2, 5, 5, 2, 512, 20>(2);\n"
    "  bad |= run_case<2, 6, 6, 2, 512, 20>(2); bad |= run_case<2, 7, 7, 2, 512, 20>(2);\n"
    /* mixed formats (a Q4_K_M file's gate and up), one weight, one warp, more warps than steps, 16 warps */
    "  bad |= run_case<2, 5, 7, 4, 1024, 40>(1); bad |= run_case<1, 7, 7, 1, 768, 16>(1);\n"
    "  bad |= run_case<1, 0, 0, 8, 288, 33>(3); bad |= run_case<2, 4, 4, 16, 4096, 32>(1);\n"
    /* a NaN in the first row's activations: that row's outputs NaN, the second row's right */
    "  bad |= run_case<2, 5, 7, 2, 512, 16>(2, 300);\n"
    "  if (!bad) puts(\"ok\");\n"
    "  return bad;\n"
    "}\n";

static void qgemv_on_the_host(void **state) {
  (void)state;
  if (system("c++ --version >/dev/null 2>&1") != 0) skip();
  StrBuf b = {0};
  sb_puts(&b, HOST_CUDA);
  rc_put_quant_source(&b, 1);
  sb_puts(&b, lt_embed_qgemv);
  sb_puts(&b, HOST_MAIN);
  HostProg p;
  host_prog_write(&p, "qgemv.cc", sb_str(&b));
  sb_free(&b);
  const int rc = host_prog_run(&p, "c++ -std=c++17 -O1 -ffp-contract=off -w -pthread", NULL);
  host_prog_remove(&p);
  assert_int_equal(rc, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(qgemv_on_the_host)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
