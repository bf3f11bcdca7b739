/* Kernel templates (src/code/templates/ *.cuh, embedded at build time): each compiles standalone under
 * NVRTC for sm_90 after the CUDA preamble, instantiated with representative constants and expression
 * functions, and the embedded text is the file's. */
#include <stdio.h>
#include <stdlib.h>
#include "testutil.h"
#include "backend/nvrtc.h"
#include "code/templates.h"

/* Instantiations that make NVRTC compile each template's code (a template that is never instantiated
 * is only parsed). Every template needs one: a new .cuh without it fails test_every_template_known. */
static const struct {
  const char *name, *after;
} uses[] = {
    {"preamble.cuh", ""},
    {"sampler.cuh", ""},
    {"mma.cuh",
     /* one weight with hi + lo planes, bk 32 and split k; two weights sharing A, one plane, bk 16; the
      * pre-pass and the library epilogue at both */
     "extern \"C\" __global__ void g1(float *y, const unsigned short *w, i64 n, unsigned int *lt_scratch) {\n"
     "  auto fw = [&](i64 nn, i64 k) -> const unsigned short * { return w + nn * 256 + k; };\n"
     "  auto fst = [&](i64 m, i64 nn, float a0, float a1) { y[m * 512 + nn] = a0; };\n"
     "  lt_mma<1, 2, 32, 2, 256LL, 512LL, true, 1024>(n, lt_scratch, fw, fw, fst);\n"
     "}\n"
     "extern \"C\" __global__ void g2(float *y, const unsigned short *wa, const unsigned short *wb, i64 n,\n"
     "                              unsigned int *lt_scratch) {\n"
     "  auto fa = [&](i64 nn, i64 k) -> const unsigned short * { return wa + nn * 64 + k; };\n"
     "  auto fb = [&](i64 nn, i64 k) -> const unsigned short * { return wb + nn * 64 + k; };\n"
     "  auto fst = [&](i64 m, i64 nn, float a0, float a1) { y[m * 96 + nn] = a0 * a1; };\n"
     "  lt_mma<2, 1, 16, 4, 64LL, 96LL, false, 1024>(n, lt_scratch, fa, fb, fst);\n"
     "}\n"
     "extern \"C\" __global__ void p1(const float *x, i64 n, unsigned int *lt_scratch) {\n"
     "  auto fa = [&](i64 m, i64 k) -> float { return x[m * 256 + k] * 2.0f; };\n"
     "  lt_mma_pack<2, 256LL, 1024>(n, lt_scratch, fa);\n"
     "  lt_mma_pack<1, 256LL, 1024>(n, lt_scratch, fa);\n"
     "}\n"
     "extern \"C\" __global__ void e1(float *y, i64 n, unsigned int *lt_scratch) {\n"
     "  auto r0 = [&](i64 nn) -> i64 { return nn; };\n"
     "  auto r1 = [&](i64 nn) -> i64 { return nn / 2; };\n"
     "  auto fst = [&](i64 m, i64 nn, float a0, float a1) { y[m * 96 + nn] = a0 + a1; };\n"
     "  lt_mma_epilogue<1, 2, 64LL, 96LL, 1024, 0LL, 96LL, 0LL, 0LL>(n, lt_scratch, r0, r0, fst);\n"
     "  lt_mma_epilogue<2, 1, 64LL, 96LL, 1024, 0LL, 96LL, 96LL, 48LL>(n, lt_scratch, r0, r1, fst);\n"
     "}\n"},
    {"flash.cuh",
     /* hi + lo planes with a causal end, head dimension 128; one plane, no mask, width 16 */
     "extern \"C\" __global__ void k1(float *y, const float *q, const float *k, const float *v, i64 n) {\n"
     "  auto fq = [&](i64 gi, i64 m, i64 d) -> float { return q[(gi * n + m) * 128 + d]; };\n"
     "  auto fk = [&](i64 gi, i64 t, i64 d) -> float { return k[(gi / 2 * n + t) * 128 + d]; };\n"
     "  auto fv = [&](i64 gi, i64 t, i64 cc) -> float { return v[(gi / 2 * n + t) * 128 + cc]; };\n"
     "  auto ftl = [&](i64 gi, i64 m) -> i64 { return m; };\n"
     "  auto fs = [&](i64 gi, i64 m, i64 t, float s) -> float { return t > m ? -__int_as_float(0x7f800000) : s; };\n"
     "  auto fst = [&](i64 gi, i64 m, i64 cc, float o) { y[(gi * n + m) * 128 + cc] = o; };\n"
     "  lt_flash<2, 128, 128, 4LL, true>(n, n, fq, fk, fv, ftl, fs, fst);\n"
     "}\n"
     "extern \"C\" __global__ void k2(float *y, const float *q, const float *k, const float *v, i64 n) {\n"
     "  auto fq = [&](i64 gi, i64 m, i64 d) -> float { return q[m * 32 + d]; };\n"
     "  auto fk = [&](i64 gi, i64 t, i64 d) -> float { return k[t * 32 + d]; };\n"
     "  auto fv = [&](i64 gi, i64 t, i64 cc) -> float { return v[t * 16 + cc]; };\n"
     "  auto ftl = [&](i64 gi, i64 m) -> i64 { return 0; };\n"
     "  auto fs = [&](i64 gi, i64 m, i64 t, float s) -> float { return s * 0.5f; };\n"
     "  auto fst = [&](i64 gi, i64 m, i64 cc, float o) { y[m * 16 + cc] = o; };\n"
     "  lt_flash<1, 32, 16, 1LL, false>(n, n, fq, fk, fv, ftl, fs, fst);\n"
     "}\n"},
    {"qgemv.cuh",
     /* one q4_k weight, 4 warps a block; gate and up in q4_k and q6_k, 16 warps; q8_0 and q5_1 gate and up, 1 warp */
     "extern \"C\" __global__ void q1(float *y, const float *x, const unsigned char *w, i64 n) {\n"
     "  auto fa = [&](i64 m, i64 k) -> float { return x[m * 512 + k]; };\n"
     "  auto fw = [&](i64 nn) -> const unsigned char * { return w + nn * 288; };\n"
     "  auto fst = [&](i64 m, i64 nn, float a0, float a1) { y[m * 96 + nn] = a0; };\n"
     "  lt_qgemv<1, LT_QG_Q4_K, LT_QG_Q4_K, 4, 512LL, 96LL, true>(n, fa, fw, fw, fst);\n"
     "}\n"
     "extern \"C\" __global__ void q2(float *y, const float *x, const unsigned char *a, const unsigned char *b, i64 n) {\n"
     "  auto fa = [&](i64 m, i64 k) -> float { return x[m * 512 + k] * 2.0f; };\n"
     "  auto fw0 = [&](i64 nn) -> const unsigned char * { return a + nn * 288; };\n"
     "  auto fw1 = [&](i64 nn) -> const unsigned char * { return b + nn * 420; };\n"
     "  auto fst = [&](i64 m, i64 nn, float a0, float a1) { y[m * 96 + nn] = a0 * a1; };\n"
     "  lt_qgemv<2, LT_QG_Q4_K, LT_QG_Q6_K, 16, 512LL, 96LL, true>(n, fa, fw0, fw1, fst);\n"
     "  lt_qgemv<2, LT_QG_Q8_0, LT_QG_Q5_1, 1, 512LL, 96LL, false>(n, fa, fw0, fw1, fst);\n"
     "}\n"},
    {"flash_decode.cuh",
     /* several heads per block, chunks merged (lt_C > 1 at run time), a causal end, phases of P x V;
      * and one head, no mask, head and value widths that are no power of two */
     "extern \"C\" __global__ void k1(float *y, const float *q, const float *k, const float *v, i64 n,\n"
     "                              unsigned int *lt_scratch) {\n"
     "  auto fq = [&](i64 rb, int r, i64 d) -> float { return q[(rb * 4 + r) * 64 + d]; };\n"
     "  auto fk = [&](i64 rb, i64 t, i64 d) -> float { return k[(rb * n + t) * 64 + d]; };\n"
     "  auto fv = [&](i64 rb, i64 cc, i64 t) -> float { return v[(rb * n + t) * 64 + cc]; };\n"
     "  auto ftl = [&](i64 rb) -> i64 { return n - 2; };\n"
     "  auto fs = [&](i64 rb, int r, i64 t, float s) -> float { return s * 0.125f; };\n"
     "  auto fst = [&](i64 rb, int r, i64 cc, float o) { y[(rb * 4 + r) * 64 + cc] = o; };\n"
     "  lt_flash_decode<64, 64, 4, 2LL, 1024, true>(1, n, lt_scratch, fq, fk, fv, ftl, fs, fst);\n"
     "}\n"
     "extern \"C\" __global__ void k2(float *y, const float *q, const float *k, const float *v, i64 n,\n"
     "                              unsigned int *lt_scratch) {\n"
     "  auto fq = [&](i64 rb, int r, i64 d) -> float { return q[rb * 100 + d]; };\n"
     "  auto fk = [&](i64 rb, i64 t, i64 d) -> float { return k[t * 100 + d]; };\n"
     "  auto fv = [&](i64 rb, i64 cc, i64 t) -> float { return v[t * 100 + cc]; };\n"
     "  auto ftl = [&](i64 rb) -> i64 { return 0; };\n"
     "  auto fs = [&](i64 rb, int r, i64 t, float s) -> float { return s; };\n"
     "  auto fst = [&](i64 rb, int r, i64 cc, float o) { y[rb * 100 + cc] = o; };\n"
     "  lt_flash_decode<100, 100, 1, 6LL, 1024, false>(3, n, lt_scratch, fq, fk, fv, ftl, fs, fst);\n"
     "}\n"},
};

static const char *instantiation(const char *name) {
  for (size_t i = 0; i < sizeof uses / sizeof *uses; i++)
    if (!strcmp(uses[i].name, name)) return uses[i].after;
  return NULL;
}

static void test_every_template_known(void **state) {
  int n = 0;
  for (const struct EmbeddedFile *t = lt_embedded; t->name; t++, n++)
    if (strncmp(t->name, "prior", 5) && !instantiation(t->name))
      fail_msg("template %s has no instantiation in tests/test_templates.c", t->name);
  assert_true(n >= 3);
}

static void test_embedded_text_is_the_file(void **state) {
  for (const struct EmbeddedFile *t = lt_embedded; t->name; t++) {
    char path[256];
    /* the table also carries the tuner's priors (goldens/prior.json, goldens/prior-cuda.json, tune/prior.c) */
    if (!strncmp(t->name, "prior", 5)) snprintf(path, sizeof path, "goldens/%s", t->name);
    else snprintf(path, sizeof path, "src/code/templates/%s", t->name);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s (run from the repository root)", path);
    char *buf = malloc(t->size + 2);
    size_t n = fread(buf, 1, t->size + 1, f);
    fclose(f);
    assert_int_equal(n, t->size);
    assert_int_equal(strlen(t->text), t->size);
    assert_memory_equal(buf, t->text, t->size);
    free(buf);
  }
}

static void test_templates_compile(void **state) {
  for (const struct EmbeddedFile *t = lt_embedded; t->name; t++) {
    const char *after = instantiation(t->name);
    if (!after) continue;
    /* the sampler is a complete program of its own; the others use the preamble's helpers */
    int own = !strcmp(t->name, "sampler.cuh") || !strcmp(t->name, "preamble.cuh");
    char *src = NULL;
    if (asprintf(&src, "%s%s%s", own ? "" : lt_embed_preamble, t->text, after) < 0) abort();
    Diag d = {0};
    void *cubin = NULL;
    size_t size = 0;
    if (!nvrtc_compile(src, "sm_90", &cubin, &size, &d)) fail_msg("%s: NVRTC failed: %s", t->name, d.msg);
    assert_true(size > 0);
    free(cubin);
    free(src);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_template_known),
      cmocka_unit_test(test_embedded_text_is_the_file),
      cmocka_unit_test(test_templates_compile),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
